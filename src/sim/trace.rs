//! Traces: the task sets the simulator replays, in a CSV format anyone can write.
//!
//! ```text
//! task,seq,flag,arrival,length,cmd
//! 1,0,1,0.0,2,enc
//! 2,0,0,0.5,1,sign
//! 1,1,1,1.25,2,enc
//! ```
//!
//! - `task`: the job id (an unsigned integer);
//! - `seq`: the packet's number within its job, from 0; a job's packets appear in `seq` order;
//! - `flag`: 1 if the job is dependent (its packets chain, as CBC/OFB/CFB), 0 if not; the same
//!   for every packet of a job;
//! - `arrival`: when the packet arrives, in the model's time units (finite, ≥ 0, and not before
//!   the job's previous packet);
//! - `length`: the packet's length in the model's length units (≥ 1);
//! - `cmd`: `enc`, `dec`, `sign` or `verify`.
//!
//! Blank lines and lines starting with `#` are ignored. A job's last packet is its highest
//! `seq`. A malformed trace is a [`TraceError`] naming the line.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::packet::Cmd;
use crate::sim::error::TraceError;

/// The header line of a trace file.
pub const HEADER: &str = "task,seq,flag,arrival,length,cmd";

/// One packet of a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRecord {
    /// The job.
    pub task: u64,
    /// Sequence number within the job.
    pub seq: u32,
    /// Whether the job is dependent.
    pub dependent: bool,
    /// Arrival time.
    pub arrival: f64,
    /// Length in length units.
    pub length: u64,
    /// The command.
    pub cmd: Cmd,
    /// Whether this is the job's last packet (derived: the job's highest `seq`).
    pub last: bool,
}

/// A task set: packets in file order, each job's in `seq` order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    records: Vec<TraceRecord>,
}

impl Trace {
    /// A trace from records, checked as a file would be (line numbers count from 2, the first
    /// record's line). The `last` flags are recomputed.
    ///
    /// # Errors
    /// [`TraceError`] for the first record that breaks a rule of the format.
    pub fn from_records(records: Vec<TraceRecord>) -> Result<Self, TraceError> {
        let mut next_seq: HashMap<u64, (u32, bool, f64)> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            let line = i + 2;
            if !(r.arrival.is_finite() && r.arrival >= 0.0) {
                return Err(TraceError::new(
                    line,
                    format!("arrival {} must be finite and >= 0", r.arrival),
                ));
            }
            if r.length == 0 {
                return Err(TraceError::new(line, "length must be at least 1"));
            }
            match next_seq.get_mut(&r.task) {
                None => {
                    if r.seq != 0 {
                        return Err(TraceError::new(
                            line,
                            format!("task {} starts at seq {}, not 0", r.task, r.seq),
                        ));
                    }
                    next_seq.insert(r.task, (1, r.dependent, r.arrival));
                }
                Some((expected, dependent, prev_arrival)) => {
                    if r.seq != *expected {
                        return Err(TraceError::new(
                            line,
                            format!(
                                "task {}: seq {} out of order (expected {})",
                                r.task, r.seq, expected
                            ),
                        ));
                    }
                    if r.dependent != *dependent {
                        return Err(TraceError::new(
                            line,
                            format!("task {}: flag changes within the job", r.task),
                        ));
                    }
                    if r.arrival < *prev_arrival {
                        return Err(TraceError::new(
                            line,
                            format!("task {}: packet arrives before its predecessor", r.task),
                        ));
                    }
                    *expected += 1;
                    *prev_arrival = r.arrival;
                }
            }
        }
        let mut records = records;
        for r in &mut records {
            r.last = next_seq
                .get(&r.task)
                .is_some_and(|&(n, _, _)| r.seq + 1 == n);
        }
        Ok(Trace { records })
    }

    /// A trace the generator built (it keeps the format's rules by construction).
    pub(crate) fn from_generated(records: Vec<TraceRecord>) -> Self {
        debug_assert!(Trace::from_records(records.clone()).is_ok());
        Trace { records }
    }

    /// Parses a trace from CSV text.
    ///
    /// # Errors
    /// [`TraceError`] naming the first malformed line.
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        match lines.next() {
            Some((_, h)) if h.replace(' ', "") == HEADER => {}
            Some((n, h)) => {
                return Err(TraceError::new(
                    n,
                    format!("expected the header `{HEADER}`, found `{h}`"),
                ));
            }
            None => {
                return Err(TraceError::new(
                    1,
                    format!("empty trace: expected the header `{HEADER}`"),
                ));
            }
        }
        let mut records = Vec::new();
        let mut line_numbers = Vec::new();
        for (n, line) in lines {
            records.push(parse_record(n, line)?);
            line_numbers.push(n);
        }
        // Re-check the cross-record rules, reporting the file's own line numbers.
        Trace::from_records(records).map_err(|e| {
            let idx = e.line().saturating_sub(2);
            TraceError::new(
                line_numbers.get(idx).copied().unwrap_or(e.line()),
                e.message(),
            )
        })
    }

    /// Reads and parses a trace file.
    ///
    /// # Errors
    /// [`TraceError`] for a malformed line, or for the file (line 0, shown without a line) if
    /// it cannot be read.
    pub fn read(path: &Path) -> Result<Self, TraceError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TraceError::new(0, format!("cannot read {}: {e}", path.display())))?;
        Trace::parse(&text)
    }

    /// The trace as CSV text, header first.
    pub fn to_csv(&self) -> String {
        let mut out = String::with_capacity(32 * (self.records.len() + 1));
        out.push_str(HEADER);
        out.push('\n');
        for r in &self.records {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{}",
                r.task,
                r.seq,
                u8::from(r.dependent),
                r.arrival,
                r.length,
                r.cmd
            );
        }
        out
    }

    /// The packets, in file order.
    pub fn records(&self) -> &[TraceRecord] {
        &self.records
    }

    /// Number of packets.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the trace has no packets.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The longest packet.
    pub fn max_length(&self) -> u64 {
        self.records.iter().map(|r| r.length).max().unwrap_or(1)
    }
}

fn parse_record(line: usize, text: &str) -> Result<TraceRecord, TraceError> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() != 6 {
        return Err(TraceError::new(
            line,
            format!("expected 6 fields ({HEADER}), found {}", fields.len()),
        ));
    }
    let bad = |name: &str, value: &str| TraceError::new(line, format!("bad {name} `{value}`"));
    let task = fields[0].parse().map_err(|_| bad("task", fields[0]))?;
    let seq = fields[1].parse().map_err(|_| bad("seq", fields[1]))?;
    let dependent = match fields[2] {
        "0" => false,
        "1" => true,
        other => {
            return Err(TraceError::new(
                line,
                format!("bad flag `{other}`: expected 0 or 1"),
            ));
        }
    };
    let arrival = fields[3].parse().map_err(|_| bad("arrival", fields[3]))?;
    let length = fields[4].parse().map_err(|_| bad("length", fields[4]))?;
    let cmd = fields[5].parse().map_err(|_| {
        TraceError::new(
            line,
            format!("bad cmd `{}`: expected enc, dec, sign or verify", fields[5]),
        )
    })?;
    Ok(TraceRecord {
        task,
        seq,
        dependent,
        arrival,
        length,
        cmd,
        last: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_derives_last() {
        let t = Trace::parse(
            "task,seq,flag,arrival,length,cmd\n1,0,1,0,2,enc\n2,0,0,0.5,1,sign\n1,1,1,1.25,2,enc\n",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        let last: Vec<bool> = t.records().iter().map(|r| r.last).collect();
        assert_eq!(last, vec![false, true, true]);
        assert_eq!(Trace::parse(&t.to_csv()).unwrap(), t);
    }

    #[test]
    fn malformed_lines_are_named() {
        let cases = [
            ("", 1, "empty"),
            ("task,seq\n", 1, "header"),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,0,2\n",
                2,
                "6 fields",
            ),
            (
                "task,seq,flag,arrival,length,cmd\nx,0,1,0,2,enc\n",
                2,
                "task",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,2,0,2,enc\n",
                2,
                "flag",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,-1,2,enc\n",
                2,
                "arrival",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,nan,2,enc\n",
                2,
                "arrival",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,0,0,enc\n",
                2,
                "length",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,0,2,hash\n",
                2,
                "cmd",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,1,1,0,2,enc\n",
                2,
                "seq 1",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,0,2,enc\n\n# note\n1,2,1,1,2,enc\n",
                5,
                "out of order",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,0,2,enc\n1,1,0,1,2,enc\n",
                3,
                "flag changes",
            ),
            (
                "task,seq,flag,arrival,length,cmd\n1,0,1,5,2,enc\n1,1,1,1,2,enc\n",
                3,
                "before",
            ),
        ];
        for (text, line, what) in cases {
            let err = Trace::parse(text).unwrap_err();
            assert_eq!(err.line(), line, "{text:?}: {err}");
            assert!(err.to_string().contains(what), "{text:?}: {err}");
        }
    }
}
