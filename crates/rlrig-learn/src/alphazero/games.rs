//! Evaluation games: opponents (random, the solver to a depth, another network), a
//! match's tally, and games played greedily or with search.

use super::*;

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
pub(super) fn greedy_moves(
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

pub(super) fn play_games(
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
