//! The `many-chains` live workload: an overloaded cluster of many chains, all submitted at
//! once (a child module of `live`, which runs it like `hetero-chains`).
//!
//! Four AES nodes slowed 1×, 1×, 4×, 4× ([`SLOWDOWNS`]) and [`CHAINS`] AES-128-CBC
//! encryption jobs of [`PACKETS`] packets each (16 KiB by default, or `--size`), in random
//! order. Every job is submitted at the start, so the nodes' queues are full while the chains
//! are bound: where a chain is bound is decided before any has ended. This is the kind of
//! work on which a policy that binds a chain to whichever node has room loses most in the
//! simulator (docs/ALGORITHM.md §11.15); the live run checks the same on real nodes.

use rand::RngExt;
use rand::rngs::ChaCha8Rng;

use cryptodispatch::Mode;

use super::{Item, encryption};

/// The nodes' slowdowns: two fast nodes and two four times slower.
pub const SLOWDOWNS: [f64; 4] = [1.0, 1.0, 4.0, 4.0];
/// How many chains.
pub const CHAINS: usize = 160;
/// Packets per chain, uniform over this inclusive range.
pub const PACKETS: (usize, usize) = (4, 16);
/// The default packet size.
pub const PACKET_BYTES: usize = 16 * 1024;

/// The jobs: [`CHAINS`] CBC chains of [`PACKETS`] packets of `packet` bytes.
pub fn items(rng: &mut ChaCha8Rng, packet: usize) -> Vec<Item> {
    (0..CHAINS)
        .map(|_| {
            let packets = rng.random_range(PACKETS.0..=PACKETS.1);
            encryption(rng, Mode::Cbc, packets * packet)
        })
        .collect()
}
