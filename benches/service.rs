//! Regression benchmark for the service's end-to-end cost per packet: 256 single-packet AES-128
//! ECB jobs of 64 B, 1 KiB and 16 KiB submitted and awaited through a service of two AES nodes,
//! beside the same encryptions called directly on one thread. ECB keeps the cryptography small,
//! so the difference is what the service adds per packet (submission, scheduling, hand-off,
//! completion).
//!
//! `service/retry-copy`: 256 CTR jobs, and 256 GCM sealing jobs, of 16 KiB on two nodes, with
//! `max_attempts` 2 (the default: each packet's input is kept to run again on the other node
//! should its node fail: a CTR packet runs out of place from its input, the output copied
//! back once delivered; a GCM job of one packet is copied before it runs), the same with
//! `out_of_place(false)` (every packet copied first, `in-place`), and 1 (nothing kept): what
//! keeping the input costs.
//!
//! `cargo bench --bench service`

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::crypto::{AesKey, AesOp, ChainState, Direction};
use cryptodispatch::{Job, Mode, NodeSpec, Service};

const JOBS: usize = 256;

fn per_packet(c: &mut Criterion) {
    let cores = core_affinity::get_core_ids().map_or(1, |c| c.len().max(1));
    for size in [64usize, 1024, 16 * 1024] {
        let mut group = c.benchmark_group(format!("service/ecb-{size}B"));
        group.throughput(Throughput::Elements(JOBS as u64));
        let service = Service::builder()
            .aes_cluster((0..2).map(|i| NodeSpec::pinned(i % cores)))
            .packet_size(size)
            .build()
            .expect("service");
        let key = service.add_aes_key(&[7; 16]).expect("key");
        group.bench_function("service", |b| {
            b.iter_batched(
                || (0..JOBS).map(|_| vec![0u8; size]).collect::<Vec<_>>(),
                |data| {
                    let handles: Vec<_> = data
                        .into_iter()
                        .map(|d| {
                            service
                                .submit(Job::encrypt(key, Mode::Ecb, &[], d))
                                .expect("submit")
                        })
                        .collect();
                    for h in handles.into_iter().rev() {
                        black_box(h.wait().expect("job"));
                    }
                },
                BatchSize::LargeInput,
            );
        });
        let direct = AesKey::new(&[7; 16]).expect("key");
        let op = AesOp::new(Direction::Encrypt, Mode::Ecb);
        group.bench_function("direct", |b| {
            b.iter_batched(
                || (0..JOBS).map(|_| vec![0u8; size]).collect::<Vec<_>>(),
                |mut data| {
                    for d in &mut data {
                        let mut state = ChainState::default();
                        black_box(
                            direct
                                .process(op, &mut state, d, size, true)
                                .expect("aligned"),
                        );
                    }
                    data
                },
                BatchSize::LargeInput,
            );
        });
        group.finish();
    }
}

fn retry_copy(c: &mut Criterion) {
    const SIZE: usize = 16 * 1024;
    let cores = core_affinity::get_core_ids().map_or(1, |c| c.len().max(1));
    let mut group = c.benchmark_group("service/retry-copy");
    group.throughput(Throughput::Bytes((JOBS * SIZE) as u64));
    for (attempts, out_of_place) in [(2u32, true), (2, false), (1, true)] {
        // Two nodes: a node alone in its cluster copies nothing, as no other node could rerun.
        let service = Service::builder()
            .aes_cluster((0..2).map(|i| NodeSpec::pinned(i % cores)))
            .max_attempts(attempts)
            .out_of_place(out_of_place)
            .build()
            .expect("service");
        let key = service.add_aes_key(&[7; 16]).expect("key");
        for mode in [Mode::Ctr, Mode::Gcm] {
            let way = if out_of_place { "" } else { "/in-place" };
            let name = format!("{mode}/max_attempts={attempts}{way}");
            group.bench_function(name, |b| {
                b.iter_batched(
                    || (0..JOBS).map(|_| vec![0u8; SIZE]).collect::<Vec<_>>(),
                    |data| {
                        let handles: Vec<_> = data
                            .into_iter()
                            .map(|d| {
                                let job = match mode {
                                    Mode::Gcm => Job::gcm_encrypt(key, &[1; 12], Vec::new(), d),
                                    _ => Job::encrypt(key, mode, &[1; 16], d),
                                };
                                service.submit(job).expect("submit")
                            })
                            .collect();
                        for h in handles.into_iter().rev() {
                            black_box(h.wait().expect("job"));
                        }
                    },
                    BatchSize::LargeInput,
                );
            });
        }
    }
    group.finish();
}

criterion_group!(benches, per_packet, retry_copy);
criterion_main!(benches);
