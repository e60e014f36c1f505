//! `live --workload stream`: one AES-128-CBC encryption stream through the service (a single
//! chained job, not a `Stream`), against the same cipher called directly and against
//! `openssl speed -elapsed -evp aes-128-cbc` on one core, in the same rounds.
//!
//! One job of `--size` bytes (default 64 MiB), cut into packets of 16 KiB (or `--packet`) that
//! chain, on one AES node (a chained job runs on one node at a time: one stream is one core's
//! work). The node runs a packet by itself on the implementation its table chooses for a
//! packet alone (`ImplTable::alone`: the fastest one-stream implementation measured, or the one
//! pinned with `--implementation`); the reference runs the whole job in one call of the same
//! implementation on a thread pinned like the node; openssl encrypts buffers of the packet size
//! in one process. The job's buffer is made before the clock starts; the clock stops when its
//! handle resolves. Two warm-up jobs run through the service first; their speed is printed
//! beside the rounds, not ranked. Each packet costs the service the same scheduling work
//! whatever its length, so larger packets show what that work costs a 16 KiB one. The
//! service's output is checked against the reference's.

use std::time::Instant;

use std::sync::Arc;

use cryptodispatch::crypto::{AesKey, AesOp, ChainState, Direction, ImplTable};
use cryptodispatch::{Job, Mode, NodeSpec, Service};

use crate::live::{LiveArgs, pattern, whole_blocks};
use crate::openssl::{Baseline, Speed};
use crate::report::{f, print_rows};
use crate::support::{Text, fits_in_memory};

/// CSV columns of the stream workload.
pub const CSV_HEADER: &str =
    "workload,run,size,packet,service_mb_s,reference_mb_s,openssl_mb_s,vs_reference,vs_openssl";

/// The packet size unless `--packet` gives one: `openssl speed`'s largest default buffer.
const PACKET: usize = 16 * 1024;

/// Warm-up jobs run through the service before the rounds, timed but not ranked (see `run`).
const WARM_UP_JOBS: usize = 2;

/// Runs the workload and prints a table (or CSV).
pub fn run(args: &LiveArgs) -> Result<(), String> {
    let size = whole_blocks("--size", args.size.unwrap_or(64 << 20), "stream")?;
    let packet = args.packet()?.unwrap_or(PACKET);
    fits_in_memory(1, size)?;
    let data = pattern(size);
    let (key_bytes, iv) = ([0x2b; 16], [0x0f; 16]);
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let key = AesKey::new(&key_bytes).text()?;
    let mut builder = Service::builder()
        .aes_cluster([NodeSpec::pinned(0)])
        .packet_size(packet);
    // The table the node runs on: the process's measured one for this packet size, as the
    // service takes it, or the pinned one.
    let table = match args.implementation {
        Some(implementation) => {
            builder = builder.aes_implementation(implementation);
            Arc::new(ImplTable::pinned(implementation).text()?)
        }
        None => ImplTable::shared(packet),
    };
    let alone = table.alone(op);
    let service = builder.build().text()?;
    let id = service.add_aes_key(&key_bytes).text()?;
    let mut openssl = Baseline::new(Speed {
        cipher: "aes-128-cbc",
        processes: 1,
        bytes: packet,
        seconds: 1,
    });
    crate::support::pin(0);
    let mut rows = Vec::new();
    // Warm-up jobs the size of the timed ones, timed but not ranked: a fresh process's first
    // job pays for the first touch of memory (some 400 page faults on the submitting thread
    // for a job of 4096 packets) and ran about 4% slower than the rounds on the
    // development machine, the second about 0.5%, the later ones not. The rounds measure the
    // service as it runs, warm; the warm-up figures are printed with the rounds.
    let mut warm_up = Vec::new();
    for _ in 0..WARM_UP_JOBS {
        let job = Job::encrypt(id, Mode::Cbc, &iv, data.clone());
        let start = Instant::now();
        let out = service.submit(job).text()?.wait().text()?;
        warm_up.push(size as f64 / start.elapsed().as_secs_f64() / 1e6);
        drop(out);
    }
    for run in 0..args.reps {
        let mut expected = data.clone();
        let start = Instant::now();
        let mut state = ChainState::from_iv(&iv).text()?;
        key.process_with(alone, op, &mut state, &mut expected, size, true)
            .text()?;
        let reference = size as f64 / start.elapsed().as_secs_f64() / 1e6;

        let job = Job::encrypt(id, Mode::Cbc, &iv, data.clone());
        let start = Instant::now();
        let out = service.submit(job).text()?.wait().text()?;
        let through = size as f64 / start.elapsed().as_secs_f64() / 1e6;
        if out.into_data().as_deref() != Some(&expected[..]) {
            return Err("the service's output differs from the reference".into());
        }
        openssl.sample()?;
        rows.push((run, through, reference));
    }
    // Every round is compared with the median of the openssl runs interleaved with them.
    openssl.finish()?;
    let ossl = openssl.median();
    let opt = |x: Option<f64>, d| x.map_or(String::new(), |x| f(x, d));
    let rows: Vec<Vec<String>> = (rows.iter())
        .map(|(run, through, reference)| {
            let mut cells = vec!["stream".to_owned(), run.to_string()];
            cells.extend([size, packet].map(|n| n.to_string()));
            cells.extend([f(*through, 1), f(*reference, 1), opt(ossl, 1)]);
            cells.extend([f(through / reference, 3), opt(ossl.map(|o| through / o), 3)]);
            cells
        })
        .collect();
    let title = format!(
        "stream: one AES-128-CBC encryption job of {size} bytes in {packet}-byte packets, one AES node, on {alone}"
    );
    let columns = "run,service MB/s,direct MB/s,openssl MB/s,vs direct,vs openssl";
    let picks = [1, 4, 5, 6, 7, 8]; // the cells the table shows
    print_rows(args.csv, CSV_HEADER, &rows, &title, columns, &picks);
    let warm_up: Vec<String> = warm_up.iter().map(|w| f(*w, 1)).collect();
    let note = format!(
        "packets and the reference on {alone}; {WARM_UP_JOBS} warm-up jobs first, not counted: {} MB/s",
        warm_up.join(", ")
    );
    if args.csv {
        eprintln!("{note}");
    } else {
        println!("{note}");
    }
    match openssl.describe() {
        Some(line) if args.csv => eprintln!("{line}"),
        Some(line) => println!("{line}"),
        None => {}
    }
    Ok(())
}
