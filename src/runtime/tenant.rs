//! Tenants: the clients a service is shared between (docs/ALGORITHM.md §15.7).
//!
//! A tenant is registered with a weight and optional limits ([`TenantSpec`]); jobs submitted
//! under it ([`Job::tenant`](crate::runtime::Job::tenant)) share the nodes with other tenants'
//! by weight in the scheduler core (hierarchical deficit round robin), and pass its limits at
//! the door here: jobs in flight, bytes in flight, and bytes per second (a token bucket
//! holding one second's worth). A job over a limit waits (`submit`), is handed back
//! (`try_submit`), or waits without blocking a thread (`submit_async`), until a job of the
//! tenant finishes or the bucket refills. A job larger than a bytes limit on its own is let in
//! when the tenant has nothing in flight (or, for the rate, when its bucket is full, leaving it
//! in debt), so no job waits forever.
//!
//! Every job belongs to a tenant: one submitted without belongs to [`TenantId::DEFAULT`],
//! registered when the service is built, weight 1 and no limits.
//!
//! # Design note
//!
//! A tenant's usage sits behind a mutex of its own, taken once when a job enters and once when
//! it finishes, never with a cluster's lock held; a finishing job holds its tenant's lease
//! ([`Lease`]) and gives it back even if the job is dropped unfinished, so that nothing leaks
//! a tenant's room. Wakers of futures waiting at the door are woken with no lock held.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use rustc_hash::FxHashMap;

use crate::packet::TenantId;
use crate::runtime::context::{self, SHARDS};
use crate::runtime::error::TenantError;

/// The longest name a tenant may have, in bytes.
pub const MAX_TENANT_NAME: usize = 128;

/// A tenant to register: its name, weight and limits.
///
/// ```
/// use cryptodispatch::runtime::TenantSpec;
/// let spec = TenantSpec::new("payments").weight(3).max_bytes_in_flight(64 << 20);
/// assert_eq!(spec.name(), "payments");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantSpec {
    name: String,
    weight: u32,
    limits: TenantLimits,
}

/// A tenant's limits; `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TenantLimits {
    /// Bytes of the tenant's jobs admitted and not finished.
    pub bytes_in_flight: Option<u64>,
    /// The tenant's jobs admitted and not finished.
    pub jobs_in_flight: Option<u64>,
    /// Bytes admitted per second, over a bucket of one second's worth.
    pub bytes_per_sec: Option<u64>,
}

impl TenantSpec {
    /// A tenant named `name` (1 to [`MAX_TENANT_NAME`] bytes of `A-Z a-z 0-9 . _ -`), of
    /// weight 1, without limits.
    pub fn new(name: impl Into<String>) -> Self {
        TenantSpec {
            name: name.into(),
            weight: 1,
            limits: TenantLimits::default(),
        }
    }

    /// The share of the nodes the tenant gets while others are backlogged too, relative to
    /// theirs (at least 1; default 1).
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// At most this many bytes of the tenant's jobs admitted and not finished.
    pub fn max_bytes_in_flight(mut self, bytes: u64) -> Self {
        self.limits.bytes_in_flight = Some(bytes);
        self
    }

    /// At most this many of the tenant's jobs admitted and not finished.
    pub fn max_jobs_in_flight(mut self, jobs: u64) -> Self {
        self.limits.jobs_in_flight = Some(jobs);
        self
    }

    /// At most this many bytes admitted per second, on average: a bucket of one second's worth.
    /// A job larger than the bucket is admitted once the bucket is full and leaves it in debt,
    /// which the refill pays before the tenant's next job (so no job waits for ever, and over
    /// time the rate holds).
    pub fn max_bytes_per_sec(mut self, bytes: u64) -> Self {
        self.limits.bytes_per_sec = Some(bytes);
        self
    }

    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tenant's weight.
    pub fn get_weight(&self) -> u32 {
        self.weight
    }

    /// The tenant's limits.
    pub fn limits(&self) -> TenantLimits {
        self.limits
    }

    pub(crate) fn check(&self) -> Result<(), TenantError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= MAX_TENANT_NAME
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !name_ok {
            return Err(TenantError::BadName);
        }
        if self.weight == 0 {
            return Err(TenantError::ZeroWeight);
        }
        let l = self.limits;
        for (value, what) in [
            (l.bytes_in_flight, "max_bytes_in_flight"),
            (l.jobs_in_flight, "max_jobs_in_flight"),
            (l.bytes_per_sec, "max_bytes_per_sec"),
        ] {
            if value == Some(0) {
                return Err(TenantError::ZeroLimit(what));
            }
        }
        Ok(())
    }
}

/// One tenant's counters, in a [`Metrics`](crate::runtime::Metrics) snapshot.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TenantMetrics {
    /// The tenant.
    pub tenant: TenantId,
    /// Its name (`default` for [`TenantId::DEFAULT`]).
    pub name: String,
    /// Its weight.
    pub weight: u32,
    /// Its limits.
    pub limits: TenantLimits,
    /// Jobs admitted (passed the tenant's limits and the cluster's backpressure).
    pub jobs_admitted: u64,
    /// Bytes of the jobs admitted.
    pub bytes_admitted: u64,
    /// Jobs finished with an output.
    pub jobs_completed: u64,
    /// Bytes of the jobs finished with an output.
    pub bytes_completed: u64,
    /// Bytes served: each packet's bytes counted when the packet finishes (a job's as it runs,
    /// not at its end; a job run whole on the submitting thread when it finishes), so that what
    /// a tenant was served over a short interval is not lumped at its jobs' ends.
    pub bytes_served: u64,
    /// Jobs finished with an error.
    pub jobs_failed: u64,
    /// Jobs admitted by the light path (docs/ALGORITHM.md §15.7), of the jobs admitted.
    pub jobs_light: u64,
    /// Jobs too long for the light path that went through the core ahead of the tenants over
    /// their share, their bytes granted to the tenant's turns from its saved share
    /// (docs/ALGORITHM.md §15.7, long jobs), of the jobs admitted.
    pub jobs_granted: u64,
    /// Jobs that asked for the light path (or, too long for it, for a grant in the core) and
    /// were kept off it as their tenant was busy: more than a node queue of its bytes in flight
    /// on the core's path, the job's included (docs/ALGORITHM.md §15.7, test 2).
    pub jobs_kept_busy: u64,
    /// Jobs that asked for the light path (or a grant) and were kept off it as the tenant's
    /// light credit did not cover them (docs/ALGORITHM.md §15.7, test 3).
    pub jobs_over_credit: u64,
    /// Jobs of one packet run on the submitting thread because every node of their cluster
    /// had left its light packets waiting (docs/ALGORITHM.md §15.7, a node that does not
    /// run; the tenant's share of `Metrics::jobs_inline_stalled`).
    pub jobs_inline_stalled: u64,
    /// Jobs of one packet run on the submitting thread because every node of their cluster
    /// already held a set of the tenant's light packets (docs/ALGORITHM.md §15.7, a tenant
    /// behind on its own light jobs; the tenant's share of `Metrics::jobs_inline_behind`).
    pub jobs_inline_behind: u64,
    /// Jobs refused: handed back by `try_submit`, or whose `submit_async` future was dropped
    /// while it waited for room.
    pub jobs_refused: u64,
    /// Bytes of the jobs refused.
    pub bytes_refused: u64,
    /// Jobs admitted and not finished now.
    pub jobs_in_flight: u64,
    /// Bytes of the jobs admitted and not finished now.
    pub bytes_in_flight: u64,
    /// Bytes of jobs held at the door now by one of the tenant's limits.
    pub bytes_waiting: u64,
    /// Latency (submission to output) percentiles of the finished jobs, each the upper bound
    /// of a histogram bucket (within 9% of the exact value): p50, p90, p99, p99.9. `None`
    /// until a job has finished.
    pub latency: Option<[Duration; 4]>,
}

/// Latencies in a log-scale histogram: 8 buckets per power of two of nanoseconds, in
/// [`HIST_SHARDS`] copies that threads record into by their shard (summed on read).
struct Histogram {
    buckets: Vec<AtomicU64>,
}

const SUB: u32 = 8;
/// Buckets of one copy.
const BUCKETS: usize = 64 * SUB as usize;
/// Copies of the histogram: 4 KiB each, a few so that two threads rarely share one.
const HIST_SHARDS: usize = 4;

impl Histogram {
    fn new() -> Self {
        Histogram {
            buckets: (0..HIST_SHARDS * BUCKETS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// The bucket of `ns` nanoseconds; values below 8 ns count as 8.
    fn index(ns: u64) -> usize {
        let ns = ns.max(u64::from(SUB));
        let exp = 63 - ns.leading_zeros();
        let sub = ((ns >> (exp - 3)) & u64::from(SUB - 1)) as u32;
        (exp * SUB + sub) as usize
    }

    /// The largest value of bucket `i`.
    fn upper(i: usize) -> u64 {
        let (exp, sub) = ((i as u32) / SUB, (i as u32) % SUB);
        let base = 1u128 << exp;
        let top = base + (base * u128::from(sub + 1)) / u128::from(SUB);
        u64::try_from(top.saturating_sub(1))
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let copy = context::shard() % HIST_SHARDS;
        self.buckets[copy * BUCKETS + Self::index(ns)].fetch_add(1, Relaxed);
    }

    fn percentiles(&self) -> Option<[Duration; 4]> {
        let counts: Vec<u64> = (0..BUCKETS)
            .map(|i| {
                (0..HIST_SHARDS)
                    .map(|c| self.buckets[c * BUCKETS + i].load(Relaxed))
                    .sum()
            })
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let mut out = [Duration::ZERO; 4];
        for (slot, q) in out.iter_mut().zip([0.5, 0.9, 0.99, 0.999]) {
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (i, &c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    *slot = Duration::from_nanos(Self::upper(i));
                    break;
                }
            }
        }
        Some(out)
    }
}

/// One shard of a tenant's per-job counts (see `context::shard`): jobs and bytes that
/// entered and left its limits (in flight: in less out, summed over the shards), admitted,
/// completed and failed.
#[derive(Default)]
struct Shard {
    jobs_in: AtomicU64,
    bytes_in: AtomicU64,
    jobs_out: AtomicU64,
    bytes_out: AtomicU64,
    jobs_admitted: AtomicU64,
    bytes_admitted: AtomicU64,
    jobs_completed: AtomicU64,
    bytes_completed: AtomicU64,
    bytes_served: AtomicU64,
    jobs_failed: AtomicU64,
    jobs_light: AtomicU64,
    jobs_granted: AtomicU64,
    jobs_kept_busy: AtomicU64,
    jobs_over_credit: AtomicU64,
    jobs_inline_stalled: AtomicU64,
    jobs_inline_behind: AtomicU64,
}

/// Why a job was kept off the light path.
enum Kept {
    /// Its tenant was busy: over a node queue in flight on the core's path.
    Busy,
    /// Its tenant's light credit did not cover it.
    OverCredit,
}

/// A tenant's counts, sharded so that threads submitting and finishing its jobs (every job of
/// a service without tenants is the default tenant's) do not write one cache line by turns.
struct Counters {
    shards: Box<[CachePadded<Shard>]>,
    jobs_refused: AtomicU64,
    bytes_refused: AtomicU64,
}

impl Counters {
    fn new() -> Self {
        Counters {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
            jobs_refused: AtomicU64::new(0),
            bytes_refused: AtomicU64::new(0),
        }
    }

    /// The calling thread's shard.
    fn mine(&self) -> &Shard {
        &self.shards[context::shard()]
    }

    /// A count summed over the shards.
    fn sum(&self, field: impl Fn(&Shard) -> &AtomicU64) -> u64 {
        self.shards
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(field(s).load(Relaxed)))
    }

    /// Jobs and bytes in flight.
    fn in_flight(&self) -> (u64, u64) {
        (
            self.sum(|s| &s.jobs_in)
                .wrapping_sub(self.sum(|s| &s.jobs_out)),
            self.sum(|s| &s.bytes_in)
                .wrapping_sub(self.sum(|s| &s.bytes_out)),
        )
    }
}

/// What waits for a tenant with limits, and its rate bucket.
struct Usage {
    /// The rate bucket, in bytes (negative: in debt for a job larger than the bucket).
    tokens: f64,
    refilled: Instant,
    waiting_bytes: u64,
    /// Threads blocked in [`TenantState::enter_blocking`].
    blocked: usize,
    wakers: Vec<Waker>,
    /// Wakers of futures held by the rate alone, woken by the supervisor's tick.
    timed: Vec<Waker>,
}

/// Why a job may not enter now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Closed {
    /// A job of the tenant must finish first.
    InFlight,
    /// The rate bucket refills enough in about this long.
    Rate(Duration),
}

/// A node queue as the light path counts a tenant's light credit in it (docs/ALGORITHM.md
/// §15.7): the largest capacity of a cluster's nodes in bytes, the most packets one of them
/// queues at once, and the packet size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeQueue {
    pub(crate) bytes: u64,
    pub(crate) slots: u64,
    pub(crate) packet: u64,
}

impl NodeQueue {
    /// The bytes a node queue holds of jobs of `bytes` each: its capacity, or fewer when its
    /// packet bound fills first (jobs of a few hundred bytes).
    pub(crate) fn held(&self, bytes: u64) -> u64 {
        self.bytes
            .min(self.slots.saturating_mul(bytes.min(self.packet).max(1)))
    }
}

/// How long a tenant that found more than a node queue of its bytes in flight on the core's
/// path counts as busy ([`TenantState::recently_busy`]).
pub(crate) const BUSY_MEMORY: Duration = Duration::from_secs(1);

/// How many node queues of light credit a tenant may save up ([`TenantState::take_light`]):
/// enough for a burst of small jobs held back by a client's pause to pass by the light path,
/// rather than the part past one node queue waiting in the core. Also how many long jobs a
/// tenant's credit saves.
pub(crate) const LIGHT_DEPTH: u64 = 4;

/// Jobs of its size a tenant may have in flight on the core's path, and more bytes there than
/// on the light path, before it is busy (docs/ALGORITHM.md §15.7).
pub(crate) const CORE_BACKLOG: u64 = 16;

/// The longest job that may take the light path, in node queues (docs/ALGORITHM.md §15.7).
pub(crate) const LONGEST_LIGHT: u64 = 16;

/// One registered tenant.
pub(crate) struct TenantState {
    pub(crate) id: TenantId,
    name: String,
    weight: u32,
    limits: TenantLimits,
    /// Whether any limit is set: only then do jobs entering and leaving take `usage`'s lock
    /// (the in-flight counts change under it), so that a tenant without limits, the default
    /// one included, costs its submitters two atomic additions and no lock.
    limited: bool,
    usage: Mutex<Usage>,
    room: Condvar,
    counters: Counters,
    latency: Histogram,
    /// The light path's credit in bytes and when it was last refilled (see
    /// [`take_light`](Self::take_light)).
    light: Mutex<(f64, Option<Instant>)>,
    /// Bytes of the tenant's jobs in flight that took the light path.
    light_bytes: AtomicU64,
    /// When a job of the tenant last found more than a node queue of its bytes in flight on
    /// the core's path, in nanoseconds since `epoch`, plus one (0: never).
    busy_at: AtomicU64,
    epoch: Instant,
}

impl fmt::Debug for TenantState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantState")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TenantState {
    fn new(id: TenantId, spec: &TenantSpec) -> Self {
        let burst = spec.limits.bytes_per_sec.unwrap_or(0) as f64;
        TenantState {
            id,
            name: spec.name.clone(),
            weight: spec.weight,
            limits: spec.limits,
            limited: spec.limits != TenantLimits::default(),
            usage: Mutex::new(Usage {
                tokens: burst,
                refilled: Instant::now(),
                waiting_bytes: 0,
                blocked: 0,
                wakers: Vec::new(),
                timed: Vec::new(),
            }),
            room: Condvar::new(),
            counters: Counters::new(),
            latency: Histogram::new(),
            light: Mutex::new((0.0, None)),
            busy_at: AtomicU64::new(0),
            epoch: Instant::now(),
            light_bytes: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets a job of `bytes` in if the limits allow, counting it in flight (with `usage`'s
    /// lock held, for a tenant with limits).
    fn try_enter_locked(&self, u: &mut Usage, bytes: u64) -> Result<(), Closed> {
        let l = self.limits;
        let (jobs, in_flight) = self.counters.in_flight();
        if l.jobs_in_flight.is_some_and(|max| jobs >= max) {
            return Err(Closed::InFlight);
        }
        if l.bytes_in_flight
            .is_some_and(|max| jobs > 0 && in_flight.saturating_add(bytes) > max)
        {
            return Err(Closed::InFlight);
        }
        if let Some(rate) = l.bytes_per_sec {
            let now = Instant::now();
            let rate = rate as f64;
            let elapsed = now.duration_since(u.refilled).as_secs_f64();
            u.tokens = (u.tokens + elapsed * rate).min(rate);
            u.refilled = now;
            // A job larger than the bucket enters once the bucket is full.
            let need = (bytes as f64).min(rate);
            if u.tokens < need {
                let wait = (need - u.tokens) / rate;
                return Err(Closed::Rate(Duration::from_secs_f64(wait.max(1e-4))));
            }
            u.tokens -= bytes as f64;
        }
        self.count_in(bytes);
        Ok(())
    }

    fn count_in(&self, bytes: u64) {
        let shard = self.counters.mine();
        shard.jobs_in.fetch_add(1, Relaxed);
        shard.bytes_in.fetch_add(bytes, Relaxed);
    }

    fn count_out(&self, bytes: u64) {
        let shard = self.counters.mine();
        shard.jobs_out.fetch_add(1, Relaxed);
        shard.bytes_out.fetch_add(bytes, Relaxed);
    }

    /// Whether a job of `bytes` may take the light path (docs/ALGORITHM.md §15.7), and if so spends
    /// its allowance: the tenant's bytes in flight on the core's path, this job's included, fit in
    /// a node queue of jobs of its size ([`NodeQueue::held`]: `queue.bytes`, the node's capacity,
    /// or less where the node's packet bound fills first; over it, the tenant is marked
    /// [busy](Self::recently_busy) for [`BUSY_MEMORY`]; so it is, for a job of at most
    /// `queue.bytes`, with more than [`CORE_BACKLOG`] jobs of its size there and more bytes
    /// there than on the light path), and its light credit covers the job. The
    /// credit refills at `rate()` bytes per second (the tenant's weighted share of the cluster's
    /// speed, asked for only past the first test) up to [`LIGHT_DEPTH`] such node queues; it starts
    /// at `queue.bytes`, and after the tenant was busy it is what it was, at most `queue.bytes`,
    /// with nothing saved for the time busy. Counted in `queue.bytes` alone, 1,024
    /// jobs of 128 bytes fit in a node queue that holds 64 packets: a tenant with most of its jobs
    /// waiting in the core was never busy, and a tenant served by the light path saved up half a
    /// megabyte of credit. Being busy within the last second does not itself close the path (it
    /// did: a quiet tenant with a job or two waiting in the core found them there at its next jobs,
    /// was marked busy again each time, and stayed off the path for whole runs; docs/ALGORITHM.md
    /// §15.7). Over any interval the tenant sends at most that depth more than its share this way,
    /// however it sends them. Its light jobs in flight do not count against the first test: a burst
    /// of jobs beyond the credit sends the rest to the core, and those alone keep the next ones off
    /// the light path while they wait there. But while more than `queue.bytes` of them are in
    /// flight the tenant queues on the light path, and its credit saves no more than the job that
    /// asks: served below its share by the light path, a backlogged tenant saved up the whole depth
    /// and then spent it ahead of the jobs waiting in the core, on nodes slow per byte for most of
    /// a second (docs/ALGORITHM.md §15.7).
    ///
    /// A *long* job, larger than `queue.bytes` (the engine lets jobs of up to [`LIGHT_DEPTH`] node
    /// queues try), counts in units of itself rather than of a node queue: the tenant is busy once
    /// more than one other such job is in flight on the core's path; the credit saves up to
    /// [`LIGHT_DEPTH`] such jobs; and the job passes once the credit holds a node queue, leaving
    /// the rest as a debt (at most `bytes - queue.bytes`) that the refill pays first. With a node
    /// queue's units, the first long job of a tenant never passed (the credit starts at
    /// `queue.bytes`), and once one of them waited in the core the next found more than a node
    /// queue there and made the tenant busy for a second: every long job of a quiet tenant then
    /// waited its turns in the core, behind the backlogged tenants' packets.
    pub(crate) fn take_light(
        &self,
        bytes: u64,
        queue: NodeQueue,
        rate: impl FnOnce() -> f64,
    ) -> bool {
        self.take_light_left(bytes, queue, rate).is_some()
    }

    /// [`take_light`](Self::take_light) for a job that, kept off, then asks the light path
    /// itself (a job of a tenant behind on its own light jobs, §15.7): a job kept off is not
    /// counted here, so that it is counted once, there.
    pub(crate) fn take_light_uncounted(
        &self,
        bytes: u64,
        queue: NodeQueue,
        rate: impl FnOnce() -> f64,
    ) -> bool {
        self.light_credit(bytes, queue, rate).is_ok()
    }

    /// [`take_light`](Self::take_light), saying, if the job passes, the credit left after it
    /// (in bytes; below zero a debt): how far below its share the tenant stays, which ranks a
    /// long job's grant in the core (docs/ALGORITHM.md §15.7, long jobs).
    pub(crate) fn take_light_left(
        &self,
        bytes: u64,
        queue: NodeQueue,
        rate: impl FnOnce() -> f64,
    ) -> Option<f64> {
        let kept = self.light_credit(bytes, queue, rate).map_err(|why| {
            let counts = self.counters.mine();
            match why {
                Kept::Busy => &counts.jobs_kept_busy,
                Kept::OverCredit => &counts.jobs_over_credit,
            }
            .fetch_add(1, Relaxed);
        });
        kept.ok()
    }

    /// The light path's tests and credit for a job of `bytes` (see
    /// [`take_light`](Self::take_light)): the credit left after it, or why it is kept off.
    fn light_credit(
        &self,
        bytes: u64,
        queue: NodeQueue,
        rate: impl FnOnce() -> f64,
    ) -> Result<f64, Kept> {
        let burst = queue.bytes;
        let light = self.light_bytes.load(Relaxed);
        // A long job may have one more of its size in the core beside it.
        let limit = if bytes > burst {
            bytes.saturating_mul(2)
        } else {
            queue.held(bytes)
        };
        let core = self.counters.in_flight().1.saturating_sub(light);
        let backlogged =
            bytes <= burst && core > bytes.saturating_mul(CORE_BACKLOG) && core > light;
        if core > limit || backlogged {
            self.busy_at.store(self.stamp(Instant::now()), Relaxed);
            return Err(Kept::Busy);
        }
        let rate = rate();
        // What the refill saves up to: LIGHT_DEPTH node queues (or long jobs of this one's
        // size); while more than a node queue of the tenant's light jobs is in flight (it
        // queues on the light path), only enough for this job to pass.
        let most = if light > burst {
            bytes.min(burst)
        } else {
            queue.held(bytes).max(bytes).saturating_mul(LIGHT_DEPTH)
        } as f64;
        let mut c = self.light.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // From one node queue at first. If the tenant was busy since the last refill, time
        // spent busy saves nothing, and what it had is kept, up to one node queue: raised to a
        // node queue, as it was, a credit spent by a tenant whose small window then filled the
        // core came back whole each time, and the tenant of weight 1 took 0.9 of the bytes.
        c.0 = match c.1 {
            Some(at) if self.stamp(at) >= self.busy_at.load(Relaxed) => {
                let refill = now.duration_since(at).as_secs_f64() * rate;
                // A credit above that (the starting node queue) is spent, not cut.
                (c.0 + refill).min(c.0.max(most))
            }
            Some(_) => c.0.min(burst as f64),
            None => burst as f64,
        };
        c.1 = Some(now);
        // A short job needs credit for all of itself, a long one for a node queue of itself.
        if c.0 < bytes.min(burst) as f64 {
            return Err(Kept::OverCredit);
        }
        c.0 -= bytes as f64;
        Ok(c.0)
    }

    /// Spends `bytes` of the light credit on a job of the tenant admitted to the core's path
    /// (docs/ALGORITHM.md §15.7): every byte the tenant is served, by either path, spends the
    /// credit, which may go below zero, down to [`LIGHT_DEPTH`] node queues of debt that the
    /// refill pays first. With the core's bytes left out, a tenant whose calls past its credit
    /// went to the core was served its share twice, once by its credit and once by the core's
    /// turns: behind the daemons, beside a tenant of weight 1 backlogged in the core, the
    /// tenant of weight 3 had 0.94 of the bytes.
    pub(crate) fn spend_in_core(&self, bytes: u64, queue: NodeQueue) {
        let debt = queue.bytes.saturating_mul(LIGHT_DEPTH) as f64;
        let mut c = self.light.lock().unwrap_or_else(|e| e.into_inner());
        if c.1.is_none() {
            // Not asked for yet: from the starting node queue, as the light path starts it.
            *c = (queue.bytes as f64, Some(Instant::now()));
        }
        c.0 = (c.0 - bytes as f64).max((-debt).min(c.0));
    }

    /// Gives back credit [`take_light`](Self::take_light) spent on a job that was then not
    /// admitted (refused as the cluster was full or shutting down).
    pub(crate) fn refund_light(&self, bytes: u64) {
        let mut c = self.light.lock().unwrap_or_else(|e| e.into_inner());
        c.0 += bytes as f64;
    }

    /// `t` as `busy_at` counts it: nanoseconds since `epoch`, plus one.
    fn stamp(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64 + 1
    }

    /// Whether a job of the tenant found more than a node queue of its bytes in flight on the
    /// core's path within the last [`BUSY_MEMORY`]: a busy tenant, whose jobs do not run on
    /// their submitters beside a stalled node (docs/ALGORITHM.md §15.7). (Its credit saves
    /// nothing for the time since the refill before the busy moment, whenever it asks next.)
    pub(crate) fn recently_busy(&self) -> bool {
        let at = self.busy_at.load(Relaxed);
        at != 0
            && (self.epoch.elapsed().as_nanos() as u64 + 1).saturating_sub(at)
                < BUSY_MEMORY.as_nanos() as u64
    }

    /// Lets a job of `bytes` in now, or says why not.
    pub(crate) fn try_enter(self: &Arc<Self>, bytes: u64) -> Result<Lease, Closed> {
        if !self.limited {
            self.count_in(bytes);
            return Ok(Lease::new(self, bytes));
        }
        let mut u = self.lock();
        self.try_enter_locked(&mut u, bytes)?;
        Ok(Lease::new(self, bytes))
    }

    /// Lets a job of `bytes` in, waiting while a limit holds it and `go_on` says to; `None`
    /// when `go_on` said to stop (the service is shutting down).
    pub(crate) fn enter_blocking(
        self: &Arc<Self>,
        bytes: u64,
        go_on: impl Fn() -> bool,
    ) -> Option<Lease> {
        if !self.limited {
            self.count_in(bytes);
            return Some(Lease::new(self, bytes));
        }
        let mut u = self.lock();
        let mut counted = false;
        let lease = loop {
            let closed = match self.try_enter_locked(&mut u, bytes) {
                Ok(()) => break Some(Lease::new(self, bytes)),
                Err(c) => c,
            };
            if !go_on() {
                break None;
            }
            if !counted {
                u.waiting_bytes += bytes;
                counted = true;
            }
            // A bounded wait, so that a shutdown is noticed without a notification.
            let wait = match closed {
                Closed::Rate(d) => d.min(Duration::from_millis(100)),
                Closed::InFlight => Duration::from_millis(100),
            };
            u.blocked += 1;
            u = self
                .room
                .wait_timeout(u, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            u.blocked -= 1;
        };
        if counted {
            u.waiting_bytes -= bytes;
        }
        lease
    }

    /// Lets a job of `bytes` in now, or registers `waker` to be woken when it may try again
    /// (a job of the tenant finished, or the supervisor's tick for the rate).
    pub(crate) fn enter_or_wake(self: &Arc<Self>, bytes: u64, waker: &Waker) -> Option<Lease> {
        if !self.limited {
            self.count_in(bytes);
            return Some(Lease::new(self, bytes));
        }
        let mut u = self.lock();
        match self.try_enter_locked(&mut u, bytes) {
            Ok(()) => Some(Lease::new(self, bytes)),
            Err(closed) => {
                let list = match closed {
                    Closed::InFlight => &mut u.wakers,
                    Closed::Rate(_) => &mut u.timed,
                };
                if !list.iter().any(|w| w.will_wake(waker)) {
                    list.push(waker.clone());
                }
                None
            }
        }
    }

    /// Counts `bytes` as waiting at the door (`true`) or no longer (`false`), for a future
    /// held by a limit.
    pub(crate) fn waiting(&self, bytes: u64, on: bool) {
        if !self.limited {
            return;
        }
        let mut u = self.lock();
        if on {
            u.waiting_bytes += bytes;
        } else {
            u.waiting_bytes = u.waiting_bytes.saturating_sub(bytes);
        }
    }

    /// Gives back a job's room; returns the wakers to wake once no lock is held.
    fn leave(&self, bytes: u64, refund: bool) -> Vec<Waker> {
        if !self.limited {
            self.count_out(bytes);
            return Vec::new();
        }
        let mut u = self.lock();
        self.count_out(bytes);
        if refund && let Some(rate) = self.limits.bytes_per_sec {
            u.tokens = (u.tokens + bytes as f64).min(rate as f64);
        }
        if u.blocked > 0 {
            self.room.notify_all();
        }
        let mut wakers = std::mem::take(&mut u.wakers);
        if refund {
            wakers.append(&mut u.timed);
        }
        wakers
    }

    /// Wakes the futures held by the rate alone, to try again.
    fn wake_timed(&self) {
        let wakers = std::mem::take(&mut self.lock().timed);
        for w in wakers {
            w.wake();
        }
    }

    /// Counts a job admitted.
    pub(crate) fn admitted(&self, bytes: u64) {
        let shard = self.counters.mine();
        shard.jobs_admitted.fetch_add(1, Relaxed);
        shard.bytes_admitted.fetch_add(bytes, Relaxed);
    }

    /// Counts a job admitted by the light path (counted as admitted too).
    pub(crate) fn took_light(&self) {
        self.counters.mine().jobs_light.fetch_add(1, Relaxed);
    }

    /// Counts a job that went through the core with its bytes granted to the tenant's turns.
    pub(crate) fn took_grant(&self) {
        self.counters.mine().jobs_granted.fetch_add(1, Relaxed);
    }

    /// Counts a job run on its submitter beside a stalled cluster.
    pub(crate) fn ran_inline_stalled(&self) {
        self.counters
            .mine()
            .jobs_inline_stalled
            .fetch_add(1, Relaxed);
    }

    /// Counts a job run on its submitter as the tenant was behind on its own light jobs.
    pub(crate) fn ran_inline_behind(&self) {
        self.counters
            .mine()
            .jobs_inline_behind
            .fetch_add(1, Relaxed);
    }

    /// Counts a job refused.
    pub(crate) fn refused(&self, bytes: u64) {
        self.counters.jobs_refused.fetch_add(1, Relaxed);
        self.counters.bytes_refused.fetch_add(bytes, Relaxed);
    }

    fn metrics(&self) -> TenantMetrics {
        let waiting = self.lock().waiting_bytes;
        let c = &self.counters;
        let (jobs, bytes) = c.in_flight();
        TenantMetrics {
            tenant: self.id,
            name: self.name.clone(),
            weight: self.weight,
            limits: self.limits,
            jobs_admitted: c.sum(|s| &s.jobs_admitted),
            bytes_admitted: c.sum(|s| &s.bytes_admitted),
            jobs_completed: c.sum(|s| &s.jobs_completed),
            bytes_completed: c.sum(|s| &s.bytes_completed),
            bytes_served: c.sum(|s| &s.bytes_served),
            jobs_failed: c.sum(|s| &s.jobs_failed),
            jobs_light: c.sum(|s| &s.jobs_light),
            jobs_granted: c.sum(|s| &s.jobs_granted),
            jobs_kept_busy: c.sum(|s| &s.jobs_kept_busy),
            jobs_over_credit: c.sum(|s| &s.jobs_over_credit),
            jobs_inline_stalled: c.sum(|s| &s.jobs_inline_stalled),
            jobs_inline_behind: c.sum(|s| &s.jobs_inline_behind),
            jobs_refused: c.jobs_refused.load(Relaxed),
            bytes_refused: c.bytes_refused.load(Relaxed),
            jobs_in_flight: jobs,
            bytes_in_flight: bytes,
            bytes_waiting: waiting,
            latency: self.latency.percentiles(),
        }
    }
}

/// A job's room in its tenant's limits, from admission to its end: given back when the job
/// finishes ([`finish`](Lease::finish)), or when the lease is dropped (a job withdrawn before
/// it ran gets its bytes back in the rate bucket too).
pub(crate) struct Lease {
    state: Arc<TenantState>,
    bytes: u64,
    /// Bytes of the job's packets counted as served so far.
    served: u64,
    done: bool,
    /// The job took the light path (docs/ALGORITHM.md §15.7): its bytes count in the
    /// tenant's light bytes in flight too.
    light: bool,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("tenant", &self.state.id)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Lease {
    fn new(state: &Arc<TenantState>, bytes: u64) -> Self {
        Lease {
            state: Arc::clone(state),
            bytes,
            served: 0,
            done: false,
            light: false,
        }
    }

    /// Counts `bytes` of the job served: one of its packets finished with an output.
    pub(crate) fn served(&mut self, bytes: u64) {
        let bytes = bytes.min(self.bytes - self.served);
        self.served += bytes;
        self.state
            .counters
            .mine()
            .bytes_served
            .fetch_add(bytes, Relaxed);
    }

    /// Marks the job as one that took the light path (`on`), or no longer (it finished, or
    /// was handed back): its bytes count in the tenant's light bytes in flight while marked.
    pub(crate) fn set_light(&mut self, on: bool) {
        if self.light != on {
            self.light = on;
            if on {
                self.state.light_bytes.fetch_add(self.bytes, Relaxed);
            } else {
                self.state.light_bytes.fetch_sub(self.bytes, Relaxed);
            }
        }
    }

    /// The job finished (`ok`: with an output) `latency` after its submission: counts it and
    /// its latency, and gives its room back. Returns the wakers to wake once no lock is held.
    #[must_use = "the wakers must be woken"]
    pub(crate) fn finish(mut self, ok: bool, latency: Duration) -> Vec<Waker> {
        let shard = self.state.counters.mine();
        if ok {
            shard.jobs_completed.fetch_add(1, Relaxed);
            shard.bytes_completed.fetch_add(self.bytes, Relaxed);
            // What its packets did not count (a job run whole on the submitting thread).
            shard
                .bytes_served
                .fetch_add(self.bytes - self.served, Relaxed);
        } else {
            shard.jobs_failed.fetch_add(1, Relaxed);
        }
        self.state.latency.record(latency);
        self.done = true;
        // Out of the bytes in flight before out of the light bytes, so that a light job
        // finishing never counts, even for an instant, as in flight on the core's path, where
        // a job of its tenant submitted then would count it towards test 2
        // (docs/ALGORITHM.md §15.7).
        let wakers = self.state.leave(self.bytes, false);
        self.set_light(false);
        wakers
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.done {
            for w in self.state.leave(self.bytes, true) {
                w.wake();
            }
        }
        // After leaving, as in `finish`.
        self.set_light(false);
    }
}

/// Every tenant of a service.
pub(crate) struct Tenants {
    /// The default tenant, also in `by_id`: every job of a service without tenants is its,
    /// so it is found without the lock.
    default: Arc<TenantState>,
    by_id: RwLock<FxHashMap<TenantId, Arc<TenantState>>>,
    /// Whether a tenant other than the default one was ever registered.
    shared: AtomicBool,
    /// The weights of the active tenants, and when they were counted.
    active: Mutex<Active>,
}

/// How long a tenant counts as active in [`Tenants::share`] after it last had a job in flight
/// or let one in.
pub(crate) const ACTIVE_MEMORY: Duration = BUSY_MEMORY;

/// The active tenants' weights, as [`Tenants::share`] last counted them.
#[derive(Default)]
struct Active {
    /// The sum of their weights.
    weights: u64,
    /// When they were counted.
    at: Option<Instant>,
    /// Per tenant seen: its jobs let in by then, and when it was last found active.
    seen: FxHashMap<TenantId, (u64, Instant)>,
}

impl fmt::Debug for Tenants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tenants").finish_non_exhaustive()
    }
}

impl Tenants {
    /// The registry, with the default tenant in it.
    pub(crate) fn new() -> Self {
        let default = Arc::new(TenantState::new(
            TenantId::DEFAULT,
            &TenantSpec::new("default"),
        ));
        let mut by_id = FxHashMap::default();
        by_id.insert(TenantId::DEFAULT, Arc::clone(&default));
        Tenants {
            default,
            by_id: RwLock::new(by_id),
            shared: AtomicBool::new(false),
            active: Mutex::new(Active::default()),
        }
    }

    /// Registers a tenant; returns its id and weight.
    pub(crate) fn add(&self, spec: &TenantSpec) -> Result<TenantId, TenantError> {
        spec.check()?;
        let mut by_id = self.by_id.write().unwrap_or_else(|e| e.into_inner());
        if by_id.values().any(|t| t.name == spec.name) {
            return Err(TenantError::Duplicate(spec.name.clone()));
        }
        let next = by_id.keys().map(|t| t.0).max().unwrap_or(0);
        let id = TenantId(next.checked_add(1).ok_or(TenantError::TooMany)?);
        by_id.insert(id, Arc::new(TenantState::new(id, spec)));
        self.shared.store(true, Relaxed);
        Ok(id)
    }

    /// Whether the service is shared: a tenant other than the default one was registered.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.load(Relaxed)
    }

    /// `tenant`'s weighted share of the service among the *active* tenants (itself included):
    /// those with jobs in flight, or that let one in, within the last [`ACTIVE_MEMORY`]. The
    /// sum of their weights is recounted at most once a millisecond; a tenant that let a job
    /// in between two counts is found by its count of jobs let in.
    ///
    /// Counted at the instant alone, as it was, a quiet tenant sending a job every few
    /// milliseconds was rarely in flight at a count, and a noisy tenant beside it had a share
    /// of 1: its light credit covered all it sent, its small jobs all took the light path, and
    /// the quiet tenant's light jobs waited behind them (behind the daemons with calls of
    /// 1 and 2 KiB, nearly all of the noisy tenant's calls went by the light path, and the
    /// quiet tenant's p99 was 1.5–2 times its p99 alone; docs/RESULTS.md, Tenants, "Small
    /// calls").
    pub(crate) fn share(&self, tenant: &TenantState) -> f64 {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if active
            .at
            .is_none_or(|at| now.duration_since(at) > Duration::from_millis(1))
        {
            let by_id = self.by_id.read().unwrap_or_else(|e| e.into_inner());
            let Active { weights, at, seen } = &mut *active;
            *weights = 0;
            for t in by_id.values() {
                let entered = t.counters.sum(|s| &s.jobs_in);
                let last = seen.entry(t.id).or_insert((entered, now));
                if entered != last.0 || t.counters.in_flight().0 > 0 {
                    *last = (entered, now);
                }
                if entered > 0 && now.duration_since(last.1) < ACTIVE_MEMORY {
                    *weights += u64::from(t.weight);
                }
            }
            *at = Some(now);
        }
        let weight = u64::from(tenant.weight);
        // The tenant asking is active; a recount before it entered may have missed it.
        weight as f64 / active.weights.max(weight).max(1) as f64
    }

    /// The tenant `id`, if registered.
    pub(crate) fn get(&self, id: TenantId) -> Option<Arc<TenantState>> {
        if id == TenantId::DEFAULT {
            return Some(Arc::clone(&self.default));
        }
        self.by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    /// The tenant named `name`, if registered.
    pub(crate) fn find(&self, name: &str) -> Option<TenantId> {
        self.by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|t| t.name == name)
            .map(|t| t.id)
    }

    /// Every tenant's counters, by id.
    pub(crate) fn metrics(&self) -> Vec<TenantMetrics> {
        let mut out: Vec<TenantMetrics> = self
            .by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|t| t.metrics())
            .collect();
        out.sort_by_key(|m| m.tenant);
        out
    }

    /// Wakes the futures held by a rate limit, to try again (the supervisor's tick).
    pub(crate) fn wake_timed(&self) {
        let all: Vec<Arc<TenantState>> = self
            .by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|t| t.limits.bytes_per_sec.is_some())
            .cloned()
            .collect();
        for t in all {
            t.wake_timed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(spec: TenantSpec) -> Arc<TenantState> {
        Arc::new(TenantState::new(TenantId(1), &spec))
    }

    /// A node queue of `bytes` that holds up to 64 packets of up to 1000 bytes.
    fn q(bytes: u64) -> NodeQueue {
        NodeQueue {
            bytes,
            slots: 64,
            packet: 1000,
        }
    }

    #[test]
    fn a_tenant_over_a_node_queue_is_busy_and_off_the_light_path_while_over() {
        let t = state(TenantSpec::new("a"));
        let rate = || 1e9;
        // Nothing in flight: light, and not busy.
        assert!(t.take_light(100, q(1000), rate));
        assert!(!t.recently_busy());
        // More than a node queue in flight on the core's path: not light, and busy from now.
        let a = t.try_enter(1200).unwrap();
        assert!(!t.take_light(100, q(1000), rate));
        assert!(!t.take_light(100, q(1000), rate));
        assert!(t.recently_busy());
        // Back under: light again on the credit it had (900 bytes; time spent busy saves
        // nothing), and busy for a while yet for what else asks (no run on the submitter
        // beside a stalled node). Were the
        // light path closed for that while too, a quiet tenant with a job or two waiting in
        // the core would find them there at its next jobs and stay off it for good.
        drop(a);
        assert!(t.take_light(100, q(1000), || 0.0));
        assert!(t.recently_busy());
        let more = (0..20)
            .filter(|_| t.take_light(100, q(1000), || 0.0))
            .count();
        assert_eq!(more, 8);
        // The metrics say why: two jobs kept off as busy, twelve for want of credit.
        let m = t.metrics();
        assert_eq!((m.jobs_kept_busy, m.jobs_over_credit), (2, 12));
    }

    #[test]
    fn a_busy_moment_gives_no_spent_credit_back() {
        let t = state(TenantSpec::new("a"));
        // The starting node queue spent: ten jobs of 100 bytes.
        assert_eq!(saved(&t), 10);
        // Its next jobs wait in the core, more than a node queue of them: busy.
        let a = t.try_enter(1200).unwrap();
        assert!(!t.take_light(100, q(1000), || 0.0));
        assert!(t.recently_busy());
        // Served, it is back under, with no credit: nothing was saved while it was busy, and
        // what it had spent does not come back (it did, a node queue's worth after each busy
        // moment, and a tenant of weight 1 with a small window took 0.9 of the bytes).
        drop(a);
        assert_eq!(saved(&t), 0);
    }

    #[test]
    fn a_job_in_the_core_spends_the_light_credit_down_to_a_bounded_debt() {
        // A job served by the core spends the credit as a light one does: of the starting
        // node queue (1000 bytes), 600 spent in the core leave four light jobs of 100.
        let t = state(TenantSpec::new("a"));
        t.spend_in_core(600, q(1000));
        assert_eq!(saved(&t), 4);
        // Past zero it is a debt the refill pays first, at most LIGHT_DEPTH node queues.
        let d = state(TenantSpec::new("d"));
        d.spend_in_core(1_000_000, q(1000));
        let debt = d.light.lock().unwrap().0;
        assert_eq!(debt, -((LIGHT_DEPTH * 1000) as f64));
        assert!(!d.take_light(100, q(1000), || 0.0));
        // A debt already deeper (from a larger node queue) is not raised by spending more.
        let e = state(TenantSpec::new("e"));
        e.spend_in_core(1_000_000, q(4000));
        e.spend_in_core(100, q(1000));
        assert_eq!(e.light.lock().unwrap().0, -((LIGHT_DEPTH * 4000) as f64));
    }

    #[test]
    fn a_job_the_credit_does_not_cover_is_counted_as_over_credit() {
        let t = state(TenantSpec::new("a"));
        // The credit starts at one node queue: ten jobs of 100 bytes, then none without a
        // refill, and the tenant is not busy.
        let passed = (0..12)
            .filter(|_| t.take_light(100, q(1000), || 0.0))
            .count();
        assert_eq!(passed, 10);
        assert!(!t.recently_busy());
        let m = t.metrics();
        assert_eq!((m.jobs_kept_busy, m.jobs_over_credit), (0, 2));
        // Asked without counting (the job then asks the light path, which counts it), the
        // tests and the credit are the same, and the counts do not move.
        assert!(!t.take_light_uncounted(100, q(1000), || 0.0));
        let m = t.metrics();
        assert_eq!((m.jobs_kept_busy, m.jobs_over_credit), (0, 2));
        let quiet = state(TenantSpec::new("quiet"));
        assert!(quiet.take_light_uncounted(600, q(1000), || 0.0));
        assert!(
            !quiet.take_light(600, q(1000), || 0.0),
            "the credit was spent"
        );
        assert_eq!(quiet.metrics().jobs_over_credit, 1);
    }

    #[test]
    fn a_long_job_counts_in_units_of_itself_on_the_light_path() {
        // Node queues of 1000 bytes, jobs of 3000 (the engine lets up to LIGHT_DEPTH of them
        // try). The first passes on the starting credit of one node queue, leaving a debt.
        let t = state(TenantSpec::new("long"));
        let a = t.try_enter(3000).unwrap();
        assert_eq!(t.take_light_left(3000, q(1000), || 0.0), Some(-2000.0));
        // The debt keeps the next one off (no refill); one such job in flight besides it
        // does not make the tenant busy, two do.
        let b = t.try_enter(3000).unwrap();
        assert!(!t.take_light(3000, q(1000), || 0.0));
        assert!(!t.recently_busy());
        let c = t.try_enter(3000).unwrap();
        assert!(!t.take_light(3000, q(1000), || 0.0));
        assert!(t.recently_busy());
        drop((a, b, c));

        // A tenant not busy saves up LIGHT_DEPTH such jobs, and a job passes once the credit
        // holds a node queue.
        let quiet = state(TenantSpec::new("quiet"));
        assert!(quiet.take_light(3000, q(1000), || 0.0));
        std::thread::sleep(Duration::from_millis(2));
        // Full, the credit holds LIGHT_DEPTH jobs; the one that passes leaves the rest, by
        // which the grant of a job too long for the path is ranked.
        let left = (LIGHT_DEPTH - 1) as f64 * 3000.0;
        assert_eq!(quiet.take_light_left(3000, q(1000), || 1e12), Some(left));
        let more = (0..10)
            .take_while(|_| quiet.take_light(3000, q(1000), || 0.0))
            .count();
        assert_eq!(more + 1, LIGHT_DEPTH as usize);
        // Short jobs still need credit for all of themselves, and save node queues.
        assert!(!quiet.take_light(100, q(1000), || 0.0));
    }

    /// The light jobs of 100 bytes (node queues of 1000) that the credit covers once it stops
    /// refilling.
    fn saved(t: &TenantState) -> usize {
        (0..100)
            .take_while(|_| t.take_light(100, q(1000), || 0.0))
            .count()
    }

    #[test]
    fn a_tenant_not_busy_saves_up_a_few_node_queues_of_light_credit() {
        let quiet = state(TenantSpec::new("quiet"));
        // It starts at one node queue, then saves up to LIGHT_DEPTH of them.
        assert_eq!(saved(&quiet), 10);
        std::thread::sleep(Duration::from_millis(2));
        assert!(quiet.take_light(100, q(1000), || 1e12));
        assert_eq!(saved(&quiet), LIGHT_DEPTH as usize * 10 - 1);
        // A busy tenant takes none while over a node queue on the core's path, and saves
        // nothing: back under, however long it was over, its credit is what it had (900
        // bytes), at most one node queue.
        let busy = state(TenantSpec::new("busy"));
        assert!(busy.take_light(100, q(1000), || 1e12));
        let lease = busy.try_enter(1200).unwrap();
        assert!(!busy.take_light(100, q(1000), || 1e12));
        std::thread::sleep(Duration::from_millis(2));
        assert!(!busy.take_light(100, q(1000), || 1e12));
        drop(lease);
        assert!(busy.take_light(100, q(1000), || 0.0));
        assert_eq!(saved(&busy), 10 - 2);
    }

    #[test]
    fn for_short_jobs_a_node_queue_is_as_many_as_its_packet_bound() {
        // A node queue of 1000 bytes holds 64 packets: 640 bytes of jobs of 10.
        let t = state(TenantSpec::new("short jobs"));
        assert_eq!(q(1000).held(10), 640);
        // With more of its bytes on the light path than on the core's, 64 such jobs on the
        // core's path: not busy; 65, busy, though within 1000 bytes.
        let light: Vec<Lease> = (0..70)
            .map(|_| {
                let mut l = t.try_enter(10).unwrap();
                l.set_light(true);
                l
            })
            .collect();
        let mut core: Vec<Lease> = (0..64).map(|_| t.try_enter(10).unwrap()).collect();
        assert!(t.take_light(10, q(1000), || 0.0));
        assert!(!t.recently_busy());
        core.push(t.try_enter(10).unwrap());
        assert!(!t.take_light(10, q(1000), || 0.0));
        assert!(t.recently_busy());
        drop((core, light));
        // With more on the core's path than on the light path, CORE_BACKLOG such jobs there:
        // not busy; one more, busy (backlogged in the core).
        let t = state(TenantSpec::new("short jobs, backlogged"));
        let mut core: Vec<Lease> = (0..CORE_BACKLOG)
            .map(|_| t.try_enter(10).unwrap())
            .collect();
        assert!(t.take_light(10, q(1000), || 0.0));
        assert!(!t.recently_busy());
        core.push(t.try_enter(10).unwrap());
        assert!(!t.take_light(10, q(1000), || 0.0));
        assert!(t.recently_busy());
        drop(core);
        // Not busy, the credit saves up LIGHT_DEPTH node queues of such jobs (4 × 640 bytes),
        // not of the node's capacity in bytes (4 × 1000).
        let t = state(TenantSpec::new("short jobs, saving"));
        let spend = |t: &TenantState| {
            (0..1000)
                .take_while(|_| t.take_light(10, q(1000), || 0.0))
                .count()
        };
        assert_eq!(spend(&t), 100, "it starts at one node queue of bytes");
        std::thread::sleep(Duration::from_millis(2));
        assert!(t.take_light(10, q(1000), || 1e12));
        assert_eq!(spend(&t), LIGHT_DEPTH as usize * 64 - 1);
    }

    #[test]
    fn a_tenant_queuing_on_the_light_path_saves_no_light_credit() {
        let t = state(TenantSpec::new("queuing"));
        // More than a node queue of its light jobs in flight (1200 bytes of 1000): its
        // credit refills, and it passes a job as the refill covers one, but it saves up none.
        let mut lease = t.try_enter(1200).unwrap();
        lease.set_light(true);
        assert_eq!(saved(&t), 10, "the starting node queue is spent as before");
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.take_light(100, q(1000), || 1e9));
        assert_eq!(
            saved(&t),
            0,
            "it saved one job, not LIGHT_DEPTH node queues"
        );
        // Back at a node queue or less, it saves up again.
        lease.set_light(false);
        drop(lease);
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.take_light(100, q(1000), || 1e9));
        assert_eq!(saved(&t), LIGHT_DEPTH as usize * 10 - 1);
    }

    #[test]
    fn jobs_in_flight_are_bounded_and_given_back() {
        let t = state(TenantSpec::new("a").max_jobs_in_flight(2));
        let a = t.try_enter(10).unwrap();
        let b = t.try_enter(10).unwrap();
        assert_eq!(t.try_enter(10).unwrap_err(), Closed::InFlight);
        drop(a.finish(true, Duration::from_micros(5)));
        let c = t.try_enter(10).unwrap();
        drop((b, c));
        let m = t.metrics();
        assert_eq!((m.jobs_in_flight, m.bytes_in_flight), (0, 0));
        assert_eq!((m.jobs_completed, m.bytes_completed), (1, 10));
        assert!(m.latency.is_some());
    }

    #[test]
    fn a_job_larger_than_the_bytes_limit_enters_alone() {
        let t = state(TenantSpec::new("a").max_bytes_in_flight(100));
        let big = t.try_enter(1000).unwrap();
        assert!(
            t.try_enter(1).is_err(),
            "nothing more while the big one runs"
        );
        drop(big);
        let a = t.try_enter(60).unwrap();
        assert!(t.try_enter(41).is_err());
        let b = t.try_enter(40).unwrap();
        drop((a, b));
    }

    #[test]
    fn the_rate_bucket_holds_one_second() {
        let t = state(TenantSpec::new("a").max_bytes_per_sec(1000));
        let a = t.try_enter(600).unwrap();
        let b = t.try_enter(400).unwrap();
        match t.try_enter(500) {
            Err(Closed::Rate(d)) => assert!(d <= Duration::from_millis(500) && !d.is_zero()),
            other => panic!("{other:?}"),
        }
        drop(a.finish(true, Duration::from_micros(5)));
        drop(b.finish(true, Duration::from_micros(5)));
        // A finished job's bytes stay spent; a withdrawn one's come back.
        assert!(t.try_enter(500).is_err());
        std::thread::sleep(Duration::from_millis(600));
        let c = t.try_enter(500).unwrap();
        drop(c);
        assert!(
            t.try_enter(500).is_ok(),
            "the withdrawn job's bytes came back"
        );
    }

    #[test]
    fn histogram_buckets_bound_the_value_within_a_ninth() {
        for ns in [
            8u64,
            9,
            15,
            16,
            17,
            1000,
            12_345,
            999_999,
            1 << 40,
            u64::MAX,
        ] {
            let i = Histogram::index(ns);
            let upper = Histogram::upper(i);
            assert!(upper >= ns, "{ns}: bucket tops at {upper}");
            assert!(upper as f64 <= ns as f64 * 1.125, "{ns}: {upper}");
        }
        // Below 8 ns, the first bucket.
        for ns in [0u64, 1, 7] {
            assert_eq!(Histogram::upper(Histogram::index(ns)), 8);
        }
        let h = Histogram::new();
        for us in 1..=100 {
            h.record(Duration::from_micros(us));
        }
        let [p50, _, p99, _] = h.percentiles().unwrap();
        assert!(p50 >= Duration::from_micros(50) && p50 <= Duration::from_micros(57));
        assert!(p99 >= Duration::from_micros(99) && p99 <= Duration::from_micros(112));
    }

    #[test]
    fn a_tenant_that_sent_a_job_lately_counts_in_the_shares() {
        let tenants = Tenants::new();
        let quiet = tenants.get(tenants.add(&TenantSpec::new("quiet")).unwrap());
        let noisy = tenants.add(&TenantSpec::new("noisy").weight(3)).unwrap();
        let (quiet, noisy) = (quiet.unwrap(), tenants.get(noisy).unwrap());
        // Alone, the noisy tenant has the whole service.
        let held = noisy.try_enter(100).unwrap();
        assert_eq!(tenants.share(&noisy), 1.0);
        // The quiet tenant sends a job, done before the next count: it was never in flight
        // when counted, but it is active, and the noisy tenant's share is its weight's.
        drop(quiet.try_enter(100).unwrap());
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(tenants.share(&noisy), 0.75);
        assert_eq!(tenants.share(&quiet), 0.25);
        drop(held);
    }

    #[test]
    fn names_are_checked_and_unique() {
        let tenants = Tenants::new();
        assert_eq!(
            tenants.add(&TenantSpec::new("default")),
            Err(TenantError::Duplicate("default".into()))
        );
        assert_eq!(
            tenants.add(&TenantSpec::new("a b")),
            Err(TenantError::BadName)
        );
        assert_eq!(tenants.add(&TenantSpec::new("")), Err(TenantError::BadName));
        assert_eq!(
            tenants.add(&TenantSpec::new("x").weight(0)),
            Err(TenantError::ZeroWeight)
        );
        assert_eq!(
            tenants.add(&TenantSpec::new("x").max_jobs_in_flight(0)),
            Err(TenantError::ZeroLimit("max_jobs_in_flight"))
        );
        let a = tenants.add(&TenantSpec::new("team-a")).unwrap();
        assert_eq!(a, TenantId(1));
        assert_eq!(tenants.find("team-a"), Some(a));
        assert_eq!(tenants.metrics().len(), 2);
    }
}
