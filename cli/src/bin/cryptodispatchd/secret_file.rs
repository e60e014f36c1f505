//! Reading a secret file (a key, the token list, the TLS private key): it must be a regular file
//! that only its owner can access, and of a bounded size. The file is opened without blocking
//! (`O_NONBLOCK`: a FIFO or a device cannot hang the start) and, for key files, without
//! following a symbolic link (`O_NOFOLLOW`); the checks are made on the opened file (`fstat`),
//! so the file read is the file checked.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use zeroize::Zeroizing;

use crate::StartError;

/// Whether a symbolic link is followed to the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Followed (the tokens file and the TLS key may be links, as mounted secrets often are).
    Follow,
    /// Refused: the path itself must be the regular file (key files).
    Refuse,
}

/// Reads `path`, a secret of kind `what` ("an AES key"), of at most `max_len` bytes.
///
/// # Errors
/// [`StartError`] naming the file: it cannot be opened, is a symbolic link and `links` is
/// [`Links::Refuse`], is not a regular file, grants any access to group or others (the message
/// gives its mode), or is larger than `max_len`.
pub fn read_secret(
    path: &Path,
    what: &str,
    max_len: u64,
    links: Links,
) -> Result<Zeroizing<Vec<u8>>, StartError> {
    let fail = |e: std::io::Error| StartError::new(format!("{}: {e}", path.display()));
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) {
                StartError::new(format!(
                    "{}: {what} must not be a symbolic link; put the key file itself in the \
                     folder",
                    path.display()
                ))
            } else {
                fail(e)
            }
        })?;
    let meta = file.metadata().map_err(fail)?;
    if !meta.is_file() {
        return Err(StartError::new(format!(
            "{}: {what} must be a regular file",
            path.display()
        )));
    }
    check_private(path, meta.permissions().mode(), what)?;
    if meta.len() > max_len {
        return Err(StartError::new(format!(
            "{}: {what} file of {} bytes is larger than {max_len} bytes",
            path.display(),
            meta.len()
        )));
    }
    let mut bytes = Zeroizing::new(Vec::with_capacity(meta.len() as usize + 1));
    file.take(max_len + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > max_len {
        return Err(StartError::new(format!(
            "{}: {what} file grew past {max_len} bytes while being read",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Refuses a mode that gives group or others any access.
fn check_private(path: &Path, mode: u32, what: &str) -> Result<(), StartError> {
    if mode & 0o077 != 0 {
        return Err(StartError::new(format!(
            "{}: mode {:04o} lets group or others read or change {what}; refusing to start \
             (make it private: chmod 600 {})",
            path.display(),
            mode & 0o7777,
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owner_modes_pass() {
        let p = Path::new("k.aes");
        for ok in [0o600, 0o400, 0o700, 0o100600] {
            assert!(check_private(p, ok, "a key").is_ok(), "{ok:o}");
        }
        for bad in [0o640, 0o604, 0o644, 0o660, 0o606, 0o601, 0o610] {
            let e = check_private(p, bad, "a key").unwrap_err().to_string();
            assert!(
                e.contains("k.aes") && e.contains(&format!("{:04o}", bad)),
                "{e}"
            );
        }
    }
}
