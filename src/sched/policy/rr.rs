//! PLACEHOLDER: to be replaced by the real `rr` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {}

impl RoundRobin {
    /// PLACEHOLDER.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for RoundRobin {
    fn name(&self) -> &'static str {
        "rr"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
