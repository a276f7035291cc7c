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
/// `1/(2n+1)!` for n = 2..=7: `sin x = x - x^3/6 + x^5 * sum_n (-x^2)^(n-2)/(2n+1)!`.
const SIN_TAIL: [f64; 6] = [
    f64::from_bits(0x3f81111111111111), // 1/5!
    f64::from_bits(0x3f2a01a01a01a01a), // 1/7!
    f64::from_bits(0x3ec71de3a556c734), // 1/9!
    f64::from_bits(0x3e5ae64567f544e4), // 1/11!
    f64::from_bits(0x3de6124613a86d09), // 1/13!
    f64::from_bits(0x3d6ae7f3e733b81f), // 1/15!
];
/// `1/(2n)!` for n = 2..=7: `cos x = 1 - x^2/2 + x^4 * sum_n (-x^2)^(n-2)/(2n)!`.
const COS_TAIL: [f64; 6] = [
    f64::from_bits(0x3fa5555555555555), // 1/4!
    f64::from_bits(0x3f56c16c16c16c17), // 1/6!
    f64::from_bits(0x3efa01a01a01a01a), // 1/8!
    f64::from_bits(0x3e927e4fb7789f5c), // 1/10!
    f64::from_bits(0x3e21eed8eff8d898), // 1/12!
    f64::from_bits(0x3da93974a8c07c9d), // 1/14!
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

#[inline(always)]
fn horner(w: f64, c: &[f64; 6]) -> f64 {
    c[..5].iter().rev().fold(c[5], |acc, &ci| acc * w + ci)
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
    let s_tail = ch * zh * horner(w, &SIN_TAIL);
    let (sh, se) = fast_two_sum(x, -vh);
    let sin = fast_two_sum(sh, se - vl + s_tail);
    let c_tail = zh * zh * horner(w, &COS_TAIL);
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
        let n = if cfg!(debug_assertions) {
            300_000
        } else {
            3_000_000
        };
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
        // The speed is gone if many values fall back (~6 % expected).
        assert!(
            uncertain < in_range / 10,
            "{uncertain} of {in_range} values uncertain"
        );
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
