//! The protobuf codec of `cryptodispatch.v1`, for the daemon and its clients: prost's encoding,
//! and a decoding that is bounded before it allocates.
//!
//! Before a message is decoded, its top-level fields are walked on the wire (no allocation):
//! a message whose repeated fields hold more entries than [`Bounded::MAX_REPEATED`] allows, or
//! that is larger than [`Bounded::MAX_BYTES`], is refused without being decoded. A protobuf
//! entry can be 2 bytes on the wire and 72 in memory, so counting before decoding is what keeps
//! a batch of millions of empty items from costing gigabytes. Bytes that are not a well-formed
//! message are `INVALID_ARGUMENT` (tonic's own codec says `INTERNAL`), a message over a
//! method's size `OUT_OF_RANGE`, as tonic's transport limit does.

use std::marker::PhantomData;

use bytes::Buf;
use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use super::proto;

/// The most items of a `VerifyBatch` request (and answers of its response).
pub const MAX_BATCH_ITEMS: usize = 4096;
/// The largest message of a call that carries no payload (`GetPublicKey`): a key name and
/// room for framing and unknown fields.
pub const MAX_SMALL_MESSAGE: usize = 4096;

/// The bounds of one message type, checked on the wire before it is decoded.
pub trait Bounded {
    /// The largest encoded message, in bytes (the transport's limit applies too).
    const MAX_BYTES: usize = usize::MAX;
    /// For each repeated field: its number and the most entries it may hold.
    const MAX_REPEATED: &'static [(u32, usize)] = &[];
}

macro_rules! unbounded {
    ($($t:ident),* $(,)?) => { $(impl Bounded for proto::$t {})* };
}

unbounded!(
    AesRequest,
    AesResponse,
    SignRequest,
    SignResponse,
    VerifyRequest,
    VerifyResponse,
    GetPublicKeyResponse,
    StreamRequest,
    StreamResponse,
    GcmEncryptRequest,
    GcmEncryptResponse,
    GcmDecryptRequest,
    GcmDecryptResponse,
);

impl Bounded for proto::VerifyBatchRequest {
    const MAX_REPEATED: &'static [(u32, usize)] = &[(1, MAX_BATCH_ITEMS)];
}

impl Bounded for proto::VerifyBatchResponse {
    // Packed, a run of answers is one entry: the count bounds the unpacked form, whose entries
    // each decode to one `bool`; the packed form decodes to no more than its bytes.
    const MAX_REPEATED: &'static [(u32, usize)] = &[(1, MAX_BATCH_ITEMS)];
}

impl Bounded for proto::GetPublicKeyRequest {
    const MAX_BYTES: usize = MAX_SMALL_MESSAGE;
}

/// Why a message was refused on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Not a well-formed protobuf message.
    Malformed(&'static str),
    /// A repeated field with too many entries.
    TooMany {
        /// The field number.
        field: u32,
        /// The most allowed.
        max: usize,
    },
}

fn varint(buf: &mut &[u8]) -> Result<u64, WireError> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&byte, rest) = buf
            .split_first()
            .ok_or(WireError::Malformed("truncated varint"))?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(WireError::Malformed("varint longer than 10 bytes"))
}

fn skip(buf: &mut &[u8], n: u64) -> Result<(), WireError> {
    let n = usize::try_from(n).map_err(|_| WireError::Malformed("length out of range"))?;
    if n > buf.len() {
        return Err(WireError::Malformed(
            "a field runs past the end of the message",
        ));
    }
    *buf = &buf[n..];
    Ok(())
}

/// Walks the top-level fields of `bytes` and counts the entries of the fields of `limits`.
///
/// # Errors
/// [`WireError`] for bytes that are not a protobuf message, or a field over its count.
pub fn check_wire(mut bytes: &[u8], limits: &[(u32, usize)]) -> Result<(), WireError> {
    if limits.is_empty() {
        return Ok(());
    }
    let mut counts = vec![0usize; limits.len()];
    let buf = &mut bytes;
    while !buf.is_empty() {
        let key = varint(buf)?;
        let field = u32::try_from(key >> 3).map_err(|_| WireError::Malformed("field number"))?;
        if field == 0 {
            return Err(WireError::Malformed("field number 0"));
        }
        match key & 7 {
            0 => {
                varint(buf)?;
            }
            1 => skip(buf, 8)?,
            2 => {
                let len = varint(buf)?;
                skip(buf, len)?;
            }
            5 => skip(buf, 4)?,
            _ => return Err(WireError::Malformed("unsupported wire type")),
        }
        if let Some(i) = limits.iter().position(|&(f, _)| f == field) {
            counts[i] += 1;
            if counts[i] > limits[i].1 {
                return Err(WireError::TooMany {
                    field,
                    max: limits[i].1,
                });
            }
        }
    }
    Ok(())
}

/// prost's encoding and a bounded decoding, for every message of `cryptodispatch.v1`.
#[derive(Debug)]
pub struct BoundedCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for BoundedCodec<T, U> {
    fn default() -> Self {
        BoundedCodec(PhantomData)
    }
}

impl<T, U> Codec for BoundedCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Bounded + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = MessageEncoder<T>;
    type Decoder = BoundedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        MessageEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        BoundedDecoder(PhantomData)
    }
}

/// prost's encoding.
#[derive(Debug)]
pub struct MessageEncoder<T>(PhantomData<T>);

impl<T: Message> Encoder for MessageEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        item.encode(buf)
            .map_err(|e| Status::internal(format!("encoding a message: {e}")))
    }
}

/// Checks the bounds of `U` on the wire, then decodes.
#[derive(Debug)]
pub struct BoundedDecoder<U>(PhantomData<U>);

impl<U: Message + Default + Bounded> Decoder for BoundedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        let len = buf.remaining();
        if len > U::MAX_BYTES {
            return Err(Status::out_of_range(format!(
                "a message of {len} bytes is larger than this call's limit of {} bytes",
                U::MAX_BYTES
            )));
        }
        // The buffer holds the whole message, contiguous (tonic's framing).
        let bytes = buf.chunk();
        if bytes.len() != len {
            return Err(Status::internal("a message split across buffers"));
        }
        check_wire(bytes, U::MAX_REPEATED).map_err(|e| match e {
            WireError::Malformed(why) => {
                Status::invalid_argument(format!("malformed protobuf message: {why}"))
            }
            WireError::TooMany { field, max } => Status::invalid_argument(format!(
                "repeated field {field} holds more than {max} entries, this daemon's limit"
            )),
        })?;
        let message = U::decode(&mut *buf)
            .map_err(|e| Status::invalid_argument(format!("malformed protobuf message: {e}")))?;
        Ok(Some(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_entries_and_refuses_malformed_bytes() {
        let items = |n: usize| {
            proto::VerifyBatchRequest {
                items: vec![proto::VerifyItem::default(); n],
            }
            .encode_to_vec()
        };
        let limits = proto::VerifyBatchRequest::MAX_REPEATED;
        assert_eq!(check_wire(&items(MAX_BATCH_ITEMS), limits), Ok(()));
        assert_eq!(
            check_wire(&items(MAX_BATCH_ITEMS + 1), limits),
            Err(WireError::TooMany {
                field: 1,
                max: MAX_BATCH_ITEMS
            })
        );
        for bad in [&[0x0a, 0x05, 1][..], &[0x80], &[0x0b], &[0x00, 0x00]] {
            assert!(
                matches!(check_wire(bad, limits), Err(WireError::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}
