//! The `Stream` call: one RPC stream is one chained AES job of the library
//! ([`Service::stream`](cryptodispatch::Service::stream)), fed chunk by chunk.
//!
//! The first message names the key, direction, mode, IV and padding (`start`); chunks may have
//! any length. The job's input is the chunks' concatenation, and it ends with the request
//! stream or at a message marked `last`. Outputs come back in order as they are ready; their
//! concatenation is exactly the one-shot result, and the final response is marked `last`.
//!
//! # How it runs
//! The library's `Stream` blocks (pushing waits for room in the receive queue, receiving waits
//! for an output), so each stream runs on a thread of tokio's blocking pool, never on an
//! executor thread; `--max-streams` bounds how many run at once (more get
//! `RESOURCE_EXHAUSTED`); a stream's slot is free by the time its status reaches the client,
//! so a client may open its next stream at once. An async task reads the request stream into
//! a small channel, which gives the client backpressure. The runner pushes every whole block
//! it has except the last (a padded decryption must end with its final block, so one block is
//! always held back until the input ends), in pieces of at most the packet size, keeps at most
//! [`MAX_PENDING`] pieces in flight, and sends each output as soon as it is ready, without
//! waiting for more input.
//! A failure ends the call with its status; a client that goes away drops the stream, which
//! closes the job.
//!
//! # Bounds
//! - A stream that goes `--stream-idle-ms` without a request message (the first included) ends
//!   with `DEADLINE_EXCEEDED`, and so does one whose client takes no response for as long
//!   while the daemon has one to send: an idle stream does not hold its slot for ever.
//! - Nothing may follow a message marked `last`: a message after it that arrives before the
//!   call's status is sent (the status waits, after the last output, up to [`LAST_GRACE`] for
//!   the client to close its side) fails the call with `INVALID_ARGUMENT`.
//! - A length error names the stream's whole input length, not the last piece's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use cryptodispatch::crypto::BLOCK;
use cryptodispatch::error::CryptoError;
use cryptodispatch::{AesOp, Direction, JobError, Stream, SubmitError};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status, Streaming};

use crate::api::{check_iv, mode, padding};
use crate::daemon::Daemon;
use crate::keys::KeyKind;
use crate::remote::proto::{self, StreamRequest, StreamResponse};
use crate::status::{job_status, submit_status};

/// Pieces pushed to the service whose outputs have not been sent yet, at most.
pub(crate) const MAX_PENDING: usize = 64;
/// Request messages read ahead of the runner.
const INPUT_BUFFER: usize = 4;
/// Responses ready and not yet taken by the connection.
const OUTPUT_BUFFER: usize = 4;
/// After a stream's last output, how long its status waits for the client to close its side
/// (a message sent after `last` fails the call rather than being ignored).
pub const LAST_GRACE: Duration = Duration::from_millis(250);

/// What the call answers: the outputs, then the final message or an error; after the
/// runner's last output, the reader's verdict on what followed `last` (an error ends the call
/// with it).
#[derive(Debug)]
pub struct ResponseStream {
    outputs: mpsc::Receiver<Result<StreamResponse, Status>>,
    cut: Cut,
    verdict: Option<oneshot::Receiver<Status>>,
    /// Bounds the wait for the verdict, from the last output.
    grace: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The runner's error, given once it has ended.
    failed: Option<Status>,
    done: bool,
}

impl tokio_stream::Stream for ResponseStream {
    type Item = Result<StreamResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        // An error is the runner's last item; it is held until the runner has ended (its
        // slot free), so a client that has its status can open its next stream at once.
        loop {
            match this.outputs.poll_recv(cx) {
                Poll::Ready(Some(Ok(response))) if this.failed.is_none() => {
                    return Poll::Ready(Some(Ok(response)));
                }
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(status))) => {
                    this.failed.get_or_insert(status);
                }
                Poll::Ready(None) => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        let cut = this.cut.lock().ok().and_then(|mut c| c.take());
        if let Some(status) = this.failed.take().or(cut) {
            this.done = true;
            return Poll::Ready(Some(Err(status)));
        }
        let Some(verdict) = this.verdict.as_mut() else {
            this.done = true;
            return Poll::Ready(None);
        };
        match Pin::new(verdict).poll(cx) {
            Poll::Pending => {
                let grace = this
                    .grace
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(LAST_GRACE)));
                if grace.as_mut().poll(cx).is_ready() {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending
            }
            Poll::Ready(failed) => {
                this.done = true;
                // A dropped sender is no complaint: the input ended cleanly.
                Poll::Ready(failed.ok().map(Err))
            }
        }
    }
}

/// The status for an error reading the request stream: a malformed framing (tonic says
/// `INTERNAL`) is the client's fault, `INVALID_ARGUMENT`; the rest as they are.
fn inbound_status(status: Status) -> Status {
    let framing = status
        .message()
        .starts_with("protocol error: received message with")
        || status
            .message()
            .starts_with("Unexpected EOF decoding stream")
        || status.message().starts_with("Error decompressing");
    if status.code() == tonic::Code::Internal && framing {
        Status::invalid_argument(status.message().to_owned())
    } else {
        status
    }
}

/// The status of a stream without a message for `gap`.
fn idle_status(gap: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "the stream went {} ms without a message (--stream-idle-ms)",
        gap.as_millis()
    ))
}

/// What the reader hands the runner.
#[derive(Debug)]
enum Input {
    Chunk(Vec<u8>),
    End,
    Failed(Status),
}

/// Opens the stream: checks the first message, starts the reader and the runner.
///
/// # Errors
/// As the unary calls for draining, the token, the key, mode, IV and padding; an empty request
/// stream or a first message without `start` is `INVALID_ARGUMENT`; too many open streams is
/// `RESOURCE_EXHAUSTED`.
pub async fn open(
    d: Arc<Daemon>,
    request: Request<Streaming<StreamRequest>>,
) -> Result<Response<ResponseStream>, Status> {
    // A stream runs in the default tenant whatever its caller's: the library's streams are not
    // under tenants. Its token's grant still decides the key.
    let (caller, busy) = d.admitted(&request)?;
    let gap = d.limits.stream_idle;
    let mut inbound = request.into_inner();
    let first = tokio::time::timeout(gap, inbound.message())
        .await
        .map_err(|_| idle_status(gap))?
        .map_err(inbound_status)?
        .ok_or_else(|| Status::invalid_argument("the stream sent no message"))?;
    let start = first
        .start
        .ok_or_else(|| Status::invalid_argument("the first message must carry `start`"))?;
    let key = d.key(&caller.grant, &start.key, KeyKind::Aes)?;
    let direction = match proto::Direction::try_from(start.direction) {
        Ok(proto::Direction::Encrypt) => Direction::Encrypt,
        Ok(proto::Direction::Decrypt) => Direction::Decrypt,
        _ => {
            return Err(Status::invalid_argument(
                "direction: give DIRECTION_ENCRYPT or DIRECTION_DECRYPT",
            ));
        }
    };
    let mode = mode(start.mode)?;
    let padding = padding(start.padding, mode)?;
    check_iv(mode, &start.iv)?;
    d.check_size(first.chunk.len())?;
    let permit = Arc::clone(&d.streams).try_acquire_owned().map_err(|_| {
        Status::resource_exhausted("too many open streams on this daemon (--max-streams)")
    })?;
    let op = AesOp::new(direction, mode).with_padding(padding);
    let job = d
        .service
        .stream(key.id, op, &start.iv)
        .map_err(submit_status)?;

    let (in_tx, in_rx) = mpsc::channel(INPUT_BUFFER);
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_BUFFER);
    let (verdict_tx, verdict_rx) = oneshot::channel();
    let reader = Reader {
        inbound,
        tx: in_tx,
        max: d.limits.max_request_bytes,
        gap,
    };
    tokio::spawn(reader.read(first.chunk, first.last, verdict_tx));
    let packet = d.service.packet_size();
    let handle = tokio::runtime::Handle::current();
    let cut = Cut::default();
    let runner_cut = Arc::clone(&cut);
    tokio::task::spawn_blocking(move || {
        Runner {
            job,
            _slot: permit,
            packet,
            out: out_tx,
            handle,
            gap,
            total: 0,
            cut: runner_cut,
        }
        .run(in_rx);
        // `run` consumed the runner, closing `outputs`; the slot must be free before that,
        // so the runner gives it back first (see `Runner::_slot`).
        drop(busy);
    });
    Ok(Response::new(ResponseStream {
        outputs: out_rx,
        cut,
        verdict: Some(verdict_rx),
        grace: None,
        failed: None,
        done: false,
    }))
}

/// The async side: reads the request stream for the runner.
struct Reader {
    inbound: Streaming<StreamRequest>,
    tx: mpsc::Sender<Input>,
    max: usize,
    gap: Duration,
}

impl Reader {
    /// The next request message, within the stream's idle bound.
    async fn next(&mut self) -> Result<Option<StreamRequest>, Status> {
        tokio::time::timeout(self.gap, self.inbound.message())
            .await
            .map_err(|_| idle_status(self.gap))?
            .map_err(inbound_status)
    }

    async fn fail(&mut self, status: Status) {
        let _ = self.tx.send(Input::Failed(status)).await;
    }

    /// Reads the request stream into the runner's channel until its end, a message marked
    /// `last`, or an error; after `last`, waits for the client to close its side and reports a
    /// message sent after it through `verdict`.
    async fn read(mut self, first_chunk: Vec<u8>, first_is_last: bool, verdict: Verdict) {
        let mut pending = Some((first_chunk, first_is_last));
        loop {
            let (chunk, last) = match pending.take() {
                Some(first) => first,
                None => match self.next().await {
                    Ok(Some(m)) if m.start.is_some() => {
                        let e =
                            Status::invalid_argument("only the first message may carry `start`");
                        return self.fail(e).await;
                    }
                    Ok(Some(m)) if m.chunk.len() > self.max => {
                        let e = Status::invalid_argument(format!(
                            "a chunk of {} bytes is over this daemon's limit of {} bytes",
                            m.chunk.len(),
                            self.max
                        ));
                        return self.fail(e).await;
                    }
                    Ok(Some(m)) => (m.chunk, m.last),
                    Ok(None) => {
                        let _ = self.tx.send(Input::End).await;
                        return;
                    }
                    Err(status) => return self.fail(status).await,
                },
            };
            if !chunk.is_empty() && self.tx.send(Input::Chunk(chunk)).await.is_err() {
                return;
            }
            if last {
                let _ = self.tx.send(Input::End).await;
                // Nothing may follow `last`: watch for a message until the call has ended.
                let mut verdict = verdict;
                let next = tokio::select! {
                    next = self.next() => next,
                    () = verdict.closed() => return,
                };
                if let Ok(Some(_)) = next {
                    let _ = verdict.send(Status::invalid_argument(
                        "a message followed the one marked `last`; nothing may follow it",
                    ));
                }
                return;
            }
        }
    }
}

/// Where the reader reports a message after `last`.
type Verdict = oneshot::Sender<Status>;

/// The blocking side: the library's stream and where its outputs go.
struct Runner {
    job: Stream,
    /// The stream's slot of `--max-streams`. Fields drop in order: the job, then the slot,
    /// then `out`, whose closing is what lets the call's status go. A client that has its
    /// status may open its next stream at once.
    _slot: tokio::sync::OwnedSemaphorePermit,
    packet: usize,
    out: mpsc::Sender<Result<StreamResponse, Status>>,
    /// The runtime, to wait for room in `out` within `gap`.
    handle: tokio::runtime::Handle,
    gap: Duration,
    /// Input bytes so far.
    total: usize,
    /// The status that ends a call cut short (its queue full for `gap`).
    cut: Cut,
}

/// The status of a call the runner cut short, given after the responses already queued.
type Cut = Arc<Mutex<Option<Status>>>;

impl Runner {
    /// Feeds the job from `input` and sends its outputs, until the job ends or fails or the
    /// client goes away.
    fn run(mut self, mut input: mpsc::Receiver<Input>) {
        let mut held: Vec<u8> = Vec::new();
        loop {
            let next = match input.try_recv() {
                Ok(next) => next,
                Err(TryRecvError::Empty) if self.job.pending() > 0 => {
                    // No input yet: send the oldest output meanwhile.
                    if !self.send_next() {
                        return;
                    }
                    continue;
                }
                Err(TryRecvError::Empty) => match input.blocking_recv() {
                    Some(next) => next,
                    None => return,
                },
                Err(TryRecvError::Disconnected) => return,
            };
            match next {
                Input::Chunk(chunk) => {
                    self.total = self.total.saturating_add(chunk.len());
                    if held.is_empty() {
                        held = chunk;
                    } else {
                        held.extend_from_slice(&chunk);
                    }
                    if held.is_empty() {
                        continue;
                    }
                    // Keep the last block, whole or partial, for `finish`.
                    let keep = (held.len() - 1) % BLOCK + 1;
                    let rest = held.split_off(held.len() - keep);
                    let ready = std::mem::replace(&mut held, rest);
                    if !self.push(&ready) {
                        return;
                    }
                }
                Input::End => {
                    if !self.make_room() {
                        return;
                    }
                    if let Err(e) = self.job.finish(std::mem::take(&mut held)) {
                        let status = match e {
                            // The job saw only the final piece: name the whole input.
                            SubmitError::Crypto(CryptoError::NotBlockAligned { .. }) => {
                                submit_status(SubmitError::Crypto(CryptoError::NotBlockAligned {
                                    len: self.total,
                                }))
                            }
                            other => submit_status(other),
                        };
                        self.deliver(Err(status));
                        return;
                    }
                    while self.job.pending() > 0 {
                        if !self.send_next() {
                            return;
                        }
                    }
                    let end = StreamResponse {
                        chunk: Vec::new(),
                        last: true,
                    };
                    self.deliver(Ok(end));
                    return;
                }
                Input::Failed(status) => {
                    self.deliver(Err(status));
                    return;
                }
            }
        }
    }

    /// Sends outputs until the stream holds fewer than `MAX_PENDING` unreceived; `false` if the
    /// call ended on the way.
    fn make_room(&mut self) -> bool {
        while self.job.pending() >= MAX_PENDING {
            if !self.send_next() {
                return false;
            }
        }
        true
    }

    /// Pushes whole blocks in pieces of at most the packet size; sends the outputs ready.
    fn push(&mut self, data: &[u8]) -> bool {
        for piece in data.chunks(self.packet) {
            if !self.make_room() {
                return false;
            }
            if let Err(e) = self.job.push(piece) {
                self.deliver(Err(submit_status(e)));
                return false;
            }
            while let Some(output) = self.job.try_recv() {
                if !self.send(output) {
                    return false;
                }
            }
        }
        true
    }

    /// Waits for the oldest output and sends it.
    fn send_next(&mut self) -> bool {
        match self.job.recv() {
            Some(output) => self.send(output),
            None => true,
        }
    }

    /// Sends one output; `false` when the call is over (an error, or the client went away).
    fn send(&self, output: Result<Vec<u8>, JobError>) -> bool {
        match output {
            Ok(chunk) if chunk.is_empty() => true,
            Ok(chunk) => self.deliver(Ok(StreamResponse { chunk, last: false })),
            Err(e) => {
                self.deliver(Err(job_status(e)));
                false
            }
        }
    }

    /// Puts a response in the call's queue, waiting at most the stream's idle bound for room
    /// (a client that takes no response); `false` when the call is over. When the client
    /// takes nothing for that long, the call ends with `DEADLINE_EXCEEDED`, queued after the
    /// responses it has not taken.
    fn deliver(&self, item: Result<StreamResponse, Status>) -> bool {
        let out = &self.out;
        let sent = self
            .handle
            .block_on(async { tokio::time::timeout(self.gap, out.send(item)).await });
        match sent {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                if let Ok(mut cut) = self.cut.lock() {
                    *cut = Some(Status::deadline_exceeded(format!(
                        "the client took no response for {} ms (--stream-idle-ms)",
                        self.gap.as_millis()
                    )));
                }
                false
            }
        }
    }
}
