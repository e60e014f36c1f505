//! The service over its life: shutdown with thousands of jobs in flight (and racing
//! submitters, and by drop), isolation of a saturated cluster from another, streams (order,
//! affinities, abandonment), the `Future` impl of `JobHandle` driven by a hand-written executor,
//! the metrics after a known workload, and removing a key while a job uses it.
//!
//! No test measures speed. Tests that watch the process's threads or depend on one cluster
//! racing ahead of a slowed one take an exclusive lock, so other tests of this file do not run
//! beside them; the rest share it.

use crate::common;

use std::collections::HashSet;
use std::fs;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use common::{Gen, SubmittingWaker, block_on, cores, ed_sign, node_packets, ref_aes};
use cryptodispatch::crypto::padded_len;
use cryptodispatch::error::CryptoError;
use cryptodispatch::packet::Mode;
use cryptodispatch::{
    Admission, AesOp, Affinity, ClusterKind, Direction, Job, JobError, JobHandle, JobOutput, KeyId,
    Metrics, NodeSpec, Padding, Service, ServiceBuilder, StreamReceiver, StreamSender, SubmitError,
    TryPushError,
};

static SERIAL: RwLock<()> = RwLock::new(());

/// For tests that must run alone (thread counts, one cluster racing a slowed one).
fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SERIAL.write().unwrap_or_else(|e| e.into_inner())
}

fn shared() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().unwrap_or_else(|e| e.into_inner())
}

fn pinned(i: usize) -> NodeSpec {
    match cores() {
        0 => NodeSpec::new(),
        n => NodeSpec::pinned(i % n),
    }
}

/// Ids of the threads of this process whose name is a service worker's (`cdnode-N`). `None`
/// without `/proc` (not Linux).
fn worker_tids() -> Option<HashSet<String>> {
    let dir = fs::read_dir("/proc/self/task").ok()?;
    Some(
        dir.filter_map(|e| {
            let e = e.ok()?;
            let name = fs::read_to_string(e.path().join("comm")).ok()?;
            name.starts_with("cdnode-")
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect(),
    )
}

/// Builds a service and finds its worker threads: those that appeared while it was built.
/// Callers hold `exclusive()`, so no other service starts meanwhile.
fn build_watched(b: ServiceBuilder, nodes: usize) -> (Service, Option<HashSet<String>>) {
    let before = worker_tids();
    let service = b.build().unwrap();
    let mine = before
        .zip(worker_tids())
        .map(|(before, after)| after.difference(&before).cloned().collect::<HashSet<_>>());
    if let Some(mine) = &mine {
        assert_eq!(mine.len(), nodes, "one thread per node");
    }
    (service, mine)
}

/// Waits until none of `mine` is left (a joined thread may take a moment to leave the list).
fn assert_threads_gone(mine: &Option<HashSet<String>>, within: Duration, what: &str) {
    let Some(mine) = mine else { return };
    let left = || worker_tids().unwrap_or_default().intersection(mine).count();
    eventually_within(what, within, || left() == 0);
}

/// Waits (generously) for a condition that must become true; fails the test if it does not.
fn eventually(what: &str, cond: impl FnMut() -> bool) {
    eventually_within(what, Duration::from_secs(20), cond);
}

fn eventually_within(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let step = Duration::from_millis(1);
    let mut waited = Duration::ZERO;
    while !cond() {
        assert!(waited < within, "never happened: {what}");
        thread::sleep(step);
        waited += step;
    }
}

fn op(direction: Direction, mode: Mode) -> AesOp {
    AesOp::new(direction, mode)
}

/// A small AES job with its expected output: mode, direction and length vary with `i`.
fn small_job(i: usize, key: KeyId, raw: &[u8], g: &mut Gen) -> (Job, Vec<u8>) {
    let mode = Mode::UNAUTHENTICATED[i % 5];
    let direction = if i % 3 == 0 {
        Direction::Decrypt
    } else {
        Direction::Encrypt
    };
    let len = match mode {
        Mode::Ecb | Mode::Cbc => 16 * (i % 5),
        Mode::Ofb | Mode::Cfb | Mode::Ctr => i % 70,
        Mode::Gcm => unreachable!("not a plain mode"),
    };
    let iv = g.bytes(16);
    let data = g.bytes(len);
    let expected = ref_aes(raw, op(direction, mode), &iv, &data).unwrap();
    (Job::aes(key, op(direction, mode), &iv, data), expected)
}

// ---------------------------------------------------------------------------------------------
// (a) Shutdown
// ---------------------------------------------------------------------------------------------

#[test]
fn shutdown_with_thousands_of_jobs_in_flight_completes_them_all() {
    let _serial = exclusive();
    let (service, threads) = build_watched(
        Service::builder()
            .packet_size(32)
            .aes_cluster([pinned(0), pinned(1), NodeSpec::new().slowdown(2.0)])
            .ed25519_cluster([NodeSpec::new().slowdown(2.0)]),
        4,
    );
    let raw = [0x5A; 32];
    let key = service.add_aes_key(&raw).unwrap();
    let seed = [0x33; 32];
    let signing = service.add_signing_key(&seed).unwrap();

    const PER_THREAD: usize = 2500;
    let submitted: Vec<Vec<(JobHandle, JobOutput)>> = thread::scope(|s| {
        let service = &service;
        let workers: Vec<_> = (0..2)
            .map(|t| {
                s.spawn(move || {
                    let mut g = Gen::new(t as u64);
                    // Build first, then submit in one burst.
                    let jobs: Vec<(Job, JobOutput)> = (0..PER_THREAD)
                        .map(|i| {
                            if i % 25 == 0 {
                                let msg = g.bytes(i % 40);
                                let sig = ed_sign(&seed, &msg);
                                (Job::sign(signing, msg), JobOutput::Signature(sig))
                            } else {
                                let (job, out) = small_job(i + t, key, &raw, &mut g);
                                (job, JobOutput::Data(out))
                            }
                        })
                        .collect();
                    jobs.into_iter()
                        .map(|(job, out)| (service.submit(job).unwrap(), out))
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let handles: Vec<(JobHandle, JobOutput)> = submitted.into_iter().flatten().collect();
    assert_eq!(handles.len(), 2 * PER_THREAD);
    let outstanding = handles.iter().filter(|(h, _)| !h.is_finished()).count();

    // Shut down while (some of) the jobs still run.
    service.shutdown();
    eprintln!(
        "{outstanding} of {} jobs were unfinished at shutdown",
        handles.len()
    );
    assert!(
        handles.iter().all(|(h, _)| h.is_finished()),
        "shutdown returned before every submitted job finished"
    );
    for (i, (h, expected)) in handles.into_iter().enumerate() {
        assert!(h.latency().is_some());
        assert_eq!(h.wait().as_ref(), Ok(&expected), "job {i}");
    }
    assert_eq!(
        service
            .submit(Job::encrypt(key, Mode::Ecb, &[], vec![0; 16]))
            .unwrap_err(),
        SubmitError::ShutDown
    );
    // The workers were joined: no thread of the service is left.
    assert_threads_gone(
        &threads,
        Duration::from_secs(20),
        "workers gone after shutdown",
    );
    service.shutdown(); // again: a no-op
    let m = service.metrics();
    assert_eq!(m.jobs_submitted, 2 * PER_THREAD as u64);
    assert_eq!(m.jobs_completed, 2 * PER_THREAD as u64);
    assert_eq!(m.stored_states, 0);
    drop(service); // and dropping after shutdown is fine
}

#[test]
fn shutdown_racing_submitters_refuses_cleanly_and_completes_what_it_took() {
    let _serial = shared();
    let service = Service::builder()
        .packet_size(16)
        .aes_cluster([pinned(0), NodeSpec::new().slowdown(1.5)])
        .receive_queue_len(64)
        .build()
        .unwrap();
    let raw = [0x17; 16];
    let key = service.add_aes_key(&raw).unwrap();
    let started = AtomicUsize::new(0);

    let results: Vec<Vec<(JobHandle, Vec<u8>)>> = thread::scope(|s| {
        let service = &service;
        let started = &started;
        let workers: Vec<_> = (0..2)
            .map(|t| {
                s.spawn(move || {
                    let mut g = Gen::new(100 + t);
                    let mut taken = Vec::new();
                    for i in 0..200_000 {
                        let (job, expected) = small_job(i, key, &raw, &mut g);
                        match service.submit(job) {
                            Ok(h) => {
                                taken.push((h, expected));
                                started.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => {
                                assert_eq!(e, SubmitError::ShutDown);
                                // Once refused, always refused.
                                for j in 0..10 {
                                    let (job, _) = small_job(j, key, &raw, &mut g);
                                    assert_eq!(
                                        service.submit(job).unwrap_err(),
                                        SubmitError::ShutDown
                                    );
                                }
                                return taken;
                            }
                        }
                    }
                    panic!("the service never shut down")
                })
            })
            .collect();
        eventually("submitters got going", || {
            started.load(Ordering::Relaxed) >= 1000
        });
        service.shutdown();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let taken: Vec<(JobHandle, Vec<u8>)> = results.into_iter().flatten().collect();
    assert!(taken.len() >= 1000);
    let m = service.metrics();
    assert_eq!(
        m.jobs_submitted,
        taken.len() as u64,
        "refused submissions are not counted"
    );
    for (i, (h, expected)) in taken.into_iter().enumerate() {
        assert!(h.is_finished(), "job {i} unfinished after shutdown");
        assert_eq!(h.wait(), Ok(JobOutput::Data(expected)), "job {i}");
    }
    assert_eq!(m.jobs_completed, m.jobs_submitted);
}

#[test]
fn dropping_the_service_completes_jobs_and_joins_workers() {
    let _serial = exclusive();
    let (service, threads) = build_watched(
        Service::builder()
            .packet_size(32)
            .aes_cluster([pinned(0), NodeSpec::new().slowdown(3.0)])
            .ed25519_cluster([pinned(1)]),
        3,
    );
    let raw = [0x99; 24];
    let key = service.add_aes_key(&raw).unwrap();
    let mut g = Gen::new(5);
    let handles: Vec<(JobHandle, Vec<u8>)> = (0..2000)
        .map(|i| {
            let (job, expected) = small_job(i, key, &raw, &mut g);
            (service.submit(job).unwrap(), expected)
        })
        .collect();
    drop(service);
    assert!(handles.iter().all(|(h, _)| h.is_finished()));
    for (h, expected) in handles {
        assert_eq!(h.wait(), Ok(JobOutput::Data(expected)));
    }
    assert_threads_gone(&threads, Duration::from_secs(20), "workers gone after drop");
}

/// Holds a service, and lets it go when woken.
struct DropOnWake(Mutex<Option<Arc<Service>>>);

impl Wake for DropOnWake {
    fn wake(self: Arc<Self>) {
        drop(self.0.lock().unwrap().take());
    }
}

/// The last reference to a service may go away anywhere — here in a waker, which the worker
/// that finishes the job calls, so the service is dropped on its own worker thread. Its
/// shutdown must not wait there for the very packet that worker is finishing: the worker
/// would hang for ever (its thread never leaves).
#[test]
fn dropping_the_last_service_reference_on_a_worker_thread_does_not_hang_it() {
    let _serial = exclusive();
    let (service, threads) = build_watched(
        Service::builder().ed25519_cluster([NodeSpec::new().slowdown(50.0)]),
        1,
    );
    let service = Arc::new(service);
    let seed = [0x0D; 32];
    let key = service.add_signing_key(&seed).unwrap();
    let mut h = service.submit(Job::sign(key, b"last".to_vec())).unwrap();
    let holder = Arc::new(DropOnWake(Mutex::new(Some(Arc::clone(&service)))));
    let waker = Waker::from(Arc::clone(&holder));
    let polled = Pin::new(&mut h).poll(&mut Context::from_waker(&waker));
    drop((waker, holder));
    // From here on, the waker registered with the job holds the only reference.
    drop(service);
    if let Poll::Ready(out) = polled {
        // Finished before the poll (the waker was never stored): nothing to test.
        assert_eq!(out, Ok(JobOutput::Signature(ed_sign(&seed, b"last"))));
        return;
    }
    assert_eq!(h.wait(), Ok(JobOutput::Signature(ed_sign(&seed, b"last"))));
    assert_threads_gone(
        &threads,
        Duration::from_secs(3),
        "the worker that dropped the last reference to its service has left",
    );
}

/// A slowed node multiplies its real work, not the time its thread was kept off its core: beside
/// a thread spinning on the node's core, a job on a node slowed ten times takes about what it
/// takes alone. Measured as wall time, the time the spinner held the core was multiplied too, and
/// the job took about twice as long.
#[test]
#[cfg(target_os = "linux")]
fn a_slowed_node_does_not_multiply_time_its_thread_was_preempted() {
    let _serial = exclusive();
    if cores() < 1 {
        return;
    }
    const LEN: usize = 1 << 20;
    // RustCrypto's serial CBC whatever else is built in, so that the job's real work is long
    // enough (milliseconds) for the spinner to take the core from it.
    let service = Service::builder()
        .packet_size(LEN)
        .aes_implementation(cryptodispatch::crypto::AesImpl::RustCrypto)
        .aes_cluster([NodeSpec::pinned(0).slowdown(10.0)])
        .build()
        .unwrap();
    let key = service.add_aes_key(&[0x3c; 16]).unwrap();
    let (iv, data) = ([0x0e; 16], vec![0x5a; LEN]);
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let expected = ref_aes(&[0x3c; 16], op, &iv, &data).unwrap();
    let run = || {
        let t = std::time::Instant::now();
        let out = service.submit(Job::encrypt(key, Mode::Cbc, &iv, data.clone()));
        let out = out.unwrap().wait().unwrap();
        assert_eq!(out, JobOutput::Data(expected.clone()));
        t.elapsed()
    };
    run();
    let alone = (0..3).map(|_| run()).min().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let _ = core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    thread::sleep(Duration::from_millis(20));
    let beside = (0..3).map(|_| run()).min().unwrap();
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    assert!(
        beside.as_secs_f64() < 1.3 * alone.as_secs_f64(),
        "a job on a node slowed ten times took {beside:?} beside a thread spinning on its core, \
         {alone:?} alone"
    );
}

// ---------------------------------------------------------------------------------------------
// (b) A saturated cluster does not stall another
// ---------------------------------------------------------------------------------------------

/// Submitters blocked for room are woken once per drain, not once per packet placed (a wake
/// with every blocked submitter already woken is skipped): none may be left asleep. Six
/// threads flood a receive bound of one packet with jobs small and large (over half a budget),
/// under both admissions; every job resolves, with its output. A submitter left asleep would
/// block in `submit` for good: the test gives up on it after a minute rather than hang.
#[test]
fn every_submitter_blocked_for_room_is_woken() {
    let _serial = shared();
    const THREADS: usize = 6;
    const JOBS: usize = 60;
    for admission in [Admission::Fifo, Admission::Fair] {
        let service = Arc::new(
            Service::builder()
                .packet_size(64)
                .aes_cluster([
                    NodeSpec::new().slowdown(20.0).capacity(64),
                    NodeSpec::new().slowdown(5.0).capacity(64),
                ])
                .cluster_queue_len(1)
                .wait_queue_len(1)
                .receive_queue_len(1)
                .admission(admission)
                // Not run on the submitting thread, nor by the light path: through the bound.
                .inline_limit(0)
                .light_path(false)
                .build()
                .unwrap(),
        );
        let raw = [0x5B; 16];
        let key = service.add_aes_key(&raw).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        for t in 0..THREADS {
            let (service, done) = (Arc::clone(&service), done.clone());
            thread::spawn(move || {
                let mut g = Gen::new(0xB10C + t as u64);
                let cbc = op(Direction::Encrypt, Mode::Cbc);
                let jobs: Vec<(JobHandle, Vec<u8>)> = (0..JOBS)
                    .map(|i| {
                        // 16 to 256 bytes: one to four packets, the longer ones large.
                        let data = g.bytes(16 * (1 + (i * 7 + t) % 16));
                        let iv = g.bytes(16);
                        let expected = ref_aes(&raw, cbc, &iv, &data).unwrap();
                        (
                            service.submit(Job::aes(key, cbc, &iv, data)).unwrap(),
                            expected,
                        )
                    })
                    .collect();
                let outputs: Vec<_> = jobs
                    .into_iter()
                    .map(|(mut h, expected)| (h.wait_timeout(Duration::from_secs(30)), expected))
                    .collect();
                let _ = done.send((t, outputs));
            });
        }
        for _ in 0..THREADS {
            let (t, outputs) = finished
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{admission:?}: a submitter is still blocked"));
            for (i, (out, expected)) in outputs.into_iter().enumerate() {
                let out = out.unwrap_or_else(|| panic!("{admission:?}: job {t}.{i} unresolved"));
                assert_eq!(out.unwrap(), JobOutput::Data(expected), "{admission:?}");
            }
        }
        let m = service.metrics();
        assert_eq!(m.jobs_completed, (THREADS * JOBS) as u64, "{admission:?}");
        assert_eq!(m.jobs_failed, 0, "{admission:?}");
    }
}

#[test]
fn a_cluster_with_full_queues_does_not_stall_another() {
    let _serial = exclusive();
    for admission in [Admission::Fifo, Admission::Fair] {
        cluster_isolation(admission);
    }
}

fn cluster_isolation(admission: Admission) {
    const ED_JOBS: usize = 100;
    const AES_JOBS: usize = 150;
    let service = Service::builder()
        .packet_size(64)
        .aes_cluster([pinned(0), pinned(1)])
        .ed25519_cluster([NodeSpec::new().slowdown(200.0).capacity(64)])
        .cluster_queue_len(1)
        .wait_queue_len(1)
        .receive_queue_len(2)
        .admission(admission)
        .build()
        .unwrap();
    let seed = [0x0E; 32];
    let signing = service.add_signing_key(&seed).unwrap();
    let raw = [0xAE; 16];
    let aes = service.add_aes_key(&raw).unwrap();
    let ed_cluster = |m: &Metrics| {
        m.clusters
            .iter()
            .find(|c| c.kind == ClusterKind::Ed25519)
            .unwrap()
            .clone()
    };
    let ed_done = |m: &Metrics| {
        m.nodes_of(ClusterKind::Ed25519)
            .map(|n| n.packets)
            .sum::<u64>()
    };

    let ed_submitted = AtomicUsize::new(0);
    let ed_handles: Mutex<Vec<(JobHandle, Vec<u8>)>> = Mutex::new(Vec::new());
    thread::scope(|s| {
        let service = &service;
        let (ed_submitted, ed_handles) = (&ed_submitted, &ed_handles);
        let flooder = s.spawn(move || {
            let mut g = Gen::new(9);
            for _ in 0..ED_JOBS {
                let msg = g.bytes(64);
                // Blocks while the Ed25519 receive queue is full.
                let h = service.submit(Job::sign(signing, msg.clone())).unwrap();
                ed_handles.lock().unwrap().push((h, msg));
                ed_submitted.fetch_add(1, Ordering::SeqCst);
            }
        });

        // Wait until the Ed25519 side is saturated: its node busy; first come first served,
        // its cluster queue and the shared wait queue full and its receive queue holding
        // packets; fair, its jobs' own queues holding the receive bound.
        eventually("the Ed25519 cluster saturates", || {
            let m = service.metrics();
            let c = ed_cluster(&m);
            match admission {
                Admission::Fifo => {
                    c.cluster_queue == 1 && c.wait_queue == 1 && c.receive_queue >= 1
                }
                _ => c.cluster_queue >= 1 && ed_submitted.load(Ordering::SeqCst) < ED_JOBS,
            }
        });

        let mut g = Gen::new(10);
        let aes_handles: Vec<(JobHandle, Vec<u8>)> = (0..AES_JOBS)
            .map(|i| {
                let (job, expected) = small_job(i, aes, &raw, &mut g);
                (service.submit(job).unwrap(), expected)
            })
            .collect();
        let last = aes_handles.len() - 1;
        for (i, (h, expected)) in aes_handles.into_iter().enumerate() {
            let out = h.wait();
            if i == last {
                // The moment the last AES job resolved: Ed25519 work is still outstanding.
                let m = service.metrics();
                let submitted = ed_submitted.load(Ordering::SeqCst);
                let done = ed_done(&m);
                assert!(
                    done < ED_JOBS as u64,
                    "every Ed25519 job had already finished ({done}): the test proves nothing"
                );
                assert!(
                    submitted < ED_JOBS || done < submitted as u64,
                    "Ed25519 submitter not blocked and nothing outstanding"
                );
                let outstanding = ed_handles
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(h, _)| !h.is_finished())
                    .count();
                assert!(outstanding > 0 || submitted < ED_JOBS);
            }
            assert_eq!(out, Ok(JobOutput::Data(expected)), "AES job {i}");
        }
        flooder.join().unwrap();
    });
    let handles = ed_handles.into_inner().unwrap();
    assert_eq!(handles.len(), ED_JOBS);
    for (h, msg) in handles {
        assert_eq!(h.wait(), Ok(JobOutput::Signature(ed_sign(&seed, &msg))));
    }
}

// ---------------------------------------------------------------------------------------------
// (c) Streams
// ---------------------------------------------------------------------------------------------

/// Chunk sizes (in blocks, 0..=8) from a seed.
fn chunk_sizes(g: &mut Gen, n: usize) -> Vec<usize> {
    (0..n).map(|_| 16 * (g.next_u64() % 9) as usize).collect()
}

#[test]
fn cbc_stream_equals_one_shot_in_order_under_both_affinities() {
    let _serial = shared();
    for affinity in [Affinity::Strict, Affinity::InFlight] {
        let service = Service::builder()
            .packet_size(32)
            .aes_cluster([pinned(0), pinned(1), NodeSpec::new().slowdown(2.0)])
            .affinity(affinity)
            .build()
            .unwrap();
        let raw = [0xC3; 32];
        let key = service.add_aes_key(&raw).unwrap();
        let mut g = Gen::new(affinity as u64);
        let iv = g.bytes(16);
        let sizes = chunk_sizes(&mut g, 60);
        let chunks: Vec<Vec<u8>> = sizes.iter().map(|&n| g.bytes(n)).collect();
        let last = g.bytes(48);
        let whole: Vec<u8> = chunks.iter().flatten().chain(&last).copied().collect();

        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let o = op(direction, Mode::Cbc);
            let expected = ref_aes(&raw, o, &iv, &whole).unwrap();
            // Other jobs in between, so the stream's chunks meet competition.
            let mut others = Vec::new();
            let mut stream = service.stream(key, o, &iv).unwrap();
            assert_eq!(
                service.metrics().stored_states,
                0,
                "the stream's IV waits for its first packet, not in the store"
            );
            let mut outputs = Vec::new();
            for (i, chunk) in chunks.iter().enumerate() {
                stream.push(chunk.clone()).unwrap();
                if i % 7 == 0 {
                    let (job, out) = small_job(i, key, &raw, &mut g);
                    others.push((service.submit(job).unwrap(), out));
                }
                if i % 5 == 0 {
                    outputs.extend(stream.try_recv());
                }
            }
            stream.finish(last.clone()).unwrap();
            assert_eq!(
                stream.push(vec![0; 16]).unwrap_err(),
                SubmitError::StreamFinished
            );
            assert_eq!(
                stream.finish(vec![0; 16]).unwrap_err(),
                SubmitError::StreamFinished
            );
            while let Some(out) = stream.recv() {
                outputs.push(out);
            }
            assert!(stream.recv().is_none());
            assert_eq!(outputs.len(), chunks.len() + 1);
            let mut at = 0;
            for (i, out) in outputs.into_iter().enumerate() {
                let out = out.unwrap_or_else(|e| panic!("{affinity:?} chunk {i}: {e}"));
                assert_eq!(
                    out,
                    expected[at..at + out.len()],
                    "{affinity:?} {direction:?}: chunk {i} out of order or wrong"
                );
                at += out.len();
            }
            assert_eq!(at, expected.len());
            for (h, out) in others {
                assert_eq!(h.wait(), Ok(JobOutput::Data(out)));
            }
        }
        service.shutdown();
        let m = service.metrics();
        assert_eq!(m.stored_states, 0);
        assert_eq!(m.jobs_submitted, m.jobs_completed);
    }
}

#[test]
fn a_lone_stream_stays_on_one_node_under_strict_affinity() {
    let _serial = shared();
    let service = Service::builder()
        .packet_size(16)
        .aes_cluster([
            pinned(0),
            pinned(1),
            NodeSpec::new(),
            NodeSpec::new().slowdown(1.5),
        ])
        .affinity(Affinity::Strict)
        .build()
        .unwrap();
    let raw = [0x0F; 16];
    let key = service.add_aes_key(&raw).unwrap();
    let mut g = Gen::new(77);
    let iv = g.bytes(16);
    let data = g.bytes(16 * 200);
    let o = op(Direction::Encrypt, Mode::Ofb);
    let mut stream = service.stream(key, o, &iv).unwrap();
    for chunk in data.chunks(64) {
        stream.push(chunk.to_vec()).unwrap();
    }
    stream.finish(b"tail".to_vec()).unwrap();
    let out: Vec<u8> = std::iter::from_fn(|| stream.recv())
        .flat_map(Result::unwrap)
        .collect();
    let mut whole = data.clone();
    whole.extend_from_slice(b"tail");
    assert_eq!(out, ref_aes(&raw, o, &iv, &whole).unwrap());
    service.shutdown();
    let m = service.metrics();
    let busy: Vec<u64> = m
        .nodes
        .iter()
        .map(|n| n.packets)
        .filter(|&p| p > 0)
        .collect();
    // Chunks of 64 bytes are 4 packets of 16; the 4-byte tail one more.
    let packets = data
        .chunks(64)
        .map(|c| c.len().div_ceil(16) as u64)
        .sum::<u64>()
        + 1;
    assert_eq!(packets, 201);
    assert_eq!(
        busy,
        vec![packets],
        "every packet of the stream on one node: {m}"
    );
}

/// A CBC-encrypt stream's key, IV, chunks (of 1 to 8 blocks) and the one-shot output.
fn stream_case(seed: u64, chunks: usize) -> ([u8; 16], Vec<u8>, Vec<Vec<u8>>, Vec<u8>) {
    let raw = [0x5A; 16];
    let mut g = Gen::new(seed);
    let iv = g.bytes(16);
    let chunks: Vec<Vec<u8>> = (0..chunks)
        .map(|_| {
            let blocks = 1 + (g.next_u64() % 8) as usize;
            g.bytes(16 * blocks)
        })
        .collect();
    let expected = ref_aes(
        &raw,
        op(Direction::Encrypt, Mode::Cbc),
        &iv,
        &chunks.concat(),
    )
    .unwrap();
    (raw, iv, chunks, expected)
}

/// Two AES nodes of 32-byte packets whose streams hold at most `outputs` outputs unreceived.
fn stream_service(outputs: usize) -> Service {
    Service::builder()
        .packet_size(32)
        .aes_cluster([pinned(0), pinned(1)])
        .stream_outputs(outputs)
        .build()
        .unwrap()
}

#[test]
fn a_stream_holds_at_most_its_bound_of_unreceived_outputs() {
    let _serial = shared();
    let service = stream_service(3);
    let (raw, iv, chunks, expected) = stream_case(5, 12);
    let key = service.add_aes_key(&raw).unwrap();
    let mut stream = service
        .stream(key, op(Direction::Encrypt, Mode::Cbc), &iv)
        .unwrap();
    for c in &chunks[..3] {
        stream.push(c.clone()).unwrap();
    }
    // At the bound only the owner can make room: refused, not blocked.
    assert_eq!(
        stream.push(chunks[3].clone()).unwrap_err(),
        SubmitError::StreamFull
    );
    match stream.try_push(chunks[3].clone()) {
        Err(TryPushError::Full(back)) => assert_eq!(back, chunks[3], "the chunk comes back"),
        other => panic!("expected the chunk back, got {other:?}"),
    }
    assert_eq!(stream.pending(), 3, "refused pushes left nothing behind");
    let mut out = Vec::new();
    let (last, middle) = chunks[3..].split_last().unwrap();
    for c in middle {
        out.push(stream.recv().unwrap().unwrap());
        stream.try_push(c.clone()).unwrap();
        assert!(stream.pending() <= 3);
    }
    // The last chunk at the bound: handed back too, the stream left open for it.
    assert_eq!(stream.pending(), 3);
    match stream.try_finish(last.clone()) {
        Err(TryPushError::Full(back)) => assert_eq!(&back, last, "the last chunk comes back"),
        other => panic!("expected the last chunk back, got {other:?}"),
    }
    assert!(!stream.is_finished());
    assert_eq!(
        stream.finish(last.clone()).unwrap_err(),
        SubmitError::StreamFull
    );
    assert!(!stream.is_finished());
    out.push(stream.recv().unwrap().unwrap());
    stream.try_finish(last.clone()).unwrap();
    assert!(stream.is_finished());
    while let Some(o) = stream.recv() {
        out.push(o.unwrap());
    }
    assert_eq!(out.concat(), expected, "outputs in order, none lost");
    service.shutdown();
    let m = service.metrics();
    assert_eq!(m.jobs_submitted, m.jobs_completed);
    assert_eq!(m.stored_states, 0);
}

#[test]
fn a_split_stream_pushes_while_another_thread_receives_within_the_bound() {
    let _serial = shared();
    let service = stream_service(4);
    let (raw, iv, chunks, expected) = stream_case(9, 300);
    let key = service.add_aes_key(&raw).unwrap();
    let stream = service
        .stream(key, op(Direction::Encrypt, Mode::Cbc), &iv)
        .unwrap();
    let (mut tx, mut rx) = stream.split();
    let mut out = Vec::new();
    thread::scope(|s| {
        s.spawn(|| {
            for c in &chunks {
                tx.push(c.clone()).unwrap();
            }
            tx.finish(Vec::new()).unwrap();
        });
        let mut n = 0;
        loop {
            assert!(rx.pending() <= 4, "{} outputs held", rx.pending());
            if n % 50 == 0 {
                // A slow reader: the sender must wait, not pile outputs up.
                thread::sleep(Duration::from_millis(5));
                assert!(rx.pending() <= 4, "{} outputs held", rx.pending());
            }
            match rx.recv() {
                Some(o) => out.push(o.unwrap()),
                None => break,
            }
            n += 1;
        }
    });
    assert_eq!(out.len(), chunks.len() + 1);
    assert_eq!(out.concat(), expected, "outputs in order, none lost");
    assert!(rx.recv().is_none());
    service.shutdown();
    let m = service.metrics();
    assert_eq!(m.jobs_submitted, m.jobs_completed);
    assert_eq!(m.stored_states, 0);
}

#[test]
fn a_split_streams_sender_stops_waiting_when_the_receiver_goes() {
    let _serial = shared();
    let service = stream_service(1);
    let (raw, iv, chunks, _) = stream_case(11, 20);
    let key = service.add_aes_key(&raw).unwrap();
    let (mut tx, rx) = service
        .stream(key, op(Direction::Encrypt, Mode::Cbc), &iv)
        .unwrap()
        .split();
    tx.push(chunks[0].clone()).unwrap();
    thread::scope(|s| {
        let sender = s.spawn(move || {
            for c in &chunks[1..] {
                tx.push(c.clone()).unwrap();
            }
            // Dropped unfinished: the stream closes.
        });
        thread::sleep(Duration::from_millis(20));
        drop(rx);
        sender.join().unwrap();
    });
    service.shutdown();
    let m = service.metrics();
    assert_eq!(m.jobs_submitted, m.jobs_completed + m.jobs_failed);
    assert_eq!(
        m.stored_states, 0,
        "the closed stream's state left the store"
    );
}

#[test]
fn dropping_an_unfinished_stream_leaves_no_state_behind() {
    let _serial = shared();
    for affinity in [Affinity::Strict, Affinity::InFlight] {
        let service = Service::builder()
            .packet_size(32)
            .aes_cluster([pinned(0), NodeSpec::new().slowdown(3.0)])
            .affinity(affinity)
            .build()
            .unwrap();
        let raw = [0xD0; 16];
        let key = service.add_aes_key(&raw).unwrap();
        let ops = [
            op(Direction::Encrypt, Mode::Cbc),
            op(Direction::Decrypt, Mode::Ofb),
            op(Direction::Encrypt, Mode::Cfb),
            op(Direction::Encrypt, Mode::Ecb),
            op(Direction::Decrypt, Mode::Cbc).with_padding(Padding::Pkcs7),
            op(Direction::Encrypt, Mode::Ecb).with_padding(Padding::Pkcs7),
        ];
        let mut streams: Vec<_> = ops
            .iter()
            .enumerate()
            .map(|(i, o)| service.stream(key, *o, &[i as u8; 16]).unwrap())
            .collect();
        // Opening a stream stores nothing: the IV travels with its first packet.
        assert_eq!(service.metrics().stored_states, 0, "{affinity:?}");
        for (i, st) in streams.iter_mut().enumerate() {
            for _ in 0..i {
                st.push(vec![i as u8; 64]).unwrap();
            }
        }
        // Drop them with chunks possibly still in flight, in a mixed order.
        let untouched = service.stream(key, ops[0], &[9; 16]).unwrap();
        drop(untouched);
        streams.swap(0, 3);
        drop(streams);

        // The service goes on working.
        let (job, expected) = small_job(1, key, &raw, &mut Gen::new(1));
        assert_eq!(
            service.submit(job).unwrap().wait(),
            Ok(JobOutput::Data(expected))
        );
        service.shutdown();
        let m = service.metrics();
        assert_eq!(m.stored_states, 0, "{affinity:?}: {m}");
        assert!(
            m.clusters.iter().all(|c| c.choose_list == 0),
            "{affinity:?}: bindings left: {m}"
        );
        assert_eq!(m.jobs_submitted, m.jobs_completed + m.jobs_failed);
    }
}

// ---------------------------------------------------------------------------------------------
// (d) JobHandle as a Future, with a hand-written executor
// ---------------------------------------------------------------------------------------------

#[test]
fn job_handles_are_futures_that_wake_their_task() {
    let _serial = shared();
    let service = Service::builder()
        .packet_size(32)
        .aes_cluster([NodeSpec::new().slowdown(5.0)])
        .ed25519_cluster([NodeSpec::new().slowdown(20.0)])
        .build()
        .unwrap();
    let seed = [0xF7; 32];
    let signing = service.add_signing_key(&seed).unwrap();
    let raw = [0xF8; 16];
    let aes = service.add_aes_key(&raw).unwrap();

    // One handle.
    let h = service
        .submit(Job::sign(signing, b"future".to_vec()))
        .unwrap();
    let (out, stats) = block_on(h);
    assert_eq!(out, Ok(JobOutput::Signature(ed_sign(&seed, b"future"))));
    assert!(stats.polls >= 1);
    assert!(
        stats.wakes + 1 >= stats.polls,
        "polled again without a wake: {stats:?}"
    );

    // Several awaited in one task, some failing.
    let data = vec![0x42; 4096];
    let o = op(Direction::Encrypt, Mode::Cbc);
    let h1 = service
        .submit(Job::aes(aes, o, &[1; 16], data.clone()))
        .unwrap();
    // Ciphertext of zero blocks: never valid PKCS#7.
    let ct_zero_tail = ref_aes(&raw, o, &[1; 16], &[0; 64]).unwrap();
    let unpad = op(Direction::Decrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
    let h2 = service
        .submit(Job::aes(aes, unpad, &[1; 16], ct_zero_tail))
        .unwrap();
    let h3 = service
        .submit(Job::verify(signing, b"x".to_vec(), &[0; 64]))
        .unwrap();
    let ((a, b, c), _) = block_on(async { (h1.await, h2.await, h3.await) });
    assert_eq!(
        a,
        Ok(JobOutput::Data(ref_aes(&raw, o, &[1; 16], &data).unwrap()))
    );
    assert_eq!(b, Err(JobError::Crypto(CryptoError::BadPadding)));
    assert_eq!(c, Ok(JobOutput::Verified(false)));

    // Polled by hand: Pending until done, then Ready once; polling again says the result is
    // gone.
    let mut h = service
        .submit(Job::sign(signing, b"again".to_vec()))
        .unwrap();
    let noop = Waker::noop();
    let mut cx = Context::from_waker(noop);
    let out = loop {
        if let Poll::Ready(out) = Pin::new(&mut h).poll(&mut cx) {
            break out;
        }
        thread::yield_now();
    };
    assert_eq!(out, Ok(JobOutput::Signature(ed_sign(&seed, b"again"))));
    assert_eq!(
        Pin::new(&mut h).poll(&mut cx),
        Poll::Ready(Err(JobError::ResultTaken))
    );
    assert_eq!(h.wait(), Err(JobError::ResultTaken));

    // A waker replaced between polls: the latest one is woken.
    let h = service.submit(Job::sign(signing, vec![7; 100])).unwrap();
    let (out, _) = block_on(async move {
        let mut h = h;
        // First poll with a throwaway waker, then hand over to the executor's.
        let _ = Pin::new(&mut h).poll(&mut Context::from_waker(Waker::noop()));
        h.await
    });
    assert_eq!(out, Ok(JobOutput::Signature(ed_sign(&seed, &[7; 100]))));
}

#[test]
fn submit_async_waits_for_room_without_blocking_and_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let _serial = shared();
    // One slow Ed25519 node and a receive queue of one packet: the second and later jobs find
    // the queue full, so their futures must park and be woken as room frees.
    let service = Service::builder()
        .packet_size(1024)
        .ed25519_cluster([NodeSpec::new().slowdown(20.0).capacity(1024)])
        .cluster_queue_len(1)
        .wait_queue_len(1)
        .receive_queue_len(1)
        .build()
        .unwrap();
    let seed = [0x5A; 32];
    let key = service.add_signing_key(&seed).unwrap();
    let msgs: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 1024]).collect();

    let fut = service.submit_async(Job::sign(key, msgs[0].clone()));
    assert_send(&fut);
    let ((handles, pending_polls), stats) = block_on(async {
        let mut handles = Vec::new();
        let mut pending_polls = 0;
        for m in &msgs {
            let mut fut = std::pin::pin!(service.submit_async(Job::sign(key, m.clone())));
            // Count the polls that found the queue full.
            let handle = std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
                Poll::Pending => {
                    pending_polls += 1;
                    Poll::Pending
                }
                ready => ready,
            })
            .await
            .expect("admitted");
            handles.push(handle);
        }
        (handles, pending_polls)
    });
    drop(fut);
    assert!(
        pending_polls > 0,
        "the queue never filled: the test shows nothing"
    );
    assert!(
        stats.wakes + 1 >= stats.polls,
        "polled again without a wake: {stats:?}"
    );
    for (h, m) in handles.into_iter().zip(&msgs) {
        assert_eq!(h.wait(), Ok(JobOutput::Signature(ed_sign(&seed, m))));
    }

    // A malformed job resolves to its error at once; after shutdown, to ShutDown.
    let (bad, _) = block_on(service.submit_async(Job::verify(key, vec![1], &[0; 3])));
    assert_eq!(
        bad.map(drop),
        Err(SubmitError::Crypto(CryptoError::SignatureLength { got: 3 }))
    );
    service.shutdown();
    let (late, _) = block_on(service.submit_async(Job::sign(key, vec![2])));
    assert_eq!(late.map(drop), Err(SubmitError::ShutDown));
}

#[test]
fn a_small_job_finishes_before_a_big_chained_one_submitted_just_before_it() {
    let _serial = shared();
    // One node, so the small job cannot simply take another node: it must be let in between
    // the big job's packets. Under first come first served it would wait for all of them.
    // (Under `Admission::Fifo` this test fails: checked when it was written.)
    let admission = Admission::Fair;
    let service = Service::builder()
        .aes_cluster([NodeSpec::new()])
        .admission(admission)
        .build()
        .unwrap();
    let raw = [0x31; 16];
    let key = service.add_aes_key(&raw).unwrap();
    let big_data = vec![0x5A; 16 << 20];
    let big = service
        .submit(Job::encrypt(key, Mode::Cbc, &[9; 16], big_data.clone()))
        .unwrap();
    let small = service
        .submit(Job::encrypt(key, Mode::Ecb, &[], vec![0x11; 16]))
        .unwrap();
    let small_out = small.wait().unwrap();
    assert!(
        !big.is_finished(),
        "{admission}: the big job finished before the small one"
    );
    let o = op(Direction::Encrypt, Mode::Ecb);
    assert_eq!(
        small_out,
        JobOutput::Data(ref_aes(&raw, o, &[], &[0x11; 16]).unwrap())
    );
    let big_out = big.wait().unwrap();
    let o = op(Direction::Encrypt, Mode::Cbc);
    assert_eq!(
        big_out,
        JobOutput::Data(ref_aes(&raw, o, &[9; 16], &big_data).unwrap())
    );
}

#[test]
fn submit_burst_admits_in_order_all_or_nothing() {
    let _serial = shared();
    let service = Service::builder()
        .packet_size(64)
        .aes_cluster([NodeSpec::new(), NodeSpec::new()])
        .ed25519_cluster([NodeSpec::new()])
        .receive_queue_len(8)
        .build()
        .unwrap();
    let raw = [0x44; 32];
    let aes = service.add_aes_key(&raw).unwrap();
    let seed = [0x45; 32];
    let signer = service.add_signing_key(&seed).unwrap();
    let mut g = Gen::new(77);
    // More jobs than the receive bound, mixed clusters and sizes: the burst waits for room.
    let mut jobs = Vec::new();
    let mut expected = Vec::new();
    for i in 0..300 {
        if i % 7 == 3 {
            let msg = g.bytes(i % 90);
            expected.push(JobOutput::Signature(ed_sign(&seed, &msg)));
            jobs.push(Job::sign(signer, msg));
        } else {
            let (job, out) = small_job(i, aes, &raw, &mut g);
            expected.push(JobOutput::Data(out));
            jobs.push(job);
        }
    }
    let handles = service.submit_burst(jobs).unwrap();
    assert_eq!(handles.len(), expected.len());
    for (i, (h, want)) in handles.into_iter().zip(expected).enumerate() {
        assert_eq!(h.wait(), Ok(want), "job {i}");
    }

    // One malformed job refuses the whole burst: nothing of it runs.
    let before = service.metrics().jobs_submitted;
    let burst = vec![
        Job::encrypt(aes, Mode::Ecb, &[], vec![0; 32]),
        Job::encrypt(aes, Mode::Cbc, &[0; 15], vec![0; 32]),
    ];
    assert_eq!(
        service.submit_burst(burst).map(|h| h.len()),
        Err(SubmitError::Crypto(CryptoError::IvLength { got: 15 }))
    );
    assert_eq!(service.metrics().jobs_submitted, before);
    assert_eq!(service.submit_burst(Vec::new()).map(|h| h.len()), Ok(0));

    service.shutdown();
    assert_eq!(
        service
            .submit_burst([Job::sign(signer, vec![1])])
            .map(|h| h.len()),
        Err(SubmitError::ShutDown)
    );
}

#[test]
fn task_ids_stay_unique_across_threads_and_services() {
    let _serial = shared();
    // Two services, and threads that submit to both by turns, one job at a time (each thread
    // keeps a block of ids per service), in bursts, and through a node: no id repeats within
    // a service.
    let build = || {
        Service::builder()
            .packet_size(64)
            .aes_cluster([NodeSpec::new(), NodeSpec::new()])
            .build()
            .unwrap()
    };
    let services = [build(), build()];
    let keys: Vec<KeyId> = services
        .iter()
        .map(|s| s.add_aes_key(&[0x31; 16]).unwrap())
        .collect();
    let ids: Vec<Vec<u64>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let (services, keys) = (&services, &keys);
                scope.spawn(move || {
                    let mut ids = vec![Vec::new(), Vec::new()];
                    for i in 0..300 {
                        let which = (i + t) % 2;
                        let (s, key) = (&services[which], keys[which]);
                        // A 16-byte job runs inline; one of 256 bytes (four packets) on a node.
                        let len = if i % 10 == 0 { 256 } else { 16 };
                        let job = || Job::encrypt(key, Mode::Ecb, &[], vec![i as u8; len]);
                        let handles = if i % 25 == 0 {
                            s.submit_burst((0..3).map(|_| job())).unwrap()
                        } else {
                            vec![s.submit(job()).unwrap()]
                        };
                        for h in handles {
                            ids[which].push(h.task().0);
                            h.wait().unwrap();
                        }
                    }
                    ids
                })
            })
            .collect();
        let mut all = vec![Vec::new(), Vec::new()];
        for w in workers {
            for (which, ids) in w.join().unwrap().into_iter().enumerate() {
                all[which].extend(ids);
            }
        }
        all
    });
    for (which, ids) in ids.iter().enumerate() {
        let unique: HashSet<u64> = ids.iter().copied().collect();
        assert_eq!(
            unique.len(),
            ids.len(),
            "service {which}: a task id repeats"
        );
        assert!(ids.len() > 500, "service {which}: {} jobs", ids.len());
    }
    for s in &services {
        s.shutdown();
    }
}

/// A waker that panics when woken.
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a user's waker panics");
    }
}

#[test]
fn user_wakers_never_take_a_node_down_or_block_it() {
    let _serial = shared();
    let service = Arc::new(
        Service::builder()
            .aes_cluster([NodeSpec::new().slowdown(20.0)])
            // Every job goes to the node, so the blocking waker's job would wait for it.
            .inline_limit(0)
            .build()
            .unwrap(),
    );
    let key = service.add_aes_key(&[5; 16]).unwrap();
    // A waker that panics: the job still resolves, and the node goes on.
    let mut h = service
        .submit(Job::encrypt(key, Mode::Ecb, &[], vec![2; 4096]))
        .unwrap();
    let waker = Waker::from(Arc::new(PanickingWaker));
    assert!(
        Pin::new(&mut h)
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    assert!(h.wait().is_ok());
    let other = service
        .submit(Job::encrypt(key, Mode::Ecb, &[], vec![3; 16]))
        .unwrap();
    assert!(
        other.wait().is_ok(),
        "the node went on after the waker's panic"
    );
    // A waker that blocks on the service from the worker thread: refused, not deadlocked.
    let blocking = SubmittingWaker::new(&service, key);
    let mut h = service
        .submit(Job::encrypt(key, Mode::Ecb, &[], vec![4; 4096]))
        .unwrap();
    let waker = Waker::from(Arc::clone(&blocking));
    assert!(
        Pin::new(&mut h)
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    assert!(h.wait().is_ok());
    eventually("the waker ran", || {
        blocking.outcome.lock().unwrap().is_some()
    });
    let outcome = blocking.outcome.lock().unwrap().take().unwrap();
    assert_eq!(outcome, Err(JobError::OnWorkerThread));
    let last = service
        .submit(Job::encrypt(key, Mode::Ecb, &[], vec![5; 16]))
        .unwrap();
    assert!(last.wait().is_ok());
    drop(blocking);
    service.shutdown();
}

/// What a stream's `recv` and `push` answered.
type StreamCalls = (Option<Result<Vec<u8>, JobError>>, Result<(), SubmitError>);

/// A waker that, on the worker thread that resolves the job, receives from a stream with no
/// output ready and pushes to a stream at its bound: both would wait for that very thread.
struct StreamWaker {
    tx: Mutex<StreamSender>,
    rx: Mutex<StreamReceiver>,
    outcome: Mutex<Option<StreamCalls>>,
}

impl Wake for StreamWaker {
    fn wake(self: Arc<Self>) {
        let received = self.rx.lock().unwrap().recv();
        let pushed = self.tx.lock().unwrap().push(vec![0; 16]);
        *self.outcome.lock().unwrap() = Some((received, pushed));
    }
}

#[test]
fn stream_calls_on_a_worker_thread_are_refused_instead_of_blocking() {
    let _serial = shared();
    let service = Service::builder()
        .aes_cluster([NodeSpec::new().slowdown(20.0)])
        .stream_outputs(1)
        .build()
        .unwrap();
    let key = service.add_aes_key(&[6; 16]).unwrap();
    let o = op(Direction::Encrypt, Mode::Cbc);
    // One stream whose receiver has nothing (its sender pushed nothing, and lives on), one
    // whose sender is at its bound (one output unreceived).
    let (idle_tx, idle_rx) = service.stream(key, o, &[1; 16]).unwrap().split();
    let (mut full_tx, full_rx) = service.stream(key, o, &[2; 16]).unwrap().split();
    full_tx.push(vec![0; 16]).unwrap();
    let waker = Arc::new(StreamWaker {
        tx: Mutex::new(full_tx),
        rx: Mutex::new(idle_rx),
        outcome: Mutex::new(None),
    });
    // A serial job too big to run inline, so that it completes on the node, running the waker.
    let mut h = service
        .submit(Job::encrypt(key, Mode::Cbc, &[0; 16], vec![4; 4096]))
        .unwrap();
    let w = Waker::from(Arc::clone(&waker));
    assert!(
        Pin::new(&mut h)
            .poll(&mut Context::from_waker(&w))
            .is_pending()
    );
    assert!(h.wait().is_ok());
    eventually("the waker ran", || waker.outcome.lock().unwrap().is_some());
    let (received, pushed) = waker.outcome.lock().unwrap().take().unwrap();
    assert_eq!(received, Some(Err(JobError::OnWorkerThread)));
    assert_eq!(pushed, Err(SubmitError::OnWorkerThread));
    drop((w, waker, idle_tx, full_rx));
    service.shutdown();
    let m = service.metrics();
    assert_eq!(m.jobs_submitted, m.jobs_completed + m.jobs_failed);
    assert_eq!(m.stored_states, 0);
}

// ---------------------------------------------------------------------------------------------
// (e) Metrics
// ---------------------------------------------------------------------------------------------

#[test]
fn metrics_add_up_after_a_known_workload() {
    let _serial = shared();
    let packet = 48;
    let service = Service::builder()
        .packet_size(packet)
        .aes_cluster([pinned(0), pinned(1), NodeSpec::new().slowdown(1.5)])
        .ed25519_cluster([pinned(0), NodeSpec::new()])
        // The nodes' counters: every job goes to a node (jobs run on the submitting thread are
        // counted in the property tests and tests/service/inline.rs).
        .inline_limit(0)
        .build()
        .unwrap();
    let raw = [0x4D; 32];
    let aes = service.add_aes_key(&raw).unwrap();
    let seed = [0x4E; 32];
    let signing = service.add_signing_key(&seed).unwrap();
    assert_eq!(service.metrics().keys, 2);

    let mut g = Gen::new(2024);
    let mut want_packets = 0u64;
    let mut want_bytes = 0u64;
    let mut handles = Vec::new();
    let mut want_failed = 0;
    for i in 0..300usize {
        let mode = Mode::UNAUTHENTICATED[i % 5];
        let pad = mode.needs_whole_blocks() && i % 3 == 0;
        let o = op(Direction::Encrypt, mode).with_padding(if pad {
            Padding::Pkcs7
        } else {
            Padding::None
        });
        let len = if pad || !mode.needs_whole_blocks() {
            (i * 37) % 700
        } else {
            16 * ((i * 7) % 40)
        };
        let data = g.bytes(len);
        let buffer = if pad { padded_len(len) } else { len };
        // The padding block rides in the last packet (every node holds a packet and a block).
        want_packets += len.div_ceil(packet).max(1) as u64;
        want_bytes += buffer as u64;
        let expected = Ok(JobOutput::Data(ref_aes(&raw, o, &[3; 16], &data).unwrap()));
        handles.push((
            service.submit(Job::aes(aes, o, &[3; 16], data)).unwrap(),
            expected,
        ));
    }
    // Two bad paddings: failed jobs count as failed.
    for _ in 0..2 {
        let ct = ref_aes(&raw, op(Direction::Encrypt, Mode::Ecb), &[], &[0; 96]).unwrap();
        let o = op(Direction::Decrypt, Mode::Ecb).with_padding(Padding::Pkcs7);
        want_packets += 2;
        want_bytes += 96;
        want_failed += 1;
        handles.push((
            service.submit(Job::aes(aes, o, &[], ct)).unwrap(),
            Err(JobError::Crypto(CryptoError::BadPadding)),
        ));
    }
    let mut ed_bytes = 0u64;
    for i in 0..40usize {
        let msg = g.bytes(i * 3);
        ed_bytes += msg.len() as u64;
        let expected = Ok(JobOutput::Signature(ed_sign(&seed, &msg)));
        handles.push((service.submit(Job::sign(signing, msg)).unwrap(), expected));
    }
    let jobs = handles.len() as u64;
    for (h, expected) in handles {
        assert_eq!(h.wait(), expected);
    }
    service.shutdown();
    let m = service.metrics();
    let totals = |kind| {
        m.nodes_of(kind)
            .fold((0, 0), |(p, b), n| (p + n.packets, b + n.bytes))
    };
    assert_eq!(totals(ClusterKind::Aes), (want_packets, want_bytes), "{m}");
    assert_eq!(totals(ClusterKind::Ed25519), (40, ed_bytes), "{m}");
    assert_eq!(m.jobs_submitted, jobs);
    assert_eq!(m.jobs_failed, want_failed);
    assert_eq!(m.jobs_completed, jobs - want_failed);
    assert_eq!(m.stored_states, 0);
    assert_eq!(m.keys, 2);
    for n in &m.nodes {
        assert_eq!(n.queue_depth, 0);
        assert_eq!(n.queued_bytes, 0);
        assert_eq!(n.panics, 0);
        assert!(n.busy > Duration::ZERO || n.packets == 0);
    }
    assert_eq!(m.nodes[2].slowdown, 1.5);
    assert_eq!(m.nodes[0].core, if cores() > 0 { Some(0) } else { None });
    assert!(m.to_string().contains("jobs:"), "{m}");
}

/// A waker that records a metrics snapshot at the moment it is woken, that is, at the moment
/// the job's result is published.
struct SnapshotOnWake {
    service: Arc<Service>,
    seen: Mutex<Option<Metrics>>,
    woken: AtomicBool,
    thread: thread::Thread,
}

impl Wake for SnapshotOnWake {
    fn wake(self: Arc<Self>) {
        *self.seen.lock().unwrap() = Some(self.service.metrics());
        self.woken.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// When a job's handle resolves, the counters must already include the job: a caller that
/// waits for its jobs and then reads `metrics()` must not see them missing. The waker below
/// takes the snapshot at the instant the result is published, which makes the check
/// deterministic.
#[test]
fn metrics_count_a_job_by_the_time_its_handle_resolves() {
    let _serial = shared();
    let service = Arc::new(
        Service::builder()
            .ed25519_cluster([NodeSpec::new().slowdown(20.0)])
            .build()
            .unwrap(),
    );
    let seed = [0xAA; 32];
    let signing = service.add_signing_key(&seed).unwrap();
    for attempt in 0.. {
        assert!(attempt < 100, "never caught a job pending");
        // Start from settled counters (an earlier attempt's job may still be counted).
        eventually("counters settle", || {
            let m = service.metrics();
            m.jobs_submitted == m.jobs_completed
                && m.nodes.iter().map(|n| n.packets).sum::<u64>() == m.jobs_submitted
        });
        let before = service.metrics();
        let mut h = service
            .submit(Job::sign(signing, b"count me".to_vec()))
            .unwrap();
        let snap = Arc::new(SnapshotOnWake {
            service: Arc::clone(&service),
            seen: Mutex::new(None),
            woken: AtomicBool::new(false),
            thread: thread::current(),
        });
        let waker = Waker::from(Arc::clone(&snap));
        if Pin::new(&mut h)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            continue; // finished before the poll: try again
        }
        drop(waker);
        eventually("the waker is woken", || snap.woken.load(Ordering::SeqCst));
        assert!(h.is_finished());
        let at_wake = snap.seen.lock().unwrap().take().unwrap();
        let ed_packets = |m: &Metrics| m.nodes.iter().map(|n| n.packets).sum::<u64>();
        assert_eq!(
            (
                at_wake.jobs_completed - before.jobs_completed,
                ed_packets(&at_wake) - ed_packets(&before)
            ),
            (1, 1),
            "the job's result was published before it was counted \
             (jobs_completed, node packets at that moment)"
        );
        assert_eq!(
            h.wait(),
            Ok(JobOutput::Signature(ed_sign(&seed, b"count me")))
        );
        break;
    }
}

// ---------------------------------------------------------------------------------------------
// (f) Removing a key while a job uses it
// ---------------------------------------------------------------------------------------------

#[test]
fn removing_a_key_while_its_job_runs_does_not_disturb_the_job() {
    let _serial = shared();
    let service = Service::builder()
        .packet_size(1024)
        .aes_cluster([NodeSpec::new().slowdown(10.0), pinned(1)])
        .ed25519_cluster([NodeSpec::new().slowdown(10.0)])
        .build()
        .unwrap();
    let raw = Gen::new(3).bytes(32);
    let key = service.add_aes_key(&raw).unwrap();
    let seed = [0x1D; 32];
    let signing = service.add_signing_key(&seed).unwrap();
    let mut g = Gen::new(4);
    let iv = g.bytes(16);
    let data = g.bytes(64 * 1024 + 5);
    let o = op(Direction::Encrypt, Mode::Cfb);
    let mut stream = service.stream(key, o, &iv).unwrap();
    stream.push(data[..1024].to_vec()).unwrap();

    let big = service.submit(Job::aes(key, o, &iv, data.clone())).unwrap();
    let sign = service
        .submit(Job::sign(signing, data[..500].to_vec()))
        .unwrap();
    service.remove_key(key).unwrap();
    service.remove_key(signing).unwrap();
    assert_eq!(service.metrics().keys, 0);
    // New work with the removed keys is refused ...
    assert_eq!(
        service
            .submit(Job::encrypt(key, Mode::Ecb, &[], vec![0; 16]))
            .unwrap_err(),
        SubmitError::UnknownKey(key)
    );
    assert_eq!(
        service.submit(Job::sign(signing, vec![1])).unwrap_err(),
        SubmitError::UnknownKey(signing)
    );
    // ... while what was submitted, and the open stream, go on with the key they hold.
    let (body, tail) = data[1024..].split_at(data.len() - 1024 - 5);
    for chunk in body.chunks(2048) {
        stream.push(chunk.to_vec()).unwrap();
    }
    stream.finish(tail.to_vec()).unwrap();
    let expected = ref_aes(&raw, o, &iv, &data).unwrap();
    assert_eq!(big.wait(), Ok(JobOutput::Data(expected.clone())));
    assert_eq!(
        sign.wait(),
        Ok(JobOutput::Signature(ed_sign(&seed, &data[..500])))
    );
    let streamed: Vec<u8> = std::iter::from_fn(|| stream.recv())
        .flat_map(Result::unwrap)
        .collect();
    assert_eq!(streamed, expected);
}

#[test]
fn a_padded_job_of_whole_packets_carries_its_padding_in_its_last_packet() {
    let _g = shared();
    let raw = [0x42u8; 16];
    let iv = [0x24u8; 16];
    let packet = 64;
    let enc = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
    let dec = AesOp::new(Direction::Decrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
    // Packets the AES nodes ran for one job.
    let packets_for = |s: &Service, op: AesOp, data: &[u8]| -> (JobOutput, u64) {
        let key = s.add_aes_key(&raw).unwrap();
        let before = node_packets(s);
        let out = s
            .submit(Job::aes(key, op, &iv, data.to_vec()))
            .unwrap()
            .wait()
            .unwrap();
        (out, node_packets(s) - before)
    };
    let msg: Vec<u8> = (0..3 * packet).map(|i| i as u8).collect();
    let ct = ref_aes(&raw, enc, &iv, &msg).unwrap();
    assert_eq!(ct.len(), padded_len(msg.len()));
    // (node capacity, packets of the encryption): with the default capacity every node holds
    // a packet and a block, so the block rides in the third packet; a node that holds exactly
    // one packet gets the block as a fourth packet of its own.
    for (capacity, want) in [(None, 3), (Some(packet as u64), 4)] {
        let node = || capacity.map_or(NodeSpec::new(), |c| NodeSpec::new().capacity(c));
        let s = Service::builder()
            .aes_cluster([node(), node()])
            .packet_size(packet)
            .inline_limit(0)
            .build()
            .unwrap();
        let (out, ran) = packets_for(&s, enc, &msg);
        assert_eq!(out, JobOutput::Data(ct.clone()), "capacity {capacity:?}");
        assert_eq!(
            ran, want,
            "capacity {capacity:?}: packets of the encryption"
        );
        // The ciphertext, one block longer than three packets, decrypts back in four.
        let (out, ran) = packets_for(&s, dec, &ct);
        assert_eq!(out, JobOutput::Data(msg.clone()), "capacity {capacity:?}");
        assert_eq!(ran, 4, "capacity {capacity:?}: packets of the decryption");
    }
}
