//! AES in ECB, CBC, OFB, CFB-128 and CTR, one packet at a time, with the chaining state passed
//! in and handed back. GCM, which also carries a GHASH state, is in `gcm.rs`.
//!
//! A job cut into packets gives exactly the one-shot result when every packet but the last is a
//! whole number of 16-byte blocks and each packet starts from the [`ChainState`] the previous
//! one left: for CBC and CFB that state is the last ciphertext block, for OFB the last
//! keystream block, the same value RustCrypto's `IvState` reports; for CTR the next counter
//! block, which is known in advance ([`ChainState::counter_plus`]), so CTR packets need no
//! predecessor (docs/ALGORITHM.md §15.4). Only a job's last packet may end in a partial block
//! (OFB, CFB, CTR) or carry PKCS#7 padding (ECB, CBC).
//!
//! The expanded key schedule lives in [`AesKey`] and is borrowed by every packet: the modes are
//! built over `&Aes128` (RustCrypto implements the block-cipher traits for references), so no
//! schedule is rebuilt or even copied per packet.

use std::fmt;

use aes::{Aes128, Aes192, Aes256};
use cipher::block_padding::{Padding as _, Pkcs7};
use cipher::{
    Array, BlockCipherDecrypt, BlockCipherEncClosure, BlockCipherEncrypt, BlockModeDecrypt,
    BlockModeEncrypt, BlockSizeUser, InOutBuf, InnerIvInit, IvState, KeyInit, StreamCipher,
    StreamCipherCore, StreamCipherCoreWrapper, consts::U16,
};
use ghash::GHash;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::crypto::error::CryptoError;
use crate::crypto::serial::{Serial, run_stream};
use crate::crypto::text::check_same_len;
use crate::packet::{Algorithm, Cmd, Mode};

/// The AES block size in bytes.
pub const BLOCK: usize = 16;

pub(super) type Block = Array<u8, U16>;

/// An AES key with its expanded encryption and decryption schedules, and the GHASH key GCM
/// derives from it (H = E_K(0¹²⁸)).
///
/// The schedules and the GHASH key are zeroized on drop (RustCrypto's `zeroize` features);
/// `Debug` shows only the key size.
#[derive(Clone)]
pub struct AesKey {
    pub(super) schedule: Schedule,
    /// GHASH keyed with H, cloned as the start of every GCM job's hash.
    pub(super) ghash: GHash,
    /// The same key expanded by AWS-LC for every mode (`AesImpl::AwsLc`), shared by clones.
    #[cfg(feature = "aws-lc")]
    pub(super) aws_lc: std::sync::Arc<crate::crypto::awslc_keys::AwsLcKeys>,
    /// The same key expanded by ring for GCM (`AesImpl::Ring`), shared by clones; `None` for
    /// AES-192, which ring does not run.
    #[cfg(feature = "ring")]
    pub(super) ring: Option<std::sync::Arc<crate::crypto::ring_keys::RingGcmKey>>,
    /// The same key for OpenSSL's GCM (`AesImpl::OpenSsl`), shared by clones.
    #[cfg(feature = "openssl")]
    pub(super) openssl: Option<std::sync::Arc<crate::crypto::openssl_gcm::OpenSslKey>>,
}

#[derive(Clone)]
pub(super) enum Schedule {
    A128(Aes128),
    A192(Aes192),
    A256(Aes256),
}

impl ZeroizeOnDrop for AesKey {}

impl fmt::Debug for AesKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesKey")
            .field("algorithm", &self.algorithm())
            .finish_non_exhaustive()
    }
}

impl AesKey {
    /// Expands a 16-, 24- or 32-byte key.
    ///
    /// # Errors
    /// [`CryptoError::KeyLength`] for any other length.
    pub fn new(key: &[u8]) -> Result<Self, CryptoError> {
        let bad = || CryptoError::KeyLength {
            algorithm: "AES",
            got: key.len(),
            expected: "16, 24 or 32",
        };
        let schedule = match key.len() {
            16 => Schedule::A128(Aes128::new_from_slice(key).map_err(|_| bad())?),
            24 => Schedule::A192(Aes192::new_from_slice(key).map_err(|_| bad())?),
            32 => Schedule::A256(Aes256::new_from_slice(key).map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        // GCM's hash key H is the encryption of the zero block (NIST SP 800-38D §6.4).
        let mut h = Block::default();
        match &schedule {
            Schedule::A128(c) => c.encrypt_block(&mut h),
            Schedule::A192(c) => c.encrypt_block(&mut h),
            Schedule::A256(c) => c.encrypt_block(&mut h),
        }
        let ghash = GHash::new(&h);
        h.zeroize();
        Ok(AesKey {
            schedule,
            ghash,
            #[cfg(feature = "aws-lc")]
            aws_lc: std::sync::Arc::new(crate::crypto::awslc_keys::AwsLcKeys::new(key)?),
            #[cfg(feature = "ring")]
            ring: crate::crypto::ring_keys::RingGcmKey::new(key).map(std::sync::Arc::new),
            #[cfg(feature = "openssl")]
            openssl: crate::crypto::openssl_gcm::OpenSslKey::new(key).map(std::sync::Arc::new),
        })
    }

    /// Which AES this key is for.
    pub fn algorithm(&self) -> Algorithm {
        match self.schedule {
            Schedule::A128(_) => Algorithm::Aes128,
            Schedule::A192(_) => Algorithm::Aes192,
            Schedule::A256(_) => Algorithm::Aes256,
        }
    }

    /// Runs one packet in place and returns the length of its output.
    ///
    /// `buf[..len]` holds the packet's input. `state` is the chaining state the previous packet
    /// of the job left (or the job's IV for its first packet); on return it holds the state for
    /// the next packet. `last` says whether this is the job's last packet:
    /// - every packet but the last must be a whole number of blocks;
    /// - the last packet may end in a partial block in OFB, CFB and CTR;
    /// - with [`Padding::Pkcs7`], the last packet of an encryption is padded in place, so `buf`
    ///   must have room for [`padded_len`]`(len)` bytes, and the last packet of a decryption
    ///   is checked and stripped of its padding.
    ///
    /// GCM is not run here: it carries a GHASH state and a tag (see [`AesKey::gcm_start`]).
    ///
    /// # Errors
    /// [`CryptoError::NotBlockAligned`], [`CryptoError::NoRoomForPadding`],
    /// [`CryptoError::BadPadding`], [`CryptoError::PaddingNotApplicable`];
    /// [`CryptoError::AuthenticatedMode`] for GCM.
    pub fn process(
        &self,
        op: AesOp,
        state: &mut ChainState,
        buf: &mut [u8],
        len: usize,
        last: bool,
    ) -> Result<usize, CryptoError> {
        if let Some(serial) = op.serial() {
            // One stream of a serial operation: the single-stream loop (`serial.rs`).
            let run_len = checked_run_len(op, buf.len(), len, last)?;
            pad_in_place(buf, len, run_len);
            let data = &mut buf[..run_len];
            match &self.schedule {
                Schedule::A128(c) => run_stream(c, serial, &mut state.0, data),
                Schedule::A192(c) => run_stream(c, serial, &mut state.0, data),
                Schedule::A256(c) => run_stream(c, serial, &mut state.0, data),
            }
            return Ok(run_len);
        }
        match &self.schedule {
            Schedule::A128(c) => run(c, op, state, buf, len, last),
            Schedule::A192(c) => run(c, op, state, buf, len, last),
            Schedule::A256(c) => run(c, op, state, buf, len, last),
        }
    }

    /// [`process`](Self::process) from `input` into `output`, as long, leaving `input` as it
    /// was: the same checks, output and state handed on. RustCrypto runs ECB, CBC decryption
    /// and CTR between two buffers as fast as in place ([`AesOp::runs_between`]); any other
    /// packet (a serial operation, or one padded here) is copied into `output` and run there.
    ///
    /// # Errors
    /// As [`process`](Self::process), and [`CryptoError::LengthExceedsBuffer`] unless `output`
    /// is as long as `input`.
    pub(crate) fn process_between(
        &self,
        op: AesOp,
        state: &mut ChainState,
        input: &[u8],
        output: &mut [u8],
        len: usize,
        last: bool,
    ) -> Result<usize, CryptoError> {
        check_same_len(input, output)?;
        let run_len = checked_run_len(op, output.len(), len, last)?;
        if !op.runs_between() || run_len != len {
            output.copy_from_slice(input);
            return self.process(op, state, output, len, last);
        }
        let buf = InOutBuf::new(&input[..run_len], &mut output[..run_len]).map_err(|_| {
            CryptoError::LengthExceedsBuffer {
                len: run_len,
                buf: run_len,
            }
        })?;
        match &self.schedule {
            Schedule::A128(c) => run_between(c, op, state, buf),
            Schedule::A192(c) => run_between(c, op, state, buf),
            Schedule::A256(c) => run_between(c, op, state, buf),
        }
        if last && op.padding == Padding::Pkcs7 && op.direction == Direction::Decrypt {
            return unpad_len(&output[..run_len]);
        }
        Ok(run_len)
    }

    /// Hands `f` the cipher's encryption backend (AES-NI where the CPU has it): the whole
    /// closure runs inside one backend call, so the lanes can feed it blocks of many streams.
    pub(super) fn encrypt_with_backend(&self, f: impl BlockCipherEncClosure<BlockSize = U16>) {
        match &self.schedule {
            Schedule::A128(c) => c.encrypt_with_backend(f),
            Schedule::A192(c) => c.encrypt_with_backend(f),
            Schedule::A256(c) => c.encrypt_with_backend(f),
        }
    }

    /// Runs a whole job in one piece: a convenience for callers that need no scheduling, and the
    /// reference the tests compare packet-by-packet runs against.
    ///
    /// # Errors
    /// As [`AesKey::process`]; also [`CryptoError::IvLength`] for a mode that takes an IV
    /// without a 16-byte one.
    pub fn one_shot(&self, op: AesOp, iv: &[u8], data: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut state = ChainState::for_mode(op.mode, iv)?;
        let mut buf = data.to_vec();
        if op.pads_on_encrypt() {
            buf.resize(padded_len(data.len()), 0);
        }
        let n = self.process(op, &mut state, &mut buf, data.len(), true)?;
        buf.truncate(n);
        Ok(buf)
    }
}

/// The direction of an AES operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Plaintext to ciphertext.
    Encrypt,
    /// Ciphertext to plaintext.
    Decrypt,
}

impl Direction {
    /// The scheduler's command for this direction.
    pub fn cmd(self) -> Cmd {
        match self {
            Direction::Encrypt => Cmd::Encrypt,
            Direction::Decrypt => Cmd::Decrypt,
        }
    }
}

/// Block padding for ECB and CBC.
///
/// The stream modes (OFB, CFB, CTR, GCM) are never padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Padding {
    /// No padding: the data must be a whole number of blocks.
    #[default]
    None,
    /// PKCS#7: encryption always appends 1 to 16 bytes; decryption checks and strips them.
    Pkcs7,
}

/// What to do with a job's data: direction, mode and padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AesOp {
    /// Encrypt or decrypt.
    pub direction: Direction,
    /// The mode of operation.
    pub mode: Mode,
    /// Padding of the final packet (ECB and CBC only).
    pub padding: Padding,
}

impl AesOp {
    /// An operation without padding.
    pub fn new(direction: Direction, mode: Mode) -> Self {
        AesOp {
            direction,
            mode,
            padding: Padding::None,
        }
    }

    /// The same operation with `padding`.
    pub fn with_padding(self, padding: Padding) -> Self {
        AesOp { padding, ..self }
    }

    /// Whether the last packet of an encryption grows by PKCS#7 padding.
    pub fn pads_on_encrypt(&self) -> bool {
        self.padding == Padding::Pkcs7 && self.direction == Direction::Encrypt
    }

    /// Whether RustCrypto runs the operation's packets from one buffer into another
    /// ([`AesKey::process_between`]): ECB, CBC decryption and CTR.
    pub(crate) fn runs_between(&self) -> bool {
        matches!(
            (self.mode, self.direction),
            (Mode::Ecb, _) | (Mode::Cbc, Direction::Decrypt) | (Mode::Ctr, _)
        )
    }

    /// Whether each block of a stream waits for the cipher output of the one before: CBC and
    /// CFB encryption, and OFB either way. These are the operations
    /// [`run_lanes`](crate::crypto::run_lanes) interleaves across streams; the others (ECB, CBC
    /// and CFB decryption) are parallel within one stream and run through
    /// [`AesKey::process`].
    pub fn is_serial(&self) -> bool {
        self.serial().is_some()
    }

    /// The serial operation this is, if it is one.
    pub(super) fn serial(&self) -> Option<Serial> {
        match (self.mode, self.direction) {
            (Mode::Cbc, Direction::Encrypt) => Some(Serial::CbcEncrypt),
            (Mode::Ofb, _) => Some(Serial::Ofb),
            (Mode::Cfb, Direction::Encrypt) => Some(Serial::CfbEncrypt),
            // CTR's blocks are independent; GCM jobs run on their own path.
            _ => None,
        }
    }

    /// Checks that the operation is well-formed for `len` bytes of job data: padding only for
    /// ECB and CBC, and whole blocks where the mode needs them. GCM is refused: its jobs carry
    /// a nonce, associated data and a tag (`Job::gcm_encrypt`, `Job::gcm_decrypt`).
    ///
    /// # Errors
    /// [`CryptoError::PaddingNotApplicable`], [`CryptoError::NotBlockAligned`],
    /// [`CryptoError::BadPadding`] (a padded decryption of nothing), or
    /// [`CryptoError::AuthenticatedMode`].
    pub fn check_job_len(&self, len: usize) -> Result<(), CryptoError> {
        if self.mode.is_authenticated() {
            return Err(CryptoError::AuthenticatedMode);
        }
        if self.padding == Padding::Pkcs7 && !self.mode.needs_whole_blocks() {
            return Err(CryptoError::PaddingNotApplicable);
        }
        let whole_blocks_needed = self.mode.needs_whole_blocks()
            && !(self.padding == Padding::Pkcs7 && self.direction == Direction::Encrypt);
        if whole_blocks_needed && len % BLOCK != 0 {
            return Err(CryptoError::NotBlockAligned { len });
        }
        if self.padding == Padding::Pkcs7 && self.direction == Direction::Decrypt && len == 0 {
            return Err(CryptoError::BadPadding);
        }
        Ok(())
    }
}

/// The length of `len` bytes after PKCS#7 padding: the next multiple of 16 strictly above.
pub fn padded_len(len: usize) -> usize {
    (len / BLOCK + 1) * BLOCK
}

/// The chaining state between two packets of a job: the 16-byte IV register of CBC, OFB and CFB,
/// the counter block of CTR (unused by ECB). Zeroized on drop; `Debug` does not show it, since in
/// OFB it is keystream.
#[derive(Clone, Default, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct ChainState(pub(super) [u8; BLOCK]);

impl fmt::Debug for ChainState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChainState(..)")
    }
}

impl ChainState {
    /// The state a job starts from: its IV.
    ///
    /// # Errors
    /// [`CryptoError::IvLength`] unless `iv` is 16 bytes.
    pub fn from_iv(iv: &[u8]) -> Result<Self, CryptoError> {
        let bytes: [u8; BLOCK] = iv
            .try_into()
            .map_err(|_| CryptoError::IvLength { got: iv.len() })?;
        Ok(ChainState(bytes))
    }

    /// The start state for `mode`: the IV for a mode that takes one (for CTR, the first counter
    /// block); ECB takes no IV and ignores whatever is given.
    ///
    /// # Errors
    /// [`CryptoError::IvLength`] for a mode that takes an IV without a 16-byte one.
    pub fn for_mode(mode: Mode, iv: &[u8]) -> Result<Self, CryptoError> {
        if mode.takes_iv() {
            ChainState::from_iv(iv)
        } else {
            Ok(ChainState::default())
        }
    }

    /// The raw 16 bytes.
    pub fn as_bytes(&self) -> &[u8; BLOCK] {
        &self.0
    }

    /// The CTR counter block `blocks` blocks further on: this block read as a 128-bit
    /// big-endian number plus `blocks`, wrapping modulo 2¹²⁸, as openssl's `aes-*-ctr` and
    /// RustCrypto's `ctr::Ctr128BE` count. A CTR packet starting `blocks` blocks into its job
    /// starts from `iv.counter_plus(blocks)`, so no packet waits for another
    /// (docs/ALGORITHM.md §15.4).
    pub fn counter_plus(&self, blocks: u64) -> ChainState {
        let n = u128::from_be_bytes(self.0).wrapping_add(u128::from(blocks));
        ChainState(n.to_be_bytes())
    }
}

/// Checks one packet against its operation, touching nothing, and returns how many bytes the
/// cipher runs over: `len`, or [`padded_len`]`(len)` for the padded final packet of an
/// encryption. Shared by [`AesKey::process`] and the lanes, so both refuse the same packets.
pub(super) fn checked_run_len(
    op: AesOp,
    buf_len: usize,
    len: usize,
    last: bool,
) -> Result<usize, CryptoError> {
    if len > buf_len {
        return Err(CryptoError::LengthExceedsBuffer { len, buf: buf_len });
    }
    if op.mode.is_authenticated() {
        return Err(CryptoError::AuthenticatedMode);
    }
    if op.padding == Padding::Pkcs7 && !op.mode.needs_whole_blocks() {
        return Err(CryptoError::PaddingNotApplicable);
    }
    if last && op.pads_on_encrypt() {
        let need = padded_len(len);
        if buf_len < need {
            return Err(CryptoError::NoRoomForPadding { got: buf_len, need });
        }
        return Ok(need);
    }
    let partial_allowed = last && !op.mode.needs_whole_blocks();
    if len % BLOCK != 0 && !partial_allowed {
        return Err(CryptoError::NotBlockAligned { len });
    }
    Ok(len)
}

/// Writes the PKCS#7 padding of a final packet after its `len` bytes, up to `run_len` (as
/// [`checked_run_len`] gave it); does nothing when the packet is not padded.
pub(super) fn pad_in_place(buf: &mut [u8], len: usize, run_len: usize) {
    if run_len > len {
        let tail_start = len - len % BLOCK;
        Pkcs7::raw_pad(&mut buf[tail_start..run_len], len - tail_start);
    }
}

/// One packet through RustCrypto's mode crates. [`AesKey::process`] takes this path for the
/// parallel operations (ECB, CBC and CFB decryption, CTR); the serial ones run through the
/// single-stream loop (`serial.rs`), and the tests check that loop against this path.
fn run<C>(
    cipher: &C,
    op: AesOp,
    state: &mut ChainState,
    buf: &mut [u8],
    len: usize,
    last: bool,
) -> Result<usize, CryptoError>
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + BlockSizeUser<BlockSize = U16>,
{
    let run_len = checked_run_len(op, buf.len(), len, last)?;
    pad_in_place(buf, len, run_len);
    let pad_here = last && op.padding == Padding::Pkcs7;

    let data = &mut buf[..run_len];
    let iv = Block::from(state.0);
    match (op.mode, op.direction) {
        (Mode::Ecb, Direction::Encrypt) => cipher.encrypt_blocks(whole_blocks(data)),
        (Mode::Ecb, Direction::Decrypt) => cipher.decrypt_blocks(whole_blocks(data)),
        (Mode::Cbc, Direction::Encrypt) => {
            let mut m = cbc::Encryptor::<&C>::inner_iv_init(cipher, &iv);
            m.encrypt_blocks(whole_blocks(data));
            state.0 = m.iv_state().into();
        }
        (Mode::Cbc, Direction::Decrypt) => {
            let mut m = cbc::Decryptor::<&C>::inner_iv_init(cipher, &iv);
            m.decrypt_blocks(whole_blocks(data));
            state.0 = m.iv_state().into();
        }
        (Mode::Ofb, _) => {
            let mut core = ofb::OfbCore::<&C>::inner_iv_init(cipher, &iv);
            if data.len() % BLOCK == 0 {
                BlockModeEncrypt::encrypt_blocks(&mut core, whole_blocks(data));
                state.0 = core.iv_state().into();
            } else {
                // Only a job's last packet ends mid-block; nothing follows it.
                StreamCipherCoreWrapper::from_core(core).apply_keystream(data);
            }
        }
        (Mode::Cfb, Direction::Encrypt) => {
            let mut m = cfb_mode::Encryptor::<&C>::inner_iv_init(cipher, &iv);
            if data.len() % BLOCK == 0 {
                m.encrypt_blocks(whole_blocks(data));
                state.0 = m.iv_state().into();
            } else {
                m.encrypt(data);
            }
        }
        (Mode::Cfb, Direction::Decrypt) => {
            let mut m = cfb_mode::Decryptor::<&C>::inner_iv_init(cipher, &iv);
            if data.len() % BLOCK == 0 {
                m.decrypt_blocks(whole_blocks(data));
                state.0 = m.iv_state().into();
            } else {
                m.decrypt(data);
            }
        }
        (Mode::Ctr, _) => {
            let mut core = ctr::CtrCore::<&C, ctr::flavors::Ctr128BE>::inner_iv_init(cipher, &iv);
            let (blocks, tail) = Block::slice_as_chunks_mut(data);
            core.apply_keystream_blocks(blocks);
            state.0 = core.iv_state().into();
            if !tail.is_empty() {
                // Only a job's last packet ends mid-block; nothing follows it.
                apply_to_tail(&mut core, tail);
            }
        }
        (Mode::Gcm, _) => return Err(CryptoError::AuthenticatedMode),
    }

    if pad_here && op.direction == Direction::Decrypt {
        return unpad_len(data);
    }
    Ok(run_len)
}

/// The length of a decrypted, PKCS#7-padded final packet once its padding is stripped.
///
/// # Errors
/// [`CryptoError::BadPadding`] when the last block does not carry valid padding (or there is
/// no block).
pub(super) fn unpad_len(data: &[u8]) -> Result<usize, CryptoError> {
    let run_len = data.len();
    if run_len < BLOCK {
        return Err(CryptoError::BadPadding);
    }
    let unpadded = Pkcs7::raw_unpad(&data[run_len - BLOCK..])
        .map_err(|_| CryptoError::BadPadding)?
        .len();
    Ok(run_len - BLOCK + unpadded)
}

/// Applies the next keystream block of `core` to a final partial block, as the `cipher` crate's
/// own `apply_keystream_partial` does, without its check for an exhausted counter: the callers
/// bound the length beforehand (the 128-bit CTR counter wraps and never runs out; GCM jobs are
/// at most `gcm::MAX_TEXT_LEN` bytes).
pub(super) fn apply_to_tail<S: StreamCipherCore + BlockSizeUser<BlockSize = U16>>(
    core: &mut S,
    tail: &mut [u8],
) {
    let mut block = Block::default();
    block[..tail.len()].copy_from_slice(tail);
    core.apply_keystream_blocks(std::slice::from_mut(&mut block));
    tail.copy_from_slice(&block[..tail.len()]);
    block.zeroize();
}

/// One packet of an operation that [`AesOp::runs_between`] through RustCrypto's mode crates,
/// from `buf`'s input into its output (checked, unpadded here, whole blocks but for a CTR
/// job's last packet).
fn run_between<C>(cipher: &C, op: AesOp, state: &mut ChainState, buf: InOutBuf<'_, '_, u8>)
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + BlockSizeUser<BlockSize = U16>,
{
    let iv = Block::from(state.0);
    let (blocks, mut tail) = buf.into_chunks::<U16>();
    match (op.mode, op.direction) {
        (Mode::Ecb, Direction::Encrypt) => cipher.encrypt_blocks_inout(blocks),
        (Mode::Ecb, Direction::Decrypt) => cipher.decrypt_blocks_inout(blocks),
        (Mode::Cbc, Direction::Decrypt) => {
            let mut m = cbc::Decryptor::<&C>::inner_iv_init(cipher, &iv);
            m.decrypt_blocks_inout(blocks);
            state.0 = m.iv_state().into();
        }
        (Mode::Ctr, _) => {
            let mut core = ctr::CtrCore::<&C, ctr::flavors::Ctr128BE>::inner_iv_init(cipher, &iv);
            core.apply_keystream_blocks_inout(blocks);
            state.0 = core.iv_state().into();
            if !tail.is_empty() {
                // Only a job's last packet ends mid-block; nothing follows it.
                let mut keystream = Block::default();
                core.apply_keystream_blocks(std::slice::from_mut(&mut keystream));
                tail.xor_in2out(&keystream[..tail.len()]);
                keystream.zeroize();
            }
        }
        // `runs_between` holds for none of the others.
        _ => {}
    }
}

/// Views block-aligned bytes as AES blocks (the caller has checked the length).
fn whole_blocks(data: &mut [u8]) -> &mut [Block] {
    let (blocks, tail) = Block::slice_as_chunks_mut(data);
    debug_assert!(tail.is_empty(), "caller checks block alignment");
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From one buffer into another, every operation gives what it gives in place (the path
    /// the vectors check), hands on the same state, and leaves its input as it was: whole
    /// packets and last ones, CTR's partial blocks, padding added and stripped, and packets
    /// copied and run in place (the serial operations, and those padded here).
    #[test]
    fn between_two_buffers_every_operation_gives_its_in_place_output() {
        let implementations = [
            crate::crypto::AesImpl::RustCrypto,
            #[cfg(feature = "openssl")]
            crate::crypto::AesImpl::OpenSsl,
            #[cfg(feature = "aws-lc")]
            crate::crypto::AesImpl::AwsLc,
        ];
        for imp in implementations {
            between_two_buffers_on(imp);
        }
    }

    /// [`between_two_buffers_every_operation_gives_its_in_place_output`] on `imp`.
    fn between_two_buffers_on(imp: crate::crypto::AesImpl) {
        let mut byte = 0u8;
        let mut next = || {
            byte = byte.wrapping_mul(29).wrapping_add(113);
            byte
        };
        let (mut checked, mut between) = (0, 0);
        for key_len in [16, 24, 32] {
            let raw: Vec<u8> = (0..key_len).map(|_| next()).collect();
            let key = AesKey::new(&raw).unwrap();
            for mode in [Mode::Ecb, Mode::Cbc, Mode::Ofb, Mode::Cfb, Mode::Ctr] {
                for direction in [Direction::Encrypt, Direction::Decrypt] {
                    for padding in [Padding::None, Padding::Pkcs7] {
                        let op = AesOp::new(direction, mode).with_padding(padding);
                        for (len, last) in
                            [(64, false), (64, true), (16, false), (37, true), (0, true)]
                        {
                            let iv: [u8; BLOCK] = std::array::from_fn(|_| next());
                            let room = if last && op.pads_on_encrypt() {
                                BLOCK
                            } else {
                                0
                            };
                            let mut input: Vec<u8> = (0..len).map(|_| next()).collect();
                            let padded = last && padding == Padding::Pkcs7;
                            if padded
                                && direction == Direction::Decrypt
                                && mode.needs_whole_blocks()
                            {
                                // A well-padded ciphertext: the encryption of padded bytes.
                                let enc =
                                    AesOp::new(Direction::Encrypt, mode).with_padding(padding);
                                let mut s = ChainState(iv);
                                input.resize(padded_len(len), 0);
                                let n = key.process(enc, &mut s, &mut input, len, true).unwrap();
                                input.truncate(n);
                            }
                            input.resize(input.len() + room, 0);
                            let msg = if room > 0 { len } else { input.len() };
                            let (mut in_place, mut s1) = (input.clone(), ChainState(iv));
                            let want = key.process(op, &mut s1, &mut in_place, msg, last);
                            let (mut out, mut s2) = (vec![0xee; input.len()], ChainState(iv));
                            let kept = input.clone();
                            let got = key.process_between_with(
                                imp,
                                op,
                                &mut s2,
                                (&input, &mut out),
                                msg,
                                last,
                            );
                            let at = format!("{imp} {op:?} {len} {last}");
                            assert_eq!(got, want, "{at}");
                            assert_eq!(input, kept, "{at}: the input is only read");
                            if let Ok(n) = want {
                                assert_eq!(out[..n], in_place[..n], "{at}");
                                assert_eq!(s2.0, s1.0, "{at}: the state");
                                checked += 1;
                                between += usize::from(imp.runs_between(op) && room == 0);
                            }
                        }
                    }
                }
            }
        }
        // ECB, CBC decryption and CTR; AWS-LC's CTR and CBC decryption only.
        let least = if imp == crate::crypto::AesImpl::AwsLc {
            45
        } else {
            80
        };
        assert!(
            checked > 150 && between > least,
            "{imp}: {checked} {between}"
        );
        let key = AesKey::new(&[0; 16]).unwrap();
        for op in [
            AesOp::new(Direction::Encrypt, Mode::Ctr),
            AesOp::new(Direction::Encrypt, Mode::Cbc),
        ] {
            assert_eq!(
                key.process_between_with(
                    imp,
                    op,
                    &mut ChainState([0; 16]),
                    (&[0; 32], &mut [0; 16]),
                    16,
                    true
                ),
                Err(CryptoError::LengthExceedsBuffer { len: 32, buf: 16 }),
                "{imp} {op:?}"
            );
        }
    }

    fn op(direction: Direction, mode: Mode) -> AesOp {
        AesOp::new(direction, mode)
    }

    /// The serial operations' single-stream loop against RustCrypto's `cbc`, `ofb` and
    /// `cfb-mode`: every key size, whole and partial final blocks, padding, and the chaining
    /// state handed on.
    #[test]
    fn the_serial_loop_matches_the_mode_crates() {
        let serial = [
            op(Direction::Encrypt, Mode::Cbc),
            op(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7),
            op(Direction::Encrypt, Mode::Ofb),
            op(Direction::Decrypt, Mode::Ofb),
            op(Direction::Encrypt, Mode::Cfb),
        ];
        for key_len in [16, 24, 32] {
            let key = AesKey::new(&vec![0x42; key_len]).unwrap();
            for o in serial {
                assert!(o.is_serial());
                // Past 4096 bytes (256 blocks) the loop also reads a page ahead.
                for len in [0, 1, 15, 16, 17, 33, 64, 100, 4096, 4097, 4112, 20000] {
                    for last in [false, true] {
                        if checked_run_len(o, padded_len(len), len, last).is_err() {
                            continue;
                        }
                        let msg: Vec<u8> = (0..len).map(|i| (i * 7 + key_len) as u8).collect();
                        let mut fast = msg.clone();
                        fast.resize(padded_len(len), 0);
                        let mut slow = fast.clone();
                        let iv = ChainState::from_iv(&[len as u8; 16]).unwrap();
                        let (mut s1, mut s2) = (iv.clone(), iv);
                        let n1 = key.process(o, &mut s1, &mut fast, len, last).unwrap();
                        let n2 = match &key.schedule {
                            Schedule::A128(c) => run(c, o, &mut s2, &mut slow, len, last),
                            Schedule::A192(c) => run(c, o, &mut s2, &mut slow, len, last),
                            Schedule::A256(c) => run(c, o, &mut s2, &mut slow, len, last),
                        }
                        .unwrap();
                        let what = format!("{o:?} key {key_len} len {len} last {last}");
                        assert_eq!(n1, n2, "{what}");
                        assert_eq!(fast[..n1], slow[..n2], "{what}");
                        assert_eq!(s1, s2, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn key_lengths() {
        for (len, alg) in [
            (16, Algorithm::Aes128),
            (24, Algorithm::Aes192),
            (32, Algorithm::Aes256),
        ] {
            assert_eq!(AesKey::new(&vec![7; len]).unwrap().algorithm(), alg);
        }
        for len in [0, 15, 17, 31, 33, 64] {
            let err = AesKey::new(&vec![7; len]).unwrap_err();
            assert!(matches!(err, CryptoError::KeyLength { got, .. } if got == len));
        }
    }

    #[test]
    fn debug_never_shows_key_or_state_bytes() {
        let key = AesKey::new(&[0xAB; 16]).unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.to_lowercase().contains("ab"), "{shown}");
        assert!(!shown.contains("171"), "{shown}");
        let state = ChainState::from_iv(&[0xCD; 16]).unwrap();
        assert_eq!(format!("{state:?}"), "ChainState(..)");
    }

    #[test]
    fn middle_packets_must_be_whole_blocks() {
        let key = AesKey::new(&[1; 16]).unwrap();
        for mode in Mode::UNAUTHENTICATED {
            let mut state = ChainState::from_iv(&[0; 16]).unwrap();
            let mut buf = [0u8; 20];
            let err = key
                .process(
                    op(Direction::Encrypt, mode),
                    &mut state,
                    &mut buf,
                    20,
                    false,
                )
                .unwrap_err();
            assert_eq!(err, CryptoError::NotBlockAligned { len: 20 });
        }
    }

    #[test]
    fn ecb_and_cbc_need_whole_blocks_without_padding_even_last() {
        let key = AesKey::new(&[1; 16]).unwrap();
        for mode in [Mode::Ecb, Mode::Cbc] {
            let err = key.one_shot(op(Direction::Encrypt, mode), &[0; 16], &[0; 17]);
            assert_eq!(err.unwrap_err(), CryptoError::NotBlockAligned { len: 17 });
        }
        for mode in [Mode::Ofb, Mode::Cfb, Mode::Ctr] {
            assert_eq!(
                key.one_shot(op(Direction::Encrypt, mode), &[0; 16], &[0; 17])
                    .unwrap()
                    .len(),
                17
            );
        }
    }

    #[test]
    fn padding_round_trips_and_bad_padding_is_an_error() {
        let key = AesKey::new(&[9; 32]).unwrap();
        for mode in [Mode::Ecb, Mode::Cbc] {
            for len in [0, 1, 15, 16, 17, 31, 32, 100] {
                let msg: Vec<u8> = (0..len as u8).collect();
                let enc = op(Direction::Encrypt, mode).with_padding(Padding::Pkcs7);
                let dec = op(Direction::Decrypt, mode).with_padding(Padding::Pkcs7);
                let ct = key.one_shot(enc, &[3; 16], &msg).unwrap();
                assert_eq!(ct.len(), padded_len(len));
                assert_eq!(key.one_shot(dec, &[3; 16], &ct).unwrap(), msg);
            }
            // Ciphertext of a block whose plaintext ends in 0x00 is not validly padded.
            let ct = key
                .one_shot(op(Direction::Encrypt, mode), &[3; 16], &[0; 16])
                .unwrap();
            let dec = op(Direction::Decrypt, mode).with_padding(Padding::Pkcs7);
            assert_eq!(
                key.one_shot(dec, &[3; 16], &ct).unwrap_err(),
                CryptoError::BadPadding
            );
            assert_eq!(
                key.one_shot(dec, &[3; 16], &[]).unwrap_err(),
                CryptoError::BadPadding
            );
        }
    }

    #[test]
    fn padding_is_refused_for_stream_modes() {
        let key = AesKey::new(&[9; 16]).unwrap();
        for mode in [Mode::Ofb, Mode::Cfb, Mode::Ctr] {
            let o = op(Direction::Encrypt, mode).with_padding(Padding::Pkcs7);
            assert_eq!(
                key.one_shot(o, &[0; 16], &[1; 16]).unwrap_err(),
                CryptoError::PaddingNotApplicable
            );
            assert_eq!(
                o.check_job_len(16).unwrap_err(),
                CryptoError::PaddingNotApplicable
            );
        }
    }

    #[test]
    fn padded_encryption_needs_room() {
        let key = AesKey::new(&[9; 16]).unwrap();
        let mut state = ChainState::from_iv(&[0; 16]).unwrap();
        let mut buf = [0u8; 16];
        let o = op(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
        assert_eq!(
            key.process(o, &mut state, &mut buf, 16, true).unwrap_err(),
            CryptoError::NoRoomForPadding { got: 16, need: 32 }
        );
    }

    #[test]
    fn iv_must_be_sixteen_bytes_for_chained_modes() {
        let key = AesKey::new(&[9; 16]).unwrap();
        for mode in [Mode::Cbc, Mode::Ofb, Mode::Cfb, Mode::Ctr] {
            assert_eq!(
                key.one_shot(op(Direction::Encrypt, mode), &[0; 8], &[0; 16])
                    .unwrap_err(),
                CryptoError::IvLength { got: 8 }
            );
        }
        // ECB takes no IV: whatever is given is ignored.
        assert!(
            key.one_shot(op(Direction::Encrypt, Mode::Ecb), &[], &[0; 16])
                .is_ok()
        );
    }

    #[test]
    fn gcm_is_refused_as_a_plain_mode() {
        let key = AesKey::new(&[9; 16]).unwrap();
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let o = op(direction, Mode::Gcm);
            assert_eq!(
                key.one_shot(o, &[0; 16], &[0; 16]).unwrap_err(),
                CryptoError::AuthenticatedMode
            );
            assert_eq!(
                o.check_job_len(16).unwrap_err(),
                CryptoError::AuthenticatedMode
            );
        }
    }

    #[test]
    fn ctr_counts_over_the_whole_block_and_wraps_at_128_bits() {
        let key = AesKey::new(&[5; 16]).unwrap();
        let o = op(Direction::Encrypt, Mode::Ctr);
        let start = [0xff; 16];
        let whole = key.one_shot(o, &start, &[0; 64]).unwrap();
        // Block i is the encryption of start + i: ff..ff, then 00..00, 00..01, 00..02.
        let ecb = op(Direction::Encrypt, Mode::Ecb);
        let mut counters = Vec::new();
        counters.extend_from_slice(&[0xff; 16]);
        for last in 0..3u8 {
            let mut block = [0u8; 16];
            block[15] = last;
            counters.extend_from_slice(&block);
        }
        assert_eq!(whole, key.one_shot(ecb, &[], &counters).unwrap());
        // counter_plus wraps the same way, so a packet can start anywhere.
        let iv = ChainState::from_iv(&start).unwrap();
        assert_eq!(iv.counter_plus(1).as_bytes(), &[0; 16]);
        assert_eq!(iv.counter_plus(3).as_bytes()[15], 2);
        for skip in 0..4u64 {
            let from = iv.counter_plus(skip);
            let tail = key
                .one_shot(o, from.as_bytes(), &[0; 64][..(64 - 16 * skip as usize)])
                .unwrap();
            assert_eq!(tail, whole[16 * skip as usize..], "from block {skip}");
        }
        // The state handed on after whole blocks is the next counter block.
        let mut state = iv.clone();
        let mut buf = [0u8; 32];
        key.process(o, &mut state, &mut buf, 32, false).unwrap();
        assert_eq!(state, iv.counter_plus(2));
    }
}
