//! Simulated nodes and how their speeds are chosen.

use rand::{Rng, RngExt};

use crate::packet::{Cmd, UnitTimes};

/// A simulated node: its unit time per command and its queue capacity, in the model's units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeModel {
    /// Time to serve one unit-length packet, per command.
    pub unit_times: UnitTimes,
    /// Queue capacity in length units (the packet in service included).
    pub capacity: u64,
}

impl NodeModel {
    /// The service time of a packet: `unit_time(cmd) × len / unit_len`.
    pub fn service_time(&self, cmd: Cmd, len: u64, unit_len: u64) -> f64 {
        self.unit_times.get(cmd) * len as f64 / unit_len.max(1) as f64
    }
}

/// How a node set's speeds are chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeSet {
    /// `nodes` nodes whose unit time for each command is drawn uniformly from `[lo, hi]`, as in
    /// the paper's experiments (t_ij ∈ [16, 36]).
    Drawn {
        /// Number of nodes.
        nodes: usize,
        /// Lowest unit time.
        lo: f64,
        /// Highest unit time.
        hi: f64,
    },
    /// One unit time per node, the same for every command.
    Given(Vec<f64>),
    /// One node per class: node i's unit time for each command is drawn from `classes[i]`
    /// (the paper's four speed classes in experiment 1).
    Classes(Vec<(f64, f64)>),
}

impl NodeSet {
    /// The paper's default: `nodes` nodes with unit times drawn from [16, 36].
    pub fn paper(nodes: usize) -> Self {
        NodeSet::Drawn {
            nodes,
            lo: 16.0,
            hi: 36.0,
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        match self {
            NodeSet::Drawn { nodes, .. } => *nodes,
            NodeSet::Given(t) => t.len(),
            NodeSet::Classes(c) => c.len(),
        }
    }

    /// Whether the set has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nodes, each with queue capacity `capacity`; drawn speeds come from `rng`.
    pub fn build<R: Rng>(&self, capacity: u64, rng: &mut R) -> Vec<NodeModel> {
        match self {
            NodeSet::Drawn { nodes, lo, hi } => (0..*nodes)
                .map(|_| drawn(*lo, *hi, capacity, rng))
                .collect(),
            NodeSet::Classes(classes) => classes
                .iter()
                .map(|&(lo, hi)| drawn(lo, hi, capacity, rng))
                .collect(),
            NodeSet::Given(times) => times
                .iter()
                .map(|&t| NodeModel {
                    unit_times: UnitTimes::uniform(t),
                    capacity,
                })
                .collect(),
        }
    }
}

fn drawn<R: Rng>(lo: f64, hi: f64, capacity: u64, rng: &mut R) -> NodeModel {
    let mut t = [0.0; 4];
    for x in &mut t {
        *x = if hi > lo {
            rng.random_range(lo..=hi)
        } else {
            lo
        };
    }
    NodeModel {
        unit_times: UnitTimes(t),
        capacity,
    }
}
