//! `cryptodispatch-bench`: the benchmark binary.
//!
//! With no subcommand it prints a short summary (an excerpt of experiment 4 on the simulator).
//! Subcommands:
//! - `paper --exp N`: the paper's experiments 1–4 on the simulator (tables, CSV, SVG);
//! - `sim`: replay a trace (or a generated workload) under one or more policies, with the
//!   lower bound on makespan;
//! - `gen`: write a generated trace in the CSV format `sim --trace` reads;
//! - `policies`: every policy on the same work (the paper's settings, bursty arrivals, a
//!   heterogeneous cluster, live), and `paper-adaptive` against the best fixed α;
//! - `live --workload W`: real jobs through the service against the primitives called
//!   directly (and, for the speed workloads, `openssl speed`), one runner per workload;
//! - `soak`: the default service under sustained overload, second by second.
//!
//! The scale-out experiment (daemons behind HAProxy) is `cryptodispatch-scaleout`, in the
//! workspace's `cli/` crate with the daemon it starts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use cryptodispatch::sim::research::experiments::{self, Settings};

mod hetero;
mod hol;
mod independent;
mod live;
mod matrix;
mod milp;
mod mixed;
mod openssl;
mod padded;
mod paper;
mod plot;
mod policies;
mod replay;
mod report;
mod sample;
mod soak;
mod stream;
mod support;
mod tenant_mix;
mod tenants;
mod tiny;
mod verify;

#[derive(Debug, Parser)]
#[command(
    name = "cryptodispatch-bench",
    version,
    about = "Benchmarks for cryptodispatch: the paper's experiments on the simulator, trace replay",
    after_help = "Examples:\n  \
        cryptodispatch-bench                      short summary (experiment 4 excerpt)\n  \
        cryptodispatch-bench paper --exp 4        the paper's experiment 4: paper vs hhs-acdid\n  \
        cryptodispatch-bench paper --exp 1 --seeds 20 --out results\n  \
        cryptodispatch-bench gen --packets 1000 --out trace.csv\n  \
        cryptodispatch-bench sim --trace trace.csv --policy paper,hhs-acdid --unit-times 16,20,28,36\n  \
        cryptodispatch-bench sim --packets 600 --nodes 10 --csv\n  \
        cryptodispatch-bench policies --no-live --policies paper,hhs-acdid,paper-adaptive\n\n\
        The scale-out experiment (daemons behind HAProxy) is cryptodispatch-scaleout, in the\n\
        workspace's cli crate: cargo run --release -p cryptodispatch-cli --bin cryptodispatch-scaleout"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The paper's experiments (docs/ALGORITHM.md §9) on the simulator.
    Paper(paper::PaperArgs),
    /// Replay a trace, or a generated workload, under one or more policies.
    Sim(replay::SimArgs),
    /// Write a generated trace (CSV) for `sim --trace`.
    Gen(replay::GenArgs),
    /// Real jobs through the service on this machine, against the primitives called directly.
    Live(live::LiveArgs),
    /// Every policy on the same work: the paper's settings, bursty arrivals, a heterogeneous
    /// cluster (simulator) and the live hetero workload; paper-adaptive against the best
    /// fixed alpha.
    Policies(policies::PoliciesArgs),
    /// The default service under sustained overload: offered, completed, failed and lost jobs,
    /// peak RSS and p99 latency, second by second.
    Soak(soak::SoakArgs),
}

fn summary() -> Result<(), String> {
    let start = Instant::now();
    println!("cryptodispatch-bench: summary (run with --help for the full experiments)\n");
    let settings = Settings {
        seeds: 5,
        ..Settings::default()
    };
    let points = experiments::summary_points();
    let out = PathBuf::from("results");
    report::out_dir(&out)?;
    paper::exp4(&settings, None, &out, &points)?;

    println!("\nLive, on this machine: the same job streams through the service under `paper` and");
    println!(
        "`hhs-acdid`, beside the primitives called directly on as many threads (the reference).\n"
    );
    // Both with --compare: under `paper` and `hhs-acdid`.
    for workload in [live::Workload::Cbc16k, live::Workload::Hetero] {
        runner(workload).run(&live::LiveArgs::quick(workload))?;
        println!();
    }
    println!("summary took {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

/// The runner of each `live` workload: its jobs against the primitives called directly
/// (`live.rs`'s measurement, the jobs made by its own file), or a runner of its own. Chosen
/// here, above the workloads' files, which all build on `live.rs`.
fn runner(workload: live::Workload) -> live::Runner {
    use live::Runner::{Compare, Own};
    use live::Workload as W;
    match workload {
        W::Cbc16k => Compare(independent::cbc16k),
        W::Manycbc => Compare(|args| independent::of_mode(args, true)),
        W::Gcm => Compare(independent::gcm),
        W::Parallel => Compare(|args| independent::of_mode(args, false)),
        W::Mixed => Compare(mixed::work),
        W::Hetero => Compare(hetero::hetero),
        W::HeteroChains => Compare(hetero::chains),
        W::ManyChains => Compare(hetero::many_chains),
        W::Verify => Own(verify::run),
        W::Hol => Own(hol::run),
        W::Tiny => Own(tiny::run),
        W::Padded => Own(padded::run),
        W::Stream => Own(stream::run),
        W::Tenants => Own(tenants::run),
        W::TenantMix => Own(tenant_mix::run),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        None => summary(),
        Some(Command::Paper(a)) => paper::run(a),
        Some(Command::Sim(a)) => replay::sim(a),
        Some(Command::Gen(a)) => replay::generate(a),
        Some(Command::Live(a)) => runner(a.workload).run(a),
        Some(Command::Policies(a)) if a.matrix => matrix::run(a),
        Some(Command::Policies(a)) if a.sample.is_some() => sample::run(a),
        Some(Command::Policies(a)) => policies::run(a),
        Some(Command::Soak(a)) => soak::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cryptodispatch-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
