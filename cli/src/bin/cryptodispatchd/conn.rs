//! The connections of the daemon's listeners: accepted by the daemon's own loop, bounded in
//! number, closed when idle, and closed lingeringly.
//!
//! - **Accepting**: at most `--max-connections` gRPC connections are open at once; when they
//!   are all taken, the loop stops accepting (new clients wait in the kernel's backlog) instead
//!   of accepting and dropping. An `accept` that fails (running out of descriptors, EMFILE or
//!   ENFILE, or memory) is logged, at most once a second with a count of the others, and
//!   followed by a pause that doubles from 10 ms to 1 s: the loop never spins on it.
//! - **Idle**: a connection with no call in progress for `--idle-timeout-s` is closed, whether
//!   or not it sends anything (HTTP/2 keepalive pings do not keep it open; neither do health
//!   checks, which need no token: a `Watch` is cut with its connection, and the watcher
//!   reconnects). A new connection
//!   must begin its first call within `--handshake-timeout-s` (TLS handshake and HTTP/2 set-up
//!   included): a TCP connection that sends nothing, or a TLS handshake that stalls, is closed
//!   then.
//! - **Lingering close**: when a connection ends (a drain's GOAWAY, an idle timeout, an error),
//!   the daemon stops writing (FIN), reads and discards whatever the client still sends until
//!   it closes its side or `--linger-ms` passes, and only then closes the socket. Closing with
//!   unread bytes in the receive buffer would send a TCP reset, and a reset can destroy a
//!   response the client has not read yet.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Sleep;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http;
use tonic::transport::server::{Connected, TlsConnectInfo};

/// How the gRPC connections are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once, at most.
    pub max_connections: usize,
    /// A connection without a call in progress for this long is closed.
    pub idle: Duration,
    /// A new connection must begin its first call within this time (its TLS handshake and
    /// HTTP/2 set-up included), or it is closed.
    pub handshake: Duration,
    /// How long a closing connection reads what its client still sends.
    pub linger: Duration,
}

/// What a connection shares with the calls on it.
#[derive(Debug)]
struct ConnState {
    active: AtomicUsize,
    /// Whether a call has begun on the connection (its handshake is over).
    started: AtomicBool,
    idle_since: Mutex<Instant>,
}

/// The connection a call came on, as a request extension (`ConnInfo` for plaintext, inside
/// tonic's `TlsConnectInfo` for TLS).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The client's address.
    pub remote: Option<SocketAddr>,
    state: Arc<ConnState>,
}

impl ConnInfo {
    /// Marks a call in progress on the connection until the guard drops.
    pub fn busy(&self) -> Busy {
        self.state.active.fetch_add(1, Ordering::SeqCst);
        self.state.started.store(true, Ordering::SeqCst);
        Busy(Arc::clone(&self.state))
    }

    /// The connection of a call, plaintext or TLS.
    pub fn of(extensions: &http::Extensions) -> Option<&ConnInfo> {
        extensions.get::<ConnInfo>().or_else(|| {
            extensions
                .get::<TlsConnectInfo<ConnInfo>>()
                .map(TlsConnectInfo::get_ref)
        })
    }
}

/// A call in progress on a connection: the connection is not idle while one exists.
pub struct Busy(Arc<ConnState>);

impl fmt::Debug for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Busy")
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            if let Ok(mut since) = self.0.idle_since.lock() {
                *since = Instant::now();
            }
        }
    }
}

/// Counts the sockets still lingering, so that the daemon waits for them before it exits.
#[derive(Debug, Clone, Default)]
pub struct Lingering(Arc<()>);

impl Lingering {
    /// Waits until no socket lingers, at most `within`.
    pub async fn wait(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while Arc::strong_count(&self.0) > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// An accepted gRPC connection.
pub struct Conn {
    stream: Option<TcpStream>,
    info: ConnInfo,
    idle: Duration,
    /// The time by which the first call must begin.
    handshake_deadline: Instant,
    check: Pin<Box<Sleep>>,
    linger: Duration,
    lingering: Lingering,
    permit: Option<OwnedSemaphorePermit>,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("remote", &self.info.remote)
            .finish_non_exhaustive()
    }
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}

impl Conn {
    fn closed() -> io::Error {
        io::Error::new(io::ErrorKind::NotConnected, "the connection is closed")
    }

    /// Whether the connection has had no call in progress for the idle timeout; registers a
    /// wake-up for the next check otherwise.
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.check.as_mut().poll(cx).is_pending() {
                return false;
            }
            let now = Instant::now();
            let state = &self.info.state;
            let deadline = if state.active.load(Ordering::SeqCst) > 0 {
                now + self.idle
            } else if !state.started.load(Ordering::SeqCst) {
                self.handshake_deadline
            } else {
                let since = self
                    .info
                    .state
                    .idle_since
                    .lock()
                    .map_or(now, |since| *since);
                since + self.idle
            };
            if deadline <= now {
                return true;
            }
            self.check.as_mut().reset(deadline.into());
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some(stream) = this.stream.as_mut() else {
            return Poll::Ready(Err(Conn::closed()));
        };
        match Pin::new(stream).poll_read(cx, buf) {
            Poll::Pending if this.idle_expired(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the connection was idle past --idle-timeout-s (or --handshake-timeout-s)",
            ))),
            other => other,
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().stream.as_mut() {
            Some(s) => Pin::new(s).poll_write(cx, buf),
            None => Poll::Ready(Err(Conn::closed())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream.as_mut() {
            Some(s) => Pin::new(s).poll_flush(cx),
            None => Poll::Ready(Err(Conn::closed())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream.as_mut() {
            Some(s) => Pin::new(s).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let (Some(stream), Ok(runtime)) =
            (self.stream.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        if self.linger.is_zero() {
            return;
        }
        let (linger, lingering, permit) = (self.linger, self.lingering.clone(), self.permit.take());
        runtime.spawn(async move {
            linger_close(stream, linger).await;
            drop((lingering, permit));
        });
    }
}

/// Stops writing, reads until the client closes or `linger` passes, then closes.
pub async fn linger_close(mut stream: TcpStream, linger: Duration) {
    let _ = tokio::time::timeout(linger, async {
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// Logs failed `accept`s at most once a second and pauses after each, longer while they go on.
#[derive(Debug)]
pub struct AcceptBackoff {
    what: &'static str,
    pause: Duration,
    last_log: Option<Instant>,
    unlogged: u64,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    /// A backoff for the listener `what` ("gRPC", "metrics", "agent check").
    pub fn new(what: &'static str) -> Self {
        AcceptBackoff {
            what,
            pause: Self::FIRST,
            last_log: None,
            unlogged: 0,
        }
    }

    /// After a successful `accept`.
    pub fn succeeded(&mut self) {
        self.pause = Self::FIRST;
    }

    /// After a failed `accept`: logs (rate-limited) and pauses.
    pub async fn failed(&mut self, e: &io::Error) {
        let scarce = matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
        );
        let now = Instant::now();
        if self
            .last_log
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            let more = if self.unlogged > 0 {
                format!(" ({} more since the last message)", self.unlogged)
            } else {
                String::new()
            };
            let hint = if scarce {
                "; out of descriptors or memory: raise the limit (ulimit -n, LimitNOFILE) or lower \
                 --max-connections"
            } else {
                ""
            };
            eprintln!(
                "cryptodispatchd: {} listener: accept failed: {e}{more}{hint}; pausing {} ms",
                self.what,
                self.pause.as_millis()
            );
            self.last_log = Some(now);
            self.unlogged = 0;
        } else {
            self.unlogged += 1;
        }
        tokio::time::sleep(self.pause).await;
        if scarce {
            self.pause = (self.pause * 2).min(Self::MAX);
        }
    }
}

/// Accepts gRPC connections from `listener` within `limits`, until the stream is dropped.
pub fn incoming(
    listener: TcpListener,
    limits: ConnLimits,
    lingering: Lingering,
) -> ReceiverStream<Result<Conn, io::Error>> {
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        let permits = Arc::new(Semaphore::new(limits.max_connections));
        let mut backoff = AcceptBackoff::new("gRPC");
        loop {
            let permit = tokio::select! {
                p = Arc::clone(&permits).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
                () = tx.closed() => return,
            };
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = tx.closed() => return,
            };
            let (stream, remote) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    backoff.failed(&e).await;
                    continue;
                }
            };
            backoff.succeeded();
            let _ = stream.set_nodelay(true);
            let now = Instant::now();
            let first = limits.handshake.min(limits.idle);
            let conn = Conn {
                stream: Some(stream),
                info: ConnInfo {
                    remote: Some(remote),
                    state: Arc::new(ConnState {
                        active: AtomicUsize::new(0),
                        started: AtomicBool::new(false),
                        idle_since: Mutex::new(now),
                    }),
                },
                idle: limits.idle,
                handshake_deadline: now + first,
                check: Box::pin(tokio::time::sleep(first)),
                linger: limits.linger,
                lingering: lingering.clone(),
                permit: Some(permit),
            };
            if tx.send(Ok(conn)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}
