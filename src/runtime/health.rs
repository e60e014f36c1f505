//! What the supervisor watches of each node, and what a worker publishes for it: whether the
//! node is up, what it is running and since when, the packets it has taken and not started, and
//! the completions it has not reported yet. See `supervisor.rs` for the protocol.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::packet::Packet;
use crate::runtime::handle::{JobShared, Work};

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
    /// The packets running (one, or a lane set): their jobs and parts. Whoever takes them
    /// resolves the packets: the worker when it finishes, or the supervisor when the node
    /// fails first (the worker's late results are then discarded).
    pub(crate) running: Mutex<Vec<(Arc<JobShared>, usize)>>,
    /// Packets the worker took from its node queue and has not started.
    pub(crate) hand: Mutex<VecDeque<Packet<Work>>>,
}

impl NodeHealth {
    pub(crate) fn running(&self) -> MutexGuard<'_, Vec<(Arc<JobShared>, usize)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn hand(&self) -> MutexGuard<'_, VecDeque<Packet<Work>>> {
        self.hand.lock().unwrap_or_else(|e| e.into_inner())
    }

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
