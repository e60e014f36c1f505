//! `cryptodispatch-bench live`: every workload runs, small, and checks every output of the
//! service against the primitives called directly (a mismatch fails the run); the stream
//! workload's packet size is the caller's to set, and a packet or job size the service cannot
//! cut by, a count of zero and jobs larger than the memory are refused by name. `openssl` is kept off the bench's PATH, so no baseline runs here.

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cryptodispatch-bench"))
        .args(args)
        .env("PATH", "")
        .output()
        .expect("run cryptodispatch-bench")
}

/// The bench's standard error for `args`, after checking that it failed.
fn refused(args: &[&str]) -> String {
    let out = bench(args);
    assert!(!out.status.success(), "{args:?} ran");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The bench's standard output for `args`, after checking that it succeeded.
fn stdout_of(args: &[&str]) -> String {
    let out = bench(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn every_live_workload_runs_and_checks_its_outputs() {
    let small: &[&[&str]] = &[
        &["--workload", "cbc16k", "--jobs", "16"],
        &["--workload", "mixed", "--jobs", "300", "--compare"],
        &["--workload", "hetero", "--jobs", "12", "--size", "16384"],
        &["--workload", "hetero-chains", "--size", "1024"],
        &["--workload", "many-chains", "--size", "1024"],
        &["--workload", "gcm", "--jobs", "16", "--size", "4096"],
        &[
            "--workload",
            "manycbc",
            "--jobs",
            "64",
            "--size",
            "4096",
            "--mode",
            "ofb",
        ],
        &[
            "--workload",
            "manycbc",
            "--jobs",
            "32",
            "--size",
            "4096",
            "--implementation",
            "lanes-16",
        ],
        &["--workload", "parallel", "--jobs", "32", "--mode", "ctr"],
        &[
            "--workload",
            "parallel",
            "--jobs",
            "8",
            "--mode",
            "cbc",
            "--size",
            "65536",
        ],
        &["--workload", "verify", "--jobs", "64", "--bad-share", "0.1"],
        &["--workload", "tiny", "--jobs", "256"],
        &["--workload", "padded", "--jobs", "4", "--size", "65536"],
        &["--workload", "hol", "--size", "1048576"],
    ];
    for args in small {
        let mut all = vec!["live", "--reps", "1", "--csv"];
        all.extend_from_slice(args);
        let out = bench(&all);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.lines().count() >= 2,
            "{args:?}: a header and rows: {text}"
        );
    }
}

#[test]
fn one_stream_runs_in_the_packets_asked_for() {
    for packet in ["65536", "4096"] {
        let text = stdout_of(&[
            "live",
            "--workload",
            "stream",
            "--packet",
            packet,
            "--size",
            "262144",
            "--reps",
            "1",
            "--csv",
        ]);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(
                "workload,run,size,packet,service_mb_s,reference_mb_s,openssl_mb_s,vs_reference,vs_openssl"
            )
        );
        let row: Vec<&str> = lines.next().expect("one row").split(',').collect();
        assert_eq!(&row[..4], &["stream", "0", "262144", packet]);
        let service: f64 = row[4].parse().unwrap();
        assert!(service > 0.0, "{row:?}");
        assert_eq!(lines.next(), None);
    }
}

#[test]
fn a_mode_a_workload_does_not_run_is_refused() {
    for (workload, mode, modes) in [
        ("parallel", "ofb", "ctr, ecb, cbc"),
        ("manycbc", "ctr", "cbc, ofb, cfb"),
    ] {
        let err = refused(&["live", "--workload", workload, "--mode", mode]);
        let want = format!("{workload}: --mode {mode} must be one of {modes}");
        assert!(err.contains(&want), "{err}");
    }
}

#[test]
fn a_packet_size_that_is_not_whole_blocks_is_refused() {
    for packet in ["100", "0"] {
        let err = refused(&["live", "--workload", "stream", "--packet", packet]);
        assert!(
            err.contains(&format!(
                "--packet {packet}: stream needs a positive multiple of 16"
            )),
            "{err}"
        );
    }
}

#[test]
fn a_packet_size_the_service_would_refuse_is_refused_by_every_workload() {
    // Refused before any job is made: 0 once divided the reference's job into packets.
    let too_large = (16usize << 20) + 16;
    let too_large = too_large.to_string();
    let workloads = [
        "cbc16k",
        "mixed",
        "hetero",
        "hetero-chains",
        "many-chains",
        "verify",
        "hol",
        "tiny",
        "manycbc",
        "gcm",
        "parallel",
        "padded",
        "stream",
        "tenants",
        "tenant-mix",
    ];
    for workload in workloads {
        for packet in ["0", "100", too_large.as_str()] {
            let args = [
                "live",
                "--workload",
                workload,
                "--reps",
                "1",
                "--jobs",
                "2",
                "--size",
                "4096",
                "--packet",
                packet,
            ];
            let err = refused(&args);
            let want = format!("--packet {packet}: {workload} needs a positive multiple of 16");
            assert!(err.contains(&want), "{workload}: {err}");
            assert!(err.contains("at most 16777216"), "{workload}: {err}");
            assert!(!err.contains("panicked"), "{workload}: {err}");
        }
    }
}

/// Thread and round counts past their bounds are refused at once, by name: 100000 submitting
/// threads failed to spawn, a panic, and then hung in the scope.
#[test]
fn thread_and_round_counts_past_their_bounds_are_refused() {
    for (flag, value, want) in [
        ("--threads", "100000", "at most 1024 threads"),
        ("--nodes", "1025", "at most 1024 threads"),
        ("--threads", "0", "must be at least 1"),
        ("--reps", "4000000000", "at most 1000 rounds"),
    ] {
        let err = refused(&[
            "live",
            "--workload",
            "cbc16k",
            "--jobs",
            "2",
            "--size",
            "4096",
            flag,
            value,
        ]);
        assert!(
            err.contains(flag) && err.contains(want),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{flag} {value}: {err}");
    }
}

#[test]
fn a_job_size_that_is_not_whole_blocks_is_refused_by_every_workload_that_takes_one() {
    for workload in ["tenants", "hol", "gcm", "padded", "stream"] {
        for size in ["0", "100"] {
            let err = refused(&["live", "--workload", workload, "--size", size]);
            let want = format!("--size {size}: {workload} needs a positive multiple of 16");
            assert!(err.contains(&want), "{workload}: {err}");
        }
    }
}

#[test]
fn a_count_of_zero_is_refused() {
    for flag in ["--jobs", "--nodes", "--threads", "--reps", "--burst"] {
        let err = refused(&["live", "--workload", "tiny", flag, "0"]);
        assert!(err.contains("must be at least 1"), "{flag}: {err}");
    }
}

#[test]
fn jobs_larger_than_memory_are_refused_before_they_are_made() {
    // 2^50 bytes: no machine this runs on has that much memory, and making the jobs first would
    // abort the process rather than fail with a message.
    let huge = (1u64 << 50).to_string();
    for args in [
        &["live", "--workload", "gcm", "--size", &huge][..],
        &["live", "--workload", "stream", "--size", &huge],
        &["live", "--workload", "tenants", "--size", &huge],
        &["live", "--workload", "many-chains", "--size", &huge],
        &["live", "--workload", "cbc16k", "--jobs", "1000000000000"],
    ] {
        let err = refused(args);
        assert!(err.contains("GiB of memory"), "{args:?}: {err}");
        assert!(err.contains("lower --size or --jobs"), "{args:?}: {err}");
    }
}

#[test]
fn the_tenants_workload_prints_a_row_per_tenant_and_loses_nothing() {
    let text = stdout_of(&["live", "--workload", "tenants", "--csv", "--size", "4096"]);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "scenario,tenant,weight,offered_mb_s,throughput_mb_s,share,p99_latency_us,p99_alone_us,lost"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let names: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        names,
        [
            ("isolation", "quiet"),
            ("isolation", "noisy"),
            ("shares", "light"),
            ("shares", "heavy")
        ]
    );
    for r in &rows {
        assert_eq!(r.len(), 9, "{r:?}");
        assert_eq!(r[8], "0", "jobs lost: {r:?}");
        let share: f64 = r[5].parse().unwrap();
        assert!((0.0..=1.0).contains(&share), "{r:?}");
    }
    // The quiet tenant's row carries its p99 alone; the shares of a scenario add up to 1.
    assert!(!rows[0][7].is_empty());
    let sum: f64 = rows[2][5].parse::<f64>().unwrap() + rows[3][5].parse::<f64>().unwrap();
    assert!((sum - 1.0).abs() < 1e-3);
}

#[test]
fn the_tenant_mix_workload_prints_a_row_per_configuration_with_the_clients_lateness() {
    let text = stdout_of(&["live", "--workload", "tenant-mix", "--reps", "1", "--csv"]);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 1, "{text}");
    let row = &rows[0];
    assert_eq!(row.len(), header.len(), "{header:?} {row:?}");
    let field = |name: &str| {
        let i = header.iter().position(|h| *h == name).expect(name);
        row[i]
    };
    assert_eq!(field("lost"), "0", "{row:?}");
    for name in ["p99_alone_us", "p99_beside_us", "ratio"] {
        let v: f64 = field(name).parse().expect(name);
        assert!(v > 0.0, "{name}: {row:?}");
    }
    // How late the quiet client submitted, alone and beside: a duration, never negative.
    for name in ["late_p99_alone_us", "late_p99_beside_us"] {
        let v: f64 = field(name).parse().expect(name);
        assert!(v >= 0.0, "{name}: {row:?}");
    }
}

#[test]
fn the_tenants_workload_shares_between_any_weights() {
    let args = [
        "live",
        "--workload",
        "tenants",
        "--size",
        "4096",
        "--weights",
        "1:2:5",
    ];
    let text = stdout_of(&args);
    // The table's rows: scenario, tenant, weight, offered, throughput, share, p99, [p99
    // alone,] lost.
    let rows: Vec<Vec<&str>> = (text.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|r| {
            r.len() >= 8 && (r[0] == "shares" || r[0] == "isolation") && r[2].parse::<u32>().is_ok()
        })
        .collect();
    let shares: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == "shares").collect();
    let named: Vec<(&str, &str)> = shares.iter().map(|r| (r[1], r[2])).collect();
    assert_eq!(named, [("t1", "1"), ("t2", "2"), ("t3", "5")]);
    let sum: f64 = shares.iter().map(|r| r[5].parse::<f64>().unwrap()).sum();
    assert!((sum - 1.0).abs() < 1e-3, "{sum}");
    assert!(
        rows.iter().all(|r| r.last() == Some(&"0")),
        "jobs lost: {rows:?}"
    );
    // The text names every tenant with its target (its weight's share of 8).
    for (name, target) in [("t1", "0.125"), ("t2", "0.250"), ("t3", "0.625")] {
        let said = format!("{name} (weight");
        assert!(text.contains(&said), "{text}");
        assert!(text.contains(&format!("target {target},")), "{text}");
    }
    assert!(text.contains("shares: t3 (weight 5)"), "{text}");
    // Counted from when every tenant was backlogged, which the line says.
    assert!(text.contains("shares of every tenant from "), "{text}");
}

#[test]
fn the_verify_workloads_csv_has_a_cell_under_every_column() {
    let text = stdout_of(&["live", "--workload", "verify", "--jobs", "64", "--csv"]);
    let mut lines = text.lines();
    let columns = lines.next().unwrap().split(',').count();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row.split(',').count(), columns, "{row}");
    }
}
