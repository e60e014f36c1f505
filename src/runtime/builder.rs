//! Building a service: clusters, nodes, policy, queue sizes, packet size.

use std::fmt;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use crate::crypto::{AesImpl, BLOCK, ImplTable, MAX_LANES};
use crate::packet::{ClusterId, NodeId, UnitTimes};
use crate::runtime::engine::Engine;
use crate::runtime::error::BuildError;
use crate::runtime::health::MIN_STALL;
use crate::runtime::ids::ClusterKind;
use crate::runtime::layout::{Layout, NodeInfo};
use crate::runtime::service::Service;
use crate::runtime::supervisor::{self, NodeThread};
use crate::runtime::tenant::NodeQueue;
use crate::runtime::work::PacketData;
use crate::runtime::worker::WorkerSpec;
use crate::sched::{
    Admission, Affinity, ClusterConfig, NodeConfig, Policy, PolicySpec, SchedConfig, Scheduler,
};

/// One node of a cluster: where it runs, how much it queues, how fast it is.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    core: Option<usize>,
    capacity: Option<u64>,
    slots: u32,
    lanes: Option<usize>,
    slowdown: f64,
    unit_times: Option<UnitTimes>,
    #[cfg(feature = "fault-injection")]
    fault: Option<crate::runtime::fault::Fault>,
}

impl Default for NodeSpec {
    fn default() -> Self {
        NodeSpec {
            core: None,
            capacity: None,
            slots: NodeSpec::DEFAULT_SLOTS,
            lanes: None,
            slowdown: 1.0,
            unit_times: None,
            #[cfg(feature = "fault-injection")]
            fault: None,
        }
    }
}

impl NodeSpec {
    /// The default bound on the packets a node queues at once, whatever their size.
    pub const DEFAULT_SLOTS: u32 = 64;
    /// A usual number of lanes of an AES node: serial packets (CBC and CFB encryption, OFB) of
    /// different jobs it runs interleaved block by block (docs/ALGORITHM.md §15.3). Unless set
    /// with [`lanes`](Self::lanes), a node's lane sets are as wide as the implementation table
    /// chose for their operation; the scheduler counts this many lanes on it.
    pub const DEFAULT_LANES: usize = crate::crypto::DEFAULT_LANES;
    /// The largest slowdown factor a node may emulate (a node a thousand times slower than
    /// the machine is a test of patience, not of scheduling).
    pub const MAX_SLOWDOWN: f64 = 1000.0;

    /// An unpinned node with the default capacity, no slowdown, calibrated unit times.
    pub fn new() -> Self {
        NodeSpec::default()
    }

    /// A node pinned to core `core` (an index into the machine's cores, from 0).
    pub fn pinned(core: usize) -> Self {
        NodeSpec::new().core(core)
    }

    /// Pins the node to core `core`.
    pub fn core(mut self, core: usize) -> Self {
        self.core = Some(core);
        self
    }

    /// The node's queue capacity in bytes (default: 8 packets of the service's packet size; on
    /// an AES node, 8 packets one block longer, as a padded job's last packet may be).
    pub fn capacity(mut self, bytes: u64) -> Self {
        self.capacity = Some(bytes);
        self
    }

    /// The most packets the node queues at once, whatever their size (default
    /// [`DEFAULT_SLOTS`](Self::DEFAULT_SLOTS)): with the byte capacity, this bounds the node's
    /// queue for empty and tiny packets too.
    pub fn slots(mut self, packets: u32) -> Self {
        self.slots = packets;
        self
    }

    /// Makes the node fail once, on purpose, after completing `fault`'s number of packets:
    /// panic in the middle of a packet, stall, or have its worker thread exit (the
    /// `fault-injection` feature; for tests and chaos tests).
    #[cfg(feature = "fault-injection")]
    pub fn fault(mut self, fault: crate::runtime::fault::Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The node's lanes: at most how many packets of serial AES operations (CBC and CFB
    /// encryption, OFB) of different jobs it runs interleaved, block by block, to keep the AES
    /// unit busy (1 runs one packet at a time). By default a node takes the lane width the
    /// service's implementation table chose for the operation ([`ImplTable`]; no lane set where
    /// another implementation won). A node never waits for a lane set to fill: it runs the
    /// serial packets at the front of its queue, up to this many (docs/ALGORITHM.md §15.3).
    pub fn lanes(mut self, lanes: usize) -> Self {
        self.lanes = Some(lanes);
        self
    }

    /// Makes the node emulate an IP core `factor` times slower (≥ 1): after its real work it
    /// waits, so each packet costs `factor` times its real time. The real work is the node
    /// thread's CPU time ([`WorkClock`](crate::runtime::WorkClock)), so time the thread spent
    /// preempted is not multiplied, and at most twice the packets' usual time is
    /// ([`SlowCore`](crate::runtime::SlowCore)): a cache miss or an interrupt beyond that is
    /// counted once, not `factor` times. With the
    /// [light path](ServiceBuilder::light_path), light packets that come during the wait run
    /// at once, as a slower core would run them at its next pause, and the wait goes on after
    /// them.
    pub fn slowdown(mut self, factor: f64) -> Self {
        self.slowdown = factor;
        self
    }

    /// Declares the node's unit times (nanoseconds per packet of the service's packet size, per
    /// command) instead of measuring them at start-up. They are still refined from measured
    /// service times.
    pub fn unit_times(mut self, times: UnitTimes) -> Self {
        self.unit_times = Some(times);
        self
    }
}

/// How the policy was given.
#[derive(Clone)]
enum PolicyChoice {
    Spec(PolicySpec),
    Name(String),
    Custom(Arc<dyn Fn(ClusterId) -> Box<dyn Policy> + Send + Sync>),
}

impl fmt::Debug for PolicyChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyChoice::Spec(s) => write!(f, "{s}"),
            PolicyChoice::Name(n) => write!(f, "{n:?}"),
            PolicyChoice::Custom(_) => f.write_str("custom"),
        }
    }
}

/// Builds a [`Service`]. Start from [`Service::builder`].
///
/// Without any cluster declared, the service gets one AES cluster and one Ed25519 cluster, each
/// with one node pinned to every core of the machine, so either kind of work can use every
/// core. Nodes of different clusters pinned to the same core share it: the operating system
/// divides the core between their threads. The same holds whenever there are more nodes than
/// cores, or several nodes are pinned to one core: they time-share it, and each runs slower
/// than alone, which the calibrated and measured unit times show to the scheduler.
#[derive(Debug, Clone)]
pub struct ServiceBuilder {
    clusters: Vec<(ClusterKind, Vec<NodeSpec>)>,
    policy: PolicyChoice,
    packet_size: usize,
    cluster_queue_len: usize,
    wait_queue_len: usize,
    receive_queue_len: Option<usize>,
    receive_queue_bytes: Option<u64>,
    affinity: Affinity,
    admission: Admission,
    stall_timeout: Option<Duration>,
    max_attempts: u32,
    out_of_place: bool,
    stream_outputs: usize,
    inline_limit: usize,
    light_path: bool,
    idle_poll: Option<Duration>,
    aes_implementation: Option<AesImpl>,
}

impl Default for ServiceBuilder {
    fn default() -> Self {
        ServiceBuilder {
            clusters: Vec::new(),
            policy: PolicyChoice::Spec(PolicySpec::default()),
            packet_size: 16 * 1024,
            cluster_queue_len: 64,
            wait_queue_len: 64,
            receive_queue_len: None,
            receive_queue_bytes: None,
            affinity: Affinity::InFlight,
            admission: Admission::Fair,
            stall_timeout: None,
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            out_of_place: true,
            stream_outputs: 64,
            inline_limit: Self::DEFAULT_INLINE_LIMIT,
            light_path: false,
            idle_poll: None,
            aes_implementation: None,
        }
    }
}

impl ServiceBuilder {
    /// The largest packet size (16 MiB): a node's unit of work, and what a packet's buffer
    /// may be.
    pub const MAX_PACKET_SIZE: usize = 16 << 20;

    /// The shortest [`stall_timeout`](Self::stall_timeout): one millisecond. Under it a node
    /// running any packet counts as stalled (a limit of zero took out a node on every packet,
    /// and about half of all jobs failed as out of attempts).
    pub const MIN_STALL_TIMEOUT: Duration = Duration::from_millis(1);

    /// The default [`inline_limit`](Self::inline_limit), in bytes.
    pub const DEFAULT_INLINE_LIMIT: usize = 1024;

    /// The default [`receive_queue_len`](Self::receive_queue_len) under first come first
    /// served, in packets; the default byte bound under fair admission is this many packets of
    /// the packet size (16 MiB by default).
    pub const DEFAULT_RECEIVE_QUEUE_LEN: usize = 1024;

    /// The default [`receive_queue_len`](Self::receive_queue_len) under fair admission, in
    /// packets: the packets a cluster holds admitted and not yet on a node, beside the byte
    /// bound. What a cluster holds is what keeps its nodes busy while a submitter it blocked
    /// comes back, and on a core shared with other threads a submitter woken waits up to the
    /// kernel's time slice (1.4 ms on the machine of docs/RESULTS.md, Tenants). Of jobs of a few
    /// hundred bytes the nodes serve about a million a second, so 1024 of them held about a
    /// millisecond: a backlogged tenant's jobs ran out before its submitter came back, and two
    /// backlogged tenants weighted 1:3 were served by their submitters' turns on the core
    /// rather than by their weights. Each packet waiting costs its header beside its bytes,
    /// which the byte bound keeps at 16 MiB whatever this is.
    pub const DEFAULT_FAIR_RECEIVE_PACKETS: usize = 8192;

    /// The default of [`max_attempts`](Self::max_attempts): a packet whose node fails runs
    /// once more, on another node.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 2;

    /// The default of [`idle_poll`](Self::idle_poll) with the [light path](Self::light_path)
    /// on: 10 ms (none with it off).
    pub const DEFAULT_IDLE_POLL: Duration = Duration::from_millis(10);

    /// How many times [`inline_limit`](Self::inline_limit) a job of a parallel AES operation
    /// (ECB, CBC and CFB decryption, CTR) may be and still run inline: the cipher's parallel
    /// path runs eight blocks at once, so such a job costs about what a serial one (CBC and CFB
    /// encryption, OFB) of an eighth of its length does, and a node runs it no faster than the
    /// submitting thread would (docs/ALGORITHM.md §15.6).
    pub const PARALLEL_INLINE_FACTOR: usize = crate::runtime::layout::PARALLEL_INLINE_FACTOR;

    /// Pins `implementation` for every AES operation it can run ([`ImplTable::pinned`]: the
    /// lanes run only the serial operations, RustCrypto the rest), for experiments and
    /// comparisons. By default an operation's implementations are measured when its first job
    /// is submitted and it runs on the fastest ([`ImplTable::measured`]); the choice shows in
    /// [`Metrics::aes_implementations`](crate::runtime::Metrics::aes_implementations). AWS-LC,
    /// ring or OpenSSL without its feature is refused at [`build`](Self::build).
    pub fn aes_implementation(mut self, implementation: AesImpl) -> Self {
        self.aes_implementation = Some(implementation);
        self
    }

    /// Declares the AES cluster with these nodes.
    pub fn aes_cluster(self, nodes: impl IntoIterator<Item = NodeSpec>) -> Self {
        self.cluster(ClusterKind::Aes, nodes)
    }

    /// Declares the Ed25519 cluster with these nodes.
    pub fn ed25519_cluster(self, nodes: impl IntoIterator<Item = NodeSpec>) -> Self {
        self.cluster(ClusterKind::Ed25519, nodes)
    }

    /// Declares a cluster of `kind` with these nodes.
    pub fn cluster(mut self, kind: ClusterKind, nodes: impl IntoIterator<Item = NodeSpec>) -> Self {
        self.clusters.push((kind, nodes.into_iter().collect()));
        self
    }

    /// The node-selection policy, by value (default: `mct-wait`, [`PolicySpec::default`]).
    pub fn policy(mut self, policy: PolicySpec) -> Self {
        self.policy = PolicyChoice::Spec(policy);
        self
    }

    /// The node-selection policy, by name (`paper`, `hhs-acdid`, `paper:alpha=0.2,beta=0.8`);
    /// an unknown name is an error at [`build`](Self::build).
    pub fn policy_name(mut self, name: &str) -> Self {
        self.policy = PolicyChoice::Name(name.to_owned());
        self
    }

    /// A policy of your own: `make(cluster)` is called once per cluster.
    pub fn custom_policy(
        mut self,
        make: impl Fn(ClusterId) -> Box<dyn Policy> + Send + Sync + 'static,
    ) -> Self {
        self.policy = PolicyChoice::Custom(Arc::new(make));
        self
    }

    /// The packet size in bytes: AES jobs are cut into packets of this size (a multiple of 16;
    /// default 16 KiB). An Ed25519 job is always one packet, so the longest message an Ed25519
    /// node takes is its capacity, by default 8 packets (128 KiB at the default size; a longer
    /// one is refused with [`SubmitError::TooLarge`](crate::runtime::SubmitError::TooLarge)): for
    /// longer messages, give the Ed25519 nodes a larger
    /// [`NodeSpec::capacity`](crate::runtime::NodeSpec::capacity).
    pub fn packet_size(mut self, bytes: usize) -> Self {
        self.packet_size = bytes;
        self
    }

    /// The length of each cluster queue, in packets (default 64).
    pub fn cluster_queue_len(mut self, packets: usize) -> Self {
        self.cluster_queue_len = packets;
        self
    }

    /// The length of each cluster's wait queue, in packets (default 64; 0 for none). The
    /// paper's wait queue is shared by the clusters; here each cluster has its own, so that no
    /// lock is shared between clusters (docs/ALGORITHM.md §15.5).
    pub fn wait_queue_len(mut self, packets: usize) -> Self {
        self.wait_queue_len = packets;
        self
    }

    /// The bound of each cluster's job receive queue, in packets (default
    /// [`DEFAULT_FAIR_RECEIVE_PACKETS`](Self::DEFAULT_FAIR_RECEIVE_PACKETS), 8192, under fair
    /// admission and [`DEFAULT_RECEIVE_QUEUE_LEN`](Self::DEFAULT_RECEIVE_QUEUE_LEN), 1024,
    /// under first come first served): `submit` blocks and `try_submit` hands the job back
    /// while a job would not fit. A job larger than the bound is admitted when the queue is
    /// empty. Under fair admission the bound covers every packet admitted and not yet on a
    /// node, each job counting for at most half of it, so one giant job never holds a small one
    /// at the door; jobs larger than half (large jobs) are admitted one per node of the cluster
    /// at most, sharing the other half (docs/ALGORITHM.md §15.1).
    pub fn receive_queue_len(mut self, packets: usize) -> Self {
        self.receive_queue_len = Some(packets);
        self
    }

    /// Under fair admission, the bytes each cluster holds admitted and not yet on a node
    /// (default: [`receive_queue_len`](Self::receive_queue_len) packets of the packet size
    /// when that is set, otherwise [`DEFAULT_RECEIVE_QUEUE_LEN`](Self::DEFAULT_RECEIVE_QUEUE_LEN)
    /// packets of it: 16 MiB with the default packet size), each job counting
    /// for at most half; jobs larger than half are admitted one per node at most, as with
    /// [`receive_queue_len`](Self::receive_queue_len).
    pub fn receive_queue_bytes(mut self, bytes: u64) -> Self {
        self.receive_queue_bytes = Some(bytes);
        self
    }

    /// How long a chained job stays bound to its node. The default, [`Affinity::InFlight`],
    /// goes beyond the paper: a job is bound only while one of its packets is on the node, and
    /// between bursts (a stream waiting for its next chunk) its chaining state waits in the
    /// state store and the job may move to a better node. [`Affinity::Strict`] is the paper's
    /// rule: bound from the first packet until the last completes.
    pub fn affinity(mut self, affinity: Affinity) -> Self {
        self.affinity = affinity;
        self
    }

    /// How packets wait for a node. The default, [`Admission::Fair`], gives every job a queue
    /// of its own and serves the jobs of a cluster by deficit round robin over bytes, so a
    /// small job is not held up by a big one, chained or not. [`Admission::Fifo`] is the
    /// paper's first come first served (docs/ALGORITHM.md §3, §15.1).
    pub fn admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }

    /// How long a packet may run before its node counts as stalled and is taken out: its
    /// queued packets go to other nodes, the running packet runs again on another node (see
    /// [`max_attempts`](Self::max_attempts); on its last attempt its job fails with
    /// [`JobError::NodeFailed`](crate::runtime::JobError::NodeFailed)), and the node comes back
    /// when the stalled packet ends (docs/ALGORITHM.md §15.2). A packet is charged the time its
    /// worker thread could run, not time it waited for a CPU (on Linux; elsewhere wall time),
    /// so a busy machine does not make a node stalled. By default the limit is derived per
    /// packet from the node's unit times: 20 times the packet's expected service time, and at
    /// least 250 ms. At least [`MIN_STALL_TIMEOUT`](Self::MIN_STALL_TIMEOUT): a shorter limit
    /// is refused by [`build`](Self::build).
    pub fn stall_timeout(mut self, timeout: Duration) -> Self {
        self.stall_timeout = Some(timeout);
        self
    }

    /// On how many nodes a packet may be tried (default
    /// [`DEFAULT_MAX_ATTEMPTS`](Self::DEFAULT_MAX_ATTEMPTS), at least 1). A packet running on a
    /// node that is taken out (its worker panicked or exited, or it stalled) runs again on
    /// another node, from the same input and, for a chained job, the same state from the state
    /// store; its job fails with [`JobError::NodeFailed`](crate::runtime::JobError::NodeFailed)
    /// only once the packet was running on `attempts` nodes that failed, so one packet that
    /// brings nodes down cannot take every node down in turn. 1: the first failure fails the
    /// job. Each run keeps the packet's input until its result is delivered (see
    /// [`out_of_place`](Self::out_of_place)), except on a node alone in its cluster, whose
    /// packets have no other node to run on.
    /// Retries and packets that failed after their last attempt are counted in
    /// [`Metrics::packets_retried`](crate::runtime::Metrics::packets_retried) and
    /// [`Metrics::packets_out_of_attempts`](crate::runtime::Metrics::packets_out_of_attempts)
    /// (docs/ALGORITHM.md §15.2).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Whether a node runs out of place the packets whose implementation runs them from one
    /// buffer into another as fast as in place (default `true`): the packets of a GCM job cut
    /// into several, and ECB, CBC decryption and CTR packets on RustCrypto that are not padded
    /// there. Such a packet reads its input, kept as it was to run it again should the node
    /// fail, and writes a buffer of the node's; its output goes back into the job's buffer
    /// once it is delivered, a copy between bytes still in the cache. With `false`, or for
    /// any other packet, the node copies the packet's input before it runs it in place, and
    /// that copy reads the packet from memory before the cipher can (docs/ALGORITHM.md §15.2;
    /// what each costs on two machines: docs/RESULTS.md). Outputs are the same either way.
    pub fn out_of_place(mut self, on: bool) -> Self {
        self.out_of_place = on;
        self
    }

    /// The most outputs a [`Stream`](crate::runtime::Stream) holds unreceived (default 64): at
    /// the bound, its `push` waits for the receiver (a split stream) or answers
    /// [`SubmitError::StreamFull`](crate::runtime::SubmitError::StreamFull), and `try_push`
    /// hands the chunk back. At least 1.
    pub fn stream_outputs(mut self, outputs: usize) -> Self {
        self.stream_outputs = outputs;
        self
    }

    /// AES jobs of a serial operation (CBC and CFB encryption, OFB) or GCM of at most this
    /// many bytes, padding included, that make one packet, run on the submitting thread instead
    /// of a node (default [`DEFAULT_INLINE_LIMIT`](Self::DEFAULT_INLINE_LIMIT); 0: every job
    /// goes to a node). Jobs of a parallel operation (ECB, CBC and CFB decryption, CTR) do up
    /// to [`PARALLEL_INLINE_FACTOR`](Self::PARALLEL_INLINE_FACTOR) times as many bytes, which
    /// cost the cipher about as much, and so do GCM jobs when the implementation chosen for
    /// them was measured at least as fast as CTR's (ring's one-call code). Handing a job to a
    /// node and back costs two thread hand-offs, a few microseconds, more than the cipher
    /// spends on such a job; within the limit the job is done by the time `submit` returns
    /// (docs/ALGORITHM.md §15.6). Such a job never queues, so it takes no part in admission,
    /// backpressure or placement, and no node's slowdown applies to it. Streams' chunks always
    /// go to a node. In a service shared between tenants (once
    /// [`Service::add_tenant`](crate::runtime::Service::add_tenant) has registered one) no job
    /// runs inline by this limit: small jobs go to the nodes, where the tenants' weights share
    /// them, which they could not do on the submitters' threads. Jobs run inline are counted
    /// in [`Metrics::jobs_inline`](crate::runtime::Metrics::jobs_inline). With the
    /// [light path](Self::light_path) on, a job of one packet past the limit also runs inline
    /// while its cluster's nodes are stalled; 0 turns that off as well.
    pub fn inline_limit(mut self, bytes: usize) -> Self {
        self.inline_limit = bytes;
        self
    }

    /// Turns the light path on (default off): in a service shared between tenants, under fair
    /// admission, a job of up to four node queues of a tenant sending within its weighted
    /// share of the bytes the nodes serve goes to its node's light queue (in turns over the
    /// tenants, without the cluster's lock) and runs at the node's next pause, a slice of a
    /// few microseconds into the set it is running, rather than behind the other tenants'
    /// queued packets (docs/ALGORITHM.md §15.7). It lowers a quiet tenant's latency beside a busy one; it costs the busy ones
    /// throughput, since a light job runs as one stream rather than in a full lane set (up to
    /// a tenth of a noisy tenant's throughput beside a quiet one in `cryptodispatch-bench live
    /// --workload tenants`, a third or more behind the daemon, docs/RESULTS.md).
    ///
    /// With the light path on and inline runs allowed ([`inline_limit`](Self::inline_limit)
    /// above 0), a job of one AES or GCM packet, of any length, of a tenant that is not busy,
    /// submitted while every node of its cluster has left its light packets waiting for over
    /// 100 µs (its thread is not running), runs on the submitting thread rather than wait for
    /// the node; counted in
    /// [`Metrics::jobs_inline_stalled`](crate::runtime::Metrics::jobs_inline_stalled).
    pub fn light_path(mut self, on: bool) -> Self {
        self.light_path = on;
        self
    }

    /// How long, at most, a node's worker goes on looking for work once its queues are
    /// empty before it sleeps, beyond the 50 µs it always looks. It earns that time by
    /// working, a microsecond of looking for each microsecond of work, up to `max`, and spends
    /// it looking (yielding its core between looks to any other thread that wants it), so
    /// that looking costs a node at most as much of its core as its work did, and nothing
    /// once it has been idle a while. A sleeping node's wake-up costs tens to hundreds of
    /// microseconds on a virtual machine whose core has been idle for milliseconds, more than
    /// a small job's whole time; a node that looks through the gaps of a busy client's
    /// traffic takes a quiet tenant's light job at once (docs/ALGORITHM.md §15.7, "A node
    /// that looks before it sleeps"). Default: [`DEFAULT_IDLE_POLL`](Self::DEFAULT_IDLE_POLL)
    /// with the light path on, none with it off; `Duration::ZERO` turns it off.
    pub fn idle_poll(mut self, max: Duration) -> Self {
        self.idle_poll = Some(max);
        self
    }

    /// The most a node looks for work before it sleeps, as set, or by default
    /// [`DEFAULT_IDLE_POLL`](Self::DEFAULT_IDLE_POLL) with the light path on and nothing
    /// without ([`idle_poll`](Self::idle_poll)).
    fn idle_poll_most(&self) -> Duration {
        self.idle_poll.unwrap_or(if self.light_path {
            Self::DEFAULT_IDLE_POLL
        } else {
            Duration::ZERO
        })
    }

    /// Each cluster's admission bounds, packets and bytes: as set, or by default
    /// [`DEFAULT_FAIR_RECEIVE_PACKETS`](Self::DEFAULT_FAIR_RECEIVE_PACKETS) packets under fair
    /// admission ([`DEFAULT_RECEIVE_QUEUE_LEN`](Self::DEFAULT_RECEIVE_QUEUE_LEN) under first
    /// come first served), and the bytes of the packets set, or of the default length, of the
    /// packet size.
    fn receive_bounds(&self) -> (usize, u64) {
        let packets = self.receive_queue_len.unwrap_or(match self.admission {
            Admission::Fair => Self::DEFAULT_FAIR_RECEIVE_PACKETS,
            Admission::Fifo => Self::DEFAULT_RECEIVE_QUEUE_LEN,
        });
        let of_packets = self
            .receive_queue_len
            .unwrap_or(Self::DEFAULT_RECEIVE_QUEUE_LEN);
        let bytes = self
            .receive_queue_bytes
            .unwrap_or(of_packets as u64 * self.packet_size as u64);
        (packets, bytes)
    }

    /// Whether [`build`](Self::build) takes `bytes` as the packet size: a positive multiple of
    /// 16, at most [`MAX_PACKET_SIZE`](Self::MAX_PACKET_SIZE). For tools that check an option
    /// before they build.
    ///
    /// # Errors
    /// [`BuildError::PacketSize`] otherwise.
    pub fn check_packet_size(bytes: usize) -> Result<(), BuildError> {
        if bytes == 0 || bytes % 16 != 0 || bytes > Self::MAX_PACKET_SIZE {
            return Err(BuildError::PacketSize(bytes));
        }
        Ok(())
    }

    /// Starts the service: spawns and pins the workers and waits until each has calibrated.
    ///
    /// # Errors
    /// [`BuildError`] for a bad packet size, policy, cluster or node; or if a thread cannot be
    /// started.
    pub fn build(self) -> Result<Service, BuildError> {
        Self::check_packet_size(self.packet_size)?;
        if self.receive_queue_bytes == Some(0) {
            return Err(BuildError::ZeroBound("receive_queue_bytes"));
        }
        if self.cluster_queue_len == 0 {
            return Err(BuildError::ZeroBound("cluster_queue_len"));
        }
        if self.receive_queue_len == Some(0) {
            return Err(BuildError::ZeroBound("receive_queue_len"));
        }
        if self.stream_outputs == 0 {
            return Err(BuildError::ZeroBound("stream_outputs"));
        }
        let (receive_queue_len, receive_queue_bytes) = self.receive_bounds();
        if self.max_attempts == 0 {
            return Err(BuildError::ZeroBound("max_attempts"));
        }
        if let Some(t) = self.stall_timeout.filter(|&t| t < Self::MIN_STALL_TIMEOUT) {
            return Err(BuildError::StallTimeoutTooShort(t));
        }
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let idle_poll = self.idle_poll_most();
        let clusters = if self.clusters.is_empty() {
            let all: Vec<NodeSpec> = (0..cores.len().max(1))
                .map(|c| {
                    if cores.is_empty() {
                        NodeSpec::new()
                    } else {
                        NodeSpec::pinned(c)
                    }
                })
                .collect();
            vec![(ClusterKind::Aes, all.clone()), (ClusterKind::Ed25519, all)]
        } else {
            self.clusters
        };
        let aes_impls = match self.aes_implementation {
            Some(implementation) => {
                Arc::new(ImplTable::pinned(implementation).map_err(BuildError::Implementation)?)
            }
            None => ImplTable::shared(self.packet_size),
        };
        let packet = self.packet_size as u64;
        // Eight of the largest packets a cluster makes: an AES packet may carry a padding block.
        let default_capacity = |kind: ClusterKind| match kind {
            ClusterKind::Aes => 8 * (packet + BLOCK as u64),
            ClusterKind::Ed25519 => 8 * packet,
        };

        let mut layout = Layout {
            aes: None,
            ed25519: None,
            nodes: Vec::new(),
            clusters: Vec::new(),
            packet_size: self.packet_size,
            receive_queue_len,
            receive_queue_bytes,
            stall_timeout: self.stall_timeout,
            max_attempts: self.max_attempts,
            out_of_place: self.out_of_place,
            stream_outputs: self.stream_outputs,
            inline_limit: self.inline_limit,
            light_path: self.light_path,
            idle_poll,
            fold_padding: false,
            aes_impls,
        };
        let mut specs = Vec::new();
        let mut sched_clusters = Vec::new();
        for (c, (kind, nodes)) in clusters.iter().enumerate() {
            let id = ClusterId(c as u32);
            let slot = match kind {
                ClusterKind::Aes => &mut layout.aes,
                ClusterKind::Ed25519 => &mut layout.ed25519,
            };
            if slot.replace(id).is_some() {
                return Err(BuildError::DuplicateCluster(*kind));
            }
            let mut configs = Vec::new();
            for (i, node) in nodes.iter().enumerate() {
                if !(node.slowdown.is_finite()
                    && (1.0..=NodeSpec::MAX_SLOWDOWN).contains(&node.slowdown))
                {
                    return Err(BuildError::BadSlowdown(node.slowdown));
                }
                if node.slots == 0 {
                    return Err(BuildError::ZeroBound("slots"));
                }
                let core = match node.core {
                    Some(k) => Some(*cores.get(k).ok_or(BuildError::NoSuchCore {
                        node: i,
                        core: k,
                        available: cores.len(),
                    })?),
                    None => None,
                };
                // The worker's bound: the width set by hand, else any width the implementation
                // table chooses (docs/ALGORITHM.md §15.3).
                let lanes = node_lanes(*kind, node.lanes, MAX_LANES);
                let capacity = node.capacity.unwrap_or(default_capacity(*kind));
                let declared = node.unit_times;
                // Placeholder unit times until the worker calibrates; declared times as given.
                configs.push(
                    NodeConfig::new(declared.unwrap_or(UnitTimes::uniform(1.0)), capacity)
                        .with_slots(node.slots)
                        .with_lanes(
                            u32::try_from(node_lanes(*kind, node.lanes, NodeSpec::DEFAULT_LANES))
                                .unwrap_or(u32::MAX),
                        ),
                );
                specs.push(WorkerSpec {
                    node: NodeId(specs.len() as u32),
                    kind: *kind,
                    core,
                    slowdown: node.slowdown,
                    declared,
                    unit_len: self.packet_size,
                    lanes,
                    #[cfg(feature = "fault-injection")]
                    fault: node.fault,
                    #[cfg(feature = "fault-injection")]
                    fault_fired: Arc::default(),
                });
                layout.nodes.push(NodeInfo {
                    kind: *kind,
                    cluster: id,
                    core: node.core,
                    slowdown: node.slowdown,
                });
            }
            let max_capacity = configs.iter().map(|n| n.capacity).max().unwrap_or(0);
            let queue = NodeQueue {
                bytes: max_capacity,
                slots: configs
                    .iter()
                    .map(|n| u64::from(n.slots))
                    .max()
                    .unwrap_or(0),
                packet,
            };
            layout.clusters.push((*kind, queue));
            // An encryption's padding block rides in its last packet when every AES node can
            // hold a packet and a block; otherwise it makes a packet of its own.
            let fold = *kind == ClusterKind::Aes
                && configs.iter().all(|n| n.capacity >= packet + BLOCK as u64);
            if fold {
                layout.fold_padding = true;
            }
            sched_clusters.push(ClusterConfig {
                nodes: configs,
                queue_len: self.cluster_queue_len,
                max_packet: if fold { packet + BLOCK as u64 } else { packet },
            });
        }
        let config = SchedConfig {
            clusters: sched_clusters,
            wait_queue_len: self.wait_queue_len,
            affinity: self.affinity,
            unit_len: packet,
            admission: self.admission,
        };
        // Checked whole first, so that a configuration error names the service's own cluster
        // and node numbers; then each cluster gets a core of its own, with its policy (it runs
        // under its own lock: see `engine.rs`).
        Scheduler::<PacketData>::new(config.clone(), &PolicySpec::default())?;
        let policy = match &self.policy {
            PolicyChoice::Spec(spec) => Ok(spec.clone()),
            PolicyChoice::Name(name) => Ok(name.parse::<PolicySpec>()?),
            PolicyChoice::Custom(make) => Err(make),
        };
        let mut scheds = Vec::with_capacity(config.clusters.len());
        for (c, cluster) in config.clusters.iter().enumerate() {
            let one = SchedConfig {
                clusters: vec![cluster.clone()],
                ..config.clone()
            };
            scheds.push(match &policy {
                Ok(spec) => Scheduler::new(one, spec)?,
                Err(make) => Scheduler::with_policies(one, |_| make(ClusterId(c as u32)))?,
            });
        }

        let engine = Arc::new(Engine::new(scheds, layout));
        let (ready_tx, ready_rx) = mpsc::channel();
        let count = specs.len();
        let mut workers = Vec::with_capacity(count);
        for spec in specs {
            match supervisor::spawn_worker(&engine, spec.clone(), Some(ready_tx.clone())) {
                Ok(t) => workers.push(NodeThread {
                    spec,
                    thread: Some(t),
                }),
                Err(e) => {
                    // Nothing was submitted: stop and join the workers already started.
                    engine.drain_and_stop();
                    for w in workers {
                        if let Some(t) = w.thread {
                            let _ = t.join();
                        }
                    }
                    return Err(BuildError::Spawn(e.to_string()));
                }
            }
        }
        // Each worker reports once it has calibrated and published its unit times.
        drop(ready_tx);
        for _ in 0..count {
            if ready_rx.recv().is_err() {
                break;
            }
        }
        // The supervisor looks often enough to catch a stall well within its limit.
        let tick = self
            .stall_timeout
            .map_or(MIN_STALL / 5, |t| t / 5)
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        let engine2 = Arc::clone(&engine);
        let watcher = match thread::Builder::new()
            .name("cdsupervisor".into())
            .spawn(move || supervisor::run(engine2, workers, tick))
        {
            Ok(t) => t,
            Err(e) => {
                engine.drain_and_stop();
                return Err(BuildError::Spawn(e.to_string()));
            }
        };
        let _ = engine.supervisor.set(watcher.thread().clone());
        let threads = vec![watcher];
        Ok(Service::start(engine, threads))
    }
}

impl Service {
    /// A builder, to choose clusters, nodes, policy and sizes.
    pub fn builder() -> ServiceBuilder {
        ServiceBuilder::default()
    }

    /// A service with the defaults: an AES cluster and an Ed25519 cluster, each with a node
    /// pinned to every core, and the default policy (`mct-wait`, docs/ALGORITHM.md §11.15).
    ///
    /// # Errors
    /// [`BuildError::Spawn`] if the worker threads cannot be started.
    pub fn new() -> Result<Self, BuildError> {
        Service::builder().build()
    }
}

/// A node's lanes: only AES nodes have them, as many as set by hand (at least 1), else
/// `unset`. The worker takes [`MAX_LANES`] unset (the implementation table's width rules); the
/// scheduler counts the usual [`NodeSpec::DEFAULT_LANES`] (`NodeStatus::lanes`).
fn node_lanes(kind: ClusterKind, lanes: Option<usize>, unset: usize) -> usize {
    match kind {
        ClusterKind::Aes => lanes.unwrap_or(unset).max(1),
        ClusterKind::Ed25519 => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_admission_holds_more_small_packets_by_default_and_the_same_bytes() {
        let b = ServiceBuilder::default();
        assert_eq!(b.receive_bounds(), (8192, 16 << 20));
        let fifo = ServiceBuilder::default().admission(Admission::Fifo);
        assert_eq!(fifo.receive_bounds(), (1024, 16 << 20));
        // A length set is the bound under either admission, and the bytes follow it.
        let set = ServiceBuilder::default().receive_queue_len(16);
        assert_eq!(set.receive_bounds(), (16, 16 * 16 * 1024));
        let both = set.receive_queue_bytes(1000).packet_size(4096);
        assert_eq!(both.receive_bounds(), (16, 1000));
        let packet = ServiceBuilder::default().packet_size(4096);
        assert_eq!(packet.receive_bounds(), (8192, 1024 * 4096));
    }

    #[test]
    fn nodes_look_for_work_before_they_sleep_by_default_only_with_the_light_path() {
        let ms = Duration::from_millis;
        assert_eq!(ServiceBuilder::default().idle_poll_most(), Duration::ZERO);
        let light = ServiceBuilder::default().light_path(true);
        assert_eq!(light.idle_poll_most(), ServiceBuilder::DEFAULT_IDLE_POLL);
        // Set, it is what was set, in either order and with the light path on or off.
        assert_eq!(light.idle_poll(ms(2)).idle_poll_most(), ms(2));
        let set = ServiceBuilder::default().idle_poll(ms(3));
        assert_eq!(set.clone().idle_poll_most(), ms(3));
        assert_eq!(set.light_path(true).idle_poll_most(), ms(3));
        let off = ServiceBuilder::default().idle_poll(Duration::ZERO);
        assert_eq!(off.light_path(true).idle_poll_most(), Duration::ZERO);
    }
}
