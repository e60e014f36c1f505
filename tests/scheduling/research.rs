//! The research API's statistics and its cache of optima (`sim::research`): two policies
//! compared round by round, a policy's standing over a set of cases, and optima kept in a file.

use cryptodispatch::packet::UnitTimes;
use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::research::classes;
use cryptodispatch::sim::research::experiments::Paired;
use cryptodispatch::sim::research::matrix::{OptimumCache, Standing};

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
