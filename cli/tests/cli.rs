//! The `cryptodispatch` command-line tool, run as a subprocess.
//!
//! - AES: for each of the 15 algorithms of `openssl enc` (ECB, CBC, OFB, CFB, CTR), `enc` and
//!   `dec`, with and without `-nopad` (for ECB and CBC; OFB and CFB ignore it, which is checked
//!   separately), on 0, 1,
//!   15, 16, 17 and 100000 bytes, the output equals `openssl enc`'s byte for byte (or, where
//!   `openssl` is not on PATH, the library's `AesKey::one_shot`, with a note on stderr), and
//!   decryption inverts encryption; lengths `-nopad` ECB/CBC cannot take are errors. The cases
//!   rotate through node counts, policies, packet sizes and option spellings; further tests
//!   push data across many small packets and across the tool's 64 KiB read chunks.
//! - CTR: the 128-bit counter wraps as openssl's does, across packets of several nodes.
//! - GCM (this tool's format, which openssl cannot read): the output decrypts with Python's
//!   `cryptography` package (`AESGCM`), and what it seals the CLI opens (skipped, with a note,
//!   where `python3` or the package is missing); round trips through the service; a changed
//!   tag, ciphertext, nonce or associated data, or a file not in the format, exits 1 and
//!   writes nothing; bad options exit 2.
//! - Ed25519: `sign` gives the signatures of `tests/vectors/ed25519/sign.input` (and of
//!   `openssl pkeyutl`), `verify` accepts them and rejects tampering with the exact messages.
//! - Files: `-in` and `-out` naming one file are refused and the file kept; a failed run leaves
//!   no output file, no temporary file, and an existing target as it was; a successful one
//!   replaces the target (keeping its mode, through a symbolic link); key and signature files
//!   of the wrong size are refused without being read whole (a sparse file of 1 TiB, an
//!   endless pipe).
//! - Errors: non-zero exit, a helpful message on stderr, never a panic.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use cryptodispatch::crypto::{AesKey, AesOp, Direction, Padding};
use cryptodispatch::packet::Mode;

const BIN: &str = env!("CARGO_BIN_EXE_cryptodispatch");
const LENGTHS: [usize; 6] = [0, 1, 15, 16, 17, 100_000];
const VERIFIED: &str = "Signature Verified Successfully\n";
const NOT_VERIFIED: &str = "Signature Verification Failure\n";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A scratch directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "cryptodispatch-cli-{}-{n}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `program` with `args`, feeding `stdin`.
fn run_program(program: &str, args: &[String], stdin: &[u8]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let mut child_stdin = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    // Feed stdin from a thread so a large input cannot deadlock against a full stdout pipe.
    let feeder = std::thread::spawn(move || {
        // The program may exit early (an error) and close its stdin; that is not a failure.
        let _ = child_stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

/// Runs the CLI.
fn cli(args: &[String], stdin: &[u8]) -> Output {
    let out = run_program(BIN, args, stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "the CLI panicked for {args:?}:\n{stderr}"
    );
    out
}

fn s(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts success and returns stdout.
fn ok(out: Output, what: &str) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\nstderr: {}",
        out.status.code(),
        stderr_of(&out)
    );
    out.stdout
}

/// Asserts the exit code and that stderr mentions every one of `needles`.
fn fails(out: &Output, code: i32, needles: &[&str], what: &str) {
    let stderr = stderr_of(out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: expected exit {code}\nstderr: {stderr}"
    );
    for needle in needles {
        assert!(
            stderr.to_lowercase().contains(&needle.to_lowercase()),
            "{what}: stderr lacks {needle:?}:\n{stderr}"
        );
    }
}

/// Whether `openssl` is on PATH (checked once).
fn openssl_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let found = Command::new("openssl")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            eprintln!(
                "note: `openssl` is not on PATH: the CLI's output is compared with the \
                 library's AesKey::one_shot instead, and the pkeyutl checks are skipped"
            );
        }
        found
    })
}

/// An AES algorithm of the test matrix.
#[derive(Clone, Copy, Debug)]
struct Alg {
    bits: usize,
    mode: Mode,
}

impl Alg {
    fn name(self) -> String {
        format!("aes-{}-{}", self.bits, self.mode)
    }

    fn key(self, seed: u64) -> Vec<u8> {
        bytes(self.bits / 8, seed ^ 0x4b)
    }
}

fn iv(seed: u64) -> Vec<u8> {
    bytes(16, seed ^ 0x1f)
}

/// The reference output: `openssl enc` if available, else `AesKey::one_shot`. `None` when the
/// reference refuses the input.
fn reference(
    alg: Alg,
    direction: Direction,
    key: &[u8],
    iv: &[u8],
    nopad: bool,
    data: &[u8],
) -> Option<Vec<u8>> {
    if openssl_available() {
        let mut args = s(&["enc", &format!("-{}", alg.name()), "-K", &hex(key)]);
        if alg.mode != Mode::Ecb {
            args.extend(s(&["-iv", &hex(iv)]));
        }
        if nopad {
            args.push("-nopad".into());
        }
        if direction == Direction::Decrypt {
            args.push("-d".into());
        }
        let out = run_program("openssl", &args, data);
        out.status.success().then_some(out.stdout)
    } else {
        let padding = if alg.mode.needs_whole_blocks() && !nopad {
            Padding::Pkcs7
        } else {
            Padding::None
        };
        let op = AesOp::new(direction, alg.mode).with_padding(padding);
        AesKey::new(key).unwrap().one_shot(op, iv, data).ok()
    }
}

/// Options that rotate over the matrix: node counts, policies, packet sizes (the default is
/// 16 KiB).
const SERVICE_OPTIONS: &[&[&str]] = &[
    &[],
    &["--nodes", "1"],
    &["--nodes", "2", "--policy", "hhs-acdid"],
    &["--nodes", "3", "--packet-size", "64"],
    &["--policy", "paper", "--packet-size", "32"],
    &[
        "--nodes",
        "3",
        "--policy",
        "hhs-acdid",
        "--packet-size",
        "48",
    ],
];

/// One CLI call of the matrix, spelled in one of several ways; input from stdin or `-in`,
/// output to stdout or `-out`.
struct Call<'a> {
    alg: Alg,
    direction: Direction,
    key: &'a [u8],
    iv: &'a [u8],
    nopad: bool,
    variant: usize,
}

impl Call<'_> {
    fn run(&self, data: &[u8], scratch: &Scratch) -> Output {
        let v = self.variant;
        let mut args = s(&[match self.direction {
            Direction::Encrypt => "enc",
            Direction::Decrypt => "dec",
        }]);
        let name = self.alg.name();
        match v % 3 {
            0 => args.extend(s(&["-alg", &name])),
            1 => args.push(format!("--alg={name}")),
            _ => args.push(format!("-{name}")),
        }
        let key = hex(self.key);
        match v % 2 {
            0 => args.extend(s(&["-K", &key])),
            _ => args.extend(s(&["--hex-key", &key])),
        }
        if self.alg.mode != Mode::Ecb {
            args.extend(s(&[if v % 2 == 0 { "-iv" } else { "--iv" }, &hex(self.iv)]));
        }
        if self.nopad {
            args.push(if v % 2 == 0 { "-nopad" } else { "--nopad" }.into());
        }
        args.extend(s(SERVICE_OPTIONS[v % SERVICE_OPTIONS.len()]));
        let files = v % 4 == 3;
        if !files {
            return cli(&args, data);
        }
        let input = scratch.file(&format!("in-{v}"), data);
        let output = scratch.path(&format!("out-{v}"));
        args.extend([
            "-in".into(),
            input.display().to_string(),
            "--out".into(),
            output.display().to_string(),
        ]);
        let mut out = cli(&args, b"");
        assert!(out.stdout.is_empty(), "-out given, yet output on stdout");
        if out.status.success() {
            out.stdout = std::fs::read(&output).unwrap();
        }
        out
    }
}

/// The whole matrix for one algorithm.
fn check_algorithm(bits: usize, mode: Mode) {
    let alg = Alg { bits, mode };
    let scratch = Scratch::new(&alg.name());
    let mut variant = bits / 64 + mode as usize;
    // -nopad applies to ECB and CBC; OFB and CFB ignore it (checked on its own below).
    let nopads: &[bool] = if mode.needs_whole_blocks() {
        &[false, true]
    } else {
        &[false]
    };
    for &nopad in nopads {
        for (i, &len) in LENGTHS.iter().enumerate() {
            variant += 1;
            let seed = (bits * 1000 + i * 10 + nopad as usize) as u64;
            let (key, iv) = (alg.key(seed), iv(seed));
            let data = bytes(len, seed);
            let what = format!("{} nopad={nopad} len={len} variant={variant}", alg.name());
            let call = |direction| Call {
                alg,
                direction,
                key: &key,
                iv: &iv,
                nopad,
                variant,
            };
            if nopad && mode.needs_whole_blocks() && len % 16 != 0 {
                // Not whole blocks: both directions refuse, as openssl does.
                for direction in [Direction::Encrypt, Direction::Decrypt] {
                    let out = call(direction).run(&data, &scratch);
                    fails(&out, 1, &["16-byte blocks"], &what);
                    assert!(
                        reference(alg, direction, &key, &iv, true, &data).is_none(),
                        "{what}: the reference accepted it"
                    );
                }
                continue;
            }
            let expected = reference(alg, Direction::Encrypt, &key, &iv, nopad, &data)
                .unwrap_or_else(|| panic!("{what}: the reference refused to encrypt"));
            let ct = ok(call(Direction::Encrypt).run(&data, &scratch), &what);
            assert_eq!(ct, expected, "{what}: enc differs from the reference");
            let pt = ok(call(Direction::Decrypt).run(&ct, &scratch), &what);
            assert_eq!(pt, data, "{what}: dec(enc(x)) != x");
            if nopad || !mode.needs_whole_blocks() {
                // Any data of a valid length decrypts: compare on data that is no ciphertext.
                let other = bytes(len, seed ^ 0xdead);
                let expected = reference(alg, Direction::Decrypt, &key, &iv, nopad, &other)
                    .unwrap_or_else(|| panic!("{what}: the reference refused to decrypt"));
                let got = ok(call(Direction::Decrypt).run(&other, &scratch), &what);
                assert_eq!(got, expected, "{what}: dec differs from the reference");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// AES: the matrix
// ---------------------------------------------------------------------------------------------

#[test]
fn aes_128_ecb() {
    check_algorithm(128, Mode::Ecb);
}
#[test]
fn aes_128_cbc() {
    check_algorithm(128, Mode::Cbc);
}
#[test]
fn aes_128_ofb() {
    check_algorithm(128, Mode::Ofb);
}
#[test]
fn aes_128_cfb() {
    check_algorithm(128, Mode::Cfb);
}
#[test]
fn aes_192_ecb() {
    check_algorithm(192, Mode::Ecb);
}
#[test]
fn aes_192_cbc() {
    check_algorithm(192, Mode::Cbc);
}
#[test]
fn aes_192_ofb() {
    check_algorithm(192, Mode::Ofb);
}
#[test]
fn aes_192_cfb() {
    check_algorithm(192, Mode::Cfb);
}
#[test]
fn aes_256_ecb() {
    check_algorithm(256, Mode::Ecb);
}
#[test]
fn aes_256_cbc() {
    check_algorithm(256, Mode::Cbc);
}
#[test]
fn aes_256_ofb() {
    check_algorithm(256, Mode::Ofb);
}
#[test]
fn aes_256_cfb() {
    check_algorithm(256, Mode::Cfb);
}
#[test]
fn aes_128_ctr() {
    check_algorithm(128, Mode::Ctr);
}
#[test]
fn aes_192_ctr() {
    check_algorithm(192, Mode::Ctr);
}
#[test]
fn aes_256_ctr() {
    check_algorithm(256, Mode::Ctr);
}

// ---------------------------------------------------------------------------------------------
// AES: many packets, read-chunk boundaries, spellings
// ---------------------------------------------------------------------------------------------

/// Enc against the reference and dec back, with `options`.
fn round_trip(alg: Alg, len: usize, nopad: bool, options: &[&str]) {
    let what = format!("{} len={len} nopad={nopad} {options:?}", alg.name());
    let seed = len as u64 + alg.bits as u64;
    let (key, iv) = (alg.key(seed), iv(seed));
    let data = bytes(len, seed);
    let args = |cmd: &str| {
        let mut a = s(&[cmd, "-alg", &alg.name(), "-K", &hex(&key)]);
        if alg.mode != Mode::Ecb {
            a.extend(s(&["-iv", &hex(&iv)]));
        }
        if nopad {
            a.push("-nopad".into());
        }
        a.extend(s(options));
        a
    };
    let expected = reference(alg, Direction::Encrypt, &key, &iv, nopad, &data).unwrap();
    let ct = ok(cli(&args("enc"), &data), &what);
    assert!(ct == expected, "{what}: enc differs from the reference");
    let pt = ok(cli(&args("dec"), &ct), &what);
    assert!(pt == data, "{what}: dec(enc(x)) != x");
}

#[test]
fn data_crosses_many_small_packets_on_several_nodes() {
    for mode in Mode::UNAUTHENTICATED {
        let alg = Alg { bits: 256, mode };
        for (len, options) in [
            (100_000, &["--nodes", "3", "--packet-size", "64"][..]),
            (
                10_000,
                &[
                    "--nodes",
                    "2",
                    "--packet-size",
                    "16",
                    "--policy",
                    "hhs-acdid",
                ],
            ),
            (
                100_000,
                &[
                    "--nodes",
                    "1",
                    "--packet-size",
                    "4096",
                    "--policy",
                    "paper:alpha=0.5,beta=0.5",
                ],
            ),
        ] {
            round_trip(alg, len, false, options);
            if !mode.needs_whole_blocks() {
                round_trip(alg, len + 1, false, options);
            }
        }
    }
}

#[test]
fn input_across_read_chunk_boundaries() {
    // The tool reads 64 KiB at a time (a whole number of packets) and holds the last chunk
    // back for `finish`: ciphertexts of exactly one and two chunks, and a bit more.
    let k = 65_536;
    for (mode, nopad) in [(Mode::Cbc, false), (Mode::Ecb, true), (Mode::Cfb, false)] {
        let alg = Alg { bits: 128, mode };
        for len in [k - 1, k, 2 * k - 1, 2 * k + 16] {
            if nopad && len % 16 != 0 {
                continue;
            }
            round_trip(alg, len, nopad, &[]);
            // 4080-byte packets: the read chunk is 65280 bytes, not a power of two.
            round_trip(alg, len, nopad, &["--packet-size", "4080", "--nodes", "2"]);
        }
    }
    round_trip(
        Alg {
            bits: 192,
            mode: Mode::Ofb,
        },
        3 * k + 5,
        false,
        &["--packet-size", "1024"],
    );
}

#[test]
fn every_option_spelling_gives_the_same_output() {
    let scratch = Scratch::new("spellings");
    let key = "000102030405060708090a0b0c0d0e0f";
    let iv = "0f0e0d0c0b0a09080706050403020100";
    let data = bytes(1000, 7);
    let input = scratch.file("in", &data);
    let input = input.display().to_string();
    let alg = Alg {
        bits: 128,
        mode: Mode::Cbc,
    };
    let expected = reference(
        alg,
        Direction::Encrypt,
        &unhex(key),
        &unhex(iv),
        false,
        &data,
    );
    let spellings: Vec<Vec<String>> = vec![
        s(&[
            "enc",
            "-alg",
            "aes-128-cbc",
            "-K",
            key,
            "-iv",
            iv,
            "-in",
            &input,
        ]),
        s(&[
            "enc",
            "--alg",
            "aes-128-cbc",
            "--hex-key",
            key,
            "--iv",
            iv,
            "--in",
            &input,
        ]),
        s(&[
            "enc",
            "--alg=aes-128-cbc",
            &format!("--hex-key={key}"),
            &format!("--iv={iv}"),
        ]),
        s(&[
            "enc",
            "-aes-128-cbc",
            &format!("-K{key}"),
            "-iv",
            iv,
            "-in",
            "-",
        ]),
        s(&[
            "enc",
            "-K",
            key,
            "-iv",
            iv,
            "-alg",
            "AES-128-CBC",
            "-in",
            &input,
        ]),
    ];
    for args in spellings {
        let got = ok(cli(&args, &data), &format!("{args:?}"));
        assert_eq!(Some(got), expected, "{args:?}");
    }
    // -out, both spellings, and a file named like an option as the value of -out.
    for (flag, name) in [("-out", "out1"), ("--out", "out2"), ("-out", "-in")] {
        let out = scratch.path(name);
        let mut args = s(&["enc", "-alg", "aes-128-cbc", "-K", key, "-iv", iv]);
        args.extend(s(&["-in", &input]));
        // A relative output path starting with '-' needs the scratch dir as working dir.
        let status = Command::new(BIN)
            .args(&args)
            .args([flag, name])
            .current_dir(&scratch.0)
            .output()
            .unwrap();
        assert!(
            status.status.success(),
            "{flag} {name}: {}",
            stderr_of(&status)
        );
        assert_eq!(
            Some(std::fs::read(&out).unwrap()),
            expected,
            "{flag} {name}"
        );
    }
}

#[test]
fn ecb_ignores_an_iv_with_a_warning_and_stream_modes_ignore_nopad() {
    let key = "000102030405060708090a0b0c0d0e0f";
    let data = bytes(40, 3);
    let plain = ok(
        cli(&s(&["enc", "-alg", "aes-128-ecb", "-K", key]), &data),
        "ecb",
    );
    let with_iv = cli(
        &s(&["enc", "-alg", "aes-128-ecb", "-K", key, "-iv", "00"]),
        &data,
    );
    assert!(stderr_of(&with_iv).contains("iv not used by this cipher"));
    assert_eq!(ok(with_iv, "ecb -iv"), plain);
    for alg in ["aes-128-ofb", "aes-128-cfb"] {
        let base = s(&["enc", "-alg", alg, "-K", key, "-iv", key]);
        let a = ok(cli(&base, &data), alg);
        let mut nopad = base.clone();
        nopad.push("-nopad".into());
        assert_eq!(
            ok(cli(&nopad, &data), alg),
            a,
            "{alg}: -nopad changed the output"
        );
        assert_eq!(a.len(), data.len());
    }
}

// ---------------------------------------------------------------------------------------------
// Ed25519
// ---------------------------------------------------------------------------------------------

/// Line `index` of sign.input: (seed, public key, message, signature).
fn sign_vector(index: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/ed25519/sign.input");
    let text = std::fs::read_to_string(path).unwrap();
    let line = text.lines().nth(index).unwrap();
    let f: Vec<&str> = line.split(':').collect();
    assert_eq!(f.len(), 5, "line {index}");
    let sig_msg = unhex(f[3]);
    let msg = unhex(f[2]);
    assert_eq!(&sig_msg[64..], &msg[..], "line {index}");
    (unhex(&f[0][..64]), unhex(f[1]), msg, sig_msg[..64].to_vec())
}

#[test]
fn sign_and_verify_the_rfc_8032_vectors() {
    let scratch = Scratch::new("ed25519");
    for (n, index) in [0usize, 1, 2, 63, 500, 1023].into_iter().enumerate() {
        let (seed, public, msg, sig) = sign_vector(index);
        let what = format!("sign.input line {index}");
        let seed_file = scratch.file(&format!("seed{n}"), &seed);
        let pk_file = scratch.file(&format!("pk{n}"), &public);
        let msg_file = scratch.file(&format!("msg{n}"), &msg);
        let sig_file = scratch.path(&format!("sig{n}"));
        let opts = SERVICE_OPTIONS[n % SERVICE_OPTIONS.len()];

        // sign: -in/-out files, or stdin/stdout.
        let mut args = s(&["sign", "-key", &seed_file.display().to_string()]);
        args.extend(s(opts));
        let got = if n % 2 == 0 {
            args.extend(s(&["-in", &msg_file.display().to_string()]));
            args.extend(s(&["-out", &sig_file.display().to_string()]));
            ok(cli(&args, b""), &what);
            std::fs::read(&sig_file).unwrap()
        } else {
            let got = ok(cli(&args, &msg), &what);
            std::fs::write(&sig_file, &got).unwrap();
            got
        };
        assert_eq!(hex(&got), hex(&sig), "{what}: signature");

        if openssl_available() && !msg.is_empty() {
            // openssl 3.0's pkeyutl cannot sign an empty message.
            let mut der = unhex("302e020100300506032b657004220420");
            der.extend_from_slice(&seed);
            let der_file = scratch.file(&format!("key{n}.der"), &der);
            let out = run_program(
                "openssl",
                &s(&[
                    "pkeyutl",
                    "-sign",
                    "-rawin",
                    "-keyform",
                    "DER",
                    "-inkey",
                    &der_file.display().to_string(),
                    "-in",
                    &msg_file.display().to_string(),
                ]),
                b"",
            );
            assert!(out.status.success(), "{what}: {}", stderr_of(&out));
            assert_eq!(hex(&out.stdout), hex(&sig), "{what}: openssl pkeyutl");
        }

        // verify: accepted, then rejected for a tampered message and a tampered signature.
        let verify = |msg: &[u8], sig_path: &Path| {
            let mut args = s(&[
                "verify",
                "--key",
                &pk_file.display().to_string(),
                "-sig",
                &sig_path.display().to_string(),
            ]);
            args.extend(s(opts));
            cli(&args, msg)
        };
        let out = verify(&msg, &sig_file);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_of(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), VERIFIED, "{what}");

        let mut tampered = msg.clone();
        match tampered.first_mut() {
            Some(b) => *b ^= 1,
            None => tampered.push(0),
        }
        let out = verify(&tampered, &sig_file);
        assert_eq!(out.status.code(), Some(1), "{what}: tampered message");
        assert_eq!(String::from_utf8_lossy(&out.stdout), NOT_VERIFIED, "{what}");

        let mut bad_sig = sig.clone();
        bad_sig[5] ^= 0x40;
        let bad_sig_file = scratch.file(&format!("badsig{n}"), &bad_sig);
        let out = verify(&msg, &bad_sig_file);
        assert_eq!(out.status.code(), Some(1), "{what}: tampered signature");
        assert_eq!(String::from_utf8_lossy(&out.stdout), NOT_VERIFIED, "{what}");
    }
}

#[test]
fn sign_a_message_larger_than_the_default_node_capacity() {
    // An Ed25519 message is one packet; with 64-byte packets a node holds 512 bytes by
    // default, so the tool must raise the capacity.
    let scratch = Scratch::new("ed25519-long");
    let (seed, public, _, _) = sign_vector(3);
    let msg = bytes(200_000, 11);
    let seed_file = scratch.file("seed", &seed);
    let pk_file = scratch.file("pk", &public);
    let sig = ok(
        cli(
            &s(&[
                "sign",
                "-key",
                &seed_file.display().to_string(),
                "--packet-size",
                "64",
            ]),
            &msg,
        ),
        "sign",
    );
    assert_eq!(sig.len(), 64);
    let sig_file = scratch.file("sig", &sig);
    let out = cli(
        &s(&[
            "verify",
            "-key",
            &pk_file.display().to_string(),
            "-sig",
            &sig_file.display().to_string(),
            "--packet-size",
            "64",
        ]),
        &msg,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), VERIFIED);
}

// ---------------------------------------------------------------------------------------------
// Errors and help
// ---------------------------------------------------------------------------------------------

const KEY: &str = "000102030405060708090a0b0c0d0e0f";
const IV: &str = "0f0e0d0c0b0a09080706050403020100";

fn enc_args(extra: &[&str]) -> Vec<String> {
    let mut a = s(&["enc", "-alg", "aes-128-cbc", "-K", KEY, "-iv", IV]);
    a.extend(s(extra));
    a
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    let cases: Vec<(Vec<String>, &[&str])> = vec![
        (
            s(&["enc", "-alg", "aes-128-xts", "-K", KEY, "-iv", IV]),
            &["unknown algorithm", "aes-256-cfb"],
        ),
        (
            s(&["enc", "-alg", "aes-256-cbc", "-K", KEY, "-iv", IV]),
            &["32-byte key", "got 16 bytes"],
        ),
        (
            s(&["enc", "-alg", "aes-128-cbc", "-K", "0011", "-iv", IV]),
            &["16-byte key"],
        ),
        (
            s(&["enc", "-alg", "aes-128-cbc", "-K", KEY]),
            &["needs an IV", "-iv"],
        ),
        (
            s(&["dec", "-alg", "aes-128-ofb", "-K", KEY]),
            &["needs an IV"],
        ),
        (
            s(&["enc", "-alg", "aes-128-cbc", "-K", KEY, "-iv", "0011"]),
            &["-iv", "16 bytes"],
        ),
        (
            s(&[
                "enc",
                "-alg",
                "aes-128-cbc",
                "-K",
                "zz0102030405060708090a0b0c0d0e0f",
            ]),
            &["-K", "invalid hex digit"],
        ),
        (
            s(&["enc", "-alg", "aes-128-cbc", "-K", &KEY[1..], "-iv", IV]),
            &["odd number of hex digits"],
        ),
        (
            s(&["enc", "-alg", "aes-128-cbc", "-K", KEY, "-iv", "xyz"]),
            &["-iv"],
        ),
        (
            enc_args(&["--policy", "fastest"]),
            &["unknown policy", "hhs-acdid"],
        ),
        (enc_args(&["--policy", "paper:alpha=2"]), &["alpha"]),
        (
            enc_args(&["--packet-size", "0"]),
            &["packet size 0", "multiple of 16"],
        ),
        (
            enc_args(&["--packet-size", "15"]),
            &["packet size 15", "multiple of 16"],
        ),
        // Past the service's limit, by the tool's check or the library's, one limit is named.
        (
            enc_args(&["--packet-size", "33554432"]),
            &["packet size 33554432", "at most 16 MiB"],
        ),
        (
            enc_args(&["--packet-size", "67108880"]),
            &["packet size 67108880", "at most 16 MiB"],
        ),
        (enc_args(&["--packet-size", "lots"]), &["--packet-size"]),
        (enc_args(&["--nodes", "0"]), &["--nodes"]),
        (
            enc_args(&["-in", "/nonexistent/cryptodispatch-no-such-file"]),
            &["-in", "no-such-file"],
        ),
        (s(&["enc", "-K", KEY, "-iv", IV]), &["--alg"]),
        (
            s(&["enc", "-alg", "aes-128-cbc", "-iv", IV]),
            &["--hex-key"],
        ),
        (enc_args(&["-bogus"]), &["-bogus"]),
        (s(&["frobnicate"]), &["frobnicate"]),
        (s(&[]), &["Usage"]),
    ];
    for (args, needles) in cases {
        let out = cli(&args, b"some data");
        fails(&out, 2, needles, &format!("{args:?}"));
        assert!(out.stdout.is_empty(), "{args:?}: output on stdout");
    }
}

#[test]
fn bad_key_and_signature_files_are_usage_errors() {
    let scratch = Scratch::new("bad-files");
    let (seed, public, msg, sig) = sign_vector(5);
    let seed_file = scratch.file("seed", &seed).display().to_string();
    let pk_file = scratch.file("pk", &public).display().to_string();
    let sig63 = scratch.file("sig63", &sig[..63]).display().to_string();
    let sig_ok = scratch.file("sig", &sig).display().to_string();
    let short_seed = scratch.file("seed31", &seed[..31]).display().to_string();
    let missing = scratch.path("missing").display().to_string();
    let cases: Vec<(Vec<String>, &[&str])> = vec![
        (
            s(&["verify", "-key", &pk_file, "-sig", &sig63]),
            &["64 bytes", "63 bytes"],
        ),
        (s(&["sign", "-key", &short_seed]), &["32 bytes", "31 bytes"]),
        (s(&["sign", "-key", &missing]), &["-key", "missing"]),
        (
            s(&["verify", "-key", &pk_file, "-sig", &missing]),
            &["-sig", "missing"],
        ),
        (
            s(&["verify", "-key", &pk_file, "-sig", &sig_ok, "-in", &missing]),
            &["-in", "missing"],
        ),
        (s(&["verify", "-key", &pk_file]), &["--sig"]),
        (
            s(&["sign", "-key", &seed_file, "--policy", "nope"]),
            &["unknown policy"],
        ),
    ];
    for (args, needles) in cases {
        let out = cli(&args, &msg);
        fails(&out, 2, needles, &format!("{args:?}"));
    }
}

#[test]
fn oversized_key_and_signature_files_are_refused_without_being_read() {
    let scratch = Scratch::new("oversized");
    let (seed, public, msg, sig) = sign_vector(5);
    let pk_file = scratch.file("pk", &public).display().to_string();
    let sig_file = scratch.file("sig", &sig).display().to_string();
    let msg_file = scratch.file("msg", &msg).display().to_string();
    let seed33 = scratch.file("seed33", &[&seed[..], &[0]].concat());
    let sig65 = scratch.file("sig65", &[&sig[..], &[0]].concat());
    // A sparse file of 1 TiB: it takes no disk space, and reading it whole would need 1 TiB
    // of memory, so a clean refusal shows it was not read. 1 GiB where the file system does
    // not allow such a size.
    let huge_path = scratch.path("huge");
    let huge = std::fs::File::create(&huge_path).unwrap();
    let huge_len: u64 = match huge.set_len(1 << 40) {
        Ok(()) => 1 << 40,
        Err(e) => {
            eprintln!("note: no sparse file of 1 TiB ({e}): 1 GiB instead");
            huge.set_len(1 << 30).unwrap();
            1 << 30
        }
    };
    drop(huge);
    let huge = huge_path.display().to_string();
    let huge_size = format!("{huge_len} bytes");
    let seed33 = seed33.display().to_string();
    let sig65 = sig65.display().to_string();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            s(&["sign", "-key", &huge, "-in", &msg_file]),
            vec!["-key", "exactly 32 bytes", &huge_size],
        ),
        (
            s(&["verify", "-key", &huge, "-sig", &sig_file, "-in", &msg_file]),
            vec!["-key", "exactly 32 bytes", &huge_size],
        ),
        (
            s(&["verify", "-key", &pk_file, "-sig", &huge, "-in", &msg_file]),
            vec!["-sig", "exactly 64 bytes", &huge_size],
        ),
        (
            s(&["sign", "-key", &seed33, "-in", &msg_file]),
            vec!["-key", "exactly 32 bytes", "33 bytes"],
        ),
        (
            s(&["verify", "-key", &pk_file, "-sig", &sig65, "-in", &msg_file]),
            vec!["-sig", "exactly 64 bytes", "65 bytes"],
        ),
    ];
    for (args, needles) in cases {
        let out = cli(&args, b"");
        fails(&out, 2, &needles, &format!("{args:?}"));
        assert!(out.stdout.is_empty(), "{args:?}: output on stdout");
    }

    // A key or signature from a pipe that never ends (not a regular file, so its length is
    // unknown): the tool reads one byte more than the size and stops. `timeout` ends a tool
    // that would read on forever.
    for (option, size) in [("-key", "32"), ("-sig", "64")] {
        let script = match option {
            "-key" => r#"exec "$0" sign -key <(yes) -in "$1""#,
            _ => r#"exec "$0" verify -key "$2" -sig <(yes) -in "$1""#,
        };
        let out = run_program(
            "timeout",
            &s(&["60", "bash", "-c", script, BIN, &msg_file, &pk_file]),
            b"",
        );
        let needle = format!("more than {size} bytes");
        fails(&out, 2, &[option, &needle], &format!("{option} <(yes)"));
    }
}

/// The names in a scratch directory, sorted.
fn listing(scratch: &Scratch) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&scratch.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn input_and_output_naming_the_same_file_are_refused() {
    let scratch = Scratch::new("same-file");
    let data = bytes(1000, 3);
    let file = scratch.file("data", &data);
    let (seed, ..) = sign_vector(2);
    let seed_file = scratch.file("seed", &seed).display().to_string();
    // The same file by another spelling, a symbolic link and a hard link (same inode).
    let dotted = scratch.0.join(".").join("data");
    let symlink = scratch.path("symlink");
    std::os::unix::fs::symlink(&file, &symlink).unwrap();
    let hard_link = scratch.path("hardlink");
    std::fs::hard_link(&file, &hard_link).unwrap();
    let before = listing(&scratch);
    let input = file.display().to_string();
    let mut dec = enc_args(&[]);
    dec[0] = "dec".into();
    let commands = [enc_args(&[]), dec, s(&["sign", "-key", &seed_file])];
    for output in [&file, &dotted, &symlink, &hard_link] {
        let output = output.display().to_string();
        for mut args in commands.clone() {
            args.extend(s(&["-in", &input, "-out", &output]));
            let out = cli(&args, b"");
            fails(&out, 2, &["same file", &input], &format!("{args:?}"));
            assert!(out.stdout.is_empty(), "{args:?}: output on stdout");
        }
    }
    assert_eq!(std::fs::read(&file).unwrap(), data, "the input was changed");
    assert_eq!(listing(&scratch), before, "files were created");

    // Another file, standard output, and a terminal-like input are fine.
    let other = scratch.path("other").display().to_string();
    ok(
        cli(&enc_args(&["-in", &input, "-out", &other]), b""),
        "another file",
    );
    let to_stdout = ok(cli(&enc_args(&["-in", &input, "-out", "-"]), b""), "-out -");
    assert_eq!(std::fs::read(&other).unwrap(), to_stdout);
    ok(
        cli(&enc_args(&["-in", "/dev/stdin", "-out", &other]), &data),
        "-in /dev/stdin",
    );
    assert_eq!(std::fs::read(&other).unwrap(), to_stdout);
}

#[test]
fn a_failed_run_leaves_no_output_file_and_an_existing_one_unchanged() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    let scratch = Scratch::new("output-file");
    // 100000 bytes encrypted without padding, the last plaintext byte 0: decrypting with
    // padding fails at the very end, after most of the output was produced (16-byte packets
    // keep at most 16 KiB in flight).
    let mut plain = bytes(100_000, 7);
    *plain.last_mut().unwrap() = 0;
    let bad_ct = ok(cli(&enc_args(&["-nopad"]), &plain), "enc -nopad");
    let bad_ct_file = scratch.file("bad.ct", &bad_ct).display().to_string();
    let good_ct = ok(cli(&enc_args(&[]), &plain), "enc");
    let good_ct_file = scratch.file("good.ct", &good_ct).display().to_string();
    // A valid ciphertext cut short: not whole blocks, found at the end too.
    let truncated = scratch.file("truncated.ct", &good_ct[..good_ct.len() - 5]);
    let truncated = truncated.display().to_string();
    let failing = [
        (&bad_ct_file, "bad decrypt"),
        (&truncated, "16-byte blocks"),
    ];
    let dec = |extra: &[&str]| {
        let mut args = enc_args(&["--packet-size", "16", "--nodes", "2"]);
        args[0] = "dec".into();
        args.extend(s(extra));
        cli(&args, b"")
    };

    // To standard output the run streams: most of the output is out before the failure.
    let out = dec(&["-in", &bad_ct_file]);
    fails(&out, 1, &["bad decrypt"], "to stdout");
    assert!(
        out.stdout.len() > 50_000,
        "{} bytes streamed",
        out.stdout.len()
    );

    // To a new file: no file, no temporary file.
    let before = listing(&scratch);
    let new = scratch.path("new").display().to_string();
    for (input, why) in failing {
        fails(&dec(&["-in", input, "-out", &new]), 1, &[why], input);
        assert_eq!(listing(&scratch), before, "{input}: files left");
    }

    // To an existing private file: contents and mode unchanged, no temporary file.
    let precious = scratch.file("precious", b"keep me");
    std::fs::set_permissions(&precious, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = listing(&scratch);
    let target = precious.display().to_string();
    for (input, why) in failing {
        fails(&dec(&["-in", input, "-out", &target]), 1, &[why], input);
        assert_eq!(std::fs::read(&precious).unwrap(), b"keep me", "{input}");
        assert_eq!(listing(&scratch), before, "{input}: files left");
    }

    // Success replaces it, keeping its mode; through a symbolic link, the link stays.
    ok(dec(&["-in", &good_ct_file, "-out", &target]), "dec");
    assert_eq!(std::fs::read(&precious).unwrap(), plain);
    let mode = std::fs::metadata(&precious).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode of the replaced file");
    assert_eq!(listing(&scratch), before, "files left after success");
    let link = scratch.path("link");
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    let (seed, _, msg, sig) = sign_vector(7);
    let seed_file = scratch.file("seed", &seed).display().to_string();
    let link_name = link.display().to_string();
    ok(
        cli(&s(&["sign", "-key", &seed_file, "-out", &link_name]), &msg),
        "sign -out link",
    );
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(
        std::fs::read(&precious).unwrap(),
        sig,
        "signature through the link"
    );

    // A directory that does not exist: a usage error, nothing created.
    let missing = scratch.path("no-such-dir/out").display().to_string();
    let before = listing(&scratch);
    let out = dec(&["-in", &good_ct_file, "-out", &missing]);
    fails(&out, 2, &["-out", "no-such-dir"], "missing directory");
    assert_eq!(listing(&scratch), before);

    // Devices are written directly, not replaced.
    ok(
        dec(&["-in", &good_ct_file, "-out", "/dev/null"]),
        "-out /dev/null",
    );
    let out = dec(&["-in", &good_ct_file, "-out", "/dev/full"]);
    fails(&out, 1, &["error writing output"], "-out /dev/full");
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

#[test]
fn processing_failures_exit_1() {
    // A ciphertext whose last plaintext byte is 0 cannot carry PKCS#7 padding.
    let zeros = [0u8; 32];
    for alg in ["aes-128-cbc", "aes-128-ecb"] {
        let base = s(&["-alg", alg, "-K", KEY, "-iv", IV]);
        let mut enc = s(&["enc", "-nopad"]);
        enc.extend(base.clone());
        let ct = ok(cli(&enc, &zeros), alg);
        let mut dec = s(&["dec"]);
        dec.extend(base.clone());
        fails(&cli(&dec, &ct), 1, &["bad decrypt", "padding"], alg);
        // Also through many packets, and for a corrupted last byte of a real ciphertext.
        let mut dec_small = dec.clone();
        dec_small.extend(s(&["--packet-size", "16", "--nodes", "2"]));
        fails(&cli(&dec_small, &ct), 1, &["padding"], alg);
        // A truncated ciphertext is not whole blocks; an empty one has no final block.
        fails(&cli(&dec, &ct[..20]), 1, &["16-byte blocks"], alg);
        fails(&cli(&dec, b""), 1, &["bad decrypt"], alg);
    }
    // -nopad on data that is not whole blocks.
    let mut args = enc_args(&["-nopad"]);
    fails(
        &cli(&args, b"abc"),
        1,
        &["3 bytes", "16-byte blocks"],
        "nopad",
    );
    args[0] = "dec".into();
    fails(
        &cli(&args, &[0; 17]),
        1,
        &["17 bytes", "16-byte blocks"],
        "nopad dec",
    );
}

#[test]
fn help_shows_usage_and_examples() {
    for args in [
        s(&["--help"]),
        s(&["-help"]),
        s(&["enc", "--help"]),
        s(&["dec", "-h"]),
        s(&["sign", "--help"]),
        s(&["verify", "-help"]),
    ] {
        let out = ok(cli(&args, b""), &format!("{args:?}"));
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("Usage"), "{args:?}: {text}");
        assert!(text.contains("Examples"), "{args:?}: {text}");
        assert!(
            text.contains("cryptodispatch enc -alg aes-128-cbc"),
            "{args:?}"
        );
    }
    let out = ok(cli(&s(&["enc", "--help"]), b""), "enc --help");
    let text = String::from_utf8_lossy(&out);
    for option in [
        "--alg",
        "--hex-key",
        "--iv",
        "--aad",
        "--aad-file",
        "--nopad",
        "--in",
        "--out",
        "--nodes",
    ] {
        assert!(text.contains(option), "enc --help lacks {option}");
    }
    assert!(text.contains("-K"));
    // The file handling is documented where a user looks.
    let out = ok(cli(&s(&["--help"]), b""), "--help");
    let text = String::from_utf8_lossy(&out);
    for phrase in [
        "temporary file",
        "same file",
        "without being read whole",
        "CDGCM",
        "16-byte tag",
        "aes-256-ctr",
    ] {
        assert!(text.contains(phrase), "--help lacks {phrase:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// CTR: the counter wrap
// ---------------------------------------------------------------------------------------------

#[test]
fn ctr_counter_wraps_at_128_bits_like_openssl() {
    // The counter starts 3 blocks before 2^128: the 4th block of the message uses 00..00. At
    // 16-byte packets on 3 nodes every block is its own packet, with its own counter block.
    for bits in [128, 256] {
        let alg = Alg {
            bits,
            mode: Mode::Ctr,
        };
        let key = alg.key(7);
        let mut iv = [0xffu8; 16];
        iv[15] = 0xfd;
        let data = bytes(16 * 6 + 9, 8);
        let expected = reference(alg, Direction::Encrypt, &key, &iv, false, &data).unwrap();
        for options in [
            &[][..],
            &["--nodes", "3", "--packet-size", "16"][..],
            &["--nodes", "2", "--packet-size", "32"][..],
        ] {
            let mut args = s(&[
                "enc",
                "-alg",
                &alg.name(),
                "-K",
                &hex(&key),
                "-iv",
                &hex(&iv),
            ]);
            args.extend(s(options));
            let got = ok(cli(&args, &data), &format!("{} {options:?}", alg.name()));
            assert_eq!(got, expected, "{} {options:?}", alg.name());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GCM: this tool's format
// ---------------------------------------------------------------------------------------------

/// The GCM file format, version 1: magic, version, nonce, ciphertext, tag.
const GCM_MAGIC: &[u8] = b"CDGCM\x01";

/// Whether `python3` can import `cryptography` (checked once); prints why the Python checks are
/// skipped if not.
fn python_cryptography() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let found = Command::new("python3")
            .args(["-c", "import cryptography.hazmat.primitives.ciphers.aead"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            eprintln!(
                "note: python3 with the `cryptography` package is not available: the GCM \
                 interoperability checks are skipped (pip install cryptography)"
            );
        }
        found
    })
}

/// Python's `AESGCM`: opens `file` (in this tool's format) and prints the plaintext in hex, or
/// `INVALID` when the tag does not verify; or seals the message on standard input into it.
const PYTHON_GCM: &str = r#"
import sys
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
mode, key, aad, path = sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4]
if mode == "open":
    data = open(path, "rb").read()
    assert data[:6] == b"CDGCM\x01", "magic"
    try:
        print(AESGCM(key).decrypt(data[6:18], data[18:], aad or None).hex())
    except InvalidTag:
        print("INVALID")
else:
    nonce, msg = bytes.fromhex(sys.argv[5]), sys.stdin.buffer.read()
    open(path, "wb").write(b"CDGCM\x01" + nonce + AESGCM(key).encrypt(nonce, msg, aad or None))
"#;

fn gcm_args(cmd: &str, bits: usize, key: &[u8], extra: &[&str]) -> Vec<String> {
    let mut args = s(&[cmd, "-alg", &format!("aes-{bits}-gcm"), "-K", &hex(key)]);
    args.extend(s(extra));
    args
}

#[test]
fn gcm_output_decrypts_with_python_cryptography() {
    if !python_cryptography() {
        eprintln!("skipping gcm_output_decrypts_with_python_cryptography: no python3 cryptography");
        return;
    }
    let scratch = Scratch::new("gcm-python");
    let mut case = 0;
    for bits in [128, 192, 256] {
        for (len, aad_len, options) in [
            (0, 0, &[][..]),
            (1, 5, &["--nodes", "1"][..]),
            (100, 0, &["--packet-size", "16", "--nodes", "3"][..]),
            (70_000, 33, &[][..]),
            (4097, 16, &["--packet-size", "64", "--nodes", "2"][..]),
        ] {
            case += 1;
            let seed = (bits * 100 + case) as u64;
            let key = bytes(bits / 8, seed);
            let aad = bytes(aad_len, seed ^ 1);
            let msg = bytes(len, seed ^ 2);
            let what = format!("aes-{bits}-gcm len={len} aad={aad_len} {options:?}");
            // The CLI seals (a random nonce, or a given one); Python opens.
            let mut extra: Vec<&str> = options.to_vec();
            let aad_hex = hex(&aad);
            if aad_len > 0 {
                extra.extend(["-aad", &aad_hex]);
            }
            let nonce_hex = hex(&bytes(12, seed ^ 3));
            if case % 2 == 0 {
                extra.extend(["-iv", &nonce_hex]);
            }
            let sealed = ok(cli(&gcm_args("enc", bits, &key, &extra), &msg), &what);
            assert_eq!(sealed.len(), 6 + 12 + len + 16, "{what}: output length");
            assert_eq!(&sealed[..6], GCM_MAGIC, "{what}: header");
            if case % 2 == 0 {
                assert_eq!(hex(&sealed[6..18]), nonce_hex, "{what}: the given nonce");
            }
            let file = scratch.file(&format!("sealed-{case}"), &sealed);
            let path = file.display().to_string();
            let out = run_program(
                "python3",
                &s(&["-c", PYTHON_GCM, "open", &hex(&key), &aad_hex, &path]),
                b"",
            );
            let printed = String::from_utf8(ok(out, &what)).unwrap();
            assert_eq!(printed.trim(), hex(&msg), "{what}: Python's plaintext");
            // A changed byte of the tag: Python refuses it too.
            let mut bad = sealed.clone();
            *bad.last_mut().unwrap() ^= 1;
            let bad_file = scratch.file(&format!("bad-{case}"), &bad);
            let out = run_program(
                "python3",
                &s(&[
                    "-c",
                    PYTHON_GCM,
                    "open",
                    &hex(&key),
                    &aad_hex,
                    &bad_file.display().to_string(),
                ]),
                b"",
            );
            assert_eq!(String::from_utf8(ok(out, &what)).unwrap().trim(), "INVALID");

            // Python seals; the CLI opens.
            let py_file = scratch.path(&format!("python-{case}"));
            let out = run_program(
                "python3",
                &s(&[
                    "-c",
                    PYTHON_GCM,
                    "seal",
                    &hex(&key),
                    &aad_hex,
                    &py_file.display().to_string(),
                    &nonce_hex,
                ]),
                &msg,
            );
            ok(out, &what);
            let from_python = std::fs::read(&py_file).unwrap();
            let mut extra: Vec<&str> = options.to_vec();
            if aad_len > 0 {
                extra.extend(["-aad", &aad_hex]);
            }
            let opened = ok(
                cli(&gcm_args("dec", bits, &key, &extra), &from_python),
                &what,
            );
            assert!(opened == msg, "{what}: the CLI opens Python's output");
        }
    }
}

#[test]
fn gcm_round_trips_through_the_service() {
    let scratch = Scratch::new("gcm-round-trip");
    let aad_file = scratch.file("aad", b"associated data from a file");
    let aad_path = aad_file.display().to_string();
    for bits in [128, 192, 256] {
        let key = bytes(bits / 8, bits as u64);
        for (len, extra) in [
            (0, &[][..]),
            (17, &["-aad", "00ff10"][..]),
            (
                1000,
                &["-aad-file", aad_path.as_str(), "--packet-size", "16"][..],
            ),
            (
                65_537,
                &["--aad-file", aad_path.as_str(), "--nodes", "2"][..],
            ),
        ] {
            let what = format!("aes-{bits}-gcm len={len} {extra:?}");
            let msg = bytes(len, len as u64 + 1);
            let sealed = ok(cli(&gcm_args("enc", bits, &key, extra), &msg), &what);
            let opened = ok(cli(&gcm_args("dec", bits, &key, extra), &sealed), &what);
            assert!(opened == msg, "{what}: dec(enc(x)) != x");
        }
    }
    // Two encryptions without -iv draw different nonces.
    let key = bytes(16, 1);
    let a = ok(cli(&gcm_args("enc", 128, &key, &[]), b"same"), "first");
    let b = ok(cli(&gcm_args("enc", 128, &key, &[]), b"same"), "second");
    assert_ne!(a[6..18], b[6..18], "random nonces");
}

#[test]
fn gcm_failures_write_nothing() {
    let scratch = Scratch::new("gcm-failures");
    let key = bytes(32, 5);
    let msg = bytes(300, 6);
    let extra = ["-aad", "a1b2c3", "--packet-size", "32", "--nodes", "2"];
    let sealed = ok(cli(&gcm_args("enc", 256, &key, &extra), &msg), "seal");
    let flip = |i: usize| {
        let mut v = sealed.clone();
        v[i] ^= 0x20;
        v
    };
    let n = sealed.len();
    let mut other_key = key.clone();
    other_key[0] ^= 1;
    let cases: Vec<(&str, Vec<u8>, Vec<String>)> = vec![
        ("tag", flip(n - 1), gcm_args("dec", 256, &key, &extra)),
        ("first byte", flip(18), gcm_args("dec", 256, &key, &extra)),
        ("nonce", flip(10), gcm_args("dec", 256, &key, &extra)),
        (
            "truncated",
            sealed[..n - 1].to_vec(),
            gcm_args("dec", 256, &key, &extra),
        ),
        (
            "aad",
            sealed.clone(),
            gcm_args("dec", 256, &key, &["-aad", "a1b2c4"]),
        ),
        ("no aad", sealed.clone(), gcm_args("dec", 256, &key, &[])),
        (
            "key",
            sealed.clone(),
            gcm_args("dec", 256, &other_key, &extra),
        ),
    ];
    for (what, input, args) in cases {
        // To stdout: nothing written.
        let out = cli(&args, &input);
        fails(&out, 1, &["bad decrypt", "authentication failed"], what);
        assert!(
            out.stdout.is_empty(),
            "{what}: wrote {} bytes",
            out.stdout.len()
        );
        // To a file: no file appears.
        let target = scratch.path(&format!("out-{what}"));
        let mut with_out = args.clone();
        with_out.extend(["-out".into(), target.display().to_string()]);
        fails(&cli(&with_out, &input), 1, &["bad decrypt"], what);
        assert!(!target.exists(), "{what}: an output file appeared");
        assert_eq!(
            listing(&scratch)
                .iter()
                .filter(|f| f.contains("tmp"))
                .count(),
            0
        );
    }
    // Not this tool's format.
    let dec = gcm_args("dec", 256, &key, &[]);
    for (what, input, needle) in [
        ("magic", b"CDGCX\x01".repeat(10), "magic"),
        (
            "version",
            [&b"CDGCM\x02"[..], &[0; 40]].concat(),
            "version 2",
        ),
        ("short", b"CDGCM\x01 too short".to_vec(), "shorter"),
        ("empty", Vec::new(), "magic"),
    ] {
        let out = cli(&dec, &input);
        fails(&out, 1, &["not a cryptodispatch GCM file", needle], what);
        assert!(out.stdout.is_empty(), "{what}");
    }
    // Usage errors: a nonce of the wrong size, a nonce given to dec, AAD for another mode.
    let usage: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "short nonce",
            gcm_args("enc", 256, &key, &["-iv", "00112233"]),
            "12-byte nonce",
        ),
        (
            "16-byte nonce",
            gcm_args("enc", 256, &key, &["-iv", &hex(&[0; 16])]),
            "12-byte nonce",
        ),
        (
            "iv on dec",
            gcm_args("dec", 256, &key, &["-iv", &hex(&[0; 12])]),
            "from the input",
        ),
        (
            "bad aad hex",
            gcm_args("enc", 256, &key, &["-aad", "xyz1"]),
            "-aad",
        ),
        (
            "aad and aad-file",
            gcm_args("enc", 256, &key, &["-aad", "00", "-aad-file", "x"]),
            "cannot be used with",
        ),
        (
            "missing aad file",
            gcm_args("enc", 256, &key, &["-aad-file", "/nonexistent/aad"]),
            "-aad-file",
        ),
        (
            "aad for cbc",
            s(&[
                "enc",
                "-alg",
                "aes-256-cbc",
                "-K",
                &hex(&key),
                "-iv",
                &hex(&[0; 16]),
                "-aad",
                "00",
            ]),
            "GCM only",
        ),
        ("short key", gcm_args("enc", 192, &key, &[]), "24-byte key"),
    ];
    for (what, args, needle) in usage {
        fails(&cli(&args, b"data"), 2, &[needle], what);
    }
}

#[test]
fn enc_help_lists_every_policy_with_its_parameters() {
    use cryptodispatch::sched::policy::registry;
    let out = Command::new(BIN).args(["enc", "--help"]).output().unwrap();
    assert!(out.status.success(), "{}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    for entry in registry() {
        assert!(
            text.contains(&format!("{entry}")),
            "lacks {}: {text}",
            entry.name()
        );
        for param in entry.params() {
            let line = format!(
                "{}={}: {}",
                param.name(),
                param.default_value(),
                param.meaning()
            );
            assert!(text.contains(&line), "lacks {line}");
        }
    }
}
