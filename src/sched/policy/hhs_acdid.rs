//! `hhs-acdid`: the baseline, the older two-level scheduler HHS-ACDID (docs/ALGORITHM.md
//! §10.1, §11.2).
//!
//! In HHS-ACDID the software packing layer fixes each job's node (`cyp = cluster_id || ip_id`)
//! before the job reaches the hardware, with no knowledge of the nodes' speed or load. This
//! project's reading: each new job is given the next node of its cluster in turn (round robin
//! over jobs), and all its packets go there, in order, waiting for that node when it is full.
//! Nodes whose capacity could never hold the job's first packet are skipped.

use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::policy::entry::Entry;
use crate::sched::status::ClusterView;

/// Round robin over jobs, every job pinned to its node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HhsAcdid {
    next: usize,
}

impl HhsAcdid {
    /// The registry entry (docs/ALGORITHM.md §11.2).
    pub(super) const ENTRY: Entry = Entry {
        name: "hhs-acdid",
        aliases: &["hhs_acdid", "baseline"],
        description: "jobs in turn, each pinned to its node (the older scheduler, the baseline)",
        params: &[],
        build: |_| Ok(Box::new(HhsAcdid::new())),
    };

    /// A fresh baseline whose first job goes to node 0.
    pub fn new() -> Self {
        HhsAcdid::default()
    }
}

impl Policy for HhsAcdid {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn pins_jobs(&self) -> bool {
        true
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let n = view.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if view.node(i).can_ever_hold(packet.len) {
                self.next = (i + 1) % n;
                return Some(i);
            }
        }
        None
    }
}
