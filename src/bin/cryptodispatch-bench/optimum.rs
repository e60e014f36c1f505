//! The exact optimal makespan of a small instance, as a mixed-integer program solved by
//! `good_lp` with its pure-Rust `microlp` backend (the benchmark's only use of a solver; the
//! library has none).
//!
//! The problem is the simulator's without its queues: every packet starts no earlier than its
//! arrival and runs on one node, taking `unit_time(cmd) × length / unit_len` there; a node runs
//! one packet at a time; a dependent job's packets all run on one node (strict affinity), each
//! after the one before. The queues (node capacity, the cluster queue's order) only restrict
//! what a policy can do, so this optimum is at most the best any policy could reach, and every
//! policy's makespan is at least it. The lower bound of `sim::bound` must never exceed it.
//!
//! The formulation is the disjunctive one: a binary assignment per independent packet and per
//! dependent job and node, a start time per packet, a binary order for every pair of packets
//! that may share a node, and big-M constraints that separate two packets on the same node.
//! Each node's total work after the first arrival is added as a cut on the makespan (it holds
//! in every schedule and tightens the relaxation a great deal).

use std::collections::HashMap;

use good_lp::{
    Expression, ProblemVariables, Solution, SolverModel, Variable, constraint, microlp, variable,
};

use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::trace::Trace;

/// The least makespan of `trace` on `nodes`, from time 0.
///
/// # Errors
/// The solver's message, should it fail (it should not: every instance has a schedule).
pub fn optimal_makespan(trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> Result<f64, String> {
    let records = trace.records();
    let p = records.len();
    let m = nodes.len();
    let time =
        |k: usize, i: usize| nodes[i].service_time(records[k].cmd, records[k].length, unit_len);
    let first = records
        .iter()
        .map(|r| r.arrival)
        .fold(f64::INFINITY, f64::min);
    let last = records.iter().map(|r| r.arrival).fold(0.0, f64::max);
    let big = last
        + (0..p)
            .map(|k| (0..m).map(|i| time(k, i)).fold(0.0, f64::max))
            .sum::<f64>();

    let mut vars = ProblemVariables::new();
    let cmax = vars.add(variable().min(0.0));
    let start: Vec<Variable> = records
        .iter()
        .map(|r| vars.add(variable().min(r.arrival).max(big)))
        .collect();
    // One assignment per dependent job (all its packets on one node), one per other packet.
    let mut job_assign: HashMap<u64, Vec<Variable>> = HashMap::new();
    let assign: Vec<Vec<Variable>> = records
        .iter()
        .map(|r| {
            let fresh = |vars: &mut ProblemVariables| -> Vec<Variable> {
                (0..m).map(|_| vars.add(variable().binary())).collect()
            };
            if r.dependent {
                job_assign
                    .entry(r.task)
                    .or_insert_with(|| fresh(&mut vars))
                    .clone()
            } else {
                fresh(&mut vars)
            }
        })
        .collect();
    // The order of two packets that may share a node (not two of one chain: their order is
    // fixed).
    let mut pairs = Vec::new();
    for a in 0..p {
        for b in a + 1..p {
            let same_chain = records[a].dependent && records[a].task == records[b].task;
            if !same_chain {
                pairs.push((a, b, vars.add(variable().binary())));
            }
        }
    }

    let mut model = vars.minimise(cmax).using(microlp);
    let mut placed_once = Vec::new();
    for k in 0..p {
        let runs: Expression = (0..m).map(|i| time(k, i) * assign[k][i]).sum();
        model = model.with(constraint!(cmax >= start[k] + runs.clone()));
        if !records[k].dependent || !placed_once.contains(&records[k].task) {
            let one: Expression = assign[k].iter().copied().sum();
            model = model.with(constraint!(one == 1.0));
            if records[k].dependent {
                placed_once.push(records[k].task);
            }
        }
        // A chain's packets one after another.
        let prev = records[k].dependent.then(|| {
            (0..k)
                .rev()
                .find(|&j| records[j].dependent && records[j].task == records[k].task)
        });
        if let Some(prev) = prev.flatten() {
            let prev_runs: Expression = (0..m).map(|i| time(prev, i) * assign[prev][i]).sum();
            model = model.with(constraint!(start[k] >= start[prev] + prev_runs));
        }
    }
    for node in 0..m {
        let work: Expression = assign
            .iter()
            .enumerate()
            .map(|(k, on)| time(k, node) * on[node])
            .sum();
        model = model.with(constraint!(cmax >= first + work));
    }
    for &(a, b, a_first) in &pairs {
        for (i, (&xa, &xb)) in assign[a].iter().zip(&assign[b]).enumerate() {
            // Both on node i and a first: b starts after a ends.
            model = model.with(constraint!(
                start[b] >= start[a] + time(a, i) - big * (3.0 - xa - xb - a_first)
            ));
            // Both on node i and b first: a starts after b ends.
            model = model.with(constraint!(
                start[a] >= start[b] + time(b, i) - big * (2.0 - xa - xb + a_first)
            ));
        }
    }
    let solution = model
        .solve()
        .map_err(|e| format!("the exact optimum: {e}"))?;
    Ok(solution.value(cmax))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cryptodispatch::packet::{Cmd, UnitTimes};
    use cryptodispatch::sim::bound::lower_bound;
    use cryptodispatch::sim::trace::TraceRecord;

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

    fn optimum(records: Vec<TraceRecord>, times: &[f64]) -> (f64, f64) {
        let trace = Trace::from_records(records).unwrap();
        let nodes = nodes(times);
        let opt = optimal_makespan(&trace, &nodes, UNIT).unwrap();
        (opt, lower_bound(&trace, &nodes, UNIT).value())
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
}
