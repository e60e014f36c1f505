//! Known-answer tests: the NIST CAVP AES vectors (ECB, CBC, OFB, CFB-128; GFSbox, KeySbox,
//! VarKey, VarTxt and MMT; 128-, 192- and 256-bit keys) and the Ed25519 `sign.input` vectors
//! (the SUPERCOP / RFC 8032 test list), run through `cryptodispatch::crypto`.
//!
//! Every count is asserted, so a parser that silently reads nothing cannot make a test pass.

use crate::common;

use std::fs;

use common::vectors::{
    SignVector, classify, expected_per_section, parse_rsp, parse_sign_line, rsp_files, vectors_dir,
};
use cryptodispatch::crypto::{
    AesKey, AesOp, BLOCK, ChainState, Direction, SigningKey, VerifyingKey,
};
use cryptodispatch::packet::Mode;

/// Runs `input` packet by packet, one block per packet, each packet starting from the state the
/// previous one left.
fn run_block_per_packet(key: &AesKey, op: AesOp, iv: &[u8], input: &[u8], at: &str) -> Vec<u8> {
    let mut state = ChainState::for_mode(op.mode, iv).unwrap();
    let mut out = Vec::with_capacity(input.len());
    let packets: Vec<&[u8]> = input.chunks(BLOCK).collect();
    for (i, packet) in packets.iter().enumerate() {
        let last = i + 1 == packets.len();
        let mut buf = packet.to_vec();
        let n = key
            .process(op, &mut state, &mut buf, packet.len(), last)
            .unwrap_or_else(|e| panic!("{at}: packet {i}: {e}"));
        assert_eq!(n, packet.len(), "{at}: packet {i} output length");
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn aes_cavp_known_answers() {
    let dir = vectors_dir("aes");
    let files = rsp_files();

    let mut total = 0;
    let mut multi_block = 0;
    for file in &files {
        let (mode, kind, bits) = classify(file);
        let text = fs::read_to_string(dir.join(file)).unwrap();
        let records = parse_rsp(&text, file, mode);
        assert!(!records.is_empty(), "{file}: no records");

        let per_section = expected_per_section(kind, bits, file);
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let n = records.iter().filter(|r| r.direction == direction).count();
            assert_eq!(
                n, per_section,
                "{file}: records in the {direction:?} section"
            );
        }
        // Independent of the parser: one record per `COUNT` line.
        let count_lines = text
            .lines()
            .filter(|l| l.trim_start().starts_with("COUNT"))
            .count();
        assert_eq!(records.len(), count_lines, "{file}: records vs COUNT lines");

        for rec in &records {
            let at = &rec.at;
            assert_eq!(rec.mode, mode, "{at}: mode");
            assert_eq!(rec.key.len() * 8, bits, "{at}: key length");
            // `parse_rsp` has checked the IV against the mode: none for ECB, one otherwise.
            let iv = rec.iv.as_slice();
            if mode == Mode::Ecb {
                assert!(iv.is_empty(), "{at}: ECB record with an IV");
            } else {
                assert!(!iv.is_empty(), "{at}: no IV");
            }
            let (input, expected) = (&rec.input, &rec.expected);
            assert_eq!(input.len(), expected.len(), "{at}: lengths");
            assert!(
                !input.is_empty() && input.len() % BLOCK == 0,
                "{at}: data is not whole blocks"
            );

            let key = AesKey::new(&rec.key).unwrap_or_else(|e| panic!("{at}: {e}"));
            let op = AesOp::new(rec.direction, mode);

            let one_shot = key
                .one_shot(op, iv, input)
                .unwrap_or_else(|e| panic!("{at}: one_shot: {e}"));
            assert_eq!(
                hex::encode(&one_shot),
                hex::encode(expected),
                "{at}: one_shot"
            );

            let packets = run_block_per_packet(&key, op, iv, input, at);
            assert_eq!(
                hex::encode(&packets),
                hex::encode(expected),
                "{at}: packets"
            );

            if input.len() > BLOCK {
                multi_block += 1;
            }
            total += 1;
        }
    }
    // 2138 records per mode (GFSbox 36, KeySbox 122, MMT 60, VarKey 1152, VarTxt 768).
    assert_eq!(total, 4 * 2138, "AES records checked");
    // MMT: COUNT 1..=9 of each section have 2..=10 blocks.
    assert_eq!(
        multi_block,
        4 * 3 * 2 * 9,
        "multi-block AES records checked"
    );
}

// ---------------------------------------------------------------------------------------------
// Ed25519: `sign.input`
// ---------------------------------------------------------------------------------------------

fn check_sign_vector(v: &SignVector, at: &str) {
    let signer = SigningKey::from_seed(&v.seed).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_eq!(
        hex::encode(signer.sign(&v.msg)),
        hex::encode(&v.sig),
        "{at}: signature"
    );
    assert_eq!(
        hex::encode(signer.verifying_key().to_bytes()),
        hex::encode(&v.public),
        "{at}: derived public key"
    );

    let public = VerifyingKey::from_bytes(&v.public).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_eq!(public, signer.verifying_key(), "{at}: decoded public key");
    assert_eq!(public.verify(&v.msg, &v.sig), Ok(true), "{at}: verify");

    let mut msg = v.msg.clone();
    match msg.last_mut() {
        Some(byte) => *byte ^= 0x01,
        None => msg.push(0),
    }
    assert_eq!(
        public.verify(&msg, &v.sig),
        Ok(false),
        "{at}: tampered message"
    );

    // Byte 5 lies in R, byte 40 in S (bit 0, so S stays below 2^253 and is only wrong).
    for (byte, part) in [(5, "R"), (40, "S")] {
        let mut sig = v.sig.clone();
        sig[byte] ^= 0x01;
        assert_eq!(
            public.verify(&v.msg, &sig),
            Ok(false),
            "{at}: tampered {part}"
        );
    }
}

#[test]
fn ed25519_sign_input_known_answers() {
    let path = vectors_dir("ed25519").join("sign.input");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1024, "lines in sign.input");

    // Ed25519 is slow in debug builds: spread the lines over a few threads.
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get().min(16));
    let checked: usize = std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(lines.len().div_ceil(threads))
            .map(|chunk| {
                s.spawn(move || {
                    for &(i, line) in chunk {
                        let at = format!("sign.input line {}", i + 1);
                        let v = parse_sign_line(line.trim(), &at);
                        check_sign_vector(&v, &v.at);
                    }
                    chunk.len()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(checked, 1024, "sign.input lines checked");
}
