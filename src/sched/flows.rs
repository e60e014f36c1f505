//! Fair admission (docs/ALGORITHM.md §15.1): every job of a cluster has a queue of its own (a
//! *flow*), and the balancer serves the flows by deficit round robin over bytes, as DRR and
//! fq_codel serve network flows (Shreedhar and Varghese, "Efficient fair queueing using deficit
//! round robin", SIGCOMM 1995).
//!
//! The flows with packets waiting form a ring. The flow at the front gets a quantum of bytes
//! (the cluster's largest packet, so any packet fits in one turn) added to its deficit, and
//! hands its packets to the balancer, oldest first, while its deficit covers the next one and a
//! node takes it; then it goes to the back of the ring. A flow whose next packet no node can
//! take now (its bound node is full, or every node is) also goes to the back and forfeits its
//! deficit, as an idle flow does in DRR, so waiting does not bank an unfair burst. A flow that
//! empties leaves the ring and forgets its deficit.
//!
//! A packet costs its length, and at least one byte, so empty packets (an Ed25519 job with an
//! empty message) take their turn like any other.
//!
//! Nothing here bounds how many packets wait: under fair admission the core accepts every
//! packet, and the driver bounds what it admits (the service counts packets and bytes per
//! cluster). A packet never waits behind another job's: a 16-byte job submitted after a 64 MiB
//! one is placed after at most one packet of it.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::packet::{Packet, PacketMeta, TaskId};

/// What a packet costs against a flow's deficit: its length, and at least one byte.
pub(crate) fn cost(meta: &PacketMeta) -> u64 {
    meta.len.max(1)
}

#[derive(Debug)]
struct Flow<D> {
    packets: VecDeque<Packet<D>>,
    deficit: u64,
    /// Whether the flow's current turn has been granted its quantum.
    granted: bool,
}

/// The flows of one cluster.
#[derive(Debug)]
pub(crate) struct Flows<D> {
    flows: FxHashMap<TaskId, Flow<D>>,
    /// Flows with packets, in round-robin order; the front has the turn.
    ring: VecDeque<TaskId>,
    quantum: u64,
    waiting: usize,
}

impl<D> Flows<D> {
    pub(crate) fn new(quantum: u64) -> Self {
        Flows {
            flows: FxHashMap::default(),
            ring: VecDeque::new(),
            quantum: quantum.max(1),
            waiting: 0,
        }
    }

    /// Packets waiting, all flows together.
    pub(crate) fn len(&self) -> usize {
        self.waiting
    }

    /// Flows with packets waiting.
    pub(crate) fn active(&self) -> usize {
        self.ring.len()
    }

    /// Appends a packet to its job's flow; a new flow joins the back of the ring.
    pub(crate) fn push(&mut self, packet: Packet<D>) {
        self.waiting += 1;
        match self.flows.entry(packet.meta.task) {
            Entry::Occupied(mut e) => e.get_mut().packets.push_back(packet),
            Entry::Vacant(e) => {
                self.ring.push_back(packet.meta.task);
                e.insert(Flow {
                    packets: VecDeque::from([packet]),
                    deficit: 0,
                    granted: false,
                });
            }
        }
    }

    /// Puts packets taken back from a node in front of their flows, in their order (a failed
    /// node's queue, re-offered). A flow that was empty rejoins the ring at the front.
    pub(crate) fn push_front_all(&mut self, packets: Vec<Packet<D>>) {
        for packet in packets.into_iter().rev() {
            self.waiting += 1;
            match self.flows.entry(packet.meta.task) {
                Entry::Occupied(mut e) => e.get_mut().packets.push_front(packet),
                Entry::Vacant(e) => {
                    self.ring.push_front(packet.meta.task);
                    e.insert(Flow {
                        packets: VecDeque::from([packet]),
                        deficit: 0,
                        granted: false,
                    });
                }
            }
        }
    }

    /// The flow whose turn it is, and the header of its next packet. Grants the turn's
    /// quantum on first sight: one quantum, or the next packet's cost if that is larger (a
    /// packet above the cluster's packet size, such as a long Ed25519 message, is sent in one
    /// turn rather than starved).
    pub(crate) fn head(&mut self) -> Option<(TaskId, PacketMeta)> {
        let &task = self.ring.front()?;
        let quantum = self.quantum;
        let flow = self.flows.get_mut(&task)?;
        let meta = flow.packets.front()?.meta;
        if !flow.granted {
            flow.deficit += quantum.max(cost(&meta));
            flow.granted = true;
        }
        Some((task, meta))
    }

    /// Whether the flow at the front may send its next packet within its deficit.
    pub(crate) fn head_affordable(&self, meta: &PacketMeta) -> bool {
        self.flows
            .get(&meta.task)
            .is_some_and(|f| f.deficit >= cost(meta))
    }

    /// Takes the front flow's next packet (the one [`head`](Self::head) showed), charging its
    /// cost. A flow that empties leaves the ring.
    pub(crate) fn take_head(&mut self) -> Option<Packet<D>> {
        let &task = self.ring.front()?;
        let flow = self.flows.get_mut(&task)?;
        let packet = flow.packets.pop_front()?;
        self.waiting -= 1;
        flow.deficit = flow.deficit.saturating_sub(cost(&packet.meta));
        if flow.packets.is_empty() {
            self.flows.remove(&task);
            self.ring.pop_front();
        }
        Some(packet)
    }

    /// Ends the front flow's turn: it goes to the back of the ring. With `blocked` (its next
    /// packet could not be placed) it forfeits its deficit.
    pub(crate) fn end_turn(&mut self, blocked: bool) {
        let Some(task) = self.ring.pop_front() else {
            return;
        };
        if let Some(flow) = self.flows.get_mut(&task) {
            flow.granted = false;
            if blocked {
                flow.deficit = 0;
            }
            self.ring.push_back(task);
        }
    }

    /// Removes and returns every waiting packet, flow by flow.
    pub(crate) fn drain(&mut self) -> Vec<Packet<D>> {
        let mut out = Vec::with_capacity(self.waiting);
        for task in std::mem::take(&mut self.ring) {
            if let Some(flow) = self.flows.remove(&task) {
                out.extend(flow.packets);
            }
        }
        self.waiting = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{ClusterId, Cmd, Len};

    fn packet(task: u64, seq: u32, len: u64) -> Packet<Len> {
        Packet::new(
            PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0)).at(seq, false),
            Len(len),
        )
    }

    /// Serves every flow with a node that always has room: the order DRR alone gives.
    fn serve(flows: &mut Flows<Len>) -> Vec<(u64, u32)> {
        let mut order = Vec::new();
        while let Some((_, meta)) = flows.head() {
            if flows.head_affordable(&meta) {
                let p = flows.take_head().unwrap();
                order.push((p.meta.task.0, p.meta.seq));
            } else {
                flows.end_turn(false);
            }
        }
        order
    }

    #[test]
    fn a_small_job_waits_for_one_packet_of_a_big_one_at_most() {
        let mut flows = Flows::new(1024);
        for seq in 0..100 {
            flows.push(packet(1, seq, 1024));
        }
        flows.push(packet(2, 0, 16));
        let order = serve(&mut flows);
        assert_eq!(order[..3], [(1, 0), (2, 0), (1, 1)]);
        assert_eq!(order.len(), 101);
        assert_eq!(flows.len(), 0);
        assert_eq!(flows.active(), 0);
    }

    #[test]
    fn bytes_are_shared_equally_whatever_the_packet_sizes() {
        let mut flows = Flows::new(1024);
        for seq in 0..64 {
            flows.push(packet(1, seq, 1024));
        }
        for seq in 0..256 {
            flows.push(packet(2, seq, 256));
        }
        let order = serve(&mut flows);
        // Until job 1 runs out, every round gives each job 1024 bytes.
        let first_half = &order[..64 * 5];
        let ones = first_half.iter().filter(|(t, _)| *t == 1).count();
        let twos = first_half.len() - ones;
        assert_eq!((ones * 1024, twos * 256), (64 * 1024, 256 * 256));
    }

    #[test]
    fn empty_packets_cost_a_byte_and_keep_their_order() {
        let mut flows = Flows::new(2);
        for seq in 0..5 {
            flows.push(packet(7, seq, 0));
        }
        flows.push(packet(8, 0, 0));
        let order = serve(&mut flows);
        assert_eq!(order, [(7, 0), (7, 1), (8, 0), (7, 2), (7, 3), (7, 4)]);
    }

    #[test]
    fn a_blocked_flow_does_not_bank_its_unused_quanta() {
        let mut flows = Flows::new(100);
        flows.push(packet(1, 0, 100));
        flows.push(packet(1, 1, 100));
        for _ in 0..10 {
            flows.head();
            flows.end_turn(true);
        }
        flows.head();
        assert!(flows.take_head().is_some());
        let (_, meta) = flows.head().unwrap();
        // After one packet the turn's quantum is spent: the blocked turns banked nothing.
        assert!(!flows.head_affordable(&meta));
    }

    #[test]
    fn packets_taken_back_go_in_front_in_order() {
        let mut flows = Flows::new(1024);
        flows.push(packet(1, 2, 10));
        flows.push(packet(3, 0, 10));
        flows.push_front_all(vec![packet(1, 0, 10), packet(1, 1, 10), packet(2, 5, 10)]);
        assert_eq!(flows.len(), 5);
        let order = serve(&mut flows);
        assert_eq!(order[..2], [(2, 5), (1, 0)]);
        let ones: Vec<u32> = order.iter().filter(|(t, _)| *t == 1).map(|p| p.1).collect();
        assert_eq!(ones, [0, 1, 2]);
        assert_eq!(flows.drain().len(), 0);
    }
}
