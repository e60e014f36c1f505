//! The facts fixed when a service is built: which cluster serves which kind, each node's
//! place, and the limits and sizes every part of the runtime reads.

use std::sync::Arc;
use std::time::Duration;

use crate::crypto::{AesOp, Direction, ImplTable};
use crate::packet::{ClusterId, Mode};
use crate::runtime::cut::Cutting;
use crate::runtime::ids::ClusterKind;
use crate::runtime::tenant::NodeQueue;

/// How many times the inline limit a job of a parallel AES operation (ECB, CBC and CFB
/// decryption, CTR) may be and still run on the submitting thread: the cipher's parallel path
/// runs eight blocks at once, so such a job costs about what a serial one at the limit costs.
pub(crate) const PARALLEL_INLINE_FACTOR: usize = 8;

/// Facts fixed when the service is built.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The cluster serving each kind, if the service has one.
    pub(crate) aes: Option<ClusterId>,
    pub(crate) ed25519: Option<ClusterId>,
    /// Per node: its cluster kind, pinned core and slowdown.
    pub(crate) nodes: Vec<NodeInfo>,
    /// Per cluster: its kind and its node queue (largest node capacity, most packets a node
    /// queues).
    pub(crate) clusters: Vec<(ClusterKind, NodeQueue)>,
    pub(crate) packet_size: usize,
    pub(crate) receive_queue_len: usize,
    /// Under fair admission: the bytes a cluster holds waiting for a node (see `backlog`).
    pub(crate) receive_queue_bytes: u64,
    /// How long a packet may run before its node counts as stalled; `None`: derived per
    /// packet from the node's unit times (see `health.rs`).
    pub(crate) stall_timeout: Option<Duration>,
    /// How many nodes a packet may be running on when they fail before its job fails (at
    /// least 1).
    pub(crate) max_attempts: u32,
    /// Whether packets that can run out of place do (`ServiceBuilder::out_of_place`).
    pub(crate) out_of_place: bool,
    /// The most outputs a stream holds unreceived.
    pub(crate) stream_outputs: usize,
    /// AES jobs of one packet of at most this many bytes run on the submitting thread.
    pub(crate) inline_limit: usize,
    /// Whether small jobs of tenants within their share take the light path (§15.7).
    pub(crate) light_path: bool,
    /// The most a node's worker looks for work beyond [`SPIN`](crate::runtime::hand::SPIN)
    /// before it sleeps, earned by its work ([`IdlePoll`](crate::runtime::hand::IdlePoll)).
    pub(crate) idle_poll: Duration,
    /// Whether an encryption's padding block rides in its last packet (every AES node can
    /// hold a packet and a block; see [`Cutting`]).
    pub(crate) fold_padding: bool,
    /// Which implementation each AES operation runs on, measured on its first job or pinned
    /// when the service was built (the same for every node: they share the machine's CPU).
    pub(crate) aes_impls: Arc<ImplTable>,
}

impl Layout {
    /// How AES data is cut into packets.
    pub(crate) fn cutting(&self) -> Cutting {
        Cutting {
            packet: self.packet_size,
            fold: self.fold_padding,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeInfo {
    pub(crate) kind: ClusterKind,
    /// The node's cluster (its index in the service's numbering).
    pub(crate) cluster: ClusterId,
    pub(crate) core: Option<usize>,
    pub(crate) slowdown: f64,
}

impl Layout {
    /// A node queue of `cluster`, as the light path's tests count it (§15.7): its largest
    /// node capacity in bytes and most packets.
    pub(crate) fn node_queue(&self, cluster: ClusterId) -> NodeQueue {
        self.clusters[cluster.index()].1
    }

    pub(crate) fn cluster(&self, kind: ClusterKind) -> Option<ClusterId> {
        match kind {
            ClusterKind::Aes => self.aes,
            ClusterKind::Ed25519 => self.ed25519,
        }
    }

    /// Whether a GCM job of one packet, sealing or opening as `direction` says, runs inline as
    /// far as a parallel operation ([`PARALLEL_INLINE_FACTOR`] times the limit): when the
    /// implementation chosen for it was measured at least as fast as CTR's, as ring's and
    /// AWS-LC's one-call AEAD code is. RustCrypto's GCM, whose hash runs beside the counter
    /// mode at a few times a serial mode's speed, and a pinned table, which measured nothing,
    /// keep the serial reach.
    pub(crate) fn gcm_runs_parallel(&self, direction: Direction) -> bool {
        let gcm = self.aes_impls.choice(AesOp::new(direction, Mode::Gcm));
        let ctr = self
            .aes_impls
            .choice(AesOp::new(Direction::Encrypt, Mode::Ctr));
        matches!((gcm.ns_per_byte, ctr.ns_per_byte), (Some(g), Some(c)) if g <= c)
    }
}
