//! Streams: a long-lived AES job fed chunk by chunk.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use crate::crypto::CryptoError;
use crate::crypto::{AesKey, AesOp, BLOCK, ChainState};
use crate::packet::{ClusterId, Mode, TaskId};
use crate::runtime::engine::{Refused, Shared, Wait};
use crate::runtime::error::{JobError, SubmitError};
use crate::runtime::handle::{JobHandle, JobShared, JobWork, Packets, aes_packet_count, cut_aes};

/// A long-lived AES job (a VPN tunnel, a disk being encrypted) fed chunk by chunk.
///
/// Each chunk becomes a packet of the job (a chunk longer than the service's packet size is cut
/// into several); outputs come back in order, one per chunk, through [`recv`](Self::recv). Between chunks the chaining state lives in the service's intermediate
/// state store. While a chunk is on a node, the next one goes to the same node (the paper's
/// strategy 2); when none is in flight, the next chunk goes wherever the policy says — unless
/// the service was built with [`Affinity::Strict`](crate::sched::Affinity::Strict), which keeps
/// the stream on one node until it finishes.
///
/// Every chunk but the last must be a whole number of 16-byte blocks. The last chunk, given to
/// [`finish`](Self::finish), may end in a partial block (OFB, CFB, CTR) and gets PKCS#7 padding
/// if the operation asks for it; for a padded decryption it must hold the final block. A CTR
/// stream's packets are independent (each knows its counter block), so they go wherever the
/// policy says. GCM is not streamed (see [`Service::stream`](crate::runtime::Service::stream)).
///
/// Dropping an unfinished stream closes it: a final empty packet takes its chaining state out
/// of the store, and outputs not yet received are discarded.
pub struct Stream {
    shared: Arc<Shared>,
    task: TaskId,
    cluster: ClusterId,
    key: Arc<AesKey>,
    op: AesOp,
    next_seq: u32,
    outputs: VecDeque<JobHandle>,
    finished: bool,
    /// The IV, until the first packet takes it along; in CTR, the counter block of the next
    /// chunk's first packet (every CTR packet carries its own).
    start: Option<ChainState>,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("task", &self.task)
            .field("op", &self.op)
            .field("chunks", &self.next_seq)
            .field("pending_outputs", &self.outputs.len())
            .field("finished", &self.finished)
            .finish()
    }
}

impl Stream {
    pub(crate) fn new(
        shared: Arc<Shared>,
        task: TaskId,
        cluster: ClusterId,
        key: Arc<AesKey>,
        op: AesOp,
        start: Option<ChainState>,
    ) -> Self {
        Stream {
            shared,
            task,
            cluster,
            key,
            op,
            next_seq: 0,
            outputs: VecDeque::new(),
            finished: false,
            start,
        }
    }

    /// The stream's job id.
    pub fn task(&self) -> TaskId {
        self.task
    }

    /// Pushes a chunk (a whole number of blocks), blocking while the receive queue is full.
    ///
    /// # Errors
    /// [`CryptoError::NotBlockAligned`], [`SubmitError::StreamFinished`],
    /// [`SubmitError::ShutDown`].
    pub fn push(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), SubmitError> {
        let chunk = chunk.into();
        if chunk.len() % BLOCK != 0 {
            return Err(CryptoError::NotBlockAligned { len: chunk.len() }.into());
        }
        self.send(chunk, false)
    }

    /// Pushes the last chunk and finishes the stream. Its output, like the others', comes
    /// from [`recv`](Self::recv).
    ///
    /// # Errors
    /// As [`push`](Self::push); a chunk that is not a whole number of blocks in ECB or CBC
    /// without padding, or an empty chunk for a padded decryption, is refused.
    pub fn finish(&mut self, chunk: impl Into<Vec<u8>>) -> Result<(), SubmitError> {
        let chunk = chunk.into();
        self.op.check_job_len(chunk.len())?;
        self.send(chunk, true)
    }

    /// The next output, in push order, blocking until it is ready. `None` once every pushed
    /// chunk's output has been received.
    pub fn recv(&mut self) -> Option<Result<Vec<u8>, JobError>> {
        let handle = self.outputs.pop_front()?;
        Some(handle.wait().map(|o| o.into_data().unwrap_or_default()))
    }

    /// The next output if it is ready, without blocking.
    pub fn try_recv(&mut self) -> Option<Result<Vec<u8>, JobError>> {
        if self.outputs.front()?.is_finished() {
            self.recv()
        } else {
            None
        }
    }

    /// Chunks pushed whose outputs have not been received yet.
    pub fn pending(&self) -> usize {
        self.outputs.len()
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn send(&mut self, data: Vec<u8>, last: bool) -> Result<(), SubmitError> {
        if self.finished {
            return Err(SubmitError::StreamFinished);
        }
        let (packets, handle) = self.packets(data, last);
        let n = packets.len() as u32;
        self.shared.counters.job_submitted();
        match self.shared.admit(self.cluster, packets, Wait::Block, false) {
            Ok(()) => {
                self.next_seq += n;
                self.finished = last;
                self.outputs.push_back(handle);
                Ok(())
            }
            Err(refused) => {
                self.shared.counters.job_withdrawn();
                Err(match refused {
                    Refused::NoNodeUp => {
                        SubmitError::NoNodeUp(self.shared.layout.clusters[self.cluster.index()].0)
                    }
                    Refused::ShutDown | Refused::Full(_) => SubmitError::ShutDown,
                })
            }
        }
    }

    /// A chunk's packets (a chunk longer than the packet size is cut like a job) and the
    /// handle its output comes back through.
    fn packets(&mut self, data: Vec<u8>, last: bool) -> (Packets, JobHandle) {
        let packet_size = self.shared.layout.packet_size;
        let work = JobWork::Aes {
            key: Arc::clone(&self.key),
            op: self.op,
        };
        let parts = aes_packet_count(self.op, data.len(), packet_size, last);
        let job = Arc::new(JobShared::new(self.task, self.cluster, work, parts));
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
        let packets = cut_aes(&job, self.op, data, packet_size, self.next_seq, last, start);
        (packets, JobHandle { shared: job })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Close the chain: an empty last packet takes the state out of the store and ends the
        // job's binding. It carries no data, so it is admitted past the bound, and even while
        // the service drains. Its output (or error, for a padded decryption) is discarded.
        let (packets, _) = self.packets(Vec::new(), true);
        self.shared.counters.job_submitted();
        if self
            .shared
            .admit(self.cluster, packets, Wait::No, true)
            .is_err()
        {
            // The workers are gone: nothing will run the packet; drop the state here.
            self.shared.counters.job_withdrawn();
            self.shared.store.remove(self.task);
        }
    }
}
