//! AlphaZero (Silver et al. 2018) on two-player board games, with batched search.
//!
//! Each iteration plays `moves_per_iteration` lock-step moves in `games` concurrent
//! self-play games (every move is a full [`BatchedMcts`] search whose leaves are
//! evaluated `games` at a time), stores finished games' positions with their search
//! policies and outcomes in a replay buffer, then makes `updates_per_iteration`
//! minibatch steps on the policy-value network (cross-entropy to the search policy,
//! squared error to the outcome, L2 weight decay, Adam). Finished games restart at
//! once, so the batch stays full.
//!
//! The network is an MLP on the native CPU path (ReLU, `hidden` units per layer; pgx's
//! AlphaZero example uses 2 x 128), with `ACTIONS` policy logits and one value output
//! squashed by tanh.
//!
//! Determinism: the noise and move choice of game slot `g` at lock-step move `t` come
//! from the stream `(seed, Policy, t * games + g)`, minibatches from `(seed, Learner,
//! update)`, evaluation games from `(seed, Bench, game)`; everything runs on one thread
//! in a fixed order, so a run is a pure function of its config and a checkpoint
//! (network, Adam, replay buffer and the games in flight) continues it bit for bit.

use rlrig_env::games::{ConnectFour, Game, Outcome, Solver};
use rlrig_env::{Purpose, Rng};
use serde::{Deserialize, Serialize};

use crate::LearnError;
use crate::backend::Evaluator;
use crate::backend::{
    BackendMaker, Native, Net, NetBackend, NetCache, NetLayout, OptimState, rebuild,
};
use crate::conv::ConvNet;
use crate::mcts::{BatchedMcts, MctsConfig};
use crate::nn::{Activation, Mlp};
use crate::optim::Adam;
use crate::run::TensorSource;

mod config;
mod games;
mod net;
mod run;
#[cfg(test)]
mod tests;
pub use config::*;
pub use games::*;
pub use net::*;
pub use run::*;

/// Training positions: states (observations are recomputed when sampled), search
/// policies and outcomes for the side to move, in a ring.
#[derive(Clone, Debug, PartialEq)]
pub struct GameBuffer<G> {
    capacity: usize,
    pos: usize,
    states: Vec<G>,
    policies: Vec<f32>,
    outcomes: Vec<f32>,
}

impl<G: Game> GameBuffer<G> {
    pub fn new(capacity: usize) -> Self {
        GameBuffer {
            capacity,
            pos: 0,
            states: Vec::with_capacity(capacity),
            policies: Vec::with_capacity(capacity * G::ACTIONS),
            outcomes: Vec::with_capacity(capacity),
        }
    }

    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    pub fn push(&mut self, state: G, policy: &[f32], outcome: f32) {
        let a = G::ACTIONS;
        if self.states.len() < self.capacity {
            self.states.push(state);
            self.policies.extend_from_slice(policy);
            self.outcomes.push(outcome);
        } else {
            let i = self.pos;
            self.states[i] = state;
            self.policies[i * a..(i + 1) * a].copy_from_slice(policy);
            self.outcomes[i] = outcome;
        }
        self.pos = (self.pos + 1) % self.capacity;
    }
}

/// A self-play game in flight: its position and the positions and search policies
/// seen so far.
#[derive(Clone, Debug, PartialEq)]
struct Slot<G> {
    state: G,
    history: Vec<(G, Vec<f32>)>,
}

/// Metrics of one iteration.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct AzStats {
    pub iteration: u64,
    /// Positions searched in self-play so far (one per move, the seed's "sample").
    pub samples: u64,
    pub games_finished: u64,
    pub policy_loss: f64,
    pub value_loss: f64,
    /// Win rates in the last evaluation (NaN when none ran this iteration).
    pub win_rate_random: f64,
    pub win_rate_solver: f64,
    pub loss_rate_solver: f64,
    /// Score of the trained network against the accepted one at the last gate (wins +
    /// half the draws; NaN when no gate ran this iteration), and whether it was accepted.
    #[serde(default)]
    pub gate_score: f64,
    #[serde(default)]
    pub gate_accepted: bool,
}

/// Wall time per stage, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AzTimes {
    /// Search minus network calls.
    pub search: f64,
    pub inference: f64,
    pub learner: f64,
    pub eval: f64,
}

/// Everything besides tensors a checkpoint holds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AzState {
    pub iteration: u64,
    pub moves: u64,
    pub updates: u64,
    pub samples: u64,
    pub games_finished: u64,
    pub adam: Adam,
    pub buffer_pos: usize,
    pub buffer_len: usize,
    /// Per slot: the number of positions in its history.
    pub history_lens: Vec<usize>,
}

/// An AlphaZero run on Connect Four.
pub struct AlphaZero {
    pub cfg: AzConfig,
    /// The network's host copy, synced after every iteration's updates (evaluation
    /// games and checkpoints read it).
    pub net: PolicyValue,
    /// Where self-play inference and training run (`--device`).
    backend: Box<dyn NetBackend>,
    /// The last network accepted by gating (the initial one to begin with).
    accepted: Vec<f32>,
    buffer: GameBuffer<ConnectFour>,
    slots: Vec<Slot<ConnectFour>>,
    mcts: BatchedMcts<ConnectFour>,
    pub iteration: u64,
    moves: u64,
    updates: u64,
    pub samples: u64,
    games_finished: u64,
    pub times: AzTimes,
    obs: Vec<f32>,
    out: Vec<f32>,
    dout: Vec<f32>,
}

impl AlphaZero {
    pub fn new(cfg: AzConfig) -> Result<AlphaZero, LearnError> {
        cfg.validate()?;
        let mut rng = Rng::stream(cfg.seed, Purpose::Init, 0);
        let net = PolicyValue::for_config(&cfg, &mut rng);
        let n = net.params.len();
        let mut adam = Adam::new(n, 1e-8);
        adam.weight_decay = cfg.weight_decay;
        Ok(AlphaZero {
            backend: Box::new(Native::new(&net.layout(), &net.params, adam)),
            accepted: net.params.clone(),
            buffer: GameBuffer::new(cfg.buffer_size),
            slots: (0..cfg.games)
                .map(|_| Slot {
                    state: ConnectFour::new(),
                    history: Vec::new(),
                })
                .collect(),
            mcts: BatchedMcts::new(cfg.mcts(cfg.simulations)),
            iteration: 0,
            moves: 0,
            updates: 0,
            samples: 0,
            games_finished: 0,
            times: AzTimes::default(),
            obs: Vec::new(),
            out: Vec::new(),
            dout: Vec::new(),
            net,
            cfg,
        })
    }

    pub fn done(&self) -> bool {
        self.iteration >= self.cfg.iterations
    }

    /// Moves self-play inference and training to the backend `maker` builds.
    pub fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), LearnError> {
        self.backend = rebuild(maker, self.backend.as_ref(), &self.net.layout())?;
        Ok(())
    }

    /// What runs the network.
    pub fn device(&self) -> String {
        self.backend.device()
    }

    /// One lock-step move in every self-play game.
    fn self_play_move(&mut self) {
        let g_n = self.cfg.games;
        let roots: Vec<ConnectFour> = self.slots.iter().map(|s| s.state).collect();
        let mut rngs: Vec<Rng> = (0..g_n)
            .map(|g| {
                Rng::stream(
                    self.cfg.seed,
                    Purpose::Policy,
                    self.moves * g_n as u64 + g as u64,
                )
            })
            .collect();
        let t0 = std::time::Instant::now();
        let mut eval = TimedEval {
            inner: BackendEval {
                backend: &mut *self.backend,
                actions: ConnectFour::ACTIONS,
            },
            seconds: 0.0,
        };
        self.mcts.search(&roots, &mut rngs, true, &mut eval);
        let total = t0.elapsed().as_secs_f64();
        self.times.inference += eval.seconds;
        self.times.search += total - eval.seconds;
        for g in 0..g_n {
            let mut pi = vec![0.0f32; ConnectFour::ACTIONS];
            self.mcts.policy(g, &mut pi);
            let slot = &mut self.slots[g];
            let t = if slot.state.moves() < self.cfg.temperature_moves {
                1.0
            } else {
                0.0
            };
            let a = self.mcts.action(g, t, &mut rngs[g]);
            slot.history.push((slot.state, pi));
            let outcome = slot.state.play(a);
            if outcome != Outcome::Ongoing {
                // The player who just moved won (or nobody did): +1 / -1 / 0 for the
                // side to move at each stored position.
                let last_mover_parity = (slot.state.moves() - 1) % 2;
                for (s, pi) in slot.history.drain(..) {
                    let z = match outcome {
                        Outcome::Draw => 0.0,
                        _ if s.moves() % 2 == last_mover_parity => 1.0,
                        _ => -1.0,
                    };
                    self.buffer.push(s, &pi, z);
                }
                slot.state = ConnectFour::new();
                self.games_finished += 1;
            }
        }
        self.moves += 1;
        self.samples += g_n as u64;
    }

    /// One minibatch step; returns (policy loss, value loss).
    fn update(&mut self) -> (f64, f64) {
        let b = self.cfg.batch_size;
        let (d, a) = (ConnectFour::OBS_DIM, ConnectFour::ACTIONS);
        let mut rng = Rng::stream(self.cfg.seed, Purpose::Learner, self.updates);
        self.obs.resize(b * d, 0.0);
        let mut picks = Vec::with_capacity(b);
        for r in 0..b {
            let i = rng.below(self.buffer.len() as u32) as usize;
            self.buffer.states[i].observe(&mut self.obs[r * d..(r + 1) * d]);
            picks.push(i);
        }
        self.out.clear();
        self.out
            .extend_from_slice(self.backend.forward_train(0, &self.obs, b));
        let out = &self.out;
        self.dout.resize(b * (a + 1), 0.0);
        let inv = 1.0 / b as f32;
        let (mut pl, mut vl) = (0.0f64, 0.0f64);
        for (r, &i) in picks.iter().enumerate() {
            let row = &out[r * (a + 1)..(r + 1) * (a + 1)];
            let pi = &self.buffer.policies[i * a..(i + 1) * a];
            let max = row[..a].iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            let lse = max + row[..a].iter().map(|&x| (x - max).exp()).sum::<f32>().ln();
            for k in 0..a {
                let logp = row[k] - lse;
                pl -= f64::from(pi[k] * logp * inv);
                self.dout[r * (a + 1) + k] = (logp.exp() - pi[k]) * inv;
            }
            let v = crate::nn::tanh(row[a]);
            let z = self.buffer.outcomes[i];
            vl += f64::from((v - z) * (v - z) * inv);
            self.dout[r * (a + 1) + a] = 2.0 * (v - z) * (1.0 - v * v) * inv;
        }
        self.backend.backward(0, &self.dout);
        // No clipping; the L2 penalty is the optimiser's weight decay.
        self.backend.step(self.cfg.learning_rate, f64::INFINITY);
        self.updates += 1;
        (pl, vl)
    }

    /// One iteration: self-play moves, then updates, then (when due) evaluation.
    pub fn iterate(&mut self) -> AzStats {
        for _ in 0..self.cfg.moves_per_iteration {
            self.self_play_move();
        }
        let t0 = std::time::Instant::now();
        let (mut pl, mut vl, mut n) = (0.0, 0.0, 0);
        if !self.buffer.is_empty() {
            for _ in 0..self.cfg.updates_per_iteration {
                let (p, v) = self.update();
                pl += p;
                vl += v;
                n += 1;
            }
            self.net.params = self.backend.params();
        }
        self.times.learner += t0.elapsed().as_secs_f64();
        self.iteration += 1;
        let mean = |s: f64| if n == 0 { f64::NAN } else { s / f64::from(n) };
        let mut stats = AzStats {
            iteration: self.iteration,
            samples: self.samples,
            games_finished: self.games_finished,
            policy_loss: mean(pl),
            value_loss: mean(vl),
            win_rate_random: f64::NAN,
            win_rate_solver: f64::NAN,
            loss_rate_solver: f64::NAN,
            gate_score: f64::NAN,
            gate_accepted: false,
        };
        if self.cfg.gate_every > 0 && self.iteration.is_multiple_of(self.cfg.gate_every) {
            let t0 = std::time::Instant::now();
            let accepted = PolicyValue {
                params: self.accepted.clone(),
                ..self.net.clone()
            };
            // Seeded by the iteration, so a resumed run plays the same gate games.
            let m = play_nets(
                &self.net,
                &accepted,
                &self.cfg,
                self.cfg.eval_simulations,
                self.cfg.gate_games,
                self.cfg.seed + crate::EVAL_SEED_OFFSET + self.iteration,
            );
            stats.gate_score = (m.wins as f64 + 0.5 * m.draws as f64) / m.games as f64;
            stats.gate_accepted = stats.gate_score >= self.cfg.gate_threshold;
            if stats.gate_accepted {
                self.accepted.clone_from(&self.net.params);
            } else {
                self.net.params.clone_from(&self.accepted);
                self.backend.set_params(&self.accepted);
            }
            self.times.eval += t0.elapsed().as_secs_f64();
        }
        let due = (self.cfg.eval_every > 0 && self.iteration.is_multiple_of(self.cfg.eval_every))
            || self.done();
        if due && self.cfg.eval_games > 0 {
            let t0 = std::time::Instant::now();
            let seed = self.cfg.seed + crate::EVAL_SEED_OFFSET;
            let r = play_match(
                &self.net,
                &self.cfg,
                self.cfg.eval_simulations,
                Opponent::Random,
                self.cfg.eval_games,
                seed,
            );
            let s = play_match(
                &self.net,
                &self.cfg,
                self.cfg.eval_simulations,
                Opponent::Solver(self.cfg.eval_depth),
                self.cfg.eval_games,
                seed,
            );
            stats.win_rate_random = r.win_rate();
            stats.win_rate_solver = s.win_rate();
            stats.loss_rate_solver = s.loss_rate();
            self.times.eval += t0.elapsed().as_secs_f64();
        }
        stats
    }

    /// The checkpoint state and tensors. States are stored as their `encode` words,
    /// bit-cast to f32 (lossless: the bytes are written as they are).
    pub fn state(&self) -> (AzState, Vec<(&'static str, Vec<f32>)>) {
        let words = |states: &mut dyn Iterator<Item = &ConnectFour>| -> Vec<f32> {
            let mut w = Vec::new();
            for s in states {
                s.encode(&mut w);
            }
            w.into_iter().map(f32::from_bits).collect()
        };
        let mut slot_states = words(&mut self.slots.iter().map(|s| &s.state));
        let hist_states = words(
            &mut self
                .slots
                .iter()
                .flat_map(|s| s.history.iter().map(|h| &h.0)),
        );
        let hist_pis: Vec<f32> = self
            .slots
            .iter()
            .flat_map(|s| s.history.iter().flat_map(|h| h.1.iter().copied()))
            .collect();
        slot_states.shrink_to_fit();
        let opt = self.backend.optimizer();
        let tensors = vec![
            ("params", self.net.params.clone()),
            ("accepted", self.accepted.clone()),
            ("adam_m", opt.m.clone()),
            ("adam_v", opt.v.clone()),
            ("buffer.states", words(&mut self.buffer.states.iter())),
            ("buffer.policies", self.buffer.policies.clone()),
            ("buffer.outcomes", self.buffer.outcomes.clone()),
            ("slots.states", slot_states),
            ("slots.history_states", hist_states),
            ("slots.history_policies", hist_pis),
        ];
        let st = AzState {
            iteration: self.iteration,
            moves: self.moves,
            updates: self.updates,
            samples: self.samples,
            games_finished: self.games_finished,
            adam: OptimState {
                m: Vec::new(),
                v: Vec::new(),
                ..opt.clone()
            },
            buffer_pos: self.buffer.pos,
            buffer_len: self.buffer.len(),
            history_lens: self.slots.iter().map(|s| s.history.len()).collect(),
        };
        (st, tensors)
    }

    /// Continues from a checkpoint; `get` returns a tensor by name.
    pub fn restore(&mut self, st: AzState, mut get: impl TensorSource) -> Result<(), LearnError> {
        // Checkpoints from before gating have no accepted network: they never gated.
        let accepted = get("accepted");
        let mut take = |name: &str, len: usize| crate::run::take_tensor(&mut get, name, len);
        let decode = |v: Vec<f32>, what: &str| -> Result<Vec<ConnectFour>, LearnError> {
            let w: Vec<u32> = v.into_iter().map(f32::to_bits).collect();
            w.chunks(ConnectFour::WORDS)
                .map(|c| {
                    ConnectFour::decode(c).ok_or_else(|| {
                        LearnError::Mismatch(format!("{what}: not a Connect Four position"))
                    })
                })
                .collect()
        };
        let n = self.net.params.len();
        let (a, words) = (ConnectFour::ACTIONS, ConnectFour::WORDS);
        let games = self.cfg.games;
        if st.history_lens.len() != games || st.buffer_len > self.cfg.buffer_size {
            return Err(LearnError::Mismatch(
                "games or buffer size differ from the config".into(),
            ));
        }
        let hist: usize = st.history_lens.iter().sum();
        self.net.params = take("params", n)?;
        self.accepted = accepted.unwrap_or_else(|| self.net.params.clone());
        if self.accepted.len() != n {
            return Err(LearnError::Mismatch(format!(
                "accepted: {} values, expected {n}",
                self.accepted.len()
            )));
        }
        let mut adam = st.adam.clone();
        adam.m = take("adam_m", n)?;
        adam.v = take("adam_v", n)?;
        // Checkpoints from before the penalty moved into the optimiser lack it.
        adam.weight_decay = self.cfg.weight_decay;
        let bl = st.buffer_len;
        let states = decode(take("buffer.states", bl * words)?, "buffer.states")?;
        let policies = take("buffer.policies", bl * a)?;
        let outcomes = take("buffer.outcomes", bl)?;
        let slot_states = decode(take("slots.states", games * words)?, "slots.states")?;
        let hs = decode(
            take("slots.history_states", hist * words)?,
            "slots.history_states",
        )?;
        let hp = take("slots.history_policies", hist * a)?;
        self.backend.set_params(&self.net.params);
        self.backend.set_optimizer(adam);
        self.buffer.states = states;
        self.buffer.policies = policies;
        self.buffer.outcomes = outcomes;
        self.buffer.pos = st.buffer_pos % self.cfg.buffer_size;
        let mut k = 0;
        for (g, slot) in self.slots.iter_mut().enumerate() {
            slot.state = slot_states[g];
            slot.history = (0..st.history_lens[g])
                .map(|j| (hs[k + j], hp[(k + j) * a..(k + j + 1) * a].to_vec()))
                .collect();
            k += st.history_lens[g];
        }
        self.iteration = st.iteration;
        self.moves = st.moves;
        self.updates = st.updates;
        self.samples = st.samples;
        self.games_finished = st.games_finished;
        Ok(())
    }
}

/// Search inference through the run's backend (same results as [`NetEval`] on the
/// native path; on a Burn device the leaves of all games go to it in one call).
struct BackendEval<'a> {
    backend: &'a mut dyn NetBackend,
    actions: usize,
}

impl Evaluator for BackendEval<'_> {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        let out = self.backend.forward(0, obs, n);
        split_policy_value(out, self.actions, logits, values);
    }
}

/// Times the evaluator calls inside a search.
struct TimedEval<E> {
    inner: E,
    seconds: f64,
}

impl<E: Evaluator> Evaluator for TimedEval<E> {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        let t = std::time::Instant::now();
        self.inner.evaluate(obs, n, logits, values);
        self.seconds += t.elapsed().as_secs_f64();
    }
}
