//! `policies --sample N`: every policy on N configurations drawn from the library's second
//! workload space ([`cryptodispatch::sim::space`]), each policy's makespan divided by the best
//! policy's on the same configuration; and small instances against the exact optimum.
//!
//! # Samples
//! The space's `TUNING_SEED` names the sample rules may be shaped on; `HELD_OUT_SEED` the
//! sample drawn after the default's rule was fixed, from which the reported figures come;
//! `EARLIER_HELD_OUT_SEED` the first held-out sample, studied since, and
//! `SECOND_HELD_OUT_SEED` the second, of the rule before its last change. A run says which one it
//! is (`sim::research::matrix::sample_name`). The small instances are the matrix's generator
//! (`sim::research::classes::small`) on seeds `S × 100000 + k`, apart from the matrix's seeds.
//! The library's `sim::research::matrix` computes every figure.
//!
//! # Files (in `--out`)
//! - `sample.csv` ([`CSV_HEADER`]): one row per configuration and policy;
//! - `sample_optimum.csv` ([`OPTIMUM_HEADER`]): one row per small instance and policy;
//! - `sample.svg`: per policy, the share of configurations within each ratio of the best.

use cryptodispatch::sim::research::matrix::{self, Outcome};
use cryptodispatch::sim::space;

use crate::matrix::{optimum_csv, print_small};
use crate::plot::{Chart, Series};
use crate::policies::PoliciesArgs;
use crate::report::{Csv, Table, f, write_file, wrote};
use crate::support::Pool;

/// The header of `sample.csv`.
pub const CSV_HEADER: &str = "sample_seed,index,seed,nodes,speeds,capacity,load,chains,chain_min,chain_max,starts,short_jobs,lengths,bursts,affinity,known,packets,policy,makespan,bound,ratio_best";
/// The header of `sample_optimum.csv`.
pub const OPTIMUM_HEADER: &str = "seed,nodes,packets,lengths,policy,makespan,optimum,ratio";

/// Runs the sample and the small instances, prints the tables and writes the files.
///
/// # Errors
/// A policy that fails or leaves packets unserved, a file that cannot be written.
pub fn run(args: &PoliciesArgs) -> Result<(), String> {
    let (specs, labels) = &args.specs()?;
    crate::report::out_dir(&args.out)?;
    let configs = space::sample(args.sample.unwrap_or(0), args.seed);
    let pool = Pool::new(
        args.threads,
        (configs.len() + args.small() as usize) as u64,
        "sample",
    );
    let outcomes = matrix::outcomes(&configs, specs, &pool)?;
    // The small instances' seeds start at the sample's seed times this.
    let first = args.seed.saturating_mul(100_000);
    let seeds = crate::support::seeds(first, u64::from(args.small()));
    let optimum = |_, trace: &_, nodes: &_| args.optimum.solve(trace, nodes, 1);
    let small = matrix::small_instances(&seeds, specs, optimum, &pool)?;
    pool.finish();

    println!(
        "Policies on {} configurations drawn from the workload space (seed {}: {}).",
        outcomes.len(),
        args.seed,
        matrix::sample_name(args.seed)
    );
    println!("Makespan / the best policy's on the same configuration (1.000 = best).\n");
    summary(&outcomes, labels, |_| true, "every configuration");
    for affinity in ["strict", "in-flight"] {
        for known in [true, false] {
            let name = format!(
                "{affinity} affinity, lengths {}",
                if known { "known" } else { "unknown" }
            );
            summary(
                &outcomes,
                labels,
                |o| o.config.affinity.as_str() == affinity && o.config.known_lengths == known,
                &name,
            );
        }
    }
    worst_cases(&outcomes, labels);
    print_small(&small, labels, args.optimum, Some(first));
    write_files(&outcomes, &small, labels, args)
}

fn summary(outcomes: &[Outcome], labels: &[String], keep: impl Fn(&Outcome) -> bool, name: &str) {
    let mine: Vec<&Outcome> = outcomes.iter().filter(|o| keep(o)).collect();
    if mine.is_empty() {
        return;
    }
    println!("{name} ({} configurations):\n", mine.len());
    let mut t = Table::with_columns(
        "policy,geo mean /best,worst /best,within 5%,within 10%,best,geo mean /bound",
    );
    for (p, s) in matrix::standings(&mine, labels.len()) {
        let counts = [s.within_5, s.within_10, s.best].map(|n| n.to_string());
        let mut row = vec![labels[p].clone(), f(s.geo_best, 3), f(s.worst, 3)];
        row.extend(counts);
        row.push(f(s.geo_bound, 3));
        t.row(row);
    }
    print!("{}", t.render());
    println!();
}

/// The default policy's (or, without it, the first policy's) five worst configurations, with
/// the policy that was best there.
fn worst_cases(outcomes: &[Outcome], labels: &[String]) {
    let default = cryptodispatch::sched::policy::DEFAULT.name();
    let p = labels.iter().position(|l| l == default).unwrap_or(0);
    let Some(name) = labels.get(p) else { return };
    println!("{name}'s five worst configurations:\n");
    let mut t = Table::new(&["index", "ratio", "best policy", "configuration"]);
    for index in matrix::worst_first(outcomes, p).into_iter().take(5) {
        let o = &outcomes[index];
        t.row(vec![
            index.to_string(),
            f(o.makespan[p] / o.best(), 3),
            labels[o.best_policy()].clone(),
            o.config.describe(),
        ]);
    }
    print!("{}", t.render());
    println!();
}

fn write_files(
    outcomes: &[Outcome],
    small: &[matrix::Small],
    labels: &[String],
    args: &PoliciesArgs,
) -> Result<(), String> {
    let out = args.out.as_path();
    let mut csv = Csv::new(CSV_HEADER);
    for (i, o) in outcomes.iter().enumerate() {
        let c = &o.config;
        for (p, l) in labels.iter().enumerate() {
            csv.row(&[
                args.seed.to_string(),
                i.to_string(),
                c.seed.to_string(),
                c.nodes.to_string(),
                c.speeds.name().to_owned(),
                c.capacity.to_string(),
                f(c.load, 3),
                c.chains.to_string(),
                c.chain_packets.0.to_string(),
                c.chain_packets.1.to_string(),
                if c.together { "together" } else { "spread" }.to_owned(),
                c.short_jobs.to_string(),
                c.lengths.name(),
                c.bursts.to_string(),
                c.affinity.to_string(),
                c.known_lengths.to_string(),
                o.packets.to_string(),
                l.clone(),
                f(o.makespan[p], 3),
                f(o.bound, 3),
                f(o.makespan[p] / o.best(), 4),
            ]);
        }
    }
    write_file(out, "sample.csv", csv.as_str())?;
    let csv = optimum_csv(OPTIMUM_HEADER, small, labels, false);
    write_file(out, "sample_optimum.csv", csv.as_str())?;
    // Per policy, the share of configurations within x of the best, for x from 1 to 1.5.
    let grid: Vec<f64> = (0..=50).map(|k| 1.0 + f64::from(k) * 0.01).collect();
    Chart {
        title: "Share of configurations within x of the best policy",
        x: "makespan / the configuration's best",
        y: "share of configurations",
        series: labels
            .iter()
            .enumerate()
            .map(|(p, l)| {
                Series::of(l, &grid, |&x| {
                    Some((x, matrix::share_within(outcomes, p, x)))
                })
            })
            .collect(),
    }
    .write(out, "sample.svg")?;
    let files = ["sample.csv", "sample_optimum.csv", "sample.svg"];
    println!("\n{}", wrote(out, &files));
    Ok(())
}
