//! `live`: real jobs through a real `Service` on this machine, against the same work done by the
//! same number of threads calling the primitives directly, measured in the same run; the
//! options of every live workload, and the interface its runner is chosen by ([`Runner`]).
//!
//! The workloads that compare the service with the primitives called directly make their jobs
//! ([`Work`]: `independent.rs`, `mixed.rs`, `hetero.rs`) and leave the rest to [`measure`]: the
//! service, its keys and every job are built before the clock starts, which stops when the last
//! handle resolves. The reference runs the same buffers in place on the implementations the
//! service runs, on threads pinned like the nodes; every output is compared with it after the
//! timing (fast but wrong is an error, not a result). Each side keeps its fastest of `--reps`.
//! The speed workloads (`manycbc`, `parallel`, `gcm`) add `openssl speed -multi N` of the same
//! cipher (`openssl.rs`), whose median of the runs interleaved with the rounds is a column, and
//! the kernel: the jobs in the implementation's lane sets, without the service.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Args, Parser, ValueEnum};
use cryptodispatch::crypto::{
    AesImpl, AesKey, AesOp, ChainState, Direction, ImplTable, LaneItem, SigningKey, VerifyingKey,
    run_packets_with,
};
use cryptodispatch::runtime::{SlowCore, emulate_slowdown};
use cryptodispatch::sim::research::experiments::Paired;
use cryptodispatch::{
    Admission, ClusterKind, Job, JobHandle, JobOutput, Mode, NodeSpec, PolicySpec, Service,
    ServiceBuilder,
};
use rand::rngs::ChaCha8Rng;
use rand::{Rng, RngExt, SeedableRng};

use crate::openssl::{Baseline, Speed};
use crate::report::{Csv, Table, f, pct, pcts};
use crate::support::{
    Text, cores, count_up_to, lock, on_threads_timed, parse_policies, percentile, policy_help,
    positive,
};

/// The live workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Many independent AES-128-CBC encryption jobs of 16 KiB on the AES nodes.
    Cbc16k,
    /// AES in every mode and both directions, Ed25519 sign and verify; sizes 64 B to 64 KiB
    /// (or --size), from several submitting threads.
    Mixed,
    /// One AES cluster of 4 nodes slowed 1x, 1.5x, 2x, 3x (emulated); CBC (dependent) and ECB
    /// (independent) jobs of 1-8 packets of 256 KiB (or --size, cut into 256 KiB packets).
    Hetero,
    /// The same 4 slowed nodes with long chains: 40 AES-128-CBC encryption jobs of 10-30
    /// packets (dependent, bound to their node to the end) among 80 ECB jobs of 1-2 packets,
    /// in random order; packets of 64 KiB (or --size, up to 256 KiB).
    HeteroChains,
    /// Overload of many chains: 4 nodes slowed 1x, 1x, 4x, 4x and 160 CBC chains of 4-16
    /// packets of 16 KiB (or --size, up to 256 KiB), all submitted at once (hetero.rs).
    ManyChains,
    /// Ed25519 verification: one job per signature against batch jobs (Job::verify_batch).
    Verify,
    /// Head-of-line blocking: a 16-byte ECB job submitted right after a 64 MiB CBC job; its
    /// latency as a share of the big job's time, under --admission (or both with --compare).
    Hol,
    /// Tiny jobs: 64-byte ECB jobs end to end, one at a time and in bursts (--burst).
    Tiny,
    /// Many independent AES-128 encryption jobs of 16 KiB (or --size) in a serial mode (--mode
    /// cbc, ofb or cfb; default cbc) on 2 AES nodes (or --nodes), from 2 submitting threads,
    /// against the primitives called directly and against `openssl speed -multi <nodes> -evp
    /// aes-128-<mode>` run in the same rounds: what lanes give.
    Manycbc,
    /// Many independent AES-128-GCM encryption jobs of 16 KiB (or --size; in 256 KiB packets
    /// when longer) on 2 AES nodes (or --nodes), against the primitives called directly and
    /// against `openssl speed -multi <nodes> -evp aes-128-gcm` run in the same rounds.
    Gcm,
    /// Many independent AES-128 jobs of 16 KiB (or --size) of a parallel operation (--mode ctr,
    /// ecb, or cbc for CBC decryption), 128 MiB of them (512 MiB of jobs of 1 MiB or longer),
    /// on 2 AES nodes (or --nodes), from 2 submitting threads, against the same jobs run
    /// directly and `openssl speed -multi <nodes>` of the same.
    Parallel,
    /// PKCS#7 padding's cost: 48 AES-128-CBC encryption jobs of 1 MiB (or --jobs, --size) on
    /// 2 AES nodes (or --nodes), without and with padding, in the same rounds.
    Padded,
    /// One chained AES-128-CBC encryption job (64 MiB, or --size, in 16 KiB packets, or
    /// --packet; a single job, not a `Stream`) on one AES node, against the cipher called
    /// directly and `openssl speed -evp aes-128-cbc` on one core.
    Stream,
    /// Two tenants sharing the service (tenants.rs): a quiet tenant's p99 latency beside a
    /// noisy one offering ten times its share, against its p99 alone; and byte shares of two
    /// backlogged tenants of weights 1 and 3. Jobs of 16 KiB (or --size) on AES nodes on
    /// every core but one, which the clients use (or --nodes).
    Tenants,
    /// Tenant isolation on configurations drawn at random (tenant_mix.rs; --reps of them, from
    /// --seed), designed apart from `tenants`: a quiet tenant of weight 1-4 sending CBC jobs of
    /// 2-128 KiB at 5-20% of its share at random times, beside one to three noisy tenants of
    /// weight 1-4 sending CBC, CTR or CBC-decryption jobs of 4 KiB-2 MiB at 5-20 times theirs;
    /// the quiet tenant's p99 beside them against alone.
    TenantMix,
}

impl Workload {
    /// The workload's name, as `--workload` takes it.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_owned())
    }
}

/// Options of `live`.
#[derive(Debug, Args)]
pub struct LiveArgs {
    /// The workload.
    #[arg(long, value_enum, default_value = "cbc16k")]
    pub workload: Workload,
    /// The policy to run (ignored with --compare).
    #[arg(long, default_value = "paper", long_help = policy_help(
        "The policy to run (ignored with --compare)."))]
    pub policy: String,
    /// Run several policies side by side (default: paper and hhs-acdid; see --policies).
    #[arg(long)]
    pub compare: bool,
    /// The policies --compare runs, comma-separated.
    #[arg(long, default_value = "paper,hhs-acdid", long_help = policy_help(
        "The policies --compare runs, comma-separated."))]
    pub policies: String,
    /// Fix the job size in bytes (mixed: 256, 1024, 16384, ...; cbc16k: the job size).
    #[arg(long)]
    pub size: Option<usize>,
    /// Number of jobs (default by workload; gcm, manycbc: 128 MiB; parallel: 128 MiB, or 512
    /// MiB of jobs of 1 MiB or longer; hetero-chains: its 40 chains, 80 ECB).
    #[arg(long, value_parser = positive)]
    pub jobs: Option<usize>,
    /// AES nodes, 1 to 1024 (default: one per core, 2 for gcm); mixed gets as many Ed25519
    /// nodes too.
    #[arg(long, value_parser = thread_count)]
    pub nodes: Option<usize>,
    /// Submitting threads, 1 to 1024 (default: 1 for cbc16k and hetero, 2 for mixed).
    #[arg(long, value_parser = thread_count)]
    pub threads: Option<usize>,
    /// Rounds of runs (the reference, then each policy); each side's fastest run counts. With
    /// --compare the policies take turns going first; from 3 rounds the first is also compared
    /// with each other round by round (geometric mean of the makespan ratio, 95% interval).
    #[arg(long, default_value_t = 5, value_parser = rep_count)]
    pub reps: usize,
    /// Seed for the job mix and the data.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// verify: the share of signatures tampered with (a batch holding one falls back to splits).
    #[arg(long, default_value_t = 0.0)]
    pub bad_share: f64,
    /// How packets wait for a node: `fair` (the service's default: each job its own queue,
    /// deficit round robin over bytes) or `fifo` (the paper's first come first served).
    #[arg(long, default_value = "fair")]
    pub admission: Admission,
    /// AES jobs of one packet up to this many bytes run on the submitting thread (the
    /// service's `inline_limit`; 0: every job goes to a node).
    #[arg(long, default_value_t = ServiceBuilder::DEFAULT_INLINE_LIMIT)]
    pub inline_limit: usize,
    /// Runs a packet may have (the service's `max_attempts`): from 2 a node keeps each packet's
    /// input (a copy, or the input itself for a packet run out of place), to run it again
    /// elsewhere should the node fail; 1 keeps nothing.
    #[arg(long, default_value_t = ServiceBuilder::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u32,
    /// Runs every packet in place, on a copy of its input made first (the service's
    /// `out_of_place(false)`), rather than GCM chains' and RustCrypto's ECB, CBC decryption
    /// and CTR packets out of place.
    #[arg(long)]
    pub in_place: bool,
    /// manycbc: the serial mode (cbc, ofb or cfb); parallel: ctr, ecb, or cbc (decryption).
    #[arg(long, default_value = "cbc")]
    pub mode: Mode,
    /// Pin the AES implementation (`rustcrypto`, `lanes-<width>`, `aws-lc`, `ring`, `openssl`)
    /// instead of the one measured fastest per operation.
    #[arg(long)]
    pub implementation: Option<AesImpl>,
    /// tiny: jobs per `submit_burst` call.
    #[arg(long, default_value_t = 64, value_parser = positive)]
    pub burst: usize,
    /// The service's packet size, a positive multiple of 16 up to 16 MiB (default: the job, up
    /// to 256 KiB; stream: 16384, openssl's too). Checked for every workload; mixed, verify,
    /// hol, tiny, padded, tenants and tenant-mix keep their own packet size.
    #[arg(long)]
    pub packet: Option<usize>,
    /// tenant-mix: run only configuration N of the --reps drawn (the others are drawn and
    /// skipped, so N is the configuration, with the seed, that a whole run gives it).
    #[arg(long)]
    pub only_config: Option<usize>,
    /// tenants and tenant-mix, a diagnostic: the noisy tenants' client threads run at this
    /// nice value (1 to 19; Linux), so that on the clients' shared core the quiet tenant's
    /// sender runs whenever it has work (a lock a noisy thread holds then stays held longer).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=19))]
    pub noisy_nice: Option<i32>,
    /// tenants: each AES node's slowdown (`NodeSpec::slowdown`, 1 or more): with small jobs
    /// the clients' shared core, not the node, limits what the tenants are served, and a
    /// slower node makes the node what they share.
    #[arg(long, default_value_t = 1.0)]
    pub slowdown: f64,
    /// tenants: the weights of the backlogged tenants of `shares`, 2 to 8 of them, each 1 to
    /// 1000, separated by colons (default 1:3, the tenants `light` and `heavy`; others are
    /// named t1, t2, ...).
    #[arg(long, default_value = "1:3")]
    pub weights: Weights,
    /// One CSV header line and a row per run instead of tables.
    #[arg(long)]
    pub csv: bool,
}

/// The most threads `--nodes` or `--threads` start, each: as many as the daemon's nodes per
/// cluster. Each is an OS thread; far more failed to spawn, a panic in the submitters' scope.
const MAX_THREADS: usize = 1024;

/// The most rounds `--reps` runs: each runs every side over all the jobs again.
const MAX_REPS: usize = 1000;

/// `--nodes` and `--threads`: 1 to [`MAX_THREADS`].
fn thread_count(s: &str) -> Result<usize, String> {
    count_up_to(s, MAX_THREADS, "threads")
}

/// `--reps`: 1 to [`MAX_REPS`].
fn rep_count(s: &str) -> Result<usize, String> {
    count_up_to(s, MAX_REPS, "rounds")
}

/// The weights of the backlogged tenants of `shares` (`--weights`, colon-separated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weights(pub Vec<u32>);

impl Weights {
    /// Each tenant's name and weight: `light` and `heavy` for the default 1:3, else t1, t2, ...
    pub(crate) fn named(&self) -> Vec<(String, u32)> {
        if self.0 == [1, 3] {
            return vec![("light".to_owned(), 1), ("heavy".to_owned(), 3)];
        }
        (self.0.iter().enumerate())
            .map(|(i, &w)| (format!("t{}", i + 1), w))
            .collect()
    }
}

impl std::str::FromStr for Weights {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let weights = (s.split(':'))
            .map(|w| match w.trim().parse::<u32>() {
                Ok(w @ 1..=1000) => Ok(w),
                _ => Err(format!(
                    "{w:?}: each weight is a whole number from 1 to 1000"
                )),
            })
            .collect::<Result<Vec<u32>, String>>()?;
        if !(2..=8).contains(&weights.len()) {
            return Err(format!(
                "{} weights: give 2 to 8, separated by colons (as 1:3)",
                weights.len()
            ));
        }
        Ok(Weights(weights))
    }
}

impl LiveArgs {
    /// The settings of the default summary: the workload's defaults, both policies, three
    /// rounds.
    pub fn quick(workload: Workload) -> Self {
        let name = workload.name();
        Self::try_parse_from(["live", "--workload", &name, "--compare", "--reps", "3"])
            .unwrap_or_else(|e| e.exit())
    }

    /// The options of `live` from a command line (its first word the command's name).
    pub fn try_parse_from<I, T>(words: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        #[derive(Parser)]
        struct Live {
            #[command(flatten)]
            args: LiveArgs,
        }
        Live::try_parse_from(words).map(|l| l.args)
    }

    /// `--packet`, if given, checked once for every workload by the rule the service builds
    /// by (`ServiceBuilder::build`): a positive multiple of 16, at most
    /// [`ServiceBuilder::MAX_PACKET_SIZE`].
    ///
    /// # Errors
    /// A message naming the option, its value and the workload.
    pub fn packet(&self) -> Result<Option<usize>, String> {
        let Some(packet) = self.packet else {
            return Ok(None);
        };
        let max = ServiceBuilder::MAX_PACKET_SIZE;
        if ServiceBuilder::check_packet_size(packet).is_err() {
            return Err(format!(
                "--packet {packet}: {} needs a positive multiple of 16, at most {max} (16 MiB, \
                 the service's largest packet)",
                self.workload.name()
            ));
        }
        Ok(Some(packet))
    }

    /// The policies to run: `--policies` with `--compare`, else `--policy`.
    fn policy_specs(&self) -> Result<Vec<PolicySpec>, String> {
        if self.compare {
            parse_policies("--policies", Some(&self.policies))
        } else {
            parse_policies("--policy", Some(&self.policy))
        }
    }
}

/// How a live workload runs: what `main.rs`'s `runner` chooses for each workload.
#[derive(Debug, Clone, Copy)]
pub enum Runner {
    /// Its jobs, made from the options, through the service under each policy against the
    /// primitives called directly ([`measure`]), printed by [`print()`].
    Compare(fn(&LiveArgs) -> Result<Work, String>),
    /// A runner of its own, which measures and prints.
    Own(fn(&LiveArgs) -> Result<(), String>),
}

impl Runner {
    /// Runs the workload with `args` and prints its report.
    pub fn run(self, args: &LiveArgs) -> Result<(), String> {
        // Every workload's --packet by the same rule, whether it cuts its jobs by it or not.
        args.packet()?;
        match self {
            Runner::Compare(work) => {
                let rows = measure(args, &work(args)?, &args.policy_specs()?)?;
                print(&rows, args.csv);
                Ok(())
            }
            Runner::Own(run) => run(args),
        }
    }
}

/// What a job does, before its data is made.
#[derive(Debug, Clone, Copy)]
pub enum Spec {
    Aes { key: usize, op: AesOp, iv: [u8; 16] },
    Gcm { key: usize, nonce: [u8; 12] },
    Sign { key: usize },
    Verify { key: usize, valid: bool },
}

/// One job with its data (and, for verify, its signature).
#[derive(Debug, Clone)]
pub struct Item {
    pub spec: Spec,
    pub data: Vec<u8>,
    pub sig: [u8; 64],
}

/// A workload's jobs and the service that runs them: what a [`Runner::Compare`] workload makes.
pub struct Work {
    /// AES keys, by index.
    pub aes_keys: Vec<Vec<u8>>,
    /// Ed25519 signing key seeds, by index.
    pub seeds: Vec<[u8; 32]>,
    /// The jobs.
    pub items: Vec<Item>,
    /// Per AES node: its slowdown factor.
    pub slowdowns: Vec<f64>,
    /// Ed25519 nodes (after the AES nodes).
    pub ed_nodes: usize,
    /// The service's packet size.
    pub packet_size: usize,
    /// The job size, as the tables show it.
    pub size_label: String,
    /// Submitting threads.
    pub submitters: usize,
    /// Whether the reference runs one thread per AES node, each with the node's slowdown,
    /// taking the next job when it is free (else one thread per core, equal shares).
    pub greedy: bool,
    /// The `openssl speed -evp` cipher run beside the rounds, if any.
    pub openssl: Option<&'static str>,
}

/// `n` random bytes.
pub fn random_bytes(rng: &mut ChaCha8Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

/// `value`, given as `flag`, if it is a positive multiple of the AES block, as the workloads'
/// job and packet sizes must be; otherwise the error naming both.
pub fn whole_blocks(flag: &str, value: usize, workload: &str) -> Result<usize, String> {
    if value == 0 || value % 16 != 0 {
        return Err(format!(
            "{flag} {value}: {workload} needs a positive multiple of 16"
        ));
    }
    Ok(value)
}

/// `n` bytes of a fixed pattern, for the workloads whose data need not be random.
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
        .collect()
}

/// An AES operation in a random mode and direction.
pub fn random_op(rng: &mut ChaCha8Rng) -> AesOp {
    let mode = Mode::ALL[rng.random_range(0..4)];
    let direction = if rng.random_bool(0.5) {
        Direction::Encrypt
    } else {
        Direction::Decrypt
    };
    AesOp::new(direction, mode)
}

/// A job of `op` under key 0, of `bytes` random bytes, with a random IV.
pub fn aes_item(rng: &mut ChaCha8Rng, op: AesOp, bytes: usize) -> Item {
    let iv = rng.random();
    Item {
        spec: Spec::Aes { key: 0, op, iv },
        data: random_bytes(rng, bytes),
        sig: [0; 64],
    }
}

impl Work {
    /// `items`' AES jobs (or the error that refuses them) of `--size` bytes (default `packet`) from `--seed`, one key drawn after
    /// them, in packets of `--packet` (default the job, up to 256 KiB), on AES nodes slowed by
    /// `slowdowns`, from `--threads` (default `submitters`), [`greedy`](Self::greedy) or not.
    pub fn aes(
        args: &LiveArgs,
        packet: usize,
        slowdowns: &[f64],
        submitters: usize,
        greedy: bool,
        items: impl FnOnce(&mut ChaCha8Rng, usize) -> Result<Vec<Item>, String>,
    ) -> Result<Work, String> {
        let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
        let size = whole_blocks("--size", args.size.unwrap_or(packet), &args.workload.name())?;
        let items = items(&mut rng, size)?;
        Ok(Work {
            aes_keys: vec![random_bytes(&mut rng, 16)],
            seeds: Vec::new(),
            items,
            slowdowns: slowdowns.to_vec(),
            ed_nodes: 0,
            // Longer jobs in packets of 256 KiB, whose retry copies stay in the cache (larger
            // ones' do not: docs/RESULTS.md, "Packets of long jobs"); a bad --packet is refused.
            packet_size: args.packet()?.unwrap_or(size.min(256 << 10)),
            size_label: size.to_string(),
            submitters: args.threads.unwrap_or(submitters),
            greedy,
            openssl: None,
        })
    }
}

#[derive(Default)]
struct Measured {
    elapsed: Duration,
    latencies: Vec<Duration>,
    /// Every job's output, as both sides produce it.
    outputs: Vec<JobOutput>,
    node_packets: Vec<u64>,
    node_busy: Vec<Duration>,
    ed_busy: Vec<Duration>,
}

/// A job resolved on its submitting thread: its index, output and latency.
type Resolved = (usize, JobOutput, Duration);

/// The service side: built, its jobs submitted from the submitting threads, each waiting its own.
fn run_service(args: &LiveArgs, work: &Work, policy: &PolicySpec) -> Result<Measured, String> {
    let cores = cores();
    let slowed = work.slowdowns.iter().enumerate();
    let mut builder: ServiceBuilder = Service::builder()
        .aes_cluster(slowed.map(|(i, &s)| NodeSpec::pinned(i % cores).slowdown(s)))
        .packet_size(work.packet_size)
        .admission(args.admission)
        .inline_limit(args.inline_limit)
        .max_attempts(args.max_attempts)
        .out_of_place(!args.in_place)
        .policy(policy.clone());
    if work.ed_nodes > 0 {
        // Ed25519 messages are one packet each, up to 64 KiB here.
        let ed = (0..work.ed_nodes).map(|i| NodeSpec::pinned(i % cores).capacity(8 * 65536));
        builder = builder.ed25519_cluster(ed);
    }
    if let Some(implementation) = args.implementation {
        builder = builder.aes_implementation(implementation);
    }
    let service = builder.build().text()?;
    let aes = work.aes_keys.iter().map(|k| service.add_aes_key(k));
    let aes: Vec<_> = aes.collect::<Result<_, _>>().text()?;
    let signers = work.seeds.iter().map(|s| service.add_signing_key(s));
    let signers: Vec<_> = signers.collect::<Result<_, _>>().text()?;

    // Jobs, dealt round robin to the submitting threads, built before the clock starts.
    let threads = work.submitters.max(1);
    let mut per_thread: Vec<Vec<(usize, Job)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, item) in work.items.iter().enumerate() {
        let job = match item.spec {
            Spec::Aes { key, op, iv } => Job::aes(aes[key], op, &iv, item.data.clone()),
            Spec::Gcm { key, nonce } => {
                Job::gcm_encrypt(aes[key], &nonce, Vec::new(), item.data.clone())
            }
            Spec::Sign { key } => Job::sign(signers[key], item.data.clone()),
            Spec::Verify { key, .. } => Job::verify(signers[key], item.data.clone(), &item.sig),
        };
        per_thread[i % threads].push((i, job));
    }

    // Each submitting thread waits for its own jobs once it has submitted them all, as an
    // application's threads would (and as the reference's threads each keep their own outputs),
    // so resolving the handles is shared between the threads rather than left to one.
    let (results, elapsed) = on_threads_timed(per_thread, false, |_, jobs| {
        let mut handles = jobs
            .into_iter()
            .map(|(i, job)| service.submit(job).map(|h| (i, h)).text())
            .collect::<Result<Vec<_>, String>>()?;
        // The last-submitted first: one sleep until the tail is done, instead of a wake-up per
        // job (latencies are stamped where the jobs complete, not by this loop).
        handles.reverse();
        handles
            .into_iter()
            .map(|(i, h)| {
                let (out, latency) = wait_timed(h).map_err(|e| format!("job {i} failed: {e}"))?;
                Ok((i, out, latency))
            })
            .collect::<Result<Vec<Resolved>, String>>()
    })?;
    let mut outputs = vec![JobOutput::Verified(false); work.items.len()];
    let mut latencies = Vec::with_capacity(work.items.len());
    for (i, out, latency) in results.into_iter().collect::<Result<Vec<_>, _>>()?.concat() {
        latencies.push(latency);
        outputs[i] = out;
    }
    let metrics = service.metrics();
    service.shutdown();
    use ClusterKind::{Aes, Ed25519};
    Ok(Measured {
        elapsed,
        latencies,
        outputs,
        node_packets: metrics.nodes_of(Aes).map(|n| n.packets).collect(),
        node_busy: metrics.nodes_of(Aes).map(|n| n.busy).collect(),
        ed_busy: metrics.nodes_of(Ed25519).map(|n| n.busy).collect(),
    })
}

/// How long the bench waits for one job before it reports the job as never resolved, rather
/// than hang: far longer than any job here takes.
pub const JOB_PATIENCE: Duration = Duration::from_secs(60);

/// Waits for a job, and returns its output with its latency (submission to completion).
fn wait_timed(mut h: JobHandle) -> Result<(JobOutput, Duration), String> {
    match h.wait_timeout(JOB_PATIENCE) {
        Some(r) => r
            .map(|o| (o, h.latency().unwrap_or_default()))
            .map_err(|e| e.to_string()),
        None => Err(format!(
            "not resolved within {} s (lost)",
            JOB_PATIENCE.as_secs()
        )),
    }
}

/// The reference: the same jobs run directly, on the implementations the service runs (the
/// one `pinned` with --implementation, or the shared measured table), on threads pinned like
/// the nodes: one per core, each working through an equal share dealt round robin; or, for a
/// [`Work::greedy`] workload, one per AES node with its slowdown, each taking the next job when
/// it is free. With `kernel`, the AES jobs run in the implementation's lane sets (the kernel).
fn run_reference(work: &Work, pinned: Option<AesImpl>, kernel: bool) -> Result<Measured, String> {
    let table = match pinned {
        Some(i) => Arc::new(ImplTable::pinned(i).text()?),
        None => ImplTable::shared(work.packet_size),
    };
    let keys = work.aes_keys.iter().map(|k| AesKey::new(k));
    let keys: Vec<AesKey> = keys.collect::<Result<_, _>>().text()?;
    let signers = work.seeds.iter().map(|s| SigningKey::from_seed(s));
    let signers: Vec<SigningKey> = signers.collect::<Result<_, _>>().text()?;
    let publics: Vec<VerifyingKey> = signers.iter().map(SigningKey::verifying_key).collect();
    let slowdowns = (work.greedy.then(|| work.slowdowns.clone())).unwrap_or(vec![1.0; cores()]);

    let run_one = |item: &mut Item| -> Result<JobOutput, String> {
        Ok(match item.spec {
            Spec::Aes { key, op, iv } => {
                let mut state = ChainState::for_mode(op.mode, &iv).text()?;
                let len = item.data.len();
                let n = keys[key]
                    .process_with(table.alone(op), op, &mut state, &mut item.data, len, true)
                    .text()?;
                item.data.truncate(n);
                JobOutput::Data(std::mem::take(&mut item.data))
            }
            Spec::Gcm { key, nonce } => {
                let gcm = table.get(AesOp::new(Direction::Encrypt, Mode::Gcm));
                let tag = keys[key]
                    .gcm_seal_in_place_with(gcm, &nonce, &[], &mut item.data)
                    .text()?;
                let ciphertext = std::mem::take(&mut item.data);
                JobOutput::Sealed { ciphertext, tag }
            }
            Spec::Sign { key } => JobOutput::Signature(signers[key].sign(&item.data)),
            Spec::Verify { key, .. } => {
                JobOutput::Verified(publics[key].verify(&item.data, &item.sig).text()?)
            }
        })
    };

    // Jobs of one packet, a lane each, on the first one's implementation: a node's lane set.
    let run_set = |batch: &mut [(usize, Item)]| -> Result<(), String> {
        let aes = |s| match s {
            Spec::Aes { key, op, iv } => Ok((&keys[key], op, iv)),
            _ => Err("a lane set of jobs that are not AES"),
        };
        let mut states = Vec::new();
        for (_, item) in batch.iter() {
            let (_, op, iv) = aes(item.spec)?;
            states.push(ChainState::for_mode(op.mode, &iv).text()?);
        }
        let mut lanes = Vec::new();
        for ((_, item), state) in batch.iter_mut().zip(&mut states) {
            let ((key, op, _), len, last) = (aes(item.spec)?, item.data.len(), true);
            let buf = &mut item.data;
            lanes.push(LaneItem {
                key,
                op,
                state,
                buf,
                len,
                last,
                input: None,
            });
        }
        run_packets_with(table.get(lanes[0].op), &mut lanes).text()
    };

    // One queue for the greedy schedule, else one per thread, each dealt its share.
    let mut queues: Vec<VecDeque<(usize, Item)>> = vec![VecDeque::new(); slowdowns.len()];
    queues.truncate(if work.greedy { 1 } else { slowdowns.len() });
    for (i, item) in work.items.iter().cloned().enumerate() {
        let n = queues.len();
        queues[i % n].push_back((i, item));
    }
    let queues: Vec<Mutex<VecDeque<(usize, Item)>>> = queues.into_iter().map(Mutex::new).collect();
    let cores: Vec<SlowCore> = slowdowns.iter().map(|&f| SlowCore::new(f)).collect();
    let (outs, elapsed) = on_threads_timed(cores, true, |t, core| {
        let queue = &queues[t % queues.len()];
        let mut out = Vec::new();
        loop {
            let mut q = lock(queue);
            let lanes = match q.front().map(|(_, item)| item.spec) {
                Some(Spec::Aes { op, .. }) if kernel => table.lane_width(op),
                _ => 1,
            };
            let mut set: Vec<(usize, Item)> = (0..lanes).map_while(|_| q.pop_front()).collect();
            drop(q);
            if set.len() > 1 {
                let done = run_set(&mut set);
                let ok = |it: Item| done.clone().map(|()| JobOutput::Data(it.data));
                out.extend(set.into_iter().map(|(i, it)| (i, ok(it))));
                continue;
            }
            let Some((i, mut item)) = set.pop() else {
                break;
            };
            let packets = item.data.len().div_ceil(work.packet_size).max(1);
            // Per packet, as a node: real work, then the emulated wait (none unslowed; no
            // usual time here, so all the work is multiplied).
            let clock = core.clock();
            let o = run_one(&mut item);
            if let Some(clock) = clock {
                let per_packet = core.extra(clock.work(), None) / packets as u32;
                (0..packets).for_each(|_| emulate_slowdown(per_packet));
            }
            out.push((i, o));
        }
        out
    })?;
    let mut outputs = vec![JobOutput::Verified(false); work.items.len()];
    for (i, o) in outs.into_iter().flatten() {
        outputs[i] = o?;
    }
    Ok(Measured {
        elapsed,
        outputs,
        ..Measured::default()
    })
}

fn keep_fastest(slot: &mut Option<Measured>, m: Measured) {
    if slot.as_ref().is_none_or(|b| m.elapsed < b.elapsed) {
        *slot = Some(m);
    }
}

/// One row of the live results.
pub struct LiveRow {
    pub workload: String,
    pub policy: String,
    pub nodes: usize,
    pub size: String,
    pub throughput: f64,
    pub reference: f64,
    /// The reference's jobs in the implementation's lane sets (the speed workloads).
    pub kernel: Option<f64>,
    /// `openssl speed` runs of the same cipher and size on as many processes as nodes,
    /// interleaved with the rounds (the gcm and manycbc workloads): their median, spread and
    /// line in the report.
    pub openssl: Option<Baseline>,
    pub ed_ops: f64,
    pub mean_latency_us: f64,
    pub p99_latency_us: f64,
    pub makespan: Duration,
    pub shares: Vec<f64>,
    /// Mean share of the makespan the AES nodes spent running packets.
    pub utilization: f64,
    /// The same for the Ed25519 nodes (0 without any).
    pub ed_utilization: f64,
    /// Every round's makespan in seconds, in round order (the fastest is
    /// [`makespan`](Self::makespan)).
    pub rounds: Vec<f64>,
}

/// Runs the workload under each policy and the reference; checks every output.
pub fn measure(
    args: &LiveArgs,
    work: &Work,
    policies: &[PolicySpec],
) -> Result<Vec<LiveRow>, String> {
    let mut openssl = work.openssl.map(|cipher| {
        Baseline::new(Speed {
            cipher,
            processes: work.slowdowns.len(),
            bytes: work.packet_size,
            seconds: 1,
        })
    });
    // Rounds of (reference, openssl, each policy), so every side meets the same machine
    // conditions; each side keeps its fastest run, and every round's makespan for the paired
    // comparison. The policies take turns going first, so none always runs right after the
    // reference.
    let mut reference: Option<Measured> = None;
    let mut kernel: Option<Measured> = None;
    let mut runs: Vec<Option<Measured>> = policies.iter().map(|_| None).collect();
    let mut rounds: Vec<Vec<f64>> = policies.iter().map(|_| Vec::new()).collect();
    for round in 0..args.reps {
        let pinned = args.implementation;
        keep_fastest(&mut reference, run_reference(work, pinned, false)?);
        if work.openssl.is_some() {
            keep_fastest(&mut kernel, run_reference(work, pinned, true)?);
        }
        if let Some(baseline) = openssl.as_mut() {
            baseline.sample()?;
        }
        for k in 0..policies.len() {
            let i = (round + k) % policies.len();
            let m = run_service(args, work, &policies[i])?;
            rounds[i].push(m.elapsed.as_secs_f64());
            keep_fastest(&mut runs[i], m);
        }
    }
    // At least three openssl runs, whatever the rounds: the column is their median.
    if let Some(baseline) = openssl.as_mut() {
        baseline.finish()?;
    }
    let reference = reference.ok_or("no reference run")?;
    let bytes = work.items.iter().map(|i| i.data.len() as u64).sum::<u64>() as f64;
    let is_ed = |i: &&Item| matches!(i.spec, Spec::Sign { .. } | Spec::Verify { .. });
    let ed_ops = work.items.iter().filter(is_ed).count() as f64;
    let ref_mb_s = bytes / reference.elapsed.as_secs_f64() / 1e6;
    let kernel_mb_s = match kernel {
        Some(k) if k.outputs != reference.outputs => return Err("kernel: wrong output".into()),
        k => k.map(|k| bytes / k.elapsed.as_secs_f64() / 1e6),
    };
    let mut rows = Vec::new();
    for ((policy, m), rounds) in policies.iter().zip(runs).zip(rounds) {
        let m = m.ok_or("no service run")?;
        if let Some(i) = (0..work.items.len()).find(|&i| m.outputs[i] != reference.outputs[i]) {
            return Err(format!(
                "policy {policy}: job {i}'s output differs from the reference"
            ));
        }
        let mut lat = m.latencies.clone();
        lat.sort();
        let total: u64 = m.node_packets.iter().sum::<u64>().max(1);
        rows.push(LiveRow {
            workload: args.workload.name(),
            policy: policy.name().to_owned(),
            nodes: work.slowdowns.len() + work.ed_nodes,
            size: work.size_label.clone(),
            throughput: bytes / m.elapsed.as_secs_f64() / 1e6,
            reference: ref_mb_s,
            kernel: kernel_mb_s,
            openssl: openssl.clone(),
            ed_ops: ed_ops / m.elapsed.as_secs_f64(),
            mean_latency_us: lat.iter().map(|d| d.as_secs_f64()).sum::<f64>()
                / lat.len().max(1) as f64
                * 1e6,
            p99_latency_us: percentile(&lat, 0.99).as_secs_f64() * 1e6,
            makespan: m.elapsed,
            shares: m
                .node_packets
                .iter()
                .map(|&p| p as f64 / total as f64)
                .collect(),
            utilization: m.node_busy.iter().map(Duration::as_secs_f64).sum::<f64>()
                / (m.node_busy.len().max(1) as f64 * m.elapsed.as_secs_f64()),
            ed_utilization: m.ed_busy.iter().map(Duration::as_secs_f64).sum::<f64>()
                / (m.ed_busy.len().max(1) as f64 * m.elapsed.as_secs_f64()),
            rounds,
        });
    }
    Ok(rows)
}

/// The live CSV header; the openssl columns are empty except for the speed workloads (`gcm`,
/// `manycbc`, `parallel`) with openssl on PATH: `openssl_mb_s` is the median of at least three runs interleaved with
/// the rounds, `openssl_min_mb_s` and `openssl_max_mb_s` their spread; `kernel_mb_s` (the same
/// workloads) is the jobs run in the implementation's lane sets without the service.
pub const CSV_HEADER: &str = "workload,policy,nodes,size,throughput_mb_s,reference_mb_s,ratio,mean_latency_us,p99_latency_us,openssl_mb_s,openssl_min_mb_s,openssl_max_mb_s,kernel_mb_s";

/// Prints the rows: a table (or CSV), and with several policies the makespan differences.
pub fn print(rows: &[LiveRow], csv: bool) {
    // The columns both forms start with.
    let head = |r: &LiveRow| {
        vec![
            r.workload.clone(),
            r.policy.clone(),
            r.nodes.to_string(),
            r.size.clone(),
            f(r.throughput, 1),
            f(r.reference, 1),
            f(r.throughput / r.reference, 3),
        ]
    };
    let openssl = |r: &LiveRow| r.openssl.as_ref().and_then(Baseline::median);
    if csv {
        let mut c = Csv::new(CSV_HEADER);
        for r in rows {
            let range = r.openssl.as_ref().and_then(Baseline::range);
            let mut cells = head(r);
            cells.extend([
                f(r.mean_latency_us, 1),
                f(r.p99_latency_us, 1),
                openssl(r).map_or(String::new(), |o| f(o, 1)),
                range.map_or(String::new(), |(lo, _)| f(lo, 1)),
                range.map_or(String::new(), |(_, hi)| f(hi, 1)),
                r.kernel.map_or(String::new(), |k| f(k, 1)),
            ]);
            c.row(&cells);
        }
        print!("{}", c.as_str());
        return;
    }
    let mut t = Table::with_columns(
        "workload,policy,nodes,size,MB/s,reference MB/s,ratio,kernel MB/s,openssl MB/s,vs openssl,Ed25519 ops/s,mean lat us,p99 lat us,makespan ms,AES util,Ed util,AES node shares",
    );
    let or_dash = |x: f64, cell: String| if x > 0.0 { cell } else { "-".into() };
    for r in rows {
        let mut cells = head(r);
        cells.extend([
            r.kernel.map_or("-".into(), |k| f(k, 1)),
            openssl(r).map_or("-".into(), |o| f(o, 1)),
            openssl(r).map_or("-".into(), |o| f(r.throughput / o, 3)),
            or_dash(r.ed_ops, f(r.ed_ops, 0)),
            f(r.mean_latency_us, 1),
            f(r.p99_latency_us, 1),
            f(r.makespan.as_secs_f64() * 1e3, 1),
            pct(r.utilization),
            or_dash(r.ed_utilization, pct(r.ed_utilization)),
            pcts(&r.shares),
        ]);
        t.row(cells);
    }
    print!("{}", t.render());
    if let Some(note) = rows.first().and_then(|r| r.openssl.as_ref()?.describe()) {
        println!("{note}");
    }
    if let Some(first) = rows.first() {
        for r in &rows[1..] {
            let d = 1.0 - first.makespan.as_secs_f64() / r.makespan.as_secs_f64();
            println!(
                "{} completes the {} jobs {} sooner than {}",
                first.policy,
                first.workload,
                pct(d),
                r.policy
            );
        }
        for r in &rows[1..] {
            if let Some(p) = Paired::of(&first.rounds, &r.rounds) {
                println!(
                    "  round by round: {} makespan / {} = {} (95% interval {}-{}), {} faster in {} of {} rounds",
                    first.policy,
                    r.policy,
                    f(p.mean, 3),
                    f(p.low, 3),
                    f(p.high, 3),
                    first.policy,
                    p.wins,
                    p.rounds
                );
            }
        }
    }
}
