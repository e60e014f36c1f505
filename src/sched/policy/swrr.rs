//! PLACEHOLDER: to be replaced by the real `swrr` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct SmoothWeighted {}

impl SmoothWeighted {
    /// PLACEHOLDER.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for SmoothWeighted {
    fn name(&self) -> &'static str {
        "swrr"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
