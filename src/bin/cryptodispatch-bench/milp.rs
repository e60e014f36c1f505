//! How `policies --matrix --optimum` finds the exact optimum: the library's branch and bound
//! (`sim::research::optimum`) or its mixed-integer program (`sim::research::milp`), the check.

use cryptodispatch::sim::model::NodeModel;
use cryptodispatch::sim::research::milp::milp_makespan;
use cryptodispatch::sim::research::optimum::optimal_makespan;
use cryptodispatch::sim::trace::Trace;

/// How the exact optimum is found (`policies --matrix --optimum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Solver {
    /// Branch and bound over the assignment (`sim::research::optimum`): milliseconds per
    /// instance.
    Search,
    /// The mixed-integer program ([`milp_makespan`]): seconds to hours per instance.
    Milp,
}

impl Solver {
    /// The least makespan of `trace` on `nodes`, from time 0, by this solver.
    ///
    /// # Errors
    /// As the solver's function.
    pub fn solve(self, trace: &Trace, nodes: &[NodeModel], unit_len: u64) -> Result<f64, String> {
        match self {
            Solver::Search => optimal_makespan(trace, nodes, unit_len)
                .ok_or_else(|| "the exact optimum: packets and no node".to_owned()),
            Solver::Milp => milp_makespan(trace, nodes, unit_len),
        }
    }

    /// The solver as the matrix's report names it.
    pub fn describe(self) -> &'static str {
        match self {
            Solver::Search => "branch and bound over the assignment",
            Solver::Milp => "MILP, good_lp + microlp",
        }
    }
}
