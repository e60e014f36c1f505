//! [`PolicySpec`]: a policy of the registry and its parameter values, as a configuration file
//! or a command line writes it, `name` or `name:key=value,key=value` (docs/ALGORITHM.md §11).

use std::fmt;
use std::str::FromStr;

use crate::packet::ParseError;
use crate::sched::error::ConfigError;
use crate::sched::policy::entry::{Entry, Params};
use crate::sched::policy::{
    DEFAULT, HhsAcdid, MinCompletionTime, Paper, Policy, PowerOfTwo, Value, lookup, registry,
};

/// A policy by name and parameters: what a configuration file or command line says. Build one
/// instance per cluster with [`PolicySpec::build`].
///
/// Written `name` or `name:key=value,key=value`; the names, their parameters and defaults are
/// those of [`registry`](fn@super::registry). The parameters are checked when the spec is
/// parsed, and again when it is built (a spec made by [`PolicySpec::paper`] is not checked
/// before).
///
/// ```
/// use cryptodispatch::sched::PolicySpec;
///
/// let spec: PolicySpec = "paper:alpha=0.3,beta=0.7".parse()?;
/// assert_eq!(spec, PolicySpec::paper(0.3, 0.7));
/// assert_eq!(spec.to_string(), "paper:alpha=0.3,beta=0.7");
/// assert_eq!("baseline".parse::<PolicySpec>()?, PolicySpec::hhs_acdid());
/// # Ok::<(), cryptodispatch::sched::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct PolicySpec {
    entry: &'static Entry,
    params: Params,
}

impl PolicySpec {
    /// The paper's weight W = α·v + β·r ([`Paper`]) with speed coefficient `alpha` and
    /// remaining-capacity coefficient `beta`, not yet checked.
    pub fn paper(alpha: f64, beta: f64) -> Self {
        let mut spec = PolicySpec::from(&Paper::ENTRY);
        spec.params.set("alpha", Value::Number(alpha));
        spec.params.set("beta", Value::Number(beta));
        spec
    }

    /// `paper` with its default weights, the paper's best (α = 0.05, β = 0.95): the policy of
    /// every comparison with the HHS-ACDID baseline.
    pub fn paper_defaults() -> Self {
        PolicySpec::from(&Paper::ENTRY)
    }

    /// Minimum completion time counting committed work ([`MinCompletionTime`]) among the nodes
    /// with room.
    pub fn mct() -> Self {
        PolicySpec::from(&MinCompletionTime::ENTRY)
    }

    /// The HHS-ACDID baseline ([`HhsAcdid`]).
    pub fn hhs_acdid() -> Self {
        PolicySpec::from(&HhsAcdid::ENTRY)
    }

    /// The power of two choices ([`PowerOfTwo`]), its random draws seeded with `seed`.
    pub fn p2c(seed: u64) -> Self {
        let mut spec = PolicySpec::from(&PowerOfTwo::ENTRY);
        spec.params.set("seed", Value::Integer(seed));
        spec
    }

    /// Every policy of the registry with its default parameters, in the registry's order.
    pub fn all() -> Vec<PolicySpec> {
        registry().iter().map(PolicySpec::from).collect()
    }

    /// The names [`FromStr`] accepts (aliases apart), in the registry's order.
    pub fn names() -> Vec<&'static str> {
        registry().iter().map(Entry::name).collect()
    }

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        self.entry.name()
    }

    /// The policy's registry entry.
    pub fn entry(&self) -> &'static Entry {
        self.entry
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
        self.entry.build(&self.params)
    }
}

impl From<&'static Entry> for PolicySpec {
    /// The entry's policy with its default parameters.
    fn from(entry: &'static Entry) -> Self {
        PolicySpec {
            entry,
            params: Params::defaults(entry.params()),
        }
    }
}

impl Default for PolicySpec {
    /// The service's default, [`DEFAULT`] (also parsed as `default`): `mct-wait`, chosen on a
    /// sampled space of workloads and reported on a held-out sample of it (docs/RESULTS.md
    /// §6). `paper` is [`PolicySpec::paper_defaults`].
    fn default() -> Self {
        PolicySpec::from(DEFAULT)
    }
}

impl PartialEq for PolicySpec {
    /// The same policy (names are unique in the registry) with the same parameter values.
    fn eq(&self, other: &Self) -> bool {
        self.entry.name() == other.entry.name() && self.params == other.params
    }
}

impl fmt::Debug for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PolicySpec")
            .field(&format_args!("{self}"))
            .finish()
    }
}

impl fmt::Display for PolicySpec {
    /// `name`, or `name:key=value,...` with every parameter, which parses back to the same
    /// spec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.entry.name())?;
        for (k, (name, value)) in self.params.iter().enumerate() {
            let sep = if k == 0 { ':' } else { ',' };
            write!(f, "{sep}{name}={value}")?;
        }
        Ok(())
    }
}

impl FromStr for PolicySpec {
    type Err = ConfigError;

    /// Parses `name` or `name:key=value,key=value`; names, aliases and keys in any case.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for an unknown name or parameter, or one given twice;
    /// [`ConfigError::BadPolicyParameter`] for a value that is not a number, or out of range;
    /// [`ConfigError::BadWeights`] for α or β out of range.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, written) = match s.split_once(':') {
            Some((n, p)) => (n.trim(), p),
            None => (s, ""),
        };
        let lower = name.to_ascii_lowercase();
        let mut written = Written::parse(&lower, written)?;
        let entry = lookup(&lower)
            .ok_or_else(|| ParseError::new("policy", name, PolicySpec::names().join(", ")))?;
        let mut spec = PolicySpec::from(entry);
        for param in entry.params() {
            if let Some(text) = written.take(param.name()) {
                // A number that does not parse is refused here, by name, rather than read as
                // NaN and refused as out of range.
                if matches!(param.default_value(), Value::Number(_)) && text.parse::<f64>().is_err()
                {
                    return Err(ConfigError::BadPolicyParameter {
                        policy: entry.name(),
                        message: format!("{} = {text:?} is not a number", param.name()),
                    });
                }
                spec.params.set(param.name(), param.parse(text)?);
            }
        }
        written.finish()?;
        spec.validate()?;
        Ok(spec)
    }
}

/// The `key=value` pairs written after a policy's name, taken as the entry reads its
/// parameters; whatever is left over is an unknown parameter.
struct Written<'a> {
    policy: String,
    values: Vec<(&'a str, &'a str)>,
}

impl<'a> Written<'a> {
    fn parse(policy: &str, written: &'a str) -> Result<Self, ConfigError> {
        let mut values = Vec::new();
        for p in written.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = p.split_once('=').ok_or_else(|| {
                ParseError::new("policy parameter", p, format!("key=value for {policy}"))
            })?;
            let k = k.trim();
            if values
                .iter()
                .any(|(seen, _): &(&str, &str)| seen.eq_ignore_ascii_case(k))
            {
                return Err(ParseError::new(
                    "policy parameter",
                    k,
                    format!("each parameter of {policy} once ({k} is repeated)"),
                )
                .into());
            }
            values.push((k, v.trim()));
        }
        Ok(Written {
            policy: policy.to_owned(),
            values,
        })
    }

    /// The first value written for `key` (in any case), removed.
    fn take(&mut self, key: &str) -> Option<&'a str> {
        let i = self
            .values
            .iter()
            .position(|(k, _)| k.eq_ignore_ascii_case(key))?;
        Some(self.values.remove(i).1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_names_are_errors() {
        assert_eq!(
            "paper".parse::<PolicySpec>().unwrap(),
            PolicySpec::paper_defaults()
        );
        assert_eq!(
            PolicySpec::paper_defaults(),
            PolicySpec::paper(Paper::DEFAULT_ALPHA, Paper::DEFAULT_BETA)
        );
        for name in ["default", "mct-wait", "Default"] {
            assert_eq!(name.parse::<PolicySpec>().unwrap(), PolicySpec::default());
        }
        assert_eq!(PolicySpec::default().to_string(), "mct-wait");
        assert_eq!("mct".parse::<PolicySpec>().unwrap(), PolicySpec::mct());
        assert_ne!(PolicySpec::mct(), PolicySpec::default());
        assert_eq!(
            "hhs-acdid".parse::<PolicySpec>().unwrap(),
            PolicySpec::hhs_acdid()
        );
        assert_eq!(
            "paper:alpha=0.3,beta=0.7".parse::<PolicySpec>().unwrap(),
            PolicySpec::paper(0.3, 0.7)
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
        for spec in [
            PolicySpec::default(),
            PolicySpec::paper_defaults(),
            PolicySpec::hhs_acdid(),
        ] {
            assert_eq!(spec.to_string().parse::<PolicySpec>().unwrap(), spec);
        }
        // A seed beyond 2^53 stays exact.
        let spec = PolicySpec::p2c(u64::MAX);
        assert_eq!(spec.to_string(), format!("p2c:seed={}", u64::MAX));
        assert_eq!(spec.to_string().parse::<PolicySpec>().unwrap(), spec);
    }

    #[test]
    fn aliases_case_and_parameter_errors() {
        for name in ["hhs_acdid", "Baseline", " HHS-ACDID "] {
            assert_eq!(name.parse::<PolicySpec>().unwrap(), PolicySpec::hhs_acdid());
        }
        assert_eq!(
            "Paper: Alpha = 0.3 , beta=0.7"
                .parse::<PolicySpec>()
                .unwrap(),
            PolicySpec::paper(0.3, 0.7)
        );
        assert_eq!(
            "paper:beta=0.5".parse::<PolicySpec>().unwrap(),
            PolicySpec::paper(Paper::DEFAULT_ALPHA, 0.5)
        );
        let parse_error = |s: &str| match s.parse::<PolicySpec>() {
            Err(ConfigError::Parse(p)) => p.what(),
            other => panic!("{s}: {other:?}"),
        };
        // A parameter given twice: the second is left over.
        assert_eq!(parse_error("paper:alpha=0.3,alpha=0.4"), "policy parameter");
        assert_eq!(parse_error("p2c:seed=-1"), "policy parameter value");
        assert_eq!(parse_error("p2c:seed=1.5"), "policy parameter value");
        assert!(matches!(
            "entropy:step=x".parse::<PolicySpec>(),
            Err(ConfigError::BadPolicyParameter {
                policy: "entropy",
                ..
            })
        ));
    }

    #[test]
    fn a_value_that_is_not_a_number_is_named_as_such() {
        for (spec, value) in [
            ("paper:alpha=abc", "abc"),
            ("paper:alpha=", ""),
            ("paper:alpha=0x1", "0x1"),
            ("paper:alpha=0.5:beta=1", "0.5:beta=1"),
            ("paper:beta=1,alpha=1e", "1e"),
        ] {
            let err = spec.parse::<PolicySpec>().unwrap_err();
            assert!(
                matches!(
                    err,
                    ConfigError::BadPolicyParameter {
                        policy: "paper",
                        ..
                    }
                ),
                "{spec}: {err:?}"
            );
            let text = err.to_string();
            assert!(
                text.contains(&format!("alpha = {value:?} is not a number")),
                "{spec}: {text}"
            );
            assert!(!text.contains("NaN"), "{spec}: {text}");
        }
        // NaN written as such is a number, out of range.
        assert!(matches!(
            "paper:alpha=NaN".parse::<PolicySpec>(),
            Err(ConfigError::BadWeights { .. })
        ));
    }

    #[test]
    fn a_parameter_given_twice_is_named_as_repeated() {
        for (spec, key) in [
            ("p2c:seed=1,seed=2", "seed"),
            ("paper:alpha=0.3,ALPHA=0.4", "ALPHA"),
        ] {
            let err = spec.parse::<PolicySpec>().unwrap_err();
            assert!(
                matches!(err, ConfigError::Parse(ref p) if p.what() == "policy parameter"),
                "{spec}: {err:?}"
            );
            let text = err.to_string();
            assert!(
                text.contains(&format!("({key} is repeated)")),
                "{spec}: {text}"
            );
        }
    }
}
