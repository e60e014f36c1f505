//! AES-GCM and AES-CTR through the whole service (docs/ALGORITHM.md §15.4).
//!
//! - Known answers: every record of the filtered NIST CAVP GCM files (`tests/vectors/aes-gcm/`,
//!   96-bit IVs and 128-bit tags: 2250 records, 577 of them decryptions that must fail) and the
//!   CTR records (`tests/vectors/aes-ctr/`, 9), submitted pipelined to services cutting jobs
//!   into packets of 16, 64, 1024 bytes and the default 16 KiB, on two nodes.
//! - CTR against RustCrypto's `ctr` (whose 128-bit counter wraps as openssl's does) with the
//!   counter crossing 2¹²⁸ inside and between packets; CTR streams.
//! - Typed errors: nonce, tag, GCM as a plain job or a stream, padding, key kinds.
//! - A decryption whose tag, ciphertext, associated data or nonce was tampered with resolves to
//!   `JobError::Crypto(AuthenticationFailed)` and gives no plaintext; no state is left behind.
//! - A GCM job refused by `try_submit` comes back whole.
//! - Properties: random GCM and CTR jobs (lengths, associated data, packet sizes, node counts,
//!   tampering) against the one-shot `aes-gcm` and `ctr` references.

use crate::common;

use std::collections::HashMap;

use common::vectors::{GcmRecord, ctr_records, gcm_records};
use common::{Gen, cores, ref_aes, ref_gcm_open, ref_gcm_seal};
use cryptodispatch::error::CryptoError;
use cryptodispatch::{
    AesOp, Direction, Job, JobError, JobHandle, JobOutput, KeyId, Mode, NodeSpec, Padding, Service,
    ServiceBuilder, SubmitError, TrySubmitError,
};
use proptest::prelude::*;

/// The packet sizes the known answers run at; 16384 is the default.
const PACKET_SIZES: [usize; 4] = [16, 64, 1024, 16384];

fn pinned(i: usize) -> NodeSpec {
    match cores() {
        0 => NodeSpec::new(),
        n => NodeSpec::pinned(i % n),
    }
}

fn service(packet_size: usize, nodes: usize) -> Service {
    Service::builder()
        .packet_size(packet_size)
        .aes_cluster((0..nodes).map(pinned))
        .build()
        .unwrap()
}

fn auth_failed() -> JobError {
    JobError::Crypto(CryptoError::AuthenticationFailed)
}

// ---------------------------------------------------------------------------------------------
// Known answers
// ---------------------------------------------------------------------------------------------

fn gcm_job(key: KeyId, r: &GcmRecord) -> Job {
    match r.direction {
        Direction::Encrypt => Job::gcm_encrypt(
            key,
            &r.nonce,
            r.aad.clone(),
            r.pt.clone().expect("encryption records have PT"),
        ),
        Direction::Decrypt => Job::gcm_decrypt(key, &r.nonce, r.aad.clone(), r.ct.clone(), &r.tag),
    }
}

#[test]
fn cavp_gcm_records_through_the_service_at_several_packet_sizes() {
    let records = gcm_records();
    for packet in PACKET_SIZES {
        let s = service(packet, 2);
        let mut keys: HashMap<&[u8], KeyId> = HashMap::new();
        for r in &records {
            keys.entry(&r.key)
                .or_insert_with(|| s.add_aes_key(&r.key).unwrap());
        }
        // All submitted before any is waited on.
        let handles: Vec<(JobHandle, &GcmRecord)> = records
            .iter()
            .map(|r| {
                let h = s
                    .submit(gcm_job(keys[r.key.as_slice()], r))
                    .unwrap_or_else(|e| panic!("{}: submit: {e}", r.at));
                (h, r)
            })
            .collect();
        let (mut sealed, mut opened, mut refused) = (0, 0, 0);
        for (h, r) in handles {
            let what = format!("{} at {packet}-byte packets", r.at);
            match (r.direction, &r.pt, h.wait()) {
                (Direction::Encrypt, _, Ok(JobOutput::Sealed { ciphertext, tag })) => {
                    assert_eq!(hex::encode(ciphertext), hex::encode(&r.ct), "{what}: CT");
                    assert_eq!(hex::encode(tag), hex::encode(&r.tag), "{what}: tag");
                    sealed += 1;
                }
                (Direction::Decrypt, Some(pt), Ok(JobOutput::Data(got))) => {
                    assert_eq!(hex::encode(got), hex::encode(pt), "{what}: PT");
                    opened += 1;
                }
                (Direction::Decrypt, None, Err(e)) => {
                    assert_eq!(e, auth_failed(), "{what}");
                    refused += 1;
                }
                (_, _, other) => panic!("{what}: unexpected {other:?}"),
            }
        }
        assert_eq!((sealed, opened, refused), (1125, 548, 577), "{packet}");
        s.shutdown();
        let m = s.metrics();
        assert_eq!((m.jobs_completed, m.jobs_failed), (1673, 577), "{packet}");
        assert_eq!(m.stored_states, 0, "{packet}: states left in the store");
        // Records up to 51 bytes: at 16-byte packets the longer ones are cut into up to 4
        // packets, so the hash crossed from packet to packet.
        // Records of one packet within the inline limit ran on the submitting thread.
        let runs_inline =
            |r: &&GcmRecord| r.ct.len() <= packet.min(ServiceBuilder::DEFAULT_INLINE_LIMIT);
        let packets: u64 = m.nodes.iter().map(|n| n.packets).sum();
        let expected: usize = records
            .iter()
            .filter(|r| !runs_inline(r))
            .map(|r| r.ct.len().div_ceil(packet).max(1))
            .sum();
        assert_eq!(packets, expected as u64, "{packet}: packets run");
        let inline = records.iter().filter(runs_inline).count() as u64;
        assert_eq!(m.jobs_inline, inline, "{packet}: jobs run inline");
    }
}

#[test]
fn ctr_records_through_the_service_at_several_packet_sizes() {
    let records = ctr_records();
    assert_eq!(records.len(), 9);
    for packet in PACKET_SIZES {
        let s = service(packet, 2);
        for r in &records {
            let key = s.add_aes_key(&r.key).unwrap();
            let enc = s.submit(Job::encrypt(key, Mode::Ctr, &r.iv, r.input.clone()));
            let dec = s.submit(Job::decrypt(key, Mode::Ctr, &r.iv, r.expected.clone()));
            assert_eq!(
                enc.unwrap().wait().unwrap(),
                JobOutput::Data(r.expected.clone()),
                "{} at {packet}",
                r.at
            );
            assert_eq!(
                dec.unwrap().wait().unwrap(),
                JobOutput::Data(r.input.clone()),
                "{} at {packet}, decrypted",
                r.at
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CTR: the counter
// ---------------------------------------------------------------------------------------------

#[test]
fn ctr_counter_wraps_at_128_bits_across_packets_as_rustcrypto_and_openssl() {
    let mut g = Gen::new(0xC7);
    let data = g.bytes(16 * 9 + 5);
    // IVs a few blocks before the wrap, on the wrap, and where only the low 64 bits carry.
    let mut ivs = Vec::new();
    for below in [1u8, 3, 4] {
        let mut iv = [0xff; 16];
        iv[15] = 0xff - (below - 1);
        ivs.push(iv);
    }
    let mut carry = [0u8; 16];
    carry[8..].copy_from_slice(&[0xff; 8]);
    ivs.push(carry);
    for packet in [16, 32, 48, 1024] {
        let s = service(packet, 2);
        for key_len in [16, 24, 32] {
            let raw = g.bytes(key_len);
            let key = s.add_aes_key(&raw).unwrap();
            for iv in &ivs {
                let op = AesOp::new(Direction::Encrypt, Mode::Ctr);
                let expected = ref_aes(&raw, op, iv, &data).unwrap();
                let got = s
                    .submit(Job::encrypt(key, Mode::Ctr, iv, data.clone()))
                    .unwrap()
                    .wait()
                    .unwrap();
                assert_eq!(
                    got,
                    JobOutput::Data(expected),
                    "AES-{} IV {} at {packet}",
                    key_len * 8,
                    hex::encode(iv)
                );
            }
        }
    }
}

#[test]
fn ctr_streams_match_the_one_shot_result() {
    let s = service(32, 3);
    let mut g = Gen::new(0x5C);
    let raw = g.bytes(32);
    let key = s.add_aes_key(&raw).unwrap();
    let iv = [0xff; 16];
    let chunks: Vec<Vec<u8>> = [16, 64, 160, 32].iter().map(|&n| g.bytes(n)).collect();
    let last = g.bytes(7);
    for direction in [Direction::Encrypt, Direction::Decrypt] {
        let op = AesOp::new(direction, Mode::Ctr);
        let mut stream = s.stream(key, op, &iv).unwrap();
        for c in &chunks {
            stream.push(c.clone()).unwrap();
        }
        stream.finish(last.clone()).unwrap();
        let mut out = Vec::new();
        while let Some(part) = stream.recv() {
            out.extend(part.unwrap());
        }
        let all: Vec<u8> = chunks.iter().flatten().chain(&last).copied().collect();
        assert_eq!(out, ref_aes(&raw, op, &iv, &all).unwrap(), "{direction:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_gcm_and_ctr_jobs_are_refused_with_typed_errors() {
    let s = Service::builder()
        .aes_cluster([pinned(0)])
        .ed25519_cluster([pinned(1)])
        .build()
        .unwrap();
    let key = s.add_aes_key(&[1; 16]).unwrap();
    let signing = s.add_signing_key(&[2; 32]).unwrap();
    let refused = |job| s.submit(job).unwrap_err();
    for len in [0, 8, 11, 13, 16] {
        assert_eq!(
            refused(Job::gcm_encrypt(key, &vec![0; len], vec![], vec![1])),
            SubmitError::Crypto(CryptoError::NonceLength { got: len })
        );
        assert_eq!(
            refused(Job::gcm_decrypt(
                key,
                &vec![0; len],
                vec![],
                vec![1],
                &[0; 16]
            )),
            SubmitError::Crypto(CryptoError::NonceLength { got: len })
        );
    }
    for len in [0, 4, 8, 12, 15, 17, 32] {
        assert_eq!(
            refused(Job::gcm_decrypt(
                key,
                &[0; 12],
                vec![],
                vec![1],
                &vec![0; len]
            )),
            SubmitError::Crypto(CryptoError::TagLength { got: len })
        );
    }
    // GCM is no plain mode: not as a plain job, an operation or a stream.
    for direction in [Direction::Encrypt, Direction::Decrypt] {
        let op = AesOp::new(direction, Mode::Gcm);
        assert_eq!(
            refused(Job::aes(key, op, &[0; 12], vec![0; 16])),
            SubmitError::Crypto(CryptoError::AuthenticatedMode)
        );
        assert_eq!(
            s.stream(key, op, &[0; 12]).unwrap_err(),
            SubmitError::Crypto(CryptoError::AuthenticatedMode)
        );
    }
    // CTR: a 16-byte IV, no padding; any length.
    assert_eq!(
        refused(Job::encrypt(key, Mode::Ctr, &[0; 12], vec![0; 16])),
        SubmitError::Crypto(CryptoError::IvLength { got: 12 })
    );
    assert_eq!(
        refused(Job::encrypt(key, Mode::Ctr, &[0; 16], vec![0; 16]).with_padding(Padding::Pkcs7)),
        SubmitError::Crypto(CryptoError::PaddingNotApplicable)
    );
    assert_eq!(
        s.stream(
            key,
            AesOp::new(Direction::Encrypt, Mode::Ctr).with_padding(Padding::Pkcs7),
            &[0; 16]
        )
        .unwrap_err(),
        SubmitError::Crypto(CryptoError::PaddingNotApplicable)
    );
    // Keys of the wrong kind.
    assert!(matches!(
        refused(Job::gcm_encrypt(signing, &[0; 12], vec![], vec![1])),
        SubmitError::WrongKeyKind {
            expected: "an AES key",
            ..
        }
    ));
    // Nothing refused ran; the service still works.
    let out = s
        .submit(Job::encrypt(key, Mode::Ctr, &[0; 16], vec![0; 5]))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.into_data().map(|d| d.len()), Some(5));
    assert_eq!(s.metrics().jobs_submitted, 1);
}

#[test]
fn tampered_decryptions_release_no_plaintext_and_leave_no_state() {
    let s = service(16, 2);
    let mut g = Gen::new(0x7A);
    let raw = g.bytes(24);
    let key = s.add_aes_key(&raw).unwrap();
    let nonce = g.bytes(12);
    let aad = g.bytes(20);
    // Nine packets of 16 bytes and a partial tenth.
    let pt = g.bytes(150);
    let (ct, tag) = ref_gcm_seal(&raw, &nonce, &aad, &pt);
    let sealed = s
        .submit(Job::gcm_encrypt(key, &nonce, aad.clone(), pt.clone()))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        sealed,
        JobOutput::Sealed {
            ciphertext: ct.clone(),
            tag
        }
    );

    let flip = |v: &[u8], i: usize| {
        let mut v = v.to_vec();
        v[i] ^= 0x01;
        v
    };
    let mut other_nonce = nonce.clone();
    other_nonce[11] ^= 0x80;
    let cases: Vec<(&str, Job)> = vec![
        (
            "tag",
            Job::gcm_decrypt(key, &nonce, aad.clone(), ct.clone(), &flip(&tag, 15)),
        ),
        (
            "first packet",
            Job::gcm_decrypt(key, &nonce, aad.clone(), flip(&ct, 0), &tag),
        ),
        (
            "middle packet",
            Job::gcm_decrypt(key, &nonce, aad.clone(), flip(&ct, 77), &tag),
        ),
        (
            "last byte",
            Job::gcm_decrypt(key, &nonce, aad.clone(), flip(&ct, 149), &tag),
        ),
        (
            "truncated",
            Job::gcm_decrypt(key, &nonce, aad.clone(), ct[..144].to_vec(), &tag),
        ),
        (
            "aad",
            Job::gcm_decrypt(key, &nonce, flip(&aad, 3), ct.clone(), &tag),
        ),
        (
            "no aad",
            Job::gcm_decrypt(key, &nonce, vec![], ct.clone(), &tag),
        ),
        (
            "nonce",
            Job::gcm_decrypt(key, &other_nonce, aad.clone(), ct.clone(), &tag),
        ),
    ];
    let n = cases.len() as u64;
    let handles: Vec<(&str, JobHandle)> = cases
        .into_iter()
        .map(|(what, job)| (what, s.submit(job).unwrap()))
        .collect();
    for (what, h) in handles {
        assert_eq!(h.wait(), Err(auth_failed()), "{what}");
    }
    // The untampered job still opens.
    let opened = s
        .submit(Job::gcm_decrypt(key, &nonce, aad, ct, &tag))
        .unwrap()
        .wait();
    assert_eq!(opened, Ok(JobOutput::Data(pt)));
    s.shutdown();
    let m = s.metrics();
    assert_eq!((m.jobs_completed, m.jobs_failed), (2, n));
    assert_eq!(m.stored_states, 0, "failed GCM jobs leave no state");
}

#[test]
fn empty_messages_and_empty_aad_are_sealed_and_opened() {
    let s = service(16, 2);
    let raw = [0x33; 32];
    let key = s.add_aes_key(&raw).unwrap();
    let nonce = [0x44; 12];
    for (aad, pt) in [
        (vec![], vec![]),
        (vec![1, 2, 3], vec![]),
        (vec![], vec![9; 33]),
    ] {
        let (ct, tag) = ref_gcm_seal(&raw, &nonce, &aad, &pt);
        let sealed = s
            .submit(Job::gcm_encrypt(key, &nonce, aad.clone(), pt.clone()))
            .unwrap()
            .wait()
            .unwrap()
            .into_sealed();
        assert_eq!(sealed, Some((ct.clone(), tag)));
        let opened = s
            .submit(Job::gcm_decrypt(key, &nonce, aad.clone(), ct, &tag))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(opened, JobOutput::Data(pt));
    }
}

#[test]
fn a_gcm_job_refused_by_try_submit_comes_back_whole() {
    let s = Service::builder()
        .packet_size(16)
        .aes_cluster([NodeSpec::new().slowdown(40.0).capacity(16)])
        .cluster_queue_len(1)
        .wait_queue_len(1)
        .receive_queue_len(1)
        .build()
        .unwrap();
    let raw = [0x72; 16];
    let key = s.add_aes_key(&raw).unwrap();
    let mut g = Gen::new(9);
    let nonce = g.bytes(12);
    let aad = g.bytes(13);
    let msgs: Vec<Vec<u8>> = (0..10_000).map(|i| g.bytes(8 + i % 50)).collect();
    let mut accepted = Vec::new();
    let (i, job) = (0..msgs.len())
        .find_map(|i| {
            match s.try_submit(Job::gcm_encrypt(key, &nonce, aad.clone(), msgs[i].clone())) {
                Ok(h) => {
                    accepted.push((i, h));
                    None
                }
                Err(TrySubmitError::Full(job)) => Some((i, job)),
                Err(e) => panic!("job {i} refused: {e}"),
            }
        })
        .expect("the receive queue never filled up");
    assert_eq!(job.len(), msgs[i].len());
    // Submitted again as it came back, it seals the same message with the same AAD.
    let out = s.submit(job).unwrap().wait().unwrap();
    assert_eq!(
        out.into_sealed(),
        Some(ref_gcm_seal(&raw, &nonce, &aad, &msgs[i]))
    );
    for (i, h) in accepted {
        assert_eq!(
            h.wait().unwrap().into_sealed(),
            Some(ref_gcm_seal(&raw, &nonce, &aad, &msgs[i]))
        );
    }
    s.shutdown();
    assert_eq!(s.metrics().stored_states, 0);
}

#[test]
fn debug_output_of_gcm_jobs_shows_no_key_nonce_or_data() {
    let key_bytes = [0xA7u8; 16];
    let s = service(16, 1);
    let key = s.add_aes_key(&key_bytes).unwrap();
    let job = Job::gcm_decrypt(key, &[0xB3; 12], vec![0xC5; 8], vec![0xD9; 40], &[0xE1; 16]);
    let text = format!("{job:?}");
    for b in [
        "a7", "b3", "c5", "d9", "e1", "167", "179", "197", "217", "225",
    ] {
        assert!(!text.to_lowercase().contains(b), "{text}");
    }
    assert!(
        text.contains("nonce_len: 12") && text.contains("tag_len: 16"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tamper {
    None,
    Tag,
    Ciphertext,
    Aad,
}

#[derive(Debug, Clone)]
enum Spec {
    Gcm {
        key: usize,
        len: usize,
        aad_len: usize,
        decrypt: bool,
        tamper: Tamper,
        seed: u64,
    },
    Ctr {
        key: usize,
        len: usize,
        decrypt: bool,
        seed: u64,
    },
}

fn spec() -> impl Strategy<Value = Spec> {
    let gcm = (
        0usize..3,
        prop_oneof![0usize..64, 0usize..1500],
        prop_oneof![Just(0usize), 0usize..80],
        any::<bool>(),
        prop::sample::select(vec![
            Tamper::None,
            Tamper::None,
            Tamper::Tag,
            Tamper::Ciphertext,
            Tamper::Aad,
        ]),
        any::<u64>(),
    )
        .prop_map(|(key, len, aad_len, decrypt, tamper, seed)| Spec::Gcm {
            key,
            len,
            aad_len,
            decrypt,
            tamper,
            seed,
        });
    let ctr = (0usize..3, 0usize..1500, any::<bool>(), any::<u64>()).prop_map(
        |(key, len, decrypt, seed)| Spec::Ctr {
            key,
            len,
            decrypt,
            seed,
        },
    );
    prop_oneof![3 => gcm, 1 => ctr]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_gcm_and_ctr_jobs_match_the_one_shot_references(
        packet_blocks in prop_oneof![1usize..=8, Just(1024usize)],
        nodes in 1usize..=3,
        specs in prop::collection::vec(spec(), 1..40),
    ) {
        let s = service(packet_blocks * 16, nodes);
        let raws: Vec<Vec<u8>> = [16, 24, 32].iter().enumerate()
            .map(|(i, &n)| Gen::new(i as u64).bytes(n))
            .collect();
        let keys: Vec<KeyId> = raws.iter().map(|r| s.add_aes_key(r).unwrap()).collect();
        let mut failures = 0u64;
        let mut pending = Vec::new();
        for spec in &specs {
            let (job, want) = match *spec {
                Spec::Gcm { key, len, aad_len, decrypt, tamper, seed } => {
                    let mut g = Gen::new(seed);
                    let (raw, nonce, aad, pt) = (&raws[key], g.bytes(12), g.bytes(aad_len), g.bytes(len));
                    let (mut ct, mut tag) = ref_gcm_seal(raw, &nonce, &aad, &pt);
                    if !decrypt {
                        let job = Job::gcm_encrypt(keys[key], &nonce, aad, pt);
                        (job, Ok(JobOutput::Sealed { ciphertext: ct, tag }))
                    } else {
                        let mut aad = aad;
                        match tamper {
                            Tamper::None => {}
                            Tamper::Tag => tag[(seed % 16) as usize] ^= 0x40,
                            Tamper::Ciphertext if !ct.is_empty() => {
                                let i = (seed as usize) % ct.len();
                                ct[i] ^= 0x02;
                            }
                            Tamper::Aad if !aad.is_empty() => {
                                let i = (seed as usize) % aad.len();
                                aad[i] ^= 0x08;
                            }
                            // Nothing to flip: one byte more of associated data.
                            Tamper::Ciphertext | Tamper::Aad => aad.push(0),
                        }
                        let want = match ref_gcm_open(raw, &nonce, &aad, &ct, &tag) {
                            Some(pt) => Ok(JobOutput::Data(pt)),
                            None => Err(auth_failed()),
                        };
                        prop_assert_eq!(want.is_err(), tamper != Tamper::None);
                        (Job::gcm_decrypt(keys[key], &nonce, aad, ct, &tag), want)
                    }
                }
                Spec::Ctr { key, len, decrypt, seed } => {
                    let mut g = Gen::new(seed);
                    let (iv, data) = (g.bytes(16), g.bytes(len));
                    let direction = if decrypt { Direction::Decrypt } else { Direction::Encrypt };
                    let op = AesOp::new(direction, Mode::Ctr);
                    let want = ref_aes(&raws[key], op, &iv, &data).unwrap();
                    (Job::aes(keys[key], op, &iv, data), Ok(JobOutput::Data(want)))
                }
            };
            failures += u64::from(want.is_err());
            pending.push((s.submit(job).unwrap(), want));
        }
        for (h, want) in pending {
            prop_assert_eq!(h.wait(), want);
        }
        s.shutdown();
        let m = s.metrics();
        prop_assert_eq!(m.jobs_failed, failures);
        prop_assert_eq!(m.jobs_completed + m.jobs_failed, specs.len() as u64);
        prop_assert_eq!(m.stored_states, 0);
    }
}
