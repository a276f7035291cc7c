//! # rlrig-learn
//!
//! Everything that learns: the native CPU path for small networks ([`nn`]), the
//! optimiser ([`optim`]), running normalisation ([`normalize`]), the replay buffer
//! ([`buffer`]) and the algorithms ([`ppo`], [`offpolicy`]: DDPG, TD3, SAC).

// Minibatch and lane loops index several arrays in lockstep.
#![allow(clippy::needless_range_loop)]

/// Evaluation, fitness and recorded episodes end after this many steps. Envs with a
/// time limit end sooner; the MinAtar games have none (as the `minatar` package), and a
/// policy can stall in them forever (Seaquest's sub waiting at the surface, a Breakout
/// paddle that never misses), which would hang an evaluation. gymnax cuts its MinAtar
/// episodes at 1,000 steps (Freeway 2,500); this cap only guards against the stall.
/// Applied as the executors' `episode_cap`, so capped episodes end truncated.
pub const MAX_EVAL_STEPS: u32 = 10_000;

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
