//! Replaying an action sequence from a given state: what a user reaches for when an
//! env looks wrong, and what the golden tests run against Gymnasium's trajectories.

use thiserror::Error;

use crate::env::Env;
use crate::error::EnvError;
use crate::registry::{EnvVisitor, visit};
use crate::vector::{SyncVecEnv, VecConfig};

/// One step of a replay, as Gymnasium's `step` returns it (observations as float32
/// whatever the env's dtype).
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayStep {
    pub obs: Vec<f32>,
    pub reward: f64,
    pub terminated: bool,
    pub truncated: bool,
}

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("{env}: action {index} (0-based): {why}")]
    Action {
        env: &'static str,
        index: usize,
        why: String,
    },
    #[error("no actions given: the actions input is empty")]
    NoActions,
}

/// Runs `actions` from `state` (Gymnasium's `env.unwrapped.state`, time-limit counter at 0)
/// through the batch executor with one env, stopping when the episode ends. Each action
/// is a list of numbers: one integer for Discrete envs, `DIM` numbers for Box envs.
pub fn replay(
    id: &str,
    state: &[f64],
    actions: &[Vec<f64>],
) -> Result<Vec<ReplayStep>, ReplayError> {
    replay_with(id, &[], state, actions)
}

/// [`replay`] with env parameters (`(key, value)` pairs, see [`crate::Env::set_param`]).
pub fn replay_with(
    id: &str,
    args: &[(String, String)],
    state: &[f64],
    actions: &[Vec<f64>],
) -> Result<Vec<ReplayStep>, ReplayError> {
    struct V<'a>(&'a [(String, String)], &'a [f64], &'a [Vec<f64>]);
    impl EnvVisitor for V<'_> {
        type Output = Result<Vec<ReplayStep>, ReplayError>;
        fn visit<E: Env>(self) -> Self::Output {
            let p = crate::env::apply_params::<E>(E::Params::default(), self.0)?;
            replay_env::<E>(&p, self.1, self.2)
        }
    }
    visit(id, V(args, state, actions))?
}

/// [`replay`] for a known env type and parameters.
pub fn replay_env<E: Env>(
    params: &E::Params,
    state: &[f64],
    actions: &[Vec<f64>],
) -> Result<Vec<ReplayStep>, ReplayError> {
    if actions.is_empty() {
        return Err(ReplayError::NoActions);
    }
    let s0 =
        E::state_from_slice(params, state).map_err(|why| EnvError::BadState { env: E::ID, why })?;
    let mut env = SyncVecEnv::<E>::with_params(params.clone(), VecConfig::new(1))?;
    env.set_state(0, s0);
    let dim = <E::Action as crate::env::Action>::DIM;
    let discrete = E::action_space(params).is_discrete();
    let mut out = Vec::new();
    for (index, a) in actions.iter().enumerate() {
        let bad = |why: String| ReplayError::Action {
            env: E::ID,
            index,
            why,
        };
        if a.len() != dim {
            return Err(bad(format!("expected {dim} number(s), got {}", a.len())));
        }
        let result = if discrete {
            let v = a[0];
            if v.fract() != 0.0 || !v.is_finite() || v.abs() > f64::from(i32::MAX) {
                return Err(bad(format!("{v} is not an integer action")));
            }
            crate::vector::VecEnvDyn::step(&mut env, crate::env::ActionBuf::Discrete(&[v as i32]))
        } else {
            let flat: Vec<f32> = a.iter().map(|&v| v as f32).collect();
            crate::vector::VecEnvDyn::step(&mut env, crate::env::ActionBuf::Continuous(&flat))
        };
        result.map_err(|e| bad(e.to_string()))?;
        let step = ReplayStep {
            obs: crate::env::ObsElem::view(env.obs()).to_vec(),
            reward: env.rewards()[0],
            terminated: env.terminated()[0],
            truncated: env.truncated()[0],
        };
        let done = step.terminated || step.truncated;
        out.push(step);
        if done {
            break;
        }
    }
    Ok(out)
}
