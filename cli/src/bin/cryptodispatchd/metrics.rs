//! Prometheus metrics (`prometheus-client`, OpenMetrics text), served by `http.rs`.
//!
//! - per RPC: `cryptodispatchd_rpc_requests_total{rpc,code}`,
//!   `cryptodispatchd_rpc_duration_seconds{rpc}` (a histogram; for `Stream`, the time to open
//!   it), `cryptodispatchd_rpc_in_flight{rpc}`;
//! - per node, from [`Service::metrics`](cryptodispatch::Service::metrics) at each scrape:
//!   `cryptodispatch_node_packets_total`, `_bytes_total`, `_busy_seconds_total`,
//!   `_panics_total`, `_out_of_place_total` (packets run out of place, their input kept for a
//!   retry), `_retry_copies_total` (packets whose input was copied for a retry before they
//!   ran), `_queue_depth` (packets), `_queued_bytes`, `_slowdown`,
//!   `_unit_time_seconds{cmd}` (per packet of the packet size), `_up` (1 up, 0 down: failed and
//!   not back yet), `_failures_total`, `_stalls_total` (of the failures) and `_restarts_total`,
//!   labelled `node` and `cluster`;
//! - per AES operation run so far: `cryptodispatch_aes_implementation_ns_per_byte{op,
//!   implementation, alone}`, the implementation it runs on, the one a packet by itself (one
//!   packet, or a chain's packets in a row) runs on, and its measured time per byte (0 when
//!   pinned);
//! - per cluster: `cryptodispatch_cluster_receive_queue`, `_cluster_queue`, `_wait_queue`
//!   (packets), `_choose_list` (jobs bound to a node), `_policy_alarms_total`;
//! - the service: `cryptodispatch_jobs_{submitted,completed,failed}_total`,
//!   `cryptodispatch_jobs_inline_total` (run on the submitting thread), of them
//!   `_jobs_inline_stalled_total` (one packet each, run there because every node of its
//!   cluster was stalled with light packets waiting), `_jobs_inline_behind_total` (one packet
//!   each, run there because every node of its cluster already held a set of its tenant's
//!   light packets), `_jobs_light_total`,
//!   `cryptodispatch_packets_{admitted,completed,failed}_total`,
//!   `cryptodispatch_keys`, `cryptodispatch_stored_states`;
//! - per tenant (the tokens file's, and `default`), labelled `tenant`:
//!   `cryptodispatch_tenant_jobs_admitted_total`, `_bytes_admitted_total`,
//!   `_jobs_completed_total`, `_bytes_completed_total`, `_bytes_served_total` (counted as
//!   each packet finishes, not at the job's end), `_jobs_failed_total`, `_jobs_light_total`
//!   (of those admitted, the jobs that took the light path), `_jobs_granted_total` (of those
//!   admitted, the jobs too long for it that went ahead in the core on the tenant's saved
//!   share), `_jobs_kept_busy_total` and `_jobs_over_credit_total` (jobs kept off the light
//!   path, or a grant, as the tenant was busy, or as its light credit did not cover them),
//!   `_jobs_inline_stalled_total` and `_jobs_inline_behind_total` (its shares of the
//!   service's),
//!   `_jobs_refused_total` and `_bytes_refused_total` (calls that gave up waiting for
//!   admission: `RESOURCE_EXHAUSTED`, or the client went away), `_jobs_in_flight`,
//!   `_bytes_in_flight`, `_bytes_waiting` (held at the tenant's limits now), `_weight`,
//!   `_limit{limit}` (`bytes_in_flight`, `jobs_in_flight`, `bytes_per_sec`; only the limits
//!   set), and `_latency_seconds{quantile}` (0.5, 0.9, 0.99, 0.999: submission to output of
//!   the finished jobs, each within 9% above the exact value; absent until one has finished);
//! - the daemon: `cryptodispatchd_draining` (0 or 1), `cryptodispatchd_agent_weight_percent`
//!   (what the agent check would answer; 0 for `drain` or `down`).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use cryptodispatch::packet::Cmd;
use cryptodispatch::runtime::NodeState;
use cryptodispatch::{ClusterKind, TenantMetrics};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tonic::{Code, Status};

use crate::agent::Reply;
use crate::daemon::Daemon;

/// The RPCs, as metrics label them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    /// `Encrypt`.
    Encrypt,
    /// `Decrypt`.
    Decrypt,
    /// `GcmEncrypt`.
    GcmEncrypt,
    /// `GcmDecrypt`.
    GcmDecrypt,
    /// `Sign`.
    Sign,
    /// `Verify`.
    Verify,
    /// `VerifyBatch`.
    VerifyBatch,
    /// `GetPublicKey`.
    GetPublicKey,
    /// `Stream`.
    Stream,
}

impl Rpc {
    /// Every RPC.
    const ALL: [Rpc; 9] = [
        Rpc::Encrypt,
        Rpc::Decrypt,
        Rpc::GcmEncrypt,
        Rpc::GcmDecrypt,
        Rpc::Sign,
        Rpc::Verify,
        Rpc::VerifyBatch,
        Rpc::GetPublicKey,
        Rpc::Stream,
    ];

    /// The RPC of a request path (`/cryptodispatch.v1.CryptoDispatch/Encrypt`).
    pub fn from_path(path: &str) -> Option<Rpc> {
        let method = path.strip_prefix("/cryptodispatch.v1.CryptoDispatch/")?;
        Some(match method {
            "Encrypt" => Rpc::Encrypt,
            "Decrypt" => Rpc::Decrypt,
            "GcmEncrypt" => Rpc::GcmEncrypt,
            "GcmDecrypt" => Rpc::GcmDecrypt,
            "Sign" => Rpc::Sign,
            "Verify" => Rpc::Verify,
            "VerifyBatch" => Rpc::VerifyBatch,
            "GetPublicKey" => Rpc::GetPublicKey,
            "Stream" => Rpc::Stream,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Rpc::Encrypt => "Encrypt",
            Rpc::Decrypt => "Decrypt",
            Rpc::GcmEncrypt => "GcmEncrypt",
            Rpc::GcmDecrypt => "GcmDecrypt",
            Rpc::Sign => "Sign",
            Rpc::Verify => "Verify",
            Rpc::VerifyBatch => "VerifyBatch",
            Rpc::GetPublicKey => "GetPublicKey",
            Rpc::Stream => "Stream",
        }
    }
}

type RpcLabel = [(&'static str, &'static str); 1];
type RpcCodeLabels = [(&'static str, &'static str); 2];
type HistogramFamily = Family<RpcLabel, Histogram, fn() -> Histogram>;

/// Per-RPC counters, latencies and calls in flight.
#[derive(Debug, Clone)]
pub struct RpcMetrics {
    requests: Family<RpcCodeLabels, Counter>,
    duration: HistogramFamily,
    in_flight: Family<RpcLabel, Gauge>,
}

impl Default for RpcMetrics {
    fn default() -> Self {
        fn histogram() -> Histogram {
            // 50 µs to about 13 s.
            Histogram::new(exponential_buckets(50e-6, 2.0, 19))
        }
        RpcMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(histogram),
            in_flight: Family::default(),
        }
    }
}

/// Counts a call when it ends, or as `CANCELLED` when its future is dropped first (the client
/// went away).
struct CallGuard<'a> {
    metrics: &'a RpcMetrics,
    rpc: Rpc,
    start: Instant,
    code: Code,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let label = [("rpc", self.rpc.name())];
        self.metrics.in_flight.get_or_create(&label).dec();
        self.metrics
            .requests
            .get_or_create(&[("rpc", self.rpc.name()), ("code", code_name(self.code))])
            .inc();
        self.metrics
            .duration
            .get_or_create(&label)
            .observe(self.start.elapsed().as_secs_f64());
    }
}

impl RpcMetrics {
    /// Calls in progress now, over every RPC.
    pub fn calls_in_flight(&self) -> i64 {
        Rpc::ALL
            .iter()
            .map(|rpc| self.in_flight.get_or_create(&[("rpc", rpc.name())]).get())
            .sum()
    }

    /// Runs a call's future, counting it and timing it.
    pub async fn observe<T>(
        &self,
        rpc: Rpc,
        call: impl Future<Output = Result<T, Status>>,
    ) -> Result<T, Status> {
        self.in_flight.get_or_create(&[("rpc", rpc.name())]).inc();
        let mut guard = CallGuard {
            metrics: self,
            rpc,
            start: Instant::now(),
            code: Code::Cancelled,
        };
        let result = call.await;
        guard.code = match &result {
            Ok(_) => Code::Ok,
            Err(status) => status.code(),
        };
        result
    }
}

impl RpcMetrics {
    /// Counts a call refused before it was read (draining, or not authenticated).
    pub fn refused(&self, rpc: Rpc, code: Code) {
        self.requests
            .get_or_create(&[("rpc", rpc.name()), ("code", code_name(code))])
            .inc();
        self.duration
            .get_or_create(&[("rpc", rpc.name())])
            .observe(0.0);
    }
}

/// The canonical name of a status code, as gRPC spells it.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The registry a scrape encodes: the RPC families and the service snapshot.
pub fn registry(daemon: Arc<Daemon>) -> Registry {
    let mut registry = Registry::default();
    registry.register(
        "cryptodispatchd_rpc_requests",
        "Calls ended, by RPC and status code",
        daemon.rpc.requests.clone(),
    );
    registry.register(
        "cryptodispatchd_rpc_duration_seconds",
        "Time from a call's arrival to its answer (for Stream: to its opening)",
        daemon.rpc.duration.clone(),
    );
    registry.register(
        "cryptodispatchd_rpc_in_flight",
        "Calls being served",
        daemon.rpc.in_flight.clone(),
    );
    registry.register_collector(Box::new(ServiceCollector(daemon)));
    registry
}

/// Encodes the service's counters at each scrape.
#[derive(Debug)]
struct ServiceCollector(Arc<Daemon>);

type Labels = Vec<(&'static str, String)>;

/// Encodes one metric family from its rows (a family without labels has one row).
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: impl IntoIterator<Item = (Labels, M)>,
) -> Result<(), fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in rows {
        if labels.is_empty() {
            // `name 5`, not `name{} 5`.
            value.encode(metric)?;
            return Ok(());
        }
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn cluster_name(kind: ClusterKind) -> String {
    match kind {
        ClusterKind::Aes => "aes".into(),
        ClusterKind::Ed25519 => "ed25519".into(),
    }
}

impl Collector for ServiceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let m = self.0.service.metrics();
        let node = |n: &cryptodispatch::runtime::NodeMetrics| -> Labels {
            vec![
                ("node", n.node.0.to_string()),
                ("cluster", cluster_name(n.cluster)),
            ]
        };
        let e = &mut encoder;
        let counter = MetricType::Counter;
        let gauge = MetricType::Gauge;
        family(
            e,
            "cryptodispatch_node_packets",
            "Packets a node has run",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.packets))),
        )?;
        family(
            e,
            "cryptodispatch_node_bytes",
            "Bytes a node has run",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.bytes))),
        )?;
        family(
            e,
            "cryptodispatch_node_busy_seconds",
            "Time a node has spent running packets, emulated slowdown included",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.busy.as_secs_f64()))),
        )?;
        family(
            e,
            "cryptodispatch_node_panics",
            "Panics caught while running packets",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.panics))),
        )?;
        family(
            e,
            "cryptodispatch_node_out_of_place",
            "Packets a node ran out of place, their input kept for a retry (off with --in-place)",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.out_of_place))),
        )?;
        family(
            e,
            "cryptodispatch_node_retry_copies",
            "Packets whose input a node copied before running them, for a retry",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.retry_copies))),
        )?;
        family(
            e,
            "cryptodispatch_node_queue_depth",
            "Packets placed on a node and not yet complete",
            gauge,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstGauge::new(i64::from(n.queue_depth)))),
        )?;
        family(
            e,
            "cryptodispatch_node_queued_bytes",
            "Bytes placed on a node and not yet complete",
            gauge,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstGauge::new(n.queued_bytes as i64))),
        )?;
        family(
            e,
            "cryptodispatch_node_slowdown",
            "A node's emulated slowdown factor",
            gauge,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstGauge::new(n.slowdown))),
        )?;
        family(
            e,
            "cryptodispatch_node_up",
            "1 while a node is up, 0 while it is down (failed and not back yet)",
            gauge,
            m.nodes.iter().map(|n| {
                (
                    node(n),
                    ConstGauge::new(i64::from(n.state == NodeState::Up)),
                )
            }),
        )?;
        family(
            e,
            "cryptodispatch_node_failures",
            "Times a node failed: its worker panicked outside a packet's cryptography, exited, \
             or stalled",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.failures))),
        )?;
        family(
            e,
            "cryptodispatch_node_stalls",
            "Failures that were stalls (a packet running past the stall timeout)",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.stalls))),
        )?;
        family(
            e,
            "cryptodispatch_node_restarts",
            "Times a node's worker thread was started again after a failure",
            counter,
            m.nodes
                .iter()
                .map(|n| (node(n), ConstCounter::new(n.restarts))),
        )?;
        let unit_times = m.nodes.iter().flat_map(|n| {
            let cmds: [(Cmd, &str); 2] = match n.cluster {
                ClusterKind::Aes => [(Cmd::Encrypt, "encrypt"), (Cmd::Decrypt, "decrypt")],
                ClusterKind::Ed25519 => [(Cmd::Sign, "sign"), (Cmd::Verify, "verify")],
            };
            cmds.map(|(cmd, name)| {
                let mut labels = node(n);
                labels.push(("cmd", name.to_owned()));
                (labels, ConstGauge::new(n.unit_times.get(cmd) / 1e9))
            })
        });
        family(
            e,
            "cryptodispatch_node_unit_time_seconds",
            "The scheduler's estimate of a node's time per packet of the packet size (per \
             operation for Ed25519)",
            gauge,
            unit_times,
        )?;

        family(
            e,
            "cryptodispatch_aes_implementation_ns_per_byte",
            "The implementation each AES operation run so far runs on (label `implementation`; \
             `alone`: the one a packet by itself runs on, one packet or a chain's packets in a \
             row), with the time per byte measured on its first job (0 when pinned)",
            gauge,
            m.aes_implementations.iter().map(|c| {
                let labels: Labels = vec![
                    ("op", c.label()),
                    ("implementation", c.implementation.to_string()),
                    ("alone", c.alone.to_string()),
                ];
                (labels, ConstGauge::new(c.ns_per_byte.unwrap_or(0.0)))
            }),
        )?;

        let cluster = |kind| vec![("cluster", cluster_name(kind))];
        family(
            e,
            "cryptodispatch_cluster_receive_queue",
            "Packets admitted and not yet taken by the scheduler",
            gauge,
            m.clusters
                .iter()
                .map(|c| (cluster(c.kind), ConstGauge::new(c.receive_queue as i64))),
        )?;
        family(
            e,
            "cryptodispatch_cluster_cluster_queue",
            "Packets in the cluster queue",
            gauge,
            m.clusters
                .iter()
                .map(|c| (cluster(c.kind), ConstGauge::new(c.cluster_queue as i64))),
        )?;
        family(
            e,
            "cryptodispatch_cluster_wait_queue",
            "Packets of the cluster in the shared wait queue",
            gauge,
            m.clusters
                .iter()
                .map(|c| (cluster(c.kind), ConstGauge::new(c.wait_queue as i64))),
        )?;
        family(
            e,
            "cryptodispatch_cluster_choose_list",
            "Chained jobs bound to a node",
            gauge,
            m.clusters
                .iter()
                .map(|c| (cluster(c.kind), ConstGauge::new(c.choose_list as i64))),
        )?;
        family(
            e,
            "cryptodispatch_cluster_policy_alarms",
            "Overload alarms of the policy",
            counter,
            m.clusters
                .iter()
                .map(|c| (cluster(c.kind), ConstCounter::new(c.alarms))),
        )?;

        let none = || -> Labels { Vec::new() };
        family(
            e,
            "cryptodispatch_jobs_submitted",
            "Jobs accepted",
            counter,
            [(none(), ConstCounter::new(m.jobs_submitted))],
        )?;
        family(
            e,
            "cryptodispatch_jobs_completed",
            "Jobs finished with an output",
            counter,
            [(none(), ConstCounter::new(m.jobs_completed))],
        )?;
        family(
            e,
            "cryptodispatch_jobs_inline",
            "Jobs run on the submitting thread (too small to hand to a node)",
            counter,
            [(none(), ConstCounter::new(m.jobs_inline))],
        )?;
        family(
            e,
            "cryptodispatch_jobs_inline_stalled",
            "Of the jobs run on the submitting thread, those of one packet run there because every node of their cluster was stalled with light packets waiting",
            counter,
            [(none(), ConstCounter::new(m.jobs_inline_stalled))],
        )?;
        family(
            e,
            "cryptodispatch_jobs_inline_behind",
            "Of the jobs run on the submitting thread, those of one packet run there because every node of their cluster already held a set of their tenant's light packets",
            counter,
            [(none(), ConstCounter::new(m.jobs_inline_behind))],
        )?;
        family(
            e,
            "cryptodispatch_jobs_light",
            "Jobs that took the light path (off with --no-light-path): run at a node's next pause",
            counter,
            [(none(), ConstCounter::new(m.jobs_light))],
        )?;
        family(
            e,
            "cryptodispatch_jobs_failed",
            "Jobs finished with an error",
            counter,
            [(none(), ConstCounter::new(m.jobs_failed))],
        )?;
        family(
            e,
            "cryptodispatch_packets_admitted",
            "Packets admitted (every job's packets, streams' chunks included)",
            counter,
            [(none(), ConstCounter::new(m.packets_admitted))],
        )?;
        family(
            e,
            "cryptodispatch_packets_completed",
            "Packets whose result was delivered",
            counter,
            [(none(), ConstCounter::new(m.packets_completed))],
        )?;
        family(
            e,
            "cryptodispatch_packets_failed",
            "Packets that failed (an error from the cipher, a failed node, a cluster with no \
             node up)",
            counter,
            [(none(), ConstCounter::new(m.packets_failed))],
        )?;
        family(
            e,
            "cryptodispatch_keys",
            "Keys registered",
            gauge,
            [(none(), ConstGauge::new(m.keys as i64))],
        )?;
        family(
            e,
            "cryptodispatch_stored_states",
            "Chaining states in the state store",
            gauge,
            [(none(), ConstGauge::new(m.stored_states as i64))],
        )?;

        tenant_families(e, &m.tenants)?;

        let draining = self.0.is_draining();
        family(
            e,
            "cryptodispatchd_draining",
            "1 while the daemon drains",
            gauge,
            [(none(), ConstGauge::new(i64::from(draining)))],
        )?;
        let weight = match self.0.agent_reply() {
            Reply::Weight(w) => i64::from(w),
            Reply::Drain | Reply::Down => 0,
        };
        family(
            e,
            "cryptodispatchd_agent_weight_percent",
            "The weight the agent check answers (0 for drain or down)",
            gauge,
            [(none(), ConstGauge::new(weight))],
        )?;
        Ok(())
    }
}

/// The per-tenant families, labelled `tenant` (its name).
fn tenant_families(e: &mut DescriptorEncoder, tenants: &[TenantMetrics]) -> Result<(), fmt::Error> {
    let tenant = |t: &TenantMetrics| -> Labels { vec![("tenant", t.name.clone())] };
    type Count = fn(&TenantMetrics) -> u64;
    let counters: [(&str, &str, Count); 14] = [
        (
            "cryptodispatch_tenant_jobs_admitted",
            "Jobs of the tenant admitted (past its limits and the queues' backpressure)",
            |t| t.jobs_admitted,
        ),
        (
            "cryptodispatch_tenant_bytes_admitted",
            "Bytes of the tenant's jobs admitted",
            |t| t.bytes_admitted,
        ),
        (
            "cryptodispatch_tenant_jobs_completed",
            "Jobs of the tenant finished with an output",
            |t| t.jobs_completed,
        ),
        (
            "cryptodispatch_tenant_bytes_completed",
            "Bytes of the tenant's jobs finished with an output",
            |t| t.bytes_completed,
        ),
        (
            "cryptodispatch_tenant_bytes_served",
            "Bytes of the tenant served, counted as each packet finishes with an output",
            |t| t.bytes_served,
        ),
        (
            "cryptodispatch_tenant_jobs_failed",
            "Jobs of the tenant finished with an error",
            |t| t.jobs_failed,
        ),
        (
            "cryptodispatch_tenant_jobs_light",
            "Jobs of the tenant admitted by the light path (of those admitted)",
            |t| t.jobs_light,
        ),
        (
            "cryptodispatch_tenant_jobs_granted",
            "Jobs of the tenant too long for the light path that went ahead in the core on its \
             saved share (of those admitted)",
            |t| t.jobs_granted,
        ),
        (
            "cryptodispatch_tenant_jobs_kept_busy",
            "Jobs of the tenant kept off the light path (or a grant) as the tenant was busy: over \
             a node queue of its bytes in flight on the core's path, the job's included",
            |t| t.jobs_kept_busy,
        ),
        (
            "cryptodispatch_tenant_jobs_over_credit",
            "Jobs of the tenant kept off the light path (or a grant) as its light credit did not \
             cover them",
            |t| t.jobs_over_credit,
        ),
        (
            "cryptodispatch_tenant_jobs_inline_stalled",
            "Jobs of the tenant of one packet run on the daemon's calling thread as every node \
             of their cluster was stalled with light packets waiting",
            |t| t.jobs_inline_stalled,
        ),
        (
            "cryptodispatch_tenant_jobs_inline_behind",
            "Jobs of the tenant of one packet run on the daemon's calling thread as every node \
             of their cluster already held a set of the tenant's light packets",
            |t| t.jobs_inline_behind,
        ),
        (
            "cryptodispatch_tenant_jobs_refused",
            "Jobs of the tenant that gave up waiting for admission (RESOURCE_EXHAUSTED, or the \
             client went away)",
            |t| t.jobs_refused,
        ),
        (
            "cryptodispatch_tenant_bytes_refused",
            "Bytes of the tenant's jobs that gave up waiting for admission",
            |t| t.bytes_refused,
        ),
    ];
    for (name, help, value) in counters {
        family(
            e,
            name,
            help,
            MetricType::Counter,
            tenants
                .iter()
                .map(|t| (tenant(t), ConstCounter::new(value(t)))),
        )?;
    }
    let gauges: [(&str, &str, Count); 4] = [
        (
            "cryptodispatch_tenant_jobs_in_flight",
            "Jobs of the tenant admitted and not finished",
            |t| t.jobs_in_flight,
        ),
        (
            "cryptodispatch_tenant_bytes_in_flight",
            "Bytes of the tenant's jobs admitted and not finished",
            |t| t.bytes_in_flight,
        ),
        (
            "cryptodispatch_tenant_bytes_waiting",
            "Bytes of the tenant's jobs held at its limits now",
            |t| t.bytes_waiting,
        ),
        (
            "cryptodispatch_tenant_weight",
            "The tenant's weight: its share of the nodes against other backlogged tenants",
            |t| u64::from(t.weight),
        ),
    ];
    for (name, help, value) in gauges {
        family(
            e,
            name,
            help,
            MetricType::Gauge,
            tenants
                .iter()
                .map(|t| (tenant(t), ConstGauge::new(gauge_value(value(t))))),
        )?;
    }
    let limits = tenants.iter().flat_map(|t| {
        let l = t.limits;
        [
            ("bytes_in_flight", l.bytes_in_flight),
            ("jobs_in_flight", l.jobs_in_flight),
            ("bytes_per_sec", l.bytes_per_sec),
        ]
        .into_iter()
        .filter_map(move |(limit, value)| {
            let mut labels = tenant(t);
            labels.push(("limit", limit.to_owned()));
            value.map(|v| (labels, ConstGauge::new(gauge_value(v))))
        })
    });
    family(
        e,
        "cryptodispatch_tenant_limit",
        "A limit set on the tenant (in bytes, jobs or bytes per second)",
        MetricType::Gauge,
        limits,
    )?;
    let quantiles = tenants.iter().flat_map(|t| {
        t.latency.into_iter().flat_map(move |latency| {
            ["0.5", "0.9", "0.99", "0.999"]
                .into_iter()
                .zip(latency)
                .map(move |(q, d)| {
                    let mut labels = tenant(t);
                    labels.push(("quantile", q.to_owned()));
                    (labels, ConstGauge::new(d.as_secs_f64()))
                })
        })
    });
    family(
        e,
        "cryptodispatch_tenant_latency_seconds",
        "Quantiles of the latency of the tenant's finished jobs, submission to output",
        MetricType::Gauge,
        quantiles,
    )
}

/// A count as a gauge's value, saturated.
fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The registry as OpenMetrics text.
///
/// # Errors
/// A formatting error from the encoder.
pub fn encode(registry: &Registry) -> Result<String, fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}
