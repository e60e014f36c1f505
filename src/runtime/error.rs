//! The service's errors, one enum per operation: building, keys, submission, a job's outcome.
//! A refused job comes back whole ([`TrySubmitError::Full`]), so nothing is lost to
//! backpressure.

use thiserror::Error;

use crate::crypto::CryptoError;
use crate::packet::{NodeId, TaskId, TenantId};
use crate::runtime::ids::{ClusterKind, KeyId};
use crate::runtime::job::Job;
use crate::sched::ConfigError;

/// Why a [`Service`](crate::runtime::Service) could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The scheduler or policy configuration is refused: an empty cluster, a node capacity
    /// below one packet, an unknown policy name, α or β out of range, ...
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The packet size must be a positive multiple of 16 bytes, at most
    /// [`ServiceBuilder::MAX_PACKET_SIZE`](crate::runtime::ServiceBuilder::MAX_PACKET_SIZE).
    #[error("packet size {0} bytes: must be a positive multiple of 16, at most 16 MiB")]
    PacketSize(usize),
    /// A node asks to be pinned to a core the machine does not have.
    #[error("node {node} asks for core {core}, but the machine has cores 0..{available}")]
    NoSuchCore {
        /// The node's index in its cluster.
        node: usize,
        /// The core asked for.
        core: usize,
        /// How many cores the machine has.
        available: usize,
    },
    /// The same kind of cluster was declared twice.
    #[error("the {0} cluster is declared twice")]
    DuplicateCluster(ClusterKind),
    /// A slowdown factor must be finite, at least 1 and at most
    /// [`NodeSpec::MAX_SLOWDOWN`](crate::runtime::NodeSpec::MAX_SLOWDOWN).
    #[error("slowdown {0} must be finite, at least 1 and at most 1000")]
    BadSlowdown(f64),
    /// A queue bound of zero could never admit anything.
    #[error("{0} must be at least 1")]
    ZeroBound(&'static str),
    /// A stall limit so short that a node running any packet would count as stalled
    /// ([`ServiceBuilder::MIN_STALL_TIMEOUT`](crate::runtime::ServiceBuilder::MIN_STALL_TIMEOUT)).
    #[error("stall timeout {0:?}: must be at least 1 ms")]
    StallTimeoutTooShort(std::time::Duration),
    /// The operating system refused a worker thread.
    #[error("could not start a worker thread: {0}")]
    Spawn(String),
    /// The pinned AES implementation cannot run here (AWS-LC, ring or OpenSSL without its
    /// feature, or lanes of a width out of range).
    #[error("AES implementation: {0}")]
    Implementation(CryptoError),
}

/// A key operation that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key bytes are refused (wrong length, not a curve point).
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// No key has this handle (never registered, or removed).
    #[error("unknown {0}")]
    UnknownKey(KeyId),
    /// The key is of another kind than the operation needs.
    #[error("{key} is not {expected}")]
    WrongKind {
        /// The key.
        key: KeyId,
        /// What the operation needs.
        expected: &'static str,
    },
    /// The operating system's random source failed while generating a key.
    #[error("random source failed: {0}")]
    Random(String),
}

/// Why a job was refused at submission. Nothing of a refused job was started.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// No key has this handle.
    #[error("unknown {0}")]
    UnknownKey(KeyId),
    /// The key is of another algorithm than the job needs.
    #[error("{key} is {got}, but the job needs {expected}")]
    WrongKeyKind {
        /// The key.
        key: KeyId,
        /// What the job needs ("an AES key", "an Ed25519 signing key", ...).
        expected: &'static str,
        /// What the key is.
        got: &'static str,
    },
    /// The job's data, IV, nonce, tag, padding or signature is malformed, or GCM was asked of
    /// a plain AES job or a stream.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// The service has no cluster for the job's algorithm.
    #[error("the service has no {0} cluster")]
    NoCluster(ClusterKind),
    /// An Ed25519 message is one packet, and this one is larger than any node's queue.
    #[error("message of {len} bytes is larger than the largest node capacity ({max} bytes)")]
    TooLarge {
        /// The message length.
        len: usize,
        /// The largest node capacity in the cluster.
        max: u64,
    },
    /// The service is shut down (or shutting down).
    #[error("the service is shut down")]
    ShutDown,
    /// Every node of the job's cluster is down (failed, and none back yet).
    #[error("every node of the {0} cluster is down")]
    NoNodeUp(ClusterKind),
    /// A blocking call on one of the service's own worker threads (from a waker or callback
    /// the service ran there) would wait for that very worker: refused instead of deadlocking.
    #[error("a blocking call on one of the service's own worker threads would deadlock it")]
    OnWorkerThread,
    /// The stream was already finished.
    #[error("the stream is finished")]
    StreamFinished,
    /// The stream holds its bound of unreceived outputs and its owner alone can make room:
    /// nothing was pushed. Receive an output first, or split the stream.
    #[error("the stream holds its bound of unreceived outputs: receive one first")]
    StreamFull,
    /// The job names a tenant the service does not have.
    #[error("unknown {0}")]
    UnknownTenant(TenantId),
}

/// Why a tenant could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TenantError {
    /// A name must be 1 to 128 bytes of `A-Z a-z 0-9 . _ -`.
    #[error("a tenant name must be 1 to 128 bytes of A-Z a-z 0-9 . _ -")]
    BadName,
    /// Another tenant has this name.
    #[error("a tenant named {0:?} is registered already")]
    Duplicate(String),
    /// A weight must be at least 1.
    #[error("a tenant's weight must be at least 1")]
    ZeroWeight,
    /// A limit, when set, must be at least 1.
    #[error("{0} must be at least 1")]
    ZeroLimit(&'static str),
    /// Every tenant id is taken.
    #[error("too many tenants")]
    TooMany,
}

/// Why [`Service::try_submit`](crate::runtime::Service::try_submit) did not take a job.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TrySubmitError {
    /// The receive queue of the job's cluster is full: the job comes back untouched.
    #[error("the receive queue is full")]
    Full(Job),
    /// The job's tenant is at one of its limits (jobs or bytes in flight, bytes per second):
    /// the job comes back untouched.
    #[error("the job's tenant is at one of its limits")]
    OverLimit(Job),
    /// The job is refused for good.
    #[error(transparent)]
    Invalid(#[from] SubmitError),
}

/// Why a submitted job failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum JobError {
    /// The cipher refused the data: bad PKCS#7 padding on decryption, or a GCM tag that does
    /// not verify ([`CryptoError::AuthenticationFailed`]; no plaintext is released).
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// A worker panicked while running one of the job's packets; the worker lives on.
    #[error("worker of {0} panicked while running the job")]
    WorkerPanicked(NodeId),
    /// The chaining state the packet needed was not in the state store (an earlier packet of
    /// the job failed).
    #[error("chaining state missing for {0}: an earlier packet of the job failed")]
    StateLost(TaskId),
    /// The scheduler refused a packet the service had checked (a bug; reported, not hidden).
    #[error("internal error: {0}")]
    Internal(String),
    /// The node running one of the job's packets failed (its worker panicked outside the
    /// cryptography, exited, or stalled past the stall timeout); the packet's result, had it
    /// come, would have been discarded.
    #[error("{0} failed while running the job")]
    NodeFailed(NodeId),
    /// Every node of the job's cluster went down while the job waited.
    #[error("every node of the {0} cluster is down")]
    NoNodeUp(ClusterKind),
    /// A blocking wait on one of the service's own worker threads (from a waker or callback
    /// the service ran there) would wait for that very worker: refused instead of deadlocking.
    #[error("waiting on one of the service's own worker threads would deadlock it")]
    OnWorkerThread,
    /// The handle's result was already taken (a future polled again after it completed).
    #[error("the job's result was already taken")]
    ResultTaken,
}
