//! `policies --matrix`: every policy on every kind of work of `sim::research::classes`, with
//! the jobs' lengths known to the policies (the service) and not (the paper's online model), and
//! on small instances against the exact optimum (`sim::research::optimum`), as the library's
//! `sim::research::matrix` computes them.
//!
//! A cell is a class with one knowledge of lengths. Every policy of a cell runs on the same
//! instances (seed k is `--seed + k`), and the cell gives each policy's mean makespan divided
//! by the mean lower bound (`sim::bound`) and by the best policy's mean makespan in the cell.
//! The summary gives, per policy, the geometric mean over the cells of makespan / bound, the
//! worst ratio to a cell's best, and the cells it is within 5% of the best in.
//!
//! # Seeds
//! The report runs from seed 1 (`--seed`): cells on seeds 1–100, small instances on seeds
//! 1–1000. `TUNING_SEEDS` (`sim::research::matrix`) are the seeds kept for shaping and trying
//! policies (`--seed 1001`: cells on 1001–1100, small instances on 1001–2000); a report whose
//! cells or small instances overlap them says so.
//!
//! # Files (in `--out`)
//! - `matrix.csv` ([`CSV_HEADER`]): one row per cell and policy;
//! - `matrix_optimum.csv` ([`OPTIMUM_HEADER`]): one row per small instance, knowledge of
//!   lengths and policy;
//! - `matrix.svg`: the heat map of makespan / the cell's best (cells down, policies across).

use std::path::Path;
use std::sync::Mutex;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use cryptodispatch::sched::PolicySpec;
use cryptodispatch::sim::lower_bound;
use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::research::classes::{self, Class};
use cryptodispatch::sim::research::matrix::{
    self, Cell, OptimumCache, Small, Standing, TUNING_SEEDS,
};
use cryptodispatch::sim::trace::Trace;

use crate::milp::Solver;
use crate::plot::svg;
use crate::policies::PoliciesArgs;
use crate::report::{Csv, Table, f, write_file, wrote};
use crate::support::{Pool, lock, seeds};

/// The header of `matrix.csv`.
pub const CSV_HEADER: &str =
    "class,lengths,policy,seeds,base_seed,makespan_mean,bound_mean,ratio_bound,ratio_best";
/// The header of `matrix_optimum.csv`.
pub const OPTIMUM_HEADER: &str = "seed,nodes,packets,lengths,policy,makespan,optimum,bound,ratio";
/// A policy within this factor of a cell's best counts as holding in the cell.
const HOLDS: f64 = 1.05;

/// Runs the matrix and the small instances, prints the tables and writes the files.
///
/// # Errors
/// A file that cannot be written, or the solver failing.
pub fn run(args: &PoliciesArgs) -> Result<(), String> {
    let (specs, labels) = &args.specs()?;
    crate::report::out_dir(&args.out)?;
    let classes = classes::classes();
    let cell_seeds = seeds(args.seed, u64::from(args.seeds().max(1)));
    let small_seeds = seeds(args.seed, u64::from(args.small()));
    let points = 2 * classes.len() * cell_seeds.len() + small_seeds.len();
    let pool = Pool::new(args.threads, points as u64, "matrix");
    let cells = matrix::cells(&classes, specs, &cell_seeds, &pool)?;
    let (small, notes) = small_instances(args, specs, &small_seeds, &pool)?;
    pool.finish();
    for note in notes {
        eprintln!("cryptodispatch-bench: {note}");
    }

    print_cells(&cells, labels, args, &classes);
    print_small(&small, labels, args.optimum, None);
    write_files(&cells, &small, labels, args)
}

/// The small instances, their optima read from the cache (`--optimum-cache`) where it has
/// them, and the cache written back with every optimum; with notes on the cache's corrupt
/// lines, for the standard error.
///
/// A cached value that cannot be an optimum (not a positive finite number, or below the
/// instance's lower bound) is recomputed rather than refused: the cache only saves time, the
/// solver gives the right value, and writing the cache back mends the line, where refusing
/// would leave the user to find and delete it before the same recomputation. The notes name
/// the file and line, so the corruption is not hidden.
fn small_instances(
    args: &PoliciesArgs,
    specs: &[PolicySpec],
    seeds: &[u64],
    pool: &Pool,
) -> Result<(Vec<Small>, Vec<String>), String> {
    let path = args.optimum_cache.as_deref();
    let in_file = |e, path: &Path| format!("{}: {e}", path.display());
    let mut cache = OptimumCache::default();
    let mut values = Vec::new();
    if let Some(path) = path {
        cache = OptimumCache::read(path).map_err(|e| in_file(e, path))?;
        values = cached_values(path).map_err(|e| in_file(e, path))?;
    }
    // Cached values below their instance's lower bound: (seed, value, bound).
    let below = Mutex::new(Vec::new());
    let optimum = |seed, trace: &Trace, nodes: &[NodeModel]| {
        let bound = lower_bound(trace, nodes, 1).value();
        match cache.get(nodes, trace) {
            Some(v) if v.is_finite() && v > 0.0 && v >= bound * (1.0 - BOUND_SLACK) => Ok(v),
            Some(v) => {
                if v.is_finite() && v > 0.0 {
                    lock(&below).push((seed, v, bound));
                }
                args.optimum.solve(trace, nodes, 1)
            }
            None => args.optimum.solve(trace, nodes, 1),
        }
    };
    let small = matrix::small_instances(seeds, specs, optimum, pool)?;
    let mut notes = Vec::new();
    if let Some(path) = path {
        let shown = path.display();
        let lines_of = |v: f64| -> String {
            let lines: Vec<String> = (values.iter().filter(|&&(_, x)| x.to_bits() == v.to_bits()))
                .map(|(n, _)| n.to_string())
                .collect();
            lines.join(", ")
        };
        for &(n, v) in values.iter().filter(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            notes.push(format!(
                "{shown}: line {n}: optimum {v} is not a positive number, a corrupt cache \
                 line: ignored, its instance's optimum recomputed when it runs"
            ));
        }
        let mut below = below.into_inner().unwrap_or_else(|e| e.into_inner());
        below.sort_by_key(|b| b.0);
        for (seed, v, bound) in below {
            notes.push(format!(
                "{shown}: line {}: optimum {v} of small instance {seed} lies below its lower \
                 bound {bound}, a corrupt cache line: recomputed",
                lines_of(v)
            ));
        }
        cache.insert_small(&small);
        cache.write(path).map_err(|e| in_file(e, path))?;
    }
    Ok((small, notes))
}

/// How far below an instance's lower bound a cached optimum may lie, relative to the bound,
/// before it counts as corrupt: the bound is computed in floating point, and an optimum may
/// equal it.
const BOUND_SLACK: f64 = 1e-9;

/// The values of an optimum cache file (`key,optimum` lines, as [`OptimumCache::read`] reads
/// it), each with its line number: what the notes on corrupt lines name.
fn cached_values(path: &Path) -> std::io::Result<Vec<(usize, f64)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let values = (text.lines().enumerate())
        .filter_map(|(n, line)| Some((n + 1, line.split_once(',')?.1.parse::<f64>().ok()?)));
    Ok(values.collect())
}

fn print_cells(cells: &[Cell], labels: &[String], args: &PoliciesArgs, classes: &[Class]) {
    let last = args.seed + u64::from(args.seeds().max(1)) - 1;
    let last_small = args.seed + u64::from(args.small().max(1)) - 1;
    println!(
        "Policy matrix: {} kinds of work x lengths known/unknown, {} seeds per cell (seeds {}-{}).",
        classes.len(),
        args.seeds(),
        args.seed,
        last
    );
    if args.seed <= TUNING_SEEDS.1 && last.max(last_small) >= TUNING_SEEDS.0 {
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
    let mut header = vec!["class", "lengths"];
    header.extend(labels.iter().map(String::as_str));
    for (title, by_best) in [
        (
            "Mean makespan / the cell's best policy's (1.000 = best in the cell)",
            true,
        ),
        ("Mean makespan / mean lower bound", false),
    ] {
        println!("\n{title}:\n");
        let mut t = Table::new(&header);
        for c in cells {
            let per = if by_best { c.best() } else { c.bound };
            let mut row = vec![c.class.to_owned(), c.lengths().to_owned()];
            row.extend(c.makespan.iter().map(|m| f(m / per, 3)));
            t.row(row);
        }
        print!("{}", t.render());
    }
    println!("\nSummary over the {} cells:\n", cells.len());
    let mut t = Table::with_columns(
        "policy,geo mean /bound,geo mean /best,worst /best,cells within 5% of best",
    );
    for (p, l) in labels.iter().enumerate() {
        let s = Standing::of(cells.iter().map(|c| (c.makespan[p], c.best(), c.bound)));
        let within = format!("{} of {}", s.within_5, cells.len());
        t.row(vec![
            l.clone(),
            f(s.geo_bound, 3),
            f(s.geo_best, 3),
            f(s.worst, 3),
            within,
        ]);
    }
    print!("{}", t.render());
}

/// The small instances against the optimum: a line on the lower bound (the matrix's), or on
/// the instances' seeds (the sample's, whose first seed is `first`), and the policies' table.
pub fn print_small(small: &[Small], labels: &[String], solver: Solver, first: Option<u64>) {
    if small.is_empty() {
        return;
    }
    let Some(first) = first else {
        let (over, mean) = matrix::bound_against_optimum(small);
        println!(
            "\nSmall instances against the exact optimum ({}): {} instances of 2-3 nodes, 6-14 packets;",
            solver.describe(),
            small.len()
        );
        let mean = f(mean, 3);
        println!("lower bound above the optimum on {over} of them; mean bound / optimum {mean}.\n");
        print!("{}", optimum_table(labels, small).render());
        return;
    };
    println!(
        "Small instances against the exact optimum ({}): {} instances (seeds {first}-{}) of 2-3 nodes, 6-14 packets, CAP 32, strict affinity:\n",
        solver.describe(),
        small.len(),
        first + small.len() as u64 - 1
    );
    print!("{}", optimum_table(labels, small).render());
}

/// The small instances as CSV under `header`: one row per instance, knowledge of lengths and
/// policy, with the lower bound where `bound` (the matrix's file) and without (the sample's).
pub fn optimum_csv(header: &str, small: &[Small], labels: &[String], bound: bool) -> Csv {
    let mut csv = Csv::new(header);
    for s in small {
        for (known, spans) in [("known", &s.known), ("unknown", &s.unknown)] {
            for (p, l) in labels.iter().enumerate() {
                let mut row = vec![
                    s.seed.to_string(),
                    s.nodes.to_string(),
                    s.packets.to_string(),
                    known.to_owned(),
                    l.clone(),
                    f(spans[p], 3),
                    f(s.optimum, 3),
                ];
                if bound {
                    row.push(f(s.bound, 3));
                }
                row.push(f(spans[p] / s.optimum, 4));
                csv.row(&row);
            }
        }
    }
    csv
}

fn write_files(
    cells: &[Cell],
    small: &[Small],
    labels: &[String],
    args: &PoliciesArgs,
) -> Result<(), String> {
    let out = args.out.as_path();
    let mut csv = Csv::new(CSV_HEADER);
    for c in cells {
        let best = c.best();
        for (p, l) in labels.iter().enumerate() {
            csv.row(&[
                c.class.to_owned(),
                c.lengths().to_owned(),
                l.clone(),
                args.seeds().to_string(),
                args.seed.to_string(),
                f(c.makespan[p], 3),
                f(c.bound, 3),
                f(c.makespan[p] / c.bound, 4),
                f(c.makespan[p] / best, 4),
            ]);
        }
    }
    write_file(out, "matrix.csv", csv.as_str())?;
    let csv = optimum_csv(OPTIMUM_HEADER, small, labels, true);
    write_file(out, "matrix_optimum.csv", csv.as_str())?;
    write_file(out, "matrix.svg", &heat_map(cells, labels)?)?;
    let files = ["matrix.csv", "matrix_optimum.csv", "matrix.svg"];
    println!("\n{}", wrote(out, &files));
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

/// The heat map of makespan / the cell's best, as SVG text.
fn heat_map(cells: &[Cell], labels: &[String]) -> Result<String, String> {
    let (cw, ch, left, top) = (74i32, 22i32, 230i32, 90i32);
    let width = (left + cw * labels.len() as i32 + 20) as u32;
    let height = (top + ch * cells.len() as i32 + 40) as u32;
    svg("the matrix", (width, height), |root| {
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
        Ok(())
    })
}

/// Every policy's makespan over the exact optimum on the small instances, as a table: the mean
/// and the worst, lengths known and unknown.
fn optimum_table(labels: &[String], small: &[Small]) -> Table {
    let mut t = Table::with_columns(
        "policy,mean /optimum (known),worst (known),mean /optimum (unknown),worst (unknown)",
    );
    for (l, ratios) in labels.iter().zip(matrix::against_optimum(small)) {
        let mut row = vec![l.clone()];
        row.extend(
            ratios
                .iter()
                .flat_map(|&(mean, worst)| [f(mean, 3), f(worst, 3)]),
        );
        t.row(row);
    }
    t
}
