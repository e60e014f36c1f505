//! `cryptodispatchd` under hostile clients, run as a process on loopback:
//!
//! - an unauthenticated call is refused from its headers, before its body is read: four
//!   concurrent 16 MB `VerifyBatch` calls without a token raise the peak RSS by less than
//!   64 MiB; a batch over its item count is refused before it is decoded;
//! - the `authorization` scheme in any case;
//! - key names: at most 128 bytes of the documented characters, refused before lookup, and
//!   never echoed at length;
//! - malformed protobuf is `INVALID_ARGUMENT`; a stream message after `last` fails the call; a
//!   stream length error names the whole input's length;
//! - idle TCP connections and half-open HTTP/2 ones are closed; a stream that sends nothing
//!   ends with `DEADLINE_EXCEEDED` and frees its slot; idle sockets on the metrics port delay a
//!   scrape without shutting it out; running out of descriptors is logged and backed off,
//!   not spun on;
//! - a drain closes connections lingeringly: the socket still reads after its FIN;
//! - start-up refuses plaintext metrics off loopback, symbolic links and FIFOs as key files;
//! - a fuzz-style run: random bytes and random valid-but-extreme messages to every method;
//!   each call gets a status (never `INTERNAL` or `UNKNOWN`), the daemon stays up, and its
//!   RSS stays bounded. `CRYPTODISPATCHD_FUZZ_CALLS` sets the number of calls (default 300),
//!   `CRYPTODISPATCHD_FUZZ_SEED` the seed.
#![cfg(feature = "daemon")]

use crate::daemon_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use daemon_support::raw::{Raw, Rng, UNARY, cpu_ticks, proc_kib, reset_peak};
use daemon_support::remote::proto::{
    self, AesRequest, GetPublicKeyRequest, StreamRequest, StreamStart, VerifyBatchRequest,
    VerifyItem,
};
use daemon_support::*;
use prost::Message;
use tonic::Code;

const LIMIT: Duration = Duration::from_secs(60);

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn args_with(f: &Fixture, extra: &[&str]) -> Vec<String> {
    let mut a = f.args();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// A `VerifyBatch` message of `n` empty items, built on the wire (2 bytes an item).
fn empty_items(n: usize) -> Vec<u8> {
    [0x0a, 0x00].repeat(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_calls_are_refused_before_their_body_is_read() {
    let f = Fixture::new("unauth");
    let d = Daemon::start(&f.args());
    bounded("unauthenticated calls", LIMIT, async {
        let raw = Raw::connect(&d.url()).await;
        // Warm up: one call of each kind, so that the baseline includes what every call needs.
        let small = VerifyBatchRequest { items: vec![] }.encode_to_vec();
        raw.unary("VerifyBatch", small, Some(&bearer(ALL)))
            .await
            .unwrap();
        let base = proc_kib(d.pid(), "VmRSS");
        let peak_reset = reset_peak(d.pid());

        // 8.4 million empty items: 16.8 MB on the wire, under the 16 MiB + 64 KiB limit.
        let body = empty_items(8_400_000);
        let calls = (0..4).map(|i| {
            let (raw, body) = (raw.clone(), body.clone());
            let auth = match i {
                0 => None,
                1 => Some("Bearer not-a-token-not-a-token".to_owned()),
                2 => Some("Basic dXNlcjpwYXNz".to_owned()),
                _ => Some("Bearer".to_owned()),
            };
            tokio::spawn(async move { raw.unary("VerifyBatch", body, auth.as_deref()).await })
        });
        for call in calls.collect::<Vec<_>>() {
            let e = call.await.unwrap().unwrap_err();
            assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        }
        let after = if peak_reset {
            proc_kib(d.pid(), "VmHWM")
        } else {
            proc_kib(d.pid(), "VmRSS")
        };
        let grown_mib = after.saturating_sub(base) / 1024;
        eprintln!(
            "four unauthenticated 16.8 MB calls: RSS {base} KiB before, {} {after} KiB after",
            if peak_reset { "peak" } else { "current" }
        );
        assert!(
            grown_mib < 64,
            "four unauthenticated 16.8 MB calls raised the RSS by {grown_mib} MiB \
             (peak measured: {peak_reset})"
        );

        // With a token, a batch over its item count is refused before it is decoded.
        let e = raw
            .unary("VerifyBatch", empty_items(4097), Some(&bearer(ALL)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("4096"), "{}", e.message());
        // 4096 empty items pass the count and fail on their (empty) key name.
        let e = raw
            .unary("VerifyBatch", empty_items(4096), Some(&bearer(ALL)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("item 0"), "{}", e.message());

        // The scheme in any case; the token exactly.
        let request = GetPublicKeyRequest {
            key: "signer".into(),
        }
        .encode_to_vec();
        for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
            let auth = format!("{scheme} {ALL}");
            let key = raw
                .unary("GetPublicKey", request.clone(), Some(&auth))
                .await
                .unwrap();
            assert_eq!(key.len(), 34, "{scheme}");
        }
        let e = raw
            .unary("GetPublicKey", request, Some(&format!("Bearer {ALL}x")))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_names_are_bounded_and_never_echoed_at_length() {
    let f = Fixture::new("names");
    let d = Daemon::start(&f.args());
    bounded("key names", LIMIT, async {
        let raw = Raw::connect(&d.url()).await;
        let aes = |key: String| {
            AesRequest {
                key,
                mode: proto::Mode::Ecb as i32,
                iv: vec![],
                padding: 0,
                data: vec![0; 16],
            }
            .encode_to_vec()
        };
        let huge = "k".repeat(4 << 20);
        for (name, code) in [
            (huge.clone(), Code::InvalidArgument),
            ("k".repeat(129), Code::InvalidArgument),
            ("../k128".to_owned(), Code::InvalidArgument),
            ("k128\n".to_owned(), Code::InvalidArgument),
            ("k 128".to_owned(), Code::InvalidArgument),
            (String::new(), Code::InvalidArgument),
            // 128 bytes of the right characters: looked up, and not found.
            ("k".repeat(128), Code::NotFound),
        ] {
            for token in [ALL, LIMITED] {
                let e = raw
                    .unary("Encrypt", aes(name.clone()), Some(&bearer(token)))
                    .await
                    .unwrap_err();
                // The limited token may not use an unknown, well-formed name either.
                let expect = if code == Code::NotFound && token == LIMITED {
                    Code::PermissionDenied
                } else {
                    code
                };
                assert_eq!(e.code(), expect, "{:.40} {token}: {e:?}", name);
                assert!(e.message().len() < 200, "{}", e.message().len());
                assert!(!e.message().contains('\n'));
            }
        }
        // The same bound in a batch and a stream.
        let batch = VerifyBatchRequest {
            items: vec![VerifyItem {
                key: huge.clone(),
                message: vec![],
                signature: vec![0; 64],
            }],
        };
        let e = raw
            .unary("VerifyBatch", batch.encode_to_vec(), Some(&bearer(ALL)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().len() < 200);
        let start = StreamRequest {
            start: Some(StreamStart {
                key: huge,
                direction: proto::Direction::Encrypt as i32,
                mode: proto::Mode::Ecb as i32,
                iv: vec![],
                padding: 0,
            }),
            chunk: vec![],
            last: true,
        };
        let e = raw
            .stream(vec![start.encode_to_vec()], Some(&bearer(ALL)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().len() < 200);
    })
    .await;
}

fn stream_start(direction: proto::Direction, mode: proto::Mode, padding: i32) -> StreamStart {
    StreamStart {
        key: "k128".into(),
        direction: direction as i32,
        mode: mode as i32,
        iv: if mode == proto::Mode::Ecb {
            vec![]
        } else {
            vec![0x0f; 16]
        },
        padding,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_and_streams_are_invalid_arguments() {
    let f = Fixture::new("malformed");
    let d = Daemon::start(&f.args());
    bounded("malformed messages", LIMIT, async {
        let raw = Raw::connect(&d.url()).await;
        let all = bearer(ALL);
        for method in UNARY {
            for junk in [
                vec![0xff, 0xff, 0xff],
                vec![0x0a, 0x10, 1, 2],
                vec![0x0a, 0x02, 0xc3, 0x28],
                vec![0x80],
            ] {
                let e = raw
                    .unary(method, junk.clone(), Some(&all))
                    .await
                    .unwrap_err();
                assert_eq!(e.code(), Code::InvalidArgument, "{method} {junk:?}: {e:?}");
                // Without a token, it is never even decoded.
                let e = raw.unary(method, junk, None).await.unwrap_err();
                assert_eq!(e.code(), Code::Unauthenticated, "{method}");
            }
        }
        // Malformed gRPC framing: a compressed flag without an encoding, an unknown flag, a
        // body that ends inside a message. INVALID_ARGUMENT (3), never INTERNAL (13).
        for method in ["Encrypt", "GetPublicKey", "Stream"] {
            for body in [
                "\u{1}\0\0\0\u{3}abc",
                "\u{2}\0\0\0\u{3}abc",
                "\0\0\0\0\u{9}abc",
                "\0\0",
                "",
            ] {
                let code = raw.framed(method, body, &all).await;
                assert_eq!(
                    code,
                    Some(Code::InvalidArgument as i32),
                    "{method} {body:?}"
                );
            }
        }
        // A call that carries no payload has a small limit of its own.
        let big = GetPublicKeyRequest {
            key: "k".repeat(5000),
        };
        let e = raw
            .unary("GetPublicKey", big.encode_to_vec(), Some(&all))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
        let e = raw
            .stream(vec![vec![0xff, 0xff]], Some(&all))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

        // A message after the one marked `last` fails the call.
        let first = StreamRequest {
            start: Some(stream_start(
                proto::Direction::Encrypt,
                proto::Mode::Cbc,
                proto::Padding::Pkcs7 as i32,
            )),
            chunk: vec![7; 100],
            last: true,
        };
        let after = StreamRequest {
            start: None,
            chunk: vec![8; 16],
            last: false,
        };
        let e = raw
            .stream(
                vec![first.encode_to_vec(), after.encode_to_vec()],
                Some(&all),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("last"), "{}", e.message());
        // Without anything after it, the same stream succeeds: 112 bytes of output.
        let out = raw
            .stream(vec![first.encode_to_vec()], Some(&all))
            .await
            .unwrap();
        let total: usize = out
            .iter()
            .map(|m| proto::StreamResponse::decode(&m[..]).unwrap().chunk.len())
            .sum();
        assert_eq!(total, 112);

        // A client that sends `last` and keeps its side open gets its status at once, not
        // after the stream's idle bound (60 s by default).
        let c = d.client(Some(ALL)).await;
        let (tx, rx) = tokio::sync::mpsc::channel::<StreamRequest>(1);
        tx.send(first.clone()).await.unwrap();
        let started = Instant::now();
        let mut responses = c
            .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap();
        let mut total = 0;
        while let Some(r) = responses.message().await.unwrap() {
            total += r.chunk.len();
        }
        assert_eq!(total, 112);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        drop(tx);

        // A length error names the whole input: 40 bytes in chunks of 16 and 24.
        let start = StreamRequest {
            start: Some(stream_start(
                proto::Direction::Decrypt,
                proto::Mode::Cbc,
                proto::Padding::None as i32,
            )),
            chunk: vec![1; 16],
            last: false,
        };
        let rest = StreamRequest {
            start: None,
            chunk: vec![2; 24],
            last: false,
        };
        let e = raw
            .stream(
                vec![start.encode_to_vec(), rest.encode_to_vec()],
                Some(&all),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(
            e.message().contains("40"),
            "the message names the stream's 40 bytes: {}",
            e.message()
        );
    })
    .await;
}

/// Whether the daemon closed `s` (end of stream or an error) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    let deadline = Instant::now() + within;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
        if Instant::now() > deadline {
            return false;
        }
    }
}

/// The HTTP/2 client preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_streams_are_closed() {
    let f = Fixture::new("idle");
    let d = Daemon::start(&args_with(
        &f,
        &[
            "--handshake-timeout-s",
            "1",
            "--idle-timeout-s",
            "2",
            "--stream-idle-ms",
            "500",
            "--max-streams",
            "1",
        ],
    ));
    // 50 TCP connections that send nothing, and 5 that set up HTTP/2 and start no call.
    let mut silent: Vec<TcpStream> = (0..50)
        .map(|_| TcpStream::connect(d.grpc).unwrap())
        .collect();
    let mut half_open: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = TcpStream::connect(d.grpc).unwrap();
            s.write_all(H2_PREFACE).unwrap();
            s
        })
        .collect();
    let start = Instant::now();
    for s in silent.iter_mut().chain(half_open.iter_mut()) {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "an idle connection is still open after {:?}",
            start.elapsed()
        );
    }
    assert!(start.elapsed() < Duration::from_secs(5));

    bounded("idle streams", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        // Calls still work.
        assert_eq!(c.public_key("signer").await.unwrap().len(), 32);
        // A stream that sends nothing at all, then one that sends its start and nothing more:
        // each ends with DEADLINE_EXCEEDED, and the only stream slot is free again after.
        for messages in [0, 1] {
            let (tx, rx) = tokio::sync::mpsc::channel::<StreamRequest>(1);
            if messages == 1 {
                tx.send(StreamRequest {
                    start: Some(stream_start(proto::Direction::Encrypt, proto::Mode::Ctr, 0)),
                    chunk: vec![1; 10],
                    last: false,
                })
                .await
                .unwrap();
            }
            let started = Instant::now();
            let result = async {
                let mut responses = c
                    .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await?;
                while responses.message().await?.is_some() {}
                Ok::<_, tonic::Status>(())
            }
            .await;
            let e = result.unwrap_err();
            assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
            assert!(started.elapsed() < Duration::from_secs(5));
            drop(tx);
        }
        // A stream's slot is free by the time its status arrives, whether it ended in an error
        // or not: streams opened back to back on the one slot are never refused.
        for round in 0..40 {
            let one = StreamRequest {
                start: Some(stream_start(proto::Direction::Encrypt, proto::Mode::Ctr, 0)),
                chunk: vec![1; 10],
                last: false,
            };
            let mut responses = c.stream(tokio_stream::iter(vec![one])).await.unwrap();
            let mut n = 0;
            while let Some(r) = responses.message().await.unwrap() {
                n += r.chunk.len();
            }
            assert_eq!(n, 10, "round {round}");
            // A stream that fails (a second `start`) frees its slot as quickly.
            let twice = vec![
                StreamRequest {
                    start: Some(stream_start(proto::Direction::Encrypt, proto::Mode::Ctr, 0)),
                    chunk: vec![1; 16],
                    last: false,
                };
                2
            ];
            let failed = async {
                let mut responses = c.stream(tokio_stream::iter(twice)).await?;
                while responses.message().await?.is_some() {}
                Ok::<_, tonic::Status>(())
            }
            .await
            .unwrap_err();
            assert_eq!(
                failed.code(),
                Code::InvalidArgument,
                "round {round}: {failed:?}"
            );
        }

        // A call in progress keeps its connection open past the idle timeout: a stream fed a
        // chunk every 300 ms for 3 s (idle timeout 2 s, stream gap 500 ms) completes.
        let (tx, rx) = tokio::sync::mpsc::channel::<StreamRequest>(1);
        let feed = tokio::spawn(async move {
            for i in 0..10 {
                let start =
                    (i == 0).then(|| stream_start(proto::Direction::Encrypt, proto::Mode::Ctr, 0));
                let chunk = StreamRequest {
                    start,
                    chunk: vec![3; 100],
                    last: false,
                };
                tx.send(chunk).await.unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        let mut responses = c
            .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap();
        let mut n = 0;
        while let Some(r) = responses.message().await.unwrap() {
            n += r.chunk.len();
        }
        assert_eq!(n, 1000);
        feed.await.unwrap();
    })
    .await;
}

#[test]
fn idle_sockets_delay_a_metrics_scrape_without_shutting_it_out() {
    let f = Fixture::new("metrics-idle");
    let d = Daemon::start(&args_with(
        &f,
        &[
            "--metrics",
            "127.0.0.1:0",
            "--metrics-timeout-ms",
            "500",
            "--metrics-max-connections",
            "16",
        ],
    ));
    let addr = d.metrics.unwrap();
    let idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(s, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text:?}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    drop(idle);
}

#[test]
fn running_out_of_descriptors_is_logged_and_backed_off() {
    let f = Fixture::new("emfile");
    // A descriptor limit of 64: the daemon runs out after a few dozen connections.
    let mut args = vec![
        "-c".to_owned(),
        "ulimit -n 64 && exec \"$0\" \"$@\"".to_owned(),
    ];
    args.push(BIN.to_owned());
    args.extend(args_with(&f, &["--handshake-timeout-s", "30"]));
    let d = Daemon::start_with("sh", &args);
    let conns: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect_timeout(&d.grpc, Duration::from_secs(1)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(d.pid());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(d.pid()) - before;
    eprintln!(
        "out of descriptors: {} connections made, {used} ticks of CPU in 2 s",
        conns.len()
    );
    // Spinning on accept would use both seconds (200 ticks at 100 Hz).
    assert!(
        used < 50,
        "{used} ticks of CPU in 2 s while out of descriptors"
    );
    let stderr = d.stderr();
    assert!(stderr.contains("accept failed"), "{stderr}");
    assert!(stderr.contains("ulimit -n"), "{stderr}");
    // Logged at most about once a second, not once per attempt.
    assert!(stderr.matches("accept failed").count() <= 6, "{stderr}");
    drop(conns);
    // With the descriptors back, calls work again.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(bounded("a call after EMFILE", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        assert_eq!(c.public_key("signer").await.unwrap().len(), 32);
    }));
}

#[test]
fn a_drain_closes_connections_lingeringly() {
    let f = Fixture::new("linger");
    let mut d = Daemon::start(&args_with(
        &f,
        &[
            "--drain-grace-ms",
            "100",
            "--handshake-timeout-s",
            "30",
            "--linger-ms",
            "3000",
        ],
    ));
    let mut s = TcpStream::connect(d.grpc).unwrap();
    s.write_all(H2_PREFACE).unwrap();
    // Acknowledge the daemon's settings.
    s.write_all(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    d.terminate();
    // Read until the daemon's FIN, answering its pings (a graceful HTTP/2 shutdown waits for
    // one); its GOAWAY comes first.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut pending = Vec::new();
    let mut goaway = false;
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e) => panic!("reading until the daemon's FIN: {e}"),
        }
        while pending.len() >= 9 {
            let len = usize::from(pending[0]) << 16
                | usize::from(pending[1]) << 8
                | usize::from(pending[2]);
            if pending.len() < 9 + len {
                break;
            }
            let frame: Vec<u8> = pending.drain(..9 + len).collect();
            match (frame[3], frame[4] & 1) {
                (7, _) => goaway = true,
                (6, 0) => {
                    let mut ack = frame.clone();
                    ack[4] = 1;
                    s.write_all(&ack).unwrap();
                }
                _ => {}
            }
        }
    }
    assert!(goaway, "no GOAWAY before the FIN");
    // The daemon stopped writing but still reads: what the client sends now is taken, not
    // answered with a reset (after which a second write would fail).
    let ping = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08";
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(150));
        s.write_all(ping)
            .expect("the daemon reset the connection instead of lingering");
    }
    drop(s);
    let status = d
        .wait_exit(Duration::from_secs(15))
        .expect("the daemon exits");
    assert!(status.success(), "{status}");
}

#[test]
fn start_up_refuses_public_plaintext_and_unsafe_key_files() {
    let f = Fixture::new("startup");
    let refused = |args: Vec<String>, expect: &[&str]| {
        let started = Instant::now();
        let r = match Daemon::try_start(&args) {
            Ok(_) => panic!("started with {args:?}"),
            Err(r) => r,
        };
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stderr);
        assert!(started.elapsed() < Duration::from_secs(30));
        for e in expect {
            assert!(r.stderr.contains(e), "{args:?}: {:?} lacks {e:?}", r.stderr);
        }
    };
    for addr in ["0.0.0.0:0", "[::]:0", "10.1.2.3:9100"] {
        refused(args_with(&f, &["--metrics", addr]), &["--metrics-public"]);
    }

    // The agent check on a TLS daemon listening off loopback: refused before anything is bound
    // (the TLS files are not parsed before this check).
    let cert = f.dir.write("cert.pem", b"not parsed", 0o644);
    let tls_key = f.dir.write("tls.key", b"not parsed", 0o600);
    let mut a: Vec<String> = f
        .args()
        .into_iter()
        .filter(|a| a != "--insecure-loopback")
        .map(|a| {
            if a == "127.0.0.1:0" {
                "0.0.0.0:0".into()
            } else {
                a
            }
        })
        .collect();
    a.extend(["--tls-cert".into(), cert.display().to_string()]);
    a.extend(["--tls-key".into(), tls_key.display().to_string()]);
    a.extend(["--agent-port".into(), "0".into()]);
    refused(a, &["--agent-public"]);

    // A key file that is a symbolic link, to a file outside the folder or inside it.
    let outside = f.dir.write("outside.aes", &K128, 0o600);
    let link = f.path("keys/linked.aes");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    refused(f.args(), &["linked.aes", "symbolic link"]);
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(f.path("keys/k128.aes"), &link).unwrap();
    refused(f.args(), &["linked.aes", "symbolic link"]);
    std::fs::remove_file(&link).unwrap();

    // A FIFO named like a key file: refused at once, not read (which would hang).
    let fifo = f.path("keys/x.aes");
    let made = std::process::Command::new("mkfifo")
        .arg("-m")
        .arg("600")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    refused(f.args(), &["x.aes", "not a regular file"]);
    std::fs::remove_file(&fifo).unwrap();

    // A key name over 128 bytes.
    let long = f
        .dir
        .write(&format!("keys/{}.aes", "n".repeat(129)), &K128, 0o600);
    refused(f.args(), &["not a key file"]);
    std::fs::remove_file(&long).unwrap();

    let d = Daemon::start(&args_with(&f, &["--metrics", "127.0.0.1:0"]));
    assert!(d.metrics.is_some());
}

impl Fixture {
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path(name)
    }
}

/// A random message for `method`: junk bytes, or a valid message with extreme fields.
fn random_message(rng: &mut Rng, method: &str) -> Vec<u8> {
    if rng.below(3) == 0 {
        let len = rng.below(300) as usize;
        return rng.bytes(len);
    }
    let key = match rng.below(6) {
        0 => String::new(),
        1 => "k".repeat(rng.below(5000) as usize),
        2 => "k128".into(),
        3 => "signer".into(),
        4 => "../../etc/passwd".into(),
        _ => "k256".into(),
    };
    let data = |rng: &mut Rng| {
        let len = match rng.below(4) {
            0 => 0,
            1 => rng.below(64) as usize,
            2 => 15 + 16 * rng.below(8) as usize,
            _ => rng.below(200_000) as usize,
        };
        rng.bytes(len)
    };
    let wild = |rng: &mut Rng| match rng.below(3) {
        0 => rng.next() as i32,
        _ => rng.below(7) as i32,
    };
    match method {
        "Encrypt" | "Decrypt" => AesRequest {
            key,
            mode: wild(rng),
            iv: data(rng),
            padding: wild(rng),
            data: data(rng),
        }
        .encode_to_vec(),
        "GcmEncrypt" => proto::GcmEncryptRequest {
            key,
            nonce: data(rng),
            aad: data(rng),
            plaintext: data(rng),
        }
        .encode_to_vec(),
        "GcmDecrypt" => proto::GcmDecryptRequest {
            key,
            nonce: data(rng),
            aad: data(rng),
            ciphertext: data(rng),
            tag: data(rng),
        }
        .encode_to_vec(),
        "Sign" => proto::SignRequest {
            key,
            message: data(rng),
        }
        .encode_to_vec(),
        "Verify" => proto::VerifyRequest {
            key,
            message: data(rng),
            signature: data(rng),
        }
        .encode_to_vec(),
        "VerifyBatch" => {
            let n = match rng.below(3) {
                0 => rng.below(5) as usize,
                1 => rng.below(5000) as usize,
                _ => 4096,
            };
            let item = VerifyItem {
                key,
                message: vec![1; rng.below(100) as usize],
                signature: vec![2; 64],
            };
            VerifyBatchRequest {
                items: vec![item; n],
            }
            .encode_to_vec()
        }
        "GetPublicKey" => GetPublicKeyRequest { key }.encode_to_vec(),
        _ => StreamRequest {
            start: (rng.below(4) != 0).then(|| StreamStart {
                key,
                direction: wild(rng),
                mode: wild(rng),
                iv: data(rng),
                padding: wild(rng),
            }),
            chunk: data(rng),
            last: rng.below(2) == 0,
        }
        .encode_to_vec(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_calls_get_statuses_and_memory_stays_bounded() {
    let calls: usize = std::env::var("CRYPTODISPATCHD_FUZZ_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let f = Fixture::new("fuzz");
    let d = Daemon::start(&args_with(&f, &["--stream-idle-ms", "2000"]));
    bounded("random calls", Duration::from_secs(300), async {
        let raw = Raw::connect(&d.url()).await;
        raw.unary(
            "GetPublicKey",
            GetPublicKeyRequest {
                key: "signer".into(),
            }
            .encode_to_vec(),
            Some(&bearer(ALL)),
        )
        .await
        .unwrap();
        let base = proc_kib(d.pid(), "VmRSS");
        let seed = std::env::var("CRYPTODISPATCHD_FUZZ_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0x5eed);
        let mut rng = Rng::new(seed);
        let mut codes = std::collections::BTreeMap::new();
        for i in 0..calls {
            let method = if i % 9 == 8 {
                "Stream"
            } else {
                UNARY[rng.below(UNARY.len() as u64) as usize]
            };
            let auth = match rng.below(8) {
                0 => None,
                1 => Some("Bearer wrong-token-wrong-token".to_owned()),
                2 => Some(format!("bearer {LIMITED}")),
                _ => Some(bearer(ALL)),
            };
            if i % 10 == 5 {
                // Raw bytes as the whole request body, gRPC framing included.
                let len = rng.below(40) as usize;
                let body: String = rng
                    .bytes(len)
                    .iter()
                    .map(|b| char::from(b & 0x7f))
                    .collect();
                let code = raw
                    .framed(method, &body, auth.as_deref().unwrap_or(""))
                    .await
                    .unwrap_or_else(|| panic!("call {i} ({method}): no status"));
                assert!(
                    ![Code::Internal as i32, Code::Unknown as i32].contains(&code),
                    "call {i} ({method}, framed {body:?}): code {code}"
                );
                *codes.entry(format!("framed {code}")).or_insert(0) += 1;
                continue;
            }
            let result = if method == "Stream" {
                let n = 1 + rng.below(4) as usize;
                let messages = (0..n).map(|_| random_message(&mut rng, "Stream")).collect();
                raw.stream(messages, auth.as_deref()).await.map(|_| ())
            } else {
                let message = random_message(&mut rng, method);
                raw.unary(method, message, auth.as_deref())
                    .await
                    .map(|_| ())
            };
            let code = match result {
                Ok(()) => Code::Ok,
                Err(e) => {
                    assert!(
                        !matches!(e.code(), Code::Internal | Code::Unknown),
                        "call {i} ({method}): {e:?}"
                    );
                    assert!(e.message().len() < 1024, "call {i}: a long message");
                    e.code()
                }
            };
            *codes.entry(format!("{code:?}")).or_insert(0) += 1;
        }
        // The daemon is up and serving.
        let c = d.client(Some(ALL)).await;
        assert_eq!(c.public_key("signer").await.unwrap().len(), 32);
        let rss = proc_kib(d.pid(), "VmRSS");
        let grown = rss.saturating_sub(base) / 1024;
        assert!(
            grown < 256,
            "the RSS grew by {grown} MiB over {calls} calls"
        );
        // The run exercised more than refusals.
        assert!(codes.len() >= 4, "{codes:?}");
        eprintln!("{calls} random calls (seed {seed}): {codes:?}, RSS +{grown} MiB");
    })
    .await;
}

#[test]
fn a_stalled_tls_handshake_is_closed() {
    use rcgen::{CertificateParams, KeyPair};
    let f = Fixture::new("tls-stall");
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let cert_path = f.dir.write("server.pem", cert.pem().as_bytes(), 0o644);
    let key_path = f
        .dir
        .write("server.key", key.serialize_pem().as_bytes(), 0o600);
    let mut args: Vec<String> = f
        .args()
        .into_iter()
        .filter(|a| a != "--insecure-loopback")
        .collect();
    args.extend([
        "--tls-cert".into(),
        cert_path.display().to_string(),
        "--tls-key".into(),
        key_path.display().to_string(),
        "--handshake-timeout-s".into(),
        "1".into(),
    ]);
    let d = Daemon::start(&args);
    assert!(d.tls);
    // A connection that sends nothing, and one that sends half a ClientHello record header.
    let mut silent = TcpStream::connect(d.grpc).unwrap();
    let mut partial = TcpStream::connect(d.grpc).unwrap();
    partial.write_all(&[0x16, 0x03, 0x01, 0x02]).unwrap();
    let start = Instant::now();
    assert!(closed_within(&mut silent, Duration::from_secs(5)));
    assert!(closed_within(&mut partial, Duration::from_secs(5)));
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_takes_no_response_frees_its_stream_slot() {
    let f = Fixture::new("unread");
    let d = Daemon::start(&args_with(
        &f,
        &["--stream-idle-ms", "500", "--max-streams", "1"],
    ));
    bounded("an unread stream", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        let start = |chunk: Vec<u8>| StreamRequest {
            start: Some(stream_start(proto::Direction::Encrypt, proto::Mode::Ctr, 0)),
            chunk,
            last: false,
        };
        // 8 MiB in, and no response taken: flow control stops the daemon's writes.
        let mut messages = vec![start(vec![0; 64 << 10])];
        messages.extend((0..127).map(|_| StreamRequest {
            start: None,
            chunk: vec![0; 64 << 10],
            last: false,
        }));
        let unread = c.stream(tokio_stream::iter(messages)).await.unwrap();
        // Within a few idle bounds, the slot is free again for another stream.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let result = async {
                let mut r = c
                    .stream(tokio_stream::iter(vec![start(vec![1; 10])]))
                    .await?;
                let mut n = 0;
                while let Some(m) = r.message().await? {
                    n += m.chunk.len();
                }
                Ok::<_, tonic::Status>(n)
            }
            .await;
            match result {
                Ok(n) => {
                    assert_eq!(n, 10);
                    break;
                }
                Err(e) if e.code() == Code::ResourceExhausted => {
                    assert!(Instant::now() < deadline, "the slot was never freed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        drop(unread);
    })
    .await;
}
