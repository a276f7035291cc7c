//! The `rlrig` command run inside another program (the Python package's
//! `rlrig.train`): the same parsing, presets, drivers, run directory and output as
//! the binary, with the caller owning the stop request instead of signal handlers
//! (a Python interpreter keeps its own SIGINT handler and raises KeyboardInterrupt).

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use rlrig_learn::stop::{Stop, StopFlag};

/// The stop flag of the embedded run in progress, if any.
static STOP: Mutex<Option<StopFlag>> = Mutex::new(None);
/// The run directory the last run resolved (`--run-dir` or the default).
static RUN_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Whether the embedded run in progress prints its report (set for the run's
/// duration; one embedded run at a time, so one flag).
static SILENT: AtomicBool = AtomicBool::new(false);

/// True while an embedded run asked for no report on stdout; always false in the
/// binary.
pub(crate) fn silent() -> bool {
    SILENT.load(Ordering::Relaxed)
}

/// The embedding caller's stop flag, when a run is embedded.
pub(crate) fn stop_flag() -> Option<StopFlag> {
    STOP.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Records `dir` as the run's directory and returns it.
pub(crate) fn remember(dir: PathBuf) -> PathBuf {
    *RUN_DIR.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.clone());
    dir
}

/// What an embedded `rlrig train` ended with.
pub struct Trained {
    /// The run directory it wrote.
    pub run_dir: Option<PathBuf>,
    /// Set when `stop` ended the run early (a checkpoint was written).
    pub stopped: Option<Stop>,
}

/// Runs `rlrig train ARGS...` (`args` without the program name and `train`) with
/// `stop` as its stop request; `silent`: no progress bar and no report on stdout
/// (errors still come back as the result). `--seeds`
/// is refused: it packs runs as child processes of the `rlrig` binary, which an
/// embedding program is not.
pub fn train(args: &[String], stop: StopFlag, silent: bool) -> Result<Trained> {
    let argv: Vec<std::ffi::OsString> = std::iter::once("train".into())
        .chain(args.iter().map(Into::into))
        .chain((silent && !args.iter().any(|a| a == "--quiet")).then(|| "--quiet".into()))
        .collect();
    let cmd = crate::train::parse(&argv)?;
    if args
        .iter()
        .any(|a| a == "--seeds" || a.starts_with("--seeds="))
    {
        anyhow::bail!(
            "--seeds packs runs as processes of the rlrig binary: run `rlrig train ... --seeds LIST` from a shell, or one rlrig.train per seed"
        );
    }
    {
        let mut slot = STOP.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            anyhow::bail!(
                "another rlrig train is running in this process: one at a time (the run directory and the stop request are per process)"
            );
        }
        *slot = Some(stop);
    }
    *RUN_DIR.lock().unwrap_or_else(|e| e.into_inner()) = None;
    SILENT.store(silent, Ordering::Relaxed);
    let result = crate::train::train(cmd, &argv);
    SILENT.store(false, Ordering::Relaxed);
    *STOP.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let run_dir = RUN_DIR.lock().unwrap_or_else(|e| e.into_inner()).take();
    Ok(Trained {
        run_dir,
        stopped: result?,
    })
}
