//! The library's errors as gRPC statuses. A request the daemon cannot serve as asked always
//! ends in one of these; nothing is answered with wrong data.
//!
//! | error | status |
//! |---|---|
//! | malformed input: IV, GCM nonce or tag lengths, lengths, padding (also bad PKCS#7 padding found on decryption), a key of the wrong kind, a message over a node's capacity | `INVALID_ARGUMENT` |
//! | a GCM tag that does not verify (the message "authentication failed"; no plaintext) | `INVALID_ARGUMENT` |
//! | the service is shutting down | `UNAVAILABLE` |
//! | the node running the job failed, or every node of its cluster is down: this daemon cannot serve it now, another may (a client or HAProxy retries elsewhere) | `UNAVAILABLE` |
//! | a worker panicked, chaining state lost, an internal error | `INTERNAL` |
//! | not admitted within `--queue-wait-ms`: its tenant stayed at one of its limits, or the service's queues stayed full ([`exhausted_status`]) | `RESOURCE_EXHAUSTED`, with the trailer `grpc-retry-pushback-ms` |

use std::time::Duration;

use cryptodispatch::error::CryptoError;
use cryptodispatch::{JobError, SubmitError};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

/// The trailer of gRPC's retry pushback: how many milliseconds a client should wait before it
/// tries the call again (gRPC clients with a retry policy that retries `RESOURCE_EXHAUSTED`
/// honour it).
pub const RETRY_PUSHBACK: &str = "grpc-retry-pushback-ms";
/// The shortest pushback given.
const MIN_PUSHBACK: Duration = Duration::from_millis(10);
/// The longest pushback given.
const MAX_PUSHBACK: Duration = Duration::from_secs(60);

/// What held a call's job at admission until the admission wait ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Its tenant stayed at its limit of jobs in flight.
    Jobs {
        /// The tenant's name.
        tenant: String,
        /// The limit.
        max: u64,
    },
    /// Its tenant stayed at its limit of bytes in flight.
    Bytes {
        /// The tenant's name.
        tenant: String,
        /// The limit.
        max: u64,
    },
    /// Its tenant's byte rate: its bucket had not refilled enough.
    Rate {
        /// The tenant's name.
        tenant: String,
        /// The limit, in bytes per second.
        rate: u64,
        /// The bytes of the tenant's calls held at its limits, this one's included.
        waiting: u64,
    },
    /// The service's queues stayed full.
    Queues,
}

/// `RESOURCE_EXHAUSTED` for a job of `bytes` bytes that `held` kept out for `waited` (the
/// admission wait), with the retry pushback as trailing metadata: for a byte rate, the time
/// its bucket takes to refill what waits at the tenant's door (this job's bytes included); else
/// the admission wait, as long again; always within 10 ms and 60 s.
pub fn exhausted_status(held: &Held, waited: Duration, bytes: u64) -> Status {
    let ms = waited.as_millis();
    let (message, pushback) = match held {
        Held::Jobs { tenant, max } => (
            format!(
                "the tenant {tenant:?} stayed at its limit of {max} calls in flight \
                 (max-inflight-jobs) for {ms} ms"
            ),
            waited,
        ),
        Held::Bytes { tenant, max } => (
            format!(
                "the tenant {tenant:?} stayed at its limit of {max} bytes in flight \
                 (max-inflight-bytes) for {ms} ms; this call carries {bytes} bytes"
            ),
            waited,
        ),
        Held::Rate {
            tenant,
            rate,
            waiting,
        } => {
            // A job larger than the bucket enters when the bucket is full: this one's part of
            // what waits counts for at most a bucket (the others' in full, an upper bound).
            let need = (waiting.saturating_sub(bytes) + bytes.min(*rate)) as f64;
            (
                format!(
                    "the tenant {tenant:?} is over its rate of {rate} bytes per second \
                     (max-bytes-per-sec): {waiting} bytes of its calls wait"
                ),
                Duration::from_secs_f64((need / (*rate).max(1) as f64).min(3600.0)),
            )
        }
        Held::Queues => (
            format!("the daemon's queues stayed full for {ms} ms"),
            waited,
        ),
    };
    let pushback = pushback.clamp(MIN_PUSHBACK, MAX_PUSHBACK);
    let pushback_ms = pushback.as_millis().try_into().unwrap_or(u64::MAX);
    let mut metadata = MetadataMap::new();
    metadata.insert(RETRY_PUSHBACK, MetadataValue::from(pushback_ms));
    let advice = match held {
        Held::Queues => "retry later or elsewhere",
        _ => "retry later",
    };
    Status::with_metadata(
        Code::ResourceExhausted,
        format!("{message}; {advice} (after {pushback_ms} ms: {RETRY_PUSHBACK})"),
        metadata,
    )
}

/// The status for a job refused at submission.
pub fn submit_status(e: SubmitError) -> Status {
    match e {
        SubmitError::Crypto(c) => crypto_status(c),
        SubmitError::WrongKeyKind { expected, got, .. } => {
            Status::invalid_argument(format!("the key is {got}, but this call needs {expected}"))
        }
        SubmitError::TooLarge { len, max } => Status::invalid_argument(format!(
            "a message of {len} bytes is larger than a node can hold ({max} bytes)"
        )),
        SubmitError::ShutDown => Status::unavailable("the daemon is shutting down"),
        SubmitError::StreamFinished => Status::invalid_argument("the stream is already finished"),
        other => Status::internal(format!("cannot submit the job: {other}")),
    }
}

/// The status for a job that failed.
pub fn job_status(e: JobError) -> Status {
    match &e {
        JobError::Crypto(c) => crypto_status(c.clone()),
        JobError::NodeFailed(_) | JobError::NoNodeUp(_) => Status::unavailable(format!(
            "the job failed on this daemon ({e}); retry it, here or on another daemon"
        )),
        other => Status::internal(format!("the job failed: {other}")),
    }
}

fn crypto_status(e: CryptoError) -> Status {
    match e {
        CryptoError::BadPadding => Status::invalid_argument(
            "bad decrypt: bad PKCS#7 padding in the final block (wrong key or IV, corrupted \
             data, or data encrypted without padding)",
        ),
        CryptoError::AuthenticationFailed => Status::invalid_argument(
            "authentication failed: the GCM tag does not verify (wrong key, nonce, associated \
             data, ciphertext or tag); no plaintext is returned",
        ),
        other => Status::invalid_argument(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cryptodispatch::ClusterKind;
    use cryptodispatch::packet::NodeId;
    use tonic::Code;

    fn pushback(s: &Status) -> u64 {
        s.metadata()
            .get(RETRY_PUSHBACK)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("a pushback")
    }

    #[test]
    fn exhausted_says_what_held_the_call_and_when_to_retry() {
        let wait = Duration::from_millis(250);
        let t = || "payments".to_string();
        let jobs = exhausted_status(
            &Held::Jobs {
                tenant: t(),
                max: 4,
            },
            wait,
            100,
        );
        assert_eq!(jobs.code(), Code::ResourceExhausted);
        assert!(
            jobs.message()
                .contains("\"payments\" stayed at its limit of 4 calls")
        );
        assert!(jobs.message().contains("max-inflight-jobs"));
        assert_eq!(pushback(&jobs), 250);
        let bytes = exhausted_status(
            &Held::Bytes {
                tenant: t(),
                max: 1 << 20,
            },
            wait,
            100,
        );
        assert!(bytes.message().contains("max-inflight-bytes"), "{bytes:?}");
        let queues = exhausted_status(&Held::Queues, wait, 100);
        assert!(queues.message().contains("queues stayed full for 250 ms"));
        assert_eq!(pushback(&queues), 250);
        // 0 ms of admission wait: still a short pause.
        assert_eq!(
            pushback(&exhausted_status(&Held::Queues, Duration::ZERO, 1)),
            10
        );
        // A rate: the time to refill what waits.
        let rate = |waiting, bytes| {
            let held = Held::Rate {
                tenant: t(),
                rate: 1_000_000,
                waiting,
            };
            exhausted_status(&held, wait, bytes)
        };
        let r = rate(500_000, 100_000);
        assert!(r.message().contains("max-bytes-per-sec"), "{r:?}");
        assert_eq!(pushback(&r), 500);
        // A job larger than the bucket waits for a full bucket, one second here.
        assert_eq!(pushback(&rate(0, 5_000_000)), 1000);
        // The same job counted among what waits: still one bucket, not five.
        assert_eq!(pushback(&rate(5_000_000, 5_000_000)), 1000);
        assert_eq!(pushback(&rate(5_500_000, 5_000_000)), 1500);
        // Messages read as one line.
        for held in [
            Held::Jobs {
                tenant: t(),
                max: 4,
            },
            Held::Bytes {
                tenant: t(),
                max: 1 << 20,
            },
        ] {
            let m = exhausted_status(&held, wait, 100).message().to_owned();
            assert!(!m.contains("  "), "{m:?}");
        }
        assert!(!r.message().contains("  "), "{:?}", r.message());
        // Bounded.
        assert_eq!(pushback(&rate(u64::MAX / 2, 1)), 60_000);
    }

    #[test]
    fn a_failed_node_is_unavailable_not_internal() {
        for e in [
            JobError::NodeFailed(NodeId(3)),
            JobError::NoNodeUp(ClusterKind::Aes),
        ] {
            assert_eq!(job_status(e).code(), Code::Unavailable);
        }
        assert_eq!(
            job_status(JobError::Internal("x".into())).code(),
            Code::Internal
        );
        assert_eq!(
            job_status(JobError::Crypto(CryptoError::BadPadding)).code(),
            Code::InvalidArgument
        );
    }
}
