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

use cryptodispatch::error::CryptoError;
use cryptodispatch::{JobError, SubmitError};
use tonic::Status;

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
