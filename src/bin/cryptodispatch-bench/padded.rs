//! `live --workload padded`: what PKCS#7 padding costs a CBC encryption through the service.
//!
//! `--jobs` jobs (default 48) of `--size` bytes (default 1 MiB) of AES-128-CBC encryption on
//! `--nodes` AES nodes (default 2), submitted from one thread, then every handle waited for.
//! The jobs' data comes two ways: as the `offload` example gives it, slices of one big buffer
//! that `Job::encrypt` copies into the job's own `Vec` inside the clock (`slices`), and as
//! exactly sized `Vec`s made before the clock (`vecs`), where a padded job's room for its
//! padding block is all the padding can cost. Each round runs the jobs
//! twice on the same service, without padding and with `Padding::Pkcs7`, and prints both
//! throughputs and their ratio (padded ÷ unpadded): the padded job writes one block more, so a
//! ratio near 1 says the padding block costs no copy of the job. Rounds alternate which side
//! runs first. Every output is checked against `AesKey::one_shot` and dropped before the next
//! side runs.

use std::time::Instant;

use cryptodispatch::crypto::{AesKey, AesOp, Direction};
use cryptodispatch::{Job, Mode, NodeSpec, Padding, Service};

use crate::live::{LiveArgs, pattern, whole_blocks};
use crate::report::{f, print_rows};
use crate::support::{Text, cores, fits_in_memory};

/// CSV columns of the padded workload.
pub const CSV_HEADER: &str = "workload,data,nodes,jobs,size,run,unpadded_mb_s,padded_mb_s,ratio";

/// One round: every job submitted, then every handle waited for and its output checked
/// against `expected` (the padded ciphertexts; an unpadded output is their prefix without the
/// last block) and dropped. Returns MB/s.
fn round(
    service: &Service,
    key: cryptodispatch::KeyId,
    data: &[u8],
    size: usize,
    padding: Padding,
    source: Source,
    expected: &[Vec<u8>],
) -> Result<f64, String> {
    // Vecs made before the clock are exactly sized, as `to_vec` makes them.
    let mut bufs: Vec<Vec<u8>> = match source {
        Source::Slices => Vec::new(),
        Source::Vecs => data.chunks(size).map(<[u8]>::to_vec).collect(),
    };
    let start = Instant::now();
    let jobs: Vec<Job> = match source {
        Source::Slices => data
            .chunks(size)
            .map(|chunk| Job::encrypt(key, Mode::Cbc, &IV, chunk).with_padding(padding))
            .collect(),
        Source::Vecs => bufs
            .drain(..)
            .map(|buf| Job::encrypt(key, Mode::Cbc, &IV, buf).with_padding(padding))
            .collect(),
    };
    let handles = jobs.into_iter().map(|job| service.submit(job));
    let handles = handles.collect::<Result<Vec<_>, _>>().text()?;
    let mut outputs = Vec::with_capacity(handles.len());
    for h in handles {
        let out = h.wait().text()?;
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

/// Where a job's data comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// A slice of the big buffer, copied into the job's `Vec` by `Job::encrypt`, in the clock
    /// (the `offload` example).
    Slices,
    /// A `Vec` of its own, exactly sized, made before the clock.
    Vecs,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Slices => "slices",
            Source::Vecs => "vecs",
        }
    }
}

const IV: [u8; 16] = [0x0f; 16];
const KEY: [u8; 16] = [0x2b; 16];

/// Runs the workload and prints a table (or CSV).
pub fn run(args: &LiveArgs) -> Result<(), String> {
    let nodes = args.nodes.unwrap_or(2);
    let jobs = args.jobs.unwrap_or(48);
    let size = whole_blocks("--size", args.size.unwrap_or(1 << 20), "padded")?;
    fits_in_memory(jobs, size)?;
    let data = pattern(jobs * size);
    let service = Service::builder()
        .aes_cluster((0..nodes).map(|i| NodeSpec::pinned(i % cores())))
        .admission(args.admission)
        .build()
        .text()?;
    let key = service.add_aes_key(&KEY).text()?;
    let reference = AesKey::new(&KEY).text()?;
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
    let expected = data
        .chunks(size)
        .map(|chunk| reference.one_shot(op, &IV, chunk));
    let expected = expected.collect::<Result<Vec<_>, _>>().text()?;
    let mut rows = Vec::new();
    for run in 0..args.reps {
        for source in [Source::Slices, Source::Vecs] {
            // Rounds alternate which side goes first, so neither always meets the allocator
            // as the other left it.
            let side = |padding| round(&service, key, &data, size, padding, source, &expected);
            let (plain, padded) = if run % 2 == 0 {
                let plain = side(Padding::None)?;
                (plain, side(Padding::Pkcs7)?)
            } else {
                let padded = side(Padding::Pkcs7)?;
                (side(Padding::None)?, padded)
            };
            rows.push((source, run, plain, padded));
        }
    }
    let rows: Vec<Vec<String>> = (rows.iter())
        .map(|(source, run, plain, padded)| {
            let (source, run) = (source.name().to_owned(), run.to_string());
            let sizes = [nodes, jobs, size].map(|n| n.to_string());
            let mut cells = vec!["padded".to_owned(), source];
            cells.extend(sizes);
            cells.extend([run, f(*plain, 1), f(*padded, 1), f(padded / plain, 3)]);
            cells
        })
        .collect();
    let title = format!(
        "padded: {jobs} AES-128-CBC encryption jobs of {size} bytes on {nodes} AES nodes, without and with PKCS#7"
    );
    let columns = "data,run,unpadded MB/s,padded MB/s,padded / unpadded";
    let picks = [1, 5, 6, 7, 8]; // the cells the table shows
    print_rows(args.csv, CSV_HEADER, &rows, &title, columns, &picks);
    Ok(())
}
