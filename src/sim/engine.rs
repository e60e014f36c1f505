//! The discrete-event loop: the scheduler core in virtual time.
//!
//! Events are packet arrivals (from the trace) and service completions, ordered by
//! `(time, sequence number)`: arrivals take sequence numbers in trace order, completions after
//! them in the order they are scheduled, so simultaneous events always resolve the same way and
//! a run is fully determined by its inputs. Arriving packets enter the job receive queue and are
//! offered to the core in order (a packet the core refuses waits there, and so does every later
//! packet). A node serves its queue first come first served; a packet takes
//! `unit_time(cmd) × length / unit_len`. A node with L > 1 lanes serves, when its front packet
//! is dependent, the longest prefix of its queue made of dependent packets of different jobs,
//! up to L, as one lane set that takes as long as its longest packet and completes together
//! (docs/ALGORITHM.md §15.3); with one lane this is the paper's node.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use crate::packet::{ClusterId, NodeId, Packet, PacketMeta, Payload, TaskId, TenantId};
use crate::sched::{
    Admission, Affinity, ClusterConfig, NodeConfig, Policy, PolicySpec, SchedConfig, Scheduler,
};
use crate::sched::{ArriveError, ConfigError};
use crate::sim::model::NodeModel;
use crate::sim::trace::Trace;

/// The simulated cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The nodes.
    pub nodes: Vec<NodeModel>,
    /// The cluster queue's length in packets.
    pub cluster_queue_len: usize,
    /// How long dependent jobs stay bound (the paper: [`Affinity::Strict`]).
    pub affinity: Affinity,
    /// The length a unit time refers to.
    pub unit_len: u64,
    /// How packets wait for a node (the paper: [`Admission::Fifo`]).
    pub admission: Admission,
    /// Whether every packet's header carries its job's whole length
    /// ([`PacketMeta::job_bytes`]), as the service's one-shot jobs do; the paper's online
    /// model (the default) does not know it.
    pub known_lengths: bool,
}

impl SimConfig {
    /// A cluster of `nodes` with the paper's settings: strict affinity, first come first
    /// served admission, unit length 1, and a cluster queue of 32 packets.
    pub fn new(nodes: Vec<NodeModel>) -> Self {
        SimConfig {
            nodes,
            cluster_queue_len: 32,
            affinity: Affinity::Strict,
            unit_len: 1,
            admission: Admission::Fifo,
            known_lengths: false,
        }
    }

    /// The same settings, with every job's length known to the policies or not.
    pub fn with_known_lengths(mut self, known: bool) -> Self {
        self.known_lengths = known;
        self
    }

    /// The same settings with `admission`.
    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }
}

/// Where and when one packet ran.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Placement {
    /// The job.
    pub task: u64,
    /// The packet's sequence number.
    pub seq: u32,
    /// The node (index within the cluster).
    pub node: usize,
    /// When it arrived.
    pub arrival: f64,
    /// When the node started it.
    pub start: f64,
    /// When the node finished it.
    pub end: f64,
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SimResult {
    /// The policy's name.
    pub policy: String,
    /// When the last packet completed (from time 0).
    pub makespan: f64,
    /// Every packet, in completion order.
    pub placements: Vec<Placement>,
    /// Packets each node served.
    pub node_packets: Vec<u64>,
    /// Time each node spent serving.
    pub node_busy: Vec<f64>,
}

impl SimResult {
    /// Packet latencies (completion − arrival), in completion order.
    pub fn latencies(&self) -> impl Iterator<Item = f64> + '_ {
        self.placements.iter().map(|p| p.end - p.arrival)
    }

    /// Mean packet latency.
    pub fn mean_latency(&self) -> f64 {
        let n = self.placements.len().max(1) as f64;
        self.latencies().sum::<f64>() / n
    }

    /// The 99th percentile of packet latency (nearest rank).
    pub fn p99_latency(&self) -> f64 {
        let mut l: Vec<f64> = self.latencies().collect();
        if l.is_empty() {
            return 0.0;
        }
        l.sort_by(f64::total_cmp);
        let rank = ((0.99 * l.len() as f64).ceil() as usize).clamp(1, l.len());
        l[rank - 1]
    }

    /// Each node's share of the work: its busy time over all nodes' busy time.
    pub fn shares(&self) -> Vec<f64> {
        let total: f64 = self.node_busy.iter().sum();
        self.node_busy
            .iter()
            .map(|b| if total > 0.0 { b / total } else { 0.0 })
            .collect()
    }
}

/// The simulator's payload: a length, and the packet's arrival time for latency.
#[derive(Debug, Clone, Copy)]
struct SimPacket {
    len: u64,
    arrival: f64,
}

impl Payload for SimPacket {
    fn byte_len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum EventKind {
    Arrival(usize),
    Completion(usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Event {
    time: f64,
    seq: u64,
    kind: EventKind,
}

impl Eq for Event {}

impl Ord for Event {
    /// Reversed, so the max-heap pops the earliest `(time, seq)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Runs `trace` on `config` under `policy`.
///
/// # Errors
/// [`ConfigError`] if the cluster is refused (no nodes, a capacity below the longest packet, a
/// bad unit time) or the policy's parameters are out of range.
pub fn simulate(
    trace: &Trace,
    config: &SimConfig,
    policy: &PolicySpec,
) -> Result<SimResult, ConfigError> {
    simulate_with(trace, config, policy.build()?)
}

/// Which tenant each job of a trace belongs to, and the tenants' weights: under fair
/// admission the core shares the nodes between tenants by weight, then between each tenant's
/// jobs (docs/ALGORITHM.md §15.7). A job not named belongs to [`TenantId::DEFAULT`]; a tenant
/// not named weighs 1.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tenancy {
    /// The tenant of each job, by its trace task id.
    pub tenant_of: BTreeMap<u64, TenantId>,
    /// The tenants' weights (at least 1).
    pub weights: BTreeMap<TenantId, u32>,
}

/// Runs `trace` on `config` under `policy`, its jobs under the tenants of `tenancy`.
///
/// # Errors
/// As [`simulate`], and [`ConfigError::ZeroTenantWeight`] for a weight of 0.
pub fn simulate_tenants(
    trace: &Trace,
    config: &SimConfig,
    policy: &PolicySpec,
    tenancy: &Tenancy,
) -> Result<SimResult, ConfigError> {
    run(trace, config, policy.build()?, tenancy)
}

/// Runs `trace` on `config` under a policy instance (for policies of your own).
///
/// # Errors
/// As [`simulate`].
pub fn simulate_with(
    trace: &Trace,
    config: &SimConfig,
    policy: Box<dyn Policy>,
) -> Result<SimResult, ConfigError> {
    run(trace, config, policy, &Tenancy::default())
}

fn run(
    trace: &Trace,
    config: &SimConfig,
    policy: Box<dyn Policy>,
    tenancy: &Tenancy,
) -> Result<SimResult, ConfigError> {
    let name = policy.name().to_owned();
    let sched_config = SchedConfig {
        admission: config.admission,
        clusters: vec![ClusterConfig {
            nodes: config
                .nodes
                .iter()
                .map(|n| NodeConfig::new(n.unit_times, n.capacity).with_lanes(n.lanes))
                .collect(),
            queue_len: config.cluster_queue_len,
            max_packet: trace.max_length(),
        }],
        wait_queue_len: 0,
        affinity: config.affinity,
        unit_len: config.unit_len,
    };
    let mut policy = Some(policy);
    let mut sched =
        Scheduler::with_policies(sched_config, |_| policy.take().expect("one cluster"))?;
    for (&tenant, &weight) in &tenancy.weights {
        sched
            .set_tenant_weight(tenant, weight)
            .map_err(|_| ConfigError::ZeroTenantWeight(tenant))?;
    }
    let mut sim = Sim {
        sched,
        nodes: config.nodes.clone(),
        unit_len: config.unit_len,
        queues: vec![VecDeque::new(); config.nodes.len()],
        serving: vec![0; config.nodes.len()],
        events: BinaryHeap::with_capacity(trace.len() * 2),
        next_seq: 0,
        receive: VecDeque::new(),
        result: SimResult {
            policy: name,
            makespan: 0.0,
            placements: Vec::with_capacity(trace.len()),
            node_packets: vec![0; config.nodes.len()],
            node_busy: vec![0.0; config.nodes.len()],
        },
    };
    for i in 0..trace.len() {
        sim.push(trace.records()[i].arrival, EventKind::Arrival(i));
    }
    let job_bytes = config.known_lengths.then(|| job_lengths(trace));
    while let Some(ev) = sim.events.pop() {
        match ev.kind {
            EventKind::Arrival(i) => {
                let r = &trace.records()[i];
                sim.receive.push_back(Packet::new(
                    PacketMeta::new(TaskId(r.task), r.cmd, ClusterId(0))
                        .dependent(r.dependent)
                        .at(r.seq, r.last)
                        .job_bytes(job_bytes.as_ref().map(|j| j[&r.task]))
                        .tenant(tenancy.tenant_of.get(&r.task).copied().unwrap_or_default()),
                    SimPacket {
                        len: r.length,
                        arrival: r.arrival,
                    },
                ));
                sim.offer(ev.time);
            }
            EventKind::Completion(n) => sim.complete(n, ev.time),
        }
    }
    Ok(sim.result)
}

/// Every job's whole length: the sum of its packets' lengths.
fn job_lengths(trace: &Trace) -> HashMap<u64, u64> {
    let mut lengths = HashMap::new();
    for r in trace.records() {
        *lengths.entry(r.task).or_insert(0) += r.length;
    }
    lengths
}

struct Sim {
    sched: Scheduler<SimPacket>,
    nodes: Vec<NodeModel>,
    unit_len: u64,
    /// What each node holds, in service order; the first `serving` are in service.
    queues: Vec<VecDeque<(Packet<SimPacket>, f64)>>,
    /// Per node, the packets of the lane set in service (0: idle).
    serving: Vec<usize>,
    events: BinaryHeap<Event>,
    next_seq: u64,
    receive: VecDeque<Packet<SimPacket>>,
    result: SimResult,
}

impl Sim {
    fn push(&mut self, time: f64, kind: EventKind) {
        self.events.push(Event {
            time,
            seq: self.next_seq,
            kind,
        });
        self.next_seq += 1;
    }

    /// Offers the receive queue to the core until it pushes back, then starts idle nodes.
    fn offer(&mut self, now: f64) {
        while let Some(p) = self.receive.pop_front() {
            match self.sched.arrive(p) {
                Ok(()) => {}
                Err(ArriveError::Full(p)) => {
                    self.receive.push_front(p);
                    break;
                }
                // The capacity check at configuration covers the longest packet, and there is
                // one cluster: neither refusal can happen.
                Err(e) => unreachable!("simulator packet refused: {e}"),
            }
        }
        while let Some(d) = self.sched.next_dispatch() {
            self.queues[d.node.index()].push_back((d.packet, 0.0));
        }
        for n in 0..self.nodes.len() {
            self.start(n, now);
        }
    }

    /// Starts node `n`'s next lane set if it is idle: its front packet, and while the front is
    /// dependent and the node has lanes left, the dependent packets of other jobs that follow
    /// it. The set takes as long as its longest packet. It never waits to fill.
    fn start(&mut self, n: usize, now: f64) {
        if self.serving[n] > 0 {
            return;
        }
        let queue = &mut self.queues[n];
        let Some((first, _)) = queue.front() else {
            return;
        };
        let lanes = if first.meta.is_dependent() {
            self.nodes[n].lanes.max(1) as usize
        } else {
            1
        };
        let mut set = 1;
        while set < lanes {
            match queue.get(set) {
                Some((p, _))
                    if p.meta.is_dependent()
                        && queue
                            .iter()
                            .take(set)
                            .all(|(q, _)| q.meta.task != p.meta.task) =>
                {
                    set += 1;
                }
                _ => break,
            }
        }
        let mut t: f64 = 0.0;
        for (p, start) in queue.iter_mut().take(set) {
            *start = now;
            t = t.max(self.nodes[n].service_time(p.meta.cmd, p.meta.len, self.unit_len));
        }
        self.serving[n] = set;
        self.push(now + t, EventKind::Completion(n));
    }

    /// Node `n`'s lane set is done: every packet of it completes, in queue order.
    fn complete(&mut self, n: usize, now: f64) {
        let set = std::mem::take(&mut self.serving[n]);
        let mut set_start = now;
        for _ in 0..set {
            let meta = self
                .sched
                .complete(NodeId(n as u32))
                .expect("the simulator completes only packets it started");
            let (p, start) = self.queues[n]
                .pop_front()
                .expect("a node in service has its packets");
            debug_assert_eq!(meta, p.meta);
            self.result.placements.push(Placement {
                task: meta.task.0,
                seq: meta.seq,
                node: n,
                arrival: p.data.arrival,
                start,
                end: now,
            });
            self.result.node_packets[n] += 1;
            set_start = start;
        }
        self.result.node_busy[n] += now - set_start;
        self.result.makespan = self.result.makespan.max(now);
        self.offer(now);
    }
}
