//! AES-GCM through ring (the `ring` feature): a whole message sealed or opened in one call of
//! ring's assembly, which on x86-64 runs AES-NI with CLMUL, and VAES with VPCLMULQDQ on 256-bit
//! vectors where the CPU has them (AVX2). ring has no AES-192 GCM and no raw AES or CTR, so it
//! runs only GCM jobs of one packet with a 128- or 256-bit key; the callers take a key without
//! one to the RustCrypto path, which gives the same bytes. The key type is `ring_keys.rs`.

use ring::aead::{Aad, Nonce};

use crate::crypto::error::CryptoError;
use crate::crypto::gcm::{
    Tag, check_nonce, check_tag, check_text_len, one_call_opened, one_call_tag,
};
use crate::crypto::ring_keys::RingGcmKey;

impl RingGcmKey {
    /// Seals a whole GCM message in place in one call and returns its tag.
    pub(super) fn seal_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<Tag, CryptoError> {
        let nonce = Nonce::assume_unique_for_key(*check_nonce(nonce)?);
        check_text_len(buf.len())?;
        let sealed = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(aad), buf);
        one_call_tag(buf.len(), sealed)
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
        let opened = self
            .key
            .open_in_place_separate_tag(nonce, Aad::from(aad), tag, buf, 0..)
            .is_ok();
        one_call_opened(buf, opened)
    }
}
