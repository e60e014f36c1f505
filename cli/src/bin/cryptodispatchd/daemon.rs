//! What every call shares: the service, the keys, the tokens, the limits, the drain state and
//! the metrics; and the steps every call takes (refuse while draining, authenticate, find the
//! key, admit the job within the admission wait, await its result).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cryptodispatch::{Job, JobOutput, Service};
use tokio::sync::Semaphore;
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::agent::{self, Reply, WeightConfig};
use crate::keys::{KeyKind, KeyRing, NamedKey};
use crate::metrics::RpcMetrics;
use crate::status::{job_status, submit_status};
use crate::tokens::{Auth, Grant};

/// Bounds on what a call may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest payload of a call (AES data, a message, a batch's messages together), and
    /// of a stream message's chunk.
    pub max_request_bytes: usize,
    /// How long a call waits for room in the service's queues before `RESOURCE_EXHAUSTED`
    /// (0: admitted only if there is room at once).
    pub queue_wait: Duration,
}

/// The daemon's shared state.
#[derive(Debug)]
pub struct Daemon {
    /// The crypto service.
    pub service: Arc<Service>,
    /// The keys by name.
    pub keys: KeyRing,
    /// The tokens.
    pub auth: Auth,
    /// The bounds on calls.
    pub limits: Limits,
    /// What the agent's weight needs besides the metrics.
    pub weight: WeightConfig,
    /// Per-RPC counters and latencies.
    pub rpc: RpcMetrics,
    /// Permits for open streams (each holds a thread of the blocking pool).
    pub streams: Arc<Semaphore>,
    draining: AtomicBool,
}

impl Daemon {
    /// The shared state of a daemon that serves.
    pub fn new(
        service: Arc<Service>,
        keys: KeyRing,
        auth: Auth,
        limits: Limits,
        weight: WeightConfig,
        max_streams: usize,
    ) -> Self {
        Daemon {
            service,
            keys,
            auth,
            limits,
            weight,
            rpc: RpcMetrics::default(),
            streams: Arc::new(Semaphore::new(max_streams)),
            draining: AtomicBool::new(false),
        }
    }

    /// From now on, new calls get `UNAVAILABLE` and the agent says `drain`.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the daemon drains.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The first step of every call: refused while draining, then authenticated.
    ///
    /// # Errors
    /// `UNAVAILABLE` while draining; `UNAUTHENTICATED` without a valid token.
    pub fn admit_call(&self, metadata: &MetadataMap) -> Result<Grant, Status> {
        if self.is_draining() {
            return Err(Status::unavailable(
                "the daemon is draining (shutting down); send the call to another one",
            ));
        }
        self.auth.authenticate(metadata)
    }

    /// Refuses a payload over the limit.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT`.
    pub fn check_size(&self, len: usize) -> Result<(), Status> {
        let max = self.limits.max_request_bytes;
        if len > max {
            return Err(Status::invalid_argument(format!(
                "the request carries {len} bytes, more than this daemon's limit of {max} bytes \
                 (--max-request-bytes); split the data or use the Stream call"
            )));
        }
        Ok(())
    }

    /// The key `name` of kind `kind`, if the grant covers it.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for an empty name or a key of another kind; `PERMISSION_DENIED` when
    /// the token may not use it (whether or not it exists); `NOT_FOUND` for an unknown name.
    pub fn key(&self, grant: &Grant, name: &str, kind: KeyKind) -> Result<NamedKey, Status> {
        if name.is_empty() {
            return Err(Status::invalid_argument("no key name given"));
        }
        grant.check(name)?;
        let key = self
            .keys
            .get(name)
            .ok_or_else(|| Status::not_found(format!("no key is named {name:?}")))?;
        if key.kind != kind {
            return Err(Status::invalid_argument(format!(
                "the key {name:?} is {}, but this call needs {kind}",
                key.kind
            )));
        }
        Ok(key)
    }

    /// Submits `job` (waiting at most the admission wait for room, without blocking a
    /// thread) and awaits its output.
    ///
    /// # Errors
    /// `RESOURCE_EXHAUSTED` when the queues stay full; the job's refusal or failure as a
    /// status (`status` module).
    pub async fn run(&self, job: Job) -> Result<JobOutput, Status> {
        let submitted =
            tokio::time::timeout(self.limits.queue_wait, self.service.submit_async(job)).await;
        let handle = match submitted {
            Ok(Ok(handle)) => handle,
            Ok(Err(e)) => return Err(submit_status(e)),
            Err(_) => {
                return Err(Status::resource_exhausted(format!(
                    "the daemon's queues stayed full for {} ms; retry later or elsewhere",
                    self.limits.queue_wait.as_millis()
                )));
            }
        };
        handle.await.map_err(job_status)
    }

    /// What the agent check answers now.
    pub fn agent_reply(&self) -> Reply {
        let clusters = agent::clusters(&self.service.metrics());
        agent::reply(&clusters, self.is_draining(), &self.weight)
    }
}
