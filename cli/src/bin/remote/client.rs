//! A client of `cryptodispatchd`: one HTTP/2 channel (plaintext to a loopback daemon, TLS with a
//! given CA otherwise), a bearer token on every call, and retries of unary calls.
//!
//! # Retries
//! A unary call that ends in `UNAVAILABLE` (the daemon is draining, or it died and the proxy in
//! front of it answered 502/503, or the connection broke) is sent again, up to
//! [`Retry::attempts`] times in all, after a backoff that doubles from
//! [`Retry::first_backoff`]. Every call of this API is deterministic for its inputs (AES with a
//! given IV, AES-GCM with a given nonce, Ed25519 signing, verification), so sending one twice is
//! harmless (a GCM encryption sent again seals the same message with the same nonce: the same
//! ciphertext and tag, not a nonce reused on another message). No other status
//! is retried: `RESOURCE_EXHAUSTED` means the daemon is overloaded, which more traffic does not
//! help. Streams are not retried (their output may already have been consumed).

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Request, Response, Status, Streaming};
use zeroize::Zeroizing;

use super::proto::crypto_dispatch_client::CryptoDispatchClient;
use super::proto::{
    AesRequest, GcmDecryptRequest, GcmEncryptRequest, GetPublicKeyRequest, SignRequest,
    StreamRequest, StreamResponse, VerifyBatchRequest, VerifyRequest,
};

/// How unary calls are retried on `UNAVAILABLE` (and on a response cut off: [`retryable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all (1: no retry).
    pub attempts: u32,
    /// The wait before the second attempt; it doubles for each further one.
    pub first_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 8,
            first_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(500),
        }
    }
}

/// Where the daemon is and how to talk to it.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// `http://HOST:PORT` (plaintext: a daemon run with `--insecure-loopback`) or
    /// `https://HOST:PORT`.
    pub url: String,
    /// The bearer token sent with every call.
    pub token: Option<Zeroizing<String>>,
    /// PEM of the CA that signed the daemon's certificate (needed for `https`).
    pub ca_pem: Option<Vec<u8>>,
    /// PEM certificate and key of this client, for a daemon that asks for client certificates.
    pub identity_pem: Option<(Vec<u8>, Zeroizing<Vec<u8>>)>,
    /// The name the daemon's certificate must carry (default: the URL's host).
    pub domain: Option<String>,
    /// The largest message accepted from the daemon, in bytes (0: tonic's default of 4 MiB).
    pub max_message_bytes: usize,
    /// Retries of unary calls.
    pub retry: Retry,
    /// The longest the connection's set-up (TCP, TLS, HTTP/2) may take, and each attempt of a
    /// unary call, and a stream until the daemon answers it; `None`: no limit but the TCP
    /// connect's 5 s. A daemon that accepts a connection and then says nothing would otherwise
    /// hold the caller for ever.
    pub timeout: Option<Duration>,
}

/// Why the client could not connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError(pub String);

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectError {}

/// Adds `authorization: Bearer TOKEN` to every call.
#[derive(Clone)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Bearer(..)"
        } else {
            "Bearer(none)"
        })
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// The generated client with the token interceptor.
pub type Inner = CryptoDispatchClient<InterceptedService<Channel, Bearer>>;

/// A connected client. Cloning shares the channel.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Inner,
    channel: Channel,
    retry: Retry,
    /// [`ClientConfig::timeout`].
    timeout: Option<Duration>,
    retries: Arc<AtomicU64>,
}

impl Client {
    /// Connects to the daemon at `config.url`.
    ///
    /// # Errors
    /// A malformed URL, a token that is not a valid header value, unreadable TLS material, an
    /// `https` URL without a CA, or a connection that fails.
    pub async fn connect(config: &ClientConfig) -> Result<Client, ConnectError> {
        let endpoint = endpoint(config)?;
        let connecting = endpoint.connect();
        let connected = match config.timeout {
            Some(limit) => tokio::time::timeout(limit, connecting).await.map_err(|_| {
                ConnectError(format!(
                    "cannot connect to {}: no answer within {} ms (TLS handshake or HTTP/2 \
                     set-up)",
                    config.url,
                    limit.as_millis()
                ))
            })?,
            None => connecting.await,
        };
        let channel = connected.map_err(|e| {
            ConnectError(format!(
                "cannot connect to {}: {}",
                config.url,
                source_chain(&e)
            ))
        })?;
        Client::with_channel(channel, config)
    }

    /// A client on an existing channel (the URL of `config` is not used).
    ///
    /// # Errors
    /// A token that is not a valid header value.
    pub fn with_channel(channel: Channel, config: &ClientConfig) -> Result<Client, ConnectError> {
        let bearer = match &config.token {
            Some(token) => {
                let header = Zeroizing::new(format!("Bearer {}", token.as_str()));
                let mut value = MetadataValue::try_from(header.as_str()).map_err(|_| {
                    ConnectError("the token must be printable ASCII without spaces".into())
                })?;
                value.set_sensitive(true);
                Bearer(Some(value))
            }
            None => Bearer(None),
        };
        let mut inner = CryptoDispatchClient::with_interceptor(channel.clone(), bearer);
        if config.max_message_bytes > 0 {
            inner = inner
                .max_decoding_message_size(config.max_message_bytes)
                .max_encoding_message_size(config.max_message_bytes);
        }
        Ok(Client {
            inner,
            channel,
            retry: config.retry,
            timeout: config.timeout,
            retries: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The underlying channel (for the health service, say).
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The generated client, for calls made by hand (no retries).
    pub fn raw(&self) -> Inner {
        self.inner.clone()
    }

    /// How many attempts were retries, over every clone of this client.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// AES encryption; the ciphertext.
    ///
    /// # Errors
    /// The daemon's status, after retries.
    pub async fn encrypt(&self, request: AesRequest) -> Result<Vec<u8>, Status> {
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.encrypt(request).await }
            })
            .await?;
        Ok(r.into_inner().data)
    }

    /// AES decryption; the plaintext.
    ///
    /// # Errors
    /// The daemon's status, after retries.
    pub async fn decrypt(&self, request: AesRequest) -> Result<Vec<u8>, Status> {
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.decrypt(request).await }
            })
            .await?;
        Ok(r.into_inner().data)
    }

    /// AES-GCM encryption; the ciphertext and the 16-byte tag.
    ///
    /// # Errors
    /// The daemon's status, after retries.
    pub async fn gcm_encrypt(
        &self,
        request: GcmEncryptRequest,
    ) -> Result<(Vec<u8>, Vec<u8>), Status> {
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.gcm_encrypt(request).await }
            })
            .await?
            .into_inner();
        Ok((r.ciphertext, r.tag))
    }

    /// AES-GCM decryption; the plaintext, only if the tag verifies.
    ///
    /// # Errors
    /// The daemon's status, after retries (`INVALID_ARGUMENT` when the tag does not verify).
    pub async fn gcm_decrypt(&self, request: GcmDecryptRequest) -> Result<Vec<u8>, Status> {
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.gcm_decrypt(request).await }
            })
            .await?;
        Ok(r.into_inner().plaintext)
    }

    /// An Ed25519 signature with a key of the daemon.
    ///
    /// # Errors
    /// The daemon's status, after retries.
    pub async fn sign(&self, key: &str, message: Vec<u8>) -> Result<Vec<u8>, Status> {
        let request = SignRequest {
            key: key.to_owned(),
            message,
        };
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.sign(request).await }
            })
            .await?;
        Ok(r.into_inner().signature)
    }

    /// Whether `signature` verifies over `message` with a key of the daemon.
    ///
    /// # Errors
    /// The daemon's status, after retries.
    pub async fn verify(
        &self,
        key: &str,
        message: Vec<u8>,
        signature: Vec<u8>,
    ) -> Result<bool, Status> {
        let request = VerifyRequest {
            key: key.to_owned(),
            message,
            signature,
        };
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.verify(request).await }
            })
            .await?;
        Ok(r.into_inner().valid)
    }

    /// Batch verification: one answer per item.
    ///
    /// # Errors
    /// The daemon's status, after retries.
    pub async fn verify_batch(&self, request: VerifyBatchRequest) -> Result<Vec<bool>, Status> {
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.verify_batch(request).await }
            })
            .await?;
        Ok(r.into_inner().valid)
    }

    /// The 32-byte public key of an Ed25519 key of the daemon.
    ///
    /// # Errors
    /// The daemon's status, after retries.
    pub async fn public_key(&self, key: &str) -> Result<Vec<u8>, Status> {
        let request = GetPublicKeyRequest {
            key: key.to_owned(),
        };
        let r = self
            .retrying(|mut c| {
                let request = request.clone();
                async move { c.get_public_key(request).await }
            })
            .await?;
        Ok(r.into_inner().public_key)
    }

    /// Opens a stream: one chained AES job fed by `requests` (the first carries `start`).
    /// Not retried.
    ///
    /// # Errors
    /// The daemon's status for the call.
    pub async fn stream(
        &self,
        requests: impl tokio_stream::Stream<Item = StreamRequest> + Send + 'static,
    ) -> Result<Streaming<StreamResponse>, Status> {
        let mut inner = self.inner.clone();
        let opening = inner.stream(requests);
        Ok(bounded(self.timeout, opening).await?.into_inner())
    }

    /// Runs `call` until it succeeds, fails with a status that is not [`retryable`], or the
    /// attempts are used up.
    async fn retrying<T, F, Fut>(&self, mut call: F) -> Result<Response<T>, Status>
    where
        F: FnMut(Inner) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let mut backoff = self.retry.first_backoff;
        let mut attempt = 1;
        loop {
            match bounded(self.timeout, call(self.inner.clone())).await {
                Err(status) if retryable(&status) && attempt < self.retry.attempts => {
                    attempt += 1;
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.retry.max_backoff);
                }
                other => return other,
            }
        }
    }
}

/// `call`, or `DEADLINE_EXCEEDED` (made by the client, not retried) once `limit` has passed.
async fn bounded<T>(
    limit: Option<Duration>,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
            Err(Status::deadline_exceeded(format!(
                "no answer from the daemon within {} ms",
                limit.as_millis()
            )))
        }),
        None => call.await,
    }
}

/// tonic's status for a unary response whose body ended without a message (made by the
/// client, not sent by a server).
const NO_RESPONSE_MESSAGE: &str = "Missing response message.";

/// tonic's status for a response whose body ended in the middle of a message (made by the
/// client, not sent by a server).
const CUT_RESPONSE_MESSAGE: &str = "Unexpected EOF decoding stream.";

/// Whether a failed unary call is tried again: `UNAVAILABLE` (a daemon draining, dead or out of
/// reach), or a response cut off before or within its message, which a proxy forwards when
/// the daemon behind it dies after the response's headers, or when the proxy drops its
/// connection to the daemon (HAProxy ends the stream instead of resetting it; HAProxy 2.6
/// before its December 2023 releases drops the connection on some responses larger than its
/// buffer, deploy/haproxy.cfg). Every call of the API is deterministic, so running one again
/// is harmless; a status a daemon sent, with its message, is not retried.
pub fn retryable(status: &Status) -> bool {
    match status.code() {
        Code::Unavailable => true,
        Code::Internal => {
            status.message() == NO_RESPONSE_MESSAGE || status.message() == CUT_RESPONSE_MESSAGE
        }
        _ => false,
    }
}

/// Checks what [`Client::connect`] checks before it connects: the URL's scheme, a CA for
/// `https`, no TLS files for `http`, readable TLS material.
///
/// # Errors
/// What is wrong with `config`, as `Client::connect` would report it.
pub fn check_config(config: &ClientConfig) -> Result<(), ConnectError> {
    endpoint(config).map(|_| ())
}

/// The endpoint for `config`: plaintext for `http://`, TLS for `https://`.
/// HTTP/2 flow-control window of the client's connections (32 MiB: above the daemon's default
/// request limit of 16 MiB).
const WINDOW: u32 = 32 << 20;

fn endpoint(config: &ClientConfig) -> Result<Endpoint, ConnectError> {
    let url = config.url.as_str();
    let tls = if url.starts_with("https://") {
        true
    } else if url.starts_with("http://") {
        false
    } else {
        return Err(ConnectError(format!(
            "{url}: the daemon's URL must start with http:// (a daemon run with \
             --insecure-loopback) or https://"
        )));
    };
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| ConnectError(format!("{url}: {e}")))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        // Flow-control windows as large as the largest request or response, so a call moves
        // its whole body without the client sending window updates as it reads.
        .initial_stream_window_size(WINDOW)
        .initial_connection_window_size(WINDOW);
    if tls {
        let Some(ca) = &config.ca_pem else {
            return Err(ConnectError(format!(
                "{url}: https needs the CA that signed the daemon's certificate (--cacert FILE)"
            )));
        };
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        if let Some((cert, key)) = &config.identity_pem {
            tls = tls.identity(Identity::from_pem(cert, key.as_slice()));
        }
        if let Some(domain) = &config.domain {
            tls = tls.domain_name(domain.clone());
        }
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| ConnectError(format!("{url}: TLS: {}", source_chain(&e))))?;
    } else if config.ca_pem.is_some() || config.identity_pem.is_some() {
        return Err(ConnectError(format!(
            "{url}: TLS files were given for a plaintext (http://) URL; use https://"
        )));
    }
    Ok(endpoint)
}

/// An error and its sources, on one line ("transport error: tcp connect error: ...").
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// Why a token file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenFileError {
    /// It cannot be read, or holds no token.
    Unreadable(String),
    /// Group or others may access it: the token may already be known to others.
    NotPrivate(String),
}

impl fmt::Display for TokenFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenFileError::Unreadable(m) | TokenFileError::NotPrivate(m) => f.write_str(m),
        }
    }
}

/// The largest token file read.
const MAX_TOKEN_FILE: u64 = 1 << 20;

/// Reads a client's token file: the first word of its first line that is neither empty nor a
/// comment (`#`). A daemon's `--tokens` file works too: its first token is taken. The file
/// must be a regular file private to its owner (no access for group or others, as
/// `chmod 600`), checked on the opened file.
///
/// # Errors
/// [`TokenFileError::NotPrivate`] for a file group or others may access;
/// [`TokenFileError::Unreadable`] for one that cannot be read, is not a regular file, is
/// larger than 1 MiB or holds no token.
pub fn read_token_file(path: &Path) -> Result<Zeroizing<String>, TokenFileError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let unreadable =
        |e: &dyn fmt::Display| TokenFileError::Unreadable(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| unreadable(&e))?;
    let meta = file.metadata().map_err(|e| unreadable(&e))?;
    if !meta.is_file() {
        return Err(unreadable(&"not a regular file"));
    }
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(TokenFileError::NotPrivate(format!(
            "{}: mode {:04o} lets group or others read the token; refusing to use it (make it \
             private: chmod 600 {})",
            path.display(),
            mode & 0o7777,
            path.display()
        )));
    }
    if meta.len() > MAX_TOKEN_FILE {
        return Err(unreadable(&"larger than 1 MiB"));
    }
    let mut text = Zeroizing::new(String::new());
    file.take(MAX_TOKEN_FILE)
        .read_to_string(&mut text)
        .map_err(|e| unreadable(&e))?;
    // A byte-order mark, as some editors write, is not part of the token.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .find_map(|l| l.split_whitespace().next())
        .map(|t| Zeroizing::new(t.to_owned()))
        .ok_or_else(|| unreadable(&"no token in the file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The token is the first word of the first line that is not a comment, whether or not
    /// an editor began the file with a byte-order mark.
    #[test]
    fn a_token_file_with_a_byte_order_mark() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("cd-token-bom-{}", std::process::id()));
        std::fs::write(&path, "\u{feff}# the demo token\n0123456789abcdefXYZ\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let token = read_token_file(&path).map_err(|e| format!("{e:?}"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(token.unwrap().as_str(), "0123456789abcdefXYZ");
    }

    #[test]
    fn unavailable_and_a_cut_off_response_are_retried_a_daemons_own_error_is_not() {
        assert!(retryable(&Status::unavailable("draining")));
        assert!(retryable(&Status::internal(NO_RESPONSE_MESSAGE)));
        assert!(retryable(&Status::internal(CUT_RESPONSE_MESSAGE)));
        assert!(!retryable(&Status::internal("the node failed")));
        assert!(!retryable(&Status::invalid_argument("bad key")));
        assert!(!retryable(&Status::resource_exhausted(
            "over the tenant's limit"
        )));
    }
}
