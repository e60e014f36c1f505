//! The daemon over gRPC, started for real on loopback: every RPC against the library, errors,
//! TLS, streams, metrics and the agent check, the drain (`rpc`); the CLI's `--remote` mode
//! (`cli`); daemons behind HAProxy, when it is installed (`haproxy`); hostile clients
//! (`hostile`); tenants from the tokens file, their limits and metrics (`tenants`). One test
//! binary for the area, its files one concern each.

#[path = "../daemon_support/mod.rs"]
mod daemon_support;

mod cli;
mod haproxy;
mod hostile;
mod rpc;
mod tenants;
