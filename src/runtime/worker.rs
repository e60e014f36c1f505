//! A node: one thread (named `cdnode-N`, short enough for the kernel's 15-byte thread names),
//! pinned to a core if asked, serving its queue first come first served.
//!
//! At start-up the worker measures its own speed (unless unit times were declared): a few
//! packets of the configured size, CBC encryption and decryption for an AES node, signing and
//! verifying for an Ed25519 node, the fastest of each taken. After that, every packet's measured
//! service time refines the estimate by an exponentially weighted average, and the scheduler is
//! told when the estimate moves by more than 2%.
//!
//! A node with a slowdown factor f > 1 emulates a slower IP core (`slow`): after its real
//! work, taking time d, it waits (f − 1)·d, so each packet costs f times its real time; d is
//! its thread's CPU time, counted at most at twice the set's usual time. It sleeps for most of
//! the wait, leaving the core to other nodes pinned there, and spins only the last 60 µs so the
//! wait ends on time. Light packets (docs/ALGORITHM.md §15.7) that come during the wait run at
//! once, as a slower core would run them at its set's next pause; the wait goes on after them.
//!
//! A panic while running a packet is caught: the packet's job fails with
//! [`JobError::WorkerPanicked`], and the worker goes on with the next packet.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::crypto::{AesKey, AesOp, ChainState, Direction, ImplTable, SigningKey};
use crate::packet::Packet;
use crate::packet::{Cmd, Mode, NodeId, PacketMeta, TaskId, UnitTimes};
use crate::runtime::context;
use crate::runtime::engine::Engine;
use crate::runtime::error::JobError;
use crate::runtime::exec::{
    PacketSet, Pause, States, is_chain_run, reads_stored_chain, run_set, runs_out_of_place,
    take_set,
};
use crate::runtime::hand::{IdlePoll, LIGHT_QUEUES, NodeHand, Running};
use crate::runtime::health::{NodeHealth, own_thread_id, stall_limit};
use crate::runtime::ids::ClusterKind;
use crate::runtime::metrics::LocalCounters;
use crate::runtime::slow::{SLOWDOWN_SPIN, SlowCore, WorkClock, emulate_slowdown};
use crate::runtime::work::{PacketData, PartOutput, output_home, warm_spare};

/// What a worker needs to know about its node.
#[derive(Debug, Clone)]
pub(crate) struct WorkerSpec {
    pub(crate) node: NodeId,
    pub(crate) kind: ClusterKind,
    pub(crate) core: Option<core_affinity::CoreId>,
    pub(crate) slowdown: f64,
    pub(crate) declared: Option<UnitTimes>,
    pub(crate) unit_len: usize,
    /// At most how many serial packets of different jobs the node runs interleaved (1: no
    /// lanes); within it, the lane width the implementation table chose.
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

/// The most packets a worker takes from its queue at once. They were placed on this node
/// already; taking them together saves a lock round trip per packet, and the scheduler hears of
/// their completion together, when the worker comes back for more.
const MAX_BATCH: usize = 16;

/// The worker thread's body. `ready` (at start-up) hears once the node has calibrated; a
/// worker started again after a failure takes its node's current unit times instead.
pub(crate) fn run(engine: Arc<Engine>, spec: WorkerSpec, ready: Option<mpsc::Sender<()>>) {
    context::enter_worker(engine.serial());
    if let Some(core) = spec.core {
        // Pinning is best effort: an unpinned node still works.
        let _ = core_affinity::set_for_current(core);
    }
    let times = spec.declared.unwrap_or_else(|| {
        calibrate(
            spec.kind,
            spec.unit_len,
            spec.slowdown,
            &engine.layout.aes_impls,
        )
    });
    engine.set_unit_times(spec.node, times);
    // A packet run again on another node should this one fail: none where the node is alone
    // in its cluster (`Engine::fail_node`), so nothing is kept for a retry that cannot happen.
    let cluster = engine.layout.nodes[spec.node.index()].cluster;
    let siblings = engine.layout.nodes.iter().filter(|n| n.cluster == cluster);
    let max_attempts = match siblings.count() {
        1 => 1,
        _ => engine.layout.max_attempts,
    };
    // Buffers of retry copies no longer needed, and of outputs gone home, for the next set's
    // copies and outputs: at most a set's worth, each as large as the largest packet.
    let mut spare = warm_spare(max_attempts, engine.layout.packet_size);
    if let Some(ready) = ready {
        let _ = ready.send(());
    }

    let health = &engine.health[spec.node.index()];
    // The supervisor charges a running packet the time this thread could run (see `health.rs`).
    health
        .thread_id
        .store(own_thread_id().unwrap_or(0), Ordering::Release);
    let hand = &engine.hands[spec.node.index()];
    hand.set_worker();
    let light_run = engine.layout.node_queue(cluster).bytes;
    let node = Node {
        engine: &engine,
        spec: &spec,
        hand,
        health,
        max_attempts,
        light_run,
        core: SlowCore::new(spec.slowdown),
    };
    let mut estimate = Estimator::new(spec.kind, times, spec.unit_len);
    let mut local = LocalCounters::default();
    let mut estimates = Vec::new();
    let mut generation = 0;
    let mut faults = spec.faults();
    // The running set, once taken back from the hand; empty between sets.
    let mut resolved: Vec<Running> = Vec::new();
    // Looking for work before sleeping, earned by working (`ServiceBuilder::idle_poll`).
    let mut poll = IdlePoll::new(engine.layout.idle_poll);
    while engine.worker_turn(
        spec.node,
        &mut generation,
        &mut estimates,
        MAX_BATCH,
        &mut poll,
    ) {
        // Its CPU time: a slowed node's emulated waits earn no looking. Read only where
        // looking is on: the thread's CPU clock is a system call, twice a turn.
        let working = (!engine.layout.idle_poll.is_zero()).then(WorkClock::start);
        loop {
            if faults.exit_now() {
                return;
            }
            // Light packets placed since the last set go first.
            let (_, ran) = node.run_light(&estimate, &mut spare, &mut local);
            (0..ran).for_each(|_| faults.completed());
            let mut set = take_set(&mut hand.waiting(), spec.lanes, &engine.layout.aes_impls);
            if set.is_empty() {
                break;
            }
            let metas: SmallVec<[PacketMeta; 1]> = set.iter().map(|p| p.meta).collect();
            let chain_run = is_chain_run(&set);
            let light = set[0].data.light;
            let started =
                node.publish_running(&mut set, &mut hand.running(), &mut spare, &mut local);
            let expected: f64 = metas.iter().map(|m| estimate.expected(m)).sum();
            let limit = stall_limit(engine.layout.stall_timeout, expected);
            health.busy_limit.store(limit, Ordering::Release);
            health
                .busy_since
                .store(engine.now_ns() + 1, Ordering::Release);
            faults.panic_now();
            let start = Instant::now();
            // A slowed node measures its work apart from the wall time.
            let clock = node.core.clock();
            // Time spent on light packets at the set's pauses (wall time, and the thread's
            // work in it), which is not the set's.
            let (mut aside, mut aside_work, mut ran) = (Duration::ZERO, Duration::ZERO, 0);
            let mut states = States::new(&engine.store, &engine.layout.aes_impls);
            let mut hook = || {
                let light = node.core.clock();
                let (took, n) = node.run_light(&estimate, &mut spare, &mut local);
                (aside, ran) = (aside + took, ran + n);
                aside_work += light.map_or(Duration::ZERO, |c| c.work());
            };
            let mut pause = Pause {
                slice: PAUSE_SLICE,
                hook: &mut hook,
            };
            // A set pauses only while light jobs come, and a light set not for other light
            // packets: they come after it.
            let pause = (!light && engine.light_recent()).then_some(&mut pause);
            if pause.is_none() {
                hand.busy_until(engine.now_ns().saturating_add(expected as u64));
            }
            let results = catch_unwind(AssertUnwindSafe(|| run_set(&mut states, set, pause)))
                .unwrap_or_else(|_| {
                    local.panics += 1;
                    metas
                        .iter()
                        .map(|_| Err(JobError::WorkerPanicked(spec.node)))
                        .collect()
                });
            faults.stall_now();
            // The emulated slowdown is a wait of known length after the work, not a stall:
            // the stall clock stops before it.
            health.busy_since.store(0, Ordering::Release);
            let busy = start.elapsed().saturating_sub(aside);
            let extra = clock.map_or(Duration::ZERO, |c| {
                let work = c.work().saturating_sub(aside_work).min(busy);
                node.core.extra(work, Some(usual(expected, spec.slowdown)))
            });
            if !extra.is_zero() {
                ran += node.wait_slowed(extra, &estimate, &mut spare, &mut local);
            }
            let busy = busy + extra;
            // Take the set back from the hand, leaving it this worker's empty vector.
            std::mem::swap(&mut *hand.running(), &mut resolved);
            if resolved.is_empty() {
                // The node was declared failed while these packets ran (a stall): they run
                // again elsewhere or their jobs have their errors already; these late results,
                // and the states they would leave, are discarded.
                continue;
            }
            // Light packets placed while the set's results go out run between two of them:
            // a delivery may wake a thread, which takes a few microseconds each.
            node.deliver(
                states,
                started,
                &metas,
                resolved.drain(..),
                results,
                (busy, light),
                &mut local,
                &mut spare,
                |local, spare| ran += node.run_light(&estimate, spare, local).1,
            );
            // A fault strikes after so many packets, light ones included.
            for _ in 0..metas.len() + ran {
                faults.completed();
            }
            if metas.len() == 1 || chain_run {
                // Unit times are a packet's alone (in a chain run the packets ran one after
                // another, so each took its share); a lane set's share of its time is not.
                let n = metas.len() as u32;
                for meta in &metas {
                    estimates.extend(estimate.observe(meta.cmd, busy / n, meta.len));
                }
            }
        }
        if let Some(working) = working {
            poll.worked(working.work());
        }
    }
}

/// How many bytes of each lane a lane set runs between two pauses, in a service shared
/// between tenants: a light tenant's packet waits at most this much of every lane, about
/// 4 µs for a set of eight on this machine's AES-NI, before it runs (docs/ALGORITHM.md §15.7).
const PAUSE_SLICE: usize = 2048;

/// A node as its worker sees it.
#[derive(Clone, Copy)]
struct Node<'a> {
    engine: &'a Engine,
    spec: &'a WorkerSpec,
    hand: &'a NodeHand,
    health: &'a NodeHealth,
    /// Runs a packet may have; 1 on a node alone in its cluster.
    max_attempts: u32,
    /// The most bytes of a light chain run: a node queue's (`NodeHand::take_light_set`).
    light_run: u64,
    /// The slower core the node emulates, if its slowdown is above 1.
    core: SlowCore,
}

impl Node<'_> {
    /// Publishes `set` as running, appended to `running`, each packet with what runs it again
    /// elsewhere should the node fail first: its input, shared, for a packet that runs out of
    /// place ([`runs_out_of_place`]); for any other, a copy of its input made before the set
    /// is published. Returns, per packet, the stored state that started it, to release once
    /// it is delivered.
    fn publish_running(
        &self,
        set: &mut [Packet<PacketData>],
        running: &mut Vec<Running>,
        spare: &mut Vec<bytes::BytesMut>,
        local: &mut LocalCounters,
    ) -> Started {
        // One packet, or a chain run, whose packets run one by one as one would; or a lane
        // set.
        let in_lanes = !(set.len() == 1 || is_chain_run(set));
        running.extend(set.iter_mut().map(|p| {
            let retry = (p.data.attempt + 1 < self.max_attempts).then(|| {
                let impls = &self.engine.layout.aes_impls;
                let between = self.engine.layout.out_of_place
                    && runs_out_of_place(&p.data.job, &p.meta, impls, in_lanes);
                let again = if between {
                    local.out_of_place += 1;
                    p.data.share_for_retry(spare)
                } else {
                    local.retry_copies += 1;
                    p.data.copy_for_retry(spare)
                };
                Packet::new(p.meta, again)
            });
            Running {
                job: Arc::clone(&p.data.job),
                part: p.data.part,
                retry,
                light: p.data.light,
            }
        }));
        set.iter()
            .map(|p| {
                reads_stored_chain(&p.data.job, p.data.start.is_some())
                    .then_some((p.data.job.task, p.meta.seq))
            })
            .collect()
    }

    /// Delivers a set that ran to the end: the states it leaves go into the store before its
    /// results are delivered, and the states that started it, no longer needed for a rerun,
    /// go out. Each result is counted (a core-placed packet to report at the worker's next
    /// turn, a light one only out of the system) before it is delivered: whoever it wakes sees
    /// it counted.
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &self,
        states: States<'_>,
        started: Started,
        metas: &[PacketMeta],
        resolved: impl Iterator<Item = Running>,
        results: Vec<Result<PartOutput, JobError>>,
        (busy, light): (Duration, bool),
        local: &mut LocalCounters,
        spare: &mut Vec<bytes::BytesMut>,
        mut between: impl FnMut(&mut LocalCounters, &mut Vec<bytes::BytesMut>),
    ) {
        states.commit();
        for (task, seq) in started.into_iter().flatten() {
            self.engine.store.release(task, seq);
        }
        let n = metas.len() as u32;
        let node = self.spec.node.index();
        local.pace.observe(metas.iter().map(|m| m.len).sum(), busy);
        self.engine.set_pace(self.spec.node, &local.pace);
        let counters = &self.engine.node_counters[node];
        for (
            (
                meta,
                Running {
                    job, part, retry, ..
                },
            ),
            result,
        ) in metas.iter().zip(resolved).zip(results)
        {
            let result = match retry.map(|r| r.data) {
                // The copy was not needed: its buffer serves the next set's copies.
                Some(PacketData {
                    data, input: None, ..
                }) => {
                    spare.push(data);
                    result
                }
                // It ran out of place: the output goes home, into its input's buffer (or, for
                // a job of one packet, is the job's output as it is).
                Some(PacketData {
                    input: Some(home), ..
                }) => {
                    let whole = meta.seq == 0 && meta.last;
                    match result {
                        Ok(PartOutput::Data(out)) => {
                            Ok(PartOutput::Data(output_home(home, out, whole, spare)))
                        }
                        Ok(PartOutput::Sealed(out, tag)) => Ok(PartOutput::Sealed(
                            output_home(home, out, whole, spare),
                            tag,
                        )),
                        other => other,
                    }
                }
                None => result,
            };
            local.packets += 1;
            local.bytes += meta.len;
            local.busy_ns += (busy / n).as_nanos() as u64;
            counters.publish(local);
            if light {
                self.engine.light_delivered(self.spec.node);
            } else {
                self.health.unreported.fetch_add(1, Ordering::AcqRel);
            }
            // Delivering may run the job's waker, which is user code: a panic there must
            // not take the node down (the result is delivered before the waker runs).
            let _ = catch_unwind(AssertUnwindSafe(|| {
                job.part_done(part, meta.len, result, &self.engine.counters)
            }));
            between(local, spare);
        }
    }

    /// Waits `extra`, the emulated rest of a set's time on a slowed node, running the light
    /// packets that come meanwhile (docs/ALGORITHM.md §15.7): a slower core would run them at
    /// its set's next pause, so they wait for the worker to be unparked, not for the set's
    /// emulated time, and the wait then goes on for as long as it had left. Returns how many
    /// light packets it ran.
    fn wait_slowed(
        &self,
        extra: Duration,
        estimate: &Estimator,
        spare: &mut Vec<bytes::BytesMut>,
        local: &mut LocalCounters,
    ) -> usize {
        let mut deadline = Instant::now() + extra;
        let mut ran = 0;
        loop {
            self.hand.set_emulating(true);
            if self.hand.light.load(Ordering::SeqCst) > 0 {
                self.hand.set_emulating(false);
                let (took, n) = self.run_light(estimate, spare, local);
                (deadline, ran) = (deadline + took, ran + n);
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left <= SLOWDOWN_SPIN {
                self.hand.set_emulating(false);
                emulate_slowdown(left);
                return ran;
            }
            // Woken early by a light job's submitter, or spuriously: the loop looks again.
            std::thread::park_timeout(left - SLOWDOWN_SPIN);
        }
    }

    /// Between two sets or at a pause of the running set: runs the node's light packets
    /// waiting (docs/ALGORITHM.md §15.7) now, each set of them (a lane set, or a chain run of
    /// one job) as the worker runs any set, and delivers them at once. They join the
    /// running set in the hand while they run, so that a failure of the node meanwhile sends
    /// them elsewhere too. Returns the time it took and how many packets it ran.
    fn run_light(
        &self,
        estimate: &Estimator,
        spare: &mut Vec<bytes::BytesMut>,
        local: &mut LocalCounters,
    ) -> (Duration, usize) {
        if self.hand.light.load(Ordering::Acquire) == 0 {
            return (Duration::ZERO, 0);
        }
        let mut ran = 0;
        let start = Instant::now();
        loop {
            // Light packets waiting together run as a lane set, as any others do; one set at
            // a time, so that light jobs placed meanwhile take their turns.
            let now = self.engine.now_ns();
            let set = self.hand.take_light_set(
                self.spec.lanes,
                &self.engine.layout.aes_impls,
                self.light_run,
                now,
            );
            if set.is_empty() {
                break;
            }
            ran += self.run_light_set(set, now, true, estimate, spare, local);
        }
        (start.elapsed(), ran)
    }

    /// At a pause of a light chain run from light queue `running`: runs the light jobs of one
    /// packet at the front of the other light queues, a set from each at most, in the
    /// queues' turn order ([`NodeHand::take_short_light_set`]). Returns how many packets it
    /// ran.
    fn run_short_light(
        &self,
        running: usize,
        estimate: &Estimator,
        spare: &mut Vec<bytes::BytesMut>,
        local: &mut LocalCounters,
    ) -> usize {
        let mut ran = 0;
        let first = self.hand.light_turn();
        for i in (0..LIGHT_QUEUES).map(|k| (first + k) % LIGHT_QUEUES) {
            if !self.hand.whole_light_waiting() {
                break;
            }
            if i == running {
                continue;
            }
            let now = self.engine.now_ns();
            let set = self.hand.take_short_light_set(
                i,
                self.spec.lanes,
                &self.engine.layout.aes_impls,
                now,
            );
            if !set.is_empty() {
                ran += self.run_light_set(set, now, false, estimate, spare, local);
            }
        }
        ran
    }

    /// Runs a light set taken at `now` and delivers it. With `pausing`, a chain run pauses
    /// between its packets for the light jobs of one packet waiting in other light queues
    /// ([`Self::run_short_light`]), which would otherwise wait for all of it. Returns how
    /// many packets it ran, those at its pauses included.
    fn run_light_set(
        &self,
        mut set: PacketSet,
        now: u64,
        pausing: bool,
        estimate: &Estimator,
        spare: &mut Vec<bytes::BytesMut>,
        local: &mut LocalCounters,
    ) -> usize {
        let metas: SmallVec<[PacketMeta; 1]> = set.iter().map(|p| p.meta).collect();
        let running_queue = NodeHand::light_queue_of(metas[0].tenant);
        let chain_run = is_chain_run(&set);
        let (base, started) = {
            let mut running = self.hand.running();
            let base = running.len();
            (
                base,
                self.publish_running(&mut set, &mut running, spare, local),
            )
        };
        let expected: f64 = metas.iter().map(|m| estimate.expected(m)).sum();
        // A set run at a light set's pause ends before it: the longer one's end stands.
        if pausing {
            self.hand.busy_until(now.saturating_add(expected as u64));
        }
        let extra = stall_limit(self.engine.layout.stall_timeout, expected);
        // Within a set the stall clock runs already and the light set adds to its limit;
        // between sets it starts one of its own.
        let outside = self.health.busy_since.load(Ordering::Acquire) == 0;
        if outside {
            self.health.busy_limit.store(extra, Ordering::Release);
            self.health.busy_since.store(now + 1, Ordering::Release);
        } else {
            self.health.busy_limit.fetch_add(extra, Ordering::AcqRel);
        }
        let began = Instant::now();
        let clock = self.core.clock();
        let mut states = States::new(&self.engine.store, &self.engine.layout.aes_impls);
        // Time spent at the pauses on other light sets (wall time, and the thread's work in
        // it), which is not this set's.
        let (mut aside, mut aside_work, mut ran) = (Duration::ZERO, Duration::ZERO, 0);
        let mut hook = || {
            // Most pauses find none: no lock and no clock then.
            if !self.hand.whole_light_waiting() {
                return;
            }
            let t = Instant::now();
            let light = self.core.clock();
            ran += self.run_short_light(running_queue, estimate, spare, local);
            aside += t.elapsed();
            aside_work += light.map_or(Duration::ZERO, |c| c.work());
        };
        let mut pause = Pause {
            slice: PAUSE_SLICE,
            hook: &mut hook,
        };
        // A lane set's lanes run side by side, one packet each, so it takes about one
        // packet's time: only a chain run, packets one after another, pauses.
        let pause = (pausing && chain_run).then_some(&mut pause);
        let results = catch_unwind(AssertUnwindSafe(|| run_set(&mut states, set, pause)))
            .unwrap_or_else(|_| {
                local.panics += 1;
                metas
                    .iter()
                    .map(|_| Err(JobError::WorkerPanicked(self.spec.node)))
                    .collect()
            });
        if outside {
            self.health.busy_since.store(0, Ordering::Release);
        }
        let extra = clock.map_or(Duration::ZERO, |c| {
            let work = c.work().saturating_sub(aside_work);
            (self.core).extra(work, Some(usual(expected, self.spec.slowdown)))
        });
        if !extra.is_zero() {
            emulate_slowdown(extra);
        }
        let busy = began.elapsed().saturating_sub(aside);
        let mine: Vec<Running> = {
            let mut running = self.hand.running();
            if running.len() != base + metas.len() {
                // The node failed while they ran: they run again elsewhere.
                return ran;
            }
            running.drain(base..).collect()
        };
        self.deliver(
            states,
            started,
            &metas,
            mine.into_iter(),
            results,
            (busy, true),
            local,
            spare,
            |_, _| {},
        );
        ran + metas.len()
    }
}

/// Per packet of a set: the stored state that started it, to release once it is delivered.
type Started = SmallVec<[Option<(TaskId, u32)>; 1]>;

/// A set's usual real time on a node slowed `slowdown` times: its expected time from the
/// node's estimates (`expected`, nanoseconds, slowed), unslowed.
fn usual(expected: f64, slowdown: f64) -> Duration {
    Duration::from_secs_f64((expected / slowdown.max(1.0) / 1e9).clamp(0.0, 1e6))
}

/// Measures the node's unit times: nanoseconds per packet of `unit_len` bytes (AES, a packet
/// alone on the implementation `impls` chose) or per operation (Ed25519), the fastest of a few
/// runs, times the slowdown factor.
fn calibrate(kind: ClusterKind, unit_len: usize, slowdown: f64, impls: &ImplTable) -> UnitTimes {
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
                    let _ = key.process_with(
                        impls.alone(op),
                        op,
                        &mut state,
                        &mut buf,
                        unit_len,
                        false,
                    );
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
