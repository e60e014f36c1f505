//! The choice most policies end with: among the candidates, the node with the largest (or the
//! smallest) score, ties to the lowest node index (docs/ALGORITHM.md §11).
//!
//! Scores are floats, and two scores that exact arithmetic would make equal can differ in their
//! last bits, which would break a tie by rounding. So a score counts as better only when it is
//! better by more than [`TIE`] times a magnitude. The policies do not all measure that
//! magnitude the same way, and each keeps its own rule ([`Tolerance`]):
//! - `paper` compares its weights exactly ([`Tolerance::Exact`]);
//! - `sed`, `entropy`, `p2c` and `wlc` relative to the best score so far
//!   ([`Tolerance::OfBest`]);
//! - `load-formula` relative to the larger of the two scores ([`Tolerance::OfLarger`]);
//! - `swrr` relative to the weight added so far in its round ([`Tolerance::Of`]).
//!
//! The candidates are offered in ascending node order and a later one takes over only when it
//! is better, so a tie goes to the lowest index.

/// The relative tolerance under which two float scores count as equal (docs/ALGORITHM.md §11):
/// far above the rounding that a few additions accumulate, far below any difference a policy
/// means.
pub(super) const TIE: f64 = 1e-9;

/// What a difference of scores must exceed, [`TIE`] times some magnitude, to count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Tolerance {
    /// Any difference counts.
    Exact,
    /// [`TIE`] times the magnitude of the best score so far.
    OfBest,
    /// [`TIE`] times the larger magnitude of the two scores.
    OfLarger,
    /// [`TIE`] times the magnitude given.
    Of(f64),
}

impl Tolerance {
    /// The margin a difference between `score` and `best` must exceed.
    fn margin(self, score: f64, best: f64) -> f64 {
        match self {
            Tolerance::Exact => 0.0,
            Tolerance::OfBest => TIE * best.abs(),
            Tolerance::OfLarger => TIE * score.abs().max(best.abs()),
            Tolerance::Of(scale) => TIE * scale.abs(),
        }
    }
}

/// How a score compares with the best so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Versus {
    /// Better by more than the tolerance: it takes over.
    Better,
    /// Within the tolerance: the earlier (lower-index) node keeps the lead.
    Tie,
    /// Worse by more than the tolerance.
    Worse,
}

/// Which end of the scale wins, and with what tolerance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Best {
    /// The largest score wins.
    Largest(Tolerance),
    /// The smallest score wins.
    Smallest(Tolerance),
}

impl Best {
    /// How `score` compares with `best`.
    ///
    /// With [`Tolerance::Exact`] this is the plain comparison: the difference of two floats is
    /// 0 only when they are equal.
    pub(super) fn versus(self, score: f64, best: f64) -> Versus {
        let (gain, tolerance) = match self {
            Best::Largest(t) => (score - best, t),
            Best::Smallest(t) => (best - score, t),
        };
        let margin = tolerance.margin(score, best);
        if gain > margin {
            Versus::Better
        } else if -gain > margin {
            Versus::Worse
        } else {
            Versus::Tie
        }
    }

    /// The node of the best score among `scored` (node index, score), offered in ascending
    /// node order; ties to the first offered. `None` when nothing is offered.
    pub(super) fn pick(self, scored: impl IntoIterator<Item = (usize, f64)>) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (i, score) in scored {
            if best.is_none_or(|(_, b)| self.versus(score, b) == Versus::Better) {
                best = Some((i, score));
            }
        }
        best.map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_go_to_the_first_offered() {
        let third = 1.0 / 3.0;
        // 0.1 + 0.2 != 0.3 in binary; within the tolerance they tie.
        let scores = [(0, 0.3), (1, 0.1 + 0.2), (2, 0.2)];
        assert_eq!(Best::Largest(Tolerance::OfBest).pick(scores), Some(0));
        assert_eq!(Best::Largest(Tolerance::Exact).pick(scores), Some(1));
        assert_eq!(Best::Smallest(Tolerance::OfBest).pick(scores), Some(2));
        assert_eq!(
            Best::Smallest(Tolerance::OfLarger).pick([(4, third), (7, third)]),
            Some(4)
        );
        assert_eq!(Best::Smallest(Tolerance::Exact).pick([]), None);
    }

    #[test]
    fn versus_is_symmetric_around_the_margin() {
        let rule = Best::Smallest(Tolerance::Of(100.0));
        assert_eq!(rule.versus(1.0, 1.0 + 50.0 * TIE), Versus::Tie);
        assert_eq!(rule.versus(1.0, 1.0 + 200.0 * TIE), Versus::Better);
        assert_eq!(rule.versus(1.0 + 200.0 * TIE, 1.0), Versus::Worse);
        assert_eq!(
            Best::Largest(Tolerance::Exact).versus(2.0, 1.0),
            Versus::Better
        );
        assert_eq!(
            Best::Largest(Tolerance::Exact).versus(1.0, 1.0),
            Versus::Tie
        );
    }
}
