//! Chaining-state tests, in the spirit of RustCrypto's `iv_state_test!`: a job cut into packets,
//! each packet run by a *fresh* key on the [`ChainState`] the previous packet handed on, gives
//! exactly the one-shot result of the RustCrypto modes (`cbc`, `ofb`, `cfb-mode`, `ctr`, and
//! `aes` block by block for ECB), and of [`AesKey::one_shot`]. The same for GCM, whose packets
//! hand on a [`GcmState`], against `aes-gcm` in one shot.
//!
//! Every implementation ([`AesImpl::candidates`]: RustCrypto, the lanes, AWS-LC with the
//! `aws-lc` feature) runs every plan, and one more run of each plan takes the implementations
//! in turn packet by packet, so a job whose packets land on nodes that chose differently still
//! gives the one-shot bytes.

use aes::{Aes128, Aes192, Aes256};
use cipher::block_padding::Pkcs7;
use cipher::consts::U16;
use cipher::{
    Array, BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt,
    BlockSizeUser, KeyInit, KeyIvInit, StreamCipher,
};
use cryptodispatch::crypto::{
    AesImpl, AesKey, AesOp, BLOCK, ChainState, Direction, GcmState, Padding, padded_len,
};
use cryptodispatch::error::CryptoError;
use cryptodispatch::packet::Mode;
use proptest::prelude::*;

const KEY_LENS: [usize; 3] = [16, 24, 32];
const DIRECTIONS: [Direction; 2] = [Direction::Encrypt, Direction::Decrypt];
/// Whole blocks in the messages of the exhaustive tests.
const MSG_BLOCKS: usize = 8;

/// Deterministic filler bytes (xorshift), different for each `seed`.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The reference: RustCrypto's own modes, run in one shot
// ---------------------------------------------------------------------------------------------

fn as_blocks(data: &mut [u8]) -> &mut [Array<u8, U16>] {
    let (blocks, tail) = Array::slice_as_chunks_mut(data);
    assert!(tail.is_empty(), "reference needs whole blocks");
    blocks
}

/// What RustCrypto gives for `input` in one shot. Padded decryption must get valid padding.
fn reference_with<C>(op: AesOp, key: &[u8], iv: &[u8], input: &[u8]) -> Vec<u8>
where
    C: KeyInit + BlockCipherEncrypt + BlockCipherDecrypt + BlockSizeUser<BlockSize = U16>,
{
    let pad = op.padding == Padding::Pkcs7;
    let mut buf = input.to_vec();
    match (op.mode, op.direction) {
        // The `aes` crate has no ECB type: pad by hand and run the blocks.
        (Mode::Ecb, Direction::Encrypt) => {
            if pad {
                let n = BLOCK - input.len() % BLOCK;
                buf.extend(std::iter::repeat_n(n as u8, n));
            }
            C::new_from_slice(key)
                .unwrap()
                .encrypt_blocks(as_blocks(&mut buf));
        }
        (Mode::Ecb, Direction::Decrypt) => {
            C::new_from_slice(key)
                .unwrap()
                .decrypt_blocks(as_blocks(&mut buf));
            if pad {
                let n = *buf.last().expect("padded ciphertext is not empty") as usize;
                assert!((1..=BLOCK).contains(&n), "reference: bad padding");
                assert!(buf[buf.len() - n..].iter().all(|&b| b as usize == n));
                buf.truncate(buf.len() - n);
            }
        }
        (Mode::Cbc, Direction::Encrypt) => {
            let m = cbc::Encryptor::<C>::new_from_slices(key, iv).unwrap();
            if pad {
                let mut out = vec![0; padded_len(input.len())];
                return m
                    .encrypt_padded_b2b::<Pkcs7>(input, &mut out)
                    .unwrap()
                    .to_vec();
            }
            let mut m = m;
            m.encrypt_blocks(as_blocks(&mut buf));
        }
        (Mode::Cbc, Direction::Decrypt) => {
            let m = cbc::Decryptor::<C>::new_from_slices(key, iv).unwrap();
            if pad {
                return m.decrypt_padded::<Pkcs7>(&mut buf).unwrap().to_vec();
            }
            let mut m = m;
            m.decrypt_blocks(as_blocks(&mut buf));
        }
        (Mode::Ofb, _) => ofb::Ofb::<C>::new_from_slices(key, iv)
            .unwrap()
            .apply_keystream(&mut buf),
        (Mode::Cfb, Direction::Encrypt) => cfb_mode::Encryptor::<C>::new_from_slices(key, iv)
            .unwrap()
            .encrypt(&mut buf),
        (Mode::Cfb, Direction::Decrypt) => cfb_mode::Decryptor::<C>::new_from_slices(key, iv)
            .unwrap()
            .decrypt(&mut buf),
        (Mode::Ctr, _) => ctr::Ctr128BE::<C>::new_from_slices(key, iv)
            .unwrap()
            .apply_keystream(&mut buf),
        (Mode::Gcm, _) => panic!("GCM has its own reference"),
    }
    buf
}

fn reference(op: AesOp, key: &[u8], iv: &[u8], input: &[u8]) -> Vec<u8> {
    match key.len() {
        16 => reference_with::<Aes128>(op, key, iv, input),
        24 => reference_with::<Aes192>(op, key, iv, input),
        32 => reference_with::<Aes256>(op, key, iv, input),
        n => panic!("no AES for a {n}-byte key"),
    }
}

// ---------------------------------------------------------------------------------------------
// Packet-by-packet runs
// ---------------------------------------------------------------------------------------------

/// Runs `input` as packets of the given lengths (which sum to `input.len()`; the last one is the
/// job's last packet). Every packet gets a freshly expanded key and a state rebuilt from the 16
/// bytes the previous packet handed on, as a different node would, and runs on `impls[i %
/// impls.len()]`.
fn run_packets(
    op: AesOp,
    key: &[u8],
    iv: &[u8],
    input: &[u8],
    sizes: &[usize],
    impls: &[AesImpl],
) -> Result<Vec<u8>, CryptoError> {
    assert_eq!(sizes.iter().sum::<usize>(), input.len(), "packet plan");
    let mut handed_on = *ChainState::for_mode(op.mode, iv)?.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &len) in sizes.iter().enumerate() {
        let last = i + 1 == sizes.len();
        let node_key = AesKey::new(key)?;
        let mut state = ChainState::from_iv(&handed_on)?;
        let room = if last && op.pads_on_encrypt() {
            padded_len(len)
        } else {
            len
        };
        let mut buf = vec![0; room];
        buf[..len].copy_from_slice(&input[start..start + len]);
        let n =
            node_key.process_with(impls[i % impls.len()], op, &mut state, &mut buf, len, last)?;
        out.extend_from_slice(&buf[..n]);
        handed_on = *state.as_bytes();
        start += len;
    }
    Ok(out)
}

/// The packet plans for a job of `len` bytes: cut once at every block boundary (first packet
/// `k` blocks, the rest last), and cut into packets of every size from 1 to 8 blocks (the last
/// packet takes what remains). With `last_nonempty`, plans whose last packet is empty are left
/// out (a padded decryption strips its padding from the last packet).
fn plans(len: usize, last_nonempty: bool) -> Vec<(String, Vec<usize>)> {
    let mut plans = Vec::new();
    for k in 0..=len / BLOCK {
        let first = k * BLOCK;
        plans.push((format!("split after {k} blocks"), vec![first, len - first]));
    }
    for blocks in 1..=MSG_BLOCKS {
        plans.push((
            format!("packets of {blocks} blocks"),
            every(len, blocks * BLOCK),
        ));
    }
    if last_nonempty {
        plans.retain(|(_, sizes)| sizes.last() != Some(&0));
    }
    plans
}

/// Packets of `size` bytes, the last one taking what remains (one empty packet for no data).
fn every(len: usize, size: usize) -> Vec<usize> {
    if len == 0 {
        return vec![0];
    }
    let mut sizes = vec![size; len.div_ceil(size)];
    *sizes.last_mut().unwrap() = len - size * (sizes.len() - 1);
    sizes
}

/// Checks every plan for one job against the RustCrypto reference and against `one_shot`, on
/// every implementation and on all of them in turn. Returns the number of plans checked.
fn check_job(op: AesOp, key: &[u8], iv: &[u8], input: &[u8], expected: &[u8], what: &str) -> usize {
    let one_shot = AesKey::new(key).unwrap().one_shot(op, iv, input);
    assert_eq!(one_shot.as_deref(), Ok(expected), "{what}: one_shot");
    let impls = AesImpl::candidates(op);
    let lanes = if op.is_serial() { 4 } else { 0 };
    let libraries =
        usize::from(AesImpl::AwsLc.is_built()) + usize::from(AesImpl::OpenSsl.is_built());
    assert_eq!(
        impls.len(),
        1 + lanes + libraries,
        "{what}: implementations {impls:?}"
    );
    for &imp in &impls {
        let got = AesKey::new(key).unwrap().one_shot_with(imp, op, iv, input);
        assert_eq!(got.as_deref(), Ok(expected), "{what}: one_shot on {imp}");
    }

    let last_nonempty = op.padding == Padding::Pkcs7 && op.direction == Direction::Decrypt;
    let plans = plans(input.len(), last_nonempty);
    for (label, sizes) in &plans {
        for &imp in &impls {
            let got = run_packets(op, key, iv, input, sizes, &[imp]);
            assert_eq!(
                got.as_deref(),
                Ok(expected),
                "{what}: {label} {sizes:?} on {imp}"
            );
        }
        let got = run_packets(op, key, iv, input, sizes, &impls);
        assert_eq!(
            got.as_deref(),
            Ok(expected),
            "{what}: {label} {sizes:?}, mixed"
        );
        let reversed: Vec<AesImpl> = impls.iter().rev().copied().collect();
        let got = run_packets(op, key, iv, input, sizes, &reversed);
        assert_eq!(
            got.as_deref(),
            Ok(expected),
            "{what}: {label} {sizes:?}, mixed back"
        );
    }
    plans.len()
}

#[test]
fn packets_resume_from_the_handed_on_state() {
    let mut runs = 0;
    for mode in Mode::UNAUTHENTICATED {
        // OFB, CFB and CTR also take a job whose last block is partial.
        let extras = if mode.needs_whole_blocks() {
            0..1
        } else {
            0..BLOCK
        };
        for key_len in KEY_LENS {
            for direction in DIRECTIONS {
                for extra in extras.clone() {
                    let seed = (key_len * 100 + extra) as u64;
                    let key = bytes(seed, key_len);
                    let iv = bytes(seed + 1, BLOCK);
                    let input = bytes(seed + 2, MSG_BLOCKS * BLOCK + extra);
                    let op = AesOp::new(direction, mode);
                    let expected = reference(op, &key, &iv, &input);
                    let what = format!(
                        "{mode:?} AES-{} {direction:?}, {} bytes",
                        key_len * 8,
                        input.len()
                    );
                    runs += check_job(op, &key, &iv, &input, &expected, &what);
                }
            }
        }
    }
    // Per job: 9 one-cut plans and 8 packet sizes. Jobs: ECB, CBC 1 length each; OFB, CFB,
    // CTR 16.
    assert_eq!(
        runs,
        17 * KEY_LENS.len() * DIRECTIONS.len() * (1 + 1 + 16 + 16 + 16)
    );
}

#[test]
fn padded_packets_match_one_shot_padding() {
    let lens = (0..=2 * BLOCK + 1).chain([
        MSG_BLOCKS * BLOCK - 1,
        MSG_BLOCKS * BLOCK,
        MSG_BLOCKS * BLOCK + 1,
    ]);
    let mut runs = 0;
    for mode in [Mode::Ecb, Mode::Cbc] {
        for key_len in KEY_LENS {
            for len in lens.clone() {
                let seed = (key_len * 1000 + len) as u64;
                let key = bytes(seed, key_len);
                let iv = bytes(seed + 1, BLOCK);
                let msg = bytes(seed + 2, len);
                let what = format!("{mode:?} AES-{} PKCS#7, {len}-byte message", key_len * 8);

                let enc = AesOp::new(Direction::Encrypt, mode).with_padding(Padding::Pkcs7);
                let ct = reference(enc, &key, &iv, &msg);
                assert_eq!(ct.len(), padded_len(len), "{what}: reference length");
                runs += check_job(enc, &key, &iv, &msg, &ct, &format!("{what}, encrypt"));

                let dec = AesOp::new(Direction::Decrypt, mode).with_padding(Padding::Pkcs7);
                assert_eq!(
                    reference(dec, &key, &iv, &ct),
                    msg,
                    "{what}: reference round trip"
                );
                runs += check_job(dec, &key, &iv, &ct, &msg, &format!("{what}, decrypt"));
            }
        }
    }
    // 37 lengths; per length, (len / 16 + 1) one-cut plans and 8 packet sizes each way.
    assert_eq!(runs, 2 * KEY_LENS.len() * (2 * 80 + 16 * 37), "padded runs");
}

// ---------------------------------------------------------------------------------------------
// GCM: the GHASH state handed on
// ---------------------------------------------------------------------------------------------

/// `aes-gcm` in one shot: ciphertext and tag.
fn gcm_reference(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, Vec<u8>) {
    use aes_gcm::aead::consts::U12;
    use aes_gcm::aead::{Aead, Payload};
    let payload = Payload { msg: pt, aad };
    let nonce = nonce.try_into().unwrap();
    let mut out = match key.len() {
        16 => aes_gcm::AesGcm::<Aes128, U12>::new_from_slice(key)
            .unwrap()
            .encrypt(nonce, payload),
        24 => aes_gcm::AesGcm::<Aes192, U12>::new_from_slice(key)
            .unwrap()
            .encrypt(nonce, payload),
        32 => aes_gcm::AesGcm::<Aes256, U12>::new_from_slice(key)
            .unwrap()
            .encrypt(nonce, payload),
        n => panic!("no AES for a {n}-byte key"),
    }
    .unwrap();
    let tag = out.split_off(out.len() - 16);
    (out, tag)
}

/// Runs GCM over `input` in packets of the given lengths on `implementation` (one that chains
/// GCM), each with a freshly expanded key and the [`GcmState`] the previous packet handed on;
/// returns the output and, sealing, the tag.
#[allow(clippy::too_many_arguments)]
fn run_gcm_packets(
    implementation: AesImpl,
    direction: Direction,
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    input: &[u8],
    sizes: &[usize],
    tag: &[u8],
) -> Result<(Vec<u8>, Option<[u8; 16]>), CryptoError> {
    let mut state: GcmState =
        AesKey::new(key)?.gcm_start_with(implementation, direction, nonce, aad)?;
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &len) in sizes.iter().enumerate() {
        let node_key = AesKey::new(key)?;
        let mut buf = input[start..start + len].to_vec();
        start += len;
        if i + 1 < sizes.len() {
            node_key.gcm_update(direction, &mut state, &mut buf)?;
            out.extend_from_slice(&buf);
            continue;
        }
        return match direction {
            Direction::Encrypt => {
                let t = node_key.gcm_seal_final(state, &mut buf)?;
                out.extend_from_slice(&buf);
                Ok((out, Some(t)))
            }
            Direction::Decrypt => {
                node_key.gcm_open_final(state, &mut buf, tag)?;
                out.extend_from_slice(&buf);
                Ok((out, None))
            }
        };
    }
    unreachable!("a plan has at least one packet")
}

#[test]
fn gcm_packets_resume_from_the_handed_on_state() {
    let mut runs = 0;
    for key_len in KEY_LENS {
        for extra in 0..BLOCK {
            for aad_len in [0, 5, 16, 33] {
                let seed = (key_len * 1000 + extra * 10 + aad_len) as u64;
                let key = bytes(seed, key_len);
                let nonce = bytes(seed + 1, 12);
                let aad = bytes(seed + 2, aad_len);
                let pt = bytes(seed + 3, MSG_BLOCKS * BLOCK + extra);
                let (ct, tag) = gcm_reference(&key, &nonce, &aad, &pt);
                let what = format!("AES-{}-GCM, {} bytes, AAD {aad_len}", key_len * 8, pt.len());
                for (label, sizes) in plans(pt.len(), false) {
                    for imp in AesImpl::gcm_chain_candidates() {
                        let run = |direction, input: &[u8], tag: &[u8]| {
                            run_gcm_packets(imp, direction, &key, &nonce, &aad, input, &sizes, tag)
                        };
                        let sealed = run(Direction::Encrypt, &pt, &[]);
                        assert_eq!(
                            sealed,
                            Ok((ct.clone(), Some(tag[..].try_into().unwrap()))),
                            "{what}: seal {label} on {imp}"
                        );
                        let opened = run(Direction::Decrypt, &ct, &tag);
                        assert_eq!(
                            opened,
                            Ok((pt.clone(), None)),
                            "{what}: open {label} on {imp}"
                        );
                        let mut bad = tag.clone();
                        bad[0] ^= 1;
                        let forged = run(Direction::Decrypt, &ct, &bad);
                        assert_eq!(
                            forged,
                            Err(CryptoError::AuthenticationFailed),
                            "{what}: {label} on {imp}"
                        );
                    }
                    runs += 1;
                }
                // A job of one packet runs as one call on every GCM implementation.
                for imp in AesImpl::candidates(AesOp::new(Direction::Encrypt, Mode::Gcm)) {
                    let k = AesKey::new(&key).unwrap();
                    let sealed = k.gcm_seal_with(imp, &nonce, &aad, &pt).unwrap();
                    assert_eq!((&sealed.0, &sealed.1[..]), (&ct, &tag[..]), "{what}: {imp}");
                    let opened = k.gcm_open_with(imp, &nonce, &aad, &ct, &tag);
                    assert_eq!(opened, Ok(pt.clone()), "{what}: open on {imp}");
                    let mut bad = tag.clone();
                    bad[15] ^= 0x80;
                    let mut buf = ct.clone();
                    assert_eq!(
                        k.gcm_open_in_place_with(imp, &nonce, &aad, &mut buf, &bad),
                        Err(CryptoError::AuthenticationFailed),
                        "{what}: forged on {imp}"
                    );
                    assert!(
                        buf == ct || buf.iter().all(|&b| b == 0),
                        "{what}: {imp} released bytes"
                    );
                }
            }
        }
    }
    // Per job: 9 one-cut plans and 8 packet sizes; 16 lengths and 4 AAD lengths per key.
    assert_eq!(runs, 17 * KEY_LENS.len() * 16 * 4);
}

// ---------------------------------------------------------------------------------------------
// Random jobs
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_jobs_match_rustcrypto(
        mode in prop::sample::select(Mode::UNAUTHENTICATED.to_vec()),
        key_len in prop::sample::select(KEY_LENS.to_vec()),
        direction in prop::sample::select(DIRECTIONS.to_vec()),
        pad in any::<bool>(),
        key in prop::array::uniform32(any::<u8>()),
        iv in prop::array::uniform16(any::<u8>()),
        mut msg in prop::collection::vec(any::<u8>(), 0..600),
        packet_blocks in 1usize..=16,
    ) {
        let key = &key[..key_len];
        let padding = if pad && mode.needs_whole_blocks() { Padding::Pkcs7 } else { Padding::None };
        let op = AesOp::new(direction, mode).with_padding(padding);
        if mode.needs_whole_blocks() && padding == Padding::None {
            msg.truncate(msg.len() - msg.len() % BLOCK);
        }
        // A padded decryption takes a validly padded ciphertext and gives the message back.
        let (input, expected) = if op.padding == Padding::Pkcs7 && direction == Direction::Decrypt {
            let enc = AesOp { direction: Direction::Encrypt, ..op };
            (reference(enc, key, &iv, &msg), msg)
        } else {
            let out = reference(op, key, &iv, &msg);
            (msg, out)
        };
        let sizes = every(input.len(), packet_blocks * BLOCK);
        let got = run_packets(op, key, &iv, &input, &sizes, &[AesImpl::RustCrypto]);
        prop_assert_eq!(got.as_deref(), Ok(&expected[..]), "packets {:?}", sizes);
        let impls = AesImpl::candidates(op);
        let got = run_packets(op, key, &iv, &input, &sizes, &impls);
        prop_assert_eq!(got.as_deref(), Ok(&expected[..]), "packets {:?} on {:?}", sizes, impls);
    }
}
