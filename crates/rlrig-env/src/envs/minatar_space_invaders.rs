//! MinAtar Space Invaders, as `MinAtar/SpaceInvaders-v1` of the `minatar` package
//! (1.0.15): a cannon on the bottom row shoots at a 4 x 6 block of aliens that marches
//! sideways and down and shoots back; each alien hit scores 1, a new wave comes faster.
//! Channels cannon / alien / alien moving left / alien moving right / friendly bullet /
//! enemy bullet; minimal action set no-op, left, right, fire; sticky actions (0.1) and
//! difficulty ramping as in the package. The game itself draws no random numbers.
//!
//! The package keeps each object kind in a 10 x 10 array and moves it with `np.roll`;
//! here each is a bit set (bit `y * 10 + x` of a u128), and the rolls are shifts.

use super::minatar::{Draws, Game, Reader, grid_to_vec, put, put_grid, scalars_to_vec};
use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

const SHOT_COOL_DOWN: i32 = 5;
const ENEMY_MOVE_INTERVAL: i32 = 12;
const ENEMY_SHOT_INTERVAL: i32 = 10;
const CHANNELS: usize = 6;

const ALL: u128 = (1 << 100) - 1;
const ROW9: u128 = ((1 << 10) - 1) << 90;
const COL0: u128 = {
    let mut m = 0u128;
    let mut y = 0;
    while y < 10 {
        m |= 1 << (y * 10);
        y += 1;
    }
    m
};
const COL9: u128 = COL0 << 9;
/// Rows 0..4, columns 2..8: a fresh wave.
const WAVE: u128 = {
    let mut m = 0u128;
    let mut y = 0;
    while y < 4 {
        m |= 0b11_1111 << (y * 10 + 2);
        y += 1;
    }
    m
};

#[inline]
fn bit(y: i32, x: i32) -> u128 {
    1 << (y * 10 + x)
}

/// The game's parameters: sticky actions and the difficulty ramp, as in the package.
pub type SpaceInvadersParams = super::minatar::RampParams;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpaceInvadersState {
    pub pos: i8,
    pub aliens: u128,
    pub f_bullets: u128,
    pub e_bullets: u128,
    /// -1 left, 1 right.
    pub alien_dir: i8,
    pub enemy_move_interval: i32,
    pub alien_move_timer: i32,
    pub alien_shot_timer: i32,
    pub ramp_index: i32,
    pub shot_timer: i32,
    pub terminal: bool,
    /// The last action taken (index into the minimal set), for sticky actions.
    pub last_action: u8,
}

/// The package's `reset` (it draws nothing).
impl Default for SpaceInvadersState {
    fn default() -> Self {
        SpaceInvadersState {
            pos: 5,
            aliens: WAVE,
            f_bullets: 0,
            e_bullets: 0,
            alien_dir: -1,
            enemy_move_interval: ENEMY_MOVE_INTERVAL,
            alien_move_timer: ENEMY_MOVE_INTERVAL,
            alien_shot_timer: ENEMY_SHOT_INTERVAL,
            ramp_index: 0,
            shot_timer: 0,
            terminal: false,
            last_action: 0,
        }
    }
}

pub struct SpaceInvaders;

impl SpaceInvaders {
    /// The package's `_nearest_alien`: the lowest alien of the non-empty column closest
    /// to the cannon (ties to the left).
    fn nearest_alien(aliens: u128, pos: i32) -> Option<(i32, i32)> {
        for d in 0..10 {
            for x in [pos - d, pos + d] {
                if !(0..=9).contains(&x) {
                    continue;
                }
                let col = aliens & (COL0 << x);
                if col != 0 {
                    let y = (127 - col.leading_zeros() as i32) / 10;
                    return Some((y, x));
                }
            }
        }
        None
    }
}

impl Game for SpaceInvaders {
    fn over(s: &SpaceInvadersState) -> bool {
        s.terminal
    }

    fn play(p: &SpaceInvadersParams, s: &mut SpaceInvadersState, a: u8, _: &mut impl Draws) -> f64 {
        let pos = i32::from(s.pos);
        if a == 3 && s.shot_timer == 0 {
            s.f_bullets |= bit(9, pos);
            s.shot_timer = SHOT_COOL_DOWN;
        } else if a == 1 {
            s.pos = (s.pos - 1).max(0);
        } else if a == 2 {
            s.pos = (s.pos + 1).min(9);
        }
        let cannon = bit(9, s.pos.into());
        // np.roll(-1, axis=0) then clearing row 9: every bullet one row up, row 0 gone.
        s.f_bullets >>= 10;
        // np.roll(1, axis=0) then clearing row 0: one row down, row 9 gone.
        s.e_bullets = (s.e_bullets << 10) & ALL;
        if s.e_bullets & cannon != 0 {
            s.terminal = true;
        }
        if s.aliens & cannon != 0 {
            s.terminal = true;
        }
        if s.alien_move_timer == 0 {
            s.alien_move_timer = (s.aliens.count_ones() as i32).min(s.enemy_move_interval);
            if (s.aliens & COL0 != 0 && s.alien_dir < 0)
                || (s.aliens & COL9 != 0 && s.alien_dir > 0)
            {
                s.alien_dir = -s.alien_dir;
                if s.aliens & ROW9 != 0 {
                    s.terminal = true;
                }
                // np.roll(1, axis=0) wraps: aliens on row 9 reappear on row 0.
                s.aliens = ((s.aliens << 10) & ALL) | (s.aliens >> 90);
            } else if s.alien_dir > 0 {
                // Column 9 is empty here, so nothing wraps.
                s.aliens = (s.aliens << 1) & ALL;
            } else {
                s.aliens >>= 1;
            }
            if s.aliens & cannon != 0 {
                s.terminal = true;
            }
        }
        if s.alien_shot_timer == 0 {
            s.alien_shot_timer = ENEMY_SHOT_INTERVAL;
            // Aliens are never all gone here (a wave refills at the end of the step).
            if let Some((y, x)) = Self::nearest_alien(s.aliens, s.pos.into()) {
                s.e_bullets |= bit(y, x);
            }
        }
        let kills = s.aliens & s.f_bullets;
        let r = f64::from(kills.count_ones());
        s.aliens &= !kills;
        s.f_bullets &= !kills;
        if s.shot_timer > 0 {
            s.shot_timer -= 1;
        }
        s.alien_move_timer -= 1;
        s.alien_shot_timer -= 1;
        if s.aliens == 0 {
            if s.enemy_move_interval > 6 && p.ramping {
                s.enemy_move_interval -= 1;
                s.ramp_index += 1;
            }
            s.aliens = WAVE;
        }
        r
    }
}

const LAYOUT: &str = "[pos, alien_dir, enemy_move_interval, alien_move_timer, alien_shot_timer, \
    ramp_index, shot_timer, terminal, last_action, aliens (100, row-major), friendly bullets (100), \
    enemy bullets (100)]";

impl Env for SpaceInvaders {
    super::minatar::minatar_env!(SpaceInvadersParams, SpaceInvadersState, channels: CHANNELS, actions: 4, drawn as a frame);
    const ID: &'static str = "MinAtar/SpaceInvaders-v1";
    const STEP_COST_NS: u64 = 40;

    fn observe(_: &SpaceInvadersParams, s: &SpaceInvadersState, out: &mut [f32]) {
        out.fill(0.0);
        put(out, CHANNELS, 9, s.pos.into(), 0);
        put_grid(out, CHANNELS, s.aliens, 1);
        put_grid(out, CHANNELS, s.aliens, if s.alien_dir < 0 { 2 } else { 3 });
        put_grid(out, CHANNELS, s.f_bullets, 4);
        put_grid(out, CHANNELS, s.e_bullets, 5);
    }

    fn state_to_vec(s: &SpaceInvadersState) -> Vec<f64> {
        let mut v = scalars_to_vec(&[
            s.pos.into(),
            s.alien_dir.into(),
            s.enemy_move_interval,
            s.alien_move_timer,
            s.alien_shot_timer,
            s.ramp_index,
            s.shot_timer,
            s.terminal.into(),
            s.last_action.into(),
        ]);
        grid_to_vec(s.aliens, &mut v);
        grid_to_vec(s.f_bullets, &mut v);
        grid_to_vec(s.e_bullets, &mut v);
        v
    }

    fn state_from_slice(_: &SpaceInvadersParams, v: &[f64]) -> Result<SpaceInvadersState, String> {
        let mut r = Reader::new(v, LAYOUT);
        let pos = r.int("pos", 0, 9)? as i8;
        let alien_dir = r.int("alien_dir", -1, 1)? as i8;
        if alien_dir == 0 {
            return Err("state[1] (alien_dir) is 0, expected -1 or 1".into());
        }
        let s = SpaceInvadersState {
            pos,
            alien_dir,
            enemy_move_interval: r.int("enemy_move_interval", 6, ENEMY_MOVE_INTERVAL.into())?
                as i32,
            alien_move_timer: r.int("alien_move_timer", 0, ENEMY_MOVE_INTERVAL.into())? as i32,
            alien_shot_timer: r.int("alien_shot_timer", 0, ENEMY_SHOT_INTERVAL.into())? as i32,
            ramp_index: r.int("ramp_index", 0, 1 << 30)? as i32,
            shot_timer: r.int("shot_timer", 0, SHOT_COOL_DOWN.into())? as i32,
            terminal: r.bool("terminal")?,
            last_action: r.int("last_action", 0, 3)? as u8,
            aliens: r.grid("aliens")?,
            f_bullets: r.grid("friendly bullets")?,
            e_bullets: r.grid("enemy bullets")?,
        };
        let s = r.finish(s)?;
        if s.aliens == 0 {
            return Err("the aliens grid is empty; a wave always has aliens".into());
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::minatar::play_checking_states;
    use super::*;

    #[test]
    fn state_vector_round_trips_and_the_nearest_alien_ties_left() {
        play_checking_states::<SpaceInvaders>(3, 200, |t| t as i32 % 4, |_| {});
        // Columns 3 and 7 hold aliens, the cannon is at 5: column 3 (its lowest alien) wins.
        let aliens = bit(1, 3) | bit(2, 3) | bit(4, 7);
        assert_eq!(SpaceInvaders::nearest_alien(aliens, 5), Some((2, 3)));
        assert_eq!(SpaceInvaders::nearest_alien(aliens, 7), Some((4, 7)));
        assert_eq!(SpaceInvaders::nearest_alien(0, 7), None);
    }
}
