//! # rlrig-learn
//!
//! Everything that learns: the native CPU path for small networks ([`nn`]), the
//! optimiser ([`optim`]), running normalisation ([`normalize`]), the replay buffer
//! ([`buffer`]) and the algorithms ([`ppo`], [`offpolicy`]: DDPG, TD3, SAC).

// Minibatch and lane loops index several arrays in lockstep.
#![allow(clippy::needless_range_loop)]

pub mod alphazero;
pub mod backend;
pub mod buffer;
pub mod conv;
pub mod evolution;
pub mod mcts;
pub mod nn;
pub mod normalize;
pub mod offpolicy;
pub mod optim;
pub mod ppo;
pub mod run;
pub mod serve;
pub mod trainer;
pub mod vtrace;
