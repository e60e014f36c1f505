//! The cryptography on its own and through the service, against the standard vectors: NIST
//! CAVP, Wycheproof, the Ed25519 sets, chaining-state splits and lanes. One test binary for
//! the area, its files one concern each.

#[path = "../common/mod.rs"]
mod common;

mod batch;
mod chaining;
mod impls;
mod lanes;
mod vectors;
mod wycheproof;
