//! The node status table of docs/ALGORITHM.md §4 (S_ip = {t_unit, cap, n}), and the read-only view of a
//! cluster that policies choose from.

use crate::packet::{Cmd, PacketMeta, UnitTimes};

/// One row of a cluster's node status table: what the balancer knows about a node.
///
/// The queued counts are exact: a packet counts from the moment the balancer places it on the
/// node until the driver reports it complete (the packet in service still occupies its slot).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStatus {
    pub(crate) unit_times: UnitTimes,
    pub(crate) capacity: u64,
    pub(crate) slots: u32,
    pub(crate) down: bool,
    pub(crate) unit_len: u64,
    pub(crate) queued_packets: u32,
    pub(crate) queued_dependent: u32,
    pub(crate) queued_bytes: u64,
    pub(crate) queued_bytes_by_cmd: [u64; 4],
    pub(crate) dispatched_packets: u64,
    pub(crate) completed_packets: u64,
    pub(crate) completed_bytes: u64,
    pub(crate) completed_work: f64,
    pub(crate) lanes: u32,
    pub(crate) committed_bytes_by_cmd: [u64; 4],
}

impl NodeStatus {
    /// A row with no bound on its number of packets.
    pub(crate) fn new(unit_times: UnitTimes, capacity: u64, unit_len: u64) -> Self {
        NodeStatus {
            unit_times,
            capacity,
            slots: u32::MAX,
            down: false,
            unit_len,
            queued_packets: 0,
            queued_dependent: 0,
            queued_bytes: 0,
            queued_bytes_by_cmd: [0; 4],
            dispatched_packets: 0,
            completed_packets: 0,
            completed_bytes: 0,
            completed_work: 0.0,
            lanes: 1,
            committed_bytes_by_cmd: [0; 4],
        }
    }

    /// The same row with at most `slots` packets queued at once (at least one).
    pub(crate) fn with_slots(mut self, slots: u32) -> Self {
        self.slots = slots.max(1);
        self
    }

    /// Time for one unit-length packet of each command (t_unit).
    pub fn unit_times(&self) -> &UnitTimes {
        &self.unit_times
    }

    /// Time for one unit-length packet of `cmd`.
    pub fn unit_time(&self, cmd: Cmd) -> f64 {
        self.unit_times.get(cmd)
    }

    /// The packet length the unit times refer to.
    pub fn unit_len(&self) -> u64 {
        self.unit_len
    }

    /// Queue capacity in bytes (cap).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Packets placed on the node and not yet complete (n).
    pub fn queued_packets(&self) -> u32 {
        self.queued_packets
    }

    /// Of the packets placed on the node and not yet complete, those of dependent (chained)
    /// jobs.
    pub fn queued_dependent(&self) -> u32 {
        self.queued_dependent
    }

    /// Bytes placed on the node and not yet complete.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Remaining capacity in bytes (rcap = cap − queued bytes).
    pub fn remaining(&self) -> u64 {
        self.capacity.saturating_sub(self.queued_bytes)
    }

    /// The most packets the node's queue holds at once, whatever their size (the packet in
    /// service included), so that empty packets meet a bound too.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Whether the node is down (failed, and not yet back): it takes no packets.
    pub fn is_down(&self) -> bool {
        self.down
    }

    /// The largest packet the node takes now: its remaining capacity, or 0 when it is down or
    /// every slot is taken.
    pub fn room(&self) -> u64 {
        if self.down || self.queued_packets >= self.slots {
            0
        } else {
            self.remaining()
        }
    }

    /// Whether a packet of `len` bytes fits now (strategy 1): the node is up, with a free slot
    /// and the bytes.
    pub fn has_room(&self, len: u64) -> bool {
        !self.down && self.queued_packets < self.slots && self.remaining() >= len
    }

    /// Whether a packet of `len` bytes could ever fit, once the node is empty (and up).
    pub fn can_ever_hold(&self, len: u64) -> bool {
        !self.down && self.capacity >= len
    }

    /// The expected time to serve a packet of `len` bytes and command `cmd`:
    /// `unit_time(cmd) × len / unit_len`.
    pub fn service_time(&self, cmd: Cmd, len: u64) -> f64 {
        self.unit_times.service_time(cmd, len, self.unit_len)
    }

    /// The expected time to serve everything queued on the node (the packet in service counted
    /// whole).
    pub fn queued_work(&self) -> f64 {
        Cmd::ALL
            .iter()
            .map(|&c| self.service_time(c, self.queued_bytes_by_cmd[c.index()]))
            .sum()
    }

    /// Packets ever placed on the node.
    pub fn dispatched_packets(&self) -> u64 {
        self.dispatched_packets
    }

    /// Packets the node has completed.
    pub fn completed_packets(&self) -> u64 {
        self.completed_packets
    }

    /// Bytes the node has completed.
    pub fn completed_bytes(&self) -> u64 {
        self.completed_bytes
    }

    /// The expected service time of everything the node has completed, by its unit times at
    /// the time of completion: the work it has done, in the driver's time unit.
    pub fn completed_work(&self) -> f64 {
        self.completed_work
    }

    pub(crate) fn enqueue(&mut self, meta: &PacketMeta) {
        self.queued_packets += 1;
        self.queued_dependent += u32::from(meta.is_dependent());
        self.queued_bytes += meta.len;
        self.queued_bytes_by_cmd[meta.cmd.index()] += meta.len;
        self.dispatched_packets += 1;
    }

    /// Counts a packet that waits for this node in its queued work (not its room), for a
    /// scan of the balancer (docs/ALGORITHM.md §11.15, step 4).
    pub(crate) fn count_waiting(&mut self, meta: &PacketMeta) {
        self.queued_bytes_by_cmd[meta.cmd.index()] += meta.len;
    }

    /// Takes off what [`count_waiting`](Self::count_waiting) counted.
    pub(crate) fn uncount_waiting(&mut self, meta: &PacketMeta) {
        let slot = &mut self.queued_bytes_by_cmd[meta.cmd.index()];
        *slot = slot.saturating_sub(meta.len);
    }

    /// Takes a packet off the node without counting it complete (the node failed; the packet
    /// goes back to wait for another node).
    pub(crate) fn forget(&mut self, meta: &PacketMeta) {
        self.queued_packets -= 1;
        self.queued_dependent -= u32::from(meta.is_dependent());
        self.queued_bytes -= meta.len;
        self.queued_bytes_by_cmd[meta.cmd.index()] -= meta.len;
        self.dispatched_packets -= 1;
    }

    pub(crate) fn dequeue(&mut self, meta: &PacketMeta) {
        self.queued_packets -= 1;
        self.queued_dependent -= u32::from(meta.is_dependent());
        self.queued_bytes -= meta.len;
        self.queued_bytes_by_cmd[meta.cmd.index()] -= meta.len;
        self.completed_packets += 1;
        self.completed_bytes += meta.len;
        self.completed_work += self.service_time(meta.cmd, meta.len);
    }

    /// Bytes the jobs bound to the node are still expected to bring, beyond what they have
    /// placed on it so far (docs/ALGORITHM.md §11.14): exact for a job whose length is known
    /// ([`PacketMeta::job_bytes`]), estimated online for one whose length is not.
    pub fn committed_bytes(&self) -> u64 {
        self.committed_bytes_by_cmd.iter().sum()
    }

    /// The expected time to serve the bytes the jobs bound to the node are still expected to
    /// bring ([`committed_bytes`](Self::committed_bytes)), at the node's unit times: the work
    /// the node is committed to beyond its queue.
    pub fn committed_work(&self) -> f64 {
        Cmd::ALL
            .iter()
            .map(|&c| self.service_time(c, self.committed_bytes_by_cmd[c.index()]))
            .sum()
    }

    /// Changes the bytes of command `cmd` committed to the node from `from` to `to` (a bound
    /// job's expected remainder, before and after).
    pub(crate) fn recommit(&mut self, cmd: Cmd, from: u64, to: u64) {
        let slot = &mut self.committed_bytes_by_cmd[cmd.index()];
        *slot = slot.saturating_sub(from) + to;
    }
}

/// A read-only view of one cluster's node status table, handed to a [`Policy`] with the packet
/// to place. Node indices are positions within the cluster (0 .. `len()`).
///
/// [`Policy`]: crate::sched::Policy
#[derive(Debug, Clone, Copy)]
pub struct ClusterView<'a> {
    nodes: &'a [NodeStatus],
    backlog: usize,
    job_bytes: Option<u64>,
}

impl<'a> ClusterView<'a> {
    /// A view over a cluster's rows, with nothing waiting.
    pub fn new(nodes: &'a [NodeStatus]) -> Self {
        ClusterView {
            nodes,
            backlog: 0,
            job_bytes: None,
        }
    }

    /// A view over a cluster's rows with `backlog` packets in its cluster queue.
    pub fn with_backlog(nodes: &'a [NodeStatus], backlog: usize) -> Self {
        ClusterView {
            nodes,
            backlog,
            job_bytes: None,
        }
    }

    /// Packets in the cluster queue when the policy is asked (the packet being placed
    /// included): how much work is waiting for a node.
    pub fn backlog(&self) -> usize {
        self.backlog
    }

    /// Number of nodes in the cluster.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes (never true for a running scheduler).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// All rows, by node index within the cluster.
    pub fn nodes(&self) -> &'a [NodeStatus] {
        self.nodes
    }

    /// One row.
    pub fn node(&self, i: usize) -> &'a NodeStatus {
        &self.nodes[i]
    }

    /// Strategy 1: the nodes with room for `packet` now.
    pub fn candidates(&self, packet: &PacketMeta) -> impl Iterator<Item = usize> + 'a {
        let len = packet.len;
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.has_room(len))
            .map(|(i, _)| i)
    }

    /// The normalised speed of node `i` for `cmd` (docs/ALGORITHM.md §5):
    /// `v_i = (t_max − t_i) / (t_max − t_min)` over the whole cluster; fastest 1, slowest 0,
    /// and 1 for every node when all are equally fast.
    pub fn speed(&self, i: usize, cmd: Cmd) -> f64 {
        let (t_min, t_max) = self
            .nodes
            .iter()
            .map(|n| n.unit_time(cmd))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
                (lo.min(t), hi.max(t))
            });
        if t_max - t_min <= 0.0 {
            return 1.0;
        }
        (t_max - self.nodes[i].unit_time(cmd)) / (t_max - t_min)
    }

    /// The remaining-capacity share of node `i` (docs/ALGORITHM.md §5): `r_i = rcap_i / cap_i`, in bytes.
    pub fn remaining_share(&self, i: usize) -> f64 {
        let n = &self.nodes[i];
        n.remaining() as f64 / n.capacity as f64
    }

    /// The same view, with the bytes the job of the packet being placed is expected to bring
    /// from this packet on (this packet included), as the balancer knows or estimates them.
    pub fn with_job_bytes(mut self, bytes: u64) -> Self {
        self.job_bytes = Some(bytes);
        self
    }

    /// The bytes the job of the packet being placed is expected to bring from this packet on,
    /// this packet included, when placing it binds the job to the chosen node (a dependent
    /// job's packet, or any first packet under a pinning policy): exact for a job whose
    /// length is known, estimated online otherwise (docs/ALGORITHM.md §11.14). For a packet
    /// that binds nothing, or a view the balancer did not make, the packet's own length.
    pub fn job_bytes(&self, packet: &PacketMeta) -> u64 {
        self.job_bytes.unwrap_or(packet.len).max(packet.len)
    }
}

/// Lanes (docs/ALGORITHM.md §15.3): a node that serves up to L serial packets of different jobs
/// at once.
impl NodeStatus {
    /// The same row with `lanes` lanes (at least one).
    pub(crate) fn with_lanes(mut self, lanes: u32) -> Self {
        self.lanes = lanes.max(1);
        self
    }

    /// The node's lanes (L): how many serial packets of different jobs it serves at once; 1
    /// for the paper's node, which serves one packet at a time.
    pub fn lanes(&self) -> u32 {
        self.lanes
    }

    /// The lanes no packet placed on the node claims: L minus its queued dependent packets
    /// (at least 0). The core sees a packet's dependence, not its mode, so every dependent
    /// packet counts as serial; CBC and CFB decryption, which are dependent but run alone on
    /// the cipher's parallel path, are counted too, which errs towards fewer free lanes. A
    /// node with a free lane starts a serial packet placed on it at once, unless a parallel
    /// packet is ahead of it in its queue.
    pub fn free_lanes(&self) -> u32 {
        self.lanes.saturating_sub(self.queued_dependent)
    }
}

impl ClusterView<'_> {
    /// The free lanes of node `i` ([`NodeStatus::free_lanes`]).
    pub fn free_lanes(&self, i: usize) -> u32 {
        self.nodes[i].free_lanes()
    }
}

#[cfg(test)]
mod lane_tests {
    use super::*;
    use crate::packet::{ClusterId, TaskId};

    #[test]
    fn free_lanes_count_the_dependent_packets_placed() {
        let mut row = NodeStatus::new(UnitTimes::uniform(1.0), 100, 1).with_lanes(3);
        assert_eq!((row.lanes(), row.free_lanes()), (3, 3));
        let meta = |task, dependent| {
            PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0)).dependent(dependent)
        };
        row.enqueue(&meta(1, false));
        assert_eq!(row.free_lanes(), 3);
        for task in 2..6 {
            row.enqueue(&meta(task, true));
        }
        assert_eq!(row.free_lanes(), 0);
        row.dequeue(&meta(2, true));
        row.dequeue(&meta(3, true));
        assert_eq!(row.free_lanes(), 1);
        let rows = [row, NodeStatus::new(UnitTimes::uniform(1.0), 100, 1)];
        let view = ClusterView::new(&rows);
        assert_eq!((view.free_lanes(0), view.free_lanes(1)), (1, 1));
        assert_eq!(rows[1].lanes(), 1);
    }
}
