//! DQN (Mnih et al. 2015) for discrete actions, as CleanRL's `dqn.py` and
//! Stable-Baselines3's `DQN`: a Q-network and its target network, a replay buffer,
//! an epsilon-greedy behaviour policy annealed linearly, `gradient_steps` updates every
//! `train_frequency` env steps, and (optionally) the double-DQN target (van Hasselt et
//! al. 2016) and SB3's Huber loss with gradient clipping.
//!
//! Defaults are CleanRL's `dqn.py`; [`DqnConfig::for_env`] adds presets taken from
//! RL Baselines3 Zoo's `dqn.yml` (with SB3's loss and clipping, which those settings
//! were tuned with).
//!
//! Determinism: the epsilon draws and random actions of collection step `t` come from
//! the stream `(seed, Policy, t)`, the minibatch of update `u` from `(seed, Learner,
//! u)`; the learner runs in a fixed order and the envs are stepped by rlrig-env
//! (identical at any thread count). A checkpoint holds the replay buffer (unless
//! `checkpoint_buffer = false`) and continues the run bit for bit.

use rlrig_env::{ActionBuf, Purpose, Rng, Space};
use serde::{Deserialize, Serialize};

use crate::LearnError;
use crate::backend::{BackendMaker, Native, NetBackend, NetLayout, OptimState, rebuild};
use crate::buffer::Batch;
use crate::collector::{ChunkStats, Collector, NamedTensor, NetTensors, Progress};
use crate::nn::{Activation, Mlp, MlpCache};
use crate::presets::{Presets, presets};
use crate::rules::{self, fields};
use crate::run::TensorSource;
use crate::trace::StageTimes;

/// The TD loss.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Loss {
    /// Mean squared TD error (CleanRL).
    Mse,
    /// Smooth L1 with threshold 1 (SB3, the Nature DQN's error clipping).
    Huber,
}

/// Hyperparameters. Defaults are CleanRL's `dqn.py`; [`DqnConfig::for_env`] adds presets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DqnConfig {
    /// Environment id (a discrete-action env).
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
    /// Target update coefficient: 1 copies the Q-network (hard update).
    pub tau: f64,
    /// Environment steps between target-network updates (CleanRL's and SB3's unit).
    pub target_network_frequency: u64,
    /// Minibatch size of each update.
    pub batch_size: usize,
    /// Exploration epsilon at the start...
    pub start_e: f64,
    /// ...and after `exploration_fraction * total_steps` env steps (then constant).
    pub end_e: f64,
    pub exploration_fraction: f64,
    /// Environment steps before learning starts (epsilon-greedy throughout).
    pub learning_starts: u64,
    /// Environment steps between rounds of updates...
    pub train_frequency: u64,
    /// ...and the gradient updates of each round.
    pub gradient_steps: u64,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Double DQN: the online network picks the next action, the target network values it.
    pub double_q: bool,
    /// mse (CleanRL) or huber (SB3).
    pub loss: Loss,
    /// Clip the gradient's global norm to this (0: no clipping, as CleanRL; SB3: 10).
    pub max_grad_norm: f64,
    /// Hidden layer sizes of the Q-network (ReLU).
    pub hidden: Vec<usize>,
    /// Adam epsilon (PyTorch's default).
    pub adam_eps: f64,
    /// Environment steps per metrics.csv row and progress update.
    pub log_every: u64,
    /// Environment steps between checkpoints (0: only at the end).
    pub checkpoint_every: u64,
    /// Save the replay buffer in checkpoints, so a resumed run continues bit for bit.
    pub checkpoint_buffer: bool,
}

impl Default for DqnConfig {
    fn default() -> Self {
        DqnConfig {
            env: "CartPole-v1".into(),
            env_args: crate::EnvArgs::new(),
            seed: 1,
            total_steps: 500_000,
            num_envs: 1,
            buffer_size: 10_000,
            gamma: 0.99,
            tau: 1.0,
            target_network_frequency: 500,
            batch_size: 128,
            start_e: 1.0,
            end_e: 0.05,
            exploration_fraction: 0.5,
            learning_starts: 10_000,
            train_frequency: 10,
            gradient_steps: 1,
            learning_rate: 2.5e-4,
            double_q: false,
            loss: Loss::Mse,
            max_grad_norm: 0.0,
            hidden: vec![120, 84],
            adam_eps: 1e-8,
            log_every: 1_000,
            checkpoint_every: 100_000,
            checkpoint_buffer: true,
        }
    }
}

/// The per-env presets (`presets/dqn.toml`).
pub(crate) const PRESETS: Presets<DqnConfig> = presets!("dqn.toml", &[]);

impl DqnConfig {
    /// CleanRL's defaults, then the preset for `env` where one is known
    /// (`presets/dqn.toml`).
    pub fn for_env(env: &str) -> DqnConfig {
        PRESETS.apply(DqnConfig::default(), env)
    }

    /// Transitions the buffer holds.
    pub fn capacity(&self) -> usize {
        self.buffer_size.min(self.total_steps.max(1) as usize)
    }

    pub fn validate(&self) -> Result<(), LearnError> {
        let spec = rlrig_env::spec(&self.env)?;
        crate::check_env(&self.env, &self.env_args)?;
        if !spec.action_space.is_discrete() {
            return Err(LearnError::Config(format!(
                "{} has a continuous action space ({}); dqn needs discrete actions: use `rlrig train sac` (or td3, ppo)",
                self.env, spec.action_space
            )));
        }
        rules::at_least_one(fields!(self: num_envs, batch_size, buffer_size))?;
        rules::at_least_one(
            fields!(self: train_frequency, gradient_steps, target_network_frequency, log_every),
        )?;
        rules::hidden_layers(&self.hidden)?;
        rules::positive(fields!(self: learning_rate, adam_eps, tau))?;
        rules::unit_interval(fields!(self: gamma, start_e, end_e, exploration_fraction, tau))?;
        // 0: no clipping.
        rules::non_negative(fields!(self: max_grad_norm))
    }

    /// Epsilon after `step` env steps: linear from `start_e` to `end_e` over
    /// `exploration_fraction * total_steps` steps (CleanRL's `linear_schedule`).
    pub fn epsilon(&self, step: u64) -> f64 {
        let duration = self.exploration_fraction * self.total_steps as f64;
        if duration <= 0.0 {
            return self.end_e;
        }
        let slope = (self.end_e - self.start_e) / duration;
        (slope * step as f64 + self.start_e).max(self.end_e)
    }
}

impl crate::memory::Estimated for DqnConfig {
    /// What the run's large buffers take: the envs, the replay buffer (allocated up
    /// front) and the Q-network (with target, gradients and Adam moments).
    fn memory_estimate(&self) -> crate::memory::Estimate {
        let Ok(spec) = rlrig_env::spec(&self.env) else {
            return crate::memory::Estimate::new();
        };
        let d = spec.obs_dim;
        let n = match spec.action_space {
            Space::Discrete { n } => n as usize,
            _ => 1,
        };
        let rows = self.capacity() as f64;
        crate::memory::envs(&self.env, self.num_envs)
            .and(crate::memory::replay(rows, 2 * d + 3))
            .add(
                "networks and optimiser",
                crate::memory::mlp_params(d, &self.hidden, n) * 4.0 * 5.0,
            )
    }
}

/// The Q-network with its parameters, on the host: what evaluation and `play` act with.
#[derive(Clone, Debug)]
pub struct QNet {
    pub mlp: Mlp,
    pub params: Vec<f32>,
    pub n_actions: usize,
}

impl QNet {
    /// A freshly initialised network (PyTorch's default initialisation, stream
    /// `(seed, Init, 0)`) for `env`, which the config has validated.
    pub fn new(cfg: &DqnConfig, obs_dim: usize, space: &Space) -> QNet {
        let Space::Discrete { n } = space else {
            panic!("validated: discrete actions");
        };
        let n = *n as usize;
        let sizes: Vec<usize> = std::iter::once(obs_dim)
            .chain(cfg.hidden.iter().copied())
            .chain(std::iter::once(n))
            .collect();
        let mlp = Mlp::with_activation(&sizes, 0, Activation::Relu);
        let mut params = vec![0.0; mlp.num_params()];
        mlp.init_torch_default(&mut params, &mut Rng::stream(cfg.seed, Purpose::Init, 0));
        QNet {
            mlp,
            params,
            n_actions: n,
        }
    }

    fn layout(&self) -> NetLayout {
        let total = self.mlp.num_params();
        NetLayout {
            nets: vec![self.mlp.clone().into()],
            free: total..total,
            total,
        }
    }

    /// The greedy policy of this network.
    pub fn greedy(self) -> QGreedy {
        QGreedy {
            net: self,
            cache: MlpCache::default(),
            actions: Vec::new(),
        }
    }
}

/// Arg-max of a [`QNet`]'s values.
pub struct QGreedy {
    net: QNet,
    cache: MlpCache,
    actions: Vec<i32>,
}

impl crate::eval::Greedy for QGreedy {
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_> {
        let q = self
            .net
            .mlp
            .forward(&self.net.params, obs, n, &mut self.cache);
        crate::eval::argmax_rows(q, n, self.net.n_actions, &mut self.actions);
        ActionBuf::Discrete(&self.actions)
    }

    fn export(&self) -> Result<crate::export::PolicyExport, LearnError> {
        let mut e = crate::export::PolicyExport::new("dqn", "argmax(q(obs), -1)");
        e.mlp("q", &self.net.mlp, &self.net.params);
        Ok(e)
    }
}

/// The Q-network's checkpoint tensors.
const Q_TENSORS: [&str; 4] = ["q", "q_target", "q_adam_m", "q_adam_v"];

/// Everything besides the tensors that a checkpoint must hold.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DqnState {
    #[serde(flatten)]
    pub progress: Progress,
    pub updates: u64,
    pub adam: OptimState,
}

#[derive(Default)]
struct Scratch {
    obs: Vec<f32>,
    actions: Vec<i32>,
    greedy: Vec<i32>,
    next_q: Vec<f32>,
    y: Vec<f32>,
    dout: Vec<f32>,
}

/// A DQN run in progress. The Q-network, its target and Adam live in a
/// [`NetBackend`] (native CPU path or a Burn device); targets and the loss run on the
/// host.
pub struct Dqn {
    pub cfg: DqnConfig,
    /// Shapes; its parameters are left empty (the backend holds them: [`Dqn::qnet`]).
    net: QNet,
    /// The envs, the replay buffer and the step counters.
    pub c: Collector,
    q: Box<dyn NetBackend>,
    batch: Batch,
    pub updates: u64,
    pub times: StageTimes,
    s: Scratch,
}

/// How many multiples of `every` lie in `(from, to]`.
fn multiples_in(from: u64, to: u64, every: u64) -> u64 {
    (to / every).saturating_sub(from / every)
}

impl Dqn {
    pub fn new(cfg: DqnConfig, threads: usize) -> Result<Dqn, LearnError> {
        cfg.validate()?;
        let (env, args) = (&cfg.env, &cfg.env_args);
        let c = Collector::open(env, args, cfg.num_envs, cfg.seed, threads, cfg.capacity())?;
        let spec = c.env.spec();
        let mut net = QNet::new(&cfg, spec.obs_dim, &spec.action_space);
        let mut q = Native::with_adam(&net.layout(), &net.params, cfg.adam_eps, threads)?;
        q.init_target();
        net.params = Vec::new();
        Ok(Dqn {
            q: Box::new(q),
            batch: Batch::default(),
            updates: 0,
            times: StageTimes::default(),
            s: Scratch::default(),
            net,
            c,
            cfg,
        })
    }

    /// Moves the Q-network (parameters, target, optimiser) to the backend `maker`
    /// builds (`--device`).
    pub fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), LearnError> {
        self.q = rebuild(maker, self.q.as_ref(), &self.net.layout())?;
        Ok(())
    }

    /// What runs the network (`cpu`, `burn-cpu`, `wgpu: ...`).
    pub fn device(&self) -> String {
        self.q.device()
    }

    /// The Q-network with its current parameters, on the host.
    pub fn qnet(&self) -> QNet {
        QNet {
            params: self.q.params(),
            ..self.net.clone()
        }
    }

    pub fn done(&self) -> bool {
        self.c.global_step >= self.cfg.total_steps
    }

    /// One collection step of every env (epsilon-greedy), then the updates and target
    /// updates that fall due.
    fn collect_step(&mut self) {
        let (n, k) = (self.cfg.num_envs, self.net.n_actions);
        let t0 = std::time::Instant::now();
        let eps = self.cfg.epsilon(self.c.global_step);
        let mut rng = self.c.policy_rng(self.cfg.seed);
        self.s.obs.clear();
        self.c.env.obs().extend_into(&mut self.s.obs);
        if eps < 1.0 {
            let q = self.q.forward(0, &self.s.obs, n);
            crate::eval::argmax_rows(q, n, k, &mut self.s.greedy);
        } else {
            self.s.greedy.clear();
            self.s.greedy.resize(n, 0);
        }
        self.s.actions.clear();
        for e in 0..n {
            let a = if rng.unit_f64() < eps {
                rng.below(k as u32) as i32
            } else {
                self.s.greedy[e]
            };
            self.s.actions.push(a);
        }
        let before = self.c.global_step;
        self.c
            .step(
                t0,
                ActionBuf::Discrete(&self.s.actions),
                &self.s.obs,
                &mut self.times,
            )
            .expect("actions are valid indices");
        let now = self.c.global_step;
        // CleanRL: once global_step > learning_starts, train every train_frequency
        // steps and update the target every target_network_frequency steps.
        let from = before.max(self.cfg.learning_starts);
        if now > from {
            let t3 = std::time::Instant::now();
            let rounds = multiples_in(from, now, self.cfg.train_frequency);
            for _ in 0..rounds * self.cfg.gradient_steps {
                if self.c.can_sample(self.cfg.batch_size) {
                    self.update();
                }
            }
            if multiples_in(from, now, self.cfg.target_network_frequency) > 0 {
                if self.cfg.tau >= 1.0 {
                    let online = self.q.params();
                    self.q.set_target_params(&online);
                } else {
                    self.q.soft_update(self.cfg.tau as f32);
                }
            }
            self.times.learner += t3.elapsed().as_secs_f64();
        }
    }

    /// One gradient step on a sampled minibatch.
    fn update(&mut self) {
        let (loss, qmean) = self.td_gradient();
        let clip = if self.cfg.max_grad_norm > 0.0 {
            self.cfg.max_grad_norm
        } else {
            f64::INFINITY
        };
        self.q.step(self.cfg.learning_rate, clip);
        self.c.chunk.q_loss += loss;
        self.c.chunk.q_value += qmean;
        self.c.chunk.q_updates += 1;
        self.updates += 1;
    }

    /// Samples update `updates`' minibatch and leaves the TD loss's gradient in the
    /// backend's accumulator; returns the loss and the mean Q of the taken actions.
    fn td_gradient(&mut self) -> (f64, f64) {
        let cfg = &self.cfg;
        let (bsz, k) = (cfg.batch_size, self.net.n_actions);
        let mut rng = Rng::stream(cfg.seed, Purpose::Learner, self.updates);
        self.c.buffer.sample(bsz, &mut rng, &mut self.batch);
        let (s, batch) = (&mut self.s, &self.batch);
        // y = r + gamma (1 - terminated) Q'(s', a*), a* = argmax Q' (or argmax Q: double).
        s.next_q.clear();
        s.next_q
            .extend_from_slice(self.q.forward_target(0, &batch.next_obs, bsz));
        if cfg.double_q {
            let online = self.q.forward(0, &batch.next_obs, bsz);
            crate::eval::argmax_rows(online, bsz, k, &mut s.greedy);
        } else {
            crate::eval::argmax_rows(&s.next_q, bsz, k, &mut s.greedy);
        }
        let gamma = cfg.gamma as f32;
        s.y.clear();
        s.y.extend((0..bsz).map(|b| {
            let next = s.next_q[b * k + s.greedy[b] as usize];
            batch.rewards[b] + gamma * (1.0 - batch.terminated[b]) * next
        }));
        let out = self.q.forward_train(0, &batch.obs, bsz);
        let inv = 1.0 / bsz as f32;
        s.dout.clear();
        s.dout.resize(bsz * k, 0.0);
        let (mut loss, mut qmean) = (0.0f64, 0.0f64);
        for b in 0..bsz {
            let j = b * k + batch.actions[b] as usize;
            let e = out[j] - s.y[b];
            let (l, g) = match cfg.loss {
                Loss::Mse => (e * e, 2.0 * e),
                Loss::Huber if e.abs() < 1.0 => (0.5 * e * e, e),
                Loss::Huber => (e.abs() - 0.5, e.signum()),
            };
            loss += f64::from(l * inv);
            qmean += f64::from(out[j] * inv);
            s.dout[j] = g * inv;
        }
        self.q.backward(0, &s.dout);
        (loss, qmean)
    }

    /// [`crate::offpolicy::OffPolicy::iterate_until`]'s contract: runs to the next
    /// logging boundary unless `stop` says stop first (`None`; the chunk's sums carry
    /// over).
    pub fn iterate_until(&mut self, stop: impl Fn() -> bool) -> Option<ChunkStats> {
        let goal = self.c.chunk_end(self.cfg.log_every, self.cfg.total_steps);
        while self.c.global_step < goal {
            if stop() {
                return None;
            }
            self.collect_step();
        }
        // The exploration epsilon in the column SAC uses for its temperature.
        let eps = self.cfg.epsilon(self.c.global_step);
        Some(self.c.take_chunk(self.updates, eps))
    }

    /// The checkpoint state and its tensors (the buffer's rows borrowed).
    pub fn state(&self) -> (DqnState, Vec<NamedTensor<'_>>) {
        let mut tensors = Vec::new();
        let adam = NetTensors::push(&*self.q, Q_TENSORS, &mut tensors);
        let st = DqnState {
            progress: self.c.progress(self.cfg.checkpoint_buffer, &mut tensors),
            updates: self.updates,
            adam,
        };
        (st, tensors)
    }

    /// Continues from a checkpoint; `get` returns a tensor by name. Everything is read
    /// and checked before anything changes.
    pub fn restore(&mut self, st: DqnState, mut get: impl TensorSource) -> Result<(), LearnError> {
        let q = NetTensors::take(&*self.q, Q_TENSORS, st.adam, &mut get)?;
        self.c.restore(st.progress, &mut get)?;
        q.apply(&mut *self.q);
        self.updates = st.updates;
        Ok(())
    }

    /// Greedy evaluation on `episodes` fresh episodes seeded by `seed`.
    pub fn evaluate(&self, episodes: usize, seed: u64) -> crate::eval::Episodes {
        crate::eval::run_episodes(
            &mut self.qnet().greedy(),
            &self.cfg.env,
            &self.cfg.env_args,
            episodes,
            seed,
        )
    }
}

#[cfg(test)]
mod tests;
