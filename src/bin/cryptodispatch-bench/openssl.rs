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
    /// The `-evp` cipher name, e.g. `aes-128-gcm`.
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
        let out = match Command::new("openssl")
            .args([
                "speed",
                "-elapsed",
                "-multi",
                &self.processes.to_string(),
                "-bytes",
                &self.bytes.to_string(),
                "-seconds",
                &self.seconds.to_string(),
                "-evp",
                self.cipher,
            ])
            .output()
        {
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
        parse_summary(&text, self.cipher)
            .map(|k| Some(k * 1e3 / 1e6))
            .ok_or_else(|| format!("no `{}  <n>k` line in openssl speed's output", self.cipher))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_is_read() {
        // openssl 3.0 with -multi 2 -bytes 16384.
        let text = "\
Forked child 0
+DT:AES-128-GCM:1:16384
+R:261816:AES-128-GCM:1.000000
Got: +H:16384 from 0
Got: +F:25:AES-128-GCM:4289593344.00 from 0
version: 3.0.19
The 'numbers' are in 1000s of bytes per second processed.
type          16384 bytes
AES-128-GCM    8389623.81k
";
        assert_eq!(parse_summary(text, "aes-128-gcm"), Some(8_389_623.81));
        assert_eq!(parse_summary(text, "aes-256-gcm"), None);
        assert_eq!(parse_summary("AES-128-GCM  n/a", "aes-128-gcm"), None);
    }
}
