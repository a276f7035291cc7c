//! The learner: GAE targets and PPO's epochs of minibatch updates (the row arithmetic
//! is in [`super::loss`]).

use super::*;
use crate::nn::Rows;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The learner's buffers (targets and minibatch update): sized by the first iteration,
/// reused after.
#[derive(Default)]
pub(super) struct UpdateBufs {
    idx: Vec<usize>,
    mb_obs: Vec<f32>,
    d_out: Vec<f32>,
    d_val: Vec<f32>,
    mb_adv: Vec<f32>,
    pub(super) logp_row: Vec<f32>,
    /// The minibatch loss's row blocks: each one's sums and log-std gradient (behind a
    /// lock: a fused pass's chunks take the blocks of their rows).
    blocks: Vec<Mutex<LossBlock>>,
    /// Each block's value-loss sum (f64 bits), apart from `blocks`: with the networks
    /// on two threads the value rows run beside the policy rows, and sharing the policy
    /// block's lock made one wait for the other (a futex sleep at worst).
    value_sums: Vec<AtomicU64>,
    /// Their log-std gradients added up.
    d_logstd: Vec<f32>,
    pub(super) ls: Vec<f32>,
    out: Vec<f32>,
    newv: Vec<f32>,
    scratch: Vec<f32>,
    /// GAE's and V-trace's per-step discounts ([`Ppo::discounts_into`]).
    pub(super) discounts: Vec<f32>,
    /// V-trace: the policy over the whole rollout, and its log importance ratios.
    pub(super) rollout_out: Vec<f32>,
    pub(super) log_rhos: Vec<f32>,
}

/// Rows of a minibatch's loss one pool task computes. Fixed, so the blocks, their
/// partial sums and the order they are added in do not depend on the thread count.
const LOSS_BLOCK_ROWS: usize = 64;

/// One block of a minibatch's policy rows: its sums of the statistics (policy surrogate,
/// entropy, approximate KL, clipped rows) and of the log-std gradient.
#[derive(Default)]
struct LossBlock {
    sums: [f64; 4],
    d_logstd: Vec<f32>,
    scratch: loss::PolicyScratch,
}

/// A block the caller holds alone (a lock poisoned by a panicking chunk still gives its
/// data: the panic itself stops the update).
fn block_mut(b: &mut Mutex<LossBlock>) -> &mut LossBlock {
    b.get_mut().unwrap_or_else(|e| e.into_inner())
}

/// What a minibatch's loss rows read besides the networks' outputs: row `r` of the
/// minibatch is step `idx[r]` of the rollout.
struct LossRows<'a> {
    head: &'a Head,
    coefs: loss::LossCoefs,
    vclip: Option<f32>,
    vf_coef: f32,
    idx: &'a [usize],
    buf: &'a RolloutBuf,
    returns: &'a [f32],
    /// The minibatch's advantages, normalised where the config says so.
    adv: &'a [f32],
    /// The Gaussian head's log-stds (empty for a categorical head).
    ls: &'a [f32],
    out_dim: usize,
    adim: usize,
    /// The minibatch's loss blocks (a fused pass's chunks and networks take theirs).
    blocks: &'a [Mutex<LossBlock>],
    value_sums: &'a [AtomicU64],
}

impl LossRows<'_> {
    /// Runs `f(block, rows)` on each block of minibatch rows `r` (whole blocks: one
    /// block, or a fused pass's chunk).
    fn each_block(&self, r: &Range<usize>, mut f: impl FnMut(usize, Range<usize>)) {
        for blk in r.start / LOSS_BLOCK_ROWS..r.end.div_ceil(LOSS_BLOCK_ROWS) {
            f(
                blk,
                blk * LOSS_BLOCK_ROWS..((blk + 1) * LOSS_BLOCK_ROWS).min(r.end),
            );
        }
    }

    /// The policy loss of minibatch rows `r`: `out` is those rows' policy outputs,
    /// `d_out` receives their gradients, and each block's policy sums (surrogate,
    /// entropy, approximate KL, clipped rows) and log-std gradient are made anew.
    fn policy_blocks(&self, r: Range<usize>, out: &[f32], d_out: &mut [f32]) {
        let (od, ad) = (self.out_dim, self.adim);
        self.each_block(&r, |blk, rows| {
            let mut b = self.blocks[blk].lock().unwrap_or_else(|e| e.into_inner());
            let LossBlock {
                sums,
                d_logstd,
                scratch,
            } = &mut *b;
            sums.fill(0.0);
            d_logstd.fill(0.0);
            let js = (rows.start - r.start) * od..(rows.end - r.start) * od;
            loss::policy_block(
                self.head,
                &self.coefs,
                &out[js.clone()],
                rows.len(),
                |k| {
                    let (row, i) = (rows.start + k, self.idx[rows.start + k]);
                    loss::PolicyIn {
                        action: &self.buf.actions[i * ad..(i + 1) * ad],
                        old_lp: self.buf.logprobs[i],
                        adv: self.adv[row],
                    }
                },
                self.ls,
                scratch,
                &mut d_out[js],
                d_logstd,
                |t| {
                    for (s, v) in sums.iter_mut().zip([
                        t.surrogate,
                        t.entropy,
                        t.approx_kl,
                        f32::from(u8::from(t.clipped)),
                    ]) {
                        *s += f64::from(v);
                    }
                },
            );
        });
    }

    /// The value loss of minibatch rows `r`: `values` is those rows' values, `d_val`
    /// receives their gradients, and each block's value-loss sum is made anew.
    fn value_blocks(&self, r: Range<usize>, values: &[f32], d_val: &mut [f32]) {
        self.each_block(&r, |blk, rows| {
            let mut sum = 0.0f64;
            for (row, i) in rows.map(|row| (row, self.idx[row])) {
                let j = row - r.start;
                let (err, grad) = loss::value_row(
                    values[j],
                    self.returns[i],
                    self.buf.values[i],
                    self.vclip,
                    self.vf_coef,
                    self.coefs.inv,
                );
                d_val[j] = grad;
                sum += f64::from(0.5 * err);
            }
            self.value_sums[blk].store(sum.to_bits(), Ordering::Relaxed);
        });
    }
}

impl Ppo {
    /// GAE over the rollout, bootstrapped from `next_value`.
    pub(super) fn gae(&mut self, next_value: &[f32]) {
        let mut discounts = std::mem::take(&mut self.update_bufs.discounts);
        self.discounts_into(&mut discounts);
        let cfg = &self.cfg;
        loss::gae(
            cfg.num_steps,
            cfg.num_envs,
            cfg.gamma as f32,
            cfg.gae_lambda as f32,
            &self.buf.rewards,
            &discounts,
            &self.buf.values,
            next_value,
            &mut self.advantages,
            &mut self.returns,
        );
        self.update_bufs.discounts = discounts;
    }

    /// Per step of the rollout, 0 where it ended its episode (the next observation
    /// starts a new one) and 1 elsewhere, into `out`.
    pub(super) fn discounts_into(&self, out: &mut Vec<f32>) {
        let (t_max, e) = (self.cfg.num_steps, self.cfg.num_envs);
        out.clear();
        out.extend((0..t_max * e).map(|i| {
            let (t, k) = (i / e, i % e);
            let ended = if t + 1 == t_max {
                self.learn_next_done[k]
            } else {
                self.buf.dones[i + e] != 0.0
            };
            if ended { 0.0 } else { 1.0 }
        }));
    }

    /// `update_epochs` passes of minibatch gradient steps over the rollout.
    pub(super) fn update(&mut self, lr: f64, it: u64, stats: &mut IterationStats) {
        let cfg = &self.cfg;
        let (b, mb, d) = (cfg.batch_size(), cfg.minibatch_size(), self.agent.obs_dim);
        let adim = self.agent.action_dim();
        let out_dim = self.agent.policy_dim();
        let clip = cfg.clip_coef as f32;
        let log_stds = match &self.agent.head {
            Head::Gaussian { dim, .. } => *dim,
            Head::Categorical { .. } => 0,
        };
        // Every buffer is overwritten before it is read (d_logstd each minibatch).
        let mut bufs = std::mem::take(&mut self.update_bufs);
        let UpdateBufs {
            idx,
            mb_obs,
            d_out,
            d_val,
            mb_adv,
            blocks,
            value_sums,
            d_logstd,
            ls,
            out,
            newv,
            scratch,
            ..
        } = &mut bufs;
        // The shuffles start from the identity every iteration.
        idx.clear();
        idx.extend(0..b);
        for (v, n) in [
            (&mut *mb_obs, mb * d),
            (&mut *d_out, mb * out_dim),
            (&mut *d_val, mb),
            (&mut *mb_adv, mb),
            (&mut *ls, log_stds),
            (&mut *d_logstd, log_stds),
            (&mut *out, mb * out_dim),
            (&mut *newv, mb),
        ] {
            v.resize(n, 0.0);
        }
        blocks.resize_with(mb.div_ceil(LOSS_BLOCK_ROWS), Default::default);
        value_sums.resize_with(blocks.len(), Default::default);
        for b in blocks.iter_mut() {
            let b = block_mut(b);
            b.d_logstd.resize(log_stds, 0.0);
        }
        let (mut n_mb, mut pg_sum, mut v_sum, mut ent_sum, mut kl_sum, mut cf_sum) =
            (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for epoch in 0..cfg.update_epochs {
            let mut rng = Rng::stream(
                cfg.seed,
                Purpose::Learner,
                (it - 1) * cfg.update_epochs as u64 + epoch as u64,
            );
            // Fisher-Yates, as numpy's permutation (different draws, same distribution).
            for i in (1..b).rev() {
                let j = rng.below(i as u32 + 1) as usize;
                idx.swap(i, j);
            }
            for chunk in idx.chunks_exact(mb) {
                for (r, &i) in chunk.iter().enumerate() {
                    mb_adv[r] = self.advantages[i];
                }
                if cfg.norm_adv && mb > 1 {
                    let m = mb_adv.iter().map(|v| f64::from(*v)).sum::<f64>() / mb as f64;
                    // torch.std is the unbiased estimate.
                    let s = (mb_adv
                        .iter()
                        .map(|v| (f64::from(*v) - m).powi(2))
                        .sum::<f64>()
                        / (mb - 1) as f64)
                        .sqrt();
                    for a in mb_adv.iter_mut() {
                        *a = ((f64::from(*a) - m) / (s + 1e-8)) as f32;
                    }
                }
                ls.copy_from_slice(self.backend.free_params());
                let rows = LossRows {
                    head: &self.agent.head,
                    coefs: loss::LossCoefs {
                        clip,
                        ent_coef: cfg.ent_coef as f32,
                        inv: 1.0 / mb as f32,
                    },
                    vclip: cfg.clip_vloss.then_some(clip),
                    vf_coef: cfg.vf_coef as f32,
                    idx: chunk,
                    buf: &self.buf,
                    returns: &self.returns,
                    adv: mb_adv,
                    ls,
                    out_dim,
                    adim,
                    blocks,
                    value_sums,
                };
                // Separate networks: forward, loss and backward fused per chunk of rows
                // (and network) where the backend fuses them, each chunk reading its
                // observations from the rollout; else the minibatch's rows gathered and
                // the three apart, the loss in blocks on the pool. Either way each
                // block's sums are added in block order below: the same bits.
                let fused = self.agent.separate_nets()
                    && self.backend.train_fused(
                        &[ACTOR, CRITIC],
                        Rows::picked(&self.buf.obs, d, chunk),
                        LOSS_BLOCK_ROWS,
                        &|r, net, out, dout| match net {
                            0 => rows.policy_blocks(r, out, dout),
                            _ => rows.value_blocks(r, out, dout),
                        },
                    );
                if !fused {
                    gather_rows(
                        self.threads_pool.as_deref(),
                        Rows::picked(&self.buf.obs, d, chunk),
                        mb_obs,
                    );
                    // Copies of a few floats per row: the loss head runs on the host,
                    // wherever the networks do.
                    self.agent
                        .forward(&mut *self.backend, mb_obs, mb, true, out, newv);
                    let (out, newv) = (&*out, &*newv);
                    let mut work: Vec<_> = d_out
                        .chunks_mut(LOSS_BLOCK_ROWS * out_dim)
                        .zip(d_val.chunks_mut(LOSS_BLOCK_ROWS))
                        .collect();
                    crate::backend::for_each(
                        self.threads_pool.as_deref(),
                        &mut work,
                        |blk, (d_out, d_val)| {
                            let r = blk * LOSS_BLOCK_ROWS..blk * LOSS_BLOCK_ROWS + d_val.len();
                            let (o, v) =
                                (&out[r.start * out_dim..r.end * out_dim], &newv[r.clone()]);
                            rows.policy_blocks(r.clone(), o, d_out);
                            rows.value_blocks(r, v, d_val);
                        },
                    );
                    drop(work);
                    self.agent
                        .backward(&mut *self.backend, d_out, d_val, scratch);
                }
                let mut sums = [0.0f64; 5];
                d_logstd.fill(0.0);
                for (b, v) in blocks.iter_mut().zip(value_sums.iter()) {
                    let b = block_mut(b);
                    for (s, v) in sums.iter_mut().zip(&b.sums) {
                        *s += v;
                    }
                    sums[4] += f64::from_bits(v.load(Ordering::Relaxed));
                    for (g, v) in d_logstd.iter_mut().zip(&b.d_logstd) {
                        *g += v;
                    }
                }
                let [pg, ent, kl, cf, vl] = sums;
                if !d_logstd.is_empty() {
                    self.backend.add_free_grad(d_logstd);
                }
                self.backend.step(lr, cfg.max_grad_norm);
                let m = mb as f64;
                n_mb += 1.0;
                pg_sum += pg / m;
                v_sum += vl / m;
                ent_sum += ent / m;
                kl_sum += kl / m;
                cf_sum += cf / m;
            }
        }
        self.update_bufs = bufs;
        self.agent.params = self.backend.params();
        stats.policy_loss = pg_sum / n_mb;
        stats.value_loss = v_sum / n_mb;
        stats.entropy = ent_sum / n_mb;
        stats.approx_kl = kl_sum / n_mb;
        stats.clipfrac = cf_sum / n_mb;
    }
}

/// Floats of a gather worth a pool job: below it (CartPole's 128 x 4) waking the workers
/// costs more than the copy.
const POOL_GATHER_FLOATS: usize = 1 << 16;

/// `rows` copied in order into the start of `dst`, on the pool when the copy is large: a
/// minibatch's observations are rows scattered over the rollout, a memory-bound copy
/// that on the caller alone was 7.6 % of a MinAtar SpaceInvaders run (600 floats a row)
/// while the workers waited.
fn gather_rows(pool: Option<&rlrig_env::pool::Pool>, rows: Rows<'_>, dst: &mut [f32]) {
    const ROWS_PER_TASK: usize = 64;
    let d = rows.dim();
    let dst = &mut dst[..rows.len() * d];
    match pool {
        Some(pool) if dst.len() >= POOL_GATHER_FLOATS => {
            let mut parts: Vec<_> = dst.chunks_mut(ROWS_PER_TASK * d).enumerate().collect();
            pool.for_each_mut(&mut parts, |_, (t, dst)| {
                let first = *t * ROWS_PER_TASK;
                rows.slice(first..first + dst.len() / d).copy_to(dst);
            });
        }
        _ => rows.copy_to(dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small and pooled gathers both copy row `rows[r]` of the source into row `r`.
    #[test]
    fn gathered_rows_are_the_indexed_rows_in_order() {
        let pool = rlrig_env::pool::Pool::new(2).unwrap();
        for (n, d) in [(10, 3), (1000, 300)] {
            let src: Vec<f32> = (0..n * d).map(|v| v as f32).collect();
            let rows: Vec<usize> = (0..n).map(|r| (r * 7 + 3) % n).collect();
            let want: Vec<f32> = rows
                .iter()
                .flat_map(|&i| src[i * d..(i + 1) * d].to_vec())
                .collect();
            for p in [None, Some(&pool)] {
                let mut dst = vec![-1.0; n * d + 5];
                gather_rows(p, Rows::picked(&src, d, &rows), &mut dst);
                assert_eq!(
                    dst[..n * d],
                    want[..],
                    "{n} rows of {d}, pool {}",
                    p.is_some()
                );
                assert!(
                    dst[n * d..].iter().all(|&v| v == -1.0),
                    "wrote past the rows"
                );
            }
        }
    }
}
