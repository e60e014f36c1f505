//! The simulator: the scheduler core driven in virtual time, the paper's cost model, workloads
//! and the lower bound.
//!
//! # The model
//!
//! One cluster of nodes (the paper simulates one). Node i has a unit time t_ic for each command
//! c and a queue capacity in length units; it serves its queue first come first served, a
//! packet of length L and command c taking `t_ic × L / unit_len` (unit length 1 by default, so
//! lengths count unit packets). Packets arrive at the times the trace gives and wait in the job
//! receive queue until the core accepts them. The core is [`Scheduler`](crate::sched::Scheduler)
//! itself — the same router, cluster queue, balancer, choose list and policies as the threaded
//! service — so a simulated run predicts the live one. Nothing here touches real cryptography
//! or reads a clock; a run is fully determined by its trace, nodes and policy (and the seed
//! that made them).
//!
//! - [`engine`]: the event loop ([`simulate`]);
//! - [`trace`]: the CSV trace format ([`Trace`]);
//! - [`workload`]: the generator that follows the paper ([`WorkloadSpec`]);
//! - [`model`]: nodes and node sets ([`NodeModel`], [`NodeSet`]);
//! - [`bound`]: the lower bound on makespan ([`lower_bound`]);
//! - [`space`]: a sampled space of workloads for comparing policies ([`space::sample`]);
//! - [`research`]: the paper's experiments over grids of settings, the policy matrix's kinds of
//!   work, the exact optimum of small instances, and every policy compared on them, which the
//!   benchmark binary (`cryptodispatch-bench paper`, `policies`) prints.

pub mod bound;
pub mod engine;
mod error;
pub mod model;
pub mod research;
pub mod space;
pub mod trace;
pub mod workload;

pub use bound::{LowerBound, lower_bound};
pub use engine::{
    Placement, SimConfig, SimResult, Tenancy, simulate, simulate_tenants, simulate_with,
};
pub use error::TraceError;
pub use model::{NodeModel, NodeSet};
pub use trace::{Trace, TraceRecord};
pub use workload::WorkloadSpec;
