//! Small AES jobs run on the submitting thread (docs/ALGORITHM.md §15.6): byte-exact against
//! the one-shot references in every mode, key size and submission call; resolved by the time
//! the call returns; counted; typed errors as on the node path; the limit's edges; and a
//! waker on a worker thread that can now wait for a small job.
//!
//! The known answers through the inline path are in `tests/service/vectors.rs`
//! (`aes_cavp_records_run_inline`) and `tests/service/gcm.rs`; the property tests
//! (`tests/service/props.rs`, `tests/failover.rs`) draw the limit.

use crate::common;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use common::{Gen, SubmittingWaker, block_on, node_packets, plain_ops, ref_aes, ref_gcm_seal};
use cryptodispatch::crypto::AesImpl;
use cryptodispatch::error::CryptoError;
use cryptodispatch::{
    AesOp, Direction, Job, JobError, JobOutput, KeyId, Mode, NodeSpec, Padding, Service,
    ServiceBuilder, SubmitError, TenantSpec,
};

fn service(limit: usize) -> Service {
    Service::builder()
        .aes_cluster([NodeSpec::new(), NodeSpec::new()])
        .inline_limit(limit)
        .build()
        .unwrap()
}

/// Runs one AES job through `s` and checks its output against the reference.
fn run_one(s: &Service, (key, raw): (KeyId, &[u8]), op: AesOp, iv: &[u8], data: &[u8]) {
    let out = s
        .submit(Job::aes(key, op, iv, data.to_vec()))
        .unwrap()
        .wait();
    let want = ref_aes(raw, op, iv, data).unwrap();
    assert_eq!(
        out,
        Ok(JobOutput::Data(want)),
        "{op:?} of {} bytes",
        data.len()
    );
}

/// Runs one job through `run` and says where it ran: on the submitting thread (`true`) or as one
/// packet on a node (`false`); anything else fails the test.
fn ran_inline(s: &Service, run: impl FnOnce()) -> bool {
    let before = (s.metrics().jobs_inline, node_packets(s));
    run();
    let after = (s.metrics().jobs_inline, node_packets(s));
    match (after.0 - before.0, after.1 - before.1) {
        (1, 0) => true,
        (0, 1) => false,
        other => panic!("one job counted as {other:?} (inline, node packets)"),
    }
}

#[test]
fn in_a_service_shared_between_tenants_small_jobs_go_to_the_nodes() {
    // Run inline, a small job would take no turn: two backlogged tenants of small jobs would
    // share their submitters' threads rather than the nodes by weight (docs/ALGORITHM.md
    // §15.6). Once a tenant is registered, every call sends it to a node, byte-exact.
    let s = service(ServiceBuilder::DEFAULT_INLINE_LIMIT);
    let mut g = Gen::new(78);
    let raw = g.bytes(16);
    let key = s.add_aes_key(&raw).unwrap();
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let (iv, input, expected) = case(&mut g, &raw, op, 512);
    let job = || Job::aes(key, op, &iv, input.clone());
    let want = Ok(JobOutput::Data(expected.clone()));
    // Not shared yet: inline.
    assert!(ran_inline(&s, || assert_eq!(
        s.submit(job()).unwrap().wait(),
        want
    )));
    let team = s.add_tenant(TenantSpec::new("team").weight(3)).unwrap();
    for tenant in [None, Some(team)] {
        let job = || match tenant {
            Some(t) => job().tenant(t),
            None => job(),
        };
        let what = format!("tenant {tenant:?}");
        let submit = || assert_eq!(s.submit(job()).unwrap().wait(), want, "{what}: submit");
        assert!(!ran_inline(&s, submit), "{what}: submit");
        let try_submit = || assert_eq!(s.try_submit(job()).unwrap().wait(), want, "{what}: try");
        assert!(!ran_inline(&s, try_submit), "{what}: try");
        let run_async = || {
            let (h, _) = block_on(s.submit_async(job()));
            assert_eq!(block_on(h.unwrap()).0, want, "{what}: async");
        };
        assert!(!ran_inline(&s, run_async), "{what}: async");
        let burst = || {
            let mut h = s.submit_burst([job()]).unwrap();
            assert_eq!(h.pop().unwrap().wait(), want, "{what}: burst");
        };
        assert!(!ran_inline(&s, burst), "{what}: burst");
    }
    let m = s.metrics();
    assert_eq!((m.jobs_inline, m.jobs_completed, m.jobs_failed), (1, 9, 0));
}

/// A job's input for `op` of about `len` bytes, and the reference output.
fn case(g: &mut Gen, raw: &[u8], op: AesOp, len: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let iv = g.bytes(16);
    let input = match (op.mode.needs_whole_blocks(), op.padding, op.direction) {
        // A padded decryption takes a valid padded ciphertext.
        (_, Padding::Pkcs7, Direction::Decrypt) => {
            let enc = AesOp::new(Direction::Encrypt, op.mode).with_padding(Padding::Pkcs7);
            ref_aes(raw, enc, &iv, &g.bytes(len)).unwrap()
        }
        (true, Padding::None, _) => g.bytes(len / 16 * 16),
        _ => g.bytes(len),
    };
    let expected = ref_aes(raw, op, &iv, &input).unwrap();
    (iv, input, expected)
}

#[test]
fn every_mode_and_key_size_runs_inline_byte_exact_through_every_call() {
    let s = service(ServiceBuilder::DEFAULT_INLINE_LIMIT);
    let mut g = Gen::new(77);
    let mut jobs = 0u64;
    for key_len in [16, 24, 32] {
        let raw = g.bytes(key_len);
        let key = s.add_aes_key(&raw).unwrap();
        for op in plain_ops() {
            for len in [0, 1, 15, 16, 17, 100, 512, 1000] {
                let (iv, input, expected) = case(&mut g, &raw, op, len);
                let what = format!("{op:?} of {} bytes, {key_len}-byte key", input.len());
                let job = || Job::aes(key, op, &iv, input.clone());
                let h = s.submit(job()).unwrap();
                assert!(h.is_finished(), "{what}: resolved when submit returns");
                assert!(h.latency().is_some(), "{what}: latency");
                assert_eq!(
                    h.wait(),
                    Ok(JobOutput::Data(expected.clone())),
                    "{what}: submit"
                );
                let h = s.try_submit(job()).unwrap();
                assert_eq!(
                    h.wait(),
                    Ok(JobOutput::Data(expected.clone())),
                    "{what}: try"
                );
                let (h, _) = block_on(s.submit_async(job()));
                let (out, stats) = block_on(h.unwrap());
                assert_eq!(stats.polls, 1, "{what}: ready at the first poll");
                assert_eq!(out, Ok(JobOutput::Data(expected.clone())), "{what}: async");
                let burst = s.submit_burst([job(), job()]).unwrap();
                for h in burst {
                    assert_eq!(
                        h.wait(),
                        Ok(JobOutput::Data(expected.clone())),
                        "{what}: burst"
                    );
                }
                jobs += 5;
            }
        }
    }
    let m = s.metrics();
    assert!(jobs > 1000);
    assert_eq!(m.jobs_inline, jobs);
    assert_eq!(
        (m.jobs_submitted, m.jobs_completed, m.jobs_failed),
        (jobs, jobs, 0)
    );
    assert_eq!((m.packets_admitted, m.packets_completed), (jobs, jobs));
    assert_eq!(node_packets(&s), 0, "no job reached a node");
}

#[test]
fn the_limit_counts_padding_and_jobs_beyond_it_go_to_a_node() {
    let limit = 256;
    let s = service(limit);
    let raw = [3u8; 16];
    let key = s.add_aes_key(&raw).unwrap();
    let pad = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
    let plain = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let iv = [9u8; 16];
    // (op, length, runs inline): 240 bytes pad to 256; 256 bytes pad to 272.
    let cases = [
        (plain, limit, true),
        (plain, limit + 16, false),
        (pad, limit - 16, true),
        (pad, limit, false),
    ];
    for (op, len, inline) in cases {
        let data = vec![5u8; len];
        let ran = ran_inline(&s, || run_one(&s, (key, &raw), op, &iv, &data));
        assert_eq!(ran, inline, "{op:?} of {len} bytes");
    }
    // A job of several packets never runs inline, however small the packets.
    let s = Service::builder()
        .aes_cluster([NodeSpec::new()])
        .packet_size(32)
        .build()
        .unwrap();
    let key = s.add_aes_key(&raw).unwrap();
    let data = vec![1u8; 64];
    run_one(&s, (key, &raw), plain, &iv, &data);
    assert_eq!((s.metrics().jobs_inline, node_packets(&s)), (0, 2));
    // With the limit at 0 every job goes to a node, the empty one too.
    let s = service(0);
    let key = s.add_aes_key(&raw).unwrap();
    for len in [0, 16] {
        let data = vec![2u8; len];
        run_one(&s, (key, &raw), plain, &iv, &data);
    }
    assert_eq!((s.metrics().jobs_inline, node_packets(&s)), (0, 2));
}

#[test]
fn parallel_operations_run_inline_up_to_a_multiple_of_the_limit() {
    let limit = 256;
    let reach = limit * ServiceBuilder::PARALLEL_INLINE_FACTOR;
    let s = service(limit);
    let raw = [4u8; 16];
    let key = s.add_aes_key(&raw).unwrap();
    let iv = [7u8; 16];
    let ecb = AesOp::new(Direction::Encrypt, Mode::Ecb);
    let ecb_pad = ecb.with_padding(Padding::Pkcs7);
    let cbc_dec = AesOp::new(Direction::Decrypt, Mode::Cbc);
    let cfb_dec = AesOp::new(Direction::Decrypt, Mode::Cfb);
    let ofb_dec = AesOp::new(Direction::Decrypt, Mode::Ofb);
    // (op, length, runs inline). OFB is serial both ways: the plain limit.
    let cases = [
        (ecb, reach, true),
        (ecb, reach + 16, false),
        (ecb_pad, reach - 16, true),
        (ecb_pad, reach, false),
        (cbc_dec, reach, true),
        (cbc_dec, reach + 16, false),
        (cfb_dec, reach, true),
        (cfb_dec, reach + 1, false),
        (ofb_dec, limit, true),
        (ofb_dec, limit + 1, false),
    ];
    for (op, len, inline) in cases {
        let data = vec![6u8; len];
        let ran = ran_inline(&s, || run_one(&s, (key, &raw), op, &iv, &data));
        assert_eq!(ran, inline, "{op:?} of {len} bytes");
    }
    // GCM runs inline as far as the parallel operations when its implementation was measured
    // at least as fast as CTR's (ring's one call), else up to the plain limit; so does a
    // service whose implementation is pinned (it measured nothing) at the plain limit.
    let speed = |m: &cryptodispatch::Metrics, mode| {
        let op = AesOp::new(Direction::Encrypt, mode);
        let choice = m
            .aes_implementations
            .iter()
            .find(|c| c.op == op && !c.chained);
        choice
            .and_then(|c| c.ns_per_byte)
            .expect("a measured choice")
    };
    // Deciding the first GCM job's path measures both choices, which the metrics then list.
    let first = Job::gcm_encrypt(key, &[1; 12], Vec::new(), vec![0; 16]);
    s.submit(first).unwrap().wait().unwrap();
    let m = s.metrics();
    let gcm_reach = if speed(&m, Mode::Gcm) <= speed(&m, Mode::Ctr) {
        reach
    } else {
        limit
    };
    let pinned = Service::builder()
        .aes_cluster([NodeSpec::new(), NodeSpec::new()])
        .inline_limit(limit)
        .aes_implementation(AesImpl::RustCrypto)
        .build()
        .unwrap();
    let pinned_key = pinned.add_aes_key(&raw).unwrap();
    for (s, key, reach) in [(&s, key, gcm_reach), (&pinned, pinned_key, limit)] {
        for (len, inline) in [(reach, true), (reach + 1, false)] {
            let data = vec![0; len];
            let job = Job::gcm_encrypt(key, &[1; 12], Vec::new(), data.clone());
            let ran = ran_inline(s, || {
                let out = s.submit(job).unwrap().wait().unwrap();
                let (ct, tag) = ref_gcm_seal(&raw, &[1; 12], &[], &data);
                assert_eq!(
                    out,
                    JobOutput::Sealed {
                        ciphertext: ct,
                        tag
                    }
                );
            });
            assert_eq!(ran, inline, "GCM of {len} bytes, reach {reach}");
        }
    }
}

#[test]
fn inline_jobs_give_the_errors_the_node_path_gives() {
    let s = Service::builder()
        .aes_cluster([NodeSpec::new()])
        .ed25519_cluster([NodeSpec::new()])
        .build()
        .unwrap();
    let key = s.add_aes_key(&[1; 16]).unwrap();
    let signer = s.add_signing_key(&[2; 32]).unwrap();
    let cbc_dec = AesOp::new(Direction::Decrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
    // Bad padding: the job fails, nothing of the plaintext is released.
    let bad = s
        .submit(Job::aes(key, cbc_dec, &[0; 16], vec![7; 32]))
        .unwrap();
    assert_eq!(bad.wait(), Err(JobError::Crypto(CryptoError::BadPadding)));
    let m = s.metrics();
    assert_eq!((m.jobs_inline, m.jobs_failed, m.packets_failed), (1, 1, 1));
    // Refused at submission, as on the node path; nothing is counted.
    let gone = s.add_aes_key(&[3; 16]).unwrap();
    s.remove_key(gone).unwrap();
    let refused = [
        (Job::encrypt(key, Mode::Cbc, &[0; 16], vec![1; 15])),
        (Job::encrypt(key, Mode::Cbc, &[0; 8], vec![1; 16])),
        (Job::encrypt(signer, Mode::Ecb, &[], vec![1; 16])),
        (Job::encrypt(gone, Mode::Ecb, &[], vec![1; 16])),
    ];
    let want = [
        SubmitError::Crypto(CryptoError::NotBlockAligned { len: 15 }),
        SubmitError::Crypto(CryptoError::IvLength { got: 8 }),
        SubmitError::WrongKeyKind {
            key: signer,
            expected: "an AES key",
            got: "an Ed25519 signing key",
        },
        SubmitError::UnknownKey(gone),
    ];
    for (job, want) in refused.into_iter().zip(want) {
        assert_eq!(s.submit(job).unwrap_err(), want);
    }
    // A burst with one malformed job refuses the whole burst: nothing of it runs.
    let burst = [
        Job::encrypt(key, Mode::Ecb, &[], vec![1; 16]),
        Job::encrypt(key, Mode::Ecb, &[], vec![1; 15]),
    ];
    assert!(s.submit_burst(burst).is_err());
    assert_eq!(
        s.metrics().jobs_inline,
        1,
        "nothing of the refused burst ran"
    );
    assert_eq!(s.metrics().jobs_submitted, 1);
    // After shutdown, small jobs are refused like any.
    s.shutdown();
    assert_eq!(
        s.submit(Job::encrypt(key, Mode::Ecb, &[], vec![1; 16]))
            .unwrap_err(),
        SubmitError::ShutDown
    );
    assert_eq!(
        s.submit_burst([Job::encrypt(key, Mode::Ecb, &[], vec![1; 16])])
            .unwrap_err(),
        SubmitError::ShutDown
    );
}

#[test]
fn small_gcm_jobs_run_inline_and_a_bad_tag_releases_nothing() {
    let s = service(ServiceBuilder::DEFAULT_INLINE_LIMIT);
    let raw = [0x11u8; 32];
    let key = s.add_aes_key(&raw).unwrap();
    let nonce = [4u8; 12];
    let mut g = Gen::new(5);
    for len in [0, 1, 16, 100, 1024] {
        let pt = g.bytes(len);
        let aad = g.bytes(len % 7);
        let (ct, tag) = ref_gcm_seal(&raw, &nonce, &aad, &pt);
        let sealed = s.submit(Job::gcm_encrypt(key, &nonce, aad.clone(), pt.clone()));
        assert_eq!(
            sealed.unwrap().wait(),
            Ok(JobOutput::Sealed {
                ciphertext: ct.clone(),
                tag
            })
        );
        let opened = s.submit(Job::gcm_decrypt(key, &nonce, aad.clone(), ct.clone(), &tag));
        assert_eq!(opened.unwrap().wait(), Ok(JobOutput::Data(pt)));
        let mut forged = tag;
        forged[0] ^= 1;
        let refused = s.submit(Job::gcm_decrypt(key, &nonce, aad, ct, &forged));
        assert_eq!(
            refused.unwrap().wait(),
            Err(JobError::Crypto(CryptoError::AuthenticationFailed))
        );
    }
    let m = s.metrics();
    assert_eq!((m.jobs_inline, m.jobs_failed), (15, 5));
    assert_eq!(node_packets(&s), 0);
    assert_eq!(m.stored_states, 0);
}

#[test]
fn a_result_taken_once_is_not_given_again() {
    let s = service(ServiceBuilder::DEFAULT_INLINE_LIMIT);
    let key = s.add_aes_key(&[1; 16]).unwrap();
    let mut h = s
        .submit(Job::encrypt(key, Mode::Ecb, &[], vec![0; 16]))
        .unwrap();
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert!(matches!(Pin::new(&mut h).poll(&mut cx), Poll::Ready(Ok(_))));
    assert_eq!(
        Pin::new(&mut h).poll(&mut cx),
        Poll::Ready(Err(JobError::ResultTaken))
    );
    assert_eq!(
        h.wait_timeout(std::time::Duration::ZERO),
        Some(Err(JobError::ResultTaken))
    );
}

#[test]
fn a_timeout_past_the_clocks_range_waits_for_the_job() {
    // On the nodes (inline limit 0), so the wait is a real one; on both paths the longest
    // timeout is no error.
    for limit in [0, ServiceBuilder::DEFAULT_INLINE_LIMIT] {
        let s = service(limit);
        let key = s.add_aes_key(&[1; 16]).unwrap();
        let mut h = s
            .submit(Job::encrypt(key, Mode::Ecb, &[], vec![0; 16]))
            .unwrap();
        let out = h.wait_timeout(std::time::Duration::MAX);
        let op = AesOp::new(Direction::Encrypt, Mode::Ecb);
        let expected = ref_aes(&[1; 16], op, &[], &[0; 16]).unwrap();
        assert_eq!(
            out,
            Some(Ok(JobOutput::Data(expected))),
            "inline limit {limit}"
        );
        assert!(h.latency().is_some());
    }
}

#[test]
fn a_worker_thread_can_wait_for_a_small_job_it_runs_itself() {
    let service = Arc::new(
        Service::builder()
            .aes_cluster([NodeSpec::new().slowdown(20.0)])
            .build()
            .unwrap(),
    );
    let raw = [6u8; 16];
    let key = service.add_aes_key(&raw).unwrap();
    let waker = SubmittingWaker::new(&service, key);
    // A job big enough to go to the node (a serial one: a parallel one of 4 KiB runs inline),
    // whose completion runs the waker there.
    let mut h = service
        .submit(Job::encrypt(key, Mode::Cbc, &[0; 16], vec![4; 4096]))
        .unwrap();
    let w = Waker::from(Arc::clone(&waker));
    assert!(
        Pin::new(&mut h)
            .poll(&mut Context::from_waker(&w))
            .is_pending()
    );
    assert!(h.wait().is_ok());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while waker.outcome.lock().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the waker never ran");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let want = ref_aes(
        &raw,
        AesOp::new(Direction::Encrypt, Mode::Ecb),
        &[],
        &[1; 16],
    )
    .unwrap();
    assert_eq!(
        waker.outcome.lock().unwrap().take(),
        Some(Ok(JobOutput::Data(want))),
        "the small job ran on the worker thread and was waited for there"
    );
    drop(waker);
}
