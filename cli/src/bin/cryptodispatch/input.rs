//! What a command reads: its input (a file or standard input) and the key and signature files
//! of a fixed size.
//!
//! A key or signature file is never read whole: its length is checked from its metadata when
//! it is a regular file, and at most one byte more than its size is read in any case (a FIFO,
//! `/dev/stdin`, a process substitution), so naming a huge file or an endless pipe by mistake
//! costs nothing.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::service::CliError;

/// Opens the input: a file, or stdin for none or `-`.
pub fn open_input(path: Option<&PathBuf>) -> Result<Box<dyn Read>, CliError> {
    match path {
        Some(p) if p.as_os_str() != "-" => File::open(p)
            .map(|f| Box::new(f) as Box<dyn Read>)
            .map_err(|e| CliError::usage(format!("-in {}: {e}", p.display()))),
        _ => Ok(Box::new(io::stdin().lock())),
    }
}

/// Reads until `buf` is full or the input ends; returns the number of bytes read.
pub fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads the file `path` given to `option`, which must hold exactly `len` bytes of `what`
/// ("a raw Ed25519 seed").
///
/// # Errors
/// A usage error if the file cannot be opened or read, or does not hold exactly `len` bytes. A
/// regular file of another length is refused from its metadata, before anything is read; any
/// other file is read for at most `len + 1` bytes.
pub fn read_exact_file(
    option: &str,
    path: &Path,
    len: usize,
    what: &str,
) -> Result<Zeroizing<Vec<u8>>, CliError> {
    let fail = |e: io::Error| CliError::usage(format!("{option} {}: {e}", path.display()));
    let wrong_size = |size: String| {
        CliError::usage(format!(
            "{option} {}: expected {what} of exactly {len} bytes, the file has {size}",
            path.display()
        ))
    };
    let file = File::open(path).map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    if meta.is_file() && meta.len() != len as u64 {
        return Err(wrong_size(format!("{} bytes", meta.len())));
    }
    let mut bytes = Zeroizing::new(Vec::with_capacity(len + 1));
    file.take(len as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    match bytes.len() {
        n if n == len => Ok(bytes),
        n if n > len => Err(wrong_size(format!("more than {len} bytes"))),
        n => Err(wrong_size(format!("{n} bytes"))),
    }
}
