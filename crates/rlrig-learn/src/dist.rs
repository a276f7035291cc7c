//! The action distributions' arithmetic, shared by PPO/A2C/IMPALA (categorical and
//! diagonal Gaussian heads) and SAC (tanh-squashed Gaussian): log-softmax and the
//! Gaussian's log-density and entropy per coordinate. Their gradients are tested where
//! they are taken (`ppo::loss`, the off-policy actor tests).

/// `log(sqrt(2 pi))`, the Gaussian log-density's constant.
pub const LOG_SQRT_2PI: f32 = 0.918_938_5;

/// `log_softmax` of one row, into `out`.
pub fn log_softmax(logits: &[f32], out: &mut [f32]) {
    log_softmax_rows(logits, logits.len(), out);
}

/// [`log_softmax`] of each row of `n` logits, into the same rows of `out`: the
/// exponentials of all the rows in one vectorised pass ([`crate::nn::exp_in_place`]),
/// each row's bits those of [`log_softmax`] on it alone.
pub fn log_softmax_rows(logits: &[f32], n: usize, out: &mut [f32]) {
    let max = |row: &[f32]| row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    let out = &mut out[..logits.len()];
    for (o, x) in out.chunks_exact_mut(n).zip(logits.chunks_exact(n)) {
        let m = max(x);
        o.iter_mut().zip(x).for_each(|(o, &x)| *o = x - m);
    }
    crate::nn::exp_in_place(out);
    for (o, x) in out.chunks_exact_mut(n).zip(logits.chunks_exact(n)) {
        let lse = max(x) + o.iter().sum::<f32>().ln();
        o.iter_mut().zip(x).for_each(|(o, &x)| *o = x - lse);
    }
}

/// Log-density of one coordinate of a Gaussian with log-std `log_std` at the
/// standardised point `z = (x - mean) / std`.
pub fn gaussian_log_density(z: f32, log_std: f32) -> f32 {
    -0.5 * z * z - log_std - LOG_SQRT_2PI
}

/// Entropy of one coordinate of a Gaussian with log-std `log_std`.
pub fn gaussian_entropy(log_std: f32) -> f32 {
    0.5 + LOG_SQRT_2PI + log_std
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_is_a_log_distribution_and_shift_invariant() {
        let logits = [2.0, -1.0, 0.5, 30.0];
        let (mut a, mut b) = ([0.0; 4], [0.0; 4]);
        log_softmax(&logits, &mut a);
        let shifted: Vec<f32> = logits.iter().map(|x| x - 100.0).collect();
        log_softmax(&shifted, &mut b);
        let total: f32 = a.iter().map(|l| l.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-4 && *x <= 0.0);
        }
    }

    /// The density integrates to 1 (trapezoid rule over +-8 std) and the entropy is
    /// minus the expected log-density, for a few log-stds.
    #[test]
    fn gaussian_density_and_entropy_agree() {
        for log_std in [-1.0f32, 0.0, 0.7] {
            let sd = f64::from(log_std.exp());
            let (n, lo, hi) = (4000, -8.0f64, 8.0f64);
            let dz = (hi - lo) / n as f64;
            let (mut mass, mut neg_e) = (0.0, 0.0);
            for i in 0..=n {
                let z = lo + i as f64 * dz;
                let w = if i == 0 || i == n { 0.5 } else { 1.0 };
                let lp = f64::from(gaussian_log_density(z as f32, log_std));
                // p(x) dx with x = mean + sd z.
                let p = lp.exp() * sd * dz * w;
                mass += p;
                neg_e -= p * lp;
            }
            assert!((mass - 1.0).abs() < 1e-4, "log_std {log_std}: mass {mass}");
            let h = f64::from(gaussian_entropy(log_std));
            assert!(
                (neg_e - h).abs() < 1e-3,
                "log_std {log_std}: {neg_e} vs {h}"
            );
        }
    }
}
