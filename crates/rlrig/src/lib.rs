//! The `rlrig` command: argument parsing and wiring only. A library so that the
//! Python package runs the same commands in-process ([`embed`]); `src/main.rs` is the
//! binary.

/// `println!` that returns an error instead of panicking when stdout is gone
/// (e.g. `rlrig ... | head -1`); `main` treats a broken pipe as a normal exit.
/// A line of the command's report on stdout (nothing while an embedding caller asked
/// for silence: `rlrig.train(quiet=True)`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if !$crate::embed::silent() {
            writeln!(std::io::stdout(), $($arg)*)?
        }
    }};
}

mod bench;
mod bench_learn;
mod cli_envs;
mod config;
pub mod embed;
mod eval;
mod lab;
mod mpi_support;
mod pack;
mod probe;
mod train;
mod train_gpu;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rlrig",
    version,
    about = "Reinforcement learning at the full speed of the hardware you have",
    long_about = "Reinforcement learning at the full speed of the hardware you have.\n\n\
        Environments are stepped in large batches on every core, with Gymnasium's dynamics,\n\
        and give bit-identical results whatever the thread count."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the environment ids with their observation and action spaces.
    Envs(cli_envs::EnvsArgs),
    /// Replay actions from a given internal state; prints one JSON object per step.
    Replay(cli_envs::ReplayArgs),
    /// Train an agent; writes a run directory (config, metrics, TensorBoard, checkpoints).
    ///
    /// Ctrl-C (SIGINT) or SIGTERM stops a run after its current iteration (collection step
    /// for ddpg/td3/sac, generation for es/ga on every MPI rank): it writes a checkpoint,
    /// prints where to `--resume` from and exits with 130 (SIGINT) or 143 (SIGTERM); the
    /// resumed run ends bit-identical to an uninterrupted one. A second Ctrl-C exits at
    /// once. A run whose buffers would not fit in the available memory is refused before
    /// it starts, naming the flag to lower.
    #[command(subcommand)]
    Train(train::TrainCommand),
    /// Evaluate the newest checkpoint of a run with the greedy policy.
    Eval(eval::EvalArgs),
    /// Render greedy episodes of a run's newest checkpoint to an animated GIF.
    Play(eval::PlayArgs),
    /// Measure throughput.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// What hardware is here: CPU, caches, memory, NVIDIA (NVML) and AMD (sysfs) GPUs.
    Probe(probe::ProbeArgs),
    /// Compare `bench suite` (or `bench learn`) results side by side, with ratios (and a
    /// PNG chart).
    Compare(lab::CompareArgs),
    /// Draw learning curves (return vs steps and vs wall time) of runs to a PNG.
    Plot(lab::PlotArgs),
}

/// Worker threads when the user names none: every logical core.
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The whole `rlrig` command, from the process's arguments.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Envs(a) => cli_envs::envs(a).map(|()| ExitCode::SUCCESS),
        Command::Replay(a) => cli_envs::replay(a).map(|()| ExitCode::SUCCESS),
        // A run stopped by SIGINT/SIGTERM (checkpoint written) exits with the shell's
        // code for that signal: 130 or 143.
        Command::Train(t) => train::train(t, &std::env::args_os().skip(1).collect::<Vec<_>>())
            .map(|stop| stop.map_or(ExitCode::SUCCESS, |s| ExitCode::from(s.exit_code()))),
        Command::Eval(a) => eval::eval(a).map(|()| ExitCode::SUCCESS),
        Command::Play(a) => eval::play(a).map(|()| ExitCode::SUCCESS),
        Command::Bench(b) => bench::run(b)
            .map(|stop| stop.map_or(ExitCode::SUCCESS, |s| ExitCode::from(s.exit_code()))),
        Command::Probe(a) => probe::run(a).map(|()| ExitCode::SUCCESS),
        Command::Compare(a) => lab::compare(a).map(|()| ExitCode::SUCCESS),
        Command::Plot(a) => lab::plot(a).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            // The reader went away (`| head`): not an error of ours.
            ExitCode::SUCCESS
        }
        Err(e) => {
            // User mistakes end here: one clear message, no backtrace.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
