//! Rollout collection: the acting side (envs and normalisation) that may move to an
//! actor thread, the rollout buffer, and the loop that steps envs with a policy (the
//! current parameters, an older one, or the inference server).

use super::*;

/// The acting side of a run: the envs, observation and return normalisation, and
/// per-env episode bookkeeping. It moves to the actor thread for a prefetched rollout.
pub(super) struct ActorSide {
    pub(super) env: Box<dyn VecEnvDyn>,
    pub(super) obs_rms: Option<RunningMeanStd>,
    pub(super) ret_rms: Option<RunningMeanStd>,
    pub(super) discounted: Vec<f64>,
    pub(super) ep_return: Vec<f64>,
    pub(super) ep_length: Vec<u64>,
    pub(super) next_done: Vec<bool>,
}

impl ActorSide {
    /// `env` (`cfg.num_envs` envs of `obs_dim` observations) with fresh normalisation
    /// statistics where `cfg` asks for them, and no episode begun.
    pub(super) fn new(env: Box<dyn VecEnvDyn>, cfg: &PpoConfig, obs_dim: usize) -> ActorSide {
        let e = cfg.num_envs;
        ActorSide {
            env,
            obs_rms: cfg.norm_obs.then(|| RunningMeanStd::new(obs_dim)),
            ret_rms: cfg.norm_reward.then(|| RunningMeanStd::new(1)),
            discounted: vec![0.0; e],
            ep_return: vec![0.0; e],
            ep_length: vec![0; e],
            next_done: vec![false; e],
        }
    }

    /// Writes the current observations, normalised as the policy sees them, into `out`;
    /// with `update`, the running statistics take them in first (once per collection
    /// step, not for a bootstrap read of the same observations).
    pub(super) fn current_obs(&mut self, cfg: &PpoConfig, out: &mut [f32], update: bool) {
        self.env.obs().copy_into(out);
        if let Some(rms) = &mut self.obs_rms {
            if update {
                rms.update(out, self.env.num_envs());
            }
            rms.normalize(out, cfg.clip_obs);
        }
    }
}

/// One rollout's storage, `[num_steps x num_envs (x dim)]`, allocated once.
#[derive(Default)]
pub(super) struct RolloutBuf {
    pub(super) obs: Vec<f32>,
    pub(super) actions: Vec<f32>,
    pub(super) logprobs: Vec<f32>,
    pub(super) rewards: Vec<f32>,
    pub(super) dones: Vec<f32>,
    pub(super) values: Vec<f32>,
}

impl RolloutBuf {
    pub(super) fn new(t: usize, e: usize, d: usize, a: usize) -> RolloutBuf {
        RolloutBuf {
            obs: vec![0.0; t * e * d],
            actions: vec![0.0; t * e * a],
            logprobs: vec![0.0; t * e],
            rewards: vec![0.0; t * e],
            dones: vec![0.0; t * e],
            values: vec![0.0; t * e],
        }
    }
}

/// Where a rollout's policy runs, as [`collect`] asks it: the policy's outputs for a
/// step's observations, and the values that bootstrap truncated episodes. Three run it:
/// the learner's backend ([`BackendPolicy`], on-policy), a host copy of earlier
/// parameters ([`HostPolicy`], IMPALA's lagged actor, which another thread can own) and
/// a batching inference server ([`ServerPolicy`]).
pub(super) trait RolloutPolicy {
    /// The policy's outputs (`n x policy_dim`) for `n` rows of `obs` into `out`, and,
    /// where this policy computes them, the rows' values into `values` (V-trace
    /// recomputes them with the learner's parameters otherwise).
    fn act(&mut self, agent: &Agent, obs: &[f32], n: usize, out: &mut Vec<f32>, values: &mut [f32]);
    /// The values of `n` rows of `obs` into `out`.
    fn values(&mut self, agent: &Agent, obs: &[f32], n: usize, out: &mut Vec<f32>);
}

/// The learner's own backend: policy and values in one pass, or, for separate networks,
/// the policy alone: [`BackendPolicy::values_after`] runs the critic once over the whole
/// rollout (the parameters do not change during it, and a row's value does not depend on
/// the rows beside it), one batch split over the pool instead of a few rows a step.
pub(super) struct BackendPolicy<'a>(pub(super) &'a mut dyn NetBackend);

impl BackendPolicy<'_> {
    /// The rollout's values into `buf.values` where `act` left them out.
    pub(super) fn values_after(
        &mut self,
        agent: &Agent,
        buf: &mut RolloutBuf,
        scratch: &mut Vec<f32>,
    ) {
        if agent.separate_nets() {
            let n = buf.values.len();
            agent.head_on(Part::Value, &mut *self.0, &buf.obs, n, scratch);
            buf.values.copy_from_slice(scratch);
        }
    }
}

impl RolloutPolicy for BackendPolicy<'_> {
    fn act(
        &mut self,
        agent: &Agent,
        obs: &[f32],
        n: usize,
        out: &mut Vec<f32>,
        values: &mut [f32],
    ) {
        if agent.separate_nets() {
            agent.head_on(Part::Policy, &mut *self.0, obs, n, out);
            return;
        }
        out.resize(n * agent.policy_dim(), 0.0);
        agent.forward(&mut *self.0, obs, n, false, out, values);
    }

    fn values(&mut self, agent: &Agent, obs: &[f32], n: usize, out: &mut Vec<f32>) {
        agent.head_on(Part::Value, &mut *self.0, obs, n, out);
    }
}

/// A host copy of parameters run natively; the policy only (no values).
pub(super) struct HostPolicy<'a> {
    pub(super) params: &'a [f32],
    pub(super) cache: &'a mut NetCache,
}

impl RolloutPolicy for HostPolicy<'_> {
    fn act(&mut self, agent: &Agent, obs: &[f32], n: usize, out: &mut Vec<f32>, _: &mut [f32]) {
        agent.head_on_host(Part::Policy, self.params, obs, n, self.cache, out);
    }

    fn values(&mut self, agent: &Agent, obs: &[f32], n: usize, out: &mut Vec<f32>) {
        agent.head_on_host(Part::Value, self.params, obs, n, self.cache, out);
    }
}

/// The policy's outputs from a batching inference server; `host` (a host copy of the
/// same parameters) serves the truncation bootstraps.
pub(super) struct ServerPolicy<'a> {
    pub(super) client: &'a mut crate::serve::Client,
    pub(super) host: HostPolicy<'a>,
}

impl RolloutPolicy for ServerPolicy<'_> {
    fn act(
        &mut self,
        agent: &Agent,
        obs: &[f32],
        n: usize,
        out: &mut Vec<f32>,
        values: &mut [f32],
    ) {
        use crate::backend::Evaluator;
        out.resize(n * agent.policy_dim(), 0.0);
        self.client.evaluate(obs, n, out, values);
    }

    fn values(&mut self, agent: &Agent, obs: &[f32], n: usize, out: &mut Vec<f32>) {
        self.host.values(agent, obs, n, out);
    }
}

/// What a rollout adds to the run: steps, finished episodes, stage times and spans.
#[derive(Clone, Debug, Default)]
pub(super) struct RolloutStats {
    pub(super) steps: u64,
    pub(super) episodes: u64,
    pub(super) ret_sum: f64,
    pub(super) len_sum: f64,
    pub(super) env: f64,
    pub(super) inference: f64,
    pub(super) spans: Vec<Span>,
}

/// A rollout's stages, each with its stage timer and its span name in the trace.
#[derive(Clone, Copy)]
pub(super) enum Stage {
    Env,
    Inference,
}

impl RolloutStats {
    /// Adds `from..to` to `stage`'s timer and, when tracing (`origin`), records it as a
    /// span: the one way a rollout's time is counted, so the trace's spans and the stage
    /// timers measure the same intervals.
    pub(super) fn timed(
        &mut self,
        origin: Option<std::time::Instant>,
        stage: Stage,
        from: std::time::Instant,
        to: std::time::Instant,
    ) {
        let dur = to.duration_since(from).as_secs_f64();
        let (timer, name) = match stage {
            Stage::Env => (&mut self.env, "env.step"),
            Stage::Inference => (&mut self.inference, "inference"),
        };
        *timer += dur;
        if let Some(origin) = origin {
            self.spans.push(Span {
                name,
                start: from.duration_since(origin).as_secs_f64(),
                dur,
                tid: crate::trace::MAIN_TRACK,
            });
        }
    }
}

/// A rollout from an asynchronous actor, with what the learner needs to bootstrap it.
pub(super) struct AsyncRollout {
    pub(super) buf: RolloutBuf,
    pub(super) stats: RolloutStats,
    /// The observations after the rollout (normalised as the policy sees them).
    pub(super) next_obs: Vec<f32>,
    pub(super) next_done: Vec<bool>,
    /// The version of the parameters that collected it.
    pub(super) version: u64,
}

/// The newest parameters the learner has published, with their version (updates so far).
pub(super) type Published = std::sync::Arc<std::sync::Mutex<(u64, std::sync::Arc<Vec<f32>>)>>;

/// IMPALA's asynchronous actors while they run (`actors > 0`).
pub(super) struct AsyncActors {
    pub(super) latest: Published,
    pub(super) server: Option<crate::serve::InferenceServer>,
    pub(super) rx: std::sync::mpsc::Receiver<AsyncRollout>,
    pub(super) stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(super) handles: Vec<std::thread::JoinHandle<(ActorSide, u64)>>,
    pub(super) version: u64,
}

/// The inference server's network: the policy with the newest published parameters.
pub(super) struct PublishedPolicy {
    pub(super) agent: Agent,
    pub(super) latest: Published,
    pub(super) cache: NetCache,
    pub(super) out: Vec<f32>,
}

impl crate::backend::Evaluator for PublishedPolicy {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        let params = self
            .latest
            .lock()
            .expect("the learner does not panic holding it")
            .1
            .clone();
        self.agent.head_on_host(
            Part::Policy,
            &params,
            obs,
            n,
            &mut self.cache,
            &mut self.out,
        );
        logits[..self.out.len()].copy_from_slice(&self.out);
        // V-trace recomputes values in the learner.
        values.fill(0.0);
    }
}

/// One asynchronous actor: collects rollouts with the newest published parameters until
/// told to stop (or the learner hangs up); returns its envs and the rollouts collected.
/// Rollout `r` of actor `j` draws its actions from the streams of iteration
/// `base + r * actors + j + 1`, distinct across actors and restarts.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_actor(
    cfg: PpoConfig,
    agent: Agent,
    mut act: ActorSide,
    j: usize,
    base: u64,
    latest: Published,
    tx: std::sync::mpsc::SyncSender<AsyncRollout>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    origin: Option<std::time::Instant>,
    mut client: Option<crate::serve::Client>,
) -> (ActorSide, u64) {
    let (t, e, d, a) = (
        cfg.num_steps,
        cfg.num_envs,
        agent.obs_dim,
        agent.action_dim(),
    );
    let mut cache = NetCache::default();
    let mut rounds = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let (version, params) = {
            let g = latest
                .lock()
                .expect("the learner does not panic holding it");
            (g.0, g.1.clone())
        };
        let mut buf = RolloutBuf::new(t, e, d, a);
        let it = base + rounds * cfg.collection().actor_threads() as u64 + j as u64 + 1;
        let host = HostPolicy {
            params: &params,
            cache: &mut cache,
        };
        let stats = match &mut client {
            // The server answers with whatever parameters are newest when it runs.
            Some(client) => {
                let mut server = ServerPolicy { client, host };
                collect(
                    &cfg,
                    &agent,
                    &mut act,
                    &mut buf,
                    &mut server,
                    &params,
                    it,
                    origin,
                )
            }
            None => {
                let mut host = host;
                collect(
                    &cfg, &agent, &mut act, &mut buf, &mut host, &params, it, origin,
                )
            }
        };
        rounds += 1;
        let mut next_obs = vec![0.0; e * d];
        act.current_obs(&cfg, &mut next_obs, false);
        let r = AsyncRollout {
            buf,
            stats,
            next_obs,
            next_done: act.next_done.clone(),
            version,
        };
        if tx.send(r).is_err() {
            break;
        }
    }
    (act, rounds)
}

/// Collects rollout `it` (1-based) into `buf`: `num_steps` steps of every env, actions
/// sampled from `policy` (whose Gaussian log-std is read from `policy_params`).
#[allow(clippy::too_many_arguments)]
pub(super) fn collect(
    cfg: &PpoConfig,
    agent: &Agent,
    act: &mut ActorSide,
    buf: &mut RolloutBuf,
    policy: &mut dyn RolloutPolicy,
    policy_params: &[f32],
    it: u64,
    origin: Option<std::time::Instant>,
) -> RolloutStats {
    let (t_max, e, d) = (cfg.num_steps, cfg.num_envs, agent.obs_dim);
    let adim = agent.action_dim();
    let mut rngs: Vec<Rng> = (0..e as u64)
        .map(|k| Rng::stream(cfg.seed, Purpose::Policy, (it - 1) * e as u64 + k))
        .collect();
    let mut out_stats = RolloutStats::default();
    let mut act_f32 = vec![0.0f32; e * adim];
    let mut act_i32 = vec![0i32; e];
    let mut logp_row = vec![0.0f32; agent.policy_dim()];
    let mut pol = Vec::new();
    let mut final_values = Vec::new();
    let mut final_obs = Vec::new();
    let mut trunc_envs = Vec::new();

    for t in 0..t_max {
        let t0 = std::time::Instant::now();
        act.current_obs(cfg, &mut buf.obs[t * e * d..(t + 1) * e * d], true);
        let obs_t = &buf.obs[t * e * d..(t + 1) * e * d];
        for k in 0..e {
            buf.dones[t * e + k] = f32::from(u8::from(act.next_done[k]));
        }
        policy.act(
            agent,
            obs_t,
            e,
            &mut pol,
            &mut buf.values[t * e..(t + 1) * e],
        );
        let out = &pol[..];
        match &agent.head {
            Head::Categorical { n } => {
                for k in 0..e {
                    log_softmax(&out[k * n..(k + 1) * n], &mut logp_row);
                    // Inverse-CDF sampling from this env's stream.
                    let u = rngs[k].unit_f64();
                    let mut acc = 0.0f64;
                    let mut a = n - 1;
                    for (j, lp) in logp_row.iter().enumerate() {
                        acc += f64::from(lp.exp());
                        if u < acc {
                            a = j;
                            break;
                        }
                    }
                    act_i32[k] = a as i32;
                    buf.actions[t * e + k] = a as f32;
                    buf.logprobs[t * e + k] = logp_row[a];
                }
            }
            Head::Gaussian { dim, low, high, .. } => {
                let ls = agent.head.logstd(policy_params);
                for k in 0..e {
                    let mut lp = 0.0f32;
                    for j in 0..*dim {
                        let mu = out[k * dim + j];
                        let z = normal(&mut rngs[k]) as f32;
                        let a = mu + ls[j].exp() * z;
                        lp += gaussian_log_density(z, ls[j]);
                        buf.actions[(t * e + k) * dim + j] = a;
                        act_f32[k * dim + j] = a.clamp(low[j], high[j]);
                    }
                    buf.logprobs[t * e + k] = lp;
                }
            }
        }
        let t1 = std::time::Instant::now();
        out_stats.timed(origin, Stage::Inference, t0, t1);
        let actions = match agent.head {
            Head::Categorical { .. } => ActionBuf::Discrete(&act_i32),
            Head::Gaussian { .. } => ActionBuf::Continuous(&act_f32),
        };
        act.env
            .step(actions)
            .expect("the policy only emits valid actions");
        let t2 = std::time::Instant::now();
        out_stats.timed(origin, Stage::Env, t1, t2);
        out_stats.steps += e as u64;

        // Rewards: statistics on raw rewards, learning on normalised ones.
        trunc_envs.clear();
        for k in 0..e {
            let r = act.env.rewards()[k];
            let (term, trunc) = (act.env.terminated()[k], act.env.truncated()[k]);
            act.ep_return[k] += r;
            act.ep_length[k] += 1;
            let r = if cfg.reward_sign {
                // Not f64::signum, which is 1 for a zero reward.
                if r > 0.0 {
                    1.0
                } else if r < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            } else {
                r
            };
            let mut rr = r;
            if let Some(rms) = &mut act.ret_rms {
                act.discounted[k] = act.discounted[k] * cfg.gamma + r;
                rms.update(&[act.discounted[k] as f32], 1);
                rr = (r / (rms.var[0] + 1e-8).sqrt()).clamp(-cfg.clip_reward, cfg.clip_reward);
                if term || trunc {
                    act.discounted[k] = 0.0;
                }
            }
            buf.rewards[t * e + k] = rr as f32;
            if term || trunc {
                out_stats.episodes += 1;
                out_stats.ret_sum += act.ep_return[k];
                out_stats.len_sum += act.ep_length[k] as f64;
                act.ep_return[k] = 0.0;
                act.ep_length[k] = 0;
            }
            if trunc && !term && cfg.bootstrap_truncated {
                trunc_envs.push(k);
            }
            act.next_done[k] = term || trunc;
        }
        if !trunc_envs.is_empty() {
            // The episode was cut by the time limit, not ended by the MDP:
            // bootstrap from the value of the observation it was cut at.
            let fo = act
                .env
                .final_obs()
                .expect("SameStep mode keeps final observations");
            final_obs.clear();
            for &k in &trunc_envs {
                fo.slice(k * d, d).extend_into(&mut final_obs);
            }
            if let Some(rms) = &act.obs_rms {
                rms.normalize(&mut final_obs, cfg.clip_obs);
            }
            let n = trunc_envs.len();
            policy.values(agent, &final_obs, n, &mut final_values);
            for (j, &k) in trunc_envs.iter().enumerate() {
                buf.rewards[t * e + k] += (cfg.gamma as f32) * final_values[j];
            }
        }
        let t3 = std::time::Instant::now();
        out_stats.timed(origin, Stage::Inference, t2, t3);
    }
    out_stats
}
