//! An AlphaZero run as the [`crate::driver`] sees it: metrics row, checkpoint, restore.

use super::*;
use crate::LearnError;
use crate::run::TensorSource;

/// metrics.csv columns of AlphaZero runs: learning metrics first (deterministic), then
/// wall-clock stage times.
pub const AZ_METRICS_HEADER: &str = "iteration,samples,games_finished,policy_loss,value_loss,win_rate_random,win_rate_solver,loss_rate_solver,time_search,time_inference,time_learner,time_eval,samples_per_sec";

/// Number of leading deterministic columns of [`AZ_METRICS_HEADER`].
pub const AZ_DETERMINISTIC_COLUMNS: usize = 8;

impl crate::driver::Algorithm for AlphaZero {
    type Config = AzConfig;
    type State = AzState;
    type Stats = AzStats;
    type Mark = (AzTimes, u64);

    const METRICS_HEADER: &'static str = AZ_METRICS_HEADER;
    const DETERMINISTIC_COLUMNS: usize = AZ_DETERMINISTIC_COLUMNS;
    const EVALUATES_IN_ITERATIONS: bool = true;

    /// Self-play runs on the backend's one thread; `threads` is not used.
    fn build(cfg: AzConfig, _threads: usize) -> Result<AlphaZero, LearnError> {
        AlphaZero::new(cfg)
    }
    fn shape(c: &AzConfig) -> crate::driver::RunShape<'_> {
        crate::driver::RunShape {
            algo: "alphazero",
            env: &c.env,
            seed: c.seed,
            budget: c.iterations,
            num_envs: c.games,
            checkpoint_every: c.checkpoint_every,
            lower: "--games, --simulations, eval_games or buffer_size",
        }
    }
    crate::driver::forward_to_learner!(AlphaZero, AzConfig);
    fn position(&self) -> u64 {
        self.iteration
    }
    fn work(&self) -> u64 {
        self.samples
    }
    fn mark(&self) -> (AzTimes, u64) {
        (self.times, self.samples)
    }
    fn iterate(&mut self, _turn: &crate::driver::Turn<'_>) -> Option<AzStats> {
        Some(AlphaZero::iterate(self))
    }
    fn record(
        &self,
        s: &AzStats,
        (before, s0): &(AzTimes, u64),
        wall: f64,
    ) -> crate::driver::Record {
        let t = self.times;
        let sps = (self.samples - s0) as f64 / wall;
        crate::driver::Record {
            row: format!(
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
            ),
            step: s.samples,
            scalars: vec![
                ("losses/policy_loss", s.policy_loss),
                ("losses/value_loss", s.value_loss),
                ("eval/win_rate_random", s.win_rate_random),
                ("eval/win_rate_solver", s.win_rate_solver),
                ("eval/loss_rate_solver", s.loss_rate_solver),
                ("eval/gate_score", s.gate_score),
                ("charts/samples_per_sec", sps),
                ("charts/games_finished", s.games_finished as f64),
            ],
            rate: sps,
            episode_return: f64::NAN,
        }
    }
    fn checkpoint(&self, dir: &crate::run::RunDir) -> Result<(), LearnError> {
        let (state, tensors) = self.state();
        let views: Vec<(&str, &[f32])> = tensors.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        dir.save_tensors("alphazero", self.iteration, &self.cfg, &state, &views)?;
        Ok(())
    }
    fn restore(&mut self, st: AzState, get: &mut dyn TensorSource) -> Result<(), LearnError> {
        AlphaZero::restore(self, st, get)
    }
    /// The evaluation games are part of the iterations; the last ones are eval.json.
    fn evaluate(&self, _episodes: usize, _seed: u64) -> Option<crate::eval::Episodes> {
        None
    }
    /// Iterations without an evaluation keep showing the last one's win rates.
    fn carry(last: &AzStats, s: &AzStats) -> AzStats {
        if s.win_rate_random.is_finite() || last.iteration == 0 {
            s.clone()
        } else {
            AzStats {
                win_rate_random: last.win_rate_random,
                win_rate_solver: last.win_rate_solver,
                loss_rate_solver: last.loss_rate_solver,
                ..s.clone()
            }
        }
    }
}
