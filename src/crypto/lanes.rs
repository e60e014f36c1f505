//! Lanes: packets of independent streams in a serial mode, interleaved block by block.
//!
//! CBC and CFB encryption and OFB are serial within a stream: the cipher input of each block
//! is the cipher output of the one before, so one stream runs at the latency of the AES unit
//! (about 1 GB/s on the development machine) while the unit could work on several blocks at
//! once. A node holding packets of several jobs interleaves them, as intel-ipsec-mb's job
//! manager fills the lanes of its multi-buffer code: each step takes the next block of every
//! lane, and the AES backend encrypts `ParBlocksSize` of them per call (8 with AES-NI), blocks
//! of different streams that do not wait for one another. Eight CBC streams of one key run
//! about five times as fast as one (`benches/lanes.rs`).
//!
//! # How a lane set runs
//! 1. Every packet is checked as [`AesKey::process`] checks it, and for a serial operation
//!    ([`AesOp::is_serial`]); one refused packet refuses the set before anything is written.
//! 2. The final packets of padded CBC encryptions get their PKCS#7 padding in place.
//! 3. The lanes are grouped by key and operation: packets that borrow the same [`AesKey`]
//!    (compared by address) and run the same serial operation form a group, and a packet alone
//!    with its key runs through [`AesKey::process`], the single-stream path. Each group runs
//!    inside one
//!    `encrypt_with_backend` call: the whole interleaving loop is the closure, compiled with
//!    the backend's CPU features, so the backend's `encrypt_par_blocks` is inlined into it
//!    rather than called per step.
//! 4. A group runs in phases: as many steps as the shortest lane has whole blocks left, the
//!    chaining registers kept in the backend's block arrays from step to step; then the partial
//!    final blocks (OFB, CFB) of the lanes that reached them. Lanes that are done drop out, and
//!    a lane left alone finishes on the single-stream loop. The call returns when every packet
//!    is done; the caller refills the lanes by handing over the next set.
//! 5. Each lane's register becomes its job's [`ChainState`], except after a partial final
//!    block, which [`AesKey::process`] also leaves unchanged (nothing follows it).
//!
//! A packet given its [`input`](LaneItem::input) apart runs out of place: the step loop reads
//! its whole blocks from the input and writes the output into its buffer, so no copy is made
//! before it runs (a node keeps a packet's input, untouched, to run it again elsewhere should
//! the node fail). Lanes that read their input in place and lanes that read it from elsewhere
//! form groups of their own. What is not read from elsewhere runs in place on a copy: a partial
//! final block (OFB, CFB), a padded final block (the input's last bytes and the padding), a
//! packet alone with its key, and the rest of a lane left alone.
//!
//! # Keys: grouped, not stepped
//! intel-ipsec-mb gives each lane its own round keys inside hand-written AES rounds; a
//! RustCrypto backend holds one key schedule. Two ways to mix keys were measured side by side
//! (32 CBC streams of 16 KiB, AMD EPYC with AES-NI, a shared machine, an earlier build of
//! both): *grouping*, one backend call per key running that key's lanes to the end, and
//! *stepping*, each step one backend call per key moving its lanes on by one block. A backend call (feature check, the boundary into
//! AES-NI code, registers in and out) costs more than the AES latency it would hide: with four
//! keys, stepping ran at 0.6 to 1.0 GiB/s where grouping ran at 1.5 to 4.8 GiB/s (L = 8 to
//! 32), and with a key per stream stepping fell to 0.2 to 0.3 GiB/s, below a single stream,
//! while grouping stayed at single-stream speed. Grouping is kept. Streams that share a key
//! get the full width; streams with a key each run one after another through
//! [`AesKey::process`], no faster than alone, so a scheduler gains most by filling a lane set
//! with packets that share keys.
//!
//! # Not for lanes
//! ECB, CBC decryption and CFB decryption are parallel within one stream, and
//! [`AesKey::process`] already gives the backend `ParBlocksSize` blocks of the stream per call.
//! [`run_lanes`] refuses them with [`CryptoError::NotSerial`]; callers route packets by
//! [`AesOp::is_serial`].

use std::fmt;
use std::ptr;

use cipher::typenum::Unsigned;
use cipher::{
    Array, BlockCipherEncBackend, BlockCipherEncClosure, BlockSizeUser, ParBlocks, consts::U16,
};
use smallvec::SmallVec;
use thiserror::Error;
use zeroize::Zeroize;

use crate::crypto::aes::{
    AesKey, AesOp, BLOCK, ChainState, checked_run_len, pad_in_place, padded_len,
};
use crate::crypto::error::CryptoError;
use crate::crypto::serial::{Serial, run_blocks, run_partial, xor_into};

type Block = Array<u8, U16>;

/// How many packets a lane set holds unless a caller knows better: the smallest L at which
/// streams sharing a key reached full speed in `benches/lanes.rs` on the development machine.
///
/// There (AMD EPYC, AES-NI, whose backend encrypts 8 blocks per call) 32 streams of 16 KiB ran
/// at 5.4, 6.3 and 6.1 GiB/s in CBC, OFB and CFB encryption with L = 8, five to six times one
/// stream (1.0 to 1.3 GiB/s); L = 16 and 32 were no faster beyond the noise of a shared
/// machine, and only hold more packets back. With mixed keys a set gains what its same-key
/// groups have: L counts per key.
pub const DEFAULT_LANES: usize = 8;

/// The lane-set widths the measurement compares ([`AesImpl::Lanes`](crate::crypto::AesImpl)):
/// 8 (one AES-NI backend call per step), and 16, 32 and 64, which fill the wider VAES backends
/// of `aes` 0.9.4 (30 blocks per call with AVX2, 64 with AVX-512) where `aes` sees them (through
/// `cpufeatures` 0.3.1, which counts VAES only with the AVX-512 register state, or a build that
/// enables `vaes`).
pub const LANE_WIDTHS: [usize; 4] = [8, 16, 32, 64];

/// The widest lane set [`run_lanes_width`] takes.
pub const MAX_LANES: usize = 64;

/// One packet of a lane set: what [`AesKey::process`] takes, gathered in a struct so that
/// packets of different jobs, keys and serial operations can run side by side.
pub struct LaneItem<'a> {
    /// The job's key.
    pub key: &'a AesKey,
    /// A serial operation (see [`AesOp::is_serial`]).
    pub op: AesOp,
    /// The chaining state the job's previous packet left (or its IV); holds the state for the
    /// next packet on return.
    pub state: &'a mut ChainState,
    /// The packet's input in `buf[..len]`, replaced in place by its output; or, when `input`
    /// is given, the buffer the output goes into. A padded final packet needs room for
    /// [`padded_len`]`(len)` bytes.
    pub buf: &'a mut [u8],
    /// The length of the packet's input.
    pub len: usize,
    /// Whether this is the job's last packet (which alone may end mid-block or be padded).
    pub last: bool,
    /// The packet's input, when it runs out of place: `input[..len]` is read and the output
    /// written into `buf`, whose bytes before the run do not matter. The lanes read each whole
    /// block where it is, so the input is not copied first (a packet alone with its key, which
    /// runs on the single-stream path, is copied into `buf` and run in place, and so are the
    /// bytes of a partial or padded final block). `None`: in place.
    pub input: Option<&'a [u8]>,
}

impl LaneItem<'_> {
    /// The length of the packet's output in `buf` once the lanes have run: `len`, or
    /// [`padded_len`]`(len)` for the padded final packet of a CBC encryption.
    pub fn output_len(&self) -> usize {
        if self.last && self.op.pads_on_encrypt() {
            padded_len(self.len)
        } else {
            self.len
        }
    }
}

impl fmt::Debug for LaneItem<'_> {
    /// Shows the shape of the packet, never its bytes or state.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaneItem")
            .field("key", self.key)
            .field("op", &self.op)
            .field("buf_len", &self.buf.len())
            .field("len", &self.len)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

/// A lane set refused before anything ran: which packet, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("packet {index} of the lane set: {error}")]
#[non_exhaustive]
pub struct LaneError {
    /// The position of the refused packet in the slice given to [`run_lanes`].
    pub index: usize,
    /// What is wrong with it: what [`AesKey::process`] would say, or
    /// [`CryptoError::NotSerial`].
    pub error: CryptoError,
}

/// Runs every packet of `items` in place, interleaving the blocks of different packets: on
/// return each `buf[..`[`output_len`](LaneItem::output_len)`()]` holds what
/// [`AesKey::process`] would have written, and each `state` what it would have left.
///
/// The packets must be of different jobs (a job's next packet needs the state this one
/// leaves); their keys, key sizes, serial operations and lengths may all differ. Packets that
/// borrow the same [`AesKey`] share the cipher's width; see the module notes.
///
/// # Errors
/// A [`LaneError`] naming the first packet refused: a parallel operation
/// ([`CryptoError::NotSerial`]), or what [`AesKey::process`] would refuse. Nothing has been
/// written then.
pub fn run_lanes(items: &mut [LaneItem<'_>]) -> Result<(), LaneError> {
    let mut run_lens: SmallVec<[usize; 32]> = SmallVec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        run_lens.push(check_item(item).map_err(|error| LaneError { index, error })?);
    }

    // A packet alone with its key has no lane to share the backend with: it takes the
    // single-stream path. The others become lanes, grouped by key.
    let mut key_addrs: SmallVec<[usize; 32]> = items.iter().map(|i| key_addr(i.key)).collect();
    key_addrs.sort_unstable();
    let shares_key = |key: &AesKey| {
        let first = key_addrs.partition_point(|&a| a < key_addr(key));
        key_addrs.get(first + 1) == Some(&key_addr(key))
    };
    let mut lanes: SmallVec<[Lane<'_>; 32]> = SmallVec::new();
    for ((index, item), run_len) in items.iter_mut().enumerate().zip(run_lens) {
        let alone = !shares_key(item.key);
        // A packet alone with its key runs on the single-stream path, in place on a copy.
        if let Some(input) = item.input.filter(|_| alone) {
            item.buf[..item.len].copy_from_slice(&input[..item.len]);
            item.input = None;
        }
        if !alone {
            pad_in_place(item.buf, item.len, run_len);
            lanes.push(Lane::new(item, run_len));
        } else {
            // It cannot fail: the packet has passed the same checks.
            item.key
                .process(item.op, item.state, item.buf, item.len, item.last)
                .map_err(|error| LaneError { index, error })?;
        }
    }
    // A group shares a key and an operation, and reads its input in place or from elsewhere.
    let group_of = |lane: &Lane<'_>| (key_addr(lane.key), lane.serial, lane.input.is_some());
    lanes.sort_unstable_by_key(group_of);

    for group in lanes.chunk_by_mut(|a, b| group_of(a) == group_of(b)) {
        let key = group[0].key;
        key.encrypt_with_backend(Interleave { lanes: group });
    }

    for lane in &mut lanes {
        lane.finish();
    }
    Ok(())
}

/// Runs every packet of `items` in lane sets of at most `width` packets (consecutive runs of
/// `items`), each set as [`run_lanes`] runs it. Every packet is checked before any set runs, so
/// a refused packet still refuses the whole call before anything is written.
///
/// # Errors
/// [`CryptoError::LaneWidth`] (as packet 0) unless `1 <= width <= `[`MAX_LANES`]; otherwise
/// as [`run_lanes`].
pub fn run_lanes_width(items: &mut [LaneItem<'_>], width: usize) -> Result<(), LaneError> {
    check_width(width).map_err(|error| LaneError { index: 0, error })?;
    check_all(items)?;
    for (set, chunk) in items.chunks_mut(width).enumerate() {
        run_lanes(chunk).map_err(|e| LaneError {
            index: set * width + e.index,
            error: e.error,
        })?;
    }
    Ok(())
}

/// Runs the packets of `items` as one lane set, as [`run_lanes`] does, but `slice` bytes of
/// every lane at a time (rounded down to whole blocks, at least one), calling `between` after
/// each slice but the last: a caller can do other work there, and the lanes go on where they
/// stopped. A CBC, CFB or OFB lane's state after a whole number of blocks is all it needs to
/// go on, so the output is byte for byte [`run_lanes`]'s. Every packet is checked before any
/// slice runs, so a refused packet refuses the whole call before anything is written.
///
/// # Errors
/// As [`run_lanes`].
pub fn run_lanes_paused(
    items: &mut [LaneItem<'_>],
    slice: usize,
    between: &mut dyn FnMut(),
) -> Result<(), LaneError> {
    check_all(items)?;
    let slice = (slice / BLOCK).max(1) * BLOCK;
    // A packet that ends mid-block leaves the state as it came (see `Lane::finish`); its
    // slices before the last move it on, so it is put back at the end.
    let kept: SmallVec<[Option<ChainState>; 32]> = items
        .iter()
        .map(|i| {
            let mid_block = i.len % BLOCK != 0 && !(i.last && i.op.pads_on_encrypt());
            (mid_block && i.len > slice).then(|| i.state.clone())
        })
        .collect();
    let mut off = 0;
    loop {
        // Each lane's next slice; its last slice takes the rest of the packet (and its padding
        // room) and ends it as the packet ends. An empty final packet (a padding block) runs
        // in the first slice.
        let mut part: SmallVec<[LaneItem<'_>; 32]> = items
            .iter_mut()
            .filter(|i| off == 0 || i.len > off)
            .map(|i| {
                let more = i.len > off + slice;
                let len = if more { slice } else { i.len - off };
                LaneItem {
                    key: i.key,
                    op: i.op,
                    state: &mut *i.state,
                    buf: if more {
                        &mut i.buf[off..off + slice]
                    } else {
                        &mut i.buf[off..]
                    },
                    len,
                    last: !more && i.last,
                    input: i.input.map(|input| &input[off..off + len]),
                }
            })
            .collect();
        run_lanes(&mut part)?;
        drop(part);
        off += slice;
        if !items.iter().any(|i| i.len > off) {
            for (item, kept) in items.iter_mut().zip(kept) {
                if let Some(state) = kept {
                    *item.state = state;
                }
            }
            return Ok(());
        }
        between();
    }
}

/// Checks every packet of `items` as [`run_lanes`] does, before a call that runs them in
/// several sets writes anything.
fn check_all(items: &[LaneItem<'_>]) -> Result<(), LaneError> {
    for (index, item) in items.iter().enumerate() {
        check_item(item).map_err(|error| LaneError { index, error })?;
    }
    Ok(())
}

/// Checks one packet of a lane set as [`AesKey::process`] would (and its input, when it runs
/// out of place, for `len` bytes), and for a serial operation; returns the length it runs
/// over, its padding included.
fn check_item(item: &LaneItem<'_>) -> Result<usize, CryptoError> {
    if !item.op.is_serial() {
        return Err(CryptoError::NotSerial {
            mode: item.op.mode,
            direction: item.op.direction,
        });
    }
    check_input(item)?;
    checked_run_len(item.op, item.buf.len(), item.len, item.last)
}

/// Checks that the input of a packet that runs out of place holds its `len` bytes.
pub(super) fn check_input(item: &LaneItem<'_>) -> Result<(), CryptoError> {
    match item.input {
        Some(input) if input.len() < item.len => Err(CryptoError::LengthExceedsBuffer {
            len: item.len,
            buf: input.len(),
        }),
        _ => Ok(()),
    }
}

/// Checks a lane-set width: 1 to [`MAX_LANES`].
pub(super) fn check_width(width: usize) -> Result<(), CryptoError> {
    if width == 0 || width > MAX_LANES {
        return Err(CryptoError::LaneWidth {
            width,
            max: MAX_LANES,
        });
    }
    Ok(())
}

fn key_addr(key: &AesKey) -> usize {
    ptr::from_ref(key).addr()
}

/// One packet being run: its blocks, how far it has got, and its chaining register.
struct Lane<'a> {
    key: &'a AesKey,
    serial: Serial,
    /// The chaining register: the IV for the next block.
    register: Block,
    /// The whole blocks the step loop runs: its output, and its input unless `input` holds
    /// it. In place, every whole block of the packet (padding included).
    blocks: &'a mut [Block],
    /// The whole blocks of the input of a packet that runs out of place, as many as `blocks`.
    input: Option<&'a [Block]>,
    /// What runs in place after `blocks`, emptied once run: the partial final block (OFB and
    /// CFB); out of place, the padded final block of a CBC encryption too (a whole block: the
    /// input's last bytes, then the padding).
    tail: &'a mut [u8],
    /// Whether the packet ends mid-block; its register is then not handed on.
    ends_mid_block: bool,
    /// The next whole block to run.
    next: usize,
    state: &'a mut ChainState,
}

impl<'a> Lane<'a> {
    /// A lane for a checked packet of `run_len` bytes, padding included (its padding already
    /// written after its input in `buf`).
    fn new(item: &'a mut LaneItem<'_>, run_len: usize) -> Self {
        let len = item.len;
        let buf = &mut item.buf[..run_len];
        let (blocks, tail, input) = match item.input {
            None => {
                let (blocks, tail) = Block::slice_as_chunks_mut(buf);
                (blocks, tail, None)
            }
            // Out of place, the input's whole blocks are read where they are; its last bytes
            // are copied before the padding, to run in place with it.
            Some(input) => {
                let read = len / BLOCK * BLOCK;
                let (front, tail) = buf.split_at_mut(read);
                tail[..len - read].copy_from_slice(&input[read..len]);
                let (blocks, _) = Block::slice_as_chunks_mut(front);
                let (whole, _) = Block::slice_as_chunks(&input[..read]);
                (blocks, tail, Some(whole))
            }
        };
        Lane {
            input,
            key: item.key,
            serial: item
                .op
                .serial()
                .expect("run_lanes checks that the operation is serial"),
            register: Block::from(item.state.0),
            ends_mid_block: tail.len() % BLOCK != 0,
            blocks,
            tail,
            next: 0,
            state: &mut *item.state,
        }
    }

    fn whole_blocks_left(&self) -> usize {
        self.blocks.len() - self.next
    }

    fn is_done(&self) -> bool {
        self.whole_blocks_left() == 0 && self.tail.is_empty()
    }

    /// Hands the register on as the job's chaining state, as [`AesKey::process`] does: a
    /// packet that ends mid-block is a job's last and leaves the state as it came.
    fn finish(&mut self) {
        if !self.ends_mid_block {
            self.state.0 = self.register.into();
        }
    }
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        self.register.as_mut_slice().zeroize();
    }
}

fn wipe(blocks: &mut [Block]) {
    for block in blocks {
        block.as_mut_slice().zeroize();
    }
}

/// Moves the lanes still running to the front and returns how many there are.
fn keep_live_first(lanes: &mut [Lane<'_>]) -> usize {
    let mut live = lanes.len();
    let mut i = 0;
    while i < live {
        if lanes[i].is_done() {
            live -= 1;
            lanes.swap(i, live);
        } else {
            i += 1;
        }
    }
    live
}

/// Runs `steps` whole blocks of every lane (each must have that many left; all run the same
/// operation), block by block across the lanes: `ParBlocksSize` lanes per backend call, their
/// registers kept in the call's block array from one step to the next. Each lane's next
/// `steps` blocks are taken as a slice of their own and the operation's input and output steps
/// are chosen once for the group, which keeps the step loop to loads, XORs and stores (about
/// 14–27% faster at widths 8 to 32 than reaching each block through its lane, in `cargo bench
/// --bench lanes` on AES-NI).
#[inline(always)]
fn run_steps<B: BlockCipherEncBackend<BlockSize = U16>>(
    backend: &B,
    lanes: &mut [Lane<'_>],
    steps: usize,
) {
    let width = B::ParBlocksSize::USIZE;
    let mut registers: SmallVec<[ParBlocks<B>; 4]> = lanes
        .chunks(width)
        .map(|chunk| {
            let mut par = ParBlocks::<B>::default();
            for (register, lane) in par.iter_mut().zip(chunk) {
                *register = lane.register;
            }
            par
        })
        .collect();
    let serial = lanes[0].serial;
    {
        // A group's lanes all read their input in place, or all from elsewhere.
        let inputs: SmallVec<[&[Block]; MAX_LANES]> = lanes
            .iter()
            .filter_map(|l| l.input.map(|input| &input[l.next..l.next + steps]))
            .collect();
        let mut views: SmallVec<[&mut [Block]; MAX_LANES]> = lanes
            .iter_mut()
            .map(|l| &mut l.blocks[l.next..l.next + steps])
            .collect();
        let (views, registers) = (&mut views[..], &mut registers[..]);
        let io = Io {
            inputs: &inputs,
            views,
        };
        match (serial, inputs.is_empty()) {
            (Serial::CbcEncrypt, true) => {
                steps_loop::<B, CBC, false>(backend, io, registers, steps)
            }
            (Serial::Ofb, true) => steps_loop::<B, OFB, false>(backend, io, registers, steps),
            (Serial::CfbEncrypt, true) => {
                steps_loop::<B, CFB, false>(backend, io, registers, steps)
            }
            (Serial::CbcEncrypt, false) => {
                steps_loop::<B, CBC, true>(backend, io, registers, steps)
            }
            (Serial::Ofb, false) => steps_loop::<B, OFB, true>(backend, io, registers, steps),
            (Serial::CfbEncrypt, false) => {
                steps_loop::<B, CFB, true>(backend, io, registers, steps)
            }
        }
    }
    for (chunk, par) in lanes.chunks_mut(width).zip(registers.iter_mut()) {
        for (lane, register) in chunk.iter_mut().zip(par.iter()) {
            lane.register = *register;
            lane.next += steps;
        }
        wipe(par);
    }
}

/// The serial operations as [`steps_loop`]'s parameter.
const CBC: u8 = Serial::CbcEncrypt as u8;
const OFB: u8 = Serial::Ofb as u8;
const CFB: u8 = Serial::CfbEncrypt as u8;

/// The blocks a group of lanes runs over in [`steps_loop`]: each lane's output blocks
/// (`views`), and, for lanes that run out of place, their input blocks (`inputs`, one per lane,
/// as long; empty when the lanes run in place, reading `views`).
struct Io<'v, 'b> {
    inputs: &'v [&'b [Block]],
    views: &'v mut [&'b mut [Block]],
}

/// The step loop of [`run_steps`] for one serial operation, `OP`, fixed at compile time, in
/// place or (`BETWEEN`) from the lanes' inputs: per block, the register becomes the cipher input
/// (CBC: XOR with the input block), and the cipher output becomes the block's output (OFB and
/// CFB: XOR with the input block) and the next register.
#[inline(always)]
fn steps_loop<B: BlockCipherEncBackend<BlockSize = U16>, const OP: u8, const BETWEEN: bool>(
    backend: &B,
    io: Io<'_, '_>,
    registers: &mut [ParBlocks<B>],
    steps: usize,
) {
    let width = B::ParBlocksSize::USIZE;
    let Io { inputs, views } = io;
    for s in 0..steps {
        let mut input_chunks = inputs.chunks(width);
        for (chunk, par) in views.chunks_mut(width).zip(registers.iter_mut()) {
            let input_chunk = if BETWEEN {
                input_chunks.next().unwrap_or_default()
            } else {
                &[]
            };
            if OP == CBC {
                if BETWEEN {
                    for (i, r) in input_chunk.iter().zip(par.iter_mut()) {
                        xor_into(r, &i[s]);
                    }
                } else {
                    for (v, r) in chunk.iter().zip(par.iter_mut()) {
                        xor_into(r, &v[s]);
                    }
                }
            }
            if chunk.len() == width {
                backend.encrypt_par_blocks_inplace(par);
            } else {
                backend.encrypt_tail_blocks_inplace(&mut par[..chunk.len()]);
            }
            for (j, (v, r)) in chunk.iter_mut().zip(par.iter_mut()).enumerate() {
                let block = &mut v[s];
                if BETWEEN && OP != CBC {
                    *block = input_chunk[j][s];
                }
                match OP {
                    CBC => *block = *r,
                    OFB => xor_into(block, r),
                    _ => {
                        xor_into(block, r);
                        *r = *block;
                    }
                }
            }
        }
    }
}

/// Runs the partial final block of a lane whose whole blocks are done, if it has one.
#[inline(always)]
fn run_tail<B: BlockCipherEncBackend<BlockSize = U16>>(backend: &B, lane: &mut Lane<'_>) {
    if lane.whole_blocks_left() == 0 && !lane.tail.is_empty() {
        let (last, partial) = Block::slice_as_chunks_mut(lane.tail);
        if last.is_empty() {
            run_partial(backend, &lane.register, partial);
        } else {
            let mut register = run_blocks(backend, lane.serial, lane.register, last);
            lane.register = register;
            wipe(std::slice::from_mut(&mut register));
        }
        lane.tail = &mut [];
    }
}

/// Runs a lane left alone to its end, on the single-stream loop (`serial.rs`).
#[inline(always)]
fn run_alone<B: BlockCipherEncBackend<BlockSize = U16>>(backend: &B, lane: &mut Lane<'_>) {
    let blocks = &mut lane.blocks[lane.next..];
    // The single-stream loop runs in place: on a copy of the rest of the input.
    if let Some(input) = lane.input.take() {
        blocks.copy_from_slice(&input[lane.next..]);
    }
    let mut register = run_blocks(backend, lane.serial, lane.register, blocks);
    lane.next = lane.blocks.len();
    lane.register = register;
    wipe(std::slice::from_mut(&mut register));
    run_tail(backend, lane);
}

/// Runs a group of lanes sharing a key to the end, inside one backend call.
struct Interleave<'l, 'a> {
    lanes: &'l mut [Lane<'a>],
}

impl BlockSizeUser for Interleave<'_, '_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for Interleave<'_, '_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, backend: &B) {
        let mut live = keep_live_first(self.lanes);
        while live > 1 {
            let lanes = &mut self.lanes[..live];
            let steps = lanes.iter().map(Lane::whole_blocks_left).min().unwrap_or(0);
            if steps > 0 {
                run_steps(backend, lanes, steps);
            }
            for lane in lanes.iter_mut() {
                run_tail(backend, lane);
            }
            live = keep_live_first(lanes);
        }
        if live == 1 {
            run_alone(backend, &mut self.lanes[0]);
        }
    }
}
