//! The collection side that every replay-buffer learner (DDPG, TD3, SAC, DQN) shares:
//! the envs, the replay buffer, the step counters, each env's running episode and the
//! sums of the current logging chunk, and the part of a checkpoint that holds them
//! ([`Progress`]). The learners add their networks, optimisers and update rules.

use rlrig_env::{ActionBuf, EnvError, Purpose, Rng, VecEnvDyn, VecSnapshot};
use serde::{Deserialize, Serialize};

use std::borrow::Cow;
use std::time::Instant;

use crate::LearnError;
use crate::buffer::ReplayBuffer;
use crate::run::TensorSource;
use crate::trace::StageTimes;

/// One checkpoint tensor: its name and values (borrowed where the run holds them).
pub type NamedTensor<'a> = (&'static str, Cow<'a, [f32]>);

/// A checkpoint's tensors as a map a restore's [`crate::run::TensorSource`] can take
/// them from (`|n| map.remove(n)`), as the resume tests do.
#[cfg(test)]
pub(crate) fn owned_tensors(
    tensors: Vec<NamedTensor<'_>>,
) -> std::collections::HashMap<String, Vec<f32>> {
    tensors
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.into_owned()))
        .collect()
}

/// Metrics of one logging chunk (`log_every` env steps).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ChunkStats {
    pub global_step: u64,
    pub episodes: u64,
    /// Mean undiscounted return of the episodes that ended in this chunk (NaN if none).
    pub episode_return: f64,
    pub episode_length: f64,
    /// Gradient updates so far.
    pub updates: u64,
    /// Mean critic loss (sum over twin critics) of this chunk's updates.
    pub qf_loss: f64,
    /// Mean actor loss (NaN where no actor was updated, as in DQN).
    pub actor_loss: f64,
    /// Mean Q(s, a) of the sampled transitions.
    pub q_value: f64,
    /// SAC's temperature, DQN's exploration epsilon, NaN otherwise.
    pub alpha: f64,
}

/// Sums over the current logging chunk, from which its metrics row is made. A run
/// stopped part way through a chunk keeps them in its checkpoint, so the row a resumed
/// run writes at the chunk's end is the uninterrupted run's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkSums {
    pub q_loss: f64,
    pub q_value: f64,
    pub q_updates: u64,
    pub actor_loss: f64,
    pub actor_updates: u64,
    pub episode_return: f64,
    pub episode_length: f64,
    pub episodes: u64,
}

impl ChunkSums {
    /// The chunk's metrics: the means of its sums (NaN where there was nothing to
    /// average), with the run's position, update count and `alpha` column.
    pub fn stats(&self, global_step: u64, updates: u64, alpha: f64) -> ChunkStats {
        let mean = |s: f64, n: u64| if n == 0 { f64::NAN } else { s / n as f64 };
        ChunkStats {
            global_step,
            episodes: self.episodes,
            episode_return: mean(self.episode_return, self.episodes),
            episode_length: mean(self.episode_length, self.episodes),
            updates,
            qf_loss: mean(self.q_loss, self.q_updates),
            actor_loss: mean(self.actor_loss, self.actor_updates),
            q_value: mean(self.q_value, self.q_updates),
            alpha,
        }
    }
}

/// The collection state a replay learner's checkpoint holds (flattened into its
/// state, so the checkpoint JSON keeps one level of keys).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Progress {
    pub global_step: u64,
    /// Collection steps taken (each steps every env once).
    pub steps: u64,
    pub ep_return: Vec<f64>,
    pub ep_length: Vec<u64>,
    pub buffer_pos: usize,
    pub buffer_len: usize,
    /// Whether the buffer's rows are in the checkpoint.
    pub buffer_saved: bool,
    pub envs: VecSnapshot,
    /// The sums of a chunk stopped part way (zero at a chunk's end; absent from
    /// checkpoints written before runs could stop mid-chunk).
    #[serde(default)]
    pub chunk: ChunkSums,
}

/// What a replay learner collects with: `num_envs` envs stepped together (autoreset on
/// the same step, so each transition's next observation is the episode's final one),
/// and the buffer their transitions go to.
pub struct Collector {
    pub env: Box<dyn VecEnvDyn>,
    pub buffer: ReplayBuffer,
    /// Env steps so far (`steps` x `num_envs`).
    pub global_step: u64,
    /// Collection steps so far.
    pub steps: u64,
    ep_return: Vec<f64>,
    ep_length: Vec<u64>,
    /// The current logging chunk's sums (the learner adds its losses).
    pub chunk: ChunkSums,
    /// One next observation as float32, for envs whose observations are bytes.
    next_row: Vec<f32>,
}

impl Collector {
    /// Collects from `num_envs` training envs `env` (see [`crate::training_envs`]) into a
    /// buffer of `capacity` transitions (an action is its space's flat values: one for a
    /// discrete action).
    pub fn open(
        env: &str,
        args: &crate::EnvArgs,
        num_envs: usize,
        seed: u64,
        threads: usize,
        capacity: usize,
    ) -> Result<Collector, LearnError> {
        let env = crate::training_envs(env, args, num_envs, seed, threads)?;
        let (spec, n) = (env.spec(), env.num_envs());
        let (obs_dim, act_dim) = (spec.obs_dim, spec.action_space.flat_dim());
        Ok(Collector {
            env,
            buffer: ReplayBuffer::new(capacity, obs_dim, act_dim),
            global_step: 0,
            steps: 0,
            ep_return: vec![0.0; n],
            ep_length: vec![0; n],
            chunk: ChunkSums::default(),
            next_row: Vec::new(),
        })
    }

    /// The randomness of the behaviour policy at this collection step: the stream
    /// `(seed, Policy, steps)`.
    pub fn policy_rng(&self, seed: u64) -> Rng {
        Rng::stream(seed, Purpose::Policy, self.steps)
    }

    /// One collection step with `actions`, chosen since `t0` in the observations `obs`:
    /// steps the envs and records the step (where an episode ended, with its final
    /// observation as the next one; a discrete action stored as one float), then adds
    /// the time since `t0` to `times.inference` and the env step's to `times.env`.
    /// Where the envs refuse the actions, their error, and nothing recorded.
    pub fn step(
        &mut self,
        t0: Instant,
        actions: ActionBuf<'_>,
        obs: &[f32],
        times: &mut StageTimes,
    ) -> Result<(), EnvError> {
        let t1 = Instant::now();
        self.env.step(actions)?;
        let t2 = Instant::now();
        self.record(obs, actions);
        times.inference += (t1 - t0).as_secs_f64();
        times.env += (t2 - t1).as_secs_f64();
        Ok(())
    }

    /// Stores the step the envs just took in the buffer, adds the rewards to the
    /// running episodes and the episodes that ended to the chunk, and counts the step.
    /// `obs` is the observation the actions were taken in.
    fn record(&mut self, obs: &[f32], actions: ActionBuf<'_>) {
        let n = self.ep_return.len();
        let d = obs.len() / n;
        let a = actions.len() / n;
        let final_obs = self.env.final_obs().expect("SameStep executor");
        let env = &*self.env;
        let (obs_next, rewards, term, trunc) =
            (env.obs(), env.rewards(), env.terminated(), env.truncated());
        let mut index = [0.0f32];
        for k in 0..n {
            let ended = term[k] || trunc[k];
            let next = if ended { final_obs } else { obs_next };
            let action: &[f32] = match actions {
                ActionBuf::Discrete(i) => {
                    index[0] = i[k] as f32;
                    &index
                }
                ActionBuf::Continuous(x) => &x[k * a..(k + 1) * a],
            };
            self.buffer.push(
                &obs[k * d..(k + 1) * d],
                action,
                rewards[k] as f32,
                next.slice(k * d, d).f32_in(&mut self.next_row),
                term[k],
            );
            self.ep_return[k] += rewards[k];
            self.ep_length[k] += 1;
            if ended {
                self.chunk.episode_return += self.ep_return[k];
                self.chunk.episode_length += self.ep_length[k] as f64;
                self.chunk.episodes += 1;
                self.ep_return[k] = 0.0;
                self.ep_length[k] = 0;
            }
        }
        self.steps += 1;
        self.global_step += n as u64;
    }

    /// Whether the buffer holds enough rows for a minibatch of `batch_size`.
    pub fn can_sample(&self, batch_size: usize) -> bool {
        self.buffer.len() >= batch_size.min(self.buffer.capacity())
    }

    /// The env step at which the current logging chunk of `every` steps ends (`total`
    /// at the latest).
    pub fn chunk_end(&self, every: u64, total: u64) -> u64 {
        ((self.global_step / every + 1) * every).min(total)
    }

    /// Ends the chunk: its metrics, and fresh sums for the next one.
    pub fn take_chunk(&mut self, updates: u64, alpha: f64) -> ChunkStats {
        std::mem::take(&mut self.chunk).stats(self.global_step, updates, alpha)
    }

    /// The checkpoint's collection state; when `save_buffer`, the buffer's rows are
    /// added to the checkpoint's `tensors` (borrowed).
    pub fn progress<'a>(
        &'a self,
        save_buffer: bool,
        tensors: &mut Vec<NamedTensor<'a>>,
    ) -> Progress {
        let parts = self.buffer.parts();
        if save_buffer {
            tensors.extend(parts.fields.iter().map(|&(n, v)| (n, Cow::Borrowed(v))));
        }
        Progress {
            global_step: self.global_step,
            steps: self.steps,
            ep_return: self.ep_return.clone(),
            ep_length: self.ep_length.clone(),
            buffer_pos: parts.pos,
            buffer_len: parts.len,
            buffer_saved: save_buffer,
            envs: self.env.snapshot(),
            chunk: self.chunk,
        }
    }

    /// Continues from `p`; `get` returns a checkpoint tensor by name (the buffer's
    /// rows). The counters are checked first; a failure leaves the counters as they
    /// were.
    pub fn restore(&mut self, p: Progress, get: impl TensorSource) -> Result<(), LearnError> {
        let n = self.ep_return.len();
        if p.ep_return.len() != n || p.ep_length.len() != n {
            return Err(LearnError::Mismatch(
                "per-env counters do not match num_envs".into(),
            ));
        }
        if p.buffer_saved {
            self.buffer.restore(p.buffer_pos, p.buffer_len, get)?;
        }
        self.env.restore(&p.envs)?;
        self.global_step = p.global_step;
        self.steps = p.steps;
        self.ep_return = p.ep_return;
        self.ep_length = p.ep_length;
        self.chunk = p.chunk;
        Ok(())
    }
}

/// The checkpoint part of a network trained against a target copy (DQN's Q-network,
/// DDPG/TD3/SAC's actor and critics): its parameters, the target's and Adam's two
/// moments, as the tensors `names` (`[params, target, adam_m, adam_v]`). Adam's other
/// fields travel in the learner's state.
pub(crate) struct NetTensors {
    params: Vec<f32>,
    target: Vec<f32>,
    adam: crate::optim::Adam,
}

impl NetTensors {
    /// Appends `net`'s tensors under `names`; returns its optimiser state.
    pub(crate) fn push(
        net: &dyn crate::backend::NetBackend,
        names: [&'static str; 4],
        tensors: &mut Vec<NamedTensor<'_>>,
    ) -> crate::optim::Adam {
        let adam = net.optimizer();
        tensors.extend([
            (names[0], Cow::Owned(net.params())),
            (names[1], Cow::Owned(net.target_params())),
            (names[2], Cow::Owned(adam.m.clone())),
            (names[3], Cow::Owned(adam.v.clone())),
        ]);
        adam
    }

    /// Reads `net`'s tensors back (sized as `net`'s, a mismatch named) into `adam`,
    /// changing nothing yet.
    pub(crate) fn take(
        net: &dyn crate::backend::NetBackend,
        names: [&'static str; 4],
        mut adam: crate::optim::Adam,
        get: &mut impl TensorSource,
    ) -> Result<NetTensors, LearnError> {
        let (n, nt) = (net.params().len(), net.target_params().len());
        let params = crate::run::take_tensor(get, names[0], n)?;
        let target = crate::run::take_tensor(get, names[1], nt)?;
        adam.m = crate::run::take_tensor(get, names[2], n)?;
        adam.v = crate::run::take_tensor(get, names[3], n)?;
        Ok(NetTensors {
            params,
            target,
            adam,
        })
    }

    /// Puts the tensors into `net` (a network without a target keeps none).
    pub(crate) fn apply(self, net: &mut dyn crate::backend::NetBackend) {
        net.set_params(&self.params);
        if !self.target.is_empty() {
            net.set_target_params(&self.target);
        }
        net.set_optimizer(self.adam);
    }
}
