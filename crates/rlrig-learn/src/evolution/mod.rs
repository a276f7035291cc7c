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
use std::sync::Arc;

use rayon::prelude::*;
use rlrig_env::{ActionBuf, Purpose, Rng, Space};
use serde::{Deserialize, Serialize};

use crate::LearnError;
use crate::nn::{Mlp, MlpCache, normal};
use crate::optim::Adam;
use crate::run::TensorSource;

mod config;
mod policy;
mod run;
#[cfg(test)]
mod tests;
pub use config::*;
pub use policy::*;
pub use run::*;

/// The ranks of an MPI run: member `i` is evaluated by rank `i % size`, and the fitness
/// vectors are gathered so that every rank makes the same update.
pub use crate::collective::Collective;

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
    collective: Option<Arc<dyn Collective>>,
}

impl Evolution {
    pub fn new(cfg: EvoConfig, threads: usize) -> Result<Evolution, LearnError> {
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
            .map_err(|e| LearnError::Config(format!("cannot start {threads} threads: {e}")))?;
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

    /// What runs the networks: the native CPU path, always.
    pub fn device(&self) -> String {
        "cpu".into()
    }

    /// Refuses every backend: ES and GA run on the native CPU path only.
    pub fn set_backend(&mut self, _maker: &crate::backend::BackendMaker) -> Result<(), LearnError> {
        Err(LearnError::Backend(
            "es and ga run on the native CPU path only".into(),
        ))
    }

    /// Spreads member evaluations over the ranks of `c` (see [`Collective`]).
    pub fn set_collective(&mut self, c: Arc<dyn Collective>) {
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
                    policy
                        .run(env, args, buf, episodes, seed_of(i))
                        .mean_return()
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
        let center = self
            .policy
            .run(
                &self.cfg.env,
                &self.cfg.env_args,
                &self.theta,
                self.cfg.episodes_per_member.max(5),
                episode_seed(self.cfg.seed, g, EXTRA),
            )
            .mean_return();
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

    pub fn restore(&mut self, st: EvoState, mut get: impl TensorSource) -> Result<(), LearnError> {
        let mut take = |name: &str, len: usize| crate::run::take_tensor(&mut get, name, len);
        let n = self.theta.len();
        self.theta = take("theta", n)?;
        if self.cfg.method == Method::Es {
            let mut adam = st.adam.ok_or_else(|| {
                LearnError::Mismatch("ES checkpoint without optimiser state".into())
            })?;
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
