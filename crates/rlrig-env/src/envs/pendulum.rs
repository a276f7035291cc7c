//! Pendulum-v1: Gymnasium's `classic_control/pendulum.py`.
//!
//! The reference mixes float32 (the action) and float64 (the state) under NumPy 2's
//! promotion rules (NEP 50: a Python float adopts the other operand's precision).
//! The step below reproduces those roundings, and squares with libm's `pow` as
//! NumPy's scalar `**` does, so rewards match bit for bit.

use std::hint::black_box;

use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

#[derive(Clone, Debug)]
pub struct PendulumParams {
    pub max_speed: f64,
    pub max_torque: f64,
    pub dt: f64,
    pub g: f64,
    pub m: f64,
    pub l: f64,
    /// Reset draws theta from `[-reset_theta, reset_theta)` and theta_dot from `[-reset_theta_dot, ..)`.
    pub reset_theta: f64,
    pub reset_theta_dot: f64,
    pub max_episode_steps: u32,
}

impl Default for PendulumParams {
    fn default() -> Self {
        PendulumParams {
            max_speed: 8.0,
            max_torque: 2.0,
            dt: 0.05,
            g: 10.0,
            m: 1.0,
            l: 1.0,
            reset_theta: std::f64::consts::PI,
            reset_theta_dot: 1.0,
            max_episode_steps: 200,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PendulumState {
    pub theta: f64,
    pub theta_dot: f64,
    /// `sin(theta)` and `cos(theta)`, kept with theta: the observation needs both and
    /// the next step needs the sine, so each step calls libm once instead of three times.
    pub sin_theta: f64,
    pub cos_theta: f64,
}

impl PendulumState {
    pub fn new(theta: f64, theta_dot: f64) -> PendulumState {
        let (sin_theta, cos_theta) = theta.sin_cos();
        PendulumState {
            theta,
            theta_dot,
            sin_theta,
            cos_theta,
        }
    }
}

pub struct Pendulum;

/// `x ** 2` as NumPy computes it for a float64 scalar: libm `pow`, which is not
/// always bit-equal to `x * x`. `black_box` keeps LLVM from rewriting it.
#[inline]
pub(crate) fn np_square(x: f64) -> f64 {
    x.powf(black_box(2.0))
}

#[inline]
fn np_square_f32(x: f32) -> f32 {
    x.powf(black_box(2.0))
}

/// NumPy's float64 `%` (floored remainder: the result takes the divisor's sign).
#[inline]
pub(crate) fn np_remainder(a: f64, b: f64) -> f64 {
    let m = a % b;
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) { m + b } else { m }
    } else {
        0.0f64.copysign(b)
    }
}

/// The reference's `angle_normalize`: `((x + pi) % (2 * pi)) - pi`.
#[inline]
pub fn angle_normalize(x: f64) -> f64 {
    use std::f64::consts::PI;
    np_remainder(x + PI, 2.0 * PI) - PI
}

impl Env for Pendulum {
    type Params = PendulumParams;
    type State = PendulumState;
    type Action = [f32; 1];
    const ID: &'static str = "Pendulum-v1";
    const OBS_DIM: usize = 3;
    const STEP_COST_NS: u64 = 110;

    fn observation_space(p: &PendulumParams) -> Space {
        let high = vec![1.0, 1.0, p.max_speed as f32];
        Space::box1(high.iter().map(|h| -h).collect(), high)
    }

    fn action_space(p: &PendulumParams) -> Space {
        Space::box1(vec![-p.max_torque as f32], vec![p.max_torque as f32])
    }

    fn max_episode_steps(p: &PendulumParams) -> Option<u32> {
        Some(p.max_episode_steps)
    }

    fn reset(p: &PendulumParams, rng: &mut Rng) -> PendulumState {
        let theta = rng.uniform(-p.reset_theta, p.reset_theta);
        PendulumState::new(theta, rng.uniform(-p.reset_theta_dot, p.reset_theta_dot))
    }

    #[inline]
    fn step(p: &PendulumParams, s: &mut PendulumState, a: &[f32; 1], _: &mut Rng) -> Transition {
        let (th, thdot) = (s.theta, s.theta_dot);
        // np.clip on a float32 array stays float32.
        let u = a[0].max(-p.max_torque as f32).min(p.max_torque as f32);
        // float32 ** 2 and 0.001 * float32 stay float32; the sum promotes to float64.
        let u_cost = 0.001f32 * np_square_f32(u);
        let costs = np_square(angle_normalize(th)) + 0.1 * np_square(thdot) + f64::from(u_cost);
        // 3.0 / (m * l**2) is a Python float, so its product with u is float32 too.
        let torque_term = (3.0 / (p.m * p.l * p.l)) as f32 * u;
        let newthdot =
            thdot + (3.0 * p.g / (2.0 * p.l) * s.sin_theta + f64::from(torque_term)) * p.dt;
        let newthdot = newthdot.max(-p.max_speed).min(p.max_speed);
        *s = PendulumState::new(th + newthdot * p.dt, newthdot);
        Transition {
            reward: -costs,
            terminated: false,
        }
    }

    #[inline]
    fn observe(_: &PendulumParams, s: &PendulumState, out: &mut [f32]) {
        out[0] = s.cos_theta as f32;
        out[1] = s.sin_theta as f32;
        out[2] = s.theta_dot as f32;
    }

    fn state_to_vec(s: &PendulumState) -> Vec<f64> {
        vec![s.theta, s.theta_dot]
    }

    fn state_from_slice(_: &PendulumParams, v: &[f64]) -> Result<PendulumState, String> {
        let [theta, theta_dot] = crate::envs::fixed::<2>(v, "[theta, theta_dot]")?;
        Ok(PendulumState::new(theta, theta_dot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remainder_is_floored_like_numpy() {
        assert_eq!(np_remainder(5.0, 3.0), 2.0);
        assert_eq!(np_remainder(-1.0, 3.0), 2.0);
        assert_eq!(np_remainder(1.0, -3.0), -2.0);
        assert_eq!(np_remainder(-6.0, 3.0).to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn angle_normalize_maps_into_minus_pi_pi() {
        use std::f64::consts::PI;
        for k in -20..20 {
            let x = f64::from(k) * 0.7;
            let y = angle_normalize(x);
            assert!((-PI..PI).contains(&y), "{x} -> {y}");
            assert!(((x - y) / (2.0 * PI) - ((x - y) / (2.0 * PI)).round()).abs() < 1e-9);
        }
    }
}
