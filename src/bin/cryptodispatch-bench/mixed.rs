//! The `mixed` live workload: AES in every mode and both directions under three keys, and
//! Ed25519 signing and verification under four, sizes 64 B to 64 KiB (or --size), from two
//! submitting threads, on as many Ed25519 nodes as AES nodes, against the primitives called
//! directly.

use cryptodispatch::crypto::SigningKey;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::live::{Item, LiveArgs, Spec, Work, random_bytes, random_op, whole_blocks};
use crate::support::{cores, fits_in_memory};

/// The job sizes drawn without --size.
const SIZES: [usize; 6] = [64, 256, 1024, 4096, 16384, 65536];

/// The jobs: 4000 (20000 of --size up to 1 KiB), one in ten Ed25519 (half sign, half verify,
/// a tenth of those with a bad signature), the rest AES.
pub fn work(args: &LiveArgs) -> Result<Work, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let aes_nodes = args.nodes.unwrap_or_else(cores);
    if let Some(s) = args.size {
        whole_blocks("--size", s, "mixed")?;
    }
    let jobs = args.jobs.unwrap_or(match args.size {
        Some(s) if s <= 1024 => 20_000,
        _ => 4_000,
    });
    fits_in_memory(
        jobs,
        args.size
            .unwrap_or(SIZES.iter().copied().max().unwrap_or(0)),
    )?;
    let aes_keys: Vec<Vec<u8>> = [16, 24, 32].map(|n| random_bytes(&mut rng, n)).to_vec();
    let seeds: Vec<[u8; 32]> = (0..4).map(|_| rng.random()).collect();
    let signer = |s: &[u8; 32]| SigningKey::from_seed(s).expect("32 bytes");
    let signers: Vec<SigningKey> = seeds.iter().map(signer).collect();
    let mut items = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        let size = args
            .size
            .unwrap_or_else(|| SIZES[rng.random_range(0..SIZES.len())]);
        let spec = if rng.random_bool(0.1) {
            let key = rng.random_range(0..seeds.len());
            if rng.random_bool(0.5) {
                Spec::Sign { key }
            } else {
                Spec::Verify {
                    key,
                    valid: rng.random_bool(0.9),
                }
            }
        } else {
            let op = random_op(&mut rng);
            Spec::Aes {
                key: rng.random_range(0..aes_keys.len()),
                op,
                iv: rng.random(),
            }
        };
        let data = random_bytes(&mut rng, size);
        let sig = match spec {
            Spec::Verify { key, valid } => {
                let mut s = signers[key].sign(&data);
                if !valid {
                    s[7] ^= 0x10;
                }
                s
            }
            _ => [0; 64],
        };
        items.push(Item { spec, data, sig });
    }
    Ok(Work {
        aes_keys,
        seeds,
        items,
        slowdowns: vec![1.0; aes_nodes],
        ed_nodes: aes_nodes,
        packet_size: 16 * 1024,
        size_label: args.size.map_or("64-65536".to_owned(), |s| s.to_string()),
        submitters: args.threads.unwrap_or(2),
        greedy: false,
        openssl: None,
    })
}
