//! `cryptodispatch-bench live --workload stream`: the packet size is the caller's to set, the
//! service's output is checked against the direct call's inside the bench (a mismatch fails
//! the run), and a packet size the service cannot cut by is refused by name.

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cryptodispatch-bench"))
        .args(args)
        .output()
        .expect("run cryptodispatch-bench")
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
