//! What the registry knows of a policy: its name and aliases, a one-line description, its
//! parameters with their defaults, and its constructor (docs/ALGORITHM.md §11).
//!
//! Each policy file declares its own [`Entry`] beside the policy (an associated `ENTRY`
//! constant), and its [`Policy::name`] returns the entry's name, so a name is written once.
//! The table of entries, [`registry`](fn@super::registry), is in `mod.rs`.

use std::fmt;

use crate::sched::error::ConfigError;
use crate::sched::policy::Policy;

/// A policy parameter's value.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// A real number.
    Number(f64),
    /// An unsigned integer (a random seed), kept exact.
    Integer(u64),
}

impl fmt::Display for Value {
    /// The value as [`PolicySpec`](crate::sched::PolicySpec) parses it back: a number in
    /// Rust's shortest round-trip form, an integer in decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(x) => write!(f, "{x}"),
            Value::Integer(n) => write!(f, "{n}"),
        }
    }
}

/// One parameter of a policy: its name, its default, and what it means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Param {
    name: &'static str,
    default: Value,
    meaning: &'static str,
}

impl Param {
    /// A real-valued parameter.
    pub(super) const fn number(name: &'static str, default: f64, meaning: &'static str) -> Self {
        Param {
            name,
            default: Value::Number(default),
            meaning,
        }
    }

    /// An unsigned integer parameter.
    pub(super) const fn integer(name: &'static str, default: u64, meaning: &'static str) -> Self {
        Param {
            name,
            default: Value::Integer(default),
            meaning,
        }
    }

    /// The name, as written in `policy:name=value`.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The value used when the parameter is not given.
    pub const fn default_value(&self) -> Value {
        self.default
    }

    /// What the parameter sets, in a few words.
    pub const fn meaning(&self) -> &'static str {
        self.meaning
    }

    /// Reads a value written for this parameter. `PolicySpec`'s parsing refuses a number that
    /// does not parse before it gets here; one that still did not would become NaN, which
    /// every policy's constructor refuses with its own range error.
    pub(super) fn parse(&self, text: &str) -> Result<Value, ConfigError> {
        match self.default {
            Value::Number(_) => Ok(Value::Number(text.parse().unwrap_or(f64::NAN))),
            Value::Integer(_) => text.parse().map(Value::Integer).map_err(|_| {
                crate::packet::ParseError::new(
                    "policy parameter value",
                    text,
                    "an unsigned integer",
                )
                .into()
            }),
        }
    }
}

/// The values of an entry's parameters, one for each in the entry's order: what its
/// constructor reads.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Params(Vec<(&'static str, Value)>);

impl Params {
    /// Every parameter at its default.
    pub(super) fn defaults(params: &[Param]) -> Self {
        Params(params.iter().map(|p| (p.name, p.default)).collect())
    }

    /// Sets parameter `name`, which the entry declares.
    pub(super) fn set(&mut self, name: &str, value: Value) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => unreachable!("policy parameter {name} is not declared by its entry"),
        }
    }

    /// The (name, value) pairs, in the entry's order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&'static str, Value)> + '_ {
        self.0.iter().copied()
    }

    fn get(&self, name: &str) -> Value {
        match self.0.iter().find(|(n, _)| *n == name) {
            Some(&(_, value)) => value,
            None => unreachable!("policy parameter {name} is not declared by its entry"),
        }
    }

    /// The real-valued parameter `name`.
    ///
    /// # Panics
    /// If the entry declares no real-valued parameter `name`: a constructor that does not
    /// match its entry (the registry's tests build every entry).
    pub(super) fn number(&self, name: &str) -> f64 {
        match self.get(name) {
            Value::Number(x) => x,
            other => unreachable!("policy parameter {name} = {other} is not a number"),
        }
    }

    /// The integer parameter `name`.
    ///
    /// # Panics
    /// As [`Params::number`].
    pub(super) fn integer(&self, name: &str) -> u64 {
        match self.get(name) {
            Value::Integer(n) => n,
            other => unreachable!("policy parameter {name} = {other} is not an integer"),
        }
    }
}

/// A policy's constructor: one fresh instance, for one cluster, from its parameter values.
pub(super) type Build = fn(&Params) -> Result<Box<dyn Policy>, ConfigError>;

/// One policy of the registry ([`registry`](fn@super::registry)): what
/// [`PolicySpec`](crate::sched::PolicySpec) needs to parse, print and build it, and what a
/// `--help` text shows of it.
pub struct Entry {
    pub(super) name: &'static str,
    pub(super) aliases: &'static [&'static str],
    pub(super) description: &'static str,
    pub(super) params: &'static [Param],
    pub(super) build: Build,
}

impl Entry {
    /// The policy's name: what [`PolicySpec`](crate::sched::PolicySpec) parses and prints,
    /// and what [`Policy::name`] returns.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Other names that parse to this policy (kept for older configurations).
    pub const fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }

    /// What the policy does, in one line.
    pub const fn description(&self) -> &'static str {
        self.description
    }

    /// The parameters, in the order they are printed.
    pub const fn params(&self) -> &'static [Param] {
        self.params
    }

    /// Whether `name` (in lower case) is this policy's name or one of its aliases.
    pub(super) fn is_called(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }

    pub(super) fn build(&self, params: &Params) -> Result<Box<dyn Policy>, ConfigError> {
        (self.build)(params)
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("aliases", &self.aliases)
            .field("description", &self.description)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Entry {
    /// For a `--help` text: the name, its aliases and the description on one line; with `{:#}`,
    /// then one more line for each parameter with its default and meaning:
    ///
    /// ```text
    /// p2c: of two random nodes with room, the one with less queued work (power of two choices)
    ///     seed=1: seed of the random draws
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)?;
        if !self.aliases.is_empty() {
            write!(f, " (or {})", self.aliases.join(", "))?;
        }
        write!(f, ": {}", self.description)?;
        if f.alternate() {
            for p in self.params {
                write!(f, "\n    {}={}: {}", p.name, p.default, p.meaning)?;
            }
        }
        Ok(())
    }
}
