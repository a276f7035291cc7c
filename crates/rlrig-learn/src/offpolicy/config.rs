//! DDPG/TD3/SAC's configuration: the algorithm, hyperparameters (CleanRL's defaults),
//! validation and memory estimate.

use super::*;
use crate::LearnError;
use crate::presets::{Presets, presets};
use crate::rules::{self, fields};

/// Which algorithm.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    Ddpg,
    Td3,
    Sac,
}

impl Algo {
    pub fn name(self) -> &'static str {
        match self {
            Algo::Ddpg => "ddpg",
            Algo::Td3 => "td3",
            Algo::Sac => "sac",
        }
    }

    pub(super) fn twin_critics(self) -> bool {
        self != Algo::Ddpg
    }
}

impl std::str::FromStr for Algo {
    type Err = String;
    fn from_str(s: &str) -> Result<Algo, String> {
        match s {
            "ddpg" => Ok(Algo::Ddpg),
            "td3" => Ok(Algo::Td3),
            "sac" => Ok(Algo::Sac),
            _ => Err(format!("unknown algorithm '{s}' (known: ddpg, td3, sac)")),
        }
    }
}

/// Hyperparameters. Defaults are CleanRL's; [`OffPolicyConfig::for_env`] adds presets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OffPolicyConfig {
    /// ddpg, td3 or sac.
    pub algo: Algo,
    /// Environment id (a continuous-action env).
    pub env: String,
    /// Env parameters (`--env-arg KEY=VALUE`; see [`crate::EnvArgs`]).
    #[serde(deserialize_with = "crate::env_args_serde::deserialize")]
    pub env_args: crate::EnvArgs,
    /// Seed of every random stream in the run.
    pub seed: u64,
    /// Environment steps to train for (all envs together).
    pub total_steps: u64,
    /// Environments stepped together.
    pub num_envs: usize,
    /// Replay buffer capacity in transitions (allocated up front, at most total_steps).
    pub buffer_size: usize,
    /// Discount factor.
    pub gamma: f64,
    /// Polyak coefficient of the target networks.
    pub tau: f64,
    /// Minibatch size of each update.
    pub batch_size: usize,
    /// Environment steps of uniformly random actions before learning starts.
    pub learning_starts: u64,
    /// Actor learning rate (Adam).
    pub policy_lr: f64,
    /// Critic (and SAC temperature) learning rate (Adam).
    pub q_lr: f64,
    /// Actor updates happen every this many updates (TD3's delay; SAC then makes this
    /// many actor updates at once, as CleanRL).
    pub policy_frequency: u64,
    /// SAC: soft-update the target critics every this many updates.
    pub target_network_frequency: u64,
    /// DDPG/TD3: std of the Gaussian exploration noise, in units of the action scale.
    pub exploration_noise: f64,
    /// TD3: std of the target policy smoothing noise (action-scale units).
    pub policy_noise: f64,
    /// TD3: clip of the target policy smoothing noise.
    pub noise_clip: f64,
    /// SAC: entropy temperature (the initial one when autotune is on: CleanRL starts
    /// log alpha at 0, i.e. alpha 1, and ignores this value then).
    pub alpha: f64,
    /// SAC: tune the temperature towards the target entropy -dim(A).
    pub autotune: bool,
    /// Hidden layer sizes of actor and critics (ReLU).
    pub hidden: Vec<usize>,
    /// Gradient updates per environment step collected (after learning_starts).
    pub utd_ratio: f64,
    /// Adam epsilon (PyTorch's default).
    pub adam_eps: f64,
    /// Environment steps per metrics.csv row and progress update.
    pub log_every: u64,
    /// Environment steps between checkpoints (0: only at the end).
    pub checkpoint_every: u64,
    /// Save the replay buffer in checkpoints, so a resumed run continues bit for bit.
    /// Without it a resumed run refills the buffer and differs from an uninterrupted one.
    pub checkpoint_buffer: bool,
}

impl Default for OffPolicyConfig {
    fn default() -> Self {
        OffPolicyConfig {
            algo: Algo::Sac,
            env: "Pendulum-v1".into(),
            env_args: crate::EnvArgs::new(),
            seed: 1,
            total_steps: 1_000_000,
            num_envs: 1,
            buffer_size: 1_000_000,
            gamma: 0.99,
            tau: 0.005,
            batch_size: 256,
            learning_starts: 5_000,
            policy_lr: 3e-4,
            q_lr: 1e-3,
            policy_frequency: 2,
            target_network_frequency: 1,
            exploration_noise: 0.1,
            policy_noise: 0.2,
            noise_clip: 0.5,
            alpha: 0.2,
            autotune: true,
            hidden: vec![256, 256],
            utd_ratio: 1.0,
            adam_eps: 1e-8,
            log_every: 1_000,
            checkpoint_every: 100_000,
            checkpoint_buffer: true,
        }
    }
}

/// DDPG's and TD3's settings, the per-env presets, and SAC's own where an env has them
/// (`presets/offpolicy.toml`).
pub(crate) const PRESETS: Presets<OffPolicyConfig> = presets!(
    "offpolicy.toml",
    &[
        ("ddpg-td3", |c, _| c.algo != Algo::Sac),
        ("sac", |c, _| c.algo == Algo::Sac),
    ]
);

impl OffPolicyConfig {
    /// CleanRL's defaults for `algo`, then presets for `env` (`presets/offpolicy.toml`).
    pub fn for_env(algo: Algo, env: &str) -> OffPolicyConfig {
        PRESETS.apply(
            OffPolicyConfig {
                algo,
                ..OffPolicyConfig::default()
            },
            env,
        )
    }

    pub fn validate(&self) -> Result<(), LearnError> {
        let spec = rlrig_env::spec(&self.env)?;
        crate::check_env(&self.env, &self.env_args)?;
        if spec.action_space.is_discrete() {
            return Err(LearnError::Config(format!(
                "{} has a discrete action space ({}); {} needs continuous (Box) actions: use `rlrig train ppo`",
                self.env,
                spec.action_space,
                self.algo.name()
            )));
        }
        rules::at_least_one(fields!(self: num_envs, batch_size, buffer_size))?;
        rules::at_least_one(fields!(self: policy_frequency, target_network_frequency, log_every))?;
        rules::hidden_layers(&self.hidden)?;
        rules::positive(fields!(self: policy_lr, q_lr, adam_eps, alpha))?;
        rules::unit_interval(fields!(self: gamma, tau))?;
        rules::non_negative(fields!(self: exploration_noise, policy_noise, noise_clip, utd_ratio))
    }

    /// Transitions the buffer holds.
    pub fn capacity(&self) -> usize {
        self.buffer_size.min(self.total_steps.max(1) as usize)
    }
}

impl crate::memory::Estimated for OffPolicyConfig {
    /// What the run's large buffers take: the envs, the replay buffer (allocated up
    /// front, at most `total_steps` rows) and the networks (actor, two critics, their
    /// targets, gradients and Adam moments).
    fn memory_estimate(&self) -> crate::memory::Estimate {
        let Ok(spec) = rlrig_env::spec(&self.env) else {
            return crate::memory::Estimate::new();
        };
        let (d, a) = (spec.obs_dim, spec.action_space.flat_dim());
        let rows = (self.buffer_size as f64).min(self.total_steps as f64);
        let actor = crate::memory::mlp_params(d, &self.hidden, 2 * a);
        let critic = crate::memory::mlp_params(d + a, &self.hidden, 1);
        crate::memory::envs(&self.env, self.num_envs)
            .and(crate::memory::replay(rows, 2 * d + a + 2))
            .add("networks and optimiser", (actor + 2.0 * critic) * 4.0 * 5.0)
    }
}
