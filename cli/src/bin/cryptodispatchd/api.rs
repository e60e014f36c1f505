//! The unary calls of `cryptodispatch.v1.CryptoDispatch`. Each takes the same steps: refused
//! while draining, authenticated, sized, key found and allowed, job admitted, result awaited
//! (`daemon` module); the stream is in `stream.rs`.

use std::sync::Arc;

use cryptodispatch::crypto::BLOCK;
use cryptodispatch::packet::Mode;
use cryptodispatch::{AesOp, Direction, Job, Padding};
use tonic::{Request, Response, Status, Streaming};

use crate::daemon::Daemon;
use crate::keys::KeyKind;
use crate::metrics::Rpc;
use crate::remote::codec::MAX_BATCH_ITEMS;
use crate::remote::proto::crypto_dispatch_server::CryptoDispatch;
use crate::remote::proto::{
    self, AesRequest, AesResponse, GcmDecryptRequest, GcmDecryptResponse, GcmEncryptRequest,
    GcmEncryptResponse, GetPublicKeyRequest, GetPublicKeyResponse, SignRequest, SignResponse,
    StreamRequest, VerifyBatchRequest, VerifyBatchResponse, VerifyRequest, VerifyResponse,
};
use crate::stream::{self, ResponseStream};

/// The service implementation.
#[derive(Debug, Clone)]
pub struct Api(pub Arc<Daemon>);

/// The library's mode for the wire's.
///
/// # Errors
/// `INVALID_ARGUMENT` for an unspecified or unknown mode.
pub fn mode(wire: i32) -> Result<Mode, Status> {
    match proto::Mode::try_from(wire) {
        Ok(proto::Mode::Ecb) => Ok(Mode::Ecb),
        Ok(proto::Mode::Cbc) => Ok(Mode::Cbc),
        Ok(proto::Mode::Ofb) => Ok(Mode::Ofb),
        Ok(proto::Mode::Cfb) => Ok(Mode::Cfb),
        Ok(proto::Mode::Ctr) => Ok(Mode::Ctr),
        Ok(proto::Mode::Unspecified) | Err(_) => Err(Status::invalid_argument(
            "mode: give one of MODE_ECB, MODE_CBC, MODE_OFB, MODE_CFB, MODE_CTR",
        )),
    }
}

/// The library's padding for the wire's.
///
/// # Errors
/// `INVALID_ARGUMENT` for an unknown value, or PKCS#7 with OFB or CFB.
pub fn padding(wire: i32, mode: Mode) -> Result<Padding, Status> {
    let padding = match proto::Padding::try_from(wire) {
        Ok(proto::Padding::None) => Padding::None,
        Ok(proto::Padding::Pkcs7) => Padding::Pkcs7,
        Err(_) => return Err(Status::invalid_argument("padding: unknown value")),
    };
    if padding == Padding::Pkcs7 && !mode.needs_whole_blocks() {
        return Err(Status::invalid_argument(
            "padding: PKCS#7 applies to ECB and CBC only",
        ));
    }
    Ok(padding)
}

/// Checks the IV for `mode`: 16 bytes, or none for ECB.
///
/// # Errors
/// `INVALID_ARGUMENT`.
pub fn check_iv(mode: Mode, iv: &[u8]) -> Result<(), Status> {
    match (mode.takes_iv(), iv.len()) {
        (true, BLOCK) | (false, 0) => Ok(()),
        (true, n) => Err(Status::invalid_argument(format!(
            "iv: {mode} needs a 16-byte IV, got {n} bytes"
        ))),
        (false, n) => Err(Status::invalid_argument(format!(
            "iv: ECB takes no IV, got {n} bytes"
        ))),
    }
}

impl Api {
    async fn aes(
        &self,
        direction: Direction,
        request: Request<AesRequest>,
    ) -> Result<Response<AesResponse>, Status> {
        let d = &self.0;
        let (caller, _busy) = d.admitted(&request)?;
        let r = request.into_inner();
        d.check_size(r.data.len())?;
        let key = d.key(&caller.grant, &r.key, KeyKind::Aes)?;
        let mode = mode(r.mode)?;
        let padding = padding(r.padding, mode)?;
        check_iv(mode, &r.iv)?;
        let op = AesOp::new(direction, mode).with_padding(padding);
        let output = d
            .run(caller.tenant, Job::aes(key.id, op, &r.iv, r.data))
            .await?;
        let data = output
            .into_data()
            .ok_or_else(|| Status::internal("an AES job gave no data"))?;
        Ok(Response::new(AesResponse { data }))
    }

    /// `GcmEncrypt`. The nonce length is checked by the job at submission
    /// (`INVALID_ARGUMENT`); the size limit counts the associated data too.
    async fn gcm_encrypt(
        &self,
        request: Request<GcmEncryptRequest>,
    ) -> Result<Response<GcmEncryptResponse>, Status> {
        let d = &self.0;
        let (caller, _busy) = d.admitted(&request)?;
        let r = request.into_inner();
        d.check_size(r.aad.len().saturating_add(r.plaintext.len()))?;
        let key = d.key(&caller.grant, &r.key, KeyKind::Aes)?;
        let output = d
            .run(
                caller.tenant,
                Job::gcm_encrypt(key.id, &r.nonce, r.aad, r.plaintext),
            )
            .await?;
        let (ciphertext, tag) = output
            .into_sealed()
            .ok_or_else(|| Status::internal("a GCM encryption gave no ciphertext and tag"))?;
        Ok(Response::new(GcmEncryptResponse {
            ciphertext,
            tag: tag.to_vec(),
        }))
    }

    /// `GcmDecrypt`. Nonce and tag lengths are checked by the job at submission
    /// (`INVALID_ARGUMENT`); a tag that does not verify fails the job, and the call, with
    /// `INVALID_ARGUMENT` ("authentication failed"), without plaintext.
    async fn gcm_decrypt(
        &self,
        request: Request<GcmDecryptRequest>,
    ) -> Result<Response<GcmDecryptResponse>, Status> {
        let d = &self.0;
        let (caller, _busy) = d.admitted(&request)?;
        let r = request.into_inner();
        d.check_size(r.aad.len().saturating_add(r.ciphertext.len()))?;
        let key = d.key(&caller.grant, &r.key, KeyKind::Aes)?;
        let job = Job::gcm_decrypt(key.id, &r.nonce, r.aad, r.ciphertext, &r.tag);
        let plaintext = d
            .run(caller.tenant, job)
            .await?
            .into_data()
            .ok_or_else(|| Status::internal("a GCM decryption gave no data"))?;
        Ok(Response::new(GcmDecryptResponse { plaintext }))
    }
}

#[tonic::async_trait]
impl CryptoDispatch for Api {
    async fn encrypt(&self, request: Request<AesRequest>) -> Result<Response<AesResponse>, Status> {
        let rpc = &self.0.rpc;
        rpc.observe(Rpc::Encrypt, self.aes(Direction::Encrypt, request))
            .await
    }

    async fn decrypt(&self, request: Request<AesRequest>) -> Result<Response<AesResponse>, Status> {
        let rpc = &self.0.rpc;
        rpc.observe(Rpc::Decrypt, self.aes(Direction::Decrypt, request))
            .await
    }

    async fn gcm_encrypt(
        &self,
        request: Request<GcmEncryptRequest>,
    ) -> Result<Response<GcmEncryptResponse>, Status> {
        let rpc = &self.0.rpc;
        rpc.observe(Rpc::GcmEncrypt, Api::gcm_encrypt(self, request))
            .await
    }

    async fn gcm_decrypt(
        &self,
        request: Request<GcmDecryptRequest>,
    ) -> Result<Response<GcmDecryptResponse>, Status> {
        let rpc = &self.0.rpc;
        rpc.observe(Rpc::GcmDecrypt, Api::gcm_decrypt(self, request))
            .await
    }

    async fn sign(&self, request: Request<SignRequest>) -> Result<Response<SignResponse>, Status> {
        let d = &self.0;
        d.rpc
            .observe(Rpc::Sign, async {
                let (caller, _busy) = d.admitted(&request)?;
                let r = request.into_inner();
                d.check_size(r.message.len())?;
                let key = d.key(&caller.grant, &r.key, KeyKind::Ed25519)?;
                let output = d.run(caller.tenant, Job::sign(key.id, r.message)).await?;
                let signature = output
                    .signature()
                    .ok_or_else(|| Status::internal("a sign job gave no signature"))?;
                Ok(Response::new(SignResponse {
                    signature: signature.to_vec(),
                }))
            })
            .await
    }

    async fn verify(
        &self,
        request: Request<VerifyRequest>,
    ) -> Result<Response<VerifyResponse>, Status> {
        let d = &self.0;
        d.rpc
            .observe(Rpc::Verify, async {
                let (caller, _busy) = d.admitted(&request)?;
                let r = request.into_inner();
                d.check_size(r.message.len())?;
                let key = d.key(&caller.grant, &r.key, KeyKind::Ed25519)?;
                let output = d
                    .run(caller.tenant, Job::verify(key.id, r.message, &r.signature))
                    .await?;
                let valid = output
                    .verified()
                    .ok_or_else(|| Status::internal("a verify job gave no answer"))?;
                Ok(Response::new(VerifyResponse { valid }))
            })
            .await
    }

    async fn verify_batch(
        &self,
        request: Request<VerifyBatchRequest>,
    ) -> Result<Response<VerifyBatchResponse>, Status> {
        let d = &self.0;
        d.rpc
            .observe(Rpc::VerifyBatch, async {
                let (caller, _busy) = d.admitted(&request)?;
                let r = request.into_inner();
                // The codec refuses more on the wire, before decoding; this keeps the bound
                // whatever the codec.
                if r.items.len() > MAX_BATCH_ITEMS {
                    return Err(Status::invalid_argument(format!(
                        "a batch holds at most {MAX_BATCH_ITEMS} items, not {}",
                        r.items.len()
                    )));
                }
                d.check_size(r.items.iter().map(|i| i.message.len()).sum())?;
                if r.items.is_empty() {
                    return Ok(Response::new(VerifyBatchResponse { valid: Vec::new() }));
                }
                let mut items = Vec::with_capacity(r.items.len());
                for (i, item) in r.items.into_iter().enumerate() {
                    let key = d
                        .key(&caller.grant, &item.key, KeyKind::Ed25519)
                        .map_err(|s| Status::new(s.code(), format!("item {i}: {}", s.message())))?;
                    items.push((key.id, item.message, item.signature));
                }
                let output = d.run(caller.tenant, Job::verify_batch(items)).await?;
                let valid = output
                    .verified_batch()
                    .ok_or_else(|| Status::internal("a batch job gave no answers"))?;
                Ok(Response::new(VerifyBatchResponse { valid }))
            })
            .await
    }

    async fn get_public_key(
        &self,
        request: Request<GetPublicKeyRequest>,
    ) -> Result<Response<GetPublicKeyResponse>, Status> {
        let d = &self.0;
        d.rpc
            .observe(Rpc::GetPublicKey, async {
                let (caller, _busy) = d.admitted(&request)?;
                let r = request.into_inner();
                let key = d.key(&caller.grant, &r.key, KeyKind::Ed25519)?;
                let public = d
                    .service
                    .verifying_key(key.id)
                    .map_err(|e| Status::internal(format!("public key: {e}")))?;
                Ok(Response::new(GetPublicKeyResponse {
                    public_key: public.to_vec(),
                }))
            })
            .await
    }

    type StreamStream = ResponseStream;

    async fn stream(
        &self,
        request: Request<Streaming<StreamRequest>>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        let d = &self.0;
        d.rpc
            .observe(Rpc::Stream, stream::open(Arc::clone(d), request))
            .await
    }
}
