//! Node-selection policies: one trait, one file per policy, chosen by name.
//!
//! A policy sees a read-only [`ClusterView`] (the node status table) and the packet to place,
//! and names a node or declines. It does no I/O and reads no clock; a randomised policy takes a
//! seed. The balancer around it enforces the paper's two strategies, so a policy only ranks:
//! - strategy 1 (capacity first): a policy should pick among [`ClusterView::candidates`]; a
//!   choice without room is treated as "wait" (or, for a pinning policy, as the job's node);
//! - strategy 2 (dependency affinity) is applied before the policy is asked: a dependent job
//!   bound to a node is not offered to the policy again while bound.

use std::fmt;
use std::str::FromStr;

use crate::error::{ConfigError, ParseError};
use crate::packet::PacketMeta;
use crate::sched::status::ClusterView;

mod hhs_acdid;
mod paper;

pub use hhs_acdid::HhsAcdid;
pub use paper::Paper;

/// Picks the node for a packet within one cluster. Each cluster has its own instance.
pub trait Policy: Send + fmt::Debug {
    /// The policy's name, as [`PolicySpec`] parses it.
    fn name(&self) -> &'static str;

    /// The node (an index into `view`) for `packet`, or `None` to make it wait.
    ///
    /// For a policy that does not pin jobs, the choice should have room for the packet
    /// ([`ClusterView::candidates`]); a choice without room makes the packet wait.
    fn select(&mut self, view: &ClusterView<'_>, packet: &PacketMeta) -> Option<usize>;

    /// Whether the policy fixes every job's node when the job's first packet is placed, as the
    /// HHS-ACDID baseline does. The balancer then binds each job (dependent or not) to the
    /// chosen node until its last packet completes, and asks the policy only for first packets.
    /// A pinned job's packets wait for their node even when other nodes have room.
    fn pins_jobs(&self) -> bool {
        false
    }

    /// Told after the balancer places `packet` on node `node`.
    fn on_dispatch(&mut self, _view: &ClusterView<'_>, _node: usize, _packet: &PacketMeta) {}

    /// Told after node `node` completes `packet`.
    fn on_complete(&mut self, _view: &ClusterView<'_>, _node: usize, _packet: &PacketMeta) {}
}

/// A policy by name and parameters: what a configuration file or command line says. Build one
/// instance per cluster with [`PolicySpec::build`].
///
/// Names: `paper` (optionally `paper:alpha=0.05,beta=0.95`) and `hhs-acdid`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PolicySpec {
    /// The paper's weight W = α·v + β·r ([`Paper`]).
    Paper {
        /// Speed coefficient α.
        alpha: f64,
        /// Remaining-capacity coefficient β.
        beta: f64,
    },
    /// The HHS-ACDID baseline ([`HhsAcdid`]).
    HhsAcdid,
}

impl Default for PolicySpec {
    fn default() -> Self {
        PolicySpec::Paper {
            alpha: Paper::DEFAULT_ALPHA,
            beta: Paper::DEFAULT_BETA,
        }
    }
}

impl PolicySpec {
    /// The names [`FromStr`] accepts.
    pub const NAMES: &'static [&'static str] = &["paper", "hhs-acdid"];

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            PolicySpec::Paper { .. } => "paper",
            PolicySpec::HhsAcdid => "hhs-acdid",
        }
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`ConfigError::BadWeights`] for α or β outside [0, 1] or both zero.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            PolicySpec::Paper { alpha, beta } => Paper::new(alpha, beta).map(drop),
            PolicySpec::HhsAcdid => Ok(()),
        }
    }

    /// A fresh instance of the policy, for one cluster.
    ///
    /// # Errors
    /// As [`PolicySpec::validate`].
    pub fn build(&self) -> Result<Box<dyn Policy>, ConfigError> {
        Ok(match *self {
            PolicySpec::Paper { alpha, beta } => Box::new(Paper::new(alpha, beta)?),
            PolicySpec::HhsAcdid => Box::new(HhsAcdid::new()),
        })
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySpec::Paper { alpha, beta } => write!(f, "paper:alpha={alpha},beta={beta}"),
            PolicySpec::HhsAcdid => f.write_str("hhs-acdid"),
        }
    }
}

impl FromStr for PolicySpec {
    type Err = ConfigError;

    /// Parses `name` or `name:key=value,key=value`.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for an unknown name or parameter, [`ConfigError::BadWeights`]
    /// for out-of-range weights.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, params) = match s.split_once(':') {
            Some((n, p)) => (n.trim(), Some(p)),
            None => (s, None),
        };
        let params = parse_params(name, params)?;
        let spec = match name.to_ascii_lowercase().as_str() {
            "paper" => {
                let mut alpha = Paper::DEFAULT_ALPHA;
                let mut beta = Paper::DEFAULT_BETA;
                for (key, value) in params {
                    match key {
                        "alpha" => alpha = value,
                        "beta" => beta = value,
                        _ => {
                            return Err(
                                ParseError::new("paper parameter", key, "alpha, beta").into()
                            );
                        }
                    }
                }
                PolicySpec::Paper { alpha, beta }
            }
            "hhs-acdid" | "hhs_acdid" | "baseline" => {
                if let Some((key, _)) = params.first() {
                    return Err(ParseError::new("hhs-acdid parameter", key, "none").into());
                }
                PolicySpec::HhsAcdid
            }
            _ => return Err(ParseError::new("policy", name, PolicySpec::NAMES.join(", ")).into()),
        };
        spec.validate()?;
        Ok(spec)
    }
}

fn parse_params<'a>(
    policy: &str,
    params: Option<&'a str>,
) -> Result<Vec<(&'a str, f64)>, ConfigError> {
    let Some(params) = params else {
        return Ok(Vec::new());
    };
    params
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').ok_or_else(|| {
                ParseError::new("policy parameter", p, format!("key=value for {policy}"))
            })?;
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| ParseError::new("policy parameter value", v, "a number"))?;
            Ok((k.trim(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_names_are_errors() {
        assert_eq!(
            "paper".parse::<PolicySpec>().unwrap(),
            PolicySpec::default()
        );
        assert_eq!(
            "hhs-acdid".parse::<PolicySpec>().unwrap(),
            PolicySpec::HhsAcdid
        );
        assert_eq!(
            "paper:alpha=0.3,beta=0.7".parse::<PolicySpec>().unwrap(),
            PolicySpec::Paper {
                alpha: 0.3,
                beta: 0.7
            }
        );
        let err = "fastest".parse::<PolicySpec>().unwrap_err();
        assert!(
            matches!(err, ConfigError::Parse(ref p) if p.what() == "policy"),
            "{err}"
        );
        assert!(err.to_string().contains("fastest"));
        assert!("paper:gamma=1".parse::<PolicySpec>().is_err());
        assert!("paper:alpha".parse::<PolicySpec>().is_err());
        assert!("paper:alpha=x".parse::<PolicySpec>().is_err());
        assert!("hhs-acdid:alpha=1".parse::<PolicySpec>().is_err());
    }

    #[test]
    fn weights_are_checked() {
        for (a, b) in [(-0.1, 0.5), (0.5, 1.5), (0.0, 0.0), (f64::NAN, 0.5)] {
            let spec = format!("paper:alpha={a},beta={b}");
            assert!(
                matches!(
                    spec.parse::<PolicySpec>(),
                    Err(ConfigError::BadWeights { .. })
                ),
                "{spec}"
            );
        }
    }

    #[test]
    fn display_round_trips() {
        for spec in [PolicySpec::default(), PolicySpec::HhsAcdid] {
            assert_eq!(spec.to_string().parse::<PolicySpec>().unwrap(), spec);
        }
    }
}
