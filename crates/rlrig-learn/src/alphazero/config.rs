//! AlphaZero's configuration: hyperparameters, validation, memory estimate and the
//! search settings they give.

use super::*;
use crate::LearnError;
use crate::rules::{self, fields};

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
    pub fn validate(&self) -> Result<(), LearnError> {
        if !rlrig_env::games::GAME_IDS.contains(&self.env.as_str()) {
            return Err(LearnError::Config(format!(
                "unknown game '{}' (known: {})",
                self.env,
                rlrig_env::games::GAME_IDS.join(", ")
            )));
        }
        rules::at_least_one(fields!(self: games, moves_per_iteration, simulations, batch_size))?;
        rules::at_least_one(fields!(self: buffer_size, eval_simulations, max_considered))?;
        rules::at_least_one(fields!(self: eval_depth))?;
        if self.gate_every > 0 && self.gate_games == 0 {
            return Err(LearnError::Config(
                "gate_games must be at least 1 when gate_every > 0".into(),
            ));
        }
        rules::unit_interval(fields!(self: gate_threshold))?;
        rules::unit_interval(fields!(self: dirichlet_fraction))?;
        if self.channels > 512 || self.blocks > 40 {
            return Err(LearnError::Config(format!(
                "channels (at most 512) and blocks (at most 40) size the CNN, got {} and {}",
                self.channels, self.blocks
            )));
        }
        rules::hidden_layers(&self.hidden)?;
        rules::positive(fields!(self: learning_rate))?;
        rules::positive(fields!(self: dirichlet_alpha))?;
        rules::non_negative(fields!(self: weight_decay))
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

impl crate::memory::Estimated for AzConfig {
    /// What the run's large buffers take: the self-play games' search trees, the
    /// evaluation games' (played in lock-step too) and the replay buffer of positions.
    fn memory_estimate(&self) -> crate::memory::Estimate {
        search_memory(self.games, self.simulations)
            .and(search_memory(self.eval_games, self.eval_simulations))
            .add(
                format!("replay buffer of {} positions", self.buffer_size),
                self.buffer_size as f64 * (2.0 * 42.0 + 8.0) * 4.0,
            )
    }
}
