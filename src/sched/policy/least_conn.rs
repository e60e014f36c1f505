//! `lc` and `wlc`: least connections, measured in queued work, after Nginx's `least_conn`
//! (`ngx_http_upstream_least_conn_module.c`) and LVS's `ip_vs_lc.c` / `ip_vs_wlc.c`; the
//! references of docs/ALGORITHM.md §11.5 and §11.6.
//!
//! A web balancer counts open connections; a node here holds a queue of packets of different
//! sizes, so a "connection" is measured by what is queued on the node (the packet in service
//! included), among the nodes with room for the packet (strategy 1):
//! - `lc`: the fewest queued bytes, [`NodeStatus::queued_bytes`] (LVS lc's C_i; Nginx's
//!   `least_conn` with equal weights);
//! - `wlc`: the least queued work, [`NodeStatus::queued_work`]: the expected time to drain the
//!   node, Σ over its queued packets of unit_time_i(that packet's cmd) × len / unit_len. This
//!   is LVS wlc's C_i / W_i (Nginx `least_conn`'s conns / weight) with the weight
//!   W_i = 1 / unit time: when everything queued has the incoming packet's command, it is
//!   queued bytes × unit_time_i(cmd) / unit_len. Unlike that product, it stays the drain time
//!   when a node's queue mixes commands of different unit times (encryption and decryption on
//!   one AES cluster). Equal within a relative 1e-9 counts as equal (float rounding, see
//!   `swrr`).
//!
//! Ties are broken as Nginx's `least_conn` breaks them: by smooth weighted round robin among
//! the tied nodes only. Each policy keeps its own [`SmoothWeighted`] state, whose current
//! weights change only in rounds with two or more tied nodes. With every node empty, `lc` and
//! `wlc` therefore follow `swrr`.
//!
//! [`NodeStatus::queued_bytes`]: crate::sched::NodeStatus::queued_bytes
//! [`NodeStatus::queued_work`]: crate::sched::NodeStatus::queued_work

use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance, Versus};
use crate::sched::policy::entry::Entry;
use crate::sched::policy::swrr::SmoothWeighted;
use crate::sched::status::ClusterView;

/// Fewest queued bytes among the nodes with room; ties by smooth weighted round robin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeastConnections {
    ties: SmoothWeighted,
}

impl LeastConnections {
    /// The registry entry (docs/ALGORITHM.md §11.5).
    pub(super) const ENTRY: Entry = Entry {
        name: "lc",
        aliases: &[],
        description: "the fewest queued bytes, ties by swrr (least connections)",
        params: &[],
        build: |_| Ok(Box::new(LeastConnections::new())),
    };

    /// A fresh policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for LeastConnections {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let least = view
            .candidates(packet)
            .map(|i| view.node(i).queued_bytes())
            .min()?;
        let tied = view
            .candidates(packet)
            .filter(|&i| view.node(i).queued_bytes() == least);
        self.ties.round(view, packet.cmd, tied)
    }
}

/// Least queued work (expected drain time) among the nodes with room; ties by smooth weighted
/// round robin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WeightedLeastConnections {
    ties: SmoothWeighted,
}

impl WeightedLeastConnections {
    /// The registry entry (docs/ALGORITHM.md §11.6).
    pub(super) const ENTRY: Entry = Entry {
        name: "wlc",
        aliases: &[],
        description: "the least queued work (drain time), ties by swrr \
                      (weighted least connections)",
        params: &[],
        build: |_| Ok(Box::new(WeightedLeastConnections::new())),
    };

    /// A fresh policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for WeightedLeastConnections {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let least = view
            .candidates(packet)
            .map(|i| view.node(i).queued_work())
            .min_by(f64::total_cmp)?;
        let rule = Best::Smallest(Tolerance::OfBest);
        let tied = view
            .candidates(packet)
            .filter(|&i| rule.versus(view.node(i).queued_work(), least) != Versus::Worse);
        self.ties.round(view, packet.cmd, tied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Cmd, UnitTimes};
    use crate::sched::status::NodeStatus;

    fn meta(cmd: Cmd, len: u64) -> PacketMeta {
        crate::sched::policy::test_packet(cmd, false, len)
    }

    /// A node with unit times (enc, dec) and the given packets queued.
    fn row(enc: f64, dec: f64, queued: &[PacketMeta]) -> NodeStatus {
        let mut n = NodeStatus::new(UnitTimes([enc, dec, 1.0, 1.0]), 1024, 16);
        for p in queued {
            n.enqueue(p);
        }
        n
    }

    #[test]
    fn wlc_counts_each_queued_packet_at_its_own_unit_time() {
        // Node 0 holds 32 bytes of slow decryption (2 × 30 = 60), node 1 48 bytes of
        // encryption (3 × 10 = 30). By the incoming encryption packet's unit time node 0 would
        // look lighter (2 × 10 = 20 < 30); its queue in fact takes twice as long to drain.
        let rows = [
            row(10.0, 30.0, &[meta(Cmd::Decrypt, 32)]),
            row(10.0, 30.0, &[meta(Cmd::Encrypt, 48)]),
        ];
        let view = ClusterView::new(&rows);
        assert_eq!(
            WeightedLeastConnections::new().select(&view, &meta(Cmd::Encrypt, 16)),
            Some(1)
        );
        // lc counts bytes only.
        assert_eq!(
            LeastConnections::new().select(&view, &meta(Cmd::Encrypt, 16)),
            Some(0)
        );
    }

    #[test]
    fn a_single_least_loaded_node_leaves_the_tie_breaker_alone() {
        let rows = [row(1.0, 1.0, &[meta(Cmd::Encrypt, 16)]), row(5.0, 5.0, &[])];
        let view = ClusterView::new(&rows);
        let mut p = LeastConnections::new();
        assert_eq!(p.select(&view, &meta(Cmd::Encrypt, 16)), Some(1));
        assert!(p.ties.current_weights().iter().all(|&w| w == 0.0));
    }
}
