//! Helpers shared by the service integration tests: reference results computed with the plain
//! RustCrypto crates (`aes`, `cbc`, `ofb`, `cfb-mode`, `ctr`, and `aes-gcm` in one shot) and
//! `ed25519-dalek` (never through `cryptodispatch`), a small deterministic
//! byte generator, a tiny executor for the `Future` impl of `JobHandle`, and (in [`vectors`])
//! the parsers for the known-answer files under `tests/vectors`, shared with
//! the crypto tests. Each test binary uses only part of this, hence `dead_code`.
#![allow(dead_code)]

pub mod vectors;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use aes::{Aes128, Aes192, Aes256};
use cipher::block_padding::{NoPadding, Pkcs7};
use cipher::consts::U16;
use cipher::{
    Array, BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt, KeyInit,
    KeyIvInit, StreamCipher,
};
use cryptodispatch::packet::Mode;
use cryptodispatch::{AesOp, Direction, Padding};
use ed25519_dalek::{Signature, Signer};

/// Every plain operation: each unauthenticated mode in both directions, ECB and CBC also with
/// PKCS#7 padding.
pub fn plain_ops() -> Vec<AesOp> {
    let mut ops = Vec::new();
    for mode in Mode::UNAUTHENTICATED {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            ops.push(AesOp::new(direction, mode));
            if mode.needs_whole_blocks() {
                ops.push(AesOp::new(direction, mode).with_padding(Padding::Pkcs7));
            }
        }
    }
    ops
}

/// What the reference refuses: only bad PKCS#7 padding on decryption can happen for the inputs
/// the tests build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefBadPadding;

/// One-shot AES with the RustCrypto crates: `aes` for ECB (block by block, PKCS#7 by hand),
/// `cbc`, `ofb` and `cfb-mode` for the chained modes, `ctr` (`Ctr128BE`) for CTR. GCM has its
/// own reference, [`ref_gcm_seal`] and [`ref_gcm_open`].
pub fn ref_aes(key: &[u8], op: AesOp, iv: &[u8], data: &[u8]) -> Result<Vec<u8>, RefBadPadding> {
    macro_rules! with_cipher {
        ($c:ident => $body:expr) => {
            match key.len() {
                16 => {
                    type $c = Aes128;
                    $body
                }
                24 => {
                    type $c = Aes192;
                    $body
                }
                32 => {
                    type $c = Aes256;
                    $body
                }
                n => panic!("reference: bad AES key length {n}"),
            }
        };
    }
    let pad = op.padding == Padding::Pkcs7;
    let enc = op.direction == Direction::Encrypt;
    let mut buf = data.to_vec();
    match op.mode {
        Mode::Ecb => with_cipher!(C => {
            let c = C::new_from_slice(key).unwrap();
            if pad && enc {
                let n = 16 - buf.len() % 16;
                buf.extend(std::iter::repeat_n(n as u8, n));
            }
            assert_eq!(buf.len() % 16, 0, "reference ECB: unaligned input");
            for block in buf.chunks_exact_mut(16) {
                let block = <&mut Array<u8, U16>>::try_from(block).unwrap();
                if enc {
                    c.encrypt_block(block);
                } else {
                    c.decrypt_block(block);
                }
            }
            if pad && !enc {
                let n = *buf.last().ok_or(RefBadPadding)? as usize;
                if n == 0 || n > 16 || buf[buf.len() - n..].iter().any(|&b| b as usize != n) {
                    return Err(RefBadPadding);
                }
                buf.truncate(buf.len() - n);
            }
            Ok(buf)
        }),
        Mode::Cbc => with_cipher!(C => {
            if enc {
                let m = cbc::Encryptor::<C>::new_from_slices(key, iv).unwrap();
                let len = buf.len();
                if pad {
                    buf.resize(len + 16, 0);
                    let n = m.encrypt_padded::<Pkcs7>(&mut buf, len).unwrap().len();
                    buf.truncate(n);
                } else {
                    m.encrypt_padded::<NoPadding>(&mut buf, len).unwrap();
                }
                Ok(buf)
            } else {
                let m = cbc::Decryptor::<C>::new_from_slices(key, iv).unwrap();
                let n = if pad {
                    m.decrypt_padded::<Pkcs7>(&mut buf).map_err(|_| RefBadPadding)?.len()
                } else {
                    m.decrypt_padded::<NoPadding>(&mut buf).unwrap().len()
                };
                buf.truncate(n);
                Ok(buf)
            }
        }),
        Mode::Ofb => with_cipher!(C => {
            assert!(!pad);
            ofb::Ofb::<C>::new_from_slices(key, iv).unwrap().apply_keystream(&mut buf);
            Ok(buf)
        }),
        Mode::Cfb => with_cipher!(C => {
            assert!(!pad);
            if enc {
                cfb_mode::Encryptor::<C>::new_from_slices(key, iv).unwrap().encrypt(&mut buf);
            } else {
                cfb_mode::Decryptor::<C>::new_from_slices(key, iv).unwrap().decrypt(&mut buf);
            }
            Ok(buf)
        }),
        Mode::Ctr => with_cipher!(C => {
            assert!(!pad);
            ctr::Ctr128BE::<C>::new_from_slices(key, iv).unwrap().apply_keystream(&mut buf);
            Ok(buf)
        }),
        Mode::Gcm => panic!("reference: GCM has ref_gcm_seal and ref_gcm_open"),
    }
}

/// Runs `$body` with `$g` the `aes-gcm` type for a key of `$len` bytes (96-bit nonce, 128-bit
/// tag).
macro_rules! with_gcm {
    ($len:expr, $g:ident => $body:expr) => {
        match $len {
            16 => {
                type $g = aes_gcm::AesGcm<Aes128, aes_gcm::aead::consts::U12>;
                $body
            }
            24 => {
                type $g = aes_gcm::AesGcm<Aes192, aes_gcm::aead::consts::U12>;
                $body
            }
            32 => {
                type $g = aes_gcm::AesGcm<Aes256, aes_gcm::aead::consts::U12>;
                $body
            }
            n => panic!("reference: bad AES key length {n}"),
        }
    };
}

/// AES-GCM sealed in one shot by RustCrypto's `aes-gcm`: (ciphertext, tag).
pub fn ref_gcm_seal(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
    use aes_gcm::aead::{Aead, KeyInit, Payload};
    let mut out = with_gcm!(key.len(), G => G::new_from_slice(key)
        .unwrap()
        .encrypt(nonce.try_into().expect("12-byte nonce"), Payload { msg: pt, aad })
        .expect("aes-gcm seals"));
    let tag: [u8; 16] = out[out.len() - 16..].try_into().unwrap();
    out.truncate(out.len() - 16);
    (out, tag)
}

/// AES-GCM opened in one shot by RustCrypto's `aes-gcm`; `None` when the tag does not verify.
pub fn ref_gcm_open(
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    ct: &[u8],
    tag: &[u8],
) -> Option<Vec<u8>> {
    use aes_gcm::aead::{Aead, KeyInit, Payload};
    let msg = [ct, tag].concat();
    with_gcm!(key.len(), G => G::new_from_slice(key)
        .unwrap()
        .decrypt(nonce.try_into().expect("12-byte nonce"), Payload { msg: &msg, aad })
        .ok())
}

/// The Ed25519 public key of a 32-byte seed.
pub fn ed_public(seed: &[u8; 32]) -> [u8; 32] {
    ed25519_dalek::SigningKey::from_bytes(seed)
        .verifying_key()
        .to_bytes()
}

/// The Ed25519 signature of `msg` under the key of `seed`.
pub fn ed_sign(seed: &[u8; 32], msg: &[u8]) -> [u8; 64] {
    ed25519_dalek::SigningKey::from_bytes(seed)
        .sign(msg)
        .to_bytes()
}

/// Whether `sig` verifies (strictly, as the service does) over `msg` under `public`.
pub fn ed_verify(public: &[u8; 32], msg: &[u8], sig: &[u8; 64]) -> bool {
    ed25519_dalek::VerifyingKey::from_bytes(public)
        .is_ok_and(|k| k.verify_strict(msg, &Signature::from_bytes(sig)).is_ok())
}

/// SplitMix64: deterministic bytes from a seed, so strategies stay small and shrink well.
#[derive(Debug, Clone)]
pub struct Gen(u64);

impl Gen {
    pub fn new(seed: u64) -> Self {
        Gen(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        for b in &mut a {
            *b = self.next_u64() as u8;
        }
        a
    }
}

/// A waker that unparks the thread that made it and records that it was woken.
struct Unpark {
    thread: Thread,
    woken: AtomicBool,
    wakes: AtomicUsize,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.woken.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// What [`block_on`] saw: how often the future was polled and woken.
#[derive(Debug, Clone, Copy)]
pub struct BlockOnStats {
    pub polls: usize,
    pub wakes: usize,
}

/// Runs a future to completion on this thread: poll, park until woken, poll again. A future
/// that returns `Pending` and then never wakes its waker fails the test (after a generous 30 s)
/// instead of hanging it.
pub fn block_on<F: Future>(fut: F) -> (F::Output, BlockOnStats) {
    let unpark = Arc::new(Unpark {
        thread: thread::current(),
        woken: AtomicBool::new(false),
        wakes: AtomicUsize::new(0),
    });
    let waker = Waker::from(Arc::clone(&unpark));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    let mut polls = 0;
    loop {
        unpark.woken.store(false, Ordering::SeqCst);
        polls += 1;
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            let wakes = unpark.wakes.load(Ordering::SeqCst);
            return (out, BlockOnStats { polls, wakes });
        }
        let mut waited = Duration::ZERO;
        while !unpark.woken.load(Ordering::SeqCst) {
            assert!(
                waited < Duration::from_secs(30),
                "future returned Pending and was never woken"
            );
            thread::park_timeout(Duration::from_millis(50));
            waited += Duration::from_millis(50);
        }
    }
}

/// The number of cores `NodeSpec::pinned` may name.
pub fn cores() -> usize {
    core_affinity::get_core_ids().map_or(0, |c| c.len())
}

/// A waker that, when woken, submits a 16-byte ECB job to `service` and waits for it, keeping
/// the outcome: on a worker thread, a blocking call on the service (unless the job runs on the
/// submitting thread itself).
pub struct SubmittingWaker {
    pub service: Arc<cryptodispatch::Service>,
    pub key: cryptodispatch::KeyId,
    pub outcome:
        std::sync::Mutex<Option<Result<cryptodispatch::JobOutput, cryptodispatch::JobError>>>,
}

impl SubmittingWaker {
    pub fn new(service: &Arc<cryptodispatch::Service>, key: cryptodispatch::KeyId) -> Arc<Self> {
        Arc::new(SubmittingWaker {
            service: Arc::clone(service),
            key,
            outcome: std::sync::Mutex::new(None),
        })
    }
}

impl Wake for SubmittingWaker {
    fn wake(self: Arc<Self>) {
        let job = cryptodispatch::Job::encrypt(self.key, Mode::Ecb, &[], vec![1; 16]);
        let out = match self.service.submit(job) {
            Ok(h) => h.wait(),
            Err(e) => Err(cryptodispatch::JobError::Internal(e.to_string())),
        };
        *self.outcome.lock().unwrap() = Some(out);
    }
}

/// Packets the AES nodes of `s` have run.
pub fn node_packets(s: &cryptodispatch::Service) -> u64 {
    s.metrics()
        .nodes_of(cryptodispatch::ClusterKind::Aes)
        .map(|n| n.packets)
        .sum()
}
