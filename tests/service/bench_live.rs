//! `cryptodispatch-bench live`: every workload runs, small, and checks every output of the
//! service against the primitives called directly (a mismatch fails the run); the stream
//! workload's packet size is the caller's to set, and a packet size the service cannot cut by
//! is refused by name. `openssl` is kept off the bench's PATH, so no baseline runs here.

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cryptodispatch-bench"))
        .args(args)
        .env("PATH", "")
        .output()
        .expect("run cryptodispatch-bench")
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
        let out = bench(&[
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
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
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
fn a_packet_size_that_is_not_whole_blocks_is_refused() {
    for packet in ["100", "0"] {
        let out = bench(&["live", "--workload", "stream", "--packet", packet]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "--packet {packet}: stream needs a positive multiple of 16"
            )),
            "{err}"
        );
    }
}
