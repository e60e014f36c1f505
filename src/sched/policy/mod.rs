//! Node-selection policies: one trait, one file per policy, chosen by name from one registry
//! (docs/ALGORITHM.md §11).
//!
//! A policy sees a read-only [`ClusterView`] (the node status table) and the packet to place,
//! and names a node or declines. It does no I/O and reads no clock; a randomised policy takes a
//! seed. The balancer around it enforces the paper's two strategies, so a policy only ranks:
//! - strategy 1 (capacity first): a policy should pick among [`ClusterView::candidates`]; a
//!   choice without room is treated as "wait" (or, for a pinning policy, as the job's node);
//! - strategy 2 (dependency affinity) is applied before the policy is asked: a dependent job
//!   bound to a node is not offered to the policy again while bound.
//!
//! # The registry
//!
//! Every built-in policy has an [`Entry`]: its name (and aliases), a one-line description, its
//! parameters with their defaults, and its constructor. Each policy file declares its entry
//! beside the policy, as the associated constant `ENTRY`, and its [`Policy::name`] returns the
//! entry's name. [`registry`] lists the entries; [`PolicySpec`] is an entry with parameter
//! values, and parses, prints and builds through it. Adding a policy takes its file (with its
//! `ENTRY`), its `mod` line below and one line in the table; its type needs re-exporting only
//! if callers use its own methods.

use std::fmt;

use crate::packet::PacketMeta;
use crate::sched::status::ClusterView;

mod best;
mod entry;
mod spec;

mod ddwrr;
mod entropy;
mod hhs_acdid;
mod least_conn;
mod load_formula;
mod mct;
mod mct_wait;
mod p2c;
mod paper;
mod paper_adaptive;
mod rr;
mod sed;
mod swrr;
mod zorder;

pub use ddwrr::Ddwrr;
pub use entropy::Entropy;
pub use entry::{Entry, Param, Value};
pub use hhs_acdid::HhsAcdid;
pub use least_conn::{LeastConnections, WeightedLeastConnections};
pub use load_formula::LoadFormula;
pub use mct::MinCompletionTime;
pub use mct_wait::MctWait;
pub use p2c::PowerOfTwo;
pub use paper::Paper;
pub use paper_adaptive::PaperAdaptive;
pub use rr::RoundRobin;
pub use sed::ShortestExpectedDelay;
pub use spec::PolicySpec;
pub use swrr::SmoothWeighted;
pub use zorder::ZOrder;

/// The built-in policies, in the order [`PolicySpec::all`] and `--help` texts list them.
static REGISTRY: &[Entry] = &[
    Paper::ENTRY,
    HhsAcdid::ENTRY,
    RoundRobin::ENTRY,
    SmoothWeighted::ENTRY,
    LeastConnections::ENTRY,
    WeightedLeastConnections::ENTRY,
    Ddwrr::ENTRY,
    Entropy::ENTRY,
    ZOrder::ENTRY,
    LoadFormula::ENTRY,
    ShortestExpectedDelay::ENTRY,
    PowerOfTwo::ENTRY,
    PaperAdaptive::ENTRY,
    MinCompletionTime::ENTRY,
    MctWait::ENTRY,
];

/// The service's default policy: `mct-wait` ([`MctWait`], docs/ALGORITHM.md §11.15). The one
/// place the default is named: [`PolicySpec::default`] builds it, and the name `default`
/// parses to it.
pub const DEFAULT: &Entry = &MctWait::ENTRY;

/// Every built-in policy: name, aliases, description, parameters with their defaults
/// (docs/ALGORITHM.md §11). [`PolicySpec`] parses exactly these names and aliases.
///
/// ```
/// for entry in cryptodispatch::sched::policy::registry() {
///     println!("{entry}"); // e.g. "rr: round robin over the nodes with room"
/// }
/// ```
pub fn registry() -> &'static [Entry] {
    REGISTRY
}

/// The entry called `name` (in lower case), by its name or an alias; `default` is
/// [`DEFAULT`].
fn lookup(name: &str) -> Option<&'static Entry> {
    if name == "default" {
        return Some(DEFAULT);
    }
    REGISTRY.iter().find(|e| e.is_called(name))
}

/// Picks the node for a packet within one cluster. Each cluster has its own instance.
pub trait Policy: Send + fmt::Debug {
    /// The policy's name: for a built-in policy, its registry entry's ([`Entry::name`]), as
    /// [`PolicySpec`] parses it.
    fn name(&self) -> &'static str;

    /// The node (an index into `view`) for `packet`, or `None` to make it wait.
    ///
    /// For a policy that does not pin jobs, the choice should have room for the packet
    /// ([`ClusterView::candidates`]); a choice without room makes the packet wait.
    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize>;

    /// Whether the policy fixes every job's node when the job's first packet is placed, as the
    /// HHS-ACDID baseline does. The balancer then binds each job (dependent or not) to the
    /// chosen node until its last packet completes, and asks the policy only for first packets.
    /// A pinned job's packets wait for their node even when other nodes have room.
    fn pins_jobs(&self) -> bool {
        false
    }

    /// After [`select`](Self::select) made `packet` wait, the node it waits for, if the policy
    /// waits for one node (`None` otherwise). Under first come first served the balancer
    /// counts the packet's work on that node's queue while it looks at the packets behind it
    /// in the same pass, as an unbounded queue would hold it there, rather than holding them
    /// all behind it.
    fn waits_for(&self, _view: &ClusterView<'_>, _packet: &PacketMeta) -> Option<usize> {
        None
    }

    /// Told after the balancer places `packet` on node `node`.
    fn on_dispatch(&mut self, _view: &ClusterView<'_>, _node: usize, _packet: &PacketMeta) {}

    /// Told after node `node` completes `packet`.
    fn on_complete(&mut self, _view: &ClusterView<'_>, _node: usize, _packet: &PacketMeta) {}

    /// How many times the policy has raised an overload alarm (every node over its threshold);
    /// 0 for policies without alarms. The runtime reports it in its metrics.
    fn alarms(&self) -> u64 {
        0
    }
}

/// A packet header for the policies' unit tests: job 0, cluster 0, a one-packet job.
#[cfg(test)]
pub(crate) fn test_packet(cmd: crate::packet::Cmd, dependent: bool, len: u64) -> PacketMeta {
    PacketMeta {
        task: crate::packet::TaskId(0),
        cmd,
        cluster: crate::packet::ClusterId(0),
        dependent,
        seq: 0,
        last: true,
        len,
        job_bytes: None,
        tenant: crate::packet::TenantId::DEFAULT,
    }
}
