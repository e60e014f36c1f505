//! `live --workload tenant-mix`: tenant isolation on configurations drawn at random, a check
//! designed apart from `tenants` (tenants.rs), on which the light path and its rules were
//! developed (docs/ALGORITHM.md §15.7), so that what it reports is held out from them.
//!
//! Each configuration (`--reps` of them, drawn from `--seed`) has one quiet tenant and one to
//! three noisy ones, every tenant with a weight of 1 to 4:
//! - the quiet tenant sends AES-128-CBC encryption jobs of 2 to 128 KiB (log-uniform, whole
//!   blocks) at 5% to 20% of its weighted share of the capacity, at random times (a Poisson
//!   process, where `tenants` sends at a fixed gap);
//! - each noisy tenant sends jobs of 4 KiB to 2 MiB of CBC encryption, CTR or CBC decryption
//!   at 5 to 20 times its weighted share (a Poisson process too, at most [`IN_FLIGHT_BYTES`]
//!   in flight, so that above the capacity it is backlogged).
//!
//! The capacity is what the noisy tenants complete together in [`CALIBRATION`], backlogged.
//! Then the quiet tenant runs alone for [`PHASE`], then beside the noisy ones for as long; its
//! p99 latency beside ÷ alone is the figure (`tenants`' target: at most 1.5); beside it, how
//! late the quiet client itself submitted its jobs (p99, alone and beside: a client thread that
//! waits for the clients' shared core sends the jobs it owes at once). Every output is
//! checked against the cipher; `lost` counts jobs refused, failed, or with other bytes, of
//! every tenant. Nodes and clients are placed as in `tenants`: AES nodes on every core but the
//! last (or `--nodes`), the clients' threads on the last, the light path on.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::{scope, sleep};
use std::time::{Duration, Instant};

use cryptodispatch::crypto::{AesKey, AesOp, Direction, op_name};
use cryptodispatch::{
    Job, JobHandle, JobOutput, KeyId, Mode, NodeSpec, Service, TenantId, TenantSpec,
};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::live::{JOB_PATIENCE, LiveArgs};
use crate::report::{f, print_rows};
use crate::support::{Text, cores, lower_priority, percentile};
use crate::tenants::{NODES, timed, with_waiter};

/// CSV columns of the workload: one row per configuration.
pub const CSV_HEADER: &str = "config,tenants,quiet_weight,quiet_size,quiet_offered_mb_s,noisy,\
capacity_mb_s,quiet_jobs,quiet_light,quiet_kept_busy,quiet_over_credit,quiet_inline_stalled,quiet_inline_behind,noisy_light,p99_alone_us,p99_beside_us,ratio,late_p99_alone_us,late_p99_beside_us,lost";

/// How long the capacity is measured, the noisy tenants backlogged.
const CALIBRATION: Duration = Duration::from_secs(1);
/// How long the quiet tenant runs alone, and then beside the noisy ones.
const PHASE: Duration = Duration::from_secs(2);
/// The most bytes a noisy tenant has in flight (at least 8 jobs, at most 4096).
const IN_FLIGHT_BYTES: usize = 8 << 20;
/// The most jobs the quiet tenant has unresolved (it sends far below its share).
const QUIET_IN_FLIGHT: usize = 4096;
const IV: [u8; 16] = [0x5a; 16];

/// One tenant of a configuration, as drawn.
#[derive(Clone, Copy, Debug)]
struct Draw {
    weight: u32,
    size: usize,
    op: AesOp,
    /// Offered load as a multiple of the tenant's weighted share of the capacity.
    load: f64,
}

/// A configuration: the quiet tenant, then the noisy ones.
struct Config {
    quiet: Draw,
    noisy: Vec<Draw>,
}

/// Bytes log-uniform in `2^lo..=2^hi`, in whole blocks.
fn log_size(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> usize {
    let bytes = 2f64.powf(rng.random_range(lo..=hi));
    ((bytes / 16.0).round() as usize).max(1) * 16
}

impl Config {
    fn draw(rng: &mut ChaCha8Rng) -> Config {
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let quiet = Draw {
            weight: rng.random_range(1..=4),
            size: log_size(rng, 11.0, 17.0),
            op: cbc,
            load: rng.random_range(0.05..=0.2),
        };
        let ops = [
            cbc,
            AesOp::new(Direction::Encrypt, Mode::Ctr),
            AesOp::new(Direction::Decrypt, Mode::Cbc),
        ];
        let noisy = (0..rng.random_range(1..=3usize))
            .map(|_| Draw {
                weight: rng.random_range(1..=4),
                size: log_size(rng, 12.0, 21.0),
                op: ops[rng.random_range(0..ops.len())],
                load: rng.random_range(5.0..=20.0),
            })
            .collect();
        Config { quiet, noisy }
    }

    fn weights(&self) -> u32 {
        self.quiet.weight + self.noisy.iter().map(|d| d.weight).sum::<u32>()
    }
}

/// A tenant registered with the service: its job and the output the job must give.
struct Tenant {
    id: TenantId,
    key: KeyId,
    op: AesOp,
    data: Vec<u8>,
    expected: Vec<u8>,
}

impl Tenant {
    fn new(service: &Service, name: &str, d: &Draw, salt: u8) -> Result<Tenant, String> {
        let id = service
            .add_tenant(TenantSpec::new(name).weight(d.weight))
            .text()?;
        let raw = [salt; 16];
        let key = service.add_aes_key(&raw).text()?;
        let data: Vec<u8> = (0..d.size)
            .map(|i| (i * 13 + salt as usize) as u8)
            .collect();
        let expected = AesKey::new(&raw)
            .and_then(|k| k.one_shot(d.op, &IV, &data))
            .text()?;
        Ok(Tenant {
            id,
            key,
            op: d.op,
            data,
            expected,
        })
    }

    /// A job of the tenant's data, in `spare` (a checked output given back) if there is one.
    fn job(&self, spare: Option<Vec<u8>>) -> Job {
        let mut data = spare.unwrap_or_default();
        data.clear();
        data.extend_from_slice(&self.data);
        Job::aes(self.key, self.op, &IV, data).tenant(self.id)
    }
}

/// What a sender saw: each job's latency, and the jobs lost; for a sender at a rate, how late
/// past its scheduled time each job was submitted.
#[derive(Default)]
struct Seen {
    latencies: Vec<Duration>,
    lost: u64,
    late: Vec<Duration>,
}

impl Seen {
    fn check(&mut self, t: &Tenant, mut h: JobHandle, back: &SyncSender<Vec<u8>>) {
        let out = h.wait_timeout(JOB_PATIENCE);
        match (out, h.latency()) {
            (Some(Ok(JobOutput::Data(d))), Some(l)) if d == t.expected => {
                self.latencies.push(l);
                let _ = back.try_send(d);
            }
            _ => self.lost += 1,
        }
    }

    fn p99_us(&mut self) -> f64 {
        self.latencies.sort_unstable();
        percentile(&self.latencies, 0.99).as_secs_f64() * 1e6
    }

    /// The 99th percentile of how late the sender submitted its jobs, in µs: a client whose
    /// thread waits for its core sends the jobs it owes at once, a burst the service sees.
    fn late_p99_us(&mut self) -> f64 {
        self.late.sort_unstable();
        percentile(&self.late, 0.99).as_secs_f64() * 1e6
    }

    fn bytes(&self, t: &Tenant) -> f64 {
        (self.latencies.len() * t.data.len()) as f64
    }
}

/// Sends `t`'s jobs until `stop`, at `rate` bytes per second on average (`None`: as fast as
/// the jobs in flight allow), at exponentially distributed gaps; at most `in_flight` jobs
/// unresolved. A waiter thread checks each output and hands its buffer back for reuse. A job
/// submitted late (the thread woke late, or the window was full) keeps its scheduled time: the
/// jobs owed go at once, and how late each was is kept.
fn send(
    service: &Service,
    t: &Tenant,
    rate: Option<f64>,
    in_flight: usize,
    seed: u64,
    stop: &AtomicBool,
) -> Seen {
    let (back, spares) = sync_channel::<Vec<u8>>(in_flight);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let waiter = move |rx: Receiver<JobHandle>| {
        let mut seen = Seen::default();
        rx.into_iter().for_each(|h| seen.check(t, h, &back));
        seen
    };
    let (mut seen, (refused, late)) = with_waiter(in_flight, waiter, |tx| {
        let mut next = Instant::now();
        let mut refused = 0;
        let mut late = Vec::new();
        while !stop.load(Relaxed) {
            if let Some(rate) = rate {
                // Exponential gaps: a Poisson process of mean rate `rate / size` jobs a second.
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                next += Duration::from_secs_f64(-u.ln() * t.data.len() as f64 / rate);
                sleep(next.saturating_duration_since(Instant::now()));
                late.push(Instant::now().saturating_duration_since(next));
            }
            match service.submit(t.job(spares.try_recv().ok())) {
                Ok(h) => tx.send(h).expect("waiter"),
                Err(_) => refused += 1,
            }
        }
        (refused, late)
    });
    seen.lost += refused;
    seen.late = late;
    seen
}

/// A configuration's figures.
struct Outcome {
    capacity: f64,
    quiet_rate: f64,
    quiet_jobs: usize,
    /// Of the quiet tenant's jobs admitted beside the noisy ones, those on the light path.
    quiet_light: u64,
    quiet_admitted: u64,
    /// Of them, those kept off it as the tenant was busy, and for want of credit.
    quiet_kept_busy: u64,
    quiet_over_credit: u64,
    /// Of them, those run on the submitter beside a stalled node, and as the tenant was behind
    /// on its own light jobs.
    quiet_inline_stalled: u64,
    quiet_inline_behind: u64,
    /// Of the noisy tenants' jobs admitted beside the quiet one, those on the light path,
    /// and all of them.
    noisy_light: (u64, u64),
    alone_us: f64,
    beside_us: f64,
    /// The quiet client's lateness (p99, µs) alone and beside ([`Seen::late_p99_us`]).
    late_alone_us: f64,
    late_beside_us: f64,
    lost: u64,
}

fn run_config(
    config: &Config,
    nodes: usize,
    inline_limit: usize,
    seed: u64,
    noisy_nice: Option<i32>,
) -> Result<Outcome, String> {
    let service = Service::builder()
        .aes_cluster((0..nodes).map(|i| NodeSpec::pinned(i % cores())))
        .light_path(true)
        .inline_limit(inline_limit)
        .build()
        .text()?;
    let quiet = Tenant::new(&service, "quiet", &config.quiet, 1)?;
    let noisy = (config.noisy.iter().enumerate())
        .map(|(i, d)| Tenant::new(&service, &format!("noisy-{i}"), d, 2 + i as u8))
        .collect::<Result<Vec<_>, _>>()?;
    let window = |t: &Tenant| (IN_FLIGHT_BYTES / t.data.len()).clamp(8, 4096);
    let (service, noisy) = (&service, &noisy);
    let all_noisy = |rates: &[Option<f64>], stop: &AtomicBool| -> Result<Vec<Seen>, String> {
        scope(|s| {
            let senders: Vec<_> = (noisy.iter().zip(rates).enumerate())
                .map(|(i, (t, &rate))| {
                    s.spawn(move || {
                        // Before the sender starts its waiter, which inherits the priority.
                        if let Some(nice) = noisy_nice {
                            lower_priority(nice)?;
                        }
                        Ok(send(
                            service,
                            t,
                            rate,
                            window(t),
                            seed.wrapping_add(1 + i as u64),
                            stop,
                        ))
                    })
                })
                .collect();
            senders
                .into_iter()
                .map(|h| h.join().expect("sender"))
                .collect()
        })
    };

    let mut lost = 0;
    let cal = timed(CALIBRATION, |stop| {
        all_noisy(&vec![None; noisy.len()], stop)
    })?;
    let done: f64 = cal.iter().zip(noisy).map(|(s, t)| s.bytes(t)).sum();
    lost += cal.iter().map(|s| s.lost).sum::<u64>();
    if done == 0.0 {
        return Err("tenant-mix: no noisy job completed while the capacity was measured".into());
    }
    let capacity = done / CALIBRATION.as_secs_f64();
    let share = |d: &Draw| capacity * f64::from(d.weight) / f64::from(config.weights());
    let quiet_rate = config.quiet.load * share(&config.quiet);

    let quiet_sends = |stop: &AtomicBool| {
        send(
            service,
            &quiet,
            Some(quiet_rate),
            QUIET_IN_FLIGHT,
            seed,
            stop,
        )
    };
    let mut alone = timed(PHASE, quiet_sends);
    let rates: Vec<Option<f64>> = config
        .noisy
        .iter()
        .map(|d| Some(d.load * share(d)))
        .collect();
    let quiet_counts = || {
        let m = service.metrics();
        m.tenants
            .iter()
            .find(|t| t.tenant == quiet.id)
            .map_or([0; 6], |t| {
                [
                    t.jobs_admitted,
                    t.jobs_light,
                    t.jobs_kept_busy,
                    t.jobs_over_credit,
                    t.jobs_inline_stalled,
                    t.jobs_inline_behind,
                ]
            })
    };
    // The noisy tenants' jobs admitted, and those of them on the light path.
    let noisy_counts = || {
        let m = service.metrics();
        (m.tenants.iter())
            .filter(|t| noisy.iter().any(|n| n.id == t.tenant))
            .fold((0, 0), |(l, a), t| (l + t.jobs_light, a + t.jobs_admitted))
    };
    let before = quiet_counts();
    let noisy_before = noisy_counts();
    let (mut beside, others) = timed(PHASE, |stop| {
        scope(|s| {
            let q = s.spawn(|| quiet_sends(stop));
            let n = all_noisy(&rates, stop);
            (q.join().expect("quiet"), n)
        })
    });
    let others = others?;
    let after = quiet_counts();
    let noisy_after = noisy_counts();
    lost += alone.lost + beside.lost + others.iter().map(|s| s.lost).sum::<u64>();
    service.shutdown();
    if alone.latencies.is_empty() || beside.latencies.is_empty() {
        return Err("tenant-mix: the quiet tenant completed no job in a phase".into());
    }
    Ok(Outcome {
        capacity,
        quiet_rate,
        quiet_jobs: beside.latencies.len(),
        quiet_admitted: after[0] - before[0],
        quiet_light: after[1] - before[1],
        quiet_kept_busy: after[2] - before[2],
        quiet_over_credit: after[3] - before[3],
        quiet_inline_stalled: after[4] - before[4],
        quiet_inline_behind: after[5] - before[5],
        noisy_light: (
            noisy_after.0 - noisy_before.0,
            noisy_after.1 - noisy_before.1,
        ),
        alone_us: alone.p99_us(),
        beside_us: beside.p99_us(),
        late_alone_us: alone.late_p99_us(),
        late_beside_us: beside.late_p99_us(),
        lost,
    })
}

/// Runs the workload and prints a row per configuration, and a summary.
pub fn run(args: &LiveArgs) -> Result<(), String> {
    if let Some(n) = args.only_config.filter(|&n| n >= args.reps) {
        return Err(format!(
            "--only-config {n}: with --reps {} the configurations are 0 to {}",
            args.reps,
            args.reps - 1
        ));
    }
    let nodes = args.nodes.unwrap_or(cores().saturating_sub(1)).max(1);
    NODES.store(nodes, Relaxed);
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut rows = Vec::new();
    let (mut within, mut lost) = (0, 0);
    for i in 0..args.reps {
        // Every configuration is drawn, so that configuration i is the same with --only-config.
        let config = Config::draw(&mut rng);
        if args.only_config.is_some_and(|n| n != i) {
            continue;
        }
        let seed = args.seed.wrapping_mul(1000).wrapping_add(i as u64 * 10);
        let o = run_config(&config, nodes, args.inline_limit, seed, args.noisy_nice)?;
        let ratio = o.beside_us / o.alone_us;
        within += usize::from(ratio <= 1.5);
        lost += o.lost;
        let noisy: Vec<String> = (config.noisy.iter())
            .map(|d| format!("w{} {} {}B x{:.0}", d.weight, op_name(d.op), d.size, d.load))
            .collect();
        rows.push(vec![
            i.to_string(),
            (config.noisy.len() + 1).to_string(),
            config.quiet.weight.to_string(),
            config.quiet.size.to_string(),
            f(o.quiet_rate / 1e6, 1),
            noisy.join(" / "),
            f(o.capacity / 1e6, 0),
            o.quiet_jobs.to_string(),
            format!("{}/{}", o.quiet_light, o.quiet_admitted),
            o.quiet_kept_busy.to_string(),
            o.quiet_over_credit.to_string(),
            o.quiet_inline_stalled.to_string(),
            o.quiet_inline_behind.to_string(),
            format!("{}/{}", o.noisy_light.0, o.noisy_light.1),
            f(o.alone_us, 1),
            f(o.beside_us, 1),
            f(ratio, 2),
            f(o.late_alone_us, 0),
            f(o.late_beside_us, 0),
            o.lost.to_string(),
        ]);
    }
    let which = match args.only_config {
        Some(n) => format!("configuration {n} of {}", args.reps),
        None => format!("{} configurations", args.reps),
    };
    let nice = args.noisy_nice.map_or(String::new(), |n| {
        format!("; the noisy tenants' client threads at nice {n}")
    });
    let title = format!(
        "tenant-mix: {which} drawn from seed {} on {nodes} AES nodes (light path on); \
         calibration {} s, phases of {} s{nice}",
        args.seed,
        CALIBRATION.as_secs(),
        PHASE.as_secs()
    );
    print_rows(args.csv, CSV_HEADER, &rows, &title, CSV_HEADER, &[]);
    let line = format!(
        "tenant-mix: quiet p99 beside <= 1.5x alone in {within} of {} configurations; {lost} jobs lost",
        rows.len()
    );
    if args.csv {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_drawn_within_the_stated_ranges() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut counts = [0usize; 4];
        let mut ops = std::collections::HashSet::new();
        for _ in 0..500 {
            let c = Config::draw(&mut rng);
            counts[c.noisy.len()] += 1;
            let q = c.quiet;
            assert!((1..=4).contains(&q.weight));
            assert!(
                q.size % 16 == 0 && (2048..=131072).contains(&q.size),
                "{q:?}"
            );
            assert!((0.05..=0.2).contains(&q.load));
            assert_eq!(op_name(q.op), "cbc-encrypt");
            for d in &c.noisy {
                assert!((1..=4).contains(&d.weight));
                assert!(
                    d.size % 16 == 0 && (4096..=2 << 20).contains(&d.size),
                    "{d:?}"
                );
                assert!((5.0..=20.0).contains(&d.load));
                ops.insert(op_name(d.op));
            }
            assert_eq!(
                c.weights(),
                q.weight + c.noisy.iter().map(|d| d.weight).sum::<u32>()
            );
        }
        // One to three noisy tenants, each count drawn; every noisy operation drawn.
        assert_eq!(counts[0], 0);
        assert!(counts[1..].iter().all(|&n| n > 100), "{counts:?}");
        assert_eq!(ops.len(), 3, "{ops:?}");
        // The same seed draws the same configurations.
        let a = Config::draw(&mut ChaCha8Rng::seed_from_u64(9));
        let b = Config::draw(&mut ChaCha8Rng::seed_from_u64(9));
        assert_eq!(format!("{:?}", a.quiet), format!("{:?}", b.quiet));
    }

    fn live_args(extra: &[&str]) -> Result<LiveArgs, clap::Error> {
        LiveArgs::try_parse_from(["live", "--workload", "tenant-mix"].iter().chain(extra))
    }

    #[test]
    fn a_configuration_past_those_drawn_is_refused_before_anything_runs() {
        let args = live_args(&["--reps", "3", "--only-config", "3"]).expect("parses");
        let e = run(&args).expect_err("configuration 3 of 0 to 2");
        assert!(e.contains("--only-config 3") && e.contains("0 to 2"), "{e}");
    }

    #[test]
    fn the_noisy_clients_nice_value_is_checked_and_lowers_a_thread_alone() {
        for bad in ["0", "20", "-5"] {
            assert!(
                live_args(&["--noisy-nice", bad]).is_err(),
                "--noisy-nice {bad}"
            );
        }
        let args = live_args(&["--noisy-nice", "19"]).expect("parses");
        assert_eq!(args.noisy_nice, Some(19));
        #[cfg(target_os = "linux")]
        {
            use rustix::process::getpriority_process;
            let before = getpriority_process(None).expect("this thread's nice value");
            let (inner, child) = std::thread::spawn(|| {
                lower_priority(19).expect("lowering a thread's own priority needs no privilege");
                let inner = getpriority_process(None).expect("nice value");
                // A thread started now inherits it.
                let child = std::thread::spawn(|| getpriority_process(None).expect("nice value"));
                (inner, child.join().expect("child"))
            })
            .join()
            .expect("thread");
            assert_eq!((inner, child), (19, 19));
            // The thread that started the lowered one keeps its own.
            assert_eq!(getpriority_process(None).expect("nice value"), before);
        }
    }
}
