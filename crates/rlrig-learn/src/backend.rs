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

use crate::conv::{ConvCache, ConvNet};
use crate::nn::{Mlp, MlpCache};
use crate::optim::{Adam, clip_grad_norm};

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

    /// Adds the parameter gradients of the last `forward` on `cache` into `grads`.
    pub fn backward(&self, params: &[f32], grads: &mut [f32], dout: &[f32], cache: &mut NetCache) {
        match self {
            Net::Mlp(m) => m.backward(params, grads, dout, &mut cache.mlp),
            Net::Conv(c) => c.backward(params, grads, dout, &mut cache.conv),
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
    /// Checks that the networks and the free range tile `0..total` without overlap.
    pub fn validate(&self) -> Result<(), String> {
        let mut spans: Vec<Range<usize>> = self.nets.iter().map(|n| n.start()..n.end()).collect();
        if !self.free.is_empty() {
            spans.push(self.free.clone());
        }
        spans.sort_by_key(|r| r.start);
        let mut at = 0;
        for r in &spans {
            if r.start != at {
                return Err(format!(
                    "parameter layout has a gap or overlap at index {at} (next range {r:?})"
                ));
            }
            at = r.end;
        }
        if at != self.total {
            return Err(format!(
                "parameter layout covers {at} parameters, total is {}",
                self.total
            ));
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

/// Builds a backend for a layout, its initial parameters and optimiser; what
/// `--device` chooses. `None` in the trainers means [`Native`].
pub type BackendMaker = Arc<
    dyn Fn(&NetLayout, &[f32], OptimState) -> Result<Box<dyn NetBackend>, String> + Send + Sync,
>;

/// The native CPU path: [`Mlp`] over a host parameter vector, [`Adam`] in place.
pub struct Native {
    layout: NetLayout,
    params: Vec<f32>,
    grads: Vec<f32>,
    opt: Adam,
    caches: Vec<NetCache>,
    target: Vec<f32>,
    target_caches: Vec<NetCache>,
    dinput: Vec<f32>,
}

impl Native {
    pub fn new(layout: &NetLayout, params: &[f32], opt: Adam) -> Native {
        assert_eq!(params.len(), layout.total, "Native::new: parameter count");
        assert_eq!(opt.m.len(), layout.total, "Native::new: optimiser size");
        Native {
            layout: layout.clone(),
            params: params.to_vec(),
            grads: vec![0.0; layout.total],
            opt,
            caches: vec![NetCache::default(); layout.nets.len()],
            target: Vec::new(),
            target_caches: vec![NetCache::default(); layout.nets.len()],
            dinput: Vec::new(),
        }
    }

    /// The [`BackendMaker`] for the native path.
    pub fn maker() -> BackendMaker {
        Arc::new(|layout, params, opt| Ok(Box::new(Native::new(layout, params, opt))))
    }
}

impl NetBackend for Native {
    fn device(&self) -> String {
        "cpu".into()
    }

    fn forward(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        self.layout.nets[net].forward(&self.params, x, rows, &mut self.caches[net])
    }

    fn forward_train(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        // The native forward always keeps its activations.
        self.forward(net, x, rows)
    }

    fn backward(&mut self, net: usize, dout: &[f32]) {
        self.layout.nets[net].backward(&self.params, &mut self.grads, dout, &mut self.caches[net]);
    }

    fn add_free_grad(&mut self, g: &[f32]) {
        for (a, b) in self.grads[self.layout.free.clone()].iter_mut().zip(g) {
            *a += b;
        }
    }

    fn free_params(&mut self) -> &[f32] {
        &self.params[self.layout.free.clone()]
    }

    fn grads(&self) -> Vec<f32> {
        self.grads.clone()
    }

    fn step(&mut self, lr: f64, max_grad_norm: f64) -> f64 {
        let norm = clip_grad_norm(&mut self.grads, max_grad_norm);
        self.opt.step(&mut self.params, &self.grads, lr);
        self.grads.fill(0.0);
        norm
    }

    fn params(&self) -> Vec<f32> {
        self.params.clone()
    }

    fn set_params(&mut self, params: &[f32]) {
        assert_eq!(
            params.len(),
            self.params.len(),
            "set_params: parameter count"
        );
        self.params.copy_from_slice(params);
    }

    fn optimizer(&self) -> OptimState {
        self.opt.clone()
    }

    fn set_optimizer(&mut self, state: OptimState) {
        assert_eq!(state.m.len(), self.params.len(), "set_optimizer: size");
        self.opt = state;
    }

    fn input_grad(&mut self, net: usize, dout: &[f32]) -> &[f32] {
        let Net::Mlp(m) = &self.layout.nets[net] else {
            panic!("input_grad: network {net} is not an MLP (input gradients are kept for MLPs)")
        };
        let cache = &mut self.caches[net].mlp;
        self.dinput.resize(cache.batch * m.input_dim(), 0.0);
        m.backward_full(&self.params, None, dout, cache, Some(&mut self.dinput));
        &self.dinput
    }

    fn init_target(&mut self) {
        self.target.clone_from(&self.params);
    }

    fn forward_target(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        assert_eq!(
            self.target.len(),
            self.params.len(),
            "forward_target before init_target"
        );
        self.layout.nets[net].forward(&self.target, x, rows, &mut self.target_caches[net])
    }

    fn soft_update(&mut self, tau: f32) {
        assert_eq!(
            self.target.len(),
            self.params.len(),
            "soft_update before init_target"
        );
        for (t, o) in self.target.iter_mut().zip(&self.params) {
            *t += tau * (o - *t);
        }
    }

    fn target_params(&self) -> Vec<f32> {
        self.target.clone()
    }

    fn set_target_params(&mut self, target: &[f32]) {
        assert_eq!(
            target.len(),
            self.params.len(),
            "set_target_params: parameter count"
        );
        self.target = target.to_vec();
    }
}
