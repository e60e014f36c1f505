//! Known-answer tests: the NIST CAVP AES vectors (ECB, CBC, OFB, CFB-128; GFSbox, KeySbox,
//! VarKey, VarTxt and MMT; 128-, 192- and 256-bit keys) and the Ed25519 `sign.input` vectors
//! (the SUPERCOP / RFC 8032 test list), run through `cryptodispatch::crypto`.
//!
//! Every count is asserted, so a parser that silently reads nothing cannot make a test pass.

use std::fs;
use std::path::{Path, PathBuf};

use cryptodispatch::crypto::{
    AesKey, AesOp, BLOCK, ChainState, Direction, SIGNATURE_LEN, SigningKey, VerifyingKey,
};
use cryptodispatch::packet::Mode;

fn vectors_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(sub)
}

fn unhex(s: &str, what: &str) -> Vec<u8> {
    hex::decode(s).unwrap_or_else(|e| panic!("{what}: bad hex {s:?}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// AES: NIST CAVP `.rsp` files
// ---------------------------------------------------------------------------------------------

/// One CAVP record.
#[derive(Debug)]
struct Record {
    direction: Direction,
    count: u32,
    key: Vec<u8>,
    iv: Option<Vec<u8>>,
    plaintext: Vec<u8>,
    ciphertext: Vec<u8>,
}

/// A record being read: fields arrive one line at a time.
#[derive(Default)]
struct Partial {
    count: Option<u32>,
    key: Option<Vec<u8>>,
    iv: Option<Vec<u8>>,
    plaintext: Option<Vec<u8>>,
    ciphertext: Option<Vec<u8>>,
}

impl Partial {
    fn finish(self, direction: Direction, file: &str) -> Record {
        let count = self
            .count
            .unwrap_or_else(|| panic!("{file}: record without COUNT"));
        let missing = |field: &str| -> ! { panic!("{file} COUNT {count}: no {field}") };
        Record {
            direction,
            count,
            key: self.key.unwrap_or_else(|| missing("KEY")),
            iv: self.iv,
            plaintext: self.plaintext.unwrap_or_else(|| missing("PLAINTEXT")),
            ciphertext: self.ciphertext.unwrap_or_else(|| missing("CIPHERTEXT")),
        }
    }
}

/// Parses a CAVP response file into its records, in file order.
fn parse_rsp(text: &str, file: &str) -> Vec<Record> {
    let mut records = Vec::new();
    let mut section: Option<Direction> = None;
    let mut current: Option<Partial> = None;

    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let at = || format!("{file}:{}", lineno + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            if let Some(done) = current.take() {
                records.push(done.finish(section.unwrap(), file));
            }
            section = Some(match line {
                "[ENCRYPT]" => Direction::Encrypt,
                "[DECRYPT]" => Direction::Decrypt,
                other => panic!("{}: unknown section {other:?}", at()),
            });
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{}: not `NAME = value`: {line:?}", at()));
        let (name, value) = (name.trim(), value.trim());
        let dir = section.unwrap_or_else(|| panic!("{}: {name} before any section", at()));

        if name == "COUNT" {
            if let Some(done) = current.take() {
                records.push(done.finish(dir, file));
            }
            let count = value
                .parse()
                .unwrap_or_else(|e| panic!("{}: bad COUNT {value:?}: {e}", at()));
            current = Some(Partial {
                count: Some(count),
                ..Partial::default()
            });
            continue;
        }
        let rec = current
            .as_mut()
            .unwrap_or_else(|| panic!("{}: {name} before COUNT", at()));
        let slot = match name {
            "KEY" => &mut rec.key,
            "IV" => &mut rec.iv,
            "PLAINTEXT" => &mut rec.plaintext,
            "CIPHERTEXT" => &mut rec.ciphertext,
            other => panic!("{}: unknown field {other:?}", at()),
        };
        assert!(slot.is_none(), "{}: {name} given twice", at());
        *slot = Some(unhex(value, &at()));
    }
    if let Some(done) = current.take() {
        records.push(done.finish(section.unwrap(), file));
    }
    records
}

/// The mode, test kind and key size a file name encodes, e.g. `CFB128MMT256.rsp`.
fn classify(file: &str) -> (Mode, &str, usize) {
    let stem = file.strip_suffix(".rsp").expect(".rsp file");
    let (mode, rest) = [
        ("CFB128", Mode::Cfb),
        ("ECB", Mode::Ecb),
        ("CBC", Mode::Cbc),
        ("OFB", Mode::Ofb),
    ]
    .into_iter()
    .find_map(|(prefix, mode)| stem.strip_prefix(prefix).map(|rest| (mode, rest)))
    .unwrap_or_else(|| panic!("{file}: unknown mode prefix"));
    let (kind, bits) = rest.split_at(rest.len() - 3);
    let bits: usize = bits
        .parse()
        .unwrap_or_else(|e| panic!("{file}: no key size: {e}"));
    (mode, kind, bits)
}

/// How many records each section of a CAVP file holds.
fn expected_per_section(kind: &str, bits: usize, file: &str) -> usize {
    match (kind, bits) {
        ("GFSbox", 128) => 7,
        ("GFSbox", 192) => 6,
        ("GFSbox", 256) => 5,
        ("KeySbox", 128) => 21,
        ("KeySbox", 192) => 24,
        ("KeySbox", 256) => 16,
        ("VarKey", bits) => bits,
        ("VarTxt", _) => 128,
        ("MMT", _) => 10,
        _ => panic!("{file}: unknown test kind {kind:?} / {bits}"),
    }
}

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
    let mut files: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".rsp"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 60, "AES .rsp files in {}", dir.display());

    let mut total = 0;
    let mut multi_block = 0;
    for file in &files {
        let (mode, kind, bits) = classify(file);
        let text = fs::read_to_string(dir.join(file)).unwrap();
        let records = parse_rsp(&text, file);
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
            let at = format!("{file} [{:?}] COUNT {}", rec.direction, rec.count);
            assert_eq!(rec.key.len() * 8, bits, "{at}: key length");
            let iv = match (mode, &rec.iv) {
                (Mode::Ecb, None) => &[][..],
                (Mode::Ecb, Some(_)) => panic!("{at}: ECB record with an IV"),
                (_, Some(iv)) => iv.as_slice(),
                (_, None) => panic!("{at}: no IV"),
            };
            assert_eq!(rec.plaintext.len(), rec.ciphertext.len(), "{at}: lengths");
            assert!(
                !rec.plaintext.is_empty() && rec.plaintext.len() % BLOCK == 0,
                "{at}: data is not whole blocks"
            );

            let (input, expected) = match rec.direction {
                Direction::Encrypt => (&rec.plaintext, &rec.ciphertext),
                Direction::Decrypt => (&rec.ciphertext, &rec.plaintext),
            };
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

            let packets = run_block_per_packet(&key, op, iv, input, &at);
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

/// One line of `sign.input`: `sk||pk:pk:msg:sig||msg:`.
struct SignVector {
    seed: Vec<u8>,
    public: Vec<u8>,
    msg: Vec<u8>,
    sig: Vec<u8>,
}

fn parse_sign_line(line: &str, at: &str) -> SignVector {
    let fields: Vec<&str> = line.split(':').collect();
    assert_eq!(
        fields.len(),
        5,
        "{at}: expected 4 fields and a trailing ':'"
    );
    assert!(fields[4].is_empty(), "{at}: text after the last ':'");
    let secret = unhex(fields[0], at);
    let public = unhex(fields[1], at);
    let msg = unhex(fields[2], at);
    let sig_msg = unhex(fields[3], at);
    assert_eq!(secret.len(), 64, "{at}: sk||pk length");
    assert_eq!(
        &secret[32..],
        &public[..],
        "{at}: sk||pk does not end in pk"
    );
    assert_eq!(
        sig_msg.len(),
        SIGNATURE_LEN + msg.len(),
        "{at}: sig||msg length"
    );
    assert_eq!(
        &sig_msg[SIGNATURE_LEN..],
        &msg[..],
        "{at}: sig||msg does not end in msg"
    );
    SignVector {
        seed: secret[..32].to_vec(),
        public,
        msg,
        sig: sig_msg[..SIGNATURE_LEN].to_vec(),
    }
}

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
                        check_sign_vector(&parse_sign_line(line.trim(), &at), &at);
                    }
                    chunk.len()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(checked, 1024, "sign.input lines checked");
}
