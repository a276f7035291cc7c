//! Errors for user mistakes: each names the env, the index and the value involved.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum EnvError {
    #[error("unknown env id '{id}'{hint}; known ids: {known}")]
    UnknownEnv {
        id: String,
        /// A suggestion such as " (did you mean 'CartPole-v1'?)", or empty.
        hint: String,
        known: String,
    },
    #[error("{env}: expected {expected} action values ({num_envs} envs x {dim}), got {got}")]
    ActionLength {
        env: &'static str,
        expected: usize,
        num_envs: usize,
        dim: usize,
        got: usize,
    },
    #[error("{env}: takes {expected} actions, got {got} actions")]
    ActionKind {
        env: &'static str,
        expected: &'static str,
        got: &'static str,
    },
    #[error("{env}: action for env {index} is {value}, outside Discrete({n}) (valid: 0..={max})", max = *n as i64 - 1)]
    ActionOutOfRange {
        env: &'static str,
        index: usize,
        value: i64,
        n: u32,
    },
    #[error(
        "{env}: action for env {index}, component {component}, is {value}: actions must be finite"
    )]
    ActionNotFinite {
        env: &'static str,
        index: usize,
        component: usize,
        value: f32,
    },
    #[error("{env}: bad state: {why}")]
    BadState { env: &'static str, why: String },
    #[error("{env}: env ids must be below {num_envs}, got {index} at position {position}")]
    EnvIndex {
        env: &'static str,
        index: usize,
        num_envs: usize,
        position: usize,
    },
    #[error("{env}: env {index} is already in flight; recv() it before sending it again")]
    InFlight { env: &'static str, index: usize },
    #[error(
        "{env}: recv() would wait forever: {in_flight} envs in flight, batch size {batch_size}"
    )]
    NothingInFlight {
        env: &'static str,
        in_flight: usize,
        batch_size: usize,
    },
    #[error("invalid executor configuration: {0}")]
    Config(String),
    #[error("{env}: parameter {key}={value}: {why}")]
    BadParam {
        env: &'static str,
        key: String,
        value: String,
        why: String,
    },
}
