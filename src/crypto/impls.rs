//! Which code runs a packet: the implementations of AES a node can choose between, the entry
//! points that run a packet with a chosen one, and a measurement that times them.
//!
//! Every implementation gives the same bytes and hands on the same [`ChainState`] as
//! [`AesKey::process`]: a job may be cut into packets and each packet run by a different one
//! (the tests run the CAVP, Wycheproof and OpenSSL-format vectors, and the chaining splits,
//! through every implementation). They differ only in speed, which depends on the CPU, the
//! operation and the packet size, so [`measure`] times them on the machine itself.
//!
//! - [`AesImpl::RustCrypto`]: RustCrypto's `aes` (it picks AES-NI, VAES with AVX2, or VAES with
//!   AVX-512 at run time), its mode crates for the parallel operations, the single-stream loop
//!   (`serial.rs`) for the serial ones, and `ctr` + `ghash` for GCM.
//! - [`AesImpl::Lanes`]: the serial operations of `width` packets sharing a key, interleaved
//!   block by block ([`run_lanes_width`]); serial operations only.
//! - [`AesImpl::AwsLc`] (the `aws-lc` feature): AWS-LC's assembly through `aws-lc-rs`; GCM
//!   seals or opens a whole message in one call, so it runs GCM jobs of one packet only (a job
//!   cut into packets keeps its GHASH state on the RustCrypto path).
//! - [`AesImpl::Ring`] (the `ring` feature, on by default): ring's AES-GCM assembly (VAES and
//!   VPCLMULQDQ where the CPU has them), GCM jobs of one packet only, sealed or opened in one
//!   call; AES-192, which ring lacks, runs on the RustCrypto path.
//! - [`AesImpl::OpenSsl`] (the `openssl` feature): the system's OpenSSL, every plain mode
//!   through its EVP API (`openssl_modes.rs`), and GCM, both whole jobs of one packet and the
//!   packets of a job cut into several: its cipher context is a GCM state that goes on from
//!   packet to packet ([`AesKey::gcm_start_with`]), so a long job's GHASH chain runs on
//!   OpenSSL's stitched AES-NI + CLMUL code rather than RustCrypto's.

use std::fmt;
use std::hint::black_box;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::crypto::aes::{AesKey, AesOp, BLOCK, ChainState, Direction, padded_len};
use crate::crypto::error::CryptoError;
use crate::crypto::gcm::{GcmState, NONCE_LEN, Tag, check_text_len};
#[cfg(feature = "openssl")]
use crate::crypto::gcm::{check_aad_len, check_nonce};
#[cfg(any(feature = "ring", feature = "aws-lc"))]
use crate::crypto::gcm::{open_whole, seal_whole};
use crate::crypto::lanes::{LANE_WIDTHS, LaneError, LaneItem, check_width, run_lanes_width};
use crate::crypto::text::check_same_len;
use crate::packet::Mode;

/// An implementation of AES a packet can run on. All give byte-identical results; see the
/// module notes for what each is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AesImpl {
    /// RustCrypto's `aes` with its run-time choice of AES-NI or VAES backend: the mode crates,
    /// the single-stream loop for serial operations, `ctr` + `ghash` for GCM. Always built.
    RustCrypto,
    /// Lane sets of up to `width` packets of a serial operation (CBC and CFB encryption, OFB)
    /// sharing a key, interleaved block by block ([`run_lanes_width`]). Widths 1 to
    /// [`MAX_LANES`](crate::crypto::MAX_LANES); the measurement tries
    /// [`LANE_WIDTHS`](crate::crypto::LANE_WIDTHS).
    Lanes {
        /// The most packets interleaved in one set.
        width: usize,
    },
    /// AWS-LC through `aws-lc-rs` (the `aws-lc` cargo feature): every plain mode through its
    /// cipher API, and GCM jobs of one packet sealed or opened in one call.
    AwsLc,
    /// ring (the `ring` cargo feature, on by default): GCM jobs of one packet sealed or opened
    /// in one call. GCM only; a key of 24 bytes, which ring does not take, runs on RustCrypto.
    Ring,
    /// The system's OpenSSL (the `openssl` cargo feature): every plain mode through its EVP
    /// API, and GCM, whole jobs of one packet and the packets of a job cut into several, its
    /// cipher context handed from packet to packet as the job's GCM state.
    OpenSsl,
}

impl fmt::Display for AesImpl {
    /// `rustcrypto`, `lanes-<width>`, `aws-lc`, `ring` or `openssl`, as [`FromStr`] reads them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AesImpl::RustCrypto => f.write_str("rustcrypto"),
            AesImpl::Lanes { width } => write!(f, "lanes-{width}"),
            AesImpl::AwsLc => f.write_str("aws-lc"),
            AesImpl::Ring => f.write_str("ring"),
            AesImpl::OpenSsl => f.write_str("openssl"),
        }
    }
}

impl FromStr for AesImpl {
    type Err = CryptoError;

    /// Reads `rustcrypto`, `lanes-<width>` (1 to 64), `aws-lc`, `ring` or `openssl`.
    ///
    /// # Errors
    /// [`CryptoError::UnknownImplementation`] for anything else, [`CryptoError::LaneWidth`]
    /// for a width out of range.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rustcrypto" => Ok(AesImpl::RustCrypto),
            "aws-lc" => Ok(AesImpl::AwsLc),
            "ring" => Ok(AesImpl::Ring),
            "openssl" => Ok(AesImpl::OpenSsl),
            _ => {
                let width = s
                    .strip_prefix("lanes-")
                    .and_then(|w| w.parse::<usize>().ok())
                    .ok_or_else(|| CryptoError::UnknownImplementation { name: s.to_owned() })?;
                check_width(width)?;
                Ok(AesImpl::Lanes { width })
            }
        }
    }
}

impl AesImpl {
    /// Whether this implementation runs a packet of `op` from one buffer into another
    /// ([`AesKey::process_between_with`]) rather than on a copy of it: ECB, CBC decryption and
    /// CTR ([`AesOp::runs_between`]) on RustCrypto and OpenSSL, CTR and CBC decryption on
    /// AWS-LC (whose streaming keys take an input and an output, but in ECB pad only).
    pub(crate) fn runs_between(self, op: AesOp) -> bool {
        op.runs_between()
            && match self {
                AesImpl::RustCrypto | AesImpl::OpenSsl => true,
                AesImpl::AwsLc => matches!(op.mode, Mode::Ctr | Mode::Cbc),
                AesImpl::Lanes { .. } | AesImpl::Ring => false,
            }
    }

    /// Whether this implementation seals and opens a whole GCM message from one buffer into
    /// another ([`AesKey::gcm_seal_between_with`]) rather than on a copy of it: AWS-LC's, with
    /// the `aws-lc` feature.
    pub(crate) fn seals_between(self) -> bool {
        cfg!(feature = "aws-lc") && self == AesImpl::AwsLc
    }

    /// Every implementation built into this library: RustCrypto, the lanes at each of
    /// [`LANE_WIDTHS`](crate::crypto::LANE_WIDTHS), AWS-LC with the `aws-lc` feature, ring
    /// with the `ring` feature, and OpenSSL with the `openssl` feature.
    pub fn all() -> Vec<AesImpl> {
        let mut all = vec![AesImpl::RustCrypto];
        all.extend(LANE_WIDTHS.iter().map(|&width| AesImpl::Lanes { width }));
        if cfg!(feature = "aws-lc") {
            all.push(AesImpl::AwsLc);
        }
        if cfg!(feature = "ring") {
            all.push(AesImpl::Ring);
        }
        if cfg!(feature = "openssl") {
            all.push(AesImpl::OpenSsl);
        }
        all
    }

    /// Whether this implementation is built into this library (AWS-LC only with the `aws-lc`
    /// feature, ring only with the `ring` feature, OpenSSL only with the `openssl` feature)
    /// and, for the lanes, has a width in range.
    pub fn is_built(&self) -> bool {
        match self {
            AesImpl::RustCrypto => true,
            AesImpl::Lanes { width } => check_width(*width).is_ok(),
            AesImpl::AwsLc => cfg!(feature = "aws-lc"),
            AesImpl::Ring => cfg!(feature = "ring"),
            AesImpl::OpenSsl => cfg!(feature = "openssl"),
        }
    }

    /// Whether this implementation can run `op`: the lanes run only serial operations, ring
    /// only GCM (a GCM operation, [`Mode::Gcm`], is a whole one-packet job, which RustCrypto,
    /// AWS-LC, ring and OpenSSL run; the packets of a job cut into several are
    /// [`chains_gcm`](Self::chains_gcm)'s).
    pub fn runs(&self, op: AesOp) -> bool {
        self.is_built()
            && match self {
                AesImpl::Lanes { .. } => op.is_serial(),
                AesImpl::Ring => op.mode.is_authenticated(),
                AesImpl::RustCrypto | AesImpl::AwsLc | AesImpl::OpenSsl => true,
            }
    }

    /// The implementations of [`all`](Self::all) that run `op`: what [`measure`] times.
    pub fn candidates(op: AesOp) -> Vec<AesImpl> {
        AesImpl::all().into_iter().filter(|i| i.runs(op)).collect()
    }

    /// Whether this implementation is built and can run the packets of a GCM job cut into
    /// several, handing a [`GcmState`](crate::crypto::GcmState) from packet to packet
    /// ([`AesKey::gcm_start_with`]): RustCrypto, and OpenSSL with its feature. ring and AWS-LC
    /// seal or open a whole message in one call only.
    pub fn chains_gcm(&self) -> bool {
        self.is_built() && matches!(self, AesImpl::RustCrypto | AesImpl::OpenSsl)
    }

    /// The implementations of [`all`](Self::all) that [`chains_gcm`](Self::chains_gcm): what
    /// [`ImplTable::gcm_chain`](crate::crypto::ImplTable::gcm_chain) chooses among.
    pub fn gcm_chain_candidates() -> Vec<AesImpl> {
        AesImpl::all()
            .into_iter()
            .filter(|i| i.chains_gcm())
            .collect()
    }

    pub(super) fn unavailable(self, what: &'static str) -> CryptoError {
        CryptoError::ImplementationUnavailable {
            implementation: match self {
                AesImpl::RustCrypto => "rustcrypto",
                AesImpl::Lanes { .. } => "lanes",
                AesImpl::AwsLc => "aws-lc",
                AesImpl::Ring => "ring",
                AesImpl::OpenSsl => "openssl",
            },
            what,
        }
    }
}

impl AesKey {
    /// [`process_between`](Self::process_between) on `implementation`: the packets it runs
    /// between two buffers ([`AesImpl::runs_between`]) and does not pad here run from `input`
    /// into `output`; any other packet runs [`process_with`](Self::process_with) on a copy of
    /// `input` in `output`. The same output and state handed on either way.
    ///
    /// # Errors
    /// As [`process_with`](Self::process_with), and [`CryptoError::LengthExceedsBuffer`]
    /// unless `output` is as long as `input`.
    pub(crate) fn process_between_with(
        &self,
        implementation: AesImpl,
        op: AesOp,
        state: &mut ChainState,
        (input, output): (&[u8], &mut [u8]),
        len: usize,
        last: bool,
    ) -> Result<usize, CryptoError> {
        #[cfg(any(feature = "openssl", feature = "aws-lc"))]
        let between = implementation.runs_between(op) && !(last && op.pads_on_encrypt());
        match implementation {
            AesImpl::RustCrypto => {
                return self.process_between(op, state, input, output, len, last);
            }
            #[cfg(feature = "openssl")]
            AesImpl::OpenSsl if between => {
                let Some(key) = &self.openssl else {
                    return self.process_between(op, state, input, output, len, last);
                };
                return key.process_between(op, state, (input, output), len, last);
            }
            #[cfg(feature = "aws-lc")]
            AesImpl::AwsLc if between => {
                return self
                    .aws_lc
                    .process_between(op, state, (input, output), len, last);
            }
            _ => {}
        }
        check_same_len(input, output)?;
        output.copy_from_slice(input);
        self.process_with(implementation, op, state, output, len, last)
    }

    /// Runs one packet in place on `implementation`: the same contract, checks, output and
    /// state handed on as [`AesKey::process`], which is [`AesImpl::RustCrypto`]. A packet alone
    /// on [`AesImpl::Lanes`] runs on the single-stream loop, as [`run_lanes`] runs a packet
    /// alone with its key; lane sets are run by [`run_packets_with`].
    ///
    /// [`run_lanes`]: crate::crypto::run_lanes
    ///
    /// # Errors
    /// As [`AesKey::process`]; [`CryptoError::NotSerial`] for a parallel operation on the
    /// lanes, [`CryptoError::LaneWidth`] for a width out of range,
    /// [`CryptoError::ImplementationUnavailable`] for AWS-LC without the `aws-lc` feature and
    /// for ring, which runs GCM only, and for OpenSSL without the `openssl` feature.
    pub fn process_with(
        &self,
        implementation: AesImpl,
        op: AesOp,
        state: &mut ChainState,
        buf: &mut [u8],
        len: usize,
        last: bool,
    ) -> Result<usize, CryptoError> {
        match implementation {
            AesImpl::RustCrypto => self.process(op, state, buf, len, last),
            AesImpl::Lanes { width } => {
                check_width(width)?;
                if !op.is_serial() && !op.mode.is_authenticated() {
                    return Err(CryptoError::NotSerial {
                        mode: op.mode,
                        direction: op.direction,
                    });
                }
                self.process(op, state, buf, len, last)
            }
            AesImpl::AwsLc => {
                #[cfg(feature = "aws-lc")]
                {
                    self.aws_lc.process(op, state, buf, len, last)
                }
                #[cfg(not(feature = "aws-lc"))]
                {
                    let _ = (op, state, buf, len, last);
                    Err(implementation.unavailable("a packet (the aws-lc feature is off)"))
                }
            }
            AesImpl::Ring => {
                Err(implementation.unavailable("a packet of a plain mode (ring runs GCM only)"))
            }
            AesImpl::OpenSsl => {
                #[cfg(feature = "openssl")]
                {
                    match &self.openssl {
                        Some(key) => key.process(op, state, buf, len, last),
                        None => self.process(op, state, buf, len, last),
                    }
                }
                #[cfg(not(feature = "openssl"))]
                {
                    let _ = (op, state, buf, len, last);
                    Err(implementation.unavailable("a packet (the openssl feature is off)"))
                }
            }
        }
    }

    /// [`AesKey::one_shot`] on `implementation`: a whole job as one packet.
    ///
    /// # Errors
    /// As [`AesKey::one_shot`] and [`AesKey::process_with`].
    pub fn one_shot_with(
        &self,
        implementation: AesImpl,
        op: AesOp,
        iv: &[u8],
        data: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        let mut state = ChainState::for_mode(op.mode, iv)?;
        let mut buf = data.to_vec();
        if op.pads_on_encrypt() {
            buf.resize(padded_len(data.len()), 0);
        }
        let n = self.process_with(implementation, op, &mut state, &mut buf, data.len(), true)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Seals a whole GCM message (a job of one packet) in place on `implementation` and
    /// returns its tag: AWS-LC and ring in one call, RustCrypto through the packet path
    /// ([`gcm_start`](Self::gcm_start) + [`gcm_seal_final`](Self::gcm_seal_final)). On ring,
    /// an AES-192 key (which ring does not take) runs on RustCrypto.
    ///
    /// # Errors
    /// [`CryptoError::NonceLength`], [`CryptoError::MessageTooLong`];
    /// [`CryptoError::ImplementationUnavailable`] on the lanes, or on AWS-LC or ring without
    /// its feature.
    pub fn gcm_seal_in_place_with(
        &self,
        implementation: AesImpl,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<Tag, CryptoError> {
        match implementation {
            AesImpl::RustCrypto => {
                check_text_len(buf.len())?;
                let state = self.gcm_start(nonce, aad)?;
                self.gcm_seal_final(state, buf)
            }
            AesImpl::Ring => {
                #[cfg(feature = "ring")]
                {
                    match &self.ring {
                        Some(ring) => seal_whole(&**ring, nonce, aad, buf),
                        None => self.gcm_seal_in_place_with(AesImpl::RustCrypto, nonce, aad, buf),
                    }
                }
                #[cfg(not(feature = "ring"))]
                {
                    let _ = (nonce, aad, buf);
                    Err(implementation.unavailable("GCM (the ring feature is off)"))
                }
            }
            AesImpl::OpenSsl => {
                check_text_len(buf.len())?;
                let state = self.gcm_start_with(implementation, Direction::Encrypt, nonce, aad)?;
                self.gcm_seal_final(state, buf)
            }
            AesImpl::Lanes { .. } => Err(implementation.unavailable("GCM")),
            AesImpl::AwsLc => {
                #[cfg(feature = "aws-lc")]
                {
                    seal_whole(&*self.aws_lc, nonce, aad, buf)
                }
                #[cfg(not(feature = "aws-lc"))]
                {
                    let _ = (nonce, aad, buf);
                    Err(implementation.unavailable("GCM (the aws-lc feature is off)"))
                }
            }
        }
    }

    /// Opens a whole GCM message (a job of one packet) in place on `implementation`; no
    /// plaintext unless the tag matches. On a mismatch RustCrypto leaves `buf` as the
    /// ciphertext; AWS-LC and ring zero it (they may have decrypted before comparing). On ring,
    /// an AES-192 key runs on RustCrypto.
    ///
    /// # Errors
    /// [`CryptoError::NonceLength`], [`CryptoError::TagLength`],
    /// [`CryptoError::MessageTooLong`], [`CryptoError::AuthenticationFailed`];
    /// [`CryptoError::ImplementationUnavailable`] as for
    /// [`gcm_seal_in_place_with`](Self::gcm_seal_in_place_with).
    pub fn gcm_open_in_place_with(
        &self,
        implementation: AesImpl,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        match implementation {
            AesImpl::RustCrypto => {
                check_text_len(buf.len())?;
                let state = self.gcm_start(nonce, aad)?;
                self.gcm_open_final(state, buf, tag)
            }
            AesImpl::Ring => {
                #[cfg(feature = "ring")]
                {
                    match &self.ring {
                        Some(ring) => open_whole(&**ring, nonce, aad, buf, tag),
                        None => {
                            self.gcm_open_in_place_with(AesImpl::RustCrypto, nonce, aad, buf, tag)
                        }
                    }
                }
                #[cfg(not(feature = "ring"))]
                {
                    let _ = (nonce, aad, buf, tag);
                    Err(implementation.unavailable("GCM (the ring feature is off)"))
                }
            }
            AesImpl::OpenSsl => {
                check_text_len(buf.len())?;
                let state = self.gcm_start_with(implementation, Direction::Decrypt, nonce, aad)?;
                self.gcm_open_final(state, buf, tag)
            }
            AesImpl::Lanes { .. } => Err(implementation.unavailable("GCM")),
            AesImpl::AwsLc => {
                #[cfg(feature = "aws-lc")]
                {
                    open_whole(&*self.aws_lc, nonce, aad, buf, tag)
                }
                #[cfg(not(feature = "aws-lc"))]
                {
                    let _ = (nonce, aad, buf, tag);
                    Err(implementation.unavailable("GCM (the aws-lc feature is off)"))
                }
            }
        }
    }

    /// [`gcm_seal_in_place_with`](Self::gcm_seal_in_place_with) from `input` into `output`, as
    /// long: on an implementation that [seals between two buffers](AesImpl::seals_between) in
    /// one call from one to the other, on any other in place on a copy of `input` in `output`.
    /// `input` is left as it was either way.
    ///
    /// # Errors
    /// As [`gcm_seal_in_place_with`](Self::gcm_seal_in_place_with), and
    /// [`CryptoError::LengthExceedsBuffer`] unless `output` is as long as `input`.
    pub(crate) fn gcm_seal_between_with(
        &self,
        implementation: AesImpl,
        nonce: &[u8],
        aad: &[u8],
        (input, output): (&[u8], &mut [u8]),
    ) -> Result<Tag, CryptoError> {
        #[cfg(feature = "aws-lc")]
        if implementation.seals_between() {
            return self.aws_lc.gcm_seal_between(nonce, aad, (input, output));
        }
        check_same_len(input, output)?;
        output.copy_from_slice(input);
        self.gcm_seal_in_place_with(implementation, nonce, aad, output)
    }

    /// [`gcm_open_in_place_with`](Self::gcm_open_in_place_with) from `input` into `output`, as
    /// [`gcm_seal_between_with`](Self::gcm_seal_between_with) seals; on a tag mismatch
    /// `output` holds no plaintext.
    ///
    /// # Errors
    /// As [`gcm_open_in_place_with`](Self::gcm_open_in_place_with), and
    /// [`CryptoError::LengthExceedsBuffer`] unless `output` is as long as `input`.
    pub(crate) fn gcm_open_between_with(
        &self,
        implementation: AesImpl,
        nonce: &[u8],
        aad: &[u8],
        tag: &[u8],
        (input, output): (&[u8], &mut [u8]),
    ) -> Result<(), CryptoError> {
        #[cfg(feature = "aws-lc")]
        if implementation.seals_between() {
            return self
                .aws_lc
                .gcm_open_between(nonce, aad, tag, (input, output));
        }
        check_same_len(input, output)?;
        output.copy_from_slice(input);
        self.gcm_open_in_place_with(implementation, nonce, aad, output, tag)
    }

    /// Starts a GCM job whose packets run on `implementation`, sealing or opening as
    /// `direction` says: [`gcm_start`](Self::gcm_start) on RustCrypto; on OpenSSL a cipher
    /// context, which then runs every packet the state goes through ([`gcm_update`],
    /// [`gcm_seal_final`], [`gcm_open_final`], each in the same direction). Either state gives
    /// the same bytes and tag.
    ///
    /// [`gcm_update`]: Self::gcm_update
    /// [`gcm_seal_final`]: Self::gcm_seal_final
    /// [`gcm_open_final`]: Self::gcm_open_final
    ///
    /// # Errors
    /// As [`gcm_start`](Self::gcm_start); [`CryptoError::ImplementationUnavailable`] for an
    /// implementation that does not [chain GCM](AesImpl::chains_gcm) (the lanes, ring,
    /// AWS-LC) or is not built.
    pub fn gcm_start_with(
        &self,
        implementation: AesImpl,
        direction: Direction,
        nonce: &[u8],
        aad: &[u8],
    ) -> Result<GcmState, CryptoError> {
        match implementation {
            AesImpl::RustCrypto => self.gcm_start(nonce, aad),
            AesImpl::OpenSsl => {
                #[cfg(feature = "openssl")]
                {
                    let nonce = check_nonce(nonce)?;
                    check_aad_len(aad.len())?;
                    let key = self
                        .openssl
                        .as_ref()
                        .ok_or_else(|| implementation.unavailable("a key of this length"))?;
                    let ctx = key.start(direction == Direction::Encrypt, nonce, aad)?;
                    Ok(GcmState::on_openssl(ctx, aad.len() as u64))
                }
                #[cfg(not(feature = "openssl"))]
                {
                    let _ = (direction, nonce, aad);
                    Err(implementation.unavailable("GCM (the openssl feature is off)"))
                }
            }
            AesImpl::Lanes { .. } | AesImpl::Ring | AesImpl::AwsLc => Err(implementation
                .unavailable("the packets of a GCM job cut into several (whole messages only)")),
        }
    }

    /// [`gcm_seal_in_place_with`](Self::gcm_seal_in_place_with) on a copy: the ciphertext and
    /// the tag.
    ///
    /// # Errors
    /// As [`gcm_seal_in_place_with`](Self::gcm_seal_in_place_with).
    pub fn gcm_seal_with(
        &self,
        implementation: AesImpl,
        nonce: &[u8],
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<(Vec<u8>, Tag), CryptoError> {
        let mut buf = plaintext.to_vec();
        let tag = self.gcm_seal_in_place_with(implementation, nonce, aad, &mut buf)?;
        Ok((buf, tag))
    }

    /// [`gcm_open_in_place_with`](Self::gcm_open_in_place_with) on a copy: the plaintext.
    ///
    /// # Errors
    /// As [`gcm_open_in_place_with`](Self::gcm_open_in_place_with).
    pub fn gcm_open_with(
        &self,
        implementation: AesImpl,
        nonce: &[u8],
        aad: &[u8],
        ciphertext: &[u8],
        tag: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        let mut buf = ciphertext.to_vec();
        self.gcm_open_in_place_with(implementation, nonce, aad, &mut buf, tag)?;
        Ok(buf)
    }
}

/// Runs a set of packets of different jobs on `implementation`, each as
/// [`AesKey::process`] would: on [`AesImpl::Lanes`] the serial ones in lane sets of its width
/// ([`run_lanes_width`]), otherwise one after another (a packet given its
/// [`input`](LaneItem::input) apart on a copy of it in its buffer). Every packet is checked
/// before any runs.
///
/// # Errors
/// A [`LaneError`] naming the first packet refused, as [`run_lanes_width`] (on the lanes) or
/// [`AesKey::process_with`] (otherwise) would refuse it; nothing has been written then.
pub fn run_packets_with(
    implementation: AesImpl,
    items: &mut [LaneItem<'_>],
) -> Result<(), LaneError> {
    if let AesImpl::Lanes { width } = implementation {
        return run_lanes_width(items, width);
    }
    if !implementation.is_built() {
        return Err(LaneError {
            index: 0,
            error: implementation.unavailable("a packet (its feature is off)"),
        });
    }
    for (index, item) in items.iter().enumerate() {
        crate::crypto::lanes::check_input(item)
            .and_then(|()| {
                crate::crypto::aes::checked_run_len(item.op, item.buf.len(), item.len, item.last)
            })
            .map_err(|error| LaneError { index, error })?;
    }
    for (index, item) in items.iter_mut().enumerate() {
        // A packet given its input apart runs in place on a copy of it.
        if let Some(input) = item.input.take() {
            item.buf[..item.len].copy_from_slice(&input[..item.len]);
        }
        item.key
            .process_with(
                implementation,
                item.op,
                item.state,
                item.buf,
                item.len,
                item.last,
            )
            .map_err(|error| LaneError { index, error })?;
    }
    Ok(())
}

/// One implementation's measured speed for one operation and packet size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// The implementation timed.
    pub implementation: AesImpl,
    /// Its best time per byte of packet data, in nanoseconds: for the lanes, per byte of all
    /// `width` packets of a full set.
    pub ns_per_byte: f64,
}

impl Measured {
    /// The same speed in bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        if self.ns_per_byte > 0.0 {
            1e9 / self.ns_per_byte
        } else {
            f64::INFINITY
        }
    }
}

/// How many rounds [`measure`] runs.
pub const MEASURE_ROUNDS: usize = 5;

/// The least data one timed sample runs, so that the clock's own cost stays negligible.
const MIN_SAMPLE_BYTES: usize = 64 * 1024;

/// Times every implementation that runs `op` ([`AesImpl::candidates`]) on packets of `packet`
/// bytes with `key`, on the calling thread, and returns each one's time per byte, fastest
/// first: [`measure_rounds`] with [`MEASURE_ROUNDS`] rounds.
///
/// # Errors
/// As [`measure_rounds`].
pub fn measure(key: &AesKey, op: AesOp, packet: usize) -> Result<Vec<Measured>, CryptoError> {
    measure_rounds(key, op, packet, MEASURE_ROUNDS)
}

/// [`measure`] with `rounds` rounds. Nothing but the time it takes has an effect: it runs on
/// the calling thread, on buffers of its own, and starts no thread.
///
/// What is timed is a packet that is not a job's last (whole blocks, no padding), from a
/// running chaining state: for the lanes a full set of `width` such packets sharing the key
/// (so `width × packet` bytes of buffers); for a GCM operation ([`Mode::Gcm`]) a whole
/// one-packet job, sealed, or opened from a fresh copy of valid ciphertext (the copy is timed
/// for every implementation alike). Each round times every implementation once, in turn, over
/// at least 64 KiB of data; each implementation's figure is its best round, the least
/// disturbed by other work on the machine.
///
/// # Errors
/// [`CryptoError::MeasurePacket`] unless `packet` is a non-zero multiple of 16 bytes;
/// [`CryptoError::PaddingNotApplicable`] for a padded stream mode.
pub fn measure_rounds(
    key: &AesKey,
    op: AesOp,
    packet: usize,
    rounds: usize,
) -> Result<Vec<Measured>, CryptoError> {
    if packet == 0 || packet % BLOCK != 0 {
        return Err(CryptoError::MeasurePacket { len: packet });
    }
    if !op.mode.is_authenticated() {
        // The same checks a packet of a job gets (padding only for ECB and CBC).
        op.check_job_len(packet)?;
    }
    let candidates = AesImpl::candidates(op);
    measure_these(key, op, packet, rounds, MIN_SAMPLE_BYTES, &candidates)
}

/// [`measure_rounds`] over the implementations `these` (each must run `op`; `packet` checked by
/// the caller), each sample over at least `sample_bytes` of data.
pub(crate) fn measure_these(
    key: &AesKey,
    op: AesOp,
    packet: usize,
    rounds: usize,
    sample_bytes: usize,
    these: &[AesImpl],
) -> Result<Vec<Measured>, CryptoError> {
    let benches: Vec<Bench<'_>> = these
        .iter()
        .map(|&implementation| Bench::new(key, op, packet, implementation, sample_bytes))
        .collect::<Result<_, _>>()?;
    time(benches, rounds)
}

/// Times `benches`: one warm-up run each, then `rounds` samples each in turn; each one's best
/// sample per byte, fastest first.
fn time(mut benches: Vec<Bench<'_>>, rounds: usize) -> Result<Vec<Measured>, CryptoError> {
    for bench in &mut benches {
        bench.run_once()?; // warm-up: caches, page faults, the backends' feature checks
    }
    for _ in 0..rounds.max(1) {
        for bench in &mut benches {
            bench.sample()?;
        }
    }
    let mut measured: Vec<Measured> = benches
        .iter()
        .map(|b| Measured {
            implementation: b.implementation,
            ns_per_byte: b.best.as_nanos() as f64 / b.bytes_per_sample as f64,
        })
        .collect();
    measured.sort_by(|a, b| a.ns_per_byte.total_cmp(&b.ns_per_byte));
    Ok(measured)
}

/// Times the implementations `these` (each must [chain GCM](AesImpl::chains_gcm)) running
/// the packets of a GCM job cut into several, sealing or opening as `direction` says: packets
/// of `packet` bytes through a running [`GcmState`], at least `sample_bytes` a sample, each
/// implementation's best of `rounds` (after one warm-up sample), fastest first.
pub(crate) fn measure_gcm_chain(
    key: &AesKey,
    direction: Direction,
    packet: usize,
    rounds: usize,
    sample_bytes: usize,
    these: &[AesImpl],
) -> Result<Vec<Measured>, CryptoError> {
    if packet == 0 || packet % BLOCK != 0 {
        return Err(CryptoError::MeasurePacket { len: packet });
    }
    let op = AesOp::new(direction, Mode::Gcm);
    let benches: Vec<Bench<'_>> = these
        .iter()
        .map(|&implementation| {
            let mut bench = Bench::new(key, op, packet, implementation, sample_bytes)?;
            let state = key.gcm_start_with(implementation, direction, &MEASURE_NONCE, &[])?;
            bench.chain = Some(state);
            Ok(bench)
        })
        .collect::<Result<_, CryptoError>>()?;
    time(benches, rounds)
}

/// One implementation being timed: its buffers and its best sample.
struct Bench<'k> {
    key: &'k AesKey,
    op: AesOp,
    implementation: AesImpl,
    packet: usize,
    states: Vec<ChainState>,
    bufs: Vec<Vec<u8>>,
    /// For a GCM open: valid ciphertext and its tag, copied into the buffer before each open.
    sealed: Option<(Vec<u8>, Tag)>,
    /// For the packets of a GCM job cut into several: the running state each run goes on
    /// from, a packet that is not the job's last.
    chain: Option<GcmState>,
    runs_per_sample: usize,
    bytes_per_sample: usize,
    best: Duration,
}

/// The nonce the GCM measurement seals and opens with (the data is the measurement's own).
const MEASURE_NONCE: [u8; NONCE_LEN] = [0x5a; NONCE_LEN];

impl<'k> Bench<'k> {
    fn new(
        key: &'k AesKey,
        op: AesOp,
        packet: usize,
        implementation: AesImpl,
        sample_bytes: usize,
    ) -> Result<Self, CryptoError> {
        let packets = match implementation {
            AesImpl::Lanes { width } => width,
            _ => 1,
        };
        let states = (0..packets)
            .map(|i| ChainState::for_mode(op.mode, &[i as u8; BLOCK]))
            .collect::<Result<_, _>>()?;
        let bufs = (0..packets)
            .map(|i| (0..packet).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let sealed = if op.mode.is_authenticated() && op.direction == Direction::Decrypt {
            let plain: Vec<u8> = (0..packet).map(|j| j as u8).collect();
            Some(key.gcm_seal_with(AesImpl::RustCrypto, &MEASURE_NONCE, &[], &plain)?)
        } else {
            None
        };
        let bytes_per_run = packets * packet;
        let runs_per_sample = sample_bytes.div_ceil(bytes_per_run).max(1);
        Ok(Bench {
            key,
            op,
            implementation,
            packet,
            states,
            bufs,
            sealed,
            chain: None,
            runs_per_sample,
            bytes_per_sample: runs_per_sample * bytes_per_run,
            best: Duration::MAX,
        })
    }

    fn sample(&mut self) -> Result<(), CryptoError> {
        let start = Instant::now();
        for _ in 0..self.runs_per_sample {
            self.run_once()?;
        }
        self.best = self.best.min(start.elapsed());
        Ok(())
    }

    fn run_once(&mut self) -> Result<(), CryptoError> {
        let (key, op, packet) = (self.key, self.op, self.packet);
        if let Some(state) = &mut self.chain {
            key.gcm_update(op.direction, state, &mut self.bufs[0])?;
            black_box(&self.bufs);
            return Ok(());
        }
        if op.mode == Mode::Gcm {
            let buf = &mut self.bufs[0];
            match &self.sealed {
                None => {
                    let tag =
                        key.gcm_seal_in_place_with(self.implementation, &MEASURE_NONCE, &[], buf)?;
                    black_box(tag);
                }
                Some((ct, tag)) => {
                    buf.copy_from_slice(ct);
                    key.gcm_open_in_place_with(self.implementation, &MEASURE_NONCE, &[], buf, tag)?;
                }
            }
            black_box(&self.bufs);
            return Ok(());
        }
        let mut items: Vec<LaneItem<'_>> = self
            .states
            .iter_mut()
            .zip(self.bufs.iter_mut())
            .map(|(state, buf)| LaneItem {
                key,
                op,
                state,
                buf,
                len: packet,
                last: false,
                input: None,
            })
            .collect();
        run_packets_with(self.implementation, &mut items).map_err(|e| e.error)?;
        drop(items);
        black_box(&self.bufs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the `aws-lc` feature AWS-LC is neither offered nor run: every entry point says
    /// so with a typed error and touches nothing.
    #[cfg(not(feature = "aws-lc"))]
    #[test]
    fn aws_lc_is_refused_without_its_feature() {
        let key = AesKey::new(&[1; 16]).unwrap();
        assert!(!AesImpl::AwsLc.is_built());
        assert!(!AesImpl::all().contains(&AesImpl::AwsLc));
        let op = AesOp::new(Direction::Encrypt, Mode::Ctr);
        assert!(!AesImpl::candidates(op).contains(&AesImpl::AwsLc));
        let mut buf = [3u8; 16];
        let mut state = ChainState::default();
        let err = key.process_with(AesImpl::AwsLc, op, &mut state, &mut buf, 16, true);
        assert!(matches!(
            err,
            Err(CryptoError::ImplementationUnavailable { .. })
        ));
        let err = key.gcm_seal_in_place_with(AesImpl::AwsLc, &[0; 12], b"", &mut buf);
        assert!(matches!(
            err,
            Err(CryptoError::ImplementationUnavailable { .. })
        ));
        assert_eq!(buf, [3u8; 16]);
        let measured = measure_rounds(&key, op, 64, 1).unwrap();
        assert_eq!(measured.len(), AesImpl::candidates(op).len());
        assert!(measured.iter().all(|m| m.implementation != AesImpl::AwsLc));
    }

    /// Without the `ring` feature ring is neither offered nor run, and a pinned table of it
    /// is refused with a typed error.
    #[cfg(not(feature = "ring"))]
    #[test]
    fn ring_is_refused_without_its_feature() {
        let key = AesKey::new(&[1; 16]).unwrap();
        assert!(!AesImpl::Ring.is_built());
        let op = AesOp::new(Direction::Encrypt, Mode::Gcm);
        assert!(!AesImpl::candidates(op).contains(&AesImpl::Ring));
        let mut buf = [3u8; 16];
        let err = key.gcm_seal_in_place_with(AesImpl::Ring, &[0; 12], b"", &mut buf);
        assert!(matches!(
            err,
            Err(CryptoError::ImplementationUnavailable { .. })
        ));
        assert_eq!(buf, [3u8; 16]);
        assert!(crate::crypto::ImplTable::pinned(AesImpl::Ring).is_err());
    }

    /// `imp` is a candidate for GCM and for nothing else, and refuses a plain packet untouched.
    #[cfg(feature = "ring")]
    fn assert_gcm_only(imp: AesImpl) {
        for mode in Mode::ALL {
            for direction in [Direction::Encrypt, Direction::Decrypt] {
                let op = AesOp::new(direction, mode);
                let offered = AesImpl::candidates(op).contains(&imp);
                assert_eq!(offered, mode == Mode::Gcm, "{imp} {op:?}");
            }
        }
        let key = AesKey::new(&[1; 16]).unwrap();
        let op = AesOp::new(Direction::Encrypt, Mode::Ctr);
        let (mut buf, mut state) = ([3u8; 16], ChainState::default());
        let err = key.process_with(imp, op, &mut state, &mut buf, 16, true);
        assert!(matches!(
            err,
            Err(CryptoError::ImplementationUnavailable { .. })
        ));
        assert_eq!(buf, [3u8; 16], "{imp}");
    }

    /// With the feature, ring is a candidate for GCM and for nothing else; a plain packet on
    /// it is refused untouched, an AES-192 key runs on RustCrypto (the same bytes), and a
    /// failed open releases nothing.
    #[cfg(feature = "ring")]
    #[test]
    fn ring_runs_gcm_only() {
        assert_gcm_only(AesImpl::Ring);
        for len in [16, 24, 32] {
            let key = AesKey::new(&vec![len as u8; len]).unwrap();
            let text = [5u8; 100];
            let ring = key
                .gcm_seal_with(AesImpl::Ring, &[2; 12], b"ad", &text)
                .unwrap();
            let rust = key
                .gcm_seal_with(AesImpl::RustCrypto, &[2; 12], b"ad", &text)
                .unwrap();
            assert_eq!(ring, rust, "AES-{}", len * 8);
            let (mut ct, mut tag) = ring;
            tag[0] ^= 1;
            let err = key.gcm_open_in_place_with(AesImpl::Ring, &[2; 12], b"ad", &mut ct, &tag);
            assert_eq!(err, Err(CryptoError::AuthenticationFailed));
            if len != 24 {
                assert!(ct.iter().all(|&b| b == 0), "AES-{}: released", len * 8);
            }
        }
    }

    /// Without its feature, OpenSSL is not offered, and a GCM job asked to chain on it is
    /// refused; ring and the lanes never chain GCM.
    #[cfg(not(feature = "openssl"))]
    #[test]
    fn openssl_is_refused_without_its_feature() {
        let key = AesKey::new(&[1; 16]).unwrap();
        assert!(!AesImpl::OpenSsl.is_built());
        assert_eq!(AesImpl::gcm_chain_candidates(), [AesImpl::RustCrypto]);
        for imp in [AesImpl::OpenSsl, AesImpl::Ring, AesImpl::Lanes { width: 8 }] {
            let err = key.gcm_start_with(imp, Direction::Encrypt, &[0; 12], b"");
            assert!(
                matches!(err, Err(CryptoError::ImplementationUnavailable { .. })),
                "{imp}"
            );
        }
        assert!(crate::crypto::ImplTable::pinned(AesImpl::OpenSsl).is_err());
    }

    /// With the feature, OpenSSL is a candidate for every operation and chains GCM; a chained
    /// state refuses a packet in the other direction; a failed open of the last packet
    /// releases nothing; every key length gives RustCrypto's bytes, and a pinned table chains
    /// on it.
    #[cfg(feature = "openssl")]
    #[test]
    fn openssl_runs_every_operation_and_chains_gcm() {
        for mode in Mode::ALL {
            for direction in [Direction::Encrypt, Direction::Decrypt] {
                let op = AesOp::new(direction, mode);
                assert!(
                    AesImpl::candidates(op).contains(&AesImpl::OpenSsl),
                    "{op:?}"
                );
            }
        }
        assert_eq!(
            AesImpl::gcm_chain_candidates(),
            [AesImpl::RustCrypto, AesImpl::OpenSsl]
        );
        let key = AesKey::new(&[1; 16]).unwrap();
        let mut buf = [3u8; 16];
        let mut sealing = key
            .gcm_start_with(AesImpl::OpenSsl, Direction::Encrypt, &[2; 12], b"ad")
            .unwrap();
        let err = key.gcm_update(Direction::Decrypt, &mut sealing, &mut buf);
        assert!(matches!(
            err,
            Err(CryptoError::ImplementationUnavailable { .. })
        ));
        assert_eq!(buf, [3u8; 16]);
        for len in [16, 24, 32] {
            let key = AesKey::new(&vec![len as u8; len]).unwrap();
            let text: Vec<u8> = (0..100u8).collect();
            let whole = key.gcm_seal_with(AesImpl::OpenSsl, &[2; 12], b"ad", &text);
            let rust = key
                .gcm_seal_with(AesImpl::RustCrypto, &[2; 12], b"ad", &text)
                .unwrap();
            assert_eq!(whole.as_ref(), Ok(&rust), "AES-{}", len * 8);
            // Chained: 64 bytes, then the last 36.
            let (mut first, mut last) = (text[..64].to_vec(), text[64..].to_vec());
            let mut state = key
                .gcm_start_with(AesImpl::OpenSsl, Direction::Encrypt, &[2; 12], b"ad")
                .unwrap();
            key.gcm_update(Direction::Encrypt, &mut state, &mut first)
                .unwrap();
            let tag = key.gcm_seal_final(state, &mut last).unwrap();
            assert_eq!(([first, last].concat(), tag), rust, "AES-{}", len * 8);
            let (ct, mut bad) = rust;
            bad[0] ^= 1;
            let state = key
                .gcm_start_with(AesImpl::OpenSsl, Direction::Decrypt, &[2; 12], b"ad")
                .unwrap();
            let mut buf = ct.clone();
            let err = key.gcm_open_final(state, &mut buf, &bad);
            assert_eq!(err, Err(CryptoError::AuthenticationFailed));
            assert!(buf.iter().all(|&b| b == 0), "AES-{}: released", len * 8);
        }
        let table = crate::crypto::ImplTable::pinned(AesImpl::OpenSsl).unwrap();
        assert_eq!(table.gcm_chain(Direction::Decrypt), AesImpl::OpenSsl);
        assert_eq!(
            table.get(AesOp::new(Direction::Encrypt, Mode::Gcm)),
            AesImpl::OpenSsl
        );
    }

    /// With the feature, AWS-LC is a candidate for every operation, GCM included.
    #[cfg(feature = "aws-lc")]
    #[test]
    fn aws_lc_is_a_candidate_for_every_operation() {
        for mode in Mode::ALL {
            for direction in [Direction::Encrypt, Direction::Decrypt] {
                let op = AesOp::new(direction, mode);
                assert!(AesImpl::candidates(op).contains(&AesImpl::AwsLc), "{op:?}");
            }
        }
    }

    /// A whole GCM message sealed and opened from one buffer into another gives, on every
    /// implementation built, the bytes and tag it gives in place, and leaves its input as it
    /// was: in one call from one buffer to the other where the implementation seals between
    /// two (AWS-LC), on a copy elsewhere. A wrong tag leaves no plaintext (zeros, or the
    /// ciphertext); buffers of unequal lengths are refused before anything is written.
    #[test]
    fn gcm_between_two_buffers_matches_in_place_on_every_implementation() {
        let gcm = AesOp::new(Direction::Encrypt, Mode::Gcm);
        let nonce = [7u8; 12];
        let mut between = 0;
        for imp in AesImpl::candidates(gcm) {
            between += usize::from(imp.seals_between());
            for (key_len, len) in [(16, 0), (16, 1), (24, 15), (32, 16), (16, 17), (32, 1000)] {
                let key = AesKey::new(&vec![key_len as u8; key_len]).unwrap();
                let aad = vec![9u8; len % 7];
                let plain: Vec<u8> = (0..len).map(|b| (b * 31 + len) as u8).collect();
                let what = format!("{imp}, {key_len}-byte key, {len} bytes");

                let mut sealed = plain.clone();
                let tag = key
                    .gcm_seal_in_place_with(imp, &nonce, &aad, &mut sealed)
                    .unwrap();
                let mut out = vec![0xA5; len];
                let got = key
                    .gcm_seal_between_with(imp, &nonce, &aad, (&plain, &mut out))
                    .unwrap();
                assert_eq!((&out, got), (&sealed, tag), "{what}: sealed");

                let mut opened = vec![0xA5; len];
                key.gcm_open_between_with(imp, &nonce, &aad, &tag, (&sealed, &mut opened))
                    .unwrap();
                assert_eq!(opened, plain, "{what}: opened");

                let mut bad = tag;
                bad[0] ^= 1;
                let mut refused = vec![0xA5; len];
                let err =
                    key.gcm_open_between_with(imp, &nonce, &aad, &bad, (&sealed, &mut refused));
                assert_eq!(err, Err(CryptoError::AuthenticationFailed), "{what}");
                // Zeros, or the ciphertext where it was opened in place on a copy and the tag
                // checked first (RustCrypto's): no plaintext.
                let left = refused.iter().all(|&b| b == 0) || refused == sealed;
                assert!(left, "{what}: plaintext left after a wrong tag");

                let mut short = vec![0xA5; len + 1];
                let err = key.gcm_seal_between_with(imp, &nonce, &aad, (&plain, &mut short));
                assert_eq!(
                    err,
                    Err(CryptoError::LengthExceedsBuffer { len, buf: len + 1 }),
                    "{what}"
                );
                assert!(short.iter().all(|&b| b == 0xA5), "{what}: written");
            }
        }
        assert_eq!(between, usize::from(cfg!(feature = "aws-lc")));
    }
}
