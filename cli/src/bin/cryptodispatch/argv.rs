//! Rewrites openssl's single-dash long options into clap's double-dash form before parsing.
//!
//! openssl spells its options with one dash (`-in`, `-iv`, `-nopad`); clap reads `-in` as the
//! short options `-i -n`. So before clap sees the arguments, each word that is exactly one of
//! the known single-dash options (or `-option=value`) is rewritten to `--option`
//! (`--option=value`), and openssl's cipher-as-flag spelling `-aes-128-cbc` becomes
//! `--alg=aes-128-cbc`. Nothing else changes:
//!
//! - a word that is the value of the option before it (`-out -in` writes to a file named
//!   `-in`) is left as it is, so only option positions are rewritten;
//! - everything after `--` is left as it is;
//! - `-K` stays clap's short option (its long form is `--hex-key`), and `-h`, `-V` are clap's;
//! - other words are passed through for clap to report; an unknown single-dash word such as
//!   `-bogus` is passed as `--bogus`, so that clap's error names it whole.

use std::ffi::OsString;

/// The openssl-style single-dash words, each rewritten to `--word`, and whether it takes a
/// value (so that the next word is a value and is never rewritten).
const SINGLE_DASH: &[(&str, bool)] = &[
    ("alg", true),
    ("iv", true),
    ("aad", true),
    ("aad-file", true),
    ("nopad", false),
    ("in", true),
    ("out", true),
    ("key", true),
    ("sig", true),
    ("nodes", true),
    ("policy", true),
    ("packet-size", true),
    ("hex-key", true),
    ("help", false),
    ("keyname", true),
    ("remote", true),
    ("token-file", true),
    ("cacert", true),
    ("client-cert", true),
    ("client-key", true),
];

/// Double-dash options that take a value.
const LONG_WITH_VALUE: &[&str] = &[
    "alg",
    "iv",
    "aad",
    "aad-file",
    "in",
    "out",
    "key",
    "sig",
    "hex-key",
    "nodes",
    "policy",
    "packet-size",
    "keyname",
    "remote",
    "token-file",
    "cacert",
    "client-cert",
    "client-key",
];

/// Short options that take a value (given as a separate word).
const SHORT_WITH_VALUE: &[&str] = &["-K"];

/// Rewrites the arguments (the first being the program name) as described in the module
/// documentation.
pub fn normalise<I>(args: I) -> Vec<OsString>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let mut args = args.into_iter().map(Into::into);
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    let mut value_next = false;
    while let Some(arg) = args.next() {
        if value_next {
            value_next = false;
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            out.push(arg);
            out.extend(args.by_ref());
            break;
        }
        if let Some(long) = s.strip_prefix("--") {
            value_next = !long.contains('=') && LONG_WITH_VALUE.contains(&long);
            out.push(arg);
            continue;
        }
        if SHORT_WITH_VALUE.contains(&s) {
            value_next = true;
            out.push(arg);
            continue;
        }
        let Some(word) = s.strip_prefix('-') else {
            out.push(arg);
            continue;
        };
        if word.starts_with("aes-") {
            out.push(format!("--alg={word}").into());
            continue;
        }
        let (name, value) = match word.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (word, None),
        };
        match SINGLE_DASH.iter().find(|(n, _)| *n == name) {
            Some(&(_, takes_value)) => {
                out.push(format!("-{s}").into());
                value_next = takes_value && value.is_none();
            }
            // An unknown openssl-style word: as `--word`, clap names it whole in its error
            // (and may suggest a close option) instead of complaining about its first letter.
            None if is_unknown_word(name) => out.push(format!("-{s}").into()),
            None => out.push(arg),
        }
    }
    out
}

/// Whether `name` (a word after one dash) looks like a long option rather than clap's short
/// options: two or more characters, starting with a letter other than the shorts `K`, `h`, `V`
/// (so `-K00ff...` stays a short option with its value attached).
fn is_unknown_word(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    first.is_ascii_alphabetic()
        && !matches!(first, 'K' | 'h' | 'V')
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::normalise;

    fn norm(args: &[&str]) -> Vec<String> {
        normalise(std::iter::once("prog").chain(args.iter().copied()))
            .into_iter()
            .skip(1)
            .map(|s| s.into_string().unwrap())
            .collect()
    }

    #[test]
    fn single_dash_words_become_double_dash() {
        assert_eq!(
            norm(&[
                "enc",
                "-alg",
                "aes-128-cbc",
                "-nopad",
                "-in",
                "a",
                "-out",
                "b"
            ]),
            [
                "enc",
                "--alg",
                "aes-128-cbc",
                "--nopad",
                "--in",
                "a",
                "--out",
                "b"
            ]
        );
        assert_eq!(
            norm(&["verify", "-key", "k", "-sig=s", "-help"]),
            ["verify", "--key", "k", "--sig=s", "--help"]
        );
    }

    #[test]
    fn values_are_never_rewritten() {
        // A file named "-in" as the value of -out, an IV after --iv, a key after -K.
        assert_eq!(
            norm(&["enc", "-out", "-in", "--iv", "-nopad", "-K", "-alg"]),
            ["enc", "--out", "-in", "--iv", "-nopad", "-K", "-alg"]
        );
        // With `=` the value is in the same word, so the next word is an option again.
        assert_eq!(
            norm(&["enc", "--in=x", "-nopad", "-iv=00", "-in", "y"]),
            ["enc", "--in=x", "--nopad", "--iv=00", "--in", "y"]
        );
    }

    #[test]
    fn short_and_unknown_options_and_terminator_pass_through() {
        assert_eq!(
            norm(&["enc", "-Kabcd", "-h", "-x", "-", "--", "-in"]),
            ["enc", "-Kabcd", "-h", "-x", "-", "--", "-in"]
        );
        // Unknown words are named whole in clap's error.
        assert_eq!(norm(&["enc", "-bogus", "-1"]), ["enc", "--bogus", "-1"]);
    }

    #[test]
    fn cipher_as_flag_becomes_alg() {
        assert_eq!(
            norm(&["dec", "-aes-256-ofb", "-K", "00"]),
            ["dec", "--alg=aes-256-ofb", "-K", "00"]
        );
    }
}
