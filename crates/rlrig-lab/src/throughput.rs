//! The kernels of `rlrig bench env` and `rlrig bench alphazero`: what is timed and how.
//! The CLI parses the flags and prints; these take checked values and return figures.
//! Benchmarks report; they never assert.

use std::time::{Duration, Instant};

use rlrig_env::games::{ConnectFour, Game, Outcome};
use rlrig_env::{AsyncVecEnvDyn, Purpose, RandomActions, Rng, VecConfig, make_async, make_sync};
use rlrig_learn::alphazero::{AlphaZero, AzConfig, PolicyValue};
use rlrig_learn::mcts::{BatchedMcts, Evaluator, MctsConfig, UniformEvaluator};
use rlrig_learn::serve::InferenceServer;

use crate::LabError;

/// Batches of random actions drawn once and cycled through while timing.
pub const ACTION_BATCHES: usize = 8;

/// How long `bench env` times when no step count is given: long enough that a VM's
/// scheduling noise is a small part of it, short enough for an Atari env (~3 k steps/s
/// per thread) and for CartPole (~40 M) alike.
pub const DEFAULT_TIMED_SECONDS: f64 = 3.0;

/// Calls of `per_call` env steps to time: `steps` rounded up to whole calls, or, when
/// `None`, the calls that fill [`DEFAULT_TIMED_SECONDS`] at the warm-up's rate (`warm_calls`
/// in `warm_seconds`); at least one.
pub fn timed_calls(steps: Option<u64>, per_call: usize, warm_calls: u64, warm_seconds: f64) -> u64 {
    let calls = match steps {
        Some(s) => s.div_ceil(per_call as u64),
        None => {
            let rate = warm_calls as f64 / warm_seconds.max(1e-9);
            (rate * DEFAULT_TIMED_SECONDS)
                .ceil()
                .min(u64::MAX as f64 / 2.0) as u64
        }
    };
    calls.max(1)
}

/// How `bench env` steps the envs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stepping {
    /// Every env on every call (deterministic at any thread count).
    Sync,
    /// EnvPool-style send/recv of the first `batch_size` envs to finish.
    Async { batch_size: usize },
}

/// One `bench env` measurement.
#[derive(Clone, Debug)]
pub struct EnvBench {
    pub env: String,
    pub env_args: Vec<(String, String)>,
    pub num_envs: usize,
    pub threads: usize,
    /// Env steps to time, all envs together (rounded up to whole batches); `None`: as
    /// many as fill [`DEFAULT_TIMED_SECONDS`] at the rate the warm-up measured.
    pub steps: Option<u64>,
    pub stepping: Stepping,
    pub seed: u64,
    /// Untimed stepping first (at least 10 batches).
    pub warmup: Duration,
}

/// What `bench env` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvThroughput {
    pub steps: u64,
    pub seconds: f64,
    /// Envs per step call (sync: all of them).
    pub batch_size: usize,
    /// Threads the executor used (sync mode uses fewer for a small batch).
    pub threads_used: usize,
}

impl EnvThroughput {
    pub fn steps_per_sec(&self) -> f64 {
        self.steps as f64 / self.seconds
    }
}

/// The memory `b` needs: its envs and the table of random actions.
pub fn env_memory(b: &EnvBench) -> Result<rlrig_learn::memory::Estimate, LabError> {
    let s = rlrig_env::spec(&b.env)?;
    let envs = b.num_envs as f64;
    Ok(rlrig_learn::memory::envs(&b.env, b.num_envs).add(
        format!("{ACTION_BATCHES} batches of random actions"),
        envs * ACTION_BATCHES as f64 * s.action_space.flat_dim() as f64 * 4.0,
    ))
}

/// Steps `b.num_envs` envs with random actions and times it.
pub fn env_throughput(b: &EnvBench) -> Result<EnvThroughput, LabError> {
    let s = rlrig_env::spec(&b.env)?;
    let cfg = VecConfig::new(b.num_envs)
        .threads(b.threads)
        .seed(b.seed)
        .env_args(b.env_args.clone());
    let table = RandomActions::new(&s.action_space, b.num_envs * ACTION_BATCHES, b.seed);
    let action = |k: usize, n: usize| table.slice((k % ACTION_BATCHES) * n, n);
    match b.stepping {
        Stepping::Sync => {
            let mut env = make_sync(&b.env, cfg)?;
            let n = b.num_envs;
            let t = Instant::now();
            let mut k = 0usize;
            while k < 10 || t.elapsed() < b.warmup {
                env.step(action(k, n))?;
                k += 1;
            }
            let iters = timed_calls(b.steps, n, k as u64, t.elapsed().as_secs_f64());
            let t = Instant::now();
            for k in 0..iters as usize {
                env.step(action(k, n))?;
            }
            Ok(EnvThroughput {
                steps: iters * n as u64,
                seconds: t.elapsed().as_secs_f64(),
                batch_size: n,
                threads_used: env.threads_used(),
            })
        }
        Stepping::Async { batch_size: bs } => {
            let mut env = make_async(&b.env, cfg, bs)?;
            env.async_reset()?;
            let mut ids = vec![0usize; bs];
            let mut run = |iters: u64, env: &mut Box<dyn AsyncVecEnvDyn>| {
                for k in 0..iters as usize {
                    ids.copy_from_slice(env.recv()?.env_ids);
                    env.send(action(k, bs), &ids)?;
                }
                Ok::<(), rlrig_env::EnvError>(())
            };
            let t = Instant::now();
            let mut warm_calls = 0u64;
            loop {
                run(10, &mut env)?;
                warm_calls += 10;
                if t.elapsed() >= b.warmup {
                    break;
                }
            }
            let iters = timed_calls(b.steps, bs, warm_calls, t.elapsed().as_secs_f64());
            let t = Instant::now();
            run(iters, &mut env)?;
            Ok(EnvThroughput {
                steps: iters * bs as u64,
                seconds: t.elapsed().as_secs_f64(),
                batch_size: bs,
                threads_used: b.threads,
            })
        }
    }
}

/// One `bench alphazero` measurement: Connect Four self-play in lock-step.
#[derive(Clone, Debug)]
pub struct AzBench {
    pub simulations: usize,
    /// Concurrent games (the batch of every network call).
    pub games: usize,
    /// Timed moves per stage (samples = games x moves).
    pub moves: usize,
    pub hidden: Vec<usize>,
    pub gumbel: bool,
    /// Actor threads sharing one inference server (0: not measured).
    pub actors: usize,
}

/// What `bench alphazero` measured, in samples (moves chosen after a full search) per second.
#[derive(Clone, Debug, PartialEq)]
pub struct AzThroughput {
    /// Uniform priors, no network.
    pub search_only: f64,
    pub with_inference: f64,
    /// Share of the with-inference wall time spent in the network.
    pub inference_share: f64,
    pub with_training: f64,
    /// Updates of 256 per timed iteration (the default config's ratio).
    pub training_updates: usize,
    /// With `actors` threads and the inference server: samples/s and mean rows per call.
    pub actors: Option<(f64, f64)>,
}

/// Times search only, search with the network, and self-play with training.
pub fn alphazero_throughput(b: &AzBench) -> Result<AzThroughput, LabError> {
    rlrig_learn::alphazero::search_memory(b.games, b.simulations)
        .check("bench alphazero", "--games or --simulations")?;
    let samples = b.games as f64 * b.moves as f64;
    let mut mcts = BatchedMcts::<ConnectFour>::new(MctsConfig {
        simulations: b.simulations,
        gumbel: b.gumbel,
        ..Default::default()
    });
    let mut states = vec![ConnectFour::new(); b.games];
    let mut rngs: Vec<Rng> = (0..b.games)
        .map(|g| Rng::stream(1, Purpose::Bench, g as u64))
        .collect();
    // One warm-up move (allocations, caches), then the timed moves.
    let mut eval = UniformEvaluator;
    self_play(&mut mcts, &mut states, &mut rngs, 1, &mut eval);
    let t = Instant::now();
    self_play(&mut mcts, &mut states, &mut rngs, b.moves, &mut eval);
    let search_only = samples / t.elapsed().as_secs_f64();
    let cfg = |updates: usize| AzConfig {
        iterations: 2,
        games: b.games,
        moves_per_iteration: b.moves,
        simulations: b.simulations,
        hidden: b.hidden.clone(),
        updates_per_iteration: updates,
        eval_games: 0,
        gumbel: b.gumbel,
        ..AzConfig::default()
    };
    let measure = |c: AzConfig| -> Result<(f64, f64), LabError> {
        // The first iteration warms up (and fills the buffer); the second is timed.
        let mut az = AlphaZero::new(c)?;
        az.iterate();
        let before = az.times.inference;
        let t = Instant::now();
        az.iterate();
        let wall = t.elapsed().as_secs_f64();
        Ok((samples / wall, (az.times.inference - before) / wall))
    };
    let (with_inference, inference_share) = measure(cfg(0))?;
    // Training at the default config's ratio: 16 updates of 256 per 1024 samples.
    let training_updates = (16.0 * samples / 1024.0).ceil() as usize;
    let (with_training, _) = measure(cfg(training_updates))?;
    let actors = (b.actors > 0).then(|| actor_selfplay(b));
    Ok(AzThroughput {
        search_only,
        with_inference,
        inference_share,
        with_training,
        training_updates,
        actors,
    })
}

/// `moves` lock-step moves of self-play: a search over every game, then each game's
/// searched move (temperature 1), finished games restarting.
fn self_play(
    mcts: &mut BatchedMcts<ConnectFour>,
    states: &mut [ConnectFour],
    rngs: &mut [Rng],
    moves: usize,
    eval: &mut impl Evaluator,
) {
    for _ in 0..moves {
        mcts.search(states, rngs, true, eval);
        for (g, (state, rng)) in states.iter_mut().zip(rngs.iter_mut()).enumerate() {
            if state.play(mcts.action(g, 1.0, rng)) != Outcome::Ongoing {
                *state = ConnectFour::new();
            }
        }
    }
}

/// Self-play in `b.actors` threads sharing one inference server; (samples/s, mean
/// rows per network call). Needs `b.actors <= b.games`.
fn actor_selfplay(b: &AzBench) -> (f64, f64) {
    let net = PolicyValue::new(
        ConnectFour::OBS_DIM,
        ConnectFour::ACTIONS,
        &b.hidden,
        &mut Rng::stream(1, Purpose::Init, 0),
    );
    let server = InferenceServer::start(
        net.into_evaluator(),
        ConnectFour::OBS_DIM,
        ConnectFour::ACTIONS,
        b.games,
    );
    let run = |moves: usize| {
        std::thread::scope(|s| {
            for t in 0..b.actors {
                let mut client = server.client();
                let n = b.games / b.actors + usize::from(t < b.games % b.actors);
                let cfg = MctsConfig {
                    simulations: b.simulations,
                    gumbel: b.gumbel,
                    ..MctsConfig::default()
                };
                s.spawn(move || {
                    let mut mcts = BatchedMcts::<ConnectFour>::new(cfg);
                    let mut states = vec![ConnectFour::new(); n];
                    let mut rngs: Vec<Rng> = (0..n)
                        .map(|g| Rng::stream(t as u64, Purpose::Bench, g as u64))
                        .collect();
                    self_play(&mut mcts, &mut states, &mut rngs, moves, &mut client);
                });
            }
        });
    };
    run(1);
    let t = Instant::now();
    run(b.moves);
    let sps = (b.games * b.moves) as f64 / t.elapsed().as_secs_f64();
    (sps, server.shutdown().mean_batch())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A given step count is rounded up to whole calls; without one the timed calls
        /// fill the default seconds at the warm-up's rate; never zero calls.
        #[test]
        fn timed_calls_cover_the_steps_or_the_default_time(
            steps in 0u64..1_000_000_000,
            per_call in 1usize..70_000,
            warm_calls in 10u64..100_000,
            warm_ms in 1u64..5_000,
        ) {
            let warm = warm_ms as f64 / 1e3;
            let given = timed_calls(Some(steps), per_call, warm_calls, warm);
            prop_assert!(given >= 1);
            prop_assert!(given * per_call as u64 >= steps);
            prop_assert!(given == 1 || (given - 1) * (per_call as u64) < steps);
            let timed = timed_calls(None, per_call, warm_calls, warm);
            let expected = warm_calls as f64 / warm * DEFAULT_TIMED_SECONDS;
            prop_assert!(timed as f64 >= expected && (timed as f64) < expected + 1.0);
        }
    }
}
