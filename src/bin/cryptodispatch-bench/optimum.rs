//! The exact optimal makespan of a small instance, two ways: a branch-and-bound search over the
//! packets' assignment to nodes ([`optimal_makespan`], what the matrix uses), and a
//! mixed-integer program solved by `good_lp` with its pure-Rust `microlp` backend
//! ([`milp_makespan`], `--optimum milp`, the check on the search). Neither is in the library.
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
//!
//! # The mixed-integer program
//! The formulation is the disjunctive one: a binary assignment per independent packet and per
//! dependent job and node, a start time per packet, a binary order for every pair of packets
//! that may share a node, and big-M constraints that separate two packets on the same node.
//! Each node's total work after the first arrival is added as a cut on the makespan (it holds
//! in every schedule and tightens the relaxation a great deal). It needs no argument about the
//! order on a node, which makes it the independent check; `microlp` takes from seconds to
//! over an hour per instance of the matrix's size.

use std::collections::HashMap;

use good_lp::{
    Expression, ProblemVariables, Solution, SolverModel, Variable, constraint, microlp, variable,
};

use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::trace::Trace;

/// How the exact optimum is found (`policies --matrix --optimum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Solver {
    /// Branch and bound over the assignment ([`optimal_makespan`]): milliseconds per instance.
    Search,
    /// The mixed-integer program ([`milp_makespan`]): seconds to hours per instance.
    Milp,
}

impl Solver {
    /// The least makespan of `trace` on `nodes`, from time 0, by this solver.
    ///
    /// # Errors
    /// As the solver's function.
    pub fn solve(self, trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> Result<f64, String> {
        match self {
            Solver::Search => optimal_makespan(trace, nodes, unit_len),
            Solver::Milp => milp_makespan(trace, nodes, unit_len),
        }
    }

    /// The solver as the matrix's report names it.
    pub fn describe(self) -> &'static str {
        match self {
            Solver::Search => "branch and bound over the assignment",
            Solver::Milp => "MILP, good_lp + microlp",
        }
    }
}

/// The least makespan of `trace` on `nodes`, from time 0, by branch and bound over the
/// assignment (module documentation).
///
/// # Errors
/// A trace with packets and no node to run them.
pub fn optimal_makespan(trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> Result<f64, String> {
    let records = trace.records();
    if records.is_empty() {
        return Ok(0.0);
    }
    if nodes.is_empty() {
        return Err("the exact optimum: packets and no node".into());
    }
    Ok(Search::new(trace, nodes, unit_len).run())
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
        use rand::rngs::ChaCha8Rng;
        use rand::{RngExt, SeedableRng};
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

    #[test]
    fn the_search_finds_the_best_assignment() {
        // Every assignment, each node in arrival order: the search's pruning loses none of
        // them. (That arrival order is best on a node is what the program checks above.)
        for seed in 200..260 {
            let (trace, nodes) = random_instance(seed, 6);
            let opt = optimal_makespan(&trace, &nodes, UNIT).unwrap();
            let mut search = Search::new(&trace, &nodes, UNIT);
            let units = search.units.len();
            let m = nodes.len();
            let mut least = f64::INFINITY;
            for code in 0..m.pow(units as u32) {
                let mut c = code;
                for u in 0..units {
                    search.place(u, Some(c % m));
                    c /= m;
                }
                let span = (0..m).map(|i| search.node_span(i)).fold(0.0, f64::max);
                least = least.min(span);
            }
            assert!(
                (opt - least).abs() <= 1e-9 * least.max(1.0),
                "seed {seed}: search {opt}, every assignment {least}"
            );
        }
    }

    #[test]
    fn an_empty_trace_takes_no_time_and_no_nodes_is_an_error() {
        let empty = Trace::from_records(Vec::new()).unwrap();
        assert_eq!(optimal_makespan(&empty, &nodes(&[10.0]), UNIT), Ok(0.0));
        let one = Trace::from_records(vec![record(0, 0, false, 0.0)]).unwrap();
        assert!(optimal_makespan(&one, &[], UNIT).is_err());
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
