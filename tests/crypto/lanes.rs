//! Lanes give exactly what one stream at a time gives: the NIST CAVP CBC, OFB and CFB-128
//! vectors of the serial operations run many records per lane set (modes and key sizes mixed),
//! and random lane sets of random jobs, cut into packets at random block boundaries and resumed
//! from their chaining state set after set, match [`AesKey::process`] packet by packet and
//! [`AesKey::one_shot`] for the whole job, whether a set runs at once or in slices with pauses
//! between ([`run_lanes_paused`]), and whether a packet runs in place or out of place (its input
//! apart, [`LaneItem::input`]; some of each in one set). Refused lane sets are refused whole,
//! with the packet named.

use crate::common;

use std::collections::HashMap;
use std::fs;

use common::vectors::{Record, classify, parse_rsp, rsp_files, vectors_dir};
use cryptodispatch::crypto::{
    AesKey, AesOp, BLOCK, ChainState, CryptoError, Direction, LaneError, LaneItem, Padding,
    padded_len, run_lanes, run_lanes_paused,
};
use cryptodispatch::packet::Mode;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Jobs run through lanes, set after set
// ---------------------------------------------------------------------------------------------

/// A job cut into packets, run one packet per lane set.
struct LaneJob {
    key: usize,
    op: AesOp,
    state: ChainState,
    /// Each packet's input, with room for padding after the last one.
    packets: Vec<Vec<u8>>,
    lens: Vec<usize>,
    next: usize,
    output: Vec<u8>,
    /// `AesKey::process` on the same packets, one at a time: the state it leaves.
    ref_state: ChainState,
    /// Whether its packets run out of place: their input apart, their buffer garbage.
    apart: bool,
}

impl LaneJob {
    /// `data` cut after the blocks listed in `cuts` (block counts from the start, increasing).
    fn new(key: usize, op: AesOp, iv: &[u8], data: &[u8], cuts: &[usize], apart: bool) -> Self {
        let mut packets = Vec::new();
        let mut lens = Vec::new();
        let mut start = 0;
        for &cut in cuts {
            let end = cut * BLOCK;
            if end > start && end <= data.len() {
                packets.push(data[start..end].to_vec());
                lens.push(end - start);
                start = end;
            }
        }
        let mut last = data[start..].to_vec();
        lens.push(last.len());
        if op.pads_on_encrypt() {
            last.resize(padded_len(last.len()), 0xEE);
        }
        packets.push(last);
        let state = ChainState::from_iv(iv).unwrap();
        LaneJob {
            key,
            op,
            ref_state: state.clone(),
            state,
            packets,
            lens,
            next: 0,
            output: Vec::new(),
            apart,
        }
    }

    fn is_done(&self) -> bool {
        self.next == self.packets.len()
    }
}

/// Runs `jobs` to the end: each set takes the next packet of every unfinished job, checked
/// packet by packet against `AesKey::process` (output and state). With `slice`, each set runs
/// in slices of that many bytes per lane through [`run_lanes_paused`], which must pause once
/// between every two slices. Returns the number of sets.
fn run_sets(keys: &[AesKey], jobs: &mut [LaneJob], what: &str, slice: Option<usize>) -> usize {
    let mut sets = 0;
    while jobs.iter().any(|j| !j.is_done()) {
        // The reference: the same packets through `process`, one stream at a time.
        let mut expected = Vec::new();
        for job in jobs.iter_mut().filter(|j| !j.is_done()) {
            let mut buf = job.packets[job.next].clone();
            let last = job.next + 1 == job.packets.len();
            let n = keys[job.key]
                .process(
                    job.op,
                    &mut job.ref_state,
                    &mut buf,
                    job.lens[job.next],
                    last,
                )
                .unwrap_or_else(|e| panic!("{what}: reference: {e}"));
            buf.truncate(n);
            expected.push(buf);
        }

        // A packet that runs out of place: its input moved apart, its buffer garbage that the
        // lanes must overwrite, not read.
        let inputs: Vec<Option<Vec<u8>>> = jobs
            .iter_mut()
            .filter(|j| !j.is_done())
            .map(|j| {
                j.apart.then(|| {
                    let packet = &mut j.packets[j.next];
                    let input = packet.clone();
                    packet.fill(0xA5);
                    input
                })
            })
            .collect();
        let mut items: Vec<LaneItem<'_>> = jobs
            .iter_mut()
            .filter(|j| !j.is_done())
            .zip(&inputs)
            .map(|(j, input)| LaneItem {
                key: &keys[j.key],
                op: j.op,
                last: j.next + 1 == j.packets.len(),
                len: j.lens[j.next],
                state: &mut j.state,
                buf: &mut j.packets[j.next],
                input: input.as_deref(),
            })
            .collect();
        let out_lens: Vec<usize> = items.iter().map(LaneItem::output_len).collect();
        match slice {
            None => run_lanes(&mut items).unwrap_or_else(|e| panic!("{what}: set {sets}: {e}")),
            Some(slice) => {
                let step = (slice / BLOCK).max(1) * BLOCK;
                let longest = items.iter().map(|i| i.len).max().unwrap_or(0);
                let mut pauses = 0;
                run_lanes_paused(&mut items, slice, &mut || pauses += 1)
                    .unwrap_or_else(|e| panic!("{what}: set {sets}: {e}"));
                assert_eq!(
                    pauses,
                    longest.div_ceil(step).saturating_sub(1),
                    "{what}: set {sets}: pauses of a longest lane of {longest} bytes in slices \
                     of {step}"
                );
            }
        }
        drop(items);

        let live = jobs.iter_mut().filter(|j| !j.is_done());
        for (i, ((job, n), want)) in live.zip(out_lens).zip(expected).enumerate() {
            let got = &job.packets[job.next][..n];
            assert_eq!(
                hex::encode(got),
                hex::encode(&want),
                "{what}: set {sets}, lane {i}: output"
            );
            assert!(
                job.state == job.ref_state,
                "{what}: set {sets}, lane {i}: chaining state"
            );
            job.output.extend_from_slice(got);
            job.next += 1;
        }
        sets += 1;
    }
    sets
}

// ---------------------------------------------------------------------------------------------
// NIST CAVP
// ---------------------------------------------------------------------------------------------

/// Every record of a serial operation in the CBC, OFB and CFB-128 files (CBC and CFB
/// encryption, OFB both ways), dealt round-robin across the files so that neighbours differ in
/// mode and key size.
fn serial_records() -> Vec<Record> {
    let dir = vectors_dir("aes");
    let mut per_file: Vec<std::vec::IntoIter<Record>> = Vec::new();
    for file in rsp_files() {
        let (mode, _, _) = classify(&file);
        if mode == Mode::Ecb {
            continue;
        }
        let text = fs::read_to_string(dir.join(&file)).unwrap();
        let records: Vec<Record> = parse_rsp(&text, &file, mode)
            .into_iter()
            .filter(|r| AesOp::new(r.direction, r.mode).is_serial())
            .collect();
        assert!(!records.is_empty(), "{file}: no serial records");
        per_file.push(records.into_iter());
    }
    assert_eq!(per_file.len(), 45, "CBC, OFB and CFB-128 files");
    let mut dealt = Vec::new();
    loop {
        let before = dealt.len();
        dealt.extend(per_file.iter_mut().filter_map(Iterator::next));
        if dealt.len() == before {
            return dealt;
        }
    }
}

/// Lane-set sizes the vectors are dealt into, in turn.
const SET_SIZES: [usize; 8] = [1, 3, 8, 32, 5, 16, 2, 29];

/// Runs the records in lane sets of the sizes in [`SET_SIZES`], each record cut by `cuts`;
/// records with the same key bytes in one set share one `AesKey`. Checks every output against
/// the vector and returns how many records ran.
fn run_cavp(
    records: &[Record],
    cuts: impl Fn(&Record) -> Vec<usize>,
    what: &str,
    slice: Option<usize>,
) -> usize {
    let mut done = 0;
    let mut sizes = SET_SIZES.iter().cycle();
    let mut rest = records;
    while !rest.is_empty() {
        let (set, tail) = rest.split_at((*sizes.next().unwrap()).min(rest.len()));
        rest = tail;

        let mut key_of: HashMap<&[u8], usize> = HashMap::new();
        let mut keys = Vec::new();
        // Every other record runs out of place, so that sets mix both.
        let mut jobs: Vec<LaneJob> = set
            .iter()
            .enumerate()
            .map(|(i, rec)| {
                let key = *key_of.entry(&rec.key).or_insert_with(|| {
                    keys.push(AesKey::new(&rec.key).unwrap());
                    keys.len() - 1
                });
                let op = AesOp::new(rec.direction, rec.mode);
                LaneJob::new(
                    key,
                    op,
                    &rec.iv,
                    &rec.input,
                    &cuts(rec),
                    (done + i) % 2 == 1,
                )
            })
            .collect();
        run_sets(&keys, &mut jobs, what, slice);
        for (rec, job) in set.iter().zip(&jobs) {
            assert_eq!(
                hex::encode(&job.output),
                hex::encode(&rec.expected),
                "{what}: {}",
                rec.at
            );
        }
        done += set.len();
    }
    done
}

#[test]
fn cavp_serial_vectors_through_lanes() {
    let records = serial_records();
    // 1069 encryption records per mode (half of each file), and OFB's decryption records.
    assert_eq!(records.len(), 4 * 1069, "serial CAVP records");
    for bits in [128, 192, 256] {
        assert!(
            records.iter().any(|r| r.key.len() * 8 == bits),
            "{bits}-bit keys"
        );
    }
    let whole = run_cavp(&records, |_| Vec::new(), "one packet per record", None);
    assert_eq!(whole, records.len());
    // In slices of one and of three blocks, with pauses between.
    for slice in [BLOCK, 3 * BLOCK + 5] {
        let paused = run_cavp(&records, |_| Vec::new(), "paused", Some(slice));
        assert_eq!(paused, records.len());
    }

    // The multi-block records, one block per packet: the lanes resume from the state the
    // previous set left.
    let multi: Vec<Record> = records
        .into_iter()
        .filter(|r| r.input.len() > BLOCK)
        .collect();
    assert_eq!(multi.len(), 4 * 3 * 9, "multi-block serial records");
    let split = run_cavp(
        &multi,
        |r| (1..r.input.len() / BLOCK).collect(),
        "one block per packet",
        None,
    );
    assert_eq!(split, multi.len());
}

// ---------------------------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------------------------

const SERIAL_OPS: [(Direction, Mode, Padding); 5] = [
    (Direction::Encrypt, Mode::Cbc, Padding::None),
    (Direction::Encrypt, Mode::Cbc, Padding::Pkcs7),
    (Direction::Encrypt, Mode::Ofb, Padding::None),
    (Direction::Decrypt, Mode::Ofb, Padding::None),
    (Direction::Encrypt, Mode::Cfb, Padding::None),
];

fn serial_op(i: usize) -> AesOp {
    let (direction, mode, padding) = SERIAL_OPS[i];
    AesOp::new(direction, mode).with_padding(padding)
}

#[test]
fn is_serial_names_exactly_the_serial_operations() {
    for mode in Mode::ALL {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let serial = matches!(
                (mode, direction),
                (Mode::Cbc | Mode::Cfb, Direction::Encrypt) | (Mode::Ofb, _)
            );
            assert_eq!(
                AesOp::new(direction, mode).is_serial(),
                serial,
                "{mode} {direction:?}"
            );
        }
    }
}

/// Runs one good packet and one bad one in a set, at once and in slices; checks the error
/// names the bad one, the same both ways, and that nothing (output or state) was touched and no
/// pause taken.
fn refused(bad: AesOp, buf_len: usize, len: usize, last: bool) -> LaneError {
    refused_with_input(bad, buf_len, len, last, None)
}

/// [`refused`], the bad packet running out of place from `input`.
fn refused_with_input(
    bad: AesOp,
    buf_len: usize,
    len: usize,
    last: bool,
    input: Option<&[u8]>,
) -> LaneError {
    let key = AesKey::new(&[7; 24]).unwrap();
    let mut errors = Vec::new();
    for paused in [false, true] {
        let mut good_state = ChainState::from_iv(&[1; 16]).unwrap();
        let mut good_buf = vec![0x55u8; 64];
        let mut bad_state = ChainState::from_iv(&[2; 16]).unwrap();
        let mut bad_buf = vec![0x66u8; buf_len];
        let mut items = [
            LaneItem {
                key: &key,
                op: serial_op(0),
                state: &mut good_state,
                buf: &mut good_buf,
                len: 64,
                last: false,
                input: None,
            },
            LaneItem {
                key: &key,
                op: bad,
                state: &mut bad_state,
                buf: &mut bad_buf,
                len,
                last,
                input,
            },
        ];
        let mut pauses = 0;
        let err = if paused {
            run_lanes_paused(&mut items, BLOCK, &mut || pauses += 1).unwrap_err()
        } else {
            run_lanes(&mut items).unwrap_err()
        };
        assert_eq!(err.index, 1);
        assert_eq!(pauses, 0, "no slice ran");
        assert_eq!(good_buf, vec![0x55; 64], "good packet untouched");
        assert_eq!(bad_buf, vec![0x66; buf_len], "bad packet untouched");
        assert!(good_state == ChainState::from_iv(&[1; 16]).unwrap());
        assert!(bad_state == ChainState::from_iv(&[2; 16]).unwrap());
        errors.push(err);
    }
    assert_eq!(errors[0], errors[1], "refused alike at once and in slices");
    errors.remove(0)
}

#[test]
fn parallel_operations_are_refused_whole() {
    for (direction, mode) in [
        (Direction::Encrypt, Mode::Ecb),
        (Direction::Decrypt, Mode::Ecb),
        (Direction::Decrypt, Mode::Cbc),
        (Direction::Decrypt, Mode::Cfb),
    ] {
        let err = refused(AesOp::new(direction, mode), 32, 32, false);
        assert_eq!(err.error, CryptoError::NotSerial { mode, direction });
    }
}

#[test]
fn an_input_shorter_than_its_packet_is_refused_whole() {
    let input = [9u8; 16];
    for op in [serial_op(0), serial_op(1), serial_op(2)] {
        assert_eq!(
            refused_with_input(op, 48, 32, true, Some(&input)).error,
            CryptoError::LengthExceedsBuffer { len: 32, buf: 16 }
        );
    }
}

#[test]
fn bad_packets_are_refused_whole_as_process_refuses_them() {
    let cbc = serial_op(0);
    let cbc_pad = serial_op(1);
    let ofb = serial_op(2);
    assert_eq!(
        refused(cbc, 40, 20, true).error,
        CryptoError::NotBlockAligned { len: 20 }
    );
    assert_eq!(
        refused(ofb, 40, 20, false).error,
        CryptoError::NotBlockAligned { len: 20 }
    );
    assert_eq!(
        refused(cbc_pad, 16, 16, true).error,
        CryptoError::NoRoomForPadding { got: 16, need: 32 }
    );
    assert_eq!(
        refused(ofb.with_padding(Padding::Pkcs7), 32, 16, true).error,
        CryptoError::PaddingNotApplicable
    );
    assert_eq!(
        refused(cbc, 16, 32, false).error,
        CryptoError::LengthExceedsBuffer { len: 32, buf: 16 }
    );
}

#[test]
fn an_empty_set_does_nothing() {
    assert_eq!(run_lanes(&mut []), Ok(()));
}

// ---------------------------------------------------------------------------------------------
// Random lane sets against one stream at a time
// ---------------------------------------------------------------------------------------------

const KEY_LENS: [usize; 3] = [16, 24, 32];
/// Keys in a case's pool; jobs pick from it, so some lanes share a key and some do not.
const KEY_POOL: usize = 6;

/// One random job: which pooled key, which serial operation, how long, where it is cut.
#[derive(Debug, Clone)]
struct JobSpec {
    key: usize,
    op: usize,
    blocks: usize,
    partial: usize,
    cut_after: Vec<bool>,
    /// Whether its packets run out of place.
    apart: bool,
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        0..KEY_POOL,
        0..SERIAL_OPS.len(),
        0usize..=12,
        0usize..BLOCK,
        prop::collection::vec(any::<bool>(), 12),
        any::<bool>(),
    )
        .prop_map(|(key, op, blocks, partial, cut_after, apart)| JobSpec {
            key,
            op,
            blocks,
            partial,
            cut_after,
            apart,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_lane_sets_match_one_stream_at_a_time(
        specs in prop::collection::vec(job_spec(), 1..=32),
        key_sizes in prop::collection::vec(0..KEY_LENS.len(), KEY_POOL),
        seed in any::<u64>(),
        slice in prop::option::of(1usize..=80),
    ) {
        let mut bytes = common::Gen::new(seed);
        let keys: Vec<AesKey> = key_sizes
            .iter()
            .map(|&k| AesKey::new(&bytes.bytes(KEY_LENS[k])).unwrap())
            .collect();
        let mut inputs = Vec::new();
        let mut jobs: Vec<LaneJob> = specs
            .iter()
            .map(|spec| {
                let op = serial_op(spec.op);
                // CBC without padding takes whole blocks only.
                let partial = if op.mode == Mode::Cbc && op.padding == Padding::None {
                    0
                } else {
                    spec.partial
                };
                let data = bytes.bytes(spec.blocks * BLOCK + partial);
                let iv = bytes.bytes(BLOCK);
                let cuts: Vec<usize> = (1..=spec.blocks)
                    .filter(|&b| spec.cut_after[b - 1])
                    .collect();
                inputs.push((op, iv.clone(), data.clone()));
                LaneJob::new(spec.key, op, &iv, &data, &cuts, spec.apart)
            })
            .collect();
        run_sets(&keys, &mut jobs, "random set", slice);
        for (i, (job, (op, iv, data))) in jobs.iter().zip(&inputs).enumerate() {
            let whole = keys[job.key].one_shot(*op, iv, data).unwrap();
            prop_assert_eq!(hex::encode(&job.output), hex::encode(&whole), "job {}", i);
        }
    }
}
