//! What the supervisor judges a node by (see `supervisor.rs` for the protocol): whether it is
//! up, its failure counts, what its worker has finished and not reported, and since when its
//! running packets run; and the stall rule, how long they may.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

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
}
