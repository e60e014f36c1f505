//! AES-GCM through the system's OpenSSL (the `openssl` feature), and the key type the plain
//! modes (`openssl_modes.rs`) run with too: an OpenSSL cipher context is a GCM state that can
//! stop after any number of whole blocks and go on later, on another thread, so a GCM job cut
//! into packets can hand it from packet to packet through the state store, where ring and
//! AWS-LC seal or open a whole message in one call only.
//!
//! This file depends on nothing of the project but its error type, so that the key type
//! ([`AesKey`](crate::crypto::AesKey) holds one) and the GCM state type
//! ([`GcmState`](crate::crypto::GcmState) may hold a context) both sit above it.
//!
//! The key bytes are kept `Zeroizing` (a context is made from them for each job, which costs a
//! key expansion, about 0.1 µs); OpenSSL cleanses a context's key schedule and hash key when
//! the context is freed (`EVP_CIPHER_CTX_free`), which dropping an [`OpenSslGcm`] does.

use std::fmt;

use openssl::cipher::{Cipher, CipherRef};
use openssl::cipher_ctx::CipherCtx;
use zeroize::{Zeroize, Zeroizing};

use crate::crypto::error::CryptoError;
use crate::crypto::text::Text;

/// The most bytes handed to one OpenSSL call: its lengths are C `int`s.
const MAX_CALL: usize = 1 << 30;

/// What a refusal by OpenSSL is reported as, the nonce and lengths having been checked before:
/// the library could not run the operation (out of memory, or a provider missing).
pub(super) fn refused<E>(_: E) -> CryptoError {
    CryptoError::ImplementationUnavailable {
        implementation: "openssl",
        what: "this operation (OpenSSL refused it)",
    }
}

/// One AES key for OpenSSL: its bytes and the GCM cipher of its length, and, made on first
/// use, a context per plain mode and direction with the key expanded and a pool of copies the
/// packets take and give back (`openssl_modes.rs`).
pub(super) struct OpenSslKey {
    pub(super) key: Zeroizing<Vec<u8>>,
    cipher: &'static CipherRef,
    pub(super) plain: [std::sync::OnceLock<Result<CipherCtx, CryptoError>>; 10],
    /// Per plain mode and direction, contexts free for the next packet.
    pub(super) pool: [std::sync::Mutex<Vec<CipherCtx>>; 10],
}

impl fmt::Debug for OpenSslKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OpenSslKey(..)")
    }
}

impl OpenSslKey {
    /// `key` for OpenSSL's GCM: `None` unless it is 16, 24 or 32 bytes (`AesKey::new` has
    /// checked that already).
    pub(super) fn new(key: &[u8]) -> Option<Self> {
        let cipher = match key.len() {
            16 => Cipher::aes_128_gcm(),
            24 => Cipher::aes_192_gcm(),
            32 => Cipher::aes_256_gcm(),
            _ => return None,
        };
        Some(OpenSslKey {
            key: Zeroizing::new(key.to_vec()),
            cipher,
            plain: Default::default(),
            pool: Default::default(),
        })
    }

    /// Starts a message with the 12-byte `nonce`, sealing (`encrypt`) or opening, and hashes
    /// the associated data `aad`.
    pub(super) fn start(
        &self,
        encrypt: bool,
        nonce: &[u8; 12],
        aad: &[u8],
    ) -> Result<OpenSslGcm, CryptoError> {
        let mut ctx = CipherCtx::new().map_err(refused)?;
        let key = Some(&self.key[..]);
        if encrypt {
            ctx.encrypt_init(Some(self.cipher), key, Some(nonce))
        } else {
            ctx.decrypt_init(Some(self.cipher), key, Some(nonce))
        }
        .map_err(refused)?;
        for chunk in aad.chunks(MAX_CALL) {
            ctx.cipher_update(chunk, None).map_err(refused)?;
        }
        Ok(OpenSslGcm { ctx, encrypt })
    }
}

/// A GCM message under way in an OpenSSL context: sealing or opening, as it was started.
pub(super) struct OpenSslGcm {
    ctx: CipherCtx,
    encrypt: bool,
}

impl OpenSslGcm {
    /// Whether the message is being sealed (rather than opened).
    pub(super) fn encrypts(&self) -> bool {
        self.encrypt
    }

    /// Encrypts or decrypts `text` (in place, or from one buffer into the other) and hashes
    /// the ciphertext. Every call but the last of a message must be a whole number of blocks
    /// (the caller checks).
    pub(super) fn update(&mut self, text: &mut Text<'_, '_>) -> Result<(), CryptoError> {
        let whole = |written: usize, len: usize| {
            if written == len {
                Ok(())
            } else {
                Err(refused(()))
            }
        };
        if let Some((input, output)) = text.ends() {
            for (from, into) in input.chunks(MAX_CALL).zip(output.chunks_mut(MAX_CALL)) {
                let written = self.ctx.cipher_update(from, Some(into)).map_err(refused)?;
                whole(written, from.len())?;
            }
            return Ok(());
        }
        for chunk in text.output().chunks_mut(MAX_CALL) {
            let len = chunk.len();
            let written = self
                .ctx
                .cipher_update_inplace(chunk, len)
                .map_err(refused)?;
            whole(written, len)?;
        }
        Ok(())
    }

    /// Encrypts the last piece `text` and returns the tag.
    pub(super) fn seal_final(mut self, text: &mut Text<'_, '_>) -> Result<[u8; 16], CryptoError> {
        self.update(text)?;
        self.ctx.cipher_final(&mut []).map_err(refused)?;
        let mut tag = [0u8; 16];
        self.ctx.tag(&mut tag).map_err(refused)?;
        Ok(tag)
    }

    /// Decrypts the last piece `text` and checks the tag; on a mismatch the output is zeroed
    /// (OpenSSL decrypts as it hashes, and no unauthenticated plaintext is released).
    pub(super) fn open_final(
        mut self,
        text: &mut Text<'_, '_>,
        tag: &[u8; 16],
    ) -> Result<(), CryptoError> {
        self.update(text)?;
        self.ctx.set_tag(tag).map_err(refused)?;
        if self.ctx.cipher_final(&mut []).is_err() {
            text.output().zeroize();
            return Err(CryptoError::AuthenticationFailed);
        }
        Ok(())
    }
}
