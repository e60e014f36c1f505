//! AES-GCM through `ring` (the `ring` feature): a whole message sealed or opened in one call of
//! ring's assembly, which on x86-64 runs AES-NI with CLMUL, and VAES with VPCLMULQDQ on 256-bit
//! vectors where the CPU has them (AVX2). ring has no AES-192 GCM and no raw AES or CTR, so it
//! runs only GCM jobs of one packet with a 128- or 256-bit key; the callers take a key without
//! one to the RustCrypto path, which gives the same bytes.
//!
//! ring does not zeroize its keys. The key is kept in a box of its own, and on drop the box is
//! overwritten with the schedule of the all-zero key before it is freed (the overwrite made
//! observable with `black_box`, so that it is not removed as a dead store). Copies the
//! compiler makes on the stack while the key is built are not reached.

use std::fmt;
use std::hint::black_box;

use ring::aead::{AES_128_GCM, AES_256_GCM, Aad, Algorithm, LessSafeKey, Nonce, UnboundKey};
use zeroize::Zeroize;

use crate::crypto::error::CryptoError;
use crate::crypto::gcm::{MAX_TEXT_LEN, TAG_LEN, Tag, check_nonce, check_tag, check_text_len};

/// One AES key expanded by ring for GCM.
pub(super) struct RingGcmKey {
    key: Box<LessSafeKey>,
    algorithm: &'static Algorithm,
}

impl fmt::Debug for RingGcmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RingGcmKey(..)")
    }
}

impl RingGcmKey {
    /// Expands `key` for GCM: `None` for a 24-byte key, which ring does not take, or any
    /// length ring refuses (`AesKey::new` has checked it already).
    pub(super) fn new(key: &[u8]) -> Option<Self> {
        let algorithm = match key.len() {
            16 => &AES_128_GCM,
            32 => &AES_256_GCM,
            _ => return None,
        };
        let unbound = UnboundKey::new(algorithm, key).ok()?;
        Some(RingGcmKey {
            key: Box::new(LessSafeKey::new(unbound)),
            algorithm,
        })
    }

    /// Seals a whole GCM message in place in one call and returns its tag.
    pub(super) fn seal_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<Tag, CryptoError> {
        let nonce = Nonce::assume_unique_for_key(*check_nonce(nonce)?);
        check_text_len(buf.len())?;
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(aad), buf)
            .map_err(|_| CryptoError::MessageTooLong {
                len: buf.len() as u64,
                max: MAX_TEXT_LEN,
            })?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Opens a whole GCM message in place in one call. On a tag mismatch `buf` is zeroed:
    /// ring decrypts as it hashes, so plaintext may be in it, and none is released.
    pub(super) fn open_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let nonce = Nonce::assume_unique_for_key(*check_nonce(nonce)?);
        let tag = ring::aead::Tag::from(*check_tag(tag)?);
        check_text_len(buf.len())?;
        if self
            .key
            .open_in_place_separate_tag(nonce, Aad::from(aad), tag, buf, 0..)
            .is_err()
        {
            buf.zeroize();
            return Err(CryptoError::AuthenticationFailed);
        }
        Ok(())
    }
}

impl Drop for RingGcmKey {
    fn drop(&mut self) {
        let zero = [0u8; 32];
        let len = self.algorithm.key_len();
        if let Ok(unbound) = UnboundKey::new(self.algorithm, &zero[..len]) {
            *self.key = LessSafeKey::new(unbound);
            black_box(&*self.key);
        }
    }
}
