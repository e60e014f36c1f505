//! Parsers for the known-answer files under `tests/vectors`, shared by `tests/crypto/vectors.rs`,
//! `tests/service/vectors.rs` and `tests/service/gcm.rs`: the NIST CAVP AES `.rsp` files, the
//! NIST CAVP GCM `.rsp` files (filtered to 96-bit IVs and 128-bit tags by
//! `tests/vectors/aes-gcm/filter.py`), the CTR files of RFC 3686's vectors, and the Ed25519
//! `sign.input` list. They panic, naming the file and line or record, on anything they do not expect; the
//! tests assert every count, so a parser that silently reads nothing cannot make a test pass.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cryptodispatch::crypto::SIGNATURE_LEN;
use cryptodispatch::{Direction, Mode};

/// `tests/vectors/<sub>`.
pub fn vectors_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(sub)
}

/// The names of the 60 NIST CAVP `.rsp` files, sorted (the count is checked).
pub fn rsp_files() -> Vec<String> {
    let dir = vectors_dir("aes");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".rsp"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 60, "AES .rsp files in {}", dir.display());
    files
}

pub fn unhex(s: &str, what: &str) -> Vec<u8> {
    hex::decode(s).unwrap_or_else(|e| panic!("{what}: bad hex {s:?}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// AES: NIST CAVP `.rsp` files
// ---------------------------------------------------------------------------------------------

/// One CAVP record, oriented for its direction: `input` is the plaintext and `expected` the
/// ciphertext for an encryption record, the other way round for a decryption record.
#[derive(Debug)]
pub struct Record {
    /// `FILE [Direction] COUNT n`, for messages.
    pub at: String,
    pub mode: Mode,
    pub direction: Direction,
    pub key: Vec<u8>,
    /// Empty for ECB (whose records must have no IV); given for every other mode.
    pub iv: Vec<u8>,
    pub input: Vec<u8>,
    pub expected: Vec<u8>,
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
    fn finish(self, direction: Direction, mode: Mode, file: &str) -> Record {
        let count = self
            .count
            .unwrap_or_else(|| panic!("{file}: record without COUNT"));
        let at = format!("{file} [{direction:?}] COUNT {count}");
        let missing = |field: &str| -> ! { panic!("{at}: no {field}") };
        let plaintext = self.plaintext.unwrap_or_else(|| missing("PLAINTEXT"));
        let ciphertext = self.ciphertext.unwrap_or_else(|| missing("CIPHERTEXT"));
        let iv = match (mode, self.iv) {
            (Mode::Ecb, None) => Vec::new(),
            (Mode::Ecb, Some(_)) => panic!("{at}: ECB record with an IV"),
            (_, Some(iv)) => iv,
            (_, None) => missing("IV"),
        };
        let (input, expected) = match direction {
            Direction::Encrypt => (plaintext, ciphertext),
            Direction::Decrypt => (ciphertext, plaintext),
        };
        let key = self.key.unwrap_or_else(|| missing("KEY"));
        Record {
            at,
            mode,
            direction,
            key,
            iv,
            input,
            expected,
        }
    }
}

/// Parses a CAVP response file of `mode` (see [`classify`]) into its records, in file order.
pub fn parse_rsp(text: &str, file: &str, mode: Mode) -> Vec<Record> {
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
                records.push(done.finish(section.unwrap(), mode, file));
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
                records.push(done.finish(dir, mode, file));
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
        records.push(done.finish(section.unwrap(), mode, file));
    }
    records
}

/// The mode, test kind and key size a file name encodes, e.g. `CFB128MMT256.rsp`.
pub fn classify(file: &str) -> (Mode, &str, usize) {
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
pub fn expected_per_section(kind: &str, bits: usize, file: &str) -> usize {
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

// ---------------------------------------------------------------------------------------------
// AES-CTR: RFC 3686's vectors in the CAVP layout
// ---------------------------------------------------------------------------------------------

/// The CTR records of `tests/vectors/aes-ctr/aes-{128,192,256}-ctr.txt` (3 each, encryption;
/// the counts are checked), read by [`parse_rsp`].
pub fn ctr_records() -> Vec<Record> {
    let dir = vectors_dir("aes-ctr");
    let mut all = Vec::new();
    for bits in [128, 192, 256] {
        let file = format!("aes-{bits}-ctr.txt");
        let text = std::fs::read_to_string(dir.join(&file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(&file).display()));
        let records = parse_rsp(&text, &file, Mode::Ctr);
        assert_eq!(records.len(), 3, "{file}: records");
        for r in &records {
            assert_eq!(r.key.len() * 8, bits, "{}: key length", r.at);
            assert_eq!(r.iv.len(), 16, "{}: IV length", r.at);
            assert_eq!(r.direction, Direction::Encrypt, "{}", r.at);
        }
        all.extend(records);
    }
    all
}

// ---------------------------------------------------------------------------------------------
// AES-GCM: NIST CAVP `gcmEncryptExtIV*.rsp`, `gcmDecrypt*.rsp`
// ---------------------------------------------------------------------------------------------

/// One CAVP GCM record. For a decryption record that must fail (`FAIL`), `pt` is `None`.
#[derive(Debug, Clone)]
pub struct GcmRecord {
    /// `FILE [Keylen=.. PTlen=.. AADlen=..] Count n`, for messages.
    pub at: String,
    pub direction: Direction,
    pub key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub aad: Vec<u8>,
    pub pt: Option<Vec<u8>>,
    pub ct: Vec<u8>,
    pub tag: Vec<u8>,
}

/// The six filtered GCM files, sorted (the count is checked).
pub fn gcm_files() -> Vec<String> {
    let dir = vectors_dir("aes-gcm");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".rsp"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6, "GCM .rsp files in {}", dir.display());
    files
}

/// Parses a filtered CAVP GCM file. Every section must be `[IVlen = 96]` and `[Taglen = 128]`,
/// and every record's lengths must match its section's.
pub fn parse_gcm_rsp(text: &str, file: &str) -> Vec<GcmRecord> {
    let direction = if file.starts_with("gcmEncrypt") {
        Direction::Encrypt
    } else if file.starts_with("gcmDecrypt") {
        Direction::Decrypt
    } else {
        panic!("{file}: not a GCM encrypt or decrypt file")
    };
    let mut params: HashMap<String, usize> = HashMap::new();
    let mut records = Vec::new();
    let mut current: Option<HashMap<String, Vec<u8>>> = None;
    let mut fail = false;
    let mut count = 0;

    let mut finish = |fields: HashMap<String, Vec<u8>>,
                      fail: bool,
                      count: usize,
                      params: &HashMap<String, usize>| {
        let at = format!(
            "{file} [Keylen={} PTlen={} AADlen={}] Count {count}",
            params["Keylen"], params["PTlen"], params["AADlen"]
        );
        let get = |name: &str| {
            fields
                .get(name)
                .cloned()
                .unwrap_or_else(|| panic!("{at}: no {name}"))
        };
        let (key, nonce, aad, ct, tag) = (get("Key"), get("IV"), get("AAD"), get("CT"), get("Tag"));
        let pt = if fail { None } else { Some(get("PT")) };
        assert!(
            !(fail && fields.contains_key("PT")),
            "{at}: FAIL and PT both given"
        );
        assert_eq!(key.len() * 8, params["Keylen"], "{at}: key length");
        assert_eq!(nonce.len() * 8, 96, "{at}: IV length");
        assert_eq!(tag.len() * 8, 128, "{at}: tag length");
        assert_eq!(aad.len() * 8, params["AADlen"], "{at}: AAD length");
        assert_eq!(ct.len() * 8, params["PTlen"], "{at}: CT length");
        if let Some(pt) = &pt {
            assert_eq!(pt.len(), ct.len(), "{at}: PT length");
        }
        assert!(
            !(fail && direction == Direction::Encrypt),
            "{at}: FAIL in an encryption file"
        );
        records.push(GcmRecord {
            at,
            direction,
            key,
            nonce,
            aad,
            pt,
            ct,
            tag,
        });
    };

    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let at = || format!("{file}:{}", lineno + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if let Some(done) = current.take() {
                finish(done, fail, count, &params);
            }
            let (name, value) = inner
                .split_once('=')
                .unwrap_or_else(|| panic!("{}: bad section line {line:?}", at()));
            let value: usize = value
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{}: {line:?}: {e}", at()));
            params.insert(name.trim().to_owned(), value);
            if name.trim() == "IVlen" {
                assert_eq!(value, 96, "{}: unsupported IV length kept", at());
            }
            if name.trim() == "Taglen" {
                assert_eq!(value, 128, "{}: unsupported tag length kept", at());
            }
            continue;
        }
        if line == "FAIL" {
            assert!(current.is_some(), "{}: FAIL before Count", at());
            fail = true;
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{}: not `Name = value`: {line:?}", at()));
        let (name, value) = (name.trim(), value.trim());
        if name == "Count" {
            if let Some(done) = current.take() {
                finish(done, fail, count, &params);
            }
            count = value
                .parse()
                .unwrap_or_else(|e| panic!("{}: bad Count {value:?}: {e}", at()));
            current = Some(HashMap::new());
            fail = false;
            continue;
        }
        let fields = current
            .as_mut()
            .unwrap_or_else(|| panic!("{}: {name} before Count", at()));
        assert!(
            ["Key", "IV", "PT", "AAD", "CT", "Tag"].contains(&name),
            "{}: unknown field {name:?}",
            at()
        );
        let old = fields.insert(name.to_owned(), unhex(value, &at()));
        assert!(old.is_none(), "{}: {name} given twice", at());
    }
    if let Some(done) = current.take() {
        finish(done, fail, count, &params);
    }
    records
}

/// Every record of the six GCM files: 375 per file (25 sections of 15), 2250 in all, of which
/// the decryption files mark 577 `FAIL` (counts checked).
pub fn gcm_records() -> Vec<GcmRecord> {
    let dir = vectors_dir("aes-gcm");
    let mut all = Vec::new();
    for file in gcm_files() {
        let text = std::fs::read_to_string(dir.join(&file)).unwrap();
        let records = parse_gcm_rsp(&text, &file);
        let count_lines = text
            .lines()
            .filter(|l| l.trim_start().starts_with("Count"))
            .count();
        assert_eq!(records.len(), count_lines, "{file}: records vs Count lines");
        assert_eq!(records.len(), 375, "{file}: records");
        all.extend(records);
    }
    assert_eq!(all.len(), 2250, "GCM records");
    assert_eq!(
        all.iter().filter(|r| r.pt.is_none()).count(),
        577,
        "GCM FAIL records"
    );
    all
}

// ---------------------------------------------------------------------------------------------
// Ed25519: `sign.input`
// ---------------------------------------------------------------------------------------------

/// One line of `sign.input`: `sk||pk:pk:msg:sig||msg:`.
pub struct SignVector {
    /// Where the line came from, for messages.
    pub at: String,
    pub seed: Vec<u8>,
    pub public: Vec<u8>,
    pub msg: Vec<u8>,
    pub sig: Vec<u8>,
}

/// Parses one (trimmed) line of `sign.input`; `at` names it in messages and is kept in the
/// result.
pub fn parse_sign_line(line: &str, at: &str) -> SignVector {
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
        at: at.to_owned(),
        seed: secret[..32].to_vec(),
        public,
        msg,
        sig: sig_msg[..SIGNATURE_LEN].to_vec(),
    }
}
