//! `paper --exp N`: the paper's experiments on the simulator, as tables, CSV and SVG.

use std::path::{Path, PathBuf};

use clap::Args;

use cryptodispatch::sched::PolicySpec;
use cryptodispatch::sim::NodeSet;
use cryptodispatch::sim::research::experiments::{
    self, AlphaCapRow, AlphaRow, CAPS, CompareRow, LoadRow, Settings, Stats,
};

use crate::plot::{Chart, Series};
use crate::replay::{load, packet_count};
use crate::report::{Csv, Table, f, out_dir, pct, pcts, write_file, wrote};
use crate::support::{Pool, positive};

/// Options of `paper`.
#[derive(Debug, Args)]
pub struct PaperArgs {
    /// Which experiment: 1 (best alpha against CAP), 2 (alpha sweep), 3 (load per node),
    /// 4 (against hhs-acdid).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    exp: u8,
    /// Seeds (repetitions) per point, 1 to a million.
    #[arg(long, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=crate::policies::MAX_COUNT))]
    seeds: u32,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Node queue capacity, in length units (experiments 2-4).
    #[arg(long, default_value_t = 32)]
    cap: u64,
    /// Packets per run in experiment 1 (1 to 10000000).
    #[arg(long, default_value_t = 600, value_parser = packet_count)]
    packets: usize,
    /// Offered load relative to the nodes' full-speed capacity (0: everything at time 0; else
    /// from 1e-6 to 1e6).
    #[arg(long, default_value_t = 1.5)]
    load: f64,
    /// Where CSV and SVG files go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Threads to run points on (results do not depend on it).
    #[arg(long, value_parser = positive)]
    threads: Option<usize>,
}

impl PaperArgs {
    fn settings(&self) -> Result<Settings, String> {
        let mut s = Settings {
            seeds: self.seeds,
            base_seed: self.seed,
            cap: self.cap,
            ..Settings::default()
        };
        s.workload.packets = self.packets;
        s.workload.load = load(self.load)?;
        Ok(s)
    }
}

/// Runs the experiment, prints it and writes its files.
pub fn run(args: &PaperArgs) -> Result<(), String> {
    let (settings, threads, out) = (&args.settings()?, args.threads, args.out.as_path());
    out_dir(out)?;
    experiments::check(settings, &CAPS)?;
    match args.exp {
        1 => exp1(settings, threads, out),
        2 => exp2(settings, threads, out),
        3 => exp3(settings, threads, out),
        4 => exp4(settings, threads, out, &experiments::exp4_points()),
        exp => Err(format!("no experiment {exp}: choose 1, 2, 3 or 4")),
    }
}

fn exp1(settings: &Settings, threads: Option<usize>, out: &Path) -> Result<(), String> {
    let packets = settings.workload.packets;
    let sets = experiments::exp1_sets();
    let seeds = u64::from(settings.seeds);
    let pool = Pool::new(threads, (sets.len() * CAPS.len()) as u64 * seeds, "exp 1");
    let rows: Vec<AlphaCapRow> = sets
        .iter()
        .flat_map(|(label, set)| experiments::exp1(settings, label, set, &CAPS, packets, &pool))
        .collect();
    pool.finish();

    println!(
        "Experiment 1: the alpha (beta = 1 - alpha) with the least makespan, against node capacity CAP"
    );
    println!(
        "({packets} packets, 4 nodes, {} seeds; 'four classes': one node from each of t1..t4)\n",
        settings.seeds
    );
    let mut t = Table::with_columns("nodes,CAP,best alpha,makespan,std,at alpha=0.05,at alpha=1");
    let mut all = Csv::new("nodes,cap,alpha,makespan_mean,makespan_std");
    let mut best = Csv::new("nodes,cap,best_alpha,makespan_mean,makespan_std");
    for r in &rows {
        t.row(vec![
            r.nodes.clone(),
            r.cap.to_string(),
            f(r.best_alpha, 2),
            f(r.best.mean, 1),
            f(r.best.std, 1),
            f(r.at(0.05), 1),
            f(r.at(1.0), 1),
        ]);
        let cells = |alpha: f64, s: &Stats| {
            let nodes = r.nodes.replace(',', ";");
            [
                nodes,
                r.cap.to_string(),
                f(alpha, 2),
                f(s.mean, 3),
                f(s.std, 3),
            ]
        };
        best.row(&cells(r.best_alpha, &r.best));
        for (a, s) in &r.by_alpha {
            all.row(&cells(*a, s));
        }
    }
    print!("{}", t.render());
    write_file(out, "exp1.csv", all.as_str())?;
    write_file(out, "exp1_best.csv", best.as_str())?;
    let series = sets
        .iter()
        .map(|&(label, _)| {
            let best = |r: &AlphaCapRow| (r.nodes == label).then_some((r.cap as f64, r.best_alpha));
            Series::of(label, &rows, best)
        })
        .collect();
    Chart {
        title: "Exp 1 (fig. 6): best alpha against node capacity",
        x: "node capacity CAP",
        y: "best alpha",
        series,
    }
    .write(out, "exp1_best_alpha.svg")?;
    let files = ["exp1.csv", "exp1_best.csv", "exp1_best_alpha.svg"];
    println!("\n{}", wrote(out, &files));
    Ok(())
}

fn exp2(settings: &Settings, threads: Option<usize>, out: &Path) -> Result<(), String> {
    let packets = 600;
    let pool = Pool::new(threads, u64::from(settings.seeds), "exp 2");
    let rows = experiments::exp2(settings, &NodeSet::paper(4), packets, &pool);
    pool.finish();

    println!(
        "Experiment 2: alpha swept over [0, 1], beta = 1 - alpha ({packets} packets, 4 nodes, t in [16,36], CAP {}, {} seeds)",
        settings.cap, settings.seeds
    );
    println!("Load: share of the busy time per node, fastest node first.\n");
    let mut t =
        Table::with_columns("alpha,makespan,std,node 1,node 2,node 3,node 4,packets node 1..4");
    let mut csv = Csv::new(
        "alpha,makespan_mean,makespan_std,busy_share_1,busy_share_2,busy_share_3,busy_share_4,packet_share_1,packet_share_2,packet_share_3,packet_share_4",
    );
    for r in &rows {
        let mut cells = vec![f(r.alpha, 2), f(r.makespan.mean, 1), f(r.makespan.std, 1)];
        cells.extend(r.busy_share.iter().map(|&s| pct(s)));
        cells.push(pcts(&r.packet_share));
        t.row(cells);
        let mut c = vec![f(r.alpha, 2), f(r.makespan.mean, 3), f(r.makespan.std, 3)];
        c.extend(r.busy_share.iter().map(|&s| f(s, 4)));
        c.extend(r.packet_share.iter().map(|&s| f(s, 4)));
        csv.row(&c);
    }
    print!("{}", t.render());
    if let Some(b) = AlphaRow::least(&rows) {
        println!(
            "\nleast makespan at alpha = {:.2} ({:.1}); the paper reports its best at alpha = 0.05",
            b.alpha, b.makespan.mean
        );
    }
    write_file(out, "exp2.csv", csv.as_str())?;
    Chart {
        title: "Exp 2 (fig. 7a): makespan against alpha",
        x: "alpha (beta = 1 - alpha)",
        y: "makespan",
        series: vec![Series::of("paper", &rows, |r| {
            Some((r.alpha, r.makespan.mean))
        })],
    }
    .write(out, "exp2_makespan.svg")?;
    Chart {
        title: "Exp 2 (fig. 7b): share of busy time per node against alpha",
        x: "alpha (beta = 1 - alpha)",
        y: "share of busy time",
        series: (0..4)
            .map(|i| {
                let label = format!("node {} ({})", i + 1, ["fastest", "-", "-", "slowest"][i]);
                Series::of(label, &rows, |r| Some((r.alpha, r.busy_share[i])))
            })
            .collect(),
    }
    .write(out, "exp2_load.svg")?;
    let files = ["exp2.csv", "exp2_makespan.svg", "exp2_load.svg"];
    println!("{}", wrote(out, &files));
    Ok(())
}

fn exp3(settings: &Settings, threads: Option<usize>, out: &Path) -> Result<(), String> {
    let points = experiments::exp3_points();
    let total = points.len() as u64 * u64::from(settings.seeds);
    let pool = Pool::new(threads, total, "exp 3");
    let rows = experiments::exp3(settings, &points, &PolicySpec::paper_defaults(), &pool);
    pool.finish();

    println!(
        "Experiment 3: load per node under `paper` (alpha 0.05), t in [16,36], CAP {}, {} seeds",
        settings.cap, settings.seeds
    );
    println!(
        "Share of the busy time per node, fastest node first; CV = std/mean of the nodes' busy times.\n"
    );
    let mut t =
        Table::with_columns("nodes,packets,makespan,busy CV,busy share per node (fastest first)");
    let mut csv = Csv::new("nodes,packets,node_rank,busy_share,packet_share,busy_cv_mean");
    for r in &rows {
        t.row(vec![
            r.nodes.to_string(),
            r.packets.to_string(),
            f(r.makespan.mean, 1),
            f(r.busy_cv.mean, 3),
            pcts(&r.busy_share),
        ]);
        for (i, (b, p)) in r.busy_share.iter().zip(&r.packet_share).enumerate() {
            csv.row(&[
                r.nodes.to_string(),
                r.packets.to_string(),
                (i + 1).to_string(),
                f(*b, 4),
                f(*p, 4),
                f(r.busy_cv.mean, 4),
            ]);
        }
    }
    print!("{}", t.render());
    write_file(out, "exp3.csv", csv.as_str())?;
    for (n, fig) in [(4, "8"), (10, "9")] {
        let sub: Vec<_> = rows.iter().filter(|r| r.nodes == n).collect();
        Chart {
            title: &format!("Exp 3 (fig. {fig}): share of busy time per node, {n} nodes"),
            x: "packets",
            y: "share of busy time",
            series: (0..n)
                .map(|i| {
                    let share = |r: &&LoadRow| Some((r.packets as f64, r.busy_share[i]));
                    Series::of(format!("node {}", i + 1), &sub, share)
                })
                .collect(),
        }
        .write(out, &format!("exp3_{n}nodes.svg"))?;
    }
    let files = ["exp3.csv", "exp3_4nodes.svg", "exp3_10nodes.svg"];
    println!("\n{}", wrote(out, &files));
    Ok(())
}

/// Experiment 4 at `points` (the default summary runs an excerpt).
pub fn exp4(
    settings: &Settings,
    threads: Option<usize>,
    out: &Path,
    points: &[(String, usize, usize)],
) -> Result<(), String> {
    let policies = [PolicySpec::paper_defaults(), PolicySpec::hhs_acdid()];
    let total = points.len() as u64 * u64::from(settings.seeds);
    let pool = Pool::new(threads, total, "exp 4");
    let rows = experiments::compare(settings, points, &policies, &pool);
    pool.finish();

    println!(
        "Experiment 4: makespan of `paper` against `hhs-acdid` (t in [16,36], CAP {}, {} seeds)",
        settings.cap, settings.seeds
    );
    println!(
        "The paper reports 10.6%-15.3% less completion time (10.3%-15.3% in the node sweep).\n"
    );
    let mut t = Table::with_columns(
        "sweep,nodes,packets,paper,std,hhs-acdid,std,reduction,lower bound,paper/bound",
    );
    let mut csv = Csv::new("nodes,packets,policy,makespan_mean,makespan_std,lower_bound");
    for pair in rows.chunks(2) {
        let (p, h) = (&pair[0], &pair[1]);
        t.row(vec![
            p.sweep.clone(),
            p.nodes.to_string(),
            p.packets.to_string(),
            f(p.makespan.mean, 1),
            f(p.makespan.std, 1),
            f(h.makespan.mean, 1),
            f(h.makespan.std, 1),
            pct(1.0 - p.makespan.mean / h.makespan.mean),
            f(p.lower_bound, 1),
            f(p.ratio(), 3),
        ]);
    }
    for r in &rows {
        csv.row(&[
            r.nodes.to_string(),
            r.packets.to_string(),
            r.policy.clone(),
            f(r.makespan.mean, 3),
            f(r.makespan.std, 3),
            f(r.lower_bound, 3),
        ]);
    }
    print!("{}", t.render());
    write_file(out, "exp4.csv", csv.as_str())?;
    for (sweep, fig, x, file) in [
        ("4 nodes", "10", "packets", "exp4_4nodes.svg"),
        ("10 nodes", "11", "packets", "exp4_10nodes.svg"),
        ("1000 packets", "12", "nodes", "exp4_1000packets.svg"),
    ] {
        let sub: Vec<&CompareRow> = rows.iter().filter(|r| r.sweep == sweep).collect();
        if sub.is_empty() {
            continue;
        }
        let xval = |r: &CompareRow| (if x == "nodes" { r.nodes } else { r.packets }) as f64;
        // A policy's rows of the sweep, as a line of `y` against x.
        let line = |label: &str, policy: &str, y: fn(&CompareRow) -> f64| {
            Series::of(label, &sub, |r| {
                (r.policy == policy).then(|| (xval(r), y(r)))
            })
        };
        let mut series: Vec<Series> = (policies.iter())
            .map(|p| line(p.name(), p.name(), |r| r.makespan.mean))
            .collect();
        series.push(line("lower bound", "paper", |r| r.lower_bound));
        Chart {
            title: &format!("Exp 4 (fig. {fig}): makespan, {sweep}"),
            x,
            y: "makespan",
            series,
        }
        .write(out, file)?;
    }
    println!("\nwrote {0}/exp4.csv and {0}/exp4_*.svg", out.display());
    Ok(())
}
