//! PLACEHOLDER: to be replaced by the real `load-formula` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct LoadFormula {}

impl LoadFormula {
    /// PLACEHOLDER.
    pub const DEFAULT_A: f64 = 10.0;
    /// PLACEHOLDER.
    pub fn new(_a: f64) -> Result<Self, ConfigError> {
        Ok(Self::default())
    }
}

impl Policy for LoadFormula {
    fn name(&self) -> &'static str {
        "load-formula"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
