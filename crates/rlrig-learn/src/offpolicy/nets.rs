//! The actor and critics of DDPG/TD3/SAC, SAC's tanh-squashed Gaussian sample, and the
//! greedy policy `eval` and `play` load.

use super::*;
use crate::LearnError;

/// The networks: actor (DDPG/TD3: deterministic, tanh-squashed; SAC: mean and log-std
/// heads in one output layer) and one or two critics over `[obs, action]`.
#[derive(Clone, Debug)]
pub struct Nets {
    pub algo: Algo,
    pub actor: Mlp,
    pub q1: Mlp,
    pub q2: Mlp,
    pub actor_params: Vec<f32>,
    pub critic_params: Vec<f32>,
    pub obs_dim: usize,
    pub act_dim: usize,
    pub scale: Vec<f32>,
    pub bias: Vec<f32>,
    pub low: Vec<f32>,
    pub high: Vec<f32>,
}

pub(super) const LOG_STD_MIN: f32 = -5.0;
pub(super) const LOG_STD_MAX: f32 = 2.0;

impl Nets {
    pub fn new(cfg: &OffPolicyConfig, obs_dim: usize, action_space: &Space) -> Nets {
        let Space::Box { low, high, .. } = action_space else {
            panic!("validated: continuous actions");
        };
        let a = low.len();
        let out = if cfg.algo == Algo::Sac { 2 * a } else { a };
        let sizes = |i: usize, o: usize| {
            std::iter::once(i)
                .chain(cfg.hidden.iter().copied())
                .chain(std::iter::once(o))
                .collect::<Vec<_>>()
        };
        let actor = Mlp::with_activation(&sizes(obs_dim, out), 0, Activation::Relu);
        let q1 = Mlp::with_activation(&sizes(obs_dim + a, 1), 0, Activation::Relu);
        let q2 = Mlp::with_activation(&sizes(obs_dim + a, 1), q1.end(), Activation::Relu);
        let mut rng = Rng::stream(cfg.seed, Purpose::Init, 0);
        let mut actor_params = vec![0.0; actor.num_params()];
        actor.init_torch_default(&mut actor_params, &mut rng);
        let n_critic = if cfg.algo.twin_critics() {
            q2.end()
        } else {
            q1.end()
        };
        let mut critic_params = vec![0.0; n_critic];
        q1.init_torch_default(&mut critic_params, &mut rng);
        if cfg.algo.twin_critics() {
            q2.init_torch_default(&mut critic_params, &mut rng);
        }
        Nets {
            algo: cfg.algo,
            actor,
            q1,
            q2,
            actor_params,
            critic_params,
            obs_dim,
            act_dim: a,
            scale: low.iter().zip(high).map(|(l, h)| (h - l) / 2.0).collect(),
            bias: low.iter().zip(high).map(|(l, h)| (h + l) / 2.0).collect(),
            low: low.clone(),
            high: high.clone(),
        }
    }

    /// The greedy policy of these networks.
    pub fn into_greedy(self) -> NetsGreedy {
        NetsGreedy {
            nets: self,
            cache: MlpCache::default(),
            actions: Vec::new(),
        }
    }

    /// Greedy actions for `n` observations into `out` (`n x act_dim`): the deterministic
    /// actor, or SAC's squashed mean.
    pub fn greedy(&self, obs: &[f32], n: usize, cache: &mut MlpCache, out: &mut [f32]) {
        let a = self.act_dim;
        let width = self.actor.output_dim();
        let raw = self.actor.forward(&self.actor_params, obs, n, cache);
        for b in 0..n {
            for j in 0..a {
                out[b * a + j] = crate::nn::tanh(raw[b * width + j]) * self.scale[j] + self.bias[j];
            }
        }
    }
}

/// One SAC policy sample per row: the squashed action and everything the backward pass
/// needs.
#[derive(Default, Clone, Debug)]
pub(super) struct SacSample {
    pub(super) eps: Vec<f32>,
    /// tanh of the raw log-std head.
    pub(super) t: Vec<f32>,
    pub(super) std: Vec<f32>,
    /// tanh(mean + std * eps).
    pub(super) y: Vec<f32>,
    pub(super) action: Vec<f32>,
    pub(super) logp: Vec<f32>,
}

impl SacSample {
    /// Samples from the actor's output `raw` (`n x 2a`) with noise from `rng`.
    pub(super) fn draw(&mut self, nets: &Nets, raw: &[f32], n: usize, rng: &mut Rng) {
        let a = nets.act_dim;
        for v in [
            &mut self.eps,
            &mut self.t,
            &mut self.std,
            &mut self.y,
            &mut self.action,
        ] {
            v.resize(n * a, 0.0);
        }
        self.logp.resize(n, 0.0);
        for b in 0..n {
            let mut lp = 0.0f32;
            for j in 0..a {
                let k = b * a + j;
                let mean = raw[b * 2 * a + j];
                let t = crate::nn::tanh(raw[b * 2 * a + a + j]);
                let log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (t + 1.0);
                let std = log_std.exp();
                let eps = normal(rng) as f32;
                let y = crate::nn::tanh(mean + std * eps);
                self.eps[k] = eps;
                self.t[k] = t;
                self.std[k] = std;
                self.y[k] = y;
                self.action[k] = y * nets.scale[j] + nets.bias[j];
                // The change of variables through tanh and the action scale.
                lp += crate::dist::gaussian_log_density(eps, log_std)
                    - (nets.scale[j] * (1.0 - y * y) + 1e-6).ln();
            }
            self.logp[b] = lp;
        }
    }
}

/// Greedy evaluation of `nets` (deterministic actor / SAC's mean) on `env`.
pub fn evaluate(
    nets: &Nets,
    env: &str,
    args: &crate::EnvArgs,
    episodes: usize,
    seed: u64,
) -> crate::eval::Episodes {
    crate::eval::run_episodes(&mut nets.clone().into_greedy(), env, args, episodes, seed)
}

/// The greedy policy of [`Nets`]: the deterministic actor, or SAC's squashed mean.
pub struct NetsGreedy {
    pub(super) nets: Nets,
    pub(super) cache: MlpCache,
    pub(super) actions: Vec<f32>,
}

impl crate::eval::Greedy for NetsGreedy {
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_> {
        self.actions.resize(n * self.nets.act_dim, 0.0);
        self.nets.greedy(obs, n, &mut self.cache, &mut self.actions);
        ActionBuf::Continuous(&self.actions)
    }

    fn export(&self) -> Result<crate::export::PolicyExport, LearnError> {
        let nets = &self.nets;
        // SAC's actor also outputs log-stds after the means; its greedy action is the
        // squashed mean, the first act_dim outputs.
        let action = format!(
            "tanh(actor(obs)[:, :{}]) * action_scale + action_bias",
            nets.act_dim
        );
        let mut e = crate::export::PolicyExport::new(nets.algo.name(), &action);
        e.mlp("actor", &nets.actor, &nets.actor_params);
        e.vector("action_scale", nets.scale.clone());
        e.vector("action_bias", nets.bias.clone());
        Ok(e)
    }
}
