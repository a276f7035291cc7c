//! Evaluation: one policy interface ([`Greedy`]) that every algorithm's acting network
//! and the baselines implement, one loop ([`run_episodes`]) that `eval`, the end-of-run
//! evaluation and ES/GA fitness step it through, and one summary ([`EvalSummary`]).

use crate::LearnError;
use rlrig_env::{ActionBuf, AutoReset, Purpose, Rng, Space, make_sync};
use serde::Serialize;

/// A policy as evaluated: greedy for a learned one (arg-max of a categorical head or a
/// Q-network, a deterministic actor, a Gaussian's mean), or a baseline ([`baseline`]).
pub trait Greedy: Send {
    /// Actions for `n` observations (`n x obs_dim`, row-major), valid for the env.
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_>;
    /// The acting network as named tensors (`rlrig.load(run).export(...)` in Python),
    /// or why this policy has no export yet.
    fn export(&self) -> Result<crate::export::PolicyExport, LearnError>;
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

/// The first episode of each of a batch of envs: undiscounted return and length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Episodes {
    pub returns: Vec<f64>,
    pub lengths: Vec<u64>,
}

impl Episodes {
    /// The episodes of `self`, then those of `other`.
    pub fn extend(&mut self, other: Episodes) {
        self.returns.extend(other.returns);
        self.lengths.extend(other.lengths);
    }

    pub fn mean_return(&self) -> f64 {
        self.returns.iter().sum::<f64>() / self.returns.len().max(1) as f64
    }
}

/// One episode in each of `episodes` envs of `env` (stepped as one batch, seeded by
/// `seed`, each capped at [`crate::MAX_EVAL_STEPS`]), acting with `policy`.
pub fn run_episodes(
    policy: &mut dyn Greedy,
    env: &str,
    args: &crate::EnvArgs,
    episodes: usize,
    seed: u64,
) -> Episodes {
    let episodes = episodes.max(1);
    let mut env = make_sync(
        env,
        crate::env_config(episodes, args)
            .seed(seed)
            .autoreset(AutoReset::NextStep)
            .episode_cap(crate::MAX_EVAL_STEPS),
    )
    .expect("the config was validated");
    let mut out = Episodes {
        returns: vec![0.0; episodes],
        lengths: vec![0; episodes],
    };
    let mut finished = vec![false; episodes];
    let mut scratch = Vec::new();
    while !finished.iter().all(|&f| f) {
        let buf = policy.act(env.obs().f32_in(&mut scratch), episodes);
        env.step(buf).expect("the policy only emits valid actions");
        for k in 0..episodes {
            if !finished[k] {
                out.returns[k] += env.rewards()[k];
                out.lengths[k] += 1;
                finished[k] = env.terminated()[k] || env.truncated()[k];
            }
        }
    }
    out
}

/// Summary statistics of evaluation episodes (`eval.json`, `rlrig eval --json`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EvalSummary {
    pub episodes: usize,
    pub mean_return: f64,
    pub std_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    pub mean_length: f64,
    pub std_length: f64,
    pub seed: u64,
}

/// Mean and (population) standard deviation.
fn mean_std(v: impl ExactSizeIterator<Item = f64> + Clone) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.clone().sum::<f64>() / n;
    (
        mean,
        (v.map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt(),
    )
}

impl EvalSummary {
    pub fn of(e: &Episodes, seed: u64) -> EvalSummary {
        let (mean_return, std_return) = mean_std(e.returns.iter().copied());
        let (mean_length, std_length) = mean_std(e.lengths.iter().map(|&l| l as f64));
        EvalSummary {
            episodes: e.returns.len(),
            mean_return,
            std_return,
            min_return: e.returns.iter().copied().fold(f64::INFINITY, f64::min),
            max_return: e.returns.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean_length,
            std_length,
            seed,
        }
    }
}

/// The baseline policies `rlrig eval --env ID --policy NAME` compares a run against.
pub const BASELINES: [&str; 2] = ["random", "heuristic"];

/// A baseline policy for `n` envs of `env`: `random` (uniform actions, env `k`'s from
/// the stream `(seed, Policy, k)`, so reproducible at any batch size) or `heuristic`
/// (Gymnasium's reference controller, LunarLander only).
pub fn baseline(env: &str, name: &str, n: usize, seed: u64) -> Result<Box<dyn Greedy>, LearnError> {
    use rlrig_env::Env as _;
    use rlrig_env::envs::{LunarLander, LunarLanderContinuous};
    let spec = rlrig_env::spec(env)?;
    let act = Baseline {
        space: spec.action_space,
        obs_dim: spec.obs_dim,
        rngs: Vec::new(),
        ai: vec![0; n],
        af: Vec::new(),
    };
    match name {
        "random" => Ok(Box::new(Baseline {
            rngs: (0..n)
                .map(|k| Rng::stream(seed, Purpose::Policy, k as u64))
                .collect(),
            ..act
        })),
        "heuristic" if env == LunarLander::ID || env == LunarLanderContinuous::ID => {
            Ok(Box::new(act))
        }
        "heuristic" => Err(LearnError::Config(format!(
            "--policy heuristic: {env} has no reference heuristic (Gymnasium has one for {} and {}); use --policy random",
            LunarLander::ID,
            LunarLanderContinuous::ID
        ))),
        _ => Err(LearnError::Config(format!(
            "--policy {name}: unknown baseline (known: {})",
            BASELINES.join(", ")
        ))),
    }
}

/// A baseline: random when it has per-env streams, else LunarLander's heuristic.
struct Baseline {
    space: Space,
    obs_dim: usize,
    rngs: Vec<Rng>,
    ai: Vec<i32>,
    af: Vec<f32>,
}

impl Greedy for Baseline {
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_> {
        use rlrig_env::envs::lunar_lander::{heuristic_continuous, heuristic_discrete};
        let d = self.obs_dim;
        let rows = obs.chunks_exact(d).take(n);
        match (&self.space, self.rngs.is_empty()) {
            (Space::Discrete { .. }, true) => {
                for (x, o) in self.ai.iter_mut().zip(rows) {
                    *x = heuristic_discrete(o);
                }
                ActionBuf::Discrete(&self.ai)
            }
            (Space::Box { .. }, true) => {
                self.af.clear();
                for o in rows {
                    self.af.extend(heuristic_continuous(o));
                }
                ActionBuf::Continuous(&self.af)
            }
            (Space::Discrete { n: k }, false) => {
                for (x, r) in self.ai.iter_mut().zip(&mut self.rngs) {
                    *x = r.below(*k) as i32;
                }
                ActionBuf::Discrete(&self.ai)
            }
            (Space::Box { low, high, .. }, false) => {
                self.af.clear();
                for r in &mut self.rngs {
                    for (l, h) in low.iter().zip(high) {
                        self.af.push(r.uniform(f64::from(*l), f64::from(*h)) as f32);
                    }
                }
                ActionBuf::Continuous(&self.af)
            }
        }
    }

    fn export(&self) -> Result<crate::export::PolicyExport, LearnError> {
        Err(LearnError::Unsupported(
            "a baseline policy has no network to export".into(),
        ))
    }
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
            fn export(&self) -> Result<crate::export::PolicyExport, LearnError> {
                Err(LearnError::Unsupported("a test policy".into()))
            }
        }
        let e = run_episodes(
            &mut Right(Vec::new()),
            "CartPole-v1",
            &crate::EnvArgs::new(),
            5,
            3,
        );
        assert_eq!(e.returns.len(), 5);
        assert!(
            e.returns
                .iter()
                .all(|&x| (8.0..30.0).contains(&x) && x.fract() == 0.0),
            "{e:?}"
        );
        // CartPole pays 1 per step: each return is its episode's length.
        let lengths: Vec<f64> = e.lengths.iter().map(|&l| l as f64).collect();
        assert_eq!(e.returns, lengths);
        let s = EvalSummary::of(&e, 3);
        assert_eq!((s.mean_return, s.std_return), (s.mean_length, s.std_length));
        assert!(s.min_return <= s.mean_return && s.mean_return <= s.max_return);
    }
}
