//! `mct-wait` (docs/ALGORITHM.md §11.15) in deterministic scenarios on the simulator: where
//! `mct` binds a chain to whichever node has room, `mct-wait` waits for the node on which the
//! chain completes first.

use cryptodispatch::packet::{Cmd, UnitTimes};
use cryptodispatch::sched::{Affinity, PolicySpec};
use cryptodispatch::sim::{NodeModel, SimConfig, SimResult, Trace, TraceRecord, simulate};

fn node(t: f64, cap: u64) -> NodeModel {
    NodeModel::new(UnitTimes::uniform(t), cap)
}

/// `chains` chains of `packets` unit packets each, interleaved: packet k of every chain
/// arrives at time k × `gap`, chain by chain.
fn chains(chains: u64, packets: u32, gap: f64) -> Trace {
    let mut records = Vec::new();
    for k in 0..packets {
        for c in 0..chains {
            records.push(TraceRecord {
                task: c + 1,
                seq: k,
                dependent: true,
                arrival: f64::from(k) * gap,
                length: 1,
                cmd: Cmd::Encrypt,
                last: false,
            });
        }
    }
    Trace::from_records(records).unwrap()
}

fn run(trace: &Trace, nodes: &[NodeModel], known: bool, policy: &str) -> SimResult {
    let config = SimConfig::new(nodes.to_vec()).with_known_lengths(known);
    let r = simulate(trace, &config, &policy.parse::<PolicySpec>().unwrap()).unwrap();
    assert_eq!(
        r.placements.len(),
        trace.len(),
        "{policy} left packets unserved"
    );
    r
}

/// Chains bound per node: the node of each chain's first packet.
fn chains_per_node(r: &SimResult, nodes: usize) -> Vec<usize> {
    let mut per = vec![0; nodes];
    for p in r.placements.iter().filter(|p| p.seq == 0) {
        per[p.node] += 1;
    }
    per
}

#[test]
fn overloaded_chains_are_not_bound_to_a_slow_node_for_its_room() {
    // Two nodes, speeds 1:10, each holding 4 unit packets; 12 chains of 20 packets, all
    // started at once and arriving faster than the nodes serve. Chains are alike, so the
    // best split is by speed: the fast node should take about ten times the slow node's
    // chains. When the fast node is full, `mct` binds the next chains to the slow node because
    // it has room; `mct-wait` waits for the fast node while the chain completes sooner there.
    let nodes = [node(16.0, 4), node(160.0, 4)];
    let trace = chains(12, 20, 1.0);
    for known in [true, false] {
        let wait = run(&trace, &nodes, known, "mct-wait");
        let mct = run(&trace, &nodes, known, "mct");
        let on_slow = chains_per_node(&wait, 2)[1];
        assert!(
            on_slow <= 1,
            "lengths known {known}: mct-wait bound {on_slow} of 12 chains to the slow node"
        );
        assert!(
            chains_per_node(&mct, 2)[1] > on_slow,
            "lengths known {known}: mct bound no more chains to the slow node"
        );
        assert!(
            wait.makespan < 0.8 * mct.makespan,
            "lengths known {known}: mct-wait {} against mct {}",
            wait.makespan,
            mct.makespan
        );
    }
}

#[test]
fn an_idle_slow_node_still_takes_what_it_finishes_sooner() {
    // Speeds 1:2, room for 4 packets each: the slow node completes a chain of 3 unit packets
    // at 60 when idle, the fast node (full, 4 queued) at 10·(4 + 3) = 70, so the third chain
    // goes to the slow node at once. mct-wait is not "always the fast node".
    let nodes = [node(10.0, 4), node(20.0, 4)];
    let trace = chains(3, 3, 0.0);
    let r = run(&trace, &nodes, true, "mct-wait");
    assert!(
        chains_per_node(&r, 2)[1] >= 1,
        "{:?}",
        chains_per_node(&r, 2)
    );
}

#[test]
fn under_in_flight_affinity_every_packet_is_served_and_no_slower_than_mct_here() {
    let nodes = [node(16.0, 4), node(160.0, 4)];
    let trace = chains(12, 20, 1.0);
    let config = SimConfig {
        affinity: Affinity::InFlight,
        ..SimConfig::new(nodes.to_vec())
    };
    let wait = simulate(&trace, &config, &"mct-wait".parse().unwrap()).unwrap();
    let mct = simulate(&trace, &config, &PolicySpec::mct()).unwrap();
    assert_eq!(wait.placements.len(), trace.len());
    assert!(
        wait.makespan <= mct.makespan,
        "{} > {}",
        wait.makespan,
        mct.makespan
    );
}

#[test]
fn the_default_is_mct_wait() {
    assert_eq!(PolicySpec::default().name(), "mct-wait");
    assert_eq!(
        cryptodispatch::sched::policy::DEFAULT.name(),
        PolicySpec::default().name()
    );
}

/// `n` independent one-packet jobs of one unit, all arriving at time 0.
fn singles(n: u64) -> Trace {
    let records = (0..n)
        .map(|j| TraceRecord {
            task: j + 1,
            seq: 0,
            dependent: false,
            arrival: 0.0,
            length: 1,
            cmd: Cmd::Encrypt,
            last: true,
        })
        .collect();
    Trace::from_records(records).unwrap()
}

#[test]
fn with_one_packet_queues_the_waiting_packets_count_on_the_node_they_wait_for() {
    // Speeds 1:3, each node holding one packet, 60 unit packets at once. The fast node, busy,
    // would complete the next packet at 32; the idle slow node at 48. So the first packet
    // waits for the fast node. Counted on the node it waits for (docs/ALGORITHM.md §11.15),
    // it puts the packet behind it at 48 there too, and that one, a tie, goes to the idle slow
    // node: the queue that would build on the fast node builds in sight of the rule, and the
    // nodes split 3:1, as list scheduling with unbounded queues and `mct` do. Without the
    // count every packet waited for the fast node and the slow one never worked (60:0,
    // makespan 960).
    let nodes = [node(16.0, 1), node(48.0, 1)];
    let trace = singles(60);
    let wait = run(&trace, &nodes, true, "mct-wait");
    let mct = run(&trace, &nodes, true, "mct");
    assert_eq!(wait.node_packets, vec![45, 15]);
    assert!(mct.node_packets[1] >= 10, "{:?}", mct.node_packets);
    assert!(
        wait.makespan <= 1.05 * mct.makespan,
        "mct-wait {} against mct {}",
        wait.makespan,
        mct.makespan
    );
    // With room for four packets the fast node's queue is in sight: from its fourth packet
    // on, it completes the next one at 80 or later, the slow node takes its share, and the
    // two policies are alike.
    let nodes = [node(16.0, 4), node(48.0, 4)];
    let wait = run(&trace, &nodes, true, "mct-wait");
    let mct = run(&trace, &nodes, true, "mct");
    assert!(wait.node_packets[1] >= 10, "{:?}", wait.node_packets);
    assert!(
        wait.makespan <= 1.05 * mct.makespan,
        "mct-wait {} against mct {}",
        wait.makespan,
        mct.makespan
    );
}

#[test]
fn a_waiting_packets_count_is_the_scans_only() {
    use crate::classic::{P, ecb, node, sched};
    use cryptodispatch::packet::{Len, NodeId};
    use cryptodispatch::sched::Scheduler;
    // The scenario above on the scheduler itself: unit times 16 and 48, a packet of room each,
    // 8 independent unit packets. The first two fill the nodes; of the six waiting, the scans
    // place none until a node completes. However many scans ran, a node's queued work is
    // what it holds: the waiting packets' counts are gone when each scan ends.
    let mut s = sched("mct-wait", vec![node(16.0, 1), node(48.0, 1)]);
    for task in 1..=8 {
        s.arrive(ecb(task, P)).unwrap();
    }
    let held = |s: &Scheduler<Len>| {
        [0, 1].map(|n| {
            let node = s.node(NodeId(n));
            (node.queued_packets(), node.queued_work())
        })
    };
    assert_eq!(held(&s), [(1, 16.0), (1, 48.0)]);
    // The fast node completes its packet: the next goes there, the rest still wait, and
    // nothing of them stays counted.
    s.complete(NodeId(0)).unwrap();
    assert_eq!(held(&s), [(1, 16.0), (1, 48.0)]);
}
