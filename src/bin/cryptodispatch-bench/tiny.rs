//! `live --workload tiny`: the service's cost per job for tiny jobs (64-byte AES-128-ECB), end
//! to end, from `--threads` submitting threads (default 2): jobs submitted one at a time and
//! waited for (`submit` + `wait`), and in bursts of `--burst` jobs (`submit_burst`, then every
//! handle waited for). Each of `--reps` rounds is printed; the figure is wall time over jobs.
//!
//! Two services: the default one, which runs jobs this small on the submitting thread
//! (`path` `inline`, docs/ALGORITHM.md §15.6), and one with the inline limit at 0, where every
//! job is handed to a node and back (`path` `node`).

use std::time::Instant;

use cryptodispatch::{Job, Mode, NodeSpec, Service, ServiceBuilder};

use crate::live::LiveArgs;
use crate::report::{Csv, Table, f};
use crate::support::{Text, cores};

/// CSV columns of the tiny workload.
pub const CSV_HEADER: &str = "workload,path,how,threads,nodes,jobs,run,ns_per_job";

/// Jobs per thread and round unless `--jobs` says otherwise.
const JOBS: usize = 200_000;

fn round(service: &Service, threads: usize, jobs: usize, burst: Option<usize>) -> f64 {
    let key = service.add_aes_key(&[0x42; 16]).expect("key");
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| match burst {
                Some(b) => {
                    let mut left = jobs;
                    while left > 0 {
                        let n = b.min(left);
                        let batch =
                            (0..n).map(|_| Job::encrypt(key, Mode::Ecb, &[], vec![7u8; 64]));
                        for h in service.submit_burst(batch).expect("burst") {
                            h.wait().expect("job");
                        }
                        left -= n;
                    }
                }
                None => {
                    for _ in 0..jobs {
                        let job = Job::encrypt(key, Mode::Ecb, &[], vec![7u8; 64]);
                        service.submit(job).expect("submit").wait().expect("job");
                    }
                }
            });
        }
    });
    start.elapsed().as_nanos() as f64 / (threads * jobs) as f64
}

/// Runs the workload and prints a table (or CSV).
pub fn run(args: &LiveArgs) -> Result<(), String> {
    let nodes = args.nodes.unwrap_or_else(cores);
    let threads = args.threads.unwrap_or(2);
    let jobs = args.jobs.unwrap_or(JOBS);
    let burst = args.burst;
    let build = |limit: usize| {
        Service::builder()
            .aes_cluster((0..nodes).map(|i| NodeSpec::pinned(i % cores())))
            .admission(args.admission)
            .inline_limit(limit)
            .build()
            .text()
    };
    // The node path is some 30 times slower: a tenth of the jobs is plenty.
    let services = [
        ("inline", build(ServiceBuilder::DEFAULT_INLINE_LIMIT)?, jobs),
        ("node", build(0)?, (jobs / 10).max(1)),
    ];
    let hows = [("submit+wait", None), ("submit_burst", Some(burst))];
    let mut rows = Vec::new();
    for run in 0..args.reps {
        for (path, service, jobs) in &services {
            for (how, b) in hows {
                let ns = round(service, threads, *jobs, b);
                rows.push((*path, how, *jobs, run, ns));
            }
        }
    }
    if args.csv {
        let mut c = Csv::new(CSV_HEADER);
        for (path, how, jobs, run, ns) in &rows {
            c.row(&[
                "tiny".into(),
                (*path).into(),
                (*how).into(),
                threads.to_string(),
                nodes.to_string(),
                jobs.to_string(),
                run.to_string(),
                f(*ns, 1),
            ]);
        }
        print!("{}", c.as_str());
        return Ok(());
    }
    println!(
        "tiny: 64-byte AES-128-ECB jobs end to end, {threads} submitting threads, {nodes} AES nodes, bursts of {burst}"
    );
    let mut t = Table::new(&["path", "how", "run", "ns per job"]);
    for (path, how, _, run, ns) in &rows {
        t.row(vec![
            (*path).into(),
            (*how).into(),
            run.to_string(),
            f(*ns, 0),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}
