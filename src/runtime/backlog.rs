//! Fair backpressure: how much a cluster holds that no node has taken yet, and whether a new
//! job may join it.
//!
//! Under fair admission the scheduler core keeps every job's waiting packets in a queue of the
//! job's own, so the service bounds what it admits. A plain bound on the packets or bytes
//! waiting would hold a small job at the door behind one giant job as surely as a first come
//! first served queue would. So each job counts for at most half of each budget (packets and
//! bytes): one giant job can never fill the budget on its own, and a small job submitted behind
//! it is admitted at once, while many jobs together still meet the bound. What the cluster
//! holds is then at most the budget plus the one job admitted when nothing was waiting (a job
//! larger than the budget is admitted only then, so it cannot wait forever).
//!
//! Packets count as well as bytes, so empty jobs meet the bound like any other.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::packet::TaskId;

/// The waiting packets and bytes of one cluster, per job, with each job's share capped.
#[derive(Debug)]
pub(crate) struct Backlog {
    jobs: FxHashMap<TaskId, (u64, u64)>,
    packets: u64,
    bytes: u64,
    capped_packets: u64,
    capped_bytes: u64,
    max_packets: u64,
    max_bytes: u64,
}

impl Backlog {
    pub(crate) fn new(max_packets: u64, max_bytes: u64) -> Self {
        Backlog {
            jobs: FxHashMap::default(),
            packets: 0,
            bytes: 0,
            capped_packets: 0,
            capped_bytes: 0,
            max_packets: max_packets.max(1),
            max_bytes: max_bytes.max(1),
        }
    }

    /// Half of each budget, at least 1: what one job counts for at most.
    fn halves(&self) -> (u64, u64) {
        ((self.max_packets / 2).max(1), (self.max_bytes / 2).max(1))
    }

    /// Packets waiting, all jobs together.
    pub(crate) fn packets(&self) -> u64 {
        self.packets
    }

    /// Whether a new job of `packets` packets and `bytes` bytes may join now: nothing waits,
    /// or it fits in both budgets with every waiting job counted for at most half of each.
    pub(crate) fn admits(&self, packets: u64, bytes: u64) -> bool {
        self.packets == 0
            || (self.capped_packets + packets <= self.max_packets
                && self.capped_bytes + bytes <= self.max_bytes)
    }

    /// Whether the backlog has drained to its low-water mark: nothing waits, or each budget is
    /// at most three quarters used (every job counted for at most half, as [`admits`] counts).
    /// Submitters blocked for room are woken only then, so that a saturated cluster wakes them
    /// once per quarter of a budget drained, not once per packet placed.
    ///
    /// [`admits`]: Backlog::admits
    pub(crate) fn at_low_water(&self) -> bool {
        self.packets == 0
            || (self.capped_packets <= self.max_packets - self.max_packets / 4
                && self.capped_bytes <= self.max_bytes - self.max_bytes / 4)
    }

    /// Records `packets` more waiting packets of `task`, of `bytes` bytes.
    pub(crate) fn add(&mut self, task: TaskId, packets: u64, bytes: u64) {
        let (half_p, half_b) = self.halves();
        let (p, b) = self.jobs.entry(task).or_insert((0, 0));
        self.capped_packets -= (*p).min(half_p);
        self.capped_bytes -= (*b).min(half_b);
        *p += packets;
        *b += bytes;
        self.capped_packets += (*p).min(half_p);
        self.capped_bytes += (*b).min(half_b);
        self.packets += packets;
        self.bytes += bytes;
    }

    /// Records that one packet of `task`, of `bytes` bytes, left for a node.
    pub(crate) fn remove(&mut self, task: TaskId, bytes: u64) {
        let (half_p, half_b) = self.halves();
        let Entry::Occupied(mut e) = self.jobs.entry(task) else {
            return;
        };
        let (p, b) = e.get_mut();
        self.capped_packets -= (*p).min(half_p);
        self.capped_bytes -= (*b).min(half_b);
        *p = p.saturating_sub(1);
        *b = b.saturating_sub(bytes);
        self.capped_packets += (*p).min(half_p);
        self.capped_bytes += (*b).min(half_b);
        self.packets = self.packets.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(bytes);
        if *p == 0 {
            e.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_giant_job_leaves_room_for_small_ones() {
        let mut b = Backlog::new(1024, 16 << 20);
        assert!(b.admits(4096, 64 << 20), "an empty backlog admits anything");
        b.add(TaskId(1), 4096, 64 << 20);
        assert!(b.admits(1, 16), "a small job behind the giant");
        assert!(b.admits(4, 64 << 10));
        assert!(!b.admits(4096, 64 << 20), "a second giant waits");
        assert!(
            !b.admits(600, 600 << 10),
            "more packets than the other half"
        );
        b.add(TaskId(2), 1, 16);
        b.remove(TaskId(2), 16);
        for _ in 0..4096 {
            b.remove(TaskId(1), 16 << 10);
        }
        assert_eq!(b.packets(), 0);
        assert_eq!((b.capped_packets, b.capped_bytes), (0, 0));
    }

    #[test]
    fn low_water_is_three_quarters_of_each_budget() {
        let mut b = Backlog::new(8, 1 << 20);
        assert!(b.at_low_water(), "nothing waits");
        for task in 0..8 {
            b.add(TaskId(task), 1, 16);
        }
        assert!(!b.admits(1, 16));
        assert!(!b.at_low_water());
        b.remove(TaskId(0), 16);
        assert!(b.admits(1, 16), "room for one more");
        assert!(!b.at_low_water(), "7 of 8 packets");
        b.remove(TaskId(1), 16);
        assert!(b.at_low_water(), "6 of 8 packets");
        // The bytes budget counts too, with a job counted for at most half of it.
        let mut b = Backlog::new(1024, 1000);
        b.add(TaskId(1), 1, 400);
        b.add(TaskId(2), 1, 400);
        assert!(!b.at_low_water(), "800 of 1000 bytes");
        b.remove(TaskId(2), 400);
        b.add(TaskId(3), 1, 350);
        assert!(b.at_low_water(), "750 of 1000 bytes");
    }

    #[test]
    fn many_small_jobs_meet_the_bound_empty_ones_included() {
        let mut b = Backlog::new(8, 1 << 20);
        let mut admitted = 0;
        for task in 0..100 {
            if b.admits(1, 0) {
                b.add(TaskId(task), 1, 0);
                admitted += 1;
            }
        }
        assert_eq!(admitted, 8);
        // A bound of one packet still holds: the first job counts for all of it.
        let mut one = Backlog::new(1, 1);
        assert!(one.admits(1, 0));
        one.add(TaskId(0), 1, 0);
        assert!(!one.admits(1, 0));
    }
}
