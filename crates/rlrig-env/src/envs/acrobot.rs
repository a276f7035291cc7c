//! Acrobot-v1: Gymnasium's `classic_control/acrobot.py` (Sutton 1996, the book's dynamics),
//! integrated with one fourth-order Runge-Kutta step of `dt` as the reference does.

use std::f64::consts::PI;

use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;
use crate::trig;

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
    /// Opt-in: sin/cos from [`trig::fast_sin_cos_lanes`] (vectorised, within 1 ulp, the
    /// same bits on every CPU), with the angle-sum formulas for the shifted cosines,
    /// instead of libm's: 2.6x faster here, but trajectories are no longer the
    /// reference's bit for bit. Acrobot is chaotic, and a 1-ulp difference can grow past
    /// 1e-6 within an episode (1 of 20 random-action episodes did, see the README).
    pub fast_trig: bool,
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
            fast_trig: false,
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
    pub fn new(p: &AcrobotParams, s: [f64; 4]) -> AcrobotState {
        let (sin, cos) = sin_cos_lanes(p, &[s[0], s[1]]);
        AcrobotState {
            s,
            sc0: (sin[0], cos[0]),
            sc1: (sin[1], cos[1]),
        }
    }
}

pub struct Acrobot;

/// `_dsdt` of the reference (book dynamics), same operation order, given the trig
/// values it needs: `(sin, cos)` of `theta2`, `cos(theta1 + theta2 - pi/2)` and
/// `cos(theta1 - pi/2)`.
#[inline(always)]
fn dsdt(
    p: &AcrobotParams,
    s: [f64; 4],
    (sin2, cos2): (f64, f64),
    cos_a: f64,
    cos_b: f64,
    a: f64,
) -> [f64; 4] {
    let (m1, m2) = (p.link_mass_1, p.link_mass_2);
    let l1 = p.link_length_1;
    let (lc1, lc2) = (p.link_com_pos_1, p.link_com_pos_2);
    let (i1, i2) = (p.link_moi, p.link_moi);
    let g = 9.8;
    let [_, _, dtheta1, dtheta2] = s;
    let d1 = m1 * (lc1 * lc1) + m2 * ((l1 * l1) + (lc2 * lc2) + 2.0 * l1 * lc2 * cos2) + i1 + i2;
    let d2 = m2 * ((lc2 * lc2) + l1 * lc2 * cos2) + i2;
    let phi2 = m2 * lc2 * g * cos_a;
    let phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin2
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * cos_b
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin2 - phi2)
        / (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2]
}

/// Lane-major values: `v[k][l]` is component `k` of lane `l`.
type Lanes<const L: usize> = [[f64; L]; 4];

/// `(sin, cos)` of `L` lanes.
type SinCos<const L: usize> = ([f64; L], [f64; L]);

/// `dsdt` for `L` envs: the trig values lane by lane (libm's by default: they must stay
/// libm's, see the module docs of `CartPole`'s kernel), the arithmetic as loops over
/// lanes, which LLVM vectorises. `known` holds `(sin, cos)` of `y[0]` and `y[1]` where
/// they were computed already (the state's own).
#[inline(always)]
fn dsdt_lanes<const L: usize>(
    p: &AcrobotParams,
    y: &Lanes<L>,
    known: Option<(SinCos<L>, SinCos<L>)>,
    torque: &[f64; L],
) -> Lanes<L> {
    let (sc2, cos_a, cos_b) = if p.fast_trig {
        // Two sin/cos pairs instead of three evaluations: cos(t1 - pi/2) = sin t1 and
        // cos(t1 + t2 - pi/2) = sin(t1 + t2), equal up to rounding.
        let (sc1, sc2) =
            known.unwrap_or_else(|| (sin_cos_lanes(p, &y[0]), sin_cos_lanes(p, &y[1])));
        let cos_a = std::array::from_fn(|l| sc1.0[l] * sc2.1[l] + sc1.1[l] * sc2.0[l]);
        (sc2, cos_a, sc1.0)
    } else {
        let sc2 = match known {
            Some((_, sc2)) => sc2,
            None => sin_cos_lanes(p, &y[1]),
        };
        let arg_a: [f64; L] = std::array::from_fn(|l| y[0][l] + y[1][l] - PI / 2.0);
        let arg_b: [f64; L] = std::array::from_fn(|l| y[0][l] - PI / 2.0);
        (sc2, arg_a.map(f64::cos), arg_b.map(f64::cos))
    };
    let mut out = [[0.0; L]; 4];
    for l in 0..L {
        let s = [y[0][l], y[1][l], y[2][l], y[3][l]];
        let d = dsdt(p, s, (sc2.0[l], sc2.1[l]), cos_a[l], cos_b[l], torque[l]);
        for k in 0..4 {
            out[k][l] = d[k];
        }
    }
    out
}

#[inline(always)]
fn axpy<const L: usize>(y: &Lanes<L>, a: f64, k: &Lanes<L>) -> Lanes<L> {
    std::array::from_fn(|i| std::array::from_fn(|l| y[i][l] + a * k[i][l]))
}

/// `(sin, cos)` lane by lane: libm's (Acrobot's angles lie mostly outside the range
/// that [`trig::sin_cos_lanes`] computes without libm), or the fast ones if asked for.
#[inline(always)]
fn sin_cos_lanes<const L: usize>(p: &AcrobotParams, x: &[f64; L]) -> SinCos<L> {
    if p.fast_trig {
        return trig::fast_sin_cos_lanes(x);
    }
    let sc = x.map(f64::sin_cos);
    (sc.map(|v| v.0), sc.map(|v| v.1))
}

/// One step of `L` envs: RK4 over `dsdt`, wrap and clip, as the reference's `step`.
/// The scalar step is this with one lane, the batch kernel with eight, so the two agree
/// bit for bit. Returns the new states and whether each is terminal.
#[inline(always)]
fn step_lanes<const L: usize>(
    p: &AcrobotParams,
    states: [&AcrobotState; L],
    torque: &[f64; L],
) -> ([AcrobotState; L], [bool; L]) {
    let y0: Lanes<L> = std::array::from_fn(|k| states.map(|s| s.s[k]));
    let known = (
        (states.map(|s| s.sc0.0), states.map(|s| s.sc0.1)),
        (states.map(|s| s.sc1.0), states.map(|s| s.sc1.1)),
    );
    let dt = p.dt;
    let dt2 = dt / 2.0;
    let k1 = dsdt_lanes(p, &y0, Some(known), torque);
    let y = axpy(&y0, dt2, &k1);
    let k2 = dsdt_lanes(p, &y, None, torque);
    let y = axpy(&y0, dt2, &k2);
    let k3 = dsdt_lanes(p, &y, None, torque);
    let y = axpy(&y0, dt, &k3);
    let k4 = dsdt_lanes(p, &y, None, torque);
    let ns: Lanes<L> = std::array::from_fn(|i| {
        std::array::from_fn(|l| {
            y0[i][l] + dt / 6.0 * (k1[i][l] + 2.0 * k2[i][l] + 2.0 * k3[i][l] + k4[i][l])
        })
    });
    let theta1 = ns[0].map(|x| wrap(x, -PI, PI));
    let theta2 = ns[1].map(|x| wrap(x, -PI, PI));
    let sc0 = sin_cos_lanes(p, &theta1);
    let sc1 = sin_cos_lanes(p, &theta2);
    let cos12: [f64; L] = if p.fast_trig {
        std::array::from_fn(|l| sc0.1[l] * sc1.1[l] - sc0.0[l] * sc1.0[l])
    } else {
        std::array::from_fn(|l| theta2[l] + theta1[l]).map(f64::cos)
    };
    let out = std::array::from_fn(|l| AcrobotState {
        s: [
            theta1[l],
            theta2[l],
            bound(ns[2][l], -p.max_vel_1, p.max_vel_1),
            bound(ns[3][l], -p.max_vel_2, p.max_vel_2),
        ],
        sc0: (sc0.0[l], sc0.1[l]),
        sc1: (sc1.0[l], sc1.1[l]),
    });
    let terminated = std::array::from_fn(|l| -sc0.1[l] - cos12[l] > 1.0);
    (out, terminated)
}

const LANES: usize = 8;

// The batch step, eight envs at a time through `step_lanes`.
crate::env::lane_kernel!(kernel, AcrobotParams, Acrobot, LANES, |p, b, i| {
    let torque: [f64; LANES] = std::array::from_fn(|l| p.avail_torque[b.actions[i + l] as usize]);
    let st = &mut b.states[i..i + LANES];
    let (next, term) = step_lanes(p, std::array::from_fn(|l| &st[l]), &torque);
    for l in 0..LANES {
        if b.active[i + l] {
            st[l] = next[l];
            let t = transition(term[l]);
            b.rewards[i + l] = t.reward;
            b.terminated[i + l] = t.terminated;
        }
    }
});

/// Reward -1 per step until the terminal state, 0 there.
#[inline(always)]
fn transition(terminated: bool) -> Transition {
    Transition {
        reward: if terminated { 0.0 } else { -1.0 },
        terminated,
    }
}

/// The largest angle magnitude a given state may have: `wrap` takes it back to
/// [-pi, pi] in at most ~160 shifts.
const MAX_STATE_ANGLE: f64 = 1000.0;

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
    super::classic_env! {
        params: AcrobotParams,
        keys: [
            max_episode_steps: super::steps_param,
            fast_trig: |v| super::param::<bool>(v, "true or false"),
        ],
        state: AcrobotState,
        action: i32,
        id: "Acrobot-v1",
        obs_dim: 6,
        step_cost_ns: 190,
        kernel: kernel,
        lanes: LANES,
    }

    fn observation_space(p: &AcrobotParams) -> Space {
        let high = vec![1.0, 1.0, 1.0, 1.0, p.max_vel_1 as f32, p.max_vel_2 as f32];
        Space::symmetric(high)
    }

    fn action_space(_: &AcrobotParams) -> Space {
        Space::Discrete { n: 3 }
    }

    fn reset(p: &AcrobotParams, rng: &mut Rng) -> AcrobotState {
        // The reference keeps the initial state in float32.
        let b = p.reset_bound;
        AcrobotState::new(
            p,
            std::array::from_fn(|_| f64::from(rng.uniform(-b, b) as f32)),
        )
    }

    #[inline]
    fn step(p: &AcrobotParams, st: &mut AcrobotState, a: &i32, _: &mut Rng) -> Transition {
        let ([next], [terminated]) = step_lanes(p, [&*st], &[p.avail_torque[*a as usize]]);
        *st = next;
        transition(terminated)
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

    fn state_from_slice(p: &AcrobotParams, v: &[f64]) -> Result<AcrobotState, String> {
        let s = crate::envs::fixed::<4>(v, "[theta1, theta2, dtheta1, dtheta2]")?;
        // Every state the env reaches has its angles wrapped into [-pi, pi] and its
        // velocities bounded by max_vel. `wrap` shifts one period at a time (as the
        // reference does), so a far-off angle, or a velocity that flings one far off in
        // a step, would loop for ever: such states are refused.
        let limits = [MAX_STATE_ANGLE, MAX_STATE_ANGLE, p.max_vel_1, p.max_vel_2];
        if let Some(i) = (0..4).find(|&i| s[i].abs() > limits[i]) {
            return Err(format!(
                "state[{i}] is {}, outside [-{l}, {l}]",
                s[i],
                l = limits[i]
            ));
        }
        Ok(AcrobotState::new(p, s))
    }
}
