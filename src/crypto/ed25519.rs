//! Ed25519 signing and verification (RFC 8032), through `ed25519-dalek`.
//!
//! A signature covers the whole message (Ed25519 hashes it twice), so a sign or verify job is
//! one packet, however long. Verification uses `verify_strict`: signatures with a
//! small-order component or a non-canonical encoding are refused, and a wrong signature is the
//! answer `false`, not an error. Only a signature of the wrong length is an error.

use std::fmt;

use ed25519_dalek::{Signature, Signer};
use zeroize::ZeroizeOnDrop;

use crate::error::CryptoError;

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
        VerifyingKey(self.0.verifying_key())
    }

    /// Signs `msg`; Ed25519 is deterministic, so the same key and message give the same bytes.
    pub fn sign(&self, msg: &[u8]) -> [u8; SIGNATURE_LEN] {
        self.0.sign(msg).to_bytes()
    }
}

/// An Ed25519 public key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VerifyingKey(ed25519_dalek::VerifyingKey);

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifyingKey(")?;
        for b in self.0.as_bytes() {
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
        ed25519_dalek::VerifyingKey::from_bytes(bytes)
            .map(VerifyingKey)
            .map_err(|_| CryptoError::InvalidVerifyingKey)
    }

    /// The 32 encoded bytes.
    pub fn to_bytes(&self) -> [u8; KEY_LEN] {
        self.0.to_bytes()
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
        let sig = Signature::from_bytes(sig);
        Ok(self.0.verify_strict(msg, &sig).is_ok())
    }
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
