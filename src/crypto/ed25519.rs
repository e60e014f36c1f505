//! Ed25519 signing and verification (RFC 8032), through `ed25519-dalek`.
//!
//! A signature covers the whole message (Ed25519 hashes it twice), so a sign or verify job is
//! one packet, however long. Verification uses `verify_strict`: signatures with a
//! small-order component or a non-canonical encoding are refused, and a wrong signature is the
//! answer `false`, not an error. Only a signature of the wrong length is an error.
//!
//! # Batch verification
//!
//! [`verify_batch`] checks many signatures at once with `ed25519-dalek`'s batch verification
//! (one multiscalar multiplication with random weights, about twice as fast per signature),
//! and when a batch fails, splits it in halves until it has found which signatures are bad.
//! Batch verification is cofactorless like `verify_strict`, but lenient where `verify_strict`
//! is strict, so a screen runs first and sends to `verify_strict` every signature whose key is
//! weak or has a torsion component (found once, when the key is decoded), and refuses every
//! signature whose R is a non-canonical encoding or a point of small order. What remains can
//! differ from `verify_strict` in one case only: a signer who crafts an R with a torsion
//! component (not of small order) can make a signature that `verify_strict` refuses and batch
//! verification accepts with probability up to 1/2. No one without the signing key can.

use std::fmt;

use ed25519_dalek::{Signature, Signer};
use zeroize::ZeroizeOnDrop;

use crate::crypto::error::CryptoError;

/// Length of an Ed25519 signature in bytes.
pub const SIGNATURE_LEN: usize = 64;
/// Length of an Ed25519 seed (secret key) and of a public key, in bytes.
pub const KEY_LEN: usize = 32;

/// An Ed25519 signing key, made from a 32-byte seed. The secret is zeroized on drop
/// (`ed25519-dalek`'s `zeroize` feature); `Debug` shows only the public key.
#[derive(Clone)]
pub struct SigningKey(ed25519_dalek::SigningKey);

impl ZeroizeOnDrop for SigningKey {}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("public", &self.verifying_key())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// The key for a 32-byte seed (RFC 8032's secret key).
    ///
    /// # Errors
    /// [`CryptoError::KeyLength`] unless `seed` is 32 bytes.
    pub fn from_seed(seed: &[u8]) -> Result<Self, CryptoError> {
        let seed: &[u8; KEY_LEN] = seed.try_into().map_err(|_| CryptoError::KeyLength {
            algorithm: "Ed25519",
            got: seed.len(),
            expected: "32",
        })?;
        Ok(SigningKey(ed25519_dalek::SigningKey::from_bytes(seed)))
    }

    /// The public half.
    pub fn verifying_key(&self) -> VerifyingKey {
        // A = [a]B: in the prime-order subgroup by construction.
        VerifyingKey {
            key: self.0.verifying_key(),
            batchable: true,
        }
    }

    /// Signs `msg`; Ed25519 is deterministic, so the same key and message give the same bytes.
    pub fn sign(&self, msg: &[u8]) -> [u8; SIGNATURE_LEN] {
        self.0.sign(msg).to_bytes()
    }
}

/// An Ed25519 public key.
#[derive(Clone, Copy)]
pub struct VerifyingKey {
    key: ed25519_dalek::VerifyingKey,
    /// Neither weak nor with a torsion component: safe to verify in a batch.
    batchable: bool,
}

impl PartialEq for VerifyingKey {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for VerifyingKey {}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifyingKey(")?;
        for b in self.key.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl VerifyingKey {
    /// Decodes a 32-byte public key.
    ///
    /// # Errors
    /// [`CryptoError::KeyLength`] unless 32 bytes; [`CryptoError::InvalidVerifyingKey`] if the
    /// bytes do not decode to a curve point.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CryptoError> {
        let bytes: &[u8; KEY_LEN] = bytes.try_into().map_err(|_| CryptoError::KeyLength {
            algorithm: "Ed25519 public key",
            got: bytes.len(),
            expected: "32",
        })?;
        let key = ed25519_dalek::VerifyingKey::from_bytes(bytes)
            .map_err(|_| CryptoError::InvalidVerifyingKey)?;
        let batchable = !key.is_weak() && key.to_edwards().is_torsion_free();
        Ok(VerifyingKey { key, batchable })
    }

    /// The 32 encoded bytes.
    pub fn to_bytes(&self) -> [u8; KEY_LEN] {
        self.key.to_bytes()
    }

    /// Whether `sig` is a valid signature of `msg` under this key, by `verify_strict`.
    ///
    /// # Errors
    /// [`CryptoError::SignatureLength`] unless `sig` is 64 bytes. A 64-byte signature that does
    /// not verify is `Ok(false)`.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<bool, CryptoError> {
        let sig: &[u8; SIGNATURE_LEN] = sig
            .try_into()
            .map_err(|_| CryptoError::SignatureLength { got: sig.len() })?;
        Ok(self.verify_exact(msg, sig))
    }

    fn verify_exact(&self, msg: &[u8], sig: &[u8; SIGNATURE_LEN]) -> bool {
        self.key
            .verify_strict(msg, &Signature::from_bytes(sig))
            .is_ok()
    }
}

/// One signature of a batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchItem<'a> {
    /// The key to verify against.
    pub key: &'a VerifyingKey,
    /// The signed message.
    pub msg: &'a [u8],
    /// The signature.
    pub sig: &'a [u8; SIGNATURE_LEN],
}

/// Below this many signatures, a failed batch is resolved one by one.
const SPLIT_FLOOR: usize = 4;

/// Verifies many signatures at once (see the module docs): `result[i]` says whether item `i`
/// verifies.
pub fn verify_batch(items: &[BatchItem<'_>]) -> Vec<bool> {
    let mut result = vec![false; items.len()];
    let mut candidates = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if !item.key.batchable {
            result[i] = item.key.verify_exact(item.msg, item.sig);
        } else if r_is_acceptable(item.sig) {
            candidates.push(i);
        }
    }
    settle(items, &candidates, &mut result);
    result
}

/// Marks the `idx` items: all true if they pass as one batch, else by halves.
fn settle(items: &[BatchItem<'_>], idx: &[usize], result: &mut [bool]) {
    if idx.len() < SPLIT_FLOOR {
        for &i in idx {
            result[i] = items[i].key.verify_exact(items[i].msg, items[i].sig);
        }
        return;
    }
    let msgs: Vec<&[u8]> = idx.iter().map(|&i| items[i].msg).collect();
    let sigs: Vec<Signature> = idx
        .iter()
        .map(|&i| Signature::from_bytes(items[i].sig))
        .collect();
    let keys: Vec<ed25519_dalek::VerifyingKey> = idx.iter().map(|&i| items[i].key.key).collect();
    if ed25519_dalek::verify_batch(&msgs, &sigs, &keys).is_ok() {
        for &i in idx {
            result[i] = true;
        }
        return;
    }
    let (a, b) = idx.split_at(idx.len() / 2);
    settle(items, a, result);
    settle(items, b, result);
}

/// Whether the signature's R is a canonical encoding of a point not of small order: what
/// `verify_strict` demands of R and batch verification does not check.
fn r_is_acceptable(sig: &[u8; SIGNATURE_LEN]) -> bool {
    let mut y = [0u8; 32];
    y.copy_from_slice(&sig[..32]);
    y[31] &= 0x7f;
    // Canonical: y < p = 2^255 - 19, whose little-endian bytes are ed ff … ff 7f.
    let canonical = !(y[31] == 0x7f && y[1..31].iter().all(|&b| b == 0xff) && y[0] >= 0xed);
    canonical && !small_order_ys().contains(&y)
}

/// The y-coordinates (sign bit cleared) of the eight points of small order, computed once from
/// `curve25519-dalek`'s public API: the torsion part T = P − [8⁻¹ mod l]([8]P) of a point P
/// whose torsion part has order 8 generates them all.
fn small_order_ys() -> &'static [[u8; 32]] {
    use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
    use curve25519_dalek::scalar::Scalar;
    use curve25519_dalek::traits::Identity;
    static YS: std::sync::OnceLock<Vec<[u8; 32]>> = std::sync::OnceLock::new();
    YS.get_or_init(|| {
        let eighth = Scalar::from(8u8).invert();
        let generator = (2u8..=255)
            .filter_map(|b| {
                let mut y = [0u8; 32];
                y[0] = b;
                CompressedEdwardsY(y).decompress()
            })
            .map(|p| p - eighth * p.mul_by_cofactor())
            .find(|t| {
                let two = t + t;
                two + two != EdwardsPoint::identity()
            })
            .expect("some small y decodes to a point with a torsion part of order 8");
        let mut ys: Vec<[u8; 32]> = Vec::new();
        let mut t = EdwardsPoint::identity();
        for _ in 0..8 {
            let mut y = t.compress().to_bytes();
            y[31] &= 0x7f;
            if !ys.contains(&y) {
                ys.push(y);
            }
            t += generator;
        }
        ys
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_then_verify_and_reject_tampering() {
        let key = SigningKey::from_seed(&[5; 32]).unwrap();
        let sig = key.sign(b"hello");
        let public = key.verifying_key();
        assert_eq!(public.verify(b"hello", &sig), Ok(true));
        assert_eq!(public.verify(b"hellp", &sig), Ok(false));
        let mut bad = sig;
        bad[10] ^= 1;
        assert_eq!(public.verify(b"hello", &bad), Ok(false));
        assert_eq!(
            public.verify(b"hello", &sig[..63]),
            Err(CryptoError::SignatureLength { got: 63 })
        );
    }

    #[test]
    fn key_lengths_are_checked() {
        assert!(matches!(
            SigningKey::from_seed(&[0; 31]),
            Err(CryptoError::KeyLength { got: 31, .. })
        ));
        assert!(matches!(
            VerifyingKey::from_bytes(&[0; 33]),
            Err(CryptoError::KeyLength { got: 33, .. })
        ));
    }

    #[test]
    fn debug_shows_no_secret() {
        let seed = [0x5A; 32];
        let key = SigningKey::from_seed(&seed).unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains(&"5a".repeat(4)), "{shown}");
        assert!(shown.contains("VerifyingKey("), "{shown}");
    }
}
