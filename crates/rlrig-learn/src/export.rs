//! A trained policy as named, shaped tensors in PyTorch's convention, for users who
//! load it into PyTorch or JAX without reading rlrig's source.
//!
//! Checkpoints keep each network in one flat vector laid out `[in, out]` row-major
//! (the native path's layout). An export instead names every layer the way an
//! `nn.Sequential` of `Linear` and activation modules names it (`actor.0.weight`
//! `[out, in]`, `actor.0.bias`, `actor.2.weight`, ...), adds the observation
//! statistics and action bounds the policy uses, and writes in the metadata how
//! actions follow from them (`action`, `obs_norm`, `<net>.layers`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::LearnError;
use crate::conv::ConvNet;
use crate::nn::{Activation, Mlp};

/// One tensor of an export.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// The tensors and the text that says how to use them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyExport {
    pub tensors: Vec<Tensor>,
    pub metadata: BTreeMap<String, String>,
}

impl PolicyExport {
    /// An export whose actions are `action` (a NumPy-style formula over the tensor
    /// and network names, e.g. `argmax(actor(obs), -1)`).
    pub fn new(algo: &str, action: &str) -> PolicyExport {
        let mut e = PolicyExport::default();
        e.note("format", "rlrig-policy-1");
        e.note("algo", algo);
        e.note("action", action);
        e.note("obs_norm", "none");
        e
    }

    pub fn note(&mut self, key: &str, value: impl Into<String>) {
        self.metadata.insert(key.to_string(), value.into());
    }

    pub fn tensor(&mut self, name: &str, shape: Vec<usize>, data: Vec<f32>) {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        self.tensors.push(Tensor {
            name: name.to_string(),
            shape,
            data,
        });
    }

    pub fn vector(&mut self, name: &str, data: Vec<f32>) {
        self.tensor(name, vec![data.len()], data);
    }

    /// The MLP `mlp` (parameters in `params`) as `prefix.{2i}.weight` `[out, in]` and
    /// `prefix.{2i}.bias`, with `prefix.layers` describing the modules in order.
    pub fn mlp(&mut self, prefix: &str, mlp: &Mlp, params: &[f32]) {
        let mut modules = Vec::new();
        self.linears(prefix, mlp, params, &mut modules, None);
        self.note(&format!("{prefix}.layers"), modules.join(", "));
    }

    /// `mlp`'s layers as modules numbered from `modules.len()`. `first_input`, when
    /// given, maps each input of PyTorch's first layer to rlrig's input index (a
    /// flatten of another memory order).
    fn linears(
        &mut self,
        prefix: &str,
        mlp: &Mlp,
        params: &[f32],
        modules: &mut Vec<String>,
        first_input: Option<&[usize]>,
    ) {
        for (i, l) in mlp.layers().iter().enumerate() {
            let (fi, fo) = (l.fan_in, l.fan_out);
            let w = &params[l.w..l.w + fi * fo];
            let from = |k: usize| match first_input {
                Some(m) if i == 0 => m[k],
                _ => k,
            };
            // [in, out] row-major -> [out, in] row-major.
            let wt: Vec<f32> = (0..fo)
                .flat_map(|o| (0..fi).map(move |k| w[from(k) * fo + o]))
                .collect();
            let at = modules.len();
            self.tensor(&format!("{prefix}.{at}.weight"), vec![fo, fi], wt);
            self.vector(
                &format!("{prefix}.{at}.bias"),
                params[l.b..l.b + fo].to_vec(),
            );
            modules.push(format!("Linear({fi}, {fo})"));
            match l.act {
                Activation::Tanh => modules.push("Tanh()".into()),
                Activation::Relu => modules.push("ReLU()".into()),
                Activation::Identity => {}
            }
        }
    }

    /// A convolutional network without residual blocks (MinAtar's: one convolution,
    /// ReLU, an MLP head; the Nature network: three) as PyTorch's `Conv2d(...), ReLU(),
    /// ..., Flatten(), Linear(...), ...` on NCHW input: conv weights `[cout, cin, ky,
    /// kx]`, the first linear layer's inputs in `Flatten`'s (channel, row, column) order.
    pub fn conv_net(
        &mut self,
        prefix: &str,
        net: &ConvNet,
        params: &[f32],
    ) -> Result<(), LearnError> {
        if !net.blocks.is_empty() {
            return Err(LearnError::Unsupported(
                "residual towers (AlphaZero's) are not exported yet".into(),
            ));
        }
        let mut modules = Vec::new();
        for c in &net.layers {
            let (k, cin, cout) = (c.k, c.cin, c.cout);
            // [(ky, kx, cin), cout] -> [cout, cin, ky, kx].
            let w = &params[c.w..c.w + k * k * cin * cout];
            let mut wt = Vec::with_capacity(w.len());
            for o in 0..cout {
                for ci in 0..cin {
                    for ky in 0..k {
                        for kx in 0..k {
                            wt.push(w[((ky * k + kx) * cin + ci) * cout + o]);
                        }
                    }
                }
            }
            let at = modules.len();
            self.tensor(&format!("{prefix}.{at}.weight"), vec![cout, cin, k, k], wt);
            self.vector(
                &format!("{prefix}.{at}.bias"),
                params[c.b..c.b + cout].to_vec(),
            );
            modules.push(format!(
                "Conv2d({cin}, {cout}, kernel_size={k}, stride={}, padding={})",
                c.stride, c.pad
            ));
            modules.push("ReLU()".to_string());
        }
        modules.push("Flatten()".to_string());
        // rlrig flattens features (row, column, channel); Flatten does (channel, row, column).
        let c = net.layers.last().expect("at least one convolution");
        let (oh, ow, cout) = (c.out_h(), c.out_w(), c.cout);
        let order: Vec<usize> = (0..cout)
            .flat_map(|ch| (0..oh * ow).map(move |pix| pix * cout + ch))
            .collect();
        self.linears(prefix, &net.head, params, &mut modules, Some(&order));
        self.note(&format!("{prefix}.layers"), modules.join(", "));
        let scaled = if net.scale == 1.0 {
            String::new()
        } else {
            format!("; the network reads obs * {}", net.scale)
        };
        self.note(
            "obs_layout",
            if net.channels_last {
                format!("obs arrive [n, {}, {}, {}] (HWC): x = obs.transpose(0, 3, 1, 2) for the NCHW network{scaled}", net.h, net.w, net.planes)
            } else {
                format!("obs arrive [n, {}, {}, {}] (CHW), as the network reads them{scaled}", net.planes, net.h, net.w)
            },
        );
        Ok(())
    }

    /// Observation normalisation with running statistics, clipped to `±clip`.
    pub fn obs_norm(&mut self, mean: &[f64], var: &[f64], clip: f64) {
        self.vector("obs_rms.mean", mean.iter().map(|&x| x as f32).collect());
        self.vector("obs_rms.var", var.iter().map(|&x| x as f32).collect());
        self.note(
            "obs_norm",
            format!("obs = clip((obs - obs_rms.mean) / sqrt(obs_rms.var + 1e-8), -{clip}, {clip})"),
        );
    }

    /// The export as a safetensors file (metadata in its header), written atomically.
    pub fn write_safetensors(&self, path: &Path) -> Result<(), LearnError> {
        let bytes: Vec<Vec<u8>> = self
            .tensors
            .iter()
            .map(|t| crate::run::to_bytes(&t.data))
            .collect();
        let views = self
            .tensors
            .iter()
            .zip(&bytes)
            .map(|(t, b)| {
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, t.shape.clone(), b)
                    .map(|v| (t.name.as_str(), v))
                    .map_err(LearnError::encode("the exported policy"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let meta: std::collections::HashMap<String, String> =
            self.metadata.clone().into_iter().collect();
        let out = safetensors::serialize(views, Some(meta))
            .map_err(LearnError::encode("the exported policy"))?;
        crate::run::write_atomic(path, &out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `[out, in]` weights reproduce the native forward pass of the flat layout.
    #[test]
    fn exported_layers_compute_what_the_native_mlp_computes() {
        let mlp = Mlp::with_activation(&[3, 5, 2], 0, Activation::Relu);
        let params: Vec<f32> = (0..mlp.num_params())
            .map(|i| ((i * 7919) % 23) as f32 / 23.0 - 0.5)
            .collect();
        let x = [0.3f32, -1.2, 0.7, 1.0, 0.1, -0.4];
        let mut cache = crate::nn::MlpCache::default();
        let want = mlp.forward(&params, &x, 2, &mut cache).to_vec();
        let mut e = PolicyExport::new("test", "actor(obs)");
        e.mlp("actor", &mlp, &params);
        assert_eq!(
            e.metadata["actor.layers"],
            "Linear(3, 5), ReLU(), Linear(5, 2)"
        );
        let t = |n: &str| e.tensors.iter().find(|t| t.name == n).unwrap();
        let linear = |x: &[f32], w: &Tensor, b: &Tensor, relu: bool| -> Vec<f32> {
            let (fo, fi) = (w.shape[0], w.shape[1]);
            (0..fo)
                .map(|o| {
                    let y = b.data[o] + (0..fi).map(|k| w.data[o * fi + k] * x[k]).sum::<f32>();
                    if relu { y.max(0.0) } else { y }
                })
                .collect()
        };
        for r in 0..2 {
            let h = linear(
                &x[r * 3..r * 3 + 3],
                t("actor.0.weight"),
                t("actor.0.bias"),
                true,
            );
            let y = linear(&h, t("actor.2.weight"), t("actor.2.bias"), false);
            for (a, b) in y.iter().zip(&want[r * 2..r * 2 + 2]) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
        }
        assert_eq!(t("actor.0.weight").shape, vec![5, 3]);
    }
}
