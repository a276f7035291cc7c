//! # rlrig-learn
//!
//! Everything that learns: the native CPU path for small networks ([`nn`]), the
//! optimiser, and the algorithms.

pub mod nn;
