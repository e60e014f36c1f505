//! Fault injection (the `fault-injection` cargo feature): a node told to fail does so once,
//! after it has completed a given number of packets, so tests (the crate's own, and users'
//! chaos tests) can check that the service goes on (docs/ALGORITHM.md §15.2).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A fault a node injects once, after completing `after` packets
/// ([`NodeSpec::fault`](crate::runtime::NodeSpec::fault)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The worker panics in the middle of its next packet, outside the cryptography (which
    /// catches its own panics), so its thread dies with the packet running.
    Panic {
        /// Packets the node completes first.
        after: u64,
    },
    /// The worker stalls for `duration` before finishing its next packet: past the stall
    /// timeout, the node is taken out, and the packet's late result is discarded.
    Stall {
        /// Packets the node completes first.
        after: u64,
        /// How long it stalls.
        duration: Duration,
    },
    /// The worker thread returns before taking its next packet, as if it had exited.
    Exit {
        /// Packets the node completes first.
        after: u64,
    },
}

impl Fault {
    fn after(self) -> u64 {
        match self {
            Fault::Panic { after } | Fault::Stall { after, .. } | Fault::Exit { after } => after,
        }
    }
}

/// A worker's view of its node's fault: fires once over every worker the node has.
pub(crate) struct Injector {
    fault: Option<Fault>,
    fired: Arc<AtomicBool>,
    completed: u64,
}

impl Injector {
    pub(crate) fn new(fault: Option<Fault>, fired: Arc<AtomicBool>) -> Self {
        Injector {
            fault,
            fired,
            completed: 0,
        }
    }

    /// Whether `kind` strikes now: the node has completed at least its `after` packets (a lane
    /// set completes several at once), and it has not struck before. Marks it fired.
    fn strikes(&mut self, kind: fn(&Fault) -> bool) -> Option<Fault> {
        let fault = self
            .fault
            .filter(|f| kind(f) && self.completed >= f.after())?;
        if self.fired.swap(true, Ordering::AcqRel) {
            self.fault = None;
            return None;
        }
        Some(fault)
    }

    pub(crate) fn exit_now(&mut self) -> bool {
        self.strikes(|f| matches!(f, Fault::Exit { .. })).is_some()
    }

    pub(crate) fn panic_now(&mut self) {
        if self.strikes(|f| matches!(f, Fault::Panic { .. })).is_some() {
            panic!("fault injected: the worker panics in the middle of a packet");
        }
    }

    pub(crate) fn stall_now(&mut self) {
        if let Some(Fault::Stall { duration, .. }) =
            self.strikes(|f| matches!(f, Fault::Stall { .. }))
        {
            std::thread::sleep(duration);
        }
    }

    pub(crate) fn completed(&mut self) {
        self.completed += 1;
    }
}
