//! Bearer tokens: who may use which keys.
//!
//! The `--tokens` file has a line per token, `TOKEN key1,key2` (those keys) or `TOKEN *` (every
//! key); blank lines and lines starting with `#` are skipped. A token is at least 16 printable
//! ASCII characters without spaces. The file must be private to its owner, like a key file;
//! errors name its line, never the token. Every key a line names must exist.
//!
//! A call carries `authorization: Bearer TOKEN` (the scheme in any case, as HTTP has it:
//! `Bearer`, `bearer`, `BEARER`), checked from the request's headers before its body is read
//! (`gate` module). The token is compared with every token of the
//! file in constant time (`subtle`), without stopping at a match, so the time taken says
//! nothing about which token matched or how much of one did (only whether the lengths were
//! equal, as with any comparison of byte strings of different lengths).

use std::path::Path;

use subtle::{ConditionallySelectable, ConstantTimeEq};
use tonic::Status;
use zeroize::Zeroizing;

use crate::StartError;
use crate::keys::{KeyRing, valid_name};
use crate::secret_file::{Links, read_secret};

/// The shortest token accepted.
const MIN_TOKEN_LEN: usize = 16;
/// The largest tokens file read.
const MAX_FILE_LEN: u64 = 1 << 20;

/// Which keys a token may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// Every key.
    All,
    /// These keys.
    Keys(Vec<String>),
}

impl Grant {
    /// Whether the grant covers the key `name`.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Grant::All => true,
            Grant::Keys(names) => names.iter().any(|n| n == name),
        }
    }

    /// `PERMISSION_DENIED` unless the grant covers `name`.
    ///
    /// # Errors
    /// The status.
    pub fn check(&self, name: &str) -> Result<(), Status> {
        if self.allows(name) {
            Ok(())
        } else {
            Err(Status::permission_denied(format!(
                "this token may not use the key {}",
                crate::daemon::shown(name)
            )))
        }
    }
}

/// A token and its grant.
pub struct Entry {
    token: Zeroizing<Vec<u8>>,
    grant: Grant,
}

/// How calls are authenticated.
pub enum Auth {
    /// Every call may use every key (`--allow-unauthenticated`).
    Open,
    /// Calls need a token of the file.
    Tokens(Vec<Entry>),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Open => f.write_str("Auth::Open"),
            Auth::Tokens(t) => write!(f, "Auth::Tokens({} tokens)", t.len()),
        }
    }
}

impl Auth {
    /// Reads the tokens file at `path`; the keys it names must be in `keys`.
    ///
    /// # Errors
    /// [`StartError`] for a file that is not private or cannot be read, and for a malformed
    /// line (its number is given, never its token).
    pub fn load(path: &Path, keys: &KeyRing) -> Result<Auth, StartError> {
        let bytes = read_secret(path, "the token list", MAX_FILE_LEN, Links::Follow)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| StartError::new(format!("{}: not UTF-8 text", path.display())))?;
        Auth::parse(text, |name| keys.contains(name))
            .map_err(|e| StartError::new(format!("{}: {e}", path.display())))
    }

    /// Parses the text of a tokens file.
    ///
    /// # Errors
    /// A message naming the line.
    pub fn parse(text: &str, key_exists: impl Fn(&str) -> bool) -> Result<Auth, String> {
        let mut entries: Vec<Entry> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(token), Some(list), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!("line {n}: expected `TOKEN key1,key2` or `TOKEN *`"));
            };
            if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "line {n}: a token must be at least {MIN_TOKEN_LEN} printable ASCII \
                     characters"
                ));
            }
            let grant = if list == "*" {
                Grant::All
            } else {
                let mut names = Vec::new();
                for name in list.split(',') {
                    if !valid_name(name) {
                        return Err(format!("line {n}: {name:?} is not a key name"));
                    }
                    if !key_exists(name) {
                        return Err(format!("line {n}: no key is named {name:?}"));
                    }
                    names.push(name.to_owned());
                }
                Grant::Keys(names)
            };
            if entries
                .iter()
                .any(|e| e.token.as_slice() == token.as_bytes())
            {
                return Err(format!(
                    "line {n}: this token was already given on an earlier line"
                ));
            }
            entries.push(Entry {
                token: Zeroizing::new(token.as_bytes().to_vec()),
                grant,
            });
        }
        if entries.is_empty() {
            return Err("no token in the file".into());
        }
        Ok(Auth::Tokens(entries))
    }

    /// The grant of the bearer token in `authorization`, the value of the call's
    /// `authorization` header (`None` without one).
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for a missing or malformed `authorization` header or an unknown token.
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Grant, Status> {
        let entries = match self {
            Auth::Open => return Ok(Grant::All),
            Auth::Tokens(entries) => entries,
        };
        let header = authorization
            .ok_or_else(|| Status::unauthenticated("missing `authorization: Bearer TOKEN`"))?;
        let presented = bearer_token(header).ok_or_else(|| {
            Status::unauthenticated("the `authorization` header must be `Bearer TOKEN`")
        })?;
        let mut found = u64::MAX;
        for (i, entry) in entries.iter().enumerate() {
            let equal = entry.token.as_slice().ct_eq(presented);
            found.conditional_assign(&(i as u64), equal);
        }
        usize::try_from(found)
            .ok()
            .and_then(|i| entries.get(i))
            .map(|e| e.grant.clone())
            .ok_or_else(|| Status::unauthenticated("unknown token"))
    }
}

/// The token of `Bearer TOKEN`, the scheme matched without regard to case (RFC 9110 §11.1).
fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    const SCHEME: &[u8] = b"bearer ";
    if header.len() <= SCHEME.len() || !header[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
        return None;
    }
    Some(&header[SCHEME.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaa-token";
    const B: &str = "bbbbbbbbbbbbbbbb-token";

    fn auth(text: &str) -> Result<Auth, String> {
        Auth::parse(text, |n| ["db", "sig"].contains(&n))
    }

    fn call(header: Option<&str>) -> Option<&[u8]> {
        header.map(str::as_bytes)
    }

    #[test]
    fn grants_by_token() {
        let a = auth(&format!("# comment\n\n{A} db\n  {B} *  \n")).unwrap();
        let g = a.authenticate(call(Some(&format!("Bearer {A}")))).unwrap();
        assert_eq!(g, Grant::Keys(vec!["db".into()]));
        assert!(g.check("db").is_ok());
        assert_eq!(
            g.check("sig").unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        for scheme in ["bearer", "BEARER", "BeArEr"] {
            let g = a
                .authenticate(call(Some(&format!("{scheme} {B}"))))
                .unwrap();
            assert_eq!(g, Grant::All);
        }
        for bad in [
            None,
            Some("Basic xyz"),
            Some("Bearer nope-nope-nope-nope"),
            Some(A),
            Some("Bearer"),
            Some("Bearer "),
            Some("Bearertoken-token-token-token"),
        ] {
            let e = a.authenticate(call(bad)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
            assert!(!e.message().contains(A));
        }
        // A prefix or an extension of a token is not the token.
        for near in [&A[..A.len() - 1], &format!("{A}x")] {
            let e = a.authenticate(call(Some(&format!("Bearer {near}"))));
            assert!(e.is_err());
        }
        assert_eq!(Auth::Open.authenticate(call(None)).unwrap(), Grant::All);
    }

    #[test]
    fn malformed_lines_are_named_and_tokens_never_shown() {
        for (text, expect) in [
            (A.to_string(), "line 1"),
            (format!("{A} db extra"), "line 1"),
            ("short db".to_string(), "at least 16"),
            (format!("# c\n{A} nokey"), "line 2: no key is named"),
            (format!("{A} db,\n"), "not a key name"),
            (
                format!("{A} db\n{A} sig"),
                "line 2: this token was already given",
            ),
            ("# only comments".to_string(), "no token"),
        ] {
            let e = auth(&text).unwrap_err();
            assert!(e.contains(expect), "{e}");
            assert!(!e.contains(A), "{e}");
        }
    }
}
