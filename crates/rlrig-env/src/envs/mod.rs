//! The bundled environments.

pub mod acrobot;
#[cfg(feature = "atari")]
pub mod atari;
mod b2;
pub mod bipedal_walker;
pub mod cartpole;
pub mod lunar_lander;
pub mod minatar;
pub mod minatar_asterix;
pub mod minatar_breakout;
pub mod minatar_freeway;
pub mod minatar_seaquest;
pub mod minatar_space_invaders;
pub mod mountain_car;
pub mod mountain_car_continuous;
pub mod pendulum;

pub use acrobot::Acrobot;
pub use bipedal_walker::{BipedalWalker, BipedalWalkerHardcore};
pub use cartpole::CartPole;
pub use lunar_lander::{LunarLander, LunarLanderContinuous};
pub use minatar_asterix::Asterix;
pub use minatar_breakout::Breakout;
pub use minatar_freeway::Freeway;
pub use minatar_seaquest::Seaquest;
pub use minatar_space_invaders::SpaceInvaders;
pub use mountain_car::MountainCar;
pub use mountain_car_continuous::MountainCarContinuous;
pub use pendulum::Pendulum;

/// `value` parsed as parameter `what` (for [`crate::Env::set_param`]).
pub(crate) fn param<T: std::str::FromStr>(value: &str, what: &str) -> Result<T, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("'{value}' is not {what}"))
}

/// A finite number.
pub(crate) fn finite_param(value: &str) -> Result<f64, String> {
    let v: f64 = param(value, "a number")?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("'{value}' is not a finite number"))
    }
}

/// A time limit: a whole number of steps, at least 1.
pub fn steps_param(value: &str) -> Result<u32, String> {
    match param::<u32>(value, "a whole number of steps")? {
        0 => Err("the time limit must be at least 1 step".into()),
        v => Ok(v),
    }
}

/// The error for a key an env does not take, listing the ones it does.
pub(crate) fn unknown_param(known: &[&str]) -> String {
    if known.is_empty() {
        "unknown parameter (this env takes none)".into()
    } else {
        format!("unknown parameter (this env takes: {})", known.join(", "))
    }
}

/// The items of `impl Env` the classic-control envs share, as `minatar_env!` does for
/// the MinAtar games: f32 observations, Gymnasium's TimeLimit from the params'
/// `max_episode_steps`, and the parameter keys listed once, `PARAMS` and `set_param` made
/// from the same list (each key's value parsed by its parser into the params' field of
/// that name; other keys refused with [`unknown_param`]), and for the envs stepped in
/// lanes, `step_batch` as their `kernel` (made by `lane_kernel!`) with
/// `BATCH_LANES` its lanes. An env's impl names its params and their keys, its state,
/// action, id, observation length and step cost, and its kernel if it has one.
macro_rules! classic_env {
    (
        params: $params:ty,
        keys: [$($key:ident: $parse:expr),* $(,)?],
        state: $state:ty,
        action: $action:ty,
        id: $id:literal,
        obs_dim: $obs_dim:expr,
        step_cost_ns: $cost:expr,
        $(kernel: $kernel:ident, lanes: $lanes:expr,)?
    ) => {
        type Params = $params;
        type State = $state;
        type Action = $action;
        type Obs = f32;
        const ID: &'static str = $id;
        const PARAMS: &'static [&'static str] = &[$(stringify!($key)),*];
        const OBS_DIM: usize = $obs_dim;
        const STEP_COST_NS: u64 = $cost;

        $(
            const BATCH_LANES: usize = $lanes;

            fn step_batch(p: &$params, batch: $crate::env::Batch<'_, Self>) {
                $kernel(p, batch);
            }
        )?

        fn max_episode_steps(p: &$params) -> Option<u32> {
            Some(p.max_episode_steps)
        }

        fn set_param(p: &mut $params, key: &str, value: &str) -> Result<(), String> {
            match key {
                $(stringify!($key) => p.$key = ($parse)(value)?,)*
                _ => return Err($crate::envs::unknown_param(Self::PARAMS)),
            }
            Ok(())
        }
    };
}
pub(crate) use classic_env;

/// Bytes carried in a `Vec<f64>` (Atari snapshots and screens): four to a number, as a
/// little-endian u32 (exact in f64), the last word zero-padded.
pub fn pack_bytes(bytes: &[u8]) -> impl Iterator<Item = f64> + '_ {
    bytes.chunks(4).map(|c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        f64::from(u32::from_le_bytes(w))
    })
}

/// The first `n` bytes of [`pack_bytes`]'s `words`; an error names a number that is not
/// a 32-bit word or too few words.
pub fn unpack_bytes(words: &[f64], n: usize) -> Result<Vec<u8>, String> {
    if words.len() * 4 < n {
        return Err(format!("{} words hold fewer than {n} bytes", words.len()));
    }
    let mut out = Vec::with_capacity(words.len() * 4);
    for &x in words {
        if !(0.0..=f64::from(u32::MAX)).contains(&x) || x.fract() != 0.0 {
            return Err(format!("{x} is not a 32-bit word"));
        }
        out.extend_from_slice(&(x as u32).to_le_bytes());
    }
    out.truncate(n);
    Ok(out)
}

/// A state vector of exactly `N` finite numbers; `names` describes the layout for errors.
pub(crate) fn fixed<const N: usize>(v: &[f64], names: &str) -> Result<[f64; N], String> {
    let arr: [f64; N] = v
        .try_into()
        .map_err(|_| format!("expected {N} numbers {names}, got {}", v.len()))?;
    if let Some(i) = arr.iter().position(|x| !x.is_finite()) {
        return Err(format!("state[{i}] is {}, not a finite number", arr[i]));
    }
    Ok(arr)
}
