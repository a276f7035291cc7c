//! The synchronous executor: every env steps on every call, split across threads.

use std::sync::Arc;

use crate::env::{Action, ActionBuf, Batch, Env, ObsBuf, ObsElem};
use crate::error::EnvError;
use crate::pool::Pool;
use crate::rng::Rng;
use crate::space::Space;
use crate::vector::{
    AutoReset, VecConfig, VecSnapshot, check_actions, env_args_map, finish_env, typed_actions,
};

/// Steps `num_envs` copies of `E` together. Outputs live in contiguous buffers
/// (`obs` is `num_envs x OBS_DIM`, row-major) that each `step` overwrites in place.
pub struct SyncVecEnv<E: Env> {
    params: E::Params,
    cfg: VecConfig,
    max_steps: u32,
    action_space: Space,
    states: Vec<E::State>,
    rngs: Vec<Rng>,
    elapsed: Vec<u32>,
    needs_reset: Vec<bool>,
    active: Vec<bool>,
    obs: Vec<E::Obs>,
    final_obs: Vec<E::Obs>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    /// Envs per worker chunk: a multiple of [`Env::BATCH_LANES`] so kernels see full
    /// groups.
    chunk: usize,
    pool: Option<Arc<Pool>>,
}

/// Mutable views of one contiguous range of envs.
struct Part<'a, E: Env> {
    states: &'a mut [E::State],
    rngs: &'a mut [Rng],
    elapsed: &'a mut [u32],
    needs_reset: &'a mut [bool],
    active: &'a mut [bool],
    obs: &'a mut [E::Obs],
    final_obs: &'a mut [E::Obs],
    rewards: &'a mut [f64],
    terminated: &'a mut [bool],
    truncated: &'a mut [bool],
    actions: &'a [E::Action],
}

impl<'a, E: Env> Part<'a, E> {
    fn len(&self) -> usize {
        self.states.len()
    }

    fn split_at(self, n: usize) -> (Part<'a, E>, Part<'a, E>) {
        let d = E::OBS_DIM;
        let (s0, s1) = self.states.split_at_mut(n);
        let (r0, r1) = self.rngs.split_at_mut(n);
        let (e0, e1) = self.elapsed.split_at_mut(n);
        let (n0, n1) = self.needs_reset.split_at_mut(n);
        let (a0, a1) = self.active.split_at_mut(n);
        let (o0, o1) = self.obs.split_at_mut(n * d);
        let (f0, f1) = self.final_obs.split_at_mut(n * d);
        let (w0, w1) = self.rewards.split_at_mut(n);
        let (t0, t1) = self.terminated.split_at_mut(n);
        let (u0, u1) = self.truncated.split_at_mut(n);
        let (c0, c1) = self.actions.split_at(n);
        (
            Part {
                states: s0,
                rngs: r0,
                elapsed: e0,
                needs_reset: n0,
                active: a0,
                obs: o0,
                final_obs: f0,
                rewards: w0,
                terminated: t0,
                truncated: u0,
                actions: c0,
            },
            Part {
                states: s1,
                rngs: r1,
                elapsed: e1,
                needs_reset: n1,
                active: a1,
                obs: o1,
                final_obs: f1,
                rewards: w1,
                terminated: t1,
                truncated: u1,
                actions: c1,
            },
        )
    }

    /// Steps this range: the env's batch kernel, then per-env bookkeeping.
    fn run(&mut self, p: &E::Params, max_steps: u32, autoreset: AutoReset) {
        for (a, r) in self.active.iter_mut().zip(self.needs_reset.iter()) {
            *a = !*r;
        }
        E::step_batch(
            p,
            Batch {
                states: &mut *self.states,
                actions: self.actions,
                rngs: &mut *self.rngs,
                active: &*self.active,
                rewards: &mut *self.rewards,
                terminated: &mut *self.terminated,
            },
        );
        let d = E::OBS_DIM;
        // `finish_env` for every env, in two passes so the common case (an env that
        // stepped and goes on) runs without branches: first every env is treated as
        // going on, then the few that were pending a reset or just ended are fixed up.
        for e in self.elapsed.iter_mut() {
            *e = e.wrapping_add(1);
        }
        for (t, &e) in self.truncated.iter_mut().zip(self.elapsed.iter()) {
            *t = e >= max_steps;
        }
        for (s, o) in self.states.iter().zip(self.obs.chunks_exact_mut(d)) {
            E::observe(p, s, o);
        }
        for i in 0..self.states.len() {
            if !(self.needs_reset[i] || self.terminated[i] || self.truncated[i]) {
                continue;
            }
            // Undo the first pass's tick so `finish_env` sees the env as it was.
            self.elapsed[i] = self.elapsed[i].wrapping_sub(1);
            finish_env::<E>(
                p,
                max_steps,
                autoreset,
                &mut self.states[i],
                &mut self.rngs[i],
                &mut self.elapsed[i],
                &mut self.needs_reset[i],
                &mut self.rewards[i],
                &mut self.terminated[i],
                &mut self.truncated[i],
                &mut self.obs[i * d..(i + 1) * d],
                &mut self.final_obs[i * d..(i + 1) * d],
            );
        }
    }
}

impl<E: Env> SyncVecEnv<E> {
    /// Builds and resets `cfg.num_envs` envs with default parameters.
    pub fn new(cfg: VecConfig) -> Result<Self, EnvError> {
        Self::with_params(E::Params::default(), cfg)
    }

    /// Builds and resets the envs with `params`, over which `cfg.env_args` are applied.
    pub fn with_params(params: E::Params, cfg: VecConfig) -> Result<Self, EnvError> {
        cfg.validate()?;
        let params = cfg.params::<E>(params)?;
        let n = cfg.num_envs;
        let d = E::OBS_DIM;
        let by_work = (n as u64 * E::STEP_COST_NS)
            .checked_div(cfg.min_thread_work_ns)
            .map_or(usize::MAX, |t| t as usize);
        // Whole groups of the env's vectorised kernel per thread; envs stepped one at a
        // time (Box2D) split per env, so 16 walkers can use 16 threads.
        let lanes = E::BATCH_LANES.max(1);
        let threads = cfg.threads.min(n.div_ceil(lanes)).min(by_work).max(1);
        let chunk = n.div_ceil(threads).div_ceil(lanes) * lanes;
        // The process's shared pool (the learner uses the same workers between steps).
        let pool = Pool::shared_for(threads).map_err(|e| EnvError::Config(e.to_string()))?;
        let mut env = SyncVecEnv {
            max_steps: cfg.max_steps::<E>(&params),
            action_space: E::action_space(&params),
            states: vec![E::State::default(); n],
            rngs: cfg.rngs(),
            elapsed: vec![0; n],
            needs_reset: vec![false; n],
            active: vec![false; n],
            obs: vec![E::Obs::default(); n * d],
            final_obs: vec![E::Obs::default(); n * d],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            chunk,
            pool,
            params,
            cfg,
        };
        env.reset();
        Ok(env)
    }

    /// Resets every env (continuing each env's random stream) and writes `obs`.
    pub fn reset(&mut self) {
        let d = E::OBS_DIM;
        for i in 0..self.cfg.num_envs {
            self.states[i] = E::reset(&self.params, &mut self.rngs[i]);
            E::observe(
                &self.params,
                &self.states[i],
                &mut self.obs[i * d..(i + 1) * d],
            );
        }
        self.elapsed.fill(0);
        self.needs_reset.fill(false);
        self.rewards.fill(0.0);
        self.terminated.fill(false);
        self.truncated.fill(false);
    }

    /// Restarts every env's random stream from `seed`, then resets (Gymnasium's `reset(seed=...)`).
    pub fn reseed(&mut self, seed: u64) {
        self.cfg.seed = seed;
        self.rngs = self.cfg.rngs();
        self.reset();
    }

    /// Resets env `i` alone (Gymnasium's `reset(options={"reset_mask": m})`), first
    /// replacing its random stream with `rng` when one is given (a per-env seed).
    pub fn reset_env(&mut self, i: usize, rng: Option<Rng>) {
        if let Some(rng) = rng {
            self.rngs[i] = rng;
        }
        let d = E::OBS_DIM;
        self.states[i] = E::reset(&self.params, &mut self.rngs[i]);
        E::observe(
            &self.params,
            &self.states[i],
            &mut self.obs[i * d..(i + 1) * d],
        );
        self.elapsed[i] = 0;
        self.needs_reset[i] = false;
        self.rewards[i] = 0.0;
        self.terminated[i] = false;
        self.truncated[i] = false;
    }

    /// Puts env `i` into `state` at the start of an episode (time limit counts from 0).
    pub fn set_state(&mut self, i: usize, state: E::State) {
        let d = E::OBS_DIM;
        E::observe(&self.params, &state, &mut self.obs[i * d..(i + 1) * d]);
        self.states[i] = state;
        self.elapsed[i] = 0;
        self.needs_reset[i] = false;
    }

    /// Steps every env with `actions` (`num_envs x DIM`, flat). On error nothing has moved.
    pub fn step(&mut self, actions: &[<E::Action as Action>::Elem]) -> Result<(), EnvError> {
        let actions = check_actions::<E>(&self.action_space, actions, self.cfg.num_envs, |i| i)?;
        let mut part = Part::<E> {
            states: &mut self.states,
            rngs: &mut self.rngs,
            elapsed: &mut self.elapsed,
            needs_reset: &mut self.needs_reset,
            active: &mut self.active,
            obs: &mut self.obs,
            final_obs: &mut self.final_obs,
            rewards: &mut self.rewards,
            terminated: &mut self.terminated,
            truncated: &mut self.truncated,
            actions,
        };
        let (p, max_steps, autoreset, chunk) =
            (&self.params, self.max_steps, self.cfg.autoreset, self.chunk);
        match &self.pool {
            None => part.run(p, max_steps, autoreset),
            Some(pool) => {
                let mut parts = Vec::with_capacity(self.cfg.num_envs.div_ceil(chunk));
                let mut rest = part;
                while rest.len() > chunk {
                    let (head, tail) = rest.split_at(chunk);
                    parts.push(head);
                    rest = tail;
                }
                parts.push(rest);
                // A few entries (one per thread) per batch step, not per env.
                pool.for_each_mut(&mut parts, |_, part| part.run(p, max_steps, autoreset));
            }
        }
        Ok(())
    }

    /// The executor's complete state, for checkpoints.
    pub fn snapshot(&self) -> VecSnapshot {
        VecSnapshot {
            env: E::ID.to_string(),
            env_args: self.cfg.env_args.clone(),
            seed: self.cfg.seed,
            states: self.states.iter().map(E::snapshot).collect(),
            rng_positions: self.rngs.iter().map(Rng::position).collect(),
            elapsed: self.elapsed.clone(),
            needs_reset: self.needs_reset.clone(),
        }
    }

    /// Continues from `snap` (taken from an executor of the same env and size).
    /// On error nothing changed.
    pub fn restore(&mut self, snap: &VecSnapshot) -> Result<(), EnvError> {
        let n = self.cfg.num_envs;
        let bad = |why: String| EnvError::BadState { env: E::ID, why };
        if snap.env != E::ID {
            return Err(bad(format!("snapshot is of env '{}'", snap.env)));
        }
        let (theirs, ours) = (
            env_args_map(&snap.env_args),
            env_args_map(&self.cfg.env_args),
        );
        if theirs != ours {
            return Err(bad(format!(
                "snapshot was taken with env args {theirs:?}, this executor has {ours:?}"
            )));
        }
        if [
            snap.states.len(),
            snap.rng_positions.len(),
            snap.elapsed.len(),
            snap.needs_reset.len(),
        ] != [n; 4]
        {
            return Err(bad(format!(
                "snapshot holds {} envs, this executor {n}",
                snap.states.len()
            )));
        }
        let states = snap
            .states
            .iter()
            .enumerate()
            .map(|(k, v)| E::restore(&self.params, v).map_err(|e| bad(format!("env {k}: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        self.cfg.seed = snap.seed;
        self.states = states;
        self.rngs = (0..n)
            .map(|k| {
                Rng::at(
                    snap.seed,
                    crate::rng::Purpose::Env,
                    self.cfg.first_env + k as u64,
                    snap.rng_positions[k],
                )
            })
            .collect();
        self.elapsed.clone_from(&snap.elapsed);
        self.needs_reset.clone_from(&snap.needs_reset);
        let d = E::OBS_DIM;
        for k in 0..n {
            E::observe(
                &self.params,
                &self.states[k],
                &mut self.obs[k * d..(k + 1) * d],
            );
        }
        Ok(())
    }

    pub fn num_envs(&self) -> usize {
        self.cfg.num_envs
    }

    /// Threads actually used per step (see `VecConfig::min_thread_work_ns`).
    pub fn threads_used(&self) -> usize {
        self.pool
            .as_ref()
            .map_or(1, |_| self.cfg.num_envs.div_ceil(self.chunk))
    }

    pub fn params(&self) -> &E::Params {
        &self.params
    }

    pub fn config(&self) -> &VecConfig {
        &self.cfg
    }

    /// Observations, `num_envs x OBS_DIM`, row-major.
    pub fn obs(&self) -> &[E::Obs] {
        &self.obs
    }

    pub fn rewards(&self) -> &[f64] {
        &self.rewards
    }

    pub fn terminated(&self) -> &[bool] {
        &self.terminated
    }

    pub fn truncated(&self) -> &[bool] {
        &self.truncated
    }

    /// In [`AutoReset::SameStep`] mode, the observation each env's episode ended in
    /// (rows of envs whose flags are both false are stale). `None` in NextStep mode.
    pub fn final_obs(&self) -> Option<&[E::Obs]> {
        (self.cfg.autoreset == AutoReset::SameStep).then_some(&self.final_obs[..])
    }

    /// Env `i`'s current state.
    pub fn state(&self, i: usize) -> &E::State {
        &self.states[i]
    }

    /// Steps taken in env `i`'s current episode.
    pub fn elapsed(&self, i: usize) -> u32 {
        self.elapsed[i]
    }
}

/// A synchronous executor whose env type is chosen at run time.
pub trait VecEnvDyn: Send {
    fn spec(&self) -> crate::registry::EnvSpec;
    fn num_envs(&self) -> usize;
    fn reset(&mut self);
    fn reseed(&mut self, seed: u64);
    fn step(&mut self, actions: ActionBuf<'_>) -> Result<(), EnvError>;
    /// Observations, `num_envs x obs_dim`, row-major, in the env's element type.
    fn obs(&self) -> ObsBuf<'_>;
    fn rewards(&self) -> &[f64];
    fn terminated(&self) -> &[bool];
    fn truncated(&self) -> &[bool];
    /// In [`crate::AutoReset::SameStep`] mode, the observation each env's episode
    /// ended in (see [`SyncVecEnv::final_obs`]).
    fn final_obs(&self) -> Option<ObsBuf<'_>>;
    fn snapshot(&self) -> VecSnapshot;
    fn restore(&mut self, snap: &VecSnapshot) -> Result<(), EnvError>;
    /// Brings [`VecEnvDyn::snapshot`] up to date where the envs live in several
    /// processes (a collective call that every process of the run makes before a
    /// checkpoint); nothing to do for envs that live here.
    fn sync_snapshot(&mut self) {}
    fn threads_used(&self) -> usize;
    /// Resets env `i` alone, with a fresh random stream when `rng` is given.
    fn reset_env(&mut self, i: usize, rng: Option<Rng>);
    /// Whether each env ended its episode on the last step and resets on the next
    /// ([`crate::AutoReset::NextStep`]).
    fn pending_resets(&self) -> &[bool];
    /// Env `i`'s state as Gymnasium's `env.unwrapped.state` holds it.
    fn state_vec(&self, i: usize) -> Vec<f64>;
    /// Puts env `i` into the state `v` (as [`VecEnvDyn::state_vec`] gives it) at the
    /// start of an episode. On error nothing changed.
    fn set_state_vec(&mut self, i: usize, v: &[f64]) -> Result<(), EnvError>;
    /// What a renderer needs to draw env `i` ([`Env::render_state`]).
    fn render_state(&self, i: usize) -> Vec<f64>;
}

/// [`VecEnvDyn`]'s `rewards`, `terminated` and `truncated`, read from the implementing
/// type's fields of the same names (`Vec<f64>`, `Vec<bool>`, `Vec<bool>`): every
/// executor that holds its batch's step results keeps them so.
#[macro_export]
macro_rules! step_results {
    () => {
        fn rewards(&self) -> &[f64] {
            &self.rewards
        }
        fn terminated(&self) -> &[bool] {
            &self.terminated
        }
        fn truncated(&self) -> &[bool] {
            &self.truncated
        }
    };
}

impl<E: Env> VecEnvDyn for SyncVecEnv<E> {
    fn spec(&self) -> crate::registry::EnvSpec {
        crate::registry::EnvSpec::of::<E>(&self.params)
    }
    fn num_envs(&self) -> usize {
        self.cfg.num_envs
    }
    fn reset(&mut self) {
        SyncVecEnv::reset(self)
    }
    fn reseed(&mut self, seed: u64) {
        SyncVecEnv::reseed(self, seed)
    }
    fn step(&mut self, actions: ActionBuf<'_>) -> Result<(), EnvError> {
        SyncVecEnv::step(self, typed_actions::<E>(&self.action_space, actions)?)
    }
    fn obs(&self) -> ObsBuf<'_> {
        E::Obs::view(&self.obs)
    }
    crate::step_results!();
    fn final_obs(&self) -> Option<ObsBuf<'_>> {
        SyncVecEnv::final_obs(self).map(E::Obs::view)
    }
    fn snapshot(&self) -> VecSnapshot {
        SyncVecEnv::snapshot(self)
    }
    fn restore(&mut self, snap: &VecSnapshot) -> Result<(), EnvError> {
        SyncVecEnv::restore(self, snap)
    }
    fn threads_used(&self) -> usize {
        SyncVecEnv::threads_used(self)
    }
    fn reset_env(&mut self, i: usize, rng: Option<Rng>) {
        SyncVecEnv::reset_env(self, i, rng)
    }
    fn pending_resets(&self) -> &[bool] {
        &self.needs_reset
    }
    fn state_vec(&self, i: usize) -> Vec<f64> {
        E::state_to_vec(&self.states[i])
    }
    fn set_state_vec(&mut self, i: usize, v: &[f64]) -> Result<(), EnvError> {
        let state = E::state_from_slice(&self.params, v).map_err(|why| EnvError::BadState {
            env: E::ID,
            why: format!("env {i}: {why}"),
        })?;
        self.set_state(i, state);
        Ok(())
    }
    fn render_state(&self, i: usize) -> Vec<f64> {
        E::render_state(&self.states[i])
    }
}
