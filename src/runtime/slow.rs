//! How a node with a slowdown factor emulates a slower core ([`NodeSpec::slowdown`]).
//!
//! A node slowed f times runs each set of packets at this machine's speed, then waits f − 1
//! times the set's work, so that the set costs f times its work. Two things keep the machine's
//! own noise out of that product, which on a node slowed 200 times would otherwise turn
//! microseconds into milliseconds:
//!
//! - The work is the thread's CPU time over the set ([`WorkClock`]; the wall time where the
//!   system gives no thread CPU time), not the wall time: time the thread was preempted, or
//!   ready and waiting for a core, is not work the emulated core did.
//! - The work multiplied is at most [`SlowCore::OUTLIER`] (two) times the set's usual time, the
//!   node's running estimate of its packets' time alone (the one the scheduler reads): what a
//!   set takes beyond that (a cache or TLB miss on cold data, a page fault, an interrupt) is
//!   counted once, as a slower core's compute would not make those slower. The usual time
//!   includes the service's own work per packet, so that is multiplied as the cipher's is.
//!
//! [`NodeSpec::slowdown`]: crate::runtime::NodeSpec::slowdown

use std::time::{Duration, Instant};

/// The last part of an emulated wait, spun rather than slept, so that it ends on time.
pub(crate) const SLOWDOWN_SPIN: Duration = Duration::from_micros(60);

/// The real work a thread did since a start, as a slowed node measures it: the thread's CPU
/// time (on Linux; the wall time elsewhere), at most the wall time, so that time the thread
/// spent preempted by other threads, or waiting for a core, is not multiplied as if the
/// emulated core had worked through it. A reference that runs the same work directly measures
/// its work with it too, and waits what [`SlowCore::extra`] gives for it, to be slowed as the
/// nodes are.
#[derive(Debug, Clone, Copy)]
pub struct WorkClock {
    wall: Instant,
    cpu: Option<Duration>,
}

impl WorkClock {
    /// Starts the clock on the calling thread.
    pub fn start() -> Self {
        Self {
            wall: Instant::now(),
            cpu: thread_cpu(),
        }
    }

    /// The calling thread's work since the start: its CPU time, at most the wall time. Call it
    /// on the thread that started the clock.
    pub fn work(&self) -> Duration {
        let wall = self.wall.elapsed();
        match (self.cpu, thread_cpu()) {
            (Some(start), Some(now)) => now.saturating_sub(start).min(wall),
            _ => wall,
        }
    }
}

/// The calling thread's CPU time, where the system gives it.
#[cfg(target_os = "linux")]
fn thread_cpu() -> Option<Duration> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Some(Duration::new(
        u64::try_from(t.tv_sec).ok()?,
        u32::try_from(t.tv_nsec).ok()?,
    ))
}

/// The calling thread's CPU time, where the system gives it.
#[cfg(not(target_os = "linux"))]
fn thread_cpu() -> Option<Duration> {
    None
}

/// A core `factor` times slower than this one, as a slowed node emulates it (module docs):
/// what it waits after a set's work.
#[derive(Debug, Clone, Copy)]
pub struct SlowCore {
    factor: f64,
}

impl SlowCore {
    /// Work beyond this many times a set's usual time is counted once, not multiplied.
    pub const OUTLIER: f64 = 2.0;

    /// A core `factor` times slower than this one (1: no slower).
    pub fn new(factor: f64) -> Self {
        Self { factor }
    }

    /// The slowdown factor.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// A [`WorkClock`] started now if the core is slower than this one, else `None`: an
    /// unslowed node or reference reads no CPU clock (a system call) per set.
    pub fn clock(&self) -> Option<WorkClock> {
        (self.factor > 1.0).then(WorkClock::start)
    }

    /// What the slower core waits after `work` on a set whose usual time on this core is
    /// `usual` (`None`: not known): `factor − 1` times the work, counting of it at most
    /// [`OUTLIER`](Self::OUTLIER) times the usual time.
    pub fn extra(&self, work: Duration, usual: Option<Duration>) -> Duration {
        if self.factor <= 1.0 {
            return Duration::ZERO;
        }
        let counted = match usual {
            Some(usual) => work.min(usual.mul_f64(Self::OUTLIER)),
            None => work,
        };
        counted.mul_f64(self.factor - 1.0)
    }
}

/// Waits `extra`, as a node with a slowdown factor does after its real work: sleeps for all
/// but the last 60 µs (leaving the core to other threads), then spins to the deadline. A
/// reference that runs the same work directly can call it per packet, with the wait
/// [`SlowCore::extra`] gives for the work a [`WorkClock`] measured, to be slowed exactly as
/// the nodes are.
pub fn emulate_slowdown(extra: Duration) {
    let deadline = Instant::now() + extra;
    if extra > SLOWDOWN_SPIN {
        std::thread::sleep(extra - SLOWDOWN_SPIN);
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn work_leaves_out_time_the_thread_did_not_run() {
        let clock = WorkClock::start();
        std::thread::sleep(Duration::from_millis(40));
        let work = clock.work();
        assert!(
            work < Duration::from_millis(10),
            "a thread that slept 40 ms counted {work:?} of work"
        );
    }

    #[test]
    fn work_counts_time_the_thread_ran_and_never_passes_the_wall_time() {
        let start = Instant::now();
        let clock = WorkClock::start();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let work = clock.work();
        let wall = start.elapsed();
        assert!(
            work >= Duration::from_millis(1) && work <= wall,
            "a thread that spun for {wall:?} counted {work:?} of work"
        );
    }

    #[test]
    fn a_slower_core_multiplies_work_up_to_twice_its_usual_and_counts_the_rest_once() {
        let (us, core) = (Duration::from_micros, SlowCore::new(10.0));
        // Within twice the usual time: all of it multiplied.
        assert_eq!(core.extra(us(15), Some(us(10))), us(135));
        // Beyond: twice the usual time multiplied, the rest counted once (not waited for).
        assert_eq!(core.extra(us(50), Some(us(10))), us(180));
        // With no usual time known, the whole work.
        assert_eq!(core.extra(us(50), None), us(450));
        // A factor of 1 waits nothing, and reads no CPU clock.
        let none = SlowCore::new(1.0).extra(us(50), Some(us(10)));
        assert_eq!(none, Duration::ZERO);
        assert!(SlowCore::new(1.0).clock().is_none() && core.clock().is_some());
    }
}
