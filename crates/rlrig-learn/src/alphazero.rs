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

use crate::backend::Evaluator;
use crate::backend::{BackendMaker, Native, Net, NetBackend, NetCache, NetLayout, OptimState};
use crate::conv::ConvNet;
use crate::mcts::{BatchedMcts, MctsConfig};
use crate::nn::{Activation, Mlp};
use crate::optim::Adam;

/// Hyperparameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AzConfig {
    /// Game id (ConnectFour).
    pub env: String,
    pub seed: u64,
    /// Self-play + training rounds.
    pub iterations: u64,
    /// Concurrent self-play games: the batch of every network call in search.
    pub games: usize,
    /// Lock-step moves per iteration (each a full search in every game).
    pub moves_per_iteration: usize,
    /// Simulations per search.
    pub simulations: usize,
    pub c_puct: f32,
    pub dirichlet_alpha: f32,
    pub dirichlet_fraction: f32,
    /// Moves per game chosen in proportion to visit counts; greedy afterwards (PUCT
    /// mode; Gumbel mode explores through its root noise instead).
    pub temperature_moves: usize,
    /// Gumbel AlphaZero root selection and improved-policy targets (see
    /// [`MctsConfig::gumbel`]); learns with far fewer simulations.
    pub gumbel: bool,
    /// Gumbel mode: root actions considered.
    pub max_considered: usize,
    /// Hidden layer sizes (ReLU): the MLP's, or the residual tower's head.
    pub hidden: Vec<usize>,
    /// 0: an MLP on the board planes; more: a residual CNN with this many channels
    /// (3x3 convolutions) before the `hidden` layers.
    pub channels: usize,
    /// Residual blocks of the CNN (with `channels > 0`).
    pub blocks: usize,
    pub learning_rate: f64,
    /// L2 penalty added to the gradient (coefficient times the weight).
    pub weight_decay: f64,
    pub batch_size: usize,
    pub updates_per_iteration: usize,
    /// Positions the replay buffer keeps.
    pub buffer_size: usize,
    /// Iterations between evaluations against the solver and a random player (0: only
    /// at the end).
    pub eval_every: u64,
    /// Games per opponent in each evaluation (half with the agent moving first).
    pub eval_games: usize,
    /// Depth of the solver opponent (plies, the move itself included).
    pub eval_depth: u32,
    /// Simulations of the agent's search in evaluation games (no noise, greedy).
    pub eval_simulations: usize,
    /// Iterations between checkpoints (0: only at the end).
    pub checkpoint_every: u64,
    /// Gating: every `gate_every` iterations (0: never) the trained network plays
    /// `gate_games` games against the last accepted one and replaces it when it scores
    /// at least `gate_threshold` (wins + half the draws); otherwise training continues
    /// from the accepted weights (the rejected ones are dropped).
    pub gate_every: u64,
    pub gate_games: usize,
    pub gate_threshold: f64,
}

impl Default for AzConfig {
    fn default() -> Self {
        AzConfig {
            env: "ConnectFour".into(),
            seed: 1,
            iterations: 60,
            games: 128,
            moves_per_iteration: 8,
            simulations: 32,
            c_puct: 1.25,
            dirichlet_alpha: 0.3,
            dirichlet_fraction: 0.25,
            temperature_moves: 10,
            gumbel: false,
            max_considered: 16,
            hidden: vec![128, 128],
            channels: 0,
            blocks: 2,
            learning_rate: 1e-3,
            weight_decay: 1e-4,
            batch_size: 256,
            updates_per_iteration: 16,
            buffer_size: 100_000,
            eval_every: 20,
            eval_games: 40,
            eval_depth: 2,
            eval_simulations: 32,
            checkpoint_every: 20,
            gate_every: 0,
            gate_games: 40,
            gate_threshold: 0.55,
        }
    }
}

impl AzConfig {
    /// What the run's large buffers take: the self-play games' search trees, the
    /// evaluation games' (played in lock-step too) and the replay buffer of positions.
    pub fn memory_estimate(&self) -> crate::memory::Estimate {
        search_memory(self.games, self.simulations)
            .and(search_memory(self.eval_games, self.eval_simulations))
            .add(
                format!("replay buffer of {} positions", self.buffer_size),
                self.buffer_size as f64 * (2.0 * 42.0 + 8.0) * 4.0,
            )
    }

    pub fn validate(&self) -> Result<(), String> {
        if !rlrig_env::games::GAME_IDS.contains(&self.env.as_str()) {
            return Err(format!(
                "unknown game '{}' (known: {})",
                self.env,
                rlrig_env::games::GAME_IDS.join(", ")
            ));
        }
        for (v, n) in [
            (self.games, "games"),
            (self.moves_per_iteration, "moves_per_iteration"),
            (self.simulations, "simulations"),
            (self.batch_size, "batch_size"),
            (self.buffer_size, "buffer_size"),
            (self.eval_simulations, "eval_simulations"),
            (self.max_considered, "max_considered"),
        ] {
            if v == 0 {
                return Err(format!("{n} must be at least 1"));
            }
        }
        if self.gate_every > 0 && self.gate_games == 0 {
            return Err("gate_games must be at least 1 when gate_every > 0".into());
        }
        if !(0.0..=1.0).contains(&self.gate_threshold) {
            return Err(format!(
                "gate_threshold is a score in [0, 1], got {}",
                self.gate_threshold
            ));
        }
        if self.channels > 512 || self.blocks > 40 {
            return Err(format!(
                "channels (at most 512) and blocks (at most 40) size the CNN, got {} and {}",
                self.channels, self.blocks
            ));
        }
        if self.hidden.is_empty() || self.hidden.contains(&0) {
            return Err(format!(
                "hidden must list positive sizes, got {:?}",
                self.hidden
            ));
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return Err(format!(
                "learning_rate must be positive, got {}",
                self.learning_rate
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(format!(
                "weight_decay must be >= 0, got {}",
                self.weight_decay
            ));
        }
        if !(self.dirichlet_alpha > 0.0 && (0.0..=1.0).contains(&self.dirichlet_fraction)) {
            return Err("dirichlet_alpha must be > 0 and dirichlet_fraction in [0, 1]".into());
        }
        if self.eval_depth == 0 {
            return Err("eval_depth must be at least 1".into());
        }
        Ok(())
    }

    pub fn mcts(&self, simulations: usize) -> MctsConfig {
        MctsConfig {
            simulations,
            c_puct: self.c_puct,
            dirichlet_alpha: self.dirichlet_alpha,
            dirichlet_fraction: self.dirichlet_fraction,
            gumbel: self.gumbel,
            max_considered: self.max_considered,
            ..MctsConfig::default()
        }
    }
}

/// The policy-value network: an MLP over the observation with `ACTIONS + 1` outputs.
#[derive(Clone, Debug)]
pub struct PolicyValue {
    pub net: Net,
    pub params: Vec<f32>,
    actions: usize,
}

impl PolicyValue {
    pub fn new(obs_dim: usize, actions: usize, hidden: &[usize], rng: &mut Rng) -> PolicyValue {
        let sizes: Vec<usize> = std::iter::once(obs_dim)
            .chain(hidden.iter().copied())
            .chain(std::iter::once(actions + 1))
            .collect();
        let mlp = Mlp::with_activation(&sizes, 0, Activation::Relu);
        let mut params = vec![0.0; mlp.num_params()];
        mlp.init_torch_default(&mut params, rng);
        PolicyValue {
            net: Net::Mlp(mlp),
            params,
            actions,
        }
    }

    /// A residual tower on the board's planes (`planes x h x w`, planes first): a 3x3
    /// same-padded stem with `channels` outputs, `blocks` residual blocks, then `hidden`
    /// units and the policy logits + value.
    #[allow(clippy::too_many_arguments)]
    pub fn residual(
        planes: usize,
        h: usize,
        w: usize,
        actions: usize,
        channels: usize,
        blocks: usize,
        hidden: &[usize],
        rng: &mut Rng,
    ) -> PolicyValue {
        let net = ConvNet::new(planes, h, w, channels, 3, 1, blocks, hidden, actions + 1, 0);
        let mut params = vec![0.0; net.num_params()];
        net.init_torch_default(&mut params, rng);
        PolicyValue {
            net: Net::Conv(net),
            params,
            actions,
        }
    }

    /// Connect Four's network as `cfg` describes it: the MLP, or the residual tower
    /// when `cfg.channels > 0`.
    pub fn for_config(cfg: &AzConfig, rng: &mut Rng) -> PolicyValue {
        use rlrig_env::games::connect_four::{HEIGHT, WIDTH};
        let (obs, a) = (ConnectFour::OBS_DIM, ConnectFour::ACTIONS);
        if cfg.channels == 0 {
            PolicyValue::new(obs, a, &cfg.hidden, rng)
        } else {
            let planes = obs / (HEIGHT * WIDTH);
            PolicyValue::residual(
                planes,
                HEIGHT,
                WIDTH,
                a,
                cfg.channels,
                cfg.blocks,
                &cfg.hidden,
                rng,
            )
        }
    }

    /// The network for a [`NetBackend`].
    pub fn layout(&self) -> NetLayout {
        NetLayout {
            nets: vec![self.net.clone()],
            free: self.params.len()..self.params.len(),
            total: self.params.len(),
        }
    }

    /// An [`Evaluator`] over these weights.
    pub fn evaluator(&self) -> NetEval<'_> {
        NetEval {
            net: self,
            cache: NetCache::default(),
        }
    }

    /// An [`Evaluator`] that owns the network (for an inference server thread).
    pub fn into_evaluator(self) -> OwnedNetEval {
        OwnedNetEval {
            net: self,
            cache: NetCache::default(),
        }
    }

    fn forward_into(
        &self,
        cache: &mut NetCache,
        obs: &[f32],
        n: usize,
        logits: &mut [f32],
        values: &mut [f32],
    ) {
        let out = self.net.forward(&self.params, obs, n, cache);
        split_policy_value(out, self.actions, logits, values);
    }
}

/// Splits the network's rows (`actions` logits, then the raw value) into logits and
/// tanh-squashed values.
fn split_policy_value(out: &[f32], actions: usize, logits: &mut [f32], values: &mut [f32]) {
    let a = actions;
    for (r, row) in out.chunks_exact(a + 1).enumerate() {
        logits[r * a..(r + 1) * a].copy_from_slice(&row[..a]);
        values[r] = crate::nn::tanh(row[a]);
    }
}

/// A [`PolicyValue`] evaluator that owns its network.
pub struct OwnedNetEval {
    net: PolicyValue,
    cache: NetCache,
}

impl Evaluator for OwnedNetEval {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        self.net
            .forward_into(&mut self.cache, obs, n, logits, values);
    }
}

/// Runs a [`PolicyValue`] for search: one forward call per batch of leaves.
pub struct NetEval<'a> {
    net: &'a PolicyValue,
    cache: NetCache,
}

impl Evaluator for NetEval<'_> {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        self.net
            .forward_into(&mut self.cache, obs, n, logits, values);
    }
}

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

/// Which opponent an evaluation game is against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opponent {
    Random,
    /// Best move by a depth-limited negamax (ties broken at random); depth 0 plays
    /// perfectly (exact solver, slow in the opening).
    Solver(u32),
}

impl std::str::FromStr for Opponent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None if s == "random" => Ok(Opponent::Random),
            Some(("solver", d)) => d
                .parse()
                .map(Opponent::Solver)
                .map_err(|_| format!("opponent '{s}': depth must be a number (solver:2)")),
            _ => Err(format!(
                "unknown opponent '{s}' (use random, solver:DEPTH or run:DIR)"
            )),
        }
    }
}

/// Results of evaluation games, from the agent's view.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Match {
    pub games: usize,
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
}

impl Match {
    pub fn win_rate(&self) -> f64 {
        self.wins as f64 / self.games.max(1) as f64
    }
    pub fn loss_rate(&self) -> f64 {
        self.losses as f64 / self.games.max(1) as f64
    }
}

/// The opponent's move in `p`.
pub fn opponent_move(op: Opponent, p: &ConnectFour, solver: &mut Solver, rng: &mut Rng) -> usize {
    let legal: Vec<usize> = (0..7).filter(|&c| p.can_play(c)).collect();
    match op {
        Opponent::Random => legal[rng.below(legal.len() as u32) as usize],
        Opponent::Solver(d) => {
            let vals = solver.move_values(p, d);
            let best = vals.iter().flatten().copied().max().expect("a legal move");
            let ties: Vec<usize> = (0..7).filter(|&c| vals[c] == Some(best)).collect();
            ties[rng.below(ties.len() as u32) as usize]
        }
    }
}

/// The memory of `games` search trees of `simulations` simulations, searched in
/// lock-step: up to seven children a simulation, ~48 bytes a node.
pub fn search_memory(games: usize, simulations: usize) -> crate::memory::Estimate {
    crate::memory::Estimate::new().add(
        format!("{games} search trees of {simulations} simulations"),
        games as f64 * simulations as f64 * 7.0 * 48.0,
    )
}

/// Plays `games` evaluation games of the agent (greedy search with `simulations`, no
/// noise) against `op`, all games in lock-step so the agent's searches are batched.
/// The agent moves first in even-numbered games. Deterministic for a given `seed`.
pub fn play_match(
    net: &PolicyValue,
    cfg: &AzConfig,
    simulations: usize,
    op: Opponent,
    games: usize,
    seed: u64,
) -> Match {
    let mut solver = Solver::new(1 << 16);
    play_games(net, cfg, simulations, games, seed, |idx, states, rngs| {
        idx.iter()
            .map(|&g| opponent_move(op, &states[g], &mut solver, &mut rngs[g]))
            .collect()
    })
}

/// As [`play_match`] against another network (same search settings).
pub fn play_nets(
    net: &PolicyValue,
    other: &PolicyValue,
    cfg: &AzConfig,
    simulations: usize,
    games: usize,
    seed: u64,
) -> Match {
    let mut mcts = BatchedMcts::<ConnectFour>::new(cfg.mcts(simulations));
    let mut eval = other.evaluator();
    play_games(net, cfg, simulations, games, seed, |idx, states, rngs| {
        greedy_moves(&mut mcts, &mut eval, idx, states, rngs, seed)
    })
}

/// Greedy search moves for the games `idx`.
fn greedy_moves(
    mcts: &mut BatchedMcts<ConnectFour>,
    eval: &mut impl Evaluator,
    idx: &[usize],
    states: &[ConnectFour],
    rngs: &mut [Rng],
    seed: u64,
) -> Vec<usize> {
    if idx.is_empty() {
        return Vec::new();
    }
    let roots: Vec<ConnectFour> = idx.iter().map(|&g| states[g]).collect();
    // No noise is drawn; the generators only satisfy the interface.
    let mut unused: Vec<Rng> = idx
        .iter()
        .map(|&g| Rng::stream(seed, Purpose::Bench, g as u64))
        .collect();
    mcts.search(&roots, &mut unused, false, eval);
    idx.iter()
        .enumerate()
        .map(|(k, &g)| mcts.action(k, 0.0, &mut rngs[g]))
        .collect()
}

fn play_games(
    net: &PolicyValue,
    cfg: &AzConfig,
    simulations: usize,
    games: usize,
    seed: u64,
    mut opponent: impl FnMut(&[usize], &[ConnectFour], &mut [Rng]) -> Vec<usize>,
) -> Match {
    let mut mcts = BatchedMcts::<ConnectFour>::new(cfg.mcts(simulations));
    let mut eval = net.evaluator();
    let mut states = vec![ConnectFour::new(); games];
    let mut result: Vec<Option<i32>> = vec![None; games];
    let mut rngs: Vec<Rng> = (0..games)
        .map(|g| Rng::stream(seed, Purpose::Bench, g as u64))
        .collect();
    while result.iter().any(Option::is_none) {
        // The agent moves in game g when (moves + g) is even.
        for agent in [true, false] {
            let idx: Vec<usize> = (0..games)
                .filter(|&g| {
                    result[g].is_none() && (states[g].moves() + g).is_multiple_of(2) == agent
                })
                .collect();
            let moves = if agent {
                greedy_moves(&mut mcts, &mut eval, &idx, &states, &mut rngs, seed)
            } else {
                opponent(&idx, &states, &mut rngs)
            };
            for (&g, &a) in idx.iter().zip(&moves) {
                let sign = if agent { 1 } else { -1 };
                match states[g].play(a) {
                    Outcome::Win => result[g] = Some(sign),
                    Outcome::Draw => result[g] = Some(0),
                    Outcome::Ongoing => {}
                }
            }
        }
    }
    let mut m = Match {
        games,
        ..Match::default()
    };
    for r in result.into_iter().flatten() {
        match r {
            1 => m.wins += 1,
            0 => m.draws += 1,
            _ => m.losses += 1,
        }
    }
    m
}

impl AlphaZero {
    pub fn new(cfg: AzConfig) -> Result<AlphaZero, String> {
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
    pub fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), String> {
        self.backend = maker(
            &self.net.layout(),
            &self.backend.params(),
            self.backend.optimizer(),
        )?;
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
    pub fn restore(
        &mut self,
        st: AzState,
        mut get: impl FnMut(&str) -> Option<Vec<f32>>,
    ) -> Result<(), String> {
        // Checkpoints from before gating have no accepted network: they never gated.
        let accepted = get("accepted");
        let mut take = |name: &str, len: usize| crate::run::take_tensor(&mut get, name, len);
        let decode = |v: Vec<f32>, what: &str| -> Result<Vec<ConnectFour>, String> {
            let w: Vec<u32> = v.into_iter().map(f32::to_bits).collect();
            w.chunks(ConnectFour::WORDS)
                .map(|c| {
                    ConnectFour::decode(c)
                        .ok_or_else(|| format!("{what}: not a Connect Four position"))
                })
                .collect()
        };
        let n = self.net.params.len();
        let (a, words) = (ConnectFour::ACTIONS, ConnectFour::WORDS);
        let games = self.cfg.games;
        if st.history_lens.len() != games || st.buffer_len > self.cfg.buffer_size {
            return Err("games or buffer size differ from the config".into());
        }
        let hist: usize = st.history_lens.iter().sum();
        self.net.params = take("params", n)?;
        self.accepted = accepted.unwrap_or_else(|| self.net.params.clone());
        if self.accepted.len() != n {
            return Err(format!(
                "accepted: {} values, expected {n}",
                self.accepted.len()
            ));
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

/// metrics.csv columns of AlphaZero runs: learning metrics first (deterministic), then
/// wall-clock stage times.
pub const AZ_METRICS_HEADER: &str = "iteration,samples,games_finished,policy_loss,value_loss,win_rate_random,win_rate_solver,loss_rate_solver,time_search,time_inference,time_learner,time_eval,samples_per_sec";

/// Number of leading deterministic columns of [`AZ_METRICS_HEADER`].
pub const AZ_DETERMINISTIC_COLUMNS: usize = 8;

impl crate::driver::Algorithm for AlphaZero {
    type Config = AzConfig;
    type State = AzState;
    type Stats = AzStats;
    type Mark = (AzTimes, u64);

    const METRICS_HEADER: &'static str = AZ_METRICS_HEADER;
    const DETERMINISTIC_COLUMNS: usize = AZ_DETERMINISTIC_COLUMNS;

    /// Self-play runs on the backend's one thread; `threads` is not used.
    fn build(cfg: AzConfig, _threads: usize) -> Result<AlphaZero, String> {
        AlphaZero::new(cfg)
    }
    fn shape(c: &AzConfig) -> crate::driver::RunShape<'_> {
        crate::driver::RunShape {
            algo: "alphazero",
            env: &c.env,
            seed: c.seed,
            budget: c.iterations,
            num_envs: c.games,
            checkpoint_every: c.checkpoint_every,
            lower: "--games, --simulations, eval_games or buffer_size",
        }
    }
    fn memory_estimate(c: &AzConfig) -> crate::memory::Estimate {
        c.memory_estimate()
    }
    fn config(&self) -> &AzConfig {
        &self.cfg
    }
    fn device(&self) -> String {
        AlphaZero::device(self)
    }
    fn set_backend(&mut self, maker: &BackendMaker) -> Result<(), String> {
        AlphaZero::set_backend(self, maker)
    }
    fn done(&self) -> bool {
        AlphaZero::done(self)
    }
    fn position(&self) -> u64 {
        self.iteration
    }
    fn work(&self) -> u64 {
        self.samples
    }
    fn mark(&self) -> (AzTimes, u64) {
        (self.times, self.samples)
    }
    fn iterate(&mut self, _turn: &crate::driver::Turn<'_>) -> Option<AzStats> {
        Some(AlphaZero::iterate(self))
    }
    fn record(
        &self,
        s: &AzStats,
        (before, s0): &(AzTimes, u64),
        wall: f64,
    ) -> crate::driver::Record {
        let t = self.times;
        let sps = (self.samples - s0) as f64 / wall;
        crate::driver::Record {
            row: format!(
                "{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.1}",
                s.iteration,
                s.samples,
                s.games_finished,
                s.policy_loss,
                s.value_loss,
                s.win_rate_random,
                s.win_rate_solver,
                s.loss_rate_solver,
                t.search - before.search,
                t.inference - before.inference,
                t.learner - before.learner,
                t.eval - before.eval,
                sps
            ),
            step: s.samples,
            scalars: vec![
                ("losses/policy_loss", s.policy_loss),
                ("losses/value_loss", s.value_loss),
                ("eval/win_rate_random", s.win_rate_random),
                ("eval/win_rate_solver", s.win_rate_solver),
                ("eval/loss_rate_solver", s.loss_rate_solver),
                ("eval/gate_score", s.gate_score),
                ("charts/samples_per_sec", sps),
                ("charts/games_finished", s.games_finished as f64),
            ],
            rate: sps,
            episode_return: f64::NAN,
        }
    }
    fn checkpoint(&self, dir: &crate::run::RunDir) -> Result<(), crate::run::RunError> {
        let (state, tensors) = self.state();
        let views: Vec<(&str, &[f32])> = tensors.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        dir.save_tensors("alphazero", self.iteration, &self.cfg, &state, &views)?;
        Ok(())
    }
    fn restore(
        &mut self,
        st: AzState,
        get: &mut dyn FnMut(&str) -> Option<Vec<f32>>,
    ) -> Result<(), String> {
        AlphaZero::restore(self, st, get)
    }
    /// The evaluation games are part of the iterations; the last ones are eval.json.
    fn evaluate(&self, _episodes: usize, _seed: u64) -> Option<crate::eval::Episodes> {
        None
    }
    /// Iterations without an evaluation keep showing the last one's win rates.
    fn carry(last: &AzStats, s: &AzStats) -> AzStats {
        if s.win_rate_random.is_finite() || last.iteration == 0 {
            s.clone()
        } else {
            AzStats {
                win_rate_random: last.win_rate_random,
                win_rate_solver: last.win_rate_solver,
                loss_rate_solver: last.loss_rate_solver,
                ..s.clone()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> AzConfig {
        AzConfig {
            iterations: 3,
            games: 8,
            moves_per_iteration: 6,
            simulations: 8,
            hidden: vec![16],
            batch_size: 16,
            updates_per_iteration: 2,
            buffer_size: 64,
            eval_every: 0,
            eval_games: 2,
            eval_simulations: 4,
            ..AzConfig::default()
        }
    }

    /// A gate keeps the trained network only when it scores at least the threshold;
    /// otherwise training resumes from the accepted weights, on the host and in the
    /// backend alike.
    #[test]
    fn gating_accepts_or_reverts_to_the_accepted_network() {
        let (mut accepted, mut rejected) = (0, 0);
        for seed in 1..=6 {
            let cfg = AzConfig {
                seed,
                gate_every: 1,
                gate_games: 4,
                gate_threshold: 0.75,
                ..small()
            };
            let mut az = AlphaZero::new(cfg).unwrap();
            for _ in 0..3 {
                let before = az.accepted.clone();
                let st = az.iterate();
                assert!(st.gate_score.is_finite() && (0.0..=1.0).contains(&st.gate_score));
                assert_eq!(st.gate_accepted, st.gate_score >= 0.75);
                assert_eq!(az.net.params, az.accepted);
                assert_eq!(az.backend.params(), az.accepted);
                if st.gate_accepted {
                    accepted += 1;
                } else {
                    assert_eq!(
                        az.accepted, before,
                        "a rejected network replaced the accepted one"
                    );
                    rejected += 1;
                }
            }
        }
        assert!(
            accepted > 0 && rejected > 0,
            "{accepted} accepted, {rejected} rejected"
        );
        let bad = AzConfig {
            gate_threshold: 1.5,
            ..small()
        };
        assert!(bad.validate().unwrap_err().contains("gate_threshold"));
    }

    #[test]
    fn opponents_parse_with_clear_errors() {
        assert_eq!("random".parse::<Opponent>(), Ok(Opponent::Random));
        assert_eq!("solver:3".parse::<Opponent>(), Ok(Opponent::Solver(3)));
        assert!(
            "solver:x"
                .parse::<Opponent>()
                .unwrap_err()
                .contains("depth")
        );
        assert!(
            "minimax"
                .parse::<Opponent>()
                .unwrap_err()
                .contains("unknown")
        );
    }

    #[test]
    fn outcomes_are_from_the_side_to_move() {
        // Play until a game finishes, then check each stored position's z by replaying.
        let mut az = AlphaZero::new(small()).unwrap();
        while az.buffer.is_empty() {
            az.self_play_move();
        }
        // Every stored outcome is +-1 or 0, and positions of the same game alternate.
        assert!(
            az.buffer
                .outcomes
                .iter()
                .all(|z| [1.0, -1.0, 0.0].contains(z))
        );
        let first = &az.buffer;
        let mut i = 0;
        while i + 1 < first.len() && first.states[i + 1].moves() == first.states[i].moves() + 1 {
            if first.outcomes[i] != 0.0 {
                assert_eq!(first.outcomes[i], -first.outcomes[i + 1]);
            }
            i += 1;
        }
        // Policies are distributions over legal moves.
        for (k, s) in first.states.iter().enumerate() {
            let pi = &first.policies[k * 7..(k + 1) * 7];
            assert!((pi.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            for c in 0..7 {
                if !s.can_play(c) {
                    assert_eq!(pi[c], 0.0);
                }
            }
        }
    }

    #[test]
    fn checkpoint_state_round_trips_mid_run() {
        let mut a = AlphaZero::new(small()).unwrap();
        a.iterate();
        let (st, tensors) = a.state();
        let map: std::collections::HashMap<&str, Vec<f32>> = tensors.into_iter().collect();
        let mut b = AlphaZero::new(small()).unwrap();
        b.restore(st, |k| map.get(k).cloned()).unwrap();
        while !a.done() {
            let (x, y) = (a.iterate(), b.iterate());
            assert_eq!(format!("{x:?}"), format!("{y:?}"));
        }
        assert_eq!(a.net.params, b.net.params);
        // A damaged state is refused.
        let (st, tensors) = a.state();
        let mut map: std::collections::HashMap<&str, Vec<f32>> = tensors.into_iter().collect();
        map.get_mut("slots.states").unwrap()[0] = f32::from_bits(u32::MAX);
        let mut c = AlphaZero::new(small()).unwrap();
        let e = c.restore(st, |k| map.get(k).cloned()).unwrap_err();
        assert!(e.contains("not a Connect Four position"), "{e}");
    }
}
