//! The intermediate state store (docs/ALGORITHM.md §3 part 6): the chaining state a dependent job's
//! packet leaves for the job's next packet: a CBC, OFB or CFB register, or a GCM job's GHASH
//! state with its counter (docs/ALGORITHM.md §12, §15.4).
//!
//! A job's first packet carries the IV with it. A node takes the state out before it runs any
//! later packet and puts the new state back before it reports the packet complete, so the next
//! packet finds it whichever node runs it: the same node (strategy 2, while a predecessor is in
//! flight) or, between bursts of a stream, any node. A job of one packet never touches the
//! store.
//! The map is split into shards by task id so nodes working on different jobs rarely meet on a
//! lock. States are zeroized when they leave the store for good.

use std::sync::Mutex;

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

type Shard = CachePadded<Mutex<FxHashMap<TaskId, StoredState>>>;

#[derive(Debug)]
pub(crate) struct StateStore {
    shards: Box<[Shard]>,
}

impl Default for StateStore {
    fn default() -> Self {
        StateStore {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
        }
    }
}

impl StateStore {
    fn shard(&self, task: TaskId) -> std::sync::MutexGuard<'_, FxHashMap<TaskId, StoredState>> {
        self.shards[(task.0 as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Stores the state for `task`'s next packet.
    pub(crate) fn put(&self, task: TaskId, state: StoredState) {
        self.shard(task).insert(task, state);
    }

    /// Takes `task`'s state out (the packet that runs now owns it).
    pub(crate) fn take(&self, task: TaskId) -> Option<StoredState> {
        self.shard(task).remove(&task)
    }

    /// Forgets `task`'s state, if any.
    pub(crate) fn remove(&self, task: TaskId) {
        drop(self.take(task));
    }

    /// Number of jobs with a stored state.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}
