//! MountainCarContinuous-v0: Gymnasium's `classic_control/continuous_mountain_car.py`.
//!
//! The reference stores its state as float32 after every step but starts from a
//! float64 state after `reset`, and NumPy 2 (NEP 50) computes a float32 operand
//! with a Python float in float32. `State::f32_state` records which precision the
//! reference would be in, and the step reproduces each rounding, so trajectories
//! match to the last bit rather than drifting by float32 ulps over 999 steps.

use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

#[derive(Clone, Debug)]
pub struct MountainCarContinuousParams {
    pub min_action: f64,
    pub max_action: f64,
    pub min_position: f64,
    pub max_position: f64,
    pub max_speed: f64,
    pub goal_position: f64,
    pub goal_velocity: f64,
    pub power: f64,
    pub reset_low: f64,
    pub reset_high: f64,
    pub max_episode_steps: u32,
}

impl Default for MountainCarContinuousParams {
    fn default() -> Self {
        MountainCarContinuousParams {
            min_action: -1.0,
            max_action: 1.0,
            min_position: -1.2,
            max_position: 0.6,
            max_speed: 0.07,
            goal_position: 0.45,
            goal_velocity: 0.0,
            power: 0.0015,
            reset_low: -0.6,
            reset_high: -0.4,
            max_episode_steps: 999,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MountainCarContinuousState {
    pub position: f64,
    pub velocity: f64,
    /// The reference holds a float32 state (true after the first step).
    pub f32_state: bool,
}

pub struct MountainCarContinuous;

/// The reference's move of the car in the precision its state is in (`F`: float64 after a
/// reset, float32 after a step): the velocity plus `delta` within `max_speed`, the position
/// plus the velocity within the track, and a car at the left end stopped. Takes
/// `[position, velocity, delta]` and `[min_position, max_position, max_speed]`; returns the
/// new `(position, velocity)`.
#[inline(always)]
fn drive<F>(
    [position, velocity, delta]: [F; 3],
    [min_position, max_position, max_speed]: [F; 3],
) -> (F, F)
where
    F: Copy + Default + PartialOrd + std::ops::Add<Output = F> + std::ops::Neg<Output = F>,
{
    let zero = F::default();
    let mut v = velocity + delta;
    if v > max_speed {
        v = max_speed;
    }
    if v < -max_speed {
        v = -max_speed;
    }
    let mut x = position + v;
    if x > max_position {
        x = max_position;
    }
    if x < min_position {
        x = min_position;
    }
    if x == min_position && v < zero {
        v = zero;
    }
    (x, v)
}

impl Env for MountainCarContinuous {
    super::classic_env! {
        params: MountainCarContinuousParams,
        keys: [
            max_episode_steps: super::steps_param,
            goal_velocity: super::finite_param,
        ],
        state: MountainCarContinuousState,
        action: [f32; 1],
        id: "MountainCarContinuous-v0",
        obs_dim: 2,
        step_cost_ns: 50,
    }

    fn observation_space(p: &Self::Params) -> Space {
        super::mountain_car::observation_space(p.min_position, p.max_position, p.max_speed)
    }

    fn action_space(p: &Self::Params) -> Space {
        Space::box1(vec![p.min_action as f32], vec![p.max_action as f32])
    }

    fn reset(p: &Self::Params, rng: &mut Rng) -> Self::State {
        MountainCarContinuousState {
            position: rng.uniform(p.reset_low, p.reset_high),
            velocity: 0.0,
            f32_state: false,
        }
    }

    fn step(p: &Self::Params, s: &mut Self::State, a: &[f32; 1], _: &mut Rng) -> Transition {
        let a0 = a[0];
        // `min(max(action[0], min_action), max_action)`: an in-range action stays a
        // float32 scalar, a clipped one becomes the Python float bound.
        let clipped = f64::from(a0) < p.min_action || f64::from(a0) > p.max_action;
        let x3 = if s.f32_state {
            f64::from(3.0f32 * s.position as f32)
        } else {
            3.0 * s.position
        };
        let gravity_term = 0.0025 * x3.cos();
        // `force * power - 0.0025 * cos(3 * position)`
        let delta: f64 = if clipped {
            let force = if f64::from(a0) < p.min_action {
                p.min_action
            } else {
                p.max_action
            };
            force * p.power - gravity_term
        } else {
            f64::from(a0 * p.power as f32 - gravity_term as f32)
        };
        let bounds = [p.min_position, p.max_position, p.max_speed];
        let (position, velocity) = if s.f32_state {
            // Everything stays float32; Python-float bounds are rounded to float32.
            let (x, v) = drive(
                [s.position, s.velocity, delta].map(|x| x as f32),
                bounds.map(|x| x as f32),
            );
            (f64::from(x), f64::from(v))
        } else {
            drive([s.position, s.velocity, delta], bounds)
        };
        let terminated = if s.f32_state {
            position as f32 >= p.goal_position as f32 && velocity as f32 >= p.goal_velocity as f32
        } else {
            position >= p.goal_position && velocity >= p.goal_velocity
        };
        let bonus = if terminated { 100.0 } else { 0.0 };
        // `reward -= math.pow(action[0], 2) * 0.1`, on the unclipped action.
        // The square of a float32 is exact in float64, which np_square returns without a call.
        let reward = bonus - crate::envs::pendulum::np_square(f64::from(a0)) * 0.1;
        s.position = f64::from(position as f32);
        s.velocity = f64::from(velocity as f32);
        s.f32_state = true;
        Transition { reward, terminated }
    }

    #[inline]
    fn observe(_: &Self::Params, s: &Self::State, out: &mut [f32]) {
        out[0] = s.position as f32;
        out[1] = s.velocity as f32;
    }

    fn state_to_vec(s: &Self::State) -> Vec<f64> {
        vec![s.position, s.velocity]
    }

    fn snapshot(s: &Self::State) -> Vec<f64> {
        vec![s.position, s.velocity, f64::from(u8::from(s.f32_state))]
    }

    fn restore(p: &Self::Params, v: &[f64]) -> Result<Self::State, String> {
        let (flag, vars) = v
            .split_last()
            .ok_or("empty MountainCarContinuous snapshot")?;
        let mut s = Self::state_from_slice(p, vars)?;
        s.f32_state = *flag != 0.0;
        Ok(s)
    }

    fn state_from_slice(_: &Self::Params, v: &[f64]) -> Result<Self::State, String> {
        let [position, velocity] = crate::envs::fixed::<2>(v, "[position, velocity]")?;
        Ok(MountainCarContinuousState {
            position,
            velocity,
            f32_state: false,
        })
    }
}
