//! The matrix product of small-network training and inference, without packing:
//! `c[i][j] += sum_t a(i, t) * b[t][j]` where `b`'s rows and `c`'s rows are contiguous
//! and `a` has any strides (so `a^T b`, the weight gradient, is the same kernel).
//!
//! Blocks of `R` rows by `P` vectors of columns stay in registers across the whole sum
//! (4 x 64 on AVX-512: 16 accumulators, 4 vectors of a `b` row loaded once per `t` and
//! used by every row). No copy of either operand is made, which is why this beats
//! `matrixmultiply` on RL's shapes: measured on a Zen 4 core (one 512-bit FMA a cycle),
//! 64x64x64 in 4.6 us (57 G multiply-adds/s, the core's peak) against matrixmultiply's
//! 6.7 us, of which a third is packing; 128 rows 9.3 against 13.2 us.
//!
//! Every element is summed the same way on every instruction set: an accumulator from
//! zero, one fused multiply-add per `t` in order, then added to `c`. FMA is correctly
//! rounded, so AVX-512, AVX2+FMA, NEON and the scalar fallback (`f32::mul_add`) give
//! the same bits; only the block shapes differ.

use std::cell::RefCell;
use std::ops::Range;

use super::Scratch;

/// Vectors of `f32` lanes on one instruction set.
trait Simd {
    const LANES: usize;
    type V: Copy;
    /// # Safety
    /// The instruction set is available (callers are compiled for it).
    unsafe fn zero() -> Self::V;
    /// # Safety
    /// As [`Simd::zero`].
    unsafe fn splat(x: f32) -> Self::V;
    /// # Safety
    /// `p..p + LANES` is readable.
    unsafe fn load(p: *const f32) -> Self::V;
    /// # Safety
    /// `p..p + LANES` is writable.
    unsafe fn store(p: *mut f32, v: Self::V);
    /// Lanes `0..n` from `p`, the others +0 (`0 < n <= LANES`): the last, partial vector
    /// of a row whose length is not a multiple of `LANES`.
    /// # Safety
    /// `p..p + n` is readable (nothing past it is read).
    unsafe fn load_part(p: *const f32, n: usize) -> Self::V;
    /// Writes lanes `0..n` of `v` to `p` (`0 < n <= LANES`), nothing past them.
    /// # Safety
    /// `p..p + n` is writable.
    unsafe fn store_part(p: *mut f32, v: Self::V, n: usize);
    /// `c + a * b`, rounded once.
    /// # Safety
    /// As [`Simd::zero`].
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// # Safety
    /// As [`Simd::zero`].
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// As [`Simd::zero`].
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// `a - b`.
    /// # Safety
    /// As [`Simd::zero`].
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// Each lane of `v` where `h`'s lane is above zero, else +0 (a NaN `h` gives +0):
    /// the gradient through a ReLU whose outputs are `h`.
    /// # Safety
    /// As [`Simd::zero`].
    unsafe fn where_positive(v: Self::V, h: Self::V) -> Self::V;
}

/// One lane: the reference every vector version equals.
struct Scalar;

impl Simd for Scalar {
    const LANES: usize = 1;
    type V = f32;
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> f32 {
        x
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> f32 {
        // SAFETY: the caller guarantees `p` is readable.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: f32) {
        // SAFETY: the caller guarantees `p` is writable.
        unsafe { *p = v }
    }
    #[inline(always)]
    unsafe fn load_part(p: *const f32, _n: usize) -> f32 {
        // SAFETY: one lane: `n == 1`, and the caller guarantees `p` is readable.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn store_part(p: *mut f32, v: f32, _n: usize) {
        // SAFETY: one lane: `n == 1`, and the caller guarantees `p` is writable.
        unsafe { *p = v }
    }
    #[inline(always)]
    unsafe fn fma(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
    #[inline(always)]
    unsafe fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    unsafe fn mul(a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    unsafe fn sub(a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    unsafe fn where_positive(v: f32, h: f32) -> f32 {
        if h > 0.0 { v } else { 0.0 }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Simd;
    use std::arch::x86_64::*;

    /// An x86 vector type's [`Simd`] impl from its intrinsics.
    macro_rules! x86_simd {
        ($name:ident, $v:ty, $lanes:expr, $zero:ident, $splat:ident, $load:ident,
         $store:ident, $load_part:ident, $store_part:ident, $fma:ident, $add:ident,
         $mul:ident, $sub:ident, $where_positive:ident) => {
            pub struct $name;
            // SAFETY (every method): the intrinsics need their instruction set, which
            // the trait's contract makes the caller guarantee; loads and stores are
            // unaligned and read or write exactly LANES floats from `p`, which the
            // caller guarantees are in bounds (the partial ones exactly `n` floats,
            // masked: lanes past `n` are neither read nor written).
            impl Simd for $name {
                const LANES: usize = $lanes;
                type V = $v;
                #[inline(always)]
                unsafe fn zero() -> $v {
                    unsafe { $zero() }
                }
                #[inline(always)]
                unsafe fn splat(x: f32) -> $v {
                    unsafe { $splat(x) }
                }
                #[inline(always)]
                unsafe fn load(p: *const f32) -> $v {
                    unsafe { $load(p) }
                }
                #[inline(always)]
                unsafe fn store(p: *mut f32, v: $v) {
                    unsafe { $store(p, v) }
                }
                #[inline(always)]
                unsafe fn load_part(p: *const f32, n: usize) -> $v {
                    unsafe { $load_part(p, n) }
                }
                #[inline(always)]
                unsafe fn store_part(p: *mut f32, v: $v, n: usize) {
                    unsafe { $store_part(p, v, n) }
                }
                #[inline(always)]
                unsafe fn fma(a: $v, b: $v, c: $v) -> $v {
                    unsafe { $fma(a, b, c) }
                }
                #[inline(always)]
                unsafe fn add(a: $v, b: $v) -> $v {
                    unsafe { $add(a, b) }
                }
                #[inline(always)]
                unsafe fn mul(a: $v, b: $v) -> $v {
                    unsafe { $mul(a, b) }
                }
                #[inline(always)]
                unsafe fn sub(a: $v, b: $v) -> $v {
                    unsafe { $sub(a, b) }
                }
                #[inline(always)]
                unsafe fn where_positive(v: $v, h: $v) -> $v {
                    unsafe { $where_positive(v, h) }
                }
            }
        };
    }

    /// [`Simd::where_positive`] on AVX-512: a compare into a mask, then a zeroing move.
    ///
    /// # Safety
    /// AVX-512F is available.
    #[inline(always)]
    unsafe fn where_positive_avx512(v: __m512, h: __m512) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe {
            let above = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(h, _mm512_setzero_ps());
            _mm512_maskz_mov_ps(above, v)
        }
    }

    /// [`Simd::where_positive`] on AVX: a compare into all-ones lanes, then an and.
    ///
    /// # Safety
    /// AVX is available.
    #[inline(always)]
    unsafe fn where_positive_avx2(v: __m256, h: __m256) -> __m256 {
        // SAFETY: the caller's contract.
        unsafe { _mm256_and_ps(v, _mm256_cmp_ps::<_CMP_GT_OQ>(h, _mm256_setzero_ps())) }
    }

    /// Lanes `0..n` of an AVX-512 vector (`n <= 16`) as a write mask.
    #[inline(always)]
    fn mask16(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }

    /// [`Simd::load_part`] on AVX-512: a masked load (masked-off lanes are not read, so
    /// they cannot fault).
    ///
    /// # Safety
    /// AVX-512F is available; `p..p + n` is readable.
    #[inline(always)]
    unsafe fn load_part_avx512(p: *const f32, n: usize) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_maskz_loadu_ps(mask16(n), p) }
    }

    /// [`Simd::store_part`] on AVX-512: a masked store.
    ///
    /// # Safety
    /// AVX-512F is available; `p..p + n` is writable.
    #[inline(always)]
    unsafe fn store_part_avx512(p: *mut f32, v: __m512, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_mask_storeu_ps(p, mask16(n), v) }
    }

    /// Lanes `0..n` of an AVX vector (`n <= 8`) as `vmaskmovps`'s mask: all ones there.
    ///
    /// # Safety
    /// AVX2 is available.
    #[inline(always)]
    unsafe fn mask8(n: usize) -> __m256i {
        // SAFETY: the caller's contract.
        unsafe {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(n as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        }
    }

    /// [`Simd::load_part`] on AVX2: a masked load (masked-off lanes are not read).
    ///
    /// # Safety
    /// AVX2 is available; `p..p + n` is readable.
    #[inline(always)]
    unsafe fn load_part_avx2(p: *const f32, n: usize) -> __m256 {
        // SAFETY: the caller's contract.
        unsafe { _mm256_maskload_ps(p, mask8(n)) }
    }

    /// [`Simd::store_part`] on AVX2: a masked store.
    ///
    /// # Safety
    /// AVX2 is available; `p..p + n` is writable.
    #[inline(always)]
    unsafe fn store_part_avx2(p: *mut f32, v: __m256, n: usize) {
        // SAFETY: the caller's contract.
        unsafe { _mm256_maskstore_ps(p, mask8(n), v) }
    }

    x86_simd!(
        Avx512,
        __m512,
        16,
        _mm512_setzero_ps,
        _mm512_set1_ps,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        load_part_avx512,
        store_part_avx512,
        _mm512_fmadd_ps,
        _mm512_add_ps,
        _mm512_mul_ps,
        _mm512_sub_ps,
        where_positive_avx512
    );
    x86_simd!(
        Avx2,
        __m256,
        8,
        _mm256_setzero_ps,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        load_part_avx2,
        store_part_avx2,
        _mm256_fmadd_ps,
        _mm256_add_ps,
        _mm256_mul_ps,
        _mm256_sub_ps,
        where_positive_avx2
    );
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use super::Simd;
    use std::arch::aarch64::*;

    pub struct Neon;
    // SAFETY (every method): NEON is part of the aarch64 baseline; loads and stores
    // read or write exactly LANES floats from `p` (the partial ones `n`, through a
    // 4-float copy), which the caller guarantees are in bounds.
    impl Simd for Neon {
        const LANES: usize = 4;
        type V = float32x4_t;
        #[inline(always)]
        unsafe fn zero() -> float32x4_t {
            unsafe { vdupq_n_f32(0.0) }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> float32x4_t {
            unsafe { vdupq_n_f32(x) }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> float32x4_t {
            unsafe { vld1q_f32(p) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: float32x4_t) {
            unsafe { vst1q_f32(p, v) }
        }
        #[inline(always)]
        unsafe fn load_part(p: *const f32, n: usize) -> float32x4_t {
            // NEON has no masked load: through a zeroed copy of the `n` floats.
            let mut lanes = [0.0f32; 4];
            unsafe {
                std::ptr::copy_nonoverlapping(p, lanes.as_mut_ptr(), n);
                vld1q_f32(lanes.as_ptr())
            }
        }
        #[inline(always)]
        unsafe fn store_part(p: *mut f32, v: float32x4_t, n: usize) {
            let mut lanes = [0.0f32; 4];
            unsafe {
                vst1q_f32(lanes.as_mut_ptr(), v);
                std::ptr::copy_nonoverlapping(lanes.as_ptr(), p, n);
            }
        }
        #[inline(always)]
        unsafe fn fma(a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
            // vfmaq_f32(c, a, b) = c + a * b, fused.
            unsafe { vfmaq_f32(c, a, b) }
        }
        #[inline(always)]
        unsafe fn add(a: float32x4_t, b: float32x4_t) -> float32x4_t {
            unsafe { vaddq_f32(a, b) }
        }
        #[inline(always)]
        unsafe fn mul(a: float32x4_t, b: float32x4_t) -> float32x4_t {
            unsafe { vmulq_f32(a, b) }
        }
        #[inline(always)]
        unsafe fn sub(a: float32x4_t, b: float32x4_t) -> float32x4_t {
            unsafe { vsubq_f32(a, b) }
        }
        #[inline(always)]
        unsafe fn where_positive(v: float32x4_t, h: float32x4_t) -> float32x4_t {
            // All-ones lanes where h > 0 (false for NaN), and-ed with v's bits.
            unsafe {
                let above = vcgtq_f32(h, vdupq_n_f32(0.0));
                vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), above))
            }
        }
    }
}

/// The operands of one product, checked once by [`Operands::new`].
#[derive(Clone, Copy)]
pub(crate) struct Operands<'a> {
    m: usize,
    k: usize,
    n: usize,
    a: &'a [f32],
    rsa: usize,
    csa: usize,
    b: &'a [f32],
    ldb: usize,
    /// `b` is stored transposed: its element `(t, j)` at `j * ldb + t` (only for products
    /// that copy `b` into panels, [`takes_transposed_b`]).
    bt: bool,
    ldc: usize,
    /// What the product is added to.
    start: Start<'a>,
    /// Where a `Set` product also writes the sums of `b`'s rows (`n` floats; null:
    /// nowhere), set by [`Operands::summing_b_rows`].
    b_sums: *mut f32,
}

/// What a product is added to: `c`'s own values, nothing (`c`'s old values unread), or
/// one row repeated in every row of `c` (a layer's bias: `c = bias + a b` in one pass,
/// the same bits as filling `c` with the bias and adding the product). `TanhGrad(h)`
/// writes the product times `1 - h * h`, `h` laid out as `c` (the gradient through a
/// tanh layer whose outputs are `h`: the same bits as writing the product and then
/// multiplying each element by `1 - h * h`, rounded after each operation). `ReluGrad(h)`
/// writes the product where `h` is above zero and +0 elsewhere (the gradient through a
/// ReLU layer whose outputs are `h`).
#[derive(Clone, Copy)]
pub(crate) enum Start<'a> {
    Add,
    Set,
    Bias(&'a [f32]),
    TanhGrad(&'a [f32]),
    ReluGrad(&'a [f32]),
}

/// [`Start`] as the kernels' const parameter.
const ADD: u8 = 0;
const SET: u8 = 1;
const BIAS: u8 = 2;
const TANH_GRAD: u8 = 3;
/// `SET`, and the block of rows from 0 also sums `b`'s rows into `b_sums`.
const SET_SUMS: u8 = 4;
const RELU_GRAD: u8 = 5;

impl<'a> Operands<'a> {
    /// `c (m x n, rows ldc apart) += a (m x k, element (i, t) at i*rsa + t*csa) *
    /// b (k x n, rows ldb apart; with `bt`, given by its transpose: n x k, rows `ldb`
    /// apart)`. Panics if an operand is too short for its shape.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        (m, k, n): (usize, usize, usize),
        a: &'a [f32],
        (rsa, csa): (usize, usize),
        b: &'a [f32],
        (ldb, bt): (usize, bool),
        c: &[f32],
        ldc: usize,
    ) -> Operands<'a> {
        if m > 0 && k > 0 && n > 0 {
            assert!(
                a.len() > (m - 1) * rsa + (k - 1) * csa,
                "kernel: a too short"
            );
            let (rows, cols) = if bt { (n, k) } else { (k, n) };
            assert!(
                cols <= ldb && b.len() >= (rows - 1) * ldb + cols,
                "kernel: b too short"
            );
            assert!(
                n <= ldc && c.len() >= (m - 1) * ldc + n,
                "kernel: c too short"
            );
        }
        Operands {
            m,
            k,
            n,
            a,
            rsa,
            csa,
            b,
            ldb,
            bt,
            ldc,
            start: Start::Add,
            b_sums: std::ptr::null_mut(),
        }
    }

    /// The same written product (`Start::Set`), and the sums of `b`'s `k` rows (from +0,
    /// in row order: the bits of adding each row to a zeroed `sums` in turn) written into
    /// `sums` on the way: a layer's weight gradient `h^T d` and its bias gradient, the
    /// sum of `d`'s rows, in one pass over `d`. Panics for another start, if `sums` is
    /// shorter than `n`, or if the product has no rows (`m == 0`: no block would write
    /// the sums).
    pub(crate) fn summing_b_rows(self, sums: &'a mut [f32]) -> Operands<'a> {
        assert!(
            matches!(self.start, Start::Set),
            "kernel: row sums need a written product"
        );
        assert!(sums.len() >= self.n && self.m > 0, "kernel: sums too short");
        Operands {
            b_sums: sums.as_mut_ptr(),
            ..self
        }
    }

    /// The same product starting from `start` instead of `c`'s values (`Set`: what a
    /// `beta = 0` product costs without zeroing `c` first). Panics if a bias row is
    /// shorter than `n`.
    pub(crate) fn starting(self, start: Start<'a>) -> Operands<'a> {
        match start {
            Start::Bias(bias) => assert!(bias.len() >= self.n, "kernel: bias too short"),
            Start::TanhGrad(h) | Start::ReluGrad(h) if self.m > 0 && self.n > 0 => assert!(
                h.len() >= (self.m - 1) * self.ldc + self.n,
                "kernel: activation outputs too short"
            ),
            _ => {}
        }
        Operands { start, ..self }
    }
}

/// Where a block reads its operands: `a`'s element `(r, t)` of the block at
/// `a + r * rsa + t * csa`, `b`'s `(t, q)` at `b + t * ldb + q`: the operands in place
/// (at the block's row and column) or their packed copies.
#[derive(Clone, Copy)]
struct Src {
    a: *const f32,
    rsa: usize,
    csa: usize,
    b: *const f32,
    ldb: usize,
}

impl Src {
    /// The operands in place, at row `i` of `a` and column `j` of `b` (wrapping
    /// offsets: the pointers are only read through for the terms a product has, where
    /// [`Operands::new`] checked that they lie inside `a` and `b`).
    #[inline(always)]
    fn in_place(o: &Operands, i: usize, j: usize) -> Src {
        Src {
            a: o.a.as_ptr().wrapping_add(i * o.rsa),
            rsa: o.rsa,
            csa: o.csa,
            b: o.b.as_ptr().wrapping_add(j),
            ldb: o.ldb,
        }
    }
}

/// Rows `i..i + R` by columns `j..j + P * LANES` of the product, added to `c`, written
/// into it, or added to the bias row, as `START` ([`Start`]) says. The last of the `P`
/// vectors has `last` columns (`0 < last <= LANES`); below `LANES` its loads and stores
/// are masked to them, and its other lanes (zeros) are summed but never stored, so each
/// element gets the same operations as in a whole vector. (Callers pass `LANES` as a
/// constant for whole blocks, so those compile without the masks.)
///
/// # Safety
/// `S`'s instruction set is available; `i + R <= m`, `j + (P - 1) * LANES + last <= n`,
/// and `o`
/// was checked by [`Operands::new`] against `c` (and by [`Operands::starting`] against
/// its bias row or activation outputs, which `START == BIAS`, `TANH_GRAD` or `RELU_GRAD`
/// requires), so every
/// index read or written is in bounds: `a` at `(i + r) * rsa + t * csa`, `b` at
/// `t * ldb + j + q`, `c` and the tanh outputs at `(i + r) * ldc + j + q`, the bias and
/// `b_sums` (non-null with `SET_SUMS`, checked by [`Operands::summing_b_rows`]) at
/// `j + q`, for `r < R`, `t < k`, `q < (P - 1) * LANES + last`.
#[inline(always)]
unsafe fn block<S: Simd, const R: usize, const P: usize, const START: u8>(
    o: &Operands,
    c: *mut f32,
    (i, j): (usize, usize),
    last: usize,
    src: Src,
) {
    // Vector `q`'s load and store: masked to `last` lanes for the tail's last vector.
    let part = |q: usize| if q + 1 == P { last } else { S::LANES };
    // SAFETY: the bounds are the caller's contract above.
    unsafe {
        let mut acc = [[S::zero(); P]; R];
        // With `SET_SUMS`, the blocks of rows from 0 sum `b`'s rows (each column once).
        let summing = START == SET_SUMS && i == 0;
        let mut sums = [S::zero(); P];
        for t in 0..o.k {
            let brow = src.b.add(t * src.ldb);
            let mut bv = [S::zero(); P];
            for (q, v) in bv.iter_mut().enumerate() {
                *v = load::<S>(brow.add(q * S::LANES), part(q));
            }
            if summing {
                for (s, b) in sums.iter_mut().zip(&bv) {
                    *s = S::add(*s, *b);
                }
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let av = S::splat(*src.a.add(r * src.rsa + t * src.csa));
                for (acc, b) in row.iter_mut().zip(&bv) {
                    *acc = S::fma(av, *b, *acc);
                }
            }
        }
        let (bias, h) = match o.start {
            Start::Bias(b) => (b.as_ptr().add(j), std::ptr::null()),
            Start::TanhGrad(h) | Start::ReluGrad(h) => (std::ptr::null(), h.as_ptr()),
            _ => (std::ptr::null(), std::ptr::null()),
        };
        for (r, row) in acc.iter().enumerate() {
            let crow = c.add((i + r) * o.ldc + j);
            for (q, v) in row.iter().enumerate() {
                let p = crow.add(q * S::LANES);
                let sum = match START {
                    SET | SET_SUMS => *v,
                    BIAS => S::add(load::<S>(bias.add(q * S::LANES), part(q)), *v),
                    TANH_GRAD => {
                        let h = load::<S>(h.add((i + r) * o.ldc + j + q * S::LANES), part(q));
                        S::mul(*v, S::sub(S::splat(1.0), S::mul(h, h)))
                    }
                    RELU_GRAD => S::where_positive(
                        *v,
                        load::<S>(h.add((i + r) * o.ldc + j + q * S::LANES), part(q)),
                    ),
                    _ => S::add(load::<S>(p, part(q)), *v),
                };
                store::<S>(p, sum, part(q));
            }
        }
        if summing {
            for (q, s) in sums.iter().enumerate() {
                store::<S>(o.b_sums.add(j + q * S::LANES), *s, part(q));
            }
        }
    }
}

/// `n` lanes from `p`: a whole vector, or a partial one ([`Simd::load_part`]).
///
/// # Safety
/// As [`Simd::load_part`].
#[inline(always)]
unsafe fn load<S: Simd>(p: *const f32, n: usize) -> S::V {
    // SAFETY: the caller's contract.
    unsafe {
        if n == S::LANES {
            S::load(p)
        } else {
            S::load_part(p, n)
        }
    }
}

/// `n` lanes of `v` to `p`: a whole vector, or a partial one ([`Simd::store_part`]).
///
/// # Safety
/// As [`Simd::store_part`].
#[inline(always)]
unsafe fn store<S: Simd>(p: *mut f32, v: S::V, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        if n == S::LANES {
            S::store(p, v)
        } else {
            S::store_part(p, v, n)
        }
    }
}

/// The whole product: blocks of `R` rows (then 4, 2 and single rows) by `P` vectors
/// (then single vectors, the last masked to the columns left).
///
/// # Safety
/// `S`'s instruction set is available; `o` was checked against `c`.
#[inline(always)]
unsafe fn product<S: Simd, const R: usize, const P: usize>(o: &Operands, c: &mut [f32]) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        match o.start {
            Start::Add => product_as::<S, R, P, ADD>(o, c),
            Start::Set if !o.b_sums.is_null() => product_as::<S, R, P, SET_SUMS>(o, c),
            Start::Set => product_as::<S, R, P, SET>(o, c),
            Start::Bias(_) => product_as::<S, R, P, BIAS>(o, c),
            Start::TanhGrad(_) => product_as::<S, R, P, TANH_GRAD>(o, c),
            Start::ReluGrad(_) => product_as::<S, R, P, RELU_GRAD>(o, c),
        }
    }
}

/// The fewest outputs a row for which a product copies `b` into panels first: below
/// this `b`'s rows are at most 512 bytes apart and its panels stay in the L1 cache in
/// place. At 256 (1 KiB apart) a panel's rows fall into a quarter of an 8-way 32 KiB
/// L1's sets and each block of rows reads them from L2 again: a 4 -> 256 -> 256 -> 1
/// ReLU network's forward and backward pass on 64 rows took 518 instead of 622 us with
/// the panels copied, the same network at 64 wide 37.1 against 37.2 us (AMD EPYC Zen 3,
/// one thread).
const PACK_MIN_N: usize = 128;

/// Whether a product of shape `(m, k, n)` on blocks of `rows` x `width` copies `b`
/// into panels first: where `b` is wide and at least two blocks of rows read each panel.
fn packs((m, k, n): (usize, usize, usize), (rows, width): (usize, usize)) -> bool {
    k > 0 && m >= 2 * rows && n >= PACK_MIN_N.max(width)
}

/// Whether the kernel here takes `b` stored transposed ([`product_into`] with a transposed layout) for a
/// product of shape `(m, k, n)`: where it copies `b` into whole panels anyway, so the
/// copy can transpose it on the way.
pub(crate) fn takes_transposed_b(shape: (usize, usize, usize)) -> bool {
    Isa::best().takes_transposed_b(shape)
}

thread_local! {
    /// This thread's copy of `b` in panels ([`product_as`]), kept between products so
    /// that packing allocates only while the largest product grows ([`Scratch`]).
    static PANELS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// [`product`], starting from `START` ([`Start`]). Where `b` is wide
/// ([`PACK_MIN_N`]) and at least two blocks of rows read each panel of it, the whole
/// panels are first copied side by side (panel `p`: its `k` rows of `P * LANES`
/// columns, one after another) and read from there: the same values in the same order,
/// so the same bits.
///
/// # Safety
/// As [`product`].
#[inline(always)]
unsafe fn product_as<S: Simd, const R: usize, const P: usize, const START: u8>(
    o: &Operands,
    c: &mut [f32],
) {
    let c = c.as_mut_ptr();
    let (m, n, k) = (o.m, o.n, o.k);
    let width = P * S::LANES;
    let panels = n / width;
    let packing = packs((m, k, n), (R, width));
    assert!(
        !o.bt || (packing && n.is_multiple_of(width)),
        "kernel: a transposed b only where whole panels are copied"
    );
    // SAFETY (every call below): the loops keep i + rows <= m and j + cols <= n, and a
    // panel's copy holds `k * width` floats, written just before it is read.
    unsafe {
        let mut j = 0;
        if packing {
            // Taken as a value, not used in a closure: see [`Scratch`].
            let mut buf = Scratch::take(&PANELS, panels * width * k);
            for (p, panel) in buf.chunks_exact_mut(width * k).take(panels).enumerate() {
                if o.bt {
                    // Columns p * width.. of b are rows of its transpose.
                    transpose(&o.b[p * width * o.ldb..], o.ldb, width, k, panel);
                    continue;
                }
                for (t, row) in panel.chunks_exact_mut(width).enumerate() {
                    row.copy_from_slice(&o.b[t * o.ldb + p * width..][..width]);
                }
            }
            for p in 0..panels {
                let j = p * width;
                let b = buf.as_ptr().add(p * width * k);
                column_blocks::<S, R, P, START>(o, c, j, S::LANES, |i| Src {
                    b,
                    ldb: width,
                    ..Src::in_place(o, i, j)
                });
            }
            j = panels * width;
        }
        while j + width <= n {
            column_blocks::<S, R, P, START>(o, c, j, S::LANES, |i| Src::in_place(o, i, j));
            j += width;
        }
        // The columns left over, one vector at a time on blocks of rows as above, the
        // last masked to the columns left (a 300-wide layer's last 44 columns, one row
        // at a time with the last 12 scalar, had taken as long as its first 256).
        while j < n {
            let cols = (n - j).min(S::LANES);
            column_blocks::<S, R, 1, START>(o, c, j, cols, |i| Src::in_place(o, i, j));
            j += cols;
        }
    }
}

/// Every row of the columns `j..j + P * LANES`: blocks of `R` rows, then the rows left
/// over in blocks of 4 and 2 where `R` is larger, then single rows. A block of one row
/// keeps only `P` sums in flight, fewer than the FMA units' latency hides (four cycles
/// on two units wants eight), so 64 rows on AVX2's 6-row blocks end in one 4-row block
/// instead of four single rows. Each element's sum is the same whichever block holds
/// it, so the same bits.
///
/// # Safety
/// As [`block`], for every row `i < o.m` and the columns `j..j + (P - 1) * LANES +
/// last`, reading the operands where `src(i)` says.
#[inline(always)]
unsafe fn column_blocks<S: Simd, const R: usize, const P: usize, const START: u8>(
    o: &Operands,
    c: *mut f32,
    j: usize,
    last: usize,
    src: impl Fn(usize) -> Src,
) {
    let m = o.m;
    let mut i = 0;
    // SAFETY: every block's rows lie below m (the caller's contract covers them).
    unsafe {
        while i + R <= m {
            block::<S, R, P, START>(o, c, (i, j), last, src(i));
            i += R;
        }
        if R > 4 && i + 4 <= m {
            block::<S, 4, P, START>(o, c, (i, j), last, src(i));
            i += 4;
        }
        if R > 2 && i + 2 <= m {
            block::<S, 2, P, START>(o, c, (i, j), last, src(i));
            i += 2;
        }
        for i in i..m {
            block::<S, 1, P, START>(o, c, (i, j), last, src(i));
        }
    }
}

/// One instruction set's version of the product.
pub(crate) type Version = fn(&Operands, &mut [f32]);

/// The scalar version: one `f32::mul_add` per term (the reference).
pub(crate) fn scalar(o: &Operands, c: &mut [f32]) {
    // SAFETY: scalar code needs no instruction set; `o` was checked against `c`.
    unsafe { product::<Scalar, 1, 1>(o, c) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn avx512_body(o: &Operands, c: &mut [f32]) {
    // SAFETY: this function is compiled for AVX-512F, and only called where the CPU
    // has it ([`Isa::available`]); `o` was checked against `c`.
    unsafe { product::<x86::Avx512, 4, 4>(o, c) }
}

#[cfg(target_arch = "x86_64")]
fn avx512(o: &Operands, c: &mut [f32]) {
    // SAFETY: [`Isa::available`] lists Avx512 only when the CPU has AVX-512F, AVX2
    // and FMA.
    unsafe { avx512_body(o, c) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn avx2_body(o: &Operands, c: &mut [f32]) {
    // SAFETY: compiled for AVX2 and FMA, only called where the CPU has both; 6 x 2
    // ymm accumulators, 2 of b and a broadcast fit the 16 registers.
    unsafe { product::<x86::Avx2, 6, 2>(o, c) }
}

#[cfg(target_arch = "x86_64")]
fn avx2(o: &Operands, c: &mut [f32]) {
    // SAFETY: [`Isa::available`] lists Avx2 (and Avx512) only when the CPU has AVX2
    // and FMA.
    unsafe { avx2_body(o, c) }
}

#[cfg(target_arch = "aarch64")]
fn neon(o: &Operands, c: &mut [f32]) {
    // SAFETY: NEON is part of the aarch64 baseline; `o` was checked against `c`.
    unsafe { product::<arm::Neon, 4, 4>(o, c) }
}

/// The instruction sets the hand-vectorised loops of the native path are written for.
/// Where one is available, the fastest is chosen once per process; every version of
/// a loop gives the same bits, so the choice changes speed only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F with AVX2 and FMA (x86-64). Chosen on every CPU that has it, the
    /// Skylake-era server cores included: the matrix kernel pays their 512-bit clock
    /// penalty anyway, and the loops are still faster (tanh 0.64 against 0.91 ns a value
    /// on a Cascade Lake core).
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// AVX2 with FMA (x86-64).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// NEON (every aarch64 CPU).
    #[cfg(target_arch = "aarch64")]
    Neon,
    /// Plain Rust, `f32::mul_add` (libm's correctly rounded fmaf where there is no
    /// FMA instruction): the reference every version equals.
    Scalar,
}

impl Isa {
    /// Every instruction set this CPU runs, fastest first; the last is [`Isa::Scalar`].
    pub(crate) fn available() -> Vec<Isa> {
        let mut v = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma");
            if avx2 && std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Isa::Avx512);
            }
            if avx2 {
                v.push(Isa::Avx2);
            }
        }
        #[cfg(target_arch = "aarch64")]
        v.push(Isa::Neon);
        v.push(Isa::Scalar);
        v
    }

    /// The fastest instruction set here, detected once.
    pub(crate) fn best() -> Isa {
        static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| Isa::available()[0])
    }

    /// The matrix kernel for this instruction set: its version, and the rows and columns
    /// of its block (the `R` and `P * LANES` the version runs with).
    fn kernel(self) -> (Version, (usize, usize)) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => (avx512, (4, 64)),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => (avx2, (6, 16)),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => (neon, (4, 16)),
            Isa::Scalar => (scalar, (1, 1)),
        }
    }

    /// [`takes_transposed_b`] for this instruction set's kernel.
    fn takes_transposed_b(self, shape: (usize, usize, usize)) -> bool {
        let block = self.kernel().1;
        packs(shape, block) && shape.2.is_multiple_of(block.1)
    }

    /// The matrix kernel's version for this instruction set.
    pub(crate) fn product(self) -> Version {
        self.kernel().0
    }

    /// The transpose's version for this instruction set (8 x 8 tiles in registers with
    /// AVX2 and AVX-512: 64 x 64 in a fifth of the element-by-element loop's time).
    pub(crate) fn transpose(self) -> TransposeVersion {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx2 => transpose_avx2,
            _ => transpose_scalar,
        }
    }
}

/// `c = start + a b` ([`Start`]: `c`'s values, nothing, a bias row, or the product
/// through tanh's gradient; see [`Operands::new`] for the shapes), and with `b_sums` the
/// sums of `b`'s rows too ([`Operands::summing_b_rows`], a written product only), on the
/// fastest version here. `b_layout`: `(ldb, false)` for `b` row-major with rows `ldb`
/// apart, `(ldbt, true)` for `b` given by its transpose (n x k, rows `ldbt` apart), which
/// only shapes the kernel copies into whole panels take ([`takes_transposed_b`]; panics
/// for others).
#[allow(clippy::too_many_arguments)]
pub(crate) fn product_into(
    shape: (usize, usize, usize),
    a: &[f32],
    a_strides: (usize, usize),
    b: &[f32],
    b_layout: (usize, bool),
    c: &mut [f32],
    ldc: usize,
    start: Start,
    b_sums: Option<&mut [f32]>,
) {
    let o = Operands::new(shape, a, a_strides, b, b_layout, c, ldc).starting(start);
    let o = match b_sums {
        Some(sums) => o.summing_b_rows(sums),
        None => o,
    };
    Isa::best().product()(&o, c);
}

/// `dst` (cols x rows, row-major) = the transpose of `src` (rows x cols, rows `ld`
/// apart): the backward pass's `W^T`, made for [`product_into`] (whose `b` rows must be
/// contiguous). Moves only, so every version gives the same result.
type TransposeVersion = fn(&[f32], usize, usize, usize, &mut [f32]);

/// Checks a transpose's operands: every index the versions touch is in bounds.
fn check_transpose(src: &[f32], ld: usize, rows: usize, cols: usize, dst: &[f32]) {
    if rows > 0 && cols > 0 {
        assert!(
            cols <= ld && src.len() >= (rows - 1) * ld + cols,
            "transpose: src too short"
        );
    }
    assert!(dst.len() >= rows * cols, "transpose: dst too short");
}

/// The element-by-element transpose of the block `rs x cs` of `src` (rows x cols): the
/// reference, and the edges of the tiled versions. One destination row at a time, so
/// the stores are contiguous (storing along a source row instead, 256 bytes apart, took
/// 1.5x as long for a 64 x 2 head on a Cascade Lake core).
fn transpose_scalar_block(
    src: &[f32],
    ld: usize,
    rows: usize,
    (rs, cs): (Range<usize>, Range<usize>),
    dst: &mut [f32],
) {
    for j in cs {
        let d = &mut dst[j * rows..(j + 1) * rows];
        for r in rs.clone() {
            d[r] = src[r * ld + j];
        }
    }
}

fn transpose_scalar(src: &[f32], ld: usize, rows: usize, cols: usize, dst: &mut [f32]) {
    check_transpose(src, ld, rows, cols, dst);
    transpose_scalar_block(src, ld, rows, (0..rows, 0..cols), dst);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn transpose_avx2_body(src: &[f32], ld: usize, rows: usize, cols: usize, dst: &mut [f32]) {
    use std::arch::x86_64::*;
    check_transpose(src, ld, rows, cols, dst);
    let (full_r, full_c) = (rows / 8 * 8, cols / 8 * 8);
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    for r0 in (0..full_r).step_by(8) {
        for c0 in (0..full_c).step_by(8) {
            // SAFETY: AVX2 is enabled on this function, which only runs where the CPU
            // has it ([`Isa::transpose`]). Rows r0..r0+8 of src are read at
            // columns c0..c0+8 <= cols <= ld, inside src (checked above); dst rows
            // c0..c0+8 < cols are written at columns r0..r0+8 <= rows, inside
            // rows * cols <= dst.len().
            unsafe {
                let a = std::array::from_fn(|i| _mm256_loadu_ps(s.add((r0 + i) * ld + c0)));
                for (j, v) in rlrig_env::simd::transpose8x8(a).into_iter().enumerate() {
                    _mm256_storeu_ps(d.add((c0 + j) * rows + r0), v);
                }
            }
        }
    }
    // The columns past the last whole tile, then the rows past it.
    transpose_scalar_block(src, ld, rows, (0..full_r, full_c..cols), dst);
    transpose_scalar_block(src, ld, rows, (full_r..rows, 0..cols), dst);
}

#[cfg(target_arch = "x86_64")]
fn transpose_avx2(src: &[f32], ld: usize, rows: usize, cols: usize, dst: &mut [f32]) {
    // SAFETY: [`Isa::transpose`] gives this version only for instruction sets that
    // include AVX2, which [`Isa::available`] lists only where the CPU has it.
    unsafe { transpose_avx2_body(src, ld, rows, cols, dst) }
}

/// `dst` (cols x rows, row-major) = `src^T` (`src` rows x cols, rows `ld` apart), on the
/// fastest version here.
pub(crate) fn transpose(src: &[f32], ld: usize, rows: usize, cols: usize, dst: &mut [f32]) {
    Isa::best().transpose()(src, ld, rows, cols, dst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition every version must equal bit for bit.
    fn reference(o: &Operands, c: &mut [f32]) {
        for i in 0..o.m {
            for j in 0..o.n {
                let mut acc = 0.0f32;
                for t in 0..o.k {
                    let b = if o.bt {
                        o.b[j * o.ldb + t]
                    } else {
                        o.b[t * o.ldb + j]
                    };
                    acc = o.a[i * o.rsa + t * o.csa].mul_add(b, acc);
                }
                let c = &mut c[i * o.ldc + j];
                *c = match o.start {
                    Start::Add => *c + acc,
                    Start::Set => acc,
                    Start::Bias(b) => b[j] + acc,
                    Start::TanhGrad(h) => {
                        let h = h[i * o.ldc + j];
                        acc * (1.0 - h * h)
                    }
                    Start::ReluGrad(h) => {
                        if h[i * o.ldc + j] > 0.0 {
                            acc
                        } else {
                            0.0
                        }
                    }
                };
            }
        }
    }

    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut rng = rlrig_env::Rng::stream(seed, rlrig_env::Purpose::User, 0);
        (0..len)
            .map(|_| crate::nn::normal(&mut rng) as f32)
            .collect()
    }

    proptest! {
        #[test]
        fn every_version_gives_the_reference_bits(
            m in 1usize..20,
            k in 0usize..70,
            n in prop_oneof![1usize..40, 60usize..140, 250usize..270, Just(128), Just(256)],
            transposed in any::<bool>(),
            start in 0u8..5,
            pad in 0usize..3,
            seed in 0u64..1000,
        ) {
            let a = values(m * k + 1, seed);
            let (ldb, ldc) = (n + pad, n + 2 * pad);
            let b = values(k.max(1) * ldb, seed + 1);
            let c0 = values(m * ldc, seed + 2);
            let strides = if transposed { (1, m) } else { (k, 1) };
            let bias = values(n, seed + 3);
            let h = values(m * ldc, seed + 4);
            let start = [
                Start::Add,
                Start::Set,
                Start::Bias(&bias),
                Start::TanhGrad(&h),
                Start::ReluGrad(&h),
            ][usize::from(start)];
            let o = Operands::new((m, k, n), &a, strides, &b, (ldb, false), &c0, ldc).starting(start);
            let mut want = c0.clone();
            reference(&o, &mut want);
            for isa in Isa::available() {
                let mut c = c0.clone();
                isa.product()(&o, &mut c);
                let same = c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                prop_assert!(same, "{:?} differs from the reference at {}x{}x{}", isa, m, k, n);
            }
            // A written product that also sums `b`'s rows: the product's bits, and the
            // sums of adding each row in turn to zeros.
            let mut want_sums = vec![0.0f32; n];
            for t in 0..k {
                for (s, v) in want_sums.iter_mut().zip(&b[t * ldb..t * ldb + n]) {
                    *s += v;
                }
            }
            let o = o.starting(Start::Set);
            let mut want = c0.clone();
            reference(&o, &mut want);
            for isa in Isa::available() {
                let (mut c, mut sums) = (c0.clone(), vec![f32::NAN; n]);
                isa.product()(&o.summing_b_rows(&mut sums), &mut c);
                let same = c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits())
                    && sums.iter().zip(&want_sums).all(|(x, y)| x.to_bits() == y.to_bits());
                prop_assert!(same, "{:?} sums differ at {}x{}x{}", isa, m, k, n);
            }
            // `b` given transposed, where a version takes it so: the same bits, and the
            // same sums of `b`'s rows.
            let ldbt = k + pad;
            let mut bt = vec![f32::NAN; n * ldbt];
            for t in 0..k {
                for j in 0..n {
                    bt[j * ldbt + t] = b[t * ldb + j];
                }
            }
            for (st, sums_too) in [(start, false), (Start::Set, true)] {
                let o = Operands::new((m, k, n), &a, strides, &b, (ldb, false), &c0, ldc).starting(st);
                let mut want = c0.clone();
                reference(&o, &mut want);
                let o = Operands::new((m, k, n), &a, strides, &bt, (ldbt, true), &c0, ldc)
                    .starting(st);
                for isa in Isa::available() {
                    if !isa.takes_transposed_b((m, k, n)) {
                        continue;
                    }
                    let (mut c, mut sums) = (c0.clone(), vec![f32::NAN; n]);
                    if sums_too {
                        isa.product()(&o.summing_b_rows(&mut sums), &mut c);
                    } else {
                        isa.product()(&o, &mut c);
                        sums.clone_from(&want_sums);
                    }
                    let same = c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits())
                        && sums.iter().zip(&want_sums).all(|(x, y)| x.to_bits() == y.to_bits());
                    prop_assert!(same, "{:?} with b transposed differs at {}x{}x{}", isa, m, k, n);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn every_transpose_moves_each_element_to_its_place(
            rows in 0usize..30,
            cols in 0usize..30,
            pad in 0usize..3,
            seed in 0u64..1000,
        ) {
            let ld = cols + pad;
            let src = values(rows * ld, seed);
            for isa in Isa::available() {
                let mut dst = vec![f32::NAN; rows * cols];
                isa.transpose()(&src, ld, rows, cols, &mut dst);
                for r in 0..rows {
                    for c in 0..cols {
                        prop_assert_eq!(
                            dst[c * rows + r].to_bits(),
                            src[r * ld + c].to_bits(),
                            "{:?} at ({}, {}) of {}x{}", isa, r, c, rows, cols
                        );
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "kernel: c too short")]
    fn short_output_is_refused() {
        let c = vec![0.0; 7];
        Operands::new((2, 2, 4), &[1.0; 4], (2, 1), &[1.0; 8], (4, false), &c, 4);
    }
}
