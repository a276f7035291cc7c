//! PPO's arithmetic on the host, one row at a time, apart from the networks: GAE
//! targets, the clipped surrogate with the entropy bonus and the (clipped) value loss,
//! each with its gradient with respect to the head's outputs. The update feeds these
//! gradients to the backend's backward pass; the tests check them against finite
//! differences.

use super::Head;
use crate::dist::{gaussian_entropy, gaussian_log_density, log_softmax_rows};

/// Generalized advantage estimation (Schulman et al. 2016) over a time-major rollout of
/// `t_max` steps of `e` envs: `discounts[t e + k]` is 0 where step `t` of env `k` ended
/// its episode and 1 elsewhere; `next_value` bootstraps the step after the last.
/// Writes the advantages and the value targets (advantage + value).
#[allow(clippy::too_many_arguments)]
pub(super) fn gae(
    t_max: usize,
    e: usize,
    gamma: f32,
    lambda: f32,
    rewards: &[f32],
    discounts: &[f32],
    values: &[f32],
    next_value: &[f32],
    advantages: &mut [f32],
    returns: &mut [f32],
) {
    let mut last = vec![0.0f32; e];
    for t in (0..t_max).rev() {
        for k in 0..e {
            let i = t * e + k;
            let next_v = if t + 1 == t_max {
                next_value[k]
            } else {
                values[i + e]
            };
            let nonterminal = discounts[i];
            let delta = rewards[i] + gamma * next_v * nonterminal - values[i];
            last[k] = delta + gamma * lambda * nonterminal * last[k];
            advantages[i] = last[k];
            returns[i] = last[k] + values[i];
        }
    }
}

/// What one row contributes to the iteration's statistics.
pub(super) struct PolicyTerms {
    /// The clipped surrogate `max(-A r, -A clip(r, 1 - eps, 1 + eps))`.
    pub surrogate: f32,
    pub entropy: f32,
    /// `(r - 1) - log r`, the approximate KL estimator.
    pub approx_kl: f32,
    /// Whether the ratio lies outside the clip range.
    pub clipped: bool,
}

/// The constants of one minibatch's loss.
pub(super) struct LossCoefs {
    pub clip: f32,
    pub ent_coef: f32,
    /// 1 / rows of the minibatch (the loss is a mean).
    pub inv: f32,
}

/// One row's inputs to the policy loss besides the head's outputs: the action taken
/// (`action[0]` its index for a categorical head), its log-probability when collected
/// and its advantage.
pub(super) struct PolicyIn<'a> {
    pub action: &'a [f32],
    pub old_lp: f32,
    pub adv: f32,
}

/// A block's intermediate values ([`policy_block`]), kept from one block to the next.
#[derive(Default)]
pub(super) struct PolicyScratch {
    logp: Vec<f32>,
    logratio: Vec<f32>,
    ratio: Vec<f32>,
    entropy: Vec<f32>,
    /// The Gaussian head's standard deviations, `exp` of the log-stds once a block.
    sd: Vec<f32>,
}

/// The policy half of the loss, `(surrogate - ent_coef * entropy) * inv` a row, over a
/// block of `rows` rows: `out` holds their head outputs (logits or Gaussian means, the
/// same width a row), `row(i)` row `i`'s other inputs, `ls` the Gaussian log-stds.
/// Writes d loss / d `out` into `d_out`, adds d loss / d log-std into `d_logstd`, and
/// hands each row's terms to `each`, in row order.
///
/// In passes over the block, so that its exponentials (five a categorical row: the
/// softmax's, the probabilities, the ratio) run in vectors ([`crate::nn::exp_in_place`];
/// a row's bits do not depend on the block it is in). libm's `expf`, a call a value, took
/// ~5 us of PPO CartPole's ~48 us minibatch on the actor's lane (measured on a 2-core
/// Zen 4 VM, 2026-12-07), while the critic's lane, ~9 us shorter, waited for it.
#[allow(clippy::too_many_arguments)]
pub(super) fn policy_block<'a>(
    head: &Head,
    c: &LossCoefs,
    out: &[f32],
    rows: usize,
    row: impl Fn(usize) -> PolicyIn<'a>,
    ls: &[f32],
    scratch: &mut PolicyScratch,
    d_out: &mut [f32],
    d_logstd: &mut [f32],
    mut each: impl FnMut(PolicyTerms),
) {
    let od = out.len() / rows.max(1);
    let PolicyScratch {
        logp,
        logratio,
        ratio,
        entropy,
        sd,
    } = scratch;
    sd.clear();
    sd.extend(ls.iter().map(|l| l.exp()));
    logratio.clear();
    entropy.clear();
    match head {
        Head::Categorical { .. } => {
            logp.resize(out.len(), 0.0);
            log_softmax_rows(out, od, logp);
            // The probabilities wait in `d_out` for the gradient below.
            d_out.copy_from_slice(logp);
            crate::nn::exp_in_place(d_out);
            for (i, (p, lp)) in d_out
                .chunks_exact(od)
                .zip(logp.chunks_exact(od))
                .enumerate()
            {
                // -0.0 to start, as `Iterator::sum` of floats does.
                let mut sum = -0.0f32;
                for (p, lp) in p.iter().zip(lp) {
                    sum += *p * lp;
                }
                let r = row(i);
                logratio.push(lp[r.action[0] as usize] - r.old_lp);
                entropy.push(-sum);
            }
        }
        Head::Gaussian { dim, .. } => {
            for (i, out) in out.chunks_exact(od).enumerate() {
                let r = row(i);
                let mut lp = 0.0f32;
                let mut h = 0.0f32;
                for j in 0..*dim {
                    let z = (r.action[j] - out[j]) / sd[j];
                    lp += gaussian_log_density(z, ls[j]);
                    h += gaussian_entropy(ls[j]);
                }
                logratio.push(lp - r.old_lp);
                entropy.push(h);
            }
        }
    }
    ratio.clone_from(logratio);
    crate::nn::exp_in_place(ratio);
    let (clip, inv, ec) = (c.clip, c.inv, c.ent_coef);
    for (i, d_out) in d_out.chunks_exact_mut(od).enumerate() {
        let (r, ratio, logratio, entropy) = (row(i), ratio[i], logratio[i], entropy[i]);
        let l1 = -r.adv * ratio;
        let l2 = -r.adv * ratio.clamp(1.0 - clip, 1.0 + clip);
        // d surrogate / d new_lp: through the unclipped branch unless the clipped one is
        // larger and its clamp is active.
        let clipped_active = l2 > l1 && (ratio < 1.0 - clip || ratio > 1.0 + clip);
        let g_lp = if clipped_active {
            0.0
        } else {
            -r.adv * ratio * inv
        };
        match head {
            Head::Categorical { n } => {
                let a = r.action[0] as usize;
                let logp = &logp[i * od..(i + 1) * od];
                for j in 0..*n {
                    let p = d_out[j];
                    let onehot = if j == a { 1.0 } else { 0.0 };
                    // d(-ec * H)/dl_j = ec * p_j (log p_j + H)
                    d_out[j] = g_lp * (onehot - p) + ec * inv * p * (logp[j] + entropy);
                }
            }
            Head::Gaussian { dim, .. } => {
                for j in 0..*dim {
                    let z = (r.action[j] - out[i * od + j]) / sd[j];
                    d_out[j] = g_lp * z / sd[j];
                    d_logstd[j] += g_lp * (z * z - 1.0) - ec * inv;
                }
            }
        }
        each(PolicyTerms {
            surrogate: l1.max(l2),
            entropy,
            approx_kl: (ratio - 1.0) - logratio,
            clipped: (ratio - 1.0).abs() > clip,
        });
    }
}

/// The value half of one row's loss for the new value `v`, the target `ret` and the
/// value when collected `old_v`: returns the squared error (the larger of the clipped
/// and unclipped ones with `clip_vloss`, as CleanRL) and d (`vf_coef` * 0.5 * error *
/// `inv`) / d `v`.
pub(super) fn value_row(
    v: f32,
    ret: f32,
    old_v: f32,
    clip: Option<f32>,
    vf_coef: f32,
    inv: f32,
) -> (f32, f32) {
    let unclipped = (v - ret) * (v - ret);
    let vf = vf_coef;
    match clip {
        Some(clip) => {
            let vc = old_v + (v - old_v).clamp(-clip, clip);
            let clipped = (vc - ret) * (vc - ret);
            let grad = if clipped > unclipped {
                if (v - old_v).abs() < clip {
                    vf * (vc - ret) * inv
                } else {
                    0.0
                }
            } else {
                vf * (v - ret) * inv
            };
            (unclipped.max(clipped), grad)
        }
        None => (unclipped, vf * (v - ret) * inv),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::log_softmax;

    /// One env, three steps, the episode ending at step 1: by hand with gamma 0.9 and
    /// lambda 0.5.
    #[test]
    fn gae_by_hand() {
        let (g, l) = (0.9f32, 0.5f32);
        let rewards = [1.0, 2.0, 3.0];
        let values = [0.5, 1.0, 2.0];
        let discounts = [1.0, 0.0, 1.0];
        let next = [4.0];
        let (mut adv, mut ret) = ([0.0; 3], [0.0; 3]);
        gae(
            3, 1, g, l, &rewards, &discounts, &values, &next, &mut adv, &mut ret,
        );
        let d2 = 3.0 + g * 4.0 - 2.0;
        let d1 = 2.0 - 1.0; // step 1 ended the episode: no bootstrap
        let d0 = 1.0 + g * 1.0 - 0.5;
        let want = [d0 + g * l * d1, d1, d2];
        for i in 0..3 {
            assert!((adv[i] - want[i]).abs() < 1e-6, "{adv:?} vs {want:?}");
            assert!((ret[i] - (want[i] + values[i])).abs() < 1e-6);
        }
    }

    /// lambda = 1 without episode ends: the advantage is the discounted return (with
    /// the bootstrap) minus the value; lambda = 0: the one-step TD error.
    #[test]
    fn gae_lambda_one_is_monte_carlo_and_zero_is_td() {
        let (t_max, e, g) = (5, 2, 0.95f32);
        let rewards: Vec<f32> = (0..t_max * e).map(|i| (i as f32 * 0.37).sin()).collect();
        let values: Vec<f32> = (0..t_max * e).map(|i| (i as f32 * 0.11).cos()).collect();
        let discounts = vec![1.0; t_max * e];
        let next = [0.3, -0.2];
        let (mut adv, mut ret) = (vec![0.0; t_max * e], vec![0.0; t_max * e]);
        gae(
            t_max, e, g, 1.0, &rewards, &discounts, &values, &next, &mut adv, &mut ret,
        );
        for k in 0..e {
            let mut g_ret = next[k];
            for t in (0..t_max).rev() {
                g_ret = rewards[t * e + k] + g * g_ret;
                let i = t * e + k;
                assert!((ret[i] - g_ret).abs() < 1e-4, "t {t} k {k}");
                assert!((adv[i] - (g_ret - values[i])).abs() < 1e-4);
            }
        }
        gae(
            t_max, e, g, 0.0, &rewards, &discounts, &values, &next, &mut adv, &mut ret,
        );
        for i in 0..t_max * e {
            let next_v = if i + e < t_max * e {
                values[i + e]
            } else {
                next[i % e]
            };
            assert!((adv[i] - (rewards[i] + g * next_v - values[i])).abs() < 1e-6);
        }
    }

    struct Case {
        action: Vec<f32>,
        old_lp: f32,
        adv: f32,
    }

    /// `policy_block` of `case` alone: its terms, d loss / d outputs and d loss / d
    /// log-stds.
    fn row(
        head: &Head,
        c: &LossCoefs,
        out: &[f32],
        ls: &[f32],
        case: &Case,
    ) -> (PolicyTerms, Vec<f32>, Vec<f32>) {
        let (mut d, mut dls) = (vec![0.0; out.len()], vec![0.0; ls.len()]);
        let mut terms = Vec::new();
        policy_block(
            head,
            c,
            out,
            1,
            |_| case.input(),
            ls,
            &mut PolicyScratch::default(),
            &mut d,
            &mut dls,
            |t| terms.push(t),
        );
        (terms.pop().expect("one row's terms"), d, dls)
    }

    impl Case {
        fn input(&self) -> PolicyIn<'_> {
            PolicyIn {
                action: &self.action,
                old_lp: self.old_lp,
                adv: self.adv,
            }
        }
    }

    /// A block of rows gives each row the bits it gets alone (its exponentials run in
    /// vectors in the block and one at a time alone), for both heads.
    #[test]
    fn a_block_gives_each_row_its_own_bits() {
        let c = LossCoefs {
            clip: 0.2,
            ent_coef: 0.01,
            inv: 1.0 / 64.0,
        };
        let gauss = Head::Gaussian {
            dim: 2,
            low: vec![-1.0; 2],
            high: vec![1.0; 2],
            logstd: 0,
        };
        for head in [Head::Categorical { n: 3 }, gauss] {
            let od = match &head {
                Head::Categorical { n } => *n,
                Head::Gaussian { dim, .. } => *dim,
            };
            let rows = 67;
            let out: Vec<f32> = (0..rows * od)
                .map(|i| (i as f32 * 0.731).sin() * 3.0)
                .collect();
            let ls = [-0.4f32, 0.2];
            let cases: Vec<Case> = (0..rows)
                .map(|i| Case {
                    action: match &head {
                        Head::Categorical { n } => vec![(i % n) as f32],
                        Head::Gaussian { .. } => vec![(i as f32 * 0.3).cos(), 0.1],
                    },
                    old_lp: -1.0 + (i as f32 * 0.17).sin() * 0.3,
                    adv: (i as f32 * 0.41).cos(),
                })
                .collect();
            let (mut d, mut dls) = (vec![0.0; out.len()], [0.0f32; 2]);
            let mut terms = Vec::new();
            policy_block(
                &head,
                &c,
                &out,
                rows,
                |i| cases[i].input(),
                &ls,
                &mut PolicyScratch::default(),
                &mut d,
                &mut dls,
                |t| terms.push(t),
            );
            let mut dls_sum = [0.0f32; 2];
            for (i, case) in cases.iter().enumerate() {
                let (t, d1, dls1) = row(&head, &c, &out[i * od..(i + 1) * od], &ls, case);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&d[i * od..(i + 1) * od]), bits(&d1), "row {i}");
                let b = &terms[i];
                assert_eq!(
                    [b.surrogate, b.entropy, b.approx_kl].map(f32::to_bits),
                    [t.surrogate, t.entropy, t.approx_kl].map(f32::to_bits),
                    "row {i}"
                );
                assert_eq!(b.clipped, t.clipped);
                if matches!(head, Head::Gaussian { .. }) {
                    for (s, v) in dls_sum.iter_mut().zip(&dls1) {
                        *s += v;
                    }
                }
            }
            assert_eq!(dls.map(f32::to_bits), dls_sum.map(f32::to_bits));
        }
    }

    /// The row's loss as a function of the head outputs and log-stds, in f64 from the
    /// terms `policy_row` reports.
    fn loss(head: &Head, c: &LossCoefs, out: &[f32], ls: &[f32], case: &Case) -> f64 {
        let (t, _, _) = row(head, c, out, ls, case);
        f64::from(c.inv) * (f64::from(t.surrogate) - f64::from(c.ent_coef) * f64::from(t.entropy))
    }

    /// Central differences of the loss against `policy_row`'s gradient, for every
    /// output and log-std (as one vector).
    fn check_gradient(head: &Head, out: &[f32], ls: &[f32], case: &Case) {
        let c = LossCoefs {
            clip: 0.2,
            ent_coef: 0.05,
            inv: 0.25,
        };
        let (_, d, dls) = row(head, &c, out, ls, case);
        let params: Vec<f32> = out.iter().chain(ls).copied().collect();
        let grads: Vec<f32> = d.iter().chain(&dls).copied().collect();
        let n = out.len();
        crate::nn::assert_matches_central_differences(&params, &grads, 1e-2, 2e-3, |p| {
            loss(head, &c, &p[..n], &p[n..], case)
        });
    }

    #[test]
    fn categorical_gradient_matches_finite_differences() {
        let head = Head::Categorical { n: 3 };
        let out = [0.3, -0.4, 0.9];
        let mut logp = [0.0; 3];
        log_softmax(&out, &mut logp);
        // Ratio inside the clip range, then beyond it on either side of the advantage's
        // sign (the clipped branch is flat there).
        for (shift, adv) in [
            (0.05, 1.5),
            (0.05, -1.5),
            (0.6, 1.5),
            (-0.6, -1.5),
            (0.6, -1.5),
        ] {
            let case = Case {
                action: vec![2.0],
                old_lp: logp[2] - shift,
                adv,
            };
            check_gradient(&head, &out, &[], &case);
        }
    }

    #[test]
    fn gaussian_gradient_matches_finite_differences() {
        let head = Head::Gaussian {
            dim: 2,
            low: vec![-1.0; 2],
            high: vec![1.0; 2],
            logstd: 0,
        };
        let (out, ls) = ([0.2, -0.3], [-0.5, 0.1]);
        let action = vec![0.5, -0.1];
        let lp: f32 = (0..2)
            .map(|j| {
                let z = (action[j] - out[j]) / f32::exp(ls[j]);
                gaussian_log_density(z, ls[j])
            })
            .sum();
        for (shift, adv) in [(0.05, 0.8), (0.05, -0.8), (0.7, 0.8), (-0.7, -0.8)] {
            let case = Case {
                action: action.clone(),
                old_lp: lp - shift,
                adv,
            };
            check_gradient(&head, &out, &ls, &case);
        }
    }

    /// The value gradient against finite differences of `vf_coef * 0.5 * error * inv`,
    /// clipped and not, with the new value near and far from the old.
    #[test]
    fn value_gradient_matches_finite_differences() {
        let (vf, inv, h) = (0.5f32, 0.125f32, 1e-3f32);
        for clip in [None, Some(0.2)] {
            for (v, ret, old) in [
                (1.0, 2.0, 0.95),
                (1.0, 2.0, 0.5),
                (1.0, 0.0, 1.5),
                (1.0, 3.0, 1.1),
            ] {
                let f = |v: f32| {
                    f64::from(vf)
                        * 0.5
                        * f64::from(value_row(v, ret, old, clip, vf, inv).0)
                        * f64::from(inv)
                };
                let num = (f(v + h) - f(v - h)) / (2.0 * f64::from(h));
                let (_, grad) = value_row(v, ret, old, clip, vf, inv);
                assert!(
                    (num - f64::from(grad)).abs() < 1e-4,
                    "clip {clip:?}, v {v}, ret {ret}, old {old}: {num} vs {grad}"
                );
            }
        }
    }
}
