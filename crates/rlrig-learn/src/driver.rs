//! One run driver for every algorithm. Each learner (PPO/A2C/IMPALA, DDPG/TD3/SAC,
//! DQN, ES/GA, AlphaZero) implements [`Algorithm`]: how to build it, take one
//! iteration, describe that iteration as a metrics row, checkpoint and restore itself,
//! and evaluate what it learned. [`train`] owns everything else, the same way for all of
//! them: the memory check, the run directory, resume (from the newest intact
//! checkpoint), `config.toml`, `metrics.csv`, TensorBoard, progress, periodic
//! checkpoints, stop requests (Ctrl-C, SIGTERM, MPI-wide) and the final evaluation.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::LearnError;
use crate::backend::{BackendMaker, Native};
use crate::collective::Collective;
use crate::eval::{Episodes, EvalSummary};
use crate::run::{MetricsCsv, RunDir, TensorBoard, TensorSource, write_atomic};
use crate::stop::{Stop, StopFlag};

pub struct TrainOptions {
    pub run_dir: PathBuf,
    pub threads: usize,
    pub resume: bool,
    pub eval_episodes: usize,
    /// Write a Chrome/Perfetto trace of every stage here.
    pub trace: Option<PathBuf>,
    /// Iterations the trace keeps at each end (the rest are counted, not kept).
    pub trace_iterations: u64,
    /// Where the networks run (`--device`); `None` is the native CPU path. PPO, A2C,
    /// DDPG/TD3/SAC and AlphaZero take another device; evolution not yet.
    pub device: Option<BackendMaker>,
    /// Raised to stop early (Ctrl-C, SIGTERM): the driver finishes the iteration in
    /// progress, writes a checkpoint and returns with `interrupted` set.
    pub stop: StopFlag,
    /// The ranks of an MPI run (every rank computes the same run and shares its work,
    /// see [`Algorithm::join`]); rank 0 writes the run directory, a stop any rank gets
    /// stops every rank after the same iteration. `None`: one process.
    pub collective: Option<Arc<dyn Collective>>,
}

impl TrainOptions {
    /// Options for a run in `run_dir`, on the native CPU path, without a trace.
    pub fn new(
        run_dir: PathBuf,
        threads: usize,
        resume: bool,
        eval_episodes: usize,
        stop: StopFlag,
    ) -> TrainOptions {
        TrainOptions {
            run_dir,
            threads,
            resume,
            eval_episodes,
            trace: None,
            trace_iterations: crate::trace::DEFAULT_KEEP,
            device: None,
            stop,
            collective: None,
        }
    }
}

/// What a run's config says about the run as a whole.
pub struct RunShape<'a> {
    /// The checkpoints' `algo` (`ppo`, `sac`, `dqn`, `es`, `alphazero`, ...).
    pub algo: &'static str,
    pub env: &'a str,
    pub seed: u64,
    /// The budget in the unit the progress bar counts: env steps (PPO, replay
    /// learners), iterations (AlphaZero) or generations (ES/GA).
    pub budget: u64,
    /// Envs stepped at once (games in lock-step for AlphaZero, members for ES/GA).
    pub num_envs: usize,
    /// A checkpoint after at least this much of [`Algorithm::clock`] (0: only at the end).
    pub checkpoint_every: u64,
    /// What to lower when the run does not fit in memory.
    pub lower: &'static str,
}

/// One iteration as the run's files and progress display see it.
pub struct Record {
    /// The metrics.csv row (without newline), in [`Algorithm::METRICS_HEADER`]'s columns.
    pub row: String,
    /// The TensorBoard step and scalars.
    pub step: u64,
    pub scalars: Vec<(&'static str, f64)>,
    /// Work per second over the iteration (steps, samples or generations).
    pub rate: f64,
    /// Mean return of the episodes that ended in it (NaN if none, or not episodic).
    pub episode_return: f64,
}

/// What an iteration may need to know about the driver's plans.
pub struct Turn<'a> {
    /// Whether a stop was requested (asked within an iteration by learners whose
    /// iterations are long).
    pub stop: &'a dyn Fn() -> bool,
    /// [`Algorithm::clock`] at the last checkpoint, and the checkpoint interval.
    pub last_checkpoint: u64,
    pub checkpoint_every: u64,
}

/// Tensors of a checkpoint by name.
pub type Tensors = HashMap<String, Vec<f32>>;

/// The [`Algorithm`] methods that a learner `$t` answers with its own: `config` (its
/// `cfg` field, a `$config`), `device`, `set_backend` and `done`.
macro_rules! forward_to_learner {
    ($t:ty, $config:ty) => {
        fn config(&self) -> &$config {
            &self.cfg
        }
        fn device(&self) -> String {
            <$t>::device(self)
        }
        fn set_backend(
            &mut self,
            maker: &$crate::backend::BackendMaker,
        ) -> Result<(), $crate::LearnError> {
            <$t>::set_backend(self, maker)
        }
        fn done(&self) -> bool {
            <$t>::done(self)
        }
    };
}
pub(crate) use forward_to_learner;

/// A learner the [`train`] driver runs.
pub trait Algorithm: Sized {
    type Config: Clone + PartialEq + Serialize + DeserializeOwned + crate::memory::Estimated;
    type State: DeserializeOwned;
    /// Metrics of one iteration; the last one is the run summary's (AlphaZero's is
    /// also its eval.json).
    type Stats: Clone + Default + Serialize;
    /// Cumulative readings (stage times, counters) taken before an iteration.
    type Mark;

    /// metrics.csv's columns: deterministic learning metrics first, then wall-clock
    /// ones. The first column is [`Algorithm::position`].
    const METRICS_HEADER: &'static str;
    /// The number of leading deterministic columns of the header.
    const DETERMINISTIC_COLUMNS: usize;
    /// Whether the learner evaluates as it goes (AlphaZero's games): its last stats are
    /// its eval.json, and `eval_episodes` does not apply.
    const EVALUATES_IN_ITERATIONS: bool = false;

    /// The envs, networks and buffers of a new run on the native CPU path.
    fn build(cfg: Self::Config, threads: usize) -> Result<Self, LearnError>;
    fn shape(cfg: &Self::Config) -> RunShape<'_>;
    fn config(&self) -> &Self::Config;
    /// What runs the networks (`cpu`, `burn-cpu (flex)`, `wgpu: ...`).
    fn device(&self) -> String;
    fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), LearnError>;
    fn done(&self) -> bool;
    /// metrics.csv's first column at the last finished iteration: resuming drops rows
    /// past the checkpoint's.
    fn position(&self) -> u64;
    /// What `checkpoint_every` counts (env steps, iterations, generations).
    fn clock(&self) -> u64 {
        self.position()
    }
    /// Work done so far: env steps, self-play samples or generations.
    fn work(&self) -> u64;
    fn mark(&self) -> Self::Mark;
    /// One iteration; `None` when it stopped part way for a stop request (its partial
    /// sums go into the checkpoint).
    fn iterate(&mut self, turn: &Turn<'_>) -> Option<Self::Stats>;
    /// The iteration `s`, which began at `before` and took `wall` seconds, as a record.
    fn record(&self, s: &Self::Stats, before: &Self::Mark, wall: f64) -> Record;
    /// Writes a checkpoint of the run into `dir`.
    fn checkpoint(&self, dir: &RunDir) -> Result<(), LearnError>;
    /// Reads the newest intact checkpoint of the run in `dir`.
    fn load(dir: &RunDir, algo: &str) -> Result<(Self::Config, Self::State, Tensors), LearnError> {
        let ck = dir.load_tensors::<Self::Config, Self::State>(algo)?;
        Ok((ck.meta.config, ck.meta.state, ck.tensors))
    }
    fn restore(&mut self, state: Self::State, get: &mut dyn TensorSource)
    -> Result<(), LearnError>;
    /// `episodes` (at least 1) episodes of the learned policy, greedy; `None` for a
    /// learner that evaluates in its iterations.
    fn evaluate(&self, episodes: usize, seed: u64) -> Option<Episodes>;

    /// Whether a checkpoint now would hold everything (no rollout in flight).
    fn quiescent(&self) -> bool {
        true
    }
    /// Shares the work with the other ranks of `c` (an MPI run) so that the result
    /// stays the one-process run's, bit for bit. By default the native CPU path on
    /// `threads` threads splits each backward pass's row chunks over the ranks
    /// ([`Native::collective`]); ES/GA split a generation's members instead.
    fn join(&mut self, c: Arc<dyn Collective>, threads: usize) -> Result<(), LearnError> {
        self.set_backend(&Native::ranks_maker(threads, c))
    }
    /// Gathers what a checkpoint needs from the other ranks (PPO's envs, split over
    /// them): a collective call every rank makes before rank 0 writes a checkpoint.
    fn sync(&mut self) {}
    /// The stats the progress display and summary show after `s`, given the last ones.
    fn carry(_last: &Self::Stats, s: &Self::Stats) -> Self::Stats {
        s.clone()
    }
    fn enable_trace(&mut self, _keep: u64) {}
    /// Called once the last checkpoint is written (PPO writes its trace).
    fn finish(&self, _opts: &TrainOptions) -> Result<(), LearnError> {
        Ok(())
    }
}

/// Mean of the last ten finite values pushed (NaN before any): the progress display's
/// recent return, which iterations without a finished episode leave unchanged.
#[derive(Default)]
struct RecentMean(std::collections::VecDeque<f64>);

impl RecentMean {
    fn push(&mut self, v: f64) {
        if v.is_finite() {
            if self.0.len() == 10 {
                self.0.pop_front();
            }
            self.0.push_back(v);
        }
    }

    fn mean(&self) -> f64 {
        if self.0.is_empty() {
            f64::NAN
        } else {
            self.0.iter().sum::<f64>() / self.0.len() as f64
        }
    }
}

/// What the progress display gets after each iteration.
pub struct Report<'a, A: Algorithm> {
    pub alg: &'a A,
    /// The iteration's stats (through [`Algorithm::carry`]).
    pub stats: &'a A::Stats,
    /// Work per second over the iteration.
    pub rate: f64,
    /// Mean return over the last few iterations that finished episodes.
    pub recent_return: f64,
}

/// A run that ended: its budget spent, or stopped.
pub struct Finished<A: Algorithm> {
    /// The learner as it ended (config, counters, stage times, device).
    pub alg: A,
    /// The last iteration's stats (through [`Algorithm::carry`]); default if none ran.
    pub last: A::Stats,
    /// The final evaluation; `None` when the run was stopped early or the learner
    /// evaluates as it goes.
    pub eval: Option<EvalSummary>,
    /// Set when a stop request ended the run before its budget (a checkpoint of the
    /// last finished iteration was written).
    pub interrupted: Option<Stop>,
    pub wall: f64,
    /// [`Algorithm::clock`] at the checkpoint the run resumed from (env steps,
    /// iterations or generations).
    pub resumed_from: Option<u64>,
    /// [`Algorithm::work`] done by this process.
    pub work: u64,
}

/// The run directory of a training run: created for a new run, required to exist for
/// `--resume` (so a mistyped path is an error, not a new empty directory).
fn run_dir_for(opts: &TrainOptions) -> Result<RunDir, LearnError> {
    if opts.resume {
        RunDir::open(&opts.run_dir)
    } else {
        RunDir::new(&opts.run_dir)
    }
}

/// The error for a `--resume` whose config is not the checkpoint's, naming each key
/// that differs and both values.
fn config_mismatch<C: Serialize>(opts: &TrainOptions, saved: &C, given: &C) -> LearnError {
    let (a, b) = (serde_json::to_value(saved), serde_json::to_value(given));
    let keys = match (a, b) {
        (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) => a
            .iter()
            .filter(|(k, v)| b.get(*k) != Some(*v))
            .map(|(k, v)| {
                let g = b.get(k).map_or("nothing".to_string(), |g| g.to_string());
                format!("{k}: {v} in the checkpoint, {g} given")
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => String::new(),
    };
    LearnError::Mismatch(format!(
        "{}: the checkpoint's config differs from the one given ({keys}); resume with the same settings, or with --run-dir and no --config to use the run's config.toml",
        opts.run_dir.display()
    ))
}

/// With `--resume`, restores the newest intact checkpoint (its config must equal
/// `cfg`) and returns true; without, refuses a directory that already holds a run.
fn resume<A: Algorithm>(
    alg: &mut A,
    dir: &RunDir,
    opts: &TrainOptions,
    cfg: &A::Config,
) -> Result<bool, LearnError> {
    if !opts.resume {
        if dir.has_checkpoint() {
            return Err(LearnError::Mismatch(format!(
                "{} already holds a run: pass --resume to continue it, or choose another --run-dir",
                opts.run_dir.display()
            )));
        }
        return Ok(false);
    }
    let (saved, state, mut tensors) = A::load(dir, A::shape(cfg).algo)?;
    if saved != *cfg {
        return Err(config_mismatch(opts, &saved, cfg));
    }
    alg.restore(state, &mut |name| tensors.remove(name))
        .map_err(|e| LearnError::Mismatch(format!("{}: {e}", opts.run_dir.display())))?;
    Ok(true)
}

/// Refuses a run whose buffers would not fit in this machine's memory, before any
/// of them is allocated.
pub(crate) fn check_memory(
    need: &crate::memory::Estimate,
    what: &str,
    lower: &str,
) -> Result<(), LearnError> {
    need.check(what, lower)
}

/// Refuses an evaluation of more episodes of `env` than fit in memory (they are
/// stepped as one batch); `flag` is the one that sets them.
pub(crate) fn check_eval_memory(env: &str, episodes: usize, flag: &str) -> Result<(), LearnError> {
    check_memory(
        &crate::memory::evaluation(env, episodes),
        "the evaluation",
        flag,
    )
}

/// Writes a run's final evaluation (`eval.json`; only finished runs have one).
fn write_eval<T: Serialize>(dir: &RunDir, eval: &T) -> Result<(), LearnError> {
    write_atomic(
        &dir.path.join("eval.json"),
        serde_json::to_string_pretty(eval)
            .expect("plain numbers serialise")
            .as_bytes(),
    )
}

/// Trains (or resumes) a run of `A` in `opts.run_dir`.
pub fn train<A: Algorithm>(
    cfg: A::Config,
    opts: &TrainOptions,
    mut progress: impl FnMut(&Report<'_, A>),
) -> Result<Finished<A>, LearnError> {
    let shape = A::shape(&cfg);
    let (algo, every) = (shape.algo, shape.checkpoint_every);
    check_memory(
        &crate::memory::Estimated::memory_estimate(&cfg),
        &format!("train {algo}"),
        shape.lower,
    )?;
    check_eval_memory(shape.env, opts.eval_episodes, "--eval-episodes")?;
    let eval_seed = shape.seed + crate::EVAL_SEED_OFFSET;
    let dir = run_dir_for(opts)?;
    let mut alg = A::build(cfg.clone(), opts.threads)?;
    let resumed_from = resume(&mut alg, &dir, opts, &cfg)?.then(|| alg.clock());
    if let Some(maker) = &opts.device {
        alg.set_backend(maker)?;
    }
    // Only the writing process (rank 0, or the one process) has the files.
    let writes = opts.collective.as_ref().is_none_or(|c| c.rank() == 0);
    if let Some(c) = &opts.collective {
        if opts.device.is_some() {
            return Err(LearnError::Config(
                "MPI ranks share the native CPU path's work: run under mpirun with --device cpu"
                    .into(),
            ));
        }
        alg.join(c.clone(), opts.threads)?;
    }
    if opts.trace.is_some() && writes {
        alg.enable_trace(opts.trace_iterations);
    }
    let mut files = if writes {
        dir.write_config_of(algo, alg.config())?;
        Some((
            MetricsCsv::open_with(&dir.path, A::METRICS_HEADER, alg.position())?,
            TensorBoard::create(&dir.path)?,
        ))
    } else {
        None
    };
    let start = Instant::now();
    let work0 = alg.work();
    let mut recent = RecentMean::default();
    let mut last = A::Stats::default();
    let mut last_ckpt = alg.clock();
    let mut interrupted = None;
    // Under MPI, a learner asks about stops only through the last agreed one, so that
    // every rank takes the same branches (a replay learner stops within an iteration
    // for a stop of its own process only; ranks stop after one).
    let agreed_stop = std::cell::Cell::new(None);
    let stop = || match &opts.collective {
        None => opts.stop.requested().is_some(),
        Some(_) => agreed_stop.get().is_some(),
    };
    while !alg.done() {
        let t0 = Instant::now();
        let before = alg.mark();
        let turn = Turn {
            stop: &stop,
            last_checkpoint: last_ckpt,
            checkpoint_every: every,
        };
        let Some(s) = alg.iterate(&turn) else {
            interrupted = agreed_stop.get().or(opts.stop.requested());
            break;
        };
        // Every rank learns of a stop any rank got, after the same iteration.
        let agreed = match &opts.collective {
            None => opts.stop.requested(),
            Some(c) => crate::collective::agree_stop(c.as_ref(), opts.stop.requested()),
        };
        agreed_stop.set(agreed);
        let r = alg.record(&s, &before, t0.elapsed().as_secs_f64());
        if let Some((csv, tb)) = files.as_mut() {
            csv.push(r.row)?;
            tb.scalars(r.step, &r.scalars)?;
        }
        recent.push(r.episode_return);
        last = A::carry(&last, &s);
        progress(&Report {
            alg: &alg,
            stats: &last,
            rate: r.rate,
            recent_return: recent.mean(),
        });
        // A stop that came during a prefetching iteration waits one more (short,
        // non-prefetching) iteration, so the checkpoint holds no rollout in flight.
        interrupted = agreed.filter(|_| alg.quiescent() && !alg.done());
        if interrupted.is_some() {
            break;
        }
        if every > 0 && alg.clock() - last_ckpt >= every && !alg.done() {
            if opts.collective.is_some() {
                alg.sync();
            }
            if writes {
                alg.checkpoint(&dir)?;
            }
            // Every rank keeps the clock: PPO plans its prefetching by it.
            last_ckpt = alg.clock();
        }
    }
    if opts.collective.is_some() {
        alg.sync();
    }
    if writes {
        alg.checkpoint(&dir)?;
    }
    let wall = start.elapsed().as_secs_f64();
    alg.finish(opts)?;
    // No final evaluation for a stopped run, or with eval_episodes = 0.
    let mut eval = None;
    if interrupted.is_none() {
        if A::EVALUATES_IN_ITERATIONS {
            if writes {
                write_eval(&dir, &last)?;
            }
        } else if opts.eval_episodes > 0 {
            eval = alg
                .evaluate(opts.eval_episodes, eval_seed)
                .map(|e| EvalSummary::of(&e, eval_seed));
        }
    }
    if let (true, Some(e)) = (writes, &eval) {
        write_eval(&dir, e)?;
    }
    Ok(Finished {
        work: alg.work() - work0,
        alg,
        last,
        eval,
        interrupted,
        wall,
        resumed_from,
    })
}
