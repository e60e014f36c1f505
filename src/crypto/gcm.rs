//! AES-GCM (NIST SP 800-38D) one packet at a time, built on RustCrypto's `ctr` (the counter
//! mode, `Ctr32BE`) and `ghash` (the universal hash), so that a job can be cut into packets.
//!
//! # Design note
//!
//! RustCrypto's `aes-gcm` crate seals or opens a whole message in one call; it cannot stop
//! after a packet and go on later on another node. GCM is counter mode plus a hash over the
//! ciphertext, so this module calls the two halves itself, the way `aes-gcm` does inside:
//!
//! 1. [`AesKey::gcm_start`]: J0 = nonce ‖ 0³¹1 (a 96-bit nonce only); the tag mask E_K(J0) is
//!    the first keystream block; the hash starts from the key's GHASH (keyed with
//!    H = E_K(0¹²⁸)) and takes in the associated data, zero-padded to whole blocks.
//! 2. [`AesKey::gcm_update`], for every packet but the last (whole blocks): CTR from the
//!    counter block the state holds, then the ciphertext into the hash (encryption), or the
//!    ciphertext into the hash, then CTR (decryption). The state keeps the next counter block.
//! 3. [`AesKey::gcm_seal_final`] or [`AesKey::gcm_open_final`], for the last packet (any
//!    length): the same, then the lengths block [len(A)]₆₄ ‖ [len(C)]₆₄ into the hash; the tag
//!    is the hash XOR the mask. Opening compares the tags in constant time (`subtle`) *before*
//!    it decrypts the packet; on a mismatch the packet is left as ciphertext.
//!
//! The [`GcmState`] between packets (hash, next counter block, mask, lengths) is what a job's
//! packets hand on through the state store (docs/ALGORITHM.md §12, §15.4). The tests compare
//! every split with `aes-gcm`'s one-shot result.

use std::fmt;

use cipher::consts::U16;
use cipher::{BlockCipherEncrypt, BlockSizeUser, InOutBuf, InnerIvInit, IvState, StreamCipherCore};
use ctr::CtrCore;
use ctr::flavors::Ctr32BE;
use ghash::GHash;
use ghash::universal_hash::UniversalHash;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::crypto::aes::{AesKey, BLOCK, Block, Direction, Schedule};
use crate::crypto::error::CryptoError;
#[cfg(feature = "openssl")]
use crate::crypto::openssl_gcm::OpenSslGcm;
use crate::crypto::text::Text;

/// The GCM nonce size in bytes: 96 bits, the only size the service supports.
pub const NONCE_LEN: usize = 12;

/// The GCM tag size in bytes: 128 bits, the only size the service supports.
pub const TAG_LEN: usize = 16;

/// The longest GCM message in bytes, 2³⁶ − 32 (NIST SP 800-38D §5.2.1.1): the 32-bit block
/// counter must not wrap.
pub const MAX_TEXT_LEN: u64 = (1 << 36) - 32;

/// The longest GCM associated data in bytes, 2⁶¹ − 1 (NIST SP 800-38D §5.2.1.1).
pub const MAX_AAD_LEN: u64 = (1 << 61) - 1;

/// A GCM tag.
pub type Tag = [u8; TAG_LEN];

/// The state a GCM job hands from packet to packet: the GHASH accumulator (over the associated
/// data and the ciphertext so far), the next counter block, the tag mask E_K(J0), and the
/// lengths; or, for a job chained on OpenSSL (the `openssl` feature), its cipher context,
/// which holds the same. Zeroized on drop; `Debug` shows only the lengths.
pub struct GcmState {
    chain: Chain,
    aad_len: u64,
    text_len: u64,
}

/// Where a GCM state's hash and counter are kept.
enum Chain {
    /// RustCrypto's `ghash` and counter blocks of our own ([`AesKey::gcm_start`]).
    RustCrypto {
        ghash: GHash,
        counter: Zeroizing<[u8; BLOCK]>,
        mask: Zeroizing<[u8; BLOCK]>,
    },
    /// An OpenSSL cipher context, sealing or opening as it was started.
    #[cfg(feature = "openssl")]
    OpenSsl(OpenSslGcm),
}

// GHash zeroizes itself on drop (the `zeroize` feature of `ghash`), the blocks are `Zeroizing`,
// and OpenSSL cleanses a context when it is freed.
impl ZeroizeOnDrop for GcmState {}

impl fmt::Debug for GcmState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcmState")
            .field("aad_len", &self.aad_len)
            .field("text_len", &self.text_len)
            .finish_non_exhaustive()
    }
}

impl GcmState {
    /// Bytes of text (plaintext or ciphertext) run so far.
    pub fn text_len(&self) -> u64 {
        self.text_len
    }

    /// Bytes of associated data the tag covers.
    pub fn aad_len(&self) -> u64 {
        self.aad_len
    }

    /// Checks that `more` bytes of text keep the message within [`MAX_TEXT_LEN`].
    fn check_room(&self, more: usize) -> Result<(), CryptoError> {
        let len = self.text_len.saturating_add(more as u64);
        if len > MAX_TEXT_LEN {
            return Err(CryptoError::MessageTooLong {
                len,
                max: MAX_TEXT_LEN,
            });
        }
        Ok(())
    }

    /// A state on OpenSSL: `ctx` started with associated data of `aad_len` bytes.
    #[cfg(feature = "openssl")]
    pub(super) fn on_openssl(ctx: OpenSslGcm, aad_len: u64) -> Self {
        GcmState {
            chain: Chain::OpenSsl(ctx),
            aad_len,
            text_len: 0,
        }
    }
}

/// The tag: the lengths block into the hash, the hash XOR the mask.
fn rustcrypto_tag(mut ghash: GHash, mask: &[u8; BLOCK], aad_len: u64, text_len: u64) -> Tag {
    let mut lengths = Block::default();
    lengths[..8].copy_from_slice(&(aad_len * 8).to_be_bytes());
    lengths[8..].copy_from_slice(&(text_len * 8).to_be_bytes());
    ghash.update(&[lengths]);
    let hash = ghash.finalize();
    let mut tag = [0u8; TAG_LEN];
    for ((t, h), m) in tag.iter_mut().zip(hash.iter()).zip(mask.iter()) {
        *t = h ^ m;
    }
    tag
}

/// An OpenSSL context started in the other direction than the one asked for.
#[cfg(feature = "openssl")]
fn check_openssl_direction(ctx: &OpenSslGcm, direction: Direction) -> Result<(), CryptoError> {
    if ctx.encrypts() != (direction == Direction::Encrypt) {
        return Err(CryptoError::ImplementationUnavailable {
            implementation: "openssl",
            what: "a GCM packet in the other direction than its state was started in",
        });
    }
    Ok(())
}

/// Checks that associated data of `len` bytes is within [`MAX_AAD_LEN`].
pub(super) fn check_aad_len(len: usize) -> Result<(), CryptoError> {
    if len as u64 > MAX_AAD_LEN {
        return Err(CryptoError::MessageTooLong {
            len: len as u64,
            max: MAX_AAD_LEN,
        });
    }
    Ok(())
}

/// Checks a GCM nonce: 12 bytes.
///
/// # Errors
/// [`CryptoError::NonceLength`].
pub fn check_nonce(nonce: &[u8]) -> Result<&[u8; NONCE_LEN], CryptoError> {
    nonce
        .try_into()
        .map_err(|_| CryptoError::NonceLength { got: nonce.len() })
}

/// Checks a GCM tag: 16 bytes.
///
/// # Errors
/// [`CryptoError::TagLength`].
pub fn check_tag(tag: &[u8]) -> Result<&Tag, CryptoError> {
    tag.try_into()
        .map_err(|_| CryptoError::TagLength { got: tag.len() })
}

/// Checks a GCM message length against [`MAX_TEXT_LEN`].
///
/// # Errors
/// [`CryptoError::MessageTooLong`].
pub fn check_text_len(len: usize) -> Result<(), CryptoError> {
    if len as u64 > MAX_TEXT_LEN {
        return Err(CryptoError::MessageTooLong {
            len: len as u64,
            max: MAX_TEXT_LEN,
        });
    }
    Ok(())
}

/// An AEAD library's AES-GCM that seals or opens a whole message in one call (AWS-LC's, ring's):
/// what such a key does, the checks and the error reporting around it being [`seal_whole`]'s
/// and [`open_whole`]'s.
#[cfg(any(feature = "ring", feature = "aws-lc"))]
pub(super) trait WholeMessageGcm {
    /// Seals `buf` in place; the tag, or `None` if the library refused.
    fn seal(&self, nonce: [u8; NONCE_LEN], aad: &[u8], buf: &mut [u8]) -> Option<Tag>;
    /// Opens `buf` in place; whether the tag matched.
    fn open(&self, nonce: [u8; NONCE_LEN], aad: &[u8], tag: Tag, buf: &mut [u8]) -> bool;
}

/// Seals a whole GCM message in place with `key` in one call and returns its tag, after the
/// checks every implementation makes. A refusal by the library, the one thing left once the
/// nonce and the length are checked, is reported as the message too long for it.
#[cfg(any(feature = "ring", feature = "aws-lc"))]
pub(super) fn seal_whole(
    key: &impl WholeMessageGcm,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
) -> Result<Tag, CryptoError> {
    let nonce = *check_nonce(nonce)?;
    check_text_len(buf.len())?;
    let len = buf.len() as u64;
    key.seal(nonce, aad, buf)
        .ok_or(CryptoError::MessageTooLong {
            len,
            max: MAX_TEXT_LEN,
        })
}

/// Opens a whole GCM message in place with `key` in one call, after the checks every
/// implementation makes. On a tag mismatch `buf` is zeroed: such a library decrypts as it
/// hashes, so plaintext may be in it, and none is released.
#[cfg(any(feature = "ring", feature = "aws-lc"))]
pub(super) fn open_whole(
    key: &impl WholeMessageGcm,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8],
) -> Result<(), CryptoError> {
    let nonce = *check_nonce(nonce)?;
    let tag = *check_tag(tag)?;
    check_text_len(buf.len())?;
    if !key.open(nonce, aad, tag, buf) {
        buf.zeroize();
        return Err(CryptoError::AuthenticationFailed);
    }
    Ok(())
}

impl AesKey {
    /// Starts a GCM job: the counter from the 12-byte `nonce`, the tag mask, and the hash over
    /// the associated data `aad`. The state then goes through [`gcm_update`](Self::gcm_update)
    /// for every packet but the last and [`gcm_seal_final`](Self::gcm_seal_final) or
    /// [`gcm_open_final`](Self::gcm_open_final) for the last.
    ///
    /// # Errors
    /// [`CryptoError::NonceLength`] unless the nonce is 12 bytes;
    /// [`CryptoError::MessageTooLong`] for associated data past [`MAX_AAD_LEN`].
    pub fn gcm_start(&self, nonce: &[u8], aad: &[u8]) -> Result<GcmState, CryptoError> {
        let nonce = check_nonce(nonce)?;
        check_aad_len(aad.len())?;
        let mut j0 = Block::default();
        j0[..NONCE_LEN].copy_from_slice(nonce);
        j0[BLOCK - 1] = 1;
        let mut mask = Zeroizing::new([0u8; BLOCK]);
        let mut counter = Zeroizing::new([0u8; BLOCK]);
        match &self.schedule {
            Schedule::A128(c) => first_counter(c, &j0, &mut mask, &mut counter),
            Schedule::A192(c) => first_counter(c, &j0, &mut mask, &mut counter),
            Schedule::A256(c) => first_counter(c, &j0, &mut mask, &mut counter),
        }
        let mut ghash = self.ghash.clone();
        ghash.update_padded(aad);
        Ok(GcmState {
            chain: Chain::RustCrypto {
                ghash,
                counter,
                mask,
            },
            aad_len: aad.len() as u64,
            text_len: 0,
        })
    }

    /// Runs one GCM packet that is not the job's last, in place: a whole number of blocks.
    ///
    /// # Errors
    /// [`CryptoError::NotBlockAligned`], or [`CryptoError::MessageTooLong`] past
    /// [`MAX_TEXT_LEN`].
    pub fn gcm_update(
        &self,
        direction: Direction,
        state: &mut GcmState,
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.gcm_update_text(direction, state, Text::in_place(buf))
    }

    /// Runs one GCM packet that is not the job's last from `input` into `output` (as long),
    /// leaving `input` as it was: the same bytes and state as [`gcm_update`](Self::gcm_update).
    ///
    /// # Errors
    /// As [`gcm_update`](Self::gcm_update), and [`CryptoError::LengthExceedsBuffer`] unless
    /// `output` is as long as `input`.
    pub fn gcm_update_into(
        &self,
        direction: Direction,
        state: &mut GcmState,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.gcm_update_text(direction, state, Text::between(input, output)?)
    }

    /// [`gcm_update`](Self::gcm_update) in place or from one buffer into another.
    pub(crate) fn gcm_update_text(
        &self,
        direction: Direction,
        state: &mut GcmState,
        mut text: Text<'_, '_>,
    ) -> Result<(), CryptoError> {
        let len = text.len();
        if len % BLOCK != 0 {
            return Err(CryptoError::NotBlockAligned { len });
        }
        state.check_room(len)?;
        match &mut state.chain {
            Chain::RustCrypto { ghash, counter, .. } => {
                self.rustcrypto_blocks(direction, ghash, counter, &mut text)?;
            }
            #[cfg(feature = "openssl")]
            Chain::OpenSsl(ctx) => {
                check_openssl_direction(ctx, direction)?;
                ctx.update(&mut text)?;
            }
        }
        state.text_len += len as u64;
        Ok(())
    }

    /// Encrypts a GCM job's last packet in place (any length, empty included) and returns the
    /// job's tag.
    ///
    /// # Errors
    /// [`CryptoError::MessageTooLong`] past [`MAX_TEXT_LEN`].
    pub fn gcm_seal_final(&self, state: GcmState, buf: &mut [u8]) -> Result<Tag, CryptoError> {
        self.gcm_seal_final_text(state, Text::in_place(buf))
    }

    /// Encrypts a GCM job's last packet from `input` into `output` (as long) and returns the
    /// job's tag, as [`gcm_seal_final`](Self::gcm_seal_final) does in place.
    ///
    /// # Errors
    /// As [`gcm_seal_final`](Self::gcm_seal_final), and [`CryptoError::LengthExceedsBuffer`]
    /// unless `output` is as long as `input`.
    pub fn gcm_seal_final_into(
        &self,
        state: GcmState,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<Tag, CryptoError> {
        self.gcm_seal_final_text(state, Text::between(input, output)?)
    }

    /// [`gcm_seal_final`](Self::gcm_seal_final) in place or from one buffer into another.
    pub(crate) fn gcm_seal_final_text(
        &self,
        state: GcmState,
        mut text: Text<'_, '_>,
    ) -> Result<Tag, CryptoError> {
        state.check_room(text.len())?;
        let text_len = state.text_len + text.len() as u64;
        match state.chain {
            Chain::RustCrypto {
                mut ghash,
                mut counter,
                mask,
            } => {
                self.rustcrypto_blocks(Direction::Encrypt, &mut ghash, &mut counter, &mut text)?;
                Ok(rustcrypto_tag(ghash, &mask, state.aad_len, text_len))
            }
            #[cfg(feature = "openssl")]
            Chain::OpenSsl(ctx) => {
                check_openssl_direction(&ctx, Direction::Encrypt)?;
                ctx.seal_final(&mut text)
            }
        }
    }

    /// Checks a GCM job's tag against its last packet (ciphertext, any length) and, only if it
    /// matches, decrypts the packet in place. On a mismatch `buf` is left as it was.
    ///
    /// # Errors
    /// [`CryptoError::TagLength`] unless `tag` is 16 bytes, [`CryptoError::MessageTooLong`]
    /// past [`MAX_TEXT_LEN`], [`CryptoError::AuthenticationFailed`] when the tags differ.
    pub fn gcm_open_final(
        &self,
        state: GcmState,
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        self.gcm_open_final_text(state, Text::in_place(buf), tag)
    }

    /// Checks a GCM job's tag against its last packet and, only if it matches, decrypts the
    /// packet from `input` into `output` (as long), as [`gcm_open_final`](Self::gcm_open_final)
    /// does in place. On a mismatch `output` holds no plaintext.
    ///
    /// # Errors
    /// As [`gcm_open_final`](Self::gcm_open_final), and [`CryptoError::LengthExceedsBuffer`]
    /// unless `output` is as long as `input`.
    pub fn gcm_open_final_into(
        &self,
        state: GcmState,
        input: &[u8],
        output: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        self.gcm_open_final_text(state, Text::between(input, output)?, tag)
    }

    /// [`gcm_open_final`](Self::gcm_open_final) in place or from one buffer into another; on a
    /// mismatch the output holds no plaintext.
    pub(crate) fn gcm_open_final_text(
        &self,
        state: GcmState,
        mut text: Text<'_, '_>,
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let tag = check_tag(tag)?;
        state.check_room(text.len())?;
        let text_len = state.text_len + text.len() as u64;
        match state.chain {
            Chain::RustCrypto {
                mut ghash,
                counter,
                mask,
            } => {
                // Hash the ciphertext and check the tag before any keystream touches the packet.
                ghash.update_padded(text.input());
                let expected =
                    Zeroizing::new(rustcrypto_tag(ghash, &mask, state.aad_len, text_len));
                if !bool::from(expected.ct_eq(tag)) {
                    return Err(CryptoError::AuthenticationFailed);
                }
                let buf = text.inout()?;
                match &self.schedule {
                    Schedule::A128(c) => apply_ctr(c, &counter, buf),
                    Schedule::A192(c) => apply_ctr(c, &counter, buf),
                    Schedule::A256(c) => apply_ctr(c, &counter, buf),
                };
                Ok(())
            }
            #[cfg(feature = "openssl")]
            Chain::OpenSsl(ctx) => {
                check_openssl_direction(&ctx, Direction::Decrypt)?;
                ctx.open_final(&mut text, tag)
            }
        }
    }

    /// CTR and the hash over one packet on RustCrypto, from `counter`, which is moved on.
    fn rustcrypto_blocks(
        &self,
        direction: Direction,
        ghash: &mut GHash,
        counter: &mut [u8; BLOCK],
        text: &mut Text<'_, '_>,
    ) -> Result<(), CryptoError> {
        match &self.schedule {
            Schedule::A128(c) => run_blocks(c, direction, ghash, counter, text),
            Schedule::A192(c) => run_blocks(c, direction, ghash, counter, text),
            Schedule::A256(c) => run_blocks(c, direction, ghash, counter, text),
        }
    }

    /// Seals a whole message in one piece: the convenience for callers that need no
    /// scheduling, run through the same packet calls.
    ///
    /// # Errors
    /// As [`gcm_start`](Self::gcm_start) and [`gcm_seal_final`](Self::gcm_seal_final).
    pub fn gcm_seal(
        &self,
        nonce: &[u8],
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<(Vec<u8>, Tag), CryptoError> {
        check_text_len(plaintext.len())?;
        let state = self.gcm_start(nonce, aad)?;
        let mut buf = plaintext.to_vec();
        let tag = self.gcm_seal_final(state, &mut buf)?;
        Ok((buf, tag))
    }

    /// Opens a whole message in one piece; no plaintext unless the tag matches.
    ///
    /// # Errors
    /// As [`gcm_start`](Self::gcm_start) and [`gcm_open_final`](Self::gcm_open_final).
    pub fn gcm_open(
        &self,
        nonce: &[u8],
        aad: &[u8],
        ciphertext: &[u8],
        tag: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        check_text_len(ciphertext.len())?;
        let state = self.gcm_start(nonce, aad)?;
        let mut buf = ciphertext.to_vec();
        self.gcm_open_final(state, &mut buf, tag)?;
        Ok(buf)
    }
}

/// The tag mask E_K(J0) (the keystream block of J0) and the first text counter block, inc₃₂(J0),
/// as RustCrypto's `Ctr32BE` counts them.
fn first_counter<C>(cipher: &C, j0: &Block, mask: &mut [u8; BLOCK], counter: &mut [u8; BLOCK])
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let mut core = CtrCore::<&C, Ctr32BE>::inner_iv_init(cipher, j0);
    let mut block = Block::default();
    core.write_keystream_block(&mut block);
    mask.copy_from_slice(&block);
    block.zeroize();
    counter.copy_from_slice(&core.iv_state());
}

/// CTR over `buf` from `counter` (a partial final block allowed); returns the next counter block.
fn apply_ctr<C>(cipher: &C, counter: &[u8; BLOCK], buf: InOutBuf<'_, '_, u8>) -> [u8; BLOCK]
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let mut core = CtrCore::<&C, Ctr32BE>::inner_iv_init(cipher, &Block::from(*counter));
    let (blocks, mut tail) = buf.into_chunks::<U16>();
    core.apply_keystream_blocks_inout(blocks);
    let next = core.iv_state().into();
    if !tail.is_empty() {
        let mut keystream = Block::default();
        core.apply_keystream_blocks(std::slice::from_mut(&mut keystream));
        tail.xor_in2out(&keystream[..tail.len()]);
        keystream.zeroize();
    }
    next
}

/// One packet's blocks: CTR and the hash, in the order of `direction` (the hash always takes
/// the ciphertext). A partial final block is hashed zero-padded, as GCM pads C.
fn run_blocks<C>(
    cipher: &C,
    direction: Direction,
    ghash: &mut GHash,
    counter: &mut [u8; BLOCK],
    text: &mut Text<'_, '_>,
) -> Result<(), CryptoError>
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let next = match direction {
        Direction::Encrypt => {
            let next = apply_ctr(cipher, counter, text.inout()?);
            hash_text(ghash, text.output());
            next
        }
        Direction::Decrypt => {
            hash_text(ghash, text.input());
            apply_ctr(cipher, counter, text.inout()?)
        }
    };
    *counter = next;
    Ok(())
}

/// Hashes ciphertext: whole blocks as they are, a partial final block zero-padded.
fn hash_text(ghash: &mut GHash, text: &[u8]) {
    let (blocks, tail) = Block::slice_as_chunks(text);
    ghash.update(blocks);
    if !tail.is_empty() {
        ghash.update_padded(tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> AesKey {
        AesKey::new(&[0x42; 16]).unwrap()
    }

    #[test]
    fn nonce_and_tag_lengths_are_checked() {
        let k = key();
        for len in [0, 8, 11, 13, 16] {
            assert_eq!(
                k.gcm_seal(&vec![0; len], b"", b"x").unwrap_err(),
                CryptoError::NonceLength { got: len }
            );
        }
        for len in [0, 4, 12, 15, 17] {
            assert_eq!(
                k.gcm_open(&[0; 12], b"", b"x", &vec![0; len]).unwrap_err(),
                CryptoError::TagLength { got: len }
            );
        }
    }

    #[test]
    fn packets_give_the_one_shot_result_and_tampering_fails() {
        let k = key();
        let nonce = [7u8; 12];
        let msg: Vec<u8> = (0..100u8).collect();
        let (ct, tag) = k.gcm_seal(&nonce, b"header", &msg).unwrap();
        // Cut after 16, 48 and 96 bytes.
        for cut in [16, 48, 96] {
            let mut state = k.gcm_start(&nonce, b"header").unwrap();
            let mut buf = msg.clone();
            let (head, tail) = buf.split_at_mut(cut);
            k.gcm_update(Direction::Encrypt, &mut state, head).unwrap();
            assert_eq!(state.text_len(), cut as u64);
            let t = k.gcm_seal_final(state, tail).unwrap();
            assert_eq!((&buf, t), (&ct, tag), "cut at {cut}");

            let mut state = k.gcm_start(&nonce, b"header").unwrap();
            let mut buf = ct.clone();
            let (head, tail) = buf.split_at_mut(cut);
            k.gcm_update(Direction::Decrypt, &mut state, head).unwrap();
            k.gcm_open_final(state, tail, &tag).unwrap();
            assert_eq!(buf, msg, "cut at {cut}");
        }
        let mut bad = tag;
        bad[0] ^= 1;
        assert_eq!(
            k.gcm_open(&nonce, b"header", &ct, &bad).unwrap_err(),
            CryptoError::AuthenticationFailed
        );
        assert_eq!(
            k.gcm_open(&nonce, b"Header", &ct, &tag).unwrap_err(),
            CryptoError::AuthenticationFailed
        );
        // A failed open leaves the final packet as ciphertext.
        let state = k.gcm_start(&nonce, b"header").unwrap();
        let mut buf = ct.clone();
        assert!(k.gcm_open_final(state, &mut buf, &bad).is_err());
        assert_eq!(buf, ct);
    }

    #[test]
    fn middle_packets_must_be_whole_blocks() {
        let k = key();
        let mut state = k.gcm_start(&[0; 12], b"").unwrap();
        assert_eq!(
            k.gcm_update(Direction::Encrypt, &mut state, &mut [0; 17])
                .unwrap_err(),
            CryptoError::NotBlockAligned { len: 17 }
        );
    }

    #[test]
    fn debug_shows_no_state_bytes() {
        let state = key().gcm_start(&[0; 12], b"ab").unwrap();
        assert_eq!(
            format!("{state:?}"),
            "GcmState { aad_len: 2, text_len: 0, .. }"
        );
    }
}
