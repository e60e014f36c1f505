//! A lower bound on the makespan of a trace on a node set, whatever the policy.
//!
//! The bound is the largest of three, each of which no schedule can beat:
//! 1. **Work**: after the first arrival, the nodes together cannot serve faster than all at
//!    full speed with no idle time. The least time T in which they could serve it all, splitting
//!    the work W_c of each command c freely among the nodes, is the linear program
//!    `min T  s.t.  Σ_c x_ic·t_ic ≤ T·unit_len for every node i,  Σ_i x_ic = W_c,  x ≥ 0`.
//!    Its dual says that for any weights u_i ≥ 0 with Σ_i u_i = 1,
//!    `T ≥ Σ_c W_c · min_i (u_i·t_ic) / unit_len`. The bound takes the best of a few weightings:
//!    u_i ∝ 1/t_ic for each command c (exact when only c is present), u_i ∝ 1/t̄_i with t̄_i
//!    the node's work-weighted mean unit time (exact when a node's unit time is the same for
//!    every command), and equal weights. Each is a valid lower bound by weak duality.
//! 2. **Arrivals**: a packet cannot complete before its arrival plus its service time on the
//!    fastest node for its command; the largest of these over all packets (the last arrival
//!    among them).
//! 3. **Chains**: a dependent job's packets run one after another; its last packet cannot
//!    complete before `c_k = max(c_{k−1}, arrival_k) + fastest service of packet k`, from the
//!    job's first arrival.
//!
//! The bound is for the paper's nodes, which serve one packet at a time (`NodeModel::lanes` =
//! 1). A node with L lanes serves up to L dependent packets of different jobs at once
//! (docs/ALGORITHM.md §15.3), so the work bound (1) does not hold for it; (2) and (3) still do.

use std::collections::HashMap;

use crate::packet::Cmd;
use crate::sim::model::NodeModel;
use crate::sim::trace::Trace;

/// The three parts of the bound, and the bound itself (their maximum).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct LowerBound {
    /// The work bound (1).
    pub work: f64,
    /// The arrival bound (2).
    pub arrivals: f64,
    /// The chain bound (3).
    pub chains: f64,
}

impl LowerBound {
    /// The bound: the largest part.
    pub fn value(&self) -> f64 {
        self.work.max(self.arrivals).max(self.chains)
    }
}

/// The lower bound of `trace` on `nodes`.
pub fn lower_bound(trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> LowerBound {
    let records = trace.records();
    if records.is_empty() || nodes.is_empty() {
        return LowerBound {
            work: 0.0,
            arrivals: 0.0,
            chains: 0.0,
        };
    }
    let u = unit_len.max(1) as f64;
    let fastest = |cmd: Cmd| {
        nodes
            .iter()
            .map(|n| n.unit_times.get(cmd))
            .fold(f64::INFINITY, f64::min)
    };
    let min_service = |cmd: Cmd, len: u64| fastest(cmd) * len as f64 / u;

    // 1. Work: the dual of the fluid linear program, at a few weightings of the nodes.
    let first = records
        .iter()
        .map(|r| r.arrival)
        .fold(f64::INFINITY, f64::min);
    let mut work_by_cmd = [0.0f64; 4];
    for r in records {
        work_by_cmd[r.cmd.index()] += r.length as f64;
    }
    let present: Vec<Cmd> = Cmd::ALL
        .into_iter()
        .filter(|c| work_by_cmd[c.index()] > 0.0)
        .collect();
    let total: f64 = work_by_cmd.iter().sum();
    let dual = |weights: &[f64]| -> f64 {
        let norm: f64 = weights.iter().sum();
        present
            .iter()
            .map(|&c| {
                let m = nodes
                    .iter()
                    .zip(weights)
                    .map(|(n, w)| w / norm * n.unit_times.get(c))
                    .fold(f64::INFINITY, f64::min);
                work_by_cmd[c.index()] * m / u
            })
            .sum()
    };
    let mut weightings: Vec<Vec<f64>> = present
        .iter()
        .map(|&c| nodes.iter().map(|n| 1.0 / n.unit_times.get(c)).collect())
        .collect();
    weightings.push(
        nodes
            .iter()
            .map(|n| {
                let mean_t = present
                    .iter()
                    .map(|&c| work_by_cmd[c.index()] * n.unit_times.get(c))
                    .sum::<f64>()
                    / total;
                1.0 / mean_t
            })
            .collect(),
    );
    weightings.push(vec![1.0; nodes.len()]);
    let work = first + weightings.iter().map(|w| dual(w)).fold(0.0, f64::max);

    // 2. Arrivals.
    let arrivals = records
        .iter()
        .map(|r| r.arrival + min_service(r.cmd, r.length))
        .fold(0.0, f64::max);

    // 3. Chains (records of a job appear in seq order).
    let mut done: HashMap<u64, f64> = HashMap::new();
    let mut chains = 0.0f64;
    for r in records.iter().filter(|r| r.dependent) {
        let prev = done.get(&r.task).copied().unwrap_or(0.0);
        let c = prev.max(r.arrival) + min_service(r.cmd, r.length);
        done.insert(r.task, c);
        chains = chains.max(c);
    }

    LowerBound {
        work,
        arrivals,
        chains,
    }
}
