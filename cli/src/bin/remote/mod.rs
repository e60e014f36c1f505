//! The gRPC side that the daemon, the CLI's `--remote` mode, the benchmark's `scaleout` and the
//! daemon tests share: the code generated from `proto/cryptodispatch.proto` (by `build.rs`), and
//! a client with bearer tokens, TLS and retries, and the codec both use (bounded decoding).
//!
//! Each includer uses part of it (`#[path]`), hence `dead_code` is allowed at the include site.

// tonic's `Status` is the error of every call; it is returned as it is, not boxed.
#![allow(clippy::result_large_err)]

pub mod client;
pub mod codec;
pub mod haproxy;

/// The generated messages, client and server of `cryptodispatch.v1`.
#[allow(clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("cryptodispatch.v1");
}
