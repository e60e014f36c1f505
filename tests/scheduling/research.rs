//! The research API's statistics and its cache of optima (`sim::research`): two policies
//! compared round by round, a policy's standing over a set of cases, optima kept in a file, and
//! the figures the reports derive (medians, labels, ratios to the lower bound, small instances
//! against their optimum, outcomes ranked).

use cryptodispatch::packet::UnitTimes;
use cryptodispatch::sched::PolicySpec;
use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::research::classes;
use cryptodispatch::sim::research::experiments::{
    AlphaRow, CompareRow, InTurn, Paired, Settings, Stats, compare, exp3_points, label, median,
    summary_points,
};
use cryptodispatch::sim::research::matrix::{
    OptimumCache, Outcome, Small, Standing, against_optimum, bound_against_optimum, sample_name,
    share_within, standings, worst_first,
};
use cryptodispatch::sim::space::{self, TUNING_SEED};

#[test]
fn paired_rounds_give_the_ratio_its_interval_and_the_wins() {
    // a is 10% slower in every round: the ratio is 1.1 exactly, with no spread.
    let p = Paired::of(&[11.0, 22.0, 33.0, 44.0], &[10.0, 20.0, 30.0, 40.0]).unwrap();
    assert!((p.mean - 1.1).abs() < 1e-9, "{p:?}");
    assert!((p.low - 1.1).abs() < 1e-9 && (p.high - 1.1).abs() < 1e-9);
    assert_eq!((p.wins, p.rounds), (0, 4));
    // Half the rounds each way by the same factor: a ratio of 1 and an interval around it.
    let p = Paired::of(&[10.0, 12.0, 10.0, 12.0], &[12.0, 10.0, 12.0, 10.0]).unwrap();
    assert!((p.mean - 1.0).abs() < 1e-9, "{p:?}");
    assert!(p.low < 1.0 && p.high > 1.0);
    assert_eq!(p.wins, 2);
    // Too few rounds to estimate a spread.
    assert_eq!(Paired::of(&[1.0, 2.0], &[2.0, 1.0]), None);
}

#[test]
fn a_standing_counts_the_cases_near_the_best() {
    // (makespan, best, bound): the best, 4% over, 8% over, twice the best.
    let cases = [
        (10.0, 10.0, 5.0),
        (10.4, 10.0, 5.2),
        (10.8, 10.0, 5.4),
        (20.0, 10.0, 10.0),
    ];
    let s = Standing::of(cases.iter().copied());
    assert_eq!((s.best, s.within_5, s.within_10), (1, 2, 3));
    assert!((s.worst - 2.0).abs() < 1e-12);
    assert!((s.geo_bound - 2.0).abs() < 1e-12);
    let geo = (1.0f64 * 1.04 * 1.08 * 2.0).powf(0.25);
    assert!((s.geo_best - geo).abs() < 1e-12, "{s:?}");
}

#[test]
fn the_cache_of_optima_reads_back_what_it_wrote() {
    let dir = std::env::temp_dir().join(format!("cryptodispatch-optima-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("optima.csv");
    // A file that is not there is an empty cache.
    let mut cache = OptimumCache::read(&path).unwrap();
    let (nodes, trace) = classes::small(7);
    assert_eq!(cache.get(&nodes, &trace), None);
    cache.insert(&nodes, &trace, 1.0 / 3.0);
    cache.write(&path).unwrap();
    let back = OptimumCache::read(&path).unwrap();
    assert_eq!(back.get(&nodes, &trace), Some(1.0 / 3.0));
    // Another instance misses it.
    let other = vec![NodeModel::new(UnitTimes::uniform(16.0), 32)];
    assert_eq!(back.get(&other, &trace), None);
    // A line that is not key,optimum is refused, naming the line.
    std::fs::write(&path, "abc,1.5\nnot a line\n").unwrap();
    let err = OptimumCache::read(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("line 2"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_reports_helpers_give_medians_labels_points_and_the_least() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    let paper: PolicySpec = "paper".parse().unwrap();
    assert_eq!(label(&paper), "paper");
    let tuned: PolicySpec = "paper:alpha=0.5,beta=0.5".parse().unwrap();
    assert_eq!(label(&tuned), "paper:alpha=0.5;beta=0.5");
    let points = summary_points();
    assert_eq!(points.len(), 4);
    assert!(exp3_points().iter().all(|&(n, _)| n == 4 || n == 10));
    let row = |alpha, mean| AlphaRow {
        alpha,
        makespan: Stats { mean, std: 0.0 },
        packet_share: Vec::new(),
        busy_share: Vec::new(),
    };
    // The least mean makespan, the first of equals.
    let rows = [row(0.0, 12.0), row(0.05, 10.0), row(0.1, 10.0)];
    assert_eq!(AlphaRow::least(&rows).map(|r| r.alpha), Some(0.05));
    assert!(AlphaRow::least(&[]).is_none());
}

#[test]
fn small_instances_are_summed_up_against_their_optimum() {
    let small = |seed, optimum, bound, known: [f64; 2], unknown: [f64; 2]| Small {
        seed,
        nodes: 2,
        packets: 6,
        optimum,
        bound,
        known: known.to_vec(),
        unknown: unknown.to_vec(),
    };
    let all = [
        small(1, 10.0, 9.0, [10.0, 12.0], [11.0, 15.0]),
        small(2, 20.0, 20.0, [22.0, 20.0], [20.0, 30.0]),
    ];
    let per_policy = against_optimum(&all);
    assert_eq!(per_policy.len(), 2);
    // Policy 0: known 1.0 and 1.1, unknown 1.1 and 1.0.
    let [(known_mean, known_worst), (unknown_mean, unknown_worst)] = per_policy[0];
    assert!((known_mean - 1.05).abs() < 1e-12 && (known_worst - 1.1).abs() < 1e-12);
    assert!((unknown_mean - 1.05).abs() < 1e-12 && (unknown_worst - 1.1).abs() < 1e-12);
    let (over, mean) = bound_against_optimum(&all);
    assert_eq!(over, 0);
    assert!((mean - 0.95).abs() < 1e-12);
}

#[test]
fn outcomes_rank_the_policies_and_the_worst_cases() {
    let config = space::sample(1, TUNING_SEED).remove(0);
    let outcome = |makespan: Vec<f64>| Outcome {
        config: config.clone(),
        packets: 10,
        bound: 5.0,
        makespan,
    };
    let outcomes = [
        outcome(vec![10.0, 11.0]),
        outcome(vec![12.0, 10.0]),
        outcome(vec![10.0, 10.0]),
    ];
    // Policy 0 is 1.0, 1.2 and 1.0 times the best; policy 1, 1.1, 1.0 and 1.0.
    assert_eq!(worst_first(&outcomes, 0), vec![1, 0, 2]);
    assert!((share_within(&outcomes, 0, 1.0) - 2.0 / 3.0).abs() < 1e-12);
    assert!((share_within(&outcomes, 1, 1.1) - 1.0).abs() < 1e-12);
    let refs: Vec<&Outcome> = outcomes.iter().collect();
    let order: Vec<usize> = standings(&refs, 2).iter().map(|&(p, _)| p).collect();
    assert_eq!(order, vec![1, 0]);
    assert_eq!(sample_name(TUNING_SEED), "the tuning sample");
}

#[test]
fn compared_rows_are_labelled_and_give_their_ratio_to_the_bound() {
    let row = |policy: &str, mean: f64| CompareRow {
        sweep: "4 nodes".to_owned(),
        nodes: 4,
        packets: 100,
        policy: policy.to_owned(),
        makespan: Stats { mean, std: 0.0 },
        lower_bound: 100.0,
    };
    assert!((row("paper", 125.0).ratio() - 1.25).abs() < 1e-12);
    let rows = [row("paper", 120.0), row("mct", 150.0), row("paper", 140.0)];
    assert!((CompareRow::mean_ratio(&rows, "paper") - 1.3).abs() < 1e-12);
    // A policy with parameters of its own is named by its full spelling, commas as `;`.
    let settings = Settings {
        seeds: 1,
        ..Settings::default()
    };
    let specs = [PolicySpec::paper_defaults(), PolicySpec::paper(0.5, 0.5)];
    let points = [("4 nodes".to_owned(), 4, 20)];
    let rows = compare(&settings, &points, &specs, &InTurn);
    let names: Vec<&str> = rows.iter().map(|r| r.policy.as_str()).collect();
    assert_eq!(names, ["paper".to_owned(), label(&specs[1])]);
    assert!(names[1].starts_with("paper:") && !names[1].contains(','));
    assert!(rows.iter().all(|r| r.ratio() >= 1.0 - 1e-9));
}
