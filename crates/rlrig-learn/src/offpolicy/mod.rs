//! Off-policy continuous control: DDPG (Lillicrap et al. 2016), TD3 (Fujimoto et al.
//! 2018) and SAC with automatic entropy tuning (Haarnoja et al. 2018), as CleanRL's
//! `ddpg_continuous_action.py`, `td3_continuous_action.py` and
//! `sac_continuous_action.py`: the same networks (ReLU MLPs, PyTorch's default
//! initialisation, a tanh-squashed actor scaled to the action bounds), losses, delays and
//! target updates.
//!
//! Collection steps `num_envs` environments at once; after `learning_starts` steps the
//! learner makes `utd_ratio` gradient updates per environment step collected (CleanRL:
//! one env, one update per step), so users trade envs for updates with one setting.
//!
//! Determinism: exploration noise and random warm-up actions of collection step `t` come
//! from the stream `(seed, Policy, t)`, minibatch indices and the policy/target noise of
//! update `u` from `(seed, Learner, u)`; the learner's passes are split into chunks of
//! rows that do not depend on the thread count and whose gradients are added in chunk
//! order (the native backend), and the envs are stepped by rlrig-env (identical at any
//! thread count). A run is
//! a pure function of its config, and a checkpoint (which holds the replay buffer unless
//! `checkpoint_buffer = false`) continues it bit for bit.
//!
//! One difference from CleanRL's SAC: the temperature loss reuses the log-probabilities
//! of the actor update's sample (as Stable-Baselines3) instead of drawing a new one.

use rlrig_env::{ActionBuf, Purpose, Rng, Space};
use serde::{Deserialize, Serialize};

use std::borrow::Cow;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;

use crate::LearnError;
use crate::backend::{BackendMaker, Native, Net, NetBackend, NetLayout, Weights, rebuild};
use crate::buffer::Batch;
use crate::collector::{ChunkStats, Collector, NamedTensor, NetTensors, Progress};
use crate::nn::{Activation, Mlp, MlpCache, Rows, normal};
use crate::optim::Adam;
use crate::run::TensorSource;
use crate::trace::StageTimes;

mod config;
mod nets;
#[cfg(test)]
mod tests;
pub use config::*;
pub use nets::*;

/// The actor's and the critics' checkpoint tensors (an actor without a target, SAC's,
/// stores an empty `actor_target`).
const ACTOR_TENSORS: [&str; 4] = ["actor", "actor_target", "actor_adam_m", "actor_adam_v"];
const CRITIC_TENSORS: [&str; 4] = ["critic", "critic_target", "critic_adam_m", "critic_adam_v"];

/// Everything besides the tensors that a checkpoint must hold.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OffPolicyState {
    #[serde(flatten)]
    pub progress: Progress,
    pub updates: u64,
    /// Updates owed but not yet made (fractional utd_ratio).
    pub update_debt: f64,
    pub log_alpha: f32,
    pub actor_adam: Adam,
    pub critic_adam: Adam,
    pub alpha_adam: Adam,
}

#[derive(Default)]
struct Scratch {
    sample: SacSample,
    x: Vec<f32>,
    y: Vec<f32>,
    dq1: Vec<f32>,
    dq2: Vec<f32>,
    dx1: Vec<f32>,
    /// The critic pass's per-row TD errors (critic `i`'s row `b` at `i * rows + b`) and
    /// Q1 values (after the errors), as f32 bits: written by the pass's chunks, summed
    /// into the loss and the mean Q afterwards in row order.
    rows: Vec<AtomicU32>,
    dout: Vec<f32>,
    obs: Vec<f32>,
    actions: Vec<f32>,
    q1v: Vec<f32>,
    q2v: Vec<f32>,
}

/// A DDPG/TD3/SAC run in progress.
///
/// The actor and the critics each live in a [`NetBackend`] (their own optimiser and
/// learning rate; the critics' target networks beside them, and the actor's for
/// DDPG/TD3), so the same code runs on the native CPU path and on Burn devices. The
/// loss heads (TD targets, tanh squashing, SAC's log-probabilities) run on the host:
/// a few floats per sample cross to the device and back per pass.
pub struct OffPolicy {
    pub cfg: OffPolicyConfig,
    /// Shapes and action bounds; its parameter vectors are left empty (the backends
    /// hold the parameters: see [`OffPolicy::nets`]).
    nets: Nets,
    /// The envs, the replay buffer and the step counters.
    pub c: Collector,
    actor: Box<dyn NetBackend>,
    critic: Box<dyn NetBackend>,
    alpha_adam: Adam,
    log_alpha: f32,
    batch: Batch,
    pub updates: u64,
    update_debt: f64,
    pub times: StageTimes,
    s: Scratch,
}

/// Concatenates `[obs | act]` row by row into `x`.
fn concat(obs: &[f32], d: usize, act: &[f32], a: usize, n: usize, x: &mut Vec<f32>) {
    x.clear();
    for b in 0..n {
        x.extend_from_slice(&obs[b * d..(b + 1) * d]);
        x.extend_from_slice(&act[b * a..(b + 1) * a]);
    }
}

/// No gradient clipping: CleanRL's off-policy scripts do not clip.
const NO_CLIP: f64 = f64::INFINITY;

/// The actor's parameter layout: one network.
fn actor_layout(nets: &Nets) -> NetLayout {
    let total = nets.actor.num_params();
    NetLayout {
        nets: vec![nets.actor.clone().into()],
        free: total..total,
        total,
    }
}

/// The critics' layout: Q1, and Q2 for TD3 and SAC, in one vector (one optimiser).
fn critic_layout(nets: &Nets) -> NetLayout {
    let mut list: Vec<Net> = vec![nets.q1.clone().into()];
    let mut total = nets.q1.end();
    if nets.algo.twin_critics() {
        list.push(nets.q2.clone().into());
        total = nets.q2.end();
    }
    NetLayout {
        nets: list,
        free: total..total,
        total,
    }
}

impl OffPolicy {
    pub fn new(cfg: OffPolicyConfig, threads: usize) -> Result<OffPolicy, LearnError> {
        cfg.validate()?;
        let (env, args) = (&cfg.env, &cfg.env_args);
        let c = Collector::open(env, args, cfg.num_envs, cfg.seed, threads, cfg.capacity())?;
        let spec = c.env.spec();
        let mut nets = Nets::new(&cfg, spec.obs_dim, &spec.action_space);
        let mut actor = Native::with_adam(
            &actor_layout(&nets),
            &nets.actor_params,
            cfg.adam_eps,
            threads,
        )?;
        let mut critic = Native::with_adam(
            &critic_layout(&nets),
            &nets.critic_params,
            cfg.adam_eps,
            threads,
        )?;
        if cfg.algo != Algo::Sac {
            actor.init_target();
        }
        critic.init_target();
        nets.actor_params = Vec::new();
        nets.critic_params = Vec::new();
        Ok(OffPolicy {
            actor: Box::new(actor),
            critic: Box::new(critic),
            alpha_adam: Adam::new(1, cfg.adam_eps),
            log_alpha: if cfg.autotune {
                0.0
            } else {
                cfg.alpha.ln() as f32
            },
            batch: Batch::default(),
            updates: 0,
            update_debt: 0.0,
            times: StageTimes::default(),
            s: Scratch::default(),
            nets,
            c,
            cfg,
        })
    }

    /// Moves the networks (parameters, targets, optimisers) to the backend `maker`
    /// builds (`--device`). Call it before training or after a restore.
    pub fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), LearnError> {
        self.actor = rebuild(maker, self.actor.as_ref(), &actor_layout(&self.nets))?;
        self.critic = rebuild(maker, self.critic.as_ref(), &critic_layout(&self.nets))?;
        Ok(())
    }

    /// What runs the networks (`cpu`, `burn-cpu`, `wgpu: ...`).
    pub fn device(&self) -> String {
        self.actor.device()
    }

    /// The networks with their current parameters, on the host (evaluation, rendering).
    pub fn nets(&self) -> Nets {
        Nets {
            actor_params: self.actor.params(),
            critic_params: self.critic.params(),
            ..self.nets.clone()
        }
    }

    pub fn done(&self) -> bool {
        self.c.global_step >= self.cfg.total_steps
    }

    pub fn alpha(&self) -> f64 {
        f64::from(self.log_alpha.exp())
    }

    /// One collection step of every env, then the updates it pays for.
    fn collect_step(&mut self) {
        let (n, a) = (self.cfg.num_envs, self.nets.act_dim);
        let t0 = std::time::Instant::now();
        let mut rng = self.c.policy_rng(self.cfg.seed);
        self.s.obs.clear();
        self.c.env.obs().extend_into(&mut self.s.obs);
        self.s.actions.resize(n * a, 0.0);
        if self.c.global_step < self.cfg.learning_starts {
            for (k, x) in self.s.actions.iter_mut().enumerate() {
                let j = k % a;
                *x = rng.uniform(f64::from(self.nets.low[j]), f64::from(self.nets.high[j])) as f32;
            }
        } else {
            let nets = &self.nets;
            let raw = self.actor.forward(0, &self.s.obs, n);
            match nets.algo {
                Algo::Sac => {
                    self.s.sample.draw(nets, raw, n, &mut rng);
                    self.s.actions.copy_from_slice(&self.s.sample.action);
                }
                Algo::Ddpg | Algo::Td3 => {
                    for b in 0..n {
                        for j in 0..a {
                            let mu = crate::nn::tanh(raw[b * a + j]) * nets.scale[j] + nets.bias[j];
                            let noise = normal(&mut rng) as f32
                                * nets.scale[j]
                                * self.cfg.exploration_noise as f32;
                            self.s.actions[b * a + j] =
                                (mu + noise).clamp(nets.low[j], nets.high[j]);
                        }
                    }
                }
            }
        }
        self.c
            .step(
                t0,
                ActionBuf::Continuous(&self.s.actions),
                &self.s.obs,
                &mut self.times,
            )
            .expect("actions are finite and within bounds");
        // CleanRL trains once global_step > learning_starts.
        if self.c.global_step > self.cfg.learning_starts {
            let t3 = std::time::Instant::now();
            self.update_debt += n as f64 * self.cfg.utd_ratio;
            while self.update_debt >= 1.0 {
                self.update_debt -= 1.0;
                if self.c.can_sample(self.cfg.batch_size) {
                    self.update();
                }
            }
            self.times.learner += t3.elapsed().as_secs_f64();
        }
    }

    /// Runs until the next logging boundary (or the end); returns that chunk's metrics.
    pub fn iterate(&mut self) -> ChunkStats {
        self.iterate_until(|| false)
            .expect("a chunk never asked to stop ends")
    }

    /// [`OffPolicy::iterate`], asking `stop` before each collection step: `None` when
    /// it said stop before the chunk ended. The chunk's sums carry over (into a
    /// checkpoint too), and the next call finishes it. A chunk of a large network's
    /// updates can take seconds; a stop request is answered within one step.
    pub fn iterate_until(&mut self, stop: impl Fn() -> bool) -> Option<ChunkStats> {
        let goal = self.c.chunk_end(self.cfg.log_every, self.cfg.total_steps);
        while self.c.global_step < goal {
            if stop() {
                return None;
            }
            self.collect_step();
        }
        let alpha = if self.cfg.algo == Algo::Sac {
            self.alpha()
        } else {
            f64::NAN
        };
        Some(self.c.take_chunk(self.updates, alpha))
    }

    /// One gradient update: the critics on a sampled minibatch, then (every
    /// `policy_frequency` updates) the actor, the temperature and the targets.
    fn update(&mut self) {
        let cfg = &self.cfg;
        let nets = &self.nets;
        let (bsz, d, a) = (cfg.batch_size, nets.obs_dim, nets.act_dim);
        let mut rng = Rng::stream(cfg.seed, Purpose::Learner, self.updates);
        self.c.buffer.sample(bsz, &mut rng, &mut self.batch);
        let s = &mut self.s;
        let batch = &self.batch;
        let alpha = self.log_alpha.exp();

        // Targets y = r + gamma (1 - terminated) (min_i Q_i'(s', a') [- alpha log pi]).
        s.actions.resize(bsz * a, 0.0);
        let mut next_logp: Option<&[f32]> = None;
        match nets.algo {
            Algo::Ddpg | Algo::Td3 => {
                let raw = self.actor.forward_target(0, &batch.next_obs, bsz);
                for b in 0..bsz {
                    for j in 0..a {
                        let mut act =
                            crate::nn::tanh(raw[b * a + j]) * nets.scale[j] + nets.bias[j];
                        if nets.algo == Algo::Td3 {
                            let clip = cfg.noise_clip as f32;
                            let noise = (normal(&mut rng) as f32 * cfg.policy_noise as f32)
                                .clamp(-clip, clip);
                            act = (act + noise * nets.scale[j]).clamp(nets.low[j], nets.high[j]);
                        }
                        s.actions[b * a + j] = act;
                    }
                }
            }
            Algo::Sac => {
                // SAC samples the next action from the online actor (it has no target).
                let raw = self.actor.forward(0, &batch.next_obs, bsz);
                s.sample.draw(nets, raw, bsz, &mut rng);
                s.actions.copy_from_slice(&s.sample.action);
                next_logp = Some(&s.sample.logp);
            }
        }
        concat(&batch.next_obs, d, &s.actions, a, bsz, &mut s.x);
        s.y.resize(bsz, 0.0);
        if nets.algo.twin_critics() {
            s.q1v.resize(bsz, 0.0);
            self.critic.forward_into(
                Weights::Target,
                &[0, 1],
                &s.x,
                bsz,
                &mut [&mut s.y, &mut s.q1v],
            );
            for (y, q) in s.y.iter_mut().zip(&s.q1v) {
                *y = y.min(*q);
            }
        } else {
            s.y.copy_from_slice(self.critic.forward_target(0, &s.x, bsz));
        }
        let gamma = cfg.gamma as f32;
        for b in 0..bsz {
            let mut next = s.y[b];
            if let Some(lp) = next_logp {
                next -= alpha * lp[b];
            }
            s.y[b] = batch.rewards[b] + gamma * (1.0 - batch.terminated[b]) * next;
        }

        // Critic loss: sum over critics of the mean squared TD error.
        concat(&batch.obs, d, &batch.actions, a, bsz, &mut s.x);
        let inv = 1.0 / bsz as f32;
        let mut loss = 0.0f64;
        let mut qmean = 0.0f64;
        let critics: &[usize] = if nets.algo.twin_critics() {
            &[0, 1]
        } else {
            &[0]
        };
        // The TD errors' gradient, each row's error and Q1 kept for the metrics.
        let n = critics.len();
        s.rows.resize_with((n + 1) * bsz, || AtomicU32::new(0));
        let (y, rows) = (&s.y, &s.rows);
        let td_loss = |r: std::ops::Range<usize>, i: usize, out: &[f32], dq: &mut [f32]| {
            for (k, b) in r.enumerate() {
                let e = out[k] - y[b];
                dq[k] = 2.0 * e * inv;
                rows[i * bsz + b].store(e.to_bits(), Relaxed);
                if i == 0 {
                    rows[n * bsz + b].store(out[k].to_bits(), Relaxed);
                }
            }
        };
        // Forward, loss and backward in one job per chunk of rows where the backend fuses
        // them; else both critics' passes at once each way. The same bits.
        if !self
            .critic
            .train_fused(critics, Rows::dense(&s.x, d + a), 1, &td_loss)
        {
            s.q1v.resize(bsz, 0.0);
            s.q2v.resize(bsz, 0.0);
            s.dq1.resize(bsz, 0.0);
            s.dq2.resize(bsz, 0.0);
            let outs: &mut [&mut [f32]] = &mut [&mut s.q1v, &mut s.q2v];
            self.critic
                .forward_into(Weights::Train, critics, &s.x, bsz, &mut outs[..n]);
            let douts: &mut [&mut [f32]] = &mut [&mut s.dq1, &mut s.dq2];
            let outs: &[&[f32]] = &[&s.q1v, &s.q2v];
            for (i, (out, dq)) in outs[..n].iter().zip(douts.iter_mut()).enumerate() {
                td_loss(0..bsz, i, out, dq);
            }
            let passes: &[(usize, &[f32])] = &[(0, &s.dq1), (1, &s.dq2)];
            self.critic.backward_many(&passes[..n]);
        }
        let value = |i: usize| f32::from_bits(s.rows[i].load(Relaxed));
        for i in 0..n * bsz {
            let e = value(i);
            loss += f64::from(e * e * inv);
        }
        for b in 0..bsz {
            qmean += f64::from(value(n * bsz + b) * inv);
        }
        self.critic.step(cfg.q_lr, NO_CLIP);
        self.c.chunk.q_loss += loss;
        self.c.chunk.q_value += qmean;
        self.c.chunk.q_updates += 1;

        let (algo, freq, tau) = (cfg.algo, cfg.policy_frequency, cfg.tau as f32);
        let target_freq = cfg.target_network_frequency;
        if self.updates.is_multiple_of(freq) {
            let reps = if algo == Algo::Sac { freq } else { 1 };
            for _ in 0..reps {
                self.actor_update(&mut rng);
            }
            if algo != Algo::Sac {
                self.actor.soft_update(tau);
                self.critic.soft_update(tau);
            }
        }
        if algo == Algo::Sac && self.updates.is_multiple_of(target_freq) {
            self.critic.soft_update(tau);
        }
        self.updates += 1;
    }

    /// Actor step on the current minibatch: DDPG/TD3 maximise Q1(s, mu(s)); SAC
    /// minimises alpha log pi(a|s) - min(Q1, Q2)(s, a) with a reparameterised sample,
    /// then (autotune) the temperature.
    fn actor_update(&mut self, rng: &mut Rng) {
        let loss = self.actor_gradient(rng);
        let cfg = &self.cfg;
        self.actor.step(cfg.policy_lr, NO_CLIP);
        self.c.chunk.actor_loss += loss;
        self.c.chunk.actor_updates += 1;
        if cfg.algo == Algo::Sac && cfg.autotune {
            // alpha_loss = mean(-alpha (log pi + target_entropy)); d / d log_alpha.
            let alpha = self.log_alpha.exp();
            let a = self.nets.act_dim;
            let target_entropy = -(a as f32);
            let inv = 1.0 / cfg.batch_size as f32;
            let mean_lp: f32 = self.s.sample.logp.iter().sum::<f32>() * inv;
            let g = [-alpha * (mean_lp + target_entropy)];
            let mut p = [self.log_alpha];
            self.alpha_adam.step(&mut p, &g, cfg.q_lr);
            self.log_alpha = p[0];
        }
    }

    /// The actor loss on the current minibatch; leaves its gradient in the actor
    /// backend's accumulator. The critics' gradient with respect to the action comes
    /// from [`NetBackend::input_grad`]; the rest of the chain rule (squashing, SAC's
    /// log-probability) runs here.
    fn actor_gradient(&mut self, rng: &mut Rng) -> f64 {
        let cfg = &self.cfg;
        let nets = &self.nets;
        let s = &mut self.s;
        let obs = &self.batch.obs;
        let (bsz, d, a) = (cfg.batch_size, nets.obs_dim, nets.act_dim);
        let inv = 1.0 / bsz as f32;
        let alpha = self.log_alpha.exp();
        let width = nets.actor.output_dim();
        {
            let raw = self.actor.forward_train(0, obs, bsz);
            s.actions.resize(bsz * a, 0.0);
            match nets.algo {
                Algo::Sac => {
                    s.sample.draw(nets, raw, bsz, rng);
                    s.actions.copy_from_slice(&s.sample.action);
                }
                _ => {
                    // Keep tanh(raw) in dout for the backward pass.
                    s.dout.resize(bsz * a, 0.0);
                    for b in 0..bsz {
                        for j in 0..a {
                            let y = crate::nn::tanh(raw[b * a + j]);
                            s.dout[b * a + j] = y;
                            s.actions[b * a + j] = y * nets.scale[j] + nets.bias[j];
                        }
                    }
                }
            }
        }
        concat(obs, d, &s.actions, a, bsz, &mut s.x);
        let w = d + a;
        s.dq1.resize(bsz, 0.0);
        s.dq2.resize(bsz, 0.0);
        let mut loss = 0.0f64;
        if nets.algo == Algo::Sac {
            // Both critics in one pass each way.
            s.q1v.resize(bsz, 0.0);
            s.q2v.resize(bsz, 0.0);
            self.critic.forward_into(
                Weights::Train,
                &[0, 1],
                &s.x,
                bsz,
                &mut [&mut s.q1v, &mut s.q2v],
            );
            // The gradient of min goes to the smaller critic (ties: Q1, as torch.min).
            for b in 0..bsz {
                let (q1, q2) = (s.q1v[b], s.q2v[b]);
                let first = q1 <= q2;
                s.dq1[b] = if first { -inv } else { 0.0 };
                s.dq2[b] = if first { 0.0 } else { -inv };
                loss += f64::from((alpha * s.sample.logp[b] - q1.min(q2)) * inv);
            }
            // d (Q1 + Q2) / d [obs | action]: the gradient reaches the action through
            // whichever critic was the smaller.
            s.dx1.resize(bsz * w, 0.0);
            self.critic
                .input_grad_sum(&[(0, &s.dq1), (1, &s.dq2)], &mut s.dx1);
            // Chain rule through a = tanh(mean + std eps) scale + bias and log pi.
            let sm = &s.sample;
            s.dout.resize(bsz * width, 0.0);
            let span = 0.5 * (LOG_STD_MAX - LOG_STD_MIN);
            for b in 0..bsz {
                for j in 0..a {
                    let k = b * a + j;
                    let (y, sc) = (sm.y[k], nets.scale[j]);
                    let d_act = s.dx1[b * w + d + j];
                    let dy = d_act * sc + alpha * inv * 2.0 * y * sc / (sc * (1.0 - y * y) + 1e-6);
                    let dxt = dy * (1.0 - y * y);
                    let dlogstd = dxt * sm.std[k] * sm.eps[k] - alpha * inv;
                    s.dout[b * width + j] = dxt;
                    s.dout[b * width + a + j] = dlogstd * span * (1.0 - sm.t[k] * sm.t[k]);
                }
            }
        } else {
            s.q1v.clear();
            s.q1v
                .extend_from_slice(self.critic.forward_train(0, &s.x, bsz));
            for b in 0..bsz {
                s.dq1[b] = -inv;
                loss -= f64::from(s.q1v[b] * inv);
            }
            s.dx1.clear();
            s.dx1.extend_from_slice(self.critic.input_grad(0, &s.dq1));
            for b in 0..bsz {
                for j in 0..a {
                    let y = s.dout[b * a + j];
                    s.dout[b * a + j] = s.dx1[b * w + d + j] * nets.scale[j] * (1.0 - y * y);
                }
            }
        }
        self.actor.backward(0, &s.dout[..bsz * width]);
        loss
    }

    /// The checkpoint state and its tensors (name, values). The replay buffer's rows
    /// are borrowed; the networks' are copied from their backend.
    pub fn state(&self) -> (OffPolicyState, Vec<NamedTensor<'_>>) {
        let mut tensors = Vec::new();
        let actor_adam = NetTensors::push(&*self.actor, ACTOR_TENSORS, &mut tensors);
        let critic_adam = NetTensors::push(&*self.critic, CRITIC_TENSORS, &mut tensors);
        tensors.extend([
            ("alpha_adam_m", Cow::Borrowed(&self.alpha_adam.m[..])),
            ("alpha_adam_v", Cow::Borrowed(&self.alpha_adam.v[..])),
        ]);
        let st = OffPolicyState {
            progress: self.c.progress(self.cfg.checkpoint_buffer, &mut tensors),
            updates: self.updates,
            update_debt: self.update_debt,
            log_alpha: self.log_alpha,
            actor_adam,
            critic_adam,
            alpha_adam: self.alpha_adam.clone(),
        };
        (st, tensors)
    }

    /// Continues from a checkpoint; `get` returns a tensor by name. Everything is read
    /// and checked before anything changes.
    pub fn restore(
        &mut self,
        st: OffPolicyState,
        mut get: impl TensorSource,
    ) -> Result<(), LearnError> {
        let actor = NetTensors::take(&*self.actor, ACTOR_TENSORS, st.actor_adam, &mut get)?;
        let critic = NetTensors::take(&*self.critic, CRITIC_TENSORS, st.critic_adam, &mut get)?;
        let mut alpha_adam = st.alpha_adam;
        alpha_adam.m = crate::run::take_tensor(&mut get, "alpha_adam_m", 1)?;
        alpha_adam.v = crate::run::take_tensor(&mut get, "alpha_adam_v", 1)?;
        self.c.restore(st.progress, &mut get)?;
        actor.apply(&mut *self.actor);
        critic.apply(&mut *self.critic);
        self.alpha_adam = alpha_adam;
        self.updates = st.updates;
        self.update_debt = st.update_debt;
        self.log_alpha = st.log_alpha;
        Ok(())
    }

    /// Greedy evaluation on `episodes` fresh episodes seeded by `seed`.
    pub fn evaluate(&self, episodes: usize, seed: u64) -> crate::eval::Episodes {
        evaluate(
            &self.nets(),
            &self.cfg.env,
            &self.cfg.env_args,
            episodes,
            seed,
        )
    }
}
