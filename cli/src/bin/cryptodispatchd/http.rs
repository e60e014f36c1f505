//! A tiny HTTP/1.1 endpoint on `--metrics ADDR`, plaintext, one request per connection:
//!
//! - `GET /metrics`: the Prometheus metrics (OpenMetrics text);
//! - `GET /health`: `200 SERVING`, or `503 NOT_SERVING` while draining (for load balancers that
//!   check over HTTP/1; gRPC clients use `grpc.health.v1` on the main port);
//! - anything else: `404`, or `405` for another method.
//!
//! It shows counters and queue depths, never keys or tokens. It listens on a loopback address
//! unless `--metrics-public` says otherwise. Each connection has `--metrics-timeout-ms`
//! (default 2 s) to send its request head (at most 8 KiB) and take the answer, and at most
//! `--metrics-max-connections` (default 64) are served at once; the others wait in the kernel's
//! backlog until one ends, so idle connections delay a scrape by at most the timeout per
//! round of them rather than shutting it out. A failed `accept` is logged and backed off.
//! Connections close lingeringly (`conn::linger_close`).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::conn::{AcceptBackoff, linger_close};
use crate::daemon::Daemon;
use crate::metrics;

const MAX_HEAD: usize = 8 * 1024;
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The metrics server's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time for a connection's request and answer.
    pub timeout: Duration,
    /// Lingering close.
    pub linger: Duration,
}

/// Serves `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, daemon: Arc<Daemon>, limits: HttpLimits) {
    let registry = Arc::new(metrics::registry(Arc::clone(&daemon)));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut backoff = AcceptBackoff::new("metrics");
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let mut socket = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(e) => {
                backoff.failed(&e).await;
                continue;
            }
        };
        backoff.succeeded();
        let (daemon, registry) = (Arc::clone(&daemon), Arc::clone(&registry));
        tokio::spawn(async move {
            let _ =
                tokio::time::timeout(limits.timeout, answer(&mut socket, &daemon, &registry)).await;
            drop(permit);
            linger_close(socket, limits.linger).await;
        });
    }
}

async fn answer(
    socket: &mut TcpStream,
    daemon: &Daemon,
    registry: &Registry,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let (status, content_type, body) = match (method, path) {
        (b"GET", b"/metrics") => match metrics::encode(registry) {
            Ok(text) => ("200 OK", OPENMETRICS, text),
            Err(_) => (
                "500 Internal Server Error",
                "text/plain",
                "encoding failed\n".into(),
            ),
        },
        (b"GET", b"/health") if daemon.is_draining() => (
            "503 Service Unavailable",
            "text/plain",
            "NOT_SERVING\n".into(),
        ),
        (b"GET", b"/health") => ("200 OK", "text/plain", "SERVING\n".into()),
        (b"GET", _) => (
            "404 Not Found",
            "text/plain",
            "try /metrics or /health\n".into(),
        ),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.flush().await
}
