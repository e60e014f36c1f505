//! `live --workload verify`: Ed25519 verification one job per signature against batch jobs,
//! through the service, with the primitive called directly on as many threads beside them.
//!
//! The signatures are over 64-byte messages from 8 keys; `--bad-share` of them are tampered
//! with, which makes the batches holding them fail and split until the bad ones are found.
//! Every answer is checked against `verify_strict` one by one.

use std::time::{Duration, Instant};

use cryptodispatch::crypto::{BatchItem, SigningKey, VerifyingKey, verify_batch};
use cryptodispatch::{Job, JobOutput, NodeSpec, Service};
use rand::rngs::ChaCha8Rng;
use rand::{Rng, RngExt, SeedableRng};

use crate::live::LiveArgs;
use crate::report::{Csv, Table, f};
use crate::support::{Text, cores, on_threads};

/// Signatures per packet of the service's batch verification (its packets hold up to 64); the
/// direct reference verifies batches of the same size.
const BATCH: usize = 64;

struct Sig {
    key: usize,
    msg: Vec<u8>,
    sig: [u8; 64],
}

/// Runs `f` on `threads` pinned threads, each over its share of `0..n`; returns the time.
fn direct(
    threads: usize,
    n: usize,
    f: impl Fn(std::ops::Range<usize>) -> Vec<bool> + Sync,
) -> Result<(Duration, Vec<bool>), String> {
    let chunk = n.div_ceil(threads);
    let start = Instant::now();
    let parts = on_threads(vec![(); threads], true, |t, ()| {
        f(t * chunk..((t + 1) * chunk).min(n))
    })?;
    Ok((start.elapsed(), parts.concat()))
}

pub fn run(args: &LiveArgs) -> Result<(), String> {
    let n = args.jobs.unwrap_or(8192);
    let nodes = args.nodes.unwrap_or_else(cores);
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let seeds: Vec<[u8; 32]> = (0..8).map(|_| rng.random()).collect();
    let signers = seeds.iter().map(|s| SigningKey::from_seed(s));
    let signers: Vec<SigningKey> = signers.collect::<Result<_, _>>().text()?;
    let publics: Vec<VerifyingKey> = signers.iter().map(SigningKey::verifying_key).collect();
    if !(0.0..=1.0).contains(&args.bad_share) {
        return Err(format!("--bad-share {} must lie in [0, 1]", args.bad_share));
    }
    let sigs: Vec<Sig> = (0..n)
        .map(|_| {
            let key = rng.random_range(0..signers.len());
            let mut msg = vec![0u8; 64];
            rng.fill_bytes(&mut msg);
            let mut sig = signers[key].sign(&msg);
            if rng.random_bool(args.bad_share) {
                sig[40] ^= 1;
            }
            Sig { key, msg, sig }
        })
        .collect();
    let expected: Vec<bool> = sigs
        .iter()
        .map(|s| publics[s.key].verify(&s.msg, &s.sig).unwrap_or(false))
        .collect();

    let service = Service::builder()
        .ed25519_cluster((0..nodes).map(|i| NodeSpec::pinned(i % cores())))
        .build()
        .text()?;
    let keys = seeds.iter().map(|s| service.add_signing_key(s));
    let keys: Vec<_> = keys.collect::<Result<_, _>>().text()?;

    let single_jobs = || -> Vec<Job> {
        sigs.iter()
            .map(|s| Job::verify(keys[s.key], s.msg.clone(), &s.sig))
            .collect()
    };
    let batch_jobs = || -> Vec<Job> {
        sigs.chunks(BATCH)
            .map(|c| {
                Job::verify_batch(
                    c.iter()
                        .map(|s| (keys[s.key], s.msg.clone(), s.sig.to_vec())),
                )
            })
            .collect()
    };
    let run_service = |jobs: Vec<Job>| -> Result<(Duration, Vec<bool>), String> {
        let start = Instant::now();
        let handles = jobs.into_iter().map(|j| service.submit(j));
        let handles: Vec<_> = handles.collect::<Result<_, _>>().text()?;
        let mut answers = Vec::with_capacity(n);
        let mut outs = Vec::with_capacity(handles.len());
        for h in handles.into_iter().rev() {
            outs.push(h.wait().text()?);
        }
        let elapsed = start.elapsed();
        for o in outs.into_iter().rev() {
            match o {
                JobOutput::Verified(v) => answers.push(v),
                JobOutput::VerifiedBatch(v) => answers.extend(v),
                other => return Err(format!("unexpected output {other:?}")),
            }
        }
        Ok((elapsed, answers))
    };
    let direct_single = || {
        direct(nodes, n, |r| {
            r.map(|i| {
                publics[sigs[i].key]
                    .verify(&sigs[i].msg, &sigs[i].sig)
                    .unwrap_or(false)
            })
            .collect()
        })
    };
    let direct_batch = || {
        direct(nodes, n, |r| {
            let idx: Vec<usize> = r.collect();
            idx.chunks(BATCH)
                .flat_map(|c| {
                    let batch: Vec<BatchItem<'_>> = c
                        .iter()
                        .map(|&i| BatchItem {
                            key: &publics[sigs[i].key],
                            msg: &sigs[i].msg,
                            sig: &sigs[i].sig,
                        })
                        .collect();
                    verify_batch(&batch)
                })
                .collect()
        })
    };

    let mut best = [Duration::MAX; 4];
    for _ in 0..args.reps {
        let runs = [
            run_service(single_jobs())?,
            run_service(batch_jobs())?,
            direct_single()?,
            direct_batch()?,
        ];
        for (b, (t, answers)) in best.iter_mut().zip(runs) {
            if answers != expected {
                return Err("a verification answer differs from verify_strict".into());
            }
            *b = (*b).min(t);
        }
    }
    service.shutdown();

    let ops = |d: Duration| n as f64 / d.as_secs_f64();
    let mb = |d: Duration| (n * 64) as f64 / d.as_secs_f64() / 1e6;
    if args.csv {
        let mut c = Csv::new(crate::live::CSV_HEADER);
        for (name, svc, reference) in [
            ("verify-single", best[0], best[2]),
            ("verify-batch", best[1], best[3]),
        ] {
            let mut cells = vec![name.into(), "paper".into(), nodes.to_string(), "64".into()];
            cells.extend([mb(svc), mb(reference)].map(|x| f(x, 1)));
            cells.push(f(reference.as_secs_f64() / svc.as_secs_f64(), 3));
            // No latencies and no openssl baseline here: a cell under every column.
            cells.resize(crate::live::CSV_HEADER.split(',').count(), "-".into());
            c.row(&cells);
        }
        print!("{}", c.as_str());
        return Ok(());
    }
    println!(
        "Ed25519 verification of {n} signatures (64-byte messages, {:.1}% bad) on {nodes} nodes / threads\n",
        100.0 * args.bad_share
    );
    let mut t = Table::new(&["how", "signatures/s", "vs service single"]);
    for (name, d) in [
        ("service, one job per signature", best[0]),
        (&*format!("service, batch jobs of {BATCH}"), best[1]),
        ("direct verify_strict", best[2]),
        (&*format!("direct batches of {BATCH}"), best[3]),
    ] {
        t.row(vec![
            name.to_owned(),
            f(ops(d), 0),
            f(best[0].as_secs_f64() / d.as_secs_f64(), 2),
        ]);
    }
    print!("{}", t.render());
    println!(
        "\nbatch jobs verify {:.2}x as many signatures per second as single verify jobs (target: 1.8x)",
        best[0].as_secs_f64() / best[1].as_secs_f64()
    );
    Ok(())
}
