//! The learning interface the algorithms are written against, and its native CPU
//! implementation.
//!
//! A [`NetBackend`] owns a set of networks ([`Net`]: MLPs and convolutional towers) that
//! share one flat parameter vector (the layouts of [`Mlp`] and [`ConvNet`]), a range
//! of free parameters outside any network (PPO's Gaussian log-std), their gradients and
//! the optimiser. An algorithm computes its loss head on the host from the networks'
//! outputs (a few floats per sample for RL's heads) and hands back d loss / d output;
//! the backend does the rest where the parameters live. That keeps per-call traffic to
//! inputs, outputs and output gradients: the parameters never leave a GPU device during
//! training.
//!
//! [`Native`] is the default: the fused path of [`crate::nn`] and [`crate::conv`]. The
//! Burn implementation (CPU reference and wgpu GPUs) is the `rlrig-burn` crate, which
//! only builds where asked for, so a CPU-only build never compiles Burn.

use std::ops::Range;
use std::sync::Arc;

use crate::NnError;
use crate::conv::{ConvCache, ConvNet};
use crate::nn::{Mlp, MlpCache, Params, Rows};
use crate::optim::Adam;

/// Answers many small forward requests at once: for `n` observations (`n x OBS_DIM`)
/// it writes policy logits (`n x ACTIONS`) and values in [-1, 1] for the side to move
/// (AlphaZero's search), or for the acting player (PPO's inference server).
pub trait Evaluator {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]);
}

/// Which parameters a forward pass reads: the trained ones, keeping the activations for
/// a backward pass, or the target copy ([`NetBackend::init_target`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    Train,
    Target,
}

/// One network of a learner: an MLP or a convolutional tower with an MLP head.
#[derive(Clone, Debug, PartialEq)]
pub enum Net {
    Mlp(Mlp),
    Conv(ConvNet),
}

impl From<Mlp> for Net {
    fn from(m: Mlp) -> Net {
        Net::Mlp(m)
    }
}

impl From<ConvNet> for Net {
    fn from(c: ConvNet) -> Net {
        Net::Conv(c)
    }
}

/// Activations of a [`Net`]'s last forward pass.
#[derive(Default, Clone, Debug)]
pub struct NetCache {
    mlp: MlpCache,
    conv: ConvCache,
}

impl Net {
    /// First parameter index.
    pub fn start(&self) -> usize {
        match self {
            Net::Mlp(m) => m.end() - m.num_params(),
            Net::Conv(c) => c.start(),
        }
    }

    /// One past the last parameter index.
    pub fn end(&self) -> usize {
        match self {
            Net::Mlp(m) => m.end(),
            Net::Conv(c) => c.end(),
        }
    }

    /// PyTorch's default initialisation of the network's parameters in `params` (its
    /// range of the flat vector): [`Mlp::init_torch_default`], [`ConvNet::init_torch_default`].
    pub fn init_torch_default(&self, params: &mut [f32], rng: &mut rlrig_env::Rng) {
        match self {
            Net::Mlp(m) => m.init_torch_default(params, rng),
            Net::Conv(c) => c.init_torch_default(params, rng),
        }
    }

    pub fn input_dim(&self) -> usize {
        match self {
            Net::Mlp(m) => m.input_dim(),
            Net::Conv(c) => c.input_dim(),
        }
    }

    pub fn output_dim(&self) -> usize {
        match self {
            Net::Mlp(m) => m.output_dim(),
            Net::Conv(c) => c.output_dim(),
        }
    }

    /// Floating-point operations (2 x multiply-adds) of a forward pass over one row.
    pub fn flops_per_row(&self) -> f64 {
        match self {
            Net::Mlp(m) => m.flops_per_row(),
            Net::Conv(c) => c.flops_per_row(),
        }
    }

    /// Forward pass over `batch` rows of `x` on the native path.
    pub fn forward<'c>(
        &self,
        params: &[f32],
        x: &[f32],
        batch: usize,
        cache: &'c mut NetCache,
    ) -> &'c [f32] {
        match self {
            Net::Mlp(m) => m.forward(params, x, batch, &mut cache.mlp),
            Net::Conv(c) => c.forward(params, x, batch, &mut cache.conv),
        }
    }

    /// [`Net::forward`] over the rows `x` names.
    pub fn forward_rows<'c>(
        &self,
        params: &[f32],
        x: Rows<'_>,
        cache: &'c mut NetCache,
    ) -> &'c [f32] {
        match self {
            Net::Mlp(m) => m.forward_rows(params, x, &mut cache.mlp),
            Net::Conv(c) => c.forward_rows(params, x, &mut cache.conv),
        }
    }

    /// Adds the parameter gradients of the last `forward` on `cache` into `grads`.
    pub fn backward(&self, params: &[f32], grads: &mut [f32], dout: &[f32], cache: &mut NetCache) {
        match self {
            Net::Mlp(m) => m.backward(params, grads, dout, &mut cache.mlp),
            Net::Conv(c) => c.backward(params, grads, dout, &mut cache.conv),
        }
    }

    /// Writes the parameter gradients of the last `forward` on `cache` into this
    /// network's range of `grads` (whatever was there before is replaced).
    pub fn backward_set(
        &self,
        params: Params<'_>,
        grads: &mut [f32],
        dout: &[f32],
        cache: &mut NetCache,
    ) {
        match self {
            Net::Mlp(m) => m.backward_with(params, Some(grads), true, dout, &mut cache.mlp, None),
            Net::Conv(c) => {
                grads[self.start()..self.end()].fill(0.0);
                c.backward(params.flat, grads, dout, &mut cache.conv);
            }
        }
    }

    /// Writes the transposes of the weights its backward passes read transposed into
    /// `wt`, which holds this network's parameters ([`Mlp::transpose_weights`]; nothing
    /// for a convolutional network).
    pub fn transpose_weights(&self, params: &[f32], wt: &mut [f32]) {
        if let Net::Mlp(m) = self {
            m.transpose_weights(params, wt, self.start());
        }
    }
}

/// The networks and free parameters of one learner, inside one flat parameter vector.
#[derive(Clone, Debug, PartialEq)]
pub struct NetLayout {
    pub nets: Vec<Net>,
    /// Parameters trained with the networks but not part of any (PPO's log-std).
    pub free: Range<usize>,
    /// Length of the flat parameter vector.
    pub total: usize,
}

impl NetLayout {
    /// The fewest rows of a chunk of a pass over these networks (by the costliest):
    /// of a training pass (whose backward pass follows) or of an inference pass.
    pub fn min_chunk_rows(&self, train: bool) -> usize {
        let flops = self.nets.iter().map(Net::flops_per_row).fold(1.0, f64::max);
        let (work, most) = if train {
            (MIN_TRAIN_CHUNK_FLOPS, MIN_CHUNK_ROWS)
        } else {
            (MIN_CHUNK_FLOPS, MIN_INFER_CHUNK_ROWS)
        };
        ((work / flops) as usize).clamp(MIN_CHUNK_ROWS_LARGE, most)
    }

    /// Checks that the networks and the free range tile `0..total` without overlap.
    pub fn validate(&self) -> Result<(), NnError> {
        let mut spans: Vec<Range<usize>> = self.nets.iter().map(|n| n.start()..n.end()).collect();
        if !self.free.is_empty() {
            spans.push(self.free.clone());
        }
        spans.sort_by_key(|r| r.start);
        let mut at = 0;
        for r in &spans {
            if r.start != at {
                return Err(NnError::Config(format!(
                    "parameter layout has a gap or overlap at index {at} (next range {r:?})"
                )));
            }
            at = r.end;
        }
        if at != self.total {
            return Err(NnError::Config(format!(
                "parameter layout covers {at} parameters, total is {}",
                self.total
            )));
        }
        Ok(())
    }
}

/// The optimiser a backend runs: [`Adam`] carries its kind (Adam or RMSprop),
/// hyperparameters, step count and moments.
pub type OptimState = Adam;

/// Where a learner's networks run. See the module docs.
pub trait NetBackend: Send {
    /// What runs the networks, for logs and errors (e.g. `cpu`, `burn-cpu`, `wgpu: llvmpipe`).
    fn device(&self) -> String;

    /// Inference: network `net` on `rows` rows of `x`; returns `rows x out`. No state is
    /// kept for a backward pass.
    fn forward(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32];

    /// As [`NetBackend::forward`], keeping what [`NetBackend::backward`] needs for this
    /// network (one pending pass per network).
    fn forward_train(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32];

    /// Given d loss / d output of the last `forward_train` of `net`, adds the gradients
    /// of its parameters into the backend's gradient accumulator.
    fn backward(&mut self, net: usize, dout: &[f32]);

    /// `weights`' forward pass ([`NetBackend::forward_train`] or
    /// [`NetBackend::forward_target`]) of each of `nets` on the same input, output `i`
    /// copied into `outs[i]` (a backend may run them in one pass over the rows).
    fn forward_into(
        &mut self,
        weights: Weights,
        nets: &[usize],
        x: &[f32],
        rows: usize,
        outs: &mut [&mut [f32]],
    ) {
        for (&net, out) in nets.iter().zip(outs.iter_mut()) {
            out.copy_from_slice(match weights {
                Weights::Train => self.forward_train(net, x, rows),
                Weights::Target => self.forward_target(net, x, rows),
            });
        }
    }

    /// A training pass with the caller's loss inside it: the forward passes of `nets` over
    /// the rows `x` names (a minibatch may name rows of a rollout: each chunk reads its
    /// own from there), then `loss` on each chunk's outputs, then the backward passes
    /// of the gradients it wrote, one job per chunk of rows (the activations stay in the
    /// core's cache and no output is copied out; the next [`NetBackend::step`] adds the
    /// gradients). `block`: the loss adds its rows up in blocks of this many, so a
    /// backend fuses only where every chunk holds whole blocks and the sums do not depend
    /// on how the rows are split. Returns false, having done nothing, where it does not
    /// fuse; the caller then runs [`NetBackend::forward_into`] ([`Weights::Train`]) on
    /// those rows, its loss and [`NetBackend::backward_many`], which give the same bits.
    fn train_fused(
        &mut self,
        nets: &[usize],
        x: Rows<'_>,
        block: usize,
        loss: &ChunkLoss<'_>,
    ) -> bool {
        let _ = (nets, x, block, loss);
        false
    }

    /// [`NetBackend::backward`] of each `(net, dout)` (a backend may run them in one pass).
    fn backward_many(&mut self, passes: &[(usize, &[f32])]) {
        for (net, dout) in passes {
            self.backward(*net, dout);
        }
    }

    /// Adds `g` (one entry per free parameter) to the free parameters' gradient.
    fn add_free_grad(&mut self, g: &[f32]);

    /// The free parameters' current values.
    fn free_params(&mut self) -> &[f32];

    /// The accumulated gradient (networks and free parameters), in the flat order.
    fn grads(&self) -> Vec<f32>;

    /// Clips the accumulated gradient to global L2 norm `max_grad_norm` (as
    /// `torch.nn.utils.clip_grad_norm_`), takes one optimiser step with learning rate
    /// `lr` and zeroes the accumulator. Returns the norm before clipping.
    fn step(&mut self, lr: f64, max_grad_norm: f64) -> f64;

    /// All parameters, in the layout's flat order (copied to the host).
    fn params(&self) -> Vec<f32>;

    /// Replaces all parameters (same length as [`NetBackend::params`]).
    fn set_params(&mut self, params: &[f32]);

    /// The optimiser's state with its moments in the flat order.
    fn optimizer(&self) -> OptimState;

    /// Replaces the optimiser's state (moments of the layout's length).
    fn set_optimizer(&mut self, state: OptimState);

    /// Given d loss / d output of the last `forward_train` of `net` (an MLP), returns
    /// d loss / d input (`rows x in`) and consumes that pass, leaving the parameter
    /// gradients alone: DDPG/TD3/SAC's actor update differentiates the critic with
    /// respect to its action input while the critic itself is not trained by that loss.
    fn input_grad(&mut self, net: usize, dout: &[f32]) -> &[f32];

    /// The sum of [`NetBackend::input_grad`] over `passes` (`(net, dout)` each, added in
    /// order: the first's input gradient, plus the next's, ...) written into `out`
    /// (`rows x in`, the networks' common input width); consumes those passes. SAC's
    /// actor update takes the gradient of both critics with respect to the action; a
    /// backend may run them in one pass.
    fn input_grad_sum(&mut self, passes: &[(usize, &[f32])], out: &mut [f32]) {
        sum_input_grads(self, passes, out);
    }
    /// Starts (or resets) target parameters at a copy of the current ones: the target
    /// networks of DDPG/TD3/SAC, kept where the parameters live.
    fn init_target(&mut self);

    /// As [`NetBackend::forward`] with the target parameters.
    fn forward_target(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32];

    /// Polyak averaging: `target += tau (params - target)`, every parameter.
    fn soft_update(&mut self, tau: f32);

    /// The target parameters, in the flat order (empty before [`NetBackend::init_target`]).
    fn target_params(&self) -> Vec<f32>;

    /// Replaces the target parameters (same length as the parameters).
    fn set_target_params(&mut self, target: &[f32]);
}

/// [`NetBackend::input_grad_sum`] one network at a time.
pub(crate) fn sum_input_grads<B: NetBackend + ?Sized>(
    b: &mut B,
    passes: &[(usize, &[f32])],
    out: &mut [f32],
) {
    for (i, (net, dout)) in passes.iter().enumerate() {
        let dx = b.input_grad(*net, dout);
        assert_eq!(out.len(), dx.len(), "input_grad_sum: output shape");
        if i == 0 {
            out.copy_from_slice(dx);
        } else {
            out.iter_mut().zip(dx).for_each(|(o, d)| *o += d);
        }
    }
}

/// The loss of a [`NetBackend::train_fused`] pass, called once per chunk and network from
/// the backend's worker threads, in any order: `loss(rows, j, out, dout)` gets the
/// chunk's rows of the pass and network `nets[j]`'s outputs for them (`rows.len() x
/// out`), and writes d loss / d output into `dout` (the same shape). Each network's loss
/// is its own (PPO's policy and value terms, SAC's two critics' TD errors), so a backend
/// may run the networks on different threads.
pub type ChunkLoss<'a> = dyn Fn(Range<usize>, usize, &[f32], &mut [f32]) + Sync + 'a;

/// Builds a backend for a layout, its initial parameters and optimiser; what
/// `--device` chooses. `None` in the trainers means [`Native`].
pub type BackendMaker = Arc<
    dyn Fn(&NetLayout, &[f32], OptimState) -> Result<Box<dyn NetBackend>, NnError> + Send + Sync,
>;

/// `b`'s networks (layout `layout`) rebuilt by `maker` with `b`'s parameters, optimiser
/// state and target parameters (where it keeps any): how a learner moves to a `--device`.
pub fn rebuild(
    maker: &BackendMaker,
    b: &dyn NetBackend,
    layout: &NetLayout,
) -> Result<Box<dyn NetBackend>, NnError> {
    let mut n = maker(layout, &b.params(), b.optimizer())?;
    let target = b.target_params();
    if !target.is_empty() {
        n.set_target_params(&target);
    }
    Ok(n)
}

mod native;
pub use native::*;

#[cfg(test)]
mod tests;
