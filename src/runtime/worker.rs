//! A node: one thread (named `cdnode-N`, short enough for the kernel's 15-byte thread names),
//! pinned to a core if asked, serving its queue first come first served.
//!
//! At start-up the worker measures its own speed (unless unit times were declared): a few
//! packets of the configured size, CBC encryption and decryption for an AES node, signing and
//! verifying for an Ed25519 node, the fastest of each taken. After that, every packet's measured
//! service time refines the estimate by an exponentially weighted average, and the scheduler is
//! told when the estimate moves by more than 2%.
//!
//! A node with a slowdown factor f > 1 emulates a slower IP core: after its real work, taking
//! time d, it waits (f − 1)·d, so each packet costs f times its real time. It sleeps for most of
//! the wait, leaving the core to other nodes pinned there, and spins only the last 60 µs so the
//! wait ends on time.
//!
//! A panic while running a packet is caught: the packet's job fails with
//! [`JobError::WorkerPanicked`], and the worker goes on with the next packet.

use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use smallvec::SmallVec;

use crate::crypto::{
    AesKey, AesOp, BatchItem, ChainState, CryptoError, Direction, SigningKey, verify_batch,
};
use crate::packet::{Cmd, Mode, NodeId, Packet, PacketMeta, UnitTimes};
use crate::runtime::ClusterKind;
use crate::runtime::engine::Shared;
use crate::runtime::error::JobError;
use crate::runtime::handle::{JobShared, JobWork, PartOutput, Work};
use crate::runtime::lanes;
use crate::runtime::metrics::LocalCounters;
use crate::runtime::store::{StateStore, StoredState};

/// What a worker needs to know about its node.
#[derive(Debug, Clone)]
pub(crate) struct WorkerSpec {
    pub(crate) node: NodeId,
    pub(crate) kind: ClusterKind,
    pub(crate) core: Option<core_affinity::CoreId>,
    pub(crate) slowdown: f64,
    pub(crate) declared: Option<UnitTimes>,
    pub(crate) unit_len: usize,
    /// Serial packets of different jobs the node runs interleaved (1: no lanes).
    pub(crate) lanes: usize,
    /// Faults to inject (tests and chaos tests; the `fault-injection` feature).
    #[cfg(feature = "fault-injection")]
    pub(crate) fault: Option<crate::runtime::fault::Fault>,
    /// Shared by every worker the node ever has, so an injected fault strikes once.
    #[cfg(feature = "fault-injection")]
    pub(crate) fault_fired: Arc<std::sync::atomic::AtomicBool>,
}

impl WorkerSpec {
    #[cfg(feature = "fault-injection")]
    fn faults(&self) -> crate::runtime::fault::Injector {
        crate::runtime::fault::Injector::new(self.fault, Arc::clone(&self.fault_fired))
    }

    #[cfg(not(feature = "fault-injection"))]
    fn faults(&self) -> NoFaults {
        NoFaults
    }
}

/// Without the `fault-injection` feature, no fault is ever injected.
#[cfg(not(feature = "fault-injection"))]
struct NoFaults;

#[cfg(not(feature = "fault-injection"))]
impl NoFaults {
    #[inline(always)]
    fn exit_now(&mut self) -> bool {
        false
    }
    #[inline(always)]
    fn panic_now(&mut self) {}
    #[inline(always)]
    fn stall_now(&mut self) {}
    #[inline(always)]
    fn completed(&mut self) {}
}

thread_local! {
    /// On a worker thread: the address of its service's shared state (0 elsewhere).
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
}

/// Whether the current thread is a worker of any service (a blocking wait there could wait
/// for that very worker).
pub(crate) fn on_any_worker() -> bool {
    WORKER_OF.with(|w| w.get() != 0)
}

/// Whether the current thread is one of the workers of the service sharing `shared`.
pub(crate) fn on_worker_of(shared: &Arc<Shared>) -> bool {
    WORKER_OF.with(|w| w.get() == Arc::as_ptr(shared) as usize)
}

/// The most packets a worker takes from its queue at once. They were placed on this node
/// already; taking them together saves a lock round trip per packet, and the scheduler hears of
/// their completion together, when the worker comes back for more.
const MAX_BATCH: usize = 16;

/// The worker thread's body. `ready` (at start-up) hears once the node has calibrated; a
/// worker started again after a failure takes its node's current unit times instead.
pub(crate) fn run(shared: Arc<Shared>, spec: WorkerSpec, ready: Option<mpsc::Sender<()>>) {
    WORKER_OF.with(|w| w.set(Arc::as_ptr(&shared) as usize));
    if let Some(core) = spec.core {
        // Pinning is best effort: an unpinned node still works.
        let _ = core_affinity::set_for_current(core);
    }
    let times = spec
        .declared
        .unwrap_or_else(|| calibrate(spec.kind, spec.unit_len, spec.slowdown));
    shared.set_unit_times(spec.node, times);
    if let Some(ready) = ready {
        let _ = ready.send(());
    }

    let health = &shared.health[spec.node.index()];
    let mut estimate = Estimator::new(spec.kind, times, spec.unit_len);
    let mut local = LocalCounters::default();
    let mut estimates = Vec::new();
    let mut generation = 0;
    let mut faults = spec.faults();
    // The running set, once taken back from the health slot; empty between sets.
    let mut resolved: Vec<(Arc<JobShared>, usize)> = Vec::new();
    while shared.exchange(spec.node, &mut generation, &mut estimates, MAX_BATCH) {
        loop {
            if faults.exit_now() {
                return;
            }
            let set = take_set(&mut health.hand(), spec.lanes);
            if set.is_empty() {
                break;
            }
            let metas: SmallVec<[PacketMeta; 1]> = set.iter().map(|p| p.meta).collect();
            let chain_run = is_chain_run(&set);
            // The slot keeps its capacity from set to set (see `resolved` below).
            health
                .running()
                .extend(set.iter().map(|p| (Arc::clone(&p.data.job), p.data.part)));
            let expected: f64 = metas.iter().map(|m| estimate.expected(m)).sum();
            let limit = shared.stall_limit(expected);
            health.busy_limit.store(limit, Ordering::Release);
            health
                .busy_since
                .store(shared.now_ns() + 1, Ordering::Release);
            faults.panic_now();
            let start = Instant::now();
            let results = catch_unwind(AssertUnwindSafe(|| run_set(&shared.store, set)))
                .unwrap_or_else(|_| {
                    local.panics += 1;
                    metas
                        .iter()
                        .map(|_| Err(JobError::WorkerPanicked(spec.node)))
                        .collect()
                });
            faults.stall_now();
            if spec.slowdown > 1.0 {
                emulate_slowdown(start.elapsed().mul_f64(spec.slowdown - 1.0));
            }
            health.busy_since.store(0, Ordering::Release);
            let busy = start.elapsed();
            // Take the set back from the slot, leaving the slot this worker's empty vector.
            std::mem::swap(&mut *health.running(), &mut resolved);
            if resolved.is_empty() {
                // The node was declared failed while these packets ran (a stall): their jobs
                // have their errors already, and these late results are discarded.
                continue;
            }
            let n = metas.len() as u32;
            for ((meta, (job, part)), result) in
                metas.into_iter().zip(resolved.drain(..)).zip(results)
            {
                // Count first, then deliver: whoever the result wakes sees it counted.
                local.packets += 1;
                local.bytes += meta.len;
                local.busy_ns += (busy / n).as_nanos() as u64;
                shared.node_counters[spec.node.index()].publish(&local);
                health.unreported.fetch_add(1, Ordering::AcqRel);
                faults.completed();
                // Delivering may run the job's waker, which is user code: a panic there must
                // not take the node down (the result is delivered before the waker runs).
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    job.part_done(part, result, &shared.counters)
                }));
                if n == 1 || chain_run {
                    // Unit times are a packet's alone (in a chain run the packets ran one after
                    // another, so each took its share); a lane set's share of its time is not.
                    estimates.extend(estimate.observe(meta.cmd, busy / n, meta.len));
                }
            }
        }
    }
}

/// The next packets to run from the front of the worker's hand: one packet; or a chain run,
/// when it is of a chained AES job whose next packets follow it in the hand (they run one after
/// another, the chaining state kept by the worker between them, not passed through the store);
/// or, when it is of a serial AES operation (CBC or CFB encryption, OFB) and the node has
/// lanes, the longest prefix of the hand (up to `lanes`) made of such packets of different
/// jobs: a lane set. A set runs at once, whatever its size: a lane never waits for others to
/// fill it, so a chained job's next packet is not held back. Taking a prefix keeps the node's
/// packets in the order the scheduler placed them (docs/ALGORITHM.md §15.3).
fn take_set(hand: &mut VecDeque<Packet<Work>>, lanes: usize) -> SmallVec<[Packet<Work>; 1]> {
    let Some(first) = hand.pop_front() else {
        return SmallVec::new();
    };
    let chained = matches!(&first.data.job.work, JobWork::Aes { op, .. } if op.mode.is_chained());
    let follows = |prev: &PacketMeta, p: &Packet<Work>| {
        p.meta.task == prev.task && p.meta.seq == prev.seq + 1
    };
    if chained && hand.front().is_some_and(|p| follows(&first.meta, p)) {
        let mut run: SmallVec<[Packet<Work>; 1]> = smallvec::smallvec![first];
        while hand
            .front()
            .is_some_and(|p| follows(&run[run.len() - 1].meta, p))
        {
            run.extend(hand.pop_front());
        }
        return run;
    }
    lane_set(hand, lanes, first)
}

/// `first` and, if it is serial and the node has lanes, the serial packets of other jobs that
/// follow it in the hand, up to `lanes` in all.
fn lane_set(
    hand: &mut VecDeque<Packet<Work>>,
    lanes: usize,
    first: Packet<Work>,
) -> SmallVec<[Packet<Work>; 1]> {
    let mut set: SmallVec<[Packet<Work>; 1]> = SmallVec::new();
    let serial =
        |p: &Packet<Work>| matches!(&p.data.job.work, JobWork::Aes { op, .. } if op.is_serial());
    let lane_set = lanes > 1 && serial(&first);
    set.push(first);
    while lane_set && set.len() < lanes {
        match hand.front() {
            Some(p) if serial(p) && set.iter().all(|q| q.meta.task != p.meta.task) => {
                if let Some(p) = hand.pop_front() {
                    set.push(p);
                }
            }
            _ => break,
        }
    }
    set
}

/// Whether a set is a chain run: several packets, all of one job.
fn is_chain_run(set: &[Packet<Work>]) -> bool {
    set.len() > 1 && set.iter().all(|p| p.meta.task == set[0].meta.task)
}

/// Runs a set of packets: one through [`execute`], a chain run through [`run_chain`], or a lane
/// set through [`run_lanes`](crate::crypto::run_lanes). Results come back in the set's order.
fn run_set(
    store: &StateStore,
    set: SmallVec<[Packet<Work>; 1]>,
) -> Vec<Result<PartOutput, JobError>> {
    if is_chain_run(&set) {
        return run_chain(store, set);
    }
    if set.len() == 1 {
        return set
            .into_iter()
            .map(|p| {
                let Packet { meta, data: work } = p;
                let Work {
                    job,
                    mut data,
                    msg_len,
                    start,
                    ..
                } = work;
                execute(store, &job, &meta, &mut data, msg_len, start)
            })
            .collect();
    }
    lanes::run(store, set)
}

/// Runs consecutive packets of one chained AES job one after another, as [`execute`] would run
/// each, but with the chaining state kept here between them: it is taken (from the IV or the
/// store) before the first and handed to the store after the last, unless that ends the job.
/// A packet that fails breaks the chain: the packets after it fail with
/// [`JobError::StateLost`], as they would finding no state in the store.
fn run_chain(
    store: &StateStore,
    set: SmallVec<[Packet<Work>; 1]>,
) -> Vec<Result<PartOutput, JobError>> {
    let job = Arc::clone(&set[0].data.job);
    let JobWork::Aes { key, op } = &job.work else {
        // `take_set` forms chain runs of AES jobs only.
        let e = JobError::Internal(format!("a chain run of {}, not an AES job", job.task));
        return set.iter().map(|_| Err(e.clone())).collect();
    };
    // The state between the run's packets; `Err` once the chain is broken.
    let mut state: Result<Option<ChainState>, ()> = Ok(None);
    let mut results = Vec::with_capacity(set.len());
    for p in set {
        let Packet { meta, data: work } = p;
        let Work {
            mut data,
            msg_len,
            start,
            ..
        } = work;
        let begun = match state {
            Ok(Some(s)) => Ok(s),
            Ok(None) => chain_state(store, &job, start),
            Err(()) => Err(JobError::StateLost(job.task)),
        };
        let mut s = match begun {
            Ok(s) => s,
            Err(e) => {
                state = Err(());
                results.push(Err(e));
                continue;
            }
        };
        match key.process(*op, &mut s, &mut data, msg_len, meta.last) {
            Ok(n) => {
                data.truncate(n);
                results.push(Ok(PartOutput::Data(data)));
                state = Ok((!meta.last).then_some(s));
            }
            Err(e) => {
                state = Err(());
                results.push(Err(e.into()));
            }
        }
    }
    if let Ok(Some(s)) = state {
        store.put(job.task, StoredState::Chain(s));
    }
    results
}

/// A chained packet's starting state: the IV the job's first packet carries, or what the
/// job's previous packet left in the store. An earlier packet of the job failed (its node,
/// say): the chain is broken, so the packet does not run on a state that is not its own, and
/// the job's state leaves the store.
pub(crate) fn chain_state(
    store: &StateStore,
    job: &JobShared,
    iv: Option<ChainState>,
) -> Result<ChainState, JobError> {
    if job.has_failed() {
        store.remove(job.task);
        return Err(JobError::StateLost(job.task));
    }
    match iv {
        Some(iv) => Ok(iv),
        None => match store.take(job.task) {
            Some(StoredState::Chain(state)) => Ok(state),
            _ => Err(JobError::StateLost(job.task)),
        },
    }
}

/// Runs one packet: the cryptography, with the chaining state taken from and returned to the
/// store.
pub(crate) fn execute(
    store: &StateStore,
    job: &JobShared,
    meta: &PacketMeta,
    data: &mut BytesMut,
    msg_len: usize,
    iv: Option<ChainState>,
) -> Result<PartOutput, JobError> {
    match &job.work {
        JobWork::Aes { key, op } => {
            let chained = op.mode.is_chained();
            let mut state = match iv {
                Some(iv) if !chained => iv,
                None if !chained => ChainState::default(),
                iv => chain_state(store, job, iv)?,
            };
            let n = key.process(*op, &mut state, data, msg_len, meta.last)?;
            if chained && !meta.last {
                store.put(job.task, StoredState::Chain(state));
            }
            data.truncate(n);
            Ok(PartOutput::Data(std::mem::take(data)))
        }
        // docs/ALGORITHM.md §15.4: the first packet starts the hash, each packet hands it on
        // through the store, the last one seals or opens.
        JobWork::Gcm {
            key,
            direction,
            nonce,
            aad,
            tag,
        } => {
            let mut state = if meta.seq == 0 {
                Box::new(key.gcm_start(nonce, aad)?)
            } else {
                match store.take(job.task) {
                    Some(StoredState::Gcm(state)) => state,
                    _ => return Err(JobError::StateLost(job.task)),
                }
            };
            let text = &mut data[..msg_len];
            if !meta.last {
                key.gcm_update(*direction, &mut state, text)?;
                store.put(job.task, StoredState::Gcm(state));
                return Ok(PartOutput::Data(std::mem::take(data)));
            }
            match (direction, tag) {
                (Direction::Encrypt, _) => {
                    let tag = key.gcm_seal_final(*state, text)?;
                    Ok(PartOutput::Sealed(std::mem::take(data), tag))
                }
                // On a mismatch this packet is left as ciphertext, and the plaintext of the
                // earlier packets is zeroized by the job record (`handle.rs`).
                (Direction::Decrypt, Some(tag)) => {
                    key.gcm_open_final(*state, text, tag)?;
                    Ok(PartOutput::Data(std::mem::take(data)))
                }
                (Direction::Decrypt, None) => Err(CryptoError::TagLength { got: 0 }.into()),
            }
        }
        JobWork::Sign { key } => Ok(PartOutput::Signature(key.sign(&data[..msg_len]))),
        JobWork::VerifyBatch { items, starts } => {
            let part = usize::try_from(meta.seq).unwrap_or(usize::MAX);
            let first = starts.get(part).copied().unwrap_or(items.len());
            let end = starts.get(part + 1).copied().unwrap_or(items.len());
            let mut rest = &data[..msg_len];
            let mut batch = Vec::with_capacity(end - first);
            for (key, sig, len) in &items[first..end] {
                let (msg, tail) = rest.split_at((*len).min(rest.len()));
                batch.push(BatchItem { key, msg, sig });
                rest = tail;
            }
            Ok(PartOutput::VerifiedBatch(verify_batch(&batch)))
        }
        JobWork::Verify { key, sig } => Ok(PartOutput::Verified(
            key.verify(&data[..msg_len], &sig[..])?,
        )),
    }
}

/// Waits `extra`, as a node with a slowdown factor does after its real work: sleeps for all but
/// the last 60 µs (leaving the core to other threads), then spins to the deadline.
fn emulate_slowdown(extra: Duration) {
    const SPIN: Duration = Duration::from_micros(60);
    let deadline = Instant::now() + extra;
    if extra > SPIN {
        std::thread::sleep(extra - SPIN);
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Measures the node's unit times: nanoseconds per packet of `unit_len` bytes (AES) or per
/// operation (Ed25519), the fastest of a few runs, times the slowdown factor.
fn calibrate(kind: ClusterKind, unit_len: usize, slowdown: f64) -> UnitTimes {
    fn fastest(runs: usize, mut f: impl FnMut()) -> f64 {
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_nanos() as f64
            })
            .fold(f64::INFINITY, f64::min)
            .max(1.0)
    }
    let (a, b) = match kind {
        ClusterKind::Aes => {
            let Ok(key) = AesKey::new(&[0x5c; 16]) else {
                return UnitTimes::uniform(1.0);
            };
            let mut buf = vec![0u8; unit_len];
            let mut run = |direction| {
                let op = AesOp::new(direction, Mode::Cbc);
                fastest(5, || {
                    let mut state = ChainState::default();
                    let _ = key.process(op, &mut state, &mut buf, unit_len, false);
                })
            };
            (run(Direction::Encrypt), run(Direction::Decrypt))
        }
        ClusterKind::Ed25519 => {
            let Ok(key) = SigningKey::from_seed(&[7; 32]) else {
                return UnitTimes::uniform(1.0);
            };
            let public = key.verifying_key();
            let msg = [0u8; 64];
            let sig = key.sign(&msg);
            let sign = fastest(3, || {
                std::hint::black_box(key.sign(std::hint::black_box(&msg)));
            });
            let verify = fastest(3, || {
                let _ = std::hint::black_box(public.verify(&msg, &sig));
            });
            (sign, verify)
        }
    };
    let f = slowdown.max(1.0);
    UnitTimes([a * f, b * f, a * f, b * f])
}

/// Exponentially weighted unit-time estimates per command.
struct Estimator {
    kind: ClusterKind,
    unit_len: f64,
    current: UnitTimes,
    published: UnitTimes,
}

impl Estimator {
    const WEIGHT: f64 = 0.1;
    const REPORT_CHANGE: f64 = 0.02;

    fn new(kind: ClusterKind, start: UnitTimes, unit_len: usize) -> Self {
        Estimator {
            kind,
            unit_len: unit_len as f64,
            current: start,
            published: start,
        }
    }

    /// The expected service time of `meta`, in nanoseconds, from the current estimates.
    fn expected(&self, meta: &PacketMeta) -> f64 {
        let t = self.current.get(meta.cmd);
        match self.kind {
            ClusterKind::Aes => t * meta.len as f64 / self.unit_len,
            // A batch verification packet holds up to 64 signatures.
            ClusterKind::Ed25519 => t * 64.0,
        }
    }

    /// Folds in one measured service time; returns the new estimate when it moved enough to
    /// tell the scheduler.
    fn observe(&mut self, cmd: Cmd, took: Duration, len: u64) -> Option<(Cmd, f64)> {
        let ns = took.as_nanos() as f64;
        let sample = match self.kind {
            // Short packets (a job's tail) are dominated by fixed costs; skip them.
            ClusterKind::Aes if (len as f64) * 4.0 < self.unit_len => return None,
            ClusterKind::Aes => ns * self.unit_len / len as f64,
            ClusterKind::Ed25519 => ns,
        };
        if !(sample.is_finite() && sample > 0.0) {
            return None;
        }
        let old = self.current.get(cmd);
        let new = old + Self::WEIGHT * (sample - old);
        self.current.set(cmd, new);
        let published = self.published.get(cmd);
        if (new - published).abs() > Self::REPORT_CHANGE * published {
            self.published.set(cmd, new);
            Some((cmd, new))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::AesKey;
    use crate::packet::{ClusterId, TaskId};
    use crate::runtime::handle::{Cutting, aes_packet_count, cut_aes};

    const PACKET: Cutting = Cutting {
        packet: 32,
        fold: true,
    };

    /// A job of `op` over `data`, cut into packets of 32 bytes.
    fn packets(
        task: u64,
        key: &Arc<AesKey>,
        op: AesOp,
        iv: &[u8],
        data: &[u8],
    ) -> Vec<Packet<Work>> {
        let job = Arc::new(JobShared::new(
            TaskId(task),
            ClusterId(0),
            JobWork::Aes {
                key: Arc::clone(key),
                op,
            },
            aes_packet_count(op, data.len(), PACKET, true),
        ));
        let start = op
            .mode
            .takes_iv()
            .then(|| ChainState::for_mode(op.mode, iv).unwrap());
        cut_aes(&job, op, data.to_vec(), PACKET, 0, true, start)
            .into_iter()
            .collect()
    }

    fn output(results: Vec<Result<PartOutput, JobError>>) -> Vec<u8> {
        results
            .into_iter()
            .flat_map(|r| match r {
                Ok(PartOutput::Data(d)) => d.to_vec(),
                _ => panic!("a packet failed"),
            })
            .collect()
    }

    #[test]
    fn a_chained_jobs_packets_in_a_row_run_as_one_chain_run() {
        let key = Arc::new(AesKey::new(&[7; 16]).unwrap());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let ecb = AesOp::new(Direction::Encrypt, Mode::Ecb);
        let iv = [3u8; 16];
        let data: Vec<u8> = (0..128u8).collect();
        let a = packets(1, &key, cbc, &iv, &data);
        let b = packets(2, &key, cbc, &iv, &data[..32]);
        let c = packets(3, &key, ecb, &[], &data[..64]);
        // a's four packets, then b's one, then c's two: a chain run of a's four, then b alone
        // (c's ECB packets are not serial, so no lane set forms with them), then c's one at
        // a time (ECB is not chained).
        let mut hand: VecDeque<Packet<Work>> = a.into_iter().chain(b).chain(c).collect();
        let sizes: Vec<Vec<u64>> = std::iter::from_fn(|| {
            let set = take_set(&mut hand, 8);
            (!set.is_empty()).then(|| set.iter().map(|p| p.meta.task.0).collect())
        })
        .collect();
        assert_eq!(sizes, vec![vec![1, 1, 1, 1], vec![2], vec![3], vec![3]]);
    }

    #[test]
    fn a_chain_run_gives_the_one_shot_output_and_leaves_the_state_for_the_rest() {
        let key = Arc::new(AesKey::new(&[9; 16]).unwrap());
        let iv = [5u8; 16];
        let data: Vec<u8> = (0..160u8).collect();
        for op in [
            AesOp::new(Direction::Encrypt, Mode::Cbc),
            AesOp::new(Direction::Decrypt, Mode::Cbc),
            AesOp::new(Direction::Encrypt, Mode::Ofb),
            AesOp::new(Direction::Decrypt, Mode::Cfb),
        ] {
            let want = key.one_shot(op, &iv, &data).unwrap();
            let store = StateStore::default();
            let mut all = packets(1, &key, op, &iv, &data);
            // The first three packets as one run, the last two as another: the state passes
            // through the store between the runs, and is gone after the job's last packet.
            let rest = all.split_off(3);
            let mut out = output(run_set(&store, all.into_iter().collect()));
            assert_eq!(store.len(), 1, "{op:?}: the state waits for the next run");
            out.extend(output(run_set(&store, rest.into_iter().collect())));
            assert_eq!(out, want, "{op:?}");
            assert_eq!(
                store.len(),
                0,
                "{op:?}: no state after the job's last packet"
            );
        }
    }

    #[test]
    fn a_chain_run_of_a_failed_job_runs_nothing() {
        let key = Arc::new(AesKey::new(&[9; 16]).unwrap());
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let store = StateStore::default();
        let mut all = packets(4, &key, op, &[1; 16], &[0; 96]);
        let rest = all.split_off(1);
        // The job's first packet ran elsewhere and failed: its state never reached the store.
        let job = Arc::clone(&all[0].data.job);
        let _ = job.part_done(0, Err(JobError::NodeFailed(NodeId(0))), &Default::default());
        let results = run_set(&store, rest.into_iter().collect());
        assert_eq!(results.len(), 2);
        for r in results {
            assert!(matches!(r, Err(JobError::StateLost(TaskId(4)))));
        }
        assert_eq!(store.len(), 0);
    }
}
