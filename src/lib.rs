//! cryptodispatch: software crypto offload on multicore CPUs.
//!
//! Applications hand it jobs — AES encryption and decryption in ECB, CBC, OFB, CFB-128 and CTR,
//! AES-GCM authenticated encryption, Ed25519 signing and verification — cut into packets that
//! arrive interleaved. Nodes (in the
//! runtime, worker threads pinned to cores) act as heterogeneous "IP cores", grouped by
//! algorithm into clusters. A two-level scheduler (after Li et al., Journal on Communications 2018,
//! 39(6); explained in the repository's `docs/ALGORITHM.md`) routes each packet to its cluster, then to the node with
//! the best weight of speed and free capacity, and keeps the packets of a chained job on one
//! node while a predecessor is in flight.
//!
//! # Hello, offload
//!
//! ```
//! use cryptodispatch::{Job, Mode, Padding, Service};
//!
//! // The default service: an AES cluster and an Ed25519 cluster, a node on every core, the
//! // default policy (`mct-wait`, `sched::policy::DEFAULT`).
//! let service = Service::new()?;
//!
//! // Keys are registered once and used by handle; their bytes never leave the service.
//! let key = service.add_aes_key(&[0x2b; 16])?;
//! let job = Job::encrypt(key, Mode::Cbc, &[0x00; 16], b"attack at dawn".to_vec())
//!     .with_padding(Padding::Pkcs7);
//! let ciphertext = service.submit(job)?.wait()?.into_data().unwrap_or_default();
//! assert_eq!(ciphertext.len(), 16);
//!
//! let decrypted = service
//!     .submit(Job::decrypt(key, Mode::Cbc, &[0x00; 16], ciphertext).with_padding(Padding::Pkcs7))?
//!     .wait()?
//!     .into_data();
//! assert_eq!(decrypted.as_deref(), Some(&b"attack at dawn"[..]));
//!
//! // AES-GCM: a 12-byte nonce (never reused with a key), associated data, a 16-byte tag; a
//! // tag that does not verify is an error, and no plaintext is released.
//! let nonce = [0x07; 12];
//! let sealed = service.submit(Job::gcm_encrypt(key, &nonce, b"header".to_vec(), b"secret".to_vec()))?;
//! let (ct, tag) = sealed.wait()?.into_sealed().unwrap();
//! let opened = service.submit(Job::gcm_decrypt(key, &nonce, b"header".to_vec(), ct.clone(), &tag))?;
//! assert_eq!(opened.wait()?.into_data().as_deref(), Some(&b"secret"[..]));
//! let forged = service.submit(Job::gcm_decrypt(key, &nonce, b"Header".to_vec(), ct, &tag))?;
//! assert!(matches!(
//!     forged.wait(),
//!     Err(cryptodispatch::JobError::Crypto(cryptodispatch::error::CryptoError::AuthenticationFailed))
//! ));
//!
//! // Ed25519: sign, then verify; a wrong signature is the answer `false`, not an error.
//! let signer = service.generate_signing_key()?;
//! let sig = service.submit(Job::sign(signer, b"hello".to_vec()))?.wait()?.signature().unwrap();
//! let ok = service.submit(Job::verify(signer, b"hello".to_vec(), &sig))?.wait()?.verified();
//! assert_eq!(ok, Some(true));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Jobs are cut into packets of the service's packet size; the handle can be waited on or
//! `.await`ed. [`Service::try_submit`] hands a job back when the queues are full, and
//! [`Service::stream`] feeds a chained job chunk by chunk. See [`runtime`] for the service,
//! [`ServiceBuilder`] for its settings, and the `cryptodispatch` command-line tool for an
//! `openssl enc` that runs through it.
//!
//! # The scheduler core, driven by hand
//!
//! The core is a pure state machine: packets arrive, nodes complete, and it says which packet
//! goes to which node. Here three CBC packets of one job and one ECB packet of another go to a
//! cluster of a fast node and a slow one:
//!
//! ```
//! use cryptodispatch::packet::{ClusterId, Cmd, Len, NodeId, Packet, PacketMeta, TaskId, UnitTimes};
//! use cryptodispatch::sched::{Admission, Affinity, ClusterConfig, NodeConfig, PolicySpec, SchedConfig, Scheduler};
//!
//! let node = |unit| NodeConfig::new(UnitTimes::uniform(unit), 4096);
//! let config = SchedConfig {
//!     clusters: vec![ClusterConfig { nodes: vec![node(10.0), node(30.0)], queue_len: 16, max_packet: 1024 }],
//!     wait_queue_len: 16,
//!     affinity: Affinity::Strict,
//!     unit_len: 1024,
//!     admission: Admission::Fifo,
//! };
//! let mut core = Scheduler::new(config, &"paper".parse::<PolicySpec>()?)?;
//!
//! let header = |task| PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0));
//! let cbc = |seq, last| Packet::new(header(1).dependent(true).at(seq, last), Len(1024));
//! core.arrive(cbc(0, false))?;
//! core.arrive(Packet::new(header(2), Len(1024)))?; // an ECB packet: independent
//! core.arrive(cbc(1, false))?;
//!
//! let placed: Vec<(u64, u32)> = core.dispatches().map(|d| (d.packet.meta.task.0, d.node.0)).collect();
//! // Job 1 starts on the fast node; job 2 goes to the emptier node; job 1's second packet
//! // follows its first (strategy 2), whatever the weights say.
//! assert_eq!(placed, vec![(1, 0), (2, 1), (1, 0)]);
//! assert_eq!(core.bound_node(ClusterId(0), TaskId(1)), Some(NodeId(0)));
//!
//! core.complete(NodeId(0))?; // the fast node finished job 1's first packet
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The work of a node
//!
//! [`crypto`] runs one packet at a time and hands back the chaining state, so a job run packet
//! by packet — on any nodes — equals the one-shot result:
//!
//! ```
//! use cryptodispatch::crypto::{AesKey, AesOp, ChainState, Direction};
//! use cryptodispatch::packet::Mode;
//!
//! let key = AesKey::new(&[0x11; 16])?;
//! let op = AesOp::new(Direction::Encrypt, Mode::Cbc);
//! let data = [0x42u8; 64];
//! let whole = key.one_shot(op, &[0x24; 16], &data)?;
//!
//! let mut state = ChainState::from_iv(&[0x24; 16])?;
//! let mut out = Vec::new();
//! for (i, chunk) in data.chunks(32).enumerate() {
//!     let mut buf = chunk.to_vec();
//!     let n = key.process(op, &mut state, &mut buf, chunk.len(), i == 1)?;
//!     out.extend_from_slice(&buf[..n]);
//! }
//! assert_eq!(out, whole);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout: the offload API and the research API
//!
//! For offload users, the stable API, re-exported at the crate root:
//! - [`runtime`]: the [`Service`] and its [`ServiceBuilder`], keys ([`KeyId`]), [`Job`]s and
//!   their [`JobHandle`]s and [`JobOutput`]s, [`Stream`]s, and the [`Metrics`] snapshot;
//! - [`error`]: the error types, one per operation;
//! - the job descriptions they take: [`Mode`], [`AesOp`], [`Direction`], [`Padding`].
//!
//! For research on scheduling, an API that may change between minor versions:
//! - [`sched`]: the scheduler core (a sans-IO state machine) and its policies;
//! - [`sim`]: the simulator and its workloads, and the experiments that use them
//!   ([`sim::research`], which the benchmark binary `cryptodispatch-bench` prints);
//! - [`packet`]: packets, commands, modes and lengths as the core sees them;
//! - [`crypto`]: the work of a node, one packet at a time.
//!
//! Where the two meet, their defaults differ on purpose: the core's [`Admission`] and
//! [`Affinity`] default to the paper's first come first served and strict binding, so the
//! simulator reproduces the paper; a [`Service`] defaults to fair admission and in-flight
//! binding ([`ServiceBuilder::admission`], [`ServiceBuilder::affinity`]).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod crypto;
pub mod error;
pub mod packet;
pub mod runtime;
pub mod sched;
pub mod sim;

pub use crypto::{AesOp, Direction, Padding};
pub use error::{BuildError, JobError, KeyError, SubmitError, TenantError, TrySubmitError};
pub use packet::{Mode, TenantId};
pub use runtime::{
    ClusterKind, Job, JobHandle, JobOutput, KeyId, Metrics, NodeSpec, Service, ServiceBuilder,
    Stream, StreamReceiver, StreamSender, TenantMetrics, TenantSpec, TryPushError,
};
pub use sched::{Admission, Affinity, PolicySpec};

/// A fault a node injects, for tests and chaos tests (the `fault-injection` feature).
#[cfg(feature = "fault-injection")]
pub use runtime::Fault;

/// The README's code runs as a doc test, so the quick start stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
