//! `rr`: round robin over the nodes with room, as LVS's `ip_vs_rr.c` does it; the round robin
//! that the entropy-weights study compares against (docs/ALGORITHM.md §11.3, §11.8).
//!
//! The policy keeps a cursor, node 0 at the start. For a packet it takes the first node at or
//! after the cursor, cyclically, that has room for the packet (strategy 1; LVS likewise scans
//! on from its last choice and skips overloaded servers), and moves the cursor to the node
//! after the one chosen. When no node has room it returns `None` and the cursor stays. Speed
//! and load play no part: with room everywhere, node k of n gets every n-th packet.

use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::policy::entry::Entry;
use crate::sched::status::ClusterView;

/// Round robin over the nodes with room.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundRobin {
    /// The first node to try for the next packet.
    next: usize,
}

impl RoundRobin {
    /// The registry entry (docs/ALGORITHM.md §11.3).
    pub(super) const ENTRY: Entry = Entry {
        name: "rr",
        aliases: &[],
        description: "round robin over the nodes with room",
        params: &[],
        build: |_| Ok(Box::new(RoundRobin::new())),
    };

    /// A fresh policy whose cursor is at node 0.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for RoundRobin {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let n = view.len();
        let i = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| view.node(i).has_room(packet.len))?;
        self.next = (i + 1) % n;
        Some(i)
    }
}
