//! `entropy`: the dynamic-weight balancer of seed `000_…` (Zheng Songyi et al., "基于Nginx的动态
//! 权重负载均衡技术研究", 2024; docs/ALGORITHM.md §11.8): index coefficients by the entropy method, an
//! initial weight from each node's weighted remaining capacity, a balance value σ that decides
//! whether weights are adjusted, and an alarm when every node is overloaded.
//!
//! **Indices.** The seed reads each server's CPU, memory, disk I/O and network use. A node here
//! has one resource, its queue, seen three ways; each index is a use share in [0, 1], 0 for an
//! empty node and 1 for a full one:
//! - memory → bytes: `o_i = queued_bytes_i / capacity_i`;
//! - network (Nginx's connections) → packet slots: `q_i = n_i / (n_i + remaining_i / unit_len)`,
//!   n_i the queued packets and the free room counted in unit-length packets, so many short
//!   packets use more of the node than their bytes say;
//! - CPU → time: `τ_i = Q_i / (Q_i + remaining_i · t̄_i / unit_len)`, Q_i the queued work and
//!   t̄_i the node's mean unit time over the four commands: the share of the node's queue-time
//!   in use, above `o_i` when the queue holds its slower command.
//!
//! With unit-length packets of one command, o = q = τ. Disk I/O has no counterpart. Shares of
//! the cluster's work (as `zorder` uses) would not do here: they sum to 1, so "every node
//! overloaded" could never be seen. And as the entropy method gives no weight to an index that
//! is equally high on every node, only indices that all saturate together keep the alarm sound
//! whatever the coefficients: a full node has β = 1.
//!
//! **Rule,** at every packet, over all n nodes of the cluster (the status table is exact, so
//! each packet is one of the source's collection periods):
//! 1. Entropy method (eqs. 7–10): p_ij = x_ij / Σ_i x_ij (1/n when the column is all 0),
//!    E_j = −(1/ln n)·Σ_i p_ij ln p_ij, w_j = (1 − E_j) / Σ_k (1 − E_k); equal coefficients when
//!    no index tells the nodes apart (every E_j = 1, or n = 1). The seed first squeezes each
//!    index into [0, 1]; these already are use shares in [0, 1], and p is unchanged by any
//!    rescaling, so they are used as they are (a min–max rescaling would give the least used
//!    node p = 0 in every index and, with two nodes, every index the same weight).
//! 2. Use ratio (eqs. 11–12): β_i = Σ_j w_j·x_ij; balance value (eq. 13): σ = the standard
//!    deviation of the β_i around their mean β̄.
//! 3. Initial weight (eqs. 1–5): W_i = A·Σ_j w_j·P_ij / Σ_k P_kj, node i's weighted share of the
//!    cluster's remaining capacity, with P = (free bytes, free unit slots, (1 − τ_i) / t_i) and
//!    t_i the unit time for the packet's command: free room counts at its size, and free time
//!    at the node's speed. A = 100 (percent; see below).
//! 4. Adjustment (eq. 14), only when σ > `sigma`: DW_i = W_i + B·β_i for a lightly loaded node,
//!    W_i − B·β_i for a heavily loaded one. The source's β is about 1 on average and compares with
//!    1; β here is an absolute use share, so "lightly" and "heavily" mean below and above the
//!    mean β̄ (β_i / β̄ against 1). When σ ≤ `sigma`, DW_i = W_i: weights unchanged.
//! 5. The node with the largest DW among the nodes with room (strategy 1), ties (within a
//!    relative 1e-9) to the lowest index.
//! 6. Alarm: when every node's β_i exceeds `overload` the cluster is overloaded. The policy
//!    counts each entry into that state ([`Policy::alarms`], which the runtime reports) and logs
//!    one warning per entry, not per packet. The state is checked whenever the policy sees the
//!    table: at each choice, placement and completion (the balancer asks for no choice while
//!    every node is full, so placements and completions must be watched too).
//!
//! **Defaults.** B = 5 is the source's step. The source scales weights by A = 1000 only to round
//! them to Nginx's integers, where B = 5 nudges a weighted round robin by half a percent; no
//! rounding is needed here, and the largest weight wins, so the scale A = 100 (percent of the
//! cluster's remaining capacity) lets the step move a busy node by up to 5 points.
//! `sigma = 0.1`: the cluster counts as unbalanced when the use ratios spread by more than ten
//! points (two nodes more than 20 points apart: one packet in a queue of four).
//! `overload = 0.9`: a node with under a tenth of its queue free, the Z-order study's memory threshold (docs/ALGORITHM.md §11.9).

use crate::packet::{Cmd, PacketMeta};
use crate::sched::error::ConfigError;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, TIE, Tolerance};
use crate::sched::policy::entry::{Entry, Param};
use crate::sched::status::{ClusterView, NodeStatus};

/// The number of indices (memory, network, CPU).
const K: usize = 3;

/// The weight scale A.
const SCALE: f64 = 100.0;

/// Entropy-method weights with balance-triggered adjustment and an overload alarm.
#[derive(Debug, Clone, PartialEq)]
pub struct Entropy {
    step: f64,
    sigma: f64,
    overload: f64,
    alarms: u64,
    overloaded: bool,
}

impl Entropy {
    /// The registry entry (docs/ALGORITHM.md §11.8).
    pub(super) const ENTRY: Entry = Entry {
        name: "entropy",
        aliases: &[],
        description: "the largest entropy-method weight of free room and speed, moved when \
                      use is unbalanced",
        params: &[
            Param::number("step", Self::DEFAULT_STEP, "weight step B, >= 0"),
            Param::number(
                "sigma",
                Self::DEFAULT_SIGMA,
                "spread of the use ratios above which weights are adjusted, >= 0",
            ),
            Param::number(
                "overload",
                Self::DEFAULT_OVERLOAD,
                "use ratio above which a node is overloaded, in [0, 1]",
            ),
        ],
        build: |p| {
            let policy = Entropy::new(p.number("step"), p.number("sigma"), p.number("overload"))?;
            Ok(Box::new(policy))
        },
    };

    /// The source's step B.
    pub const DEFAULT_STEP: f64 = 5.0;
    /// Ten points of spread in the use ratios (see the module docs).
    pub const DEFAULT_SIGMA: f64 = 0.1;
    /// A use ratio over 90 % is overloaded (see the module docs).
    pub const DEFAULT_OVERLOAD: f64 = 0.9;

    /// The policy with step B = `step`, balance threshold `sigma` and overload threshold
    /// `overload`.
    ///
    /// # Errors
    /// [`ConfigError::BadPolicyParameter`] unless `step` and `sigma` are finite and ≥ 0 and
    /// `overload` lies in [0, 1] (1 never alarms).
    pub fn new(step: f64, sigma: f64, overload: f64) -> Result<Self, ConfigError> {
        let bad = |message: String| {
            Err(ConfigError::BadPolicyParameter {
                policy: Self::ENTRY.name(),
                message,
            })
        };
        if !(step.is_finite() && step >= 0.0) {
            return bad(format!("step = {step}: must be finite and ≥ 0"));
        }
        if !(sigma.is_finite() && sigma >= 0.0) {
            return bad(format!("sigma = {sigma}: must be finite and ≥ 0"));
        }
        if !(0.0..=1.0).contains(&overload) {
            return bad(format!("overload = {overload}: must lie in [0, 1]"));
        }
        Ok(Entropy {
            step,
            sigma,
            overload,
            alarms: 0,
            overloaded: false,
        })
    }

    /// Whether the cluster was overloaded (every use ratio over the threshold) when last seen.
    pub fn overloaded(&self) -> bool {
        self.overloaded
    }

    /// Every node's indices x_i = (bytes, slots, time), each a use share in [0, 1].
    pub fn indices(view: &ClusterView<'_>) -> Vec<[f64; K]> {
        view.nodes().iter().map(indices).collect()
    }

    /// The index coefficients w_j by the entropy method; they sum to 1.
    pub fn index_weights(view: &ClusterView<'_>) -> [f64; K] {
        entropy_weights(&Self::indices(view))
    }

    /// Every node's use ratio β_i = Σ_j w_j·x_ij.
    pub fn use_ratios(view: &ClusterView<'_>) -> Vec<f64> {
        let x = Self::indices(view);
        let w = entropy_weights(&x);
        use_ratios(&x, &w)
    }

    /// The balance value σ: the standard deviation of the use ratios.
    pub fn balance(view: &ClusterView<'_>) -> f64 {
        std_dev(&Self::use_ratios(view))
    }

    /// Every node's initial weight W_i for a packet of `cmd`: A = 100 times its weighted share
    /// of the cluster's remaining capacity.
    pub fn initial_weights(view: &ClusterView<'_>, cmd: Cmd) -> Vec<f64> {
        let x = Self::indices(view);
        let w = entropy_weights(&x);
        initial_weights(view, cmd, &x, &w)
    }

    /// Every node's dynamic weight DW_i for a packet of `cmd`: the initial weight, adjusted
    /// by ±B·β_i when σ exceeds the threshold.
    pub fn dynamic_weights(&self, view: &ClusterView<'_>, cmd: Cmd) -> Vec<f64> {
        let x = Self::indices(view);
        let w = entropy_weights(&x);
        let beta = use_ratios(&x, &w);
        let mut weights = initial_weights(view, cmd, &x, &w);
        if std_dev(&beta) > self.sigma {
            let mean = mean(&beta);
            // Use ratios lie in [0, 1]: TIE serves as an absolute tolerance.
            for (dw, &b) in weights.iter_mut().zip(&beta) {
                if b < mean - TIE {
                    *dw += self.step * b;
                } else if b > mean + TIE {
                    *dw -= self.step * b;
                }
            }
        }
        weights
    }

    /// Checks for the all-overloaded state; counts and logs an entry into it.
    fn watch(&mut self, view: &ClusterView<'_>) {
        let beta = Self::use_ratios(view);
        let over = !beta.is_empty() && beta.iter().all(|&b| b > self.overload);
        if over && !self.overloaded {
            self.alarms += 1;
            log::warn!(
                "{} policy: every node of the cluster is over the overload threshold {} \
                 (use ratios {beta:.3?}); alarm {}",
                Self::ENTRY.name(),
                self.overload,
                self.alarms
            );
        }
        self.overloaded = over;
    }
}

impl Default for Entropy {
    fn default() -> Self {
        Entropy {
            step: Self::DEFAULT_STEP,
            sigma: Self::DEFAULT_SIGMA,
            overload: Self::DEFAULT_OVERLOAD,
            alarms: 0,
            overloaded: false,
        }
    }
}

/// `used / (used + free)`; 0 when both are 0.
fn share(used: f64, free: f64) -> f64 {
    if used + free > 0.0 {
        used / (used + free)
    } else {
        0.0
    }
}

fn mean_unit_time(n: &NodeStatus) -> f64 {
    n.unit_times().0.iter().sum::<f64>() / 4.0
}

fn indices(n: &NodeStatus) -> [f64; K] {
    let unit_len = n.unit_len as f64;
    let remaining = n.remaining() as f64;
    [
        n.queued_bytes() as f64 / n.capacity() as f64,
        share(f64::from(n.queued_packets()), remaining / unit_len),
        share(n.queued_work(), remaining * mean_unit_time(n) / unit_len),
    ]
}

fn entropy_weights(x: &[[f64; K]]) -> [f64; K] {
    let n = x.len();
    let equal = [1.0 / K as f64; K];
    if n < 2 {
        return equal;
    }
    let ln_n = (n as f64).ln();
    let d: [f64; K] = std::array::from_fn(|j| {
        let total: f64 = x.iter().map(|xi| xi[j]).sum();
        let e = if total > 0.0 {
            -x.iter()
                .map(|xi| xi[j] / total)
                .filter(|&p| p > 0.0)
                .map(|p| p * p.ln())
                .sum::<f64>()
                / ln_n
        } else {
            1.0
        };
        (1.0 - e).max(0.0)
    });
    let sum: f64 = d.iter().sum();
    if sum <= 1e-12 {
        return equal;
    }
    d.map(|dj| dj / sum)
}

fn use_ratios(x: &[[f64; K]], w: &[f64; K]) -> Vec<f64> {
    x.iter()
        .map(|xi| xi.iter().zip(w).map(|(x, w)| x * w).sum())
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn std_dev(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|b| (b - m) * (b - m)).sum::<f64>() / v.len().max(1) as f64).sqrt()
}

fn initial_weights(view: &ClusterView<'_>, cmd: Cmd, x: &[[f64; K]], w: &[f64; K]) -> Vec<f64> {
    let remaining: Vec<[f64; K]> = view
        .nodes()
        .iter()
        .zip(x)
        .map(|(n, xi)| {
            let free = n.remaining() as f64;
            [
                free,
                free / n.unit_len as f64,
                (1.0 - xi[2]) / n.unit_time(cmd),
            ]
        })
        .collect();
    let totals: [f64; K] = std::array::from_fn(|j| remaining.iter().map(|p| p[j]).sum());
    remaining
        .iter()
        .map(|p| {
            SCALE
                * (0..K)
                    .filter(|&j| totals[j] > 0.0)
                    .map(|j| w[j] * p[j] / totals[j])
                    .sum::<f64>()
        })
        .collect()
}

impl Policy for Entropy {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        self.watch(view);
        let weights = self.dynamic_weights(view, packet.cmd);
        Best::Largest(Tolerance::OfBest).pick(view.candidates(packet).map(|i| (i, weights[i])))
    }

    fn on_dispatch(&mut self, view: &ClusterView<'_>, _node: usize, _packet: &PacketMeta) {
        self.watch(view);
    }

    fn on_complete(&mut self, view: &ClusterView<'_>, _node: usize, _packet: &PacketMeta) {
        self.watch(view);
    }

    fn alarms(&self) -> u64 {
        self.alarms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::UnitTimes;

    fn meta(cmd: Cmd, len: u64) -> PacketMeta {
        crate::sched::policy::test_packet(cmd, false, len)
    }

    fn row(times: [f64; 4], capacity: u64, queued: &[(Cmd, u64)]) -> NodeStatus {
        let mut n = NodeStatus::new(UnitTimes(times), capacity, 16);
        for &(cmd, len) in queued {
            n.enqueue(&meta(cmd, len));
        }
        n
    }

    #[test]
    fn indices_of_bytes_slots_and_time() {
        // 64 bytes of room; one 32-byte encryption (unit time 10, mean 20): o = 1/2,
        // q = 1 / (1 + 2) = 1/3, τ = 20 / (20 + 32·20/16) = 1/3.
        let n = row([10.0, 30.0, 10.0, 30.0], 64, &[(Cmd::Encrypt, 32)]);
        let x = indices(&n);
        assert_eq!(x[0], 0.5);
        assert!((x[1] - 1.0 / 3.0).abs() < 1e-12);
        assert!((x[2] - 1.0 / 3.0).abs() < 1e-12);
        // Full: every index 1.
        let full = row([1.0; 4], 32, &[(Cmd::Decrypt, 16), (Cmd::Encrypt, 16)]);
        assert_eq!(indices(&full), [1.0; 3]);
    }

    #[test]
    fn no_information_gives_equal_coefficients() {
        assert_eq!(entropy_weights(&[[0.0; 3], [0.0; 3]]), [1.0 / 3.0; 3]);
        assert_eq!(entropy_weights(&[[0.5, 0.2, 0.1]]), [1.0 / 3.0; 3]);
        // One index equal everywhere (E = 1) gets no weight.
        let w = entropy_weights(&[[0.5, 0.1, 0.3], [0.5, 0.9, 0.3]]);
        assert!(
            w[0] < 1e-12 && w[2] < 1e-12 && (w[1] - 1.0).abs() < 1e-12,
            "{w:?}"
        );
    }

    #[test]
    fn parameters_are_checked() {
        for (b, s, o) in [
            (-1.0, 0.1, 0.9),
            (f64::NAN, 0.1, 0.9),
            (5.0, -0.1, 0.9),
            (5.0, f64::INFINITY, 0.9),
            (5.0, 0.1, 1.5),
            (5.0, 0.1, f64::NAN),
        ] {
            assert!(
                matches!(
                    Entropy::new(b, s, o),
                    Err(ConfigError::BadPolicyParameter {
                        policy: "entropy",
                        ..
                    })
                ),
                "{b} {s} {o}"
            );
        }
        assert!(Entropy::new(0.0, 0.0, 1.0).is_ok());
    }
}
