//! The exact optimal makespan of a small instance, by a branch-and-bound search over the
//! packets' assignment to nodes ([`optimal_makespan`]): what the policy matrix and the sampled
//! space compare every policy with on small instances. The benchmark binary checks it against
//! a mixed-integer program (`cryptodispatch-bench policies --matrix --optimum milp`), and the
//! test suite does so on random instances.
//!
//! The problem is the simulator's without its queues: every packet starts no earlier than its
//! arrival and runs on one node, taking `unit_time(cmd) × length / unit_len` there; a node runs
//! one packet at a time; a dependent job's packets all run on one node (strict affinity), each
//! after the one before. The queues (node capacity, the cluster queue's order) only restrict
//! what a policy can do, so this optimum is at most the best any policy could reach, and every
//! policy's makespan is at least it. The lower bound of `sim::bound` must never exceed it.
//!
//! # The search
//! Once every packet has a node, the nodes no longer interact: a chain is on one node, so each
//! node is a one-machine problem with release dates (the arrivals) and chains, whose least
//! makespan is reached by running the node's packets in order of arrival (earliest release
//! first is optimal for one machine with release dates; a chain's packets arrive in order, so
//! that order keeps the chain's, ties broken by the trace's order). What is left to choose is
//! the assignment: a node for each chain and for each independent packet, at most
//! `nodes^units` of them. The search assigns the units largest first, each to the nodes in
//! the order of the makespan they would give, and drops a branch as soon as a bound on every
//! completion below it reaches the best makespan found: the nodes' present makespans, and for
//! every unit still to place the least, over the nodes, of what placing it there alone must
//! cost (its first arrival plus its work there; the node's work so far, from the first
//! arrival, plus its work there). The first schedule tried is the greedy one (each unit where
//! it ends soonest), so the bound bites from the start. The instances of the matrix (2–3 nodes,
//! up to 14 packets) take milliseconds each; the cost grows as `nodes^units` in the worst case.

use std::collections::HashMap;

use crate::sim::model::NodeModel;
use crate::sim::trace::Trace;

/// The least makespan of `trace` on `nodes`, from time 0, by branch and bound over the
/// assignment (module documentation); `None` for a trace with packets and no node to run them.
pub fn optimal_makespan(trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> Option<f64> {
    if trace.records().is_empty() {
        return Some(0.0);
    }
    if nodes.is_empty() {
        return None;
    }
    Some(Search::new(trace, nodes, unit_len).run())
}

/// The branch and bound of [`optimal_makespan`]. Packets are numbered by their position in
/// arrival order, which is the order each node runs its packets in.
struct Search {
    /// Each packet's arrival, in arrival order.
    arrival: Vec<f64>,
    /// `time[k][i]`: packet k's service time on node i.
    time: Vec<Vec<f64>>,
    /// The units to place (a chain's packets, or one independent packet), largest first.
    units: Vec<Vec<usize>>,
    /// `unit_work[u][i]`: unit u's total service time on node i.
    unit_work: Vec<Vec<f64>>,
    /// The earliest arrival of all.
    first: f64,
    /// Each packet's node, once placed.
    node_of: Vec<Option<usize>>,
    /// Each node's makespan with the packets placed so far, and its work.
    span: Vec<f64>,
    work: Vec<f64>,
    best: f64,
}

impl Search {
    fn new(trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> Self {
        let records = trace.records();
        let mut order: Vec<usize> = (0..records.len()).collect();
        order.sort_by(|&a, &b| {
            records[a]
                .arrival
                .total_cmp(&records[b].arrival)
                .then(a.cmp(&b))
        });
        let arrival: Vec<f64> = order.iter().map(|&k| records[k].arrival).collect();
        let time: Vec<Vec<f64>> = order
            .iter()
            .map(|&k| {
                let r = &records[k];
                nodes
                    .iter()
                    .map(|n| n.service_time(r.cmd, r.length, unit_len))
                    .collect()
            })
            .collect();
        let mut units: Vec<Vec<usize>> = Vec::new();
        let mut chain_unit: HashMap<u64, usize> = HashMap::new();
        for (pos, &k) in order.iter().enumerate() {
            let r = &records[k];
            if r.dependent {
                let u = *chain_unit.entry(r.task).or_insert_with(|| {
                    units.push(Vec::new());
                    units.len() - 1
                });
                units[u].push(pos);
            } else {
                units.push(vec![pos]);
            }
        }
        let mut placed: Vec<(Vec<usize>, Vec<f64>)> = units
            .into_iter()
            .map(|unit| {
                let work = (0..nodes.len())
                    .map(|i| unit.iter().map(|&k| time[k][i]).sum())
                    .collect();
                (unit, work)
            })
            .collect();
        // Largest first (by its least work on any node): the big decisions are made where the
        // bound is loosest.
        let least = |w: &[f64]| w.iter().copied().fold(f64::INFINITY, f64::min);
        placed.sort_by(|(a, wa), (b, wb)| least(wb).total_cmp(&least(wa)).then(a[0].cmp(&b[0])));
        let (units, unit_work) = placed.into_iter().unzip();
        Search {
            first: arrival[0],
            node_of: vec![None; arrival.len()],
            span: vec![0.0; nodes.len()],
            work: vec![0.0; nodes.len()],
            best: f64::INFINITY,
            arrival,
            time,
            units,
            unit_work,
        }
    }

    /// Node `i`'s makespan with its packets run in arrival order.
    fn node_span(&self, i: usize) -> f64 {
        let mut t = 0.0f64;
        for (k, on) in self.node_of.iter().enumerate() {
            if *on == Some(i) {
                t = t.max(self.arrival[k]) + self.time[k][i];
            }
        }
        t
    }

    fn place(&mut self, u: usize, i: Option<usize>) {
        for &k in &self.units[u] {
            self.node_of[k] = i;
        }
    }

    /// The least makespan. The first descent places every unit (nothing is pruned while no
    /// schedule is known), so there always is one.
    fn run(mut self) -> f64 {
        self.descend(0);
        self.best
    }

    /// Places units `u..` below the present partial assignment.
    fn descend(&mut self, u: usize) {
        let now = self.span.iter().copied().fold(0.0, f64::max);
        if u == self.units.len() {
            self.best = self.best.min(now);
            return;
        }
        // What each unit still to place must cost wherever it goes.
        let mut bound = now;
        for v in u..self.units.len() {
            let release = self.arrival[self.units[v][0]];
            let least = (0..self.span.len())
                .map(|i| {
                    let w = self.unit_work[v][i];
                    (release + w)
                        .max(self.first + self.work[i] + w)
                        .max(self.span[i])
                })
                .fold(f64::INFINITY, f64::min);
            bound = bound.max(least);
        }
        if bound >= self.best * (1.0 - 1e-12) {
            return;
        }
        // Each node's makespan with unit u there; the soonest first.
        let mut tries: Vec<(f64, usize)> = (0..self.span.len())
            .map(|i| {
                self.place(u, Some(i));
                let s = self.node_span(i);
                self.place(u, None);
                (s, i)
            })
            .collect();
        tries.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (s, i) in tries {
            if s.max(now) >= self.best * (1.0 - 1e-12) {
                break;
            }
            let (old_span, old_work) = (self.span[i], self.work[i]);
            self.place(u, Some(i));
            self.span[i] = s;
            self.work[i] += self.unit_work[u][i];
            self.descend(u + 1);
            self.place(u, None);
            self.span[i] = old_span;
            self.work[i] = old_work;
        }
    }
}
