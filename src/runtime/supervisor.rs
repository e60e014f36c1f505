//! The supervisor: a thread that watches the nodes and takes a failed one out
//! (docs/ALGORITHM.md §15.2).
//!
//! # Design note
//!
//! A node fails when its worker thread is gone (it panicked outside a packet's cryptography,
//! whose panics are caught and fail only that packet's job; or it returned), or when its
//! running packet has run past the stall timeout. Every tick the supervisor looks at each node:
//!
//! 1. A worker thread that finished while the service is not stopping: the node is taken out
//!    (`Engine::fail_node`: the running packet's job fails with `JobError::NodeFailed`, the
//!    packets the node had not started go to other nodes in order, chained jobs bound to it
//!    rebind and continue from the state store), and a new worker thread is started for it,
//!    with the node's current unit times; its first turn at the engine brings the node back.
//! 2. A running packet charged past its limit (`NodeHealth::busy_since`, `busy_limit`): the
//!    node is taken out the same way, but its worker lives on; when the stalled packet ends,
//!    the worker finds it taken already and discards the late result, then brings the node
//!    back.
//!
//! Either way the packets the node was running run again on other nodes, up to the builder's
//! `max_attempts`, before their jobs fail.
//!
//! A packet is charged the time its worker thread could run since the supervisor first saw it
//! running: wall time less the thread's run-queue wait (`health.rs`), so a node whose thread
//! waits for a CPU on a busy machine is not stalled. The limit is the builder's
//! `stall_timeout`, or by default 20 times the packet's expected service time by the node's
//! own estimates, and at least 250 ms: a slow node is not a stalled one. The supervisor owns
//! the worker threads' handles and joins them at shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::packet::{Cmd, NodeId, UnitTimes};
use crate::runtime::engine::Engine;
use crate::runtime::health::{charged_ns, run_queue_wait_ns};
use crate::runtime::worker::{self, WorkerSpec};

/// One node's worker thread, as the supervisor keeps it.
pub(crate) struct NodeThread {
    pub(crate) spec: WorkerSpec,
    pub(crate) thread: Option<JoinHandle<()>>,
}

/// The running packet the supervisor watches on a node: when it started (`busy_since`), and
/// when the supervisor first saw it running, with its thread's run-queue wait then.
#[derive(Clone, Copy)]
struct Watch {
    since: u64,
    seen_ns: u64,
    waited_ns: Option<u64>,
}

/// Starts a worker thread for `spec` (named `cdnode-N`, short enough for the kernel's 15-byte
/// thread names).
pub(crate) fn spawn_worker(
    engine: &Arc<Engine>,
    spec: WorkerSpec,
    ready: Option<std::sync::mpsc::Sender<()>>,
) -> std::io::Result<JoinHandle<()>> {
    let engine = Arc::clone(engine);
    thread::Builder::new()
        .name(format!("cdnode-{}", spec.node.0))
        .spawn(move || worker::run(engine, spec, ready))
}

/// The supervisor thread's body: watches until the service stops, then joins the workers.
pub(crate) fn run(engine: Arc<Engine>, mut workers: Vec<NodeThread>, tick: Duration) {
    let mut watches: Vec<Option<Watch>> = vec![None; workers.len()];
    while !engine.is_stopping() {
        thread::park_timeout(tick);
        if engine.is_stopping() {
            break;
        }
        // Futures held by a tenant's byte rate try again once a tick.
        engine.tenants.wake_timed();
        for (w, watch) in workers.iter_mut().zip(watches.iter_mut()) {
            let node = w.spec.node;
            let health = &engine.health[node.index()];
            let dead = w.thread.as_ref().is_none_or(JoinHandle::is_finished);
            if dead {
                if let Some(t) = w.thread.take() {
                    let _ = t.join();
                }
                if engine.is_stopping() {
                    continue;
                }
                engine.fail_node(node, true);
                let mut spec = w.spec.clone();
                spec.declared = Some(current_unit_times(&engine, node));
                match spawn_worker(&engine, spec, None) {
                    Ok(t) => {
                        health.restarts.fetch_add(1, Ordering::Relaxed);
                        w.thread = Some(t);
                    }
                    // Tried again next tick; meanwhile nothing waits for it in vain.
                    Err(_) => engine.give_up_node(node),
                }
                continue;
            }
            let since = health.busy_since.load(Ordering::Acquire);
            if since == 0 {
                *watch = None;
                continue;
            }
            let now = engine.now_ns();
            let tid = health.thread_id.load(Ordering::Acquire);
            let waited_now = (tid != 0).then(|| run_queue_wait_ns(tid)).flatten();
            let charged = match *watch {
                Some(Watch {
                    since: s,
                    seen_ns,
                    waited_ns,
                }) if s == since => {
                    let waited = match (waited_ns, waited_now) {
                        (Some(then), Some(now)) => now.saturating_sub(then),
                        _ => 0,
                    };
                    charged_ns(now.saturating_sub(seen_ns), waited)
                }
                _ => {
                    // A packet seen for the first time is charged from now: what its thread
                    // did before is not known.
                    *watch = Some(Watch {
                        since,
                        seen_ns: now,
                        waited_ns: waited_now,
                    });
                    continue;
                }
            };
            if charged > health.busy_limit.load(Ordering::Acquire) && !health.is_down() {
                engine.fail_node(node, false);
                *watch = None;
            }
        }
    }
    for w in workers {
        if let Some(t) = w.thread {
            let _ = t.join();
        }
    }
}

/// The node's unit times as the scheduler knows them now (a restarted worker skips
/// calibration).
fn current_unit_times(engine: &Engine, node: NodeId) -> UnitTimes {
    let m = engine.metrics();
    m.nodes
        .get(node.index())
        .map(|n| n.unit_times)
        .unwrap_or(UnitTimes([1.0; Cmd::ALL.len()]))
}
