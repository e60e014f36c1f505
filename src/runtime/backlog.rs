//! Fair backpressure: how much a cluster holds that no node has taken yet, and whether a new
//! job may join it.
//!
//! Under fair admission the scheduler core keeps every job's waiting packets in a queue of the
//! job's own, so the service bounds what it admits. A plain bound on the packets or bytes
//! waiting would hold a small job at the door behind one giant job as surely as a first come
//! first served queue would. So each job counts for at most half of each budget (packets and
//! bytes): one giant job can never fill the budget on its own, and a small job submitted behind
//! it is admitted at once, while many jobs together still meet the bound.
//!
//! A job larger than half a budget (a *large* job) could never be counted in full beside
//! anything else. It is admitted while its tenant has fewer large jobs waiting than
//! [`LARGE_PER_NODE`] per node of the cluster, and the large jobs waiting share one half of
//! each budget: each counts for at most that half divided by that number. So several long jobs
//! are admitted together, and a chained one, which runs on one node at a time, no longer
//! leaves the other nodes idle until the one before it has been placed whole; small jobs keep
//! the other half. The slots are each tenant's own: with one set for all, one per node,
//! tenants whose jobs are all large took the slots in turns, a job each, and shared the nodes
//! by jobs rather than by weight (1:1 where the weights were 1:3), and a quiet tenant's large
//! job waited for a flooding tenant's to be placed whole. What the cluster holds is then at
//! most the budgets plus [`LARGE_PER_NODE`] large jobs per node for each tenant with large jobs
//! waiting.
//!
//! Packets count as well as bytes, so empty jobs meet the bound like any other.
//!
//! Tenants (docs/ALGORITHM.md §15.7) are held apart the same way one level up: when a job of
//! tenant T asks to join, each other tenant with packets waiting counts for at most its
//! weight's share of each budget among the tenants waiting and T, so a tenant that floods the
//! cluster cannot hold another's jobs at the door; T's own waiting jobs count in full. With
//! equal weights each share is equal; by weight, the work let in follows the weights the core
//! serves by, so a heavier tenant keeps enough waiting to be served its share. The tenant
//! asking counts its own share as at least a quarter of an equal one, so that a tenant of a
//! small weight beside a much heavier one still finds room at the door. With one tenant the
//! rule is the job-level one alone.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::packet::{TaskId, TenantId};

/// How many large jobs of one tenant may wait per node of the cluster: two, so that a tenant
/// whose jobs are all large has the next one waiting while the one before is placed, and its
/// share does not fall each time its one job has left and the next is not in yet (weights 1:3,
/// 16 MiB jobs, one node, the runs it was chosen on: the heavy tenant's share of a second
/// 0.648–0.716 with one per node and tenant, 0.733–0.762 with two; docs/RESULTS.md, Tenants).
pub(crate) const LARGE_PER_NODE: u64 = 2;

/// One job's waiting packets and bytes, its tenant, and whether it was large when it came.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    packets: u64,
    bytes: u64,
    tenant: TenantId,
    large: bool,
}

/// The waiting packets and bytes of one cluster, per job, with each job's share capped.
#[derive(Debug)]
pub(crate) struct Backlog {
    jobs: FxHashMap<TaskId, Waiting>,
    /// Per tenant with packets waiting: its jobs' capped packets and bytes.
    tenants: FxHashMap<TenantId, (u64, u64)>,
    packets: u64,
    bytes: u64,
    capped_packets: u64,
    capped_bytes: u64,
    max_packets: u64,
    max_bytes: u64,
    /// What a job counts for at most of each budget, (packets, bytes), indexed by whether it
    /// is large: half, or a large job's share of the half the large jobs share (`new`).
    caps: [(u64, u64); 2],
    /// How many large jobs of one tenant may wait at once: [`LARGE_PER_NODE`] per node.
    large_slots: u64,
    /// Per tenant with large jobs waiting, how many.
    large_by_tenant: FxHashMap<TenantId, u64>,
    /// A large job has left since [`take_large_left`](Self::take_large_left) last cleared this.
    large_left: bool,
}

impl Backlog {
    /// A backlog of `max_packets` and `max_bytes` for a cluster of `nodes` nodes.
    pub(crate) fn new(max_packets: u64, max_bytes: u64, nodes: usize) -> Self {
        let (max_packets, max_bytes) = (max_packets.max(1), max_bytes.max(1));
        let large_slots = (nodes as u64).max(1) * LARGE_PER_NODE;
        let half = ((max_packets / 2).max(1), (max_bytes / 2).max(1));
        let large_share = ((half.0 / large_slots).max(1), (half.1 / large_slots).max(1));
        Backlog {
            jobs: FxHashMap::default(),
            tenants: FxHashMap::default(),
            packets: 0,
            bytes: 0,
            capped_packets: 0,
            capped_bytes: 0,
            max_packets,
            max_bytes,
            caps: [half, large_share],
            large_slots,
            large_by_tenant: FxHashMap::default(),
            large_left: false,
        }
    }

    /// Whether a job of `packets` packets and `bytes` bytes is large: more than half a budget.
    pub(crate) fn is_large(&self, packets: u64, bytes: u64) -> bool {
        let (half_p, half_b) = self.caps[0];
        packets > half_p || bytes > half_b
    }

    /// Whether a large job blocked for room may now find it: fewer large jobs wait than one
    /// tenant may have (every tenant has a slot free), or one left since
    /// [`take_large_left`](Self::take_large_left) (its tenant has).
    pub(crate) fn large_slot_free(&self) -> bool {
        self.large_left || self.large() < self.large_slots
    }

    /// Large jobs waiting, all tenants together.
    fn large(&self) -> u64 {
        self.large_by_tenant.values().sum()
    }

    /// Clears the note that a large job left: the submitters waiting with large jobs were
    /// woken to look.
    pub(crate) fn take_large_left(&mut self) -> bool {
        std::mem::take(&mut self.large_left)
    }

    /// Whether `tenant` has a large slot free.
    fn large_slot_free_for(&self, tenant: TenantId) -> bool {
        self.large_by_tenant.get(&tenant).copied().unwrap_or(0) < self.large_slots
    }

    /// Packets waiting, all jobs together.
    pub(crate) fn packets(&self) -> u64 {
        self.packets
    }

    /// Whether a new job of `tenant`, of `packets` packets and `bytes` bytes, may join now:
    /// nothing waits, or it fits in both budgets with every waiting job counted for at most
    /// its cap, and every other tenant for at most its weight's share among the tenants
    /// waiting and this one (this one's share taken as at least a quarter of an equal one),
    /// each tenant's weight as `weight` gives it (the core's). A large job fits when its
    /// tenant has a large slot free and its cap fits.
    pub(crate) fn admits(
        &self,
        tenant: TenantId,
        packets: u64,
        bytes: u64,
        weight: impl Fn(TenantId) -> u64,
    ) -> bool {
        if self.packets == 0 {
            return true;
        }
        let (mut p, mut b) = (self.capped_packets, self.capped_bytes);
        let others = self.tenants.len() - usize::from(self.tenants.contains_key(&tenant));
        if others > 0 {
            // Shares by weight, this tenant's at least a quarter of an equal share, so that a
            // tenant of a small weight beside a heavy one still finds room: with weights
            // scaled by k = 4(n + 1) - 1 for n others, its weight counts for at least the
            // others' sum unscaled (1 / (4(n + 1)) of the total).
            let k = 4 * (others as u128 + 1) - 1;
            let weight = |t: TenantId| u128::from(weight(t).max(1));
            let sum: u128 = self
                .tenants
                .keys()
                .filter(|t| **t != tenant)
                .map(|t| weight(*t))
                .sum();
            let total = (weight(tenant) * k).max(sum) + sum * k;
            let share = |max: u64, w: u128| (u128::from(max) * w * k / total) as u64;
            for (t, &(tp, tb)) in &self.tenants {
                if *t != tenant {
                    let w = weight(*t);
                    p -= tp - tp.min(share(self.max_packets, w));
                    b -= tb - tb.min(share(self.max_bytes, w));
                }
            }
        }
        let (packets, bytes) = if self.is_large(packets, bytes) {
            if !self.large_slot_free_for(tenant) {
                return false;
            }
            // Counted as `add` will count it: at most its cap of each budget.
            let (cap_p, cap_b) = self.caps[1];
            (packets.min(cap_p), bytes.min(cap_b))
        } else {
            (packets, bytes)
        };
        p + packets <= self.max_packets && b + bytes <= self.max_bytes
    }

    /// Whether the backlog has drained to its low-water mark: nothing waits, or each budget is
    /// at most three quarters used (every job counted for at most its cap, as [`admits`]
    /// counts). Submitters blocked for room are woken only then, so that a saturated cluster
    /// wakes them once per quarter of a budget drained, not once per packet placed.
    ///
    /// [`admits`]: Backlog::admits
    pub(crate) fn at_low_water(&self) -> bool {
        self.packets == 0
            || (self.capped_packets <= self.max_packets - self.max_packets / 4
                && self.capped_bytes <= self.max_bytes - self.max_bytes / 4)
    }

    /// Records `packets` more waiting packets of `task` (of `tenant`), of `bytes` bytes. A job
    /// not waiting yet is large or not by these.
    pub(crate) fn add(&mut self, task: TaskId, tenant: TenantId, packets: u64, bytes: u64) {
        let large = self.is_large(packets, bytes);
        let job = match self.jobs.entry(task) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                if large {
                    *self.large_by_tenant.entry(tenant).or_default() += 1;
                }
                e.insert(Waiting {
                    packets: 0,
                    bytes: 0,
                    tenant,
                    large,
                })
            }
        };
        let (cap_p, cap_b) = self.caps[usize::from(job.large)];
        let (old_p, old_b) = (job.packets.min(cap_p), job.bytes.min(cap_b));
        job.packets += packets;
        job.bytes += bytes;
        let (new_p, new_b) = (job.packets.min(cap_p), job.bytes.min(cap_b));
        let (tp, tb) = self.tenants.entry(job.tenant).or_insert((0, 0));
        *tp = *tp - old_p + new_p;
        *tb = *tb - old_b + new_b;
        self.capped_packets = self.capped_packets - old_p + new_p;
        self.capped_bytes = self.capped_bytes - old_b + new_b;
        self.packets += packets;
        self.bytes += bytes;
    }

    /// Records that one packet of `task`, of `bytes` bytes, left for a node.
    pub(crate) fn remove(&mut self, task: TaskId, bytes: u64) {
        let Entry::Occupied(mut e) = self.jobs.entry(task) else {
            return;
        };
        let job = e.get_mut();
        let (cap_p, cap_b) = self.caps[usize::from(job.large)];
        let (old_p, old_b) = (job.packets.min(cap_p), job.bytes.min(cap_b));
        job.packets = job.packets.saturating_sub(1);
        job.bytes = job.bytes.saturating_sub(bytes);
        let (new_p, new_b) = (job.packets.min(cap_p), job.bytes.min(cap_b));
        self.capped_packets = self.capped_packets - old_p + new_p;
        self.capped_bytes = self.capped_bytes - old_b + new_b;
        self.packets = self.packets.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(bytes);
        if let Entry::Occupied(mut t) = self.tenants.entry(job.tenant) {
            let (tp, tb) = t.get_mut();
            *tp = *tp - old_p + new_p;
            *tb = *tb - old_b + new_b;
            // Every waiting job counts for a packet at least.
            if *tp == 0 {
                t.remove();
            }
        }
        if job.packets == 0 {
            if job.large {
                self.large_left = true;
                if let Entry::Occupied(mut n) = self.large_by_tenant.entry(job.tenant) {
                    *n.get_mut() -= 1;
                    if *n.get() == 0 {
                        n.remove();
                    }
                }
            }
            e.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: TenantId = TenantId::DEFAULT;

    /// Every tenant's weight, where a test sets none: 1.
    fn w(_: TenantId) -> u64 {
        1
    }

    #[test]
    fn a_flooding_tenant_leaves_room_for_another() {
        let mut b = Backlog::new(8, 1 << 20, 1);
        let noisy = TenantId(1);
        let quiet = TenantId(2);
        for task in 0..8 {
            assert!(b.admits(noisy, 1, 16, w));
            b.add(TaskId(task), noisy, 1, 16);
        }
        assert!(
            !b.admits(noisy, 1, 16, w),
            "the noisy tenant filled the budget"
        );
        // To the quiet tenant the noisy one counts for half: four packets of room.
        for task in 100..104 {
            assert!(b.admits(quiet, 1, 16, w));
            b.add(TaskId(task), quiet, 1, 16);
        }
        assert!(!b.admits(quiet, 1, 16, w));
        for task in 100..104 {
            b.remove(TaskId(task), 16);
        }
        assert!(
            !b.tenants.contains_key(&quiet),
            "a tenant with nothing waiting leaves"
        );
        assert!(b.admits(quiet, 4, 64, w));
    }

    #[test]
    fn tenants_fill_the_budget_by_their_weights() {
        // Weights 1 and 3, both flooding a budget of 16 packets: each fills its weight's share,
        // as it sees the other, 4 and 12 packets.
        let mut b = Backlog::new(16, 1 << 20, 1);
        let (light, heavy) = (TenantId(1), TenantId(2));
        let heavy_weight = std::cell::Cell::new(3);
        let w = |t: TenantId| if t == heavy { heavy_weight.get() } else { 1 };
        let mut task = 0;
        let mut fill = |b: &mut Backlog, t: TenantId| {
            let mut n = 0;
            while b.admits(t, 1, 16, w) {
                task += 1;
                b.add(TaskId(task), t, 1, 16);
                n += 1;
            }
            n
        };
        assert_eq!(fill(&mut b, light), 16, "alone, the whole budget");
        // To the heavy tenant the light one counts for a quarter: 12 packets of room.
        assert_eq!(fill(&mut b, heavy), 12);
        assert_eq!(b.tenants[&light].0, 16);
        // The light tenant sees the heavy one at its 12 and itself in full: no room, until
        // its own work drains under its quarter.
        assert_eq!(fill(&mut b, light), 0);
        // Equal weights again: each other tenant counts for half.
        heavy_weight.set(1);
        assert!(
            !b.admits(heavy, 1, 16, w),
            "12 of its own and the other's 8: full"
        );
    }

    #[test]
    fn a_tenant_of_a_small_weight_finds_room_beside_a_heavy_one() {
        // Weights 1 and 1000 on a budget of 64 packets: to the light tenant the heavy one
        // counts for 7/8, leaving it 8 packets, where a share by weight alone would leave none.
        let mut b = Backlog::new(64, 1 << 20, 1);
        let (light, heavy) = (TenantId(1), TenantId(2));
        let w = |t: TenantId| if t == heavy { 1000 } else { 1 };
        let mut task = 0;
        while b.admits(heavy, 1, 16, w) {
            task += 1;
            b.add(TaskId(task), heavy, 1, 16);
        }
        assert_eq!(task, 64);
        assert!(b.admits(light, 8, 128, w), "a job of 8 packets fits");
        assert!(!b.admits(light, 9, 144, w));
        b.add(TaskId(1000), light, 8, 128);
        // The heavy tenant, its 64 packets waiting, finds no room until they drain.
        assert!(!b.admits(heavy, 1, 16, w));
        b.remove(TaskId(1), 16);
        assert!(b.admits(heavy, 1, 16, w));
    }

    #[test]
    fn a_giant_job_leaves_room_for_small_ones() {
        let mut b = Backlog::new(1024, 16 << 20, 1);
        assert!(
            b.admits(T0, 4096, 64 << 20, w),
            "an empty backlog admits anything"
        );
        b.add(TaskId(1), T0, 4096, 64 << 20);
        assert!(b.admits(T0, 1, 16, w), "a small job behind the giant");
        assert!(b.admits(T0, 4, 64 << 10, w));
        assert!(b.admits(T0, 4096, 64 << 20, w), "a second giant joins it");
        b.add(TaskId(9), T0, 4096, 64 << 20);
        assert!(!b.admits(T0, 4096, 64 << 20, w), "a third giant waits");
        assert!(
            !b.admits(T0, 600, 600 << 10, w),
            "more packets than the other half"
        );
        b.add(TaskId(2), T0, 1, 16);
        b.remove(TaskId(2), 16);
        for task in [1, 9] {
            for _ in 0..4096 {
                b.remove(TaskId(task), 16 << 10);
            }
        }
        assert_eq!(b.packets(), 0);
        assert_eq!((b.capped_packets, b.capped_bytes), (0, 0));
    }

    #[test]
    fn each_tenant_has_its_own_large_slots() {
        // One node: two large jobs of each tenant wait at once.
        let mut b = Backlog::new(1024, 16 << 20, 1);
        let (noisy, quiet) = (TenantId(1), TenantId(2));
        for task in 1..=2 {
            assert!(
                b.admits(noisy, 1024, 16 << 20, w),
                "the noisy tenant's {task}"
            );
            b.add(TaskId(task), noisy, 1024, 16 << 20);
        }
        assert!(
            !b.admits(noisy, 1024, 16 << 20, w),
            "the noisy tenant's third"
        );
        assert!(
            !b.large_slot_free(),
            "no waiter need look: the slots are taken"
        );
        assert!(
            b.admits(quiet, 1024, 16 << 20, w),
            "the quiet tenant's first"
        );
        b.add(TaskId(3), quiet, 1024, 16 << 20);
        // A job of the noisy tenant is placed whole: its slot frees, and the waiters are told.
        for _ in 0..1024 {
            b.remove(TaskId(1), 16 << 10);
        }
        assert!(b.large_slot_free());
        assert!(b.admits(noisy, 1024, 16 << 20, w));
        assert!(b.take_large_left());
        assert!(!b.large_slot_free(), "told once");
        for (task, tenant) in [(2, noisy), (3, quiet)] {
            for _ in 0..1024 {
                b.remove(TaskId(task), 16 << 10);
            }
            assert!(!b.large_by_tenant.contains_key(&tenant));
        }
        assert_eq!((b.packets(), b.large()), (0, 0));
    }

    #[test]
    fn large_jobs_wait_together_two_per_node() {
        // Two nodes: four large jobs of a tenant wait at once, sharing half of each budget.
        let mut b = Backlog::new(1024, 16 << 20, 2);
        let large = [1, 2, 10, 11];
        for task in large {
            assert!(b.admits(T0, 4096, 64 << 20, w), "large job {task}");
            b.add(TaskId(task), T0, 4096, 64 << 20);
        }
        assert_eq!((b.capped_packets, b.capped_bytes), (512, 8 << 20));
        assert!(!b.admits(T0, 4096, 64 << 20, w), "a fifth large job waits");
        assert!(
            !b.admits(T0, 513, 16, w),
            "more packets than half a budget is large"
        );
        // Small jobs have the other half.
        assert!(b.admits(T0, 512, 8 << 20, w));
        b.add(TaskId(3), T0, 512, 8 << 20);
        assert!(!b.admits(T0, 1, 16, w), "the budget is full");
        // A large job that has drained below its cap counts for what is left, and a slot
        // frees only when it has left altogether.
        for _ in 0..4000 {
            b.remove(TaskId(1), 16 << 10);
        }
        assert!(!b.admits(T0, 4096, 64 << 20, w), "the first still waits");
        for _ in 0..96 {
            b.remove(TaskId(1), 16 << 10);
        }
        assert!(b.admits(T0, 4096, 64 << 20, w), "its slot is free");
        // A job large in bytes alone counts its few packets, as `add` counts them: four
        // packets of 16 MiB fit beside a budget of packets all but four full.
        let mut bytes_only = Backlog::new(1024, 16 << 20, 2);
        bytes_only.add(TaskId(7), T0, 510, 510);
        bytes_only.add(TaskId(8), T0, 510, 510);
        assert!(bytes_only.admits(T0, 4, 64 << 20, w));
        assert!(!bytes_only.admits(T0, 5, 64 << 20, w));
        // A job grown past half by later packets (a stream) stays what it was when it came.
        b.add(TaskId(3), T0, 600, 600);
        assert!(!b.jobs[&TaskId(3)].large);
        for task in [2, 3, 10, 11] {
            while b.jobs.contains_key(&TaskId(task)) {
                b.remove(TaskId(task), 16 << 10);
            }
        }
        assert_eq!(b.packets(), 0);
        assert_eq!((b.capped_packets, b.capped_bytes, b.large()), (0, 0, 0));
        assert!(b.tenants.is_empty());
    }

    #[test]
    fn low_water_is_three_quarters_of_each_budget() {
        let mut b = Backlog::new(8, 1 << 20, 1);
        assert!(b.at_low_water(), "nothing waits");
        for task in 0..8 {
            b.add(TaskId(task), T0, 1, 16);
        }
        assert!(!b.admits(T0, 1, 16, w));
        assert!(!b.at_low_water());
        b.remove(TaskId(0), 16);
        assert!(b.admits(T0, 1, 16, w), "room for one more");
        assert!(!b.at_low_water(), "7 of 8 packets");
        b.remove(TaskId(1), 16);
        assert!(b.at_low_water(), "6 of 8 packets");
        // The bytes budget counts too, with a job counted for at most half of it.
        let mut b = Backlog::new(1024, 1000, 1);
        b.add(TaskId(1), T0, 1, 400);
        b.add(TaskId(2), T0, 1, 400);
        assert!(!b.at_low_water(), "800 of 1000 bytes");
        b.remove(TaskId(2), 400);
        b.add(TaskId(3), T0, 1, 350);
        assert!(b.at_low_water(), "750 of 1000 bytes");
    }

    #[test]
    fn many_small_jobs_meet_the_bound_empty_ones_included() {
        let mut b = Backlog::new(8, 1 << 20, 1);
        let mut admitted = 0;
        for task in 0..100 {
            if b.admits(T0, 1, 0, w) {
                b.add(TaskId(task), T0, 1, 0);
                admitted += 1;
            }
        }
        assert_eq!(admitted, 8);
        // A bound of one packet still holds: the first job counts for all of it.
        let mut one = Backlog::new(1, 1, 1);
        assert!(one.admits(T0, 1, 0, w));
        one.add(TaskId(0), T0, 1, 0);
        assert!(!one.admits(T0, 1, 0, w));
    }
}
