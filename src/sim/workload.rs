//! A workload generator that follows the paper's task sets (PAPER.md §2, §9).
//!
//! Jobs of 1…k packets, a share of them dependent, each with one command; packets of all jobs
//! arrive as one Poisson stream, interleaved at random (each job's packets in order). The
//! arrival rate is set from the node set: `load` = 1 offers exactly as much work per unit time
//! as the cluster can serve at full speed; above 1 a backlog builds, as in the paper's
//! experiments, where every packet is known before the cluster is drained.

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

        let rate = self
            .load
            .map(|load| load * service_rate(nodes, &cmds, lmin, lmax, unit_len));
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
            records.push(TraceRecord {
                task: j as u64 + 1,
                seq,
                dependent,
                arrival: t,
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
