//! Every implementation gives the same bytes: the NIST CAVP AES vectors (ECB, CBC, OFB,
//! CFB-128), the OpenSSL-format CTR vectors (RFC 3686) and the NIST CAVP GCM vectors, run
//! through each implementation of [`AesImpl::candidates`] (RustCrypto, the lanes at widths 8 to
//! 64, AWS-LC with the `aws-lc` feature, ring for GCM with the `ring` feature), whole and one block per packet; the serial records in
//! full lane sets of every width; and the measurement API's contract.
//!
//! Every count is asserted, so a parser or a filter that silently reads nothing cannot make a
//! test pass.

use crate::common;

use std::collections::BTreeMap;
use std::fs;

use common::vectors::{
    Record, classify, ctr_records, gcm_records, parse_rsp, rsp_files, vectors_dir,
};
use cryptodispatch::crypto::{
    AesImpl, AesKey, AesOp, BLOCK, ChainState, CryptoError, Direction, LANE_WIDTHS, LaneItem,
    MAX_LANES, Padding, measure_rounds, run_lanes_width, run_packets_with,
};
use cryptodispatch::packet::Mode;

fn all_cavp_records() -> Vec<Record> {
    let dir = vectors_dir("aes");
    let mut all = Vec::new();
    for file in rsp_files() {
        let (mode, _, _) = classify(&file);
        let text = fs::read_to_string(dir.join(&file)).unwrap();
        all.extend(parse_rsp(&text, &file, mode));
    }
    // 2138 records per mode (GFSbox 36, KeySbox 122, MMT 60, VarKey 1152, VarTxt 768).
    assert_eq!(all.len(), 4 * 2138, "CAVP records");
    all
}

/// How many implementations run `op` here.
fn expected_impls(op: AesOp) -> usize {
    let lanes = if op.is_serial() { LANE_WIDTHS.len() } else { 0 };
    1 + lanes + usize::from(AesImpl::AwsLc.is_built()) + usize::from(AesImpl::OpenSsl.is_built())
}

/// `input` one block per packet on `imp`, each packet resuming from the state the last left.
fn block_per_packet(key: &AesKey, imp: AesImpl, op: AesOp, iv: &[u8], input: &[u8]) -> Vec<u8> {
    let mut state = ChainState::for_mode(op.mode, iv).unwrap();
    let packets: Vec<&[u8]> = input.chunks(BLOCK).collect();
    let mut out = Vec::new();
    for (i, packet) in packets.iter().enumerate() {
        let mut buf = packet.to_vec();
        let n = key
            .process_with(
                imp,
                op,
                &mut state,
                &mut buf,
                packet.len(),
                i + 1 == packets.len(),
            )
            .unwrap_or_else(|e| panic!("{imp} packet {i}: {e}"));
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn check_records(records: &[Record]) -> usize {
    let mut runs = 0;
    for rec in records {
        let key = AesKey::new(&rec.key).unwrap();
        let op = AesOp::new(rec.direction, rec.mode);
        let impls = AesImpl::candidates(op);
        assert_eq!(impls.len(), expected_impls(op), "{}: {impls:?}", rec.at);
        for imp in impls {
            let whole = key.one_shot_with(imp, op, &rec.iv, &rec.input);
            let whole = whole.unwrap_or_else(|e| panic!("{}: {imp}: {e}", rec.at));
            assert_eq!(
                hex::encode(&whole),
                hex::encode(&rec.expected),
                "{}: {imp}",
                rec.at
            );
            let packets = block_per_packet(&key, imp, op, &rec.iv, &rec.input);
            assert_eq!(
                hex::encode(&packets),
                hex::encode(&rec.expected),
                "{}: {imp}, a block per packet",
                rec.at
            );
            runs += 1;
        }
    }
    runs
}

#[test]
fn cavp_records_on_every_implementation() {
    let records = all_cavp_records();
    let runs = check_records(&records);
    let expected: usize = records
        .iter()
        .map(|r| expected_impls(AesOp::new(r.direction, r.mode)))
        .sum();
    assert_eq!(runs, expected, "record runs");
    // Serial: CBC and CFB encryption, OFB both ways: 4 × 1069 records of 8552.
    let serial = records
        .iter()
        .filter(|r| AesOp::new(r.direction, r.mode).is_serial())
        .count();
    assert_eq!(serial, 4 * 1069, "serial records");
}

#[test]
fn openssl_format_ctr_records_on_every_implementation() {
    let records = ctr_records();
    assert_eq!(records.len(), 9);
    let runs = check_records(&records);
    assert_eq!(
        runs,
        9 * expected_impls(AesOp::new(Direction::Encrypt, Mode::Ctr))
    );
    // CTR is its own inverse: the same records decrypt on every implementation.
    for rec in &records {
        let key = AesKey::new(&rec.key).unwrap();
        let op = AesOp::new(Direction::Decrypt, Mode::Ctr);
        for imp in AesImpl::candidates(op) {
            let back = key.one_shot_with(imp, op, &rec.iv, &rec.expected).unwrap();
            assert_eq!(back, rec.input, "{}: decrypt on {imp}", rec.at);
        }
    }
}

#[test]
fn ctr_wraps_at_128_bits_on_every_implementation() {
    let op = AesOp::new(Direction::Encrypt, Mode::Ctr);
    for key_len in [16, 24, 32] {
        let key = AesKey::new(&vec![5; key_len]).unwrap();
        // The low 32 bits wrap after one block and the whole 128 after three.
        for iv in [[0xff; 16], {
            let mut iv = [0u8; 16];
            iv[12..].copy_from_slice(&[0xff; 4]);
            iv
        }] {
            let reference = key.one_shot(op, &iv, &[0x11; 100]).unwrap();
            for imp in AesImpl::candidates(op) {
                let got = key.one_shot_with(imp, op, &iv, &[0x11; 100]).unwrap();
                assert_eq!(got, reference, "AES-{} from {iv:x?} on {imp}", key_len * 8);
                let mut state = ChainState::from_iv(&iv).unwrap();
                let mut buf = [0x11; 48];
                key.process_with(imp, op, &mut state, &mut buf, 40, true)
                    .unwrap();
                assert_eq!(buf[..40], reference[..40], "{imp}: partial");
                // The counter handed on counts the whole blocks only.
                let start = ChainState::from_iv(&iv).unwrap();
                assert_eq!(state, start.counter_plus(2), "{imp}: state");
            }
        }
    }
}

#[test]
fn cavp_gcm_records_on_every_implementation() {
    let records = gcm_records();
    let impls = AesImpl::candidates(AesOp::new(Direction::Encrypt, Mode::Gcm));
    assert_eq!(
        impls.len(),
        1 + usize::from(AesImpl::AwsLc.is_built())
            + usize::from(AesImpl::Ring.is_built())
            + usize::from(AesImpl::OpenSsl.is_built())
    );
    assert_eq!(
        impls,
        AesImpl::candidates(AesOp::new(Direction::Decrypt, Mode::Gcm))
    );
    let (mut sealed, mut opened, mut failed) = (0, 0, 0);
    for rec in &records {
        let key = AesKey::new(&rec.key).unwrap();
        for &imp in &impls {
            match (rec.direction, &rec.pt) {
                (Direction::Encrypt, Some(pt)) => {
                    let (ct, tag) = key.gcm_seal_with(imp, &rec.nonce, &rec.aad, pt).unwrap();
                    assert_eq!(hex::encode(&ct), hex::encode(&rec.ct), "{}: {imp}", rec.at);
                    assert_eq!(hex::encode(tag), hex::encode(&rec.tag), "{}: {imp}", rec.at);
                    sealed += 1;
                }
                (Direction::Decrypt, Some(pt)) => {
                    let got = key.gcm_open_with(imp, &rec.nonce, &rec.aad, &rec.ct, &rec.tag);
                    assert_eq!(got.as_ref(), Ok(pt), "{}: {imp}", rec.at);
                    opened += 1;
                }
                (Direction::Decrypt, None) => {
                    let got = key.gcm_open_with(imp, &rec.nonce, &rec.aad, &rec.ct, &rec.tag);
                    assert_eq!(
                        got,
                        Err(CryptoError::AuthenticationFailed),
                        "{}: {imp}",
                        rec.at
                    );
                    failed += 1;
                }
                (Direction::Encrypt, None) => panic!("{}: encryption record without PT", rec.at),
            }
        }
    }
    assert!(
        sealed > 0 && opened > 0 && failed > 0,
        "{sealed} {opened} {failed}"
    );
    assert_eq!(
        sealed + opened + failed,
        records.len() * impls.len(),
        "GCM record runs"
    );
    // Cut into two packets (the first a whole number of blocks, about half), on every
    // implementation that chains GCM.
    let chains = AesImpl::gcm_chain_candidates();
    assert_eq!(chains.len(), 1 + usize::from(AesImpl::OpenSsl.is_built()));
    let mut chained = 0;
    for rec in &records {
        let key = AesKey::new(&rec.key).unwrap();
        let input = match rec.direction {
            Direction::Encrypt => rec.pt.clone().unwrap(),
            Direction::Decrypt => rec.ct.clone(),
        };
        let cut = input.len() / 2 / BLOCK * BLOCK;
        for &imp in &chains {
            let mut state = key
                .gcm_start_with(imp, rec.direction, &rec.nonce, &rec.aad)
                .unwrap();
            let (mut first, mut last) = (input[..cut].to_vec(), input[cut..].to_vec());
            key.gcm_update(rec.direction, &mut state, &mut first)
                .unwrap();
            let outcome = match rec.direction {
                Direction::Encrypt => key.gcm_seal_final(state, &mut last).map(Some),
                Direction::Decrypt => key
                    .gcm_open_final(state, &mut last, &rec.tag)
                    .map(|()| None),
            };
            // The same cut out of place, from the input into another buffer: the same outcome
            // and, where it succeeds, the same bytes; the input is only read.
            let mut state = key
                .gcm_start_with(imp, rec.direction, &rec.nonce, &rec.aad)
                .unwrap();
            let mut out = vec![0xa5; input.len()];
            let (out_first, out_last) = out.split_at_mut(cut);
            key.gcm_update_into(rec.direction, &mut state, &input[..cut], out_first)
                .unwrap();
            let outcome_into = match rec.direction {
                Direction::Encrypt => key
                    .gcm_seal_final_into(state, &input[cut..], out_last)
                    .map(Some),
                Direction::Decrypt => key
                    .gcm_open_final_into(state, &input[cut..], out_last, &rec.tag)
                    .map(|()| None),
            };
            assert_eq!(outcome_into, outcome, "{}: out of place on {imp}", rec.at);
            if outcome.is_ok() {
                assert_eq!(
                    out,
                    [&first[..], &last[..]].concat(),
                    "{}: out of place on {imp}",
                    rec.at
                );
            }
            match (rec.direction, &rec.pt) {
                (Direction::Encrypt, _) => {
                    let tag = outcome.unwrap().unwrap();
                    assert_eq!(
                        [first, last].concat(),
                        rec.ct,
                        "{}: chained on {imp}",
                        rec.at
                    );
                    assert_eq!(tag[..], rec.tag[..], "{}: chained on {imp}", rec.at);
                }
                (Direction::Decrypt, Some(pt)) => {
                    assert_eq!(outcome, Ok(None), "{}: chained on {imp}", rec.at);
                    assert_eq!(&[first, last].concat(), pt, "{}: chained on {imp}", rec.at);
                }
                (Direction::Decrypt, None) => assert_eq!(
                    outcome,
                    Err(CryptoError::AuthenticationFailed),
                    "{}: chained on {imp}",
                    rec.at
                ),
            }
            chained += 1;
        }
    }
    assert_eq!(
        chained,
        records.len() * chains.len(),
        "chained GCM record runs"
    );
}

#[test]
fn gcm_out_of_place_needs_an_output_as_long_as_the_input() {
    let key = AesKey::new(&[7; 16]).unwrap();
    let (nonce, text) = ([1u8; 12], [9u8; 32]);
    let (ct, tag) = key.gcm_seal(&nonce, b"", &text).unwrap();
    for imp in AesImpl::gcm_chain_candidates() {
        let mut state = key
            .gcm_start_with(imp, Direction::Encrypt, &nonce, b"")
            .unwrap();
        let mut short = [0u8; 16];
        assert_eq!(
            key.gcm_update_into(Direction::Encrypt, &mut state, &text, &mut short),
            Err(CryptoError::LengthExceedsBuffer { len: 32, buf: 16 }),
            "{imp}"
        );
        assert_eq!(short, [0; 16], "{imp}: nothing written");
        // Refused before it ran: the state goes on as it was.
        let mut out = [0u8; 32];
        let got = key.gcm_seal_final_into(state, &text, &mut out).unwrap();
        assert_eq!((&out[..], got), (&ct[..], tag), "{imp}");
    }
}

#[test]
fn serial_cavp_records_in_full_lane_sets_of_every_width() {
    // Records of one file, direction and key share one `AesKey`: the VarTxt and GFSbox files
    // (all-zero keys) give full sets of 64.
    let records = all_cavp_records();
    let mut groups: BTreeMap<(String, bool, Vec<u8>), Vec<&Record>> = BTreeMap::new();
    for r in &records {
        let op = AesOp::new(r.direction, r.mode);
        if op.is_serial() {
            let file = r.at.split(' ').next().unwrap().to_owned();
            groups
                .entry((file, r.direction == Direction::Encrypt, r.key.clone()))
                .or_default()
                .push(r);
        }
    }
    for width in LANE_WIDTHS {
        let (mut ran, mut full_sets) = (0, 0);
        for group in groups.values() {
            let key = AesKey::new(&group[0].key).unwrap();
            let mut states: Vec<ChainState> = group
                .iter()
                .map(|r| ChainState::from_iv(&r.iv).unwrap())
                .collect();
            let mut bufs: Vec<Vec<u8>> = group.iter().map(|r| r.input.clone()).collect();
            let mut items: Vec<LaneItem<'_>> = group
                .iter()
                .zip(states.iter_mut().zip(bufs.iter_mut()))
                .map(|(r, (state, buf))| LaneItem {
                    key: &key,
                    op: AesOp::new(r.direction, r.mode),
                    state,
                    len: r.input.len(),
                    buf,
                    last: true,
                    input: None,
                })
                .collect();
            full_sets += items.len() / width;
            run_lanes_width(&mut items, width).unwrap();
            drop(items);
            for (r, buf) in group.iter().zip(&bufs) {
                assert_eq!(
                    hex::encode(buf),
                    hex::encode(&r.expected),
                    "{}: width {width}",
                    r.at
                );
                ran += 1;
            }
        }
        assert_eq!(ran, 4 * 1069, "width {width}: serial records");
        assert!(full_sets > 0, "width {width}: no full lane set");
    }
}

#[test]
fn lane_widths_out_of_range_are_refused() {
    let key = AesKey::new(&[1; 16]).unwrap();
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    let mut state = ChainState::default();
    let mut buf = [7u8; 32];
    for width in [0, MAX_LANES + 1] {
        let mut items = [LaneItem {
            key: &key,
            op,
            state: &mut state,
            buf: &mut buf,
            len: 32,
            last: false,
            input: None,
        }];
        let err = run_lanes_width(&mut items, width).unwrap_err();
        assert_eq!(
            err.error,
            CryptoError::LaneWidth {
                width,
                max: MAX_LANES
            }
        );
        let imp = AesImpl::Lanes { width };
        assert!(!imp.is_built() && !imp.runs(op));
        assert_eq!(
            key.process_with(imp, op, &mut ChainState::default(), &mut [0; 16], 16, false),
            Err(CryptoError::LaneWidth {
                width,
                max: MAX_LANES
            })
        );
    }
    assert_eq!(buf, [7u8; 32], "nothing written");
}

#[test]
fn a_refused_packet_refuses_the_whole_set_on_every_implementation() {
    let key = AesKey::new(&[1; 16]).unwrap();
    let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
    for imp in AesImpl::candidates(op) {
        let mut states = vec![ChainState::default(); 10];
        let mut bufs = vec![vec![3u8; 64]; 10];
        let mut items: Vec<LaneItem<'_>> = states
            .iter_mut()
            .zip(bufs.iter_mut())
            .enumerate()
            .map(|(i, (state, buf))| LaneItem {
                key: &key,
                op,
                state,
                buf,
                // Packet 9 is not whole blocks and not a job's last.
                len: if i == 9 { 40 } else { 64 },
                last: false,
                input: None,
            })
            .collect();
        let err = run_packets_with(imp, &mut items).unwrap_err();
        assert_eq!(err.index, 9, "{imp}");
        assert_eq!(err.error, CryptoError::NotBlockAligned { len: 40 }, "{imp}");
        drop(items);
        assert!(
            bufs.iter().all(|b| b == &vec![3u8; 64]),
            "{imp}: nothing written"
        );
    }
}

#[test]
fn the_lanes_refuse_parallel_operations_and_gcm() {
    let key = AesKey::new(&[1; 16]).unwrap();
    let lanes = AesImpl::Lanes { width: 8 };
    for (direction, mode) in [
        (Direction::Encrypt, Mode::Ecb),
        (Direction::Decrypt, Mode::Cbc),
        (Direction::Decrypt, Mode::Cfb),
        (Direction::Encrypt, Mode::Ctr),
    ] {
        let op = AesOp::new(direction, mode);
        assert!(!lanes.runs(op));
        assert_eq!(
            key.process_with(
                lanes,
                op,
                &mut ChainState::default(),
                &mut [0; 16],
                16,
                true
            ),
            Err(CryptoError::NotSerial { mode, direction })
        );
    }
    assert!(matches!(
        key.gcm_seal_with(lanes, &[0; 12], b"", b"x"),
        Err(CryptoError::ImplementationUnavailable { .. })
    ));
}

#[test]
fn names_round_trip() {
    for imp in AesImpl::all() {
        assert_eq!(imp.to_string().parse::<AesImpl>(), Ok(imp));
    }
    assert_eq!("lanes-64".parse(), Ok(AesImpl::Lanes { width: 64 }));
    assert_eq!(
        "lanes-65".parse::<AesImpl>(),
        Err(CryptoError::LaneWidth { width: 65, max: 64 })
    );
    for bad in ["", "aes-ni", "lanes-", "lanes-x", "Lanes-8"] {
        assert_eq!(
            bad.parse::<AesImpl>(),
            Err(CryptoError::UnknownImplementation { name: bad.into() })
        );
    }
}

#[test]
fn measure_times_every_candidate_fastest_first() {
    let key = AesKey::new(&[9; 32]).unwrap();
    let ops = [
        AesOp::new(Direction::Encrypt, Mode::Cbc),
        AesOp::new(Direction::Decrypt, Mode::Cbc).with_padding(Padding::Pkcs7),
        AesOp::new(Direction::Encrypt, Mode::Ctr),
        AesOp::new(Direction::Encrypt, Mode::Gcm),
        AesOp::new(Direction::Decrypt, Mode::Gcm),
    ];
    for op in ops {
        let measured = measure_rounds(&key, op, 1024, 1).unwrap();
        let mut got: Vec<AesImpl> = measured.iter().map(|m| m.implementation).collect();
        let mut want = AesImpl::candidates(op);
        got.sort_by_key(ToString::to_string);
        want.sort_by_key(ToString::to_string);
        assert_eq!(got, want, "{op:?}");
        for pair in measured.windows(2) {
            assert!(pair[0].ns_per_byte <= pair[1].ns_per_byte, "{op:?}: order");
        }
        for m in &measured {
            assert!(
                m.ns_per_byte.is_finite() && m.ns_per_byte > 0.0,
                "{op:?}: {m:?}"
            );
            assert!(m.bytes_per_sec() > 0.0);
        }
    }
}

#[test]
fn measure_refuses_packets_it_cannot_time() {
    let key = AesKey::new(&[9; 16]).unwrap();
    let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
    for len in [0, 1, 15, 17, 1000] {
        assert_eq!(
            measure_rounds(&key, cbc, len, 1),
            Err(CryptoError::MeasurePacket { len })
        );
    }
    let padded_ctr = AesOp::new(Direction::Encrypt, Mode::Ctr).with_padding(Padding::Pkcs7);
    assert_eq!(
        measure_rounds(&key, padded_ctr, 64, 1),
        Err(CryptoError::PaddingNotApplicable)
    );
}
