//! `paper`: the node weight of docs/ALGORITHM.md §5, W_i = α·v_i + β·r_i, taken over the nodes
//! with room (strategy 1), largest weight first, ties to the lowest node index. The weights are
//! compared as they are, without the tie tolerance of the other policies (`best.rs`).
//!
//! v_i is the node's speed for the packet's command normalised over the cluster
//! ([`ClusterView::speed`]); r_i its remaining capacity share ([`ClusterView::remaining_share`]).
//! The defaults α = 0.05, β = 0.95 are the paper's best from its experiment 2.

use crate::packet::PacketMeta;
use crate::sched::error::ConfigError;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance};
use crate::sched::policy::entry::{Entry, Param};
use crate::sched::status::ClusterView;

/// The paper's weighted choice by speed and remaining capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paper {
    alpha: f64,
    beta: f64,
}

impl Paper {
    /// The registry entry (docs/ALGORITHM.md §11.1).
    pub(super) const ENTRY: Entry = Entry {
        name: "paper",
        aliases: &[],
        description: "the largest alpha x speed + beta x free room (the paper's weight)",
        params: &[
            Param::number("alpha", Self::DEFAULT_ALPHA, "speed coefficient, in [0, 1]"),
            Param::number(
                "beta",
                Self::DEFAULT_BETA,
                "free-room coefficient, in [0, 1]",
            ),
        ],
        build: |p| Ok(Box::new(Paper::new(p.number("alpha"), p.number("beta"))?)),
    };

    /// The paper's best speed coefficient (experiment 2).
    pub const DEFAULT_ALPHA: f64 = 0.05;
    /// The paper's best remaining-capacity coefficient (experiment 2).
    pub const DEFAULT_BETA: f64 = 0.95;

    /// The policy with speed coefficient `alpha` and remaining-capacity coefficient `beta`.
    ///
    /// # Errors
    /// [`ConfigError::BadWeights`] unless both lie in [0, 1] and not both are 0.
    pub fn new(alpha: f64, beta: f64) -> Result<Self, ConfigError> {
        let in_range = |x: f64| (0.0..=1.0).contains(&x);
        if !in_range(alpha) || !in_range(beta) || (alpha == 0.0 && beta == 0.0) {
            return Err(ConfigError::BadWeights { alpha, beta });
        }
        Ok(Paper { alpha, beta })
    }

    /// α.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// β.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// The weight of node `i` for `packet`.
    pub fn weight(&self, view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        self.alpha * view.speed(i, packet.cmd) + self.beta * view.remaining_share(i)
    }
}

impl Default for Paper {
    fn default() -> Self {
        Paper {
            alpha: Self::DEFAULT_ALPHA,
            beta: Self::DEFAULT_BETA,
        }
    }
}

impl Policy for Paper {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        Best::Largest(Tolerance::Exact).pick(
            view.candidates(packet)
                .map(|i| (i, self.weight(view, i, packet))),
        )
    }
}
