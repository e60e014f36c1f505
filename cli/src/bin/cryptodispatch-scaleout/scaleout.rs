//! The scale-out experiment: daemons behind HAProxy on this machine.
//!
//! Each daemon (`cryptodispatchd --insecure-loopback --nodes 1`) has one AES node slowed so
//! that a packet costs a few milliseconds: the node then mostly sleeps, as an IP core that is
//! slower than the CPU, so the machine's two cores are not what limits the daemons and adding
//! daemons can add throughput, as adding machines would. HAProxy (from `PATH`; without it the
//! command says so and exits 0) balances one client's calls over them round robin.
//!
//! Setups, each on fresh daemons and a fresh HAProxy:
//! - `one`, `two`, `four`: equal daemons; the work grows with the number of daemons;
//! - `hetero-static`: two daemons slowed 1:3, HAProxy with equal static weights;
//! - `hetero-agent`: the same daemons, HAProxy taking weights from their agent checks (every
//!   daemon gets `--agent-full-speed` = the fast daemon's speed, so it says about 100% and the
//!   slow one about 33%);
//! - `tenants` (not in the default list): two equal daemons shared by tenants of their own
//!   tokens: a noisy tenant beside a quiet one, and two backlogged tenants of weights 1 and 3
//!   (`tenants.rs`).
//!
//! A job is an AES-128-CBC encryption of `--job-bytes`, sent with at most
//! `--concurrency` calls in flight per daemon (closed loop); every result is checked against
//! the library's one-shot result. Makespan: from the first call to the last answer; throughput:
//! jobs per second; each setup runs `--repeat` times on the same daemons after a warm-up, and
//! the median run is reported (all runs are printed). Targets: `two` ≥ 1.8× and `four` ≥ 3.2× the throughput of `one`, and
//! `hetero-agent`'s makespan at least 25% below `hetero-static`'s.
//!
//! With `--stress N`, N CPU-bound threads spin beside the daemons for the whole experiment: a
//! busy machine, on which no call may fail (a failed call or a wrong result ends the run).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use cryptodispatch::crypto::{AesKey, AesOp, Direction};
use cryptodispatch::packet::{Cmd, Mode};
use cryptodispatch::{NodeSpec, Service};
use tokio::sync::Semaphore;

use crate::remote::client::{Client, ClientConfig};
use crate::remote::haproxy::{self, Backend, Balance, Haproxy, Setup};
use crate::remote::proto::{self, AesRequest};
use crate::report::{Csv, Table, f, write_file};

const TOKEN: &str = "scaleout-bench-token-0123456789";
const KEY: [u8; 16] = [0x42; 16];
/// The IV of every job.
const IV: [u8; 16] = [0x24; 16];
const PACKET: usize = 16 * 1024;

/// How much slower the hetero setups' second daemon is than the first.
const HETERO_FACTOR: f64 = 3.0;
const SETUPS: [&str; 6] = [
    "one",
    "two",
    "four",
    "hetero-static",
    "hetero-agent",
    "tenants",
];

/// Refuses options out of their ranges, one message per option. The counts are bounded so
/// that a run stays a run: far more calls in flight or jobs than these aborted on allocation
/// or overflowed (`--concurrency 1000000`, `--jobs 2^64−1`).
fn check(args: &ScaleoutArgs) -> Result<(), String> {
    let count = |name: &str, value: usize, max: usize| {
        if (1..=max).contains(&value) {
            Ok(())
        } else {
            Err(format!("--{name} {value}: must be from 1 to {max}"))
        }
    };
    let real = |name: &str, value: f64, (lo, hi): (f64, f64), what: &str| {
        if value.is_finite() && value >= lo && value <= hi {
            Ok(())
        } else {
            Err(format!("--{name} {value}: must be {what}"))
        }
    };
    if args.job_bytes == 0 || args.job_bytes % 16 != 0 || args.job_bytes > MAX_JOB_BYTES {
        return Err(format!(
            "--job-bytes {}: must be a positive multiple of 16, at most {MAX_JOB_BYTES} (the \
             daemons' request limit)",
            args.job_bytes
        ));
    }
    count("jobs", args.jobs, 1_000_000)?;
    count("concurrency", args.concurrency, 1024)?;
    count("repeat", args.repeat, 1000)?;
    count("noisy-open", args.noisy_open, 65_536)?;
    count("quiet-burst", args.quiet_burst, 1024)?;
    if let Some(n) = args.tenant_backlog {
        count("tenant-backlog", n, 1024)?;
    }
    if let Some(n) = args.w1_backlog {
        count("w1-backlog", n, 1024)?;
    }
    if args.stress > 1024 {
        return Err(format!("--stress {}: must be from 0 to 1024", args.stress));
    }
    real(
        "tenant-secs",
        args.tenant_secs,
        (1.0, 3600.0),
        "from 1 to 3600",
    )?;
    if !(args.quiet_load > 0.0 && args.quiet_load <= 1.0) {
        return Err(format!(
            "--quiet-load {}: must be above 0 and at most 1",
            args.quiet_load
        ));
    }
    if let Some(s) = args.slowdown {
        real(
            "slowdown",
            s,
            (1.0, 1000.0),
            "from 1 to 1000, as the daemon takes",
        )?;
    }
    let ms = (0.0, 60_000.0);
    real("packet-ms", args.packet_ms, ms, "from 0 to 60000")?;
    if args.packet_ms == 0.0 {
        return Err("--packet-ms 0: must be above 0".into());
    }
    real("min-call-ms", args.min_call_ms, ms, "from 0 to 60000")
}

/// The options of `scaleout`.
#[derive(Debug, Args)]
pub struct ScaleoutArgs {
    /// Setups to run, from: one, two, four, hetero-static, hetero-agent, tenants
    #[arg(long, default_value = "one,two,four,hetero-static,hetero-agent")]
    setups: String,
    /// Slowdown of the (fast) daemons' nodes [default: so that a 16 KiB packet takes
    /// --packet-ms]
    #[arg(long)]
    slowdown: Option<f64>,
    /// Time per 16 KiB packet the default slowdown aims at, in milliseconds
    #[arg(long, default_value_t = 2.0)]
    packet_ms: f64,
    /// The least time a call of --job-bytes takes on a node at the default slowdown, in
    /// milliseconds: with small calls the slowdown grows to it, so that the daemons' nodes,
    /// and not the calls' own path (HAProxy, HTTP/2 and this client, on the same cores), are
    /// what the setups measure
    #[arg(long, default_value_t = 0.25)]
    min_call_ms: f64,
    /// Jobs per daemon of full speed (a setup with 4 daemons runs 4 times as many)
    #[arg(long, default_value_t = 150)]
    jobs: usize,
    /// Bytes per job (a multiple of 16, at most 16 MiB: the daemons' request limit)
    #[arg(long, default_value_t = 64 * 1024)]
    pub job_bytes: usize,
    /// Calls in flight per daemon
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Timed runs per setup (on the same daemons); the median is reported
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where to write scaleout.csv
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// The daemon binary [default: cryptodispatchd beside this program]
    #[arg(long)]
    daemon: Option<PathBuf>,
    /// CPU-bound threads to run beside the daemons for the whole experiment (a busy machine:
    /// the daemons' nodes wait for a CPU; no call may fail for it)
    #[arg(long, default_value_t = 0)]
    stress: usize,
    /// Print the CSV on standard output instead of the tables (the rest goes to standard
    /// error); the CSV files are written as always
    #[arg(long)]
    csv: bool,
    /// `tenants`: start the daemons with `--no-light-path` (a quiet tenant's small calls then
    /// wait behind the other tenants' queued work, as before the light path was the daemon's
    /// default)
    #[arg(long)]
    pub no_light_path: bool,
    /// `tenants`: the daemons' light path, their default (kept for scripts that name it)
    #[arg(long, hide = true, conflicts_with = "no_light_path")]
    pub light_path: bool,
    /// `tenants`: seconds of each run (shares, the quiet tenant alone, beside the noisy one)
    #[arg(long, default_value_t = 5.0)]
    pub tenant_secs: f64,
    /// `tenants`: calls each backlogged tenant keeps in flight per daemon in `shares`, at most
    /// 1024 [default: 1 MiB of calls, at least 16: 16 of the default 64 KiB, 256 of 4 KiB]
    #[arg(long)]
    pub tenant_backlog: Option<usize>,
    /// `tenants`: calls the tenant of weight 1 keeps in flight per daemon in `shares`, when it
    /// differs from the other's (`--tenant-backlog`), at most 1024
    #[arg(long)]
    pub w1_backlog: Option<usize>,
    /// `tenants`: the quiet tenant's offered load, as a fraction of its fair share
    #[arg(long, default_value_t = 0.2)]
    pub quiet_load: f64,
    /// `tenants`: the quiet tenant's calls sent together, at the same mean rate (a client
    /// whose calls a pause of its own held back); 1, the default, spaces every call evenly
    #[arg(long, default_value_t = 1)]
    pub quiet_burst: usize,
    /// `tenants`: the noisy tenant's calls open at once, at most (more due are dropped by the
    /// client)
    #[arg(long, default_value_t = 128)]
    pub noisy_open: usize,
    /// How HAProxy picks a daemon for each call [default: leastconn for `tenants`, as
    /// deploy/haproxy.cfg; roundrobin for the others, so that `hetero-static` shows static
    /// weights under a balancer that does not follow the daemons' speed by itself]
    #[arg(long, value_enum)]
    pub balance: Option<Balance>,
}

impl ScaleoutArgs {
    /// The balance algorithm of a setup (`tenants` or one of the others).
    pub fn balance(&self, tenants: bool) -> Balance {
        self.balance.unwrap_or(if tenants {
            Balance::Leastconn
        } else {
            Balance::Roundrobin
        })
    }
}

/// `n` threads that spin on the CPU until dropped.
struct Stress {
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Stress {
    fn start(n: usize) -> Stress {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|i| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = i as u64 + 1;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
                            );
                        }
                    }
                    x
                })
            })
            .collect();
        Stress { stop, threads }
    }
}

impl Drop for Stress {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One setup's daemons.
struct Plan {
    name: &'static str,
    slowdowns: Vec<f64>,
    agent: bool,
    jobs: usize,
}

/// One measured setup.
struct Outcome {
    name: &'static str,
    slowdowns: Vec<f64>,
    jobs: usize,
    /// The median run's makespan.
    makespan: Duration,
    /// Every run's makespan, in order.
    runs: Vec<Duration>,
    retries: u64,
}

impl Outcome {
    fn throughput(&self) -> f64 {
        self.jobs as f64 / self.makespan.as_secs_f64()
    }
}

/// A daemon process, killed on drop.
pub struct DaemonProcess {
    child: Child,
    /// Its gRPC address.
    pub grpc: std::net::SocketAddr,
    agent_port: Option<u16>,
    /// Its metrics address, if it serves them.
    pub metrics: Option<std::net::SocketAddr>,
}

/// A client of HAProxy's frontend `frontend` calling with `token`, on a connection of its own.
pub async fn connect(frontend: std::net::SocketAddr, token: &str) -> Result<Client, String> {
    Client::connect(&ClientConfig {
        url: format!("http://{frontend}"),
        token: Some(zeroize::Zeroizing::new(token.to_owned())),
        max_message_bytes: 64 << 20,
        ..ClientConfig::default()
    })
    .await
    .map_err(|e| e.to_string())
}

/// HAProxy's setup in front of `daemons`, on a free port (with their agent checks, if `agent`).
pub fn behind_haproxy(
    daemons: &[DaemonProcess],
    agent: bool,
    balance: Balance,
) -> Result<Setup, String> {
    Ok(Setup {
        frontend: format!(
            "127.0.0.1:{}",
            haproxy::free_port().map_err(|e| e.to_string())?
        )
        .parse()
        .map_err(|e| format!("{e}"))?,
        backends: daemons
            .iter()
            .enumerate()
            .map(|(i, d)| Backend {
                name: format!("d{i}"),
                grpc: d.grpc,
                agent_port: if agent { d.agent_port } else { None },
            })
            .collect(),
        agent_inter_ms: 100,
        check_inter_ms: 500,
        balance,
        tenant_groups: 1,
    })
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The largest job the daemons take (their `--max-request-bytes`): its bytes, with the call's
/// other fields, within the limit tonic then enforces.
const MAX_JOB_BYTES: usize = 16 << 20;

/// Starts a daemon on the keys of `dir` and the tokens file `tokens`, its node slowed by
/// `slowdown`, letting calls wait `queue_wait_ms` for admission, with the arguments `extra`
/// besides (its metrics on a free loopback port, say).
pub fn start_daemon(
    binary: &Path,
    dir: &Path,
    tokens: &Path,
    slowdown: f64,
    full_speed: Option<f64>,
    queue_wait_ms: u64,
    extra: &[&str],
) -> Result<DaemonProcess, String> {
    let mut cmd = Command::new(binary);
    cmd.args([
        "--insecure-loopback",
        "--listen",
        "127.0.0.1:0",
        "--agent-port",
        "0",
        "--nodes",
        "1",
    ])
    .arg("--keys")
    .arg(dir.join("keys"))
    .arg("--tokens")
    .arg(tokens)
    .arg("--slowdown")
    .arg(slowdown.to_string())
    .arg("--queue-wait-ms")
    .arg(queue_wait_ms.to_string())
    .arg("--max-request-bytes")
    .arg(MAX_JOB_BYTES.to_string())
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if let Some(mibps) = full_speed {
        cmd.arg("--agent-full-speed").arg(mibps.to_string());
    }
    cmd.args(extra);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = tx.send(line);
        }
        for _ in lines {}
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| "the daemon did not start within 30 s".to_string())?;
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse::<std::net::SocketAddr>().ok())
    };
    Ok(DaemonProcess {
        grpc: field("grpc=").ok_or("no gRPC address in the ready line")?,
        agent_port: field("agent=").map(|a| a.port()),
        metrics: field("metrics="),
        child,
    })
}

/// The raw time of a call of `job_bytes` on a node, in nanoseconds: the 16 KiB packet's `raw`
/// time in proportion to its bytes (a node's per-packet costs make a small call's real time
/// somewhat longer).
fn call_ns(raw: f64, job_bytes: usize) -> f64 {
    raw * job_bytes as f64 / PACKET as f64
}

/// The default slowdown: a 16 KiB packet takes `packet_ms`, and a call of `job_bytes` at
/// least `min_call_ms` (at least 1: the nodes are never sped up; the caller keeps it within
/// the daemons' bound, [`NodeSpec::MAX_SLOWDOWN`], so that calls of a few hundred bytes and
/// less may take less).
///
/// A call's own path costs about the same whatever its bytes: on a 2-core machine with
/// 512-byte calls, HAProxy, the client and the daemons' HTTP/2 took both cores (190% of
/// them) while the nodes, slowed for 16 KiB packets of 2 ms, could serve 32,000 calls a
/// second. The tenants then got what the calls' path delivered, each connection about
/// alike, rather than what the nodes' shares give them (docs/RESULTS.md, Tenants).
fn default_slowdown(raw: f64, packet_ms: f64, min_call_ms: f64, job_bytes: usize) -> f64 {
    let by_packet = packet_ms * 1e6 / raw;
    let by_call = min_call_ms * 1e6 / call_ns(raw, job_bytes.max(1));
    by_packet.max(by_call).max(1.0)
}

/// The raw time of one 16 KiB AES-128-CBC packet on this machine, from a one-node service's
/// calibration (the fastest of a few runs), in nanoseconds.
fn raw_packet_ns() -> Result<f64, String> {
    let service = Service::builder()
        .packet_size(PACKET)
        .aes_cluster([NodeSpec::new()])
        .build()
        .map_err(|e| e.to_string())?;
    let ns = service
        .metrics()
        .nodes
        .first()
        .map(|n| n.unit_times.get(Cmd::Encrypt));
    service.shutdown();
    ns.ok_or_else(|| "the calibration service has no node".to_string())
}

/// Runs `scaleout`.
/// A reporter of a setup measured apart (the tenants'): prints its table or CSV and writes its
/// file in `out`.
pub type Report = Box<dyn FnOnce(&Path, bool) -> Result<(), String>>;

/// The tenants setup, given by the binary's `main.rs` (it builds on this module): measures
/// with HAProxy's and the daemon's binaries, in a scratch folder, at a slowdown.
pub type TenantsSetup<'a> =
    &'a dyn Fn(&Path, &Path, &Path, f64, &ScaleoutArgs) -> Result<Report, String>;

/// Runs the setups `args` names (the tenants one through `tenants`).
pub fn run(args: &ScaleoutArgs, tenants: TenantsSetup) -> Result<(), String> {
    check(args)?;
    let Some(haproxy_bin) = haproxy::find() else {
        println!(
            "scaleout: haproxy is not on PATH; install it (apt-get install haproxy) to run this experiment"
        );
        return Ok(());
    };
    let daemon_bin = match &args.daemon {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("cryptodispatchd"),
    };
    if !daemon_bin.is_file() {
        return Err(format!(
            "{} not found: build it first (cargo build --release --bin cryptodispatchd) or give --daemon",
            daemon_bin.display()
        ));
    }
    let mut wanted: Vec<&'static str> = Vec::new();
    for name in args.setups.split(',').map(str::trim) {
        match SETUPS.iter().find(|s| **s == name) {
            Some(s) => wanted.push(s),
            None => {
                return Err(format!(
                    "unknown setup {name}; expected some of {}",
                    SETUPS.join(",")
                ));
            }
        }
    }

    let raw = raw_packet_ns()?;
    // The hetero setups slow their second daemon three times more, within the daemons' bound.
    let slowest = if wanted.iter().any(|s| s.starts_with("hetero")) {
        HETERO_FACTOR
    } else {
        1.0
    };
    let slowdown = args.slowdown.unwrap_or_else(|| {
        default_slowdown(raw, args.packet_ms, args.min_call_ms, args.job_bytes)
            .min(NodeSpec::MAX_SLOWDOWN / slowest)
    });
    // The fast daemon's speed, in MiB/s: what the agent checks report as 100%.
    let full_speed = PACKET as f64 / (raw * slowdown) * 1e9 / f64::from(1u32 << 20);
    let say = |text: String| {
        if args.csv {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    };
    say(format!(
        "scaleout: one 16 KiB AES-128-CBC packet takes {:.1} us here; daemons slowed {:.1}x \
         ({:.2} ms per packet, {:.1} MiB/s per daemon); {} B jobs (about {:.2} ms each on a \
         node), {} calls in flight per daemon\n",
        raw / 1e3,
        slowdown,
        raw * slowdown / 1e6,
        full_speed,
        args.job_bytes,
        call_ns(raw, args.job_bytes) * slowdown / 1e6,
        args.concurrency
    ));

    if args.stress > 0 {
        say(format!(
            "scaleout: {} CPU-bound threads run beside the daemons\n",
            args.stress
        ));
    }
    let _stress = Stress::start(args.stress);
    let dir = std::env::temp_dir().join(format!("cryptodispatch-scaleout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = prepare(&dir).and_then(|()| {
        let plans: Vec<Plan> = wanted
            .iter()
            .filter(|&&name| name != "tenants")
            .map(|&name| plan(name, slowdown, args.jobs))
            .collect();
        let mut outcomes = Vec::new();
        for p in &plans {
            let fs = p.agent.then_some(full_speed);
            outcomes.push(measure(&haproxy_bin, &daemon_bin, &dir, p, fs, args)?);
        }
        let tenants = if wanted.contains(&"tenants") {
            Some(tenants(&haproxy_bin, &daemon_bin, &dir, slowdown, args)?)
        } else {
            None
        };
        Ok((outcomes, tenants))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (outcomes, tenants) = result?;
    if !outcomes.is_empty() {
        report(&outcomes, &args.out, args.csv)?;
    }
    if let Some(t) = tenants {
        if !outcomes.is_empty() && !args.csv {
            println!();
        }
        t(&args.out, args.csv)?;
    }
    Ok(())
}

fn plan(name: &'static str, slowdown: f64, jobs: usize) -> Plan {
    let (slowdowns, agent) = match name {
        "one" => (vec![slowdown], false),
        "two" => (vec![slowdown; 2], false),
        "four" => (vec![slowdown; 4], false),
        "hetero-static" => (vec![slowdown, HETERO_FACTOR * slowdown], false),
        _ => (vec![slowdown, HETERO_FACTOR * slowdown], true),
    };
    // Work in proportion to the daemons' total speed (a slowed-3x daemon counts a third).
    let speed: f64 = slowdowns.iter().map(|s| slowdown / s).sum();
    Plan {
        name,
        jobs: (jobs as f64 * speed).round() as usize,
        slowdowns,
        agent,
    }
}

/// The key folder and tokens file the daemons share, private to this user.
fn prepare(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).map_err(|e| e.to_string())?;
    let private = |path: PathBuf, bytes: &[u8]| -> Result<(), String> {
        std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())
    };
    private(keys.join("bench.aes"), &KEY)?;
    private(dir.join("tokens"), format!("{TOKEN} bench\n").as_bytes())
}

fn measure(
    haproxy_bin: &Path,
    daemon_bin: &Path,
    dir: &Path,
    plan: &Plan,
    full_speed: Option<f64>,
    args: &ScaleoutArgs,
) -> Result<Outcome, String> {
    let daemons = plan
        .slowdowns
        .iter()
        .map(|&s| {
            start_daemon(
                daemon_bin,
                dir,
                &dir.join("tokens"),
                s,
                full_speed,
                10_000,
                &[],
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let setup = behind_haproxy(&daemons, plan.agent, args.balance(false))?;
    let proxy = Haproxy::start(haproxy_bin, &setup, dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let concurrency = args.concurrency * plan.slowdowns.len();
    let (runs, retries) = runtime.block_on(async {
        let client = connect(proxy.frontend, TOKEN).await?;
        // Let HAProxy read the agents' weights (several agent intervals), and warm up.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let jobs = Jobs::new(args.job_bytes)?;
        drive(&client, &jobs, concurrency, 2 * concurrency).await?;
        let mut runs = Vec::new();
        for _ in 0..args.repeat {
            let start = Instant::now();
            drive(&client, &jobs, concurrency, plan.jobs).await?;
            runs.push(start.elapsed());
        }
        Ok::<_, String>((runs, client.retries()))
    })?;
    let mut sorted = runs.clone();
    sorted.sort();
    drop(proxy);
    drop(daemons);
    Ok(Outcome {
        name: plan.name,
        slowdowns: plan.slowdowns.clone(),
        jobs: plan.jobs,
        makespan: sorted[sorted.len() / 2],
        runs,
        retries,
    })
}

/// A few distinct jobs and their expected results (computed once, before any timing).
pub struct Jobs {
    /// The plaintexts.
    pub plains: Vec<Vec<u8>>,
    /// Their AES-128-CBC encryptions, by the library's one-shot call.
    pub expected: Vec<Vec<u8>>,
}

impl Jobs {
    /// Eight jobs of `bytes` bytes.
    pub fn new(bytes: usize) -> Result<Jobs, String> {
        let key = AesKey::new(&KEY).map_err(|e| e.to_string())?;
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let plains: Vec<Vec<u8>> = (0..8u8)
            .map(|i| (0..bytes).map(|j| (j as u8).wrapping_mul(31) ^ i).collect())
            .collect();
        let expected = plains
            .iter()
            .map(|p| key.one_shot(op, &IV, p).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        Ok(Jobs { plains, expected })
    }

    /// The call that encrypts job `k` (of the jobs in turn) with the daemons' key `bench`.
    pub fn request(&self, k: usize) -> AesRequest {
        AesRequest {
            key: "bench".into(),
            mode: proto::Mode::Cbc as i32,
            iv: IV.to_vec(),
            padding: proto::Padding::None as i32,
            data: self.plains[k % self.plains.len()].clone(),
        }
    }
}

/// Sends `count` jobs with `concurrency` in flight and checks every result.
async fn drive(
    client: &Client,
    jobs: &Jobs,
    concurrency: usize,
    count: usize,
) -> Result<(), String> {
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let k = i % jobs.plains.len();
        let request = jobs.request(k);
        let client = client.clone();
        tasks.push((
            k,
            tokio::spawn(async move {
                let r = client.encrypt(request).await;
                drop(permit);
                r
            }),
        ));
    }
    for (k, task) in tasks {
        let got = task
            .await
            .map_err(|e| e.to_string())?
            .map_err(|s| format!("a job failed: {s:?}"))?;
        if got != jobs.expected[k] {
            return Err("a job returned wrong data".into());
        }
    }
    Ok(())
}

fn report(outcomes: &[Outcome], out: &Path, csv_only: bool) -> Result<(), String> {
    let header = [
        "setup",
        "daemons",
        "slowdowns",
        "jobs",
        "makespan_ms",
        "throughput_jobs_s",
    ];
    let mut table = Table::new(&header);
    let mut csv = Csv::new(&header.join(","));
    for o in outcomes {
        let slowdowns: Vec<String> = o.slowdowns.iter().map(|s| f(*s, 1)).collect();
        let row = vec![
            o.name.to_string(),
            o.slowdowns.len().to_string(),
            slowdowns.join(":"),
            o.jobs.to_string(),
            f(o.makespan.as_secs_f64() * 1e3, 1),
            f(o.throughput(), 1),
        ];
        csv.row(&row);
        table.row(row);
    }
    if csv_only {
        print!("{}", csv.as_str());
    } else {
        print!("{}", table.render());
    }
    for o in outcomes {
        let runs: Vec<String> = o.runs.iter().map(|r| f(r.as_secs_f64() * 1e3, 0)).collect();
        say!(
            csv_only,
            "  {}: runs of {} ms (the median is reported)",
            o.name,
            runs.join(", ")
        );
    }
    let retries: u64 = outcomes.iter().map(|o| o.retries).sum();
    say!(
        csv_only,
        "every result checked against the library's one-shot result; {retries} calls retried\n"
    );
    let find = |name: &str| outcomes.iter().find(|o| o.name == name);
    if let Some(one) = find("one") {
        for (name, target) in [("two", 1.8), ("four", 3.2)] {
            if let Some(o) = find(name) {
                let x = o.throughput() / one.throughput();
                let verdict = if x >= target { "met" } else { "NOT met" };
                say!(
                    csv_only,
                    "{name}: {x:.2}x the throughput of one (target {target}x: {verdict})"
                );
            }
        }
    }
    if let (Some(s), Some(a)) = (find("hetero-static"), find("hetero-agent")) {
        let cut = 1.0 - a.makespan.as_secs_f64() / s.makespan.as_secs_f64();
        let verdict = if cut >= 0.25 { "met" } else { "NOT met" };
        say!(
            csv_only,
            "hetero-agent: makespan {:.0}% below hetero-static (target 25%: {verdict})",
            cut * 100.0
        );
    }
    let path = write_file(out, "scaleout.csv", csv.as_str())?;
    say!(csv_only, "\nCSV: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_slowdown_makes_a_small_call_take_the_least_call_time() {
        // A 16 KiB packet of 10 us: 2 ms a packet is a slowdown of 200, which makes a call of
        // 64 KiB 8 ms, above the floor.
        let s = default_slowdown(10_000.0, 2.0, 0.25, 64 * 1024);
        assert!((s - 200.0).abs() < 1e-9, "{s}");
        // A call of 512 B would take 62.5 us at 200: the slowdown grows so that it takes
        // 0.25 ms.
        let s = default_slowdown(10_000.0, 2.0, 0.25, 512);
        assert!((s - 800.0).abs() < 1e-9, "{s}");
        assert!((call_ns(10_000.0, 512) * s / 1e6 - 0.25).abs() < 1e-9);
        // A machine slower than the aim is not sped up.
        assert_eq!(default_slowdown(1e7, 2.0, 0.25, 64 * 1024), 1.0);
    }
}
