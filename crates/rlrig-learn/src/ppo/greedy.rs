//! Acting greedily with a trained agent: batched greedy actions, the policy
//! `eval`/`play` load, and the end-of-run evaluation.

use super::*;
use crate::LearnError;

/// What [`greedy_actions`] reuses across calls: the network's activations, the
/// normalised observations and the policy's outputs.
#[derive(Default)]
pub struct GreedyBuffers {
    pub cache: NetCache,
    pub(super) obs: Vec<f32>,
    pub(super) out: Vec<f32>,
}

/// Greedy actions (argmax / Gaussian mean, clipped) for `n` observations, into `ai`/`af`.
#[allow(clippy::too_many_arguments)]
pub fn greedy_actions<'a>(
    agent: &Agent,
    obs_rms: Option<&RunningMeanStd>,
    cfg: &PpoConfig,
    raw_obs: &[f32],
    n: usize,
    bufs: &mut GreedyBuffers,
    ai: &'a mut [i32],
    af: &'a mut [f32],
) -> ActionBuf<'a> {
    let GreedyBuffers { cache, obs, out } = bufs;
    obs.clear();
    obs.extend_from_slice(raw_obs);
    if let Some(rms) = obs_rms {
        rms.normalize(obs, cfg.clip_obs);
    }
    agent.head_on_host(Part::Policy, &agent.params, obs, n, cache, out);
    match &agent.head {
        Head::Categorical { n: k } => {
            for e in 0..n {
                let row = &out[e * k..(e + 1) * k];
                ai[e] = (0..*k).fold(0, |b, j| if row[j] > row[b] { j } else { b }) as i32;
            }
            ActionBuf::Discrete(&ai[..n])
        }
        Head::Gaussian { dim, low, high, .. } => {
            for (j, a) in af[..n * dim].iter_mut().enumerate() {
                *a = out[j].clamp(low[j % dim], high[j % dim]);
            }
            ActionBuf::Continuous(&af[..n * dim])
        }
    }
}

/// The greedy policy of a PPO/A2C/IMPALA agent: arg-max of the categorical head or
/// the Gaussian's mean clipped to the bounds, on observations normalised with the
/// run's statistics.
pub struct PpoGreedy {
    pub(super) agent: Agent,
    pub(super) obs_rms: Option<RunningMeanStd>,
    pub(super) cfg: PpoConfig,
    pub(super) bufs: GreedyBuffers,
    pub(super) ai: Vec<i32>,
    pub(super) af: Vec<f32>,
}

impl PpoGreedy {
    pub fn new(agent: Agent, obs_rms: Option<RunningMeanStd>, cfg: PpoConfig) -> PpoGreedy {
        PpoGreedy {
            agent,
            obs_rms,
            cfg,
            bufs: GreedyBuffers::default(),
            ai: Vec::new(),
            af: Vec::new(),
        }
    }
}

impl crate::eval::Greedy for PpoGreedy {
    fn act(&mut self, obs: &[f32], n: usize) -> ActionBuf<'_> {
        self.ai.resize(n, 0);
        self.af.resize(n * self.agent.action_dim(), 0.0);
        greedy_actions(
            &self.agent,
            self.obs_rms.as_ref(),
            &self.cfg,
            obs,
            n,
            &mut self.bufs,
            &mut self.ai,
            &mut self.af,
        )
    }

    fn export(&self) -> Result<crate::export::PolicyExport, LearnError> {
        let agent = &self.agent;
        // Separate networks: `actor` computes the policy outputs. One shared trunk (the
        // Nature CNN's): `net` computes the value in column 0, the policy outputs after it.
        let shared = matches!(agent.named_nets()[..], [("net", _)]);
        let actor = if shared {
            "net(obs)[:, 1:]"
        } else {
            "actor(obs)"
        };
        let mut e = match &agent.head {
            Head::Categorical { .. } => crate::export::PolicyExport::new(
                self.cfg.algo.name(),
                &format!("argmax({actor}, -1)"),
            ),
            Head::Gaussian { low, high, .. } => {
                let mut e = crate::export::PolicyExport::new(
                    self.cfg.algo.name(),
                    &format!("clip({actor}, action_low, action_high)"),
                );
                e.vector("action_low", low.clone());
                e.vector("action_high", high.clone());
                // Not used by the greedy action; a sampling policy draws
                // actor(obs) + exp(actor.logstd) * N(0, 1).
                e.vector("actor.logstd", agent.head.logstd(&agent.params).to_vec());
                e
            }
        };
        for (name, net) in agent.named_nets() {
            match net {
                Net::Mlp(m) => e.mlp(name, m, &agent.params),
                Net::Conv(c) => e
                    .conv_net(name, c, &agent.params)
                    .map_err(|why| LearnError::Unsupported(format!("{}: {why}", self.cfg.env)))?,
            }
        }
        e.note(
            "value",
            if shared {
                "net(obs)[:, 0]"
            } else {
                "critic(obs)[:, 0]"
            },
        );
        if let Some(rms) = &self.obs_rms {
            e.obs_norm(&rms.mean, &rms.var, self.cfg.clip_obs);
        }
        Ok(e)
    }
}

/// Greedy evaluation of `agent` on `episodes` fresh episodes of the config's env.
pub fn evaluate(
    agent: &Agent,
    obs_rms: Option<&RunningMeanStd>,
    cfg: &PpoConfig,
    episodes: usize,
    seed: u64,
) -> crate::eval::Episodes {
    let mut policy = PpoGreedy::new(agent.clone(), obs_rms.cloned(), cfg.clone());
    crate::eval::run_episodes(&mut policy, &cfg.env, &cfg.env_args, episodes, seed)
}
