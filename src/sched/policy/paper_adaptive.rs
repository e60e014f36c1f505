//! PLACEHOLDER: to be replaced by the real `paper-adaptive` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct PaperAdaptive {}

impl PaperAdaptive {
    /// PLACEHOLDER.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for PaperAdaptive {
    fn name(&self) -> &'static str {
        "paper-adaptive"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
