//! Regression benchmark for the lanes: 32 independent 16 KiB streams of a serial AES operation
//! (CBC, OFB, CFB-128 encryption), run through `run_lanes` in sets of L = 1, 4, 8, 16 and 32
//! packets, against `AesKey::process` one stream at a time. Keys: one for every stream, four
//! shared round-robin, or one per stream; key sizes 128, 192 and 256 bits in turn when there are
//! several.
//!
//! The `single-stream` group compares one CBC stream through RustCrypto's `cbc` crate
//! (`encrypt_blocks`, which calls the backend once per block) with `AesKey::process`
//! (one backend call for the whole buffer, `crypto/serial.rs`).
//!
//! `cargo bench --bench lanes -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::crypto::{AesKey, AesOp, ChainState, Direction, LaneItem, run_lanes};
use cryptodispatch::packet::Mode;

const STREAMS: usize = 32;
const PACKET: usize = 16 * 1024;
const LANES: [usize; 5] = [1, 4, 8, 16, 32];

/// The streams of one benchmark: their keys, chaining states and buffers.
struct Streams {
    keys: Vec<AesKey>,
    key_of: Vec<usize>,
    states: Vec<ChainState>,
    bufs: Vec<Vec<u8>>,
}

impl Streams {
    fn new(distinct_keys: usize) -> Self {
        let keys = (0..distinct_keys)
            .map(|i| AesKey::new(&vec![i as u8 + 1; [16, 24, 32][i % 3]]).expect("key length"))
            .collect();
        Streams {
            keys,
            key_of: (0..STREAMS).map(|i| i % distinct_keys).collect(),
            states: (0..STREAMS)
                .map(|i| ChainState::from_iv(&[i as u8; 16]).expect("16-byte IV"))
                .collect(),
            bufs: (0..STREAMS).map(|i| vec![i as u8; PACKET]).collect(),
        }
    }

    /// One packet of every stream, one stream at a time.
    fn one_at_a_time(&mut self, op: AesOp) {
        for ((state, buf), &k) in self.states.iter_mut().zip(&mut self.bufs).zip(&self.key_of) {
            let n = self.keys[k]
                .process(op, state, buf, PACKET, false)
                .expect("whole blocks");
            black_box(n);
        }
    }

    /// One packet of every stream, in lane sets of `lanes` packets.
    fn in_lanes(&mut self, op: AesOp, lanes: usize) {
        let sets = self
            .states
            .chunks_mut(lanes)
            .zip(self.bufs.chunks_mut(lanes))
            .zip(self.key_of.chunks(lanes));
        for ((states, bufs), key_of) in sets {
            let mut items: Vec<LaneItem<'_>> = states
                .iter_mut()
                .zip(bufs)
                .zip(key_of)
                .map(|((state, buf), &k)| LaneItem {
                    key: &self.keys[k],
                    op,
                    state,
                    buf,
                    len: PACKET,
                    last: false,
                })
                .collect();
            run_lanes(&mut items).expect("serial, whole blocks");
        }
        black_box(&self.bufs);
    }
}

fn lanes(c: &mut Criterion) {
    let ops = [
        ("cbc", AesOp::new(Direction::Encrypt, Mode::Cbc)),
        ("ofb", AesOp::new(Direction::Encrypt, Mode::Ofb)),
        ("cfb", AesOp::new(Direction::Encrypt, Mode::Cfb)),
    ];
    for (name, op) in ops {
        for (keys_name, distinct_keys) in [("1-key", 1), ("4-keys", 4), ("32-keys", 32)] {
            let mut group = c.benchmark_group(format!("lanes/{name}/{keys_name}"));
            group.throughput(Throughput::Bytes((STREAMS * PACKET) as u64));
            let mut streams = Streams::new(distinct_keys);
            group.bench_function("process, one stream at a time", |b| {
                b.iter(|| streams.one_at_a_time(op));
            });
            for l in LANES {
                group.bench_function(BenchmarkId::new("lanes", l), |b| {
                    b.iter(|| streams.in_lanes(op, l));
                });
            }
            group.finish();
        }
    }
}

fn single_stream(c: &mut Criterion) {
    use cipher::{BlockModeEncrypt, KeyIvInit};
    let raw = [7u8; 16];
    let iv = [9u8; 16];
    let key = AesKey::new(&raw).expect("key length");
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let mut buf = vec![1u8; PACKET];
    let mut group = c.benchmark_group("single-stream/cbc-encrypt-16KiB");
    group.throughput(Throughput::Bytes(PACKET as u64));
    group.bench_function("cbc crate", |b| {
        b.iter(|| {
            let mut enc = cbc::Encryptor::<aes::Aes128>::new(&raw.into(), &iv.into());
            let (blocks, _) = cipher::Block::<aes::Aes128>::slice_as_chunks_mut(&mut buf);
            enc.encrypt_blocks(blocks);
            black_box(&buf);
        });
    });
    group.bench_function("AesKey::process", |b| {
        b.iter(|| {
            let mut state = ChainState::from_iv(&iv).expect("16-byte IV");
            let n = key.process(op, &mut state, &mut buf, PACKET, false);
            black_box(n.expect("whole blocks"));
        });
    });
    group.finish();
}

criterion_group!(benches, lanes, single_stream);
criterion_main!(benches);
