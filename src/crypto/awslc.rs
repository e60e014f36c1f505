//! AES through AWS-LC (`aws-lc-rs`, the `aws-lc` feature): GCM sealed or opened in one call,
//! and the five plain modes through its cipher API, each packet starting from and handing back
//! a [`ChainState`] exactly as [`AesKey::process`](crate::crypto::AesKey::process) does, so
//! that a job cut into packets gives the one-shot bytes whichever implementation ran each
//! packet. AWS-LC's cipher API takes an IV and returns nothing of the chain, so the packet runs
//! through `by_iv.rs`, which computes the state handed on from the packet's own bytes.
//!
//! The keys (one per mode and direction, and the AEAD key) are expanded once per
//! [`AesKey`](crate::crypto::AesKey); `aws-lc-rs` zeroizes its cipher keys on drop.

use zeroize::Zeroize;

use crate::crypto::aes::{AesOp, BLOCK, ChainState, Direction};
use crate::crypto::awslc_keys::AwsLcKeys;
use crate::crypto::by_iv::{process_between_from_iv, process_from_iv};
use crate::crypto::error::CryptoError;
use crate::crypto::gcm::{
    MAX_TEXT_LEN, NONCE_LEN, TAG_LEN, Tag, WholeMessageGcm, check_nonce, check_tag, check_text_len,
};
use crate::crypto::impls::AesImpl;
use crate::crypto::text::check_same_len;
use crate::packet::Mode;
use aws_lc_rs::aead::{Aad, Nonce};
use aws_lc_rs::cipher::{
    DecryptionContext, EncryptionContext, StreamingDecryptingKey, StreamingEncryptingKey,
    UnboundCipherKey,
};
use aws_lc_rs::iv::FixedLength;

impl AwsLcKeys {
    /// Runs one packet in place, as [`AesKey::process`](crate::crypto::AesKey::process) does
    /// (same checks, same output, same state handed on).
    pub(super) fn process(
        &self,
        op: AesOp,
        state: &mut ChainState,
        buf: &mut [u8],
        len: usize,
        last: bool,
    ) -> Result<usize, CryptoError> {
        process_from_iv(op, state, buf, len, last, |data, iv| {
            let len = data.len();
            let failed = |_| CryptoError::NotBlockAligned { len };
            let enc = || EncryptionContext::Iv128(FixedLength::from(*iv));
            let dec = || DecryptionContext::Iv128(FixedLength::from(*iv));
            match (op.mode, op.direction) {
                (Mode::Ecb, Direction::Encrypt) => self
                    .ecb_enc
                    .less_safe_encrypt(data, EncryptionContext::None)
                    .map(drop),
                (Mode::Ecb, Direction::Decrypt) => self
                    .ecb_dec
                    .decrypt(data, DecryptionContext::None)
                    .map(drop),
                (Mode::Cbc, Direction::Encrypt) => {
                    self.cbc_enc.less_safe_encrypt(data, enc()).map(drop)
                }
                (Mode::Cbc, Direction::Decrypt) => self.cbc_dec.decrypt(data, dec()).map(drop),
                (Mode::Cfb, Direction::Encrypt) => {
                    self.cfb_enc.less_safe_encrypt(data, enc()).map(drop)
                }
                (Mode::Cfb, Direction::Decrypt) => self.cfb_dec.decrypt(data, dec()).map(drop),
                (Mode::Ofb, _) => self.ofb.less_safe_encrypt(data, enc()).map(drop),
                (Mode::Ctr, _) => self.ctr.less_safe_encrypt(data, enc()).map(drop),
                (Mode::Gcm, _) => return Err(CryptoError::AuthenticatedMode),
            }
            .map_err(failed)
        })
    }

    /// Runs one CTR or CBC-decryption packet from `input` into `output`, as long, through a
    /// streaming key made for it (AWS-LC's streaming API takes an input and an output), as
    /// [`AesKey::process_between`](crate::crypto::AesKey::process_between) does; see
    /// `process_between_from_iv`, which refuses the other modes (AWS-LC's streaming ECB keys
    /// and CBC encryption keys pad) and checks the lengths, so that an error from AWS-LC here
    /// is its refusal.
    pub(super) fn process_between(
        &self,
        op: AesOp,
        state: &mut ChainState,
        buffers: (&[u8], &mut [u8]),
        len: usize,
        last: bool,
    ) -> Result<usize, CryptoError> {
        let library = AesImpl::AwsLc;
        process_between_from_iv(library, op, state, buffers, len, last, |input, data, iv| {
            let key = UnboundCipherKey::new(self.algorithm, &self.raw).map_err(refused)?;
            match op.mode {
                Mode::Cbc => self.cbc_decrypt_between(key, input, data, iv),
                _ => ctr_between(key, input, data, iv),
            }
        })
    }

    /// CBC decryption of whole blocks from `input` into `data`, from `iv`: the blocks AWS-LC's
    /// streaming key says it wrote, then the rest (the last block, which the key holds back
    /// for the padding its finish would check) copied and run in place on the unpadded key,
    /// from the ciphertext block before it.
    fn cbc_decrypt_between(
        &self,
        key: UnboundCipherKey,
        input: &[u8],
        data: &mut [u8],
        iv: &[u8; BLOCK],
    ) -> Result<(), CryptoError> {
        let context = DecryptionContext::Iv128(FixedLength::from(*iv));
        let mut cbc = StreamingDecryptingKey::cbc_pkcs7(key, context).map_err(refused)?;
        let written = cbc
            .less_safe_update(input, data)
            .map_err(refused)?
            .written()
            .len();
        // Dropped unfinished: its context, which holds the block it kept, is cleared as freed.
        drop(cbc);
        if written % BLOCK != 0 || written > input.len() {
            return Err(refused(()));
        }
        if written < input.len() {
            let mut from = *iv;
            if let Some(at) = written.checked_sub(BLOCK) {
                from.copy_from_slice(&input[at..written]);
            }
            let rest = &mut data[written..];
            rest.copy_from_slice(&input[written..]);
            let context = DecryptionContext::Iv128(FixedLength::from(from));
            self.cbc_dec.decrypt(rest, context).map_err(refused)?;
        }
        Ok(())
    }
}

/// CTR from `input` into `data`, as long, from counter block `iv`, through a streaming key
/// made of `key`: whole blocks straight into the output; a last part block through a block on
/// the stack, since the key asks for room up to the block's end.
fn ctr_between(
    key: UnboundCipherKey,
    input: &[u8],
    data: &mut [u8],
    iv: &[u8; BLOCK],
) -> Result<(), CryptoError> {
    let iv = EncryptionContext::Iv128(FixedLength::from(*iv));
    let mut ctr = StreamingEncryptingKey::less_safe_ctr(key, iv).map_err(refused)?;
    let whole = input.len() - input.len() % BLOCK;
    let written = ctr
        .less_safe_update(&input[..whole], &mut data[..whole])
        .map_err(refused)?
        .written()
        .len();
    if written != whole {
        return Err(refused(()));
    }
    if whole < input.len() {
        let mut last = [0u8; BLOCK];
        let tail = input.len() - whole;
        let written = ctr
            .less_safe_update(&input[whole..], &mut last)
            .map(|u| u.written().len())
            .map_err(refused);
        data[whole..].copy_from_slice(&last[..tail]);
        last.zeroize();
        if written? != tail {
            return Err(refused(()));
        }
    }
    Ok(())
}

/// What a refusal by AWS-LC of a packet run between two buffers is reported as, the lengths
/// having been checked before: the library could not run it (out of memory, say).
fn refused<E>(_: E) -> CryptoError {
    AesImpl::AwsLc.unavailable("this packet between two buffers (AWS-LC refused it)")
}

impl WholeMessageGcm for AwsLcKeys {
    fn seal(&self, nonce: [u8; NONCE_LEN], aad: &[u8], buf: &mut [u8]) -> Option<Tag> {
        let nonce = Nonce::assume_unique_for_key(nonce);
        let tag = self
            .gcm
            .seal_in_place_separate_tag(nonce, Aad::from(aad), buf)
            .ok()?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Some(out)
    }

    fn open(&self, nonce: [u8; NONCE_LEN], aad: &[u8], tag: Tag, buf: &mut [u8]) -> bool {
        let nonce = Nonce::assume_unique_for_key(nonce);
        self.gcm
            .open_in_place_separate_tag(nonce, Aad::from(aad), &tag, buf)
            .is_ok()
    }
}

impl AwsLcKeys {
    /// Seals a whole GCM message from `input` into `out` (as long) in one call, `input` left as
    /// it was, after the checks sealing in place makes (the nonce, the length); the tag.
    ///
    /// # Errors
    /// As sealing in place, and [`CryptoError::LengthExceedsBuffer`] unless `out` is as long
    /// as `input`.
    pub(super) fn gcm_seal_between(
        &self,
        nonce: &[u8],
        aad: &[u8],
        (input, out): (&[u8], &mut [u8]),
    ) -> Result<Tag, CryptoError> {
        let nonce = Nonce::assume_unique_for_key(*check_nonce(nonce)?);
        check_same_len(input, out)?;
        check_text_len(input.len())?;
        let mut tag = [0u8; TAG_LEN];
        self.gcm
            .seal_out_of_place_scatter(nonce, Aad::from(aad), input, out, &[], &mut tag)
            .map_err(|_| CryptoError::MessageTooLong {
                len: input.len() as u64,
                max: MAX_TEXT_LEN,
            })?;
        Ok(tag)
    }

    /// Opens a whole GCM message from `input` into `out` (as long) in one call, `input` left as
    /// it was; on a tag mismatch `out` is zeroed (AWS-LC may have decrypted into it).
    ///
    /// # Errors
    /// As opening in place, and [`CryptoError::LengthExceedsBuffer`] unless `out` is as long
    /// as `input`.
    pub(super) fn gcm_open_between(
        &self,
        nonce: &[u8],
        aad: &[u8],
        tag: &[u8],
        (input, out): (&[u8], &mut [u8]),
    ) -> Result<(), CryptoError> {
        let nonce = Nonce::assume_unique_for_key(*check_nonce(nonce)?);
        let tag = check_tag(tag)?;
        check_same_len(input, out)?;
        check_text_len(input.len())?;
        let opened = self
            .gcm
            .open_separate_gather(nonce, Aad::from(aad), input, tag, out);
        if opened.is_err() {
            out.zeroize();
            return Err(CryptoError::AuthenticationFailed);
        }
        Ok(())
    }
}
