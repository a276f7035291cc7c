//! PPO's configuration: the flat config a run directory stores, its validation,
//! memory estimate and the per-env presets (CleanRL, RL Baselines3 Zoo, Baselines; the
//! data in `presets/ppo.toml`, `a2c.toml` and `impala.toml`).

use super::*;
use crate::LearnError;
use crate::presets::{Presets, presets};
use crate::rules::{self, fields};

/// PPO hyperparameters. Defaults are CleanRL's `ppo.py`; [`PpoConfig::for_env`] applies
/// the continuous-control defaults and per-env presets.
/// PPO's optimiser; a config names it `"adam"` or `"rmsprop"`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    Adam,
    /// As PyTorch's (Stable-Baselines3's A2C), with `rmsprop_alpha` and `adam_eps`.
    Rmsprop,
}

/// The hidden layers' activation of PPO's MLPs; a config names it `"tanh"` (CleanRL's)
/// or `"relu"` (PureJaxRL's MinAtar and Brax settings).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MlpActivation {
    #[default]
    Tanh,
    Relu,
}

impl MlpActivation {
    /// The network crate's activation.
    pub fn nn(self) -> crate::nn::Activation {
        match self {
            MlpActivation::Tanh => crate::nn::Activation::Tanh,
            MlpActivation::Relu => crate::nn::Activation::Relu,
        }
    }
}

/// Which algorithm of the PPO family a config trains: one machinery, and the name its
/// run directory, checkpoints and exports carry (`rlrig train ppo|a2c|impala`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    #[default]
    Ppo,
    A2c,
    Impala,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Ppo, Family::A2c, Family::Impala];

    pub fn name(self) -> &'static str {
        match self {
            Family::Ppo => "ppo",
            Family::A2c => "a2c",
            Family::Impala => "impala",
        }
    }

    /// The family member called `name`, if any.
    pub fn of(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PpoConfig {
    /// The algorithm these settings train (a label: the settings below are what differ).
    pub algo: Family,
    /// Environment id.
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
    /// Steps per env per rollout.
    pub num_steps: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Anneal the learning rate linearly towards 0 (over `anneal_steps`).
    pub anneal_lr: bool,
    /// Steps over which the annealed learning rate falls to 0, at least the run's
    /// `total_steps` (0 or less: `total_steps`). Longer than the run, the schedule stops
    /// part-way, as a longer reference run's does when cut at this run's budget (the
    /// Atari preset: CleanRL's 10 M steps, cut at 2.5 M).
    pub anneal_steps: u64,
    /// Discount factor.
    pub gamma: f64,
    /// GAE lambda.
    pub gae_lambda: f64,
    /// Minibatches per epoch.
    pub num_minibatches: usize,
    /// Passes over each rollout.
    pub update_epochs: usize,
    /// Normalise advantages per minibatch.
    pub norm_adv: bool,
    /// Surrogate clipping coefficient.
    pub clip_coef: f64,
    /// Clip the value loss like the policy.
    pub clip_vloss: bool,
    /// Entropy bonus coefficient.
    pub ent_coef: f64,
    /// Value loss coefficient.
    pub vf_coef: f64,
    /// Global gradient-norm clip.
    pub max_grad_norm: f64,
    /// Hidden layer sizes of actor and critic (with `conv_channels` or `cnn`, the ReLU
    /// layers after the convolutions).
    pub hidden: Vec<usize>,
    /// The hidden activation of MLP agents, `"tanh"` or `"relu"`. The convolutional
    /// networks (`conv_channels`, `cnn`) are ReLU throughout, whatever this says.
    pub activation: MlpActivation,
    /// Channels of one 3x3 valid convolution (ReLU) in front of each network, for image
    /// observations (`h x w x planes`, e.g. MinAtar); 0: plain MLPs on the flat
    /// observation.
    pub conv_channels: usize,
    /// `"nature"`: the Nature DQN CNN (8x8/4, 4x4/2, 3x3/1 convolutions with 32, 64, 64
    /// channels, then the `hidden` ReLU layers) as one trunk under both heads, on
    /// planes-first image observations (Atari's `4 x 84 x 84`), bytes scaled by 1/255:
    /// CleanRL's `ppo_atari` agent. Empty: `conv_channels` decides.
    pub cnn: String,
    /// Learn from each reward's sign (-1, 0 or 1), as Baselines' `ClipRewardEnv` on
    /// Atari; episode returns stay the raw score.
    pub reward_sign: bool,
    /// Normalise observations with running statistics.
    pub norm_obs: bool,
    /// Scale rewards by the running std of the discounted return.
    pub norm_reward: bool,
    /// Clip normalised observations to +-this.
    pub clip_obs: f64,
    /// Clip normalised rewards to +-this.
    pub clip_reward: f64,
    /// Adam epsilon (RMSprop's too, when `optimizer = "rmsprop"`).
    pub adam_eps: f64,
    /// `adam` (PPO) or `rmsprop` (A2C, as Stable-Baselines3).
    pub optimizer: Optimizer,
    /// RMSprop's square-average decay.
    pub rmsprop_alpha: f64,
    /// Initial log standard deviation of the Gaussian policy (continuous actions).
    pub init_logstd: f64,
    /// Add gamma * V(final observation) to the reward of time-limit truncations.
    pub bootstrap_truncated: bool,
    /// Environment steps between checkpoints (0: only at the end).
    pub checkpoint_every: u64,
    /// IMPALA's learner: V-trace value targets and policy-gradient advantages
    /// (Espeholt et al. 2018), recomputed with the current parameters, instead of GAE.
    pub vtrace: bool,
    /// V-trace's truncation of the importance weights in the targets and advantages.
    pub vtrace_rho_bar: f64,
    /// V-trace's truncation of the trace coefficients.
    pub vtrace_c_bar: f64,
    /// Rollouts are collected with the parameters of this many updates ago: IMPALA's
    /// stale actors on a fixed schedule, so runs stay reproducible (0: on-policy).
    pub policy_lag: usize,
    /// IMPALA's asynchronous mode: this many actor threads, each with its own
    /// `num_envs` envs, collect rollouts with the newest parameters the learner has
    /// published, and the learner learns from rollouts in the order they arrive. Which
    /// policy a rollout used depends on timing, so such runs are NOT reproducible.
    /// Needs `vtrace`, `policy_lag = 0` and no observation/return normalisation.
    /// 0: off (the deterministic schedule of `policy_lag`).
    pub actors: usize,
    /// With `actors`: the actors ask one batching inference server (`serve.rs`) for
    /// their policy's outputs instead of each running the network, so every forward pass
    /// serves all actors waiting at that moment: the shape a GPU wants.
    pub inference_server: bool,
}

/// How a run collects its rollouts: what `policy_lag`, `actors` and `inference_server`
/// say together (the config file keeps the three keys; [`PpoConfig::validate`] refuses
/// the combinations that mean nothing, and the code branches on this).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collection {
    /// Each rollout acts with the current parameters (PPO, A2C).
    OnPolicy,
    /// IMPALA's deterministic schedule: each rollout acts with the parameters of `lag`
    /// updates ago, run natively from a host copy (and collected while the learner
    /// updates).
    Lagged { lag: usize },
    /// IMPALA's asynchronous actors: `actors` threads, each with its own `num_envs`
    /// envs, act with the newest published parameters, through one batching inference
    /// server when `server`. Not reproducible.
    Async { actors: usize, server: bool },
}

impl Collection {
    /// The actor threads collecting at once (1 for the synchronous modes).
    pub fn actor_threads(self) -> usize {
        match self {
            Collection::Async { actors, .. } => actors,
            _ => 1,
        }
    }

    /// How many updates old the collecting parameters are on the deterministic
    /// schedule (0 unless [`Collection::Lagged`]).
    pub fn lag(self) -> usize {
        match self {
            Collection::Lagged { lag } => lag,
            _ => 0,
        }
    }
}

impl Default for PpoConfig {
    fn default() -> Self {
        PpoConfig {
            algo: Family::Ppo,
            env: "CartPole-v1".into(),
            env_args: crate::EnvArgs::new(),
            seed: 1,
            total_steps: 500_000,
            num_envs: 4,
            num_steps: 128,
            learning_rate: 2.5e-4,
            anneal_lr: true,
            anneal_steps: 0,
            gamma: 0.99,
            gae_lambda: 0.95,
            num_minibatches: 4,
            update_epochs: 4,
            norm_adv: true,
            clip_coef: 0.2,
            clip_vloss: true,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            hidden: vec![64, 64],
            activation: MlpActivation::Tanh,
            conv_channels: 0,
            cnn: String::new(),
            reward_sign: false,
            norm_obs: false,
            norm_reward: false,
            clip_obs: 10.0,
            clip_reward: 10.0,
            adam_eps: 1e-5,
            optimizer: Optimizer::Adam,
            rmsprop_alpha: 0.99,
            init_logstd: 0.0,
            bootstrap_truncated: true,
            checkpoint_every: 100_000,
            vtrace: false,
            vtrace_rho_bar: 1.0,
            vtrace_c_bar: 1.0,
            policy_lag: 0,
            actors: 0,
            inference_server: false,
        }
    }
}

/// PPO's presets: CleanRL's continuous defaults, Atari's and MinAtar's settings and the
/// per-env ones (`presets/ppo.toml`).
pub(crate) const PPO_PRESETS: Presets<PpoConfig> = presets!(
    "ppo.toml",
    &[
        ("atari", |_, env| env_spec_is(env, |s| {
            nature_shape(&s.observation_space).is_some()
        })),
        ("continuous", |_, env| env_spec_is(env, |s| {
            !s.action_space.is_discrete()
        })),
        ("minatar", |_, env| env.starts_with("MinAtar/")),
    ]
);

/// A2C's presets over PPO's (`presets/a2c.toml`); Atari is the configs with the Nature
/// CNN.
pub(crate) const A2C_PRESETS: Presets<PpoConfig> = presets!(
    "a2c.toml",
    &[
        ("atari", |c, _| c.cnn == "nature"),
        ("minatar", |_, env| env.starts_with("MinAtar/")),
    ]
);

/// IMPALA's presets over A2C's (`presets/impala.toml`).
pub(crate) const IMPALA_PRESETS: Presets<PpoConfig> = presets!("impala.toml", &[]);

/// Whether `env` is a registered env whose spec satisfies `is`.
fn env_spec_is(env: &str, is: impl Fn(&rlrig_env::EnvSpec) -> bool) -> bool {
    rlrig_env::spec(env).is_ok_and(|s| is(&s))
}

impl PpoConfig {
    /// The defaults for `env`: CleanRL's discrete or continuous settings, then presets
    /// where the reference zoos use other settings (`presets/ppo.toml`).
    pub fn for_env(env: &str) -> PpoConfig {
        PPO_PRESETS.apply(PpoConfig::default(), env)
    }

    /// A2C (Mnih et al. 2016, synchronous) as Stable-Baselines3's defaults, over PPO's
    /// preset for `env` (`presets/a2c.toml` has the settings and their sources).
    pub fn a2c_for_env(env: &str) -> PpoConfig {
        A2C_PRESETS.apply(PpoConfig::for_env(env), env)
    }

    /// IMPALA (Espeholt et al. 2018) on A2C's settings: a policy one update behind the
    /// learner and V-trace corrections (`presets/impala.toml`).
    pub fn impala_for_env(env: &str) -> PpoConfig {
        IMPALA_PRESETS.apply(PpoConfig::a2c_for_env(env), env)
    }

    pub fn batch_size(&self) -> usize {
        self.num_envs * self.num_steps
    }

    pub fn minibatch_size(&self) -> usize {
        self.batch_size() / self.num_minibatches
    }

    pub fn num_iterations(&self) -> u64 {
        self.total_steps / self.batch_size() as u64
    }

    /// Iterations over which an annealed learning rate falls to 0.
    pub fn anneal_iterations(&self) -> u64 {
        self.anneal_steps.max(self.total_steps) / self.batch_size() as u64
    }

    /// The learning rate of iteration `it` (1-based).
    pub fn learning_rate_at(&self, it: u64) -> f64 {
        if self.anneal_lr {
            self.learning_rate * (1.0 - (it - 1) as f64 / self.anneal_iterations() as f64)
        } else {
            self.learning_rate
        }
    }

    /// How rollouts are collected (the three keys of a config that validates).
    pub fn collection(&self) -> Collection {
        match (self.actors, self.policy_lag) {
            (0, 0) => Collection::OnPolicy,
            (0, lag) => Collection::Lagged { lag },
            (actors, _) => Collection::Async {
                actors,
                server: self.inference_server,
            },
        }
    }

    /// Rejects configurations that cannot run, naming the key.
    pub fn validate(&self) -> Result<(), LearnError> {
        rlrig_env::spec(&self.env)?;
        crate::check_env(&self.env, &self.env_args)?;
        rules::at_least_one(fields!(self: num_envs, num_steps, num_minibatches, update_epochs))?;
        rules::hidden_layers(&self.hidden)?;
        let obs_space = || rlrig_env::spec(&self.env).map(|s| s.observation_space);
        if self.conv_channels > 0 && image_shape(&obs_space()?).is_none() {
            return Err(LearnError::Config(format!(
                "conv_channels: {} has no image observations (h x w x planes, at least \
                 3 x 3); set conv_channels = 0",
                self.env
            )));
        }
        match self.cnn.as_str() {
            "" => {}
            "nature" => {
                if nature_shape(&obs_space()?).is_none() {
                    return Err(LearnError::Config(format!(
                        "cnn = \"nature\": {} has no planes-first image observations of at \
                         least 36 x 36 (Atari's 4 x 84 x 84); set cnn = \"\"",
                        self.env
                    )));
                }
                if self.conv_channels > 0 {
                    return Err(LearnError::Config(
                        "cnn = \"nature\" and conv_channels > 0: choose one".into(),
                    ));
                }
            }
            other => {
                return Err(LearnError::Config(format!(
                    "cnn must be \"nature\" or \"\" (no CNN, or conv_channels'), got \"{other}\""
                )));
            }
        }
        if !self.batch_size().is_multiple_of(self.num_minibatches) {
            return Err(LearnError::Config(format!(
                "num_minibatches ({}) must divide num_envs * num_steps ({})",
                self.num_minibatches,
                self.batch_size()
            )));
        }
        if self.num_iterations() == 0 {
            return Err(LearnError::Config(format!(
                "total_steps ({}) is less than one rollout (num_envs * num_steps = {})",
                self.total_steps,
                self.batch_size()
            )));
        }
        if !(0.0..1.0).contains(&self.rmsprop_alpha) {
            return Err(LearnError::Config(format!(
                "rmsprop_alpha must be in [0, 1), got {}",
                self.rmsprop_alpha
            )));
        }
        if self.policy_lag > 0 && !self.vtrace {
            return Err(LearnError::Config(format!(
                "policy_lag = {} needs vtrace = true (stale rollouts need V-trace's correction)",
                self.policy_lag
            )));
        }
        if self.actors > 0 {
            let why = if !self.vtrace {
                Some("vtrace = true (asynchronous rollouts are off-policy)")
            } else if self.policy_lag > 0 {
                Some(
                    "policy_lag = 0 (the lag of asynchronous actors is whatever timing makes it; policy_lag is the deterministic mode)",
                )
            } else if self.norm_obs || self.norm_reward {
                Some(
                    "norm_obs = false and norm_reward = false (each actor would normalise differently)",
                )
            } else if self.actors > 64 {
                Some("at most 64 actors")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(LearnError::Config(format!(
                    "actors = {} needs {why}",
                    self.actors
                )));
            }
        }
        if self.inference_server && self.actors == 0 {
            return Err(LearnError::Config(
                "inference_server = true needs asynchronous actors (actors >= 1)".into(),
            ));
        }
        if self.policy_lag > 64 {
            return Err(LearnError::Config(format!(
                "policy_lag must be at most 64, got {}",
                self.policy_lag
            )));
        }
        rules::unit_interval(fields!(self: gamma, gae_lambda))?;
        rules::positive(fields!(self: vtrace_rho_bar, vtrace_c_bar))?;
        rules::positive(fields!(self: learning_rate, clip_coef, max_grad_norm, adam_eps))
    }
}

impl crate::memory::Estimated for PpoConfig {
    /// What the run's large buffers take: the envs, the rollout (twice with a lagged
    /// actor, which fills a second one), its advantage and return rows, the networks
    /// with their gradients and optimiser moments. Unknown envs count nothing (the
    /// config's validation names them).
    fn memory_estimate(&self) -> crate::memory::Estimate {
        let Ok(spec) = rlrig_env::spec(&self.env) else {
            return crate::memory::Estimate::new();
        };
        let (e, t) = (self.num_envs as f64, self.num_steps as f64);
        let (d, a) = (spec.obs_dim, spec.action_space.flat_dim());
        let rollouts = match self.collection() {
            Collection::OnPolicy => 1.0,
            Collection::Lagged { .. } => 2.0,
            Collection::Async { actors, .. } => 2.0 + actors as f64,
        };
        let params = crate::memory::mlp_params(d, &self.hidden, a.max(2))
            + crate::memory::mlp_params(d, &self.hidden, 1);
        crate::memory::envs(&self.env, self.num_envs)
            .add(
                format!(
                    "rollout of {} steps x {} envs",
                    self.num_steps, self.num_envs
                ),
                rollouts * t * e * (d + a + 6) as f64 * 4.0,
            )
            .add(
                "networks and optimiser",
                params * 4.0 * (4.0 + self.policy_lag as f64),
            )
    }
}
