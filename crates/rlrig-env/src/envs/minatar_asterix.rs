//! MinAtar Asterix, as `MinAtar/Asterix-v1` of the `minatar` package (1.0.15): the
//! player moves on rows 1..=8 while enemies and gold cross the rows; touching gold
//! scores 1, touching an enemy ends the game. Channels player / enemy / trail / gold;
//! minimal action set no-op, left, up, right, down; sticky actions (0.1) and difficulty
//! ramping (spawning and moving speed up every 100 steps) as in the package.

use super::minatar::{Draws, Game, Reader, put, ramp_notch, scalars_to_vec};
use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

const RAMP_INTERVAL: i32 = 100;
const INIT_SPAWN_SPEED: i32 = 10;
const INIT_MOVE_INTERVAL: i32 = 5;
const CHANNELS: usize = 4;

/// The game's parameters: sticky actions and the difficulty ramp, as in the package.
pub type AsterixParams = super::minatar::RampParams;

/// An enemy or a gold piece; it lives in row `slot + 1`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Entity {
    pub x: i8,
    /// Moving right.
    pub right: bool,
    pub gold: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AsterixState {
    pub player_x: i8,
    pub player_y: i8,
    pub entities: [Option<Entity>; 8],
    pub spawn_speed: i32,
    pub spawn_timer: i32,
    pub move_speed: i32,
    pub move_timer: i32,
    pub ramp_timer: i32,
    pub ramp_index: i32,
    pub terminal: bool,
    /// The last action taken (index into the minimal set), for sticky actions.
    pub last_action: u8,
}

/// The package's `reset` (it draws nothing).
impl Default for AsterixState {
    fn default() -> Self {
        AsterixState {
            player_x: 5,
            player_y: 5,
            entities: [None; 8],
            spawn_speed: INIT_SPAWN_SPEED,
            spawn_timer: INIT_SPAWN_SPEED,
            move_speed: INIT_MOVE_INTERVAL,
            move_timer: INIT_MOVE_INTERVAL,
            ramp_timer: RAMP_INTERVAL,
            ramp_index: 0,
            terminal: false,
            last_action: 0,
        }
    }
}

pub struct Asterix;

impl Asterix {
    fn spawn(s: &mut AsterixState, d: &mut impl Draws) {
        let (right, x) = d.spawn_side();
        let gold = d.rand() < 1.0 / 3.0;
        let free = s.entities.iter().filter(|e| e.is_none()).count() as i32;
        if free == 0 {
            return;
        }
        let k = d.randint(0, free) as usize;
        let slot = (0..8)
            .filter(|&i| s.entities[i].is_none())
            .nth(k)
            .unwrap_or(0);
        s.entities[slot] = Some(Entity { x, right, gold });
    }

    /// Touching entity `i`: gold is collected, an enemy ends the game.
    fn touch(s: &mut AsterixState, i: usize, r: &mut f64) {
        if let Some(e) = s.entities[i]
            && e.x == s.player_x
            && i as i8 + 1 == s.player_y
        {
            if e.gold {
                s.entities[i] = None;
                *r += 1.0;
            } else {
                s.terminal = true;
            }
        }
    }
}

impl Game for Asterix {
    fn over(s: &AsterixState) -> bool {
        s.terminal
    }

    fn play(p: &AsterixParams, s: &mut AsterixState, a: u8, d: &mut impl Draws) -> f64 {
        let mut r = 0.0;
        if s.spawn_timer == 0 {
            Self::spawn(s, d);
            s.spawn_timer = s.spawn_speed;
        }
        match a {
            1 => s.player_x = (s.player_x - 1).max(0),
            2 => s.player_y = (s.player_y - 1).max(1),
            3 => s.player_x = (s.player_x + 1).min(9),
            4 => s.player_y = (s.player_y + 1).min(8),
            _ => {}
        }
        for i in 0..8 {
            Self::touch(s, i, &mut r);
        }
        if s.move_timer == 0 {
            s.move_timer = s.move_speed;
            for i in 0..8 {
                if let Some(mut e) = s.entities[i] {
                    e.x += if e.right { 1 } else { -1 };
                    s.entities[i] = if (0..=9).contains(&e.x) {
                        Some(e)
                    } else {
                        None
                    };
                    Self::touch(s, i, &mut r);
                }
            }
        }
        s.spawn_timer -= 1;
        s.move_timer -= 1;
        if p.ramping && (s.spawn_speed > 1 || s.move_speed > 1) {
            if s.ramp_timer >= 0 {
                s.ramp_timer -= 1;
            } else {
                ramp_notch(&mut s.spawn_speed, &mut s.move_speed, &mut s.ramp_index, 1);
                s.ramp_timer = RAMP_INTERVAL;
            }
        }
        r
    }
}

const LAYOUT: &str = "[player_x, player_y, spawn_speed, spawn_timer, move_speed, move_timer, \
    ramp_timer, ramp_index, terminal, last_action, then for rows 1..=8: present, x, right, gold]";

impl Env for Asterix {
    super::minatar::minatar_env!(AsterixParams, AsterixState, channels: CHANNELS, actions: 5, drawn as a frame);
    const ID: &'static str = "MinAtar/Asterix-v1";
    const STEP_COST_NS: u64 = 40;

    fn observe(_: &AsterixParams, s: &AsterixState, out: &mut [f32]) {
        out.fill(0.0);
        put(out, CHANNELS, s.player_y.into(), s.player_x.into(), 0);
        for (i, e) in s.entities.iter().enumerate() {
            if let Some(e) = e {
                let (y, x) = (i as i32 + 1, i32::from(e.x));
                put(out, CHANNELS, y, x, if e.gold { 3 } else { 1 });
                let back = if e.right { x - 1 } else { x + 1 };
                if (0..=9).contains(&back) {
                    put(out, CHANNELS, y, back, 2);
                }
            }
        }
    }

    fn state_to_vec(s: &AsterixState) -> Vec<f64> {
        let mut v = scalars_to_vec(&[
            s.player_x.into(),
            s.player_y.into(),
            s.spawn_speed,
            s.spawn_timer,
            s.move_speed,
            s.move_timer,
            s.ramp_timer,
            s.ramp_index,
            s.terminal.into(),
            s.last_action.into(),
        ]);
        for e in &s.entities {
            match e {
                Some(e) => v.extend([1.0, e.x.into(), e.right.into(), e.gold.into()]),
                None => v.extend([0.0; 4]),
            }
        }
        v
    }

    fn state_from_slice(_: &AsterixParams, v: &[f64]) -> Result<AsterixState, String> {
        let mut r = Reader::new(v, LAYOUT);
        let mut s = AsterixState {
            player_x: r.int("player_x", 0, 9)? as i8,
            player_y: r.int("player_y", 1, 8)? as i8,
            spawn_speed: r.int("spawn_speed", 1, INIT_SPAWN_SPEED.into())? as i32,
            spawn_timer: r.int("spawn_timer", 0, INIT_SPAWN_SPEED.into())? as i32,
            move_speed: r.int("move_speed", 1, INIT_MOVE_INTERVAL.into())? as i32,
            move_timer: r.int("move_timer", -1, INIT_MOVE_INTERVAL.into())? as i32,
            ramp_timer: r.int("ramp_timer", -1, RAMP_INTERVAL.into())? as i32,
            ramp_index: r.int("ramp_index", 0, 1 << 30)? as i32,
            terminal: r.bool("terminal")?,
            last_action: r.int("last_action", 0, 4)? as u8,
            entities: [None; 8],
        };
        for e in &mut s.entities {
            let present = r.bool("entity present")?;
            let x = r.int("entity x", 0, 9)? as i8;
            let right = r.bool("entity right")?;
            let gold = r.bool("entity gold")?;
            *e = present.then_some(Entity { x, right, gold });
        }
        r.finish(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::minatar::{assert_refused, play_checking_states};
    use super::*;

    #[test]
    fn state_vector_round_trips() {
        let (s, _) = play_checking_states::<Asterix>(3, 300, |t| t as i32 % 5, |_| {});
        assert!(s.entities.iter().any(|e| e.is_some()), "enemies spawn");
        assert_refused::<Asterix>(&s, 1, 9.0, "state[1] (player_y)");
    }
}
