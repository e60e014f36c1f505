//! The options every command shares (nodes, policy, packet size), the service built from them,
//! and the CLI's error type with its exit codes.

use std::fmt;
use std::io;

use clap::Args;
use cryptodispatch::error::ConfigError;
use cryptodispatch::{BuildError, ClusterKind, NodeSpec, Service, ServiceBuilder};

/// Exit code of a usage error: bad arguments, or files named by them that cannot be used.
pub const EXIT_USAGE: i32 = 2;
/// Exit code of a failure while processing the data (bad padding, I/O error, ...).
pub const EXIT_FAILURE: i32 = 1;

/// Why a command failed: the message for stderr and the exit code.
#[derive(Debug)]
pub enum CliError {
    /// A usage error (exit 2).
    Usage(String),
    /// A runtime failure (exit 1).
    Failure(String),
}

impl CliError {
    pub fn usage(msg: impl Into<String>) -> Self {
        CliError::Usage(msg.into())
    }

    pub fn failure(msg: impl Into<String>) -> Self {
        CliError::Failure(msg.into())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Failure(_) => EXIT_FAILURE,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failure(m) => f.write_str(m),
        }
    }
}

/// The scheduler options.
#[derive(Debug, Clone, Args)]
pub struct ServiceArgs {
    /// Number of nodes (worker threads) in the cluster that does the work; node i is pinned to
    /// core i mod (number of cores) [default: the number of cores]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nodes: Option<u32>,

    /// Node-selection policy, parsed by the library: NAME or NAME:KEY=VALUE,... (--help lists
    /// them) [default: mct-wait]
    #[arg(long, value_name = "NAME", long_help = policy_help())]
    pub policy: Option<String>,

    /// Packet size in bytes: the input is handed to the scheduler in packets of this size (a
    /// positive multiple of 16) [default: 16384]
    #[arg(long = "packet-size", value_name = "BYTES")]
    pub packet_size: Option<usize>,
}

impl ServiceArgs {
    /// Builds a service with one cluster of `kind`. `min_capacity` raises each node's queue
    /// capacity (in bytes) to at least that much: an Ed25519 message is one packet, and must
    /// fit on a node.
    pub fn build(&self, kind: ClusterKind, min_capacity: Option<u64>) -> Result<Service, CliError> {
        let cores = core_affinity::get_core_ids().map_or(0, |c| c.len());
        let nodes = match self.nodes {
            Some(n) => n as usize,
            None => cores.max(1),
        };
        let mut builder = Service::builder();
        if let Some(bytes) = self.packet_size {
            // Checked before anything is read, by the rule the library builds by.
            ServiceBuilder::check_packet_size(bytes)
                .map_err(|e| CliError::usage(format!("--packet-size: {e}")))?;
            builder = builder.packet_size(bytes);
        }
        // The capacity the library would choose (8 packets), raised for a long message.
        let default_capacity = 8 * self.packet_size.unwrap_or(16 * 1024) as u64;
        let specs = (0..nodes).map(|i| {
            let spec = if cores > 0 {
                NodeSpec::pinned(i % cores)
            } else {
                NodeSpec::new()
            };
            match min_capacity {
                Some(min) => spec.capacity(min.max(default_capacity)),
                None => spec,
            }
        });
        // A stream holds as many outputs unreceived as the cipher keeps in flight.
        builder = builder
            .cluster(kind, specs)
            .stream_outputs(crate::cipher::MAX_IN_FLIGHT_PACKETS);
        if let Some(name) = &self.policy {
            builder = builder.policy_name(name);
        }
        builder.build().map_err(|e| match e {
            BuildError::Config(
                c @ (ConfigError::Parse(_)
                | ConfigError::BadWeights { .. }
                | ConfigError::BadPolicyParameter { .. }),
            ) => CliError::usage(format!("--policy: {c}")),
            BuildError::PacketSize(_) => CliError::usage(format!("--packet-size: {e}")),
            other => CliError::failure(format!("cannot start the service: {other}")),
        })
    }
}

/// The long help of `--policy`: the library's policies (its registry), one a line, each
/// followed by its parameters with their defaults.
fn policy_help() -> String {
    let policies: Vec<String> = cryptodispatch::sched::policy::registry()
        .iter()
        .map(|entry| format!("  {entry:#}"))
        .collect();
    format!(
        "Node-selection policy, parsed by the library [default: {}]\n\n\
         A policy is written NAME or NAME:KEY=VALUE,...; the policies:\n{}",
        cryptodispatch::sched::policy::DEFAULT.name(),
        policies.join("\n")
    )
}

/// A read error while processing.
pub fn read_error(e: io::Error) -> CliError {
    CliError::failure(format!("error reading input: {e}"))
}

/// A write error while processing.
pub fn write_error(e: io::Error) -> CliError {
    CliError::failure(format!("error writing output: {e}"))
}
