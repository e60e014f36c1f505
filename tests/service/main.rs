//! The service through its public API: errors, life cycle, known answers, GCM and CTR, small
//! jobs run inline, a property test against a sequential reference, the layout of the source,
//! and the benchmark binary's live workloads. One test binary for the area, its files one
//! concern each.

#[path = "../common/mod.rs"]
mod common;

mod bench_live;
mod bench_support;
mod errors;
mod gcm;
mod implementations;
mod inline;
mod layers;
mod lifecycle;
mod props;
mod tenants;
mod vectors;
