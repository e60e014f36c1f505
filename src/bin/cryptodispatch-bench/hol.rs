//! `live --workload hol`: head-of-line blocking. A 64 MiB AES-128-CBC encryption job (chained:
//! its packets run one after another) is submitted, then right after it a 16-byte ECB job. The
//! small job's latency, as a share of the big job's time, says whether it waited behind the big
//! one: under first come first served it does, under fair admission it should not
//! (docs/ALGORITHM.md §15.1). Each admission runs `--reps` times on a fresh service; every run
//! is printed, so a target is judged on the worst run, not the median.

use std::time::Instant;

use cryptodispatch::{Admission, Job, Mode, NodeSpec, Service};

use crate::live::{LiveArgs, whole_blocks};
use crate::report::{Csv, Table, f};
use crate::support::{Text, cores, fits_in_memory};

/// The big job's size unless `--size` says otherwise.
const BIG: usize = 64 << 20;

/// CSV columns of the hol workload.
pub const CSV_HEADER: &str = "workload,admission,nodes,big_bytes,run,big_ms,small_us,small_share";

/// One run: the big job's time in ms and the small job's latency in µs.
fn one(admission: Admission, nodes: usize, big: usize) -> Result<(f64, f64), String> {
    let service = Service::builder()
        .aes_cluster((0..nodes).map(|i| NodeSpec::pinned(i % cores())))
        .admission(admission)
        // The probe is of admission: the small job must queue behind the big one, not run
        // on its submitting thread as a job this small would by default.
        .inline_limit(0)
        .build()
        .text()?;
    let key = service.add_aes_key(&[0x42; 16]).text()?;
    let data = vec![0x5A; big];
    let start = Instant::now();
    let big = service
        .submit(Job::encrypt(key, Mode::Cbc, &[7; 16], data))
        .text()?;
    let small_start = Instant::now();
    let small = service
        .submit(Job::encrypt(key, Mode::Ecb, &[], vec![1; 16]))
        .text()?;
    small.wait().text()?;
    let small_us = small_start.elapsed().as_secs_f64() * 1e6;
    big.wait().text()?;
    let big_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok((big_ms, small_us))
}

/// Runs the workload and prints a table (or CSV).
pub fn run(args: &LiveArgs) -> Result<(), String> {
    let nodes = args.nodes.unwrap_or_else(cores);
    let big = whole_blocks("--size", args.size.unwrap_or(BIG), "hol")?;
    fits_in_memory(1, big)?;
    let admissions = if args.compare {
        vec![Admission::Fifo, Admission::Fair]
    } else {
        vec![args.admission]
    };
    let mut runs = Vec::new();
    for run in 0..args.reps {
        for &admission in &admissions {
            let (big_ms, small_us) = one(admission, nodes, big)?;
            runs.push((admission, run, big_ms, small_us));
        }
    }
    if args.csv {
        let mut c = Csv::new(CSV_HEADER);
        for &(admission, run, big_ms, small_us) in &runs {
            c.row(&[
                "hol".into(),
                admission.to_string(),
                nodes.to_string(),
                big.to_string(),
                run.to_string(),
                f(big_ms, 2),
                f(small_us, 1),
                f(small_us / 1e3 / big_ms, 5),
            ]);
        }
        print!("{}", c.as_str());
        return Ok(());
    }
    println!(
        "hol: a 16-byte ECB job submitted right after a {} MiB CBC job, {nodes} AES nodes",
        big >> 20
    );
    let mut t = Table::with_columns("admission,run,big job ms,small job µs,small / big");
    for &(admission, run, big_ms, small_us) in &runs {
        t.row(vec![
            admission.to_string(),
            run.to_string(),
            f(big_ms, 1),
            f(small_us, 0),
            share(small_us / 1e3 / big_ms),
        ]);
    }
    print!("{}", t.render());
    for &admission in &admissions {
        let mine = runs.iter().filter(|r| r.0 == admission);
        let worst = mine.map(|r| r.3 / 1e3 / r.2).fold(0.0, f64::max);
        println!("{admission}: worst small / big {}", share(worst));
    }
    Ok(())
}

/// A share as a percentage with two decimals (the target is under 2%).
fn share(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}
