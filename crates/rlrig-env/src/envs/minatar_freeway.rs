//! MinAtar Freeway, as `MinAtar/Freeway-v1` of the `minatar` package (1.0.15): a
//! chicken in column 4 crosses eight lanes of cars; reaching the top scores 1 and
//! re-draws the cars' speeds; a car sends the chicken back to the bottom. The game ends
//! after 2500 steps (terminated, as in the package). Channels chicken / car / five trail
//! channels by speed; minimal action set no-op, up, down; sticky actions (0.1). The
//! game does not ramp.

use super::minatar::{Draws, Game, Reader, put, scalars_to_vec};
use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

const PLAYER_SPEED: i8 = 3;
const TIME_LIMIT: i32 = 2500;
const CHANNELS: usize = 7;

/// The game's parameters: sticky actions, as in the package.
pub type FreewayParams = super::minatar::Params;

/// A car in lane (row) `index + 1`; it moves one cell every `|speed| + 1` steps, right
/// when `speed > 0`, wrapping around.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Car {
    pub x: i8,
    pub timer: i8,
    pub speed: i8,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FreewayState {
    pub cars: [Car; 8],
    pub pos: i8,
    pub move_timer: i8,
    pub terminate_timer: i32,
    pub terminal: bool,
    /// The last action taken (index into the minimal set), for sticky actions.
    pub last_action: u8,
}

pub struct Freeway;

impl Freeway {
    /// The package's `_randomize_cars`: eight speeds in 1..=5, then eight directions.
    fn randomize_cars(s: &mut FreewayState, init: bool, d: &mut impl Draws) {
        let mut speeds = [0i8; 8];
        for v in &mut speeds {
            *v = d.randint(1, 6) as i8;
        }
        for (i, v) in speeds.iter_mut().enumerate() {
            // np.sign(rand - 0.5): a draw of exactly 0.5 gives a car of speed 0.
            let u = d.rand() - 0.5;
            *v *= if u > 0.0 {
                1
            } else if u < 0.0 {
                -1
            } else {
                0
            };
            let car = &mut s.cars[i];
            if init {
                car.x = 0;
            }
            car.timer = v.abs();
            car.speed = *v;
        }
    }
}

impl Game for Freeway {
    /// The package's `reset`: draws the cars.
    fn reset_game(d: &mut impl Draws) -> FreewayState {
        let mut s = FreewayState {
            pos: 9,
            move_timer: PLAYER_SPEED,
            terminate_timer: TIME_LIMIT,
            ..FreewayState::default()
        };
        Self::randomize_cars(&mut s, true, d);
        s
    }

    fn over(s: &FreewayState) -> bool {
        s.terminal
    }

    fn play(_: &FreewayParams, s: &mut FreewayState, a: u8, d: &mut impl Draws) -> f64 {
        let mut r = 0.0;
        if a == 1 && s.move_timer == 0 {
            s.move_timer = PLAYER_SPEED;
            s.pos = (s.pos - 1).max(0);
        } else if a == 2 && s.move_timer == 0 {
            s.move_timer = PLAYER_SPEED;
            s.pos = (s.pos + 1).min(9);
        }
        if s.pos == 0 {
            r += 1.0;
            Self::randomize_cars(s, false, d);
            s.pos = 9;
        }
        for i in 0..8 {
            let lane = i as i8 + 1;
            let car = &mut s.cars[i];
            if car.x == 4 && lane == s.pos {
                s.pos = 9;
            }
            if car.timer == 0 {
                car.timer = car.speed.abs();
                car.x += if car.speed > 0 { 1 } else { -1 };
                if car.x < 0 {
                    car.x = 9;
                } else if car.x > 9 {
                    car.x = 0;
                }
                if car.x == 4 && lane == s.pos {
                    s.pos = 9;
                }
            } else {
                car.timer -= 1;
            }
        }
        if s.move_timer > 0 {
            s.move_timer -= 1;
        }
        s.terminate_timer -= 1;
        if s.terminate_timer < 0 {
            s.terminal = true;
        }
        r
    }
}

const LAYOUT: &str = "[pos, move_timer, terminate_timer, terminal, last_action, then for lanes \
    1..=8: x, timer, speed]";

impl Env for Freeway {
    super::minatar::minatar_env!(FreewayParams, FreewayState, channels: CHANNELS, actions: 3, drawn as a frame);
    const ID: &'static str = "MinAtar/Freeway-v1";
    const STEP_COST_NS: u64 = 40;

    fn observe(_: &FreewayParams, s: &FreewayState, out: &mut [f32]) {
        out.fill(0.0);
        put(out, CHANNELS, s.pos.into(), 4, 0);
        for (i, car) in s.cars.iter().enumerate() {
            let (y, x) = (i as i32 + 1, i32::from(car.x));
            put(out, CHANNELS, y, x, 1);
            let back = (if car.speed > 0 { x - 1 } else { x + 1 }).rem_euclid(10);
            // Speed 0 (a direction draw of exactly 0.5) has no trail channel in the
            // package either (it would reuse the previous car's).
            if (1..=5).contains(&car.speed.abs()) {
                put(
                    out,
                    CHANNELS,
                    y,
                    back,
                    1 + car.speed.unsigned_abs() as usize,
                );
            }
        }
    }

    fn state_to_vec(s: &FreewayState) -> Vec<f64> {
        let mut v = scalars_to_vec(&[
            s.pos.into(),
            s.move_timer.into(),
            s.terminate_timer,
            s.terminal.into(),
            s.last_action.into(),
        ]);
        for c in &s.cars {
            v.extend([f64::from(c.x), c.timer.into(), c.speed.into()]);
        }
        v
    }

    fn state_from_slice(_: &FreewayParams, v: &[f64]) -> Result<FreewayState, String> {
        let mut r = Reader::new(v, LAYOUT);
        let mut s = FreewayState {
            pos: r.int("pos", 0, 9)? as i8,
            move_timer: r.int("move_timer", 0, PLAYER_SPEED.into())? as i8,
            terminate_timer: r.int("terminate_timer", -1, TIME_LIMIT.into())? as i32,
            terminal: r.bool("terminal")?,
            last_action: r.int("last_action", 0, 2)? as u8,
            cars: [Car::default(); 8],
        };
        for c in &mut s.cars {
            c.x = r.int("car x", 0, 9)? as i8;
            c.timer = r.int("car timer", 0, 5)? as i8;
            c.speed = r.int("car speed", -5, 5)? as i8;
        }
        r.finish(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::minatar::{assert_refused, play_checking_states};
    use super::*;

    #[test]
    fn state_vector_round_trips_and_the_game_ends_at_2500() {
        let (s, steps) = play_checking_states::<Freeway>(3, 10_000, |_| 1, |_| {});
        assert_eq!(steps, TIME_LIMIT as usize + 1);
        assert!(s.terminal);
        assert_refused::<Freeway>(&s, 5, 10.0, "state[5] (car x)");
    }
}
