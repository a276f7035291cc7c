//! The `rlrig` command: argument parsing and wiring only.

mod bench;
mod cli_envs;

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
    /// Measure throughput.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Envs(a) => cli_envs::envs(a),
        Command::Replay(a) => cli_envs::replay(a),
        Command::Bench(b) => bench::run(b),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // User mistakes end here: one clear message, no backtrace.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
