//! `swrr`: Nginx's smooth weighted round robin (`ngx_http_upstream_get_peer` in
//! `src/http/ngx_http_upstream_round_robin.c`; docs/ALGORITHM.md §11.4), weights from
//! speed.
//!
//! Every node keeps a current weight `cw_i`, 0 at the start and kept across calls. One round,
//! for one packet, among the nodes with room for it (strategy 1; Nginx likewise skips peers
//! that are down or at their connection limit):
//! 1. every such node adds its weight: `cw_i += w_i`, and `total = Σ w_i` over them;
//! 2. the node with the largest `cw_i` wins, ties to the lowest index (Nginx keeps the first
//!    peer unless a later one is strictly larger);
//! 3. the winner pays the round: `cw_win −= total`.
//!
//! Nodes that sit a round out keep their current weight. A round with a single node is a
//! no-op on the weights (`cw + w − w`) and is skipped.
//!
//! The weight of node i for the packet's command is its speed, `w_i = 1 / unit_time_i(cmd)`
//! (Nginx's `effective_weight`, which here changes when the runtime refines a unit time). A
//! cluster serving several commands keeps one current weight per node and weighs each round by
//! that packet's command; with one command, the placements are exactly Nginx's sequence for
//! integer weights in the same ratio: unit times 1, 5, 5 give `a a b a c a a` and repeat.
//!
//! Floats: the weights are reciprocals, so they are `f64` rather than Nginx's integers.
//! Scaling every weight by one factor scales every current weight by it and changes no
//! decision, so there is no need to round them to integers (which would bend the ratios).
//! Σ cw over all nodes stays 0 (each round adds `total` and takes `total` away), so the
//! current weights stay within a few `total`s of 0 and each round adds a rounding error of
//! about one ulp of them. Such an error changes a decision only where Nginx's exact
//! arithmetic sees a tie, as it does in most rounds with equal weights (unit times 10, 10,
//! 10: comparing the floats as they are gives 0 1 2 2 0 1 …, not 0 1 2 0 1 2). So "larger"
//! means larger by more than `TIE` (1e-9) times the weight added so far in the round, and a
//! tie within that goes to the lower index, as in Nginx; accumulated rounding stays far below
//! it.

use crate::packet::{Cmd, PacketMeta};
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance, Versus};
use crate::sched::policy::entry::Entry;
use crate::sched::status::ClusterView;

/// Smooth weighted round robin over the nodes with room, weighted by speed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SmoothWeighted {
    /// Current weight per node, by index within the cluster (grown on first use).
    current: Vec<f64>,
}

impl SmoothWeighted {
    /// The registry entry (docs/ALGORITHM.md §11.4).
    pub(super) const ENTRY: Entry = Entry {
        name: "swrr",
        aliases: &[],
        description: "smooth weighted round robin (Nginx's), weights from speed",
        params: &[],
        build: |_| Ok(Box::new(SmoothWeighted::new())),
    };

    /// A fresh policy: every current weight 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The weight of node `i` for `cmd`: its speed, `1 / unit_time(cmd)`.
    pub fn weight(view: &ClusterView<'_>, i: usize, cmd: Cmd) -> f64 {
        1.0 / view.node(i).unit_time(cmd)
    }

    /// The current weights, by node index (empty before the first round).
    pub fn current_weights(&self) -> &[f64] {
        &self.current
    }

    /// One round among `nodes` (ascending node indices, each with room for the packet): the
    /// winner, or `None` for no nodes. Also the tie-breaker of `lc` and `wlc`, which run it
    /// among their tied nodes only, as Nginx's `least_conn` does.
    pub(super) fn round(
        &mut self,
        view: &ClusterView<'_>,
        cmd: Cmd,
        nodes: impl IntoIterator<Item = usize>,
    ) -> Option<usize> {
        if self.current.len() < view.len() {
            self.current.resize(view.len(), 0.0);
        }
        let mut nodes = nodes.into_iter().peekable();
        let first = nodes.next()?;
        if nodes.peek().is_none() {
            return Some(first);
        }
        let mut total = 0.0;
        let mut best = first;
        for i in std::iter::once(first).chain(nodes) {
            let w = Self::weight(view, i, cmd);
            self.current[i] += w;
            total += w;
            let rule = Best::Largest(Tolerance::Of(total));
            if rule.versus(self.current[i], self.current[best]) == Versus::Better {
                best = i;
            }
        }
        self.current[best] -= total;
        Some(best)
    }
}

impl Policy for SmoothWeighted {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        self.round(view, packet.cmd, view.candidates(packet))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{ClusterId, TaskId, UnitTimes};
    use crate::sched::status::NodeStatus;

    fn packet() -> PacketMeta {
        PacketMeta {
            task: TaskId(0),
            cmd: Cmd::Encrypt,
            cluster: ClusterId(0),
            dependent: false,
            seq: 0,
            last: true,
            len: 16,
            job_bytes: None,
            tenant: crate::packet::TenantId::DEFAULT,
        }
    }

    fn run(units: &[f64], rounds: usize) -> Vec<usize> {
        let rows: Vec<_> = units
            .iter()
            .map(|&t| NodeStatus::new(UnitTimes::uniform(t), 64, 16))
            .collect();
        let view = ClusterView::new(&rows);
        let mut p = SmoothWeighted::new();
        (0..rounds)
            .map(|_| p.select(&view, &packet()).unwrap())
            .collect()
    }

    #[test]
    fn nginx_five_one_one() {
        assert_eq!(run(&[1.0, 5.0, 5.0], 14), [0, 0, 1, 0, 2, 0, 0].repeat(2));
    }

    #[test]
    fn equal_weights_are_plain_round_robin_despite_rounding() {
        // 1/10 and 1/3 are not exact in binary: without the tie tolerance the order drifts.
        for n in [3, 5] {
            for t in [10.0, 3.0, 0.7] {
                let seq = run(&vec![t; n], 1000);
                let expected: Vec<usize> = (0..1000).map(|k| k % n).collect();
                assert_eq!(seq, expected, "{n} nodes, unit time {t}");
            }
        }
    }

    #[test]
    fn weights_two_to_one_are_smooth() {
        // Nginx, weights 2:1:1 → a b c a, a b c a, …
        assert_eq!(run(&[1.0, 2.0, 2.0], 8), [0, 1, 2, 0, 0, 1, 2, 0]);
    }
}
