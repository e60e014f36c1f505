//! PLACEHOLDER: to be replaced by the real `sed` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct ShortestExpectedDelay {}

impl ShortestExpectedDelay {
    /// PLACEHOLDER.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for ShortestExpectedDelay {
    fn name(&self) -> &'static str {
        "sed"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
