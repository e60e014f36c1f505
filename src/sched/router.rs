//! Level 1 (docs/ALGORITHM.md §3 parts 2, 3 and 7): the router, the bounded cluster queues and the wait
//! queue.
//!
//! The router takes packets first come first served and puts each into its cluster's queue.
//! When that queue is full the packet is parked in the wait queue and the router goes on with
//! the next packet, so a slow cluster does not stall the others. A cluster's parked packets go
//! back into its queue, earliest first, as soon as it has room; until the last of them has gone
//! back, that cluster's new packets are parked behind them, so they are never overtaken.
//!
//! The paper's wait queue is one array with a mask bit per slot. Here it is one deque per
//! cluster sharing one capacity: the same admission rule and the same per-cluster order, without
//! scanning the whole array for a cluster's earliest packet.

use std::collections::VecDeque;

use crate::packet::{ClusterId, Packet};
use crate::sched::error::ArriveError;

#[derive(Debug)]
pub(crate) struct Router<D> {
    queues: Vec<VecDeque<Packet<D>>>,
    queue_caps: Vec<usize>,
    waiting: Vec<VecDeque<Packet<D>>>,
    waiting_len: usize,
    wait_cap: usize,
}

impl<D> Router<D> {
    pub(crate) fn new(queue_caps: Vec<usize>, wait_cap: usize) -> Self {
        let n = queue_caps.len();
        Router {
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            queue_caps,
            waiting: (0..n).map(|_| VecDeque::new()).collect(),
            waiting_len: 0,
            wait_cap,
        }
    }

    /// Puts `packet` into its cluster queue, or the wait queue, or hands it back.
    pub(crate) fn route(&mut self, packet: Packet<D>) -> Result<(), ArriveError<D>> {
        let c = packet.meta.cluster.index();
        if c >= self.queues.len() {
            return Err(ArriveError::UnknownCluster(packet));
        }
        if self.waiting[c].is_empty() && self.queues[c].len() < self.queue_caps[c] {
            self.queues[c].push_back(packet);
            Ok(())
        } else if self.waiting_len < self.wait_cap {
            self.waiting[c].push_back(packet);
            self.waiting_len += 1;
            Ok(())
        } else {
            Err(ArriveError::Full(packet))
        }
    }

    /// Moves cluster `c`'s earliest parked packets into its queue while it has room.
    /// Returns whether anything moved.
    pub(crate) fn refill(&mut self, c: ClusterId) -> bool {
        let c = c.index();
        let mut moved = false;
        while self.queues[c].len() < self.queue_caps[c] {
            let Some(p) = self.waiting[c].pop_front() else {
                break;
            };
            self.waiting_len -= 1;
            self.queues[c].push_back(p);
            moved = true;
        }
        moved
    }

    pub(crate) fn queue_mut(&mut self, c: ClusterId) -> &mut VecDeque<Packet<D>> {
        &mut self.queues[c.index()]
    }

    pub(crate) fn queue(&self, c: ClusterId) -> &VecDeque<Packet<D>> {
        &self.queues[c.index()]
    }

    /// Takes cluster `c`'s parked packets out of the wait queue.
    pub(crate) fn take_waiting(&mut self, c: ClusterId) -> VecDeque<Packet<D>> {
        let taken = std::mem::take(&mut self.waiting[c.index()]);
        self.waiting_len -= taken.len();
        taken
    }

    pub(crate) fn waiting(&self, c: ClusterId) -> &VecDeque<Packet<D>> {
        &self.waiting[c.index()]
    }

    pub(crate) fn waiting_len(&self) -> usize {
        self.waiting_len
    }

    pub(crate) fn wait_cap(&self) -> usize {
        self.wait_cap
    }

    pub(crate) fn queue_cap(&self, c: ClusterId) -> usize {
        self.queue_caps[c.index()]
    }
}
