//! The exact optimum of a small instance as a mixed-integer program, solved by `good_lp` with
//! its pure-Rust `microlp` backend ([`milp_makespan`]; the `milp` cargo feature, on with the
//! default `bench` feature): the independent check on the branch and bound of
//! [`optimum`](super::optimum), which `cryptodispatch-bench policies --matrix --optimum milp`
//! uses and the test suite runs against it.
//!
//! The problem is [`optimum`](super::optimum)'s: every packet starts no earlier than its
//! arrival and runs on one node; a node runs one packet at a time; a dependent job's packets
//! all run on one node, each after the one before. The formulation is the disjunctive one: a
//! binary assignment per independent packet and per dependent job and node, a start time per
//! packet, a binary order for every pair of packets that may share a node, and big-M
//! constraints that separate two packets on the same node. Each node's total work after the
//! first arrival is added as a cut on the makespan (it holds in every schedule and tightens the
//! relaxation a great deal). It needs no argument about the order on a node, which makes it the
//! independent check; `microlp` takes from seconds to over an hour per instance of the
//! matrix's size.

use std::collections::HashMap;

use good_lp::{
    Expression, ProblemVariables, Solution, SolverModel, Variable, constraint, microlp, variable,
};

use crate::sim::model::NodeModel;
use crate::sim::trace::Trace;

/// The least makespan of `trace` on `nodes`, from time 0, as a mixed-integer program (module
/// documentation).
///
/// # Errors
/// The solver's message, should it fail (it should not: every instance has a schedule).
pub fn milp_makespan(trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> Result<f64, String> {
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
