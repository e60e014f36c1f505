//! The exact optimum of small instances (`sim::research::optimum`): the branch and bound
//! agrees with the mixed-integer program (`sim::research::milp`) and with every assignment tried
//! in turn, and the simulator's lower bound never exceeds it.

use std::collections::HashMap;

use cryptodispatch::packet::{Cmd, UnitTimes};
use cryptodispatch::sim::bound::lower_bound;
use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::research::optimum::optimal_makespan;
use cryptodispatch::sim::trace::{Trace, TraceRecord};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use cryptodispatch::sim::research::milp::milp_makespan;

const UNIT: u64 = 16;

fn record(task: u64, seq: u32, dependent: bool, arrival: f64) -> TraceRecord {
    TraceRecord {
        task,
        seq,
        dependent,
        arrival,
        length: UNIT,
        cmd: Cmd::Encrypt,
        last: false,
    }
}

fn nodes(times: &[f64]) -> Vec<NodeModel> {
    times
        .iter()
        .map(|&t| NodeModel::new(UnitTimes::uniform(t), 8 * UNIT))
        .collect()
}

/// The search's optimum (checked against the program's) and the simulator's lower bound.
fn optimum(records: Vec<TraceRecord>, times: &[f64]) -> (f64, f64) {
    let trace = Trace::from_records(records).unwrap();
    let nodes = nodes(times);
    let opt = optimal_makespan(&trace, &nodes, UNIT).unwrap();
    let milp = milp_makespan(&trace, &nodes, UNIT).unwrap();
    assert!((opt - milp).abs() < 1e-6, "search {opt}, program {milp}");
    (opt, lower_bound(&trace, &nodes, UNIT).value())
}

/// A random instance of up to `max_packets` packets on 1–3 nodes of unequal speeds per
/// command: jobs of 1–3 packets, about half dependent, arrivals in [0, 60), lengths 1–3
/// units.
fn random_instance(seed: u64, max_packets: usize) -> (Trace, Vec<NodeModel>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes: Vec<NodeModel> = (0..rng.random_range(1..=3))
        .map(|_| {
            let mut t = [0.0; 4];
            for x in &mut t {
                *x = rng.random_range(8.0..40.0);
            }
            NodeModel::new(UnitTimes(t), 8 * UNIT)
        })
        .collect();
    let packets = rng.random_range(1..=max_packets);
    let mut records = Vec::new();
    let mut task = 0;
    while records.len() < packets {
        let n = rng.random_range(1..=3usize).min(packets - records.len());
        let dependent = rng.random_bool(0.5);
        let cmd = Cmd::ALL[rng.random_range(0..Cmd::ALL.len())];
        let mut arrival = rng.random_range(0.0..40.0);
        for seq in 0..n {
            records.push(TraceRecord {
                task,
                seq: seq as u32,
                dependent,
                arrival,
                length: UNIT * rng.random_range(1..=3),
                cmd,
                last: false,
            });
            arrival += rng.random_range(0.0..20.0);
        }
        task += 1;
    }
    // Interleaved by arrival, as a trace comes; a job's packets stay in order.
    records.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    (Trace::from_records(records).unwrap(), nodes)
}

#[test]
fn the_search_and_the_program_agree_on_random_instances() {
    for seed in 0..120 {
        let (trace, nodes) = random_instance(seed, 7);
        let opt = optimal_makespan(&trace, &nodes, UNIT).unwrap();
        let milp = milp_makespan(&trace, &nodes, UNIT).unwrap();
        assert!(
            (opt - milp).abs() <= 1e-6 * milp.max(1.0),
            "seed {seed}: search {opt}, program {milp}"
        );
        let bound = lower_bound(&trace, &nodes, UNIT).value();
        assert!(
            bound <= opt + 1e-6,
            "seed {seed}: bound {bound} > optimum {opt}"
        );
    }
}

/// The least makespan over every assignment of the trace's units (a dependent job, or one
/// independent packet) to the nodes, each node running its packets in arrival order.
fn every_assignment(trace: &Trace, nodes: &[NodeModel]) -> f64 {
    let records = trace.records();
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by(|&a, &b| {
        records[a]
            .arrival
            .total_cmp(&records[b].arrival)
            .then(a.cmp(&b))
    });
    let mut chains = HashMap::new();
    let mut units = 0u32;
    let mut fresh = || {
        units += 1;
        units - 1
    };
    let unit_of: Vec<u32> = records
        .iter()
        .map(|r| {
            if r.dependent {
                *chains.entry(r.task).or_insert_with(&mut fresh)
            } else {
                fresh()
            }
        })
        .collect();
    let units = unit_of.iter().max().map_or(0, |u| u + 1);
    let m = nodes.len();
    let mut least = f64::INFINITY;
    for code in 0..m.pow(units) {
        let mut span = vec![0.0f64; m];
        for &k in &order {
            let (r, i) = (&records[k], code / m.pow(unit_of[k]) % m);
            span[i] = span[i].max(r.arrival) + nodes[i].service_time(r.cmd, r.length, UNIT);
        }
        least = least.min(span.into_iter().fold(0.0, f64::max));
    }
    least
}

#[test]
fn the_search_finds_the_best_assignment() {
    // Every assignment, each node in arrival order: the search's pruning loses none of them.
    // (That arrival order is best on a node is what the program checks above.)
    for seed in 200..260 {
        let (trace, nodes) = random_instance(seed, 6);
        let opt = optimal_makespan(&trace, &nodes, UNIT).unwrap();
        let least = every_assignment(&trace, &nodes);
        assert!(
            (opt - least).abs() <= 1e-9 * least.max(1.0),
            "seed {seed}: search {opt}, every assignment {least}"
        );
    }
}

#[test]
fn an_empty_trace_takes_no_time_and_no_nodes_is_an_error() {
    let empty = Trace::from_records(Vec::new()).unwrap();
    assert_eq!(optimal_makespan(&empty, &nodes(&[10.0]), UNIT), Some(0.0));
    let one = Trace::from_records(vec![record(0, 0, false, 0.0)]).unwrap();
    assert_eq!(optimal_makespan(&one, &[], UNIT), None);
}

#[test]
fn three_equal_packets_on_two_equal_nodes_take_two_service_times() {
    let (opt, bound) = optimum(
        (0..3).map(|t| record(t, 0, false, 0.0)).collect(),
        &[10.0, 10.0],
    );
    assert!((opt - 20.0).abs() < 1e-6, "optimum {opt}");
    assert!(bound <= opt + 1e-6, "bound {bound} above the optimum {opt}");
}

#[test]
fn a_chain_stays_on_one_node_and_waits_for_its_arrivals() {
    // A chain of three packets (the third arrives at 25) and one independent packet, on a
    // fast node (10) and a slow one (30): the chain on the fast node ends at 35, the other
    // packet on the slow node at 30.
    let mut records: Vec<TraceRecord> = vec![
        record(1, 0, true, 0.0),
        record(1, 1, true, 0.0),
        record(2, 0, false, 0.0),
        record(1, 2, true, 25.0),
    ];
    records.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    let (opt, bound) = optimum(records, &[10.0, 30.0]);
    assert!((opt - 35.0).abs() < 1e-6, "optimum {opt}");
    assert!(bound <= opt + 1e-6, "bound {bound} above the optimum {opt}");
}
