//! The names a service hands out: key handles, the kinds of cluster, and task ids.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::packet::TaskId;

/// The kinds of cluster a service can have: one per algorithm family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterKind {
    /// AES-128/192/256 in ECB, CBC, OFB, CFB-128 and CTR, and AES-GCM; both directions.
    Aes,
    /// Ed25519 signing and verification.
    Ed25519,
}

impl fmt::Display for ClusterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClusterKind::Aes => "AES",
            ClusterKind::Ed25519 => "Ed25519",
        })
    }
}

/// A handle to a registered key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub(crate) u64);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key {}", self.0)
    }
}

/// Task ids taken from a service's counter a block at a time, so that a thread submitting many
/// jobs writes the shared counter once per block, not once per job. A burst keeps one for the
/// call; a thread keeps one per service it submits to ([`TaskIds::for_thread`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TaskIds {
    next: u64,
    end: u64,
}

thread_local! {
    /// The calling thread's block of task ids, with the serial number of the service they
    /// came from.
    static THREAD_TASK_IDS: Cell<(u64, TaskIds)> = const { Cell::new((0, TaskIds { next: 0, end: 0 })) };
}

impl TaskIds {
    /// Ids taken from the service's counter at once.
    const BLOCK: u64 = 64;

    /// The next id, taking a new block from `counter` when this one is used up.
    pub(crate) fn take(&mut self, counter: &AtomicU64) -> TaskId {
        if self.next == self.end {
            self.next = counter.fetch_add(Self::BLOCK, Ordering::Relaxed);
            self.end = self.next + Self::BLOCK;
        }
        self.next += 1;
        TaskId(self.next - 1)
    }

    /// A task id of the service numbered `service`, from the calling thread's block of its
    /// ids. Ids are unique but not in submission order across threads (nothing orders jobs by
    /// id).
    pub(crate) fn for_thread(service: u64, counter: &AtomicU64) -> TaskId {
        THREAD_TASK_IDS.with(|ids| {
            let (serial, mut block) = ids.get();
            if serial != service {
                block = TaskIds::default();
            }
            let task = block.take(counter);
            ids.set((service, block));
            task
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_blocks_threads_and_services() {
        let a = AtomicU64::new(1);
        let b = AtomicU64::new(1);
        let mut burst = TaskIds::default();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            assert!(seen.insert(burst.take(&a).0));
            assert!(seen.insert(TaskIds::for_thread(1, &a).0));
        }
        // Another service's ids come from its own counter, not from this thread's block.
        let other = TaskIds::for_thread(2, &b);
        assert_eq!(other, TaskId(1));
        assert!(seen.insert(TaskIds::for_thread(1, &a).0));
    }
}
