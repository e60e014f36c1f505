//! The daemon's keys: one file per key in the `--keys` folder, registered with the service at
//! start and used by name.
//!
//! - `NAME.aes`: 16, 24 or 32 raw bytes (AES-128, -192, -256);
//! - `NAME.ed25519`: a 32-byte Ed25519 seed (RFC 8032 secret key).
//!
//! Names are 1 to [`MAX_KEY_NAME`] (128) bytes of letters, digits, `.`, `_` and `-`. Every key
//! file must be a regular file in the folder itself, private to its owner (see `secret_file`):
//! a symbolic link (even to a file inside the folder), a FIFO, a socket or a device stops the
//! start with a message naming it, checked on the directory entry before anything is opened
//! and again on the opened file (opened without following links, without blocking); so does a
//! file readable by group or others, with its mode. Hidden files (`.name`) and sub-folders are
//! skipped; any other file is refused, so a misspelt extension does not silently leave a key
//! out. The bytes read are
//! zeroized once the service holds the key; they never leave the daemon (the public half of
//! an Ed25519 key may, through `GetPublicKey`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use cryptodispatch::{KeyId, Service};

use crate::StartError;
use crate::secret_file::{Links, read_secret};

/// The longest key name, in bytes.
pub const MAX_KEY_NAME: usize = 128;

/// What a key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// AES, 16, 24 or 32 bytes.
    Aes,
    /// An Ed25519 signing key.
    Ed25519,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::Aes => "an AES key",
            KeyKind::Ed25519 => "an Ed25519 key",
        })
    }
}

/// A registered key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedKey {
    /// The service's handle.
    pub id: KeyId,
    /// Its kind.
    pub kind: KeyKind,
}

/// The keys by name.
#[derive(Debug, Default)]
pub struct KeyRing {
    keys: BTreeMap<String, NamedKey>,
}

impl KeyRing {
    /// Reads every key file of `dir` and registers it with `service`.
    ///
    /// # Errors
    /// [`StartError`] for an unreadable folder, a key file that is not private, of the wrong
    /// size, with a bad name or an unknown extension, or a name used twice.
    pub fn load(dir: &Path, service: &Service) -> Result<KeyRing, StartError> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| StartError::new(format!("--keys {}: {e}", dir.display())))?;
        let mut paths = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| StartError::new(format!("--keys {}: {e}", dir.display())))?;
            // The entry's own type: a symbolic link is not followed.
            let file_type = entry
                .file_type()
                .map_err(|e| StartError::new(format!("{}: {e}", entry.path().display())))?;
            paths.push((entry.path(), file_type));
        }
        paths.sort_by(|a, b| a.0.cmp(&b.0));
        let mut ring = KeyRing::default();
        for (path, file_type) in paths {
            let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
                return Err(StartError::new(format!(
                    "{}: key file names must be UTF-8",
                    path.display()
                )));
            };
            if file_name.starts_with('.') || file_type.is_dir() {
                continue;
            }
            if file_type.is_symlink() {
                return Err(StartError::new(format!(
                    "{}: a key file must not be a symbolic link (it could lead outside --keys); \
                     put the key file itself in the folder",
                    path.display()
                )));
            }
            if !file_type.is_file() {
                return Err(StartError::new(format!(
                    "{}: not a regular file (a FIFO, socket or device); a key file must be a \
                     regular file",
                    path.display()
                )));
            }
            let (name, kind) = parse_file_name(file_name).ok_or_else(|| {
                StartError::new(format!(
                    "{}: not a key file: expected NAME.aes or NAME.ed25519, NAME made of \
                     letters, digits, '.', '_' and '-'",
                    path.display()
                ))
            })?;
            let id = match kind {
                KeyKind::Aes => {
                    let bytes = read_secret(&path, "an AES key", 32, Links::Refuse)?;
                    if ![16, 24, 32].contains(&bytes.len()) {
                        return Err(StartError::new(format!(
                            "{}: an AES key must be 16, 24 or 32 bytes, the file has {}",
                            path.display(),
                            bytes.len()
                        )));
                    }
                    service.add_aes_key(&bytes)
                }
                KeyKind::Ed25519 => {
                    let bytes = read_secret(&path, "an Ed25519 seed", 32, Links::Refuse)?;
                    if bytes.len() != 32 {
                        return Err(StartError::new(format!(
                            "{}: an Ed25519 seed must be 32 bytes, the file has {}",
                            path.display(),
                            bytes.len()
                        )));
                    }
                    service.add_signing_key(&bytes)
                }
            }
            .map_err(|e| StartError::new(format!("{}: {e}", path.display())))?;
            if ring.keys.contains_key(name) {
                return Err(StartError::new(format!(
                    "{}: the key name {name} is used by two files",
                    path.display()
                )));
            }
            ring.keys.insert(name.to_owned(), NamedKey { id, kind });
        }
        Ok(ring)
    }

    /// The key named `name`.
    pub fn get(&self, name: &str) -> Option<NamedKey> {
        self.keys.get(name).copied()
    }

    /// Whether a key is named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.keys.contains_key(name)
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The key names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }
}

/// `NAME.aes` or `NAME.ed25519`, with a valid name.
fn parse_file_name(file_name: &str) -> Option<(&str, KeyKind)> {
    let (name, ext) = file_name.rsplit_once('.')?;
    let kind = match ext {
        "aes" => KeyKind::Aes,
        "ed25519" => KeyKind::Ed25519,
        _ => return None,
    };
    valid_name(name).then_some((name, kind))
}

/// 1 to [`MAX_KEY_NAME`] bytes of letters, digits, `.`, `_`, `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_KEY_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(parse_file_name("db.aes"), Some(("db", KeyKind::Aes)));
        assert_eq!(
            parse_file_name("sig-2.v1.ed25519"),
            Some(("sig-2.v1", KeyKind::Ed25519))
        );
        let long = format!("{}.aes", "k".repeat(MAX_KEY_NAME + 1));
        for bad in ["db", "db.key", ".aes", "a b.aes", "db.AES", "é.aes", &long] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }
}
