//! Regression benchmark for AES-128-GCM's cost per packet (docs/ALGORITHM.md §15.4), at 1 KiB,
//! 16 KiB and 1 MiB: the packet path a node runs (`AesKey::gcm_start` + `gcm_seal_final`,
//! RustCrypto's `ctr` and `ghash`), RustCrypto's `aes-gcm` sealing the same buffer in one call
//! (what the packet path must not be slower than), AWS-LC (`AesImpl::AwsLc`, the `aws-lc`
//! feature) and `ring` sealing it in one call, CTR alone on the same buffer (the cipher's share;
//! the rest is the hash), and, at 1 KiB and 16 KiB, 64 single-packet GCM jobs through a service
//! of two AES nodes (what the service adds per packet).
//!
//! `cargo bench --bench gcm`

use std::hint::black_box;

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{AeadInOut, KeyInit};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::crypto::{AesImpl, AesKey, AesOp, ChainState, Direction};
use cryptodispatch::{Job, Mode, NodeSpec, Service};

const JOBS: usize = 64;

fn per_packet(c: &mut Criterion) {
    let key_bytes = [7u8; 16];
    let nonce = [9u8; 12];
    let key = AesKey::new(&key_bytes).expect("key");
    let one_shot = aes_gcm::AesGcm::<aes::Aes128, U12>::new_from_slice(&key_bytes).expect("key");
    let ring_key = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &key_bytes).expect("key"),
    );
    for size in [1024usize, 16 * 1024, 1024 * 1024] {
        let mut group = c.benchmark_group(format!("gcm/seal-{size}B"));
        group.throughput(Throughput::Bytes(size as u64));
        let mut buf = vec![0u8; size];
        group.bench_function("packet path", |b| {
            b.iter(|| {
                let state = key.gcm_start(&nonce, &[]).expect("nonce");
                black_box(key.gcm_seal_final(state, &mut buf).expect("length"))
            });
        });
        group.bench_function("aes-gcm one shot", |b| {
            b.iter(|| {
                black_box(
                    one_shot
                        .encrypt_inout_detached(&nonce.into(), &[], buf.as_mut_slice().into())
                        .expect("length"),
                )
            });
        });
        if AesImpl::AwsLc.is_built() {
            group.bench_function("aws-lc one call", |b| {
                b.iter(|| {
                    black_box(
                        key.gcm_seal_in_place_with(AesImpl::AwsLc, &nonce, &[], &mut buf)
                            .expect("seal"),
                    )
                });
            });
        }
        group.bench_function("ring one call", |b| {
            b.iter(|| {
                let n = ring::aead::Nonce::assume_unique_for_key(nonce);
                black_box(
                    ring_key
                        .seal_in_place_separate_tag(n, ring::aead::Aad::empty(), &mut buf)
                        .expect("seal"),
                )
            });
        });
        let ctr = AesOp::new(Direction::Encrypt, Mode::Ctr);
        group.bench_function("ctr only", |b| {
            b.iter(|| {
                let mut counter = ChainState::default();
                black_box(
                    key.process(ctr, &mut counter, &mut buf, size, true)
                        .expect("length"),
                )
            });
        });
        group.finish();
        if size > 16 * 1024 {
            continue;
        }

        let mut group = c.benchmark_group(format!("gcm/service-{size}B"));
        group.throughput(Throughput::Bytes((JOBS * size) as u64));
        let cores = core_affinity::get_core_ids().map_or(1, |c| c.len().max(1));
        let service = Service::builder()
            .aes_cluster((0..2).map(|i| NodeSpec::pinned(i % cores)))
            .packet_size(size)
            .build()
            .expect("service");
        let id = service.add_aes_key(&key_bytes).expect("key");
        group.bench_function("service, 2 nodes", |b| {
            b.iter_batched(
                || (0..JOBS).map(|_| vec![0u8; size]).collect::<Vec<_>>(),
                |data| {
                    let handles: Vec<_> = data
                        .into_iter()
                        .map(|d| {
                            service
                                .submit(Job::gcm_encrypt(id, &nonce, Vec::new(), d))
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
        group.finish();
    }
}

criterion_group!(benches, per_packet);
criterion_main!(benches);
