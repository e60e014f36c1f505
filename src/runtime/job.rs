//! Jobs as the application describes them: what to do, with which key, on which data. A
//! submitted job becomes a [`JobHandle`](crate::runtime::JobHandle) (see `handle.rs`).

use std::fmt;

use crate::crypto::{AesOp, Direction, Padding};
use crate::packet::Mode;
use crate::runtime::KeyId;

/// A job to submit: what to do, with which key, on which data.
pub struct Job {
    pub(crate) kind: JobKind,
}

pub(crate) enum JobKind {
    Aes {
        key: KeyId,
        op: AesOp,
        iv: Vec<u8>,
        data: Vec<u8>,
    },
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
    /// AES encryption of `data` in `mode` (the IV is ignored by ECB), without padding.
    pub fn encrypt(key: KeyId, mode: Mode, iv: &[u8], data: impl Into<Vec<u8>>) -> Job {
        Job::aes(key, AesOp::new(Direction::Encrypt, mode), iv, data)
    }

    /// AES decryption of `data` in `mode` (the IV is ignored by ECB), without padding.
    pub fn decrypt(key: KeyId, mode: Mode, iv: &[u8], data: impl Into<Vec<u8>>) -> Job {
        Job::aes(key, AesOp::new(Direction::Decrypt, mode), iv, data)
    }

    /// An AES job for any [`AesOp`].
    pub fn aes(key: KeyId, op: AesOp, iv: &[u8], data: impl Into<Vec<u8>>) -> Job {
        Job {
            kind: JobKind::Aes {
                key,
                op,
                iv: iv.to_vec(),
                data: data.into(),
            },
        }
    }

    /// The same job with `padding` (ECB and CBC only; other jobs are unchanged).
    pub fn with_padding(mut self, padding: Padding) -> Job {
        if let JobKind::Aes { op, .. } = &mut self.kind {
            op.padding = padding;
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
        }
    }

    /// The length of the job's data (the message, for Ed25519; all messages, for a batch).
    pub fn len(&self) -> usize {
        match &self.kind {
            JobKind::Aes { data, .. } => data.len(),
            JobKind::Sign { msg, .. } | JobKind::Verify { msg, .. } => msg.len(),
            JobKind::VerifyBatch { items } => items.iter().map(|(_, m, _)| m.len()).sum(),
        }
    }

    /// Whether the job's data is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives back the job's data buffer (for a batch, the messages one after another).
    pub fn into_data(self) -> Vec<u8> {
        match self.kind {
            JobKind::Aes { data, .. } => data,
            JobKind::Sign { msg, .. } | JobKind::Verify { msg, .. } => msg,
            JobKind::VerifyBatch { items } => items.into_iter().flat_map(|(_, m, _)| m).collect(),
        }
    }
}
