//! Env ids and run-time dispatch to the statically typed envs.

use crate::env::Env;
#[cfg(feature = "atari")]
use crate::envs::atari;
use crate::envs::{
    Acrobot, Asterix, BipedalWalker, BipedalWalkerHardcore, Breakout, CartPole, Freeway,
    LunarLander, LunarLanderContinuous, MountainCar, MountainCarContinuous, Pendulum, Seaquest,
    SpaceInvaders,
};
use crate::error::EnvError;
use crate::space::Space;
use crate::vector::{AsyncVecEnv, AsyncVecEnvDyn, SyncVecEnv, VecConfig, VecEnvDyn};

/// The ids of the envs that are always built, in the order `rlrig envs` lists them.
const BASE_IDS: &[&str] = &[
    CartPole::ID,
    Acrobot::ID,
    MountainCar::ID,
    MountainCarContinuous::ID,
    Pendulum::ID,
    LunarLander::ID,
    LunarLanderContinuous::ID,
    BipedalWalker::ID,
    BipedalWalkerHardcore::ID,
    Asterix::ID,
    Breakout::ID,
    Freeway::ID,
    Seaquest::ID,
    SpaceInvaders::ID,
];

/// `a` then `b`, as an array of `N = a.len() + b.len()` (slices cannot be joined in a
/// `const` otherwise).
#[cfg(feature = "atari")]
const fn joined<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    out
}

#[cfg(feature = "atari")]
const ALL_IDS: [&str; BASE_IDS.len() + atari::IDS.len()] = joined(BASE_IDS, atari::IDS);

/// Every registered id, in the order `rlrig envs` lists them (with the `atari` feature,
/// then each game's raw `ALE/<Game>-v5` and preprocessed `<Game>-v5`).
#[cfg(feature = "atari")]
pub const ENV_IDS: &[&str] = &ALL_IDS;
#[cfg(not(feature = "atari"))]
pub const ENV_IDS: &[&str] = BASE_IDS;

/// The Atari ids among [`ENV_IDS`] (empty without the `atari` feature): they need ROMs,
/// and their state is the emulator's (no state vector).
pub const ATARI_IDS: &[&str] = ENV_IDS.split_at(BASE_IDS.len()).1;

/// What a caller needs to know about an env without its type.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvSpec {
    pub id: &'static str,
    pub observation_space: Space,
    pub action_space: Space,
    pub obs_dim: usize,
    pub max_episode_steps: Option<u32>,
    /// The keys `Env::set_param` takes.
    pub params: &'static [&'static str],
    /// Memory one env takes in a synchronous executor: its state (and the heap it
    /// owns), RNG, step counter and flags, observation and final-observation rows,
    /// reward. What a batch of `n` envs needs is about `n` times this.
    pub bytes_per_env: usize,
}

impl EnvSpec {
    pub fn of<E: Env>(p: &E::Params) -> EnvSpec {
        EnvSpec {
            id: E::ID,
            observation_space: E::observation_space(p),
            action_space: E::action_space(p),
            obs_dim: E::OBS_DIM,
            max_episode_steps: E::max_episode_steps(p),
            params: E::PARAMS,
            bytes_per_env: std::mem::size_of::<E::State>()
                + E::STATE_HEAP_BYTES
                + std::mem::size_of::<crate::Rng>()
                + std::mem::size_of::<E::Action>()
                + 2 * E::OBS_DIM * std::mem::size_of::<E::Obs>()
                + std::mem::size_of::<f64>()
                + std::mem::size_of::<u32>()
                + 4,
        }
    }
}

/// Code that is generic over the env type, run for an id chosen at run time.
pub trait EnvVisitor {
    type Output;
    fn visit<E: Env>(self) -> Self::Output;
}

/// Runs `v` with the env type registered under `id`.
pub fn visit<V: EnvVisitor>(id: &str, v: V) -> Result<V::Output, EnvError> {
    Ok(match id {
        CartPole::ID => v.visit::<CartPole>(),
        Acrobot::ID => v.visit::<Acrobot>(),
        MountainCar::ID => v.visit::<MountainCar>(),
        MountainCarContinuous::ID => v.visit::<MountainCarContinuous>(),
        Pendulum::ID => v.visit::<Pendulum>(),
        LunarLander::ID => v.visit::<LunarLander>(),
        LunarLanderContinuous::ID => v.visit::<LunarLanderContinuous>(),
        BipedalWalker::ID => v.visit::<BipedalWalker>(),
        BipedalWalkerHardcore::ID => v.visit::<BipedalWalkerHardcore>(),
        Asterix::ID => v.visit::<Asterix>(),
        Breakout::ID => v.visit::<Breakout>(),
        Freeway::ID => v.visit::<Freeway>(),
        Seaquest::ID => v.visit::<Seaquest>(),
        SpaceInvaders::ID => v.visit::<SpaceInvaders>(),
        #[cfg(feature = "atari")]
        _ => return atari::visit(id, v).map_err(|_| unknown(id)),
        #[cfg(not(feature = "atari"))]
        _ => return Err(unknown(id)),
    })
}

fn unknown(id: &str) -> EnvError {
    // Name the closest id when the user made a typo or a case slip.
    let lower = id.to_ascii_lowercase();
    let hint = ENV_IDS
        .iter()
        .find(|k| {
            let k = k.to_ascii_lowercase();
            k == lower || k.split('-').next() == lower.split('-').next()
        })
        .map(|k| format!(" (did you mean '{k}'?)"))
        .unwrap_or_default();
    EnvError::UnknownEnv {
        id: id.to_string(),
        hint,
        known: ENV_IDS.join(", "),
    }
}

/// The spec of `id` with default parameters.
pub fn spec(id: &str) -> Result<EnvSpec, EnvError> {
    struct V;
    impl EnvVisitor for V {
        type Output = EnvSpec;
        fn visit<E: Env>(self) -> EnvSpec {
            EnvSpec::of::<E>(&E::Params::default())
        }
    }
    visit(id, V)
}

/// A synchronous executor for `id` with default parameters.
pub fn make_sync(id: &str, cfg: VecConfig) -> Result<Box<dyn VecEnvDyn>, EnvError> {
    struct V(VecConfig);
    impl EnvVisitor for V {
        type Output = Result<Box<dyn VecEnvDyn>, EnvError>;
        fn visit<E: Env>(self) -> Self::Output {
            Ok(Box::new(SyncVecEnv::<E>::new(self.0)?))
        }
    }
    visit(id, V(cfg))?
}

/// An asynchronous executor for `id` with default parameters.
pub fn make_async(
    id: &str,
    cfg: VecConfig,
    batch_size: usize,
) -> Result<Box<dyn AsyncVecEnvDyn>, EnvError> {
    struct V(VecConfig, usize);
    impl EnvVisitor for V {
        type Output = Result<Box<dyn AsyncVecEnvDyn>, EnvError>;
        fn visit<E: Env>(self) -> Self::Output {
            Ok(Box::new(AsyncVecEnv::<E>::new(self.0, self.1)?))
        }
    }
    visit(id, V(cfg, batch_size))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_dispatches_to_its_own_env() {
        for id in ENV_IDS {
            assert_eq!(spec(id).unwrap().id, *id);
        }
    }

    #[test]
    fn unknown_ids_list_the_known_ones_and_suggest() {
        let e = spec("cartpole-v1").unwrap_err().to_string();
        assert!(e.contains("did you mean 'CartPole-v1'"), "{e}");
        assert!(e.contains("Pendulum-v1"), "{e}");
        let e = spec("Hopper-v5").unwrap_err().to_string();
        assert!(e.starts_with("unknown env id 'Hopper-v5'"), "{e}");
    }
}
