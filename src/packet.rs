//! The data model of docs/ALGORITHM.md §2: jobs, packets, and what a packet asks a node to do.
//!
//! A *job* (`TaskId`) is cut into *packets*; a packet names its job, the command, the cluster
//! (the paper's `cyp = cluster_id`: software picks only the cluster, the balancer picks the
//! node), the AES mode, its sequence number within the job, whether it is the job's last packet,
//! and its data. The scheduler core never looks inside the data: it is generic over a
//! [`Payload`] that only has to say how many bytes it is, so the runtime schedules real buffers
//! and the simulator schedules bare lengths with the same code.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;

use thiserror::Error;

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

/// Identifies a job (the paper's `task` / `itask`); all packets of one job carry the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub u64);

/// Identifies a cluster: the nodes that implement the same algorithm (the paper's `cyp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(pub u32);

/// Identifies a tenant: a client whose jobs share the nodes with other tenants' by weight
/// under fair admission (docs/ALGORITHM.md §15.7). A job submitted without one belongs to
/// [`TenantId::DEFAULT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TenantId(pub u32);

impl TenantId {
    /// The tenant of every job submitted without one.
    pub const DEFAULT: TenantId = TenantId(0);
}

/// Identifies a node (an "IP core"; in the runtime, a pinned worker thread).
///
/// Node ids are global: cluster 0's nodes come first, then cluster 1's, and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index into a slice of all nodes.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ClusterId {
    /// The id as an index into a slice of all clusters.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.0)
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cluster {}", self.0)
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tenant {}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.0)
    }
}

/// What a packet asks of a node (the paper's `cmd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cmd {
    /// AES encryption.
    Encrypt,
    /// AES decryption.
    Decrypt,
    /// Ed25519 signing.
    Sign,
    /// Ed25519 verification.
    Verify,
}

impl Cmd {
    /// Every command, in the order of the status table's unit-time columns.
    pub const ALL: [Cmd; 4] = [Cmd::Encrypt, Cmd::Decrypt, Cmd::Sign, Cmd::Verify];

    /// The column of this command in a per-command table such as [`UnitTimes`].
    pub fn index(self) -> usize {
        match self {
            Cmd::Encrypt => 0,
            Cmd::Decrypt => 1,
            Cmd::Sign => 2,
            Cmd::Verify => 3,
        }
    }

    /// The short name used in traces and on the command line (`enc`, `dec`, `sign`, `verify`).
    pub fn as_str(self) -> &'static str {
        match self {
            Cmd::Encrypt => "enc",
            Cmd::Decrypt => "dec",
            Cmd::Sign => "sign",
            Cmd::Verify => "verify",
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Cmd {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "enc" | "encrypt" => Ok(Cmd::Encrypt),
            "dec" | "decrypt" => Ok(Cmd::Decrypt),
            "sign" => Ok(Cmd::Sign),
            "verify" => Ok(Cmd::Verify),
            _ => Err(ParseError::new("command", s, "enc, dec, sign, verify")),
        }
    }
}

/// An AES mode of operation. `Cfb` is CFB-128 (full-block feedback).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Electronic codebook: every block on its own; packets are independent.
    Ecb,
    /// Cipher block chaining: dependent.
    Cbc,
    /// Output feedback: dependent; a partial final block is allowed.
    Ofb,
    /// Cipher feedback with 128-bit segments: dependent; a partial final block is allowed.
    Cfb,
    /// Counter mode with a 128-bit big-endian counter over the whole block (the IV is the first
    /// counter block), as openssl's `aes-*-ctr`: a stream mode (a partial final block is
    /// allowed). Packets are independent: a packet's first counter block is the IV plus its
    /// offset in blocks (docs/ALGORITHM.md §15.4).
    Ctr,
    /// Galois/counter mode, authenticated encryption with a 96-bit nonce and a 128-bit tag:
    /// dependent (the GHASH state passes from packet to packet, docs/ALGORITHM.md §15.4). Its
    /// jobs are made with `Job::gcm_encrypt` and `Job::gcm_decrypt`, not as a plain mode.
    Gcm,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 6] = [
        Mode::Ecb,
        Mode::Cbc,
        Mode::Ofb,
        Mode::Cfb,
        Mode::Ctr,
        Mode::Gcm,
    ];

    /// The modes without authentication: those of plain AES jobs and streams (every mode but
    /// GCM).
    pub const UNAUTHENTICATED: [Mode; 5] = [Mode::Ecb, Mode::Cbc, Mode::Ofb, Mode::Cfb, Mode::Ctr];

    /// Whether a packet of this mode needs the chaining state its predecessor leaves
    /// (docs/ALGORITHM.md §2: CBC, OFB and CFB chains are dependent; ECB is not; §15.4: GCM is
    /// dependent through its GHASH state, CTR is not).
    pub fn is_chained(self) -> bool {
        matches!(self, Mode::Cbc | Mode::Ofb | Mode::Cfb | Mode::Gcm)
    }

    /// Whether the mode works on whole blocks only, so that the final block must be padded
    /// (or the data be a multiple of 16 bytes). OFB, CFB, CTR and GCM act as stream modes.
    pub fn needs_whole_blocks(self) -> bool {
        matches!(self, Mode::Ecb | Mode::Cbc)
    }

    /// Whether the mode takes an IV (for GCM, the 12-byte nonce).
    pub fn takes_iv(self) -> bool {
        !matches!(self, Mode::Ecb)
    }

    /// Whether the mode authenticates its data (GCM): its jobs carry associated data and a tag.
    pub fn is_authenticated(self) -> bool {
        matches!(self, Mode::Gcm)
    }

    /// The lowercase name (`ecb`, `cbc`, `ofb`, `cfb`, `ctr`, `gcm`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ecb => "ecb",
            Mode::Cbc => "cbc",
            Mode::Ofb => "ofb",
            Mode::Cfb => "cfb",
            Mode::Ctr => "ctr",
            Mode::Gcm => "gcm",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ecb" => Ok(Mode::Ecb),
            "cbc" => Ok(Mode::Cbc),
            "ofb" => Ok(Mode::Ofb),
            "cfb" | "cfb128" => Ok(Mode::Cfb),
            "ctr" => Ok(Mode::Ctr),
            "gcm" => Ok(Mode::Gcm),
            _ => Err(ParseError::new("mode", s, "ecb, cbc, ofb, cfb, ctr, gcm")),
        }
    }
}

/// The algorithm a key belongs to and a cluster implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// AES with a 128-bit key.
    Aes128,
    /// AES with a 192-bit key.
    Aes192,
    /// AES with a 256-bit key.
    Aes256,
    /// Ed25519 signatures.
    Ed25519,
}

impl Algorithm {
    /// Whether this is one of the AES key sizes.
    pub fn is_aes(self) -> bool {
        !matches!(self, Algorithm::Ed25519)
    }

    /// The AES algorithm for a key of `len` bytes, if 16, 24 or 32.
    pub fn aes_for_key_len(len: usize) -> Option<Algorithm> {
        match len {
            16 => Some(Algorithm::Aes128),
            24 => Some(Algorithm::Aes192),
            32 => Some(Algorithm::Aes256),
            _ => None,
        }
    }

    /// The name (`aes-128`, `aes-192`, `aes-256`, `ed25519`).
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Aes128 => "aes-128",
            Algorithm::Aes192 => "aes-192",
            Algorithm::Aes256 => "aes-256",
            Algorithm::Ed25519 => "ed25519",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A per-command table of unit times: the time a node takes for one unit-length packet of each
/// [`Cmd`] (the paper's t_i = (t_i1 … t_i4)). The unit is the driver's: virtual time units in
/// the simulator, nanoseconds per unit length in the runtime. Only ratios between nodes matter
/// to most policies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitTimes(pub [f64; 4]);

impl UnitTimes {
    /// The same unit time for every command.
    pub fn uniform(t: f64) -> Self {
        UnitTimes([t; 4])
    }

    /// The unit time for `cmd`.
    pub fn get(&self, cmd: Cmd) -> f64 {
        self.0[cmd.index()]
    }

    /// Sets the unit time for `cmd`.
    pub fn set(&mut self, cmd: Cmd, t: f64) {
        self.0[cmd.index()] = t;
    }

    /// The expected time to serve `len` bytes of command `cmd`, the unit times being for
    /// packets of `unit_len` bytes: `unit time × len ÷ unit_len`.
    pub fn service_time(&self, cmd: Cmd, len: u64, unit_len: u64) -> f64 {
        self.get(cmd) * len as f64 / unit_len as f64
    }
}

/// The data a packet carries, as far as the scheduler needs to know: its length in bytes.
pub trait Payload {
    /// Length in bytes, the unit of node capacity.
    fn byte_len(&self) -> u64;
}

impl Payload for Vec<u8> {
    fn byte_len(&self) -> u64 {
        self.len() as u64
    }
}

/// A payload that is only a length: what the simulator schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Len(pub u64);

impl Payload for Len {
    fn byte_len(&self) -> u64 {
        self.0
    }
}

/// Everything about a packet except its data: what the balancer and the policies see.
///
/// Built with [`PacketMeta::new`] and its setters, so a header never lines up positional
/// arguments:
///
/// ```
/// use cryptodispatch::packet::{ClusterId, Cmd, Len, Packet, PacketMeta, TaskId};
///
/// let meta = PacketMeta::new(TaskId(7), Cmd::Encrypt, ClusterId(0)).dependent(true).at(2, false);
/// let packet = Packet::new(meta, Len(1024));
/// assert_eq!((packet.meta.seq, packet.meta.last, packet.meta.len), (2, false, 1024));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// The job this packet belongs to.
    pub task: TaskId,
    /// What the node must do.
    pub cmd: Cmd,
    /// The cluster that serves it.
    pub cluster: ClusterId,
    /// Whether the packet needs the chaining state its predecessor leaves (docs/ALGORITHM.md
    /// §2: a dependent job's packets run in order, each after the one before).
    pub dependent: bool,
    /// Sequence number within the job, from 0.
    pub seq: u32,
    /// Whether this is the job's last packet.
    pub last: bool,
    /// Length in bytes (the payload's [`Payload::byte_len`]).
    pub len: u64,
    /// The whole job's length in bytes, all its packets together, when it is known as the
    /// job is submitted (a one-shot job's); `None` when it is not (a stream's, or the paper's
    /// online model). Policies read it through the committed work of the node status table
    /// (docs/ALGORITHM.md §11.14). Kept in 32 bits, so that the header stays small: a job
    /// of 4 GiB or more, and an empty one, count as of unknown length. Read it with
    /// [`job_len`](Self::job_len).
    pub job_bytes: Option<NonZeroU32>,
    /// The tenant the job was submitted under ([`TenantId::DEFAULT`] unless set with
    /// [`tenant`](Self::tenant)); fair admission shares the nodes between tenants by weight.
    pub tenant: TenantId,
}

impl PacketMeta {
    /// The header of an independent one-packet job (sequence 0, last); set the rest with
    /// [`dependent`](Self::dependent) and [`at`](Self::at). The length is the data's, set by
    /// [`Packet::new`].
    pub fn new(task: TaskId, cmd: Cmd, cluster: ClusterId) -> Self {
        PacketMeta {
            task,
            cmd,
            cluster,
            dependent: false,
            seq: 0,
            last: true,
            len: 0,
            job_bytes: None,
            tenant: TenantId::DEFAULT,
        }
    }

    /// The same header under tenant `tenant`.
    pub fn tenant(mut self, tenant: TenantId) -> Self {
        self.tenant = tenant;
        self
    }

    /// The same header, dependent (chained) or not.
    pub fn dependent(mut self, dependent: bool) -> Self {
        self.dependent = dependent;
        self
    }

    /// The same header at sequence number `seq`, the job's last packet or not.
    pub fn at(mut self, seq: u32, last: bool) -> Self {
        self.seq = seq;
        self.last = last;
        self
    }

    /// The same header with the whole job's length in bytes known (`None`: not known).
    pub fn job_bytes(mut self, bytes: Option<u64>) -> Self {
        self.job_bytes = bytes
            .and_then(|b| u32::try_from(b).ok())
            .and_then(NonZeroU32::new);
        self
    }

    /// The whole job's length in bytes, when the header carries it.
    pub fn job_len(&self) -> Option<u64> {
        self.job_bytes.map(|b| u64::from(b.get()))
    }

    /// Whether the packet needs its predecessor's chaining state (docs/ALGORITHM.md §2: CBC,
    /// OFB and CFB jobs are dependent; ECB, sign and verify are not; §15.4: GCM jobs are
    /// dependent, CTR jobs are not).
    pub fn is_dependent(&self) -> bool {
        self.dependent
    }
}

/// A packet: the scheduling header and the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<D> {
    /// The header the scheduler reads.
    pub meta: PacketMeta,
    /// The data; opaque to the scheduler.
    pub data: D,
}

impl<D: Payload> Packet<D> {
    /// A packet of `data` with header `meta`; the header's `len` is taken from the data.
    pub fn new(mut meta: PacketMeta, data: D) -> Self {
        meta.len = data.byte_len();
        Packet { meta, data }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_independent_one_packet_jobs_until_told_otherwise() {
        let meta = PacketMeta::new(TaskId(1), Cmd::Encrypt, ClusterId(0));
        assert!(!meta.is_dependent());
        assert_eq!((meta.seq, meta.last), (0, true));
        let chained = meta.dependent(true).at(3, false);
        assert!(chained.is_dependent());
        assert_eq!((chained.seq, chained.last), (3, false));
        assert_eq!(Packet::new(chained, Len(48)).meta.len, 48);
        assert_eq!(chained.job_bytes, None);
        assert_eq!(chained.job_bytes(Some(480)).job_len(), Some(480));
        assert_eq!(chained.job_bytes(Some(0)).job_len(), None);
        assert_eq!(chained.job_bytes(Some(1 << 32)).job_len(), None);
        assert_eq!(chained.tenant, TenantId::DEFAULT);
        assert_eq!(chained.tenant(TenantId(7)).tenant, TenantId(7));
        // Forty bytes: the job's length rides in what was padding, the tenant in 4 more.
        assert_eq!(std::mem::size_of::<PacketMeta>(), 40);
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for cmd in Cmd::ALL {
            assert_eq!(cmd.as_str().parse::<Cmd>().unwrap(), cmd);
        }
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>().unwrap(), mode);
        }
        let err = "xts".parse::<Mode>().unwrap_err();
        assert!(err.to_string().contains("xts"), "{err}");
        assert!("hash".parse::<Cmd>().is_err());
    }
}
