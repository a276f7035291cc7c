//! `rlrig train ...`: the subcommands and flags, shared helpers, dispatch. Each family
//! of learners has its file beside this one; `crate::config` resolves their configs.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::default_threads;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use rlrig_learn::backend::BackendMaker;
use rlrig_learn::dqn::Dqn;
use rlrig_learn::driver::{self, TrainOptions};

use crate::config::{
    Sources, int_flags, resolve_alphazero, resolve_config, resolve_dqn, resolve_from,
    resolve_offpolicy,
};
use rlrig_learn::evolution::{EvoConfig, Method};
use rlrig_learn::offpolicy::{Algo, OffPolicy};
use rlrig_learn::ppo::{Ppo, PpoConfig};

use rlrig_learn::stop::{Stop, StopFlag};

mod alphazero;
mod evolution;
mod learners;
pub use alphazero::AzArgs;
use alphazero::train_alphazero_cli;
pub use evolution::EvoArgs;
use evolution::train_evolution_cli;
use learners::{train_ppo_cli, train_replay_cli};

/// Ctrl-C and SIGTERM stop a training run and keep its work: the first signal asks the
/// driver to finish the iteration in progress, write a checkpoint and print the summary
/// (exit 130 or 143); a second one exits at once with the same code, leaving the last
/// checkpoint written (checkpoints are written atomically).
fn stop_on_signals() -> Result<StopFlag> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Some(stop) = crate::embed::stop_flag() {
        // Embedded (the Python package): the caller turns its own Ctrl-C into a stop.
        return Ok(stop);
    }
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, OnceLock};
    // Installed once per process: `bench learn` trains cell after cell in one process,
    // and every cell answers the same signals.
    static INSTALLED: OnceLock<StopFlag> = OnceLock::new();
    if let Some(stop) = INSTALLED.get() {
        return Ok(stop.clone());
    }
    let stop = StopFlag::new();
    let seen = Arc::new(AtomicBool::new(false));
    // A run of `--seeds` may get one stop twice (its launcher passes it on): it always
    // finishes at a checkpoint, and the launcher is where a second Ctrl-C ends things.
    let packed = std::env::var_os(crate::pack::PACKED_RUN).is_some();
    for sig in [SIGINT, SIGTERM] {
        // In this order: a signal that finds `seen` already set exits; the first sets it.
        if !packed {
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&seen))
                .context("installing the SIGINT/SIGTERM handlers")?;
        }
        signal_hook::flag::register(sig, Arc::clone(&seen))
            .context("installing the SIGINT/SIGTERM handlers")?;
        signal_hook::flag::register_usize(sig, Arc::clone(stop.signal_slot()), sig as usize)
            .context("installing the SIGINT/SIGTERM handlers")?;
    }
    Ok(INSTALLED.get_or_init(|| stop).clone())
}

/// The run directory: `--run-dir`, or `runs/<env>-<algo>-seed<seed>`.
fn run_dir_for(
    given: &Option<PathBuf>,
    env: &str,
    algo: impl std::fmt::Display,
    seed: u64,
) -> PathBuf {
    crate::embed::remember(given.clone().unwrap_or_else(|| {
        PathBuf::from(format!("runs/{}-{algo}-seed{seed}", env.replace('/', "-")))
    }))
}

/// The lines a run of `algo` ends with: where it was `stopped`, what stopped it, where
/// (`at`) and how to go on; then its directory. Returns `stopped`, the train command's
/// result.
fn end_run(
    stopped: Option<Stop>,
    at: &str,
    algo: &str,
    run_dir: &std::path::Path,
) -> Result<Option<Stop>> {
    if let Some(stop) = stopped {
        outln!(
            "interrupted by {} {at}: checkpoint written; continue with `rlrig train {algo} --run-dir {} --resume`",
            stop.signal_name(),
            run_dir.display()
        );
    }
    outln!("run directory: {}", run_dir.display());
    Ok(stopped)
}

/// "evaluation{of} over N episodes: mean return M ± S", or why there is none (stopped
/// early, or `--eval-episodes 0`); `of` names what was evaluated (" of the centre"), or
/// is empty.
fn eval_line(eval: &Option<rlrig_learn::eval::EvalSummary>, of: &str, stopped: bool) -> String {
    match eval {
        Some(e) => format!(
            "evaluation{of} over {} episodes: mean return {:.1} ± {:.1}, length {:.1}",
            e.episodes, e.mean_return, e.std_return, e.mean_length
        ),
        None if stopped => format!(
            "evaluation{of}: skipped (stopped early; `rlrig eval --run DIR` evaluates the checkpoint)"
        ),
        None => format!(
            "evaluation{of}: none (--eval-episodes 0; `rlrig eval --run DIR` evaluates the checkpoint)"
        ),
    }
}

#[derive(Subcommand)]
pub enum TrainCommand {
    /// Proximal Policy Optimization (CleanRL's defaults; per-env presets).
    ///
    /// Deterministic: the same config gives bit-identical metrics.csv learning columns and
    /// weights whatever --threads is.
    Ppo(PpoArgs),
    /// Synchronous advantage actor-critic (Stable-Baselines3's defaults).
    ///
    /// 8 envs x 5 steps, RMSprop, n-step returns. Runs on PPO's machinery with one
    /// gradient step per rollout; same run directory, checkpoints and determinism as ppo.
    A2c(PpoArgs),
    /// IMPALA: actor threads collecting with a stale policy while the learner
    /// updates, corrected with V-trace.
    ///
    /// Default (deterministic) mode: rollouts are collected with the parameters of
    /// `policy_lag` updates ago (default 1): an actor thread collects the next rollout
    /// while the learner updates on the last one, and the learner computes V-trace
    /// targets and advantages (rho_bar = c_bar = 1) with its current parameters; A2C's
    /// settings otherwise. The lag follows a fixed schedule, so runs are bit-identical
    /// whatever --threads, and a killed run resumes exactly.
    ///
    /// Asynchronous mode (`--set actors=N --set policy_lag=0`): N actor threads, each
    /// with its own num_envs envs, collect with whatever parameters are newest and the
    /// learner takes rollouts as they arrive. NOT reproducible: results depend on
    /// timing. Checkpoints hold actor 0's envs; the other actors' episodes restart on
    /// --resume.
    Impala(PpoArgs),
    /// Deep Deterministic Policy Gradient, continuous actions (CleanRL's defaults).
    ///
    /// Deterministic at any --threads; checkpoints hold the replay buffer, so a resumed
    /// run ends like an uninterrupted one (set checkpoint_buffer=false for smaller
    /// checkpoints; a resumed run then refills the buffer and differs).
    Ddpg(PpoArgs),
    /// Twin Delayed DDPG (Fujimoto et al.), continuous actions (CleanRL's defaults).
    ///
    /// Deterministic at any --threads; checkpoints hold the replay buffer (see ddpg).
    Td3(PpoArgs),
    /// Soft Actor-Critic with automatic entropy tuning (CleanRL's defaults).
    ///
    /// Deterministic at any --threads; checkpoints hold the replay buffer (see ddpg).
    /// Collect with many envs and trade them for updates with `--set utd_ratio=R`.
    Sac(PpoArgs),
    /// Deep Q-Network, discrete actions (CleanRL's defaults; presets from RL Baselines3
    /// Zoo for CartPole-v1, Acrobot-v1 and LunarLander-v3).
    ///
    /// Epsilon-greedy collection, a replay buffer, a target network; `--set
    /// double_q=true` for the double-DQN target, `--set loss=huber` and
    /// `max_grad_norm=10` for SB3's loss. Deterministic at any --threads; checkpoints
    /// hold the replay buffer (see ddpg).
    Dqn(PpoArgs),
    /// AlphaZero with batched tree search on a board game (ConnectFour).
    ///
    /// Every simulation step evaluates one leaf of each of --games concurrent games in a
    /// single network call, so a small network keeps the cores busy. Deterministic for a
    /// seed; checkpoints hold the network, Adam, the replay buffer and the games in
    /// flight, so a resumed run ends like an uninterrupted one.
    Alphazero(AzArgs),
    /// OpenAI evolution strategies (mirrored sampling, centred ranks, Adam).
    ///
    /// Members are evaluated in parallel on --threads (and MPI ranks under `mpirun`,
    /// built with `--features mpi`); every draw is keyed by (seed, generation, member),
    /// so results are bit-identical for any thread or rank count.
    Es(EvoArgs),
    /// Genetic algorithm (Such et al. 2017); --prune evolves connection masks.
    ///
    /// Truncation selection, Gaussian mutation, elitism with re-evaluation; --prune
    /// evolves the connection mask of a fixed network instead. Bit-identical for any
    /// thread count and any number of MPI ranks (`mpirun -n K`, built with
    /// `--features mpi`).
    Ga(EvoArgs),
}

/// The flags every `rlrig train` subcommand shares: its seed, where the run's directory
/// is and where its config comes from.
#[derive(Args)]
pub struct RunFlags {
    /// Seed of every random stream of the run (default: the config file's, else 1).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// TOML file with any hyperparameters (see a run's config.toml for every key).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Override one hyperparameter, e.g. `--set learning_rate=3e-4` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,
    /// Run directory (default: runs/<env>-<algo>-seed<seed>).
    #[arg(long)]
    pub(crate) run_dir: Option<PathBuf>,
    /// Continue the run in --run-dir from its newest intact checkpoint.
    #[arg(long)]
    pub(crate) resume: bool,
    /// No progress bar.
    #[arg(long)]
    pub(crate) quiet: bool,
}

/// The env a run trains on, with its parameters.
#[derive(Args)]
pub struct EnvFlags {
    /// Environment id (default: the algorithm's, e.g. CartPole-v1 for ppo, es and ga,
    /// Pendulum-v1 for ddpg/td3/sac; or the config file's `env`).
    #[arg(long = "env")]
    pub(crate) id: Option<String>,
    /// Env parameter, as `gym.make(id, KEY=VALUE)` (repeatable), e.g.
    /// `--env-arg max_episode_steps=200` or Acrobot's `--env-arg fast_trig=true`;
    /// `rlrig envs` lists each env's keys. Kept in the run's config (`[env_args]`), so
    /// --resume, eval and play use the same env.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", value_parser = crate::cli_envs::parse_env_arg)]
    pub(crate) args: Vec<(String, String)>,
}

/// The flags of `rlrig train ppo|a2c|impala|ddpg|td3|sac|dqn`.
#[derive(Args)]
pub struct PpoArgs {
    #[command(flatten)]
    pub(crate) env: EnvFlags,
    /// Environment steps to train for.
    #[arg(long)]
    pub(crate) total_steps: Option<u64>,
    /// Environments stepped together (a hyperparameter: it changes the results).
    #[arg(long)]
    pub(crate) num_envs: Option<usize>,
    /// Worker threads for env stepping and the learner's updates, one pool shared by
    /// both (results do not depend on it: batches are split into chunks whose count
    /// depends on the rows only, and summed in order). Idle workers spin briefly
    /// before sleeping; set RLRIG_SPIN_US=0 on a machine shared with other work.
    /// Under `mpirun -n K` (built with `--features mpi`) the K ranks, each with its own
    /// --threads, split every backward pass's chunks (and, for ppo and a2c, the envs:
    /// each rank steps num_envs / K of them) and gather them: the same bits as one
    /// process (rank 0 writes the run directory; asynchronous IMPALA actors and
    /// devices other than cpu are refused).
    #[arg(long, default_value_t = default_threads())]
    pub(crate) threads: usize,
    /// Where the networks run: `cpu` (the native path, fastest for small networks),
    /// `burn-cpu` (Burn's CPU backend) or `wgpu` (any Vulkan/Metal/DX12 GPU through
    /// Burn). Burn devices need a build with `--features burn`; PPO, A2C, DDPG, TD3,
    /// SAC and DQN run on them. `gpu`: the whole PPO loop on the GPU (envs, rollout,
    /// updates; build with `--features gpu`; CartPole-v1, Acrobot-v1 and MountainCar-v0,
    /// without observation or reward normalisation, for now); with --seeds every
    /// seed trains in the same kernels. Device runs write weights and metrics but do
    /// not checkpoint or resume yet.
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub(crate) device: Device,
    /// With `--device gpu`: how the kernels are laid out, `SPLITxROWS` plus `u` for
    /// written-out products (e.g. `4x16`, `2x8u`): SPLIT threads per hidden unit, ROWS
    /// minibatch rows per pass. Default: the fastest measured for the run count
    /// (BENCHMARKS.md; `cargo run --release -p rlrig-gpu --example sweep` measures
    /// them on your GPU). Layouts change the last bits of the results, not what is
    /// learned.
    #[arg(long, value_name = "LAYOUT")]
    pub(crate) gpu_layout: Option<String>,
    /// Train these seeds side by side, e.g. `1-8` or `1,5,9`, each in its own run
    /// directory under --run-dir (default runs/<env>-<algo>-seeds<first>-<last>), with
    /// one summary (seeds.json) at the end. On the CPU the runs are packed onto the
    /// cores: --jobs at a time, --threads / --jobs threads each. With `ppo --device gpu`
    /// all seeds train in the same kernels. Each seed's result equals that seed trained
    /// alone (on the same device).
    #[arg(long, value_name = "LIST", value_parser = crate::train_gpu::seed_list)]
    pub(crate) seeds: Option<crate::train_gpu::SeedList>,
    /// With --seeds on the CPU: runs at a time (default: one per --threads, at most one
    /// per seed).
    #[arg(long, value_name = "N", requires = "seeds")]
    pub(crate) jobs: Option<usize>,
    /// With --seeds on the CPU: train every seed once per value, as `--set KEY=VALUE`
    /// (repeatable: every combination), e.g. `--sweep learning_rate=1e-4,3e-4,1e-3`;
    /// values with commas in brackets stay whole (`hidden=[64,64],[256,256]`). Runs go
    /// to --run-dir/<KEY=VALUE>/seed<N>, packed like the seeds; the summary ranks the
    /// values by their mean greedy return.
    #[arg(long, value_name = "KEY=V1,V2,...", requires = "seeds")]
    pub(crate) sweep: Vec<String>,
    /// Episodes of the final greedy evaluation.
    #[arg(long, default_value_t = 10)]
    pub(crate) eval_episodes: usize,
    /// Serve Prometheus metrics (steps/s, returns, stage times, CPU use, memory) while
    /// training: `PORT` binds to 127.0.0.1, `HOST:PORT` where told (ppo only for now).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_addr: Option<String>,
    /// Write a Chrome/Perfetto trace (spans for env stepping, inference and learning;
    /// ppo only for now).
    #[arg(long, value_name = "FILE.json")]
    pub(crate) trace: Option<PathBuf>,
    /// With --trace: keep the first N and the last N iterations' spans (the file counts
    /// the iterations in between), so a long run's trace stays small enough to open.
    #[arg(long, value_name = "N", default_value_t = rlrig_learn::trace::DEFAULT_KEEP, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) trace_iterations: u64,
    #[command(flatten)]
    pub(crate) run: RunFlags,
}

/// Parses `train ALGO ...` (a command line after the program's name), with clap's
/// usage errors as the error.
pub(crate) fn parse(argv: &[OsString]) -> Result<TrainCommand> {
    #[derive(clap::Parser)]
    #[command(name = "rlrig train")]
    struct Train {
        #[command(subcommand)]
        cmd: TrainCommand,
    }
    use clap::Parser as _;
    let parsed = Train::try_parse_from(
        std::iter::once(OsString::from("rlrig train")).chain(argv.iter().skip(1).cloned()),
    )
    .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))?;
    Ok(parsed.cmd)
}

/// Runs `rlrig train ...`; `Some` when a signal stopped the run early (its exit code is
/// the signal's). `argv` is the command line after the program's name (`train ALGO
/// ...`): `--seeds` runs each seed as this binary with these arguments.
pub fn train(cmd: TrainCommand, argv: &[OsString]) -> Result<Option<Stop>> {
    let (a, algo) = match cmd {
        TrainCommand::Alphazero(_) if crate::mpi_support::under_mpirun() => {
            bail!(
                "alphazero does not run over MPI ranks yet: start it without mpirun (ppo, a2c, impala, dqn, ddpg, td3, sac, es and ga do)"
            )
        }
        TrainCommand::Alphazero(a) => return train_alphazero_cli(a),
        TrainCommand::Es(a) => return train_evolution_cli(a, Method::Es),
        TrainCommand::Ga(a) => return train_evolution_cli(a, Method::Ga),
        TrainCommand::Ppo(a) => (a, Err("ppo")),
        TrainCommand::A2c(a) => (a, Err("a2c")),
        TrainCommand::Impala(a) => (a, Err("impala")),
        TrainCommand::Ddpg(a) => (a, Ok(Algo::Ddpg)),
        TrainCommand::Td3(a) => (a, Ok(Algo::Td3)),
        TrainCommand::Sac(a) => (a, Ok(Algo::Sac)),
        TrainCommand::Dqn(a) => (a, Err("dqn")),
    };
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if !a.sweep.is_empty() && a.device == Device::Gpu {
        bail!("--sweep packs processes on the CPU: not available with --device gpu yet");
    }
    if crate::mpi_support::under_mpirun() && (a.seeds.is_some() || a.device == Device::Gpu) {
        bail!(
            "--seeds and --device gpu run on one machine: under mpirun the ranks share one run on --device cpu (start one mpirun per seed)"
        );
    }
    if let Some(seeds) = a.seeds.clone()
        && a.device != Device::Gpu
    {
        return train_packed(a, algo, seeds.0, argv);
    }
    // Ok: an off-policy algorithm; Err: one on PPO's machinery, by name.
    match algo {
        Err("dqn") => {
            let cfg = resolve_dqn(&a)?;
            train_replay_cli::<Dqn>(a, cfg)
        }
        Err(label) => train_ppo_cli(a, label),
        Ok(algo) => {
            let cfg = resolve_offpolicy(&a, algo)?;
            train_replay_cli::<OffPolicy>(a, cfg)
        }
    }
}

/// `--seeds` on the CPU: checks the config once here (one clear error rather than one
/// per seed), then runs each seed as its own process (`pack.rs`).
fn train_packed(
    mut a: PpoArgs,
    algo: std::result::Result<Algo, &'static str>,
    seeds: Vec<u64>,
    argv: &[OsString],
) -> Result<Option<Stop>> {
    if a.run.seed.is_some() {
        bail!("--seed and --seeds: give one (--seeds runs each seed of the list)");
    }
    if a.metrics_addr.is_some() || a.trace.is_some() {
        bail!("--metrics-addr and --trace follow one run: not available with --seeds");
    }
    if a.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let variants = crate::pack::sweep(&a.sweep).map_err(anyhow::Error::msg)?;
    // Every variant's config is checked here, so a bad value stops nothing half-run.
    // Resuming with no --config, the seeds read their own config.toml: so does this
    // check, from the variant's first seed that has one.
    let (base, given) = (a.run.run_dir.clone(), a.run.set.clone());
    let mut resolved = None;
    for v in variants
        .iter()
        .map(Some)
        .chain(variants.is_empty().then_some(None))
    {
        a.run.set = given.clone();
        a.run
            .set
            .extend(v.map_or(&[][..], |v| &v.sets[..]).iter().cloned());
        a.run.run_dir = base.clone();
        if a.run.resume
            && let Some(b) = &base
        {
            let b = v.map_or(b.clone(), |v| b.join(&v.name));
            a.run.run_dir = seeds
                .iter()
                .map(|s| b.join(format!("seed{s}")))
                .find(|d| d.join("config.toml").is_file())
                .or(a.run.run_dir);
        }
        let checked = match algo {
            Err("dqn") => resolve_dqn(&a).map(|c| ("dqn", c.env)),
            Err(label) => resolve_config(&a, label).map(|c| (label, c.env)),
            Ok(algo) => resolve_offpolicy(&a, algo).map(|c| (algo.name(), c.env)),
        };
        let checked = match v {
            Some(v) => checked.with_context(|| format!("--sweep {}", v.name))?,
            None => checked?,
        };
        resolved.get_or_insert(checked);
    }
    a.run.set = given;
    let (label, env) = resolved.context("no config to run")?;
    a.run.run_dir = base;
    device_maker(a.device)?;
    crate::pack::train_seeds(
        crate::pack::Pack {
            label,
            env,
            seeds,
            args: crate::pack::child_args(argv),
            threads: a.threads,
            jobs: a.jobs,
            run_dir: a.run.run_dir,
            resume: a.run.resume,
            quiet: a.run.quiet,
            variants,
        },
        stop_on_signals()?,
    )
}

/// `--device` to where the networks of PPO, A2C, IMPALA, DDPG, TD3, SAC and AlphaZero run:
/// `None` is the native CPU path.
/// Where the networks run (`--device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// The native CPU path.
    Cpu,
    /// Burn's CPU backend (a build with `--features burn`).
    BurnCpu,
    /// Burn on any Vulkan/Metal/DX12 GPU (a build with `--features burn`).
    Wgpu,
    /// Burn on Vulkan (a build with `--features burn`).
    Vulkan,
    /// PPO resident on the GPU, many seeds per launch (`rlrig train ppo`, a build with
    /// `--features gpu`).
    Gpu,
}

impl Device {
    fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .expect("every device has a name")
            .get_name()
            .to_string()
    }
}

fn device_maker(device: Device) -> Result<Option<BackendMaker>> {
    match device {
        Device::Cpu => Ok(None),
        Device::BurnCpu | Device::Wgpu | Device::Vulkan => burn_maker(&device.name()),
        Device::Gpu => {
            bail!("--device gpu: only `rlrig train ppo` runs resident on the GPU for now")
        }
    }
}

#[cfg(feature = "burn")]
fn burn_maker(device: &str) -> Result<Option<BackendMaker>> {
    let kind = rlrig_burn::Kind::parse(device).expect("device_maker passes Burn names only");
    Ok(Some(rlrig_burn::maker(kind)?))
}

#[cfg(not(feature = "burn"))]
fn burn_maker(device: &str) -> Result<Option<BackendMaker>> {
    bail!(
        "--device {device}: this build has no Burn backend; build with `--features burn` \
         (cargo build --release --features burn), or use --device cpu (the native path)"
    )
}

/// Clears the progress bar of a run that ended; `true` where this process reports the
/// run (rank 0), after saying where a resumed run picked up (`unit`: its clock's unit).
pub(crate) fn run_ended<A: rlrig_learn::driver::Algorithm>(
    bar: &indicatif::ProgressBar,
    rank: usize,
    summary: &driver::Finished<A>,
    unit: &str,
) -> Result<bool> {
    bar.finish_and_clear();
    if rank != 0 {
        return Ok(false);
    }
    if let Some(at) = summary.resumed_from {
        outln!("resumed from {unit} {at}");
    }
    Ok(true)
}

pub(crate) fn progress_bar(quiet: bool, total: u64) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(total);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} steps {msg}",
        )
        .expect("valid template"),
    );
    b
}
