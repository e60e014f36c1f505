//! The daemon's options, their checks, and what is built from them: the service, the keys,
//! the tokens, the TLS configuration.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cryptodispatch::{BuildError, ClusterKind, NodeSpec, Service};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use zeroize::Zeroizing;

use crate::StartError;
use crate::agent::WeightConfig;
use crate::conn::ConnLimits;
use crate::daemon::{Daemon, Limits};
use crate::http::HttpLimits;
use crate::keys::KeyRing;
use crate::secret_file::{Links, read_secret};
use crate::tokens::Auth;

/// Bytes a message may carry beyond `--max-request-bytes` (key name, IV, framing) before tonic
/// refuses it unread.
pub const MESSAGE_OVERHEAD: usize = 64 * 1024;
/// The largest TLS file read.
const MAX_PEM: u64 = 1 << 20;
/// Packets a node queues by default, as the library's default capacity.
const NODE_PACKETS: u64 = 8;

const ABOUT: &str = "The cryptodispatch service over gRPC: AES and Ed25519 with keys that stay \
                     on the server";

const AFTER_HELP: &str = "\
Key folder: one file per key, NAME.aes (16, 24 or 32 raw bytes) or NAME.ed25519 (a 32-byte
seed), a regular file (not a link) readable by its owner only (chmod 600); NAME is 1 to 128
letters, digits, '.', '_' and '-'. Tokens file: a line per token, `TOKEN key1,key2`
or `TOKEN *`, then optional settings: tenant=NAME weight=W max-inflight-bytes=SIZE
max-inflight-jobs=N max-bytes-per-sec=SIZE (SIZE: bytes, or with K, M, G or KiB, MiB, GiB);
a token without tenant= is in the tenant `default`; # starts a comment; also private to its
owner. A call held at its tenant's limits or by full queues longer than --queue-wait-ms gets
RESOURCE_EXHAUSTED with the trailer grpc-retry-pushback-ms.

Examples:
  cryptodispatchd --keys keys/ --tokens tokens --tls-cert cert.pem --tls-key key.pem \\
      --listen 0.0.0.0:50051 --metrics 127.0.0.1:9100 --agent-port 50052 --agent-public
  cryptodispatchd --keys keys/ --tokens tokens --insecure-loopback --listen 127.0.0.1:50051

SIGTERM drains: new calls get UNAVAILABLE, health goes NOT_SERVING, the agent check says
drain; calls in flight finish; then the daemon exits 0.";

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "cryptodispatchd", version, about = ABOUT, after_help = AFTER_HELP)]
pub struct Args {
    /// Address to serve gRPC on (port 0: any free port, printed at start)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,

    /// Folder of key files (NAME.aes, NAME.ed25519), each private to its owner
    #[arg(long, value_name = "DIR")]
    pub keys: PathBuf,

    /// Bearer tokens, the keys each may use and its tenant (`TOKEN key1,key2` or `TOKEN *`
    /// per line, then optional tenant=NAME weight=W and limits)
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,

    /// Serve without tokens: any client that can connect may use every key (for example
    /// when --client-ca already admits only trusted clients)
    #[arg(long, conflicts_with = "tokens")]
    pub allow_unauthenticated: bool,

    /// TLS certificate chain (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM), private to its owner
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Ask clients for a certificate signed by this CA (PEM), and refuse those without
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,

    /// Serve plaintext: only on a loopback address (127.0.0.0/8 or ::1)
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "client_ca"])]
    pub insecure_loopback: bool,

    /// Serve Prometheus metrics (and /health) over plaintext HTTP/1 on this address (a
    /// loopback one unless --metrics-public)
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,

    /// Allow --metrics on an address other than loopback (it is plaintext and
    /// unauthenticated: counters and queue depths, never keys or tokens)
    #[arg(long, requires = "metrics")]
    pub metrics_public: bool,

    /// At most this many metrics connections at once (1 to 4096); others wait to be accepted
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub metrics_max_connections: usize,

    /// A metrics connection has this long to send its request and take the answer
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub metrics_timeout_ms: u64,

    /// Answer HAProxy's agent check on this port of the listen address (0: any free port);
    /// plaintext, so the listen address must be a loopback one unless --agent-public
    #[arg(long, value_name = "PORT")]
    pub agent_port: Option<u16>,

    /// Allow the agent check on a listen address other than loopback (it is plaintext and
    /// unauthenticated: it tells a weight, drain or down)
    #[arg(long, requires = "agent_port")]
    pub agent_public: bool,

    /// AES speed in MiB/s that the agent check reports as 100% [default: this daemon's nodes
    /// without their emulated slowdown]
    #[arg(long, value_name = "MIBPS")]
    pub agent_full_speed: Option<f64>,

    /// Largest payload of a call, in bytes (data, message, a batch's messages, a stream chunk)
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub max_request_bytes: usize,

    /// How long a call may wait for its tenant's limits and room in the service's queues
    /// before RESOURCE_EXHAUSTED (0: only if it may go at once)
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub queue_wait_ms: u64,

    /// Turn the light path off. On by default: a tenant's small calls within its weighted
    /// share go ahead of the other tenants' queued work and run at a node's next pause (the
    /// library's `ServiceBuilder::light_path`), which keeps a quiet tenant's latency near its
    /// latency alone and costs tenants over their share some throughput
    #[arg(long)]
    pub no_light_path: bool,

    /// The light path, on by default (kept for scripts written when it was off)
    #[arg(long, hide = true, conflicts_with = "no_light_path")]
    pub light_path: bool,

    /// The most a node goes on looking for work once its queues are empty before it sleeps,
    /// earned by working as long (the library's `ServiceBuilder::idle_poll`; 0 turns it off).
    /// Default: 10 with the light path on, 0 with it off. A node that looks takes a quiet
    /// tenant's call at once rather than after a wake-up; turn it off where the daemon's
    /// nodes share their cores with other busy work
    #[arg(long, value_name = "MS")]
    pub idle_poll_ms: Option<u64>,

    /// Streams open at once, at most (each holds a thread while open)
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_streams: usize,

    /// A stream call that goes this long without a request message, or whose client takes no
    /// response for as long, ends with DEADLINE_EXCEEDED
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub stream_idle_ms: u64,

    /// gRPC connections open at once, at most (1 to 1048576); more wait in the kernel's
    /// backlog
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,

    /// Calls in progress on one connection, at most (HTTP/2 concurrent streams; the calls
    /// being read and decoded are bounded by it, so a connection holds at most this many times
    /// --max-request-bytes)
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_calls_per_connection: u32,

    /// Close a gRPC connection with no call in progress for this long (HTTP/2 pings do not
    /// count)
    #[arg(long, value_name = "S", default_value_t = 300)]
    pub idle_timeout_s: u64,

    /// A new gRPC connection must finish its TLS handshake and HTTP/2 set-up and begin its
    /// first call within this time, or it is closed
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub handshake_timeout_s: u64,

    /// Send an HTTP/2 ping on a gRPC connection after this long without traffic
    #[arg(long, value_name = "S", default_value_t = 60)]
    pub keepalive_interval_s: u64,

    /// Close the connection when a ping gets no answer within this time
    #[arg(long, value_name = "S", default_value_t = 20)]
    pub keepalive_timeout_s: u64,

    /// When a connection closes (drain, idle), read what the client still sends for at most
    /// this long before closing the socket, so that no client's last response is reset
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub linger_ms: u64,

    /// Nodes per cluster (AES and Ed25519) [default: the number of cores]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub nodes: Option<u32>,

    /// Emulated slowdown of every node (1 to 1000): each packet costs this many times its real
    /// time, as on a slower machine
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub slowdown: f64,

    /// Pin node i of each cluster to core i mod cores (off: the OS places the threads, which
    /// suits several daemons on one machine)
    #[arg(long)]
    pub pin: bool,

    /// Node-selection policy (`mct-wait`, `mct`, `paper`, `sed`, ...) [default: mct-wait]
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,

    /// Run every AES operation on this implementation where it can (`rustcrypto`,
    /// `lanes-<width>`, `ring`, or `aws-lc` when built with it) instead of the one measured
    /// fastest per operation [default: measured]
    #[arg(long, value_name = "NAME")]
    pub aes_implementation: Option<cryptodispatch::crypto::AesImpl>,

    /// Run every packet in place, on a copy of its input made first in case it must run again
    /// on another node, rather than out of place from its input into a node's own buffer (the
    /// library's `ServiceBuilder::out_of_place`). Out of place is the default: it saves a pass
    /// over memory per packet on the AMD EPYC measured, where an earlier build of it lost
    /// 12-15% on an Intel Xeon; measure both on yours
    #[arg(long)]
    pub in_place: bool,

    /// Packet size in bytes, a positive multiple of 16 [default: 16384]
    #[arg(long, value_name = "BYTES")]
    pub packet_size: Option<usize>,

    /// Make the first AES node's worker panic after completing this many packets (only in
    /// builds with the `fault-injection` feature, for tests of how a failed node is answered)
    #[cfg(feature = "fault-injection")]
    #[arg(long, value_name = "N")]
    pub fault_aes_panic_after: Option<u64>,

    /// After SIGTERM, how long to keep answering UNAVAILABLE before closing the listener
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub drain_grace_ms: u64,

    /// After the grace, how long calls in flight may take to finish
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub drain_timeout_s: u64,
}

/// The most gRPC connections `--max-connections` may allow: Linux's default ceiling on a
/// process's open descriptors (`fs.nr_open`).
const MAX_CONNECTIONS: usize = 1 << 20;

/// The most metrics connections `--metrics-max-connections` may allow (as many as streams).
const MAX_METRICS_CONNECTIONS: usize = 4096;

/// TLS material, read at start.
pub struct Tls {
    cert: Vec<u8>,
    key: Zeroizing<Vec<u8>>,
    client_ca: Option<Vec<u8>>,
}

impl Tls {
    /// Refuses files with no PEM block of their kind, naming them: rustls would find nothing
    /// in them only at the first handshake, and say the peer sent no certificate. Checked
    /// after the command line's other checks, which need no file parsed.
    fn check_pem(
        &self,
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<(), StartError> {
        // Searched as bytes: the key's are not copied anywhere.
        let has = |pem: &[u8], part: &str| pem.windows(part.len()).any(|w| w == part.as_bytes());
        let lacks = |option: &str, path: &Path, pem: &[u8], label: &str| {
            if has(pem, "-----BEGIN ") && has(pem, label) {
                Ok(())
            } else {
                Err(StartError::new(format!(
                    "{option} {}: no PEM {} in it (a block beginning \
                     `-----BEGIN ...{label}-----`)",
                    path.display(),
                    label.to_lowercase()
                )))
            }
        };
        lacks("--tls-cert", cert, &self.cert, "CERTIFICATE")?;
        lacks("--tls-key", key, &self.key, "PRIVATE KEY")?;
        if let (Some(path), Some(pem)) = (client_ca, &self.client_ca) {
            lacks("--client-ca", path, pem, "CERTIFICATE")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("client_ca", &self.client_ca.is_some())
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// The server configuration for tonic.
    pub fn server_config(&self) -> ServerTlsConfig {
        let config =
            ServerTlsConfig::new().identity(Identity::from_pem(&self.cert, self.key.as_slice()));
        match &self.client_ca {
            Some(ca) => config.client_ca_root(Certificate::from_pem(ca)),
            None => config,
        }
    }
}

/// The checked options the server needs.
#[derive(Debug)]
pub struct Settings {
    /// Where to serve gRPC.
    pub listen: SocketAddr,
    /// TLS, unless `--insecure-loopback`.
    pub tls: Option<Tls>,
    /// The agent check's port.
    pub agent_port: Option<u16>,
    /// The metrics address.
    pub metrics: Option<SocketAddr>,
    /// Largest payload.
    pub max_request_bytes: usize,
    /// Streams at once.
    pub max_streams: usize,
    /// Drain: grace before closing the listener.
    pub drain_grace: Duration,
    /// Drain: time for calls in flight after the grace.
    pub drain_timeout: Duration,
    /// The gRPC connections' bounds.
    pub conn: ConnLimits,
    /// Calls in progress on one connection, at most.
    pub max_calls_per_connection: u32,
    /// HTTP/2 keepalive: interval and timeout.
    pub keepalive: (Duration, Duration),
    /// A stream's longest gap between messages.
    pub stream_idle: Duration,
    /// The metrics server's bounds.
    pub metrics_limits: HttpLimits,
}

/// Whether `ip` is a loopback address (127.0.0.0/8, ::1, or ::ffff:127.x.y.z).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

impl Args {
    /// Checks the options and reads the TLS files.
    ///
    /// # Errors
    /// [`StartError`] for plaintext off loopback or without `--insecure-loopback`, unsafe or
    /// unreadable TLS files, and numbers out of range.
    pub fn settings(&self) -> Result<Settings, StartError> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let cert_pem = std::fs::read(cert)
                    .map_err(|e| StartError::new(format!("--tls-cert {}: {e}", cert.display())))?;
                let key_pem = read_secret(key, "the TLS private key", MAX_PEM, Links::Follow)?;
                let client_ca = match &self.client_ca {
                    Some(ca) => Some(std::fs::read(ca).map_err(|e| {
                        StartError::new(format!("--client-ca {}: {e}", ca.display()))
                    })?),
                    None => None,
                };
                Some(Tls {
                    cert: cert_pem,
                    key: key_pem,
                    client_ca,
                })
            }
            _ => None,
        };
        if tls.is_none() {
            if !self.insecure_loopback {
                return Err(StartError::new(
                    "refusing to serve without TLS: give --tls-cert and --tls-key (PEM), or \
                     --insecure-loopback to serve plaintext on a loopback address only",
                ));
            }
            if !is_loopback(self.listen.ip()) {
                return Err(StartError::new(format!(
                    "--insecure-loopback serves plaintext, so it listens only on loopback \
                     addresses (127.0.0.0/8, ::1), not {}; use TLS for other addresses",
                    self.listen.ip()
                )));
            }
        }
        if !(1.0..=NodeSpec::MAX_SLOWDOWN).contains(&self.slowdown) {
            return Err(StartError::new(format!(
                "--slowdown {}: must be a number from 1 to {}",
                self.slowdown,
                NodeSpec::MAX_SLOWDOWN
            )));
        }
        if let Some(s) = self.agent_full_speed {
            if !(s.is_finite() && s > 0.0) {
                return Err(StartError::new(format!(
                    "--agent-full-speed {s}: must be a positive number of MiB/s"
                )));
            }
        }
        if self.max_request_bytes == 0 || self.max_request_bytes > 1 << 30 {
            return Err(StartError::new(
                "--max-request-bytes: must be between 1 and 1073741824 (1 GiB)",
            ));
        }
        if self.max_streams == 0 || self.max_streams > 4096 {
            return Err(StartError::new("--max-streams: must be between 1 and 4096"));
        }
        if let Some(addr) = self.metrics {
            if !self.metrics_public && !is_loopback(addr.ip()) {
                return Err(StartError::new(format!(
                    "--metrics {addr}: the metrics are served in plaintext without \
                     authentication; listen on a loopback address (127.0.0.1:PORT), or add \
                     --metrics-public to serve them on {} anyway",
                    addr.ip()
                )));
            }
        }
        if self.agent_port.is_some() && !self.agent_public && !is_loopback(self.listen.ip()) {
            return Err(StartError::new(format!(
                "--agent-port: the agent check listens in plaintext on the --listen address, {}, \
                 which is not a loopback one; add --agent-public to serve it there anyway",
                self.listen.ip()
            )));
        }
        let positive = |name: &str, value: u64| {
            if value == 0 {
                Err(StartError::new(format!("--{name}: must be at least 1")))
            } else {
                Ok(())
            }
        };
        // Connections each hold a descriptor: more than Linux's ceiling on a process's
        // descriptors (`fs.nr_open`, 2^20 by default) could never be open.
        let at_most = |name: &str, value: usize, max: usize| {
            if value == 0 || value > max {
                Err(StartError::new(format!(
                    "--{name}: must be between 1 and {max}"
                )))
            } else {
                Ok(())
            }
        };
        at_most("max-connections", self.max_connections, MAX_CONNECTIONS)?;
        positive(
            "max-calls-per-connection",
            u64::from(self.max_calls_per_connection),
        )?;
        positive("idle-timeout-s", self.idle_timeout_s)?;
        positive("handshake-timeout-s", self.handshake_timeout_s)?;
        positive("keepalive-interval-s", self.keepalive_interval_s)?;
        positive("keepalive-timeout-s", self.keepalive_timeout_s)?;
        positive("stream-idle-ms", self.stream_idle_ms)?;
        at_most(
            "metrics-max-connections",
            self.metrics_max_connections,
            MAX_METRICS_CONNECTIONS,
        )?;
        positive("metrics-timeout-ms", self.metrics_timeout_ms)?;
        if let (Some(tls), Some(cert), Some(key)) = (&tls, &self.tls_cert, &self.tls_key) {
            tls.check_pem(cert, key, self.client_ca.as_deref())?;
        }
        Ok(Settings {
            listen: self.listen,
            tls,
            agent_port: self.agent_port,
            metrics: self.metrics,
            max_request_bytes: self.max_request_bytes,
            max_streams: self.max_streams,
            drain_grace: Duration::from_millis(self.drain_grace_ms),
            drain_timeout: Duration::from_secs(self.drain_timeout_s),
            conn: ConnLimits {
                max_connections: self.max_connections,
                idle: Duration::from_secs(self.idle_timeout_s),
                handshake: Duration::from_secs(self.handshake_timeout_s),
                linger: Duration::from_millis(self.linger_ms),
            },
            max_calls_per_connection: self.max_calls_per_connection,
            keepalive: (
                Duration::from_secs(self.keepalive_interval_s),
                Duration::from_secs(self.keepalive_timeout_s),
            ),
            stream_idle: Duration::from_millis(self.stream_idle_ms),
            metrics_limits: HttpLimits {
                max_connections: self.metrics_max_connections,
                timeout: Duration::from_millis(self.metrics_timeout_ms),
                linger: Duration::from_millis(self.linger_ms),
            },
        })
    }

    /// The service: an AES and an Ed25519 cluster of `--nodes` nodes each.
    fn service(&self, packet_size: usize) -> Result<Service, StartError> {
        let cores = core_affinity::get_core_ids().map_or(0, |c| c.len());
        let nodes = self.nodes.map_or(cores.max(1), |n| n as usize);
        let node = |i: usize, capacity: u64| {
            let spec = if self.pin && cores > 0 {
                NodeSpec::pinned(i % cores)
            } else {
                NodeSpec::new()
            };
            spec.capacity(capacity).slowdown(self.slowdown)
        };
        #[cfg(feature = "fault-injection")]
        let aes_node = |i: usize, capacity: u64| match self.fault_aes_panic_after {
            Some(after) if i == 0 => {
                node(i, capacity).fault(cryptodispatch::Fault::Panic { after })
            }
            _ => node(i, capacity),
        };
        #[cfg(not(feature = "fault-injection"))]
        let aes_node = node;
        let aes_capacity = NODE_PACKETS * packet_size as u64;
        // An Ed25519 message is one packet: every node can hold the largest allowed.
        let ed_capacity = aes_capacity.max(self.max_request_bytes as u64);
        let mut builder = Service::builder()
            .packet_size(packet_size)
            // A stream call keeps as many outputs unreceived as the library's stream holds.
            .stream_outputs(crate::stream::MAX_PENDING)
            .light_path(self.light_path || !self.no_light_path)
            .out_of_place(!self.in_place)
            .cluster(
                ClusterKind::Aes,
                (0..nodes).map(|i| aes_node(i, aes_capacity)),
            )
            .cluster(
                ClusterKind::Ed25519,
                (0..nodes).map(|i| node(i, ed_capacity)),
            );
        if let Some(name) = &self.policy {
            builder = builder.policy_name(name);
        }
        if let Some(implementation) = self.aes_implementation {
            builder = builder.aes_implementation(implementation);
        }
        if let Some(ms) = self.idle_poll_ms {
            builder = builder.idle_poll(std::time::Duration::from_millis(ms));
        }
        builder.build().map_err(|e| match e {
            BuildError::Config(c) => StartError::new(format!("--policy: {c}")),
            BuildError::Implementation(_) => StartError::new(format!("--aes-implementation: {e}")),
            BuildError::PacketSize(_) => StartError::new(format!("--packet-size: {e}")),
            other => StartError::failure(format!("cannot start the service: {other}")),
        })
    }
}

/// Builds the daemon's shared state: the service, its keys, the tokens.
///
/// # Errors
/// [`StartError`] from the service, the key folder or the tokens file.
pub fn build(args: &Args, settings: &Settings) -> Result<Daemon, StartError> {
    if args.tokens.is_none() && !args.allow_unauthenticated {
        return Err(StartError::new(
            "give --tokens FILE (a line per token: `TOKEN key1,key2` or `TOKEN *`), or \
             --allow-unauthenticated to let any client use every key",
        ));
    }
    let packet_size = args.packet_size.unwrap_or(16 * 1024);
    let service = Arc::new(args.service(packet_size)?);
    let keys = KeyRing::load(&args.keys, &service)?;
    if keys.len() == 0 {
        return Err(StartError::new(format!(
            "--keys {}: no key files (NAME.aes or NAME.ed25519)",
            args.keys.display()
        )));
    }
    let mut auth = match &args.tokens {
        Some(path) => Auth::load(path, &keys)?,
        None => Auth::Open,
    };
    auth.register(&service)?;
    let limits = Limits {
        max_request_bytes: settings.max_request_bytes,
        queue_wait: Duration::from_millis(args.queue_wait_ms),
        stream_idle: settings.stream_idle,
    };
    let weight = WeightConfig {
        packet_size: service.packet_size(),
        node_capacity: NODE_PACKETS * service.packet_size() as u64,
        full_speed: args.agent_full_speed.map(|mib| mib * f64::from(1u32 << 20)),
    };
    eprintln!(
        "cryptodispatchd: {} keys ({}), {} nodes",
        keys.len(),
        keys.names().collect::<Vec<_>>().join(", "),
        service.num_nodes()
    );
    let tenants = auth.tenants();
    if !tenants.is_empty() {
        let shown: Vec<String> = tenants
            .iter()
            .map(|t| format!("{} (weight {})", t.name(), t.get_weight()))
            .collect();
        eprintln!(
            "cryptodispatchd: tenants {} besides default",
            shown.join(", ")
        );
    }
    Ok(Daemon::new(
        service,
        keys,
        auth,
        limits,
        weight,
        settings.max_streams,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        for ok in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ok.parse().unwrap()), "{ok}");
        }
        for bad in [
            "0.0.0.0",
            "10.0.0.1",
            "::",
            "192.168.1.1",
            "::ffff:10.0.0.1",
            "fe80::1",
        ] {
            assert!(!is_loopback(bad.parse().unwrap()), "{bad}");
        }
    }
}
