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

use crate::packet::PacketMeta;
use crate::packet::ParseError;
use crate::sched::error::ConfigError;
use crate::sched::status::ClusterView;

mod best;
mod ddwrr;
mod entropy;
mod hhs_acdid;
mod least_conn;
mod load_formula;
mod p2c;
mod paper;
mod paper_adaptive;
mod rr;
mod sed;
mod swrr;
mod zorder;

pub use ddwrr::Ddwrr;
pub use entropy::Entropy;
pub use hhs_acdid::HhsAcdid;
pub use least_conn::{LeastConnections, WeightedLeastConnections};
pub use load_formula::LoadFormula;
pub use p2c::PowerOfTwo;
pub use paper::Paper;
pub use paper_adaptive::PaperAdaptive;
pub use rr::RoundRobin;
pub use sed::ShortestExpectedDelay;
pub use swrr::SmoothWeighted;
pub use zorder::ZOrder;

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

    /// How many times the policy has raised an overload alarm (every node over its threshold);
    /// 0 for policies without alarms. The runtime reports it in its metrics.
    fn alarms(&self) -> u64 {
        0
    }
}

/// A policy by name and parameters: what a configuration file or command line says. Build one
/// instance per cluster with [`PolicySpec::build`].
///
/// Names (parameters as `name:key=value,key=value`):
/// `paper` (`alpha`, `beta`), `hhs-acdid`, `rr`, `swrr`, `lc`, `wlc`, `ddwrr` (`smoothing`),
/// `entropy` (`step`, `sigma`, `overload`), `zorder` (`queue`, `busy`), `load-formula` (`a`),
/// `sed`, `p2c` (`seed`), `paper-adaptive`.
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
    /// Round robin over the nodes with room ([`RoundRobin`]).
    RoundRobin,
    /// Nginx's smooth weighted round robin, weights from speed ([`SmoothWeighted`]).
    SmoothWeighted,
    /// Least queued work ([`LeastConnections`]).
    LeastConnections,
    /// Least queued work per unit of speed ([`WeightedLeastConnections`]).
    WeightedLeastConnections,
    /// Seed 001's dynamic weights with smoothed demand ([`Ddwrr`]).
    Ddwrr {
        /// Exponential smoothing factor a of the recent demand, in (0, 1].
        smoothing: f64,
    },
    /// Seed 000's entropy-method weights ([`Entropy`]).
    Entropy {
        /// Weight step B.
        step: f64,
        /// Balance value σ above which weights are adjusted.
        sigma: f64,
        /// Use ratio above which a node is overloaded.
        overload: f64,
    },
    /// Seed 002's Z-order curve over two load indices ([`ZOrder`]).
    ZOrder {
        /// Queue-occupancy threshold above which a node is excluded.
        queue: f64,
        /// Busy-share threshold above which a node is excluded.
        busy: f64,
    },
    /// Seed 004's load formula with a hardware limit ([`LoadFormula`]).
    LoadFormula {
        /// Weight a of a dependent (chained) packet against an independent one.
        a: f64,
    },
    /// LVS's shortest expected delay ([`ShortestExpectedDelay`]).
    ShortestExpectedDelay,
    /// Power of two choices over queued work ([`PowerOfTwo`]).
    PowerOfTwo {
        /// Seed of the random choices.
        seed: u64,
    },
    /// The paper's weight with α set online from load and capacity ([`PaperAdaptive`]).
    PaperAdaptive,
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
    pub const NAMES: &'static [&'static str] = &[
        "paper",
        "hhs-acdid",
        "rr",
        "swrr",
        "lc",
        "wlc",
        "ddwrr",
        "entropy",
        "zorder",
        "load-formula",
        "sed",
        "p2c",
        "paper-adaptive",
    ];

    /// Every policy with its default parameters, in the order of [`NAMES`](Self::NAMES).
    pub fn all() -> Vec<PolicySpec> {
        Self::NAMES.iter().filter_map(|n| n.parse().ok()).collect()
    }

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            PolicySpec::Paper { .. } => "paper",
            PolicySpec::HhsAcdid => "hhs-acdid",
            PolicySpec::RoundRobin => "rr",
            PolicySpec::SmoothWeighted => "swrr",
            PolicySpec::LeastConnections => "lc",
            PolicySpec::WeightedLeastConnections => "wlc",
            PolicySpec::Ddwrr { .. } => "ddwrr",
            PolicySpec::Entropy { .. } => "entropy",
            PolicySpec::ZOrder { .. } => "zorder",
            PolicySpec::LoadFormula { .. } => "load-formula",
            PolicySpec::ShortestExpectedDelay => "sed",
            PolicySpec::PowerOfTwo { .. } => "p2c",
            PolicySpec::PaperAdaptive => "paper-adaptive",
        }
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`ConfigError::BadWeights`] for α or β outside [0, 1] or both zero;
    /// [`ConfigError::BadPolicyParameter`] for another parameter out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.build().map(drop)
    }

    /// A fresh instance of the policy, for one cluster.
    ///
    /// # Errors
    /// As [`PolicySpec::validate`].
    pub fn build(&self) -> Result<Box<dyn Policy>, ConfigError> {
        Ok(match *self {
            PolicySpec::Paper { alpha, beta } => Box::new(Paper::new(alpha, beta)?),
            PolicySpec::HhsAcdid => Box::new(HhsAcdid::new()),
            PolicySpec::RoundRobin => Box::new(RoundRobin::new()),
            PolicySpec::SmoothWeighted => Box::new(SmoothWeighted::new()),
            PolicySpec::LeastConnections => Box::new(LeastConnections::new()),
            PolicySpec::WeightedLeastConnections => Box::new(WeightedLeastConnections::new()),
            PolicySpec::Ddwrr { smoothing } => Box::new(Ddwrr::new(smoothing)?),
            PolicySpec::Entropy {
                step,
                sigma,
                overload,
            } => Box::new(Entropy::new(step, sigma, overload)?),
            PolicySpec::ZOrder { queue, busy } => Box::new(ZOrder::new(queue, busy)?),
            PolicySpec::LoadFormula { a } => Box::new(LoadFormula::new(a)?),
            PolicySpec::ShortestExpectedDelay => Box::new(ShortestExpectedDelay::new()),
            PolicySpec::PowerOfTwo { seed } => Box::new(PowerOfTwo::new(seed)),
            PolicySpec::PaperAdaptive => Box::new(PaperAdaptive::new()),
        })
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySpec::Paper { alpha, beta } => write!(f, "paper:alpha={alpha},beta={beta}"),
            PolicySpec::Ddwrr { smoothing } => write!(f, "ddwrr:smoothing={smoothing}"),
            PolicySpec::Entropy {
                step,
                sigma,
                overload,
            } => write!(f, "entropy:step={step},sigma={sigma},overload={overload}"),
            PolicySpec::ZOrder { queue, busy } => write!(f, "zorder:queue={queue},busy={busy}"),
            PolicySpec::LoadFormula { a } => write!(f, "load-formula:a={a}"),
            PolicySpec::PowerOfTwo { seed } => write!(f, "p2c:seed={seed}"),
            other => f.write_str(other.name()),
        }
    }
}

impl FromStr for PolicySpec {
    type Err = ConfigError;

    /// Parses `name` or `name:key=value,key=value`.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for an unknown name or parameter, [`ConfigError::BadWeights`]
    /// or [`ConfigError::BadPolicyParameter`] for out-of-range values.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, params) = match s.split_once(':') {
            Some((n, p)) => (n.trim(), Some(p)),
            None => (s, None),
        };
        let lower = name.to_ascii_lowercase();
        let mut params = Params::parse(&lower, params)?;
        let spec = match lower.as_str() {
            "paper" => PolicySpec::Paper {
                alpha: params.take("alpha", Paper::DEFAULT_ALPHA),
                beta: params.take("beta", Paper::DEFAULT_BETA),
            },
            "hhs-acdid" | "hhs_acdid" | "baseline" => PolicySpec::HhsAcdid,
            "rr" => PolicySpec::RoundRobin,
            "swrr" => PolicySpec::SmoothWeighted,
            "lc" => PolicySpec::LeastConnections,
            "wlc" => PolicySpec::WeightedLeastConnections,
            "ddwrr" => PolicySpec::Ddwrr {
                smoothing: params.take("smoothing", Ddwrr::DEFAULT_SMOOTHING),
            },
            "entropy" => PolicySpec::Entropy {
                step: params.take("step", Entropy::DEFAULT_STEP),
                sigma: params.take("sigma", Entropy::DEFAULT_SIGMA),
                overload: params.take("overload", Entropy::DEFAULT_OVERLOAD),
            },
            "zorder" => PolicySpec::ZOrder {
                queue: params.take("queue", ZOrder::DEFAULT_QUEUE),
                busy: params.take("busy", ZOrder::DEFAULT_BUSY),
            },
            "load-formula" => PolicySpec::LoadFormula {
                a: params.take("a", LoadFormula::DEFAULT_A),
            },
            "sed" => PolicySpec::ShortestExpectedDelay,
            "p2c" => PolicySpec::PowerOfTwo {
                seed: params.take_seed("seed", PowerOfTwo::DEFAULT_SEED)?,
            },
            "paper-adaptive" => PolicySpec::PaperAdaptive,
            _ => return Err(ParseError::new("policy", name, PolicySpec::NAMES.join(", ")).into()),
        };
        params.finish()?;
        spec.validate()?;
        Ok(spec)
    }
}

/// `key=value` parameters of a policy name, consumed as the policy reads them; whatever is
/// left over is an unknown parameter.
struct Params<'a> {
    policy: String,
    values: Vec<(&'a str, &'a str)>,
}

impl<'a> Params<'a> {
    fn parse(policy: &str, params: Option<&'a str>) -> Result<Self, ConfigError> {
        let mut values = Vec::new();
        for p in params
            .unwrap_or("")
            .split(',')
            .filter(|p| !p.trim().is_empty())
        {
            let (k, v) = p.split_once('=').ok_or_else(|| {
                ParseError::new("policy parameter", p, format!("key=value for {policy}"))
            })?;
            values.push((k.trim(), v.trim()));
        }
        Ok(Params {
            policy: policy.to_owned(),
            values,
        })
    }

    fn raw(&mut self, key: &str) -> Option<&'a str> {
        let i = self
            .values
            .iter()
            .position(|(k, _)| k.eq_ignore_ascii_case(key))?;
        Some(self.values.remove(i).1)
    }

    /// A number parameter, or its default. A value that is not a number becomes NaN, which
    /// the policy's constructor refuses.
    fn take(&mut self, key: &str, default: f64) -> f64 {
        self.raw(key)
            .map_or(default, |v| v.parse().unwrap_or(f64::NAN))
    }

    fn take_seed(&mut self, key: &str, default: u64) -> Result<u64, ConfigError> {
        match self.raw(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                ParseError::new("policy parameter value", v, "an unsigned integer").into()
            }),
        }
    }

    fn finish(self) -> Result<(), ConfigError> {
        match self.values.first() {
            None => Ok(()),
            Some((k, _)) => Err(ParseError::new(
                "policy parameter",
                k,
                format!("the parameters of {}", self.policy),
            )
            .into()),
        }
    }
}

/// A packet header for the policies' unit tests: job 0, cluster 0, a one-packet job.
#[cfg(test)]
pub(crate) fn test_packet(cmd: crate::packet::Cmd, dependent: bool, len: u64) -> PacketMeta {
    PacketMeta {
        task: crate::packet::TaskId(0),
        cmd,
        cluster: crate::packet::ClusterId(0),
        dependent,
        seq: 0,
        last: true,
        len,
    }
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
