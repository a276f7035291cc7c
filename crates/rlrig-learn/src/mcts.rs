//! Batched Monte Carlo tree search (PUCT, as AlphaZero) over many games in lock-step.
//!
//! A tiny policy-value network called once per tree leaf starves any device: each call
//! costs far more than its arithmetic. Here every simulation step walks one leaf out of
//! each of N game trees, evaluates the N leaves in **one** [`Evaluator`] call, then
//! expands and backs them up. Trees live in preallocated arrays (one node per
//! position, children contiguous), reused across searches.
//!
//! Determinism: a game's Dirichlet noise comes from the generator the caller passes for
//! that game, and a leaf's evaluation depends only on its own observation, so searching
//! a game alone or among others gives the same visit counts (tested; the network
//! path's per-row results must not depend on the batch size, which holds for the native
//! MLP within one gemm kernel choice).

use rlrig_env::Rng;
use rlrig_env::games::{Game, Outcome};
use serde::{Deserialize, Serialize};

/// Answers many small forward requests at once: for `n` observations (`n x OBS_DIM`)
/// it writes policy logits (`n x ACTIONS`) and values in [-1, 1] for the side to move.
pub trait Evaluator {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]);
}

/// Uniform priors and value 0: search without knowledge (for tests and for measuring
/// the cost of the tree alone).
pub struct UniformEvaluator;

impl Evaluator for UniformEvaluator {
    fn evaluate(&mut self, _: &[f32], _: usize, logits: &mut [f32], values: &mut [f32]) {
        logits.fill(0.0);
        values.fill(0.0);
    }
}

/// Search settings.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MctsConfig {
    /// Simulations (leaf evaluations) per search.
    pub simulations: usize,
    /// PUCT exploration constant.
    pub c_puct: f32,
    /// Dirichlet noise at the root during self-play: concentration and mixing weight.
    pub dirichlet_alpha: f32,
    pub dirichlet_fraction: f32,
}

impl Default for MctsConfig {
    fn default() -> Self {
        MctsConfig {
            simulations: 64,
            c_puct: 1.25,
            dirichlet_alpha: 0.3,
            dirichlet_fraction: 0.25,
        }
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node<G> {
    state: G,
    parent: u32,
    first_child: u32,
    n_children: u8,
    action: u8,
    /// 0 ongoing, 1 the move into this node won, 2 it drew.
    end: u8,
    prior: f32,
    visits: u32,
    /// Sum of values from the view of the player who moved into this node.
    value_sum: f32,
}

/// One game's tree, reused across searches.
struct Tree<G> {
    nodes: Vec<Node<G>>,
}

impl<G: Game> Tree<G> {
    fn reset(&mut self, root: G) {
        self.nodes.clear();
        self.nodes.push(Node {
            state: root,
            parent: NONE,
            first_child: NONE,
            n_children: 0,
            action: 0,
            end: 0,
            prior: 1.0,
            visits: 0,
            value_sum: 0.0,
        });
    }

    /// Walks from the root by PUCT to a node that is unexpanded or terminal.
    fn select(&self, c_puct: f32) -> u32 {
        let mut i = 0u32;
        loop {
            let n = &self.nodes[i as usize];
            if n.end != 0 || n.first_child == NONE {
                return i;
            }
            let sqrt_n = (n.visits as f32).sqrt();
            let mut best = (f32::NEG_INFINITY, n.first_child);
            for c in n.first_child..n.first_child + u32::from(n.n_children) {
                let ch = &self.nodes[c as usize];
                let q = if ch.visits == 0 {
                    0.0
                } else {
                    ch.value_sum / ch.visits as f32
                };
                let score = q + c_puct * ch.prior * sqrt_n / (1.0 + ch.visits as f32);
                if score > best.0 {
                    best = (score, c);
                }
            }
            i = best.1;
        }
    }

    /// Adds the children of `i` with priors from masked softmax of `logits`.
    fn expand(&mut self, i: u32, logits: &[f32]) {
        let state = self.nodes[i as usize].state;
        let legal = state.legal();
        let max = (0..G::ACTIONS)
            .filter(|a| legal >> a & 1 == 1)
            .map(|a| logits[a])
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        let first = self.nodes.len() as u32;
        for a in 0..G::ACTIONS {
            if legal >> a & 1 == 0 {
                continue;
            }
            let p = (logits[a] - max).exp();
            sum += p;
            let mut s = state;
            let end = match s.play(a) {
                Outcome::Ongoing => 0,
                Outcome::Win => 1,
                Outcome::Draw => 2,
            };
            self.nodes.push(Node {
                state: s,
                parent: i,
                first_child: NONE,
                n_children: 0,
                action: a as u8,
                end,
                prior: p,
                visits: 0,
                value_sum: 0.0,
            });
        }
        let n = self.nodes.len() as u32 - first;
        for c in &mut self.nodes[first as usize..] {
            c.prior /= sum;
        }
        let node = &mut self.nodes[i as usize];
        node.first_child = first;
        node.n_children = n as u8;
    }

    /// Adds `value` (from the view of the player who moved into `i`) along the path.
    fn backup(&mut self, mut i: u32, mut value: f32) {
        while i != NONE {
            let n = &mut self.nodes[i as usize];
            n.visits += 1;
            n.value_sum += value;
            value = -value;
            i = n.parent;
        }
    }

    fn add_noise(&mut self, rng: &mut Rng, alpha: f32, frac: f32) {
        let root = self.nodes[0];
        let (first, k) = (root.first_child as usize, usize::from(root.n_children));
        if k == 0 {
            return;
        }
        let mut noise = [0.0f32; 64];
        let mut sum = 0.0;
        for x in noise[..k].iter_mut() {
            *x = gamma(rng, f64::from(alpha)) as f32;
            sum += *x;
        }
        for (c, x) in self.nodes[first..first + k].iter_mut().zip(&noise) {
            c.prior = (1.0 - frac) * c.prior + frac * x / sum.max(f32::MIN_POSITIVE);
        }
    }

    fn root_visits(&self, out: &mut [f32]) {
        out.fill(0.0);
        let root = &self.nodes[0];
        if root.first_child == NONE {
            return;
        }
        for c in root.first_child..root.first_child + u32::from(root.n_children) {
            let ch = &self.nodes[c as usize];
            out[usize::from(ch.action)] = ch.visits as f32;
        }
    }

    fn root_value(&self) -> f32 {
        // The root's own sum is from the view of whoever moved into it: negate.
        let r = &self.nodes[0];
        if r.visits == 0 {
            0.0
        } else {
            -r.value_sum / r.visits as f32
        }
    }
}

/// A Gamma(alpha, 1) draw (Marsaglia and Tsang; alpha < 1 by boosting).
pub fn gamma(rng: &mut Rng, alpha: f64) -> f64 {
    if alpha < 1.0 {
        let u = rng.unit_f64().max(f64::MIN_POSITIVE);
        return gamma(rng, alpha + 1.0) * u.powf(1.0 / alpha);
    }
    let d = alpha - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = crate::nn::normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = rng.unit_f64();
        if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

/// Searches many games at once; buffers are reused across calls.
pub struct BatchedMcts<G: Game> {
    pub cfg: MctsConfig,
    trees: Vec<Tree<G>>,
    obs: Vec<f32>,
    logits: Vec<f32>,
    values: Vec<f32>,
    pending: Vec<(usize, u32)>,
    /// Leaf evaluations in the last search (for throughput figures).
    pub evaluations: u64,
    /// Evaluator calls in the last search.
    pub calls: u64,
}

impl<G: Game> BatchedMcts<G> {
    pub fn new(cfg: MctsConfig) -> BatchedMcts<G> {
        BatchedMcts {
            cfg,
            trees: Vec::new(),
            obs: Vec::new(),
            logits: Vec::new(),
            values: Vec::new(),
            pending: Vec::new(),
            evaluations: 0,
            calls: 0,
        }
    }

    /// Runs one search per root; `rngs[g]` draws game g's root noise when `noise` is
    /// set. Afterwards [`BatchedMcts::visits`] and [`BatchedMcts::value`] read the
    /// results. Roots must not be finished games.
    pub fn search(
        &mut self,
        roots: &[G],
        rngs: &mut [Rng],
        noise: bool,
        eval: &mut impl Evaluator,
    ) {
        let n = roots.len();
        assert_eq!(rngs.len(), n, "one generator per game");
        let cap = 1 + self.cfg.simulations.max(1) * G::ACTIONS;
        while self.trees.len() < n {
            self.trees.push(Tree {
                nodes: Vec::with_capacity(cap),
            });
        }
        self.obs.resize(n * G::OBS_DIM, 0.0);
        self.logits.resize(n * G::ACTIONS, 0.0);
        self.values.resize(n, 0.0);
        self.evaluations = 0;
        self.calls = 0;
        // Roots: one batched evaluation, expansion, noise.
        for (g, r) in roots.iter().enumerate() {
            assert!(r.legal() != 0, "search from a finished game");
            self.trees[g].reset(*r);
            r.observe(&mut self.obs[g * G::OBS_DIM..(g + 1) * G::OBS_DIM]);
        }
        self.eval(n, eval);
        for g in 0..n {
            let t = &mut self.trees[g];
            t.expand(0, &self.logits[g * G::ACTIONS..(g + 1) * G::ACTIONS]);
            t.backup(0, -self.values[g]);
            if noise {
                t.add_noise(
                    &mut rngs[g],
                    self.cfg.dirichlet_alpha,
                    self.cfg.dirichlet_fraction,
                );
            }
        }
        for _ in 0..self.cfg.simulations {
            self.pending.clear();
            for g in 0..n {
                let t = &mut self.trees[g];
                let leaf = t.select(self.cfg.c_puct);
                let node = &t.nodes[leaf as usize];
                match node.end {
                    1 => t.backup(leaf, 1.0),
                    2 => t.backup(leaf, 0.0),
                    _ => {
                        let k = self.pending.len();
                        node.state
                            .observe(&mut self.obs[k * G::OBS_DIM..(k + 1) * G::OBS_DIM]);
                        self.pending.push((g, leaf));
                    }
                }
            }
            let m = self.pending.len();
            if m == 0 {
                continue;
            }
            self.eval(m, eval);
            for (k, &(g, leaf)) in self.pending.iter().enumerate() {
                let t = &mut self.trees[g];
                t.expand(leaf, &self.logits[k * G::ACTIONS..(k + 1) * G::ACTIONS]);
                // The network's value is the leaf mover's; the node keeps its parent's.
                t.backup(leaf, -self.values[k]);
            }
        }
    }

    fn eval(&mut self, m: usize, eval: &mut impl Evaluator) {
        eval.evaluate(
            &self.obs[..m * G::OBS_DIM],
            m,
            &mut self.logits[..m * G::ACTIONS],
            &mut self.values[..m],
        );
        self.evaluations += m as u64;
        self.calls += 1;
    }

    /// Root visit counts of game `g` from the last search (`ACTIONS` values).
    pub fn visits(&self, g: usize, out: &mut [f32]) {
        self.trees[g].root_visits(out);
    }

    /// Mean value of game `g`'s root for the side to move.
    pub fn value(&self, g: usize) -> f32 {
        self.trees[g].root_value()
    }
}

/// Picks an action from root visit counts: the most visited (lowest index on ties)
/// when `temperature` is 0, else a draw proportional to visits^(1/temperature).
pub fn choose(visits: &[f32], temperature: f32, rng: &mut Rng) -> usize {
    if temperature <= 0.0 {
        return (0..visits.len()).fold(0, |b, a| if visits[a] > visits[b] { a } else { b });
    }
    let w: Vec<f64> = visits
        .iter()
        .map(|&v| f64::from(v).powf(1.0 / f64::from(temperature)))
        .collect();
    let total: f64 = w.iter().sum();
    let mut u = rng.unit_f64() * total;
    for (a, x) in w.iter().enumerate() {
        if u < *x {
            return a;
        }
        u -= x;
    }
    w.iter().rposition(|&x| x > 0.0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlrig_env::Purpose;
    use rlrig_env::games::ConnectFour;

    /// No knowledge: search alone must find tactics.
    use super::UniformEvaluator as Uniform;

    /// A fixed random "network": a deterministic function of each observation row.
    struct Hashy;
    impl Evaluator for Hashy {
        fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
            let d = obs.len() / n;
            for r in 0..n {
                let row = &obs[r * d..(r + 1) * d];
                let h = row.iter().enumerate().fold(0u64, |h, (i, &x)| {
                    h.wrapping_mul(31)
                        .wrapping_add((x as u64 + 1) * (i as u64 + 7))
                });
                for a in 0..7 {
                    logits[r * 7 + a] = ((h >> (a * 5)) & 31) as f32 / 16.0;
                }
                values[r] = ((h >> 40) & 255) as f32 / 128.0 - 1.0;
            }
        }
    }

    fn best_move(p: ConnectFour, sims: usize) -> usize {
        let mut m = BatchedMcts::new(MctsConfig {
            simulations: sims,
            ..MctsConfig::default()
        });
        let mut rngs = vec![Rng::stream(1, Purpose::Policy, 0)];
        m.search(&[p], &mut rngs, false, &mut Uniform);
        let mut v = vec![0.0; 7];
        m.visits(0, &mut v);
        choose(&v, 0.0, &mut rngs[0])
    }

    #[test]
    fn finds_a_win_in_one_and_blocks_a_loss_in_one() {
        // X has 1 2 3 on the bottom row: column 4 wins.
        let p = ConnectFour::from_moves("112233").unwrap();
        assert_eq!(best_move(p, 200), 3);
        // O to move must block column 4.
        let p = ConnectFour::from_moves("1122335").unwrap();
        assert_eq!(best_move(p, 400), 3);
    }

    #[test]
    fn finds_a_forced_win_in_three() {
        // X (to move) has 3 and 4 on the bottom row with 2 and 5 empty: playing 2 or 5
        // makes an open three with two winning cells, a win in 3 plies.
        let p = ConnectFour::from_moves("4433").unwrap();
        let mv = best_move(p, 2000);
        assert!(mv == 1 || mv == 4, "expected column 2 or 5, got {}", mv + 1);
        // Check against the solver: the chosen move wins.
        let mut q = p;
        q.play_col(mv);
        assert!(rlrig_env::games::Solver::default().solve(&q) < 0);
    }

    #[test]
    fn only_legal_moves_get_visits() {
        // Column 1 full.
        let p = ConnectFour::from_moves("111111").unwrap();
        let mut m = BatchedMcts::new(MctsConfig::default());
        let mut rngs = vec![Rng::stream(3, Purpose::Policy, 0)];
        m.search(&[p], &mut rngs, true, &mut Hashy);
        let mut v = vec![0.0; 7];
        m.visits(0, &mut v);
        assert_eq!(v[0], 0.0);
        assert_eq!(v.iter().sum::<f32>(), 64.0);
    }

    #[test]
    fn batched_search_equals_searching_each_game_alone() {
        let roots: Vec<ConnectFour> = ["", "4", "44", "4433", "1234567", "7654321123"]
            .iter()
            .map(|m| ConnectFour::from_moves(m).unwrap())
            .collect();
        let rng = |g: usize| Rng::stream(9, Purpose::Policy, g as u64);
        let mut all = BatchedMcts::new(MctsConfig::default());
        let mut rngs: Vec<Rng> = (0..roots.len()).map(rng).collect();
        all.search(&roots, &mut rngs, true, &mut Hashy);
        assert_eq!(
            all.calls, 65,
            "one evaluator call per simulation plus the roots"
        );
        for (g, r) in roots.iter().enumerate() {
            let mut one = BatchedMcts::new(MctsConfig::default());
            one.search(&[*r], &mut [rng(g)], true, &mut Hashy);
            let (mut a, mut b) = (vec![0.0; 7], vec![0.0; 7]);
            all.visits(g, &mut a);
            one.visits(0, &mut b);
            assert_eq!(a, b, "game {g}");
            assert_eq!(all.value(g), one.value(0));
        }
    }

    #[test]
    fn gamma_draws_have_the_right_mean() {
        let mut rng = Rng::stream(4, Purpose::User, 0);
        for alpha in [0.3, 1.0, 2.5] {
            let n = 20_000;
            let mean = (0..n).map(|_| gamma(&mut rng, alpha)).sum::<f64>() / n as f64;
            assert!(
                (mean - alpha).abs() < 0.05 * alpha.max(1.0),
                "alpha {alpha}: {mean}"
            );
        }
    }

    #[test]
    fn temperature_zero_is_argmax_and_sampling_follows_counts() {
        let mut rng = Rng::stream(5, Purpose::User, 0);
        assert_eq!(choose(&[1.0, 5.0, 5.0, 0.0], 0.0, &mut rng), 1);
        let mut hits = [0usize; 3];
        for _ in 0..3000 {
            hits[choose(&[1.0, 2.0, 0.0], 1.0, &mut rng)] += 1;
        }
        assert_eq!(hits[2], 0);
        assert!(
            (hits[1] as f64 / 3000.0 - 2.0 / 3.0).abs() < 0.04,
            "{hits:?}"
        );
    }
}
