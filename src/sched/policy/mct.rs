//! `mct`: minimum completion time, counting the work each node is committed to
//! (docs/ALGORITHM.md §11.14). The service's default policy.
//!
//! # Source
//!
//! MCT is the online mapping heuristic of Maheswaran, Ali, Siegel, Hensgen and Freund,
//! "Dynamic mapping of a class of independent tasks onto heterogeneous computing systems"
//! (JPDC 59(2), 1999), and one of the eleven heuristics compared by Braun et al. (JPDC 61(6),
//! 2001): each task, as it arrives, goes to the machine on which it would *complete* earliest,
//! given the machine's ready time and the task's expected time on that machine. It is list
//! scheduling (Graham, 1966) on unrelated machines; the earliest-finish-time step of HEFT
//! (Topcuoglu, Hariri and Wu, TPDS 2002) is the same choice for one task of a graph.
//!
//! # The rule
//!
//! A node's ready time is what it must still do: its queue ([`NodeStatus::queued_work`]) and
//! the work the jobs bound to it will still bring ([`NodeStatus::committed_work`], exact when
//! the jobs' lengths are known, estimated online when not). What the packet brings is its own
//! work, or, when placing it binds its job to the node (a dependent job under strategy 2), the
//! whole expected remainder of the job ([`ClusterView::job_bytes`]), since the node will
//! receive the job's later packets with no further choice. So for node i
//!
//! ```text
//! F_i = queued_work_i + committed_work_i + unit_time_i(cmd) × job_bytes / unit_len
//! ```
//!
//! and the policy picks the least F_i among the nodes that are up and could hold the packet
//! (ties within a relative 1e-9 to the lowest index, `best.rs`). When that node has room the
//! packet goes there (strategy 1); when it has none, the packet **waits** for it (`None`), since
//! any node with room would complete it later. A node with no room has work queued, so it
//! frees room and the packet is offered again.
//!
//! # Why it works
//!
//! The makespan is the time the last node finishes. Putting each piece of work where it
//! finishes earliest keeps the nodes' finishing times level, weighted by their speeds, which
//! is what the work bound of the simulator (`sim::bound`) assumes. The speed-greedy policies
//! look at speed alone and pile chains onto the fast nodes; the capacity-greedy ones look at
//! queue room alone and spread chains evenly onto slow nodes too. Both miss that under chain
//! affinity a node's real load is the work its bound chains will still bring: a node with an
//! empty queue but five long chains bound to it is not free. Counting that commitment, and
//! charging a chain's whole expected work to the node at the one moment the node is chosen for
//! it, is what lets one rule hold on independent jobs (where it is the classic MCT), on long
//! chains (where it is list scheduling of the chains by their lengths) and on mixes of both.
//!
//! Waiting for the earliest-completing node instead of taking a slow node with room matters
//! most at the end of a run, where a packet put on a node three or four times slower can finish
//! after every other node is idle.
//!
//! [`NodeStatus::queued_work`]: crate::sched::NodeStatus::queued_work
//! [`NodeStatus::committed_work`]: crate::sched::NodeStatus::committed_work

use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance, Versus};
use crate::sched::policy::entry::Entry;
use crate::sched::status::ClusterView;

/// Minimum completion time: the node where the packet (and, for a job it binds, the job's
/// expected remainder) would complete earliest, counting queued and committed work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinCompletionTime;

impl MinCompletionTime {
    /// The registry entry (docs/ALGORITHM.md §11.14).
    pub(super) const ENTRY: Entry = Entry {
        name: "mct",
        aliases: &["default"],
        description: "the node where the packet's job would complete first, counting queued and committed bytes (minimum completion time)",
        params: &[],
        build: |_| Ok(Box::new(MinCompletionTime::new())),
    };

    /// The policy (it keeps no state).
    pub fn new() -> Self {
        MinCompletionTime
    }

    /// When node `i` would complete `packet` and the rest of the job the packet binds: the
    /// node's queued bytes, the bytes its bound jobs are still expected to bring, and the
    /// job's expected bytes, at the node's unit time for the packet's command.
    pub fn completion(view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        let n = view.node(i);
        n.service_time(
            packet.cmd,
            n.queued_bytes() + n.committed_bytes() + view.job_bytes(packet),
        )
    }

    /// When node `i` would complete `packet` alone, behind its queue (committed work aside:
    /// the packet runs before the bound jobs' later packets arrive), at the node's unit time
    /// for the packet's command.
    pub fn own_completion(view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        let n = view.node(i);
        n.service_time(packet.cmd, n.queued_bytes() + packet.len)
    }
}

impl Policy for MinCompletionTime {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let rule = Best::Smallest(Tolerance::OfBest);
        let chosen = rule.pick(
            view.candidates(packet)
                .map(|i| (i, Self::completion(view, i, packet))),
        )?;
        // The node that would complete the packet itself first, room or not.
        let soonest = rule.pick(
            (0..view.len())
                .filter(|&i| view.node(i).can_ever_hold(packet.len))
                .map(|i| (i, Self::own_completion(view, i, packet))),
        )?;
        let wait = !view.node(soonest).has_room(packet.len)
            && rule.versus(
                Self::own_completion(view, soonest, packet),
                Self::own_completion(view, chosen, packet),
            ) == Versus::Better;
        (!wait).then_some(chosen)
    }
}
