//! ES/GA's configuration: the method, hyperparameters (per-env presets in
//! `presets/evolution.toml`), validation and memory estimate.

use super::*;
use crate::LearnError;
use crate::presets::{Presets, presets};
use crate::rules::{self, fields};

/// Which evolutionary method.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Es,
    Ga,
}

/// Hyperparameters (defaults: OpenAI-ES's and Such et al.'s, scaled to small tasks).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvoConfig {
    pub method: Method,
    pub env: String,
    /// Env parameters (`--env-arg KEY=VALUE`; see [`crate::EnvArgs`]).
    #[serde(deserialize_with = "crate::env_args_serde::deserialize")]
    pub env_args: crate::EnvArgs,
    pub seed: u64,
    /// Members per generation (ES: an even number, mirrored pairs).
    pub population: usize,
    pub generations: u64,
    pub episodes_per_member: usize,
    /// Hidden layer sizes of the policy (tanh).
    pub hidden: Vec<usize>,
    /// Noise scale: ES perturbation / GA mutation std.
    pub sigma: f64,
    /// ES: Adam step size and L2 coefficient.
    pub learning_rate: f64,
    pub weight_decay: f64,
    /// GA: parents kept per generation (truncation selection).
    pub truncation: usize,
    /// GA: the best `elite_candidates` are re-evaluated on `elite_episodes` more
    /// episodes; the best of them survives unchanged.
    pub elite_candidates: usize,
    pub elite_episodes: usize,
    /// GA: evolve the connection mask of a fixed random network instead of weights;
    /// each mutation removes `prune_fraction` of the remaining connections.
    pub prune: bool,
    pub prune_fraction: f64,
    /// Generations between checkpoints (0: only at the end).
    pub checkpoint_every: u64,
}

impl Default for EvoConfig {
    fn default() -> Self {
        EvoConfig {
            method: Method::Es,
            env: "CartPole-v1".into(),
            env_args: crate::EnvArgs::new(),
            seed: 1,
            population: 64,
            generations: 100,
            episodes_per_member: 2,
            hidden: vec![16],
            sigma: 0.05,
            learning_rate: 0.03,
            weight_decay: 0.005,
            truncation: 10,
            elite_candidates: 5,
            elite_episodes: 10,
            prune: false,
            prune_fraction: 0.05,
            checkpoint_every: 10,
        }
    }
}

/// GA's settings and the per-env presets (`presets/evolution.toml`).
pub(crate) const PRESETS: Presets<EvoConfig> =
    presets!("evolution.toml", &[("ga", |c, _| c.method == Method::Ga)]);

impl EvoConfig {
    /// The defaults for `method`, then presets for `env` (`presets/evolution.toml`).
    pub fn for_env(method: Method, env: &str) -> EvoConfig {
        PRESETS.apply(
            EvoConfig {
                method,
                ..EvoConfig::default()
            },
            env,
        )
    }

    pub fn validate(&self) -> Result<(), LearnError> {
        rlrig_env::spec(&self.env)?;
        crate::check_env(&self.env, &self.env_args)?;
        if self.population < 2 || self.generations == 0 || self.episodes_per_member == 0 {
            return Err(LearnError::Config(
                "population must be at least 2, generations and episodes_per_member at least 1"
                    .into(),
            ));
        }
        if self.method == Method::Es && !self.population.is_multiple_of(2) {
            return Err(LearnError::Config(format!(
                "ES uses mirrored pairs: population must be even, got {}",
                self.population
            )));
        }
        if self.method == Method::Ga {
            if self.truncation == 0 || self.truncation > self.population {
                return Err(LearnError::Config(format!(
                    "truncation must lie in 1..=population ({}), got {}",
                    self.population, self.truncation
                )));
            }
            if self.elite_candidates == 0 || self.elite_candidates > self.truncation {
                return Err(LearnError::Config(format!(
                    "elite_candidates ({}) must lie in 1..=truncation ({}): the population is smaller than the elite",
                    self.elite_candidates, self.truncation
                )));
            }
        }
        if self.prune && self.method != Method::Ga {
            return Err(LearnError::Config(
                "prune is a GA option (rlrig train ga --prune)".into(),
            ));
        }
        if self.hidden.contains(&0) {
            return Err(LearnError::Config(format!(
                "hidden sizes must be positive, got {:?}",
                self.hidden
            )));
        }
        rules::positive(fields!(self: sigma, learning_rate))?;
        rules::non_negative(fields!(self: weight_decay))?;
        if !(0.0..1.0).contains(&self.prune_fraction) {
            return Err(LearnError::Config(format!(
                "prune_fraction must lie in [0, 1), got {}",
                self.prune_fraction
            )));
        }
        Ok(())
    }
}

impl EvoConfig {
    /// The checkpoints' `algo`: `es` or `ga`.
    pub fn algo(&self) -> &'static str {
        match self.method {
            Method::Es => "es",
            Method::Ga => "ga",
        }
    }
}

impl crate::memory::Estimated for EvoConfig {
    /// What the run's large buffers take: the population's genomes (GA: two
    /// generations' worth; ES keeps a centre and draws its noise from counters) and
    /// the fitness evaluation's envs (one member's at a time per thread, not counted).
    fn memory_estimate(&self) -> crate::memory::Estimate {
        let Ok(spec) = rlrig_env::spec(&self.env) else {
            return crate::memory::Estimate::new();
        };
        let params =
            crate::memory::mlp_params(spec.obs_dim, &self.hidden, spec.action_space.flat_dim());
        let genomes = match self.method {
            Method::Ga => 2.0 * self.population as f64,
            Method::Es => 4.0,
        };
        crate::memory::Estimate::new().add(
            format!("population of {} x {params} parameters", self.population),
            genomes * params * 4.0,
        )
    }
}
