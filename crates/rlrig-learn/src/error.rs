//! The one error type of rlrig-learn: each variant is a kind of failure a caller can
//! tell apart (the user's configuration, the env, a run directory that does not fit, the
//! machine), and its message names what and where.

use std::path::PathBuf;

use thiserror::Error;

use crate::memory::human;

#[derive(Debug, Error)]
pub enum LearnError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file that is not what it claims to be: a failed checksum, a truncated or
    /// unparsable file.
    #[error("{path}: {why}")]
    Corrupt { path: PathBuf, why: String },
    /// A configuration value out of range, or values that do not go together; the
    /// message names the key.
    #[error("{0}")]
    Config(String),
    /// An unknown env id, parameter or value.
    #[error("env: {0}")]
    Env(#[from] rlrig_env::EnvError),
    /// A path given as a run directory that is none.
    #[error("{0}: no such run directory")]
    NoRun(PathBuf),
    /// A run directory, checkpoint or saved policy that does not fit what reads it (another
    /// algorithm, env, network shape or format version).
    #[error("{0}")]
    Mismatch(String),
    /// The run needs more memory than this machine has available.
    #[error(
        "{what} needs about {} of memory ({parts}), but this machine has {} available: lower {lower}",
        human(*need),
        human(*available)
    )]
    Memory {
        what: String,
        need: f64,
        available: f64,
        /// The large parts, "name: size; ...".
        parts: String,
        /// The flags that lower it.
        lower: String,
    },
    /// A network backend (a Burn device, the GPU) could not be built or take the weights.
    #[error("backend: {0}")]
    Backend(String),
    /// Something rlrig does not do (yet), named.
    #[error("{0}")]
    Unsupported(String),
    /// Serialising a checkpoint or export failed (a bug: the values are ours).
    #[error("writing {what}: {why}")]
    Encode { what: &'static str, why: String },
}

impl From<rlrig_nn::NnError> for LearnError {
    fn from(e: rlrig_nn::NnError) -> Self {
        match e {
            rlrig_nn::NnError::Config(m) => LearnError::Config(m),
            rlrig_nn::NnError::Backend(m) => LearnError::Backend(m),
        }
    }
}

impl LearnError {
    /// An [`LearnError::Encode`] from any displayable error.
    pub(crate) fn encode<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> LearnError {
        move |e| LearnError::Encode {
            what,
            why: e.to_string(),
        }
    }
}
