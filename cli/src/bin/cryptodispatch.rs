//! `cryptodispatch`: an `openssl enc`-like command-line tool whose cryptography all runs through
//! the library's [`Service`](cryptodispatch::Service), so every byte crosses the scheduler.
//!
//! ```text
//! cryptodispatch enc    -alg aes-128-cbc -K <hex> -iv <hex> [-nopad] [-in FILE] [-out FILE]
//! cryptodispatch dec    -alg aes-128-cbc -K <hex> -iv <hex> [-nopad] [-in FILE] [-out FILE]
//! cryptodispatch enc    -alg aes-256-gcm -K <hex> [-iv <24 hex>] [-aad HEX | -aad-file FILE] ...
//! cryptodispatch dec    -alg aes-256-gcm -K <hex> [-aad HEX | -aad-file FILE] ...
//! cryptodispatch sign   -key SEED_FILE [-in FILE] [-out FILE]
//! cryptodispatch verify -key PUBLIC_KEY_FILE -sig SIG_FILE [-in FILE]
//! common options:       [--nodes N] [--policy NAME] [--packet-size BYTES]
//! on a daemon:          --remote URL -keyname NAME [--token-file F] [--cacert F] (instead of
//!                       -K or -key; see the `daemon_client` module)
//! ```
//!
//! - `enc`/`dec` take `aes-{128,192,256}-{ecb,cbc,ofb,cfb,ctr}` (CFB is CFB-128; CTR counts
//!   over the whole 128-bit block) and give output byte-identical to
//!   `openssl enc -aes-128-cbc -K .. -iv .. [-nopad]`: PKCS#7 padding for ECB and CBC unless
//!   `-nopad` (which OFB, CFB and CTR ignore, as openssl does). ECB takes no IV: one
//!   given draws openssl's warning and is ignored. The key must be exactly the key size (openssl
//!   pads a short key with zeros; this tool refuses it). The input is read in chunks of 64 KiB
//!   and fed to a [`Stream`](cryptodispatch::Stream) of the service in packets of the packet
//!   size, so input of any size runs in bounded memory; outputs are written in order.
//! - `aes-{128,192,256}-gcm` (which `openssl enc` refuses) seals the whole input as one GCM job
//!   and writes this tool's format: `CDGCM`, version byte 1, the 12-byte nonce, the ciphertext,
//!   the 16-byte tag (see the `gcm` module). The nonce is `-iv` (24 hex digits) or drawn from
//!   the OS; the associated data is `-aad HEX` or `-aad-file FILE` and is not stored.
//!   Decryption writes nothing unless the tag verifies (exit 1: "bad decrypt").
//! - `sign` writes the raw 64-byte Ed25519 signature for a raw 32-byte seed; `verify` prints
//!   `Signature Verified Successfully` (exit 0) or `Signature Verification Failure` (exit 1).
//!   A key or signature file of another size is refused without being read whole: a regular
//!   file by its length, anything else (a pipe) after one byte more than the size.
//! - `--nodes N` sets the size of the one cluster the command uses (AES for `enc`/`dec`,
//!   Ed25519 for `sign`/`verify`; default: the number of cores), node `i` pinned to core
//!   `i mod cores`; `--policy` and `--packet-size` are checked by the library.
//!
//! Files:
//!
//! - `-out FILE` is written to a temporary file beside it (`.FILE.tmp-PID`) that is renamed over
//!   `FILE` only when the command succeeds, so a failure (bad padding, found at the end of a
//!   decryption) leaves no partial output and an existing `FILE` as it was; its permission bits
//!   are kept. Standard output, and a `FILE` that is a device or a FIFO (`/dev/null`), are
//!   written as the output is produced: a failed decryption has then written all but its end,
//!   as with openssl. See the `output` module for the protocol.
//! - `-in` and `-out` naming the same regular file (by path, through a link, or as the same
//!   device and inode) is refused before anything is written: openssl would truncate the input
//!   before reading it.
//!
//! openssl's single-dash options (`-alg`, `-iv`, `-aad`, `-aad-file`, `-nopad`, `-in`, `-out`,
//! `-key`, `-sig`) and
//! the double-dash ones (`--alg`, ...; `-K` is also `--hex-key`) are both accepted: the
//! arguments are normalised before clap parses them (see the `argv` module).
//!
//! Exit status: 0 on success; 1 for a failure while processing (bad padding on decryption, data
//! that is not whole blocks with `-nopad`, a GCM tag that does not verify or input not in the
//! GCM format, an I/O error, a signature that does not verify); 2
//! for a usage error (unknown algorithm, bad hex, wrong key or IV length, a missing IV, an
//! unreadable input or key file, a key or signature file of the wrong size, `-out` naming a
//! file the command reads, an unknown policy, a bad packet size).

// The crate root is `src/bin/cryptodispatch.rs`, so its modules are found by path.
#[path = "cryptodispatch/argv.rs"]
mod argv;
#[path = "cryptodispatch/cipher.rs"]
mod cipher;
#[path = "cryptodispatch/daemon_client.rs"]
mod daemon_client;
#[path = "cryptodispatch/ed25519.rs"]
mod ed25519;
#[path = "cryptodispatch/gcm.rs"]
mod gcm;
#[path = "cryptodispatch/input.rs"]
mod input;
#[path = "cryptodispatch/output.rs"]
mod output;
#[cfg(feature = "daemon")]
#[allow(dead_code)]
#[path = "remote/mod.rs"]
mod remote;
#[path = "cryptodispatch/service.rs"]
mod service;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cryptodispatch::Direction;

use crate::cipher::CipherArgs;
use crate::ed25519::{SignArgs, VerifyArgs};
use crate::service::{CliError, EXIT_USAGE};

const ABOUT: &str =
    "AES (with CTR and GCM) and Ed25519 like `openssl enc`, run through cryptodispatch's scheduler";

const LONG_ABOUT: &str = "\
AES (ECB, CBC, OFB, CFB-128, CTR, GCM; 128/192/256-bit keys) and Ed25519, like `openssl enc`
and `openssl pkeyutl`, with all the cryptography run by a cryptodispatch service: worker
threads pinned to cores, fed by its two-level scheduler.

Output is byte-identical to openssl's for the same key, IV and data (CTR counts over the whole
128-bit block, as openssl's aes-*-ctr).

GCM (which openssl enc does not do) writes this tool's file format, version 1:
  bytes 0-4   magic \"CDGCM\"
  byte  5     version, 0x01
  bytes 6-17  the 12-byte nonce (-iv, 24 hex digits; drawn from the OS if not given)
  then        the ciphertext (as long as the plaintext), then the 16-byte tag.
The associated data (-aad HEX or -aad-file FILE, default none) is authenticated but not stored:
give the same to decrypt. Bytes 6.. are what other AES-GCM implementations take (nonce, then
ciphertext||tag). The input is read whole; decryption writes nothing unless the tag verifies
(exit 1, \"bad decrypt\"). openssl's single-dash
options (-alg, -iv, -nopad, -in, -out, -key, -sig, and -aes-128-cbc for -alg aes-128-cbc) are
accepted as well as the double-dash ones. Unlike openssl, a key or IV of the wrong length is
an error (openssl pads a short one with zeros). Keys given on the command line are visible to
other users of the machine, as with openssl.

An output file (-out) appears only if the command succeeds: it is written to a temporary file
beside it (.NAME.tmp-PID) and renamed over it at the end, so a failure such as bad padding
leaves no partial output and an existing file unchanged. Standard output and devices are
written as the data goes. -out may not name the same file as one the command reads (-in, -key,
-aad-file). Key and signature files of the wrong size are refused without being read whole.

With --remote URL, the command runs on a cryptodispatchd daemon instead, with the daemon's key
-keyname NAME (its bytes never leave the daemon), the token of --token-file, and for https the
CA of --cacert; the output is the same bytes. The daemon's key decides the AES key size.";

const EXAMPLES: &str = "\
Examples:
  # Encrypt and decrypt a file with AES-128-CBC and PKCS#7 padding (as openssl enc does):
  cryptodispatch enc -alg aes-128-cbc -K 000102030405060708090a0b0c0d0e0f \\
      -iv 0f0e0d0c0b0a09080706050403020100 -in plain.txt -out cipher.bin
  cryptodispatch dec -alg aes-128-cbc -K 000102030405060708090a0b0c0d0e0f \\
      -iv 0f0e0d0c0b0a09080706050403020100 -in cipher.bin -out plain.txt

  # AES-256-OFB from stdin to stdout on 3 nodes, with the HHS-ACDID policy, 4 KiB packets:
  cat data | cryptodispatch enc --alg aes-256-ofb --hex-key $(cat key.hex) --iv $(cat iv.hex) \\
      --nodes 3 --policy hhs-acdid --packet-size 4096 > data.enc

  # AES-256-CTR, byte-identical to `openssl enc -aes-256-ctr -K .. -iv ..`:
  cryptodispatch enc -alg aes-256-ctr -K $(cat key.hex) -iv 000102030405060708090a0b0c0d0e0f \\
      -in data -out data.ctr

  # AES-128-GCM with associated data; a random nonce is stored in the output:
  cryptodispatch enc -alg aes-128-gcm -K 000102030405060708090a0b0c0d0e0f -aad 686561646572 \\
      -in msg -out msg.gcm
  cryptodispatch dec -alg aes-128-gcm -K 000102030405060708090a0b0c0d0e0f -aad 686561646572 \\
      -in msg.gcm -out msg

  # ECB without padding (the input must be whole 16-byte blocks); ECB takes no IV:
  cryptodispatch enc -alg aes-192-ecb -K 000102030405060708090a0b0c0d0e0f1011121314151617 -nopad

  # Ed25519: sign with a raw 32-byte seed, verify with the raw 32-byte public key:
  cryptodispatch sign -key seed.bin -in msg.txt -out msg.sig
  cryptodispatch verify -key public.bin -sig msg.sig -in msg.txt

  # The same on a cryptodispatchd daemon, with its keys (by name) and a bearer token:
  cryptodispatch enc -alg aes-256-cbc -iv 000102030405060708090a0b0c0d0e0f \\
      --remote http://127.0.0.1:50051 -keyname demo --token-file tokens -in plain.txt
  cryptodispatch sign --remote https://crypto.example:443 --cacert ca.pem -keyname signer \\
      --token-file tokens -in msg.txt -out msg.sig

Exit status: 0 success; 1 processing failure (bad padding, data not whole blocks with -nopad,
a GCM tag that does not verify or a file not in the GCM format, I/O error, signature not
verified); 2 usage error.";

#[derive(Debug, Parser)]
#[command(
    name = "cryptodispatch",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Encrypt (like `openssl enc -aes-128-cbc -K .. -iv ..`)
    #[command(after_help = EXAMPLES)]
    Enc(CipherArgs),
    /// Decrypt (like `openssl enc -d -aes-128-cbc -K .. -iv ..`)
    #[command(after_help = EXAMPLES)]
    Dec(CipherArgs),
    /// Sign with Ed25519; writes the raw 64-byte signature
    #[command(after_help = EXAMPLES)]
    Sign(SignArgs),
    /// Verify an Ed25519 signature; exit 0 if it verifies, 1 if not
    #[command(after_help = EXAMPLES)]
    Verify(VerifyArgs),
}

fn run(cli: &Cli) -> Result<i32, CliError> {
    match &cli.command {
        Command::Enc(args) => cipher::run(Direction::Encrypt, args).map(|()| 0),
        Command::Dec(args) => cipher::run(Direction::Decrypt, args).map(|()| 0),
        Command::Sign(args) => ed25519::sign(args).map(|()| 0),
        Command::Verify(args) => ed25519::verify(args),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(argv::normalise(std::env::args_os())) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; usage errors to stderr with 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE as u8 } else { 0 });
        }
    };
    match run(&cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("cryptodispatch: {e}");
            if let CliError::Usage(_) = e {
                eprintln!("Try 'cryptodispatch --help' for more information.");
            }
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
