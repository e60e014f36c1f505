//! The `tenants` setup: two daemons behind HAProxy, shared by tenants that call with tokens
//! of their own (the tokens file names each token's tenant and weight).
//!
//! HAProxy sends each call to the daemon with the fewest calls open (`balance leastconn`, as
//! `deploy/haproxy.cfg`; `--balance` chooses another). Under round robin, which deals calls
//! in turn whatever their tenant, a backlogged tenant's calls drift between the daemons (at
//! times all of them at one), and a daemon with none of a tenant's calls waiting gives its
//! share to the others: weight 1's share of a second was then up to 21% off. Least
//! connections sends a call where one just ended, mostly where the tenant's own last call
//! ended; counted over all tenants' calls together, each tenant's share of a daemon's calls
//! still wanders, and with small calls one daemon came to hold almost none of a tenant's
//! within a few seconds. So each token's calls go to a backend of their own (HAProxy's tenant
//! groups, `TENANT_GROUPS`), where least connections counts that tenant's calls alone.
//!
//! Three runs on the same daemons, each `--tenant-secs` long:
//! - `shares`: tenants `w1` (weight 1) and `w3` (weight 3) both backlogged, each keeping
//!   `--tenant-backlog` calls of `--job-bytes` in flight per daemon (by default 1 MiB of
//!   them, at least 16 calls; `--w1-backlog` gives `w1` a window of its own). The bytes each
//!   is served
//!   are counted per second (each whole second after the first, the ramp-up) where they are
//!   served: both daemons' `cryptodispatch_tenant_bytes_served_total`, which counts each
//!   packet as it finishes, read every 100 ms. The target is each tenant's share of every
//!   second within 10% of its weight's (0.25 and 0.75). The client's count, each call's bytes
//!   in the second the call ended, is printed beside it: with calls that take about a second
//!   (256 KiB of weight 1), a few calls more or fewer ending in a second move its share by
//!   10% while the bytes served stay even. The calls' total over the run (after its first
//!   half second) is the daemons' capacity C for the next runs. With the bytes served, each
//!   tenant's jobs in flight are read at every daemon; the report gives the fraction of the
//!   counted seconds' readings in which each had jobs at every daemon, and says, below 90%,
//!   that the calls' path rather than the daemons' nodes held a tenant back (small calls on
//!   a machine whose cores also run HAProxy and this client; `--min-call-ms`).
//! - `alone`: the quiet tenant's load alone: calls of one packet (16 KiB) sent open loop at
//!   `--quiet-load` of its fair share (C/2), evenly spaced (or `--quiet-burst` calls together
//!   at evenly spaced moments, the same mean rate); their p99 latency. They run under a
//!   tenant of their own (`solo`, the same weight), so that the daemons' per-tenant latencies
//!   of this run and the next stay apart; both are printed beside the client's.
//! - `isolation`: `quiet` as in `alone`, beside the tenant `noisy` (equal weight), which offers
//!   ten times its fair share (5C) open loop in calls of `--job-bytes`, with at most
//!   `--noisy-open` of them open at once (a call due while that many are open is dropped by
//!   the client, not sent: a client's own concurrency limit). The noisy tenant's calls that
//!   wait longer than the daemons' `--queue-wait-ms` (1000 here) are refused with
//!   `RESOURCE_EXHAUSTED`. Target: the quiet tenant's p99 at most 1.5 times its p99 alone.
//!
//! Every output is checked against the library's one-shot result. A call is lost when it ends
//! with anything but its right output or `RESOURCE_EXHAUSTED` (refused, with a retry hint);
//! the target is none.
//!
//! The CSV (`scaleout_tenants.csv`, or standard output with `--csv`) has the header
//! `scenario,tenant,weight,offered_mb_s,throughput_mb_s,share,p99_latency_us,p99_alone_us,lost`
//! and a row per tenant of `isolation` and `shares`; `share` is the tenant's fraction of the
//! bytes served in the run, `p99_alone_us` the quiet tenant's p99 in `alone`. MB are 10^6
//! bytes.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tonic::Code;

use crate::remote::client::Client;
use crate::remote::haproxy::{Balance, Haproxy};
use crate::report::{Csv, Table, f, write_file};
use crate::scaleout::{DaemonProcess, Jobs, ScaleoutArgs, behind_haproxy, connect, start_daemon};

/// The CSV header, the same as the library benchmark's `live --workload tenants`.
pub const CSV_HEADER: &str =
    "scenario,tenant,weight,offered_mb_s,throughput_mb_s,share,p99_latency_us,p99_alone_us,lost";

/// The tenants' tokens: name, weight, token.
const TENANTS: [(&str, u32, &str); 5] = [
    ("w1", 1, "scaleout-tenant-w1-token-0123456789"),
    ("w3", 3, "scaleout-tenant-w3-token-0123456789"),
    ("quiet", 1, "scaleout-tenant-quiet-token-012345"),
    ("noisy", 1, "scaleout-tenant-noisy-token-012345"),
    // The quiet tenant's load alone runs under a tenant of its own, so that the daemons'
    // latency of each run stays apart in their metrics.
    ("solo", 1, "scaleout-tenant-solo-token-0123456"),
];
/// The quiet tenant's calls: one packet.
const QUIET_BYTES: usize = 16 * 1024;
/// HAProxy's tenant groups (`remote::haproxy`, "Tenant groups"): each token's calls balanced
/// over the daemons apart from the others'. The five tokens above fall in five groups of
/// eight (by the CRC-32 of `Bearer <token>`: w1 4, w3 7, quiet 3, noisy 1, solo 0).
const TENANT_GROUPS: u32 = 8;
/// How long the daemons let a call wait for admission.
const QUEUE_WAIT_MS: u64 = 1000;
/// The daemons.
const DAEMONS: usize = 2;

/// One tenant's calls in a run.
#[derive(Debug, Default)]
struct Tally {
    /// (when it ended since the run's start, bytes) of every call served right.
    served: Vec<(Duration, u64)>,
    latencies: Vec<Duration>,
    /// Bytes of the calls sent.
    sent_bytes: u64,
    /// Calls refused with `RESOURCE_EXHAUSTED`.
    refused: u64,
    /// Calls due but not sent (the client's limit of open calls).
    dropped: u64,
    /// Calls that ended otherwise: another error, or a wrong output.
    lost: u64,
    /// The first loss, as a message.
    first_loss: Option<String>,
}

type Shared = Arc<Mutex<Tally>>;

/// What a tenant did in a run, summed.
#[derive(Debug, Clone)]
struct TenantResult {
    tenant: &'static str,
    weight: u32,
    offered_mb_s: f64,
    throughput_mb_s: f64,
    share: f64,
    p99: Option<Duration>,
    refused: u64,
    dropped: u64,
    lost: u64,
    first_loss: Option<String>,
}

/// The `tenants` setup's results.
pub struct Outcome {
    /// How HAProxy picked a daemon for each call.
    balance: Balance,
    capacity_mb_s: f64,
    shares: Vec<TenantResult>,
    /// Per second of `shares`: the `w1` tenant's and the `w3` tenant's share of the bytes of
    /// the calls that ended in it, at the client.
    seconds: Vec<(f64, f64)>,
    /// The same, of the bytes served in it (counted by the daemons as each packet finishes).
    served: Vec<(f64, f64)>,
    /// Of the daemons' readings in the counted seconds, the fraction in which `w1`, and `w3`,
    /// had jobs in flight at every daemon.
    held: Option<(f64, f64)>,
    alone: TenantResult,
    isolation: Vec<TenantResult>,
    quiet_rate: f64,
    noisy_rate: f64,
    /// The daemons' own p99 of the quiet tenant's jobs (submission to output), beside the
    /// noisy one and alone: the larger of the daemons' p99s.
    daemon_p99: (Option<Duration>, Option<Duration>),
    /// Per daemon, of the quiet tenant's jobs beside the noisy one: (by the light path,
    /// admitted); empty when a daemon did not answer.
    quiet_light: Vec<(u64, u64)>,
    /// Per tenant, summed over the daemons that answered, where its jobs ran.
    paths: Vec<Paths>,
}

/// Where one tenant's jobs ran, summed over the daemons that answered (all phases).
#[derive(Debug)]
struct Paths {
    tenant: &'static str,
    /// Run on a daemon's calling thread beside a stalled node.
    stalled: u64,
    /// Run on a daemon's calling thread as the tenant was behind on its own light jobs.
    behind: u64,
    /// By the light path.
    light: u64,
    /// Admitted.
    admitted: u64,
}

/// A daemon's metrics page.
fn scrape(metrics: std::net::SocketAddr) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&metrics, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// The value of `series` (name and labels) on a metrics page.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
}

/// The p99 latency a daemon's metrics give for `tenant`'s jobs, if any.
fn daemon_p99(metrics: std::net::SocketAddr, tenant: &str) -> Option<Duration> {
    let series =
        format!("cryptodispatch_tenant_latency_seconds{{tenant=\"{tenant}\",quantile=\"0.99\"}}");
    sample(&scrape(metrics)?, &series).map(Duration::from_secs_f64)
}

/// Below this fraction of readings with jobs at every daemon, the report says that the calls'
/// path held a tenant back.
const HELD_ENOUGH: f64 = 0.9;

/// How often the daemons' served bytes are read during `shares`.
const SERVED_EVERY: Duration = Duration::from_millis(100);

/// One reading of the daemons' pages during `shares`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reading {
    /// Since the run's start.
    at: Duration,
    /// Bytes served to `w1` and to `w3`, summed over the daemons.
    served: (f64, f64),
    /// Whether `w1`, and `w3`, had jobs in flight at every daemon.
    held: (bool, bool),
}

/// Reads the bytes served to `w1` and `w3`, summed over the daemons, and whether each had jobs
/// in flight at every daemon, every [`SERVED_EVERY`] from `start` until `stop` (a reading
/// only when every daemon answered).
fn served_readings(
    metrics: Vec<std::net::SocketAddr>,
    start: Instant,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<Reading>> {
    std::thread::spawn(move || {
        let series =
            |t: &str| format!("cryptodispatch_tenant_bytes_served_total{{tenant=\"{t}\"}}");
        let jobs = |t: &str| format!("cryptodispatch_tenant_jobs_in_flight{{tenant=\"{t}\"}}");
        let (s1, s3) = (series("w1"), series("w3"));
        let (j1, j3) = (jobs("w1"), jobs("w3"));
        let mut readings = Vec::new();
        let mut next = start;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let at = start.elapsed();
            let pages: Option<Vec<String>> = metrics.iter().map(|m| scrape(*m)).collect();
            if let Some(pages) = pages {
                let sum = |series: &str| pages.iter().filter_map(|p| sample(p, series)).sum();
                let held = |series: &str| {
                    pages
                        .iter()
                        .all(|p| sample(p, series).is_some_and(|n| n > 0.0))
                };
                readings.push(Reading {
                    at,
                    served: (sum(&s1), sum(&s3)),
                    held: (held(&j1), held(&j3)),
                });
            }
            next += SERVED_EVERY;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        readings
    })
}

/// Per whole second `s` of `1..secs` (the first is the ramp-up), w1's and w3's shares of the
/// bytes served between the readings nearest to `s` and `s + 1` seconds.
fn served_seconds(readings: &[Reading], secs: u64) -> Vec<(f64, f64)> {
    let nearest = |s: u64| {
        let at = Duration::from_secs(s);
        readings
            .iter()
            .min_by_key(|r| r.at.abs_diff(at))
            .filter(|r| r.at.abs_diff(at) <= SERVED_EVERY)
    };
    (1..secs)
        .filter_map(|s| {
            let (from, to) = (nearest(s)?, nearest(s + 1)?);
            let (a, b) = (to.served.0 - from.served.0, to.served.1 - from.served.1);
            (a + b > 0.0).then(|| (a / (a + b), b / (a + b)))
        })
        .collect()
}

/// Of the readings within the counted seconds (from 1 s to `secs`), the fraction in which
/// `w1`, and `w3`, had jobs in flight at every daemon; `None` without readings there.
///
/// A tenant with no job at a daemon leaves that daemon's nodes to the other: its share there
/// is what reaches the daemon, not its weight's. With small calls on a machine whose cores
/// also run HAProxy and the client, the calls' path rather than the nodes can be what holds
/// a tenant back, and this says so.
fn held_fraction(readings: &[Reading], secs: u64) -> Option<(f64, f64)> {
    let counted: Vec<&Reading> = readings
        .iter()
        .filter(|r| r.at >= Duration::from_secs(1) && r.at <= Duration::from_secs(secs))
        .collect();
    if counted.is_empty() {
        return None;
    }
    let n = counted.len() as f64;
    let share = |f: fn(&Reading) -> bool| counted.iter().filter(|r| f(r)).count() as f64 / n;
    Some((share(|r| r.held.0), share(|r| r.held.1)))
}

fn weight(tenant: &str) -> u32 {
    TENANTS.iter().find(|t| t.0 == tenant).map_or(1, |t| t.1)
}

/// The tokens file of the setup, private to this user.
fn write_tokens(dir: &Path) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut text = String::from("# cryptodispatch-scaleout --setups tenants\n");
    for (name, weight, token) in TENANTS {
        text.push_str(&format!("{token} bench tenant={name} weight={weight}\n"));
    }
    let path = dir.join("tokens-tenants");
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    Ok(path)
}

fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// One call of `tenant`, counted in `tally`; `start` is the run's start.
async fn call(client: Client, jobs: Arc<Jobs>, k: usize, tally: Shared, start: Instant) {
    let request = jobs.request(k);
    let bytes = jobs.plains[k].len() as u64;
    tally.lock().unwrap_or_else(|e| e.into_inner()).sent_bytes += bytes;
    let sent = Instant::now();
    let result = client.encrypt(request).await;
    let took = sent.elapsed();
    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    match result {
        Ok(out) if out == jobs.expected[k] => {
            t.served.push((start.elapsed(), bytes));
            t.latencies.push(took);
        }
        Ok(_) => {
            t.lost += 1;
            t.first_loss
                .get_or_insert_with(|| "a call returned wrong data".into());
        }
        Err(s) if s.code() == Code::ResourceExhausted => t.refused += 1,
        Err(s) => {
            t.lost += 1;
            t.first_loss.get_or_insert_with(|| format!("{s:?}"));
        }
    }
}

/// Keeps `open` calls of `client` in flight until `until`, then waits for them.
async fn closed_loop(
    client: Client,
    jobs: Arc<Jobs>,
    open: usize,
    tally: Shared,
    start: Instant,
    until: Instant,
) {
    let permits = Arc::new(Semaphore::new(open));
    let mut tasks = Vec::new();
    let mut i = 0;
    while Instant::now() < until {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            break;
        };
        if Instant::now() >= until {
            break;
        }
        tasks.push(spawn_call(&client, &jobs, i, &tally, start, permit));
        i += 1;
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Starts call `i` (of the jobs in turn) on a task of its own, which gives `permit` back when
/// the call is over.
fn spawn_call(
    client: &Client,
    jobs: &Arc<Jobs>,
    i: usize,
    tally: &Shared,
    start: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> tokio::task::JoinHandle<()> {
    let (client, jobs, tally) = (client.clone(), Arc::clone(jobs), Arc::clone(tally));
    let k = i % jobs.plains.len();
    tokio::spawn(async move {
        call(client, jobs, k, tally, start).await;
        drop(permit);
    })
}

/// Calls each backlogged tenant of `shares` keeps in flight per daemon: `--tenant-backlog`,
/// or by default 1 MiB of calls and at least 16. Counted in calls alone, a backlog of small
/// calls fits in what a daemon's node holds, nothing of either tenant waits in its core, and
/// the daemon serves the tenants alike whatever their weights: with 16 calls of 4 KiB weight
/// 1 had 0.50 of the bytes without the light path (docs/RESULTS.md, Tenants).
fn tenant_backlog(args: &ScaleoutArgs) -> usize {
    args.tenant_backlog
        .unwrap_or_else(|| ((1 << 20) / args.job_bytes.max(1)).clamp(16, 1024))
}

/// Sends calls of `client` at `rate` per second, `burst` at a time at evenly spaced moments,
/// from `from` to `until`, with at most `open` in flight (a call due while that many are open
/// is dropped); then waits for them.
#[allow(clippy::too_many_arguments)]
async fn open_loop(
    client: Client,
    jobs: Arc<Jobs>,
    rate: f64,
    burst: usize,
    open: usize,
    tally: Shared,
    start: Instant,
    from: Instant,
    until: Instant,
) {
    let permits = Arc::new(Semaphore::new(open));
    let period = Duration::from_secs_f64(burst as f64 / rate.max(1e-3));
    let mut tasks = Vec::new();
    let mut due = from;
    let mut i = 0;
    while due < until {
        tokio::time::sleep_until(due.into()).await;
        due += period;
        for _ in 0..burst {
            let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                tally.lock().unwrap_or_else(|e| e.into_inner()).dropped += 1;
                continue;
            };
            tasks.push(spawn_call(&client, &jobs, i, &tally, start, permit));
            i += 1;
        }
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// A tenant's results over a run of `secs` (the calls served in `window` since the run's
/// start count), its share taken of `total` bytes served in the window.
fn result(
    tenant: &'static str,
    tally: &Tally,
    secs: f64,
    window: (Duration, Duration),
    offered_mb_s: Option<f64>,
) -> (TenantResult, u64) {
    let bytes: u64 = tally
        .served
        .iter()
        .filter(|(at, _)| *at >= window.0 && *at < window.1)
        .map(|(_, b)| b)
        .sum();
    let span = (window.1 - window.0).as_secs_f64();
    let mut latencies = tally.latencies.clone();
    latencies.sort();
    (
        TenantResult {
            tenant,
            weight: weight(tenant),
            offered_mb_s: offered_mb_s.unwrap_or(tally.sent_bytes as f64 / secs / 1e6),
            throughput_mb_s: bytes as f64 / span / 1e6,
            share: 0.0,
            p99: percentile(&latencies, 0.99),
            refused: tally.refused,
            dropped: tally.dropped,
            lost: tally.lost,
            first_loss: tally.first_loss.clone(),
        },
        bytes,
    )
}

/// Sets each result's share of the bytes the results were served together.
fn set_shares(results: &mut [TenantResult], bytes: &[u64]) {
    let total: u64 = bytes.iter().sum();
    for (r, b) in results.iter_mut().zip(bytes) {
        r.share = if total == 0 {
            0.0
        } else {
            *b as f64 / total as f64
        };
    }
}

fn new_tally() -> Shared {
    Arc::new(Mutex::new(Tally::default()))
}

fn take(tally: &Shared) -> Tally {
    std::mem::take(&mut *tally.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Runs the `tenants` setup on daemons slowed by `slowdown`.
pub fn measure(
    haproxy_bin: &Path,
    daemon_bin: &Path,
    dir: &Path,
    slowdown: f64,
    args: &ScaleoutArgs,
) -> Result<Outcome, String> {
    let tokens = write_tokens(dir)?;
    let mut extra = vec!["--metrics", "127.0.0.1:0"];
    if args.no_light_path {
        extra.push("--no-light-path");
    }
    let daemons: Vec<DaemonProcess> = (0..DAEMONS)
        .map(|_| {
            start_daemon(
                daemon_bin,
                dir,
                &tokens,
                slowdown,
                None,
                QUEUE_WAIT_MS,
                &extra,
            )
        })
        .collect::<Result<_, _>>()?;
    let mut setup = behind_haproxy(&daemons, false, args.balance(true))?;
    setup.tenant_groups = TENANT_GROUPS;
    let proxy = Haproxy::start(haproxy_bin, &setup, dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let secs = args.tenant_secs;
    let run = Duration::from_secs_f64(secs);
    let outcome = runtime.block_on(async {
        let mut clients = Vec::new();
        for (name, _, token) in TENANTS {
            // A connection of its own per tenant, as separate clients would have.
            let client = connect(proxy.frontend, token).await?;
            clients.push((name, client));
        }
        let client = |name: &str| {
            clients
                .iter()
                .find(|c| c.0 == name)
                .map(|c| c.1.clone())
                .ok_or_else(|| format!("no client for {name}"))
        };
        let big = Arc::new(Jobs::new(args.job_bytes)?);
        let small = Arc::new(Jobs::new(QUIET_BYTES)?);
        // Warm-up: every tenant's connection, and the daemons' nodes. The quiet tenant and its
        // stand-in alone send a few calls of their own size, one at a time, so that the
        // daemons' latency of their jobs is that of the runs.
        for (name, c) in &clients {
            let light = matches!(*name, "quiet" | "solo");
            let (jobs, open, secs) = if light {
                (&small, 1, 0.03)
            } else {
                (&big, 4, 0.2)
            };
            let warm = new_tally();
            closed_loop(
                c.clone(),
                Arc::clone(jobs),
                open,
                Arc::clone(&warm),
                Instant::now(),
                Instant::now() + Duration::from_secs_f64(secs),
            )
            .await;
            let w = take(&warm);
            if w.lost > 0 {
                return Err(format!(
                    "warm-up of {name}: {}",
                    w.first_loss.unwrap_or_default()
                ));
            }
        }

        // Shares: both backlogged.
        let open = tenant_backlog(args) * DAEMONS;
        let open_w1 = args.w1_backlog.map_or(open, |n| n * DAEMONS);
        let (t1, t3) = (new_tally(), new_tally());
        let start = Instant::now();
        let until = start + run;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Every daemon's page, or no readings at all (the report says so).
        let metrics: Option<Vec<_>> = daemons.iter().map(|d| d.metrics).collect();
        let readings = served_readings(metrics.unwrap_or_default(), start, Arc::clone(&stop));
        tokio::join!(
            closed_loop(
                client("w1")?,
                Arc::clone(&big),
                open_w1,
                Arc::clone(&t1),
                start,
                until
            ),
            closed_loop(
                client("w3")?,
                Arc::clone(&big),
                open,
                Arc::clone(&t3),
                start,
                until
            ),
        );
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let readings = readings.join().unwrap_or_default();
        let served = served_seconds(&readings, secs.floor() as u64);
        let held = held_fraction(&readings, secs.floor() as u64);
        let (t1, t3) = (take(&t1), take(&t3));
        // The first half second is the ramp-up; calls that end after the end are not counted.
        let window = (Duration::from_millis(500), run);
        let (r1, b1) = result("w1", &t1, secs, window, None);
        let (r3, b3) = result("w3", &t3, secs, window, None);
        let mut shares = vec![r1, r3];
        set_shares(&mut shares, &[b1, b3]);
        let capacity = (b1 + b3) as f64 / (window.1 - window.0).as_secs_f64();
        let per_second = |tally: &Tally, s: u64| -> u64 {
            tally
                .served
                .iter()
                .filter(|(at, _)| at.as_secs() == s)
                .map(|(_, b)| b)
                .sum()
        };
        // Each whole second after the first (the ramp-up).
        let seconds: Vec<(f64, f64)> = (1..secs.floor() as u64)
            .filter_map(|s| {
                let (a, b) = (per_second(&t1, s), per_second(&t3, s));
                let total = (a + b) as f64;
                (total > 0.0).then(|| (a as f64 / total, b as f64 / total))
            })
            .collect();

        // The quiet tenant alone, at a part of its fair share.
        let fair = capacity / 2.0;
        let quiet_rate = args.quiet_load * fair / QUIET_BYTES as f64;
        let quiet_open = 1024;
        let q = new_tally();
        let start = Instant::now();
        open_loop(
            client("solo")?,
            Arc::clone(&small),
            quiet_rate,
            args.quiet_burst,
            quiet_open,
            Arc::clone(&q),
            start,
            start,
            start + run,
        )
        .await;
        let q = take(&q);
        let (alone, _) = result("quiet", &q, secs, (Duration::ZERO, run), None);

        // The quiet tenant beside the noisy one, which offers ten times its fair share and
        // starts a second early.
        let noisy_rate = 10.0 * fair / args.job_bytes as f64;
        let (q, n) = (new_tally(), new_tally());
        let start = Instant::now();
        let quiet_from = start + Duration::from_secs(1);
        let until = quiet_from + run;
        tokio::join!(
            open_loop(
                client("noisy")?,
                Arc::clone(&big),
                noisy_rate,
                1,
                args.noisy_open,
                Arc::clone(&n),
                start,
                start,
                until,
            ),
            open_loop(
                client("quiet")?,
                Arc::clone(&small),
                quiet_rate,
                args.quiet_burst,
                quiet_open,
                Arc::clone(&q),
                start,
                quiet_from,
                until,
            ),
        );
        let (q, n) = (take(&q), take(&n));
        let window = (Duration::from_secs(1), Duration::from_secs(1) + run);
        let noisy_offered = noisy_rate * args.job_bytes as f64 / 1e6;
        let quiet_offered = quiet_rate * QUIET_BYTES as f64 / 1e6;
        let (rn, bn) = result("noisy", &n, secs, window, Some(noisy_offered));
        let (rq, bq) = result("quiet", &q, secs, window, Some(quiet_offered));
        let mut isolation = vec![rn, rq];
        set_shares(&mut isolation, &[bn, bq]);
        let mut alone = alone;
        alone.offered_mb_s = quiet_offered;
        Ok::<_, String>(Outcome {
            balance: args.balance(true),
            capacity_mb_s: capacity / 1e6,
            shares,
            seconds,
            served,
            held,
            alone,
            isolation,
            quiet_rate,
            noisy_rate,
            daemon_p99: (None, None),
            quiet_light: Vec::new(),
            paths: Vec::new(),
        })
    });
    let mut outcome = outcome?;
    let largest = |tenant: &str| {
        daemons
            .iter()
            .filter_map(|d| d.metrics.and_then(|m| daemon_p99(m, tenant)))
            .max()
    };
    outcome.daemon_p99 = (largest("quiet"), largest("solo"));
    outcome.quiet_light = daemons
        .iter()
        .map(|d| {
            let page = scrape(d.metrics?)?;
            let count = |series: &str| {
                sample(&page, &format!("{series}{{tenant=\"quiet\"}}")).map(|v| v as u64)
            };
            Some((
                count("cryptodispatch_tenant_jobs_light_total")?,
                count("cryptodispatch_tenant_jobs_admitted_total")?,
            ))
        })
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    let pages: Vec<String> = daemons.iter().filter_map(|d| scrape(d.metrics?)).collect();
    outcome.paths = TENANTS
        .iter()
        .map(|&(tenant, ..)| {
            let sum = |series: &str| -> u64 {
                let name = format!("cryptodispatch_tenant_{series}_total{{tenant=\"{tenant}\"}}");
                pages
                    .iter()
                    .filter_map(|p| sample(p, &name))
                    .map(|v| v as u64)
                    .sum()
            };
            Paths {
                tenant,
                stalled: sum("jobs_inline_stalled"),
                behind: sum("jobs_inline_behind"),
                light: sum("jobs_light"),
                admitted: sum("jobs_admitted"),
            }
        })
        .collect();
    drop(proxy);
    drop(daemons);
    Ok(outcome)
}

fn us(d: Option<Duration>) -> String {
    d.map_or(String::new(), |d| f(d.as_secs_f64() * 1e6, 0))
}

/// The CSV rows: `isolation` (noisy, quiet), then `shares` (w1, w3).
pub fn csv(o: &Outcome) -> Csv {
    let mut csv = Csv::new(CSV_HEADER);
    let rows = o
        .isolation
        .iter()
        .map(|r| ("isolation", r))
        .chain(o.shares.iter().map(|r| ("shares", r)));
    for (scenario, r) in rows {
        let alone = if scenario == "isolation" && r.tenant == "quiet" {
            us(o.alone.p99)
        } else {
            String::new()
        };
        csv.row(&[
            scenario.to_string(),
            r.tenant.to_string(),
            r.weight.to_string(),
            f(r.offered_mb_s, 2),
            f(r.throughput_mb_s, 2),
            f(r.share, 3),
            us(r.p99),
            alone,
            r.lost.to_string(),
        ]);
    }
    csv
}

/// Prints the table (or the CSV with `csv_only`) and the verdicts, and writes
/// `scaleout_tenants.csv` into `out`.
pub fn report(o: &Outcome, out: &Path, csv_only: bool) -> Result<(), String> {
    let csv = csv(o);
    if csv_only {
        print!("{}", csv.as_str());
    } else {
        println!(
            "tenants: {DAEMONS} daemons behind HAProxy ({}), capacity {:.1} MB/s (both shares \
             tenants backlogged); quiet sends {:.0} calls/s of {} KiB, noisy {:.0} calls/s",
            o.balance.keyword(),
            o.capacity_mb_s,
            o.quiet_rate,
            QUIET_BYTES / 1024,
            o.noisy_rate,
        );
        let header = [
            "scenario",
            "tenant",
            "weight",
            "offered_mb_s",
            "throughput_mb_s",
            "share",
            "p99_latency_us",
            "refused",
            "dropped",
            "lost",
        ];
        let mut table = Table::new(&header);
        let rows = o
            .isolation
            .iter()
            .map(|r| ("isolation", r))
            .chain(std::iter::once(("alone", &o.alone)))
            .chain(o.shares.iter().map(|r| ("shares", r)));
        for (scenario, r) in rows {
            table.row(vec![
                scenario.to_string(),
                r.tenant.to_string(),
                r.weight.to_string(),
                f(r.offered_mb_s, 2),
                f(r.throughput_mb_s, 2),
                f(r.share, 3),
                us(r.p99),
                r.refused.to_string(),
                r.dropped.to_string(),
                r.lost.to_string(),
            ]);
        }
        print!("{}", table.render());
    }
    let line = |seconds: &[(f64, f64)]| {
        seconds
            .iter()
            .map(|(a, b)| format!("{a:.3}:{b:.3}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    say!(
        csv_only,
        "shares, second by second (w1:w3), bytes served (the daemons' counts, as packets \
         finish): {}",
        line(&o.served)
    );
    say!(
        csv_only,
        "  bytes of the calls that ended in each second (the client's count): {}",
        line(&o.seconds)
    );
    if o.served.is_empty() {
        say!(
            csv_only,
            "  (no seconds of bytes served: the daemons' metrics were not read)"
        );
    }
    if let Some((h1, h3)) = o.held {
        say!(
            csv_only,
            "  readings with jobs of the tenant in flight at every daemon: w1 {:.0}%, w3 {:.0}%{}",
            h1 * 100.0,
            h3 * 100.0,
            if h1.min(h3) < HELD_ENOUGH {
                " (a tenant often had no job at a daemon: the calls' path, not the daemons' \
                 nodes, held it back; docs/RESULTS.md, Tenants)"
            } else {
                ""
            }
        );
    }
    let within = |share: f64, target: f64| (share - target).abs() <= 0.1 * target;
    let worst = |seconds: &[(f64, f64)]| {
        seconds
            .iter()
            .map(|(a, _)| (a - 0.25).abs() / 0.25)
            .fold(0.0f64, f64::max)
    };
    let met = !o.served.is_empty()
        && o.served
            .iter()
            .all(|(a, b)| within(*a, 0.25) && within(*b, 0.75));
    say!(
        csv_only,
        "shares: every second's bytes served within 10% of 1:3: {} (worst: w1's share {:.0}% \
         off 0.25; by the calls that ended, {:.0}%)",
        if met { "met" } else { "NOT met" },
        worst(&o.served) * 100.0,
        worst(&o.seconds) * 100.0
    );
    let quiet = o.isolation.iter().find(|r| r.tenant == "quiet");
    if let (Some(with), Some(alone)) = (quiet.and_then(|r| r.p99), o.alone.p99) {
        let x = with.as_secs_f64() / alone.as_secs_f64();
        say!(
            csv_only,
            "isolation: quiet p99 {} us beside noisy, {} us alone: {x:.2}x (target <= 1.5x: {})",
            us(Some(with)),
            us(Some(alone)),
            if x <= 1.5 { "met" } else { "NOT met" }
        );
    }
    if let (Some(with), Some(alone)) = o.daemon_p99 {
        say!(
            csv_only,
            "  in the daemons (submission to output, the larger daemon's p99): {} us beside \
             noisy, {} us alone: {:.2}x",
            us(Some(with)),
            us(Some(alone)),
            with.as_secs_f64() / alone.as_secs_f64()
        );
    }
    if !o.quiet_light.is_empty() {
        let per: Vec<String> = o
            .quiet_light
            .iter()
            .map(|(l, a)| format!("{l}/{a}"))
            .collect();
        let (l, a) = o
            .quiet_light
            .iter()
            .fold((0, 0), |(l, a), (dl, da)| (l + dl, a + da));
        say!(
            csv_only,
            "  the quiet tenant's jobs by the light path: {l} of {a} admitted (per daemon: {})",
            per.join(", ")
        );
    }
    if !o.paths.is_empty() {
        let each = |f: fn(&Paths) -> String| {
            (o.paths.iter())
                .map(|t| format!("{} {}", t.tenant, f(t)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        say!(
            csv_only,
            "  jobs run on the daemons' calling threads (all phases): beside a stalled node {}; \
             as their tenant was behind {}",
            each(|t| t.stalled.to_string()),
            each(|t| t.behind.to_string())
        );
        say!(
            csv_only,
            "  jobs by the light path, of those admitted (all phases): {}",
            each(|t| format!("{}/{}", t.light, t.admitted))
        );
    }
    let all = o
        .shares
        .iter()
        .chain(&o.isolation)
        .chain(std::iter::once(&o.alone));
    let mut lost = 0;
    for r in all {
        lost += r.lost;
        if let Some(loss) = &r.first_loss {
            say!(csv_only, "  {}: first call lost: {loss}", r.tenant);
        }
    }
    say!(
        csv_only,
        "every output checked against the library's one-shot result; {lost} calls lost \
         (target 0); refused calls got RESOURCE_EXHAUSTED with a retry pushback"
    );
    let path = write_file(out, "scaleout_tenants.csv", csv.as_str())?;
    say!(csv_only, "CSV: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, w1: f64, w3: f64) -> Reading {
        Reading {
            at: Duration::from_millis(ms),
            served: (w1, w3),
            held: (true, true),
        }
    }

    #[test]
    fn the_held_fraction_counts_the_readings_of_the_counted_seconds() {
        let held = |ms, w1, w3| Reading {
            held: (w1, w3),
            ..at(ms, 0.0, 0.0)
        };
        let readings = [
            // The ramp-up second does not count.
            held(500, false, false),
            held(1_000, true, true),
            held(1_500, true, false),
            held(2_000, true, false),
            held(2_500, false, true),
            // After the run.
            held(3_500, false, false),
        ];
        assert_eq!(held_fraction(&readings, 3), Some((0.75, 0.5)));
        assert_eq!(held_fraction(&readings[..1], 3), None);
    }

    #[test]
    fn a_seconds_shares_are_of_the_bytes_served_between_the_readings_nearest_its_ends() {
        let readings = [
            at(0, 0.0, 0.0),
            at(1_010, 100.0, 300.0),
            at(1_900, 150.0, 500.0),
            at(2_040, 200.0, 500.0),
            // Second 3 has no reading near its end (a daemon did not answer): no share for
            // seconds 2 and 3.
            at(3_500, 300.0, 900.0),
            at(4_000, 400.0, 1000.0),
            at(5_050, 500.0, 1300.0),
        ];
        let s = served_seconds(&readings, 5);
        // Second 1: 1010 ms to 2040 ms, 100 and 200 bytes; second 4: 4000 ms to 5050 ms.
        assert_eq!(s, vec![(1.0 / 3.0, 2.0 / 3.0), (0.25, 0.75)]);
    }

    #[test]
    fn a_second_with_nothing_served_has_no_share() {
        let readings = [at(1_000, 10.0, 30.0), at(2_000, 10.0, 30.0)];
        assert!(served_seconds(&readings, 2).is_empty());
        assert!(served_seconds(&[], 5).is_empty());
    }
}
