//! The scheduler core's errors: a configuration it refuses, a packet it hands back, a call
//! that does not match its state. Errors that refuse a packet hand the packet back (as
//! crossbeam's `TrySendError` does), so nothing is lost to backpressure.

use thiserror::Error;

use crate::packet::{ClusterId, NodeId, Packet, ParseError, TaskId, TenantId};

/// A configuration the scheduler core (or a policy) refuses.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// There are no clusters at all.
    #[error("the scheduler needs at least one cluster")]
    NoClusters,
    /// A cluster with no nodes could never serve a packet.
    #[error("{0} has no nodes")]
    EmptyCluster(ClusterId),
    /// A node's queue capacity must hold at least one packet of the largest size.
    #[error("{node} has capacity {capacity} bytes, smaller than one packet of {packet} bytes")]
    CapacityTooSmall {
        /// The node.
        node: NodeId,
        /// Its capacity in bytes.
        capacity: u64,
        /// The packet size it must hold.
        packet: u64,
    },
    /// A cluster queue of zero packets could never accept one.
    #[error("{0} has a queue of zero packets")]
    ZeroClusterQueue(ClusterId),
    /// Unit times must be finite and positive.
    #[error("{node} has an invalid unit time {value} (must be finite and > 0)")]
    BadUnitTime {
        /// The node.
        node: NodeId,
        /// The value given.
        value: f64,
    },
    /// α and β of the paper's weight must lie in [0, 1] and not both be zero.
    #[error("alpha = {alpha} and beta = {beta}: each must lie in [0, 1], and not both be 0")]
    BadWeights {
        /// The speed coefficient.
        alpha: f64,
        /// The remaining-capacity coefficient.
        beta: f64,
    },
    /// A policy parameter is out of range.
    #[error("policy {policy}: {message}")]
    BadPolicyParameter {
        /// The policy name.
        policy: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A tenant's weight must be at least 1.
    #[error("{0}: a weight must be at least 1")]
    ZeroTenantWeight(TenantId),
    /// A policy name (or parameter list) that does not parse.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

/// Why the scheduler core refused a packet; the packet comes back with the reason.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ArriveError<D> {
    /// The packet's cluster queue and the wait queue are full: try again after a completion.
    #[error("cluster queue and wait queue are full")]
    Full(Packet<D>),
    /// The packet names a cluster the scheduler does not have.
    #[error("no such cluster")]
    UnknownCluster(Packet<D>),
    /// The packet is larger than every node of its cluster can ever hold.
    #[error("packet larger than any node's capacity")]
    TooLarge(Packet<D>),
}

impl<D> ArriveError<D> {
    /// The packet that was refused.
    pub fn into_packet(self) -> Packet<D> {
        match self {
            ArriveError::Full(p) | ArriveError::UnknownCluster(p) | ArriveError::TooLarge(p) => p,
        }
    }
}

/// A call into the scheduler core that does not match its state (a driver bug, reported rather
/// than panicking).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SchedError {
    /// No such node.
    #[error("{0} does not exist")]
    UnknownNode(NodeId),
    /// `complete` was called for a node that has nothing queued.
    #[error("{0} has no packet in service")]
    NodeIdle(NodeId),
    /// The task is not known to the core.
    #[error("{0} is not known to the scheduler")]
    UnknownTask(TaskId),
    /// A tenant's weight must be at least 1.
    #[error("{0}: a weight must be at least 1")]
    ZeroWeight(TenantId),
}
