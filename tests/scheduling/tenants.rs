//! Tenants in the scheduler core, through the simulator: with one tenant the order is the
//! job-level one exactly; with several, every backlogged tenant is served, in proportion to its
//! weight, whatever its number of jobs (deterministic scenarios and a property test over random
//! tenant mixes).

use std::collections::{BTreeMap, HashMap};

use cryptodispatch::packet::{Cmd, TenantId, UnitTimes};
use cryptodispatch::sched::{Admission, Affinity, PolicySpec};
use cryptodispatch::sim::{
    NodeModel, SimConfig, SimResult, Tenancy, Trace, TraceRecord, simulate, simulate_tenants,
};
use proptest::prelude::*;

/// A trace of jobs all arriving at time 0: `(task, packets, length)` each, independent.
fn backlog(jobs: &[(u64, u32, u64)]) -> Trace {
    let mut records = Vec::new();
    for &(task, packets, len) in jobs {
        for seq in 0..packets {
            records.push(TraceRecord {
                task,
                seq,
                dependent: false,
                arrival: 0.0,
                length: len,
                cmd: Cmd::Encrypt,
                last: seq + 1 == packets,
            });
        }
    }
    Trace::from_records(records).unwrap()
}

fn config(nodes: usize, capacity: u64) -> SimConfig {
    SimConfig {
        affinity: Affinity::InFlight,
        ..SimConfig::new(vec![
            NodeModel::new(UnitTimes::uniform(1.0), capacity);
            nodes
        ])
    }
    .with_admission(Admission::Fair)
}

/// Bytes each tenant had started by the time the first tenant ran out of work, in start order.
fn started_bytes(trace: &Trace, r: &SimResult, tenancy: &Tenancy) -> Vec<BTreeMap<TenantId, u64>> {
    let len: HashMap<(u64, u32), u64> = trace
        .records()
        .iter()
        .map(|x| ((x.task, x.seq), x.length))
        .collect();
    let mut left: BTreeMap<TenantId, u64> = BTreeMap::new();
    for x in trace.records() {
        *left.entry(tenancy.tenant_of[&x.task]).or_default() += x.length;
    }
    let mut order: Vec<_> = r.placements.iter().collect();
    order.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.node.cmp(&b.node)));
    let mut served: BTreeMap<TenantId, u64> = left.keys().map(|&t| (t, 0)).collect();
    let mut prefixes = Vec::new();
    for p in order {
        let t = tenancy.tenant_of[&p.task];
        let l = len[&(p.task, p.seq)];
        *served.get_mut(&t).unwrap() += l;
        *left.get_mut(&t).unwrap() -= l;
        if left.values().any(|&v| v == 0) {
            break;
        }
        prefixes.push(served.clone());
    }
    prefixes
}

#[test]
fn one_tenant_of_any_weight_leaves_the_order_unchanged() {
    let trace = backlog(&[(1, 40, 8), (2, 3, 2), (3, 17, 5), (4, 1, 1), (5, 60, 3)]);
    for policy in ["mct", "paper", "rr", "lc"] {
        let spec: PolicySpec = policy.parse().unwrap();
        let config = config(3, 16);
        let alone = simulate(&trace, &config, &spec).unwrap();
        let tenancy = Tenancy {
            tenant_of: (1..=5).map(|t| (t, TenantId(9))).collect(),
            weights: [(TenantId(9), 5)].into(),
        };
        let weighted = simulate_tenants(&trace, &config, &spec, &tenancy).unwrap();
        assert_eq!(alone.placements, weighted.placements, "{policy}");
    }
}

#[test]
fn weights_one_to_three_give_bytes_one_to_three_whatever_the_job_counts() {
    // Tenant 1: twenty jobs; tenant 2: one job, of weight 3.
    let mut jobs: Vec<(u64, u32, u64)> = (1..=20).map(|t| (t, 30, 8)).collect();
    jobs.push((100, 600, 8));
    let trace = backlog(&jobs);
    let tenancy = Tenancy {
        tenant_of: jobs
            .iter()
            .map(|&(t, _, _)| (t, TenantId(if t == 100 { 2 } else { 1 })))
            .collect(),
        weights: [(TenantId(2), 3)].into(),
    };
    let r = simulate_tenants(&trace, &config(2, 16), &"mct".parse().unwrap(), &tenancy).unwrap();
    let prefixes = started_bytes(&trace, &r, &tenancy);
    assert!(prefixes.len() > 400, "both backlogged for a while");
    // Over every window of 40 packets (ten rounds) once the arrivals are in (the first
    // packets went to idle nodes before tenant 2's had arrived), the byte shares are 1:3.
    for (from, to) in prefixes.iter().skip(20).zip(prefixes.iter().skip(60)) {
        let a = (to[&TenantId(1)] - from[&TenantId(1)]) as f64;
        let b = (to[&TenantId(2)] - from[&TenantId(2)]) as f64;
        let share = b / (a + b);
        assert!(
            (share - 0.75).abs() <= 0.1 * 0.75,
            "share {share} from {from:?} to {to:?}"
        );
    }
}

#[test]
fn without_tenants_a_tenant_with_many_jobs_would_take_most() {
    // The same mix with every job in one tenant: per job, twenty jobs get 20/21 of the bytes.
    // This is what the tenant level changes.
    let mut jobs: Vec<(u64, u32, u64)> = (1..=20).map(|t| (t, 30, 8)).collect();
    jobs.push((100, 600, 8));
    let trace = backlog(&jobs);
    let r = simulate(&trace, &config(2, 16), &"mct".parse().unwrap()).unwrap();
    let tenancy = Tenancy {
        tenant_of: jobs
            .iter()
            .map(|&(t, _, _)| (t, TenantId(if t == 100 { 2 } else { 1 })))
            .collect(),
        weights: BTreeMap::new(),
    };
    let prefixes = started_bytes(&trace, &r, &tenancy);
    let last = prefixes.last().unwrap();
    let share = last[&TenantId(2)] as f64 / (last[&TenantId(1)] + last[&TenantId(2)]) as f64;
    assert!(share < 0.1, "one job among 21 got {share}");
}

#[test]
fn a_zero_weight_is_refused() {
    let trace = backlog(&[(1, 2, 1)]);
    let tenancy = Tenancy {
        tenant_of: [(1, TenantId(1))].into(),
        weights: [(TenantId(1), 0)].into(),
    };
    let err = simulate_tenants(&trace, &config(1, 4), &"mct".parse().unwrap(), &tenancy);
    assert!(err.is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random tenant mixes, all backlogged from time 0: until the first tenant runs out, every
    /// tenant has been served its weighted share of the bytes to within a few turns' quanta
    /// (none starves), whatever its number of jobs and packet lengths.
    #[test]
    fn backlogged_tenants_are_served_by_weight(
        tenants in prop::collection::vec((1u32..=4, 1usize..=6), 2..=4),
        lens in prop::collection::vec(1u64..=8, 1..=8),
        nodes in 1usize..=3,
        policy in prop_oneof![Just("mct"), Just("paper"), Just("rr"), Just("lc")],
    ) {
        let mut jobs = Vec::new();
        let mut tenancy = Tenancy::default();
        let mut task = 1;
        for (i, &(weight, njobs)) in tenants.iter().enumerate() {
            let tenant = TenantId(i as u32 + 1);
            tenancy.weights.insert(tenant, weight);
            for j in 0..njobs {
                // Enough work per tenant for several rounds of the largest weight.
                let packets = 400 * weight / njobs as u32 + 1;
                jobs.push((task, packets, lens[(task as usize + j) % lens.len()]));
                tenancy.tenant_of.insert(task, tenant);
                task += 1;
            }
        }
        let trace = backlog(&jobs);
        let quantum = trace.max_length();
        let r = simulate_tenants(&trace, &config(nodes, 2 * quantum), &policy.parse().unwrap(), &tenancy).unwrap();
        prop_assert_eq!(r.placements.len(), trace.len());
        let total_weight: u32 = tenants.iter().map(|t| t.0).sum();
        let prefixes = started_bytes(&trace, &r, &tenancy);
        prop_assert!(!prefixes.is_empty());
        // DRR's bound: a tenant is behind its share by at most a turn of every tenant plus what
        // the nodes hold.
        let slack = (2 * u64::from(total_weight) * quantum + nodes as u64 * 2 * quantum) as f64;
        for served in &prefixes {
            let total: u64 = served.values().sum();
            for (t, &s) in served {
                let w = f64::from(tenancy.weights[t]);
                let fair = total as f64 * w / f64::from(total_weight);
                prop_assert!(s as f64 >= fair - slack, "{t:?} got {s} of {total}, fair {fair}");
            }
        }
    }
}

/// A tenant whose turn ran out in the middle of its job's turn, while another tenant's job took
/// the node to its end, still has its job placed once that tenant has gone: a placement pass
/// with this tenant alone places its next packet on the idle node (the pass used to give up
/// after the job's stale turn, and with nothing on the node to complete, nothing came after).
#[test]
fn a_tenant_left_alone_after_its_turn_ran_out_mid_job_is_still_placed() {
    use cryptodispatch::packet::{ClusterId, Len, NodeId, Packet, PacketMeta, TaskId};
    use cryptodispatch::sched::{ClusterConfig, NodeConfig, SchedConfig, Scheduler};

    const LEN: u64 = 16;
    let (light, heavy) = (TenantId(1), TenantId(2));
    for affinity in [Affinity::Strict, Affinity::InFlight] {
        let config = SchedConfig {
            clusters: vec![ClusterConfig {
                // Room for one packet: every completion is a pass of its own.
                nodes: vec![NodeConfig::new(UnitTimes::uniform(1.0), LEN)],
                queue_len: 64,
                max_packet: LEN,
            }],
            wait_queue_len: 0,
            affinity,
            unit_len: LEN,
            admission: Admission::Fair,
        };
        let mut s: Scheduler<Len> = Scheduler::new(config, &PolicySpec::default()).unwrap();
        s.set_tenant_weight(heavy, 3).unwrap();
        let packet = |tenant: TenantId, task: u64, seq: u32, n: u32| {
            let meta = PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0))
                .at(seq, seq + 1 == n)
                .dependent(true)
                .tenant(tenant);
            Packet::new(meta, Len(LEN))
        };
        // The light tenant's job of ten packets and the heavy tenant's of three, waiting
        // together: the light job places one packet and the light tenant's turn ends; the
        // heavy tenant's turn (three packets) outlasts its job.
        let mut queue: std::collections::VecDeque<_> = (0..10)
            .map(|seq| packet(light, 1, seq, 10))
            .chain((0..3).map(|seq| packet(heavy, 2, seq, 3)))
            .collect();
        s.arrive_many(&mut queue, |e| panic!("refused: {e}"));
        let mut done = Vec::new();
        while let Ok(meta) = s.complete(NodeId(0)) {
            done.push((meta.task.0, meta.seq));
        }
        assert_eq!(
            s.cluster_queue_len(ClusterId(0)),
            0,
            "{affinity:?}: packets left waiting with the node idle; completed {done:?}"
        );
        assert_eq!(done.len(), 13, "{affinity:?}: {done:?}");
    }
}

/// The first of two tenants' share of the jobs served in a closed loop: each keeps its window
/// of one-packet jobs of 128 bytes in flight, sending another as one ends, on `nodes` nodes of
/// 64 slots and 8 lanes that take turns completing their oldest packet.
fn closed_loop_share(weights: [u32; 2], window: [u64; 2], nodes: usize) -> f64 {
    use cryptodispatch::packet::{ClusterId, Len, NodeId, Packet, PacketMeta, TaskId};
    use cryptodispatch::sched::{ClusterConfig, NodeConfig, SchedConfig, Scheduler};

    const LEN: u64 = 128;
    let node = NodeConfig::new(UnitTimes::uniform(1.0), 128 * 1024)
        .with_slots(64)
        .with_lanes(8);
    let config = SchedConfig {
        clusters: vec![ClusterConfig {
            nodes: vec![node; nodes],
            queue_len: 4096,
            max_packet: 16 * 1024,
        }],
        wait_queue_len: 0,
        affinity: Affinity::InFlight,
        unit_len: LEN,
        admission: Admission::Fair,
    };
    let mut s: Scheduler<Len> = Scheduler::new(config, &PolicySpec::default()).unwrap();
    let tenants = [TenantId(1), TenantId(2)];
    for (t, w) in tenants.iter().zip(weights) {
        s.set_tenant_weight(*t, w).unwrap();
    }
    let mut next_task = 0u64;
    let mut send = |s: &mut Scheduler<Len>, tenant: TenantId| {
        next_task += 1;
        let meta = PacketMeta::new(TaskId(next_task), Cmd::Encrypt, ClusterId(0))
            .at(0, true)
            .tenant(tenant);
        s.arrive(Packet::new(meta, Len(LEN)))
            .unwrap_or_else(|_| panic!("refused"));
    };
    for (&t, &n) in tenants.iter().zip(&window) {
        for _ in 0..n {
            send(&mut s, t);
        }
    }
    let mut served = [0u64; 2];
    for i in 0..40_000usize {
        let node = NodeId((i % nodes) as u32);
        let Ok(meta) = s.complete(node) else {
            continue;
        };
        let k = usize::from(meta.tenant == tenants[1]);
        if i >= 10_000 {
            served[k] += 1;
        }
        send(&mut s, tenants[k]);
    }
    served[0] as f64 / (served[0] + served[1]) as f64
}

/// Asserts the first tenant's closed-loop share is its weight's within 10%.
fn assert_closed_loop_share(weights: [u32; 2], window: [u64; 2], nodes: usize) {
    assert_closed_loop_share_within(weights, window, nodes, 0.1);
}

/// The first tenant's closed-loop share ÷ its weight's share.
fn closed_loop_ratio(weights: [u32; 2], window: [u64; 2], nodes: usize) -> f64 {
    let want = f64::from(weights[0]) / f64::from(weights[0] + weights[1]);
    closed_loop_share(weights, window, nodes) / want
}

/// Asserts the first tenant's closed-loop share is its weight's within `tolerance` of it.
fn assert_closed_loop_share_within(
    weights: [u32; 2],
    window: [u64; 2],
    nodes: usize,
    tolerance: f64,
) {
    let ratio = closed_loop_ratio(weights, window, nodes);
    assert!(
        (ratio - 1.0).abs() <= tolerance,
        "weights {weights:?}, windows of {window:?} on {nodes} node(s): the first tenant's \
         share is {ratio:.3} times its weight's"
    );
}

/// Tenants whose clients keep a window of jobs in flight, each job sent again as one ends (a
/// closed loop), are served by weight even when the windows fit in the node queue: what a node
/// holds it serves in order, so without a bound on each tenant's part of it the shares would
/// follow the windows (equal here), not the weights.
#[test]
fn closed_loop_tenants_share_by_weight_when_their_windows_fill_the_node_queue() {
    for (weights, window, nodes) in [
        ([1u32, 3], [64u64, 64], 1usize),
        ([1, 3], [40, 40], 2),
        ([3, 1], [96, 96], 1),
        ([1, 10], [64, 64], 1),
        ([2, 7], [128, 128], 2),
        ([1, 1], [16, 16], 2),
        ([1, 3], [24, 24], 2),
    ] {
        assert_closed_loop_share(weights, window, nodes);
    }
}

/// A tenant with more than a turn waiting (400 jobs, a turn of weight 1 being 128) beside a
/// heavier one whose window is small is held to its share of what the nodes hold as well:
/// left to the turns, it got about 0.67 against 0.25 (docs/ALGORITHM.md §15.7, "What the
/// nodes hold").
#[test]
fn a_deep_tenant_beside_a_small_window_shares_by_weight() {
    for (weights, window, nodes) in [
        ([1u32, 3], [400u64, 64], 1usize),
        ([1, 3], [200, 40], 2),
        ([3, 1], [48, 300], 1),
        ([1, 2], [300, 48], 2),
    ] {
        assert_closed_loop_share(weights, window, nodes);
    }
}

/// With windows of a few dozen jobs a tenant's share of what the nodes hold is a few packets,
/// and the rule that holds it there compares the two tenants as each would stand with half
/// the packet placed: a rule that let the lighter tenant hold half a packet more than its
/// share gave it 0.272–0.273 against 0.25 with 24 jobs per tenant, 0.28 behind the daemons
/// (docs/ALGORITHM.md §15.7, "What the nodes hold").
#[test]
fn small_windows_share_by_weight_within_a_few_percent() {
    for (weights, window, nodes) in [
        ([1u32, 3], [24u64, 24], 2usize),
        ([1, 3], [24, 24], 1),
        ([3, 1], [24, 24], 2),
        ([2, 7], [32, 32], 2),
        ([1, 3], [48, 48], 2),
    ] {
        assert_closed_loop_share_within(weights, window, nodes, 0.03);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Closed loops of two tenants of weights 1 to 4, windows of 16 to 256 jobs (each at
    /// least a node's lanes on every node), one to three nodes: the first tenant's share is
    /// its weight's within 10%. Over a grid of 962 such loops, the rule that let the asking
    /// tenant hold half a packet over its share missed in 25 (up to 1.25 times its share at
    /// weights 1:4), the rule comparing both with half the packet added in none (docs/RESULTS.md,
    /// Tenants, "Both sides of half a packet").
    #[test]
    fn closed_loops_share_by_weight(
        weights in (1u32..=4, 1u32..=4),
        window in 16u64..=128,
        other in 0usize..3,
        nodes in 1usize..=3,
    ) {
        let second = match other {
            0 => window,
            1 => window / 2 + 8,
            _ => window * 2,
        };
        prop_assume!(window.min(second) >= 8 * nodes as u64);
        assert_closed_loop_share_within([weights.0, weights.1], [window, second], nodes, 0.1);
    }
}

/// The grid the property test draws from, whole: 962 closed loops, each loop's share ÷ its
/// weight's printed (with the rows docs/RESULTS.md quotes at weights 2:7 and 1:10), none
/// outside 10% (some windows come twice: half of 16, plus 8, is 16). About 25 seconds in a
/// release build here, too long for the debug suite:
/// `cargo test --release --test scheduling closed_loop_grid -- --ignored --nocapture`
/// (docs/RESULTS.md, Tenants, "Both sides of half a packet").
#[test]
#[ignore = "the whole grid; run in release, see its doc"]
fn closed_loop_grid() {
    let ratio = closed_loop_ratio;
    for (weights, nodes) in [([2u32, 7], 2usize), ([1, 10], 1)] {
        let row: Vec<String> = [16u64, 24, 32, 48]
            .iter()
            .map(|&w| format!("{w}: {:.3}", ratio(weights, [w, w], nodes)))
            .collect();
        println!("{weights:?} on {nodes} node(s): {}", row.join(", "));
    }
    let mut outside = Vec::new();
    let mut loops = 0;
    for a in 1u32..=4 {
        for b in 1u32..=4 {
            if a == b && a > 1 {
                continue;
            }
            for w in [16u64, 20, 24, 32, 40, 48, 64, 96, 128] {
                for other in [w, w / 2 + 8, w * 2] {
                    for nodes in 1usize..=3 {
                        if w.min(other) < 8 * nodes as u64 {
                            continue;
                        }
                        loops += 1;
                        let r = ratio([a, b], [w, other], nodes);
                        println!("{a}:{b}, windows {w} and {other}, {nodes} node(s): {r:.3}");
                        if (r - 1.0).abs() > 0.1 {
                            outside.push(format!("{a}:{b} {w}/{other} on {nodes}: {r:.3}"));
                        }
                    }
                }
            }
        }
    }
    println!("{loops} loops, {} outside 10%", outside.len());
    assert!(outside.is_empty(), "{outside:?}");
}
