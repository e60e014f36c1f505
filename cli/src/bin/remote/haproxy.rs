//! HAProxy in front of daemons on this machine, for the benchmark's `scaleout` and the tests:
//! a configuration like `deploy/haproxy.cfg` (plaintext HTTP/2 on loopback instead of TLS),
//! and the process, started in the foreground and stopped on drop.
//!
//! # The health check
//! HAProxy 2.6 cannot send a gRPC request from `http-check` (a gRPC message starts with NUL
//! bytes, which its request body cannot hold), so the check is a `tcp-check` that speaks
//! HTTP/2 itself: [`health_check_request`] is the client preface, an empty SETTINGS frame,
//! a HEADERS frame for `POST /grpc.health.v1.Health/Check` (HPACK, literal fields, no Huffman
//! coding) and a DATA frame with an empty `HealthCheckRequest` (the whole server). The check
//! passes when the response carries the message `HealthCheckResponse { status: SERVING }`,
//! the bytes `00 00000002 0801`; a draining daemon answers `NOT_SERVING` (`0802`) and fails it.
//!
//! # Buffers
//! HAProxy releases before December 2023 (Debian 12's 2.6.12 among them) can fail to parse a
//! response's trailers (where gRPC puts its status) while part of the response body is still
//! in their receive buffer; they then drop the whole HTTP/2 connection to that server, and the
//! calls on it end in `REFUSED_STREAM` (which the client retries as `UNAVAILABLE`) or a cut
//! response. `tune.bufsize 262144` keeps responses of up to 256 KiB whole in the buffer, which
//! avoids it for them. Larger responses can still meet it on those releases: the client's
//! retries keep the results right, a newer HAProxy removes the cause.
//!
//! # Calls open per client connection
//! HAProxy lets a client connection have 100 calls open at once by default
//! (`tune.h2.max-concurrent-streams`); the client's further calls wait in the client. A
//! benchmark client that keeps more calls open, each tenant of `scaleout --setups tenants` on
//! one connection with up to 1024 per daemon, then had at most 100 in all: with calls of 1 and
//! 4 KiB each daemon held about 100 calls, nearly all of one tenant (least connections kept
//! each tenant's calls where its last one ended), and each daemon shared its node between the
//! tenants it had rather than by weight (docs/RESULTS.md, Tenants). [`MAX_STREAMS`] raises it.
//!
//! # Tenant groups
//! Least connections counts every caller's calls together. A tenant's next call goes where a
//! call just ended, which is mostly where its own last call ended, so each tenant's share of
//! a daemon's calls wanders; once one daemon holds nearly none of a backlogged tenant's calls,
//! that daemon serves the others beyond their weights, and the fleet's shares drift off
//! (calls of 4 and 8 KiB: weight 1's share of a second up to 38% over its 0.25 after a few
//! seconds, docs/RESULTS.md, Tenants). With [`Setup::tenant_groups`] above 1, each call goes
//! by a hash of its `authorization` header (its token) to one of that many backends of the
//! same daemons, each with least connections over its own calls: a tenant alone in its group
//! has its calls spread over the daemons evenly, whatever the others do. Tenants whose tokens
//! share a group are counted together, as all were before. The groups' servers track the
//! first backend's health checks; each asks a daemon's agent for its weight itself.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Calls a client connection may have open through HAProxy at once (its
/// `tune.h2.max-concurrent-streams`; HAProxy's default is 100): at least what one client of
/// the benchmarks keeps open on its connection, `tenants`' backlog of up to 1024 calls per
/// daemon on two daemons.
pub const MAX_STREAMS: usize = 2048;

/// What the health check expects in the response: a gRPC message of 2 bytes, `status = 1`
/// (SERVING).
pub const HEALTH_CHECK_SERVING: &str = "00000000020801";

/// The bytes of the health check's request (see the module documentation).
pub fn health_check_request() -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
    out.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    // The header block: indexed `:method: POST` (3) and `:scheme: http` (6); literals without
    // indexing for `:path` (name 4), `:authority` (name 1), `content-type` (name 31, which
    // takes a second byte after the 4-bit prefix), and `te` (a new name).
    let mut block = vec![0x83, 0x86];
    let literal = |block: &mut Vec<u8>, value: &[u8]| {
        block.push(value.len() as u8);
        block.extend_from_slice(value);
    };
    block.push(0x04);
    literal(&mut block, b"/grpc.health.v1.Health/Check");
    block.push(0x01);
    literal(&mut block, b"localhost");
    block.extend_from_slice(&[0x0f, 0x10]);
    literal(&mut block, b"application/grpc");
    block.push(0x00);
    literal(&mut block, b"te");
    literal(&mut block, b"trailers");
    // HEADERS on stream 1 with END_HEADERS (0x4).
    out.extend_from_slice(&frame_head(block.len(), 1, 0x04));
    out.extend_from_slice(&block);
    // DATA on stream 1 with END_STREAM (0x1): an uncompressed message of 0 bytes.
    out.extend_from_slice(&frame_head(5, 0, 0x01));
    out.extend_from_slice(&[0; 5]);
    out
}

/// An HTTP/2 frame header on stream 1.
fn frame_head(len: usize, kind: u8, flags: u8) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    [l[1], l[2], l[3], kind, flags, 0, 0, 0, 1]
}

/// `health_check_request` in hex, as `tcp-check send-binary` takes it.
pub fn health_check_hex() -> String {
    health_check_request()
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// One daemon behind HAProxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// The server's name in the configuration.
    pub name: String,
    /// Its gRPC address.
    pub grpc: SocketAddr,
    /// Its agent-check port, if HAProxy should ask it for weights.
    pub agent_port: Option<u16>,
}

/// A configuration for daemons on loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// Where HAProxy listens (plaintext HTTP/2).
    pub frontend: SocketAddr,
    /// The daemons.
    pub backends: Vec<Backend>,
    /// Milliseconds between two agent checks of a server.
    pub agent_inter_ms: u32,
    /// Milliseconds between two health checks of a server.
    pub check_inter_ms: u32,
    /// How HAProxy picks a daemon for each call.
    pub balance: Balance,
    /// Tenant groups: above 1, each call goes to one of this many backends of the same
    /// daemons, by a hash of its `authorization` header, each balancing its own calls (see
    /// the module documentation); 1, one backend for all.
    pub tenant_groups: u32,
}

/// HAProxy's `balance` algorithm for the daemons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Balance {
    /// Each call to the next daemon in turn (weighted by the daemons' weights).
    #[default]
    Roundrobin,
    /// Each call to the daemon with the fewest calls open (relative to its weight).
    Leastconn,
}

impl Balance {
    /// The keyword in HAProxy's configuration.
    pub fn keyword(self) -> &'static str {
        match self {
            Balance::Roundrobin => "roundrobin",
            Balance::Leastconn => "leastconn",
        }
    }
}

impl Setup {
    /// The configuration text: HTTP/2 on both sides, round robin, every server with weight
    /// 100 (changed by its agent, if it has one), the gRPC health check, a request whose
    /// connection failed sent to another server, and HAProxy's log (one line per call) on its
    /// standard error.
    pub fn config(&self) -> String {
        let lines = [
            "global".to_string(),
            "  maxconn 4096".into(),
            "  log stderr format raw local0".into(),
            // Room for a whole response with its trailers (see the module documentation).
            "  tune.bufsize 262144".into(),
            // Calls open per client connection (see the module documentation).
            format!("  tune.h2.max-concurrent-streams {MAX_STREAMS}"),
            "defaults".into(),
            "  mode http".into(),
            "  log global".into(),
            "  option httplog".into(),
            "  timeout connect 1s".into(),
            "  timeout client 60s".into(),
            "  timeout server 60s".into(),
            "  timeout check 1s".into(),
            "  retries 3".into(),
            "  option redispatch".into(),
            "frontend grpc".into(),
            format!("  bind {} proto h2", self.frontend),
        ];
        let mut text = lines.join("\n");
        text.push('\n');
        // The tenant groups: none for one (see the module documentation).
        let groups = if self.tenant_groups > 1 {
            self.tenant_groups
        } else {
            0
        };
        if groups > 0 {
            // Each caller's calls to the group of its token.
            let _ = writeln!(
                text,
                "  use_backend daemons_%[req.hdr(authorization),crc32,mod({groups})]"
            );
        }
        let lines = [
            "  default_backend daemons".to_string(),
            "backend daemons".into(),
            format!("  balance {}", self.balance.keyword()),
            "  option tcp-check".into(),
            "  tcp-check connect".into(),
            format!("  tcp-check send-binary {}", health_check_hex()),
            format!("  tcp-check expect binary {HEALTH_CHECK_SERVING}"),
        ];
        text.push_str(&lines.join("\n"));
        text.push('\n');
        let health = format!("check inter {}ms rise 1 fall 2", self.check_inter_ms);
        self.servers(&mut text, |_| health.clone());
        // The tenant groups: the same daemons, counted apart, their health as checked above.
        for group in 0..groups {
            let _ = writeln!(text, "backend daemons_{group}");
            let _ = writeln!(text, "  balance {}", self.balance.keyword());
            self.servers(&mut text, |b| format!("track daemons/{}", b.name));
        }
        text
    }

    /// The daemons' `server` lines, each with `health` (its check, or the check it tracks) and
    /// its agent check, if it has one.
    fn servers(&self, text: &mut String, health: impl Fn(&Backend) -> String) {
        for b in &self.backends {
            let _ = write!(
                text,
                "  server {} {} proto h2 weight 100 {}",
                b.name,
                b.grpc,
                health(b)
            );
            if let Some(port) = b.agent_port {
                let _ = write!(
                    text,
                    " agent-check agent-port {port} agent-inter {}ms",
                    self.agent_inter_ms
                );
            }
            text.push('\n');
        }
    }
}

/// A free TCP port on 127.0.0.1 (it could be taken again before it is used; the callers start
/// at once).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The `haproxy` on `PATH`, if any.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("haproxy"))
        .find(|p| p.is_file())
}

/// A running HAProxy, killed on drop.
#[derive(Debug)]
pub struct Haproxy {
    child: Child,
    /// Where it listens.
    pub frontend: SocketAddr,
}

impl Haproxy {
    /// Writes `setup`'s configuration into `dir`, starts `binary` on it in the foreground
    /// (its messages go to `dir/haproxy.log`), and waits until the frontend accepts
    /// connections.
    ///
    /// # Errors
    /// A message if the configuration cannot be written, HAProxy cannot start, exits, or does
    /// not listen within 10 seconds.
    pub fn start(binary: &Path, setup: &Setup, dir: &Path) -> Result<Haproxy, String> {
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, setup.config())
            .map_err(|e| format!("{}: {e}", config.display()))?;
        let log_path = dir.join("haproxy.log");
        let log =
            std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let child = Command::new(binary)
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut proxy = Haproxy {
            child,
            frontend: setup.frontend,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("haproxy exited with {status}: {log}"));
            }
            if TcpStream::connect_timeout(&setup.frontend, Duration::from_millis(100)).is_ok() {
                return Ok(proxy);
            }
            if Instant::now() > deadline {
                return Err("haproxy did not listen within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
