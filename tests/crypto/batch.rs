//! Batch verification agrees with `verify_strict` (one by one) on valid, tampered and malformed
//! signatures, and finds exactly which ones fail.

use cryptodispatch::crypto::{BatchItem, SigningKey, VerifyingKey, verify_batch};
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use sha2::{Digest, Sha512};

struct Line {
    key: VerifyingKey,
    msg: Vec<u8>,
    sig: [u8; 64],
}

fn lines(n: usize) -> Vec<Line> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/ed25519/sign.input"
    ))
    .unwrap();
    text.lines()
        .take(n)
        .map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let pk = hex::decode(f[1]).unwrap();
            let msg = hex::decode(f[2]).unwrap();
            let sig: [u8; 64] = hex::decode(f[3]).unwrap()[..64].try_into().unwrap();
            Line {
                key: VerifyingKey::from_bytes(&pk).unwrap(),
                msg,
                sig,
            }
        })
        .collect()
}

fn one_by_one(items: &[BatchItem<'_>]) -> Vec<bool> {
    items
        .iter()
        .map(|i| i.key.verify(i.msg, i.sig).unwrap())
        .collect()
}

fn check(lines: &[Line]) -> Vec<bool> {
    let items: Vec<BatchItem<'_>> = lines
        .iter()
        .map(|l| BatchItem {
            key: &l.key,
            msg: &l.msg,
            sig: &l.sig,
        })
        .collect();
    let batch = verify_batch(&items);
    assert_eq!(batch, one_by_one(&items));
    batch
}

#[test]
fn all_valid_signatures_pass() {
    let ls = lines(256);
    assert!(check(&ls).iter().all(|&v| v));
}

#[test]
fn the_bad_ones_are_found() {
    let mut ls = lines(200);
    let bad = [0usize, 3, 64, 65, 127, 199];
    for &i in &bad {
        if i % 2 == 0 {
            ls[i].sig[40] ^= 0x02; // S
        } else {
            ls[i].msg.push(0); // message
        }
    }
    let result = check(&ls);
    for (i, ok) in result.iter().enumerate() {
        assert_eq!(*ok, !bad.contains(&i), "signature {i}");
    }
    // All bad.
    for l in &mut ls {
        l.sig[1] ^= 0x80;
    }
    assert!(check(&ls).iter().all(|&v| !v));
}

/// The eight points of small order: the torsion part T = P − [8⁻¹]([8]P) of points P decoded
/// from small y values, and its multiples.
fn torsion_points() -> Vec<EdwardsPoint> {
    let eighth = Scalar::from(8u8).invert();
    let mut points: Vec<EdwardsPoint> = Vec::new();
    for b in 2u8..=40 {
        let mut y = [0u8; 32];
        y[0] = b;
        let Some(p) = CompressedEdwardsY(y).decompress() else {
            continue;
        };
        let t = p - eighth * p.mul_by_cofactor();
        let mut m = EdwardsPoint::identity();
        for _ in 0..8 {
            if !points.contains(&m) {
                points.push(m);
            }
            m += t;
        }
    }
    assert_eq!(points.len(), 8);
    assert!(points.iter().all(|p| p.is_small_order()));
    points
}

/// A signature by `signer` on `msg` whose R is `r` (any point): s = H(R‖A‖M)·a, so that
/// [s]B − [k]A = 0 and the cofactorless equation's residue is −R.
fn forge_with_r(signer: &ed25519_dalek::SigningKey, r: &EdwardsPoint, msg: &[u8]) -> [u8; 64] {
    let r_bytes = r.compress().to_bytes();
    let mut h = Sha512::new();
    h.update(r_bytes);
    h.update(signer.verifying_key().as_bytes());
    h.update(msg);
    let k = Scalar::from_bytes_mod_order_wide(&h.finalize().into());
    let s = k * signer.to_scalar();
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&r_bytes);
    sig[32..].copy_from_slice(s.as_bytes());
    sig
}

#[test]
fn small_order_and_non_canonical_r_are_refused_as_verify_strict_does() {
    let seed = [42u8; 32];
    let dalek = ed25519_dalek::SigningKey::from_bytes(&seed);
    let key = SigningKey::from_seed(&seed).unwrap().verifying_key();
    let mut cases = Vec::new();
    // R of small order, with s chosen so that only a torsion residue −R remains: batch
    // verification alone would accept many of these; verify_strict refuses them all.
    for t in torsion_points() {
        for m in 0..8u8 {
            let msg = vec![m; 33];
            cases.push(Line {
                key,
                sig: forge_with_r(&dalek, &t, &msg),
                msg,
            });
        }
    }
    // R non-canonical: the identity encoded as y = p + 1.
    let mut y = [0xffu8; 32];
    y[0] = 0xee;
    y[31] = 0x7f;
    let mut l = Line {
        key,
        msg: b"x".to_vec(),
        sig: [0; 64],
    };
    l.sig[..32].copy_from_slice(&y);
    cases.push(l);
    // Valid ones in the same batch.
    let valid = lines(8);
    let n_valid = valid.len();
    cases.extend(valid);
    let result = check(&cases);
    assert_eq!(result.iter().filter(|&&v| v).count(), n_valid);
    assert!(result[result.len() - n_valid..].iter().all(|&v| v));
}

#[test]
fn weak_and_mixed_order_keys_go_one_by_one() {
    // A weak key: the identity as public key. Signing with it is impossible, but a "signature"
    // with s = 0 and R = identity satisfies the cofactorless equation; verify_strict refuses it.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let weak = VerifyingKey::from_bytes(&identity).unwrap();
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&identity);
    let msg = b"anything".to_vec();
    let mut ls = lines(6);
    ls.push(Line {
        key: weak,
        msg,
        sig,
    });
    let result = check(&ls);
    assert!(!result[6]);
    assert!(result[..6].iter().all(|&v| v));

    // A signer's own key still verifies through the batch path.
    let signer = SigningKey::from_seed(&[9; 32]).unwrap();
    let key = signer.verifying_key();
    let own: Vec<Line> = (0..10u8)
        .map(|i| Line {
            key,
            msg: vec![i; 40],
            sig: signer.sign(&[i; 40]),
        })
        .collect();
    assert!(check(&own).iter().all(|&v| v));
}
