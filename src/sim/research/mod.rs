//! The research machinery the benchmark binary prints: the paper's experiments over grids of
//! settings, the kinds of work of the policy matrix, the exact optimum of small instances, the
//! matrix's and the sampled space's comparisons of every policy, and the statistics they report.
//!
//! Nothing here prints or starts threads (the cache of optima reads and writes the file it is
//! given): an experiment's independent points are run by a
//! [`PointRunner`](experiments::PointRunner) the caller chooses
//! ([`InTurn`](experiments::InTurn) runs them one after another; the benchmark binary spreads
//! them over threads), and results come back in the points' order, so they do not depend on how
//! the points were run.
//!
//! - [`experiments`]: the paper's experiments 1–4, `paper-adaptive` against the best fixed α,
//!   the settings of `cryptodispatch-bench policies`, and the mean, spread and round-by-round
//!   comparison of makespans;
//! - [`classes`]: the matrix's kinds of work, each a function of a seed;
//! - [`optimum`]: the least makespan of a small instance, by branch and bound;
//! - `milp` (the `milp` feature): the same as a mixed-integer program, the check on
//!   [`optimum`];
//! - [`matrix`]: every policy on every class, on a sample of the workload space, and on small
//!   instances against the optimum; a policy's standing over them; the cache of optima.

pub mod classes;
pub mod experiments;
pub mod matrix;
#[cfg(feature = "milp")]
pub mod milp;
pub mod optimum;
