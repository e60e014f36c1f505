//! The error types. Each operation has its own enum, so a caller matches only what can happen;
//! errors that refuse a packet hand the packet back (as crossbeam's `TrySendError` does), so
//! nothing is lost to backpressure.

use thiserror::Error;

use crate::packet::{ClusterId, NodeId, Packet, TaskId};
use crate::runtime::{ClusterKind, Job, KeyId};

/// A name that does not parse: a policy, a mode, a command.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown {what} {got:?}; expected one of: {expected}")]
pub struct ParseError {
    what: &'static str,
    got: String,
    expected: String,
}

impl ParseError {
    /// A parse error for `what` (e.g. "policy"), the text given, and the accepted names.
    pub fn new(what: &'static str, got: &str, expected: impl Into<String>) -> Self {
        ParseError {
            what,
            got: got.to_owned(),
            expected: expected.into(),
        }
    }

    /// What kind of name failed to parse ("policy", "mode", ...).
    pub fn what(&self) -> &'static str {
        self.what
    }
}

/// What can go wrong running a packet through a cipher or a signature scheme.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CryptoError {
    /// An AES key must be 16, 24 or 32 bytes; an Ed25519 key 32 bytes.
    #[error("invalid key length {got} bytes for {algorithm}; expected {expected}")]
    KeyLength {
        /// The algorithm the key was meant for.
        algorithm: &'static str,
        /// The length given.
        got: usize,
        /// The accepted lengths.
        expected: &'static str,
    },
    /// The 32 bytes are not a valid Ed25519 public key (not a point on the curve).
    #[error("the bytes are not a valid Ed25519 verifying key")]
    InvalidVerifyingKey,
    /// The IV must be 16 bytes for CBC, OFB and CFB.
    #[error("invalid IV length {got} bytes; expected 16")]
    IvLength {
        /// The length given.
        got: usize,
    },
    /// ECB and CBC without padding, and every packet but a job's last, need whole 16-byte blocks.
    #[error("data length {len} is not a multiple of the 16-byte AES block")]
    NotBlockAligned {
        /// The length given.
        len: usize,
    },
    /// The buffer given for a padded final packet has no room for the padding.
    #[error("buffer of {got} bytes cannot hold the padded message of {need} bytes")]
    NoRoomForPadding {
        /// The buffer length.
        got: usize,
        /// The padded length needed.
        need: usize,
    },
    /// The length of the input is larger than the buffer it is said to be in.
    #[error("input length {len} exceeds the buffer of {buf} bytes")]
    LengthExceedsBuffer {
        /// The input length given.
        len: usize,
        /// The buffer length.
        buf: usize,
    },
    /// PKCS#7 padding was requested on decryption and the final block does not carry it.
    #[error("bad PKCS#7 padding on decryption")]
    BadPadding,
    /// Padding applies only to ECB and CBC.
    #[error("padding is only defined for ECB and CBC")]
    PaddingNotApplicable,
    /// An Ed25519 signature is 64 bytes.
    #[error("invalid signature length {got} bytes; expected 64")]
    SignatureLength {
        /// The length given.
        got: usize,
    },
}

/// A configuration the scheduler core (or a policy) refuses.
#[derive(Debug, Clone, PartialEq, Error)]
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
    /// A policy name (or parameter list) that does not parse.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

/// Why the scheduler core refused a packet; the packet comes back with the reason.
#[derive(Debug, Error)]
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
}

/// Why a [`Service`](crate::runtime::Service) could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BuildError {
    /// The scheduler or policy configuration is refused: an empty cluster, a node capacity
    /// below one packet, an unknown policy name, α or β out of range, ...
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The packet size must be a positive multiple of 16 bytes.
    #[error("packet size {0} bytes: must be a positive multiple of 16")]
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
    /// A slowdown factor must be finite and at least 1.
    #[error("slowdown {0} must be finite and at least 1")]
    BadSlowdown(f64),
    /// A queue bound of zero could never admit anything.
    #[error("{0} must be at least 1")]
    ZeroBound(&'static str),
    /// The operating system refused a worker thread.
    #[error("could not start a worker thread: {0}")]
    Spawn(String),
}

/// A key operation that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
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
    /// The job's data, IV, padding or signature is malformed.
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
    /// The stream was already finished.
    #[error("the stream is finished")]
    StreamFinished,
}

/// Why [`Service::try_submit`](crate::runtime::Service::try_submit) did not take a job.
#[derive(Debug, Error)]
pub enum TrySubmitError {
    /// The receive queue of the job's cluster is full: the job comes back untouched.
    #[error("the receive queue is full")]
    Full(Job),
    /// The job is refused for good.
    #[error(transparent)]
    Invalid(#[from] SubmitError),
}

/// Why a submitted job failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JobError {
    /// The cipher refused the data (bad PKCS#7 padding on decryption).
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
    /// The handle's result was already taken (a future polled again after it completed).
    #[error("the job's result was already taken")]
    ResultTaken,
}

/// A malformed trace file: which line, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("trace line {line}: {message}")]
pub struct TraceError {
    line: usize,
    message: String,
}

impl TraceError {
    /// An error at `line` (1-based; 0 when the file could not be read at all).
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        TraceError {
            line,
            message: message.into(),
        }
    }

    /// The line the error is on.
    pub fn line(&self) -> usize {
        self.line
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}
