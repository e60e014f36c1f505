//! The live workloads on one AES cluster of four slowed nodes (emulated), CBC (dependent) and
//! ECB (independent) encryption jobs under one key, against the primitives called directly by
//! one thread per node with the same slowdowns taking jobs greedily: `hetero`, `hetero-chains`
//! and `many-chains` (`live --help` says what each runs). `many-chains` submits all its chains
//! at once, so the nodes' queues are full while the chains are bound: where a chain is bound is
//! decided before any has ended. This is the kind of work on which a policy that binds a chain
//! to whichever node has room loses most in the simulator (docs/ALGORITHM.md §11.15); the live
//! run checks the same on real nodes.

use cryptodispatch::{AesOp, Direction::Encrypt, Mode};
use rand::RngExt;
use rand::seq::SliceRandom;

use crate::live::{Item, LiveArgs, Work, aes_item};
use crate::support::fits_in_memory;

/// The slowdowns of `hetero` and `hetero-chains`.
const SLOWDOWNS: [f64; 4] = [1.0, 1.5, 2.0, 3.0];
/// The slowdowns of `many-chains`: two fast nodes and two four times slower.
pub const MANY_SLOWDOWNS: [f64; 4] = [1.0, 1.0, 4.0, 4.0];
/// How many chains `many-chains` runs.
pub const CHAINS: usize = 160;
/// Packets per chain of `many-chains`, uniform over this inclusive range.
pub const PACKETS: (usize, usize) = (4, 16);

/// `hetero`: --jobs (default 120) CBC or ECB jobs of 1-8 packets.
pub fn hetero(args: &LiveArgs) -> Result<Work, String> {
    let jobs = args.jobs.unwrap_or(120);
    Work::aes(args, 256 * 1024, &SLOWDOWNS, 1, true, |rng, packet| {
        fits_in_memory(jobs, packet.saturating_mul(8))?;
        Ok((0..jobs)
            .map(|_| {
                let packets = rng.random_range(1..=8usize);
                let mode = if rng.random_bool(0.5) {
                    Mode::Cbc
                } else {
                    Mode::Ecb
                };
                aes_item(rng, AesOp::new(Encrypt, mode), packets * packet)
            })
            .collect())
    })
}

/// `hetero-chains`: 40 CBC chains of 10-30 packets among 80 ECB jobs of 1-2 packets, shuffled.
pub fn chains(args: &LiveArgs) -> Result<Work, String> {
    Work::aes(args, 64 * 1024, &SLOWDOWNS, 1, true, |rng, packet| {
        fits_in_memory(120, packet.saturating_mul(30))?;
        let mut items: Vec<Item> = (0..120)
            .map(|k| {
                let (mode, packets) = if k < 40 {
                    (Mode::Cbc, rng.random_range(10..=30usize))
                } else {
                    (Mode::Ecb, rng.random_range(1..=2usize))
                };
                aes_item(rng, AesOp::new(Encrypt, mode), packets * packet)
            })
            .collect();
        items.shuffle(rng);
        Ok(items)
    })
}

/// `many-chains`: [`CHAINS`] CBC chains of [`PACKETS`] packets.
pub fn many_chains(args: &LiveArgs) -> Result<Work, String> {
    Work::aes(args, 16 * 1024, &MANY_SLOWDOWNS, 1, true, |rng, packet| {
        fits_in_memory(CHAINS, packet.saturating_mul(PACKETS.1))?;
        Ok((0..CHAINS)
            .map(|_| {
                let packets = rng.random_range(PACKETS.0..=PACKETS.1);
                aes_item(rng, AesOp::new(Encrypt, Mode::Cbc), packets * packet)
            })
            .collect())
    })
}
