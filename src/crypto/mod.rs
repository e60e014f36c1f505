//! The work a node does: AES in five plain modes with the chaining state passed in and out,
//! AES-GCM with its GHASH state passed in and out, and Ed25519 signing and verification. All
//! primitives are RustCrypto's (`aes`, `cbc`, `ofb`, `cfb-mode`, `ctr`, `ghash`),
//! `ed25519-dalek`'s, with the `ring` feature (on by default) ring's AES-GCM, and with the
//! `aws-lc` feature AWS-LC's (`aws-lc-rs`); this module only
//! runs each packet from the chaining state it is given, hands the next state back, and keeps
//! keys safe (the runtime cuts jobs into packets).
//!
//! Nothing here knows about scheduling: a node takes a packet, the key, and the chaining state
//! its predecessor left, and hands back the output and the new state. For the serial modes
//! (CBC and CFB encryption, OFB) it can take packets of several jobs at once and interleave
//! them block by block in lanes ([`run_lanes`]), which keeps the AES unit busy where one
//! stream would wait on it.
//!
//! Which code runs a packet is a choice ([`AesImpl`]): RustCrypto, the lanes at a width, ring
//! (GCM; the `ring` feature) or AWS-LC (the `aws-lc` feature); all give the same bytes, and [`measure`] times them on the
//! machine so that the fastest can be picked per operation and packet size: an [`ImplTable`]
//! holds the pick, and a service's nodes run every AES packet on it.

mod aes;
#[cfg(feature = "aws-lc")]
mod awslc;
#[cfg(feature = "aws-lc")]
mod awslc_keys;
#[cfg(any(feature = "aws-lc", feature = "openssl"))]
mod by_iv;
mod choice;
mod ed25519;
mod error;
mod gcm;
mod impls;
mod lanes;
#[cfg(feature = "openssl")]
mod openssl_gcm;
#[cfg(feature = "openssl")]
mod openssl_modes;
#[cfg(feature = "ring")]
mod ring_gcm;
#[cfg(feature = "ring")]
mod ring_keys;
mod serial;
mod text;

pub use self::aes::{AesKey, AesOp, BLOCK, ChainState, Direction, Padding, padded_len};
pub use self::choice::{ImplChoice, ImplTable, op_name};
pub use self::ed25519::{
    BatchItem, KEY_LEN, SIGNATURE_LEN, SigningKey, VerifyingKey, verify_batch,
};
pub use self::error::CryptoError;
pub use self::gcm::{
    GcmState, MAX_AAD_LEN, MAX_TEXT_LEN, NONCE_LEN, TAG_LEN, Tag, check_nonce, check_tag,
    check_text_len,
};
pub use self::impls::{
    AesImpl, MEASURE_ROUNDS, Measured, measure, measure_rounds, run_packets_with,
};
pub use self::lanes::{
    DEFAULT_LANES, LANE_WIDTHS, LaneError, LaneItem, MAX_LANES, run_lanes, run_lanes_paused,
    run_lanes_width,
};
pub(crate) use self::text::Text;
