//! Driving a PPO run: run directory, metrics, TensorBoard, checkpoints, resume,
//! final evaluation. The CLI is a thin layer over [`train_ppo`] and [`eval_run`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::backend::BackendMaker;
use crate::eval::Greedy;
use crate::ppo::{Agent, IterationStats, Ppo, PpoConfig, StageTimes};
pub use crate::replay_run::{
    OFFPOLICY_DETERMINISTIC_COLUMNS, OFFPOLICY_METRICS_HEADER, OffProgress, OffTrainSummary,
    load_dqn, load_offpolicy,
};
use crate::run::{MetricsCsv, RunDir, RunError, TensorBoard, metrics_row, write_atomic};
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
}

/// What kind of run a directory holds, from its newest checkpoint's `algo`: the one
/// place that maps algorithm names to the code that reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// ppo (and a2c, which trains on PPO's machinery).
    Ppo,
    /// ddpg, td3, sac.
    OffPolicy,
    Dqn,
    /// es, ga.
    Evolution,
    AlphaZero,
}

impl RunKind {
    pub fn of(run_dir: &Path) -> Result<RunKind, RunError> {
        let algo = RunDir::open(run_dir)?.algo()?;
        match algo.as_str() {
            "ppo" => Ok(RunKind::Ppo),
            "ddpg" | "td3" | "sac" => Ok(RunKind::OffPolicy),
            "dqn" => Ok(RunKind::Dqn),
            "es" | "ga" => Ok(RunKind::Evolution),
            "alphazero" => Ok(RunKind::AlphaZero),
            other => Err(RunError::Mismatch(format!(
                "{}: a '{other}' run, which this rlrig does not know",
                run_dir.display()
            ))),
        }
    }
}

/// Summary statistics of evaluation returns.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EvalSummary {
    pub episodes: usize,
    pub mean_return: f64,
    pub std_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    pub seed: u64,
}

impl EvalSummary {
    pub fn of(returns: &[f64], seed: u64) -> EvalSummary {
        let n = returns.len().max(1) as f64;
        let mean = returns.iter().sum::<f64>() / n;
        let std = (returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
        EvalSummary {
            episodes: returns.len(),
            mean_return: mean,
            std_return: std,
            min_return: returns.iter().copied().fold(f64::INFINITY, f64::min),
            max_return: returns.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            seed,
        }
    }
}

/// Mean of the last ten finite values pushed (NaN before any): the progress display's
/// recent return, which iterations without a finished episode leave unchanged.
#[derive(Default)]
pub(crate) struct RecentMean(std::collections::VecDeque<f64>);

impl RecentMean {
    pub(crate) fn push(&mut self, v: f64) {
        if v.is_finite() {
            if self.0.len() == 10 {
                self.0.pop_front();
            }
            self.0.push_back(v);
        }
    }

    pub(crate) fn mean(&self) -> f64 {
        if self.0.is_empty() {
            f64::NAN
        } else {
            self.0.iter().sum::<f64>() / self.0.len() as f64
        }
    }
}

/// What the progress display gets after each iteration.
pub struct Progress<'a> {
    pub stats: &'a IterationStats,
    pub total_steps: u64,
    pub steps_per_sec: f64,
    /// Mean return over the last few iterations that finished episodes.
    pub recent_return: f64,
    /// Cumulative stage times of this process.
    pub times: StageTimes,
}

pub struct TrainSummary {
    pub config: PpoConfig,
    /// What ran the networks (`cpu`, `burn-cpu (flex)`, `wgpu ...`).
    pub device: String,
    /// The final evaluation; `None` when the run was stopped early.
    pub eval: Option<EvalSummary>,
    /// Set when a stop request ended the run before its budget (a checkpoint of the
    /// last finished iteration was written).
    pub interrupted: Option<Stop>,
    /// Environment steps taken when the run ended (the budget, unless interrupted).
    pub global_step: u64,
    pub times: StageTimes,
    pub wall: f64,
    pub resumed_from: Option<u64>,
    /// Asynchronous IMPALA (`actors > 0`): the mean number of updates between the policy
    /// that collected a rollout and the learner that used it.
    pub mean_policy_lag: Option<f64>,
    /// With `inference_server`: what the batching inference server did.
    pub server: Option<crate::serve::ServerStats>,
}

/// The run directory of a training run: created for a new run, required to exist for
/// `--resume` (so a mistyped path is an error, not a new empty directory).
pub(crate) fn run_dir_for(opts: &TrainOptions) -> Result<RunDir, RunError> {
    if opts.resume {
        RunDir::open(&opts.run_dir)
    } else {
        RunDir::new(&opts.run_dir)
    }
}

/// The error for a `--resume` whose config is not the checkpoint's, naming each key
/// that differs and both values.
fn config_mismatch<C: serde::Serialize>(opts: &TrainOptions, saved: &C, given: &C) -> RunError {
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
    RunError::Mismatch(format!(
        "{}: the checkpoint's config differs from the one given ({keys}); resume with the same settings, or with --run-dir and no --config to use the run's config.toml",
        opts.run_dir.display()
    ))
}

/// For a checkpointed run of `algo`: with `--resume`, restores the newest checkpoint
/// (its config must equal `cfg`) through `restore` and returns `progress(state)` (the
/// step, iteration or generation it resumes from); without, refuses a directory that
/// already holds a run.
pub(crate) fn resume_tensors<C, S>(
    dir: &RunDir,
    opts: &TrainOptions,
    algo: &str,
    cfg: &C,
    progress: impl Fn(&S) -> u64,
    restore: impl FnOnce(S, &mut dyn FnMut(&str) -> Option<Vec<f32>>) -> Result<(), String>,
) -> Result<Option<u64>, RunError>
where
    C: serde::de::DeserializeOwned + serde::Serialize + PartialEq,
    S: serde::de::DeserializeOwned,
{
    if !opts.resume {
        if dir.has_checkpoint() {
            return Err(RunError::Mismatch(format!(
                "{} already holds a run: pass --resume to continue it, or choose another --run-dir",
                opts.run_dir.display()
            )));
        }
        return Ok(None);
    }
    let mut ck = dir.load_tensors::<C, S>(algo)?;
    if ck.meta.config != *cfg {
        return Err(config_mismatch(opts, &ck.meta.config, cfg));
    }
    let from = progress(&ck.meta.state);
    restore(ck.meta.state, &mut |name| ck.tensors.remove(name))
        .map_err(|e| RunError::Mismatch(format!("{}: {e}", opts.run_dir.display())))?;
    Ok(Some(from))
}

/// Refuses a run whose buffers would not fit in this machine's memory, before any
/// of them is allocated.
pub(crate) fn check_memory(
    need: &crate::memory::Estimate,
    what: &str,
    lower: &str,
) -> Result<(), RunError> {
    need.check(what, lower).map_err(RunError::Resources)
}

/// Refuses an evaluation of more episodes of `env` than fit in memory (they are
/// stepped as one batch); `flag` is the one that sets them.
pub(crate) fn check_eval_memory(env: &str, episodes: usize, flag: &str) -> Result<(), RunError> {
    check_memory(
        &crate::memory::evaluation(env, episodes),
        "the evaluation",
        flag,
    )
}

/// Writes a run's final evaluation (`eval.json`; only finished runs have one).
pub(crate) fn write_eval<T: Serialize>(dir: &RunDir, eval: &T) -> Result<(), RunError> {
    write_atomic(
        &dir.path.join("eval.json"),
        serde_json::to_string_pretty(eval)
            .expect("plain numbers serialise")
            .as_bytes(),
    )
}

/// Evaluation seeds are far from training seeds so the episodes are new.
pub const EVAL_SEED_OFFSET: u64 = 1_000_003;

/// Trains (or resumes) a PPO run in `opts.run_dir`.
pub fn train_ppo(
    cfg: PpoConfig,
    opts: &TrainOptions,
    mut progress: impl FnMut(&Progress<'_>),
) -> Result<TrainSummary, RunError> {
    check_memory(
        &cfg.memory_estimate(),
        "this run",
        "--num-envs or num_steps",
    )?;
    check_eval_memory(&cfg.env, opts.eval_episodes, "--eval-episodes")?;
    let dir = run_dir_for(opts)?;
    let mut resumed_from = None;
    let mut ppo;
    if opts.resume {
        let ck = dir.load_checkpoint()?;
        if ck.meta.config != cfg {
            return Err(config_mismatch(opts, &ck.meta.config, &cfg));
        }
        ppo = Ppo::new(ck.meta.config.clone(), opts.threads).map_err(RunError::Mismatch)?;
        resumed_from = Some(ck.meta.state.global_step);
        ppo.restore(ck.meta.state, ck.params, ck.adam_m, ck.adam_v)
            .map_err(RunError::Mismatch)?;
    } else {
        if dir.has_checkpoint() {
            return Err(RunError::Mismatch(format!(
                "{} already holds a run: pass --resume to continue it, or choose another --run-dir",
                opts.run_dir.display()
            )));
        }
        ppo = Ppo::new(cfg.clone(), opts.threads).map_err(RunError::Mismatch)?;
    }
    if let Some(maker) = &opts.device {
        ppo.set_backend(maker).map_err(RunError::Mismatch)?;
    }
    if opts.trace.is_some() {
        ppo.enable_trace(opts.trace_iterations);
    }
    dir.write_config(&ppo.cfg)?;
    let mut csv = MetricsCsv::open(&dir.path, ppo.iteration)?;
    let mut tb = TensorBoard::create(&dir.path)?;
    let start = Instant::now();
    let mut recent = RecentMean::default();
    let every = ppo.cfg.checkpoint_every;
    let mut last_ckpt = ppo.global_step;
    let mut interrupted = None;
    while !ppo.done() {
        let t0 = Instant::now();
        let before = ppo.times;
        // IMPALA's actor collects the next rollout during this update (asynchronous
        // actors keep running), except before a checkpoint, which must not hold a rollout
        // in flight: a due one, or the one a stop request asks for.
        let batch = ppo.cfg.batch_size() as u64;
        let checkpoint_next = every > 0 && ppo.global_step + batch - last_ckpt >= every;
        let stopping = opts.stop.requested().is_some();
        let s = ppo.iterate_prefetching(!checkpoint_next && !stopping);
        let wall = t0.elapsed().as_secs_f64();
        let dt = ppo.times.since(&before);
        let other = (wall - dt.total()).max(0.0);
        let sps = ppo.cfg.batch_size() as f64 / wall;
        csv.push(metrics_row(&s, &dt, other, sps))?;
        tb.scalars(
            s.global_step,
            &[
                ("charts/episode_return", s.episode_return),
                ("charts/episode_length", s.episode_length),
                ("charts/learning_rate", s.learning_rate),
                ("charts/steps_per_sec", sps),
                ("losses/policy_loss", s.policy_loss),
                ("losses/value_loss", s.value_loss),
                ("losses/entropy", s.entropy),
                ("losses/approx_kl", s.approx_kl),
                ("losses/clipfrac", s.clipfrac),
                ("losses/explained_variance", s.explained_variance),
                ("time/env", dt.env),
                ("time/inference", dt.inference),
                ("time/learner", dt.learner),
            ],
        )?;
        recent.push(s.episode_return);
        progress(&Progress {
            stats: &s,
            total_steps: ppo.cfg.num_iterations() * ppo.cfg.batch_size() as u64,
            steps_per_sec: sps,
            recent_return: recent.mean(),
            times: ppo.times,
        });
        // A stop that came during a prefetching iteration waits one more (short,
        // non-prefetching) iteration, so the checkpoint holds no rollout in flight.
        interrupted = opts
            .stop
            .requested()
            .filter(|_| ppo.quiescent() && !ppo.done());
        if interrupted.is_some() {
            break;
        }
        if every > 0 && ppo.global_step - last_ckpt >= every && !ppo.done() {
            let (m, v) = ppo.adam_moments();
            dir.save_checkpoint(&ppo.cfg, ppo.state(), &ppo.agent.params, (&m, &v))?;
            last_ckpt = ppo.global_step;
        }
    }
    let (m, v) = ppo.adam_moments();
    dir.save_checkpoint(&ppo.cfg, ppo.state(), &ppo.agent.params, (&m, &v))?;
    let seed = ppo.cfg.seed + EVAL_SEED_OFFSET;
    let wall = start.elapsed().as_secs_f64();
    if let Some(path) = &opts.trace
        && let Some(log) = ppo.trace()
    {
        log.write_chrome(path)?;
    }
    let eval = match interrupted {
        Some(_) => None,
        None => {
            let eval = EvalSummary::of(&ppo.evaluate(opts.eval_episodes.max(1), seed), seed);
            write_eval(&dir, &eval)?;
            Some(eval)
        }
    };
    Ok(TrainSummary {
        config: ppo.cfg.clone(),
        device: ppo.device(),
        eval,
        interrupted,
        global_step: ppo.global_step,
        times: ppo.times,
        wall,
        resumed_from,
        mean_policy_lag: (ppo.cfg.actors > 0)
            .then(|| ppo.async_lag.0 as f64 / ppo.async_lag.1.max(1) as f64),
        server: ppo.cfg.inference_server.then(|| ppo.server_stats.clone()),
    })
}

/// The agent of the newest checkpoint in `run_dir`, with its config and observation
/// statistics.
pub fn load_agent(
    run_dir: &Path,
) -> Result<(PpoConfig, Agent, Option<crate::normalize::RunningMeanStd>), RunError> {
    let ck = RunDir::open(run_dir)?.load_checkpoint()?;
    let cfg = ck.meta.config;
    let spec = rlrig_env::spec(&cfg.env).map_err(|e| RunError::Mismatch(e.to_string()))?;
    crate::check_env(&cfg.env, &cfg.env_args).map_err(RunError::Mismatch)?;
    let mut rng = rlrig_env::Rng::stream(cfg.seed, rlrig_env::Purpose::Init, 0);
    let mut agent = Agent::for_config(&spec, &cfg, &mut rng);
    if agent.params.len() != ck.params.len() {
        return Err(RunError::Mismatch(format!(
            "{}: checkpoint has {} parameters but {} with hidden {:?} needs {}",
            run_dir.display(),
            ck.params.len(),
            cfg.env,
            cfg.hidden,
            agent.params.len()
        )));
    }
    agent.params = ck.params;
    Ok((cfg, agent, ck.meta.state.obs_rms))
}

/// The greedy policy of the newest checkpoint in `run_dir`, whichever algorithm wrote
/// it, with the env (and its args) it acts in and the run's seed.
pub struct LoadedPolicy {
    pub env: String,
    pub args: crate::EnvArgs,
    pub seed: u64,
    pub policy: Box<dyn Greedy>,
}

/// Loads [`LoadedPolicy`]; AlphaZero runs (board games against an opponent) have none.
pub fn load_policy(run_dir: &Path) -> Result<LoadedPolicy, RunError> {
    let (env, args, seed, policy): (_, _, _, Box<dyn Greedy>) = match RunKind::of(run_dir)? {
        RunKind::Ppo => {
            let (cfg, agent, rms) = load_agent(run_dir)?;
            let (env, args, seed) = (cfg.env.clone(), cfg.env_args.clone(), cfg.seed);
            (
                env,
                args,
                seed,
                Box::new(crate::ppo::PpoGreedy::new(agent, rms, cfg)),
            )
        }
        RunKind::Evolution => {
            let (cfg, p, best) = load_evolution(run_dir)?;
            (cfg.env, cfg.env_args, cfg.seed, Box::new(p.greedy(best)))
        }
        RunKind::OffPolicy => {
            let (cfg, nets) = load_offpolicy(run_dir)?;
            (
                cfg.env,
                cfg.env_args,
                cfg.seed,
                Box::new(nets.into_greedy()),
            )
        }
        RunKind::Dqn => {
            let (cfg, net) = load_dqn(run_dir)?;
            (cfg.env, cfg.env_args, cfg.seed, Box::new(net.greedy()))
        }
        RunKind::AlphaZero => {
            return Err(RunError::Mismatch(format!(
                "{}: an AlphaZero run is evaluated in games (rlrig eval --run DIR --opponent random|solver:D|run:DIR) and played in the terminal (rlrig play --run DIR)",
                run_dir.display()
            )));
        }
    };
    Ok(LoadedPolicy {
        env,
        args,
        seed,
        policy,
    })
}

/// Greedy evaluation of the newest checkpoint in `run_dir`.
pub fn eval_run(
    run_dir: &Path,
    episodes: usize,
    seed: Option<u64>,
) -> Result<EvalSummary, RunError> {
    if RunKind::of(run_dir)? == RunKind::Evolution {
        // Fitness episode by episode (each seeded on its own), as training scored it.
        let (cfg, policy, best) = load_evolution(run_dir)?;
        check_eval_memory(&cfg.env, episodes, "--episodes")?;
        let seed = seed.unwrap_or(cfg.seed + EVAL_SEED_OFFSET);
        let returns = evo_returns(
            &policy,
            &cfg.env,
            &cfg.env_args,
            &best,
            episodes.max(1),
            seed,
        );
        return Ok(EvalSummary::of(&returns, seed));
    }
    let mut p = load_policy(run_dir)?;
    check_eval_memory(&p.env, episodes, "--episodes")?;
    let seed = seed.unwrap_or(p.seed + EVAL_SEED_OFFSET);
    let returns =
        crate::eval::greedy_returns(p.policy.as_mut(), &p.env, &p.args, episodes.max(1), seed);
    Ok(EvalSummary::of(&returns, seed))
}

/// One recorded episode: the internal state (`env.unwrapped.state`) before every
/// step and after the last one, with the undiscounted return up to each state.
pub struct Recording {
    pub states: Vec<Vec<f64>>,
    pub returns: Vec<f64>,
}

/// Plays `episodes` greedy episodes of the newest checkpoint in `run_dir` and records
/// their states, for rendering. Episode `e` is seeded with `seed + e`.
pub fn record_episodes(
    run_dir: &Path,
    episodes: usize,
    seed: Option<u64>,
) -> Result<(String, Vec<Recording>), RunError> {
    struct V<'a> {
        policy: &'a mut dyn Greedy,
        args: &'a crate::EnvArgs,
        episodes: usize,
        seed: u64,
    }
    impl rlrig_env::EnvVisitor for V<'_> {
        type Output = Vec<Recording>;
        fn visit<E: rlrig_env::Env>(self) -> Vec<Recording> {
            let mut out = Vec::new();
            for e in 0..self.episodes {
                let mut env = rlrig_env::SyncVecEnv::<E>::new(
                    crate::env_config(1, self.args)
                        .seed(self.seed + e as u64)
                        .episode_cap(crate::MAX_EVAL_STEPS),
                )
                .expect("the loaders check the env args");
                let mut rec = Recording {
                    states: vec![E::render_state(env.state(0))],
                    returns: vec![0.0],
                };
                loop {
                    let buf = self.policy.act(env.obs(), 1);
                    rlrig_env::VecEnvDyn::step(&mut env, buf)
                        .expect("the policy only emits valid actions");
                    let ret = rec.returns.last().copied().unwrap_or(0.0) + env.rewards()[0];
                    rec.returns.push(ret);
                    rec.states.push(E::render_state(env.state(0)));
                    if env.terminated()[0] || env.truncated()[0] {
                        break;
                    }
                }
                out.push(rec);
            }
            out
        }
    }
    let mut p = load_policy(run_dir)?;
    let v = V {
        policy: p.policy.as_mut(),
        args: &p.args,
        episodes: episodes.max(1),
        seed: seed.unwrap_or(p.seed + EVAL_SEED_OFFSET),
    };
    let recs = rlrig_env::visit(&p.env, v).map_err(|e| RunError::Mismatch(e.to_string()))?;
    Ok((p.env, recs))
}

/// metrics.csv columns of AlphaZero runs: learning metrics first (deterministic), then
/// wall-clock stage times.
pub const AZ_METRICS_HEADER: &str = "iteration,samples,games_finished,policy_loss,value_loss,win_rate_random,win_rate_solver,loss_rate_solver,time_search,time_inference,time_learner,time_eval,samples_per_sec";

/// Number of leading deterministic columns of [`AZ_METRICS_HEADER`].
pub const AZ_DETERMINISTIC_COLUMNS: usize = 8;

pub struct AzTrainSummary {
    pub config: crate::alphazero::AzConfig,
    pub device: String,
    pub last: crate::alphazero::AzStats,
    pub times: crate::alphazero::AzTimes,
    pub wall: f64,
    pub samples: u64,
    pub resumed_from: Option<u64>,
    /// Set when a stop request ended the run before its last iteration.
    pub interrupted: Option<Stop>,
    /// Iterations done when the run ended.
    pub iteration: u64,
}

fn az_checkpoint(dir: &RunDir, az: &crate::alphazero::AlphaZero) -> Result<(), RunError> {
    let (state, tensors) = az.state();
    let views: Vec<(&str, &[f32])> = tensors.iter().map(|(n, v)| (*n, v.as_slice())).collect();
    dir.save_tensors("alphazero", az.iteration, &az.cfg, &state, &views)?;
    Ok(())
}

/// Trains (or resumes) an AlphaZero run in `opts.run_dir`.
pub fn train_alphazero(
    cfg: crate::alphazero::AzConfig,
    opts: &TrainOptions,
    mut progress: impl FnMut(&crate::alphazero::AzStats, f64),
) -> Result<AzTrainSummary, RunError> {
    use crate::alphazero::{AlphaZero, AzState};
    check_memory(
        &cfg.memory_estimate(),
        "train alphazero",
        "--games, --simulations, eval_games or buffer_size",
    )?;
    let dir = run_dir_for(opts)?;
    let mut az = AlphaZero::new(cfg.clone()).map_err(RunError::Mismatch)?;
    let resumed_from = resume_tensors(
        &dir,
        opts,
        "alphazero",
        &cfg,
        |st: &AzState| st.iteration,
        |st, get| az.restore(st, get),
    )?;
    if let Some(maker) = &opts.device {
        az.set_backend(maker).map_err(RunError::Mismatch)?;
    }
    dir.write_config_of("alphazero", &az.cfg)?;
    let mut csv = MetricsCsv::open_with(&dir.path, AZ_METRICS_HEADER, az.iteration)?;
    let mut tb = TensorBoard::create(&dir.path)?;
    let start = Instant::now();
    let mut last = crate::alphazero::AzStats::default();
    let samples0 = az.samples;
    let mut interrupted = None;
    while !az.done() {
        let t0 = Instant::now();
        let (before, s0) = (az.times, az.samples);
        let s = az.iterate();
        let wall = t0.elapsed().as_secs_f64();
        let t = az.times;
        let sps = (az.samples - s0) as f64 / wall;
        csv.push(format!(
            "{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.1}",
            s.iteration,
            s.samples,
            s.games_finished,
            s.policy_loss,
            s.value_loss,
            s.win_rate_random,
            s.win_rate_solver,
            s.loss_rate_solver,
            t.search - before.search,
            t.inference - before.inference,
            t.learner - before.learner,
            t.eval - before.eval,
            sps
        ))?;
        tb.scalars(
            s.samples,
            &[
                ("losses/policy_loss", s.policy_loss),
                ("losses/value_loss", s.value_loss),
                ("eval/win_rate_random", s.win_rate_random),
                ("eval/win_rate_solver", s.win_rate_solver),
                ("eval/loss_rate_solver", s.loss_rate_solver),
                ("eval/gate_score", s.gate_score),
                ("charts/samples_per_sec", sps),
                ("charts/games_finished", s.games_finished as f64),
            ],
        )?;
        if s.win_rate_random.is_finite() || last.iteration == 0 {
            last = s.clone();
        } else {
            last = crate::alphazero::AzStats {
                win_rate_random: last.win_rate_random,
                win_rate_solver: last.win_rate_solver,
                loss_rate_solver: last.loss_rate_solver,
                ..s.clone()
            };
        }
        progress(&last, sps);
        interrupted = opts.stop.requested().filter(|_| !az.done());
        if interrupted.is_some() {
            break;
        }
        let every = az.cfg.checkpoint_every;
        if every > 0 && az.iteration.is_multiple_of(every) && !az.done() {
            az_checkpoint(&dir, &az)?;
        }
    }
    az_checkpoint(&dir, &az)?;
    if interrupted.is_none() {
        write_eval(&dir, &last)?;
    }
    Ok(AzTrainSummary {
        interrupted,
        iteration: az.iteration,
        config: az.cfg.clone(),
        device: az.device(),
        last,
        times: az.times,
        wall: start.elapsed().as_secs_f64(),
        samples: az.samples - samples0,
        resumed_from,
    })
}

/// The config and network of the newest checkpoint of an AlphaZero run.
pub fn load_alphazero(
    run_dir: &Path,
) -> Result<(crate::alphazero::AzConfig, crate::alphazero::PolicyValue), RunError> {
    use crate::alphazero::{AzConfig, AzState, PolicyValue};
    let mut ck = RunDir::open(run_dir)?.load_tensors::<AzConfig, AzState>("alphazero")?;
    let cfg = ck.meta.config;
    cfg.validate()
        .map_err(|e| RunError::Mismatch(format!("{}: {e}", run_dir.display())))?;
    let mut rng = rlrig_env::Rng::stream(cfg.seed, rlrig_env::Purpose::Init, 0);
    let mut net = PolicyValue::for_config(&cfg, &mut rng);
    let params = ck.tensors.remove("params").unwrap_or_default();
    if params.len() != net.params.len() {
        return Err(RunError::Mismatch(format!(
            "{}: checkpoint has {} parameters, hidden {:?} needs {}",
            run_dir.display(),
            params.len(),
            cfg.hidden,
            net.params.len()
        )));
    }
    net.params = params;
    Ok((cfg, net))
}

/// metrics.csv columns of ES/GA runs: learning metrics first (deterministic), then
/// wall-clock time.
pub const EVO_METRICS_HEADER: &str =
    "generation,episodes,best_fitness,mean_fitness,center_fitness,seconds,generations_per_sec";

/// Number of leading deterministic columns of [`EVO_METRICS_HEADER`].
pub const EVO_DETERMINISTIC_COLUMNS: usize = 5;

pub struct EvoTrainSummary {
    pub config: crate::evolution::EvoConfig,
    pub last: crate::evolution::GenStats,
    /// The final evaluation; `None` when the run was stopped early.
    pub eval: Option<EvalSummary>,
    /// Set when a stop request ended the run before its last generation (under MPI,
    /// every rank stops after the same generation).
    pub interrupted: Option<Stop>,
    /// Generations done when the run ended.
    pub generation: u64,
    pub wall: f64,
    pub generations: u64,
    pub resumed_from: Option<u64>,
}

fn evo_algo(cfg: &crate::evolution::EvoConfig) -> &'static str {
    match cfg.method {
        crate::evolution::Method::Es => "es",
        crate::evolution::Method::Ga => "ga",
    }
}

fn evo_checkpoint(dir: &RunDir, e: &crate::evolution::Evolution) -> Result<(), RunError> {
    let (state, tensors) = e.state();
    let best = e.best_params();
    let mut t = tensors;
    t.push(("best", &best));
    dir.save_tensors(evo_algo(&e.cfg), e.generation, &e.cfg, &state, &t)?;
    Ok(())
}

/// Trains (or resumes) an ES or GA run in `opts.run_dir`.
///
/// With a [`crate::evolution::Collective`] (MPI ranks), every rank computes the same
/// generations and reads a checkpoint to resume; only rank 0 writes the run directory.
pub fn train_evolution(
    cfg: crate::evolution::EvoConfig,
    opts: &TrainOptions,
    collective: Option<Box<dyn crate::evolution::Collective>>,
    mut progress: impl FnMut(&crate::evolution::GenStats, f64),
) -> Result<EvoTrainSummary, RunError> {
    use crate::evolution::{EvoState, Evolution};
    let writer = collective.as_ref().is_none_or(|c| c.rank() == 0);
    check_memory(
        &cfg.memory_estimate(),
        &format!("train {}", evo_algo(&cfg)),
        "--population or hidden",
    )?;
    check_eval_memory(&cfg.env, opts.eval_episodes, "--eval-episodes")?;
    let dir = run_dir_for(opts)?;
    let algo = evo_algo(&cfg);
    let mut e = Evolution::new(cfg.clone(), opts.threads).map_err(RunError::Mismatch)?;
    if let Some(c) = collective {
        e.set_collective(c);
    }
    let resumed_from = resume_tensors(
        &dir,
        opts,
        algo,
        &cfg,
        |st: &EvoState| st.generation,
        |st, get| e.restore(st, get),
    )?;
    let (mut csv, mut tb) = if writer {
        dir.write_config_of(algo, &e.cfg)?;
        (
            Some(MetricsCsv::open_with(
                &dir.path,
                EVO_METRICS_HEADER,
                e.generation,
            )?),
            Some(TensorBoard::create(&dir.path)?),
        )
    } else {
        (None, None)
    };
    let start = Instant::now();
    let g0 = e.generation;
    let mut last = crate::evolution::GenStats::default();
    let mut interrupted = None;
    while !e.done() {
        let t0 = Instant::now();
        let s = e.step();
        let secs = t0.elapsed().as_secs_f64();
        // Every rank learns of a stop any rank got, after the same generation.
        interrupted = e.agree_stop(opts.stop.requested()).filter(|_| !e.done());
        // Only the writing rank (rank 0, or the one process) has the files.
        if let (Some(csv), Some(tb)) = (csv.as_mut(), tb.as_mut()) {
            csv.push(format!(
                "{},{},{},{},{},{:.6},{:.3}",
                s.generation,
                s.episodes,
                s.best_fitness,
                s.mean_fitness,
                s.center_fitness,
                secs,
                1.0 / secs
            ))?;
            tb.scalars(
                s.generation,
                &[
                    ("fitness/best", s.best_fitness),
                    ("fitness/mean", s.mean_fitness),
                    ("fitness/center_or_elite", s.center_fitness),
                    ("charts/episodes", s.episodes as f64),
                    ("time/generation", secs),
                ],
            )?;
        }
        progress(&s, 1.0 / secs);
        last = s;
        if interrupted.is_some() {
            break;
        }
        let every = e.cfg.checkpoint_every;
        if writer && every > 0 && e.generation.is_multiple_of(every) && !e.done() {
            evo_checkpoint(&dir, &e)?;
        }
    }
    if writer {
        evo_checkpoint(&dir, &e)?;
    }
    let wall = start.elapsed().as_secs_f64();
    let seed = e.cfg.seed + EVAL_SEED_OFFSET;
    let eval = match interrupted {
        Some(_) => None,
        None => Some(EvalSummary::of(
            &evo_returns(
                &e.policy,
                &e.cfg.env,
                &e.cfg.env_args,
                &e.best_params(),
                opts.eval_episodes.max(1),
                seed,
            ),
            seed,
        )),
    };
    if let (true, Some(eval)) = (writer, &eval) {
        write_eval(&dir, eval)?;
    }
    Ok(EvoTrainSummary {
        config: e.cfg.clone(),
        last,
        eval,
        interrupted,
        generation: e.generation,
        wall,
        generations: e.generation - g0,
        resumed_from,
    })
}

/// Per-episode returns of an evolved policy (one env per episode, seeded by `seed`).
fn evo_returns(
    policy: &crate::evolution::EvoPolicy,
    env: &str,
    args: &crate::EnvArgs,
    params: &[f32],
    episodes: usize,
    seed: u64,
) -> Vec<f64> {
    // fitness() averages; evaluate episode by episode to keep the spread.
    (0..episodes)
        .map(|k| policy.fitness(env, args, params, 1, seed.wrapping_add(k as u64)))
        .collect()
}

/// The config, policy and deployed parameters of an ES/GA run's newest checkpoint.
pub fn load_evolution(
    run_dir: &Path,
) -> Result<
    (
        crate::evolution::EvoConfig,
        crate::evolution::EvoPolicy,
        Vec<f32>,
    ),
    RunError,
> {
    use crate::evolution::{EvoConfig, EvoPolicy, EvoState};
    let dir = RunDir::open(run_dir)?;
    let algo = dir.algo()?;
    let mut ck = dir.load_tensors::<EvoConfig, EvoState>(&algo)?;
    let cfg = ck.meta.config;
    crate::check_env(&cfg.env, &cfg.env_args).map_err(RunError::Mismatch)?;
    let policy = EvoPolicy::new(&cfg).map_err(RunError::Mismatch)?;
    let best = ck.tensors.remove("best").unwrap_or_default();
    if best.len() != policy.num_params() {
        return Err(RunError::Mismatch(format!(
            "{}: checkpoint policy has {} parameters, {} with hidden {:?} needs {}",
            run_dir.display(),
            best.len(),
            cfg.env,
            cfg.hidden,
            policy.num_params()
        )));
    }
    Ok((cfg, policy, best))
}
