//! `--remote URL`: the same commands run by a `cryptodispatchd` daemon, with its key
//! `-keyname NAME`, giving the same bytes as a local run.
//!
//! - `enc`/`dec`: an input of up to 1 MiB goes in one `Encrypt`/`Decrypt` call (retried on
//!   `UNAVAILABLE`); a larger one through the `Stream` call, read and sent in chunks of 64 KiB
//!   as the output comes back (not retried: part of the output may be written). The daemon's
//!   key decides AES-128, -192 or -256; `-alg` gives the mode (its key size is not checked
//!   against the daemon's key, whose bytes never leave the daemon).
//! - `sign`: the daemon's Ed25519 key signs; `verify`: checks with the daemon's key (its
//!   public half is the daemon's `GetPublicKey`).
//! - `--token-file F`: the bearer token (the first word of the first line that is not a
//!   comment), from a file private to its owner (chmod 600); `--cacert F`: the CA of the daemon's certificate, for `https://`;
//!   `--client-cert`/`--client-key`: this client's certificate for a daemon with `--client-ca`.
//!
//! - A daemon that does not answer (the connection's TLS or HTTP/2 set-up, an attempt of a
//!   call, or a stream's opening) within 30 s ends the command with exit 1.
//!
//! Exit status as for local runs: an unknown key name, and a URL or TLS options that cannot
//! work (a scheme other than `http://` or `https://`, `https` without `--cacert`, TLS files
//! with `http`), are usage errors (2); a token the daemon refuses (UNAUTHENTICATED,
//! PERMISSION_DENIED), a token file that group or others may read (refused before it is used),
//! and a failure while processing (bad padding, the daemon unreachable or overloaded) are 1.

use std::path::PathBuf;

use clap::Args;

/// The options of `--remote`.
#[derive(Debug, Clone, Default, Args)]
pub struct RemoteArgs {
    /// Run on a cryptodispatchd daemon: http://HOST:PORT for one run with
    /// --insecure-loopback, https://HOST:PORT otherwise (with --cacert)
    #[arg(long, value_name = "URL", requires = "keyname")]
    pub remote: Option<String>,

    /// The daemon's key to use, by name (with --remote; replaces -K or -key)
    #[arg(long = "keyname", value_name = "NAME", requires = "remote")]
    pub keyname: Option<String>,

    /// File holding the bearer token for the daemon
    #[arg(long = "token-file", value_name = "FILE", requires = "remote")]
    pub token_file: Option<PathBuf>,

    /// The CA certificate (PEM) that signed the daemon's certificate
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub cacert: Option<PathBuf>,

    /// This client's certificate (PEM), for a daemon that asks for one
    #[arg(long = "client-cert", value_name = "FILE", requires_all = ["remote", "client_key"])]
    pub client_cert: Option<PathBuf>,

    /// This client's private key (PEM)
    #[arg(long = "client-key", value_name = "FILE", requires_all = ["remote", "client_cert"])]
    pub client_key: Option<PathBuf>,
}

#[cfg(feature = "daemon")]
pub use with_daemon::{cipher, sign, verify};

#[cfg(not(feature = "daemon"))]
pub use without_daemon::{cipher, sign, verify};

#[cfg(not(feature = "daemon"))]
mod without_daemon {
    use std::path::Path;

    use cryptodispatch::AesOp;

    use super::RemoteArgs;
    use crate::service::CliError;

    fn unavailable() -> CliError {
        CliError::usage("--remote: this cryptodispatch was built without the `daemon` feature")
    }

    pub fn cipher(
        _: &RemoteArgs,
        _: AesOp,
        _: &[u8],
        _: Option<&Path>,
        _: Option<&Path>,
    ) -> Result<(), CliError> {
        Err(unavailable())
    }

    pub fn sign(_: &RemoteArgs, _: Option<&Path>, _: Option<&Path>) -> Result<(), CliError> {
        Err(unavailable())
    }

    pub fn verify(_: &RemoteArgs, _: &Path, _: Option<&Path>) -> Result<i32, CliError> {
        Err(unavailable())
    }
}

#[cfg(feature = "daemon")]
mod with_daemon {
    use std::io::{Read, Write};
    use std::path::Path;

    use cryptodispatch::crypto::SIGNATURE_LEN;
    use cryptodispatch::packet::Mode;
    use cryptodispatch::{AesOp, Direction, Padding};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;
    use tonic::{Code, Status};
    use zeroize::Zeroizing;

    use super::RemoteArgs;
    use crate::ed25519::{NOT_VERIFIED, VERIFIED};
    use crate::input::{open_input, read_exact_file, read_full};
    use crate::output::Output;
    use crate::remote::client::{
        Client, ClientConfig, TokenFileError, check_config, read_token_file,
    };
    use crate::remote::proto::{self, AesRequest, StreamRequest, StreamStart};
    use crate::service::{CliError, EXIT_FAILURE, read_error, write_error};

    /// Inputs up to this size go in one call.
    const UNARY_MAX: usize = 1 << 20;
    /// Chunks of a stream.
    const CHUNK: usize = 64 * 1024;
    /// The largest message accepted from the daemon.
    const MAX_MESSAGE: usize = 64 << 20;
    /// The longest the connection's set-up, each attempt of a call, or a stream's opening may
    /// wait for the daemon.
    const REMOTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

    fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::failure(format!("cannot start the async runtime: {e}")))
    }

    fn read_pem(option: &str, path: &Path) -> Result<Vec<u8>, CliError> {
        std::fs::read(path)
            .map_err(|e| CliError::usage(format!("{option} {}: {e}", path.display())))
    }

    async fn connect(args: &RemoteArgs) -> Result<Client, CliError> {
        let url = args.remote.clone().unwrap_or_default();
        let token = match &args.token_file {
            Some(path) => Some(read_token_file(path).map_err(|e| match e {
                // Not a mistake in the command line: the file must be fixed.
                TokenFileError::NotPrivate(m) => CliError::failure(format!("--token-file {m}")),
                TokenFileError::Unreadable(m) => CliError::usage(format!("--token-file {m}")),
            })?),
            None => None,
        };
        let ca_pem = match &args.cacert {
            Some(path) => Some(read_pem("--cacert", path)?),
            None => None,
        };
        let identity_pem = match (&args.client_cert, &args.client_key) {
            (Some(cert), Some(key)) => Some((
                read_pem("--client-cert", cert)?,
                Zeroizing::new(read_pem("--client-key", key)?),
            )),
            _ => None,
        };
        let config = ClientConfig {
            url,
            token,
            ca_pem,
            identity_pem,
            max_message_bytes: MAX_MESSAGE,
            timeout: Some(REMOTE_TIMEOUT),
            ..ClientConfig::default()
        };
        // A URL or TLS options that cannot work are the command line's mistake (exit 2); a
        // daemon out of reach is a failure (exit 1).
        check_config(&config).map_err(|e| CliError::usage(format!("--remote: {e}")))?;
        Client::connect(&config)
            .await
            .map_err(|e| CliError::failure(format!("--remote: {e}")))
    }

    /// The daemon's status as the CLI's error: an unknown key name is a usage error; a token
    /// refused (authentication, permission) or anything else a failure (exit 1).
    fn status_error(what: &str, s: Status) -> CliError {
        let message = s.message();
        match s.code() {
            Code::InvalidArgument if message.starts_with("bad decrypt") => {
                CliError::failure(message.to_owned())
            }
            Code::InvalidArgument => CliError::failure(format!("{what} failed: {message}")),
            Code::NotFound => CliError::usage(format!("--remote: {message}")),
            // tonic's decoder, before the daemon sees the call: a request past the daemon's
            // --max-request-bytes and the margin its decoder allows for the message's fields.
            Code::OutOfRange if message.contains("message length too large") => {
                CliError::failure(format!(
                    "{what} failed: the request is larger than the daemon accepts (its \
                     --max-request-bytes; {message})"
                ))
            }
            Code::PermissionDenied | Code::Unauthenticated => {
                CliError::failure(format!("--remote: the daemon refused the token: {message}"))
            }
            code => CliError::failure(format!("{what} failed on the daemon ({code:?}): {message}")),
        }
    }

    fn key_name(args: &RemoteArgs) -> String {
        args.keyname.clone().unwrap_or_default()
    }

    fn wire_mode(mode: Mode) -> i32 {
        let mode = match mode {
            Mode::Ecb => proto::Mode::Ecb,
            Mode::Cbc => proto::Mode::Cbc,
            Mode::Ofb => proto::Mode::Ofb,
            Mode::Cfb => proto::Mode::Cfb,
            Mode::Ctr => proto::Mode::Ctr,
            // GCM is refused before a call is made (see cipher.rs); the daemon refuses an
            // unspecified mode too.
            _ => proto::Mode::Unspecified,
        };
        mode as i32
    }

    fn wire_padding(padding: Padding) -> i32 {
        let padding = if padding == Padding::Pkcs7 {
            proto::Padding::Pkcs7
        } else {
            proto::Padding::None
        };
        padding as i32
    }

    /// `enc`/`dec` on the daemon.
    pub fn cipher(
        args: &RemoteArgs,
        op: AesOp,
        iv: &[u8],
        input: Option<&Path>,
        output: Option<&Path>,
    ) -> Result<(), CliError> {
        let what = match op.direction {
            Direction::Encrypt => "encryption",
            Direction::Decrypt => "decryption",
        };
        let mut reader = open_sendable(input)?;
        let mut head = vec![0u8; UNARY_MAX + 1];
        let n = read_full(&mut *reader, &mut head).map_err(read_error)?;
        head.truncate(n);
        let rt = runtime()?;
        let client = rt.block_on(connect(args))?;
        let mut out = Output::create(output)?;
        let result = if n <= UNARY_MAX {
            let request = AesRequest {
                key: key_name(args),
                mode: wire_mode(op.mode),
                iv: iv.to_vec(),
                padding: wire_padding(op.padding),
                data: head,
            };
            rt.block_on(async {
                match op.direction {
                    Direction::Encrypt => client.encrypt(request).await,
                    Direction::Decrypt => client.decrypt(request).await,
                }
            })
            .map_err(|s| status_error(what, s))
            .and_then(|data| out.write_all(&data).map_err(write_error))
        } else {
            let start = StreamStart {
                key: key_name(args),
                direction: match op.direction {
                    Direction::Encrypt => proto::Direction::Encrypt as i32,
                    Direction::Decrypt => proto::Direction::Decrypt as i32,
                },
                mode: wire_mode(op.mode),
                iv: iv.to_vec(),
                padding: wire_padding(op.padding),
            };
            rt.block_on(stream(&client, start, head, reader, &mut out))
                .map_err(|e| match e {
                    StreamError::Status(s) => status_error(what, s),
                    StreamError::Cli(e) => e,
                })
        };
        out.finish(result)
    }

    enum StreamError {
        Status(Status),
        Cli(CliError),
    }

    /// Feeds `head` then the rest of `reader` to a stream (a thread reads the input), and
    /// writes the outputs as they come.
    async fn stream(
        client: &Client,
        start: StreamStart,
        head: Vec<u8>,
        mut reader: Box<dyn Read + Send>,
        out: &mut Output,
    ) -> Result<(), StreamError> {
        let (tx, rx) = mpsc::channel::<StreamRequest>(4);
        let (err_tx, mut err_rx) = mpsc::channel::<CliError>(1);
        let mut start = Some(start);
        let mut first = Vec::new();
        for chunk in head.chunks(CHUNK) {
            first.push(StreamRequest {
                start: start.take(),
                chunk: chunk.to_vec(),
                last: false,
            });
        }
        let reader_thread = std::thread::spawn(move || {
            for message in first {
                if tx.blocking_send(message).is_err() {
                    return;
                }
            }
            loop {
                let mut buf = vec![0u8; CHUNK];
                match read_full(&mut *reader, &mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        buf.truncate(n);
                        let message = StreamRequest {
                            start: None,
                            chunk: buf,
                            last: false,
                        };
                        if tx.blocking_send(message).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = err_tx.blocking_send(read_error(e));
                        return;
                    }
                }
            }
        });
        let mut responses = client
            .stream(ReceiverStream::new(rx))
            .await
            .map_err(StreamError::Status)?;
        let mut ended = false;
        while let Some(response) = responses.message().await.map_err(StreamError::Status)? {
            out.write_all(&response.chunk)
                .map_err(|e| StreamError::Cli(write_error(e)))?;
            ended = response.last;
            if ended {
                break;
            }
        }
        let _ = reader_thread.join();
        if let Ok(e) = err_rx.try_recv() {
            return Err(StreamError::Cli(e));
        }
        if !ended {
            return Err(StreamError::Cli(CliError::failure(
                "the daemon ended the stream without its final message",
            )));
        }
        Ok(())
    }

    /// The input, as a reader another thread can own (standard input unlocked).
    fn open_sendable(input: Option<&Path>) -> Result<Box<dyn Read + Send>, CliError> {
        match input {
            Some(p) if p.as_os_str() != "-" => std::fs::File::open(p)
                .map(|f| Box::new(f) as Box<dyn Read + Send>)
                .map_err(|e| CliError::usage(format!("-in {}: {e}", p.display()))),
            _ => Ok(Box::new(std::io::stdin())),
        }
    }

    fn read_message(input: Option<&Path>) -> Result<Vec<u8>, CliError> {
        let path = input.map(Path::to_path_buf);
        let mut reader = open_input(path.as_ref())?;
        let mut msg = Vec::new();
        reader.read_to_end(&mut msg).map_err(read_error)?;
        Ok(msg)
    }

    /// `sign` on the daemon.
    pub fn sign(
        args: &RemoteArgs,
        input: Option<&Path>,
        output: Option<&Path>,
    ) -> Result<(), CliError> {
        let msg = read_message(input)?;
        let rt = runtime()?;
        let client = rt.block_on(connect(args))?;
        let sig = rt
            .block_on(client.sign(&key_name(args), msg))
            .map_err(|s| status_error("signing", s))?;
        let mut out = Output::create(output)?;
        let written = out.write_all(&sig).map_err(write_error);
        out.finish(written)
    }

    /// `verify` on the daemon: exit 0 if it verifies, 1 if not.
    pub fn verify(args: &RemoteArgs, sig: &Path, input: Option<&Path>) -> Result<i32, CliError> {
        let sig = read_exact_file("-sig", sig, SIGNATURE_LEN, "a raw Ed25519 signature")?;
        let msg = read_message(input)?;
        let rt = runtime()?;
        let client = rt.block_on(connect(args))?;
        let ok = rt
            .block_on(client.verify(&key_name(args), msg, sig.to_vec()))
            .map_err(|s| status_error("verification", s))?;
        let mut stdout = std::io::stdout().lock();
        let line = if ok { VERIFIED } else { NOT_VERIFIED };
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .map_err(write_error)?;
        Ok(if ok { 0 } else { EXIT_FAILURE })
    }
}
