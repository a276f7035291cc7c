//! Several processes (MPI ranks) sharing one training pass. The split is deterministic:
//! work is divided by a rule that depends on the pass's shape and the rank count only,
//! and what the ranks computed is gathered whole, so that every rank adds it up in the
//! same fixed order as a single process would. Results equal a one-process run's, bit
//! for bit, with any number of ranks ([`crate::backend::Native::collective`] splits a
//! training pass's row chunks; the learners of `rlrig-learn` split members and envs the
//! same way).

use std::sync::{Arc, Barrier, Mutex};

/// The ranks of a run. Every rank makes the same collective calls in the same order.
pub trait Collective: Send + Sync {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Every rank's `local` (the same length on all), concatenated in rank order, into
    /// `out` (`local.len() x size` long): buffers a caller keeps across calls.
    fn allgather_into(&self, local: &[f64], out: &mut [f64]);
    /// [`Collective::allgather_into`] of `f32`s: gradients, observations. The default
    /// goes through `f64` (exact: every `f32` is an `f64`); MPI sends them as they are.
    fn allgather_f32_into(&self, local: &[f32], out: &mut [f32]) {
        let wide: Vec<f64> = local.iter().map(|&x| f64::from(x)).collect();
        for (o, x) in out.iter_mut().zip(self.allgather(&wide)) {
            *o = x as f32;
        }
    }
    /// [`Collective::allgather_into`] into a new vector.
    fn allgather(&self, local: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; local.len() * self.size()];
        self.allgather_into(local, &mut out);
        out
    }
    /// [`Collective::allgather_f32_into`] into a new vector.
    fn allgather_f32(&self, local: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; local.len() * self.size()];
        self.allgather_f32_into(local, &mut out);
        out
    }
}

/// Ranks as threads of one process, exchanging through shared memory: what the tests
/// check the data-parallel rules with, without MPI. [`LocalRanks::new`] makes one
/// handle per rank; each thread takes one.
pub struct LocalRanks {
    rank: usize,
    size: usize,
    board: Arc<Mutex<Vec<Vec<f64>>>>,
    barrier: Arc<Barrier>,
}

impl LocalRanks {
    /// Handles for `size` ranks, in rank order.
    pub fn new(size: usize) -> Vec<LocalRanks> {
        let board = Arc::new(Mutex::new(vec![Vec::new(); size]));
        let barrier = Arc::new(Barrier::new(size));
        (0..size)
            .map(|rank| LocalRanks {
                rank,
                size,
                board: board.clone(),
                barrier: barrier.clone(),
            })
            .collect()
    }

    /// Runs `f` on `size` ranks, each on its own thread, and returns their results in
    /// rank order (a rank's panic is re-raised here).
    pub fn run<T: Send>(size: usize, f: impl Fn(LocalRanks) -> T + Sync) -> Vec<T> {
        std::thread::scope(|s| {
            let f = &f;
            let handles: Vec<_> = LocalRanks::new(size)
                .into_iter()
                .map(|c| s.spawn(move || f(c)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    }
}

impl Collective for LocalRanks {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allgather_into(&self, local: &[f64], out: &mut [f64]) {
        let lock = || self.board.lock().unwrap_or_else(|e| e.into_inner());
        lock()[self.rank] = local.to_vec();
        self.barrier.wait();
        for (dst, src) in out.chunks_exact_mut(local.len().max(1)).zip(lock().iter()) {
            dst.copy_from_slice(src);
        }
        // Nobody writes the next round before everyone has read this one.
        self.barrier.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_ranks_gather_in_rank_order() {
        let results = LocalRanks::run(3, |c| {
            let r = c.rank() as f32;
            let a = c.allgather_f32(&[r, r + 0.5]);
            let b = c.allgather(&[10.0 * r as f64]);
            (c.size(), a, b)
        });
        for (size, a, b) in results {
            assert_eq!(size, 3);
            assert_eq!(a, vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
            assert_eq!(b, vec![0.0, 10.0, 20.0]);
        }
    }
}
