//! `sim`: replay a trace (or a generated workload) under one or more policies; `gen`: write a
//! generated trace.

use std::path::{Path, PathBuf};

use clap::Args;
use cryptodispatch::sched::Affinity;
use cryptodispatch::sim::research::experiments::{self, Settings};
use cryptodispatch::sim::{
    NodeModel, NodeSet, SimConfig, Trace, WorkloadSpec, lower_bound, simulate,
};
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

use crate::report::{Csv, Table, f, pcts};
use crate::support::{Text, count_up_to, parse_policies};

/// Which nodes to simulate.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// Number of nodes (1 to 4096), with unit times drawn from --unit-range (seeded by
    /// --seed).
    #[arg(long, default_value_t = 4, conflicts_with = "unit_times", value_parser = node_count)]
    pub nodes: usize,
    /// Range the unit times are drawn from, as LO,HI.
    #[arg(long, value_name = "LO,HI", default_value = "16,36", value_parser = parse_range)]
    pub unit_range: (f64, f64),
    /// One unit time per node (the same for every command), e.g. 16,20,28,36.
    #[arg(long, value_name = "T1,T2,...", value_delimiter = ',')]
    pub unit_times: Option<Vec<f64>>,
    /// Node queue capacity, in length units (gen: the trace's packets must fit it).
    #[arg(long, default_value_t = 32)]
    pub cap: u64,
    /// Seed for drawn unit times and generated workloads.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The most nodes `sim` and `gen` simulate, as many as the command-line tool's `--nodes`
/// allows: a node count sizes what is allocated before anything runs, and the simulator's
/// time grows with nodes × packets (4096 nodes take seconds for 600 packets).
pub const MAX_NODES: usize = 4096;

/// The most packets a generated workload has (`sim`, `gen`, `paper --exp 1`): a trace and the
/// simulator's state take about 150 bytes a packet, so at most about 1.5 GB, where a larger
/// count would abort on allocation (or run for hours) rather than fail with a message.
pub const MAX_PACKETS: usize = 10_000_000;

/// The unit times (`--unit-times`, `--unit-range`) and loads (`--load`) the simulator is
/// given: six orders of magnitude either side of the paper's (unit times 16 to 36, load 1.5).
/// Within them every quantity the simulator and its lower bound compute stays finite and
/// normal: a rate 1/t or an arrival gap 1/(load × rate) is at most about 1e13, and a makespan
/// of [`MAX_PACKETS`] packets of such gaps and unit times lies far below f64's 1.8e308. A
/// value far outside (1e-320, 1e308) made the arrivals, the bound or the makespan infinite, and
/// the ratios NaN.
pub const SIM_RANGE: (f64, f64) = (1e-6, 1e6);

/// `value` of option `flag` if it lies in [`SIM_RANGE`].
fn in_sim_range(flag: &str, value: f64) -> Result<f64, String> {
    let (lo, hi) = SIM_RANGE;
    if !(lo..=hi).contains(&value) {
        let value = shown(value);
        return Err(format!("{flag} {value}: must lie in [{lo:e}, {hi:e}]"));
    }
    Ok(value)
}

/// `--load` (of `gen` and `paper`) as a workload takes it: `None` for 0 (every packet at time
/// 0), else the load, which must lie in [`SIM_RANGE`].
///
/// # Errors
/// A negative, non-finite or out-of-range load, named.
pub fn load(value: f64) -> Result<Option<f64>, String> {
    if value == 0.0 {
        return Ok(None);
    }
    let (lo, hi) = SIM_RANGE;
    if !(lo..=hi).contains(&value) {
        let value = shown(value);
        return Err(format!(
            "--load {value}: must be 0 (every packet at time 0) or lie in [{lo:e}, {hi:e}]"
        ));
    }
    Ok(Some(value))
}

/// `x` as an error message shows it: in exponent form when tiny or huge, which `{}` would
/// write out in hundreds of digits.
fn shown(x: f64) -> String {
    if x.is_finite() && x != 0.0 && !(1e-4..1e7).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

/// `--nodes`: 1 to [`MAX_NODES`].
pub fn node_count(s: &str) -> Result<usize, String> {
    count_up_to(s, MAX_NODES, "nodes")
}

/// `--packets`: 1 to [`MAX_PACKETS`].
pub fn packet_count(s: &str) -> Result<usize, String> {
    count_up_to(s, MAX_PACKETS, "packets")
}

impl NodeArgs {
    pub fn node_set(&self) -> Result<NodeSet, String> {
        match &self.unit_times {
            Some(t) if t.is_empty() => Err("--unit-times needs at least one value".into()),
            Some(t) if t.len() > MAX_NODES => Err(format!(
                "--unit-times: {} values, one per node, and at most {MAX_NODES} nodes",
                t.len()
            )),
            Some(t) => {
                for &time in t {
                    in_sim_range("--unit-times", time)?;
                }
                Ok(NodeSet::Given(t.clone()))
            }
            None if !(1..=MAX_NODES).contains(&self.nodes) => Err(format!(
                "--nodes {}: must be from 1 to {MAX_NODES}",
                self.nodes
            )),
            None => Ok(NodeSet::Drawn {
                nodes: self.nodes,
                lo: self.unit_range.0,
                hi: self.unit_range.1,
            }),
        }
    }
}

/// Options of `sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The trace to replay (CSV: task,seq,flag,arrival,length,cmd). Without it, a workload is
    /// generated (see --packets).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Packets of the generated workload, when no --trace is given (1 to 10000000).
    #[arg(long, default_value_t = 600, value_parser = packet_count)]
    pub packets: usize,
    /// Policies to run, comma-separated (each on the same trace and nodes).
    #[arg(long, default_value = "paper", long_help = crate::support::policy_help(
        "Policies to run, comma-separated (each on the same trace and nodes)."))]
    pub policy: String,
    #[command(flatten)]
    pub nodes: NodeArgs,
    /// Cluster queue length, in packets.
    #[arg(long, default_value_t = 32)]
    pub queue_len: usize,
    /// Affinity of dependent jobs: strict (the paper) or in-flight.
    #[arg(long, default_value = "strict")]
    pub affinity: Affinity,
    /// Print one CSV header line and one row per policy instead of a table.
    #[arg(long)]
    pub csv: bool,
}

/// Options of `gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Packets to generate (1 to 10000000).
    #[arg(long, default_value_t = 600, value_parser = packet_count)]
    pub packets: usize,
    #[command(flatten)]
    pub nodes: NodeArgs,
    /// Offered load relative to the nodes' full-speed capacity (0: everything at time 0; else
    /// from 1e-6 to 1e6).
    #[arg(long, default_value_t = 1.5)]
    pub load: f64,
    /// Share of dependent jobs.
    #[arg(long, default_value_t = 0.5)]
    pub dependent_share: f64,
    /// Write the trace here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn parse_range(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("expected LO,HI, got {s:?}"))?;
    let lo: f64 = a.trim().parse().map_err(|_| format!("bad number {a:?}"))?;
    let hi: f64 = b.trim().parse().map_err(|_| format!("bad number {b:?}"))?;
    let (min, max) = SIM_RANGE;
    if !(min <= lo && lo <= hi && hi <= max) {
        return Err(format!(
            "need {min:e} <= LO <= HI <= {max:e}, got {},{}",
            a.trim(),
            b.trim()
        ));
    }
    Ok((lo, hi))
}

fn build(nodes: &NodeArgs, rng: &mut ChaCha8Rng) -> Result<Vec<NodeModel>, String> {
    Ok(nodes.node_set()?.build(nodes.cap, rng))
}

/// The trace in `path`. A file that cannot be read, or is not text, is an error about the
/// file, naming it and, for bytes that are not UTF-8, where the first one is; a malformed line,
/// about that line.
fn read_trace(path: &Path) -> Result<Trace, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the trace {shown}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        format!("the trace {shown} is not UTF-8 text (an invalid byte at offset {at})")
    })?;
    Trace::parse(&text).map_err(|e| format!("{shown}: {e}"))
}

pub fn sim(args: &SimArgs) -> Result<(), String> {
    let policies = parse_policies("--policy", Some(&args.policy))?;
    let mut rng = ChaCha8Rng::seed_from_u64(args.nodes.seed);
    let nodes = build(&args.nodes, &mut rng)?;
    let (trace, source) = match &args.trace {
        Some(path) => {
            let trace = read_trace(path)?;
            // No packets, no makespan to compare with the bound (0 / 0).
            if trace.is_empty() {
                return Err(format!("{}: the trace has no packets", path.display()));
            }
            (trace, path.display().to_string())
        }
        None => (
            WorkloadSpec::default()
                .with_packets(args.packets)
                .generate(&nodes, 1, &mut rng),
            format!("generated, seed {}", args.nodes.seed),
        ),
    };
    let config = SimConfig {
        cluster_queue_len: args.queue_len,
        affinity: args.affinity,
        ..SimConfig::new(nodes.clone())
    };
    let bound = lower_bound(&trace, &nodes, config.unit_len);

    let mut csv = Csv::new(
        "policy,nodes,packets,makespan,lower_bound,mean_latency,p99_latency,max_node_share,min_node_share",
    );
    let mut table = Table::with_columns(
        "policy,makespan,lower bound,ratio,mean latency,p99 latency,node shares of busy time",
    );
    for policy in &policies {
        let r = simulate(&trace, &config, policy).text()?;
        let shares = r.shares();
        let max = shares.iter().copied().fold(0.0, f64::max);
        let min = shares.iter().copied().fold(f64::INFINITY, f64::min);
        csv.row(&[
            policy.name().to_owned(),
            nodes.len().to_string(),
            trace.len().to_string(),
            f(r.makespan, 3),
            f(bound.value(), 3),
            f(r.mean_latency(), 3),
            f(r.p99_latency(), 3),
            f(max, 4),
            f(min, 4),
        ]);
        table.row(vec![
            policy.to_string(),
            f(r.makespan, 1),
            f(bound.value(), 1),
            f(r.makespan / bound.value(), 3),
            f(r.mean_latency(), 1),
            f(r.p99_latency(), 1),
            pcts(&shares),
        ]);
    }
    if args.csv {
        print!("{}", csv.as_str());
    } else {
        let jobs: std::collections::HashSet<u64> = trace.records().iter().map(|r| r.task).collect();
        println!(
            "trace: {source}: {} packets, {} jobs",
            trace.len(),
            jobs.len()
        );
        let times: Vec<String> = (nodes.iter())
            .map(|n| format!("[{}]", n.unit_times.0.map(|t| f(t, 1)).join(" ")))
            .collect();
        println!(
            "nodes: {} (unit times enc dec sign verify: {}), capacity {}",
            nodes.len(),
            times.join(" "),
            args.nodes.cap
        );
        println!(
            "lower bound {:.1} = max(work {:.1}, arrivals {:.1}, chains {:.1})\n",
            bound.value(),
            bound.work,
            bound.arrivals,
            bound.chains
        );
        print!("{}", table.render());
    }
    Ok(())
}

pub fn generate(args: &GenArgs) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(args.nodes.seed);
    let nodes = build(&args.nodes, &mut rng)?;
    if !(0.0..=1.0).contains(&args.dependent_share) {
        return Err(format!(
            "--dependent-share {} must lie in [0, 1]",
            args.dependent_share
        ));
    }
    let spec = WorkloadSpec {
        packets: args.packets,
        dependent_share: args.dependent_share,
        load: load(args.load)?,
        ..WorkloadSpec::default()
    };
    // The trace is for nodes of capacity --cap: as `paper` and `sim` do, refuse one that
    // cannot hold the longest packet written, which `sim --trace` would refuse on them.
    let settings = Settings {
        cap: args.nodes.cap,
        workload: spec.clone(),
        ..Settings::default()
    };
    experiments::check(&settings, &[]).map_err(|e| format!("--cap: {e}"))?;
    let csv = spec.generate(&nodes, 1, &mut rng).to_csv();
    match &args.out {
        Some(path) => {
            std::fs::write(path, csv).map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
        None => {
            print!("{csv}");
            Ok(())
        }
    }
}
