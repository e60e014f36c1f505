//! What every call shares: the service, the keys, the tokens, the limits, the drain state and
//! the metrics; and the steps every call takes (refuse while draining, authenticate, find the
//! key, admit the job under the caller's tenant within the admission wait, await its result).
//!
//! A job not admitted within the admission wait (`--queue-wait-ms`) is answered
//! `RESOURCE_EXHAUSTED`, saying what held it: its tenant's limit of jobs or bytes in flight,
//! its tenant's byte rate, or the service's queues; which one is read from the tenant's
//! counters while the job still waits (a job held at its tenant's door counts as waiting
//! there). The status carries the trailer `grpc-retry-pushback-ms` (`status` module). A
//! tenant's waiting calls are bounded like every call, by the connections and the calls per
//! connection: a client cannot make the daemon hold more.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cryptodispatch::{Job, JobOutput, Service, TenantId};
use tokio::sync::Semaphore;
use tonic::{Request, Status};

use crate::agent::{self, Reply, WeightConfig};
use crate::gate::CallGuard;
use crate::keys::{KeyKind, KeyRing, MAX_KEY_NAME, NamedKey, valid_name};
use crate::metrics::RpcMetrics;
use crate::status::{Held, exhausted_status, job_status, submit_status};
use crate::tokens::{Auth, Caller, Grant};

/// Bounds on what a call may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest payload of a call (AES data, a message, a batch's messages together), and
    /// of a stream message's chunk.
    pub max_request_bytes: usize,
    /// How long a call waits for its tenant's limits and room in the service's queues before
    /// `RESOURCE_EXHAUSTED` (0: admitted only if it may go at once).
    pub queue_wait: Duration,
    /// A stream's longest wait for a request message, or for its client to take a response.
    pub stream_idle: Duration,
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

    /// The first step of every call, taken by the gate (`gate` module) on the request's
    /// headers before its body is read: refused while draining, then authenticated from the
    /// value of its `authorization` header.
    ///
    /// # Errors
    /// `UNAVAILABLE` while draining; `UNAUTHENTICATED` without a valid token.
    pub fn admit_call(&self, authorization: Option<&[u8]>) -> Result<Caller, Status> {
        if self.is_draining() {
            return Err(Status::unavailable(
                "the daemon is draining (shutting down); send the call to another one",
            ));
        }
        self.auth.authenticate(authorization)
    }

    /// What the gate let through with a call: its caller (grant and tenant), and the guard
    /// that keeps its connection busy (none when the call did not come through an accepted
    /// connection).
    ///
    /// # Errors
    /// `UNAUTHENTICATED` if the call did not pass the gate (never expected: fail closed).
    pub fn admitted<T>(&self, request: &Request<T>) -> Result<(Caller, Option<CallGuard>), Status> {
        let caller = request
            .extensions()
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| Status::unauthenticated("the call was not authenticated"))?;
        Ok((caller, request.extensions().get::<CallGuard>().cloned()))
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
    /// `INVALID_ARGUMENT` for a name that is empty, longer than [`MAX_KEY_NAME`] bytes or not
    /// of the key names' characters (checked before any lookup), or a key of another kind;
    /// `PERMISSION_DENIED` when the token may not use it (whether or not it exists);
    /// `NOT_FOUND` for an unknown name. Messages show at most a short, escaped prefix of it.
    pub fn key(&self, grant: &Grant, name: &str, kind: KeyKind) -> Result<NamedKey, Status> {
        check_key_name(name)?;
        grant.check(name)?;
        let key = self
            .keys
            .get(name)
            .ok_or_else(|| Status::not_found(format!("no key is named {}", shown(name))))?;
        if key.kind != kind {
            return Err(Status::invalid_argument(format!(
                "the key {} is {}, but this call needs {kind}",
                shown(name),
                key.kind
            )));
        }
        Ok(key)
    }

    /// Submits `job` under `tenant` (waiting at most the admission wait for the tenant's
    /// limits and the queues' room, without blocking a thread) and awaits its output.
    ///
    /// # Errors
    /// `RESOURCE_EXHAUSTED` (with a retry pushback) when the tenant's limits or the queues
    /// hold the job for the whole admission wait; the job's refusal or failure as a status
    /// (`status` module).
    pub async fn run(&self, tenant: TenantId, job: Job) -> Result<JobOutput, Status> {
        let bytes = job.len() as u64;
        let submit = self.service.submit_async(job.tenant(tenant));
        let wait = tokio::time::sleep(self.limits.queue_wait);
        tokio::pin!(submit, wait);
        let handle = tokio::select! {
            // The job first: with no admission wait, it is admitted if there is room at once.
            biased;
            submitted = &mut submit => submitted.map_err(submit_status)?,
            () = &mut wait => {
                // Looked at before the future is dropped: while it waits at its tenant's
                // door, its bytes count there.
                let held = self.held(tenant, bytes);
                return Err(exhausted_status(&held, self.limits.queue_wait, bytes));
            }
        };
        handle.await.map_err(job_status)
    }

    /// What holds a job of `tenant`, of `bytes` bytes, still waiting for admission: one of
    /// the tenant's limits if the job waits at its door (its bytes count as waiting there)
    /// and the tenant's counters are at that limit; else the service's queues.
    fn held(&self, tenant: TenantId, bytes: u64) -> Held {
        let metrics = self.service.metrics();
        let Some(t) = metrics.tenants.into_iter().find(|t| t.tenant == tenant) else {
            return Held::Queues;
        };
        if t.bytes_waiting < bytes {
            return Held::Queues;
        }
        let l = t.limits;
        match (l.jobs_in_flight, l.bytes_in_flight, l.bytes_per_sec) {
            (Some(max), _, _) if t.jobs_in_flight >= max => Held::Jobs {
                tenant: t.name,
                max,
            },
            (_, Some(max), _)
                if t.jobs_in_flight > 0 && t.bytes_in_flight.saturating_add(bytes) > max =>
            {
                Held::Bytes {
                    tenant: t.name,
                    max,
                }
            }
            (_, _, Some(rate)) => Held::Rate {
                tenant: t.name,
                rate,
                waiting: t.bytes_waiting,
            },
            // A limit in flight that a job's end has just opened.
            (Some(max), _, _) => Held::Jobs {
                tenant: t.name,
                max,
            },
            (_, Some(max), _) => Held::Bytes {
                tenant: t.name,
                max,
            },
            (None, None, None) => Held::Queues,
        }
    }

    /// What the agent check answers now.
    pub fn agent_reply(&self) -> Reply {
        let clusters = agent::clusters(&self.service.metrics());
        agent::reply(&clusters, self.is_draining(), &self.weight)
    }
}

/// The longest prefix of client input an error message shows.
const SHOWN: usize = 32;

/// Client input as an error message shows it: quoted, escaped, at most [`SHOWN`] characters,
/// and `...` with the full length when it was longer.
pub fn shown(input: &str) -> String {
    let count = input.chars().count();
    if count <= SHOWN {
        return format!("{input:?}");
    }
    let prefix: String = input.chars().take(SHOWN).collect();
    format!("{prefix:?}... ({} bytes)", input.len())
}

/// Refuses a key name that is empty, too long, or not of the key names' characters.
///
/// # Errors
/// `INVALID_ARGUMENT`, showing at most a short prefix of the name.
pub fn check_key_name(name: &str) -> Result<(), Status> {
    if name.is_empty() {
        return Err(Status::invalid_argument("no key name given"));
    }
    if name.len() > MAX_KEY_NAME {
        return Err(Status::invalid_argument(format!(
            "a key name is at most {MAX_KEY_NAME} bytes; this one has {}",
            name.len()
        )));
    }
    if !valid_name(name) {
        return Err(Status::invalid_argument(format!(
            "the key name {} has characters other than letters, digits, '.', '_' and '-'",
            shown(name)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_shown_short() {
        for ok in ["a", "db.v1", "A-b_c.9", &"k".repeat(MAX_KEY_NAME)] {
            assert!(check_key_name(ok).is_ok(), "{ok}");
        }
        let long = "x".repeat(4 << 20);
        for bad in [
            "",
            "a b",
            "a/b",
            "é",
            "a\n",
            &"k".repeat(MAX_KEY_NAME + 1),
            &long,
        ] {
            let e = check_key_name(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad:.40}");
            assert!(e.message().len() < 200, "{}", e.message());
        }
        assert_eq!(shown("ab"), "\"ab\"");
        let s = shown(&format!("{}\n\u{7}", "y".repeat(100)));
        assert!(
            s.starts_with("\"yyyy") && s.ends_with("... (102 bytes)"),
            "{s}"
        );
        assert!(!shown("a\r\nb").contains('\n'));
    }
}
