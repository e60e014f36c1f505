//! What can go wrong running a packet through a cipher or a signature scheme.

use thiserror::Error;

use crate::crypto::Direction;
use crate::packet::Mode;

/// What can go wrong running a packet through a cipher or a signature scheme.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// An AES key must be 16, 24 or 32 bytes; an Ed25519 key 32 bytes.
    #[error("invalid key length {got} bytes for {algorithm}; expected {expected}")]
    KeyLength {
        /// The algorithm the key was meant for.
        algorithm: &'static str,
        /// The length given.
        got: usize,
        /// The accepted lengths.
        expected: &'static str,
    },
    /// The 32 bytes are not a valid Ed25519 public key (not a point on the curve).
    #[error("the bytes are not a valid Ed25519 verifying key")]
    InvalidVerifyingKey,
    /// The IV must be 16 bytes for CBC, OFB, CFB and CTR.
    #[error("invalid IV length {got} bytes; expected 16")]
    IvLength {
        /// The length given.
        got: usize,
    },
    /// ECB and CBC without padding, and every packet but a job's last, need whole 16-byte blocks.
    #[error("data length {len} is not a multiple of the 16-byte AES block")]
    NotBlockAligned {
        /// The length given.
        len: usize,
    },
    /// The buffer given for a padded final packet has no room for the padding.
    #[error("buffer of {got} bytes cannot hold the padded message of {need} bytes")]
    NoRoomForPadding {
        /// The buffer length.
        got: usize,
        /// The padded length needed.
        need: usize,
    },
    /// The length of the input is larger than the buffer it is said to be in.
    #[error("input length {len} exceeds the buffer of {buf} bytes")]
    LengthExceedsBuffer {
        /// The input length given.
        len: usize,
        /// The buffer length.
        buf: usize,
    },
    /// A GCM nonce must be 12 bytes (96 bits): the only size the service supports, the one
    /// NIST SP 800-38D recommends (the counter starts at nonce ‖ 0³¹1, docs/ALGORITHM.md §15.4).
    #[error("invalid GCM nonce length {got} bytes; expected 12")]
    NonceLength {
        /// The length given.
        got: usize,
    },
    /// A GCM tag must be 16 bytes (128 bits): shorter tags are not supported.
    #[error("invalid GCM tag length {got} bytes; expected 16")]
    TagLength {
        /// The length given.
        got: usize,
    },
    /// GCM decryption: the tag does not match the ciphertext, associated data, nonce and key.
    /// No plaintext is released.
    #[error("authentication failed: the GCM tag does not match")]
    AuthenticationFailed,
    /// GCM is an authenticated mode: it runs only as a GCM job (`Job::gcm_encrypt`,
    /// `Job::gcm_decrypt`, `AesKey::gcm_start`), not as a plain AES job, operation or stream.
    #[error(
        "GCM is an authenticated mode: submit it with Job::gcm_encrypt or Job::gcm_decrypt \
         (plain AES jobs and streams do not take it)"
    )]
    AuthenticatedMode,
    /// A GCM message may be at most 2³⁶ − 32 bytes (its 32-bit block counter must not wrap),
    /// its associated data at most 2⁶¹ − 1 bytes.
    #[error("message of {len} bytes is longer than the mode allows ({max} bytes)")]
    MessageTooLong {
        /// The length given.
        len: u64,
        /// The longest allowed.
        max: u64,
    },
    /// PKCS#7 padding was requested on decryption and the final block does not carry it.
    #[error("bad PKCS#7 padding on decryption")]
    BadPadding,
    /// Padding applies only to ECB and CBC (OFB, CFB, CTR and GCM are stream modes).
    #[error("padding is only defined for ECB and CBC")]
    PaddingNotApplicable,
    /// Only serial operations (see [`AesOp::is_serial`](crate::crypto::AesOp::is_serial)) run
    /// in lanes; ECB, CBC decryption and CFB decryption are parallel within one stream already.
    #[error("{mode} {direction:?} is parallel within a stream and does not run in lanes")]
    NotSerial {
        /// The mode of the refused packet.
        mode: Mode,
        /// Its direction.
        direction: Direction,
    },
    /// A lane set holds 1 to `max` packets.
    #[error("lane-set width {width} is out of range; expected 1 to {max}")]
    LaneWidth {
        /// The width given.
        width: usize,
        /// The widest set.
        max: usize,
    },
    /// The implementation asked for is not built into this library (its cargo feature is off)
    /// or cannot run this operation.
    #[error("implementation {implementation} cannot run {what}")]
    ImplementationUnavailable {
        /// The implementation asked for.
        implementation: &'static str,
        /// What it was asked to run.
        what: &'static str,
    },
    /// No implementation of AES has this name (`rustcrypto`, `lanes-<width>`, `aws-lc`, `ring`,
    /// `openssl`).
    #[error(
        "unknown AES implementation {name:?}; expected rustcrypto, lanes-<1..=64>, aws-lc, ring or openssl"
    )]
    UnknownImplementation {
        /// The name given.
        name: String,
    },
    /// A measurement needs a packet of at least one whole block, and whole blocks only.
    #[error(
        "cannot measure packets of {len} bytes: a whole, non-zero number of 16-byte blocks is needed"
    )]
    MeasurePacket {
        /// The packet size given.
        len: usize,
    },
    /// An Ed25519 signature is 64 bytes.
    #[error("invalid signature length {got} bytes; expected 64")]
    SignatureLength {
        /// The length given.
        got: usize,
    },
}
