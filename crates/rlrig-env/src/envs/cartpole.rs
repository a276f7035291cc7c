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

/// One Euler step of the cart-pole, same operation order as the reference, given
/// `sin theta` and `cos theta` (libm's, as NumPy's). Returns the new
/// `(x, x_dot, theta, theta_dot)` and whether it is terminal.
#[inline(always)]
fn dynamics(
    p: &CartPoleParams,
    [x, x_dot, theta, theta_dot]: [f64; 4],
    push_right: bool,
    (sintheta, costheta): (f64, f64),
) -> ([f64; 4], bool) {
    let total_mass = p.masspole + p.masscart;
    let polemass_length = p.masspole * p.length;
    let force = if push_right {
        p.force_mag
    } else {
        -p.force_mag
    };
    let temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
    let thetaacc = (p.gravity * sintheta - costheta * temp)
        / (p.length * (4.0 / 3.0 - p.masspole * (costheta * costheta) / total_mass));
    let xacc = temp - polemass_length * thetaacc * costheta / total_mass;
    // Explicit Euler, Gymnasium's default `kinematics_integrator`.
    let next = [
        x + p.tau * x_dot,
        x_dot + p.tau * xacc,
        theta + p.tau * theta_dot,
        theta_dot + p.tau * thetaacc,
    ];
    let terminated = next[0] < -p.x_threshold
        || next[0] > p.x_threshold
        || next[2] < -p.theta_threshold_radians
        || next[2] > p.theta_threshold_radians;
    (next, terminated)
}

/// Reward of a step given whether it is terminal and whether the episode had
/// already ended (Gymnasium's `steps_beyond_terminated`).
#[inline(always)]
fn reward(terminated: bool, already_done: bool, sutton_barto: bool) -> f64 {
    match (terminated, already_done, sutton_barto) {
        (false, _, false) => 1.0,
        (false, _, true) => 0.0,
        (true, false, false) => 1.0,
        (true, _, true) => -1.0,
        // Stepping past the end: undefined in Gymnasium, which then pays 0.
        (true, true, false) => 0.0,
    }
}

const LANES: usize = 8;

// The batch step, 8 envs at a time, as plain arithmetic over lane arrays, which LLVM
// vectorises, `sin`/`cos` included (`crate::trig`: libm's bits, libm called only for
// the few values it cannot certify). Lanes compute exactly what `CartPole::step`
// computes (the executor tests compare the two bit for bit).
crate::env::lane_kernel!(kernel, CartPoleParams, CartPole, LANES, |p, b, i| {
    let st = &mut b.states[i..i + LANES];
    let mut vars = [[0.0f64; LANES]; 4];
    let mut push = [false; LANES];
    for l in 0..LANES {
        vars[0][l] = st[l].x;
        vars[1][l] = st[l].x_dot;
        vars[2][l] = st[l].theta;
        vars[3][l] = st[l].theta_dot;
        push[l] = b.actions[i + l] == 1;
    }
    let (sin, cos) = crate::trig::sin_cos_lanes(&vars[2]);
    let mut out = [[0.0f64; LANES]; 4];
    let mut term = [false; LANES];
    for l in 0..LANES {
        let v = [vars[0][l], vars[1][l], vars[2][l], vars[3][l]];
        let (next, t) = dynamics(p, v, push[l], (sin[l], cos[l]));
        for k in 0..4 {
            out[k][l] = next[k];
        }
        term[l] = t;
    }
    for l in 0..LANES {
        if b.active[i + l] {
            let s = &mut st[l];
            s.x = out[0][l];
            s.x_dot = out[1][l];
            s.theta = out[2][l];
            s.theta_dot = out[3][l];
            b.rewards[i + l] = reward(term[l], s.done, p.sutton_barto_reward);
            s.done |= term[l];
            b.terminated[i + l] = term[l];
        }
    }
});

impl Env for CartPole {
    super::classic_env! {
        params: CartPoleParams,
        keys: [
            max_episode_steps: super::steps_param,
        ],
        state: CartPoleState,
        action: i32,
        id: "CartPole-v1",
        obs_dim: 4,
        step_cost_ns: 25,
        kernel: kernel,
        lanes: LANES,
    }

    fn observation_space(p: &CartPoleParams) -> Space {
        Space::symmetric(vec![
            (p.x_threshold * 2.0) as f32,
            f32::INFINITY,
            (p.theta_threshold_radians * 2.0) as f32,
            f32::INFINITY,
        ])
    }

    fn action_space(_: &CartPoleParams) -> Space {
        Space::Discrete { n: 2 }
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
        let v = [s.x, s.x_dot, s.theta, s.theta_dot];
        let ([x, x_dot, theta, theta_dot], terminated) =
            dynamics(p, v, *a == 1, crate::trig::sin_cos(s.theta));
        let reward = reward(terminated, s.done, p.sutton_barto_reward);
        *s = CartPoleState {
            x,
            x_dot,
            theta,
            theta_dot,
            done: s.done | terminated,
        };
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

    fn snapshot(s: &CartPoleState) -> Vec<f64> {
        vec![
            s.x,
            s.x_dot,
            s.theta,
            s.theta_dot,
            f64::from(u8::from(s.done)),
        ]
    }

    fn restore(p: &CartPoleParams, v: &[f64]) -> Result<CartPoleState, String> {
        let (flag, vars) = v.split_last().ok_or("empty CartPole snapshot")?;
        let mut s = Self::state_from_slice(p, vars)?;
        s.done = *flag != 0.0;
        Ok(s)
    }

    fn state_from_slice(_: &CartPoleParams, v: &[f64]) -> Result<CartPoleState, String> {
        let [x, x_dot, theta, theta_dot] =
            crate::envs::fixed::<4>(v, "[x, x_dot, theta, theta_dot]")?;
        Ok(CartPoleState {
            x,
            x_dot,
            theta,
            theta_dot,
            done: false,
        })
    }
}
