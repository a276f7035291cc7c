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

pub use crate::backend::Evaluator;

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
    /// Gumbel AlphaZero root selection (Danihelka et al. 2022): sample the top
    /// `max_considered` root actions by Gumbel noise plus logits, share the simulations
    /// among them by sequential halving, and train on the improved policy
    /// softmax(logits + sigma(completed Q)). Interior nodes keep PUCT.
    pub gumbel: bool,
    pub max_considered: usize,
    /// sigma(q) = (c_visit + max visits) * c_scale * q, with q rescaled to [0, 1]
    /// (mctx's defaults: 50 and 0.1).
    pub c_visit: f32,
    pub c_scale: f32,
}

impl Default for MctsConfig {
    fn default() -> Self {
        MctsConfig {
            simulations: 64,
            c_puct: 1.25,
            dirichlet_alpha: 0.3,
            dirichlet_fraction: 0.25,
            gumbel: false,
            max_considered: 16,
            c_visit: 50.0,
            c_scale: 0.1,
        }
    }
}

/// The visit count each simulation's root action must have under sequential halving
/// of `n` simulations over `m` considered actions (as mctx's
/// `get_sequence_of_considered_visits`): every considered action gets the same share of
/// a phase, then the better half goes on.
pub fn considered_visits(m: usize, n: usize) -> Vec<u32> {
    if m <= 1 {
        return (0..n as u32).collect();
    }
    let log2max = (m as f64).log2().ceil() as usize;
    let mut seq = Vec::with_capacity(n);
    let mut visits = vec![0u32; m];
    let mut considered = m;
    while seq.len() < n {
        let extra = (n / (log2max * considered)).max(1);
        for _ in 0..extra {
            seq.extend_from_slice(&visits[..considered]);
            for v in &mut visits[..considered] {
                *v += 1;
            }
        }
        considered = (considered / 2).max(2);
    }
    seq.truncate(n);
    seq
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
    /// Gumbel mode: per-action Gumbel noise and root log-priors (indexed by action),
    /// the network's root value and the sequential-halving schedule.
    gumbel: Vec<f32>,
    log_prior: Vec<f32>,
    net_value: f32,
    schedule: Vec<u32>,
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

    /// Walks from the root to a node that is unexpanded or terminal: PUCT, except at a
    /// Gumbel root, where simulation `sim` follows the sequential-halving schedule.
    fn select(&self, cfg: &MctsConfig, sim: usize) -> u32 {
        let c_puct = cfg.c_puct;
        let mut i = 0u32;
        if cfg.gumbel && self.nodes[0].first_child != NONE {
            i = self.gumbel_root_child(cfg, Some(self.schedule[sim]));
        }
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

    /// Completed, rescaled and scaled Q of every root child (sigma(q-hat)), indexed
    /// like the children: visited children keep their Q, unvisited ones get the mixed
    /// value of the network's root value and the prior-weighted visited Qs.
    fn sigma_q(&self, cfg: &MctsConfig, out: &mut [f32]) {
        let root = &self.nodes[0];
        let kids = &self.nodes
            [root.first_child as usize..(root.first_child + u32::from(root.n_children)) as usize];
        let (mut sum_n, mut sum_pq, mut sum_p, mut max_n) = (0.0f32, 0.0f32, 0.0f32, 0u32);
        for c in kids {
            if c.visits > 0 {
                let q = c.value_sum / c.visits as f32;
                sum_n += c.visits as f32;
                sum_pq += c.prior * q;
                sum_p += c.prior;
                max_n = max_n.max(c.visits);
            }
        }
        let mixed = if sum_p > 0.0 {
            (self.net_value + sum_n * sum_pq / sum_p) / (1.0 + sum_n)
        } else {
            self.net_value
        };
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for (o, c) in out.iter_mut().zip(kids) {
            *o = if c.visits > 0 {
                c.value_sum / c.visits as f32
            } else {
                mixed
            };
            lo = lo.min(*o);
            hi = hi.max(*o);
        }
        let scale = (cfg.c_visit + max_n as f32) * cfg.c_scale;
        for o in out[..kids.len()].iter_mut() {
            *o = scale * (*o - lo) / (hi - lo).max(1e-8);
        }
    }

    /// The root child maximising gumbel + log-prior + sigma(q-hat) among those with
    /// `visits` visits (any when `None`: the final choice, among the most visited).
    fn gumbel_root_child(&self, cfg: &MctsConfig, visits: Option<u32>) -> u32 {
        let root = &self.nodes[0];
        let first = root.first_child;
        let k = usize::from(root.n_children);
        let mut sq = [0.0f32; 64];
        self.sigma_q(cfg, &mut sq[..k]);
        let want = visits.unwrap_or_else(|| {
            (first..first + k as u32)
                .map(|c| self.nodes[c as usize].visits)
                .max()
                .unwrap_or(0)
        });
        let mut best = (f32::NEG_INFINITY, NONE);
        for j in 0..k {
            let c = &self.nodes[first as usize + j];
            if c.visits != want {
                continue;
            }
            let a = usize::from(c.action);
            let score = self.gumbel[a] + self.log_prior[a] + sq[j];
            if score > best.0 {
                best = (score, first + j as u32);
            }
        }
        if best.1 == NONE {
            // The schedule asked for a count no considered child has (fewer legal
            // actions than considered): fall back to the least visited, best scored.
            let mut least = (u32::MAX, f32::NEG_INFINITY, first);
            for j in 0..k {
                let c = &self.nodes[first as usize + j];
                let a = usize::from(c.action);
                let score = self.gumbel[a] + self.log_prior[a] + sq[j];
                if c.visits < least.0 || (c.visits == least.0 && score > least.1) {
                    least = (c.visits, score, first + j as u32);
                }
            }
            return least.2;
        }
        best.1
    }

    /// The improved policy softmax(log-prior + sigma(completed Q)) over root actions.
    fn improved_policy(&self, cfg: &MctsConfig, out: &mut [f32]) {
        out.fill(0.0);
        let root = &self.nodes[0];
        let k = usize::from(root.n_children);
        let mut sq = [0.0f32; 64];
        self.sigma_q(cfg, &mut sq[..k]);
        let mut z = [0.0f32; 64];
        let mut max = f32::NEG_INFINITY;
        for j in 0..k {
            let a = usize::from(self.nodes[root.first_child as usize + j].action);
            z[j] = self.log_prior[a] + sq[j];
            max = max.max(z[j]);
        }
        let mut sum = 0.0;
        for j in 0..k {
            z[j] = (z[j] - max).exp();
            sum += z[j];
        }
        for j in 0..k {
            let a = usize::from(self.nodes[root.first_child as usize + j].action);
            out[a] = z[j] / sum;
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
                gumbel: vec![0.0; G::ACTIONS],
                log_prior: vec![0.0; G::ACTIONS],
                net_value: 0.0,
                schedule: Vec::new(),
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
            if self.cfg.gumbel {
                t.net_value = self.values[g];
                let root = t.nodes[0];
                t.gumbel.fill(0.0);
                t.log_prior.fill(f32::NEG_INFINITY);
                for c in root.first_child..root.first_child + u32::from(root.n_children) {
                    let ch = t.nodes[c as usize];
                    let a = usize::from(ch.action);
                    t.log_prior[a] = ch.prior.max(f32::MIN_POSITIVE).ln();
                    if noise {
                        // Gumbel(0, 1) = -ln(-ln U).
                        let u = rngs[g].unit_f64().max(f64::MIN_POSITIVE);
                        t.gumbel[a] = -(-u.ln()).ln() as f32;
                    }
                }
                let m = self.cfg.max_considered.min(usize::from(root.n_children));
                t.schedule = considered_visits(m, self.cfg.simulations);
            } else if noise {
                t.add_noise(
                    &mut rngs[g],
                    self.cfg.dirichlet_alpha,
                    self.cfg.dirichlet_fraction,
                );
            }
        }
        for sim in 0..self.cfg.simulations {
            self.pending.clear();
            for g in 0..n {
                let t = &mut self.trees[g];
                let leaf = t.select(&self.cfg, sim);
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

    /// The search's policy target for game `g`: the improved policy in Gumbel mode,
    /// normalised visit counts otherwise.
    pub fn policy(&self, g: usize, out: &mut [f32]) {
        let t = &self.trees[g];
        if self.cfg.gumbel {
            t.improved_policy(&self.cfg, out);
        } else {
            t.root_visits(out);
            let sum: f32 = out.iter().sum();
            out.iter_mut().for_each(|v| *v /= sum.max(1.0));
        }
    }

    /// The action to play in game `g`: Gumbel's final choice (the best of the most
    /// visited by gumbel + logit + sigma(q)); in PUCT mode [`choose`] on the visits with
    /// `temperature`.
    pub fn action(&self, g: usize, temperature: f32, rng: &mut Rng) -> usize {
        let t = &self.trees[g];
        if self.cfg.gumbel {
            let c = t.gumbel_root_child(&self.cfg, None);
            usize::from(t.nodes[c as usize].action)
        } else {
            let mut v = [0.0f32; 64];
            t.root_visits(&mut v[..G::ACTIONS]);
            choose(&v[..G::ACTIONS], temperature, rng)
        }
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

    #[test]
    fn sequential_halving_schedule_matches_mctx() {
        assert_eq!(considered_visits(4, 8), vec![0, 0, 0, 0, 1, 1, 2, 2]);
        assert_eq!(considered_visits(1, 3), vec![0, 1, 2]);
        // 16 considered, 64 simulations: 16 ones, then 8 twice... as mctx computes.
        let s = considered_visits(16, 64);
        assert_eq!(s.len(), 64);
        assert_eq!(&s[..16], &[0; 16]);
        assert_eq!(&s[16..24], &[1; 8]);
        assert_eq!(&s[24..32], &[2; 8]);
    }

    fn gumbel(sims: usize) -> MctsConfig {
        MctsConfig {
            simulations: sims,
            gumbel: true,
            ..MctsConfig::default()
        }
    }

    /// Gumbel's policy improvement with a handful of simulations: the winning move gets
    /// Q = 1 as soon as it is visited once, and the improved policy and the final choice
    /// follow it, with or without noise.
    #[test]
    fn gumbel_finds_a_win_in_one_with_few_simulations() {
        let p = ConnectFour::from_moves("112233").unwrap();
        for noise in [false, true] {
            let mut m = BatchedMcts::new(gumbel(8));
            let mut rngs = vec![Rng::stream(2, Purpose::Policy, 0)];
            m.search(&[p], &mut rngs, noise, &mut Uniform);
            assert_eq!(m.action(0, 0.0, &mut rngs[0]), 3, "noise {noise}");
            let mut pi = vec![0.0; 7];
            m.policy(0, &mut pi);
            assert!((pi.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            assert_eq!(choose(&pi, 0.0, &mut rngs[0]), 3, "{pi:?}");
        }
    }

    #[test]
    fn gumbel_batched_equals_alone_and_spends_every_simulation() {
        let roots: Vec<ConnectFour> = ["", "4433", "111111", "7654321123"]
            .iter()
            .map(|m| ConnectFour::from_moves(m).unwrap())
            .collect();
        let rng = |g: usize| Rng::stream(11, Purpose::Policy, g as u64);
        let mut all = BatchedMcts::new(gumbel(32));
        let mut rngs: Vec<Rng> = (0..roots.len()).map(rng).collect();
        all.search(&roots, &mut rngs, true, &mut Hashy);
        for (g, r) in roots.iter().enumerate() {
            let mut one = BatchedMcts::new(gumbel(32));
            one.search(&[*r], &mut [rng(g)], true, &mut Hashy);
            let (mut a, mut b) = (vec![0.0; 7], vec![0.0; 7]);
            all.policy(g, &mut a);
            one.policy(0, &mut b);
            assert_eq!(a, b, "game {g}");
            all.visits(g, &mut a);
            assert_eq!(a.iter().sum::<f32>(), 32.0);
            if g == 2 {
                assert_eq!(a[0], 0.0, "full column visited");
            }
        }
    }
}
