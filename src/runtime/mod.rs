//! The threaded runtime: a [`Service`] whose nodes are worker threads pinned to cores, driven by
//! the scheduler core of [`sched`](crate::sched).
//!
//! What an offload user needs: the [`Service`] and its [`ServiceBuilder`] (clusters, nodes,
//! policy, queue sizes, packet size), keys registered once and used by [`KeyId`], [`Job`]s in
//! and [`JobHandle`]s out (blocking `wait`, or `.await`), [`Stream`]s for chained jobs fed chunk
//! by chunk, the errors, and a [`Metrics`] snapshot.
//!
//! # Layout
//!
//! The files stand in one dependency order: each imports only files above it in this list
//! (`tests/service/layers.rs` checks it), so following a job from [`Service::submit`] to its output
//! never doubles back.
//!
//! 1. Leaves: `context` (is this thread a worker, and of which service), `ids` (key ids,
//!    cluster kinds, task ids), `job` (a job and its output), `error`, `keys` (the registry),
//!    `store` (chaining state between packets), `backlog` (what waits per job and tenant under
//!    fair admission), `tenant` (tenants' weights, limits and counters), `metrics`, `fault`
//!    (injected faults), `health` (what the supervisor judges a node by, and the stall rule),
//!    `slow` (how a node with a slowdown emulates a slower core).
//! 2. `work`: the job record every packet points to, and the data a packet carries.
//! 3. `cut`: cutting a job's data into packets; `layout`: the facts fixed at build time.
//! 4. `exec`: running a packet, a chain run or a lane set, on whatever thread calls (no
//!    threads of its own).
//! 5. `handle`: the handle an application waits on; `hand`: what a node's worker has taken
//!    and is running, and its light packets (taken a set at a time, as `exec` takes one).
//! 6. `engine`: per cluster, the scheduler core and its queues behind one lock; admission,
//!    a worker's turn, taking a failed node out.
//! 7. `worker`: a node's thread loop (calibration, slowdown); `supervisor`: the thread that
//!    watches the nodes and restarts a failed worker.
//! 8. `inline`: small jobs run on the submitting thread; `stream`: chained jobs fed chunk by
//!    chunk.
//! 9. `service`: the public [`Service`]; `builder`: [`ServiceBuilder`], which starts one.

mod context;
mod ids;
mod job;

mod backlog;
mod error;
#[cfg(feature = "fault-injection")]
mod fault;
mod health;
mod keys;
mod metrics;
mod slow;
mod store;
mod tenant;

mod work;

mod cut;
mod layout;

mod exec;

mod hand;
mod handle;

mod engine;

mod supervisor;
mod worker;

mod inline;
mod stream;

mod service;

mod builder;

pub use builder::{NodeSpec, ServiceBuilder};
pub use error::{BuildError, JobError, KeyError, SubmitError, TenantError, TrySubmitError};
#[cfg(feature = "fault-injection")]
pub use fault::Fault;
pub use handle::JobHandle;
pub use ids::{ClusterKind, KeyId};
pub use job::{Job, JobOutput};
pub use metrics::{ClusterMetrics, Metrics, NodeMetrics, NodeState};
pub use service::{Service, SubmitFuture};
pub use slow::{SlowCore, WorkClock, emulate_slowdown};
pub use stream::{Stream, StreamReceiver, StreamSender, TryPushError};
pub use tenant::{MAX_TENANT_NAME, TenantLimits, TenantMetrics, TenantSpec};
