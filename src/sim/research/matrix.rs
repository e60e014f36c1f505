//! Every policy on the same work, three ways: the policy matrix (every kind of work of
//! [`classes`], with the jobs' lengths known to the policies and not), a sample of the workload
//! space ([`space`](crate::sim::space)), and small instances against the exact optimum
//! ([`optimum`](super::optimum)).
//!
//! A cell of the matrix is a class with one knowledge of lengths. Every policy of a cell runs
//! on the same instances, and the cell holds each policy's mean makespan and the mean lower
//! bound (`sim::bound`). A configuration of the sample is one instance, every policy on it.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use crate::sched::PolicySpec;
use crate::sim::bound::lower_bound;
use crate::sim::engine::{SimConfig, simulate};
use crate::sim::model::NodeModel;
use crate::sim::research::classes::{self, Class};
use crate::sim::research::experiments::PointRunner;
pub use crate::sim::research::experiments::geo_mean;
use crate::sim::space::{
    EARLIER_HELD_OUT_SEED, HELD_OUT_SEED, SECOND_HELD_OUT_SEED, SpaceConfig, TUNING_SEED,
};
use crate::sim::trace::Trace;

/// The seeds kept for tuning (first, last): `mct` was shaped on some of them and variants of
/// it tried there, and `paper-adaptive` was tuned from the seed just before them
/// ([`ADAPTIVE_TUNING_SEEDS`]); the reports run elsewhere.
pub const TUNING_SEEDS: (u64, u64) = (1001, 2000);
/// The seeds `paper-adaptive`'s rule was tuned on: the 40 from the one before
/// [`TUNING_SEEDS`].
pub const ADAPTIVE_TUNING_SEEDS: (u64, u64) = (TUNING_SEEDS.0 - 1, TUNING_SEEDS.0 + 38);

/// The makespan of `spec` on `trace` under `config`.
///
/// # Errors
/// A configuration the simulator refuses, or a policy that left packets unserved (which would
/// show a short makespan).
pub fn makespan(trace: &Trace, config: &SimConfig, spec: &PolicySpec) -> Result<f64, String> {
    let r = simulate(trace, config, spec).map_err(|e| format!("{spec}: {e}"))?;
    if r.placements.len() != trace.len() {
        return Err(format!("{spec} left packets unserved"));
    }
    Ok(r.makespan)
}

/// The makespan of every policy of `specs`, in order.
fn makespans(trace: &Trace, config: &SimConfig, specs: &[PolicySpec]) -> Result<Vec<f64>, String> {
    specs.iter().map(|s| makespan(trace, config, s)).collect()
}

/// A policy's standing over a set of cases (the matrix's cells, the sample's configurations):
/// its makespan over each case's best policy's, and over the case's lower bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// The geometric mean of makespan / the best.
    pub geo_best: f64,
    /// The largest makespan / the best.
    pub worst: f64,
    /// The geometric mean of makespan / the lower bound.
    pub geo_bound: f64,
    /// The cases it is within 5% of the best in.
    pub within_5: usize,
    /// The cases it is within 10% of the best in.
    pub within_10: usize,
    /// The cases it is the best in.
    pub best: usize,
}

impl Standing {
    /// The standing over `cases`, each the policy's (makespan, the best makespan, the bound).
    pub fn of(cases: impl Iterator<Item = (f64, f64, f64)> + Clone) -> Standing {
        let to_best = || cases.clone().map(|(m, best, _)| m / best);
        let within = |x: f64| to_best().filter(|&r| r <= x).count();
        Standing {
            geo_best: geo_mean(to_best()),
            worst: to_best().fold(0.0, f64::max),
            geo_bound: geo_mean(cases.clone().map(|(m, _, bound)| m / bound)),
            within_5: within(1.05),
            within_10: within(1.10),
            best: within(1.0 + 1e-9),
        }
    }
}

/// One cell of the matrix: a class, with the jobs' lengths known or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The class's name.
    pub class: &'static str,
    /// Whether the policies knew the jobs' lengths.
    pub known: bool,
    /// Per policy: the mean makespan over the seeds.
    pub makespan: Vec<f64>,
    /// The mean lower bound over the seeds.
    pub bound: f64,
}

impl Cell {
    /// The least mean makespan of the cell's policies.
    pub fn best(&self) -> f64 {
        self.makespan.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// `known` or `unknown`.
    pub fn lengths(&self) -> &'static str {
        if self.known { "known" } else { "unknown" }
    }
}

/// The matrix: every class of `classes`, lengths known then unknown, every policy of `specs`
/// on the instances of `seeds`.
///
/// # Errors
/// As [`makespan`].
pub fn cells(
    classes: &[Class],
    specs: &[PolicySpec],
    seeds: &[u64],
    runner: &impl PointRunner,
) -> Result<Vec<Cell>, String> {
    // One point per (class, knowledge, seed): the lower bound and every policy's makespan.
    let points: Vec<(usize, bool, u64)> = (0..classes.len())
        .flat_map(|c| [true, false].map(|k| (c, k)))
        .flat_map(|(c, k)| seeds.iter().map(move |&s| (c, k, s)))
        .collect();
    let runs = runner.run(&points, |&(c, known, seed)| {
        let (nodes, trace) = classes[c].instance(seed);
        let bound = lower_bound(&trace, &nodes, 1).value();
        let config = SimConfig::new(nodes).with_known_lengths(known);
        Ok::<_, String>((bound, makespans(&trace, &config, specs)?))
    });
    let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    let n = seeds.len().max(1) as f64;
    // The points are class-major, lengths known then not, then the seeds.
    Ok(runs
        .chunks(seeds.len().max(1))
        .enumerate()
        .map(|(i, mine)| Cell {
            class: classes[i / 2].name,
            known: i % 2 == 0,
            makespan: (0..specs.len())
                .map(|p| mine.iter().map(|r| r.1[p]).sum::<f64>() / n)
                .collect(),
            bound: mine.iter().map(|r| r.0).sum::<f64>() / n,
        })
        .collect())
}

/// One small instance ([`classes::small`]): its optimum, its lower bound, and each policy's
/// makespan with the jobs' lengths known, then unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct Small {
    /// The instance's seed.
    pub seed: u64,
    /// Its nodes.
    pub nodes: usize,
    /// Its packets.
    pub packets: usize,
    /// The least makespan any schedule reaches.
    pub optimum: f64,
    /// The simulator's lower bound.
    pub bound: f64,
    /// Per policy, lengths known.
    pub known: Vec<f64>,
    /// Per policy, lengths unknown.
    pub unknown: Vec<f64>,
}

impl Small {
    /// Per policy: its makespan over the optimum, lengths known and unknown.
    pub fn ratios(&self, policy: usize) -> (f64, f64) {
        (
            self.known[policy] / self.optimum,
            self.unknown[policy] / self.optimum,
        )
    }
}

/// Every policy's makespan over the optimum on `small`, as (mean, worst) with the jobs'
/// lengths known, then unknown; a policy per entry, in the order of the makespans.
pub fn against_optimum(small: &[Small]) -> Vec<[(f64, f64); 2]> {
    let n = small.len().max(1) as f64;
    let policies = small.first().map_or(0, |s| s.known.len());
    let of = |r: Vec<f64>| {
        (
            r.iter().sum::<f64>() / n,
            r.iter().copied().fold(0.0, f64::max),
        )
    };
    (0..policies)
        .map(|p| {
            let (known, unknown): (Vec<f64>, Vec<f64>) = small.iter().map(|s| s.ratios(p)).unzip();
            [of(known), of(unknown)]
        })
        .collect()
}

/// How the lower bound fares against the optimum on `small`: the instances where it lies
/// above the optimum (it should on none), and the mean bound over the optimum.
pub fn bound_against_optimum(small: &[Small]) -> (usize, f64) {
    let over = small.iter().filter(|s| s.bound > s.optimum * (1.0 + 1e-6));
    let ratios = small.iter().map(|s| s.bound / s.optimum);
    (over.count(), ratios.sum::<f64>() / small.len() as f64)
}

/// The small instances of `seeds`, every policy of `specs` on each, the optimum found by
/// `optimum` (given the seed and the instance).
///
/// # Errors
/// As [`makespan`], or `optimum`'s.
pub fn small_instances(
    seeds: &[u64],
    specs: &[PolicySpec],
    optimum: impl Fn(u64, &Trace, &[NodeModel]) -> Result<f64, String> + Sync,
    runner: &impl PointRunner,
) -> Result<Vec<Small>, String> {
    runner
        .run(seeds, |&seed| {
            let (nodes, trace) = classes::small(seed);
            let spans = |known| {
                makespans(
                    &trace,
                    &SimConfig::new(nodes.clone()).with_known_lengths(known),
                    specs,
                )
            };
            Ok(Small {
                seed,
                nodes: nodes.len(),
                packets: trace.len(),
                optimum: optimum(seed, &trace, &nodes)?,
                bound: lower_bound(&trace, &nodes, 1).value(),
                known: spans(true)?,
                unknown: spans(false)?,
            })
        })
        .into_iter()
        .collect()
}

/// One configuration of the workload space, every policy on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The configuration.
    pub config: SpaceConfig,
    /// Packets of its trace.
    pub packets: usize,
    /// The simulator's lower bound.
    pub bound: f64,
    /// Per policy: the makespan.
    pub makespan: Vec<f64>,
}

impl Outcome {
    /// The least makespan of the policies.
    pub fn best(&self) -> f64 {
        self.makespan.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// The policy with the least makespan (the first of equals).
    pub fn best_policy(&self) -> usize {
        let makespan = self.makespan.iter().enumerate();
        makespan
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(p, _)| p)
    }
}

/// The share of `outcomes` in which `policy`'s makespan is within `x` times the best.
pub fn share_within(outcomes: &[Outcome], policy: usize, x: f64) -> f64 {
    let ratios = outcomes.iter().map(|o| o.makespan[policy] / o.best());
    ratios.filter(|&r| r <= x + 1e-9).count() as f64 / outcomes.len().max(1) as f64
}

/// The indices of `outcomes`, `policy`'s makespan over the best the largest first.
pub fn worst_first(outcomes: &[Outcome], policy: usize) -> Vec<usize> {
    let ratio = |i: usize| outcomes[i].makespan[policy] / outcomes[i].best();
    let mut indices: Vec<usize> = (0..outcomes.len()).collect();
    indices.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)));
    indices
}

/// Which sample of the workload space `seed` draws: the tuning sample, the held-out one, the
/// first held-out one (studied since), the second (the rule changed since), or another.
pub fn sample_name(seed: u64) -> &'static str {
    match seed {
        TUNING_SEED => "the tuning sample",
        HELD_OUT_SEED => "the held-out sample",
        EARLIER_HELD_OUT_SEED => "the first held-out sample, studied since: no longer held out",
        SECOND_HELD_OUT_SEED => {
            "the second held-out sample, of the rule before its last change: no longer held out"
        }
        _ => "a sample that is neither the tuning nor the held-out one",
    }
}

/// Every policy's [`Standing`] over `outcomes`, as (policy, standing), the least geometric
/// mean over the best first.
pub fn standings(outcomes: &[&Outcome], policies: usize) -> Vec<(usize, Standing)> {
    let mut standings: Vec<(usize, Standing)> = (0..policies)
        .map(|p| {
            (
                p,
                Standing::of(outcomes.iter().map(|o| (o.makespan[p], o.best(), o.bound))),
            )
        })
        .collect();
    standings.sort_by(|a, b| a.1.geo_best.total_cmp(&b.1.geo_best));
    standings
}

/// Every policy of `specs` on each configuration of `configs`.
///
/// # Errors
/// As [`makespan`], naming the configuration.
pub fn outcomes(
    configs: &[SpaceConfig],
    specs: &[PolicySpec],
    runner: &impl PointRunner,
) -> Result<Vec<Outcome>, String> {
    runner
        .run(configs, |c| {
            let trace = c.trace();
            let sim = c.sim_config();
            let makespan = makespans(&trace, &sim, specs)
                .map_err(|e| format!("configuration {}: {e}", c.describe()))?;
            Ok(Outcome {
                config: c.clone(),
                packets: trace.len(),
                bound: lower_bound(&trace, &sim.nodes, sim.unit_len).value(),
                makespan,
            })
        })
        .into_iter()
        .collect()
}

/// Small instances' optima kept between runs: the optimum does not depend on the policies, and
/// with a slow solver solving is what takes the time. An instance is keyed by a hash of its
/// nodes and trace as printed (`Debug`), so a changed instance generator misses the cache
/// instead of reading a stale optimum. The file has one `key,optimum` line per instance, the
/// optimum written so that it reads back exactly.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptimumCache(BTreeMap<String, f64>);

impl OptimumCache {
    /// The key of an instance: FNV-1a (64 bits) of its nodes and trace, in hex.
    fn key(nodes: &[NodeModel], trace: &Trace) -> String {
        let text = format!("{nodes:?}|{trace:?}");
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{hash:016x}")
    }

    /// The cache in `path`; empty if the file does not exist.
    ///
    /// # Errors
    /// The file cannot be read, or a line is not `key,optimum` (`InvalidData`, naming the
    /// line).
    pub fn read(path: &Path) -> io::Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e),
        };
        let mut map = BTreeMap::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
            let parsed = line
                .split_once(',')
                .and_then(|(k, v)| Some((k.to_owned(), v.parse::<f64>().ok()?)));
            let Some((k, v)) = parsed else {
                let message = format!("line {}: not key,optimum", n + 1);
                return Err(io::Error::new(io::ErrorKind::InvalidData, message));
            };
            map.insert(k, v);
        }
        Ok(OptimumCache(map))
    }

    /// The optimum kept for an instance.
    pub fn get(&self, nodes: &[NodeModel], trace: &Trace) -> Option<f64> {
        self.0.get(&Self::key(nodes, trace)).copied()
    }

    /// Keeps an instance's optimum.
    pub fn insert(&mut self, nodes: &[NodeModel], trace: &Trace, optimum: f64) {
        self.0.insert(Self::key(nodes, trace), optimum);
    }

    /// Keeps the optimum of every instance of `small` (of [`classes::small`], by seed).
    pub fn insert_small(&mut self, small: &[Small]) {
        for s in small {
            let (nodes, trace) = classes::small(s.seed);
            self.insert(&nodes, &trace, s.optimum);
        }
    }

    /// Writes the cache to `path`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let text: String = self.0.iter().map(|(k, v)| format!("{k},{v:?}\n")).collect();
        std::fs::write(path, text)
    }
}
