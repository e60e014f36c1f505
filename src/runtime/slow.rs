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
//! - The work multiplied is at most this core's best time for the set ([`SlowCore`]): what a
//!   set takes beyond that (a cache or TLB miss on cold data, a page fault, an interrupt) is
//!   counted once, as a slower core's compute would not make those slower. The best is
//!   measured at start-up for AES: the fastest of five runs of AES-256 CBC encryption, the
//!   slowest work per byte a node does, on packets of 16 bytes and of the service's packet
//!   size, interpolated in between. Ed25519 work, and nodes whose unit times were declared, are
//!   multiplied whole.
//!
//! [`NodeSpec::slowdown`]: crate::runtime::NodeSpec::slowdown

use std::time::{Duration, Instant};

use crate::crypto::{AesKey, AesOp, ChainState, Direction, ImplTable};
use crate::packet::{Cmd, Mode};

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
    /// This core's best time for an AES packet, in nanoseconds: (of 16 bytes, per byte more).
    /// `None` when not measured: all work is multiplied.
    aes_best: Option<(f64, f64)>,
}

impl SlowCore {
    /// A core `factor` times slower whose whole work is multiplied (no best measured).
    pub fn new(factor: f64) -> Self {
        Self {
            factor,
            aes_best: None,
        }
    }

    /// A core `factor` times slower, with this core's best AES time measured on `impls` (the
    /// fastest of five runs of AES-256 CBC encryption, on packets of 16 and of `unit_len`
    /// bytes): the AES work it multiplies is at most that time for each packet's length.
    /// Measures only if `factor` is above 1.
    pub fn measured(factor: f64, unit_len: usize, impls: &ImplTable) -> Self {
        if factor <= 1.0 {
            return Self::new(factor);
        }
        let Ok(key) = AesKey::new(&[0x5c; 32]) else {
            return Self::new(factor);
        };
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let unit_len = unit_len.max(16);
        let mut buf = vec![0u8; unit_len];
        let mut best = |len: usize| {
            fastest(5, || {
                let mut state = ChainState::default();
                let _ = key.process_with(impls.get(op), op, &mut state, &mut buf, len, false);
            })
        };
        let (small, unit) = (best(16), best(unit_len));
        let per_byte = match unit_len - 16 {
            0 => 0.0,
            more => (unit - small).max(0.0) / more as f64,
        };
        Self {
            factor,
            aes_best: Some((small, per_byte)),
        }
    }

    /// The slowdown factor.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// What the slower core waits after `work` on `packets` (each its command and length):
    /// `factor − 1` times the work, counting of it at most this core's best time for the
    /// packets where that was measured (AES).
    pub fn extra(&self, work: Duration, packets: impl IntoIterator<Item = (Cmd, u64)>) -> Duration {
        if self.factor <= 1.0 {
            return Duration::ZERO;
        }
        let counted = match self.aes_best {
            Some((small, per_byte)) => {
                let best_ns: f64 = packets
                    .into_iter()
                    .map(|(cmd, len)| match cmd {
                        Cmd::Encrypt | Cmd::Decrypt => {
                            small + per_byte * len.saturating_sub(16) as f64
                        }
                        Cmd::Sign | Cmd::Verify => f64::INFINITY,
                    })
                    .sum();
                if best_ns < work.as_nanos() as f64 {
                    Duration::from_nanos(best_ns as u64)
                } else {
                    work
                }
            }
            None => work,
        };
        counted.mul_f64(self.factor - 1.0)
    }
}

/// The fastest of `runs` timed runs of `f`, in nanoseconds (at least 1).
pub(crate) fn fastest(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64
        })
        .fold(f64::INFINITY, f64::min)
        .max(1.0)
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

    /// A core slowed 10 times whose best for an AES packet is 1 µs plus 1 ns a byte.
    fn core() -> SlowCore {
        SlowCore {
            factor: 10.0,
            aes_best: Some((1_000.0, 1.0)),
        }
    }

    #[test]
    fn a_slower_core_multiplies_work_up_to_its_best_and_counts_the_rest_once() {
        let us = Duration::from_micros;
        // Best for 1040 bytes: 1 µs + 1024 ns = 2.024 µs.
        let packet = [(Cmd::Encrypt, 1040)];
        assert_eq!(core().extra(us(1), packet), us(9));
        assert_eq!(
            core().extra(us(50), packet),
            Duration::from_nanos(2_024 * 9)
        );
        // Two packets: their bests add up.
        let two = [(Cmd::Decrypt, 16), (Cmd::Encrypt, 16)];
        assert_eq!(core().extra(us(50), two), us(18));
        // Ed25519 work, and a core with no best measured, are multiplied whole.
        assert_eq!(core().extra(us(50), [(Cmd::Sign, 64)]), us(450));
        assert_eq!(SlowCore::new(10.0).extra(us(50), packet), us(450));
        // A factor of 1 waits nothing.
        assert_eq!(SlowCore::new(1.0).extra(us(50), packet), Duration::ZERO);
    }

    #[test]
    fn a_measured_core_has_a_best_that_grows_with_the_length() {
        let core = SlowCore::measured(4.0, 16 * 1024, &ImplTable::rustcrypto());
        let (small, per_byte) = core.aes_best.expect("AES measured");
        assert!(
            small > 0.0 && per_byte > 0.0,
            "best {small} ns + {per_byte} ns a byte"
        );
        assert!(
            SlowCore::measured(1.0, 16 * 1024, &ImplTable::rustcrypto())
                .aes_best
                .is_none()
        );
    }
}
