//! Scheduler scenarios with exact expected placements, under `paper` and `hhs-acdid`.

use cryptodispatch::error::{ArriveError, ConfigError, SchedError};
use cryptodispatch::packet::{
    ClusterId, Cmd, Len, Mode, NodeId, Packet, PacketMeta, TaskId, UnitTimes,
};
use cryptodispatch::sched::policy::Policy;
use cryptodispatch::sched::{
    Admission, Affinity, ClusterConfig, ClusterView, NodeConfig, PolicySpec, SchedConfig, Scheduler,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const P: u64 = 16;

fn node(unit: f64, packets: u64) -> NodeConfig {
    NodeConfig::new(UnitTimes::uniform(unit), packets * P)
}

fn cluster(nodes: Vec<NodeConfig>, queue_len: usize) -> ClusterConfig {
    ClusterConfig {
        nodes,
        queue_len,
        max_packet: P,
    }
}

fn config(clusters: Vec<ClusterConfig>, wait: usize, affinity: Affinity) -> SchedConfig {
    SchedConfig {
        clusters,
        wait_queue_len: wait,
        affinity,
        unit_len: P,
        admission: Admission::Fifo,
    }
}

fn packet(cluster: u32, task: u64, seq: u32, last: bool, dependent: bool) -> Packet<Len> {
    let mode = if dependent { Mode::Cbc } else { Mode::Ecb };
    Packet::new(
        PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(cluster))
            .dependent(mode.is_chained())
            .at(seq, last),
        Len(P),
    )
}

/// Every placement made so far, as (task, seq, node).
fn drain(s: &mut Scheduler<Len>) -> Vec<(u64, u32, u32)> {
    s.dispatches()
        .map(|d| (d.packet.meta.task.0, d.packet.meta.seq, d.node.0))
        .collect()
}

/// The paper's example task set (docs/ALGORITHM.md §2), in arrival order T1..T11:
/// JOB1={T1,T2}, JOB2={T3,T5,T9}, JOB3={T4,T7,T8,T11}, JOB4={T6,T10}; JOB3 independent.
fn paper_task_set() -> Vec<Packet<Len>> {
    // (job, seq, last)
    let order = [
        (1, 0, false),
        (1, 1, true),
        (2, 0, false),
        (3, 0, false),
        (2, 1, false),
        (4, 0, false),
        (3, 1, false),
        (3, 2, false),
        (2, 2, true),
        (4, 1, true),
        (3, 3, true),
    ];
    order
        .iter()
        .map(|&(job, seq, last)| packet(0, job, seq, last, job != 3))
        .collect()
}

/// Three nodes, unit times 10, 20, 30 (fast to slow), room for two packets each.
fn three_nodes(policy: &str) -> Scheduler<Len> {
    let cfg = config(
        vec![cluster(
            vec![node(10.0, 2), node(20.0, 2), node(30.0, 2)],
            16,
        )],
        0,
        Affinity::Strict,
    );
    Scheduler::new(cfg, &policy.parse().unwrap()).unwrap()
}

#[test]
fn paper_example_under_paper_policy() {
    let mut s = three_nodes("paper");
    for p in paper_task_set() {
        s.arrive(p).unwrap();
    }
    // T1: all empty, W = 0.05·v + 0.95 → the fastest node 0; JOB1 bound to 0.
    // T2: JOB1 bound → node 0 (now full).
    // T3: candidates 1, 2: W1 = 0.025 + 0.95 > W2 = 0.95 → node 1; JOB2 bound to 1.
    // T4: independent: W1 = 0.025 + 0.475 < W2 = 0.95 → node 2.
    // T5: JOB2 bound → node 1 (now full).
    // T6: only node 2 has room → node 2; JOB4 bound to 2 (now full).
    // T7..T11: no room anywhere; they wait.
    assert_eq!(
        drain(&mut s),
        vec![
            (1, 0, 0),
            (1, 1, 0),
            (2, 0, 1),
            (3, 0, 2),
            (2, 1, 1),
            (4, 0, 2)
        ]
    );
    assert_eq!(s.cluster_queue_len(ClusterId(0)), 5);
    assert_eq!(s.choose_list_len(ClusterId(0)), 3);

    // Node 0 finishes T1: T7 (JOB3, unbound) takes the slot; T9 and T10 stay (bound to full
    // nodes) and T8 stays behind T7 (no room left anywhere for an unbound packet).
    s.complete(NodeId(0)).unwrap();
    assert_eq!(drain(&mut s), vec![(3, 1, 0)]);
    // Node 0 finishes T2, JOB1's last packet: JOB1 leaves the choose list; T8 goes to node 0.
    s.complete(NodeId(0)).unwrap();
    assert_eq!(s.bound_node(ClusterId(0), TaskId(1)), None);
    assert_eq!(drain(&mut s), vec![(3, 2, 0)]);
    // Node 2 finishes T4: T10 (JOB4, bound to node 2) goes there, ahead of T11 (JOB3), which
    // finds no room.
    s.complete(NodeId(2)).unwrap();
    assert_eq!(drain(&mut s), vec![(4, 1, 2)]);
    // Node 1 finishes T3: T9 (JOB2, bound to node 1) takes the slot; T11 finds no room.
    s.complete(NodeId(1)).unwrap();
    assert_eq!(drain(&mut s), vec![(2, 2, 1)]);
    // Node 1 finishes T5: T11 (JOB3) has node 1 as the only candidate.
    s.complete(NodeId(1)).unwrap();
    assert_eq!(drain(&mut s), vec![(3, 3, 1)]);
    // Drain everything: the choose list empties.
    for n in [0, 0, 1, 1, 2, 2] {
        s.complete(NodeId(n)).unwrap();
    }
    assert!(s.is_idle());
    assert_eq!(s.choose_list_len(ClusterId(0)), 0);
    assert_eq!(s.complete(NodeId(0)), Err(SchedError::NodeIdle(NodeId(0))));
}

#[test]
fn paper_example_under_hhs_acdid() {
    let mut s = three_nodes("hhs-acdid");
    for p in paper_task_set() {
        s.arrive(p).unwrap();
    }
    // Jobs in turn: JOB1 → 0, JOB2 → 1, JOB3 → 2, JOB4 → 0 (round robin, blind to load).
    // T6 (JOB4) waits for full node 0 though node 2 has room; T7 (JOB3) goes to node 2.
    assert_eq!(
        drain(&mut s),
        vec![
            (1, 0, 0),
            (1, 1, 0),
            (2, 0, 1),
            (3, 0, 2),
            (2, 1, 1),
            (3, 1, 2)
        ]
    );
    assert_eq!(s.bound_node(ClusterId(0), TaskId(4)), Some(NodeId(0)));
    assert_eq!(s.bound_node(ClusterId(0), TaskId(3)), Some(NodeId(2)));
    // Node 2 frees a slot: JOB3's T8 takes it (JOB3 is pinned to 2).
    s.complete(NodeId(2)).unwrap();
    assert_eq!(drain(&mut s), vec![(3, 2, 2)]);
    // Node 0 frees a slot: JOB4's T6.
    s.complete(NodeId(0)).unwrap();
    assert_eq!(drain(&mut s), vec![(4, 0, 0)]);
    let mut rest = Vec::new();
    for n in [0, 0, 0, 1, 1, 2, 2, 1, 2] {
        s.complete(NodeId(n)).unwrap();
        rest.extend(drain(&mut s));
    }
    // T10 to node 0, T9 to node 1, T11 to node 2: every job stayed on its node.
    assert_eq!(rest, vec![(4, 1, 0), (2, 2, 1), (3, 3, 2)]);
    assert!(s.is_idle(), "{s:?}");
    assert_eq!(s.choose_list_len(ClusterId(0)), 0);
}

#[test]
fn paper_policy_weighs_speed_against_remaining_capacity() {
    // Two nodes: fast (10) and slow (40), each with room for 10 packets; independent packets.
    let cfg = config(
        vec![cluster(vec![node(10.0, 10), node(40.0, 10)], 64)],
        0,
        Affinity::Strict,
    );
    let place = |spec: &str| {
        let mut s = Scheduler::new(cfg.clone(), &spec.parse().unwrap()).unwrap();
        for i in 0..6 {
            s.arrive(packet(0, i, 0, true, false)).unwrap();
        }
        drain(&mut s).iter().map(|&(_, _, n)| n).collect::<Vec<_>>()
    };
    // α = 0.05: speed only breaks ties of remaining capacity, so the nodes alternate.
    assert_eq!(place("paper"), vec![0, 1, 0, 1, 0, 1]);
    // α = 1, β = 0: speed only; every packet to the fast node while it has room.
    assert_eq!(place("paper:alpha=1,beta=0"), vec![0; 6]);
    // α = 0.5, β = 0.5: W0 = 0.5 + 0.5·r0 ≥ 0.5 ≥ 0.5·r1 = W1, so node 0 while it has room.
    assert_eq!(place("paper:alpha=0.5,beta=0.5"), vec![0; 6]);
    // α = 0.2, β = 0.8: node 0 wins while 0.2 + 0.8·r0 > 0.8·r1: three times, then alternately.
    assert_eq!(place("paper:alpha=0.2,beta=0.8"), vec![0, 0, 0, 1, 0, 1]);
}

#[test]
fn a_bound_node_that_is_full_does_not_block_other_jobs() {
    // Two nodes with room for one packet each.
    let cfg = config(
        vec![cluster(vec![node(10.0, 1), node(10.0, 1)], 16)],
        0,
        Affinity::Strict,
    );
    let mut s = Scheduler::new(cfg, &PolicySpec::paper_defaults()).unwrap();
    s.arrive(packet(0, 1, 0, false, true)).unwrap(); // CBC job 1 → node 0, bound
    s.arrive(packet(0, 1, 1, true, true)).unwrap(); // job 1 again: node 0 is full, waits
    s.arrive(packet(0, 2, 0, true, false)).unwrap(); // ECB job 2: behind it, goes to node 1
    assert_eq!(drain(&mut s), vec![(1, 0, 0), (2, 0, 1)]);
    assert_eq!(s.cluster_queue_len(ClusterId(0)), 1);
    // Node 1 frees up; job 1's packet still waits for node 0 (strategy 2), job 3 takes node 1.
    s.complete(NodeId(1)).unwrap();
    s.arrive(packet(0, 3, 0, true, false)).unwrap();
    assert_eq!(drain(&mut s), vec![(3, 0, 1)]);
    s.complete(NodeId(0)).unwrap();
    assert_eq!(drain(&mut s), vec![(1, 1, 0)]);
}

#[test]
fn in_flight_affinity_lets_an_idle_chain_move() {
    let cfg = |affinity| {
        config(
            vec![cluster(vec![node(10.0, 1), node(10.0, 4)], 16)],
            0,
            affinity,
        )
    };
    for (affinity, second_node) in [(Affinity::Strict, 0), (Affinity::InFlight, 1)] {
        let mut s = Scheduler::new(cfg(affinity), &PolicySpec::paper_defaults()).unwrap();
        // Both empty: equal weights → node 0 (the lowest index). CBC job 1 bound to node 0.
        s.arrive(packet(0, 1, 0, false, true)).unwrap();
        assert_eq!(drain(&mut s), vec![(1, 0, 0)]);
        s.complete(NodeId(0)).unwrap();
        // Nothing of job 1 in flight. Fill node 0 with another job so node 1 looks better.
        s.arrive(packet(0, 2, 0, true, false)).unwrap();
        s.arrive(packet(0, 1, 1, true, true)).unwrap();
        let placed = drain(&mut s);
        assert_eq!(placed[0], (2, 0, 0));
        if affinity == Affinity::Strict {
            // Strict: job 1 stays bound to node 0, which is full: it waits.
            assert_eq!(placed.len(), 1);
            s.complete(NodeId(0)).unwrap();
            assert_eq!(drain(&mut s), vec![(1, 1, second_node)]);
        } else {
            assert_eq!(placed[1], (1, 1, second_node));
        }
    }
}

#[test]
fn the_wait_queue_keeps_other_clusters_flowing() {
    // Cluster 0: one node with room for one packet, a queue of one. Cluster 1: the same.
    let cfg = config(
        vec![
            cluster(vec![node(10.0, 1)], 1),
            cluster(vec![node(10.0, 1)], 1),
        ],
        3,
        Affinity::Strict,
    );
    let mut s = Scheduler::new(cfg, &PolicySpec::paper_defaults()).unwrap();
    // Five packets of cluster 0: one on the node, one in the queue, three parked.
    for t in 0..5 {
        s.arrive(packet(0, t, 0, true, false)).unwrap();
    }
    assert_eq!(s.cluster_queue_len(ClusterId(0)), 1);
    assert_eq!(s.wait_queue_len(ClusterId(0)), 3);
    // A sixth: the cluster queue and the wait queue are full; it comes back.
    let refused = s.arrive(packet(0, 5, 0, true, false)).unwrap_err();
    assert!(matches!(refused, ArriveError::Full(ref p) if p.meta.task == TaskId(5)));
    // Cluster 1 still flows.
    s.arrive(packet(1, 100, 0, true, false)).unwrap();
    s.arrive(packet(1, 101, 0, true, false)).unwrap();
    assert_eq!(drain(&mut s), vec![(0, 0, 0), (100, 0, 1)]);
    // Cluster 0's parked packets move back in order as the node drains.
    for expected in 1..5 {
        s.complete(NodeId(0)).unwrap();
        assert_eq!(drain(&mut s), vec![(expected, 0, 0)]);
    }
    assert_eq!(s.wait_queue_total(), 0);
    // The refused packet is accepted now.
    s.arrive(refused.into_packet()).unwrap();
}

#[test]
fn parked_packets_are_not_overtaken_by_later_ones() {
    let cfg = config(vec![cluster(vec![node(10.0, 1)], 1)], 4, Affinity::Strict);
    let mut s = Scheduler::new(cfg, &PolicySpec::paper_defaults()).unwrap();
    for t in 0..4 {
        s.arrive(packet(0, t, 0, true, false)).unwrap();
    }
    // Node: 0; queue: 1; parked: 2, 3. Free the node: 1 goes to the node, 2 into the queue.
    s.complete(NodeId(0)).unwrap();
    // A new packet must park behind 3, not jump into the queue.
    s.arrive(packet(0, 9, 0, true, false)).unwrap();
    assert_eq!(s.wait_queue_len(ClusterId(0)), 2);
    let mut order = drain(&mut s);
    for _ in 0..4 {
        s.complete(NodeId(0)).unwrap();
        order.extend(drain(&mut s));
    }
    let tasks: Vec<u64> = order.iter().map(|&(t, _, _)| t).collect();
    assert_eq!(tasks, vec![0, 1, 2, 3, 9]);
}

#[test]
fn bad_configurations_and_inputs_are_errors() {
    let ok = || cluster(vec![node(10.0, 1)], 1);
    let spec = PolicySpec::paper_defaults();
    let err = |cfg| Scheduler::<Len>::new(cfg, &spec).unwrap_err();
    assert_eq!(
        err(config(vec![], 0, Affinity::Strict)),
        ConfigError::NoClusters
    );
    assert_eq!(
        err(config(vec![ok(), cluster(vec![], 1)], 0, Affinity::Strict)),
        ConfigError::EmptyCluster(ClusterId(1))
    );
    assert_eq!(
        err(config(
            vec![cluster(vec![node(10.0, 1)], 0)],
            0,
            Affinity::Strict
        )),
        ConfigError::ZeroClusterQueue(ClusterId(0))
    );
    let small = NodeConfig::new(UnitTimes::uniform(1.0), P - 1);
    assert!(matches!(
        err(config(vec![cluster(vec![small], 1)], 0, Affinity::Strict)),
        ConfigError::CapacityTooSmall {
            node: NodeId(0),
            ..
        }
    ));
    assert!(matches!(
        err(config(
            vec![cluster(vec![node(0.0, 1)], 1)],
            0,
            Affinity::Strict
        )),
        ConfigError::BadUnitTime { .. }
    ));
    let bad_weights = PolicySpec::paper(0.0, 0.0);
    assert!(matches!(
        Scheduler::<Len>::new(config(vec![ok()], 0, Affinity::Strict), &bad_weights),
        Err(ConfigError::BadWeights { .. })
    ));

    let mut s = Scheduler::new(config(vec![ok()], 0, Affinity::Strict), &spec).unwrap();
    assert!(matches!(
        s.arrive(packet(7, 1, 0, true, false)),
        Err(ArriveError::UnknownCluster(_))
    ));
    let big = Packet::new(
        PacketMeta::new(TaskId(1), Cmd::Sign, ClusterId(0)),
        Len(P + 1),
    );
    assert!(matches!(s.arrive(big), Err(ArriveError::TooLarge(_))));
    assert_eq!(
        s.complete(NodeId(9)),
        Err(SchedError::UnknownNode(NodeId(9)))
    );
    assert_eq!(s.complete(NodeId(0)), Err(SchedError::NodeIdle(NodeId(0))));
}

#[test]
fn status_table_counts_are_exact() {
    let cfg = config(
        vec![cluster(vec![node(10.0, 3), node(20.0, 3)], 8)],
        0,
        Affinity::Strict,
    );
    let mut s = Scheduler::new(cfg, &PolicySpec::hhs_acdid()).unwrap();
    for t in 0..4 {
        s.arrive(packet(0, t, 0, true, false)).unwrap();
    }
    assert_eq!(s.node(NodeId(0)).queued_packets(), 2);
    assert_eq!(s.node(NodeId(0)).queued_bytes(), 2 * P);
    assert_eq!(s.node(NodeId(1)).queued_packets(), 2);
    assert_eq!(s.node(NodeId(1)).remaining(), P);
    assert!((s.node(NodeId(1)).queued_work() - 40.0).abs() < 1e-9);
    let done = s.complete(NodeId(1)).unwrap();
    assert_eq!(done.task, TaskId(1));
    assert_eq!(s.node(NodeId(1)).queued_packets(), 1);
    assert_eq!(s.node(NodeId(1)).completed_packets(), 1);
}

// ---------------------------------------------------------------------------------------------
// Fair admission (docs/ALGORITHM.md §15.1)
// ---------------------------------------------------------------------------------------------

/// Where a one-packet job submitted right after a 64-packet chained job is served, on two
/// nodes of two packets each: how many of the big job's packets are placed before it.
fn small_job_position(admission: Admission) -> usize {
    let mut cfg = config(
        vec![cluster(vec![node(10.0, 2), node(10.0, 2)], 4)],
        4,
        Affinity::Strict,
    );
    cfg.admission = admission;
    let mut s = Scheduler::new(cfg, &PolicySpec::paper_defaults()).unwrap();
    // The driver's receive queue: first come first served, re-offered after completions.
    let mut receive: std::collections::VecDeque<Packet<Len>> = (0..64)
        .map(|seq| packet(0, 1, seq, seq == 63, true))
        .chain([packet(0, 2, 0, true, false)])
        .collect();
    let mut placed = Vec::new();
    let mut busy: Vec<u32> = Vec::new();
    while placed.len() < 65 {
        while let Some(p) = receive.pop_front() {
            if let Err(ArriveError::Full(p)) = s.arrive(p) {
                receive.push_front(p);
                break;
            }
        }
        for (task, _, node) in drain(&mut s) {
            placed.push(task);
            busy.push(node);
        }
        // Complete the oldest packet in service.
        let node = busy.remove(0);
        s.complete(NodeId(node)).unwrap();
    }
    placed.iter().position(|&t| t == 2).unwrap()
}

#[test]
fn fair_admission_serves_a_small_job_after_one_packet_of_a_chained_giant() {
    // First come first served: the small job waits behind most of the chained job, whose
    // packets (bound to one node) fill the cluster queue and the wait queue.
    let fifo = small_job_position(Admission::Fifo);
    assert!(fifo > 50, "fifo placed the small job at {fifo}");
    // Fair: the chained job's packets wait in its own queue; the small job goes at once to the
    // node with room.
    let fair = small_job_position(Admission::Fair);
    assert!(fair <= 2, "fair placed the small job at {fair}");
}

#[test]
fn fair_admission_accepts_every_packet_and_keeps_each_job_in_order() {
    let mut cfg = config(vec![cluster(vec![node(10.0, 1)], 1)], 0, Affinity::Strict);
    cfg.admission = Admission::Fair;
    let mut s = Scheduler::new(cfg, &PolicySpec::paper_defaults()).unwrap();
    for seq in 0..20 {
        s.arrive(packet(0, 1, seq, seq == 19, true)).unwrap();
        s.arrive(packet(0, 2, seq, seq == 19, seq % 2 == 0))
            .unwrap();
    }
    assert_eq!(s.cluster_queue_len(ClusterId(0)), 39);
    assert_eq!(s.waiting_jobs(ClusterId(0)), 2);
    let mut order = drain(&mut s);
    while !s.is_idle() {
        s.complete(NodeId(0)).unwrap();
        order.extend(drain(&mut s));
    }
    for task in [1, 2] {
        let seqs: Vec<u32> = order.iter().filter(|o| o.0 == task).map(|o| o.1).collect();
        assert_eq!(seqs, (0..20).collect::<Vec<_>>(), "job {task}");
    }
    // Equal packet sizes: the jobs alternate.
    let tasks: Vec<u64> = order.iter().map(|o| o.0).take(10).collect();
    assert_eq!(tasks, [1, 2, 1, 2, 1, 2, 1, 2, 1, 2]);
}

#[test]
fn node_slots_bound_empty_packets() {
    let mut cfg = config(
        vec![cluster(vec![node(10.0, 4).with_slots(3)], 2)],
        2,
        Affinity::Strict,
    );
    cfg.admission = Admission::Fifo;
    let mut s = Scheduler::new(cfg, &PolicySpec::paper_defaults()).unwrap();
    let empty = |task| {
        Packet::new(
            PacketMeta::new(TaskId(task), Cmd::Sign, ClusterId(0)),
            Len(0),
        )
    };
    let mut accepted = 0;
    for task in 0..100 {
        if s.arrive(empty(task)).is_ok() {
            accepted += 1;
        }
    }
    // Three on the node, two in the cluster queue, two in the wait queue.
    assert_eq!(accepted, 7);
    assert_eq!(s.node(NodeId(0)).queued_packets(), 3);
}

/// A node fails holding only its running packet (nothing to put back): the chained job that was
/// bound to it still moves on, to the idle node, when the driver requeues nothing, under either
/// admission. Before, nothing was placed until a packet arrived or the node came back.
#[test]
fn a_job_bound_to_a_failed_node_moves_on_even_with_nothing_requeued() {
    for admission in [Admission::Fifo, Admission::Fair] {
        // Node 0 slow, node 1 fast; each holds one packet.
        let mut s = Scheduler::<Len>::new(
            SchedConfig {
                admission,
                ..config(
                    vec![cluster(vec![node(30.0, 1), node(10.0, 1)], 8)],
                    8,
                    Affinity::Strict,
                )
            },
            &PolicySpec::paper_defaults(),
        )
        .unwrap();
        for seq in 0..3 {
            s.arrive(packet(0, 1, seq, seq == 2, true)).unwrap();
        }
        for seq in 0..3 {
            s.arrive(packet(0, 2, seq, seq == 2, true)).unwrap();
        }
        // Job 1 on the fast node, job 2 on the slow one.
        assert_eq!(drain(&mut s), [(1, 0, 1), (2, 0, 0)], "{admission:?}");
        for seq in 1..3 {
            s.complete(NodeId(0)).unwrap();
            assert_eq!(drain(&mut s), [(2, seq, 0)], "{admission:?}");
        }
        s.complete(NodeId(0)).unwrap();
        assert!(
            drain(&mut s).is_empty(),
            "job 1 is bound to the busy node 1"
        );
        // Node 1 fails while running job 1's first packet; the driver fails that packet.
        let taken = s.node_down(NodeId(1)).unwrap();
        assert_eq!(taken.len(), 1);
        s.requeue(Vec::new());
        assert_eq!(
            drain(&mut s),
            [(1, 1, 0)],
            "{admission:?}: job 1's next packet goes to the idle node"
        );
    }
}

/// Counts the calls to the policy it wraps.
#[derive(Debug)]
struct Counting {
    inner: Box<dyn Policy>,
    calls: Arc<AtomicUsize>,
}

impl Policy for Counting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.select(view, packet)
    }
}

/// Under fair admission, a node left with a few bytes of room, too few for any waiting packet,
/// does not make every arrival and completion give every waiting job a turn: the policy is asked
/// about as often as a packet is placed, not once per waiting job at every event. Before, the
/// 500 jobs here cost some 250,000 calls.
#[test]
fn fair_admission_does_not_scan_every_waiting_job_when_nothing_fits() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut cfg = config(
        // Two packets and 4 bytes: 4 bytes of room once two packets are queued.
        vec![cluster(
            vec![NodeConfig::new(UnitTimes::uniform(10.0), 2 * P + 4)],
            8,
        )],
        8,
        Affinity::Strict,
    );
    cfg.admission = Admission::Fair;
    let counter = Arc::clone(&calls);
    let mut s = Scheduler::<Len>::with_policies(cfg, move |_| {
        Box::new(Counting {
            inner: PolicySpec::paper_defaults().build().unwrap(),
            calls: Arc::clone(&counter),
        })
    })
    .unwrap();
    const JOBS: u64 = 500;
    for task in 0..JOBS {
        s.arrive(packet(0, task, 0, true, false)).unwrap();
    }
    let mut order = drain(&mut s);
    assert_eq!(order.len(), 2, "the node holds two packets");
    while !s.is_idle() {
        s.complete(NodeId(0)).unwrap();
        order.extend(drain(&mut s));
    }
    // Every job placed once, in arrival order (equal packets: the ring's order).
    let tasks: Vec<u64> = order.iter().map(|o| o.0).collect();
    assert_eq!(tasks, (0..JOBS).collect::<Vec<_>>());
    let calls = calls.load(Ordering::Relaxed);
    assert!(
        calls <= 2 * JOBS as usize,
        "{calls} calls to the policy for {JOBS} placements"
    );
}

/// `complete_many` completes as that many `complete` calls do and then places once; on one node
/// the placements are the same, and completing more than is queued completes what is there.
#[test]
fn completing_many_at_once_places_as_completing_one_by_one() {
    for admission in [Admission::Fifo, Admission::Fair] {
        let build = || {
            let mut cfg = config(vec![cluster(vec![node(10.0, 3)], 8)], 8, Affinity::InFlight);
            cfg.admission = admission;
            let mut s = Scheduler::<Len>::new(cfg, &PolicySpec::paper_defaults()).unwrap();
            for task in 0..6 {
                s.arrive(packet(0, task, 0, true, false)).unwrap();
            }
            s
        };
        let (mut one, mut many) = (build(), build());
        assert_eq!(drain(&mut one), drain(&mut many));
        one.complete(NodeId(0)).unwrap();
        one.complete(NodeId(0)).unwrap();
        assert_eq!(many.complete_many(NodeId(0), 2), Ok(()));
        assert_eq!(drain(&mut one), drain(&mut many), "{admission:?}");
        // Three queued: asking for five completes three, places for them, and says why.
        assert_eq!(
            many.complete_many(NodeId(0), 5),
            Err(SchedError::NodeIdle(NodeId(0)))
        );
        assert_eq!(drain(&mut many).len(), 1, "the last waiting job");
        assert_eq!(many.complete_many(NodeId(0), 0), Ok(()));
    }
}

/// `arrive_many` places as single arrivals do: the paper's task set on three small nodes, under
/// both admissions and both policies, with a cluster and wait queue small enough that the
/// first come first served queues fill. Single arrivals stop at the first packet refused as
/// full, as the engine does; `arrive_many` leaves that packet at the front of its queue. The
/// rest then arrive as the nodes complete, the same way on both sides. Under fair admission
/// the jobs come whole, one `arrive_many` each, as the engine admits a submitted job (packets
/// of several jobs arriving together take turns, which single arrivals, each placed before the
/// next arrives, do not).
#[test]
fn arriving_many_at_once_places_as_arriving_one_by_one() {
    for admission in [Admission::Fifo, Admission::Fair] {
        for policy in ["paper", "hhs-acdid"] {
            let build = || {
                let mut cfg = config(
                    vec![cluster(
                        vec![node(10.0, 2), node(20.0, 2), node(30.0, 1)],
                        2,
                    )],
                    1,
                    Affinity::InFlight,
                );
                cfg.admission = admission;
                Scheduler::<Len>::new(cfg, &policy.parse().unwrap()).unwrap()
            };
            let (mut one, mut many) = (build(), build());
            let mut set = paper_task_set();
            if admission == Admission::Fair {
                set.sort_by_key(|p| (p.meta.task, p.meta.seq));
            }
            let mut left_one: VecDeque<Packet<Len>> = set.into();
            let mut left_many = left_one.clone();
            let mut rounds = 0;
            while !left_one.is_empty() || !left_many.is_empty() {
                let mut arrived_one = 0;
                while let Some(p) = left_one.pop_front() {
                    match one.arrive(p) {
                        Ok(()) => arrived_one += 1,
                        Err(ArriveError::Full(p)) => {
                            left_one.push_front(p);
                            break;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                let mut arrived = 0;
                while let Some(task) = left_many.front().map(|p| p.meta.task) {
                    // First come first served: everything that waits at once; fair: one job.
                    let n = match admission {
                        Admission::Fifo => left_many.len(),
                        Admission::Fair => {
                            left_many.iter().take_while(|p| p.meta.task == task).count()
                        }
                    };
                    let mut job: VecDeque<Packet<Len>> = left_many.drain(..n).collect();
                    arrived += many.arrive_many(&mut job, |e| panic!("{e}"));
                    let full = !job.is_empty();
                    for p in job.into_iter().rev() {
                        left_many.push_front(p);
                    }
                    if full {
                        break;
                    }
                }
                assert_eq!(arrived, arrived_one, "{admission:?} {policy}");
                assert_eq!(left_many.len(), left_one.len(), "{admission:?} {policy}");
                assert_eq!(drain(&mut one), drain(&mut many), "{admission:?} {policy}");
                // The fastest node busy with something completes one packet.
                let busy = (0..3)
                    .map(NodeId)
                    .find(|&n| one.node(n).queued_packets() > 0)
                    .expect("packets wait, so some node is busy");
                one.complete(busy).unwrap();
                many.complete(busy).unwrap();
                assert_eq!(drain(&mut one), drain(&mut many), "{admission:?} {policy}");
                rounds += 1;
                assert!(rounds < 50, "the task set never all arrived");
            }
            if admission == Admission::Fifo {
                assert!(rounds > 1, "the queues never filled: the test proves less");
            }
        }
    }
}

/// A packet `arrive_many` cannot take for a reason other than room (no such cluster, larger
/// than any node) goes to the callback, and the packets after it still arrive.
#[test]
fn arriving_many_hands_back_what_no_cluster_takes_and_goes_on() {
    let cfg = config(vec![cluster(vec![node(10.0, 4)], 8)], 8, Affinity::InFlight);
    let mut s = Scheduler::<Len>::new(cfg, &PolicySpec::paper_defaults()).unwrap();
    let mut queue: VecDeque<Packet<Len>> = [
        packet(0, 1, 0, true, false),
        packet(7, 2, 0, true, false),
        Packet::new(
            PacketMeta::new(TaskId(3), Cmd::Encrypt, ClusterId(0)).at(0, true),
            Len(100 * P),
        ),
        packet(0, 4, 0, true, false),
    ]
    .into();
    let mut refused = Vec::new();
    let arrived = s.arrive_many(&mut queue, |e| refused.push(e));
    assert_eq!(arrived, 2);
    assert!(queue.is_empty());
    assert!(matches!(
        refused.as_slice(),
        [ArriveError::UnknownCluster(a), ArriveError::TooLarge(b)]
            if a.meta.task == TaskId(2) && b.meta.task == TaskId(3)
    ));
    assert_eq!(drain(&mut s), vec![(1, 0, 0), (4, 0, 0)]);
}
