//! The key registry: keys are registered once and used by handle.
//!
//! A job takes a reference to its key when it is submitted, so removing a key never disturbs a
//! job already running; the key's bytes are zeroized when the last job using it finishes. Key
//! material is held only in types that zeroize on drop and never print their bytes; the
//! expanded AES schedule is built once, at registration, and shared read-only by every node.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard};
use rustc_hash::FxHashMap;

use zeroize::Zeroizing;

use crate::crypto::{AesKey, SigningKey, VerifyingKey};
use crate::runtime::error::{KeyError, SubmitError};
use crate::runtime::ids::KeyId;

/// What a registered key is. Cloning shares the key, it does not copy its bytes.
#[derive(Debug, Clone)]
enum KeyMaterial {
    Aes(Arc<AesKey>),
    Signing(Arc<SigningKey>),
    Verifying(VerifyingKey),
}

impl KeyMaterial {
    fn describe(&self) -> &'static str {
        match self {
            KeyMaterial::Aes(_) => "an AES key",
            KeyMaterial::Signing(_) => "an Ed25519 signing key",
            KeyMaterial::Verifying(_) => "an Ed25519 verifying key",
        }
    }
}

/// The error for a job naming a key of the wrong kind.
fn wrong_kind(key: KeyId, expected: &'static str, got: &KeyMaterial) -> SubmitError {
    SubmitError::WrongKeyKind {
        key,
        expected,
        got: got.describe(),
    }
}

/// A job's key, looked up: `Ok` if it is of the kind the job needs, the submission's error
/// otherwise (unknown, or of another kind). Every submission path looks keys up through these.
impl KeyMaterial {
    /// An AES key.
    fn aes(&self, id: KeyId) -> Result<&Arc<AesKey>, SubmitError> {
        match self {
            KeyMaterial::Aes(k) => Ok(k),
            other => Err(wrong_kind(id, "an AES key", other)),
        }
    }

    /// An Ed25519 signing key.
    fn signing(&self, id: KeyId) -> Result<&Arc<SigningKey>, SubmitError> {
        match self {
            KeyMaterial::Signing(k) => Ok(k),
            other => Err(wrong_kind(id, "an Ed25519 signing key", other)),
        }
    }

    /// An Ed25519 public key: a verifying key, or a signing key's public half.
    fn public(&self, id: KeyId) -> Result<VerifyingKey, SubmitError> {
        match self {
            KeyMaterial::Verifying(k) => Ok(*k),
            KeyMaterial::Signing(k) => Ok(k.verifying_key()),
            other => Err(wrong_kind(id, "an Ed25519 key", other)),
        }
    }
}

/// The registry read-locked ([`KeyStore::read`]).
pub(crate) struct KeysRead<'a>(ShardedLockReadGuard<'a, FxHashMap<KeyId, KeyMaterial>>);

impl KeysRead<'_> {
    /// The AES key `id`, borrowed.
    pub(crate) fn aes(&self, id: KeyId) -> Result<&AesKey, SubmitError> {
        match self.0.get(&id) {
            Some(key) => key.aes(id).map(|k| &**k),
            None => Err(SubmitError::UnknownKey(id)),
        }
    }
}

/// The registry. Lookups take a read lock; registration and removal a write lock. The lock is
/// sharded (each thread reads through a shard of its own), so submitting threads on different
/// cores do not pass the lock's cache line between them on every job; ids are counters the
/// registry hands out, so the map needs no keyed hash.
#[derive(Debug, Default)]
pub(crate) struct KeyStore {
    next: AtomicU64,
    keys: ShardedLock<FxHashMap<KeyId, KeyMaterial>>,
}

impl KeyStore {
    fn insert(&self, key: KeyMaterial) -> KeyId {
        let id = KeyId(self.next.fetch_add(1, Ordering::Relaxed));
        self.keys
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, key);
        id
    }

    pub(crate) fn add_aes(&self, bytes: &[u8]) -> Result<KeyId, KeyError> {
        Ok(self.insert(KeyMaterial::Aes(Arc::new(AesKey::new(bytes)?))))
    }

    pub(crate) fn add_signing(&self, seed: &[u8]) -> Result<KeyId, KeyError> {
        Ok(self.insert(KeyMaterial::Signing(Arc::new(SigningKey::from_seed(seed)?))))
    }

    pub(crate) fn generate_signing(&self) -> Result<KeyId, KeyError> {
        let mut seed = Zeroizing::new([0u8; 32]);
        getrandom::fill(seed.as_mut_slice()).map_err(|e| KeyError::Random(e.to_string()))?;
        self.add_signing(seed.as_slice())
    }

    pub(crate) fn add_verifying(&self, bytes: &[u8]) -> Result<KeyId, KeyError> {
        Ok(self.insert(KeyMaterial::Verifying(VerifyingKey::from_bytes(bytes)?)))
    }

    pub(crate) fn remove(&self, id: KeyId) -> Result<(), KeyError> {
        self.keys
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .map(drop)
            .ok_or(KeyError::UnknownKey(id))
    }

    /// The registry, read-locked: what is looked up in it is borrowed, not shared, so a
    /// lookup writes no reference count. Hold it only briefly, and look nothing up through the
    /// store while holding it (a nested read could wait behind a writer).
    pub(crate) fn read(&self) -> KeysRead<'_> {
        KeysRead(self.keys.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn get(&self, id: KeyId) -> Option<KeyMaterial> {
        self.keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    fn lookup(&self, id: KeyId) -> Result<KeyMaterial, SubmitError> {
        self.get(id).ok_or(SubmitError::UnknownKey(id))
    }

    /// The AES key `id`, shared.
    pub(crate) fn aes(&self, id: KeyId) -> Result<Arc<AesKey>, SubmitError> {
        self.lookup(id)?.aes(id).cloned()
    }

    /// The Ed25519 signing key `id`, shared.
    pub(crate) fn signing(&self, id: KeyId) -> Result<Arc<SigningKey>, SubmitError> {
        self.lookup(id)?.signing(id).cloned()
    }

    /// The Ed25519 public key of `id` (a verifying key, or a signing key's public half).
    pub(crate) fn public(&self, id: KeyId) -> Result<VerifyingKey, SubmitError> {
        self.lookup(id)?.public(id)
    }

    pub(crate) fn verifying_key(&self, id: KeyId) -> Result<VerifyingKey, KeyError> {
        match self.get(id) {
            Some(KeyMaterial::Signing(k)) => Ok(k.verifying_key()),
            Some(KeyMaterial::Verifying(k)) => Ok(k),
            Some(KeyMaterial::Aes(_)) => Err(KeyError::WrongKind {
                key: id,
                expected: "an Ed25519 key",
            }),
            None => Err(KeyError::UnknownKey(id)),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}
