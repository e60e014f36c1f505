//! The live workloads of independent one-packet AES jobs under one key, against the primitives
//! called directly: `cbc16k` (CBC encryption on every core), `manycbc` (a serial mode on two
//! nodes, beside `openssl speed`) and `gcm` (GCM sealing on two nodes, beside `openssl speed`).

use cryptodispatch::Mode;
use cryptodispatch::crypto::{AesOp, Direction};
use rand::RngExt;
use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

use crate::live::{Item, LiveArgs, Spec, Work, random_bytes, whole_blocks};
use crate::support::cores;

/// The shape of a workload of independent one-packet jobs under one AES key.
struct Shape {
    /// Bytes of all jobs together, unless --jobs says how many.
    total: usize,
    /// The fewest jobs it runs.
    min_jobs: usize,
    /// AES nodes.
    nodes: usize,
    /// Submitting threads, unless --threads says otherwise.
    submitters: usize,
    /// What follows the size in the tables.
    label: String,
    /// The `openssl speed` cipher run beside the rounds.
    openssl: Option<&'static str>,
}

/// Jobs of --size bytes (default 16 KiB), one packet each, all under one AES key, each job's
/// spec drawn by `spec`.
fn independent(
    args: &LiveArgs,
    shape: Shape,
    mut spec: impl FnMut(&mut ChaCha8Rng) -> Spec,
) -> Result<Work, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let size = whole_blocks(
        "--size",
        args.size.unwrap_or(16 * 1024),
        &args.workload.name(),
    )?;
    let jobs = args.jobs.unwrap_or(shape.total / size).max(shape.min_jobs);
    let items = (0..jobs)
        .map(|_| Item {
            spec: spec(&mut rng),
            data: random_bytes(&mut rng, size),
            sig: [0; 64],
        })
        .collect();
    Ok(Work {
        aes_keys: vec![random_bytes(&mut rng, 16)],
        seeds: Vec::new(),
        items,
        slowdowns: vec![1.0; shape.nodes.max(1)],
        ed_nodes: 0,
        packet_size: size,
        size_label: format!("{size}{}", shape.label),
        submitters: args.threads.unwrap_or(shape.submitters),
        greedy: false,
        openssl: shape.openssl,
    })
}

/// `cbc16k`: 64 MiB of CBC encryption jobs on one node per core (or --nodes).
pub fn cbc16k(args: &LiveArgs) -> Result<Work, String> {
    let shape = Shape {
        total: 64 << 20,
        min_jobs: 1,
        nodes: args.nodes.unwrap_or_else(cores),
        submitters: 1,
        label: String::new(),
        openssl: None,
    };
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    independent(args, shape, |rng| Spec::Aes {
        key: 0,
        op,
        iv: rng.random(),
    })
}

/// `manycbc`: 128 MiB (at least 64 jobs) in --mode cbc, ofb or cfb on 2 nodes (or --nodes),
/// from 2 submitting threads.
pub fn manycbc(args: &LiveArgs) -> Result<Work, String> {
    let cipher = match args.mode {
        Mode::Cbc => "aes-128-cbc",
        Mode::Ofb => "aes-128-ofb",
        Mode::Cfb => "aes-128-cfb",
        mode => {
            return Err(format!(
                "manycbc: --mode {mode} must be one of cbc, ofb, cfb"
            ));
        }
    };
    let shape = Shape {
        total: 128 << 20,
        min_jobs: 64,
        nodes: args.nodes.unwrap_or(2),
        submitters: 2,
        label: format!(" {}", args.mode),
        openssl: Some(cipher),
    };
    let op = AesOp::new(Direction::Encrypt, args.mode);
    independent(args, shape, |rng| Spec::Aes {
        key: 0,
        op,
        iv: rng.random(),
    })
}

/// `gcm`: 128 MiB of GCM sealing jobs on 2 nodes (or --nodes).
pub fn gcm(args: &LiveArgs) -> Result<Work, String> {
    let shape = Shape {
        total: 128 << 20,
        min_jobs: 1,
        nodes: args.nodes.unwrap_or(2),
        submitters: 1,
        label: String::new(),
        openssl: Some("aes-128-gcm"),
    };
    // A fresh nonce per job, as a sender must use.
    independent(args, shape, |rng| Spec::Gcm {
        key: 0,
        nonce: rng.random(),
    })
}
