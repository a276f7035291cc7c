//! Proximal Policy Optimization (Schulman et al. 2017), as CleanRL's `ppo.py` (discrete
//! actions) and `ppo_continuous_action.py` (diagonal Gaussian with a state-independent
//! log-std): GAE, clipped surrogate, clipped value loss, entropy bonus, advantage
//! normalisation, global gradient clipping, linear learning-rate annealing, epochs x
//! minibatches; observation and return normalisation for continuous control.
//!
//! Determinism: the envs are stepped by rlrig-env (identical at any thread count);
//! action sampling for env `k` in iteration `i` draws from the stream
//! `(seed, Policy, i * num_envs + k)`, minibatch shuffles from `(seed, Learner, ...)`;
//! the learner runs on one thread in a fixed order. A run is a pure function of its
//! config, and a checkpoint holds everything needed to continue it bit for bit. The one
//! exception is IMPALA's asynchronous mode (`actors > 0`), whose rollouts use whatever
//! parameters were newest when they were collected: that depends on timing.
//!
//! Here: the run ([`Ppo`]: building, iterating, state). Beside it: `config` (the config
//! and presets), `agent` (networks and policy head), `rollout` (collection), `update`
//! (GAE and the minibatch epochs), `loss` (the per-row loss and its gradients),
//! `impala` (asynchronous actors, V-trace), `greedy` (acting and evaluation) and `run`
//! (checkpoints, metrics and the driver's [`crate::driver::Algorithm`]).

use rlrig_env::{ActionBuf, Purpose, Rng, Space, VecEnvDyn};
use serde::{Deserialize, Serialize};

use crate::LearnError;
use crate::backend::{
    BackendMaker, Native, Net, NetBackend, NetCache, NetLayout, Weights, rebuild,
};
use crate::conv::{ConvNet, NATURE};
use crate::nn::{Mlp, normal};
use crate::normalize::RunningMeanStd;
use crate::optim::Adam;
use crate::trace::StageTimes;

mod agent;
mod config;
mod greedy;
mod impala;
mod loss;
mod rollout;
mod run;
mod update;
use crate::dist::{gaussian_log_density, log_softmax};
pub use agent::*;
pub use config::*;
pub use greedy::*;
use rollout::*;
pub use run::{
    Checkpoint, CheckpointMeta, DETERMINISTIC_COLUMNS, METRICS_HEADER, load_checkpoint, metrics_row,
};

/// Metrics of one iteration (one rollout and its update).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IterationStats {
    pub iteration: u64,
    pub global_step: u64,
    pub episodes: u64,
    /// Mean undiscounted return of the episodes that ended in this rollout (NaN if none).
    pub episode_return: f64,
    pub episode_length: f64,
    pub learning_rate: f64,
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clipfrac: f64,
    pub explained_variance: f64,
}

/// Everything besides the weights and Adam moments that a checkpoint must hold.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PpoState {
    pub iteration: u64,
    pub global_step: u64,
    pub adam: Adam,
    pub obs_rms: Option<RunningMeanStd>,
    pub ret_rms: Option<RunningMeanStd>,
    /// Per-env discounted return for reward normalisation.
    pub discounted: Vec<f64>,
    /// Per-env running episode return and length (for statistics).
    pub ep_return: Vec<f64>,
    pub ep_length: Vec<u64>,
    /// Whether each env's current observation starts a new episode.
    pub next_done: Vec<bool>,
    pub envs: rlrig_env::VecSnapshot,
    /// With `policy_lag`: the parameters of the last `policy_lag` updates before the
    /// current ones, oldest first (the next rollout's policy is the first).
    #[serde(default)]
    pub behaviour: Vec<Vec<f32>>,
}

/// A PPO run in progress.
pub struct Ppo {
    pub cfg: PpoConfig,
    pub agent: Agent,
    /// The envs and their bookkeeping; away on the actor thread while a prefetched
    /// rollout is collected (only inside `iterate_prefetching`).
    actor: Option<ActorSide>,
    /// Where the critic (net 0) and actor (net 1) run; `agent.params` mirrors its
    /// parameters after every update.
    backend: Box<dyn NetBackend>,
    pub iteration: u64,
    pub global_step: u64,
    pub times: StageTimes,
    trace: Option<SpanLog>,
    /// With `policy_lag`: earlier parameters, oldest first (see [`PpoState::behaviour`]).
    behaviour: std::collections::VecDeque<Vec<f32>>,
    behaviour_cache: NetCache,
    /// The rollout being learned from, and a second buffer for prefetching.
    buf: RolloutBuf,
    spare: RolloutBuf,
    /// A rollout collected ahead (see [`Ppo::iterate_prefetching`]).
    prefetched: Option<(RolloutBuf, RolloutStats)>,
    advantages: Vec<f32>,
    returns: Vec<f32>,
    /// Whether each env's observation after the rollout being learned starts a new
    /// episode (the home envs', or the asynchronous actor's that collected it).
    learn_next_done: Vec<bool>,
    /// Asynchronous mode: the running actors, the envs of actors 1.. while stopped
    /// (actor 0 uses the home envs), and the action streams used so far.
    pool: Option<AsyncActors>,
    parked: Vec<ActorSide>,
    async_base: u64,
    /// Asynchronous mode: the summed staleness (updates between the policy that collected
    /// a rollout and the learner that used it) and the rollouts learned.
    pub async_lag: (u64, u64),
    /// With `inference_server`: what the server did (network calls, rows, requests).
    pub server_stats: crate::serve::ServerStats,
    update_bufs: update::UpdateBufs,
    /// The process's shared pool for `threads` (none for 1): the minibatch loss's row
    /// blocks run on it (the networks' passes run on the backend's).
    threads_pool: Option<std::sync::Arc<rlrig_env::pool::Pool>>,
    /// The rollout's values as the critic's batch pass returns them.
    value_scratch: Vec<f32>,
}

impl Drop for Ppo {
    fn drop(&mut self) {
        self.stop_actors();
    }
}

pub use crate::trace::Span;
use crate::trace::SpanLog;

impl Ppo {
    pub fn new(cfg: PpoConfig, threads: usize) -> Result<Ppo, LearnError> {
        cfg.validate()?;
        let env = crate::training_envs(&cfg.env, &cfg.env_args, cfg.num_envs, cfg.seed, threads)?;
        Self::with_env(cfg, env, threads)
    }

    /// The envs of asynchronous actor `j >= 1`: `cfg.env` on its own seed, one thread
    /// (each actor is a thread).
    fn actor_side(cfg: &PpoConfig, j: usize, obs_dim: usize) -> Result<ActorSide, LearnError> {
        let seed = cfg
            .seed
            .wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(j as u64));
        let env = crate::training_envs(&cfg.env, &cfg.env_args, cfg.num_envs, seed, 1)?;
        Ok(ActorSide::new(env, cfg, obs_dim))
    }

    /// PPO on an executor built by the caller (any env type, e.g. a test env), which
    /// must have `cfg.num_envs` envs and SameStep auto-reset; its updates split over
    /// `threads` threads (the results do not depend on it).
    pub fn with_env(
        cfg: PpoConfig,
        env: Box<dyn VecEnvDyn>,
        threads: usize,
    ) -> Result<Ppo, LearnError> {
        if env.num_envs() != cfg.num_envs {
            return Err(LearnError::Config(format!(
                "executor has {} envs, config says {}",
                env.num_envs(),
                cfg.num_envs
            )));
        }
        if env.final_obs().is_none() {
            return Err(LearnError::Config("executor must use AutoReset::SameStep (PPO bootstraps truncated episodes from final_obs)".into()));
        }
        let spec = env.spec();
        let mut rng = Rng::stream(cfg.seed, Purpose::Init, 0);
        let agent = Agent::for_config(&spec, &cfg, &mut rng);
        let n = agent.params.len();
        let (t, e, d, a) = (
            cfg.num_steps,
            cfg.num_envs,
            spec.obs_dim,
            agent.action_dim(),
        );
        let parked = (1..cfg.collection().actor_threads())
            .map(|j| Self::actor_side(&cfg, j, d))
            .collect::<Result<Vec<_>, _>>()?;
        let opt = match cfg.optimizer {
            Optimizer::Rmsprop => Adam::rmsprop(n, cfg.rmsprop_alpha, cfg.adam_eps),
            Optimizer::Adam => Adam::new(n, cfg.adam_eps),
        };
        Ok(Ppo {
            backend: Box::new(Native::new(&agent.layout(), &agent.params, opt).threads(threads)?),
            actor: Some(ActorSide::new(env, &cfg, d)),
            iteration: 0,
            global_step: 0,
            times: StageTimes::default(),
            trace: None,
            behaviour: std::collections::VecDeque::new(),
            behaviour_cache: NetCache::default(),
            buf: RolloutBuf::new(t, e, d, a),
            spare: RolloutBuf::new(t, e, d, a),
            prefetched: None,
            advantages: vec![0.0; t * e],
            returns: vec![0.0; t * e],
            learn_next_done: vec![false; e],
            pool: None,
            parked,
            async_base: 0,
            async_lag: (0, 0),
            server_stats: crate::serve::ServerStats::default(),
            update_bufs: Default::default(),
            threads_pool: rlrig_env::pool::Pool::shared_for(threads)
                .map_err(|e| LearnError::Config(e.to_string()))?,
            value_scratch: Vec::new(),
            agent,
            cfg,
        })
    }

    /// The envs and their bookkeeping (home except inside `iterate_prefetching`).
    fn act(&self) -> &ActorSide {
        self.actor
            .as_ref()
            .expect("the actor side is home between calls")
    }

    fn act_mut(&mut self) -> &mut ActorSide {
        self.actor
            .as_mut()
            .expect("the actor side is home between calls")
    }

    /// Starts recording a span per stage and step, keeping the first and the last
    /// `keep` iterations (see [`SpanLog`]).
    pub fn enable_trace(&mut self, keep: u64) {
        self.trace = Some(SpanLog::new(keep));
    }

    /// The spans recorded so far.
    pub fn trace(&self) -> Option<&SpanLog> {
        self.trace.as_ref()
    }

    fn span(&mut self, name: &'static str, from: std::time::Instant, to: std::time::Instant) {
        if let Some(log) = &mut self.trace {
            log.span(name, from, to);
        }
    }

    pub fn done(&self) -> bool {
        self.iteration >= self.cfg.num_iterations()
    }

    /// Whether no rollout is in flight (none prefetched, no asynchronous actors
    /// running): only then can [`Ppo::state`] be taken. An iteration run without
    /// prefetching always ends quiescent.
    pub fn quiescent(&self) -> bool {
        self.prefetched.is_none() && self.pool.is_none()
    }

    /// The state a checkpoint needs besides `agent.params` and the Adam moments.
    pub fn state(&self) -> PpoState {
        // A prefetched rollout has moved the envs past `iteration`: a checkpoint then
        // would resume wrong, so callers stop prefetching before they save.
        assert!(
            self.quiescent(),
            "Ppo::state with a prefetched rollout pending or actors running"
        );
        PpoState {
            iteration: self.iteration,
            global_step: self.global_step,
            adam: self.backend.optimizer(),
            obs_rms: self.act().obs_rms.clone(),
            ret_rms: self.act().ret_rms.clone(),
            discounted: self.act().discounted.clone(),
            ep_return: self.act().ep_return.clone(),
            ep_length: self.act().ep_length.clone(),
            next_done: self.act().next_done.clone(),
            envs: self.act().env.snapshot(),
            behaviour: self.behaviour.iter().cloned().collect(),
        }
    }

    /// The optimiser's first and second moments, in the parameters' flat order.
    pub fn adam_moments(&self) -> (Vec<f32>, Vec<f32>) {
        let o = self.backend.optimizer();
        (o.m, o.v)
    }

    /// Moves the networks to the backend `maker` builds (a `--device`), with the current
    /// parameters and optimiser state.
    pub fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), LearnError> {
        self.backend = rebuild(maker, self.backend.as_ref(), &self.agent.layout())?;
        Ok(())
    }

    /// What runs the networks (`cpu`, `burn-cpu`, `wgpu: ...`).
    pub fn device(&self) -> String {
        self.backend.device()
    }

    /// Continues from a checkpoint. On error nothing changed.
    pub fn restore(
        &mut self,
        st: PpoState,
        params: Vec<f32>,
        m: Vec<f32>,
        v: Vec<f32>,
    ) -> Result<(), LearnError> {
        let n = self.agent.params.len();
        if params.len() != n || m.len() != n || v.len() != n {
            return Err(LearnError::Mismatch(format!(
                "checkpoint holds {} parameters, this network has {n} (different env or hidden sizes?)",
                params.len()
            )));
        }
        let e = self.cfg.num_envs;
        if [
            st.discounted.len(),
            st.ep_return.len(),
            st.ep_length.len(),
            st.next_done.len(),
        ] != [e; 4]
        {
            return Err(LearnError::Mismatch(format!(
                "checkpoint is for a different number of envs than {e}"
            )));
        }
        let lag = self.cfg.collection().lag();
        if st.behaviour.len() > lag || st.behaviour.iter().any(|b| b.len() != n) {
            return Err(LearnError::Mismatch(format!(
                "checkpoint's behaviour parameters ({} sets) do not fit policy_lag = {lag} and {n} parameters",
                st.behaviour.len(),
            )));
        }
        self.act_mut().env.restore(&st.envs)?;
        self.prefetched = None;
        self.behaviour = st.behaviour.into_iter().collect();
        self.backend.set_params(&params);
        self.backend.set_optimizer(Adam { m, v, ..st.adam });
        self.agent.params = params;
        let act = self.act_mut();
        act.obs_rms = st.obs_rms;
        act.ret_rms = st.ret_rms;
        act.discounted = st.discounted;
        act.ep_return = st.ep_return;
        act.ep_length = st.ep_length;
        act.next_done = st.next_done;
        self.iteration = st.iteration;
        self.global_step = st.global_step;
        Ok(())
    }

    /// Writes the current observations, normalised as the policy sees them, into `out`.
    fn current_obs(&mut self, out: &mut [f32]) {
        let cfg = &self.cfg;
        let act = self
            .actor
            .as_mut()
            .expect("the actor side is home between calls");
        act.current_obs(cfg, out, false);
    }

    /// Runs one rollout and one update; returns the iteration's metrics.
    pub fn iterate(&mut self) -> IterationStats {
        self.iterate_prefetching(false)
    }

    /// [`Ppo::iterate`]; with `prefetch` (IMPALA with `policy_lag >= 1` only), the next
    /// rollout is collected on another thread while this update runs, as its policy,
    /// `policy_lag` updates old, is already known. Results are the same either way. A
    /// prefetched rollout is pending until the next call: the last call before
    /// [`Ppo::state`] (a checkpoint) must not prefetch.
    ///
    /// With `actors > 0` (asynchronous IMPALA) `prefetch` means "keep the actors
    /// running after this update"; without it they are stopped and their envs come home,
    /// as [`Ppo::state`] needs.
    pub fn iterate_prefetching(&mut self, prefetch: bool) -> IterationStats {
        let stats = match self.cfg.collection() {
            Collection::Async { .. } => self.iterate_async(prefetch),
            Collection::OnPolicy | Collection::Lagged { .. } => self.iterate_sync(prefetch),
        };
        if let Some(log) = &mut self.trace {
            log.end_iteration();
        }
        stats
    }

    fn iterate_sync(&mut self, prefetch: bool) -> IterationStats {
        let cfg = self.cfg.clone();
        let (e, d) = (cfg.num_envs, self.agent.obs_dim);
        let lag = cfg.collection().lag();
        let (it, lr, mut stats) = self.begin_iteration();
        let rollout = match self.prefetched.take() {
            Some((buf, r)) => {
                self.spare = std::mem::replace(&mut self.buf, buf);
                r
            }
            None => {
                let origin = self.trace.as_ref().map(SpanLog::origin);
                let act = self
                    .actor
                    .as_mut()
                    .expect("the actor side is home between calls");
                if lag > 0 {
                    // A lagged policy runs natively from a host copy, as IMPALA's actors.
                    let params = self.behaviour.front().unwrap_or(&self.agent.params);
                    let mut host = HostPolicy {
                        params,
                        cache: &mut self.behaviour_cache,
                    };
                    collect(
                        &cfg,
                        &self.agent,
                        act,
                        &mut self.buf,
                        &mut host,
                        params,
                        it,
                        origin,
                    )
                } else {
                    let mut on = BackendPolicy(self.backend.as_mut());
                    let params = &self.agent.params;
                    let mut r = collect(
                        &cfg,
                        &self.agent,
                        act,
                        &mut self.buf,
                        &mut on,
                        params,
                        it,
                        origin,
                    );
                    let t0 = std::time::Instant::now();
                    on.values_after(&self.agent, &mut self.buf, &mut self.value_scratch);
                    r.timed(origin, Stage::Inference, t0, std::time::Instant::now());
                    r
                }
            }
        };
        self.absorb(&rollout);
        stats.episodes = rollout.episodes;

        let t_learn = std::time::Instant::now();
        // Targets over the rollout, bootstrapped from the value of the next observation.
        let mut next_obs = vec![0.0f32; e * d];
        self.current_obs(&mut next_obs);
        let mut next_value = Vec::new();
        self.agent.head_on(
            Part::Value,
            &mut *self.backend,
            &next_obs,
            e,
            &mut next_value,
        );
        let home = self
            .actor
            .as_ref()
            .expect("the actor side is home between calls");
        self.learn_next_done.clone_from(&home.next_done);
        if cfg.vtrace {
            self.vtrace_targets(&next_value);
        } else {
            self.gae(&next_value);
        }
        if lag > 0 {
            // The parameters this update starts from join the queue of stale policies;
            // the next rollout's policy is the queue's front.
            if self.behaviour.len() == lag {
                self.behaviour.pop_front();
            }
            self.behaviour.push_back(self.agent.params.clone());
        }
        if prefetch && lag > 0 && it < cfg.num_iterations() {
            let mut act = self
                .actor
                .take()
                .expect("the actor side is home between calls");
            let mut spare = std::mem::take(&mut self.spare);
            let mut cache = std::mem::take(&mut self.behaviour_cache);
            let params = self.behaviour.front().expect("just pushed").clone();
            let agent = self.agent.shapes();
            let origin = self.trace.as_ref().map(SpanLog::origin);
            let worker = std::thread::spawn(move || {
                let mut policy = HostPolicy {
                    params: &params,
                    cache: &mut cache,
                };
                let r = collect(
                    &cfg,
                    &agent,
                    &mut act,
                    &mut spare,
                    &mut policy,
                    &params,
                    it + 1,
                    origin,
                );
                (act, spare, cache, r)
            });
            self.update(lr, it, &mut stats);
            let (act, spare, cache, r) = worker.join().expect("the actor thread does not panic");
            self.actor = Some(act);
            self.behaviour_cache = cache;
            self.prefetched = Some((spare, r));
        } else {
            self.update(lr, it, &mut stats);
        }
        let t_end = std::time::Instant::now();
        self.times.learner += (t_end - t_learn).as_secs_f64();
        self.span("learner", t_learn, t_end);
        self.finish_stats(stats, rollout.ret_sum, rollout.len_sum)
    }

    /// Counts a new iteration; returns it with its (annealed) learning rate and its
    /// stats so far.
    fn begin_iteration(&mut self) -> (u64, f64, IterationStats) {
        self.iteration += 1;
        let it = self.iteration;
        let cfg = &self.cfg;
        let lr = cfg.learning_rate_at(it);
        let stats = IterationStats {
            iteration: it,
            learning_rate: lr,
            ..Default::default()
        };
        (it, lr, stats)
    }

    /// Adds a rollout's steps, stage times and spans to the run's.
    fn absorb(&mut self, r: &RolloutStats) {
        self.global_step += r.steps;
        self.times.env += r.env;
        self.times.inference += r.inference;
        if let Some(log) = &mut self.trace {
            log.extend(&r.spans);
        }
    }

    fn finish_stats(
        &self,
        mut stats: IterationStats,
        ret_sum: f64,
        len_sum: f64,
    ) -> IterationStats {
        stats.global_step = self.global_step;
        stats.episode_return = if stats.episodes > 0 {
            ret_sum / stats.episodes as f64
        } else {
            f64::NAN
        };
        stats.episode_length = if stats.episodes > 0 {
            len_sum / stats.episodes as f64
        } else {
            f64::NAN
        };
        let (vs, rs) = (&self.buf.values, &self.returns);
        let mean = |x: &[f32]| x.iter().map(|v| f64::from(*v)).sum::<f64>() / x.len() as f64;
        let var = |x: &[f32], m: f64| {
            x.iter().map(|v| (f64::from(*v) - m).powi(2)).sum::<f64>() / x.len() as f64
        };
        let diff: Vec<f32> = rs.iter().zip(vs).map(|(r, v)| r - v).collect();
        let var_y = var(rs, mean(rs));
        stats.explained_variance = if var_y == 0.0 {
            f64::NAN
        } else {
            1.0 - var(&diff, mean(&diff)) / var_y
        };
        stats
    }

    /// Deterministic evaluation (greedy action / Gaussian mean) on `episodes` fresh
    /// episodes of `cfg.env`, seeded by `seed`.
    pub fn evaluate(&self, episodes: usize, seed: u64) -> crate::eval::Episodes {
        evaluate(
            &self.agent,
            self.act().obs_rms.as_ref(),
            &self.cfg,
            episodes,
            seed,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each valid combination of `policy_lag`, `actors` and `inference_server` is one
    /// collection mode; the combinations that mean nothing do not validate.
    #[test]
    fn the_three_keys_name_one_collection_mode() {
        let ppo = PpoConfig::for_env("CartPole-v1");
        assert_eq!(ppo.collection(), Collection::OnPolicy);
        let lagged = PpoConfig {
            policy_lag: 3,
            ..PpoConfig::impala_for_env("CartPole-v1")
        };
        assert!(lagged.validate().is_ok());
        assert_eq!(lagged.collection(), Collection::Lagged { lag: 3 });
        assert_eq!(lagged.collection().lag(), 3);
        for server in [false, true] {
            let a = PpoConfig {
                policy_lag: 0,
                actors: 4,
                inference_server: server,
                ..PpoConfig::impala_for_env("CartPole-v1")
            };
            assert!(a.validate().is_ok(), "{:?}", a.validate());
            assert_eq!(a.collection(), Collection::Async { actors: 4, server });
            assert_eq!(a.collection().actor_threads(), 4);
            assert_eq!(a.collection().lag(), 0);
        }
        let both = PpoConfig {
            actors: 2,
            ..PpoConfig::impala_for_env("CartPole-v1")
        };
        assert!(
            matches!(both.validate(), Err(LearnError::Config(m)) if m.contains("policy_lag = 0"))
        );
        let server_alone = PpoConfig {
            inference_server: true,
            ..PpoConfig::impala_for_env("CartPole-v1")
        };
        assert!(server_alone.validate().is_err());
        assert_eq!(ppo.collection().actor_threads(), 1);
    }

    /// `activation = "relu"` builds ReLU hidden layers in actor and critic (the output
    /// layers stay linear), the default is tanh, conv networks ignore it, and an unknown
    /// name is an error that names the key.
    #[test]
    fn activation_picks_the_mlps_hidden_activation() {
        use crate::nn::Activation;
        let acts = |cfg: &PpoConfig| -> Vec<Vec<Activation>> {
            let spec = rlrig_env::spec(&cfg.env).unwrap();
            let agent = Agent::for_config(&spec, cfg, &mut Rng::stream(1, Purpose::User, 0));
            let AgentNets::Separate { critic, actor } = &agent.nets else {
                panic!("MLP agents are separate")
            };
            [critic, actor]
                .iter()
                .map(|n| match n {
                    Net::Mlp(m) => m.layers().iter().map(|l| l.act).collect(),
                    Net::Conv(c) => c.head.layers().iter().map(|l| l.act).collect(),
                })
                .collect()
        };
        let tanh = PpoConfig::for_env("CartPole-v1");
        assert_eq!(tanh.activation, MlpActivation::Tanh);
        let want = |a| vec![a, a, Activation::Identity];
        assert_eq!(acts(&tanh), vec![want(Activation::Tanh); 2]);
        let relu = PpoConfig {
            activation: MlpActivation::Relu,
            ..tanh.clone()
        };
        assert_eq!(acts(&relu), vec![want(Activation::Relu); 2]);
        // PPO's MinAtar preset: PureJaxRL's ReLU MLPs.
        let minatar = PpoConfig::for_env("MinAtar/Breakout-v1");
        assert_eq!(acts(&minatar), vec![want(Activation::Relu); 2]);
        let conv = PpoConfig {
            conv_channels: 16,
            hidden: vec![128],
            activation: MlpActivation::Tanh,
            ..minatar
        };
        assert_eq!(
            acts(&conv),
            vec![vec![Activation::Relu, Activation::Identity]; 2]
        );
        let bad = toml::from_str::<PpoConfig>("activation = \"sigmoid\"").unwrap_err();
        assert!(bad.to_string().contains("activation"), "{bad}");
        let parsed: PpoConfig = toml::from_str("activation = \"relu\"").unwrap();
        assert_eq!(parsed.activation, MlpActivation::Relu);
    }

    /// A shared trunk's one output row is `[value, policy...]`: `Agent::forward` splits
    /// it, `Agent::backward` joins the two gradients back, and the two heads start with
    /// CleanRL's gains (1 for the value, 0.01 for the policy).
    #[test]
    fn shared_trunk_splits_and_joins_the_heads() {
        let mut rng = Rng::stream(3, Purpose::User, 0);
        let net = ConvNet::tower((2, 36, 36), &NATURE, 0, &[8], 1 + 3, 0).with_scale(0.5);
        let input = net.input_dim();
        let agent = Agent::assemble(
            input,
            AgentNets::Shared(net.clone().into()),
            &Space::Discrete { n: 3 },
            0.0,
            &mut rng,
        );
        let last = net.head.layers().last().unwrap().clone();
        let column_norm = |j: usize| {
            (0..last.fan_in)
                .map(|r| f64::from(agent.params[last.w + r * last.fan_out + j]).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        assert!((column_norm(0) - 1.0).abs() < 1e-5, "{}", column_norm(0));
        for j in 1..4 {
            assert!(
                column_norm(j) > 1e-4 && column_norm(j) <= 0.01 + 1e-6,
                "{}",
                column_norm(j)
            );
        }
        let rows = 5;
        let obs: Vec<f32> = (0..rows * input).map(|_| rng.below(256) as f32).collect();
        let layout = agent.layout();
        let mut backend = Native::new(&layout, &agent.params, Adam::new(layout.total, 1e-8));
        let (mut policy, mut values) = (vec![0.0; rows * 3], vec![0.0; rows]);
        agent.forward(&mut backend, &obs, rows, true, &mut policy, &mut values);
        let mut cache = NetCache::default();
        let whole = Net::from(net.clone())
            .forward(&agent.params, &obs, rows, &mut cache)
            .to_vec();
        for r in 0..rows {
            assert_eq!(values[r], whole[r * 4]);
            assert_eq!(policy[r * 3..r * 3 + 3], whole[r * 4 + 1..r * 4 + 4]);
        }
        let d_policy: Vec<f32> = (0..rows * 3).map(|i| (i as f32 * 0.37).sin()).collect();
        let d_values: Vec<f32> = (0..rows).map(|i| (i as f32 * 1.3).cos()).collect();
        agent.backward(&mut backend, &d_policy, &d_values, &mut Vec::new());
        let joined: Vec<f32> = (0..rows)
            .flat_map(|r| {
                std::iter::once(d_values[r]).chain(d_policy[r * 3..r * 3 + 3].iter().copied())
            })
            .collect();
        let mut want = vec![0.0; layout.total];
        Net::from(net).backward(&agent.params, &mut want, &joined, &mut cache);
        assert_eq!(backend.grads(), want);
        assert!(want.iter().any(|g| *g != 0.0));
        // The host paths agree with the backend's.
        let (mut p2, mut v2) = (Vec::new(), Vec::new());
        agent.head_on_host(Part::Policy, &agent.params, &obs, rows, &mut cache, &mut p2);
        agent.head_on_host(Part::Value, &agent.params, &obs, rows, &mut cache, &mut v2);
        assert_eq!((p2, v2), (policy, values));
    }

    /// `reward_sign` changes what the learner sees, not the reported score: the first
    /// rollout (same initial policy) reports the same raw returns either way.
    #[test]
    fn reward_sign_learns_from_signs_and_reports_raw_returns() {
        let mut cfg = PpoConfig::for_env("Pendulum-v1");
        cfg.norm_reward = false;
        cfg.total_steps = cfg.batch_size() as u64;
        let first = |sign: bool| {
            let mut c = cfg.clone();
            c.reward_sign = sign;
            Ppo::new(c, 1).unwrap().iterate()
        };
        let (raw, signed) = (first(false), first(true));
        assert!(raw.episodes > 0 && raw.episode_return < -100.0, "{raw:?}");
        assert_eq!(raw.episode_return, signed.episode_return);
        // Pendulum's rewards are in [-16.3, 0]: as signs, returns are at most
        // 1 / (1 - gamma) = 10 in size, far below the raw ones.
        assert!(
            signed.value_loss < raw.value_loss / 10.0,
            "{} vs {}",
            signed.value_loss,
            raw.value_loss
        );
    }

    /// The annealed learning rate falls to 0 over `anneal_steps`, or the run's
    /// `total_steps` where that is longer (0: always); a run shorter than the horizon
    /// stops the schedule part-way.
    #[test]
    fn the_learning_rate_anneals_over_its_horizon() {
        let mut cfg = PpoConfig::for_env("CartPole-v1");
        cfg.total_steps = 4 * cfg.batch_size() as u64;
        let rates = |cfg: &PpoConfig| {
            let mut ppo = Ppo::new(cfg.clone(), 1).unwrap();
            (0..4)
                .map(|_| ppo.iterate().learning_rate)
                .collect::<Vec<_>>()
        };
        let lr = cfg.learning_rate;
        assert_eq!(rates(&cfg), [lr, 0.75 * lr, 0.5 * lr, 0.25 * lr]);
        cfg.anneal_steps = 4 * cfg.total_steps;
        let long = rates(&cfg);
        assert_eq!(long[0], lr);
        assert!((long[3] - 0.8125 * lr).abs() < 1e-12, "{long:?}");
        cfg.anneal_steps = cfg.total_steps - 1;
        assert_eq!(rates(&cfg), [lr, 0.75 * lr, 0.5 * lr, 0.25 * lr]);
        // The Atari preset runs a quarter of CleanRL's schedule (in a build with ALE).
        if rlrig_env::spec("Pong-v5").is_ok() {
            let atari = PpoConfig::for_env("Pong-v5");
            assert_eq!(atari.anneal_steps, 4 * atari.total_steps);
        }
    }

    /// With separate networks the rollout's values come from one critic pass over the
    /// whole rollout after it (`BackendPolicy::values_after`): each step's values equal
    /// the critic's on that step's rows alone, bit for bit, as the pass per step gave them.
    #[test]
    fn the_rollouts_values_are_each_steps_critic_values() {
        let mut cfg = PpoConfig::for_env("CartPole-v1");
        (cfg.num_envs, cfg.num_steps) = (8, 32);
        cfg.total_steps = cfg.batch_size() as u64;
        let mut ppo = Ppo::new(cfg, 2).unwrap();
        let collected_with = ppo.backend.params();
        ppo.iterate();
        ppo.backend.set_params(&collected_with);
        assert!(ppo.agent.separate_nets());
        let (e, d) = (8, ppo.agent.obs_dim);
        let mut v = Vec::new();
        for t in 0..32 {
            let obs = &ppo.buf.obs[t * e * d..(t + 1) * e * d];
            ppo.agent
                .head_on(Part::Value, &mut *ppo.backend, obs, e, &mut v);
            assert_eq!(v, ppo.buf.values[t * e..(t + 1) * e], "step {t}");
        }
        assert!(ppo.buf.values.iter().any(|v| *v != 0.0));
    }
}
