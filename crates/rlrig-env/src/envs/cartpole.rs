//! CartPole-v1: Gymnasium's `classic_control/cartpole.py` (Barto, Sutton & Anderson 1983).

use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

#[derive(Clone, Debug)]
pub struct CartPoleParams {
    pub gravity: f64,
    pub masscart: f64,
    pub masspole: f64,
    /// Half the pole's length.
    pub length: f64,
    pub force_mag: f64,
    /// Seconds between state updates.
    pub tau: f64,
    pub theta_threshold_radians: f64,
    pub x_threshold: f64,
    /// Reward 0 per step and -1 on failure instead of +1 per step.
    pub sutton_barto_reward: bool,
    /// Reset draws each state variable uniformly from `[-reset_bound, reset_bound)`.
    pub reset_bound: f64,
    pub max_episode_steps: u32,
}

impl Default for CartPoleParams {
    fn default() -> Self {
        CartPoleParams {
            gravity: 9.8,
            masscart: 1.0,
            masspole: 0.1,
            length: 0.5,
            force_mag: 10.0,
            tau: 0.02,
            theta_threshold_radians: 12.0 * 2.0 * std::f64::consts::PI / 360.0,
            x_threshold: 2.4,
            sutton_barto_reward: false,
            reset_bound: 0.05,
            max_episode_steps: 500,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CartPoleState {
    pub x: f64,
    pub x_dot: f64,
    pub theta: f64,
    pub theta_dot: f64,
    /// Set once a terminal state was reached (Gymnasium's `steps_beyond_terminated`).
    pub done: bool,
}

pub struct CartPole;

impl CartPole {
    #[inline(always)]
    fn dynamics(p: &CartPoleParams, s: &mut CartPoleState, push_right: bool) -> bool {
        let total_mass = p.masspole + p.masscart;
        let polemass_length = p.masspole * p.length;
        let force = if push_right { p.force_mag } else { -p.force_mag };
        let (sintheta, costheta) = s.theta.sin_cos();
        let temp = (force + polemass_length * (s.theta_dot * s.theta_dot) * sintheta) / total_mass;
        let thetaacc = (p.gravity * sintheta - costheta * temp)
            / (p.length * (4.0 / 3.0 - p.masspole * (costheta * costheta) / total_mass));
        let xacc = temp - polemass_length * thetaacc * costheta / total_mass;
        // Explicit Euler, Gymnasium's default `kinematics_integrator`.
        s.x += p.tau * s.x_dot;
        s.x_dot += p.tau * xacc;
        s.theta += p.tau * s.theta_dot;
        s.theta_dot += p.tau * thetaacc;
        s.x < -p.x_threshold
            || s.x > p.x_threshold
            || s.theta < -p.theta_threshold_radians
            || s.theta > p.theta_threshold_radians
    }
}

impl Env for CartPole {
    type Params = CartPoleParams;
    type State = CartPoleState;
    type Action = i32;
    const ID: &'static str = "CartPole-v1";
    const OBS_DIM: usize = 4;

    fn observation_space(p: &CartPoleParams) -> Space {
        let high = [
            (p.x_threshold * 2.0) as f32,
            f32::INFINITY,
            (p.theta_threshold_radians * 2.0) as f32,
            f32::INFINITY,
        ];
        Space::box1(high.iter().map(|h| -h).collect(), high.to_vec())
    }

    fn action_space(_: &CartPoleParams) -> Space {
        Space::Discrete { n: 2 }
    }

    fn max_episode_steps(p: &CartPoleParams) -> Option<u32> {
        Some(p.max_episode_steps)
    }

    fn reset(p: &CartPoleParams, rng: &mut Rng) -> CartPoleState {
        let b = p.reset_bound;
        CartPoleState {
            x: rng.uniform(-b, b),
            x_dot: rng.uniform(-b, b),
            theta: rng.uniform(-b, b),
            theta_dot: rng.uniform(-b, b),
            done: false,
        }
    }

    #[inline]
    fn step(p: &CartPoleParams, s: &mut CartPoleState, a: &i32, _: &mut Rng) -> Transition {
        let terminated = Self::dynamics(p, s, *a == 1);
        let reward = match (terminated, s.done, p.sutton_barto_reward) {
            (false, _, sb) => {
                if sb {
                    0.0
                } else {
                    1.0
                }
            }
            // First terminal step.
            (true, false, sb) => {
                if sb {
                    -1.0
                } else {
                    1.0
                }
            }
            // Stepping past the end: undefined in Gymnasium, which then pays 0 (or -1).
            (true, true, sb) => {
                if sb {
                    -1.0
                } else {
                    0.0
                }
            }
        };
        s.done |= terminated;
        Transition { reward, terminated }
    }

    #[inline]
    fn observe(_: &CartPoleParams, s: &CartPoleState, out: &mut [f32]) {
        out[0] = s.x as f32;
        out[1] = s.x_dot as f32;
        out[2] = s.theta as f32;
        out[3] = s.theta_dot as f32;
    }

    fn state_to_vec(s: &CartPoleState) -> Vec<f64> {
        vec![s.x, s.x_dot, s.theta, s.theta_dot]
    }

    fn state_from_slice(_: &CartPoleParams, v: &[f64]) -> Result<CartPoleState, String> {
        let [x, x_dot, theta, theta_dot] = crate::envs::fixed::<4>(v, "[x, x_dot, theta, theta_dot]")?;
        Ok(CartPoleState {
            x,
            x_dot,
            theta,
            theta_dot,
            done: false,
        })
    }
}
