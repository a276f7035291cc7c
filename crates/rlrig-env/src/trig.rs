//! `sin`/`cos` of small angles with libm's exact bits but without the call, so that
//! LLVM vectorises them across env lanes (CartPole's pole angle stays within ±0.21 rad).
//!
//! Why not simply call libm: Gymnasium's CartPole calls `math.sin`/`math.cos`, and the
//! golden trajectories match it only with libm's exact results, but a libm call cannot
//! be vectorised and was 40 % of a CartPole step. glibc's `sin` and `cos` are
//! correctly rounded except for values within about 0.0154 ulp of a rounding
//! midpoint, where they may round the other way (measured on 60 million arguments
//! while building this). So here the value is computed in double-double arithmetic
//! (Taylor series, error below 2^-62 relative for `|x| <= 0.25`), rounded, and the
//! rounding is *certified*: if the value lies within [`MARGIN`] ulp of a midpoint, or
//! `|x| > 0.25`, the caller takes libm's result instead (about 6 % of values). Every
//! certified result is libm's; the tests compare the two on millions of arguments.
//!
//! Only IEEE adds, multiplies and fused multiply-adds are used, each exactly rounded,
//! so scalar and vector code, and every CPU, give the same bits.
//!
//! [`wide_sin_cos`] does the same for any `|x| <= 2^20`: `k = round(x * 2/pi)`,
//! `r = x - k pi/2` as a double-double (pi/2 in three parts, the first product exact by
//! FMA), the series of `sin r` and `cos r` for `|r| <= pi/4` with their two largest
//! terms in double-double, and the quadrant `k mod 4`. Constants:
//! `scripts/trig_constants.py`. Pendulum (whose angle is never wrapped) steps 45 %
//! faster with it than with libm's `sincos`. Acrobot does not use it: for its 14 calls
//! per step it gained ~10 % (the double-double work costs about what glibc's
//! table-driven code does), not worth its blocks of 64 envs.
//!
//! [`fast_sin_cos_lanes`] is the opt-in exception to libm's bits (Acrobot's
//! `fast_trig`): the same reduction and series in plain doubles, within 1 ulp, no
//! certification and no libm; 4.0 ns per sin+cos pair against libm's 13.9 and the
//! certified path's 10.0 (`cargo bench -p rlrig-env --bench trig`, native build).

/// Largest `|x|` computed here.
const MAX_ARG: f64 = 0.25;
/// Certification margin in ulps: twice the largest distance from a midpoint at which
/// glibc was seen to round the other way.
const MARGIN: f64 = 0.03;

type Dd = (f64, f64);

/// 1/6 as a double-double.
const INV6: Dd = (
    f64::from_bits(0x3fc5555555555555),
    f64::from_bits(0x3c65555555555555),
);
/// `1/(2n+1)!` for n = 2..=9: `sin x = x - x^3/6 + x^5 * sum_n (-x^2)^(n-2)/(2n+1)!`.
/// For `|x| <= 0.25` the first six terms reach 2^-68 of the result, for `|x| <= pi/4`
/// all eight.
const SIN_TAIL: [f64; 8] = [
    f64::from_bits(0x3f81111111111111), // 1/5!
    f64::from_bits(0x3f2a01a01a01a01a), // 1/7!
    f64::from_bits(0x3ec71de3a556c734), // 1/9!
    f64::from_bits(0x3e5ae64567f544e4), // 1/11!
    f64::from_bits(0x3de6124613a86d09), // 1/13!
    f64::from_bits(0x3d6ae7f3e733b81f), // 1/15!
    f64::from_bits(0x3ce952c77030ad4a), // 1/17!
    f64::from_bits(0x3c62f49b46814157), // 1/19!
];
/// `1/(2n)!` for n = 2..=9: `cos x = 1 - x^2/2 + x^4 * sum_n (-x^2)^(n-2)/(2n)!`. For
/// `|x| <= 0.25` the first six terms do; for `|x| <= pi/4` the `x^4/24` term is summed in
/// double-double and the rest from `1/6!`.
const COS_TAIL: [f64; 8] = [
    f64::from_bits(0x3fa5555555555555), // 1/4!
    f64::from_bits(0x3f56c16c16c16c17), // 1/6!
    f64::from_bits(0x3efa01a01a01a01a), // 1/8!
    f64::from_bits(0x3e927e4fb7789f5c), // 1/10!
    f64::from_bits(0x3e21eed8eff8d898), // 1/12!
    f64::from_bits(0x3da93974a8c07c9d), // 1/14!
    f64::from_bits(0x3d2ae7f3e733b81f), // 1/16!
    f64::from_bits(0x3ca6827863b97d97), // 1/18!
];

/// The exact product `a * b = p + e` (no overflow or underflow here). `mul_add` is a
/// fused multiply-add, exact by definition: one instruction where the kernel is
/// compiled for FMA, a (slow, equally exact) library call elsewhere.
#[inline(always)]
fn two_prod(a: f64, b: f64) -> Dd {
    let p = a * b;
    (p, a.mul_add(b, -p))
}

/// `a + b = s + e` exactly when `|a| >= |b|`.
#[inline(always)]
fn fast_two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    (s, b - (s - a))
}

/// `sum_i c[i] w^i` by Horner's rule (`c` is a constant slice: the loop unrolls).
#[inline(always)]
fn horner(w: f64, c: &[f64]) -> f64 {
    let (last, rest) = c.split_last().expect("coefficients");
    rest.iter().rev().fold(*last, |acc, &ci| acc * w + ci)
}

/// Whether every value within `MARGIN` ulps of the double-double `v` rounds to `v.0`.
#[inline(always)]
fn certain(v: Dd) -> bool {
    // The binade's power of two times 2^-52 is `v.0`'s ulp (or twice the ulp below a
    // power of two, which only widens the margin).
    let e = f64::from_bits(v.0.to_bits() & 0x7ff0_0000_0000_0000) * (MARGIN * f64::EPSILON);
    v.0 + (v.1 + e) == v.0 && v.0 + (v.1 - e) == v.0
}

/// `(sin x, cos x, sin is libm's, cos is libm's)`, branch-free. A value whose flag is
/// false is meaningless: the caller must take libm's.
#[inline(always)]
pub fn small_sin_cos(x: f64) -> (f64, f64, bool, bool) {
    let (zh, zl) = two_prod(x, x);
    let w = -zh;
    // x^3 = ch + cl and x^3/6 = vh + vl, exact to 2^-100.
    let (ch, c_err) = two_prod(x, zh);
    let cl = c_err + x * zl;
    let (vh, v_err) = two_prod(ch, INV6.0);
    let vl = v_err + (ch * INV6.1 + cl * INV6.0);
    // The rest of each series is below 2e-4 of the result: plain doubles suffice.
    let s_tail = ch * zh * horner(w, &SIN_TAIL[..6]);
    let (sh, se) = fast_two_sum(x, -vh);
    let sin = fast_two_sum(sh, se - vl + s_tail);
    let c_tail = zh * zh * horner(w, &COS_TAIL[..6]);
    let (a, ae) = fast_two_sum(1.0, -0.5 * zh);
    let cos = fast_two_sum(a, ae - 0.5 * zl + c_tail);
    let in_range = x.abs() <= MAX_ARG;
    // sin(±0) keeps the sign of zero.
    let sin_ok = x == 0.0 || certain(sin);
    let sin = if x == 0.0 { x } else { sin.0 };
    (sin, cos.0, in_range && sin_ok, in_range && certain(cos))
}

/// `(sin x, cos x)` of `N` lanes, equal to libm's: [`small_sin_cos`] for every lane
/// (vectorised when inlined into a SIMD kernel), then libm for the uncertain values.
#[inline(always)]
pub fn sin_cos_lanes<const N: usize>(x: &[f64; N]) -> ([f64; N], [f64; N]) {
    const { assert!(N <= 32, "at most 32 lanes") };
    let mut s = [0.0; N];
    let mut c = [0.0; N];
    let mut pending = 0u64;
    for l in 0..N {
        let (sl, cl, sin_ok, cos_ok) = small_sin_cos(x[l]);
        s[l] = sl;
        c[l] = cl;
        pending |= (u64::from(!sin_ok) << l) | (u64::from(!cos_ok) << (l + N));
    }
    // One loop over the set bits: a few mispredicted branches per call, not one per lane.
    while pending != 0 {
        let bit = pending.trailing_zeros() as usize;
        pending &= pending - 1;
        if bit < N {
            s[bit] = x[bit].sin();
        } else {
            c[bit - N] = x[bit - N].cos();
        }
    }
    (s, c)
}

/// `x.sin_cos()` with the same bits, computed as one lane of [`sin_cos_lanes`];
/// dispatches at run time to a build with FMA instructions.
#[multiversion::multiversion(targets("x86_64+avx2+fma", "aarch64+neon"))]
pub fn sin_cos(x: f64) -> (f64, f64) {
    let (s, c) = sin_cos_lanes(&[x]);
    (s[0], c[0])
}

/// pi/2 = `PIO2_1 + PIO2_2 + PIO2_3` to 160 bits.
const PIO2_1: f64 = f64::from_bits(0x3ff921fb54442d18);
const PIO2_2: f64 = f64::from_bits(0x3c91a62633145c07);
const PIO2_3: f64 = f64::from_bits(0xb91f1976b7ed8fbc);
const TWO_OVER_PI: f64 = f64::from_bits(0x3fe45f306dc9c883);
/// `1.5 * 2^52`: adding it rounds to an integer (ties to even) and leaves that
/// integer's low bits in the mantissa.
const ROUNDER: f64 = 6755399441055744.0;
/// Largest `|x|` [`wide_sin_cos`] reduces itself: `k` stays below 2^20, so
/// `x - k * PIO2_1` is exact and `k * PIO2_3` negligible.
const WIDE_MAX_ARG: f64 = 1048576.0;
/// Below this `sin x = x` and `cos x = 1` after rounding (2^-27).
const TINY: f64 = 7.450580596923828e-9;
/// 1/24 as a double-double.
const INV24: Dd = (
    f64::from_bits(0x3fa5555555555555),
    f64::from_bits(0x3c45555555555555),
);
/// `v` with its sign flipped when `flip` is 1, without a branch.
#[inline(always)]
fn negate_if(v: Dd, flip: u64) -> Dd {
    let m = flip << 63;
    (
        f64::from_bits(v.0.to_bits() ^ m),
        f64::from_bits(v.1.to_bits() ^ m),
    )
}

/// `(sin x, cos x, sin is libm's, cos is libm's)` for any `x`, branch-free; a value
/// whose flag is false is meaningless and the caller must take libm's (about 6 % of
/// values, and every `|x| > 2^20`, NaN and infinity).
#[inline(always)]
pub fn wide_sin_cos(x: f64) -> (f64, f64, bool, bool) {
    let shifted = x * TWO_OVER_PI + ROUNDER;
    let quadrant = shifted.to_bits() & 3;
    let k = shifted - ROUNDER;
    // r = rh + rl = x - k pi/2: the first step exact (FMA, see WIDE_MAX_ARG), then the
    // double-double tail of pi/2.
    let t = (-k).mul_add(PIO2_1, x);
    let (ph, pl) = two_prod(k, PIO2_2);
    let rh = t - ph;
    let rl = ((t - rh) - ph) - (pl + k * PIO2_3);
    // Next to a nonzero multiple of pi/2 the reduction loses relative accuracy: libm.
    let reduced_ok = k == 0.0 || rh.abs() > TINY;
    // rh^2 = zh + zl, rh^3 = ch + cl, rh^4 = qh + ql, exact to about 2^-104.
    let (zh, zl) = two_prod(rh, rh);
    let (ch, c_err) = two_prod(rh, zh);
    let cl = c_err + rh * zl;
    let (qh, q_err) = two_prod(zh, zh);
    let ql = q_err + 2.0 * zh * zl;
    let w = -zh;
    // sin(rh + rl) = sin rh + rl cos rh (rl is below 2^-53 rh: three terms of cos do).
    let (vh, v_err) = two_prod(ch, INV6.0);
    let vl = v_err + (ch * INV6.1 + cl * INV6.0);
    let s_tail = ch * zh * horner(w, &SIN_TAIL);
    let s_rl = rl * (w * (w * INV24.0 + 0.5) + 1.0);
    let (sh, se) = fast_two_sum(rh, -vh);
    let s = fast_two_sum(sh, se - vl + (s_tail + s_rl));
    // cos(rh + rl) = cos rh - rl sin rh.
    let (uh, u_err) = two_prod(qh, INV24.0);
    let ul = u_err + (qh * INV24.1 + ql * INV24.0);
    let c_tail = qh * w * horner(w, &COS_TAIL[1..]);
    let c_rl = rl * rh * (w * (w * SIN_TAIL[0] + INV6.0) + 1.0);
    let (a, ae) = fast_two_sum(1.0, -0.5 * zh);
    let (b, be) = fast_two_sum(a, uh);
    let c = fast_two_sum(b, ae + be + ((ul - 0.5 * zl) + (c_tail - c_rl)));
    // Quadrant q: sin x = (s, c, -s, -c)[q], cos x = (c, -s, -c, s)[q].
    let odd = quadrant & 1 == 1;
    let sin = negate_if(if odd { c } else { s }, (quadrant >> 1) & 1);
    let cos = negate_if(if odd { s } else { c }, ((quadrant + 1) >> 1) & 1);
    let tiny = x.abs() < TINY;
    // `tiny` covers ±0 (sin keeps the sign of zero) and subnormals.
    let sin_v = if tiny { x } else { sin.0 };
    let cos_v = if tiny { 1.0 } else { cos.0 };
    let ok = tiny || (x.abs() <= WIDE_MAX_ARG && reduced_ok);
    (
        sin_v,
        cos_v,
        ok && (tiny || certain(sin)),
        ok && (tiny || certain(cos)),
    )
}

/// `(sin x, cos x)` of `N` lanes with libm's bits: [`wide_sin_cos`] for every lane
/// (vectorised when inlined into a SIMD kernel), then libm for the uncertain values.
#[inline(always)]
pub fn wide_sin_cos_lanes<const N: usize>(x: &[f64; N]) -> ([f64; N], [f64; N]) {
    let mut s = [0.0; N];
    let mut c = [0.0; N];
    // 1: sin uncertain, 2: cos uncertain. Integers, not bools, keep the loop vectorised.
    let mut bad = [0u64; N];
    for l in 0..N {
        let (sl, cl, sin_ok, cos_ok) = wide_sin_cos(x[l]);
        s[l] = sl;
        c[l] = cl;
        bad[l] = u64::from(!sin_ok) | (u64::from(!cos_ok) << 1);
    }
    if bad.iter().fold(0, |a, &b| a | b) != 0 {
        for l in 0..N {
            if bad[l] & 1 != 0 {
                s[l] = x[l].sin();
            }
            if bad[l] & 2 != 0 {
                c[l] = x[l].cos();
            }
        }
    }
    (s, c)
}

/// `(sin x, cos x)` in plain double arithmetic, for the opt-in fast modes (Acrobot's
/// `fast_trig`): not libm's bits. `k = round(x * 2/pi)`, `r = x - k pi/2` (the first
/// product exact by FMA), the Taylor series of `sin r` and `cos r` for `|r| <= pi/4` in
/// doubles, and the quadrant. Only IEEE adds, multiplies and fused multiply-adds, so
/// every CPU gives the same bits; the result is within 1 ulp of the true value, or
/// 2^-60 absolute next to the zeros of sin and cos (the tests measure both). Branch-
/// free: a caller must take libm for `|x| > 2^20`, NaN and infinity (`ok` false).
#[inline(always)]
pub fn fast_sin_cos(x: f64) -> (f64, f64, bool) {
    let shifted = x * TWO_OVER_PI + ROUNDER;
    let quadrant = shifted.to_bits() & 3;
    let k = shifted - ROUNDER;
    let r = (-k).mul_add(PIO2_2, (-k).mul_add(PIO2_1, x));
    let z = r * r;
    let w = -z;
    // sin r = r + r^3 (-1/6 + z/5! - ...), cos r = 1 - z/2 + z^2 (1/4! - z/6! + ...).
    let sp = z.mul_add(horner(w, &SIN_TAIL), -INV6.0);
    // sin(-0) = -0: the sum alone would give +0.
    let s = if r == 0.0 { r } else { (r * z).mul_add(sp, r) };
    let hz = 0.5 * z;
    let one_minus = 1.0 - hz;
    // The rounding error of `1 - z/2`, recovered exactly, keeps cos within an ulp.
    let c = one_minus + (((1.0 - one_minus) - hz) + z * z * horner(w, &COS_TAIL));
    let odd = quadrant & 1 == 1;
    let (sv, cv) = if odd { (c, s) } else { (s, c) };
    let sin = f64::from_bits(sv.to_bits() ^ (((quadrant >> 1) & 1) << 63));
    let cos = f64::from_bits(cv.to_bits() ^ ((((quadrant + 1) >> 1) & 1) << 63));
    (sin, cos, x.abs() <= WIDE_MAX_ARG)
}

/// [`fast_sin_cos`] of `N` lanes (vectorised when inlined into a SIMD kernel), libm for
/// lanes out of its range.
#[inline(always)]
pub fn fast_sin_cos_lanes<const N: usize>(x: &[f64; N]) -> ([f64; N], [f64; N]) {
    let mut s = [0.0; N];
    let mut c = [0.0; N];
    // Integers, not bools, keep the loop vectorised.
    let mut out_of_range = [0u64; N];
    for l in 0..N {
        let (sl, cl, ok) = fast_sin_cos(x[l]);
        s[l] = sl;
        c[l] = cl;
        out_of_range[l] = u64::from(!ok);
    }
    if out_of_range.iter().any(|&b| b != 0) {
        for l in 0..N {
            if out_of_range[l] != 0 {
                (s[l], c[l]) = x[l].sin_cos();
            }
        }
    }
    (s, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, Rng};

    fn check(x: f64) {
        let (s, c) = sin_cos(x);
        assert_eq!(
            (s.to_bits(), c.to_bits()),
            (x.sin().to_bits(), x.cos().to_bits()),
            "sin_cos({x:e})"
        );
    }

    #[test]
    fn equals_libm_bit_for_bit() {
        let mut rng = Rng::stream(7, Purpose::Env, 0);
        let n = crate::test_cases(3_000_000);
        let (mut in_range, mut uncertain) = (0u32, 0u32);
        for scale in [0.25, 0.13, 1e-3, 1.0] {
            for _ in 0..n {
                let x = rng.uniform(-scale, scale);
                if x.abs() <= MAX_ARG {
                    let (_, _, sin_ok, cos_ok) = small_sin_cos(x);
                    in_range += 2;
                    uncertain += u32::from(!sin_ok) + u32::from(!cos_ok);
                }
                check(x);
            }
        }
        assert_few_fall_back(uncertain, in_range);
        for x in [
            0.0, -0.0, 1e-300, -5e-324, 1e-9, 0.25, -0.25, 0.2500001, 3.0, 1e300,
        ] {
            check(x);
        }
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let (s, c) = sin_cos(x);
            assert!(s.is_nan() && c.is_nan());
        }
    }

    /// The speed is gone if many values fall back to libm (~6 % expected): fewer than a
    /// tenth of the `values` computed may be `uncertain`.
    fn assert_few_fall_back(uncertain: u32, values: u32) {
        assert!(
            uncertain < values / 10,
            "{uncertain} of {values} values uncertain"
        );
    }

    /// `wide_sin_cos_lanes` against libm, lane by lane.
    fn check_wide<const N: usize>(x: &[f64; N]) {
        let (s, c) = wide_sin_cos_lanes(x);
        for l in 0..N {
            let want = (x[l].sin().to_bits(), x[l].cos().to_bits());
            assert_eq!(
                (s[l].to_bits(), c[l].to_bits()),
                want,
                "sin_cos({:e})",
                x[l]
            );
        }
    }

    /// Multiples of pi/2 and their neighbours (where the reduction cancels), zeros, tiny
    /// values and the end of the reduced range.
    fn hard_angles() -> Vec<f64> {
        let mut x = vec![0.0, -0.0, 1e-300, -5e-324, 1e-8, WIDE_MAX_ARG];
        for k in -40..=40 {
            let m = f64::from(k) * std::f64::consts::FRAC_PI_2;
            x.extend([m, m.next_up(), m.next_down(), m + 1e-9, m - 1e-7]);
        }
        x
    }

    /// `check` on `xs` in groups of `N` lanes, the last one padded with 0.5.
    fn in_lanes<const N: usize>(xs: &[f64], mut check: impl FnMut(&[f64; N])) {
        for chunk in xs.chunks(N) {
            let mut x = [0.5; N];
            x[..chunk.len()].copy_from_slice(chunk);
            check(&x);
        }
    }

    #[test]
    fn wide_equals_libm_bit_for_bit() {
        let mut rng = Rng::stream(9, Purpose::Env, 0);
        let n = crate::test_cases(1_000_000);
        let (mut values, mut uncertain) = (0u32, 0u32);
        // Acrobot's angles (±pi wrapped, ±14 inside a Runge-Kutta step), Pendulum's
        // unbounded ones, and larger quadrant counts.
        for scale in [0.5, 4.0, 14.0, 100.0, 1e4, WIDE_MAX_ARG] {
            for _ in 0..n / 8 {
                let x: [f64; 8] = std::array::from_fn(|_| rng.uniform(-scale, scale));
                for &v in &x {
                    let (_, _, sin_ok, cos_ok) = wide_sin_cos(v);
                    values += 2;
                    uncertain += u32::from(!sin_ok) + u32::from(!cos_ok);
                }
                check_wide(&x);
            }
        }
        assert_few_fall_back(uncertain, values);
        // The hard angles, the range's ends, tiny and special values; NaN stays NaN.
        let mut special = hard_angles();
        special.extend([
            TINY,
            -TINY,
            -WIDE_MAX_ARG,
            WIDE_MAX_ARG * 1.5,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]);
        in_lanes::<4>(&special, check_wide);
        let (s, c) = wide_sin_cos_lanes(&[f64::NAN]);
        assert!(s[0].is_nan() && c[0].is_nan());
    }

    #[test]
    fn fast_is_within_an_ulp_of_libm_and_the_same_in_every_lane() {
        let mut rng = Rng::stream(10, Purpose::Env, 0);
        let n = crate::test_cases(1_000_000);
        let (mut values, mut differ) = (0u32, 0u32);
        let mut check = |x: &[f64; 8]| {
            let (s, c) = fast_sin_cos_lanes(x);
            for l in 0..8 {
                // One lane alone (scalar code) gives the same bits as the vector loop.
                let (s1, c1) = fast_sin_cos_lanes(&[x[l]]);
                assert_eq!(
                    (s[l].to_bits(), c[l].to_bits()),
                    (s1[0].to_bits(), c1[0].to_bits())
                );
                let (ws, wc) = x[l].sin_cos();
                for (got, want) in [(s[l], ws), (c[l], wc)] {
                    // Within 1 ulp, or 2^-60 absolute next to a zero of sin or cos.
                    let tol = (want.abs() * f64::EPSILON).max(2f64.powi(-60));
                    assert!(
                        (got - want).abs() <= tol,
                        "fast_sin_cos({:e}): {got:e} vs libm {want:e}",
                        x[l]
                    );
                    values += 1;
                    differ += u32::from(got != want);
                }
            }
        };
        for scale in [0.5, 4.0, 14.0, 100.0, 1e4, WIDE_MAX_ARG] {
            for _ in 0..n / 8 {
                check(&std::array::from_fn(|_| rng.uniform(-scale, scale)));
            }
        }
        in_lanes::<8>(&hard_angles(), check);
        // Not libm: a sizeable share of values differ in the last bit (a third here).
        assert!(differ > values / 20, "{differ} of {values} differ");
        // Out of range: libm's.
        let x = [WIDE_MAX_ARG * 1.5, 1e300, f64::INFINITY, f64::NAN];
        let (s, c) = fast_sin_cos_lanes(&x);
        for l in 0..2 {
            assert_eq!((s[l], c[l]), x[l].sin_cos());
        }
        assert!(s[2].is_nan() && c[2].is_nan() && s[3].is_nan() && c[3].is_nan());
        // sin(-0) keeps its sign.
        assert!(fast_sin_cos_lanes(&[-0.0]).0[0].is_sign_negative());
    }

    #[test]
    fn certification_is_what_keeps_the_bits() {
        // Without the margin the double-double rounding is correct rounding, which
        // glibc does not always do: some values must differ.
        let mut rng = Rng::stream(8, Purpose::Env, 0);
        let differs = (0..1_000_000).any(|_| {
            let x = rng.uniform(-0.25, 0.25);
            let (s, _, _, _) = small_sin_cos(x);
            s != x.sin()
        });
        assert!(differs);
    }
}
