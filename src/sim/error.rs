//! The simulator's errors.

use thiserror::Error;

/// A malformed trace file: which line, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("trace line {line}: {message}")]
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
