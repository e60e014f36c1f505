//! The job record and the packet data: what every packet of a job points to (what to do, and
//! the results collected so far), and what travels with each packet (its bytes and where its
//! result goes).
//!
//! A job's data is cut into packets without copying (`cut.rs`): the buffer is one `BytesMut`
//! split into disjoint chunks, each chunk travels with its packet, the node works on it in
//! place, and the chunks are joined back in order when the last packet is done — giving the
//! caller back the very allocation it handed in.
//!
//! A job that fails releases nothing: the chunks its packets finished are zeroized when the
//! last packet reports, so the plaintext of a GCM decryption whose tag does not verify (or of a
//! CBC decryption with bad padding) never leaves the record (docs/ALGORITHM.md §15.4).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use smallvec::SmallVec;
use zeroize::{Zeroize, Zeroizing};

use crate::crypto::{
    AesKey, AesOp, BLOCK, ChainState, Direction, NONCE_LEN, SIGNATURE_LEN, SigningKey, Tag,
    VerifyingKey,
};
use crate::packet::{ClusterId, Packet, Payload, TaskId};
use crate::runtime::context;
use crate::runtime::error::JobError;
use crate::runtime::job::JobOutput;
use crate::runtime::metrics::ServiceCounters;
use crate::runtime::tenant::Lease;

/// What a node does for a job's packets, with the key already looked up.
pub(crate) enum Operation {
    Aes {
        key: Arc<AesKey>,
        op: AesOp,
    },
    /// The first packet starts the GHASH state from the nonce and the associated data; the
    /// last one seals (makes the tag) or opens (checks `tag`).
    Gcm {
        key: Arc<AesKey>,
        direction: Direction,
        nonce: [u8; NONCE_LEN],
        aad: Arc<Vec<u8>>,
        tag: Option<Tag>,
    },
    Sign {
        key: Arc<SigningKey>,
    },
    Verify {
        key: Box<VerifyingKey>,
        sig: Box<[u8; SIGNATURE_LEN]>,
    },
    /// Per item: key, signature, message length. Packet `p` holds items
    /// `p * per_packet ..`, its data their messages one after another.
    VerifyBatch {
        items: Vec<(VerifyingKey, [u8; SIGNATURE_LEN], usize)>,
        starts: Vec<usize>,
    },
}

/// One packet's result.
pub(crate) enum PartOutput {
    Data(BytesMut),
    /// A GCM encryption's last packet: its ciphertext and the job's tag.
    Sealed(BytesMut, Tag),
    Signature([u8; SIGNATURE_LEN]),
    Verified(bool),
    VerifiedBatch(Vec<bool>),
}

/// The record every packet of a job points to: what to do, and the results collected so far.
pub(crate) struct JobRecord {
    pub(crate) task: TaskId,
    pub(crate) cluster: ClusterId,
    pub(crate) operation: Operation,
    submitted: Instant,
    /// Set once one of the job's packets failed: its later chained packets need not run.
    failed: AtomicBool,
    collect: Mutex<Collect>,
    done: Condvar,
}

struct Collect {
    parts: SmallVec<[Option<PartOutput>; 1]>,
    remaining: usize,
    error: Option<JobError>,
    outcome: Outcome,
    finished: Option<Instant>,
    waker: Option<Waker>,
    /// Threads blocked in `wait`/`wait_timeout` (notifying a condvar nobody waits on still
    /// costs a system call, once per job).
    waiting: usize,
    /// The job's room in its tenant's limits, given back when it finishes.
    lease: Option<Lease>,
}

enum Outcome {
    Pending,
    Ready(Result<JobOutput, JobError>),
    Taken,
}

impl JobRecord {
    pub(crate) fn new(
        task: TaskId,
        cluster: ClusterId,
        operation: Operation,
        parts: usize,
    ) -> Self {
        JobRecord {
            task,
            cluster,
            operation,
            submitted: Instant::now(),
            failed: AtomicBool::new(false),
            collect: Mutex::new(Collect {
                parts: (0..parts).map(|_| None).collect(),
                remaining: parts,
                error: None,
                outcome: Outcome::Pending,
                finished: None,
                waker: None,
                waiting: 0,
                lease: None,
            }),
            done: Condvar::new(),
        }
    }

    /// When the job was submitted.
    pub(crate) fn submitted(&self) -> Instant {
        self.submitted
    }

    /// Gives the job its room in its tenant's limits, to give back when it finishes.
    pub(crate) fn attach(&self, lease: Lease) {
        self.lock().lease = Some(lease);
    }

    /// Marks the job as one on the light path (`on`), or no longer, in its tenant's counts
    /// (docs/ALGORITHM.md §15.7).
    pub(crate) fn set_light(&self, on: bool) {
        if let Some(lease) = self.lock().lease.as_mut() {
            lease.set_light(on);
        }
    }

    /// Takes the job's room in its tenant's limits back (a job run on the submitting thread,
    /// which resolves without its packets reporting).
    pub(crate) fn take_lease(&self) -> Option<Lease> {
        self.lock().lease.take()
    }

    /// Whether one of the job's packets has failed already.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    fn lock(&self) -> MutexGuard<'_, Collect> {
        self.collect.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records packet `part`'s result (the packet had `bytes` bytes; with an output, they count
    /// as served to the job's tenant). When this completes the job, counts it in `counters`
    /// before publishing the outcome (so whoever the outcome wakes sees the count), and returns
    /// whether it succeeded.
    pub(crate) fn part_done(
        &self,
        part: usize,
        bytes: u64,
        result: Result<PartOutput, JobError>,
        counters: &ServiceCounters,
    ) -> Option<bool> {
        counters.packet_resolved(result.is_ok());
        if result.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        let mut c = self.lock();
        match result {
            Ok(out) => {
                c.parts[part] = Some(out);
                if let Some(lease) = c.lease.as_mut() {
                    lease.served(bytes);
                }
            }
            // The first error is the job's, but for a chained job whose packet was running on
            // a node that failed: its later packets, placed elsewhere, may find the chaining
            // state missing before the failed packet is resolved, and the node's failure is
            // the cause to report.
            Err(e @ (JobError::NodeFailed(_) | JobError::NoNodeUp(_)))
                if matches!(c.error, Some(JobError::StateLost(_))) =>
            {
                c.error = Some(e);
            }
            Err(e) => {
                c.error.get_or_insert(e);
            }
        }
        c.remaining -= 1;
        if c.remaining > 0 {
            return None;
        }
        let outcome = match c.error.take() {
            Some(e) => {
                discard(&mut c.parts);
                Err(e)
            }
            None => Ok(assemble(&mut c.parts)),
        };
        let ok = outcome.is_ok();
        counters.job_finished(ok);
        // The tenant counts the job before its outcome is published; the futures waiting for
        // the tenant's room are woken with no lock held.
        let finished = Instant::now();
        let latency = finished - self.submitted;
        let tenant_wakers = c.lease.take().map(|l| l.finish(ok, latency));
        c.outcome = Outcome::Ready(outcome);
        c.finished = Some(finished);
        let waker = c.waker.take();
        let waiting = c.waiting > 0;
        drop(c);
        if waiting {
            self.done.notify_all();
        }
        if let Some(w) = waker {
            w.wake();
        }
        for w in tenant_wakers.into_iter().flatten() {
            w.wake();
        }
        Some(ok)
    }
}

impl JobRecord {
    /// A copy of the outputs of the job's packets `0..upto`, joined in order, if every one of
    /// them is in (a GCM job's packet that runs again rebuilds its starting state from them).
    /// Zeroized when dropped.
    pub(crate) fn earlier_outputs(&self, upto: usize) -> Option<Zeroizing<Vec<u8>>> {
        let c = self.lock();
        let mut out = Zeroizing::new(Vec::new());
        for part in c.parts.get(..upto)? {
            match part {
                Some(PartOutput::Data(d)) => out.extend_from_slice(d),
                _ => return None,
            }
        }
        Some(out)
    }

    /// Whether the job has finished (successfully or not).
    pub(crate) fn is_finished(&self) -> bool {
        !matches!(self.lock().outcome, Outcome::Pending)
    }

    /// Time from submission to the last packet's completion, once finished.
    pub(crate) fn latency(&self) -> Option<Duration> {
        self.lock()
            .finished
            .map(|t| t.duration_since(self.submitted))
    }

    /// Blocks until the job finishes and takes its outcome. Refuses, with
    /// [`JobError::OnWorkerThread`], to wait on a worker thread for a job not finished yet.
    pub(crate) fn wait(&self) -> Result<JobOutput, JobError> {
        let mut c = self.lock();
        if matches!(c.outcome, Outcome::Pending) && context::on_any_worker() {
            return Err(JobError::OnWorkerThread);
        }
        while matches!(c.outcome, Outcome::Pending) {
            c.waiting += 1;
            c = self.done.wait(c).unwrap_or_else(|e| e.into_inner());
            c.waiting -= 1;
        }
        take(&mut c)
    }

    /// Blocks for at most `timeout`; `None` if the job has not finished by then.
    pub(crate) fn wait_timeout(&self, timeout: Duration) -> Option<Result<JobOutput, JobError>> {
        let mut c = self.lock();
        // The clock is read only when the job is not finished yet. A timeout past the clock's
        // range waits as long as it takes.
        if matches!(c.outcome, Outcome::Pending) {
            let deadline = Instant::now().checked_add(timeout);
            while matches!(c.outcome, Outcome::Pending) {
                let left = match deadline {
                    Some(d) => d.checked_duration_since(Instant::now())?,
                    None => timeout,
                };
                c.waiting += 1;
                c = self
                    .done
                    .wait_timeout(c, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                c.waiting -= 1;
            }
        }
        Some(take(&mut c))
    }

    /// The outcome if the job has finished; otherwise registers `cx`'s waker, woken when it
    /// does.
    pub(crate) fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Result<JobOutput, JobError>> {
        let mut c = self.lock();
        if matches!(c.outcome, Outcome::Pending) {
            match &c.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => c.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        Poll::Ready(take(&mut c))
    }
}

fn take(c: &mut Collect) -> Result<JobOutput, JobError> {
    match std::mem::replace(&mut c.outcome, Outcome::Taken) {
        Outcome::Ready(r) => r,
        Outcome::Taken => Err(JobError::ResultTaken),
        Outcome::Pending => unreachable!("callers wait for the outcome first"),
    }
}

/// Zeroizes and drops the parts of a failed job: nothing of it is released.
fn discard(parts: &mut [Option<PartOutput>]) {
    for part in parts.iter_mut() {
        if let Some(PartOutput::Data(mut chunk) | PartOutput::Sealed(mut chunk, _)) = part.take() {
            chunk.as_mut().zeroize();
        }
    }
}

/// Joins the parts in order; the chunks of one buffer rejoin without copying.
fn assemble(parts: &mut [Option<PartOutput>]) -> JobOutput {
    let mut data: Option<BytesMut> = None;
    let mut answers: Option<Vec<bool>> = None;
    let mut sealed: Option<Tag> = None;
    for part in parts.iter_mut() {
        match part.take() {
            Some(PartOutput::Data(chunk)) => match &mut data {
                Some(d) => d.unsplit(chunk),
                None => data = Some(chunk),
            },
            Some(PartOutput::Sealed(chunk, tag)) => {
                sealed = Some(tag);
                match &mut data {
                    Some(d) => d.unsplit(chunk),
                    None => data = Some(chunk),
                }
            }
            Some(PartOutput::VerifiedBatch(v)) => answers.get_or_insert_with(Vec::new).extend(v),
            Some(PartOutput::Signature(s)) => return JobOutput::Signature(s),
            Some(PartOutput::Verified(v)) => return JobOutput::Verified(v),
            None => {}
        }
    }
    let data = || data.map(Vec::from).unwrap_or_default();
    match (answers, sealed) {
        (Some(v), _) => JobOutput::VerifiedBatch(v),
        (None, Some(tag)) => JobOutput::Sealed {
            ciphertext: data(),
            tag,
        },
        (None, None) => JobOutput::Data(data()),
    }
}

/// The output of a job of one packet.
pub(crate) fn assemble_one(part: PartOutput) -> JobOutput {
    assemble(&mut [Some(part)])
}

/// A job's packets: most jobs are one packet, kept inline without an allocation.
pub(crate) type Packets = SmallVec<[Packet<PacketData>; 1]>;

/// A packet's data, and where its result goes: the payload the scheduler core carries.
pub(crate) struct PacketData {
    pub(crate) job: Arc<JobRecord>,
    pub(crate) part: usize,
    pub(crate) data: BytesMut,
    /// Bytes of input at the front of `data` (the rest is room for padding).
    pub(crate) msg_len: usize,
    /// A chained job's first packet carries the IV itself; only the state between packets
    /// goes through the state store. Every CTR packet carries its own first counter block.
    pub(crate) start: Option<ChainState>,
    /// Nodes the packet was running on when they failed (0 on its first run).
    pub(crate) attempt: u32,
    /// A light tenant's packet, put on its node by the engine ahead of the node's queue
    /// rather than placed by the scheduler core (docs/ALGORITHM.md §15.7): its completion is
    /// not reported to the core. Cleared when the packet goes back to the core.
    pub(crate) light: bool,
    /// While the packet runs out of place ([`PacketData::share_for_retry`]), its input, shared
    /// with the record that runs it again should its node fail: `data` is then the buffer its
    /// output goes into. `None` otherwise.
    pub(crate) input: Option<Arc<BytesMut>>,
}

impl PacketData {
    /// A copy of the packet as it is before it runs (its input, its carried state), to run
    /// again on another node if its node fails while running it. The bytes go into a buffer
    /// from `spare` when there is one (a copy the node no longer needs), so that a node does
    /// not allocate and free a packet's worth of memory per packet: with packets of 64 KiB
    /// and more, the allocator hands such memory back to the kernel and faults it in again,
    /// which cost a CBC stream in 64 KiB packets about a third of its speed.
    pub(crate) fn copy_for_retry(&self, spare: &mut Vec<BytesMut>) -> PacketData {
        let mut data = spare.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(&self.data);
        self.again(data, None)
    }

    /// The same packet with `data` and `input` in place of its own.
    fn again(&self, data: BytesMut, input: Option<Arc<BytesMut>>) -> PacketData {
        PacketData {
            job: Arc::clone(&self.job),
            part: self.part,
            data,
            msg_len: self.msg_len,
            start: self.start.clone(),
            attempt: self.attempt,
            light: self.light,
            input,
        }
    }

    /// Readies the packet to run out of place, from its input into a buffer from `spare`
    /// (a node's own, as long as the input), and returns what runs it again on another node
    /// should this one fail: the same packet, its input shared rather than copied. The input
    /// is left as it was by the run; once the packet is delivered, its output goes back into
    /// the input's buffer ([`output_home`]), a view of the job's buffer, while
    /// both are still in the cache. That costs a copy from cache to cache, where a copy made
    /// before the run reads the packet from memory before the cipher can.
    pub(crate) fn share_for_retry(&mut self, spare: &mut Vec<BytesMut>) -> PacketData {
        let input = Arc::new(std::mem::take(&mut self.data));
        let mut out = spare.pop().unwrap_or_default();
        // A recycled buffer's bytes are all written by the run: only new room is zeroed.
        if out.len() >= input.len() {
            out.truncate(input.len());
        } else {
            out.resize(input.len(), 0);
        }
        self.data = out;
        self.input = Some(Arc::clone(&input));
        self.again(BytesMut::new(), Some(input))
    }

    /// A retry record's packet made whole to run on another node: its input, taken back from
    /// the failed run, or copied while a stalled run still reads it.
    pub(crate) fn reclaim_input(&mut self) {
        if let Some(input) = self.input.take() {
            self.data = Arc::try_unwrap(input).unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        }
    }
}

/// A worker's first spare buffer, made before it reports ready: one packet's worth (and a
/// padding block), written once so that its pages are in. The node's first packet copies its
/// input into it for a retry, or runs out of place into it; a fresh buffer would have its pages
/// faulted in by that first write, on the packet's time (for a 1 MiB packet, some hundreds of
/// microseconds). None where nothing is kept for a retry.
pub(crate) fn warm_spare(max_attempts: u32, packet_size: usize) -> Vec<BytesMut> {
    if max_attempts <= 1 {
        return Vec::new();
    }
    let len = packet_size + BLOCK;
    let mut buf = BytesMut::with_capacity(len);
    buf.resize(len, 0);
    vec![buf]
}

/// The output of a packet that ran out of place, `out`, in the home of its input (`home`, the
/// retry record's share of it, a view of the job's buffer), so that the job's packets join
/// again without a copy. `out`'s buffer goes to `spare` for the next packet. The packet of a
/// job of one packet (`whole`) needs no home: `out` is the job's output as it is, and the
/// input's buffer goes to `spare` instead (unless it holds much more room than bytes, which
/// the node would then keep). If the input is still shared (it never is once the run is
/// over), the output stays where it is.
pub(crate) fn output_home(
    home: Arc<BytesMut>,
    out: BytesMut,
    whole: bool,
    spare: &mut Vec<BytesMut>,
) -> BytesMut {
    match Arc::try_unwrap(home) {
        Ok(buf) if whole => {
            if buf.capacity() <= buf.len().max(4096).saturating_mul(2) {
                spare.push(buf);
            }
            out
        }
        Ok(mut buf) if buf.len() >= out.len() => {
            buf.truncate(out.len());
            buf.copy_from_slice(&out);
            spare.push(out);
            buf
        }
        _ => out,
    }
}

impl fmt::Debug for PacketData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketData")
            .field("task", &self.job.task)
            .field("part", &self.part)
            .field("len", &self.data.len())
            .finish()
    }
}

impl Payload for PacketData {
    fn byte_len(&self) -> u64 {
        self.data.len() as u64
    }
}
