//! A PPO run as the [`crate::driver`] sees it: its checkpoint (parameters and both Adam
//! moments in one safetensors file, `ckpt-<iteration>`), its metrics row and its
//! [`Algorithm`] implementation. A2C and IMPALA are PPO configs, so their runs are too.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Collection, Family, IterationStats, Ppo, PpoConfig, PpoState, StageTimes};
use crate::LearnError;
use crate::driver::{Algorithm, Record, RunShape, Tensors, TrainOptions, Turn};
use crate::run::{
    FORMAT, RunDir, TensorSource, read_checkpoint, safetensors_at, tensor_of_len, to_bytes,
};

/// The JSON half of a checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CheckpointMeta {
    pub format: u32,
    pub algo: String,
    pub config: PpoConfig,
    pub state: PpoState,
    pub weights: String,
    pub weights_crc32c: u32,
    pub num_params: usize,
}

pub struct Checkpoint {
    pub meta: CheckpointMeta,
    pub params: Vec<f32>,
    pub adam_m: Vec<f32>,
    pub adam_v: Vec<f32>,
}

impl RunDir {
    /// Saves a checkpoint (weights first, then the JSON, then `latest`: a crash at any
    /// point leaves the previous checkpoint intact) and keeps the two newest.
    pub fn save_checkpoint(
        &self,
        cfg: &PpoConfig,
        state: PpoState,
        params: &[f32],
        adam: (&[f32], &[f32]),
    ) -> Result<PathBuf, LearnError> {
        let stem = format!("ckpt-{:08}", state.iteration);
        let shape = vec![params.len()];
        let (pb, mb, vb) = (to_bytes(params), to_bytes(adam.0), to_bytes(adam.1));
        fn view<'a>(
            b: &'a [u8],
            shape: &[usize],
        ) -> Result<safetensors::tensor::TensorView<'a>, LearnError> {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.to_vec(), b)
                .map_err(LearnError::encode("a checkpoint"))
        }
        let tensors = vec![
            ("adam_m", view(&mb, &shape)?),
            ("adam_v", view(&vb, &shape)?),
            ("params", view(&pb, &shape)?),
        ];
        let weights =
            safetensors::serialize(tensors, None).map_err(LearnError::encode("a checkpoint"))?;
        self.commit(&stem, &weights, |wname| {
            let meta = CheckpointMeta {
                format: FORMAT,
                algo: cfg.algo.name().into(),
                config: cfg.clone(),
                state,
                weights: wname.to_string(),
                weights_crc32c: crc32c::crc32c(&weights),
                num_params: params.len(),
            };
            serde_json::to_vec(&meta).map_err(LearnError::encode("a checkpoint"))
        })
    }

    /// Loads the newest intact checkpoint of a PPO-family run (ppo, a2c, impala),
    /// checking its integrity.
    pub fn load_checkpoint(&self) -> Result<Checkpoint, LearnError> {
        self.newest_intact(load_checkpoint)
    }
}

/// Loads the checkpoint of a PPO-family run (ppo, a2c, impala) whose JSON is at
/// `json_path`.
pub fn load_checkpoint(json_path: &Path) -> Result<Checkpoint, LearnError> {
    load_checkpoint_of(json_path, &Family::ALL.map(Family::name))
}

/// [`load_checkpoint`] of a run of one of `algos`. Checkpoints from before the family
/// label was kept say "ppo" for a2c and impala runs too.
fn load_checkpoint_of(json_path: &Path, algos: &[&str]) -> Result<Checkpoint, LearnError> {
    let (meta, wpath, bytes) =
        read_checkpoint(json_path, algos, "checkpoint", |m: &CheckpointMeta| {
            (m.format, &m.weights, m.weights_crc32c)
        })?;
    let st = safetensors_at(&bytes, &wpath)?;
    let get = |name: &str| tensor_of_len(&st, &wpath, name, meta.num_params);
    Ok(Checkpoint {
        params: get("params")?,
        adam_m: get("adam_m")?,
        adam_v: get("adam_v")?,
        meta,
    })
}

/// The metrics.csv columns: learning metrics first (a pure function of the config),
/// then wall-clock stage times (which are not).
pub const METRICS_HEADER: &str = "iteration,global_step,episodes,episode_return,episode_length,learning_rate,policy_loss,value_loss,entropy,approx_kl,clipfrac,explained_variance,time_env,time_inference,time_learner,time_other,steps_per_sec";

/// Number of leading metrics.csv columns that are deterministic.
pub const DETERMINISTIC_COLUMNS: usize = 12;

pub fn metrics_row(s: &IterationStats, t: &StageTimes, other: f64, sps: f64) -> String {
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.1}",
        s.iteration,
        s.global_step,
        s.episodes,
        s.episode_return,
        s.episode_length,
        s.learning_rate,
        s.policy_loss,
        s.value_loss,
        s.entropy,
        s.approx_kl,
        s.clipfrac,
        s.explained_variance,
        t.env,
        t.inference,
        t.learner,
        other,
        sps
    )
}

impl Ppo {
    /// Asynchronous IMPALA (`actors > 0`): the mean number of updates between the policy
    /// that collected a rollout and the learner that used it.
    pub fn mean_policy_lag(&self) -> Option<f64> {
        matches!(self.cfg.collection(), Collection::Async { .. })
            .then(|| self.async_lag.0 as f64 / self.async_lag.1.max(1) as f64)
    }
}

impl Algorithm for Ppo {
    type Config = PpoConfig;
    type State = PpoState;
    type Stats = IterationStats;
    type Mark = StageTimes;

    const METRICS_HEADER: &'static str = METRICS_HEADER;
    const DETERMINISTIC_COLUMNS: usize = DETERMINISTIC_COLUMNS;

    fn build(cfg: PpoConfig, threads: usize) -> Result<Ppo, LearnError> {
        Ppo::new(cfg, threads)
    }
    fn shape(c: &PpoConfig) -> RunShape<'_> {
        RunShape {
            algo: c.algo.name(),
            env: &c.env,
            seed: c.seed,
            budget: c.num_iterations() * c.batch_size() as u64,
            num_envs: c.num_envs,
            checkpoint_every: c.checkpoint_every,
            lower: "--num-envs or num_steps",
        }
    }
    crate::driver::forward_to_learner!(Ppo, PpoConfig);
    /// The update's backward passes split over the ranks, and (PPO, A2C) the envs: each
    /// rank steps its share of the batch and the ranks gather every step
    /// ([`crate::rank_envs`]). IMPALA's lagged actor steps the whole batch on every rank
    /// (it runs beside the learner's collective calls); asynchronous actors are refused
    /// (their rollouts differ from rank to rank, so the ranks' updates would).
    fn join(
        &mut self,
        c: std::sync::Arc<dyn crate::collective::Collective>,
        threads: usize,
    ) -> Result<(), LearnError> {
        match self.cfg.collection() {
            Collection::Async { .. } => {
                return Err(LearnError::Config(
                    "asynchronous actors (actors > 0) are not reproducible, so MPI ranks cannot share their updates: run IMPALA's deterministic schedule (actors = 0) under mpirun".into(),
                ));
            }
            Collection::Lagged { .. } => {}
            Collection::OnPolicy => {
                // The envs as built (and restored from a checkpoint), now split.
                let snap = self.act().env.snapshot();
                let (env, args, seed) = (&self.cfg.env, &self.cfg.env_args, self.cfg.seed);
                let mut envs =
                    crate::rank_envs::RankEnvs::new(self.cfg.num_envs, c.clone(), |share| {
                        crate::training_envs_of(env, args, share, seed, threads)
                    })?;
                rlrig_env::VecEnvDyn::restore(&mut envs, &snap)?;
                self.act_mut().env = Box::new(envs);
            }
        }
        self.set_backend(&crate::backend::Native::ranks_maker(threads, c))
    }
    fn sync(&mut self) {
        if self.quiescent() {
            self.act_mut().env.sync_snapshot();
        }
    }
    fn position(&self) -> u64 {
        self.iteration
    }
    fn clock(&self) -> u64 {
        self.global_step
    }
    fn work(&self) -> u64 {
        self.global_step
    }
    fn mark(&self) -> StageTimes {
        self.times
    }
    fn iterate(&mut self, turn: &Turn<'_>) -> Option<IterationStats> {
        // IMPALA's actor collects the next rollout during this update (asynchronous
        // actors keep running), except before a checkpoint, which must not hold a rollout
        // in flight: a due one, or the one a stop request asks for.
        let batch = self.cfg.batch_size() as u64;
        let checkpoint_next = turn.checkpoint_every > 0
            && self.global_step + batch - turn.last_checkpoint >= turn.checkpoint_every;
        Some(self.iterate_prefetching(!checkpoint_next && !(turn.stop)()))
    }
    fn record(&self, s: &IterationStats, before: &StageTimes, wall: f64) -> Record {
        let dt = self.times.since(before);
        let other = (wall - dt.total()).max(0.0);
        let sps = self.cfg.batch_size() as f64 / wall;
        Record {
            row: metrics_row(s, &dt, other, sps),
            step: s.global_step,
            scalars: [
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
            ]
            .into_iter()
            .chain(dt.scalars())
            .collect(),
            rate: sps,
            episode_return: s.episode_return,
        }
    }
    fn checkpoint(&self, dir: &RunDir) -> Result<(), LearnError> {
        let (m, v) = self.adam_moments();
        dir.save_checkpoint(&self.cfg, self.state(), &self.agent.params, (&m, &v))?;
        Ok(())
    }
    fn load(dir: &RunDir, algo: &str) -> Result<(PpoConfig, PpoState, Tensors), LearnError> {
        // A checkpoint of this algorithm, or an a2c/impala one from before the label
        // was kept ("ppo", whose config then takes the label asked for).
        let mut ck = dir.newest_intact(|p| load_checkpoint_of(p, &[algo, "ppo"]))?;
        if let (Some(f), "ppo") = (Family::of(algo), ck.meta.algo.as_str())
            && ck.meta.config.vtrace == (f == Family::Impala)
        {
            ck.meta.config.algo = f;
        }
        let tensors = [
            ("params", ck.params),
            ("adam_m", ck.adam_m),
            ("adam_v", ck.adam_v),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
        Ok((ck.meta.config, ck.meta.state, tensors))
    }
    fn restore(&mut self, st: PpoState, get: &mut dyn TensorSource) -> Result<(), LearnError> {
        let mut take =
            |n: &str| get(n).ok_or_else(|| LearnError::Mismatch(format!("tensor '{n}' missing")));
        let (p, m, v) = (take("params")?, take("adam_m")?, take("adam_v")?);
        Ppo::restore(self, st, p, m, v)
    }
    fn evaluate(&self, episodes: usize, seed: u64) -> Option<crate::eval::Episodes> {
        Some(Ppo::evaluate(self, episodes, seed))
    }
    fn quiescent(&self) -> bool {
        Ppo::quiescent(self)
    }
    fn enable_trace(&mut self, keep: u64) {
        Ppo::enable_trace(self, keep)
    }
    fn finish(&self, opts: &TrainOptions) -> Result<(), LearnError> {
        if let Some(path) = &opts.trace
            && let Some(log) = self.trace()
        {
            log.write_chrome(path)?;
        }
        Ok(())
    }
}
