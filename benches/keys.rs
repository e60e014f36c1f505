//! Regression benchmark for the key-schedule cache: a 1 KiB CBC packet with the expanded key
//! schedule borrowed from the registered key (what the nodes do), against expanding the key for
//! every packet.
//!
//! `cargo bench --bench keys`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::crypto::{AesKey, AesOp, ChainState, Direction};
use cryptodispatch::packet::Mode;

fn schedule_cache(c: &mut Criterion) {
    let mut group = c.benchmark_group("keys/cbc-1KiB-packet");
    group.throughput(Throughput::Bytes(1024));
    let raw = [0x2bu8; 32];
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let mut buf = vec![0u8; 1024];
    let cached = AesKey::new(&raw).expect("32-byte key");
    group.bench_function("cached schedule", |b| {
        b.iter(|| {
            let mut state = ChainState::default();
            black_box(
                cached
                    .process(op, &mut state, &mut buf, 1024, false)
                    .expect("aligned"),
            );
        });
    });
    group.bench_function("schedule per packet", |b| {
        b.iter(|| {
            let key = AesKey::new(black_box(&raw)).expect("32-byte key");
            let mut state = ChainState::default();
            black_box(
                key.process(op, &mut state, &mut buf, 1024, false)
                    .expect("aligned"),
            );
        });
    });
    group.finish();
}

criterion_group!(benches, schedule_cache);
criterion_main!(benches);
