//! Adam (as PyTorch's, with bias correction) and global gradient-norm clipping.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Adam {
    /// When set, the optimiser is RMSprop (PyTorch's: square average with this decay,
    /// `p -= lr g / (sqrt(v) + eps)`, no momentum) and `m` stays unused. A2C uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmsprop_alpha: Option<f64>,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// L2 penalty added to the gradient before the update (PyTorch's `weight_decay`,
    /// not AdamW's decoupled decay). AlphaZero uses it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight_decay: f64,
    /// Steps taken (for bias correction).
    pub t: u64,
    #[serde(skip)]
    pub m: Vec<f32>,
    #[serde(skip)]
    pub v: Vec<f32>,
}

impl Adam {
    pub fn new(num_params: usize, eps: f64) -> Adam {
        Adam {
            rmsprop_alpha: None,
            beta1: 0.9,
            beta2: 0.999,
            eps,
            weight_decay: 0.0,
            t: 0,
            m: vec![0.0; num_params],
            v: vec![0.0; num_params],
        }
    }

    /// RMSprop with square-average decay `alpha` (see [`Adam::rmsprop_alpha`]).
    pub fn rmsprop(num_params: usize, alpha: f64, eps: f64) -> Adam {
        Adam {
            rmsprop_alpha: Some(alpha),
            ..Adam::new(num_params, eps)
        }
    }

    /// One update of `params` along `grads` with learning rate `lr`.
    pub fn step(&mut self, params: &mut [f32], grads: &[f32], lr: f64) {
        assert_eq!(params.len(), self.m.len());
        assert_eq!(grads.len(), self.m.len());
        let rule = self.begin(lr);
        rule.apply(params, grads, &mut self.m, &mut self.v);
    }

    /// Counts one update and returns its per-parameter rule, to be applied to every
    /// slice of the parameters (in any order, on any thread: each element's update
    /// depends on that element alone).
    pub fn begin(&mut self, lr: f64) -> StepRule {
        self.t += 1;
        let bc1 = 1.0 - self.beta1.powi(self.t as i32);
        let bc2 = 1.0 - self.beta2.powi(self.t as i32);
        StepRule {
            rmsprop_alpha: self.rmsprop_alpha.map(|a| a as f32),
            lr: lr as f32,
            b1: self.beta1 as f32,
            b2: self.beta2 as f32,
            // PyTorch's form: p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps).
            step: (lr / bc1) as f32,
            sqrt_bc2: bc2.sqrt() as f32,
            eps: self.eps as f32,
            wd: self.weight_decay as f32,
        }
    }
}

/// One optimiser update for every parameter (see [`Adam::begin`]).
#[derive(Clone, Copy, Debug)]
pub struct StepRule {
    rmsprop_alpha: Option<f32>,
    lr: f32,
    b1: f32,
    b2: f32,
    step: f32,
    sqrt_bc2: f32,
    eps: f32,
    wd: f32,
}

impl StepRule {
    /// Updates `params` (and the moments `m`, `v` of the same elements) along `grads`.
    pub fn apply(&self, params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32]) {
        match self.rmsprop_alpha {
            Some(a) => rmsprop_step(self, a, params, grads, v),
            None => adam_step(self, params, grads, m, v),
        }
    }
}

// The two update loops are compiled for the wide vector units too (the same IEEE
// operations in the same order, no contraction into FMA: the same bits on every CPU):
// with SSE2 only, Adam's divisions and square root took 6 % of a PPO CartPole run
// (perf, 2 threads), 3 % with AVX-512 (Zen 4).
//
// A moment below the smallest normal float is stored as 0. A unit that stopped
// learning (a dead ReLU: gradient exactly 0) lets its first moment decay by `b1` a step
// into the subnormal range, where it stays (0.9 times the smallest subnormal rounds back
// to it), and on Intel cores every operation on a subnormal takes a microcode assist of
// ~100 cycles: 14 % of SAC Pendulum's first moments were subnormal after 10k updates,
// and the flush took the run from 5.06 to 4.14 s (Cascade Lake; AMD's cores do not slow
// down). What it changes is below the parameters' resolution: a subnormal `m` moves `p`
// by at most `step` x 1.2e-38 / `eps` (1.2e-33 at lr 1e-3, eps 1e-8), under half an ulp
// of any |p| above ~2e-26; a subnormal `v` adds under 1.1e-19 to a denominator of at
// least `eps`; a revived unit's next moment differs only where its gradient is itself
// below ~1e-30. The parameters of every pinned run and of 10k SAC updates keep their
// bits; the stored moments differ from PyTorch's (which keeps subnormals) only where
// PyTorch's are subnormal.

/// `x`, or 0 where it is subnormal.
#[inline(always)]
fn flush(x: f32) -> f32 {
    if x.abs() < f32::MIN_POSITIVE { 0.0 } else { x }
}

#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn rmsprop_step(r: &StepRule, a: f32, params: &mut [f32], grads: &[f32], v: &mut [f32]) {
    let (wd, eps, lr) = (r.wd, r.eps, r.lr);
    for ((p, g), v) in params.iter_mut().zip(grads).zip(v) {
        let g = *g + wd * *p;
        *v = flush(a * *v + (1.0 - a) * g * g);
        *p -= lr * g / (v.sqrt() + eps);
    }
}

#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn adam_step(r: &StepRule, params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32]) {
    let (wd, eps, b1, b2, step, sqrt_bc2) = (r.wd, r.eps, r.b1, r.b2, r.step, r.sqrt_bc2);
    for (((p, g), m), v) in params.iter_mut().zip(grads).zip(m).zip(v) {
        let g = *g + wd * *p;
        *m = flush(b1 * *m + (1.0 - b1) * g);
        *v = flush(b2 * *v + (1.0 - b2) * g * g);
        *p -= step * *m / (v.sqrt() / sqrt_bc2 + eps);
    }
}

/// Gradients are reduced in slices of at most this many elements (the squared norm is
/// summed per slice, then over slices in order), so a pool can take the slices apart and
/// the result stays the same. The native backend cuts them within each network's range;
/// [`clip_grad_norm`] from the start of its one vector.
pub const NORM_SLICE: usize = 4096;

/// The sum of squares of `g` in f64, with eight running sums (a fixed order, so every
/// machine gets the same bits; one long add chain would serialise on its latency).
pub fn sum_squares(g: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut it = g.chunks_exact(8);
    for c in &mut it {
        for (a, x) in acc.iter_mut().zip(c) {
            *a += f64::from(*x) * f64::from(*x);
        }
    }
    for (a, x) in acc.iter_mut().zip(it.remainder()) {
        *a += f64::from(*x) * f64::from(*x);
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// The factor `torch.nn.utils.clip_grad_norm_` scales by for global norm `norm`, or
/// `None` when the gradient is short enough.
pub fn clip_factor(norm: f64, max_norm: f64) -> Option<f32> {
    let coef = max_norm / (norm + 1e-6);
    (coef < 1.0).then_some(coef as f32)
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Scales `grads` so that their global L2 norm is at most `max_norm`; returns the norm
/// before clipping (as `torch.nn.utils.clip_grad_norm_`).
pub fn clip_grad_norm(grads: &mut [f32], max_norm: f64) -> f64 {
    let norm = grads
        .chunks(NORM_SLICE)
        .map(sum_squares)
        .sum::<f64>()
        .sqrt();
    if let Some(coef) = clip_factor(norm, max_norm) {
        for g in grads.iter_mut() {
            *g *= coef;
        }
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_minimises_a_quadratic() {
        let mut p = vec![3.0f32, -2.0];
        let mut adam = Adam::new(2, 1e-8);
        for _ in 0..2000 {
            let g: Vec<f32> = p.iter().map(|x| 2.0 * x).collect();
            adam.step(&mut p, &g, 0.01);
        }
        assert!(p.iter().all(|x| x.abs() < 1e-2), "{p:?}");
    }

    #[test]
    fn first_adam_step_moves_each_param_by_lr() {
        // With bias correction, step 1 is lr * g / (|g| + eps) = lr * sign(g).
        let mut p = vec![1.0f32, 1.0];
        let mut adam = Adam::new(2, 1e-8);
        adam.step(&mut p, &[0.5, -4.0], 0.1);
        assert!(
            (p[0] - 0.9).abs() < 1e-6 && (p[1] - 1.1).abs() < 1e-6,
            "{p:?}"
        );
    }

    #[test]
    fn rmsprop_first_step_matches_pytorch() {
        // v = (1 - alpha) g^2, step = lr g / (sqrt(v) + eps) = lr sign(g) / sqrt(1 - alpha).
        let mut p = vec![1.0f32];
        let mut o = Adam::rmsprop(1, 0.99, 1e-8);
        o.step(&mut p, &[2.0], 0.01);
        assert!((p[0] - (1.0 - 0.01 / 0.01f32.sqrt())).abs() < 1e-5, "{p:?}");
        let mut q = vec![3.0f32, -2.0];
        let mut o = Adam::rmsprop(2, 0.99, 1e-8);
        // Normalised steps of about lr: 3 units need ~300 steps at lr 0.01; it then
        // hovers within a few lr of the minimum.
        for _ in 0..2000 {
            let g: Vec<f32> = q.iter().map(|x| 2.0 * x).collect();
            o.step(&mut q, &g, 0.01);
        }
        assert!(q.iter().all(|x| x.abs() < 0.05), "{q:?}");
    }

    #[test]
    fn clipping_bounds_the_norm_and_keeps_direction() {
        let mut g = vec![3.0f32, 4.0];
        let n = clip_grad_norm(&mut g, 0.5);
        assert!((n - 5.0).abs() < 1e-9);
        assert!((g[0] - 0.3).abs() < 1e-6 && (g[1] - 0.4).abs() < 1e-6);
        let mut small = vec![0.1f32, 0.0];
        clip_grad_norm(&mut small, 0.5);
        assert_eq!(small, vec![0.1, 0.0]);
    }

    /// A unit whose gradient falls to 0 (a dead ReLU) lets its moments decay to 0
    /// without ever holding a subnormal value, and every parameter keeps the bits of the
    /// same update with the moments kept exactly (PyTorch's arithmetic, written out).
    #[test]
    fn moments_skip_the_subnormals_and_parameters_keep_their_bits() {
        let n = 64;
        let mut adam = Adam::new(n, 1e-8);
        let mut p: Vec<f32> = (0..n).map(|i| 0.5 - i as f32 / 64.0).collect();
        let (mut q, mut m, mut v) = (p.clone(), vec![0.0f32; n], vec![0.0f32; n]);
        let (b1, b2) = (0.9f64, 0.999f64);
        for t in 1..=3000 {
            // Gradients of many sizes for 50 steps, then none.
            let g: Vec<f32> = (0..n)
                .map(|i| {
                    if t <= 50 {
                        10f32.powi(-(i as i32 % 20))
                    } else {
                        0.0
                    }
                })
                .collect();
            adam.step(&mut p, &g, 1e-3);
            let step = (1e-3 / (1.0 - b1.powi(t))) as f32;
            let sqrt_bc2 = (1.0 - b2.powi(t)).sqrt() as f32;
            for i in 0..n {
                m[i] = b1 as f32 * m[i] + (1.0 - b1 as f32) * g[i];
                v[i] = b2 as f32 * v[i] + (1.0 - b2 as f32) * g[i] * g[i];
                q[i] -= step * m[i] / (v[i].sqrt() / sqrt_bc2 + 1e-8);
            }
            assert!(
                adam.m.iter().chain(&adam.v).all(|x| !x.is_subnormal()),
                "step {t}"
            );
            assert_eq!(
                p.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                q.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "step {t}"
            );
        }
        // The exact first moments end subnormal for good (0.9 times the smallest
        // subnormal rounds back to it): Adam's are 0.
        assert!(m.iter().all(|x| x.is_subnormal()) && adam.m.iter().all(|x| *x == 0.0));
    }
}
