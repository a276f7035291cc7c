//! The asynchronous executor, in EnvPool's style: `send` actions for some envs,
//! `recv` the first `batch_size` envs to finish. For envs whose step time varies, the
//! learner never waits for the slowest one.
//!
//! Not bit-reproducible as a whole: which envs make up a batch depends on thread
//! timing. Each env's own trajectory is reproducible (it equals the synchronous
//! executor's for the same actions), because its randomness is its own stream.

use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use crate::env::{Action, ActionBuf, Env, ObsBuf, ObsElem};
use crate::error::EnvError;
use crate::rng::Rng;
use crate::space::Space;
use crate::vector::{AutoReset, VecConfig, check_actions, finish_env, typed_actions};

struct Slot<E: Env> {
    state: E::State,
    rng: Rng,
    elapsed: u32,
    needs_reset: bool,
    obs: Vec<E::Obs>,
    final_obs: Vec<E::Obs>,
    reward: f64,
    terminated: bool,
    truncated: bool,
}

struct Shared<E: Env> {
    params: E::Params,
    max_steps: u32,
    autoreset: AutoReset,
    slots: Vec<Mutex<Slot<E>>>,
}

impl<E: Env> Shared<E> {
    fn slot(&self, i: usize) -> MutexGuard<'_, Slot<E>> {
        // A poisoned slot means a worker panicked mid-step: a bug, not user input.
        // The slot's data is still a valid state, so keep going with it.
        self.slots[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run_chunk(&self, task: &Task<E::Action>) -> Done {
        let mut done = Done {
            len: task.len,
            envs: [0; CHUNK],
        };
        for (k, job) in task.jobs[..task.len as usize].iter().enumerate() {
            done.envs[k] = job.env;
            self.run(job.env as usize, job.action);
        }
        done
    }

    fn run(&self, i: usize, action: Option<E::Action>) {
        let p = &self.params;
        match action {
            None => {
                let mut g = self.slot(i);
                let s = &mut *g;
                E::reset_in_place(p, &mut s.state, &mut s.rng);
                s.elapsed = 0;
                s.needs_reset = false;
                s.reward = 0.0;
                s.terminated = false;
                s.truncated = false;
                E::observe(p, &s.state, &mut s.obs);
            }
            Some(a) => {
                let mut g = self.slot(i);
                let s = &mut *g;
                if !s.needs_reset {
                    let t = E::step(p, &mut s.state, &a, &mut s.rng);
                    s.reward = t.reward;
                    s.terminated = t.terminated;
                }
                finish_env::<E>(
                    p,
                    self.max_steps,
                    self.autoreset,
                    &mut s.state,
                    &mut s.rng,
                    &mut s.elapsed,
                    &mut s.needs_reset,
                    &mut s.reward,
                    &mut s.terminated,
                    &mut s.truncated,
                    &mut s.obs,
                    &mut s.final_obs,
                );
            }
        }
    }
}

/// Envs per task: one channel message carries up to this many envs, so the
/// per-message cost (about 100 ns) is shared; workers still finish chunks in any order.
const CHUNK: usize = 16;

/// One env's work: a reset (`None`) or a step with an action.
#[derive(Clone, Copy)]
struct Job<A> {
    env: u32,
    action: Option<A>,
}

struct Task<A> {
    len: u8,
    jobs: [Job<A>; CHUNK],
}

struct Done {
    len: u8,
    envs: [u32; CHUNK],
}

/// One batch returned by [`AsyncVecEnv::recv`]: row `j` belongs to env `env_ids[j]`.
#[derive(Debug)]
pub struct AsyncBatch<'a> {
    pub env_ids: &'a [usize],
    pub obs: ObsBuf<'a>,
    pub rewards: &'a [f64],
    pub terminated: &'a [bool],
    pub truncated: &'a [bool],
    /// SameStep mode only: the observation each ended episode finished in.
    pub final_obs: Option<ObsBuf<'a>>,
}

pub struct AsyncVecEnv<E: Env> {
    shared: Arc<Shared<E>>,
    cfg: VecConfig,
    batch_size: usize,
    action_space: Space,
    tasks: Option<Sender<Task<E::Action>>>,
    done: Receiver<Done>,
    /// Finished envs received but not yet returned by `recv`.
    pending: std::collections::VecDeque<usize>,
    workers: Vec<JoinHandle<()>>,
    in_flight: Vec<bool>,
    n_in_flight: usize,
    env_ids: Vec<usize>,
    obs: Vec<E::Obs>,
    final_obs: Vec<E::Obs>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
}

impl<E: Env> AsyncVecEnv<E> {
    pub fn new(cfg: VecConfig, batch_size: usize) -> Result<Self, EnvError> {
        Self::with_params(E::Params::default(), cfg, batch_size)
    }

    pub fn with_params(
        params: E::Params,
        cfg: VecConfig,
        batch_size: usize,
    ) -> Result<Self, EnvError> {
        cfg.validate()?;
        let params = cfg.params::<E>(params)?;
        if batch_size == 0 || batch_size > cfg.num_envs {
            return Err(EnvError::Config(format!(
                "batch_size must be in 1..={} (num_envs), got {batch_size}",
                cfg.num_envs
            )));
        }
        let d = E::OBS_DIM;
        let slots = cfg
            .rngs()
            .into_iter()
            .map(|rng| {
                Mutex::new(Slot::<E> {
                    state: E::State::default(),
                    rng,
                    elapsed: 0,
                    needs_reset: false,
                    obs: vec![E::Obs::default(); d],
                    final_obs: vec![E::Obs::default(); d],
                    reward: 0.0,
                    terminated: false,
                    truncated: false,
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            max_steps: cfg.max_steps::<E>(&params),
            autoreset: cfg.autoreset,
            params,
            slots,
        });
        let (task_tx, task_rx) = crossbeam_channel::unbounded::<Task<E::Action>>();
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<Done>();
        let mut workers = Vec::with_capacity(cfg.threads);
        for w in 0..cfg.threads {
            let (rx, tx, sh) = (task_rx.clone(), done_tx.clone(), Arc::clone(&shared));
            let handle = std::thread::Builder::new()
                .name(format!("rlrig-async-{w}"))
                .spawn(move || {
                    while let Ok(task) = rx.recv() {
                        if tx.send(sh.run_chunk(&task)).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| EnvError::Config(format!("cannot start worker thread: {e}")))?;
            workers.push(handle);
        }
        let n = cfg.num_envs;
        Ok(AsyncVecEnv {
            action_space: E::action_space(&shared.params),
            shared,
            batch_size,
            tasks: Some(task_tx),
            done: done_rx,
            pending: std::collections::VecDeque::with_capacity(n),
            workers,
            in_flight: vec![false; n],
            n_in_flight: 0,
            env_ids: vec![0; batch_size],
            obs: vec![E::Obs::default(); batch_size * d],
            final_obs: vec![E::Obs::default(); batch_size * d],
            rewards: vec![0.0; batch_size],
            terminated: vec![false; batch_size],
            truncated: vec![false; batch_size],
            cfg,
        })
    }

    /// Sends `jobs` in chunks small enough that every worker gets some work.
    fn dispatch(&self, jobs: impl ExactSizeIterator<Item = Job<E::Action>>) {
        let tx = self.tasks.as_ref().expect("task channel lives until drop");
        let per = jobs.len().div_ceil(self.workers.len() * 4).clamp(1, CHUNK);
        let empty = Job {
            env: 0,
            action: None,
        };
        let mut task = Task {
            len: 0,
            jobs: [empty; CHUNK],
        };
        for job in jobs {
            task.jobs[task.len as usize] = job;
            task.len += 1;
            if task.len as usize == per {
                tx.send(task).expect("workers outlive the executor");
                task = Task {
                    len: 0,
                    jobs: [empty; CHUNK],
                };
            }
        }
        if task.len > 0 {
            tx.send(task).expect("workers outlive the executor");
        }
    }

    /// Resets every env; their first observations arrive through `recv`.
    pub fn async_reset(&mut self) -> Result<(), EnvError> {
        if let Some(index) = self.in_flight.iter().position(|&f| f) {
            return Err(EnvError::InFlight { env: E::ID, index });
        }
        self.in_flight.fill(true);
        self.dispatch((0..self.cfg.num_envs).map(|i| Job {
            env: i as u32,
            action: None,
        }));
        self.n_in_flight = self.cfg.num_envs;
        Ok(())
    }

    /// Sends one action per env in `env_ids` (`actions` is `env_ids.len() x DIM`, flat).
    /// Validates everything first: on error nothing was sent.
    pub fn send(
        &mut self,
        actions: &[<E::Action as Action>::Elem],
        env_ids: &[usize],
    ) -> Result<(), EnvError> {
        let n = self.cfg.num_envs;
        for (position, &index) in env_ids.iter().enumerate() {
            if index >= n {
                return Err(EnvError::EnvIndex {
                    env: E::ID,
                    index,
                    num_envs: n,
                    position,
                });
            }
            if self.in_flight[index] {
                return Err(EnvError::InFlight { env: E::ID, index });
            }
        }
        let acts = check_actions::<E>(&self.action_space, actions, env_ids.len(), |j| env_ids[j])?;
        // Duplicates within one call would also put an env in flight twice.
        for &index in env_ids {
            if self.in_flight[index] {
                for &undo in env_ids {
                    self.in_flight[undo] = false;
                }
                return Err(EnvError::InFlight { env: E::ID, index });
            }
            self.in_flight[index] = true;
        }
        self.dispatch(env_ids.iter().zip(acts).map(|(&index, a)| Job {
            env: index as u32,
            action: Some(*a),
        }));
        self.n_in_flight += env_ids.len();
        Ok(())
    }

    /// Waits for the first `batch_size` envs to finish and returns their results.
    pub fn recv(&mut self) -> Result<AsyncBatch<'_>, EnvError> {
        if self.n_in_flight < self.batch_size {
            return Err(EnvError::NothingInFlight {
                env: E::ID,
                in_flight: self.n_in_flight,
                batch_size: self.batch_size,
            });
        }
        let d = E::OBS_DIM;
        // Final observations only exist in SameStep mode.
        let same_step = self.cfg.autoreset == AutoReset::SameStep;
        for j in 0..self.batch_size {
            let i = match self.pending.pop_front() {
                Some(i) => i,
                None => {
                    let d = self.done.recv().expect("workers outlive the executor");
                    self.pending
                        .extend(d.envs[..d.len as usize].iter().map(|&e| e as usize));
                    self.pending
                        .pop_front()
                        .expect("a chunk holds at least one env")
                }
            };
            let s = self.shared.slot(i);
            self.env_ids[j] = i;
            self.obs[j * d..(j + 1) * d].copy_from_slice(&s.obs);
            if same_step {
                self.final_obs[j * d..(j + 1) * d].copy_from_slice(&s.final_obs);
            }
            self.rewards[j] = s.reward;
            self.terminated[j] = s.terminated;
            self.truncated[j] = s.truncated;
            self.in_flight[i] = false;
        }
        self.n_in_flight -= self.batch_size;
        Ok(AsyncBatch {
            env_ids: &self.env_ids,
            obs: E::Obs::view(&self.obs),
            rewards: &self.rewards,
            terminated: &self.terminated,
            truncated: &self.truncated,
            final_obs: (self.cfg.autoreset == AutoReset::SameStep)
                .then(|| E::Obs::view(&self.final_obs)),
        })
    }

    pub fn num_envs(&self) -> usize {
        self.cfg.num_envs
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Env `i`'s current state (waits if a worker is stepping it).
    pub fn state(&self, i: usize) -> E::State {
        self.shared.slot(i).state.clone()
    }
}

impl<E: Env> Drop for AsyncVecEnv<E> {
    fn drop(&mut self) {
        // Closing the task channel ends the workers' loops.
        self.tasks.take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// An asynchronous executor whose env type is chosen at run time.
pub trait AsyncVecEnvDyn: Send {
    fn spec(&self) -> crate::registry::EnvSpec;
    fn num_envs(&self) -> usize;
    fn batch_size(&self) -> usize;
    fn async_reset(&mut self) -> Result<(), EnvError>;
    fn send(&mut self, actions: ActionBuf<'_>, env_ids: &[usize]) -> Result<(), EnvError>;
    fn recv(&mut self) -> Result<AsyncBatch<'_>, EnvError>;
}

impl<E: Env> AsyncVecEnvDyn for AsyncVecEnv<E> {
    fn spec(&self) -> crate::registry::EnvSpec {
        crate::registry::EnvSpec::of::<E>(&self.shared.params)
    }
    fn num_envs(&self) -> usize {
        self.cfg.num_envs
    }
    fn batch_size(&self) -> usize {
        self.batch_size
    }
    fn async_reset(&mut self) -> Result<(), EnvError> {
        AsyncVecEnv::async_reset(self)
    }
    fn send(&mut self, actions: ActionBuf<'_>, env_ids: &[usize]) -> Result<(), EnvError> {
        AsyncVecEnv::send(
            self,
            typed_actions::<E>(&self.action_space, actions)?,
            env_ids,
        )
    }
    fn recv(&mut self) -> Result<AsyncBatch<'_>, EnvError> {
        AsyncVecEnv::recv(self)
    }
}
