//! A workload generator that follows the paper's task sets (docs/ALGORITHM.md §2, §9).
//!
//! Jobs of 1…k packets, a share of them dependent, each with one command; packets of all jobs
//! arrive as one Poisson stream, interleaved at random (each job's packets in order). The
//! arrival rate is set from the node set: `load` = 1 offers exactly as much work per unit time
//! as the cluster can serve at full speed; above 1 a backlog builds, as in the paper's
//! experiments, where every packet is known before the cluster is drained.
//!
//! With [`WorkloadSpec::burst`] set, the stream is on/off instead ([`Burst`]): packets arrive
//! only in on periods, at a rate raised so that the offered load over a whole on/off cycle is
//! still `load`, and not at all in the off periods between them. Without it (the default) the
//! generator draws exactly what it always drew, so traces from a seed do not change.

use rand::seq::SliceRandom;
use rand::{Rng, RngExt};

use crate::packet::Cmd;
use crate::sim::model::NodeModel;
use crate::sim::trace::{Trace, TraceRecord};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// Total packets.
    pub packets: usize,
    /// Packets per job, drawn uniformly from this inclusive range.
    pub packets_per_job: (u32, u32),
    /// Probability that a job is dependent.
    pub dependent_share: f64,
    /// Packet length in length units, drawn uniformly from this inclusive range.
    pub length: (u64, u64),
    /// The commands jobs draw from, uniformly.
    pub cmds: Vec<Cmd>,
    /// Offered load relative to the cluster's full-speed capacity; `None`: every packet
    /// arrives at time 0.
    pub load: Option<f64>,
    /// Arrivals in bursts (on/off) instead of one Poisson stream; `None` (the default): one
    /// stream. Ignored when `load` is `None`.
    pub burst: Option<Burst>,
}

/// On/off arrivals: bursts of packets at a high rate, separated by silences.
///
/// One cycle lasts as long as `packets` packets take to arrive at the average rate (the rate
/// `load` sets); the source is on for the first `duty` share of it, arriving at the average
/// rate divided by `duty` (a Poisson stream), and off for the rest. So a burst brings
/// `packets` packets on average, the peak rate is `load / duty` times the cluster's capacity,
/// and the offered load over a cycle is still `load`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Burst {
    /// Mean packets per burst (> 0).
    pub packets: f64,
    /// Share of each cycle the source is on, in (0, 1]; 1 is the plain Poisson stream (and so
    /// is a value outside (0, 1), or `packets` ≤ 0).
    pub duty: f64,
}

impl Burst {
    /// The on and off periods for an average arrival rate of `rate` packets per time unit.
    pub fn periods(&self, rate: f64) -> (f64, f64) {
        let duty = self.duty.clamp(f64::MIN_POSITIVE, 1.0);
        let cycle = self.packets.max(f64::MIN_POSITIVE) / rate;
        (cycle * duty, cycle * (1.0 - duty))
    }
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            packets: 600,
            packets_per_job: (1, 8),
            dependent_share: 0.5,
            length: (1, 4),
            cmds: Cmd::ALL.to_vec(),
            load: Some(1.5),
            burst: None,
        }
    }
}

impl WorkloadSpec {
    /// The same workload with `packets` packets.
    pub fn with_packets(&self, packets: usize) -> Self {
        WorkloadSpec {
            packets,
            ..self.clone()
        }
    }

    /// The average arrival rate, in packets per time unit, that `load` sets for `nodes`: `load`
    /// times the packets the nodes serve together at full speed (for the average command and
    /// length). `None` when `load` is `None` (every packet arrives at time 0).
    pub fn arrival_rate(&self, nodes: &[NodeModel], unit_len: u64) -> Option<f64> {
        let (lmin, lmax) = ordered(self.length.0.max(1), self.length.1.max(1));
        let cmds = if self.cmds.is_empty() {
            Cmd::ALL.to_vec()
        } else {
            self.cmds.clone()
        };
        self.load
            .map(|load| load * service_rate(nodes, &cmds, lmin, lmax, unit_len))
    }

    /// Generates a trace for `nodes` (whose speeds set the arrival rate).
    pub fn generate<R: Rng>(&self, nodes: &[NodeModel], unit_len: u64, rng: &mut R) -> Trace {
        let (pmin, pmax) = ordered(self.packets_per_job.0.max(1), self.packets_per_job.1.max(1));
        let (lmin, lmax) = ordered(self.length.0.max(1), self.length.1.max(1));
        let cmds = if self.cmds.is_empty() {
            Cmd::ALL.to_vec()
        } else {
            self.cmds.clone()
        };

        // Jobs: (dependent, cmd, packet count), until the packets are all handed out.
        let mut jobs = Vec::new();
        let mut left = self.packets;
        while left > 0 {
            let n = (rng.random_range(pmin..=pmax) as usize).min(left);
            let dependent = rng.random_bool(self.dependent_share.clamp(0.0, 1.0));
            let cmd = cmds[rng.random_range(0..cmds.len())];
            jobs.push((dependent, cmd, n));
            left -= n;
        }

        // Random interleaving: shuffle the multiset of job labels.
        let mut order: Vec<usize> = jobs
            .iter()
            .enumerate()
            .flat_map(|(j, &(_, _, n))| std::iter::repeat_n(j, n))
            .collect();
        order.shuffle(rng);

        let rate = self.arrival_rate(nodes, unit_len);
        // Bursts: arrivals run on an "on" clock at the peak rate; each full on period that
        // passes on it adds one off period to the trace's clock.
        let burst = match (self.burst, rate) {
            (Some(b), Some(r))
                if r.is_finite() && r > 0.0 && b.duty > 0.0 && b.duty < 1.0 && b.packets > 0.0 =>
            {
                let (on, off) = b.periods(r);
                (on > 0.0 && on.is_finite() && off.is_finite()).then_some((on, off, r / b.duty))
            }
            _ => None,
        };
        let rate = burst.map_or(rate, |(_, _, peak)| Some(peak));
        let mut t = 0.0;
        let mut next_seq = vec![0u32; jobs.len()];
        let mut records = Vec::with_capacity(order.len());
        for j in order {
            if let Some(rate) = rate.filter(|r| r.is_finite() && *r > 0.0) {
                // Exponential inter-arrival time with mean 1 / rate.
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                t += -u.ln() / rate;
            }
            let (dependent, cmd, n) = jobs[j];
            let seq = next_seq[j];
            next_seq[j] += 1;
            let arrival = match burst {
                Some((on, off, _)) => t + (t / on).floor() * off,
                None => t,
            };
            records.push(TraceRecord {
                task: j as u64 + 1,
                seq,
                dependent,
                arrival,
                length: rng.random_range(lmin..=lmax),
                cmd,
                last: seq as usize + 1 == n,
            });
        }
        // Every rule of the format holds by construction: seq in order from 0, one flag per
        // job, arrivals non-decreasing, lengths ≥ 1, `last` on each job's final packet.
        Trace::from_generated(records)
    }
}

fn ordered<T: PartialOrd>(a: T, b: T) -> (T, T) {
    if a <= b { (a, b) } else { (b, a) }
}

/// Packets per time unit the nodes serve together at full speed, for the average command and
/// length.
fn service_rate(nodes: &[NodeModel], cmds: &[Cmd], lmin: u64, lmax: u64, unit_len: u64) -> f64 {
    let mean_len = (lmin + lmax) as f64 / 2.0;
    nodes
        .iter()
        .map(|n| {
            let mean_t = cmds.iter().map(|&c| n.unit_times.get(c)).sum::<f64>() / cmds.len() as f64;
            unit_len.max(1) as f64 / (mean_t * mean_len)
        })
        .sum()
}
