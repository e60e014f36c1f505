//! The simulator's errors.

use std::fmt;

/// A malformed trace file: which line, and what is wrong with it. Shown as `trace line N:
/// ...`, or `trace: ...` for an error about the whole file (line 0: it could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    line: usize,
    message: String,
}

impl TraceError {
    /// An error at `line` (1-based; 0 when the file could not be read at all).
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        TraceError {
            line,
            message: message.into(),
        }
    }

    /// The line the error is on.
    pub fn line(&self) -> usize {
        self.line
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "trace: {}", self.message),
            line => write!(f, "trace line {line}: {}", self.message),
        }
    }
}

impl std::error::Error for TraceError {}
