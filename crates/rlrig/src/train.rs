//! `rlrig train ...` and `rlrig eval`.

use std::path::PathBuf;

use crate::default_threads;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use rlrig_learn::backend::BackendMaker;
use rlrig_learn::dqn::Dqn;
use rlrig_learn::driver::{self, TrainOptions};

use crate::config::{
    Sources, resolve_alphazero, resolve_config, resolve_dqn, resolve_from, resolve_offpolicy,
    run_config,
};
use rlrig_learn::evolution::{EvoConfig, Method};
use rlrig_learn::offpolicy::{Algo, OffPolicy};
use rlrig_learn::ppo::{Ppo, PpoConfig};

use rlrig_learn::stop::{Stop, StopFlag};

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
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
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
    Ok(stop)
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

/// The lines a stopped run ends with: what stopped it, where, and how to go on.
fn report_stop(stop: Stop, at: &str, algo: &str, run_dir: &std::path::Path) -> Result<()> {
    outln!(
        "interrupted by {} {at}: checkpoint written; continue with `rlrig train {algo} --run-dir {} --resume`",
        stop.signal_name(),
        run_dir.display()
    );
    Ok(())
}

/// "evaluation{of} over N episodes: mean return M ± S", or why there is none; `of`
/// names what was evaluated (" of the centre"), or is empty.
fn eval_line(eval: &Option<rlrig_learn::eval::EvalSummary>, of: &str) -> String {
    match eval {
        Some(e) => format!(
            "evaluation{of} over {} episodes: mean return {:.1} ± {:.1}",
            e.episodes, e.mean_return, e.std_return
        ),
        None => format!(
            "evaluation{of}: skipped (stopped early; `rlrig eval --run DIR` evaluates the checkpoint)"
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

#[derive(Args)]
pub struct EvoArgs {
    /// Environment id (default CartPole-v1).
    #[arg(long)]
    pub(crate) env: Option<String>,
    /// Env parameter, as `gym.make(id, KEY=VALUE)` (repeatable), e.g.
    /// `--env-arg max_episode_steps=200` or Acrobot's `--env-arg fast_trig=true`;
    /// `rlrig envs` lists each env's keys. Kept in the run's config (`[env_args]`), so
    /// --resume, eval and play use the same env.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", value_parser = crate::cli_envs::parse_env_arg)]
    pub(crate) env_args: Vec<(String, String)>,
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Members per generation.
    #[arg(long)]
    pub(crate) population: Option<usize>,
    #[arg(long)]
    pub(crate) generations: Option<u64>,
    /// Episodes averaged into each member's fitness.
    #[arg(long)]
    pub(crate) episodes_per_member: Option<usize>,
    /// GA only: evolve connection masks of a fixed network (mutation removes links).
    #[arg(long)]
    pub(crate) prune: bool,
    /// Threads evaluating members (results do not depend on it).
    #[arg(long, default_value_t = default_threads())]
    pub(crate) threads: usize,
    /// TOML file with any hyperparameters (see a run's config.toml for every key).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Override one hyperparameter, e.g. `--set sigma=0.1` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,
    /// Run directory (default: runs/<env>-<es|ga>-seed<seed>).
    #[arg(long)]
    pub(crate) run_dir: Option<PathBuf>,
    #[arg(long)]
    pub(crate) resume: bool,
    /// Episodes of the final evaluation of the deployed policy (ES centre, GA elite).
    #[arg(long, default_value_t = 10)]
    pub(crate) eval_episodes: usize,
    #[arg(long)]
    pub(crate) quiet: bool,
}

fn train_evolution_cli(a: EvoArgs, method: Method) -> Result<Option<Stop>> {
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if a.prune && method == Method::Es {
        bail!("--prune is a GA option: use `rlrig train ga --prune`");
    }
    let mut flags = Vec::new();
    if let Some(v) = a.seed {
        flags.push(("seed", toml::Value::Integer(v as i64)));
    }
    if let Some(v) = a.population {
        flags.push(("population", toml::Value::Integer(v as i64)));
    }
    if let Some(v) = a.generations {
        flags.push(("generations", toml::Value::Integer(v as i64)));
    }
    if let Some(v) = a.episodes_per_member {
        flags.push(("episodes_per_member", toml::Value::Integer(v as i64)));
    }
    if a.prune {
        flags.push(("prune", toml::Value::Boolean(true)));
    }
    let config = run_config(
        &a.config,
        a.resume,
        &a.run_dir,
        if method == Method::Es { "es" } else { "ga" },
    );
    let src = Sources {
        env: a.env.as_deref(),
        config: config.as_deref(),
        set: &a.set,
        flags,
        env_args: &a.env_args,
    };
    let cfg: EvoConfig = resolve_from(
        &src,
        "CartPole-v1",
        |e| Ok(rlrig_env::spec(e).map(|_| ())?),
        |env| toml::Table::try_from(EvoConfig::for_env(method, env)).context("default config"),
    )?;
    if cfg.method != method {
        bail!("config: method does not match this command");
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    let name = if method == Method::Es { "es" } else { "ga" };
    let run_dir = run_dir_for(&a.run_dir, &cfg.env, name, cfg.seed);
    let opts = TrainOptions::new(
        run_dir.clone(),
        a.threads,
        a.resume,
        a.eval_episodes,
        stop_on_signals()?,
    );
    let fp = crate::mpi_support::fingerprint(&serde_json::to_string(&cfg)?);
    let mpi = crate::mpi_support::start(fp)?;
    let (ranks, rank) = mpi.as_ref().map_or((1, 0), |(m, _)| (m.size, m.rank));
    let (_mpi_guard, collective) = match mpi {
        Some((m, c)) => (Some(m), Some(c)),
        None => (None, None),
    };
    // Rank 0 reports; the others work quietly.
    let bar = progress_bar(a.quiet || rank != 0, cfg.generations);
    let setup = |e: &mut rlrig_learn::evolution::Evolution| {
        if let Some(c) = collective {
            e.set_collective(c);
        }
    };
    let summary = driver::train_with(
        cfg,
        &opts,
        setup,
        |r: &rlrig_learn::driver::Report<'_, rlrig_learn::evolution::Evolution>| {
            let (s, gps) = (r.stats, r.rate);
            bar.set_position(s.generation);
            bar.set_message(format!(
                "{gps:.1} generations/s, best {:.1}, mean {:.1}, {} {:.1}",
                s.best_fitness,
                s.mean_fitness,
                if method == Method::Es {
                    "centre"
                } else {
                    "elite"
                },
                s.center_fitness
            ));
        },
    )?;
    bar.finish_and_clear();
    if rank != 0 {
        return Ok(summary.interrupted);
    }
    if let Some(g) = summary.resumed_from {
        outln!("resumed from generation {g}");
    }
    let c = &summary.alg.cfg;
    outln!(
        "{} {name}{}: {} generations of {} members x {} episodes in {:.2} s ({:.2} s per generation, {} threads x {ranks} ranks); last generation: best {:.1}, mean {:.1}",
        c.env,
        if c.prune { " (pruning)" } else { "" },
        summary.work,
        c.population,
        c.episodes_per_member,
        summary.wall,
        summary.wall / summary.work.max(1) as f64,
        a.threads,
        summary.last.best_fitness,
        summary.last.mean_fitness
    );
    let deployed = if method == Method::Es {
        "centre"
    } else {
        "elite"
    };
    outln!(
        "{}",
        eval_line(&summary.eval, &format!(" of the {deployed}"))
    );
    if let Some(stop) = summary.interrupted {
        report_stop(
            stop,
            &format!("after generation {}", summary.alg.generation),
            name,
            &run_dir,
        )?;
    }
    outln!("run directory: {}", run_dir.display());
    Ok(summary.interrupted)
}

#[derive(Args)]
pub struct AzArgs {
    /// Game id (ConnectFour).
    #[arg(long)]
    pub(crate) env: Option<String>,
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Self-play + training iterations.
    #[arg(long)]
    pub(crate) iterations: Option<u64>,
    /// Simulations per search.
    #[arg(long)]
    pub(crate) simulations: Option<usize>,
    /// Concurrent self-play games (the batch of every network call).
    #[arg(long)]
    pub(crate) games: Option<usize>,
    /// Where the network runs: `cpu` (the native path), `burn-cpu` or `wgpu` (any
    /// Vulkan/Metal/DX12 GPU; needs a build with `--features burn`).
    #[arg(long, default_value = "cpu")]
    pub(crate) device: String,
    /// TOML file with any hyperparameters (see a run's config.toml for every key).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Override one hyperparameter, e.g. `--set eval_depth=3` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,
    /// Run directory (default: runs/<env>-alphazero-seed<seed>).
    #[arg(long)]
    pub(crate) run_dir: Option<PathBuf>,
    #[arg(long)]
    pub(crate) resume: bool,
    #[arg(long)]
    pub(crate) quiet: bool,
}

/// The flags every `rlrig train` algorithm takes.
#[derive(Args)]
pub struct PpoArgs {
    /// Environment id (default: CartPole-v1 for ppo, Pendulum-v1 for ddpg/td3/sac, or
    /// the config file's `env`).
    #[arg(long)]
    pub(crate) env: Option<String>,
    /// Env parameter, as `gym.make(id, KEY=VALUE)` (repeatable), e.g.
    /// `--env-arg max_episode_steps=200` or Acrobot's `--env-arg fast_trig=true`;
    /// `rlrig envs` lists each env's keys. Kept in the run's config (`[env_args]`), so
    /// --resume, eval and play use the same env.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", value_parser = crate::cli_envs::parse_env_arg)]
    pub(crate) env_args: Vec<(String, String)>,
    /// Seed of every random stream of the run (default 1).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
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
    #[arg(long, default_value = "cpu")]
    pub(crate) device: String,
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
    /// TOML file with any hyperparameters (see a run's config.toml for every key).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Override one hyperparameter, e.g. `--set learning_rate=3e-4` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,
    /// Run directory (default: runs/<env>-<algo>-seed<seed>).
    #[arg(long)]
    pub(crate) run_dir: Option<PathBuf>,
    /// Continue the run in --run-dir from its newest checkpoint.
    #[arg(long)]
    pub(crate) resume: bool,
    /// Episodes of the final greedy evaluation.
    #[arg(long, default_value_t = 10)]
    pub(crate) eval_episodes: usize,
    /// No progress bar.
    #[arg(long)]
    pub(crate) quiet: bool,
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
}

fn train_alphazero_cli(a: AzArgs) -> Result<Option<Stop>> {
    let device = device_maker(&a.device)?;
    let cfg = resolve_alphazero(&a)?;
    let run_dir = run_dir_for(&a.run_dir, &cfg.env, "alphazero", cfg.seed);
    let opts = TrainOptions {
        device,
        ..TrainOptions::new(run_dir.clone(), 1, a.resume, 0, stop_on_signals()?)
    };
    let bar = progress_bar(a.quiet, cfg.iterations);
    let depth = cfg.eval_depth;
    let summary = driver::train::<rlrig_learn::alphazero::AlphaZero>(cfg, &opts, |r| {
        let (s, sps) = (r.stats, r.rate);
        bar.set_position(s.iteration);
        bar.set_message(format!(
            "{sps:.0} samples/s, losses {:.3}/{:.3}, vs random {:.0}%, vs solver:{depth} {:.0}% won {:.0}% lost",
            s.policy_loss,
            s.value_loss,
            100.0 * s.win_rate_random,
            100.0 * s.win_rate_solver,
            100.0 * s.loss_rate_solver
        ));
    })?;
    bar.finish_and_clear();
    if let Some(it) = summary.resumed_from {
        outln!("resumed from iteration {it}");
    }
    let t = summary.alg.times;
    let s = &summary.last;
    let config = &summary.alg.cfg;
    outln!(
        "{} alphazero on {}: {} iterations, {} self-play samples in {:.2} s ({:.0} samples/s, {} simulations, {} games in lock-step)",
        config.env,
        summary.alg.device(),
        summary.alg.iteration,
        summary.work,
        summary.wall,
        summary.work as f64 / summary.wall,
        config.simulations,
        config.games
    );
    if config.eval_games == 0 {
        outln!("evaluation: none (eval_games = 0)");
    } else if s.win_rate_random.is_nan() {
        // Only a stopped run ends on an iteration without an evaluation.
        outln!("{}", eval_line(&None, ""));
    } else {
        outln!(
            "evaluation ({} games each): vs random {:.0}% won; vs solver:{} {:.0}% won, {:.0}% lost",
            config.eval_games,
            100.0 * s.win_rate_random,
            config.eval_depth,
            100.0 * s.win_rate_solver,
            100.0 * s.loss_rate_solver
        );
    }
    let pct = |x: f64| 100.0 * x / summary.wall;
    outln!(
        "time: search {:.2} s ({:.0}%), inference {:.2} s ({:.0}%), learner {:.2} s ({:.0}%), evaluation {:.2} s ({:.0}%)",
        t.search,
        pct(t.search),
        t.inference,
        pct(t.inference),
        t.learner,
        pct(t.learner),
        t.eval,
        pct(t.eval)
    );
    if let Some(stop) = summary.interrupted {
        report_stop(
            stop,
            &format!("after iteration {}", summary.alg.iteration),
            "alphazero",
            &run_dir,
        )?;
    }
    outln!("run directory: {}", run_dir.display());
    Ok(summary.interrupted)
}

/// Runs `rlrig train ...`; `Some` when a signal stopped the run early (its exit code is
/// the signal's).
pub fn train(cmd: TrainCommand) -> Result<Option<Stop>> {
    let (a, algo) = match cmd {
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
    if let Some(seeds) = a.seeds.clone()
        && a.device != "gpu"
    {
        return train_packed(a, algo, seeds.0);
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
) -> Result<Option<Stop>> {
    if a.seed.is_some() {
        bail!("--seed and --seeds: give one (--seeds runs each seed of the list)");
    }
    if a.metrics_addr.is_some() || a.trace.is_some() {
        bail!("--metrics-addr and --trace follow one run: not available with --seeds");
    }
    if a.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    // Resuming with no --config, the seeds read their own config.toml: so does this
    // check, from the first seed that has one.
    let base = a.run_dir.clone();
    if a.resume
        && let Some(b) = &base
    {
        a.run_dir = seeds
            .iter()
            .map(|s| b.join(format!("seed{s}")))
            .find(|d| d.join("config.toml").is_file())
            .or(a.run_dir);
    }
    let (label, env) = match algo {
        Err("dqn") => ("dqn", resolve_dqn(&a)?.env),
        Err(label) => (label, resolve_config(&a, label)?.env),
        Ok(algo) => (algo.name(), resolve_offpolicy(&a, algo)?.env),
    };
    a.run_dir = base;
    device_maker(&a.device)?;
    crate::pack::train_seeds(
        crate::pack::Pack {
            label,
            env,
            seeds,
            threads: a.threads,
            jobs: a.jobs,
            run_dir: a.run_dir,
            resume: a.resume,
            quiet: a.quiet,
        },
        stop_on_signals()?,
    )
}

/// `--device` to where the networks of PPO, A2C, IMPALA, DDPG, TD3, SAC and AlphaZero run:
/// `None` is the native CPU path.
fn device_maker(device: &str) -> Result<Option<BackendMaker>> {
    match device {
        "cpu" => Ok(None),
        "burn-cpu" | "wgpu" | "vulkan" => burn_maker(device),
        "gpu" => bail!("--device gpu: only `rlrig train ppo` runs resident on the GPU for now"),
        other => bail!("--device {other}: unknown device (known: cpu, burn-cpu, wgpu, gpu)"),
    }
}

#[cfg(feature = "burn")]
fn burn_maker(device: &str) -> Result<Option<BackendMaker>> {
    let kind = rlrig_burn::Kind::parse(device).expect("device_maker passes Burn names only");
    rlrig_burn::maker(kind)
        .map(Some)
        .map_err(anyhow::Error::msg)
}

#[cfg(not(feature = "burn"))]
fn burn_maker(device: &str) -> Result<Option<BackendMaker>> {
    bail!(
        "--device {device}: this build has no Burn backend; build with `--features burn` \
         (cargo build --release --features burn), or use --device cpu (the native path)"
    )
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

fn train_replay_cli<R: rlrig_learn::replay::Replay>(
    a: PpoArgs,
    cfg: R::Config,
) -> Result<Option<Stop>> {
    let shape = R::shape(&cfg);
    let (algo, total) = (shape.algo, shape.budget);
    if a.seeds.is_some() {
        bail!("--seeds with --device gpu: only `rlrig train ppo` runs on the GPU");
    }
    if a.metrics_addr.is_some() || a.trace.is_some() {
        bail!(
            "--metrics-addr and --trace are not available for {} yet (ppo only)",
            algo
        );
    }
    let run_dir = run_dir_for(&a.run_dir, shape.env, algo, shape.seed);
    let opts = TrainOptions {
        device: device_maker(&a.device)?,
        ..TrainOptions::new(
            run_dir.clone(),
            a.threads,
            a.resume,
            a.eval_episodes,
            stop_on_signals()?,
        )
    };
    let cpu = rlrig_lab::verdict::CpuSampler::start();
    let gpu = rlrig_lab::probe::GpuSampler::start(
        rlrig_lab::probe::Roots::default(),
        std::time::Duration::from_millis(200),
    );
    let bar = progress_bar(a.quiet, total);
    let summary = driver::train::<R>(cfg, &opts, |p| {
        bar.set_position(p.stats.global_step);
        bar.set_message(format!(
            "{:.0} steps/s, {} updates, return {:.1}",
            p.rate, p.stats.updates, p.recent_return
        ));
    })?;
    bar.finish_and_clear();
    if let Some(step) = summary.resumed_from {
        outln!("resumed from step {step}");
    }
    let (r, steps) = (&summary.alg, summary.work);
    let shape = R::shape(r.config());
    outln!(
        "{} {} on {}: {steps} steps, {} updates in {:.2} s ({:.0} steps/s, {:.0} updates/s); {}",
        shape.env,
        algo,
        r.device(),
        r.updates(),
        summary.wall,
        steps as f64 / summary.wall,
        r.updates() as f64 / r.times().learner.max(1e-9),
        eval_line(&summary.eval, "")
    );
    report_times(
        summary.wall,
        r.times(),
        shape.num_envs,
        a.threads,
        &r.device(),
        &cpu,
        gpu,
    )?;
    if let Some(stop) = summary.interrupted {
        report_stop(
            stop,
            &format!("at step {}", r.global_step()),
            algo,
            &run_dir,
        )?;
    }
    outln!("run directory: {}", run_dir.display());
    Ok(summary.interrupted)
}

/// Prints the stage breakdown, core and GPU use and the verdict of a run.
fn report_times(
    wall: f64,
    t: rlrig_learn::ppo::StageTimes,
    num_envs: usize,
    threads: usize,
    device: &str,
    cpu: &rlrig_lab::verdict::CpuSampler,
    gpu: rlrig_lab::probe::GpuSampler,
) -> Result<()> {
    let gpus = gpu.finish();
    for l in rlrig_lab::verdict::time_report(wall, t, num_envs, threads, device, cpu, &gpus) {
        outln!("{l}");
    }
    Ok(())
}

/// PPO and the algorithms on its machinery: `label` is "ppo", "a2c" or "impala".
fn train_ppo_cli(a: PpoArgs, label: &str) -> Result<Option<Stop>> {
    let cfg = resolve_config(&a, label)?;
    if a.device == "gpu" {
        if label != "ppo" || a.resume || a.metrics_addr.is_some() || a.trace.is_some() {
            bail!(
                "--device gpu runs `rlrig train ppo` without --resume, --metrics-addr or --trace for now"
            );
        }
        let seeds = a.seeds.clone().map_or_else(|| vec![cfg.seed], |s| s.0);
        let run_dir = crate::embed::remember(a.run_dir.clone().unwrap_or_else(|| {
            PathBuf::from(format!(
                "runs/{}-ppo-gpu-seeds{}-{}",
                cfg.env.replace('/', "-"),
                seeds[0],
                seeds[seeds.len() - 1]
            ))
        }));
        let cfg = PpoConfig {
            seed: seeds[0],
            ..cfg
        };
        return crate::train_gpu::train_ppo_gpu(
            cfg,
            seeds,
            crate::train_gpu::GpuRunOptions {
                run_dir,
                eval_episodes: a.eval_episodes,
                threads: a.threads,
                quiet: a.quiet,
                stop: stop_on_signals()?,
            },
        );
    }
    let run_dir = run_dir_for(&a.run_dir, &cfg.env, label, cfg.seed);
    let opts = TrainOptions {
        trace: a.trace.clone(),
        trace_iterations: a.trace_iterations,
        device: device_maker(&a.device)?,
        ..TrainOptions::new(
            run_dir.clone(),
            a.threads,
            a.resume,
            a.eval_episodes,
            stop_on_signals()?,
        )
    };
    let cpu = rlrig_lab::verdict::CpuSampler::start();
    let gpu = rlrig_lab::probe::GpuSampler::start(
        rlrig_lab::probe::Roots::default(),
        std::time::Duration::from_millis(200),
    );
    let metrics = match &a.metrics_addr {
        None => None,
        Some(addr) => {
            let addr = rlrig_lab::metrics::parse_addr(addr).map_err(anyhow::Error::msg)?;
            let server = rlrig_lab::metrics::MetricsServer::start(addr)
                .with_context(|| format!("--metrics-addr {addr}: cannot listen"))?;
            eprintln!("metrics: http://{}/metrics", server.local_addr());
            Some(server)
        }
    };
    let labels = format!("env=\"{}\",algo=\"{label}\"", cfg.env);
    let total = cfg.num_iterations() * cfg.batch_size() as u64;
    let bar = progress_bar(a.quiet, total);
    let summary = driver::train::<Ppo>(cfg, &opts, |p| {
        bar.set_position(p.stats.global_step);
        bar.set_message(format!(
            "{:.0} steps/s, return {:.1}",
            p.rate, p.recent_return
        ));
        if let Some(server) = &metrics {
            server.update(rlrig_lab::metrics::training(
                &labels,
                p,
                &cpu,
                &gpu.latest(),
            ));
        }
    })?;
    bar.finish_and_clear();
    if let Some(step) = summary.resumed_from {
        outln!("resumed from step {step}");
    }
    let ppo = &summary.alg;
    if let Some(lag) = ppo.mean_policy_lag() {
        let server = ppo
            .cfg
            .inference_server
            .then_some(&ppo.server_stats)
            .map_or(String::new(), |s| {
                format!(
                    "; inference server: {} calls, mean batch {:.1} rows ({:.2} actors per call)",
                    s.calls,
                    s.mean_batch(),
                    s.requests as f64 / s.calls.max(1) as f64
                )
            });
        outln!(
            "asynchronous actors: {}, mean policy lag {lag:.2} updates{server} (not reproducible)",
            ppo.cfg.actors
        );
    }
    let steps = summary.work;
    outln!(
        "{} {label} on {}: {steps} steps in {:.2} s ({:.0} steps/s); {}",
        ppo.cfg.env,
        ppo.device(),
        summary.wall,
        steps as f64 / summary.wall,
        eval_line(&summary.eval, "")
    );
    report_times(
        summary.wall,
        ppo.times,
        ppo.cfg.num_envs,
        a.threads,
        &ppo.device(),
        &cpu,
        gpu,
    )?;
    if let Some(p) = &a.trace {
        outln!("trace: {} (open in ui.perfetto.dev)", p.display());
    }
    if let Some(stop) = summary.interrupted {
        report_stop(
            stop,
            &format!("at step {}", ppo.global_step),
            label,
            &run_dir,
        )?;
    }
    outln!("run directory: {}", run_dir.display());
    Ok(summary.interrupted)
}
