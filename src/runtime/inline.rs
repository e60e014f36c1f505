//! Small AES jobs run on the submitting thread (docs/ALGORITHM.md §15.6).
//!
//! Handing a job to a node and back costs two thread hand-offs, a few microseconds on a busy
//! machine, while the cipher needs tens of nanoseconds for a few hundred bytes. A job of one
//! packet within the service's inline limit therefore runs where it is submitted: checked as
//! any job, run by the same cipher code a node would use, and handed back as a handle that is
//! already resolved. Such a job never enters a queue, so it is neither admitted nor placed;
//! the service counts it in `Metrics::jobs_inline` (and as one packet admitted and resolved).
//!
//! Two entry points. [`check`] takes a plain AES job (not GCM) straight from the [`Job`], so
//! `submit` and `submit_burst` pay for no packet, job record or key reference of their own:
//! a burst looks each run of jobs with the same key up once. [`run_prepared`] runs a job that
//! was cut into its one packet already (GCM jobs, `try_submit`, `submit_async`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use smallvec::SmallVec;
use zeroize::Zeroize;

use crate::crypto::{AesKey, AesOp, ChainState};
use crate::packet::{ClusterId, PacketMeta, TaskId};
use crate::runtime::cut::{aes_buffer_len, aes_packet_count, make_padding_room};
use crate::runtime::engine::Engine;
use crate::runtime::error::{JobError, SubmitError};
use crate::runtime::exec::{self, lane_width};
use crate::runtime::handle::JobHandle;
use crate::runtime::ids::{ClusterKind, KeyId};
use crate::runtime::job::{Job, JobKind, JobOutput};
use crate::runtime::keys::KeysRead;
use crate::runtime::layout::PARALLEL_INLINE_FACTOR;
use crate::runtime::tenant::TenantState;
use crate::runtime::work::{JobRecord, PacketData, Packets, assemble_one};

/// The AES keys a submission has looked up, so that a burst of jobs under one key looks it up
/// once. It lives only as long as the submission, so a removed key is never kept.
/// Jobs refer to their key by its place here, so a job takes no reference of its own.
///
/// A single job borrows its key from the registry, read-locked for the call ([`held`]), and
/// so writes no reference count shared with every other thread using the key; a burst, which
/// also prepares jobs for the nodes (each looking its key up), takes a reference per key.
///
/// [`held`]: KeyCache::held
#[derive(Default)]
pub(crate) struct KeyCache<'r> {
    registry: Option<&'r KeysRead<'r>>,
    keys: SmallVec<[(KeyId, KeyRef<'r>); 1]>,
}

/// A looked-up AES key: borrowed from the read-locked registry, or shared.
enum KeyRef<'r> {
    Held(&'r AesKey),
    Shared(Arc<AesKey>),
}

impl KeyRef<'_> {
    fn key(&self) -> &AesKey {
        match self {
            KeyRef::Held(key) => key,
            KeyRef::Shared(key) => key,
        }
    }
}

impl<'r> KeyCache<'r> {
    /// A cache that borrows its keys from `registry`.
    pub(crate) fn held(registry: &'r KeysRead<'r>) -> Self {
        KeyCache {
            registry: Some(registry),
            keys: SmallVec::new(),
        }
    }

    /// Where the AES key `id` is in the cache, looked up (as `prepare` would, with the same
    /// errors) if it is not there yet.
    fn aes(&mut self, engine: &Engine, id: KeyId) -> Result<usize, SubmitError> {
        if let Some(at) = self.keys.iter().rposition(|(cached, _)| *cached == id) {
            return Ok(at);
        }
        let key = match self.registry {
            Some(registry) => KeyRef::Held(registry.aes(id)?),
            None => KeyRef::Shared(engine.keys.aes(id)?),
        };
        self.keys.push((id, key));
        Ok(self.keys.len() - 1)
    }
}

/// A plain AES job, checked, that will run on the submitting thread.
pub(crate) struct SmallJob {
    /// Its key's place in the submission's [`KeyCache`].
    key: usize,
    op: AesOp,
    state: ChainState,
    data: Vec<u8>,
    /// Bytes of input (the buffer grows by the padding, if any, when the job runs).
    len: usize,
    task: TaskId,
}

/// Whether the service would run a job of one packet of `bytes` (padding included) of
/// `cluster` on the submitting thread: within the inline limit (for a `parallel` AES operation,
/// [`PARALLEL_INLINE_FACTOR`] times it), in a service not shared between tenants, while the
/// service takes jobs and a node of the cluster is up (otherwise admission refuses the job as
/// it would any). The callers check that the job is one packet.
///
/// In a shared service the job goes to a node, where the tenants' weights share the nodes
/// (docs/ALGORITHM.md §15.6): run here, it would take no turn, and two backlogged tenants of
/// small jobs would share their submitters' threads, whatever their weights (1:1 where the
/// weights were 1:3, in the library and behind the daemons, whose submitting threads are the
/// daemon's own; docs/RESULTS.md, Tenants).
pub(crate) fn allowed(engine: &Engine, cluster: ClusterId, bytes: usize, parallel: bool) -> bool {
    let limit = engine.layout.inline_limit;
    let reach = if parallel {
        limit.saturating_mul(PARALLEL_INLINE_FACTOR)
    } else {
        limit
    };
    bytes <= reach && !engine.tenants.is_shared() && open(engine, cluster)
}

/// Whether inline runs are allowed at all (a limit above 0), the service takes jobs and a
/// node of `cluster` is up.
fn open(engine: &Engine, cluster: ClusterId) -> bool {
    engine.layout.inline_limit > 0 && !engine.is_closing() && engine.cluster_up(cluster)
}

/// Whether the service would run a job of one packet of `cluster`, of any length within a
/// packet, on the submitting thread because the cluster's nodes are stalled
/// (docs/ALGORITHM.md §15.7): with the light path on, in a service shared between tenants and
/// with inline runs allowed, while every node up has left its light packets waiting, none
/// taken, for longer than a running worker ever does ([`Engine::light_stalled`]). A light job
/// placed then would wait as long as the node's thread does not run (asleep with no wake-up
/// reaching it, or off its core): milliseconds, against microseconds for the cipher. The
/// callers check that the job is one packet, and whose.
pub(crate) fn stalled(engine: &Engine, cluster: ClusterId) -> bool {
    beside_open(engine, cluster) && engine.light_stalled(cluster)
}

/// Whether a job of one packet, `packets`, of `tenant` runs on the submitting thread because
/// the tenant is behind on its own light jobs (docs/ALGORITHM.md §15.7): as for [`stalled`],
/// and by [`Engine::take_light_behind`], which spends the tenant's light credit on it.
pub(crate) fn behind(
    engine: &Engine,
    cluster: ClusterId,
    tenant: &TenantState,
    packets: &Packets,
) -> bool {
    let Some(first) = packets.first() else {
        return false;
    };
    beside_open(engine, cluster)
        && engine.take_light_behind(
            cluster,
            packets,
            tenant,
            lane_width(first, &engine.layout.aes_impls),
        )
}

/// Whether a job of one packet may run on its submitting thread beside the nodes of
/// `cluster` ([`stalled`], [`behind`]): the light path on, in a service shared between
/// tenants, with inline runs allowed.
fn beside_open(engine: &Engine, cluster: ClusterId) -> bool {
    engine.layout.light_path && engine.tenants.is_shared() && open(engine, cluster)
}

/// Checks a job for the inline path: `Ok(Ok(_))` a plain AES job that runs there, `Ok(Err(job))`
/// a job that goes to a node (given back untouched), `Err(_)` a malformed job, refused with the
/// error `submit` would give.
pub(crate) fn check(
    engine: &Engine,
    job: Job,
    keys: &mut KeyCache,
    task: TaskId,
) -> Result<Result<SmallJob, Job>, SubmitError> {
    let (op, len) = match &job.kind {
        JobKind::Aes { op, data, .. } => (*op, data.len()),
        _ => return Ok(Err(job)),
    };
    let Some(cluster) = engine.layout.cluster(ClusterKind::Aes) else {
        return Ok(Err(job));
    };
    if aes_packet_count(op, len, engine.layout.cutting(), true) != 1
        || !allowed(
            engine,
            cluster,
            aes_buffer_len(op, len, true),
            !op.is_serial(),
        )
    {
        return Ok(Err(job));
    }
    let JobKind::Aes { key, iv, data, .. } = job.kind else {
        unreachable!("matched above");
    };
    let key = keys.aes(engine, key)?;
    op.check_job_len(len)?;
    let state = ChainState::for_mode(op.mode, &iv)?;
    Ok(Ok(SmallJob {
        key,
        op,
        state,
        data,
        len,
        task,
    }))
}

impl SmallJob {
    /// Runs the job: its output, or its error with nothing of the data released.
    pub(crate) fn run(mut self, keys: &KeyCache) -> Finished {
        make_padding_room(self.op, &mut self.data, true);
        let (key, op, len) = (keys.keys[self.key].1.key(), self.op, self.len);
        let (state, data) = (&mut self.state, &mut self.data);
        let ran = catch_unwind(AssertUnwindSafe(|| {
            key.process(op, state, data, len, true)
                .map_err(JobError::from)
        }));
        let outcome = settle(ran, &mut self.data).map(|n| {
            self.data.truncate(n);
            JobOutput::Data(std::mem::take(&mut self.data))
        });
        Finished {
            task: self.task,
            outcome,
        }
    }
}

/// A job run on the submitting thread, to be handed back as a resolved handle.
pub(crate) struct Finished {
    task: TaskId,
    outcome: Result<JobOutput, JobError>,
}

impl Finished {
    /// Whether the job failed.
    pub(crate) fn failed(&self) -> bool {
        self.outcome.is_err()
    }

    /// The job's handle, resolved: submitted at `submitted`, its result available from
    /// `finished` (when the submitting call returns).
    pub(crate) fn handle(self, submitted: Instant, finished: Instant) -> JobHandle {
        JobHandle::done(
            self.task,
            self.outcome,
            finished.saturating_duration_since(submitted),
        )
    }
}

/// Runs a job already cut into its one packet (the caller checked [`allowed`]).
pub(crate) fn run_prepared(
    engine: &Engine,
    job: Arc<JobRecord>,
    meta: PacketMeta,
    work: PacketData,
) -> Finished {
    let PacketData {
        mut data,
        msg_len,
        start,
        ..
    } = work;
    // A single packet is its job's last, so the state store is not involved.
    let ran = catch_unwind(AssertUnwindSafe(|| {
        let mut states = exec::States::new(&engine.store, &engine.layout.aes_impls);
        let out = exec::execute(&mut states, &job, &meta, None, &mut data, msg_len, start);
        states.commit();
        out
    }));
    let outcome = settle(ran, &mut data).map(assemble_one);
    Finished {
        task: job.task,
        outcome,
    }
}

/// A run's result as its job's outcome. On an error, or a panic in the cipher (a bug, reported
/// as [`JobError::Internal`]), the data is zeroized first: nothing of a failed job is released.
fn settle<T>(
    ran: std::thread::Result<Result<T, JobError>>,
    data: &mut [u8],
) -> Result<T, JobError> {
    let outcome = ran.unwrap_or_else(|_| {
        Err(JobError::Internal(
            "the cipher panicked on the submitting thread".into(),
        ))
    });
    if outcome.is_err() {
        data.zeroize();
    }
    outcome
}
