//! The gate in front of the CryptoDispatch service: every call is refused while the daemon
//! drains and authenticated from its headers, before tonic reads or decodes its body. A call
//! refused here costs at most what the HTTP/2 transport has buffered of its body (its flow
//! control windows), whatever the size of the message it announces; its body is never read.
//!
//! A call let through carries its [`Grant`](crate::tokens::Grant) and a [`CallGuard`] (the connection is busy) as
//! request extensions; the handlers take them from there.

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
/// handler keeps it for as long as the call runs.
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
            Ok(grant) => {
                let guard = ConnInfo::of(request.extensions()).map(ConnInfo::busy);
                let extensions = request.extensions_mut();
                extensions.insert(grant);
                if let Some(guard) = guard {
                    extensions.insert(CallGuard(Arc::new(guard)));
                }
                Box::pin(self.inner.call(request))
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
