//! Small convolutional networks on the native path: square convolutions (any stride
//! and zero padding) by im2col + the same strided sgemm as the MLPs, ReLU, optional
//! residual blocks, then an [`Mlp`] head. Three shapes matter to rlrig: MinAtar's
//! reference network (one 3x3 conv, 16 channels, no padding, then 128 units), the Nature
//! DQN network for Atari (8x8/4, 4x4/2 and 3x3/1 convolutions with 32, 64 and 64
//! channels, then 512 units; Mnih et al. 2015) and AlphaZero's residual tower (a 3x3
//! "same" stem and residual blocks, then policy and value outputs).
//!
//! Activations are kept batch-major and channels-last (NHWC), so a convolution's input
//! patches are contiguous runs of channels and im2col is a series of copies. Inputs
//! arrive as environments give them, planes first (CHW per sample), and are transposed
//! (and scaled, e.g. by 1/255 for Atari's bytes) once. Weights sit in the flat parameter
//! vector as `[(ky, kx, cin), cout]` row-major (the im2col matrix times this is the
//! convolution), then `cout` biases.

use rlrig_env::Rng;

use crate::nn::{Activation, Mlp, MlpCache, Rows, gemm};

/// One convolution: square kernel `k`, stride `stride`, zero padding `pad`, ReLU after
/// it (inside a residual block, the second convolution's ReLU follows the skip sum).
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2d {
    pub w: usize,
    pub b: usize,
    pub cin: usize,
    pub cout: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
    /// Input height and width.
    pub h: usize,
    pub wd: usize,
}

/// The shape of one plain convolution of a [`ConvNet`]: output channels, kernel size,
/// stride, padding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConvSpec {
    pub cout: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
}

impl ConvSpec {
    pub const fn new(cout: usize, k: usize, stride: usize, pad: usize) -> ConvSpec {
        ConvSpec {
            cout,
            k,
            stride,
            pad,
        }
    }
}

/// The Nature DQN convolutions (Mnih et al. 2015), shared by DQN, A2C and PPO on Atari.
pub const NATURE: [ConvSpec; 3] = [
    ConvSpec::new(32, 8, 4, 0),
    ConvSpec::new(64, 4, 2, 0),
    ConvSpec::new(64, 3, 1, 0),
];

impl Conv2d {
    pub fn new(offset: usize, cin: usize, spec: ConvSpec, h: usize, wd: usize) -> Conv2d {
        let ConvSpec {
            cout,
            k,
            stride,
            pad,
        } = spec;
        assert!(
            h + 2 * pad >= k && wd + 2 * pad >= k && stride >= 1,
            "Conv2d: kernel larger than the padded input, or stride 0"
        );
        Conv2d {
            w: offset,
            b: offset + k * k * cin * cout,
            cin,
            cout,
            k,
            stride,
            pad,
            h,
            wd,
        }
    }

    pub fn out_h(&self) -> usize {
        (self.h + 2 * self.pad - self.k) / self.stride + 1
    }

    pub fn out_w(&self) -> usize {
        (self.wd + 2 * self.pad - self.k) / self.stride + 1
    }

    /// Rows of the im2col matrix per sample (output positions).
    fn positions(&self) -> usize {
        self.out_h() * self.out_w()
    }

    /// Columns of the im2col matrix (one receptive field).
    fn field(&self) -> usize {
        self.k * self.k * self.cin
    }

    /// Output values per sample.
    pub fn out_len(&self) -> usize {
        self.positions() * self.cout
    }

    pub fn end(&self) -> usize {
        self.b + self.cout
    }

    /// `cols[(n, oy, ox), (ky, kx, c)] = x[n, oy * stride + ky - pad, ox * stride + kx - pad, c]`
    /// (0 outside). A kernel row inside the input is one contiguous run of `k * cin`.
    fn im2col(&self, x: &[f32], batch: usize, cols: &mut [f32]) {
        let (oh, ow, k, cin, f) = (self.out_h(), self.out_w(), self.k, self.cin, self.field());
        let (s, pad) = (self.stride, self.pad as isize);
        for n in 0..batch {
            for oy in 0..oh {
                for ox in 0..ow {
                    let row = &mut cols[((n * oh + oy) * ow + ox) * f..][..f];
                    let ix0 = (ox * s) as isize - pad;
                    let inside_x = ix0 >= 0 && ix0 as usize + k <= self.wd;
                    for ky in 0..k {
                        let iy = (oy * s + ky) as isize - pad;
                        let dst = &mut row[ky * k * cin..(ky + 1) * k * cin];
                        if iy < 0 || iy >= self.h as isize {
                            dst.fill(0.0);
                            continue;
                        }
                        let line = (n * self.h + iy as usize) * self.wd;
                        if inside_x {
                            let at = (line + ix0 as usize) * cin;
                            dst.copy_from_slice(&x[at..at + k * cin]);
                            continue;
                        }
                        for kx in 0..k {
                            let ix = ix0 + kx as isize;
                            let d = &mut dst[kx * cin..(kx + 1) * cin];
                            if ix < 0 || ix >= self.wd as isize {
                                d.fill(0.0);
                            } else {
                                let at = (line + ix as usize) * cin;
                                d.copy_from_slice(&x[at..at + cin]);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The adjoint of [`Conv2d::im2col`]: adds each column entry back to its input cell.
    fn col2im(&self, dcols: &[f32], batch: usize, dx: &mut [f32]) {
        let (oh, ow, k, cin, f) = (self.out_h(), self.out_w(), self.k, self.cin, self.field());
        let (s, pad) = (self.stride, self.pad as isize);
        for n in 0..batch {
            for oy in 0..oh {
                for ox in 0..ow {
                    let row = &dcols[((n * oh + oy) * ow + ox) * f..][..f];
                    for ky in 0..k {
                        let iy = (oy * s + ky) as isize - pad;
                        if iy < 0 || iy >= self.h as isize {
                            continue;
                        }
                        for kx in 0..k {
                            let ix = (ox * s + kx) as isize - pad;
                            if ix < 0 || ix >= self.wd as isize {
                                continue;
                            }
                            let at = ((n * self.h + iy as usize) * self.wd + ix as usize) * cin;
                            for (d, s) in dx[at..at + cin]
                                .iter_mut()
                                .zip(&row[(ky * k + kx) * cin..][..cin])
                            {
                                *d += s;
                            }
                        }
                    }
                }
            }
        }
    }

    /// `out = im2col(x) W + b` (no activation); keeps the im2col matrix in `cols`.
    fn forward(
        &self,
        params: &[f32],
        x: &[f32],
        batch: usize,
        cols: &mut Vec<f32>,
        out: &mut [f32],
    ) {
        let (m, f, c) = (batch * self.positions(), self.field(), self.cout);
        cols.resize(m * f, 0.0);
        self.im2col(x, batch, cols);
        crate::nn::fill_rows(out, &params[self.b..self.b + c]);
        gemm(
            m,
            f,
            c,
            1.0,
            cols,
            (f, 1),
            &params[self.w..self.b],
            (c, 1),
            1.0,
            out,
            (c, 1),
        );
    }

    /// Given d loss / d (pre-activation) output, adds the weight and bias gradients and,
    /// when `dx` is given, adds d loss / d input into it (`dcols` is scratch).
    fn backward(
        &self,
        params: &[f32],
        grads: &mut [f32],
        cols: &[f32],
        dout: &[f32],
        batch: usize,
        dx: Option<(&mut [f32], &mut Vec<f32>)>,
    ) {
        let (m, f, c) = (batch * self.positions(), self.field(), self.cout);
        // dW += cols^T dout: cols is m x f row-major, read transposed.
        gemm(
            f,
            m,
            c,
            1.0,
            cols,
            (1, f),
            dout,
            (c, 1),
            1.0,
            &mut grads[self.w..self.b],
            (c, 1),
        );
        let gb = &mut grads[self.b..self.b + c];
        for row in dout.chunks_exact(c) {
            for (g, d) in gb.iter_mut().zip(row) {
                *g += d;
            }
        }
        if let Some((dx, dcols)) = dx {
            dcols.resize(m * f, 0.0);
            // dcols = dout W^T: W is f x c row-major, read transposed.
            gemm(
                m,
                c,
                f,
                1.0,
                dout,
                (c, 1),
                &params[self.w..self.b],
                (1, c),
                0.0,
                dcols,
                (f, 1),
            );
            self.col2im(dcols, batch, dx);
        }
    }
}

/// A convolutional tower and an MLP head in one flat parameter vector: plain
/// convolutions (the first is the stem), then `blocks` residual blocks (two
/// same-padded 3x3 convolutions and a skip), then the head on the flattened features.
/// ReLU throughout.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvNet {
    /// Input planes, height, width (observations are `planes x h x w`, planes first,
    /// unless `channels_last`).
    pub planes: usize,
    pub h: usize,
    pub w: usize,
    /// Observations arrive `h x w x planes` (MinAtar's and Gymnasium's image layout)
    /// instead of planes first; the network is the same, only the input is read so.
    pub channels_last: bool,
    /// Inputs are multiplied by this first (1/255 for Atari's bytes).
    pub scale: f32,
    /// The plain convolutions, in order; at least one.
    pub layers: Vec<Conv2d>,
    pub blocks: Vec<(Conv2d, Conv2d)>,
    pub head: Mlp,
}

/// Activations of the last forward pass, reused across calls.
#[derive(Default, Clone, Debug)]
pub struct ConvCache {
    batch: usize,
    /// Input transposed to NHWC.
    x: Vec<f32>,
    /// im2col matrices: the plain layers, then two per block.
    cols: Vec<Vec<f32>>,
    /// Post-ReLU outputs: the plain layers, then per block (inner, outer).
    acts: Vec<Vec<f32>>,
    head: MlpCache,
    // Backward scratch.
    d: Vec<f32>,
    d_inner: Vec<f32>,
    dcols: Vec<f32>,
}

impl ConvNet {
    /// `planes x h x w` inputs; a `k x k` stem with `channels` outputs and padding `pad`;
    /// `blocks` residual blocks (3x3, same padding); head `hidden` then `outputs`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        planes: usize,
        h: usize,
        w: usize,
        channels: usize,
        k: usize,
        pad: usize,
        blocks: usize,
        hidden: &[usize],
        outputs: usize,
        offset: usize,
    ) -> ConvNet {
        Self::tower(
            (planes, h, w),
            &[ConvSpec::new(channels, k, 1, pad)],
            blocks,
            hidden,
            outputs,
            offset,
        )
    }

    /// `planes x h x w` inputs through the plain convolutions `convs`, then `blocks`
    /// residual blocks on the last one's channels, then head `hidden` then `outputs`.
    pub fn tower(
        (planes, h, w): (usize, usize, usize),
        convs: &[ConvSpec],
        blocks: usize,
        hidden: &[usize],
        outputs: usize,
        offset: usize,
    ) -> ConvNet {
        assert!(!convs.is_empty(), "ConvNet: at least one convolution");
        let (mut at, mut cin, mut ih, mut iw) = (offset, planes, h, w);
        let layers: Vec<Conv2d> = convs
            .iter()
            .map(|&spec| {
                let c = Conv2d::new(at, cin, spec, ih, iw);
                (at, cin, ih, iw) = (c.end(), c.cout, c.out_h(), c.out_w());
                c
            })
            .collect();
        let blocks: Vec<(Conv2d, Conv2d)> = (0..blocks)
            .map(|_| {
                let same = ConvSpec::new(cin, 3, 1, 1);
                let a = Conv2d::new(at, cin, same, ih, iw);
                let b = Conv2d::new(a.end(), cin, same, ih, iw);
                at = b.end();
                (a, b)
            })
            .collect();
        let sizes: Vec<usize> = std::iter::once(ih * iw * cin)
            .chain(hidden.iter().copied())
            .chain([outputs])
            .collect();
        let head = Mlp::with_activation(&sizes, at, Activation::Relu);
        ConvNet {
            planes,
            h,
            w,
            channels_last: false,
            scale: 1.0,
            layers,
            blocks,
            head,
        }
    }

    /// The same network reading `h x w x planes` observations.
    pub fn with_channels_last(mut self) -> ConvNet {
        self.channels_last = true;
        self
    }

    /// The same network on inputs multiplied by `scale` first.
    pub fn with_scale(mut self, scale: f32) -> ConvNet {
        self.scale = scale;
        self
    }

    /// The first convolution.
    pub fn stem(&self) -> &Conv2d {
        &self.layers[0]
    }

    /// The last plain convolution (its output feeds the blocks, or the head).
    fn trunk(&self) -> &Conv2d {
        self.layers.last().expect("at least one convolution")
    }

    /// CleanRL's `layer_init`: orthogonal weights (each convolution as its
    /// `[(ky, kx, cin), cout]` matrix) with gain `hidden_gain`, the head's output layer
    /// with `out_gain`, zero biases.
    pub fn init(&self, params: &mut [f32], hidden_gain: f32, out_gain: f32, rng: &mut Rng) {
        for c in self.convs() {
            let rows = c.k * c.k * c.cin;
            crate::nn::orthogonal(
                &mut params[c.w..c.w + rows * c.cout],
                rows,
                c.cout,
                hidden_gain,
                rng,
            );
            params[c.w + rows * c.cout..c.end()].fill(0.0);
        }
        self.head.init(params, hidden_gain, out_gain, rng);
    }

    pub fn convs(&self) -> impl Iterator<Item = &Conv2d> {
        self.layers
            .iter()
            .chain(self.blocks.iter().flat_map(|(a, b)| [a, b]))
    }

    pub fn input_dim(&self) -> usize {
        self.planes * self.h * self.w
    }

    /// Floating-point operations (2 x multiply-adds) of a forward pass over one input.
    pub fn flops_per_row(&self) -> f64 {
        let convs: usize = self
            .convs()
            .map(|c| 2 * c.positions() * c.field() * c.cout)
            .sum();
        convs as f64 + self.head.flops_per_row()
    }

    pub fn output_dim(&self) -> usize {
        self.head.output_dim()
    }

    /// First parameter index.
    pub fn start(&self) -> usize {
        self.stem().w
    }

    /// One past the last parameter index.
    pub fn end(&self) -> usize {
        self.head.end()
    }

    pub fn num_params(&self) -> usize {
        self.end() - self.start()
    }

    /// PyTorch's default initialisation (uniform in +-1/sqrt(fan_in)) for every layer.
    pub fn init_torch_default(&self, params: &mut [f32], rng: &mut Rng) {
        for c in self.convs() {
            let bound = 1.0 / ((c.k * c.k * c.cin) as f64).sqrt();
            for p in &mut params[c.w..c.end()] {
                *p = rng.uniform(-bound, bound) as f32;
            }
        }
        self.head.init_torch_default(params, rng);
    }

    /// Sizes the buffers for `batch` inputs; they keep their memory across sizes (every
    /// value is written by the forward pass before it is read).
    fn prepare(&self, cache: &mut ConvCache, batch: usize) {
        let n = self.layers.len() + 2 * self.blocks.len();
        cache.batch = batch;
        cache.x.resize(batch * self.input_dim(), 0.0);
        cache.cols.resize_with(n, Vec::new);
        cache.acts.resize_with(n, Vec::new);
        for (a, c) in cache.acts.iter_mut().zip(self.convs()) {
            a.resize(batch * c.out_len(), 0.0);
        }
    }

    /// Forward pass over `batch` observations (`planes x h x w` each); returns the head's
    /// output (`batch x outputs`), valid in `cache` until the next call.
    pub fn forward<'c>(
        &self,
        params: &[f32],
        x: &[f32],
        batch: usize,
        cache: &'c mut ConvCache,
    ) -> &'c [f32] {
        assert_eq!(
            x.len(),
            batch * self.input_dim(),
            "ConvNet::forward: input shape"
        );
        self.forward_rows(params, Rows::dense(x, self.input_dim()), cache)
    }

    /// [`ConvNet::forward`] over the rows `x` names.
    pub fn forward_rows<'c>(
        &self,
        params: &[f32],
        x: Rows<'_>,
        cache: &'c mut ConvCache,
    ) -> &'c [f32] {
        assert_eq!(x.dim(), self.input_dim(), "ConvNet::forward: input width");
        let batch = x.len();
        self.prepare(cache, batch);
        let (p, hw, scale) = (self.planes, self.h * self.w, self.scale);
        for (n, dst) in cache.x.chunks_exact_mut(p * hw).take(batch).enumerate() {
            let row = x.row(n);
            if self.channels_last {
                for (d, s) in dst.iter_mut().zip(row) {
                    *d = s * scale;
                }
            } else {
                for c in 0..p {
                    for i in 0..hw {
                        dst[i * p + c] = row[c * hw + i] * scale;
                    }
                }
            }
        }
        let relu = |v: &mut [f32]| v.iter_mut().for_each(|x| *x = x.max(0.0));
        let nl = self.layers.len();
        for (i, c) in self.layers.iter().enumerate() {
            let (before, after) = cache.acts.split_at_mut(i);
            let input = if i == 0 { &cache.x } else { &before[i - 1] };
            c.forward(params, input, batch, &mut cache.cols[i], &mut after[0]);
            relu(&mut after[0]);
        }
        for (i, (a, b)) in self.blocks.iter().enumerate() {
            let (before, after) = cache.acts.split_at_mut(nl + 2 * i);
            let input = &before[nl + 2 * i - 1];
            let (inner, rest) = after.split_at_mut(1);
            a.forward(
                params,
                input,
                batch,
                &mut cache.cols[nl + 2 * i],
                &mut inner[0],
            );
            relu(&mut inner[0]);
            b.forward(
                params,
                &inner[0],
                batch,
                &mut cache.cols[nl + 2 * i + 1],
                &mut rest[0],
            );
            for (o, s) in rest[0].iter_mut().zip(input.iter()) {
                *o = (*o + s).max(0.0);
            }
        }
        let features = cache.acts.last().expect("at least one convolution");
        self.head.forward(params, features, batch, &mut cache.head)
    }

    /// Backward pass for the last `forward` on `cache`: adds every parameter gradient
    /// into `grads` given d loss / d output.
    pub fn backward(&self, params: &[f32], grads: &mut [f32], dout: &[f32], cache: &mut ConvCache) {
        let batch = cache.batch;
        let nl = self.layers.len();
        let feat = batch * self.trunk().out_len();
        cache.d.resize(feat, 0.0);
        cache.d.fill(0.0);
        self.head.backward_full(
            params,
            Some(&mut *grads),
            dout,
            &mut cache.head,
            Some(&mut cache.d),
        );
        let mask = |d: &mut [f32], act: &[f32]| {
            for (d, o) in d.iter_mut().zip(act) {
                if *o <= 0.0 {
                    *d = 0.0;
                }
            }
        };
        for (i, (a, b)) in self.blocks.iter().enumerate().rev() {
            // out = relu(input + conv_b(relu(conv_a(input)))): d flows through the ReLU,
            // then to both the skip and conv_b.
            mask(&mut cache.d, &cache.acts[nl + 2 * i + 1]);
            cache.d_inner.resize(feat, 0.0);
            cache.d_inner.fill(0.0);
            b.backward(
                params,
                grads,
                &cache.cols[nl + 2 * i + 1],
                &cache.d,
                batch,
                Some((&mut cache.d_inner, &mut cache.dcols)),
            );
            mask(&mut cache.d_inner, &cache.acts[nl + 2 * i]);
            // cache.d already holds the skip's share; conv_a adds its input gradient.
            a.backward(
                params,
                grads,
                &cache.cols[nl + 2 * i],
                &cache.d_inner,
                batch,
                Some((&mut cache.d, &mut cache.dcols)),
            );
        }
        for (i, c) in self.layers.iter().enumerate().rev() {
            mask(&mut cache.d, &cache.acts[i]);
            if i == 0 {
                // No gradient for the observations.
                c.backward(params, grads, &cache.cols[0], &cache.d, batch, None);
            } else {
                cache.d_inner.resize(cache.acts[i - 1].len(), 0.0);
                cache.d_inner.fill(0.0);
                c.backward(
                    params,
                    grads,
                    &cache.cols[i],
                    &cache.d,
                    batch,
                    Some((&mut cache.d_inner, &mut cache.dcols)),
                );
                std::mem::swap(&mut cache.d, &mut cache.d_inner);
            }
        }
    }
}

#[cfg(test)]
mod tests;
