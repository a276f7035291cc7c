//! The native CPU path for the small networks RL uses: MLPs with tanh hidden layers,
//! forward and backward over whole batches on `matrixmultiply`'s strided sgemm, a
//! vectorisable tanh, no allocation after the first call at a given batch size.
//!
//! Parameters live in one flat `f32` buffer owned by the caller (an agent keeps all
//! its networks in one buffer, so Adam, gradient clipping and checkpoints see a single
//! slice). An [`Mlp`] is only a layout: offsets of each layer's weights and biases.
//! Weights are stored `[in, out]` row-major, so `y = x W + b` for row-major batches.

use rlrig_env::Rng;

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
    // The shapes of small-network training and inference (k and n of a few dozen,
    // m up to a few thousand): matrixmultiply's packing costs more than the
    // arithmetic there, so row-major operands take plain loops that vectorise over n.
    if alpha == 1.0 && (rsb, csb) == (n, 1) && (rsc, csc) == (n, 1) && m * k * n <= SMALL_WORK {
        if beta == 0.0 {
            c[..m * n].fill(0.0);
        } else if beta != 1.0 {
            c[..m * n].iter_mut().for_each(|v| *v *= beta);
        }
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

/// Products of at most this many multiply-adds take the plain-loop path in [`gemm`];
/// larger ones (training minibatches) are faster in matrixmultiply despite its packing
/// (measured on PPO CartPole: inference 0.68 -> 0.23 s, learner 2.4 -> 1.8 s).
const SMALL_WORK: usize = 65_536;

/// `c += a b` for row-major `a` (m x k), `b` (k x n), `c` (m x n).
///
/// Products accumulate with `mul_add`: one FMA instruction on every target listed,
/// and a correctly rounded software fma elsewhere, so results are the same on every
/// machine (only slower on CPUs without FMA).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn small_gemm_nn(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let mut i = 0;
    if n == 64 {
        // The common hidden width: a 4 x 64 block of c lives in registers across k.
        while i + 4 <= m {
            block_nn::<64>(k, &a[i * k..(i + 4) * k], b, &mut c[i * 64..(i + 4) * 64]);
            i += 4;
        }
    }
    if n < 16 {
        // Narrow outputs (value heads, logits): dot products of a's rows with b's
        // columns, with 16 partial sums so neither a memory nor an add chain serialises.
        // b^T, on the stack for the shapes that come here (n < 16, k <= 4096 / n).
        let (mut stack, mut heap) = ([0.0f32; SCRATCH], Vec::new());
        let bt = scratch(&mut stack, &mut heap, n * k);
        for t in 0..k {
            for j in 0..n {
                bt[j * k + t] = b[t * n + j];
            }
        }
        for i in i..m {
            for j in 0..n {
                c[i * n + j] += dot(&a[i * k..(i + 1) * k], &bt[j * k..(j + 1) * k]);
            }
        }
        return;
    }
    for i in i..m {
        let crow = &mut c[i * n..(i + 1) * n];
        for t in 0..k {
            let av = a[i * k + t];
            for (cv, bv) in crow.iter_mut().zip(&b[t * n..(t + 1) * n]) {
                *cv = av.mul_add(*bv, *cv);
            }
        }
    }
}

/// Floats of scratch the small products keep on the stack.
const SCRATCH: usize = 4096;

/// `len` floats of scratch: the stack buffer when it is large enough, else the heap.
#[inline(always)]
fn scratch<'a>(stack: &'a mut [f32; SCRATCH], heap: &'a mut Vec<f32>, len: usize) -> &'a mut [f32] {
    if len <= SCRATCH {
        &mut stack[..len]
    } else {
        heap.resize(len, 0.0);
        heap
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

/// Four rows of `c += a b` with `n = N`, accumulated in a local block.
#[inline(always)]
fn block_nn<const N: usize>(k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let mut acc = [[0.0f32; N]; 4];
    for t in 0..k {
        let brow: &[f32; N] = b[t * N..(t + 1) * N].try_into().expect("row of N");
        for r in 0..4 {
            let av = a[r * k + t];
            for j in 0..N {
                acc[r][j] = av.mul_add(brow[j], acc[r][j]);
            }
        }
    }
    for r in 0..4 {
        for j in 0..N {
            c[r * N + j] += acc[r][j];
        }
    }
}

/// `c += a^T b` where `a` is stored row-major as k x m (so `a^T` is m x k), `b` is
/// k x n, `c` is m x n: a sum of outer products, one per row `t` of `a` and `b`.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn small_gemm_tn(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let mut i = 0;
    if n == 64 {
        // Four rows of c (columns i..i+4 of a) in registers across all k.
        while i + 4 <= m {
            let mut acc = [[0.0f32; 64]; 4];
            for t in 0..k {
                let brow: &[f32; 64] = b[t * 64..(t + 1) * 64].try_into().expect("row of 64");
                for r in 0..4 {
                    let av = a[t * m + i + r];
                    for j in 0..64 {
                        acc[r][j] = av.mul_add(brow[j], acc[r][j]);
                    }
                }
            }
            for r in 0..4 {
                for j in 0..64 {
                    c[(i + r) * 64 + j] += acc[r][j];
                }
            }
            i += 4;
        }
    }
    if n >= 16 {
        // Wide rows of c (the input layer's dW: m = obs dim): c's row ii gets
        // a[t][ii] times b's row t, contiguous over n.
        for t in 0..k {
            let brow = &b[t * n..(t + 1) * n];
            for ii in i..m {
                let av = a[t * m + ii];
                for (cv, bv) in c[ii * n..(ii + 1) * n].iter_mut().zip(brow) {
                    *cv = av.mul_add(*bv, *cv);
                }
            }
        }
        return;
    }
    // Narrow c (value and logit heads, n < 16): one column of c at a time, kept
    // contiguous in a scratch buffer so the loop over rows vectorises. Each element
    // still sums over t in order, as above.
    let rows = m - i;
    let (mut stack, mut heap) = ([0.0f32; SCRATCH], Vec::new());
    let ct = scratch(&mut stack, &mut heap, rows * n);
    for j in 0..n {
        for (r, v) in ct[j * rows..(j + 1) * rows].iter_mut().enumerate() {
            *v = c[(i + r) * n + j];
        }
    }
    for t in 0..k {
        let arow = &a[t * m + i..(t + 1) * m];
        for j in 0..n {
            let bv = b[t * n + j];
            for (cv, av) in ct[j * rows..(j + 1) * rows].iter_mut().zip(arow) {
                *cv = av.mul_add(bv, *cv);
            }
        }
    }
    for j in 0..n {
        for (r, v) in ct[j * rows..(j + 1) * rows].iter().enumerate() {
            c[(i + r) * n + j] = *v;
        }
    }
}

/// `e^x` for `x` in [0, 88], branch-free so loops over it vectorise.
/// 2^x split into integer and fraction; 2^f by its Taylor series to degree 7
/// (|f| <= 1/2: truncation 1.2e-7 relative, about one f32 ulp).
#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2: f32 = std::f32::consts::LN_2;
    // Adding 1.5 * 2^23 rounds y to an integer held in the low mantissa bits: pure
    // float and bit operations, which vectorise (`floor` needs SSE4.1 or libm, and a
    // saturating `as i32` is scalarised).
    const MAGIC: f32 = 12_582_912.0;
    let y = x * LOG2E;
    let k = y + MAGIC;
    let n = k - MAGIC;
    let ni = k.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
    let f = (y - n) * LN2;
    // e^f, Horner form of sum f^k / k!.
    let p = 1.0
        + f * (1.0
            + f * (0.5
                + f * (1.0 / 6.0
                    + f * (1.0 / 24.0
                        + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    p * scale
}

/// `tanh(x)` within 2e-7 absolute of libm's, branch-free: an odd Taylor polynomial
/// for |x| < 0.5 (truncation < 2e-8) and `1 - 2 / (e^{2|x|} + 1)` beyond, with the
/// sign restored. libm's `tanhf` costs more than the matrix products of a 64-unit
/// layer; this vectorises 16 lanes at a time.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs().min(10.0);
    let a2 = a * a;
    let small = a
        * (1.0
            + a2 * (-1.0 / 3.0
                + a2 * (2.0 / 15.0
                    + a2 * (-17.0 / 315.0
                        + a2 * (62.0 / 2835.0
                            + a2 * (-1382.0 / 155_925.0
                                + a2 * (21_844.0 / 6_081_075.0
                                    + a2 * (-929_569.0 / 638_512_875.0))))))));
    let large = 1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0);
    let t = if a < 0.5 { small } else { large };
    t.copysign(x)
}

/// `tanh` over a slice, compiled for AVX-512, AVX2 and NEON with run-time dispatch.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn tanh_in_place(v: &mut [f32]) {
    for x in v.iter_mut() {
        *x = tanh(*x);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Tanh,
    Relu,
    Identity,
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
    /// A transposed weight matrix, for the backward pass.
    wt: Vec<f32>,
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
        self.prepare(cache, batch);
        cache.hs[0].copy_from_slice(x);
        for (i, l) in self.layers.iter().enumerate() {
            let (prev, next) = cache.hs.split_at_mut(i + 1);
            let (h_in, h_out) = (&prev[i], &mut next[0]);
            // Start from the bias, then accumulate x W on top (beta = 1).
            let bias = &params[l.b..l.b + l.fan_out];
            for row in h_out.chunks_exact_mut(l.fan_out) {
                row.copy_from_slice(bias);
            }
            gemm(
                batch,
                l.fan_in,
                l.fan_out,
                1.0,
                h_in,
                (l.fan_in, 1),
                &params[l.w..l.w + l.fan_in * l.fan_out],
                (l.fan_out, 1),
                1.0,
                h_out,
                (l.fan_out, 1),
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
        mut grads: Option<&mut [f32]>,
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
            if let Some(grads) = grads.as_deref_mut() {
                // dW += h_in^T d  ([in x batch] x [batch x out]).
                gemm(
                    l.fan_in,
                    batch,
                    l.fan_out,
                    1.0,
                    h_in,
                    (1, l.fan_in),
                    d,
                    (l.fan_out, 1),
                    1.0,
                    &mut grads[l.w..l.w + l.fan_in * l.fan_out],
                    (l.fan_out, 1),
                );
                let gb = &mut grads[l.b..l.b + l.fan_out];
                for row in d.chunks_exact(l.fan_out) {
                    for (g, v) in gb.iter_mut().zip(row) {
                        *g += v;
                    }
                }
            }
            if i == 0 && dinput.is_none() {
                cache.delta[0] = cur;
                break;
            }
            // d_prev = (d W^T) * act'(h_in). W^T is materialised (out x in, row-major)
            // so the product takes gemm's row-major path.
            let w = &params[l.w..l.w + l.fan_in * l.fan_out];
            // gemm's plain-loop path wants W^T row-major; matrixmultiply (larger
            // products) packs W^T from W's strides itself.
            let (wt, wt_strides): (&[f32], (usize, usize)) =
                if batch * l.fan_in * l.fan_out <= SMALL_WORK {
                    cache.wt.resize(l.fan_in * l.fan_out, 0.0);
                    for r in 0..l.fan_in {
                        for c in 0..l.fan_out {
                            cache.wt[c * l.fan_in + r] = w[r * l.fan_out + c];
                        }
                    }
                    (&cache.wt, (l.fan_in, 1))
                } else {
                    (w, (1, l.fan_out))
                };
            if i == 0 {
                // The input has no activation: d input = d W^T.
                let dx = dinput.take().expect("checked above");
                gemm(
                    batch,
                    l.fan_out,
                    l.fan_in,
                    1.0,
                    d,
                    (l.fan_out, 1),
                    wt,
                    wt_strides,
                    0.0,
                    dx,
                    (l.fan_in, 1),
                );
                cache.delta[0] = cur;
                break;
            }
            let mut prev = std::mem::take(&mut cache.delta[i - 1]);
            let dp = &mut prev[..batch * l.fan_in];
            gemm(
                batch,
                l.fan_out,
                l.fan_in,
                1.0,
                d,
                (l.fan_out, 1),
                wt,
                wt_strides,
                0.0,
                dp,
                (l.fan_in, 1),
            );
            match self.layers[i - 1].act {
                Activation::Tanh => {
                    for (g, h) in dp.iter_mut().zip(h_in.iter()) {
                        *g *= 1.0 - h * h;
                    }
                }
                Activation::Relu => {
                    // A select, not a branch: it vectorises (the branchy form was 30%
                    // of a SAC update, measured with perf).
                    for (g, h) in dp.iter_mut().zip(h_in.iter()) {
                        *g = if *h > 0.0 { *g } else { 0.0 };
                    }
                }
                Activation::Identity => {}
            }
            cache.delta[i] = cur;
            cur = prev;
        }
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
/// every entry within `tol * (1 + |analytic|)`. Shared by the network tests.
#[cfg(test)]
pub(crate) fn assert_matches_central_differences(
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
            "param {i}: analytic {an} vs numeric {fd}"
        );
    }
}

#[cfg(test)]
mod tests;
