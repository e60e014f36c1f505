//! The kinds of work of the policy matrix (`cryptodispatch-bench policies --matrix`): node sets,
//! capacities and workloads, each a function of a seed.
//!
//! The paper's kinds use the library's generator ([`WorkloadSpec`]); the others (heavy-tailed
//! lengths, long chains, chains in a flood of short jobs) are drawn here from job groups: so
//! many jobs of so many packets, dependent or not, their packets interleaved at random and
//! arriving as one Poisson stream at the offered load the class names (1 = as much work per
//! time unit as the nodes serve at full speed).

use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::{Rng, RngExt, SeedableRng};

use crate::packet::Cmd;
use crate::sim::model::{NodeModel, NodeSet};
use crate::sim::trace::{Trace, TraceRecord};
use crate::sim::workload::{Burst, WorkloadSpec};

/// Packet lengths of a job group.
#[derive(Debug, Clone, Copy)]
pub enum Lengths {
    /// Uniform over an inclusive range.
    Uniform(u64, u64),
    /// Pareto from 1, cut at the maximum (heavy-tailed).
    Pareto {
        /// The shape.
        shape: f64,
        /// The longest length.
        max: u64,
    },
}

impl Lengths {
    fn draw<R: Rng>(self, rng: &mut R) -> u64 {
        match self {
            Lengths::Uniform(lo, hi) => rng.random_range(lo..=hi),
            Lengths::Pareto { shape, max } => {
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                (u.powf(-1.0 / shape).floor() as u64).clamp(1, max)
            }
        }
    }
}

/// So many jobs of one kind.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    /// Number of jobs.
    pub jobs: usize,
    /// Packets per job, uniform over this inclusive range.
    pub packets: (u32, u32),
    /// Share of the jobs that are dependent (chained).
    pub dependent: f64,
    /// Packet lengths.
    pub lengths: Lengths,
    /// Whether the jobs encrypt only (CBC-like) rather than draw any command.
    pub encrypt_only: bool,
}

/// The work of a class.
#[derive(Debug, Clone)]
pub enum Work {
    /// The library's generator, the paper's task sets.
    Paper(WorkloadSpec),
    /// Job groups at an offered load.
    Groups {
        /// The groups.
        groups: Vec<Group>,
        /// The offered load (1: as much work per time unit as the nodes serve at full speed).
        load: f64,
    },
}

/// One kind of work: nodes, capacity and workload.
#[derive(Debug, Clone)]
pub struct Class {
    /// Short name, the matrix row.
    pub name: &'static str,
    /// The nodes' speeds.
    pub nodes: NodeSet,
    /// Node queue capacity, in length units.
    pub cap: u64,
    /// The workload.
    pub work: Work,
}

impl Class {
    /// The instance of seed `seed`: node speeds, then the trace.
    pub fn instance(&self, seed: u64) -> (Vec<NodeModel>, Trace) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let nodes = self.nodes.build(self.cap, &mut rng);
        let trace = match &self.work {
            Work::Paper(spec) => spec.generate(&nodes, 1, &mut rng),
            Work::Groups { groups, load } => groups_trace(groups, *load, &nodes, &mut rng),
        };
        (nodes, trace)
    }
}

fn paper(packets: usize, load: f64) -> WorkloadSpec {
    WorkloadSpec {
        packets,
        load: Some(load),
        ..WorkloadSpec::default()
    }
}

/// Unit times 16, 24, 32, 48: speeds 1 : 1.5 : 2 : 3 (fastest first); also the `hetero`
/// setting of `policies`.
pub const SPREAD: [f64; 4] = [16.0, 24.0, 32.0, 48.0];
/// Unit times 16, 16, 64, 64: two fast nodes and two four times slower.
const SPLIT: [f64; 4] = [16.0, 16.0, 64.0, 64.0];

/// Forty CBC-like jobs of 10-30 packets, interleaved.
fn chains() -> Work {
    Work::Groups {
        groups: vec![Group {
            jobs: 40,
            packets: (10, 30),
            dependent: 1.0,
            lengths: Lengths::Uniform(1, 4),
            encrypt_only: true,
        }],
        load: 1.5,
    }
}

/// The matrix's classes, in row order.
pub fn classes() -> Vec<Class> {
    let drawn = NodeSet::paper;
    let given = |t: &[f64]| NodeSet::Given(t.to_vec());
    let class = |name, nodes, cap, work| Class {
        name,
        nodes,
        cap,
        work,
    };
    vec![
        class("paper 4x300", drawn(4), 32, Work::Paper(paper(300, 1.5))),
        class(
            "paper 10x1000",
            drawn(10),
            32,
            Work::Paper(paper(1000, 1.5)),
        ),
        class("poisson 0.95", drawn(4), 32, Work::Paper(paper(600, 0.95))),
        class("overload 3", drawn(4), 32, Work::Paper(paper(600, 3.0))),
        class(
            "on/off bursts",
            drawn(4),
            32,
            Work::Paper(WorkloadSpec {
                burst: Some(Burst {
                    packets: 64.0,
                    duty: 0.25,
                }),
                ..paper(600, 0.8)
            }),
        ),
        class(
            "heavy tail",
            drawn(4),
            128,
            Work::Groups {
                groups: vec![Group {
                    jobs: 100,
                    packets: (1, 8),
                    dependent: 0.5,
                    lengths: Lengths::Pareto {
                        shape: 1.2,
                        max: 128,
                    },
                    encrypt_only: false,
                }],
                load: 1.5,
            },
        ),
        class("chains 1:1.5:2:3", given(&SPREAD), 32, chains()),
        class("chains 1:1:4:4", given(&SPLIT), 32, chains()),
        class(
            "chains + flood",
            given(&SPREAD),
            32,
            Work::Groups {
                groups: vec![
                    Group {
                        jobs: 4,
                        packets: (60, 100),
                        dependent: 1.0,
                        lengths: Lengths::Uniform(1, 4),
                        encrypt_only: true,
                    },
                    Group {
                        jobs: 500,
                        packets: (1, 2),
                        dependent: 0.0,
                        lengths: Lengths::Uniform(1, 4),
                        encrypt_only: false,
                    },
                ],
                load: 1.5,
            },
        ),
        class(
            "speeds 1:1.5:2:3",
            given(&SPREAD),
            32,
            Work::Paper(paper(600, 1.5)),
        ),
        class(
            "speeds 1:1:4:4",
            given(&SPLIT),
            32,
            Work::Paper(paper(600, 1.5)),
        ),
        class("2 nodes", drawn(2), 32, Work::Paper(paper(200, 1.5))),
        class("32 nodes", drawn(32), 32, Work::Paper(paper(2000, 1.5))),
        class("CAP 4", drawn(4), 4, Work::Paper(paper(600, 1.5))),
        class("CAP 256", drawn(4), 256, Work::Paper(paper(600, 1.5))),
    ]
}

/// The small instances compared with the exact optimum: 2 or 3 nodes (t in [16, 36]), 6 to
/// 14 packets of jobs of 1-4 packets, half of them dependent, CAP 32, load 1.5.
pub fn small(seed: u64) -> (Vec<NodeModel>, Trace) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes = NodeSet::paper(2 + (seed % 2) as usize).build(32, &mut rng);
    let packets = rng.random_range(6..=14);
    let spec = WorkloadSpec {
        packets,
        packets_per_job: (1, 4),
        ..WorkloadSpec::default()
    };
    let trace = spec.generate(&nodes, 1, &mut rng);
    (nodes, trace)
}

/// Draws the groups' jobs, interleaves their packets at random and sets Poisson arrivals at
/// `load` times the nodes' full-speed rate for this very work.
fn groups_trace<R: Rng>(groups: &[Group], load: f64, nodes: &[NodeModel], rng: &mut R) -> Trace {
    // (dependent, cmd, lengths of its packets)
    let mut jobs: Vec<(bool, Cmd, Vec<u64>)> = Vec::new();
    for g in groups {
        for _ in 0..g.jobs {
            let n = rng.random_range(g.packets.0..=g.packets.1);
            let dependent = rng.random_bool(g.dependent.clamp(0.0, 1.0));
            let cmd = if g.encrypt_only {
                Cmd::Encrypt
            } else {
                Cmd::ALL[rng.random_range(0..Cmd::ALL.len())]
            };
            let lengths = (0..n).map(|_| g.lengths.draw(rng)).collect();
            jobs.push((dependent, cmd, lengths));
        }
    }
    let mut order: Vec<usize> = jobs
        .iter()
        .enumerate()
        .flat_map(|(j, job)| std::iter::repeat_n(j, job.2.len()))
        .collect();
    order.shuffle(rng);
    // Work per time unit the nodes serve at full speed: each node's rate for the work's mix
    // of commands, in length units per time unit.
    let mut by_cmd = [0.0f64; 4];
    for (_, cmd, lengths) in &jobs {
        by_cmd[cmd.index()] += lengths.iter().sum::<u64>() as f64;
    }
    let total: f64 = by_cmd.iter().sum();
    let capacity: f64 = nodes
        .iter()
        .map(|n| {
            let mean_t: f64 = Cmd::ALL
                .iter()
                .map(|&c| by_cmd[c.index()] * n.unit_times.get(c))
                .sum::<f64>()
                / total;
            1.0 / mean_t
        })
        .sum();
    let span = total / (load * capacity);
    let rate = order.len() as f64 / span;
    let mut next = vec![0usize; jobs.len()];
    let mut t = 0.0;
    let records = order
        .into_iter()
        .map(|j| {
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            t += -u.ln() / rate;
            let (dependent, cmd, ref lengths) = jobs[j];
            let seq = next[j];
            next[j] += 1;
            TraceRecord {
                task: j as u64 + 1,
                seq: seq as u32,
                dependent,
                arrival: t,
                length: lengths[seq],
                cmd,
                last: seq + 1 == lengths.len(),
            }
        })
        .collect();
    Trace::from_records(records).expect("generated records follow the trace format")
}
