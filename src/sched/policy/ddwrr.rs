//! PLACEHOLDER: to be replaced by the real `ddwrr` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct Ddwrr {}

impl Ddwrr {
    /// PLACEHOLDER.
    pub const DEFAULT_SMOOTHING: f64 = 0.3;
    /// PLACEHOLDER.
    pub fn new(_smoothing: f64) -> Result<Self, ConfigError> {
        Ok(Self::default())
    }
}

impl Policy for Ddwrr {
    fn name(&self) -> &'static str {
        "ddwrr"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
