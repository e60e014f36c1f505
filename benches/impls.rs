//! The implementations of AES compared per command on one core, at 16 KiB and 1 MiB packets:
//! every candidate of `AesImpl::candidates` (RustCrypto, the lanes at widths 8 to 64 for the
//! serial operations, ring for GCM with the `ring` feature, AWS-LC and OpenSSL with theirs)
//! runs one packet of the command (for the lanes a full set of `width` packets sharing the key;
//! the throughput is per byte either way), as a node would run it. GCM is a whole one-packet
//! job, sealed or opened, the latter from a fresh copy of valid ciphertext for every
//! implementation alike. `ring-direct` seals the same GCM messages with ring called directly,
//! without the library's adapter, for comparison.
//!
//! It also prints, before criterion's figures, what `crypto::measure` picks for each command:
//! the same comparison as the nodes would make it, in a fraction of a second.
//!
//! `cargo bench --bench impls -- --warm-up-time 1 --measurement-time 2`
//! (`-- impls/gcm-seal` for one command)

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::crypto::{
    AesImpl, AesKey, AesOp, ChainState, Direction, LaneItem, measure, run_packets_with,
};
use cryptodispatch::packet::Mode;

const SIZES: [(usize, &str); 2] = [(16 * 1024, "16KiB"), (1024 * 1024, "1MiB")];
const NONCE: [u8; 12] = [9; 12];

fn commands() -> [(&'static str, AesOp); 9] {
    [
        ("gcm-seal", AesOp::new(Direction::Encrypt, Mode::Gcm)),
        ("gcm-open", AesOp::new(Direction::Decrypt, Mode::Gcm)),
        ("ctr", AesOp::new(Direction::Encrypt, Mode::Ctr)),
        ("ecb-enc", AesOp::new(Direction::Encrypt, Mode::Ecb)),
        ("cbc-dec", AesOp::new(Direction::Decrypt, Mode::Cbc)),
        ("cfb-dec", AesOp::new(Direction::Decrypt, Mode::Cfb)),
        ("cbc-enc", AesOp::new(Direction::Encrypt, Mode::Cbc)),
        ("ofb", AesOp::new(Direction::Encrypt, Mode::Ofb)),
        ("cfb-enc", AesOp::new(Direction::Encrypt, Mode::Cfb)),
    ]
}

fn run(key: &AesKey, imp: AesImpl, op: AesOp, bufs: &mut [Vec<u8>], sealed: &(Vec<u8>, [u8; 16])) {
    if op.mode == Mode::Gcm {
        let buf = &mut bufs[0];
        match op.direction {
            Direction::Encrypt => {
                black_box(
                    key.gcm_seal_in_place_with(imp, &NONCE, &[], buf)
                        .expect("seal"),
                );
            }
            Direction::Decrypt => {
                buf.copy_from_slice(&sealed.0);
                key.gcm_open_in_place_with(imp, &NONCE, &[], buf, &sealed.1)
                    .expect("open");
            }
        }
        return;
    }
    let mut states = vec![ChainState::from_iv(&[3; 16]).expect("IV"); bufs.len()];
    let mut items: Vec<LaneItem<'_>> = states
        .iter_mut()
        .zip(bufs.iter_mut())
        .map(|(state, buf)| LaneItem {
            key,
            op,
            state,
            len: buf.len(),
            buf,
            last: false,
            input: None,
        })
        .collect();
    run_packets_with(imp, &mut items).expect("whole blocks");
}

fn impls(c: &mut Criterion) {
    let key_bytes = [7u8; 16];
    let key = AesKey::new(&key_bytes).expect("key");
    eprintln!("crypto::measure, AES-128, fastest first (GB/s):");
    for (name, op) in commands() {
        for (size, size_name) in SIZES {
            let measured = measure(&key, op, size).expect("measure");
            let line: Vec<String> = measured
                .iter()
                .map(|m| format!("{} {:.2}", m.implementation, m.bytes_per_sec() / 1e9))
                .collect();
            eprintln!("  {name} {size_name}: {}", line.join(", "));
        }
    }

    for (name, op) in commands() {
        for (size, size_name) in SIZES {
            let mut group = c.benchmark_group(format!("impls/{name}/{size_name}"));
            let sealed = key
                .gcm_seal_with(AesImpl::RustCrypto, &NONCE, &[], &vec![1u8; size])
                .expect("seal");
            for imp in AesImpl::candidates(op) {
                let packets = match imp {
                    AesImpl::Lanes { width } => width,
                    _ => 1,
                };
                // Full lane sets of 1 MiB packets would need up to 64 MiB: 16 KiB only.
                if packets > 1 && size > 16 * 1024 {
                    continue;
                }
                let mut bufs = vec![vec![1u8; size]; packets];
                group.throughput(Throughput::Bytes((packets * size) as u64));
                group.bench_function(BenchmarkId::from_parameter(imp), |b| {
                    b.iter(|| run(&key, imp, op, &mut bufs, &sealed));
                });
            }
            if name == "gcm-seal" {
                let ring_key = ring::aead::LessSafeKey::new(
                    ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &key_bytes).expect("key"),
                );
                let mut buf = vec![1u8; size];
                group.throughput(Throughput::Bytes(size as u64));
                group.bench_function(BenchmarkId::from_parameter("ring-direct"), |b| {
                    b.iter(|| {
                        let nonce = ring::aead::Nonce::assume_unique_for_key(NONCE);
                        black_box(
                            ring_key
                                .seal_in_place_separate_tag(
                                    nonce,
                                    ring::aead::Aad::empty(),
                                    &mut buf,
                                )
                                .expect("seal"),
                        )
                    });
                });
            }
            group.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(20);
    targets = impls
}
criterion_main!(benches);
