//! The live workloads of independent one-packet AES jobs under one key, against the primitives
//! called directly: `cbc16k` (CBC encryption on every core), `manycbc` (a serial mode on two
//! nodes, beside `openssl speed`) and `gcm` (GCM sealing on two nodes, beside `openssl speed`).

use cryptodispatch::Mode;
use cryptodispatch::crypto::{AesOp, Direction};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::live::{Item, LiveArgs, Spec, Work, random_bytes, whole_blocks};
use crate::support::cores;

/// Jobs of --size bytes (default 16 KiB), one packet each, all under one AES key, each job's
/// spec drawn by `spec`: `total` bytes of them (or --jobs), at least `min_jobs`, on `nodes` AES
/// nodes, from `submitters` threads (or --threads).
fn independent(
    args: &LiveArgs,
    total: usize,
    min_jobs: usize,
    nodes: usize,
    submitters: usize,
    mut spec: impl FnMut(&mut ChaCha8Rng) -> Spec,
) -> Result<Work, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let size = whole_blocks(
        "--size",
        args.size.unwrap_or(16 * 1024),
        &args.workload.name(),
    )?;
    let jobs = args.jobs.unwrap_or(total / size).max(min_jobs);
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
        slowdowns: vec![1.0; nodes.max(1)],
        ed_nodes: 0,
        packet_size: size,
        size_label: size.to_string(),
        submitters: args.threads.unwrap_or(submitters),
        greedy: false,
        openssl: None,
    })
}

/// `cbc16k`: 64 MiB of CBC encryption jobs on one node per core (or --nodes).
pub fn cbc16k(args: &LiveArgs) -> Result<Work, String> {
    let nodes = args.nodes.unwrap_or_else(cores);
    independent(args, 64 << 20, 1, nodes, 1, encrypt(Mode::Cbc))
}

/// Encryption in `mode` under key 0, with a random IV.
fn encrypt(mode: Mode) -> impl FnMut(&mut ChaCha8Rng) -> Spec {
    let op = AesOp::new(Direction::Encrypt, mode);
    move |rng| Spec::Aes {
        key: 0,
        op,
        iv: rng.random(),
    }
}

/// `manycbc`: 128 MiB (at least 64 jobs) in --mode cbc, ofb or cfb on 2 nodes (or --nodes),
/// from 2 submitting threads, beside `openssl speed` of the same mode.
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
    let nodes = args.nodes.unwrap_or(2);
    let mut work = independent(args, 128 << 20, 64, nodes, 2, encrypt(args.mode))?;
    work.size_label = format!("{} {}", work.size_label, args.mode);
    work.openssl = Some(cipher);
    Ok(work)
}

/// `gcm`: 128 MiB of GCM sealing jobs on 2 nodes (or --nodes), beside `openssl speed`.
pub fn gcm(args: &LiveArgs) -> Result<Work, String> {
    // A fresh nonce per job, as a sender must use.
    let nodes = args.nodes.unwrap_or(2);
    let mut work = independent(args, 128 << 20, 1, nodes, 1, |rng| Spec::Gcm {
        key: 0,
        nonce: rng.random(),
    })?;
    work.openssl = Some("aes-128-gcm");
    Ok(work)
}
