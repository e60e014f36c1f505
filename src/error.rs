//! Every public error type, gathered in one place. Each layer defines its own
//! ([`crypto`](crate::crypto), [`sched`](crate::sched), [`runtime`](crate::runtime),
//! [`sim`](crate::sim)); each operation has its own enum, so a caller matches only what can
//! happen, and errors that refuse a packet or a job hand it back, so nothing is lost to
//! backpressure.

pub use crate::crypto::CryptoError;
pub use crate::packet::ParseError;
pub use crate::runtime::{
    BuildError, JobError, KeyError, SubmitError, TenantError, TrySubmitError,
};
pub use crate::sched::{ArriveError, ConfigError, SchedError};
pub use crate::sim::TraceError;
