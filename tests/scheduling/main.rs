//! The scheduler core, its policies and the simulator: exact scenarios, property tests, the
//! policy registry, and the benchmark binary's policy experiments. One test binary for the
//! area, its files one concern each.

#[path = "../common/mod.rs"]
mod common;

mod adaptive;
mod classic;
mod mct_wait;
#[cfg(feature = "milp")]
mod optimum;
mod props;
mod registry;
mod research;
mod scenarios;
mod seeds;
mod sim;
mod space;
mod tenants;
