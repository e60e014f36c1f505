//! One AES key expanded by AWS-LC (`aws-lc-rs`, the `aws-lc` feature) for every mode: the keys
//! an [`AesKey`](crate::crypto::AesKey) holds beside its RustCrypto schedule. What runs a packet
//! with them is `awslc.rs`; this file is apart so that the key type depends on nothing above
//! it. `aws-lc-rs` zeroizes its cipher keys on drop; the key's bytes, kept for the streaming
//! keys of CTR and CBC decryption, are zeroized on drop here.

use std::fmt;

use aws_lc_rs::aead::{self, LessSafeKey, UnboundKey};
use aws_lc_rs::cipher::{self, DecryptingKey, EncryptingKey, UnboundCipherKey};

use zeroize::Zeroizing;

use crate::crypto::error::CryptoError;

/// One AES key's AWS-LC keys: a cipher key per mode and direction, and the GCM key.
pub(super) struct AwsLcKeys {
    pub(super) ecb_enc: EncryptingKey,
    pub(super) ecb_dec: DecryptingKey,
    pub(super) cbc_enc: EncryptingKey,
    pub(super) cbc_dec: DecryptingKey,
    pub(super) cfb_enc: EncryptingKey,
    pub(super) cfb_dec: DecryptingKey,
    /// OFB and CTR are their own inverses: one key each serves both directions.
    pub(super) ofb: EncryptingKey,
    pub(super) ctr: EncryptingKey,
    pub(super) gcm: LessSafeKey,
    /// The cipher and the key's bytes, for a streaming key per packet run from one buffer into
    /// another (CTR, CBC decryption): `aws-lc-rs` makes one from an unbound key, which it
    /// consumes.
    pub(super) algorithm: &'static cipher::Algorithm,
    pub(super) raw: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for AwsLcKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AwsLcKeys(..)")
    }
}

/// What AWS-LC refused; it happens only on a key length `AesKey::new` has already checked.
fn refused(key: &[u8]) -> CryptoError {
    CryptoError::KeyLength {
        algorithm: "AES (AWS-LC)",
        got: key.len(),
        expected: "16, 24 or 32",
    }
}

impl AwsLcKeys {
    /// Expands `key` (16, 24 or 32 bytes) for every mode.
    pub(super) fn new(key: &[u8]) -> Result<Self, CryptoError> {
        let (algorithm, aead_algorithm) = match key.len() {
            16 => (&cipher::AES_128, &aead::AES_128_GCM),
            24 => (&cipher::AES_192, &aead::AES_192_GCM),
            32 => (&cipher::AES_256, &aead::AES_256_GCM),
            _ => return Err(refused(key)),
        };
        let unbound = || UnboundCipherKey::new(algorithm, key).map_err(|_| refused(key));
        let err = |_| refused(key);
        Ok(AwsLcKeys {
            ecb_enc: EncryptingKey::ecb(unbound()?).map_err(err)?,
            ecb_dec: DecryptingKey::ecb(unbound()?).map_err(err)?,
            cbc_enc: EncryptingKey::cbc(unbound()?).map_err(err)?,
            cbc_dec: DecryptingKey::cbc(unbound()?).map_err(err)?,
            cfb_enc: EncryptingKey::cfb128(unbound()?).map_err(err)?,
            cfb_dec: DecryptingKey::cfb128(unbound()?).map_err(err)?,
            ofb: EncryptingKey::ofb(unbound()?).map_err(err)?,
            ctr: EncryptingKey::ctr(unbound()?).map_err(err)?,
            gcm: LessSafeKey::new(UnboundKey::new(aead_algorithm, key).map_err(err)?),
            algorithm,
            raw: Zeroizing::new(key.to_vec()),
        })
    }
}
