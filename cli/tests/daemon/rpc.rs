//! `cryptodispatchd`, run as a process on loopback and called over gRPC.
//!
//! - Every RPC against the library's own results: AES in the four modes with the three key
//!   sizes, padded and not, on lengths around block and packet boundaries; Ed25519 signatures,
//!   verification (true and false), batch verification, public keys.
//! - The Stream call, fed in chunks of many sizes, equals the one-shot result.
//! - AES-GCM: sealing equals the library's, opening gives the plaintext back; a tampered tag,
//!   ciphertext or aad fails with INVALID_ARGUMENT and no plaintext; bad nonce and tag lengths,
//!   keys the token may not use, keys of the wrong kind and oversized requests are refused.
//! - Typed statuses: a missing or wrong token, an unknown key, a key the token may not use, a
//!   key of the wrong kind, bad IVs, modes and padding, bad padding found on decryption, an
//!   oversized request (our limit and tonic's), a stream opened wrongly.
//! - TLS with certificates made in the test (rcgen), and client certificates.
//! - The agent check, the metrics endpoint, the health service, and the SIGTERM drain.
//! - `--aes-implementation` pins the nodes' implementation, shown in the metrics.
//! - Packets run out of place unless `--in-place`, counted in the metrics either way.
//! - Refusals at start: no TLS without `--insecure-loopback`, plaintext off loopback, key or
//!   token files readable by others, bad key files, no tokens.
#![cfg(feature = "daemon")]

use crate::daemon_support;

use std::time::{Duration, Instant};

use cryptodispatch::crypto::{AesKey, AesOp, Direction, Padding};
use cryptodispatch::packet::Mode;
use daemon_support::remote::client::{Client, ClientConfig};
use daemon_support::remote::proto::{
    self, AesRequest, GcmDecryptRequest, GcmEncryptRequest, StreamRequest, StreamStart,
    VerifyBatchRequest, VerifyItem,
};
use daemon_support::*;
use tonic::Code;

const LIMIT: Duration = Duration::from_secs(120);

fn wire_mode(mode: Mode) -> i32 {
    let mode = match mode {
        Mode::Ecb => proto::Mode::Ecb,
        Mode::Cbc => proto::Mode::Cbc,
        Mode::Ofb => proto::Mode::Ofb,
        Mode::Cfb => proto::Mode::Cfb,
        Mode::Ctr => proto::Mode::Ctr,
        _ => proto::Mode::Unspecified,
    };
    mode as i32
}

fn aes_request(key: &str, mode: Mode, padding: Padding, data: Vec<u8>) -> AesRequest {
    AesRequest {
        key: key.into(),
        mode: wire_mode(mode),
        iv: if mode.takes_iv() {
            IV.to_vec()
        } else {
            Vec::new()
        },
        padding: match padding {
            Padding::Pkcs7 => proto::Padding::Pkcs7 as i32,
            _ => proto::Padding::None as i32,
        },
        data,
    }
}

const IV: [u8; 16] = [0x0f; 16];
const KEYS: [(&str, &[u8]); 3] = [("k128", &K128), ("k192", &K192), ("k256", &K256)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_equals_the_library() {
    let f = Fixture::new("rpcs");
    let mut args = f.args();
    args.extend(["--packet-size".into(), "1024".into()]);
    let d = Daemon::start(&args);
    bounded("the RPCs", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        let mut cases = 0;
        for (i, (name, key)) in KEYS.iter().enumerate() {
            for mode in Mode::UNAUTHENTICATED {
                let paddings: &[Padding] = if mode.needs_whole_blocks() {
                    &[Padding::None, Padding::Pkcs7]
                } else {
                    &[Padding::None]
                };
                for &padding in paddings {
                    for len in [0, 1, 15, 16, 17, 1023, 1024, 1025, 5000] {
                        if padding == Padding::None && mode.needs_whole_blocks() && len % 16 != 0 {
                            continue;
                        }
                        let plain = bytes(len, (i * 100 + len) as u64);
                        let enc = AesOp::new(Direction::Encrypt, mode).with_padding(padding);
                        let dec = AesOp::new(Direction::Decrypt, mode).with_padding(padding);
                        let expect = aes_reference(key, enc, &IV, &plain);
                        let got = c
                            .encrypt(aes_request(name, mode, padding, plain.clone()))
                            .await
                            .unwrap();
                        assert_eq!(got, expect, "{name} {mode} {padding:?} {len}");
                        let back = c
                            .decrypt(aes_request(name, mode, padding, got))
                            .await
                            .unwrap();
                        assert_eq!(back, aes_reference(key, dec, &IV, &expect));
                        assert_eq!(back, plain);
                        cases += 1;
                    }
                }
            }
        }
        // Per key: ECB and CBC with 3 block-aligned lengths unpadded and 9 padded; OFB, CFB and
        // CTR 9.
        assert_eq!(cases, 3 * (2 * (3 + 9) + 3 * 9));

        for len in [0, 1, 64, 100_000] {
            let msg = bytes(len, 7);
            let sig = c.sign("signer", msg.clone()).await.unwrap();
            assert_eq!(sig, sign_reference(&SEED, &msg));
            assert!(c.verify("signer", msg.clone(), sig.clone()).await.unwrap());
            let mut bad = sig.clone();
            bad[0] ^= 1;
            assert!(!c.verify("signer", msg.clone(), bad).await.unwrap());
            assert!(!c.verify("other", msg, sig).await.unwrap());
        }
        assert_eq!(
            c.public_key("signer").await.unwrap(),
            public_reference(&SEED)
        );
        assert_eq!(
            c.public_key("other").await.unwrap(),
            public_reference(&OTHER_SEED)
        );

        let mut items = Vec::new();
        let mut expect = Vec::new();
        for i in 0..150 {
            let msg = bytes(i, i as u64);
            let (key, seed) = if i % 2 == 0 {
                ("signer", SEED)
            } else {
                ("other", OTHER_SEED)
            };
            let mut signature = sign_reference(&seed, &msg).to_vec();
            let valid = i % 7 != 3;
            if !valid {
                signature[5] ^= 0x40;
            }
            items.push(VerifyItem {
                key: key.into(),
                message: msg,
                signature,
            });
            expect.push(valid);
        }
        let got = c.verify_batch(VerifyBatchRequest { items }).await.unwrap();
        assert_eq!(got, expect);
        let empty = c
            .verify_batch(VerifyBatchRequest { items: vec![] })
            .await
            .unwrap();
        assert!(empty.is_empty());
    })
    .await;
}

const NONCE: [u8; 12] = [0xca; 12];

fn gcm_seal_request(key: &str, aad: &[u8], plaintext: &[u8]) -> GcmEncryptRequest {
    GcmEncryptRequest {
        key: key.into(),
        nonce: NONCE.to_vec(),
        aad: aad.to_vec(),
        plaintext: plaintext.to_vec(),
    }
}

fn gcm_open_request(key: &str, aad: &[u8], ciphertext: &[u8], tag: &[u8]) -> GcmDecryptRequest {
    GcmDecryptRequest {
        key: key.into(),
        nonce: NONCE.to_vec(),
        aad: aad.to_vec(),
        ciphertext: ciphertext.to_vec(),
        tag: tag.to_vec(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcm_equals_the_library_and_fails_closed() {
    let f = Fixture::new("gcm");
    let mut args = f.args();
    args.extend(["--packet-size", "1024", "--max-request-bytes", "100000"].map(String::from));
    let d = Daemon::start(&args);
    bounded("GCM", LIMIT, async {
        let all = d.client(Some(ALL)).await;
        let mut cases = 0;
        for (i, (name, key)) in KEYS.iter().enumerate() {
            let reference = AesKey::new(key).unwrap();
            for aad_len in [0, 13, 2000] {
                let aad = bytes(aad_len, 99);
                for len in [0, 1, 15, 16, 17, 1023, 1024, 1025, 5000] {
                    let plain = bytes(len, (i * 1000 + len) as u64);
                    let (expect_ct, expect_tag) = reference.gcm_seal(&NONCE, &aad, &plain).unwrap();
                    let (ct, tag) = all
                        .gcm_encrypt(gcm_seal_request(name, &aad, &plain))
                        .await
                        .unwrap();
                    assert_eq!(ct, expect_ct, "{name} aad {aad_len} len {len}");
                    assert_eq!(tag, expect_tag.to_vec(), "{name} aad {aad_len} len {len}");
                    let back = all
                        .gcm_decrypt(gcm_open_request(name, &aad, &ct, &tag))
                        .await
                        .unwrap();
                    assert_eq!(back, plain);
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 3 * 3 * 9);

        // Tampering: the tag, the ciphertext, the aad, the nonce, another key. Every one is
        // INVALID_ARGUMENT "authentication failed", with no plaintext.
        let aad = b"header".to_vec();
        let plain = bytes(3000, 5);
        let (ct, tag) = all
            .gcm_encrypt(gcm_seal_request("k128", &aad, &plain))
            .await
            .unwrap();
        let mut bad_tag = tag.clone();
        bad_tag[15] ^= 1;
        let mut bad_ct = ct.clone();
        bad_ct[2500] ^= 0x80;
        let mut bad_nonce = gcm_open_request("k128", &aad, &ct, &tag);
        bad_nonce.nonce[0] ^= 1;
        let tampered = [
            gcm_open_request("k128", &aad, &ct, &bad_tag),
            gcm_open_request("k128", &aad, &bad_ct, &tag),
            gcm_open_request("k128", b"heades", &ct, &tag),
            gcm_open_request("k256", &aad, &ct, &tag),
            bad_nonce,
        ];
        for (i, r) in tampered.into_iter().enumerate() {
            let e = all.gcm_decrypt(r).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "case {i}: {e:?}");
            assert!(
                e.message().contains("authentication failed"),
                "case {i}: {e:?}"
            );
        }

        // Lengths: the nonce is 12 bytes, the tag 16.
        for n in [0, 11, 13, 16] {
            let mut r = gcm_seal_request("k128", &aad, &plain);
            r.nonce = vec![1; n];
            let e = all.gcm_encrypt(r).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "nonce {n}: {e:?}");
            let mut r = gcm_open_request("k128", &aad, &ct, &tag);
            r.nonce = vec![1; n];
            let e = all.gcm_decrypt(r).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "nonce {n}: {e:?}");
            assert!(!e.message().contains("authentication failed"), "{e:?}");
        }
        for n in [0, 12, 15, 17] {
            let e = all
                .gcm_decrypt(gcm_open_request("k128", &aad, &ct, &tag[..].repeat(2)[..n]))
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "tag {n}: {e:?}");
            assert!(!e.message().contains("authentication failed"), "{e:?}");
        }

        // Tokens and keys, as Encrypt and Decrypt.
        let limited = d.client(Some(LIMITED)).await;
        let anonymous = d.client(None).await;
        assert!(
            limited
                .gcm_encrypt(gcm_seal_request("k128", &aad, &plain))
                .await
                .is_ok()
        );
        let e = limited
            .gcm_encrypt(gcm_seal_request("k256", &aad, &plain))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        let e = limited
            .gcm_decrypt(gcm_open_request("k256", &aad, &ct, &tag))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        let e = anonymous
            .gcm_encrypt(gcm_seal_request("k128", &aad, &plain))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated);
        let e = all
            .gcm_encrypt(gcm_seal_request("missing", &aad, &plain))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        let e = all
            .gcm_encrypt(gcm_seal_request("signer", &aad, &plain))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);

        // The size limit counts the aad and the text.
        let at_limit = gcm_seal_request("k128", &[1; 40_000], &[2; 60_000]);
        assert_eq!(all.gcm_encrypt(at_limit).await.unwrap().0.len(), 60_000);
        let over = gcm_seal_request("k128", &[1; 40_001], &[2; 60_000]);
        let e = all.gcm_encrypt(over).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("--max-request-bytes"), "{e:?}");
        let over = gcm_open_request("k128", &[1; 40_001], &[2; 60_000], &tag);
        let e = all.gcm_decrypt(over).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("--max-request-bytes"), "{e:?}");
    })
    .await;
}

/// Sends a stream cut into `chunks` and collects the output.
async fn run_stream(
    c: &Client,
    start: StreamStart,
    data: &[u8],
    chunks: &[usize],
) -> Result<Vec<u8>, tonic::Status> {
    let mut messages = Vec::new();
    let mut rest = data;
    let mut sizes = chunks.iter().cycle();
    let mut first = Some(start);
    while !rest.is_empty() || first.is_some() {
        let n = (*sizes.next().unwrap()).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        messages.push(StreamRequest {
            start: first.take(),
            chunk: chunk.to_vec(),
            last: false,
        });
    }
    let mut responses = c.stream(tokio_stream::iter(messages)).await?;
    let mut out = Vec::new();
    let mut ended = false;
    while let Some(r) = responses.message().await? {
        assert!(!ended, "nothing may follow the last response");
        out.extend_from_slice(&r.chunk);
        ended = r.last;
    }
    assert!(ended, "the final response is marked last");
    Ok(out)
}

fn start(key: &str, direction: Direction, mode: Mode, padding: Padding) -> StreamStart {
    StreamStart {
        key: key.into(),
        direction: match direction {
            Direction::Encrypt => proto::Direction::Encrypt as i32,
            Direction::Decrypt => proto::Direction::Decrypt as i32,
        },
        mode: wire_mode(mode),
        iv: if mode.takes_iv() {
            IV.to_vec()
        } else {
            Vec::new()
        },
        padding: match padding {
            Padding::Pkcs7 => proto::Padding::Pkcs7 as i32,
            _ => proto::Padding::None as i32,
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_chained_job_equals_the_one_shot_result() {
    let f = Fixture::new("stream");
    let mut args = f.args();
    args.extend(["--packet-size".into(), "256".into()]);
    let d = Daemon::start(&args);
    bounded("the streams", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        let cuts: [&[usize]; 5] = [&[1], &[16], &[7, 100, 3], &[256], &[4096, 1, 999]];
        let mut cases = 0;
        for mode in Mode::UNAUTHENTICATED {
            for padding in [Padding::None, Padding::Pkcs7] {
                if padding == Padding::Pkcs7 && !mode.needs_whole_blocks() {
                    continue;
                }
                for (j, cut) in cuts.iter().enumerate() {
                    for len in [0usize, 16, 33, 1000, 10_000] {
                        if padding == Padding::None && mode.needs_whole_blocks() && len % 16 != 0 {
                            continue;
                        }
                        let plain = bytes(len, (j * 31 + len) as u64);
                        let enc = AesOp::new(Direction::Encrypt, mode).with_padding(padding);
                        let expect = aes_reference(&K256, enc, &IV, &plain);
                        let s = start("k256", Direction::Encrypt, mode, padding);
                        let got = run_stream(&c, s, &plain, cut).await.unwrap();
                        assert_eq!(got, expect, "{mode} {padding:?} {len} {cut:?}");
                        let s = start("k256", Direction::Decrypt, mode, padding);
                        let back = run_stream(&c, s, &expect, cut).await.unwrap();
                        assert_eq!(back, plain, "{mode} {padding:?} {len} {cut:?}");
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 80, "{cases}");

        // Streams fail with typed statuses.
        let s = start("k256", Direction::Encrypt, Mode::Cbc, Padding::None);
        let e = run_stream(&c, s, &[0; 17], &[5]).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        let s = start("k256", Direction::Decrypt, Mode::Cbc, Padding::Pkcs7);
        let e = run_stream(&c, s, &[0; 32], &[32]).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("bad decrypt"), "{e:?}");
        let mut bad_iv = start("k256", Direction::Encrypt, Mode::Ofb, Padding::None);
        bad_iv.iv.pop();
        let e = run_stream(&c, bad_iv, &[0; 32], &[32]).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_stream(
            &c,
            start("signer", Direction::Encrypt, Mode::Ofb, Padding::None),
            &[1],
            &[1],
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let e = run_stream(
            &c,
            start("nope", Direction::Encrypt, Mode::Ofb, Padding::None),
            &[1],
            &[1],
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        // A first message without `start`, and `start` twice.
        let no_start = vec![StreamRequest {
            start: None,
            chunk: vec![0; 16],
            last: true,
        }];
        let e = c.stream(tokio_stream::iter(no_start)).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let twice = vec![
            StreamRequest {
                start: Some(start("k128", Direction::Encrypt, Mode::Ofb, Padding::None)),
                chunk: vec![],
                last: false,
            },
            StreamRequest {
                start: Some(start("k128", Direction::Encrypt, Mode::Ofb, Padding::None)),
                chunk: vec![1],
                last: true,
            },
        ];
        let mut r = c.stream(tokio_stream::iter(twice)).await.unwrap();
        let mut code = None;
        loop {
            match r.message().await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    code = Some(e.code());
                    break;
                }
            }
        }
        assert_eq!(code, Some(Code::InvalidArgument));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed_statuses() {
    let f = Fixture::new("errors");
    let mut args = f.args();
    args.extend(["--max-request-bytes".into(), "100000".into()]);
    let d = Daemon::start(&args);
    bounded("the errors", LIMIT, async {
        let all = d.client(Some(ALL)).await;
        let limited = d.client(Some(LIMITED)).await;
        let anonymous = d.client(None).await;
        let wrong = d.client(Some("wrong-token-0123456789")).await;
        let ok = || aes_request("k128", Mode::Cbc, Padding::Pkcs7, b"hello".to_vec());

        let code = |r: Result<Vec<u8>, tonic::Status>| r.unwrap_err().code();
        assert_eq!(code(anonymous.encrypt(ok()).await), Code::Unauthenticated);
        assert_eq!(code(wrong.encrypt(ok()).await), Code::Unauthenticated);
        assert_eq!(
            anonymous.public_key("signer").await.unwrap_err().code(),
            Code::Unauthenticated
        );
        assert!(limited.encrypt(ok()).await.is_ok());
        let mut r = ok();
        r.key = "k256".into();
        assert_eq!(
            code(limited.encrypt(r.clone()).await),
            Code::PermissionDenied
        );
        assert!(all.encrypt(r).await.is_ok());
        // An unknown key: NOT_FOUND for a token of every key, PERMISSION_DENIED for one that
        // could not use it anyway (it learns nothing about which keys exist).
        let mut r = ok();
        r.key = "missing".into();
        assert_eq!(code(all.encrypt(r.clone()).await), Code::NotFound);
        assert_eq!(code(limited.encrypt(r).await), Code::PermissionDenied);
        assert_eq!(
            limited.sign("other", vec![1]).await.unwrap_err().code(),
            Code::PermissionDenied
        );

        // Wrong kinds, IVs, modes, padding, lengths.
        assert_eq!(
            all.sign("k128", vec![1]).await.unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            all.public_key("k128").await.unwrap_err().code(),
            Code::InvalidArgument
        );
        let mut r = ok();
        r.key = "signer".into();
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);
        let mut r = ok();
        r.iv = vec![0; 15];
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);
        let mut r = aes_request("k128", Mode::Ecb, Padding::Pkcs7, b"x".to_vec());
        r.iv = vec![0; 16];
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);
        let mut r = ok();
        r.mode = 0;
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);
        let mut r = ok();
        r.mode = 99;
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);
        let r = aes_request("k128", Mode::Ofb, Padding::Pkcs7, b"x".to_vec());
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);
        let r = aes_request("k128", Mode::Cbc, Padding::None, vec![0; 17]);
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);
        let r = aes_request("k128", Mode::Cbc, Padding::Pkcs7, vec![0; 32]);
        let e = all.decrypt(r).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("bad decrypt"), "{e:?}");
        let e = all
            .verify("signer", vec![1], vec![0; 63])
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let mut r = ok();
        r.key = String::new();
        assert_eq!(code(all.encrypt(r).await), Code::InvalidArgument);

        // Size limits: ours (INVALID_ARGUMENT), then tonic's, 64 KiB above (OUT_OF_RANGE).
        let at_limit = aes_request("k128", Mode::Ofb, Padding::None, vec![0; 100_000]);
        assert_eq!(all.encrypt(at_limit).await.unwrap().len(), 100_000);
        let over = aes_request("k128", Mode::Ofb, Padding::None, vec![0; 100_001]);
        let e = all.encrypt(over).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("--max-request-bytes"), "{e:?}");
        let e = all.sign("signer", vec![0; 100_001]).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let far_over = aes_request("k128", Mode::Ofb, Padding::None, vec![0; 300_000]);
        assert_eq!(code(all.encrypt(far_over).await), Code::OutOfRange);
        let batch = VerifyBatchRequest {
            items: (0..3)
                .map(|_| VerifyItem {
                    key: "signer".into(),
                    message: vec![0; 40_000],
                    signature: vec![0; 64],
                })
                .collect(),
        };
        assert_eq!(
            all.verify_batch(batch).await.unwrap_err().code(),
            Code::InvalidArgument
        );
        // The daemon still serves.
        assert!(all.encrypt(ok()).await.is_ok());
    })
    .await;
    assert!(!d.stderr().contains(ALL), "a token was logged");
}

/// A server that accepts connections and never says a word: the client's set-up (TLS), each
/// attempt of a call and a stream's opening end at the client's timeout, with a status that
/// is not retried, rather than waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_says_nothing_times_the_client_out() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Holds every connection open, reading nothing and writing nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    let limit = Duration::from_millis(400);
    bounded("a silent server", LIMIT, async {
        let plain = ClientConfig {
            url: format!("http://{addr}"),
            timeout: Some(limit),
            ..ClientConfig::default()
        };
        let started = Instant::now();
        // Plaintext HTTP/2 may connect with no answer (its calls then get none), or time out
        // in its set-up: either way, at the limit.
        match Client::connect(&plain).await {
            Err(e) => assert!(e.0.contains("no answer within 400 ms"), "{e}"),
            Ok(c) => {
                let status = c
                    .encrypt(aes_request("k128", Mode::Ecb, Padding::None, vec![0; 16]))
                    .await
                    .expect_err("no answer");
                assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
                assert!(status.message().contains("no answer"), "{status:?}");
                assert_eq!(c.retries(), 0, "a timeout is not retried");
                let requests = tokio_stream::iter(Vec::<StreamRequest>::new());
                let status = c.stream(requests).await.expect_err("no answer");
                assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
            }
        }
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let tls = ClientConfig {
            url: format!("https://{addr}"),
            ca_pem: Some(ca.pem().into_bytes()),
            domain: Some("localhost".into()),
            timeout: Some(limit),
            ..ClientConfig::default()
        };
        // The TLS handshake gets no answer.
        let error = Client::connect(&tls).await.expect_err("no handshake");
        assert!(error.0.contains("no answer within 400 ms"), "{error}");
        // Each wait ended at the limit, not at some later one.
        assert!(started.elapsed() < 10 * limit, "{:?}", started.elapsed());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_certificates_made_in_the_test() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

    let f = Fixture::new("tls");
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issue = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = issue(vec!["localhost".into(), "127.0.0.1".into()]);
    let (client_cert, client_key) = issue(vec!["client".into()]);
    let cert_path = f.dir.write("server.pem", server_cert.as_bytes(), 0o644);
    let key_path = f.dir.write("server.key", server_key.as_bytes(), 0o600);
    let ca_path = f.dir.write("ca.pem", ca.pem().as_bytes(), 0o644);

    let tls_args = |extra: &[&str]| {
        let mut a: Vec<String> = f
            .args()
            .into_iter()
            .filter(|a| a != "--insecure-loopback")
            .collect();
        a.extend(["--tls-cert".into(), cert_path.display().to_string()]);
        a.extend(["--tls-key".into(), key_path.display().to_string()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    bounded("TLS", LIMIT, async {
        let d = Daemon::start(&tls_args(&[]));
        assert!(d.tls);
        let mut config = d.config(Some(ALL));
        config.ca_pem = Some(ca.pem().into_bytes());
        let c = Client::connect(&config).await.unwrap();
        let plain = bytes(1000, 3);
        let got = c
            .encrypt(aes_request("k192", Mode::Cfb, Padding::None, plain.clone()))
            .await
            .unwrap();
        let op = AesOp::new(Direction::Encrypt, Mode::Cfb);
        assert_eq!(got, aes_reference(&K192, op, &IV, &plain));
        // Without the CA, the certificate is not trusted; plaintext gets no answer either.
        let mut untrusted = d.config(Some(ALL));
        untrusted.ca_pem = Some(issue(vec!["x".into()]).0.into_bytes());
        let failed = match Client::connect(&untrusted).await {
            Err(_) => true,
            Ok(c) => c
                .encrypt(aes_request("k128", Mode::Ofb, Padding::None, vec![1]))
                .await
                .is_err(),
        };
        assert!(failed, "a certificate from another CA must not be trusted");
        let mut plaintext = d.config(Some(ALL));
        plaintext.url = format!("http://{}", d.grpc);
        let failed = match Client::connect(&plaintext).await {
            Err(_) => true,
            Ok(c) => c
                .encrypt(aes_request("k128", Mode::Ofb, Padding::None, vec![1]))
                .await
                .is_err(),
        };
        assert!(failed, "plaintext to a TLS daemon must fail");
        drop(d);

        // Client certificates: required with --client-ca.
        let d = Daemon::start(&tls_args(&["--client-ca", &ca_path.display().to_string()]));
        let mut with_cert = d.config(Some(ALL));
        with_cert.ca_pem = Some(ca.pem().into_bytes());
        with_cert.identity_pem = Some((
            client_cert.into_bytes(),
            zeroize::Zeroizing::new(client_key.into_bytes()),
        ));
        let c = Client::connect(&with_cert).await.unwrap();
        assert!(
            c.encrypt(aes_request("k128", Mode::Ofb, Padding::None, vec![1]))
                .await
                .is_ok()
        );
        let mut without = d.config(Some(ALL));
        without.ca_pem = Some(ca.pem().into_bytes());
        let failed = match Client::connect(&without).await {
            Err(_) => true,
            Ok(c) => c
                .encrypt(aes_request("k128", Mode::Ofb, Padding::None, vec![1]))
                .await
                .is_err(),
        };
        assert!(failed, "a client without a certificate must be refused");
    })
    .await;
}

/// The weight in an agent line `N% ready up`.
fn weight(line: &str) -> u32 {
    assert!(line.ends_with("% ready up\n"), "{line:?}");
    line.split('%').next().unwrap().parse().unwrap()
}

#[test]
fn the_agent_check_reports_speed_and_drain() {
    let f = Fixture::new("agent");
    let with = |extra: &[&str]| {
        let mut a = f.args();
        a.extend(["--agent-port", "0", "--drain-grace-ms", "3000"].map(String::from));
        a.extend(extra.iter().map(|s| s.to_string()));
        Daemon::start(&a)
    };
    // At start the unit times are the calibrated ones, slowdown included: an idle daemon at
    // full speed says 100%, one slowed 4 times 25%.
    let mut fast = with(&[]);
    assert_eq!(weight(&agent_line(fast.agent.unwrap())), 100);
    let slow = with(&["--slowdown", "4"]);
    assert_eq!(weight(&agent_line(slow.agent.unwrap())), 25);
    // Against a fleet speed far above its own, a daemon says little (at least 1%).
    let tiny = with(&["--agent-full-speed", "10000000"]);
    assert_eq!(weight(&agent_line(tiny.agent.unwrap())), 1);

    fast.terminate();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let line = agent_line(fast.agent.unwrap());
        if line == "drain\n" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {line:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = fast
        .wait_exit(Duration::from_secs(30))
        .expect("exits after the drain");
    assert!(status.success(), "{status}: {}", fast.stderr());
}

/// The value of the sample `name{labels}` in a metrics text, if present.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_health() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let f = Fixture::new("metrics");
    let mut args = f.args();
    args.extend(["--metrics", "127.0.0.1:0"].map(String::from));
    let d = Daemon::start(&args);
    let m = d.metrics.unwrap();
    bounded("metrics", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        for _ in 0..3 {
            c.encrypt(aes_request(
                "k128",
                Mode::Ecb,
                Padding::Pkcs7,
                vec![7; 40_000],
            ))
            .await
            .unwrap();
        }
        let _ = c
            .encrypt(aes_request("none", Mode::Ecb, Padding::Pkcs7, vec![7; 4]))
            .await;
        let _ = c.sign("signer", b"m".to_vec()).await.unwrap();

        let mut health = HealthClient::new(c.channel());
        for service in ["", "cryptodispatch.v1.CryptoDispatch"] {
            let r = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(r.status, ServingStatus::Serving as i32, "{service:?}");
        }
    })
    .await;

    // A node reports its finished packets to the engine on its next trip for work, just after
    // it delivers their results: its queue-depth gauge can lag the last reply by that trip.
    // Scrape until it has caught up (bounded), then check everything on that scrape.
    let depth = "cryptodispatch_node_queue_depth{node=\"0\",cluster=\"aes\"}";
    let deadline = Instant::now() + Duration::from_secs(10);
    let (status, text) = loop {
        let (status, text) = http_get(m, "/metrics");
        if sample(&text, depth) == Some(0.0) || Instant::now() > deadline {
            break (status, text);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.contains("200"), "{status}");
    let ok = sample(
        &text,
        "cryptodispatchd_rpc_requests_total{rpc=\"Encrypt\",code=\"OK\"}",
    );
    assert_eq!(ok, Some(3.0), "{text}");
    let missing = sample(
        &text,
        "cryptodispatchd_rpc_requests_total{rpc=\"Encrypt\",code=\"NOT_FOUND\"}",
    );
    assert_eq!(missing, Some(1.0));
    assert_eq!(
        sample(
            &text,
            "cryptodispatchd_rpc_requests_total{rpc=\"Sign\",code=\"OK\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "cryptodispatchd_rpc_duration_seconds_count{rpc=\"Encrypt\"}"
        ),
        Some(4.0)
    );
    // Three jobs of 40,000 bytes padded to 40,016, in packets of 16 KiB: 3 packets each.
    assert_eq!(
        sample(
            &text,
            "cryptodispatch_node_packets_total{node=\"0\",cluster=\"aes\"}"
        ),
        Some(9.0)
    );
    assert_eq!(
        sample(
            &text,
            "cryptodispatch_node_bytes_total{node=\"0\",cluster=\"aes\"}"
        ),
        Some(120_048.0)
    );
    assert!(
        sample(
            &text,
            "cryptodispatch_node_busy_seconds_total{node=\"0\",cluster=\"aes\"}"
        )
        .unwrap()
            > 0.0
    );
    assert_eq!(
        sample(
            &text,
            "cryptodispatch_node_queue_depth{node=\"0\",cluster=\"aes\"}"
        ),
        Some(0.0)
    );
    assert!(
        sample(
            &text,
            "cryptodispatch_node_unit_time_seconds{node=\"0\",cluster=\"aes\",cmd=\"encrypt\"}"
        )
        .unwrap()
            > 0.0
    );
    assert_eq!(
        sample(
            &text,
            "cryptodispatch_cluster_receive_queue{cluster=\"aes\"}"
        ),
        Some(0.0)
    );
    // The implementation of each AES operation run so far, with its measured figure.
    let implementations: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("cryptodispatch_aes_implementation_ns_per_byte{"))
        .collect();
    assert!(!implementations.is_empty(), "{text}");
    for line in &implementations {
        assert!(line.contains("implementation=\""), "{line}");
        assert!(line.contains("alone=\""), "{line}");
        let ns: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(ns > 0.0, "{line}");
    }
    assert!(
        implementations
            .iter()
            .any(|l| l.contains("op=\"ecb-encrypt\"")),
        "{text}"
    );
    // Node state: both nodes (one per cluster) up, never failed.
    for (name, expect) in [
        ("cryptodispatch_node_up{", 1.0),
        ("cryptodispatch_node_failures_total{", 0.0),
        ("cryptodispatch_node_stalls_total{", 0.0),
        ("cryptodispatch_node_restarts_total{", 0.0),
    ] {
        let values: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with(name))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(values, [expect, expect], "{name}: {text}");
    }
    // Nine AES packets and one Ed25519 packet.
    assert_eq!(
        sample(&text, "cryptodispatch_packets_admitted_total"),
        Some(10.0)
    );
    assert_eq!(
        sample(&text, "cryptodispatch_packets_completed_total"),
        Some(10.0)
    );
    assert_eq!(
        sample(&text, "cryptodispatch_packets_failed_total"),
        Some(0.0)
    );
    assert_eq!(sample(&text, "cryptodispatch_keys"), Some(5.0));
    assert_eq!(sample(&text, "cryptodispatchd_draining"), Some(0.0));
    assert!(sample(&text, "cryptodispatchd_agent_weight_percent").unwrap() >= 1.0);
    assert!(text.ends_with("# EOF\n"));

    assert_eq!(
        http_get(m, "/health"),
        ("HTTP/1.1 200 OK".into(), "SERVING\n".into())
    );
    assert!(http_get(m, "/nothing").0.contains("404"));
}

/// Packets run out of place by default, from their input into a node's own buffer, their
/// input kept for a retry; with `--in-place` each is copied first and run in place. The bytes
/// are the library's either way, and the metrics count which way each packet went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packets_run_out_of_place_unless_in_place_and_the_metrics_say_which() {
    let f = Fixture::new("in-place");
    for in_place in [false, true] {
        // Two AES nodes (the fixture has one): a node alone in its cluster keeps nothing for
        // a retry. RustCrypto runs ECB, CTR and CBC decryption out of place.
        let mut args = f.args();
        let nodes = args.iter().position(|a| a == "--nodes").unwrap() + 1;
        args[nodes] = "2".into();
        args.extend(
            [
                "--metrics",
                "127.0.0.1:0",
                "--aes-implementation",
                "rustcrypto",
            ]
            .map(String::from),
        );
        if in_place {
            args.push("--in-place".into());
        }
        let d = Daemon::start(&args);
        let m = d.metrics.unwrap();
        bounded("in-place", LIMIT, async {
            let c = d.client(Some(ALL)).await;
            // Several packets each (16 KiB packets), and one of a single packet.
            for (mode, direction, len) in [
                (Mode::Ctr, Direction::Encrypt, 100_000),
                (Mode::Ecb, Direction::Encrypt, 50_000),
                (Mode::Cbc, Direction::Decrypt, 40_000),
                (Mode::Ctr, Direction::Encrypt, 4_000),
            ] {
                let data = bytes(len, len as u64);
                let request = aes_request("k128", mode, Padding::None, data.clone());
                let got = match direction {
                    Direction::Encrypt => c.encrypt(request).await,
                    Direction::Decrypt => c.decrypt(request).await,
                }
                .unwrap();
                let op = AesOp::new(direction, mode);
                assert_eq!(
                    got,
                    aes_reference(&K128, op, &IV, &data),
                    "{mode:?} {len}, in place {in_place}"
                );
            }
        })
        .await;
        let (_, text) = http_get(m, "/metrics");
        let total = |name: &str| -> f64 {
            (0..2)
                .map(|n| {
                    let series = format!("{name}{{node=\"{n}\",cluster=\"aes\"}}");
                    sample(&text, &series).unwrap_or_else(|| panic!("no {series}: {text}"))
                })
                .sum()
        };
        let shared = total("cryptodispatch_node_out_of_place_total");
        let copied = total("cryptodispatch_node_retry_copies_total");
        // 14 packets on the nodes at least (the last job may run on the calling thread), the
        // CBC decryption's 3 alone or as one chain run: all out of place unless in place.
        if in_place {
            assert_eq!(shared, 0.0, "{text}");
            assert!(copied >= 14.0, "{copied} copies: {text}");
        } else {
            assert!(shared >= 14.0, "{shared} out of place: {text}");
            assert_eq!(copied, 0.0, "{text}");
        }
    }
}

/// `--aes-implementation` pins the nodes' implementation: the metrics name it for the
/// operations it runs (RustCrypto for the others), the bytes stay the library's, and a name the
/// library does not know, or an implementation not built in, stops the daemon at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_aes_implementation_shows_in_the_metrics() {
    let f = Fixture::new("pinned");
    let mut args = f.args();
    args.extend(
        [
            "--metrics",
            "127.0.0.1:0",
            "--aes-implementation",
            "lanes-8",
        ]
        .map(String::from),
    );
    let d = Daemon::start(&args);
    let m = d.metrics.unwrap();
    bounded("pinned", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        let data = bytes(40_000, 3);
        let got = c
            .encrypt(aes_request("k128", Mode::Cbc, Padding::Pkcs7, data.clone()))
            .await
            .unwrap();
        let op = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
        assert_eq!(got, aes_reference(&K128, op, &IV, &data));
        let _ = c
            .encrypt(aes_request("k128", Mode::Ecb, Padding::None, vec![1; 64]))
            .await
            .unwrap();
    })
    .await;
    let (_, text) = http_get(m, "/metrics");
    let line = |op: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("cryptodispatch_aes_implementation_ns_per_byte{")
                    && l.contains(&format!("op=\"{op}\""))
            })
            .unwrap_or_else(|| panic!("no {op} line: {text}"))
            .to_owned()
    };
    assert!(
        line("cbc-encrypt").contains("implementation=\"lanes-8\""),
        "{text}"
    );
    // A lane set of one is RustCrypto's single-stream loop when the lanes are pinned.
    assert!(
        line("cbc-encrypt").contains("alone=\"rustcrypto\""),
        "{text}"
    );
    assert!(
        line("ecb-encrypt").contains("implementation=\"rustcrypto\""),
        "{text}"
    );
    // The lanes cannot chain GCM: a GCM job cut into packets would run on RustCrypto.
    assert!(
        line("gcm-encrypt-chained").contains("implementation=\"rustcrypto\""),
        "{text}"
    );
    for (name, expect) in [
        ("fastest", "unknown AES implementation"),
        ("lanes-99", "lane"),
    ] {
        let mut bad = f.args();
        bad.extend(["--aes-implementation", name].map(String::from));
        let refused = Daemon::try_start(&bad).expect_err("a bad implementation is refused");
        assert!(
            refused.stderr.contains(expect),
            "{name}: {}",
            refused.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_finishing_calls_in_flight() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let f = Fixture::new("drain");
    let mut args = f.args();
    args.extend(
        [
            "--metrics",
            "127.0.0.1:0",
            "--agent-port",
            "0",
            "--slowdown",
            "50",
            "--drain-grace-ms",
            "1500",
        ]
        .map(String::from),
    );
    let mut d = Daemon::start(&args);
    let m = d.metrics.unwrap();
    // A job that takes about 1.5 s on the slowed node: sized from its calibrated unit time.
    let (_, text) = http_get(m, "/metrics");
    let unit = sample(
        &text,
        "cryptodispatch_node_unit_time_seconds{node=\"0\",cluster=\"aes\",cmd=\"encrypt\"}",
    )
    .unwrap();
    let packets = ((1.5 / unit).ceil() as usize).clamp(4, 1000);
    let plain = bytes(packets * 16 * 1024, 5);
    let expect = aes_reference(
        &K128,
        AesOp::new(Direction::Encrypt, Mode::Cbc),
        &IV,
        &plain,
    );

    bounded("the drain", LIMIT, async {
        let c = d.client(Some(ALL)).await;
        let no_retry = Client::connect(&ClientConfig {
            retry: daemon_support::remote::client::Retry {
                attempts: 1,
                ..Default::default()
            },
            ..d.config(Some(ALL))
        })
        .await
        .unwrap();
        let long = {
            let c = c.clone();
            let r = aes_request("k128", Mode::Cbc, Padding::None, plain.clone());
            tokio::spawn(async move { c.encrypt(r).await })
        };
        // Wait until the job runs, then drain.
        loop {
            let (_, text) = http_get(m, "/metrics");
            if sample(
                &text,
                "cryptodispatch_node_packets_total{node=\"0\",cluster=\"aes\"}",
            ) > Some(0.0)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        d.terminate();
        loop {
            if http_get(m, "/health").0.contains("503") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(agent_line(d.agent.unwrap()), "drain\n");
        let e = no_retry
            .encrypt(aes_request("k128", Mode::Ofb, Padding::None, vec![1]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e:?}");
        let r = HealthClient::new(c.channel())
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status, ServingStatus::NotServing as i32);
        let (_, text) = http_get(m, "/metrics");
        assert_eq!(sample(&text, "cryptodispatchd_draining"), Some(1.0));
        // The call in flight finishes with the right data.
        let got = long.await.unwrap().unwrap();
        assert!(got == expect, "the call in flight returned wrong data");
    })
    .await;
    let status = d
        .wait_exit(Duration::from_secs(30))
        .expect("the daemon exits after draining");
    assert!(status.success(), "{status}: {}", d.stderr());
    assert!(d.stderr().contains("drained"), "{}", d.stderr());
}

#[test]
fn refuses_to_start_unsafely() {
    let f = Fixture::new("refusals");
    let refused = |args: Vec<String>, expect: &[&str]| {
        let r = match Daemon::try_start(&args) {
            Ok(_) => panic!("started with {args:?}"),
            Err(r) => r,
        };
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stderr);
        for e in expect {
            assert!(r.stderr.contains(e), "{args:?}: {:?} lacks {e:?}", r.stderr);
        }
    };
    let plain: Vec<String> = f
        .args()
        .into_iter()
        .filter(|a| a != "--insecure-loopback")
        .collect();
    refused(
        plain,
        &["refusing to serve without TLS", "--insecure-loopback"],
    );
    for addr in ["0.0.0.0:0", "[::]:0", "10.1.2.3:0"] {
        let mut a = f.args();
        let i = a.iter().position(|x| x == "127.0.0.1:0").unwrap();
        a[i] = addr.into();
        refused(a, &["loopback"]);
    }
    let no_tokens: Vec<String> = {
        let a = f.args();
        let i = a.iter().position(|x| x == "--tokens").unwrap();
        a[..i].iter().chain(&a[i + 2..]).cloned().collect()
    };
    refused(no_tokens, &["--tokens"]);

    // Secret files readable by group or others, named with their mode.
    let open_key = f.dir.write("keys/open.aes", &K128, 0o644);
    refused(
        f.args(),
        &[&open_key.display().to_string(), "0644", "chmod 600"],
    );
    std::fs::remove_file(&open_key).unwrap();
    let group_key = f.dir.write("keys/group.ed25519", &SEED, 0o640);
    refused(f.args(), &["group.ed25519", "0640"]);
    std::fs::remove_file(&group_key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&f.tokens, std::fs::Permissions::from_mode(0o604)).unwrap();
    refused(f.args(), &[&f.tokens.display().to_string(), "0604"]);
    std::fs::set_permissions(&f.tokens, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A TLS private key readable by others.
    let cert = f.dir.write("cert.pem", b"not read further", 0o644);
    let open_tls_key = f.dir.write("open-tls.key", b"secret", 0o644);
    let mut a: Vec<String> = f
        .args()
        .into_iter()
        .filter(|a| a != "--insecure-loopback")
        .collect();
    a.extend(["--tls-cert".into(), cert.display().to_string()]);
    a.extend(["--tls-key".into(), open_tls_key.display().to_string()]);
    refused(a, &["open-tls.key", "0644"]);
    // TLS files with no PEM block of their kind: named at start, not at the first handshake.
    let tls_key = f
        .dir
        .write("tls.key", b"-----BEGIN PRIVATE KEY-----\n", 0o600);
    let tls_cert = f
        .dir
        .write("tls.pem", b"-----BEGIN CERTIFICATE-----\n", 0o644);
    for (cert, key, expect) in [
        (&cert, &tls_key, "--tls-cert"),
        (&tls_cert, &cert, "--tls-key"),
    ] {
        let mut a: Vec<String> = f
            .args()
            .into_iter()
            .filter(|a| a != "--insecure-loopback")
            .collect();
        std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).unwrap();
        a.extend(["--tls-cert".into(), cert.display().to_string()]);
        a.extend(["--tls-key".into(), key.display().to_string()]);
        refused(a, &[expect, "no PEM"]);
    }

    // Bad key files and tokens.
    let short = f.dir.write("keys/short.aes", &[1; 15], 0o600);
    refused(f.args(), &["short.aes", "16, 24 or 32"]);
    std::fs::remove_file(&short).unwrap();
    let odd = f.dir.write("keys/notes.txt", b"hello", 0o600);
    refused(f.args(), &["notes.txt", "not a key file"]);
    std::fs::remove_file(&odd).unwrap();
    let bad_tokens = f.dir.write(
        "bad-tokens",
        format!("{ALL} k128,nokey\n").as_bytes(),
        0o600,
    );
    let mut a = f.args();
    let i = a.iter().position(|x| x == "--tokens").unwrap();
    a[i + 1] = bad_tokens.display().to_string();
    refused(a, &["line 1", "no key is named \"nokey\""]);

    // Counts past what the daemon could ever hold: refused, named with their range (a count
    // past tokio's semaphore left the daemon up, ready, and refusing every connection).
    for (flag, range) in [
        ("--max-connections", "between 1 and 1048576"),
        ("--metrics-max-connections", "between 1 and 4096"),
    ] {
        for value in ["0", "2305843009213693952", "18446744073709551615"] {
            let mut a = f.args();
            a.extend(["--metrics", "127.0.0.1:0", flag, value].map(String::from));
            refused(a, &[flag, range]);
        }
    }
    // A slowdown the service would refuse is a usage error too, with its range.
    for value in ["0.5", "1001", "1e9", "inf", "NaN"] {
        let mut a = f.args();
        a.extend(["--slowdown", value].map(String::from));
        refused(a, &["--slowdown", "from 1 to 1000"]);
    }

    // With the files fixed, it starts.
    let d = Daemon::start(&f.args());
    drop(d);
}

/// A drain whose timeout is past what a clock counts waits as a long one does, and one of no
/// time at all, with nothing in flight, is a drain that finished: both exit 0. (The sum of
/// the grace and the timeout overflowed, a panic after the daemon said it was ready; a
/// timeout of 0 always reported calls left in flight.)
#[test]
fn drains_at_the_ends_of_the_timeout_exit_cleanly() {
    let f = Fixture::new("drain-ends");
    for timeout in ["0", "18446744073709551615"] {
        let mut a = f.args();
        // The default grace, 1 s: its sum with the longest timeout overflowed.
        a.extend(["--drain-timeout-s", timeout].map(String::from));
        let mut d = Daemon::start(&a);
        d.terminate();
        let status = d
            .wait_exit(Duration::from_secs(30))
            .expect("the daemon exits after its drain");
        assert_eq!(status.code(), Some(0), "{timeout}: {}", d.stderr());
        assert!(d.stderr().contains("drained"), "{timeout}: {}", d.stderr());
        assert!(
            !d.stderr().contains("panicked"),
            "{timeout}: {}",
            d.stderr()
        );
    }
}
