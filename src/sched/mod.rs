//! The scheduler core: docs/ALGORITHM.md §3's seven parts as a state machine with no threads, no clock
//! and no I/O.
//!
//! # Design note
//!
//! Two inputs drive it: [`Scheduler::arrive`] (a packet came in) and [`Scheduler::complete`]
//! (node X finished the packet at the head of its queue). After either, the core has moved every
//! packet it can, and [`Scheduler::next_dispatch`] hands out the placements, in the order they
//! were made: "packet P goes to node N now". The threaded runtime and the discrete-event
//! simulator both drive this one type, so what the simulator predicts is what the service does.
//!
//! The parts, and where they live:
//! 1. the job receive queue is the driver's: packets are offered in arrival order;
//! 2. the router, 3. the cluster queues and 7. the wait queue: the private module `router`;
//! 4. the balancer with its choose list: the private module `balancer`;
//! 5. the node queues: the core records what it placed on each node, in order, so that its
//!    status table ([`NodeStatus`]) is exact and `complete` knows what finished; the packets
//!    themselves travel with the [`Dispatch`] to the driver's node;
//! 6. the intermediate state store is the runtime's (the core only decides where packets go).
//!
//! # Backpressure
//!
//! A packet is accepted when its cluster queue has room (and none of that cluster's packets is
//! parked), or else when the wait queue has room. When both are full — every node is full, so
//! the cluster queue cannot drain, and the wait queue is full too — `arrive` returns
//! [`ArriveError::Full`] with the packet: the core never drops or duplicates a packet, and the
//! caller keeps it and offers it again after a `complete`. Offering packets of one job in order,
//! and re-offering a refused packet before any later packet of its cluster, keeps every job's
//! order.
//!
//! # Affinity
//!
//! The paper binds a dependent job to its node from its first packet until its last packet
//! completes ([`Affinity::Strict`]). [`Affinity::InFlight`] binds it only while one of its
//! packets is queued on or served by the node: between bursts the chaining state waits in the
//! state store and the job may move to a better node. This goes beyond the paper.

use smallvec::SmallVec;
use std::collections::VecDeque;
use std::ops::Range;

use crate::packet::{
    ClusterId, Cmd, NodeId, Packet, PacketMeta, Payload, TaskId, TenantId, UnitTimes,
};

mod balancer;
mod error;
mod flows;
pub mod policy;
mod router;
mod status;

pub use error::{ArriveError, ConfigError, SchedError};
pub use policy::{HhsAcdid, Paper, Policy, PolicySpec};
pub use status::{ClusterView, NodeStatus};

use balancer::{Balancer, ClusterNodes};
use flows::Flows;
use router::Router;

/// How packets wait for a node (docs/ALGORITHM.md §3 and §15.1).
///
/// The default here is the paper's, [`Admission::Fifo`], since the scheduler core and the
/// simulator reproduce the paper; the threaded service defaults to [`Admission::Fair`] (its
/// builder's `admission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// The paper's: first come first served through a bounded cluster queue and the shared
    /// wait queue. A chained job bound to a busy node can fill both with packets only that
    /// node may take, and every other job of the cluster waits behind them.
    #[default]
    Fifo,
    /// Every job has a queue of its own, and the balancer serves the jobs of a cluster by
    /// deficit round robin over bytes: a small job waits for at most one packet of each job
    /// ahead of it, chained or not. The core accepts every packet (`arrive` never answers
    /// `Full`); the driver bounds what it admits.
    Fair,
}

impl Admission {
    /// The name (`fifo`, `fair`).
    pub fn as_str(self) -> &'static str {
        match self {
            Admission::Fifo => "fifo",
            Admission::Fair => "fair",
        }
    }
}

impl std::fmt::Display for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Admission {
    type Err = crate::packet::ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fifo" => Ok(Admission::Fifo),
            "fair" | "drr" => Ok(Admission::Fair),
            _ => Err(crate::packet::ParseError::new("admission", s, "fifo, fair")),
        }
    }
}

/// How long a dependent job stays bound to its node (strategy 2).
///
/// The default here is the paper's, [`Affinity::Strict`], since the scheduler core and the
/// simulator reproduce the paper; the threaded service defaults to [`Affinity::InFlight`]
/// (its builder's `affinity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Affinity {
    /// The paper's rule: from the job's first placement until its last packet completes.
    #[default]
    Strict,
    /// Only while one of the job's packets is on the node; the job may move between bursts.
    InFlight,
}

impl Affinity {
    /// The name (`strict`, `in-flight`).
    pub fn as_str(self) -> &'static str {
        match self {
            Affinity::Strict => "strict",
            Affinity::InFlight => "in-flight",
        }
    }
}

impl std::fmt::Display for Affinity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Affinity {
    type Err = crate::packet::ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "strict" => Ok(Affinity::Strict),
            "in-flight" | "inflight" => Ok(Affinity::InFlight),
            _ => Err(crate::packet::ParseError::new(
                "affinity",
                s,
                "strict, in-flight",
            )),
        }
    }
}

/// One node: how fast it is and how much its queue holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeConfig {
    /// Time per unit-length packet, per command.
    pub unit_times: UnitTimes,
    /// Queue capacity in bytes (the packet in service included).
    pub capacity: u64,
    /// Queue capacity in packets, whatever their size (the packet in service included); at
    /// least 1. The paper's model counts bytes only ([`NodeConfig::new`] leaves this
    /// unbounded); the service bounds it so that empty packets meet a bound too.
    pub slots: u32,
    /// Lanes: how many serial packets of different jobs the node serves at once
    /// (docs/ALGORITHM.md §15.3); at least 1. The paper's node serves one packet at a time
    /// ([`NodeConfig::new`] leaves this 1); the service gives each AES node its lanes.
    pub lanes: u32,
}

impl NodeConfig {
    /// A node with these unit times and a queue of `capacity` bytes, with no bound on its
    /// number of packets (the paper's model).
    pub fn new(unit_times: UnitTimes, capacity: u64) -> Self {
        NodeConfig {
            unit_times,
            capacity,
            slots: u32::MAX,
            lanes: 1,
        }
    }

    /// The same node with at most `slots` packets queued at once.
    pub fn with_slots(mut self, slots: u32) -> Self {
        self.slots = slots;
        self
    }

    /// The same node serving up to `lanes` serial packets at once (docs/ALGORITHM.md §15.3).
    pub fn with_lanes(mut self, lanes: u32) -> Self {
        self.lanes = lanes;
        self
    }
}

/// One cluster: its nodes and its queue.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// The nodes, at least one.
    pub nodes: Vec<NodeConfig>,
    /// Cluster queue length, in packets (at least 1).
    pub queue_len: usize,
    /// The largest packet the cluster must accept; every node's capacity must hold it.
    pub max_packet: u64,
}

/// The whole core's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedConfig {
    /// The clusters, by [`ClusterId`] order.
    pub clusters: Vec<ClusterConfig>,
    /// Wait queue length in packets, shared by all clusters (0: no wait queue).
    pub wait_queue_len: usize,
    /// How long dependent jobs stay bound.
    pub affinity: Affinity,
    /// The packet length a unit time refers to (service time = unit time × len / unit_len).
    pub unit_len: u64,
    /// How packets wait for a node: the paper's first come first served, or fair.
    pub admission: Admission,
}

/// A placement: `packet` goes to `node` now.
#[derive(Debug)]
pub struct Dispatch<D> {
    /// The node chosen.
    pub node: NodeId,
    /// The packet, with its data.
    pub packet: Packet<D>,
}

/// The scheduler core. See the module docs.
#[derive(Debug)]
pub struct Scheduler<D> {
    admission: Admission,
    router: Router<D>,
    /// Per cluster, under fair admission: the jobs' own queues.
    flows: Vec<Flows<D>>,
    balancers: Vec<Balancer>,
    cluster_nodes: Vec<Range<usize>>,
    node_cluster: Vec<ClusterId>,
    status: Vec<NodeStatus>,
    node_queues: Vec<VecDeque<PacketMeta>>,
    out: VecDeque<Dispatch<D>>,
    /// Clusters that lost a node since the last [`requeue`](Scheduler::requeue): their jobs
    /// bound there were unbound, and may go elsewhere once the requeue settles them.
    unsettled: Vec<ClusterId>,
}

impl<D: Payload> Scheduler<D> {
    /// A core whose clusters each run a fresh instance of `policy`.
    ///
    /// # Errors
    /// As [`Scheduler::with_policies`], and [`ConfigError::BadWeights`] for a bad `policy`.
    pub fn new(config: SchedConfig, policy: &PolicySpec) -> Result<Self, ConfigError> {
        let policies = config
            .clusters
            .iter()
            .map(|_| policy.build())
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_parts(config, policies)
    }

    /// A core whose cluster `c` runs `make_policy(c)` (for user-defined policies).
    ///
    /// # Errors
    /// [`ConfigError`] for no clusters, a cluster without nodes or with a zero-length queue, a
    /// node capacity below the cluster's largest packet, or a unit time that is not finite and
    /// positive.
    pub fn with_policies(
        config: SchedConfig,
        make_policy: impl FnMut(ClusterId) -> Box<dyn Policy>,
    ) -> Result<Self, ConfigError> {
        let policies = (0..config.clusters.len() as u32)
            .map(ClusterId)
            .map(make_policy)
            .collect();
        Self::from_parts(config, policies)
    }

    fn from_parts(
        config: SchedConfig,
        policies: Vec<Box<dyn Policy>>,
    ) -> Result<Self, ConfigError> {
        if config.clusters.is_empty() {
            return Err(ConfigError::NoClusters);
        }
        let unit_len = config.unit_len.max(1);
        let mut balancers = Vec::new();
        let mut cluster_nodes = Vec::new();
        let mut node_cluster = Vec::new();
        let mut status = Vec::new();
        for (c, cluster) in config.clusters.iter().enumerate() {
            let id = ClusterId(c as u32);
            if cluster.nodes.is_empty() {
                return Err(ConfigError::EmptyCluster(id));
            }
            if cluster.queue_len == 0 {
                return Err(ConfigError::ZeroClusterQueue(id));
            }
            let first = status.len();
            for node in &cluster.nodes {
                let nid = NodeId(status.len() as u32);
                if node.capacity < cluster.max_packet.max(1) {
                    return Err(ConfigError::CapacityTooSmall {
                        node: nid,
                        capacity: node.capacity,
                        packet: cluster.max_packet.max(1),
                    });
                }
                if let Some(&value) = node
                    .unit_times
                    .0
                    .iter()
                    .find(|t| !(t.is_finite() && **t > 0.0))
                {
                    return Err(ConfigError::BadUnitTime { node: nid, value });
                }
                status.push(
                    NodeStatus::new(node.unit_times, node.capacity, unit_len)
                        .with_slots(node.slots)
                        .with_lanes(node.lanes),
                );
                node_cluster.push(id);
            }
            cluster_nodes.push(first..status.len());
        }
        for (range, policy) in cluster_nodes.iter().zip(policies) {
            balancers.push(Balancer::new(range.start, policy, config.affinity));
        }
        let queue_caps = config.clusters.iter().map(|c| c.queue_len).collect();
        let flows = config
            .clusters
            .iter()
            .map(|c| Flows::new(c.max_packet))
            .collect();
        Ok(Scheduler {
            admission: config.admission,
            router: Router::new(queue_caps, config.wait_queue_len),
            flows,
            balancers,
            cluster_nodes,
            node_cluster,
            node_queues: vec![VecDeque::new(); status.len()],
            status,
            out: VecDeque::new(),
            unsettled: Vec::new(),
        })
    }

    /// A packet arrives: route it, then place whatever can be placed.
    ///
    /// # Errors
    /// The packet comes back in [`ArriveError::Full`] when its cluster queue and the wait queue
    /// are full, [`ArriveError::UnknownCluster`] for a cluster that does not exist, and
    /// [`ArriveError::TooLarge`] when no node of the cluster could ever hold it.
    pub fn arrive(&mut self, packet: Packet<D>) -> Result<(), ArriveError<D>> {
        let c = self.enter(packet)?;
        self.settle(c);
        Ok(())
    }

    /// Packets arrive together, taken from the front of `queue` in order: as
    /// [`arrive`](Self::arrive) for each, except that what can be placed is placed after the
    /// last of them rather than after each (one walk for a whole job's packets, as
    /// [`complete_many`](Self::complete_many) does for completions). A packet whose cluster is
    /// full after a walk is left at the front of `queue`, and nothing after it arrives; a
    /// packet refused for any other reason goes to `refused`. Returns how many arrived.
    pub fn arrive_many(
        &mut self,
        queue: &mut VecDeque<Packet<D>>,
        mut refused: impl FnMut(ArriveError<D>),
    ) -> usize {
        let mut arrived = 0;
        let mut touched: SmallVec<[ClusterId; 2]> = SmallVec::new();
        while let Some(packet) = queue.pop_front() {
            let entered = match self.enter(packet) {
                // A walk may make room: what single arrivals would have walked already.
                Err(ArriveError::Full(packet)) => {
                    self.settle(packet.meta.cluster);
                    self.enter(packet)
                }
                other => other,
            };
            match entered {
                Ok(c) => {
                    arrived += 1;
                    if !touched.contains(&c) {
                        touched.push(c);
                    }
                }
                Err(ArriveError::Full(packet)) => {
                    queue.push_front(packet);
                    break;
                }
                Err(other) => refused(other),
            }
        }
        for c in touched {
            self.settle(c);
        }
        arrived
    }

    /// A packet enters its cluster (its cluster queue, or its job's own queue) without being
    /// placed; returns the cluster.
    fn enter(&mut self, packet: Packet<D>) -> Result<ClusterId, ArriveError<D>> {
        let c = packet.meta.cluster;
        let Some(range) = self.cluster_nodes.get(c.index()) else {
            return Err(ArriveError::UnknownCluster(packet));
        };
        if !self.status[range.clone()]
            .iter()
            .any(|n| n.can_ever_hold(packet.meta.len))
        {
            return Err(ArriveError::TooLarge(packet));
        }
        match self.admission {
            Admission::Fifo => self.router.route(packet)?,
            Admission::Fair => self.flows[c.index()].push(packet),
        }
        Ok(c)
    }

    /// Node `node` finished the packet at the head of its queue (nodes serve first come first
    /// served). Updates the status table and the choose list, places what the freed room
    /// allows, and returns the finished packet's header.
    ///
    /// # Errors
    /// [`SchedError::UnknownNode`], or [`SchedError::NodeIdle`] if nothing is queued on `node`.
    pub fn complete(&mut self, node: NodeId) -> Result<PacketMeta, SchedError> {
        let meta = self.finish(node)?;
        self.settle(self.node_cluster[node.index()]);
        Ok(meta)
    }

    /// Node `node` finished the `count` packets at the head of its queue, reported together:
    /// as `count` calls of [`complete`](Self::complete), except that what the freed room allows
    /// is placed once, after the last.
    ///
    /// # Errors
    /// As [`complete`](Self::complete); on [`SchedError::NodeIdle`] the packets before it are
    /// complete, and placed for.
    pub fn complete_many(&mut self, node: NodeId, count: usize) -> Result<(), SchedError> {
        let mut done = 0;
        let result = (0..count).try_for_each(|_| self.finish(node).map(|_| done += 1));
        if done > 0 {
            self.settle(self.node_cluster[node.index()]);
        }
        result
    }

    /// Takes the packet at the head of `node`'s queue off it, as finished, without placing
    /// anything.
    fn finish(&mut self, node: NodeId) -> Result<PacketMeta, SchedError> {
        let n = node.index();
        let queue = self
            .node_queues
            .get_mut(n)
            .ok_or(SchedError::UnknownNode(node))?;
        let meta = queue.pop_front().ok_or(SchedError::NodeIdle(node))?;
        let c = self.node_cluster[n];
        let range = self.cluster_nodes[c.index()].clone();
        self.balancers[c.index()].complete(n - range.start, &meta, &mut self.status[range]);
        self.flows[c.index()].released(&meta);
        Ok(meta)
    }

    /// The next placement made and not yet collected, oldest first.
    pub fn next_dispatch(&mut self) -> Option<Dispatch<D>> {
        self.out.pop_front()
    }

    /// All placements made and not yet collected, oldest first.
    pub fn dispatches(&mut self) -> impl Iterator<Item = Dispatch<D>> + '_ {
        self.out.drain(..)
    }

    /// Node `node` failed: it takes no more packets until [`node_up`](Self::node_up); the
    /// packets placed on it and not complete are taken off it (returned, oldest first, so the
    /// driver can match them with the packets it holds for the node); the jobs bound to it are
    /// unbound, so their next packets go to other nodes and continue from the state store.
    /// Offer the packets that did not run back with [`requeue`](Self::requeue), even none: the
    /// requeue is also when the unbound jobs are placed again (docs/ALGORITHM.md §15.2).
    ///
    /// # Errors
    /// [`SchedError::UnknownNode`].
    pub fn node_down(&mut self, node: NodeId) -> Result<Vec<PacketMeta>, SchedError> {
        let n = node.index();
        if n >= self.status.len() {
            return Err(SchedError::UnknownNode(node));
        }
        let c = self.node_cluster[n];
        let first = self.cluster_nodes[c.index()].start;
        self.status[n].down = true;
        let taken: Vec<PacketMeta> = self.node_queues[n].drain(..).collect();
        for meta in &taken {
            self.status[n].forget(meta);
            self.flows[c.index()].released(meta);
        }
        let range = self.cluster_nodes[c.index()].clone();
        self.balancers[c.index()].unbind_node(n - first, &mut self.status[range]);
        // Settled by the requeue that follows, not here: the packets taken off the node go in
        // front of the ones waiting, and a chained job's next packet must not overtake them.
        self.unsettled.push(c);
        Ok(taken)
    }

    /// Node `node` is back: it takes packets again.
    ///
    /// # Errors
    /// [`SchedError::UnknownNode`].
    pub fn node_up(&mut self, node: NodeId) -> Result<(), SchedError> {
        let n = node.index();
        let s = self
            .status
            .get_mut(n)
            .ok_or(SchedError::UnknownNode(node))?;
        s.down = false;
        let c = self.node_cluster[n];
        self.settle(c);
        Ok(())
    }

    /// Whether every node of cluster `c` is down.
    pub fn cluster_down(&self, c: ClusterId) -> bool {
        self.status[self.cluster_nodes[c.index()].clone()]
            .iter()
            .all(NodeStatus::is_down)
    }

    /// Puts packets taken off a failed node back in front of the waiting ones, in the order
    /// given (a job's packets in order), and places what can be placed.
    pub fn requeue(&mut self, packets: Vec<Packet<D>>) {
        // The clusters of the packets, and those that lost a node: even with nothing to put
        // back (the failed node held only its running packet), the jobs that were bound there
        // may now go to other nodes, and an idle node would otherwise wait for an arrival.
        let mut clusters: Vec<ClusterId> = std::mem::take(&mut self.unsettled);
        clusters.extend(packets.iter().map(|p| p.meta.cluster));
        clusters.sort_unstable();
        clusters.dedup();
        match self.admission {
            Admission::Fair => {
                let mut by_cluster: Vec<Vec<Packet<D>>> =
                    (0..self.num_clusters()).map(|_| Vec::new()).collect();
                for p in packets {
                    if let Some(v) = by_cluster.get_mut(p.meta.cluster.index()) {
                        v.push(p);
                    }
                }
                for (c, v) in by_cluster.into_iter().enumerate() {
                    if !v.is_empty() {
                        self.flows[c].push_front_all(v);
                    }
                }
            }
            Admission::Fifo => {
                for p in packets.into_iter().rev() {
                    let c = p.meta.cluster;
                    if c.index() < self.num_clusters() {
                        self.router.queue_mut(c).push_front(p);
                    }
                }
            }
        }
        for c in clusters {
            if c.index() < self.num_clusters() {
                self.settle(c);
            }
        }
    }

    /// Takes every packet of cluster `c` that waits for a node out of the core (every node of
    /// the cluster is down, so the driver fails their jobs instead of letting them wait).
    pub fn drain_waiting(&mut self, c: ClusterId) -> Vec<Packet<D>> {
        let mut out: Vec<Packet<D>> = self.router.queue_mut(c).drain(..).collect();
        out.extend(self.router.take_waiting(c));
        out.extend(self.flows[c.index()].drain());
        for p in &out {
            let range = self.cluster_nodes[c.index()].clone();
            self.balancers[c.index()].unbind(p.meta.task, &mut self.status[range]);
        }
        out
    }

    /// Updates a node's unit time for `cmd` (the runtime refines them from measured service
    /// times). Non-finite or non-positive values are ignored.
    ///
    /// # Errors
    /// [`SchedError::UnknownNode`].
    pub fn set_unit_time(&mut self, node: NodeId, cmd: Cmd, t: f64) -> Result<(), SchedError> {
        let s = self
            .status
            .get_mut(node.index())
            .ok_or(SchedError::UnknownNode(node))?;
        if t.is_finite() && t > 0.0 {
            s.unit_times.set(cmd, t);
        }
        Ok(())
    }

    /// Sets a tenant's weight under fair admission (docs/ALGORITHM.md §15.7): while tenants
    /// are backlogged, each is served bytes in proportion to its weight. Every tenant weighs 1
    /// until set; the packet header names the tenant ([`PacketMeta::tenant`]). Weights take
    /// effect at the tenant's next turn; first come first served admission ignores them.
    ///
    /// # Errors
    /// [`SchedError::ZeroWeight`] for a weight of 0.
    pub fn set_tenant_weight(&mut self, tenant: TenantId, weight: u32) -> Result<(), SchedError> {
        if weight == 0 {
            return Err(SchedError::ZeroWeight(tenant));
        }
        for flows in &mut self.flows {
            flows.set_weight(tenant, weight);
        }
        Ok(())
    }

    /// Under fair admission, adds `bytes` to `tenant`'s deficit in cluster `c`'s admission
    /// (now, or at its next packet if none waits): its turns place that much more before the
    /// other tenants' come (docs/ALGORITHM.md §15.7, long jobs), ahead of the tenants whose
    /// grants have a lower `rank` (the credit the tenant has left). Nothing under first come
    /// first served, or for a cluster not here.
    pub(crate) fn grant_tenant(&mut self, c: ClusterId, tenant: TenantId, bytes: u64, rank: i64) {
        if self.admission == Admission::Fair {
            if let Some(flows) = self.flows.get_mut(c.index()) {
                flows.grant(tenant, bytes, rank);
            }
        }
    }

    /// `tenant`'s weight in cluster `c`'s admission (1 until set, and for a cluster not here).
    pub fn tenant_weight(&self, c: ClusterId, tenant: TenantId) -> u64 {
        self.flows.get(c.index()).map_or(1, |f| f.weight(tenant))
    }

    /// Moves packets until nothing more moves: balancer, then refill from the wait queue.
    fn settle(&mut self, c: ClusterId) {
        let range = self.cluster_nodes[c.index()].clone();
        if self.admission == Admission::Fair {
            let nodes = ClusterNodes {
                status: &mut self.status[range.clone()],
                queues: &mut self.node_queues[range],
            };
            self.balancers[c.index()].pump_fair(&mut self.flows[c.index()], nodes, &mut self.out);
            return;
        }
        loop {
            let nodes = ClusterNodes {
                status: &mut self.status[range.clone()],
                queues: &mut self.node_queues[range.clone()],
            };
            self.balancers[c.index()].pump(self.router.queue_mut(c), nodes, &mut self.out);
            if !self.router.refill(c) {
                break;
            }
        }
    }
}

impl<D> Scheduler<D> {
    /// Number of clusters.
    pub fn num_clusters(&self) -> usize {
        self.cluster_nodes.len()
    }

    /// Number of nodes, over all clusters.
    pub fn num_nodes(&self) -> usize {
        self.status.len()
    }

    /// The nodes of cluster `c`, as a range of [`NodeId`] indices.
    pub fn cluster_nodes(&self, c: ClusterId) -> Range<usize> {
        self.cluster_nodes[c.index()].clone()
    }

    /// The cluster a node belongs to.
    pub fn cluster_of(&self, node: NodeId) -> ClusterId {
        self.node_cluster[node.index()]
    }

    /// A node's row in its cluster's status table.
    pub fn node(&self, node: NodeId) -> &NodeStatus {
        &self.status[node.index()]
    }

    /// The status table of cluster `c`, as policies see it.
    pub fn view(&self, c: ClusterId) -> ClusterView<'_> {
        ClusterView::new(&self.status[self.cluster_nodes[c.index()].clone()])
    }

    /// The policy running in cluster `c`.
    pub fn policy(&self, c: ClusterId) -> &dyn Policy {
        self.balancers[c.index()].policy()
    }

    /// How packets wait for a node.
    pub fn admission(&self) -> Admission {
        self.admission
    }

    /// Packets of cluster `c` waiting for a node: in its cluster queue (first come first
    /// served), or in its jobs' own queues (fair admission).
    pub fn cluster_queue_len(&self, c: ClusterId) -> usize {
        self.router.queue(c).len() + self.flows[c.index()].len()
    }

    /// Jobs of cluster `c` with packets waiting in their own queues (fair admission; 0 under
    /// first come first served).
    pub fn waiting_jobs(&self, c: ClusterId) -> usize {
        self.flows[c.index()].active()
    }

    /// Cluster `c`'s queue capacity in packets.
    pub fn cluster_queue_cap(&self, c: ClusterId) -> usize {
        self.router.queue_cap(c)
    }

    /// Packets of cluster `c` parked in the wait queue.
    pub fn wait_queue_len(&self, c: ClusterId) -> usize {
        self.router.waiting(c).len()
    }

    /// Packets parked in the wait queue, all clusters together.
    pub fn wait_queue_total(&self) -> usize {
        self.router.waiting_len()
    }

    /// The wait queue's capacity in packets.
    pub fn wait_queue_cap(&self) -> usize {
        self.router.wait_cap()
    }

    /// Entries in cluster `c`'s choose list.
    pub fn choose_list_len(&self, c: ClusterId) -> usize {
        self.balancers[c.index()].choose_list_len()
    }

    /// The node `task` is bound to in cluster `c`, if any.
    pub fn bound_node(&self, c: ClusterId, task: TaskId) -> Option<NodeId> {
        let first = self.cluster_nodes[c.index()].start;
        self.balancers[c.index()]
            .bound_node(task)
            .map(|n| NodeId((first + n) as u32))
    }

    /// The headers of the packets placed on `node` and not yet complete, in service order.
    pub fn node_queue(&self, node: NodeId) -> impl ExactSizeIterator<Item = &PacketMeta> {
        self.node_queues[node.index()].iter()
    }

    /// Whether no packet is anywhere in the core: queues, wait queue, nodes, or uncollected
    /// dispatches.
    pub fn is_idle(&self) -> bool {
        self.out.is_empty()
            && self.router.waiting_len() == 0
            && (0..self.num_clusters()).all(|c| self.cluster_queue_len(ClusterId(c as u32)) == 0)
            && self.node_queues.iter().all(VecDeque::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_and_affinity_names_round_trip() {
        for a in [Admission::Fifo, Admission::Fair] {
            assert_eq!(a.to_string().parse::<Admission>().unwrap(), a);
        }
        for a in [Affinity::Strict, Affinity::InFlight] {
            assert_eq!(a.to_string().parse::<Affinity>().unwrap(), a);
        }
        assert_eq!(" InFlight".parse::<Affinity>().unwrap(), Affinity::InFlight);
        let err = "loose".parse::<Affinity>().unwrap_err().to_string();
        assert!(err.contains("strict, in-flight"), "{err}");
    }
}
