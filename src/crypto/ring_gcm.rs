//! AES-GCM through ring (the `ring` feature): a whole message sealed or opened in one call of
//! ring's assembly, which on x86-64 runs AES-NI with CLMUL, and VAES with VPCLMULQDQ on 256-bit
//! vectors where the CPU has them (AVX2). ring has no AES-192 GCM and no raw AES or CTR, so it
//! runs only GCM jobs of one packet with a 128- or 256-bit key; the callers take a key without
//! one to the RustCrypto path, which gives the same bytes. The key type is `ring_keys.rs`; the
//! checks around each call are `gcm.rs`'s ([`WholeMessageGcm`]).

use ring::aead::{Aad, Nonce};

use crate::crypto::gcm::{NONCE_LEN, TAG_LEN, Tag, WholeMessageGcm};
use crate::crypto::ring_keys::RingGcmKey;

impl WholeMessageGcm for RingGcmKey {
    fn seal(&self, nonce: [u8; NONCE_LEN], aad: &[u8], buf: &mut [u8]) -> Option<Tag> {
        let nonce = Nonce::assume_unique_for_key(nonce);
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(aad), buf)
            .ok()?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Some(out)
    }

    fn open(&self, nonce: [u8; NONCE_LEN], aad: &[u8], tag: Tag, buf: &mut [u8]) -> bool {
        let nonce = Nonce::assume_unique_for_key(nonce);
        let tag = ring::aead::Tag::from(tag);
        self.key
            .open_in_place_separate_tag(nonce, Aad::from(aad), tag, buf, 0..)
            .is_ok()
    }
}
