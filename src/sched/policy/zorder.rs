//! `zorder`: the space-filling-curve balancer of seed `002_…` (Zhang Huyin et al., "基于空间填充
//! 曲线的动态负载均衡算法"; docs/ALGORITHM.md §11.9): two load indices per node, encoded together as a
//! Z-order (Morton) code, the node with the code nearest to that of (0, 0) wins, ties by least
//! connections.
//!
//! The source's indices are a web server's CPU and memory use, both in [0, 1]. A node here has
//! neither, so:
//! - memory use → **queue occupancy** `o_i = queued_bytes_i / capacity_i`: the share of the
//!   node's buffer in use, which is what memory use measures for a server holding requests;
//! - CPU use → **busy share** `b_i = queued_work_i / Σ_k queued_work_k`: the node's share of the
//!   expected processing time queued in the whole cluster (0 for every node when nothing is
//!   queued). Queued work counts each packet at the node's own unit time for its command, so a
//!   slow node's share rises faster than its occupancy, as a slow server's CPU use does.
//!
//! The rule, for one packet, among the nodes with room for it (strategy 1):
//! 1. **Exclusion.** A node with `o_i > queue` or `b_i > busy` is "at full load" (the source's
//!    state 0) and is skipped. Defaults are the source's thresholds: memory 90 % → `queue = 0.9`,
//!    CPU 75 % → `busy = 0.75`.
//! 2. **Encoding.** Each index is quantised to k = [`ZOrder::BITS`] bits by the source's
//!    repeated halving of [0, 1] (left half `[lo, mid)` → 0, right half `[mid, hi]` → 1), i.e.
//!    the level `min(⌊x·2^k⌋, 2^k − 1)`. The bits are interleaved, most significant first,
//!    with occupancy on the even positions counted from 0 at the top and busy share on the odd
//!    ones: the source puts memory on the even bits and CPU on the odd bits, after Geohash, whose
//!    bit 0 (its first, most significant bit) is the even-placed longitude. Occupancy therefore
//!    takes the highest bit, which also suits this scheduler: the queue is the hard limit
//!    (strategy 1), so a node's coarse occupancy should outrank its share of the work.
//! 3. **Search.** The seed starts at the code of (0, 0), which is 0, and widens the searched code
//!    range until a node falls in. Every code is ≥ 0, so the first node found is the one with
//!    the smallest code: the search is a minimum over the eligible nodes.
//! 4. **Ties.** A code stands for a cell, which several nodes may share; among them the source
//!    takes the least connections: here the fewest queued packets, then the lowest index.
//!
//! When every node with room is excluded the source declares the cluster paralysed (no server in
//! state 1). Declining here would hold the packet, and every unbound packet behind it, until a
//! completion although nodes have room, so the policy falls back to the least-loaded node with
//! room by the same curve: the smallest code among all nodes with room, thresholds ignored,
//! same tie-breaks. It returns `None` only when no node has room. (The busy share is relative:
//! a single-node cluster holds all of its work, so its node is always served by the fallback.)
//!
//! k = 4 bits per index (16 levels, 256 cells): coarse enough that nodes with nearly equal
//! loads share a cell and the source's least-connections step decides between them, fine enough
//! that one packet in a queue of a few packets moves a node to another cell.

use crate::packet::PacketMeta;
use crate::sched::error::ConfigError;
use crate::sched::policy::Policy;
use crate::sched::policy::entry::{Entry, Param};
use crate::sched::status::ClusterView;

/// Z-order code over queue occupancy and busy share, excluding nodes over their thresholds;
/// ties by least connections.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ZOrder {
    queue: f64,
    busy: f64,
}

impl ZOrder {
    /// The registry entry (docs/ALGORITHM.md §11.9).
    pub(super) const ENTRY: Entry = Entry {
        name: "zorder",
        aliases: &[],
        description: "the smallest Z-order code of (queue occupancy, busy share), \
                      overloaded nodes skipped",
        params: &[
            Param::number(
                "queue",
                Self::DEFAULT_QUEUE,
                "occupancy above which a node is skipped, in [0, 1]",
            ),
            Param::number(
                "busy",
                Self::DEFAULT_BUSY,
                "busy share above which a node is skipped, in [0, 1]",
            ),
        ],
        build: |p| Ok(Box::new(ZOrder::new(p.number("queue"), p.number("busy"))?)),
    };

    /// Bits per index in the Morton code (the code has twice as many).
    pub const BITS: u32 = 4;
    /// The source's memory threshold (90 %), applied to queue occupancy.
    pub const DEFAULT_QUEUE: f64 = 0.9;
    /// The source's CPU threshold (75 %), applied to the busy share.
    pub const DEFAULT_BUSY: f64 = 0.75;

    /// The policy with thresholds `queue` (occupancy) and `busy` (busy share).
    ///
    /// # Errors
    /// [`ConfigError::BadPolicyParameter`] unless both lie in [0, 1] (1 excludes nothing).
    pub fn new(queue: f64, busy: f64) -> Result<Self, ConfigError> {
        for (name, v) in [("queue", queue), ("busy", busy)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(ConfigError::BadPolicyParameter {
                    policy: Self::ENTRY.name(),
                    message: format!("{name} = {v}: a threshold must lie in [0, 1]"),
                });
            }
        }
        Ok(ZOrder { queue, busy })
    }

    /// The queue-occupancy threshold.
    pub fn queue(&self) -> f64 {
        self.queue
    }

    /// The busy-share threshold.
    pub fn busy(&self) -> f64 {
        self.busy
    }

    /// Node `i`'s two indices: (queue occupancy, busy share), each in [0, 1].
    pub fn indices(view: &ClusterView<'_>, i: usize) -> (f64, f64) {
        let n = view.node(i);
        let occupancy = n.queued_bytes() as f64 / n.capacity() as f64;
        let total: f64 = view.nodes().iter().map(|n| n.queued_work()).sum();
        let busy = if total > 0.0 {
            n.queued_work() / total
        } else {
            0.0
        };
        (occupancy, busy)
    }

    /// The [`ZOrder::BITS`]-bit level of an index in [0, 1], by repeated halving.
    pub fn level(x: f64) -> u32 {
        let top = (1u32 << Self::BITS) - 1;
        // NaN and negatives go to 0 (`as` saturates), values ≥ 1 to the top level.
        ((x * f64::from(1u32 << Self::BITS)).floor() as u32).min(top)
    }

    /// The Morton code of two levels: occupancy bits on the even positions from the top (the
    /// highest bit is occupancy's), busy-share bits on the odd ones.
    pub fn morton(occupancy: u32, busy: u32) -> u32 {
        (0..Self::BITS).fold(0, |code, b| {
            code | (((occupancy >> b) & 1) << (2 * b + 1)) | (((busy >> b) & 1) << (2 * b))
        })
    }

    /// Node `i`'s code.
    pub fn code(view: &ClusterView<'_>, i: usize) -> u32 {
        let (o, b) = Self::indices(view, i);
        Self::morton(Self::level(o), Self::level(b))
    }

    /// Whether node `i` is over a threshold (the source's "full load" state).
    pub fn excluded(&self, view: &ClusterView<'_>, i: usize) -> bool {
        let (o, b) = Self::indices(view, i);
        o > self.queue || b > self.busy
    }

    /// Smallest (code, queued packets, index) among `nodes`.
    fn best(view: &ClusterView<'_>, nodes: impl Iterator<Item = usize>) -> Option<usize> {
        nodes.min_by_key(|&i| (Self::code(view, i), view.node(i).queued_packets(), i))
    }
}

impl Default for ZOrder {
    fn default() -> Self {
        ZOrder {
            queue: Self::DEFAULT_QUEUE,
            busy: Self::DEFAULT_BUSY,
        }
    }
}

impl Policy for ZOrder {
    fn name(&self) -> &'static str {
        Self::ENTRY.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let eligible = view.candidates(packet).filter(|&i| !self.excluded(view, i));
        Self::best(view, eligible).or_else(|| Self::best(view, view.candidates(packet)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Cmd, UnitTimes};
    use crate::sched::status::NodeStatus;

    fn meta(len: u64) -> PacketMeta {
        crate::sched::policy::test_packet(Cmd::Encrypt, false, len)
    }

    fn row(unit: f64, capacity: u64, queued: &[u64]) -> NodeStatus {
        let mut n = NodeStatus::new(UnitTimes::uniform(unit), capacity, 16);
        for &len in queued {
            n.enqueue(&meta(len));
        }
        n
    }

    #[test]
    fn levels_halve_the_unit_interval() {
        assert_eq!(ZOrder::level(0.0), 0);
        assert_eq!(ZOrder::level(0.4999), 0b0111);
        assert_eq!(ZOrder::level(0.5), 0b1000);
        assert_eq!(ZOrder::level(0.25), 0b0100);
        assert_eq!(ZOrder::level(1.0), 0b1111);
        assert_eq!(ZOrder::level(f64::NAN), 0);
    }

    #[test]
    fn occupancy_takes_the_high_bit() {
        // o = 1010, b = 0110 → o3 b3 o2 b2 o1 b1 o0 b0 = 1 0 0 1 1 1 0 0.
        assert_eq!(ZOrder::morton(0b1010, 0b0110), 0b1001_1100);
        assert_eq!(ZOrder::morton(0b1000, 0), 0b1000_0000);
        assert_eq!(ZOrder::morton(0, 0b1000), 0b0100_0000);
        assert_eq!(ZOrder::morton(0b1111, 0b1111), 0xff);
        // Any node in the upper half of occupancy sorts after every node in the lower half.
        assert!(ZOrder::morton(0b1000, 0) > ZOrder::morton(0b0111, 0b1111));
    }

    #[test]
    fn every_node_excluded_falls_back_to_the_smallest_code() {
        // Both nodes a quarter full (over queue = 0.2); node 1's share of the work is smaller.
        let rows = [row(20.0, 64, &[16]), row(10.0, 64, &[16])];
        let view = ClusterView::new(&rows);
        let mut p = ZOrder::new(0.2, 1.0).unwrap();
        assert!(p.excluded(&view, 0) && p.excluded(&view, 1));
        assert_eq!(p.select(&view, &meta(16)), Some(1));
        // A packet no node has room for: none.
        assert_eq!(p.select(&view, &meta(64)), None);
    }

    #[test]
    fn parameters_are_checked() {
        for (q, b) in [
            (-0.1, 0.5),
            (0.5, 1.5),
            (f64::NAN, 0.5),
            (0.5, f64::INFINITY),
        ] {
            assert!(
                matches!(
                    ZOrder::new(q, b),
                    Err(ConfigError::BadPolicyParameter {
                        policy: "zorder",
                        ..
                    })
                ),
                "{q} {b}"
            );
        }
        assert!(ZOrder::new(0.0, 1.0).is_ok());
    }
}
