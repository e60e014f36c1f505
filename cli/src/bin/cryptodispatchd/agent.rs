//! HAProxy's agent check: a TCP connection to `--agent-port` gets one line and is closed.
//!
//! - `drain` while the daemon drains (after SIGTERM): HAProxy sends it no new requests;
//! - `down` when a cluster has no node up, none at all or every one
//!   [`NodeState::Down`] (failed and not restarted
//!   yet): the daemon cannot serve that algorithm;
//! - otherwise `N% ready up`: a weight relative to the server's configured weight, and the
//!   words that undo an earlier `drain` or `down` of this agent (HAProxy lets only the agent
//!   revert what it set, so a daemon restarted on the same address comes back by itself).
//!   `ready` also ends a `maint` set by hand: to keep a server out, stop its agent checks
//!   (`disable agent` on HAProxy's admin socket) or drain the daemon with SIGTERM.
//!
//! # The weight
//! A pure function of a snapshot of [`Service::metrics`](cryptodispatch::Service::metrics),
//! taken from the AES cluster (the bulk of the work; the Ed25519 cluster when there is no AES
//! one):
//!
//! 1. **speed**: S = Σ over the nodes that are up of U / t_i, U the packet size and t_i the
//!    node's unit time for encryption (nanoseconds per packet: calibrated at start-up, refined
//!    from measured service times, so a slowed or busy core shows); a node that is down adds
//!    nothing, so a cluster with a failed node reports less;
//! 2. **full speed**: F = `--agent-full-speed` (MiB/s) when given, else Σ U·f_i / t_i, the same
//!    nodes without their emulated slowdown f_i: what this machine does at full speed;
//! 3. **occupancy**: u = min(1, B / C), B the bytes queued on the nodes plus the packets waiting
//!    in the cluster's receive, cluster and wait queues (at U bytes each), C the nodes' queue
//!    capacity in bytes;
//! 4. **weight** = 100 · (S / F) · (1 − u / 2), rounded and kept within 1..=256 (HAProxy's
//!    largest weight; 0 would mean drain).
//!
//! So an idle daemon at full speed says `100%`, one slowed three times `33%`, and a full queue
//! halves the weight, steering new work towards daemons with room. To compare machines of
//! different speeds, give every daemon the same `--agent-full-speed` (the fastest one's speed):
//! each then reports its speed relative to it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cryptodispatch::packet::Cmd;
use cryptodispatch::runtime::NodeState;
use cryptodispatch::{ClusterKind, Metrics};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::conn::{AcceptBackoff, linger_close};
use crate::daemon::Daemon;

/// Connections answered at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 32;
/// How long writing the line may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// One node, as the weight sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeLoad {
    /// Nanoseconds per packet of the packet size (encryption; signing for Ed25519).
    pub unit_time_ns: f64,
    /// The emulated slowdown factor (1 = none).
    pub slowdown: f64,
    /// Bytes queued on the node, the packet in service included.
    pub queued_bytes: u64,
    /// Whether the node is up (a node that is down failed and is not back yet).
    pub up: bool,
}

/// One cluster, as the weight sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterLoad {
    /// Which cluster.
    pub kind: ClusterKind,
    /// Its nodes.
    pub nodes: Vec<NodeLoad>,
    /// Packets admitted and not yet on a node.
    pub waiting_packets: usize,
}

/// What the weight needs besides the snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeightConfig {
    /// The service's packet size in bytes.
    pub packet_size: usize,
    /// Each node's queue capacity in bytes.
    pub node_capacity: u64,
    /// The speed that counts as 100%, in bytes per second; `None`: the nodes' own speed
    /// without emulated slowdown.
    pub full_speed: Option<f64>,
}

/// The agent's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// A weight in percent of the configured weight.
    Weight(u32),
    /// Take no new work.
    Drain,
    /// The daemon cannot serve.
    Down,
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Weight(w) => write!(f, "{w}% ready up"),
            Reply::Drain => f.write_str("drain"),
            Reply::Down => f.write_str("down"),
        }
    }
}

/// The snapshot the weight is computed from.
pub fn clusters(metrics: &Metrics) -> Vec<ClusterLoad> {
    metrics
        .clusters
        .iter()
        .map(|c| {
            let cmd = match c.kind {
                ClusterKind::Aes => Cmd::Encrypt,
                ClusterKind::Ed25519 => Cmd::Sign,
            };
            ClusterLoad {
                kind: c.kind,
                nodes: metrics
                    .nodes_of(c.kind)
                    .map(|n| NodeLoad {
                        unit_time_ns: n.unit_times.get(cmd),
                        slowdown: n.slowdown,
                        queued_bytes: n.queued_bytes,
                        up: n.state == NodeState::Up,
                    })
                    .collect(),
                waiting_packets: c.receive_queue + c.cluster_queue + c.wait_queue,
            }
        })
        .collect()
}

/// The agent's answer for a snapshot (see the module documentation).
pub fn reply(clusters: &[ClusterLoad], draining: bool, config: &WeightConfig) -> Reply {
    if draining {
        return Reply::Drain;
    }
    if clusters.iter().any(|c| !c.nodes.iter().any(|n| n.up)) {
        return Reply::Down;
    }
    let aes = clusters.iter().find(|c| c.kind == ClusterKind::Aes);
    let Some(cluster) = aes.or(clusters.first()) else {
        return Reply::Down;
    };
    let unit = config.packet_size as f64;
    let rate = |n: &NodeLoad, factor: f64| {
        if n.unit_time_ns.is_finite() && n.unit_time_ns > 0.0 {
            unit * factor / n.unit_time_ns
        } else {
            0.0
        }
    };
    let speed: f64 = cluster
        .nodes
        .iter()
        .filter(|n| n.up)
        .map(|n| rate(n, 1.0))
        .sum();
    let full = match config.full_speed {
        Some(bytes_per_s) => bytes_per_s / 1e9,
        None => cluster
            .nodes
            .iter()
            .map(|n| rate(n, n.slowdown.max(1.0)))
            .sum(),
    };
    if !(full.is_finite() && full > 0.0) {
        return Reply::Weight(1);
    }
    let queued = cluster
        .nodes
        .iter()
        .map(|n| n.queued_bytes as f64)
        .sum::<f64>()
        + cluster.waiting_packets as f64 * unit;
    let capacity = config.node_capacity as f64 * cluster.nodes.len() as f64;
    let occupancy = if capacity > 0.0 {
        (queued / capacity).min(1.0)
    } else {
        1.0
    };
    let weight = 100.0 * (speed / full) * (1.0 - occupancy / 2.0);
    Reply::Weight(weight.round().clamp(1.0, 256.0) as u32)
}

/// Answers agent checks on `listener` until the task is dropped.
///
/// At most [`MAX_CONNECTIONS`] are answered at once; the others wait to be accepted. A failed
/// `accept` (out of descriptors) is logged and backed off (`conn::AcceptBackoff`).
/// Each connection gets its line and is closed lingeringly (`linger`: HAProxy's `agent-send`
/// string is read and discarded rather than reset).
pub async fn serve(listener: TcpListener, daemon: Arc<Daemon>, linger: Duration) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = AcceptBackoff::new("agent check");
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let mut socket = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(e) => {
                backoff.failed(&e).await;
                continue;
            }
        };
        backoff.succeeded();
        let line = format!("{}\n", daemon.agent_reply());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.write_all(line.as_bytes())).await;
            drop(permit);
            linger_close(socket, linger).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKET: usize = 16 * 1024;

    fn node(unit_time_ns: f64, slowdown: f64, queued_bytes: u64) -> NodeLoad {
        NodeLoad {
            unit_time_ns,
            slowdown,
            queued_bytes,
            up: true,
        }
    }

    fn down(mut n: NodeLoad) -> NodeLoad {
        n.up = false;
        n
    }

    fn aes(nodes: Vec<NodeLoad>, waiting_packets: usize) -> Vec<ClusterLoad> {
        vec![
            ClusterLoad {
                kind: ClusterKind::Aes,
                nodes,
                waiting_packets,
            },
            ClusterLoad {
                kind: ClusterKind::Ed25519,
                nodes: vec![node(20_000.0, 1.0, 0)],
                waiting_packets: 0,
            },
        ]
    }

    fn config(full_speed: Option<f64>) -> WeightConfig {
        WeightConfig {
            packet_size: PACKET,
            node_capacity: 8 * PACKET as u64,
            full_speed,
        }
    }

    #[test]
    fn idle_full_speed_is_100_and_slowdown_scales_it() {
        let c = config(None);
        assert_eq!(
            reply(&aes(vec![node(10_000.0, 1.0, 0)], 0), false, &c),
            Reply::Weight(100)
        );
        // Two nodes at full speed: still 100% of this machine.
        let two = aes(vec![node(10_000.0, 1.0, 0), node(10_000.0, 1.0, 0)], 0);
        assert_eq!(reply(&two, false, &c), Reply::Weight(100));
        // Slowed three times (its unit time shows it): a third.
        assert_eq!(
            reply(&aes(vec![node(30_000.0, 3.0, 0)], 0), false, &c),
            Reply::Weight(33)
        );
        // One of two nodes slowed four times: (1 + 1/4) / 2.
        let mixed = aes(vec![node(10_000.0, 1.0, 0), node(40_000.0, 4.0, 0)], 0);
        assert_eq!(reply(&mixed, false, &c), Reply::Weight(63));
    }

    #[test]
    fn a_fleet_reference_speed_compares_machines() {
        // 16 KiB per 10 µs = 1.6384 GB/s; the reference is twice that.
        let c = config(Some(2.0 * PACKET as f64 / 10_000.0 * 1e9));
        assert_eq!(
            reply(&aes(vec![node(10_000.0, 1.0, 0)], 0), false, &c),
            Reply::Weight(50)
        );
        // Faster than the reference: above 100%, at most 256%.
        let fast = aes(vec![node(1_000.0, 1.0, 0)], 0);
        assert_eq!(reply(&fast, false, &c), Reply::Weight(256));
    }

    #[test]
    fn queued_work_lowers_the_weight_down_to_half() {
        let c = config(None);
        let half_full = aes(vec![node(10_000.0, 1.0, 4 * PACKET as u64)], 0);
        assert_eq!(reply(&half_full, false, &c), Reply::Weight(75));
        let overfull = aes(vec![node(10_000.0, 1.0, 8 * PACKET as u64)], 500);
        assert_eq!(reply(&overfull, false, &c), Reply::Weight(50));
        let slow_and_full = aes(vec![node(100_000.0, 100.0, 8 * PACKET as u64)], 0);
        assert_eq!(reply(&slow_and_full, false, &c), Reply::Weight(1));
    }

    #[test]
    fn drain_and_down() {
        let c = config(None);
        assert_eq!(
            reply(&aes(vec![node(10_000.0, 1.0, 0)], 0), true, &c),
            Reply::Drain
        );
        assert_eq!(reply(&aes(vec![], 0), false, &c), Reply::Down);
        assert_eq!(reply(&[], false, &c), Reply::Down);
        assert_eq!(Reply::Weight(75).to_string(), "75% ready up");
        assert_eq!(Reply::Drain.to_string(), "drain");
        assert_eq!(Reply::Down.to_string(), "down");
    }

    #[test]
    fn a_cluster_whose_every_node_is_down_is_down() {
        let c = config(None);
        let all_down = aes(
            vec![down(node(10_000.0, 1.0, 0)), down(node(10_000.0, 1.0, 0))],
            0,
        );
        assert_eq!(reply(&all_down, false, &c), Reply::Down);
        // The Ed25519 cluster counts as much as the AES one.
        let mut ed_down = aes(vec![node(10_000.0, 1.0, 0)], 0);
        ed_down[1].nodes = vec![down(node(20_000.0, 1.0, 0))];
        assert_eq!(reply(&ed_down, false, &c), Reply::Down);
        // Draining still says drain.
        assert_eq!(reply(&all_down, true, &c), Reply::Drain);
        // One node of two down: up, at half the speed of the machine.
        let half = aes(
            vec![node(10_000.0, 1.0, 0), down(node(10_000.0, 1.0, 0))],
            0,
        );
        assert_eq!(reply(&half, false, &c), Reply::Weight(50));
    }

    #[test]
    fn nonsense_unit_times_give_the_least_weight() {
        let c = config(None);
        let broken = aes(vec![node(0.0, 1.0, 0), node(f64::NAN, 1.0, 0)], 0);
        assert_eq!(reply(&broken, false, &c), Reply::Weight(1));
    }
}
