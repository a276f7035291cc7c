//! Executors that step many environments per call into preallocated, contiguous buffers.
//!
//! # Auto-reset
//!
//! When an episode ends (terminated or truncated by the time limit), the env is reset
//! without a separate call. Two modes:
//!
//! - [`AutoReset::NextStep`] (default, Gymnasium 1.x vector envs): the step that ends the
//!   episode returns the final observation with its flags. On the *next* step the env
//!   ignores its action, resets, and returns the first observation of the new episode
//!   with reward 0 and both flags false.
//! - [`AutoReset::SameStep`] (Stable-Baselines3, EnvPool's default in old versions): the
//!   step that ends the episode resets the env at once; `obs` holds the new episode's
//!   first observation, `final_obs` the observation the episode ended in, and reward and
//!   flags belong to the ending step.
//!
//! # Determinism
//!
//! Env `k` draws all its randomness from the stream `(seed, Purpose::Env, k)`, and an
//! env's result depends only on its own state and action. The synchronous executor is
//! therefore bit-identical for every thread count, and each env's trajectory in the
//! asynchronous executor equals the synchronous one given the same actions; only the
//! *composition* of async batches depends on timing.

mod async_exec;
mod sync_exec;

pub use async_exec::{AsyncBatch, AsyncVecEnv, AsyncVecEnvDyn};
pub use sync_exec::{SyncVecEnv, VecEnvDyn};

use crate::env::{Action, ActionBuf, Env};
use crate::error::EnvError;
use crate::rng::{Purpose, Rng};

/// When an ended episode's env is reset; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AutoReset {
    #[default]
    NextStep,
    SameStep,
}

impl std::str::FromStr for AutoReset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "next-step" | "next_step" => Ok(AutoReset::NextStep),
            "same-step" | "same_step" => Ok(AutoReset::SameStep),
            _ => Err(format!(
                "unknown autoreset mode '{s}' (use next-step or same-step)"
            )),
        }
    }
}

/// Everything needed to continue a synchronous executor exactly where it was: each
/// env's full state, the position of its random stream, its time-limit counter and
/// whether it is due for an auto-reset. Observations are recomputed on restore.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VecSnapshot {
    pub env: String,
    /// The executor's [`VecConfig::env_args`]: restoring into an executor with other
    /// parameters is an error rather than a silent change of dynamics. Older snapshots
    /// have none.
    #[serde(default)]
    pub env_args: Vec<(String, String)>,
    pub seed: u64,
    pub states: Vec<Vec<f64>>,
    pub rng_positions: Vec<u64>,
    pub elapsed: Vec<u32>,
    pub needs_reset: Vec<bool>,
}

impl VecSnapshot {
    /// Envs `envs` of the snapshot, as a snapshot of their own (what the executor of
    /// that share of the batch restores).
    pub fn slice(&self, envs: std::ops::Range<usize>) -> VecSnapshot {
        VecSnapshot {
            env: self.env.clone(),
            env_args: self.env_args.clone(),
            seed: self.seed,
            states: self.states[envs.clone()].to_vec(),
            rng_positions: self.rng_positions[envs.clone()].to_vec(),
            elapsed: self.elapsed[envs.clone()].to_vec(),
            needs_reset: self.needs_reset[envs].to_vec(),
        }
    }
}

/// Env args as the env sees them: one value per key, the last given (order-free, for
/// comparing two lists).
pub fn env_args_map(args: &[(String, String)]) -> std::collections::BTreeMap<&str, &str> {
    args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Builder methods that each set one field: `name(value)` sets `self.name`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $name: $ty) -> Self {
                self.$name = $name;
                self
            }
        )*
    };
}

/// How to build an executor.
#[derive(Clone, Debug)]
pub struct VecConfig {
    pub num_envs: usize,
    /// Worker threads (1 = step on the calling thread).
    pub threads: usize,
    pub seed: u64,
    pub autoreset: AutoReset,
    /// The sync executor uses at most `num_envs * STEP_COST_NS / min_thread_work_ns`
    /// threads: a share of work under this is cheaper done by the caller than handed
    /// to a worker. 8 us since the pool's workers spin between jobs (a parked thread
    /// takes 5-25 us to wake on these VMs): 1,024 CartPole or MinAtar envs now step
    /// 1.8-1.9x faster on 2 threads than on 1 (they stayed on one at 30 us), 256
    /// CartPole envs stay on one. 0 uses every thread given.
    pub min_thread_work_ns: u64,
    /// A time limit for envs that have none (the MinAtar games): their episodes are
    /// truncated after this many steps. Envs with a registered limit keep theirs.
    pub episode_cap: Option<u32>,
    /// Env parameters as `(key, value)` text pairs, applied in order over the defaults
    /// (or the params given to `with_params`), as `gym.make(id, key=value)` does.
    pub env_args: Vec<(String, String)>,
    /// The index of this executor's first env in a larger batch: env `k` draws from the
    /// stream of env `first_env + k`, so the envs of a batch split over several
    /// processes (MPI ranks, each stepping its share) are the envs of the whole batch.
    pub first_env: u64,
}

impl VecConfig {
    pub fn new(num_envs: usize) -> VecConfig {
        VecConfig {
            num_envs,
            threads: 1,
            seed: 0,
            autoreset: AutoReset::NextStep,
            min_thread_work_ns: 8_000,
            episode_cap: None,
            env_args: Vec::new(),
            first_env: 0,
        }
    }

    setters! {
        threads: usize;
        seed: u64;
        autoreset: AutoReset;
        min_thread_work_ns: u64;
        env_args: Vec<(String, String)>;
        /// This executor's envs are envs `first_env..first_env + num_envs` of a larger
        /// batch ([`VecConfig::first_env`]).
        first_env: u64;
    }

    pub fn episode_cap(mut self, steps: u32) -> Self {
        self.episode_cap = Some(steps);
        self
    }

    /// The step at which an episode of `E` is truncated.
    pub(crate) fn max_steps<E: crate::Env>(&self, p: &E::Params) -> u32 {
        E::max_episode_steps(p)
            .or(self.episode_cap)
            .unwrap_or(u32::MAX)
    }

    pub fn env_arg(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env_args.push((key.into(), value.into()));
        self
    }

    /// `p` with [`VecConfig::env_args`] applied.
    pub(crate) fn params<E: crate::Env>(&self, p: E::Params) -> Result<E::Params, EnvError> {
        let p = crate::env::apply_params::<E>(p, &self.env_args)?;
        E::check(&p).map_err(|why| EnvError::Config(format!("{}: {why}", E::ID)))?;
        Ok(p)
    }

    pub(crate) fn validate(&self) -> Result<(), EnvError> {
        if self.num_envs == 0 {
            return Err(EnvError::Config("num_envs must be at least 1".into()));
        }
        if self.threads == 0 {
            return Err(EnvError::Config("threads must be at least 1".into()));
        }
        Ok(())
    }

    pub(crate) fn rngs(&self) -> Vec<Rng> {
        (0..self.num_envs as u64)
            .map(|k| Rng::stream(self.seed, Purpose::Env, self.first_env + k))
            .collect()
    }
}

/// Checks a flat action batch for `num_envs` envs and views it as actions.
pub(crate) fn check_actions<'a, E: Env>(
    space: &crate::space::Space,
    flat: &'a [<E::Action as Action>::Elem],
    num_envs: usize,
    first_index: impl Fn(usize) -> usize,
) -> Result<&'a [E::Action], EnvError> {
    let dim = <E::Action as Action>::DIM;
    if flat.len() != num_envs * dim {
        return Err(EnvError::ActionLength {
            env: E::ID,
            expected: num_envs * dim,
            num_envs,
            dim,
            got: flat.len(),
        });
    }
    let actions = E::Action::from_flat(flat);
    if !E::Action::all_valid(actions, space) {
        for (i, a) in actions.iter().enumerate() {
            if let Err(fault) = a.check(space) {
                return Err(fault_error::<E>(fault, first_index(i)));
            }
        }
    }
    Ok(actions)
}

/// A type-erased action batch as `E`'s flat actions; the error when it holds the other
/// kind (discrete for a Box space, or the reverse). For the `dyn` executors.
pub(crate) fn typed_actions<'a, E: Env>(
    space: &crate::space::Space,
    actions: ActionBuf<'a>,
) -> Result<&'a [<E::Action as Action>::Elem], EnvError> {
    E::Action::from_any(actions).ok_or_else(|| EnvError::ActionKind {
        env: E::ID,
        expected: if space.is_discrete() {
            "discrete"
        } else {
            "continuous"
        },
        got: actions.kind(),
    })
}

pub(crate) fn fault_error<E: Env>(fault: crate::env::ActionFault, index: usize) -> EnvError {
    match fault {
        crate::env::ActionFault::OutOfRange { value, n } => EnvError::ActionOutOfRange {
            env: E::ID,
            index,
            value,
            n,
        },
        crate::env::ActionFault::NotFinite { component, value } => EnvError::ActionNotFinite {
            env: E::ID,
            index,
            component,
            value,
        },
    }
}

/// Per-env bookkeeping after the dynamics ran (or were skipped for a pending reset):
/// time limit, auto-reset and observation. Shared by both executors so their
/// semantics cannot drift apart.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn finish_env<E: Env>(
    p: &E::Params,
    max_steps: u32,
    autoreset: AutoReset,
    state: &mut E::State,
    rng: &mut Rng,
    elapsed: &mut u32,
    needs_reset: &mut bool,
    reward: &mut f64,
    terminated: &mut bool,
    truncated: &mut bool,
    obs: &mut [E::Obs],
    final_obs: &mut [E::Obs],
) {
    if *needs_reset {
        // NextStep mode: this step is the reset.
        E::reset_in_place(p, state, rng);
        *elapsed = 0;
        *needs_reset = false;
        *reward = 0.0;
        *terminated = false;
        *truncated = false;
        E::observe(p, state, obs);
        return;
    }
    *elapsed += 1;
    *truncated = *elapsed >= max_steps;
    let done = *terminated || *truncated;
    match autoreset {
        AutoReset::NextStep => {
            E::observe(p, state, obs);
            *needs_reset = done;
        }
        AutoReset::SameStep => {
            if done {
                E::observe(p, state, final_obs);
                E::reset_in_place(p, state, rng);
                *elapsed = 0;
            }
            E::observe(p, state, obs);
        }
    }
}
