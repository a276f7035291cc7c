//! MountainCar-v0: Gymnasium's `classic_control/mountain_car.py` (Moore 1990).

use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

#[derive(Clone, Debug)]
pub struct MountainCarParams {
    pub min_position: f64,
    pub max_position: f64,
    pub max_speed: f64,
    pub goal_position: f64,
    pub goal_velocity: f64,
    pub force: f64,
    pub gravity: f64,
    /// Reset draws the position uniformly from `[reset_low, reset_high)`.
    pub reset_low: f64,
    pub reset_high: f64,
    pub max_episode_steps: u32,
}

impl Default for MountainCarParams {
    fn default() -> Self {
        MountainCarParams {
            min_position: -1.2,
            max_position: 0.6,
            max_speed: 0.07,
            goal_position: 0.5,
            goal_velocity: 0.0,
            force: 0.001,
            gravity: 0.0025,
            reset_low: -0.6,
            reset_high: -0.4,
            max_episode_steps: 200,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MountainCarState {
    pub position: f64,
    pub velocity: f64,
}

pub struct MountainCar;

/// The observation space of both mountain cars (this one and
/// [`super::mountain_car_continuous`]): `[position, velocity]`, the position in
/// `[min_position, max_position]`, the velocity within `max_speed` either way.
pub(crate) fn observation_space(min_position: f64, max_position: f64, max_speed: f64) -> Space {
    Space::box1(
        vec![min_position as f32, -max_speed as f32],
        vec![max_position as f32, max_speed as f32],
    )
}

impl Env for MountainCar {
    super::classic_env! {
        params: MountainCarParams,
        keys: [
            max_episode_steps: super::steps_param,
            goal_velocity: super::finite_param,
        ],
        state: MountainCarState,
        action: i32,
        id: "MountainCar-v0",
        obs_dim: 2,
        step_cost_ns: 25,
    }

    fn observation_space(p: &MountainCarParams) -> Space {
        observation_space(p.min_position, p.max_position, p.max_speed)
    }

    fn action_space(_: &MountainCarParams) -> Space {
        Space::Discrete { n: 3 }
    }

    fn reset(p: &MountainCarParams, rng: &mut Rng) -> MountainCarState {
        MountainCarState {
            position: rng.uniform(p.reset_low, p.reset_high),
            velocity: 0.0,
        }
    }

    #[inline]
    fn step(p: &MountainCarParams, s: &mut MountainCarState, a: &i32, _: &mut Rng) -> Transition {
        // Same operation order as the reference, in f64 as NumPy does it.
        let mut velocity =
            s.velocity + (f64::from(*a - 1) * p.force + (3.0 * s.position).cos() * (-p.gravity));
        velocity = velocity.max(-p.max_speed).min(p.max_speed);
        let mut position = s.position + velocity;
        position = position.max(p.min_position).min(p.max_position);
        if position == p.min_position && velocity < 0.0 {
            velocity = 0.0;
        }
        let terminated = position >= p.goal_position && velocity >= p.goal_velocity;
        s.position = position;
        s.velocity = velocity;
        Transition {
            reward: -1.0,
            terminated,
        }
    }

    #[inline]
    fn observe(_: &MountainCarParams, s: &MountainCarState, out: &mut [f32]) {
        out[0] = s.position as f32;
        out[1] = s.velocity as f32;
    }

    fn state_to_vec(s: &MountainCarState) -> Vec<f64> {
        vec![s.position, s.velocity]
    }

    fn state_from_slice(_: &MountainCarParams, v: &[f64]) -> Result<MountainCarState, String> {
        let [position, velocity] = crate::envs::fixed::<2>(v, "[position, velocity]")?;
        Ok(MountainCarState { position, velocity })
    }
}
