//! The intermediate state store (docs/ALGORITHM.md §3 part 6): the chaining state a dependent job's
//! packet leaves for the job's next packet: a CBC, OFB or CFB register, or a GCM job's GHASH
//! state with its counter (docs/ALGORITHM.md §12, §15.4).
//!
//! A job's first packet carries the IV with it. A state is stored under its job's task and the
//! number of the packet it starts: a node reads it before it runs that packet, and puts the
//! state that starts the next packet before it reports the packet complete, so the next packet
//! finds it whichever node runs it: the same node (strategy 2, while a predecessor is in
//! flight) or, between bursts of a stream, any node. A job of one packet never touches the
//! store.
//!
//! A CBC, OFB or CFB state stays in the store until the packet it starts has been delivered
//! ([`StateStore::release`]): if that packet's node fails while running it, the packet runs
//! again elsewhere from the same state (docs/ALGORITHM.md §15.2). A GCM state is taken out by
//! the packet it starts (it cannot be copied); a rerun rebuilds it from the job's earlier
//! outputs (`exec.rs`).
//! The map is split into shards by task id so nodes working on different jobs rarely meet on a
//! lock. States are zeroized when they leave the store for good.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use rustc_hash::FxHashMap;

use crate::crypto::{ChainState, GcmState};
use crate::packet::TaskId;

const SHARDS: usize = 16;

/// What a packet leaves for the next packet of its job. Both kinds zeroize on drop.
#[derive(Debug)]
pub(crate) enum StoredState {
    /// The 16-byte register of CBC, OFB or CFB.
    Chain(ChainState),
    /// A GCM job's hash, counter, tag mask and lengths (boxed: it is larger than a block).
    Gcm(Box<GcmState>),
}

/// A shard: its part of the map, and how many states it holds, stored by the lock holder so
/// that counting the states takes no lock and no line shared between shards is written.
#[derive(Debug, Default)]
struct Shard {
    map: Mutex<FxHashMap<(TaskId, u32), StoredState>>,
    held: AtomicUsize,
}

#[derive(Debug)]
pub(crate) struct StateStore {
    shards: Box<[CachePadded<Shard>]>,
}

impl Default for StateStore {
    fn default() -> Self {
        StateStore {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
        }
    }
}

impl StateStore {
    /// Runs `f` on `task`'s shard of the map, under its lock, and publishes the shard's count.
    fn with_shard<T>(
        &self,
        task: TaskId,
        f: impl FnOnce(&mut FxHashMap<(TaskId, u32), StoredState>) -> T,
    ) -> T {
        let shard = &self.shards[(task.0 as usize) % SHARDS];
        let mut map = shard.map.lock().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut map);
        shard.held.store(map.len(), Ordering::Relaxed);
        out
    }

    /// Stores the state that starts packet `seq` of `task`.
    pub(crate) fn put(&self, task: TaskId, seq: u32, state: StoredState) {
        self.with_shard(task, |map| map.insert((task, seq), state));
    }

    /// Takes the state that starts packet `seq` of `task` out (the packet that runs now owns
    /// it).
    pub(crate) fn take(&self, task: TaskId, seq: u32) -> Option<StoredState> {
        self.with_shard(task, |map| map.remove(&(task, seq)))
    }

    /// A copy of the CBC, OFB or CFB state that starts packet `seq` of `task`, left in the
    /// store until the packet is delivered ([`release`](Self::release)).
    pub(crate) fn chain(&self, task: TaskId, seq: u32) -> Option<ChainState> {
        self.with_shard(task, |map| match map.get(&(task, seq)) {
            Some(StoredState::Chain(s)) => Some(s.clone()),
            _ => None,
        })
    }

    /// Forgets the state that started packet `seq` of `task` (the packet was delivered).
    pub(crate) fn release(&self, task: TaskId, seq: u32) {
        drop(self.take(task, seq));
    }

    /// Forgets every state of `task`.
    pub(crate) fn remove(&self, task: TaskId) {
        let gone: Vec<StoredState> = self.with_shard(task, |map| {
            let keys: Vec<(TaskId, u32)> = map.keys().filter(|k| k.0 == task).copied().collect();
            keys.into_iter().filter_map(|k| map.remove(&k)).collect()
        });
        drop(gone);
    }

    /// Number of states stored (read without a lock).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.held.load(Ordering::Relaxed))
            .sum()
    }
}
