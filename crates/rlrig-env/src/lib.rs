//! # rlrig-env
//!
//! Reinforcement-learning environments stepped in large batches, on every core, with
//! the dynamics of Gymnasium's reference implementations and results that do not
//! depend on the number of threads. No ML dependency.
//!
//! - [`env::Env`]: an environment as plain data (params, a small `Copy` state) and pure
//!   `reset`/`step`/`observe` functions.
//! - [`vector::SyncVecEnv`]: steps all envs per call into contiguous buffers, split
//!   across threads; [`vector::AsyncVecEnv`]: EnvPool-style `send`/`recv`.
//! - [`rng::Rng`]: counter-based random streams addressed by (seed, purpose, index).
//! - [`registry`]: Gymnasium ids, run-time dispatch; [`replay`]: replay from a state.

// Lane loops index several arrays in lockstep; iterator zips of five or more
// slices read worse and vectorise no better.
#![allow(clippy::needless_range_loop)]

pub mod env;
pub mod envs;
pub mod error;
pub mod games;
pub mod palette;
pub mod pool;
pub mod registry;
pub mod replay;
pub mod resize;
pub mod rng;
pub mod sample;
pub mod simd;
pub mod space;
pub mod trig;
pub mod vector;

/// Test support: how many random arguments a bit-for-bit test of a numeric function
/// checks, `release` in an optimised build and a tenth of that in a debug one (which
/// runs about ten times slower).
#[cfg(test)]
pub(crate) fn test_cases(release: u32) -> u32 {
    if cfg!(debug_assertions) {
        release / 10
    } else {
        release
    }
}

pub use env::{Action, ActionBuf, ActionFault, Env, ObsBuf, ObsElem, Transition};
pub use error::EnvError;
pub use registry::{ATARI_IDS, ENV_IDS, EnvSpec, EnvVisitor, make_async, make_sync, spec, visit};
pub use rng::{Purpose, Rng};
pub use sample::RandomActions;
pub use space::{Dtype, Space};
pub use vector::{
    AsyncBatch, AsyncVecEnv, AsyncVecEnvDyn, AutoReset, SyncVecEnv, VecConfig, VecEnvDyn,
    VecSnapshot,
};
