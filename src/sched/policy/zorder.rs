//! PLACEHOLDER: to be replaced by the real `zorder` policy.

use crate::error::ConfigError;
use crate::packet::PacketMeta;
use crate::sched::policy::Policy;
use crate::sched::status::ClusterView;

/// PLACEHOLDER.
#[derive(Debug, Clone, Default)]
pub struct ZOrder {}

impl ZOrder {
    /// PLACEHOLDER.
    pub const DEFAULT_QUEUE: f64 = 0.9;
    /// PLACEHOLDER.
    pub const DEFAULT_BUSY: f64 = 0.75;
    /// PLACEHOLDER.
    pub fn new(_queue: f64, _busy: f64) -> Result<Self, ConfigError> {
        Ok(Self::default())
    }
}

impl Policy for ZOrder {
    fn name(&self) -> &'static str {
        "zorder"
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        view.candidates(packet).next()
    }
}
