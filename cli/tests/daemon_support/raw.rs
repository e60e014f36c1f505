//! A gRPC client that sends raw message bytes (not necessarily valid protobuf) to any method,
//! with any `authorization` header, as a hostile client would; and the daemon's memory, read
//! from `/proc/PID/status`.

use std::time::Duration;

use bytes::{Buf, BufMut};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

/// The methods of `cryptodispatch.v1.CryptoDispatch`, unary ones first.
pub const UNARY: [&str; 8] = [
    "Encrypt",
    "Decrypt",
    "GcmEncrypt",
    "GcmDecrypt",
    "Sign",
    "Verify",
    "VerifyBatch",
    "GetPublicKey",
];

/// Message bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }

    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let n = buf.remaining();
        Ok(Some(buf.copy_to_bytes(n).to_vec()))
    }
}

/// A raw client on one HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct Raw {
    channel: Channel,
}

fn path(method: &str) -> PathAndQuery {
    PathAndQuery::try_from(format!("/cryptodispatch.v1.CryptoDispatch/{method}")).unwrap()
}

impl Raw {
    /// Connects to `url` (plaintext).
    pub async fn connect(url: &str) -> Raw {
        let channel = Endpoint::from_shared(url.to_owned())
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .expect("connect");
        Raw { channel }
    }

    fn grpc(&self) -> tonic::client::Grpc<Channel> {
        tonic::client::Grpc::new(self.channel.clone())
            .max_encoding_message_size(usize::MAX)
            .max_decoding_message_size(64 << 20)
    }

    fn request<T>(message: T, authorization: Option<&str>) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(a) = authorization {
            request
                .metadata_mut()
                .insert("authorization", a.parse().unwrap());
        }
        request
    }

    /// A unary call of `method` with `body` as its message.
    pub async fn unary(
        &self,
        method: &str,
        body: Vec<u8>,
        authorization: Option<&str>,
    ) -> Result<Vec<u8>, Status> {
        let mut grpc = self.grpc();
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        grpc.unary(Self::request(body, authorization), path(method), RawCodec)
            .await
            .map(tonic::Response::into_inner)
    }

    /// A `Stream` call sending `messages`, collecting every response until the end.
    pub async fn stream(
        &self,
        messages: Vec<Vec<u8>>,
        authorization: Option<&str>,
    ) -> Result<Vec<Vec<u8>>, Status> {
        let mut grpc = self.grpc();
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let request = Self::request(tokio_stream::iter(messages), authorization);
        let mut responses = grpc
            .streaming(request, path("Stream"), RawCodec)
            .await?
            .into_inner();
        let mut out = Vec::new();
        while let Some(m) = responses.message().await? {
            out.push(m);
        }
        Ok(out)
    }
}

impl Raw {
    /// A call of `method` whose request body is `body` as it is, gRPC framing included (ASCII
    /// bytes only); the status code of the answer, from its headers or trailers.
    pub async fn framed(&self, method: &str, body: &str, authorization: &str) -> Option<i32> {
        use tonic::codegen::{Body as _, Service as _};
        let mut channel = self.channel.clone();
        std::future::poll_fn(|cx| channel.poll_ready(cx))
            .await
            .ok()?;
        let request = tonic::codegen::http::Request::builder()
            .method("POST")
            .uri(format!(
                "http://127.0.0.1/cryptodispatch.v1.CryptoDispatch/{method}"
            ))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("authorization", authorization)
            .body(tonic::body::Body::new(body.to_owned()))
            .unwrap();
        let response = channel.call(request).await.ok()?;
        let code = |headers: &tonic::codegen::http::HeaderMap| {
            headers
                .get("grpc-status")
                .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
        };
        if let Some(c) = code(response.headers()) {
            return Some(c);
        }
        let mut body = response.into_body();
        while let Some(frame) =
            std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
        {
            if let Ok(trailers) = frame.ok()?.into_trailers() {
                return code(&trailers);
            }
        }
        None
    }
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
pub fn proc_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// Resets the process's peak RSS (`VmHWM`) to its current RSS; `false` where the kernel does
/// not allow it.
pub fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// The process's CPU time so far (user + system), from `/proc/PID/stat`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses.
    let rest = &text[text.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Deterministic pseudo-random numbers (xorshift).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| (self.next() >> 24) as u8).collect()
    }
}
