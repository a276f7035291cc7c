//! The evolved policy: an MLP whose outputs are an arg-max or squashed to the action
//! bounds, its episodes (fitness) and the greedy policy `eval` and `play` load.

use super::*;
use crate::LearnError;

/// An evolved policy with its parameters, acting greedily (borrowed while a run
/// scores its members, owned when loaded from a checkpoint).
pub struct EvoGreedy<'a> {
    pub(super) policy: Cow<'a, EvoPolicy>,
    pub(super) params: Cow<'a, [f32]>,
    pub(super) cache: MlpCache,
    pub(super) ai: Vec<i32>,
    pub(super) af: Vec<f32>,
}

impl crate::eval::Greedy for EvoGreedy<'_> {
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_> {
        self.policy.act(
            &self.params,
            obs,
            n,
            &mut self.cache,
            &mut self.ai,
            &mut self.af,
        )
    }

    fn export(&self) -> Result<crate::export::PolicyExport, LearnError> {
        let mut e = match &self.policy.space {
            Space::Discrete { .. } => {
                crate::export::PolicyExport::new("evolution", "argmax(policy(obs), -1)")
            }
            Space::Box { low, high, .. } => {
                let mut e = crate::export::PolicyExport::new(
                    "evolution",
                    "tanh(policy(obs)) * (action_high - action_low) / 2 + (action_high + action_low) / 2",
                );
                e.vector("action_low", low.clone());
                e.vector("action_high", high.clone());
                e
            }
        };
        e.mlp("policy", &self.policy.mlp, &self.params);
        Ok(e)
    }
}

/// A policy's shape and action decoding.
#[derive(Clone, Debug)]
pub struct EvoPolicy {
    pub mlp: Mlp,
    pub(super) space: Space,
}

impl EvoPolicy {
    pub fn new(cfg: &EvoConfig) -> Result<EvoPolicy, LearnError> {
        let spec = rlrig_env::spec(&cfg.env)?;
        let out = match &spec.action_space {
            Space::Discrete { n } => *n as usize,
            Space::Box { low, .. } => low.len(),
        };
        let sizes: Vec<usize> = std::iter::once(spec.obs_dim)
            .chain(cfg.hidden.iter().copied())
            .chain(std::iter::once(out))
            .collect();
        Ok(EvoPolicy {
            mlp: Mlp::new(&sizes, 0),
            space: spec.action_space,
        })
    }

    pub fn num_params(&self) -> usize {
        self.mlp.num_params()
    }

    /// The greedy policy with parameters `params`.
    pub fn greedy(self, params: Vec<f32>) -> EvoGreedy<'static> {
        EvoGreedy {
            policy: Cow::Owned(self),
            params: Cow::Owned(params),
            cache: MlpCache::default(),
            ai: Vec::new(),
            af: Vec::new(),
        }
    }

    /// The policy's actions for `n` observations (arg-max, or squashed to the bounds).
    pub fn act<'a>(
        &self,
        params: &[f32],
        obs: &[f32],
        n: usize,
        cache: &mut MlpCache,
        ai: &'a mut Vec<i32>,
        af: &'a mut Vec<f32>,
    ) -> ActionBuf<'a> {
        let out = self.mlp.forward(params, obs, n, cache);
        match &self.space {
            Space::Discrete { n: k } => {
                crate::eval::argmax_rows(out, n, *k as usize, ai);
                ActionBuf::Discrete(ai)
            }
            Space::Box { low, high, .. } => {
                let d = low.len();
                af.clear();
                af.extend(out.iter().enumerate().map(|(j, &x)| {
                    let (l, h) = (low[j % d], high[j % d]);
                    crate::nn::tanh(x) * (h - l) / 2.0 + (h + l) / 2.0
                }));
                ActionBuf::Continuous(af)
            }
        }
    }

    /// The episodes of `params` one at a time (one env per episode, the `k`th seeded
    /// with `seed + k`), as `rlrig eval` and the final evaluation score the deployed
    /// policy: [`EvoPolicy::run`] steps a batch, this keeps the spread.
    pub fn episodes(
        &self,
        env: &str,
        args: &crate::EnvArgs,
        params: &[f32],
        episodes: usize,
        seed: u64,
    ) -> crate::eval::Episodes {
        let mut out = crate::eval::Episodes::default();
        for k in 0..episodes {
            out.extend(self.run(env, args, params, 1, seed.wrapping_add(k as u64)));
        }
        out
    }

    /// `episodes` episodes of `params` stepped as one batch whose envs are seeded by
    /// `seed`: a member's fitness is their mean return.
    pub fn run(
        &self,
        env: &str,
        args: &crate::EnvArgs,
        params: &[f32],
        episodes: usize,
        seed: u64,
    ) -> crate::eval::Episodes {
        let mut g = EvoGreedy {
            policy: Cow::Borrowed(self),
            params: Cow::Borrowed(params),
            cache: MlpCache::default(),
            ai: Vec::new(),
            af: Vec::new(),
        };
        crate::eval::run_episodes(&mut g, env, args, episodes, seed)
    }
}

impl EvoPolicy {
    /// Whether parameter `j` is a bias.
    pub fn is_bias(&self, j: usize) -> bool {
        self.mlp.is_bias(j)
    }
}
