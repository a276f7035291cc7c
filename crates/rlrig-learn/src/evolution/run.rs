//! An ES/GA run as the [`crate::driver`] sees it: metrics row, checkpoint, restore, the
//! deployed policy's evaluation and the stop every MPI rank agrees on.

use super::*;
use crate::LearnError;
use crate::run::TensorSource;

/// metrics.csv columns of ES/GA runs: learning metrics first (deterministic), then
/// wall-clock time.
pub const EVO_METRICS_HEADER: &str =
    "generation,episodes,best_fitness,mean_fitness,center_fitness,seconds,generations_per_sec";

/// Number of leading deterministic columns of [`EVO_METRICS_HEADER`].
pub const EVO_DETERMINISTIC_COLUMNS: usize = 5;

/// With a [`Collective`] (MPI ranks), every rank computes the same generations and
/// reads a checkpoint to resume; only rank 0 writes the run directory.
impl crate::driver::Algorithm for Evolution {
    type Config = EvoConfig;
    type State = EvoState;
    type Stats = GenStats;
    type Mark = ();

    const METRICS_HEADER: &'static str = EVO_METRICS_HEADER;
    const DETERMINISTIC_COLUMNS: usize = EVO_DETERMINISTIC_COLUMNS;

    fn build(cfg: EvoConfig, threads: usize) -> Result<Evolution, LearnError> {
        Evolution::new(cfg, threads)
    }
    fn shape(c: &EvoConfig) -> crate::driver::RunShape<'_> {
        crate::driver::RunShape {
            algo: c.algo(),
            env: &c.env,
            seed: c.seed,
            budget: c.generations,
            num_envs: c.population,
            checkpoint_every: c.checkpoint_every,
            lower: "--population or hidden",
        }
    }
    crate::driver::forward_to_learner!(Evolution, EvoConfig);
    fn position(&self) -> u64 {
        self.generation
    }
    fn work(&self) -> u64 {
        self.generation
    }
    fn mark(&self) {}
    fn iterate(&mut self, _turn: &crate::driver::Turn<'_>) -> Option<GenStats> {
        Some(self.step())
    }
    fn record(&self, s: &GenStats, _: &(), secs: f64) -> crate::driver::Record {
        crate::driver::Record {
            row: format!(
                "{},{},{},{},{},{:.6},{:.3}",
                s.generation,
                s.episodes,
                s.best_fitness,
                s.mean_fitness,
                s.center_fitness,
                secs,
                1.0 / secs
            ),
            step: s.generation,
            scalars: vec![
                ("fitness/best", s.best_fitness),
                ("fitness/mean", s.mean_fitness),
                ("fitness/center_or_elite", s.center_fitness),
                ("charts/episodes", s.episodes as f64),
                ("time/generation", secs),
            ],
            rate: 1.0 / secs,
            episode_return: f64::NAN,
        }
    }
    fn checkpoint(&self, dir: &crate::run::RunDir) -> Result<(), LearnError> {
        let (state, mut tensors) = self.state();
        let best = self.best_params();
        tensors.push(("best", &best));
        dir.save_tensors(
            self.cfg.algo(),
            self.generation,
            &self.cfg,
            &state,
            &tensors,
        )?;
        Ok(())
    }
    fn restore(&mut self, st: EvoState, get: &mut dyn TensorSource) -> Result<(), LearnError> {
        Evolution::restore(self, st, get)
    }
    /// The deployed policy (ES centre, GA elite), episode by episode.
    fn evaluate(&self, episodes: usize, seed: u64) -> Option<crate::eval::Episodes> {
        let c = &self.cfg;
        Some(
            self.policy
                .episodes(&c.env, &c.env_args, &self.best_params(), episodes, seed),
        )
    }
    /// Members split over the ranks ([`Evolution::set_collective`]).
    fn join(
        &mut self,
        c: std::sync::Arc<dyn crate::collective::Collective>,
        _threads: usize,
    ) -> Result<(), LearnError> {
        self.set_collective(c);
        Ok(())
    }
}
