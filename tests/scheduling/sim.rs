//! The simulator: exact hand-computed runs, determinism, the lower bound, and the trace format
//! through the benchmark binary.

use std::process::Command;

use cryptodispatch::packet::Cmd;
use cryptodispatch::packet::UnitTimes;
use cryptodispatch::sched::{Affinity, PolicySpec};
use cryptodispatch::sim::{
    NodeModel, NodeSet, SimConfig, Trace, TraceRecord, WorkloadSpec, lower_bound, simulate,
};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

fn node(t: f64, cap: u64) -> NodeModel {
    NodeModel::new(UnitTimes::uniform(t), cap)
}

fn rec(task: u64, seq: u32, dependent: bool, arrival: f64, length: u64) -> TraceRecord {
    TraceRecord {
        task,
        seq,
        dependent,
        arrival,
        length,
        cmd: Cmd::Encrypt,
        last: false,
    }
}

/// Two nodes (unit times 10 and 20, capacity 2 units); a dependent job of two unit packets and
/// an independent unit packet at time 0, and an independent packet of length 2 at time 5.
fn small() -> (Trace, SimConfig) {
    let trace = Trace::from_records(vec![
        rec(1, 0, true, 0.0, 1),
        rec(2, 0, false, 0.0, 1),
        rec(1, 1, true, 0.0, 1),
        rec(3, 0, false, 5.0, 2),
    ])
    .unwrap();
    (trace, SimConfig::new(vec![node(10.0, 2), node(20.0, 2)]))
}

#[test]
fn hand_computed_run_under_paper() {
    let (trace, config) = small();
    let r = simulate(&trace, &config, &PolicySpec::paper_defaults()).unwrap();
    // t=0: job 1 → node 0 (W0 = 1.0 > W1 = 0.95), 0..10; job 2 → node 1 (W0 = 0.525 < 0.95),
    // 0..20; job 1's second packet follows to node 0, 10..20. t=5: job 3 (length 2) finds no
    // node with 2 units free; at t=20 node 1 frees first and takes it: 20 + 20·2 = 60.
    let placed: Vec<(u64, u32, usize, f64, f64)> = r
        .placements
        .iter()
        .map(|p| (p.task, p.seq, p.node, p.start, p.end))
        .collect();
    assert_eq!(
        placed,
        vec![
            (1, 0, 0, 0.0, 10.0),
            (2, 0, 1, 0.0, 20.0),
            (1, 1, 0, 10.0, 20.0),
            (3, 0, 1, 20.0, 60.0)
        ]
    );
    assert_eq!(r.makespan, 60.0);
    assert_eq!(r.node_packets, vec![2, 2]);
    assert_eq!(r.node_busy, vec![20.0, 60.0]);
    // Latencies: 10, 20, 20, 55.
    assert_eq!(r.mean_latency(), 105.0 / 4.0);
    assert_eq!(r.p99_latency(), 55.0);
}

#[test]
fn hand_computed_run_under_hhs_acdid() {
    let (trace, config) = small();
    let r = simulate(&trace, &config, &PolicySpec::hhs_acdid()).unwrap();
    // Jobs in turn: 1 → node 0, 2 → node 1, 3 → node 0 (waits for both units of node 0, free
    // at t=20): 20 + 10·2 = 40. Placements are listed in completion order; at t=20 node 1's
    // completion was scheduled first (at t=0), so it comes before node 0's.
    let placed: Vec<(u64, usize, f64, f64)> = r
        .placements
        .iter()
        .map(|p| (p.task, p.node, p.start, p.end))
        .collect();
    assert_eq!(
        placed,
        vec![
            (1, 0, 0.0, 10.0),
            (2, 1, 0.0, 20.0),
            (1, 0, 10.0, 20.0),
            (3, 0, 20.0, 40.0)
        ]
    );
    assert_eq!(r.makespan, 40.0);
}

/// One node (unit time 10, capacity 8 units): an independent packet, then dependent packets of
/// jobs 1, 2, 1 (its second packet) and 4, all at time 0.
fn lanes_scenario(lanes: u32) -> Vec<(u64, u32, f64, f64)> {
    lanes_run(
        vec![
            rec(5, 0, false, 0.0, 1),
            rec(1, 0, true, 0.0, 1),
            rec(2, 0, true, 0.0, 2),
            rec(1, 1, true, 0.0, 1),
            rec(4, 0, true, 0.0, 1),
        ],
        lanes,
    )
}

/// `records` on one node (unit time 10, capacity 8 units) of `lanes` lanes: each placement's
/// task, seq, start and end.
fn lanes_run(records: Vec<TraceRecord>, lanes: u32) -> Vec<(u64, u32, f64, f64)> {
    let trace = Trace::from_records(records).unwrap();
    let config = SimConfig::new(vec![node(10.0, 8).with_lanes(lanes)]);
    let r = simulate(&trace, &config, &PolicySpec::default()).unwrap();
    // The node never idles: it is busy until the last set ends, each set counted once.
    assert_eq!(r.node_busy, vec![r.makespan]);
    r.placements
        .iter()
        .map(|p| (p.task, p.seq, p.start, p.end))
        .collect()
}

#[test]
fn a_node_with_lanes_serves_dependent_packets_of_different_jobs_together() {
    // One lane: the paper's node, one packet at a time.
    assert_eq!(
        lanes_scenario(1),
        vec![
            (5, 0, 0.0, 10.0),
            (1, 0, 10.0, 20.0),
            (2, 0, 20.0, 40.0),
            (1, 1, 40.0, 50.0),
            (4, 0, 50.0, 60.0)
        ]
    );
    // Four lanes: the independent packet at the front runs alone; then jobs 1 and 2 form a
    // set, which ends at job 1's next packet (a job's packets chain) and takes as long as its
    // longest packet; then job 1's next packet with job 4. No set waits to fill.
    assert_eq!(
        lanes_scenario(4),
        vec![
            (5, 0, 0.0, 10.0),
            (1, 0, 10.0, 30.0),
            (2, 0, 10.0, 30.0),
            (1, 1, 30.0, 40.0),
            (4, 0, 30.0, 40.0)
        ]
    );
    // Two lanes hold the same sets here.
    assert_eq!(lanes_scenario(2), lanes_scenario(4));
}

#[test]
fn a_lane_set_holds_at_most_the_nodes_lanes() {
    // Jobs 1, 2 and 4 first, then job 1's next packet: two lanes cut the set after 1 and 2,
    // four take all three.
    let records = || {
        vec![
            rec(5, 0, false, 0.0, 1),
            rec(1, 0, true, 0.0, 1),
            rec(2, 0, true, 0.0, 2),
            rec(4, 0, true, 0.0, 1),
            rec(1, 1, true, 0.0, 1),
        ]
    };
    assert_eq!(
        lanes_run(records(), 2),
        vec![
            (5, 0, 0.0, 10.0),
            (1, 0, 10.0, 30.0),
            (2, 0, 10.0, 30.0),
            (4, 0, 30.0, 40.0),
            (1, 1, 30.0, 40.0)
        ]
    );
    assert_eq!(
        lanes_run(records(), 4),
        vec![
            (5, 0, 0.0, 10.0),
            (1, 0, 10.0, 30.0),
            (2, 0, 10.0, 30.0),
            (4, 0, 10.0, 30.0),
            (1, 1, 30.0, 40.0)
        ]
    );
}

#[test]
fn lower_bound_of_the_small_scenario() {
    let (trace, config) = small();
    let b = lower_bound(&trace, &config.nodes, 1);
    // Work: 5 units at 1/10 + 1/20 = 0.15 units per time → 33.33; arrivals: 5 + 10·2 = 25;
    // chains: job 1, 10 + 10 = 20.
    assert!((b.work - 5.0 / 0.15).abs() < 1e-9, "{b:?}");
    assert_eq!(b.arrivals, 25.0);
    assert_eq!(b.chains, 20.0);
    assert!((b.value() - 5.0 / 0.15).abs() < 1e-9);
}

#[test]
fn the_work_bound_counts_all_commands_when_speeds_do_not_depend_on_them() {
    // Nodes 1:1.5:2:3, the same unit time for every command; 12 unit packets, three of each
    // command, all at time 0: the fluid bound is 12 / (1/16 + 1/24 + 1/32 + 1/48) = 76.8.
    let cmds = [Cmd::Encrypt, Cmd::Decrypt, Cmd::Sign, Cmd::Verify];
    let records = (0..12u64)
        .map(|i| TraceRecord {
            cmd: cmds[(i % 4) as usize],
            ..rec(i, 0, false, 0.0, 1)
        })
        .collect();
    let trace = Trace::from_records(records).unwrap();
    let nodes: Vec<NodeModel> = [16.0, 24.0, 32.0, 48.0]
        .iter()
        .map(|&t| node(t, 8))
        .collect();
    let b = lower_bound(&trace, &nodes, 1);
    assert!((b.work - 76.8).abs() < 1e-9, "{b:?}");
    for policy in PolicySpec::all() {
        let r = simulate(&trace, &SimConfig::new(nodes.clone()), &policy).unwrap();
        assert!(
            r.makespan >= b.value() - 1e-9,
            "{policy}: {} < {b:?}",
            r.makespan
        );
    }
}

#[test]
fn a_run_is_determined_by_its_seed() {
    let run = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let nodes = NodeSet::paper(4).build(32, &mut rng);
        let trace = WorkloadSpec::default()
            .with_packets(400)
            .generate(&nodes, 1, &mut rng);
        let r = simulate(
            &trace,
            &SimConfig::new(nodes),
            &PolicySpec::paper_defaults(),
        )
        .unwrap();
        (trace.to_csv(), format!("{:?}", r.placements), r.makespan)
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7).0, run(8).0);
}

fn policy() -> impl Strategy<Value = PolicySpec> {
    prop_oneof![
        Just(PolicySpec::paper_defaults()),
        Just(PolicySpec::hhs_acdid()),
        // `mct` and the default, `mct-wait`: the policies that may decline a packet with room
        // free.
        Just(PolicySpec::mct()),
        Just(PolicySpec::default()),
        (0.0..=1.0f64).prop_map(|a| PolicySpec::paper(a, 1.0 - a)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every policy's makespan is at least the lower bound, and every packet runs once.
    #[test]
    fn makespan_is_never_below_the_lower_bound(
        seed in any::<u64>(),
        nodes in 1usize..=6,
        packets in 1usize..=300,
        cap_extra in 0u64..=40,
        load in prop_oneof![Just(None), (0.2..4.0f64).prop_map(Some)],
        policy in policy(),
        strict in any::<bool>(),
        known in any::<bool>(),
    ) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let workload = WorkloadSpec { load, ..WorkloadSpec::default() }.with_packets(packets);
        let cap = workload.length.1 + cap_extra;
        let nodes = NodeSet::Drawn { nodes, lo: 4.0, hi: 40.0 }.build(cap, &mut rng);
        let trace = workload.generate(&nodes, 1, &mut rng);
        let config = SimConfig {
            affinity: if strict { Affinity::Strict } else { Affinity::InFlight },
            ..SimConfig::new(nodes.clone())
        }
        .with_known_lengths(known);
        let r = simulate(&trace, &config, &policy).unwrap();
        let bound = lower_bound(&trace, &nodes, 1).value();
        prop_assert!(r.makespan >= bound - 1e-9 * bound.max(1.0), "makespan {} < bound {}", r.makespan, bound);
        prop_assert_eq!(r.placements.len(), trace.len());
        prop_assert_eq!(r.node_packets.iter().sum::<u64>() as usize, trace.len());
    }
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cryptodispatch-bench"))
        .args(args)
        .output()
        .expect("run cryptodispatch-bench")
}

#[test]
fn the_binary_gives_byte_identical_output_for_a_seed() {
    let args = [
        "sim",
        "--packets",
        "300",
        "--nodes",
        "4",
        "--seed",
        "7",
        "--policy",
        "paper,hhs-acdid",
        "--csv",
    ];
    let a = bench(&args);
    let b = bench(&args);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let text = String::from_utf8(a.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "policy,nodes,packets,makespan,lower_bound,mean_latency,p99_latency,max_node_share,min_node_share"
        )
    );
    assert_eq!(lines.clone().count(), 2);
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 9, "{line}");
        let makespan: f64 = f[3].parse().unwrap();
        let bound: f64 = f[4].parse().unwrap();
        assert!(makespan >= bound, "{line}");
    }
}

#[test]
fn experiment_output_does_not_depend_on_threads() {
    let dir = std::env::temp_dir().join(format!("cryptodispatch-exp4-{}", std::process::id()));
    let run = |threads: &str, sub: &str| {
        let out = dir.join(sub);
        let o = bench(&[
            "paper",
            "--exp",
            "4",
            "--seeds",
            "2",
            "--threads",
            threads,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (
            o.stdout,
            std::fs::read_to_string(out.join("exp4.csv")).unwrap(),
        )
    };
    let (out1, csv1) = run("1", "a");
    let (out2, csv2) = run("2", "b");
    assert_eq!(csv1, csv2);
    assert_eq!(
        String::from_utf8_lossy(&out1)
            .lines()
            .filter(|l| !l.starts_with("wrote"))
            .collect::<Vec<_>>(),
        String::from_utf8_lossy(&out2)
            .lines()
            .filter(|l| !l.starts_with("wrote"))
            .collect::<Vec<_>>()
    );
    let mut lines = csv1.lines();
    assert_eq!(
        lines.next(),
        Some("nodes,packets,policy,makespan_mean,makespan_std,lower_bound")
    );
    // 7 + 6 + 7 points, two policies each.
    assert_eq!(lines.count(), 40);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_malformed_trace_is_an_error_naming_the_line() {
    let path = std::env::temp_dir().join(format!(
        "cryptodispatch-bad-trace-{}.csv",
        std::process::id()
    ));
    std::fs::write(
        &path,
        "task,seq,flag,arrival,length,cmd\n1,0,1,0,2,enc\n1,1,1,1,2,encrypt-ish\n",
    )
    .unwrap();
    let o = bench(&["sim", "--trace", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("encrypt-ish"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_generated_trace_replays() {
    let path = std::env::temp_dir().join(format!("cryptodispatch-gen-{}.csv", std::process::id()));
    let g = bench(&[
        "gen",
        "--packets",
        "200",
        "--seed",
        "3",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let trace = Trace::read(&path).unwrap();
    assert_eq!(trace.len(), 200);
    let o = bench(&[
        "sim",
        "--trace",
        path.to_str().unwrap(),
        "--unit-times",
        "16,20,28,36",
        "--csv",
    ]);
    let _ = std::fs::remove_file(&path);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("paper,4,200,"));
}

#[test]
fn the_matrix_finds_every_policy_at_or_above_the_exact_optimum_and_the_bound_below_it() {
    let dir = std::env::temp_dir().join(format!("cryptodispatch-matrix-{}", std::process::id()));
    let o = bench(&[
        "policies",
        "--matrix",
        "--seeds",
        "2",
        "--small",
        "60",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cells = std::fs::read_to_string(dir.join("matrix.csv")).unwrap();
    let policies = cryptodispatch::sched::PolicySpec::all().len();
    // 15 kinds of work, lengths known and unknown, every policy.
    assert_eq!(cells.lines().count(), 1 + 30 * policies);
    let small = std::fs::read_to_string(dir.join("matrix_optimum.csv")).unwrap();
    let mut lines = small.lines();
    assert_eq!(
        lines.next(),
        Some("seed,nodes,packets,lengths,policy,makespan,optimum,bound,ratio")
    );
    let mut rows = 0;
    let mut at_optimum = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let (makespan, optimum, bound): (f64, f64, f64) = (
            f[5].parse().unwrap(),
            f[6].parse().unwrap(),
            f[7].parse().unwrap(),
        );
        // No schedule beats the optimum, and the simulator's bound never exceeds it (the
        // file rounds to three decimals).
        assert!(
            makespan >= optimum - 1e-3,
            "a policy below the optimum: {line}"
        );
        assert!(
            bound <= optimum + 1e-3,
            "the bound above the optimum: {line}"
        );
        at_optimum += usize::from(makespan <= optimum + 1e-3);
        rows += 1;
    }
    assert_eq!(rows, 60 * 2 * policies);
    // The optimum is reached, not only approached: some policy finds it on some instances.
    assert!(at_optimum > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bench's standard error for `args`, after checking that it failed with a message and
/// not a panic.
fn refused(args: &[&str]) -> String {
    let o = bench(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?} ran: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    err
}

#[test]
fn node_and_packet_counts_beyond_the_bounds_are_refused_by_name() {
    for nodes in ["18446744073709551615", "4294967296", "100000", "4097", "0"] {
        for command in ["sim", "gen"] {
            let err = refused(&[command, "--packets", "20", "--nodes", nodes]);
            let want = if nodes == "0" {
                "must be at least 1"
            } else {
                "at most 4096 nodes"
            };
            assert!(err.contains(want), "{command} --nodes {nodes}: {err}");
        }
    }
    // As many nodes again through one unit time each.
    let times = vec!["16"; 4097].join(",");
    let err = refused(&["sim", "--packets", "20", "--unit-times", &times]);
    assert!(err.contains("at most 4096 nodes"), "{err}");
    for args in [
        &["sim", "--packets", "18446744073709551615"][..],
        &["gen", "--packets", "10000001"],
        &["paper", "--exp", "1", "--packets", "18446744073709551615"],
    ] {
        let err = refused(args);
        assert!(err.contains("at most 10000000 packets"), "{args:?}: {err}");
    }
    // Counts of seeds, configurations and small instances: refused past a million (four
    // billion aborted on allocation), with the bound named.
    for args in [
        &["policies", "--sample", "4000000000"][..],
        &["policies", "--sample", "3", "--small", "4000000000"],
        &["policies", "--sample", "3", "--small", "1000001"],
        &["policies", "--seeds", "1000001", "--no-live"],
        &["paper", "--exp", "1", "--seeds", "4294967295"],
    ] {
        let err = refused(args);
        assert!(err.contains("1000000"), "{args:?}: {err}");
    }
}

#[test]
fn a_policy_is_taken_as_the_bench_prints_it() {
    let o = bench(&[
        "sim",
        "--packets",
        "20",
        "--policy",
        "paper:alpha=0.05,beta=0.95,mct,paper:alpha=0.1,beta=0.9",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let text = String::from_utf8_lossy(&o.stdout);
    for name in ["paper:alpha=0.05,beta=0.95", "paper:alpha=0.1,beta=0.9"] {
        assert!(text.contains(name), "{text}");
    }
}

#[test]
fn inputs_that_leave_nothing_finite_to_report_are_refused() {
    let empty = std::env::temp_dir().join(format!(
        "cryptodispatch-empty-trace-{}.csv",
        std::process::id()
    ));
    std::fs::write(&empty, "task,seq,flag,arrival,length,cmd\n").unwrap();
    let empty = empty.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["sim", "--packets", "0"], "must be at least 1"),
        (&["sim", "--trace", empty], "the trace has no packets"),
        (
            &["sim", "--packets", "20", "--unit-times=1e-320"],
            "--unit-times 1e-320: must lie in [1e-6, 1e6]",
        ),
        (
            &["sim", "--packets", "20", "--unit-times=16,1e7"],
            "--unit-times 1e7: must lie in [1e-6, 1e6]",
        ),
        (
            &["sim", "--packets", "20", "--unit-range=1e308,1e308"],
            "need 1e-6 <= LO <= HI <= 1e6, got 1e308,1e308",
        ),
        (
            &["paper", "--exp", "4", "--load", "1e-320", "--seeds", "1"],
            "--load 1e-320: must be 0 (every packet at time 0) or lie in [1e-6, 1e6]",
        ),
    ];
    for (args, want) in cases {
        let err = refused(args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let _ = std::fs::remove_file(empty);
}

#[test]
fn gen_checks_its_options_as_sim_and_paper_do() {
    let cases: [(&[&str], &str); 6] = [
        (&["--load=-1"], "--load -1: must be 0"),
        (&["--load=nan"], "--load NaN: must be 0"),
        (&["--load=inf"], "--load inf: must be 0"),
        (&["--load=1e-320"], "--load 1e-320: must be 0"),
        (
            &["--unit-times", "0"],
            "--unit-times 0: must lie in [1e-6, 1e6]",
        ),
        (
            &["--cap", "1"],
            "--cap: capacity 1 is smaller than the longest packet (4)",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["gen", "--packets", "5"];
        args.extend_from_slice(extra);
        let err = refused(&args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A load of 0 is every packet at time 0, and a capacity that holds the longest packet is
    // taken.
    let o = bench(&["gen", "--packets", "5", "--load", "0", "--cap", "4"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let arrivals: Vec<&str> = (text.lines().skip(1))
        .map(|l| l.split(',').nth(3).unwrap())
        .collect();
    assert_eq!(arrivals, ["0"; 5], "{text}");
}

#[test]
fn an_output_directory_that_cannot_be_one_is_refused_before_the_run() {
    let file = std::env::temp_dir().join(format!("cryptodispatch-out-{}", std::process::id()));
    std::fs::write(&file, "not a directory").unwrap();
    let out = file.to_str().unwrap();
    for args in [
        &["paper", "--exp", "2", "--seeds", "1", "--out", out][..],
        &["policies", "--no-live", "--seeds", "1", "--out", out],
        &[
            "policies", "--matrix", "--quick", "--small", "1", "--out", out,
        ],
        &["policies", "--sample", "1", "--small", "1", "--out", out],
    ] {
        let o = bench(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{out}: it exists and is not a directory")),
            "{args:?}: {err}"
        );
        // Refused before the experiment ran: nothing of it printed.
        assert!(
            o.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    let _ = std::fs::remove_file(&file);
}

#[test]
fn a_trace_that_cannot_be_read_is_an_error_about_the_file_not_a_line() {
    let dir =
        std::env::temp_dir().join(format!("cryptodispatch-unreadable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let binary = dir.join("binary.csv");
    std::fs::write(&binary, b"task,seq\xff\xfe").unwrap();
    let missing = dir.join("missing.csv");
    for (path, want) in [
        (&binary, "is not UTF-8 text"),
        (&dir, "cannot read the trace"),
        (&missing, "cannot read the trace"),
    ] {
        let path = path.to_str().unwrap();
        let err = refused(&["sim", "--trace", path]);
        assert!(err.contains(path), "{path}: {err}");
        assert!(err.contains(want), "{path}: {err}");
        assert!(!err.contains("line 0"), "{path}: {err}");
        // The library's own reader says the same of the file.
        let err = Trace::read(std::path::Path::new(path)).unwrap_err();
        assert_eq!(err.line(), 0, "{path}");
        let shown = err.to_string();
        assert!(shown.starts_with("trace: "), "{path}: {shown}");
        assert!(shown.contains(path), "{path}: {shown}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_optimum_cache_line_that_cannot_be_an_optimum_is_recomputed_and_named() {
    let dir = std::env::temp_dir().join(format!("cryptodispatch-cache-{}", std::process::id()));
    let cache = dir.join("optima");
    let out = dir.join("out");
    let (cache_arg, out_arg) = (cache.to_str().unwrap(), out.to_str().unwrap());
    let run = || {
        let o = bench(&[
            "policies",
            "--matrix",
            "--seeds",
            "1",
            "--small",
            "3",
            "--policies",
            "paper,mct",
            "--out",
            out_arg,
            "--optimum-cache",
            cache_arg,
        ]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        let optima = std::fs::read_to_string(out.join("matrix_optimum.csv")).unwrap();
        (optima, err)
    };
    std::fs::create_dir_all(&dir).unwrap();
    let (optima, _) = run();
    let good = std::fs::read_to_string(&cache).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    assert_eq!(lines.len(), 3, "{good}");
    // Not a number, below any instance's lower bound, negative.
    let keys: Vec<&str> = lines.iter().map(|l| l.split(',').next().unwrap()).collect();
    let corrupt = format!("{},nan\n{},1\n{},-1\n", keys[0], keys[1], keys[2]);
    std::fs::write(&cache, corrupt).unwrap();
    let (again, err) = run();
    assert_eq!(again, optima, "the corrupt values were used");
    for line in ["line 1: optimum NaN", "line 3: optimum -1"] {
        assert!(
            err.contains(&format!("{cache_arg}: {line} is not a positive number")),
            "{err}"
        );
    }
    assert!(
        err.contains(&format!("{cache_arg}: line 2: optimum 1 of small instance")),
        "{err}"
    );
    assert!(err.contains("lies below its lower bound"), "{err}");
    // The cache is mended.
    assert_eq!(std::fs::read_to_string(&cache).unwrap(), good);
    let _ = std::fs::remove_dir_all(&dir);
}
