//! # rlrig-learn
//!
//! Everything that learns: the native CPU path for small networks ([`nn`]), the
//! optimiser ([`optim`]), running normalisation ([`normalize`]) and the algorithms
//! ([`ppo`]).

// Minibatch and lane loops index several arrays in lockstep.
#![allow(clippy::needless_range_loop)]

pub mod nn;
pub mod normalize;
pub mod optim;
pub mod ppo;
pub mod run;
pub mod trainer;
