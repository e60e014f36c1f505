//! The paper's four experiments (docs/ALGORITHM.md §9), run on the simulator, and
//! `paper-adaptive` against the best fixed α.
//!
//! Every point is repeated over several seeds. A seed fixes one instance — the node speeds and
//! the trace — and every policy or α of a point runs on the same instances, so comparisons are
//! paired. The points are independent of one another: a [`PointRunner`] runs them, in turn or
//! in parallel, and results do not depend on how.

use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

use crate::packet::PacketMeta;
use crate::sched::policy::PaperAdaptive;
use crate::sched::{ClusterView, Policy, PolicySpec};
use crate::sim::bound::lower_bound;
use crate::sim::engine::{SimConfig, SimResult, simulate, simulate_with};
use crate::sim::model::{NodeModel, NodeSet};
use crate::sim::trace::Trace;
use crate::sim::workload::{Burst, WorkloadSpec};

/// How an experiment runs its points, which are independent of one another.
pub trait PointRunner: Sync {
    /// `f` of every point, in the points' order whatever order they ran in.
    fn run<T: Sync, R: Send>(&self, points: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R>;
}

/// A [`PointRunner`] that runs the points one after another on the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct InTurn;

impl PointRunner for InTurn {
    fn run<T: Sync, R: Send>(&self, points: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
        points.iter().map(f).collect()
    }
}

/// The capacities experiment 1 sweeps.
pub const CAPS: [u64; 8] = [4, 8, 16, 32, 64, 100, 150, 200];

/// The paper's four speed classes (experiment 1, figure 6b), one node drawn from each.
pub const CLASSES: [(f64, f64); 4] = [(8.0, 28.0), (16.0, 36.0), (32.0, 52.0), (64.0, 84.0)];

/// Experiment 1's node sets with their labels: four nodes drawn from [16, 36], and one node
/// from each of the four speed classes ([`CLASSES`]).
pub fn exp1_sets() -> [(&'static str, NodeSet); 2] {
    [
        ("t in [16,36]", NodeSet::paper(4)),
        ("four classes", NodeSet::Classes(CLASSES.to_vec())),
    ]
}

/// Settings shared by the experiments.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Seeds per point.
    pub seeds: u32,
    /// The first seed; seed k of a point is `base_seed + k`.
    pub base_seed: u64,
    /// The workload (its packet count is set per point).
    pub workload: WorkloadSpec,
    /// Node queue capacity in length units (where the experiment does not sweep it).
    pub cap: u64,
    /// Cluster queue length in packets.
    pub cluster_queue_len: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            seeds: 10,
            base_seed: 1,
            workload: WorkloadSpec::default(),
            cap: 32,
            cluster_queue_len: 32,
        }
    }
}

/// Mean and sample standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stats {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one sample).
    pub std: f64,
}

impl Stats {
    /// The statistics of `xs`.
    pub fn of(xs: &[f64]) -> Stats {
        let n = xs.len();
        if n == 0 {
            return Stats::default();
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Stats {
            mean,
            std: var.sqrt(),
        }
    }
}

/// Two policies' makespans compared round by round, where rounds differ more than the policies
/// do (on a live machine the same round meets the same conditions): the geometric mean of the
/// ratio a ÷ b with its 95% interval (normal approximation of the mean log ratio), and the
/// rounds a was faster in. An interval that holds 1 says the two are within the noise of each
/// other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// Geometric mean of a ÷ b over the rounds.
    pub mean: f64,
    /// Lower end of its 95% interval.
    pub low: f64,
    /// Upper end of its 95% interval.
    pub high: f64,
    /// Rounds in which a was faster.
    pub wins: usize,
    /// Rounds compared.
    pub rounds: usize,
}

impl Paired {
    /// The comparison of makespans `a` and `b`, one of each per round, in any one unit; `None`
    /// with fewer than 3 rounds (no spread to estimate).
    pub fn of(a: &[f64], b: &[f64]) -> Option<Paired> {
        let logs: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x / y).ln())
            .filter(|l| l.is_finite())
            .collect();
        let n = logs.len();
        if n < 3 {
            return None;
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = 1.96 * (var / n as f64).sqrt();
        Some(Paired {
            mean: mean.exp(),
            low: (mean - half).exp(),
            high: (mean + half).exp(),
            wins: logs.iter().filter(|&&l| l < 0.0).count(),
            rounds: n,
        })
    }
}

/// The median of `xs` (the mean of the middle two of an even count); `None` for none.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(xs[n / 2]),
        _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

/// A policy's label in the reports: its name, or its full spelling (commas as `;`, so that it
/// fits a CSV cell) when it has parameters other than the defaults.
pub fn label(spec: &PolicySpec) -> String {
    if spec.name().parse::<PolicySpec>().as_ref() == Ok(spec) {
        spec.name().to_owned()
    } else {
        spec.to_string().replace(',', ";")
    }
}

/// The α grid of experiments 1 and 2: 0, 0.05, …, 1.
pub fn alpha_grid() -> Vec<f64> {
    (0..=20).map(|i| f64::from(i) / 20.0).collect()
}

/// The paper's policy with speed coefficient α and β = 1 − α.
pub fn paper_alpha(alpha: f64) -> PolicySpec {
    PolicySpec::paper(alpha, 1.0 - alpha)
}

/// One instance: node speeds and a trace, fixed by the seed.
pub fn instance(
    settings: &Settings,
    nodes: &NodeSet,
    cap: u64,
    packets: usize,
    seed: u64,
) -> (Vec<NodeModel>, Trace) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes = nodes.build(cap, &mut rng);
    let trace = settings
        .workload
        .with_packets(packets)
        .generate(&nodes, 1, &mut rng);
    (nodes, trace)
}

fn run(
    settings: &Settings,
    nodes: Vec<NodeModel>,
    trace: &Trace,
    policy: &PolicySpec,
) -> SimResult {
    let config = SimConfig {
        cluster_queue_len: settings.cluster_queue_len,
        ..SimConfig::new(nodes)
    };
    // Capacities are validated by the experiment's settings; a refused configuration is a
    // settings error the caller checks first with `check`.
    simulate(trace, &config, policy).unwrap_or_else(|e| panic!("invalid experiment settings: {e}"))
}

/// Checks that `cap` can hold the workload's longest packet, so the experiments cannot fail
/// midway.
///
/// # Errors
/// A message naming the problem.
pub fn check(settings: &Settings, caps: &[u64]) -> Result<(), String> {
    let longest = settings.workload.length.0.max(settings.workload.length.1);
    if let Some(cap) = caps.iter().chain([&settings.cap]).find(|&&c| c < longest) {
        return Err(format!(
            "capacity {cap} is smaller than the longest packet ({longest})"
        ));
    }
    if settings.seeds == 0 {
        return Err("at least one seed is needed".into());
    }
    if settings.cluster_queue_len == 0 {
        return Err("the cluster queue needs room for at least one packet".into());
    }
    Ok(())
}

/// A run's shares of the packets and of the busy time per node, in the order of `rank`.
fn ranked_shares(r: &SimResult, rank: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let total = r.node_packets.iter().sum::<u64>().max(1) as f64;
    let busy = r.shares();
    (
        rank.iter()
            .map(|&i| r.node_packets[i] as f64 / total)
            .collect(),
        rank.iter().map(|&i| busy[i]).collect(),
    )
}

/// Node indices from fastest to slowest (by mean unit time over the commands).
fn speed_rank(nodes: &[NodeModel]) -> Vec<usize> {
    let mean = |n: &NodeModel| n.unit_times.0.iter().sum::<f64>();
    let mut idx: Vec<usize> = (0..nodes.len()).collect();
    idx.sort_by(|&a, &b| mean(&nodes[a]).total_cmp(&mean(&nodes[b])).then(a.cmp(&b)));
    idx
}

/// Experiment 1: for each capacity, the α (β = 1 − α) with the least mean makespan.
#[derive(Debug, Clone, PartialEq)]
pub struct AlphaCapRow {
    /// The node set's label.
    pub nodes: String,
    /// Node capacity.
    pub cap: u64,
    /// Mean makespan for each α of [`alpha_grid`].
    pub by_alpha: Vec<(f64, Stats)>,
    /// The best α (the smallest, if tied).
    pub best_alpha: f64,
    /// Its makespan.
    pub best: Stats,
}

impl AlphaCapRow {
    /// The mean makespan at `alpha` (NaN if `alpha` is not of the grid).
    pub fn at(&self, alpha: f64) -> f64 {
        let mut by_alpha = self.by_alpha.iter();
        by_alpha
            .find(|(a, _)| (a - alpha).abs() < 1e-9)
            .map_or(f64::NAN, |(_, s)| s.mean)
    }
}

/// Experiment 1's runs: for each capacity and seed (seed k of a capacity is `base_seed + k`),
/// the makespan under every α of [`alpha_grid`], and whatever `extra` computes on the same
/// instance; in capacity-major order.
fn alpha_grid_runs<T: Send>(
    settings: &Settings,
    nodes: &NodeSet,
    caps: &[u64],
    packets: usize,
    runner: &impl PointRunner,
    extra: impl Fn(&[NodeModel], &Trace) -> T + Sync,
) -> Vec<(Vec<f64>, T)> {
    let alphas = alpha_grid();
    let points: Vec<(u64, u32)> = caps
        .iter()
        .flat_map(|&c| (0..settings.seeds).map(move |s| (c, s)))
        .collect();
    runner.run(&points, |&(cap, s)| {
        let (nodes, trace) = instance(
            settings,
            nodes,
            cap,
            packets,
            settings.base_seed + u64::from(s),
        );
        let fixed = alphas
            .iter()
            .map(|&a| run(settings, nodes.clone(), &trace, &paper_alpha(a)).makespan)
            .collect();
        let more = extra(&nodes, &trace);
        (fixed, more)
    })
}

/// Experiment 1 on one node set: best α against capacity.
pub fn exp1(
    settings: &Settings,
    label: &str,
    nodes: &NodeSet,
    caps: &[u64],
    packets: usize,
    runner: &impl PointRunner,
) -> Vec<AlphaCapRow> {
    let alphas = alpha_grid();
    let results = alpha_grid_runs(settings, nodes, caps, packets, runner, |_, _| ());
    let results: Vec<Vec<f64>> = results.into_iter().map(|(fixed, ())| fixed).collect();
    caps.iter()
        .enumerate()
        .map(|(ci, &cap)| {
            let per_seed =
                &results[ci * settings.seeds as usize..(ci + 1) * settings.seeds as usize];
            let by_alpha: Vec<(f64, Stats)> = alphas
                .iter()
                .enumerate()
                .map(|(ai, &a)| {
                    (
                        a,
                        Stats::of(&per_seed.iter().map(|m| m[ai]).collect::<Vec<_>>()),
                    )
                })
                .collect();
            let (best_alpha, best) = by_alpha.iter().fold(
                (
                    f64::NAN,
                    Stats {
                        mean: f64::INFINITY,
                        std: 0.0,
                    },
                ),
                |acc, &(a, s)| {
                    if s.mean < acc.1.mean { (a, s) } else { acc }
                },
            );
            AlphaCapRow {
                nodes: label.to_owned(),
                cap,
                by_alpha,
                best_alpha,
                best,
            }
        })
        .collect()
}

/// Experiment 2: one α of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct AlphaRow {
    /// α (β = 1 − α).
    pub alpha: f64,
    /// Makespan over the seeds.
    pub makespan: Stats,
    /// Mean share of the packets per node, fastest node first.
    pub packet_share: Vec<f64>,
    /// Mean share of the busy time per node, fastest node first.
    pub busy_share: Vec<f64>,
}

impl AlphaRow {
    /// The row of `rows` with the least mean makespan (the first of equals).
    pub fn least(rows: &[AlphaRow]) -> Option<&AlphaRow> {
        rows.iter()
            .min_by(|a, b| a.makespan.mean.total_cmp(&b.makespan.mean))
    }
}

/// Experiment 2: α swept over [0, 1] with β = 1 − α, on `nodes` with `packets` packets.
pub fn exp2(
    settings: &Settings,
    nodes: &NodeSet,
    packets: usize,
    runner: &impl PointRunner,
) -> Vec<AlphaRow> {
    let alphas = alpha_grid();
    let seeds: Vec<u32> = (0..settings.seeds).collect();
    let per_seed = runner.run(&seeds, |&s| {
        let (nodes, trace) = instance(
            settings,
            nodes,
            settings.cap,
            packets,
            settings.base_seed + u64::from(s),
        );
        let rank = speed_rank(&nodes);
        alphas
            .iter()
            .map(|&a| {
                let r = run(settings, nodes.clone(), &trace, &paper_alpha(a));
                let (packet_share, busy_share) = ranked_shares(&r, &rank);
                (r.makespan, packet_share, busy_share)
            })
            .collect::<Vec<_>>()
    });
    alphas
        .iter()
        .enumerate()
        .map(|(ai, &alpha)| {
            let runs: Vec<&(f64, Vec<f64>, Vec<f64>)> = per_seed.iter().map(|s| &s[ai]).collect();
            AlphaRow {
                alpha,
                makespan: Stats::of(&runs.iter().map(|r| r.0).collect::<Vec<_>>()),
                packet_share: mean_vec(runs.iter().map(|r| &r.1)),
                busy_share: mean_vec(runs.iter().map(|r| &r.2)),
            }
        })
        .collect()
}

fn mean_vec<'a>(vs: impl Iterator<Item = &'a Vec<f64>>) -> Vec<f64> {
    let mut sum: Vec<f64> = Vec::new();
    let mut n = 0.0f64;
    for v in vs {
        if sum.is_empty() {
            sum = vec![0.0; v.len()];
        }
        for (s, x) in sum.iter_mut().zip(v) {
            *s += x;
        }
        n += 1.0;
    }
    sum.iter().map(|s| s / n.max(1.0)).collect()
}

/// Experiment 3: the load of each node at one point.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadRow {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Packets in the trace.
    pub packets: usize,
    /// Mean share of the packets per node, fastest first.
    pub packet_share: Vec<f64>,
    /// Mean share of the busy time per node, fastest first.
    pub busy_share: Vec<f64>,
    /// Coefficient of variation of the nodes' busy times (0 = perfectly even), over the seeds.
    pub busy_cv: Stats,
    /// Makespan over the seeds.
    pub makespan: Stats,
}

/// Experiment 3: per-node load under `policy` for each (nodes, packets) point.
pub fn exp3(
    settings: &Settings,
    points: &[(usize, usize)],
    policy: &PolicySpec,
    runner: &impl PointRunner,
) -> Vec<LoadRow> {
    let runs: Vec<(usize, usize, u32)> = points
        .iter()
        .flat_map(|&(n, p)| (0..settings.seeds).map(move |s| (n, p, s)))
        .collect();
    let results = runner.run(&runs, |&(n, p, s)| {
        let (nodes, trace) = instance(
            settings,
            &NodeSet::paper(n),
            settings.cap,
            p,
            settings.base_seed + u64::from(s),
        );
        let rank = speed_rank(&nodes);
        let r = run(settings, nodes, &trace, policy);
        let (packet_share, busy_share) = ranked_shares(&r, &rank);
        let busy = Stats::of(&r.node_busy);
        let cv = if busy.mean > 0.0 {
            busy.std / busy.mean
        } else {
            0.0
        };
        (packet_share, busy_share, cv, r.makespan)
    });
    points
        .iter()
        .enumerate()
        .map(|(pi, &(nodes, packets))| {
            let k = settings.seeds as usize;
            let chunk = &results[pi * k..(pi + 1) * k];
            LoadRow {
                nodes,
                packets,
                packet_share: mean_vec(chunk.iter().map(|r| &r.0)),
                busy_share: mean_vec(chunk.iter().map(|r| &r.1)),
                busy_cv: Stats::of(&chunk.iter().map(|r| r.2).collect::<Vec<_>>()),
                makespan: Stats::of(&chunk.iter().map(|r| r.3).collect::<Vec<_>>()),
            }
        })
        .collect()
}

/// Experiment 4: one point of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    /// Which sweep the point belongs to (`4 nodes`, `10 nodes`, `1000 packets`).
    pub sweep: String,
    /// Nodes.
    pub nodes: usize,
    /// Packets.
    pub packets: usize,
    /// The policy's [`label`].
    pub policy: String,
    /// Makespan over the seeds.
    pub makespan: Stats,
    /// The mean lower bound over the seeds (the same instances for every policy).
    pub lower_bound: f64,
}

impl CompareRow {
    /// The mean makespan over the mean lower bound.
    pub fn ratio(&self) -> f64 {
        self.makespan.mean / self.lower_bound
    }

    /// The mean [`ratio`](Self::ratio) of `policy`'s rows among `rows` (its mean over a
    /// setting's points).
    pub fn mean_ratio(rows: &[CompareRow], policy: &str) -> f64 {
        let mine = rows.iter().filter(|r| r.policy == policy);
        Stats::of(&mine.map(CompareRow::ratio).collect::<Vec<_>>()).mean
    }
}

/// The points of experiment 3: 4 nodes with 100…700 packets, 10 nodes with 500…1500.
pub fn exp3_points() -> Vec<(usize, usize)> {
    let mut points: Vec<(usize, usize)> = (100..=700).step_by(100).map(|p| (4, p)).collect();
    points.extend([500, 700, 1000, 1100, 1300, 1500].map(|p| (10, p)));
    points
}

/// The points of experiment 4: 4 nodes with 100…700 packets, 10 nodes with 500…1500, and
/// 1000 packets on 4…10 nodes.
pub fn exp4_points() -> Vec<(String, usize, usize)> {
    let mut points = Vec::new();
    for p in (100..=700).step_by(100) {
        points.push(("4 nodes".to_owned(), 4, p));
    }
    for p in [500, 700, 1000, 1100, 1300, 1500] {
        points.push(("10 nodes".to_owned(), 10, p));
    }
    for n in 4..=10 {
        points.push(("1000 packets".to_owned(), n, 1000));
    }
    points
}

/// The points of the benchmark's default summary, an excerpt of experiment 4: 4 nodes with 300
/// and 700 packets, 10 nodes with 1000 and 1500.
pub fn summary_points() -> Vec<(String, usize, usize)> {
    let points = [(4, 300), (4, 700), (10, 1000), (10, 1500)];
    points.map(|(n, p)| (format!("{n} nodes"), n, p)).to_vec()
}

/// Experiment 4 (and any policy comparison): every policy on the same instances at each point.
pub fn compare(
    settings: &Settings,
    points: &[(String, usize, usize)],
    policies: &[PolicySpec],
    runner: &impl PointRunner,
) -> Vec<CompareRow> {
    let points: Vec<(String, NodeSet, usize)> = points
        .iter()
        .map(|(sweep, nodes, packets)| (sweep.clone(), NodeSet::paper(*nodes), *packets))
        .collect();
    compare_sets(settings, &points, policies, runner)
}

/// Experiment 1 with `paper-adaptive` beside the α grid: one capacity of one node set.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveRow {
    /// The node set's label.
    pub nodes: String,
    /// Node capacity.
    pub cap: u64,
    /// The best fixed α of [`alpha_grid`] on these instances (the smallest, if tied).
    pub best_alpha: f64,
    /// Its makespan over the seeds.
    pub best: Stats,
    /// `paper-adaptive`'s makespan over the same instances.
    pub adaptive: Stats,
    /// Per seed, `paper-adaptive`'s makespan minus the best fixed α's: its mean, and the sample
    /// standard deviation of the paired differences (the noise of the comparison).
    pub diff: Stats,
    /// The mean over the seeds of each instance's own best α's makespan: what no fixed α,
    /// chosen before seeing the instance, can beat.
    pub per_seed_best: f64,
    /// The mean α `paper-adaptive` used, over its placements and the seeds.
    pub mean_alpha: f64,
}

impl AdaptiveRow {
    /// `paper-adaptive`'s mean makespan over the best fixed α's (below 1: adaptive wins).
    pub fn ratio(&self) -> f64 {
        self.adaptive.mean / self.best.mean
    }

    /// Over `rows`: in how many `paper-adaptive` is within 1% of the best fixed α (or better),
    /// and the geometric mean of its [`ratio`](Self::ratio).
    pub fn summary(rows: &[AdaptiveRow]) -> (usize, f64) {
        let ratios = rows.iter().map(AdaptiveRow::ratio);
        let within = ratios.clone().filter(|&x| x <= 1.01).count();
        (within, geo_mean(ratios))
    }
}

/// `paper-adaptive` wrapped to add up the α of its choices (sum, count) in `out`.
#[derive(Debug)]
struct AlphaRecorder {
    inner: PaperAdaptive,
    out: Arc<Mutex<(f64, u64)>>,
}

impl Policy for AlphaRecorder {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let choice = self.inner.select(view, packet);
        if let Some(a) = self.inner.last_alpha() {
            let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
            out.0 += a;
            out.1 += 1;
        }
        choice
    }
}

/// Experiment 1 with `paper-adaptive`: for each capacity, every α of [`alpha_grid`] and
/// `paper-adaptive` on the same instances (seed k of a capacity is `base_seed + k`, as in
/// [`exp1`], so the α columns equal [`exp1`]'s), with the best fixed α beside the adaptive
/// rule's makespan.
pub fn adaptive_vs_alpha(
    settings: &Settings,
    label: &str,
    nodes: &NodeSet,
    caps: &[u64],
    packets: usize,
    runner: &impl PointRunner,
) -> Vec<AdaptiveRow> {
    let alphas = alpha_grid();
    // Per (cap, seed): makespan for every α, then paper-adaptive's, and its α sum and count.
    let results: Vec<(Vec<f64>, f64, f64, u64)> =
        alpha_grid_runs(settings, nodes, caps, packets, runner, |nodes, trace| {
            let record = Arc::new(Mutex::new((0.0, 0u64)));
            let config = SimConfig {
                cluster_queue_len: settings.cluster_queue_len,
                ..SimConfig::new(nodes.to_vec())
            };
            let policy = Box::new(AlphaRecorder {
                inner: PaperAdaptive::new(),
                out: record.clone(),
            });
            let adaptive = simulate_with(trace, &config, policy)
                .unwrap_or_else(|e| panic!("invalid experiment settings: {e}"))
                .makespan;
            let (sum, count) = *record.lock().unwrap_or_else(|e| e.into_inner());
            (adaptive, sum, count)
        })
        .into_iter()
        .map(|(fixed, (adaptive, sum, count))| (fixed, adaptive, sum, count))
        .collect();
    let k = settings.seeds as usize;
    caps.iter()
        .enumerate()
        .map(|(ci, &cap)| {
            let per_seed = &results[ci * k..(ci + 1) * k];
            let means: Vec<f64> = (0..alphas.len())
                .map(|ai| Stats::of(&per_seed.iter().map(|r| r.0[ai]).collect::<Vec<_>>()).mean)
                .collect();
            let best_i = (0..alphas.len()).fold(0, |b, i| if means[i] < means[b] { i } else { b });
            let best_runs: Vec<f64> = per_seed.iter().map(|r| r.0[best_i]).collect();
            let adaptive: Vec<f64> = per_seed.iter().map(|r| r.1).collect();
            let diff: Vec<f64> = adaptive
                .iter()
                .zip(&best_runs)
                .map(|(a, b)| a - b)
                .collect();
            let per_seed_best = per_seed
                .iter()
                .map(|r| r.0.iter().copied().fold(f64::INFINITY, f64::min))
                .sum::<f64>()
                / k.max(1) as f64;
            let (sum, count) = per_seed
                .iter()
                .fold((0.0, 0u64), |(s, c), r| (s + r.2, c + r.3));
            AdaptiveRow {
                nodes: label.to_owned(),
                cap,
                best_alpha: alphas[best_i],
                best: Stats::of(&best_runs),
                adaptive: Stats::of(&adaptive),
                diff: Stats::of(&diff),
                per_seed_best,
                mean_alpha: if count > 0 { sum / count as f64 } else { 0.0 },
            }
        })
        .collect()
}

/// Like [`compare`], on any node sets: every policy on the same instances at each point
/// `(label, node set, packets)`, with the mean lower bound. [`CompareRow::sweep`] holds the
/// label and [`CompareRow::nodes`] the node count.
pub fn compare_sets(
    settings: &Settings,
    points: &[(String, NodeSet, usize)],
    policies: &[PolicySpec],
    runner: &impl PointRunner,
) -> Vec<CompareRow> {
    let runs: Vec<(usize, u32)> = (0..points.len())
        .flat_map(|p| (0..settings.seeds).map(move |s| (p, s)))
        .collect();
    let results = runner.run(&runs, |&(p, s)| {
        let (_, set, packets) = &points[p];
        let (nodes, trace) = instance(
            settings,
            set,
            settings.cap,
            *packets,
            settings.base_seed + u64::from(s),
        );
        let bound = lower_bound(&trace, &nodes, 1).value();
        let makespans: Vec<f64> = policies
            .iter()
            .map(|pol| run(settings, nodes.clone(), &trace, pol).makespan)
            .collect();
        (bound, makespans)
    });
    let k = settings.seeds as usize;
    let mut rows = Vec::new();
    for (pi, (sweep, set, packets)) in points.iter().enumerate() {
        let chunk = &results[pi * k..(pi + 1) * k];
        let bound = Stats::of(&chunk.iter().map(|r| r.0).collect::<Vec<_>>()).mean;
        for (qi, pol) in policies.iter().enumerate() {
            rows.push(CompareRow {
                sweep: sweep.clone(),
                nodes: set.len(),
                packets: *packets,
                policy: label(pol),
                makespan: Stats::of(&chunk.iter().map(|r| r.1[qi]).collect::<Vec<_>>()),
                lower_bound: bound,
            });
        }
    }
    rows
}

/// Packets per run in experiment 1 by default, and in [`PolicySettings::adaptive`].
pub const EXP1_PACKETS: usize = 600;
/// Mean packets per burst in [`PolicySettings::bursty`].
pub const BURST_PACKETS: f64 = 64.0;
/// Share of the time the bursty source is on.
pub const BURST_DUTY: f64 = 0.25;
/// Mean offered load of the bursty setting.
pub const BURST_LOAD: f64 = 0.8;
/// The heterogeneous cluster's unit times (1 : 1.5 : 2 : 3), [`PolicySettings::hetero`].
pub const HETERO: [f64; 4] = super::classes::SPREAD;

/// Every policy in the settings `cryptodispatch-bench policies` compares them in, each point on
/// the same instances for every policy.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySettings {
    /// `paper-adaptive` against the best fixed α, in experiment 1's settings ([`EXP1_PACKETS`]
    /// packets, [`CAPS`], [`exp1_sets`]); empty unless asked for.
    pub adaptive: Vec<AdaptiveRow>,
    /// The paper's settings at experiment 4's points 4 nodes × 300 and 700 packets and
    /// 10 nodes × 1000 packets.
    pub paper: Vec<CompareRow>,
    /// The same points, the jobs arriving in bursts of about [`BURST_PACKETS`] packets at
    /// [`BURST_LOAD`]` / `[`BURST_DUTY`] times the cluster's capacity, silent for the rest of
    /// each cycle: mean load [`BURST_LOAD`], so the cluster drains between bursts.
    pub bursty: Vec<CompareRow>,
    /// Four nodes of unit times [`HETERO`], 300 and 700 packets.
    pub hetero: Vec<CompareRow>,
}

impl PolicySettings {
    /// The points of the paper's and the bursty settings.
    fn paper_points() -> Vec<(String, usize, usize)> {
        [(4, 300), (4, 700), (10, 1000)]
            .iter()
            .map(|&(n, p)| (format!("{n} nodes"), n, p))
            .collect()
    }

    /// How many runs [`run`](Self::run) makes (each a point and a seed), for a progress count.
    pub fn runs(settings: &Settings, adaptive: bool) -> u64 {
        let adaptive = if adaptive { 2 * CAPS.len() } else { 0 };
        u64::from(settings.seeds) * (adaptive + 2 * Self::paper_points().len() + 2) as u64
    }

    /// Every policy of `specs` in each setting, and `paper-adaptive` against the best fixed α
    /// when `adaptive`.
    pub fn run(
        settings: &Settings,
        specs: &[PolicySpec],
        adaptive: bool,
        runner: &impl PointRunner,
    ) -> Self {
        let adaptive = if adaptive {
            let mut s = settings.clone();
            s.workload.packets = EXP1_PACKETS;
            exp1_sets()
                .iter()
                .flat_map(|(l, set)| adaptive_vs_alpha(&s, l, set, &CAPS, EXP1_PACKETS, runner))
                .collect()
        } else {
            Vec::new()
        };
        let points = Self::paper_points();
        let paper = compare(settings, &points, specs, runner);
        let mut bursty = settings.clone();
        bursty.workload.load = Some(BURST_LOAD);
        bursty.workload.burst = Some(Burst {
            packets: BURST_PACKETS,
            duty: BURST_DUTY,
        });
        let bursty = compare(&bursty, &points, specs, runner);
        let hetero: Vec<(String, NodeSet, usize)> = [300, 700]
            .iter()
            .map(|&p| ("1:1.5:2:3".to_owned(), NodeSet::Given(HETERO.to_vec()), p))
            .collect();
        let hetero = compare_sets(settings, &hetero, specs, runner);
        PolicySettings {
            adaptive,
            paper,
            bursty,
            hetero,
        }
    }
}

/// The geometric mean of `xs` (1 for none).
pub fn geo_mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    (sum / n.max(1) as f64).exp()
}
