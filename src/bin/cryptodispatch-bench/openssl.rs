//! `openssl speed` as a reference column: the same cipher on the same machine, measured by
//! openssl itself in the same run as the service.
//!
//! `openssl speed -elapsed -multi N -bytes SIZE -seconds S -evp CIPHER` forks N processes, each
//! encrypting SIZE-byte buffers for S seconds of wall time, and ends with a summary line of the
//! processes' total, `CIPHER  <number>k`, in thousands of bytes per second. That line is read;
//! everything else is ignored.

use std::process::Command;

/// One `openssl speed` run.
#[derive(Debug, Clone)]
pub struct Speed {
    /// The `-evp` cipher name, e.g. `aes-128-gcm`, followed by ` -decrypt` to time decryption.
    pub cipher: &'static str,
    /// Parallel processes (`-multi`).
    pub processes: usize,
    /// Buffer size in bytes (`-bytes`).
    pub bytes: usize,
    /// Seconds per run (`-seconds`).
    pub seconds: u32,
}

impl Speed {
    /// Runs openssl and returns its total throughput in MB/s (10⁶ bytes per second). `Ok(None)`
    /// when `openssl` is not on PATH.
    ///
    /// # Errors
    /// When openssl runs but fails, or its output has no summary line for the cipher.
    pub fn run(&self) -> Result<Option<f64>, String> {
        let args = format!(
            "speed -elapsed -multi {} -bytes {} -seconds {} -evp {}",
            self.processes, self.bytes, self.seconds, self.cipher
        );
        let out = match Command::new("openssl").args(args.split(' ')).output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot run openssl: {e}")),
        };
        if !out.status.success() {
            return Err(format!(
                "openssl speed failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        // The summary line names the cipher alone, without a trailing `-decrypt`.
        let name = self.cipher.split(' ').next().unwrap_or(self.cipher);
        parse_summary(&text, name)
            .map(|k| Some(k * 1e3 / 1e6))
            .ok_or_else(|| format!("no `{}  <n>k` line in openssl speed's output", self.cipher))
    }
}

/// The fewest `openssl speed` runs a baseline is taken from: one run varies by tens of percent
/// from the next on a shared machine, so no ratio is reported against a single one.
pub const MIN_RUNS: usize = 3;

/// `openssl speed` runs interleaved with the rounds they are compared to: every figure printed
/// against openssl is against the median of at least [`MIN_RUNS`] runs, and their spread is
/// printed beside it.
#[derive(Debug, Clone)]
pub struct Baseline {
    speed: Speed,
    runs: Vec<f64>,
    missing: bool,
}

impl Baseline {
    /// A baseline of `speed` runs, none taken yet.
    pub fn new(speed: Speed) -> Self {
        Baseline {
            speed,
            runs: Vec::new(),
            missing: false,
        }
    }

    /// One run, in its place among the rounds; without `openssl` on PATH, a note (once) and
    /// nothing more.
    ///
    /// # Errors
    /// When openssl runs but fails (see [`Speed::run`]).
    pub fn sample(&mut self) -> Result<(), String> {
        if self.missing {
            return Ok(());
        }
        match self.speed.run()? {
            Some(mb_s) => self.push(mb_s),
            None => {
                eprintln!("note: `openssl` is not on PATH: the openssl column is skipped");
                self.missing = true;
            }
        }
        Ok(())
    }

    /// Adds a run's figure, in MB/s (what [`sample`](Self::sample) does with openssl's).
    pub fn push(&mut self, mb_s: f64) {
        self.runs.push(mb_s);
    }

    /// Tops the runs up to [`MIN_RUNS`] (when there were fewer rounds than that).
    ///
    /// # Errors
    /// As [`sample`](Self::sample).
    pub fn finish(&mut self) -> Result<(), String> {
        while !self.missing && self.runs.len() < MIN_RUNS {
            self.sample()?;
        }
        Ok(())
    }

    /// The median run in MB/s; `None` without openssl.
    pub fn median(&self) -> Option<f64> {
        cryptodispatch::sim::research::experiments::median(&self.runs)
    }

    /// The slowest and the fastest run in MB/s.
    pub fn range(&self) -> Option<(f64, f64)> {
        let min = self.runs.iter().copied().reduce(f64::min)?;
        let max = self.runs.iter().copied().reduce(f64::max)?;
        Some((min, max))
    }

    /// One line for the report: the median, the number of runs and their spread.
    pub fn describe(&self) -> Option<String> {
        let (median, (min, max)) = (self.median()?, self.range()?);
        Some(format!(
            "openssl speed {} -multi {} -bytes {}: median {median:.1} MB/s of {} runs interleaved \
             with the rounds, {min:.1}-{max:.1} (spread {:.1}% of the median)",
            self.speed.cipher,
            self.speed.processes,
            self.speed.bytes,
            self.runs.len(),
            100.0 * (max - min) / median,
        ))
    }
}

/// The summary figure for `cipher` (in thousands of bytes per second): the last line whose
/// first word is the cipher's name (any case) and whose next word is a number ending in `k`.
pub fn parse_summary(text: &str, cipher: &str) -> Option<f64> {
    text.lines().rev().find_map(|line| {
        let mut words = line.split_whitespace();
        let name = words.next()?;
        if !name.eq_ignore_ascii_case(cipher) {
            return None;
        }
        words.next()?.strip_suffix('k')?.parse().ok()
    })
}
