//! Regression benchmark for burst submission: 64-byte AES-128-ECB jobs end to end from two
//! submitting threads on a service of two AES nodes, submitted `submit_burst` in bursts of 64
//! (then each handle waited for), against one `submit` + `wait` per job. Each iteration is 64
//! jobs per thread; the throughput is in jobs, so criterion's time per element is the cost per
//! job. Jobs this small run on the submitting thread by default (docs/ALGORITHM.md §15.6);
//! the `node` group measures the same with the inline limit at 0, every job handed to a node
//! and back. `live --workload tiny` measures the same in the benchmark binary.
//!
//! `cargo bench --bench burst -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::{Job, KeyId, Mode, NodeSpec, Service, ServiceBuilder};

const BURST: usize = 64;
const THREADS: usize = 2;

fn job(key: KeyId) -> Job {
    Job::encrypt(key, Mode::Ecb, &[], vec![7u8; 64])
}

/// Runs `iters` iterations of `BURST` jobs on each of `THREADS` threads and returns the time.
fn timed(iters: u64, each: impl Fn() + Sync) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..iters {
                    each();
                }
            });
        }
    });
    start.elapsed()
}

fn burst(c: &mut Criterion) {
    let cores = core_affinity::get_core_ids().map_or(1, |c| c.len().max(1));
    for (path, limit) in [
        ("inline", ServiceBuilder::DEFAULT_INLINE_LIMIT),
        ("node", 0),
    ] {
        let service = Service::builder()
            .aes_cluster((0..2).map(|i| NodeSpec::pinned(i % cores)))
            .inline_limit(limit)
            .build()
            .expect("service");
        let key = service.add_aes_key(&[0x42; 16]).expect("key");
        let mut group = c.benchmark_group(format!("burst/ecb-64B/{path}"));
        group.throughput(Throughput::Elements((BURST * THREADS) as u64));
        group.bench_function("submit_burst", |b| {
            b.iter_custom(|iters| {
                timed(iters, || {
                    let handles = service
                        .submit_burst((0..BURST).map(|_| job(key)))
                        .expect("burst");
                    for h in handles {
                        black_box(h.wait().expect("job"));
                    }
                })
            });
        });
        group.bench_function("submit+wait", |b| {
            b.iter_custom(|iters| {
                timed(iters, || {
                    for _ in 0..BURST {
                        let h = service.submit(job(key)).expect("submit");
                        black_box(h.wait().expect("job"));
                    }
                })
            });
        });
        group.finish();
    }
}

criterion_group!(benches, burst);
criterion_main!(benches);
