//! `cryptodispatch-scaleout`: `cryptodispatchd` daemons behind HAProxy on this machine, one to
//! four, equal or slowed 1:3, with static or agent-check weights (see `scaleout.rs`), and two
//! shared by tenants of different weights (`--setups tenants`, see `tenants.rs`). It needs
//! `haproxy` on PATH and `cryptodispatchd` built beside it (`cargo build --release --bins`).

// tonic's `Status` is the error of every call; it is returned as it is, not boxed.
#![allow(clippy::result_large_err)]

#[allow(dead_code)]
#[path = "../remote/mod.rs"]
mod remote;
// The benchmark binary's table and CSV helpers (standard library only), shared by path.
#[allow(dead_code)]
#[path = "../../../../src/bin/cryptodispatch-bench/report.rs"]
mod report;

/// A report line: on standard output, or on standard error when `csv_only` (with `--csv`,
/// standard output is the CSV alone).
macro_rules! say {
    ($csv_only:expr, $($t:tt)*) => {
        if $csv_only {
            eprintln!($($t)*)
        } else {
            println!($($t)*)
        }
    };
}

mod scaleout;
mod tenants;

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "cryptodispatch-scaleout",
    version,
    about = "cryptodispatchd daemons behind HAProxy on this machine: one, two and four equal \
             daemons, two slowed 1:3 with static or agent-check weights, and (--setups tenants) \
             two shared by tenants: isolation and weighted shares"
)]
struct Cli {
    #[command(flatten)]
    args: scaleout::ScaleoutArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let tenants: scaleout::TenantsSetup = &|haproxy, daemon, dir, slowdown, args| {
        let outcome = tenants::measure(haproxy, daemon, dir, slowdown, args)?;
        Ok(Box::new(move |out: &Path, csv: bool| {
            tenants::report(&outcome, out, csv)
        }))
    };
    match scaleout::run(&cli.args, tenants) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cryptodispatch-scaleout: {e}");
            ExitCode::FAILURE
        }
    }
}
