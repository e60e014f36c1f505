//! Cutting a job's data into packets, without copying: one `BytesMut` split into disjoint
//! chunks, each travelling with its packet.

use std::sync::Arc;

use bytes::BytesMut;

use crate::crypto::{AesOp, BLOCK, ChainState, padded_len};
use crate::packet::{Mode, Packet, PacketMeta};
use crate::runtime::work::{JobRecord, PacketData, Packets};

/// The bytes `len` bytes of AES data take once cut: with an encryption's PKCS#7 padding block
/// when the data ends the job.
pub(crate) fn aes_buffer_len(op: AesOp, len: usize, ends_job: bool) -> usize {
    if ends_job && op.pads_on_encrypt() {
        padded_len(len)
    } else {
        len
    }
}

/// Grows `data` to [`aes_buffer_len`], by exactly the padding room: growing by `resize` alone
/// could double the buffer (and copy the job); a buffer that has the room already (`Job::aes`
/// makes it) stays put.
pub(crate) fn make_padding_room(op: AesOp, data: &mut Vec<u8>, ends_job: bool) {
    let len = data.len();
    let padded = aes_buffer_len(op, len, ends_job);
    data.reserve_exact(padded - len);
    data.resize(padded, 0);
}

/// How AES data is cut into packets: `packet` bytes each, and whether an encryption's PKCS#7
/// padding block rides in the last packet (`fold`, which may then hold `packet` + 16 bytes)
/// rather than making a packet of its own when the data is a whole number of packets. The
/// builder folds when every node of the AES cluster can hold such a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cutting {
    pub(crate) packet: usize,
    pub(crate) fold: bool,
}

/// The packets `len` bytes of AES data make: at least one, even for empty data. When the data
/// ends the job, an encryption's PKCS#7 padding counts, unless it folds into the last packet.
pub(crate) fn aes_packet_count(op: AesOp, len: usize, cut: Cutting, ends_job: bool) -> usize {
    let bytes = if cut.fold {
        len
    } else {
        aes_buffer_len(op, len, ends_job)
    };
    bytes.div_ceil(cut.packet).max(1)
}

/// Cuts AES data into packets of `cut.packet` bytes without copying: one `BytesMut` split
/// into disjoint chunks. The packets are numbered from `first_seq`; when the data `ends_job`,
/// the last packet is the job's last, with room for an encryption's padding (one block more
/// than a packet when the padding folds into it). `start` (the IV,
/// for a chained job's first packet) travels with the first packet; in CTR, `start` is the
/// first packet's counter block and every packet carries its own, `start` plus its offset in
/// blocks (docs/ALGORITHM.md §15.4).
pub(crate) fn cut_aes(
    job: &Arc<JobRecord>,
    op: AesOp,
    mut data: Vec<u8>,
    cut: Cutting,
    first_seq: u32,
    ends_job: bool,
    mut start: Option<ChainState>,
) -> Packets {
    let msg_total = data.len();
    make_padding_room(op, &mut data, ends_job);
    let n = aes_packet_count(op, msg_total, cut, ends_job);
    let packet_size = cut.packet;
    // A job cut whole is known to the policies by its length; a stream's parts are not.
    let job_bytes = (first_seq == 0 && ends_job).then_some(data.len() as u64);
    let mut buf = bytes_mut(data);
    let mut packets = Packets::with_capacity(n);
    for i in 0..n {
        let final_part = i + 1 == n;
        let chunk = if final_part {
            std::mem::take(&mut buf)
        } else {
            buf.split_to(packet_size)
        };
        let msg_len = if final_part {
            msg_total - i * packet_size
        } else {
            chunk.len()
        };
        let packet_start = if op.mode == Mode::Ctr {
            let blocks = (i * packet_size / BLOCK) as u64;
            start.as_ref().map(|first| first.counter_plus(blocks))
        } else {
            start.take()
        };
        let work = PacketData {
            job: Arc::clone(job),
            part: i,
            data: chunk,
            msg_len,
            start: packet_start,
            attempt: 0,
            light: false,
            input: None,
        };
        packets.push(Packet::new(
            PacketMeta::new(job.task, op.direction.cmd(), job.cluster)
                .dependent(op.mode.is_chained())
                .at(first_seq + i as u32, final_part && ends_job)
                .job_bytes(job_bytes),
            work,
        ));
    }
    packets
}

/// Takes over a `Vec`'s allocation as a `BytesMut`, without copying.
pub(crate) fn bytes_mut(data: Vec<u8>) -> BytesMut {
    BytesMut::from(bytes::Bytes::from(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{AesKey, Direction, Padding};
    use crate::packet::{ClusterId, TaskId};
    use crate::runtime::work::{Operation, output_home, warm_spare};

    /// Cuts a padded CBC encryption of `data` into packets of 64 bytes, the padding folded
    /// into the last packet or not.
    fn cut_padded_with(data: Vec<u8>, fold: bool) -> Packets {
        let cut = Cutting { packet: 64, fold };
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
        let len = data.len();
        let key = Arc::new(AesKey::new(&[1; 16]).unwrap());
        let job = Arc::new(JobRecord::new(
            TaskId(1),
            ClusterId(0),
            Operation::Aes { key, op },
            aes_packet_count(op, len, cut, true),
        ));
        cut_aes(&job, op, data, cut, 0, true, None)
    }

    fn cut_padded(data: Vec<u8>) -> Packets {
        cut_padded_with(data, true)
    }

    /// (message bytes, buffer bytes) of each packet.
    fn shape(packets: &Packets) -> Vec<(usize, usize)> {
        packets
            .iter()
            .map(|p| (p.data.msg_len, p.data.data.len()))
            .collect()
    }

    #[test]
    fn the_padding_block_folds_into_the_last_packet() {
        // A whole number of packets: the block rides in the last one, which is one block
        // longer than a packet, instead of making a packet of its own.
        assert_eq!(shape(&cut_padded(vec![1; 128])), [(64, 64), (64, 80)]);
        assert_eq!(
            shape(&cut_padded_with(vec![1; 128], false)),
            [(64, 64), (64, 64), (0, 16)]
        );
        // Otherwise the last packet has room for it either way.
        for fold in [true, false] {
            assert_eq!(
                shape(&cut_padded_with(vec![1; 100], fold)),
                [(64, 64), (36, 48)]
            );
            assert_eq!(shape(&cut_padded_with(Vec::new(), fold)), [(0, 16)]);
        }
        // Only a padded encryption's last packet grows: no padding, no growth.
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
        let cut = Cutting {
            packet: 64,
            fold: true,
        };
        assert_eq!(aes_packet_count(op, 128, cut, true), 2);
        assert_eq!(aes_packet_count(op, 129, cut, true), 3);
        assert_eq!(
            aes_packet_count(op.with_padding(Padding::Pkcs7), 129, cut, true),
            3
        );
        assert_eq!(
            aes_packet_count(op.with_padding(Padding::Pkcs7), 128, cut, false),
            2
        );
    }

    #[test]
    fn a_padded_job_with_room_is_cut_in_its_own_allocation() {
        let mut v = Vec::with_capacity(padded_len(100));
        v.extend_from_slice(&[5u8; 100]);
        let at = v.as_ptr();
        let packets = cut_padded(v);
        assert_eq!(packets[0].data.data.as_ptr(), at, "no copy of the job");
        let last = &packets[packets.len() - 1].data;
        assert_eq!(
            (last.msg_len, last.data.len()),
            (36, 48),
            "the padding is in the last packet"
        );
    }

    #[test]
    fn a_padded_job_without_room_grows_by_exactly_the_padding() {
        for len in [0, 1, 15, 16, 17, 1000] {
            let packets = cut_padded(vec![3u8; len]);
            let total: usize = packets.iter().map(|p| p.data.data.len()).sum();
            assert_eq!(total, padded_len(len), "len {len}");
            let last = &packets[packets.len() - 1].data;
            assert!(
                last.data.capacity() < last.data.len() + BLOCK,
                "len {len}: grew by doubling"
            );
        }
    }

    #[test]
    fn a_retry_copy_reuses_a_spare_buffer() {
        let packets = cut_padded(vec![7u8; 100]);
        let first = &packets[0].data;
        // No spare: a new buffer, the same bytes.
        let mut spare = Vec::new();
        let copy = first.copy_for_retry(&mut spare);
        assert_eq!(&copy.data[..], &first.data[..]);
        assert_ne!(copy.data.as_ptr(), first.data.as_ptr());
        // A spare larger than the packet, holding other bytes: the copy goes into it.
        let mut old = BytesMut::from(&[9u8; 200][..]);
        old.truncate(150);
        let at = old.as_ptr();
        spare.push(old);
        let copy = first.copy_for_retry(&mut spare);
        assert!(spare.is_empty());
        assert_eq!(copy.data.as_ptr(), at, "no allocation");
        assert_eq!(&copy.data[..], &first.data[..], "only the packet's bytes");
        assert_eq!((copy.msg_len, copy.part), (first.msg_len, first.part));
        // A spare too small grows to the packet.
        spare.push(BytesMut::from(&[1u8; 4][..]));
        let last = &packets[packets.len() - 1].data;
        assert_eq!(&last.copy_for_retry(&mut spare).data[..], &last.data[..]);
    }

    #[test]
    fn a_packet_run_out_of_place_shares_its_input_and_its_output_goes_home() {
        let mut packets = cut_padded(vec![7u8; 200]);
        let mut first = packets.remove(0).data;
        let home = first.data.as_ptr();
        let input = first.data.to_vec();
        // A spare longer than the packet, holding other bytes: the output buffer, cut to the
        // packet's length.
        let mut spare = vec![BytesMut::from(&[9u8; 200][..])];
        let mut retry = first.share_for_retry(&mut spare);
        assert!(spare.is_empty());
        assert_eq!(first.data.len(), input.len());
        assert_eq!(
            first.input.as_deref().map(|b| &b[..]),
            Some(&input[..]),
            "the input is shared as it was"
        );
        assert!(retry.data.is_empty());
        // The run writes its output; once it is over (the running packet gone), the output
        // goes into the input's buffer, and the output buffer back to the spares.
        first.data.fill(1);
        let out = std::mem::take(&mut first.data);
        drop(first);
        let delivered = output_home(retry.input.take().unwrap(), out, false, &mut spare);
        assert_eq!(
            delivered.as_ptr(),
            home,
            "the output is in the job's buffer"
        );
        assert_eq!(&delivered[..], &[1u8; 64][..]);
        assert_eq!(spare.len(), 1);
        // A retry record taken back while a stalled run still holds the input: a copy.
        let mut stalled = packets.remove(0).data;
        let second = stalled.data.to_vec();
        let mut retry = stalled.share_for_retry(&mut spare);
        retry.reclaim_input();
        assert_eq!(&retry.data[..], &second[..]);
        assert_ne!(Some(retry.data.as_ptr()), stalled.input.map(|b| b.as_ptr()));
        assert!(retry.input.is_none());
        // Once the run is gone, the input itself.
        let mut failed = packets.remove(0).data;
        let at = failed.data.as_ptr();
        let mut retry = failed.share_for_retry(&mut spare);
        drop(failed);
        retry.reclaim_input();
        assert_eq!(retry.data.as_ptr(), at, "no copy");
    }

    #[test]
    fn a_job_of_one_packet_run_out_of_place_has_its_output_as_it_is() {
        // A job of one packet: its output buffer is the job's output, its input's buffer a
        // spare.
        let mut packets = cut_padded(vec![2u8; 40]);
        let mut only = packets.remove(0).data;
        let input_at = only.data.as_ptr();
        let mut spare = Vec::new();
        let mut retry = only.share_for_retry(&mut spare);
        only.data.fill(6);
        let out = std::mem::take(&mut only.data);
        let out_at = out.as_ptr();
        drop(only);
        let delivered = output_home(retry.input.take().unwrap(), out, true, &mut spare);
        assert_eq!(delivered.as_ptr(), out_at, "no copy");
        assert!(delivered.iter().all(|&b| b == 6));
        assert_eq!(
            spare.iter().map(|b| b.as_ptr()).collect::<Vec<_>>(),
            [input_at]
        );
        // An input holding far more room than bytes is not kept.
        let mut roomy = BytesMut::with_capacity(1 << 20);
        roomy.extend_from_slice(&[1; 64]);
        let mut spare = Vec::new();
        let out = BytesMut::from(&[3u8; 64][..]);
        let delivered = output_home(Arc::new(roomy), out, true, &mut spare);
        assert_eq!(&delivered[..], &[3u8; 64][..]);
        assert!(spare.is_empty());
    }

    #[test]
    fn a_node_s_warm_spare_takes_its_first_packet_without_growing() {
        // Nothing kept for a retry: no spare.
        assert!(warm_spare(1, 64).is_empty());
        // The largest packet there is, a whole one with the padding block folded in: its
        // output, or its retry copy, goes into the warm buffer as it is.
        for run_out_of_place in [true, false] {
            let mut spare = warm_spare(3, 64);
            let at = spare[0].as_ptr();
            let mut packets = cut_padded(vec![1u8; 128]);
            let mut last = packets.pop().unwrap().data;
            assert_eq!(last.data.len(), 64 + BLOCK);
            let kept = if run_out_of_place {
                let _retry = last.share_for_retry(&mut spare);
                last.data.as_ptr()
            } else {
                last.copy_for_retry(&mut spare).data.as_ptr()
            };
            assert_eq!(kept, at, "out of place {run_out_of_place}: a new buffer");
            assert!(spare.is_empty());
        }
    }
}
