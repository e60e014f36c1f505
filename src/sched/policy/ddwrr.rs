//! `ddwrr`: the dynamic, demand-predicting weighted round robin of seed `001_…` (Wang Wenjun,
//! "基于Nginx服务器集群负载均衡方案的研究和改进"; docs/ALGORITHM.md §11.7): dynamic weights from load
//! indices with coefficients summing to 1, a node's capacity judged on the request mix that
//! exponential smoothing predicts, and Nginx's smooth weighted round robin over the weights.
//!
//! **Predicted demand.** The seed sorts requests into four kinds by content, each a unit
//! vector, and smooths their recent sum, S_t = a·y_t + (1 − a)·S_{t−1}, to predict the coming
//! mix, which then tunes its coefficients. The four kinds are here the four commands (encrypt,
//! decrypt, sign, verify). Every placed packet (including the bound packets of dependent jobs
//! that strategy 2 places without asking the policy) updates the predicted mix in
//! [`Policy::on_dispatch`]: y_t is the one-hot vector of its command, so S is the smoothed
//! share of each command among the recent placements (S_1 = y_1, the usual start; before the
//! first placement the packet's own command stands in). The source's quadrant table that turned
//! the trend into coefficients is lost; its purpose, favouring the nodes strong at the coming
//! kind of request, is served directly: a node's unit time under the predicted mix is
//! T_i = Σ_c S_c·t_i(c).
//!
//! **Dynamic weight.** The seed gives each node a default weight from its hardware
//! performance and takes off the weight its real-time CPU, I/O, memory and bandwidth use
//! consume, weighted by coefficients K_C + K_M + K_D + K_N = 1. Here:
//! - the default weight is the node's speed under the predicted mix, relative to the fastest
//!   node of the cluster: s_i = T_min / T_i (1 for the fastest). It is the only hardware
//!   performance that differs between nodes (queue size shows in the use shares below);
//! - the use shares, each in [0, 1], 0 for an empty node and 1 for a full one:
//!   - CPU → time, τ_i = Q_i / (Q_i + T_i·remaining_i / unit_len), Q_i the [`queued_work`]:
//!     the share of the node's queue-time in use, the free room counted at the predicted mix;
//!   - memory → bytes, o_i = queued_bytes_i / capacity_i;
//!   - disk I/O and network → packet slots, q_i = n_i / (n_i + remaining_i / unit_len), n_i
//!     the queued packets (Nginx's connections): each packet is one transfer in and one out,
//!     whatever its size;
//! - DW_i = s_i · (K_C·(1 − τ_i) + K_M·(1 − o_i) + K_DN·(1 − q_i)), the default weight less
//!   the consumed part, with (K_C, K_M, K_DN) = (0.35, 0.25, 0.2 + 0.2) from the "most commonly
//!   used" dynamic-feedback vector K = (0.35, 0.25, 0.2, 0.2) for (CPU, memory, disk, network)
//!   that the Z-order study quotes (docs/ALGORITHM.md §11.9; the Nginx study leaves them to the
//!   administrator).
//!
//! Empty nodes thus share the packets in proportion to their speed on the coming mix, and a
//! queue that fills takes weight off its node. With packets of the unit length and one
//! command, τ = o = q. The source's fuzzy product-mean correction, whose formulas are lost, is
//! not reproduced.
//!
//! **Selection.** Nginx's smooth weighted round robin over the nodes with room (strategy 1),
//! with integer weights w_i = max(1, round(1000·DW_i)) (Nginx's weights are integers; 1000 is
//! the entropy study's scaling constant A): every such node adds w_i to its current weight, the largest
//! current weight wins (ties to the lowest index, as Nginx keeps the first), and the winner
//! pays the round's total. Nodes without room sit the round out and keep their current weight.
//! The weights are recomputed from the status table at every packet, as Nginx's
//! `effective_weight` may change between rounds.
//!
//! **Default a = 0.1.** Each placement is one observation, so the smoothed mix remembers about
//! the last 1/a = 10 placements (the weight of older ones falls below 10 % after 22): about a
//! few node queues' worth, enough that a single packet of the other command does not swing
//! the weights, short enough to follow a change of mix within a couple of dozen packets.
//!
//! [`queued_work`]: crate::sched::NodeStatus::queued_work

use crate::packet::{Cmd, PacketMeta};
use crate::sched::error::ConfigError;
use crate::sched::policy::Policy;
use crate::sched::policy::entry::{Entry, Param};
use crate::sched::status::{ClusterView, NodeStatus};

/// The coefficients (K_C, K_M, K_D + K_N) of the time, byte and slot use; they sum to 1.
const K: [f64; 3] = [0.35, 0.25, 0.4];

/// The integer scale of the round-robin weights.
const SCALE: f64 = 1000.0;

/// Dynamic weights on the predicted command mix, smooth weighted round robin.
#[derive(Debug, Clone, PartialEq)]
pub struct Ddwrr {
    smoothing: f64,
    /// The smoothed command mix S_t, by [`Cmd::index`]; `None` before the first placement.
    mix: Option<[f64; 4]>,
    /// Current weight per node, by index within the cluster (grown on first use).
    current: Vec<i64>,
}

impl Ddwrr {
    /// The registry entry (docs/ALGORITHM.md §11.7).
    pub(super) const ENTRY: Entry = Entry {
        name: "ddwrr",
        aliases: &[],
        description: "smooth weighted round robin on speed for the predicted command mix, \
                      less the node's use",
        params: &[Param::number(
            "smoothing",
            Self::DEFAULT_SMOOTHING,
            "smoothing factor a of the command mix, in (0, 1]",
        )],
        build: |p| Ok(Box::new(Ddwrr::new(p.number("smoothing"))?)),
    };

    /// The smoothing factor a (see the module docs).
    pub const DEFAULT_SMOOTHING: f64 = 0.1;

    /// The policy with smoothing factor `smoothing`.
    ///
    /// # Errors
    /// [`ConfigError::BadPolicyParameter`] unless 0 < `smoothing` ≤ 1.
    pub fn new(smoothing: f64) -> Result<Self, ConfigError> {
        if !(smoothing > 0.0 && smoothing <= 1.0) {
            return Err(ConfigError::BadPolicyParameter {
                policy: Self::ENTRY.name(),
                message: format!("smoothing = {smoothing}: must lie in (0, 1]"),
            });
        }
        Ok(Ddwrr {
            smoothing,
            mix: None,
            current: Vec::new(),
        })
    }

    /// The smoothing factor a.
    pub fn smoothing(&self) -> f64 {
        self.smoothing
    }

    /// The predicted command mix S (shares by [`Cmd::index`], summing to 1) for a packet of
    /// `cmd`: the smoothed mix of the placements so far, or `cmd` alone before the first one.
    pub fn predicted_mix(&self, cmd: Cmd) -> [f64; 4] {
        self.mix.unwrap_or_else(|| one_hot(cmd))
    }

    /// The current weights of the round robin, by node index (empty before the first round).
    pub fn current_weights(&self) -> &[i64] {
        &self.current
    }

    /// The dynamic weight DW_i of every node of the cluster under the predicted mix for a
    /// packet of `cmd`, in [0, 1].
    pub fn weights(&self, view: &ClusterView<'_>, cmd: Cmd) -> Vec<f64> {
        let mix = self.predicted_mix(cmd);
        let times: Vec<f64> = view.nodes().iter().map(|n| mix_time(n, &mix)).collect();
        let t_min = times.iter().copied().fold(f64::INFINITY, f64::min);
        view.nodes()
            .iter()
            .zip(&times)
            .map(|(n, &t)| {
                let unit_len = n.unit_len as f64;
                let remaining = n.remaining() as f64;
                let time = used(n.queued_work(), t * remaining / unit_len);
                let bytes = n.queued_bytes() as f64 / n.capacity() as f64;
                let slots = used(f64::from(n.queued_packets()), remaining / unit_len);
                t_min / t * (K[0] * (1.0 - time) + K[1] * (1.0 - bytes) + K[2] * (1.0 - slots))
            })
            .collect()
    }
}

impl Default for Ddwrr {
    fn default() -> Self {
        Ddwrr {
            smoothing: Self::DEFAULT_SMOOTHING,
            mix: None,
            current: Vec::new(),
        }
    }
}

fn one_hot(cmd: Cmd) -> [f64; 4] {
    let mut y = [0.0; 4];
    y[cmd.index()] = 1.0;
    y
}

/// The node's unit time under the command mix: Σ_c S_c·t(c).
fn mix_time(n: &NodeStatus, mix: &[f64; 4]) -> f64 {
    Cmd::ALL
        .iter()
        .map(|&c| mix[c.index()] * n.unit_time(c))
        .sum()
}

/// The share in use, `used / (used + free)`; 0 when both are 0.
fn used(used: f64, free: f64) -> f64 {
    if used + free > 0.0 {
        used / (used + free)
    } else {
        0.0
    }
}

impl Policy for Ddwrr {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        if self.current.len() < view.len() {
            self.current.resize(view.len(), 0);
        }
        let weights = self.weights(view, packet.cmd);
        let mut total = 0;
        let mut best: Option<usize> = None;
        for i in view.candidates(packet) {
            let w = ((SCALE * weights[i]).round() as i64).max(1);
            self.current[i] += w;
            total += w;
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(b)
    }

    fn on_dispatch(&mut self, _view: &ClusterView<'_>, _node: usize, packet: &PacketMeta) {
        let y = one_hot(packet.cmd);
        let a = self.smoothing;
        self.mix = Some(match self.mix {
            None => y,
            Some(s) => std::array::from_fn(|c| a * y[c] + (1.0 - a) * s[c]),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::UnitTimes;

    fn meta(cmd: Cmd) -> PacketMeta {
        crate::sched::policy::test_packet(cmd, false, 16)
    }

    #[test]
    fn smoothing_follows_the_mix() {
        let rows = [NodeStatus::new(UnitTimes::uniform(1.0), 64, 16)];
        let view = ClusterView::new(&rows);
        let mut p = Ddwrr::new(0.5).unwrap();
        assert_eq!(p.predicted_mix(Cmd::Sign), [0.0, 0.0, 1.0, 0.0]);
        p.on_dispatch(&view, 0, &meta(Cmd::Encrypt));
        assert_eq!(p.predicted_mix(Cmd::Sign), [1.0, 0.0, 0.0, 0.0]);
        p.on_dispatch(&view, 0, &meta(Cmd::Decrypt));
        assert_eq!(p.predicted_mix(Cmd::Sign), [0.5, 0.5, 0.0, 0.0]);
        p.on_dispatch(&view, 0, &meta(Cmd::Decrypt));
        assert_eq!(p.predicted_mix(Cmd::Sign), [0.25, 0.75, 0.0, 0.0]);
    }

    #[test]
    fn weights_of_empty_nodes_follow_speed() {
        // Empty nodes: nothing used, so DW = s.
        let rows = [
            NodeStatus::new(UnitTimes::uniform(10.0), 64, 16),
            NodeStatus::new(UnitTimes::uniform(40.0), 64, 16),
        ];
        let view = ClusterView::new(&rows);
        let w = Ddwrr::default().weights(&view, Cmd::Encrypt);
        assert!((w[0] - 1.0).abs() < 1e-12);
        assert!((w[1] - 0.25).abs() < 1e-12);
    }

    #[test]
    fn parameters_are_checked() {
        for a in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(
                matches!(
                    Ddwrr::new(a),
                    Err(ConfigError::BadPolicyParameter {
                        policy: "ddwrr",
                        ..
                    })
                ),
                "{a}"
            );
        }
        assert!(Ddwrr::new(1.0).is_ok());
    }
}
