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
//! `RESOURCE_EXHAUSTED`). An async task reads the request stream into a small channel, which
//! gives the client backpressure. The runner pushes every whole block it has except the last
//! (a padded decryption must end with its final block, so one block is always held back until
//! the input ends), in pieces of at most the packet size, keeps at most [`MAX_PENDING`] pieces
//! in flight, and sends each output as soon as it is ready, without waiting for more input.
//! A failure ends the call with its status; a client that goes away drops the stream, which
//! closes the job.

use std::sync::Arc;

use cryptodispatch::crypto::BLOCK;
use cryptodispatch::{AesOp, Direction, JobError, Stream};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use tokio_stream::wrappers::ReceiverStream;
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

/// What the call answers: the outputs, then the final message or an error.
pub type ResponseStream = ReceiverStream<Result<StreamResponse, Status>>;

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
    let grant = d.admit_call(request.metadata())?;
    let mut inbound = request.into_inner();
    let first = inbound
        .message()
        .await?
        .ok_or_else(|| Status::invalid_argument("the stream sent no message"))?;
    let start = first
        .start
        .ok_or_else(|| Status::invalid_argument("the first message must carry `start`"))?;
    let key = d.key(&grant, &start.key, KeyKind::Aes)?;
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
    let max = d.limits.max_request_bytes;
    tokio::spawn(read(inbound, first.chunk, first.last, in_tx, max));
    let packet = d.service.packet_size();
    tokio::task::spawn_blocking(move || {
        Runner {
            job,
            packet,
            out: out_tx,
        }
        .run(in_rx);
        drop(permit);
    });
    Ok(Response::new(ReceiverStream::new(out_rx)))
}

/// Reads the request stream into `tx` until its end, a message marked `last`, or an error.
async fn read(
    mut inbound: Streaming<StreamRequest>,
    first_chunk: Vec<u8>,
    first_is_last: bool,
    tx: mpsc::Sender<Input>,
    max: usize,
) {
    let mut pending = Some((first_chunk, first_is_last));
    loop {
        let (chunk, last) = match pending.take() {
            Some(first) => first,
            None => match inbound.message().await {
                Ok(Some(m)) if m.start.is_some() => {
                    let e = Status::invalid_argument("only the first message may carry `start`");
                    let _ = tx.send(Input::Failed(e)).await;
                    return;
                }
                Ok(Some(m)) if m.chunk.len() > max => {
                    let e = Status::invalid_argument(format!(
                        "a chunk of {} bytes is over this daemon's limit of {max} bytes",
                        m.chunk.len()
                    ));
                    let _ = tx.send(Input::Failed(e)).await;
                    return;
                }
                Ok(Some(m)) => (m.chunk, m.last),
                Ok(None) => (Vec::new(), true),
                Err(status) => {
                    let _ = tx.send(Input::Failed(status)).await;
                    return;
                }
            },
        };
        if !chunk.is_empty() && tx.send(Input::Chunk(chunk)).await.is_err() {
            return;
        }
        if last {
            let _ = tx.send(Input::End).await;
            return;
        }
    }
}

/// The blocking side: the library's stream and where its outputs go.
struct Runner {
    job: Stream,
    packet: usize,
    out: mpsc::Sender<Result<StreamResponse, Status>>,
}

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
                        let _ = self.out.blocking_send(Err(submit_status(e)));
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
                    let _ = self.out.blocking_send(Ok(end));
                    return;
                }
                Input::Failed(status) => {
                    let _ = self.out.blocking_send(Err(status));
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
                let _ = self.out.blocking_send(Err(submit_status(e)));
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
            Ok(chunk) => self
                .out
                .blocking_send(Ok(StreamResponse { chunk, last: false }))
                .is_ok(),
            Err(e) => {
                let _ = self.out.blocking_send(Err(job_status(e)));
                false
            }
        }
    }
}
