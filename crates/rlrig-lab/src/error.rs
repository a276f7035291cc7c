//! The one error type of rlrig-lab: each variant a kind of failure, its message naming
//! what and where.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LabError {
    /// A run or measurement that could not be built (its config, the env, memory).
    #[error(transparent)]
    Learn(#[from] rlrig_learn::LearnError),
    #[error("env: {0}")]
    Env(#[from] rlrig_env::EnvError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A results file that is not the kind its reader expects.
    #[error("{path}: not a {kind} result{why}")]
    NotAResult {
        path: PathBuf,
        kind: &'static str,
        /// ": the parser's error" or " (suite 'other')".
        why: String,
    },
    /// The flags select nothing, or something the lab cannot score; the message says
    /// what to pass.
    #[error("{0}")]
    Selection(String),
    /// A run's metrics.csv lacks a column the reader needs.
    #[error("metrics.csv: no column '{0}'")]
    MissingColumn(String),
    /// Writing a plot failed.
    #[error("{path}: {why}")]
    Plot { path: PathBuf, why: String },
    /// Drawing a frame failed, or the state is not a frame of its env.
    #[error("{0}")]
    Frame(String),
    /// A `--metrics-addr` that is no address.
    #[error("--metrics-addr '{addr}': {why}")]
    Address { addr: String, why: String },
    /// Serialising a result failed (a bug: the values are ours).
    #[error("writing {what}: {why}")]
    Encode { what: &'static str, why: String },
}

impl LabError {
    /// A [`LabError::Frame`] from a drawing error.
    pub(crate) fn frame<E: std::fmt::Display>(e: E) -> LabError {
        LabError::Frame(e.to_string())
    }

    /// A [`LabError::Encode`] from a serialising error.
    pub(crate) fn encode<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> LabError {
        move |e| LabError::Encode {
            what,
            why: e.to_string(),
        }
    }
}
