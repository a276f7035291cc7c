//! Acrobot-v1: Gymnasium's `classic_control/acrobot.py` (Sutton 1996, the book's dynamics),
//! integrated with one fourth-order Runge-Kutta step of `dt` as the reference does.

use std::f64::consts::PI;

use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

#[derive(Clone, Debug)]
pub struct AcrobotParams {
    pub dt: f64,
    pub link_length_1: f64,
    pub link_mass_1: f64,
    pub link_mass_2: f64,
    pub link_com_pos_1: f64,
    pub link_com_pos_2: f64,
    pub link_moi: f64,
    pub max_vel_1: f64,
    pub max_vel_2: f64,
    /// Torques for actions 0, 1, 2.
    pub avail_torque: [f64; 3],
    /// Reset draws each state variable from `[-reset_bound, reset_bound)`.
    pub reset_bound: f64,
    pub max_episode_steps: u32,
}

impl Default for AcrobotParams {
    fn default() -> Self {
        AcrobotParams {
            dt: 0.2,
            link_length_1: 1.0,
            link_mass_1: 1.0,
            link_mass_2: 1.0,
            link_com_pos_1: 0.5,
            link_com_pos_2: 0.5,
            link_moi: 1.0,
            max_vel_1: 4.0 * PI,
            max_vel_2: 9.0 * PI,
            avail_torque: [-1.0, 0.0, 1.0],
            reset_bound: 0.1,
            max_episode_steps: 500,
        }
    }
}

/// `[theta1, theta2, dtheta1, dtheta2]`, as `env.unwrapped.state`, with the sines and
/// cosines the observation and the next step need, computed once (libm bounds Acrobot).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AcrobotState {
    pub s: [f64; 4],
    /// `(sin, cos)` of `s[0]` and of `s[1]`.
    pub sc0: (f64, f64),
    pub sc1: (f64, f64),
}

impl AcrobotState {
    pub fn new(s: [f64; 4]) -> AcrobotState {
        AcrobotState {
            s,
            sc0: s[0].sin_cos(),
            sc1: s[1].sin_cos(),
        }
    }
}

pub struct Acrobot;

/// `_dsdt` of the reference (book dynamics), same operation order; `sc2` is
/// `(sin, cos)` of `s[1]`.
#[inline(always)]
fn dsdt(p: &AcrobotParams, s: &[f64; 4], sc2: (f64, f64), a: f64) -> [f64; 4] {
    let (m1, m2) = (p.link_mass_1, p.link_mass_2);
    let l1 = p.link_length_1;
    let (lc1, lc2) = (p.link_com_pos_1, p.link_com_pos_2);
    let (i1, i2) = (p.link_moi, p.link_moi);
    let g = 9.8;
    let [theta1, theta2, dtheta1, dtheta2] = *s;
    let (sin2, cos2) = sc2;
    let d1 = m1 * (lc1 * lc1) + m2 * ((l1 * l1) + (lc2 * lc2) + 2.0 * l1 * lc2 * cos2) + i1 + i2;
    let d2 = m2 * ((lc2 * lc2) + l1 * lc2 * cos2) + i2;
    let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
    let phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin2
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin2 - phi2)
        / (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2]
}

#[inline(always)]
fn axpy(y: &[f64; 4], a: f64, k: &[f64; 4]) -> [f64; 4] {
    std::array::from_fn(|i| y[i] + a * k[i])
}

/// The reference's `wrap`: shift by whole periods until `x` lies in `[m, big_m]`.
#[inline]
fn wrap(mut x: f64, m: f64, big_m: f64) -> f64 {
    let diff = big_m - m;
    while x > big_m {
        x -= diff;
    }
    while x < m {
        x += diff;
    }
    x
}

/// Python's `min(max(x, m), big_m)`.
#[inline]
fn bound(x: f64, m: f64, big_m: f64) -> f64 {
    let lo = if m > x { m } else { x };
    if big_m < lo { big_m } else { lo }
}

impl Env for Acrobot {
    type Params = AcrobotParams;
    type State = AcrobotState;
    type Action = i32;
    const ID: &'static str = "Acrobot-v1";
    const OBS_DIM: usize = 6;
    const STEP_COST_NS: u64 = 190;

    fn observation_space(p: &AcrobotParams) -> Space {
        let high = vec![1.0, 1.0, 1.0, 1.0, p.max_vel_1 as f32, p.max_vel_2 as f32];
        Space::box1(high.iter().map(|h| -h).collect(), high)
    }

    fn action_space(_: &AcrobotParams) -> Space {
        Space::Discrete { n: 3 }
    }

    fn max_episode_steps(p: &AcrobotParams) -> Option<u32> {
        Some(p.max_episode_steps)
    }

    fn reset(p: &AcrobotParams, rng: &mut Rng) -> AcrobotState {
        // The reference keeps the initial state in float32.
        let b = p.reset_bound;
        AcrobotState::new(std::array::from_fn(
            |_| f64::from(rng.uniform(-b, b) as f32),
        ))
    }

    #[inline]
    fn step(p: &AcrobotParams, st: &mut AcrobotState, a: &i32, _: &mut Rng) -> Transition {
        let torque = p.avail_torque[*a as usize];
        let y0 = st.s;
        let dt = p.dt;
        let dt2 = dt / 2.0;
        let stage = |y: [f64; 4]| dsdt(p, &y, y[1].sin_cos(), torque);
        let k1 = dsdt(p, &y0, st.sc1, torque);
        let k2 = stage(axpy(&y0, dt2, &k1));
        let k3 = stage(axpy(&y0, dt2, &k2));
        let k4 = stage(axpy(&y0, dt, &k3));
        let mut ns: [f64; 4] =
            std::array::from_fn(|i| y0[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]));
        ns[0] = wrap(ns[0], -PI, PI);
        ns[1] = wrap(ns[1], -PI, PI);
        ns[2] = bound(ns[2], -p.max_vel_1, p.max_vel_1);
        ns[3] = bound(ns[3], -p.max_vel_2, p.max_vel_2);
        *st = AcrobotState::new(ns);
        let terminated = -st.sc0.1 - (ns[1] + ns[0]).cos() > 1.0;
        Transition {
            reward: if terminated { 0.0 } else { -1.0 },
            terminated,
        }
    }

    #[inline]
    fn observe(_: &AcrobotParams, st: &AcrobotState, out: &mut [f32]) {
        let (s0, c0) = st.sc0;
        let (s1, c1) = st.sc1;
        out[0] = c0 as f32;
        out[1] = s0 as f32;
        out[2] = c1 as f32;
        out[3] = s1 as f32;
        out[4] = st.s[2] as f32;
        out[5] = st.s[3] as f32;
    }

    fn state_to_vec(st: &AcrobotState) -> Vec<f64> {
        st.s.to_vec()
    }

    fn state_from_slice(_: &AcrobotParams, v: &[f64]) -> Result<AcrobotState, String> {
        let s = crate::envs::fixed::<4>(v, "[theta1, theta2, dtheta1, dtheta2]")?;
        Ok(AcrobotState::new(s))
    }
}
