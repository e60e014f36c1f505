//! `load-formula`: the server-load formula of seed `004_…` (a note on NAT-based load balancing
//! of web server clusters; docs/ALGORITHM.md §11.10): L = N_s + a·N_d, with the excess over a
//! hardware limit weighted by b, and each request sent to the least loaded server.
//!
//! The seed splits requests into *static* documents, which cost every server process about the
//! same, and *dynamic* ones, which need much more processor and disk time, so that one dynamic
//! process counts a times a static one (a between 10 and 100). Here:
//! - N_d = [`queued_dependent`]: packets of dependent (CBC, OFB, CFB) jobs queued on the node.
//!   They cost no more time to serve than an ECB packet, but each one pins its job to the node
//!   (strategy 2): the job's next packets will come to this node whatever its load, so a queued
//!   dependent packet stands for more work than itself. These are the "dynamic" requests;
//! - N_s = [`queued_packets`] − N_d: the independent packets, the "static" requests, whose
//!   successors are free to go anywhere;
//! - L_i = N_s + a·N_d, in static-packet equivalents.
//!
//! The source's second formula bends L past a server's normal load limit L_l (set from its
//! hardware: past it, memory runs short and the load climbs fast), weighting the excess by
//! b, larger for weaker servers and inversely proportional to L_l so that, when every server is
//! overloaded, the weakest one does not end up with the most. The printed formulas are lost;
//! this reads them as *(reconstructed, docs/ALGORITHM.md §11.10)*:
//! - L'_i = L_i when L_i ≤ L_l,i, else L_l,i + b_i·(L_i − L_l,i);
//! - b_i = L_lmax / L_l,i, with L_lmax the largest limit in the cluster (b = 1 for the
//!   strongest node, which is thus never penalised; the source's remark that b should exceed the
//!   limit does not fit a ratio and is not followed);
//! - L_l,i = (capacity_i / len) · (t_min / t_i): the node's queue in packets of the size being
//!   placed (its hard limit: strategy 1 refuses more), scaled by its speed for the packet's
//!   command relative to the cluster's fastest node (t = [`unit_time`], t_min the smallest in
//!   the cluster). A node as fast as the fastest may fill its whole queue normally; a node half
//!   as fast is at its limit half full, since its backlog then already takes as long to clear
//!   as a full queue of the same size on the fastest node.
//!
//! The packet goes to the node with the least L' among the nodes with room (strategy 1); equal
//! loads (within a relative 1e-9, float rounding) go to the faster node for the packet's
//! command, then to the lowest index. With every node empty, that is the fastest node.
//!
//! The default a = 10 is the low end of the source's range: a dependent packet costs the same
//! service time as any other here, and its weight only stands for the job's further packets
//! that will follow it to the node, typically a handful to a few dozen.
//!
//! [`queued_dependent`]: crate::sched::NodeStatus::queued_dependent
//! [`queued_packets`]: crate::sched::NodeStatus::queued_packets
//! [`unit_time`]: crate::sched::NodeStatus::unit_time

use crate::packet::PacketMeta;
use crate::sched::error::ConfigError;
use crate::sched::policy::Policy;
use crate::sched::policy::best::{Best, Tolerance, Versus};
use crate::sched::policy::entry::{Entry, Param};
use crate::sched::status::ClusterView;

/// Least load L = N_s + a·N_d, bent past each node's hardware limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadFormula {
    a: f64,
}

impl LoadFormula {
    /// The registry entry (docs/ALGORITHM.md §11.10).
    pub(super) const ENTRY: Entry = Entry {
        name: "load-formula",
        aliases: &[],
        description: "the least load N_s + a x N_d in queued packets, bent past each node's limit",
        params: &[Param::number(
            "a",
            Self::DEFAULT_A,
            "weight of a dependent packet, >= 1",
        )],
        build: |p| Ok(Box::new(LoadFormula::new(p.number("a"))?)),
    };

    /// The low end of the source's range 10–100 (see the module docs).
    pub const DEFAULT_A: f64 = 10.0;

    /// The policy with dependent-packet weight `a`.
    ///
    /// # Errors
    /// [`ConfigError::BadPolicyParameter`] unless `a` is finite and at least 1 (a dependent
    /// packet weighs at least as much as an independent one).
    pub fn new(a: f64) -> Result<Self, ConfigError> {
        if !(a.is_finite() && a >= 1.0) {
            return Err(ConfigError::BadPolicyParameter {
                policy: Self::ENTRY.name(),
                message: format!("a = {a}: must be finite and at least 1"),
            });
        }
        Ok(LoadFormula { a })
    }

    /// The weight a of a dependent packet.
    pub fn a(&self) -> f64 {
        self.a
    }

    /// Node `i`'s load before the limit: L = N_s + a·N_d.
    pub fn load(&self, view: &ClusterView<'_>, i: usize) -> f64 {
        let n = view.node(i);
        let dependent = f64::from(n.queued_dependent());
        f64::from(n.queued_packets()) - dependent + self.a * dependent
    }

    /// Node `i`'s hardware limit L_l for `packet`: its capacity in packets of that size,
    /// times its speed for the packet's command relative to the cluster's fastest node.
    pub fn limit(view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        let t_min = view
            .nodes()
            .iter()
            .map(|n| n.unit_time(packet.cmd))
            .fold(f64::INFINITY, f64::min);
        let n = view.node(i);
        n.capacity() as f64 / packet.len.max(1) as f64 * (t_min / n.unit_time(packet.cmd))
    }

    /// Node `i`'s adjusted load L' for `packet`: L up to the limit, the excess weighted by
    /// b = L_lmax / L_l.
    pub fn adjusted_load(&self, view: &ClusterView<'_>, i: usize, packet: &PacketMeta) -> f64 {
        let load = self.load(view, i);
        let limit = Self::limit(view, i, packet);
        if load <= limit {
            return load;
        }
        let max_limit = (0..view.len())
            .map(|k| Self::limit(view, k, packet))
            .fold(0.0, f64::max);
        limit + max_limit / limit * (load - limit)
    }
}

impl Default for LoadFormula {
    fn default() -> Self {
        LoadFormula { a: Self::DEFAULT_A }
    }
}

impl Policy for LoadFormula {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let mut best: Option<(usize, f64, f64)> = None;
        for i in view.candidates(packet) {
            let load = self.adjusted_load(view, i, packet);
            let time = view.node(i).unit_time(packet.cmd);
            let better = best.is_none_or(|(_, bl, bt)| {
                match Best::Smallest(Tolerance::OfLarger).versus(load, bl) {
                    Versus::Better => true,
                    Versus::Tie => time < bt,
                    Versus::Worse => false,
                }
            });
            if better {
                best = Some((i, load, time));
            }
        }
        best.map(|(i, _, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Cmd, Mode, UnitTimes};
    use crate::sched::status::NodeStatus;

    fn meta(mode: Mode) -> PacketMeta {
        crate::sched::policy::test_packet(Cmd::Encrypt, mode.is_chained(), 16)
    }

    fn row(unit: f64, slots: u64, independent: u32, dependent: u32) -> NodeStatus {
        let mut n = NodeStatus::new(UnitTimes::uniform(unit), slots * 16, 16);
        for _ in 0..independent {
            n.enqueue(&meta(Mode::Ecb));
        }
        for _ in 0..dependent {
            n.enqueue(&meta(Mode::Cbc));
        }
        n
    }

    #[test]
    fn load_limit_and_excess() {
        // Node 0: fast, 8 slots → L_l = 8. Node 1: half as fast, 8 slots → L_l = 4, b = 2.
        let rows = [row(10.0, 8, 1, 1), row(20.0, 8, 5, 0)];
        let view = ClusterView::new(&rows);
        let p = LoadFormula::new(3.0).unwrap();
        let m = meta(Mode::Ecb);
        assert_eq!(p.load(&view, 0), 4.0); // 1 + 3·1
        assert_eq!(p.load(&view, 1), 5.0);
        assert_eq!(LoadFormula::limit(&view, 0, &m), 8.0);
        assert_eq!(LoadFormula::limit(&view, 1, &m), 4.0);
        assert_eq!(p.adjusted_load(&view, 0, &m), 4.0);
        assert_eq!(p.adjusted_load(&view, 1, &m), 4.0 + 2.0 * 1.0);
    }

    #[test]
    fn equal_loads_go_to_the_faster_node() {
        let rows = [row(20.0, 4, 1, 0), row(10.0, 4, 1, 0), row(10.0, 4, 1, 0)];
        let view = ClusterView::new(&rows);
        let mut p = LoadFormula::default();
        assert_eq!(p.select(&view, &meta(Mode::Ecb)), Some(1));
    }

    #[test]
    fn parameters_are_checked() {
        for a in [0.5, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(
                    LoadFormula::new(a),
                    Err(ConfigError::BadPolicyParameter {
                        policy: "load-formula",
                        ..
                    })
                ),
                "{a}"
            );
        }
        assert!(LoadFormula::new(1.0).is_ok());
        assert!(LoadFormula::new(100.0).is_ok());
    }
}
