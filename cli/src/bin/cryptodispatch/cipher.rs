//! `enc` and `dec`: AES through a [`Stream`] of the service, chunk by chunk; GCM as one job
//! (see the `gcm` module).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::str::FromStr;

use clap::Args;
use cryptodispatch::crypto::BLOCK;
use cryptodispatch::error::CryptoError;
use cryptodispatch::{
    AesOp, ClusterKind, Direction, JobError, Mode, Padding, Service, Stream, SubmitError,
};
use zeroize::Zeroizing;

use crate::daemon_client::{self, RemoteArgs};
use crate::gcm;
use crate::input::{open_input, read_full};
use crate::output::{Output, refuse_same_file};
use crate::service::{CliError, ServiceArgs, read_error, write_error};

/// Bytes read from the input at a time (rounded to a whole number of packets).
const READ_CHUNK: usize = 64 * 1024;
/// Bytes of packets handed to the service and not yet written out, at most (but at least two
/// packets).
const IN_FLIGHT_BYTES: usize = 4 << 20;
/// Packets in flight, at most (the service's receive queue holds 1024).
pub(crate) const MAX_IN_FLIGHT_PACKETS: usize = 1024;

/// An AES algorithm as openssl names it: `aes-128-cbc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Algorithm {
    /// Key length in bytes.
    pub key_len: usize,
    pub mode: Mode,
}

/// The names `--alg` accepts.
pub const ALGORITHMS: &str = "aes-128-ecb, aes-128-cbc, aes-128-ofb, aes-128-cfb, aes-128-ctr, \
     aes-128-gcm, aes-192-ecb, aes-192-cbc, aes-192-ofb, aes-192-cfb, aes-192-ctr, aes-192-gcm, \
     aes-256-ecb, aes-256-cbc, aes-256-ofb, aes-256-cfb, aes-256-ctr, aes-256-gcm";

impl FromStr for Algorithm {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        let parsed = lower.strip_prefix("aes-").and_then(|rest| {
            let (bits, mode) = rest.split_once('-')?;
            let key_len = match bits {
                "128" => 16,
                "192" => 24,
                "256" => 32,
                _ => return None,
            };
            let mode = match mode {
                "ecb" => Mode::Ecb,
                "cbc" => Mode::Cbc,
                "ofb" => Mode::Ofb,
                "cfb" => Mode::Cfb,
                "ctr" => Mode::Ctr,
                "gcm" => Mode::Gcm,
                _ => return None,
            };
            Some(Algorithm { key_len, mode })
        });
        parsed.ok_or_else(|| format!("unknown algorithm; expected one of: {ALGORITHMS}"))
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "aes-{}-{}", self.key_len * 8, self.mode)
    }
}

/// The arguments of `enc` and `dec`.
#[derive(Debug, Clone, Args)]
pub struct CipherArgs {
    /// Algorithm: aes-{128,192,256}-{ecb,cbc,ofb,cfb,ctr,gcm} (cfb is CFB-128; ctr counts over
    /// the whole 128-bit block, as openssl; gcm writes this tool's format, see --help); openssl's
    /// `-aes-128-cbc` spelling also works
    #[arg(long = "alg", value_name = "ALG", value_parser = Algorithm::from_str)]
    pub alg: Algorithm,

    /// Key in hex: exactly 32, 48 or 64 hex digits for AES-128, -192 or -256 (unlike openssl,
    /// a short key is an error, not padded with zeros)
    #[arg(
        short = 'K',
        long = "hex-key",
        allow_hyphen_values = true,
        value_name = "HEX",
        required_unless_present = "keyname",
        conflicts_with = "keyname"
    )]
    pub key: Option<String>,

    /// IV in hex, exactly 32 hex digits; required for CBC, OFB, CFB and CTR (the first counter
    /// block), not used by ECB (a warning). For GCM encryption: the 12-byte nonce, 24 hex
    /// digits, drawn from the OS if not given (never reuse a nonce with a key); GCM decryption
    /// reads it from the input
    #[arg(long = "iv", allow_hyphen_values = true, value_name = "HEX")]
    pub iv: Option<String>,

    /// GCM only: the associated data in hex (authenticated, not encrypted, not stored in the
    /// output: give the same to decrypt) [default: none]
    #[arg(
        long = "aad",
        allow_hyphen_values = true,
        value_name = "HEX",
        conflicts_with = "aad_file"
    )]
    pub aad: Option<String>,

    /// GCM only: a file whose whole contents are the associated data
    #[arg(long = "aad-file", allow_hyphen_values = true, value_name = "FILE")]
    pub aad_file: Option<PathBuf>,

    /// No PKCS#7 padding for ECB and CBC: the data must then be a whole number of 16-byte
    /// blocks (ignored for OFB, CFB, CTR and GCM, which are never padded)
    #[arg(long = "nopad")]
    pub nopad: bool,

    /// Input file [default: stdin]
    #[arg(long = "in", allow_hyphen_values = true, value_name = "FILE")]
    pub input: Option<PathBuf>,

    /// Output file, replaced only when the command succeeds (written to a temporary file beside
    /// it, then renamed) [default: stdout]; must not be the input or the -aad-file
    #[arg(long = "out", allow_hyphen_values = true, value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub service: ServiceArgs,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// Decodes hex for `option`, without echoing the text (it may be a key).
pub fn parse_hex(option: &str, text: &str) -> Result<Zeroizing<Vec<u8>>, CliError> {
    let digits = text.as_bytes();
    if digits.is_empty() {
        return Err(CliError::usage(format!("{option}: empty hex string")));
    }
    // A character that is not a digit first: counting the bytes of one outside ASCII would
    // report an odd length. Its place is given in characters, never the character itself.
    if let Some(place) = text.chars().position(|c| !c.is_ascii_hexdigit()) {
        return Err(CliError::usage(format!(
            "{option}: invalid hex digit at position {} (only 0-9, a-f, A-F are allowed)",
            place + 1
        )));
    }
    if digits.len() % 2 != 0 {
        return Err(CliError::usage(format!(
            "{option}: odd number of hex digits ({})",
            digits.len()
        )));
    }
    let nibble = |i: usize| -> Result<u8, CliError> {
        let c = digits[i];
        (c as char).to_digit(16).map(|d| d as u8).ok_or_else(|| {
            CliError::usage(format!(
                "{option}: invalid hex digit at position {} (only 0-9, a-f, A-F are allowed)",
                i + 1
            ))
        })
    };
    let mut out = Zeroizing::new(Vec::with_capacity(digits.len() / 2));
    for i in (0..digits.len()).step_by(2) {
        out.push(nibble(i)? << 4 | nibble(i + 1)?);
    }
    Ok(out)
}

/// Runs `enc` (`direction` Encrypt) or `dec`.
pub fn run(direction: Direction, args: &CipherArgs) -> Result<(), CliError> {
    refuse_same_file(
        &[
            ("in", args.input.as_deref()),
            ("aad-file", args.aad_file.as_deref()),
        ],
        args.output.as_deref(),
    )?;
    let alg = args.alg;
    if args.remote.remote.is_some() {
        if alg.mode == Mode::Gcm {
            return Err(CliError::usage(format!(
                "{alg}: GCM does not run through --remote yet; run it locally"
            )));
        }
        let (iv, op) = iv_and_op(direction, args)?;
        return daemon_client::cipher(
            &args.remote,
            op,
            &iv,
            args.input.as_deref(),
            args.output.as_deref(),
        );
    }
    let key = parse_hex("-K", args.key.as_deref().unwrap_or_default())?;
    if key.len() != alg.key_len {
        return Err(CliError::usage(format!(
            "-K: {alg} needs a {}-byte key ({} hex digits), got {} bytes; short keys are not \
             padded",
            alg.key_len,
            alg.key_len * 2,
            key.len()
        )));
    }
    if alg.mode == Mode::Gcm {
        return gcm::run(direction, args, alg, &key);
    }
    if args.aad.is_some() || args.aad_file.is_some() {
        return Err(CliError::usage(format!(
            "-aad, -aad-file: associated data is for GCM only, not {alg}"
        )));
    }
    let (iv, op) = iv_and_op(direction, args)?;

    let mut input = open_input(args.input.as_ref())?;
    let service = args.service.build(ClusterKind::Aes, None)?;
    let key = service
        .add_aes_key(&key)
        .map_err(|e| CliError::usage(format!("-K: {e}")))?;
    let stream = service
        .stream(key, op, &iv)
        .map_err(|e| CliError::usage(format!("{alg}: {e}")))?;
    let mut output = Output::create(args.output.as_deref())?;
    let result = pump(&service, stream, op, &mut *input, &mut output);
    output.finish(result)
}

/// The IV (checked against the mode; ECB's is dropped with a warning) and the operation.
fn iv_and_op(direction: Direction, args: &CipherArgs) -> Result<(Vec<u8>, AesOp), CliError> {
    let alg = args.alg;
    let iv = match (&args.iv, alg.mode.takes_iv()) {
        (Some(_), false) => {
            eprintln!("cryptodispatch: warning: iv not used by this cipher");
            Vec::new()
        }
        (None, false) => Vec::new(),
        (None, true) => {
            return Err(CliError::usage(format!(
                "{alg} needs an IV: give -iv with {} hex digits",
                BLOCK * 2
            )));
        }
        (Some(text), true) => {
            let iv = parse_hex("-iv", text)?;
            if iv.len() != BLOCK {
                return Err(CliError::usage(format!(
                    "-iv: the IV must be {BLOCK} bytes ({} hex digits), got {} bytes",
                    BLOCK * 2,
                    iv.len()
                )));
            }
            iv.to_vec()
        }
    };
    let padding = if alg.mode.needs_whole_blocks() && !args.nopad {
        Padding::Pkcs7
    } else {
        Padding::None
    };
    let op = AesOp::new(direction, alg.mode).with_padding(padding);
    Ok((iv, op))
}

/// Moves the input through the stream to the output.
///
/// Input is read a chunk at a time, one chunk ahead, so that the last chunk is known: it goes
/// to [`Stream::finish`] (for a padded decryption it holds the final block). Each chunk is
/// handed to the stream in packets of the service's packet size; at most a bounded number of
/// packets are in flight, and outputs are written in order as they come back.
///
/// Cutting at the packet size is also what keeps every stream chunk within a node's capacity
/// (8 packets by default): `Stream` sends each chunk as one packet and does not check its size,
/// so a larger chunk would be accepted by `push` and fail later as an internal error.
fn pump(
    service: &Service,
    stream: Stream,
    op: AesOp,
    input: &mut dyn Read,
    output: &mut dyn Write,
) -> Result<(), CliError> {
    let packet = service.packet_size();
    let chunk_len = (READ_CHUNK / packet).max(1) * packet;
    let max_in_flight = (IN_FLIGHT_BYTES / packet).clamp(2, MAX_IN_FLIGHT_PACKETS);
    let mut sink = Sink {
        stream,
        output,
        max_in_flight,
        op,
    };

    let mut total = 0usize;
    let mut current = vec![0u8; chunk_len];
    let mut next = vec![0u8; chunk_len];
    let mut current_len = read_full(input, &mut current).map_err(read_error)?;
    loop {
        total += current_len;
        let next_len = if current_len == chunk_len {
            read_full(input, &mut next).map_err(read_error)?
        } else {
            0
        };
        let data = &current[..current_len];
        if next_len == 0 {
            // `data` is the last chunk: all its packets but the last are pushed, the last
            // (possibly empty, possibly partial) finishes the stream.
            let last_start = if data.is_empty() {
                0
            } else {
                (data.len() - 1) / packet * packet
            };
            for p in data[..last_start].chunks(packet) {
                sink.push(p)?;
            }
            check_total(op, total)?;
            sink.finish(&data[last_start..])?;
            break;
        }
        for p in data.chunks(packet) {
            sink.push(p)?;
        }
        std::mem::swap(&mut current, &mut next);
        current_len = next_len;
    }
    sink.drain()
}

/// Refuses input that the mode cannot take, with the whole input's length in the message.
fn check_total(op: AesOp, total: usize) -> Result<(), CliError> {
    let whole_blocks = op.mode.needs_whole_blocks() && !op.pads_on_encrypt();
    if whole_blocks && total % BLOCK != 0 {
        let what = match op.direction {
            Direction::Encrypt => "the input",
            Direction::Decrypt => "the ciphertext",
        };
        let hint = if op.padding == Padding::None && op.direction == Direction::Encrypt {
            " (without -nopad the data is padded)"
        } else {
            ""
        };
        return Err(CliError::failure(format!(
            "{what} is {total} bytes, not a whole number of 16-byte blocks{hint}"
        )));
    }
    if op.padding == Padding::Pkcs7 && op.direction == Direction::Decrypt && total == 0 {
        return Err(CliError::failure(
            "bad decrypt: the ciphertext is empty, so it has no padded final block",
        ));
    }
    Ok(())
}

/// The stream and the output, with the bound on packets in flight.
struct Sink<'a> {
    stream: Stream,
    output: &'a mut dyn Write,
    max_in_flight: usize,
    op: AesOp,
}

impl Sink<'_> {
    fn push(&mut self, packet: &[u8]) -> Result<(), CliError> {
        while self.stream.pending() >= self.max_in_flight {
            self.write_next()?;
        }
        self.stream.push(packet).map_err(|e| self.submit_error(e))?;
        while let Some(out) = self.stream.try_recv() {
            self.write(out)?;
        }
        Ok(())
    }

    fn finish(&mut self, packet: &[u8]) -> Result<(), CliError> {
        while self.stream.pending() >= self.max_in_flight {
            self.write_next()?;
        }
        self.stream.finish(packet).map_err(|e| self.submit_error(e))
    }

    fn drain(&mut self) -> Result<(), CliError> {
        while self.stream.pending() > 0 {
            self.write_next()?;
        }
        Ok(())
    }

    fn write_next(&mut self) -> Result<(), CliError> {
        match self.stream.recv() {
            Some(out) => self.write(out),
            None => Ok(()),
        }
    }

    fn write(&mut self, out: Result<Vec<u8>, JobError>) -> Result<(), CliError> {
        let data = out.map_err(|e| self.job_error(e))?;
        self.output.write_all(&data).map_err(write_error)
    }

    fn job_error(&self, e: JobError) -> CliError {
        match e {
            JobError::Crypto(CryptoError::BadPadding) => CliError::failure(
                "bad decrypt: bad PKCS#7 padding in the final block (wrong key or IV, corrupted \
                 data, or data encrypted with -nopad)",
            ),
            other => CliError::failure(format!("{} failed: {other}", self.what())),
        }
    }

    fn submit_error(&self, e: SubmitError) -> CliError {
        match e {
            SubmitError::Crypto(CryptoError::BadPadding) => {
                self.job_error(JobError::Crypto(CryptoError::BadPadding))
            }
            other => CliError::failure(format!("{} failed: {other}", self.what())),
        }
    }

    fn what(&self) -> &'static str {
        match self.op.direction {
            Direction::Encrypt => "encryption",
            Direction::Decrypt => "decryption",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names() {
        for bits in [128, 192, 256] {
            for mode in Mode::ALL {
                let name = format!("aes-{bits}-{mode}");
                let alg: Algorithm = name.parse().unwrap();
                assert_eq!(alg.key_len * 8, bits);
                assert_eq!(alg.mode, mode);
                assert_eq!(alg.to_string(), name);
                assert!(ALGORITHMS.contains(&name));
            }
        }
        assert_eq!("AES-128-CBC".parse::<Algorithm>().unwrap().mode, Mode::Cbc);
        for bad in [
            "aes-128-xts",
            "aes-512-cbc",
            "aes128cbc",
            "",
            "des-cbc",
            "aes-128",
        ] {
            assert!(bad.parse::<Algorithm>().is_err(), "{bad}");
        }
    }

    #[test]
    fn hex() {
        assert_eq!(&**parse_hex("-K", "00ffA0").unwrap(), &[0, 255, 160]);
        for bad in ["", "0", "0g", "zz", "0x00"] {
            assert!(parse_hex("-K", bad).is_err(), "{bad}");
        }
        // A character outside ASCII is named as a bad digit by its place, not counted as two
        // bytes of an odd length, and not echoed.
        let e = parse_hex("-K", "00\u{e9}10").unwrap_err().to_string();
        assert!(e.contains("invalid hex digit at position 3"), "{e}");
        assert!(!e.contains('\u{e9}'), "{e}");
    }
}
