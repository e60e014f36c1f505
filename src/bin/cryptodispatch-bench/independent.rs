//! The live workloads of independent one-packet AES jobs under one key, against the primitives
//! called directly: `cbc16k` (CBC encryption on every core), `manycbc` (a serial mode on two
//! nodes, beside `openssl speed`), `parallel` (CTR, ECB or CBC decryption, the same) and `gcm`
//! (GCM sealing on two nodes, beside `openssl speed`).

use cryptodispatch::{AesOp, Direction, Mode};
use rand::RngExt;
use rand::rngs::ChaCha8Rng;

use crate::live::{Item, LiveArgs, Spec, Work, aes_item, random_bytes};
use crate::support::{cores, fits_in_memory};

/// Jobs of --size bytes (default 16 KiB; over 256 KiB, cut), all under one AES key, each made by
/// `item`: `total` bytes of them (or --jobs), at least `min_jobs`, on `nodes` AES nodes, from
/// `submitters` threads (or --threads).
fn independent(
    args: &LiveArgs,
    total: usize,
    min_jobs: usize,
    nodes: usize,
    submitters: usize,
    mut item: impl FnMut(&mut ChaCha8Rng, usize) -> Item,
) -> Result<Work, String> {
    let slowdowns = vec![1.0; nodes.max(1)];
    Work::aes(
        args,
        16 * 1024,
        &slowdowns,
        submitters,
        false,
        |rng, size| {
            let jobs = args.jobs.unwrap_or(total / size).max(min_jobs);
            fits_in_memory(jobs, size)?;
            Ok((0..jobs).map(|_| item(rng, size)).collect())
        },
    )
}

/// `cbc16k`: 64 MiB of CBC encryption jobs on one node per core (or --nodes).
pub fn cbc16k(args: &LiveArgs) -> Result<Work, String> {
    let nodes = args.nodes.unwrap_or_else(cores);
    independent(args, 64 << 20, 1, nodes, 1, |rng, size| {
        aes_item(rng, AesOp::new(Direction::Encrypt, Mode::Cbc), size)
    })
}

/// `manycbc` (`serial`: --mode cbc, ofb or cfb, encryption) or `parallel` (--mode ctr, ecb, or
/// cbc for CBC decryption): 128 MiB (512 MiB of jobs of 1 MiB or longer; at least 64 jobs) on
/// 2 nodes (or --nodes), from 2 submitting threads, beside `openssl speed -evp` of the same
/// (`-decrypt` for CBC decryption).
pub fn of_mode(args: &LiveArgs, serial: bool) -> Result<Work, String> {
    let (direction, cipher) = match (serial, args.mode) {
        (true, Mode::Cbc) => (Direction::Encrypt, "aes-128-cbc"),
        (true, Mode::Ofb) => (Direction::Encrypt, "aes-128-ofb"),
        (true, Mode::Cfb) => (Direction::Encrypt, "aes-128-cfb"),
        (false, Mode::Ctr) => (Direction::Encrypt, "aes-128-ctr"),
        (false, Mode::Ecb) => (Direction::Encrypt, "aes-128-ecb"),
        (false, Mode::Cbc) => (Direction::Decrypt, "aes-128-cbc -decrypt"),
        (_, mode) => {
            let (name, modes) =
                [("parallel", "ctr, ecb, cbc"), ("manycbc", "cbc, ofb, cfb")][serial as usize];
            return Err(format!("{name}: --mode {mode} must be one of {modes}"));
        }
    };
    let op = AesOp::new(direction, args.mode);
    let nodes = args.nodes.unwrap_or(2);
    let size = args.size.unwrap_or(16 * 1024);
    // Jobs of 1 MiB and longer make rounds of 512 MiB, about 50 ms: in a round of 128 MiB
    // (64 such jobs per node), the first placements and the last packets weighed 5-10%.
    let total = if size >= 1 << 20 {
        512 << 20
    } else {
        128 << 20
    };
    let mut work = independent(args, total, 64, nodes, 2, |rng, size| {
        aes_item(rng, op, size)
    })?;
    if !serial && args.packet.is_none() && !args.in_place && size <= WHOLE_PARALLEL {
        // A parallel job on RustCrypto runs out of place: a job of one packet then needs no
        // copy at all (its output is the job's), where a job cut into packets copies each
        // back into the job's buffer. So jobs of up to 1 MiB are one packet each; longer ones
        // are cut at 256 KiB as before, which measured better for 4 MiB jobs than 1 MiB
        // packets (docs/RESULTS.md, "Out of place on the AMD EPYC").
        work.packet_size = size;
    }
    let short = cipher.trim_start_matches("aes-128-");
    work.size_label = format!("{} {short}", work.size_label);
    work.openssl = Some(cipher);
    Ok(work)
}

/// The longest job `parallel` runs as one packet, unless --packet says otherwise or --in-place.
const WHOLE_PARALLEL: usize = 1 << 20;

/// `gcm`: 128 MiB of GCM sealing jobs on 2 nodes (or --nodes), beside `openssl speed`.
pub fn gcm(args: &LiveArgs) -> Result<Work, String> {
    let nodes = args.nodes.unwrap_or(2);
    let mut work = independent(args, 128 << 20, 1, nodes, 1, |rng, size| Item {
        // A fresh nonce per job, as a sender must use.
        spec: Spec::Gcm {
            key: 0,
            nonce: rng.random(),
        },
        data: random_bytes(rng, size),
        sig: [0; 64],
    })?;
    work.openssl = Some("aes-128-gcm");
    Ok(work)
}
