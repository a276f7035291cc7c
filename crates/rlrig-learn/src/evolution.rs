//! Evolution: OpenAI-ES (Salimans et al. 2017), the genetic algorithm of Such et al.
//! (2017), and a pruning GA whose genome is the connection mask of a fixed network.
//!
//! Policies are small tanh MLPs on the native CPU path: discrete actions take the
//! arg-max output, continuous ones `tanh(output)` scaled to the action bounds. A
//! member's fitness is its mean undiscounted return over `episodes_per_member`
//! episodes, run as one batch of envs seeded by (run seed, generation, member); members
//! are evaluated in parallel on `threads` threads and gathered in member order, and
//! every random draw is keyed by (seed, generation, member), so results are
//! bit-identical for any thread count.

use std::borrow::Cow;

use rayon::prelude::*;
use rlrig_env::{ActionBuf, Purpose, Rng, Space};
use serde::{Deserialize, Serialize};

use crate::nn::{Mlp, MlpCache, normal};
use crate::optim::Adam;

/// Combines the work of several processes (MPI ranks). Every rank runs the same
/// generation; member `i` is evaluated by rank `i % size`, and the fitness vectors are
/// gathered so that every rank makes the same update. Results therefore equal a
/// single-process run's, bit for bit.
pub trait Collective: Send + Sync {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Every rank's `local` (the same length on all), concatenated in rank order.
    fn allgather(&self, local: &[f64]) -> Vec<f64>;
}

/// Which evolutionary method.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Es,
    Ga,
}

/// Hyperparameters (defaults: OpenAI-ES's and Such et al.'s, scaled to small tasks).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvoConfig {
    pub method: Method,
    pub env: String,
    /// Env parameters (`--env-arg KEY=VALUE`; see [`crate::EnvArgs`]).
    #[serde(deserialize_with = "crate::env_args_serde::deserialize")]
    pub env_args: crate::EnvArgs,
    pub seed: u64,
    /// Members per generation (ES: an even number, mirrored pairs).
    pub population: usize,
    pub generations: u64,
    pub episodes_per_member: usize,
    /// Hidden layer sizes of the policy (tanh).
    pub hidden: Vec<usize>,
    /// Noise scale: ES perturbation / GA mutation std.
    pub sigma: f64,
    /// ES: Adam step size and L2 coefficient.
    pub learning_rate: f64,
    pub weight_decay: f64,
    /// GA: parents kept per generation (truncation selection).
    pub truncation: usize,
    /// GA: the best `elite_candidates` are re-evaluated on `elite_episodes` more
    /// episodes; the best of them survives unchanged.
    pub elite_candidates: usize,
    pub elite_episodes: usize,
    /// GA: evolve the connection mask of a fixed random network instead of weights;
    /// each mutation removes `prune_fraction` of the remaining connections.
    pub prune: bool,
    pub prune_fraction: f64,
    /// Generations between checkpoints (0: only at the end).
    pub checkpoint_every: u64,
}

impl Default for EvoConfig {
    fn default() -> Self {
        EvoConfig {
            method: Method::Es,
            env: "CartPole-v1".into(),
            env_args: crate::EnvArgs::new(),
            seed: 1,
            population: 64,
            generations: 100,
            episodes_per_member: 2,
            hidden: vec![16],
            sigma: 0.05,
            learning_rate: 0.03,
            weight_decay: 0.005,
            truncation: 10,
            elite_candidates: 5,
            elite_episodes: 10,
            prune: false,
            prune_fraction: 0.05,
            checkpoint_every: 10,
        }
    }
}

impl EvoConfig {
    pub fn for_env(method: Method, env: &str) -> EvoConfig {
        let mut c = EvoConfig {
            method,
            env: env.to_string(),
            ..EvoConfig::default()
        };
        if method == Method::Ga {
            c.sigma = 0.1;
            c.population = 64;
        }
        if env == "Pendulum-v1" {
            // Measured: -171 (greedy, 20 episodes) after 300 generations (~5 s here).
            c.hidden = vec![16, 16];
            c.generations = 300;
            c.population = 128;
            c.episodes_per_member = 4;
            c.sigma = 0.1;
            c.learning_rate = 0.05;
            c.checkpoint_every = 50;
        }
        c
    }

    /// What the run's large buffers take: the population's genomes (GA: two
    /// generations' worth; ES keeps a centre and draws its noise from counters) and
    /// the fitness evaluation's envs (one member's at a time per thread, not counted).
    pub fn memory_estimate(&self) -> crate::memory::Estimate {
        let Ok(spec) = rlrig_env::spec(&self.env) else {
            return crate::memory::Estimate::new();
        };
        let params =
            crate::memory::mlp_params(spec.obs_dim, &self.hidden, spec.action_space.flat_dim());
        let genomes = match self.method {
            Method::Ga => 2.0 * self.population as f64,
            Method::Es => 4.0,
        };
        crate::memory::Estimate::new().add(
            format!("population of {} x {params} parameters", self.population),
            genomes * params * 4.0,
        )
    }

    pub fn validate(&self) -> Result<(), String> {
        rlrig_env::spec(&self.env).map_err(|e| e.to_string())?;
        crate::check_env(&self.env, &self.env_args)?;
        if self.population < 2 || self.generations == 0 || self.episodes_per_member == 0 {
            return Err(
                "population must be at least 2, generations and episodes_per_member at least 1"
                    .into(),
            );
        }
        if self.method == Method::Es && !self.population.is_multiple_of(2) {
            return Err(format!(
                "ES uses mirrored pairs: population must be even, got {}",
                self.population
            ));
        }
        if self.method == Method::Ga {
            if self.truncation == 0 || self.truncation > self.population {
                return Err(format!(
                    "truncation must lie in 1..=population ({}), got {}",
                    self.population, self.truncation
                ));
            }
            if self.elite_candidates == 0 || self.elite_candidates > self.truncation {
                return Err(format!(
                    "elite_candidates ({}) must lie in 1..=truncation ({}): the population is smaller than the elite",
                    self.elite_candidates, self.truncation
                ));
            }
        }
        if self.prune && self.method != Method::Ga {
            return Err("prune is a GA option (rlrig train ga --prune)".into());
        }
        if self.hidden.contains(&0) {
            return Err(format!(
                "hidden sizes must be positive, got {:?}",
                self.hidden
            ));
        }
        for (v, n) in [(self.sigma, "sigma"), (self.learning_rate, "learning_rate")] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{n} must be positive, got {v}"));
            }
        }
        let wd_ok = self.weight_decay.is_finite() && self.weight_decay >= 0.0;
        if !(0.0..1.0).contains(&self.prune_fraction) || !wd_ok {
            return Err("prune_fraction must lie in [0, 1) and weight_decay be >= 0".into());
        }
        Ok(())
    }
}

/// An evolved policy with its parameters, acting greedily (borrowed while a run
/// scores its members, owned when loaded from a checkpoint).
pub struct EvoGreedy<'a> {
    policy: Cow<'a, EvoPolicy>,
    params: Cow<'a, [f32]>,
    cache: MlpCache,
    ai: Vec<i32>,
    af: Vec<f32>,
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

    fn export(&self) -> Result<crate::export::PolicyExport, String> {
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
    space: Space,
}

impl EvoPolicy {
    pub fn new(cfg: &EvoConfig) -> Result<EvoPolicy, String> {
        let spec = rlrig_env::spec(&cfg.env).map_err(|e| e.to_string())?;
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
    /// policy: [`EvoPolicy::fitness`] averages a batch, this keeps the spread.
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

    /// Mean return of `params` over `episodes` episodes whose envs are seeded by `seed`.
    pub fn fitness(
        &self,
        env: &str,
        args: &crate::EnvArgs,
        params: &[f32],
        episodes: usize,
        seed: u64,
    ) -> f64 {
        self.run(env, args, params, episodes, seed).mean_return()
    }

    fn run(
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

/// The env seed of one member's episodes: a mix of (run seed, generation, member).
pub fn episode_seed(seed: u64, generation: u64, member: u64) -> u64 {
    // SplitMix64 finaliser over a combination; distinct inputs give unrelated seeds.
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(generation.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(member.wrapping_mul(0x94D0_49BB_1331_11EB))
        .wrapping_add(0x2545_F491_4F6C_DD1D);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Member index used for the ES centre's and the GA elite's extra evaluations.
const EXTRA: u64 = u64::MAX;

/// Centred ranks in [-0.5, 0.5] (ties broken by index, as a stable sort).
pub fn centered_ranks(x: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let denom = (x.len().max(2) - 1) as f64;
    for (rank, &i) in idx.iter().enumerate() {
        r[i] = rank as f64 / denom - 0.5;
    }
    r
}

/// Metrics of one generation.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GenStats {
    pub generation: u64,
    pub episodes: u64,
    pub best_fitness: f64,
    pub mean_fitness: f64,
    /// ES: the centre's fitness on fresh episodes; GA: the elite's re-evaluated fitness.
    pub center_fitness: f64,
}

/// Checkpointed state besides tensors.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EvoState {
    pub generation: u64,
    pub episodes: u64,
    pub adam: Option<Adam>,
}

/// An ES or GA run.
pub struct Evolution {
    pub cfg: EvoConfig,
    pub policy: EvoPolicy,
    /// ES: the centre. GA: unused (empty).
    pub theta: Vec<f32>,
    adam: Adam,
    /// GA: the population's genomes (weights, or masks with `prune`), row-major.
    pub population: Vec<f32>,
    /// Pruning GA: the fixed weights the masks select from.
    base: Vec<f32>,
    pub generation: u64,
    pub episodes: u64,
    pool: rayon::ThreadPool,
    collective: Option<Box<dyn Collective>>,
}

impl Evolution {
    pub fn new(cfg: EvoConfig, threads: usize) -> Result<Evolution, String> {
        cfg.validate()?;
        let policy = EvoPolicy::new(&cfg)?;
        let n = policy.num_params();
        let mut rng = Rng::stream(cfg.seed, Purpose::Init, 0);
        let mut theta = vec![0.0; n];
        policy.mlp.init_torch_default(&mut theta, &mut rng);
        let mut population = Vec::new();
        let mut base = Vec::new();
        if cfg.method == Method::Ga {
            if cfg.prune {
                // Fixed weights (scaled up so a sparse net still drives its outputs);
                // every genome starts fully connected.
                base = theta.iter().map(|w| 2.0 * w).collect();
                population = vec![1.0; cfg.population * n];
            } else {
                population = vec![0.0; cfg.population * n];
                for (m, row) in population.chunks_mut(n).enumerate() {
                    let mut r = Rng::stream(cfg.seed, Purpose::Init, 1 + m as u64);
                    policy.mlp.init_torch_default(row, &mut r);
                }
            }
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Evolution {
            adam: Adam::new(n, 1e-8),
            theta,
            population,
            base,
            generation: 0,
            episodes: 0,
            pool,
            collective: None,
            policy,
            cfg,
        })
    }

    pub fn done(&self) -> bool {
        self.generation >= self.cfg.generations
    }

    /// Spreads member evaluations over the ranks of `c` (see [`Collective`]).
    pub fn set_collective(&mut self, c: Box<dyn Collective>) {
        self.collective = Some(c);
    }

    /// The parameters a genome stands for (a mask applies to weights, not biases).
    fn params_of(&self, genome: &[f32], out: &mut Vec<f32>) {
        out.clear();
        if self.cfg.prune {
            out.extend(genome.iter().zip(&self.base).map(|(m, w)| m * w));
        } else {
            out.extend_from_slice(genome);
        }
    }

    /// Fitness of each of `count` members, built by `member(i, &mut params)`, in order.
    fn evaluate_all(
        &self,
        count: usize,
        episodes: usize,
        member: impl Fn(usize, &mut Vec<f32>) + Sync,
        seed_of: impl Fn(usize) -> u64 + Sync,
    ) -> Vec<f64> {
        let policy = &self.policy;
        let (env, args) = (&self.cfg.env, &self.cfg.env_args);
        let (rank, size) = self
            .collective
            .as_ref()
            .map_or((0, 1), |c| (c.rank(), c.size()));
        let local: Vec<f64> = self.pool.install(|| {
            (0..count)
                .into_par_iter()
                .map_init(Vec::new, |buf, i| {
                    if i % size != rank {
                        return f64::NAN; // another rank's member
                    }
                    member(i, buf);
                    policy.fitness(env, args, buf, episodes, seed_of(i))
                })
                .collect()
        });
        match &self.collective {
            None => local,
            Some(c) => {
                let all = c.allgather(&local);
                (0..count).map(|i| all[(i % size) * count + i]).collect()
            }
        }
    }

    /// The stop every rank agrees on, given this rank's: without MPI ranks, `local`;
    /// with them, the first stop any rank got (by signal number, the same on every
    /// rank), so all ranks stop after the same generation and checkpoint the same state.
    /// A collective call: every rank makes it once per generation.
    pub fn agree_stop(&self, local: Option<crate::stop::Stop>) -> Option<crate::stop::Stop> {
        let Some(c) = &self.collective else {
            return local;
        };
        let mine = local.map_or(0.0, |s| s.signal() as f64);
        c.allgather(&[mine])
            .into_iter()
            .filter(|&x| x > 0.0)
            .map(|x| x as usize)
            .min()
            .and_then(crate::stop::Stop::from_signal)
    }

    /// One generation.
    pub fn step(&mut self) -> GenStats {
        match self.cfg.method {
            Method::Es => self.es_step(),
            Method::Ga => self.ga_step(),
        }
    }

    fn es_noise(&self, pair: usize, out: &mut Vec<f32>) {
        let n = self.theta.len();
        let pairs = self.cfg.population / 2;
        let mut rng = Rng::stream(
            self.cfg.seed,
            Purpose::Policy,
            self.generation * pairs as u64 + pair as u64,
        );
        out.clear();
        out.extend((0..n).map(|_| normal(&mut rng) as f32));
    }

    fn es_step(&mut self) -> GenStats {
        let (cfg, g) = (&self.cfg, self.generation);
        let sigma = cfg.sigma as f32;
        let e = cfg.episodes_per_member;
        // Members 2i and 2i+1 are theta + sigma eps_i and theta - sigma eps_i.
        let fit = self.evaluate_all(
            cfg.population,
            e,
            |i, buf| {
                self.es_noise(i / 2, buf);
                let sign = if i % 2 == 0 { sigma } else { -sigma };
                for (x, t) in buf.iter_mut().zip(&self.theta) {
                    *x = t + sign * *x;
                }
            },
            |i| episode_seed(cfg.seed, g, i as u64),
        );
        let ranks = centered_ranks(&fit);
        let n = self.theta.len();
        let mut grad = vec![0.0f32; n];
        let mut eps = Vec::new();
        for pair in 0..cfg.population / 2 {
            self.es_noise(pair, &mut eps);
            let w = (ranks[2 * pair] - ranks[2 * pair + 1]) as f32;
            for (g, x) in grad.iter_mut().zip(&eps) {
                *g += w * x;
            }
        }
        // Adam minimises: the loss gradient is -g_hat + weight_decay * theta.
        let inv = 1.0 / cfg.population as f32;
        let wd = cfg.weight_decay as f32;
        for (gr, t) in grad.iter_mut().zip(&self.theta) {
            *gr = -*gr * inv + wd * t;
        }
        let lr = cfg.learning_rate;
        self.adam.step(&mut self.theta, &grad, lr);
        let center = self.policy.fitness(
            &self.cfg.env,
            &self.cfg.env_args,
            &self.theta,
            self.cfg.episodes_per_member.max(5),
            episode_seed(self.cfg.seed, g, EXTRA),
        );
        self.episodes += (self.cfg.population * e + e.max(5)) as u64;
        self.generation += 1;
        GenStats {
            generation: self.generation,
            episodes: self.episodes,
            best_fitness: fit.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean_fitness: fit.iter().sum::<f64>() / fit.len() as f64,
            center_fitness: center,
        }
    }

    fn ga_step(&mut self) -> GenStats {
        let (cfg, g) = (&self.cfg, self.generation);
        let n = self.policy.num_params();
        let p = cfg.population;
        let e = cfg.episodes_per_member;
        let fit = self.evaluate_all(
            p,
            e,
            |i, buf| self.params_of(&self.population[i * n..(i + 1) * n], buf),
            |i| episode_seed(cfg.seed, g, i as u64),
        );
        let mut order: Vec<usize> = (0..p).collect();
        order.sort_by(|&a, &b| fit[b].total_cmp(&fit[a]));
        let parents: Vec<usize> = order[..cfg.truncation].to_vec();
        // Elite: the best candidate on more episodes (fresh seeds).
        let cands = &parents[..cfg.elite_candidates];
        let extra = self.evaluate_all(
            cands.len(),
            cfg.elite_episodes,
            |k, buf| self.params_of(&self.population[cands[k] * n..(cands[k] + 1) * n], buf),
            |k| episode_seed(cfg.seed ^ 0x5A5A, g, cands[k] as u64),
        );
        let best_k = (0..cands.len()).fold(0, |b, k| if extra[k] > extra[b] { k } else { b });
        let elite = cands[best_k];
        let mut next = vec![0.0f32; p * n];
        next[..n].copy_from_slice(&self.population[elite * n..(elite + 1) * n]);
        for child in 1..p {
            let mut rng = Rng::stream(cfg.seed, Purpose::Policy, g * p as u64 + child as u64);
            let parent = parents[rng.below(parents.len() as u32) as usize];
            let (src, dst) = (
                &self.population[parent * n..(parent + 1) * n],
                &mut next[child * n..(child + 1) * n],
            );
            if cfg.prune {
                // Remove a fraction of the remaining weight connections (biases stay).
                dst.copy_from_slice(src);
                for (j, m) in dst.iter_mut().enumerate() {
                    let u = rng.unit_f64();
                    if *m > 0.0 && !self.policy.is_bias(j) && u < cfg.prune_fraction {
                        *m = 0.0;
                    }
                }
            } else {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = s + cfg.sigma as f32 * normal(&mut rng) as f32;
                }
            }
        }
        self.population = next;
        self.episodes += (p * e + cands.len() * cfg.elite_episodes) as u64;
        self.generation += 1;
        GenStats {
            generation: self.generation,
            episodes: self.episodes,
            best_fitness: fit[order[0]],
            mean_fitness: fit.iter().sum::<f64>() / p as f64,
            center_fitness: extra[best_k],
        }
    }

    /// The parameters to deploy: the ES centre or the GA elite (member 0 after a step).
    pub fn best_params(&self) -> Vec<f32> {
        match self.cfg.method {
            Method::Es => self.theta.clone(),
            Method::Ga => {
                let n = self.policy.num_params();
                let mut out = Vec::new();
                self.params_of(&self.population[..n], &mut out);
                out
            }
        }
    }

    pub fn state(&self) -> (EvoState, Vec<(&'static str, &[f32])>) {
        let mut t: Vec<(&'static str, &[f32])> = vec![("theta", &self.theta)];
        if self.cfg.method == Method::Es {
            t.push(("adam_m", &self.adam.m));
            t.push(("adam_v", &self.adam.v));
        } else {
            t.push(("population", &self.population));
        }
        (
            EvoState {
                generation: self.generation,
                episodes: self.episodes,
                adam: (self.cfg.method == Method::Es).then(|| self.adam.clone()),
            },
            t,
        )
    }

    pub fn restore(
        &mut self,
        st: EvoState,
        mut get: impl FnMut(&str) -> Option<Vec<f32>>,
    ) -> Result<(), String> {
        let mut take = |name: &str, len: usize| crate::run::take_tensor(&mut get, name, len);
        let n = self.theta.len();
        self.theta = take("theta", n)?;
        if self.cfg.method == Method::Es {
            let mut adam = st.adam.ok_or("ES checkpoint without optimiser state")?;
            adam.m = take("adam_m", n)?;
            adam.v = take("adam_v", n)?;
            self.adam = adam;
        } else {
            self.population = take("population", self.population.len())?;
        }
        self.generation = st.generation;
        self.episodes = st.episodes;
        Ok(())
    }
}

impl EvoPolicy {
    /// Whether parameter `j` is a bias.
    pub fn is_bias(&self, j: usize) -> bool {
        self.mlp.is_bias(j)
    }
}

/// metrics.csv columns of ES/GA runs: learning metrics first (deterministic), then
/// wall-clock time.
pub const EVO_METRICS_HEADER: &str =
    "generation,episodes,best_fitness,mean_fitness,center_fitness,seconds,generations_per_sec";

/// Number of leading deterministic columns of [`EVO_METRICS_HEADER`].
pub const EVO_DETERMINISTIC_COLUMNS: usize = 5;

impl EvoConfig {
    /// The checkpoints' `algo`: `es` or `ga`.
    pub fn algo(&self) -> &'static str {
        match self.method {
            Method::Es => "es",
            Method::Ga => "ga",
        }
    }
}

/// With a [`Collective`] (MPI ranks), every rank computes the same generations and
/// reads a checkpoint to resume; only rank 0 writes the run directory.
impl crate::driver::Algorithm for Evolution {
    type Config = EvoConfig;
    type State = EvoState;
    type Stats = GenStats;
    type Mark = ();

    const METRICS_HEADER: &'static str = EVO_METRICS_HEADER;
    const DETERMINISTIC_COLUMNS: usize = EVO_DETERMINISTIC_COLUMNS;

    fn build(cfg: EvoConfig, threads: usize) -> Result<Evolution, String> {
        Evolution::new(cfg, threads)
    }
    fn shape(c: &EvoConfig) -> crate::driver::RunShape<'_> {
        crate::driver::RunShape {
            algo: c.algo(),
            env: &c.env,
            seed: c.seed,
            budget: c.generations,
            num_envs: c.population,
            checkpoint_every: c.checkpoint_every,
            lower: "--population or hidden",
        }
    }
    fn memory_estimate(c: &EvoConfig) -> crate::memory::Estimate {
        c.memory_estimate()
    }
    fn config(&self) -> &EvoConfig {
        &self.cfg
    }
    fn device(&self) -> String {
        "cpu".into()
    }
    fn set_backend(&mut self, _maker: &crate::backend::BackendMaker) -> Result<(), String> {
        Err("es and ga run on the native CPU path only".into())
    }
    fn done(&self) -> bool {
        Evolution::done(self)
    }
    fn position(&self) -> u64 {
        self.generation
    }
    fn work(&self) -> u64 {
        self.generation
    }
    fn mark(&self) {}
    fn iterate(&mut self, _turn: &crate::driver::Turn<'_>) -> Option<GenStats> {
        Some(self.step())
    }
    fn record(&self, s: &GenStats, _: &(), secs: f64) -> crate::driver::Record {
        crate::driver::Record {
            row: format!(
                "{},{},{},{},{},{:.6},{:.3}",
                s.generation,
                s.episodes,
                s.best_fitness,
                s.mean_fitness,
                s.center_fitness,
                secs,
                1.0 / secs
            ),
            step: s.generation,
            scalars: vec![
                ("fitness/best", s.best_fitness),
                ("fitness/mean", s.mean_fitness),
                ("fitness/center_or_elite", s.center_fitness),
                ("charts/episodes", s.episodes as f64),
                ("time/generation", secs),
            ],
            rate: 1.0 / secs,
            episode_return: f64::NAN,
        }
    }
    fn checkpoint(&self, dir: &crate::run::RunDir) -> Result<(), crate::run::RunError> {
        let (state, mut tensors) = self.state();
        let best = self.best_params();
        tensors.push(("best", &best));
        dir.save_tensors(
            self.cfg.algo(),
            self.generation,
            &self.cfg,
            &state,
            &tensors,
        )?;
        Ok(())
    }
    fn restore(
        &mut self,
        st: EvoState,
        get: &mut dyn FnMut(&str) -> Option<Vec<f32>>,
    ) -> Result<(), String> {
        Evolution::restore(self, st, get)
    }
    /// The deployed policy (ES centre, GA elite), episode by episode.
    fn evaluate(&self, episodes: usize, seed: u64) -> Option<crate::eval::Episodes> {
        let c = &self.cfg;
        Some(
            self.policy
                .episodes(&c.env, &c.env_args, &self.best_params(), episodes, seed),
        )
    }
    fn agree_stop(&self, local: Option<crate::stop::Stop>) -> Option<crate::stop::Stop> {
        Evolution::agree_stop(self, local)
    }
    fn writes(&self) -> bool {
        self.collective.as_ref().is_none_or(|c| c.rank() == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centered_ranks_span_minus_half_to_half() {
        assert_eq!(centered_ranks(&[3.0, 1.0, 2.0]), vec![0.5, -0.5, 0.0]);
        let r = centered_ranks(&[5.0; 4]);
        assert_eq!(r, vec![-0.5, -0.5 + 1.0 / 3.0, -0.5 + 2.0 / 3.0, 0.5]);
    }

    #[test]
    fn episode_seeds_differ_per_member_and_generation() {
        let s: std::collections::HashSet<u64> = (0..50)
            .flat_map(|g| (0..50).map(move |m| episode_seed(1, g, m)))
            .collect();
        assert_eq!(s.len(), 2500);
    }

    #[test]
    fn bad_configs_are_refused() {
        let mut c = EvoConfig::for_env(Method::Es, "CartPole-v1");
        c.population = 7;
        assert!(c.validate().unwrap_err().contains("even"));
        let mut c = EvoConfig::for_env(Method::Ga, "CartPole-v1");
        c.population = 4;
        c.truncation = 4;
        c.elite_candidates = 5;
        assert!(c.validate().unwrap_err().contains("smaller than the elite"));
        let mut c = EvoConfig::for_env(Method::Es, "CartPole-v1");
        c.prune = true;
        assert!(c.validate().unwrap_err().contains("GA option"));
    }

    /// The same run with 1 and 2 threads gives identical statistics and parameters,
    /// for ES, GA and the pruning GA.
    #[test]
    fn thread_count_does_not_change_results() {
        for (method, prune) in [(Method::Es, false), (Method::Ga, false), (Method::Ga, true)] {
            let cfg = EvoConfig {
                generations: 3,
                population: 12,
                truncation: 4,
                elite_candidates: 2,
                elite_episodes: 2,
                prune,
                ..EvoConfig::for_env(method, "CartPole-v1")
            };
            let run = |threads| {
                let mut e = Evolution::new(cfg.clone(), threads).unwrap();
                let stats: Vec<GenStats> = (0..3).map(|_| e.step()).collect();
                (format!("{stats:?}"), e.best_params())
            };
            assert_eq!(run(1), run(2), "{method:?} prune {prune}");
        }
    }

    #[test]
    fn pruning_removes_connections_but_never_biases() {
        let cfg = EvoConfig {
            generations: 2,
            population: 8,
            truncation: 4,
            elite_candidates: 2,
            prune: true,
            prune_fraction: 0.3,
            ..EvoConfig::for_env(Method::Ga, "CartPole-v1")
        };
        let mut e = Evolution::new(cfg, 1).unwrap();
        e.step();
        e.step();
        let n = e.policy.num_params();
        let child = &e.population[n..2 * n];
        let removed = child.iter().filter(|&&m| m == 0.0).count();
        assert!(removed > 0);
        for (j, m) in child.iter().enumerate() {
            assert!(*m == 0.0 || *m == 1.0);
            if e.policy.is_bias(j) {
                assert_eq!(*m, 1.0);
            }
        }
    }

    /// A run restored from its state after generation 2 continues exactly.
    #[test]
    fn restore_continues_bit_for_bit() {
        for method in [Method::Es, Method::Ga] {
            let cfg = EvoConfig {
                population: 10,
                truncation: 4,
                elite_candidates: 2,
                ..EvoConfig::for_env(method, "CartPole-v1")
            };
            let mut a = Evolution::new(cfg.clone(), 1).unwrap();
            a.step();
            a.step();
            let (st, t) = a.state();
            let map: std::collections::HashMap<&str, Vec<f32>> =
                t.into_iter().map(|(k, v)| (k, v.to_vec())).collect();
            let mut b = Evolution::new(cfg, 2).unwrap();
            b.restore(st, |k| map.get(k).cloned()).unwrap();
            for _ in 0..2 {
                assert_eq!(format!("{:?}", a.step()), format!("{:?}", b.step()));
            }
            assert_eq!(a.best_params(), b.best_params());
        }
    }

    /// Two "ranks" in threads, exchanging through a shared board, give the same
    /// history as one process.
    #[test]
    fn ranks_split_members_and_agree_with_one_process() {
        use std::sync::{Arc, Barrier, Mutex};
        struct Fake {
            rank: usize,
            board: Arc<Mutex<Vec<Vec<f64>>>>,
            barrier: Arc<Barrier>,
        }
        impl Collective for Fake {
            fn rank(&self) -> usize {
                self.rank
            }
            fn size(&self) -> usize {
                2
            }
            fn allgather(&self, local: &[f64]) -> Vec<f64> {
                self.board.lock().unwrap()[self.rank] = local.to_vec();
                self.barrier.wait();
                let all = self.board.lock().unwrap().concat();
                self.barrier.wait();
                all
            }
        }
        for method in [Method::Es, Method::Ga] {
            let cfg = EvoConfig {
                population: 10,
                truncation: 4,
                elite_candidates: 3,
                generations: 3,
                ..EvoConfig::for_env(method, "CartPole-v1")
            };
            let run = move |c: Option<Box<dyn Collective>>| {
                let mut e = Evolution::new(cfg.clone(), 1).unwrap();
                if let Some(c) = c {
                    e.set_collective(c);
                }
                let s: Vec<GenStats> = (0..3).map(|_| e.step()).collect();
                (format!("{s:?}"), e.best_params())
            };
            let single = run(None);
            let board = Arc::new(Mutex::new(vec![Vec::new(), Vec::new()]));
            let barrier = Arc::new(Barrier::new(2));
            let handles: Vec<_> = (0..2)
                .map(|rank| {
                    let c = Fake {
                        rank,
                        board: board.clone(),
                        barrier: barrier.clone(),
                    };
                    let run = run.clone();
                    std::thread::spawn(move || run(Some(Box::new(c))))
                })
                .collect();
            for h in handles {
                assert_eq!(h.join().unwrap(), single, "{method:?}");
            }
        }
    }
}
