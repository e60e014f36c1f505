//! `live --workload tenants`: two tenants sharing one service (docs/ALGORITHM.md §15.7).
//! `isolation`: a quiet tenant at a tenth of its share, alone and beside a noisy one of equal
//! weight at ten times its share; its p99 beside against alone (target 1.5× at most). `shares`:
//! two backlogged tenants of weights 1 and 3; each one's share of the bytes served while both
//! were (target within 10% of 1:3, over the run and each second). A job's latency is the
//! service's own, from submission to its last packet's completion. Jobs are 16 KiB
//! AES-128-CBC encryptions (or `--size`) on AES nodes pinned to every core but the last, where
//! the clients' threads run (or `--nodes`), with the light path on; every output is checked
//! against the cipher, and `lost` counts jobs that failed or gave other bytes. `--slowdown`
//! slows the nodes (`NodeSpec::slowdown`): with jobs of a few hundred bytes the clients'
//! shared core, not the node, limits what the two backlogged tenants of `shares` are served,
//! and their shares then follow their clients (docs/RESULTS.md, Tenants, "Small calls").

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::{scope, sleep};
use std::time::{Duration, Instant};

use cryptodispatch::crypto::{AesKey, AesOp, Direction};
use cryptodispatch::{
    Job, JobHandle, JobOutput, KeyId, Mode, NodeSpec, Service, TenantId, TenantSpec,
};

use crate::live::{JOB_PATIENCE, LiveArgs, whole_blocks};
use crate::report::{f, print_rows};
use crate::support::{Text, cores, fits_in_memory, lower_priority, percentile, pin};

/// CSV columns of the tenants workload.
pub const CSV_HEADER: &str =
    "scenario,tenant,weight,offered_mb_s,throughput_mb_s,share,p99_latency_us,p99_alone_us,lost";
const IV: [u8; 16] = [9; 16];
/// How long each phase runs.
const PHASE: Duration = Duration::from_secs(3);
/// Bytes a backlogged tenant keeps in flight (256 jobs at least), to outlast its clients' waits.
const WINDOW: usize = 4 << 20;

/// Bytes of jobs each client of `shares` submits in one call ([`Service::submit_burst`]):
/// with jobs of 4 KiB, one `submit` per job cost the clients' core so much that the two
/// backlogged tenants' senders, each given an equal share of that core, sent alike, and the
/// tenant of weight 3 could not keep its backlog (docs/RESULTS.md, Tenants). The tenants of
/// `isolation` submit one job per call, as before.
const BURST_BYTES: usize = 256 << 10;

/// Jobs above this size reuse their checked outputs as buffers; smaller ones are allocated
/// afresh. The allocator maps a buffer this large or larger on its own, with a page fault per
/// page when it is written; smaller ones come from its heap, cheaply. (Reusing 16 KiB buffers
/// as well raised the quiet tenant's p99 beside the noisy one from 50–80 µs to 86–106 µs in
/// five paired runs, docs/RESULTS.md, Tenants; why was not found.)
const REUSE_ABOVE: usize = 128 << 10;

/// How much longer the `shares` phase runs than the others, for the start of its senders.
const SHARES_LEAD: Duration = Duration::from_secs(1);

/// The times of a phase's readings, and at each what every tenant had in flight.
type Readings = (Vec<Duration>, Vec<Vec<u64>>);

/// How far back [`Seen::bursts`] counts a slow job's own tenant's submissions.
const BURST_LOOKBACK: Duration = Duration::from_micros(100);

/// One tenant's traffic: a job to send again and again, and the output it must give.
struct Traffic {
    tenant: TenantId,
    key: KeyId,
    data: Vec<u8>,
    expected: Vec<u8>,
}

impl Traffic {
    fn new(service: &Service, name: &str, weight: u32, size: usize) -> Result<Self, String> {
        let tenant = service
            .add_tenant(TenantSpec::new(name).weight(weight))
            .text()?;
        let raw = [name.len() as u8 ^ weight as u8; 16];
        let key = service.add_aes_key(&raw).text()?;
        let data: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let expected = AesKey::new(&raw)
            .and_then(|k| k.one_shot(op, &IV, &data))
            .text()?;
        Ok(Traffic {
            tenant,
            key,
            data,
            expected,
        })
    }

    /// A job of the tenant's data, in `spare` (an output given back) if there is one: the
    /// buffer has room for the padding block, so the service never reallocates it and the
    /// output comes back in it, and a client reusing it pays no allocation or page faults,
    /// only the copy.
    fn job(&self, spare: Option<Vec<u8>>) -> Job {
        let mut data = spare.unwrap_or_else(|| Vec::with_capacity(self.data.len() + 16));
        data.clear();
        data.extend_from_slice(&self.data);
        Job::encrypt(self.key, Mode::Cbc, &IV, data).tenant(self.tenant)
    }
}

/// A backlogged tenant's share of the bytes served while all were: overall, its lowest and
/// highest whole second, and its weight's share.
struct SharesOf<'a> {
    name: &'a str,
    weight: u32,
    overall: f64,
    per_second: (f64, f64),
    target: f64,
    /// The share of readings in which it had at least half its window of jobs in flight.
    held: f64,
}

impl SharesOf<'_> {
    /// Whether every second's share was within 10% of the target.
    fn met(&self) -> bool {
        let (lo, hi) = self.per_second;
        lo >= self.target * 0.9 && hi <= self.target * 1.1
    }
}

impl std::fmt::Display for SharesOf<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (lo, hi) = self.per_second;
        write!(
            out,
            "{} (weight {}) {} ({} to {}, target {}, half its window in flight in {}% of readings)",
            self.name,
            self.weight,
            f(self.overall, 3),
            f(lo, 3),
            f(hi, 3),
            f(self.target, 3),
            f(self.held * 100.0, 0)
        )
    }
}

/// What the `shares` scenario counts: from the first reading in which every tenant had at
/// least half its window of jobs in flight (`first`, at `from`; the phase's start if none did)
/// to when the first tenant stopped completing (`until`), each tenant's jobs finished
/// (`served`) and its shares.
struct Counted<'a> {
    first: Option<usize>,
    from: Duration,
    until: Duration,
    served: Vec<usize>,
    shares: Vec<SharesOf<'a>>,
}

impl<'a> Counted<'a> {
    /// From each tenant's name and weight, what it saw, and the readings of what each had in
    /// flight (their times, and per tenant the counts); `window` is a tenant's window in jobs.
    fn new(
        backlogged: &'a [(String, u32)],
        seen: &[Seen],
        (times, held): (&[Duration], &[Vec<u64>]),
        window: u64,
    ) -> Self {
        let first = (0..times.len()).find(|&k| held.iter().all(|h| 2 * h[k] >= window));
        let from = first.map_or(Duration::ZERO, |k| times[k]);
        let last = |s: &Seen| s.done.iter().map(|d| d.0).max().unwrap_or_default();
        let until = seen.iter().map(last).min().unwrap_or_default().max(from);
        let served: Vec<usize> = seen.iter().map(|s| s.by(until) - s.by(from)).collect();
        let all_served: usize = served.iter().sum();
        let total_weight: u32 = backlogged.iter().map(|b| b.1).sum();
        // A tenant's lowest and highest share of the whole seconds from `from`.
        let per_second = |i: usize| -> (f64, f64) {
            (0..(until - from).as_secs())
                .map(|s| {
                    let at = |s: u64| from + Duration::from_secs(s);
                    let in_second = |x: &Seen| x.by(at(s + 1)) - x.by(at(s));
                    let of_all: usize = seen.iter().map(in_second).sum();
                    in_second(&seen[i]) as f64 / of_all.max(1) as f64
                })
                .fold((1.0f64, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)))
        };
        let shares = (backlogged.iter().enumerate())
            .map(|(i, (name, w))| {
                // Readings, from `from` on, with at least half its window of jobs in flight.
                let counted = &held[i][first.unwrap_or(0)..];
                let full = counted.iter().filter(|&&n| 2 * n >= window).count();
                SharesOf {
                    name,
                    weight: *w,
                    overall: served[i] as f64 / all_served.max(1) as f64,
                    per_second: per_second(i),
                    target: f64::from(*w) / f64::from(total_weight),
                    held: full as f64 / counted.len().max(1) as f64,
                }
            })
            .collect();
        Counted {
            first,
            from,
            until,
            served,
            shares,
        }
    }
}

/// What one tenant saw: per job, when it finished (into the phase) and its latency; jobs lost.
#[derive(Default)]
struct Seen {
    done: Vec<(Duration, Duration)>,
    /// How long each `submit` call took, for a sender of one job per call.
    calls: Vec<Duration>,
    lost: u64,
}

impl Seen {
    /// A job submitted `at` finished at `at` plus its latency, whenever this thread sees it.
    /// Its output, checked, goes back to the sender to carry a next job (if it has room).
    fn check(
        &mut self,
        t: &Traffic,
        (at, mut h): (Duration, JobHandle),
        back: &SyncSender<Vec<u8>>,
    ) {
        let out = h.wait_timeout(JOB_PATIENCE);
        match (out, h.latency()) {
            (Some(Ok(JobOutput::Data(d))), Some(l)) if d == t.expected => {
                self.done.push((at + l, l));
                let _ = back.try_send(d);
            }
            _ => self.lost += 1,
        }
    }

    fn p99_us(&self) -> f64 {
        self.percentile_us(0.99)
    }

    fn percentile_us(&self, p: f64) -> f64 {
        self.latency(p).as_secs_f64() * 1e6
    }

    /// The `p`th percentile of its jobs' latencies.
    fn latency(&self, p: f64) -> Duration {
        let mut l: Vec<Duration> = self.done.iter().map(|d| d.1).collect();
        l.sort_unstable();
        percentile(&l, p)
    }

    /// How the tenant's sender kept its schedule, and what its slowest jobs had in front of
    /// them: the median gap between two of its submissions, and, over its jobs at or above
    /// its p99, the median count of its own jobs submitted in the [`BURST_LOOKBACK`] before
    /// each (microseconds, jobs). A sender that fell behind on a busy clients' core and then
    /// caught up shows short gaps and dozens of its own jobs ahead of its slowest.
    fn bursts(&self) -> (f64, usize) {
        let mut sent: Vec<Duration> = self.done.iter().map(|d| d.0.saturating_sub(d.1)).collect();
        sent.sort_unstable();
        let mut gaps: Vec<Duration> = sent.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_unstable();
        let p99 = self.latency(0.99);
        let mut ahead: Vec<usize> = (self.done.iter())
            .filter(|d| d.1 >= p99)
            .map(|d| {
                let at = d.0.saturating_sub(d.1);
                let from = sent.partition_point(|&t| t < at.saturating_sub(BURST_LOOKBACK));
                sent.partition_point(|&t| t < at) - from
            })
            .collect();
        ahead.sort_unstable();
        (
            percentile(&gaps, 0.5).as_secs_f64() * 1e6,
            percentile(&ahead, 0.5),
        )
    }

    /// The `p`th percentile of its `submit` calls' durations, in microseconds.
    fn call_us(&self, p: f64) -> f64 {
        let mut c = self.calls.clone();
        c.sort_unstable();
        percentile(&c, p).as_secs_f64() * 1e6
    }

    /// Jobs finished by `until`.
    fn by(&self, until: Duration) -> usize {
        self.done.iter().filter(|d| d.0 <= until).count()
    }
}

/// The jobs of `size` bytes a backlogged tenant keeps in flight: [`WINDOW`] bytes of them, and
/// 256 at least.
fn window_jobs(size: usize) -> usize {
    (WINDOW / size.max(1)).max(256)
}

/// Sends `t`'s jobs until `stop`: one every `gap`, or keeping [`WINDOW`] bytes in flight;
/// with `bursts`, [`BURST_BYTES`] of them per call rather than one.
fn send(
    service: &Service,
    t: &Traffic,
    gap: Option<Duration>,
    bursts: bool,
    start: Instant,
    stop: &AtomicBool,
) -> Seen {
    let in_flight = window_jobs(t.data.len());
    // Outputs given back, to reuse, for jobs above [`REUSE_ABOVE`]: at 1 MiB a fresh buffer
    // per job (its allocation and page faults) made the clients' core the bottleneck, and the
    // tenant sending more could not keep its backlog. (A channel of no room hands nothing
    // back: the waiter never waits to give, the sender never to take.)
    let (back, spares) = sync_channel::<Vec<u8>>(if t.data.len() > REUSE_ABOVE {
        in_flight
    } else {
        0
    });
    let waiter = move |rx: Receiver<(Duration, JobHandle)>| {
        let mut seen = Seen::default();
        rx.into_iter().for_each(|h| seen.check(t, h, &back));
        seen
    };
    let (mut seen, refused) = with_waiter(in_flight, waiter, |tx| {
        let mut next = Instant::now();
        let mut refused = 0;
        let mut calls = Vec::new();
        let burst = if bursts {
            (BURST_BYTES / t.data.len().max(1)).clamp(1, in_flight / 8)
        } else {
            1
        };
        while !stop.load(Relaxed) {
            if let Some(gap) = gap {
                sleep(next.saturating_duration_since(Instant::now()));
                next += gap;
            }
            let at = start.elapsed();
            if burst == 1 {
                // One by one through `submit`, the path a small job of a quiet tenant takes
                // to the light queue (`submit_burst` sends its jobs through the core).
                let job = t.job(spares.try_recv().ok());
                let called = Instant::now();
                let r = service.submit(job);
                calls.push(called.elapsed());
                match r {
                    Ok(h) => tx.send((at, h)).expect("waiter"),
                    Err(_) => refused += 1,
                }
                continue;
            }
            let jobs: Vec<Job> = (0..burst).map(|_| t.job(spares.try_recv().ok())).collect();
            match service.submit_burst(jobs) {
                Ok(handles) => handles
                    .into_iter()
                    .for_each(|h| tx.send((at, h)).expect("waiter")),
                Err(_) => refused += burst as u64,
            }
        }
        (refused, calls)
    });
    let (refused, calls) = refused;
    seen.calls = calls;
    seen.lost += refused;
    seen
}

/// Runs `send` on the calling thread, beside a waiter thread that `check`s the handles it
/// sends (at most `bound` unresolved); both on the clients' core ([`client_core`]). The
/// channel closes when `send` returns, which ends the waiter. Returns what each returned.
pub(crate) fn with_waiter<H: Send, W: Send, R>(
    bound: usize,
    check: impl FnOnce(Receiver<H>) -> W + Send,
    send: impl FnOnce(SyncSender<H>) -> R,
) -> (W, R) {
    let (tx, rx) = sync_channel(bound);
    client_core();
    scope(|s| {
        let waiter = s.spawn(move || {
            client_core();
            check(rx)
        });
        let sent = send(tx);
        (waiter.join().expect("waiter"), sent)
    })
}

/// Pins a client thread to the cores the nodes leave free, if any (the nodes are pinned to
/// the first ones), so that the clients' threads do not take the nodes' cores (`tenant-mix`
/// places its clients the same way).
pub(crate) fn client_core() {
    let (nodes, cores) = (NODES.load(Relaxed), cores());
    if nodes < cores {
        pin(cores - 1);
    }
}

/// The AES nodes of the running workload's service, which [`client_core`] keeps clear of.
pub(crate) static NODES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs `f` for a phase, telling it when the phase started and when to stop.
fn phase<T: Send>(f: impl FnOnce(Instant, &AtomicBool) -> T + Send) -> T {
    let start = Instant::now();
    timed(PHASE, |stop| f(start, stop))
}

/// Runs `f` on a thread of its own for `how_long`, telling it when to stop.
pub(crate) fn timed<T: Send>(how_long: Duration, f: impl FnOnce(&AtomicBool) -> T + Send) -> T {
    let stop = AtomicBool::new(false);
    scope(|s| {
        let h = s.spawn(|| f(&stop));
        sleep(how_long);
        stop.store(true, Relaxed);
        h.join().expect("phase")
    })
}

/// Runs the workload and prints a table (or CSV).
pub fn run(args: &LiveArgs) -> Result<(), String> {
    let size = whole_blocks("--size", args.size.unwrap_or(16 << 10), "tenants")?;
    let backlogged = args.weights.named();
    // Each tenant's input and expected output, and the jobs in flight beside them.
    fits_in_memory(4 * (2 + backlogged.len()), size)?;
    // The clients need a core of their own to offer their load: by default the nodes take
    // every core but one.
    let nodes = args.nodes.unwrap_or(cores().saturating_sub(1)).max(1);
    NODES.store(nodes, Relaxed);
    let mut builder = Service::builder()
        .aes_cluster((0..nodes).map(|i| NodeSpec::pinned(i % cores()).slowdown(args.slowdown)))
        .light_path(true)
        .inline_limit(args.inline_limit);
    if let Some(implementation) = args.implementation {
        builder = builder.aes_implementation(implementation);
    }
    let service = builder.build().text()?;
    let quiet = Traffic::new(&service, "quiet", 1, size)?;
    let noisy = Traffic::new(&service, "noisy", 1, size)?;
    let shared = (backlogged.iter())
        .map(|(name, weight)| Traffic::new(&service, name, *weight, size))
        .collect::<Result<Vec<_>, _>>()?;
    let mb_s = |jobs: usize, secs: f64| jobs as f64 * size as f64 / secs / 1e6;
    // `b`'s sender, with `nice`, at that nice value (and the waiter it starts after).
    let pair = |a: &Traffic, b: &Traffic, gap, bursts, nice: Option<i32>| {
        phase(|start, stop| {
            scope(|s| {
                let x = s.spawn(|| send(&service, a, gap, bursts, start, stop));
                let y = s.spawn(|| {
                    nice.map_or(Ok(()), lower_priority)?;
                    Ok::<_, String>(send(&service, b, None, bursts, start, stop))
                });
                let y = y.join().expect("sender");
                (x.join().expect("sender"), y)
            })
        })
    };

    // The capacity, with one tenant backlogged; the quiet tenant sends a tenth of its share
    // (half the capacity), alone and beside the noisy one.
    let cal = phase(|start, stop| send(&service, &noisy, None, false, start, stop));
    if cal.done.is_empty() {
        return Err(format!(
            "tenants: no {size}-byte job completed in the {} s the capacity is measured over: \
             use a smaller --size",
            PHASE.as_secs()
        ));
    }
    let capacity = mb_s(cal.done.len(), PHASE.as_secs_f64());
    let quiet_rate = capacity / 20.0;
    let gap = Some(Duration::from_secs_f64(size as f64 / (quiet_rate * 1e6)));
    let alone = phase(|start, stop| send(&service, &quiet, gap, false, start, stop));
    let (q, n) = pair(&quiet, &noisy, gap, false, args.noisy_nice);
    let n = n?;
    // Shares: while all were backlogged, until the first stopped completing. Their clients
    // submit in bursts, so that with small jobs the client's core does not decide the shares.
    // Every 10 ms, how many jobs each had in flight in the service: a tenant whose clients
    // (on one core with the others') fall behind has fewer, and is served less than its
    // weight for want of work, not of turns.
    // The phase runs a second longer than the others: the shares are counted from the first
    // reading in which every tenant had half its window in flight (the senders start one after
    // another, and one not yet backlogged leaves its share to the others), whole seconds.
    let start = Instant::now();
    let (seen, (times, held)): (Vec<Seen>, Readings) = timed(PHASE + SHARES_LEAD, |stop| {
        scope(|s| {
            let senders: Vec<_> = (shared.iter())
                .map(|t| s.spawn(|| send(&service, t, None, true, start, stop)))
                .collect();
            let readings = s.spawn(|| {
                let (mut times, mut held) = (Vec::new(), vec![Vec::new(); shared.len()]);
                while !stop.load(Relaxed) {
                    sleep(Duration::from_millis(10));
                    let tenants = service.metrics().tenants;
                    times.push(start.elapsed());
                    for (t, h) in shared.iter().zip(&mut held) {
                        let m = tenants.iter().find(|m| m.tenant == t.tenant);
                        h.push(m.map_or(0, |m| m.jobs_in_flight));
                    }
                }
                (times, held)
            });
            let seen = (senders.into_iter())
                .map(|h| h.join().expect("sender"))
                .collect();
            (seen, readings.join().expect("readings"))
        })
    });
    let counted = Counted::new(
        &backlogged,
        &seen,
        (&times, &held),
        window_jobs(size) as u64,
    );
    let (from, until, served) = (counted.from, counted.until, &counted.served);
    let all_served: usize = served.iter().sum();
    let secs = (until - from).as_secs_f64().max(1e-9);
    let all = PHASE.as_secs_f64();
    let (qn, nn) = (q.done.len(), n.done.len());
    type Who<'a> = (&'a str, &'a str, u32, f64);
    // A tenant's row: who it is and what it offered; its jobs, of both tenants' in `secs`; what
    // it saw, and what it saw alone.
    let row = |(scenario, tenant, w, offered): Who,
               (n, of, secs): (usize, usize, f64),
               seen: &Seen,
               alone: Option<&Seen>| {
        let lost = seen.lost + alone.map_or(0, |a| a.lost);
        vec![
            scenario.to_owned(),
            tenant.to_owned(),
            w.to_string(),
            f(offered, 1),
            f(mb_s(n, secs), 1),
            f(n as f64 / of.max(1) as f64, 4),
            f(seen.p99_us(), 1),
            alone.map_or(String::new(), |a| f(a.p99_us(), 1)),
            lost.to_string(),
        ]
    };
    let mut rows = vec![
        row(
            ("isolation", "quiet", 1, quiet_rate),
            (qn, qn + nn, all),
            &q,
            Some(&alone),
        ),
        row(
            ("isolation", "noisy", 1, capacity * 5.0),
            (nn, qn + nn, all),
            &n,
            None,
        ),
    ];
    for (((name, w), s), &n) in backlogged.iter().zip(&seen).zip(served) {
        rows.push(row(
            ("shares", name, *w, capacity * 10.0),
            (n, all_served, secs),
            s,
            None,
        ));
    }
    let title = format!(
        "tenants: {size}-byte AES-128-CBC jobs on {nodes} AES nodes (light path on{}), {} MB/s \
         with one tenant backlogged; phases of {} s",
        if args.slowdown == 1.0 {
            String::new()
        } else {
            format!(", slowed {}x", args.slowdown)
        },
        f(capacity, 0),
        PHASE.as_secs()
    );
    print_rows(args.csv, CSV_HEADER, &rows, &title, CSV_HEADER, &[]);
    if args.csv {
        return Ok(());
    }
    // Each backlogged tenant's share of each whole second while all were, its lowest and
    // highest, against its weight's share within 10%.
    let shares = &counted.shares;
    // The isolation line names the heaviest (the last of the heaviest) tenant, as it did when
    // the shares were always 1:3.
    let heaviest = (shares.iter())
        .max_by_key(|s| s.weight)
        .expect("two tenants at least");
    let (lo, hi) = heaviest.per_second;
    // The quiet tenant's jobs, alone and beside the noisy one, and how many took the light
    // path (or, too long for it, went ahead in the core on its saved share).
    let metrics = service.metrics();
    let quiet_jobs = metrics.tenants.iter().find(|t| t.tenant == quiet.tenant);
    let (admitted, light, granted) = quiet_jobs.map_or((0, 0, 0), |t| {
        (t.jobs_admitted, t.jobs_light, t.jobs_granted)
    });
    // Its slowest job beside the noisy tenant, and when it was sent: with long jobs the p99
    // of a few dozen is that job, and one sent as the noisy tenant starts waits behind what
    // that tenant's saved credit sends ahead (docs/RESULTS.md, Tenants).
    let (slowest, sent) = q.done.iter().max_by_key(|d| d.1).map_or((0.0, 0.0), |d| {
        (
            d.1.as_secs_f64() * 1e3,
            d.0.saturating_sub(d.1).as_secs_f64() * 1e3,
        )
    });
    // Jobs run by their submitters while the node was stalled, or as their tenant was behind
    // on its own light jobs (§15.7), in every phase.
    let (stalled, behind) = (metrics.jobs_inline_stalled, metrics.jobs_inline_behind);
    let ((gap_beside, ahead_beside), (gap_alone, ahead_alone)) = (q.bursts(), alone.bursts());
    let scheduled = gap.map_or(0.0, |g| g.as_secs_f64() * 1e6);
    println!(
        "isolation: quiet p99 {}x alone (target <= 1.5), {light} of its {admitted} jobs on the \
         light path, {granted} ahead in the core, its slowest beside {} ms (sent {} ms into \
         the phase), its p99.9 beside {} us (alone {} us); shares: {} (weight {}) {} overall, \
         {} to {} per second (target {} to {}); {stalled} jobs run inline beside a \
         stalled node and {behind} as their tenant was behind (all phases)",
        f(q.p99_us() / alone.p99_us(), 2),
        f(slowest, 2),
        f(sent, 1),
        f(q.percentile_us(0.999), 0),
        f(alone.percentile_us(0.999), 0),
        heaviest.name,
        heaviest.weight,
        f(heaviest.overall, 3),
        f(lo, 3),
        f(hi, 3),
        f(heaviest.target * 0.9, 3),
        f(heaviest.target * 1.1, 3),
    );
    let every: Vec<String> = shares.iter().map(SharesOf::to_string).collect();
    let first = counted.first;
    let met = shares.iter().all(SharesOf::met);
    let counted_from = first.map_or_else(
        || "the start (never all backlogged at once)".to_owned(),
        |_| {
            format!(
                "{} ms, when all first had half their window in flight",
                f(from.as_secs_f64() * 1e3, 0)
            )
        },
    );
    println!(
        "shares of every tenant from {counted_from}, overall and its lowest to highest second \
         (target: its weight's share within 10%; a tenant seldom with half its window in flight \
         was not kept backlogged by its clients, which share one core: try --slowdown): {}; {}",
        every.join("; "),
        if met {
            "met in every second"
        } else {
            "NOT met in every second"
        }
    );
    let cbc = (metrics.aes_implementations.iter())
        .find(|c| c.label() == "cbc-encrypt")
        .map_or_else(|| "not measured".to_owned(), |c| c.to_string());
    println!("implementation: {cbc}");
    // How the quiet tenant's sender kept to its schedule, on the clients' shared core: a
    // sender that fell behind sends its jobs back to back, and its slowest wait for its own.
    println!(
        "quiet sender: {} us between jobs scheduled; median gap {} us beside ({} us alone); \
         its p99 jobs had a median of {ahead_beside} of its own jobs sent in the {} us before \
         each ({ahead_alone} alone); its submit calls' p99.9 {} us beside ({} us alone)",
        f(scheduled, 1),
        f(gap_beside, 1),
        f(gap_alone, 1),
        BURST_LOOKBACK.as_micros(),
        f(q.call_us(0.999), 1),
        f(alone.call_us(0.999), 1),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::Weights;

    #[test]
    fn a_slowdown_below_one_is_refused_before_anything_runs() {
        let args = |extra: &[&str]| {
            LiveArgs::try_parse_from(["live", "--workload", "tenants"].iter().chain(extra))
                .expect("parses")
        };
        assert_eq!(args(&[]).slowdown, 1.0);
        assert_eq!(args(&["--slowdown", "4"]).slowdown, 4.0);
        let e = run(&args(&["--slowdown", "0.5"])).expect_err("a node cannot be faster");
        assert!(e.contains("slowdown 0.5"), "{e}");
    }

    #[test]
    fn weights_are_two_to_eight_whole_numbers_from_1_to_1000() {
        let w = |s: &str| s.parse::<Weights>();
        assert_eq!(w("1:3"), Ok(Weights(vec![1, 3])));
        assert_eq!(w("2:7:1000"), Ok(Weights(vec![2, 7, 1000])));
        assert_eq!(
            w("1:3").unwrap().named(),
            [("light".to_owned(), 1), ("heavy".to_owned(), 3)]
        );
        assert_eq!(
            w("3:1").unwrap().named(),
            [("t1".to_owned(), 3), ("t2".to_owned(), 1)]
        );
        for bad in ["3", "0:1", "1:1001", "1:x", "1::2", "1:1:1:1:1:1:1:1:1", ""] {
            let e = w(bad).expect_err(bad);
            assert!(e.contains("weight"), "{bad}: {e}");
        }
        // As the command line takes it.
        let args =
            LiveArgs::try_parse_from(["live", "--workload", "tenants", "--weights", "1:2:5"])
                .expect("parses");
        assert_eq!(args.weights, Weights(vec![1, 2, 5]));
        assert!(
            LiveArgs::try_parse_from(["live", "--workload", "tenants", "--weights", "0:1"])
                .is_err()
        );
    }

    #[test]
    fn shares_count_from_when_every_tenant_is_backlogged() {
        // Weights 1:3. The first tenant's sender starts first: 10 jobs a millisecond for the
        // first 30 ms, alone; from then on, 1 a millisecond against the other's 3, to 3030 ms.
        let ms = Duration::from_millis;
        let at = |t: u64| (ms(t), Duration::ZERO);
        let mut first = Seen::default();
        first
            .done
            .extend((0..30).flat_map(|t| (0..10).map(move |_| at(t))));
        first.done.extend((30..=3030).map(at));
        let mut second = Seen::default();
        second
            .done
            .extend((30..=3030).flat_map(|t| (0..3).map(move |_| at(t))));
        // Readings every 10 ms: the second tenant has half its window (256) in flight from the
        // third on; the first, then and after, but for one reading in four.
        let times: Vec<Duration> = (1..=303).map(|k| ms(10 * k)).collect();
        let held = vec![
            (0..303)
                .map(|k| if k % 4 == 3 { 100 } else { 256 })
                .collect(),
            (0..303).map(|k| if k < 2 { 40 } else { 200 }).collect(),
        ];
        let names = [("a".to_owned(), 1), ("b".to_owned(), 3)];
        let c = Counted::new(&names, &[first, second], (&times, &held), 256);
        assert_eq!((c.first, c.from, c.until), (Some(2), ms(30), ms(3030)));
        assert_eq!(c.served, [3000, 9000]);
        // Three whole seconds from 30 ms, each exactly 1:3; counted from the start, the first
        // second would give the first tenant (300 + 970) / (1270 + 2910) = 0.30.
        let (a, b) = (&c.shares[0], &c.shares[1]);
        assert_eq!((a.per_second, b.per_second), ((0.25, 0.25), (0.75, 0.75)));
        assert_eq!((a.overall, a.target), (0.25, 0.25));
        assert!(a.met() && b.met());
        // Of the 301 readings counted, the first tenant had half its window in 226.
        assert_eq!(b.held, 1.0);
        assert!((a.held - 226.0 / 301.0).abs() < 1e-12, "{}", a.held);
        // A tenant never backlogged: counted from the start, and said so by `first`.
        let starved = vec![vec![0; 303], vec![300; 303]];
        let again = [Seen::default(), Seen::default()];
        let c = Counted::new(&names, &again, (&times, &starved), 256);
        assert_eq!((c.first, c.from), (None, Duration::ZERO));
    }

    /// A job sent `at_us` into the phase that took `lat_us`, as [`Seen::check`] records it.
    fn job(at_us: u64, lat_us: u64) -> (Duration, Duration) {
        let (at, l) = (Duration::from_micros(at_us), Duration::from_micros(lat_us));
        (at + l, l)
    }

    #[test]
    fn bursts_show_a_sender_that_fell_behind_and_what_its_slowest_jobs_had_before_them() {
        // 200 jobs on schedule, one every 50 µs, each taking 10 µs; then the sender, held
        // off, sends 20 at once, 1 µs apart, the last of which wait longest.
        let mut seen = Seen::default();
        seen.done.extend((0..200).map(|i| job(i * 50, 10)));
        seen.done
            .extend((0..20).map(|i| job(20_000 + i, 10 + 5 * i)));
        let (gap, ahead) = seen.bursts();
        assert_eq!(gap, 50.0, "most gaps are the schedule's");
        // The p99 of 220 jobs is the third slowest: the burst's last three, with 17, 18 and
        // 19 of its jobs sent in the 100 µs before them.
        assert_eq!(ahead, 18);

        let steady = Seen {
            done: (0..100).map(|i| job(i * 60, 10 + i % 7)).collect(),
            ..Seen::default()
        };
        assert_eq!(steady.bursts(), (60.0, 1));
        assert_eq!(Seen::default().bursts(), (0.0, 0));
    }
}
