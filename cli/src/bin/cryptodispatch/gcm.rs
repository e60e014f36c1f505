//! `enc` and `dec` with `aes-{128,192,256}-gcm`: the whole input as one GCM job of the service,
//! written in this tool's file format (`openssl enc` refuses AEAD ciphers, so there is no
//! openssl format to follow).
//!
//! # The file format, version 1
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 5 | magic `CDGCM` (`43 44 47 43 4d`) |
//! | 5 | 1 | version, `01` |
//! | 6 | 12 | the nonce |
//! | 18 | n | the ciphertext, as long as the plaintext |
//! | 18 + n | 16 | the tag |
//!
//! The associated data is not stored: both sides give it (`-aad HEX` or `-aad-file FILE`;
//! empty by default). The nonce is authenticated (a changed nonce fails the tag); the magic and
//! version are checked, not authenticated. Bytes 6.. are exactly what other AES-GCM
//! implementations take: nonce, then ciphertext ‖ tag (Python's
//! `AESGCM(key).decrypt(data[6:18], data[18:], aad)`).
//!
//! The input is read whole and is one job: a decryption may release no plaintext before the
//! tag, at the end, has been checked (docs/ALGORITHM.md §15.4), so nothing is written before
//! the job succeeds; a failed decryption writes nothing at all, not even to standard output.

use std::io::{Read, Write};

use cryptodispatch::crypto::{MAX_TEXT_LEN, NONCE_LEN, TAG_LEN};
use cryptodispatch::error::CryptoError;
use cryptodispatch::{ClusterKind, Direction, Job, JobError, JobOutput};
use zeroize::Zeroizing;

use crate::cipher::{Algorithm, CipherArgs, parse_hex};
use crate::input::open_input;
use crate::output::Output;
use crate::service::{CliError, read_error, write_error};

/// The first five bytes of a file this tool seals.
pub const MAGIC: &[u8; 5] = b"CDGCM";
/// The format version this tool writes and reads.
pub const VERSION: u8 = 1;
/// Magic, version and nonce.
pub const HEADER_LEN: usize = MAGIC.len() + 1 + NONCE_LEN;

/// Runs `enc` or `dec` for a GCM algorithm, with the key already checked.
pub fn run(
    direction: Direction,
    args: &CipherArgs,
    alg: Algorithm,
    key: &Zeroizing<Vec<u8>>,
) -> Result<(), CliError> {
    let aad = associated_data(args)?;
    let nonce = match (direction, &args.iv) {
        (Direction::Encrypt, Some(text)) => {
            let nonce = parse_hex("-iv", text)?;
            if nonce.len() != NONCE_LEN {
                return Err(CliError::usage(format!(
                    "-iv: {alg} takes a {NONCE_LEN}-byte nonce ({} hex digits), got {} bytes",
                    NONCE_LEN * 2,
                    nonce.len()
                )));
            }
            nonce.to_vec()
        }
        (Direction::Encrypt, None) => {
            let mut nonce = vec![0u8; NONCE_LEN];
            getrandom::fill(&mut nonce)
                .map_err(|e| CliError::failure(format!("cannot draw a nonce from the OS: {e}")))?;
            nonce
        }
        (Direction::Decrypt, Some(_)) => {
            return Err(CliError::usage(format!(
                "-iv: {alg} decryption reads the nonce from the input (bytes 6..18); do not give \
                 -iv"
            )));
        }
        (Direction::Decrypt, None) => Vec::new(),
    };

    let input = read_input(args, direction)?;
    let service = args.service.build(ClusterKind::Aes, None)?;
    let key = service
        .add_aes_key(key)
        .map_err(|e| CliError::usage(format!("-K: {e}")))?;
    let mut output = Output::create(args.output.as_deref())?;
    let result = match direction {
        Direction::Encrypt => {
            let job = Job::gcm_encrypt(key, &nonce, aad, input);
            run_job(&service, job).and_then(|out| match out {
                JobOutput::Sealed { ciphertext, tag } => {
                    let mut header = Vec::with_capacity(HEADER_LEN);
                    header.extend_from_slice(MAGIC);
                    header.push(VERSION);
                    header.extend_from_slice(&nonce);
                    output
                        .write_all(&header)
                        .and_then(|()| output.write_all(&ciphertext))
                        .and_then(|()| output.write_all(&tag))
                        .map_err(write_error)
                }
                other => Err(unexpected(&other)),
            })
        }
        Direction::Decrypt => parse(&input).and_then(|file| {
            let job = Job::gcm_decrypt(key, file.nonce, aad, file.ciphertext.to_vec(), file.tag);
            run_job(&service, job).and_then(|out| match out {
                JobOutput::Data(plaintext) => {
                    let plaintext = Zeroizing::new(plaintext);
                    output.write_all(&plaintext).map_err(write_error)
                }
                other => Err(unexpected(&other)),
            })
        }),
    };
    output.finish(result)
}

/// The associated data: `-aad HEX`, the contents of `-aad-file FILE`, or nothing.
fn associated_data(args: &CipherArgs) -> Result<Vec<u8>, CliError> {
    match (&args.aad, &args.aad_file) {
        (Some(text), _) => Ok(parse_hex("-aad", text)?.to_vec()),
        (None, Some(path)) => std::fs::read(path)
            .map_err(|e| CliError::usage(format!("-aad-file {}: {e}", path.display()))),
        (None, None) => Ok(Vec::new()),
    }
}

/// Reads the whole input, refusing more than a GCM message may hold.
fn read_input(args: &CipherArgs, direction: Direction) -> Result<Vec<u8>, CliError> {
    let limit = match direction {
        Direction::Encrypt => MAX_TEXT_LEN,
        Direction::Decrypt => MAX_TEXT_LEN + (HEADER_LEN + TAG_LEN) as u64,
    };
    let mut data = Vec::new();
    open_input(args.input.as_ref())?
        .take(limit + 1)
        .read_to_end(&mut data)
        .map_err(read_error)?;
    if data.len() as u64 > limit {
        return Err(CliError::failure(format!(
            "the input is longer than a GCM message may be ({limit} bytes)"
        )));
    }
    Ok(data)
}

/// The parts of a sealed file.
#[derive(Debug, PartialEq, Eq)]
struct SealedFile<'a> {
    nonce: &'a [u8],
    ciphertext: &'a [u8],
    tag: &'a [u8],
}

/// Splits a sealed file into nonce, ciphertext and tag, checking its magic and version.
fn parse(data: &[u8]) -> Result<SealedFile<'_>, CliError> {
    let not_ours = |why: &str| {
        CliError::failure(format!(
            "the input is not a cryptodispatch GCM file ({why}); expected `CDGCM`, version 1, \
             a 12-byte nonce, the ciphertext and a 16-byte tag"
        ))
    };
    if data.len() < MAGIC.len() || &data[..MAGIC.len()] != MAGIC {
        return Err(not_ours("no CDGCM magic"));
    }
    if data.len() < HEADER_LEN + TAG_LEN {
        return Err(not_ours(&format!(
            "{} bytes, shorter than the {} of header and tag",
            data.len(),
            HEADER_LEN + TAG_LEN
        )));
    }
    if data[MAGIC.len()] != VERSION {
        return Err(not_ours(&format!("version {}", data[MAGIC.len()])));
    }
    let (nonce, rest) = data[MAGIC.len() + 1..].split_at(NONCE_LEN);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
    Ok(SealedFile {
        nonce,
        ciphertext,
        tag,
    })
}

fn run_job(service: &cryptodispatch::Service, job: Job) -> Result<JobOutput, CliError> {
    let handle = service
        .submit(job)
        .map_err(|e| CliError::failure(format!("cannot submit the job: {e}")))?;
    handle.wait().map_err(|e| match e {
        JobError::Crypto(CryptoError::AuthenticationFailed) => CliError::failure(
            "bad decrypt: authentication failed, the tag does not match (wrong key or \
             associated data, or the data was changed); nothing was written",
        ),
        other => CliError::failure(format!("the job failed: {other}")),
    })
}

fn unexpected(out: &JobOutput) -> CliError {
    let kind = match out {
        JobOutput::Data(_) => "data",
        JobOutput::Sealed { .. } => "a sealed message",
        _ => "another output",
    };
    CliError::failure(format!("internal error: the GCM job gave {kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_checks_magic_version_and_length() {
        let mut file = b"CDGCM\x01".to_vec();
        file.extend_from_slice(&[7; 12]);
        file.extend_from_slice(b"ct");
        file.extend_from_slice(&[9; 16]);
        assert_eq!(
            parse(&file).unwrap(),
            SealedFile {
                nonce: &[7; 12],
                ciphertext: b"ct",
                tag: &[9; 16]
            }
        );
        assert!(parse(&file[..33]).is_err(), "too short");
        assert!(parse(&file[..34]).is_ok(), "empty ciphertext");
        let mut v2 = file.clone();
        v2[5] = 2;
        assert!(parse(&v2).unwrap_err().to_string().contains("version 2"));
        assert!(
            parse(b"CDGCX\x01")
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
        assert!(parse(b"").is_err());
    }
}
