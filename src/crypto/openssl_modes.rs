//! The five plain modes through the system's OpenSSL (the `openssl` feature): each packet runs
//! in a context with the key already expanded, set to the packet's IV, padding off. The
//! contexts of a key, mode and direction are pooled: a packet takes one (or copies the template
//! made on first use when none is free), and gives it back, so that a packet costs neither a key
//! expansion nor an allocation. OpenSSL's EVP hands back nothing of the chain, so the packet
//! runs through `by_iv.rs`, which checks it, pads it and computes the state handed on from its
//! bytes.

use openssl::cipher::{Cipher, CipherRef};
use openssl::cipher_ctx::CipherCtx;
use zeroize::Zeroize;

use crate::crypto::aes::{AesOp, BLOCK, ChainState, Direction};
use crate::crypto::by_iv::{process_between_from_iv, process_from_iv};
use crate::crypto::error::CryptoError;
use crate::crypto::impls::AesImpl;
use crate::crypto::openssl_gcm::{OpenSslKey, refused};
use crate::packet::Mode;

/// The most bytes handed to one OpenSSL call (its lengths are C `int`s), whole blocks.
const MAX_CALL: usize = 1 << 30;

/// The most contexts kept free per key, mode and direction: about one per node running it.
const POOL: usize = 16;

/// The template and pool slot of `op`: its slot in an implementation table, which puts GCM's
/// two last.
fn slot(op: AesOp) -> Result<usize, CryptoError> {
    if op.mode == Mode::Gcm {
        return Err(CryptoError::AuthenticatedMode);
    }
    Ok(crate::crypto::choice::slot(op))
}

/// OpenSSL's cipher for `mode` with a key of `len` bytes.
fn cipher(mode: Mode, len: usize) -> Result<&'static CipherRef, CryptoError> {
    Ok(match (mode, len) {
        (Mode::Ecb, 16) => Cipher::aes_128_ecb(),
        (Mode::Ecb, 24) => Cipher::aes_192_ecb(),
        (Mode::Ecb, 32) => Cipher::aes_256_ecb(),
        (Mode::Cbc, 16) => Cipher::aes_128_cbc(),
        (Mode::Cbc, 24) => Cipher::aes_192_cbc(),
        (Mode::Cbc, 32) => Cipher::aes_256_cbc(),
        (Mode::Ofb, 16) => Cipher::aes_128_ofb(),
        (Mode::Ofb, 24) => Cipher::aes_192_ofb(),
        (Mode::Ofb, 32) => Cipher::aes_256_ofb(),
        (Mode::Cfb, 16) => Cipher::aes_128_cfb128(),
        (Mode::Cfb, 24) => Cipher::aes_192_cfb128(),
        (Mode::Cfb, 32) => Cipher::aes_256_cfb128(),
        (Mode::Ctr, 16) => Cipher::aes_128_ctr(),
        (Mode::Ctr, 24) => Cipher::aes_192_ctr(),
        (Mode::Ctr, 32) => Cipher::aes_256_ctr(),
        (Mode::Gcm, _) => return Err(CryptoError::AuthenticatedMode),
        _ => return Err(refused(())),
    })
}

impl OpenSslKey {
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
            self.with_context(op, iv, |ctx, block_mode| {
                update(ctx, None, data, block_mode)
            })
        })
    }

    /// Runs one packet of ECB, CBC decryption or CTR not padded here from `input` into
    /// `output`, as long, as [`AesKey::process_between`](crate::crypto::AesKey::process_between)
    /// does (OpenSSL's update takes an input and an output); see `process_between_from_iv`.
    pub(super) fn process_between(
        &self,
        op: AesOp,
        state: &mut ChainState,
        buffers: (&[u8], &mut [u8]),
        len: usize,
        last: bool,
    ) -> Result<usize, CryptoError> {
        let library = AesImpl::OpenSsl;
        process_between_from_iv(library, op, state, buffers, len, last, |input, data, iv| {
            self.with_context(op, iv, |ctx, block_mode| {
                update(ctx, Some(input), data, block_mode)
            })
        })
    }

    /// Runs `f` on a context for `op` set to `iv`, taken from the pool (or copied from the
    /// template when none is free) and given back unless OpenSSL refused it midway; `f` is told
    /// whether the mode is a block mode (ECB, CBC).
    fn with_context(
        &self,
        op: AesOp,
        iv: &[u8; BLOCK],
        f: impl FnOnce(&mut CipherCtx, bool) -> Result<(), CryptoError>,
    ) -> Result<(), CryptoError> {
        let slot = slot(op)?;
        let pooled = self.pool[slot]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let mut ctx = match pooled {
            Some(ctx) => ctx,
            None => {
                let mut ctx = CipherCtx::new().map_err(refused)?;
                ctx.copy(self.template(op, slot)?).map_err(refused)?;
                ctx
            }
        };
        let iv = (op.mode != Mode::Ecb).then_some(&iv[..]);
        match op.direction {
            Direction::Encrypt => ctx.encrypt_init(None, None, iv),
            Direction::Decrypt => ctx.decrypt_init(None, None, iv),
        }
        .map_err(refused)?;
        let done = f(&mut ctx, matches!(op.mode, Mode::Ecb | Mode::Cbc));
        // A context OpenSSL refused midway is not kept.
        if done.is_ok() {
            let mut pool = self.pool[slot].lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < POOL {
                pool.push(ctx);
            }
        }
        done
    }

    /// The context `op`'s packets copy when the pool has none: the cipher of the mode, the key
    /// expanded for the direction, padding off. Made on first use.
    fn template(&self, op: AesOp, slot: usize) -> Result<&CipherCtx, CryptoError> {
        self.plain[slot]
            .get_or_init(|| {
                let cipher = cipher(op.mode, self.key.len())?;
                let mut ctx = CipherCtx::new().map_err(refused)?;
                let key = Some(&self.key[..]);
                match op.direction {
                    Direction::Encrypt => ctx.encrypt_init(Some(cipher), key, None),
                    Direction::Decrypt => ctx.decrypt_init(Some(cipher), key, None),
                }
                .map_err(refused)?;
                ctx.set_padding(false);
                Ok(ctx)
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Runs `data` through `ctx`: in place, or from `input`, as long, into `data`. OpenSSL's
/// wrapper asks a block mode (ECB, CBC) for a block of room past the input in the output, which
/// a packet does not have: all but its last block run straight into `data`, whose last block is
/// that room, the last through a block on the stack (zeroed after).
fn update(
    ctx: &mut CipherCtx,
    input: Option<&[u8]>,
    data: &mut [u8],
    block_mode: bool,
) -> Result<(), CryptoError> {
    let tail = if block_mode { BLOCK.min(data.len()) } else { 0 };
    let head = data.len() - tail;
    let mut done = 0;
    while done < head {
        let n = (head - done).min(MAX_CALL);
        let written = match input {
            Some(input) => ctx.cipher_update(&input[done..done + n], Some(&mut data[done..])),
            None => ctx.cipher_update_inplace(&mut data[done..], n),
        }
        .map_err(refused)?;
        if written != n {
            return Err(refused(()));
        }
        done += n;
    }
    if tail > 0 {
        let mut last = [0u8; 2 * BLOCK];
        last[..tail].copy_from_slice(&input.unwrap_or(data)[head..]);
        let written = ctx.cipher_update_inplace(&mut last, tail).map_err(refused);
        data[head..].copy_from_slice(&last[..tail]);
        last.zeroize();
        if written? != tail {
            return Err(refused(()));
        }
    }
    Ok(())
}
