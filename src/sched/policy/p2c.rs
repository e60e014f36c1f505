//! `p2c`: the power of two choices (Azar, Broder, Karlin and Upfal, "Balanced allocations",
//! SIAM J. Computing 29(1), 1999; Mitzenmacher, "The power of two choices in randomized load
//! balancing", IEEE TPDS 12(10), 2001), as tower's and Finagle's `p2c` balancers use it.
//!
//! For each packet, among the nodes with room for it (strategy 1):
//! - none: `None`; exactly one: that node, and nothing is drawn;
//! - otherwise two distinct nodes are drawn uniformly at random, and the one with less queued
//!   work ([`NodeStatus::queued_work`], the expected time to drain it, as in `wlc`) wins;
//!   a tie, equal within a relative 1e-9 (float rounding, see `best.rs`), goes to the first drawn.
//!
//! The draws come from a ChaCha8 generator seeded at construction, so a run is reproducible
//! from its seed; the stream is consumed only by packets with two or more candidates (two
//! draws each: the first uniform over the k candidates, the second over the k − 1 others).
//!
//! [`NodeStatus::queued_work`]: crate::sched::NodeStatus::queued_work

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance};
use crate::sched::policy::entry::{Entry, Param};
use crate::sched::status::ClusterView;

/// Two random candidates, the less loaded one wins.
#[derive(Debug)]
pub struct PowerOfTwo {
    rng: ChaCha8Rng,
    /// Reused buffer of the nodes with room.
    candidates: Vec<usize>,
}

impl PowerOfTwo {
    /// The registry entry (docs/ALGORITHM.md §11.12).
    pub(super) const ENTRY: Entry = Entry {
        name: "p2c",
        aliases: &[],
        description: "of two random nodes with room, the one with less queued work \
                      (power of two choices)",
        params: &[Param::integer(
            "seed",
            Self::DEFAULT_SEED,
            "seed of the random draws",
        )],
        build: |p| Ok(Box::new(PowerOfTwo::new(p.integer("seed")))),
    };

    /// The seed [`PolicySpec`](crate::sched::PolicySpec) uses when none is given.
    pub const DEFAULT_SEED: u64 = 1;

    /// The policy, its random choices seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        PowerOfTwo {
            rng: ChaCha8Rng::seed_from_u64(seed),
            candidates: Vec::new(),
        }
    }
}

impl Default for PowerOfTwo {
    fn default() -> Self {
        Self::new(Self::DEFAULT_SEED)
    }
}

impl Policy for PowerOfTwo {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        self.candidates.clear();
        self.candidates.extend(view.candidates(packet));
        let k = self.candidates.len();
        if k < 2 {
            return self.candidates.first().copied();
        }
        let a = self.rng.random_range(0..k);
        let mut b = self.rng.random_range(0..k - 1);
        if b >= a {
            b += 1;
        }
        // The first drawn is offered first, so it keeps a tie.
        Best::Smallest(Tolerance::OfBest)
            .pick([self.candidates[a], self.candidates[b]].map(|i| (i, view.node(i).queued_work())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Cmd, UnitTimes};
    use crate::sched::status::NodeStatus;

    fn meta(len: u64) -> PacketMeta {
        crate::sched::policy::test_packet(Cmd::Encrypt, false, len)
    }

    #[test]
    fn draws_are_distinct_and_uniform() {
        // Four empty nodes tie, so every choice is the first draw. Replaying the generator
        // checks the draws are as documented (two, distinct), and the counts that the first is
        // uniform.
        let rows: Vec<_> = (0..4)
            .map(|_| NodeStatus::new(UnitTimes::uniform(1.0), 64, 16))
            .collect();
        let view = ClusterView::new(&rows);
        let mut p = PowerOfTwo::new(7);
        let mut replay = ChaCha8Rng::seed_from_u64(7);
        let mut counts = [0u32; 4];
        for _ in 0..4000 {
            let a = replay.random_range(0..4usize);
            let b = replay.random_range(0..3usize);
            assert_ne!(a, if b >= a { b + 1 } else { b });
            let got = p.select(&view, &meta(16)).unwrap();
            assert_eq!(got, a);
            counts[got] += 1;
        }
        assert!(
            counts.iter().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn one_candidate_draws_nothing() {
        let mut rows: Vec<_> = (0..3)
            .map(|_| NodeStatus::new(UnitTimes::uniform(1.0), 32, 16))
            .collect();
        rows[0].enqueue(&meta(32));
        rows[2].enqueue(&meta(32));
        let view = ClusterView::new(&rows);
        let mut p = PowerOfTwo::new(3);
        for _ in 0..10 {
            assert_eq!(p.select(&view, &meta(16)), Some(1));
        }
        assert_eq!(p.select(&view, &meta(32)), Some(1));
        let fresh = PowerOfTwo::new(3);
        assert_eq!(p.rng, fresh.rng);
    }
}
