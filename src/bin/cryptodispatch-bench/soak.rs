//! `soak`: the default service under sustained overload, to show that nothing is lost and
//! memory stays bounded. A producer offers jobs at `--overload` times the rate the service
//! completed in a short calibration run, with `try_submit` (a refused job is handed back, so it
//! is offered, not lost); a consumer waits on every handle in order. Each second prints a row:
//! `seconds,offered_jobs,completed,failed,lost,peak_rss_mib,rss_mib,p99_latency_us`, where
//! `rss_mib` is the resident set at that second (a peak that stops rising while the resident
//! set stays level is warm-up, not growth), and `lost` is
//! submitted − completed − failed once the run has drained (during the run, jobs in flight
//! count as not yet resolved and are not called lost).
//!
//! Like any application with a bound on its own memory, the producer holds at most
//! [`MAX_UNCONSUMED`] handles the consumer has not taken yet: a job offered while that many wait
//! is turned away by the application, as one the service refuses is (offered, not submitted).
//! Without it the peak RSS measured the consumer thread's luck in getting a core (completed
//! outputs piling up behind it on a 2-core machine), not the service's bounds.
//!
//! The mix: AES-128 in every mode (64 B to 64 KiB) and Ed25519 signatures, from one seed.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use cryptodispatch::{Job, JobHandle, KeyId, Service, TrySubmitError};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::live::random_op;
use crate::report::{f, print_rows};
use crate::support::{Text, lock, percentile};

/// Options of `soak`.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Offered load as a multiple of the rate the service completes.
    #[arg(long, default_value_t = 10.0)]
    pub overload: f64,
    /// Seed of the job mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// CSV rows instead of a table.
    #[arg(long)]
    pub csv: bool,
}

/// CSV columns of `soak`.
pub const CSV_HEADER: &str =
    "seconds,offered_jobs,completed,failed,lost,peak_rss_mib,rss_mib,p99_latency_us";

/// A field of /proc/self/status given in kB, in MiB, or 0 where it is missing: `VmHWM:`, the
/// peak resident set, and `VmRSS:`, the resident set now.
fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn make_job(rng: &mut ChaCha8Rng, aes: KeyId, signer: KeyId) -> Job {
    if rng.random_bool(0.1) {
        let n = rng.random_range(0..256);
        return Job::sign(signer, vec![7u8; n]);
    }
    let op = random_op(rng);
    let blocks = 1usize << rng.random_range(2..12);
    Job::aes(aes, op, &[3; 16], vec![0x5A; 16 * blocks])
}

#[derive(Default)]
struct Counts {
    offered: AtomicU64,
    submitted: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
}

/// The most handles the producer leaves for the consumer (see the module docs): about twice
/// what the default service holds unresolved.
const MAX_UNCONSUMED: usize = 4096;

/// Runs the soak and prints a row per second.
pub fn run(args: &SoakArgs) -> Result<(), String> {
    if !(args.overload.is_finite() && args.overload > 0.0) {
        return Err(format!(
            "--overload {} must be a positive number",
            args.overload
        ));
    }
    let service = Service::new().text()?;
    let aes = service.add_aes_key(&[0x11; 16]).text()?;
    let signer = service.add_signing_key(&[0x22; 32]).text()?;

    // Calibration: how many jobs of this mix the service completes in half a second.
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < Duration::from_millis(500) {
        let batch: Vec<Job> = (0..64).map(|_| make_job(&mut rng, aes, signer)).collect();
        for h in service.submit_burst(batch).text()? {
            h.wait().text()?;
            done += 1;
        }
    }
    let capacity = done as f64 / start.elapsed().as_secs_f64();
    let offered_rate = capacity * args.overload;

    let counts = Counts::default();
    let inflight: Mutex<VecDeque<JobHandle>> = Mutex::new(VecDeque::new());
    let latencies: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    let producing = AtomicBool::new(true);
    let mut rows = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(args.seed ^ 0x5eed);
            let begin = Instant::now();
            let mut offered = 0u64;
            while begin.elapsed() < Duration::from_secs(args.seconds) {
                // Offer at the target rate: catch up in small steps.
                let due = (begin.elapsed().as_secs_f64() * offered_rate) as u64;
                if offered >= due {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                let job = make_job(&mut rng, aes, signer);
                offered += 1;
                counts.offered.fetch_add(1, Ordering::Relaxed);
                if lock(&inflight).len() >= MAX_UNCONSUMED {
                    continue;
                }
                match service.try_submit(job) {
                    Ok(h) => {
                        counts.submitted.fetch_add(1, Ordering::Relaxed);
                        lock(&inflight).push_back(h);
                    }
                    Err(TrySubmitError::Full(_)) => {}
                    Err(e) => panic!("soak: {e}"),
                }
            }
            producing.store(false, Ordering::Release);
        });
        s.spawn(|| {
            loop {
                let next = lock(&inflight).pop_front();
                match next {
                    Some(mut h) => {
                        let r = loop {
                            if let Some(r) = h.wait_timeout(Duration::from_millis(100)) {
                                break r;
                            }
                        };
                        if let Some(l) = h.latency() {
                            lock(&latencies).push(l.as_micros() as u64);
                        }
                        match r {
                            Ok(_) => counts.completed.fetch_add(1, Ordering::Relaxed),
                            Err(_) => counts.failed.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    None if !producing.load(Ordering::Acquire) => break,
                    None => std::thread::sleep(Duration::from_micros(200)),
                }
            }
        });
        let begin = Instant::now();
        for second in 1..=args.seconds {
            let wake = begin + Duration::from_secs(second);
            std::thread::sleep(wake.saturating_duration_since(Instant::now()));
            rows.push(row(second, &counts, &latencies, false));
        }
    });
    // Drained: now `lost` is final.
    rows.push(row(args.seconds, &counts, &latencies, true));
    print(&rows, args, capacity);
    Ok(())
}

/// The row of second `seconds`, in the columns of [`CSV_HEADER`].
fn row(seconds: u64, counts: &Counts, latencies: &Mutex<Vec<u64>>, drained: bool) -> Vec<String> {
    let submitted = counts.submitted.load(Ordering::Relaxed);
    let completed = counts.completed.load(Ordering::Relaxed);
    let failed = counts.failed.load(Ordering::Relaxed);
    let mut l = lock(latencies);
    l.sort_unstable();
    let p99 = percentile(&l, 0.99);
    // Keep the sample bounded: the latest second's worth is enough for a p99.
    if l.len() > 200_000 {
        let cut = l.len() - 100_000;
        l.drain(..cut);
    }
    let lost = if drained {
        submitted - completed - failed
    } else {
        0
    };
    let offered = counts.offered.load(Ordering::Relaxed);
    let counts = [seconds, offered, completed, failed, lost].map(|n| n.to_string());
    let mut cells = counts.to_vec();
    cells.extend([
        f(status_mib("VmHWM:"), 1),
        f(status_mib("VmRSS:"), 1),
        p99.to_string(),
    ]);
    cells
}

fn print(rows: &[Vec<String>], args: &SoakArgs, capacity: f64) {
    let title = format!(
        "soak: the default service, jobs offered at {:.1}x its measured rate ({:.0} jobs/s) for {} s",
        args.overload, capacity, args.seconds
    );
    let columns = "seconds,offered jobs,completed,failed,lost,peak RSS MiB,RSS MiB,p99 latency µs";
    print_rows(args.csv, CSV_HEADER, rows, &title, columns, &[]);
    if !args.csv {
        println!("(the last row is taken after the run drained: its `lost` is final)");
    }
}
