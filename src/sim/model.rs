//! Simulated nodes and how their speeds are chosen.

use rand::{Rng, RngExt};

use crate::packet::{Cmd, UnitTimes};

/// A simulated node: its unit time per command, its queue capacity, in the model's units, and
/// its lanes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeModel {
    /// Time to serve one unit-length packet, per command.
    pub unit_times: UnitTimes,
    /// Queue capacity in length units (the packets in service included).
    pub capacity: u64,
    /// How many dependent packets of different jobs the node serves at once, as one lane set
    /// (docs/ALGORITHM.md §15.3); 1, the paper's node, serves one packet at a time.
    pub lanes: u32,
}

impl NodeModel {
    /// A node of the paper's model (one lane).
    pub fn new(unit_times: UnitTimes, capacity: u64) -> Self {
        NodeModel {
            unit_times,
            capacity,
            lanes: 1,
        }
    }

    /// The same node with `lanes` lanes (at least 1).
    pub fn with_lanes(mut self, lanes: u32) -> Self {
        self.lanes = lanes.max(1);
        self
    }

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
                .map(|&t| NodeModel::new(UnitTimes::uniform(t), capacity))
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
    NodeModel::new(UnitTimes(t), capacity)
}
