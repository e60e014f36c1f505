//! The sampled workload space (`sim::space`, docs/ALGORITHM.md §11.15): a sample is
//! determined by its seed, covers every dimension the space names, and its traces are valid
//! and offer the load they claim.

use std::collections::HashSet;

use cryptodispatch::packet::Cmd;
use cryptodispatch::sched::Affinity;
use cryptodispatch::sim::space::{
    EARLIER_HELD_OUT_SEED, HELD_OUT_SEED, PacketLengths, SECOND_HELD_OUT_SEED, SpaceConfig, Speeds,
    TUNING_SEED, sample,
};
use cryptodispatch::sim::{Trace, simulate};

#[test]
fn a_sample_is_determined_by_its_seed_and_extends_a_smaller_one() {
    let a = sample(60, 9);
    assert_eq!(a, sample(60, 9));
    assert_eq!(&a[..20], &sample(20, 9)[..]);
    assert_ne!(a, sample(60, 10));
    assert_ne!(TUNING_SEED, HELD_OUT_SEED);
    assert_ne!(EARLIER_HELD_OUT_SEED, HELD_OUT_SEED);
    assert_ne!(SECOND_HELD_OUT_SEED, HELD_OUT_SEED);
    // The held-out sample shares no configuration with the tuning sample, nor with the
    // earlier held-out samples (studied since, or of the rule before, so tuning data too).
    let mut seen: HashSet<u64> = sample(1000, TUNING_SEED).iter().map(|c| c.seed).collect();
    for earlier in [EARLIER_HELD_OUT_SEED, SECOND_HELD_OUT_SEED] {
        let earlier: Vec<u64> = sample(1000, earlier).iter().map(|c| c.seed).collect();
        assert!(earlier.iter().all(|s| !seen.contains(s)));
        seen.extend(earlier);
    }
    assert!(
        sample(1000, HELD_OUT_SEED)
            .iter()
            .all(|c| !seen.contains(&c.seed))
    );
    for c in &a[..5] {
        assert_eq!(c.trace().records(), c.trace().records());
        assert_eq!(*c, SpaceConfig::draw(c.seed));
    }
}

#[test]
fn the_sample_covers_every_dimension() {
    let s = sample(400, TUNING_SEED);
    let speeds: HashSet<&str> = s.iter().map(|c| c.speeds.name()).collect();
    assert_eq!(speeds.len(), Speeds::ALL.len());
    let lengths: HashSet<&str> = s.iter().map(|c| c.lengths.kind()).collect();
    assert_eq!(lengths, HashSet::from(["constant", "short", "heavy"]));
    for flag in [true, false] {
        assert!(s.iter().any(|c| c.together == flag));
        assert!(s.iter().any(|c| c.bursts == flag));
        assert!(s.iter().any(|c| c.known_lengths == flag));
        assert!(s.iter().any(|c| (c.short_jobs > 0) == flag));
    }
    assert!(s.iter().any(|c| c.affinity == Affinity::Strict));
    assert!(s.iter().any(|c| c.affinity == Affinity::InFlight));
    let range = |f: &dyn Fn(&SpaceConfig) -> f64| {
        s.iter()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            })
    };
    let within = |(lo, hi): (f64, f64), (a, b): (f64, f64), (near_a, near_b): (f64, f64)| {
        lo >= a && hi <= b && lo <= near_a && hi >= near_b
    };
    assert!(within(range(&|c| c.load), (0.3, 5.0), (0.4, 4.0)));
    assert!(within(range(&|c| c.nodes as f64), (2.0, 32.0), (2.0, 28.0)));
    assert!(within(
        range(&|c| c.chains as f64),
        (1.0, 200.0),
        (2.0, 150.0)
    ));
    assert!(within(
        range(&|c| f64::from(c.chain_packets.0)),
        (2.0, 100.0),
        (2.0, 50.0)
    ));
    assert!(within(
        range(&|c| f64::from(c.chain_packets.1)),
        (2.0, 100.0),
        (10.0, 90.0)
    ));
    assert!(within(
        range(&|c| c.capacity as f64),
        (1.0, 256.0),
        (3.0, 200.0)
    ));
    for c in &s {
        assert!(c.chain_packets.0 <= c.chain_packets.1);
        // The capacity holds at least one packet of the longest length drawn.
        if let PacketLengths::Constant(l) = c.lengths {
            assert!((1..=4).contains(&l) && c.capacity >= l);
        }
        assert!(c.capacity >= 2 || matches!(c.lengths, PacketLengths::Constant(1)));
    }
}

#[test]
fn traces_are_valid_and_offer_the_load_they_claim() {
    let mut checked = 0;
    for c in sample(120, 5) {
        let t = c.trace();
        // Valid by the trace format's own rules.
        assert!(Trace::from_records(t.records().to_vec()).is_ok());
        let chain_tasks: HashSet<u64> = t
            .records()
            .iter()
            .filter(|r| r.dependent)
            .map(|r| r.task)
            .collect();
        assert_eq!(chain_tasks.len(), c.chains);
        for r in t.records() {
            assert!(r.length >= 1 && r.length <= c.capacity, "{}", c.describe());
            if r.dependent {
                assert_eq!(r.cmd, Cmd::Encrypt);
                assert!(r.seq < c.chain_packets.1);
            }
        }
        // Offered load: the work over the span of arrivals, against the nodes' speed. Spread
        // starts and bursts move the last arrival, so only a loose check, on larger traces.
        if t.len() >= 300 && !c.bursts {
            let work: u64 = t.records().iter().map(|r| r.length).sum();
            let rate: f64 = c.speeds.unit_times(c.nodes).iter().map(|u| 1.0 / u).sum();
            let last = t.records().last().unwrap().arrival;
            let offered = work as f64 / (rate * last);
            assert!(
                offered > 0.7 * c.load && offered < 1.4 * c.load,
                "offered {offered}, claimed {}: {}",
                c.load,
                c.describe()
            );
            checked += 1;
        }
        // Every policy the bench compares can run it.
        let r = simulate(&t, &c.sim_config(), &Default::default()).unwrap();
        assert_eq!(r.placements.len(), t.len());
    }
    assert!(checked >= 10, "only {checked} traces checked for load");
}
