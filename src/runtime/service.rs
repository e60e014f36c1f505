//! The service: keys, job submission, streams, metrics and shutdown.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Instant;

use bytes::BytesMut;

use crate::crypto::{AesOp, ChainState, CryptoError, Direction, KEY_LEN, Padding, SIGNATURE_LEN};
use crate::packet::{ClusterId, Cmd, Mode, Packet, PacketMeta, TaskId, TenantId};
use crate::runtime::context;
use crate::runtime::cut::{aes_packet_count, bytes_mut, cut_aes};
use crate::runtime::engine::{Engine, Refused, Wait};
use crate::runtime::error::{KeyError, SubmitError, TenantError, TrySubmitError};
use crate::runtime::handle::JobHandle;
use crate::runtime::ids::{ClusterKind, KeyId, TaskIds};
use crate::runtime::inline::{self, KeyCache, SmallJob};
use crate::runtime::job::{GcmRequest, Iv, Job, JobKind};
use crate::runtime::metrics::Metrics;
use crate::runtime::stream::Stream;
use crate::runtime::tenant::{Lease, TenantSpec, TenantState};
use crate::runtime::work::{JobRecord, Operation, PacketData, Packets};

/// A running crypto offload service: a pool of pinned worker threads ("nodes") in clusters, fed
/// by the scheduler core.
///
/// `Service` is `Send + Sync`: share it by reference (for example with scoped threads) or in
/// an `Arc`, and submit from as many threads as you like. Dropping it shuts it down: every job
/// already submitted still completes, then the workers stop. See the [crate docs](crate) for a
/// walk-through.
pub struct Service {
    engine: Arc<Engine>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Service")
            .field("nodes", &self.engine.layout.nodes.len())
            .field("packet_size", &self.engine.layout.packet_size)
            .finish_non_exhaustive()
    }
}

/// A job checked and cut into packets.
struct Cut {
    cluster: ClusterId,
    packets: Packets,
    job: Arc<JobRecord>,
    origin: Origin,
}

/// A job checked and cut into packets under its tenant, not yet admitted.
struct CutJob {
    cluster: ClusterId,
    packets: Packets,
    job: Arc<JobRecord>,
    origin: Origin,
    tenant: Arc<TenantState>,
    /// The job's length, as its tenant counts it.
    bytes: u64,
}

/// A job of a burst, checked: run on the submitting thread, or cut for a node.
enum Burst {
    Small(SmallJob),
    /// Boxed: a prepared job is several times the size of a small one.
    Node(Box<CutJob>),
}

/// The jobs of a burst gathered for the nodes, with their tenants and lengths.
#[derive(Default)]
struct BurstBatch {
    jobs: Vec<(ClusterId, Packets)>,
    tenants: Vec<(Arc<TenantState>, u64)>,
}

impl Burst {
    fn batch() -> BurstBatch {
        BurstBatch::default()
    }
}

/// Wakes futures that waited for a tenant's room, with no lock held.
fn wake_all(wakers: Vec<std::task::Waker>) {
    for w in wakers {
        w.wake();
    }
}

/// Signatures per packet of a batch verification: about where `ed25519-dalek`'s batch
/// verification stops gaining per signature.
const BATCH: usize = 64;

/// The future [`Service::submit_async`] returns: resolves to the job's handle once the job is
/// admitted.
#[must_use = "a future does nothing unless polled"]
pub struct SubmitFuture<'a> {
    service: &'a Service,
    pending: Option<Result<CutJob, SubmitError>>,
    /// The job's tenant and bytes, until the tenant lets it in.
    door: Option<(Arc<TenantState>, u64)>,
    /// Whether the future has waited (at the tenant's door or for room).
    waited: bool,
}

impl fmt::Debug for SubmitFuture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubmitFuture")
            .field("pending", &self.pending.is_some())
            .finish()
    }
}

impl Future for SubmitFuture<'_> {
    type Output = Result<JobHandle, SubmitError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let (Some(Ok(p)), Some((tenant, bytes))) = (&this.pending, &this.door) {
            if this.service.engine.is_closing() {
                tenant.waiting(*bytes, false);
                this.door = None;
                this.pending = None;
            } else {
                let Some(lease) = tenant.enter_or_wake(*bytes, cx.waker()) else {
                    if !this.waited {
                        tenant.waiting(*bytes, true);
                        this.waited = true;
                    }
                    return Poll::Pending;
                };
                if this.waited {
                    tenant.waiting(*bytes, false);
                }
                p.job.attach(lease);
                this.door = None;
            }
        }
        let prepared = match self.pending.take() {
            Some(Ok(p)) => p,
            Some(Err(e)) => return Poll::Ready(Err(e)),
            None => return Poll::Ready(Err(SubmitError::ShutDown)),
        };
        let tenant = Arc::clone(&prepared.tenant);
        let bytes = prepared.bytes;
        match self.service.admit(prepared, Wait::Wake(cx.waker())) {
            Ok(handle) => {
                tenant.admitted(bytes);
                Poll::Ready(Ok(handle))
            }
            Err(Refused::ShutDown) => Poll::Ready(Err(SubmitError::ShutDown)),
            Err(Refused::NoNodeUp(kind)) => Poll::Ready(Err(SubmitError::NoNodeUp(kind))),
            Err(Refused::Full(p)) => {
                self.pending = Some(Ok(*p));
                self.waited = true;
                Poll::Pending
            }
        }
    }
}

impl Drop for SubmitFuture<'_> {
    /// A future dropped while it waited counts its job refused by its tenant.
    fn drop(&mut self) {
        if let Some(Ok(p)) = &self.pending
            && self.waited
        {
            if let Some((tenant, bytes)) = &self.door {
                tenant.waiting(*bytes, false);
            }
            p.tenant.refused(p.bytes);
        }
    }
}

/// What is needed to hand a refused job back as it came.
enum Origin {
    Aes {
        key: KeyId,
        op: AesOp,
        iv: Iv,
        len: usize,
    },
    Gcm {
        key: KeyId,
        direction: Direction,
        nonce: Iv,
        aad: Arc<Vec<u8>>,
        tag: Vec<u8>,
    },
    Sign {
        key: KeyId,
    },
    Verify {
        key: KeyId,
        sig: Vec<u8>,
    },
    VerifyBatch {
        keys: Vec<KeyId>,
        sigs: Vec<Vec<u8>>,
        lens: Vec<usize>,
    },
}

impl Service {
    pub(crate) fn start(engine: Arc<Engine>, threads: Vec<JoinHandle<()>>) -> Self {
        Service {
            engine,
            threads: Mutex::new(threads),
        }
    }

    /// Registers an AES key of 16, 24 or 32 bytes and expands its schedule once.
    ///
    /// # Errors
    /// [`KeyError::Crypto`] for any other length.
    pub fn add_aes_key(&self, key: &[u8]) -> Result<KeyId, KeyError> {
        self.engine.keys.add_aes(key)
    }

    /// Registers an Ed25519 signing key from its 32-byte seed.
    ///
    /// # Errors
    /// [`KeyError::Crypto`] unless the seed is 32 bytes.
    pub fn add_signing_key(&self, seed: &[u8]) -> Result<KeyId, KeyError> {
        self.engine.keys.add_signing(seed)
    }

    /// Generates and registers a new Ed25519 signing key from the operating system's random
    /// source. Its public half is [`verifying_key`](Self::verifying_key).
    ///
    /// # Errors
    /// [`KeyError::Random`] if the random source fails.
    pub fn generate_signing_key(&self) -> Result<KeyId, KeyError> {
        self.engine.keys.generate_signing()
    }

    /// Registers an Ed25519 verifying (public) key of 32 bytes. `ed25519-dalek` decides what
    /// it takes: a non-canonical encoding and keys of small order are registered, and
    /// signatures under them do not verify (verification is strict).
    ///
    /// # Errors
    /// [`KeyError::Crypto`] for a wrong length or bytes that do not decode to a curve point.
    pub fn add_verifying_key(&self, public: &[u8]) -> Result<KeyId, KeyError> {
        self.engine.keys.add_verifying(public)
    }

    /// The 32-byte public key of a registered Ed25519 key.
    ///
    /// # Errors
    /// [`KeyError::UnknownKey`], or [`KeyError::WrongKind`] for an AES key.
    pub fn verifying_key(&self, key: KeyId) -> Result<[u8; KEY_LEN], KeyError> {
        self.engine.keys.verifying_key(key).map(|k| k.to_bytes())
    }

    /// Removes a key. Jobs already submitted with it still complete; its bytes are zeroized
    /// when the last of them finishes.
    ///
    /// # Errors
    /// [`KeyError::UnknownKey`].
    pub fn remove_key(&self, key: KeyId) -> Result<(), KeyError> {
        self.engine.keys.remove(key)
    }

    /// Registers a tenant: a client whose jobs ([`Job::tenant`]) share the nodes with other
    /// tenants' by weight and pass its limits (docs/ALGORITHM.md §15.7). Jobs submitted without
    /// a tenant belong to [`TenantId::DEFAULT`], of weight 1 and without limits. From then on
    /// the service is shared: small jobs go to the nodes rather than run on their submitters
    /// ([`ServiceBuilder::inline_limit`](crate::runtime::ServiceBuilder::inline_limit)).
    ///
    /// # Errors
    /// [`TenantError`] for a bad name, a name registered already, a weight or limit of 0.
    pub fn add_tenant(&self, spec: TenantSpec) -> Result<TenantId, TenantError> {
        self.engine.add_tenant(&spec)
    }

    /// The id of the tenant named `name` (`default` is [`TenantId::DEFAULT`]).
    pub fn tenant_id(&self, name: &str) -> Option<TenantId> {
        self.engine.tenants.find(name)
    }

    /// Submits a job, blocking while its tenant is at one of its limits or its cluster's
    /// receive queue is full (backpressure).
    ///
    /// # Errors
    /// [`SubmitError`] if the job is malformed, names an unknown tenant, the service is shut
    /// down, or no node of the job's cluster is up; nothing of a refused job runs. Called on one
    /// of the service's own worker threads (from a waker or callback the service ran there), it
    /// does not wait for room, which that very worker may have to free:
    /// [`SubmitError::OnWorkerThread`] when the queue is full or the tenant at a limit.
    pub fn submit(&self, job: Job) -> Result<JobHandle, SubmitError> {
        let submitted = Instant::now();
        let tenant = self.tenant_of(job.tenant)?;
        let bytes = job.len() as u64;
        let lease = self.enter(&tenant, bytes)?;
        let task = self.engine.next_task();
        let job = {
            // The registry stays read-locked while an inline job runs, so that the job borrows
            // its key; it is released before a job for the nodes is prepared.
            let registry = self.engine.keys.read();
            let mut keys = KeyCache::held(&registry);
            match inline::check(&self.engine, job, &mut keys, task)? {
                Ok(small) => {
                    let done = small.run(&keys);
                    self.engine
                        .counters
                        .jobs_inline(1, u64::from(done.failed()));
                    tenant.admitted(bytes);
                    let finished = Instant::now();
                    wake_all(lease.finish(!done.failed(), finished - submitted));
                    return Ok(done.handle(submitted, finished));
                }
                Err(job) => job,
            }
        };
        let p = self.prepare(job, task, Arc::clone(&tenant))?;
        p.job.attach(lease);
        let wait = if context::on_worker_of(self.engine.serial()) {
            Wait::No
        } else {
            Wait::Block
        };
        match self.admit(p, wait) {
            Ok(h) => {
                tenant.admitted(bytes);
                Ok(h)
            }
            Err(Refused::ShutDown) => Err(SubmitError::ShutDown),
            Err(Refused::NoNodeUp(kind)) => Err(SubmitError::NoNodeUp(kind)),
            Err(Refused::Full(_)) => Err(SubmitError::OnWorkerThread),
        }
    }

    /// Lets a job of `bytes` through its tenant's limits, blocking while one holds it.
    fn enter(&self, tenant: &Arc<TenantState>, bytes: u64) -> Result<Lease, SubmitError> {
        match tenant.try_enter(bytes) {
            Ok(lease) => Ok(lease),
            Err(_) if context::on_worker_of(self.engine.serial()) => {
                Err(SubmitError::OnWorkerThread)
            }
            Err(_) => tenant
                .enter_blocking(bytes, || !self.engine.is_closing())
                .ok_or(SubmitError::ShutDown),
        }
    }

    /// Submits a job without blocking the thread: the future resolves to the job's handle once
    /// its tenant's limits let it in and its cluster's receive queue has room (it is woken
    /// when room frees, like a [`JobHandle`]; a tenant's byte rate is looked at again on the
    /// supervisor's tick, every 50 ms at most), so an async server never blocks its executor
    /// on backpressure. It needs no particular async runtime. A malformed job resolves to its
    /// error at the first poll; dropping the future before it resolves submits nothing.
    ///
    /// # Errors
    /// As [`submit`](Self::submit).
    pub fn submit_async(&self, job: Job) -> SubmitFuture<'_> {
        let pending = self
            .tenant_of(job.tenant)
            .and_then(|tenant| self.prepare(job, self.engine.next_task(), tenant));
        let door = pending
            .as_ref()
            .ok()
            .map(|p| (Arc::clone(&p.tenant), p.bytes));
        SubmitFuture {
            service: self,
            pending: Some(pending),
            door,
            waited: false,
        }
    }

    /// Submits many jobs with one trip through the engine, blocking for room like
    /// [`submit`](Self::submit), and returns their handles in order. Every job is checked
    /// first: a malformed one refuses the whole burst, and nothing of it runs. Cheaper per job
    /// than one `submit` each when jobs are small: one lock round trip, one wake-up per node.
    /// A job whose tenant is at a limit first sends the jobs before it on their way, then
    /// waits.
    ///
    /// # Errors
    /// The first malformed job's [`SubmitError`]; [`SubmitError::ShutDown`] if the service is
    /// shut down, or begins to shut down while the burst waits for room (the jobs admitted
    /// before then still run to completion, but their handles are not returned).
    pub fn submit_burst(
        &self,
        jobs: impl IntoIterator<Item = Job>,
    ) -> Result<Vec<JobHandle>, SubmitError> {
        let submitted = Instant::now();
        let mut keys = KeyCache::default();
        let mut ids = TaskIds::default();
        // Every job is checked before any runs.
        let checked = jobs
            .into_iter()
            .map(|job| {
                let task = self.engine.next_task_from(&mut ids);
                let tenant = self.tenant_of(job.tenant)?;
                let bytes = job.len() as u64;
                let checked = match inline::check(&self.engine, job, &mut keys, task)? {
                    Ok(small) => Burst::Small(small),
                    Err(job) => {
                        Burst::Node(Box::new(self.prepare(job, task, Arc::clone(&tenant))?))
                    }
                };
                Ok((checked, tenant, bytes))
            })
            .collect::<Result<Vec<_>, SubmitError>>()?;
        let total = checked.len();
        let mut slots = Vec::with_capacity(total);
        let mut batch = Burst::batch();
        let (mut ran, mut failed) = (0, 0);
        for (job, tenant, bytes) in checked {
            let lease = match tenant.try_enter(bytes) {
                Ok(lease) => lease,
                Err(_) => {
                    // The jobs before it go first: they may be what holds the tenant.
                    self.send_burst(&mut batch, &slots)?;
                    self.enter(&tenant, bytes)?
                }
            };
            match job {
                Burst::Small(small) => {
                    let done = small.run(&keys);
                    ran += 1;
                    failed += u64::from(done.failed());
                    tenant.admitted(bytes);
                    wake_all(lease.finish(!done.failed(), submitted.elapsed()));
                    slots.push(Ok(done));
                }
                Burst::Node(p) => {
                    self.engine.counters.job_submitted();
                    p.job.attach(lease);
                    slots.push(Err((p.job.task, JobHandle::on_nodes(p.job))));
                    batch.jobs.push((p.cluster, p.packets));
                    batch.tenants.push((p.tenant, bytes));
                }
            }
        }
        if ran > 0 {
            self.engine.counters.jobs_inline(ran, failed);
        }
        self.send_burst(&mut batch, &slots)?;
        // The inline jobs' results are the caller's when the call returns.
        let finished = Instant::now();
        Ok(slots
            .into_iter()
            .map(|slot| match slot {
                Ok(done) => done.handle(submitted, finished),
                Err((_, handle)) => handle,
            })
            .collect())
    }

    /// Admits the jobs of a burst gathered so far (the last of `slots`' jobs for the nodes).
    fn send_burst(
        &self,
        batch: &mut BurstBatch,
        slots: &[Result<inline::Finished, (TaskId, JobHandle)>],
    ) -> Result<(), SubmitError> {
        let queued = batch.jobs.len();
        if queued == 0 {
            return Ok(());
        }
        let admitted = self.engine.admit_burst(std::mem::take(&mut batch.jobs));
        for (tenant, bytes) in batch.tenants.drain(..).take(admitted) {
            tenant.admitted(bytes);
        }
        if admitted < queued {
            let mine = slots.iter().filter_map(|s| s.as_ref().err());
            let sent = mine.clone().count();
            for (task, _) in mine.skip(sent - queued + admitted) {
                self.engine.counters.job_withdrawn();
                self.engine.store.remove(*task);
            }
            return Err(SubmitError::ShutDown);
        }
        Ok(())
    }

    /// Submits a job if its tenant's limits let it in and its cluster's receive queue has room
    /// now; otherwise hands it back in [`TrySubmitError::OverLimit`] or
    /// [`TrySubmitError::Full`].
    ///
    /// # Errors
    /// [`TrySubmitError::OverLimit`] or [`TrySubmitError::Full`] with the job, or
    /// [`TrySubmitError::Invalid`].
    pub fn try_submit(&self, job: Job) -> Result<JobHandle, TrySubmitError> {
        let tenant = self.tenant_of(job.tenant)?;
        let bytes = job.len() as u64;
        let Ok(lease) = tenant.try_enter(bytes) else {
            tenant.refused(bytes);
            return Err(TrySubmitError::OverLimit(job));
        };
        let p = self.prepare(job, self.engine.next_task(), Arc::clone(&tenant))?;
        p.job.attach(lease);
        match self.admit(p, Wait::No) {
            Ok(h) => {
                tenant.admitted(bytes);
                Ok(h)
            }
            Err(Refused::ShutDown) => Err(SubmitError::ShutDown.into()),
            Err(Refused::NoNodeUp(kind)) => Err(SubmitError::NoNodeUp(kind).into()),
            Err(Refused::Full(p)) => {
                tenant.refused(bytes);
                let CutJob {
                    packets, origin, ..
                } = *p;
                Err(TrySubmitError::Full(
                    rebuild(packets, origin).tenant(tenant.id),
                ))
            }
        }
    }

    /// Opens a stream: a long-lived AES job fed chunk by chunk (a tunnel, a disk). See
    /// [`Stream`]. Streams take every mode but GCM: a GCM decryption may release no plaintext
    /// before its tag is checked at the very end, which a stream's chunk-by-chunk outputs
    /// would (docs/ALGORITHM.md §15.4); submit GCM as one job instead.
    ///
    /// # Errors
    /// As [`submit`](Self::submit) for the key, IV, padding and cluster;
    /// [`CryptoError::AuthenticatedMode`] for GCM.
    pub fn stream(&self, key: KeyId, op: AesOp, iv: &[u8]) -> Result<Stream, SubmitError> {
        if op.mode.is_authenticated() {
            return Err(CryptoError::AuthenticatedMode.into());
        }
        let aes = self.engine.keys.aes(key)?;
        if op.padding == Padding::Pkcs7 && !op.mode.needs_whole_blocks() {
            return Err(CryptoError::PaddingNotApplicable.into());
        }
        let state = ChainState::for_mode(op.mode, iv)?;
        let cluster = self.cluster(ClusterKind::Aes)?;
        if self.engine.is_closing() {
            return Err(SubmitError::ShutDown);
        }
        self.choose_implementation(op);
        let task = self.engine.next_task();
        let start = op.mode.takes_iv().then_some(state);
        Ok(Stream::new(
            Arc::clone(&self.engine),
            task,
            cluster,
            aes,
            op,
            start,
        ))
    }

    /// A snapshot of the counters: per node, per cluster, per service.
    pub fn metrics(&self) -> Metrics {
        self.engine.metrics()
    }

    /// The packet size AES jobs are cut into.
    pub fn packet_size(&self) -> usize {
        self.engine.layout.packet_size
    }

    /// The number of nodes, all clusters together.
    pub fn num_nodes(&self) -> usize {
        self.engine.layout.nodes.len()
    }

    /// Whether the service has a cluster of `kind`.
    pub fn has_cluster(&self, kind: ClusterKind) -> bool {
        self.engine.layout.cluster(kind).is_some()
    }

    /// Shuts the service down: refuses new jobs (they get [`SubmitError::ShutDown`]), lets
    /// every job already submitted complete, then stops and joins the workers. Idempotent;
    /// `Drop` calls it.
    ///
    /// The protocol:
    /// 1. mark the engine closing, and wake submitters blocked on backpressure, who get
    ///    [`SubmitError::ShutDown`];
    /// 2. wait until every admitted packet has been reported complete;
    /// 3. mark the engine stopping and wake every worker; each leaves when its queue is empty;
    /// 4. join the worker threads.
    ///
    /// Called on one of the service's own worker threads (a waker or callback that drops the
    /// last reference to the service runs there), it cannot wait for that worker: it refuses
    /// new jobs at once, hands steps 2–4 to a thread of their own, and returns.
    pub fn shutdown(&self) {
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        if context::on_worker_of(self.engine.serial()) {
            self.engine.close();
            let engine = Arc::clone(&self.engine);
            // If even this thread cannot start, the workers keep serving what was admitted.
            let _ = std::thread::Builder::new()
                .name("cryptodispatch-shutdown".into())
                .spawn(move || {
                    engine.drain_and_stop();
                    for t in threads {
                        let _ = t.join();
                    }
                });
            return;
        }
        self.engine.drain_and_stop();
        for t in threads {
            let _ = t.join();
        }
    }

    fn cluster(&self, kind: ClusterKind) -> Result<ClusterId, SubmitError> {
        self.engine
            .layout
            .cluster(kind)
            .ok_or(SubmitError::NoCluster(kind))
    }

    /// The tenant `id`, registered.
    fn tenant_of(&self, id: TenantId) -> Result<Arc<TenantState>, SubmitError> {
        self.engine
            .tenants
            .get(id)
            .ok_or(SubmitError::UnknownTenant(id))
    }

    /// Checks a job and cuts it into packets, under its tenant, looked up by the caller (whose
    /// room it does not take yet).
    fn prepare(
        &self,
        job: Job,
        task: TaskId,
        tenant: Arc<TenantState>,
    ) -> Result<CutJob, SubmitError> {
        let bytes = job.len() as u64;
        let Cut {
            cluster,
            mut packets,
            job,
            origin,
        } = self.cut(job, task)?;
        for p in &mut packets {
            p.meta.tenant = tenant.id;
        }
        Ok(CutJob {
            cluster,
            packets,
            job,
            origin,
            tenant,
            bytes,
        })
    }

    /// Makes sure the implementation `op` runs on is chosen: the first job of an operation
    /// measures the implementations on the submitting thread (about half a millisecond), so
    /// that no node measures in the middle of its work (docs/ALGORITHM.md §15.3).
    fn choose_implementation(&self, op: AesOp) {
        self.engine.layout.aes_impls.get(op);
    }

    /// Checks a job and cuts it into packets.
    fn cut(&self, job: Job, task: TaskId) -> Result<Cut, SubmitError> {
        match job.kind {
            JobKind::Aes { key, op, iv, data } => {
                let aes = self.engine.keys.aes(key)?;
                op.check_job_len(data.len())?;
                let state = ChainState::for_mode(op.mode, &iv)?;
                let cluster = self.cluster(ClusterKind::Aes)?;
                self.choose_implementation(op);
                let len = data.len();
                let job = Arc::new(JobRecord::new(
                    task,
                    cluster,
                    Operation::Aes { key: aes, op },
                    aes_packet_count(op, len, self.engine.layout.cutting(), true),
                ));
                let start = op.mode.takes_iv().then_some(state);
                let packets = cut_aes(&job, op, data, self.engine.layout.cutting(), 0, true, start);
                Ok(Cut {
                    cluster,
                    packets,
                    job,
                    origin: Origin::Aes { key, op, iv, len },
                })
            }
            JobKind::Gcm(request) => self.gcm(task, request),
            JobKind::Sign { key, msg } => {
                let signing = self.engine.keys.signing(key)?;
                self.one_packet(
                    task,
                    Operation::Sign { key: signing },
                    Cmd::Sign,
                    msg,
                    Origin::Sign { key },
                )
            }
            JobKind::Verify { key, msg, sig } => {
                let public = self.engine.keys.public(key)?;
                let sig_bytes: [u8; SIGNATURE_LEN] = sig
                    .as_slice()
                    .try_into()
                    .map_err(|_| CryptoError::SignatureLength { got: sig.len() })?;
                let work = Operation::Verify {
                    key: Box::new(public),
                    sig: Box::new(sig_bytes),
                };
                self.one_packet(task, work, Cmd::Verify, msg, Origin::Verify { key, sig })
            }
            JobKind::VerifyBatch { items } => self.batch(task, items),
        }
    }

    /// A GCM job (docs/ALGORITHM.md §15.4): checked, then cut into packets like a CBC job, a
    /// dependent chain whose packets hand the GHASH state on.
    fn gcm(&self, task: TaskId, request: GcmRequest) -> Result<Cut, SubmitError> {
        let aes = self.engine.keys.aes(request.key)?;
        let (nonce_bytes, expected) = request.check()?;
        let cluster = self.cluster(ClusterKind::Aes)?;
        let GcmRequest {
            key,
            direction,
            nonce,
            aad,
            data,
            tag,
        } = request;
        let aad = Arc::new(aad);
        let op = AesOp::new(direction, Mode::Gcm);
        self.choose_implementation(op);
        let work = Operation::Gcm {
            key: aes,
            direction,
            nonce: nonce_bytes,
            aad: Arc::clone(&aad),
            tag: expected,
        };
        let parts = aes_packet_count(op, data.len(), self.engine.layout.cutting(), true);
        if parts > 1 {
            self.engine.layout.aes_impls.gcm_chain(direction);
        }
        let job = Arc::new(JobRecord::new(task, cluster, work, parts));
        let packets = cut_aes(&job, op, data, self.engine.layout.cutting(), 0, true, None);
        Ok(Cut {
            cluster,
            packets,
            job,
            origin: Origin::Gcm {
                key,
                direction,
                nonce,
                aad,
                tag,
            },
        })
    }

    /// A batch verification: packets of up to [`BATCH`] signatures (and at most a node's
    /// capacity of message bytes), each verified in one batch by an Ed25519 node.
    fn batch(
        &self,
        task: TaskId,
        items: Vec<(KeyId, Vec<u8>, Vec<u8>)>,
    ) -> Result<Cut, SubmitError> {
        let cluster = self.cluster(ClusterKind::Ed25519)?;
        let max = self.engine.layout.node_queue(cluster).bytes;
        let mut checked = Vec::with_capacity(items.len());
        for (key, msg, sig) in &items {
            let public = self.engine.keys.public(*key)?;
            let sig: [u8; SIGNATURE_LEN] = sig
                .as_slice()
                .try_into()
                .map_err(|_| CryptoError::SignatureLength { got: sig.len() })?;
            if msg.len() as u64 > max {
                return Err(SubmitError::TooLarge {
                    len: msg.len(),
                    max,
                });
            }
            checked.push((public, sig, msg.len()));
        }
        // Packet boundaries: a new packet at BATCH items, or when the bytes would overflow.
        let mut starts = vec![0];
        let (mut bytes, mut count) = (0u64, 0usize);
        for (i, &(_, _, len)) in checked.iter().enumerate() {
            if count == BATCH || (count > 0 && bytes + len as u64 > max) {
                starts.push(i);
                (bytes, count) = (0, 0);
            }
            bytes += len as u64;
            count += 1;
        }
        let ends: Vec<usize> = starts
            .iter()
            .skip(1)
            .copied()
            .chain([checked.len()])
            .collect();
        let lens: Vec<usize> = checked.iter().map(|&(_, _, len)| len).collect();
        let packet_bytes: Vec<usize> = starts
            .iter()
            .zip(&ends)
            .map(|(&a, &b)| lens[a..b].iter().sum())
            .collect();
        let mut all = Vec::with_capacity(lens.iter().sum());
        let mut keys = Vec::with_capacity(items.len());
        let mut sigs = Vec::with_capacity(items.len());
        for (key, msg, sig) in items {
            all.extend_from_slice(&msg);
            keys.push(key);
            sigs.push(sig);
        }
        let parts = starts.len();
        let job = Arc::new(JobRecord::new(
            task,
            cluster,
            Operation::VerifyBatch {
                items: checked,
                starts,
            },
            parts,
        ));
        let mut buf = bytes_mut(all);
        let packets = packet_bytes
            .iter()
            .enumerate()
            .map(|(p, &n)| {
                let last = p + 1 == parts;
                let data = if last {
                    std::mem::take(&mut buf)
                } else {
                    buf.split_to(n)
                };
                let work = PacketData {
                    job: Arc::clone(&job),
                    part: p,
                    msg_len: data.len(),
                    data,
                    start: None,
                    attempt: 0,
                    light: false,
                    input: None,
                };
                Packet::new(
                    PacketMeta::new(task, Cmd::Verify, cluster).at(p as u32, last),
                    work,
                )
            })
            .collect();
        Ok(Cut {
            cluster,
            packets,
            job,
            origin: Origin::VerifyBatch { keys, sigs, lens },
        })
    }

    /// An Ed25519 job: the whole message is one packet.
    fn one_packet(
        &self,
        task: TaskId,
        work: Operation,
        cmd: Cmd,
        msg: Vec<u8>,
        origin: Origin,
    ) -> Result<Cut, SubmitError> {
        let cluster = self.cluster(ClusterKind::Ed25519)?;
        let max = self.engine.layout.node_queue(cluster).bytes;
        if msg.len() as u64 > max {
            return Err(SubmitError::TooLarge {
                len: msg.len(),
                max,
            });
        }
        let job = Arc::new(JobRecord::new(task, cluster, work, 1));
        let msg_len = msg.len();
        let work = PacketData {
            job: Arc::clone(&job),
            part: 0,
            data: bytes_mut(msg),
            msg_len,
            start: None,
            attempt: 0,
            light: false,
            input: None,
        };
        let packet = Packet::new(PacketMeta::new(task, cmd, cluster), work);
        Ok(Cut {
            cluster,
            packets: smallvec::smallvec![packet],
            job,
            origin,
        })
    }

    /// Whether a prepared job is small enough to run on the submitting thread
    /// ([`inline`](crate::runtime::inline)).
    fn runs_inline(&self, p: &CutJob) -> bool {
        match p.packets.as_slice() {
            [packet] => {
                let parallel = match &p.job.operation {
                    Operation::Aes { op, .. } => !op.is_serial(),
                    // As a parallel mode when its implementation was measured as fast.
                    Operation::Gcm { direction, .. } => {
                        self.engine.layout.gcm_runs_parallel(*direction)
                    }
                    _ => return false,
                };
                inline::allowed(&self.engine, p.cluster, packet.data.data.len(), parallel)
            }
            _ => false,
        }
    }

    /// Runs a prepared job of one packet on the submitting thread; its handle is resolved.
    fn run_inline(&self, p: CutJob) -> JobHandle {
        let submitted = p.job.submitted();
        let CutJob {
            mut packets, job, ..
        } = p;
        let Some(Packet { meta, data: work }) = packets.pop() else {
            unreachable!("one packet, checked above");
        };
        drop(packets);
        let lease = job.take_lease();
        let done = inline::run_prepared(&self.engine, job, meta, work);
        self.engine
            .counters
            .jobs_inline(1, u64::from(done.failed()));
        let finished = Instant::now();
        if let Some(lease) = lease {
            wake_all(lease.finish(!done.failed(), finished - submitted));
        }
        done.handle(submitted, finished)
    }

    /// Whether a prepared AES or GCM job of one packet, of any length, runs on the submitting
    /// thread because the nodes of its cluster are stalled ([`inline::stalled`]) or its
    /// tenant is behind on its own light jobs ([`inline::behind`]), and which: a job of a
    /// tenant that is not busy, as one taking the light path (a backlogged tenant's jobs wait
    /// for the node, and its submitters spend no more of their cores than before).
    fn runs_inline_beside(&self, p: &CutJob) -> Option<Beside> {
        if p.packets.len() != 1
            || !matches!(
                p.job.operation,
                Operation::Aes { .. } | Operation::Gcm { .. }
            )
            || p.tenant.recently_busy()
        {
            return None;
        }
        if inline::stalled(&self.engine, p.cluster) {
            Some(Beside::Stalled)
        } else if inline::behind(&self.engine, p.cluster, &p.tenant, &p.packets) {
            Some(Beside::Behind)
        } else {
            None
        }
    }

    /// Admits a prepared job; if the queue is full (and `wait` does not block), hands it back.
    fn admit(&self, p: CutJob, wait: Wait<'_>) -> Result<JobHandle, Refused<Box<CutJob>>> {
        if self.runs_inline(&p) {
            return Ok(self.run_inline(p));
        }
        if let Some(beside) = self.runs_inline_beside(&p) {
            match beside {
                Beside::Stalled => p.tenant.ran_inline_stalled(),
                Beside::Behind => p.tenant.ran_inline_behind(),
            }
            let handle = self.run_inline(p);
            match beside {
                Beside::Stalled => self.engine.counters.job_inline_stalled(),
                Beside::Behind => self.engine.counters.job_inline_behind(),
            }
            return Ok(handle);
        }
        let CutJob {
            cluster,
            packets,
            job,
            origin,
            tenant,
            bytes,
        } = p;
        self.engine.counters.job_submitted();
        // A light job (§15.7): with the light path on, in a service shared between tenants, a
        // tenant sending within its share may have its small jobs run at their node's next
        // pause.
        let light =
            (self.engine.layout.light_path && self.engine.tenants.is_shared()).then_some(&*tenant);
        match self.engine.admit(cluster, packets, wait, false, light) {
            Ok(()) => Ok(JobHandle::on_nodes(job)),
            Err(refused) => {
                self.engine.counters.job_withdrawn();
                self.engine.store.remove(job.task);
                match refused {
                    Refused::ShutDown => Err(Refused::ShutDown),
                    Refused::NoNodeUp(kind) => Err(Refused::NoNodeUp(kind)),
                    Refused::Full(packets) => Err(Refused::Full(Box::new(CutJob {
                        cluster,
                        packets,
                        job,
                        origin,
                        tenant,
                        bytes,
                    }))),
                }
            }
        }
    }
}

/// Why a job of one packet that would go to a node runs on its submitting thread instead.
#[derive(Clone, Copy)]
enum Beside {
    /// Every node of its cluster has left its light packets waiting ([`inline::stalled`]).
    Stalled,
    /// Every node of its cluster holds a set of its tenant's light packets
    /// ([`inline::behind`]).
    Behind,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Puts a refused job back together, rejoining its buffer.
fn rebuild(packets: Packets, origin: Origin) -> Job {
    let mut data: Option<BytesMut> = None;
    for p in packets {
        match &mut data {
            Some(d) => d.unsplit(p.data.data),
            None => data = Some(p.data.data),
        }
    }
    let mut data: Vec<u8> = data.map(Vec::from).unwrap_or_default();
    match origin {
        Origin::Aes { key, op, iv, len } => {
            data.truncate(len);
            Job::aes(key, op, &iv, data)
        }
        Origin::Gcm {
            key,
            direction,
            nonce,
            aad,
            tag,
        } => {
            let aad = Arc::try_unwrap(aad).unwrap_or_else(|shared| shared.to_vec());
            match direction {
                Direction::Encrypt => Job::gcm_encrypt(key, &nonce, aad, data),
                Direction::Decrypt => Job::gcm_decrypt(key, &nonce, aad, data, &tag),
            }
        }
        Origin::Sign { key } => Job::sign(key, data),
        Origin::Verify { key, sig } => Job::verify(key, data, &sig),
        Origin::VerifyBatch { keys, sigs, lens } => {
            let mut rest = data.as_slice();
            let mut items = Vec::with_capacity(keys.len());
            for ((key, sig), len) in keys.into_iter().zip(sigs).zip(lens) {
                let (msg, tail) = rest.split_at(len);
                items.push((key, msg.to_vec(), sig));
                rest = tail;
            }
            Job::verify_batch(items)
        }
    }
}
