//! `rlrig bench ...`: throughput measurements. Benchmarks report; they never assert.

use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use rlrig_env::spec;
use rlrig_lab::throughput::{self, Stepping};

use crate::default_threads;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Environment stepping throughput with random actions.
    Env(EnvBenchArgs),
    /// The versioned workload suite: every env stepping only / with inference / with
    /// training, plus PPO CartPole; results with a machine fingerprint for `rlrig compare`.
    Suite(SuiteArgs),
    /// AlphaZero self-play throughput on Connect Four: samples/s (one sample = one move
    /// chosen after a full search) for search only (uniform priors, no network), with
    /// the network's inference, and with training as well.
    Alphazero(AzBenchArgs),
    /// Whether the presets solve their envs, and how fast: the env x algorithm matrix,
    /// each cell trained over --seeds (packed onto the cores); per cell the final greedy
    /// score (mean and 95 % interval over seeds), the seeds reaching the threshold, and
    /// the env steps and training time until the training return (mean of the last 20
    /// episodes) first reaches it. Writes JSON for `rlrig compare` and a PNG of the
    /// learning curves. Each seed is deterministic (its own `train` run); wall times are
    /// not. Ctrl-C checkpoints the cell in progress; `--resume` continues.
    Learn(crate::bench_learn::LearnBenchArgs),
}

#[derive(Args)]
pub struct AzBenchArgs {
    /// Simulations per search.
    #[arg(long, default_value_t = 500)]
    simulations: usize,
    /// Concurrent games (the batch of every network call).
    #[arg(long, default_value_t = 256)]
    games: usize,
    /// Lock-step moves measured per stage (samples = games x moves).
    #[arg(long, default_value_t = 8)]
    moves: usize,
    /// Hidden layer sizes of the network (default 128,128: pgx's example).
    #[arg(long, value_delimiter = ',', default_value = "128,128")]
    hidden: Vec<usize>,
    /// Gumbel AlphaZero root selection instead of PUCT with Dirichlet noise.
    #[arg(long)]
    gumbel: bool,
    /// Also measure self-play with this many actor threads, each searching games/N
    /// games, sharing one batching inference server thread (not bit-reproducible:
    /// batches form by timing). 0 skips it.
    #[arg(long, default_value_t = 0)]
    actors: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn bench_alphazero(a: AzBenchArgs) -> Result<()> {
    if a.simulations == 0 || a.games == 0 || a.moves == 0 {
        bail!("--simulations, --games and --moves must be at least 1");
    }
    if a.hidden.is_empty() || a.hidden.contains(&0) {
        bail!("--hidden must list positive sizes");
    }
    if a.actors > a.games {
        bail!("--actors {} exceeds --games {}", a.actors, a.games);
    }
    let r = throughput::alphazero_throughput(&throughput::AzBench {
        simulations: a.simulations,
        games: a.games,
        moves: a.moves,
        hidden: a.hidden.clone(),
        gumbel: a.gumbel,
        actors: a.actors,
    })?;
    if a.json {
        let j = serde_json::json!({
            "actors": a.actors,
            "actors_samples_per_sec": r.actors.map(|x| x.0),
            "actors_mean_batch": r.actors.map(|x| x.1),
            "simulations": a.simulations, "games": a.games, "moves": a.moves,
            "hidden": a.hidden, "gumbel": a.gumbel, "samples_per_sec": r.with_training,
            "search_only_samples_per_sec": r.search_only,
            "with_inference_samples_per_sec": r.with_inference,
            "with_training_samples_per_sec": r.with_training,
            "leaf_evaluations_per_sec": r.with_inference * a.simulations as f64,
            "inference_share": r.inference_share, "training_updates": r.training_updates,
        });
        outln!("{j}");
    } else {
        outln!(
            "ConnectFour AlphaZero self-play ({}), {} simulations, {} games in lock-step, hidden {:?}, 1 thread",
            if a.gumbel {
                "Gumbel root"
            } else {
                "PUCT + Dirichlet"
            },
            a.simulations,
            a.games,
            a.hidden
        );
        outln!("search only:  {:.0} samples/s", r.search_only);
        outln!(
            "+ inference:  {:.0} samples/s ({:.2} M leaf evaluations/s, {:.0}% of the time in the network)",
            r.with_inference,
            r.with_inference * a.simulations as f64 / 1e6,
            100.0 * r.inference_share
        );
        outln!(
            "+ training:   {:.0} samples/s ({} updates of 256)",
            r.with_training,
            r.training_updates
        );
        if let Some((sps, batch)) = r.actors {
            outln!(
                "{} actor threads + inference server: {sps:.0} samples/s (mean batch {batch:.0} rows)",
                a.actors
            );
        }
    }
    Ok(())
}

#[derive(Args)]
pub struct SuiteArgs {
    /// Short measurements (under two minutes on two cores), no full training run.
    #[arg(long)]
    quick: bool,
    /// Write the results (JSON) here, atomically.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Worker threads (default: all logical cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Only workloads whose name contains this (e.g. `env/CartPole-v1`).
    #[arg(long)]
    only: Option<String>,
}

fn suite(a: SuiteArgs) -> Result<()> {
    let threads = a.threads.unwrap_or_else(default_threads);
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    let r = rlrig_lab::suite::run_suite(a.quick, threads, a.only.as_deref(), |w| {
        eprintln!("running {w}")
    })?;
    outln!("{}", r.machine);
    outln!("| workload | stepping | +inference | +training |\n|---|---:|---:|---:|");
    for w in &r.workloads {
        let f = |v: Option<f64>| v.map_or("-".into(), rlrig_lab::plot::human);
        outln!(
            "| {} | {} | {} | {} |",
            w.name,
            f(w.stepping),
            f(w.with_inference),
            f(w.with_training)
        );
    }
    if let Some(p) = &a.out {
        let json = serde_json::to_string_pretty(&r)?;
        rlrig_learn::run::write_atomic(p, json.as_bytes())?;
        outln!("results: {}", p.display());
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// All envs step on every call (deterministic at any thread count).
    Sync,
    /// EnvPool-style send/recv of the first `--batch-size` envs to finish
    /// (batch composition depends on timing: not bit-reproducible).
    Async,
}

/// What `bench env --device gpu` takes from the arguments (unread in a build without
/// the `gpu` feature, which refuses the device).
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub struct BenchOnDevice {
    pub num_envs: usize,
    pub steps: u64,
    pub seed: u64,
    pub warmup: f64,
    pub json: bool,
}

impl BenchOnDevice {
    fn from(a: &EnvBenchArgs) -> Result<BenchOnDevice> {
        if a.threads.is_some() || a.mode != Mode::Sync || a.batch_size.is_some() {
            bail!(
                "--device gpu steps every env on the device: --threads, --mode and --batch-size do not apply"
            );
        }
        if !a.env_args.is_empty() {
            bail!(
                "--device gpu: the device envs run their default parameters; --env-arg is not supported there yet"
            );
        }
        if !(a.warmup.is_finite() && a.warmup >= 0.0) {
            bail!(
                "--warmup must be a number of seconds >= 0, got {}",
                a.warmup
            );
        }
        Ok(BenchOnDevice {
            num_envs: a.num_envs,
            steps: a.steps.unwrap_or(50_000_000),
            seed: a.seed,
            warmup: a.warmup,
            json: a.json,
        })
    }
}

#[derive(Args)]
pub struct EnvBenchArgs {
    /// Environment id.
    #[arg(long, default_value = "CartPole-v1")]
    env: String,
    /// Environments stepped together.
    #[arg(long, default_value_t = 4096)]
    num_envs: usize,
    /// Worker threads (default: all logical cores). Sync mode uses fewer when the
    /// batch is too small to pay for waking them (reported as `threads_used`).
    #[arg(long)]
    threads: Option<usize>,
    /// Total environment steps to time, all envs together (rounded up to whole batches).
    /// Default: as many as take about 3 s at the rate the warm-up measured (CartPole's
    /// tens of millions and Atari's thousands alike); `--device gpu`: 50,000,000.
    #[arg(long)]
    steps: Option<u64>,
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    mode: Mode,
    /// Async mode: envs returned per recv() (default: half of --num-envs).
    #[arg(long)]
    batch_size: Option<usize>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// An env parameter, as `gym.make(id, KEY=VALUE)` (repeatable), e.g.
    /// `fast_trig=true` for Acrobot-v1; `rlrig envs` lists them.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", value_parser = crate::cli_envs::parse_env_arg)]
    env_args: Vec<(String, String)>,
    /// Untimed stepping before the timed part, in seconds (at least 10 batches). The
    /// second core of a VM reaches full speed only after tens of milliseconds of work,
    /// and bench/peers/ warms every peer up for the same 0.3 s.
    #[arg(long, default_value_t = 0.3)]
    warmup: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// `cpu` (rlrig-env's batched envs on --threads) or `gpu`: the env's device kernel
    /// (build with `--features gpu`; CartPole, Acrobot, MountainCar(Continuous),
    /// Pendulum), one thread per env with its state in registers, many steps per
    /// dispatch, reset on the device; the time runs from the first submission to the
    /// device's completion of the last.
    #[arg(long, default_value = "cpu")]
    device: String,
}

/// Runs a benchmark; `Some` when a signal stopped `bench learn` (its exit code is the
/// signal's).
pub fn run(cmd: BenchCommand) -> Result<Option<rlrig_learn::stop::Stop>> {
    match cmd {
        BenchCommand::Env(a) => bench_env(a).map(|()| None),
        BenchCommand::Suite(a) => suite(a).map(|()| None),
        BenchCommand::Alphazero(a) => bench_alphazero(a).map(|()| None),
        BenchCommand::Learn(a) => crate::bench_learn::run(a),
    }
}

/// `2.4 k steps/s`, `41.30 M steps/s`: the lab's number format, which keeps a slow
/// env's thousands readable.
fn rate(sps: f64) -> String {
    format!("{} steps/s", rlrig_lab::plot::human(sps))
}

fn bench_env(a: EnvBenchArgs) -> Result<()> {
    let s = spec(&a.env)?;
    match a.device.as_str() {
        "cpu" => {}
        "gpu" => return crate::train_gpu::bench_env_gpu(&a.env, &BenchOnDevice::from(&a)?),
        other => bail!("--device {other}: unknown device for bench env (known: cpu, gpu)"),
    }
    let threads = a.threads.unwrap_or_else(default_threads);
    if a.num_envs == 0 {
        bail!("--num-envs must be at least 1");
    }
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    if !(a.warmup.is_finite() && a.warmup >= 0.0) {
        bail!(
            "--warmup must be a number of seconds >= 0, got {}",
            a.warmup
        );
    }
    let b = throughput::EnvBench {
        env: a.env.clone(),
        env_args: a.env_args.clone(),
        num_envs: a.num_envs,
        threads,
        steps: a.steps,
        stepping: match a.mode {
            Mode::Sync => Stepping::Sync,
            Mode::Async => Stepping::Async {
                batch_size: a.batch_size.unwrap_or((a.num_envs / 2).max(1)),
            },
        },
        seed: a.seed,
        warmup: Duration::from_secs_f64(a.warmup),
    };
    throughput::env_memory(&b)?.check("bench env", "--num-envs")?;
    let r = throughput::env_throughput(&b)?;
    let (env_steps, seconds, batch_size, used) = (r.steps, r.seconds, r.batch_size, r.threads_used);
    let sps = r.steps_per_sec();
    let mode = match a.mode {
        Mode::Sync => "sync",
        Mode::Async => "async",
    };
    if a.json {
        let v = serde_json::json!({
            "env": s.id,
            "num_envs": a.num_envs,
            "threads": threads,
            "threads_used": used,
            "mode": mode,
            "warmup_seconds": a.warmup,
            "env_args": a.env_args.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "batch_size": batch_size,
            "steps": env_steps,
            "seconds": seconds,
            "steps_per_sec": sps,
            "steps_per_sec_per_thread": sps / threads as f64,
        });
        outln!("{v}");
    } else {
        outln!(
            "{} {mode}: {} envs, {threads} thread(s){}{}: {} total, {} per thread ({env_steps} steps in {seconds:.3} s)",
            s.id,
            a.num_envs,
            if used != threads {
                format!(" ({used} used: batch too small to pay for more)")
            } else {
                String::new()
            },
            if a.mode == Mode::Async {
                format!(", batch {batch_size}")
            } else {
                String::new()
            },
            rate(sps),
            rate(sps / threads as f64),
        );
    }
    Ok(())
}
