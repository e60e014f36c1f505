//! The classic policies (`rr`, `swrr`, `lc`, `wlc`, `sed`, `p2c`, and `mct` with the committed
//! work it reads) driven through the scheduler core, each checked against its rule as its
//! source states it, with exact placements; and a property test that each of the six classic
//! ones only ever names a node with room (`mct` may decline a packet instead, waiting for a
//! faster full node; `tests/scheduling/sim.rs` runs it against the lower bound).

use std::collections::VecDeque;

use cryptodispatch::packet::{
    ClusterId, Cmd, Len, Mode, NodeId, Packet, PacketMeta, TaskId, UnitTimes,
};
use cryptodispatch::sched::{
    Admission, Affinity, ClusterConfig, NodeConfig, PolicySpec, SchedConfig, Scheduler,
};
use proptest::prelude::*;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

/// The unit length: a packet of `P` bytes takes one unit time.
pub(crate) const P: u64 = 16;
/// The largest packet any test sends.
const MAX_LEN: u64 = 64;

/// A node with unit time `unit` for every command and room for `packets` packets of `P` bytes.
pub(crate) fn node(unit: f64, packets: u64) -> NodeConfig {
    NodeConfig::new(UnitTimes::uniform(unit), packets * P)
}

/// A core with one cluster of `nodes` under `policy`.
pub(crate) fn sched(policy: &str, nodes: Vec<NodeConfig>) -> Scheduler<Len> {
    let cfg = SchedConfig {
        clusters: vec![ClusterConfig {
            nodes,
            queue_len: 64,
            max_packet: P,
        }],
        wait_queue_len: 0,
        affinity: Affinity::Strict,
        unit_len: P,
        admission: Admission::Fifo,
    };
    Scheduler::new(cfg, &policy.parse().unwrap()).unwrap()
}

/// An independent (ECB) encryption packet of `len` bytes, the only one of job `task`.
pub(crate) fn ecb(task: u64, len: u64) -> Packet<Len> {
    Packet::new(
        PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0)),
        Len(len),
    )
}

/// Offers independent packets of `P` bytes, tasks `first..first + n`; returns the nodes they
/// went to, in placement order.
fn place(s: &mut Scheduler<Len>, first: u64, n: u64) -> Vec<u32> {
    for t in first..first + n {
        s.arrive(ecb(t, P)).unwrap();
    }
    nodes(s)
}

/// The nodes of the placements made since the last call.
fn nodes(s: &mut Scheduler<Len>) -> Vec<u32> {
    s.dispatches().map(|d| d.node.0).collect()
}

#[test]
fn rr_cycles_over_the_nodes_and_skips_a_full_one() {
    // Speeds differ, capacities 2, 1, 2 packets: rr ignores speed.
    let mut s = sched("rr", vec![node(10.0, 2), node(40.0, 1), node(20.0, 2)]);
    // 0, 1, 2, then 0; the cursor is at 1, which is full: 2. Everything is full now.
    assert_eq!(place(&mut s, 0, 6), vec![0, 1, 2, 0, 2]);
    assert_eq!(s.cluster_queue_len(ClusterId(0)), 1);
    // Node 1 frees a slot: the cursor is at 0 (after 2), node 0 is full, node 1 takes it.
    s.complete(NodeId(1)).unwrap();
    assert_eq!(nodes(&mut s), vec![1]);
    // Node 0 and node 1 free a slot each: the cursor is at 2 (full), then 0, then 1.
    s.complete(NodeId(0)).unwrap();
    s.complete(NodeId(1)).unwrap();
    assert_eq!(place(&mut s, 6, 2), vec![0, 1]);
}

#[test]
fn rr_is_not_asked_for_a_bound_job() {
    // Strategy 2: the second packet of a CBC job follows its first, without moving the cursor.
    let mut s = sched("rr", vec![node(10.0, 4), node(10.0, 4), node(10.0, 4)]);
    let cbc = |seq, last| {
        Packet::new(
            PacketMeta::new(TaskId(9), Cmd::Encrypt, ClusterId(0))
                .dependent(true)
                .at(seq, last),
            Len(P),
        )
    };
    s.arrive(ecb(0, P)).unwrap(); // → 0
    s.arrive(cbc(0, false)).unwrap(); // → 1, bound
    s.arrive(cbc(1, true)).unwrap(); // → 1 (bound; rr not asked)
    s.arrive(ecb(1, P)).unwrap(); // → 2
    s.arrive(ecb(2, P)).unwrap(); // → 0
    assert_eq!(nodes(&mut s), vec![0, 1, 1, 2, 0]);
}

#[test]
fn swrr_gives_nginx_sequence_for_weights_five_one_one() {
    // Unit times 1, 5, 5: weights 1, 1/5, 1/5, i.e. 5:1:1. Room everywhere.
    let mut s = sched("swrr", vec![node(1.0, 16), node(5.0, 16), node(5.0, 16)]);
    // Nginx: a a b a c a a, and again.
    assert_eq!(place(&mut s, 0, 14), [0, 0, 1, 0, 2, 0, 0].repeat(2));
}

#[test]
fn swrr_leaves_a_full_node_out_of_the_round() {
    // Weights 5:1:1 (in units of 1/5); node 0 has room for two packets.
    let mut s = sched("swrr", vec![node(1.0, 2), node(5.0, 16), node(5.0, 16)]);
    // cw (5,1,1) → 0, (−2,1,1); (3,2,2) → 0, (−4,2,2); node 0 full. Rounds of b and c only
    // (total 2): (·,3,3) → 1, (·,1,3); (·,2,4) → 2, (·,2,2); (·,3,3) → 1, (·,1,3).
    assert_eq!(place(&mut s, 0, 5), vec![0, 0, 1, 2, 1]);
    // Node 0 frees a slot and rejoins with its current weight −4: (1,2,4) → 2, (1,2,−3);
    // then (6,3,−2) → 0.
    s.complete(NodeId(0)).unwrap();
    assert_eq!(place(&mut s, 5, 2), vec![2, 0]);
}

#[test]
fn lc_picks_the_fewest_queued_bytes_and_breaks_ties_by_swrr() {
    // Weights 5:1:1 for the tie-breaker; a first packet of 48 bytes, then packets of 16.
    let mut s = sched("lc", vec![node(1.0, 8), node(5.0, 8), node(5.0, 8)]);
    s.arrive(ecb(0, 48)).unwrap();
    // 1: all empty, swrr round of all: cw (5,1,1) → 0, (−2,1,1). Bytes (48,0,0).
    // 2: 1 and 2 tie at 0, swrr round of the two: (·,2,2) → 1, (·,0,2). Bytes (48,16,0).
    // 3: node 2 alone at 0 → 2; no round. Bytes (48,16,16).
    // 4: 1 and 2 tie at 16: (·,1,3) → 2, (·,1,1). Bytes (48,16,32).
    // 5: node 1 alone → 1. Bytes (48,32,32).
    // 6: 1 and 2 tie at 32: (·,2,2) → 1, (·,0,2). Bytes (48,48,32).
    // 7: node 2 alone → 2. Bytes (48,48,48): node 0 has one packet, the others three.
    // 8: all tie at 48: (3,1,3) → 0 (first of the largest).
    for t in 1..8 {
        s.arrive(ecb(t, P)).unwrap();
    }
    assert_eq!(nodes(&mut s), vec![0, 1, 2, 2, 1, 1, 2, 0]);
}

#[test]
fn wlc_prefers_the_fast_node_at_equal_queued_bytes() {
    // Node 0 twice as fast as node 1.
    let mut s = sched("wlc", vec![node(1.0, 8), node(2.0, 8)]);
    // 1: both empty, swrr round (weights 1, 1/2): cw (1, .5) → 0, (−.5, .5). Work (1, 0).
    // 2: node 1 alone at 0 → 1. Work (1, 2); 16 bytes each.
    // 3: equal bytes, work 1 < 2 → 0 (lc would call this a tie). Work (2, 2).
    // 4: tie at 2: round (.5, 1) → 1, (.5, −.5). Work (2, 4).
    // 5, 6: node 0 (2 < 4, then 3 < 4). Work (4, 4).
    // 7: tie at 4: round (1.5, 0) → 0, (0, 0). Work (5, 4).
    // 8: node 1. Work (5, 6).
    assert_eq!(place(&mut s, 0, 8), vec![0, 1, 0, 1, 0, 0, 0, 1]);
    let mut lc = sched("lc", vec![node(1.0, 8), node(2.0, 8)]);
    // lc at step 3 sees equal bytes and asks swrr: (.5, 1) → node 1.
    assert_eq!(place(&mut lc, 0, 3), vec![0, 1, 1]);
}

#[test]
fn sed_minimises_queued_plus_one_times_unit_time() {
    let mut s = sched("sed", vec![node(10.0, 8), node(25.0, 8), node(40.0, 8)]);
    // d_i = (n_i + 1)·t_i, the smallest wins, ties to the lowest index:
    // 1: (10, 25, 40) → 0;  2: (20, 25, 40) → 0;  3: (30, 25, 40) → 1;
    // 4: (30, 50, 40) → 0;  5: (40, 50, 40) → 0 (tie with 2);  6: (50, 50, 40) → 2;
    // 7: (50, 50, 80) → 0 (tie with 1);  8: (60, 50, 80) → 1.
    assert_eq!(place(&mut s, 0, 8), vec![0, 0, 1, 0, 0, 2, 0, 1]);
    // Queued (5, 2, 1). Node 0 completes one: (4+1)·10 = 50 < 75, 80 → 0.
    s.complete(NodeId(0)).unwrap();
    assert_eq!(place(&mut s, 8, 1), vec![0]);
    // wlc would have sent packet 2 to an idle node: sed counts the packet being placed.
    let mut w = sched("wlc", vec![node(10.0, 8), node(25.0, 8), node(40.0, 8)]);
    assert_eq!(place(&mut w, 0, 3), vec![0, 1, 2]);
}

#[test]
fn sed_skips_a_full_node() {
    // Node 0 is the fastest but holds one packet.
    let mut s = sched("sed", vec![node(10.0, 1), node(25.0, 8), node(40.0, 8)]);
    // 1: → 0 (full).  2: (·, 25, 40) → 1.  3: (·, 50, 40) → 2.  4: (·, 50, 80) → 1.
    assert_eq!(place(&mut s, 0, 4), vec![0, 1, 2, 1]);
}

/// p2c's documented draws, replayed: the placements of `n` packets of `P` bytes on empty nodes
/// of the given unit times (room everywhere), nothing completing.
fn p2c_reference(seed: u64, units: &[f64], n: usize) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut work = vec![0.0; units.len()];
    let k = units.len();
    (0..n)
        .map(|_| {
            let a = rng.random_range(0..k);
            let mut b = rng.random_range(0..k - 1);
            if b >= a {
                b += 1;
            }
            let pick = if work[b] < work[a] { b } else { a };
            work[pick] += units[pick];
            pick as u32
        })
        .collect()
}

#[test]
fn p2c_takes_the_less_loaded_of_its_two_draws() {
    let units = [1.0, 2.0, 3.0, 4.0];
    let run = |seed: u64| {
        let mut s = sched(
            &format!("p2c:seed={seed}"),
            units.iter().map(|&t| node(t, 64)).collect(),
        );
        place(&mut s, 0, 40)
    };
    for seed in [1, 42, 7777] {
        let placed = run(seed);
        assert_eq!(placed, p2c_reference(seed, &units, 40), "seed {seed}");
        // Reproducible from the seed.
        assert_eq!(placed, run(seed));
    }
    assert_ne!(run(1), run(42));
    // With two nodes both are always drawn: the less loaded one always wins, whatever the seed.
    for seed in 0..8 {
        let mut s = sched(
            &format!("p2c:seed={seed}"),
            vec![node(1.0, 8), node(2.5, 8)],
        );
        // Both empty: a tie, so the first drawn takes a packet of 48 bytes (three units).
        s.arrive(ecb(0, 48)).unwrap();
        let first = nodes(&mut s)[0];
        // On node 0, work (3, 0): → 1 (3, 2.5), → 1 (3, 5), → 0 (4, 5).
        // On node 1, work (0, 7.5): → 0 three times (1, 2, 3 < 7.5).
        let rest = place(&mut s, 1, 3);
        let expected = if first == 0 {
            vec![1, 1, 0]
        } else {
            vec![0, 0, 0]
        };
        assert_eq!(rest, expected, "seed {seed}");
    }
}

#[test]
fn p2c_never_picks_a_full_node() {
    // Four nodes with room for one packet each: four packets fill all four, whatever the draws;
    // the fifth waits; a freed node is the only candidate and takes it.
    for seed in 0..16 {
        let mut s = sched(&format!("p2c:seed={seed}"), vec![node(1.0, 1); 4]);
        let mut placed = place(&mut s, 0, 5);
        placed.sort_unstable();
        assert_eq!(placed, vec![0, 1, 2, 3], "seed {seed}");
        s.complete(NodeId(2)).unwrap();
        assert_eq!(nodes(&mut s), vec![2]);
    }
}

fn named(name: &str) -> PolicySpec {
    name.parse().unwrap()
}

/// The six policies of this file, `p2c` with a few seeds.
fn classic() -> impl Strategy<Value = PolicySpec> {
    prop_oneof![
        Just(named("rr")),
        Just(named("swrr")),
        Just(named("lc")),
        Just(named("wlc")),
        Just(named("sed")),
        (0u64..4).prop_map(PolicySpec::p2c),
    ]
}

/// What a move of the property test does.
#[derive(Debug, Clone)]
enum Move {
    /// A packet arrives: encryption or decryption, of this length.
    Arrive(bool, u64),
    /// A node (index modulo the node count) completes its head packet, if it has one.
    Complete(usize),
}

proptest! {
    /// Over random node states (per-command unit times, capacities, queues of mixed packets)
    /// and random packets: a second instance of the policy, asked about the same view, names a
    /// node with room, and `None` only when no node has room; and the scheduler running the
    /// policy never leaves its oldest waiting packet queued while a node has room for it.
    #[test]
    fn the_choice_always_has_room(
        spec in classic(),
        nodes in prop::collection::vec((0.5..50.0f64, 0.5..50.0f64, 1u64..=4), 1..=5),
        moves in prop::collection::vec(
            prop_oneof![
                (any::<bool>(), 1..=MAX_LEN).prop_map(|(e, l)| Move::Arrive(e, l)),
                (0usize..5).prop_map(Move::Complete),
            ],
            1..60,
        ),
        probes in prop::collection::vec((any::<bool>(), 1..=MAX_LEN), 60),
    ) {
        let configs: Vec<NodeConfig> = nodes
            .iter()
            .map(|&(enc, dec, cap)| NodeConfig::new(UnitTimes([enc, dec, 1.0, 1.0]), cap * MAX_LEN))
            .collect();
        let cfg = SchedConfig {
            clusters: vec![ClusterConfig { nodes: configs, queue_len: 64, max_packet: MAX_LEN }],
            wait_queue_len: 0,
            affinity: Affinity::Strict,
            unit_len: P,
            admission: Admission::Fifo,
        };
        let mut s = Scheduler::new(cfg, &spec).unwrap();
        let mut probe = spec.build().unwrap();
        let c = ClusterId(0);
        let n = nodes.len();
        let mut waiting = VecDeque::new();
        let cmd = |enc| if enc { Cmd::Encrypt } else { Cmd::Decrypt };
        for (step, (m, &(enc, len))) in moves.iter().zip(&probes).enumerate() {
            match *m {
                Move::Arrive(e, l) => {
                    let p = ecb(step as u64, l);
                    s.arrive(Packet { meta: PacketMeta { cmd: cmd(e), ..p.meta }, ..p }).unwrap();
                    waiting.push_back(l);
                }
                Move::Complete(k) => {
                    let _ = s.complete(NodeId((k % n) as u32));
                }
            }
            // Unbound packets are placed in arrival order.
            for d in s.dispatches() {
                prop_assert_eq!(waiting.pop_front(), Some(d.packet.meta.len));
            }
            let view = s.view(c);
            if let Some(&head) = waiting.front() {
                let stuck = !view.nodes().iter().any(|r| r.has_room(head));
                prop_assert!(stuck, "a packet of {} bytes waits with room", head);
            }
            let meta = PacketMeta { cmd: cmd(enc), ..ecb(1_000 + step as u64, len).meta };
            let any_room = view.nodes().iter().any(|r| r.has_room(len));
            match probe.select(&view, &meta) {
                Some(i) => {
                    prop_assert!(i < n && view.node(i).has_room(len), "{} chose {}", spec, i);
                }
                None => prop_assert!(!any_room, "{} declined with room", spec),
            }
        }
    }
}

// mct (docs/ALGORITHM.md §11.14) and the committed work the balancer keeps for it: two nodes of
// unit times 10 (node 0) and 30 (node 1), room for 8 packets each.

fn mct_sched() -> Scheduler<Len> {
    sched("mct", vec![node(10.0, 8), node(30.0, 8)])
}

/// Packet `seq` of a CBC job of `packets` packets, its length known or not.
fn chained(task: u64, seq: u32, packets: u32, known: bool) -> Packet<Len> {
    let meta = PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0))
        .dependent(Mode::Cbc.is_chained())
        .at(seq, seq + 1 == packets)
        .job_bytes(known.then_some(u64::from(packets) * P));
    Packet::new(meta, Len(P))
}

/// Arrives `packet` and returns the node it was placed on, if placed.
fn place_one(s: &mut Scheduler<Len>, packet: Packet<Len>) -> Option<u32> {
    s.arrive(packet).unwrap();
    s.next_dispatch().map(|d| d.node.0)
}

fn committed(s: &Scheduler<Len>, node: u32) -> u64 {
    s.node(NodeId(node)).committed_bytes()
}

#[test]
fn known_lengths_are_committed_exactly_and_released_at_the_end() {
    let mut s = mct_sched();
    // A 10-packet chain: the fast node (10·10 against 30·10).
    assert_eq!(place_one(&mut s, chained(1, 0, 10, true)), Some(0));
    assert_eq!(committed(&s, 0), 9 * P);
    assert_eq!(s.node(NodeId(0)).committed_work(), 90.0);
    // A 3-packet chain: node 0 would complete it at 10·(1 + 9 + 3) = 130, node 1 at 90.
    // sed, which sees one queued packet, puts it on node 0.
    assert_eq!(place_one(&mut s, chained(2, 0, 3, true)), Some(1));
    assert_eq!(committed(&s, 1), 2 * P);
    let mut sed = sched("sed", vec![node(10.0, 8), node(30.0, 8)]);
    place_one(&mut sed, chained(1, 0, 10, true));
    assert_eq!(place_one(&mut sed, chained(2, 0, 3, true)), Some(0));

    // Completing a packet leaves the commitment; placing the next moves a packet of it to
    // the queue.
    s.complete(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 9 * P);
    assert_eq!(place_one(&mut s, chained(1, 1, 10, true)), Some(0));
    assert_eq!(committed(&s, 0), 8 * P);
    for seq in 2..10 {
        s.complete(NodeId(0)).unwrap();
        assert_eq!(place_one(&mut s, chained(1, seq, 10, true)), Some(0));
    }
    assert_eq!(committed(&s, 0), 0);
    s.complete(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 0);
}

#[test]
fn unknown_lengths_are_estimated_from_the_ended_jobs() {
    let mut s = mct_sched();
    // Nothing known yet: at least one more packet of the chain's size.
    assert_eq!(place_one(&mut s, chained(1, 0, 4, false)), Some(0));
    assert_eq!(committed(&s, 0), P);
    for seq in 1..4 {
        s.complete(NodeId(0)).unwrap();
        place_one(&mut s, chained(1, seq, 4, false));
    }
    s.complete(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 0);
    // One chain of 4 packets has ended: the next is expected to bring 4, 3 after its first.
    assert_eq!(place_one(&mut s, chained(2, 0, 6, false)), Some(0));
    assert_eq!(committed(&s, 0), 3 * P);
    s.complete(NodeId(0)).unwrap();
    place_one(&mut s, chained(2, 1, 6, false));
    assert_eq!(committed(&s, 0), 2 * P);
    for seq in 2..4 {
        s.complete(NodeId(0)).unwrap();
        place_one(&mut s, chained(2, seq, 6, false));
    }
    // Past the mean and not ended: one more packet.
    assert_eq!(committed(&s, 0), P);
}

#[test]
fn an_unknown_jobs_last_packet_is_charged_alone() {
    let mut s = mct_sched();
    // A chain of 4 packets ends on the fast node: chains are now expected to bring 4.
    for seq in 0..4 {
        assert_eq!(place_one(&mut s, chained(1, seq, 4, false)), Some(0));
        s.complete(NodeId(0)).unwrap();
    }
    // Three packets on the fast node: it completes a fourth at 40, the idle slow node at 30.
    assert_eq!(place(&mut s, 10, 3), vec![0, 0, 0]);
    // A chain's first packet, not its last: charged the expected 4 packets, 30 + 40 on the
    // fast node against 120 on the slow one.
    assert_eq!(place_one(&mut s, chained(2, 0, 5, false)), Some(0));
    // A one-packet chain (its first packet is its last) brings nothing more: alone, it
    // completes at 50 on the fast node and at 30 on the slow one.
    assert_eq!(place_one(&mut s, chained(3, 0, 1, false)), Some(1));
    assert_eq!(committed(&s, 1), 0);
}

#[test]
fn a_first_unknown_chain_is_charged_two_packets_before_anything_is_known() {
    let mut s = mct_sched();
    // Three packets on the fast node: it completes a fourth at 40, the idle slow node at 30.
    assert_eq!(place(&mut s, 10, 3), vec![0, 0, 0]);
    // The cluster's first chain of unknown length: its first packet is not its last, so the
    // chain brings at least one more. Charged two packets, it completes at 30 + 20 on the
    // fast node against 60 on the slow one; charged as one packet it would go to the slow
    // node (40 against 30).
    assert_eq!(place_one(&mut s, chained(1, 0, 5, false)), Some(0));
    assert_eq!(committed(&s, 0), P);
}

#[test]
fn a_failed_node_releases_its_commitments() {
    let mut s = mct_sched();
    assert_eq!(place_one(&mut s, chained(1, 0, 10, true)), Some(0));
    assert_eq!(committed(&s, 0), 9 * P);
    s.node_down(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 0);
}

#[test]
fn default_is_mct_wait_and_paper_stays_by_name() {
    let mct_wait: PolicySpec = "mct-wait".parse().unwrap();
    assert_eq!(PolicySpec::default(), mct_wait);
    assert_eq!("default".parse::<PolicySpec>().unwrap(), mct_wait);
    assert_ne!(PolicySpec::default(), PolicySpec::mct());
    assert_eq!(
        "paper".parse::<PolicySpec>().unwrap(),
        PolicySpec::paper_defaults()
    );
    let s = sched("default", vec![node(10.0, 8), node(30.0, 8)]);
    assert_eq!(s.policy(ClusterId(0)).name(), "mct-wait");
}
