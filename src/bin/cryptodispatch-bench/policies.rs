//! `policies`: every node-selection policy on the same work, in four settings, and
//! `paper-adaptive` against the best fixed α of experiment 1.
//!
//! 1. **paper-adaptive against the best fixed α** (when `paper-adaptive` is among the
//!    policies): experiment 1's settings (600 packets, 4 nodes, load 1.5, the capacities of
//!    `CAPS`, the node sets `t in [16,36]` and `four classes`), every α of the grid and
//!    `paper-adaptive` on the same instances. Its rule was tuned on base seed 1000; the report
//!    runs from `--seed` (default 1), so it is not scored on the instances it was tuned on.
//! 2. **Simulator, the paper's settings**: experiment 4's points 4 nodes × 300 and 700
//!    packets and 10 nodes × 1000 packets; t ∈ [16, 36], CAP 32, load 1.5.
//! 3. **Simulator, bursty arrivals**: the same jobs, arriving in bursts of about 64 packets at
//!    0.8 / 0.25 times the cluster's capacity, silent for the rest of each cycle (a quarter
//!    on); mean load 0.8, so the cluster drains between bursts.
//! 4. **Simulator, a heterogeneous cluster**: unit times 16, 24, 32, 48 (ratio 1 : 1.5 : 2 : 3),
//!    CAP 32, load 1.5.
//! 5. **Live** (unless `--no-live`): the `hetero` workload through the real service (one AES
//!    cluster of 4 nodes slowed 1×, 1.5×, 2×, 3×; CBC and ECB jobs), beside the primitives
//!    called directly by 4 threads with the same slowdowns taking jobs greedily (the
//!    reference); each side's fastest of 3 runs.
//!
//! The library's `sim::research::experiments::PolicySettings` runs the simulated settings.
//! Every simulated point runs each policy on the same instances (seed k is `--seed + k`) and
//! reports the mean makespan, its standard deviation over the seeds, and the distance from the
//! simulator's lower bound (mean makespan / mean lower bound, ≥ 1). Live rows report the
//! makespan in milliseconds and its ratio to the reference's.
//!
//! # Files (in `--out`)
//! - `policies.csv`, one row per (setting, point, policy):
//!   `setting,source,nodes,packets,policy,runs,makespan_mean,makespan_std,reference,ratio`;
//!   `source` is `sim` or `live`; `packets` is 0 for live (120 jobs of 1-8 packets of
//!   256 KiB); `runs` the seeds (sim) or the repetitions whose fastest counts (live); `reference` the mean lower bound (sim, in the simulator's time unit) or
//!   the reference's makespan (live, ms, like `makespan_mean`; `makespan_std` is empty);
//!   `ratio` = `makespan_mean / reference`.
//! - `policies_adaptive.csv` ([`ADAPTIVE_CSV_HEADER`]), one row per node set and CAP.
//! - `policies.svg`: per policy, the mean ratio in each setting (bars);
//!   `policies_adaptive.svg`: paper-adaptive's makespan over the best fixed α's, against CAP.

use std::path::{Path, PathBuf};

use clap::Args;
use cryptodispatch::sched::PolicySpec;
use cryptodispatch::sim::research::experiments::{
    self, AdaptiveRow, BURST_DUTY, BURST_LOAD, BURST_PACKETS, CAPS, CompareRow, EXP1_PACKETS,
    PolicySettings, Settings, Stats,
};
use cryptodispatch::sim::research::matrix::ADAPTIVE_TUNING_SEEDS as TUNING_SEEDS;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::live::{self, LiveArgs, Workload};
use crate::milp::Solver;
use crate::plot::{COLORS, Chart, Series, svg};
use crate::report::{Csv, Table, f, pct, write_file, wrote};
use crate::support::{Pool, count_up_to, parse_policies, policy_help, positive};

/// The header of `policies.csv`.
pub const CSV_HEADER: &str =
    "setting,source,nodes,packets,policy,runs,makespan_mean,makespan_std,reference,ratio";

/// The header of `policies_adaptive.csv`.
pub const ADAPTIVE_CSV_HEADER: &str = "nodes,cap,seeds,base_seed,best_alpha,best_mean,best_std,adaptive_mean,adaptive_std,ratio,diff_mean,diff_std,per_seed_best_mean,adaptive_mean_alpha";

/// Options of `policies`.
#[derive(Debug, Args)]
pub struct PoliciesArgs {
    /// Policies to compare, comma-separated, e.g. paper,hhs-acdid,paper-adaptive (an unknown
    /// name is an error that lists the known ones; parameters as name:key=value). Default:
    /// every policy.
    #[arg(long, value_name = "A,B,...", long_help = policy_help(
        "Policies to compare, comma-separated, e.g. paper,hhs-acdid,paper-adaptive. \
         Default: every policy."))]
    pub policies: Option<String>,
    /// Seeds (repetitions) per simulated point, 1 to a million [default: 10; with --matrix,
    /// 100 per cell].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_COUNT))]
    pub seeds: Option<u32>,
    /// The first seed (paper-adaptive was tuned from seed 1000; keep the report elsewhere).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where CSV and SVG files go.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Skip the live part (the real service on this machine).
    #[arg(long)]
    pub no_live: bool,
    /// Threads to run simulated points on (results do not depend on it).
    #[arg(long, value_parser = positive)]
    pub threads: Option<usize>,
    /// Instead of the settings above, the policy matrix: every kind of work, lengths known and
    /// unknown, `--seeds` seeds per cell from `--seed`, and small instances against the exact
    /// optimum (table, matrix.csv, matrix_optimum.csv, matrix.svg).
    #[arg(long)]
    pub matrix: bool,
    /// With --matrix or --sample: small instances compared with the exact optimum
    /// (milliseconds each with the default search), 0 to a million [default: 1000 with
    /// --matrix, 200 with --sample].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=MAX_COUNT))]
    pub small: Option<u32>,
    /// With --matrix or --sample: how the small instances' exact optimum is found: `search` (branch and
    /// bound over the assignment) or `milp` (the mixed-integer program, slow: seconds to over
    /// an hour per instance). The two agree; `milp` is the check.
    #[arg(long, value_enum, default_value_t = Solver::Search)]
    pub optimum: Solver,
    /// With --matrix: a quick pass, 10 seeds per cell (whatever --seeds says).
    #[arg(long, requires = "matrix")]
    pub quick: bool,
    /// With --matrix: a file keeping the small instances' optima between runs (read if it
    /// exists, written after), worth it with `--optimum milp`: the optimum does not depend on
    /// the policies, and an instance that changed misses the cache (it is keyed by the
    /// instance itself).
    #[arg(long, value_name = "FILE", requires = "matrix")]
    pub optimum_cache: Option<PathBuf>,
    /// Instead of the settings above, N configurations drawn from the workload space
    /// (`cryptodispatch::sim::space`) from `--seed` (1: the tuning sample; the held-out sample
    /// is the space's HELD_OUT_SEED), every policy ÷ the best per configuration (table,
    /// sample.csv, sample.svg), and `--small` small instances against the exact optimum; 1 to
    /// a million.
    #[arg(long, value_name = "N", conflicts_with = "matrix", value_parser = sample_count)]
    pub sample: Option<usize>,
}

/// The most seeds, configurations (`--sample`) or small instances (`--small`) a run takes: a
/// million is hours of simulation already (a thousand configurations take 10-40 s on two
/// cores), and each is held until the report, so far more only fills memory (four billion
/// aborted on allocation).
pub const MAX_COUNT: i64 = 1_000_000;

/// `--sample`: 1 to [`MAX_COUNT`].
fn sample_count(s: &str) -> Result<usize, String> {
    count_up_to(s, MAX_COUNT as usize, "configurations")
}

/// One setting's rows, as printed and written: per point and policy (its label), the mean
/// makespan and its reference, the lower bound (sim) or the reference's makespan (live, in ms,
/// with no spread).
struct Section {
    setting: &'static str,
    source: &'static str,
    runs: usize,
    rows: Vec<CompareRow>,
}

impl PoliciesArgs {
    /// Seeds per simulated point, or per cell with --matrix (10 with --quick).
    pub fn seeds(&self) -> u32 {
        let default = if self.matrix { 100 } else { 10 };
        if self.quick {
            10
        } else {
            self.seeds.unwrap_or(default)
        }
    }

    /// Small instances against the exact optimum (with --matrix or --sample).
    pub fn small(&self) -> u32 {
        self.small.unwrap_or(if self.matrix { 1000 } else { 200 })
    }

    /// The policies of `--policies`, and their labels.
    pub fn specs(&self) -> Result<(Vec<PolicySpec>, Vec<String>), String> {
        let specs = parse_policies("--policies", self.policies.as_deref())?;
        let labels = specs.iter().map(experiments::label).collect();
        Ok((specs, labels))
    }
}

/// Runs the settings above (not --matrix or --sample, which `matrix.rs` and `sample.rs` run).
pub fn run(args: &PoliciesArgs) -> Result<(), String> {
    let (specs, labels) = args.specs()?;
    crate::report::out_dir(&args.out)?;
    let settings = Settings {
        seeds: args.seeds(),
        base_seed: args.seed,
        ..Settings::default()
    };
    experiments::check(&settings, &CAPS)?;
    let out = args.out.as_path();

    let adaptive = specs.iter().any(|s| s.name() == "paper-adaptive");
    let pool = Pool::new(
        args.threads,
        PolicySettings::runs(&settings, adaptive),
        "policies",
    );
    let runs = PolicySettings::run(&settings, &specs, adaptive, &pool);
    pool.finish();
    let sims = [
        ("paper", runs.paper),
        ("bursty", runs.bursty),
        ("hetero", runs.hetero),
    ];
    let mut sections: Vec<Section> = (sims.into_iter())
        .map(|(setting, rows)| Section {
            setting,
            source: "sim",
            runs: settings.seeds as usize,
            rows,
        })
        .collect();

    if adaptive {
        print_adaptive(&runs.adaptive, &settings, out)?;
        println!();
    }
    println!(
        "Policies on the simulator: mean makespan over {} seeds (from seed {}), std over the seeds, and the distance",
        settings.seeds, settings.base_seed
    );
    println!("from the lower bound (mean makespan / mean lower bound; 1 would be optimal).\n");
    let titles = [
        "paper: the paper's settings (t in [16,36], CAP 32, load 1.5)".to_owned(),
        format!(
            "bursty: t in [16,36], CAP 32, bursts of ~{BURST_PACKETS} packets at {:.1}x capacity, on {}, mean load {BURST_LOAD}",
            BURST_LOAD / BURST_DUTY,
            pct(BURST_DUTY)
        ),
        "hetero: 4 nodes, unit times 16, 24, 32, 48 (1 : 1.5 : 2 : 3), CAP 32, load 1.5".to_owned(),
    ];
    for (section, title) in sections.iter().zip(&titles) {
        print_section(section, title);
    }

    if !args.no_live {
        let live_args = LiveArgs::quick(Workload::Hetero);
        eprintln!(
            "live: the hetero workload under {} policies, {} rounds...",
            specs.len(),
            live_args.reps
        );
        let rows = live::measure(&live_args, &crate::hetero::hetero(&live_args)?, &specs)?;
        let section = Section {
            setting: "live-hetero",
            source: "live",
            runs: live_args.reps,
            rows: (rows.iter().zip(&labels))
                .map(|(r, l)| {
                    let ms = r.makespan.as_secs_f64() * 1e3;
                    CompareRow {
                        sweep: String::new(),
                        nodes: r.nodes,
                        packets: 0,
                        policy: l.clone(),
                        makespan: Stats { mean: ms, std: 0.0 },
                        // Same bytes on both sides: makespan ratio = throughput ratio.
                        lower_bound: ms * r.throughput / r.reference,
                    }
                })
                .collect(),
        };
        print_section(
            &section,
            "live-hetero: the real service, AES nodes slowed 1x 1.5x 2x 3x; makespan in ms, against the primitives called directly (greedy, same slowdowns)",
        );
        sections.push(section);
    }

    let mut csv = Csv::new(CSV_HEADER);
    for s in &sections {
        for r in &s.rows {
            csv.row(&[
                s.setting.to_owned(),
                s.source.to_owned(),
                r.nodes.to_string(),
                r.packets.to_string(),
                r.policy.clone(),
                s.runs.to_string(),
                f(r.makespan.mean, 3),
                if s.source == "sim" {
                    f(r.makespan.std, 3)
                } else {
                    String::new()
                },
                f(r.lower_bound, 3),
                f(r.ratio(), 4),
            ]);
        }
    }
    write_file(out, "policies.csv", csv.as_str())?;
    let svg = bars(
        "Policies: mean makespan / lower bound (sim) or / reference (live)",
        "makespan ratio (lower is better)",
        &labels,
        &sections,
    )?;
    write_file(out, "policies.svg", &svg)?;
    let mut files = vec!["policies.csv", "policies.svg"];
    if adaptive {
        files.extend(["policies_adaptive.csv", "policies_adaptive.svg"]);
    }
    println!("{}", wrote(out, &files));
    Ok(())
}

fn print_section(s: &Section, title: &str) {
    println!("{title}\n");
    let live = s.source == "live";
    let mut t = Table::with_columns(if live {
        "nodes,packets,policy,makespan ms,std,reference ms,makespan/reference"
    } else {
        "nodes,packets,policy,makespan,std,lower bound,makespan/bound"
    });
    for r in &s.rows {
        let packets = if live {
            "-".into()
        } else {
            r.packets.to_string()
        };
        t.row(vec![
            r.nodes.to_string(),
            packets,
            r.policy.clone(),
            f(r.makespan.mean, 1),
            if live {
                "-".into()
            } else {
                f(r.makespan.std, 1)
            },
            f(r.lower_bound, 1),
            f(r.ratio(), 3),
        ]);
    }
    print!("{}", t.render());
    println!();
}

fn print_adaptive(rows: &[AdaptiveRow], settings: &Settings, out: &Path) -> Result<(), String> {
    println!(
        "paper-adaptive against the best fixed alpha (experiment 1: {EXP1_PACKETS} packets, 4 nodes, load 1.5, {} seeds from seed {})",
        settings.seeds, settings.base_seed
    );
    println!(
        "'best alpha': the alpha of 0, 0.05, ..., 1 with the least mean makespan on these same instances (chosen after the fact);"
    );
    println!(
        "'diff': adaptive minus best alpha, per seed, mean +- its standard error; 'per-seed best': every instance's own best alpha."
    );
    let last = settings.base_seed + u64::from(settings.seeds.max(1)) - 1;
    if settings.base_seed <= TUNING_SEEDS.1 && last >= TUNING_SEEDS.0 {
        println!(
            "NOTE: these seeds overlap seeds {}-{}, on which paper-adaptive's rule was tuned: this is not a test.\n",
            TUNING_SEEDS.0, TUNING_SEEDS.1
        );
    } else {
        println!(
            "paper-adaptive's rule was tuned on seeds {}-{}, none of which is used here.\n",
            TUNING_SEEDS.0, TUNING_SEEDS.1
        );
    }
    let mut t = Table::with_columns(
        "nodes,CAP,best alpha,makespan,adaptive,adaptive/best,diff +- se,per-seed best,mean alpha used",
    );
    let mut csv = Csv::new(ADAPTIVE_CSV_HEADER);
    let n = f64::from(settings.seeds.max(1));
    for r in rows {
        t.row(vec![
            r.nodes.clone(),
            r.cap.to_string(),
            f(r.best_alpha, 2),
            f(r.best.mean, 1),
            f(r.adaptive.mean, 1),
            f(r.ratio(), 3),
            format!("{:+.1} +- {:.1}", r.diff.mean, r.diff.std / n.sqrt()),
            f(r.per_seed_best, 1),
            f(r.mean_alpha, 2),
        ]);
        csv.row(&[
            r.nodes.replace(',', ";"),
            r.cap.to_string(),
            settings.seeds.to_string(),
            settings.base_seed.to_string(),
            f(r.best_alpha, 2),
            f(r.best.mean, 3),
            f(r.best.std, 3),
            f(r.adaptive.mean, 3),
            f(r.adaptive.std, 3),
            f(r.ratio(), 4),
            f(r.diff.mean, 3),
            f(r.diff.std, 3),
            f(r.per_seed_best, 3),
            f(r.mean_alpha, 4),
        ]);
    }
    print!("{}", t.render());
    let (within, geo) = AdaptiveRow::summary(rows);
    println!(
        "\nwithin 1% of the best fixed alpha (or better) on {within} of {} settings; geometric mean of adaptive/best {geo:.3}",
        rows.len()
    );
    write_file(out, "policies_adaptive.csv", csv.as_str())?;
    let mut labels: Vec<&str> = rows.iter().map(|r| r.nodes.as_str()).collect();
    labels.dedup();
    Chart {
        title: "paper-adaptive: makespan / best fixed alpha's, against CAP",
        x: "node capacity CAP",
        y: "makespan ratio (below 1: adaptive wins)",
        series: labels
            .iter()
            .map(|&l| {
                Series::of(l, rows, |r| {
                    (r.nodes == l).then(|| (r.cap as f64, r.ratio()))
                })
            })
            .collect(),
    }
    .write(out, "policies_adaptive.svg")?;
    Ok(())
}

/// A horizontal grouped bar chart, as SVG text: one group per policy, one bar per setting (the
/// mean ratio over the setting's points).
fn bars(
    title: &str,
    x_desc: &str,
    labels: &[String],
    sections: &[Section],
) -> Result<String, String> {
    let values: Vec<Vec<f64>> = (sections.iter())
        .map(|s| {
            labels
                .iter()
                .map(|l| CompareRow::mean_ratio(&s.rows, l))
                .collect()
        })
        .collect();
    let n = labels.len().max(1);
    let groups = sections.len().max(1);
    // Ratios are about 1 and above: the axis starts just below the smallest, so the bars show
    // the differences.
    let finite = || values.iter().flatten().copied().filter(|v| v.is_finite());
    let x1 = finite().fold(1.0f64, f64::max) * 1.02;
    let x0 = (finite().fold(1.0f64, f64::min) - 0.05).max(0.0);
    let height = (90 + 26 * n * groups.min(4) / 2).max(400) as u32;
    svg(title, (900, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(120)
            .build_cartesian_2d(x0..x1, 0.0..n as f64)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_labels(0)
            .disable_y_mesh()
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        let slot = 0.8 / groups as f64;
        for (g, s) in sections.iter().enumerate() {
            let color = COLORS[g % COLORS.len()];
            chart
                .draw_series(values[g].iter().enumerate().map(|(i, &v)| {
                    // Policy 0 at the top.
                    let top = (n - i) as f64 - 0.1 - g as f64 * slot;
                    Rectangle::new([(x0, top - slot), (v.max(x0), top)], color.filled())
                }))?
                .label(s.setting)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        let style = TextStyle::from(("sans-serif", 14).into_font())
            .pos(Pos::new(HPos::Right, VPos::Center));
        for (i, l) in labels.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(x0, (n - i) as f64 - 0.5));
            root.draw(&Text::new(l.clone(), (x - 8, y), style.clone()))?;
        }
        Ok(())
    })
}
