//! Regression benchmark for the scheduler core alone: the cost of one arrive-and-complete in a
//! saturated cluster (every node full, packets waiting), per policy, cluster size and admission.
//! No threads, no crypto. This is most of what a cluster's lock is held for per packet (the
//! engine's contention note in docs/ALGORITHM.md §15.5 reads its figures from here).
//!
//! `cargo bench --bench sched`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
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

criterion_group!(benches, arrive_and_complete);
criterion_main!(benches);
