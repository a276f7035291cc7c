//! A preallocated ring replay buffer for off-policy learning: struct of arrays (one
//! contiguous `f32` array per field), uniform sampling into a reusable batch, no
//! allocation after construction.
//!
//! Determinism: [`ReplayBuffer::sample`] draws indices from the stream it is given; the
//! off-policy learners pass `(seed, Learner, update index)`, so a batch depends only on
//! the seed, the update number and the buffer's content.

use crate::LearnError;
use crate::run::TensorSource;
use rlrig_env::Rng;

/// Transitions `(obs, action, reward, next_obs, terminated)`. `next_obs` is the
/// observation the step ended in (the final observation when an episode ended), and
/// `terminated` excludes time-limit truncation, so truncated episodes bootstrap.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayBuffer {
    capacity: usize,
    obs_dim: usize,
    act_dim: usize,
    /// Next row to write.
    pos: usize,
    /// Rows filled (≤ capacity).
    len: usize,
    obs: Vec<f32>,
    next_obs: Vec<f32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    terminated: Vec<f32>,
}

/// A sampled minibatch, reused across calls.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub size: usize,
    pub obs: Vec<f32>,
    pub next_obs: Vec<f32>,
    pub actions: Vec<f32>,
    pub rewards: Vec<f32>,
    /// 1.0 where the episode terminated (no bootstrap), else 0.0.
    pub terminated: Vec<f32>,
}

/// The buffer's content for a checkpoint: the filled rows in storage order plus the
/// write position.
pub struct BufferParts<'a> {
    pub pos: usize,
    pub len: usize,
    pub fields: [(&'static str, &'a [f32]); 5],
}

impl ReplayBuffer {
    pub fn new(capacity: usize, obs_dim: usize, act_dim: usize) -> ReplayBuffer {
        assert!(capacity > 0, "replay buffer capacity must be at least 1");
        ReplayBuffer {
            capacity,
            obs_dim,
            act_dim,
            pos: 0,
            len: 0,
            obs: vec![0.0; capacity * obs_dim],
            next_obs: vec![0.0; capacity * obs_dim],
            actions: vec![0.0; capacity * act_dim],
            rewards: vec![0.0; capacity],
            terminated: vec![0.0; capacity],
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends one transition, overwriting the oldest when full.
    pub fn push(
        &mut self,
        obs: &[f32],
        action: &[f32],
        reward: f32,
        next_obs: &[f32],
        terminated: bool,
    ) {
        let (d, a, i) = (self.obs_dim, self.act_dim, self.pos);
        assert_eq!(obs.len(), d, "ReplayBuffer::push: observation size");
        assert_eq!(
            next_obs.len(),
            d,
            "ReplayBuffer::push: next observation size"
        );
        assert_eq!(action.len(), a, "ReplayBuffer::push: action size");
        self.obs[i * d..(i + 1) * d].copy_from_slice(obs);
        self.next_obs[i * d..(i + 1) * d].copy_from_slice(next_obs);
        self.actions[i * a..(i + 1) * a].copy_from_slice(action);
        self.rewards[i] = reward;
        self.terminated[i] = if terminated { 1.0 } else { 0.0 };
        self.pos = (i + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
    }

    /// Fills `out` with `size` transitions drawn uniformly (with replacement).
    pub fn sample(&self, size: usize, rng: &mut Rng, out: &mut Batch) {
        assert!(!self.is_empty(), "ReplayBuffer::sample on an empty buffer");
        let (d, a) = (self.obs_dim, self.act_dim);
        out.size = size;
        out.obs.resize(size * d, 0.0);
        out.next_obs.resize(size * d, 0.0);
        out.actions.resize(size * a, 0.0);
        out.rewards.resize(size, 0.0);
        out.terminated.resize(size, 0.0);
        for b in 0..size {
            let i = rng.below(self.len as u32) as usize;
            out.obs[b * d..(b + 1) * d].copy_from_slice(&self.obs[i * d..(i + 1) * d]);
            out.next_obs[b * d..(b + 1) * d].copy_from_slice(&self.next_obs[i * d..(i + 1) * d]);
            out.actions[b * a..(b + 1) * a].copy_from_slice(&self.actions[i * a..(i + 1) * a]);
            out.rewards[b] = self.rewards[i];
            out.terminated[b] = self.terminated[i];
        }
    }

    /// The filled rows, for a checkpoint.
    pub fn parts(&self) -> BufferParts<'_> {
        let n = self.len;
        BufferParts {
            pos: self.pos,
            len: n,
            fields: [
                ("buffer.obs", &self.obs[..n * self.obs_dim]),
                ("buffer.next_obs", &self.next_obs[..n * self.obs_dim]),
                ("buffer.actions", &self.actions[..n * self.act_dim]),
                ("buffer.rewards", &self.rewards[..n]),
                ("buffer.terminated", &self.terminated[..n]),
            ],
        }
    }

    /// Restores rows written by [`ReplayBuffer::parts`]; `get` returns a field by name.
    pub fn restore(
        &mut self,
        pos: usize,
        len: usize,
        mut get: impl TensorSource,
    ) -> Result<(), LearnError> {
        if len > self.capacity || pos >= self.capacity || (len < self.capacity && pos != len) {
            return Err(LearnError::Mismatch(format!(
                "replay buffer: {len} rows at position {pos} do not fit a buffer of {}",
                self.capacity
            )));
        }
        let (d, a) = (self.obs_dim, self.act_dim);
        let fields: [(&str, &mut Vec<f32>, usize); 5] = [
            ("buffer.obs", &mut self.obs, d),
            ("buffer.next_obs", &mut self.next_obs, d),
            ("buffer.actions", &mut self.actions, a),
            ("buffer.rewards", &mut self.rewards, 1),
            ("buffer.terminated", &mut self.terminated, 1),
        ];
        for (name, dst, width) in fields {
            let v = crate::run::take_tensor(&mut get, name, len * width)
                .map_err(|e| LearnError::Mismatch(format!("replay buffer: {e}")))?;
            dst[..v.len()].copy_from_slice(&v);
        }
        self.pos = pos;
        self.len = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlrig_env::Purpose;

    fn filled(cap: usize, n: usize) -> ReplayBuffer {
        let mut b = ReplayBuffer::new(cap, 2, 1);
        for t in 0..n {
            let x = t as f32;
            b.push(
                &[x, -x],
                &[0.5 * x],
                x,
                &[x + 1.0, -x - 1.0],
                t.is_multiple_of(3),
            );
        }
        b
    }

    #[test]
    fn ring_overwrites_oldest_and_keeps_rows_aligned() {
        let b = filled(5, 12);
        assert_eq!(b.len(), 5);
        let mut rng = Rng::stream(1, Purpose::User, 0);
        let mut batch = Batch::default();
        b.sample(200, &mut rng, &mut batch);
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..200 {
            let t = batch.rewards[k];
            // Only the newest five transitions (7..=11) survive.
            assert!((7.0..=11.0).contains(&t), "stale row {t}");
            assert_eq!(batch.obs[2 * k], t);
            assert_eq!(batch.obs[2 * k + 1], -t);
            assert_eq!(batch.next_obs[2 * k], t + 1.0);
            assert_eq!(batch.actions[k], 0.5 * t);
            let want = if (t as usize).is_multiple_of(3) {
                1.0
            } else {
                0.0
            };
            assert_eq!(batch.terminated[k], want);
            seen.insert(t as usize);
        }
        assert_eq!(seen.len(), 5, "uniform sampling reaches every row");
    }

    #[test]
    fn sampling_is_a_function_of_the_stream() {
        let b = filled(64, 50);
        let (mut x, mut y) = (Batch::default(), Batch::default());
        b.sample(32, &mut Rng::stream(9, Purpose::Learner, 4), &mut x);
        b.sample(32, &mut Rng::stream(9, Purpose::Learner, 4), &mut y);
        assert_eq!(x.rewards, y.rewards);
        b.sample(32, &mut Rng::stream(9, Purpose::Learner, 5), &mut y);
        assert_ne!(x.rewards, y.rewards);
    }

    #[test]
    fn parts_and_restore_round_trip_full_and_partial() {
        for n in [3, 12] {
            let b = filled(5, n);
            let p = b.parts();
            let map: std::collections::HashMap<&str, Vec<f32>> =
                p.fields.iter().map(|(k, v)| (*k, v.to_vec())).collect();
            let mut c = ReplayBuffer::new(5, 2, 1);
            c.restore(p.pos, p.len, |k| map.get(k).cloned()).unwrap();
            assert_eq!(b, c);
        }
        let mut c = ReplayBuffer::new(5, 2, 1);
        let err = c.restore(1, 9, |_| None).unwrap_err();
        assert!(matches!(err, LearnError::Mismatch(_)), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("do not fit"), "{err}");
        let err = c
            .restore(2, 2, |_| Some(vec![0.0; 3]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("'buffer.obs' has 3 values"), "{err}");
    }
}
