//! `cryptodispatchd`: the cryptodispatch service on the network, over gRPC (tonic).
//!
//! ```text
//! cryptodispatchd --keys DIR --tokens FILE --tls-cert CERT.pem --tls-key KEY.pem [--client-ca CA.pem]
//!                 [--listen ADDR] [--metrics ADDR] [--agent-port PORT] [--nodes N] ...
//! cryptodispatchd --keys DIR --tokens FILE --insecure-loopback --listen 127.0.0.1:50051
//! ```
//!
//! The API is `proto/cryptodispatch.proto`: Encrypt, Decrypt, GcmEncrypt, GcmDecrypt, Sign,
//! Verify, VerifyBatch, GetPublicKey, a bidirectional Stream (one chained AES job fed chunk by chunk), and the
//! standard `grpc.health.v1` health service. Keys stay on the server (`keys` module); calls
//! name them and carry a bearer token (`tokens` module), which also names the tenant the call's
//! job runs under: tenants share the service by weight, each within its own limits.
//!
//! # Start
//! 1. The options are checked: TLS (`--tls-cert` and `--tls-key`, PEM; `--client-ca` to ask
//!    for client certificates), or `--insecure-loopback`, which serves plaintext and refuses any
//!    listen address outside 127.0.0.0/8 and ::1. Without either, the daemon refuses to start.
//! 2. The service is built (`--nodes` per cluster, `--slowdown`, `--policy`, ...), the keys and
//!    tokens are read; any secret file readable by group or others stops the start.
//! 3. The listeners are bound; one line on standard output says where:
//!    `cryptodispatchd ready grpc=ADDR agent=ADDR|- metrics=ADDR|-`.
//!
//! # Calls
//! Every call is refused with `UNAVAILABLE` while draining, then authenticated, both from its
//! headers before its body is read (`gate` module); then decoded (bounded: `remote::codec`),
//! then checked
//! (sizes against `--max-request-bytes`, the key and its kind, mode, IV, padding), then
//! admitted with [`Service::submit_async`](cryptodispatch::Service::submit_async) under its
//! token's tenant within `--queue-wait-ms` (else `RESOURCE_EXHAUSTED`, saying whether the
//! tenant's limits or the queues held it, with the trailer `grpc-retry-pushback-ms`), and its
//! result awaited on the
//! [`JobHandle`](cryptodispatch::JobHandle), a future: no executor thread ever blocks on the
//! service. Messages over `--max-request-bytes` plus 64 KiB are refused by tonic before they
//! are read (`OUT_OF_RANGE`).
//!
//! # Drain (SIGTERM or SIGINT)
//! 1. New calls get `UNAVAILABLE`, health goes `NOT_SERVING` (the whole server and the
//!    CryptoDispatch service), the agent check answers `drain`;
//! 2. after `--drain-grace-ms` (time for load balancers to notice), the listener closes and
//!    HTTP/2 connections get GOAWAY; calls in flight finish; each connection then closes
//!    lingeringly (stop writing, read what the client still sends until it closes or
//!    `--linger-ms` passes, then close), so that no client's last response is reset;
//! 3. once every connection is closed, the service shuts down (every admitted job completes)
//!    and the daemon exits 0. If step 2–3 takes longer than `--drain-timeout-s`, it exits 1.
//!
//! # Connections
//! At most `--max-connections` at once, `--max-calls-per-connection` calls on each; closed
//! after `--idle-timeout-s` without a call, or `--handshake-timeout-s` without a first call;
//! HTTP/2 keepalive pings; `accept` failures logged and backed off (`conn` module).
//!
//! Exit status: 0 after a drain; 1 for a failure (a port in use, a drain that timed out); 2
//! when it refuses to start (bad options, unsafe files, bad keys or tokens).

// tonic's `Status` (176 bytes) is the error of every gRPC handler; the helpers that build it
// return it as it is rather than boxing it for the handler to unbox.
#![allow(clippy::result_large_err)]

#[path = "cryptodispatchd/agent.rs"]
mod agent;
#[path = "cryptodispatchd/api.rs"]
mod api;
#[path = "cryptodispatchd/config.rs"]
mod config;
#[path = "cryptodispatchd/conn.rs"]
mod conn;
#[path = "cryptodispatchd/daemon.rs"]
mod daemon;
#[path = "cryptodispatchd/gate.rs"]
mod gate;
#[path = "cryptodispatchd/http.rs"]
mod http;
#[path = "cryptodispatchd/keys.rs"]
mod keys;
#[path = "cryptodispatchd/metrics.rs"]
mod metrics;
#[allow(dead_code)]
#[path = "remote/mod.rs"]
mod remote;
#[path = "cryptodispatchd/secret_file.rs"]
mod secret_file;
#[path = "cryptodispatchd/status.rs"]
mod status;
#[path = "cryptodispatchd/stream.rs"]
mod stream;
#[path = "cryptodispatchd/tokens.rs"]
mod tokens;

use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;
use tonic::transport::Server;
use tonic_health::ServingStatus;

use crate::api::Api;
use crate::config::{Args, Settings};
use crate::daemon::Daemon;
use crate::gate::Gate;
use crate::remote::proto::crypto_dispatch_server::CryptoDispatchServer;

/// The largest `grpc.health.v1` request decoded.
const HEALTH_MESSAGE_LIMIT: usize = 4096;

/// Why the daemon did not start or stopped: the message and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    message: String,
    code: u8,
}

impl StartError {
    /// A refusal to start (exit 2).
    pub fn new(message: impl Into<String>) -> Self {
        StartError {
            message: message.into(),
            code: 2,
        }
    }

    /// A failure (exit 1).
    pub fn failure(message: impl Into<String>) -> Self {
        StartError {
            message: message.into(),
            code: 1,
        }
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StartError {}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cryptodispatchd: {e}");
            ExitCode::from(e.code)
        }
    }
}

/// Starts, serves until a drain completes, and stops.
fn run(args: &Args) -> Result<(), StartError> {
    let settings = args.settings()?;
    let daemon = Arc::new(config::build(args, &settings)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cryptodispatchd")
        .max_blocking_threads(settings.max_streams + 8)
        .build()
        .map_err(|e| StartError::failure(format!("cannot start the async runtime: {e}")))?;
    let served = runtime.block_on(serve(Arc::clone(&daemon), &settings));
    // Streams whose clients vanished may still hold a blocking thread for a moment.
    runtime.shutdown_timeout(Duration::from_secs(1));
    // Every call has ended; let every admitted job complete and stop the workers.
    daemon.service.shutdown();
    served
}

/// Binds the listeners, serves, and drains on SIGTERM or SIGINT.
async fn serve(daemon: Arc<Daemon>, settings: &Settings) -> Result<(), StartError> {
    let bind_error = |what: &str, addr: SocketAddr, e: &dyn fmt::Display| {
        StartError::failure(format!("cannot listen on {addr} ({what}): {e}"))
    };
    let listener = TcpListener::bind(settings.listen)
        .await
        .map_err(|e| bind_error("gRPC", settings.listen, &e))?;
    let grpc = listener
        .local_addr()
        .map_err(|e| bind_error("gRPC", settings.listen, &e))?;
    let lingering = conn::Lingering::default();
    let incoming = conn::incoming(listener, settings.conn, lingering.clone());

    let agent = match settings.agent_port {
        Some(port) => {
            let addr = SocketAddr::new(grpc.ip(), port);
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|e| bind_error("agent check", addr, &e))?;
            let bound = listener.local_addr().ok();
            tokio::spawn(agent::serve(
                listener,
                Arc::clone(&daemon),
                settings.conn.linger,
            ));
            bound
        }
        None => None,
    };
    let metrics = match settings.metrics {
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|e| bind_error("metrics", addr, &e))?;
            let bound = listener.local_addr().ok();
            tokio::spawn(http::serve(
                listener,
                Arc::clone(&daemon),
                settings.metrics_limits,
            ));
            bound
        }
        None => None,
    };

    let (reporter, health) = tonic_health::server::health_reporter();
    // The health service is open to all (load balancers ask it without a token): its request
    // is a service name, so a small limit bounds what an unauthenticated caller may send.
    let health = health.max_decoding_message_size(HEALTH_MESSAGE_LIMIT);
    reporter.set_serving::<CryptoDispatchServer<Api>>().await;
    let limit = settings
        .max_request_bytes
        .saturating_add(config::MESSAGE_OVERHEAD);
    let api = CryptoDispatchServer::new(Api(Arc::clone(&daemon)))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit);
    // Calls are refused or authenticated from their headers before their bodies are read.
    let api = Gate::new(api, Arc::clone(&daemon));
    let (keepalive_interval, keepalive_timeout) = settings.keepalive;
    let mut builder = Server::builder()
        // What a call may make the daemon buffer before its headers are authenticated and its
        // body read: a header list of 16 KiB; of its body, the HTTP/2 flow-control windows,
        // 1 MiB a stream and 1 MiB a connection (hyper's defaults, fixed here).
        .http2_max_header_list_size(16 * 1024)
        .initial_stream_window_size(1 << 20)
        .initial_connection_window_size(1 << 20)
        .http2_keepalive_interval(Some(keepalive_interval))
        .http2_keepalive_timeout(Some(keepalive_timeout))
        .max_concurrent_streams(settings.max_calls_per_connection)
        .concurrency_limit_per_connection(settings.max_calls_per_connection as usize);
    if let Some(tls) = &settings.tls {
        builder = builder
            .tls_config(tls.server_config())
            .map_err(|e| StartError::new(format!("TLS: {}", remote::client::source_chain(&e))))?;
    }

    let signal_error =
        |e: std::io::Error| StartError::failure(format!("cannot watch for signals: {e}"));
    let mut term = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let drain_started = Arc::new(Notify::new());
    let shutdown = {
        let (daemon, drain_started) = (Arc::clone(&daemon), Arc::clone(&drain_started));
        let grace = settings.drain_grace;
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = interrupt.recv() => {}
            }
            eprintln!(
                "cryptodispatchd: draining: new calls get UNAVAILABLE, health is NOT_SERVING"
            );
            daemon.start_draining();
            reporter
                .set_not_serving::<CryptoDispatchServer<Api>>()
                .await;
            reporter
                .set_service_status("", ServingStatus::NotServing)
                .await;
            drain_started.notify_one();
            tokio::time::sleep(grace).await;
        }
    };

    let show = |a: Option<SocketAddr>| a.map_or("-".to_string(), |a| a.to_string());
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "cryptodispatchd ready grpc={grpc} agent={} metrics={} tls={}",
        show(agent),
        show(metrics),
        if settings.tls.is_some() { "on" } else { "off" }
    );
    let _ = stdout.flush();
    drop(stdout);

    let server = builder
        .add_service(health)
        .add_service(api)
        .serve_with_incoming_shutdown(incoming, shutdown);
    // Saturating: a timeout past what a clock can count waits for the calls to end.
    let timeout = settings.drain_grace.saturating_add(settings.drain_timeout);
    tokio::select! {
        served = server => {
            served.map_err(|e| StartError::failure(format!("serving: {}", remote::client::source_chain(&e))))?;
        }
        () = async { drain_started.notified().await; tokio::time::sleep(timeout).await } => {
            // The server may still be closing connections when the timer ends a drain with
            // nothing in flight (with --drain-timeout-s 0, always): that drain is done.
            let in_flight = daemon.rpc.calls_in_flight();
            if in_flight > 0 {
                return Err(StartError::failure(format!(
                    "the drain did not finish within {} ms; exiting with {in_flight} call{} in \
                     flight",
                    timeout.as_millis(),
                    if in_flight == 1 { "" } else { "s" }
                )));
            }
        }
    }
    // Connections closed by the drain finish their lingering close.
    lingering
        .wait(settings.conn.linger + Duration::from_millis(100))
        .await;
    eprintln!("cryptodispatchd: drained; every call has ended");
    Ok(())
}
