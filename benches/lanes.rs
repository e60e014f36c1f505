//! Regression benchmark for the lanes: 64 independent 16 KiB streams of a serial AES operation
//! (CBC, OFB, CFB-128 encryption), run through `run_lanes_width` in lane sets of width 1, 8,
//! 16, 32 and 64, against `AesKey::process` one stream at a time (RustCrypto's single-stream
//! loop) and, with the `aws-lc` feature, AWS-LC one stream at a time. Keys: one for every
//! stream, four shared round-robin, or one per stream; key sizes 128, 192 and 256 bits in turn
//! when there are several.
//!
//! Which width is best depends on the AES backend `aes` picks at run time: AES-NI encrypts 8
//! blocks per call, VAES with AVX2 30 and VAES with AVX-512 64, so a lane set narrower than the
//! backend leaves it part empty. The `backend` line printed first says which this CPU has.
//!
//! The `single-stream` group compares one CBC stream through RustCrypto's `cbc` crate
//! (`encrypt_blocks`, which calls the backend once per block) with `AesKey::process`
//! (one backend call for the whole buffer, `crypto/serial.rs`).
//!
//! `cargo bench --bench lanes -- --warm-up-time 1 --measurement-time 3`
//! (`-- lanes/cbc/1-key` for one mode with one key)

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::crypto::{
    AesImpl, AesKey, AesOp, ChainState, Direction, LANE_WIDTHS, LaneItem, run_lanes_width,
};
use cryptodispatch::packet::Mode;

const STREAMS: usize = 64;
const PACKET: usize = 16 * 1024;

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

    /// One packet of every stream, one stream at a time, on `imp`.
    fn one_at_a_time(&mut self, imp: AesImpl, op: AesOp) {
        for ((state, buf), &k) in self.states.iter_mut().zip(&mut self.bufs).zip(&self.key_of) {
            let n = self.keys[k]
                .process_with(imp, op, state, buf, PACKET, false)
                .expect("whole blocks");
            black_box(n);
        }
    }

    /// One packet of every stream, in lane sets of `width` packets.
    fn in_lanes(&mut self, op: AesOp, width: usize) {
        let mut items: Vec<LaneItem<'_>> = self
            .states
            .iter_mut()
            .zip(&mut self.bufs)
            .zip(&self.key_of)
            .map(|((state, buf), &k)| LaneItem {
                key: &self.keys[k],
                op,
                state,
                buf,
                len: PACKET,
                last: false,
                input: None,
            })
            .collect();
        run_lanes_width(&mut items, width).expect("serial, whole blocks");
        drop(items);
        black_box(&self.bufs);
    }
}

/// Which AES backend `aes` picks on this CPU, as its run-time detection sees the features.
#[cfg(not(target_arch = "x86_64"))]
fn print_backend() {}

/// Which AES backend `aes` picks on this CPU, as its run-time detection sees the features.
#[cfg(target_arch = "x86_64")]
fn print_backend() {
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
    // `aes` asks `cpufeatures` (0.3.1), which counts VAES only where the OS saves the AVX-512
    // registers, unless the build enables VAES: a CPU with VAES and AVX2 alone (AMD Zen 3)
    // runs the AES-NI backend in a default build.
    let vaes =
        std::arch::is_x86_feature_detected!("vaes") && (avx512 || cfg!(target_feature = "vaes"));
    let aes = std::arch::is_x86_feature_detected!("aes");
    let backend = match (aes, vaes, avx512) {
        (_, true, true) => "VAES with AVX-512 (64 blocks per call)",
        (_, true, false) => "VAES with AVX2 (30 blocks per call)",
        (true, false, _) => "AES-NI (8 blocks per call)",
        _ => "software (fixsliced)",
    };
    eprintln!("backend: {backend}");
}

fn lanes(c: &mut Criterion) {
    print_backend();
    let ops = [
        ("cbc", AesOp::new(Direction::Encrypt, Mode::Cbc)),
        ("ofb", AesOp::new(Direction::Encrypt, Mode::Ofb)),
        ("cfb", AesOp::new(Direction::Encrypt, Mode::Cfb)),
    ];
    for (name, op) in ops {
        for (keys_name, distinct_keys) in [("1-key", 1), ("4-keys", 4), ("64-keys", 64)] {
            let mut group = c.benchmark_group(format!("lanes/{name}/{keys_name}"));
            group.throughput(Throughput::Bytes((STREAMS * PACKET) as u64));
            let mut streams = Streams::new(distinct_keys);
            group.bench_function("process, one stream at a time", |b| {
                b.iter(|| streams.one_at_a_time(AesImpl::RustCrypto, op));
            });
            if AesImpl::AwsLc.is_built() {
                group.bench_function("aws-lc, one stream at a time", |b| {
                    b.iter(|| streams.one_at_a_time(AesImpl::AwsLc, op));
                });
            }
            for width in std::iter::once(1).chain(LANE_WIDTHS) {
                group.bench_function(BenchmarkId::new("width", width), |b| {
                    b.iter(|| streams.in_lanes(op, width));
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
