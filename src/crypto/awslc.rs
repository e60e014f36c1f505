//! AES through AWS-LC (`aws-lc-rs`, the `aws-lc` feature): GCM sealed or opened in one call,
//! and the five plain modes through its cipher API, each packet starting from and handing back
//! a [`ChainState`] exactly as [`AesKey::process`](crate::crypto::AesKey::process) does, so
//! that a job cut into packets gives the one-shot bytes whichever implementation ran each
//! packet.
//!
//! AWS-LC's cipher API takes an IV and returns nothing of the chain, so the state handed on is
//! computed from the packet's own bytes, as the modes define it: CBC and CFB the last ciphertext
//! block (taken from the input before a decryption overwrites it, from the output after an
//! encryption), OFB the last keystream block (the last output block XOR the last input block),
//! CTR the counter block after the packet's whole blocks ([`ChainState::counter_plus`]). A packet
//! that ends mid-block is a job's last and leaves the state as it came, as the RustCrypto path
//! does. Padding is applied and checked here, around AWS-LC's unpadded calls, with the same
//! code the RustCrypto path uses.
//!
//! The keys (one per mode and direction, and the AEAD key) are expanded once per
//! [`AesKey`](crate::crypto::AesKey); `aws-lc-rs` zeroizes its cipher keys on drop.

use aws_lc_rs::aead::{Aad, Nonce};
use aws_lc_rs::cipher::{DecryptionContext, EncryptionContext};
use aws_lc_rs::iv::FixedLength;
use zeroize::Zeroize;

use crate::crypto::aes::{
    AesOp, BLOCK, ChainState, Direction, Padding, checked_run_len, pad_in_place, unpad_len,
};
use crate::crypto::awslc_keys::AwsLcKeys;
use crate::crypto::error::CryptoError;
use crate::crypto::gcm::{NONCE_LEN, TAG_LEN, Tag, WholeMessageGcm};
use crate::packet::Mode;

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
        let run_len = checked_run_len(op, buf.len(), len, last)?;
        pad_in_place(buf, len, run_len);
        let data = &mut buf[..run_len];
        let whole = run_len - run_len % BLOCK;
        // The last whole input block, kept before a decryption or OFB overwrites it.
        let mut last_in = [0u8; BLOCK];
        if whole > 0 {
            last_in.copy_from_slice(&data[whole - BLOCK..whole]);
        }
        let iv = || EncryptionContext::Iv128(FixedLength::from(state.0));
        let div = || DecryptionContext::Iv128(FixedLength::from(state.0));
        let failed = |_| CryptoError::NotBlockAligned { len: run_len };
        if !data.is_empty() {
            match (op.mode, op.direction) {
                (Mode::Ecb, Direction::Encrypt) => {
                    self.ecb_enc
                        .less_safe_encrypt(data, EncryptionContext::None)
                        .map_err(failed)?;
                }
                (Mode::Ecb, Direction::Decrypt) => {
                    self.ecb_dec
                        .decrypt(data, DecryptionContext::None)
                        .map_err(failed)?;
                }
                (Mode::Cbc, Direction::Encrypt) => {
                    self.cbc_enc.less_safe_encrypt(data, iv()).map_err(failed)?;
                }
                (Mode::Cbc, Direction::Decrypt) => {
                    self.cbc_dec.decrypt(data, div()).map_err(failed)?;
                }
                (Mode::Cfb, Direction::Encrypt) => {
                    self.cfb_enc.less_safe_encrypt(data, iv()).map_err(failed)?;
                }
                (Mode::Cfb, Direction::Decrypt) => {
                    self.cfb_dec.decrypt(data, div()).map_err(failed)?;
                }
                (Mode::Ofb, _) => {
                    self.ofb.less_safe_encrypt(data, iv()).map_err(failed)?;
                }
                (Mode::Ctr, _) => {
                    self.ctr.less_safe_encrypt(data, iv()).map_err(failed)?;
                }
                (Mode::Gcm, _) => return Err(CryptoError::AuthenticatedMode),
            }
        }
        // The state for the next packet; a packet ending mid-block (a job's last) leaves it.
        if run_len % BLOCK == 0 && whole > 0 {
            let last_out = &data[whole - BLOCK..whole];
            match (op.mode, op.direction) {
                (Mode::Ecb, _) | (Mode::Gcm, _) => {}
                (Mode::Cbc | Mode::Cfb, Direction::Encrypt) => state.0.copy_from_slice(last_out),
                (Mode::Cbc | Mode::Cfb, Direction::Decrypt) => state.0 = last_in,
                (Mode::Ofb, _) => {
                    for ((s, o), i) in state.0.iter_mut().zip(last_out).zip(&last_in) {
                        *s = o ^ i;
                    }
                }
                (Mode::Ctr, _) => *state = state.counter_plus((whole / BLOCK) as u64),
            }
        } else if op.mode == Mode::Ctr && whole > 0 {
            // CTR hands on the counter after the whole blocks even when a tail follows, as
            // RustCrypto's `ctr` reports it.
            *state = state.counter_plus((whole / BLOCK) as u64);
        }
        last_in.zeroize();

        if last && op.padding == Padding::Pkcs7 && op.direction == Direction::Decrypt {
            return unpad_len(data);
        }
        Ok(run_len)
    }
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
