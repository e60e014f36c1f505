//! Helpers of the daemon tests: a key folder and tokens file in a scratch directory, the
//! `cryptodispatchd` process (started on loopback with free ports, read from its ready line,
//! killed on drop), clients, and the library's own results to compare with.
//!
//! Every process a test starts stops by itself: the daemon and HAProxy are killed when their
//! handle drops, and every wait is bounded.
#![allow(dead_code)]

#[allow(dead_code)]
#[path = "../../src/bin/remote/mod.rs"]
pub mod remote;

pub mod raw;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use cryptodispatch::crypto::{AesKey, AesOp, SigningKey};

use self::remote::client::{Client, ClientConfig};

pub const BIN: &str = env!("CARGO_BIN_EXE_cryptodispatchd");

/// A token that may use every key.
pub const ALL: &str = "all-keys-token-0123456789";
/// A token that may use `k128` and `signer` only.
pub const LIMITED: &str = "limited-token-abcdefghij";

/// The key bytes the fixture writes.
pub const K128: [u8; 16] = [0x2b; 16];
pub const K192: [u8; 24] = [0x8e; 24];
pub const K256: [u8; 32] = [0x60; 32];
pub const SEED: [u8; 32] = [0x9d; 32];
pub const OTHER_SEED: [u8; 32] = [0x4c; 32];

/// A scratch directory, removed on drop.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "cryptodispatchd-test-{}-{n}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes a file with `mode`.
    pub fn write(&self, name: &str, contents: &[u8], mode: u32) -> PathBuf {
        let p = self.path(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, contents).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A key folder (`k128`, `k192`, `k256` AES keys; `signer`, `other` Ed25519 keys) and a tokens
/// file ([`ALL`] for every key, [`LIMITED`] for `k128` and `signer`), all mode 0600.
#[derive(Debug)]
pub struct Fixture {
    pub dir: Scratch,
    pub keys: PathBuf,
    pub tokens: PathBuf,
}

impl Fixture {
    pub fn new(name: &str) -> Fixture {
        let dir = Scratch::new(name);
        dir.write("keys/k128.aes", &K128, 0o600);
        dir.write("keys/k192.aes", &K192, 0o600);
        dir.write("keys/k256.aes", &K256, 0o600);
        dir.write("keys/signer.ed25519", &SEED, 0o600);
        dir.write("keys/other.ed25519", &OTHER_SEED, 0o600);
        let tokens = format!("# test tokens\n{ALL} *\n{LIMITED} k128,signer\n");
        let tokens = dir.write("tokens", tokens.as_bytes(), 0o600);
        Fixture {
            keys: dir.path("keys"),
            tokens,
            dir,
        }
    }

    /// The arguments of a plaintext loopback daemon on free ports with one node per cluster.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--keys".into(),
            self.keys.display().to_string(),
            "--tokens".into(),
            self.tokens.display().to_string(),
            "--insecure-loopback".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--nodes".into(),
            "1".into(),
        ]
    }
}

/// A running `cryptodispatchd`, killed on drop.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    pub grpc: SocketAddr,
    pub agent: Option<SocketAddr>,
    pub metrics: Option<SocketAddr>,
    pub tls: bool,
    stderr: Arc<Mutex<String>>,
}

/// How a daemon that did not start ended.
#[derive(Debug)]
pub struct Refused {
    pub status: ExitStatus,
    pub stderr: String,
}

fn parse_addr(line: &str, key: &str) -> Option<SocketAddr> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

impl Daemon {
    /// Starts the daemon with `args` and waits (at most 60 s) for its ready line.
    pub fn start<S: AsRef<str>>(args: &[S]) -> Daemon {
        match Daemon::try_start(args) {
            Ok(d) => d,
            Err(r) => panic!("the daemon did not start ({}): {}", r.status, r.stderr),
        }
    }

    /// Starts the daemon through `program` (a shell that sets limits, then execs the daemon
    /// with `args`); waits for its ready line as [`Daemon::start`].
    pub fn start_with<S: AsRef<str>>(program: &str, args: &[S]) -> Daemon {
        match Daemon::try_start_with(program, args) {
            Ok(d) => d,
            Err(r) => panic!("the daemon did not start ({}): {}", r.status, r.stderr),
        }
    }

    /// Starts the daemon; `Err` with its status and messages if it exits instead.
    pub fn try_start<S: AsRef<str>>(args: &[S]) -> Result<Daemon, Refused> {
        Daemon::try_start_with(BIN, args)
    }

    /// Starts `program` with `args`; `Err` with its status and messages if it exits instead.
    pub fn try_start_with<S: AsRef<str>>(program: &str, args: &[S]) -> Result<Daemon, Refused> {
        let mut child = Command::new(program)
            .args(args.iter().map(AsRef::as_ref))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start cryptodispatchd");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep reading so the daemon never blocks on a full pipe.
            for _ in lines {}
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => Ok(Daemon {
                grpc: parse_addr(&line, "grpc=").expect("grpc address in the ready line"),
                agent: parse_addr(&line, "agent="),
                metrics: parse_addr(&line, "metrics="),
                tls: line.contains("tls=on"),
                child,
                stderr,
            }),
            Err(_) => {
                let status =
                    wait_bounded(&mut child, Duration::from_secs(10)).unwrap_or_else(|| {
                        let _ = child.kill();
                        child.wait().unwrap()
                    });
                // Let the reader thread take the last messages.
                std::thread::sleep(Duration::from_millis(50));
                let stderr = stderr.lock().unwrap().clone();
                Err(Refused { status, stderr })
            }
        }
    }

    /// The URL a client uses.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.grpc)
    }

    /// What the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (with the `kill` command).
    pub fn terminate(&self) {
        let ok = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -TERM failed");
    }

    /// Kills the process at once (SIGKILL).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits at most `within` for the process to exit.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        wait_bounded(&mut self.child, within)
    }

    /// A client with `token`, retrying unary calls on UNAVAILABLE.
    pub async fn client(&self, token: Option<&str>) -> Client {
        Client::connect(&self.config(token)).await.expect("connect")
    }

    pub fn config(&self, token: Option<&str>) -> ClientConfig {
        ClientConfig {
            url: self.url(),
            token: token.map(|t| zeroize::Zeroizing::new(t.to_owned())),
            max_message_bytes: 64 << 20,
            ..ClientConfig::default()
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn wait_bounded(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads one line from the agent-check port.
pub fn agent_line(addr: SocketAddr) -> String {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut line = String::new();
    s.read_to_string(&mut line).unwrap();
    line
}

/// `GET path` on the metrics endpoint: status line and body.
pub fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// The library's one-shot AES result.
pub fn aes_reference(key: &[u8], op: AesOp, iv: &[u8], data: &[u8]) -> Vec<u8> {
    AesKey::new(key).unwrap().one_shot(op, iv, data).unwrap()
}

/// The library's Ed25519 signature.
pub fn sign_reference(seed: &[u8], msg: &[u8]) -> [u8; 64] {
    SigningKey::from_seed(seed).unwrap().sign(msg)
}

/// The library's Ed25519 public key.
pub fn public_reference(seed: &[u8]) -> [u8; 32] {
    SigningKey::from_seed(seed)
        .unwrap()
        .verifying_key()
        .to_bytes()
}

/// Deterministic bytes.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs `f` with a bound on its time.
pub async fn bounded<T>(
    what: &str,
    within: Duration,
    f: impl std::future::Future<Output = T>,
) -> T {
    match tokio::time::timeout(within, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what} took longer than {within:?}"),
    }
}
