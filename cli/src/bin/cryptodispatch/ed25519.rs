//! `sign` and `verify`: Ed25519 through the service. A message is one packet (Ed25519 hashes
//! the whole message), so it is read whole and each node's capacity is raised to hold it.

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::Args;
use cryptodispatch::crypto::{KEY_LEN, SIGNATURE_LEN};
use cryptodispatch::{ClusterKind, Job, JobOutput, Service};

use crate::daemon_client::{self, RemoteArgs};
use crate::input::{open_input, read_exact_file};
use crate::output::{Output, refuse_same_file};
use crate::service::{CliError, EXIT_FAILURE, ServiceArgs, read_error, write_error};

/// What `verify` prints on success.
pub const VERIFIED: &str = "Signature Verified Successfully";
/// What `verify` prints on failure.
pub const NOT_VERIFIED: &str = "Signature Verification Failure";

/// The arguments of `sign`.
#[derive(Debug, Clone, Args)]
pub struct SignArgs {
    /// The signing key: a file holding the raw 32-byte Ed25519 seed (RFC 8032 secret key); a
    /// file of another size is refused without being read whole
    #[arg(
        long = "key",
        allow_hyphen_values = true,
        value_name = "FILE",
        required_unless_present = "keyname",
        conflicts_with = "keyname"
    )]
    pub key: Option<PathBuf>,

    /// The message [default: stdin]
    #[arg(long = "in", allow_hyphen_values = true, value_name = "FILE")]
    pub input: Option<PathBuf>,

    /// Where to write the raw 64-byte signature, replaced only when signing succeeds
    /// [default: stdout]; must not be the message or the key file
    #[arg(long = "out", allow_hyphen_values = true, value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub service: ServiceArgs,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// The arguments of `verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The public key: a file holding the raw 32-byte Ed25519 public key; a file of another
    /// size is refused without being read whole
    #[arg(
        long = "key",
        allow_hyphen_values = true,
        value_name = "FILE",
        required_unless_present = "keyname",
        conflicts_with = "keyname"
    )]
    pub key: Option<PathBuf>,

    /// The signature: a file holding the raw 64-byte signature; a file of another size is
    /// refused without being read whole
    #[arg(long = "sig", allow_hyphen_values = true, value_name = "FILE")]
    pub sig: PathBuf,

    /// The message [default: stdin]
    #[arg(long = "in", allow_hyphen_values = true, value_name = "FILE")]
    pub input: Option<PathBuf>,

    #[command(flatten)]
    pub service: ServiceArgs,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// Reads the whole message.
fn read_message(input: Option<&PathBuf>) -> Result<Vec<u8>, CliError> {
    let mut reader = open_input(input)?;
    let mut msg = Vec::new();
    reader.read_to_end(&mut msg).map_err(read_error)?;
    Ok(msg)
}

/// A service whose Ed25519 nodes can each hold a message of `len` bytes.
fn service_for(args: &ServiceArgs, len: usize) -> Result<Service, CliError> {
    args.build(ClusterKind::Ed25519, Some(len as u64))
}

/// Runs `sign`.
pub fn sign(args: &SignArgs) -> Result<(), CliError> {
    refuse_same_file(
        &[("in", args.input.as_deref()), ("key", args.key.as_deref())],
        args.output.as_deref(),
    )?;
    let key_file = match (&args.key, args.remote.remote.is_some()) {
        (_, true) | (None, _) => {
            return daemon_client::sign(
                &args.remote,
                args.input.as_deref(),
                args.output.as_deref(),
            );
        }
        (Some(path), false) => path,
    };
    let seed = read_exact_file("-key", key_file, KEY_LEN, "a raw Ed25519 seed")?;
    let msg = read_message(args.input.as_ref())?;
    let service = service_for(&args.service, msg.len())?;
    let key = service
        .add_signing_key(&seed)
        .map_err(|e| CliError::usage(format!("-key {}: {e}", key_file.display())))?;
    let sig = run_job(&service, Job::sign(key, msg))?
        .signature()
        .ok_or_else(|| CliError::failure("internal error: a sign job gave no signature"))?;
    let mut out = Output::create(args.output.as_deref())?;
    let written = out.write_all(&sig).map_err(write_error);
    out.finish(written)
}

/// Runs `verify`; `Ok(false)` when the signature does not verify.
pub fn verify(args: &VerifyArgs) -> Result<i32, CliError> {
    let key_file = match (&args.key, args.remote.remote.is_some()) {
        (_, true) | (None, _) => {
            return daemon_client::verify(&args.remote, &args.sig, args.input.as_deref());
        }
        (Some(path), false) => path,
    };
    let public = read_exact_file("-key", key_file, KEY_LEN, "a raw Ed25519 public key")?;
    let sig = read_exact_file("-sig", &args.sig, SIGNATURE_LEN, "a raw Ed25519 signature")?;
    let msg = read_message(args.input.as_ref())?;
    let service = service_for(&args.service, msg.len())?;
    let key = service
        .add_verifying_key(&public)
        .map_err(|e| CliError::usage(format!("-key {}: {e}", key_file.display())))?;
    let ok = run_job(&service, Job::verify(key, msg, &sig))?
        .verified()
        .ok_or_else(|| CliError::failure("internal error: a verify job gave no answer"))?;
    let mut stdout = std::io::stdout().lock();
    let line = if ok { VERIFIED } else { NOT_VERIFIED };
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(write_error)?;
    Ok(if ok { 0 } else { EXIT_FAILURE })
}

fn run_job(service: &Service, job: Job) -> Result<JobOutput, CliError> {
    service
        .submit(job)
        .map_err(|e| CliError::failure(format!("cannot submit the job: {e}")))?
        .wait()
        .map_err(|e| CliError::failure(format!("the job failed: {e}")))
}
