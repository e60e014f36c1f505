//! `mct` through the scheduler core: the committed work the balancer keeps for bound jobs
//! (known lengths exact, unknown ones estimated), and the placements it leads to.
//!
//! Two nodes of unit times 10 (node 0) and 30 (node 1) for unit packets of P = 16 bytes, each
//! with room for 8 packets, strict affinity, first come first served.

use cryptodispatch::packet::UnitTimes;
use cryptodispatch::packet::{ClusterId, Cmd, Len, Mode, NodeId, Packet, PacketMeta, TaskId};
use cryptodispatch::sched::{
    Admission, Affinity, ClusterConfig, NodeConfig, PolicySpec, SchedConfig, Scheduler,
};

const P: u64 = 16;

fn scheduler(policy: &PolicySpec) -> Scheduler<Len> {
    let config = SchedConfig {
        clusters: vec![ClusterConfig {
            nodes: [10.0, 30.0]
                .iter()
                .map(|&t| NodeConfig::new(UnitTimes::uniform(t), 8 * P))
                .collect(),
            queue_len: 64,
            max_packet: P,
        }],
        wait_queue_len: 0,
        affinity: Affinity::Strict,
        unit_len: P,
        admission: Admission::Fifo,
    };
    Scheduler::new(config, policy).unwrap()
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
fn place(s: &mut Scheduler<Len>, packet: Packet<Len>) -> Option<u32> {
    s.arrive(packet).unwrap();
    s.next_dispatch().map(|d| d.node.0)
}

fn committed(s: &Scheduler<Len>, node: u32) -> u64 {
    s.node(NodeId(node)).committed_bytes()
}

#[test]
fn known_lengths_are_committed_exactly_and_released_at_the_end() {
    let mut s = scheduler(&PolicySpec::mct());
    // A 10-packet chain: the fast node (10·10 against 30·10).
    assert_eq!(place(&mut s, chained(1, 0, 10, true)), Some(0));
    assert_eq!(committed(&s, 0), 9 * P);
    assert_eq!(s.node(NodeId(0)).committed_work(), 90.0);
    // A 3-packet chain: node 0 would complete it at 10·(1 + 9 + 3) = 130, node 1 at 90.
    // sed, which sees one queued packet, puts it on node 0.
    assert_eq!(place(&mut s, chained(2, 0, 3, true)), Some(1));
    assert_eq!(committed(&s, 1), 2 * P);
    let mut sed = scheduler(&"sed".parse().unwrap());
    place(&mut sed, chained(1, 0, 10, true));
    assert_eq!(place(&mut sed, chained(2, 0, 3, true)), Some(0));

    // Completing a packet leaves the commitment; placing the next moves a packet of it to
    // the queue.
    s.complete(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 9 * P);
    assert_eq!(place(&mut s, chained(1, 1, 10, true)), Some(0));
    assert_eq!(committed(&s, 0), 8 * P);
    for seq in 2..10 {
        s.complete(NodeId(0)).unwrap();
        assert_eq!(place(&mut s, chained(1, seq, 10, true)), Some(0));
    }
    assert_eq!(committed(&s, 0), 0);
    s.complete(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 0);
}

#[test]
fn unknown_lengths_are_estimated_from_the_ended_jobs() {
    let mut s = scheduler(&PolicySpec::mct());
    // Nothing known yet: at least one more packet of the chain's size.
    assert_eq!(place(&mut s, chained(1, 0, 4, false)), Some(0));
    assert_eq!(committed(&s, 0), P);
    for seq in 1..4 {
        s.complete(NodeId(0)).unwrap();
        place(&mut s, chained(1, seq, 4, false));
    }
    s.complete(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 0);
    // One chain of 4 packets has ended: the next is expected to bring 4, 3 after its first.
    assert_eq!(place(&mut s, chained(2, 0, 6, false)), Some(0));
    assert_eq!(committed(&s, 0), 3 * P);
    s.complete(NodeId(0)).unwrap();
    place(&mut s, chained(2, 1, 6, false));
    assert_eq!(committed(&s, 0), 2 * P);
    for seq in 2..4 {
        s.complete(NodeId(0)).unwrap();
        place(&mut s, chained(2, seq, 6, false));
    }
    // Past the mean and not ended: one more packet.
    assert_eq!(committed(&s, 0), P);
}

#[test]
fn a_failed_node_releases_its_commitments() {
    let mut s = scheduler(&PolicySpec::mct());
    assert_eq!(place(&mut s, chained(1, 0, 10, true)), Some(0));
    assert_eq!(committed(&s, 0), 9 * P);
    s.node_down(NodeId(0)).unwrap();
    assert_eq!(committed(&s, 0), 0);
}

#[test]
fn default_is_mct_and_paper_stays_by_name() {
    assert_eq!(PolicySpec::default(), PolicySpec::mct());
    assert_eq!("default".parse::<PolicySpec>().unwrap(), PolicySpec::mct());
    assert_eq!(
        "paper".parse::<PolicySpec>().unwrap(),
        PolicySpec::paper_defaults()
    );
    let s = scheduler(&PolicySpec::default());
    assert_eq!(s.policy(ClusterId(0)).name(), "mct");
}
