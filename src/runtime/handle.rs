//! The handles an application waits on, and the shared record that collects a job's packets
//! as nodes finish them.
//!
//! A job's data is cut into packets without copying: the buffer is one `BytesMut` split into
//! disjoint chunks, each chunk travels with its packet, the node works on it in place, and the
//! chunks are joined back in order when the last packet is done — giving the caller back the
//! very allocation it handed in.
//!
//! A job that fails releases nothing: the chunks its packets finished are zeroized when the
//! last packet reports, so the plaintext of a GCM decryption whose tag does not verify (or of a
//! CBC decryption with bad padding) never leaves the record (docs/ALGORITHM.md §15.4).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use smallvec::SmallVec;

use zeroize::Zeroize;

use crate::crypto::{
    AesKey, AesOp, BLOCK, ChainState, Direction, NONCE_LEN, SIGNATURE_LEN, SigningKey, Tag,
    VerifyingKey, padded_len,
};
use crate::packet::{ClusterId, Mode, Packet, PacketMeta, Payload, TaskId};
use crate::runtime::error::JobError;
use crate::runtime::metrics::ServiceCounters;

/// What a finished job gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutput {
    /// The ciphertext or plaintext of an AES job; the plaintext of a GCM decryption whose tag
    /// verified.
    Data(Vec<u8>),
    /// A GCM encryption: the ciphertext (as long as the plaintext) and the 16-byte tag.
    Sealed {
        /// The ciphertext.
        ciphertext: Vec<u8>,
        /// The authentication tag.
        tag: Tag,
    },
    /// An Ed25519 signature.
    Signature([u8; SIGNATURE_LEN]),
    /// Whether an Ed25519 signature verified.
    Verified(bool),
    /// Whether each signature of a batch verified, in order.
    VerifiedBatch(Vec<bool>),
}

impl JobOutput {
    /// The data of an AES job.
    pub fn into_data(self) -> Option<Vec<u8>> {
        match self {
            JobOutput::Data(d) => Some(d),
            _ => None,
        }
    }

    /// The ciphertext and tag of a GCM encryption.
    pub fn into_sealed(self) -> Option<(Vec<u8>, Tag)> {
        match self {
            JobOutput::Sealed { ciphertext, tag } => Some((ciphertext, tag)),
            _ => None,
        }
    }

    /// The signature of a sign job.
    pub fn signature(&self) -> Option<[u8; SIGNATURE_LEN]> {
        match self {
            JobOutput::Signature(s) => Some(*s),
            _ => None,
        }
    }

    /// The answer of a verify job.
    pub fn verified(&self) -> Option<bool> {
        match self {
            JobOutput::Verified(v) => Some(*v),
            _ => None,
        }
    }

    /// The answers of a batch verify job.
    pub fn verified_batch(self) -> Option<Vec<bool>> {
        match self {
            JobOutput::VerifiedBatch(v) => Some(v),
            _ => None,
        }
    }
}

/// What a node does for a job's packets, with the key already looked up.
pub(crate) enum JobWork {
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
pub(crate) struct JobShared {
    pub(crate) task: TaskId,
    pub(crate) cluster: ClusterId,
    pub(crate) work: JobWork,
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
}

enum Outcome {
    Pending,
    Ready(Result<JobOutput, JobError>),
    Taken,
}

impl JobShared {
    pub(crate) fn new(task: TaskId, cluster: ClusterId, work: JobWork, parts: usize) -> Self {
        JobShared {
            task,
            cluster,
            work,
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
            }),
            done: Condvar::new(),
        }
    }

    /// When the job was submitted.
    pub(crate) fn submitted(&self) -> Instant {
        self.submitted
    }

    /// Whether one of the job's packets has failed already.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    fn lock(&self) -> MutexGuard<'_, Collect> {
        self.collect.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records packet `part`'s result. When this completes the job, counts it in `counters`
    /// before publishing the outcome (so whoever the outcome wakes sees the count), and returns
    /// whether it succeeded.
    pub(crate) fn part_done(
        &self,
        part: usize,
        result: Result<PartOutput, JobError>,
        counters: &ServiceCounters,
    ) -> Option<bool> {
        counters.packet_resolved(result.is_ok());
        if result.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        let mut c = self.lock();
        match result {
            Ok(out) => c.parts[part] = Some(out),
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
        c.outcome = Outcome::Ready(outcome);
        c.finished = Some(Instant::now());
        let waker = c.waker.take();
        let waiting = c.waiting > 0;
        drop(c);
        if waiting {
            self.done.notify_all();
        }
        if let Some(w) = waker {
            w.wake();
        }
        Some(ok)
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

/// The bytes `len` bytes of AES data take once cut: with an encryption's PKCS#7 padding block
/// when the data ends the job.
pub(crate) fn aes_buffer_len(op: AesOp, len: usize, ends_job: bool) -> usize {
    if ends_job && op.pads_on_encrypt() {
        padded_len(len)
    } else {
        len
    }
}

/// Grows `data` to [`aes_buffer_len`], by exactly the padding room: growing by `resize` alone
/// could double the buffer (and copy the job); a buffer that has the room already (`Job::aes`
/// makes it) stays put.
pub(crate) fn make_padding_room(op: AesOp, data: &mut Vec<u8>, ends_job: bool) {
    let len = data.len();
    let padded = aes_buffer_len(op, len, ends_job);
    data.reserve_exact(padded - len);
    data.resize(padded, 0);
}

/// How AES data is cut into packets: `packet` bytes each, and whether an encryption's PKCS#7
/// padding block rides in the last packet (`fold`, which may then hold `packet` + 16 bytes)
/// rather than making a packet of its own when the data is a whole number of packets. The
/// builder folds when every node of the AES cluster can hold such a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cutting {
    pub(crate) packet: usize,
    pub(crate) fold: bool,
}

/// The packets `len` bytes of AES data make: at least one, even for empty data. When the data
/// ends the job, an encryption's PKCS#7 padding counts, unless it folds into the last packet.
pub(crate) fn aes_packet_count(op: AesOp, len: usize, cut: Cutting, ends_job: bool) -> usize {
    let bytes = if cut.fold {
        len
    } else {
        aes_buffer_len(op, len, ends_job)
    };
    bytes.div_ceil(cut.packet).max(1)
}

/// Cuts AES data into packets of `cut.packet` bytes without copying: one `BytesMut` split
/// into disjoint chunks. The packets are numbered from `first_seq`; when the data `ends_job`,
/// the last packet is the job's last, with room for an encryption's padding (one block more
/// than a packet when the padding folds into it). `start` (the IV,
/// for a chained job's first packet) travels with the first packet; in CTR, `start` is the
/// first packet's counter block and every packet carries its own, `start` plus its offset in
/// blocks (docs/ALGORITHM.md §15.4).
pub(crate) fn cut_aes(
    job: &Arc<JobShared>,
    op: AesOp,
    mut data: Vec<u8>,
    cut: Cutting,
    first_seq: u32,
    ends_job: bool,
    mut start: Option<ChainState>,
) -> Packets {
    let msg_total = data.len();
    make_padding_room(op, &mut data, ends_job);
    let n = aes_packet_count(op, msg_total, cut, ends_job);
    let packet_size = cut.packet;
    // A job cut whole is known to the policies by its length; a stream's parts are not.
    let job_bytes = (first_seq == 0 && ends_job).then_some(data.len() as u64);
    let mut buf = bytes_mut(data);
    let mut packets = Packets::with_capacity(n);
    for i in 0..n {
        let final_part = i + 1 == n;
        let chunk = if final_part {
            std::mem::take(&mut buf)
        } else {
            buf.split_to(packet_size)
        };
        let msg_len = if final_part {
            msg_total - i * packet_size
        } else {
            chunk.len()
        };
        let packet_start = if op.mode == Mode::Ctr {
            let blocks = (i * packet_size / BLOCK) as u64;
            start.as_ref().map(|first| first.counter_plus(blocks))
        } else {
            start.take()
        };
        let work = Work {
            job: Arc::clone(job),
            part: i,
            data: chunk,
            msg_len,
            start: packet_start,
        };
        packets.push(Packet::new(
            PacketMeta::new(job.task, op.direction.cmd(), job.cluster)
                .dependent(op.mode.is_chained())
                .at(first_seq + i as u32, final_part && ends_job)
                .job_bytes(job_bytes),
            work,
        ));
    }
    packets
}

/// A job's packets: most jobs are one packet, kept inline without an allocation.
pub(crate) type Packets = SmallVec<[Packet<Work>; 1]>;

/// Takes over a `Vec`'s allocation as a `BytesMut`, without copying.
pub(crate) fn bytes_mut(data: Vec<u8>) -> BytesMut {
    BytesMut::from(bytes::Bytes::from(data))
}

/// A packet's data, and where its result goes: the payload the scheduler core carries.
pub(crate) struct Work {
    pub(crate) job: Arc<JobShared>,
    pub(crate) part: usize,
    pub(crate) data: BytesMut,
    /// Bytes of input at the front of `data` (the rest is room for padding).
    pub(crate) msg_len: usize,
    /// A chained job's first packet carries the IV itself; only the state between packets
    /// goes through the state store. Every CTR packet carries its own first counter block.
    pub(crate) start: Option<ChainState>,
}

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Work")
            .field("task", &self.job.task)
            .field("part", &self.part)
            .field("len", &self.data.len())
            .finish()
    }
}

impl Payload for Work {
    fn byte_len(&self) -> u64 {
        self.data.len() as u64
    }
}

/// A submitted job: wait on it (blocking), or `.await` it (it is a [`Future`]; no runtime
/// needed). Dropping the handle does not cancel the job.
pub struct JobHandle {
    state: HandleState,
}

enum HandleState {
    /// On the nodes: the record its packets report to.
    Nodes(Arc<JobShared>),
    /// Run on the submitting thread (docs/ALGORITHM.md §15.6): finished when handed out.
    /// `outcome` is `None` once taken.
    Done {
        task: TaskId,
        latency: Duration,
        outcome: Option<Result<JobOutput, JobError>>,
    },
}

impl fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHandle")
            .field("task", &self.task())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl JobHandle {
    /// The handle of a job whose packets run on the nodes.
    pub(crate) fn on_nodes(job: Arc<JobShared>) -> Self {
        JobHandle {
            state: HandleState::Nodes(job),
        }
    }

    /// The handle of a job the submitting thread ran: its result, and the time from its
    /// submission until the result was handed to the caller.
    pub(crate) fn done(
        task: TaskId,
        outcome: Result<JobOutput, JobError>,
        latency: Duration,
    ) -> Self {
        JobHandle {
            state: HandleState::Done {
                task,
                latency,
                outcome: Some(outcome),
            },
        }
    }

    /// The job's id.
    pub fn task(&self) -> TaskId {
        match &self.state {
            HandleState::Nodes(job) => job.task,
            HandleState::Done { task, .. } => *task,
        }
    }

    /// Whether the job has finished (successfully or not).
    pub fn is_finished(&self) -> bool {
        match &self.state {
            HandleState::Nodes(job) => !matches!(job.lock().outcome, Outcome::Pending),
            HandleState::Done { .. } => true,
        }
    }

    /// Time from submission to the last packet's completion, once finished.
    pub fn latency(&self) -> Option<Duration> {
        match &self.state {
            HandleState::Nodes(job) => job.lock().finished.map(|t| t.duration_since(job.submitted)),
            HandleState::Done { latency, .. } => Some(*latency),
        }
    }

    /// Blocks until the job finishes and returns its output.
    ///
    /// # Errors
    /// The job's [`JobError`]; [`JobError::OnWorkerThread`] when called, on a job not finished
    /// yet, on a worker thread of the service (from a waker or callback it ran there), which
    /// the job may need to run on: a deadlock refused.
    pub fn wait(mut self) -> Result<JobOutput, JobError> {
        let job = match &mut self.state {
            HandleState::Nodes(job) => job,
            HandleState::Done { outcome, .. } => return take_done(outcome),
        };
        let mut c = job.lock();
        if matches!(c.outcome, Outcome::Pending) && crate::runtime::worker::on_any_worker() {
            return Err(JobError::OnWorkerThread);
        }
        while matches!(c.outcome, Outcome::Pending) {
            c.waiting += 1;
            c = job.done.wait(c).unwrap_or_else(|e| e.into_inner());
            c.waiting -= 1;
        }
        take(&mut c)
    }

    /// Blocks for at most `timeout`; `None` if the job has not finished by then (the handle
    /// stays usable).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<Result<JobOutput, JobError>> {
        let job = match &mut self.state {
            HandleState::Nodes(job) => job,
            HandleState::Done { outcome, .. } => return Some(take_done(outcome)),
        };
        let mut c = job.lock();
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
                c = job
                    .done
                    .wait_timeout(c, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                c.waiting -= 1;
            }
        }
        Some(take(&mut c))
    }
}

fn take(c: &mut Collect) -> Result<JobOutput, JobError> {
    match std::mem::replace(&mut c.outcome, Outcome::Taken) {
        Outcome::Ready(r) => r,
        Outcome::Taken => Err(JobError::ResultTaken),
        Outcome::Pending => unreachable!("callers wait for the outcome first"),
    }
}

fn take_done(outcome: &mut Option<Result<JobOutput, JobError>>) -> Result<JobOutput, JobError> {
    outcome.take().unwrap_or(Err(JobError::ResultTaken))
}

impl Future for JobHandle {
    type Output = Result<JobOutput, JobError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let job = match &mut self.state {
            HandleState::Nodes(job) => job,
            HandleState::Done { outcome, .. } => return Poll::Ready(take_done(outcome)),
        };
        let mut c = job.lock();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{Direction, Padding};

    /// Cuts a padded CBC encryption of `data` into packets of 64 bytes, the padding folded
    /// into the last packet or not.
    fn cut_padded_with(data: Vec<u8>, fold: bool) -> Packets {
        let cut = Cutting { packet: 64, fold };
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
        let len = data.len();
        let key = Arc::new(AesKey::new(&[1; 16]).unwrap());
        let job = Arc::new(JobShared::new(
            TaskId(1),
            ClusterId(0),
            JobWork::Aes { key, op },
            aes_packet_count(op, len, cut, true),
        ));
        cut_aes(&job, op, data, cut, 0, true, None)
    }

    fn cut_padded(data: Vec<u8>) -> Packets {
        cut_padded_with(data, true)
    }

    /// (message bytes, buffer bytes) of each packet.
    fn shape(packets: &Packets) -> Vec<(usize, usize)> {
        packets
            .iter()
            .map(|p| (p.data.msg_len, p.data.data.len()))
            .collect()
    }

    #[test]
    fn the_padding_block_folds_into_the_last_packet() {
        // A whole number of packets: the block rides in the last one, which is one block
        // longer than a packet, instead of making a packet of its own.
        assert_eq!(shape(&cut_padded(vec![1; 128])), [(64, 64), (64, 80)]);
        assert_eq!(
            shape(&cut_padded_with(vec![1; 128], false)),
            [(64, 64), (64, 64), (0, 16)]
        );
        // Otherwise the last packet has room for it either way.
        for fold in [true, false] {
            assert_eq!(
                shape(&cut_padded_with(vec![1; 100], fold)),
                [(64, 64), (36, 48)]
            );
            assert_eq!(shape(&cut_padded_with(Vec::new(), fold)), [(0, 16)]);
        }
        // Only a padded encryption's last packet grows: no padding, no growth.
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let cut = Cutting {
            packet: 64,
            fold: true,
        };
        assert_eq!(aes_packet_count(op, 128, cut, true), 2);
        assert_eq!(aes_packet_count(op, 129, cut, true), 3);
        assert_eq!(
            aes_packet_count(op.with_padding(Padding::Pkcs7), 129, cut, true),
            3
        );
        assert_eq!(
            aes_packet_count(op.with_padding(Padding::Pkcs7), 128, cut, false),
            2
        );
    }

    #[test]
    fn a_padded_job_with_room_is_cut_in_its_own_allocation() {
        let mut v = Vec::with_capacity(padded_len(100));
        v.extend_from_slice(&[5u8; 100]);
        let at = v.as_ptr();
        let packets = cut_padded(v);
        assert_eq!(packets[0].data.data.as_ptr(), at, "no copy of the job");
        let last = &packets[packets.len() - 1].data;
        assert_eq!(
            (last.msg_len, last.data.len()),
            (36, 48),
            "the padding is in the last packet"
        );
    }

    #[test]
    fn a_padded_job_without_room_grows_by_exactly_the_padding() {
        for len in [0, 1, 15, 16, 17, 1000] {
            let packets = cut_padded(vec![3u8; len]);
            let total: usize = packets.iter().map(|p| p.data.data.len()).sum();
            assert_eq!(total, padded_len(len), "len {len}");
            let last = &packets[packets.len() - 1].data;
            assert!(
                last.data.capacity() < last.data.len() + BLOCK,
                "len {len}: grew by doubling"
            );
        }
    }
}
