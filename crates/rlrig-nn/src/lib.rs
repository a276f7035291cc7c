//! # rlrig-nn
//!
//! The network layer of rlrig: what a learner trains, and where.
//!
//! - [`backend`]: the [`backend::NetBackend`] interface the algorithms of `rlrig-learn`
//!   are written against (networks sharing one flat parameter vector, their gradients
//!   and the optimiser, living where the arithmetic runs), and [`backend::Native`], the
//!   CPU implementation: data-parallel over fixed chunks of rows, so that the thread
//!   count (and the MPI rank count, through [`collective`]) never changes a bit.
//! - [`nn`]: multilayer perceptrons with a fused forward and backward pass, and the
//!   matrix kernel for RL's small shapes; [`conv`]: convolutional towers (MinAtar's and
//!   Atari's networks) on the same parameter layout.
//! - [`optim`]: Adam, RMSprop and gradient clipping over flat slices.
//!
//! `rlrig-burn` implements [`backend::NetBackend`] on Burn's devices with this crate
//! alone, so the GPU path builds without the learners, and the learners without Burn.

// Minibatch and lane loops index several arrays in lockstep.
#![allow(clippy::needless_range_loop)]

pub mod backend;
pub mod collective;
pub mod conv;
pub mod nn;
pub mod optim;

/// What building a backend can refuse. `rlrig-learn`'s `LearnError` takes each variant
/// as its own of the same name and message.
#[derive(Debug, thiserror::Error)]
pub enum NnError {
    /// A layout or setting out of range, or values that do not go together; the
    /// message names it.
    #[error("{0}")]
    Config(String),
    /// A network backend (a Burn device, the GPU) could not be built or take the weights.
    #[error("backend: {0}")]
    Backend(String),
}
