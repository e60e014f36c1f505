//! `policies --matrix`: every policy on every kind of work of [`crate::classes`], with the jobs'
//! lengths known to the policies (the service) and not (the paper's online model), and on small
//! instances against the exact optimum ([`crate::optimum`]).
//!
//! A cell is a class with one knowledge of lengths. Every policy of a cell runs on the same
//! instances (seed k is `--seed + k`), and the cell gives each policy's mean makespan divided
//! by the mean lower bound (`sim::bound`) and by the best policy's mean makespan in the cell.
//! The summary gives, per policy, the geometric mean over the cells of makespan / bound, the
//! worst ratio to a cell's best, and the cells it is within 5% of the best in.
//!
//! # Seeds
//! The report runs from seed 1 (`--seed`): cells on seeds 1–100, small instances on seeds
//! 1–1000. [`TUNING_SEEDS`] are the seeds kept for shaping and trying policies (`--seed
//! 1001`: cells on 1001–1100, small instances on 1001–2000); a report whose cells or small
//! instances overlap them says so.
//!
//! # Files (in `--out`)
//! - `matrix.csv` ([`CSV_HEADER`]): one row per cell and policy;
//! - `matrix_optimum.csv` ([`OPTIMUM_HEADER`]): one row per small instance, knowledge of
//!   lengths and policy;
//! - `matrix.svg`: the heat map of makespan / the cell's best (cells down, policies across).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use cryptodispatch::sched::PolicySpec;
use cryptodispatch::sim::bound::lower_bound;
use cryptodispatch::sim::engine::{SimConfig, simulate};
use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::trace::Trace;

use crate::classes::{self, Class};
use crate::experiments::par_map;
use crate::optimum::Solver;
use crate::report::{Csv, Table, f, write_file};
use crate::support::progress;

/// The header of `matrix.csv`.
pub const CSV_HEADER: &str =
    "class,lengths,policy,seeds,base_seed,makespan_mean,bound_mean,ratio_bound,ratio_best";
/// The header of `matrix_optimum.csv`.
pub const OPTIMUM_HEADER: &str = "seed,nodes,packets,lengths,policy,makespan,optimum,bound,ratio";
/// The seeds kept for tuning (first, last), the bench's one definition: `mct` was shaped on
/// some of them and variants of it tried there, and `paper-adaptive` was tuned from the seed
/// just before them ([`ADAPTIVE_TUNING_SEEDS`]); the reports run elsewhere.
pub const TUNING_SEEDS: (u64, u64) = (1001, 2000);
/// The seeds `paper-adaptive`'s rule was tuned on: the 40 from the one before
/// [`TUNING_SEEDS`].
pub const ADAPTIVE_TUNING_SEEDS: (u64, u64) = (TUNING_SEEDS.0 - 1, TUNING_SEEDS.0 + 38);
/// A policy within this factor of a cell's best counts as holding in the cell.
const HOLDS: f64 = 1.05;

/// What the matrix runs: seeds per cell, the first seed, small instances, threads.
#[derive(Debug, Clone)]
pub struct MatrixArgs {
    pub seeds: u32,
    pub base_seed: u64,
    pub small: u32,
    pub threads: usize,
    /// A file of small instances' optima, read before solving and written after
    /// ([`OptimumCache`]).
    pub optimum_cache: Option<std::path::PathBuf>,
    /// How the small instances' optima are found.
    pub solver: Solver,
}

/// One cell's result for one policy.
struct Cell {
    class: &'static str,
    known: bool,
    /// Per policy: mean makespan.
    makespan: Vec<f64>,
    bound: f64,
}

impl Cell {
    fn best(&self) -> f64 {
        self.makespan.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn lengths(&self) -> &'static str {
        if self.known { "known" } else { "unknown" }
    }
}

fn config(nodes: Vec<NodeModel>, known: bool) -> SimConfig {
    SimConfig::new(nodes).with_known_lengths(known)
}

fn makespan(trace: &Trace, nodes: &[NodeModel], known: bool, spec: &PolicySpec) -> f64 {
    let r = simulate(trace, &config(nodes.to_vec(), known), spec)
        .unwrap_or_else(|e| panic!("matrix settings refused: {e}"));
    // A policy that left packets waiting for ever would show a short makespan.
    assert_eq!(
        r.placements.len(),
        trace.len(),
        "{spec} left packets unserved"
    );
    r.makespan
}

/// Runs the matrix and the small instances, prints the tables and writes the files.
///
/// # Errors
/// A file that cannot be written, or the solver failing.
pub fn run(
    args: &MatrixArgs,
    specs: &[PolicySpec],
    labels: &[String],
    out: &Path,
) -> Result<(), String> {
    let classes = classes::classes();
    let seeds: Vec<u64> = (0..u64::from(args.seeds.max(1)))
        .map(|k| args.base_seed + k)
        .collect();
    // One job per (class, knowledge, seed): the lower bound and every policy's makespan.
    let jobs: Vec<(usize, bool, u64)> = (0..classes.len())
        .flat_map(|c| [true, false].map(|k| (c, k)))
        .flat_map(|(c, k)| seeds.iter().map(move |&s| (c, k, s)))
        .collect();
    let bar = progress(jobs.len() as u64 + u64::from(args.small), "matrix");
    let tick = || bar.inc(1);
    let runs: Vec<(f64, Vec<f64>)> = par_map(
        &jobs,
        args.threads,
        |&(c, known, seed)| {
            let (nodes, trace) = classes[c].instance(seed);
            let bound = lower_bound(&trace, &nodes, 1).value();
            let spans = specs
                .iter()
                .map(|s| makespan(&trace, &nodes, known, s))
                .collect();
            (bound, spans)
        },
        &tick,
    );
    let mut cells = Vec::new();
    for (c, class) in classes.iter().enumerate() {
        for known in [true, false] {
            let mine: Vec<&(f64, Vec<f64>)> = jobs
                .iter()
                .zip(&runs)
                .filter(|((jc, jk, _), _)| *jc == c && *jk == known)
                .map(|(_, r)| r)
                .collect();
            let n = mine.len() as f64;
            cells.push(Cell {
                class: class.name,
                known,
                makespan: (0..specs.len())
                    .map(|p| mine.iter().map(|r| r.1[p]).sum::<f64>() / n)
                    .collect(),
                bound: mine.iter().map(|r| r.0).sum::<f64>() / n,
            });
        }
    }
    let small = small_instances(args, specs, &tick)?;
    bar.finish_and_clear();

    print_cells(&cells, labels, args, &classes);
    print_small(&small, labels, args.solver);
    write_files(&cells, &small, labels, args, out)
}

/// One small instance: its optimum, bound, and each policy's makespan (lengths known, then
/// not).
struct Small {
    seed: u64,
    nodes: usize,
    packets: usize,
    optimum: f64,
    bound: f64,
    known: Vec<f64>,
    unknown: Vec<f64>,
}

fn small_instances(
    args: &MatrixArgs,
    specs: &[PolicySpec],
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<Small>, String> {
    let seeds: Vec<u64> = (0..u64::from(args.small))
        .map(|k| args.base_seed + k)
        .collect();
    let cache = match &args.optimum_cache {
        Some(path) => OptimumCache::read(path)?,
        None => OptimumCache::default(),
    };
    let solved: Result<Vec<(Small, String)>, String> = par_map(
        &seeds,
        args.threads,
        |&seed| {
            let (nodes, trace) = classes::small(seed);
            let key = OptimumCache::key(&nodes, &trace);
            let optimum = match cache.get(&key) {
                Some(v) => v,
                None => args.solver.solve(&trace, &nodes, 1)?,
            };
            let spans = |known| {
                specs
                    .iter()
                    .map(|s| makespan(&trace, &nodes, known, s))
                    .collect()
            };
            Ok((
                Small {
                    seed,
                    nodes: nodes.len(),
                    packets: trace.len(),
                    optimum,
                    bound: lower_bound(&trace, &nodes, 1).value(),
                    known: spans(true),
                    unknown: spans(false),
                },
                key,
            ))
        },
        tick,
    )
    .into_iter()
    .collect();
    let solved = solved?;
    if let Some(path) = &args.optimum_cache {
        let mut cache = cache;
        for (s, key) in &solved {
            cache.insert(key.clone(), s.optimum);
        }
        cache.write(path)?;
    }
    Ok(solved.into_iter().map(|(s, _)| s).collect())
}

/// Small instances' optima kept between runs (`--optimum-cache`): the optimum does not depend
/// on the policies, and with `--optimum milp` solving is what takes the time. An instance is
/// keyed by a hash of its nodes and trace as printed (`Debug`), so a changed instance
/// generator misses the cache instead of reading a stale optimum. The file has one
/// `key,optimum` line per instance, the optimum written so that it reads back exactly.
#[derive(Debug, Default)]
struct OptimumCache(std::collections::BTreeMap<String, f64>);

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
    fn read(path: &Path) -> Result<Self, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let mut map = std::collections::BTreeMap::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
            let parsed = line
                .split_once(',')
                .and_then(|(k, v)| Some((k.to_owned(), v.parse::<f64>().ok()?)));
            let Some((k, v)) = parsed else {
                return Err(format!("{}:{}: not key,optimum", path.display(), n + 1));
            };
            map.insert(k, v);
        }
        Ok(OptimumCache(map))
    }

    fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied()
    }

    fn insert(&mut self, key: String, optimum: f64) {
        self.0.insert(key, optimum);
    }

    fn write(&self, path: &Path) -> Result<(), String> {
        let text: String = self.0.iter().map(|(k, v)| format!("{k},{v:?}\n")).collect();
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn geo_mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    (sum / n.max(1) as f64).exp()
}

fn print_cells(cells: &[Cell], labels: &[String], args: &MatrixArgs, classes: &[Class]) {
    let last = args.base_seed + u64::from(args.seeds.max(1)) - 1;
    let last_small = args.base_seed + u64::from(args.small.max(1)) - 1;
    println!(
        "Policy matrix: {} kinds of work x lengths known/unknown, {} seeds per cell (seeds {}-{}).",
        classes.len(),
        args.seeds,
        args.base_seed,
        last
    );
    if args.base_seed <= TUNING_SEEDS.1 && last.max(last_small) >= TUNING_SEEDS.0 {
        println!(
            "NOTE: these seeds overlap seeds {}-{}, kept for tuning: this is not a test.",
            TUNING_SEEDS.0, TUNING_SEEDS.1
        );
    } else {
        println!(
            "Seeds {}-{} are kept for tuning (mct was shaped there); none is used here.",
            TUNING_SEEDS.0, TUNING_SEEDS.1
        );
    }
    println!("\nMean makespan / the cell's best policy's (1.000 = best in the cell):\n");
    let mut header = vec!["class", "lengths"];
    header.extend(labels.iter().map(String::as_str));
    let mut t = Table::new(&header);
    for c in cells {
        let best = c.best();
        let mut row = vec![c.class.to_owned(), c.lengths().to_owned()];
        row.extend(c.makespan.iter().map(|m| f(m / best, 3)));
        t.row(row);
    }
    print!("{}", t.render());
    println!("\nMean makespan / mean lower bound:\n");
    let mut t = Table::new(&header);
    for c in cells {
        let mut row = vec![c.class.to_owned(), c.lengths().to_owned()];
        row.extend(c.makespan.iter().map(|m| f(m / c.bound, 3)));
        t.row(row);
    }
    print!("{}", t.render());
    println!("\nSummary over the {} cells:\n", cells.len());
    let mut t = Table::new(&[
        "policy",
        "geo mean /bound",
        "geo mean /best",
        "worst /best",
        "cells within 5% of best",
    ]);
    for (p, l) in labels.iter().enumerate() {
        let to_best = || cells.iter().map(|c| c.makespan[p] / c.best());
        t.row(vec![
            l.clone(),
            f(geo_mean(cells.iter().map(|c| c.makespan[p] / c.bound)), 3),
            f(geo_mean(to_best()), 3),
            f(to_best().fold(0.0, f64::max), 3),
            format!(
                "{} of {}",
                to_best().filter(|&r| r <= HOLDS).count(),
                cells.len()
            ),
        ]);
    }
    print!("{}", t.render());
}

fn print_small(small: &[Small], labels: &[String], solver: Solver) {
    if small.is_empty() {
        return;
    }
    let over = small
        .iter()
        .filter(|s| s.bound > s.optimum * (1.0 + 1e-6))
        .count();
    println!(
        "\nSmall instances against the exact optimum ({}): {} instances of 2-3 nodes, 6-14 packets;",
        solver.describe(),
        small.len()
    );
    println!(
        "lower bound above the optimum on {over} of them; mean bound / optimum {}.\n",
        f(
            small.iter().map(|s| s.bound / s.optimum).sum::<f64>() / small.len() as f64,
            3
        )
    );
    let ratios = |p: usize| {
        small
            .iter()
            .map(|s| (s.known[p] / s.optimum, s.unknown[p] / s.optimum))
            .collect()
    };
    print!("{}", optimum_table(labels, ratios).render());
}

fn write_files(
    cells: &[Cell],
    small: &[Small],
    labels: &[String],
    args: &MatrixArgs,
    out: &Path,
) -> Result<(), String> {
    let mut csv = Csv::new(CSV_HEADER);
    for c in cells {
        let best = c.best();
        for (p, l) in labels.iter().enumerate() {
            csv.row(&[
                c.class.to_owned(),
                c.lengths().to_owned(),
                l.clone(),
                args.seeds.to_string(),
                args.base_seed.to_string(),
                f(c.makespan[p], 3),
                f(c.bound, 3),
                f(c.makespan[p] / c.bound, 4),
                f(c.makespan[p] / best, 4),
            ]);
        }
    }
    write_file(out, "matrix.csv", csv.as_str())?;
    let mut csv = Csv::new(OPTIMUM_HEADER);
    for s in small {
        for (known, spans) in [("known", &s.known), ("unknown", &s.unknown)] {
            for (p, l) in labels.iter().enumerate() {
                csv.row(&[
                    s.seed.to_string(),
                    s.nodes.to_string(),
                    s.packets.to_string(),
                    known.to_owned(),
                    l.clone(),
                    f(spans[p], 3),
                    f(s.optimum, 3),
                    f(s.bound, 3),
                    f(spans[p] / s.optimum, 4),
                ]);
            }
        }
    }
    write_file(out, "matrix_optimum.csv", csv.as_str())?;
    let mut svg = String::new();
    heat_map(&mut svg, cells, labels).map_err(|e| format!("cannot draw the matrix: {e}"))?;
    write_file(out, "matrix.svg", &svg)?;
    println!(
        "\nwrote {0}/matrix.csv, {0}/matrix_optimum.csv, {0}/matrix.svg",
        out.display()
    );
    Ok(())
}

/// The colour of a ratio to the cell's best: white at 1, through yellow at the 5% line, to
/// red at 1.5 and beyond.
fn shade(ratio: f64) -> RGBColor {
    let mix = |a: f64, b: f64, t: f64| (a + (b - a) * t.clamp(0.0, 1.0)).round() as u8;
    if ratio <= HOLDS {
        let t = (ratio - 1.0) / (HOLDS - 1.0);
        RGBColor(255, 255, mix(255.0, 150.0, t))
    } else {
        let t = (ratio - HOLDS) / (1.5 - HOLDS);
        RGBColor(
            mix(255.0, 215.0, t),
            mix(235.0, 48.0, t),
            mix(150.0, 39.0, t),
        )
    }
}

fn heat_map(
    out: &mut String,
    cells: &[Cell],
    labels: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    let (cw, ch, left, top) = (74i32, 22i32, 230i32, 90i32);
    let width = (left + cw * labels.len() as i32 + 20) as u32;
    let height = (top + ch * cells.len() as i32 + 40) as u32;
    let root = SVGBackend::with_string(out, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = TextStyle::from(("sans-serif", 18).into_font());
    root.draw(&Text::new(
        "makespan / the cell's best policy (white: best; yellow: within 5%; red: 1.5 or worse)",
        (10, 10),
        title,
    ))?;
    let small = TextStyle::from(("sans-serif", 12).into_font());
    let centred = small.pos(Pos::new(HPos::Center, VPos::Center));
    let right = small.pos(Pos::new(HPos::Right, VPos::Center));
    for (p, l) in labels.iter().enumerate() {
        let x = left + cw * p as i32 + cw / 2;
        root.draw(&Text::new(l.clone(), (x, top - 14), centred.clone()))?;
    }
    for (r, c) in cells.iter().enumerate() {
        let y = top + ch * r as i32;
        root.draw(&Text::new(
            format!("{} ({})", c.class, c.lengths()),
            (left - 6, y + ch / 2),
            right.clone(),
        ))?;
        let best = c.best();
        for (p, m) in c.makespan.iter().enumerate() {
            let x = left + cw * p as i32;
            let ratio = m / best;
            root.draw(&Rectangle::new(
                [(x, y), (x + cw - 1, y + ch - 1)],
                shade(ratio).filled(),
            ))?;
            root.draw(&Text::new(
                f(ratio, 3),
                (x + cw / 2, y + ch / 2),
                centred.clone(),
            ))?;
        }
    }
    root.present()?;
    Ok(())
}

/// Every policy's makespan over the exact optimum on the small instances, as a table: the mean
/// and the worst, lengths known and unknown. `ratios(p)` gives policy `p`'s (known, unknown)
/// ratios, one pair per instance.
pub fn optimum_table(labels: &[String], ratios: impl Fn(usize) -> Vec<(f64, f64)>) -> Table {
    let mut t = Table::new(&[
        "policy",
        "mean /optimum (known)",
        "worst (known)",
        "mean /optimum (unknown)",
        "worst (unknown)",
    ]);
    for (p, l) in labels.iter().enumerate() {
        let r = ratios(p);
        let n = r.len().max(1) as f64;
        let known = || r.iter().map(|x| x.0);
        let unknown = || r.iter().map(|x| x.1);
        t.row(vec![
            l.clone(),
            f(known().sum::<f64>() / n, 3),
            f(known().fold(0.0, f64::max), 3),
            f(unknown().sum::<f64>() / n, 3),
            f(unknown().fold(0.0, f64::max), 3),
        ]);
    }
    t
}
