//! `paper-adaptive` (its α rule, its placements, strategy 1), the bursty workload generator,
//! and the `cryptodispatch-bench policies` subcommand.
//!
//! The hand-computed case used throughout: two nodes with unit times 10 (node 0) and 24
//! (node 1) for unit packets of P = 16 bytes, each with room for 8 packets (128 bytes). Their
//! rates are ρ_0 = 16/10 = 1.6 and ρ_1 = 16/24 = 2/3 bytes per time unit.

use std::path::PathBuf;
use std::process::Command;

use cryptodispatch::packet::UnitTimes;
use cryptodispatch::packet::{ClusterId, Cmd, Len, Mode, NodeId, Packet, PacketMeta, TaskId};
use cryptodispatch::sched::policy::PaperAdaptive;
use cryptodispatch::sched::{
    Admission, Affinity, ClusterConfig, ClusterView, NodeConfig, NodeStatus, Policy, PolicySpec,
    SchedConfig, Scheduler,
};
use cryptodispatch::sim::workload::Burst;
use cryptodispatch::sim::{NodeSet, WorkloadSpec};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

const P: u64 = 16;

fn adaptive() -> PolicySpec {
    "paper-adaptive".parse().unwrap()
}

fn scheduler(unit_times: &[f64], cap_packets: u64, policy: &PolicySpec) -> Scheduler<Len> {
    let config = SchedConfig {
        clusters: vec![ClusterConfig {
            nodes: unit_times
                .iter()
                .map(|&t| NodeConfig::new(UnitTimes::uniform(t), cap_packets * P))
                .collect(),
            queue_len: 64,
            max_packet: P,
        }],
        wait_queue_len: 0,
        affinity: Affinity::Strict,
        unit_len: P,
        admission: Admission::Fifo,
    };
    Scheduler::new(config, policy).unwrap()
}

fn packet(task: u64, dependent: bool) -> Packet<Len> {
    let mode = if dependent { Mode::Cbc } else { Mode::Ecb };
    Packet::new(
        PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0)).dependent(mode.is_chained()),
        Len(P),
    )
}

fn meta(task: u64, dependent: bool, len: u64) -> PacketMeta {
    PacketMeta {
        len,
        ..packet(task, dependent).meta
    }
}

/// Arrives one single-packet independent job per entry, each placed before the next arrives
/// (nothing completes); returns the node of each.
fn place_independent(s: &mut Scheduler<Len>, count: u64) -> Vec<u32> {
    (1..=count)
        .map(|task| {
            s.arrive(packet(task, false)).unwrap();
            let d: Vec<_> = s.dispatches().collect();
            assert_eq!(d.len(), 1, "packet {task} was placed at once");
            d[0].node.0
        })
        .collect()
}

/// The status rows of the (only) cluster, as the balancer hands them to policies.
fn rows(s: &Scheduler<Len>) -> Vec<NodeStatus> {
    s.cluster_nodes(ClusterId(0))
        .map(|i| s.node(NodeId(i as u32)).clone())
        .collect()
}

#[test]
fn alpha_of_the_hand_computed_empty_case() {
    // Empty nodes, one independent packet of 16 bytes, nothing else waiting:
    // Q = 2·16 = 32 bytes, k = Q·(ρ_0 − ρ_1)/(ρ_0 + ρ_1) = 32·(14/15)/(34/15) = 448/34,
    // α = k/(128 + k) = 448/4800 = 7/75.
    let s = scheduler(&[10.0, 24.0], 8, &adaptive());
    let rows = rows(&s);
    let view = ClusterView::with_backlog(&rows, 1);
    let alpha = PaperAdaptive::alpha(&view, &meta(1, false, P));
    assert!((alpha - 7.0 / 75.0).abs() < 1e-12, "alpha = {alpha}");
    // A dependent packet counts 16 times: Q = 256, k = 256·14/34, α = k/(128 + k) = 0.4516…
    let alpha = PaperAdaptive::alpha(&view, &meta(1, true, P));
    let k = 256.0 * 14.0 / 34.0;
    assert!((alpha - k / (128.0 + k)).abs() < 1e-12, "alpha = {alpha}");
}

#[test]
fn two_nodes_are_filled_as_by_shortest_expected_delay() {
    // The rule is exact for two nodes: the packet goes to node 0 iff (q_0 + 1)·10 < (q_1 + 1)·24,
    // q in packets. By hand: 10<24, 20<24, 30>24 (node 1), 30<48, 40<48, 50>48 (node 1),
    // 50<72, 60<72, 70<72, 80>72 (node 1), 80<96 (node 0 is now full), then node 1 only.
    let mut s = scheduler(&[10.0, 24.0], 8, &adaptive());
    assert_eq!(
        place_independent(&mut s, 16),
        [0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1]
    );
    // The paper's fixed α = 0.05 alternates instead: node 0 wins only while it holds no more
    // than node 1 (0.05 < 0.95·(1/8)).
    let mut s = scheduler(&[10.0, 24.0], 8, &PolicySpec::paper_defaults());
    assert_eq!(place_independent(&mut s, 8), [0, 1, 0, 1, 0, 1, 0, 1]);
}

#[test]
fn a_dependent_job_goes_to_the_fast_node_where_an_independent_packet_would_not() {
    // Two packets on node 0 (q = 2, 0). Independent: Q = 32 + 2·16 = 64, k = 64·14/34,
    // α = 0.1707: W_0 = α + (1−α)·0.75 = 0.793 < W_1 = 1 − α = 0.829 → node 1.
    // Dependent: Q = 32 + 16·16 = 288, α = 0.481: W_0 = 0.870 > W_1 = 0.519 → node 0.
    let mut s = scheduler(&[10.0, 24.0], 8, &adaptive());
    assert_eq!(place_independent(&mut s, 2), [0, 0]);
    let rows = rows(&s);
    let view = ClusterView::with_backlog(&rows, 1);
    let mut policy = PaperAdaptive::new();
    assert_eq!(policy.select(&view, &meta(10, false, P)), Some(1));
    let a = policy.last_alpha().unwrap();
    assert!((a - (64.0 * 14.0 / 34.0) / (128.0 + 64.0 * 14.0 / 34.0)).abs() < 1e-12);
    assert_eq!(policy.select(&view, &meta(11, true, P)), Some(0));
    assert!(policy.last_alpha().unwrap() > a);

    // Through the scheduler: the next independent packet goes to node 1, a new CBC job to 0.
    s.arrive(packet(20, false)).unwrap();
    assert_eq!(s.dispatches().map(|d| d.node.0).collect::<Vec<_>>(), [1]);
    s.arrive(packet(21, true)).unwrap();
    assert_eq!(s.dispatches().map(|d| d.node.0).collect::<Vec<_>>(), [0]);
}

#[test]
fn alpha_rises_with_the_backlog_and_the_queued_work() {
    let mut s = scheduler(&[10.0, 24.0], 8, &adaptive());
    let m = meta(100, false, P);
    let empty = rows(&s);
    let alphas: Vec<f64> = [1, 2, 8, 32]
        .iter()
        .map(|&b| PaperAdaptive::alpha(&ClusterView::with_backlog(&empty, b), &m))
        .collect();
    assert!(alphas.windows(2).all(|w| w[0] < w[1]), "{alphas:?}");
    // A backlog of 0 (the view of a packet already out of the queue) counts like 1.
    assert_eq!(
        PaperAdaptive::alpha(&ClusterView::with_backlog(&empty, 0), &m),
        alphas[0]
    );

    place_independent(&mut s, 6);
    let busy = rows(&s);
    let busier = PaperAdaptive::alpha(&ClusterView::with_backlog(&busy, 1), &m);
    assert!(busier > alphas[0], "{busier} vs {}", alphas[0]);
    assert!(busier < 1.0);
}

#[test]
fn alpha_falls_as_capacity_grows() {
    // The same three packets queued, on nodes of 8, 32 and 128 packets.
    let m = meta(100, false, P);
    let alphas: Vec<f64> = [8, 32, 128]
        .iter()
        .map(|&cap| {
            let mut s = scheduler(&[10.0, 24.0], cap, &adaptive());
            place_independent(&mut s, 3);
            let r = rows(&s);
            PaperAdaptive::alpha(&ClusterView::with_backlog(&r, 4), &m)
        })
        .collect();
    assert!(alphas.windows(2).all(|w| w[0] > w[1]), "{alphas:?}");
}

#[test]
fn alpha_grows_with_the_speed_spread_and_is_zero_for_equal_nodes() {
    let m = meta(100, false, P);
    let alpha = |times: &[f64]| {
        let s = scheduler(times, 8, &adaptive());
        let r = rows(&s);
        PaperAdaptive::alpha(&ClusterView::with_backlog(&r, 4), &m)
    };
    assert_eq!(alpha(&[20.0, 20.0, 20.0]), 0.0);
    let (narrow, wide) = (alpha(&[16.0, 20.0]), alpha(&[16.0, 48.0]));
    assert!(
        0.0 < narrow && narrow < wide && wide < 1.0,
        "{narrow} {wide}"
    );

    // Equal nodes: β = 1, so the emptiest node wins, ties to the lowest index.
    let mut s = scheduler(&[20.0, 20.0, 20.0], 8, &adaptive());
    assert_eq!(place_independent(&mut s, 6), [0, 1, 2, 0, 1, 2]);
}

#[test]
fn the_policy_is_named_and_parsed() {
    let spec: PolicySpec = "paper-adaptive".parse().unwrap();
    assert_eq!(spec.to_string(), "paper-adaptive");
    assert_eq!(spec.build().unwrap().name(), "paper-adaptive");
    assert_eq!(PaperAdaptive::new().name(), "paper-adaptive");
    assert_eq!(PaperAdaptive::new().last_alpha(), None);
}

/// One step of a random history: a packet arrives, or a node completes its head packet.
#[derive(Debug, Clone)]
enum Step {
    Arrive {
        len: u64,
        dependent: bool,
        cmd: usize,
    },
    Complete(usize),
}

fn step(max_len: u64) -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1..=max_len, any::<bool>(), 0..4usize)
            .prop_map(|(len, dependent, cmd)| Step::Arrive { len, dependent, cmd }),
        1 => (0..8usize).prop_map(Step::Complete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the state, paper-adaptive names a node with room for the packet, and declines
    /// only when no node has room; α stays in [0, 1) (the loads here are far from rounding it
    /// to 1).
    #[test]
    fn the_choice_is_always_a_candidate_with_room(
        times in prop::collection::vec(prop::array::uniform4(1.0f64..100.0), 1..6),
        caps in prop::collection::vec(4u64..40, 6),
        steps in prop::collection::vec(step(4), 0..120),
        len in 1u64..=6,
        dependent in any::<bool>(),
        cmd in 0..4usize,
        backlog in 0usize..80,
    ) {
        let config = SchedConfig {
            clusters: vec![ClusterConfig {
                nodes: times
                    .iter()
                    .zip(&caps)
                    .map(|(t, &c)| NodeConfig::new(UnitTimes(*t), c))
                    .collect(),
                queue_len: 16,
                max_packet: 4,
            }],
            wait_queue_len: 0,
            affinity: Affinity::Strict,
            unit_len: 1,
            admission: Admission::Fifo,
        };
        let mut s: Scheduler<Len> = Scheduler::new(config, &adaptive()).unwrap();
        let n = times.len();
        let mut task = 0;
        for st in steps {
            match st {
                Step::Arrive { len, dependent, cmd } => {
                    task += 1;
                    let mode = if dependent { Mode::Cbc } else { Mode::Ecb };
                    let p = Packet::new(PacketMeta::new(TaskId(task), Cmd::ALL[cmd], ClusterId(0)).dependent(mode.is_chained()), Len(len));
                    // A full core hands the packet back: it is simply not offered again.
                    let _ = s.arrive(p);
                }
                Step::Complete(i) => {
                    let _ = s.complete(NodeId((i % n) as u32));
                }
            }
            s.dispatches().for_each(drop);
            for i in 0..n {
                let node = s.node(NodeId(i as u32));
                prop_assert!(node.queued_bytes() <= node.capacity());
            }
        }
        let rows = rows(&s);
        let view = ClusterView::with_backlog(&rows, backlog);
        let mut m = PacketMeta::new(TaskId(1_000_000), Cmd::ALL[cmd], ClusterId(0)).dependent(dependent);
        m.len = len;
        let alpha = PaperAdaptive::alpha(&view, &m);
        prop_assert!((0.0..1.0).contains(&alpha), "alpha {}", alpha);
        let candidates: Vec<usize> = view.candidates(&m).collect();
        let mut policy = PaperAdaptive::new();
        match policy.select(&view, &m) {
            Some(i) => {
                prop_assert!(candidates.contains(&i), "chose {} of {:?}", i, candidates);
                prop_assert!(rows[i].has_room(len));
            }
            None => prop_assert!(candidates.is_empty(), "declined with {:?} free", candidates),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The bursty workload
// ---------------------------------------------------------------------------------------------

fn bursty() -> WorkloadSpec {
    WorkloadSpec {
        packets: 700,
        load: Some(0.8),
        burst: Some(Burst {
            packets: 64.0,
            duty: 0.25,
        }),
        ..WorkloadSpec::default()
    }
}

#[test]
fn the_default_workload_is_not_bursty_and_a_full_duty_cycle_changes_nothing() {
    assert_eq!(WorkloadSpec::default().burst, None);
    let nodes = NodeSet::paper(4).build(32, &mut ChaCha8Rng::seed_from_u64(3));
    let plain = WorkloadSpec::default().generate(&nodes, 1, &mut ChaCha8Rng::seed_from_u64(9));
    let always_on = WorkloadSpec {
        burst: Some(Burst {
            packets: 64.0,
            duty: 1.0,
        }),
        ..WorkloadSpec::default()
    }
    .generate(&nodes, 1, &mut ChaCha8Rng::seed_from_u64(9));
    assert_eq!(plain, always_on);
}

#[test]
fn bursty_traces_are_deterministic_per_seed() {
    let nodes = NodeSet::paper(4).build(32, &mut ChaCha8Rng::seed_from_u64(3));
    let gen_with = |seed| bursty().generate(&nodes, 1, &mut ChaCha8Rng::seed_from_u64(seed));
    assert_eq!(gen_with(5), gen_with(5));
    assert_ne!(gen_with(5), gen_with(6));
}

#[test]
fn bursty_traces_arrive_in_on_periods_with_silences_between() {
    let nodes = NodeSet::paper(4).build(32, &mut ChaCha8Rng::seed_from_u64(3));
    let spec = bursty();
    let trace = spec.generate(&nodes, 1, &mut ChaCha8Rng::seed_from_u64(5));
    let rate = spec.arrival_rate(&nodes, 1).unwrap();
    let (on, off) = spec.burst.unwrap().periods(rate);
    // A cycle brings 64 packets on average: on = 0.25 and off = 0.75 of 64 / rate.
    assert!((on + off - 64.0 / rate).abs() < 1e-9 * (on + off));
    assert!((off - 3.0 * on).abs() < 1e-9 * off);

    let arrivals: Vec<f64> = trace.records().iter().map(|r| r.arrival).collect();
    assert_eq!(arrivals.len(), 700);
    for &a in &arrivals {
        let phase = a % (on + off);
        assert!(phase <= on * (1.0 + 1e-9), "arrival {a} in an off period");
    }
    let gaps: Vec<f64> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    let silences = gaps.iter().filter(|&&g| g >= off).count();
    let cycles = (arrivals[699] / (on + off)).floor() as usize;
    // Every cycle boundary crossed is a silence of at least `off` (700 packets ≈ 11 bursts).
    assert!(
        silences >= 8 && silences <= cycles,
        "{silences} silences, {cycles} cycles"
    );

    // The plain stream at the same mean load has no such gaps.
    let plain = WorkloadSpec {
        burst: None,
        ..spec.clone()
    }
    .generate(&nodes, 1, &mut ChaCha8Rng::seed_from_u64(5));
    let longest = plain
        .records()
        .windows(2)
        .map(|w| w[1].arrival - w[0].arrival)
        .fold(0.0, f64::max);
    assert!(
        longest < off / 4.0,
        "plain stream gap {longest} vs off {off}"
    );
    // Same mean rate: the last arrivals are within a cycle or two of each other.
    let span_plain = plain.records()[699].arrival;
    assert!((arrivals[699] - span_plain).abs() < 2.0 * (on + off));
}

// ---------------------------------------------------------------------------------------------
// cryptodispatch-bench policies
// ---------------------------------------------------------------------------------------------

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "cryptodispatch-policies-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cryptodispatch-bench"))
        .args(args)
        .output()
        .expect("run cryptodispatch-bench")
}

#[test]
fn the_policies_subcommand_writes_its_tables() {
    let dir = Scratch::new("run");
    let out = dir.0.to_str().unwrap();
    let r = bench(&[
        "policies",
        "--no-live",
        "--seeds",
        "2",
        "--policies",
        "paper,hhs-acdid,paper-adaptive",
        "--out",
        out,
    ]);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    for title in [
        "paper-adaptive against the best fixed alpha",
        "paper:",
        "bursty:",
        "hetero:",
    ] {
        assert!(stdout.contains(title), "no {title:?} table:\n{stdout}");
    }
    assert!(
        !stdout.contains("live-hetero"),
        "--no-live ran the live part"
    );

    let csv = std::fs::read_to_string(dir.0.join("policies.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("setting,source,nodes,packets,policy,runs,makespan_mean,makespan_std,reference,ratio")
    );
    let mut count = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), 10, "{line}");
        assert!(["paper", "bursty", "hetero"].contains(&cells[0]), "{line}");
        assert_eq!(cells[1], "sim", "{line}");
        assert!(
            ["paper", "hhs-acdid", "paper-adaptive"].contains(&cells[4]),
            "{line}"
        );
        assert_eq!(cells[5], "2");
        let makespan: f64 = cells[6].parse().unwrap();
        let bound: f64 = cells[8].parse().unwrap();
        let ratio: f64 = cells[9].parse().unwrap();
        assert!(
            bound > 0.0 && makespan >= bound - 1e-3,
            "makespan below the bound: {line}"
        );
        assert!(ratio >= 1.0 - 1e-4, "{line}");
        count += 1;
    }
    // paper: 3 points, bursty: 3 points, hetero: 2 points; 3 policies each.
    assert_eq!(count, (3 + 3 + 2) * 3);

    let adaptive = std::fs::read_to_string(dir.0.join("policies_adaptive.csv")).unwrap();
    let mut lines = adaptive.lines();
    assert_eq!(
        lines.next(),
        Some(
            "nodes,cap,seeds,base_seed,best_alpha,best_mean,best_std,adaptive_mean,adaptive_std,ratio,diff_mean,diff_std,per_seed_best_mean,adaptive_mean_alpha"
        )
    );
    // Two node sets × the 8 capacities of experiment 1.
    assert_eq!(lines.count(), 16);
    for svg in ["policies.svg", "policies_adaptive.svg"] {
        let text = std::fs::read_to_string(dir.0.join(svg)).unwrap();
        assert!(text.starts_with("<svg"), "{svg}");
    }
}

#[test]
fn the_policies_subcommand_refuses_unknown_policies() {
    let dir = Scratch::new("unknown");
    let r = bench(&[
        "policies",
        "--no-live",
        "--seeds",
        "1",
        "--policies",
        "paper,fastest",
        "--out",
        dir.0.to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("fastest") && err.contains("paper-adaptive"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!dir.0.join("policies.csv").exists());
}
