//! The run driver of the replay-buffer learners (DDPG, TD3, SAC, DQN): one
//! [`ReplayRun`] trait that each implements, and one [`train_replay`] that owns the
//! run directory, resume, metrics.csv, TensorBoard, progress, checkpoints and the final
//! evaluation for all of them.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::backend::BackendMaker;
use crate::dqn::{Dqn, DqnConfig, DqnState, QNet};
use crate::offpolicy::{ChunkStats, NamedTensor, Nets, OffPolicy, OffPolicyConfig, OffPolicyState};
use crate::ppo::StageTimes;
use crate::run::{MetricsCsv, RunDir, RunError, TensorBoard};
use crate::stop::Stop;
use crate::trainer::{
    EVAL_SEED_OFFSET, EvalSummary, RecentMean, TrainOptions, check_eval_memory, check_memory,
    resume_tensors, run_dir_for, write_eval,
};

/// metrics.csv columns of replay-buffer runs: learning metrics first (deterministic),
/// then wall-clock stage times. DQN writes its exploration epsilon in `alpha` and has no
/// actor loss.
pub const OFFPOLICY_METRICS_HEADER: &str = "global_step,episodes,episode_return,episode_length,updates,qf_loss,actor_loss,q_value,alpha,time_env,time_inference,time_learner,time_other,steps_per_sec";

/// Number of leading deterministic columns of [`OFFPOLICY_METRICS_HEADER`].
pub const OFFPOLICY_DETERMINISTIC_COLUMNS: usize = 9;

/// What every replay-buffer run's config says about the run as a whole.
pub struct RunShape<'a> {
    /// The checkpoints' `algo` (`ddpg`, `td3`, `sac`, `dqn`).
    pub algo: &'static str,
    pub env: &'a str,
    pub seed: u64,
    pub total_steps: u64,
    pub num_envs: usize,
    pub checkpoint_every: u64,
    /// What to lower when the run does not fit in memory.
    pub lower: &'static str,
}

/// A run that learns from a replay buffer in chunks of `log_every` env steps.
pub trait ReplayRun: Sized {
    type Config: Clone + PartialEq + Serialize + DeserializeOwned;
    type State: DeserializeOwned;

    /// The envs, networks and buffer of a new run on the native CPU path.
    fn build(cfg: Self::Config, threads: usize) -> Result<Self, String>;
    fn shape(cfg: &Self::Config) -> RunShape<'_>;
    fn memory_estimate(cfg: &Self::Config) -> crate::memory::Estimate;
    fn config(&self) -> &Self::Config;
    /// The env steps a checkpoint state was taken at.
    fn state_step(state: &Self::State) -> u64;
    fn global_step(&self) -> u64;
    fn updates(&self) -> u64;
    fn times(&self) -> StageTimes;
    fn device(&self) -> String;
    fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), String>;
    /// Runs to the next logging boundary, asking `stop` before each collection step:
    /// `None` when it said stop first (the chunk's sums go into the checkpoint).
    fn chunk(&mut self, stop: &dyn Fn() -> bool) -> Option<ChunkStats>;
    /// Writes a checkpoint of the run into `dir`.
    fn checkpoint(&self, dir: &RunDir) -> Result<(), RunError>;
    fn restore(
        &mut self,
        state: Self::State,
        get: &mut dyn FnMut(&str) -> Option<Vec<f32>>,
    ) -> Result<(), String>;
    fn evaluate(&self, episodes: usize, seed: u64) -> Vec<f64>;
}

/// Writes `state` and `tensors` as the checkpoint at `step` of a run of `algo`.
fn save<C: Serialize, S: Serialize>(
    dir: &RunDir,
    algo: &str,
    step: u64,
    cfg: &C,
    (state, tensors): (S, Vec<NamedTensor<'_>>),
) -> Result<(), RunError> {
    let tensors: Vec<(&str, &[f32])> = tensors.iter().map(|(n, v)| (*n, &**v)).collect();
    dir.save_tensors(algo, step, cfg, &state, &tensors)?;
    Ok(())
}

impl ReplayRun for OffPolicy {
    type Config = OffPolicyConfig;
    type State = OffPolicyState;

    fn build(cfg: OffPolicyConfig, threads: usize) -> Result<Self, String> {
        OffPolicy::new(cfg, threads)
    }
    fn shape(c: &OffPolicyConfig) -> RunShape<'_> {
        RunShape {
            algo: c.algo.name(),
            env: &c.env,
            seed: c.seed,
            total_steps: c.total_steps,
            num_envs: c.num_envs,
            checkpoint_every: c.checkpoint_every,
            lower: "buffer_size (--set buffer_size=N) or --num-envs",
        }
    }
    fn memory_estimate(c: &OffPolicyConfig) -> crate::memory::Estimate {
        c.memory_estimate()
    }
    fn config(&self) -> &OffPolicyConfig {
        &self.cfg
    }
    fn state_step(st: &OffPolicyState) -> u64 {
        st.global_step
    }
    fn global_step(&self) -> u64 {
        self.global_step
    }
    fn updates(&self) -> u64 {
        self.updates
    }
    fn times(&self) -> StageTimes {
        self.times
    }
    fn device(&self) -> String {
        OffPolicy::device(self)
    }
    fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), String> {
        OffPolicy::set_backend(self, maker)
    }
    fn chunk(&mut self, stop: &dyn Fn() -> bool) -> Option<ChunkStats> {
        self.iterate_until(stop)
    }
    fn checkpoint(&self, dir: &RunDir) -> Result<(), RunError> {
        save(
            dir,
            self.cfg.algo.name(),
            self.global_step,
            &self.cfg,
            self.state(),
        )
    }
    fn restore(
        &mut self,
        st: OffPolicyState,
        get: &mut dyn FnMut(&str) -> Option<Vec<f32>>,
    ) -> Result<(), String> {
        OffPolicy::restore(self, st, get)
    }
    fn evaluate(&self, episodes: usize, seed: u64) -> Vec<f64> {
        OffPolicy::evaluate(self, episodes, seed)
    }
}

impl ReplayRun for Dqn {
    type Config = DqnConfig;
    type State = DqnState;

    fn build(cfg: DqnConfig, threads: usize) -> Result<Self, String> {
        Dqn::new(cfg, threads)
    }
    fn shape(c: &DqnConfig) -> RunShape<'_> {
        RunShape {
            algo: "dqn",
            env: &c.env,
            seed: c.seed,
            total_steps: c.total_steps,
            num_envs: c.num_envs,
            checkpoint_every: c.checkpoint_every,
            lower: "buffer_size (--set buffer_size=N) or --num-envs",
        }
    }
    fn memory_estimate(c: &DqnConfig) -> crate::memory::Estimate {
        c.memory_estimate()
    }
    fn config(&self) -> &DqnConfig {
        &self.cfg
    }
    fn state_step(st: &DqnState) -> u64 {
        st.global_step
    }
    fn global_step(&self) -> u64 {
        self.global_step
    }
    fn updates(&self) -> u64 {
        self.updates
    }
    fn times(&self) -> StageTimes {
        self.times
    }
    fn device(&self) -> String {
        Dqn::device(self)
    }
    fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), String> {
        Dqn::set_backend(self, maker)
    }
    fn chunk(&mut self, stop: &dyn Fn() -> bool) -> Option<ChunkStats> {
        self.iterate_until(stop)
    }
    fn checkpoint(&self, dir: &RunDir) -> Result<(), RunError> {
        save(dir, "dqn", self.global_step, &self.cfg, self.state())
    }
    fn restore(
        &mut self,
        st: DqnState,
        get: &mut dyn FnMut(&str) -> Option<Vec<f32>>,
    ) -> Result<(), String> {
        Dqn::restore(self, st, get)
    }
    fn evaluate(&self, episodes: usize, seed: u64) -> Vec<f64> {
        Dqn::evaluate(self, episodes, seed)
    }
}

/// What the progress display gets after each logging chunk.
pub struct OffProgress<'a> {
    pub stats: &'a ChunkStats,
    pub total_steps: u64,
    pub steps_per_sec: f64,
    pub recent_return: f64,
    pub times: StageTimes,
}

pub struct OffTrainSummary<C> {
    pub config: C,
    /// The final evaluation; `None` when the run was stopped early.
    pub eval: Option<EvalSummary>,
    /// Set when a stop request ended the run before its budget.
    pub interrupted: Option<Stop>,
    /// Environment steps taken when the run ended.
    pub global_step: u64,
    pub times: StageTimes,
    pub wall: f64,
    pub updates: u64,
    pub resumed_from: Option<u64>,
    /// What ran the networks (`cpu`, `burn-cpu`, `wgpu: ...`).
    pub device: String,
}

/// Trains (or resumes) a replay-buffer run of type `R` in `opts.run_dir`.
pub fn train_replay<R: ReplayRun>(
    cfg: R::Config,
    opts: &TrainOptions,
    mut progress: impl FnMut(&OffProgress<'_>),
) -> Result<OffTrainSummary<R::Config>, RunError> {
    let shape = R::shape(&cfg);
    let (algo, every, total) = (shape.algo, shape.checkpoint_every, shape.total_steps);
    check_memory(
        &R::memory_estimate(&cfg),
        &format!("train {algo}"),
        shape.lower,
    )?;
    check_eval_memory(shape.env, opts.eval_episodes, "--eval-episodes")?;
    let eval_seed = shape.seed + EVAL_SEED_OFFSET;
    let dir = run_dir_for(opts)?;
    let mut r = R::build(cfg.clone(), opts.threads).map_err(RunError::Mismatch)?;
    let resumed_from = resume_tensors(&dir, opts, algo, &cfg, R::state_step, |st, get| {
        r.restore(st, get)
    })?;
    if let Some(maker) = &opts.device {
        r.set_backend(maker).map_err(RunError::Mismatch)?;
    }
    dir.write_config_of(algo, r.config())?;
    let mut csv = MetricsCsv::open_with(&dir.path, OFFPOLICY_METRICS_HEADER, r.global_step())?;
    let mut tb = TensorBoard::create(&dir.path)?;
    let start = Instant::now();
    let mut recent = RecentMean::default();
    let mut last_ckpt = r.global_step();
    let mut interrupted = None;
    let done = |r: &R| r.global_step() >= total;
    while !done(&r) {
        let t0 = Instant::now();
        let (before, step0) = (r.times(), r.global_step());
        // A stop is answered within one collection step: a chunk of a large network's
        // updates takes seconds. The part-done chunk's sums go into the checkpoint.
        let Some(s) = r.chunk(&|| opts.stop.requested().is_some()) else {
            interrupted = opts.stop.requested();
            break;
        };
        let wall = t0.elapsed().as_secs_f64();
        let dt = r.times().since(&before);
        let other = (wall - dt.total()).max(0.0);
        let sps = (r.global_step() - step0) as f64 / wall;
        csv.push(format!(
            "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.1}",
            s.global_step,
            s.episodes,
            s.episode_return,
            s.episode_length,
            s.updates,
            s.qf_loss,
            s.actor_loss,
            s.q_value,
            s.alpha,
            dt.env,
            dt.inference,
            dt.learner,
            other,
            sps
        ))?;
        tb.scalars(
            s.global_step,
            &[
                ("charts/episode_return", s.episode_return),
                ("charts/episode_length", s.episode_length),
                ("charts/steps_per_sec", sps),
                ("charts/updates", s.updates as f64),
                ("losses/qf_loss", s.qf_loss),
                ("losses/actor_loss", s.actor_loss),
                ("losses/q_value", s.q_value),
                ("losses/alpha", s.alpha),
                ("time/env", dt.env),
                ("time/inference", dt.inference),
                ("time/learner", dt.learner),
            ],
        )?;
        recent.push(s.episode_return);
        progress(&OffProgress {
            stats: &s,
            total_steps: total,
            steps_per_sec: sps,
            recent_return: recent.mean(),
            times: r.times(),
        });
        interrupted = opts.stop.requested().filter(|_| !done(&r));
        if interrupted.is_some() {
            break;
        }
        if every > 0 && r.global_step() - last_ckpt >= every && !done(&r) {
            r.checkpoint(&dir)?;
            last_ckpt = r.global_step();
        }
    }
    r.checkpoint(&dir)?;
    let wall = start.elapsed().as_secs_f64();
    let eval = match interrupted {
        Some(_) => None,
        None => {
            let eval =
                EvalSummary::of(&r.evaluate(opts.eval_episodes.max(1), eval_seed), eval_seed);
            write_eval(&dir, &eval)?;
            Some(eval)
        }
    };
    Ok(OffTrainSummary {
        config: r.config().clone(),
        eval,
        interrupted,
        global_step: r.global_step(),
        times: r.times(),
        wall,
        updates: r.updates(),
        resumed_from,
        device: r.device(),
    })
}

/// The config and networks of the newest checkpoint of a DDPG/TD3/SAC run.
pub fn load_offpolicy(run_dir: &Path) -> Result<(OffPolicyConfig, Nets), RunError> {
    let dir = RunDir::open(run_dir)?;
    let algo = dir.algo()?;
    let mut ck = dir.load_tensors::<OffPolicyConfig, OffPolicyState>(&algo)?;
    let cfg = ck.meta.config;
    cfg.validate()
        .map_err(|e| RunError::Mismatch(format!("{}: {e}", run_dir.display())))?;
    let spec = rlrig_env::spec(&cfg.env).map_err(|e| RunError::Mismatch(e.to_string()))?;
    let mut nets = Nets::new(&cfg, spec.obs_dim, &spec.action_space);
    let actor = ck.tensors.remove("actor").unwrap_or_default();
    nets.actor_params = checked_params(
        run_dir,
        "actor",
        actor,
        &nets.actor_params,
        &cfg.env,
        &cfg.hidden,
    )?;
    Ok((cfg, nets))
}

/// The config and Q-network of the newest checkpoint of a DQN run.
pub fn load_dqn(run_dir: &Path) -> Result<(DqnConfig, QNet), RunError> {
    let dir = RunDir::open(run_dir)?;
    let mut ck = dir.load_tensors::<DqnConfig, DqnState>("dqn")?;
    let cfg = ck.meta.config;
    cfg.validate()
        .map_err(|e| RunError::Mismatch(format!("{}: {e}", run_dir.display())))?;
    let spec = rlrig_env::spec(&cfg.env).map_err(|e| RunError::Mismatch(e.to_string()))?;
    let mut net = QNet::new(&cfg, spec.obs_dim, &spec.action_space);
    let q = ck.tensors.remove("q").unwrap_or_default();
    net.params = checked_params(run_dir, "Q-network", q, &net.params, &cfg.env, &cfg.hidden)?;
    Ok((cfg, net))
}

/// `loaded` when it has as many parameters as the freshly built `fresh`, else an error
/// naming the run, the network and both sizes.
fn checked_params(
    run_dir: &Path,
    what: &str,
    loaded: Vec<f32>,
    fresh: &[f32],
    env: &str,
    hidden: &[usize],
) -> Result<Vec<f32>, RunError> {
    if loaded.len() != fresh.len() {
        return Err(RunError::Mismatch(format!(
            "{}: checkpoint {what} has {} parameters but {env} with hidden {hidden:?} needs {}",
            run_dir.display(),
            loaded.len(),
            fresh.len()
        )));
    }
    Ok(loaded)
}
