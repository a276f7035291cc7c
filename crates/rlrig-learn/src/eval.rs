//! Greedy evaluation: one policy interface ([`Greedy`]) that every algorithm's acting
//! network implements, and one loop ([`greedy_returns`]) that `eval`, the end-of-run
//! evaluation and `play` step it through.

use rlrig_env::{ActionBuf, AutoReset, make_sync};

/// A policy that acts greedily (no exploration): arg-max of a categorical head or a
/// Q-network, a deterministic actor, a Gaussian's mean.
pub trait Greedy: Send {
    /// Actions for `n` observations (`n x obs_dim`, row-major), valid for the env.
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_>;
    /// The acting network as named tensors (`rlrig.load(run).export(...)` in Python),
    /// or why this policy has no export yet.
    fn export(&self) -> Result<crate::export::PolicyExport, String>;
}

/// Index of the largest value of each of the `n` rows of `k` values in `out` into `ai`
/// (ties: the first, as `torch.argmax`).
pub fn argmax_rows(out: &[f32], n: usize, k: usize, ai: &mut Vec<i32>) {
    ai.clear();
    ai.extend((0..n).map(|e| {
        let row = &out[e * k..(e + 1) * k];
        (0..k).fold(0, |b, j| if row[j] > row[b] { j } else { b }) as i32
    }));
}

/// Undiscounted returns of `episodes` greedy episodes of `env` (stepped as one batch,
/// seeded by `seed`, each capped at [`crate::MAX_EVAL_STEPS`]).
pub fn greedy_returns(
    policy: &mut dyn Greedy,
    env: &str,
    args: &crate::EnvArgs,
    episodes: usize,
    seed: u64,
) -> Vec<f64> {
    let episodes = episodes.max(1);
    let mut env = make_sync(
        env,
        crate::env_config(episodes, args)
            .seed(seed)
            .autoreset(AutoReset::NextStep)
            .episode_cap(crate::MAX_EVAL_STEPS),
    )
    .expect("the config was validated");
    let mut returns = vec![0.0; episodes];
    let mut finished = vec![false; episodes];
    while !finished.iter().all(|&f| f) {
        let buf = policy.act(env.obs(), episodes);
        env.step(buf).expect("the policy only emits valid actions");
        for k in 0..episodes {
            if !finished[k] {
                returns[k] += env.rewards()[k];
                finished[k] = env.terminated()[k] || env.truncated()[k];
            }
        }
    }
    returns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_values() {
        let mut ai = Vec::new();
        argmax_rows(&[1.0, 3.0, 3.0, -1.0, -2.0, -0.5], 2, 3, &mut ai);
        assert_eq!(ai, vec![1, 2]);
    }

    /// A policy that always pushes right keeps CartPole up for a few steps only: the
    /// loop ends every episode and sums its rewards (one per step).
    #[test]
    fn every_episode_ends_and_returns_count_steps() {
        struct Right(Vec<i32>);
        impl Greedy for Right {
            fn act(&mut self, _: &[f32], n: usize) -> ActionBuf<'_> {
                self.0.resize(n, 1);
                ActionBuf::Discrete(&self.0)
            }
            fn export(&self) -> Result<crate::export::PolicyExport, String> {
                Err("a test policy".into())
            }
        }
        let r = greedy_returns(
            &mut Right(Vec::new()),
            "CartPole-v1",
            &crate::EnvArgs::new(),
            5,
            3,
        );
        assert_eq!(r.len(), 5);
        assert!(
            r.iter()
                .all(|&x| (8.0..30.0).contains(&x) && x.fract() == 0.0),
            "{r:?}"
        );
    }
}
