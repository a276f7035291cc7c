//! `rlrig train ...` and `rlrig eval`.

use std::path::PathBuf;

use crate::default_threads;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use rlrig_learn::alphazero::{AzConfig, Opponent, play_match};
use rlrig_learn::backend::BackendMaker;
use rlrig_learn::dqn::{Dqn, DqnConfig};
use rlrig_learn::evolution::{EvoConfig, Method};
use rlrig_learn::offpolicy::{Algo, OffPolicy, OffPolicyConfig};
use rlrig_learn::ppo::PpoConfig;
use rlrig_learn::replay_run::{ReplayRun, train_replay};
use rlrig_learn::stop::{Stop, StopFlag};
use rlrig_learn::trainer::{RunKind, TrainOptions, eval_run, train_ppo};

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
fn eval_line(eval: &Option<rlrig_learn::trainer::EvalSummary>, of: &str) -> String {
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
    env: Option<String>,
    /// Env parameter, as `gym.make(id, KEY=VALUE)` (repeatable), e.g.
    /// `--env-arg max_episode_steps=200` or Acrobot's `--env-arg fast_trig=true`;
    /// `rlrig envs` lists each env's keys. Kept in the run's config (`[env_args]`), so
    /// --resume, eval and play use the same env.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", value_parser = crate::cli_envs::parse_env_arg)]
    env_args: Vec<(String, String)>,
    #[arg(long)]
    seed: Option<u64>,
    /// Members per generation.
    #[arg(long)]
    population: Option<usize>,
    #[arg(long)]
    generations: Option<u64>,
    /// Episodes averaged into each member's fitness.
    #[arg(long)]
    episodes_per_member: Option<usize>,
    /// GA only: evolve connection masks of a fixed network (mutation removes links).
    #[arg(long)]
    prune: bool,
    /// Threads evaluating members (results do not depend on it).
    #[arg(long, default_value_t = default_threads())]
    threads: usize,
    /// TOML file with any hyperparameters (see a run's config.toml for every key).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one hyperparameter, e.g. `--set sigma=0.1` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Run directory (default: runs/<env>-<es|ga>-seed<seed>).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    #[arg(long)]
    resume: bool,
    /// Episodes of the final evaluation of the deployed policy (ES centre, GA elite).
    #[arg(long, default_value_t = 10)]
    eval_episodes: usize,
    #[arg(long)]
    quiet: bool,
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
    let opts = TrainOptions {
        run_dir: run_dir.clone(),
        threads: a.threads,
        resume: a.resume,
        eval_episodes: a.eval_episodes,
        trace: None,
        trace_iterations: rlrig_learn::trace::DEFAULT_KEEP,
        device: None,
        stop: stop_on_signals()?,
    };
    let fp = crate::mpi_support::fingerprint(&serde_json::to_string(&cfg)?);
    let mpi = crate::mpi_support::start(fp)?;
    let (ranks, rank) = mpi.as_ref().map_or((1, 0), |(m, _)| (m.size, m.rank));
    let (_mpi_guard, collective) = match mpi {
        Some((m, c)) => (Some(m), Some(c)),
        None => (None, None),
    };
    // Rank 0 reports; the others work quietly.
    let bar = progress_bar(a.quiet || rank != 0, cfg.generations);
    let summary = rlrig_learn::trainer::train_evolution(cfg, &opts, collective, |s, gps| {
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
    })?;
    bar.finish_and_clear();
    if rank != 0 {
        return Ok(summary.interrupted);
    }
    if let Some(g) = summary.resumed_from {
        outln!("resumed from generation {g}");
    }
    let c = &summary.config;
    outln!(
        "{} {name}{}: {} generations of {} members x {} episodes in {:.2} s ({:.2} s per generation, {} threads x {ranks} ranks); last generation: best {:.1}, mean {:.1}",
        c.env,
        if c.prune { " (pruning)" } else { "" },
        summary.generations,
        c.population,
        c.episodes_per_member,
        summary.wall,
        summary.wall / summary.generations.max(1) as f64,
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
            &format!("after generation {}", summary.generation),
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
    env: Option<String>,
    #[arg(long)]
    seed: Option<u64>,
    /// Self-play + training iterations.
    #[arg(long)]
    iterations: Option<u64>,
    /// Simulations per search.
    #[arg(long)]
    simulations: Option<usize>,
    /// Concurrent self-play games (the batch of every network call).
    #[arg(long)]
    games: Option<usize>,
    /// Where the network runs: `cpu` (the native path), `burn-cpu` or `wgpu` (any
    /// Vulkan/Metal/DX12 GPU; needs a build with `--features burn`).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// TOML file with any hyperparameters (see a run's config.toml for every key).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one hyperparameter, e.g. `--set eval_depth=3` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Run directory (default: runs/<env>-alphazero-seed<seed>).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    #[arg(long)]
    resume: bool,
    #[arg(long)]
    quiet: bool,
}

/// The flags every `rlrig train` algorithm takes.
#[derive(Args)]
pub struct PpoArgs {
    /// Environment id (default: CartPole-v1 for ppo, Pendulum-v1 for ddpg/td3/sac, or
    /// the config file's `env`).
    #[arg(long)]
    env: Option<String>,
    /// Env parameter, as `gym.make(id, KEY=VALUE)` (repeatable), e.g.
    /// `--env-arg max_episode_steps=200` or Acrobot's `--env-arg fast_trig=true`;
    /// `rlrig envs` lists each env's keys. Kept in the run's config (`[env_args]`), so
    /// --resume, eval and play use the same env.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", value_parser = crate::cli_envs::parse_env_arg)]
    env_args: Vec<(String, String)>,
    /// Seed of every random stream of the run (default 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Environment steps to train for.
    #[arg(long)]
    total_steps: Option<u64>,
    /// Environments stepped together (a hyperparameter: it changes the results).
    #[arg(long)]
    num_envs: Option<usize>,
    /// Worker threads for env stepping and the learner's updates, one pool shared by
    /// both (results do not depend on it: batches are split into chunks whose count
    /// depends on the rows only, and summed in order). Idle workers spin briefly
    /// before sleeping; set RLRIG_SPIN_US=0 on a machine shared with other work.
    #[arg(long, default_value_t = default_threads())]
    threads: usize,
    /// Where the networks run: `cpu` (the native path, fastest for small networks),
    /// `burn-cpu` (Burn's CPU backend) or `wgpu` (any Vulkan/Metal/DX12 GPU through
    /// Burn). Burn devices need a build with `--features burn`; PPO, A2C, DDPG, TD3,
    /// SAC and DQN run on them. `gpu`: the whole PPO loop on the GPU (envs, rollout,
    /// updates; build with `--features gpu`; CartPole-v1, Acrobot-v1 and MountainCar-v0,
    /// without observation or reward normalisation, for now); with --seeds every
    /// seed trains in the same kernels. Device runs write weights and metrics but do
    /// not checkpoint or resume yet.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Train these seeds side by side, e.g. `1-8` or `1,5,9`, each in its own run
    /// directory under --run-dir (default runs/<env>-<algo>-seeds<first>-<last>), with
    /// one summary (seeds.json) at the end. On the CPU the runs are packed onto the
    /// cores: --jobs at a time, --threads / --jobs threads each. With `ppo --device gpu`
    /// all seeds train in the same kernels. Each seed's result equals that seed trained
    /// alone (on the same device).
    #[arg(long, value_name = "LIST", value_parser = crate::train_gpu::seed_list)]
    seeds: Option<crate::train_gpu::SeedList>,
    /// With --seeds on the CPU: runs at a time (default: one per --threads, at most one
    /// per seed).
    #[arg(long, value_name = "N", requires = "seeds")]
    jobs: Option<usize>,
    /// TOML file with any hyperparameters (see a run's config.toml for every key).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one hyperparameter, e.g. `--set learning_rate=3e-4` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Run directory (default: runs/<env>-<algo>-seed<seed>).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Continue the run in --run-dir from its newest checkpoint.
    #[arg(long)]
    resume: bool,
    /// Episodes of the final greedy evaluation.
    #[arg(long, default_value_t = 10)]
    eval_episodes: usize,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Serve Prometheus metrics (steps/s, returns, stage times, CPU use, memory) while
    /// training: `PORT` binds to 127.0.0.1, `HOST:PORT` where told (ppo only for now).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<String>,
    /// Write a Chrome/Perfetto trace (spans for env stepping, inference and learning;
    /// ppo only for now).
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
    /// With --trace: keep the first N and the last N iterations' spans (the file counts
    /// the iterations in between), so a long run's trace stays small enough to open.
    #[arg(long, value_name = "N", default_value_t = rlrig_learn::trace::DEFAULT_KEEP, value_parser = clap::value_parser!(u64).range(1..))]
    trace_iterations: u64,
}

fn parse_value(raw: &str) -> toml::Value {
    // A TOML literal if it is one (numbers, booleans, arrays), else a string.
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Defaults for the env, then the config file, then `--set`, then explicit flags.
fn resolve_config(a: &PpoArgs, label: &str) -> Result<PpoConfig> {
    let cfg: PpoConfig = resolve(a, "ppo", "CartPole-v1", |env| {
        let d = match label {
            "a2c" => PpoConfig::a2c_for_env(env),
            "impala" => PpoConfig::impala_for_env(env),
            _ => PpoConfig::for_env(env),
        };
        toml::Table::try_from(d).context("default config")
    })?;
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

fn resolve_offpolicy(a: &PpoArgs, algo: Algo) -> Result<OffPolicyConfig> {
    let cfg: OffPolicyConfig = resolve(a, algo.name(), "Pendulum-v1", |env| {
        toml::Table::try_from(OffPolicyConfig::for_env(algo, env)).context("default config")
    })?;
    if cfg.algo != algo {
        bail!(
            "config: algo = \"{}\" but this is `rlrig train {}`",
            cfg.algo.name(),
            algo.name()
        );
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

fn resolve_dqn(a: &PpoArgs) -> Result<DqnConfig> {
    let cfg: DqnConfig = resolve(a, "dqn", "CartPole-v1", |env| {
        toml::Table::try_from(DqnConfig::for_env(env)).context("default config")
    })?;
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

/// The config of type `C`: `defaults(env)`, then the config file, then `--set`, then
/// explicit flags; a bad key or value names its source.
fn resolve<C: serde::de::DeserializeOwned>(
    a: &PpoArgs,
    algo: &str,
    default_env: &str,
    defaults: impl Fn(&str) -> Result<toml::Table>,
) -> Result<C> {
    let mut flags = Vec::new();
    if let Some(s) = a.seed {
        flags.push(("seed", toml::Value::Integer(s as i64)));
    }
    if let Some(s) = a.total_steps {
        flags.push(("total_steps", toml::Value::Integer(s as i64)));
    }
    if let Some(n) = a.num_envs {
        flags.push(("num_envs", toml::Value::Integer(n as i64)));
    }
    let config = run_config(&a.config, a.resume, &a.run_dir, algo);
    let src = Sources {
        env: a.env.as_deref(),
        config: config.as_deref(),
        set: &a.set,
        flags,
        env_args: &a.env_args,
    };
    resolve_from(
        &src,
        default_env,
        |e| Ok(rlrig_env::spec(e).map(|_| ())?),
        defaults,
    )
}

/// The config file: `--config`, else on `--resume` with `--run-dir` the run's own
/// `config.toml`, so `rlrig train ALGO --run-dir DIR --resume` needs no other flag.
/// Only a run whose checkpoints are of the command's `algo`: another algorithm's
/// config would fail on its own keys before the clearer "this is a sac checkpoint, not
/// td3" error.
fn run_config(
    config: &Option<PathBuf>,
    resume: bool,
    run_dir: &Option<PathBuf>,
    algo: &str,
) -> Option<PathBuf> {
    config.clone().or_else(|| {
        let dir = run_dir.as_ref()?;
        let own = dir.join("config.toml");
        let same = rlrig_learn::run::RunDir::open(dir)
            .and_then(|d| d.algo())
            .is_ok_and(|a| a == algo);
        (resume && own.exists() && same).then_some(own)
    })
}

/// Where a config comes from, lowest priority first after the defaults.
struct Sources<'a> {
    env: Option<&'a str>,
    config: Option<&'a std::path::Path>,
    set: &'a [String],
    /// Explicit flags (`--seed` ...): highest priority.
    flags: Vec<(&'static str, toml::Value)>,
    /// `--env-arg KEY=VALUE`: over the config file's `[env_args]`, key by key.
    env_args: &'a [(String, String)],
}

fn resolve_from<C: serde::de::DeserializeOwned>(
    a: &Sources<'_>,
    default_env: &str,
    check_env: impl Fn(&str) -> Result<()>,
    defaults: impl Fn(&str) -> Result<toml::Table>,
) -> Result<C> {
    let file: Option<toml::Table> = match &a.config {
        None => None,
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading config file '{}'", p.display()))?;
            Some(toml::from_str(&text).with_context(|| format!("config file '{}'", p.display()))?)
        }
    };
    let env = match (&a.env, file.as_ref().and_then(|f| f.get("env"))) {
        (Some(e), _) => e.to_string(),
        (None, Some(toml::Value::String(e))) => e.clone(),
        (None, Some(v)) => bail!("config file: env must be a string, got {v}"),
        (None, None) => default_env.to_string(),
    };
    check_env(&env)?;
    let defaults = defaults(&env)?;
    let mut table = defaults.clone();
    let file_src = a
        .config
        .as_ref()
        .map(|p| format!("config file '{}'", p.display()))
        .unwrap_or_default();
    // (key, value, where it came from), to name the source of a bad value.
    let mut given: Vec<(String, toml::Value, String)> = Vec::new();
    for (k, v) in file.into_iter().flatten() {
        given.push((k, v, file_src.clone()));
    }
    for kv in a.set {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--set '{kv}': expected KEY=VALUE"))?;
        given.push((
            k.trim().to_string(),
            parse_value(v.trim()),
            format!("--set {kv}"),
        ));
    }
    for (k, v, src) in &given {
        if !defaults.contains_key(k) {
            let known: Vec<&String> = defaults.keys().collect();
            bail!(
                "{src}: unknown key '{k}'; known keys: {}",
                known
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        // Check each value's type on its own so the error names the key.
        let mut one = defaults.clone();
        one.insert(k.clone(), v.clone());
        if let Err(e) = one.try_into::<C>() {
            bail!("{src}: key '{k}': {}", e.message());
        }
        table.insert(k.clone(), v.clone());
    }
    table.insert("env".into(), toml::Value::String(env));
    for (k, v) in &a.flags {
        table.insert(k.to_string(), v.clone());
    }
    if !a.env_args.is_empty() {
        let mut args = match table.remove("env_args") {
            Some(toml::Value::Table(t)) => t,
            None => toml::Table::new(),
            Some(v) => bail!("config: env_args must be a table of KEY = VALUE, got {v}"),
        };
        for (k, v) in a.env_args {
            args.insert(k.clone(), toml::Value::String(v.clone()));
        }
        table.insert("env_args".into(), toml::Value::Table(args));
    }
    table
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("config: {}", e.message()))
}

fn resolve_alphazero(a: &AzArgs) -> Result<AzConfig> {
    let mut flags = Vec::new();
    if let Some(s) = a.seed {
        flags.push(("seed", toml::Value::Integer(s as i64)));
    }
    if let Some(v) = a.iterations {
        flags.push(("iterations", toml::Value::Integer(v as i64)));
    }
    if let Some(v) = a.simulations {
        flags.push(("simulations", toml::Value::Integer(v as i64)));
    }
    if let Some(v) = a.games {
        flags.push(("games", toml::Value::Integer(v as i64)));
    }
    let config = run_config(&a.config, a.resume, &a.run_dir, "alphazero");
    let src = Sources {
        env: a.env.as_deref(),
        config: config.as_deref(),
        set: &a.set,
        flags,
        env_args: &[],
    };
    let cfg: AzConfig = resolve_from(
        &src,
        "ConnectFour",
        |e| {
            if rlrig_env::games::GAME_IDS.contains(&e) {
                Ok(())
            } else {
                bail!(
                    "unknown game '{e}' for alphazero (known: {})",
                    rlrig_env::games::GAME_IDS.join(", ")
                )
            }
        },
        |env| {
            toml::Table::try_from(AzConfig {
                env: env.to_string(),
                ..AzConfig::default()
            })
            .context("default config")
        },
    )?;
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    Ok(cfg)
}

fn train_alphazero_cli(a: AzArgs) -> Result<Option<Stop>> {
    let device = device_maker(&a.device)?;
    let cfg = resolve_alphazero(&a)?;
    let run_dir = run_dir_for(&a.run_dir, &cfg.env, "alphazero", cfg.seed);
    let opts = TrainOptions {
        run_dir: run_dir.clone(),
        threads: 1,
        resume: a.resume,
        eval_episodes: 0,
        trace: None,
        trace_iterations: rlrig_learn::trace::DEFAULT_KEEP,
        device,
        stop: stop_on_signals()?,
    };
    let bar = progress_bar(a.quiet, cfg.iterations);
    let depth = cfg.eval_depth;
    let summary = rlrig_learn::trainer::train_alphazero(cfg, &opts, |s, sps| {
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
    let t = summary.times;
    let s = &summary.last;
    outln!(
        "{} alphazero on {}: {} iterations, {} self-play samples in {:.2} s ({:.0} samples/s, {} simulations, {} games in lock-step)",
        summary.config.env,
        summary.device,
        summary.iteration,
        summary.samples,
        summary.wall,
        summary.samples as f64 / summary.wall,
        summary.config.simulations,
        summary.config.games
    );
    if summary.config.eval_games == 0 {
        outln!("evaluation: none (eval_games = 0)");
    } else if s.win_rate_random.is_nan() {
        // Only a stopped run ends on an iteration without an evaluation.
        outln!("{}", eval_line(&None, ""));
    } else {
        outln!(
            "evaluation ({} games each): vs random {:.0}% won; vs solver:{} {:.0}% won, {:.0}% lost",
            summary.config.eval_games,
            100.0 * s.win_rate_random,
            summary.config.eval_depth,
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
            &format!("after iteration {}", summary.iteration),
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

fn train_replay_cli<R: ReplayRun>(a: PpoArgs, cfg: R::Config) -> Result<Option<Stop>> {
    let shape = R::shape(&cfg);
    let (algo, total) = (shape.algo, shape.total_steps);
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
        run_dir: run_dir.clone(),
        threads: a.threads,
        resume: a.resume,
        eval_episodes: a.eval_episodes,
        trace: None,
        trace_iterations: rlrig_learn::trace::DEFAULT_KEEP,
        device: device_maker(&a.device)?,
        stop: stop_on_signals()?,
    };
    let cpu = rlrig_lab::verdict::CpuSampler::start();
    let gpu = rlrig_lab::probe::GpuSampler::start(
        rlrig_lab::probe::Roots::default(),
        std::time::Duration::from_millis(200),
    );
    let bar = progress_bar(a.quiet, total);
    let summary = train_replay::<R>(cfg, &opts, |p| {
        bar.set_position(p.stats.global_step);
        bar.set_message(format!(
            "{:.0} steps/s, {} updates, return {:.1}",
            p.steps_per_sec, p.stats.updates, p.recent_return
        ));
    })?;
    bar.finish_and_clear();
    if let Some(step) = summary.resumed_from {
        outln!("resumed from step {step}");
    }
    let steps = summary.global_step - summary.resumed_from.unwrap_or(0);
    let shape = R::shape(&summary.config);
    outln!(
        "{} {} on {}: {steps} steps, {} updates in {:.2} s ({:.0} steps/s, {:.0} updates/s); {}",
        shape.env,
        algo,
        summary.device,
        summary.updates,
        summary.wall,
        steps as f64 / summary.wall,
        summary.updates as f64 / summary.times.learner.max(1e-9),
        eval_line(&summary.eval, "")
    );
    report_times(
        summary.wall,
        summary.times,
        shape.num_envs,
        a.threads,
        &summary.device,
        &cpu,
        gpu,
    )?;
    if let Some(stop) = summary.interrupted {
        report_stop(
            stop,
            &format!("at step {}", summary.global_step),
            algo,
            &run_dir,
        )?;
    }
    outln!("run directory: {}", run_dir.display());
    Ok(summary.interrupted)
}

/// The run summary's GPU lines: each sampled GPU's busy % and peak memory, or `none`
/// when no GPU was sampled.
pub(crate) fn report_gpus(gpus: &[rlrig_lab::probe::GpuUse], none: &str) -> Result<()> {
    if gpus.is_empty() {
        outln!("{none}");
    }
    for g in gpus {
        outln!(
            "gpu {}: busy {:.0}% mean, {:.0}% peak, memory peak {} ({} samples)",
            g.gpu,
            g.mean_busy_percent,
            g.max_busy_percent,
            g.max_memory_used_mib
                .map_or("?".into(), |m| format!("{m:.0} MiB")),
            g.samples
        );
    }
    Ok(())
}

/// The stage breakdown, core and GPU use, and the bottleneck verdict of a run.
fn report_times(
    wall: f64,
    t: rlrig_learn::ppo::StageTimes,
    num_envs: usize,
    threads: usize,
    device: &str,
    cpu: &rlrig_lab::verdict::CpuSampler,
    gpu: rlrig_lab::probe::GpuSampler,
) -> Result<()> {
    let b = rlrig_lab::verdict::Breakdown::new(wall, t.env, t.inference, t.learner);
    let (pe, pi, pl, po) = b.shares();
    outln!(
        "time: env {:.2} s ({:.0}%), inference {:.2} s ({:.0}%), learner {:.2} s ({:.0}%), other {:.2} s ({:.0}%)",
        b.env,
        100.0 * pe,
        b.inference,
        100.0 * pi,
        b.learner,
        100.0 * pl,
        b.other,
        100.0 * po
    );
    let busy: Vec<String> = cpu
        .busy()
        .iter()
        .map(|x| format!("{:.0}%", 100.0 * x))
        .collect();
    if !busy.is_empty() {
        outln!("cpu busy per core: {}", busy.join(" "));
    }
    let tasks = cpu.pool_tasks();
    if threads > 1 && tasks.len() > 1 && wall > 0.0 {
        // The OS counts a spinning worker as busy; this counts only work in the pool.
        let shares: Vec<String> = tasks
            .iter()
            .map(|t| format!("{:.0}%", 100.0 * t / wall))
            .collect();
        outln!(
            "pool tasks (caller, then each worker) in % of wall time: {}",
            shares.join(" ")
        );
    }
    // The sampler reads NVIDIA/AMD counters; say which path ran the networks so a
    // burn-cpu or lavapipe run is not reported as the native path.
    let none = if device == "cpu" {
        "gpu: none in use (the native CPU path ran the networks)".to_string()
    } else {
        format!("gpu: no NVIDIA/AMD GPU activity sampled (the networks ran on {device})")
    };
    report_gpus(&gpu.finish(), &none)?;
    let v = rlrig_lab::verdict::verdict(&b, num_envs, threads);
    outln!("verdict: {}", v.message);
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
        run_dir: run_dir.clone(),
        threads: a.threads,
        resume: a.resume,
        eval_episodes: a.eval_episodes,
        trace: a.trace.clone(),
        trace_iterations: a.trace_iterations,
        device: device_maker(&a.device)?,
        stop: stop_on_signals()?,
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
    let summary = train_ppo(cfg, &opts, |p| {
        bar.set_position(p.stats.global_step);
        bar.set_message(format!(
            "{:.0} steps/s, return {:.1}",
            p.steps_per_sec, p.recent_return
        ));
        if let Some(server) = &metrics {
            server.update(exposition(&labels, p, &cpu, &gpu.latest()));
        }
    })?;
    bar.finish_and_clear();
    if let Some(step) = summary.resumed_from {
        outln!("resumed from step {step}");
    }
    if let Some(lag) = summary.mean_policy_lag {
        let server = summary.server.as_ref().map_or(String::new(), |s| {
            format!(
                "; inference server: {} calls, mean batch {:.1} rows ({:.2} actors per call)",
                s.calls,
                s.mean_batch(),
                s.requests as f64 / s.calls.max(1) as f64
            )
        });
        outln!(
            "asynchronous actors: {}, mean policy lag {lag:.2} updates{server} (not reproducible)",
            summary.config.actors
        );
    }
    let steps = summary.global_step - summary.resumed_from.unwrap_or(0);
    outln!(
        "{} {label} on {}: {steps} steps in {:.2} s ({:.0} steps/s); {}",
        summary.config.env,
        summary.device,
        summary.wall,
        steps as f64 / summary.wall,
        eval_line(&summary.eval, "")
    );
    report_times(
        summary.wall,
        summary.times,
        summary.config.num_envs,
        a.threads,
        &summary.device,
        &cpu,
        gpu,
    )?;
    if let Some(p) = &a.trace {
        outln!("trace: {} (open in ui.perfetto.dev)", p.display());
    }
    if let Some(stop) = summary.interrupted {
        report_stop(
            stop,
            &format!("at step {}", summary.global_step),
            label,
            &run_dir,
        )?;
    }
    outln!("run directory: {}", run_dir.display());
    Ok(summary.interrupted)
}

/// The Prometheus text for one progress update.
fn exposition(
    labels: &str,
    p: &rlrig_learn::trainer::Progress<'_>,
    cpu: &rlrig_lab::verdict::CpuSampler,
    gpus: &[rlrig_lab::probe::GpuReading],
) -> String {
    let mut e = rlrig_lab::metrics::Exposition::default();
    let s = p.stats;
    e.metric(
        "rlrig_steps_total",
        "counter",
        "Environment steps taken.",
        &[(labels, s.global_step as f64)],
    )
    .metric(
        "rlrig_iterations_total",
        "counter",
        "Rollout+update iterations.",
        &[(labels, s.iteration as f64)],
    )
    .metric(
        "rlrig_steps_per_second",
        "gauge",
        "Environment steps per second over the last iteration.",
        &[(labels, p.steps_per_sec)],
    )
    .metric(
        "rlrig_episode_return",
        "gauge",
        "Mean return of recently finished episodes.",
        &[(labels, p.recent_return)],
    )
    .metric(
        "rlrig_policy_loss",
        "gauge",
        "PPO surrogate loss of the last update.",
        &[(labels, s.policy_loss)],
    )
    .metric(
        "rlrig_value_loss",
        "gauge",
        "Value loss of the last update.",
        &[(labels, s.value_loss)],
    );
    let (env, inf, learn) = (
        format!("{labels},stage=\"env\""),
        format!("{labels},stage=\"inference\""),
        format!("{labels},stage=\"learner\""),
    );
    e.metric(
        "rlrig_stage_seconds_total",
        "counter",
        "Wall time spent per stage.",
        &[
            (&env, p.times.env),
            (&inf, p.times.inference),
            (&learn, p.times.learner),
        ],
    );
    let busy = cpu.busy();
    let cores: Vec<String> = (0..busy.len()).map(|i| format!("core=\"{i}\"")).collect();
    let samples: Vec<(&str, f64)> = cores.iter().map(String::as_str).zip(busy).collect();
    e.metric(
        "rlrig_cpu_busy_ratio",
        "gauge",
        "Busy fraction of each core since the run started.",
        &samples,
    );
    // Work done in the worker pool (a spinning worker is busy to the OS, not here).
    let tasks = cpu.pool_tasks();
    let threads: Vec<String> = (0..tasks.len())
        .map(|i| match i {
            0 => format!("{labels},thread=\"caller\""),
            i => format!("{labels},thread=\"worker{}\"", i - 1),
        })
        .collect();
    let samples: Vec<(&str, f64)> = threads.iter().map(String::as_str).zip(tasks).collect();
    e.metric(
        "rlrig_pool_task_seconds_total",
        "counter",
        "Seconds spent in worker-pool tasks per thread (env stepping and learner chunks).",
        &samples,
    );
    if !gpus.is_empty() {
        let names: Vec<String> = gpus
            .iter()
            .map(|(g, _, _)| format!("gpu=\"{g}\""))
            .collect();
        let samples: Vec<(&str, f64)> = names
            .iter()
            .map(String::as_str)
            .zip(gpus.iter().map(|(_, b, _)| b / 100.0))
            .collect();
        e.metric(
            "rlrig_gpu_busy_ratio",
            "gauge",
            "GPU busy fraction (NVML, amdgpu sysfs).",
            &samples,
        );
        let mem: Vec<(&str, f64)> = names
            .iter()
            .map(String::as_str)
            .zip(
                gpus.iter()
                    .map(|(_, _, m)| m.map_or(f64::NAN, |m| m * 1024.0 * 1024.0)),
            )
            .collect();
        e.metric(
            "rlrig_gpu_memory_used_bytes",
            "gauge",
            "GPU memory in use.",
            &mem,
        );
    }
    if let Some(rss) = rlrig_lab::metrics::rss_bytes() {
        e.metric(
            "rlrig_resident_memory_bytes",
            "gauge",
            "Resident memory of this process.",
            &[("", rss)],
        );
    }
    e.finish()
}

#[derive(Args)]
pub struct EvalArgs {
    /// Run directory of a `rlrig train` run.
    #[arg(long, required_unless_present = "env", conflicts_with = "env")]
    run: Option<PathBuf>,
    /// Evaluate a baseline policy on this env instead of a run (with --policy).
    #[arg(long, requires = "policy")]
    env: Option<String>,
    /// Baseline policy for --env: `random` (uniform over the action space) or
    /// `heuristic` (where the reference has one). Prints return and length statistics,
    /// to compare env statistics with the reference.
    #[arg(long, requires = "env")]
    policy: Option<String>,
    /// Env parameter for --env, as `gym.make(id, KEY=VALUE)` (repeatable); a run is
    /// evaluated with the env_args it trained with.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", requires = "env", value_parser = crate::cli_envs::parse_env_arg)]
    env_args: Vec<(String, String)>,
    #[arg(long, default_value_t = 10)]
    episodes: usize,
    /// Seed of the evaluation episodes (default: the run's seed + 1000003).
    #[arg(long)]
    seed: Option<u64>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// AlphaZero runs: the opponent, `random`, `solver:DEPTH` (depth-limited negamax;
    /// `solver:0` plays perfectly but is slow in the opening) or `run:DIR` (another run).
    #[arg(long, default_value = "solver:2")]
    opponent: String,
    /// AlphaZero runs: games to play (half with the agent moving first).
    #[arg(long, default_value_t = 100)]
    games: usize,
    /// AlphaZero runs: simulations per agent move (default: the run's eval_simulations).
    #[arg(long)]
    simulations: Option<usize>,
}

fn eval_alphazero(a: &EvalArgs) -> Result<()> {
    let run = a.run.clone().expect("checked by eval");
    let (cfg, net) = rlrig_learn::trainer::load_alphazero(&run)?;
    if a.games == 0 {
        bail!("--games must be at least 1");
    }
    let sims = a.simulations.unwrap_or(cfg.eval_simulations);
    if sims == 0 {
        bail!("--simulations must be at least 1");
    }
    rlrig_learn::alphazero::search_memory(a.games, sims)
        .check("the evaluation", "--games or --simulations")
        .map_err(anyhow::Error::msg)?;
    let seed = a
        .seed
        .unwrap_or(cfg.seed + rlrig_learn::trainer::EVAL_SEED_OFFSET);
    let m = if let Some(other) = a.opponent.strip_prefix("run:") {
        let (_, net2) = rlrig_learn::trainer::load_alphazero(std::path::Path::new(other))
            .with_context(|| format!("--opponent {}", a.opponent))?;
        rlrig_learn::alphazero::play_nets(&net, &net2, &cfg, sims, a.games, seed)
    } else {
        let op: Opponent = a.opponent.parse().map_err(anyhow::Error::msg)?;
        play_match(&net, &cfg, sims, op, a.games, seed)
    };
    if a.json {
        let v = serde_json::json!({
            "opponent": a.opponent, "games": m.games, "wins": m.wins, "draws": m.draws,
            "losses": m.losses, "win_rate": m.win_rate(), "loss_rate": m.loss_rate(),
            "simulations": sims, "seed": seed,
        });
        outln!("{v}");
    } else {
        outln!(
            "{} games against {}: {} won, {} drawn, {} lost ({:.0}% won, {} simulations per move)",
            m.games,
            a.opponent,
            m.wins,
            m.draws,
            m.losses,
            100.0 * m.win_rate(),
            sims
        );
    }
    Ok(())
}

/// Baseline statistics of `--policy` on `--env`.
fn eval_baseline(a: &EvalArgs, env: &str, policy: &str) -> Result<()> {
    let spec = rlrig_env::spec(env)?;
    use rlrig_env::Env as _;
    use rlrig_env::envs::lunar_lander::{heuristic_continuous, heuristic_discrete};
    use rlrig_env::envs::{LunarLander, LunarLanderContinuous};
    let heuristic = match policy {
        "random" => false,
        "heuristic" if env == LunarLander::ID || env == LunarLanderContinuous::ID => true,
        "heuristic" => bail!(
            "--policy heuristic: {env} has no reference heuristic (Gymnasium has one for {} and {}); use --policy random",
            LunarLander::ID,
            LunarLanderContinuous::ID
        ),
        _ => bail!("--policy {policy}: unknown baseline (known: random, heuristic)"),
    };
    let n = a.episodes;
    rlrig_learn::memory::evaluation(env, n)
        .check("the evaluation", "--episodes")
        .map_err(anyhow::Error::msg)?;
    let seed = a.seed.unwrap_or(0);
    let mut venv = rlrig_env::make_sync(
        env,
        rlrig_env::VecConfig::new(n)
            .env_args(a.env_args.clone())
            .seed(seed)
            .episode_cap(rlrig_learn::MAX_EVAL_STEPS),
    )?;
    // Env k's actions come from the stream (seed, Policy, k): reproducible at any size.
    let mut rngs: Vec<rlrig_env::Rng> = (0..n)
        .map(|k| rlrig_env::Rng::stream(seed, rlrig_env::Purpose::Policy, k as u64))
        .collect();
    let (mut ret, mut len) = (vec![0.0f64; n], vec![0u64; n]);
    let mut done = vec![false; n];
    let (mut ai, mut af) = (vec![0i32; n], Vec::new());
    while !done.iter().all(|&d| d) {
        let d = spec.obs_dim;
        let buf = match &spec.action_space {
            rlrig_env::Space::Discrete { .. } if heuristic => {
                for (k, x) in ai.iter_mut().enumerate() {
                    *x = heuristic_discrete(&venv.obs()[k * d..(k + 1) * d]);
                }
                rlrig_env::ActionBuf::Discrete(&ai)
            }
            rlrig_env::Space::Box { .. } if heuristic => {
                af.clear();
                for k in 0..n {
                    af.extend(heuristic_continuous(&venv.obs()[k * d..(k + 1) * d]));
                }
                rlrig_env::ActionBuf::Continuous(&af)
            }
            rlrig_env::Space::Discrete { n: k } => {
                for (x, r) in ai.iter_mut().zip(&mut rngs) {
                    *x = r.below(*k) as i32;
                }
                rlrig_env::ActionBuf::Discrete(&ai)
            }
            rlrig_env::Space::Box { low, high, .. } => {
                af.clear();
                for r in &mut rngs {
                    for (l, h) in low.iter().zip(high) {
                        af.push(r.uniform(f64::from(*l), f64::from(*h)) as f32);
                    }
                }
                rlrig_env::ActionBuf::Continuous(&af)
            }
        };
        venv.step(buf)?;
        for k in 0..n {
            if !done[k] {
                ret[k] += venv.rewards()[k];
                len[k] += 1;
                done[k] = venv.terminated()[k] || venv.truncated()[k];
            }
        }
    }
    let stats = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (
            m,
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt(),
        )
    };
    let (mr, sr) = stats(&ret);
    let (ml, sl) = stats(&len.iter().map(|&l| l as f64).collect::<Vec<_>>());
    if a.json {
        let j = serde_json::json!({
            "env": env, "env_args": a.env_args.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "policy": policy, "episodes": n, "mean_return": mr, "std_return": sr,
            "mean_length": ml, "std_length": sl, "seed": seed,
        });
        outln!("{j}");
    } else {
        outln!(
            "{env}, {policy} policy, {n} episodes: return {mr:.2} ± {sr:.2}, length {ml:.1} ± {sl:.1}"
        );
    }
    Ok(())
}

pub fn eval(a: EvalArgs) -> Result<()> {
    if a.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let run = match (&a.run, &a.env, &a.policy) {
        (_, Some(env), Some(policy)) => return eval_baseline(&a, env, policy),
        (Some(run), _, _) => run.clone(),
        _ => bail!("give --run DIR, or --env ID with --policy random|heuristic"),
    };
    if RunKind::of(&run)? == RunKind::AlphaZero {
        return eval_alphazero(&a);
    }
    let s = eval_run(&run, a.episodes, a.seed)?;
    if a.json {
        outln!("{}", serde_json::to_string(&s)?);
    } else {
        outln!(
            "{} episodes: mean return {:.2}, std {:.2}, min {:.2}, max {:.2}",
            s.episodes,
            s.mean_return,
            s.std_return,
            s.min_return,
            s.max_return
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct PlayArgs {
    /// Run directory of a `rlrig train` run.
    #[arg(long)]
    run: PathBuf,
    /// Write the episodes as an animated GIF here (required except for AlphaZero runs,
    /// which are played in the terminal).
    #[arg(long, value_name = "FILE.gif")]
    gif: Option<PathBuf>,
    /// AlphaZero runs: the agent moves first.
    #[arg(long)]
    agent_first: bool,
    /// AlphaZero runs: simulations per agent move (default: the run's eval_simulations).
    #[arg(long)]
    simulations: Option<usize>,
    #[arg(long, default_value_t = 1)]
    episodes: usize,
    /// Seed of the first episode (default: the run's seed + 1000003).
    #[arg(long)]
    seed: Option<u64>,
    /// At most this many frames per episode (long episodes are subsampled).
    #[arg(long, default_value_t = 250)]
    max_frames: usize,
}

/// A game against an AlphaZero run in the terminal: columns 1-7 from stdin, `q` quits.
fn play_alphazero(a: &PlayArgs) -> Result<()> {
    use rlrig_env::games::{ConnectFour, Game, Outcome};
    use std::io::BufRead;
    let (cfg, net) = rlrig_learn::trainer::load_alphazero(&a.run)?;
    let sims = a.simulations.unwrap_or(cfg.eval_simulations).max(1);
    let mut mcts = rlrig_learn::mcts::BatchedMcts::<ConnectFour>::new(cfg.mcts(sims));
    let mut eval = net.evaluator();
    let mut p = ConnectFour::new();
    let mut agent_turn = a.agent_first;
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut rng = rlrig_env::Rng::stream(cfg.seed, rlrig_env::Purpose::User, 0);
    outln!(
        "You are {}. Enter a column 1-7 (q quits).",
        if a.agent_first { "O" } else { "X" }
    );
    loop {
        outln!("{}", p.render());
        let col = if agent_turn {
            mcts.search(&[p], std::slice::from_mut(&mut rng), false, &mut eval);
            let c = mcts.action(0, 0.0, &mut rng);
            outln!("agent plays {} (value {:+.2})", c + 1, mcts.value(0));
            c
        } else {
            loop {
                let Some(line) = lines.next() else {
                    outln!("input ended");
                    return Ok(());
                };
                let line = line?;
                let t = line.trim();
                if t == "q" {
                    return Ok(());
                }
                match t.parse::<usize>() {
                    Ok(c) if (1..=7).contains(&c) && p.can_play(c - 1) => break c - 1,
                    _ => outln!("'{t}' is not a playable column (1-7)"),
                }
            }
        };
        match p.play(col) {
            Outcome::Ongoing => agent_turn = !agent_turn,
            o => {
                outln!("{}", p.render());
                outln!(
                    "{}",
                    match (o, agent_turn) {
                        (Outcome::Draw, _) => "draw",
                        (_, true) => "the agent wins",
                        _ => "you win",
                    }
                );
                return Ok(());
            }
        }
    }
}

pub fn play(a: PlayArgs) -> Result<()> {
    if RunKind::of(&a.run)? == RunKind::AlphaZero {
        return play_alphazero(&a);
    }
    let Some(gif) = a.gif.clone() else {
        bail!(
            "--gif FILE.gif is required for {} (only AlphaZero runs play in the terminal)",
            a.run.display()
        );
    };
    if a.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let (env, recs) = rlrig_learn::trainer::record_episodes(&a.run, a.episodes, a.seed)?;
    let eps: Vec<(Vec<Vec<f64>>, Vec<f64>)> =
        recs.into_iter().map(|r| (r.states, r.returns)).collect();
    rlrig_lab::render::episodes_gif(&gif, &env, &eps, a.max_frames).map_err(anyhow::Error::msg)?;
    for (i, (s, r)) in eps.iter().enumerate() {
        outln!(
            "episode {}: {} steps, return {:.1}",
            i + 1,
            s.len() - 1,
            r.last().copied().unwrap_or(0.0)
        );
    }
    outln!("gif: {}", gif.display());
    Ok(())
}

/// Property-based fuzzing of the config a run is built from: a config file (random
/// text and mutations of a valid one), `--set KEY=VALUE` (known keys and unknown ones,
/// any value) and `--env-arg`, for every algorithm's config. Each case must give a clear
/// error or a config that validates, whose memory estimate is a number, and which
/// resolves again to itself from the `config.toml` a run writes; never a panic.
#[cfg(test)]
mod fuzz {
    use super::{Sources, resolve_from};
    use anyhow::Result;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use rlrig_learn::alphazero::AzConfig;
    use rlrig_learn::evolution::{EvoConfig, Method};
    use rlrig_learn::offpolicy::{Algo, OffPolicyConfig};
    use rlrig_learn::ppo::PpoConfig;
    use serde::{Serialize, de::DeserializeOwned};

    /// `Fuzzed::check` and `Fuzzed::bytes` of a config: its own `validate` and
    /// `memory_estimate`.
    macro_rules! checked {
        () => {
            fn check(&self) -> Result<(), String> {
                self.validate()
            }
            fn bytes(&self) -> f64 {
                self.memory_estimate().total()
            }
        };
    }

    /// One algorithm's config: its defaults, validation and memory estimate.
    trait Fuzzed: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug {
        fn defaults(kind: usize, env: &str) -> Self;
        fn check(&self) -> Result<(), String>;
        fn bytes(&self) -> f64;
        fn envs() -> &'static [&'static str] {
            rlrig_env::ENV_IDS
        }
    }

    impl Fuzzed for PpoConfig {
        fn defaults(kind: usize, env: &str) -> Self {
            [
                PpoConfig::for_env,
                PpoConfig::a2c_for_env,
                PpoConfig::impala_for_env,
            ][kind % 3](env)
        }
        checked!();
    }

    impl Fuzzed for OffPolicyConfig {
        fn defaults(kind: usize, env: &str) -> Self {
            OffPolicyConfig::for_env([Algo::Ddpg, Algo::Td3, Algo::Sac][kind % 3], env)
        }
        checked!();
    }

    impl Fuzzed for EvoConfig {
        fn defaults(kind: usize, env: &str) -> Self {
            EvoConfig::for_env([Method::Es, Method::Ga][kind % 2], env)
        }
        checked!();
    }

    impl Fuzzed for AzConfig {
        fn defaults(_: usize, env: &str) -> Self {
            AzConfig {
                env: env.to_string(),
                ..AzConfig::default()
            }
        }
        checked!();
        fn envs() -> &'static [&'static str] {
            rlrig_env::games::GAME_IDS
        }
    }

    fn config(seed: u64) -> Config {
        Config {
            cases: 96,
            failure_persistence: None,
            rng_seed: RngSeed::Fixed(seed),
            ..Config::default()
        }
    }

    /// A value as typed after `=`: numbers of every size and sign, booleans, arrays,
    /// quoted and bare text.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => any::<i64>().prop_map(|x| x.to_string()),
            2 => (0u64..5000).prop_map(|x| x.to_string()),
            2 => any::<f64>().prop_map(|x| x.to_string()),
            1 => prop_oneof![Just("nan"), Just("inf"), Just("-inf"), Just("1e400"), Just("true")]
                .prop_map(str::to_string),
            1 => proptest::collection::vec(0i64..300, 0..4).prop_map(|v| format!("{v:?}")),
            1 => "\"[a-zA-Z0-9_-]{0,12}\"",
            2 => "\\PC{0,16}",
        ]
    }

    /// `--set` entries: mostly keys of the config, some unknown, some without `=`.
    fn sets(keys: Vec<String>) -> impl Strategy<Value = Vec<String>> {
        let entry = (any::<prop::sample::Index>(), 0u8..10, value()).prop_map(
            move |(k, how, v)| match how {
                0 => format!("no_such_key={v}"),
                1 => v,
                _ => format!("{}={v}", k.get(&keys)),
            },
        );
        proptest::collection::vec(entry, 0..4)
    }

    /// An edit of a config file's text: a byte replaced, a line dropped or repeated.
    fn edit_text(text: &str, edits: &[(prop::sample::Index, u8, char)]) -> String {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for (at, how, c) in edits {
            if lines.is_empty() {
                break;
            }
            let i = at.index(lines.len());
            match how % 3 {
                0 => {
                    let mut chars: Vec<char> = lines[i].chars().collect();
                    if !chars.is_empty() {
                        let j = at.index(chars.len());
                        chars[j] = *c;
                    }
                    lines[i] = chars.into_iter().collect();
                }
                1 => {
                    lines.remove(i);
                }
                _ => lines.insert(i, lines[i].clone()),
            }
        }
        lines.join("\n")
    }

    fn resolve_case<C: Fuzzed>(
        kind: usize,
        env: &str,
        file: Option<&str>,
        set: &[String],
        env_args: &[(String, String)],
    ) -> Result<C> {
        static CASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("rlrig-fuzz-{}-{n}.toml", std::process::id()));
        if let Some(text) = file {
            std::fs::write(&path, text).unwrap();
        }
        let src = Sources {
            env: Some(env),
            config: file.map(|_| path.as_path()),
            set,
            flags: Vec::new(),
            env_args,
        };
        let cfg = resolve_from(
            &src,
            env,
            |e| {
                if C::envs().contains(&e) {
                    Ok(())
                } else {
                    anyhow::bail!("unknown env '{e}'")
                }
            },
            |e| Ok(toml::Table::try_from(C::defaults(kind, e))?),
        );
        let _ = std::fs::remove_file(&path);
        cfg
    }

    /// The property for one case: an error with a message, or a config that either
    /// fails validation with a message or is usable and round-trips.
    fn check_case<C: Fuzzed>(
        kind: usize,
        env: &str,
        file: Option<&str>,
        set: &[String],
        env_args: &[(String, String)],
    ) -> Result<(), TestCaseError> {
        let cfg = match resolve_case::<C>(kind, env, file, set, env_args) {
            Ok(cfg) => cfg,
            Err(e) => {
                let msg = format!("{e:#}");
                prop_assert!(!msg.is_empty());
                return Ok(());
            }
        };
        if let Err(e) = cfg.check() {
            prop_assert!(!e.is_empty());
            return Ok(());
        }
        prop_assert!(cfg.bytes() >= 0.0, "estimate {} for {:?}", cfg.bytes(), cfg);
        // What the run writes as config.toml gives the same config back on --resume.
        let written = toml::to_string(&cfg).unwrap();
        let again = resolve_case::<C>(kind, env, Some(&written), &[], &[]);
        prop_assert!(again.is_ok(), "{:?} from\n{}", again.err(), written);
        prop_assert_eq!(again.unwrap(), cfg);
        Ok(())
    }

    fn keys_of<C: Fuzzed>() -> Vec<String> {
        toml::Table::try_from(C::defaults(0, C::envs()[0]))
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    fn fuzz_sets<C: Fuzzed>(seed: u64) {
        let strategy = (
            0usize..3,
            any::<prop::sample::Index>(),
            sets(keys_of::<C>()),
            proptest::collection::vec(("[a-z_]{1,12}", value()), 0..2),
        );
        proptest::test_runner::TestRunner::new(config(seed))
            .run(&strategy, |(kind, env, set, env_args)| {
                check_case::<C>(
                    kind,
                    C::envs()[env.index(C::envs().len())],
                    None,
                    &set,
                    &env_args,
                )
            })
            .unwrap();
    }

    fn fuzz_files<C: Fuzzed>(seed: u64) {
        let strategy = (
            0usize..3,
            any::<prop::sample::Index>(),
            proptest::collection::vec(
                (any::<prop::sample::Index>(), any::<u8>(), any::<char>()),
                0..5,
            ),
            "\\PC{0,64}",
            any::<bool>(),
        );
        proptest::test_runner::TestRunner::new(config(seed))
            .run(&strategy, |(kind, env, edits, noise, random)| {
                let env = *env.get(C::envs());
                let text = if random {
                    noise
                } else {
                    edit_text(&toml::to_string(&C::defaults(kind, env)).unwrap(), &edits)
                };
                check_case::<C>(kind, env, Some(&text), &[], &[])
            })
            .unwrap();
    }

    #[test]
    fn ppo_set_and_env_args_never_panic() {
        fuzz_sets::<PpoConfig>(0xf00d_0001);
    }

    #[test]
    fn ppo_config_files_never_panic() {
        fuzz_files::<PpoConfig>(0xf00d_0002);
    }

    #[test]
    fn offpolicy_set_and_env_args_never_panic() {
        fuzz_sets::<OffPolicyConfig>(0xf00d_0003);
    }

    #[test]
    fn offpolicy_config_files_never_panic() {
        fuzz_files::<OffPolicyConfig>(0xf00d_0004);
    }

    #[test]
    fn evolution_set_and_config_files_never_panic() {
        fuzz_sets::<EvoConfig>(0xf00d_0005);
        fuzz_files::<EvoConfig>(0xf00d_0006);
    }

    #[test]
    fn alphazero_set_and_config_files_never_panic() {
        fuzz_sets::<AzConfig>(0xf00d_0007);
        fuzz_files::<AzConfig>(0xf00d_0008);
    }
}
