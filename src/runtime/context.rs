//! Which thread is this? A worker thread records the service it serves, so that a blocking
//! call made on it (from a waker or callback the service ran there) can refuse to wait for the
//! very worker it runs on.

use std::cell::Cell;

thread_local! {
    /// On a worker thread: its service's serial number (0 elsewhere; services number from 1).
    static WORKER_OF: Cell<u64> = const { Cell::new(0) };
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
