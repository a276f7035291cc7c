//! Precomputed uniformly random actions, for benchmarks and baselines: a table of
//! `rows` actions drawn once, so timed loops measure stepping, not sampling.

use crate::env::ActionBuf;
use crate::rng::{Purpose, Rng};
use crate::space::Space;

/// `rows` random actions of one space (discrete indices, or Box vectors drawn uniformly
/// within the bounds), read back as [`ActionBuf`] slices.
pub struct RandomActions {
    discrete: Vec<i32>,
    continuous: Vec<f32>,
    dim: usize,
}

impl RandomActions {
    /// Draws from the stream `(seed, Bench, 0)`.
    pub fn new(space: &Space, rows: usize, seed: u64) -> RandomActions {
        let mut rng = Rng::stream(seed, Purpose::Bench, 0);
        match space {
            Space::Discrete { n } => RandomActions {
                discrete: (0..rows).map(|_| rng.below(*n) as i32).collect(),
                continuous: Vec::new(),
                dim: 1,
            },
            Space::Box { low, high, .. } => {
                let d = low.len();
                RandomActions {
                    discrete: Vec::new(),
                    continuous: (0..rows * d)
                        .map(|k| rng.uniform(f64::from(low[k % d]), f64::from(high[k % d])) as f32)
                        .collect(),
                    dim: d,
                }
            }
        }
    }

    /// `count` actions starting at row `row`.
    pub fn slice(&self, row: usize, count: usize) -> ActionBuf<'_> {
        if self.continuous.is_empty() {
            ActionBuf::Discrete(&self.discrete[row..row + count])
        } else {
            ActionBuf::Continuous(&self.continuous[row * self.dim..(row + count) * self.dim])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_lie_in_their_space() {
        let d = RandomActions::new(&Space::Discrete { n: 3 }, 100, 1);
        let ActionBuf::Discrete(a) = d.slice(0, 100) else {
            panic!("discrete")
        };
        assert!(a.iter().all(|&x| (0..3).contains(&x)));
        assert!((0..3).all(|k| a.contains(&k)));
        let b = RandomActions::new(&Space::box1(vec![-2.0, 0.0], vec![2.0, 1.0]), 50, 1);
        let ActionBuf::Continuous(c) = b.slice(10, 5) else {
            panic!("continuous")
        };
        assert_eq!(c.len(), 10);
        assert!(
            c.chunks(2)
                .all(|p| (-2.0..2.0).contains(&p[0]) && (0.0..1.0).contains(&p[1]))
        );
    }
}
