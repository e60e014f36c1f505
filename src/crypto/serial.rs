//! One stream of a serial AES operation (CBC and CFB encryption, OFB): the loop
//! [`AesKey::process`](crate::crypto::AesKey::process) runs a packet alone with, and a lane left
//! alone in a lane set finishes with (`lanes.rs`).
//!
//! Each block's cipher input is the previous block's cipher output, so one stream runs at the
//! latency of the AES unit, and anything more on that chain slows it. The loop runs inside one
//! `encrypt_with_backend` call, each block's cipher input a fresh local and the chaining
//! register passed on by value, so the compiler keeps the chain in a vector register.
//! RustCrypto's `cbc`, `ofb` and `cfb-mode` call the backend once per block through memory,
//! which puts a store and a load on the chain of every block: this loop ran one CBC stream 15 to
//! 50% faster on the development machine, within 1 to 4% of `openssl speed -evp aes-128-cbc`'s
//! one-core speed (docs/RESULTS.md §5). It uses the backend's own block function: no
//! hand-written rounds. What is left of the gap is that function's first round-key XOR, which
//! follows the chaining XOR on the chain (OpenSSL XORs the round key into the plaintext off it).

use cipher::{
    Array, BlockCipherEncBackend, BlockCipherEncClosure, BlockCipherEncrypt, BlockSizeUser,
    consts::U16,
};
use zeroize::Zeroize;

type Block = Array<u8, U16>;

/// Which serial operation a stream runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Serial {
    /// C_i = E(C_{i-1} ^ P_i).
    CbcEncrypt,
    /// O_i = E(O_{i-1}); C_i = P_i ^ O_i (either direction).
    Ofb,
    /// C_i = P_i ^ E(C_{i-1}).
    CfbEncrypt,
}

/// `a ^= b`, on local copies: the compiler cannot prove that a stream's data and the block
/// holding its register do not overlap, and XORs them byte by byte in memory when asked to
/// work in place; on locals it makes one vector XOR and one 16-byte store, which the cipher's
/// 16-byte load then reads without a store-forwarding stall.
#[inline(always)]
pub(super) fn xor_into(a: &mut Block, b: &Block) {
    let (mut x, y) = (*a, *b);
    for (x, y) in x.iter_mut().zip(y.iter()) {
        *x ^= y;
    }
    *a = x;
}

/// Runs `blocks` (whole blocks) of one stream from chaining register `register`, in place, and
/// returns the register for the next block: one loop per operation.
#[inline(always)]
pub(super) fn run_blocks<B: BlockCipherEncBackend<BlockSize = U16>>(
    backend: &B,
    serial: Serial,
    register: Block,
    blocks: &mut [Block],
) -> Block {
    match serial {
        Serial::CbcEncrypt => chain(blocks, register, |register, block| {
            let mut x = register;
            xor_into(&mut x, block);
            backend.encrypt_block_inplace(&mut x);
            *block = x;
            x
        }),
        Serial::Ofb => chain(blocks, register, |register, block| {
            let mut x = register;
            backend.encrypt_block_inplace(&mut x);
            xor_into(block, &x);
            x
        }),
        Serial::CfbEncrypt => chain(blocks, register, |register, block| {
            let mut x = register;
            backend.encrypt_block_inplace(&mut x);
            xor_into(&mut x, block);
            *block = x;
            x
        }),
    }
}

/// How far ahead of the block it runs [`chain`] reads the stream: 256 blocks, one 4 KiB page.
const AHEAD: usize = 256;

/// Runs `step` over `blocks` in order, each step given the register the one before returned.
///
/// Every fourth block (once per 64-byte cache line) it also reads a byte [`AHEAD`] blocks on,
/// a load off the chain that nothing waits for. A stream much larger than the cache otherwise
/// stalls its chain whenever a block is not in cache yet, likely at each page, where a hardware
/// prefetcher stops: one CBC stream of 64 MiB in 16 KiB packets went from 0.798–0.820 of
/// `openssl speed` (one buffer in cache) to 0.895–0.907 with the read a page ahead, on a
/// machine with AVX-512 (docs/RESULTS.md, "Reading a page ahead").
#[inline(always)]
fn chain(
    blocks: &mut [Block],
    mut register: Block,
    mut step: impl FnMut(Block, &mut Block) -> Block,
) -> Block {
    for i in 0..blocks.len() {
        if i % 4 == 0 {
            if let Some(ahead) = blocks.get(i + AHEAD) {
                std::hint::black_box(ahead[0]);
            }
        }
        register = step(register, &mut blocks[i]);
    }
    register
}

/// The partial final block of an OFB or CFB stream (a job's last packet): XORed with the
/// encryption of the register, in either mode.
#[inline(always)]
pub(super) fn run_partial<B: BlockCipherEncBackend<BlockSize = U16>>(
    backend: &B,
    register: &Block,
    tail: &mut [u8],
) {
    let mut keystream = *register;
    backend.encrypt_block_inplace(&mut keystream);
    for (byte, key) in tail.iter_mut().zip(keystream.iter()) {
        *byte ^= key;
    }
    keystream.as_mut_slice().zeroize();
}

/// Runs one packet of a serial operation alone, in place: `data` is its checked and padded
/// input (whole blocks, and a partial final block in OFB and CFB). `state` is the chaining
/// register it starts from; it is left as the next packet's, unless the packet ends mid-block
/// (a job's last, which nothing follows), as RustCrypto's modes leave it.
pub(super) fn run_stream<C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>>(
    cipher: &C,
    serial: Serial,
    state: &mut [u8; 16],
    data: &mut [u8],
) {
    let (blocks, tail) = Block::slice_as_chunks_mut(data);
    cipher.encrypt_with_backend(Stream {
        serial,
        state,
        blocks,
        tail,
    });
}

/// The closure [`run_stream`] hands the backend.
struct Stream<'a> {
    serial: Serial,
    state: &'a mut [u8; 16],
    blocks: &'a mut [Block],
    tail: &'a mut [u8],
}

impl BlockSizeUser for Stream<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for Stream<'_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, backend: &B) {
        let mut register = run_blocks(backend, self.serial, Block::from(*self.state), self.blocks);
        if self.tail.is_empty() {
            *self.state = register.into();
        } else {
            run_partial(backend, &register, self.tail);
        }
        register.as_mut_slice().zeroize();
    }
}
