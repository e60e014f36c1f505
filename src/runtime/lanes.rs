//! A node's lane set (docs/ALGORITHM.md §15.3): packets of serial AES operations of different
//! jobs, run interleaved by [`run_lanes`], each with its chaining state taken from and handed
//! back to the state store exactly as a packet run alone would.

use std::sync::Arc;

use bytes::BytesMut;
use smallvec::SmallVec;

use crate::crypto::{ChainState, LaneItem, run_lanes};
use crate::packet::{Packet, PacketMeta};
use crate::runtime::error::JobError;
use crate::runtime::handle::{JobShared, JobWork, PartOutput, Work};
use crate::runtime::store::{StateStore, StoredState};
use crate::runtime::worker::{chain_state, execute};

/// One packet of the set, ready to run, or already failed.
struct Prepared {
    meta: PacketMeta,
    job: Arc<JobShared>,
    data: BytesMut,
    msg_len: usize,
    state: Result<ChainState, JobError>,
}

/// Runs `set` (packets of serial AES operations, of different jobs) as one lane set; the
/// results come back in the set's order. A packet that cannot start (its chain broken) fails
/// alone; if the lane set as a whole is refused, each packet runs alone, so each gets its own
/// answer.
pub(crate) fn run(
    store: &StateStore,
    set: SmallVec<[Packet<Work>; 1]>,
) -> Vec<Result<PartOutput, JobError>> {
    let mut prepared: Vec<Prepared> = set
        .into_iter()
        .map(|p| {
            let Packet { meta, data: work } = p;
            let Work {
                job,
                data,
                msg_len,
                start,
                ..
            } = work;
            let state = chain_state(store, &job, start);
            Prepared {
                meta,
                job,
                data,
                msg_len,
                state,
            }
        })
        .collect();

    let mut items: Vec<LaneItem<'_>> = Vec::with_capacity(prepared.len());
    for p in prepared.iter_mut() {
        let Prepared {
            meta,
            job,
            data,
            msg_len,
            state,
        } = p;
        let (Ok(state), JobWork::Aes { key, op }) = (state, &job.work) else {
            continue;
        };
        items.push(LaneItem {
            key,
            op: *op,
            state,
            buf: &mut data[..],
            len: *msg_len,
            last: meta.last,
        });
    }
    let lengths: Vec<usize> = items.iter().map(LaneItem::output_len).collect();
    let ran = run_lanes(&mut items).is_ok();
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
                return execute(store, &p.job, &p.meta, &mut p.data, p.msg_len, Some(state));
            }
            let n = lengths.next().unwrap_or(p.msg_len);
            if !p.meta.last {
                store.put(p.job.task, StoredState::Chain(state));
            }
            p.data.truncate(n);
            Ok(PartOutput::Data(p.data))
        })
        .collect()
}
