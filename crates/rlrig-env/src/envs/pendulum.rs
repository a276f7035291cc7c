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
use crate::trig::wide_sin_cos_lanes;

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
    /// the next step needs the sine, so each step computes them once instead of three
    /// times (libm's `sincos`, or its bits from the batch kernel's certified series).
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

/// `x ** 2` as NumPy computes it for a float64 scalar: libm's `pow`, which rounds the
/// exact square the other way from `x * x` when the square lies very close to the
/// midpoint between two doubles (0.08 % of arguments, all within 0.0084 ulp of the
/// midpoint over 80 million samples; glibc documents pow's error as about 0.52 ulp).
/// So `x * x` is returned when the exact square is farther than 0.05 ulp from a
/// midpoint (its rounding error is exact by Dekker's product), and `pow` is called for
/// the rest (~10 %): equal to `pow` bit for bit at a fifth of its cost (the tests
/// compare them on millions of arguments).
#[inline]
pub(crate) fn np_square(x: f64) -> f64 {
    let hi = x * x;
    // Dekker: x = xh + xl with 26-bit halves, so every partial product is exact.
    let c = 134_217_729.0 * x; // 2^27 + 1
    let xh = c - (c - x);
    let xl = x - xh;
    let lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl;
    // `hi`'s ulp; at a power of two the ulp below is half as big, so leave those to pow,
    // as well as squares near overflow or underflow where the split is not exact.
    let ulp = f64::from_bits(hi.to_bits() & 0x7ff0_0000_0000_0000) * f64::EPSILON;
    let from_midpoint = (lo.abs() - 0.5 * ulp).abs();
    let safe = hi.to_bits() & 0x000f_ffff_ffff_ffff != 0 && (1e-290..1e290).contains(&hi);
    if safe && from_midpoint > 0.05 * ulp {
        hi
    } else {
        x.powf(black_box(2.0))
    }
}

/// The float32 `x ** 2` (libm `powf`), the same way: the exact square of a float32 is a
/// double; `powf` rounds it the other way from `x * x` only within 0.0017 ulp of a
/// midpoint (0.15 % of 50 million samples), so `x * x` is returned when it is farther
/// than 0.02 ulp.
#[inline]
pub(crate) fn np_square_f32(x: f32) -> f32 {
    let hi = x * x;
    let exact = f64::from(x) * f64::from(x);
    let ulp = f64::from(f32::from_bits(hi.to_bits() & 0x7f80_0000) * f32::EPSILON);
    let from_midpoint = ((exact - f64::from(hi)).abs() - 0.5 * ulp).abs();
    let safe = hi.to_bits() & 0x007f_ffff != 0 && (1e-30..1e30).contains(&hi);
    if safe && from_midpoint > 0.02 * ulp {
        hi
    } else {
        x.powf(black_box(2.0))
    }
}

/// NumPy's float64 `%` (floored remainder: the result takes the divisor's sign).
#[inline]
pub(crate) fn np_remainder(a: f64, b: f64) -> f64 {
    // fmod(a, b) is `a` itself when |a| < |b| (exactly, as fmod always is); Rust's `%`
    // is a software fmod call, which cost Pendulum 7 % of its step.
    let m = if a.abs() < b.abs() { a } else { a % b };
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
    super::classic_env! {
        params: PendulumParams,
        keys: [
            max_episode_steps: super::steps_param,
            g: super::finite_param,
        ],
        state: PendulumState,
        action: [f32; 1],
        id: "Pendulum-v1",
        obs_dim: 3,
        step_cost_ns: 110,
        kernel: kernel,
        lanes: LANES,
    }

    fn observation_space(p: &PendulumParams) -> Space {
        let high = vec![1.0, 1.0, p.max_speed as f32];
        Space::symmetric(high)
    }

    fn action_space(p: &PendulumParams) -> Space {
        Space::symmetric(vec![p.max_torque as f32])
    }

    fn reset(p: &PendulumParams, rng: &mut Rng) -> PendulumState {
        let theta = rng.uniform(-p.reset_theta, p.reset_theta);
        PendulumState::new(theta, rng.uniform(-p.reset_theta_dot, p.reset_theta_dot))
    }

    #[inline]
    fn step(p: &PendulumParams, s: &mut PendulumState, a: &[f32; 1], _: &mut Rng) -> Transition {
        let (theta, theta_dot, reward) = advance(p, s, a);
        *s = PendulumState::new(theta, theta_dot);
        Transition {
            reward,
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

/// The reference's step up to the new `(theta, theta_dot)` and the reward, without the
/// new angle's sine and cosine.
#[inline(always)]
fn advance(p: &PendulumParams, s: &PendulumState, a: &[f32; 1]) -> (f64, f64, f64) {
    let (th, thdot) = (s.theta, s.theta_dot);
    // np.clip on a float32 array stays float32.
    let u = a[0].max(-p.max_torque as f32).min(p.max_torque as f32);
    // float32 ** 2 and 0.001 * float32 stay float32; the sum promotes to float64.
    let u_cost = 0.001f32 * np_square_f32(u);
    let costs = np_square(angle_normalize(th)) + 0.1 * np_square(thdot) + f64::from(u_cost);
    // 3.0 / (m * l**2) is a Python float, so its product with u is float32 too.
    let torque_term = (3.0 / (p.m * p.l * p.l)) as f32 * u;
    let newthdot = thdot + (3.0 * p.g / (2.0 * p.l) * s.sin_theta + f64::from(torque_term)) * p.dt;
    let newthdot = newthdot.max(-p.max_speed).min(p.max_speed);
    (th + newthdot * p.dt, newthdot, -costs)
}

/// Envs per block of the batch kernel (16 and 64 ran within 2 % of each other).
const LANES: usize = 16;

// The batch step: `advance` env by env, then the new angles' sine and cosine for a
// block of envs at once with libm's bits (`wide_sin_cos_lanes`: vectorised, libm only
// for the values it cannot certify; libm's `sincos` was 44 % of a step).
crate::env::lane_kernel!(kernel, PendulumParams, Pendulum, LANES, |p, b, i| {
    let mut theta = [0.0; LANES];
    let mut theta_dot = [0.0; LANES];
    let mut reward = [0.0; LANES];
    for l in 0..LANES {
        (theta[l], theta_dot[l], reward[l]) = advance(p, &b.states[i + l], &b.actions[i + l]);
    }
    let (sin, cos) = wide_sin_cos_lanes(&theta);
    for l in 0..LANES {
        if b.active[i + l] {
            b.states[i + l] = PendulumState {
                theta: theta[l],
                theta_dot: theta_dot[l],
                sin_theta: sin[l],
                cos_theta: cos[l],
            };
            b.rewards[i + l] = reward[l];
            b.terminated[i + l] = false;
        }
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squares_equal_libm_pow_bit_for_bit() {
        // `black_box`: LLVM rewrites `powf(x, 2.0)` with a constant 2 into `x * x`.
        let mut rng = Rng::stream(5, crate::rng::Purpose::Env, 0);
        let check = |x: f64| {
            assert_eq!(
                np_square(x).to_bits(),
                x.powf(black_box(2.0)).to_bits(),
                "{x:e}"
            );
            let y = x as f32;
            assert_eq!(
                np_square_f32(y).to_bits(),
                y.powf(black_box(2.0)).to_bits(),
                "{y:e}"
            );
        };
        let n = crate::test_cases(2_000_000);
        for scale in [1.0, 8.0, 1e3, 1e-3] {
            for _ in 0..n {
                check(rng.uniform(-scale, scale));
            }
        }
        let specials = [
            0.0,
            -0.0,
            1.0,
            2f64.sqrt(),
            1e-200,
            1e200,
            f64::NAN,
            f64::INFINITY,
        ];
        specials.into_iter().for_each(check);
    }

    #[test]
    fn remainder_is_floored_like_numpy() {
        assert_eq!(np_remainder(5.0, 3.0), 2.0);
        assert_eq!(np_remainder(-1.0, 3.0), 2.0);
        assert_eq!(np_remainder(1.0, -3.0), -2.0);
        assert_eq!(np_remainder(-6.0, 3.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(np_remainder(-0.0, 3.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(np_remainder(-1.5, 3.0), 1.5);
        assert_eq!(np_remainder(1.5, -3.0), -1.5);
        assert_eq!(np_remainder(7.0, 3.0), 1.0);
        assert!(np_remainder(f64::NAN, 3.0).is_nan());
        assert!(np_remainder(1.0, 0.0).is_nan());
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
