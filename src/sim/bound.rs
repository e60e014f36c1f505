//! A lower bound on the makespan of a trace on a node set, whatever the policy.
//!
//! The bound is the largest of three, each of which no schedule can beat:
//! 1. **Work**: after the first arrival, the nodes together cannot serve faster than all at
//!    full speed with no idle time. For each command c with total length W_c, even a cluster
//!    doing nothing else needs W_c / Σ_i (unit_len / t_ic); and all the work together needs at
//!    least Σ_c W_c · min_i t_ic / (n · unit_len), since every unit of work occupies some node
//!    for at least the fastest node's time.
//! 2. **Arrivals**: a packet cannot complete before its arrival plus its service time on the
//!    fastest node for its command; the largest of these over all packets (the last arrival
//!    among them).
//! 3. **Chains**: a dependent job's packets run one after another; its last packet cannot
//!    complete before `c_k = max(c_{k−1}, arrival_k) + fastest service of packet k`, from the
//!    job's first arrival.

use std::collections::HashMap;

use crate::packet::Cmd;
use crate::sim::model::NodeModel;
use crate::sim::trace::Trace;

/// The three parts of the bound, and the bound itself (their maximum).
#[derive(Debug, Clone, Copy, PartialEq)]
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

    // 1. Work.
    let first = records
        .iter()
        .map(|r| r.arrival)
        .fold(f64::INFINITY, f64::min);
    let mut work_by_cmd = [0.0f64; 4];
    for r in records {
        work_by_cmd[r.cmd.index()] += r.length as f64;
    }
    let mut work = 0.0f64;
    let mut total_min_time = 0.0;
    for cmd in Cmd::ALL {
        let w = work_by_cmd[cmd.index()];
        if w == 0.0 {
            continue;
        }
        let rate: f64 = nodes.iter().map(|n| u / n.unit_times.get(cmd)).sum();
        work = work.max(w / rate);
        total_min_time += w * fastest(cmd) / u;
    }
    work = work.max(total_min_time / nodes.len() as f64) + first;

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
