//! What the supervisor judges a node by (see `supervisor.rs` for the protocol): whether it is
//! up, its failure counts, what its worker has finished and not reported, and since when its
//! running packets run; and the stall rule, how long they may.
//!
//! A stall is a node that makes no progress while it has a CPU, not one that waits to be
//! scheduled. The time a running packet is charged is the wall time since it started less the
//! time its worker thread spent waiting on a run queue for a CPU, which the kernel counts per
//! thread (the second field of `/proc/self/task/<tid>/schedstat`, in nanoseconds): time on a
//! CPU counts, and so does time the thread spent sleeping or blocked (it had a CPU to run on
//! and did not), but time it was ready to run and preempted does not. On a system without
//! that file the wall time is charged, as before (docs/ALGORITHM.md §15.2).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The calling thread's id (its directory under `/proc/self/task`), if the system shows it.
pub(crate) fn own_thread_id() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    stat.split_ascii_whitespace().next()?.parse().ok()
}

/// Nanoseconds thread `tid` of this process has spent waiting on a run queue for a CPU (the
/// kernel's `run_delay`), if the system shows it.
pub(crate) fn run_queue_wait_ns(tid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    parse_schedstat(&stat)
}

/// The run-queue wait of a `schedstat` line: "on-CPU ns, run-queue wait ns, timeslices".
fn parse_schedstat(line: &str) -> Option<u64> {
    let mut fields = line.split_ascii_whitespace();
    let _on_cpu: u64 = fields.next()?.parse().ok()?;
    fields.next()?.parse().ok()
}

/// How long a running packet is charged, in nanoseconds: `wall_ns` since it was first seen
/// running, less `waited_ns` its thread spent since then waiting for a CPU.
pub(crate) fn charged_ns(wall_ns: u64, waited_ns: u64) -> u64 {
    wall_ns.saturating_sub(waited_ns)
}

/// The least stall limit when none is set: a packet running this long is stalled whatever its
/// size.
pub(crate) const MIN_STALL: Duration = Duration::from_millis(250);

/// How many times its expected service time a packet may take before its node is stalled.
pub(crate) const STALL_FACTOR: f64 = 20.0;

/// How long, in nanoseconds, a packet expected to take `expected_ns` may run before its node
/// counts as stalled: the builder's `timeout` if set, otherwise [`STALL_FACTOR`] times the
/// expected time and at least [`MIN_STALL`] (a slow node is not a stalled one).
pub(crate) fn stall_limit(timeout: Option<Duration>, expected_ns: f64) -> u64 {
    let limit = match timeout {
        Some(d) => d,
        None => MIN_STALL.max(Duration::from_secs_f64(
            (expected_ns * STALL_FACTOR / 1e9).clamp(0.0, 3600.0),
        )),
    };
    u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX)
}

/// One node's health record, shared by its worker, the engine and the supervisor.
#[derive(Default)]
pub(crate) struct NodeHealth {
    /// The node is down: failed, and not back yet.
    pub(crate) down: AtomicBool,
    /// Bumped at every failure: completions a worker counted before it belong to the old
    /// generation, which the scheduler core has already forgotten.
    pub(crate) generation: AtomicU64,
    /// Times the node failed (panicked, exited or stalled).
    pub(crate) failures: AtomicU64,
    /// Of those, stalls.
    pub(crate) stalls: AtomicU64,
    /// Times its worker thread was started again.
    pub(crate) restarts: AtomicU64,
    /// When the running packet started, in nanoseconds since the service's epoch plus one;
    /// 0 when the worker runs nothing.
    pub(crate) busy_since: AtomicU64,
    /// How long, in nanoseconds, the running packet may take before the node counts as
    /// stalled.
    pub(crate) busy_limit: AtomicU64,
    /// Packets resolved (delivered) and not yet reported to the scheduler core.
    pub(crate) unreported: AtomicU64,
    /// The worker thread's id, for its run-queue wait; 0 when unknown (the stall rule then
    /// charges wall time).
    pub(crate) thread_id: AtomicU64,
    /// Down because its worker thread died, and being restarted: it will be back at once.
    pub(crate) restarting: AtomicBool,
}

impl NodeHealth {
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for NodeHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHealth")
            .field("down", &self.is_down())
            .field("failures", &self.failures.load(Ordering::Relaxed))
            .field("restarts", &self.restarts.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stall_limit_is_the_timeout_or_a_multiple_of_the_expected_time() {
        let ms = |n: u64| n * 1_000_000;
        assert_eq!(stall_limit(Some(Duration::from_millis(7)), 1e12), ms(7));
        assert_eq!(stall_limit(None, 1.0), ms(250), "at least MIN_STALL");
        assert_eq!(stall_limit(None, 1e9), ms(20_000), "20 times one second");
        assert_eq!(stall_limit(None, f64::INFINITY), 3_600_000_000_000);
    }

    #[test]
    fn time_spent_waiting_for_a_cpu_is_not_charged() {
        assert_eq!(parse_schedstat("123 456 7\n"), Some(456));
        assert_eq!(parse_schedstat("123"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(charged_ns(1_000, 300), 700);
        assert_eq!(charged_ns(1_000, 5_000), 0, "never negative");
    }

    #[test]
    fn this_threads_run_queue_wait_is_read_where_the_system_shows_it() {
        if let Some(tid) = own_thread_id() {
            let before = run_queue_wait_ns(tid).expect("schedstat beside stat");
            // Cumulative: it never goes back.
            let after = run_queue_wait_ns(tid).expect("schedstat beside stat");
            assert!(after >= before);
        }
    }
}
