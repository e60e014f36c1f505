//! Property test of the whole service: random configurations (packet size, AES nodes with and
//! without slowdown, pinned or not, Ed25519 nodes, policy, affinity, queue sizes) running random
//! mixes of jobs (AES in the five plain modes with 128/192/256-bit keys, both directions, PKCS#7
//! on and off for ECB and CBC, lengths 0..2000 with partial final blocks where the mode allows;
//! Ed25519 sign and verify with valid and invalid signatures) submitted from 1–3 threads at
//! once, next to 1–2 streams; the jobs spread over up to three tenants of random weights
//! besides the default one, with the light path on or off.
//!
//! Every output is compared with the one-shot result of the plain RustCrypto crates and
//! `ed25519-dalek` (see `common`), every handle must resolve (within a minute), and after the
//! service drains the counters must add up: jobs, packets and bytes per node, no stored
//! chaining state, empty queues and choose lists, and no tenant with anything in flight.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Gen, cores, ed_public, ed_sign, ed_verify, ref_aes};
use cryptodispatch::crypto::padded_len;
use cryptodispatch::error::CryptoError;
use cryptodispatch::packet::Mode;
use cryptodispatch::{
    AesOp, Affinity, ClusterKind, Direction, Job, JobError, JobOutput, KeyId, NodeSpec, Padding,
    PolicySpec, Service, ServiceBuilder, SubmitError, TenantSpec, TrySubmitError,
};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config as ProptestConfig;

const AES_KEY_LENS: [usize; 3] = [16, 24, 32];
/// The largest stream chunk pushed, in blocks: 640 bytes, more than the smallest node capacity
/// here (the default, 8 packets of 16 bytes), so long chunks are cut into several packets.
const MAX_CHUNK_BLOCKS: usize = 40;

#[derive(Debug, Clone)]
struct NodeCfg {
    slowdown: Option<f64>,
    pinned: bool,
}

#[derive(Debug, Clone)]
struct Config {
    packet_blocks: usize,
    aes_nodes: Vec<NodeCfg>,
    ed_nodes: Vec<NodeCfg>,
    policy: PolicySpec,
    affinity: Affinity,
    small_queues: bool,
    threads: usize,
    /// The service's inline limit: 0 (every job to a node), the default, or every AES job of
    /// one packet.
    inline_limit: usize,
    /// The weights of the tenants registered besides the default one (none to three).
    tenant_weights: Vec<u32>,
    light_path: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tamper {
    None,
    Message,
    SigR,
    SigS,
    OtherKey,
}

#[derive(Debug, Clone)]
enum JobSpec {
    Aes {
        key: usize,
        mode: Mode,
        decrypt: bool,
        pad: bool,
        len: usize,
        bad_padding: bool,
        seed: u64,
        try_first: bool,
    },
    Sign {
        key: usize,
        msg_len: usize,
        seed: u64,
    },
    Verify {
        key: usize,
        msg_len: usize,
        tamper: Tamper,
        by_signing_key: bool,
        seed: u64,
    },
}

#[derive(Debug, Clone)]
struct StreamSpec {
    key: usize,
    mode: Mode,
    decrypt: bool,
    pad: bool,
    chunks: Vec<usize>,
    final_len: usize,
    seed: u64,
}

fn node_cfg() -> impl Strategy<Value = NodeCfg> {
    (prop::option::weighted(0.4, 1.0f64..3.0), any::<bool>())
        .prop_map(|(slowdown, pinned)| NodeCfg { slowdown, pinned })
}

fn policy() -> impl Strategy<Value = PolicySpec> {
    prop_oneof![
        (0.0f64..=1.0, 0.0f64..=1.0).prop_map(|(alpha, beta)| PolicySpec::paper(
            alpha,
            if alpha == 0.0 && beta == 0.0 {
                1.0
            } else {
                beta
            },
        )),
        Just(PolicySpec::hhs_acdid()),
        // Every policy the registry knows, with its default parameters, and p2c reseeded.
        prop::sample::select(PolicySpec::all()),
        any::<u64>().prop_map(PolicySpec::p2c),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        1usize..=16,
        prop::collection::vec(node_cfg(), 1..=4),
        prop::collection::vec(node_cfg(), 1..=2),
        policy(),
        select(vec![Affinity::Strict, Affinity::InFlight]),
        prop::bool::weighted(0.3),
        1usize..=3,
        select(vec![0, ServiceBuilder::DEFAULT_INLINE_LIMIT, usize::MAX]),
        (prop::collection::vec(1u32..=4, 0..=3), any::<bool>()),
    )
        .prop_map(
            |(
                packet_blocks,
                aes_nodes,
                ed_nodes,
                policy,
                affinity,
                small_queues,
                threads,
                inline_limit,
                (tenant_weights, light_path),
            )| {
                Config {
                    packet_blocks,
                    aes_nodes,
                    ed_nodes,
                    policy,
                    affinity,
                    small_queues,
                    threads,
                    inline_limit,
                    tenant_weights,
                    light_path,
                }
            },
        )
}

fn mode() -> impl Strategy<Value = Mode> {
    select(Mode::UNAUTHENTICATED.to_vec())
}

fn job() -> impl Strategy<Value = JobSpec> {
    let aes = (
        0usize..6,
        mode(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![0usize..64, 0usize..2000],
        prop::bool::weighted(0.25),
        any::<u64>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(key, mode, decrypt, pad, len, bad_padding, seed, try_first)| JobSpec::Aes {
                key,
                mode,
                decrypt,
                pad,
                len,
                bad_padding,
                seed,
                try_first,
            },
        );
    let sign = (0usize..3, 0usize..=128, any::<u64>())
        .prop_map(|(key, msg_len, seed)| JobSpec::Sign { key, msg_len, seed });
    let verify = (
        0usize..3,
        0usize..=128,
        select(vec![
            Tamper::None,
            Tamper::None,
            Tamper::Message,
            Tamper::SigR,
            Tamper::SigS,
            Tamper::OtherKey,
        ]),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |(key, msg_len, tamper, by_signing_key, seed)| JobSpec::Verify {
                key,
                msg_len,
                tamper,
                by_signing_key,
                seed,
            },
        );
    prop_oneof![4 => aes, 1 => sign, 1 => verify]
}

fn stream() -> impl Strategy<Value = StreamSpec> {
    (
        0usize..6,
        mode(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(0usize..=MAX_CHUNK_BLOCKS, 0..8),
        0usize..=300,
        any::<u64>(),
    )
        .prop_map(
            |(key, mode, decrypt, pad, chunks, final_len, seed)| StreamSpec {
                key,
                mode,
                decrypt,
                pad,
                chunks,
                final_len,
                seed,
            },
        )
}

// ---------------------------------------------------------------------------------------------
// Turning specs into jobs with their expected results
// ---------------------------------------------------------------------------------------------

/// The keys of one case: six AES keys (two of each size) and three Ed25519 keys, registered
/// both as signing and as verifying keys.
struct Keys {
    aes_raw: Vec<Vec<u8>>,
    aes: Vec<KeyId>,
    seeds: Vec<[u8; 32]>,
    signing: Vec<KeyId>,
    verifying: Vec<KeyId>,
}

impl Keys {
    fn register(s: &Service, seed: u64) -> Keys {
        let mut g = Gen::new(seed);
        let aes_raw: Vec<Vec<u8>> = (0..6).map(|i| g.bytes(AES_KEY_LENS[i % 3])).collect();
        let aes = aes_raw.iter().map(|k| s.add_aes_key(k).unwrap()).collect();
        let seeds: Vec<[u8; 32]> = (0..3).map(|_| g.array()).collect();
        let signing = seeds
            .iter()
            .map(|k| s.add_signing_key(k).unwrap())
            .collect();
        let verifying = seeds
            .iter()
            .map(|k| s.add_verifying_key(&ed_public(k)).unwrap())
            .collect();
        Keys {
            aes_raw,
            aes,
            seeds,
            signing,
            verifying,
        }
    }
}

fn aes_op(mode: Mode, decrypt: bool, pad: bool) -> AesOp {
    let direction = if decrypt {
        Direction::Decrypt
    } else {
        Direction::Encrypt
    };
    let padding = if pad && mode.needs_whole_blocks() {
        Padding::Pkcs7
    } else {
        Padding::None
    };
    AesOp::new(direction, mode).with_padding(padding)
}

/// A job ready to submit, with what it must give and what it costs the nodes.
struct Planned {
    job: Job,
    len: usize,
    try_first: bool,
    expected: Result<JobOutput, JobError>,
    cluster: ClusterKind,
    packets: u64,
    bytes: u64,
    /// An AES job of a parallel operation, which runs inline up to
    /// `ServiceBuilder::PARALLEL_INLINE_FACTOR` times the inline limit.
    parallel: bool,
}

fn plan(spec: &JobSpec, keys: &Keys, packet: usize) -> Planned {
    match *spec {
        JobSpec::Aes {
            key,
            mode,
            decrypt,
            pad,
            len,
            bad_padding,
            seed,
            try_first,
        } => {
            let mut g = Gen::new(seed);
            let op = aes_op(mode, decrypt, pad);
            let raw = &keys.aes_raw[key];
            // ECB ignores the IV, whatever its length.
            let iv = g.bytes(if mode == Mode::Ecb {
                (seed % 20) as usize
            } else {
                16
            });
            let whole = mode.needs_whole_blocks() && !op.pads_on_encrypt();
            let input = if op.padding == Padding::Pkcs7 && decrypt {
                if bad_padding {
                    g.bytes((len / 16 * 16).max(16))
                } else {
                    let plain = g.bytes(len);
                    ref_aes(raw, aes_op(mode, false, true), &iv, &plain).unwrap()
                }
            } else if whole {
                g.bytes(len / 16 * 16)
            } else {
                g.bytes(len)
            };
            let expected = match ref_aes(raw, op, &iv, &input) {
                Ok(out) => Ok(JobOutput::Data(out)),
                Err(_) => Err(JobError::Crypto(CryptoError::BadPadding)),
            };
            let buffer = if op.pads_on_encrypt() {
                padded_len(input.len())
            } else {
                input.len()
            };
            // The padding block rides in the last packet: the AES nodes here have the
            // default capacity, eight packets and a block each.
            let input_len = input.len();
            Planned {
                len: input_len,
                job: Job::aes(keys.aes[key], op, &iv, input),
                try_first,
                expected,
                cluster: ClusterKind::Aes,
                packets: input_len.div_ceil(packet).max(1) as u64,
                bytes: buffer as u64,
                parallel: !op.is_serial(),
            }
        }
        JobSpec::Sign { key, msg_len, seed } => {
            let msg = Gen::new(seed).bytes(msg_len);
            Planned {
                len: msg.len(),
                expected: Ok(JobOutput::Signature(ed_sign(&keys.seeds[key], &msg))),
                job: Job::sign(keys.signing[key], msg),
                try_first: seed % 3 == 0,
                cluster: ClusterKind::Ed25519,
                packets: 1,
                bytes: msg_len as u64,
                parallel: false,
            }
        }
        JobSpec::Verify {
            key,
            msg_len,
            tamper,
            by_signing_key,
            seed,
        } => {
            let mut msg = Gen::new(seed).bytes(msg_len);
            let seed_k = &keys.seeds[key];
            let mut sig = ed_sign(seed_k, &msg);
            match tamper {
                Tamper::None => {}
                Tamper::Message => match msg.last_mut() {
                    Some(b) => *b ^= 0x80,
                    None => msg.push(1),
                },
                Tamper::SigR => sig[3] ^= 0x10,
                Tamper::SigS => sig[35] ^= 0x01,
                Tamper::OtherKey => sig = ed_sign(&keys.seeds[(key + 1) % 3], &msg),
            }
            let valid = ed_verify(&ed_public(seed_k), &msg, &sig);
            assert_eq!(valid, tamper == Tamper::None, "reference verification");
            let id = if by_signing_key {
                keys.signing[key]
            } else {
                keys.verifying[key]
            };
            Planned {
                len: msg.len(),
                bytes: msg.len() as u64,
                job: Job::verify(id, msg, &sig),
                try_first: seed % 3 == 1,
                expected: Ok(JobOutput::Verified(valid)),
                cluster: ClusterKind::Ed25519,
                packets: 1,
                parallel: false,
            }
        }
    }
}

/// A stream's chunks and the one-shot result of their concatenation.
struct PlannedStream {
    op: AesOp,
    iv: Vec<u8>,
    pushes: Vec<Vec<u8>>,
    last: Vec<u8>,
    expected: Vec<u8>,
}

fn plan_stream(spec: &StreamSpec, keys: &Keys) -> PlannedStream {
    let mut g = Gen::new(spec.seed);
    let op = aes_op(spec.mode, spec.decrypt, spec.pad);
    let iv = g.bytes(if spec.mode == Mode::Ecb { 0 } else { 16 });
    let raw = &keys.aes_raw[spec.key];
    let front_len: usize = spec.chunks.iter().sum::<usize>() * 16;
    let (front, last) = if op.padding == Padding::Pkcs7 && spec.decrypt {
        // Decrypting a padded message: the ciphertext of a random plaintext; the final chunk
        // holds its last 1..=4 blocks.
        let plain = g.bytes(front_len + spec.final_len);
        let ct = ref_aes(raw, aes_op(spec.mode, false, true), &iv, &plain).unwrap();
        let last_blocks = (1 + spec.seed as usize % 4).min(ct.len() / 16);
        let (front, last) = ct.split_at(ct.len() - 16 * last_blocks);
        (front.to_vec(), last.to_vec())
    } else {
        let last_len = if spec.mode.needs_whole_blocks() && !op.pads_on_encrypt() {
            spec.final_len / 16 * 16
        } else {
            spec.final_len
        };
        (g.bytes(front_len), g.bytes(last_len))
    };
    // Cut the front as the chunk sizes say, then in pieces of at most MAX_CHUNK_BLOCKS blocks.
    let mut pushes = Vec::new();
    let mut rest = front.as_slice();
    for &blocks in &spec.chunks {
        let (piece, tail) = rest.split_at((blocks * 16).min(rest.len()));
        pushes.push(piece.to_vec());
        rest = tail;
    }
    for piece in rest.chunks(MAX_CHUNK_BLOCKS * 16) {
        pushes.push(piece.to_vec());
    }
    let mut whole = front.clone();
    whole.extend_from_slice(&last);
    let expected = ref_aes(raw, op, &iv, &whole).expect("stream input is well-formed");
    PlannedStream {
        op,
        iv,
        pushes,
        last,
        expected,
    }
}

// ---------------------------------------------------------------------------------------------
// The property
// ---------------------------------------------------------------------------------------------

fn build(cfg: &Config) -> Service {
    let n_cores = cores();
    let node = |i: usize, c: &NodeCfg| {
        let mut spec = if c.pinned && n_cores > 0 {
            NodeSpec::pinned(i % n_cores)
        } else {
            NodeSpec::new()
        };
        if let Some(f) = c.slowdown {
            spec = spec.slowdown(f);
        }
        spec
    };
    let mut b = Service::builder()
        .packet_size(16 * cfg.packet_blocks)
        .aes_cluster(cfg.aes_nodes.iter().enumerate().map(|(i, c)| node(i, c)))
        .ed25519_cluster(
            cfg.ed_nodes
                .iter()
                .enumerate()
                // Ed25519 messages here are up to 129 bytes: one packet each.
                .map(|(i, c)| node(i, c).capacity(256)),
        )
        .policy(cfg.policy.clone())
        .affinity(cfg.affinity)
        .inline_limit(cfg.inline_limit)
        .light_path(cfg.light_path);
    if cfg.small_queues {
        b = b
            .cluster_queue_len(2)
            .wait_queue_len(1)
            .receive_queue_len(4);
    }
    b.build().expect("the configuration is valid")
}

fn run_case(cfg: &Config, jobs: &[JobSpec], streams: &[StreamSpec], key_seed: u64) {
    let service = build(cfg);
    let packet = service.packet_size();
    let keys = Keys::register(&service, key_seed);
    let planned: Vec<Planned> = jobs.iter().map(|j| plan(j, &keys, packet)).collect();
    let planned_streams: Vec<PlannedStream> =
        streams.iter().map(|s| plan_stream(s, &keys)).collect();

    // What the nodes must have done, in total.
    let mut want_packets = [0u64; 2];
    let mut want_bytes = [0u64; 2];
    let mut want_failed = 0u64;
    let mut want_jobs = planned.len() as u64;
    let mut want_inline = 0u64;
    for p in &planned {
        want_failed += u64::from(p.expected.is_err());
        // An AES job of one packet within the inline limit (for a parallel operation, a
        // multiple of it) runs on the submitting thread, unless tenants share the service:
        // then it goes to a node, where their weights share the nodes.
        let reach = if p.parallel {
            cfg.inline_limit
                .saturating_mul(ServiceBuilder::PARALLEL_INLINE_FACTOR)
        } else {
            cfg.inline_limit
        };
        if p.cluster == ClusterKind::Aes
            && p.packets == 1
            && cfg.inline_limit > 0
            && cfg.tenant_weights.is_empty()
            && p.bytes <= reach as u64
        {
            want_inline += 1;
            continue;
        }
        let c = p.cluster as usize;
        want_packets[c] += p.packets;
        want_bytes[c] += p.bytes;
    }
    // A stream chunk is a job of its own, cut into packets like any job; only the final
    // chunk of an encryption is padded.
    let packets_of = |len: usize| len.div_ceil(packet).max(1) as u64;
    for s in &planned_streams {
        want_jobs += s.pushes.len() as u64 + 1;
        let last = if s.op.pads_on_encrypt() {
            padded_len(s.last.len())
        } else {
            s.last.len()
        };
        want_packets[0] += s.pushes.iter().map(|p| packets_of(p.len())).sum::<u64>();
        want_packets[0] += packets_of(s.last.len());
        want_bytes[0] += s.pushes.iter().map(|p| p.len() as u64).sum::<u64>() + last as u64;
    }

    // The jobs take the tenants in turn, the default one among them.
    let tenants: Vec<_> = cfg
        .tenant_weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            service
                .add_tenant(TenantSpec::new(format!("tenant-{i}")).weight(w))
                .expect("tenant")
        })
        .collect();
    let resolved = AtomicUsize::new(0);
    let mut slots: Vec<Vec<Planned>> = (0..cfg.threads).map(|_| Vec::new()).collect();
    for (i, mut p) in planned.into_iter().enumerate() {
        if let Some(&t) = (i % (tenants.len() + 1))
            .checked_sub(1)
            .and_then(|t| tenants.get(t))
        {
            p.job = p.job.tenant(t);
        }
        slots[i % cfg.threads].push(p);
    }
    std::thread::scope(|s| {
        let service = &service;
        let resolved = &resolved;
        for mine in slots {
            s.spawn(move || {
                let mut handles = Vec::new();
                for p in mine {
                    let Planned {
                        job,
                        len,
                        try_first,
                        expected,
                        ..
                    } = p;
                    let job = if try_first {
                        match service.try_submit(job) {
                            Ok(h) => {
                                handles.push((h, expected));
                                continue;
                            }
                            Err(TrySubmitError::Full(back)) => {
                                assert_eq!(back.len(), len, "the job handed back");
                                back
                            }
                            Err(e) => panic!("refused: {e}"),
                        }
                    } else {
                        job
                    };
                    handles.push((service.submit(job).expect("submit"), expected));
                }
                for (mut h, expected) in handles {
                    let task = h.task();
                    let out = h
                        .wait_timeout(Duration::from_secs(60))
                        .unwrap_or_else(|| panic!("job {task} not resolved within a minute"));
                    assert_eq!(out, expected, "job {task}");
                    resolved.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for (k, (spec, plan)) in streams.iter().zip(&planned_streams).enumerate() {
            let keys = &keys;
            s.spawn(move || {
                let mut stream = service
                    .stream(keys.aes[spec.key], plan.op, &plan.iv)
                    .expect("open stream");
                let mut outputs = Vec::new();
                for chunk in &plan.pushes {
                    stream.push(chunk.clone()).expect("push");
                    if let Some(out) = stream.try_recv() {
                        outputs.push(out.expect("chunk output"));
                    }
                }
                stream.finish(plan.last.clone()).expect("finish");
                assert_eq!(
                    stream.push(vec![0; 16]).unwrap_err(),
                    SubmitError::StreamFinished
                );
                while let Some(out) = stream.recv() {
                    outputs.push(out.expect("chunk output"));
                }
                assert_eq!(outputs.len(), plan.pushes.len() + 1, "stream {k}: outputs");
                // In order: chunk i's output is the slice of the one-shot result at its place.
                let mut at = 0;
                for (i, (out, chunk)) in outputs.iter().zip(&plan.pushes).enumerate() {
                    assert_eq!(out.len(), chunk.len(), "stream {k} chunk {i}: length");
                    assert_eq!(
                        out[..],
                        plan.expected[at..at + chunk.len()],
                        "stream {k} chunk {i}"
                    );
                    at += chunk.len();
                }
                assert_eq!(
                    outputs.last().unwrap()[..],
                    plan.expected[at..],
                    "stream {k}: final chunk"
                );
                resolved.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    assert_eq!(resolved.into_inner(), jobs.len() + streams.len());

    service.shutdown();
    let m = service.metrics();
    assert_eq!(m.jobs_submitted, want_jobs, "jobs submitted\n{m}");
    assert_eq!(
        m.jobs_submitted,
        m.jobs_completed + m.jobs_failed,
        "every job finished\n{m}"
    );
    assert_eq!(m.jobs_failed, want_failed, "failed jobs\n{m}");
    // A job of one AES packet also runs inline, whatever its length, while its node is
    // stalled with light packets waiting, or holds a set of its tenant's light packets
    // (docs/ALGORITHM.md §15.7): the light path on, tenants to share between, inline runs
    // allowed. Which jobs, the timing decides.
    let (stalled, behind) = (m.jobs_inline_stalled, m.jobs_inline_behind);
    if !(cfg.light_path && !cfg.tenant_weights.is_empty() && cfg.inline_limit > 0) {
        assert_eq!(stalled, 0, "jobs run inline beside a stalled node\n{m}");
        assert_eq!(behind, 0, "jobs run inline as their tenant was behind\n{m}");
    }
    // Each such job is its tenant's.
    let by_tenant: u64 = m.tenants.iter().map(|t| t.jobs_inline_stalled).sum();
    assert_eq!(
        by_tenant, stalled,
        "jobs run inline beside a stalled node, by tenant\n{m}"
    );
    let by_tenant: u64 = m.tenants.iter().map(|t| t.jobs_inline_behind).sum();
    assert_eq!(
        by_tenant, behind,
        "jobs run inline as their tenant was behind, by tenant\n{m}"
    );
    assert_eq!(
        m.jobs_inline - stalled - behind,
        want_inline,
        "jobs run inline\n{m}"
    );
    assert_eq!(
        m.packets_completed + m.packets_failed,
        m.packets_admitted,
        "packets\n{m}"
    );
    assert_eq!(m.stored_states, 0, "stored chaining states\n{m}");
    for t in &m.tenants {
        assert_eq!(
            (t.jobs_in_flight, t.bytes_in_flight, t.bytes_waiting),
            (0, 0, 0),
            "tenant {} in flight\n{m}",
            t.name
        );
    }
    for c in &m.clusters {
        assert_eq!(
            (
                c.receive_queue,
                c.cluster_queue,
                c.wait_queue,
                c.choose_list
            ),
            (0, 0, 0, 0),
            "{:?} queues\n{m}",
            c.kind
        );
    }
    for (i, kind) in [ClusterKind::Aes, ClusterKind::Ed25519]
        .into_iter()
        .enumerate()
    {
        let nodes = m.nodes.iter().filter(|n| n.cluster == kind);
        let (packets, bytes) = nodes.fold((0, 0), |(p, b), n| (p + n.packets, b + n.bytes));
        // Each job run inline beside a stalled node, or as its tenant was behind, is one AES
        // packet that no node ran.
        let (inline, longest) = match kind {
            ClusterKind::Aes => (stalled + behind, (packet + 16) as u64),
            ClusterKind::Ed25519 => (0, 0),
        };
        assert_eq!(packets + inline, want_packets[i], "{kind} packets\n{m}");
        assert!(
            bytes <= want_bytes[i] && bytes + inline * longest >= want_bytes[i],
            "{kind} bytes {bytes}, want {} less at most {inline} packets\n{m}",
            want_bytes[i]
        );
    }
    for n in &m.nodes {
        assert_eq!((n.queue_depth, n.queued_bytes), (0, 0), "node queue\n{m}");
        assert_eq!(n.panics, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        // Failures are reported with their minimal input; nothing is written to the tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_job_mixes_match_the_reference(
        cfg in config(),
        jobs in prop::collection::vec(job(), 0..40),
        streams in prop::collection::vec(stream(), 1..=2),
        key_seed in any::<u64>(),
    ) {
        run_case(&cfg, &jobs, &streams, key_seed);
    }
}
