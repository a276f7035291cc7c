//! MinAtar Breakout (Young & Tian 2019), as `MinAtar/Breakout-v1` of the `minatar`
//! package (1.0.15): 10x10 grid, channels paddle / ball / trail / brick, the minimal
//! action set (no-op, left, right) and sticky actions with probability 0.1.
//!
//! One deviation: the reference keeps the last action across resets (it lives in the
//! `Environment` wrapper, not the game), so the first sticky repeat of an episode may
//! replay the previous episode's last action; here a new episode starts from no-op.

use super::minatar::{Draws, Game, Reader, grid_to_vec, put, put_grid, scalars_to_vec};
use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

/// The game's parameters: sticky actions, as in the package.
pub type BreakoutParams = super::minatar::Params;

/// The game's variables; bricks are bits `y * 10 + x` of a u128.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BreakoutState {
    pub ball_y: i8,
    pub ball_x: i8,
    pub ball_dir: u8,
    pub pos: i8,
    pub strike: bool,
    pub last_x: i8,
    pub last_y: i8,
    pub terminal: bool,
    /// The last action taken (index into the minimal set), for sticky actions.
    pub last_action: u8,
    pub bricks: u128,
}

const BRICK_ROWS: u128 = ((1u128 << 30) - 1) << 10; // rows 1..=3

#[inline]
fn bit(y: i8, x: i8) -> u128 {
    1u128 << (y as u32 * 10 + x as u32)
}

pub struct Breakout;

const CHANNELS: usize = 4;

const LAYOUT: &str = "[ball_y, ball_x, ball_dir, pos, strike, last_x, last_y, terminal, \
    last_action, bricks (100, row-major)]";

impl Game for Breakout {
    /// The package's `reset`: the ball starts in the left or the right corner (its
    /// `random.choice(2)`).
    fn reset_game(d: &mut impl Draws) -> BreakoutState {
        let (ball_x, ball_dir) = if d.randint(0, 2) == 0 { (0, 2) } else { (9, 3) };
        BreakoutState {
            ball_y: 3,
            ball_x,
            ball_dir,
            pos: 4,
            strike: false,
            last_x: ball_x,
            last_y: 3,
            terminal: false,
            last_action: 0,
            bricks: BRICK_ROWS,
        }
    }

    fn over(s: &BreakoutState) -> bool {
        s.terminal
    }

    fn play(_: &BreakoutParams, s: &mut BreakoutState, a: u8, _: &mut impl Draws) -> f64 {
        let mut r = 0.0;
        match a {
            1 => s.pos = (s.pos - 1).max(0),
            2 => s.pos = (s.pos + 1).min(9),
            _ => {}
        }
        s.last_x = s.ball_x;
        s.last_y = s.ball_y;
        let (dx, dy) = [(-1, -1), (1, -1), (1, 1), (-1, 1)][s.ball_dir as usize];
        let (mut nx, mut ny) = (s.ball_x + dx, s.ball_y + dy);
        let mut strike_toggle = false;
        if !(0..=9).contains(&nx) {
            nx = nx.clamp(0, 9);
            s.ball_dir = [1, 0, 3, 2][s.ball_dir as usize];
        }
        if ny < 0 {
            ny = 0;
            s.ball_dir = [3, 2, 1, 0][s.ball_dir as usize];
        } else if s.bricks & bit(ny, nx) != 0 {
            strike_toggle = true;
            if !s.strike {
                r += 1.0;
                s.strike = true;
                s.bricks &= !bit(ny, nx);
                ny = s.last_y;
                s.ball_dir = [3, 2, 1, 0][s.ball_dir as usize];
            }
        } else if ny == 9 {
            if s.bricks == 0 {
                s.bricks = BRICK_ROWS;
            }
            if s.ball_x == s.pos {
                s.ball_dir = [3, 2, 1, 0][s.ball_dir as usize];
                ny = s.last_y;
            } else if nx == s.pos {
                s.ball_dir = [2, 3, 0, 1][s.ball_dir as usize];
                ny = s.last_y;
            } else {
                s.terminal = true;
            }
        }
        if !strike_toggle {
            s.strike = false;
        }
        s.ball_x = nx;
        s.ball_y = ny;
        r
    }
}

impl Env for Breakout {
    super::minatar::minatar_env!(BreakoutParams, BreakoutState, channels: CHANNELS, actions: 3);
    const ID: &'static str = "MinAtar/Breakout-v1";
    const STEP_COST_NS: u64 = 40;

    fn observe(_: &BreakoutParams, s: &BreakoutState, out: &mut [f32]) {
        out.fill(0.0);
        put(out, CHANNELS, 9, s.pos.into(), 0);
        put(out, CHANNELS, s.ball_y.into(), s.ball_x.into(), 1);
        put(out, CHANNELS, s.last_y.into(), s.last_x.into(), 2);
        put_grid(out, CHANNELS, s.bricks, 3);
    }

    fn state_to_vec(s: &BreakoutState) -> Vec<f64> {
        let mut v = scalars_to_vec(&[
            s.ball_y.into(),
            s.ball_x.into(),
            s.ball_dir.into(),
            s.pos.into(),
            s.strike.into(),
            s.last_x.into(),
            s.last_y.into(),
            s.terminal.into(),
            s.last_action.into(),
        ]);
        grid_to_vec(s.bricks, &mut v);
        v
    }

    fn state_from_slice(_: &BreakoutParams, v: &[f64]) -> Result<BreakoutState, String> {
        let mut r = Reader::new(v, LAYOUT);
        let s = BreakoutState {
            ball_y: r.int("ball_y", 0, 9)? as i8,
            ball_x: r.int("ball_x", 0, 9)? as i8,
            ball_dir: r.int("ball_dir", 0, 3)? as u8,
            pos: r.int("pos", 0, 9)? as i8,
            strike: r.bool("strike")?,
            last_x: r.int("last_x", 0, 9)? as i8,
            last_y: r.int("last_y", 0, 9)? as i8,
            terminal: r.bool("terminal")?,
            last_action: r.int("last_action", 0, 2)? as u8,
            bricks: r.grid("bricks")?,
        };
        r.finish(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::minatar::{assert_refused, play_checking_states};
    use super::*;

    #[test]
    fn state_vector_round_trips() {
        let (s, _) = play_checking_states::<Breakout>(0, 40, |t| t as i32 % 3, |_| {});
        assert!(Breakout::state_from_slice(&BreakoutParams::default(), &[0.0; 5]).is_err());
        assert_refused::<Breakout>(&s, 0, 12.0, "state[0]");
    }
}
