//! The `cryptodispatch` CLI with `--remote`: the same commands run by a daemon give the same
//! bytes as run locally (AES through a single call for small inputs and through the Stream
//! call past 1 MiB; Ed25519 signing and verification with the daemon's key), and the daemon's
//! refusals become the CLI's usage errors.
#![cfg(feature = "daemon")]

use crate::daemon_support;

use std::path::Path;
use std::process::{Command, Output};

use daemon_support::*;

const CLI: &str = env!("CARGO_BIN_EXE_cryptodispatch");
const IV_HEX: &str = "000102030405060708090a0b0c0d0e0f";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn cli(args: &[&str]) -> Output {
    Command::new(CLI)
        .args(args)
        .output()
        .expect("run cryptodispatch")
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn remote_commands_give_the_local_bytes() {
    let f = Fixture::new("cli");
    let d = Daemon::start(&f.args());
    let url = d.url();
    let tokens = f.tokens.display().to_string();
    let remote = |cmd: &str, key: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            cmd,
            "--remote",
            &url,
            "-keyname",
            key,
            "--token-file",
            &tokens,
        ]
        .map(String::from)
        .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| cli(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let path = |name: &str| f.dir.path(name).display().to_string();

    for (alg, key_name, key) in [
        ("aes-128-cbc", "k128", &K128[..]),
        ("aes-192-ofb", "k192", &K192[..]),
        ("aes-256-ecb", "k256", &K256[..]),
        ("aes-256-cfb", "k256", &K256[..]),
    ] {
        // 100 kB goes in one call; 2.5 MB through a stream.
        for (i, len) in [0usize, 100_000, 2_500_000].into_iter().enumerate() {
            let plain = f
                .dir
                .write(&format!("plain-{alg}-{i}"), &bytes(len, i as u64), 0o600);
            let plain = plain.display().to_string();
            let iv: &[&str] = if alg.ends_with("ecb") {
                &[]
            } else {
                &["-iv", IV_HEX]
            };
            let local_out = path(&format!("local-{alg}-{i}"));
            let mut local = vec!["enc", "-alg", alg, "-in", &plain, "-out", &local_out];
            let key_hex = hex(key);
            local.extend(["-K", &key_hex]);
            local.extend(iv);
            ok(cli(&local));
            let remote_out = path(&format!("remote-{alg}-{i}"));
            let mut args = remote(
                "enc",
                key_name,
                &["-alg", alg, "-in", &plain, "-out", &remote_out],
            );
            args.extend(iv.iter().map(|s| s.to_string()));
            ok(run(args));
            let (a, b) = (
                std::fs::read(&local_out).unwrap(),
                std::fs::read(&remote_out).unwrap(),
            );
            assert!(a == b, "{alg} {len}: remote and local outputs differ");
            let back = path(&format!("back-{alg}-{i}"));
            let mut args = remote(
                "dec",
                key_name,
                &["-alg", alg, "-in", &remote_out, "-out", &back],
            );
            args.extend(iv.iter().map(|s| s.to_string()));
            ok(run(args));
            assert!(std::fs::read(&back).unwrap() == std::fs::read(&plain).unwrap());
        }
    }

    // Ed25519: the daemon's key signs as the seed does locally; verification both ways.
    let msg = f
        .dir
        .write("msg", b"a message for the daemon", 0o600)
        .display()
        .to_string();
    let seed = f.dir.write("seed", &SEED, 0o600).display().to_string();
    let local_sig = path("local.sig");
    ok(cli(&[
        "sign", "-key", &seed, "-in", &msg, "-out", &local_sig,
    ]));
    let remote_sig = path("remote.sig");
    ok(run(remote(
        "sign",
        "signer",
        &["-in", &msg, "-out", &remote_sig],
    )));
    assert_eq!(
        std::fs::read(&local_sig).unwrap(),
        std::fs::read(&remote_sig).unwrap()
    );
    let out = ok(run(remote(
        "verify",
        "signer",
        &["-sig", &remote_sig, "-in", &msg],
    )));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Signature Verified Successfully\n"
    );
    let out = run(remote(
        "verify",
        "other",
        &["-sig", &remote_sig, "-in", &msg],
    ));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Signature Verification Failure\n"
    );

    // Refusals: an unknown key is a usage error (2); a token without the key, or no token, is
    // an authentication or permission failure (1), without the usage hint.
    let plain = f.dir.write("small", b"hello", 0o600).display().to_string();
    let out = run(remote(
        "enc",
        "nokey",
        &["-alg", "aes-128-cbc", "-iv", IV_HEX, "-in", &plain],
    ));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("nokey"));
    let limited = f
        .dir
        .write("limited-token", format!("{LIMITED}\n").as_bytes(), 0o600);
    let limited = limited.display().to_string();
    let out = cli(&[
        "enc",
        "--remote",
        &url,
        "-keyname",
        "k256",
        "--token-file",
        &limited,
        "-alg",
        "aes-256-cbc",
        "-iv",
        IV_HEX,
        "-in",
        &plain,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("may not use") && !stderr.contains("--help"),
        "{stderr}"
    );
    let out = cli(&[
        "enc",
        "--remote",
        &url,
        "-keyname",
        "k128",
        "-alg",
        "aes-128-cbc",
        "-iv",
        IV_HEX,
        "-in",
        &plain,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("authorization") && !stderr.contains("--help"),
        "{stderr}"
    );
    // A token file that others may read is refused before any call (exit 1), naming its mode.
    for mode in [0o644, 0o640, 0o604] {
        let open = f
            .dir
            .write("open-token", format!("{ALL}\n").as_bytes(), mode);
        let open = open.display().to_string();
        let out = cli(&[
            "enc",
            "--remote",
            &url,
            "-keyname",
            "k128",
            "--token-file",
            &open,
            "-alg",
            "aes-128-cbc",
            "-iv",
            IV_HEX,
            "-in",
            &plain,
        ]);
        assert_eq!(out.status.code(), Some(1), "{mode:o}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("{mode:04o}")), "{stderr}");
        assert!(!stderr.contains(ALL), "{stderr}");
    }
    // A URL or TLS options that cannot work are usage errors (2), as other bad options are;
    // a daemon out of reach is a failure (1).
    let enc_at = |url: &str, extra: &[&str]| {
        let mut a = vec![
            "enc",
            "--remote",
            url,
            "-keyname",
            "k128",
            "-alg",
            "aes-128-cbc",
        ];
        a.extend(["-iv", IV_HEX, "-in", &plain]);
        a.extend(extra);
        let out = cli(&a);
        (a.join(" "), out)
    };
    let tokens_arg = f.tokens.display().to_string();
    for (at, extra, expect) in [
        ("ftp://127.0.0.1:1", &[][..], "must start with http://"),
        ("https://127.0.0.1:1", &[][..], "--cacert"),
        (
            &url,
            &["--cacert", &tokens_arg][..],
            "TLS files were given for a plaintext",
        ),
    ] {
        let (a, out) = enc_at(at, extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a}: {stderr}");
        assert!(stderr.contains(expect), "{a}: {stderr}");
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (a, out) = enc_at(&gone, &[]);
    assert_eq!(out.status.code(), Some(1), "{a}: {out:?}");
    // Bad padding on a remote decryption is the local run's failure (1), with no output file.
    let junk = f.dir.write("junk", &[7; 32], 0o600).display().to_string();
    let never = path("never");
    let out = run(remote(
        "dec",
        "k128",
        &[
            "-alg",
            "aes-128-cbc",
            "-iv",
            IV_HEX,
            "-in",
            &junk,
            "-out",
            &never,
        ],
    ));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad decrypt"));
    assert!(!Path::new(&never).exists());
    // -keyname without --remote, and -K with -keyname, are usage errors before any call.
    assert_eq!(
        cli(&["enc", "-alg", "aes-128-ecb", "-keyname", "k128"])
            .status
            .code(),
        Some(2)
    );
    let out = cli(&[
        "enc",
        "--remote",
        &url,
        "-keyname",
        "k128",
        "-K",
        "00",
        "-alg",
        "aes-128-ecb",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// A message past what the daemon's decoder takes (its `--max-request-bytes` and a margin for
/// the message's fields) is refused before the daemon sees the call: the CLI says so in the
/// daemon's terms (exit 1), not as a bare decoder error.
#[test]
fn a_request_past_the_daemons_limit_names_the_limit() {
    let f = Fixture::new("cli-limit");
    let mut args = f.args();
    args.extend(["--max-request-bytes", "1024"].map(String::from));
    let d = Daemon::start(&args);
    let url = d.url();
    let tokens = f.tokens.display().to_string();
    let msg = f.dir.write("big", &vec![7; 200_000], 0o600);
    let msg = msg.display().to_string();
    let out = cli(&[
        "sign",
        "--remote",
        &url,
        "-keyname",
        "signer",
        "--token-file",
        &tokens,
        "-in",
        &msg,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("larger than the daemon accepts") && stderr.contains("--max-request-bytes"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no signature: {:?}", out.stdout);
}

/// `cryptodispatch-scaleout` refuses an option out of its range before it starts anything,
/// naming that option (one message had listed every rule at once), where a huge count had
/// panicked or aborted on allocation and a slowdown the daemons refuse had waited 30 s for
/// them.
#[test]
fn scaleout_refuses_an_option_out_of_range_by_name() {
    for (flag, value) in [
        ("--jobs", "18446744073709551615"),
        ("--jobs", "0"),
        ("--concurrency", "1000000"),
        ("--job-bytes", "17"),
        ("--repeat", "0"),
        ("--slowdown", "NaN"),
        ("--slowdown", "0.5"),
        ("--min-call-ms", "NaN"),
        ("--packet-ms=-1", ""),
        ("--stress", "100000"),
        ("--quiet-load", "5"),
    ] {
        let mut a = vec!["--setups", "one", flag];
        if !value.is_empty() {
            a.push(value);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_cryptodispatch-scaleout"))
            .args(&a)
            .output()
            .expect("run cryptodispatch-scaleout");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = flag.split('=').next().unwrap();
        assert_eq!(out.status.code(), Some(1), "{a:?}: {stderr}");
        assert!(
            stderr.contains(name) && stderr.contains("must be"),
            "{a:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{a:?}: {stderr}");
    }
}
