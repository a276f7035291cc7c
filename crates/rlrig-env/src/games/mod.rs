//! Two-player, zero-sum, perfect-information board games for search (AlphaZero).
//!
//! Unlike [`crate::Env`], a game has no reward stream: a move either continues the
//! game, wins it for the player who made it, or ends it in a draw. Observations are
//! always from the side to move, so one network plays both sides.

pub mod connect_four;

pub use connect_four::{ConnectFour, Solver};

/// What a move did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ongoing,
    /// The player who moved won.
    Win,
    Draw,
}

/// A game state small enough to copy into every search-tree node.
pub trait Game: Copy + Default + Send + Sync + 'static {
    /// Number of distinct actions (legal or not).
    const ACTIONS: usize;
    /// Length of the observation vector.
    const OBS_DIM: usize;
    const NAME: &'static str;
    /// Legal actions as a bit mask (bit `a` set if `a` is legal).
    fn legal(&self) -> u64;
    /// Plays a legal action; panics on an illegal one (callers check [`Game::legal`]).
    fn play(&mut self, action: usize) -> Outcome;
    /// Writes the observation from the side to move into `out` (`OBS_DIM` values).
    fn observe(&self, out: &mut [f32]);
    /// Words a state encodes to (for checkpoints).
    const WORDS: usize;
    /// Appends the state's `WORDS` words to `out`.
    fn encode(&self, out: &mut Vec<u32>);
    /// The state from `WORDS` words, or `None` if they describe no reachable position.
    fn decode(words: &[u32]) -> Option<Self>;
    /// The position as text for a terminal.
    fn render(&self) -> String;
}

/// The game ids `rlrig` knows.
pub const GAME_IDS: &[&str] = &["ConnectFour"];
