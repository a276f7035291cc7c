//! # rlrig-learn
//!
//! Everything that learns: the native CPU path for small networks ([`nn`]), the
//! optimiser ([`optim`]), running normalisation ([`normalize`]), the replay buffer
//! ([`buffer`]) and the algorithms ([`ppo`], [`offpolicy`]: DDPG, TD3, SAC).

// Minibatch and lane loops index several arrays in lockstep.
#![allow(clippy::needless_range_loop)]

/// Evaluation, fitness and recorded episodes end after this many steps. Envs with a
/// time limit end sooner; the MinAtar games have none (as the `minatar` package), and a
/// policy can stall in them forever (Seaquest's sub waiting at the surface, a Breakout
/// paddle that never misses), which would hang an evaluation. gymnax cuts its MinAtar
/// episodes at 1,000 steps (Freeway 2,500); this cap only guards against the stall.
/// Applied as the executors' `episode_cap`, so capped episodes end truncated.
pub const MAX_EVAL_STEPS: u32 = 10_000;

/// Evaluation seeds are far from training seeds so the episodes are new.
pub const EVAL_SEED_OFFSET: u64 = 1_000_003;

/// Env parameters of a run, as `gym.make(id, KEY=VALUE)` and `--env-arg KEY=VALUE`
/// give them (`max_episode_steps`, Pendulum's `g`, Acrobot's `fast_trig`, ...; `rlrig
/// envs` lists each env's keys). Part of every learner's config, so checkpoints,
/// `eval` and `play` step the env the run trained on. A config file may write the
/// values as TOML strings, numbers or booleans.
pub type EnvArgs = std::collections::BTreeMap<String, String>;

/// An executor config for `n` envs with `args` applied.
pub fn env_config(n: usize, args: &EnvArgs) -> rlrig_env::VecConfig {
    rlrig_env::VecConfig::new(n)
        .env_args(args.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// The envs a learner trains on: `n` envs of `env` with `args`, seeded by `seed`, stepped
/// on `threads` threads, each reset on the step its episode ends (the final observation
/// kept for the learner).
pub fn training_envs(
    env: &str,
    args: &EnvArgs,
    n: usize,
    seed: u64,
    threads: usize,
) -> Result<Box<dyn rlrig_env::VecEnvDyn>, LearnError> {
    training_envs_of(env, args, 0..n, seed, threads)
}

/// [`training_envs`] for envs `envs` of a larger batch (an MPI rank's share, see
/// [`rank_envs`]): they draw from the streams of their places in the batch.
pub fn training_envs_of(
    env: &str,
    args: &EnvArgs,
    envs: std::ops::Range<usize>,
    seed: u64,
    threads: usize,
) -> Result<Box<dyn rlrig_env::VecEnvDyn>, LearnError> {
    let cfg = env_config(envs.len(), args)
        .first_env(envs.start as u64)
        .threads(threads)
        .seed(seed)
        .autoreset(rlrig_env::AutoReset::SameStep);
    Ok(rlrig_env::make_sync(env, cfg)?)
}

/// Checks `env` and its `args` by building one env: an unknown id, an unknown key or a
/// bad value is an error naming them.
pub fn check_env(env: &str, args: &EnvArgs) -> Result<(), LearnError> {
    rlrig_env::make_sync(env, env_config(1, args))?;
    Ok(())
}

/// Deserialises [`EnvArgs`] from a table of scalars of any TOML/JSON type (they
/// serialise back as strings, which every env parser reads).
pub mod env_args_serde {
    use serde::{Deserialize, Deserializer};

    #[derive(Deserialize)]
    #[serde(
        untagged,
        expecting = "each env arg must be a string, number or boolean"
    )]
    enum Scalar {
        Bool(bool),
        Int(i64),
        Float(f64),
        Str(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<super::EnvArgs, D::Error> {
        let m = std::collections::BTreeMap::<String, Scalar>::deserialize(d)?;
        Ok(m.into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Scalar::Bool(b) => b.to_string(),
                    Scalar::Int(i) => i.to_string(),
                    // Shortest round-trip form, as the env's parser reads it back.
                    Scalar::Float(f) => f.to_string(),
                    Scalar::Str(s) => s,
                };
                (k, v)
            })
            .collect())
    }
}

pub use error::LearnError;
/// The network layer (the `rlrig-nn` crate), where the learners have always found it.
pub use rlrig_nn::{NnError, backend, conv, nn, optim};

pub mod alphazero;
pub mod buffer;
pub mod collective;
pub mod collector;
pub mod dist;
pub mod dqn;
pub mod driver;
mod error;
pub mod eval;
pub mod evolution;
pub mod export;
pub mod mcts;
pub mod memory;
pub mod normalize;
pub mod offpolicy;
pub mod ppo;
mod presets;
pub mod rank_envs;
pub mod replay;
pub mod rules;
pub mod run;
pub mod saved;
pub mod serve;
pub mod stop;
pub mod trace;
pub mod vtrace;
