//! Nodes fail and the service goes on (docs/ALGORITHM.md §15.2), checked with injected faults
//! (the `fault-injection` feature: `cargo test --features fault-injection --test failover`).
//!
//! The promise: every handle resolves; a job with no packet running on a failed node completes
//! correctly; a job whose packet was running there runs it again on another node, and fails
//! with `JobError::NodeFailed` naming the node only after `max_attempts` nodes failed under
//! it; when no node of a cluster is up, its waiting jobs fail with `JobError::NoNodeUp`; the
//! metrics account for every admitted packet; shutdown returns. A stream's chunks give correct
//! outputs until one fails so; after that its later chunks may fail too (their chaining state
//! went with the failed packet), but no output is ever wrong. When every node fails once and a
//! cluster always keeps a node up, every job succeeds with the right output. In half the cases
//! (by the seed) the jobs belong to two tenants and the light path is on, so that small ones
//! take it (docs/ALGORITHM.md §15.7) while nodes fail.

mod common;

use std::thread;
use std::time::Duration;

use common::{Gen, ed_sign, ref_aes, ref_gcm_seal};
use cryptodispatch::crypto::AesImpl;
use cryptodispatch::packet::{Mode, NodeId};
use cryptodispatch::runtime::NodeState;
use cryptodispatch::{
    Admission, AesOp, Affinity, Direction, Fault, Job, JobError, JobOutput, KeyId, Metrics,
    NodeSpec, Padding, PolicySpec, Service, ServiceBuilder, Stream, SubmitError, TenantId,
    TenantSpec,
};
use proptest::prelude::*;

/// The busy-machine test loads both cores with CPU-bound threads for a minute; the other tests
/// here judge stalls with short timeouts, so they do not run beside it: each holds this lock
/// shared, the busy test holds it alone.
static LOAD: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A share of [`LOAD`] (a test that failed while holding it does not poison the others).
fn calm() -> std::sync::RwLockReadGuard<'static, ()> {
    LOAD.read().unwrap_or_else(|e| e.into_inner())
}

/// What a job must give: its output, or, if a faulty node ran one of its packets, that
/// failure.
struct Expect {
    output: JobOutput,
}

/// A random AES job (ECB, CBC, OFB, CFB or CTR) of 0..=6 packets of 64 bytes, a GCM
/// encryption of up to 5 packets, or an Ed25519 signature.
fn job(
    g: &mut Gen,
    aes: cryptodispatch::KeyId,
    raw: &[u8],
    signer: cryptodispatch::KeyId,
    seed: &[u8; 32],
) -> (Job, Expect) {
    let pick = g.next_u64() % 10;
    if pick == 0 {
        let n = (g.next_u64() % 100) as usize;
        let msg = g.bytes(n);
        let output = JobOutput::Signature(ed_sign(seed, &msg));
        return (Job::sign(signer, msg), Expect { output });
    }
    if pick == 1 {
        // GCM: a chain of GHASH state when longer than a packet.
        let nonce = g.bytes(12);
        let aad_len = (g.next_u64() % 20) as usize;
        let aad = g.bytes(aad_len);
        let len = (g.next_u64() % 300) as usize;
        let pt = g.bytes(len);
        let (ciphertext, tag) = ref_gcm_seal(raw, &nonce, &aad, &pt);
        let output = JobOutput::Sealed { ciphertext, tag };
        return (Job::gcm_encrypt(aes, &nonce, aad, pt), Expect { output });
    }
    // ECB, CBC, OFB, CFB and CTR.
    let mode = Mode::ALL[(g.next_u64() % 5) as usize];
    let direction = if g.next_u64() % 3 == 0 {
        Direction::Decrypt
    } else {
        Direction::Encrypt
    };
    let blocks = (g.next_u64() % 25) as usize;
    let len = match mode {
        Mode::Ecb | Mode::Cbc => 16 * blocks,
        _ => 16 * blocks + (g.next_u64() % 16) as usize,
    };
    let op = AesOp::new(direction, mode).with_padding(Padding::None);
    let iv = g.bytes(16);
    let data = g.bytes(len);
    let output = JobOutput::Data(ref_aes(raw, op, &iv, &data).unwrap());
    (Job::aes(aes, op, &iv, data), Expect { output })
}

/// A stream of the run: what was pushed, chunk by chunk, to check its outputs against.
struct StreamCase {
    stream: Stream,
    op: AesOp,
    iv: Vec<u8>,
    chunks: Vec<Vec<u8>>,
}

impl StreamCase {
    /// Pushes `chunk` (or, with `last`, finishes with it); a chunk refused because no node is
    /// up is not part of the stream.
    fn send(&mut self, chunk: Vec<u8>, last: bool) {
        let sent = if last {
            self.stream.finish(chunk.clone())
        } else {
            self.stream.push(chunk.clone())
        };
        match sent {
            Ok(()) => self.chunks.push(chunk),
            Err(SubmitError::NoNodeUp(_)) => {}
            Err(e) => panic!("stream push: {e}"),
        }
    }

    /// Receives every output and checks it: correct until a chunk fails with a node failure
    /// (of a faulty node) or with no node up; after that, failures of the chain or correct
    /// output. Returns how many chunks a node failure failed, and how many failed in all.
    fn check(mut self, raw: &[u8], faulty: &[NodeId]) -> (usize, usize) {
        let expected = ref_aes(raw, self.op, &self.iv, &self.chunks.concat()).unwrap();
        let mut at = 0;
        let mut broken = false;
        let mut node_failed = 0;
        let mut errors = 0;
        for (i, chunk) in self.chunks.iter().enumerate() {
            let out = self
                .stream
                .recv()
                .expect("an output for every chunk pushed");
            let want = &expected[at..at + chunk.len()];
            at += chunk.len();
            errors += usize::from(out.is_err());
            match out {
                Ok(out) => assert_eq!(out, want, "stream chunk {i}: wrong output"),
                Err(JobError::NodeFailed(n)) => {
                    assert!(faulty.contains(&n), "{n} failed a chunk but had no fault");
                    node_failed += 1;
                    broken = true;
                }
                Err(JobError::NoNodeUp(_)) => broken = true,
                Err(JobError::StateLost(_)) if broken => {}
                Err(other) => {
                    panic!("stream chunk {i}: unexpected error {other} (broken: {broken})")
                }
            }
        }
        assert!(self.stream.recv().is_none(), "no output beyond the chunks");
        (node_failed, errors)
    }
}

/// The service's metrics once every admitted packet is accounted for and no chaining state is
/// stored, or as they are after ten seconds. A stream whose last chunk was refused (no node
/// up) is still open when it is dropped, and the drop closes its chain with an empty packet
/// of its own: that packet is admitted, and resolves, a moment after the stream's last output
/// was received.
fn settled(service: &Service) -> Metrics {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let m = service.metrics();
        let accounted = m.packets_completed + m.packets_failed == m.packets_admitted;
        if (accounted && m.stored_states == 0) || std::time::Instant::now() >= deadline {
            return m;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Builds a service of two AES nodes and one Ed25519 node with the given faults, runs `jobs`
/// random jobs through it, and checks the promise. With `inline`, the small AES jobs run on
/// the submitting thread (the default); without, every job goes to a node. Returns how many
/// jobs failed, and the metrics once every job resolved.
fn run(
    faults: [Option<Fault>; 3],
    jobs: usize,
    seed: u64,
    config: (&str, Affinity, Admission),
    inline: bool,
) -> (usize, Metrics) {
    run_on(&faults[..2], &faults[2..], jobs, seed, config, inline, None)
}

/// Injected panics print their message only: the default hook's backtrace (with
/// `RUST_BACKTRACE` set) keeps the dying worker busy for longer than the tests' stall timeout,
/// so its node would count as stalled before it counts as dead. Other panics are reported as
/// usual.
fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|m| m.starts_with("fault injected"));
            if injected {
                eprintln!("{info}");
            } else {
                default(info);
            }
        }));
    });
}

/// As [`run`], with an AES node per entry of `aes_faults` and an Ed25519 node per entry of
/// `ed_faults`; with `all_succeed` (packets tried on up to that many nodes), every job and every
/// stream chunk must succeed with the right output. With an odd seed, the service is shared
/// by two tenants, each job going to one of them at random, with the light path on.
fn run_on(
    aes_faults: &[Option<Fault>],
    ed_faults: &[Option<Fault>],
    jobs: usize,
    seed: u64,
    (policy, affinity, admission): (&str, Affinity, Admission),
    inline: bool,
    all_succeed: Option<u32>,
) -> (usize, Metrics) {
    quiet_injected_panics();
    let _calm = calm();
    let attempts = all_succeed.unwrap_or(ServiceBuilder::DEFAULT_MAX_ATTEMPTS);
    let all_succeed = all_succeed.is_some();
    let node = |f: &Option<Fault>| match f {
        Some(f) => NodeSpec::new().fault(*f),
        None => NodeSpec::new(),
    };
    let faults: Vec<Option<Fault>> = aes_faults.iter().chain(ed_faults).copied().collect();
    let mut builder = Service::builder()
        .packet_size(64)
        .aes_cluster(aes_faults.iter().map(node))
        .ed25519_cluster(ed_faults.iter().map(node))
        .policy(policy.parse::<PolicySpec>().unwrap())
        .affinity(affinity)
        .admission(admission)
        .stall_timeout(Duration::from_millis(40))
        .max_attempts(attempts)
        .light_path(seed % 2 == 1)
        .inline_limit(if inline {
            ServiceBuilder::DEFAULT_INLINE_LIMIT
        } else {
            0
        });
    // With the `openssl` feature, half the runs chain their GCM jobs on OpenSSL: a packet run
    // again after its node failed goes on from a state rebuilt on RustCrypto.
    if AesImpl::OpenSsl.is_built() && seed % 2 == 0 {
        builder = builder.aes_implementation(AesImpl::OpenSsl);
    }
    let service = builder.build().unwrap();
    let raw = [0x5B; 16];
    let aes = service.add_aes_key(&raw).unwrap();
    let seed_bytes = [0x6C; 32];
    let signer = service.add_signing_key(&seed_bytes).unwrap();
    let tenants: Vec<_> = if seed % 2 == 1 {
        ["a", "b"]
            .map(|name| service.add_tenant(TenantSpec::new(name)).unwrap())
            .to_vec()
    } else {
        Vec::new()
    };
    let mut g = Gen::new(seed);
    let mut streams: Vec<StreamCase> = [Mode::Cbc, Mode::Ofb, Mode::Cfb]
        .into_iter()
        .map(|mode| {
            let direction = if g.next_u64() % 2 == 0 {
                Direction::Encrypt
            } else {
                Direction::Decrypt
            };
            let op = AesOp::new(direction, mode).with_padding(Padding::None);
            let iv = g.bytes(16);
            StreamCase {
                stream: service.stream(aes, op, &iv).unwrap(),
                op,
                iv,
                chunks: Vec::new(),
            }
        })
        .collect();
    let mut handles = Vec::new();
    for _ in 0..jobs {
        if g.next_u64() % 5 == 0 {
            let s = (g.next_u64() % 3) as usize;
            let blocks = 1 + (g.next_u64() % 6) as usize;
            let chunk = g.bytes(16 * blocks);
            streams[s].send(chunk, false);
        }
        let (mut j, e) = job(&mut g, aes, &raw, signer, &seed_bytes);
        if !tenants.is_empty() {
            j = j.tenant(tenants[(g.next_u64() % 2) as usize]);
        }
        match service.submit(j) {
            Ok(h) => handles.push((h, e)),
            // The Ed25519 cluster has one node: while it is down, jobs are refused.
            Err(cryptodispatch::SubmitError::NoNodeUp(_)) => {}
            Err(e) => panic!("submit: {e}"),
        }
    }
    let faulty: Vec<NodeId> = faults
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f, Some(Fault::Panic { .. } | Fault::Stall { .. })))
        .map(|(i, _)| NodeId(i as u32))
        .collect();
    let mut failed = 0;
    let mut node_failed = 0;
    let mut checked = 0;
    for mut s in streams {
        // OFB and CFB streams may end in a partial block.
        let tail = match s.op.mode {
            Mode::Cbc => 16 * (g.next_u64() % 3) as usize,
            _ => (g.next_u64() % 40) as usize,
        };
        let chunk = g.bytes(tail);
        s.send(chunk, true);
        let sent = s.chunks.len();
        let (chunk_node_failed, chunk_failures) = s.check(&raw, &faulty);
        node_failed += chunk_node_failed;
        if all_succeed {
            // Every chunk was pushed (no cluster was ever down) and none failed.
            assert_eq!(chunk_failures, 0, "a stream chunk failed");
            assert!(sent > 0);
        }
    }
    for (h, e) in handles {
        match h.wait() {
            Ok(out) => {
                assert_eq!(out, e.output);
                checked += 1;
            }
            Err(JobError::NodeFailed(n)) => {
                assert!(faulty.contains(&n), "{n} failed a job but had no fault");
                assert!(!all_succeed, "a job failed: {n} failed under its packet");
                node_failed += 1;
                failed += 1;
            }
            Err(JobError::NoNodeUp(k)) => {
                assert!(
                    !all_succeed,
                    "a job failed: every node of the {k} cluster was down"
                );
                failed += 1;
            }
            Err(other) => panic!("unexpected job error: {other}"),
        }
    }
    // Each panic or stall hits only the packets running at that moment: one, or a lane set.
    assert!(
        node_failed <= faulty.len() * NodeSpec::DEFAULT_LANES,
        "{node_failed} jobs failed by {} faults",
        faulty.len()
    );
    let m = settled(&service);
    assert_eq!(
        m.packets_completed + m.packets_failed,
        m.packets_admitted,
        "every admitted packet accounted for: {m}"
    );
    assert_eq!(m.stored_states, 0, "a chaining state left behind: {m}");
    if !inline {
        assert_eq!(m.jobs_inline, 0, "{m}");
    }
    assert!(checked + failed > 0, "no job ran");
    if all_succeed {
        assert_eq!(
            (failed, node_failed),
            (0, 0),
            "every node failed once with another up: no job may fail: {m}"
        );
        assert_eq!(m.packets_out_of_attempts, 0, "{m}");
    }
    service.shutdown();
    (failed, m)
}

#[test]
fn a_panicking_worker_fails_at_most_its_running_packet_and_is_respawned() {
    let _calm = calm();
    let service = Service::builder()
        .packet_size(64)
        // One lane: the panic strikes one running packet (with lanes, a whole lane set runs).
        .aes_cluster([
            NodeSpec::new().lanes(1).fault(Fault::Panic { after: 5 }),
            NodeSpec::new(),
        ])
        .build()
        .unwrap();
    let raw = [1; 16];
    let key = service.add_aes_key(&raw).unwrap();
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let mut ok = 0;
    let mut failed = Vec::new();
    let data: Vec<Vec<u8>> = (0..200).map(|i| vec![i as u8; 64 * (1 + i % 4)]).collect();
    let handles: Vec<_> = data
        .iter()
        .map(|d| {
            service
                .submit(Job::aes(key, op, &[2; 16], d.clone()))
                .unwrap()
        })
        .collect();
    for (h, d) in handles.into_iter().zip(&data) {
        match h.wait() {
            Ok(out) => {
                assert_eq!(
                    out,
                    JobOutput::Data(ref_aes(&raw, op, &[2; 16], d).unwrap())
                );
                ok += 1;
            }
            Err(e) => failed.push(e),
        }
    }
    assert!(failed.len() <= 1, "{failed:?}");
    for e in &failed {
        assert_eq!(*e, JobError::NodeFailed(NodeId(0)));
    }
    assert_eq!(ok + failed.len(), 200);
    let m = service.metrics();
    assert_eq!(m.nodes[0].failures, 1, "{m}");
    assert_eq!(
        m.stored_states, 0,
        "a failed chain left its state behind: {m}"
    );
    // The respawned worker takes work again.
    let after: Vec<_> = (0..50)
        .map(|i| {
            service
                .submit(Job::aes(key, op, &[3; 16], vec![i; 64]))
                .unwrap()
        })
        .collect();
    for h in after {
        h.wait().unwrap();
    }
    // The new worker brings the node back at its first turn.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while service.metrics().nodes[0].state != NodeState::Up {
        assert!(
            std::time::Instant::now() < deadline,
            "node 0 never came back"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let m = service.metrics();
    assert!(m.nodes[0].restarts >= 1, "{m}");
    service.shutdown();
}

/// The packets of a GCM job cut into several, a GCM job of one packet on AWS-LC, and the
/// packets of ECB, CBC decryption and CTR on RustCrypto and on OpenSSL, and of CTR and CBC
/// decryption on AWS-LC (jobs of one packet among them), run out of place: their node keeps their input, shared, to run them again, rather
/// than a copy. A panic and a stall in the middle of such packets: they run again on the other
/// node from the input, and every output is exact; so it is with the service told to copy every
/// packet's input instead.
#[test]
fn packets_run_out_of_place_run_again_from_their_kept_input_after_a_panic_and_a_stall() {
    let _calm = calm();
    let faults = [
        Fault::Panic { after: 3 },
        Fault::Stall {
            after: 3,
            duration: Duration::from_millis(300),
        },
    ];
    let implementations = [
        AesImpl::RustCrypto,
        #[cfg(feature = "openssl")]
        AesImpl::OpenSsl,
        #[cfg(feature = "aws-lc")]
        AesImpl::AwsLc,
    ];
    let cases = faults.into_iter().flat_map(|f| [(f, true), (f, false)]);
    let cases = cases.flat_map(|c| implementations.map(|i| (c, i)));
    for ((fault, out_of_place), implementation) in cases {
        let builder = Service::builder()
            .aes_implementation(implementation)
            .aes_cluster([NodeSpec::new().lanes(1).fault(fault), NodeSpec::new()]);
        let raw = [5; 16];
        let what = format!("{fault:?} on {implementation}");
        rounds_until_struck(builder, &raw, &what, out_of_place, |service, key, round| {
            // Four packets each (three whole ones and a short last one), or one, which runs in
            // one call of AWS-LC out of place.
            let jobs: Vec<_> = (0..16u8)
                .map(|i| {
                    let nonce = [i, round, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
                    let len = if i % 4 == 0 { 40 } else { 64 * 3 + 17 };
                    let pt: Vec<u8> = (0..len).map(|b| (b as u8) ^ i ^ round).collect();
                    let aad = vec![i; usize::from(i % 5)];
                    let (ct, tag) = ref_gcm_seal(&raw, &nonce, &aad, &pt);
                    let sealing = service
                        .submit(Job::gcm_encrypt(key, &nonce, aad.clone(), pt.clone()))
                        .unwrap();
                    let opening = service
                        .submit(Job::gcm_decrypt(key, &nonce, aad, ct.clone(), &tag))
                        .unwrap();
                    (sealing, opening, pt, ct, tag)
                })
                .collect();
            // ECB both ways, CBC decryption and CTR, padded and not, beside them.
            let ops = [
                AesOp::new(Direction::Encrypt, Mode::Ecb),
                AesOp::new(Direction::Decrypt, Mode::Ecb).with_padding(Padding::None),
                AesOp::new(Direction::Decrypt, Mode::Cbc).with_padding(Padding::None),
                AesOp::new(Direction::Encrypt, Mode::Ctr),
            ];
            let plain: Vec<_> = (0..16u8)
                .map(|i| {
                    let op = ops[usize::from(i) % ops.len()];
                    // Some of one packet, whose output buffer is the job's as it is.
                    let len = match (i % 5, op.mode) {
                        (4, _) => 48,
                        (_, Mode::Ctr) => 64 * 3 + 9,
                        _ => 64 * 3 + 16,
                    };
                    let data: Vec<u8> = (0..len).map(|b| (b as u8) ^ i ^ round).collect();
                    let iv = [i ^ round; 16];
                    let want = ref_aes(&raw, op, &iv, &data).unwrap();
                    (service.submit(Job::aes(key, op, &iv, data)).unwrap(), want)
                })
                .collect();
            for (sealing, opening, pt, ciphertext, tag) in jobs {
                let sealed = Ok(JobOutput::Sealed { ciphertext, tag });
                assert_eq!(sealing.wait(), sealed, "{what}");
                assert_eq!(opening.wait(), Ok(JobOutput::Data(pt)), "{what}");
            }
            for (handle, want) in plain {
                assert_eq!(handle.wait(), Ok(JobOutput::Data(want)), "{what}");
            }
        });
    }
}

/// Builds the service of `builder` (packets of 64 bytes, none run on the submitting thread, a
/// stall judged after 50 ms, packets out of place or not as `out_of_place` says) with the AES
/// key `raw`, and runs `round` on it (which submits jobs and checks every output) round after
/// round until its node 0's fault has struck. Then checks that a packet ran again, that none
/// ran out of its attempts, and which way the nodes kept packets' inputs, as they count it:
/// some shared (out of place) with `out_of_place`, every one a copy without.
fn rounds_until_struck(
    builder: ServiceBuilder,
    raw: &[u8],
    what: &str,
    out_of_place: bool,
    mut round: impl FnMut(&Service, KeyId, u8),
) {
    let service = builder
        .packet_size(64)
        .out_of_place(out_of_place)
        .inline_limit(0)
        .stall_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let key = service.add_aes_key(raw).unwrap();
    let mut n = 0u8;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while service.metrics().nodes[0].failures == 0 {
        assert!(std::time::Instant::now() < deadline, "{what}: never struck");
        n = n.wrapping_add(1);
        round(&service, key, n);
    }
    let m = service.metrics();
    assert!(m.packets_retried >= 1, "{what}: {m}");
    assert_eq!(m.packets_out_of_attempts, 0, "{what}: {m}");
    let shared: u64 = m.nodes.iter().map(|n| n.out_of_place).sum();
    let copied: u64 = m.nodes.iter().map(|n| n.retry_copies).sum();
    if out_of_place {
        assert!(shared > 0, "{what}: {m:?}");
    } else {
        assert_eq!((shared, copied > 0), (0, true), "{what}: {m:?}");
    }
    service.shutdown();
}

/// A lane set's packets (CBC and CFB encryption, OFB both ways, of different jobs, on a node of
/// eight lanes) run out of place too, padded final packets among them: the lanes read each block
/// from the input the node keeps to run them again. A panic and a stall in the middle of lane
/// sets: their packets run again on the other node from that input, and every output is exact;
/// so it is with the service told to copy every packet's input instead.
#[test]
fn lane_sets_run_out_of_place_run_again_from_their_kept_input_after_a_panic_and_a_stall() {
    let _calm = calm();
    let faults = [
        Fault::Panic { after: 5 },
        Fault::Stall {
            after: 5,
            duration: Duration::from_millis(300),
        },
    ];
    let ops = [
        AesOp::new(Direction::Encrypt, Mode::Cbc),
        AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::None),
        AesOp::new(Direction::Encrypt, Mode::Ofb),
        AesOp::new(Direction::Decrypt, Mode::Ofb),
        AesOp::new(Direction::Encrypt, Mode::Cfb),
    ];
    for (fault, out_of_place) in faults.into_iter().flat_map(|f| [(f, true), (f, false)]) {
        let builder = Service::builder()
            .aes_implementation(AesImpl::Lanes { width: 8 })
            .aes_cluster([NodeSpec::new().lanes(8).fault(fault), NodeSpec::new()]);
        let raw = [6; 16];
        let what = format!("{fault:?}");
        rounds_until_struck(builder, &raw, &what, out_of_place, |service, key, round| {
            let (jobs, wants): (Vec<_>, Vec<_>) = (0..40u8)
                .map(|i| {
                    let op = ops[usize::from(i) % ops.len()];
                    // Jobs of one packet and of four; OFB and CFB ones end mid-block.
                    let whole = if i % 3 == 0 { 48 } else { 64 * 3 + 16 };
                    let len = match op.mode {
                        Mode::Ofb | Mode::Cfb => whole - 7,
                        _ => whole,
                    };
                    let data: Vec<u8> = (0..len).map(|b| (b as u8) ^ i ^ round).collect();
                    let iv = [i ^ round; 16];
                    let want = ref_aes(&raw, op, &iv, &data).unwrap();
                    (Job::aes(key, op, &iv, data), want)
                })
                .unzip();
            // In one burst, placed together: each node finds several packets waiting and runs
            // them as lane sets, whatever the submitting thread's pace (one `submit` each could
            // leave every set a packet alone, run on a copy, on a machine whose nodes keep up).
            let handles = service.submit_burst(jobs).unwrap();
            for (handle, want) in handles.into_iter().zip(wants) {
                assert_eq!(handle.wait(), Ok(JobOutput::Data(want)), "{what}");
            }
        });
    }
}

#[test]
fn an_exiting_worker_loses_nothing() {
    // An exit strikes between packets: nothing runs on the node then, so every job completes.
    for admission in [Admission::Fair, Admission::Fifo] {
        let (_, m) = run(
            [
                Some(Fault::Exit { after: 3 }),
                None,
                Some(Fault::Exit { after: 2 }),
            ],
            300,
            11,
            ("paper", Affinity::Strict, admission),
            true,
        );
        // The Ed25519 cluster's only node exits: jobs waiting then fail with NoNodeUp; the
        // AES jobs all complete (checked in `run`). Both exits struck, and the workers came
        // back.
        for n in [0, 2] {
            assert_eq!(m.nodes[n].failures, 1, "node {n}: {m}");
            assert!(m.nodes[n].restarts >= 1, "node {n}: {m}");
        }
    }
}

#[test]
fn a_stalled_node_is_taken_out_its_late_result_discarded_and_it_comes_back() {
    let _calm = calm();
    // One attempt (the old behaviour): the packet running when the node stalled fails its
    // job. Two (the default): it runs again on the other node, and every job completes.
    for attempts in [1, ServiceBuilder::DEFAULT_MAX_ATTEMPTS] {
        a_stalled_node_with(attempts);
    }
}

fn a_stalled_node_with(attempts: u32) {
    let service = Service::builder()
        .max_attempts(attempts)
        .packet_size(64)
        .aes_cluster([
            NodeSpec::new().fault(Fault::Stall {
                after: 2,
                duration: Duration::from_millis(400),
            }),
            NodeSpec::new(),
        ])
        // Every job goes to a node, so the stall strikes one of them.
        .inline_limit(0)
        .stall_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let raw = [9; 16];
    let key = service.add_aes_key(&raw).unwrap();
    let op = AesOp::new(Direction::Encrypt, Mode::Ecb);
    let mut failed = 0;
    // Rounds of 40 jobs until node 0 has run its three packets and stalled (the policy may
    // send a round's jobs to node 1 alone).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while service.metrics().nodes[0].stalls == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "node 0 never ran its third packet"
        );
        let handles: Vec<_> = (0..40u8)
            .map(|i| service.submit(Job::aes(key, op, &[], vec![i; 64])).unwrap())
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            match h.wait() {
                Ok(out) => assert_eq!(
                    out,
                    JobOutput::Data(ref_aes(&raw, op, &[], &[i as u8; 64]).unwrap())
                ),
                Err(e) => {
                    assert_eq!(e, JobError::NodeFailed(NodeId(0)));
                    failed += 1;
                }
            }
        }
    }
    // The packet running when the node stalled failed, or ran again on node 1; either way its
    // late result was discarded.
    let m = service.metrics();
    if attempts == 1 {
        assert_eq!(failed, 1);
        assert_eq!(
            (m.packets_retried, m.packets_out_of_attempts),
            (0, 1),
            "{m}"
        );
    } else {
        assert_eq!(failed, 0);
        assert_eq!(
            (m.packets_retried, m.packets_out_of_attempts),
            (1, 0),
            "{m}"
        );
    }
    assert_eq!((m.nodes[0].failures, m.nodes[0].stalls), (1, 1));
    assert_eq!(m.nodes[0].restarts, 0, "a stalled worker lives on");
    // After the stall the node comes back by itself.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while service.metrics().nodes[0].state != NodeState::Up {
        assert!(
            std::time::Instant::now() < deadline,
            "node 0 never came back"
        );
        let h = service.submit(Job::aes(key, op, &[], vec![0; 64])).unwrap();
        h.wait().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    service.shutdown();
}

/// A node coming back after a stall takes what waits for a node, up to its room: with a
/// backlog budget of two packets, all of it. A submitter blocked for room must then be woken.
/// Before, nothing woke it: the rejoining node emptied the backlog without a wake-up, and every
/// later completion found nothing left to place, so nothing counted as room freed, and the
/// submitter slept with both nodes idle.
#[test]
fn a_submitter_blocked_for_room_wakes_when_a_rejoining_node_takes_the_backlog() {
    let _calm = calm();
    let service = std::sync::Arc::new(
        Service::builder()
            .aes_cluster([
                // One packet at a time (so that only the one running fails), room for two
                // (so that, back, it takes the whole backlog at once).
                NodeSpec::new().lanes(1).slots(2).fault(Fault::Stall {
                    after: 0,
                    duration: Duration::from_millis(150),
                }),
                // Slow and one packet at a time, so that the backlog stays full while node 0
                // is out: about 0.3 ms a packet.
                NodeSpec::new().slowdown(100.0).slots(1),
            ])
            .receive_queue_len(2)
            .stall_timeout(Duration::from_millis(30))
            .build()
            .unwrap(),
    );
    let raw = [0x3C; 16];
    let key = service.add_aes_key(&raw).unwrap();
    // CBC encryption of 4 KiB: a serial operation past the inline limit, so on a node.
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let iv = [0x11; 16];
    const JOBS: u16 = 1000;
    let data = |i: u16| vec![i as u8; 4096];
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let submitter = {
        let service = std::sync::Arc::clone(&service);
        std::thread::spawn(move || {
            let handles: Vec<_> = (0..JOBS)
                .map(|i| service.submit(Job::aes(key, op, &iv, data(i))))
                .collect();
            let _ = done_tx.send(());
            handles
        })
    };
    if done_rx.recv_timeout(Duration::from_secs(30)).is_err() {
        // Free the submitter (shutdown wakes it with an error) before failing.
        service.shutdown();
        let _ = submitter.join();
        panic!("the submitter was still blocked for room after 30 s");
    }
    let mut failed = [0; 2];
    for (i, h) in (0..JOBS).zip(submitter.join().unwrap()) {
        match h.unwrap().wait() {
            Ok(out) => assert_eq!(
                out,
                JobOutput::Data(ref_aes(&raw, op, &iv, &data(i)).unwrap())
            ),
            Err(JobError::NodeFailed(n)) => failed[n.index()] += 1,
            Err(e) => panic!("job {i}: {e}"),
        }
    }
    // The packet running when node 0 stalled ran again on node 1: no job failed.
    assert_eq!(failed, [0, 0], "jobs failed by a node failure");
    let m = service.metrics();
    assert!(m.nodes[0].stalls >= 1, "{m}");
    assert!(m.packets_retried >= 1, "{m}");
    service.shutdown();
}

#[test]
fn a_cluster_with_no_node_up_fails_its_waiting_jobs_instead_of_hanging() {
    let _calm = calm();
    let service = Service::builder()
        .packet_size(64)
        .aes_cluster([NodeSpec::new()
            .slowdown(50.0)
            .fault(Fault::Panic { after: 1 })])
        .build()
        .unwrap();
    let key = service.add_aes_key(&[4; 16]).unwrap();
    let handles: Vec<_> = (0..30u8)
        .map(|i| service.submit(Job::encrypt(key, Mode::Ecb, &[], vec![i; 64 * 8])))
        .collect();
    let mut outcomes = (0, 0, 0);
    for h in handles {
        let h = match h {
            Ok(h) => h,
            Err(cryptodispatch::SubmitError::NoNodeUp(_)) => {
                outcomes.2 += 1;
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        match h.wait() {
            Ok(_) => outcomes.0 += 1,
            Err(JobError::NodeFailed(_)) => outcomes.1 += 1,
            Err(JobError::NoNodeUp(_)) => outcomes.2 += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(outcomes.0 + outcomes.1 + outcomes.2, 30);
    assert!(outcomes.1 <= 1);
    let m = service.metrics();
    assert_eq!(m.packets_completed + m.packets_failed, m.packets_admitted);
    service.shutdown();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn random_fault_plans_keep_the_promise(
        plan in prop::collection::vec(
            prop_oneof![
                Just(None),
                (0u64..20).prop_map(|after| Some(Fault::Panic { after })),
                (0u64..20).prop_map(|after| Some(Fault::Exit { after })),
                (0u64..20).prop_map(|after| Some(Fault::Stall { after, duration: Duration::from_millis(120) })),
            ],
            3,
        ),
        seed in any::<u64>(),
        policy in prop::sample::select(
            cryptodispatch::sched::policy::registry().iter().map(|e| e.name()).collect::<Vec<_>>()
        ),
        strict in any::<bool>(),
        fair in any::<bool>(),
        inline in any::<bool>(),
    ) {
        let affinity = if strict { Affinity::Strict } else { Affinity::InFlight };
        let admission = if fair { Admission::Fair } else { Admission::Fifo };
        let _ = run([plan[0], plan[1], plan[2]], 150, seed, (policy, affinity, admission), inline);
    }
}

/// One fault per node, of any kind, but at most one stall per cluster: a stalled node stays out
/// for the stall, a panicked or exited one only until its worker is restarted, so each cluster
/// of three always has a node up.
fn one_fault_each(kinds: &[u8], afters: &[u64], stall_at: Option<usize>) -> Vec<Option<Fault>> {
    kinds
        .iter()
        .zip(afters)
        .enumerate()
        .map(|(i, (&kind, &after))| {
            Some(if stall_at == Some(i) {
                Fault::Stall {
                    after,
                    duration: Duration::from_millis(120),
                }
            } else if kind % 2 == 0 {
                Fault::Panic { after }
            } else {
                Fault::Exit { after }
            })
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Every node fails once (panics, exits or stalls) while jobs and streams run: every packet
    /// running on a failed node runs again on another, so every job and every stream chunk
    /// succeeds with the right output. A packet may be running on each of its cluster's three
    /// nodes when each fails, so it is tried on up to four; with the default two, a packet
    /// hit by two unrelated faults fails its job (the bound on a packet that brings nodes
    /// down, checked in `a_poisonous_packet_fails_after_its_attempts`).
    #[test]
    fn when_every_node_fails_once_every_job_succeeds(
        aes_kinds in prop::collection::vec(any::<u8>(), 3),
        aes_after in prop::collection::vec(0u64..20, 3),
        aes_stall in prop::option::of(0usize..3),
        ed_kinds in prop::collection::vec(any::<u8>(), 3),
        ed_after in prop::collection::vec(0u64..3, 3),
        ed_stall in prop::option::of(0usize..3),
        seed in any::<u64>(),
        policy in prop::sample::select(
            cryptodispatch::sched::policy::registry().iter().map(|e| e.name()).collect::<Vec<_>>()
        ),
        strict in any::<bool>(),
        fair in any::<bool>(),
        inline in any::<bool>(),
    ) {
        let affinity = if strict { Affinity::Strict } else { Affinity::InFlight };
        let admission = if fair { Admission::Fair } else { Admission::Fifo };
        let aes = one_fault_each(&aes_kinds, &aes_after, aes_stall);
        let ed = one_fault_each(&ed_kinds, &ed_after, ed_stall);
        let (failed, m) =
            run_on(&aes, &ed, 300, seed, (policy, affinity, admission), inline, Some(4));
        prop_assert_eq!(failed, 0);
        // No node fails twice: the faults strike once, and nothing else looks like a failure.
        for n in &m.nodes {
            prop_assert!(n.failures <= 1, "{}", m);
        }
        prop_assert!(m.nodes.iter().any(|n| n.failures == 1), "no fault struck: {}", m);
    }
}

/// Eight CPU-bound threads beside four nodes slowed 100x, on two cores, for about a minute: the
/// nodes' threads wait for a CPU far longer than their packets' stall limits, yet no node is
/// taken out and no job fails, since a stall is judged by the time a thread could run, not by
/// wall time.
#[test]
fn a_busy_machine_is_not_mistaken_for_stalled_nodes() {
    let _alone = LOAD.write().unwrap_or_else(|e| e.into_inner());
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    let seconds: u64 = std::env::var("CRYPTODISPATCH_BUSY_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    // Two cores: the nodes' and the threads' (or all the machine has).
    let cores = core_affinity::get_core_ids().map_or(0, |c| c.len()).min(2);
    let node = |i: usize| match cores {
        0 => NodeSpec::new(),
        n => NodeSpec::pinned(i % n),
    };
    let service = Service::builder()
        .aes_cluster((0..4).map(|i| node(i).slowdown(100.0)))
        .max_attempts(1)
        .build()
        .unwrap();
    let raw = [0x2A; 16];
    let key = service.add_aes_key(&raw).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..8)
        .map(|i| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                // Pinned to the nodes' two cores where the system allows it.
                if let Some(core) =
                    core_affinity::get_core_ids().and_then(|c| c.get(i % cores.max(1)).copied())
                {
                    core_affinity::set_for_current(core);
                }
                let mut x = i as u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
                x
            })
        })
        .collect();
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let iv = [7u8; 16];
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut jobs = 0u64;
    let mut g = Gen::new(0xB05);
    while Instant::now() < end {
        // Batches of jobs of one to four 16 KiB packets, kept in flight together.
        let batch: Vec<_> = (0..16)
            .map(|_| {
                let len = 16 * 1024 * (1 + (g.next_u64() % 4) as usize);
                let data = g.bytes(len);
                let h = service
                    .submit(Job::aes(key, op, &iv, data.clone()))
                    .unwrap();
                (h, data)
            })
            .collect();
        for (h, data) in batch {
            let out = h
                .wait()
                .unwrap_or_else(|e| panic!("job {jobs} failed: {e}"));
            assert_eq!(out, JobOutput::Data(ref_aes(&raw, op, &iv, &data).unwrap()));
            jobs += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        let _ = h.join();
    }
    let m = service.metrics();
    for n in &m.nodes {
        assert_eq!(
            (n.failures, n.stalls),
            (0, 0),
            "node {} taken out: {m}",
            n.node
        );
    }
    assert_eq!(m.jobs_failed, 0, "{m}");
    assert!(jobs > 0);
    eprintln!("{jobs} jobs in {seconds} s beside 8 CPU-bound threads");
    service.shutdown();
}

/// A packet that stalls every node it runs on (here: both nodes stall on their first packet,
/// the one job there is) fails its job once it has been tried on `max_attempts` nodes, and
/// not before.
#[test]
fn a_poisonous_packet_fails_after_its_attempts() {
    let _calm = calm();
    for attempts in [1u32, 2] {
        let stall = Fault::Stall {
            after: 0,
            duration: Duration::from_millis(300),
        };
        let service = Service::builder()
            .aes_cluster([NodeSpec::new().fault(stall), NodeSpec::new().fault(stall)])
            .inline_limit(0)
            .stall_timeout(Duration::from_millis(30))
            .max_attempts(attempts)
            .build()
            .unwrap();
        let key = service.add_aes_key(&[5; 16]).unwrap();
        let op = AesOp::new(Direction::Encrypt, Mode::Ecb);
        let h = service.submit(Job::aes(key, op, &[], vec![1; 64])).unwrap();
        let err = h.wait().expect_err("every node it ran on stalled");
        assert!(matches!(err, JobError::NodeFailed(_)), "{err}");
        let m = service.metrics();
        assert_eq!(m.packets_retried, u64::from(attempts - 1), "{m}");
        assert_eq!(m.packets_out_of_attempts, 1, "{m}");
        let stalls: u64 = m.nodes.iter().map(|n| n.stalls).sum();
        assert_eq!(stalls, u64::from(attempts), "{m}");
        service.shutdown();
    }
}

const STALL_KEY: [u8; 16] = [7; 16];

/// A node whose thread does not run (here a fault stalls it, as the operating system does
/// when it keeps the thread off its core) leaves a light job waiting; a job of one packet
/// submitted after that runs on its submitting thread instead (docs/ALGORITHM.md §15.7), exact
/// to the byte, and the waiting one still runs once the node is back. Without tenants to share
/// the node between, or with inline runs off, the second job waits for the node too.
#[test]
fn a_light_job_beside_a_stalled_node_runs_on_its_submitting_thread() {
    let _calm = calm();
    for (shared, inline) in [(true, true), (false, true), (true, false)] {
        // The node must have taken the first job before the next comes (else it would run
        // that one first, then stall): on a machine too busy for that in 100 ms, try again.
        let ran = (0..5).find_map(|attempt| stalled_node_scenario(shared, inline, attempt));
        assert!(
            ran.is_some(),
            "the node never stalled before the next job came"
        );
    }
}

/// [`a_light_job_beside_a_stalled_node_runs_on_its_submitting_thread`] once; `None` if the
/// node ran the job meant to wait on it before it stalled.
fn stalled_node_scenario(shared: bool, inline: bool, attempt: u64) -> Option<()> {
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let iv = [0x3C; 16];
    let stall = Fault::Stall {
        after: 0,
        duration: Duration::from_millis(1500),
    };
    let service = Service::builder()
        .aes_cluster([NodeSpec::new().fault(stall)])
        .stall_timeout(Duration::from_secs(60))
        .light_path(true)
        .inline_limit(if inline {
            ServiceBuilder::DEFAULT_INLINE_LIMIT
        } else {
            0
        })
        .build()
        .unwrap();
    let key = service.add_aes_key(&STALL_KEY).unwrap();
    let tenants = shared.then(|| {
        let t = |name| service.add_tenant(TenantSpec::new(name)).unwrap();
        (t("noisy"), t("quiet"))
    });
    let mut g = Gen::new(attempt * 4 + u64::from(shared) * 2 + u64::from(inline));
    let mut send = |tenant: Option<TenantId>, burst: bool| {
        let data = g.bytes(4096);
        let want = ref_aes(&STALL_KEY, op, &iv, &data).unwrap();
        let mut job = Job::encrypt(key, Mode::Cbc, &iv, data);
        if let Some(t) = tenant {
            job = job.tenant(t);
        }
        // A burst goes through the core, never the light path.
        let h = if burst {
            service.submit_burst(vec![job]).unwrap().pop().unwrap()
        } else {
            service.submit(job).unwrap()
        };
        (h, want)
    };
    // The node takes the first job and stalls on it.
    let first = send(tenants.map(|t| t.0), true);
    thread::sleep(Duration::from_millis(100));
    let quiet = tenants.map(|t| t.1);
    let waiting = send(quiet, false);
    thread::sleep(Duration::from_millis(20));
    let second = send(quiet, false);
    let m = service.metrics();
    let premise = !waiting.0.is_finished();
    let ran_inline = shared && inline;
    if premise {
        // Light jobs need tenants to share between; the second is one unless it ran inline.
        let light = match (shared, ran_inline) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => 2,
        };
        assert_eq!(m.jobs_light, light, "{m}");
        assert_eq!(second.0.is_finished(), ran_inline, "{m}");
        assert_eq!(m.jobs_inline_stalled, u64::from(ran_inline), "{m}");
        assert_eq!(m.jobs_inline, u64::from(ran_inline), "{m}");
        // Counted for the quiet tenant, whose job it was.
        if let Some((_, quiet)) = tenants {
            let t = m.tenants.iter().find(|t| t.tenant == quiet).unwrap();
            assert_eq!(t.jobs_inline_stalled, u64::from(ran_inline), "{m}");
        }
    }
    for (h, want) in [second, waiting, first] {
        assert_eq!(h.wait().unwrap().into_data().unwrap(), want);
    }
    service.shutdown();
    let m = service.metrics();
    assert_eq!(m.jobs_completed, 3, "{m}");
    assert_eq!(m.packets_completed, m.packets_admitted, "{m}");
    premise.then_some(())
}
