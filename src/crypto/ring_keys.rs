//! One AES key expanded by ring for GCM (the `ring` feature): the key an
//! [`AesKey`](crate::crypto::AesKey) holds beside its RustCrypto schedule. What seals and opens
//! with it is `ring_gcm.rs`; this file is apart so that the key type depends on nothing above
//! it.
//!
//! ring does not zeroize its keys. The key is kept in a box of its own, and on drop the box is
//! overwritten with the schedule of the all-zero key before it is freed (the overwrite made
//! observable with `black_box`, so that it is not removed as a dead store). Copies the
//! compiler makes on the stack while the key is built are not reached.

use std::fmt;
use std::hint::black_box;

use ring::aead::{AES_128_GCM, AES_256_GCM, Algorithm, LessSafeKey, UnboundKey};

/// One AES key expanded by ring for GCM.
pub(super) struct RingGcmKey {
    pub(super) key: Box<LessSafeKey>,
    algorithm: &'static Algorithm,
}

impl fmt::Debug for RingGcmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RingGcmKey(..)")
    }
}

impl RingGcmKey {
    /// Expands `key` for GCM: `None` for a 24-byte key, which ring does not take, or any
    /// length ring refuses (`AesKey::new` has checked it already).
    pub(super) fn new(key: &[u8]) -> Option<Self> {
        let algorithm = match key.len() {
            16 => &AES_128_GCM,
            32 => &AES_256_GCM,
            _ => return None,
        };
        let unbound = UnboundKey::new(algorithm, key).ok()?;
        Some(RingGcmKey {
            key: Box::new(LessSafeKey::new(unbound)),
            algorithm,
        })
    }
}

impl Drop for RingGcmKey {
    fn drop(&mut self) {
        let zero = [0u8; 32];
        let len = self.algorithm.key_len();
        if let Ok(unbound) = UnboundKey::new(self.algorithm, &zero[..len]) {
            *self.key = LessSafeKey::new(unbound);
            black_box(&*self.key);
        }
    }
}
