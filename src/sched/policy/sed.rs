//! `sed`: LVS's shortest expected delay (`ip_vs_sed.c`, after Weinrib and Shenker, "Greed is
//! not enough: adaptive load sharing in large heterogeneous systems", INFOCOM 1988).
//!
//! LVS sends a connection to the server with the least expected delay (C_i + 1) / U_i, where
//! C_i is the server's active connections and U_i its service rate (weight): the new job joins
//! the queue that would finish it first. Here C_i is the node's queued packets (the packet in
//! service included, [`NodeStatus::queued_packets`]) and 1 / U_i its unit time for the
//! packet's command, so the expected delay of node i is
//!
//! ```text
//! d_i = (queued_packets_i + 1) × unit_time_i(cmd)
//! ```
//!
//! and the policy picks the smallest d_i among the nodes with room (strategy 1), ties to the
//! lowest index, as LVS keeps the first server unless a later one is strictly better. Equal
//! within a relative 1e-9 counts as a tie (float rounding, see `best.rs`). Like LVS, it counts
//! packets, not bytes. The `+ 1` (the packet being placed) is what sets it apart from `wlc`:
//! `wlc` sends a packet to an idle node however slow, `sed` only when that is quicker, e.g. to
//! an idle node of unit time 15 rather than to a node of unit time 10 with one packet queued
//! (15 < 2 × 10), but not to an idle node of unit time 25.
//!
//! [`NodeStatus::queued_packets`]: crate::sched::NodeStatus::queued_packets

use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance};
use crate::sched::policy::entry::Entry;
use crate::sched::status::ClusterView;

/// Shortest expected delay, (queued packets + 1) × unit time, among the nodes with room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShortestExpectedDelay;

impl ShortestExpectedDelay {
    /// The registry entry (docs/ALGORITHM.md §11.11).
    pub(super) const ENTRY: Entry = Entry {
        name: "sed",
        aliases: &[],
        description: "the least (queued packets + 1) x unit time (shortest expected delay)",
        params: &[],
        build: |_| Ok(Box::new(ShortestExpectedDelay::new())),
    };

    /// The policy (it keeps no state).
    pub fn new() -> Self {
        ShortestExpectedDelay
    }

    /// The expected delay of node `i` for `packet`: (queued packets + 1) × unit time.
    pub fn delay(view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        let n = view.node(i);
        f64::from(n.queued_packets() + 1) * n.unit_time(packet.cmd)
    }
}

impl Policy for ShortestExpectedDelay {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        Best::Smallest(Tolerance::OfBest).pick(
            view.candidates(packet)
                .map(|i| (i, Self::delay(view, i, packet))),
        )
    }
}
