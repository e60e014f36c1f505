//! A node's hand: the packets its worker took from the node queue and has not started, and
//! the set it is running. The worker fills and empties it; the engine fills it at the worker's
//! turn and, when the node fails, takes everything in it back (the running set's jobs fail or
//! retry, the unstarted packets go to other nodes). It also holds the node's light packets
//! (docs/ALGORITHM.md §15.7), which the engine puts there without the cluster's lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::packet::Packet;
use crate::runtime::work::{JobRecord, PacketData, Packets};

/// A packet running on a node.
pub(crate) struct Running {
    pub(crate) job: Arc<JobRecord>,
    pub(crate) part: usize,
    /// A copy of the packet as it was before it ran, to run again on another node if this one
    /// fails first; `None` on its last attempt (or for a packet that cannot run again).
    pub(crate) retry: Option<Packet<PacketData>>,
    /// A light packet (§15.7): counted apart from the packets the core placed.
    pub(crate) light: bool,
}

/// A node's light packets, and whether it takes more.
#[derive(Default)]
struct LightQueue {
    packets: VecDeque<Packet<PacketData>>,
    /// The node is down: its light packets went back to the core, and new ones go there.
    down: bool,
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
    /// Light packets placed on the node and not taken (docs/ALGORITHM.md §15.7), in the
    /// order placed. A light job's submitter puts them here without the cluster's lock, so
    /// that it never waits behind the busy tenants' admissions for it; the worker takes them
    /// between two sets or the slices of one.
    light_queue: Mutex<LightQueue>,
    /// How many packets `light_queue` holds, for the worker to read without its lock.
    pub(crate) light: AtomicUsize,
    /// Set (with the cluster's lock held) while the worker sleeps: a light job's submitter
    /// then takes the lock to wake it.
    pub(crate) asleep: AtomicBool,
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

    fn light_queue(&self) -> MutexGuard<'_, LightQueue> {
        self.light_queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts a light job's packets behind the node's other light packets; hands them back if
    /// the node is down.
    pub(crate) fn push_light(&self, packets: Packets) -> Result<(), Packets> {
        let mut q = self.light_queue();
        if q.down {
            return Err(packets);
        }
        q.packets.extend(packets);
        self.light.store(q.packets.len(), Ordering::SeqCst);
        Ok(())
    }

    /// Takes every light packet waiting.
    pub(crate) fn take_light(&self) -> VecDeque<Packet<PacketData>> {
        let mut q = self.light_queue();
        self.light.store(0, Ordering::SeqCst);
        std::mem::take(&mut q.packets)
    }

    /// The node went down: takes every light packet waiting, and refuses new ones until
    /// [`open_light`](Self::open_light).
    pub(crate) fn close_light(&self) -> VecDeque<Packet<PacketData>> {
        let mut q = self.light_queue();
        q.down = true;
        self.light.store(0, Ordering::SeqCst);
        std::mem::take(&mut q.packets)
    }

    /// The node is back: it takes light packets again.
    pub(crate) fn open_light(&self) {
        self.light_queue().down = false;
    }
}

impl std::fmt::Debug for NodeHand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHand").finish_non_exhaustive()
    }
}
