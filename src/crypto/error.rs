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
    /// The IV must be 16 bytes for CBC, OFB and CFB.
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
    /// PKCS#7 padding was requested on decryption and the final block does not carry it.
    #[error("bad PKCS#7 padding on decryption")]
    BadPadding,
    /// Padding applies only to ECB and CBC.
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
    /// An Ed25519 signature is 64 bytes.
    #[error("invalid signature length {got} bytes; expected 64")]
    SignatureLength {
        /// The length given.
        got: usize,
    },
}
