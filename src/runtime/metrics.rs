//! Counters and the snapshot API.
//!
//! Each worker owns its node's counters: it keeps running totals locally and publishes them with
//! relaxed stores into a cache-line-padded block (as tokio's `WorkerMetrics`), so counting costs
//! no shared writes on the hot path. Queue depths and unit times live in the scheduler core,
//! under its cluster's lock; whoever holds that lock publishes them to gauges (relaxed atomic
//! stores) before releasing it, and a snapshot reads the gauges, so taking one waits for no lock.

use std::fmt;
use std::sync::atomic::{
    AtomicU32, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::crypto::ImplChoice;
use crate::packet::{Cmd, NodeId, UnitTimes};
use crate::runtime::context::{self, SHARDS};
use crate::runtime::ids::ClusterKind;
use crate::runtime::tenant::TenantMetrics;

/// Per-node counters, written by the node's worker only.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct NodeCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    busy_ns: AtomicU64,
    panics: AtomicU64,
    out_of_place: AtomicU64,
    retry_copies: AtomicU64,
}

/// The worker's local totals, published after every packet.
#[derive(Debug, Default)]
pub(crate) struct LocalCounters {
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
    pub(crate) busy_ns: u64,
    pub(crate) panics: u64,
    /// Packets run out of place, their input kept as they are for a retry.
    pub(crate) out_of_place: u64,
    /// Packets whose input was copied for a retry before they ran.
    pub(crate) retry_copies: u64,
    /// The node's recent pace (kept by the worker, published to its [`NodeGauges`]).
    pub(crate) pace: Pace,
}

/// A node's recent pace: the bytes it served per second of its busy time, over its last
/// [`PACE_WINDOW`] of busy time or so (each set's bytes and time weigh less the more busy
/// time came after them), lane sets and sets of one stream alike. Where lane sets fill,
/// several times a single stream's speed; where one stream runs alone, its speed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pace {
    bytes: f64,
    secs: f64,
}

/// The busy time over which a [`Pace`] forgets.
const PACE_WINDOW: Duration = Duration::from_millis(100);

impl Pace {
    /// Counts a set of `bytes` that kept the node busy for `busy`.
    pub(crate) fn observe(&mut self, bytes: u64, busy: Duration) {
        let t = busy.as_secs_f64();
        let keep = (-t / PACE_WINDOW.as_secs_f64()).exp();
        self.bytes = self.bytes * keep + bytes as f64;
        self.secs = self.secs * keep + t;
    }

    /// Bytes per second of busy time (0 before a set was counted).
    pub(crate) fn bytes_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.bytes / self.secs
        } else {
            0.0
        }
    }
}

impl NodeCounters {
    pub(crate) fn publish(&self, local: &LocalCounters) {
        self.packets.store(local.packets, Relaxed);
        self.bytes.store(local.bytes, Relaxed);
        self.busy_ns.store(local.busy_ns, Relaxed);
        self.panics.store(local.panics, Relaxed);
        self.out_of_place.store(local.out_of_place, Relaxed);
        self.retry_copies.store(local.retry_copies, Relaxed);
    }

    /// The totals last published.
    pub(crate) fn read(&self) -> LocalCounters {
        LocalCounters {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            busy_ns: self.busy_ns.load(Relaxed),
            panics: self.panics.load(Relaxed),
            out_of_place: self.out_of_place.load(Relaxed),
            retry_copies: self.retry_copies.load(Relaxed),
            pace: Pace::default(),
        }
    }
}

/// Service-wide job counters.
#[derive(Debug, Default)]
pub(crate) struct ServiceCounters {
    submitted: CachePadded<AtomicU64>,
    completed: CachePadded<AtomicU64>,
    failed: CachePadded<AtomicU64>,
    packets_admitted: CachePadded<AtomicU64>,
    packets_completed: CachePadded<AtomicU64>,
    packets_failed: CachePadded<AtomicU64>,
    /// Packets run again after their node failed, and packets that failed with their node
    /// after their last attempt.
    retried: AtomicU64,
    out_of_attempts: AtomicU64,
    /// Jobs that took the light path (docs/ALGORITHM.md §15.7).
    light: AtomicU64,
    /// Jobs run on submitting threads because their nodes were stalled (§15.7).
    inline_stalled: AtomicU64,
    /// Jobs run on submitting threads because their tenants were behind on their own light
    /// jobs (§15.7).
    inline_behind: AtomicU64,
    /// Jobs run on submitting threads: one shard per thread slot, so that submitting threads
    /// running small jobs do not write one cache line by turns.
    inline: [CachePadded<InlineShard>; SHARDS],
}

/// One shard of the inline job counts: jobs run, and how many of them failed.
#[derive(Debug, Default)]
struct InlineShard {
    jobs: AtomicU64,
    failed: AtomicU64,
}

impl ServiceCounters {
    /// Jobs submitted, completed and failed so far, those run inline included.
    pub(crate) fn jobs(&self) -> (u64, u64, u64) {
        let (jobs, failed) = self.inline_totals();
        (
            self.submitted.load(Relaxed) + jobs,
            self.completed.load(Relaxed) + (jobs - failed),
            self.failed.load(Relaxed) + failed,
        )
    }

    pub(crate) fn job_submitted(&self) {
        self.submitted.fetch_add(1, Relaxed);
    }

    /// A job counted as submitted was refused after all.
    pub(crate) fn job_withdrawn(&self) {
        self.submitted.fetch_sub(1, Relaxed);
    }

    /// Packets admitted, completed and failed so far; a job run inline counts as one packet.
    pub(crate) fn packets(&self) -> (u64, u64, u64) {
        let (jobs, failed) = self.inline_totals();
        (
            self.packets_admitted.load(Relaxed) + jobs,
            self.packets_completed.load(Relaxed) + (jobs - failed),
            self.packets_failed.load(Relaxed) + failed,
        )
    }

    pub(crate) fn packets_admitted(&self, n: u64) {
        self.packets_admitted.fetch_add(n, Relaxed);
    }

    /// Jobs run on submitting threads so far, and how many of them failed. Jobs are counted
    /// before their failures (see `jobs_inline`) and read after them, so a reader never sees
    /// more failures than jobs.
    fn inline_totals(&self) -> (u64, u64) {
        let failed: u64 = self.inline.iter().map(|s| s.failed.load(Acquire)).sum();
        let jobs: u64 = self.inline.iter().map(|s| s.jobs.load(Acquire)).sum();
        (jobs, failed)
    }

    /// Jobs run on submitting threads so far.
    pub(crate) fn inline(&self) -> u64 {
        self.inline_totals().0
    }

    /// `jobs` jobs ran on this (submitting) thread, `failed` of them with an error: counted
    /// as submitted and finished, each as one packet admitted and resolved.
    pub(crate) fn jobs_inline(&self, jobs: u64, failed: u64) {
        let shard = &self.inline[context::shard()];
        shard.jobs.fetch_add(jobs, Release);
        if failed > 0 {
            shard.failed.fetch_add(failed, Release);
        }
    }

    /// A job ran on its submitting thread because its cluster's nodes were stalled (counted
    /// after [`jobs_inline`](Self::jobs_inline) counted it).
    pub(crate) fn job_inline_stalled(&self) {
        self.inline_stalled.fetch_add(1, Relaxed);
    }

    /// Jobs run on their submitting threads because their nodes were stalled, so far.
    pub(crate) fn inline_stalled(&self) -> u64 {
        self.inline_stalled.load(Relaxed)
    }

    /// A job ran on its submitting thread because its tenant was behind on its own light
    /// jobs (counted after [`jobs_inline`](Self::jobs_inline) counted it).
    pub(crate) fn job_inline_behind(&self) {
        self.inline_behind.fetch_add(1, Relaxed);
    }

    /// Jobs run on their submitting threads because their tenants were behind, so far.
    pub(crate) fn inline_behind(&self) -> u64 {
        self.inline_behind.load(Relaxed)
    }

    /// A job took the light path.
    pub(crate) fn job_light(&self) {
        self.light.fetch_add(1, Relaxed);
    }

    /// Jobs that took the light path so far.
    pub(crate) fn light(&self) -> u64 {
        self.light.load(Relaxed)
    }

    /// A node failed while running packets: `retried` of them run again elsewhere, and
    /// `out_of_attempts` fail their jobs.
    pub(crate) fn node_failed_running(&self, retried: u64, out_of_attempts: u64) {
        self.retried.fetch_add(retried, Relaxed);
        self.out_of_attempts.fetch_add(out_of_attempts, Relaxed);
    }

    /// Packets run again, and packets failed after their last attempt.
    pub(crate) fn retries(&self) -> (u64, u64) {
        (
            self.retried.load(Relaxed),
            self.out_of_attempts.load(Relaxed),
        )
    }

    /// A packet resolved: its result delivered, or its failure.
    pub(crate) fn packet_resolved(&self, ok: bool) {
        if ok {
            self.packets_completed.fetch_add(1, Relaxed);
        } else {
            self.packets_failed.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn job_finished(&self, ok: bool) {
        if ok {
            self.completed.fetch_add(1, Relaxed);
        } else {
            self.failed.fetch_add(1, Relaxed);
        }
    }
}

/// A snapshot of a service's counters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Metrics {
    /// Every node, by [`NodeId`].
    pub nodes: Vec<NodeMetrics>,
    /// Every cluster.
    pub clusters: Vec<ClusterMetrics>,
    /// Jobs accepted by `submit`, `try_submit`, or a stream's `push`/`finish` (one per chunk).
    pub jobs_submitted: u64,
    /// Jobs finished with an output.
    pub jobs_completed: u64,
    /// Jobs finished with an error.
    pub jobs_failed: u64,
    /// Packets admitted (every job's packets, streams' chunks included).
    pub packets_admitted: u64,
    /// Packets whose result was delivered.
    pub packets_completed: u64,
    /// Packets that failed: an error from the cipher, a failed node, a cluster with no node up.
    /// Once the service is idle, `packets_completed + packets_failed == packets_admitted`.
    pub packets_failed: u64,
    /// Jobs the submitting thread ran itself, being too small to be worth a hand-off to a
    /// node ([`ServiceBuilder::inline_limit`](crate::runtime::ServiceBuilder::inline_limit));
    /// counted in `jobs_submitted` and their packets in `packets_admitted` too.
    pub jobs_inline: u64,
    /// Of `jobs_inline`, the jobs of one packet run on the submitting thread, whatever their
    /// length, because every node of their cluster had left its light packets waiting, none
    /// taken, for longer than a running node does: its thread was not running
    /// ([`ServiceBuilder::light_path`](crate::runtime::ServiceBuilder::light_path)).
    pub jobs_inline_stalled: u64,
    /// Of `jobs_inline`, the jobs of one packet run on the submitting thread, whatever their
    /// length, because every node of their cluster already held a set of their tenant's light
    /// packets: the tenant was behind on its own light jobs, and this one would have waited
    /// for that set ([`ServiceBuilder::light_path`](crate::runtime::ServiceBuilder::light_path)).
    pub jobs_inline_behind: u64,
    /// Jobs that took the light path: put in their node's light queue and run at its next
    /// pause ([`ServiceBuilder::light_path`](crate::runtime::ServiceBuilder::light_path));
    /// counted in `jobs_submitted` too.
    pub jobs_light: u64,
    /// Packets run again on another node because the node running them was taken out (its
    /// worker panicked or exited, or it stalled): each rerun counts once
    /// ([`ServiceBuilder::max_attempts`](crate::runtime::ServiceBuilder::max_attempts)). A
    /// rerun packet is admitted once, so it is not in `packets_admitted` twice.
    pub packets_retried: u64,
    /// Packets whose node was taken out while running them on their last attempt: their jobs
    /// failed with [`JobError::NodeFailed`](crate::runtime::JobError::NodeFailed) (counted in
    /// `packets_failed` too).
    pub packets_out_of_attempts: u64,
    /// Keys registered.
    pub keys: usize,
    /// Chaining states in the state store: about one per chained job or stream between two
    /// of its packets (the state that started a packet stays until the packet is delivered).
    pub stored_states: usize,
    /// Every tenant, by id, the default tenant first.
    pub tenants: Vec<TenantMetrics>,
    /// Which implementation each AES operation runs on, and the measured time per byte it was
    /// chosen by ([`ImplTable`](crate::crypto::ImplTable); the same on every AES node). An
    /// operation is measured the first time a job of it is submitted, and listed from then on
    /// (every operation, when the implementation is pinned).
    pub aes_implementations: Vec<ImplChoice>,
}

impl Metrics {
    /// The nodes of the cluster of `kind`, in node order.
    pub fn nodes_of(&self, kind: ClusterKind) -> impl Iterator<Item = &NodeMetrics> {
        self.nodes.iter().filter(move |n| n.cluster == kind)
    }
}

/// One node's counters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NodeMetrics {
    /// The node.
    pub node: NodeId,
    /// Its cluster.
    pub cluster: ClusterKind,
    /// The core it is pinned to, if any.
    pub core: Option<usize>,
    /// Its emulated slowdown factor (1 = none).
    pub slowdown: f64,
    /// Packets it has run.
    pub packets: u64,
    /// Bytes it has run.
    pub bytes: u64,
    /// Time spent running packets (including emulated slowdown).
    pub busy: Duration,
    /// Packets placed on it and not yet complete (the one in service included). A packet
    /// counts as complete once the node reports it to the engine, on its next trip for work
    /// just after it delivers the result: this gauge can lag a job's handle by that trip.
    pub queue_depth: u32,
    /// Bytes placed on it and not yet complete.
    pub queued_bytes: u64,
    /// Panics caught while running packets.
    pub panics: u64,
    /// Packets it ran out of place, from their input into a buffer of its own, the input kept
    /// as it is in case the packet must run again on another node
    /// ([`ServiceBuilder::out_of_place`](crate::runtime::ServiceBuilder::out_of_place)).
    pub out_of_place: u64,
    /// Packets whose input it copied before running them in place, in case they must run
    /// again on another node: those of implementations that run in place only (padded final
    /// packets among them, but for the lanes'), and every packet with `out_of_place` off. A
    /// node alone in its cluster, or a service of `max_attempts(1)`, keeps nothing and counts
    /// neither.
    pub retry_copies: u64,
    /// Whether the node is up or down (failed, and not back yet).
    pub state: NodeState,
    /// Times the node failed: its worker panicked outside a packet's cryptography, exited, or
    /// stalled.
    pub failures: u64,
    /// Of the failures, stalls (a packet running past the stall timeout).
    pub stalls: u64,
    /// Times the node's worker thread was started again after a failure.
    pub restarts: u64,
    /// The scheduler's unit-time estimates: nanoseconds per packet of the configured packet
    /// size, per command (calibrated at start-up, refined from measured service times).
    pub unit_times: UnitTimes,
}

/// One node's view in the scheduler core, as last published by its cluster's lock holder.
#[derive(Debug, Default)]
pub(crate) struct NodeGauges {
    queue_depth: AtomicU32,
    queued_bytes: AtomicU64,
    /// Per command, the bits of the unit time.
    unit_times: [AtomicU64; 4],
    /// The bits of the node's [`Pace`], in bytes per second of busy time.
    pace: AtomicU64,
}

impl NodeGauges {
    /// Publishes the node's queue (packets and bytes placed on it and not yet complete).
    pub(crate) fn set_queue(&self, packets: u32, bytes: u64) {
        self.queue_depth.store(packets, Relaxed);
        self.queued_bytes.store(bytes, Relaxed);
    }

    /// Publishes one unit time.
    pub(crate) fn set_unit_time(&self, cmd: Cmd, t: f64) {
        self.unit_times[cmd.index()].store(t.to_bits(), Relaxed);
    }

    /// Publishes the node's pace (its worker's [`Pace`]).
    pub(crate) fn set_pace(&self, pace: &Pace) {
        self.pace.store(pace.bytes_per_sec().to_bits(), Relaxed);
    }

    /// The node's last published pace, in bytes per second of busy time (0: none yet).
    pub(crate) fn pace(&self) -> f64 {
        f64::from_bits(self.pace.load(Relaxed))
    }

    /// The last published queue depth, in packets and bytes.
    pub(crate) fn queue(&self) -> (u32, u64) {
        (
            self.queue_depth.load(Relaxed),
            self.queued_bytes.load(Relaxed),
        )
    }

    /// The last published unit times.
    pub(crate) fn unit_times(&self) -> UnitTimes {
        UnitTimes(std::array::from_fn(|i| {
            f64::from_bits(self.unit_times[i].load(Relaxed))
        }))
    }
}

/// One cluster's queues in the engine, as last published by its lock holder.
#[derive(Debug, Default)]
pub(crate) struct ClusterGauges {
    pub(crate) receive_queue: AtomicUsize,
    pub(crate) cluster_queue: AtomicUsize,
    pub(crate) wait_queue: AtomicUsize,
    pub(crate) choose_list: AtomicUsize,
    pub(crate) alarms: AtomicU64,
}

/// Whether a node takes packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeState {
    /// Up: it takes packets.
    Up,
    /// Down: it failed and is not back yet; its packets went to other nodes.
    Down,
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeState::Up => "up",
            NodeState::Down => "down",
        })
    }
}

/// One cluster's queues.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterMetrics {
    /// Which cluster.
    pub kind: ClusterKind,
    /// Packets admitted and not yet accepted by the scheduler (the job receive queue).
    pub receive_queue: usize,
    /// Packets in the cluster queue.
    pub cluster_queue: usize,
    /// Packets of this cluster in the wait queue.
    pub wait_queue: usize,
    /// Jobs in the choose list (bound to a node).
    pub choose_list: usize,
    /// Overload alarms the cluster's policy has raised (policies that have alarms only, such
    /// as `entropy`).
    pub alarms: u64,
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "jobs: {} submitted ({} run inline), {} completed, {} failed; {} keys; {} chaining states stored",
            self.jobs_submitted,
            self.jobs_inline,
            self.jobs_completed,
            self.jobs_failed,
            self.keys,
            self.stored_states
        )?;
        if self.jobs_light > 0 {
            writeln!(f, "jobs: {} took the light path", self.jobs_light)?;
        }
        if self.jobs_inline_stalled > 0 {
            writeln!(
                f,
                "jobs: {} run inline while their nodes were stalled",
                self.jobs_inline_stalled
            )?;
        }
        if self.jobs_inline_behind > 0 {
            writeln!(
                f,
                "jobs: {} run inline while their tenants were behind",
                self.jobs_inline_behind
            )?;
        }
        if self.packets_retried + self.packets_out_of_attempts > 0 {
            writeln!(
                f,
                "packets: {} run again after their node failed, {} failed after their last attempt",
                self.packets_retried, self.packets_out_of_attempts
            )?;
        }
        writeln!(
            f,
            "{:>4} {:>8} {:>5} {:>5} {:>10} {:>12} {:>10} {:>6} {:>11} {:>11}",
            "node",
            "cluster",
            "core",
            "slow",
            "packets",
            "bytes",
            "busy ms",
            "queue",
            "t enc|sign",
            "t dec|vrfy"
        )?;
        for n in &self.nodes {
            let (a, b) = match n.cluster {
                ClusterKind::Aes => (Cmd::Encrypt, Cmd::Decrypt),
                ClusterKind::Ed25519 => (Cmd::Sign, Cmd::Verify),
            };
            writeln!(
                f,
                "{:>4} {:>8} {:>5} {:>5.2} {:>10} {:>12} {:>10.1} {:>6} {:>11.0} {:>11.0}",
                n.node.0,
                n.cluster.to_string(),
                n.core.map_or("-".to_string(), |c| c.to_string()),
                n.slowdown,
                n.packets,
                n.bytes,
                n.busy.as_secs_f64() * 1e3,
                n.queue_depth,
                n.unit_times.get(a),
                n.unit_times.get(b),
            )?;
        }
        if !self.aes_implementations.is_empty() {
            let choices: Vec<String> = self
                .aes_implementations
                .iter()
                .map(ToString::to_string)
                .collect();
            writeln!(f, "aes implementations: {}", choices.join(", "))?;
        }
        for c in &self.clusters {
            writeln!(
                f,
                "cluster {}: receive queue {}, cluster queue {}, wait queue {}, choose list {}, policy alarms {}",
                c.kind, c.receive_queue, c.cluster_queue, c.wait_queue, c.choose_list, c.alarms
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pace follows the busy time's recent sets: a stream's speed alone, the lanes' speed
    /// once lane sets fill the node, and between the two by their shares of the time.
    #[test]
    fn a_pace_follows_the_recent_sets_by_their_time() {
        let ms = Duration::from_millis;
        let mut pace = Pace::default();
        assert_eq!(pace.bytes_per_sec(), 0.0);
        // One stream alone: 16 KiB per 2 ms.
        for _ in 0..100 {
            pace.observe(16 << 10, ms(2));
        }
        let alone = (16 << 10) as f64 / 0.002;
        assert!((pace.bytes_per_sec() / alone - 1.0).abs() < 1e-9);
        // Lane sets of eight such packets in 6 ms each, for a second: the old sets are
        // forgotten.
        for _ in 0..170 {
            pace.observe(8 * (16 << 10), ms(6));
        }
        let lanes = alone * 8.0 * 2.0 / 6.0;
        assert!(
            (pace.bytes_per_sec() / lanes - 1.0).abs() < 0.01,
            "{pace:?}"
        );
        // Half the time on each: the bytes over the time.
        for _ in 0..200 {
            pace.observe(16 << 10, ms(2));
            pace.observe(8 * (16 << 10), ms(2));
        }
        let mixed = 9.0 * (16 << 10) as f64 / 0.004;
        assert!(
            (pace.bytes_per_sec() / mixed - 1.0).abs() < 0.05,
            "{pace:?}"
        );
    }
}
