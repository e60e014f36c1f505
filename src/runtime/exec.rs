//! Running packets, on whatever thread calls: one packet, a chain run of one job's consecutive
//! packets, or a lane set of serial packets of different jobs (docs/ALGORITHM.md §15.3). No
//! threads, no locks but the state store's: a worker runs its sets through here, and so does
//! a submitting thread running a small job itself.
//!
//! A chained packet's starting state is the IV its job's first packet carries, or what the
//! previous packet left in the state store; a packet that is not its job's last leaves its
//! state there for the next. A lane set's packets take and hand back their states exactly as
//! each would alone. The states a set leaves wait in its [`States`] until whoever runs the set
//! commits them, just before delivering its results: a worker whose set was taken from it (its
//! node failed, the packets run again elsewhere) drops them with its late results, so nothing
//! it computed late reaches the store. A CBC, OFB or CFB state is read, not taken: it stays in
//! the store until the packet it starts is delivered, for a rerun (see `store.rs`).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::BytesMut;
use smallvec::SmallVec;

use crate::crypto::{
    AesKey, AesOp, BatchItem, ChainState, CryptoError, Direction, ImplTable, LaneItem, Tag, Text,
    run_lanes, run_lanes_paused, verify_batch,
};
use crate::packet::{Packet, PacketMeta, TaskId};
use crate::runtime::error::JobError;
use crate::runtime::store::{StateStore, StoredState};
use crate::runtime::work::{JobRecord, Operation, PacketData, PartOutput};
use zeroize::Zeroize;

/// A set of packets a worker runs at once.
pub(crate) type PacketSet = SmallVec<[Packet<PacketData>; 1]>;

/// The state store as a set being run sees it: states are read from the store, and the states
/// the set leaves for its jobs' next packets wait here until [`commit`](Self::commit). It also
/// carries the service's [`ImplTable`]: which implementation each AES operation runs on.
pub(crate) struct States<'a> {
    store: &'a StateStore,
    impls: &'a ImplTable,
    puts: SmallVec<[(TaskId, u32, StoredState); 1]>,
}

impl<'a> States<'a> {
    pub(crate) fn new(store: &'a StateStore, impls: &'a ImplTable) -> Self {
        States {
            store,
            impls,
            puts: SmallVec::new(),
        }
    }

    /// Leaves `state` to start packet `seq` of `task`, once committed.
    fn put(&mut self, task: TaskId, seq: u32, state: StoredState) {
        self.puts.push((task, seq, state));
    }

    /// Puts the states the set left into the store (before its results are delivered).
    pub(crate) fn commit(self) {
        for (task, seq, state) in self.puts {
            self.store.put(task, seq, state);
        }
    }
}

/// The next packets to run from the front of the worker's hand: one packet; or a chain run,
/// when it is of a chained AES job whose next packets follow it in the hand (they run one after
/// another, the chaining state kept by the worker between them, not passed through the store);
/// or, when it is of a serial AES operation (CBC or CFB encryption, OFB) that `impls` runs on
/// the lanes, the longest prefix of the hand made of such packets of different jobs, up to the
/// lane width `impls` chose for the first one and at most `lanes` (the node's own bound): a
/// lane set. A set runs at once, whatever its size: a lane never waits for others to fill it,
/// so a chained job's next packet is not held back. Taking a prefix keeps the node's packets in
/// the order the scheduler placed them (docs/ALGORITHM.md §15.3).
pub(crate) fn take_set(
    hand: &mut VecDeque<Packet<PacketData>>,
    lanes: usize,
    impls: &ImplTable,
) -> PacketSet {
    let Some(first) = hand.pop_front() else {
        return SmallVec::new();
    };
    let chained =
        matches!(&first.data.job.operation, Operation::Aes { op, .. } if op.mode.is_chained());
    let follows = |prev: &PacketMeta, p: &Packet<PacketData>| {
        p.meta.task == prev.task && p.meta.seq == prev.seq + 1
    };
    if chained && hand.front().is_some_and(|p| follows(&first.meta, p)) {
        let mut run: PacketSet = smallvec::smallvec![first];
        while hand
            .front()
            .is_some_and(|p| follows(&run[run.len() - 1].meta, p))
        {
            run.extend(hand.pop_front());
        }
        return run;
    }
    lane_set(hand, lanes, impls, first)
}

/// `first` and, if it is of a serial operation `impls` runs on the lanes, the packets of such
/// operations of other jobs that follow it in the hand, up to the width chosen for `first`'s
/// operation and at most `lanes`.
fn lane_set(
    hand: &mut VecDeque<Packet<PacketData>>,
    lanes: usize,
    impls: &ImplTable,
    first: Packet<PacketData>,
) -> PacketSet {
    let laned = |p: &Packet<PacketData>| lane_width(p, impls);
    let width = laned(&first).min(lanes);
    let mut set: PacketSet = SmallVec::new();
    set.push(first);
    while set.len() < width {
        match hand.front() {
            // A light packet is delivered out of the system, not to the core (§15.7): a set
            // is all light or all placed by the core.
            Some(p)
                if laned(p) > 1
                    && p.data.light == set[0].data.light
                    && set.iter().all(|q| q.meta.task != p.meta.task) =>
            {
                if let Some(p) = hand.pop_front() {
                    set.push(p);
                }
            }
            _ => break,
        }
    }
    set
}

/// The width of the lane sets `impls` runs `p`'s operation in: 1 for an operation that does
/// not run on the lanes (not serial).
pub(crate) fn lane_width(p: &Packet<PacketData>, impls: &ImplTable) -> usize {
    match &p.data.job.operation {
        Operation::Aes { op, .. } if op.is_serial() => impls.lane_width(*op),
        _ => 1,
    }
}

/// Whether a set is a chain run: several packets, all of one job.
pub(crate) fn is_chain_run(set: &[Packet<PacketData>]) -> bool {
    set.len() > 1 && set.iter().all(|p| p.meta.task == set[0].meta.task)
}

/// Where a running set may pause, so that its worker can run a light tenant's packets in
/// between (docs/ALGORITHM.md §15.7): between two slices of a lane set, each lane advancing
/// `slice` bytes, and between two packets of a chain run.
pub(crate) struct Pause<'a> {
    /// Bytes of each lane per slice.
    pub(crate) slice: usize,
    /// Called at each pause.
    pub(crate) hook: &'a mut dyn FnMut(),
}

/// Runs a set of packets: one through [`execute`], a chain run through [`run_chain`], or a lane
/// set through [`run_lanes`](crate::crypto::run_lanes) (in slices, with `pause`). Results come
/// back in the set's order.
pub(crate) fn run_set(
    store: &mut States<'_>,
    set: PacketSet,
    pause: Option<&mut Pause<'_>>,
) -> Vec<Result<PartOutput, JobError>> {
    if set.len() == 1 {
        return set
            .into_iter()
            .map(|p| {
                let Packet { meta, data: work } = p;
                let PacketData {
                    job,
                    mut data,
                    msg_len,
                    start,
                    input,
                    ..
                } = work;
                execute(
                    store,
                    &job,
                    &meta,
                    input.as_deref().map(|b| &b[..]),
                    &mut data,
                    msg_len,
                    start,
                )
            })
            .collect();
    }
    if is_chain_run(&set) {
        return run_chain(store, set, pause);
    }
    run_lane_set(store, set, pause)
}

/// Whether a packet its node keeps to run again should it fail runs out of place
/// ([`PacketData::share_for_retry`]) rather than on a copy of its input made before it runs:
/// one whose implementation runs it from one buffer into another at the speed it runs in
/// place. Alone or in a chain run (`in_lanes` false), that is a packet of a GCM job cut into
/// several (every GCM chain, RustCrypto's and OpenSSL's, does), a GCM job of one packet on
/// AWS-LC ([`AesImpl::seals_between`]), and a packet of ECB, CBC decryption or CTR on
/// RustCrypto or OpenSSL, or of CTR or CBC decryption on AWS-LC ([`AesImpl::runs_between`]),
/// that is not padded here; AWS-LC's other calls, ring's and the single-stream loop run in
/// place only. In a lane set (`in_lanes`), every packet: the lanes read each whole block from
/// the input where it is ([`LaneItem::input`]).
pub(crate) fn runs_out_of_place(
    job: &JobRecord,
    meta: &PacketMeta,
    impls: &ImplTable,
    in_lanes: bool,
) -> bool {
    match &job.operation {
        // A job of one packet in one call of its implementation; GCM never runs in lanes.
        Operation::Gcm { direction, .. } if meta.seq == 0 && meta.last => impls
            .get(AesOp::new(*direction, crate::packet::Mode::Gcm))
            .seals_between(),
        Operation::Gcm { .. } => true,
        Operation::Aes { op, .. } => {
            in_lanes || (!(meta.last && op.pads_on_encrypt()) && impls.alone(*op).runs_between(*op))
        }
        _ => false,
    }
}

/// Runs one AES packet on the implementation a packet by itself runs on
/// ([`ImplTable::alone`]): with an input (a packet readied out of place), from it into `data`,
/// as long, where `process_between_with` copies one its implementation runs in place only (see
/// [`runs_out_of_place`]); without, in place in `data`.
fn run_aes_packet(
    impls: &ImplTable,
    key: &AesKey,
    op: AesOp,
    state: &mut ChainState,
    (input, data): (Option<&[u8]>, &mut [u8]),
    len: usize,
    last: bool,
) -> Result<usize, CryptoError> {
    let implementation = impls.alone(op);
    match input {
        Some(input) => {
            key.process_between_with(implementation, op, state, (input, data), len, last)
        }
        None => key.process_with(implementation, op, state, data, len, last),
    }
}

/// Runs consecutive packets of one chained AES job one after another, as [`execute`] would run
/// each (out of place where it would), but with the chaining state kept here between them: it
/// is taken (from the IV or the store) before the first and handed to the store after the last,
/// unless that ends the job.
/// A packet that fails breaks the chain: the packets after it fail with
/// [`JobError::StateLost`], as they would finding no state in the store.
fn run_chain(
    store: &mut States<'_>,
    set: PacketSet,
    mut pause: Option<&mut Pause<'_>>,
) -> Vec<Result<PartOutput, JobError>> {
    let job = Arc::clone(&set[0].data.job);
    let Operation::Aes { key, op } = &job.operation else {
        // `take_set` forms chain runs of AES jobs only.
        let e = JobError::Internal(format!("a chain run of {}, not an AES job", job.task));
        return set.iter().map(|_| Err(e.clone())).collect();
    };
    // The state between the run's packets; `Err` once the chain is broken.
    let mut state: Result<Option<ChainState>, ()> = Ok(None);
    let mut next_seq = 0;
    let mut results = Vec::with_capacity(set.len());
    for (i, p) in set.into_iter().enumerate() {
        if i > 0 {
            if let Some(pause) = pause.as_mut() {
                (pause.hook)();
            }
        }
        let Packet { meta, data: work } = p;
        let PacketData {
            mut data,
            msg_len,
            start,
            input,
            ..
        } = work;
        let begun = match state {
            Ok(Some(s)) => Ok(s),
            Ok(None) => chain_state(store.store, &job, meta.seq, start),
            Err(()) => Err(JobError::StateLost(job.task)),
        };
        let mut s = match begun {
            Ok(s) => s,
            Err(e) => {
                state = Err(());
                results.push(Err(e));
                continue;
            }
        };
        let io = (input.as_deref().map(|b| &b[..]), &mut data[..]);
        match run_aes_packet(store.impls, key, *op, &mut s, io, msg_len, meta.last) {
            Ok(n) => {
                data.truncate(n);
                results.push(Ok(PartOutput::Data(data)));
                state = Ok((!meta.last).then_some(s));
                next_seq = meta.seq.wrapping_add(1);
            }
            Err(e) => {
                state = Err(());
                results.push(Err(e.into()));
            }
        }
    }
    if let Ok(Some(s)) = state {
        store.put(job.task, next_seq, StoredState::Chain(s));
    }
    results
}

/// A chained packet's starting state: the IV the job's first packet carries, or a copy of what
/// the job's previous packet left in the store for packet `seq` (it stays there until this
/// packet is delivered). An earlier packet of the job failed (its node, say): the chain is
/// broken, so the packet does not run on a state that is not its own, and the job's states
/// leave the store.
fn chain_state(
    store: &StateStore,
    job: &JobRecord,
    seq: u32,
    iv: Option<ChainState>,
) -> Result<ChainState, JobError> {
    if job.has_failed() {
        store.remove(job.task);
        return Err(JobError::StateLost(job.task));
    }
    match iv {
        Some(iv) => Ok(iv),
        None => store
            .chain(job.task, seq)
            .ok_or(JobError::StateLost(job.task)),
    }
}

/// Whether a packet's starting state comes from the store and stays there until the packet is
/// delivered (a chained AES packet that does not carry its IV): its deliverer
/// [`releases`](StateStore::release) it.
pub(crate) fn reads_stored_chain(job: &JobRecord, start_carried: bool) -> bool {
    !start_carried && matches!(&job.operation, Operation::Aes { op, .. } if op.mode.is_chained())
}

/// Runs one packet: the cryptography, with the chaining state taken from and returned to the
/// store.
///
/// With `input`, the packet runs out of place ([`runs_out_of_place`]): from `input` into
/// `data`, as long; a packet that runs in place only is first copied into `data`.
pub(crate) fn execute(
    store: &mut States<'_>,
    job: &JobRecord,
    meta: &PacketMeta,
    input: Option<&[u8]>,
    data: &mut BytesMut,
    msg_len: usize,
    iv: Option<ChainState>,
) -> Result<PartOutput, JobError> {
    let input = match input {
        Some(bytes) if !runs_out_of_place(job, meta, store.impls, false) => {
            data.clear();
            data.extend_from_slice(bytes);
            None
        }
        input => input,
    };
    match &job.operation {
        Operation::Aes { key, op } => {
            let chained = op.mode.is_chained();
            let mut state = match iv {
                Some(iv) if !chained => iv,
                None if !chained => ChainState::default(),
                iv => chain_state(store.store, job, meta.seq, iv)?,
            };
            let io = (input, &mut data[..]);
            let n = run_aes_packet(store.impls, key, *op, &mut state, io, msg_len, meta.last)?;
            if chained && !meta.last {
                store.put(
                    job.task,
                    meta.seq.wrapping_add(1),
                    StoredState::Chain(state),
                );
            }
            data.truncate(n);
            Ok(PartOutput::Data(std::mem::take(data)))
        }
        // docs/ALGORITHM.md §15.4: the first packet starts the hash, each packet hands it on
        // through the store, the last one seals or opens.
        Operation::Gcm {
            key,
            direction,
            nonce,
            aad,
            tag,
        } => {
            if meta.seq == 0 && meta.last {
                // A job of one packet: one call of the chosen implementation.
                return gcm_whole(
                    store.impls,
                    key,
                    (*direction, nonce, aad, tag.as_ref()),
                    input,
                    data,
                    msg_len,
                );
            }
            let mut state = if meta.seq == 0 {
                let implementation = store.impls.gcm_chain(*direction);
                Box::new(key.gcm_start_with(implementation, *direction, nonce, aad)?)
            } else {
                match store.store.take(job.task, meta.seq) {
                    Some(StoredState::Gcm(state)) => state,
                    // Taken by a run of this packet on a node that failed: rebuilt.
                    _ => Box::new(rebuild_gcm(job, meta.seq, key, *direction, nonce, aad)?),
                }
            };
            let text = match packet_text(input, data, msg_len)? {
                (Some(input), out) => Text::between(input, out)?,
                (None, out) => Text::in_place(out),
            };
            if !meta.last {
                key.gcm_update_text(*direction, &mut state, text)?;
                store.put(job.task, meta.seq.wrapping_add(1), StoredState::Gcm(state));
                return Ok(PartOutput::Data(std::mem::take(data)));
            }
            match (direction, tag) {
                (Direction::Encrypt, _) => {
                    let tag = key.gcm_seal_final_text(*state, text)?;
                    Ok(PartOutput::Sealed(std::mem::take(data), tag))
                }
                // On a mismatch this packet is left as ciphertext, and the plaintext of the
                // earlier packets is zeroized by the job record (`work.rs`).
                (Direction::Decrypt, Some(tag)) => {
                    key.gcm_open_final_text(*state, text, tag)?;
                    Ok(PartOutput::Data(std::mem::take(data)))
                }
                (Direction::Decrypt, None) => Err(CryptoError::TagLength { got: 0 }.into()),
            }
        }
        Operation::Sign { key } => Ok(PartOutput::Signature(key.sign(&data[..msg_len]))),
        Operation::VerifyBatch { items, starts } => {
            let part = usize::try_from(meta.seq).unwrap_or(usize::MAX);
            let first = starts.get(part).copied().unwrap_or(items.len());
            let end = starts.get(part + 1).copied().unwrap_or(items.len());
            let mut rest = &data[..msg_len];
            let mut batch = Vec::with_capacity(end - first);
            for (key, sig, len) in &items[first..end] {
                let (msg, tail) = rest.split_at((*len).min(rest.len()));
                batch.push(BatchItem { key, msg, sig });
                rest = tail;
            }
            Ok(PartOutput::VerifiedBatch(verify_batch(&batch)))
        }
        Operation::Verify { key, sig } => Ok(PartOutput::Verified(
            key.verify(&data[..msg_len], &sig[..])?,
        )),
    }
}

/// A packet's `msg_len` bytes: of its input when it runs out of place, and of `data`, the
/// buffer it runs in (or into).
///
/// # Errors
/// [`CryptoError::LengthExceedsBuffer`] when either is shorter.
fn packet_text<'i, 'd>(
    input: Option<&'i [u8]>,
    data: &'d mut [u8],
    msg_len: usize,
) -> Result<(Option<&'i [u8]>, &'d mut [u8]), CryptoError> {
    let short = |buf: usize| CryptoError::LengthExceedsBuffer { len: msg_len, buf };
    let input = input
        .map(|input| input.get(..msg_len).ok_or(short(input.len())))
        .transpose()?;
    let buf = data.len();
    Ok((input, data.get_mut(..msg_len).ok_or(short(buf))?))
}

/// Seals or opens a GCM job of one packet in one call of the implementation `impls` chose
/// for it: in place in `data`, or, with an `input` (a packet readied out of place, see
/// [`runs_out_of_place`]), from it into `data`. On a failed open the output is zeroized
/// (AWS-LC may have decrypted it before comparing the tag), so nothing unauthenticated leaves.
fn gcm_whole(
    impls: &ImplTable,
    key: &crate::crypto::AesKey,
    (direction, nonce, aad, tag): (Direction, &[u8], &[u8], Option<&Tag>),
    input: Option<&[u8]>,
    data: &mut BytesMut,
    msg_len: usize,
) -> Result<PartOutput, JobError> {
    let implementation = impls.get(AesOp::new(direction, crate::packet::Mode::Gcm));
    let (input, text) = packet_text(input, data, msg_len)?;
    match (direction, tag) {
        (Direction::Encrypt, _) => {
            let tag = match input {
                Some(input) => key.gcm_seal_between_with(implementation, nonce, aad, (input, text)),
                None => key.gcm_seal_in_place_with(implementation, nonce, aad, text),
            }?;
            Ok(PartOutput::Sealed(std::mem::take(data), tag))
        }
        (Direction::Decrypt, Some(tag)) => {
            let opened = match input {
                Some(input) => {
                    key.gcm_open_between_with(implementation, nonce, aad, &tag[..], (input, text))
                }
                None => key.gcm_open_in_place_with(implementation, nonce, aad, text, &tag[..]),
            };
            if let Err(e) = opened {
                text.zeroize();
                return Err(e.into());
            }
            Ok(PartOutput::Data(std::mem::take(data)))
        }
        (Direction::Decrypt, None) => Err(CryptoError::TagLength { got: 0 }.into()),
    }
}

/// The state that starts packet `seq` of a GCM job, rebuilt from the job's start and the
/// outputs of its earlier packets, for a packet that runs again after its node failed (the
/// failed run took the state out of the store, and a GCM state cannot be copied). It is
/// rebuilt on RustCrypto whatever the job started on (an OpenSSL context hashes what it
/// outputs in its own direction only), and the job's later packets go on from it. The hash is
/// over the ciphertext either way: an encryption's earlier outputs are ciphertext, run through
/// as a decryption; a decryption's are plaintext, run through as an encryption. The copy is
/// zeroized.
fn rebuild_gcm(
    job: &JobRecord,
    seq: u32,
    key: &crate::crypto::AesKey,
    direction: Direction,
    nonce: &[u8],
    aad: &[u8],
) -> Result<crate::crypto::GcmState, JobError> {
    let lost = || JobError::StateLost(job.task);
    if job.has_failed() {
        return Err(lost());
    }
    let mut earlier = job
        .earlier_outputs(usize::try_from(seq).map_err(|_| lost())?)
        .ok_or_else(lost)?;
    let mut state = key.gcm_start(nonce, aad)?;
    let replay = match direction {
        Direction::Encrypt => Direction::Decrypt,
        Direction::Decrypt => Direction::Encrypt,
    };
    key.gcm_update(replay, &mut state, &mut earlier)?;
    Ok(state)
}

/// One packet of the set, ready to run, or already failed.
struct LanePacket {
    meta: PacketMeta,
    job: Arc<JobRecord>,
    data: BytesMut,
    /// The input of a packet readied out of place; `data` is then its output buffer.
    input: Option<Arc<BytesMut>>,
    msg_len: usize,
    state: Result<ChainState, JobError>,
}

/// Runs `set` (packets of serial AES operations, of different jobs) as one lane set; the
/// results come back in the set's order. A packet that cannot start (its chain broken) fails
/// alone; if the lane set as a whole is refused, each packet runs alone, so each gets its own
/// answer.
fn run_lane_set(
    store: &mut States<'_>,
    set: PacketSet,
    pause: Option<&mut Pause<'_>>,
) -> Vec<Result<PartOutput, JobError>> {
    let mut prepared: Vec<LanePacket> = set
        .into_iter()
        .map(|p| {
            let Packet { meta, data: work } = p;
            let PacketData {
                job,
                data,
                msg_len,
                start,
                input,
                ..
            } = work;
            let state = chain_state(store.store, &job, meta.seq, start);
            LanePacket {
                meta,
                job,
                data,
                input,
                msg_len,
                state,
            }
        })
        .collect();

    let mut items: Vec<LaneItem<'_>> = Vec::with_capacity(prepared.len());
    for p in prepared.iter_mut() {
        let LanePacket {
            meta,
            job,
            data,
            input,
            msg_len,
            state,
        } = p;
        let (Ok(state), Operation::Aes { key, op }) = (state, &job.operation) else {
            continue;
        };
        items.push(LaneItem {
            key,
            op: *op,
            state,
            buf: &mut data[..],
            len: *msg_len,
            last: meta.last,
            input: input.as_deref().map(|b| &b[..]),
        });
    }
    let lengths: Vec<usize> = items.iter().map(LaneItem::output_len).collect();
    let ran = match pause {
        Some(pause) => run_lanes_paused(&mut items, pause.slice, pause.hook).is_ok(),
        None => run_lanes(&mut items).is_ok(),
    };
    drop(items);

    let mut lengths = lengths.into_iter();
    prepared
        .into_iter()
        .map(|mut p| {
            let state = match p.state {
                Ok(state) => state,
                Err(e) => return Err(e),
            };
            if !ran {
                // Refused as a set: alone, the packet gets its own answer.
                return execute(
                    store,
                    &p.job,
                    &p.meta,
                    p.input.as_deref().map(|b| &b[..]),
                    &mut p.data,
                    p.msg_len,
                    Some(state),
                );
            }
            let n = lengths.next().unwrap_or(p.msg_len);
            if !p.meta.last {
                store.put(
                    p.job.task,
                    p.meta.seq.wrapping_add(1),
                    StoredState::Chain(state),
                );
            }
            p.data.truncate(n);
            Ok(PartOutput::Data(p.data))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::crypto::{AesKey, AesOp};
    use crate::packet::{ClusterId, Mode, NodeId, TaskId};
    use crate::runtime::cut::{Cutting, aes_packet_count, cut_aes};

    const PACKET: Cutting = Cutting {
        packet: 32,
        fold: true,
    };

    /// A job of `op` over `data`, cut into packets of 32 bytes.
    pub(crate) fn packets(
        task: u64,
        key: &Arc<AesKey>,
        op: AesOp,
        iv: &[u8],
        data: &[u8],
    ) -> Vec<Packet<PacketData>> {
        let job = Arc::new(JobRecord::new(
            TaskId(task),
            ClusterId(0),
            Operation::Aes {
                key: Arc::clone(key),
                op,
            },
            aes_packet_count(op, data.len(), PACKET, true),
        ));
        let start = op
            .mode
            .takes_iv()
            .then(|| ChainState::for_mode(op.mode, iv).unwrap());
        cut_aes(&job, op, data.to_vec(), PACKET, 0, true, start)
            .into_iter()
            .collect()
    }

    /// Runs a set as a worker does: the states it leaves are committed before its results are
    /// delivered.
    fn run(store: &StateStore, set: PacketSet) -> Vec<Result<PartOutput, JobError>> {
        let impls = crate::crypto::ImplTable::rustcrypto();
        let mut states = States::new(store, &impls);
        let results = run_set(&mut states, set, None);
        states.commit();
        results
    }

    fn output(results: Vec<Result<PartOutput, JobError>>) -> Vec<u8> {
        results
            .into_iter()
            .flat_map(|r| match r {
                Ok(PartOutput::Data(d)) => d.to_vec(),
                _ => panic!("a packet failed"),
            })
            .collect()
    }

    #[test]
    fn a_chained_jobs_packets_in_a_row_run_as_one_chain_run() {
        let key = Arc::new(AesKey::new(&[7; 16]).unwrap());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let ecb = AesOp::new(Direction::Encrypt, Mode::Ecb);
        let iv = [3u8; 16];
        let data: Vec<u8> = (0..128u8).collect();
        let a = packets(1, &key, cbc, &iv, &data);
        let b = packets(2, &key, cbc, &iv, &data[..32]);
        let c = packets(3, &key, ecb, &[], &data[..64]);
        // a's four packets, then b's one, then c's two: a chain run of a's four, then b alone
        // (c's ECB packets are not serial, so no lane set forms with them), then c's one at
        // a time (ECB is not chained).
        let mut hand: VecDeque<Packet<PacketData>> = a.into_iter().chain(b).chain(c).collect();
        let sizes: Vec<Vec<u64>> = std::iter::from_fn(|| {
            let set = take_set(&mut hand, 8, &lanes(8));
            (!set.is_empty()).then(|| set.iter().map(|p| p.meta.task.0).collect())
        })
        .collect();
        assert_eq!(sizes, vec![vec![1, 1, 1, 1], vec![2], vec![3], vec![3]]);
    }

    /// The implementation table that runs serial operations on lanes of `width`.
    pub(crate) fn lanes(width: usize) -> crate::crypto::ImplTable {
        crate::crypto::ImplTable::pinned(crate::crypto::AesImpl::Lanes { width }).unwrap()
    }

    /// The sets a hand of one-packet serial jobs `1..=n` is taken in, by task.
    fn sets_of(n: u64, cap: usize, impls: &crate::crypto::ImplTable) -> Vec<Vec<u64>> {
        let key = Arc::new(AesKey::new(&[7; 16]).unwrap());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let mut hand: VecDeque<Packet<PacketData>> = (1..=n)
            .flat_map(|t| packets(t, &key, cbc, &[1; 16], &[0; 32]))
            .collect();
        std::iter::from_fn(|| {
            let set = take_set(&mut hand, cap, impls);
            (!set.is_empty()).then(|| set.iter().map(|p| p.meta.task.0).collect())
        })
        .collect()
    }

    #[test]
    fn lane_sets_are_as_wide_as_the_table_chose_within_the_nodes_bound() {
        assert_eq!(sets_of(5, 64, &lanes(2)), [vec![1, 2], vec![3, 4], vec![5]]);
        assert_eq!(sets_of(5, 3, &lanes(16)), [vec![1, 2, 3], vec![4, 5]]);
        // Where the lanes did not win, serial packets run one at a time.
        let one_by_one = crate::crypto::ImplTable::rustcrypto();
        assert_eq!(sets_of(3, 64, &one_by_one), [vec![1], vec![2], vec![3]]);
    }

    #[test]
    fn a_chain_run_gives_the_one_shot_output_and_leaves_the_state_for_the_rest() {
        let key = Arc::new(AesKey::new(&[9; 16]).unwrap());
        let iv = [5u8; 16];
        let data: Vec<u8> = (0..160u8).collect();
        for op in [
            AesOp::new(Direction::Encrypt, Mode::Cbc),
            AesOp::new(Direction::Decrypt, Mode::Cbc),
            AesOp::new(Direction::Encrypt, Mode::Ofb),
            AesOp::new(Direction::Decrypt, Mode::Cfb),
        ] {
            let want = key.one_shot(op, &iv, &data).unwrap();
            let store = StateStore::default();
            let mut all = packets(1, &key, op, &iv, &data);
            // The first three packets as one run, the last two as another: the state passes
            // through the store between the runs, and is gone after the job's last packet.
            let rest = all.split_off(3);
            let mut out = output(run(&store, all.into_iter().collect()));
            assert_eq!(store.len(), 1, "{op:?}: the state waits for the next run");
            out.extend(output(run(&store, rest.into_iter().collect())));
            assert_eq!(out, want, "{op:?}");
            assert_eq!(
                store.len(),
                1,
                "{op:?}: the state that started the second run stays until it is delivered"
            );
            // A rerun of the second run (its node failed before delivering) gives the same
            // output from the same state.
            let again = packets(1, &key, op, &iv, &data).split_off(3);
            assert_eq!(
                output(run(&store, again.into_iter().collect())),
                want[3 * 32..],
                "{op:?}: a rerun"
            );
            store.release(TaskId(1), 3);
            assert_eq!(
                store.len(),
                0,
                "{op:?}: no state after the job's last packet is delivered"
            );
        }
    }

    #[test]
    fn a_chain_run_readied_out_of_place_leaves_its_inputs_as_they_were() {
        let key = Arc::new(AesKey::new(&[9; 16]).unwrap());
        let iv = [5u8; 16];
        let data: Vec<u8> = (0..160u8).collect();
        // CBC decryption runs between two buffers; CBC encryption in place only, so its
        // packets, readied out of place all the same, run on a copy of their inputs.
        for op in [
            AesOp::new(Direction::Decrypt, Mode::Cbc),
            AesOp::new(Direction::Encrypt, Mode::Cbc),
        ] {
            let want = key.one_shot(op, &iv, &data).unwrap();
            let store = StateStore::default();
            let mut spare = Vec::new();
            let mut set: PacketSet = packets(1, &key, op, &iv, &data).into_iter().collect();
            let retries: Vec<PacketData> = set
                .iter_mut()
                .map(|p| p.data.share_for_retry(&mut spare))
                .collect();
            assert!(is_chain_run(&set));
            assert_eq!(output(run(&store, set)), want, "{op:?}");
            let kept: Vec<u8> = retries
                .iter()
                .flat_map(|r| r.input.as_deref().unwrap().to_vec())
                .collect();
            assert_eq!(kept, data, "{op:?}: the inputs kept for a retry");
        }
    }

    #[test]
    fn a_chain_run_of_a_failed_job_runs_nothing() {
        let key = Arc::new(AesKey::new(&[9; 16]).unwrap());
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let store = StateStore::default();
        let mut all = packets(4, &key, op, &[1; 16], &[0; 96]);
        let rest = all.split_off(1);
        // The job's first packet ran elsewhere and failed: its state never reached the store.
        let job = Arc::clone(&all[0].data.job);
        let _ = job.part_done(
            0,
            0,
            Err(JobError::NodeFailed(NodeId(0))),
            &Default::default(),
        );
        let results = run(&store, rest.into_iter().collect());
        assert_eq!(results.len(), 2);
        for r in results {
            assert!(matches!(r, Err(JobError::StateLost(TaskId(4)))));
        }
        assert_eq!(store.len(), 0);
    }
}
