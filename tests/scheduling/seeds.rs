//! The policies from the companion documents (docs/ALGORITHM.md §11): `entropy` (§11.8), `ddwrr`
//! (§11.7), `zorder` (§11.9) and `load-formula` (§11.10). Each rule is checked as its source
//! states it, on small cases computed by hand, by driving a `Scheduler<Len>` and reading the
//! placements; then a property test per policy checks over random states that the choice always
//! has room, and that a policy declines only when no node has room.

use std::collections::VecDeque;

use cryptodispatch::error::ArriveError;
use cryptodispatch::packet::{
    ClusterId, Cmd, Len, Mode, NodeId, Packet, PacketMeta, TaskId, UnitTimes,
};
use cryptodispatch::sched::policy::{Entropy, ZOrder};
use cryptodispatch::sched::{
    Admission, Affinity, ClusterConfig, ClusterView, NodeConfig, Policy, PolicySpec, SchedConfig,
    Scheduler,
};
use proptest::prelude::*;

/// The unit packet length (the unit times refer to it).
const P: u64 = 16;

const C0: ClusterId = ClusterId(0);

fn node(times: [f64; 4], capacity: u64) -> NodeConfig {
    NodeConfig::new(UnitTimes(times), capacity)
}

/// A node with one unit time for every command and room for `packets` unit packets.
fn uniform(unit: f64, packets: u64) -> NodeConfig {
    node([unit; 4], packets * P)
}

fn config(nodes: Vec<NodeConfig>, max_packet: u64) -> SchedConfig {
    SchedConfig {
        clusters: vec![ClusterConfig {
            nodes,
            queue_len: 64,
            max_packet,
        }],
        wait_queue_len: 0,
        affinity: Affinity::Strict,
        unit_len: P,
        admission: Admission::Fifo,
    }
}

fn sched(nodes: Vec<NodeConfig>, policy: &str) -> Scheduler<Len> {
    Scheduler::new(config(nodes, P), &policy.parse().unwrap()).unwrap()
}

/// A packet of cluster 0.
fn packet(task: u64, seq: u32, last: bool, cmd: Cmd, mode: Mode, len: u64) -> Packet<Len> {
    Packet::new(
        PacketMeta::new(TaskId(task), cmd, C0)
            .dependent(mode.is_chained())
            .at(seq, last),
        Len(len),
    )
}

/// A one-packet independent job (ECB) of `len` bytes.
fn ecb(task: u64, cmd: Cmd, len: u64) -> Packet<Len> {
    packet(task, 0, true, cmd, Mode::Ecb, len)
}

/// The nodes of the placements made so far, in order.
fn placed(s: &mut Scheduler<Len>) -> Vec<u32> {
    s.dispatches().map(|d| d.node.0).collect()
}

/// Offers `n` one-unit independent encryption packets (tasks `first..first + n`) one by one
/// and returns where each went.
fn place_ecb(s: &mut Scheduler<Len>, first: u64, n: u64) -> Vec<u32> {
    (first..first + n)
        .flat_map(|t| {
            s.arrive(ecb(t, Cmd::Encrypt, P)).unwrap();
            placed(s)
        })
        .collect()
}

/// A policy that places the first packets where a script says, then asks `inner`; it tells
/// `inner` of every placement and completion, so `inner` sees the state it was driven into.
#[derive(Debug)]
struct Scripted {
    script: VecDeque<usize>,
    inner: Box<dyn Policy>,
}

impl Policy for Scripted {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        match self.script.pop_front() {
            Some(n) => Some(n),
            None => self.inner.select(view, packet),
        }
    }

    fn on_dispatch(&mut self, view: &ClusterView<'_>, node: usize, packet: &PacketMeta) {
        self.inner.on_dispatch(view, node, packet);
    }

    fn on_complete(&mut self, view: &ClusterView<'_>, node: usize, packet: &PacketMeta) {
        self.inner.on_complete(view, node, packet);
    }

    fn alarms(&self) -> u64 {
        self.inner.alarms()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-4
}

// ---------------------------------------------------------------------------------------------
// entropy (docs/ALGORITHM.md §11.8)
// ---------------------------------------------------------------------------------------------

#[test]
fn entropy_weights_by_hand_for_three_nodes() {
    // Nodes 0 and 1: encrypt 10, decrypt 30 (mean unit time 20), 64 bytes. Node 2: 20 for
    // everything, 32 bytes. Scripted: a 32-byte encryption on node 0, two 8-byte decryptions
    // on node 1; then entropy places a 16-byte encryption.
    let ed = [10.0, 30.0, 10.0, 30.0];
    let nodes = vec![node(ed, 64), node(ed, 64), uniform(20.0, 2)];
    let spec: PolicySpec = "entropy".parse().unwrap();
    let mut s = Scheduler::with_policies(config(nodes, 32), |_| {
        Box::new(Scripted {
            script: [0, 1, 1].into(),
            inner: spec.build().unwrap(),
        })
    })
    .unwrap();
    s.arrive(ecb(1, Cmd::Encrypt, 32)).unwrap();
    s.arrive(ecb(2, Cmd::Decrypt, 8)).unwrap();
    s.arrive(ecb(3, Cmd::Decrypt, 8)).unwrap();
    assert_eq!(placed(&mut s), vec![0, 1, 1]);

    // Indices x = (bytes o, slots q, time τ), free room counted in 16-byte slots and at the
    // mean unit time:
    //   node 0: o = 32/64 = 1/2, q = 1/(1 + 2) = 1/3, τ = 20/(20 + 32·20/16) = 1/3
    //   node 1: o = 16/64 = 1/4, q = 2/(2 + 3) = 2/5, τ = 30/(30 + 48·20/16) = 1/3
    //   node 2: empty, 0 0 0.
    let view = s.view(C0);
    let x = Entropy::indices(&view);
    let want = [
        [0.5, 1.0 / 3.0, 1.0 / 3.0],
        [0.25, 0.4, 1.0 / 3.0],
        [0.0; 3],
    ];
    for (got, want) in x.iter().zip(&want) {
        assert!(got.iter().zip(want).all(|(g, w)| close(*g, *w)), "{x:?}");
    }
    // p per index: o (2/3, 1/3, 0), q (5/11, 6/11, 0), τ (1/2, 1/2, 0).
    // E = −Σ p ln p / ln 3: E_o = 0.636514/1.098612 = 0.579380, E_q = 0.689009/1.098612 =
    // 0.627163, E_τ = 0.693147/1.098612 = 0.630930. 1 − E = (0.420620, 0.372837, 0.369070),
    // sum 1.162527, so w = (0.361815, 0.320712, 0.317472).
    let w = Entropy::index_weights(&view);
    assert!(
        close(w[0], 0.361815) && close(w[1], 0.320712) && close(w[2], 0.317472),
        "{w:?}"
    );
    // β = Σ w·x: (0.393636, 0.324563, 0); mean 0.239400; σ = 0.171614 > 0.1: adjust.
    let beta = Entropy::use_ratios(&view);
    assert!(close(beta[0], 0.393636) && close(beta[1], 0.324563) && beta[2] == 0.0);
    assert!(close(Entropy::balance(&view), 0.171614));
    // Initial weights for an encryption: free bytes (32, 48, 32)/112 and free slots (2, 3, 2)/7
    // (the same shares), free time × speed (2/3/10, 2/3/10, 1/20) → (4/11, 4/11, 3/11):
    //   W0 = 100·(0.682527·2/7 + 0.317472·4/11) = 31.0452
    //   W1 = 100·(0.682527·3/7 + 0.317472·4/11) = 40.7956
    //   W2 = 100·(0.682527·2/7 + 0.317472·3/11) = 28.1591
    let init = Entropy::initial_weights(&view, Cmd::Encrypt);
    assert!(close(init[0], 31.0452) && close(init[1], 40.7956) && close(init[2], 28.1591));
    // Nodes 0 and 1 are above the mean use (heavy): W − 5·β; node 2 below (light): W + 5·0.
    let dw = Entropy::default().dynamic_weights(&view, Cmd::Encrypt);
    assert!(close(dw[0], 29.0771) && close(dw[1], 39.1728) && close(dw[2], 28.1591));
    // Node 1 has the largest weight, though node 2 is empty: it is small and slow.
    s.arrive(ecb(4, Cmd::Encrypt, 16)).unwrap();
    assert_eq!(placed(&mut s), vec![1]);
}

/// Node 0: unit time 5, 8 slots. Node 1: unit time 10, 4 slots.
fn entropy_pair(policy: &str) -> Scheduler<Len> {
    sched(vec![uniform(5.0, 8), uniform(10.0, 4)], policy)
}

#[test]
fn entropy_adjusts_weights_only_when_unbalanced() {
    // One command, unit-length packets: o = q = τ on every node, so every index gets 1/3 and
    // β = o. Node 0 holds 2/3 of the free bytes, slots and free speed at first; its weighted
    // share of the remaining capacity stays the largest for four packets:
    // W0 = 100·(128, 112, 96, 80)/(192, 176, 160, 144) = 66.7, 63.6, 60.0, 55.6.
    let mut s = entropy_pair("entropy");
    assert_eq!(place_ecb(&mut s, 1, 4), vec![0, 0, 0, 0]);
    // Now node 0 is half full, node 1 empty. Free bytes 64 and 64, free slots 4 and 4, free
    // time × speed 0.5/5 = 1/10 = 0.1: the initial weights tie at 50 and 50.
    let view = s.view(C0);
    assert_eq!(
        Entropy::initial_weights(&view, Cmd::Encrypt),
        vec![50.0, 50.0]
    );
    // β = (1/2, 0), σ = 1/4 > 0.1: node 0 is heavy, DW0 = 50 − 5·0.5 = 47.5; node 1 light,
    // DW1 = 50 + 5·0 = 50. The fifth packet goes to node 1.
    assert_eq!(Entropy::balance(&view), 0.25);
    let dw = Entropy::default().dynamic_weights(&view, Cmd::Encrypt);
    assert_eq!(dw, vec![47.5, 50.0]);
    assert_eq!(place_ecb(&mut s, 5, 1), vec![1]);

    // With sigma = 0.3 > σ, the same state counts as balanced: the weights stay as they are
    // (50, 50), the tie goes to the lower index, and the fifth packet goes to node 0.
    let mut s = entropy_pair("entropy:sigma=0.3");
    assert_eq!(place_ecb(&mut s, 1, 4), vec![0, 0, 0, 0]);
    let view = s.view(C0);
    let calm = Entropy::new(5.0, 0.3, 0.9).unwrap();
    assert_eq!(
        calm.dynamic_weights(&view, Cmd::Encrypt),
        Entropy::initial_weights(&view, Cmd::Encrypt)
    );
    assert_eq!(place_ecb(&mut s, 5, 1), vec![0]);
}

#[test]
fn entropy_alarm_counts_entries_into_the_all_overloaded_state() {
    // Two equal nodes with room for 10 packets; a node is overloaded above a use of 0.85, that
    // is with 9 or 10 packets (β = o here). Placements alternate, lower index first.
    let mut s = sched(
        vec![uniform(10.0, 10), uniform(10.0, 10)],
        "entropy:overload=0.85",
    );
    let alarms = |s: &Scheduler<Len>| s.policy(C0).alarms();
    let first = place_ecb(&mut s, 0, 17);
    assert_eq!(first, (0..17).map(|i| i % 2).collect::<Vec<_>>());
    // 9 and 8 packets: node 1 is not overloaded yet.
    assert_eq!(alarms(&s), 0);
    assert_eq!(place_ecb(&mut s, 17, 1), vec![1]);
    // 9 and 9: every node over the threshold, one alarm.
    assert_eq!(alarms(&s), 1);
    // Filling up and waiting packets raise no more alarms.
    assert_eq!(place_ecb(&mut s, 18, 2), vec![0, 1]);
    for t in 20..24 {
        s.arrive(ecb(t, Cmd::Encrypt, P)).unwrap();
    }
    assert!(placed(&mut s).is_empty());
    // Each completion frees a slot that a waiting packet takes at once: still overloaded.
    for n in [0, 1, 0, 1] {
        s.complete(NodeId(n)).unwrap();
    }
    assert_eq!(placed(&mut s), vec![0, 1, 0, 1]);
    assert_eq!(alarms(&s), 1);
    // Node 0 drains to 8 packets (use 0.8): the cluster leaves the state.
    s.complete(NodeId(0)).unwrap();
    s.complete(NodeId(0)).unwrap();
    assert_eq!(alarms(&s), 1);
    // The next packet brings node 0 back to 9: a second entry, a second alarm.
    assert_eq!(place_ecb(&mut s, 24, 1), vec![0]);
    assert_eq!(alarms(&s), 2);
}

// ---------------------------------------------------------------------------------------------
// ddwrr (docs/ALGORITHM.md §11.7)
// ---------------------------------------------------------------------------------------------

/// Offers packets of `cmds` one by one; each completes as soon as it is placed, so every
/// choice sees empty nodes and only the predicted mix and the round robin matter.
fn ddwrr_run(policy: &str, cmds: &[Cmd]) -> Vec<u32> {
    // Node 0: encrypt 40, decrypt 10. Node 1: 20 for both.
    let mut s = sched(
        vec![node([40.0, 10.0, 40.0, 10.0], 4 * P), uniform(20.0, 4)],
        policy,
    );
    let mut out = Vec::new();
    for (t, &cmd) in cmds.iter().enumerate() {
        s.arrive(ecb(t as u64, cmd, P)).unwrap();
        let n = placed(&mut s);
        assert_eq!(n.len(), 1);
        s.complete(NodeId(n[0])).unwrap();
        out.extend(n);
    }
    out
}

#[test]
fn ddwrr_smoothed_mix_shifts_the_share() {
    use Cmd::{Decrypt as D, Encrypt as E};
    let cmds = [[E; 6].as_slice(), &[D; 12]].concat();
    // Empty nodes: DW = speed under the predicted mix, s_i = T_min/T_i; integer weights
    // round(1000·DW). a = 0.5.
    // Encryptions: T = (40, 20), weights (500, 1000): node 1 gets two in three. Current
    // weights go (500, −500) → 1, (−500, 500) → 0, (0, 0) → 1 and repeat: 1 0 1 1 0 1.
    // The first decryption is judged on the mix so far, all encryption: weights (500, 1000),
    // current (500, −500), node 1. The mix after it is S = (1/2, 1/2): T = (25, 20), weights
    // (800, 1000), current (−500, 500) → node 0. S = (1/4, 3/4): T = (17.5, 20), weights
    // (1000, 875) → (500, −500) node 1. S = (1/8, 7/8): T = (13.75, 20), (1000, 688) →
    // (−188, 188) node 0. Then node 1's weight falls toward 500 as S → (0, 1): (1000, 594)
    // → 0, (1000, 547) → 1, (1000, 523) → 0, (1000, 512) → 1, (1000, 506) → 0,
    // (1000, 503) → 0, (1000, 501) → 1, (1000, 501) → 0.
    let got = ddwrr_run("ddwrr:smoothing=0.5", &cmds);
    assert_eq!(
        got,
        vec![1, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0]
    );
    // Node 0, fast at decryption, had 2 of 6 encryptions and gets 7 of 12 decryptions.
    let zeros = |v: &[u32]| v.iter().filter(|&&n| n == 0).count();
    assert_eq!(zeros(&got[..6]), 2);
    assert_eq!(zeros(&got[6..]), 7);
    // A longer memory follows the change later: with a = 0.1 node 0 gets 5 of them.
    let slow = ddwrr_run("ddwrr:smoothing=0.1", &cmds);
    assert_eq!(zeros(&slow[..6]), 2);
    assert_eq!(zeros(&slow[6..]), 5, "{slow:?}");
}

#[test]
fn ddwrr_loaded_queue_takes_weight_off() {
    // Two equal nodes, no completions: with k of 4 slots used, τ = o = q = k/4 and the
    // weight is 1000·(1 − k/4). The current weights remember the earlier rounds:
    //   (1000, 1000) → (1000, 1000) → node 0, pays 2000: (−1000, 1000)
    //   ( 750, 1000) → (−250, 2000) → node 1, pays 1750: (−250, 250)
    //   ( 750,  750) → (500, 1000)  → node 1, pays 1500: (500, −500)
    //   ( 750,  500) → (1250, 0)    → node 0, pays 1250: (0, 0)
    //   ( 500,  500) → (500, 500)   → node 0 (tie),      (−500, 500)
    //   ( 250,  500) → (−250, 1000) → node 1,            (−250, 250)
    //   ( 250,  250) → (0, 500)     → node 1,            (0, 0)
    //   node 1 full: node 0 alone.
    let mut s = sched(vec![uniform(10.0, 4), uniform(10.0, 4)], "ddwrr");
    assert_eq!(place_ecb(&mut s, 0, 8), vec![0, 1, 1, 0, 0, 1, 1, 0]);
    // Full: the next packet waits.
    s.arrive(ecb(8, Cmd::Encrypt, P)).unwrap();
    assert!(placed(&mut s).is_empty());
}

// ---------------------------------------------------------------------------------------------
// zorder (docs/ALGORITHM.md §11.9)
// ---------------------------------------------------------------------------------------------

#[test]
fn zorder_morton_codes_interleave_occupancy_over_busy_share() {
    // Occupancy takes the even positions from the top, busy share the odd ones:
    // o = 0100, b = 0010 → 0 0 1 0 0 1 0 0.
    assert_eq!(ZOrder::morton(0b0100, 0b0010), 0b0010_0100);
    assert_eq!(ZOrder::morton(0b1000, 0b0100), 0b1001_0000);
    assert_eq!(ZOrder::morton(0b0100, 0b1000), 0b0110_0000);
    assert_eq!(ZOrder::level(0.25), 0b0100);
    assert_eq!(ZOrder::level(4.0 / 7.0), 0b1001);
}

#[test]
fn zorder_picks_the_code_nearest_to_the_origin() {
    // Unit times 10, 20, 40; room for 4 packets each.
    let mut s = sched(
        vec![uniform(10.0, 4), uniform(20.0, 4), uniform(40.0, 4)],
        "zorder",
    );
    // 1: all codes 0, no connections anywhere → node 0.
    // 2: node 0 has all the queued work (busy share 1 > 0.75): excluded → node 1 (code 0).
    // 3: shares 1/3 and 2/3 (levels 0101, 1010), occupancy 1/4 → node 2, still at code 0.
    // 4: occupancy 0100 everywhere; work 10, 20, 40 of 70 → busy levels 0010, 0100, 1001:
    //    codes 00100100 = 36, 00110000 = 48, 01100001 = 97 → node 0.
    assert_eq!(place_ecb(&mut s, 0, 4), vec![0, 1, 2, 0]);
    // 5: node 0 half full (1000), work 20, 20, 40 of 80 → busy 0100, 0100, 1000:
    //    codes 10010000 = 144, 00110000 = 48, 01100000 = 96 → node 1.
    let view = s.view(C0);
    let codes: Vec<u32> = (0..3).map(|i| ZOrder::code(&view, i)).collect();
    assert_eq!(codes, vec![144, 48, 96]);
    assert_eq!(place_ecb(&mut s, 4, 1), vec![1]);
}

#[test]
fn zorder_excludes_nodes_over_a_threshold() {
    // Node 0: slow (100) with a large queue (16 packets); node 1: fast (10), 4 packets.
    let run = |policy: &str| {
        let mut s = sched(vec![uniform(100.0, 16), uniform(10.0, 4)], policy);
        place_ecb(&mut s, 0, 4)
    };
    // 1 → node 0 (tie at code 0). 2: node 0 busy share 1 → excluded → node 1.
    // 3: shares 100/110 = 0.91 and 0.09: node 0 excluded → node 1.
    // 4: node 0: occupancy 1/16 (0001), share 100/120 = 0.83 (1101): code 01010011 = 83;
    //    node 1: occupancy 1/2 (1000), share 0.17 (0010): code 10000100 = 132.
    //    busy = 0.75 excludes node 0 despite its smaller code → node 1;
    assert_eq!(run("zorder"), vec![0, 1, 1, 1]);
    //    busy = 0.9 admits it → node 0.
    assert_eq!(run("zorder:busy=0.9"), vec![0, 1, 1, 0]);
}

#[test]
fn zorder_ties_go_to_least_connections() {
    let mut s = sched(vec![uniform(10.0, 4), uniform(10.0, 4)], "zorder");
    // A CBC job of two 8-byte packets: the first goes to node 0 (all at code 0, no
    // connections), the second follows it (strategy 2).
    s.arrive(packet(1, 0, false, Cmd::Encrypt, Mode::Cbc, 8))
        .unwrap();
    s.arrive(packet(1, 1, false, Cmd::Encrypt, Mode::Cbc, 8))
        .unwrap();
    // An ECB packet: node 0 has all the work (share 1): excluded → node 1.
    s.arrive(ecb(2, Cmd::Encrypt, P)).unwrap();
    assert_eq!(placed(&mut s), vec![0, 0, 1]);
    // Both nodes now hold 16 bytes and half the work: the same code (01100000 = 96). Node 0
    // has two connections, node 1 one: node 1 wins although node 0 has the lower index.
    let view = s.view(C0);
    assert_eq!((ZOrder::code(&view, 0), ZOrder::code(&view, 1)), (96, 96));
    s.arrive(ecb(3, Cmd::Encrypt, P)).unwrap();
    assert_eq!(placed(&mut s), vec![1]);
}

#[test]
fn zorder_falls_back_when_every_node_is_excluded() {
    // queue = 0.2: a node a quarter full is excluded. Unit times 20 and 10.
    let mut s = sched(vec![uniform(20.0, 4), uniform(10.0, 4)], "zorder:queue=0.2");
    // 1 → node 0; 2: node 0 excluded → node 1. 3: both excluded (occupancy 1/4): the
    // smallest code among them, node 1 (busy 1/3 → 0101: 00110001 = 49) before node 0
    // (busy 2/3 → 1010: 01100100 = 100).
    assert_eq!(place_ecb(&mut s, 0, 3), vec![0, 1, 1]);
    // A single node is always excluded once busy (share 1) and is still used to the end.
    let mut s = sched(vec![uniform(10.0, 3)], "zorder");
    assert_eq!(place_ecb(&mut s, 0, 3), vec![0, 0, 0]);
}

// ---------------------------------------------------------------------------------------------
// load-formula (docs/ALGORITHM.md §11.10)
// ---------------------------------------------------------------------------------------------

#[test]
fn load_formula_weighs_dependent_packets_by_a() {
    // Node 0: unit time 10, 4 packets → limit 4. Node 1: unit time 20, 4 packets → limit
    // 4·10/20 = 2, b = 4/2 = 2.
    let run = |policy: &str| {
        let mut s = sched(vec![uniform(10.0, 4), uniform(20.0, 4)], policy);
        // A CBC job of two packets: the first goes to the faster node (both empty), the
        // second follows it (strategy 2).
        s.arrive(packet(1, 0, false, Cmd::Encrypt, Mode::Cbc, P))
            .unwrap();
        s.arrive(packet(1, 1, false, Cmd::Encrypt, Mode::Cbc, P))
            .unwrap();
        let mut out = placed(&mut s);
        out.extend(place_ecb(&mut s, 2, 5));
        out
    };
    // a = 10: node 0 carries L = 2·10 = 20 (past its limit 4 by 16, b = 1: 20). Node 1 takes
    // the independent packets: L' = 0, 1, 2, then 2 + 2·1 = 4, until it is full; the last
    // packet has only node 0.
    assert_eq!(run("load-formula"), vec![0, 0, 1, 1, 1, 1, 0]);
    // a = 1: node 0's two chained packets count 2. Node 1 gets 1, 2 (2 = 2 ties; the faster
    // node 0 wins), then node 0 at 3 against node 1's 2 → node 1 (L' = 2 + 2·1 = 4), then
    // node 0 at 3 < 4.
    assert_eq!(run("load-formula:a=1"), vec![0, 0, 1, 1, 0, 1, 0]);
}

#[test]
fn load_formula_weighs_the_excess_over_the_limit() {
    // Node 0: unit time 10, 8 packets → limit 8, b = 1. Node 1: unit time 20, 8 packets →
    // limit 4, b = 8/4 = 2. Independent packets, no completions.
    let mut s = sched(vec![uniform(10.0, 8), uniform(20.0, 8)], "load-formula");
    // Below node 1's limit the loads are packet counts; ties go to the faster node 0:
    //   0 1 0 1 0 1 0 1 0 → node 0 at 5, node 1 at 4.
    // Past it node 1's excess counts double: 10th → node 1 (4 < 5), now L' = 4 + 2·1 = 6;
    // node 0 takes the 11th and 12th (5 < 6, 6 = 6 → faster), node 1 the 13th (7 > 6, now
    // 8), node 0 the 14th (7 < 8) and is full; the rest go to node 1.
    assert_eq!(
        place_ecb(&mut s, 0, 16),
        vec![0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 1]
    );
}

// ---------------------------------------------------------------------------------------------
// Every policy: a choice with room, and none only when no node has room.
// ---------------------------------------------------------------------------------------------

/// Forwards to the policy under test and checks each of its choices.
#[derive(Debug)]
struct Checked(Box<dyn Policy>);

impl Policy for Checked {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize> {
        let choice = self.0.select(view, packet);
        match choice {
            Some(i) => assert!(
                i < view.len() && view.node(i).has_room(packet.len),
                "{} chose node {i} without room for {packet:?}: {view:?}",
                self.name()
            ),
            None => assert!(
                view.candidates(packet).next().is_none(),
                "{} declined although a node has room for {packet:?}: {view:?}",
                self.name()
            ),
        }
        choice
    }

    fn on_dispatch(&mut self, view: &ClusterView<'_>, node: usize, packet: &PacketMeta) {
        self.0.on_dispatch(view, node, packet);
    }

    fn on_complete(&mut self, view: &ClusterView<'_>, node: usize, packet: &PacketMeta) {
        self.0.on_complete(view, node, packet);
    }

    fn alarms(&self) -> u64 {
        self.0.alarms()
    }
}

const MAX_LEN: u64 = 40;

/// A random cluster: 1 to 4 nodes with unit times per command and capacities of at least one
/// packet of the largest size.
fn nodes() -> impl Strategy<Value = Vec<NodeConfig>> {
    prop::collection::vec(
        (prop::array::uniform4(1.0..50.0f64), MAX_LEN..=6 * MAX_LEN),
        1..=4,
    )
    .prop_map(|v| v.into_iter().map(|(t, cap)| node(t, cap)).collect())
}

/// Random moves: `Some((job slot, cmd, len, last))` offers a packet, `None` completes the head
/// packet of node `n % nodes`.
type Move = (Option<(usize, usize, u64, bool)>, usize);

fn moves() -> impl Strategy<Value = Vec<Move>> {
    prop::collection::vec(
        (
            prop::option::weighted(0.6, (0..6usize, 0..4usize, 1..=MAX_LEN, any::<bool>())),
            any::<usize>(),
        ),
        1..120,
    )
}

/// Drives a scheduler running `spec` (wrapped in [`Checked`]) through `moves`.
fn drive(spec: &PolicySpec, nodes: Vec<NodeConfig>, moves: &[Move]) {
    let n = nodes.len();
    let cfg = SchedConfig {
        clusters: vec![ClusterConfig {
            nodes,
            queue_len: 8,
            max_packet: MAX_LEN,
        }],
        wait_queue_len: 4,
        affinity: Affinity::Strict,
        unit_len: P,
        admission: Admission::Fifo,
    };
    let mut s: Scheduler<Len> =
        Scheduler::with_policies(cfg, |_| Box::new(Checked(spec.build().unwrap()))).unwrap();
    // Six job slots; a slot's job gets a fresh task id when its last packet is offered (ids are
    // never reused). Even ids are CBC jobs, odd ids ECB.
    let mut jobs: Vec<(u64, u32)> = (0..6).map(|t| (t, 0)).collect();
    let mut next_id = 6;
    for &(offer, pick) in moves {
        match offer {
            Some((slot, cmd, len, last)) => {
                let (task, seq) = jobs[slot];
                let mode = if task % 2 == 0 { Mode::Cbc } else { Mode::Ecb };
                match s.arrive(packet(task, seq, last, Cmd::ALL[cmd], mode, len)) {
                    Ok(()) if last => {
                        jobs[slot] = (next_id, 0);
                        next_id += 1;
                    }
                    Ok(()) => jobs[slot].1 += 1,
                    Err(ArriveError::Full(_)) => {}
                    Err(e) => panic!("unexpected refusal: {e}"),
                }
            }
            None => {
                let node = NodeId((pick % n) as u32);
                if s.node_queue(node).len() > 0 {
                    s.complete(node).unwrap();
                }
            }
        }
        s.dispatches().for_each(drop);
    }
}

proptest! {
    #[test]
    fn entropy_always_chooses_a_node_with_room(
        nodes in nodes(),
        moves in moves(),
        step in 0.0..20.0f64,
        sigma in 0.0..0.5f64,
        overload in 0.0..=1.0f64,
    ) {
        let spec = format!("entropy:step={step},sigma={sigma},overload={overload}");
        drive(&spec.parse().unwrap(), nodes, &moves);
    }

    #[test]
    fn ddwrr_always_chooses_a_node_with_room(
        nodes in nodes(),
        moves in moves(),
        smoothing in 0.01..=1.0f64,
    ) {
        let spec = format!("ddwrr:smoothing={smoothing}");
        drive(&spec.parse().unwrap(), nodes, &moves);
    }

    #[test]
    fn zorder_always_chooses_a_node_with_room(
        nodes in nodes(),
        moves in moves(),
        queue in 0.0..=1.0f64,
        busy in 0.0..=1.0f64,
    ) {
        let spec = format!("zorder:queue={queue},busy={busy}");
        drive(&spec.parse().unwrap(), nodes, &moves);
    }

    #[test]
    fn load_formula_always_chooses_a_node_with_room(
        nodes in nodes(),
        moves in moves(),
        a in 1.0..100.0f64,
    ) {
        let spec = format!("load-formula:a={a}");
        drive(&spec.parse().unwrap(), nodes, &moves);
    }
}
