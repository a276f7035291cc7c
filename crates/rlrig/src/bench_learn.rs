//! `rlrig bench learn`: the presets' matrix trained over seeds (rlrig-lab's `learn`
//! holds the matrix, the statistics and the file format). Each cell is `rlrig train
//! ALGO --env ID --seeds LIST` run in this process, so its seeds are packed onto the
//! cores as they are for a user, and each seed's run directory stays a normal run
//! (`rlrig eval --run`, `play`, `plot`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use rlrig_lab::learn::{self, Cell, CellResult, Curve, LearnResult, SeedOutcome};
use rlrig_learn::run::{Metrics, write_atomic};
use rlrig_learn::stop::Stop;

use crate::default_threads;
use crate::train_gpu::SeedList;

/// The algorithms `train` packs with `--seeds` (the ones `bench learn` can run).
const ALGOS: [&str; 7] = ["ppo", "a2c", "impala", "ddpg", "td3", "sac", "dqn"];

#[derive(Args)]
pub struct LearnBenchArgs {
    /// Only the cells that are cheap here (PPO on CartPole, Acrobot and MountainCar, SAC
    /// on Pendulum: under a minute per seed on two cores). Without it, the whole matrix:
    /// hours on two cores (BipedalWalker and SAC LunarLanderContinuous dominate).
    #[arg(long)]
    quick: bool,
    /// Only cells of these envs (repeatable, or comma-separated).
    #[arg(long = "env", value_name = "ID", value_delimiter = ',')]
    envs: Vec<String>,
    /// Only cells of these algorithms (repeatable, or comma-separated). Naming both
    /// --env and --algo also runs pairs the matrix does not hold (with the env's
    /// threshold in the matrix, or --threshold).
    #[arg(long = "algo", value_name = "ALGO", value_delimiter = ',')]
    algos: Vec<String>,
    /// Seeds of every cell, as `train --seeds` takes them (`1-5`, `1,3,7`).
    #[arg(long, value_name = "LIST", default_value = "1-5", value_parser = crate::train_gpu::seed_list)]
    seeds: SeedList,
    /// Worker threads in all; the seeds of a cell are packed onto them (see --jobs).
    #[arg(long, default_value_t = default_threads())]
    threads: usize,
    /// Runs at a time within a cell (default: one per --threads, at most one per seed).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Train every cell for this many env steps instead of its budget: a smoke run of
    /// the pipeline, whose scores are not the benchmark's.
    #[arg(long, value_name = "N")]
    total_steps: Option<u64>,
    /// The greedy score that counts as solved, for every selected cell (needed for a
    /// pair whose env the matrix does not hold).
    #[arg(long, value_name = "SCORE", allow_hyphen_values = true)]
    threshold: Option<f64>,
    /// Override one hyperparameter in every cell, as `train --set KEY=VALUE`
    /// (repeatable); recorded in the results.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Episodes of each seed's final greedy evaluation (the cell's score).
    #[arg(long, default_value_t = 20)]
    eval_episodes: usize,
    /// Where the runs go: DIR/<env>-<algo>/seed<N>, one packed launch per cell.
    #[arg(long, default_value = "runs/bench-learn")]
    dir: PathBuf,
    /// The results, for `rlrig compare` (default DIR/learn.json; rewritten after every
    /// cell).
    #[arg(long, value_name = "FILE.json")]
    out: Option<PathBuf>,
    /// Learning curves, mean over seeds with a min-max band, against env steps and
    /// training time (default DIR/learn.png).
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
    /// Continue in DIR: cells whose seeds all finished are read as they are, the others
    /// resume their seeds from their checkpoints.
    #[arg(long)]
    resume: bool,
}

/// Runs the selected cells; `Some` when a signal stopped them (the cell in progress
/// checkpointed its seeds; `--resume` continues).
pub fn run(a: LearnBenchArgs) -> Result<Option<Stop>> {
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if a.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    if a.eval_episodes == 0 {
        bail!(
            "--eval-episodes must be at least 1: a cell's score is its seeds' final greedy evaluation"
        );
    }
    if let Some(t) = a.threshold
        && !t.is_finite()
    {
        bail!("--threshold must be a number, got {t}");
    }
    for algo in &a.algos {
        if !ALGOS.contains(&algo.as_str()) {
            bail!("--algo {algo}: not one of {}", ALGOS.join(", "));
        }
    }
    for env in &a.envs {
        rlrig_env::spec(env).with_context(|| format!("--env {env}"))?;
    }
    let cells = learn::select(a.quick, &a.envs, &a.algos, a.threshold)?;
    let out = a.out.clone().unwrap_or_else(|| a.dir.join("learn.json"));
    let plot = a.plot.clone().unwrap_or_else(|| a.dir.join("learn.png"));
    if !a.resume && std::fs::read_dir(&a.dir).is_ok_and(|mut d| d.next().is_some()) {
        bail!(
            "{} is not empty: pass --resume to continue it, or choose another --dir",
            a.dir.display()
        );
    }
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let mut result = LearnResult::new(a.quick, a.threads, a.seeds.0.clone(), a.set.clone())?;
    let mut curves = Vec::new();
    outln!(
        "bench learn: {} cell{}, seeds {}, {} threads, in {}",
        cells.len(),
        if cells.len() == 1 { "" } else { "s" },
        seed_text(&a.seeds.0),
        a.threads,
        a.dir.display()
    );
    for cell in &cells {
        let dir = a
            .dir
            .join(format!("{}-{}", cell.env.replace('/', "-"), cell.algo));
        outln!(
            "== {} {} (threshold {})",
            cell.algo,
            cell.env,
            cell.threshold
        );
        let start = Instant::now();
        let (error, stopped) = if a.resume && all_done(&dir, &a.seeds.0) {
            outln!("(finished in an earlier leg: read from {})", dir.display());
            (None, None)
        } else {
            let argv = train_args(&a, cell, &dir);
            match crate::train::train(crate::train::parse(&argv)?, &argv) {
                Ok(stop) => (None, stop),
                Err(e) => (Some(format!("{e:#}")), None),
            }
        };
        if let Some(stop) = stopped {
            write_results(&out, &result)?;
            outln!(
                "stopped by {}: the seeds of {} {} checkpointed; continue with the same command and --resume",
                stop.signal_name(),
                cell.algo,
                cell.env
            );
            return Ok(Some(stop));
        }
        let (seeds, curve) = outcomes(&dir, cell.threshold)?;
        let r = CellResult::of(cell, &dir, seeds, start.elapsed().as_secs_f64(), error);
        outln!("{}", r.line());
        curves.push(rlrig_lab::plot::BandRow {
            title: r.name(),
            by_steps: learn::band(&curve.0, 100),
            by_time: learn::band(&curve.1, 100),
            threshold: cell.threshold,
        });
        result.cells.push(r);
        write_results(&out, &result)?;
    }
    rlrig_lab::plot::learning_bands(&plot, &curves)?;
    outln!();
    outln!(
        "{}",
        learn::compare_table(&[(stem(&out), result.clone())]).trim_end()
    );
    outln!("results: {}  curves: {}", out.display(), plot.display());
    let failed: Vec<String> = result
        .cells
        .iter()
        .filter(|c| c.error.is_some())
        .map(CellResult::name)
        .collect();
    if !failed.is_empty() {
        bail!(
            "{} of {} cells failed: {} (each cell's seed<N>.log says why)",
            failed.len(),
            result.cells.len(),
            failed.join(", ")
        );
    }
    Ok(None)
}

fn seed_text(seeds: &[u64]) -> String {
    seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn stem(p: &Path) -> String {
    p.file_stem().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// `train ALGO --env ID --seeds LIST ...` for one cell.
fn train_args(a: &LearnBenchArgs, cell: &Cell, dir: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = [
        "train",
        &cell.algo,
        "--env",
        &cell.env,
        "--seeds",
        &seed_text(&a.seeds.0),
        "--threads",
        &a.threads.to_string(),
        "--eval-episodes",
        &a.eval_episodes.to_string(),
        "--quiet",
        "--run-dir",
    ]
    .map(OsString::from)
    .into();
    v.push(dir.into());
    if let Some(n) = a.total_steps.or(cell.steps) {
        v.extend(["--total-steps".into(), n.to_string().into()]);
    }
    for kv in &a.set {
        v.extend(["--set".into(), kv.into()]);
    }
    if let Some(j) = a.jobs {
        v.extend(["--jobs".into(), j.to_string().into()]);
    }
    if a.resume && dir.exists() {
        v.push("--resume".into());
    }
    v
}

/// Whether an earlier leg finished every seed of `seeds` in `dir`.
fn all_done(dir: &Path, seeds: &[u64]) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("seeds.json")) else {
        return false;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    let runs = v["runs"].as_array().cloned().unwrap_or_default();
    seeds.iter().all(|s| {
        runs.iter()
            .any(|r| r["seed"].as_u64() == Some(*s) && r["status"] == "done")
    })
}

type Points = Vec<Vec<(f64, f64)>>;

/// Each seed's outcome from the cell's `seeds.json` and the seeds' metrics.csv, and the
/// seeds' curves (return against steps, against training seconds).
fn outcomes(dir: &Path, threshold: f64) -> Result<(Vec<SeedOutcome>, (Points, Points))> {
    let path = dir.join("seeds.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        // The launch was refused before any seed started: nothing to read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let (mut seeds, mut by_steps, mut by_time) = (Vec::new(), Vec::new(), Vec::new());
    for r in v["runs"].as_array().into_iter().flatten() {
        let seed = r["seed"]
            .as_u64()
            .with_context(|| format!("{}: a run without a seed", path.display()))?;
        let run_dir = PathBuf::from(r["run_dir"].as_str().unwrap_or_default());
        // A seed that failed before writing metrics has none.
        let curve = Metrics::read(&run_dir)
            .ok()
            .map(|m| {
                let c = Curve::of(&m)
                    .map_err(|e| anyhow::anyhow!("{}/metrics.csv: {e}", run_dir.display()))?;
                Ok::<_, anyhow::Error>((c, m))
            })
            .transpose()?;
        let mut o = SeedOutcome {
            seed,
            status: r["status"].as_str().unwrap_or("failed").into(),
            final_return: r["eval"]["mean_return"].as_f64(),
            env_steps: None,
            train_seconds: None,
            wall_seconds: r["wall_seconds"].as_f64().unwrap_or(f64::NAN),
            steps_to_threshold: None,
            seconds_to_threshold: None,
        };
        if let Some((c, m)) = curve {
            o.env_steps = m
                .column("global_step")
                .and_then(|i| m.rows.last().map(|r| r[i]));
            o.train_seconds = Some(c.total_seconds);
            if let Some((st, se)) = c.crossing(threshold) {
                o.steps_to_threshold = Some(st);
                o.seconds_to_threshold = Some(se);
            }
            by_steps.push(
                c.steps
                    .iter()
                    .copied()
                    .zip(c.returns.iter().copied())
                    .collect(),
            );
            by_time.push(
                c.seconds
                    .iter()
                    .copied()
                    .zip(c.returns.iter().copied())
                    .collect(),
            );
        }
        seeds.push(o);
    }
    Ok((seeds, (by_steps, by_time)))
}

fn write_results(out: &Path, r: &LearnResult) -> Result<()> {
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    write_atomic(out, &serde_json::to_vec_pretty(r)?)?;
    Ok(())
}
