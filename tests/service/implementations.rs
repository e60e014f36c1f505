//! Which implementation the nodes run AES on (docs/ALGORITHM.md §15.3): a service measures the
//! implementations when it is built, or runs the one pinned with
//! `ServiceBuilder::aes_implementation`; the choice shows in the metrics.
//!
//! - Through a service pinned to each implementation built (RustCrypto, the lanes at every
//!   width, AWS-LC and ring with their features), every mode and direction, padded and not, at lengths that
//!   make one packet, several, and a part block, with many jobs in flight so that lane sets
//!   form: the bytes are the reference's (RustCrypto's mode crates, `aes-gcm`).
//! - The measured table names a candidate with a figure for every operation, the nodes' lanes
//!   follow it, and pinning shows in the metrics; AWS-LC without its feature is refused.

use crate::common;

use common::{Gen, cores, plain_ops, ref_aes, ref_gcm_seal};
use cryptodispatch::crypto::AesImpl;
use cryptodispatch::{
    AesOp, Direction, Job, JobHandle, JobOutput, Mode, NodeSpec, Padding, Service,
};

fn nodes(n: usize) -> Vec<NodeSpec> {
    (0..n)
        .map(|i| match cores() {
            0 => NodeSpec::new(),
            c => NodeSpec::pinned(i % c),
        })
        .collect()
}

#[test]
fn every_implementation_gives_the_reference_bytes_through_the_service() {
    let mut g = Gen::new(0x1a7e5);
    // One packet, a packet and a part, several packets (packets of 256 bytes), and a part
    // block where the mode allows it.
    let lengths = [16usize, 64, 256, 272, 1024, 2000, 4096];
    for implementation in AesImpl::all() {
        let s = Service::builder()
            .packet_size(256)
            .inline_limit(0)
            .aes_implementation(implementation)
            .aes_cluster(nodes(2))
            .build()
            .unwrap();
        let key_bytes = g.bytes(16);
        let key = s.add_aes_key(&key_bytes).unwrap();
        let mut expected: Vec<(JobHandle, Vec<u8>, String)> = Vec::new();
        for op in plain_ops() {
            for &len in &lengths {
                let len = if op.mode.needs_whole_blocks() && op.padding == Padding::None {
                    len - len % 16
                } else if op.mode.needs_whole_blocks() {
                    len
                } else {
                    len - 3 // a part block for the stream modes
                };
                let iv = g.bytes(16);
                let mut data = g.bytes(len);
                if op.direction == Direction::Decrypt && op.padding == Padding::Pkcs7 {
                    // Valid padding to remove: the reference's encryption of other bytes.
                    let enc = AesOp::new(Direction::Encrypt, op.mode).with_padding(Padding::Pkcs7);
                    data = ref_aes(&key_bytes, enc, &iv, &data).unwrap();
                }
                let want = ref_aes(&key_bytes, op, &iv, &data).unwrap();
                let iv = if op.mode.takes_iv() { iv } else { Vec::new() };
                let h = s.submit(Job::aes(key, op, &iv, data)).unwrap();
                expected.push((h, want, format!("{implementation} {op:?} {len}")));
            }
        }
        // GCM: one packet (one call where the implementation seals whole messages) and several,
        // with keys of every size (ring takes no 24-byte key: those run on RustCrypto).
        let gcm_keys = [key_bytes.clone(), g.bytes(24), g.bytes(32)];
        for (key_bytes, len) in gcm_keys
            .iter()
            .flat_map(|k| [0usize, 100, 256, 1000].map(|n| (k, n)))
        {
            let key = s.add_aes_key(key_bytes).unwrap();
            let (nonce, aad, pt) = (g.bytes(12), g.bytes(20), g.bytes(len));
            let (ct, tag) = ref_gcm_seal(key_bytes, &nonce, &aad, &pt);
            let sealed = s.submit(Job::gcm_encrypt(key, &nonce, aad.clone(), pt.clone()));
            let opened = s.submit(Job::gcm_decrypt(key, &nonce, aad, ct.clone(), &tag));
            match sealed.unwrap().wait().unwrap() {
                JobOutput::Sealed { ciphertext, tag: t } => {
                    assert_eq!(
                        (ciphertext, t),
                        (ct, tag),
                        "{implementation} gcm seal {len}"
                    );
                }
                other => panic!("{implementation}: a GCM seal gave {other:?}"),
            }
            let out = opened.unwrap().wait().unwrap();
            assert_eq!(out.into_data(), Some(pt), "{implementation} gcm open {len}");
        }
        for (h, want, what) in expected {
            assert_eq!(h.wait().unwrap().into_data(), Some(want), "{what}");
        }
        assert_eq!(s.metrics().jobs_failed, 0);
    }
}

#[test]
fn a_gcm_job_of_one_packet_with_a_wrong_tag_releases_nothing() {
    for implementation in AesImpl::candidates(AesOp::new(Direction::Decrypt, Mode::Gcm)) {
        let s = Service::builder()
            .inline_limit(0)
            .aes_implementation(implementation)
            .aes_cluster(nodes(1))
            .build()
            .unwrap();
        let key = s.add_aes_key(&[9; 16]).unwrap();
        let (ct, mut tag) = ref_gcm_seal(&[9; 16], &[1; 12], b"aad", &[0x42; 500]);
        tag[3] ^= 1;
        let err = s
            .submit(Job::gcm_decrypt(key, &[1; 12], b"aad".to_vec(), ct, &tag))
            .unwrap()
            .wait()
            .unwrap_err();
        assert_eq!(
            err,
            cryptodispatch::JobError::Crypto(
                cryptodispatch::error::CryptoError::AuthenticationFailed
            ),
            "{implementation}"
        );
    }
}

#[test]
fn the_operations_run_show_their_measured_choice_in_the_metrics() {
    let s = Service::builder()
        .packet_size(1024)
        .aes_cluster(nodes(2))
        .build()
        .unwrap();
    let key = s.add_aes_key(&[4; 16]).unwrap();
    let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let ctr = AesOp::new(Direction::Decrypt, Mode::Ctr);
    for op in [cbc, ctr] {
        s.submit(Job::aes(key, op, &[0; 16], vec![1; 5120]))
            .unwrap()
            .wait()
            .unwrap();
    }
    let m = s.metrics();
    // At least the two operations run (a service built earlier in this process at this
    // packet size may have run others: the table is the process's).
    let shown: Vec<AesOp> = m.aes_implementations.iter().map(|c| c.op).collect();
    assert!(shown.contains(&cbc) && shown.contains(&ctr), "{shown:?}");
    for c in &m.aes_implementations {
        assert!(AesImpl::candidates(c.op).contains(&c.implementation), "{c}");
        assert!(c.ns_per_byte.is_some_and(|ns| ns > 0.0), "{c}");
        if let AesImpl::Lanes { .. } = c.implementation {
            assert!(c.op.is_serial(), "{c}");
        }
    }
    assert!(m.to_string().contains("aes implementations: "));
}

#[test]
fn a_pinned_implementation_shows_in_the_metrics() {
    let lanes = AesImpl::Lanes { width: 16 };
    let s = Service::builder()
        .aes_implementation(lanes)
        .aes_cluster(nodes(1))
        .build()
        .unwrap();
    let m = s.metrics();
    // Twelve operations, then the packets of GCM jobs cut into several, each direction: the
    // lanes cannot chain GCM, so those run on RustCrypto.
    assert_eq!(m.aes_implementations.len(), 14);
    let chained: Vec<String> = m.aes_implementations[12..]
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        chained,
        [
            "gcm-encrypt-chained rustcrypto",
            "gcm-decrypt-chained rustcrypto"
        ]
    );
    for c in &m.aes_implementations {
        let want = if c.op.is_serial() && !c.chained {
            lanes
        } else {
            AesImpl::RustCrypto
        };
        assert_eq!((c.implementation, c.ns_per_byte), (want, None), "{c}");
    }
    // A service without an AES cluster has no table to show.
    let s = Service::builder()
        .ed25519_cluster(nodes(1))
        .build()
        .unwrap();
    assert!(s.metrics().aes_implementations.is_empty());
}

#[test]
fn an_implementation_that_cannot_run_is_refused_at_build() {
    let err = Service::builder()
        .aes_implementation(AesImpl::Lanes { width: 65 })
        .aes_cluster(nodes(1))
        .build()
        .unwrap_err();
    assert!(
        matches!(err, cryptodispatch::BuildError::Implementation(_)),
        "{err}"
    );
    if !AesImpl::AwsLc.is_built() {
        let err = Service::builder()
            .aes_implementation(AesImpl::AwsLc)
            .aes_cluster(nodes(1))
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("aws-lc"), "{err}");
    }
}
