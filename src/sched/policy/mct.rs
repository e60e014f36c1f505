//! `mct`: minimum completion time, counting the work each node is committed to
//! (docs/ALGORITHM.md §11.14). The service's default until `mct-wait` (§11.15), which keeps
//! this rule and waits for a full node where this one takes a node with room.
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
//! job's whole expected remainder J ([`ClusterView::job_bytes`]), since the node will receive
//! the job's later packets with no further choice. For node i, with Q, W its queued and
//! committed work, B, K its queued and committed bytes, t its unit time for the packet's
//! command and U the unit length:
//!
//! ```text
//! F_i = max(Q_i + W_i + t_i·J/U,  t_i·(B_i + K_i + J)/U)
//! G_i = max(Q_i + t_i·L/U,        t_i·(B_i + L)/U)          (the packet alone, length L)
//! ```
//!
//! The policy takes the least F_i among the nodes with room (strategy 1). It waits instead
//! (`None`) when nothing else waits for a node (the packet is the whole backlog,
//! [`ClusterView::backlog`] ≤ 1) and the node with the least G_i among the nodes that are up
//! and could hold the packet has no room and beats the chosen node's G: the packet itself
//! would complete sooner there. A node with no room has work queued, so it frees room and the
//! packet is offered again. Ties within a relative 1e-9 go to the lowest index (`best.rs`).
//!
//! # Why it works
//!
//! The makespan is the time the last node finishes; putting each piece of work where it
//! finishes first keeps the nodes' finishing times level.
//! - **Chains are charged whole when their node is chosen.** The speed-greedy policies pile
//!   chains onto the fast nodes; the capacity-greedy ones spread them evenly onto slow nodes
//!   too. Both look at queues that do not yet hold the chains' work: a node with an empty queue
//!   and five long chains bound to it is not free. F counts the commitments and the chain's
//!   whole expected work.
//! - **Under a backlog a byte is priced at this command's speed.** Node speeds differ per
//!   command. With deep queues a queue's exact time dwarfs the packet's own work, and exact
//!   completion times alone would send the packet to the shortest queue whatever the node's
//!   speed for its command, wasting the cluster's time. Pricing the node's bytes at its unit
//!   time for this command (as `sed` prices packets) makes a node slow at the command look as
//!   loaded as it is for it; the larger of the two keeps the exact time when that is later.
//! - **Wait only at the end, and only for a node that finishes the packet itself sooner.** At
//!   the end of a run, a packet put on a node three times slower can finish after every other
//!   node is idle. But a packet that waits holds up the packets behind it (the cluster queue is
//!   first come first served; under fair admission every job would wait the same way), and the
//!   nodes with room then idle: so the policy waits only when nothing else is waiting. G leaves
//!   the commitments out, since the packet runs before the bound jobs' later packets arrive.
//!
//! No constant: the shape was chosen on the policy matrix's tuning seeds (docs/ALGORITHM.md
//! §11.14), and the matrix reports it on other seeds.
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
        aliases: &[],
        description: "the node where the packet's job would complete first, counting queued and committed bytes (minimum completion time)",
        params: &[],
        build: |_| Ok(Box::new(MinCompletionTime::new())),
    };

    /// The policy (it keeps no state).
    pub fn new() -> Self {
        MinCompletionTime
    }

    /// When node `i` would complete `packet` and the rest of the job the packet binds: the
    /// node's queued and committed work and the job's expected work, each at the node's unit
    /// times, or, if later, the same bytes priced at the node's unit time for the packet's
    /// command ([`priced`](Self::priced)).
    pub fn completion(view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        let n = view.node(i);
        let job = view.job_bytes(packet);
        let exact = n.queued_work() + n.committed_work() + n.service_time(packet.cmd, job);
        exact.max(Self::priced(
            view,
            i,
            packet,
            n.queued_bytes() + n.committed_bytes() + job,
        ))
    }

    /// When node `i` would complete `packet` alone, behind its queue (committed work aside:
    /// the packet runs before the bound jobs' later packets arrive), priced as
    /// [`completion`](Self::completion) does.
    pub fn own_completion(view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        let n = view.node(i);
        let exact = n.queued_work() + n.service_time(packet.cmd, packet.len);
        exact.max(Self::priced(view, i, packet, n.queued_bytes() + packet.len))
    }

    /// `bytes` at node `i`'s unit time for the packet's command: what the node's queue costs
    /// the cluster under a backlog, when every byte the node serves is a byte of this command
    /// it could have served (module docs).
    pub fn priced(view: &ClusterView<'_>, i: usize, packet: &PacketMeta, bytes: u64) -> f64 {
        view.node(i).service_time(packet.cmd, bytes)
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
        // Waiting is for the end of a run only: with other packets waiting, no second scan.
        if view.backlog() > 1 {
            return Some(chosen);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Cmd, UnitTimes};
    use crate::sched::policy::test_packet;
    use crate::sched::status::NodeStatus;

    /// A node with unit times (enc, dec, sign, verify), unit length 1, `cap` bytes, holding
    /// `queued` one-byte encryption packets.
    fn node(t: [f64; 4], cap: u64, queued: u64) -> NodeStatus {
        let mut n = NodeStatus::new(UnitTimes(t), cap, 1);
        for _ in 0..queued {
            n.enqueue(&test_packet(Cmd::Encrypt, false, 1));
        }
        n
    }

    fn pick(nodes: &[NodeStatus], packet: &PacketMeta) -> Option<usize> {
        MinCompletionTime::new().select(&ClusterView::new(nodes), packet)
    }

    #[test]
    fn idle_nodes_go_fastest_first_then_level() {
        let one = test_packet(Cmd::Encrypt, false, 1);
        let nodes = [node([30.0; 4], 8, 0), node([10.0; 4], 8, 0)];
        assert_eq!(pick(&nodes, &one), Some(1));
        // Node 1 holds 2: it would complete a third at 30, as idle node 0 would: a tie, to
        // the lowest index.
        let nodes = [node([30.0; 4], 8, 0), node([10.0; 4], 8, 2)];
        assert_eq!(pick(&nodes, &one), Some(0));
        let nodes = [node([30.0; 4], 8, 0), node([10.0; 4], 8, 1)];
        assert_eq!(pick(&nodes, &one), Some(1));
    }

    #[test]
    fn committed_bytes_count_as_load() {
        let one = test_packet(Cmd::Encrypt, false, 1);
        let mut fast = node([10.0; 4], 8, 0);
        // A chain bound to the fast node will bring 5 more bytes: it completes a new packet
        // at 60, the slow idle node at 30.
        fast.recommit(Cmd::Encrypt, 0, 5);
        assert_eq!(fast.committed_bytes(), 5);
        assert_eq!(fast.committed_work(), 50.0);
        let nodes = [node([30.0; 4], 8, 0), fast];
        assert_eq!(pick(&nodes, &one), Some(0));
    }

    #[test]
    fn a_chain_is_charged_whole() {
        let chain = test_packet(Cmd::Encrypt, true, 1);
        // The fast node holds 3 bytes. A one-byte job completes sooner on the idle slow node
        // (30 against 40); a job expected to bring 4 bytes sooner on the fast one (10·7 = 70
        // against 30·4 = 120): it binds all 4 to the node chosen now.
        let nodes = [node([30.0; 4], 64, 0), node([10.0; 4], 64, 3)];
        let alone = ClusterView::new(&nodes);
        assert_eq!(MinCompletionTime::new().select(&alone, &chain), Some(0));
        let whole = ClusterView::new(&nodes).with_job_bytes(4);
        assert_eq!(MinCompletionTime::completion(&whole, 1, &chain), 70.0);
        assert_eq!(MinCompletionTime::new().select(&whole, &chain), Some(1));
    }

    #[test]
    fn waits_only_for_a_full_node_that_completes_the_packet_sooner_and_only_alone() {
        let one = test_packet(Cmd::Encrypt, false, 1);
        // Node 1 is full with 2 bytes: the packet would complete there at 30 once it has
        // room. Idle node 0 takes 40: wait. At 25: take node 0.
        let nodes = [node([40.0; 4], 8, 0), node([10.0; 4], 2, 2)];
        assert_eq!(pick(&nodes, &one), None);
        let nodes = [node([25.0; 4], 8, 0), node([10.0; 4], 2, 2)];
        assert_eq!(pick(&nodes, &one), Some(0));
        // Not while other packets wait behind it.
        let nodes = [node([40.0; 4], 8, 0), node([10.0; 4], 2, 2)];
        let busy = ClusterView::with_backlog(&nodes, 2);
        assert_eq!(MinCompletionTime::new().select(&busy, &one), Some(0));
        // A node that is down is not waited for.
        let mut down = node([1.0; 4], 8, 0);
        down.down = true;
        let nodes = [node([40.0; 4], 8, 0), down];
        assert_eq!(pick(&nodes, &one), Some(0));
    }

    #[test]
    fn queued_bytes_are_priced_at_the_packets_command() {
        let dec = test_packet(Cmd::Decrypt, false, 1);
        // Node 0 encrypts fast (5) and decrypts slowly (30), with 4 encryption bytes queued:
        // exactly it would complete the packet at 20 + 30 = 50, but its 5 bytes priced at its
        // decryption time are 150. Node 1 (20 for both, 2 bytes queued) completes it at 60.
        let nodes = [node([5.0, 30.0, 20.0, 20.0], 16, 4), node([20.0; 4], 16, 2)];
        let view = ClusterView::new(&nodes);
        assert_eq!(MinCompletionTime::completion(&view, 0, &dec), 150.0);
        assert_eq!(MinCompletionTime::completion(&view, 1, &dec), 60.0);
        assert_eq!(pick(&nodes, &dec), Some(1));
    }
}
