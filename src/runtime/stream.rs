//! Streams: a long-lived AES job fed chunk by chunk.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::crypto::CryptoError;
use crate::crypto::{AesKey, AesOp, BLOCK, ChainState};
use crate::packet::{ClusterId, Mode, TaskId};
use crate::runtime::context;
use crate::runtime::cut::{aes_packet_count, cut_aes};
use crate::runtime::engine::{Engine, Refused, Wait};
use crate::runtime::error::{JobError, SubmitError};
use crate::runtime::handle::JobHandle;
use crate::runtime::work::{JobRecord, Operation, Packets};

/// A long-lived AES job (a VPN tunnel, a disk being encrypted) fed chunk by chunk.
///
/// Each chunk becomes a packet of the job (a chunk longer than the service's packet size is cut
/// into several); outputs come back in order, one per chunk, through [`recv`](Self::recv).
/// Between chunks the chaining state lives in the service's intermediate state store. While a
/// chunk is on a node, the next one goes to the same node (the paper's strategy 2); when none
/// is in flight, the next chunk goes wherever the policy says — unless the service was built
/// with [`Affinity::Strict`](crate::sched::Affinity::Strict), which keeps the stream on one node
/// until it finishes.
///
/// Every chunk but the last must be a whole number of 16-byte blocks. The last chunk, given to
/// [`finish`](Self::finish), may end in a partial block (OFB, CFB, CTR) and gets PKCS#7 padding
/// if the operation asks for it; for a padded decryption it must hold the final block. A CTR
/// stream's packets are independent (each knows its counter block), so they go wherever the
/// policy says. GCM is not streamed (see [`Service::stream`](crate::runtime::Service::stream)).
///
/// # Bounded outputs
///
/// A stream holds at most [`ServiceBuilder::stream_outputs`](crate::runtime::ServiceBuilder::stream_outputs)
/// outputs not yet received (default 64), so a producer that never receives cannot fill the
/// memory. A `Stream` has one owner, who alone can make room by receiving: at the bound,
/// [`push`](Self::push) and [`finish`](Self::finish) answer [`SubmitError::StreamFull`], and
/// [`try_push`](Self::try_push) and [`try_finish`](Self::try_finish) hand the chunk back. To push from one thread while another receives, [`split`](Self::split)
/// the stream: the sender's `push` then blocks until the receiver makes room.
///
/// Dropping an unfinished stream closes it: a final empty packet takes its chaining state out
/// of the store, and outputs not yet received are discarded.
#[derive(Debug)]
pub struct Stream {
    tx: StreamSender,
    rx: StreamReceiver,
}

/// The pushing half of a [split](Stream::split) stream. Dropping it unfinished closes the
/// stream, as dropping a [`Stream`] does.
pub struct StreamSender {
    engine: Arc<Engine>,
    task: TaskId,
    cluster: ClusterId,
    key: Arc<AesKey>,
    op: AesOp,
    next_seq: u32,
    finished: bool,
    /// The IV, until the first packet takes it along; in CTR, the counter block of the next
    /// chunk's first packet (every CTR packet carries its own).
    start: Option<ChainState>,
    outputs: Arc<Outputs>,
}

/// The receiving half of a [split](Stream::split) stream. Dropping it discards the outputs not
/// yet received, and the sender no longer waits for room.
#[derive(Debug)]
pub struct StreamReceiver {
    engine: Arc<Engine>,
    outputs: Arc<Outputs>,
}

/// Why [`Stream::try_push`] or [`StreamSender::try_push`] did not take a chunk.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TryPushError {
    /// The stream holds its bound of unreceived outputs: the chunk comes back untouched.
    #[error("the stream holds its bound of unreceived outputs")]
    Full(Vec<u8>),
    /// The chunk is refused for good.
    #[error(transparent)]
    Invalid(#[from] SubmitError),
}

/// The outputs of a stream's chunks, in push order, shared by its two halves.
#[derive(Debug)]
struct Outputs {
    state: Mutex<Pending>,
    /// Signalled when an output is pushed or received, or a half goes.
    changed: Condvar,
    max: usize,
}

#[derive(Debug, Default)]
struct Pending {
    handles: VecDeque<JobHandle>,
    /// The sender finished the stream or went.
    sender_done: bool,
    /// The receiver went: outputs are discarded and the bound no longer applies.
    receiver_gone: bool,
    /// Threads blocked on `changed` (a notify nobody waits for still costs a system call).
    waiting: usize,
}

impl Outputs {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits on `changed`, counted as a waiter.
    fn wait<'a>(&self, mut p: MutexGuard<'a, Pending>) -> MutexGuard<'a, Pending> {
        p.waiting += 1;
        let mut p = self.changed.wait(p).unwrap_or_else(|e| e.into_inner());
        p.waiting -= 1;
        p
    }

    /// Releases the lock, then wakes whoever waits on `changed`, if anyone does.
    fn release(&self, p: MutexGuard<'_, Pending>) {
        let waiting = p.waiting > 0;
        drop(p);
        if waiting {
            self.changed.notify_all();
        }
    }
}

impl fmt::Debug for StreamSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamSender")
            .field("task", &self.task)
            .field("op", &self.op)
            .field("chunks", &self.next_seq)
            .field("finished", &self.finished)
            .finish()
    }
}

/// Whether `push` waits for room or refuses at the bound.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AtBound {
    /// Wait until the receiver makes room (a split stream's sender).
    Wait,
    /// Refuse (`try_push`, and an unsplit stream, whose owner is its only receiver).
    Refuse,
}

impl Stream {
    pub(crate) fn new(
        engine: Arc<Engine>,
        task: TaskId,
        cluster: ClusterId,
        key: Arc<AesKey>,
        op: AesOp,
        start: Option<ChainState>,
    ) -> Self {
        let outputs = Arc::new(Outputs {
            state: Mutex::default(),
            changed: Condvar::new(),
            max: engine.layout.stream_outputs.max(1),
        });
        Stream {
            rx: StreamReceiver {
                engine: Arc::clone(&engine),
                outputs: Arc::clone(&outputs),
            },
            tx: StreamSender {
                engine,
                task,
                cluster,
                key,
                op,
                next_seq: 0,
                finished: false,
                start,
                outputs,
            },
        }
    }

    /// The stream's job id.
    pub fn task(&self) -> TaskId {
        self.tx.task
    }

    /// Pushes a chunk (a whole number of blocks), blocking while the cluster's receive queue
    /// is full.
    ///
    /// # Errors
    /// [`CryptoError::NotBlockAligned`], [`SubmitError::StreamFinished`],
    /// [`SubmitError::ShutDown`]; [`SubmitError::StreamFull`] (nothing was pushed) when the
    /// stream holds its bound of unreceived outputs: receive one first, or use
    /// [`try_push`](Self::try_push), which hands the chunk back.
    pub fn push(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), SubmitError> {
        self.tx
            .push_at(chunk.into(), AtBound::Refuse)
            .map_err(TryPushError::into_submit)
    }

    /// Pushes a chunk if the stream is below its bound of unreceived outputs; at the bound,
    /// hands it back in [`TryPushError::Full`].
    ///
    /// # Errors
    /// As [`push`](Self::push), with the chunk handed back at the bound.
    pub fn try_push(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), TryPushError> {
        self.tx.push_at(chunk.into(), AtBound::Refuse)
    }

    /// Pushes the last chunk and finishes the stream. Its output, like the others', comes
    /// from [`recv`](Self::recv).
    ///
    /// # Errors
    /// As [`push`](Self::push) (at the bound, [`SubmitError::StreamFull`]: the stream is not
    /// finished, and the chunk, taken by value, is dropped; [`try_finish`](Self::try_finish)
    /// hands it back); a chunk that is not a whole number of blocks in ECB or CBC without
    /// padding, or an empty chunk for a padded decryption, is refused.
    pub fn finish(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), SubmitError> {
        self.try_finish(chunk).map_err(TryPushError::into_submit)
    }

    /// [`finish`](Self::finish) if the stream is below its bound of unreceived outputs; at the
    /// bound, hands the chunk back in [`TryPushError::Full`] and leaves the stream unfinished,
    /// to finish once an output is received.
    ///
    /// # Errors
    /// As [`finish`](Self::finish), with the chunk handed back at the bound.
    pub fn try_finish(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), TryPushError> {
        self.tx.finish_at(chunk.into(), AtBound::Refuse)
    }

    /// The next output, in push order, blocking until it is ready. `None` once every pushed
    /// chunk's output has been received.
    pub fn recv(&mut self) -> Option<Result<Vec<u8>, JobError>> {
        // Nothing pending: only this owner could push more, so waiting would never end.
        self.rx.next(false)
    }

    /// The next output if it is ready, without blocking.
    pub fn try_recv(&mut self) -> Option<Result<Vec<u8>, JobError>> {
        self.rx.try_recv()
    }

    /// Chunks pushed whose outputs have not been received yet.
    pub fn pending(&self) -> usize {
        self.rx.pending()
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.tx.finished
    }

    /// Splits the stream into a sender and a receiver, to push from one thread while another
    /// receives; the sender's [`push`](StreamSender::push) then blocks at the bound until the
    /// receiver makes room.
    pub fn split(self) -> (StreamSender, StreamReceiver) {
        (self.tx, self.rx)
    }
}

impl TryPushError {
    fn into_submit(self) -> SubmitError {
        match self {
            TryPushError::Full(_) => SubmitError::StreamFull,
            TryPushError::Invalid(e) => e,
        }
    }
}

impl StreamSender {
    /// The stream's job id.
    pub fn task(&self) -> TaskId {
        self.task
    }

    /// Pushes a chunk (a whole number of blocks), blocking while the stream holds its bound of
    /// unreceived outputs (until the receiver makes room, or goes) and while the cluster's
    /// receive queue is full.
    ///
    /// # Errors
    /// As [`Stream::push`]; on one of the service's own worker threads,
    /// [`SubmitError::OnWorkerThread`] instead of waiting for room.
    pub fn push(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), SubmitError> {
        self.push_at(chunk.into(), AtBound::Wait)
            .map_err(TryPushError::into_submit)
    }

    /// Pushes a chunk if the stream is below its bound of unreceived outputs; at the bound,
    /// hands it back in [`TryPushError::Full`].
    ///
    /// # Errors
    /// As [`push`](Self::push), with the chunk handed back at the bound.
    pub fn try_push(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), TryPushError> {
        self.push_at(chunk.into(), AtBound::Refuse)
    }

    /// Pushes the last chunk and finishes the stream, waiting for room like
    /// [`push`](Self::push).
    ///
    /// # Errors
    /// As [`Stream::finish`].
    pub fn finish(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), SubmitError> {
        self.finish_at(chunk.into(), AtBound::Wait)
            .map_err(TryPushError::into_submit)
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn push_at(&mut self, chunk: Vec<u8>, at_bound: AtBound) -> Result<(), TryPushError> {
        if chunk.len() % BLOCK != 0 {
            return Err(
                SubmitError::from(CryptoError::NotBlockAligned { len: chunk.len() }).into(),
            );
        }
        self.send(chunk, false, at_bound)
    }

    fn finish_at(&mut self, chunk: Vec<u8>, at_bound: AtBound) -> Result<(), TryPushError> {
        self.op
            .check_job_len(chunk.len())
            .map_err(SubmitError::from)?;
        self.send(chunk, true, at_bound)
    }

    /// Waits (or refuses, by `at_bound`) until the stream is below its bound of unreceived
    /// outputs.
    fn room(&self, at_bound: AtBound) -> Result<(), SubmitError> {
        let out = &self.outputs;
        let mut p = out.lock();
        while p.handles.len() >= out.max && !p.receiver_gone {
            if at_bound == AtBound::Refuse {
                return Err(SubmitError::StreamFull);
            }
            if context::on_worker_of(self.engine.serial()) {
                return Err(SubmitError::OnWorkerThread);
            }
            p = out.wait(p);
        }
        Ok(())
    }

    fn send(&mut self, data: Vec<u8>, last: bool, at_bound: AtBound) -> Result<(), TryPushError> {
        if self.finished {
            return Err(SubmitError::StreamFinished.into());
        }
        match self.room(at_bound) {
            Ok(()) => {}
            Err(SubmitError::StreamFull) => return Err(TryPushError::Full(data)),
            Err(e) => return Err(e.into()),
        }
        // A refused chunk leaves the stream as it was: its IV (or counter) is the next one's.
        let start = self.start.clone();
        let (packets, handle) = self.packets(data, last);
        let n = packets.len() as u32;
        self.engine.counters.job_submitted();
        let wait = if context::on_worker_of(self.engine.serial()) {
            Wait::No
        } else {
            Wait::Block
        };
        match self.engine.admit(self.cluster, packets, wait, false, None) {
            Ok(()) => {
                self.next_seq += n;
                self.finished = last;
                let mut p = self.outputs.lock();
                if !p.receiver_gone {
                    p.handles.push_back(handle);
                }
                p.sender_done |= last;
                self.outputs.release(p);
                Ok(())
            }
            Err(refused) => {
                self.start = start;
                self.engine.counters.job_withdrawn();
                Err(match refused {
                    Refused::NoNodeUp(kind) => SubmitError::NoNodeUp(kind),
                    Refused::Full(_) => SubmitError::OnWorkerThread,
                    Refused::ShutDown => SubmitError::ShutDown,
                }
                .into())
            }
        }
    }

    /// A chunk's packets (a chunk longer than the packet size is cut like a job) and the
    /// handle its output comes back through.
    fn packets(&mut self, data: Vec<u8>, last: bool) -> (Packets, JobHandle) {
        let cut = self.engine.layout.cutting();
        let work = Operation::Aes {
            key: Arc::clone(&self.key),
            op: self.op,
        };
        let parts = aes_packet_count(self.op, data.len(), cut, last);
        let job = Arc::new(JobRecord::new(self.task, self.cluster, work, parts));
        let start = if self.op.mode == Mode::Ctr {
            // The next chunk starts as many blocks on (every chunk but the last is whole blocks).
            let next = self
                .start
                .as_ref()
                .map(|s| s.counter_plus((data.len() / BLOCK) as u64));
            std::mem::replace(&mut self.start, next)
        } else {
            self.start.take()
        };
        let packets = cut_aes(&job, self.op, data, cut, self.next_seq, last, start);
        (packets, JobHandle::on_nodes(job))
    }
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.outputs.lock().sender_done = true;
        self.outputs.changed.notify_all();
        // Close the chain: an empty last packet takes the state out of the store and ends the
        // job's binding. It carries no data, so it is admitted past the bound, and even while
        // the service drains. Its output (or error, for a padded decryption) is discarded.
        let (packets, _) = self.packets(Vec::new(), true);
        self.engine.counters.job_submitted();
        if self
            .engine
            .admit(self.cluster, packets, Wait::No, true, None)
            .is_err()
        {
            // The workers are gone: nothing will run the packet; drop the state here.
            self.engine.counters.job_withdrawn();
            self.engine.store.remove(self.task);
        }
    }
}

impl StreamReceiver {
    /// The next output, in push order, blocking until it is ready. `None` once the sender has
    /// finished the stream (or gone) and every output has been received.
    ///
    /// On one of the service's own worker threads it does not wait: an output not ready yet
    /// answers `Some(Err(JobError::OnWorkerThread))`.
    pub fn recv(&mut self) -> Option<Result<Vec<u8>, JobError>> {
        self.next(true)
    }

    /// The next output; with nothing pushed yet, `None` unless `for_push`, which waits for the
    /// sender's next push (or its end).
    fn next(&mut self, for_push: bool) -> Option<Result<Vec<u8>, JobError>> {
        let out = &self.outputs;
        let mut p = out.lock();
        let handle = loop {
            if let Some(h) = p.handles.pop_front() {
                break h;
            }
            if p.sender_done || !for_push {
                return None;
            }
            if context::on_worker_of(self.engine.serial()) {
                return Some(Err(JobError::OnWorkerThread));
            }
            p = out.wait(p);
        };
        out.release(p);
        Some(handle.wait().map(|o| o.into_data().unwrap_or_default()))
    }

    /// The next output if it is ready, without blocking.
    pub fn try_recv(&mut self) -> Option<Result<Vec<u8>, JobError>> {
        let out = &self.outputs;
        let mut p = out.lock();
        if !p.handles.front()?.is_finished() {
            return None;
        }
        let handle = p.handles.pop_front()?;
        out.release(p);
        Some(handle.wait().map(|o| o.into_data().unwrap_or_default()))
    }

    /// Chunks pushed whose outputs have not been received yet.
    pub fn pending(&self) -> usize {
        self.outputs.lock().handles.len()
    }
}

impl Drop for StreamReceiver {
    fn drop(&mut self) {
        let discarded = {
            let mut p = self.outputs.lock();
            p.receiver_gone = true;
            std::mem::take(&mut p.handles)
        };
        self.outputs.changed.notify_all();
        drop(discarded);
    }
}
