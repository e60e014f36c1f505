//! Running a packet of a plain mode through a library whose cipher call takes a key and an IV
//! and transforms the data in place, but hands back nothing of the chain (AWS-LC's cipher API,
//! OpenSSL's EVP): the checks, the padding and the [`ChainState`] handed on, as
//! [`AesKey::process`](crate::crypto::AesKey::process) gives them, written once for every such
//! library.
//!
//! The state handed on is computed from the packet's own bytes, as the modes define it: CBC and
//! CFB the last ciphertext block (taken from the input before a decryption overwrites it, from
//! the output after an encryption), OFB the last keystream block (the last output block XOR the
//! last input block), CTR the counter block after the packet's whole blocks
//! ([`ChainState::counter_plus`]). A packet that ends mid-block is a job's last and leaves the
//! state as it came, as the RustCrypto path does. Padding is applied and checked here, around
//! the library's unpadded call, with the same code the RustCrypto path uses.

use zeroize::Zeroize;

use crate::crypto::aes::{
    AesOp, BLOCK, ChainState, Direction, Padding, checked_run_len, pad_in_place, unpad_len,
};
use crate::crypto::error::CryptoError;
use crate::crypto::impls::AesImpl;
use crate::crypto::text::check_same_len;
use crate::packet::Mode;

/// Runs one packet in place with `call`, which transforms the bytes it is given (the packet's
/// bytes to run, padding included; never empty) from the IV it is given (the incoming state),
/// as `op` says. Same contract, checks, output and state handed on as
/// [`AesKey::process`](crate::crypto::AesKey::process).
pub(super) fn process_from_iv(
    op: AesOp,
    state: &mut ChainState,
    buf: &mut [u8],
    len: usize,
    last: bool,
    call: impl FnOnce(&mut [u8], &[u8; BLOCK]) -> Result<(), CryptoError>,
) -> Result<usize, CryptoError> {
    if op.mode == Mode::Gcm {
        return Err(CryptoError::AuthenticatedMode);
    }
    let run_len = checked_run_len(op, buf.len(), len, last)?;
    pad_in_place(buf, len, run_len);
    let data = &mut buf[..run_len];
    let whole = run_len - run_len % BLOCK;
    // The last whole input block, kept before a decryption or OFB overwrites it. Only those
    // read it: the other modes leave the packet untouched until the call, whose first loads
    // then start at the packet's front (a load of its end first costs a miss to memory per
    // packet on data that streams in, about 3% of one CBC stream in 16 KiB packets).
    let mut last_in = [0u8; BLOCK];
    let keeps_input = matches!(
        (op.mode, op.direction),
        (Mode::Cbc | Mode::Cfb, Direction::Decrypt) | (Mode::Ofb, _)
    );
    if whole > 0 && keeps_input {
        last_in.copy_from_slice(&data[whole - BLOCK..whole]);
    }
    if !data.is_empty() {
        call(data, &state.0)?;
    }
    hand_on(op, state, data, &last_in);
    last_in.zeroize();

    if last && op.padding == Padding::Pkcs7 && op.direction == Direction::Decrypt {
        return unpad_len(data);
    }
    Ok(run_len)
}

/// Runs one packet that `library` runs between two buffers ([`AesImpl::runs_between`]: ECB, CBC
/// decryption or CTR), not padded here, from `input` into `output` with `call`, which transforms the bytes of its first argument
/// into its second, as long, from the IV it is given; the input is only read. Same checks,
/// output and state handed on as [`process_from_iv`] over a copy of the input.
/// [`AesKey::process_between_with`](crate::crypto::AesKey::process_between_with) copies the
/// other packets and runs them in place instead.
///
/// # Errors
/// As [`process_from_iv`]; [`CryptoError::LengthExceedsBuffer`] unless `output` is as long as
/// `input`; [`CryptoError::ImplementationUnavailable`], naming `library`, for a packet it does
/// not run between two buffers ([`AesImpl::runs_between`]) or one padded here.
pub(super) fn process_between_from_iv(
    library: AesImpl,
    op: AesOp,
    state: &mut ChainState,
    (input, output): (&[u8], &mut [u8]),
    len: usize,
    last: bool,
    call: impl FnOnce(&[u8], &mut [u8], &[u8; BLOCK]) -> Result<(), CryptoError>,
) -> Result<usize, CryptoError> {
    check_same_len(input, output)?;
    let refused = || library.unavailable("this packet between two buffers");
    if !library.runs_between(op) {
        return Err(refused());
    }
    let run_len = checked_run_len(op, output.len(), len, last)?;
    if run_len != len {
        return Err(refused());
    }
    let (input, data) = (&input[..run_len], &mut output[..run_len]);
    if !data.is_empty() {
        call(input, data, &state.0)?;
    }
    let whole = run_len - run_len % BLOCK;
    let mut last_in = [0u8; BLOCK];
    if whole > 0 {
        last_in.copy_from_slice(&input[whole - BLOCK..whole]);
    }
    hand_on(op, state, data, &last_in);
    last_in.zeroize();

    if last && op.padding == Padding::Pkcs7 && op.direction == Direction::Decrypt {
        return unpad_len(data);
    }
    Ok(run_len)
}

/// The state a packet hands on, from its output `data` (the bytes it ran) and `last_in`, the
/// last whole block of its input (read by CBC and CFB decryption and OFB only). A packet ending
/// mid-block (a job's last) leaves it, but for CTR's counter.
fn hand_on(op: AesOp, state: &mut ChainState, data: &[u8], last_in: &[u8; BLOCK]) {
    let run_len = data.len();
    let whole = run_len - run_len % BLOCK;
    if run_len % BLOCK == 0 && whole > 0 {
        let last_out = &data[whole - BLOCK..whole];
        match (op.mode, op.direction) {
            (Mode::Ecb, _) | (Mode::Gcm, _) => {}
            (Mode::Cbc | Mode::Cfb, Direction::Encrypt) => state.0.copy_from_slice(last_out),
            (Mode::Cbc | Mode::Cfb, Direction::Decrypt) => state.0 = *last_in,
            (Mode::Ofb, _) => {
                for ((s, o), i) in state.0.iter_mut().zip(last_out).zip(last_in) {
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
}
