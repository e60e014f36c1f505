//! A node's hand: the packets its worker took from the node queue and has not started, and
//! the set it is running. The worker fills and empties it; the engine fills it at the worker's
//! turn and, when the node fails, takes everything in it back (the running set's jobs fail or
//! retry, the unstarted packets go to other nodes).

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::packet::Packet;
use crate::runtime::work::{JobRecord, PacketData};

/// A packet running on a node.
pub(crate) struct Running {
    pub(crate) job: Arc<JobRecord>,
    pub(crate) part: usize,
    /// A copy of the packet as it was before it ran, to run again on another node if this one
    /// fails first; `None` on its last attempt (or for a packet that cannot run again).
    pub(crate) retry: Option<Packet<PacketData>>,
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
    /// Light packets at the front of the node's queue (docs/ALGORITHM.md §15.7), as the
    /// engine last wrote it under the cluster's lock: the worker reads it between the slices
    /// of a set without the lock.
    pub(crate) light: AtomicUsize,
}

impl NodeHand {
    /// The running set.
    pub(crate) fn running(&self) -> MutexGuard<'_, Vec<Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The packets taken and not started.
    pub(crate) fn waiting(&self) -> MutexGuard<'_, VecDeque<Packet<PacketData>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for NodeHand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHand").finish_non_exhaustive()
    }
}
