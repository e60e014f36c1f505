//! Level 2 (docs/ALGORITHM.md §3 part 4, §6–§8): the balancer of one cluster, with its choose list.
//!
//! The balancer scans its cluster queue from the front and places what it can:
//! 1. A packet of a job in the choose list goes to the job's bound node if that node has room
//!    (strategy 2); otherwise it waits.
//! 2. Any other packet is offered to the policy, which picks among the nodes with room
//!    (strategy 1). A dependent packet's job is then bound to the chosen node; under a pinning
//!    policy (the HHS-ACDID baseline) every job is.
//! 3. A packet that cannot be placed waits in the queue, and so do the later packets of its job
//!    (packets of one job never reorder). It does not block anything else: packets of other
//!    jobs bound to nodes with room go ahead. Later unbound packets wait behind the first
//!    unbound packet that found no node, so unbound packets keep their arrival order and a large
//!    packet is not starved by small ones.
//!
//! A binding is removed when the job's last packet completes. With [`Affinity::InFlight`] a
//! dependent job's binding is also removed as soon as none of its packets is queued on or being
//! served by its node; the job's chaining state is then in the intermediate state store, and
//! the next packet may go wherever the policy says.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::packet::{Cmd, NodeId, Packet, PacketMeta, Payload, TaskId};
use crate::sched::flows::Flows;
use crate::sched::policy::Policy;
use crate::sched::status::{ClusterView, NodeStatus};
use crate::sched::{Affinity, Dispatch};

#[derive(Debug, Clone, Copy)]
struct Binding {
    node: usize,
    in_flight: u32,
    /// The job's command, for the node's committed work.
    cmd: Cmd,
    /// Bytes the job is known to bring from its binding on, when its length is known.
    known: Option<u64>,
    /// Whether the job was bound from its first packet (so `placed` ends as its length).
    from_start: bool,
    /// Bytes and packets of the job placed since the binding.
    placed: u64,
    packets: u32,
    /// Whether the job's last packet is placed.
    ended: bool,
    /// What the node's committed work counts for the job now.
    committed: u64,
}

impl Binding {
    fn new(node: usize, meta: &PacketMeta) -> Self {
        Binding {
            node,
            in_flight: 0,
            cmd: meta.cmd,
            known: meta.job_len().map(|total| remainder_from(meta, total)),
            from_start: meta.seq == 0,
            placed: 0,
            packets: 0,
            ended: false,
            committed: 0,
        }
    }

    /// Whether the job feeds the length estimate: its length is unknown and it is bound from
    /// its first packet, so its placed bytes, once it ends, are its whole length.
    fn samples_length(&self) -> bool {
        self.known.is_none() && self.from_start
    }

    /// The bytes the job is still expected to bring after what it has placed: exact when its
    /// length is known, else [`ChainLengths::remainder`].
    fn expected_rest(&self, lengths: &ChainLengths) -> u64 {
        if self.ended {
            return 0;
        }
        match self.known {
            Some(total) => total.saturating_sub(self.placed),
            None => lengths.remainder(self.placed, self.packets),
        }
    }
}

/// What a job whose whole length is `total` still brings from packet `meta` on, this packet
/// included: all of it from the first packet; from a later one (a job bound again after its
/// node failed, or between bursts), the bytes of the packets before it counted at this
/// packet's length.
fn remainder_from(meta: &PacketMeta, total: u64) -> u64 {
    total
        .saturating_sub(u64::from(meta.seq) * meta.len)
        .max(meta.len)
}

/// The online estimate of a bound job's remaining bytes when its length is not known
/// (docs/ALGORITHM.md §11.14): the lengths of the cluster's bound jobs seen to their end so
/// far, and of those still bound.
#[derive(Debug, Clone, Copy, Default)]
struct ChainLengths {
    /// Jobs of unknown length bound from their first packet and completed: count, bytes.
    done: u64,
    done_bytes: u64,
    /// Jobs of unknown length bound from their first packet and still bound: count, bytes
    /// placed so far.
    live: u64,
    live_bytes: u64,
}

impl ChainLengths {
    /// The expected whole length of a job: the mean of the completed ones; before any has
    /// completed, twice the mean placed so far by those still bound (a job seen at a random
    /// point of its life has on average as much ahead of it as behind); `None` before either.
    fn mean(&self) -> Option<f64> {
        if self.done > 0 {
            Some(self.done_bytes as f64 / self.done as f64)
        } else if self.live > 0 {
            Some(2.0 * self.live_bytes as f64 / self.live as f64)
        } else {
            None
        }
    }

    /// A job that has placed `placed` bytes in `packets` packets and not its last: the mean
    /// length less what it placed, and at least one more packet of its mean packet length
    /// (it has not ended).
    fn remainder(&self, placed: u64, packets: u32) -> u64 {
        self.rest_after(placed)
            .max(placed / u64::from(packets.max(1)))
    }

    /// The expected bytes of a job from its packet `meta` on, this packet included, when its
    /// length is not known: only the packet's own when it is the job's last; two packets'
    /// worth (it and at least one more) while nothing is known of any job's length.
    fn ahead_of(&self, meta: &PacketMeta) -> u64 {
        if meta.last {
            return meta.len;
        }
        if self.mean().is_none() {
            return 2 * meta.len;
        }
        self.rest_after(u64::from(meta.seq) * meta.len)
            .max(meta.len)
    }

    /// The mean length less `before` bytes already placed (0 when nothing is known yet).
    fn rest_after(&self, before: u64) -> u64 {
        self.mean()
            .map_or(0, |m| (m - before as f64).max(0.0).round() as u64)
    }
}

#[derive(Debug)]
pub(crate) struct Balancer {
    first: usize,
    policy: Box<dyn Policy>,
    affinity: Affinity,
    /// The choose list. Task ids are small integers: a multiplicative hash is enough.
    choose: FxHashMap<TaskId, Binding>,
    /// Jobs with a packet that could not be placed in this scan (their later packets wait).
    blocked: FxHashSet<TaskId>,
    /// Waiting packets counted on the nodes they wait for during a scan (`pump`), kept to
    /// take the counts off at its end; empty between scans.
    counted: Vec<(usize, PacketMeta)>,
    /// What the cluster has seen of the lengths of bound jobs, for the committed work.
    lengths: ChainLengths,
}

/// The most room any node of the cluster has now.
fn max_room(status: &[NodeStatus]) -> u64 {
    status.iter().map(NodeStatus::room).max().unwrap_or(0)
}

/// Whether every node up holds at least as many packets as it has lanes: enough to keep it
/// busy, so that holding a tenant back leaves no node without work.
fn every_node_busy(status: &[NodeStatus]) -> bool {
    status
        .iter()
        .filter(|s| !s.is_down())
        .all(|s| s.queued_packets() >= s.lanes())
}

/// Whether some node is up with nothing queued (not even a packet in service).
fn any_idle(status: &[NodeStatus]) -> bool {
    status
        .iter()
        .any(|n| !n.is_down() && n.queued_packets() == 0)
}

/// The slices of the scheduler's node tables that belong to one cluster.
pub(crate) struct ClusterNodes<'a> {
    pub(crate) status: &'a mut [NodeStatus],
    pub(crate) queues: &'a mut [VecDeque<PacketMeta>],
}

impl Balancer {
    pub(crate) fn new(first: usize, policy: Box<dyn Policy>, affinity: Affinity) -> Self {
        Balancer {
            first,
            policy,
            affinity,
            choose: FxHashMap::default(),
            blocked: FxHashSet::default(),
            counted: Vec::new(),
            lengths: ChainLengths::default(),
        }
    }

    pub(crate) fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    pub(crate) fn choose_list_len(&self) -> usize {
        self.choose.len()
    }

    pub(crate) fn bound_node(&self, task: TaskId) -> Option<usize> {
        self.choose.get(&task).map(|b| b.node)
    }

    /// The node for `meta`: its job's bound node (strategy 2), or the policy's choice among
    /// the nodes with room (strategy 1), binding a dependent job (or, under a pinning policy,
    /// every job) to it. `Err` when the policy finds no node: the packet waits, for the node
    /// the policy names ([`Policy::waits_for`]), if it names one.
    fn target(
        &mut self,
        meta: &PacketMeta,
        status: &[NodeStatus],
        backlog: usize,
    ) -> Result<usize, Option<usize>> {
        if let Some(b) = self.choose.get(&meta.task) {
            return Ok(b.node);
        }
        let pins = self.policy.pins_jobs();
        let binds = pins || meta.is_dependent();
        let mut view = ClusterView::with_backlog(status, backlog);
        if binds {
            view = view.with_job_bytes(match meta.job_len() {
                Some(total) => remainder_from(meta, total),
                None => self.lengths.ahead_of(meta),
            });
        }
        let Some(n) = self.policy.select(&view, meta) else {
            return Err(self.policy.waits_for(&view, meta));
        };
        let fits = if pins {
            NodeStatus::can_ever_hold
        } else {
            NodeStatus::has_room
        };
        if n >= status.len() || !fits(&status[n], meta.len) {
            return Err(None);
        }
        if binds {
            let binding = Binding::new(n, meta);
            if binding.samples_length() {
                self.lengths.live += 1;
            }
            self.choose.insert(meta.task, binding);
        }
        Ok(n)
    }

    /// Places `packet` on node `n`, which has room for it.
    fn place<D>(
        &mut self,
        n: usize,
        packet: Packet<D>,
        status: &mut [NodeStatus],
        queues: &mut [VecDeque<PacketMeta>],
        out: &mut VecDeque<Dispatch<D>>,
    ) {
        let meta = packet.meta;
        status[n].enqueue(&meta);
        queues[n].push_back(meta);
        if let Some(b) = self.choose.get_mut(&meta.task) {
            b.in_flight += 1;
            b.placed += meta.len;
            b.packets += 1;
            b.ended |= meta.last;
            if b.samples_length() {
                self.lengths.live_bytes += meta.len;
            }
            let rest = b.expected_rest(&self.lengths);
            status[n].recommit(b.cmd, b.committed, rest);
            b.committed = rest;
        }
        self.policy.on_dispatch(&ClusterView::new(status), n, &meta);
        out.push_back(Dispatch {
            node: NodeId((self.first + n) as u32),
            packet,
        });
    }

    /// First come first served: places what it can from `queue`, scanning from the front;
    /// returns how many packets it placed.
    ///
    /// An unbound packet the policy makes wait holds the unbound packets behind it, unless the
    /// policy names the node it waits for ([`Policy::waits_for`]): then, for the rest of the
    /// scan, its work counts in that node's queued work, as an unbounded queue would hold it
    /// there, and the packets behind it are placed by the policy as they come, seeing it
    /// (docs/ALGORITHM.md §11.15). With queues of one packet, every packet waited for the busy
    /// fast node while the idle slow ones never worked.
    pub(crate) fn pump<D: Payload>(
        &mut self,
        queue: &mut VecDeque<Packet<D>>,
        nodes: ClusterNodes<'_>,
        out: &mut VecDeque<Dispatch<D>>,
    ) -> usize {
        let ClusterNodes { status, queues } = nodes;
        self.blocked.clear();
        let mut room = max_room(status);
        let mut unbound_stuck = false;
        let mut placed = 0;
        let mut i = 0;
        while i < queue.len() {
            // Every node full: nothing more can be placed now (jobs still get their pinned node
            // in queue order, only later).
            if room == 0 {
                break;
            }
            let meta = queue[i].meta;
            if self.blocked.contains(&meta.task) {
                i += 1;
                continue;
            }
            let unbound = !self.choose.contains_key(&meta.task);
            let target = if unbound && unbound_stuck {
                Err(None)
            } else {
                self.target(&meta, status, queue.len())
            };
            match target {
                Ok(n) if status[n].has_room(meta.len) => {
                    let Some(packet) = queue.remove(i) else {
                        break;
                    };
                    self.place(n, packet, status, queues, out);
                    placed += 1;
                    room = max_room(status);
                    continue;
                }
                Err(Some(w)) if unbound && w < status.len() => {
                    status[w].count_waiting(&meta);
                    self.counted.push((w, meta));
                }
                // No node: an unbound packet holds the unbound ones behind it.
                Err(_) => unbound_stuck |= unbound,
                Ok(_) => {}
            }
            self.blocked.insert(meta.task);
            i += 1;
        }
        for (w, meta) in self.counted.drain(..) {
            status[w].uncount_waiting(&meta);
        }
        placed
    }

    /// Fair admission: serves the jobs' own queues by deficit round robin over bytes (see
    /// `flows`), placing packets until no flow can send; returns how many it placed.
    ///
    /// A flow's turn ends when its deficit no longer covers its next packet, or when no node
    /// takes that packet now. The scan stops once every node is full, or a whole round of the
    /// ring placed nothing, or the front flow's packet is longer than any node's room while no
    /// node is idle (that flow keeps its turn).
    pub(crate) fn pump_fair<D: Payload>(
        &mut self,
        flows: &mut Flows<D>,
        nodes: ClusterNodes<'_>,
        out: &mut VecDeque<Dispatch<D>>,
    ) -> usize {
        let ClusterNodes { status, queues } = nodes;
        flows.end_pass();
        // Constant through the pass: a tenant that empties here still has packets placed.
        let active = flows.active_tenants();
        let mut placed = 0;
        let mut idle_turns = 0;
        // Only a placement changes the nodes' room.
        let mut room = max_room(status);
        // Under a pinning policy a job's packets wait for their own node only, so a node with
        // room may go unused while others are full; the scan goes on while any node has room.
        while room > 0 && idle_turns < flows.active() {
            let Some((_, meta)) = flows.head() else {
                break;
            };
            // No node takes a packet this long now, and none is idle: the nodes with room are
            // nearly full and busy. Stop here, the flow keeping its turn for when room frees,
            // rather than give every waiting job a turn that could only top up those queues
            // (a scan per completion, over every job waiting).
            if meta.len > room && !any_idle(status) {
                break;
            }
            let mut sent = false;
            let mut blocked = false;
            let mut holds_share = false;
            let mut next = Some(meta);
            while let Some(meta) = next {
                if !flows.head_affordable(&meta) {
                    // A turn begins with a quantum that covers its packet, and `Flows::head`
                    // closes a spent turn when its tenant's ends: one found spent here before
                    // it sent would end this pass on a turn that places nothing, with a node
                    // perhaps idle and no completion to come (docs/ALGORITHM.md §15.7).
                    debug_assert!(sent, "a flow's turn found spent at its start: {meta:?}");
                    break;
                }
                if active > 1 && every_node_busy(status) && flows.past_its_share(&meta) {
                    holds_share = true;
                    break;
                }
                match self.target(&meta, status, flows.len()) {
                    Ok(n) if status[n].has_room(meta.len) => {
                        let Some(packet) = flows.take_head() else {
                            break;
                        };
                        flows.placed(&packet.meta);
                        self.place(n, packet, status, queues, out);
                        placed += 1;
                        sent = true;
                        // The flow keeps its turn while it is at the front of the ring (it
                        // leaves the ring when it empties).
                        next = match flows.head() {
                            Some((_, m)) if m.task == meta.task => Some(m),
                            _ => None,
                        };
                    }
                    _ => {
                        blocked = true;
                        break;
                    }
                }
            }
            if holds_share {
                // The tenant waits, its turn and its flows' kept, until a packet of its own
                // leaves a node; the other tenants' packets go on.
                flows.set_aside();
                if sent {
                    idle_turns = 0;
                    room = max_room(status);
                }
                continue;
            }
            // A flow that emptied has left the ring already; one still at the front ends its
            // turn.
            if flows.head().is_some_and(|(t, _)| t == meta.task) {
                flows.end_turn(blocked);
            }
            if sent {
                idle_turns = 0;
                room = max_room(status);
            } else {
                idle_turns += 1;
            }
        }
        flows.end_pass();
        placed
    }

    /// Forgets every binding to node `local` (it failed): the jobs' next packets go wherever
    /// the policy says, and continue from the state store.
    pub(crate) fn unbind_node(&mut self, local: usize, status: &mut [NodeStatus]) {
        let mut gone = Vec::new();
        self.choose.retain(|_, b| {
            let keep = b.node != local;
            if !keep {
                gone.push(*b);
            }
            keep
        });
        for b in gone {
            self.release(b, status);
        }
    }

    /// Forgets `task`'s binding (the job failed for good).
    pub(crate) fn unbind(&mut self, task: TaskId, status: &mut [NodeStatus]) {
        if let Some(b) = self.choose.remove(&task) {
            self.release(b, status);
        }
    }

    /// Takes a removed binding's expected remainder off its node's committed work, and its
    /// placed bytes out of the live lengths.
    fn release(&mut self, b: Binding, status: &mut [NodeStatus]) {
        status[b.node].recommit(b.cmd, b.committed, 0);
        if b.samples_length() {
            self.lengths.live -= 1;
            self.lengths.live_bytes -= b.placed;
        }
    }

    /// Records that node `local` (an index within the cluster) completed `meta`.
    pub(crate) fn complete(&mut self, local: usize, meta: &PacketMeta, status: &mut [NodeStatus]) {
        status[local].dequeue(meta);
        let keep_until_last = self.policy.pins_jobs() || self.affinity == Affinity::Strict;
        if let Entry::Occupied(mut e) = self.choose.entry(meta.task) {
            let b = e.get_mut();
            if b.node == local {
                // Saturating: a malformed job (its id reused, or its modes mixed) may complete a
                // packet placed before its binding existed; that must not panic.
                b.in_flight = b.in_flight.saturating_sub(1);
                let idle = b.in_flight == 0;
                if meta.last || (idle && !keep_until_last) {
                    let b = e.remove();
                    self.release(b, status);
                    if meta.last && b.samples_length() {
                        self.lengths.done += 1;
                        self.lengths.done_bytes += b.placed;
                    }
                }
            }
        }
        self.policy
            .on_complete(&ClusterView::new(status), local, meta);
    }
}
