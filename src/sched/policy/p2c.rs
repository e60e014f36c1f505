//! PLACEHOLDER: to be replaced by the real `p2c` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct PowerOfTwo {}

impl PowerOfTwo {
    /// PLACEHOLDER.
    pub const DEFAULT_SEED: u64 = 1;
    /// PLACEHOLDER.
    pub fn new(_seed: u64) -> Self {
        Self::default()
    }
}

impl Policy for PowerOfTwo {
    fn name(&self) -> &'static str {
        "p2c"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
