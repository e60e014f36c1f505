//! `live --workload padded`: what PKCS#7 padding costs a CBC encryption through the service.
//!
//! `--jobs` jobs (default 48) of `--size` bytes (default 1 MiB) of AES-128-CBC encryption on
//! `--nodes` AES nodes (default 2), submitted from one thread as the `offload` example submits
//! them: each job made inside the clock from a slice of one big buffer (`Job::encrypt` copies
//! the slice into the job's own `Vec`), then every handle waited for. Each round runs the jobs
//! twice on the same service, without padding and with `Padding::Pkcs7`, and prints both
//! throughputs and their ratio (padded ÷ unpadded): the padded job writes one block more, so a
//! ratio near 1 says the padding block costs no copy of the job. Rounds alternate which side
//! runs first. Every output is checked against `AesKey::one_shot` and dropped before the next
//! side runs.

use std::time::Instant;

use cryptodispatch::crypto::{AesKey, AesOp, Direction};
use cryptodispatch::{Job, Mode, NodeSpec, Padding, Service};

use crate::live::LiveArgs;
use crate::report::{Csv, Table, cores, f};

/// CSV columns of the padded workload.
pub const CSV_HEADER: &str = "workload,nodes,jobs,size,run,unpadded_mb_s,padded_mb_s,ratio";

/// One round: every job submitted, then every handle waited for and its output checked
/// against `expected` (the padded ciphertexts; an unpadded output is their prefix without the
/// last block) and dropped. Returns MB/s.
fn round(
    service: &Service,
    key: cryptodispatch::KeyId,
    data: &[u8],
    size: usize,
    padding: Padding,
    expected: &[Vec<u8>],
) -> Result<f64, String> {
    let start = Instant::now();
    let handles = data
        .chunks(size)
        .map(|chunk| service.submit(Job::encrypt(key, Mode::Cbc, &IV, chunk).with_padding(padding)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let mut outputs = Vec::with_capacity(handles.len());
    for h in handles {
        let out = h.wait().map_err(|e| e.to_string())?;
        outputs.push(out.into_data().unwrap_or_default());
    }
    let mb_s = data.len() as f64 / start.elapsed().as_secs_f64() / 1e6;
    for (i, (out, want)) in outputs.iter().zip(expected).enumerate() {
        let want = match padding {
            Padding::None => &want[..want.len() - 16],
            Padding::Pkcs7 => &want[..],
        };
        if out[..] != want[..] {
            return Err(format!(
                "job {i} ({padding:?}): the output differs from the reference"
            ));
        }
    }
    Ok(mb_s)
}

const IV: [u8; 16] = [0x0f; 16];
const KEY: [u8; 16] = [0x2b; 16];

/// Runs the workload and prints a table (or CSV).
pub fn run(args: &LiveArgs) -> Result<(), String> {
    let nodes = args.nodes.unwrap_or(2).max(1);
    let jobs = args.jobs.unwrap_or(48).max(1);
    let size = args.size.unwrap_or(1 << 20);
    if size == 0 || size % 16 != 0 {
        return Err(format!(
            "--size {size}: padded needs a positive multiple of 16"
        ));
    }
    let data: Vec<u8> = (0..jobs * size)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
        .collect();
    let service = Service::builder()
        .aes_cluster((0..nodes).map(|i| NodeSpec::pinned(i % cores())))
        .admission(args.admission)
        .build()
        .map_err(|e| e.to_string())?;
    let key = service.add_aes_key(&KEY).map_err(|e| e.to_string())?;
    let reference = AesKey::new(&KEY).map_err(|e| e.to_string())?;
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
    let expected = data
        .chunks(size)
        .map(|chunk| reference.one_shot(op, &IV, chunk))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for run in 0..args.reps.max(1) {
        // Rounds alternate which side goes first, so neither always meets the allocator as
        // the other left it.
        let (plain, padded) = if run % 2 == 0 {
            let plain = round(&service, key, &data, size, Padding::None, &expected)?;
            (
                plain,
                round(&service, key, &data, size, Padding::Pkcs7, &expected)?,
            )
        } else {
            let padded = round(&service, key, &data, size, Padding::Pkcs7, &expected)?;
            (
                round(&service, key, &data, size, Padding::None, &expected)?,
                padded,
            )
        };
        rows.push((run, plain, padded));
    }
    if args.csv {
        let mut c = Csv::new(CSV_HEADER);
        for (run, plain, padded) in &rows {
            c.row(&[
                "padded".into(),
                nodes.to_string(),
                jobs.to_string(),
                size.to_string(),
                run.to_string(),
                f(*plain, 1),
                f(*padded, 1),
                f(padded / plain, 3),
            ]);
        }
        print!("{}", c.as_str());
        return Ok(());
    }
    println!(
        "padded: {jobs} AES-128-CBC encryption jobs of {size} bytes on {nodes} AES nodes, without and with PKCS#7"
    );
    let mut t = Table::new(&["run", "unpadded MB/s", "padded MB/s", "padded / unpadded"]);
    for (run, plain, padded) in &rows {
        t.row(vec![
            run.to_string(),
            f(*plain, 1),
            f(*padded, 1),
            f(padded / plain, 3),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}
