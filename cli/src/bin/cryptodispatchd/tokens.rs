//! Bearer tokens: who may use which keys, and under which tenant.
//!
//! The `--tokens` file has a line per token: the token, the keys it may use (`key1,key2`, or
//! `*` for every key), then optional settings as `NAME=VALUE` words:
//!
//! ```text
//! # TOKEN                          KEYS          SETTINGS
//! 3q2+7wXkT0dfGhJ1ZyA9pQ4uRmVbNc  payments-db   tenant=payments weight=3 max-inflight-bytes=64MiB max-inflight-jobs=100 max-bytes-per-sec=200MB
//! Lw8rT5yUiO2pAsDf6GhJkL1zXcVbNm  payments-db   tenant=payments
//! Zx7cV4bNm1QwErTyUi9OpAsDfGhJkL  *
//! ```
//!
//! - `tenant=NAME` puts the token's calls under the tenant NAME (1 to 128 bytes of letters,
//!   digits, `.`, `_` and `-`): tenants share the service by weight, and each is held to its
//!   limits. A token without `tenant=` is in the tenant `default` (weight 1, no limits), as
//!   is every call with `--allow-unauthenticated`.
//! - `weight=W` (1 to [`MAX_WEIGHT`], default 1): the tenant's share of the nodes while other
//!   tenants are backlogged too, relative to theirs.
//! - `max-inflight-bytes=SIZE`, `max-inflight-jobs=N`, `max-bytes-per-sec=SIZE`: the tenant's
//!   limits (none by default). A call over a limit waits at most `--queue-wait-ms`, then is
//!   answered `RESOURCE_EXHAUSTED` (`daemon` module).
//! - SIZE is a whole number of bytes, or one with a suffix: `K`, `M`, `G`, `T` (or `KB`, ...)
//!   for powers of 1000, `Ki`, `Mi`, `Gi`, `Ti` (or `KiB`, ...) for powers of 1024, in any
//!   case: `65536`, `64KiB`, `200MB`, `1GiB`.
//!
//! Several tokens may share a tenant. Its settings are given on one of their lines, or
//! repeated the same on several; a line with `tenant=NAME` alone joins the tenant as its other
//! lines set it. Two lines that give one tenant different settings stop the start, as do
//! settings without `tenant=` or on `tenant=default` (whose weight and limits are fixed).
//!
//! Blank lines are skipped, and a word starting with `#` begins a comment to the end of its
//! line (a whole line, or after a token's keys and settings); a byte-order mark at the start
//! of the file is ignored. A token is at least 16 printable
//! ASCII characters without spaces. The file must be private to its owner, like a key file;
//! errors name its line, never the token (nor a word that is not `NAME=VALUE`, which could be
//! one). Every key a line names must exist.
//!
//! A call carries `authorization: Bearer TOKEN` (the scheme in any case, as HTTP has it:
//! `Bearer`, `bearer`, `BEARER`), checked from the request's headers before its body is read
//! (`gate` module). The token is compared with every token of the
//! file in constant time (`subtle`), without stopping at a match, so the time taken says
//! nothing about which token matched or how much of one did (only whether the lengths were
//! equal, as with any comparison of byte strings of different lengths). The match gives the
//! call's [`Caller`]: the token's grant and its tenant.

use std::fmt;
use std::path::Path;

use cryptodispatch::{Service, TenantError, TenantId, TenantSpec};
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
/// The largest weight a tenant may have: a tenant's turn at the nodes is its weight's worth
/// of packets, so a larger one would let it hold the nodes for long stretches.
pub const MAX_WEIGHT: u32 = 1000;
/// The name of the tenant of tokens without `tenant=`.
pub const DEFAULT_TENANT: &str = "default";

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

/// Who makes a call, as its token says: the keys it may use and the tenant its jobs run
/// under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The keys.
    pub grant: Grant,
    /// The tenant ([`TenantId::DEFAULT`] for a token without `tenant=`, and for every call
    /// with `--allow-unauthenticated`).
    pub tenant: TenantId,
}

/// A tenant's settings as one line gives them (`None`: not given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Settings {
    weight: Option<u32>,
    bytes_in_flight: Option<u64>,
    jobs_in_flight: Option<u64>,
    bytes_per_sec: Option<u64>,
}

impl Settings {
    /// Whether the line gives any setting.
    fn given(&self) -> bool {
        *self != Settings::default()
    }

    /// The tenant `name` with these settings.
    fn spec(&self, name: &str) -> TenantSpec {
        let mut spec = TenantSpec::new(name).weight(self.weight.unwrap_or(1));
        if let Some(b) = self.bytes_in_flight {
            spec = spec.max_bytes_in_flight(b);
        }
        if let Some(j) = self.jobs_in_flight {
            spec = spec.max_jobs_in_flight(j);
        }
        if let Some(r) = self.bytes_per_sec {
            spec = spec.max_bytes_per_sec(r);
        }
        spec
    }
}

/// A tenant's settings, as error messages show them: its weight and the limits set.
struct Shown<'a>(&'a TenantSpec);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.0.limits();
        write!(f, "weight={}", self.0.get_weight())?;
        for (name, value) in [
            ("max-inflight-bytes", l.bytes_in_flight),
            ("max-inflight-jobs", l.jobs_in_flight),
            ("max-bytes-per-sec", l.bytes_per_sec),
        ] {
            if let Some(v) = value {
                write!(f, " {name}={v}")?;
            }
        }
        Ok(())
    }
}

/// A tenant of the file.
#[derive(Debug, Clone)]
struct Tenant {
    spec: TenantSpec,
    /// The line that gave its settings, if one did.
    settings_line: Option<usize>,
    /// Its id in the service, once registered.
    id: TenantId,
}

/// A token, its grant and its tenant.
pub struct Entry {
    token: Zeroizing<Vec<u8>>,
    grant: Grant,
    /// Index into the tenants (0: the default tenant).
    tenant: usize,
}

/// The tokens of a file, and the tenants they name.
pub struct Tokens {
    entries: Vec<Entry>,
    /// The default tenant first, then the others in the order the file names them.
    tenants: Vec<Tenant>,
}

/// How calls are authenticated.
pub enum Auth {
    /// Every call may use every key, in the default tenant (`--allow-unauthenticated`).
    Open,
    /// Calls need a token of the file.
    Tokens(Tokens),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Open => f.write_str("Auth::Open"),
            Auth::Tokens(t) => write!(
                f,
                "Auth::Tokens({} tokens, {} tenants)",
                t.entries.len(),
                t.tenants.len()
            ),
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
        let mut tenants = vec![Tenant {
            spec: TenantSpec::new(DEFAULT_TENANT),
            settings_line: None,
            id: TenantId::DEFAULT,
        }];
        // Editors on some systems begin a UTF-8 file with a byte-order mark.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // No key name or setting starts with `#`, and the token is the line's first word.
            let mut words = line
                .split_whitespace()
                .take_while(|word| !word.starts_with('#'));
            let (Some(token), Some(list)) = (words.next(), words.next()) else {
                return Err(format!(
                    "line {n}: expected `TOKEN key1,key2` or `TOKEN *`, then optional \
                     settings (tenant=NAME weight=W max-inflight-bytes=SIZE \
                     max-inflight-jobs=N max-bytes-per-sec=SIZE)"
                ));
            };
            if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "line {n}: a token must be at least {MIN_TOKEN_LEN} printable ASCII \
                     characters"
                ));
            }
            let grant = parse_grant(n, list, &key_exists)?;
            let (tenant_name, settings) = parse_settings(n, words)?;
            let tenant = match tenant_name {
                None if settings.given() => {
                    return Err(format!(
                        "line {n}: a weight or a limit needs tenant=NAME (a token without one \
                         is in the tenant `{DEFAULT_TENANT}`, of weight 1 and without limits)"
                    ));
                }
                None => 0,
                Some(name) => tenant_index(n, name, settings, &mut tenants)?,
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
                tenant,
            });
        }
        if entries.is_empty() {
            return Err("no token in the file".into());
        }
        Ok(Auth::Tokens(Tokens { entries, tenants }))
    }

    /// The tenants the file names other than `default`, with their settings, in the order
    /// of the file.
    pub fn tenants(&self) -> Vec<TenantSpec> {
        match self {
            Auth::Open => Vec::new(),
            Auth::Tokens(t) => t.tenants[1..].iter().map(|t| t.spec.clone()).collect(),
        }
    }

    /// Registers every tenant of the file with the service, so that the calls of their
    /// tokens run under them.
    ///
    /// # Errors
    /// [`StartError`] if the service refuses one.
    pub fn register(&mut self, service: &Service) -> Result<(), StartError> {
        self.register_with(|spec| service.add_tenant(spec.clone()))
            .map_err(|(name, e)| StartError::new(format!("--tokens: tenant {name:?}: {e}")))
    }

    /// Registers every tenant of the file with `add`, which returns its id.
    fn register_with(
        &mut self,
        mut add: impl FnMut(&TenantSpec) -> Result<TenantId, TenantError>,
    ) -> Result<(), (String, TenantError)> {
        if let Auth::Tokens(t) = self {
            for tenant in &mut t.tenants[1..] {
                tenant.id = add(&tenant.spec).map_err(|e| (tenant.spec.name().to_owned(), e))?;
            }
        }
        Ok(())
    }

    /// The caller of the bearer token in `authorization`, the value of the call's
    /// `authorization` header (`None` without one).
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for a missing or malformed `authorization` header or an unknown token.
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Caller, Status> {
        let tokens = match self {
            Auth::Open => {
                return Ok(Caller {
                    grant: Grant::All,
                    tenant: TenantId::DEFAULT,
                });
            }
            Auth::Tokens(tokens) => tokens,
        };
        let header = authorization
            .ok_or_else(|| Status::unauthenticated("missing `authorization: Bearer TOKEN`"))?;
        let presented = bearer_token(header).ok_or_else(|| {
            Status::unauthenticated("the `authorization` header must be `Bearer TOKEN`")
        })?;
        let mut found = u64::MAX;
        for (i, entry) in tokens.entries.iter().enumerate() {
            let equal = entry.token.as_slice().ct_eq(presented);
            found.conditional_assign(&(i as u64), equal);
        }
        usize::try_from(found)
            .ok()
            .and_then(|i| tokens.entries.get(i))
            .map(|e| Caller {
                grant: e.grant.clone(),
                tenant: tokens.tenants[e.tenant].id,
            })
            .ok_or_else(|| Status::unauthenticated("unknown token"))
    }
}

/// The grant of a line's key list.
fn parse_grant(n: usize, list: &str, key_exists: &impl Fn(&str) -> bool) -> Result<Grant, String> {
    if list == "*" {
        return Ok(Grant::All);
    }
    if list.contains('=') {
        return Err(format!(
            "line {n}: the keys (`key1,key2` or `*`) come after the token, before the settings"
        ));
    }
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
    Ok(Grant::Keys(names))
}

/// A line's `NAME=VALUE` settings: its tenant's name, and the weight and limits it gives.
fn parse_settings<'a>(
    n: usize,
    words: impl Iterator<Item = &'a str>,
) -> Result<(Option<&'a str>, Settings), String> {
    let mut tenant = None;
    let mut s = Settings::default();
    for (w, word) in words.enumerate() {
        // The word is not shown: a misplaced token must not reach an error message.
        let Some((name, value)) = word.split_once('=') else {
            return Err(format!(
                "line {n}: word {} is not a setting NAME=VALUE (tenant=, weight=, \
                 max-inflight-bytes=, max-inflight-jobs=, max-bytes-per-sec=)",
                w + 3
            ));
        };
        let twice = || format!("line {n}: {name}= is given twice");
        match name {
            "tenant" => {
                if tenant.replace(value).is_some() {
                    return Err(twice());
                }
            }
            "weight" => {
                let v = value
                    .parse::<u32>()
                    .ok()
                    .filter(|w| (1..=MAX_WEIGHT).contains(w))
                    .ok_or_else(|| {
                        format!("line {n}: weight= must be a whole number from 1 to {MAX_WEIGHT}")
                    })?;
                if s.weight.replace(v).is_some() {
                    return Err(twice());
                }
            }
            "max-inflight-jobs" => {
                let v = value
                    .parse::<u64>()
                    .ok()
                    .filter(|&j| j >= 1)
                    .ok_or_else(|| {
                        format!("line {n}: max-inflight-jobs= must be a whole number, at least 1")
                    })?;
                if s.jobs_in_flight.replace(v).is_some() {
                    return Err(twice());
                }
            }
            "max-inflight-bytes" | "max-bytes-per-sec" => {
                let v = parse_size(value).map_err(|e| format!("line {n}: {name}=: {e}"))?;
                let slot = if name == "max-inflight-bytes" {
                    &mut s.bytes_in_flight
                } else {
                    &mut s.bytes_per_sec
                };
                if slot.replace(v).is_some() {
                    return Err(twice());
                }
            }
            _ => {
                return Err(format!(
                    "line {n}: unknown setting {}; expected tenant=, weight=, \
                     max-inflight-bytes=, max-inflight-jobs= or max-bytes-per-sec=",
                    crate::daemon::shown(name)
                ));
            }
        }
    }
    Ok((tenant, s))
}

/// The index of the tenant `name` in `tenants`, added if new; its settings must agree with
/// those another line gave it.
fn tenant_index(
    n: usize,
    name: &str,
    settings: Settings,
    tenants: &mut Vec<Tenant>,
) -> Result<usize, String> {
    if name == DEFAULT_TENANT {
        if settings.given() {
            return Err(format!(
                "line {n}: the tenant `{DEFAULT_TENANT}` has weight 1 and no limits; give \
                 these settings to a tenant of another name"
            ));
        }
        return Ok(0);
    }
    let spec = settings.spec(name);
    let line = settings.given().then_some(n);
    if let Some(i) = tenants.iter().position(|t| t.spec.name() == name) {
        let t = &mut tenants[i];
        match (t.settings_line, line) {
            (Some(m), Some(_)) if t.spec != spec => {
                return Err(format!(
                    "line {n}: the tenant {name:?} has other settings on line {m} (here \
                     {}; there {}): give every token of a tenant the same settings, or \
                     tenant={name} alone",
                    Shown(&spec),
                    Shown(&t.spec)
                ));
            }
            (None, Some(_)) => {
                t.spec = spec;
                t.settings_line = line;
            }
            _ => {}
        }
        return Ok(i);
    }
    // The library's rule for names, checked here to name the line.
    let valid = !name.is_empty()
        && name.len() <= cryptodispatch::runtime::MAX_TENANT_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !valid {
        return Err(format!(
            "line {n}: a tenant name is 1 to {} bytes of letters, digits, '.', '_' and '-'",
            cryptodispatch::runtime::MAX_TENANT_NAME
        ));
    }
    tenants.push(Tenant {
        spec,
        settings_line: line,
        id: TenantId::DEFAULT,
    });
    Ok(tenants.len() - 1)
}

/// A size in bytes: a whole number, with an optional suffix `K`, `M`, `G`, `T` (powers of
/// 1000) or `Ki`, `Mi`, `Gi`, `Ti` (powers of 1024), each optionally followed by `B`, in any
/// case. At least 1.
///
/// # Errors
/// A message saying what a size is.
pub fn parse_size(text: &str) -> Result<u64, String> {
    const WHAT: &str = "a size is a whole number of bytes, at least 1, optionally followed by \
                        K, M, G, T (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)";
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, suffix) = text.split_at(digits);
    let number: u64 = number.parse().map_err(|_| WHAT.to_string())?;
    let suffix = suffix.to_ascii_lowercase();
    let unit = suffix.strip_suffix('b').unwrap_or(&suffix);
    let multiplier: u64 = match unit {
        "" => 1,
        "k" => 1_000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        "ki" => 1 << 10,
        "mi" => 1 << 20,
        "gi" => 1 << 30,
        "ti" => 1 << 40,
        _ => return Err(WHAT.to_string()),
    };
    match number.checked_mul(multiplier) {
        Some(0) | None => Err(WHAT.to_string()),
        Some(v) => Ok(v),
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
    const C: &str = "cccccccccccccccc-token";

    fn auth(text: &str) -> Result<Auth, String> {
        Auth::parse(text, |n| ["db", "sig"].contains(&n))
    }

    fn call(header: Option<&str>) -> Option<&[u8]> {
        header.map(str::as_bytes)
    }

    /// The file's tenants registered with ids from 1 in order, and their specs.
    fn registered(text: &str) -> (Auth, Vec<TenantSpec>) {
        register(auth(text).unwrap())
    }

    fn register(mut a: Auth) -> (Auth, Vec<TenantSpec>) {
        let mut specs = Vec::new();
        a.register_with(|spec| {
            specs.push(spec.clone());
            Ok(TenantId(specs.len() as u32))
        })
        .unwrap();
        (a, specs)
    }

    fn caller(a: &Auth, token: &str) -> Caller {
        a.authenticate(call(Some(&format!("Bearer {token}"))))
            .unwrap()
    }

    #[test]
    fn grants_by_token() {
        let a = auth(&format!(
            "\u{feff}# comment\n\n{A} db # the database's\n  {B} *  #all\n"
        ))
        .unwrap();
        let g = caller(&a, A).grant;
        assert_eq!(g, Grant::Keys(vec!["db".into()]));
        assert!(g.check("db").is_ok());
        assert_eq!(
            g.check("sig").unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        for scheme in ["bearer", "BEARER", "BeArEr"] {
            let c = a
                .authenticate(call(Some(&format!("{scheme} {B}"))))
                .unwrap();
            assert_eq!(c.grant, Grant::All);
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
        let open = Auth::Open.authenticate(call(None)).unwrap();
        assert_eq!(
            open,
            Caller {
                grant: Grant::All,
                tenant: TenantId::DEFAULT
            }
        );
    }

    #[test]
    fn a_token_without_a_tenant_is_in_the_default_tenant() {
        let (a, specs) = registered(&format!("{A} db\n{B} * tenant=default\n"));
        assert!(specs.is_empty(), "nothing to register: {specs:?}");
        assert!(a.tenants().is_empty());
        assert_eq!(caller(&a, A).tenant, TenantId::DEFAULT);
        assert_eq!(caller(&a, B).tenant, TenantId::DEFAULT);
    }

    #[test]
    fn tenants_weights_and_limits_are_parsed_and_registered() {
        let text = format!(
            "{A} db tenant=payments weight=3 max-inflight-bytes=64MiB max-inflight-jobs=100 \
             max-bytes-per-sec=200MB\n\
             {B} sig tenant=reports max-bytes-per-sec=1Ki\n\
             {C} * tenant=payments\n\
             dddddddddddddddd-token db\n"
        );
        let (a, specs) = registered(&text);
        let payments = TenantSpec::new("payments")
            .weight(3)
            .max_bytes_in_flight(64 << 20)
            .max_jobs_in_flight(100)
            .max_bytes_per_sec(200_000_000);
        let reports = TenantSpec::new("reports").max_bytes_per_sec(1024);
        assert_eq!(specs, vec![payments.clone(), reports.clone()]);
        assert_eq!(a.tenants(), specs);
        // Ids in registration order; the tokens of one tenant share its id.
        assert_eq!(caller(&a, A).tenant, TenantId(1));
        assert_eq!(caller(&a, B).tenant, TenantId(2));
        assert_eq!(caller(&a, C).tenant, TenantId(1));
        assert_eq!(caller(&a, C).grant, Grant::All);
        assert_eq!(
            caller(&a, "dddddddddddddddd-token").tenant,
            TenantId::DEFAULT
        );
        // The settings may come on a later line than the tenant's first, or be repeated.
        let (_, specs) = registered(&format!(
            "{A} db tenant=t\n{B} db tenant=t weight=2\n{C} db tenant=t weight=2\n"
        ));
        assert_eq!(specs, vec![TenantSpec::new("t").weight(2)]);
    }

    #[test]
    fn a_tenant_given_different_settings_is_refused() {
        for (text, expect) in [
            (
                format!("{A} db tenant=t weight=2\n{B} db tenant=t weight=3\n"),
                "line 2: the tenant \"t\" has other settings on line 1",
            ),
            (
                format!("{A} db tenant=t weight=2\n\n{B} db tenant=t weight=2 max-inflight-jobs=5"),
                "line 3: the tenant \"t\" has other settings on line 1",
            ),
            (
                format!(
                    "{A} db tenant=t max-inflight-bytes=1KiB\n{B} db tenant=t max-inflight-bytes=1KB"
                ),
                "max-inflight-bytes=1000; there weight=1 max-inflight-bytes=1024",
            ),
        ] {
            let e = auth(&text).unwrap_err();
            assert!(e.contains(expect), "{e}");
            assert!(!e.contains(A) && !e.contains(B), "{e}");
        }
    }

    #[test]
    fn bad_settings_are_refused_with_their_line() {
        for (setting, expect) in [
            ("weight=0", "weight= must be a whole number from 1 to 1000"),
            ("weight=1001", "from 1 to 1000"),
            ("weight=x", "from 1 to 1000"),
            ("weight=-1", "from 1 to 1000"),
            (
                "max-inflight-jobs=0",
                "max-inflight-jobs= must be a whole number",
            ),
            (
                "max-inflight-jobs=1.5",
                "max-inflight-jobs= must be a whole number",
            ),
            ("max-inflight-bytes=0", "max-inflight-bytes=: a size is"),
            ("max-inflight-bytes=12XB", "a size is"),
            ("max-bytes-per-sec=", "max-bytes-per-sec=: a size is"),
            ("max-bytes-per-sec=99999999999TiB", "a size is"),
            ("max-bytes-per-sec=MB", "a size is"),
            ("speed=3", "unknown setting \"speed\""),
            ("weight=2 weight=2", "weight= is given twice"),
            ("tenant=u", "tenant= is given twice"),
        ] {
            let text = format!("# c\n{A} db tenant=t\n{B} db tenant=t {setting}\n");
            let e = auth(&text).unwrap_err();
            assert!(e.starts_with("line 3: "), "{setting}: {e}");
            assert!(e.contains(expect), "{setting}: {e}");
        }
        let long = format!("{A} db tenant={}", "x".repeat(129));
        assert!(auth(&long).unwrap_err().contains("1 to 128 bytes"));
        assert!(auth(&format!("{A} db tenant={}", "x".repeat(128))).is_ok());
        for (text, expect) in [
            (
                format!("{A} db weight=2"),
                "line 1: a weight or a limit needs tenant=NAME",
            ),
            (
                format!("{A} db tenant=default max-inflight-jobs=3"),
                "line 1: the tenant `default` has weight 1 and no limits",
            ),
            (format!("{A} tenant=t"), "line 1: the keys"),
            (
                format!("{A} db tenant="),
                "line 1: a tenant name is 1 to 128 bytes",
            ),
            (
                format!("{A} db tenant=a/b"),
                "line 1: a tenant name is 1 to 128 bytes",
            ),
        ] {
            let e = auth(&text).unwrap_err();
            assert!(e.contains(expect), "{e}");
        }
        // A word that is not NAME=VALUE may be a token written in the wrong place: it is
        // never shown.
        let e = auth(&format!("{A} db {B}")).unwrap_err();
        assert!(e.contains("line 1: word 3 is not a setting"), "{e}");
        assert!(!e.contains(B) && !e.contains(A), "{e}");
    }

    #[test]
    fn sizes_take_decimal_and_binary_suffixes() {
        for (text, bytes) in [
            ("1", 1),
            ("65536", 65536),
            ("64B", 64),
            ("2k", 2000),
            ("2KB", 2000),
            ("2Ki", 2048),
            ("2KiB", 2048),
            ("2kib", 2048),
            ("200MB", 200_000_000),
            ("64MiB", 64 << 20),
            ("1G", 1_000_000_000),
            ("1GiB", 1 << 30),
            ("3TB", 3_000_000_000_000),
            ("1TiB", 1 << 40),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in [
            "", "0", "0MB", "K", "1.5MB", "1 MB", "-1", "1MiBB", "1PB", "1e6",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn malformed_lines_are_named_and_tokens_never_shown() {
        for (text, expect) in [
            (A.to_string(), "line 1"),
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

    #[test]
    fn the_example_in_deploy_parses() {
        let text = include_str!("../../../../deploy/tokens.example");
        let (a, specs) = register(Auth::parse(text, |_| true).unwrap());
        let names: Vec<&str> = specs.iter().map(TenantSpec::name).collect();
        assert_eq!(names, ["payments", "reports"], "{specs:?}");
        assert!(specs[0].get_weight() > 1);
        assert!(matches!(a, Auth::Tokens(ref t) if t.entries.len() >= 4));
    }
}
