//! The gate in front of the CryptoDispatch service: every call is refused while the daemon
//! drains and authenticated from its headers, before tonic reads or decodes its body. A call
//! refused here costs at most what the HTTP/2 transport has buffered of its body (its flow
//! control windows), whatever the size of the message it announces; its body is never read.
//!
//! A request whose gRPC framing is malformed (a compressed flag without a `grpc-encoding`, a
//! flag other than 0 or 1, a body that ends inside a message, a unary call without a message)
//! is answered `INVALID_ARGUMENT`
//! rather than tonic's `INTERNAL`: the fault is the client's input, as with a malformed message
//! (`remote::codec`).
//!
//! A call let through carries its [`Caller`](crate::tokens::Caller) (its token's grant and
//! tenant) and a [`CallGuard`] (the connection is busy) as request extensions; the handlers
//! take them from there.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::NamedService;

use crate::conn::{Busy, ConnInfo};
use crate::daemon::Daemon;
use crate::metrics::Rpc;

/// The connection is busy while the call's request lives (headers, body, decoding); the
/// handler keeps it for as long as the call runs. Held for its drop, never read.
#[derive(Debug, Clone)]
pub struct CallGuard(#[allow(dead_code)] pub Arc<Busy>);

/// Wraps the service `S` (a generated gRPC server) with the gate.
#[derive(Debug, Clone)]
pub struct Gate<S> {
    inner: S,
    daemon: Arc<Daemon>,
}

impl<S> Gate<S> {
    /// The gate around `inner`.
    pub fn new(inner: S, daemon: Arc<Daemon>) -> Self {
        Gate { inner, daemon }
    }
}

impl<S: NamedService> NamedService for Gate<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for Gate<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let header = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .map(http::HeaderValue::as_bytes);
        match self.daemon.admit_call(header) {
            Ok(caller) => {
                let guard = ConnInfo::of(request.extensions()).map(ConnInfo::busy);
                let extensions = request.extensions_mut();
                extensions.insert(caller);
                if let Some(guard) = guard {
                    extensions.insert(CallGuard(Arc::new(guard)));
                }
                let call = self.inner.call(request);
                Box::pin(async move {
                    let mut response = call.await?;
                    framing_is_invalid_argument(response.headers_mut());
                    Ok(response)
                })
            }
            Err(status) => {
                if let Some(rpc) = Rpc::from_path(request.uri().path()) {
                    self.daemon.rpc.refused(rpc, status.code());
                }
                // The body is dropped unread: h2 resets the stream's upload.
                drop(request);
                Box::pin(async move { Ok(status.into_http()) })
            }
        }
    }
}

/// tonic's messages for a malformed request framing, as `grpc-message` carries them
/// (percent-encoded).
const FRAMING_ERRORS: [&str; 4] = [
    "protocol%20error:%20received%20message%20with",
    "Missing%20request%20message",
    "Unexpected%20EOF%20decoding%20stream",
    "Error%20decompressing",
];

/// Rewrites a trailers-only `INTERNAL` answer to a malformed request framing into
/// `INVALID_ARGUMENT`, its message kept.
fn framing_is_invalid_argument(headers: &mut http::HeaderMap) {
    let internal = headers
        .get("grpc-status")
        .is_some_and(|v| v.as_bytes() == b"13");
    let framing = headers.get("grpc-message").is_some_and(|m| {
        FRAMING_ERRORS
            .iter()
            .any(|e| m.as_bytes().starts_with(e.as_bytes()))
    });
    if internal && framing {
        headers.insert("grpc-status", http::HeaderValue::from_static("3"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Status;

    #[test]
    fn only_framing_errors_become_invalid_argument() {
        let code = |status: Status| {
            let mut response = status.into_http::<Body>();
            framing_is_invalid_argument(response.headers_mut());
            Status::from_header_map(response.headers()).map(|s| s.code())
        };
        for framing in [
            "protocol error: received message with compressed-flag but no grpc-encoding was \
             specified",
            "protocol error: received message with invalid compression flag: 2 (valid flags \
             are 0 and 1), while sending request",
            "Unexpected EOF decoding stream.",
            "Missing request message.",
        ] {
            assert_eq!(
                code(Status::internal(framing)),
                Some(tonic::Code::InvalidArgument)
            );
        }
        assert_eq!(
            code(Status::internal("the job failed: internal error")),
            Some(tonic::Code::Internal)
        );
        assert_eq!(
            code(Status::unavailable("Unexpected EOF decoding stream.")),
            Some(tonic::Code::Unavailable)
        );
    }
}
