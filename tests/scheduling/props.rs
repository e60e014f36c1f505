//! Property tests of the scheduler core under random jobs, arrivals and completions: nothing
//! lost or duplicated, per-job order kept, dependent packets never overtake their predecessor,
//! no node over capacity, no deadlock, and an empty choose list at the end, with jobs of up to
//! three tenants of random weights, and nodes failing and coming back, their packets put back.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use cryptodispatch::error::ArriveError;
use cryptodispatch::packet::{
    ClusterId, Cmd, Len, Mode, NodeId, Packet, PacketMeta, TaskId, TenantId, UnitTimes,
};
use cryptodispatch::sched::{
    Admission, Affinity, ClusterConfig, NodeConfig, PolicySpec, SchedConfig, Scheduler,
};
use proptest::prelude::*;

const MAX_LEN: u64 = 64;

#[derive(Debug, Clone)]
struct JobSpec {
    cluster: u32,
    dependent: bool,
    lens: Vec<u64>,
    /// The job's tenant, 0 to 2 (0 the default tenant).
    tenant: u32,
}

#[derive(Debug, Clone)]
struct Case {
    clusters: Vec<(Vec<(f64, u64)>, usize)>,
    wait: usize,
    policy: PolicySpec,
    affinity: Affinity,
    admission: Admission,
    /// The weights of tenants 0 to 2, in the core's admission (fair admission only).
    weights: [u32; 3],
    jobs: Vec<JobSpec>,
    /// Which job offers its next packet, step by step (indices wrap over unfinished jobs).
    picks: Vec<usize>,
    /// The driver's moves: `true` = offer a packet, `false` = complete on some node.
    moves: Vec<(bool, usize)>,
    /// Node failures: before move `at`, node `pick` (modulo the nodes) goes down, unless it
    /// is the last one up in its cluster, and comes back `down_for` moves later.
    faults: Vec<Fault>,
}

#[derive(Debug, Clone, Copy)]
struct Fault {
    at: usize,
    pick: usize,
    down_for: usize,
}

fn policy() -> impl Strategy<Value = PolicySpec> {
    prop_oneof![
        (0.0..=1.0f64, 0.0..=1.0f64)
            .prop_filter("not both zero", |(a, b)| *a > 0.0 || *b > 0.0)
            .prop_map(|(alpha, beta)| PolicySpec::paper(alpha, beta)),
        Just(PolicySpec::default()),
        Just(PolicySpec::hhs_acdid()),
        // Every policy the registry knows, with its default parameters, and p2c reseeded.
        prop::sample::select(PolicySpec::all()),
        any::<u64>().prop_map(PolicySpec::p2c),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let node = (1.0..40.0f64, 1u64..=4);
    let cluster = (prop::collection::vec(node, 1..=4), 1usize..=6);
    (
        prop::collection::vec(cluster, 1..=2),
        0usize..=6,
        policy(),
        prop_oneof![Just(Affinity::Strict), Just(Affinity::InFlight)],
        prop_oneof![Just(Admission::Fifo), Just(Admission::Fair)],
    )
        .prop_flat_map(|(clusters, wait, policy, affinity, admission)| {
            let n_clusters = clusters.len() as u32;
            let job = (
                0..n_clusters,
                any::<bool>(),
                prop::collection::vec(1..=MAX_LEN, 1..=12),
                0u32..3,
            )
                .prop_map(|(cluster, dependent, lens, tenant)| JobSpec {
                    cluster,
                    dependent,
                    lens,
                    tenant,
                });
            (
                Just(clusters),
                Just(wait),
                Just(policy),
                Just(affinity),
                Just(admission),
                [1u32..=4, 1u32..=4, 1u32..=4],
                prop::collection::vec(job, 1..=12),
                prop::collection::vec(any::<usize>(), 60),
                prop::collection::vec((any::<bool>(), any::<usize>()), 0..120),
                prop::collection::vec(
                    (0usize..120, any::<usize>(), 0usize..20)
                        .prop_map(|(at, pick, down_for)| Fault { at, pick, down_for }),
                    0..=3,
                ),
            )
        })
        .prop_map(
            |(clusters, wait, policy, affinity, admission, weights, jobs, picks, moves, faults)| {
                Case {
                    clusters,
                    wait,
                    policy,
                    affinity,
                    admission,
                    weights,
                    jobs,
                    picks,
                    moves,
                    faults,
                }
            },
        )
}

/// Drives the core like a runtime would, and checks every invariant as it goes.
struct Driver {
    s: Scheduler<Len>,
    affinity: Affinity,
    pins: bool,
    /// Packets not yet offered, in arrival order.
    arrivals: VecDeque<Packet<Len>>,
    /// Offered but refused (backpressure), per cluster, oldest first.
    pending: Vec<VecDeque<Packet<Len>>>,
    /// What each node holds, in service order, as the driver saw it dispatched.
    nodes: Vec<VecDeque<PacketMeta>>,
    dispatched: HashSet<(u64, u32)>,
    completed: HashSet<(u64, u32)>,
    next_seq: HashMap<u64, u32>,
    /// Per job, the packets taken off a failed node and not dispatched again: they go first.
    taken_back: HashMap<u64, BTreeSet<u32>>,
    /// Jobs that were bound to a node that failed: their next packet may go anywhere.
    unbound: HashSet<u64>,
    node_of: HashMap<(u64, u32), usize>,
    /// The node of each job's latest dispatch.
    last_node: HashMap<u64, usize>,
    /// Down nodes, and the move at which each comes back.
    down: HashMap<usize, usize>,
    total: usize,
}

impl Driver {
    fn new(case: &Case) -> Self {
        let clusters = case
            .clusters
            .iter()
            .map(|(nodes, queue_len)| ClusterConfig {
                nodes: nodes
                    .iter()
                    .map(|&(t, cap)| NodeConfig::new(UnitTimes::uniform(t), cap * MAX_LEN))
                    .collect(),
                queue_len: *queue_len,
                max_packet: MAX_LEN,
            })
            .collect();
        let cfg = SchedConfig {
            clusters,
            wait_queue_len: case.wait,
            affinity: case.affinity,
            unit_len: MAX_LEN,
            admission: case.admission,
        };
        let mut s = Scheduler::new(cfg, &case.policy).unwrap();
        for (t, &w) in case.weights.iter().enumerate() {
            s.set_tenant_weight(TenantId(t as u32), w).unwrap();
        }

        // Interleave the jobs' packets by the picks, each job's in order.
        let mut cursors = vec![0usize; case.jobs.len()];
        let mut arrivals = VecDeque::new();
        let mut picks = case.picks.iter().cycle();
        let total: usize = case.jobs.iter().map(|j| j.lens.len()).sum();
        while arrivals.len() < total {
            let open: Vec<usize> = (0..case.jobs.len())
                .filter(|&j| cursors[j] < case.jobs[j].lens.len())
                .collect();
            let j = open[picks.next().unwrap() % open.len()];
            let job = &case.jobs[j];
            let seq = cursors[j];
            cursors[j] += 1;
            let mode = if job.dependent { Mode::Cbc } else { Mode::Ecb };
            arrivals.push_back(Packet::new(
                PacketMeta::new(
                    TaskId(j as u64),
                    if seq % 2 == 0 {
                        Cmd::Encrypt
                    } else {
                        Cmd::Decrypt
                    },
                    ClusterId(job.cluster),
                )
                .dependent(mode.is_chained())
                .at(seq as u32, seq + 1 == job.lens.len())
                // Half the jobs tell their length (as the service's do), half do not.
                .job_bytes((j % 2 == 0).then(|| job.lens.iter().sum()))
                .tenant(TenantId(job.tenant)),
                Len(job.lens[seq]),
            ));
        }
        let n_nodes = s.num_nodes();
        Driver {
            pins: case.policy == PolicySpec::hhs_acdid(),
            affinity: case.affinity,
            s,
            arrivals,
            pending: vec![VecDeque::new(); case.clusters.len()],
            nodes: vec![VecDeque::new(); n_nodes],
            dispatched: HashSet::new(),
            completed: HashSet::new(),
            next_seq: HashMap::new(),
            taken_back: HashMap::new(),
            unbound: HashSet::new(),
            node_of: HashMap::new(),
            last_node: HashMap::new(),
            down: HashMap::new(),
            total,
        }
    }

    /// Offers refused packets again, oldest first per cluster, until one is refused.
    fn offer_pending(&mut self) {
        for c in 0..self.pending.len() {
            while let Some(p) = self.pending[c].pop_front() {
                match self.s.arrive(p) {
                    Ok(()) => {}
                    Err(ArriveError::Full(p)) => {
                        self.pending[c].push_front(p);
                        break;
                    }
                    Err(e) => panic!("unexpected refusal: {e}"),
                }
            }
        }
        self.collect();
    }

    fn offer_next(&mut self) {
        if let Some(p) = self.arrivals.pop_front() {
            let c = p.meta.cluster.index();
            self.pending[c].push_back(p);
            self.offer_pending();
        }
    }

    fn complete_on(&mut self, pick: usize) -> bool {
        let busy: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| !self.nodes[n].is_empty())
            .collect();
        if busy.is_empty() {
            return false;
        }
        let n = busy[pick % busy.len()];
        let meta = self.s.complete(NodeId(n as u32)).unwrap();
        let expected = self.nodes[n].pop_front().unwrap();
        assert_eq!(meta, expected, "nodes serve first come first served");
        assert!(
            self.completed.insert((meta.task.0, meta.seq)),
            "completed twice: {meta:?}"
        );
        self.offer_pending();
        true
    }

    fn collect(&mut self) {
        while let Some(d) = self.s.next_dispatch() {
            let m = d.packet.meta;
            let n = d.node.index();
            assert!(
                self.dispatched.insert((m.task.0, m.seq)),
                "dispatched twice: {m:?}"
            );
            // A chained job's packets taken back from a failed node go before its later ones,
            // in order; an independent job's go in any order.
            let back = self.taken_back.entry(m.task.0).or_default();
            if back.remove(&m.seq) {
                assert!(
                    !m.is_dependent() || back.first().is_none_or(|&s| s > m.seq),
                    "packets taken back are dispatched in order: {m:?}"
                );
            } else {
                assert!(
                    !m.is_dependent() || back.is_empty(),
                    "a chained job's packet overtook its packets taken back: {m:?}"
                );
                let next = self.next_seq.entry(m.task.0).or_insert(0);
                assert_eq!(m.seq, *next, "packets of a job are dispatched in order");
                *next += 1;
            }
            let moved = self.unbound.remove(&m.task.0);
            assert!(
                self.s.cluster_nodes(m.cluster).contains(&n),
                "a packet goes to a node of its cluster"
            );
            if m.seq > 0 && m.is_dependent() {
                let prev = (m.task.0, m.seq - 1);
                let prev_node = self.node_of.get(&prev);
                assert!(
                    prev_node.is_some(),
                    "a chained packet before its predecessor"
                );
                if !self.completed.contains(&prev) {
                    assert_eq!(
                        Some(&n),
                        prev_node,
                        "strategy 2: a dependent packet follows its in-flight predecessor"
                    );
                }
            }
            let pinned = self.pins || (m.is_dependent() && self.affinity == Affinity::Strict);
            if let Some(&last) = self.last_node.get(&m.task.0).filter(|_| pinned && !moved) {
                assert_eq!(n, last, "a bound job stays on its node: {m:?}");
            }
            self.last_node.insert(m.task.0, n);
            self.node_of.insert((m.task.0, m.seq), n);
            self.nodes[n].push_back(m);
        }
        self.check_status();
    }

    /// Node `pick` (modulo the nodes) fails, unless it is down or the last one up in its
    /// cluster; its packets are put back, and it comes back at move `until`.
    fn fail(&mut self, pick: usize, until: usize) {
        let n = pick % self.nodes.len();
        let cluster = self.s.cluster_of(NodeId(n as u32));
        let up = self
            .s
            .cluster_nodes(cluster)
            .filter(|m| !self.down.contains_key(m))
            .count();
        if self.down.contains_key(&n) || up < 2 {
            return;
        }
        let taken = self.s.node_down(NodeId(n as u32)).unwrap();
        let held: Vec<PacketMeta> = self.nodes[n].drain(..).collect();
        assert_eq!(
            taken, held,
            "the packets taken off a failed node, oldest first"
        );
        // Every job whose last packet went to the failed node was bound there.
        for (&task, &node) in &self.last_node {
            if node == n {
                self.unbound.insert(task);
            }
        }
        for meta in &taken {
            let key = (meta.task.0, meta.seq);
            self.dispatched.remove(&key);
            self.node_of.remove(&key);
            self.taken_back.entry(key.0).or_default().insert(key.1);
        }
        self.down.insert(n, until);
        self.s.requeue(
            taken
                .into_iter()
                .map(|meta| Packet::new(meta, Len(meta.len)))
                .collect(),
        );
        self.collect();
    }

    /// Brings back the down nodes due back by move `now` (every one, with `None`).
    fn recover(&mut self, now: Option<usize>) {
        let back: Vec<usize> = self
            .down
            .iter()
            .filter(|&(_, &until)| now.is_none_or(|now| until <= now))
            .map(|(&n, _)| n)
            .collect();
        for n in back {
            self.down.remove(&n);
            self.s.node_up(NodeId(n as u32)).unwrap();
            self.offer_pending();
        }
    }

    fn check_status(&self) {
        for (n, q) in self.nodes.iter().enumerate() {
            let st = self.s.node(NodeId(n as u32));
            let bytes: u64 = q.iter().map(|m| m.len).sum();
            assert_eq!(st.queued_packets() as usize, q.len());
            assert_eq!(st.queued_bytes(), bytes);
            assert!(st.queued_bytes() <= st.capacity(), "node {n} over capacity");
            let core_view: Vec<PacketMeta> = self.s.node_queue(NodeId(n as u32)).copied().collect();
            assert_eq!(core_view, q.iter().copied().collect::<Vec<_>>());
        }
    }

    fn finish(&mut self) {
        self.recover(None);
        // Offer everything, completing work whenever the core pushes back.
        let mut steps = 0;
        while self.completed.len() < self.total {
            steps += 1;
            assert!(steps < 10_000, "no progress");
            if !self.arrivals.is_empty() {
                self.offer_next();
                continue;
            }
            if !self.complete_on(0) {
                let waiting: usize = self.pending.iter().map(VecDeque::len).sum();
                panic!(
                    "deadlock: every node idle, {waiting} packets refused, core not idle: {:?}",
                    self.s
                );
            }
        }
        assert_eq!(
            self.dispatched.len(),
            self.total,
            "every packet dispatched once"
        );
        assert!(self.s.is_idle());
        for c in 0..self.s.num_clusters() {
            assert_eq!(
                self.s.choose_list_len(ClusterId(c as u32)),
                0,
                "choose list empty at the end"
            );
        }
        for n in 0..self.s.num_nodes() {
            let node = self.s.node(NodeId(n as u32));
            assert_eq!(
                (node.committed_bytes(), node.committed_work()),
                (0, 0.0),
                "node {n}: committed work left at the end"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(800))]

    #[test]
    fn nothing_lost_order_kept_capacity_respected(case in case()) {
        let mut d = Driver::new(&case);
        for (i, &(offer, pick)) in case.moves.iter().enumerate() {
            d.recover(Some(i));
            for f in case.faults.iter().filter(|f| f.at == i) {
                d.fail(f.pick, i + f.down_for);
            }
            if offer {
                d.offer_next();
            } else {
                d.complete_on(pick);
            }
        }
        d.finish();
    }
}
