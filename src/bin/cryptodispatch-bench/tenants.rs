//! `live --workload tenants`: two tenants sharing one service (docs/ALGORITHM.md §15.7).
//!
//! - `isolation`: a quiet tenant sends jobs at a tenth of its share, first alone, then beside a
//!   noisy tenant of the same weight that offers ten times its share (five times the service's
//!   capacity, which backpressure holds back). The quiet tenant's p99 latency beside the noisy
//!   one is compared with its p99 alone (target: at most 1.5 times).
//! - `shares`: both tenants backlogged, weights 1 and 3: each tenant's share of the bytes served
//!   over the whole run and over each second (target: within 10% of 1:3).
//!
//! A job's latency is the service's own: from its submission to its last packet's completion.
//! The capacity is measured first (one tenant backlogged for a phase). Jobs are 16 KiB
//! AES-128-CBC encryptions (or `--size`) on 2 AES nodes (or `--nodes`); every output is checked
//! against the cipher called directly, and `lost` counts the jobs whose handle did not resolve
//! to the expected bytes.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cryptodispatch::crypto::{AesKey, AesOp, ChainState, Direction};
use cryptodispatch::{Job, JobHandle, Mode, NodeSpec, Service, TenantId, TenantSpec};

use crate::live::LiveArgs;
use crate::report::{Csv, Table, f};
use crate::support::percentile;

/// CSV columns of the tenants workload.
pub const CSV_HEADER: &str =
    "scenario,tenant,weight,offered_mb_s,throughput_mb_s,share,p99_latency_us,p99_alone_us,lost";

const IV: [u8; 16] = [9; 16];
/// How long each phase runs.
const PHASE: Duration = Duration::from_secs(3);
/// Jobs a backlogged submitting thread keeps in flight.
const WINDOW: usize = 256;

/// One tenant's traffic: its key, data and the output every job must give.
struct Traffic {
    tenant: TenantId,
    key: cryptodispatch::KeyId,
    data: Vec<u8>,
    expected: Vec<u8>,
}

impl Traffic {
    fn new(service: &Service, tenant: TenantId, size: usize, seed: u8) -> Result<Self, String> {
        let raw = [seed; 16];
        let key = service.add_aes_key(&raw).map_err(|e| e.to_string())?;
        let data: Vec<u8> = (0..size).map(|i| (i as u8) ^ seed).collect();
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let mut expected = data.clone();
        let mut state = ChainState::for_mode(Mode::Cbc, &IV).map_err(|e| e.to_string())?;
        AesKey::new(&raw)
            .and_then(|k| k.process(op, &mut state, &mut expected, size, true))
            .map_err(|e| e.to_string())?;
        Ok(Traffic {
            tenant,
            key,
            data,
            expected,
        })
    }

    fn job(&self) -> Job {
        Job::encrypt(self.key, Mode::Cbc, &IV, self.data.clone()).tenant(self.tenant)
    }
}

/// What one tenant saw in a phase: per finished job, its completion time (from the phase's
/// start) and latency; and the jobs lost (a handle that failed or gave other bytes).
#[derive(Default)]
struct Seen {
    done: Vec<(Duration, Duration)>,
    lost: u64,
}

impl Seen {
    /// Waits for a job and checks its output. Its latency is the service's own, from its
    /// submission to its last packet's completion (`JobHandle::latency`), so that how soon
    /// the checking thread gets a core does not count.
    fn check(&mut self, traffic: &Traffic, mut h: JobHandle, sent: Instant, start: Instant) {
        let ok = h
            .wait_timeout(Duration::from_secs(3600))
            .and_then(Result::ok)
            .and_then(|o| o.into_data())
            .is_some_and(|d| d == traffic.expected);
        if ok {
            let now = Instant::now();
            self.done
                .push((now - start, h.latency().unwrap_or(now - sent)));
        } else {
            self.lost += 1;
        }
    }

    fn merge(&mut self, other: Seen) {
        self.done.extend(other.done);
        self.lost += other.lost;
    }

    fn p99_us(&self) -> f64 {
        let mut l: Vec<Duration> = self.done.iter().map(|d| d.1).collect();
        l.sort_unstable();
        percentile(&l, 0.99).as_secs_f64() * 1e6
    }
}

/// A backlogged tenant: `threads` threads each keeping [`WINDOW`] jobs in flight until `stop`.
fn backlogged(
    service: &Service,
    traffic: &Traffic,
    threads: usize,
    start: Instant,
    stop: &AtomicBool,
) -> Seen {
    let seen = Mutex::new(Seen::default());
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut mine = Seen::default();
                let mut window = VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    if window.len() == WINDOW {
                        let (h, sent) = window.pop_front().expect("full window");
                        mine.check(traffic, h, sent, start);
                    }
                    let sent = Instant::now();
                    match service.submit(traffic.job()) {
                        Ok(h) => window.push_back((h, sent)),
                        Err(_) => mine.lost += 1,
                    }
                }
                for (h, sent) in window {
                    mine.check(traffic, h, sent, start);
                }
                seen.lock().expect("seen").merge(mine);
            });
        }
    });
    seen.into_inner().expect("seen")
}

/// A light tenant: one job every `gap`, each waited for on a thread of its own so that a slow
/// job does not delay the next one's submission, until `stop`.
fn paced(service: &Service, traffic: &Traffic, gap: Duration, stop: &AtomicBool) -> Seen {
    let start = Instant::now();
    let seen = Mutex::new(Seen::default());
    let (tx, rx) = std::sync::mpsc::channel::<(JobHandle, Instant)>();
    thread::scope(|s| {
        s.spawn(|| {
            let mut mine = Seen::default();
            for (h, sent) in rx {
                mine.check(traffic, h, sent, start);
            }
            seen.lock().expect("seen").merge(mine);
        });
        let mut next = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now < next {
                thread::sleep(next - now);
            }
            next += gap;
            let sent = Instant::now();
            match service.submit(traffic.job()) {
                Ok(h) => {
                    let _ = tx.send((h, sent));
                }
                Err(_) => seen.lock().expect("seen").lost += 1,
            }
        }
        drop(tx);
    });
    seen.into_inner().expect("seen")
}

/// Runs `f` for [`PHASE`], telling it when to stop.
fn for_phase<T>(f: impl FnOnce(&AtomicBool) -> T + Send) -> T
where
    T: Send,
{
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let h = s.spawn(|| f(&stop));
        thread::sleep(PHASE);
        stop.store(true, Ordering::Relaxed);
        h.join().expect("phase")
    })
}

fn mb_s(jobs: usize, size: usize, secs: f64) -> f64 {
    jobs as f64 * size as f64 / secs / 1e6
}

/// One row of the report.
struct Row {
    scenario: &'static str,
    tenant: &'static str,
    weight: u32,
    offered: f64,
    throughput: f64,
    share: f64,
    p99: f64,
    p99_alone: Option<f64>,
    lost: u64,
}

/// Runs the workload and prints a table (or CSV).
pub fn run(args: &LiveArgs) -> Result<(), String> {
    let size = args.size.unwrap_or(16 << 10);
    let nodes = args.nodes.unwrap_or(2).max(1);
    let service = Service::builder()
        .aes_cluster((0..nodes).map(|_| NodeSpec::new()))
        .build()
        .map_err(|e| e.to_string())?;
    let tenant = |name: &str, weight: u32| {
        service
            .add_tenant(TenantSpec::new(name).weight(weight))
            .map_err(|e| e.to_string())
    };
    let (quiet_id, noisy_id) = (tenant("quiet", 1)?, tenant("noisy", 1)?);
    let (light_id, heavy_id) = (tenant("light", 1)?, tenant("heavy", 3)?);
    let quiet = Traffic::new(&service, quiet_id, size, 1)?;
    let noisy = Traffic::new(&service, noisy_id, size, 2)?;
    let light = Traffic::new(&service, light_id, size, 3)?;
    let heavy = Traffic::new(&service, heavy_id, size, 4)?;

    // The capacity: one tenant backlogged.
    let start = Instant::now();
    let cal = for_phase(|stop| backlogged(&service, &noisy, 1, start, stop));
    let capacity = mb_s(cal.done.len(), size, start.elapsed().as_secs_f64());
    // Isolation: the quiet tenant at a tenth of its share (half the capacity), alone and then
    // beside the noisy one.
    let quiet_rate = capacity / 2.0 / 10.0;
    let gap = Duration::from_secs_f64(size as f64 / (quiet_rate * 1e6));
    let alone = for_phase(|stop| paced(&service, &quiet, gap, stop));
    let start = Instant::now();
    let (with, flood) = for_phase(|stop| {
        thread::scope(|s| {
            let n = s.spawn(|| backlogged(&service, &noisy, 1, start, stop));
            let q = paced(&service, &quiet, gap, stop);
            (q, n.join().expect("noisy"))
        })
    });
    let secs = start.elapsed().as_secs_f64();
    let served = (with.done.len() + flood.done.len()) as f64;
    let mut rows = vec![
        Row {
            scenario: "isolation",
            tenant: "quiet",
            weight: 1,
            offered: quiet_rate,
            throughput: mb_s(with.done.len(), size, secs),
            share: with.done.len() as f64 / served,
            p99: with.p99_us(),
            p99_alone: Some(alone.p99_us()),
            lost: with.lost + alone.lost,
        },
        Row {
            scenario: "isolation",
            tenant: "noisy",
            weight: 1,
            offered: capacity / 2.0 * 10.0,
            throughput: mb_s(flood.done.len(), size, secs),
            share: flood.done.len() as f64 / served,
            p99: flood.p99_us(),
            p99_alone: None,
            lost: flood.lost + cal.lost,
        },
    ];

    // Shares: both backlogged, weights 1 and 3, with as many submitting threads each.
    let start = Instant::now();
    let (l, h) = for_phase(|stop| {
        thread::scope(|s| {
            let a = s.spawn(|| backlogged(&service, &light, 1, start, stop));
            let b = backlogged(&service, &heavy, 1, start, stop);
            (a.join().expect("light"), b)
        })
    });
    // While both were backlogged: until the first of them stopped completing.
    let end = |seen: &Seen| seen.done.iter().map(|d| d.0).max().unwrap_or_default();
    let until = end(&l).min(end(&h));
    let count = |seen: &Seen| seen.done.iter().filter(|d| d.0 <= until).count();
    let (nl, nh) = (count(&l), count(&h));
    let secs = until.as_secs_f64().max(1e-9);
    let per_second = per_second_shares(&l, &h, until);
    for (name, weight, seen, n) in [("light", 1, &l, nl), ("heavy", 3, &h, nh)] {
        rows.push(Row {
            scenario: "shares",
            tenant: name,
            weight,
            offered: capacity * 10.0,
            throughput: mb_s(n, size, secs),
            share: n as f64 / (nl + nh).max(1) as f64,
            p99: seen.p99_us(),
            p99_alone: None,
            lost: seen.lost,
        });
    }

    if args.csv {
        let mut csv = Csv::new(CSV_HEADER);
        for r in &rows {
            csv.row(&[
                r.scenario.to_string(),
                r.tenant.to_string(),
                r.weight.to_string(),
                f(r.offered, 1),
                f(r.throughput, 1),
                f(r.share, 4),
                f(r.p99, 1),
                r.p99_alone.map_or(String::new(), |p| f(p, 1)),
                r.lost.to_string(),
            ]);
        }
        print!("{}", csv.as_str());
        return Ok(());
    }
    println!(
        "tenants: {size}-byte AES-128-CBC jobs on {nodes} AES nodes; capacity {} MB/s \
         (one tenant backlogged); each phase {} s",
        f(capacity, 0),
        PHASE.as_secs()
    );
    let mut t = Table::new(&[
        "scenario",
        "tenant",
        "weight",
        "offered MB/s",
        "MB/s",
        "share",
        "p99 µs",
        "p99 alone µs",
        "lost",
    ]);
    for r in &rows {
        t.row(vec![
            r.scenario.to_string(),
            r.tenant.to_string(),
            r.weight.to_string(),
            f(r.offered, 0),
            f(r.throughput, 0),
            f(r.share, 3),
            f(r.p99, 0),
            r.p99_alone.map_or("-".into(), |p| f(p, 0)),
            r.lost.to_string(),
        ]);
    }
    print!("{}", t.render());
    let ratio = rows[0].p99 / rows[0].p99_alone.unwrap_or(f64::NAN);
    println!(
        "isolation: the quiet tenant's p99 beside the noisy one is {}x its p99 alone \
         (target <= 1.5)",
        f(ratio, 2)
    );
    if let (Some(lo), Some(hi)) = (
        per_second.iter().copied().reduce(f64::min),
        per_second.iter().copied().reduce(f64::max),
    ) {
        println!(
            "shares: the heavy tenant (weight 3) got {} of the bytes overall, {} to {} in each \
             whole second (target 0.675 to 0.825)",
            f(rows[3].share, 3),
            f(lo, 3),
            f(hi, 3)
        );
    }
    Ok(())
}

/// The heavy tenant's share of the bytes completed in each whole second up to `until`.
fn per_second_shares(light: &Seen, heavy: &Seen, until: Duration) -> Vec<f64> {
    let seconds = until.as_secs() as usize;
    let mut counts = vec![(0usize, 0usize); seconds];
    for (seen, heavy_side) in [(light, false), (heavy, true)] {
        for &(at, _) in &seen.done {
            if let Some(c) = counts.get_mut(at.as_secs() as usize) {
                if heavy_side {
                    c.1 += 1;
                } else {
                    c.0 += 1;
                }
            }
        }
    }
    counts
        .into_iter()
        .filter(|c| c.0 + c.1 > 0)
        .map(|(a, b)| b as f64 / (a + b) as f64)
        .collect()
}
