//! PLACEHOLDER: to be replaced by the real `lc` and `wlc` policies.

use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct LeastConnections {}

impl LeastConnections {
    /// PLACEHOLDER.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for LeastConnections {
    fn name(&self) -> &'static str {
        "lc"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct WeightedLeastConnections {}

impl WeightedLeastConnections {
    /// PLACEHOLDER.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for WeightedLeastConnections {
    fn name(&self) -> &'static str {
        "wlc"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
