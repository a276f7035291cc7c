//! # rlrig-lab
//!
//! Looking at the machine and the run: [`probe`] says what hardware is there (absent
//! hardware is reported as absent, never as an error); [`verdict`] turns a run's stage
//! times into a breakdown and says which stage bounds it; [`suite`] and [`learn`] are
//! `rlrig bench suite` and `rlrig bench learn` with the files `rlrig compare` reads.

mod compare;
mod error;
pub mod learn;
pub mod metrics;
pub mod plot;
pub mod probe;
pub mod render;
pub mod suite;
pub mod throughput;
pub mod verdict;

pub use error::LabError;
