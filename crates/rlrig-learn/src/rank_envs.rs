//! A batch of envs split over MPI ranks: each rank steps its own contiguous share, and
//! after every step the ranks gather observations, rewards and flags, so that every
//! rank sees the whole batch as one executor would give it. The shares' envs draw from
//! the streams of their places in the batch ([`rlrig_env::VecConfig::first_env`]), so
//! the batch is the one a single process steps, bit for bit.

use std::ops::Range;
use std::sync::Arc;

use rlrig_env::{ActionBuf, EnvError, ObsBuf, Rng, VecEnvDyn, VecSnapshot};

use crate::collective::Collective;

/// The whole batch's view of envs that live on several ranks (see the module docs).
/// Every rank makes the same calls in the same order: stepping, resetting and
/// restoring are collective.
pub struct RankEnvs {
    local: Box<dyn VecEnvDyn>,
    c: Arc<dyn Collective>,
    /// Each rank's envs, in rank order; they tile `0..num_envs`.
    shares: Vec<Range<usize>>,
    obs_dim: usize,
    u8_obs: bool,
    has_final: bool,
    obs32: Vec<f32>,
    obs8: Vec<u8>,
    final32: Vec<f32>,
    final8: Vec<u8>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    pending: Vec<bool>,
    /// The whole batch's snapshot, as of the last [`VecEnvDyn::sync_snapshot`] (or
    /// restore); `None` once the envs have moved on.
    snapshot: Option<VecSnapshot>,
    /// The gather's buffers, kept across steps: this rank's rows (observations, final
    /// observations; rewards and flags, then a failure flag) and every rank's.
    send32: Vec<f32>,
    send64: Vec<f64>,
    recv32: Vec<f32>,
    recv64: Vec<f64>,
}

/// The envs of rank `rank` of `size` in a batch of `n`: contiguous, the first `n % size`
/// ranks one more.
pub fn share(n: usize, size: usize, rank: usize) -> Range<usize> {
    crate::backend::chunk_rows(n, size, rank)
}

impl RankEnvs {
    /// Splits a batch of `n` envs over the ranks of `c`; `make(share)` builds this rank's
    /// executor for envs `share` of the batch (with `first_env = share.start`). Every
    /// rank needs at least one env.
    pub fn new(
        n: usize,
        c: Arc<dyn Collective>,
        make: impl FnOnce(Range<usize>) -> Result<Box<dyn VecEnvDyn>, crate::LearnError>,
    ) -> Result<RankEnvs, crate::LearnError> {
        let size = c.size();
        if n < size {
            return Err(crate::LearnError::Config(format!(
                "num_envs = {n} cannot be split over {size} MPI ranks: give every rank at least one env"
            )));
        }
        let shares: Vec<_> = (0..size).map(|r| share(n, size, r)).collect();
        let local = make(shares[c.rank()].clone())?;
        let spec = local.spec();
        let has_final = local.final_obs().is_some();
        let u8_obs = matches!(local.obs(), ObsBuf::U8(_));
        let d = spec.obs_dim;
        let mut envs = RankEnvs {
            local,
            c,
            shares,
            obs_dim: d,
            u8_obs,
            has_final,
            obs32: if u8_obs { Vec::new() } else { vec![0.0; n * d] },
            obs8: if u8_obs { vec![0; n * d] } else { Vec::new() },
            final32: if u8_obs || !has_final {
                Vec::new()
            } else {
                vec![0.0; n * d]
            },
            final8: if u8_obs && has_final {
                vec![0; n * d]
            } else {
                Vec::new()
            },
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            pending: vec![false; n],
            snapshot: None,
            send32: Vec::new(),
            send64: Vec::new(),
            recv32: Vec::new(),
            recv64: Vec::new(),
        };
        envs.gather(None)?;
        Ok(envs)
    }

    fn mine(&self) -> Range<usize> {
        self.shares[self.c.rank()].clone()
    }

    /// Gives every rank every rank's observations, final observations, rewards and
    /// flags; `failed` is this rank's error from the call before, which every rank then
    /// learns of (a rank does not wait forever for one that gave up).
    fn gather(&mut self, failed: Option<EnvError>) -> Result<(), EnvError> {
        let (d, most, size) = (self.obs_dim, self.shares[0].len(), self.shares.len());
        let mine = self.mine();
        let rows = if self.has_final { 2 * d } else { d };
        let per = most * 4 + 1;
        // Sized once; padding rows of a smaller share stay as they are (never read).
        self.send32.resize(most * rows, 0.0);
        self.send64.resize(per, 0.0);
        self.recv32.resize(size * most * rows, 0.0);
        self.recv64.resize(size * per, 0.0);
        self.send64[most * 4] = f64::from(u8::from(failed.is_some()));
        if failed.is_none() {
            let to_f32 = |b: ObsBuf<'_>, out: &mut [f32]| match b {
                ObsBuf::F32(v) => out.copy_from_slice(v),
                ObsBuf::U8(v) => out.iter_mut().zip(v).for_each(|(o, &x)| *o = f32::from(x)),
            };
            let (obs, fin) = self.send32.split_at_mut(most * d);
            to_f32(self.local.obs(), &mut obs[..mine.len() * d]);
            if let Some(f) = self.local.final_obs() {
                to_f32(f, &mut fin[..mine.len() * d]);
            }
            let l = &self.local;
            let flag = |b: bool| f64::from(u8::from(b));
            for (k, w) in self.send64[..mine.len() * 4]
                .chunks_exact_mut(4)
                .enumerate()
            {
                w.copy_from_slice(&[
                    l.rewards()[k],
                    flag(l.terminated()[k]),
                    flag(l.truncated()[k]),
                    flag(l.pending_resets()[k]),
                ]);
            }
        }
        self.c.allgather_into(&self.send64, &mut self.recv64);
        if let Some(q) = (0..size).find(|q| self.recv64[q * per + most * 4] != 0.0) {
            return Err(failed.unwrap_or_else(|| {
                EnvError::Config(format!(
                    "MPI rank {q} could not step its share of the envs (its error is in its output)"
                ))
            }));
        }
        self.c.allgather_f32_into(&self.send32, &mut self.recv32);
        for (q, share) in self.shares.iter().enumerate() {
            let f = &self.recv32[q * most * rows..(q + 1) * most * rows];
            let w = &self.recv64[q * per..(q + 1) * per];
            let (obs, fin) = f.split_at(most * d);
            let len = share.len() * d;
            let at = share.start * d..share.end * d;
            if self.u8_obs {
                let put = |dst: &mut [u8], src: &[f32]| {
                    dst.iter_mut().zip(src).for_each(|(o, &x)| *o = x as u8);
                };
                put(&mut self.obs8[at.clone()], &obs[..len]);
                if self.has_final {
                    put(&mut self.final8[at], &fin[..len]);
                }
            } else {
                self.obs32[at.clone()].copy_from_slice(&obs[..len]);
                if self.has_final {
                    self.final32[at].copy_from_slice(&fin[..len]);
                }
            }
            for (k, i) in share.clone().enumerate() {
                self.rewards[i] = w[4 * k];
                self.terminated[i] = w[4 * k + 1] != 0.0;
                self.truncated[i] = w[4 * k + 2] != 0.0;
                self.pending[i] = w[4 * k + 3] != 0.0;
            }
        }
        self.snapshot = None;
        Ok(())
    }

    /// Runs `f` on this rank's executor, then gathers (every rank, even one whose `f`
    /// failed).
    fn then_gather(
        &mut self,
        f: impl FnOnce(&mut dyn VecEnvDyn) -> Result<(), EnvError>,
    ) -> Result<(), EnvError> {
        let r = f(self.local.as_mut()).err();
        self.gather(r)
    }
}

/// A snapshot's envs as numbers, for the gather: per env its state's length and
/// values, its stream position (two 32-bit halves), step counter and reset flag.
fn pack(s: &VecSnapshot) -> Vec<f64> {
    let mut out = Vec::new();
    for k in 0..s.states.len() {
        out.push(s.states[k].len() as f64);
        out.extend_from_slice(&s.states[k]);
        let p = s.rng_positions[k];
        out.extend([(p >> 32) as f64, (p & 0xffff_ffff) as f64]);
        out.push(f64::from(s.elapsed[k]));
        out.push(f64::from(u8::from(s.needs_reset[k])));
    }
    out
}

/// Appends the envs [`pack`] wrote (`n` of them) to `s`.
fn unpack(mut v: &[f64], n: usize, s: &mut VecSnapshot) {
    for _ in 0..n {
        let len = v[0] as usize;
        s.states.push(v[1..1 + len].to_vec());
        v = &v[1 + len..];
        s.rng_positions.push(((v[0] as u64) << 32) | v[1] as u64);
        s.elapsed.push(v[2] as u32);
        s.needs_reset.push(v[3] != 0.0);
        v = &v[4..];
    }
}

impl VecEnvDyn for RankEnvs {
    fn spec(&self) -> rlrig_env::EnvSpec {
        self.local.spec()
    }
    fn num_envs(&self) -> usize {
        self.rewards.len()
    }
    fn reset(&mut self) {
        self.local.reset();
        self.gather(None)
            .expect("every rank resets the same way, none fails");
    }
    fn reseed(&mut self, seed: u64) {
        self.local.reseed(seed);
        self.gather(None)
            .expect("every rank reseeds the same way, none fails");
    }
    fn step(&mut self, actions: ActionBuf<'_>) -> Result<(), EnvError> {
        let (n, mine) = (self.num_envs(), self.mine());
        let local = match actions {
            ActionBuf::Discrete(a) if a.len() == n => ActionBuf::Discrete(&a[mine]),
            ActionBuf::Continuous(a) if a.len() % n == 0 => {
                let dim = a.len() / n;
                ActionBuf::Continuous(&a[mine.start * dim..mine.end * dim])
            }
            // The whole batch's shape is wrong: every rank sees it, and its local
            // step names it.
            other => other,
        };
        self.then_gather(|e| e.step(local))
    }
    fn obs(&self) -> ObsBuf<'_> {
        if self.u8_obs {
            ObsBuf::U8(&self.obs8)
        } else {
            ObsBuf::F32(&self.obs32)
        }
    }
    rlrig_env::step_results!();
    fn final_obs(&self) -> Option<ObsBuf<'_>> {
        match (self.has_final, self.u8_obs) {
            (false, _) => None,
            (true, true) => Some(ObsBuf::U8(&self.final8)),
            (true, false) => Some(ObsBuf::F32(&self.final32)),
        }
    }
    /// The whole batch's snapshot: [`VecEnvDyn::sync_snapshot`] (on every rank) must
    /// have gathered it since the envs last moved.
    fn snapshot(&self) -> VecSnapshot {
        self.snapshot
            .clone()
            .expect("RankEnvs::snapshot needs sync_snapshot on every rank first")
    }
    fn sync_snapshot(&mut self) {
        let local = self.local.snapshot();
        let packed = pack(&local);
        let lens = self.c.allgather(&[packed.len() as f64]);
        let most = lens.iter().fold(0.0f64, |m, &l| m.max(l)) as usize;
        let mut padded = packed;
        padded.resize(most, 0.0);
        let all = self.c.allgather(&padded);
        let mut full = VecSnapshot {
            states: Vec::new(),
            rng_positions: Vec::new(),
            elapsed: Vec::new(),
            needs_reset: Vec::new(),
            ..local
        };
        for (q, share) in self.shares.iter().enumerate() {
            unpack(&all[q * most..(q + 1) * most], share.len(), &mut full);
        }
        self.snapshot = Some(full);
    }
    fn restore(&mut self, snap: &VecSnapshot) -> Result<(), EnvError> {
        let n = self.num_envs();
        if snap.states.len() != n {
            // The same on every rank: no gather to wait for.
            return Err(EnvError::BadState {
                env: self.local.spec().id,
                why: format!("snapshot holds {} envs, this batch {n}", snap.states.len()),
            });
        }
        let part = snap.slice(self.mine());
        self.then_gather(|e| e.restore(&part))?;
        self.snapshot = Some(snap.clone());
        Ok(())
    }
    fn threads_used(&self) -> usize {
        self.local.threads_used()
    }
    fn reset_env(&mut self, i: usize, rng: Option<Rng>) {
        let mine = self.mine();
        if mine.contains(&i) {
            self.local.reset_env(i - mine.start, rng);
        }
        self.gather(None)
            .expect("every rank resets the same env, none fails");
    }
    fn pending_resets(&self) -> &[bool] {
        &self.pending
    }
    fn state_vec(&self, i: usize) -> Vec<f64> {
        let mine = self.mine();
        assert!(mine.contains(&i), "env {i} is stepped by another MPI rank");
        self.local.state_vec(i - mine.start)
    }
    fn set_state_vec(&mut self, i: usize, v: &[f64]) -> Result<(), EnvError> {
        let mine = self.mine();
        self.then_gather(|e| {
            if mine.contains(&i) {
                e.set_state_vec(i - mine.start, v)
            } else {
                Ok(())
            }
        })
    }
    fn render_state(&self, i: usize) -> Vec<f64> {
        let mine = self.mine();
        assert!(mine.contains(&i), "env {i} is stepped by another MPI rank");
        self.local.render_state(i - mine.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::LocalRanks;
    use rlrig_env::{AutoReset, VecConfig};

    fn envs(env: &str, share: Range<usize>) -> Box<dyn VecEnvDyn> {
        let cfg = VecConfig::new(share.len())
            .seed(9)
            .first_env(share.start as u64)
            .autoreset(AutoReset::SameStep);
        rlrig_env::make_sync(env, cfg).unwrap()
    }

    /// What a run of `steps` steps sees: observations, final observations, rewards,
    /// flags, and the snapshot at the end.
    fn run(mut e: Box<dyn VecEnvDyn>, steps: usize) -> (Vec<String>, VecSnapshot) {
        let n = e.num_envs();
        let mut seen = Vec::new();
        for t in 0..steps {
            let a: Vec<i32> = (0..n).map(|k| ((t * 7 + k * 3) % 3 % 2) as i32).collect();
            e.step(ActionBuf::Discrete(&a)).unwrap();
            // Final observations mean something for the envs that just ended only.
            let d = e.spec().obs_dim;
            let ended: Vec<String> = (0..n)
                .filter(|&k| e.terminated()[k] || e.truncated()[k])
                .map(|k| format!("{:?}", e.final_obs().map(|f| f.slice(k * d, d))))
                .collect();
            seen.push(format!(
                "{:?} {ended:?} {:?} {:?} {:?} {:?}",
                e.obs(),
                e.rewards(),
                e.terminated(),
                e.truncated(),
                e.pending_resets()
            ));
        }
        e.sync_snapshot();
        (seen, e.snapshot())
    }

    #[test]
    fn a_batch_split_over_ranks_is_the_whole_batch() {
        for (env, n) in [("CartPole-v1", 7), ("MinAtar/Breakout-v1", 5)] {
            let one = run(envs(env, 0..n), 60);
            for size in [2, 3] {
                let ranks = LocalRanks::run(size, |c| {
                    let e = RankEnvs::new(n, Arc::new(c), |s| Ok(envs(env, s))).unwrap();
                    run(Box::new(e), 60)
                });
                for got in ranks {
                    assert!(got == one, "{env}, {size} ranks");
                }
            }
        }
    }

    #[test]
    fn a_restored_split_batch_goes_on_as_the_whole_one() {
        let n = 6;
        let mut whole = envs("CartPole-v1", 0..n);
        run_some(&mut *whole);
        let snap = whole.snapshot();
        let after = run(whole, 40);
        let ranks = LocalRanks::run(2, |c| {
            let mut e = RankEnvs::new(n, Arc::new(c), |s| Ok(envs("CartPole-v1", s))).unwrap();
            e.restore(&snap).unwrap();
            assert_eq!(e.snapshot(), snap);
            run(Box::new(e), 40)
        });
        for got in ranks {
            assert!(got == after);
        }
    }

    fn run_some(e: &mut dyn VecEnvDyn) {
        for t in 0..25 {
            let a: Vec<i32> = (0..e.num_envs()).map(|k| ((t + k) % 2) as i32).collect();
            e.step(ActionBuf::Discrete(&a)).unwrap();
        }
    }

    #[test]
    fn a_bad_action_on_one_rank_is_an_error_on_every_rank() {
        let errs = LocalRanks::run(2, |c| {
            let mut e = RankEnvs::new(4, Arc::new(c), |s| Ok(envs("CartPole-v1", s))).unwrap();
            // Env 3 (rank 1's) gets an action outside Discrete(2).
            e.step(ActionBuf::Discrete(&[0, 1, 0, 5]))
                .unwrap_err()
                .to_string()
        });
        assert!(errs[1].contains("outside Discrete(2)"), "{errs:?}");
        assert!(errs[0].contains("MPI rank 1"), "{errs:?}");
    }

    #[test]
    fn too_few_envs_for_the_ranks_is_a_clear_error() {
        let c = LocalRanks::new(3).into_iter().next().unwrap();
        let err = RankEnvs::new(2, Arc::new(c), |s| Ok(envs("CartPole-v1", s)))
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("num_envs = 2 cannot be split over 3")
        );
    }
}
