//! Counter-based random streams addressed by (run seed, purpose, index).
//!
//! Every random draw in rlrig comes from a [`Rng`] opened with [`Rng::stream`]:
//! env `k`'s resets use `Rng::stream(seed, Purpose::Env, k)`. A stream is a pure
//! function of its address, so which thread steps env `k`, and in which order,
//! never changes what env `k` sees. That is what makes `--threads 1` and
//! `--threads 16` bit-identical.

use rand_philox::{Philox, splitmix64};

/// What a stream is for. Distinct purposes give independent streams for the same
/// seed and index, so adding a new consumer never shifts an existing one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum Purpose {
    /// Environment resets and in-step noise, indexed by env id.
    Env = 1,
    /// Action sampling by a policy, indexed by env id.
    Policy = 2,
    /// Benchmark action generators and tests.
    Bench = 3,
    /// Free for callers (tests, tools): indexed however they like.
    User = 4,
    /// Learner-side draws (minibatch shuffles), indexed by update.
    Learner = 5,
    /// Parameter initialisation.
    Init = 6,
}

/// One random stream: Philox4x32-10 over a key derived from (seed, purpose) and a
/// 64-bit stream index, plus the count of words drawn so far, so that a checkpoint
/// can store a stream's position and [`Rng::at`] can restore it exactly.
#[derive(Clone, Debug)]
pub struct Rng {
    philox: Philox,
    drawn: u64,
}

impl Rng {
    /// The stream for `(seed, purpose, index)`.
    pub fn stream(seed: u64, purpose: Purpose, index: u64) -> Rng {
        // Mix the purpose into the seed before Philox's own splitmix so that
        // (seed, purpose) pairs map to well-separated keys.
        let key = splitmix64(seed ^ (purpose as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        Rng {
            philox: Philox::from_u64_seed_stream(key, index),
            drawn: 0,
        }
    }

    /// The stream for `(seed, purpose, index)` after `position` words were drawn.
    pub fn at(seed: u64, purpose: Purpose, index: u64, position: u64) -> Rng {
        let mut r = Rng::stream(seed, purpose, index);
        // Streams start at block `index << 64`; jump whole 4-word blocks, then draw the rest.
        r.philox
            .seek((u128::from(index) << 64) + u128::from(position / 4));
        for _ in 0..position % 4 {
            r.philox.next_u32();
        }
        r.drawn = position;
        r
    }

    /// Words drawn from this stream so far.
    pub fn position(&self) -> u64 {
        self.drawn
    }

    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.drawn += 1;
        self.philox.next_u32()
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.drawn += 2;
        self.philox.next_u64()
    }

    /// Uniform in `[0, 1)` with 53 random bits, as numpy's `random()`.
    #[inline]
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// Uniform in `[low, high)`, computed as numpy's `uniform`: `low + (high - low) * u`.
    #[inline]
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit_f64()
    }

    /// Uniform integer in `0..n` without modulo bias. `n` must be at least 1.
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        // Lemire's method, as rand_philox's `bounded`, through `next_u32` so the
        // position stays counted.
        let n64 = u64::from(n);
        loop {
            let m = u64::from(self.next_u32()) * n64;
            let lo = m as u32;
            if lo >= n || lo >= (1u64 << 32).wrapping_rem(n64) as u32 {
                return (m >> 32) as u32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_pure_functions_of_their_address() {
        let mut a = Rng::stream(7, Purpose::Env, 3);
        let mut b = Rng::stream(7, Purpose::Env, 3);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn a_stream_resumes_exactly_from_its_position() {
        for skip in [0u64, 1, 3, 4, 5, 17] {
            let mut a = Rng::stream(9, Purpose::Env, 12);
            for _ in 0..skip {
                a.next_u32();
            }
            let mut b = Rng::at(9, Purpose::Env, 12, a.position());
            for _ in 0..10 {
                assert_eq!(a.next_u32(), b.next_u32(), "after {skip}");
            }
            assert_eq!(a.position(), b.position());
        }
    }

    #[test]
    fn different_addresses_differ() {
        let first = |s, p, i| Rng::stream(s, p, i).next_u64();
        let base = first(7, Purpose::Env, 3);
        assert_ne!(base, first(8, Purpose::Env, 3));
        assert_ne!(base, first(7, Purpose::Policy, 3));
        assert_ne!(base, first(7, Purpose::Env, 4));
    }

    #[test]
    fn uniform_stays_in_range_and_looks_uniform() {
        let mut r = Rng::stream(1, Purpose::User, 0);
        let n = 20_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.uniform(-0.05, 0.05);
            assert!((-0.05..0.05).contains(&x));
            sum += x;
        }
        // Mean of U(-0.05, 0.05) is 0 with sd 0.0289/sqrt(n) ≈ 2e-4.
        assert!((sum / n as f64).abs() < 1e-3);
        let mut counts = [0u32; 3];
        for _ in 0..3000 {
            counts[r.below(3) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
    }
}
