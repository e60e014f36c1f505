//! Jobs as the application describes them: what to do, with which key, on which data; and
//! what a finished job gives back ([`JobOutput`]). A submitted job becomes a
//! [`JobHandle`](crate::runtime::JobHandle) (see `handle.rs`).

use std::fmt;

use smallvec::SmallVec;

use crate::crypto::{
    AesOp, CryptoError, Direction, MAX_AAD_LEN, NONCE_LEN, Padding, SIGNATURE_LEN, Tag,
    check_nonce, check_tag, check_text_len, padded_len,
};
use crate::packet::{Mode, TenantId};
use crate::runtime::ids::KeyId;

/// An IV or a nonce as a job carries it: held inline (no allocation of its own) up to one
/// block, so that a small job costs one allocation, its data, and its IV is read with the job.
/// A longer one is kept too, to be refused with its length at submission.
pub(crate) type Iv = SmallVec<[u8; 16]>;

/// A job to submit: what to do, with which key, on which data.
pub struct Job {
    pub(crate) kind: JobKind,
    pub(crate) tenant: TenantId,
}

pub(crate) enum JobKind {
    Aes {
        key: KeyId,
        op: AesOp,
        iv: Iv,
        data: Vec<u8>,
    },
    Gcm(GcmRequest),
    Sign {
        key: KeyId,
        msg: Vec<u8>,
    },
    Verify {
        key: KeyId,
        msg: Vec<u8>,
        sig: Vec<u8>,
    },
    VerifyBatch {
        items: Vec<(KeyId, Vec<u8>, Vec<u8>)>,
    },
}

/// Gives a PKCS#7 encryption's data room for its padding, exactly: the job is cut into packets
/// inside this allocation (the padding block lands in the last packet), so submission never
/// reallocates it, and a growth by doubling (what `Vec::resize` does past capacity) would both
/// copy the whole job and leave allocations twice its size behind.
fn reserve_padding(op: AesOp, data: &mut Vec<u8>) {
    if op.pads_on_encrypt() && op.mode.needs_whole_blocks() {
        data.reserve_exact(padded_len(data.len()) - data.len());
    }
}

/// A GCM job as the application gave it (docs/ALGORITHM.md §15.4).
pub(crate) struct GcmRequest {
    pub(crate) key: KeyId,
    pub(crate) direction: Direction,
    pub(crate) nonce: Iv,
    pub(crate) aad: Vec<u8>,
    pub(crate) data: Vec<u8>,
    /// The tag to check (decryption only; empty for encryption).
    pub(crate) tag: Vec<u8>,
}

impl GcmRequest {
    /// Checks what can be checked before anything runs, and returns the nonce and, for a
    /// decryption, the tag to check.
    pub(crate) fn check(&self) -> Result<([u8; NONCE_LEN], Option<Tag>), CryptoError> {
        let nonce = *check_nonce(&self.nonce)?;
        let tag = match self.direction {
            Direction::Encrypt => None,
            Direction::Decrypt => Some(*check_tag(&self.tag)?),
        };
        check_text_len(self.data.len())?;
        if self.aad.len() as u64 > MAX_AAD_LEN {
            return Err(CryptoError::MessageTooLong {
                len: self.aad.len() as u64,
                max: MAX_AAD_LEN,
            });
        }
        Ok((nonce, tag))
    }
}

impl fmt::Debug for Job {
    /// Shows the kind, key handle and lengths, never the data.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            JobKind::Aes { key, op, iv, data } => f
                .debug_struct("Job::Aes")
                .field("key", key)
                .field("op", op)
                .field("iv_len", &iv.len())
                .field("len", &data.len())
                .finish(),
            JobKind::Gcm(GcmRequest {
                key,
                direction,
                nonce,
                aad,
                data,
                tag,
            }) => f
                .debug_struct("Job::Gcm")
                .field("key", key)
                .field("direction", direction)
                .field("nonce_len", &nonce.len())
                .field("aad_len", &aad.len())
                .field("len", &data.len())
                .field("tag_len", &tag.len())
                .finish(),
            JobKind::Sign { key, msg } => f
                .debug_struct("Job::Sign")
                .field("key", key)
                .field("len", &msg.len())
                .finish(),
            JobKind::Verify { key, msg, sig } => f
                .debug_struct("Job::Verify")
                .field("key", key)
                .field("len", &msg.len())
                .field("sig_len", &sig.len())
                .finish(),
            JobKind::VerifyBatch { items } => f
                .debug_struct("Job::VerifyBatch")
                .field("signatures", &items.len())
                .finish(),
        }
    }
}

impl Job {
    /// AES encryption of `data` in `mode` (the IV is ignored by ECB; for CTR it is the first
    /// counter block), without padding. GCM jobs are made with [`Job::gcm_encrypt`]: a GCM job
    /// made here is refused at submission ([`CryptoError::AuthenticatedMode`](crate::crypto::CryptoError::AuthenticatedMode)).
    pub fn encrypt(key: KeyId, mode: Mode, iv: &[u8], data: impl Into<Vec<u8>>) -> Job {
        Job::aes(key, AesOp::new(Direction::Encrypt, mode), iv, data)
    }

    /// AES decryption of `data` in `mode` (the IV is ignored by ECB), without padding. GCM jobs
    /// are made with [`Job::gcm_decrypt`].
    pub fn decrypt(key: KeyId, mode: Mode, iv: &[u8], data: impl Into<Vec<u8>>) -> Job {
        Job::aes(key, AesOp::new(Direction::Decrypt, mode), iv, data)
    }

    /// An AES job for any [`AesOp`].
    ///
    /// A PKCS#7 encryption's output is one padding block longer than its input at most
    /// ([`padded_len`](crate::crypto::padded_len)); the job's `Vec` is given room for it here,
    /// exactly, and never grows again. Data handed over with that room already is never
    /// reallocated, so the output is the very allocation handed in.
    pub fn aes(key: KeyId, op: AesOp, iv: &[u8], data: impl Into<Vec<u8>>) -> Job {
        let mut data = data.into();
        reserve_padding(op, &mut data);
        Job {
            kind: JobKind::Aes {
                key,
                op,
                iv: Iv::from_slice(iv),
                data,
            },
            tenant: TenantId::DEFAULT,
        }
    }

    /// AES-GCM authenticated encryption of `plaintext` under a registered AES key (128, 192 or
    /// 256 bits), with a 12-byte `nonce` and associated data `aad` (authenticated, not
    /// encrypted; may be empty). The output is
    /// [`JobOutput::Sealed`](crate::runtime::JobOutput::Sealed): the ciphertext, as long as the
    /// plaintext, and the 16-byte tag. A nonce must never be used twice with the same key.
    ///
    /// A job longer than the packet size is cut into packets that run in order, handing the
    /// GHASH state on through the state store (docs/ALGORITHM.md §15.4).
    ///
    /// # Errors (at submission)
    /// [`CryptoError::NonceLength`](crate::crypto::CryptoError::NonceLength) unless the nonce is
    /// 12 bytes; [`CryptoError::MessageTooLong`](crate::crypto::CryptoError::MessageTooLong)
    /// past 2³⁶ − 32 bytes.
    pub fn gcm_encrypt(
        key: KeyId,
        nonce: &[u8],
        aad: impl Into<Vec<u8>>,
        plaintext: impl Into<Vec<u8>>,
    ) -> Job {
        Job {
            kind: JobKind::Gcm(GcmRequest {
                key,
                direction: Direction::Encrypt,
                nonce: Iv::from_slice(nonce),
                aad: aad.into(),
                data: plaintext.into(),
                tag: Vec::new(),
            }),
            tenant: TenantId::DEFAULT,
        }
    }

    /// AES-GCM authenticated decryption of `ciphertext` with its 16-byte `tag`, the 12-byte
    /// `nonce` and the associated data `aad` it was sealed with. The output is
    /// [`JobOutput::Data`](crate::runtime::JobOutput::Data), the plaintext, only if the tag
    /// verifies; otherwise the handle resolves to
    /// [`JobError::Crypto`](crate::runtime::JobError::Crypto)`(`[`CryptoError::AuthenticationFailed`](crate::crypto::CryptoError::AuthenticationFailed)`)`
    /// and the plaintext the packets produced is zeroized, never released.
    ///
    /// # Errors (at submission)
    /// [`CryptoError::NonceLength`](crate::crypto::CryptoError::NonceLength),
    /// [`CryptoError::TagLength`](crate::crypto::CryptoError::TagLength) unless the tag is 16
    /// bytes, [`CryptoError::MessageTooLong`](crate::crypto::CryptoError::MessageTooLong).
    pub fn gcm_decrypt(
        key: KeyId,
        nonce: &[u8],
        aad: impl Into<Vec<u8>>,
        ciphertext: impl Into<Vec<u8>>,
        tag: &[u8],
    ) -> Job {
        Job {
            kind: JobKind::Gcm(GcmRequest {
                key,
                direction: Direction::Decrypt,
                nonce: Iv::from_slice(nonce),
                aad: aad.into(),
                data: ciphertext.into(),
                tag: tag.to_vec(),
            }),
            tenant: TenantId::DEFAULT,
        }
    }

    /// The same job with `padding` (ECB and CBC only; other jobs are unchanged). A PKCS#7
    /// encryption's data gets room for its padding block, as in [`Job::aes`].
    pub fn with_padding(mut self, padding: Padding) -> Job {
        if let JobKind::Aes { op, data, .. } = &mut self.kind {
            op.padding = padding;
            reserve_padding(*op, data);
        }
        self
    }

    /// An Ed25519 signature of `msg` with a registered signing key.
    pub fn sign(key: KeyId, msg: impl Into<Vec<u8>>) -> Job {
        Job {
            kind: JobKind::Sign {
                key,
                msg: msg.into(),
            },
            tenant: TenantId::DEFAULT,
        }
    }

    /// Ed25519 verification of `sig` over `msg` with a registered verifying (or signing) key.
    pub fn verify(key: KeyId, msg: impl Into<Vec<u8>>, sig: &[u8]) -> Job {
        Job {
            kind: JobKind::Verify {
                key,
                msg: msg.into(),
                sig: sig.to_vec(),
            },
            tenant: TenantId::DEFAULT,
        }
    }

    /// Ed25519 verification of many signatures at once, by batch verification (see
    /// [`crypto::verify_batch`](crate::crypto::verify_batch) for how it agrees with one-by-one
    /// verification): each item is a key (verifying or signing), a message and a signature.
    /// The batch is cut into packets of up to 64 signatures, which the Ed25519 nodes share; the
    /// output is [`JobOutput::VerifiedBatch`](crate::runtime::JobOutput::VerifiedBatch), one
    /// answer per item, in order.
    pub fn verify_batch(items: impl IntoIterator<Item = (KeyId, Vec<u8>, Vec<u8>)>) -> Job {
        Job {
            kind: JobKind::VerifyBatch {
                items: items.into_iter().collect(),
            },
            tenant: TenantId::DEFAULT,
        }
    }

    /// The same job under `tenant` (registered with
    /// [`Service::add_tenant`](crate::runtime::Service::add_tenant)): it shares the nodes with
    /// other tenants' jobs by weight and passes the tenant's limits. A job is under
    /// [`TenantId::DEFAULT`] until set.
    pub fn tenant(mut self, tenant: TenantId) -> Job {
        self.tenant = tenant;
        self
    }

    /// The tenant the job is submitted under.
    pub fn tenant_id(&self) -> TenantId {
        self.tenant
    }

    /// The length of the job's data (the message, for Ed25519; all messages, for a batch).
    pub fn len(&self) -> usize {
        match &self.kind {
            JobKind::Aes { data, .. } | JobKind::Gcm(GcmRequest { data, .. }) => data.len(),
            JobKind::Sign { msg, .. } | JobKind::Verify { msg, .. } => msg.len(),
            JobKind::VerifyBatch { items } => items.iter().map(|(_, m, _)| m.len()).sum(),
        }
    }

    /// Whether the job's data is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives back the job's data buffer (for a batch, the messages one after another; for GCM,
    /// the plaintext or ciphertext, without the associated data or tag).
    pub fn into_data(self) -> Vec<u8> {
        match self.kind {
            JobKind::Aes { data, .. } | JobKind::Gcm(GcmRequest { data, .. }) => data,
            JobKind::Sign { msg, .. } | JobKind::Verify { msg, .. } => msg,
            JobKind::VerifyBatch { items } => items.into_iter().flat_map(|(_, m, _)| m).collect(),
        }
    }
}

/// What a finished job gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutput {
    /// The ciphertext or plaintext of an AES job; the plaintext of a GCM decryption whose tag
    /// verified.
    Data(Vec<u8>),
    /// A GCM encryption: the ciphertext (as long as the plaintext) and the 16-byte tag.
    Sealed {
        /// The ciphertext.
        ciphertext: Vec<u8>,
        /// The authentication tag.
        tag: Tag,
    },
    /// An Ed25519 signature.
    Signature([u8; SIGNATURE_LEN]),
    /// Whether an Ed25519 signature verified.
    Verified(bool),
    /// Whether each signature of a batch verified, in order.
    VerifiedBatch(Vec<bool>),
}

impl JobOutput {
    /// The data of an AES job.
    pub fn into_data(self) -> Option<Vec<u8>> {
        match self {
            JobOutput::Data(d) => Some(d),
            _ => None,
        }
    }

    /// The ciphertext and tag of a GCM encryption.
    pub fn into_sealed(self) -> Option<(Vec<u8>, Tag)> {
        match self {
            JobOutput::Sealed { ciphertext, tag } => Some((ciphertext, tag)),
            _ => None,
        }
    }

    /// The signature of a sign job.
    pub fn signature(&self) -> Option<[u8; SIGNATURE_LEN]> {
        match self {
            JobOutput::Signature(s) => Some(*s),
            _ => None,
        }
    }

    /// The answer of a verify job.
    pub fn verified(&self) -> Option<bool> {
        match self {
            JobOutput::Verified(v) => Some(*v),
            _ => None,
        }
    }

    /// The answers of a batch verify job.
    pub fn verified_batch(self) -> Option<Vec<bool>> {
        match self {
            JobOutput::VerifiedBatch(v) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::BLOCK;

    fn data(job: &Job) -> &Vec<u8> {
        match &job.kind {
            JobKind::Aes { data, .. } => data,
            _ => unreachable!("an AES job"),
        }
    }

    #[test]
    fn a_padded_encryption_gets_exactly_its_padding_room() {
        for len in [0, 1, 15, 16, 17, 1 << 20] {
            let job = Job::encrypt(KeyId(1), Mode::Cbc, &[0; 16], vec![3u8; len])
                .with_padding(Padding::Pkcs7);
            assert!(data(&job).capacity() >= padded_len(len), "len {len}");
            assert!(data(&job).capacity() < padded_len(len) + BLOCK, "len {len}");
            let op = AesOp::new(Direction::Encrypt, Mode::Ecb).with_padding(Padding::Pkcs7);
            let job = Job::aes(KeyId(1), op, &[], vec![3u8; len]);
            assert!(data(&job).capacity() >= padded_len(len), "len {len}");
        }
    }

    #[test]
    fn data_with_room_keeps_its_allocation_and_others_get_none() {
        let mut v = Vec::with_capacity(padded_len(100));
        v.extend_from_slice(&[5u8; 100]);
        let at = v.as_ptr();
        let job = Job::encrypt(KeyId(1), Mode::Cbc, &[0; 16], v).with_padding(Padding::Pkcs7);
        assert_eq!(data(&job).as_ptr(), at);
        // Decryption shrinks and stream modes are never padded: nothing reserved.
        let job =
            Job::decrypt(KeyId(1), Mode::Cbc, &[0; 16], vec![0u8; 32]).with_padding(Padding::Pkcs7);
        assert_eq!(data(&job).capacity(), 32);
        let job =
            Job::encrypt(KeyId(1), Mode::Ofb, &[0; 16], vec![0u8; 32]).with_padding(Padding::Pkcs7);
        assert_eq!(data(&job).capacity(), 32);
    }
}
