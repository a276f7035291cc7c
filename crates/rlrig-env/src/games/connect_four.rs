//! Connect Four (7 columns x 6 rows) on bitboards, and a solver.
//!
//! Layout (Pascal Pons' solver blog, "bitboard"): column `c` owns bits `7c .. 7c+5`
//! (bottom to top) plus one spare bit `7c+6` that keeps columns apart, so
//! four-in-a-row tests are shifts by 1 (vertical), 7 (horizontal), 6 and 8 (diagonals).
//! `mask` holds every stone, `current` the stones of the player to move; playing a
//! column adds `mask`'s lowest empty bit of that column and swaps sides with one XOR.

use super::{Game, Outcome};

pub const WIDTH: usize = 7;
pub const HEIGHT: usize = 6;
const H1: usize = HEIGHT + 1;
const CELLS: u8 = (WIDTH * HEIGHT) as u8;

const fn bottom_mask() -> u64 {
    let mut m = 0;
    let mut c = 0;
    while c < WIDTH {
        m |= 1 << (c * H1);
        c += 1;
    }
    m
}
const BOTTOM: u64 = bottom_mask();
const BOARD: u64 = BOTTOM * ((1 << HEIGHT) - 1);

fn bottom_of(col: usize) -> u64 {
    1 << (col * H1)
}
fn top_of(col: usize) -> u64 {
    1 << (HEIGHT - 1 + col * H1)
}
fn column(col: usize) -> u64 {
    ((1 << HEIGHT) - 1) << (col * H1)
}

/// Whether `pos` holds four in a row.
fn aligned(pos: u64) -> bool {
    [1usize, H1, H1 - 1, H1 + 1].iter().any(|&s| {
        let m = pos & (pos >> s);
        m & (m >> (2 * s)) != 0
    })
}

/// Cells that would complete four in a row for the stones in `pos` (empty or not).
fn winning_cells(pos: u64, mask: u64) -> u64 {
    // Vertical: three stacked stones, the cell above.
    let mut r = (pos << 1) & (pos << 2) & (pos << 3);
    for s in [H1, H1 - 1, H1 + 1] {
        let p = (pos << s) & (pos << (2 * s));
        r |= p & (pos << (3 * s));
        r |= p & (pos >> s);
        let p = (pos >> s) & (pos >> (2 * s));
        r |= p & (pos << s);
        r |= p & (pos >> (3 * s));
    }
    r & (BOARD ^ mask)
}

/// A position; `Copy` and 24 bytes, so search trees store one per node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConnectFour {
    current: u64,
    mask: u64,
    moves: u8,
}

impl ConnectFour {
    pub fn new() -> ConnectFour {
        ConnectFour::default()
    }

    /// The position after playing `moves`, a string of column digits 1-7 (the notation
    /// of Pons' test sets); an error names the first illegal move.
    pub fn from_moves(moves: &str) -> Result<ConnectFour, String> {
        let mut p = ConnectFour::new();
        for (i, ch) in moves.chars().enumerate() {
            let col = ch
                .to_digit(10)
                .filter(|d| (1..=WIDTH as u32).contains(d))
                .ok_or_else(|| format!("move {}: '{ch}' is not a column 1-7", i + 1))?
                as usize
                - 1;
            if !p.can_play(col) {
                return Err(format!("move {}: column {} is full", i + 1, col + 1));
            }
            if p.is_winning_move(col) {
                return Err(format!(
                    "move {}: column {} ends the game; give a position before the end",
                    i + 1,
                    col + 1
                ));
            }
            p.play_col(col);
        }
        Ok(p)
    }

    pub fn moves(&self) -> usize {
        usize::from(self.moves)
    }

    pub fn can_play(&self, col: usize) -> bool {
        self.mask & top_of(col) == 0
    }

    /// Whether playing `col` (which must be playable) wins for the player to move.
    pub fn is_winning_move(&self, col: usize) -> bool {
        let pos = self.current | ((self.mask + bottom_of(col)) & column(col));
        aligned(pos)
    }

    /// Plays `col` (which must be playable); the other player is to move afterwards.
    pub fn play_col(&mut self, col: usize) {
        self.current ^= self.mask;
        self.mask |= self.mask + bottom_of(col);
        self.moves += 1;
    }

    /// A unique key of the position (for transposition tables).
    pub fn key(&self) -> u64 {
        self.current + self.mask
    }

    /// Stone at (`row` from the bottom, `col`): 1 for the player to move, -1 for the
    /// other, 0 if empty.
    pub fn cell(&self, row: usize, col: usize) -> i8 {
        let bit = 1u64 << (col * H1 + row);
        if self.mask & bit == 0 {
            0
        } else if self.current & bit != 0 {
            1
        } else {
            -1
        }
    }

    /// Columns where the player to move may play without letting the opponent win at
    /// once (Pons' "non-losing moves"); 0 if every move loses.
    fn non_losing_moves(&self) -> u64 {
        let possible = (self.mask + BOTTOM) & BOARD;
        let opp_win = winning_cells(self.current ^ self.mask, self.mask);
        let forced = possible & opp_win;
        let mut possible = possible;
        if forced != 0 {
            if forced & (forced - 1) != 0 {
                return 0; // two threats at once
            }
            possible = forced;
        }
        // Never play just below an opponent's winning cell.
        possible & !(opp_win >> 1)
    }

    fn can_win_next(&self) -> bool {
        winning_cells(self.current, self.mask) & (self.mask + BOTTOM) & BOARD != 0
    }

    /// The board as text, top row first: `X` for the player who moved first, `O` for
    /// the second, `.` for empty; a line of column numbers below.
    pub fn render(&self) -> String {
        let first_to_move = self.moves.is_multiple_of(2);
        let mut s = String::new();
        for row in (0..HEIGHT).rev() {
            for col in 0..WIDTH {
                let c = match (self.cell(row, col), first_to_move) {
                    (0, _) => '.',
                    (1, true) | (-1, false) => 'X',
                    _ => 'O',
                };
                s.push(c);
                s.push(' ');
            }
            s.pop();
            s.push('\n');
        }
        s.push_str("1 2 3 4 5 6 7\n");
        s
    }
}

impl Game for ConnectFour {
    const ACTIONS: usize = WIDTH;
    const OBS_DIM: usize = 2 * WIDTH * HEIGHT;
    const NAME: &'static str = "ConnectFour";

    fn legal(&self) -> u64 {
        (0..WIDTH)
            .filter(|&c| self.can_play(c))
            .fold(0, |m, c| m | 1 << c)
    }

    fn play(&mut self, action: usize) -> Outcome {
        assert!(
            action < WIDTH && self.can_play(action),
            "ConnectFour::play: column {action} is not playable"
        );
        if self.is_winning_move(action) {
            self.play_col(action);
            return Outcome::Win;
        }
        self.play_col(action);
        if self.moves == CELLS {
            Outcome::Draw
        } else {
            Outcome::Ongoing
        }
    }

    const WORDS: usize = 5;

    fn encode(&self, out: &mut Vec<u32>) {
        out.extend([
            self.current as u32,
            (self.current >> 32) as u32,
            self.mask as u32,
            (self.mask >> 32) as u32,
            u32::from(self.moves),
        ]);
    }

    fn decode(w: &[u32]) -> Option<Self> {
        if w.len() != 5 {
            return None;
        }
        let current = u64::from(w[0]) | u64::from(w[1]) << 32;
        let mask = u64::from(w[2]) | u64::from(w[3]) << 32;
        // Stones inside the board, the mover's among them, columns filled from the
        // bottom, and the move count equal to the stones.
        let gravity = (0..WIDTH).all(|c| {
            let col = (mask & column(c)) >> (c * H1);
            col & (col + 1) == 0
        });
        let ok = mask & !BOARD == 0
            && current & !mask == 0
            && gravity
            && w[4] == mask.count_ones()
            && w[4] <= u32::from(CELLS);
        ok.then_some(ConnectFour {
            current,
            mask,
            moves: w[4] as u8,
        })
    }

    fn render(&self) -> String {
        ConnectFour::render(self)
    }

    /// Two 6x7 planes, row-major from the bottom row: the player to move's stones,
    /// then the opponent's.
    fn observe(&self, out: &mut [f32]) {
        for row in 0..HEIGHT {
            for col in 0..WIDTH {
                let v = self.cell(row, col);
                out[row * WIDTH + col] = f32::from(u8::from(v == 1));
                out[WIDTH * HEIGHT + row * WIDTH + col] = f32::from(u8::from(v == -1));
            }
        }
    }
}

/// Scores follow Pons: 0 is a draw; a positive score means the player to move wins,
/// by `(43 - m) / 2` when the winning stone is the game's `m+1`-th (the sooner the win,
/// the larger); negative scores mirror that for losses.
pub const MIN_SCORE: i32 = -(CELLS as i32) / 2 + 3;
pub const MAX_SCORE: i32 = (CELLS as i32 + 1) / 2 - 3;

/// Move order: centre columns first (they take part in more alignments).
const ORDER: [usize; WIDTH] = [3, 2, 4, 1, 5, 0, 6];

/// Negamax alpha-beta with a transposition table, centre-first move ordering and
/// non-losing-move pruning (the approach of Pascal Pons' solver blog). Solves
/// mid-game positions exactly, and searches to a fixed depth from any position.
pub struct Solver {
    /// Upper bounds keyed by position (`key`, bound + offset), direct-mapped.
    table: Vec<(u64, i8)>,
    pub nodes: u64,
}

impl Default for Solver {
    fn default() -> Self {
        Solver::new(1 << 20)
    }
}

impl Solver {
    /// A solver with a transposition table of `entries` slots.
    pub fn new(entries: usize) -> Solver {
        Solver {
            table: vec![(0, 0); entries.max(1)],
            nodes: 0,
        }
    }

    fn get(&self, key: u64) -> Option<i32> {
        let (k, v) = self.table[(key % self.table.len() as u64) as usize];
        (k == key && v != 0).then_some(i32::from(v) + MIN_SCORE - 1)
    }

    fn put(&mut self, key: u64, upper: i32) {
        let n = self.table.len() as u64;
        self.table[(key % n) as usize] = (key, (upper - MIN_SCORE + 1) as i8);
    }

    /// The exact score of `p` (see [`MIN_SCORE`]); `p` must not be over.
    pub fn solve(&mut self, p: &ConnectFour) -> i32 {
        if p.can_win_next() {
            return (i32::from(CELLS) + 1 - p.moves() as i32) / 2;
        }
        // Null-window searches narrow [min, max] to the score.
        let mut min = -(i32::from(CELLS) - p.moves() as i32) / 2;
        let mut max = (i32::from(CELLS) + 1 - p.moves() as i32) / 2;
        while min < max {
            let mut med = min + (max - min) / 2;
            if med <= 0 && min / 2 < med {
                med = min / 2;
            } else if med >= 0 && max / 2 > med {
                med = max / 2;
            }
            let r = self.negamax(p, med, med + 1);
            if r <= med {
                max = r;
            } else {
                min = r;
            }
        }
        min
    }

    /// Win (1), draw (0) or loss (-1) for the player to move, with perfect play.
    pub fn solve_weak(&mut self, p: &ConnectFour) -> i32 {
        if p.can_win_next() {
            return 1;
        }
        self.negamax(p, -1, 1).signum()
    }

    /// Negamax within (alpha, beta), assuming the player to move cannot win at once.
    fn negamax(&mut self, p: &ConnectFour, mut alpha: i32, mut beta: i32) -> i32 {
        self.nodes += 1;
        let next = p.non_losing_moves();
        if next == 0 {
            return -(i32::from(CELLS) - p.moves() as i32) / 2;
        }
        if p.moves() >= usize::from(CELLS) - 2 {
            return 0;
        }
        let min = -(i32::from(CELLS) - 2 - p.moves() as i32) / 2;
        if alpha < min {
            alpha = min;
            if alpha >= beta {
                return alpha;
            }
        }
        let mut max = (i32::from(CELLS) - 1 - p.moves() as i32) / 2;
        if let Some(v) = self.get(p.key()) {
            max = v;
        }
        if beta > max {
            beta = max;
            if alpha >= beta {
                return beta;
            }
        }
        // Order: moves creating more own threats first, centre first among equals.
        let mut moves: [(i32, usize); WIDTH] = [(0, 0); WIDTH];
        let mut n = 0;
        for &col in ORDER.iter() {
            let m = next & column(col);
            if m != 0 {
                let own = p.current | m;
                let score = winning_cells(own, p.mask | m).count_ones() as i32;
                // Insertion sort, stable for equal scores (keeps the centre order).
                let mut i = n;
                while i > 0 && moves[i - 1].0 < score {
                    moves[i] = moves[i - 1];
                    i -= 1;
                }
                moves[i] = (score, col);
                n += 1;
            }
        }
        for &(_, col) in &moves[..n] {
            let mut q = *p;
            q.play_col(col);
            let score = -self.negamax(&q, -beta, -alpha);
            if score >= beta {
                return score;
            }
            if score > alpha {
                alpha = score;
            }
        }
        self.put(p.key(), alpha);
        alpha
    }

    /// Depth-limited value of `p` for the player to move: the exact score of a win or
    /// loss found within `depth` plies, 0 when none is (unknown or draw).
    pub fn search_depth(&mut self, p: &ConnectFour, depth: u32) -> i32 {
        self.nodes += 1;
        for col in 0..WIDTH {
            if p.can_play(col) && p.is_winning_move(col) {
                return (i32::from(CELLS) + 1 - p.moves() as i32) / 2;
            }
        }
        if depth <= 1 || p.moves() >= usize::from(CELLS) - 1 {
            return 0;
        }
        let mut best = i32::MIN;
        for &col in ORDER.iter() {
            if p.can_play(col) {
                let mut q = *p;
                q.play_col(col);
                best = best.max(-self.search_depth(&q, depth - 1));
            }
        }
        best
    }

    /// The values of each playable column with a `depth`-ply search (the move itself
    /// is ply 1): `None` for full columns. `depth = 0` asks for the exact solution.
    pub fn move_values(&mut self, p: &ConnectFour, depth: u32) -> [Option<i32>; WIDTH] {
        let mut out = [None; WIDTH];
        for (col, o) in out.iter_mut().enumerate() {
            if !p.can_play(col) {
                continue;
            }
            if p.is_winning_move(col) {
                *o = Some((i32::from(CELLS) + 1 - p.moves() as i32) / 2);
                continue;
            }
            let mut q = *p;
            q.play_col(col);
            *o = Some(if q.moves() == usize::from(CELLS) {
                0
            } else if depth == 0 {
                -self.solve(&q)
            } else {
                -self.search_depth(&q, depth - 1)
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain negamax without pruning or tables: the reference for shallow checks.
    fn brute(p: &ConnectFour, depth: u32) -> i32 {
        for col in 0..WIDTH {
            if p.can_play(col) && p.is_winning_move(col) {
                return (i32::from(CELLS) + 1 - p.moves() as i32) / 2;
            }
        }
        if depth <= 1 || p.moves() >= usize::from(CELLS) - 1 {
            return 0;
        }
        (0..WIDTH)
            .filter(|&c| p.can_play(c))
            .map(|c| {
                let mut q = *p;
                q.play_col(c);
                -brute(&q, depth - 1)
            })
            .max()
            .unwrap_or(0)
    }

    fn random_position(seed: u64, plies: usize) -> Option<ConnectFour> {
        let mut rng = crate::Rng::stream(seed, crate::Purpose::User, 0);
        let mut p = ConnectFour::new();
        for _ in 0..plies {
            let legal: Vec<usize> = (0..WIDTH).filter(|&c| p.can_play(c)).collect();
            let c = legal[rng.below(legal.len() as u32) as usize];
            if p.is_winning_move(c) {
                return None;
            }
            p.play_col(c);
        }
        Some(p)
    }

    #[test]
    fn wins_in_every_direction_are_detected() {
        // Horizontal for the first player: 1 1 2 2 3 3 then 4 wins.
        let p = ConnectFour::from_moves("112233").unwrap();
        assert!(p.is_winning_move(3));
        assert!(!p.is_winning_move(4));
        // Vertical: 1 2 1 2 1 2 then 1 wins.
        let p = ConnectFour::from_moves("121212").unwrap();
        assert!(p.is_winning_move(0));
        // Diagonals, as bit patterns (bit = 7 col + row): / and \.
        let cell = |c: usize, r: usize| 1u64 << (c * H1 + r);
        assert!(aligned(cell(0, 0) | cell(1, 1) | cell(2, 2) | cell(3, 3)));
        assert!(aligned(cell(3, 2) | cell(4, 3) | cell(5, 4) | cell(6, 5)));
        assert!(aligned(cell(0, 3) | cell(1, 2) | cell(2, 1) | cell(3, 0)));
        assert!(!aligned(cell(0, 0) | cell(1, 1) | cell(2, 2) | cell(4, 4)));
        // No wrap-around between columns: rows 3-5 of one column and row 0 of the next.
        assert!(!aligned(cell(0, 3) | cell(0, 4) | cell(0, 5) | cell(1, 0)));
        assert!(!aligned(cell(0, 5) | cell(1, 0) | cell(2, 1) | cell(3, 2)));
        let err = ConnectFour::from_moves("1121314").unwrap_err();
        assert!(
            err.contains("move 7") && err.contains("ends the game"),
            "{err}"
        );
        assert!(ConnectFour::from_moves("18").unwrap_err().contains("'8'"));
        assert!(
            ConnectFour::from_moves("1111111")
                .unwrap_err()
                .contains("full")
        );
    }

    /// Random games that avoid winning moves until the board is full end in a draw
    /// exactly at the 42nd stone, with nothing legal left.
    #[test]
    fn game_interface_plays_to_a_draw() {
        let mut draws = 0;
        for seed in 0..200 {
            let mut rng = crate::Rng::stream(seed, crate::Purpose::User, 1);
            let mut p = ConnectFour::new();
            let mut last = Outcome::Ongoing;
            while last == Outcome::Ongoing {
                let safe: Vec<usize> = (0..WIDTH)
                    .filter(|&c| p.can_play(c) && !p.is_winning_move(c))
                    .collect();
                if safe.is_empty() {
                    break;
                }
                last = p.play(safe[rng.below(safe.len() as u32) as usize]);
                assert_ne!(last, Outcome::Win);
            }
            if last == Outcome::Draw {
                assert_eq!(p.moves(), 42);
                assert_eq!(p.legal(), 0);
                let mut obs = vec![0.0; ConnectFour::OBS_DIM];
                p.observe(&mut obs);
                assert_eq!(obs.iter().sum::<f32>(), 42.0);
                draws += 1;
            }
        }
        assert!(draws > 0, "no drawn game in 200");
    }

    #[test]
    fn encode_decode_round_trips_and_rejects_nonsense() {
        let p = ConnectFour::from_moves("4455321").unwrap();
        let mut w = Vec::new();
        p.encode(&mut w);
        assert_eq!(ConnectFour::decode(&w), Some(p));
        let mut bad = w.clone();
        bad[4] += 1; // move count off
        assert_eq!(ConnectFour::decode(&bad), None);
        let mut bad = w.clone();
        bad[2] |= 1 << 3; // a floating stone in column 1
        bad[4] += 1;
        assert_eq!(ConnectFour::decode(&bad), None);
        assert_eq!(ConnectFour::decode(&w[..4]), None);
    }

    #[test]
    fn observation_is_from_the_side_to_move() {
        let mut p = ConnectFour::new();
        p.play(3);
        let mut obs = vec![0.0; ConnectFour::OBS_DIM];
        p.observe(&mut obs);
        // The stone at the bottom of column 4 belongs to the opponent of the mover.
        assert_eq!(obs[3], 0.0);
        assert_eq!(obs[42 + 3], 1.0);
        p.play(3);
        p.observe(&mut obs);
        assert_eq!(obs[3], 1.0);
        assert_eq!(obs[7 + 3], 0.0);
        assert_eq!(obs[42 + 7 + 3], 1.0);
    }

    /// The depth-limited search equals plain negamax on random positions.
    #[test]
    fn depth_search_matches_brute_force() {
        let mut checked = 0;
        for seed in 0..60 {
            let Some(p) = random_position(seed, 8 + (seed as usize % 20)) else {
                continue;
            };
            let mut s = Solver::new(1024);
            for d in 1..=4 {
                assert_eq!(s.search_depth(&p, d), brute(&p, d), "seed {seed} depth {d}");
            }
            checked += 1;
        }
        assert!(checked > 30);
    }

    /// Exhaustive minimax with memoisation: independent of the solver's pruning.
    fn exact(p: &ConnectFour, memo: &mut std::collections::HashMap<u64, i32>) -> i32 {
        if let Some(v) = memo.get(&p.key()) {
            return *v;
        }
        let mut best = i32::MIN;
        for col in 0..WIDTH {
            if !p.can_play(col) {
                continue;
            }
            let v = if p.is_winning_move(col) {
                (i32::from(CELLS) + 1 - p.moves() as i32) / 2
            } else {
                let mut q = *p;
                q.play_col(col);
                if q.moves() == usize::from(CELLS) {
                    0
                } else {
                    -exact(&q, memo)
                }
            };
            best = best.max(v);
        }
        memo.insert(p.key(), best);
        best
    }

    /// Exact solutions of positions with 16 to 20 empty cells equal exhaustive search.
    #[test]
    fn solver_matches_exhaustive_search() {
        let mut checked = 0;
        for seed in 0..400 {
            let plies = 22 + (seed as usize % 5);
            let Some(p) = random_position(seed, plies) else {
                continue;
            };
            let want = exact(&p, &mut std::collections::HashMap::new());
            let mut s = Solver::new(1 << 16);
            assert_eq!(s.solve(&p), want, "seed {seed}\n{}", p.render());
            assert_eq!(s.solve_weak(&p), want.signum(), "seed {seed}");
            checked += 1;
            if checked == 25 {
                break;
            }
        }
        assert_eq!(checked, 25);
    }

    /// Consistency and tactics: a position's score is its best child's, a win in one
    /// is found, and a forced block is the only non-losing move.
    #[test]
    fn solver_scores_are_consistent_and_tactical() {
        let mut s = Solver::default();
        // A mid-game position (14 stones).
        let p = ConnectFour::from_moves("44444553332226").unwrap();
        let v = s.solve(&p);
        let best = s
            .move_values(&p, 0)
            .iter()
            .flatten()
            .copied()
            .max()
            .unwrap();
        assert_eq!(v, best);
        // A forced win in 1 and a forced block.
        let p = ConnectFour::from_moves("112233").unwrap();
        assert_eq!(s.solve(&p), (43 - 6) / 2);
        let p = ConnectFour::from_moves("1122335").unwrap();
        // Second player must block column 4 or lose at once.
        let vals = s.move_values(&p, 2);
        for (c, v) in vals.iter().enumerate() {
            if c != 3 {
                assert!(v.unwrap() < 0, "column {} should lose: {vals:?}", c + 1);
            }
        }
    }
}
