//! A tiny HTTP/1.1 endpoint on `--metrics ADDR`, plaintext, one request per connection:
//!
//! - `GET /metrics`: the Prometheus metrics (OpenMetrics text);
//! - `GET /health`: `200 SERVING`, or `503 NOT_SERVING` while draining (for load balancers that
//!   check over HTTP/1; gRPC clients use `grpc.health.v1` on the main port);
//! - anything else: `404`, or `405` for another method.
//!
//! It shows counters and queue depths, never keys or tokens. Each connection has 5 seconds to
//! send its request head (at most 8 KiB), and at most 16 are served at once; the others are
//! closed unanswered.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::daemon::Daemon;
use crate::metrics;

const MAX_HEAD: usize = 8 * 1024;
const MAX_CONNECTIONS: usize = 16;
const TIMEOUT: Duration = Duration::from_secs(5);
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, daemon: Arc<Daemon>) {
    let registry = Arc::new(metrics::registry(Arc::clone(&daemon)));
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            continue;
        };
        let (daemon, registry) = (Arc::clone(&daemon), Arc::clone(&registry));
        tokio::spawn(async move {
            let _ = tokio::time::timeout(TIMEOUT, answer(socket, &daemon, &registry)).await;
            drop(permit);
        });
    }
}

async fn answer(
    mut socket: TcpStream,
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
    socket.shutdown().await
}
