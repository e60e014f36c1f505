//! `mct-wait`: minimum completion time over every node, room or not; a packet whose node is
//! full waits for it (docs/ALGORITHM.md §11.15). The service's default policy.
//!
//! # The rule
//!
//! With F_i and G_i as `mct` defines them ([`MinCompletionTime::completion`],
//! [`MinCompletionTime::own_completion`]): F_i is when node i would complete the packet and,
//! for a packet that binds its job (a dependent job's first packet under strategy 2), the
//! job's whole expected remainder, counting the node's queued and committed work; G_i is when
//! node i would complete the packet alone.
//! 1. The chosen node: the least F_i among the nodes with room (strategy 1), as `mct`.
//! 2. The packet's own best node: among the nodes that are up and could ever hold the packet,
//!    room or not, the least F_i for a packet that binds its job, the least G_i for one that
//!    does not.
//! 3. If that node has no room and completes the work sooner than the chosen node (beyond the
//!    tie tolerance), the packet waits (`None`); a full node has work queued, so it frees room
//!    and the packet is offered again. Otherwise the chosen node takes it.
//!
//! It differs from `mct` in one point: `mct` waits only when the packet is the whole backlog
//! and only for its own completion; `mct-wait` waits whatever else waits, and for a binding
//! packet compares the whole job's completion. No parameter, no constant.
//!
//! On a cluster whose nodes have several lanes (the service's AES nodes, docs/ALGORITHM.md
//! §15.3) it is `mct`: such a node serves chains side by side, not one after another as F and
//! G assume, and live the wait cost more than it saved (docs/RESULTS.md §6). The paper's
//! nodes, the simulator's and the service's Ed25519 nodes have one lane.
//!
//! # Why it holds
//!
//! Minimum completion time is list scheduling (Graham 1966): every piece of work goes where it
//! finishes first, which on related machines keeps the makespan within a factor O(log m) of
//! the optimum online (Aspnes, Azar, Fiat, Plotkin and Waarts, JACM 44(3), 1997) and, for
//! identical jobs, gives each node a share in proportion to its speed. Strategy 1 restricts the
//! choice to the nodes with room *now*, and with that restriction the guarantee is gone: when
//! the fast nodes' queues are full, work goes to whichever node has room, and a chain bound
//! there stays there (strategy 2), so one placement can cost the ratio of the nodes' speeds
//! (10 on speeds 1:10), and in an overloaded many-chain run, where every chain is bound in
//! the first moments while the queues are full, it decides the whole run. Waiting for the
//! node of least completion keeps the greedy rule; the wait itself is already counted, since
//! F and G put the packet behind the node's whole queue. The cost is to the packets behind
//! a waiting one (first come first served holds later unbound packets back), which is why
//! `mct` waited only at the end of a run; on both samples of the workload space and on the
//! matrix that cost is smaller than what the wrong node costs (docs/ALGORITHM.md §11.15).
//!
//! [`MinCompletionTime::completion`]: crate::sched::policy::MinCompletionTime::completion
//! [`MinCompletionTime::own_completion`]: crate::sched::policy::MinCompletionTime::own_completion

use crate::packet::PacketMeta;
use crate::sched::policy::MinCompletionTime;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance, Versus};
use crate::sched::policy::entry::Entry;
use crate::sched::status::ClusterView;

/// Minimum completion time over every node, waiting for a full node that completes the
/// packet's work (its job's, for a packet that binds the job) sooner than any node with room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MctWait;

impl MctWait {
    /// The registry entry (docs/ALGORITHM.md §11.15).
    pub(super) const ENTRY: Entry = Entry {
        name: "mct-wait",
        aliases: &[],
        description: "minimum completion time over every node, room or not: the packet (or the job it binds) waits for a full node that would complete it sooner",
        params: &[],
        build: |_| Ok(Box::new(MctWait::new())),
    };

    /// The policy (it keeps no state).
    pub fn new() -> Self {
        MctWait
    }

    /// Whether a node of the cluster has several lanes: there the rule is `mct`'s, which waits
    /// only at the end of a run (docs/ALGORITHM.md §11.15).
    fn on_lanes(view: &ClusterView<'_>) -> bool {
        (0..view.len()).any(|i| view.node(i).lanes() > 1)
    }

    /// The packet's own best node, room or not: the up node that could ever hold it with the
    /// least [`score`](Self::score) (the balancer asks about a dependent packet only when it
    /// binds its job).
    fn soonest(view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        Best::Smallest(Tolerance::OfBest).pick(
            (0..view.len())
                .filter(|&i| {
                    let n = view.node(i);
                    !n.is_down() && n.can_ever_hold(packet.len)
                })
                .map(|i| (i, Self::score(view, i, packet, packet.dependent))),
        )
    }

    /// What node `i` is scored by for `packet`: its completion of the whole job the packet
    /// binds (F), or of the packet alone when it binds nothing (G).
    fn score(view: &ClusterView<'_>, i: usize, packet: &PacketMeta, binds: bool) -> f64 {
        if binds {
            MinCompletionTime::completion(view, i, packet)
        } else {
            MinCompletionTime::own_completion(view, i, packet)
        }
    }
}

impl Policy for MctWait {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        // Nodes of several lanes serve chains side by side, not one after another as F and G
        // assume; there the wait cost more than it saved (live, docs/RESULTS.md §6), and the
        // rule is `mct`'s.
        if Self::on_lanes(view) {
            return MinCompletionTime::new().select(view, packet);
        }
        let rule = Best::Smallest(Tolerance::OfBest);
        let chosen = rule.pick(
            view.candidates(packet)
                .map(|i| (i, MinCompletionTime::completion(view, i, packet))),
        )?;
        // The balancer asks about a dependent packet only when it binds its job.
        let binds = packet.dependent;
        let soonest = Self::soonest(view, packet)?;
        let wait = !view.node(soonest).has_room(packet.len)
            && rule.versus(
                Self::score(view, soonest, packet, binds),
                Self::score(view, chosen, packet, binds),
            ) == Versus::Better;
        (!wait).then_some(chosen)
    }

    fn waits_for(&self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        if Self::on_lanes(view) {
            return None;
        }
        Self::soonest(view, packet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Cmd, UnitTimes};
    use crate::sched::policy::test_packet;
    use crate::sched::status::NodeStatus;

    /// A node with unit time `t` for every command, unit length 1, `cap` bytes, holding
    /// `queued` one-byte encryption packets.
    fn node(t: f64, cap: u64, queued: u64) -> NodeStatus {
        let mut n = NodeStatus::new(UnitTimes([t; 4]), cap, 1);
        for _ in 0..queued {
            n.enqueue(&test_packet(Cmd::Encrypt, false, 1));
        }
        n
    }

    #[test]
    fn with_room_everywhere_it_is_mct() {
        let one = test_packet(Cmd::Encrypt, false, 1);
        let nodes = [node(30.0, 8, 0), node(10.0, 8, 2)];
        let view = ClusterView::with_backlog(&nodes, 5);
        assert_eq!(MctWait::new().select(&view, &one), Some(0));
        let nodes = [node(30.0, 8, 0), node(10.0, 8, 1)];
        let view = ClusterView::with_backlog(&nodes, 5);
        assert_eq!(MctWait::new().select(&view, &one), Some(1));
    }

    #[test]
    fn a_packet_waits_for_a_full_node_even_behind_a_backlog() {
        let one = test_packet(Cmd::Encrypt, false, 1);
        // Node 1 is full with 2 bytes: the packet would complete there at 30; the idle node 0
        // takes 160. `mct` takes node 0 while other packets wait; `mct-wait` waits.
        let nodes = [node(160.0, 8, 0), node(10.0, 2, 2)];
        let view = ClusterView::with_backlog(&nodes, 5);
        assert_eq!(MctWait::new().select(&view, &one), None);
        assert_eq!(MinCompletionTime::new().select(&view, &one), Some(0));
        // A node that is down is not waited for.
        let mut down = node(10.0, 2, 2);
        down.down = true;
        let nodes = [node(160.0, 8, 0), down];
        let view = ClusterView::with_backlog(&nodes, 5);
        assert_eq!(MctWait::new().select(&view, &one), Some(0));
    }

    #[test]
    fn a_binding_packet_compares_the_whole_job() {
        let chain = test_packet(Cmd::Encrypt, true, 1);
        // The fast node (10) is full with 4 bytes; the slow one (40) is idle. Alone, the
        // packet completes sooner on the slow node (40 against 50: no wait); the job of 20
        // bytes it binds completes at 10·24 = 240 on the fast node against 40·20 = 800: it
        // waits.
        let nodes = [node(40.0, 64, 0), node(10.0, 4, 4)];
        let alone = ClusterView::with_backlog(&nodes, 5);
        assert_eq!(MctWait::new().select(&alone, &chain), Some(0));
        let whole = ClusterView::with_backlog(&nodes, 5).with_job_bytes(20);
        assert_eq!(MctWait::new().select(&whole, &chain), None);
        // With room on the fast node it goes there at once.
        let nodes = [node(40.0, 64, 0), node(10.0, 64, 4)];
        let whole = ClusterView::with_backlog(&nodes, 5).with_job_bytes(20);
        assert_eq!(MctWait::new().select(&whole, &chain), Some(1));
    }

    #[test]
    fn on_nodes_with_lanes_it_is_mct() {
        let one = test_packet(Cmd::Encrypt, false, 1);
        let nodes = [
            node(160.0, 8, 0).with_lanes(8),
            node(10.0, 2, 2).with_lanes(8),
        ];
        let view = ClusterView::with_backlog(&nodes, 5);
        assert_eq!(MctWait::new().select(&view, &one), Some(0));
        assert_eq!(MinCompletionTime::new().select(&view, &one), Some(0));
    }

    #[test]
    fn a_packet_no_node_can_hold_is_declined() {
        let big = test_packet(Cmd::Encrypt, false, 9);
        let nodes = [node(10.0, 8, 0), node(20.0, 8, 0)];
        assert_eq!(MctWait::new().select(&ClusterView::new(&nodes), &big), None);
    }
}
