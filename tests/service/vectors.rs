//! Known answers through the whole service: every NIST CAVP AES record (ECB, CBC, OFB, CFB-128;
//! GFSbox, KeySbox, VarKey, VarTxt, MMT; 128/192/256-bit keys; both directions) and every line
//! of the Ed25519 `sign.input` list, submitted as jobs to a running `Service` and checked.
//!
//! Jobs are submitted pipelined — all of them from two threads before any is waited on — to a
//! service with several nodes and a packet size of 16 bytes (32 in the second configuration),
//! so multi-block MMT records are cut into packets that the scheduler interleaves with other
//! jobs' packets and may place on different nodes. Every count is asserted, so a parser that
//! silently reads nothing cannot make a test pass.

use crate::common;

use std::collections::HashMap;
use std::fs;

use common::vectors::{
    Record, SignVector, classify, expected_per_section, parse_rsp, parse_sign_line, rsp_files,
    vectors_dir,
};
use cryptodispatch::packet::Mode;
use cryptodispatch::{
    AesOp, Affinity, ClusterKind, Direction, Job, JobHandle, JobOutput, KeyId, NodeSpec,
    PolicySpec, Service, ServiceBuilder,
};

/// Every record of every file, with the per-file counts checked.
fn all_records() -> Vec<Record> {
    let dir = vectors_dir("aes");
    let files = rsp_files();
    let mut all = Vec::new();
    let mut per_mode: HashMap<Mode, usize> = HashMap::new();
    for file in &files {
        let (mode, kind, bits) = classify(file);
        let text = fs::read_to_string(dir.join(file)).unwrap();
        let records = parse_rsp(&text, file, mode);
        let per_section = expected_per_section(kind, bits, file);
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let n = records.iter().filter(|r| r.direction == direction).count();
            assert_eq!(n, per_section, "{file}: records in {direction:?}");
        }
        let count_lines = text
            .lines()
            .filter(|l| l.trim_start().starts_with("COUNT"))
            .count();
        assert_eq!(records.len(), count_lines, "{file}: records vs COUNT lines");
        for r in &records {
            assert_eq!(r.key.len() * 8, bits, "{}: key length", r.at);
            assert_eq!(r.input.len(), r.expected.len(), "{}: lengths", r.at);
            assert!(
                !r.input.is_empty() && r.input.len() % 16 == 0,
                "{}: not whole blocks",
                r.at
            );
        }
        *per_mode.entry(mode).or_default() += records.len();
        all.extend(records);
    }
    for mode in [Mode::Ecb, Mode::Cbc, Mode::Ofb, Mode::Cfb] {
        assert_eq!(per_mode[&mode], 2138, "{mode} records");
    }
    assert_eq!(all.len(), 8552, "AES records");
    all
}

/// What the nodes ran and what ran on the submitting threads.
struct Ran {
    /// Records checked.
    checked: usize,
    /// Records cut into more than one packet.
    multi: usize,
    /// Packets and bytes the nodes ran: every record but those run inline.
    node_packets: u64,
    node_bytes: u64,
    /// Records of one packet within the inline limit, run on the submitting threads.
    inline: u64,
}

/// Submits every record (from two threads, all before any wait), then checks every output.
/// `inline_limit` is the service's: records of one packet up to that many bytes (for a parallel
/// operation, `ServiceBuilder::PARALLEL_INLINE_FACTOR` times as many) run on the submitting
/// threads.
fn run_aes_records(service: &Service, records: &[Record], inline_limit: usize) -> Ran {
    // One key per distinct key, registered once.
    let mut keys: HashMap<&[u8], KeyId> = HashMap::new();
    for r in records {
        if !keys.contains_key(r.key.as_slice()) {
            keys.insert(&r.key, service.add_aes_key(&r.key).unwrap());
        }
    }
    let packet = service.packet_size();
    let checked: usize = std::thread::scope(|s| {
        let keys = &keys;
        let workers: Vec<_> = [0, 1]
            .into_iter()
            .map(|parity| {
                s.spawn(move || {
                    // Interleave the files: this thread takes every other record.
                    let mine: Vec<&Record> = records.iter().skip(parity).step_by(2).collect();
                    let handles: Vec<(JobHandle, &Record)> = mine
                        .iter()
                        .map(|r| {
                            let key = keys[r.key.as_slice()];
                            let job = match r.direction {
                                Direction::Encrypt => {
                                    Job::encrypt(key, r.mode, &r.iv, r.input.clone())
                                }
                                Direction::Decrypt => {
                                    Job::decrypt(key, r.mode, &r.iv, r.input.clone())
                                }
                            };
                            let h = service
                                .submit(job)
                                .unwrap_or_else(|e| panic!("{}: submit: {e}", r.at));
                            (h, *r)
                        })
                        .collect();
                    let mut n = 0;
                    for (h, r) in handles {
                        let out = h.wait().unwrap_or_else(|e| panic!("{}: job: {e}", r.at));
                        let JobOutput::Data(data) = out else {
                            panic!("{}: not data: {out:?}", r.at)
                        };
                        assert_eq!(hex::encode(&data), hex::encode(&r.expected), "{}", r.at);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let multi = records.iter().filter(|r| r.input.len() > packet).count();
    let runs_inline = |r: &&Record| {
        let reach = if AesOp::new(r.direction, r.mode).is_serial() {
            inline_limit
        } else {
            inline_limit.saturating_mul(ServiceBuilder::PARALLEL_INLINE_FACTOR)
        };
        r.input.len() <= packet.min(reach)
    };
    let on_nodes = || records.iter().filter(|r| !runs_inline(r));
    for id in keys.into_values() {
        service.remove_key(id).unwrap();
    }
    Ran {
        checked,
        multi,
        node_packets: on_nodes()
            .map(|r| r.input.len().div_ceil(packet) as u64)
            .sum(),
        node_bytes: on_nodes().map(|r| r.input.len() as u64).sum(),
        inline: records.iter().filter(runs_inline).count() as u64,
    }
}

/// Per-cluster sums of the nodes' packet and byte counters.
fn node_totals(service: &Service, kind: ClusterKind) -> (u64, u64) {
    let m = service.metrics();
    m.nodes_of(kind)
        .fold((0, 0), |(p, b), n| (p + n.packets, b + n.bytes))
}

fn pinned(i: usize) -> NodeSpec {
    match common::cores() {
        0 => NodeSpec::new(),
        n => NodeSpec::pinned(i % n),
    }
}

#[test]
fn aes_cavp_records_through_the_service() {
    let records = all_records();
    let service = Service::builder()
        .packet_size(16)
        .aes_cluster([pinned(0), pinned(1), NodeSpec::new().slowdown(1.5)])
        .ed25519_cluster([NodeSpec::new()])
        .build()
        .unwrap();
    let ran = run_aes_records(&service, &records, ServiceBuilder::DEFAULT_INLINE_LIMIT);
    assert_eq!(ran.checked, 8552, "AES records checked");
    // MMT: COUNT 1..=9 of each section have 2..=10 blocks: cut into 2..=10 packets of 16 bytes.
    assert_eq!(ran.multi, 4 * 3 * 2 * 9, "records cut into several packets");
    service.shutdown();
    assert_eq!(
        node_totals(&service, ClusterKind::Aes),
        (ran.node_packets, ran.node_bytes)
    );
    let m = service.metrics();
    // The one-block records (all but MMT's longer ones) ran on the submitting threads.
    assert_eq!(ran.inline, 8552 - 4 * 3 * 2 * 9);
    assert_eq!(m.jobs_inline, ran.inline);
    assert_eq!(m.jobs_submitted, 8552);
    assert_eq!(m.jobs_completed, 8552);
    assert_eq!(m.jobs_failed, 0);
    assert_eq!(m.stored_states, 0);
    assert_eq!(m.keys, 0);
}

#[test]
fn aes_cavp_records_run_inline() {
    // At the default packet size and inline limit every record (at most 160 bytes) runs on
    // its submitting thread (docs/ALGORITHM.md §15.6).
    let records = all_records();
    let service = Service::builder()
        .aes_cluster([pinned(0), pinned(1)])
        .build()
        .unwrap();
    let ran = run_aes_records(&service, &records, ServiceBuilder::DEFAULT_INLINE_LIMIT);
    assert_eq!((ran.checked, ran.inline), (8552, 8552));
    service.shutdown();
    assert_eq!(node_totals(&service, ClusterKind::Aes), (0, 0));
    let m = service.metrics();
    assert_eq!((m.jobs_inline, m.jobs_completed), (8552, 8552));
}

#[test]
fn aes_cavp_records_under_hhs_acdid_and_strict_affinity() {
    let records = all_records();
    let service = Service::builder()
        .packet_size(32)
        .aes_cluster([pinned(0), NodeSpec::new().slowdown(1.25), pinned(1)])
        .policy(PolicySpec::hhs_acdid())
        .affinity(Affinity::Strict)
        .cluster_queue_len(8)
        .wait_queue_len(4)
        .receive_queue_len(16)
        // Every record goes to a node, through these small queues.
        .inline_limit(0)
        .build()
        .unwrap();
    let ran = run_aes_records(&service, &records, 0);
    assert_eq!(ran.checked, 8552, "AES records checked");
    // MMT records of 3..=10 blocks need more than one 32-byte packet.
    assert_eq!(ran.multi, 4 * 3 * 2 * 8, "records cut into several packets");
    service.shutdown();
    assert_eq!(
        node_totals(&service, ClusterKind::Aes),
        (ran.node_packets, ran.node_bytes)
    );
    let m = service.metrics();
    assert_eq!(m.jobs_inline, 0, "every record went to a node");
    assert_eq!((m.jobs_submitted, m.jobs_completed), (8552, 8552));
    assert!(m.clusters.iter().all(|c| c.choose_list == 0));
}

// ---------------------------------------------------------------------------------------------
// Ed25519: `sign.input`
// ---------------------------------------------------------------------------------------------

/// What each submitted Ed25519 job must give.
struct EdCheck<'a> {
    v: &'a SignVector,
    what: &'static str,
    handle: JobHandle,
    expected: JobOutput,
}

#[test]
fn ed25519_sign_input_through_the_service() {
    let path = vectors_dir("ed25519").join("sign.input");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vectors: Vec<SignVector> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_sign_line(l.trim(), &format!("sign.input line {}", i + 1)))
        .collect();
    assert_eq!(vectors.len(), 1024, "lines in sign.input");
    let longest = vectors.iter().map(|v| v.msg.len()).max().unwrap();
    assert_eq!(longest, 1023);

    let service = Service::builder()
        .packet_size(16)
        .aes_cluster([NodeSpec::new()])
        .ed25519_cluster([pinned(0).capacity(4096), pinned(1).capacity(2048)])
        .build()
        .unwrap();

    let checked: usize = std::thread::scope(|s| {
        let service = &service;
        let workers: Vec<_> = vectors
            .chunks(512)
            .map(|chunk| {
                s.spawn(move || {
                    let mut checks = Vec::new();
                    for v in chunk {
                        let signing = service.add_signing_key(&v.seed).unwrap();
                        assert_eq!(
                            service.verifying_key(signing).unwrap().as_slice(),
                            v.public.as_slice(),
                            "{}: derived public key",
                            v.at
                        );
                        let public = service.add_verifying_key(&v.public).unwrap();
                        let sig: [u8; 64] = v.sig.as_slice().try_into().unwrap();
                        let mut msg = v.msg.clone();
                        match msg.last_mut() {
                            Some(b) => *b ^= 0x01,
                            None => msg.push(0),
                        }
                        let mut tampered_r = v.sig.clone();
                        tampered_r[5] ^= 0x01;
                        let mut tampered_s = v.sig.clone();
                        tampered_s[40] ^= 0x01;
                        let jobs = [
                            (
                                "sign",
                                Job::sign(signing, v.msg.clone()),
                                JobOutput::Signature(sig),
                            ),
                            (
                                "verify",
                                Job::verify(public, v.msg.clone(), &v.sig),
                                JobOutput::Verified(true),
                            ),
                            (
                                "verify with the signing key",
                                Job::verify(signing, v.msg.clone(), &v.sig),
                                JobOutput::Verified(true),
                            ),
                            (
                                "tampered message",
                                Job::verify(public, msg, &v.sig),
                                JobOutput::Verified(false),
                            ),
                            (
                                "tampered R",
                                Job::verify(public, v.msg.clone(), &tampered_r),
                                JobOutput::Verified(false),
                            ),
                            (
                                "tampered S",
                                Job::verify(public, v.msg.clone(), &tampered_s),
                                JobOutput::Verified(false),
                            ),
                        ];
                        for (what, job, expected) in jobs {
                            let handle = service
                                .submit(job)
                                .unwrap_or_else(|e| panic!("{}: {what}: {e}", v.at));
                            checks.push(EdCheck {
                                v,
                                what,
                                handle,
                                expected,
                            });
                        }
                        // The keys may go at once: submitted jobs hold on to them.
                        service.remove_key(signing).unwrap();
                        service.remove_key(public).unwrap();
                    }
                    let lines = chunk.len();
                    for c in checks {
                        let out = c
                            .handle
                            .wait()
                            .unwrap_or_else(|e| panic!("{}: {}: {e}", c.v.at, c.what));
                        assert_eq!(out, c.expected, "{}: {}", c.v.at, c.what);
                    }
                    lines
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(checked, 1024, "sign.input lines checked");
    service.shutdown();
    // Six jobs per line over the message; the tampered message of an empty one is one byte.
    let bytes: u64 = vectors
        .iter()
        .map(|v| 6 * v.msg.len() as u64 + u64::from(v.msg.is_empty()))
        .sum();
    assert_eq!(
        node_totals(&service, ClusterKind::Ed25519),
        (6 * 1024, bytes),
        "every job ran exactly once"
    );
    let m = service.metrics();
    assert_eq!((m.jobs_submitted, m.jobs_completed), (6 * 1024, 6 * 1024));
    assert_eq!(m.keys, 0);
}
