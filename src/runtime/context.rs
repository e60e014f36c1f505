//! Which thread is this? A worker thread records the service it serves, so that a blocking
//! call made on it (from a waker or callback the service ran there) can refuse to wait for the
//! very worker it runs on.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Shards of counters that many threads bump per job (threads beyond this share them).
pub(crate) const SHARDS: usize = 16;

thread_local! {
    /// On a worker thread: its service's serial number (0 elsewhere; services number from 1).
    static WORKER_OF: Cell<u64> = const { Cell::new(0) };
    /// This thread's shard of per-job counters.
    static SLOT: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Relaxed) % SHARDS
    };
}

/// The calling thread's shard of per-job counters (below [`SHARDS`]), so that threads
/// submitting or finishing jobs do not write one cache line by turns.
pub(crate) fn shard() -> usize {
    SLOT.with(|s| *s)
}

/// Marks the calling thread as a worker of the service numbered `service`.
pub(crate) fn enter_worker(service: u64) {
    WORKER_OF.with(|w| w.set(service));
}

/// Whether the current thread is a worker of any service (a blocking wait there could wait
/// for that very worker).
pub(crate) fn on_any_worker() -> bool {
    WORKER_OF.with(|w| w.get() != 0)
}

/// Whether the current thread is one of the workers of the service numbered `service`.
pub(crate) fn on_worker_of(service: u64) -> bool {
    WORKER_OF.with(|w| w.get() == service)
}
