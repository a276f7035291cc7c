//! The native CPU path for the small networks RL uses: MLPs with tanh hidden layers,
//! forward and backward over whole batches through [`gemm`] (the register-blocked
//! `kernel` for layer-sized products, plain loops for narrow heads, `matrixmultiply`
//! for long sums), a vectorised tanh, no allocation after the first call at a given
//! batch size.
//!
//! Parameters live in one flat `f32` buffer owned by the caller (an agent keeps all
//! its networks in one buffer, so Adam, gradient clipping and checkpoints see a single
//! slice). An [`Mlp`] is only a layout: offsets of each layer's weights and biases.
//! Weights are stored `[in, out]` row-major, so `y = x W + b` for row-major batches.

use rlrig_env::Rng;

use std::cell::RefCell;
use std::thread::LocalKey;

mod kernel;

/// What the kernel adds a `beta` product to: nothing for `beta = 0` (it writes `c`
/// without a zeroing pass), else `c` scaled by `beta` first.
fn kernel_start(
    c: &mut [f32],
    m: usize,
    n: usize,
    rsc: usize,
    beta: f32,
) -> kernel::Start<'static> {
    if beta == 0.0 {
        return kernel::Start::Set;
    }
    scale_rows(c, m, n, rsc, beta);
    kernel::Start::Add
}

/// Whether the register-blocked kernel takes a `k`-term product with `n` outputs a row
/// and `b` at strides `(rsb, csb)`: rows of 16 or more contiguous outputs, summed over at
/// most KERNEL_MAX_K terms (the layers of small networks, their gradients, the first
/// convolutions), `b` read by rows in place or, stored transposed (its columns
/// contiguous: the backward pass's `d W^T`), from a row-major copy. The one rule for
/// [`gemm`] and the layer passes that ask the kernel for more than a product.
fn kernel_takes(k: usize, n: usize, (rsb, csb): (usize, usize)) -> bool {
    n >= KERNEL_MIN_N && k <= KERNEL_MAX_K && ((csb == 1 && rsb >= n) || (rsb == 1 && csb >= k))
}

/// `c = start + a b` ([`kernel::Start`]; with `b_sums`, `b`'s row sums too) on the
/// register-blocked kernel, for a product it takes ([`kernel_takes`]) with `c`'s rows
/// `ldc` apart. A transposed `b` is copied row-major first (a quarter of the product's
/// time, where matrixmultiply packing the strided `b` itself took 4.4x the kernel's on
/// 64 x 64 x 64), or, where the kernel copies `b` into panels anyway (wide layers),
/// transposed straight into them.
#[allow(clippy::too_many_arguments)]
fn on_kernel(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    a_strides: (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    c: &mut [f32],
    ldc: usize,
    start: kernel::Start,
    b_sums: Option<&mut [f32]>,
) {
    if csb == 1 && rsb >= n {
        kernel::product_into(
            (m, k, n),
            a,
            a_strides,
            b,
            (rsb, false),
            c,
            ldc,
            start,
            b_sums,
        );
        return;
    }
    if kernel::takes_transposed_b((m, k, n)) {
        // The kernel copies b into panels anyway, and transposes it on the way.
        let b_layout = (csb, true);
        kernel::product_into((m, k, n), a, a_strides, b, b_layout, c, ldc, start, b_sums);
        return;
    }
    let mut bt = Scratch::take(&SCRATCH, k * n);
    kernel::transpose(b, csb, n, k, &mut bt);
    kernel::product_into(
        (m, k, n),
        a,
        a_strides,
        &bt,
        (n, false),
        c,
        ldc,
        start,
        b_sums,
    );
}

/// `out[m x n] = x[m x k] w[k x n] + bias` on every row (a layer: row-major `x`, `w`
/// and `out`). Where the register-blocked kernel takes the shape it adds the bias as it
/// stores each product; else `out` is filled with the bias and [`gemm`] adds the product
/// on top. Either way each output is `bias + (the product's sum)`: the same bits (a
/// product of no terms adds +0 both ways).
pub(crate) fn affine(
    m: usize,
    k: usize,
    n: usize,
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    out: &mut [f32],
) {
    if kernel_takes(k, n, (n, 1)) {
        let start = kernel::Start::Bias(bias);
        on_kernel((m, k, n), x, (k, 1), w, (n, 1), out, n, start, None);
        return;
    }
    fill_rows(out, bias);
    gemm(m, k, n, 1.0, x, (k, 1), w, (n, 1), 1.0, out, (n, 1));
}

/// `c[m x n] = alpha * a[m x k] * b[k x n] + beta * c`, with explicit row and column
/// strides (a transpose is a stride swap). Panics if any operand is too short.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    beta: f32,
    c: &mut [f32],
    (rsc, csc): (usize, usize),
) {
    if m == 0 || n == 0 {
        return;
    }
    // The largest element index each operand is read or written at.
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| (rows - 1) * rs + (cols - 1) * cs;
    if k > 0 {
        assert!(a.len() > last(m, k, rsa, csa), "gemm: a too short");
        assert!(b.len() > last(k, n, rsb, csb), "gemm: b too short");
    }
    assert!(c.len() > last(m, n, rsc, csc), "gemm: c too short");
    if alpha == 1.0 && csc == 1 && rsc >= n && kernel_takes(k, n, (rsb, csb)) {
        // beta 0: the kernel writes `c` (no zeroing pass); otherwise it adds to it.
        let start = kernel_start(c, m, n, rsc, beta);
        on_kernel((m, k, n), a, (rsa, csa), b, (rsb, csb), c, rsc, start, None);
        return;
    }
    // Narrow outputs of `b` stored transposed: dot products with `b`'s columns in place.
    if alpha == 1.0
        && rsb == 1
        && csb >= k
        && n < KERNEL_MIN_N
        && (rsa, csa) == (k, 1)
        && (rsc, csc) == (n, 1)
        && m * k * n <= SMALL_WORK
    {
        scale_rows(c, m, n, n, beta);
        small_gemm_dots(m, k, n, &a[..m * k], b, csb, &mut c[..m * n]);
        return;
    }
    // Narrow outputs (value heads, logits) of small products: plain loops, where
    // matrixmultiply's packing costs more than the arithmetic.
    if alpha == 1.0
        && n < KERNEL_MIN_N
        && (rsb, csb) == (n, 1)
        && (rsc, csc) == (n, 1)
        && m * k * n <= SMALL_WORK
    {
        scale_rows(c, m, n, n, beta);
        if (rsa, csa) == (k, 1) {
            small_gemm_nn(m, k, n, &a[..m * k], &b[..k * n], &mut c[..m * n]);
            return;
        }
        if (rsa, csa) == (1, m) {
            small_gemm_tn(m, k, n, &a[..m * k], &b[..k * n], &mut c[..m * n]);
            return;
        }
    }
    // Distinct output elements must have distinct addresses, or the kernel would race
    // with itself; row-major and column-major layouts satisfy this.
    assert!(
        (rsc >= n.max(1) * csc && csc >= 1)
            || (csc >= m.max(1) * rsc && rsc >= 1)
            || m == 1
            || n == 1,
        "gemm: c strides alias"
    );
    // SAFETY: the asserts above prove every index matrixmultiply touches,
    // `i*rs + j*cs` for i < rows and j < cols, lies inside the slice it came from;
    // `c` is a unique borrow that does not overlap `a` or `b` (Rust's aliasing rules
    // for `&mut`), and its strides never map two output elements to one address.
    // Strides fit in isize because the slices' lengths do.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            rsc as isize,
            csc as isize,
        );
    }
}

/// Products with narrow outputs (n < [`KERNEL_MIN_N`]) of at most this many
/// multiply-adds take the plain-loop path in [`gemm`]; larger ones go to matrixmultiply.
const SMALL_WORK: usize = 65_536;

/// The narrowest output rows [`kernel`] takes: one AVX-512 vector.
const KERNEL_MIN_N: usize = 16;

/// The longest sum [`kernel`] takes: every block of rows reads a `k x 64` panel of `b`
/// (256 KB at 1,024), which stays in L2 (512 KB on Zen 3, 1 MB or more since); longer
/// sums (convolution weight gradients over a whole batch of positions, MinAtar's 1,600-
/// and the Nature CNN's 3,136-input layers) are matrixmultiply's, whose packing keeps
/// them in cache. At 512 the first layers of PPO's MinAtar MLPs (600 to 1,000 inputs)
/// went to matrixmultiply: `gemm/nn/128x600x64` 120 us there, 84 us here (Zen 4).
const KERNEL_MAX_K: usize = 1024;

/// `c = beta * c` over `m` rows of `n` (rows `ld` apart), with `beta = 0` writing zeros.
fn scale_rows(c: &mut [f32], m: usize, n: usize, ld: usize, beta: f32) {
    if beta == 1.0 || m == 0 {
        return;
    }
    for row in c[..(m - 1) * ld + n].chunks_mut(ld) {
        let row = &mut row[..n];
        if beta == 0.0 {
            row.fill(0.0);
        } else {
            row.iter_mut().for_each(|v| *v *= beta);
        }
    }
}

/// `c += a b` for row-major `a` (m x k) and `c` (m x n), with `b` (k x n) given by its
/// columns: column `j` is `bt[j * ldbt..][..k]`.
///
/// Products accumulate with `mul_add`: one FMA instruction on every target listed,
/// and a correctly rounded software fma elsewhere, so results are the same on every
/// machine (only slower on CPUs without FMA).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn small_gemm_dots(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    bt: &[f32],
    ldbt: usize,
    c: &mut [f32],
) {
    // Dot products of a's rows with b's columns, with 16 partial sums so neither a
    // memory nor an add chain serialises.
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] += dot(&a[i * k..(i + 1) * k], &bt[j * ldbt..j * ldbt + k]);
        }
    }
}

/// `c += a b` for row-major `a` (m x k), `b` (k x n), `c` (m x n): [`small_gemm_dots`]
/// on `b^T`, made in this thread's scratch.
fn small_gemm_nn(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    if n == 1 {
        // A single column (a value head) is its own transpose.
        small_gemm_dots(m, k, n, a, b, k, c);
        return;
    }
    let mut bt = Scratch::take(&SCRATCH, n * k);
    kernel::transpose(b, n, k, n, &mut bt);
    small_gemm_dots(m, k, n, a, &bt, k, c);
}

thread_local! {
    /// Scratch of the small products, kept per thread (a zeroed 16 KB stack array per
    /// call was 4 % of a PPO CartPole run in `memset`).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `len` floats of a thread's buffer kept in the thread-local `key`, holding whatever an
/// earlier user left there (the user writes every element before it reads it). The
/// buffer is taken out of the thread-local while it is used and put back on drop, so it
/// allocates only while the largest use grows. It is handed out as a value, not through
/// a closure given to `LocalKey::with`: a closure does not carry its caller's
/// `#[target_feature]`s, and where it is not inlined (the `ci` profile: 16 codegen
/// units, no LTO) a SIMD loop inside it called every intrinsic, 9x slower.
struct Scratch {
    key: &'static LocalKey<RefCell<Vec<f32>>>,
    buf: Vec<f32>,
    len: usize,
}

impl Scratch {
    fn take(key: &'static LocalKey<RefCell<Vec<f32>>>, len: usize) -> Scratch {
        let mut buf = key.take();
        if buf.len() < len {
            buf.resize(len, 0.0);
        }
        Scratch { key, buf, len }
    }
}

impl std::ops::Deref for Scratch {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[..self.len]
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[..self.len]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.key.set(std::mem::take(&mut self.buf));
    }
}

/// Dot product with 16 partial sums, added in a fixed order (deterministic).
#[inline(always)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (xc, xr) = x.as_chunks::<16>();
    let (yc, yr) = y.as_chunks::<16>();
    for (xs, ys) in xc.iter().zip(yc) {
        for l in 0..16 {
            acc[l] = xs[l].mul_add(ys[l], acc[l]);
        }
    }
    let mut tail = 0.0;
    for (a, b) in xr.iter().zip(yr) {
        tail += a * b;
    }
    let mut w = 16;
    while w > 1 {
        w /= 2;
        for l in 0..w {
            acc[l] += acc[l + w];
        }
    }
    acc[0] + tail
}

/// `c += a^T b` where `a` is stored row-major as k x m (so `a^T` is m x k), `b` is
/// k x n, `c` is m x n: a sum of outer products, one per row `t` of `a` and `b`.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn small_gemm_tn_in(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    ct: &mut [f32],
) {
    // Narrow c (value and logit heads, n < 16): one column of c at a time, kept
    // contiguous in `ct` so the loop over rows vectorises. Each element sums over t
    // in order.
    for j in 0..n {
        for (r, v) in ct[j * m..(j + 1) * m].iter_mut().enumerate() {
            *v = c[r * n + j];
        }
    }
    for t in 0..k {
        let arow = &a[t * m..(t + 1) * m];
        for j in 0..n {
            let bv = b[t * n + j];
            for (cv, av) in ct[j * m..(j + 1) * m].iter_mut().zip(arow) {
                *cv = av.mul_add(bv, *cv);
            }
        }
    }
    for j in 0..n {
        for (r, v) in ct[j * m..(j + 1) * m].iter().enumerate() {
            c[r * n + j] = *v;
        }
    }
}

fn small_gemm_tn(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    small_gemm_tn_in(m, k, n, a, b, c, &mut Scratch::take(&SCRATCH, m * n));
}

/// `tanh(x)` within 2e-7 absolute and a few ulp relative of libm's, branch-free, as
/// `(e^{2|x|} - 1) / (e^{2|x|} + 1)` with the sign restored. `e^{2|x|} - 1` is
/// `2^n (e^f - 1) + (2^n - 1)`, `2|x| = n ln 2 + f`, `|f| <= ln 2 / 2`, and `e^f - 1` a
/// Taylor polynomial to `f^7` (truncation 1.5e-8 relative) without its constant, so
/// small inputs keep their relative precision. libm's `tanhf` costs more than the
/// matrix products of a 64-unit layer; this vectorises 16 lanes at a time, in 0.4 ns
/// a value on a Zen 4 core (the earlier two-branch form took 0.72). The polynomial's
/// `mul_add`s are fused on every target [`tanh_in_place`] is compiled for and
/// correctly rounded (libm's `fmaf`) elsewhere: the same bits on every CPU.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let (f, scale) = tanh_reduce(x);
    tanh_finish(x, f, scale, expm1_poly(f))
}

/// The Taylor coefficients of `(e^f - 1) / f`, highest first (Horner form).
const EXPM1_POLY: [f32; 7] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
];

/// `(e^f - 1) / f` for `|f| <= ln 2 / 2` ([`EXPM1_POLY`]).
#[inline(always)]
fn expm1_poly(f: f32) -> f32 {
    let mut q = EXPM1_POLY[0];
    for c in &EXPM1_POLY[1..] {
        q = q.mul_add(f, *c);
    }
    q
}

/// Adding 1.5 * 2^23 rounds a float to an integer held in the low mantissa bits: pure
/// float and bit operations, which vectorise (`floor` needs SSE4.1 or libm, and a
/// saturating `as i32` is scalarised). Returns the integer as a float and as `2^n`.
#[inline(always)]
fn round_pow2(y: f32) -> (f32, f32) {
    const MAGIC: f32 = 12_582_912.0;
    let k = y + MAGIC;
    let ni = k.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
    (k - MAGIC, f32::from_bits(((ni + 127) as u32) << 23))
}

/// [`tanh`]'s range reduction: `2|x| = n ln 2 + f`; returns `f` and `2^n`.
#[inline(always)]
fn tanh_reduce(x: f32) -> (f32, f32) {
    // tanh(10) is 1 in f32; the clamp keeps 2^n finite.
    let a = x.abs().min(10.0);
    let y = (2.0 * a) * std::f32::consts::LOG2_E;
    let (n, scale) = round_pow2(y);
    ((y - n) * std::f32::consts::LN_2, scale)
}

/// [`tanh`] from the polynomial `q = (e^f - 1) / f`: `e^{2|x|} - 1 = 2^n (e^f - 1) +
/// (2^n - 1)`, then `(e^{2|x|} - 1) / (e^{2|x|} + 1)` with `x`'s sign.
#[inline(always)]
fn tanh_finish(x: f32, f: f32, scale: f32, q: f32) -> f32 {
    let em1 = scale.mul_add(q * f, scale - 1.0);
    (em1 / (em1 + 2.0)).copysign(x)
}

/// `e^x` within a few ulp of libm's `expf`, branch-free: `x = n ln 2 + f` (Cody and
/// Waite's two-part `ln 2`, so `f` is exact to the last bits), `e^x = 2^n (1 + f q(f))`
/// with [`tanh`]'s polynomial. Inputs are clamped to `[-87, 88]` (`e^-87` is 1.6e-38
/// where libm underflows to 0 below -103). libm's `expf` is a call per value; this
/// runs in vectors over a slice ([`exp_in_place`]: PPO's categorical loss takes five
/// a row), with the same bits on every CPU, as [`tanh`].
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let (f, scale) = exp_reduce(x);
    scale * expm1_poly(f).mul_add(f, 1.0)
}

/// [`exp`]'s range reduction: `x = n ln 2 + f` (`x` clamped); returns `f` and `2^n`.
#[inline(always)]
fn exp_reduce(x: f32) -> (f32, f32) {
    // ln 2 = LN2_HI + LN2_LO, LN2_HI with 9 trailing zero bits: n * LN2_HI is exact.
    let ln2_hi = f32::from_bits(0x3f31_7200);
    let ln2_lo = f32::from_bits(0x35bf_be8e);
    let x = x.clamp(-87.0, 88.0);
    let (n, scale) = round_pow2(x * std::f32::consts::LOG2_E);
    (n.mul_add(-ln2_lo, n.mul_add(-ln2_hi, x)), scale)
}

/// An elementwise function run over slices in vectors: `block` does what `one` does to
/// each of `W` values at once, stage by stage, so that the polynomial chains of several
/// vectors overlap (one vector at a time is bound by the chain's latency: measured on a
/// Cascade Lake core, tanh 1.13 against 0.91 ns a value with AVX2, 0.64 with AVX-512 and
/// four vectors a block). The same operations in both, so the same bits.
trait Elementwise {
    fn one(x: f32) -> f32;
    fn block<const W: usize>(xs: &mut [f32; W]);
}

struct Tanh;

impl Elementwise for Tanh {
    #[inline(always)]
    fn one(x: f32) -> f32 {
        tanh(x)
    }

    #[inline(always)]
    fn block<const W: usize>(xs: &mut [f32; W]) {
        let mut f = [0.0f32; W];
        let mut scale = [0.0f32; W];
        for l in 0..W {
            (f[l], scale[l]) = tanh_reduce(xs[l]);
        }
        let q = poly_block(&f);
        for l in 0..W {
            xs[l] = tanh_finish(xs[l], f[l], scale[l], q[l]);
        }
    }
}

struct Exp;

impl Elementwise for Exp {
    #[inline(always)]
    fn one(x: f32) -> f32 {
        exp(x)
    }

    #[inline(always)]
    fn block<const W: usize>(xs: &mut [f32; W]) {
        let mut f = [0.0f32; W];
        let mut scale = [0.0f32; W];
        for l in 0..W {
            (f[l], scale[l]) = exp_reduce(xs[l]);
        }
        let q = poly_block(&f);
        for l in 0..W {
            xs[l] = scale[l] * q[l].mul_add(f[l], 1.0);
        }
    }
}

/// [`expm1_poly`] of `W` values, coefficient by coefficient.
#[inline(always)]
fn poly_block<const W: usize>(f: &[f32; W]) -> [f32; W] {
    let mut q = [EXPM1_POLY[0]; W];
    for c in &EXPM1_POLY[1..] {
        for l in 0..W {
            q[l] = q[l].mul_add(f[l], *c);
        }
    }
    q
}

/// `F` over a slice in blocks of `W` values.
#[inline(always)]
fn map_blocks<F: Elementwise, const W: usize>(v: &mut [f32]) {
    let (blocks, rest) = v.as_chunks_mut::<W>();
    for b in blocks {
        F::block(b);
    }
    for x in rest {
        *x = F::one(*x);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn map_avx512<F: Elementwise>(v: &mut [f32]) {
    map_blocks::<F, 64>(v);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn map_avx2<F: Elementwise>(v: &mut [f32]) {
    map_blocks::<F, 32>(v);
}

/// `F` over a slice on one instruction set.
fn map_on<F: Elementwise>(isa: kernel::Isa, v: &mut [f32]) {
    match isa {
        // SAFETY: Isa::available lists Avx512 only where the CPU has AVX-512F, AVX2 and
        // FMA, and Avx2 only where it has AVX2 and FMA: what these are compiled for.
        #[cfg(target_arch = "x86_64")]
        kernel::Isa::Avx512 => unsafe { map_avx512::<F>(v) },
        #[cfg(target_arch = "x86_64")]
        kernel::Isa::Avx2 => unsafe { map_avx2::<F>(v) },
        #[cfg(target_arch = "aarch64")]
        kernel::Isa::Neon => map_blocks::<F, 16>(v),
        kernel::Isa::Scalar => map_blocks::<F, 1>(v),
    }
}

/// [`tanh_in_place`] on one instruction set.
fn tanh_on(isa: kernel::Isa, v: &mut [f32]) {
    map_on::<Tanh>(isa, v);
}

/// [`exp_in_place`] on one instruction set.
fn exp_on(isa: kernel::Isa, v: &mut [f32]) {
    map_on::<Exp>(isa, v);
}

/// `tanh` over a slice, on the fastest instruction set here (see [`tanh`]).
pub fn tanh_in_place(v: &mut [f32]) {
    tanh_on(kernel::Isa::best(), v);
}

/// `e^x` over a slice, on the fastest instruction set here (see [`exp`]).
pub fn exp_in_place(v: &mut [f32]) {
    exp_on(kernel::Isa::best(), v);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Tanh,
    Relu,
    Identity,
}

/// The parameters a backward pass reads: the flat vector, and optionally a copy of the
/// weights its input-gradient products read transposed ([`Mlp::transpose_weights`], at
/// the same indices). A caller that runs several backward passes (chunks of rows, or
/// passes before the next optimiser step) transposes each weight once instead of each
/// pass's kernel transposing it again: the same values in the same order, so the same bits.
#[derive(Clone, Copy, Debug)]
pub struct Params<'a> {
    pub flat: &'a [f32],
    pub transposed: Option<&'a [f32]>,
}

impl<'a> Params<'a> {
    /// The flat vector alone: each product transposes what it reads.
    pub fn flat(flat: &'a [f32]) -> Params<'a> {
        Params {
            flat,
            transposed: None,
        }
    }
}

/// One layer's place in the flat parameter vector: `fan_in x fan_out` weights
/// (row-major, `y = x W + b`) at `w`, `fan_out` biases at `b`.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub w: usize,
    pub b: usize,
    pub fan_in: usize,
    pub fan_out: usize,
    pub act: Activation,
}

/// Activations kept from the forward pass for the backward pass; reused across calls.
#[derive(Default, Clone, Debug)]
pub struct MlpCache {
    pub(crate) batch: usize,
    /// `hs[0]` is the input, `hs[l+1]` the output of layer `l` (after its activation).
    hs: Vec<Vec<f32>>,
    delta: Vec<Vec<f32>>,
}

/// Rows of a pass's input, `dim` floats each: `src`'s rows in order, or the rows of
/// `src` that `idx` names (a minibatch picked from a rollout), so that each core reads
/// its chunk's rows from where they are instead of a copy another core wrote.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    src: &'a [f32],
    dim: usize,
    idx: Option<&'a [usize]>,
    start: usize,
    len: usize,
}

impl<'a> Rows<'a> {
    /// Every row of `src` (`dim` floats a row; `src.len()` a multiple of it).
    pub fn dense(src: &'a [f32], dim: usize) -> Rows<'a> {
        assert!(
            dim > 0 && src.len().is_multiple_of(dim),
            "Rows: {} floats in rows of {dim}",
            src.len()
        );
        Rows {
            src,
            dim,
            idx: None,
            start: 0,
            len: src.len() / dim,
        }
    }

    /// Rows `idx[0], idx[1], ...` of `src` (each below `src.len() / dim`).
    pub fn picked(src: &'a [f32], dim: usize, idx: &'a [usize]) -> Rows<'a> {
        let mut rows = Rows::dense(src, dim);
        assert!(
            idx.iter().all(|&i| i < rows.len),
            "Rows: an index past {} rows",
            rows.len
        );
        rows.idx = Some(idx);
        rows.len = idx.len();
        rows
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Row `r` of these rows.
    pub fn row(&self, r: usize) -> &'a [f32] {
        assert!(r < self.len, "Rows: row {r} of {}", self.len);
        let i = match self.idx {
            Some(idx) => idx[self.start + r],
            None => self.start + r,
        };
        &self.src[i * self.dim..(i + 1) * self.dim]
    }

    /// Rows `r` of these rows.
    pub fn slice(&self, r: std::ops::Range<usize>) -> Rows<'a> {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "Rows: {r:?} of {}",
            self.len
        );
        Rows {
            start: self.start + r.start,
            len: r.len(),
            ..*self
        }
    }

    /// The rows, one after another, into `dst` (`len x dim`).
    pub fn copy_to(&self, dst: &mut [f32]) {
        assert_eq!(
            dst.len(),
            self.len * self.dim,
            "Rows::copy_to: destination size"
        );
        match self.idx {
            None => dst.copy_from_slice(&self.src[self.start * self.dim..][..dst.len()]),
            Some(_) => {
                for (r, d) in dst.chunks_exact_mut(self.dim).enumerate() {
                    d.copy_from_slice(self.row(r));
                }
            }
        }
    }
}

/// The layout of a fully connected network inside a flat parameter buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    layers: Vec<Layer>,
}

impl Mlp {
    /// A network `sizes[0] -> ... -> sizes[last]` with tanh on hidden layers and a
    /// linear output, whose parameters start at `offset`.
    pub fn new(sizes: &[usize], offset: usize) -> Mlp {
        Mlp::with_activation(sizes, offset, Activation::Tanh)
    }

    /// As [`Mlp::new`] with `hidden` on the hidden layers (off-policy nets use ReLU).
    pub fn with_activation(sizes: &[usize], offset: usize, hidden: Activation) -> Mlp {
        assert!(sizes.len() >= 2, "an MLP needs an input and an output size");
        let mut at = offset;
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let l = Layer {
                    w: at,
                    b: at + w[0] * w[1],
                    fan_in: w[0],
                    fan_out: w[1],
                    act: if i + 2 == sizes.len() {
                        Activation::Identity
                    } else {
                        hidden
                    },
                };
                at += w[0] * w[1] + w[1];
                l
            })
            .collect();
        Mlp { layers }
    }

    /// The same network with its parameters starting at `offset` instead: what runs on
    /// the network's own range of the flat vector (`&params[start..end]`, and its
    /// gradient's), as a backend's per-network lanes do.
    pub fn rebased(&self, offset: usize) -> Mlp {
        let start = self.end() - self.num_params();
        let layers = self
            .layers
            .iter()
            .map(|l| Layer {
                w: l.w - start + offset,
                b: l.b - start + offset,
                ..l.clone()
            })
            .collect();
        Mlp { layers }
    }

    /// The layers, input first (for backends that run the same network elsewhere).
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Floating-point operations (2 x multiply-adds) of a forward pass over one row.
    pub fn flops_per_row(&self) -> f64 {
        self.layers
            .iter()
            .map(|l| 2.0 * (l.fan_in * l.fan_out) as f64)
            .sum()
    }

    pub fn num_params(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.fan_in * l.fan_out + l.fan_out)
            .sum()
    }

    /// One past the last parameter index.
    pub fn end(&self) -> usize {
        let l = self.layers.last().expect("at least one layer");
        l.b + l.fan_out
    }

    /// Whether parameter index `j` is a bias (not a weight).
    pub fn is_bias(&self, j: usize) -> bool {
        self.layers
            .iter()
            .any(|l| (l.b..l.b + l.fan_out).contains(&j))
    }

    pub fn input_dim(&self) -> usize {
        self.layers[0].fan_in
    }

    pub fn output_dim(&self) -> usize {
        self.layers.last().expect("at least one layer").fan_out
    }

    /// Whether layer `i`'s input-gradient product (`d W^T`) reads `W^T` from
    /// [`Params::transposed`] when given: layers past the first (the first's input
    /// gradient is asked for only by the actor's pass through a critic) whose product
    /// the kernel takes.
    fn reads_transposed(&self, i: usize) -> bool {
        let l = &self.layers[i];
        i > 0 && kernel_takes(l.fan_out, l.fan_in, (1, l.fan_out))
    }

    /// Writes the transpose of each weight a backward pass reads transposed
    /// ([`Params::transposed`]) into `wt`, which holds the parameters from index `at`:
    /// layer `l`'s `W^T` (`fan_out x fan_in`, row-major) at `l.w - at`.
    pub fn transpose_weights(&self, params: &[f32], wt: &mut [f32], at: usize) {
        for (i, l) in self.layers.iter().enumerate() {
            if self.reads_transposed(i) {
                let len = l.fan_in * l.fan_out;
                let w = &params[l.w..l.w + len];
                kernel::transpose(
                    w,
                    l.fan_out,
                    l.fan_in,
                    l.fan_out,
                    &mut wt[l.w - at..][..len],
                );
            }
        }
    }

    /// Orthogonal initialisation as CleanRL's `layer_init`: hidden layers with gain
    /// `hidden_gain`, the output layer with `out_gain`, biases zero.
    pub fn init(&self, params: &mut [f32], hidden_gain: f32, out_gain: f32, rng: &mut Rng) {
        let n = self.layers.len();
        for (i, l) in self.layers.iter().enumerate() {
            let gain = if i + 1 == n { out_gain } else { hidden_gain };
            orthogonal(
                &mut params[l.w..l.w + l.fan_in * l.fan_out],
                l.fan_in,
                l.fan_out,
                gain,
                rng,
            );
            params[l.b..l.b + l.fan_out].fill(0.0);
        }
    }

    /// PyTorch's default `nn.Linear` initialisation (Kaiming-uniform with a = sqrt(5)):
    /// weights and biases uniform in +-1/sqrt(fan_in). CleanRL's off-policy scripts use it.
    pub fn init_torch_default(&self, params: &mut [f32], rng: &mut Rng) {
        for l in &self.layers {
            let bound = 1.0 / (l.fan_in as f64).sqrt();
            for p in &mut params[l.w..l.b + l.fan_out] {
                *p = rng.uniform(-bound, bound) as f32;
            }
        }
    }

    /// Scales the output layer's weights and biases (a smaller last layer keeps the
    /// first actions and values near zero).
    pub fn scale_output_layer(&self, params: &mut [f32], factor: f32) {
        let l = self.layers.last().expect("at least one layer");
        for p in &mut params[l.w..l.b + l.fan_out] {
            *p *= factor;
        }
    }

    fn prepare(&self, cache: &mut MlpCache, batch: usize) {
        if cache.batch != batch || cache.hs.len() != self.layers.len() + 1 {
            cache.batch = batch;
            cache.hs = std::iter::once(self.input_dim())
                .chain(self.layers.iter().map(|l| l.fan_out))
                .map(|d| vec![0.0; batch * d])
                .collect();
            cache.delta = self
                .layers
                .iter()
                .map(|l| vec![0.0; batch * l.fan_in.max(l.fan_out)])
                .collect();
        }
    }

    /// Forward pass over `batch` rows of `x`; returns the output (`batch x out`),
    /// which stays valid in `cache` until the next call.
    pub fn forward<'c>(
        &self,
        params: &[f32],
        x: &[f32],
        batch: usize,
        cache: &'c mut MlpCache,
    ) -> &'c [f32] {
        assert_eq!(
            x.len(),
            batch * self.input_dim(),
            "Mlp::forward: input shape"
        );
        self.forward_rows(params, Rows::dense(x, self.input_dim()), cache)
    }

    /// [`Mlp::forward`] over the rows `x` names (copied into `cache` as the backward
    /// pass needs them, from wherever they are).
    pub fn forward_rows<'c>(
        &self,
        params: &[f32],
        x: Rows<'_>,
        cache: &'c mut MlpCache,
    ) -> &'c [f32] {
        assert_eq!(x.dim(), self.input_dim(), "Mlp::forward: input width");
        let batch = x.len();
        self.prepare(cache, batch);
        x.copy_to(&mut cache.hs[0]);
        for (i, l) in self.layers.iter().enumerate() {
            let (prev, next) = cache.hs.split_at_mut(i + 1);
            let (h_in, h_out) = (&prev[i], &mut next[0]);
            affine(
                batch,
                l.fan_in,
                l.fan_out,
                h_in,
                &params[l.w..l.w + l.fan_in * l.fan_out],
                &params[l.b..l.b + l.fan_out],
                h_out,
            );
            match l.act {
                Activation::Tanh => tanh_in_place(h_out),
                Activation::Relu => h_out.iter_mut().for_each(|v| *v = v.max(0.0)),
                Activation::Identity => {}
            }
        }
        &cache.hs[self.layers.len()]
    }

    /// Backward pass for the last `forward` on `cache`: given d loss / d output
    /// (`batch x out`), *adds* the parameter gradients into `grads` (same layout as
    /// `params`). Returns nothing about the input: the input is data.
    pub fn backward(&self, params: &[f32], grads: &mut [f32], dout: &[f32], cache: &mut MlpCache) {
        self.backward_full(params, Some(grads), dout, cache, None);
    }

    /// The general backward pass: adds parameter gradients into `grads` when given, and
    /// writes d loss / d input (`batch x in`) into `dinput` when given. The actor update
    /// of DDPG/TD3/SAC needs the critic's gradient with respect to the action without the
    /// critic's own parameter gradients, hence both are optional.
    pub fn backward_full(
        &self,
        params: &[f32],
        grads: Option<&mut [f32]>,
        dout: &[f32],
        cache: &mut MlpCache,
        dinput: Option<&mut [f32]>,
    ) {
        self.backward_with(Params::flat(params), grads, false, dout, cache, dinput);
    }

    /// [`Mlp::backward`] writing the parameter gradients into `grads` (every weight and
    /// bias of this network overwritten, the rest of `grads` untouched) instead of
    /// adding them: a chunk's own gradient without zeroing it first.
    pub fn backward_set(
        &self,
        params: &[f32],
        grads: &mut [f32],
        dout: &[f32],
        cache: &mut MlpCache,
    ) {
        self.backward_with(Params::flat(params), Some(grads), true, dout, cache, None);
    }

    /// The backward pass, reading the weights from `params` (transposed ones where
    /// given): adds the parameter gradients into `grads` when given (writes them with
    /// `set`, as [`Mlp::backward_set`]), and writes d loss / d input into `dinput` when
    /// given (as [`Mlp::backward_full`]).
    pub fn backward_with(
        &self,
        params: Params<'_>,
        mut grads: Option<&mut [f32]>,
        set: bool,
        dout: &[f32],
        cache: &mut MlpCache,
        dinput: Option<&mut [f32]>,
    ) {
        let batch = cache.batch;
        assert_eq!(
            dout.len(),
            batch * self.output_dim(),
            "Mlp::backward: gradient shape"
        );
        if let Some(d) = &dinput {
            assert_eq!(
                d.len(),
                batch * self.input_dim(),
                "Mlp::backward: input-gradient shape"
            );
        }
        let n = self.layers.len();
        // delta holds d loss / d pre-activation of the current layer.
        let mut cur = std::mem::take(&mut cache.delta[n - 1]);
        cur[..dout.len()].copy_from_slice(dout);
        let mut dinput = dinput;
        for i in (0..n).rev() {
            let l = &self.layers[i];
            let d = &cur[..batch * l.fan_out];
            let h_in = &cache.hs[i];
            if let Some(grads) = grads.as_deref_mut()
                && set
                && kernel_takes(batch, l.fan_out, (l.fan_out, 1))
            {
                // dW = h_in^T d and db = the sum of d's rows, in one pass of the kernel
                // over d (the bits of the passes below: the kernel's sums start from +0
                // as `db`'s do, and add the rows in order).
                let (weights, bias) = grads.split_at_mut(l.b);
                let dw = &mut weights[l.w..l.w + l.fan_in * l.fan_out];
                let db = &mut bias[..l.fan_out];
                let shape = (l.fan_in, batch, l.fan_out);
                let d_strides = (l.fan_out, 1);
                let start = kernel::Start::Set;
                on_kernel(
                    shape,
                    h_in,
                    (1, l.fan_in),
                    d,
                    d_strides,
                    dw,
                    l.fan_out,
                    start,
                    Some(db),
                );
            } else if let Some(grads) = grads.as_deref_mut() {
                // dW += h_in^T d  ([in x batch] x [batch x out]); with `set`, dW = (the
                // kernel's sums start from +0, so writing them equals adding them to 0).
                gemm(
                    l.fan_in,
                    batch,
                    l.fan_out,
                    1.0,
                    h_in,
                    (1, l.fan_in),
                    d,
                    (l.fan_out, 1),
                    if set { 0.0 } else { 1.0 },
                    &mut grads[l.w..l.w + l.fan_in * l.fan_out],
                    (l.fan_out, 1),
                );
                let db = &mut grads[l.b..l.b + l.fan_out];
                if set {
                    // Summed from zero as when adding (a first row copied in would
                    // keep a -0 that 0 + -0 turns into +0).
                    db.fill(0.0);
                }
                add_rows(db, d);
            }
            if i == 0 && dinput.is_none() {
                cache.delta[0] = cur;
                break;
            }
            // d_prev = (d W^T) * act'(h_in), W^T read through W's strides or, where the
            // caller keeps it, from its row-major copy.
            let len = l.fan_in * l.fan_out;
            let (w, w_t) = match params.transposed.filter(|_| self.reads_transposed(i)) {
                Some(wt) => (&wt[l.w..l.w + len], (l.fan_in, 1)),
                None => (&params.flat[l.w..l.w + len], (1, l.fan_out)),
            };
            let d_wt = |out: &mut [f32]| {
                gemm(
                    batch,
                    l.fan_out,
                    l.fan_in,
                    1.0,
                    d,
                    (l.fan_out, 1),
                    w,
                    w_t,
                    0.0,
                    out,
                    (l.fan_in, 1),
                );
            };
            if i == 0 {
                // The input has no activation: d input = d W^T.
                d_wt(dinput.take().expect("checked above"));
                cache.delta[0] = cur;
                break;
            }
            let mut prev = std::mem::take(&mut cache.delta[i - 1]);
            let dp = &mut prev[..batch * l.fan_in];
            let h_in = &h_in[..batch * l.fan_in];
            let through = match self.layers[i - 1].act {
                Activation::Tanh => Some(kernel::Start::TanhGrad(h_in)),
                Activation::Relu => Some(kernel::Start::ReluGrad(h_in)),
                Activation::Identity => None,
            };
            if let Some(start) = through.filter(|_| kernel_takes(l.fan_out, l.fan_in, w_t)) {
                // The kernel applies the activation's gradient as it stores: one pass.
                let shape = (batch, l.fan_out, l.fan_in);
                on_kernel(shape, d, (l.fan_out, 1), w, w_t, dp, l.fan_in, start, None);
            } else {
                d_wt(dp);
                activation_grad(self.layers[i - 1].act, dp, h_in);
            }
            cache.delta[i] = cur;
            cur = prev;
        }
    }
}

/// Every `row.len()`-wide row of `out` set to `row` (a layer's bias, before its product is
/// added on top), by doubling the filled part: a handful of block copies where a copy per
/// row was a `memcpy` call per 64 floats (3.8 % of a 64-env PPO CartPole run).
pub(crate) fn fill_rows(out: &mut [f32], row: &[f32]) {
    let w = row.len();
    if w == 0 || out.len() < w {
        return;
    }
    let whole = out.len() / w * w;
    let out = &mut out[..whole];
    out[..w].copy_from_slice(row);
    let mut filled = w;
    while filled < out.len() {
        let n = filled.min(out.len() - filled);
        out.copy_within(0..n, filled);
        filled += n;
    }
}

/// `sum += ` every row of `rows` (rows of `sum.len()`): a bias gradient.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn add_rows(sum: &mut [f32], rows: &[f32]) {
    for row in rows.chunks_exact(sum.len()) {
        for (g, v) in sum.iter_mut().zip(row) {
            *g += v;
        }
    }
}

/// `g *= act'` at the activation's outputs `h` (the backward pass through it).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn activation_grad(act: Activation, g: &mut [f32], h: &[f32]) {
    match act {
        Activation::Tanh => {
            for (g, h) in g.iter_mut().zip(h) {
                *g *= 1.0 - h * h;
            }
        }
        Activation::Relu => {
            // A select, not a branch: it vectorises (the branchy form was 30% of a
            // SAC update, measured with perf).
            for (g, h) in g.iter_mut().zip(h) {
                *g = if *h > 0.0 { *g } else { 0.0 };
            }
        }
        Activation::Identity => {}
    }
}

/// Fills `w` (`rows x cols`, row-major) with a scaled random orthogonal matrix:
/// Gram-Schmidt on Gaussian vectors along the longer dimension.
pub fn orthogonal(w: &mut [f32], rows: usize, cols: usize, gain: f32, rng: &mut Rng) {
    let (n, m) = if rows >= cols {
        (rows, cols)
    } else {
        (cols, rows)
    };
    // m orthonormal vectors of length n.
    let mut q = vec![0.0f64; m * n];
    for j in 0..m {
        loop {
            for v in &mut q[j * n..(j + 1) * n] {
                *v = normal(rng);
            }
            for p in 0..j {
                let dot: f64 = (0..n).map(|t| q[j * n + t] * q[p * n + t]).sum();
                for t in 0..n {
                    q[j * n + t] -= dot * q[p * n + t];
                }
            }
            let norm = q[j * n..(j + 1) * n]
                .iter()
                .map(|v| v * v)
                .sum::<f64>()
                .sqrt();
            if norm > 1e-6 {
                q[j * n..(j + 1) * n].iter_mut().for_each(|v| *v /= norm);
                break;
            }
        }
    }
    for r in 0..rows {
        for c in 0..cols {
            let v = if rows >= cols {
                q[c * n + r]
            } else {
                q[r * n + c]
            };
            w[r * cols + c] = (f64::from(gain) * v) as f32;
        }
    }
}

/// A standard normal draw (Box-Muller).
pub fn normal(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - rng.unit_f64();
    let u2 = rng.unit_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Checks `grads` against central differences of `loss` around `params` (step `h`):
/// every entry within `tol * (1 + |analytic|)`; panics naming the first parameter that is
/// not. What the network and loss tests of rlrig check hand-written gradients with.
pub fn assert_matches_central_differences(
    params: &[f32],
    grads: &[f32],
    h: f32,
    tol: f64,
    mut loss: impl FnMut(&[f32]) -> f64,
) {
    for i in 0..params.len() {
        let mut p = params.to_vec();
        p[i] += h;
        let up = loss(&p);
        p[i] -= 2.0 * h;
        let down = loss(&p);
        let fd = (up - down) / (2.0 * f64::from(h));
        let an = f64::from(grads[i]);
        assert!(
            (fd - an).abs() < tol * (1.0 + an.abs()),
            "value {i}: analytic {an} vs numeric {fd}"
        );
    }
}

/// [`assert_matches_central_differences`] for a network's backward pass on the loss
/// `sum(output * g)` (so d loss / d output = `g`): `forward(params, cache)` is the output on
/// fixed inputs, `backward(params, grads, cache)` adds d loss / d params given `g`. Both
/// run twice over the same cache first (the second pass must reuse its buffers correctly).
/// Returns the gradients checked.
#[cfg(test)]
pub(crate) fn assert_backward_matches_central_differences<C: Default>(
    params: &[f32],
    g: &[f32],
    (h, tol): (f32, f64),
    forward: impl Fn(&[f32], &mut C) -> Vec<f32>,
    backward: impl Fn(&[f32], &mut [f32], &mut C),
) -> Vec<f32> {
    let mut cache = C::default();
    let loss = |p: &[f32], cache: &mut C| -> f64 {
        let out = forward(p, cache);
        out.iter()
            .zip(g)
            .map(|(o, g)| f64::from(*o) * f64::from(*g))
            .sum()
    };
    let mut grads = vec![0.0; params.len()];
    for _ in 0..2 {
        loss(params, &mut cache);
        grads.fill(0.0);
        backward(params, &mut grads, &mut cache);
    }
    assert_matches_central_differences(params, &grads, h, tol, |p| loss(p, &mut cache));
    grads
}

#[cfg(test)]
mod tests;
