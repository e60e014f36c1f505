//! The threaded runtime: a [`Service`] whose nodes are worker threads pinned to cores, driven by
//! the scheduler core of [`sched`](crate::sched).
//!
//! - [`builder`](ServiceBuilder): clusters, nodes (core, capacity, slowdown, unit times),
//!   policy, queue sizes, packet size;
//! - keys: registered once, used by [`KeyId`];
//! - jobs: [`Job`] in, [`JobHandle`] out (blocking `wait`, or `.await`);
//! - [`Stream`]: a chained job fed chunk by chunk;
//! - [`Metrics`]: a snapshot of the counters;
//! - the engine (private): per cluster, its core, receive queue and node queues behind its lock;
//! - the workers (private): calibration, the packet loop, slowdown emulation;
//! - the intermediate state store (private): chaining state between packets.

use std::fmt;

mod backlog;
mod builder;
mod engine;
mod error;
#[cfg(feature = "fault-injection")]
mod fault;
mod handle;
mod health;
mod inline;
mod job;
mod keys;
mod lanes;
mod metrics;
mod service;
mod store;
mod stream;
mod supervisor;
mod worker;

pub use builder::{NodeSpec, ServiceBuilder};
pub use error::{BuildError, JobError, KeyError, SubmitError, TrySubmitError};
#[cfg(feature = "fault-injection")]
pub use fault::Fault;
pub use handle::{JobHandle, JobOutput};
pub use job::Job;
pub use metrics::{ClusterMetrics, Metrics, NodeMetrics, NodeState};
pub use service::{Service, SubmitFuture};
pub use stream::{Stream, StreamReceiver, StreamSender, TryPushError};

/// The kinds of cluster a service can have: one per algorithm family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterKind {
    /// AES-128/192/256 in ECB, CBC, OFB, CFB-128 and CTR, and AES-GCM; both directions.
    Aes,
    /// Ed25519 signing and verification.
    Ed25519,
}

impl fmt::Display for ClusterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClusterKind::Aes => "AES",
            ClusterKind::Ed25519 => "Ed25519",
        })
    }
}

/// A handle to a registered key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub(crate) u64);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key {}", self.0)
    }
}
