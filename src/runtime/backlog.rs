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
//!
//! Tenants (docs/ALGORITHM.md §15.7) are held apart the same way one level up: when a job of
//! tenant T asks to join, each other tenant with packets waiting counts for at most an equal
//! share of each budget among the tenants waiting and T, so a tenant that floods the cluster
//! cannot hold another's jobs at the door; T's own waiting jobs count in full. With one
//! tenant the rule is the job-level one alone.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::packet::{TaskId, TenantId};

/// The waiting packets and bytes of one cluster, per job, with each job's share capped.
#[derive(Debug)]
pub(crate) struct Backlog {
    /// Per job: packets, bytes, tenant.
    jobs: FxHashMap<TaskId, (u64, u64, TenantId)>,
    /// Per tenant with packets waiting: its jobs' capped packets and bytes.
    tenants: FxHashMap<TenantId, (u64, u64)>,
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
            tenants: FxHashMap::default(),
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

    /// Whether a new job of `tenant`, of `packets` packets and `bytes` bytes, may join now:
    /// nothing waits, or it fits in both budgets with every waiting job counted for at most
    /// half of each, and every other tenant for at most an equal share among the tenants
    /// waiting and this one.
    pub(crate) fn admits(&self, tenant: TenantId, packets: u64, bytes: u64) -> bool {
        if self.packets == 0 {
            return true;
        }
        let (mut p, mut b) = (self.capped_packets, self.capped_bytes);
        let others = self.tenants.len() - usize::from(self.tenants.contains_key(&tenant));
        if others > 0 {
            let shares = others as u64 + 1;
            let (share_p, share_b) = (self.max_packets / shares, self.max_bytes / shares);
            for (t, &(tp, tb)) in &self.tenants {
                if *t != tenant {
                    p -= tp - tp.min(share_p);
                    b -= tb - tb.min(share_b);
                }
            }
        }
        p + packets <= self.max_packets && b + bytes <= self.max_bytes
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

    /// Records `packets` more waiting packets of `task` (of `tenant`), of `bytes` bytes.
    pub(crate) fn add(&mut self, task: TaskId, tenant: TenantId, packets: u64, bytes: u64) {
        let (half_p, half_b) = self.halves();
        let (p, b, tenant) = self.jobs.entry(task).or_insert((0, 0, tenant));
        let (tp, tb) = self.tenants.entry(*tenant).or_insert((0, 0));
        let (old_p, old_b) = ((*p).min(half_p), (*b).min(half_b));
        *p += packets;
        *b += bytes;
        let (new_p, new_b) = ((*p).min(half_p), (*b).min(half_b));
        *tp = *tp - old_p + new_p;
        *tb = *tb - old_b + new_b;
        self.capped_packets = self.capped_packets - old_p + new_p;
        self.capped_bytes = self.capped_bytes - old_b + new_b;
        self.packets += packets;
        self.bytes += bytes;
    }

    /// Records that one packet of `task`, of `bytes` bytes, left for a node.
    pub(crate) fn remove(&mut self, task: TaskId, bytes: u64) {
        let (half_p, half_b) = self.halves();
        let Entry::Occupied(mut e) = self.jobs.entry(task) else {
            return;
        };
        let (p, b, tenant) = e.get_mut();
        let (old_p, old_b) = ((*p).min(half_p), (*b).min(half_b));
        *p = p.saturating_sub(1);
        *b = b.saturating_sub(bytes);
        let (new_p, new_b) = ((*p).min(half_p), (*b).min(half_b));
        self.capped_packets = self.capped_packets - old_p + new_p;
        self.capped_bytes = self.capped_bytes - old_b + new_b;
        self.packets = self.packets.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(bytes);
        if let Entry::Occupied(mut t) = self.tenants.entry(*tenant) {
            let (tp, tb) = t.get_mut();
            *tp = *tp - old_p + new_p;
            *tb = *tb - old_b + new_b;
            // Every waiting job counts for a packet at least.
            if *tp == 0 {
                t.remove();
            }
        }
        if *p == 0 {
            e.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: TenantId = TenantId::DEFAULT;

    #[test]
    fn a_flooding_tenant_leaves_room_for_another() {
        let mut b = Backlog::new(8, 1 << 20);
        let noisy = TenantId(1);
        let quiet = TenantId(2);
        for task in 0..8 {
            assert!(b.admits(noisy, 1, 16));
            b.add(TaskId(task), noisy, 1, 16);
        }
        assert!(
            !b.admits(noisy, 1, 16),
            "the noisy tenant filled the budget"
        );
        // To the quiet tenant the noisy one counts for half: four packets of room.
        for task in 100..104 {
            assert!(b.admits(quiet, 1, 16));
            b.add(TaskId(task), quiet, 1, 16);
        }
        assert!(!b.admits(quiet, 1, 16));
        for task in 100..104 {
            b.remove(TaskId(task), 16);
        }
        assert!(
            !b.tenants.contains_key(&quiet),
            "a tenant with nothing waiting leaves"
        );
        assert!(b.admits(quiet, 4, 64));
    }

    #[test]
    fn a_giant_job_leaves_room_for_small_ones() {
        let mut b = Backlog::new(1024, 16 << 20);
        assert!(
            b.admits(T0, 4096, 64 << 20),
            "an empty backlog admits anything"
        );
        b.add(TaskId(1), T0, 4096, 64 << 20);
        assert!(b.admits(T0, 1, 16), "a small job behind the giant");
        assert!(b.admits(T0, 4, 64 << 10));
        assert!(!b.admits(T0, 4096, 64 << 20), "a second giant waits");
        assert!(
            !b.admits(T0, 600, 600 << 10),
            "more packets than the other half"
        );
        b.add(TaskId(2), T0, 1, 16);
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
            b.add(TaskId(task), T0, 1, 16);
        }
        assert!(!b.admits(T0, 1, 16));
        assert!(!b.at_low_water());
        b.remove(TaskId(0), 16);
        assert!(b.admits(T0, 1, 16), "room for one more");
        assert!(!b.at_low_water(), "7 of 8 packets");
        b.remove(TaskId(1), 16);
        assert!(b.at_low_water(), "6 of 8 packets");
        // The bytes budget counts too, with a job counted for at most half of it.
        let mut b = Backlog::new(1024, 1000);
        b.add(TaskId(1), T0, 1, 400);
        b.add(TaskId(2), T0, 1, 400);
        assert!(!b.at_low_water(), "800 of 1000 bytes");
        b.remove(TaskId(2), 400);
        b.add(TaskId(3), T0, 1, 350);
        assert!(b.at_low_water(), "750 of 1000 bytes");
    }

    #[test]
    fn many_small_jobs_meet_the_bound_empty_ones_included() {
        let mut b = Backlog::new(8, 1 << 20);
        let mut admitted = 0;
        for task in 0..100 {
            if b.admits(T0, 1, 0) {
                b.add(TaskId(task), T0, 1, 0);
                admitted += 1;
            }
        }
        assert_eq!(admitted, 8);
        // A bound of one packet still holds: the first job counts for all of it.
        let mut one = Backlog::new(1, 1);
        assert!(one.admits(T0, 1, 0));
        one.add(TaskId(0), T0, 1, 0);
        assert!(!one.admits(T0, 1, 0));
    }
}
