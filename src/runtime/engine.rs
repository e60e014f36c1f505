//! The engine: the state every thread of a service shares, and per cluster (a shard) the
//! scheduler core plus the queues around it, behind that cluster's own lock.
//!
//! # Design note
//!
//! The scheduler core decides every placement; the engine feeds it and carries out what it
//! decides. Each cluster has a shard of its own, and under the shard's one mutex it holds:
//! - the cluster's **job receive queue** (docs/ALGORITHM.md §3 part 1): packets of admitted
//!   jobs that the core has not yet accepted (its cluster queue and the wait queue were full);
//! - the cluster's **core** ([`Scheduler`], built with that one cluster: inside it, the cluster
//!   is `ClusterId(0)` and its nodes are numbered from 0) with its cluster queue, wait queue,
//!   status table and choose list;
//! - the **node queues** of the cluster's nodes: the packets the core placed on each node and the
//!   node has not yet taken, in the order placed.
//!
//! No lock is shared between clusters: an Ed25519 signer never waits for an AES worker. The
//! paper's wait queue is shared by all clusters; here each cluster has a wait queue of the
//! configured length (docs/ALGORITHM.md §15.5).
//!
//! A submitter admits a job's packets into its cluster's receive queue (blocking while it is
//! full, so backpressure reaches the application), offers them to the core, and moves every
//! placement to its node queue, waking the node if it sleeps. A worker, under its cluster's
//! lock, reports the packet it finished (the core frees the room and may place more), and takes
//! its next packets. The lock is held for bookkeeping only: cryptography, result delivery and
//! the state store are outside it, and so is everything user-supplied: wakers, and the job
//! resolutions that may run them, wait in an [`AfterUnlock`] until the lock is released. After
//! each turn the holder publishes the queue depths and
//! unit times to atomic gauges, which is all [`Engine::metrics`] reads: a metrics scrape takes
//! no lock a submitter or worker waits on.
//!
//! A worker reports a packet complete only after its result is delivered and its chaining
//! state is in the store, so whatever the core places next finds the state it needs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, TryLockError};
use std::task::Waker;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::packet::{ClusterId, Cmd, NodeId, Packet, TaskId, TenantId, UnitTimes};
use crate::runtime::backlog::Backlog;
use crate::runtime::error::{JobError, TenantError};
use crate::runtime::hand::{IdlePoll, NodeHand, back_off};
use crate::runtime::health::NodeHealth;
use crate::runtime::ids::{ClusterKind, TaskIds};
use crate::runtime::keys::KeyStore;
use crate::runtime::layout::Layout;
use crate::runtime::metrics::{
    ClusterGauges, ClusterMetrics, Metrics, NodeCounters, NodeGauges, NodeMetrics, NodeState, Pace,
    ServiceCounters,
};
use crate::runtime::store::StateStore;
use crate::runtime::tenant::{LONGEST_LIGHT, TenantSpec, TenantState, Tenants};
use crate::runtime::work::{JobRecord, PacketData, Packets};
use crate::sched::{Admission, Scheduler};

/// The cluster, as its own core numbers it (a shard's core holds that one cluster).
const LOCAL: ClusterId = ClusterId(0);

/// How long after the last light job the nodes go on pausing within their sets (§15.7): a
/// tenant sending at least a hundred light jobs a second keeps them pausing.
const LIGHT_RECENT_NS: u64 = 10_000_000;

/// How long a node's light packets may wait without one being taken before the node counts
/// as stalled (§15.7, [`Engine::light_stalled`]): a running worker takes them within a pause
/// slice or a wake-up, tens of microseconds on a virtual machine; one whose thread does not
/// run (asleep with no wake-up reaching it, or off its core for another thread) leaves them
/// for milliseconds.
const LIGHT_STALL_NS: u64 = 100_000;

/// The engine: everything the service's threads share.
#[derive(Debug)]
pub(crate) struct Engine {
    /// One per cluster, in the service's cluster order.
    shards: Box<[CachePadded<Shard>]>,
    /// One per node: the worker sleeps here (with its cluster's lock) when its queue is empty.
    node_cv: Box<[CachePadded<Condvar>]>,
    /// One per node: packets waiting in its queue, for the worker to watch while it spins.
    queued: Box<[CachePadded<AtomicUsize>]>,
    /// One per node: what the core knows of it, for metrics.
    node_gauges: Box<[CachePadded<NodeGauges>]>,
    /// One per cluster: whether every node of it is down, stored by its lock holder where a
    /// node goes down or comes back, and read without a lock by submitters (a line of its own:
    /// nothing else writes it).
    cluster_down: Box<[CachePadded<AtomicBool>]>,
    /// Set once every cluster has stopped (the supervisor leaves).
    stopping: AtomicBool,
    /// Set when `shutdown` begins (each cluster also holds the flag under its lock).
    closing: AtomicBool,
    pub(crate) layout: Layout,
    pub(crate) keys: KeyStore,
    pub(crate) store: StateStore,
    pub(crate) tenants: Tenants,
    /// When a job last took the light path ([`now_ns`](Self::now_ns), 0: never): the workers
    /// pause within their sets only while light jobs come (§15.7).
    last_light: AtomicU64,
    pub(crate) counters: ServiceCounters,
    pub(crate) node_counters: Box<[NodeCounters]>,
    /// Per node: what the supervisor watches (see `supervisor.rs`).
    pub(crate) health: Box<[NodeHealth]>,
    /// Per node: what its worker has taken and is running.
    pub(crate) hands: Box<[NodeHand]>,
    /// Where `NodeHealth::busy_since` counts from.
    epoch: Instant,
    /// The supervisor thread, unparked when the service stops.
    pub(crate) supervisor: OnceLock<Thread>,
    next_task: AtomicU64,
    /// This service's number among the process's services (see `context.rs`).
    serial: u64,
}

/// Services built so far in the process, to number them (from 1; see `context.rs`).
static SERVICES: AtomicU64 = AtomicU64::new(1);

/// One cluster's part of the engine.
#[derive(Debug)]
struct Shard {
    engine: Mutex<ClusterState>,
    /// Submitters sleep here while the cluster is full.
    room_cv: Condvar,
    /// `shutdown` sleeps here until nothing of the cluster is left in the system.
    idle_cv: Condvar,
    /// The service's index of the cluster's first node (the core numbers them from 0).
    first: usize,
    /// How many nodes the cluster has.
    nodes: usize,
    /// Whether the cluster admits under fair admission (fixed when it is built).
    fair: bool,
    /// Light packets (§15.7) placed on the cluster's nodes and not yet delivered: counted
    /// apart from `in_system`, without the lock, since their submitters do not take it.
    light_in_system: AtomicU64,
    gauges: ClusterGauges,
}

impl Shard {
    /// Whether nothing of the cluster is left in the system, the core's packets (`e`, its
    /// state under the lock) and the light ones alike.
    fn drained(&self, e: &ClusterState) -> bool {
        e.in_system == 0 && self.light_in_system.load(Ordering::SeqCst) == 0
    }
}

/// One cluster's engine, under its shard's lock.
#[derive(Debug)]
pub(crate) struct ClusterState {
    sched: Scheduler<PacketData>,
    receive: VecDeque<Packet<PacketData>>,
    /// Per node of the cluster, by the core's numbering.
    node_work: Vec<VecDeque<Packet<PacketData>>>,
    /// Packets of the cluster admitted and not yet reported complete.
    in_system: u64,
    /// Futures of `submit_async` waiting for room; woken (outside the lock) with `room_cv`.
    room_wakers: Vec<Waker>,
    /// Those of them with a large job (`backlog.rs`), woken only when a large slot is free.
    large_wakers: Vec<Waker>,
    /// Submitters blocked on `room_cv` and not yet woken by `offer` (one woken by another hand
    /// counts until it is back at the lock): `offer` signals only while there is one, so that
    /// no completion makes a system call for nobody.
    blocked_submitters: usize,
    /// Of those, the ones with a large job (`backlog.rs`).
    blocked_large: usize,
    /// How many times `offer` has woken the blocked submitters: one that wakes to find it
    /// unchanged was woken by another hand (a failure, the shutdown) or by none, and no
    /// longer counts among them.
    room_round: u64,
    /// Under fair admission: what waits for a node, per job.
    backlog: Backlog,
    /// No new jobs: `shutdown` has begun.
    closing: bool,
    /// Workers leave once their queue is empty.
    stopping: bool,
}

impl ClusterState {
    /// Packets admitted and not yet placed on a node, which the receive bound limits: under
    /// first come first served those the core has not accepted yet (its cluster and wait
    /// queues are bounded on their own); under fair admission, where the core accepts every
    /// packet into its job's own queue, those waiting there too.
    fn pending(&self) -> usize {
        match self.sched.admission() {
            Admission::Fifo => self.receive.len(),
            Admission::Fair => self.backlog.packets() as usize,
        }
    }

    /// Records `packets` more packets of `task` waiting for a node (fair admission only: the
    /// first come first served bound reads the receive queue instead).
    fn backlog_add(&mut self, task: TaskId, tenant: TenantId, packets: u64, bytes: u64) {
        if self.sched.admission() == Admission::Fair {
            self.backlog.add(task, tenant, packets, bytes);
        }
    }

    /// Records that a packet of `task` left for a node (or failed) (fair admission only).
    fn backlog_remove(&mut self, task: TaskId, bytes: u64) {
        if self.sched.admission() == Admission::Fair {
            self.backlog.remove(task, bytes);
        }
    }

    /// Whether the cluster takes `packets` of a new job now: under first come first served,
    /// while its receive queue (the packets the core has not accepted) is within `bound`, or
    /// empty; under fair admission, by the backlog's shares (see `backlog`).
    fn has_room(&self, packets: &Packets, bound: usize) -> bool {
        match self.sched.admission() {
            Admission::Fifo => {
                let queued = self.receive.len();
                queued == 0 || queued + packets.len() <= bound
            }
            Admission::Fair => {
                let bytes = job_bytes(packets);
                let tenant = packets.first().map_or(TenantId::DEFAULT, |p| p.meta.tenant);
                let weight = |t| self.sched.tenant_weight(LOCAL, t);
                self.backlog
                    .admits(tenant, packets.len() as u64, bytes, weight)
            }
        }
    }

    /// Every `submit_async` future waiting for room, large jobs' included, to wake.
    fn all_room_wakers(&mut self) -> Vec<Waker> {
        let mut wakers = std::mem::take(&mut self.room_wakers);
        wakers.append(&mut self.large_wakers);
        wakers
    }

    /// Whether `packets`, a new job's, make a large job of the backlog (fair admission only).
    fn is_large(&self, packets: &Packets) -> bool {
        self.sched.admission() == Admission::Fair
            && self
                .backlog
                .is_large(packets.len() as u64, job_bytes(packets))
    }

    /// Takes a job's packets in: counted, and into the receive queue, numbered for the core.
    fn take_in(&mut self, mut packets: Packets) {
        self.in_system += packets.len() as u64;
        if let Some(first) = packets.first() {
            let bytes = job_bytes(&packets);
            let (task, tenant) = (first.meta.task, first.meta.tenant);
            self.backlog_add(task, tenant, packets.len() as u64, bytes);
        }
        for p in &mut packets {
            p.meta.cluster = LOCAL;
        }
        self.receive.extend(packets);
    }
}

/// Waits on `room_cv` until the cluster may have room for `packets`, counted among the
/// blocked submitters, and among those with a large job, whom only a free large slot lets in.
fn wait_for_room<'a>(
    shard: &'a Shard,
    mut e: MutexGuard<'a, ClusterState>,
    packets: &Packets,
) -> MutexGuard<'a, ClusterState> {
    let large = usize::from(e.is_large(packets));
    let round = e.room_round;
    e.blocked_submitters += 1;
    e.blocked_large += large;
    e = shard.room_cv.wait(e).unwrap_or_else(|p| p.into_inner());
    if e.room_round == round {
        // Not counted out by `offer`'s wake: out now (it counts itself in again if it waits).
        e.blocked_submitters -= 1;
        e.blocked_large -= large;
    }
    e
}

/// What an admission does when the receive queue is full.
#[derive(Clone, Copy)]
pub(crate) enum Wait<'a> {
    /// Blocks until there is room (`submit`).
    Block,
    /// Hands the packets back (`try_submit`).
    No,
    /// Hands the packets back and wakes this waker when room frees (`submit_async`).
    Wake(&'a Waker),
}

/// What must happen once a cluster's lock is released, since it runs user code (a
/// `submit_async` future's waker; a job's waker, which resolving a packet may run): nothing
/// user-supplied runs under the lock.
#[derive(Default)]
#[must_use = "wakers and resolutions wait for the lock to be released"]
struct AfterUnlock {
    wakers: Vec<Waker>,
    /// Packets that failed under the lock, to resolve with their errors.
    failed: Vec<(Arc<JobRecord>, usize, JobError)>,
}

impl AfterUnlock {
    fn extend(&mut self, other: AfterUnlock) {
        self.wakers.extend(other.wakers);
        self.failed.extend(other.failed);
    }

    /// Wakes the wakers and resolves the failed packets; called with no lock held. A failed
    /// packet may have been its chain's last, so nothing else would take the job's chaining
    /// state out of the store: it goes first, so whoever the job wakes finds the store clean.
    fn run(self, engine: &Engine) {
        for w in self.wakers {
            w.wake();
        }
        for (job, part, err) in self.failed {
            engine.store.remove(job.task);
            // A job's waker is user code: a panic there must not take the caller down.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                job.part_done(part, 0, Err(err), &engine.counters)
            }));
        }
    }
}

/// Why admission failed; `Full` hands back what was not admitted (packets here, a whole job
/// at the service).
pub(crate) enum Refused<T> {
    /// The cluster has no room now.
    Full(T),
    /// The service is shutting down.
    ShutDown,
    /// Every node of the cluster is down.
    NoNodeUp(ClusterKind),
}

impl Engine {
    /// The shared state of a service whose cluster `c` is run by `scheds[c]` (a core built
    /// with that one cluster).
    pub(crate) fn new(scheds: Vec<Scheduler<PacketData>>, layout: Layout) -> Self {
        let mut first = 0;
        let shards: Box<[CachePadded<Shard>]> = scheds
            .into_iter()
            .map(|sched| {
                let nodes = sched.num_nodes();
                let fair = sched.admission() == Admission::Fair;
                let shard = Shard {
                    engine: Mutex::new(ClusterState {
                        sched,
                        receive: VecDeque::new(),
                        node_work: (0..nodes).map(|_| VecDeque::new()).collect(),
                        in_system: 0,
                        room_wakers: Vec::new(),
                        large_wakers: Vec::new(),
                        blocked_submitters: 0,
                        blocked_large: 0,
                        room_round: 0,
                        backlog: Backlog::new(
                            layout.receive_queue_len as u64,
                            layout.receive_queue_bytes,
                            nodes,
                        ),
                        closing: false,
                        stopping: false,
                    }),
                    room_cv: Condvar::new(),
                    idle_cv: Condvar::new(),
                    first,
                    nodes,
                    fair,
                    light_in_system: AtomicU64::new(0),
                    gauges: ClusterGauges::default(),
                };
                first += nodes;
                CachePadded::new(shard)
            })
            .collect();
        let nodes = first;
        debug_assert_eq!(nodes, layout.nodes.len());
        Engine {
            shards,
            node_cv: (0..nodes)
                .map(|_| CachePadded::new(Condvar::new()))
                .collect(),
            queued: (0..nodes)
                .map(|_| CachePadded::new(AtomicUsize::new(0)))
                .collect(),
            node_gauges: (0..nodes)
                .map(|_| CachePadded::new(NodeGauges::default()))
                .collect(),
            cluster_down: (0..layout.clusters.len())
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            stopping: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            layout,
            keys: KeyStore::default(),
            store: StateStore::default(),
            tenants: Tenants::new(),
            last_light: AtomicU64::new(0),
            counters: ServiceCounters::default(),
            node_counters: (0..nodes).map(|_| NodeCounters::default()).collect(),
            health: (0..nodes).map(|_| NodeHealth::default()).collect(),
            hands: (0..nodes).map(|_| NodeHand::default()).collect(),
            epoch: Instant::now(),
            supervisor: OnceLock::new(),
            next_task: AtomicU64::new(1),
            serial: SERVICES.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn shard(&self, c: ClusterId) -> &Shard {
        &self.shards[c.index()]
    }

    /// A node's shard and its number in the shard's core.
    fn node_shard(&self, node: NodeId) -> (&Shard, NodeId) {
        let shard = self.shard(self.layout.nodes[node.index()].cluster);
        (shard, NodeId((node.index() - shard.first) as u32))
    }

    fn lock(shard: &Shard) -> MutexGuard<'_, ClusterState> {
        shard.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A task id of this service's, from the calling thread's block of them.
    pub(crate) fn next_task(&self) -> TaskId {
        TaskIds::for_thread(self.serial, &self.next_task)
    }

    /// A task id from `ids`, a block of this service's that the caller keeps (a burst).
    pub(crate) fn next_task_from(&self, ids: &mut TaskIds) -> TaskId {
        ids.take(&self.next_task)
    }

    /// Registers a tenant, and its weight with every cluster's core.
    pub(crate) fn add_tenant(&self, spec: &TenantSpec) -> Result<TenantId, TenantError> {
        let id = self.tenants.add(spec)?;
        for shard in &self.shards {
            // A weight of 0 was refused above.
            let _ = Self::lock(shard)
                .sched
                .set_tenant_weight(id, spec.get_weight());
        }
        Ok(id)
    }

    /// Whether a node of `cluster` is up (read without a lock; it may change at once).
    pub(crate) fn cluster_up(&self, cluster: ClusterId) -> bool {
        !self.cluster_down[cluster.index()].load(Ordering::Acquire)
    }

    /// Publishes whether node `node`'s cluster has a node up (with its lock held).
    fn publish_cluster_down(&self, node: NodeId, e: &ClusterState) {
        let cluster = self.layout.nodes[node.index()].cluster;
        self.cluster_down[cluster.index()].store(e.sched.cluster_down(LOCAL), Ordering::Release);
    }

    /// Whether `shutdown` has begun (new jobs are refused).
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Admits a job's packets (all of one cluster, in order). With [`Wait::Block`], waits
    /// while the cluster's receive queue is full; with [`Wait::No`], hands the packets back;
    /// with [`Wait::Wake`], hands them back and registers the waker, woken when room frees.
    /// `force` admits even past the bound (a stream's closing packet, which carries no data).
    /// With `light`, the job's tenant, under fair admission, the job may take the light path
    /// (§15.7, [`admit_light`](Self::admit_light)): then it goes to a node's light packets,
    /// without the cluster's lock and without waiting for room; a job too long for it may have
    /// its bytes granted to its tenant's turns in the core ([`core_grant`](Self::core_grant)),
    /// the credit given back if the job is then refused.
    // The refusal hands the packets back as they came, inline: boxing them would allocate on
    // every refused poll of a waiting `submit_async`.
    #[allow(clippy::result_large_err)]
    pub(crate) fn admit(
        &self,
        cluster: ClusterId,
        packets: Packets,
        wait: Wait<'_>,
        force: bool,
        light: Option<&TenantState>,
    ) -> Result<(), Refused<Packets>> {
        let mut grant = None;
        let packets = match light {
            Some(tenant) => match self.admit_light(cluster, packets, tenant) {
                Ok(()) => return Ok(()),
                Err(packets) => {
                    grant = self.core_grant(cluster, &packets, tenant);
                    packets
                }
            },
            None => packets,
        };
        // A job the core serves spends its tenant's light credit as a light one does (a
        // granted one has spent it already): the credit is the tenant's account of its
        // share of the nodes over both paths (§15.7).
        let spends = light
            .filter(|_| grant.is_none())
            .map(|t| (t, job_bytes(&packets)));
        let admitted = self.admit_core(cluster, packets, wait, force, grant);
        if let (Some((tenant, bytes)), Ok(())) = (spends, &admitted) {
            tenant.spend_in_core(bytes, self.layout.node_queue(cluster));
        }
        if let (Some(tenant), Some((bytes, _))) = (light, grant) {
            match admitted {
                Ok(()) => tenant.took_grant(),
                Err(_) => tenant.refund_light(bytes),
            }
        }
        admitted
    }

    /// [`admit`](Self::admit)'s way through the cluster's lock into the core, with `grant`
    /// bytes added to the job's tenant's deficit there, and the grant's rank
    /// ([`core_grant`](Self::core_grant)).
    #[allow(clippy::result_large_err)]
    fn admit_core(
        &self,
        cluster: ClusterId,
        packets: Packets,
        wait: Wait<'_>,
        force: bool,
        grant: Option<(u64, i64)>,
    ) -> Result<(), Refused<Packets>> {
        let shard = self.shard(cluster);
        let mut e = Self::lock(shard);
        loop {
            if e.stopping || (e.closing && !force) {
                return Err(Refused::ShutDown);
            }
            if e.sched.cluster_down(LOCAL) && !force {
                return Err(Refused::NoNodeUp(self.layout.clusters[cluster.index()].0));
            }
            if force || e.has_room(&packets, self.layout.receive_queue_len) {
                break;
            }
            match wait {
                Wait::No => return Err(Refused::Full(packets)),
                Wait::Wake(waker) => {
                    let large = e.is_large(&packets);
                    let wakers = if large {
                        &mut e.large_wakers
                    } else {
                        &mut e.room_wakers
                    };
                    if !wakers.iter().any(|w| w.will_wake(waker)) {
                        wakers.push(waker.clone());
                    }
                    return Err(Refused::Full(packets));
                }
                Wait::Block => e = wait_for_room(shard, e, &packets),
            }
        }
        self.counters.packets_admitted(packets.len() as u64);
        if e.sched.cluster_down(LOCAL) {
            // Forced in with no node up: it fails now rather than wait for a node that may not
            // come back (the core would refuse it anyway).
            let kind = self.layout.clusters[cluster.index()].0;
            let after = AfterUnlock {
                failed: packets
                    .into_iter()
                    .map(|p| (p.data.job, p.data.part, JobError::NoNodeUp(kind)))
                    .collect(),
                ..AfterUnlock::default()
            };
            drop(e);
            after.run(self);
            return Ok(());
        }
        let before = e.pending();
        if let (Some((bytes, rank)), Some(first)) = (grant, packets.first()) {
            let tenant = first.meta.tenant;
            e.sched.grant_tenant(LOCAL, tenant, bytes, rank);
        }
        e.take_in(packets);
        let after = self.offer(shard, &mut e, before);
        drop(e);
        after.run(self);
        Ok(())
    }

    /// A job too long for the light path (over [`LONGEST_LIGHT`] node queues) of a tenant
    /// whose light credit covers it, by the light path's tests (§15.7, long jobs): the bytes
    /// to grant its tenant's turns in the core, so that the job goes ahead of the tenants
    /// over their share there as a light job would, while the core still places its packets
    /// and bounds what waits on each node; with them, its rank there, the credit the tenant
    /// has left (the granted job of the tenant furthest below its share goes first). `None`
    /// otherwise.
    fn core_grant(
        &self,
        cluster: ClusterId,
        packets: &Packets,
        tenant: &TenantState,
    ) -> Option<(u64, i64)> {
        let shard = self.shard(cluster);
        let queue = self.layout.node_queue(cluster);
        let burst = queue.bytes;
        let bytes = job_bytes(packets);
        if !shard.fair || bytes <= burst.saturating_mul(LONGEST_LIGHT) || self.is_closing() {
            return None;
        }
        let rate = || self.light_speed(shard, packets, bytes) * self.tenants.share(tenant);
        let left = tenant.take_light_left(bytes, queue, rate)?;
        Some((bytes, left as i64))
    }

    /// Whether every node up in `cluster` has had light packets (§15.7) waiting, none taken,
    /// for over [`LIGHT_STALL_NS`]: its worker's thread is not running, or is in a long light
    /// run. A job of one packet of a tenant that is not busy, submitted then, runs on the
    /// submitting thread rather than wait for them ([`Service`](crate::runtime::Service)'s
    /// inline path).
    pub(crate) fn light_stalled(&self, cluster: ClusterId) -> bool {
        let now = self.now_ns();
        self.every_node_up_unslowed(self.shard(cluster), |n| {
            self.hands[n]
                .light_still_since()
                .is_some_and(|since| now.saturating_sub(since) > LIGHT_STALL_NS)
        })
    }

    /// Whether `shard` has a node up, none of its nodes has an emulated slowdown, and `f`
    /// holds for every node up: the test of a job run on its submitter beside its nodes
    /// ([`light_stalled`](Self::light_stalled), [`take_light_behind`](Self::take_light_behind)).
    /// A node with an emulated slowdown takes its light sets f times their time: the jobs run
    /// on their submitters would escape the emulation.
    fn every_node_up_unslowed(&self, shard: &Shard, f: impl Fn(usize) -> bool) -> bool {
        let nodes = shard.first..shard.first + shard.nodes;
        if nodes.clone().any(|n| self.layout.nodes[n].slowdown != 1.0) {
            return false;
        }
        let mut up = nodes.filter(|&n| !self.health[n].is_down()).peekable();
        up.peek().is_some() && up.all(f)
    }

    /// Whether a light job of `tenant` made of `packets` (one) runs on its submitting thread
    /// because the tenant is behind on its own light jobs (§15.7): every node up in `cluster`
    /// already holds a set of them in the tenant's light queue, `width` packets (at least
    /// two), so that the job would wait for at least that set before its own; and the job
    /// passes the light path's tests ([`TenantState::take_light_uncounted`], whose credit it
    /// spends),
    /// so that what a tenant runs this way and by the light path together stays within its
    /// light credit.
    pub(crate) fn take_light_behind(
        &self,
        cluster: ClusterId,
        packets: &Packets,
        tenant: &TenantState,
        width: usize,
    ) -> bool {
        let shard = self.shard(cluster);
        let queue = self.layout.node_queue(cluster);
        let burst = queue.bytes;
        let bytes = job_bytes(packets);
        if !shard.fair || bytes > burst.saturating_mul(LONGEST_LIGHT) || self.is_closing() {
            return false;
        }
        let behind = self.every_node_up_unslowed(shard, |n| {
            self.hands[n].light_queued(tenant.id) >= width.max(2)
        });
        let rate = || self.light_speed(shard, packets, bytes) * self.tenants.share(tenant);
        // Kept off here, the job asks the light path next, which counts why.
        behind && tenant.take_light_uncounted(bytes, queue, rate)
    }

    /// The cluster's speed on a job of `packets` (`bytes` long), as the light credit refills
    /// by it: per node up, [`credit_speed`] of its pace and its speed on the job run alone.
    fn light_speed(&self, shard: &Shard, packets: &Packets, bytes: u64) -> f64 {
        self.light_times(shard, packets)
            .map(|(n, t)| credit_speed(self.node_gauges[n].pace(), bytes as f64 / t.max(1.0) * 1e9))
            .sum()
    }

    /// The light path (§15.7): puts a job of `tenant` made of `packets` behind the light
    /// packets of the node that runs it soonest, if the job is at most [`LONGEST_LIGHT`] node
    /// queues long and the tenant's light credit covers it
    /// ([`TenantState::take_light`]); otherwise hands the packets back for the core. The
    /// credit refills at the tenant's weighted share of the bytes the nodes serve: per node,
    /// its pace (bytes per second of its recent busy time, lane sets and light packets alike),
    /// or its speed on such a job run alone, by its unit times, before it has one
    /// ([`credit_speed`]). Takes no
    /// cluster lock, unless the node sleeps: the
    /// light tenant does not wait behind the busy tenants' admissions, or a worker's turn.
    // The packets come back as they went, inline, as `admit` hands them back.
    #[allow(clippy::result_large_err)]
    fn admit_light(
        &self,
        cluster: ClusterId,
        mut packets: Packets,
        tenant: &TenantState,
    ) -> Result<(), Packets> {
        let shard = self.shard(cluster);
        let queue = self.layout.node_queue(cluster);
        let burst = queue.bytes;
        let bytes = job_bytes(&packets);
        if !shard.fair
            || packets.is_empty()
            || bytes > burst.saturating_mul(LONGEST_LIGHT)
            || self.is_closing()
            || !self.cluster_up(cluster)
        {
            return Err(packets);
        }
        let rate = || self.light_speed(shard, &packets, bytes) * self.tenants.share(tenant);
        if !tenant.take_light(bytes, queue, rate) {
            return Err(packets);
        }
        // Of the nodes up, the one with the fewest light packets waiting, then the one that
        // would run the job soonest.
        let node = self.light_times(shard, &packets).min_by(|a, b| {
            let light = |n: usize| self.hands[n].light.load(Ordering::Relaxed);
            light(a.0).cmp(&light(b.0)).then(a.1.total_cmp(&b.1))
        });
        let Some((n, _)) = node else {
            return Err(packets);
        };
        let count = packets.len() as u64;
        // Counted before the closing flag is read: a shutdown that counted none refuses this
        // job (it set the flag first), and one that counted it waits for it.
        shard.light_in_system.fetch_add(count, Ordering::SeqCst);
        if self.closing.load(Ordering::SeqCst) {
            self.light_done(shard, count);
            return Err(packets);
        }
        for p in &mut packets {
            p.meta.cluster = LOCAL;
            p.data.light = true;
        }
        let job = Arc::clone(&packets[0].data.job);
        job.set_light(true);
        if let Err(mut packets) = self.hands[n].push_light(packets, self.now_ns()) {
            // The node went down meanwhile.
            job.set_light(false);
            self.light_done(shard, count);
            for p in &mut packets {
                p.data.light = false;
            }
            return Err(packets);
        }
        self.counters.packets_admitted(count);
        self.counters.job_light();
        tenant.took_light();
        self.last_light
            .store(self.now_ns().max(1), Ordering::Relaxed);
        self.hands[n].wake_emulating();
        // A sleeping worker waits on its condition variable with the cluster's lock, having
        // set `asleep` and seen no light packet: the lock orders this wake after its wait.
        if self.hands[n].asleep.load(Ordering::SeqCst) {
            let _e = Self::lock(shard);
            self.node_cv[n].notify_one();
        }
        Ok(())
    }

    /// `count` light packets of `shard` left the system (delivered, or handed back): a
    /// shutdown waiting for the cluster to drain hears of the last.
    fn light_done(&self, shard: &Shard, count: u64) {
        if shard.light_in_system.fetch_sub(count, Ordering::SeqCst) == count
            && self.closing.load(Ordering::SeqCst)
        {
            let _e = Self::lock(shard);
            shard.idle_cv.notify_all();
        }
    }

    /// Publishes node `node`'s pace, kept by its worker (the light credit's rate, §15.7).
    pub(crate) fn set_pace(&self, node: NodeId, pace: &Pace) {
        self.node_gauges[node.index()].set_pace(pace);
    }

    /// A light packet that ran on node `node` was delivered (§15.7).
    pub(crate) fn light_delivered(&self, node: NodeId) {
        let (shard, _) = self.node_shard(node);
        self.light_done(shard, 1);
    }

    /// Per node of `shard` up, by the service's numbering: its time, by its unit times (for
    /// packets of the service's packet size, as the core's are), to run the job made of
    /// `packets` alone.
    fn light_times<'a>(
        &'a self,
        shard: &'a Shard,
        packets: &'a Packets,
    ) -> impl Iterator<Item = (usize, f64)> + 'a {
        let bytes = job_bytes(packets);
        let cmd = packets.first().map(|p| p.meta.cmd);
        let unit_len = (self.layout.packet_size as u64).max(1);
        (shard.first..shard.first + shard.nodes)
            .filter(move |&n| !self.health[n].is_down())
            .filter_map(move |n| {
                let times = self.node_gauges[n].unit_times();
                Some((n, times.service_time(cmd?, bytes, unit_len)))
            })
    }

    /// Admits many jobs' packets, in order, blocking for room as [`admit`](Self::admit) does
    /// with [`Wait::Block`]; a run of jobs of one cluster takes one trip through its lock.
    /// Returns how many jobs were admitted: all of them, or, when the service began to shut
    /// down part way, those before (they still run to completion).
    pub(crate) fn admit_burst(&self, jobs: Vec<(ClusterId, Packets)>) -> usize {
        let mut admitted = 0;
        let mut jobs = jobs.into_iter().peekable();
        while let Some((cluster, packets)) = jobs.next() {
            let shard = self.shard(cluster);
            let mut e = Self::lock(shard);
            let mut after = AfterUnlock::default();
            let mut next = Some(packets);
            while let Some(packets) = next.take() {
                loop {
                    if e.stopping || e.closing {
                        drop(e);
                        after.run(self);
                        return admitted;
                    }
                    if e.has_room(&packets, self.layout.receive_queue_len) {
                        break;
                    }
                    // Let the core take what it can before waiting for room.
                    let before = e.pending();
                    after.extend(self.offer(shard, &mut e, before));
                    if e.has_room(&packets, self.layout.receive_queue_len) {
                        break;
                    }
                    e = wait_for_room(shard, e, &packets);
                }
                self.counters.packets_admitted(packets.len() as u64);
                e.take_in(packets);
                admitted += 1;
                next = jobs.next_if(|(c, _)| *c == cluster).map(|(_, p)| p);
            }
            let before = e.pending();
            after.extend(self.offer(shard, &mut e, before));
            drop(e);
            after.run(self);
        }
        admitted
    }

    /// Offers the receive queue's packets to the core, oldest first, until it pushes back;
    /// then moves the placements to their node queues. Returns what to do once the lock is
    /// released (wake `submit_async` futures; resolve packets the core refused): no user code
    /// runs under the lock.
    ///
    /// `before` is how many packets of the cluster were pending (admitted, not yet on a node)
    /// before the caller's change. Blocked submitters are woken only once a drained cluster
    /// has room for more than one job, not at every packet, since each wake-up costs a context
    /// switch (and, on a machine with no spare core, preempts a node): under first come first
    /// served once that count has fallen to half its bound (or to nothing); under fair
    /// admission once the backlog is at its low-water mark, three quarters of each budget
    /// ([`Backlog::at_low_water`]). A small job is admitted at once whatever one giant job
    /// holds, so it rarely blocks at all; when many jobs fill the budgets, it waits for a
    /// quarter of them to drain.
    fn offer(&self, shard: &Shard, e: &mut ClusterState, before: usize) -> AfterUnlock {
        // Submission checks cluster and size, so a refusal other than a full cluster is a bug:
        // fail the job rather than lose the packet.
        let mut refused = Vec::new();
        let ClusterState { sched, receive, .. } = e;
        // With every node down (a worker being restarted), nothing is offered: the core would
        // refuse every packet as fitting no node; they wait for the node to come back.
        if !sched.cluster_down(LOCAL) {
            sched.arrive_many(receive, |err| refused.push(err));
        }
        let mut after = AfterUnlock::default();
        for err in refused {
            let msg = err.to_string();
            let p = err.into_packet();
            e.in_system -= 1;
            e.backlog_remove(p.meta.task, p.meta.len);
            after
                .failed
                .push((p.data.job, p.data.part, JobError::Internal(msg)));
        }
        // Placements first: under fair admission they are what frees room.
        self.route(shard, e);
        let pending = e.pending();
        let wake = match e.sched.admission() {
            Admission::Fifo => {
                let waiting = e.blocked_submitters > 0 || !e.room_wakers.is_empty();
                waiting && pending <= self.layout.receive_queue_len / 2
            }
            Admission::Fair => {
                // A submitter blocked with a large job gets in only by a free large slot:
                // woken at every placement while the slots are taken, it would cost a context
                // switch each time for nothing.
                let small = e.blocked_submitters > e.blocked_large || !e.room_wakers.is_empty();
                let large = (e.blocked_large > 0 || !e.large_wakers.is_empty())
                    && e.backlog.large_slot_free();
                (small || large) && e.backlog.at_low_water()
            }
        };
        if pending < before && wake {
            shard.room_cv.notify_all();
            // Every blocked submitter is woken: none is counted until it waits again.
            e.room_round += 1;
            e.blocked_submitters = 0;
            e.blocked_large = 0;
            after.wakers = std::mem::take(&mut e.room_wakers);
            if e.backlog.large_slot_free() {
                after.wakers.append(&mut e.large_wakers);
            }
            // The submitters waiting with large jobs look now, all of them (`notify_all`).
            e.backlog.take_large_left();
        }
        self.publish(shard, e);
        after
    }

    /// Moves the core's placements to the node queues and wakes sleeping nodes.
    fn route(&self, shard: &Shard, e: &mut ClusterState) {
        while let Some(d) = e.sched.next_dispatch() {
            let local = d.node.index();
            let n = shard.first + local;
            e.backlog_remove(d.packet.meta.task, d.packet.meta.len);
            e.node_work[local].push_back(d.packet);
            self.queued[n].store(e.node_work[local].len(), Ordering::Relaxed);
            self.publish_node(shard, e, local);
            if self.hands[n].asleep.load(Ordering::SeqCst) {
                self.node_cv[n].notify_one();
            }
        }
    }

    /// Publishes the cluster's queue lengths to the gauges [`metrics`](Self::metrics) reads.
    /// A node's own gauge is published where its queue changes (a placement, a completion, a
    /// failure), so a turn writes the lines of the nodes it touched, not of every node.
    fn publish(&self, shard: &Shard, e: &ClusterState) {
        let g = &shard.gauges;
        g.receive_queue.store(e.receive.len(), Ordering::Relaxed);
        g.cluster_queue
            .store(e.sched.cluster_queue_len(LOCAL), Ordering::Relaxed);
        g.wait_queue
            .store(e.sched.wait_queue_len(LOCAL), Ordering::Relaxed);
        g.choose_list
            .store(e.sched.choose_list_len(LOCAL), Ordering::Relaxed);
        g.alarms
            .store(e.sched.policy(LOCAL).alarms(), Ordering::Relaxed);
    }

    /// Publishes node `local`'s queue (packets and bytes placed, not complete) to its gauge.
    fn publish_node(&self, shard: &Shard, e: &ClusterState, local: usize) {
        let st = e.sched.node(NodeId(local as u32));
        self.node_gauges[shard.first + local].set_queue(st.queued_packets(), st.queued_bytes());
    }

    /// A worker's turn at its cluster's lock: report the packets it resolved since its last
    /// turn (with refreshed unit-time estimates), then take the packets now queued on the
    /// node, up to `max`, into its hand ([`NodeHealth::hand`]). With none queued, the worker
    /// spins for a while (a wake-up costs more than a short spin on a busy machine; see
    /// [`SPIN`](crate::runtime::hand::SPIN)), longer by the credit its work has earned in
    /// `poll`, and then sleeps. Returns `false` when the service is stopping and the node's
    /// queue is empty.
    ///
    /// `generation` is the node generation the worker's unreported completions belong to;
    /// completions of an older generation (the node failed since) are not reported to the
    /// core, which forgot those packets when the node went down. A worker calling in while its
    /// node is down survived the failure (a stall) or replaced the failed one: the node
    /// rejoins.
    pub(crate) fn worker_turn(
        &self,
        node: NodeId,
        generation: &mut u64,
        estimates: &mut Vec<(Cmd, f64)>,
        max: usize,
        poll: &mut IdlePoll,
    ) -> bool {
        let n = node.index();
        let (shard, local) = self.node_shard(node);
        let l = local.index();
        let health = &self.health[n];
        let Some(mut e) = self.lock_for_turn(shard, &self.hands[n]) else {
            // Light packets came while another thread held the lock: they run first.
            return true;
        };
        for (cmd, t) in estimates.drain(..) {
            if e.sched.set_unit_time(local, cmd, t).is_ok() {
                self.node_gauges[n].set_unit_time(cmd, t);
            }
        }
        let current = health.generation.load(Ordering::Acquire);
        let finished = health.unreported.swap(0, Ordering::AcqRel);
        let mut after = AfterUnlock::default();
        if finished > 0 {
            let before = e.pending();
            if *generation == current {
                // Reported together, placed for together: one walk for the freed room.
                if let Err(err) = e.sched.complete_many(local, finished as usize) {
                    debug_assert!(false, "worker out of step with the core: {err}");
                }
                self.publish_node(shard, &e, l);
            }
            e.in_system -= finished;
            after = self.offer(shard, &mut e, before);
        }
        if health.is_down() && !e.stopping {
            // Back, the node takes what waits, up to its room: wake submitters as any drain does
            // (had it taken the whole backlog, no later completion would free room to wake them).
            let before = e.pending();
            let _ = e.sched.node_up(local);
            self.hands[n].open_light();
            health.down.store(false, Ordering::Release);
            health.restarting.store(false, Ordering::Release);
            self.publish_cluster_down(node, &e);
            after.extend(self.offer(shard, &mut e, before));
        }
        *generation = current;
        if shard.drained(&e) {
            shard.idle_cv.notify_all();
        }
        if !(after.wakers.is_empty() && after.failed.is_empty()) {
            drop(e);
            after.run(self);
            // The completions are reported: light packets placed meanwhile may run first.
            let Some(again) = self.lock_for_turn(shard, &self.hands[n]) else {
                return true;
            };
            e = again;
        }
        let hand = &self.hands[n];
        let light = || hand.light.load(Ordering::SeqCst) > 0;
        loop {
            if !e.node_work[l].is_empty() {
                let take = e.node_work[l].len().min(max.max(1));
                hand.waiting().extend(e.node_work[l].drain(..take));
                self.queued[n].store(e.node_work[l].len(), Ordering::Relaxed);
                return true;
            }
            // Light packets are taken at the top of the worker's loop.
            if light() {
                return true;
            }
            if e.stopping {
                return false;
            }
            // Spin outside the lock, watching the node's queues; then sleep.
            drop(e);
            let start = Instant::now();
            let limit = poll.limit();
            while self.queued[n].load(Ordering::Relaxed) == 0
                && !light()
                && !self.stopping.load(Ordering::Relaxed)
                && start.elapsed() < limit
            {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                std::thread::yield_now();
            }
            poll.looked(start.elapsed());
            let Some(again) = self.lock_for_turn(shard, hand) else {
                return true;
            };
            e = again;
            // `asleep` is set before the light packets are looked at, and a light job's
            // submitter looks at it after placing them: one of the two sees the other.
            hand.asleep.store(true, Ordering::SeqCst);
            if e.node_work[l].is_empty() && !light() && !e.stopping {
                e = self.node_cv[n].wait(e).unwrap_or_else(|p| p.into_inner());
            }
            hand.asleep.store(false, Ordering::SeqCst);
        }
    }

    /// The cluster's lock, for a worker's turn. While light jobs come (§15.7), a worker
    /// whose lock is held by another thread (a submitter, perhaps descheduled in the middle)
    /// does not sleep on it: it tries again, spinning for [`SPIN`](crate::runtime::hand::SPIN)
    /// and then yielding its core between tries, and gives up as soon as light packets wait on
    /// its node (`None`): they run first, and the turn is taken after. A worker asleep on the
    /// lock waited as long as the holder was descheduled, the light packets behind it
    /// (docs/RESULTS.md, Tenants).
    fn lock_for_turn<'a>(
        &self,
        shard: &'a Shard,
        hand: &NodeHand,
    ) -> Option<MutexGuard<'a, ClusterState>> {
        if !self.light_recent() {
            return Some(Self::lock(shard));
        }
        let start = Instant::now();
        loop {
            match shard.engine.try_lock() {
                Ok(e) => return Some(e),
                Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
            if hand.light.load(Ordering::Acquire) > 0 {
                return None;
            }
            back_off(&start);
        }
    }

    /// This service's number among the process's services (see `context.rs`).
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// Nanoseconds since the service started (for [`NodeHealth::busy_since`]).
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether a node's set should pause for light packets (§15.7): a job took the light path
    /// in the last [`LIGHT_RECENT_NS`]. Without light jobs, a set runs whole, at full speed.
    pub(crate) fn light_recent(&self) -> bool {
        let last = self.last_light.load(Ordering::Relaxed);
        last != 0 && self.now_ns().saturating_sub(last) < LIGHT_RECENT_NS
    }

    /// Whether the service is stopping (every cluster has drained; the supervisor leaves).
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Takes node `node` out after a failure (docs/ALGORITHM.md §15.2): its worker thread is
    /// gone (`dead`), or its running packet has run past the stall timeout. Returns whether the
    /// node was taken out (a stall that resolved meanwhile is not a failure).
    ///
    /// 1. The running packets (one, or a lane set) are taken here: each runs again on another
    ///    node (one up or being restarted; with none, it fails) from the copy made when it started (its input, its carried state; a chained
    ///    packet's state is still in the store), unless this was its last attempt
    ///    (the builder's `max_attempts`), and then its job fails with [`JobError::NodeFailed`]. The
    ///    worker, if it lives, finds them taken and discards its late results and the states
    ///    they would leave.
    /// 2. The core marks the node down, forgets what it placed there and unbinds the chained
    ///    jobs bound to it; their next packets continue from the state store elsewhere.
    /// 3. The packets to run again, then those the node had not started (its queue, the
    ///    worker's hand) go back in front of the waiting ones, in order, and are placed on
    ///    other nodes: a chained job's rerun packet goes before its next packets.
    /// 4. If no node of the cluster is up, every packet waiting there fails with
    ///    [`JobError::NoNodeUp`] instead of waiting forever; but not for a `dead` worker, which
    ///    the supervisor restarts at once (the packets wait the moment it takes; should the
    ///    restart fail, [`give_up_node`](Self::give_up_node) fails them).
    pub(crate) fn fail_node(&self, node: NodeId, dead: bool) -> bool {
        let n = node.index();
        let (shard, local) = self.node_shard(node);
        let health = &self.health[n];
        let mut e = Self::lock(shard);
        let running = std::mem::take(&mut *self.hands[n].running());
        if !dead && running.is_empty() {
            return false;
        }
        health.down.store(true, Ordering::Release);
        health.generation.fetch_add(1, Ordering::AcqRel);
        health.failures.fetch_add(1, Ordering::Relaxed);
        if !dead {
            health.stalls.fetch_add(1, Ordering::Relaxed);
        }
        health.busy_since.store(0, Ordering::Release);
        let _ = e.sched.node_down(local);
        self.publish_cluster_down(node, &e);
        self.publish_node(shard, &e, local.index());
        // Light packets, running or waiting, go back to the core with the rest: counted in
        // the system as the core's, under the lock (a shutdown sees them in one count or
        // the other).
        let light = self.hands[n].close_light();
        let moved = light.len() as u64 + running.iter().filter(|r| r.light).count() as u64;
        e.in_system += moved;
        shard.light_in_system.fetch_sub(moved, Ordering::SeqCst);
        let mut failed: Vec<(Arc<JobRecord>, usize, JobError)> = Vec::new();
        let mut back: Vec<Packet<PacketData>> = Vec::new();
        // A packet runs again on another node: one that is up, or being restarted. With none
        // (a cluster of one node), it fails now, as on its last attempt.
        let first = shard.first;
        let another = (first..first + e.node_work.len()).any(|i| {
            i != n
                && (!self.health[i].is_down() || self.health[i].restarting.load(Ordering::Acquire))
        });
        for r in running {
            match r.retry.filter(|_| another) {
                Some(mut p) => {
                    p.data.reclaim_input();
                    p.data.attempt += 1;
                    p.data.light = false;
                    back.push(p);
                }
                None => failed.push((r.job, r.part, JobError::NodeFailed(node))),
            }
        }
        self.counters
            .node_failed_running(back.len() as u64, failed.len() as u64);
        back.extend(light);
        back.extend(self.hands[n].waiting().drain(..));
        back.extend(e.node_work[local.index()].drain(..));
        // Light packets go back to the core as any others do.
        for p in &mut back {
            p.data.light = false;
        }
        self.queued[n].store(0, Ordering::Relaxed);
        if dead {
            // Resolved by the dead worker and never reported: the core forgot them with the
            // node; only the count of packets in the system is left to settle.
            e.in_system -= health.unreported.swap(0, Ordering::AcqRel);
        }
        e.in_system -= failed.len() as u64;
        health.restarting.store(dead, Ordering::Release);
        let before = e.pending();
        // A node being restarted is back at once: only with none coming back do the waiting
        // packets fail.
        let restarting = (first..first + e.node_work.len())
            .any(|i| self.health[i].restarting.load(Ordering::Acquire));
        if e.sched.cluster_down(LOCAL) && !restarting {
            for p in &back {
                e.backlog_add(p.meta.task, p.meta.tenant, 1, p.meta.len);
            }
            e.sched.requeue(back);
            failed.extend(self.fail_waiting(&mut e, node));
        } else {
            for p in &back {
                e.backlog_add(p.meta.task, p.meta.tenant, 1, p.meta.len);
            }
            e.sched.requeue(back);
            self.route(shard, &mut e);
        }
        let mut after = self.offer(shard, &mut e, before);
        after.failed.append(&mut failed);
        // Every waiting submitter looks again: room may have freed, or the cluster is down and
        // they get `NoNodeUp`.
        after.wakers.extend(e.all_room_wakers());
        if shard.drained(&e) {
            shard.idle_cv.notify_all();
        }
        drop(e);
        shard.room_cv.notify_all();
        after.run(self);
        true
    }

    /// Every packet waiting in node `node`'s cluster, failed with [`JobError::NoNodeUp`] (every
    /// node of it is down).
    fn fail_waiting(
        &self,
        e: &mut ClusterState,
        node: NodeId,
    ) -> Vec<(Arc<JobRecord>, usize, JobError)> {
        let kind = self.layout.nodes[node.index()].kind;
        let mut back: Vec<Packet<PacketData>> = e.sched.drain_waiting(LOCAL);
        back.extend(e.receive.drain(..));
        back.into_iter()
            .map(|p| {
                e.backlog_remove(p.meta.task, p.meta.len);
                e.in_system -= 1;
                (p.data.job, p.data.part, JobError::NoNodeUp(kind))
            })
            .collect()
    }

    /// The dead worker of node `node` could not be restarted: if no node of its cluster is up,
    /// the packets waiting there fail with [`JobError::NoNodeUp`] instead of waiting forever.
    pub(crate) fn give_up_node(&self, node: NodeId) {
        let (shard, _) = self.node_shard(node);
        let mut e = Self::lock(shard);
        self.health[node.index()]
            .restarting
            .store(false, Ordering::Release);
        let first = shard.first;
        let restarting = (first..first + e.node_work.len())
            .any(|i| self.health[i].restarting.load(Ordering::Acquire));
        if !e.sched.cluster_down(LOCAL) || restarting {
            return;
        }
        let mut after = AfterUnlock {
            failed: self.fail_waiting(&mut e, node),
            ..AfterUnlock::default()
        };
        after.wakers.extend(e.all_room_wakers());
        if shard.drained(&e) {
            shard.idle_cv.notify_all();
        }
        drop(e);
        shard.room_cv.notify_all();
        after.run(self);
    }

    /// Sets a node's unit times (after calibration).
    pub(crate) fn set_unit_times(&self, node: NodeId, times: UnitTimes) {
        let (shard, local) = self.node_shard(node);
        let mut e = Self::lock(shard);
        for cmd in Cmd::ALL {
            if e.sched.set_unit_time(local, cmd, times.get(cmd)).is_ok() {
                self.node_gauges[node.index()].set_unit_time(cmd, times.get(cmd));
            }
        }
    }

    /// Refuses new jobs from now on, and wakes submitters waiting for room (they get
    /// `ShutDown`).
    pub(crate) fn close(&self) {
        // Sequentially consistent with the light path's count (see `admit_light`).
        self.closing.store(true, Ordering::SeqCst);
        for shard in self.shards.iter() {
            let after = AfterUnlock {
                wakers: {
                    let mut e = Self::lock(shard);
                    e.closing = true;
                    e.all_room_wakers()
                },
                failed: Vec::new(),
            };
            shard.room_cv.notify_all();
            after.run(self);
        }
    }

    /// Refuses new jobs and waits until every admitted packet is complete; then lets the
    /// workers go. Idempotent.
    ///
    /// Clusters drain one after another, each stopping under its own lock once it holds
    /// nothing: a stream's closing packet admitted meanwhile (admission past `closing`) is
    /// either counted before its cluster stops, so the cluster waits for it, or refused.
    pub(crate) fn drain_and_stop(&self) {
        self.close();
        for shard in self.shards.iter() {
            let mut e = Self::lock(shard);
            while !shard.drained(&e) {
                e = shard.idle_cv.wait(e).unwrap_or_else(|p| p.into_inner());
            }
            e.stopping = true;
            for n in shard.first..shard.first + e.node_work.len() {
                self.node_cv[n].notify_all();
            }
        }
        self.stopping.store(true, Ordering::Release);
        if let Some(t) = self.supervisor.get() {
            t.unpark();
        }
    }
}

impl Engine {
    /// A snapshot of every counter and queue depth. It reads atomics only: no lock a
    /// submitter or a worker waits on.
    pub(crate) fn metrics(&self) -> Metrics {
        let nodes = self
            .layout
            .nodes
            .iter()
            .enumerate()
            .map(|(i, info)| {
                let c = self.node_counters[i].read();
                let g = &self.node_gauges[i];
                let (queue_depth, queued_bytes) = g.queue();
                let health = &self.health[i];
                NodeMetrics {
                    node: NodeId(i as u32),
                    cluster: info.kind,
                    core: info.core,
                    slowdown: info.slowdown,
                    packets: c.packets,
                    bytes: c.bytes,
                    busy: Duration::from_nanos(c.busy_ns),
                    queue_depth,
                    queued_bytes,
                    panics: c.panics,
                    out_of_place: c.out_of_place,
                    retry_copies: c.retry_copies,
                    state: if health.is_down() {
                        NodeState::Down
                    } else {
                        NodeState::Up
                    },
                    failures: health.failures.load(Ordering::Relaxed),
                    stalls: health.stalls.load(Ordering::Relaxed),
                    restarts: health.restarts.load(Ordering::Relaxed),
                    unit_times: g.unit_times(),
                }
            })
            .collect();
        let clusters = self
            .layout
            .clusters
            .iter()
            .zip(self.shards.iter())
            .map(|(&(kind, _), shard)| {
                let g = &shard.gauges;
                ClusterMetrics {
                    kind,
                    receive_queue: g.receive_queue.load(Ordering::Relaxed),
                    cluster_queue: g.cluster_queue.load(Ordering::Relaxed),
                    wait_queue: g.wait_queue.load(Ordering::Relaxed),
                    choose_list: g.choose_list.load(Ordering::Relaxed),
                    alarms: g.alarms.load(Ordering::Relaxed),
                }
            })
            .collect();
        let (jobs_submitted, jobs_completed, jobs_failed) = self.counters.jobs();
        let (packets_admitted, packets_completed, packets_failed) = self.counters.packets();
        Metrics {
            nodes,
            clusters,
            jobs_submitted,
            jobs_completed,
            jobs_failed,
            packets_admitted,
            packets_completed,
            packets_failed,
            jobs_inline: self.counters.inline(),
            jobs_light: self.counters.light(),
            jobs_inline_stalled: self.counters.inline_stalled(),
            jobs_inline_behind: self.counters.inline_behind(),
            packets_retried: self.counters.retries().0,
            packets_out_of_attempts: self.counters.retries().1,
            keys: self.keys.len(),
            stored_states: self.store.len(),
            tenants: self.tenants.metrics(),
            aes_implementations: if self.layout.aes.is_some() {
                self.layout.aes_impls.choices()
            } else {
                Vec::new()
            },
        }
    }
}

/// The bytes of a job made of `packets`.
fn job_bytes(packets: &Packets) -> u64 {
    packets.iter().map(|p| p.meta.len).sum()
}

/// A node's speed, in bytes per second, as a tenant's light credit refills by it
/// (docs/ALGORITHM.md §15.7): its `pace`, the bytes it served per second of its recent busy
/// time, once it has one; before, its speed on the job run `alone` by its unit times.
///
/// The pace is what the node serves; the unit times scale one packet size's time by length,
/// so on packets much shorter than the service's packet size, whose fixed costs they leave
/// out, they overstate it. Taken as a floor under the pace, as they were, they let the light
/// credit of backlogged tenants of short jobs refill faster than the node served: with 1 KiB
/// calls behind the daemons, the tenant of weight 3 filled the node from the light path, and
/// the tenant of weight 1, waiting in the core, was served nothing (docs/RESULTS.md, Tenants).
pub(crate) fn credit_speed(pace: f64, alone: f64) -> f64 {
    if pace > 0.0 { pace } else { alone }
}

#[cfg(test)]
mod tests {
    use super::credit_speed;

    #[test]
    fn the_light_credit_refills_at_what_a_node_served_once_it_has_served() {
        // Before the node has served anything, its speed alone by its unit times.
        assert_eq!(credit_speed(0.0, 8e6), 8e6);
        // After, its pace, below that speed (short packets) as above it (lane sets).
        assert_eq!(credit_speed(5e6, 8e6), 5e6);
        assert_eq!(credit_speed(3e9, 1.4e9), 3e9);
    }
}
