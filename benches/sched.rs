//! Regression benchmark for the scheduler core alone: the cost of one arrive-and-complete in a
//! saturated cluster (every node full, packets waiting), per policy, cluster size and admission;
//! and of admitting one large chained job (4096 packets, under fair admission) packet by packet
//! with `arrive` against all at once with `arrive_many`. No threads, no crypto. This is most of what a cluster's lock is held for per packet (the
//! engine's contention note in docs/ALGORITHM.md §15.5 reads its figures from here).
//!
//! `cargo bench --bench sched`

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use cryptodispatch::packet::{
    ClusterId, Cmd, Len, Mode, NodeId, Packet, PacketMeta, TaskId, UnitTimes,
};
use cryptodispatch::sched::{
    Admission, Affinity, ClusterConfig, NodeConfig, PolicySpec, SchedConfig, Scheduler,
};

const PACKET: u64 = 1024;

fn core(policy: &PolicySpec, nodes: usize, admission: Admission) -> Scheduler<Len> {
    let nodes = (0..nodes)
        .map(|i| NodeConfig::new(UnitTimes::uniform(10.0 + i as f64 * 5.0), 8 * PACKET))
        .collect();
    let config = SchedConfig {
        clusters: vec![ClusterConfig {
            nodes,
            queue_len: 64,
            max_packet: PACKET,
        }],
        wait_queue_len: 64,
        affinity: Affinity::InFlight,
        unit_len: PACKET,
        admission,
    };
    Scheduler::new(config, policy).expect("valid configuration")
}

/// Packet `i` of the stream: jobs of four packets, every other job chained (CBC).
fn packet(i: u64) -> Packet<Len> {
    let (job, seq) = (i / 4, (i % 4) as u32);
    let mode = if job % 2 == 0 { Mode::Cbc } else { Mode::Ecb };
    Packet::new(
        PacketMeta::new(TaskId(job), Cmd::Encrypt, ClusterId(0))
            .dependent(mode.is_chained())
            .at(seq, seq == 3),
        Len(PACKET),
    )
}

fn arrive_and_complete(c: &mut Criterion) {
    let mut group = c.benchmark_group("sched/arrive+complete");
    group.throughput(Throughput::Elements(1));
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for policy in [
        PolicySpec::paper_defaults(),
        PolicySpec::hhs_acdid(),
        PolicySpec::mct(),
    ] {
        for nodes in [2, 8, 32] {
            for admission in [Admission::Fifo, Admission::Fair] {
                let name = format!("{}/{nodes}/{}", policy.name(), admission.as_str());
                group.bench_function(name, |b| {
                    let mut s = core(&policy, nodes, admission);
                    let mut next = 0u64;
                    // Saturate: every node full, packets waiting in the cluster queue (first
                    // come first served) or in the jobs' own queues (fair).
                    while next < (8 * nodes + 32) as u64 {
                        s.arrive(packet(next)).expect("room while filling");
                        next += 1;
                    }
                    s.dispatches().for_each(drop);
                    let mut node = 0;
                    b.iter(|| {
                        // Complete on the next node that has work, then offer one more packet.
                        while s.node_queue(NodeId(node as u32)).len() == 0 {
                            node = (node + 1) % nodes;
                        }
                        black_box(s.complete(NodeId(node as u32)).expect("busy node"));
                        node = (node + 1) % nodes;
                        if let Err(e) = s.arrive(packet(next)) {
                            panic!("saturated core refused a packet: {e}");
                        }
                        next += 1;
                        for d in s.dispatches() {
                            black_box(d);
                        }
                    });
                });
            }
        }
    }
    group.finish();
}

/// One chained job of `JOB_PACKETS` packets admitted on 2 idle nodes: 8 packets go to a node,
/// the rest wait in the job's own queue. The runtime admits a submitted job this way.
fn admit_one_job(c: &mut Criterion) {
    const JOB_PACKETS: u32 = 4096;
    let job = || -> VecDeque<Packet<Len>> {
        (0..JOB_PACKETS)
            .map(|seq| {
                Packet::new(
                    PacketMeta::new(TaskId(1), Cmd::Encrypt, ClusterId(0))
                        .dependent(true)
                        .at(seq, seq + 1 == JOB_PACKETS),
                    Len(PACKET),
                )
            })
            .collect()
    };
    let fresh = || {
        (
            core(&PolicySpec::paper_defaults(), 2, Admission::Fair),
            job(),
        )
    };
    let mut group = c.benchmark_group("sched/admit-4096-packets");
    group.throughput(Throughput::Elements(JOB_PACKETS.into()));
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    group.bench_function("arrive each", |b| {
        b.iter_batched(
            fresh,
            |(mut s, packets)| {
                for p in packets {
                    s.arrive(p).expect("fair admission takes every packet");
                }
                s
            },
            BatchSize::LargeInput,
        );
    });
    group.bench_function("arrive_many", |b| {
        b.iter_batched(
            fresh,
            |(mut s, mut packets)| {
                let n = s.arrive_many(&mut packets, |e| panic!("{e}"));
                assert_eq!(n, JOB_PACKETS as usize);
                s
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

criterion_group!(benches, arrive_and_complete, admit_one_job);
criterion_main!(benches);
