//! # rlrig-burn
//!
//! rlrig's learning interface ([`rlrig_nn::backend::NetBackend`]) on Burn devices:
//! `flex` (Burn's CPU backend, the reference the native path is checked against) and
//! `wgpu` (Vulkan on NVIDIA, AMD and Intel, Metal on Apple, DX12 on Windows: one GPU
//! path for every vendor, with no vendor toolkit at build time).
//!
//! The parameters live on the device as one flat tensor in the native layout (each
//! layer's `fan_in x fan_out` weights row-major, then its bias), with the optimiser's
//! moments beside them, so a training step moves only a minibatch's inputs and its
//! output gradients: the loss heads of RL are a few floats per sample and run on the
//! host ([`rlrig_nn::backend`] explains the split). Gradients come from Burn's
//! autodiff, an implementation independent of the native path's hand-written
//! backward, which is what makes the two worth comparing.
//!
//! Burn's own CUDA and ROCm backends are left out: their builds download an LLVM
//! bundle, which offline build machines cannot do (see STACK.md).

use std::ops::Range;
use std::sync::Arc;

use burn::tensor::activation::relu;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Device, DeviceKind, DeviceType, Tensor, TensorData};
use rlrig_nn::backend::{BackendMaker, Net, NetBackend, NetLayout, OptimState};
use rlrig_nn::conv::Conv2d;
use rlrig_nn::nn::{Activation, Mlp};

/// The Burn devices rlrig knows, as `--device` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `burn-cpu`: Burn's `flex` CPU backend.
    Cpu,
    /// `wgpu`: the best GPU adapter wgpu finds (Vulkan, Metal or DX12).
    Wgpu,
}

impl Kind {
    /// The `--device` value, if it names a Burn device.
    pub fn parse(device: &str) -> Option<Kind> {
        match device {
            "burn-cpu" => Some(Kind::Cpu),
            "wgpu" | "vulkan" => Some(Kind::Wgpu),
            _ => None,
        }
    }
}

/// The wgpu adapters of this machine, by the name each gives itself.
pub fn wgpu_adapters() -> Vec<String> {
    Device::enumerate(DeviceType::Wgpu)
        .iter()
        .map(|d| {
            d.identity()
                .map_or_else(|| "unnamed adapter".into(), |i| i.name)
        })
        .collect()
}

/// Opens a device of `kind`, or says why there is none (no wgpu adapter).
pub fn open(kind: Kind) -> Result<(Device, String), rlrig_nn::NnError> {
    match kind {
        Kind::Cpu => Ok((Device::flex(), "burn-cpu (flex)".into())),
        Kind::Wgpu => {
            let found = Device::enumerate(DeviceType::Wgpu);
            if found.is_empty() {
                return Err(rlrig_nn::NnError::Backend(
                    "--device wgpu: no GPU adapter found (Vulkan, Metal or DX12). \
                     Install the GPU's driver; on a machine without a GPU, Mesa's software \
                     Vulkan works for testing (Debian: apt install mesa-vulkan-drivers libvulkan1)"
                        .into(),
                ));
            }
            let device = Device::wgpu(DeviceKind::DefaultDevice);
            let name = device
                .identity()
                .map_or_else(|| "default adapter".into(), |i| i.name);
            Ok((device, format!("wgpu: {name}")))
        }
    }
}

/// The [`BackendMaker`] for `kind`: checks the device once, then builds backends on it.
pub fn maker(kind: Kind) -> Result<BackendMaker, rlrig_nn::NnError> {
    let (device, name) = open(kind)?;
    Ok(Arc::new(move |layout, params, opt| {
        Burn::new(device.clone(), name.clone(), layout, params, opt)
            .map(|b| Box::new(b) as Box<dyn NetBackend>)
    }))
}

/// A training pass kept for its backward: the parameter leaf it read, its output and,
/// for an MLP, its input (tracked too, for [`NetBackend::input_grad`]).
struct Pending {
    leaf: Tensor<1>,
    input: Option<Tensor<2>>,
    out: Tensor<2>,
}

/// The learning interface on one Burn device. See the crate docs.
pub struct Burn {
    device: Device,
    name: String,
    layout: NetLayout,
    params: Tensor<1>,
    grads: Tensor<1>,
    free_grad: Vec<f32>,
    free_host: Vec<f32>,
    m: Tensor<1>,
    v: Tensor<1>,
    opt: OptimState,
    pending: Vec<Option<Pending>>,
    out: Vec<f32>,
    /// The target parameters (off-policy target networks), on the device.
    target: Option<Tensor<1>>,
}

fn flat(values: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(TensorData::new(values.to_vec(), [values.len()]), device)
}

fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    let data = t.into_data();
    data.as_slice::<f32>()
        .expect("rlrig's tensors are f32")
        .to_vec()
}

impl Burn {
    pub fn new(
        device: Device,
        name: String,
        layout: &NetLayout,
        params: &[f32],
        opt: OptimState,
    ) -> Result<Burn, rlrig_nn::NnError> {
        layout.validate()?;
        if params.len() != layout.total || opt.m.len() != layout.total {
            return Err(rlrig_nn::NnError::Backend(format!(
                "{} parameters and {} optimiser moments for a layout of {}",
                params.len(),
                opt.m.len(),
                layout.total
            )));
        }
        let free = layout.free.clone();
        Ok(Burn {
            params: flat(params, &device),
            grads: Tensor::zeros([layout.total], &device),
            free_grad: vec![0.0; free.len()],
            free_host: params[free].to_vec(),
            m: flat(&opt.m, &device),
            v: flat(&opt.v, &device),
            opt: OptimState {
                m: Vec::new(),
                v: Vec::new(),
                ..opt
            },
            pending: (0..layout.nets.len()).map(|_| None).collect(),
            out: Vec::new(),
            target: None,
            layout: layout.clone(),
            device,
            name,
        })
    }

    /// Network `net` on `x` with parameters `p` (a flat tensor in the native layout).
    fn run(&self, p: &Tensor<1>, net: usize, x: &[f32], rows: usize) -> Tensor<2> {
        self.run_tracked(p, net, x, rows, false).1
    }

    /// As [`Burn::run`]; with `track_input`, an MLP's input is an autodiff leaf,
    /// returned beside the output.
    fn run_tracked(
        &self,
        p: &Tensor<1>,
        net: usize,
        x: &[f32],
        rows: usize,
        track_input: bool,
    ) -> (Option<Tensor<2>>, Tensor<2>) {
        let net = &self.layout.nets[net];
        assert_eq!(
            x.len(),
            rows * net.input_dim(),
            "Burn::forward: input shape"
        );
        match net {
            Net::Mlp(mlp) => {
                let h: Tensor<2> = Tensor::from_data(
                    TensorData::new(x.to_vec(), [rows, mlp.input_dim()]),
                    &self.device,
                );
                if track_input {
                    let h = h.autodiff().require_grad();
                    (Some(h.clone()), mlp_on(p, mlp, h))
                } else {
                    (None, mlp_on(p, mlp, h))
                }
            }
            Net::Conv(c) => {
                // Burn's conv2d wants NCHW; channels-last observations are permuted.
                let x: Tensor<4> = if c.channels_last {
                    let x: Tensor<4> = Tensor::from_data(
                        TensorData::new(x.to_vec(), [rows, c.h, c.w, c.planes]),
                        &self.device,
                    );
                    x.permute([0, 3, 1, 2])
                } else {
                    Tensor::from_data(
                        TensorData::new(x.to_vec(), [rows, c.planes, c.h, c.w]),
                        &self.device,
                    )
                };
                let mut a = if c.scale == 1.0 {
                    x
                } else {
                    x.mul_scalar(c.scale)
                };
                for layer in &c.layers {
                    a = relu(conv_on(p, layer, a));
                }
                for (ca, cb) in &c.blocks {
                    let inner = relu(conv_on(p, ca, a.clone()));
                    a = relu(a + conv_on(p, cb, inner));
                }
                // The native head reads features channels-last (y, x, c).
                let [n, ch, oh, ow] = a.dims();
                let flat: Tensor<2> = a.permute([0, 2, 3, 1]).reshape([n, oh * ow * ch]);
                (None, mlp_on(p, &c.head, flat))
            }
        }
    }

    fn free(&self) -> Range<usize> {
        self.layout.free.clone()
    }

    /// Backpropagates `dout` from `out`: d/dz sum(out * dout) = dout^T d out / d z, the
    /// vector-Jacobian product, for every tracked leaf z.
    fn vjp(&self, out: Tensor<2>, dout: &[f32]) -> burn::tensor::Gradients {
        let [rows, cols] = out.dims();
        assert_eq!(
            dout.len(),
            rows * cols,
            "Burn::backward: output gradient shape"
        );
        let d: Tensor<2> =
            Tensor::from_data(TensorData::new(dout.to_vec(), [rows, cols]), &self.device);
        (out * d).sum().backward()
    }

    fn target(&self) -> &Tensor<1> {
        self.target
            .as_ref()
            .expect("target networks used before init_target")
    }
}

/// A convolution whose weights sit in `p` as `[(ky, kx, cin), cout]` (the native
/// layout), on an NCHW input.
fn conv_on(p: &Tensor<1>, c: &Conv2d, x: Tensor<4>) -> Tensor<4> {
    let w: Tensor<4> = p
        .clone()
        .narrow(0, c.w, c.k * c.k * c.cin * c.cout)
        .reshape([c.k, c.k, c.cin, c.cout])
        .permute([3, 2, 0, 1]);
    let b = p.clone().narrow(0, c.b, c.cout);
    conv2d(
        x,
        w,
        Some(b),
        ConvOptions::new([c.stride, c.stride], [c.pad, c.pad], [1, 1], 1),
    )
}

/// An MLP whose layers sit in `p` in the native layout.
fn mlp_on(p: &Tensor<1>, mlp: &Mlp, mut h: Tensor<2>) -> Tensor<2> {
    for l in mlp.layers() {
        let w: Tensor<2> = p
            .clone()
            .narrow(0, l.w, l.fan_in * l.fan_out)
            .reshape([l.fan_in, l.fan_out]);
        let b: Tensor<2> = p.clone().narrow(0, l.b, l.fan_out).reshape([1, l.fan_out]);
        h = h.matmul(w) + b;
        h = match l.act {
            Activation::Tanh => h.tanh(),
            Activation::Relu => relu(h),
            Activation::Identity => h,
        };
    }
    h
}

impl NetBackend for Burn {
    fn device(&self) -> String {
        self.name.clone()
    }

    fn forward(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        let y = self.run(&self.params, net, x, rows);
        self.out = host(y);
        &self.out
    }

    fn forward_train(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        // A fresh leaf per pass: each network's graph stands alone until its backward.
        let leaf = self.params.clone().autodiff().require_grad();
        // An MLP's input is tracked too: one small extra product in its first layer's
        // backward, so that input_grad needs no second pass.
        let (input, out) = self.run_tracked(&leaf, net, x, rows, true);
        self.out = host(out.clone().without_autodiff());
        self.pending[net] = Some(Pending { leaf, input, out });
        &self.out
    }

    fn backward(&mut self, net: usize, dout: &[f32]) {
        let Pending { leaf, out, .. } = self.pending[net]
            .take()
            .expect("Burn::backward without a forward_train of that network");
        let grads = self.vjp(out, dout);
        let g = leaf
            .grad(&grads)
            .expect("the parameter leaf takes part in the pass");
        self.grads = self.grads.clone() + g;
    }

    fn add_free_grad(&mut self, g: &[f32]) {
        for (a, b) in self.free_grad.iter_mut().zip(g) {
            *a += b;
        }
    }

    fn free_params(&mut self) -> &[f32] {
        &self.free_host
    }

    fn grads(&self) -> Vec<f32> {
        let mut g = host(self.grads.clone());
        for (a, b) in g[self.free()].iter_mut().zip(&self.free_grad) {
            *a += b;
        }
        g
    }

    fn step(&mut self, lr: f64, max_grad_norm: f64) -> f64 {
        let free = self.free();
        let mut g = self.grads.clone();
        if !free.is_empty() {
            let mut pad = vec![0.0f32; self.layout.total];
            pad[free.clone()].copy_from_slice(&self.free_grad);
            g = g + flat(&pad, &self.device);
            self.free_grad.fill(0.0);
        }
        // One read-back per step: the global norm decides the clipping on the host.
        let norm = f64::from((g.clone() * g.clone()).sum().into_scalar::<f32>()).sqrt();
        let coef = max_grad_norm / (norm + 1e-6);
        if coef < 1.0 {
            g = g.mul_scalar(coef as f32);
        }
        if self.opt.weight_decay != 0.0 {
            g = g + self.params.clone().mul_scalar(self.opt.weight_decay as f32);
        }
        let o = &mut self.opt;
        o.t += 1;
        let eps = o.eps as f32;
        if let Some(alpha) = o.rmsprop_alpha {
            let a = alpha as f32;
            self.v = self.v.clone().mul_scalar(a) + (g.clone() * g.clone()).mul_scalar(1.0 - a);
            let upd = g.mul_scalar(lr as f32) / self.v.clone().sqrt().add_scalar(eps);
            self.params = self.params.clone() - upd;
        } else {
            let (b1, b2) = (o.beta1 as f32, o.beta2 as f32);
            let bc1 = 1.0 - o.beta1.powi(o.t as i32);
            let bc2 = 1.0 - o.beta2.powi(o.t as i32);
            let step = (lr / bc1) as f32;
            let sqrt_bc2 = bc2.sqrt() as f32;
            self.m = self.m.clone().mul_scalar(b1) + g.clone().mul_scalar(1.0 - b1);
            self.v = self.v.clone().mul_scalar(b2) + (g.clone() * g).mul_scalar(1.0 - b2);
            let denom = self.v.clone().sqrt().div_scalar(sqrt_bc2).add_scalar(eps);
            self.params = self.params.clone() - (self.m.clone().mul_scalar(step) / denom);
        }
        self.grads = Tensor::zeros([self.layout.total], &self.device);
        if !free.is_empty() {
            self.free_host = host(self.params.clone().narrow(0, free.start, free.len()));
        }
        norm
    }

    fn params(&self) -> Vec<f32> {
        host(self.params.clone())
    }

    fn set_params(&mut self, params: &[f32]) {
        assert_eq!(
            params.len(),
            self.layout.total,
            "set_params: parameter count"
        );
        self.params = flat(params, &self.device);
        self.free_host = params[self.free()].to_vec();
    }

    fn optimizer(&self) -> OptimState {
        OptimState {
            m: host(self.m.clone()),
            v: host(self.v.clone()),
            ..self.opt.clone()
        }
    }

    fn set_optimizer(&mut self, state: OptimState) {
        assert_eq!(state.m.len(), self.layout.total, "set_optimizer: size");
        self.m = flat(&state.m, &self.device);
        self.v = flat(&state.v, &self.device);
        self.opt = OptimState {
            m: Vec::new(),
            v: Vec::new(),
            ..state
        };
    }

    fn input_grad(&mut self, net: usize, dout: &[f32]) -> &[f32] {
        let Pending { input, out, .. } = self.pending[net]
            .take()
            .expect("Burn::input_grad without a forward_train of that network");
        let input = input.unwrap_or_else(|| {
            panic!("input_grad: network {net} is not an MLP (input gradients are kept for MLPs)")
        });
        let grads = self.vjp(out, dout);
        let g = input
            .grad(&grads)
            .expect("the input leaf takes part in the pass");
        self.out = host(g);
        &self.out
    }

    fn init_target(&mut self) {
        self.target = Some(self.params.clone());
    }

    fn forward_target(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        let y = self.run(self.target(), net, x, rows);
        self.out = host(y);
        &self.out
    }

    fn soft_update(&mut self, tau: f32) {
        let t = self.target().clone();
        self.target = Some(t.clone() + (self.params.clone() - t).mul_scalar(tau));
    }

    fn target_params(&self) -> Vec<f32> {
        self.target.clone().map(host).unwrap_or_default()
    }

    fn set_target_params(&mut self, target: &[f32]) {
        assert_eq!(
            target.len(),
            self.layout.total,
            "set_target_params: parameter count"
        );
        self.target = Some(flat(target, &self.device));
    }
}
