//! Proximal Policy Optimization (Schulman et al. 2017), as CleanRL's `ppo.py` (discrete
//! actions) and `ppo_continuous_action.py` (diagonal Gaussian with a state-independent
//! log-std): GAE, clipped surrogate, clipped value loss, entropy bonus, advantage
//! normalisation, global gradient clipping, linear learning-rate annealing, epochs x
//! minibatches; observation and return normalisation for continuous control.
//!
//! Determinism: the envs are stepped by rlrig-env (identical at any thread count);
//! action sampling for env `k` in iteration `i` draws from the stream
//! `(seed, Policy, i * num_envs + k)`, minibatch shuffles from `(seed, Learner, ...)`;
//! the learner runs on one thread in a fixed order. A run is a pure function of its
//! config, and a checkpoint holds everything needed to continue it bit for bit. The one
//! exception is IMPALA's asynchronous mode (`actors > 0`), whose rollouts use whatever
//! parameters were newest when they were collected: that depends on timing.

use rlrig_env::{ActionBuf, AutoReset, Purpose, Rng, Space, VecEnvDyn, make_sync};
use serde::{Deserialize, Serialize};

use crate::backend::{BackendMaker, Native, Net, NetBackend, NetCache, NetLayout};
use crate::conv::{ConvNet, NATURE};
use crate::nn::{Mlp, normal};
use crate::normalize::RunningMeanStd;
use crate::optim::Adam;

/// PPO hyperparameters. Defaults are CleanRL's `ppo.py`; [`PpoConfig::for_env`] applies
/// the continuous-control defaults and per-env presets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PpoConfig {
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
    /// Anneal the learning rate linearly to 0 over the run.
    pub anneal_lr: bool,
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
    /// Hidden layer sizes of actor and critic (tanh; with `conv_channels`, the ReLU
    /// layers after the convolution).
    pub hidden: Vec<usize>,
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
    /// "adam" (PPO) or "rmsprop" (A2C, as Stable-Baselines3).
    pub optimizer: String,
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

/// The keys of an RL Baselines3 Zoo `ppo.yml` entry that rlrig's presets take (the
/// Zoo's names; `batch_size` is SB3's minibatch size).
struct ZooPpo {
    n_envs: usize,
    n_steps: usize,
    batch_size: usize,
    n_epochs: usize,
    gamma: f64,
    gae_lambda: f64,
    ent_coef: f64,
}

impl Default for PpoConfig {
    fn default() -> Self {
        PpoConfig {
            env: "CartPole-v1".into(),
            env_args: crate::EnvArgs::new(),
            seed: 1,
            total_steps: 500_000,
            num_envs: 4,
            num_steps: 128,
            learning_rate: 2.5e-4,
            anneal_lr: true,
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
            conv_channels: 0,
            cnn: String::new(),
            reward_sign: false,
            norm_obs: false,
            norm_reward: false,
            clip_obs: 10.0,
            clip_reward: 10.0,
            adam_eps: 1e-5,
            optimizer: "adam".into(),
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

impl PpoConfig {
    /// The defaults for `env`: CleanRL's discrete or continuous settings, then presets
    /// where the reference zoos use other settings.
    pub fn for_env(env: &str) -> PpoConfig {
        let mut c = PpoConfig {
            env: env.to_string(),
            ..PpoConfig::default()
        };
        let spec = rlrig_env::spec(env).ok();
        let continuous = spec
            .as_ref()
            .map(|s| !s.action_space.is_discrete())
            .unwrap_or(false);
        if spec.is_some_and(|s| nature_shape(&s.observation_space).is_some()) {
            // Atari (the preprocessed `<Game>-v5` ids): CleanRL's ppo_atari.py, for 10 M
            // frames (2.5 M steps at frameskip 4) instead of its 40 M.
            c.cnn = "nature".into();
            c.reward_sign = true;
            c.hidden = vec![512];
            c.total_steps = 2_500_000;
            c.num_envs = 8;
            c.num_steps = 128;
            c.clip_coef = 0.1;
            return c;
        }
        if continuous {
            // ppo_continuous_action.py
            c.total_steps = 1_000_000;
            c.num_envs = 1;
            c.num_steps = 2048;
            c.learning_rate = 3e-4;
            c.num_minibatches = 32;
            c.update_epochs = 10;
            c.ent_coef = 0.0;
            c.norm_obs = true;
            c.norm_reward = true;
        }
        match env {
            // rl-baselines3-zoo's Pendulum settings (without gSDE): short horizon.
            // 400k steps reached -196..-206 with seeds 1-3 (300k was seed-sensitive).
            "Pendulum-v1" => {
                c.total_steps = 400_000;
                c.num_envs = 4;
                c.num_steps = 1024;
                c.gamma = 0.9;
                c.learning_rate = 1e-3;
                c.num_minibatches = 64;
                c.update_epochs = 10;
                c.clip_coef = 0.2;
            }
            "Acrobot-v1" => {
                c.total_steps = 500_000;
                c.norm_obs = true;
            }
            "MountainCarContinuous-v0" => {
                c.norm_obs = true;
            }
            // rl-baselines3-zoo's ppo.yml LunarLander, for 2M steps instead of the Zoo's
            // 1M: with seeds 1-5, 1M steps gave 3 greedy returns >= 200 of 5, 2M gave 4
            // (BENCHMARKS.md; CleanRL's defaults: -143 after 1M).
            "LunarLander-v3" => {
                c = c.zoo(ZooPpo {
                    n_envs: 16,
                    n_steps: 1024,
                    batch_size: 64,
                    n_epochs: 4,
                    gamma: 0.999,
                    gae_lambda: 0.98,
                    ent_coef: 0.01,
                });
                c.total_steps = 2_000_000;
            }
            // rl-baselines3-zoo's ppo.yml MountainCar, with its VecNormalize on
            // observations and rewards: -108 to -117 greedy over seeds 1-5 in 1M steps
            // (CleanRL's defaults never reach the flag: -200).
            "MountainCar-v0" => {
                c = c.zoo(ZooPpo {
                    n_envs: 16,
                    n_steps: 16,
                    batch_size: 64,
                    n_epochs: 4,
                    gamma: 0.99,
                    gae_lambda: 0.98,
                    ent_coef: 0.0,
                });
                c.total_steps = 1_000_000;
                c.norm_obs = true;
                c.norm_reward = true;
            }
            // MinAtar (Young & Tian 2019): its reference network, one 3x3 convolution
            // with 16 channels and 128 units, per actor and critic; PPO settings as
            // gymnax's MinAtar PPO (64 envs x 128 steps, 8 minibatches, lr 5e-4).
            id if id.starts_with("MinAtar/") => {
                c.total_steps = 1_000_000;
                c.conv_channels = 16;
                c.hidden = vec![128];
                c.num_envs = 64;
                c.num_steps = 128;
                c.num_minibatches = 8;
                c.learning_rate = 5e-4;
            }
            _ => {}
        }
        c
    }

    /// An RL Baselines3 Zoo `ppo.yml` setting: its keys, and SB3's PPO defaults where
    /// they differ from CleanRL's (constant learning rate 3e-4, no value-loss clipping).
    fn zoo(self, z: ZooPpo) -> PpoConfig {
        PpoConfig {
            num_envs: z.n_envs,
            num_steps: z.n_steps,
            num_minibatches: z.n_envs * z.n_steps / z.batch_size,
            update_epochs: z.n_epochs,
            gamma: z.gamma,
            gae_lambda: z.gae_lambda,
            ent_coef: z.ent_coef,
            learning_rate: 3e-4,
            anneal_lr: false,
            clip_vloss: false,
            ..self
        }
    }

    /// A2C (Mnih et al. 2016, synchronous) as Stable-Baselines3's defaults: 8 envs x 5
    /// steps, one gradient step per rollout on the whole batch (so PPO's ratio is 1 and
    /// its clipping never acts: the loss is the plain policy gradient), n-step returns
    /// (GAE lambda 1), no advantage normalisation, RMSprop (alpha 0.99, eps 1e-5), lr
    /// 7e-4, entropy 0, gradient clip 0.5.
    pub fn a2c_for_env(env: &str) -> PpoConfig {
        let base = PpoConfig::for_env(env);
        let a2c = PpoConfig {
            num_envs: 8,
            num_steps: 5,
            update_epochs: 1,
            num_minibatches: 1,
            clip_vloss: false,
            norm_adv: false,
            anneal_lr: false,
            gae_lambda: 1.0,
            learning_rate: 7e-4,
            ent_coef: 0.0,
            optimizer: "rmsprop".into(),
            ..base
        };
        if a2c.cnn == "nature" {
            // OpenAI Baselines' A2C on Atari, the seed's run: 16 envs x 5 steps, RMSprop
            // (alpha 0.99, eps 1e-5) at 7e-4 decayed linearly, entropy 0.01, value 0.5.
            return PpoConfig {
                num_envs: 16,
                ent_coef: 0.01,
                vf_coef: 0.5,
                anneal_lr: true,
                ..a2c
            };
        }
        if env.starts_with("MinAtar/") {
            // rl-baselines3-zoo's Atari A2C: 16 envs, entropy 0.01, value 0.25. Without
            // the entropy bonus the conv policy collapses to one action within 50k steps.
            return PpoConfig {
                num_envs: 16,
                ent_coef: 0.01,
                vf_coef: 0.25,
                ..a2c
            };
        }
        a2c
    }

    /// IMPALA (Espeholt et al. 2018) on A2C's settings: rollouts collected by a policy
    /// one update behind the learner (the actor/learner pipeline's staleness, on a fixed
    /// schedule) and V-trace corrections (rho_bar = c_bar = 1, lambda = 1) in the
    /// learner. With `policy_lag = 0` it is A2C with V-trace targets, i.e. A2C.
    pub fn impala_for_env(env: &str) -> PpoConfig {
        PpoConfig {
            vtrace: true,
            policy_lag: 1,
            ..PpoConfig::a2c_for_env(env)
        }
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

    /// What the run's large buffers take: the envs, the rollout (twice with a lagged
    /// actor, which fills a second one), its advantage and return rows, the networks
    /// with their gradients and optimiser moments. Unknown envs count nothing (the
    /// config's validation names them).
    pub fn memory_estimate(&self) -> crate::memory::Estimate {
        let Ok(spec) = rlrig_env::spec(&self.env) else {
            return crate::memory::Estimate::new();
        };
        let (e, t) = (self.num_envs as f64, self.num_steps as f64);
        let (d, a) = (spec.obs_dim, spec.action_space.flat_dim());
        let rollouts = if self.policy_lag > 0 || self.actors > 0 {
            2.0 + self.actors as f64
        } else {
            1.0
        };
        let params = crate::memory::mlp_params(d, &self.hidden, a.max(2))
            + crate::memory::mlp_params(d, &self.hidden, 1);
        crate::memory::Estimate::new()
            .add(
                format!("{} envs of {}", self.num_envs, self.env),
                e * spec.bytes_per_env as f64,
            )
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

    /// Rejects configurations that cannot run, naming the key.
    pub fn validate(&self) -> Result<(), String> {
        rlrig_env::spec(&self.env).map_err(|e| format!("env: {e}"))?;
        crate::check_env(&self.env, &self.env_args)?;
        let positive = [
            ("num_envs", self.num_envs),
            ("num_steps", self.num_steps),
            ("num_minibatches", self.num_minibatches),
            ("update_epochs", self.update_epochs),
        ];
        for (k, v) in positive {
            if v == 0 {
                return Err(format!("{k} must be at least 1"));
            }
        }
        if self.hidden.is_empty() || self.hidden.contains(&0) {
            return Err("hidden: needs at least one layer, each of at least 1 unit".into());
        }
        let obs_space = || {
            rlrig_env::spec(&self.env)
                .map(|s| s.observation_space)
                .map_err(|e| format!("env: {e}"))
        };
        if self.conv_channels > 0 && image_shape(&obs_space()?).is_none() {
            return Err(format!(
                "conv_channels: {} has no image observations (h x w x planes, at least \
                 3 x 3); set conv_channels = 0",
                self.env
            ));
        }
        match self.cnn.as_str() {
            "" => {}
            "nature" => {
                if nature_shape(&obs_space()?).is_none() {
                    return Err(format!(
                        "cnn = \"nature\": {} has no planes-first image observations of at \
                         least 36 x 36 (Atari's 4 x 84 x 84); set cnn = \"\"",
                        self.env
                    ));
                }
                if self.conv_channels > 0 {
                    return Err("cnn = \"nature\" and conv_channels > 0: choose one".into());
                }
            }
            other => {
                return Err(format!(
                    "cnn must be \"nature\" or \"\" (no CNN, or conv_channels'), got \"{other}\""
                ));
            }
        }
        if !self.batch_size().is_multiple_of(self.num_minibatches) {
            return Err(format!(
                "num_minibatches ({}) must divide num_envs * num_steps ({})",
                self.num_minibatches,
                self.batch_size()
            ));
        }
        if self.num_iterations() == 0 {
            return Err(format!(
                "total_steps ({}) is less than one rollout (num_envs * num_steps = {})",
                self.total_steps,
                self.batch_size()
            ));
        }
        if self.optimizer != "adam" && self.optimizer != "rmsprop" {
            return Err(format!(
                "optimizer must be \"adam\" or \"rmsprop\", got \"{}\"",
                self.optimizer
            ));
        }
        if !(0.0..1.0).contains(&self.rmsprop_alpha) {
            return Err(format!(
                "rmsprop_alpha must be in [0, 1), got {}",
                self.rmsprop_alpha
            ));
        }
        if self.policy_lag > 0 && !self.vtrace {
            return Err(format!(
                "policy_lag = {} needs vtrace = true (stale rollouts need V-trace's correction)",
                self.policy_lag
            ));
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
                return Err(format!("actors = {} needs {why}", self.actors));
            }
        }
        if self.inference_server && self.actors == 0 {
            return Err("inference_server = true needs asynchronous actors (actors >= 1)".into());
        }
        if self.policy_lag > 64 {
            return Err(format!(
                "policy_lag must be at most 64, got {}",
                self.policy_lag
            ));
        }
        for (k, v) in [
            ("vtrace_rho_bar", self.vtrace_rho_bar),
            ("vtrace_c_bar", self.vtrace_c_bar),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{k} must be a positive number, got {v}"));
            }
        }
        for (k, v) in [("gamma", self.gamma), ("gae_lambda", self.gae_lambda)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{k} must be in [0, 1], got {v}"));
            }
        }
        for (k, v) in [
            ("learning_rate", self.learning_rate),
            ("clip_coef", self.clip_coef),
            ("max_grad_norm", self.max_grad_norm),
            ("adam_eps", self.adam_eps),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{k} must be a positive number, got {v}"));
            }
        }
        Ok(())
    }
}

/// What the actor outputs.
#[derive(Clone, Debug, PartialEq)]
pub enum Head {
    /// Logits over `n` actions.
    Categorical { n: usize },
    /// Means of a diagonal Gaussian; log-stds are free parameters; actions are clipped
    /// to the bounds before they reach the env (as Gymnasium's `ClipAction`).
    Gaussian {
        dim: usize,
        low: Vec<f32>,
        high: Vec<f32>,
        logstd: usize,
    },
}

/// Index of the critic in the agent's [`NetLayout`] (networks apart).
pub const CRITIC: usize = 0;
/// Index of the actor in the agent's [`NetLayout`] (networks apart).
pub const ACTOR: usize = 1;
/// Index of the one network of an agent with a shared trunk.
pub const SHARED: usize = 0;

/// Low and high bounds of a Box action space.
type Bounds = (Vec<f32>, Vec<f32>);

/// `(h, w, planes)` of an image observation space (a Box of shape `[h, w, planes]`
/// with room for a 3x3 valid convolution).
pub fn image_shape(space: &Space) -> Option<(usize, usize, usize)> {
    match space {
        Space::Box { shape, .. } if shape.len() == 3 && shape[0] >= 3 && shape[1] >= 3 => {
            Some((shape[0], shape[1], shape[2]))
        }
        _ => None,
    }
}

/// `(planes, h, w)` of a planes-first image observation space the Nature CNN reads
/// (at least 36 x 36), and the input scale: 1/255 for bytes (`high` 255).
pub fn nature_shape(space: &Space) -> Option<((usize, usize, usize), f32)> {
    match space {
        Space::Box { shape, high, .. } if shape.len() == 3 && shape[1] >= 36 && shape[2] >= 36 => {
            let scale = if high.iter().all(|&h| h == 255.0) {
                1.0 / 255.0
            } else {
                1.0
            };
            Some(((shape[0], shape[1], shape[2]), scale))
        }
        _ => None,
    }
}

/// The networks of an agent.
#[derive(Clone, Debug)]
pub enum AgentNets {
    /// Critic and actor apart, `[critic | actor]` ([`CRITIC`], [`ACTOR`]): CleanRL's MLP
    /// agents, MinAtar's CNNs.
    Separate { critic: Net, actor: Net },
    /// One network ([`SHARED`]) whose output 0 is the value and outputs 1.. the
    /// policy's: CleanRL's Atari agent (one Nature CNN trunk, two linear heads).
    Shared(Net),
}

/// Actor and critic in one flat parameter buffer, then the Gaussian log-stds. MLPs
/// (tanh), for image observations MinAtar's network (one 3x3 convolution, ReLU, then
/// ReLU layers) each, or one Nature CNN with both heads.
#[derive(Clone, Debug)]
pub struct Agent {
    pub obs_dim: usize,
    pub nets: AgentNets,
    pub head: Head,
    pub params: Vec<f32>,
}

/// Which outputs of an agent: the value, or the policy head's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Part {
    Value,
    Policy,
}

/// Copies columns `from..from + cols` of the `rows x width` matrix `m` into `out`.
fn columns(m: &[f32], rows: usize, width: usize, from: usize, cols: usize, out: &mut Vec<f32>) {
    out.clear();
    if (from, cols) == (0, width) {
        out.extend_from_slice(&m[..rows * width]);
        return;
    }
    for r in 0..rows {
        out.extend_from_slice(&m[r * width + from..r * width + from + cols]);
    }
}

impl Agent {
    /// The networks' shapes without the parameters (for threads that run the policy
    /// from a parameter copy of their own), without copying the parameters first.
    fn shapes(&self) -> Agent {
        Agent {
            obs_dim: self.obs_dim,
            nets: self.nets.clone(),
            head: self.head.clone(),
            params: Vec::new(),
        }
    }

    pub fn new(
        obs_dim: usize,
        action_space: &Space,
        hidden: &[usize],
        init_logstd: f64,
        rng: &mut Rng,
    ) -> Agent {
        let sizes = |out: usize| -> Vec<usize> {
            std::iter::once(obs_dim)
                .chain(hidden.iter().copied())
                .chain([out])
                .collect()
        };
        let (out, _) = Self::outputs(action_space);
        let critic = Mlp::new(&sizes(1), 0);
        let actor = Mlp::new(&sizes(out), critic.end());
        Self::assemble(
            obs_dim,
            AgentNets::Separate {
                critic: critic.into(),
                actor: actor.into(),
            },
            action_space,
            init_logstd,
            rng,
        )
    }

    /// The agent `cfg` asks for on `spec`'s spaces: MLPs, MinAtar's convolutional
    /// networks with `conv_channels`, or the Nature CNN with `cnn = "nature"` (the
    /// caller has validated the config).
    pub fn for_config(spec: &rlrig_env::EnvSpec, cfg: &PpoConfig, rng: &mut Rng) -> Agent {
        let (out, _) = Self::outputs(&spec.action_space);
        if cfg.cnn == "nature" {
            let (shape, scale) =
                nature_shape(&spec.observation_space).expect("validated: image observations");
            let net = ConvNet::tower(shape, &NATURE, 0, &cfg.hidden, 1 + out, 0).with_scale(scale);
            return Self::assemble(
                spec.obs_dim,
                AgentNets::Shared(net.into()),
                &spec.action_space,
                cfg.init_logstd,
                rng,
            );
        }
        match image_shape(&spec.observation_space).filter(|_| cfg.conv_channels > 0) {
            None => Agent::new(
                spec.obs_dim,
                &spec.action_space,
                &cfg.hidden,
                cfg.init_logstd,
                rng,
            ),
            Some((h, w, planes)) => {
                let net = |outputs: usize, offset: usize| {
                    ConvNet::new(
                        planes,
                        h,
                        w,
                        cfg.conv_channels,
                        3,
                        0,
                        0,
                        &cfg.hidden,
                        outputs,
                        offset,
                    )
                    .with_channels_last()
                };
                let critic = net(1, 0);
                let actor = net(out, critic.end());
                Self::assemble(
                    spec.obs_dim,
                    AgentNets::Separate {
                        critic: critic.into(),
                        actor: actor.into(),
                    },
                    &spec.action_space,
                    cfg.init_logstd,
                    rng,
                )
            }
        }
    }

    /// Actor outputs and, for Box actions, their bounds (low, high).
    fn outputs(action_space: &Space) -> (usize, Option<Bounds>) {
        match action_space {
            Space::Discrete { n } => (*n as usize, None),
            Space::Box { low, high, .. } => (low.len(), Some((low.clone(), high.clone()))),
        }
    }

    fn assemble(
        obs_dim: usize,
        nets: AgentNets,
        action_space: &Space,
        init_logstd: f64,
        rng: &mut Rng,
    ) -> Agent {
        let (out, head) = Self::outputs(action_space);
        let nets_end = match &nets {
            AgentNets::Separate { actor, .. } => actor.end(),
            AgentNets::Shared(net) => net.end(),
        };
        let head = match head {
            None => Head::Categorical { n: out },
            Some((low, high)) => Head::Gaussian {
                dim: out,
                low,
                high,
                logstd: nets_end,
            },
        };
        let total = nets_end
            + if matches!(head, Head::Gaussian { .. }) {
                out
            } else {
                0
            };
        let mut params = vec![0.0; total];
        // CleanRL's layer_init: sqrt(2) hidden, 1.0 critic output, 0.01 actor output.
        let init = |net: &Net, out_gain: f32, params: &mut [f32], rng: &mut Rng| match net {
            Net::Mlp(m) => m.init(params, std::f32::consts::SQRT_2, out_gain, rng),
            Net::Conv(c) => c.init(params, std::f32::consts::SQRT_2, out_gain, rng),
        };
        match &nets {
            AgentNets::Separate { critic, actor } => {
                init(critic, 1.0, &mut params, rng);
                init(actor, 0.01, &mut params, rng);
            }
            AgentNets::Shared(net) => {
                init(net, 1.0, &mut params, rng);
                // The two heads are one output layer: the value column with gain 1,
                // the policy's columns with 0.01, each orthogonal on its own.
                let Net::Conv(c) = net else {
                    unreachable!("shared trunks are CNNs")
                };
                let last = c.head.layers().last().expect("a head layer");
                let (fi, fo) = (last.fan_in, last.fan_out);
                let mut value = vec![0.0; fi];
                let mut policy = vec![0.0; fi * (fo - 1)];
                crate::nn::orthogonal(&mut value, fi, 1, 1.0, rng);
                crate::nn::orthogonal(&mut policy, fi, fo - 1, 0.01, rng);
                for r in 0..fi {
                    let row = &mut params[last.w + r * fo..last.w + (r + 1) * fo];
                    row[0] = value[r];
                    row[1..].copy_from_slice(&policy[r * (fo - 1)..(r + 1) * (fo - 1)]);
                }
            }
        }
        if let Head::Gaussian { logstd, dim, .. } = &head {
            params[*logstd..*logstd + *dim].fill(init_logstd as f32);
        }
        Agent {
            obs_dim,
            nets,
            head,
            params,
        }
    }

    /// The networks and the log-std for a [`NetBackend`].
    pub fn layout(&self) -> NetLayout {
        let free = match &self.head {
            Head::Gaussian { logstd, dim, .. } => *logstd..*logstd + *dim,
            Head::Categorical { .. } => self.params.len()..self.params.len(),
        };
        let nets = match &self.nets {
            AgentNets::Separate { critic, actor } => vec![critic.clone(), actor.clone()],
            AgentNets::Shared(net) => vec![net.clone()],
        };
        NetLayout {
            nets,
            free,
            total: self.params.len(),
        }
    }

    /// The networks by their names in an export: `actor` and `critic`, or `net`.
    pub fn named_nets(&self) -> Vec<(&'static str, &Net)> {
        match &self.nets {
            AgentNets::Separate { critic, actor } => vec![("actor", actor), ("critic", critic)],
            AgentNets::Shared(net) => vec![("net", net)],
        }
    }

    pub fn action_dim(&self) -> usize {
        match &self.head {
            Head::Categorical { .. } => 1,
            Head::Gaussian { dim, .. } => *dim,
        }
    }

    /// Outputs of the policy head per observation (logits or Gaussian means).
    pub fn policy_dim(&self) -> usize {
        match &self.head {
            Head::Categorical { n } => *n,
            Head::Gaussian { dim, .. } => *dim,
        }
    }

    /// The network that computes `part` (its index in [`Agent::layout`]) and where
    /// `part` sits in that network's output rows: (width, first column, columns).
    fn locate(&self, part: Part) -> (usize, &Net, (usize, usize, usize)) {
        let p = self.policy_dim();
        match (&self.nets, part) {
            (AgentNets::Separate { critic, .. }, Part::Value) => (CRITIC, critic, (1, 0, 1)),
            (AgentNets::Separate { actor, .. }, Part::Policy) => (ACTOR, actor, (p, 0, p)),
            (AgentNets::Shared(net), Part::Value) => (SHARED, net, (1 + p, 0, 1)),
            (AgentNets::Shared(net), Part::Policy) => (SHARED, net, (1 + p, 1, p)),
        }
    }

    /// `part` of `n` observations on the host (`params` in this agent's layout), into
    /// `out` (`n x policy_dim` for the policy, `n` values).
    pub fn head_on_host(
        &self,
        part: Part,
        params: &[f32],
        obs: &[f32],
        n: usize,
        cache: &mut NetCache,
        out: &mut Vec<f32>,
    ) {
        let (_, net, (width, from, cols)) = self.locate(part);
        columns(
            net.forward(params, obs, n, cache),
            n,
            width,
            from,
            cols,
            out,
        );
    }

    /// `part` of `n` observations on `backend`, into `out`.
    pub fn head_on(
        &self,
        part: Part,
        backend: &mut dyn NetBackend,
        obs: &[f32],
        n: usize,
        out: &mut Vec<f32>,
    ) {
        let (id, _, (width, from, cols)) = self.locate(part);
        columns(backend.forward(id, obs, n), n, width, from, cols, out);
    }

    /// Policy outputs (into `policy`, `n x policy_dim`) and values (into `values`) of
    /// `n` observations on `backend`; with `train`, the backend keeps the activations
    /// for [`Agent::backward`].
    pub fn forward(
        &self,
        backend: &mut dyn NetBackend,
        obs: &[f32],
        n: usize,
        train: bool,
        policy: &mut [f32],
        values: &mut [f32],
    ) {
        match &self.nets {
            AgentNets::Separate { .. } if train => {
                backend.forward_train_into(&[ACTOR, CRITIC], obs, n, &mut [policy, values]);
            }
            AgentNets::Separate { .. } => {
                values.copy_from_slice(backend.forward(CRITIC, obs, n));
                policy.copy_from_slice(backend.forward(ACTOR, obs, n));
            }
            AgentNets::Shared(_) => {
                let y = if train {
                    backend.forward_train(SHARED, obs, n)
                } else {
                    backend.forward(SHARED, obs, n)
                };
                let p = self.policy_dim();
                for (r, row) in y.chunks_exact(1 + p).enumerate() {
                    values[r] = row[0];
                    policy[r * p..(r + 1) * p].copy_from_slice(&row[1..]);
                }
            }
        }
    }

    /// The backward pass of the last training [`Agent::forward`] given d loss / d policy
    /// outputs and d loss / d values (`scratch` joins them for a shared trunk).
    pub fn backward(
        &self,
        backend: &mut dyn NetBackend,
        d_policy: &[f32],
        d_values: &[f32],
        scratch: &mut Vec<f32>,
    ) {
        match &self.nets {
            AgentNets::Separate { .. } => {
                backend.backward_many(&[(ACTOR, d_policy), (CRITIC, d_values)]);
            }
            AgentNets::Shared(_) => {
                let p = self.policy_dim();
                scratch.clear();
                for (r, dv) in d_values.iter().enumerate() {
                    scratch.push(*dv);
                    scratch.extend_from_slice(&d_policy[r * p..(r + 1) * p]);
                }
                backend.backward(SHARED, scratch);
            }
        }
    }
}

/// Metrics of one iteration (one rollout and its update).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IterationStats {
    pub iteration: u64,
    pub global_step: u64,
    pub episodes: u64,
    /// Mean undiscounted return of the episodes that ended in this rollout (NaN if none).
    pub episode_return: f64,
    pub episode_length: f64,
    pub learning_rate: f64,
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clipfrac: f64,
    pub explained_variance: f64,
}

/// Wall time per stage, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    pub env: f64,
    pub inference: f64,
    pub learner: f64,
}

impl StageTimes {
    /// The time spent per stage since the cumulative reading `before`.
    pub fn since(&self, before: &StageTimes) -> StageTimes {
        StageTimes {
            env: self.env - before.env,
            inference: self.inference - before.inference,
            learner: self.learner - before.learner,
        }
    }

    pub fn total(&self) -> f64 {
        self.env + self.inference + self.learner
    }
}

/// Everything besides the weights and Adam moments that a checkpoint must hold.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PpoState {
    pub iteration: u64,
    pub global_step: u64,
    pub adam: Adam,
    pub obs_rms: Option<RunningMeanStd>,
    pub ret_rms: Option<RunningMeanStd>,
    /// Per-env discounted return for reward normalisation.
    pub discounted: Vec<f64>,
    /// Per-env running episode return and length (for statistics).
    pub ep_return: Vec<f64>,
    pub ep_length: Vec<u64>,
    /// Whether each env's current observation starts a new episode.
    pub next_done: Vec<bool>,
    pub envs: rlrig_env::VecSnapshot,
    /// With `policy_lag`: the parameters of the last `policy_lag` updates before the
    /// current ones, oldest first (the next rollout's policy is the first).
    #[serde(default)]
    pub behaviour: Vec<Vec<f32>>,
}

/// The acting side of a run: the envs, observation and return normalisation, and
/// per-env episode bookkeeping. It moves to the actor thread for a prefetched rollout.
struct ActorSide {
    env: Box<dyn VecEnvDyn>,
    obs_rms: Option<RunningMeanStd>,
    ret_rms: Option<RunningMeanStd>,
    discounted: Vec<f64>,
    ep_return: Vec<f64>,
    ep_length: Vec<u64>,
    next_done: Vec<bool>,
}

impl ActorSide {
    /// Writes the current observations, normalised as the policy sees them, into `out`.
    fn current_obs(&self, cfg: &PpoConfig, out: &mut [f32]) {
        out.copy_from_slice(self.env.obs());
        if let Some(rms) = &self.obs_rms {
            rms.normalize(out, cfg.clip_obs);
        }
    }
}

/// One rollout's storage, `[num_steps x num_envs (x dim)]`, allocated once.
#[derive(Default)]
struct RolloutBuf {
    obs: Vec<f32>,
    actions: Vec<f32>,
    logprobs: Vec<f32>,
    rewards: Vec<f32>,
    dones: Vec<f32>,
    values: Vec<f32>,
}

impl RolloutBuf {
    fn new(t: usize, e: usize, d: usize, a: usize) -> RolloutBuf {
        RolloutBuf {
            obs: vec![0.0; t * e * d],
            actions: vec![0.0; t * e * a],
            logprobs: vec![0.0; t * e],
            rewards: vec![0.0; t * e],
            dones: vec![0.0; t * e],
            values: vec![0.0; t * e],
        }
    }
}

/// Where a rollout's policy runs: the learner's backend (on-policy), or a host copy of
/// earlier parameters (IMPALA's lagged actor), which another thread can own.
enum Policy<'a> {
    Backend(&'a mut dyn NetBackend),
    Host {
        params: &'a [f32],
        cache: &'a mut NetCache,
    },
    /// The policy's outputs from a batching inference server; `params` (a host copy of
    /// the same parameters) serves the Gaussian log-std and truncation bootstraps.
    Server {
        client: &'a mut crate::serve::Client,
        params: &'a [f32],
        cache: &'a mut NetCache,
        logits: &'a mut Vec<f32>,
        values: &'a mut Vec<f32>,
    },
}

/// What a rollout adds to the run: steps, finished episodes, stage times and spans.
#[derive(Clone, Debug, Default)]
struct RolloutStats {
    steps: u64,
    episodes: u64,
    ret_sum: f64,
    len_sum: f64,
    env: f64,
    inference: f64,
    spans: Vec<Span>,
}

impl RolloutStats {
    fn span(
        &mut self,
        origin: Option<std::time::Instant>,
        name: &'static str,
        from: std::time::Instant,
        to: std::time::Instant,
    ) {
        if let Some(origin) = origin {
            self.spans.push(Span {
                name,
                start: from.duration_since(origin).as_secs_f64(),
                dur: to.duration_since(from).as_secs_f64(),
                tid: crate::trace::MAIN_TRACK,
            });
        }
    }
}

/// A rollout from an asynchronous actor, with what the learner needs to bootstrap it.
struct AsyncRollout {
    buf: RolloutBuf,
    stats: RolloutStats,
    /// The observations after the rollout (normalised as the policy sees them).
    next_obs: Vec<f32>,
    next_done: Vec<bool>,
    /// The version of the parameters that collected it.
    version: u64,
}

/// The newest parameters the learner has published, with their version (updates so far).
type Published = std::sync::Arc<std::sync::Mutex<(u64, std::sync::Arc<Vec<f32>>)>>;

/// IMPALA's asynchronous actors while they run (`actors > 0`).
struct AsyncActors {
    latest: Published,
    server: Option<crate::serve::InferenceServer>,
    rx: std::sync::mpsc::Receiver<AsyncRollout>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handles: Vec<std::thread::JoinHandle<(ActorSide, u64)>>,
    version: u64,
}

/// The inference server's network: the policy with the newest published parameters.
struct PublishedPolicy {
    agent: Agent,
    latest: Published,
    cache: NetCache,
    out: Vec<f32>,
}

impl crate::mcts::Evaluator for PublishedPolicy {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        let params = self
            .latest
            .lock()
            .expect("the learner does not panic holding it")
            .1
            .clone();
        self.agent.head_on_host(
            Part::Policy,
            &params,
            obs,
            n,
            &mut self.cache,
            &mut self.out,
        );
        logits[..self.out.len()].copy_from_slice(&self.out);
        // V-trace recomputes values in the learner.
        values.fill(0.0);
    }
}

/// One asynchronous actor: collects rollouts with the newest published parameters until
/// told to stop (or the learner hangs up); returns its envs and the rollouts collected.
/// Rollout `r` of actor `j` draws its actions from the streams of iteration
/// `base + r * actors + j + 1`, distinct across actors and restarts.
#[allow(clippy::too_many_arguments)]
fn run_actor(
    cfg: PpoConfig,
    agent: Agent,
    mut act: ActorSide,
    j: usize,
    base: u64,
    latest: Published,
    tx: std::sync::mpsc::SyncSender<AsyncRollout>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    origin: Option<std::time::Instant>,
    mut client: Option<crate::serve::Client>,
) -> (ActorSide, u64) {
    let (t, e, d, a) = (
        cfg.num_steps,
        cfg.num_envs,
        agent.obs_dim,
        agent.action_dim(),
    );
    let mut cache = NetCache::default();
    let (mut logits, mut values) = (Vec::new(), Vec::new());
    let mut rounds = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let (version, params) = {
            let g = latest
                .lock()
                .expect("the learner does not panic holding it");
            (g.0, g.1.clone())
        };
        let mut buf = RolloutBuf::new(t, e, d, a);
        let it = base + rounds * cfg.actors as u64 + j as u64 + 1;
        let policy = match &mut client {
            // The server answers with whatever parameters are newest when it runs.
            Some(client) => Policy::Server {
                client,
                params: &params,
                cache: &mut cache,
                logits: &mut logits,
                values: &mut values,
            },
            None => Policy::Host {
                params: &params,
                cache: &mut cache,
            },
        };
        let stats = collect(
            &cfg, &agent, &mut act, &mut buf, policy, &params, it, origin,
        );
        rounds += 1;
        let mut next_obs = vec![0.0; e * d];
        act.current_obs(&cfg, &mut next_obs);
        let r = AsyncRollout {
            buf,
            stats,
            next_obs,
            next_done: act.next_done.clone(),
            version,
        };
        if tx.send(r).is_err() {
            break;
        }
    }
    (act, rounds)
}

/// Collects rollout `it` (1-based) into `buf`: `num_steps` steps of every env, actions
/// sampled from `policy` (whose Gaussian log-std is read from `policy_params`).
#[allow(clippy::too_many_arguments)]
fn collect(
    cfg: &PpoConfig,
    agent: &Agent,
    act: &mut ActorSide,
    buf: &mut RolloutBuf,
    mut policy: Policy<'_>,
    policy_params: &[f32],
    it: u64,
    origin: Option<std::time::Instant>,
) -> RolloutStats {
    let (t_max, e, d) = (cfg.num_steps, cfg.num_envs, agent.obs_dim);
    let adim = agent.action_dim();
    let mut rngs: Vec<Rng> = (0..e as u64)
        .map(|k| Rng::stream(cfg.seed, Purpose::Policy, (it - 1) * e as u64 + k))
        .collect();
    let mut out_stats = RolloutStats::default();
    let mut act_f32 = vec![0.0f32; e * adim];
    let mut act_i32 = vec![0i32; e];
    let mut logp_row = vec![0.0f32; agent.policy_dim()];
    let mut pol = vec![0.0f32; e * agent.policy_dim()];
    let mut final_values = Vec::new();
    let mut final_obs = Vec::new();
    let mut trunc_envs = Vec::new();

    for t in 0..t_max {
        let t0 = std::time::Instant::now();
        if let Some(rms) = &mut act.obs_rms {
            rms.update(act.env.obs(), e);
        }
        act.current_obs(cfg, &mut buf.obs[t * e * d..(t + 1) * e * d]);
        let obs_t = &buf.obs[t * e * d..(t + 1) * e * d];
        for k in 0..e {
            buf.dones[t * e + k] = f32::from(u8::from(act.next_done[k]));
        }
        let out: &[f32] = match &mut policy {
            Policy::Backend(backend) => {
                let values = &mut buf.values[t * e..(t + 1) * e];
                agent.forward(&mut **backend, obs_t, e, false, &mut pol, values);
                &pol
            }
            // V-trace recomputes the values with the learner's parameters: the
            // actor only needs its policy.
            Policy::Host { params, cache } => {
                agent.head_on_host(Part::Policy, params, obs_t, e, cache, &mut pol);
                &pol
            }
            Policy::Server {
                client,
                logits,
                values,
                ..
            } => {
                use crate::mcts::Evaluator;
                logits.resize(e * agent.policy_dim(), 0.0);
                values.resize(e, 0.0);
                client.evaluate(obs_t, e, logits, values);
                &logits[..]
            }
        };
        match &agent.head {
            Head::Categorical { n } => {
                for k in 0..e {
                    log_softmax(&out[k * n..(k + 1) * n], &mut logp_row);
                    // Inverse-CDF sampling from this env's stream.
                    let u = rngs[k].unit_f64();
                    let mut acc = 0.0f64;
                    let mut a = n - 1;
                    for (j, lp) in logp_row.iter().enumerate() {
                        acc += f64::from(lp.exp());
                        if u < acc {
                            a = j;
                            break;
                        }
                    }
                    act_i32[k] = a as i32;
                    buf.actions[t * e + k] = a as f32;
                    buf.logprobs[t * e + k] = logp_row[a];
                }
            }
            Head::Gaussian {
                dim,
                low,
                high,
                logstd,
            } => {
                let ls = &policy_params[*logstd..*logstd + *dim];
                for k in 0..e {
                    let mut lp = 0.0f32;
                    for j in 0..*dim {
                        let mu = out[k * dim + j];
                        let z = normal(&mut rngs[k]) as f32;
                        let a = mu + ls[j].exp() * z;
                        lp += -0.5 * z * z - ls[j] - LOG_SQRT_2PI;
                        buf.actions[(t * e + k) * dim + j] = a;
                        act_f32[k * dim + j] = a.clamp(low[j], high[j]);
                    }
                    buf.logprobs[t * e + k] = lp;
                }
            }
        }
        let t1 = std::time::Instant::now();
        out_stats.inference += (t1 - t0).as_secs_f64();
        out_stats.span(origin, "inference", t0, t1);
        let actions = match agent.head {
            Head::Categorical { .. } => ActionBuf::Discrete(&act_i32),
            Head::Gaussian { .. } => ActionBuf::Continuous(&act_f32),
        };
        act.env
            .step(actions)
            .expect("the policy only emits valid actions");
        let t2 = std::time::Instant::now();
        out_stats.env += (t2 - t1).as_secs_f64();
        out_stats.span(origin, "env.step", t1, t2);
        out_stats.steps += e as u64;

        // Rewards: statistics on raw rewards, learning on normalised ones.
        trunc_envs.clear();
        for k in 0..e {
            let r = act.env.rewards()[k];
            let (term, trunc) = (act.env.terminated()[k], act.env.truncated()[k]);
            act.ep_return[k] += r;
            act.ep_length[k] += 1;
            let r = if cfg.reward_sign {
                // Not f64::signum, which is 1 for a zero reward.
                if r > 0.0 {
                    1.0
                } else if r < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            } else {
                r
            };
            let mut rr = r;
            if let Some(rms) = &mut act.ret_rms {
                act.discounted[k] = act.discounted[k] * cfg.gamma + r;
                rms.update(&[act.discounted[k] as f32], 1);
                rr = (r / (rms.var[0] + 1e-8).sqrt()).clamp(-cfg.clip_reward, cfg.clip_reward);
                if term || trunc {
                    act.discounted[k] = 0.0;
                }
            }
            buf.rewards[t * e + k] = rr as f32;
            if term || trunc {
                out_stats.episodes += 1;
                out_stats.ret_sum += act.ep_return[k];
                out_stats.len_sum += act.ep_length[k] as f64;
                act.ep_return[k] = 0.0;
                act.ep_length[k] = 0;
            }
            if trunc && !term && cfg.bootstrap_truncated {
                trunc_envs.push(k);
            }
            act.next_done[k] = term || trunc;
        }
        if !trunc_envs.is_empty() {
            // The episode was cut by the time limit, not ended by the MDP:
            // bootstrap from the value of the observation it was cut at.
            let fo = act
                .env
                .final_obs()
                .expect("SameStep mode keeps final observations");
            final_obs.clear();
            for &k in &trunc_envs {
                final_obs.extend_from_slice(&fo[k * d..(k + 1) * d]);
            }
            if let Some(rms) = &act.obs_rms {
                rms.normalize(&mut final_obs, cfg.clip_obs);
            }
            let n = trunc_envs.len();
            match &mut policy {
                Policy::Backend(backend) => agent.head_on(
                    Part::Value,
                    &mut **backend,
                    &final_obs,
                    n,
                    &mut final_values,
                ),
                Policy::Host { params, cache } | Policy::Server { params, cache, .. } => {
                    agent.head_on_host(Part::Value, params, &final_obs, n, cache, &mut final_values)
                }
            };
            for (j, &k) in trunc_envs.iter().enumerate() {
                buf.rewards[t * e + k] += (cfg.gamma as f32) * final_values[j];
            }
        }
        let t3 = std::time::Instant::now();
        out_stats.inference += (t3 - t2).as_secs_f64();
        out_stats.span(origin, "inference", t2, t3);
    }
    out_stats
}

/// A PPO run in progress.
pub struct Ppo {
    pub cfg: PpoConfig,
    pub agent: Agent,
    /// The envs and their bookkeeping; away on the actor thread while a prefetched
    /// rollout is collected (only inside `iterate_prefetching`).
    actor: Option<ActorSide>,
    /// Where the critic (net 0) and actor (net 1) run; `agent.params` mirrors its
    /// parameters after every update.
    backend: Box<dyn NetBackend>,
    pub iteration: u64,
    pub global_step: u64,
    pub times: StageTimes,
    trace: Option<SpanLog>,
    /// With `policy_lag`: earlier parameters, oldest first (see [`PpoState::behaviour`]).
    behaviour: std::collections::VecDeque<Vec<f32>>,
    behaviour_cache: NetCache,
    /// The rollout being learned from, and a second buffer for prefetching.
    buf: RolloutBuf,
    spare: RolloutBuf,
    /// A rollout collected ahead (see [`Ppo::iterate_prefetching`]).
    prefetched: Option<(RolloutBuf, RolloutStats)>,
    advantages: Vec<f32>,
    returns: Vec<f32>,
    /// Whether each env's observation after the rollout being learned starts a new
    /// episode (the home envs', or the asynchronous actor's that collected it).
    learn_next_done: Vec<bool>,
    /// Asynchronous mode: the running actors, the envs of actors 1.. while stopped
    /// (actor 0 uses the home envs), and the action streams used so far.
    pool: Option<AsyncActors>,
    parked: Vec<ActorSide>,
    async_base: u64,
    /// Asynchronous mode: the summed staleness (updates between the policy that collected
    /// a rollout and the learner that used it) and the rollouts learned.
    pub async_lag: (u64, u64),
    /// With `inference_server`: what the server did (network calls, rows, requests).
    pub server_stats: crate::serve::ServerStats,
}

impl Drop for Ppo {
    fn drop(&mut self) {
        self.stop_actors();
    }
}

/// `log_softmax` of one row, into `out`.
fn log_softmax(logits: &[f32], out: &mut [f32]) {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    let lse = max + logits.iter().map(|&x| (x - max).exp()).sum::<f32>().ln();
    for (o, &x) in out.iter_mut().zip(logits) {
        *o = x - lse;
    }
}

const LOG_SQRT_2PI: f32 = 0.918_938_5;

pub use crate::trace::Span;
use crate::trace::SpanLog;

impl Ppo {
    pub fn new(cfg: PpoConfig, threads: usize) -> Result<Ppo, String> {
        cfg.validate()?;
        let env = make_sync(
            &cfg.env,
            crate::env_config(cfg.num_envs, &cfg.env_args)
                .threads(threads)
                .seed(cfg.seed)
                .autoreset(AutoReset::SameStep),
        )
        .map_err(|e| e.to_string())?;
        Self::with_env(cfg, env, threads)
    }

    /// The envs of asynchronous actor `j >= 1`: `cfg.env` on its own seed, one thread
    /// (each actor is a thread).
    fn actor_side(cfg: &PpoConfig, j: usize, obs_dim: usize) -> Result<ActorSide, String> {
        let seed = cfg
            .seed
            .wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(j as u64));
        let env = make_sync(
            &cfg.env,
            crate::env_config(cfg.num_envs, &cfg.env_args)
                .threads(1)
                .seed(seed)
                .autoreset(AutoReset::SameStep),
        )
        .map_err(|e| e.to_string())?;
        let e = cfg.num_envs;
        Ok(ActorSide {
            env,
            obs_rms: cfg.norm_obs.then(|| RunningMeanStd::new(obs_dim)),
            ret_rms: cfg.norm_reward.then(|| RunningMeanStd::new(1)),
            discounted: vec![0.0; e],
            ep_return: vec![0.0; e],
            ep_length: vec![0; e],
            next_done: vec![false; e],
        })
    }

    /// PPO on an executor built by the caller (any env type, e.g. a test env); it must
    /// have `cfg.num_envs` envs and SameStep auto-reset.
    /// PPO on `env`, its updates split over `threads` threads (the results do not depend
    /// on it).
    pub fn with_env(
        cfg: PpoConfig,
        env: Box<dyn VecEnvDyn>,
        threads: usize,
    ) -> Result<Ppo, String> {
        if env.num_envs() != cfg.num_envs {
            return Err(format!(
                "executor has {} envs, config says {}",
                env.num_envs(),
                cfg.num_envs
            ));
        }
        if env.final_obs().is_none() {
            return Err("executor must use AutoReset::SameStep (PPO bootstraps truncated episodes from final_obs)".into());
        }
        let spec = env.spec();
        let mut rng = Rng::stream(cfg.seed, Purpose::Init, 0);
        let agent = Agent::for_config(&spec, &cfg, &mut rng);
        let n = agent.params.len();
        let (t, e, d, a) = (
            cfg.num_steps,
            cfg.num_envs,
            spec.obs_dim,
            agent.action_dim(),
        );
        let parked = (1..cfg.actors)
            .map(|j| Self::actor_side(&cfg, j, d))
            .collect::<Result<Vec<_>, _>>()?;
        let opt = if cfg.optimizer == "rmsprop" {
            Adam::rmsprop(n, cfg.rmsprop_alpha, cfg.adam_eps)
        } else {
            Adam::new(n, cfg.adam_eps)
        };
        Ok(Ppo {
            backend: Box::new(Native::new(&agent.layout(), &agent.params, opt).threads(threads)?),
            actor: Some(ActorSide {
                env,
                obs_rms: cfg.norm_obs.then(|| RunningMeanStd::new(d)),
                ret_rms: cfg.norm_reward.then(|| RunningMeanStd::new(1)),
                discounted: vec![0.0; e],
                ep_return: vec![0.0; e],
                ep_length: vec![0; e],
                next_done: vec![false; e],
            }),
            iteration: 0,
            global_step: 0,
            times: StageTimes::default(),
            trace: None,
            behaviour: std::collections::VecDeque::new(),
            behaviour_cache: NetCache::default(),
            buf: RolloutBuf::new(t, e, d, a),
            spare: RolloutBuf::new(t, e, d, a),
            prefetched: None,
            advantages: vec![0.0; t * e],
            returns: vec![0.0; t * e],
            learn_next_done: vec![false; e],
            pool: None,
            parked,
            async_base: 0,
            async_lag: (0, 0),
            server_stats: crate::serve::ServerStats::default(),
            agent,
            cfg,
        })
    }

    /// The envs and their bookkeeping (home except inside `iterate_prefetching`).
    fn act(&self) -> &ActorSide {
        self.actor
            .as_ref()
            .expect("the actor side is home between calls")
    }

    fn act_mut(&mut self) -> &mut ActorSide {
        self.actor
            .as_mut()
            .expect("the actor side is home between calls")
    }

    /// Starts recording a span per stage and step, keeping the first and the last
    /// `keep` iterations (see [`SpanLog`]).
    pub fn enable_trace(&mut self, keep: u64) {
        self.trace = Some(SpanLog::new(keep));
    }

    /// The spans recorded so far.
    pub fn trace(&self) -> Option<&SpanLog> {
        self.trace.as_ref()
    }

    fn span(&mut self, name: &'static str, from: std::time::Instant, to: std::time::Instant) {
        if let Some(log) = &mut self.trace {
            log.span(name, from, to);
        }
    }

    pub fn done(&self) -> bool {
        self.iteration >= self.cfg.num_iterations()
    }

    /// Whether no rollout is in flight (none prefetched, no asynchronous actors
    /// running): only then can [`Ppo::state`] be taken. An iteration run without
    /// prefetching always ends quiescent.
    pub fn quiescent(&self) -> bool {
        self.prefetched.is_none() && self.pool.is_none()
    }

    /// The state a checkpoint needs besides `agent.params` and the Adam moments.
    pub fn state(&self) -> PpoState {
        // A prefetched rollout has moved the envs past `iteration`: a checkpoint then
        // would resume wrong, so callers stop prefetching before they save.
        assert!(
            self.quiescent(),
            "Ppo::state with a prefetched rollout pending or actors running"
        );
        PpoState {
            iteration: self.iteration,
            global_step: self.global_step,
            adam: self.backend.optimizer(),
            obs_rms: self.act().obs_rms.clone(),
            ret_rms: self.act().ret_rms.clone(),
            discounted: self.act().discounted.clone(),
            ep_return: self.act().ep_return.clone(),
            ep_length: self.act().ep_length.clone(),
            next_done: self.act().next_done.clone(),
            envs: self.act().env.snapshot(),
            behaviour: self.behaviour.iter().cloned().collect(),
        }
    }

    /// The optimiser's first and second moments, in the parameters' flat order.
    pub fn adam_moments(&self) -> (Vec<f32>, Vec<f32>) {
        let o = self.backend.optimizer();
        (o.m, o.v)
    }

    /// Moves the networks to the backend `maker` builds (a `--device`), with the current
    /// parameters and optimiser state.
    pub fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), String> {
        let b = maker(
            &self.agent.layout(),
            &self.backend.params(),
            self.backend.optimizer(),
        )?;
        self.backend = b;
        Ok(())
    }

    /// What runs the networks (`cpu`, `burn-cpu`, `wgpu: ...`).
    pub fn device(&self) -> String {
        self.backend.device()
    }

    /// Continues from a checkpoint. On error nothing changed.
    pub fn restore(
        &mut self,
        st: PpoState,
        params: Vec<f32>,
        m: Vec<f32>,
        v: Vec<f32>,
    ) -> Result<(), String> {
        let n = self.agent.params.len();
        if params.len() != n || m.len() != n || v.len() != n {
            return Err(format!(
                "checkpoint holds {} parameters, this network has {n} (different env or hidden sizes?)",
                params.len()
            ));
        }
        let e = self.cfg.num_envs;
        if [
            st.discounted.len(),
            st.ep_return.len(),
            st.ep_length.len(),
            st.next_done.len(),
        ] != [e; 4]
        {
            return Err(format!(
                "checkpoint is for a different number of envs than {e}"
            ));
        }
        if st.behaviour.len() > self.cfg.policy_lag || st.behaviour.iter().any(|b| b.len() != n) {
            return Err(format!(
                "checkpoint's behaviour parameters ({} sets) do not fit policy_lag = {} and {n} parameters",
                st.behaviour.len(),
                self.cfg.policy_lag
            ));
        }
        self.act_mut()
            .env
            .restore(&st.envs)
            .map_err(|e| e.to_string())?;
        self.prefetched = None;
        self.behaviour = st.behaviour.into_iter().collect();
        self.backend.set_params(&params);
        self.backend.set_optimizer(Adam { m, v, ..st.adam });
        self.agent.params = params;
        let act = self.act_mut();
        act.obs_rms = st.obs_rms;
        act.ret_rms = st.ret_rms;
        act.discounted = st.discounted;
        act.ep_return = st.ep_return;
        act.ep_length = st.ep_length;
        act.next_done = st.next_done;
        self.iteration = st.iteration;
        self.global_step = st.global_step;
        Ok(())
    }

    /// Writes the current observations, normalised as the policy sees them, into `out`.
    fn current_obs(&self, out: &mut [f32]) {
        self.act().current_obs(&self.cfg, out);
    }

    /// Runs one rollout and one update; returns the iteration's metrics.
    pub fn iterate(&mut self) -> IterationStats {
        self.iterate_prefetching(false)
    }

    /// [`Ppo::iterate`]; with `prefetch` (IMPALA with `policy_lag >= 1` only), the next
    /// rollout is collected on another thread while this update runs, as its policy,
    /// `policy_lag` updates old, is already known. Results are the same either way. A
    /// prefetched rollout is pending until the next call: the last call before
    /// [`Ppo::state`] (a checkpoint) must not prefetch.
    ///
    /// With `actors > 0` (asynchronous IMPALA) `prefetch` means "keep the actors
    /// running after this update"; without it they are stopped and their envs come home,
    /// as [`Ppo::state`] needs.
    pub fn iterate_prefetching(&mut self, prefetch: bool) -> IterationStats {
        let stats = if self.cfg.actors > 0 {
            self.iterate_async(prefetch)
        } else {
            self.iterate_sync(prefetch)
        };
        if let Some(log) = &mut self.trace {
            log.end_iteration();
        }
        stats
    }

    fn iterate_sync(&mut self, prefetch: bool) -> IterationStats {
        let cfg = self.cfg.clone();
        let (e, d) = (cfg.num_envs, self.agent.obs_dim);
        let (it, lr, mut stats) = self.begin_iteration();
        let rollout = match self.prefetched.take() {
            Some((buf, r)) => {
                self.spare = std::mem::replace(&mut self.buf, buf);
                r
            }
            None => {
                let origin = self.trace.as_ref().map(SpanLog::origin);
                let act = self
                    .actor
                    .as_mut()
                    .expect("the actor side is home between calls");
                let (policy, params) = if cfg.policy_lag > 0 {
                    // A lagged policy runs natively from a host copy, as IMPALA's actors.
                    let params = self.behaviour.front().unwrap_or(&self.agent.params);
                    let cache = &mut self.behaviour_cache;
                    (Policy::Host { params, cache }, params)
                } else {
                    (Policy::Backend(self.backend.as_mut()), &self.agent.params)
                };
                collect(
                    &cfg,
                    &self.agent,
                    act,
                    &mut self.buf,
                    policy,
                    params,
                    it,
                    origin,
                )
            }
        };
        self.absorb(&rollout);
        stats.episodes = rollout.episodes;

        let t_learn = std::time::Instant::now();
        // Targets over the rollout, bootstrapped from the value of the next observation.
        let mut next_obs = vec![0.0f32; e * d];
        self.current_obs(&mut next_obs);
        let mut next_value = Vec::new();
        self.agent.head_on(
            Part::Value,
            &mut *self.backend,
            &next_obs,
            e,
            &mut next_value,
        );
        let home = self
            .actor
            .as_ref()
            .expect("the actor side is home between calls");
        self.learn_next_done.clone_from(&home.next_done);
        if cfg.vtrace {
            self.vtrace_targets(&next_value);
        } else {
            self.gae(&next_value);
        }
        if cfg.policy_lag > 0 {
            // The parameters this update starts from join the queue of stale policies;
            // the next rollout's policy is the queue's front.
            if self.behaviour.len() == cfg.policy_lag {
                self.behaviour.pop_front();
            }
            self.behaviour.push_back(self.agent.params.clone());
        }
        if prefetch && cfg.policy_lag > 0 && it < cfg.num_iterations() {
            let mut act = self
                .actor
                .take()
                .expect("the actor side is home between calls");
            let mut spare = std::mem::take(&mut self.spare);
            let mut cache = std::mem::take(&mut self.behaviour_cache);
            let params = self.behaviour.front().expect("just pushed").clone();
            let agent = self.agent.shapes();
            let origin = self.trace.as_ref().map(SpanLog::origin);
            let worker = std::thread::spawn(move || {
                let policy = Policy::Host {
                    params: &params,
                    cache: &mut cache,
                };
                let r = collect(
                    &cfg,
                    &agent,
                    &mut act,
                    &mut spare,
                    policy,
                    &params,
                    it + 1,
                    origin,
                );
                (act, spare, cache, r)
            });
            self.update(lr, it, &mut stats);
            let (act, spare, cache, r) = worker.join().expect("the actor thread does not panic");
            self.actor = Some(act);
            self.behaviour_cache = cache;
            self.prefetched = Some((spare, r));
        } else {
            self.update(lr, it, &mut stats);
        }
        let t_end = std::time::Instant::now();
        self.times.learner += (t_end - t_learn).as_secs_f64();
        self.span("learner", t_learn, t_end);
        self.finish_stats(stats, rollout.ret_sum, rollout.len_sum)
    }

    /// Starts the asynchronous actors: actor 0 on the home envs, the others on theirs.
    fn start_actors(&mut self) {
        let cfg = self.cfg.clone();
        let version = self.iteration;
        let latest: Published = std::sync::Arc::new(std::sync::Mutex::new((
            version,
            std::sync::Arc::new(self.agent.params.clone()),
        )));
        // A rendezvous queue: a finished rollout waits in its actor until the learner takes
        // it, so rollouts are about `actors` updates stale; a buffer would only add to that.
        let (tx, rx) = std::sync::mpsc::sync_channel(0);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let origin = self.trace.as_ref().map(SpanLog::origin);
        let server = cfg.inference_server.then(|| {
            let policy = PublishedPolicy {
                agent: self.agent.shapes(),
                latest: latest.clone(),
                cache: NetCache::default(),
                out: Vec::new(),
            };
            let out = self.agent.policy_dim();
            crate::serve::InferenceServer::start(
                policy,
                self.agent.obs_dim,
                out,
                cfg.actors * cfg.num_envs,
            )
        });
        let home = self
            .actor
            .take()
            .expect("the actor side is home between calls");
        let sides = std::iter::once(home).chain(self.parked.drain(..));
        let handles = sides
            .enumerate()
            .map(|(j, act)| {
                let (cfg, latest, tx, stop) =
                    (cfg.clone(), latest.clone(), tx.clone(), stop.clone());
                let agent = self.agent.shapes();
                let base = self.async_base;
                let client = server.as_ref().map(|s| s.client());
                std::thread::spawn(move || {
                    run_actor(cfg, agent, act, j, base, latest, tx, stop, origin, client)
                })
            })
            .collect();
        self.pool = Some(AsyncActors {
            latest,
            server,
            rx,
            stop,
            handles,
            version,
        });
    }

    /// Stops the asynchronous actors and brings their envs home. Rollouts in flight are
    /// dropped (their steps are not counted).
    fn stop_actors(&mut self) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        pool.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Hanging up wakes actors blocked on a full queue.
        drop(pool.rx);
        let mut most = 0;
        for (j, h) in pool.handles.into_iter().enumerate() {
            match h.join() {
                Ok((act, rounds)) => {
                    most = most.max(rounds);
                    if j == 0 {
                        self.actor = Some(act);
                    } else {
                        self.parked.push(act);
                    }
                }
                // Re-raise an actor's panic (a bug) unless already unwinding.
                Err(p) if !std::thread::panicking() => std::panic::resume_unwind(p),
                Err(_) => {}
            }
        }
        self.async_base += (most + 1) * self.cfg.actors as u64;
        // Every client went with its actor: the server can stop.
        if let Some(server) = pool.server {
            let s = server.shutdown();
            self.server_stats.calls += s.calls;
            self.server_stats.rows += s.rows;
            self.server_stats.requests += s.requests;
        }
    }

    /// Counts a new iteration; returns it with its (annealed) learning rate and its
    /// stats so far.
    fn begin_iteration(&mut self) -> (u64, f64, IterationStats) {
        self.iteration += 1;
        let it = self.iteration;
        let cfg = &self.cfg;
        let lr = if cfg.anneal_lr {
            cfg.learning_rate * (1.0 - (it - 1) as f64 / cfg.num_iterations() as f64)
        } else {
            cfg.learning_rate
        };
        let stats = IterationStats {
            iteration: it,
            learning_rate: lr,
            ..Default::default()
        };
        (it, lr, stats)
    }

    /// One update of asynchronous IMPALA: the next rollout any actor finished, V-trace
    /// targets and the update with the current parameters, which are then published.
    fn iterate_async(&mut self, keep_running: bool) -> IterationStats {
        let cfg = self.cfg.clone();
        let e = cfg.num_envs;
        let (it, lr, mut stats) = self.begin_iteration();
        if self.pool.is_none() {
            self.start_actors();
        }
        let pool = self.pool.as_ref().expect("just started");
        let r = pool.rx.recv().expect("actors run until stopped");
        self.async_lag.0 += pool.version - r.version;
        self.async_lag.1 += 1;
        self.buf = r.buf;
        self.absorb(&r.stats);
        stats.episodes = r.stats.episodes;

        let t_learn = std::time::Instant::now();
        self.learn_next_done = r.next_done;
        let mut next_value = Vec::new();
        self.agent.head_on(
            Part::Value,
            &mut *self.backend,
            &r.next_obs,
            e,
            &mut next_value,
        );
        self.vtrace_targets(&next_value);
        self.update(lr, it, &mut stats);
        let pool = self.pool.as_mut().expect("running");
        pool.version += 1;
        *pool.latest.lock().expect("actors do not panic holding it") =
            (pool.version, std::sync::Arc::new(self.agent.params.clone()));
        if !keep_running || it >= cfg.num_iterations() {
            self.stop_actors();
        }
        let t_end = std::time::Instant::now();
        self.times.learner += (t_end - t_learn).as_secs_f64();
        self.span("learner", t_learn, t_end);
        self.finish_stats(stats, r.stats.ret_sum, r.stats.len_sum)
    }

    /// Adds a rollout's steps, stage times and spans to the run's.
    fn absorb(&mut self, r: &RolloutStats) {
        self.global_step += r.steps;
        self.times.env += r.env;
        self.times.inference += r.inference;
        if let Some(log) = &mut self.trace {
            log.extend(&r.spans);
        }
    }

    /// GAE over the rollout, bootstrapped from `next_value`.
    fn gae(&mut self, next_value: &[f32]) {
        let cfg = &self.cfg;
        let (t_max, e) = (cfg.num_steps, cfg.num_envs);
        let (g, l) = (cfg.gamma as f32, cfg.gae_lambda as f32);
        let mut last = vec![0.0f32; e];
        for t in (0..t_max).rev() {
            for k in 0..e {
                let (nonterminal, next_v) = if t + 1 == t_max {
                    (
                        1.0 - f32::from(u8::from(self.learn_next_done[k])),
                        next_value[k],
                    )
                } else {
                    (
                        1.0 - self.buf.dones[(t + 1) * e + k],
                        self.buf.values[(t + 1) * e + k],
                    )
                };
                let i = t * e + k;
                let delta = self.buf.rewards[i] + g * next_v * nonterminal - self.buf.values[i];
                last[k] = delta + g * l * nonterminal * last[k];
                self.advantages[i] = last[k];
                self.returns[i] = last[k] + self.buf.values[i];
            }
        }
    }

    /// IMPALA's learner side: values and log-probabilities of the rollout under the
    /// current parameters, V-trace targets (into `returns`) and advantages (into
    /// `advantages`). The stored log-probabilities become the current ones, so the
    /// update's ratio starts at 1 and its gradient is V-trace's `A_t * grad log pi`.
    fn vtrace_targets(&mut self, next_value: &[f32]) {
        let cfg = &self.cfg;
        let (t_max, e) = (cfg.num_steps, cfg.num_envs);
        let n = t_max * e;
        let adim = self.agent.action_dim();
        let mut out = vec![0.0; n * self.agent.policy_dim()];
        self.agent.forward(
            &mut *self.backend,
            &self.buf.obs,
            n,
            false,
            &mut out,
            &mut self.buf.values,
        );
        let ls = self.backend.free_params().to_vec();
        let mut logp_row = vec![0.0f32; self.agent.policy_dim()];
        let mut log_rhos = vec![0.0f32; n];
        for i in 0..n {
            let new_lp = match &self.agent.head {
                Head::Categorical { n: k } => {
                    log_softmax(&out[i * k..(i + 1) * k], &mut logp_row);
                    logp_row[self.buf.actions[i] as usize]
                }
                Head::Gaussian { dim, .. } => (0..*dim)
                    .map(|j| {
                        let z = (self.buf.actions[i * adim + j] - out[i * dim + j]) / ls[j].exp();
                        -0.5 * z * z - ls[j] - LOG_SQRT_2PI
                    })
                    .sum(),
            };
            log_rhos[i] = new_lp - self.buf.logprobs[i];
            self.buf.logprobs[i] = new_lp;
        }
        // discounts[t] = 0 where step t ended the episode (the next obs starts a new one).
        let discounts: Vec<f32> = (0..n)
            .map(|i| {
                let (t, k) = (i / e, i % e);
                let ended = if t + 1 == t_max {
                    self.learn_next_done[k]
                } else {
                    self.buf.dones[i + e] != 0.0
                };
                if ended { 0.0 } else { 1.0 }
            })
            .collect();
        crate::vtrace::vtrace(
            t_max,
            e,
            crate::vtrace::VtraceParams {
                gamma: cfg.gamma as f32,
                lambda: cfg.gae_lambda as f32,
                rho_bar: cfg.vtrace_rho_bar as f32,
                c_bar: cfg.vtrace_c_bar as f32,
            },
            &log_rhos,
            &self.buf.rewards,
            &discounts,
            &self.buf.values,
            next_value,
            &mut self.returns,
            &mut self.advantages,
        );
    }

    fn finish_stats(
        &self,
        mut stats: IterationStats,
        ret_sum: f64,
        len_sum: f64,
    ) -> IterationStats {
        stats.global_step = self.global_step;
        stats.episode_return = if stats.episodes > 0 {
            ret_sum / stats.episodes as f64
        } else {
            f64::NAN
        };
        stats.episode_length = if stats.episodes > 0 {
            len_sum / stats.episodes as f64
        } else {
            f64::NAN
        };
        let (vs, rs) = (&self.buf.values, &self.returns);
        let mean = |x: &[f32]| x.iter().map(|v| f64::from(*v)).sum::<f64>() / x.len() as f64;
        let var = |x: &[f32], m: f64| {
            x.iter().map(|v| (f64::from(*v) - m).powi(2)).sum::<f64>() / x.len() as f64
        };
        let diff: Vec<f32> = rs.iter().zip(vs).map(|(r, v)| r - v).collect();
        let var_y = var(rs, mean(rs));
        stats.explained_variance = if var_y == 0.0 {
            f64::NAN
        } else {
            1.0 - var(&diff, mean(&diff)) / var_y
        };
        stats
    }

    /// `update_epochs` passes of minibatch gradient steps over the rollout.
    fn update(&mut self, lr: f64, it: u64, stats: &mut IterationStats) {
        let cfg = &self.cfg;
        let (b, mb, d) = (cfg.batch_size(), cfg.minibatch_size(), self.agent.obs_dim);
        let adim = self.agent.action_dim();
        let out_dim = self.agent.policy_dim();
        let mut scratch = Vec::new();
        let clip = cfg.clip_coef as f32;
        let mut idx: Vec<usize> = (0..b).collect();
        let mut mb_obs = vec![0.0f32; mb * d];
        let mut d_out = vec![0.0f32; mb * out_dim];
        let mut d_val = vec![0.0f32; mb];
        let mut mb_adv = vec![0.0f32; mb];
        let mut logp_row = vec![0.0f32; out_dim];
        let mut d_logstd = vec![
            0.0f32;
            if let Head::Gaussian { dim, .. } = &self.agent.head {
                *dim
            } else {
                0
            }
        ];
        let mut ls = vec![0.0f32; d_logstd.len()];
        let mut out = vec![0.0f32; mb * out_dim];
        let mut newv = vec![0.0f32; mb];
        let (mut n_mb, mut pg_sum, mut v_sum, mut ent_sum, mut kl_sum, mut cf_sum) =
            (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for epoch in 0..cfg.update_epochs {
            let mut rng = Rng::stream(
                cfg.seed,
                Purpose::Learner,
                (it - 1) * cfg.update_epochs as u64 + epoch as u64,
            );
            // Fisher-Yates, as numpy's permutation (different draws, same distribution).
            for i in (1..b).rev() {
                let j = rng.below(i as u32 + 1) as usize;
                idx.swap(i, j);
            }
            for chunk in idx.chunks_exact(mb) {
                for (r, &i) in chunk.iter().enumerate() {
                    mb_obs[r * d..(r + 1) * d].copy_from_slice(&self.buf.obs[i * d..(i + 1) * d]);
                    mb_adv[r] = self.advantages[i];
                }
                if cfg.norm_adv && mb > 1 {
                    let m = mb_adv.iter().map(|v| f64::from(*v)).sum::<f64>() / mb as f64;
                    // torch.std is the unbiased estimate.
                    let s = (mb_adv
                        .iter()
                        .map(|v| (f64::from(*v) - m).powi(2))
                        .sum::<f64>()
                        / (mb - 1) as f64)
                        .sqrt();
                    for a in mb_adv.iter_mut() {
                        *a = ((f64::from(*a) - m) / (s + 1e-8)) as f32;
                    }
                }
                // Copies of a few floats per row: the loss head runs on the host,
                // wherever the networks do.
                self.agent
                    .forward(&mut *self.backend, &mb_obs, mb, true, &mut out, &mut newv);
                ls.copy_from_slice(self.backend.free_params());
                let inv = 1.0 / mb as f32;
                let (mut pg, mut ent, mut kl, mut cf, mut vl) =
                    (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
                // Gaussian: log-std gradient accumulates over the minibatch.
                d_logstd.fill(0.0);
                for (r, &i) in chunk.iter().enumerate() {
                    let adv = mb_adv[r];
                    let old_lp = self.buf.logprobs[i];
                    let (new_lp, entropy) = match &self.agent.head {
                        Head::Categorical { n } => {
                            log_softmax(&out[r * n..(r + 1) * n], &mut logp_row);
                            let a = self.buf.actions[i] as usize;
                            let h: f32 = -logp_row.iter().map(|lp| lp.exp() * lp).sum::<f32>();
                            (logp_row[a], h)
                        }
                        Head::Gaussian { dim, .. } => {
                            let mut lp = 0.0f32;
                            let mut h = 0.0f32;
                            for j in 0..*dim {
                                let z = (self.buf.actions[i * adim + j] - out[r * dim + j])
                                    / ls[j].exp();
                                lp += -0.5 * z * z - ls[j] - LOG_SQRT_2PI;
                                h += 0.5 + LOG_SQRT_2PI + ls[j];
                            }
                            (lp, h)
                        }
                    };
                    let logratio = new_lp - old_lp;
                    let ratio = logratio.exp();
                    kl += f64::from((ratio - 1.0) - logratio);
                    cf += f64::from(u8::from((ratio - 1.0).abs() > clip));
                    let l1 = -adv * ratio;
                    let l2 = -adv * ratio.clamp(1.0 - clip, 1.0 + clip);
                    pg += f64::from(l1.max(l2));
                    ent += f64::from(entropy);
                    // d pg / d new_lp: through the unclipped branch unless the clipped one is
                    // larger and its clamp is active.
                    let clipped_active = l2 > l1 && (ratio < 1.0 - clip || ratio > 1.0 + clip);
                    let g_lp = if clipped_active {
                        0.0
                    } else {
                        -adv * ratio * inv
                    };
                    let ec = cfg.ent_coef as f32;
                    match &self.agent.head {
                        Head::Categorical { n } => {
                            // Recompute this row's log-probs (logp_row holds them already).
                            let a = self.buf.actions[i] as usize;
                            for j in 0..*n {
                                let p = logp_row[j].exp();
                                let onehot = if j == a { 1.0 } else { 0.0 };
                                // d(-ec * H)/dl_j = ec * p_j (log p_j + H)
                                d_out[r * n + j] =
                                    g_lp * (onehot - p) + ec * inv * p * (logp_row[j] + entropy);
                            }
                        }
                        Head::Gaussian { dim, .. } => {
                            for j in 0..*dim {
                                let sd = ls[j].exp();
                                let z = (self.buf.actions[i * adim + j] - out[r * dim + j]) / sd;
                                d_out[r * dim + j] = g_lp * z / sd;
                                d_logstd[j] += g_lp * (z * z - 1.0) - ec * inv;
                            }
                        }
                    }
                    // Value loss.
                    let (ret, oldv, v) = (self.returns[i], self.buf.values[i], newv[r]);
                    let unclipped = (v - ret) * (v - ret);
                    let vf = cfg.vf_coef as f32;
                    if cfg.clip_vloss {
                        let vc = oldv + (v - oldv).clamp(-clip, clip);
                        let clipped = (vc - ret) * (vc - ret);
                        vl += 0.5 * f64::from(unclipped.max(clipped));
                        d_val[r] = if clipped > unclipped {
                            if (v - oldv).abs() < clip {
                                vf * (vc - ret) * inv
                            } else {
                                0.0
                            }
                        } else {
                            vf * (v - ret) * inv
                        };
                    } else {
                        vl += 0.5 * f64::from(unclipped);
                        d_val[r] = vf * (v - ret) * inv;
                    }
                }
                self.agent
                    .backward(&mut *self.backend, &d_out, &d_val, &mut scratch);
                if !d_logstd.is_empty() {
                    self.backend.add_free_grad(&d_logstd);
                }
                self.backend.step(lr, cfg.max_grad_norm);
                let m = mb as f64;
                n_mb += 1.0;
                pg_sum += pg / m;
                v_sum += vl / m;
                ent_sum += ent / m;
                kl_sum += kl / m;
                cf_sum += cf / m;
            }
        }
        self.agent.params = self.backend.params();
        stats.policy_loss = pg_sum / n_mb;
        stats.value_loss = v_sum / n_mb;
        stats.entropy = ent_sum / n_mb;
        stats.approx_kl = kl_sum / n_mb;
        stats.clipfrac = cf_sum / n_mb;
    }

    /// Deterministic evaluation (greedy action / Gaussian mean) on `episodes` fresh
    /// episodes of `cfg.env`, seeded by `seed`; returns each episode's return.
    pub fn evaluate(&self, episodes: usize, seed: u64) -> Vec<f64> {
        evaluate(
            &self.agent,
            self.act().obs_rms.as_ref(),
            &self.cfg,
            episodes,
            seed,
        )
    }
}

/// What [`greedy_actions`] reuses across calls: the network's activations, the
/// normalised observations and the policy's outputs.
#[derive(Default)]
pub struct GreedyBuffers {
    pub cache: NetCache,
    obs: Vec<f32>,
    out: Vec<f32>,
}

/// Greedy actions (argmax / Gaussian mean, clipped) for `n` observations, into `ai`/`af`.
#[allow(clippy::too_many_arguments)]
pub fn greedy_actions<'a>(
    agent: &Agent,
    obs_rms: Option<&RunningMeanStd>,
    cfg: &PpoConfig,
    raw_obs: &[f32],
    n: usize,
    bufs: &mut GreedyBuffers,
    ai: &'a mut [i32],
    af: &'a mut [f32],
) -> ActionBuf<'a> {
    let GreedyBuffers { cache, obs, out } = bufs;
    obs.clear();
    obs.extend_from_slice(raw_obs);
    if let Some(rms) = obs_rms {
        rms.normalize(obs, cfg.clip_obs);
    }
    agent.head_on_host(Part::Policy, &agent.params, obs, n, cache, out);
    match &agent.head {
        Head::Categorical { n: k } => {
            for e in 0..n {
                let row = &out[e * k..(e + 1) * k];
                ai[e] = (0..*k).fold(0, |b, j| if row[j] > row[b] { j } else { b }) as i32;
            }
            ActionBuf::Discrete(&ai[..n])
        }
        Head::Gaussian { dim, low, high, .. } => {
            for (j, a) in af[..n * dim].iter_mut().enumerate() {
                *a = out[j].clamp(low[j % dim], high[j % dim]);
            }
            ActionBuf::Continuous(&af[..n * dim])
        }
    }
}

/// The greedy policy of a PPO/A2C/IMPALA agent: arg-max of the categorical head or
/// the Gaussian's mean clipped to the bounds, on observations normalised with the
/// run's statistics.
pub struct PpoGreedy {
    agent: Agent,
    obs_rms: Option<RunningMeanStd>,
    cfg: PpoConfig,
    bufs: GreedyBuffers,
    ai: Vec<i32>,
    af: Vec<f32>,
}

impl PpoGreedy {
    pub fn new(agent: Agent, obs_rms: Option<RunningMeanStd>, cfg: PpoConfig) -> PpoGreedy {
        PpoGreedy {
            agent,
            obs_rms,
            cfg,
            bufs: GreedyBuffers::default(),
            ai: Vec::new(),
            af: Vec::new(),
        }
    }
}

impl crate::eval::Greedy for PpoGreedy {
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_> {
        self.ai.resize(n, 0);
        self.af.resize(n * self.agent.action_dim(), 0.0);
        greedy_actions(
            &self.agent,
            self.obs_rms.as_ref(),
            &self.cfg,
            obs,
            n,
            &mut self.bufs,
            &mut self.ai,
            &mut self.af,
        )
    }

    fn export(&self) -> Result<crate::export::PolicyExport, String> {
        let agent = &self.agent;
        let mut e = match &agent.head {
            Head::Categorical { .. } => {
                crate::export::PolicyExport::new("ppo", "argmax(actor(obs), -1)")
            }
            Head::Gaussian {
                dim,
                low,
                high,
                logstd,
            } => {
                let mut e = crate::export::PolicyExport::new(
                    "ppo",
                    "clip(actor(obs), action_low, action_high)",
                );
                e.vector("action_low", low.clone());
                e.vector("action_high", high.clone());
                // Not used by the greedy action; a sampling policy draws
                // actor(obs) + exp(actor.logstd) * N(0, 1).
                e.vector(
                    "actor.logstd",
                    agent.params[*logstd..*logstd + dim].to_vec(),
                );
                e
            }
        };
        for (name, net) in agent.named_nets() {
            match net {
                Net::Mlp(m) => e.mlp(name, m, &agent.params),
                Net::Conv(c) => e
                    .conv_net(name, c, &agent.params)
                    .map_err(|why| format!("{}: {why}", self.cfg.env))?,
            }
        }
        if let Some(rms) = &self.obs_rms {
            e.obs_norm(&rms.mean, &rms.var, self.cfg.clip_obs);
        }
        Ok(e)
    }
}

/// Greedy evaluation of `agent` on `episodes` fresh episodes of the config's env.
pub fn evaluate(
    agent: &Agent,
    obs_rms: Option<&RunningMeanStd>,
    cfg: &PpoConfig,
    episodes: usize,
    seed: u64,
) -> Vec<f64> {
    let mut policy = PpoGreedy::new(agent.clone(), obs_rms.cloned(), cfg.clone());
    crate::eval::greedy_returns(&mut policy, &cfg.env, &cfg.env_args, episodes, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared trunk's one output row is `[value, policy...]`: `Agent::forward` splits
    /// it, `Agent::backward` joins the two gradients back, and the two heads start with
    /// CleanRL's gains (1 for the value, 0.01 for the policy).
    #[test]
    fn shared_trunk_splits_and_joins_the_heads() {
        let mut rng = Rng::stream(3, Purpose::User, 0);
        let net = ConvNet::tower((2, 36, 36), &NATURE, 0, &[8], 1 + 3, 0).with_scale(0.5);
        let input = net.input_dim();
        let agent = Agent::assemble(
            input,
            AgentNets::Shared(net.clone().into()),
            &Space::Discrete { n: 3 },
            0.0,
            &mut rng,
        );
        let last = net.head.layers().last().unwrap().clone();
        let column_norm = |j: usize| {
            (0..last.fan_in)
                .map(|r| f64::from(agent.params[last.w + r * last.fan_out + j]).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        assert!((column_norm(0) - 1.0).abs() < 1e-5, "{}", column_norm(0));
        for j in 1..4 {
            assert!(
                column_norm(j) > 1e-4 && column_norm(j) <= 0.01 + 1e-6,
                "{}",
                column_norm(j)
            );
        }
        let rows = 5;
        let obs: Vec<f32> = (0..rows * input).map(|_| rng.below(256) as f32).collect();
        let layout = agent.layout();
        let mut backend = Native::new(&layout, &agent.params, Adam::new(layout.total, 1e-8));
        let (mut policy, mut values) = (vec![0.0; rows * 3], vec![0.0; rows]);
        agent.forward(&mut backend, &obs, rows, true, &mut policy, &mut values);
        let mut cache = NetCache::default();
        let whole = Net::from(net.clone())
            .forward(&agent.params, &obs, rows, &mut cache)
            .to_vec();
        for r in 0..rows {
            assert_eq!(values[r], whole[r * 4]);
            assert_eq!(policy[r * 3..r * 3 + 3], whole[r * 4 + 1..r * 4 + 4]);
        }
        let d_policy: Vec<f32> = (0..rows * 3).map(|i| (i as f32 * 0.37).sin()).collect();
        let d_values: Vec<f32> = (0..rows).map(|i| (i as f32 * 1.3).cos()).collect();
        agent.backward(&mut backend, &d_policy, &d_values, &mut Vec::new());
        let joined: Vec<f32> = (0..rows)
            .flat_map(|r| {
                std::iter::once(d_values[r]).chain(d_policy[r * 3..r * 3 + 3].iter().copied())
            })
            .collect();
        let mut want = vec![0.0; layout.total];
        Net::from(net).backward(&agent.params, &mut want, &joined, &mut cache);
        assert_eq!(backend.grads(), want);
        assert!(want.iter().any(|g| *g != 0.0));
        // The host paths agree with the backend's.
        let (mut p2, mut v2) = (Vec::new(), Vec::new());
        agent.head_on_host(Part::Policy, &agent.params, &obs, rows, &mut cache, &mut p2);
        agent.head_on_host(Part::Value, &agent.params, &obs, rows, &mut cache, &mut v2);
        assert_eq!((p2, v2), (policy, values));
    }

    /// `reward_sign` changes what the learner sees, not the reported score: the first
    /// rollout (same initial policy) reports the same raw returns either way.
    #[test]
    fn reward_sign_learns_from_signs_and_reports_raw_returns() {
        let mut cfg = PpoConfig::for_env("Pendulum-v1");
        cfg.norm_reward = false;
        cfg.total_steps = cfg.batch_size() as u64;
        let first = |sign: bool| {
            let mut c = cfg.clone();
            c.reward_sign = sign;
            Ppo::new(c, 1).unwrap().iterate()
        };
        let (raw, signed) = (first(false), first(true));
        assert!(raw.episodes > 0 && raw.episode_return < -100.0, "{raw:?}");
        assert_eq!(raw.episode_return, signed.episode_return);
        // Pendulum's rewards are in [-16.3, 0]: as signs, returns are at most
        // 1 / (1 - gamma) = 10 in size, far below the raw ones.
        assert!(
            signed.value_loss < raw.value_loss / 10.0,
            "{} vs {}",
            signed.value_loss,
            raw.value_loss
        );
    }
}
