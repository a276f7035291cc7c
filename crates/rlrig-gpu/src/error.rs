//! The one error type of rlrig-gpu: no device, a device that failed, a kernel that does
//! not compile, and what the device path does not run (yet), each named.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum GpuError {
    /// No adapter, or the device could not be opened: the message says what to install.
    #[error("{0}")]
    NoDevice(String),
    /// Waiting for the device or reading its memory back failed.
    #[error("GPU: {0}")]
    Device(String),
    /// A device kernel did not compile (a bug in rlrig).
    #[error("device kernel does not compile: {0}")]
    Kernel(String),
    /// A config, env, size or argument the device path does not take, named.
    #[error("{0}")]
    Unsupported(String),
    #[error("env: {0}")]
    Env(#[from] rlrig_env::EnvError),
    /// A config that no path runs.
    #[error(transparent)]
    Config(#[from] rlrig_learn::LearnError),
}
