//! Every way the service refuses something, through its public API: each test asserts the exact
//! typed error (variant and fields), and that the service goes on working afterwards.
//!
//! Covered: key lengths, unknown and removed keys, keys of the wrong algorithm, unaligned data,
//! bad padding (a job error), IV lengths, padding for stream modes, signature lengths, packet
//! sizes, zero bounds, duplicate and empty clusters, node capacity, policy names and weights,
//! slowdown, core indices, missing clusters, oversized Ed25519 messages, submission after
//! shutdown (submit, try_submit, streams), `TrySubmitError::Full` handing the job back, and
//! `Debug` output never showing key bytes.

use crate::common;
use std::time::Duration;

use common::{Gen, cores, ed_public, ed_sign, ref_aes};
use cryptodispatch::crypto::{AesKey, SigningKey};
use cryptodispatch::error::{ConfigError, CryptoError, ParseError};
use cryptodispatch::packet::{ClusterId, Mode, NodeId};
use cryptodispatch::{
    AesOp, BuildError, ClusterKind, Direction, Job, JobError, JobOutput, KeyError, NodeSpec,
    Padding, PolicySpec, Service, SubmitError, TenantSpec, TrySubmitError,
};

/// A small service: one AES node, one Ed25519 node, packets of 32 bytes.
fn service() -> Service {
    Service::builder()
        .packet_size(32)
        .aes_cluster([NodeSpec::new()])
        .ed25519_cluster([NodeSpec::new()])
        .build()
        .expect("service builds")
}

fn op(direction: Direction, mode: Mode) -> AesOp {
    AesOp::new(direction, mode)
}

fn padded(direction: Direction, mode: Mode) -> AesOp {
    AesOp::new(direction, mode).with_padding(Padding::Pkcs7)
}

/// The service still does work after refusing something.
fn assert_still_works(s: &Service) {
    let key = s.add_aes_key(&[0x42; 16]).unwrap();
    let data: Vec<u8> = (0..48).collect();
    let out = s
        .submit(Job::encrypt(key, Mode::Cbc, &[7; 16], data.clone()))
        .unwrap()
        .wait()
        .unwrap();
    let expected = ref_aes(
        &[0x42; 16],
        op(Direction::Encrypt, Mode::Cbc),
        &[7; 16],
        &data,
    );
    assert_eq!(out, JobOutput::Data(expected.unwrap()));
    s.remove_key(key).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

#[test]
fn aes_key_of_wrong_length_is_refused() {
    let s = service();
    for len in [15, 17, 0, 31, 33] {
        assert_eq!(
            s.add_aes_key(&vec![1; len]).unwrap_err(),
            KeyError::Crypto(CryptoError::KeyLength {
                algorithm: "AES",
                got: len,
                expected: "16, 24 or 32",
            }),
            "AES key of {len} bytes"
        );
    }
    assert_eq!(s.metrics().keys, 0, "a refused key is not registered");
    assert_still_works(&s);
}

#[test]
fn ed25519_seed_of_31_bytes_is_refused() {
    let s = service();
    for len in [31, 33, 0, 64] {
        assert_eq!(
            s.add_signing_key(&vec![1; len]).unwrap_err(),
            KeyError::Crypto(CryptoError::KeyLength {
                algorithm: "Ed25519",
                got: len,
                expected: "32",
            }),
            "seed of {len} bytes"
        );
    }
    assert_eq!(s.metrics().keys, 0);
}

#[test]
fn verifying_key_of_33_bytes_is_refused() {
    let s = service();
    for len in [33, 31, 0] {
        assert_eq!(
            s.add_verifying_key(&vec![1; len]).unwrap_err(),
            KeyError::Crypto(CryptoError::KeyLength {
                algorithm: "Ed25519 public key",
                got: len,
                expected: "32",
            }),
            "public key of {len} bytes"
        );
    }
    // 32 bytes that do not decode to a curve point (found with ed25519-dalek itself).
    let not_a_point = (0u8..=255)
        .map(|b| [b; 32])
        .find(|bytes| ed25519_dalek::VerifyingKey::from_bytes(bytes).is_err())
        .expect("some constant 32-byte string is not a point");
    assert_eq!(
        s.add_verifying_key(&not_a_point).unwrap_err(),
        KeyError::Crypto(CryptoError::InvalidVerifyingKey)
    );
    assert_eq!(s.metrics().keys, 0);
}

#[test]
fn submit_with_a_removed_key_is_unknown_key() {
    let s = service();
    let aes = s.add_aes_key(&[3; 16]).unwrap();
    let signing = s.add_signing_key(&[4; 32]).unwrap();
    let verifying = s.add_verifying_key(&ed_public(&[4; 32])).unwrap();
    for key in [aes, signing, verifying] {
        s.remove_key(key).unwrap();
    }
    assert_eq!(
        s.submit(Job::encrypt(aes, Mode::Cbc, &[0; 16], vec![0; 32]))
            .unwrap_err(),
        SubmitError::UnknownKey(aes)
    );
    assert!(matches!(
        s.try_submit(Job::decrypt(aes, Mode::Ecb, &[], vec![0; 32])),
        Err(TrySubmitError::Invalid(SubmitError::UnknownKey(k))) if k == aes
    ));
    assert_eq!(
        s.stream(aes, op(Direction::Encrypt, Mode::Ofb), &[0; 16])
            .unwrap_err(),
        SubmitError::UnknownKey(aes)
    );
    assert_eq!(
        s.submit(Job::sign(signing, b"msg".to_vec())).unwrap_err(),
        SubmitError::UnknownKey(signing)
    );
    assert_eq!(
        s.submit(Job::verify(verifying, b"msg".to_vec(), &[0; 64]))
            .unwrap_err(),
        SubmitError::UnknownKey(verifying)
    );
    assert_eq!(
        s.verifying_key(signing).unwrap_err(),
        KeyError::UnknownKey(signing)
    );
    let m = s.metrics();
    assert_eq!(m.keys, 0);
    assert_eq!(m.jobs_submitted, 0, "refused jobs are not counted");
    assert_still_works(&s);
}

#[test]
fn removing_a_key_twice_is_unknown_key() {
    let s = service();
    let key = s.add_aes_key(&[3; 24]).unwrap();
    assert_eq!(s.remove_key(key), Ok(()));
    assert_eq!(s.remove_key(key), Err(KeyError::UnknownKey(key)));
    let signing = s.generate_signing_key().unwrap();
    assert_eq!(s.remove_key(signing), Ok(()));
    assert_eq!(s.remove_key(signing), Err(KeyError::UnknownKey(signing)));
}

#[test]
fn aes_key_for_an_ed25519_job_is_the_wrong_kind() {
    let s = service();
    let aes = s.add_aes_key(&[5; 32]).unwrap();
    assert_eq!(
        s.submit(Job::sign(aes, b"hello".to_vec())).unwrap_err(),
        SubmitError::WrongKeyKind {
            key: aes,
            expected: "an Ed25519 signing key",
            got: "an AES key",
        }
    );
    assert_eq!(
        s.submit(Job::verify(aes, b"hello".to_vec(), &[0; 64]))
            .unwrap_err(),
        SubmitError::WrongKeyKind {
            key: aes,
            expected: "an Ed25519 key",
            got: "an AES key",
        }
    );
    assert_eq!(
        s.verifying_key(aes).unwrap_err(),
        KeyError::WrongKind {
            key: aes,
            expected: "an Ed25519 key",
        }
    );
    // A verifying (public) key cannot sign.
    let public = s.add_verifying_key(&ed_public(&[6; 32])).unwrap();
    assert_eq!(
        s.submit(Job::sign(public, b"hello".to_vec())).unwrap_err(),
        SubmitError::WrongKeyKind {
            key: public,
            expected: "an Ed25519 signing key",
            got: "an Ed25519 verifying key",
        }
    );
    assert_still_works(&s);
}

#[test]
fn signing_key_for_an_aes_job_is_the_wrong_kind() {
    let s = service();
    let signing = s.add_signing_key(&[8; 32]).unwrap();
    let public = s.add_verifying_key(&ed_public(&[8; 32])).unwrap();
    assert_eq!(
        s.submit(Job::encrypt(signing, Mode::Cbc, &[0; 16], vec![0; 16]))
            .unwrap_err(),
        SubmitError::WrongKeyKind {
            key: signing,
            expected: "an AES key",
            got: "an Ed25519 signing key",
        }
    );
    assert_eq!(
        s.submit(Job::decrypt(public, Mode::Ecb, &[], vec![0; 16]))
            .unwrap_err(),
        SubmitError::WrongKeyKind {
            key: public,
            expected: "an AES key",
            got: "an Ed25519 verifying key",
        }
    );
    assert_eq!(
        s.stream(signing, op(Direction::Encrypt, Mode::Cbc), &[0; 16])
            .unwrap_err(),
        SubmitError::WrongKeyKind {
            key: signing,
            expected: "an AES key",
            got: "an Ed25519 signing key",
        }
    );
    assert_still_works(&s);
}

// ---------------------------------------------------------------------------------------------
// Data, padding, IVs, signatures
// ---------------------------------------------------------------------------------------------

#[test]
fn unaligned_data_for_ecb_or_cbc_without_padding_is_refused() {
    let s = service();
    let key = s.add_aes_key(&[9; 16]).unwrap();
    for mode in [Mode::Ecb, Mode::Cbc] {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            for len in [1, 15, 17, 33, 100] {
                assert_eq!(
                    s.submit(Job::aes(key, op(direction, mode), &[0; 16], vec![0; len]))
                        .unwrap_err(),
                    SubmitError::Crypto(CryptoError::NotBlockAligned { len }),
                    "{mode} {direction:?} {len}"
                );
            }
        }
        // A padded decryption needs whole blocks too (the ciphertext of a padded message).
        assert_eq!(
            s.submit(Job::aes(
                key,
                padded(Direction::Decrypt, mode),
                &[0; 16],
                vec![0; 17]
            ))
            .unwrap_err(),
            SubmitError::Crypto(CryptoError::NotBlockAligned { len: 17 })
        );
        // ... while a padded encryption of 17 bytes is fine.
        let out = s
            .submit(Job::aes(
                key,
                padded(Direction::Encrypt, mode),
                &[0; 16],
                vec![1; 17],
            ))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(out.into_data().unwrap().len(), 32);
    }
    // OFB and CFB take any length.
    for mode in [Mode::Ofb, Mode::Cfb] {
        let out = s
            .submit(Job::encrypt(key, mode, &[0; 16], vec![1; 17]))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(out.into_data().unwrap().len(), 17);
    }
    assert_eq!(s.metrics().jobs_submitted, 4);
}

#[test]
fn bad_padding_on_decryption_fails_the_job() {
    let s = service();
    let raw = [0x21; 16];
    let key = s.add_aes_key(&raw).unwrap();
    let iv = [0x13; 16];
    // 96 bytes = 3 packets of 32: the bad padding is found by the last one.
    let plain = vec![0u8; 96];
    for mode in [Mode::Ecb, Mode::Cbc] {
        // Ciphertext of blocks ending in 0x00: never valid PKCS#7.
        let ct = ref_aes(&raw, op(Direction::Encrypt, mode), &iv, &plain).unwrap();
        let handle = s
            .submit(Job::aes(key, padded(Direction::Decrypt, mode), &iv, ct))
            .unwrap();
        assert_eq!(
            handle.wait(),
            Err(JobError::Crypto(CryptoError::BadPadding)),
            "{mode}"
        );
        // A last block ending in 0x11 (> 16) is bad as well.
        let mut bad = plain.clone();
        bad[95] = 0x11;
        let ct = ref_aes(&raw, op(Direction::Encrypt, mode), &iv, &bad).unwrap();
        let handle = s
            .submit(Job::aes(key, padded(Direction::Decrypt, mode), &iv, ct))
            .unwrap();
        assert_eq!(
            handle.wait(),
            Err(JobError::Crypto(CryptoError::BadPadding))
        );
        // An empty padded decryption cannot hold its padding: refused at submission.
        assert_eq!(
            s.submit(Job::aes(key, padded(Direction::Decrypt, mode), &iv, vec![]))
                .unwrap_err(),
            SubmitError::Crypto(CryptoError::BadPadding)
        );
    }
    assert_still_works(&s);
    s.shutdown();
    let m = s.metrics();
    assert_eq!(m.jobs_failed, 4);
    assert_eq!(m.jobs_completed, 1);
    assert_eq!(m.jobs_submitted, 5);
    assert_eq!(m.stored_states, 0, "a failed chained job leaves no state");
}

#[test]
fn iv_of_the_wrong_length_is_refused() {
    let s = service();
    let raw = [0x31; 16];
    let key = s.add_aes_key(&raw).unwrap();
    for mode in [Mode::Cbc, Mode::Ofb, Mode::Cfb] {
        for len in [0, 8, 15, 17, 32] {
            assert_eq!(
                s.submit(Job::encrypt(key, mode, &vec![0; len], vec![0; 32]))
                    .unwrap_err(),
                SubmitError::Crypto(CryptoError::IvLength { got: len }),
                "{mode} IV of {len}"
            );
            assert_eq!(
                s.stream(key, op(Direction::Decrypt, mode), &vec![0; len])
                    .unwrap_err(),
                SubmitError::Crypto(CryptoError::IvLength { got: len })
            );
        }
    }
    // ECB ignores the IV, whatever its length.
    let data: Vec<u8> = (0..64).collect();
    let expected = ref_aes(&raw, op(Direction::Encrypt, Mode::Ecb), &[], &data).unwrap();
    for len in [0, 5, 16, 40] {
        let out = s
            .submit(Job::encrypt(key, Mode::Ecb, &vec![0xEE; len], data.clone()))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(
            out,
            JobOutput::Data(expected.clone()),
            "ECB with IV of {len}"
        );
    }
    assert_eq!(s.metrics().stored_states, 0);
}

#[test]
fn padding_for_ofb_or_cfb_is_refused() {
    let s = service();
    let key = s.add_aes_key(&[1; 16]).unwrap();
    for mode in [Mode::Ofb, Mode::Cfb] {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            assert_eq!(
                s.submit(Job::aes(
                    key,
                    padded(direction, mode),
                    &[0; 16],
                    vec![0; 32]
                ))
                .unwrap_err(),
                SubmitError::Crypto(CryptoError::PaddingNotApplicable),
                "{mode} {direction:?}"
            );
            // The same through `with_padding`.
            assert_eq!(
                s.submit(
                    Job::aes(key, op(direction, mode), &[0; 16], vec![0; 5])
                        .with_padding(Padding::Pkcs7)
                )
                .unwrap_err(),
                SubmitError::Crypto(CryptoError::PaddingNotApplicable)
            );
            assert_eq!(
                s.stream(key, padded(direction, mode), &[0; 16])
                    .unwrap_err(),
                SubmitError::Crypto(CryptoError::PaddingNotApplicable)
            );
        }
    }
    assert_eq!(s.metrics().stored_states, 0);
}

#[test]
fn signature_of_the_wrong_length_is_refused() {
    let s = service();
    let seed = [0x44; 32];
    let key = s.add_signing_key(&seed).unwrap();
    let sig = ed_sign(&seed, b"msg");
    for len in [0, 32, 63, 65, 128] {
        let mut bad = sig.to_vec();
        bad.resize(len, 0);
        assert_eq!(
            s.submit(Job::verify(key, b"msg".to_vec(), &bad))
                .unwrap_err(),
            SubmitError::Crypto(CryptoError::SignatureLength { got: len }),
            "signature of {len} bytes"
        );
    }
    let out = s
        .submit(Job::verify(key, b"msg".to_vec(), &sig))
        .unwrap()
        .wait();
    assert_eq!(out, Ok(JobOutput::Verified(true)));
}

#[test]
fn unaligned_stream_chunks_are_refused() {
    let s = service();
    let key = s.add_aes_key(&[2; 16]).unwrap();
    let mut stream = s
        .stream(key, op(Direction::Encrypt, Mode::Cbc), &[0; 16])
        .unwrap();
    assert_eq!(
        stream.push(vec![0; 20]).unwrap_err(),
        SubmitError::Crypto(CryptoError::NotBlockAligned { len: 20 })
    );
    assert_eq!(
        stream.finish(vec![0; 20]).unwrap_err(),
        SubmitError::Crypto(CryptoError::NotBlockAligned { len: 20 })
    );
    stream.push(vec![0; 32]).unwrap();
    stream.finish(vec![0; 16]).unwrap();
    assert_eq!(
        stream.push(vec![0; 16]).unwrap_err(),
        SubmitError::StreamFinished
    );
    assert_eq!(
        stream.finish(vec![0; 16]).unwrap_err(),
        SubmitError::StreamFinished
    );
    let out: Vec<u8> = std::iter::from_fn(|| stream.recv())
        .flat_map(Result::unwrap)
        .collect();
    let expected = ref_aes(
        &[2; 16],
        op(Direction::Encrypt, Mode::Cbc),
        &[0; 16],
        &[0; 48],
    );
    assert_eq!(out, expected.unwrap());

    // A padded decryption stream must end in a non-empty final chunk.
    let mut stream = s
        .stream(key, padded(Direction::Decrypt, Mode::Ecb), &[])
        .unwrap();
    assert_eq!(
        stream.finish(Vec::new()).unwrap_err(),
        SubmitError::Crypto(CryptoError::BadPadding)
    );
}

/// A stream chunk larger than every node's capacity: either refused at `push` (as an oversized
/// Ed25519 message is, with `SubmitError::TooLarge`) or cut into packets and run correctly —
/// never accepted and then failed as an internal error, after which the stream's next chunk
/// would run from a stale chaining state and return wrong data as `Ok` (as it once did).
#[test]
fn stream_chunk_larger_than_any_node_capacity_is_refused_at_push() {
    let s = Service::builder()
        .packet_size(16)
        .aes_cluster([NodeSpec::new().capacity(64)])
        .build()
        .unwrap();
    let raw = [0x77; 16];
    let key = s.add_aes_key(&raw).unwrap();
    let iv = [0x01; 16];
    let mut stream = s
        .stream(key, op(Direction::Encrypt, Mode::Cbc), &iv)
        .unwrap();
    let big: Vec<u8> = (0..128u8).collect();
    let pushed = stream.push(big.clone());
    match pushed {
        Err(e) => {
            assert_eq!(
                e,
                SubmitError::TooLarge { len: 128, max: 64 },
                "an oversized chunk must be refused as TooLarge"
            );
            // Refused: nothing of it ran; the stream continues from the IV.
            stream.finish(vec![0x55; 32]).unwrap();
            let out = stream.recv().unwrap();
            let expected = ref_aes(&raw, op(Direction::Encrypt, Mode::Cbc), &iv, &[0x55; 32]);
            assert_eq!(out, Ok(expected.unwrap()));
        }
        Ok(()) => {
            // Accepted: then it must run, and the stream must go on correctly.
            stream.finish(vec![0x55; 32]).unwrap();
            let first = stream.recv().unwrap();
            let second = stream.recv().unwrap();
            let mut whole = big.clone();
            whole.extend_from_slice(&[0x55; 32]);
            let expected = ref_aes(&raw, op(Direction::Encrypt, Mode::Cbc), &iv, &whole).unwrap();
            let first_right = first == Ok(expected[..128].to_vec());
            let second_right = second == Ok(expected[128..].to_vec());
            assert!(
                first_right && second_right,
                "oversized chunk accepted by push; its output: {:?}; the next chunk's output \
                 is {} (Ok: {})",
                first.as_ref().map(Vec::len),
                if second_right { "right" } else { "WRONG" },
                second.is_ok(),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Building
// ---------------------------------------------------------------------------------------------

#[test]
fn packet_size_zero_or_unaligned_is_refused() {
    for size in [0, 1, 8, 15, 17, 24, 1000, (16 << 20) + 16, usize::MAX - 15] {
        assert_eq!(
            Service::builder()
                .packet_size(size)
                .aes_cluster([NodeSpec::new()])
                .build()
                .unwrap_err(),
            BuildError::PacketSize(size),
            "packet size {size}"
        );
    }
    let s = Service::builder()
        .packet_size(16)
        .aes_cluster([NodeSpec::new()])
        .build()
        .unwrap();
    assert_eq!(s.packet_size(), 16);
}

#[test]
fn zero_bounds_and_duplicate_clusters_are_refused() {
    let b = || Service::builder().aes_cluster([NodeSpec::new()]);
    assert_eq!(
        b().cluster_queue_len(0).build().unwrap_err(),
        BuildError::ZeroBound("cluster_queue_len")
    );
    assert_eq!(
        b().receive_queue_len(0).build().unwrap_err(),
        BuildError::ZeroBound("receive_queue_len")
    );
    assert_eq!(
        b().receive_queue_bytes(0).build().unwrap_err(),
        BuildError::ZeroBound("receive_queue_bytes")
    );
    assert_eq!(
        b().stream_outputs(0).build().unwrap_err(),
        BuildError::ZeroBound("stream_outputs")
    );
    // A stall limit under a millisecond would take out a node running any packet.
    for t in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
    ] {
        assert_eq!(
            b().stall_timeout(t).build().unwrap_err(),
            BuildError::StallTimeoutTooShort(t)
        );
    }
    assert!(b().stall_timeout(Duration::from_millis(1)).build().is_ok());
    assert_eq!(
        Service::builder()
            .aes_cluster([NodeSpec::new().slots(0)])
            .build()
            .unwrap_err(),
        BuildError::ZeroBound("slots")
    );
    assert_eq!(
        b().aes_cluster([NodeSpec::new()]).build().unwrap_err(),
        BuildError::DuplicateCluster(ClusterKind::Aes)
    );
    // A wait queue of zero is allowed ("none").
    let s = b().wait_queue_len(0).build().unwrap();
    assert_still_works(&s);
}

#[test]
fn a_cluster_with_no_nodes_is_refused() {
    assert_eq!(
        Service::builder().aes_cluster(vec![]).build().unwrap_err(),
        BuildError::Config(ConfigError::EmptyCluster(ClusterId(0)))
    );
    assert_eq!(
        Service::builder()
            .aes_cluster([NodeSpec::new()])
            .ed25519_cluster(Vec::new())
            .build()
            .unwrap_err(),
        BuildError::Config(ConfigError::EmptyCluster(ClusterId(1)))
    );
}

#[test]
fn node_capacity_below_one_packet_is_refused() {
    assert_eq!(
        Service::builder()
            .packet_size(64)
            .aes_cluster([NodeSpec::new().capacity(48)])
            .build()
            .unwrap_err(),
        BuildError::Config(ConfigError::CapacityTooSmall {
            node: NodeId(0),
            capacity: 48,
            packet: 64,
        })
    );
    // Node ids count across clusters.
    assert_eq!(
        Service::builder()
            .packet_size(32)
            .aes_cluster([NodeSpec::new(), NodeSpec::new().capacity(32)])
            .ed25519_cluster([NodeSpec::new().capacity(0)])
            .build()
            .unwrap_err(),
        BuildError::Config(ConfigError::CapacityTooSmall {
            node: NodeId(2),
            capacity: 0,
            packet: 32,
        })
    );
    // Exactly one packet is enough.
    let s = Service::builder()
        .packet_size(32)
        .aes_cluster([NodeSpec::new().capacity(32)])
        .build()
        .unwrap();
    assert_still_works(&s);
}

#[test]
fn an_unknown_policy_name_is_refused() {
    let err = Service::builder()
        .aes_cluster([NodeSpec::new()])
        .policy_name("fastest")
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::Config(ConfigError::Parse(ParseError::new(
            "policy",
            "fastest",
            PolicySpec::names().join(", ")
        )))
    );
    let BuildError::Config(ConfigError::Parse(parse)) = &err else {
        unreachable!()
    };
    assert_eq!(parse.what(), "policy");
    assert!(err.to_string().contains("fastest"), "{err}");
    // An unknown parameter of a known policy.
    assert!(matches!(
        Service::builder()
            .aes_cluster([NodeSpec::new()])
            .policy_name("paper:gamma=1")
            .build(),
        Err(BuildError::Config(ConfigError::Parse(p))) if p.what() == "policy parameter"
    ));
    // Known names build.
    for name in ["paper", "hhs-acdid", "paper:alpha=0.2,beta=0.8"] {
        Service::builder()
            .aes_cluster([NodeSpec::new()])
            .policy_name(name)
            .build()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn weights_out_of_range_or_both_zero_are_refused() {
    let build_named = |name: &str| {
        Service::builder()
            .aes_cluster([NodeSpec::new()])
            .policy_name(name)
            .build()
    };
    let build_spec = |alpha: f64, beta: f64| {
        Service::builder()
            .aes_cluster([NodeSpec::new()])
            .policy(PolicySpec::paper(alpha, beta))
            .build()
    };
    assert_eq!(
        build_named("paper:alpha=1.5,beta=0").unwrap_err(),
        BuildError::Config(ConfigError::BadWeights {
            alpha: 1.5,
            beta: 0.0
        })
    );
    assert_eq!(
        build_named("paper:alpha=0,beta=0").unwrap_err(),
        BuildError::Config(ConfigError::BadWeights {
            alpha: 0.0,
            beta: 0.0
        })
    );
    assert_eq!(
        build_named("paper:alpha=0.5,beta=-0.25").unwrap_err(),
        BuildError::Config(ConfigError::BadWeights {
            alpha: 0.5,
            beta: -0.25
        })
    );
    for (alpha, beta) in [(1.5, 0.0), (-0.1, 0.5), (0.5, 1.1), (0.0, 0.0), (2.0, 2.0)] {
        assert_eq!(
            build_spec(alpha, beta).unwrap_err(),
            BuildError::Config(ConfigError::BadWeights { alpha, beta }),
            "alpha {alpha}, beta {beta}"
        );
    }
    assert!(matches!(
        build_spec(f64::NAN, 0.5),
        Err(BuildError::Config(ConfigError::BadWeights { alpha, beta })) if alpha.is_nan() && beta == 0.5
    ));
    // The edges of the range are fine.
    for (alpha, beta) in [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0)] {
        build_spec(alpha, beta).unwrap_or_else(|e| panic!("{alpha}, {beta}: {e}"));
    }
}

#[test]
fn a_slowdown_below_one_or_above_a_thousand_is_refused() {
    let build = |f: f64| {
        Service::builder()
            .aes_cluster([NodeSpec::new().slowdown(f)])
            .build()
    };
    for f in [0.5, 0.0, -1.0, 0.999, 1000.001, 1e9] {
        assert_eq!(build(f).unwrap_err(), BuildError::BadSlowdown(f), "{f}");
    }
    assert_eq!(
        build(f64::INFINITY).unwrap_err(),
        BuildError::BadSlowdown(f64::INFINITY)
    );
    assert!(matches!(build(f64::NAN), Err(BuildError::BadSlowdown(f)) if f.is_nan()));
    // 1 is no slowdown.
    let s = build(1.0).unwrap();
    assert_eq!(s.metrics().nodes[0].slowdown, 1.0);
}

#[test]
fn a_core_the_machine_does_not_have_is_refused() {
    let n = cores();
    assert!(n >= 1, "the machine reports its cores");
    assert_eq!(
        Service::builder()
            .aes_cluster([NodeSpec::pinned(n)])
            .build()
            .unwrap_err(),
        BuildError::NoSuchCore {
            node: 0,
            core: n,
            available: n,
        }
    );
    // `node` is the index within the cluster.
    assert_eq!(
        Service::builder()
            .aes_cluster([NodeSpec::new()])
            .ed25519_cluster([NodeSpec::pinned(0), NodeSpec::new().core(1000)])
            .build()
            .unwrap_err(),
        BuildError::NoSuchCore {
            node: 1,
            core: 1000,
            available: n,
        }
    );
    // Every existing core is fine.
    let s = Service::builder()
        .aes_cluster((0..n).map(NodeSpec::pinned))
        .build()
        .unwrap();
    assert_eq!(s.num_nodes(), n);
    let pinned: Vec<Option<usize>> = s.metrics().nodes.iter().map(|m| m.core).collect();
    assert_eq!(pinned, (0..n).map(Some).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// Submission
// ---------------------------------------------------------------------------------------------

#[test]
fn a_job_for_a_missing_cluster_is_refused() {
    let aes_only = Service::builder()
        .aes_cluster([NodeSpec::new()])
        .build()
        .unwrap();
    assert!(aes_only.has_cluster(ClusterKind::Aes));
    assert!(!aes_only.has_cluster(ClusterKind::Ed25519));
    let seed = [0x19; 32];
    let signing = aes_only.add_signing_key(&seed).unwrap();
    assert_eq!(
        aes_only
            .submit(Job::sign(signing, b"m".to_vec()))
            .unwrap_err(),
        SubmitError::NoCluster(ClusterKind::Ed25519)
    );
    assert_eq!(
        aes_only
            .submit(Job::verify(signing, b"m".to_vec(), &ed_sign(&seed, b"m")))
            .unwrap_err(),
        SubmitError::NoCluster(ClusterKind::Ed25519)
    );
    assert!(matches!(
        aes_only.try_submit(Job::sign(signing, b"m".to_vec())),
        Err(TrySubmitError::Invalid(SubmitError::NoCluster(
            ClusterKind::Ed25519
        )))
    ));
    assert_eq!(aes_only.metrics().jobs_submitted, 0);
    assert_still_works(&aes_only);

    let ed_only = Service::builder()
        .ed25519_cluster([NodeSpec::new()])
        .build()
        .unwrap();
    let aes = ed_only.add_aes_key(&[1; 16]).unwrap();
    assert_eq!(
        ed_only
            .submit(Job::encrypt(aes, Mode::Ecb, &[], vec![0; 16]))
            .unwrap_err(),
        SubmitError::NoCluster(ClusterKind::Aes)
    );
    assert_eq!(
        ed_only
            .stream(aes, op(Direction::Encrypt, Mode::Cbc), &[0; 16])
            .unwrap_err(),
        SubmitError::NoCluster(ClusterKind::Aes)
    );
    assert_eq!(ed_only.metrics().stored_states, 0);
    let signing = ed_only.add_signing_key(&seed).unwrap();
    assert_eq!(
        ed_only
            .submit(Job::sign(signing, b"m".to_vec()))
            .unwrap()
            .wait(),
        Ok(JobOutput::Signature(ed_sign(&seed, b"m")))
    );
}

#[test]
fn an_ed25519_message_larger_than_node_capacity_is_too_large() {
    // Default capacity: 8 packets of 16 bytes = 128.
    let s = Service::builder()
        .packet_size(16)
        .ed25519_cluster([NodeSpec::new()])
        .build()
        .unwrap();
    let seed = [0x61; 32];
    let key = s.add_signing_key(&seed).unwrap();
    assert_eq!(
        s.submit(Job::sign(key, vec![0; 129])).unwrap_err(),
        SubmitError::TooLarge { len: 129, max: 128 }
    );
    assert_eq!(
        s.submit(Job::verify(key, vec![0; 4096], &[0; 64]))
            .unwrap_err(),
        SubmitError::TooLarge {
            len: 4096,
            max: 128
        }
    );
    assert!(matches!(
        s.try_submit(Job::sign(key, vec![0; 200])),
        Err(TrySubmitError::Invalid(SubmitError::TooLarge {
            len: 200,
            max: 128
        }))
    ));
    // Exactly the capacity fits.
    let msg = vec![0xAB; 128];
    assert_eq!(
        s.submit(Job::sign(key, msg.clone())).unwrap().wait(),
        Ok(JobOutput::Signature(ed_sign(&seed, &msg)))
    );

    // The largest capacity of the cluster is the bound; smaller nodes are skipped.
    let s = Service::builder()
        .packet_size(16)
        .ed25519_cluster([NodeSpec::new().capacity(100), NodeSpec::new().capacity(300)])
        .build()
        .unwrap();
    let key = s.add_signing_key(&seed).unwrap();
    assert_eq!(
        s.submit(Job::sign(key, vec![0; 301])).unwrap_err(),
        SubmitError::TooLarge { len: 301, max: 300 }
    );
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let msg = vec![i as u8; 250];
            (s.submit(Job::sign(key, msg.clone())).unwrap(), msg)
        })
        .collect();
    for (h, msg) in handles {
        assert_eq!(h.wait(), Ok(JobOutput::Signature(ed_sign(&seed, &msg))));
    }
}

#[test]
fn submit_after_shutdown_is_refused() {
    let s = service();
    let aes = s.add_aes_key(&[1; 16]).unwrap();
    let seed = [2; 32];
    let signing = s.add_signing_key(&seed).unwrap();
    let mut stream = s
        .stream(aes, op(Direction::Encrypt, Mode::Cbc), &[0; 16])
        .unwrap();
    stream.push(vec![0; 32]).unwrap();
    let before = s.submit(Job::sign(signing, b"before".to_vec())).unwrap();
    s.shutdown();
    assert!(before.is_finished(), "shutdown completes submitted jobs");
    assert_eq!(
        before.wait(),
        Ok(JobOutput::Signature(ed_sign(&seed, b"before")))
    );

    assert_eq!(
        s.submit(Job::encrypt(aes, Mode::Cbc, &[0; 16], vec![0; 16]))
            .unwrap_err(),
        SubmitError::ShutDown
    );
    assert_eq!(
        s.submit(Job::sign(signing, b"after".to_vec())).unwrap_err(),
        SubmitError::ShutDown
    );
    assert!(matches!(
        s.try_submit(Job::encrypt(aes, Mode::Ecb, &[], vec![0; 16])),
        Err(TrySubmitError::Invalid(SubmitError::ShutDown))
    ));
    assert!(matches!(
        s.try_submit(Job::sign(signing, b"after".to_vec())),
        Err(TrySubmitError::Invalid(SubmitError::ShutDown))
    ));
    assert_eq!(stream.push(vec![0; 16]).unwrap_err(), SubmitError::ShutDown);
    assert_eq!(
        stream.finish(vec![0; 16]).unwrap_err(),
        SubmitError::ShutDown
    );
    // The chunk pushed before shutdown was run.
    assert_eq!(stream.pending(), 1);
    let expected = ref_aes(
        &[1; 16],
        op(Direction::Encrypt, Mode::Cbc),
        &[0; 16],
        &[0; 32],
    );
    assert_eq!(stream.recv(), Some(Ok(expected.unwrap())));
    assert_eq!(
        s.stream(aes, op(Direction::Encrypt, Mode::Ofb), &[0; 16])
            .unwrap_err(),
        SubmitError::ShutDown
    );
    drop(stream);
    let m = s.metrics();
    assert_eq!(m.jobs_submitted, 2, "refused jobs are not counted");
    assert_eq!(m.jobs_completed, 2);
    assert_eq!(m.stored_states, 0, "the dropped stream's state is gone");
    // Keys are still managed after shutdown.
    assert_eq!(s.remove_key(aes), Ok(()));
    s.shutdown();
}

/// Fills a slowed single node and its tiny queues with `try_submit` until it says `Full`;
/// returns the handles of the jobs accepted on the way, and the job handed back.
fn fill_until_full(
    s: &Service,
    mut make: impl FnMut(usize) -> Job,
) -> (Vec<(usize, cryptodispatch::JobHandle)>, usize, Job) {
    let mut accepted = Vec::new();
    for i in 0..10_000 {
        match s.try_submit(make(i)) {
            Ok(h) => accepted.push((i, h)),
            Err(TrySubmitError::Full(job)) => return (accepted, i, job),
            Err(e) => panic!("job {i} refused: {e}"),
        }
    }
    panic!("the receive queue never filled up")
}

#[test]
fn try_submit_when_full_hands_the_same_job_back() {
    let s = Service::builder()
        .packet_size(16)
        .aes_cluster([NodeSpec::new().slowdown(40.0).capacity(16)])
        .ed25519_cluster([NodeSpec::new().slowdown(40.0).capacity(64)])
        .cluster_queue_len(1)
        .wait_queue_len(1)
        .receive_queue_len(1)
        .build()
        .unwrap();
    let seed = [0x71; 32];
    let signing = s.add_signing_key(&seed).unwrap();
    let raw = [0x72; 24];
    let aes = s.add_aes_key(&raw).unwrap();
    let mut g = Gen::new(7);
    let msgs: Vec<Vec<u8>> = (0..10_000).map(|i| g.bytes(8 + i % 50)).collect();

    // Sign jobs.
    let (accepted, i, job) = fill_until_full(&s, |i| Job::sign(signing, msgs[i].clone()));
    assert_eq!(job.len(), msgs[i].len());
    assert_eq!(
        job.into_data(),
        msgs[i],
        "the refused sign job comes back whole"
    );
    // Verify jobs.
    let sig = ed_sign(&seed, &msgs[0]);
    let (accepted_v, i, job) = fill_until_full(&s, |i| Job::verify(signing, msgs[i].clone(), &sig));
    assert_eq!(
        job.into_data(),
        msgs[i],
        "the refused verify job comes back whole"
    );
    // Padded AES jobs of several packets: cut, refused, put back together.
    let aes_op = padded(Direction::Encrypt, Mode::Cbc);
    let iv = [0x73; 16];
    let (accepted_a, i, job) = fill_until_full(&s, |i| Job::aes(aes, aes_op, &iv, msgs[i].clone()));
    assert_eq!(job.len(), msgs[i].len());
    // The job handed back can be submitted as it is and gives the right answer.
    let resubmitted = s.submit(job).unwrap();
    assert_eq!(
        resubmitted.wait().unwrap(),
        JobOutput::Data(ref_aes(&raw, aes_op, &iv, &msgs[i]).unwrap())
    );
    let (_, i, job) = fill_until_full(&s, |i| Job::encrypt(aes, Mode::Ofb, &iv, msgs[i].clone()));
    assert_eq!(
        job.into_data(),
        msgs[i],
        "the refused OFB job comes back whole"
    );

    for (i, h) in accepted {
        assert_eq!(h.wait(), Ok(JobOutput::Signature(ed_sign(&seed, &msgs[i]))));
    }
    for (i, h) in accepted_v {
        assert_eq!(h.wait(), Ok(JobOutput::Verified(i == 0)));
    }
    for (i, h) in accepted_a {
        assert_eq!(
            h.wait().unwrap(),
            JobOutput::Data(ref_aes(&raw, aes_op, &iv, &msgs[i]).unwrap())
        );
    }
    s.shutdown();
    let m = s.metrics();
    assert_eq!(
        m.jobs_submitted, m.jobs_completed,
        "refused jobs are not counted"
    );
    assert_eq!(m.jobs_failed, 0);
    assert_eq!(m.stored_states, 0, "refused chained jobs leave no state");
}

/// A job larger than half the receive bound is large: a tenant's large jobs are admitted while
/// it has fewer waiting than two per node, so on a cluster of two nodes four long chained jobs
/// are admitted at once (once, a second waited until the first had been placed whole, leaving
/// a node idle); a fifth is handed back, and a small job is still admitted beside them. With
/// one node a third large job waits, and another tenant's large job does not wait for it: the
/// slots are each tenant's. Every output is checked.
#[test]
fn large_jobs_are_admitted_two_per_node_and_tenant() {
    // Slowed, so that the first job's packets wait for a node for a long time (about 2048
    // chain runs of 8 packets, each tens of microseconds) while the next ones are offered.
    let slowed = || NodeSpec::new().slowdown(200.0);
    let s = Service::builder()
        .packet_size(16)
        .aes_cluster([slowed(), slowed()])
        .receive_queue_len(8)
        .build()
        .unwrap();
    let raw = [0x74; 16];
    let aes = s.add_aes_key(&raw).unwrap();
    let cbc = op(Direction::Encrypt, Mode::Cbc);
    let iv = [0x75; 16];
    let mut g = Gen::new(8);
    // 2048 packets each: far more than half the bound of 8.
    let long: Vec<Vec<u8>> = (0..6).map(|_| g.bytes(2048 * 16)).collect();
    let job = |data: &[u8]| Job::aes(aes, cbc, &iv, data.to_vec());
    let mut handles = vec![
        s.try_submit(job(&long[0]))
            .expect("an empty backlog admits"),
    ];
    for data in &long[1..4] {
        handles.push(
            s.try_submit(job(data))
                .expect("more large jobs join the first: two per node, the cluster has two"),
        );
    }
    let fifth = match s.try_submit(job(&long[4])) {
        Err(TrySubmitError::Full(back)) => back,
        other => panic!("a fifth large job must wait, got {other:?}"),
    };
    let small_data = g.bytes(32);
    let small = s
        .try_submit(job(&small_data))
        .expect("a small job is admitted beside the large ones");
    // The fifth waits for a free slot in `submit_async`, a sixth in `submit`, at once: each
    // is woken when a slot frees, and gets in.
    let (fifth, sixth) = std::thread::scope(|scope| {
        let blocking = scope.spawn(|| s.submit(job(&long[5])).unwrap());
        let (fifth, _) = common::block_on(s.submit_async(fifth));
        (fifth.unwrap(), blocking.join().unwrap())
    });
    handles.extend([fifth, sixth]);
    for (h, data) in handles.into_iter().zip(&long) {
        let expected = ref_aes(&raw, cbc, &iv, data).unwrap();
        assert_eq!(h.wait(), Ok(JobOutput::Data(expected)));
    }
    let expected = ref_aes(&raw, cbc, &iv, &small_data).unwrap();
    assert_eq!(small.wait(), Ok(JobOutput::Data(expected)));
    s.shutdown();

    // One node: two large jobs of a tenant at a time; another tenant's are its own.
    let s = Service::builder()
        .packet_size(16)
        .aes_cluster([slowed()])
        .receive_queue_len(8)
        .build()
        .unwrap();
    let other = s.add_tenant(TenantSpec::new("other")).unwrap();
    let aes = s.add_aes_key(&raw).unwrap();
    let job = |data: &[u8]| Job::aes(aes, cbc, &iv, data.to_vec());
    let mut handles = vec![
        s.try_submit(job(&long[0])).unwrap(),
        s.try_submit(job(&long[1])).unwrap(),
    ];
    assert!(matches!(
        s.try_submit(job(&long[2])),
        Err(TrySubmitError::Full(_))
    ));
    handles.push(
        s.try_submit(job(&long[2]).tenant(other))
            .expect("another tenant's large job has a slot of its own"),
    );
    for (h, data) in handles.into_iter().zip(&long) {
        let expected = ref_aes(&raw, cbc, &iv, data).unwrap();
        assert_eq!(h.wait(), Ok(JobOutput::Data(expected)));
    }
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Debug output
// ---------------------------------------------------------------------------------------------

/// Every way the bytes could show up in text: hex (either case, any 4-byte window) and the
/// decimal list `Debug` gives a byte array.
fn assert_no_key_bytes(text: &str, key: &[u8], what: &str) {
    let lower = text.to_lowercase();
    for w in key.windows(4) {
        let h = hex::encode(w);
        assert!(!lower.contains(&h), "{what} shows key bytes {h}: {text}");
    }
    let decimal = format!("{}, {}, {}", key[0], key[1], key[2]);
    assert!(!text.contains(&decimal), "{what} shows key bytes: {text}");
}

#[test]
fn debug_output_never_shows_key_bytes() {
    let s = service();
    let mut g = Gen::new(0xDEB6);
    let aes_raw = g.bytes(32);
    let seed: [u8; 32] = g.array();
    let aes = s.add_aes_key(&aes_raw).unwrap();
    let signing = s.add_signing_key(&seed).unwrap();
    let public = s.add_verifying_key(&ed_public(&seed)).unwrap();
    let iv = g.bytes(16);

    let mut texts: Vec<(String, String)> = Vec::new();
    let mut show = |what: &str, d: &dyn std::fmt::Debug| {
        texts.push((what.to_owned(), format!("{d:?}")));
        texts.push((what.to_owned(), format!("{d:#?}")));
    };
    show("service", &s);
    show("key ids", &(aes, signing, public));
    show(
        "aes job",
        &Job::encrypt(aes, Mode::Cbc, &iv, aes_raw.clone()),
    );
    show("sign job", &Job::sign(signing, seed.to_vec()));
    show("verify job", &Job::verify(public, seed.to_vec(), &[0; 64]));
    let handle = s
        .submit(Job::encrypt(aes, Mode::Cfb, &iv, vec![0; 40]))
        .unwrap();
    show("handle", &handle);
    handle.wait().unwrap();
    let stream = s
        .stream(aes, op(Direction::Encrypt, Mode::Ofb), &iv)
        .unwrap();
    show("stream", &stream);
    drop(stream);
    show("metrics", &s.metrics());
    show("error", &s.submit(Job::sign(aes, vec![1])).unwrap_err());
    show(
        "try_submit error",
        &TrySubmitError::Full(Job::aes(
            aes,
            padded(Direction::Encrypt, Mode::Ecb),
            &iv,
            aes_raw.clone(),
        )),
    );
    show("crypto::AesKey", &AesKey::new(&aes_raw).unwrap());
    show("crypto::SigningKey", &SigningKey::from_seed(&seed).unwrap());
    show("service after use", &s);
    for (what, text) in &texts {
        assert_no_key_bytes(text, &aes_raw, what);
        assert_no_key_bytes(text, &seed, what);
    }
    // Display of errors, too.
    let err = s.submit(Job::sign(aes, vec![1])).unwrap_err().to_string();
    assert_no_key_bytes(&err, &aes_raw, "error display");
    assert_no_key_bytes(&s.metrics().to_string(), &aes_raw, "metrics display");
}

/// Empty jobs meet backpressure like any other: a node's queue holds at most its slots, and
/// the receive bound counts packets, so a flood of empty sign jobs on a slow node is refused
/// within the configured bounds instead of piling up without end.
#[test]
fn a_flood_of_empty_jobs_is_refused_within_the_bounds() {
    for slots in [1u32, 4] {
        let s = Service::builder()
            .ed25519_cluster([NodeSpec::new().slowdown(1000.0).slots(slots)])
            .cluster_queue_len(1)
            .wait_queue_len(1)
            .receive_queue_len(1)
            .build()
            .unwrap();
        let key = s.add_signing_key(&[3; 32]).unwrap();
        let mut accepted = Vec::new();
        let mut refused = 0;
        for _ in 0..100_000 {
            match s.try_submit(Job::sign(key, Vec::new())) {
                Ok(h) => accepted.push(h),
                Err(TrySubmitError::Full(_)) => refused += 1,
                Err(e) => panic!("{e}"),
            }
            if refused >= 1000 {
                break;
            }
        }
        let depth = s.metrics().nodes[0].queue_depth;
        assert!(
            depth <= slots,
            "node queue depth {depth} over {slots} slots"
        );
        // The node's slots and the one-packet receive bound, and what the node finished
        // meanwhile (each empty signature takes about 15 ms on a node slowed 1000 times).
        let done = s.metrics().jobs_completed as usize;
        assert!(
            accepted.len() <= slots as usize + 1 + done + 1,
            "{} accepted with {slots} slots, {done} done",
            accepted.len()
        );
        assert!(refused >= 1000);
        for h in accepted {
            assert!(h.wait().unwrap().signature().is_some());
        }
    }
}
