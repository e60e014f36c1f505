//! PLACEHOLDER: to be replaced by the real `entropy` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct Entropy {}

impl Entropy {
    /// PLACEHOLDER.
    pub const DEFAULT_STEP: f64 = 5.0;
    /// PLACEHOLDER.
    pub const DEFAULT_SIGMA: f64 = 0.1;
    /// PLACEHOLDER.
    pub const DEFAULT_OVERLOAD: f64 = 0.9;
    /// PLACEHOLDER.
    pub fn new(_step: f64, _sigma: f64, _overload: f64) -> Result<Self, ConfigError> {
        Ok(Self::default())
    }
}

impl Policy for Entropy {
    fn name(&self) -> &'static str {
        "entropy"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
