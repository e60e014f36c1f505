//! The benchmark binary's shared helpers, from its own files: the nearest-rank percentile,
//! policy lists, and the `openssl speed` baseline (its median and spread, and the summary line
//! it reads).

#[allow(dead_code)]
#[path = "../../src/bin/cryptodispatch-bench/openssl.rs"]
mod openssl;
#[allow(dead_code)]
#[path = "../../src/bin/cryptodispatch-bench/support.rs"]
mod support;

use cryptodispatch::PolicySpec;
use openssl::{Baseline, Speed, parse_summary};
use support::{parse_policies, percentile, split_policies};

#[test]
fn the_percentile_is_the_nearest_rank() {
    let hundred: Vec<u64> = (1..=100).collect();
    assert_eq!(percentile(&hundred, 0.99), 99);
    assert_eq!(percentile(&hundred, 1.0), 100);
    assert_eq!(percentile(&hundred, 0.5), 50);
    // A small sample's p99 is its largest value, not one past the end.
    assert_eq!(percentile(&[3u64, 7, 9], 0.99), 9);
    assert_eq!(percentile::<u64>(&[], 0.99), 0);
}

#[test]
fn a_policy_list_keeps_each_policys_parameters_together() {
    let parse = |list: &str| parse_policies("--policy", Some(list));
    // As a policy prints itself: its parameters comma-separated after the colon.
    assert_eq!(
        parse("paper:alpha=0.05,beta=0.95"),
        Ok(vec![PolicySpec::paper(0.05, 0.95)])
    );
    assert_eq!(
        parse("paper,mct,paper:alpha=0.1,beta=0.9"),
        Ok(vec![
            PolicySpec::paper_defaults(),
            PolicySpec::mct(),
            PolicySpec::paper(0.1, 0.9)
        ])
    );
    assert_eq!(
        parse(" paper:alpha=0.1 , beta=0.9 ,, hhs-acdid , p2c:seed=7"),
        Ok(vec![
            PolicySpec::paper(0.1, 0.9),
            PolicySpec::hhs_acdid(),
            PolicySpec::p2c(7)
        ])
    );
    // Every policy's printed name parses back to it, in a list of them all.
    let all = PolicySpec::all();
    let printed: Vec<String> = all.iter().map(ToString::to_string).collect();
    assert_eq!(parse(&printed.join(",")), Ok(all));
    assert_eq!(
        split_policies("paper:alpha=0.1,beta=0.9,mct").unwrap(),
        ["paper:alpha=0.1,beta=0.9", "mct"]
    );
}

#[test]
fn a_parameter_that_continues_no_policy_is_refused() {
    let err = parse_policies("--policies", Some("paper,beta=0.9")).unwrap_err();
    assert!(err.starts_with("--policies: "), "{err}");
    assert!(err.contains("paper:beta=0.9"), "{err}");
    let err = parse_policies("--policy", Some("beta=0.9,paper")).unwrap_err();
    assert!(err.contains("no policy before it"), "{err}");
    let err = parse_policies("--policy", Some("paper:alpha=0.1,gamma=1")).unwrap_err();
    assert!(err.contains("gamma"), "{err}");
}

#[test]
fn the_baseline_is_the_median_with_its_spread() {
    let speed = Speed {
        cipher: "aes-128-cbc",
        processes: 2,
        bytes: 16384,
        seconds: 1,
    };
    let mut b = Baseline::new(speed);
    assert_eq!((b.median(), b.range(), b.describe()), (None, None, None));
    for run in [1500.0, 900.0, 1400.0] {
        b.push(run);
    }
    assert_eq!(b.median(), Some(1400.0));
    assert_eq!(b.range(), Some((900.0, 1500.0)));
    b.push(1600.0);
    assert_eq!(b.median(), Some(1450.0));
    let line = b.describe().unwrap();
    assert!(line.contains("median 1450.0 MB/s of 4 runs"), "{line}");
    assert!(line.contains("900.0-1600.0"), "{line}");
}

#[test]
fn the_summary_line_is_read() {
    // openssl 3.0 with -multi 2 -bytes 16384.
    let text = "\
Forked child 0
+DT:AES-128-GCM:1:16384
+R:261816:AES-128-GCM:1.000000
Got: +H:16384 from 0
Got: +F:25:AES-128-GCM:4289593344.00 from 0
version: 3.0.19
The 'numbers' are in 1000s of bytes per second processed.
type          16384 bytes
AES-128-GCM    8389623.81k
";
    assert_eq!(parse_summary(text, "aes-128-gcm"), Some(8_389_623.81));
    assert_eq!(parse_summary(text, "aes-256-gcm"), None);
    assert_eq!(parse_summary("AES-128-GCM  n/a", "aes-128-gcm"), None);
}
