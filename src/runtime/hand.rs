//! A node's hand: the packets its worker took from the node queue and has not started, and
//! the set it is running. The worker fills and empties it; the engine fills it at the worker's
//! turn and, when the node fails, takes everything in it back (the running set's jobs fail or
//! retry, the unstarted packets go to other nodes). It also holds the node's light packets
//! (docs/ALGORITHM.md §15.7), which the engine puts there without the cluster's lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::crypto::ImplTable;
use crate::packet::{Packet, TaskId, TenantId};
use crate::runtime::exec::{PacketSet, lane_width, take_set};
use crate::runtime::work::{JobRecord, PacketData, Packets};

/// A packet running on a node.
pub(crate) struct Running {
    pub(crate) job: Arc<JobRecord>,
    pub(crate) part: usize,
    /// The packet as it was before it ran (a copy, or its input shared with a run out of
    /// place), to run again on another node if this one fails first; `None` on its last
    /// attempt (or for a packet that cannot run again).
    pub(crate) retry: Option<Packet<PacketData>>,
    /// A light packet (§15.7): counted apart from the packets the core placed.
    pub(crate) light: bool,
}

/// How many light queues a node has. A tenant's light packets go to one of them, by its id:
/// with tenants numbered from 0 up, up to this many tenants each have a queue of their own.
pub(crate) const LIGHT_QUEUES: usize = 16;

/// Some of a node's light packets, and whether it takes more.
#[derive(Default)]
struct LightQueue {
    /// In turns over the tenants (see [`NodeHand::push_light`]).
    packets: VecDeque<Packet<PacketData>>,
    /// Per packet of `packets`, its turn: 0 for a tenant's first packet waiting, one more
    /// than the tenant's last packet waiting for the next.
    turns: VecDeque<u32>,
    /// The node is down: its light packets went back to the core, and new ones go there.
    down: bool,
}

impl LightQueue {
    /// When the front packet is of a serial operation that runs on the lanes and other jobs
    /// of such operations wait too, the next packet of each, in queue order, up to the lane
    /// width, as one lane set. Several light jobs of a serial mode sent together (a client's
    /// burst) then run side by side, where `take_set` ran each whole job as a chain run after
    /// the one before it, so that the last waited for all the others.
    fn heads_as_lanes(&mut self, lanes: usize, impls: &ImplTable) -> Option<PacketSet> {
        let width = lane_width(self.packets.front()?, impls).min(lanes);
        if width < 2 {
            return None;
        }
        // Inline for a usual lane width: no allocation per set.
        let mut seen: SmallVec<[TaskId; 8]> = SmallVec::new();
        let mut picked: SmallVec<[usize; 8]> = SmallVec::new();
        for (i, p) in self.packets.iter().enumerate() {
            if picked.len() == width {
                break;
            }
            // Only a job's first packet waiting is its next.
            if seen.contains(&p.meta.task) {
                continue;
            }
            seen.push(p.meta.task);
            if lane_width(p, impls) > 1 {
                picked.push(i);
            }
        }
        if picked.len() < 2 {
            return None;
        }
        let mut set: PacketSet = picked
            .iter()
            .rev()
            .filter_map(|&i| {
                self.turns.remove(i);
                self.packets.remove(i)
            })
            .collect();
        set.reverse();
        Some(set)
    }
}

/// One node's hand, shared by its worker and the engine.
#[derive(Default)]
pub(crate) struct NodeHand {
    /// The packets running (one, or a lane set). Whoever takes them resolves the packets: the
    /// worker when it finishes, or the engine when the node fails first (the packets run
    /// again elsewhere or fail, and the worker's late results are discarded).
    running: Mutex<Vec<Running>>,
    /// Packets the worker took from its node queue and has not started.
    waiting: Mutex<VecDeque<Packet<PacketData>>>,
    /// Light packets placed on the node and not taken (docs/ALGORITHM.md §15.7), a queue per
    /// tenant (by its id, modulo [`LIGHT_QUEUES`]), each in turns over its tenants. A light
    /// job's submitter puts them in its tenant's queue without the cluster's lock, so that it
    /// never waits behind the busy tenants' admissions for it, nor behind their light jobs'
    /// submitters; the worker takes them a set at a time, between two sets, the slices of one
    /// or its deliveries, from the queues in turn.
    light_queues: [Mutex<LightQueue>; LIGHT_QUEUES],
    /// The light queue the worker looks at first for its next light set: the one after the
    /// queue of its last.
    light_next: AtomicUsize,
    /// How many packets the light queues hold, for the worker to read without their locks
    /// (changed under the lock of the queue that changed, so never fewer than they hold).
    pub(crate) light: AtomicUsize,
    /// How many of them are jobs of one packet, counted as `light` is: a light chain run's
    /// pause looks in the queues only when some wait (`take_short_light_set`).
    light_whole: AtomicUsize,
    /// How many packets each light queue holds, counted as `light` is: a tenant's own
    /// backlog on the node, read without the queue's lock (`light_queued`).
    light_queued: [AtomicUsize; LIGHT_QUEUES],
    /// When the light packets waiting last moved (the engine's clock, `Engine::now_ns`; 0
    /// while none wait): placed in an empty queue, or some taken and others left. A node whose
    /// light packets have not moved for long is not running: asleep with no wake-up reaching
    /// it, or off its core (`Engine::light_stalled`).
    light_since: AtomicU64,
    /// Until when (the engine's clock) the worker is expected to be busy with a set that takes
    /// no light packets before it ends (a light set, or a set that does not pause): light
    /// packets waiting meanwhile are not a stalled node's (`Engine::light_stalled`).
    busy_until: AtomicU64,
    /// Set, with the cluster's lock held, while the worker sleeps on its condition variable
    /// (and briefly before, while it looks once more for work): whoever places a packet on
    /// the node wakes it then, the core's placements under the lock, a light job's submitter
    /// by taking the lock.
    pub(crate) asleep: AtomicBool,
    /// Set while the worker of a slowed node waits out the emulated rest of a set's time
    /// ([`NodeSpec::slowdown`](crate::runtime::NodeSpec::slowdown)), parked: a light job's
    /// submitter unparks it then, so that the light packets run at once, as a slower core
    /// would run them at its set's next pause.
    emulating: AtomicBool,
    /// The node's worker thread, to unpark.
    worker: Mutex<Option<std::thread::Thread>>,
}

impl NodeHand {
    /// The running set.
    pub(crate) fn running(&self) -> MutexGuard<'_, Vec<Running>> {
        lock(&self.running)
    }

    /// Records the calling thread as the node's worker (a worker started again after a
    /// failure records itself anew).
    pub(crate) fn set_worker(&self) {
        *lock(&self.worker) = Some(std::thread::current());
    }

    /// Marks the worker as parked in an emulated wait (`true`), or back from it.
    pub(crate) fn set_emulating(&self, on: bool) {
        self.emulating.store(on, Ordering::SeqCst);
    }

    /// Unparks the worker if it waits out an emulated slowdown: called after light packets
    /// were put in its queue. The worker marks its wait and then looks at `light`; the
    /// submitter has stored `light` and then looks at the mark; both sequentially consistent,
    /// so one of the two sees the other.
    pub(crate) fn wake_emulating(&self) {
        if self.emulating.load(Ordering::SeqCst)
            && let Some(t) = lock(&self.worker).as_ref()
        {
            t.unpark();
        }
    }

    /// The packets taken and not started.
    pub(crate) fn waiting(&self) -> MutexGuard<'_, VecDeque<Packet<PacketData>>> {
        lock(&self.waiting)
    }

    /// The light queue of `tenant`'s packets.
    fn light_queue(&self, tenant: TenantId) -> MutexGuard<'_, LightQueue> {
        lock(&self.light_queues[Self::light_queue_of(tenant)])
    }

    /// Puts a light job's packets in its tenant's light queue, in turns over the tenants of
    /// that queue: a tenant with nothing waiting goes in the first turn, behind the packets
    /// of that turn already there and ahead of the later turns, and each further packet of a
    /// tenant in the turn after its last. A tenant's packets keep their order. With the
    /// queues taken in turn (`take_light_set`), a light job waits for at most one set of each
    /// other queue with light packets waiting (and the set running), however many its
    /// tenants send, and one packet of each other tenant of its own queue. Hands them back if
    /// the node is down.
    // The packets come back as they went, inline, as `Engine::admit` hands them back.
    #[allow(clippy::result_large_err)]
    pub(crate) fn push_light(&self, packets: Packets, now: u64) -> Result<(), Packets> {
        let Some(first) = packets.first() else {
            return Ok(());
        };
        let mut q = self.light_queue(first.meta.tenant);
        if q.down {
            return Err(packets);
        }
        // Counted under the queue's lock, before the worker can take them.
        if self.light.fetch_add(packets.len(), Ordering::SeqCst) == 0 {
            self.light_since.store(now.max(1), Ordering::Relaxed);
        }
        let whole_jobs = packets.iter().filter(|p| whole(p)).count();
        if whole_jobs > 0 {
            self.light_whole.fetch_add(whole_jobs, Ordering::SeqCst);
        }
        self.light_queued[Self::light_queue_of(first.meta.tenant)]
            .fetch_add(packets.len(), Ordering::Relaxed);
        // The tenant's turn after its last packet waiting: found by a scan for a job's first
        // packet, and after that the turn after the one just given (the lock is held for one
        // scan of the queue per job, not one per packet).
        let mut last: Option<(TenantId, u32)> = None;
        for p in packets {
            let tenant = p.meta.tenant;
            let turn = match last {
                Some((t, turn)) if t == tenant => turn + 1,
                _ => q
                    .packets
                    .iter()
                    .zip(&q.turns)
                    .filter(|(x, _)| x.meta.tenant == tenant)
                    .map(|(_, &t)| t + 1)
                    .max()
                    .unwrap_or(0),
            };
            last = Some((tenant, turn));
            let at = q.turns.partition_point(|&t| t <= turn);
            q.packets.insert(at, p);
            q.turns.insert(at, turn);
        }
        Ok(())
    }

    /// Takes the next set of light packets to run (as [`take_set`] takes one from a queue),
    /// from the first light queue with packets after the one the last set came from, so that
    /// the queues take turns, and packets placed meanwhile take their turns before the light
    /// packets after it. A queue whose lock a submitter holds is passed over. When no other
    /// queue has packets and some are counted (so they are in a queue held now), the worker
    /// does not sleep on that lock: it looks at every queue again, spinning and then yielding
    /// its core between looks ([`back_off`]), until it can take a set from any of them. A
    /// submitter the operating system deschedules while it holds its queue's lock therefore
    /// holds up only that queue's packets, not those of a job placed in another queue
    /// meanwhile, which a worker asleep on the lock left waiting as long.
    ///
    /// A chain run ends at `run_bytes` (a node queue's, as the core's runs end where the node
    /// queue does) or its first packet: a long light job runs a node queue at a time, and a
    /// light job of another tenant placed meanwhile waits for that much of it, not for all
    /// of it.
    pub(crate) fn take_light_set(
        &self,
        lanes: usize,
        impls: &ImplTable,
        run_bytes: u64,
        now: u64,
    ) -> PacketSet {
        let mut began = None;
        loop {
            let start = self.light_next.load(Ordering::Relaxed);
            let mut held = false;
            for i in (0..LIGHT_QUEUES).map(|k| (start + k) % LIGHT_QUEUES) {
                let mut q = match self.light_queues[i].try_lock() {
                    Ok(q) => q,
                    Err(TryLockError::Poisoned(e)) => e.into_inner(),
                    Err(TryLockError::WouldBlock) => {
                        held = true;
                        continue;
                    }
                };
                if !q.packets.is_empty() {
                    return self.take_from(i, &mut q, lanes, impls, run_bytes, now, true);
                }
            }
            // Packets are counted under their queue's lock, before they are placed: with
            // every queue the worker could look at empty, counted ones are in a held one.
            if !held || self.light.load(Ordering::SeqCst) == 0 {
                return PacketSet::new();
            }
            back_off(began.get_or_insert_with(Instant::now));
        }
    }

    /// At a pause of a light chain run (see `worker::Node::run_short_light`): from light
    /// queue `i`, the next set if its front packet is a job of one packet, that packet alone
    /// or a lane set with it (a packet of each lane), as `take_light_set` would take it;
    /// nothing if its front job is longer, or its lock is held. The turns over the queues do
    /// not move: a queue keeps its turn for the next light set. A light job of one packet then
    /// waits for one packet of another tenant's light chain run, not all of it
    /// (docs/ALGORITHM.md §15.7).
    pub(crate) fn take_short_light_set(
        &self,
        i: usize,
        lanes: usize,
        impls: &ImplTable,
        now: u64,
    ) -> PacketSet {
        let mut q = match self.light_queues[i].try_lock() {
            Ok(q) => q,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return PacketSet::new(),
        };
        if !q.packets.front().is_some_and(whole) {
            return PacketSet::new();
        }
        // A chain run of at most one byte is its first packet.
        self.take_from(i, &mut q, lanes, impls, 1, now, false)
    }

    /// How many light packets wait in `tenant`'s light queue (its own, and those of the
    /// tenants that share the queue with it).
    pub(crate) fn light_queued(&self, tenant: TenantId) -> usize {
        self.light_queued[Self::light_queue_of(tenant)].load(Ordering::Relaxed)
    }

    /// Whether light jobs of one packet wait (in some queue, perhaps behind others).
    pub(crate) fn whole_light_waiting(&self) -> bool {
        self.light_whole.load(Ordering::SeqCst) > 0
    }

    /// The light queue whose turn is next.
    pub(crate) fn light_turn(&self) -> usize {
        self.light_next.load(Ordering::Relaxed)
    }

    /// The light queue a set of `tenant`'s light packets came from.
    pub(crate) fn light_queue_of(tenant: TenantId) -> usize {
        tenant.0 as usize % LIGHT_QUEUES
    }

    /// `take_light_set` from light queue `i`, locked as `q` (nothing if it is empty); with
    /// `turn`, the queues' next turn is the one after `i`.
    #[allow(clippy::too_many_arguments)]
    fn take_from(
        &self,
        i: usize,
        q: &mut LightQueue,
        lanes: usize,
        impls: &ImplTable,
        run_bytes: u64,
        now: u64,
        turn: bool,
    ) -> PacketSet {
        if q.packets.is_empty() {
            return PacketSet::new();
        }
        let set = match q.heads_as_lanes(lanes, impls) {
            Some(set) => set,
            None => {
                let mut set = take_set(&mut q.packets, lanes, impls);
                let mut bytes = 0;
                let keep = set
                    .iter()
                    .position(|p| {
                        bytes += p.meta.len;
                        bytes > run_bytes
                    })
                    .map_or(set.len(), |k| k.max(1));
                // The rest goes back to the front, in order, with its turns still there.
                for p in set.drain(keep..).rev() {
                    q.packets.push_front(p);
                }
                q.turns.drain(..keep);
                set
            }
        };
        if turn {
            self.light_next
                .store((i + 1) % LIGHT_QUEUES, Ordering::Relaxed);
        }
        let whole_jobs = set.iter().filter(|p| whole(p)).count();
        if whole_jobs > 0 {
            self.light_whole.fetch_sub(whole_jobs, Ordering::SeqCst);
        }
        self.light_queued[i].fetch_sub(set.len(), Ordering::Relaxed);
        let left = self.light.fetch_sub(set.len(), Ordering::SeqCst) - set.len();
        let since = if left == 0 { 0 } else { now.max(1) };
        self.light_since.store(since, Ordering::Relaxed);
        set
    }

    /// Since when (the engine's clock) the light packets waiting have not moved, and the
    /// worker was not expected to be busy with a set that takes none; `None` if none wait.
    pub(crate) fn light_still_since(&self) -> Option<u64> {
        if self.light.load(Ordering::SeqCst) == 0 {
            return None;
        }
        match self.light_since.load(Ordering::Relaxed) {
            0 => None,
            since => Some(since.max(self.busy_until.load(Ordering::Relaxed))),
        }
    }

    /// The worker starts a set that takes no light packets before it ends, expected to end
    /// at `until` (the engine's clock).
    pub(crate) fn busy_until(&self, until: u64) {
        self.busy_until.store(until, Ordering::Relaxed);
    }

    /// The node went down: takes every light packet waiting, and refuses new ones until
    /// [`open_light`](Self::open_light).
    pub(crate) fn close_light(&self) -> VecDeque<Packet<PacketData>> {
        let mut all = VecDeque::new();
        for (queue, queued) in self.light_queues.iter().zip(&self.light_queued) {
            let mut q = lock(queue);
            queued.store(0, Ordering::Relaxed);
            q.down = true;
            q.turns.clear();
            self.light.fetch_sub(q.packets.len(), Ordering::SeqCst);
            let whole_jobs = q.packets.iter().filter(|p| whole(p)).count();
            self.light_whole.fetch_sub(whole_jobs, Ordering::SeqCst);
            all.append(&mut q.packets);
        }
        self.light_since.store(0, Ordering::Relaxed);
        all
    }

    /// The node is back: it takes light packets again.
    pub(crate) fn open_light(&self) {
        for queue in &self.light_queues {
            lock(queue).down = false;
        }
    }
}

/// Whether a packet is a whole job: the first and the last of its job.
fn whole(p: &Packet<PacketData>) -> bool {
    p.meta.seq == 0 && p.meta.last
}

/// How long a worker that finds a lock held, or its queues empty, spins before it yields its
/// core between tries (with empty queues, before it sleeps). A sleep and wake-up costs about
/// 10 µs on a virtual machine, more than most packets; yielding keeps the spin from starving
/// other threads on the core.
pub(crate) const SPIN: Duration = Duration::from_micros(50);

/// How long a node's worker, its queues empty, looks for work before it sleeps: [`SPIN`], or
/// longer by the credit its work has earned, a microsecond of looking for each of work, up to
/// a most (`ServiceBuilder::idle_poll`). Looking costs the node at most as much of its core
/// as its work did, and after a long idle time no more than [`SPIN`] (docs/ALGORITHM.md
/// §15.7, "A node that looks before it sleeps").
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdlePoll {
    credit: Duration,
    most: Duration,
}

impl IdlePoll {
    /// No credit yet, and at most `most` of it.
    pub(crate) fn new(most: Duration) -> Self {
        IdlePoll {
            credit: Duration::ZERO,
            most,
        }
    }

    /// The worker worked for `d`: as much again of looking, up to the most.
    pub(crate) fn worked(&mut self, d: Duration) {
        self.credit = (self.credit + d).min(self.most);
    }

    /// How long the worker looks before it sleeps, this time.
    pub(crate) fn limit(&self) -> Duration {
        SPIN.max(self.credit)
    }

    /// The worker looked for `d`.
    pub(crate) fn looked(&mut self, d: Duration) {
        self.credit = self.credit.saturating_sub(d);
    }
}

/// One pause of a worker that tries a lock again rather than sleep on it, having begun at
/// `began`: a spin while [`SPIN`] has not passed, a yield of its core after (the holder may be
/// waiting for that core: a node that shares its core with clients gives it up).
pub(crate) fn back_off(began: &Instant) {
    if began.elapsed() > SPIN {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// A lock, whether or not a thread panicked while it held it (what it guards stays whole:
/// each change to it is made under one lock and cannot panic halfway).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for NodeHand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHand").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{AesOp, Direction};
    use crate::packet::{Mode, TenantId};
    use crate::runtime::exec::tests::{lanes, packets};

    /// The sets a node's light queue gives, by task, for the jobs pushed in that order.
    fn light_sets(jobs: Vec<Vec<Packet<PacketData>>>, impls: &ImplTable) -> Vec<Vec<u64>> {
        let hand = NodeHand::default();
        for job in jobs {
            assert!(hand.push_light(job.into_iter().collect(), 1).is_ok());
        }
        std::iter::from_fn(|| {
            let set = hand.take_light_set(64, impls, u64::MAX, 2);
            (!set.is_empty()).then(|| set.iter().map(|p| p.meta.task.0).collect())
        })
        .collect()
    }

    #[test]
    fn a_worker_looks_for_work_as_long_as_it_has_worked_up_to_the_most() {
        let ms = Duration::from_millis;
        let mut poll = IdlePoll::new(ms(10));
        // Nothing earned: the usual spin.
        assert_eq!(poll.limit(), SPIN);
        poll.worked(ms(3));
        assert_eq!(poll.limit(), ms(3));
        poll.looked(ms(2));
        assert_eq!(poll.limit(), ms(1));
        // Spent: the usual spin again, never less.
        poll.looked(ms(5));
        assert_eq!(poll.limit(), SPIN);
        // A long stretch of work earns no more than the most.
        poll.worked(ms(60));
        assert_eq!(poll.limit(), ms(10));
        poll.looked(ms(4));
        poll.worked(ms(1));
        assert_eq!(poll.limit(), ms(7));
        // Off: work earns nothing beyond the usual spin.
        let mut off = IdlePoll::new(Duration::ZERO);
        off.worked(ms(60));
        assert_eq!(off.limit(), SPIN);
    }

    #[test]
    fn serial_light_jobs_waiting_together_run_side_by_side() {
        let key = Arc::new(crate::crypto::AesKey::new(&[7; 16]).unwrap());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let ecb = AesOp::new(Direction::Encrypt, Mode::Ecb);
        let data = [0u8; 96];
        // A CBC job of three packets, an ECB job of one, a CBC job of two.
        let jobs = || {
            vec![
                packets(1, &key, cbc, &[1; 16], &data),
                packets(3, &key, ecb, &[], &data[..32]),
                packets(2, &key, cbc, &[2; 16], &data[..64]),
            ]
        };
        // On the lanes: the next packet of each CBC job per set, the ECB packet once the job
        // ahead of it is done.
        assert_eq!(
            light_sets(jobs(), &lanes(8)),
            [vec![1, 2], vec![1, 2], vec![1], vec![3]]
        );
        // Where the lanes did not win, each job runs whole, in queue order.
        let one_by_one = ImplTable::rustcrypto();
        assert_eq!(
            light_sets(jobs(), &one_by_one),
            [vec![1, 1, 1], vec![3], vec![2, 2]]
        );
    }

    /// A CBC encryption job `task` of `tenant`, `len` bytes in packets of 32.
    fn tenant_job(task: u64, tenant: u32, len: usize) -> Packets {
        let key = Arc::new(crate::crypto::AesKey::new(&[7; 16]).unwrap());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let mut job = packets(task, &key, cbc, &[1; 16], &vec![0; len]);
        for p in &mut job {
            p.meta.tenant = TenantId(tenant);
        }
        job.into_iter().collect()
    }

    #[test]
    fn each_light_queue_counts_its_packets_as_they_come_and_go() {
        let impls = ImplTable::rustcrypto();
        let hand = NodeHand::default();
        let queued = |t| hand.light_queued(TenantId(t));
        // Tenant 1's job of three packets and one of one; tenant 2's of one; tenant 17 shares
        // tenant 1's queue.
        assert!(hand.push_light(tenant_job(1, 1, 96), 1).is_ok());
        assert!(hand.push_light(tenant_job(2, 1, 32), 1).is_ok());
        assert!(hand.push_light(tenant_job(3, 2, 32), 1).is_ok());
        assert_eq!((queued(1), queued(2), queued(3)), (4, 1, 0));
        assert!(hand.push_light(tenant_job(4, 17, 32), 1).is_ok());
        assert_eq!((queued(1), queued(17)), (5, 5));
        // Taken at a pause, by a turn, a packet at a time: each queue counts what it gave.
        assert_eq!(
            hand.take_short_light_set(NodeHand::light_queue_of(TenantId(2)), 64, &impls, 2)
                .len(),
            1
        );
        assert_eq!((queued(1), queued(2)), (5, 0));
        let set = hand.take_light_set(64, &impls, 1, 2);
        assert_eq!(set.len(), 1);
        assert_eq!(queued(1), 4);
        // Back from a node gone down, none is counted.
        assert_eq!(hand.close_light().len(), 4);
        assert_eq!((queued(1), queued(17)), (0, 0));
        assert_eq!(hand.light.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_pause_takes_a_job_of_one_packet_from_the_front_of_a_queue_and_keeps_the_turns() {
        let impls = ImplTable::rustcrypto();
        let hand = NodeHand::default();
        // Tenant 1's job of three packets at its queue's front; tenant 2's job of one.
        assert!(hand.push_light(tenant_job(1, 1, 96), 1).is_ok());
        assert!(hand.push_light(tenant_job(2, 2, 32), 1).is_ok());
        let queue = |t| NodeHand::light_queue_of(TenantId(t));
        let turn = hand.light_turn();
        assert!(hand.whole_light_waiting());
        // Tenant 1's front job is longer than a packet: nothing from its queue.
        assert!(
            hand.take_short_light_set(queue(1), 64, &impls, 2)
                .is_empty()
        );
        let set = hand.take_short_light_set(queue(2), 64, &impls, 2);
        assert_eq!(
            set.iter()
                .map(|p| (p.meta.task.0, p.meta.seq))
                .collect::<Vec<_>>(),
            [(2, 0)]
        );
        assert!(
            hand.take_short_light_set(queue(2), 64, &impls, 2)
                .is_empty()
        );
        // The turns did not move, and the counts follow what was taken: no job of one
        // packet waits now, so a pause looks at no queue.
        assert_eq!(hand.light_turn(), turn);
        assert_eq!(hand.light.load(Ordering::SeqCst), 3);
        assert!(!hand.whole_light_waiting());
        {
            // A queue whose lock a submitter holds is passed over.
            assert!(hand.push_light(tenant_job(3, 2, 32), 1).is_ok());
            let _held = hand.light_queue(TenantId(2));
            assert!(
                hand.take_short_light_set(queue(2), 64, &impls, 2)
                    .is_empty()
            );
        }
        assert_eq!(hand.take_short_light_set(queue(2), 64, &impls, 2).len(), 1);
        assert!(!hand.whole_light_waiting());
        // Taken by a turn, or back from a node gone down, a job of one packet is counted out.
        assert!(hand.push_light(tenant_job(4, 2, 32), 1).is_ok());
        assert!(hand.push_light(tenant_job(5, 3, 32), 1).is_ok());
        assert!(hand.whole_light_waiting());
        let mut taken = 0;
        while !hand.take_light_set(64, &impls, 64, 2).is_empty() {
            taken += 1;
        }
        assert!(taken >= 2);
        assert!(!hand.whole_light_waiting());
        assert!(hand.push_light(tenant_job(6, 2, 32), 1).is_ok());
        assert_eq!(hand.close_light().len(), 1);
        assert!(!hand.whole_light_waiting());
    }

    #[test]
    fn light_packets_wait_in_turns_over_the_tenants() {
        let impls = ImplTable::rustcrypto();
        let hand = NodeHand::default();
        // Tenant 1's job of three packets, tenant 7's of two, tenant 1's of two.
        for (task, tenant, len) in [(1, 1, 96), (2, 7, 64), (3, 1, 64)] {
            assert!(hand.push_light(tenant_job(task, tenant, len), 1).is_ok());
        }
        // A packet a set: turn by turn, one packet of each tenant with packets in that turn,
        // and a tenant's later job in the turns after its earlier one's.
        let order: Vec<(u64, u32)> = std::iter::from_fn(|| {
            let set = hand.take_light_set(64, &impls, 1, 2);
            (!set.is_empty()).then(|| {
                assert_eq!(set.len(), 1);
                (set[0].meta.task.0, set[0].meta.seq)
            })
        })
        .collect();
        assert_eq!(
            order,
            [(1, 0), (2, 0), (1, 1), (2, 1), (1, 2), (3, 0), (3, 1)]
        );
    }

    #[test]
    fn a_light_queue_whose_lock_a_submitter_holds_does_not_hold_up_the_others() {
        let impls = ImplTable::rustcrypto();
        let hand = NodeHand::default();
        let job = |task: u64, tenant: u32| tenant_job(task, tenant, 32);
        assert!(hand.push_light(job(1, 1), 1).is_ok());
        assert!(hand.push_light(job(2, 2), 1).is_ok());
        let task = |set: PacketSet| set.iter().map(|p| p.meta.task.0).collect::<Vec<_>>();
        {
            // Tenant 1's submitter holds its queue's lock (descheduled, say): the worker takes
            // tenant 2's packet without waiting for it.
            let _held = hand.light_queue(TenantId(1));
            assert_eq!(task(hand.take_light_set(64, &impls, 64, 2)), [2]);
        }
        assert_eq!(task(hand.take_light_set(64, &impls, 64, 2)), [1]);
        assert!(hand.take_light_set(64, &impls, 64, 2).is_empty());
        assert_eq!(hand.light.load(Ordering::SeqCst), 0);
        // Tenants 3 and 3 + LIGHT_QUEUES share a queue, and take turns in it.
        let far = 3 + LIGHT_QUEUES as u32;
        for (task, tenant) in [(3, 3), (4, 3), (5, far), (6, 2)] {
            assert!(hand.push_light(job(task, tenant), 1).is_ok());
        }
        let order: Vec<u64> = std::iter::from_fn(|| {
            let set = hand.take_light_set(1, &impls, 64, 2);
            (!set.is_empty()).then(|| task(set)[0])
        })
        .collect();
        // From the queue after tenant 1's: tenant 2's, then tenant 3's queue, whose first
        // turn has a job of each of its tenants, then its second turn.
        assert_eq!(order, [6, 3, 5, 4]);
        // A node that goes down takes back the packets of every queue, and refuses more
        // until it is back.
        assert!(hand.push_light(job(7, 1), 1).is_ok());
        assert!(hand.push_light(job(8, 9), 1).is_ok());
        let mut back: Vec<u64> = hand.close_light().iter().map(|p| p.meta.task.0).collect();
        back.sort_unstable();
        assert_eq!(back, [7, 8]);
        assert_eq!(hand.light.load(Ordering::SeqCst), 0);
        assert!(hand.push_light(job(9, 5), 1).is_err());
        hand.open_light();
        assert!(hand.push_light(job(9, 5), 1).is_ok());
        assert_eq!(task(hand.take_light_set(64, &impls, 64, 2)), [9]);
    }

    #[test]
    fn a_worker_does_not_sleep_on_a_held_light_queue_while_another_gets_packets() {
        let impls = ImplTable::rustcrypto();
        let hand = NodeHand::default();
        let task = |set: PacketSet| set.iter().map(|p| p.meta.task.0).collect::<Vec<_>>();
        {
            // A held queue with nothing counted holds nothing up: the worker finds no work.
            let _held = hand.light_queue(TenantId(1));
            assert!(hand.take_light_set(64, &impls, 64, 2).is_empty());
        }
        assert!(hand.push_light(tenant_job(1, 1, 32), 1).is_ok());
        std::thread::scope(|s| {
            // Tenant 1's packet is counted, and its queue's lock held (its submitter
            // descheduled, say); no other queue has packets when the worker looks.
            let held = hand.light_queue(TenantId(1));
            let worker = s.spawn(|| task(hand.take_light_set(64, &impls, 64, 2)));
            std::thread::sleep(Duration::from_millis(20));
            // A job placed in another queue meanwhile is taken while the lock is still held.
            assert!(hand.push_light(tenant_job(2, 2, 32), 1).is_ok());
            let patience = Instant::now() + Duration::from_secs(10);
            while !worker.is_finished() && Instant::now() < patience {
                std::thread::sleep(Duration::from_millis(1));
            }
            let taken_while_held = worker.is_finished();
            drop(held);
            assert_eq!(worker.join().expect("worker"), [2]);
            assert!(taken_while_held, "the worker waited for the held queue");
        });
        assert_eq!(task(hand.take_light_set(64, &impls, 64, 2)), [1]);
        assert_eq!(hand.light.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_long_light_chain_runs_a_node_queue_at_a_time_and_others_take_their_turns_between() {
        let key = Arc::new(crate::crypto::AesKey::new(&[7; 16]).unwrap());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let impls = ImplTable::rustcrypto();
        let hand = NodeHand::default();
        // One tenant's CBC job of six 32-byte packets; node queues of 64 bytes.
        let long = packets(1, &key, cbc, &[1; 16], &[0; 192]);
        assert!(hand.push_light(long.into_iter().collect(), 1).is_ok());
        let tasks = |set: &PacketSet| set.iter().map(|p| p.meta.task.0).collect::<Vec<_>>();
        assert_eq!(tasks(&hand.take_light_set(64, &impls, 64, 2)), [1, 1]);
        // Another tenant's job of one packet, placed while the first two run, goes next.
        let mut short = packets(2, &key, cbc, &[2; 16], &[0; 32]);
        short[0].meta.tenant = TenantId(7);
        assert!(hand.push_light(short.into_iter().collect(), 1).is_ok());
        let mut sets = Vec::new();
        loop {
            let set = hand.take_light_set(64, &impls, 64, 2);
            if set.is_empty() {
                break;
            }
            // The long job's packets keep their order.
            sets.push((
                tasks(&set),
                set.iter().map(|p| p.meta.seq).collect::<Vec<_>>(),
            ));
        }
        assert_eq!(
            sets,
            [
                (vec![2], vec![0]),
                (vec![1, 1], vec![2, 3]),
                (vec![1, 1], vec![4, 5]),
            ]
        );
        // A node queue shorter than a packet still runs one packet a set.
        let hand = NodeHand::default();
        let long = packets(3, &key, cbc, &[1; 16], &[0; 96]);
        assert!(hand.push_light(long.into_iter().collect(), 1).is_ok());
        assert_eq!(tasks(&hand.take_light_set(64, &impls, 16, 2)), [3]);
    }

    #[test]
    fn the_light_packets_clock_runs_from_their_placing_or_their_last_move() {
        let key = Arc::new(crate::crypto::AesKey::new(&[7; 16]).unwrap());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let impls = ImplTable::rustcrypto();
        let hand = NodeHand::default();
        assert_eq!(hand.light_still_since(), None);
        // Placed in an empty queue at 10; more placed at 20 do not restart the clock.
        let long = packets(1, &key, cbc, &[1; 16], &[0; 96]);
        assert!(hand.push_light(long.into_iter().collect(), 10).is_ok());
        let more = packets(2, &key, cbc, &[2; 16], &[0; 32]);
        assert!(hand.push_light(more.into_iter().collect(), 20).is_ok());
        assert_eq!(hand.light_still_since(), Some(10));
        // A set taken at 30 with packets left: they moved then.
        assert_eq!(hand.take_light_set(64, &impls, 32, 30).len(), 1);
        assert_eq!(hand.light_still_since(), Some(30));
        // Taken to the last, or closed: nothing waits.
        while !hand.take_light_set(64, &impls, 32, 40).is_empty() {}
        assert_eq!(hand.light_still_since(), None);
        let again = packets(3, &key, cbc, &[3; 16], &[0; 32]);
        assert!(hand.push_light(again.into_iter().collect(), 50).is_ok());
        assert_eq!(hand.light_still_since(), Some(50));
        // A set expected to run until 80 without taking light packets: they wait from then.
        hand.busy_until(80);
        assert_eq!(hand.light_still_since(), Some(80));
        assert_eq!(hand.close_light().len(), 1);
        assert_eq!(hand.light_still_since(), None);
    }
}
