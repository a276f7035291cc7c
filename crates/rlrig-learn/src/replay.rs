//! The replay-buffer learners (DDPG, TD3, SAC, DQN) as the [`crate::driver`] runs
//! them: one metrics layout for all four and checkpoints of named tensors.

use serde::Serialize;

use crate::LearnError;
use crate::collector::{ChunkStats, NamedTensor};
use crate::dqn::{Dqn, DqnConfig, DqnState};
use crate::driver::{Algorithm, Record, RunShape, Turn};
use crate::offpolicy::{OffPolicy, OffPolicyConfig, OffPolicyState};
use crate::run::{RunDir, TensorSource};
use crate::trace::StageTimes;

/// metrics.csv columns of replay-buffer runs: learning metrics first (deterministic),
/// then wall-clock stage times. DQN writes its exploration epsilon in `alpha` and has no
/// actor loss.
pub const OFFPOLICY_METRICS_HEADER: &str = "global_step,episodes,episode_return,episode_length,updates,qf_loss,actor_loss,q_value,alpha,time_env,time_inference,time_learner,time_other,steps_per_sec";

/// Number of leading deterministic columns of [`OFFPOLICY_METRICS_HEADER`].
pub const OFFPOLICY_DETERMINISTIC_COLUMNS: usize = 9;

/// Writes `state` and `tensors` as the checkpoint at `step` of a run of `algo`.
fn save<C: Serialize, S: Serialize>(
    dir: &RunDir,
    algo: &str,
    step: u64,
    cfg: &C,
    (state, tensors): (S, Vec<NamedTensor<'_>>),
) -> Result<(), LearnError> {
    let tensors: Vec<(&str, &[f32])> = tensors.iter().map(|(n, v)| (*n, &**v)).collect();
    dir.save_tensors(algo, step, cfg, &state, &tensors)?;
    Ok(())
}

/// What a run summary reads of any replay-buffer learner.
pub trait Replay: Algorithm<Stats = ChunkStats> {
    fn global_step(&self) -> u64;
    /// Gradient updates so far.
    fn updates(&self) -> u64;
    fn times(&self) -> StageTimes;
}

/// The [`Algorithm`] (and [`Replay`]) of a replay-buffer learner `$t` (fields `cfg`,
/// `updates`, `times`, the [`crate::collector::Collector`] `c`; methods `new`, `state`, `restore`, `evaluate`, `device`,
/// `set_backend`, `done`, `iterate_until`) whose checkpoints' `algo` is `$algo(cfg)`.
macro_rules! replay_algorithm {
    ($t:ty, $config:ty, $state:ty, $algo:expr) => {
        impl Replay for $t {
            fn global_step(&self) -> u64 {
                self.c.global_step
            }
            fn updates(&self) -> u64 {
                self.updates
            }
            fn times(&self) -> StageTimes {
                self.times
            }
        }

        impl Algorithm for $t {
            type Config = $config;
            type State = $state;
            type Stats = ChunkStats;
            type Mark = (StageTimes, u64);

            const METRICS_HEADER: &'static str = OFFPOLICY_METRICS_HEADER;
            const DETERMINISTIC_COLUMNS: usize = OFFPOLICY_DETERMINISTIC_COLUMNS;

            fn build(cfg: $config, threads: usize) -> Result<Self, LearnError> {
                <$t>::new(cfg, threads)
            }
            fn shape(c: &$config) -> RunShape<'_> {
                RunShape {
                    algo: $algo(c),
                    env: &c.env,
                    seed: c.seed,
                    budget: c.total_steps,
                    num_envs: c.num_envs,
                    checkpoint_every: c.checkpoint_every,
                    lower: "buffer_size (--set buffer_size=N) or --num-envs",
                }
            }
            crate::driver::forward_to_learner!($t, $config);
            fn position(&self) -> u64 {
                self.c.global_step
            }
            fn work(&self) -> u64 {
                self.c.global_step
            }
            fn mark(&self) -> (StageTimes, u64) {
                (self.times, self.c.global_step)
            }
            /// A stop is answered within one collection step: a chunk of a large
            /// network's updates takes seconds.
            fn iterate(&mut self, turn: &Turn<'_>) -> Option<ChunkStats> {
                self.iterate_until(turn.stop)
            }
            fn record(&self, s: &ChunkStats, before: &(StageTimes, u64), wall: f64) -> Record {
                chunk_record(s, self.times, before, wall)
            }
            fn checkpoint(&self, dir: &RunDir) -> Result<(), LearnError> {
                save(
                    dir,
                    $algo(&self.cfg),
                    self.c.global_step,
                    &self.cfg,
                    self.state(),
                )
            }
            fn restore(
                &mut self,
                st: $state,
                get: &mut dyn TensorSource,
            ) -> Result<(), LearnError> {
                <$t>::restore(self, st, get)
            }
            fn evaluate(&self, episodes: usize, seed: u64) -> Option<crate::eval::Episodes> {
                Some(<$t>::evaluate(self, episodes, seed))
            }
        }
    };
}

replay_algorithm!(
    OffPolicy,
    OffPolicyConfig,
    OffPolicyState,
    |c: &OffPolicyConfig| c.algo.name()
);
replay_algorithm!(Dqn, DqnConfig, DqnState, |_: &DqnConfig| "dqn");

/// A chunk of a replay-buffer run as a metrics row (the same columns for all of them).
fn chunk_record(
    s: &ChunkStats,
    times: StageTimes,
    (before, step0): &(StageTimes, u64),
    wall: f64,
) -> Record {
    let dt = times.since(before);
    let other = (wall - dt.total()).max(0.0);
    let sps = (s.global_step - step0) as f64 / wall;
    Record {
        row: format!(
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
        ),
        step: s.global_step,
        scalars: [
            ("charts/episode_return", s.episode_return),
            ("charts/episode_length", s.episode_length),
            ("charts/steps_per_sec", sps),
            ("charts/updates", s.updates as f64),
            ("losses/qf_loss", s.qf_loss),
            ("losses/actor_loss", s.actor_loss),
            ("losses/q_value", s.q_value),
            ("losses/alpha", s.alpha),
        ]
        .into_iter()
        .chain(dt.scalars())
        .collect(),
        rate: sps,
        episode_return: s.episode_return,
    }
}
