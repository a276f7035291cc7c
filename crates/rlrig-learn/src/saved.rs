//! Reading saved runs: which algorithm a run directory holds, its newest intact
//! checkpoint's policy for `eval`, `play`, recorded episodes and the Python package,
//! whatever algorithm wrote it.

use std::path::Path;

use crate::EVAL_SEED_OFFSET;
use crate::LearnError;
use crate::dqn::{DqnConfig, DqnState, QNet};
use crate::driver::check_eval_memory;
use crate::eval::EvalSummary;
use crate::eval::Greedy;
use crate::offpolicy::{Nets, OffPolicyConfig, OffPolicyState};
use crate::ppo::{Agent, PpoConfig};
use crate::run::RunDir;

/// What kind of run a directory holds, from its newest checkpoint's `algo`: the one
/// place that maps algorithm names to the code that reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// ppo, a2c, impala: PPO's machinery.
    Ppo,
    /// ddpg, td3, sac.
    OffPolicy,
    Dqn,
    /// es, ga.
    Evolution,
    AlphaZero,
}

impl RunKind {
    pub fn of(run_dir: &Path) -> Result<RunKind, LearnError> {
        let algo = RunDir::open(run_dir)?.algo()?;
        match algo.as_str() {
            "ppo" | "a2c" | "impala" => Ok(RunKind::Ppo),
            "ddpg" | "td3" | "sac" => Ok(RunKind::OffPolicy),
            "dqn" => Ok(RunKind::Dqn),
            "es" | "ga" => Ok(RunKind::Evolution),
            "alphazero" => Ok(RunKind::AlphaZero),
            other => Err(LearnError::Mismatch(format!(
                "{}: a '{other}' run, which this rlrig does not know",
                run_dir.display()
            ))),
        }
    }
}

/// The agent of the newest checkpoint in `run_dir`, with its config and observation
/// statistics.
pub fn load_agent(
    run_dir: &Path,
) -> Result<(PpoConfig, Agent, Option<crate::normalize::RunningMeanStd>), LearnError> {
    let ck = RunDir::open(run_dir)?.load_checkpoint()?;
    let cfg = ck.meta.config;
    let spec = rlrig_env::spec(&cfg.env)?;
    crate::check_env(&cfg.env, &cfg.env_args)?;
    let mut rng = rlrig_env::Rng::stream(cfg.seed, rlrig_env::Purpose::Init, 0);
    let mut agent = Agent::for_config(&spec, &cfg, &mut rng);
    if agent.params.len() != ck.params.len() {
        return Err(LearnError::Mismatch(format!(
            "{}: checkpoint has {} parameters but {} with hidden {:?} needs {}",
            run_dir.display(),
            ck.params.len(),
            cfg.env,
            cfg.hidden,
            agent.params.len()
        )));
    }
    agent.params = ck.params;
    Ok((cfg, agent, ck.meta.state.obs_rms))
}

/// The greedy policy of the newest checkpoint in `run_dir`, whichever algorithm wrote
/// it, with the env (and its args) it acts in and the run's seed.
pub struct LoadedPolicy {
    pub env: String,
    pub args: crate::EnvArgs,
    pub seed: u64,
    pub policy: Box<dyn Greedy>,
}

/// Loads [`LoadedPolicy`]; AlphaZero runs (board games against an opponent) have none.
pub fn load_policy(run_dir: &Path) -> Result<LoadedPolicy, LearnError> {
    let (env, args, seed, policy): (_, _, _, Box<dyn Greedy>) = match RunKind::of(run_dir)? {
        RunKind::Ppo => {
            let (cfg, agent, rms) = load_agent(run_dir)?;
            let (env, args, seed) = (cfg.env.clone(), cfg.env_args.clone(), cfg.seed);
            (
                env,
                args,
                seed,
                Box::new(crate::ppo::PpoGreedy::new(agent, rms, cfg)),
            )
        }
        RunKind::Evolution => {
            let (cfg, p, best) = load_evolution(run_dir)?;
            (cfg.env, cfg.env_args, cfg.seed, Box::new(p.greedy(best)))
        }
        RunKind::OffPolicy => {
            let (cfg, nets) = load_offpolicy(run_dir)?;
            (
                cfg.env,
                cfg.env_args,
                cfg.seed,
                Box::new(nets.into_greedy()),
            )
        }
        RunKind::Dqn => {
            let (cfg, net) = load_dqn(run_dir)?;
            (cfg.env, cfg.env_args, cfg.seed, Box::new(net.greedy()))
        }
        RunKind::AlphaZero => {
            return Err(LearnError::Mismatch(format!(
                "{}: an AlphaZero run is evaluated in games (rlrig eval --run DIR --opponent random|solver:D|run:DIR) and played in the terminal (rlrig play --run DIR)",
                run_dir.display()
            )));
        }
    };
    Ok(LoadedPolicy {
        env,
        args,
        seed,
        policy,
    })
}

/// Greedy evaluation of the newest checkpoint in `run_dir`.
pub fn eval_run(
    run_dir: &Path,
    episodes: usize,
    seed: Option<u64>,
) -> Result<EvalSummary, LearnError> {
    if RunKind::of(run_dir)? == RunKind::Evolution {
        // Fitness episode by episode (each seeded on its own), as training scored it.
        let (cfg, policy, best) = load_evolution(run_dir)?;
        check_eval_memory(&cfg.env, episodes, "--episodes")?;
        let seed = seed.unwrap_or(cfg.seed + EVAL_SEED_OFFSET);
        let e = policy.episodes(&cfg.env, &cfg.env_args, &best, episodes.max(1), seed);
        return Ok(EvalSummary::of(&e, seed));
    }
    let mut p = load_policy(run_dir)?;
    check_eval_memory(&p.env, episodes, "--episodes")?;
    let seed = seed.unwrap_or(p.seed + EVAL_SEED_OFFSET);
    let e = crate::eval::run_episodes(p.policy.as_mut(), &p.env, &p.args, episodes.max(1), seed);
    Ok(EvalSummary::of(&e, seed))
}

/// One recorded episode: the internal state (`env.unwrapped.state`) before every
/// step and after the last one, with the undiscounted return up to each state.
pub struct Recording {
    pub states: Vec<Vec<f64>>,
    pub returns: Vec<f64>,
}

/// Plays `episodes` greedy episodes of the newest checkpoint in `run_dir` and records
/// their states, for rendering. Episode `e` is seeded with `seed + e`.
pub fn record_episodes(
    run_dir: &Path,
    episodes: usize,
    seed: Option<u64>,
) -> Result<(String, Vec<Recording>), LearnError> {
    struct V<'a> {
        policy: &'a mut dyn Greedy,
        args: &'a crate::EnvArgs,
        episodes: usize,
        seed: u64,
    }
    impl rlrig_env::EnvVisitor for V<'_> {
        type Output = Vec<Recording>;
        fn visit<E: rlrig_env::Env>(self) -> Vec<Recording> {
            let mut out = Vec::new();
            for e in 0..self.episodes {
                let mut env = rlrig_env::SyncVecEnv::<E>::new(
                    crate::env_config(1, self.args)
                        .seed(self.seed + e as u64)
                        .episode_cap(crate::MAX_EVAL_STEPS),
                )
                .expect("the loaders check the env args");
                let mut rec = Recording {
                    states: vec![E::render_state(env.state(0))],
                    returns: vec![0.0],
                };
                let mut scratch = Vec::new();
                loop {
                    let obs = rlrig_env::VecEnvDyn::obs(&env);
                    let buf = self.policy.act(obs.f32_in(&mut scratch), 1);
                    rlrig_env::VecEnvDyn::step(&mut env, buf)
                        .expect("the policy only emits valid actions");
                    let ret = rec.returns.last().copied().unwrap_or(0.0) + env.rewards()[0];
                    rec.returns.push(ret);
                    rec.states.push(E::render_state(env.state(0)));
                    if env.terminated()[0] || env.truncated()[0] {
                        break;
                    }
                }
                out.push(rec);
            }
            out
        }
    }
    let mut p = load_policy(run_dir)?;
    let v = V {
        policy: p.policy.as_mut(),
        args: &p.args,
        episodes: episodes.max(1),
        seed: seed.unwrap_or(p.seed + EVAL_SEED_OFFSET),
    };
    let recs = rlrig_env::visit(&p.env, v)?;
    Ok((p.env, recs))
}

/// The config and network of the newest checkpoint of an AlphaZero run.
pub fn load_alphazero(
    run_dir: &Path,
) -> Result<(crate::alphazero::AzConfig, crate::alphazero::PolicyValue), LearnError> {
    use crate::alphazero::{AzConfig, AzState, PolicyValue};
    let mut ck = RunDir::open(run_dir)?.load_tensors::<AzConfig, AzState>("alphazero")?;
    let cfg = checked_config(run_dir, ck.meta.config, AzConfig::validate)?;
    let mut rng = rlrig_env::Rng::stream(cfg.seed, rlrig_env::Purpose::Init, 0);
    let mut net = PolicyValue::for_config(&cfg, &mut rng);
    let params = ck.tensors.remove("params").unwrap_or_default();
    if params.len() != net.params.len() {
        return Err(LearnError::Mismatch(format!(
            "{}: checkpoint has {} parameters, hidden {:?} needs {}",
            run_dir.display(),
            params.len(),
            cfg.hidden,
            net.params.len()
        )));
    }
    net.params = params;
    Ok((cfg, net))
}

/// The config, policy and deployed parameters of an ES/GA run's newest checkpoint.
pub fn load_evolution(
    run_dir: &Path,
) -> Result<
    (
        crate::evolution::EvoConfig,
        crate::evolution::EvoPolicy,
        Vec<f32>,
    ),
    LearnError,
> {
    use crate::evolution::{EvoConfig, EvoPolicy, EvoState};
    let dir = RunDir::open(run_dir)?;
    let algo = dir.algo()?;
    let mut ck = dir.load_tensors::<EvoConfig, EvoState>(&algo)?;
    let cfg = ck.meta.config;
    crate::check_env(&cfg.env, &cfg.env_args)?;
    let policy = EvoPolicy::new(&cfg)?;
    let best = ck.tensors.remove("best").unwrap_or_default();
    if best.len() != policy.num_params() {
        return Err(LearnError::Mismatch(format!(
            "{}: checkpoint policy has {} parameters, {} with hidden {:?} needs {}",
            run_dir.display(),
            best.len(),
            cfg.env,
            cfg.hidden,
            policy.num_params()
        )));
    }
    Ok((cfg, policy, best))
}

/// The config and networks of the newest checkpoint of a DDPG/TD3/SAC run.
pub fn load_offpolicy(run_dir: &Path) -> Result<(OffPolicyConfig, Nets), LearnError> {
    let dir = RunDir::open(run_dir)?;
    let algo = dir.algo()?;
    let mut ck = dir.load_tensors::<OffPolicyConfig, OffPolicyState>(&algo)?;
    let cfg = checked_config(run_dir, ck.meta.config, OffPolicyConfig::validate)?;
    let spec = rlrig_env::spec(&cfg.env)?;
    let mut nets = Nets::new(&cfg, spec.obs_dim, &spec.action_space);
    let actor = ck.tensors.remove("actor").unwrap_or_default();
    nets.actor_params = checked_params(
        run_dir,
        "actor",
        actor,
        &nets.actor_params,
        &cfg.env,
        &cfg.hidden,
    )?;
    Ok((cfg, nets))
}

/// The config and Q-network of the newest checkpoint of a DQN run.
pub fn load_dqn(run_dir: &Path) -> Result<(DqnConfig, QNet), LearnError> {
    let dir = RunDir::open(run_dir)?;
    let mut ck = dir.load_tensors::<DqnConfig, DqnState>("dqn")?;
    let cfg = checked_config(run_dir, ck.meta.config, DqnConfig::validate)?;
    let spec = rlrig_env::spec(&cfg.env)?;
    let mut net = QNet::new(&cfg, spec.obs_dim, &spec.action_space);
    let q = ck.tensors.remove("q").unwrap_or_default();
    net.params = checked_params(run_dir, "Q-network", q, &net.params, &cfg.env, &cfg.hidden)?;
    Ok((cfg, net))
}

/// A checkpoint's config, checked as a new run's is by `validate`; an error names the
/// run directory.
fn checked_config<C>(
    run_dir: &Path,
    cfg: C,
    validate: impl FnOnce(&C) -> Result<(), LearnError>,
) -> Result<C, LearnError> {
    validate(&cfg).map_err(|e| LearnError::Mismatch(format!("{}: {e}", run_dir.display())))?;
    Ok(cfg)
}

/// `loaded` when it has as many parameters as the freshly built `fresh`, else an error
/// naming the run, the network and both sizes.
fn checked_params(
    run_dir: &Path,
    what: &str,
    loaded: Vec<f32>,
    fresh: &[f32],
    env: &str,
    hidden: &[usize],
) -> Result<Vec<f32>, LearnError> {
    if loaded.len() != fresh.len() {
        return Err(LearnError::Mismatch(format!(
            "{}: checkpoint {what} has {} parameters but {env} with hidden {hidden:?} needs {}",
            run_dir.display(),
            loaded.len(),
            fresh.len()
        )));
    }
    Ok(loaded)
}
