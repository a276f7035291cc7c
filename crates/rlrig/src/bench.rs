//! `rlrig bench ...`: throughput measurements. Benchmarks report; they never assert.

use std::time::Instant;

use anyhow::{Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use rlrig_env::{RandomActions, VecConfig, make_async, make_sync, spec};

use crate::default_threads;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Environment stepping throughput with random actions.
    Env(EnvBenchArgs),
    /// The versioned workload suite: every env stepping only / with inference / with
    /// training, plus PPO CartPole; results with a machine fingerprint for `rlrig compare`.
    Suite(SuiteArgs),
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
    })
    .map_err(anyhow::Error::msg)?;
    outln!("{}", r.machine);
    outln!("| workload | stepping | +inference | +training |\n|---|---:|---:|---:|");
    for w in &r.workloads {
        let f = |v: Option<f64>| v.map_or("-".into(), rlrig_lab::suite::human);
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
    #[arg(long, default_value_t = 50_000_000)]
    steps: u64,
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    mode: Mode,
    /// Async mode: envs returned per recv() (default: half of --num-envs).
    #[arg(long)]
    batch_size: Option<usize>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Env(a) => bench_env(a),
        BenchCommand::Suite(a) => suite(a),
    }
}

fn bench_env(a: EnvBenchArgs) -> Result<()> {
    let s = spec(&a.env)?;
    let threads = a.threads.unwrap_or_else(default_threads);
    if a.num_envs == 0 {
        bail!("--num-envs must be at least 1");
    }
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    let cfg = VecConfig::new(a.num_envs).threads(threads).seed(a.seed);
    const TABLE_BATCHES: usize = 8;
    let table = RandomActions::new(&s.action_space, a.num_envs * TABLE_BATCHES, a.seed);
    let mut used = threads;
    let (env_steps, seconds, batch_size) = match a.mode {
        Mode::Sync => {
            let mut env = make_sync(&a.env, cfg)?;
            used = env.threads_used();
            let iters = a.steps.div_ceil(a.num_envs as u64).max(1);
            let n = a.num_envs;
            for k in 0..10usize {
                env.step(table.slice((k % TABLE_BATCHES) * n, n))?;
            }
            let t = Instant::now();
            for k in 0..iters as usize {
                env.step(table.slice((k % TABLE_BATCHES) * n, n))?;
            }
            (iters * n as u64, t.elapsed().as_secs_f64(), n)
        }
        Mode::Async => {
            let bs = a.batch_size.unwrap_or((a.num_envs / 2).max(1));
            let mut env = make_async(&a.env, cfg, bs)?;
            env.async_reset()?;
            let iters = a.steps.div_ceil(bs as u64).max(1);
            let mut ids = vec![0usize; bs];
            let mut run =
                |iters: u64, env: &mut Box<dyn rlrig_env::AsyncVecEnvDyn>| -> Result<()> {
                    for k in 0..iters as usize {
                        ids.copy_from_slice(env.recv()?.env_ids);
                        env.send(table.slice((k % TABLE_BATCHES) * bs, bs), &ids)?;
                    }
                    Ok(())
                };
            run(10, &mut env)?;
            let t = Instant::now();
            run(iters, &mut env)?;
            (iters * bs as u64, t.elapsed().as_secs_f64(), bs)
        }
    };
    let sps = env_steps as f64 / seconds;
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
            "batch_size": batch_size,
            "steps": env_steps,
            "seconds": seconds,
            "steps_per_sec": sps,
            "steps_per_sec_per_thread": sps / threads as f64,
        });
        outln!("{v}");
    } else {
        outln!(
            "{} {mode}: {} envs, {threads} thread(s){}{}: {:.2} M steps/s total, {:.2} M steps/s per thread ({env_steps} steps in {seconds:.3} s)",
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
            sps / 1e6,
            sps / 1e6 / threads as f64,
        );
    }
    Ok(())
}
