//! What the MinAtar games (Young & Tian 2019; the `minatar` package 1.0.15) share: the
//! random draws they make, their parameters, sticky actions, Python-list semantics for
//! their object lists, and the writing and reading of state vectors.
//!
//! The games draw from NumPy's `RandomState`; rlrig draws from its keyed Philox streams
//! instead, so the same seed cannot give the package's trajectory. To check the games
//! exactly anyway, their logic is written against [`Draws`]: the env passes its stream,
//! the golden tests pass the draws the package made (recorded by
//! `scripts/golden/make_golden_minatar.py`) and check that every draw is asked for in the
//! same order, with the same bounds.

use crate::env::Transition;
use crate::rng::Rng;

/// The random calls a MinAtar game makes, with NumPy's `RandomState` meanings.
pub trait Draws {
    /// `random.rand()`: uniform in `[0, 1)`.
    fn rand(&mut self) -> f64;
    /// `random.randint(low, high)`: uniform integer in `low..high` (`high > low`).
    fn randint(&mut self, low: i32, high: i32) -> i32;

    /// The side a spawned object enters from, as Asterix's and Seaquest's spawns draw
    /// it (`lr = random.rand() < 1/2`, `x = 0 if lr else 9`): one `rand`, then whether
    /// it moves right and its column.
    #[inline]
    fn spawn_side(&mut self) -> (bool, i8) {
        let right = self.rand() < 0.5;
        (right, if right { 0 } else { 9 })
    }
}

impl Draws for Rng {
    #[inline]
    fn rand(&mut self) -> f64 {
        self.unit_f64()
    }

    #[inline]
    fn randint(&mut self, low: i32, high: i32) -> i32 {
        low + self.below((high - low) as u32) as i32
    }
}

/// A MinAtar game as the package's game classes are, written against [`Draws`]: their
/// `reset` and their `act` (sticky actions aside). [`minatar_env`] makes them the env's
/// `reset` and `step`; the golden tests feed them the package's recorded draws.
pub trait Game: crate::Env<Action = i32, Obs = f32> {
    /// The package's `reset`; by default the state's `Default`, for the games whose reset
    /// draws nothing.
    fn reset_game(d: &mut impl Draws) -> Self::State {
        let _ = d;
        Self::State::default()
    }
    /// Whether the game is over (the package's `terminal`).
    fn over(s: &Self::State) -> bool;
    /// One step of a game that is not over, for a minimal-set action: the reward.
    fn play(p: &Self::Params, s: &mut Self::State, a: u8, d: &mut impl Draws) -> f64;

    /// The package's `act` for a minimal-set action (sticky actions aside): once the game
    /// is over, no reward and still terminal (no state changes, no draws); else
    /// [`Game::play`]'s reward and whether the game is over now.
    #[inline]
    fn step_game(p: &Self::Params, s: &mut Self::State, a: u8, d: &mut impl Draws) -> Transition {
        if Self::over(s) {
            return Transition {
                reward: 0.0,
                terminated: true,
            };
        }
        let reward = Self::play(p, s, a, d);
        Transition {
            reward,
            terminated: Self::over(s),
        }
    }
}

/// The parameters of a MinAtar game without a difficulty ramp (Breakout, Freeway): the
/// package's `sticky_action_prob`, and a time limit.
#[derive(Clone, Debug)]
pub struct Params {
    /// Probability that the previous action is repeated instead of the chosen one.
    pub sticky_action_prob: f64,
    /// Truncate episodes after this many steps (Gymnasium's `TimeLimit`); the package
    /// has none (gymnax cuts at 1,000, Freeway's own end at 2,500).
    pub max_episode_steps: Option<u32>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            sticky_action_prob: 0.1,
            max_episode_steps: None,
        }
    }
}

/// The parameters of a MinAtar game with a difficulty ramp (Asterix, Seaquest, Space
/// Invaders): the package's `sticky_action_prob` and `difficulty_ramping`.
#[derive(Clone, Debug)]
pub struct RampParams {
    /// Probability that the previous action is repeated instead of the chosen one.
    pub sticky_action_prob: f64,
    /// The package's `difficulty_ramping`.
    pub ramping: bool,
    /// As [`Params::max_episode_steps`].
    pub max_episode_steps: Option<u32>,
}

impl Default for RampParams {
    fn default() -> Self {
        RampParams {
            sticky_action_prob: 0.1,
            ramping: true,
            max_episode_steps: None,
        }
    }
}

/// Sticky actions as the package's `Environment.act` applies them: with probability
/// `prob` the previous action is repeated. `last` lives in the game state, so a new
/// episode starts from no-op (the package keeps it across resets; see Breakout's note).
#[inline]
pub(crate) fn sticky(prob: f64, last: &mut u8, a: i32, rng: &mut Rng) -> u8 {
    let mut a = a as u8;
    if prob > 0.0 && rng.unit_f64() < prob {
        a = *last;
    }
    *last = a;
    a
}

/// One notch of the package's difficulty ramp (Asterix on its timer, Seaquest on each
/// surfacing): spawning one step faster, moving one step faster on every second notch,
/// neither below its floor (spawn speed 1, move speed `min_move`).
#[inline]
pub(crate) fn ramp_notch(
    spawn_speed: &mut i32,
    move_speed: &mut i32,
    ramp_index: &mut i32,
    min_move: i32,
) {
    if *move_speed > min_move && *ramp_index % 2 == 1 {
        *move_speed -= 1;
    }
    if *spawn_speed > 1 {
        *spawn_speed -= 1;
    }
    *ramp_index += 1;
}

/// A Python list of small plain values in a fixed-capacity array, so game states stay
/// `Copy` and steps never allocate. `remove_first` is Python's `list.remove` (the first
/// *equal* element, which matters where the games remove while iterating in reverse).
///
/// Capacities are chosen above what the games' spawn rates allow (each game says why);
/// a push into a full list is dropped rather than panicking.
#[derive(Clone, Copy)]
pub struct PyList<T: Copy + Default + PartialEq, const N: usize> {
    items: [T; N],
    len: u8,
}

/// Equal when the live elements are: slots past `len` hold leftovers.
impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for PyList<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + PartialEq + std::fmt::Debug, const N: usize> std::fmt::Debug
    for PyList<T, N>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> Default for PyList<T, N> {
    fn default() -> Self {
        PyList {
            items: [T::default(); N],
            len: 0,
        }
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PyList<T, N> {
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.items[..self.len()]
    }

    #[inline]
    pub fn get(&self, i: usize) -> T {
        self.as_slice()[i]
    }

    #[inline]
    pub fn set(&mut self, i: usize, v: T) {
        let n = self.len();
        self.items[..n][i] = v;
    }

    /// Appends `v`; dropped when the list is full (never reached by the games' rates).
    #[inline]
    pub fn push(&mut self, v: T) {
        if self.len() < N {
            self.items[self.len()] = v;
            self.len += 1;
        }
    }

    /// Removes the element at `i`, shifting the rest down as Python does.
    #[inline]
    pub fn remove_at(&mut self, i: usize) {
        let n = self.len();
        self.items.copy_within(i + 1..n, i);
        self.len -= 1;
    }

    /// Python's `list.remove(v)`: removes the first element equal to `v` and returns
    /// its index.
    #[inline]
    pub fn remove_first(&mut self, v: T) -> Option<usize> {
        let j = self.as_slice().iter().position(|x| *x == v)?;
        self.remove_at(j);
        Some(j)
    }

    /// `remove_first` for the element the caller is iterating at `at`: returns where
    /// that element is afterwards (`None` once it left the list). Python removes the first
    /// *equal* element, which can be an earlier twin; the object being iterated then stays
    /// in the list, one place down, and later writes through it must land there.
    #[inline]
    pub fn remove_tracking(&mut self, v: T, at: Option<usize>) -> Option<usize> {
        match (self.remove_first(v), at) {
            (Some(j), Some(p)) if j == p => None,
            (Some(j), Some(p)) if j < p => Some(p - 1),
            (_, at) => at,
        }
    }
}

/// Reads a flat state vector field by field, with errors that name the index and field.
pub(crate) struct Reader<'a> {
    v: &'a [f64],
    at: usize,
    layout: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(v: &'a [f64], layout: &'static str) -> Self {
        Reader { v, at: 0, layout }
    }

    /// The next number, which must be an integer in `lo..=hi`.
    pub fn int(&mut self, what: &str, lo: i64, hi: i64) -> Result<i64, String> {
        let Some(&x) = self.v.get(self.at) else {
            return Err(format!(
                "the state vector ends at {} numbers where {what} was expected (layout: {})",
                self.v.len(),
                self.layout
            ));
        };
        if !x.is_finite() || x.fract() != 0.0 || x < lo as f64 || x > hi as f64 {
            return Err(format!(
                "state[{}] ({what}) is {x}, expected an integer in {lo}..={hi}",
                self.at
            ));
        }
        self.at += 1;
        Ok(x as i64)
    }

    pub fn bool(&mut self, what: &str) -> Result<bool, String> {
        Ok(self.int(what, 0, 1)? == 1)
    }

    /// 100 numbers 0/1, row-major, as a bit set (bit `y * 10 + x`).
    pub fn grid(&mut self, what: &str) -> Result<u128, String> {
        let mut g = 0u128;
        for i in 0..100 {
            if self.bool(what)? {
                g |= 1 << i;
            }
        }
        Ok(g)
    }

    /// `read` (what was read from the vector), or an error if numbers are left over.
    pub fn finish<T>(self, read: T) -> Result<T, String> {
        if self.at != self.v.len() {
            return Err(format!(
                "expected {} numbers, got {} (layout: {})",
                self.at,
                self.v.len(),
                self.layout
            ));
        }
        Ok(read)
    }
}

/// A MinAtar observation space: `10 x 10 x channels` of 0/1, channels last.
pub(crate) fn frame_space(channels: usize) -> crate::space::Space {
    let n = 100 * channels;
    crate::space::Space::Box {
        low: vec![0.0; n],
        high: vec![1.0; n],
        shape: vec![10, 10, channels],
        dtype: crate::space::Dtype::Float32,
    }
}

/// The start of a state vector: a game's scalar fields (each an integer; the caller
/// widens its `i8`s and `bool`s), as numbers. [`Reader`] reads them back.
pub(crate) fn scalars_to_vec(fields: &[i32]) -> Vec<f64> {
    fields.iter().map(|&x| f64::from(x)).collect()
}

/// The 100 cells of a bit-set grid as 0/1 numbers, row-major.
pub(crate) fn grid_to_vec(g: u128, out: &mut Vec<f64>) {
    out.extend((0..100).map(|i| ((g >> i) & 1) as f64));
}

/// Sets channel `c` of cell `(y, x)` in a channels-last `10 x 10 x channels` frame.
#[inline]
pub(crate) fn put(out: &mut [f32], channels: usize, y: i32, x: i32, c: usize) {
    out[(y as usize * 10 + x as usize) * channels + c] = 1.0;
}

/// Sets channel `c` of every cell of a bit-set grid.
#[inline]
pub(crate) fn put_grid(out: &mut [f32], channels: usize, mut g: u128, c: usize) {
    while g != 0 {
        let i = g.trailing_zeros() as usize;
        out[i * channels + c] = 1.0;
        g &= g - 1;
    }
}

/// What `render_state` returns for the MinAtar games: the channel count, then the
/// frame (`10 x 10 x channels`, channels last), which a renderer colours per channel
/// as the package's `display_state` does.
pub(crate) fn render_frame<E: crate::Env<Obs = f32>>(s: &E::State) -> Vec<f64> {
    let mut frame = vec![0.0; E::OBS_DIM];
    E::observe(&E::Params::default(), s, &mut frame);
    let mut v = Vec::with_capacity(frame.len() + 1);
    v.push((E::OBS_DIM / 100) as f64);
    v.extend(frame.iter().map(|&x| f64::from(x)));
    v
}

/// The MinAtar games' parameter keys (the `minatar` package's `Environment` argument,
/// and a time limit).
pub(crate) const PARAMS: &[&str] = &["sticky_action_prob", "max_episode_steps"];

/// Sets a MinAtar game's parameter `key` (for [`crate::Env::set_param`]):
/// `sticky_action_prob`, the chance that the previous action repeats (0.1 by default,
/// 0 for the deterministic game), or `max_episode_steps` (none by default).
pub(crate) fn set_param(
    sticky_action_prob: &mut f64,
    max_episode_steps: &mut Option<u32>,
    key: &str,
    value: &str,
) -> Result<(), String> {
    match key {
        "max_episode_steps" => {
            *max_episode_steps = Some(super::steps_param(value)?);
            Ok(())
        }
        "sticky_action_prob" => {
            let v = super::finite_param(value)?;
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("'{value}' is not a probability in [0, 1]"));
            }
            *sticky_action_prob = v;
            Ok(())
        }
        _ => Err(super::unknown_param(PARAMS)),
    }
}

/// The items of `impl Env` every MinAtar game shares: i32 actions, a `10 x 10 x
/// channels` frame, no time limit unless `max_episode_steps` sets one, the parameters,
/// `reset` as the game's [`Game::reset_game`], and `step` drawing the sticky action, then
/// handing it to the game's [`Game::step_game`] (as the package's `Environment.act`
/// does); with `drawn as a frame`, `render_state` is the frame (what `rlrig play` draws).
/// A game's impl names its id, step cost, observation and state layout.
macro_rules! minatar_env {
    ($params:ty, $state:ty, channels: $channels:expr, actions: $actions:expr, drawn as a frame) => {
        super::minatar::minatar_env!($params, $state, channels: $channels, actions: $actions);

        fn render_state(s: &$state) -> Vec<f64> {
            super::minatar::render_frame::<Self>(s)
        }
    };
    ($params:ty, $state:ty, channels: $channels:expr, actions: $actions:expr) => {
        type Params = $params;
        type State = $state;
        type Action = i32;
        type Obs = f32;
        const OBS_DIM: usize = 100 * $channels;
        const PARAMS: &'static [&'static str] = super::minatar::PARAMS;

        fn observation_space(_: &$params) -> Space {
            super::minatar::frame_space($channels)
        }

        fn action_space(_: &$params) -> Space {
            Space::Discrete { n: $actions }
        }

        fn max_episode_steps(p: &$params) -> Option<u32> {
            p.max_episode_steps
        }

        fn set_param(p: &mut $params, key: &str, value: &str) -> Result<(), String> {
            super::minatar::set_param(
                &mut p.sticky_action_prob,
                &mut p.max_episode_steps,
                key,
                value,
            )
        }

        fn reset(_: &$params, rng: &mut Rng) -> $state {
            <Self as super::minatar::Game>::reset_game(rng)
        }

        fn step(p: &$params, s: &mut $state, a: &i32, rng: &mut Rng) -> Transition {
            let a = super::minatar::sticky(p.sticky_action_prob, &mut s.last_action, *a, rng);
            <Self as super::minatar::Game>::step_game(p, s, a, rng)
        }
    };
}
pub(crate) use minatar_env;

/// Test support shared by the five games: plays `E` from a reset (stream `seed`) with
/// `policy(t)` until it terminates or `steps` steps have passed, checking after every step
/// that the state's vector reads back as the same state, and calling `each` on it. Returns
/// the last state and the steps taken.
#[cfg(test)]
pub(crate) fn play_checking_states<E: crate::Env<Action = i32>>(
    seed: u64,
    steps: usize,
    policy: impl Fn(usize) -> i32,
    mut each: impl FnMut(&E::State),
) -> (E::State, usize)
where
    E::Params: Default,
    E::State: PartialEq + std::fmt::Debug,
{
    let mut rng = Rng::stream(seed, crate::rng::Purpose::User, 0);
    let p = E::Params::default();
    let mut s = E::reset(&p, &mut rng);
    for t in 0..steps {
        let done = E::step(&p, &mut s, &policy(t), &mut rng).terminated;
        assert_eq!(E::state_from_slice(&p, &E::state_to_vec(&s)).unwrap(), s);
        each(&s);
        if done {
            return (s, t + 1);
        }
    }
    (s, steps)
}

/// Test support: `s`'s vector with `value` at `index` is refused, the message naming
/// `want` (the index and the field).
#[cfg(test)]
pub(crate) fn assert_refused<E: crate::Env>(s: &E::State, index: usize, value: f64, want: &str)
where
    E::Params: Default,
{
    let mut bad = E::state_to_vec(s);
    bad[index] = value;
    let e = E::state_from_slice(&E::Params::default(), &bad).unwrap_err();
    assert!(e.contains(want), "{e}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_first_is_pythons_list_remove() {
        let mut l: PyList<(i8, i8), 8> = PyList::default();
        for v in [(1, 0), (2, 0), (1, 0), (3, 0)] {
            l.push(v);
        }
        // Iterating at index 2 (an equal twin sits at 0): Python removes index 0 and the
        // iterated object moves to index 1.
        assert_eq!(l.remove_tracking((1, 0), Some(2)), Some(1));
        assert_eq!(l.as_slice(), &[(2, 0), (1, 0), (3, 0)]);
        assert_eq!(l.remove_tracking((1, 0), Some(1)), None);
        assert_eq!(l.as_slice(), &[(2, 0), (3, 0)]);
        assert_eq!(l.remove_first((9, 9)), None);
        for _ in 0..10 {
            l.push((5, 5));
        }
        assert_eq!(l.len(), 8, "pushes into a full list are dropped");
    }

    #[test]
    fn reader_names_the_bad_field() {
        let v = [1.0, 2.5];
        let mut r = Reader::new(&v, "[a, b]");
        assert_eq!(r.int("a", 0, 3).unwrap(), 1);
        let e = r.int("b", 0, 3).unwrap_err();
        assert!(e.contains("state[1] (b) is 2.5"), "{e}");
        let mut r = Reader::new(&v[..1], "[a, b]");
        r.int("a", 0, 3).unwrap();
        assert!(r.int("b", 0, 3).unwrap_err().contains("ends at 1"));
        let r = Reader::new(&v, "[a, b]");
        assert!(
            r.finish(())
                .unwrap_err()
                .contains("expected 0 numbers, got 2")
        );
    }
}
