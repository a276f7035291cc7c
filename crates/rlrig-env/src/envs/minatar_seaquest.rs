//! MinAtar Seaquest, as `MinAtar/Seaquest-v1` of the `minatar` package (1.0.15): a
//! submarine shoots fish and enemy subs (1 point each), picks up divers, and must
//! surface before its oxygen runs out; surfacing with six divers scores by the oxygen
//! left. Channels sub front / sub back / friendly bullet / trail / enemy bullet / fish /
//! enemy sub / oxygen gauge / diver gauge / diver; all six actions; sticky actions (0.1)
//! and difficulty ramping (on each surfacing) as in the package.
//!
//! The package keeps its objects in Python lists, iterates most of them in reverse
//! while removing, and removes with `list.remove` (the first *equal* element). The
//! same semantics are kept here through [`PyList`], down to the rare twins.

use super::minatar::{Draws, Game, PyList, Reader, put, ramp_notch, scalars_to_vec};
use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

const MAX_OXYGEN: i32 = 200;
const INIT_SPAWN_SPEED: i32 = 20;
const DIVER_SPAWN_SPEED: i32 = 30;
const INIT_MOVE_INTERVAL: i32 = 5;
const SHOT_COOL_DOWN: i32 = 5;
const ENEMY_SHOT_INTERVAL: i8 = 10;
const DIVER_MOVE_INTERVAL: i8 = 5;
const CHANNELS: usize = 10;

/// An object on the grid. The package's lists hold `[x, y, right]` (bullets),
/// `[x, y, right, move_timer]` (fish, divers) and `[x, y, right, move_timer, shot_timer]`
/// (enemy subs); unused fields stay 0, so equality is the package's list equality.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Obj {
    pub x: i8,
    pub y: i8,
    pub right: bool,
    pub move_timer: i8,
    pub shot_timer: i8,
}

impl Obj {
    #[inline]
    fn at(&self, x: i8, y: i8) -> bool {
        self.x == x && self.y == y
    }

    #[inline]
    fn dx(&self) -> i8 {
        if self.right { 1 } else { -1 }
    }

    #[inline]
    fn out(&self) -> bool {
        !(0..=9).contains(&self.x)
    }
}

// Capacities. Friendly bullets: one per 5 steps, each gone within 10. Divers: one per
// 31 steps, each gone within 60. Enemies: at most one spawn per step, each gone within
// 10 moves of at least 3 steps, so about 31 alive at the fastest ramp. Enemy bullets:
// one per sub per 11 steps, each gone within 10 steps, so fewer than the subs.
pub type Bullets = PyList<Obj, 8>;
pub type Enemies = PyList<Obj, 48>;
pub type Divers = PyList<Obj, 8>;

/// The game's parameters: sticky actions and the difficulty ramp, as in the package.
pub type SeaquestParams = super::minatar::RampParams;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeaquestState {
    pub oxygen: i32,
    /// Goes to -1 after surfacing with six divers, as in the package.
    pub diver_count: i32,
    pub sub_x: i8,
    pub sub_y: i8,
    /// Facing right.
    pub sub_or: bool,
    pub f_bullets: Bullets,
    pub e_bullets: Enemies,
    pub e_fish: Enemies,
    pub e_subs: Enemies,
    pub divers: Divers,
    pub e_spawn_speed: i32,
    pub e_spawn_timer: i32,
    pub d_spawn_timer: i32,
    pub move_speed: i32,
    pub ramp_index: i32,
    pub shot_timer: i32,
    pub surface: bool,
    pub terminal: bool,
    /// The last action taken, for sticky actions.
    pub last_action: u8,
}

/// The package's `reset` (it draws nothing).
impl Default for SeaquestState {
    fn default() -> Self {
        SeaquestState {
            oxygen: MAX_OXYGEN,
            diver_count: 0,
            sub_x: 5,
            sub_y: 0,
            sub_or: false,
            f_bullets: PyList::default(),
            e_bullets: PyList::default(),
            e_fish: PyList::default(),
            e_subs: PyList::default(),
            divers: PyList::default(),
            e_spawn_speed: INIT_SPAWN_SPEED,
            e_spawn_timer: INIT_SPAWN_SPEED,
            d_spawn_timer: DIVER_SPAWN_SPEED,
            move_speed: INIT_MOVE_INTERVAL,
            ramp_index: 0,
            shot_timer: 0,
            surface: true,
            terminal: false,
            last_action: 0,
        }
    }
}

pub struct Seaquest;

impl Seaquest {
    fn spawn_enemy(s: &mut SeaquestState, d: &mut impl Draws) {
        let (right, x) = d.spawn_side();
        let is_sub = d.rand() < 1.0 / 3.0;
        let y = d.randint(1, 9) as i8;
        // No spawn into a row where something moves the other way.
        let clash = |o: &Obj| o.y == y && o.right != right;
        if s.e_subs.as_slice().iter().any(clash) || s.e_fish.as_slice().iter().any(clash) {
            return;
        }
        let move_timer = s.move_speed as i8;
        if is_sub {
            s.e_subs.push(Obj {
                x,
                y,
                right,
                move_timer,
                shot_timer: ENEMY_SHOT_INTERVAL,
            });
        } else {
            s.e_fish.push(Obj {
                x,
                y,
                right,
                move_timer,
                shot_timer: 0,
            });
        }
    }

    fn spawn_diver(s: &mut SeaquestState, d: &mut impl Draws) {
        let (right, x) = d.spawn_side();
        let y = d.randint(1, 9) as i8;
        s.divers.push(Obj {
            x,
            y,
            right,
            move_timer: DIVER_MOVE_INTERVAL,
            shot_timer: 0,
        });
    }

    /// The package's `_surface`.
    fn surface(p: &SeaquestParams, s: &mut SeaquestState) -> f64 {
        s.surface = true;
        let r = if s.diver_count == 6 {
            s.diver_count = 0;
            (s.oxygen * 10).div_euclid(MAX_OXYGEN)
        } else {
            0
        };
        s.oxygen = MAX_OXYGEN;
        s.diver_count -= 1;
        if p.ramping && (s.e_spawn_speed > 1 || s.move_speed > 2) {
            ramp_notch(
                &mut s.e_spawn_speed,
                &mut s.move_speed,
                &mut s.ramp_index,
                2,
            );
        }
        f64::from(r)
    }

    /// Reverse iteration over a list that shrinks, as Python's `reversed(list)` does: the
    /// index only counts down, and iteration stops once it falls outside the list.
    #[inline]
    fn next_rev(idx: &mut isize, len: usize) -> Option<usize> {
        if *idx >= 0 && (*idx as usize) < len {
            let i = *idx as usize;
            *idx -= 1;
            Some(i)
        } else {
            None
        }
    }

    /// One enemy (an enemy sub when `subs`, else a fish) moving, as the package's enemy
    /// loops do; returns where the iterated object is afterwards.
    fn move_enemy(
        s: &mut SeaquestState,
        subs: bool,
        i: usize,
        e: &mut Obj,
        r: &mut f64,
    ) -> Option<usize> {
        let SeaquestState {
            e_subs,
            e_fish,
            f_bullets,
            terminal,
            move_speed,
            sub_x,
            sub_y,
            ..
        } = s;
        let list = if subs { e_subs } else { e_fish };
        let mut at = Some(i);
        if e.at(*sub_x, *sub_y) {
            *terminal = true;
        }
        if e.move_timer == 0 {
            e.move_timer = *move_speed as i8;
            e.x += e.dx();
            list.set(i, *e);
            if e.out() {
                at = list.remove_tracking(*e, at);
            } else if e.at(*sub_x, *sub_y) {
                *terminal = true;
            } else if let Some(j) = f_bullets.as_slice().iter().position(|b| b.at(e.x, e.y)) {
                at = list.remove_tracking(*e, at);
                f_bullets.remove_at(j);
                *r += 1.0;
            }
        } else {
            e.move_timer -= 1;
            list.set(i, *e);
        }
        at
    }
}

impl Game for Seaquest {
    fn over(s: &SeaquestState) -> bool {
        s.terminal
    }

    fn play(p: &SeaquestParams, s: &mut SeaquestState, a: u8, d: &mut impl Draws) -> f64 {
        let mut r = 0.0;
        if s.e_spawn_timer == 0 {
            Self::spawn_enemy(s, d);
            s.e_spawn_timer = s.e_spawn_speed;
        }
        if s.d_spawn_timer == 0 {
            Self::spawn_diver(s, d);
            s.d_spawn_timer = DIVER_SPAWN_SPEED;
        }
        // Actions n, l, u, r, d, f.
        if a == 5 && s.shot_timer == 0 {
            s.f_bullets.push(Obj {
                x: s.sub_x,
                y: s.sub_y,
                right: s.sub_or,
                ..Obj::default()
            });
            s.shot_timer = SHOT_COOL_DOWN;
        } else if a == 1 {
            s.sub_x = (s.sub_x - 1).max(0);
            s.sub_or = false;
        } else if a == 3 {
            s.sub_x = (s.sub_x + 1).min(9);
            s.sub_or = true;
        } else if a == 2 {
            s.sub_y = (s.sub_y - 1).max(0);
        } else if a == 4 {
            s.sub_y = (s.sub_y + 1).min(8);
        }
        let sub = (s.sub_x, s.sub_y);

        // Friendly bullets.
        let mut idx = s.f_bullets.len() as isize - 1;
        while let Some(i) = Self::next_rev(&mut idx, s.f_bullets.len()) {
            let mut b = s.f_bullets.get(i);
            b.x += b.dx();
            s.f_bullets.set(i, b);
            if b.out() {
                s.f_bullets.remove_first(b);
            } else if let Some(j) = s.e_fish.as_slice().iter().position(|f| f.at(b.x, b.y)) {
                s.e_fish.remove_at(j);
                s.f_bullets.remove_first(b);
                r += 1.0;
            } else if let Some(j) = s.e_subs.as_slice().iter().position(|e| e.at(b.x, b.y)) {
                s.e_subs.remove_at(j);
                s.f_bullets.remove_first(b);
                r += 1.0;
            }
        }

        // Divers.
        let mut idx = s.divers.len() as isize - 1;
        while let Some(i) = Self::next_rev(&mut idx, s.divers.len()) {
            let mut dv = s.divers.get(i);
            if dv.at(sub.0, sub.1) && s.diver_count < 6 {
                s.divers.remove_first(dv);
                s.diver_count += 1;
            } else if dv.move_timer == 0 {
                dv.move_timer = DIVER_MOVE_INTERVAL;
                dv.x += dv.dx();
                s.divers.set(i, dv);
                if dv.out() {
                    s.divers.remove_first(dv);
                } else if dv.at(sub.0, sub.1) && s.diver_count < 6 {
                    s.divers.remove_first(dv);
                    s.diver_count += 1;
                }
            } else {
                dv.move_timer -= 1;
                s.divers.set(i, dv);
            }
        }

        // Enemy subs: they move like fish, then shoot on their own timer (even one that
        // has just left the grid, as in the package; its bullet leaves the grid too).
        let mut idx = s.e_subs.len() as isize - 1;
        while let Some(i) = Self::next_rev(&mut idx, s.e_subs.len()) {
            let mut e = s.e_subs.get(i);
            let at = Self::move_enemy(s, true, i, &mut e, &mut r);
            if e.shot_timer == 0 {
                e.shot_timer = ENEMY_SHOT_INTERVAL;
                s.e_bullets.push(Obj {
                    x: e.x,
                    y: e.y,
                    right: e.right,
                    ..Obj::default()
                });
            } else {
                e.shot_timer -= 1;
            }
            if let Some(k) = at {
                s.e_subs.set(k, e);
            }
        }

        // Enemy bullets.
        let mut idx = s.e_bullets.len() as isize - 1;
        while let Some(i) = Self::next_rev(&mut idx, s.e_bullets.len()) {
            let mut b = s.e_bullets.get(i);
            if b.at(sub.0, sub.1) {
                s.terminal = true;
            }
            b.x += b.dx();
            s.e_bullets.set(i, b);
            if b.out() {
                s.e_bullets.remove_first(b);
            } else if b.at(sub.0, sub.1) {
                s.terminal = true;
            }
        }

        // Fish.
        let mut idx = s.e_fish.len() as isize - 1;
        while let Some(i) = Self::next_rev(&mut idx, s.e_fish.len()) {
            let mut f = s.e_fish.get(i);
            Self::move_enemy(s, false, i, &mut f, &mut r);
        }

        if s.e_spawn_timer > 0 {
            s.e_spawn_timer -= 1;
        }
        if s.d_spawn_timer > 0 {
            s.d_spawn_timer -= 1;
        }
        if s.shot_timer > 0 {
            s.shot_timer -= 1;
        }
        if s.oxygen <= 0 {
            s.terminal = true;
        }
        if s.sub_y > 0 {
            s.oxygen -= 1;
            s.surface = false;
        } else if !s.surface {
            if s.diver_count == 0 {
                s.terminal = true;
            } else {
                r += Self::surface(p, s);
            }
        }
        r
    }
}

const LAYOUT: &str = "[oxygen, diver_count, sub_x, sub_y, sub_or, e_spawn_speed, e_spawn_timer, \
    d_spawn_timer, move_speed, ramp_index, shot_timer, surface, terminal, last_action, then five \
    lists (friendly bullets, enemy bullets, fish, enemy subs, divers), each its length n and n \
    entries x, y, right, move_timer, shot_timer]";

impl Env for Seaquest {
    super::minatar::minatar_env!(SeaquestParams, SeaquestState, channels: CHANNELS, actions: 6, drawn as a frame);
    const ID: &'static str = "MinAtar/Seaquest-v1";
    const STEP_COST_NS: u64 = 150;

    fn observe(_: &SeaquestParams, s: &SeaquestState, out: &mut [f32]) {
        out.fill(0.0);
        let (sx, sy) = (i32::from(s.sub_x), i32::from(s.sub_y));
        put(out, CHANNELS, sy, sx, 0);
        // The package indexes column -1 as NumPy does (the last column); unreachable in
        // play, kept for states set by hand.
        let back = if s.sub_or { sx - 1 } else { sx + 1 };
        if (-1..=9).contains(&back) {
            put(out, CHANNELS, sy, back.rem_euclid(10), 1);
        }
        for x in 0..(s.oxygen.max(0) * 10 / MAX_OXYGEN).min(10) {
            put(out, CHANNELS, 9, x, 7);
        }
        for x in (9 - s.diver_count).max(0)..9 {
            put(out, CHANNELS, 9, x, 8);
        }
        let inside = |o: &Obj| (0..=9).contains(&o.x) && (0..=9).contains(&o.y);
        for b in s.f_bullets.as_slice().iter().filter(|o| inside(o)) {
            put(out, CHANNELS, b.y.into(), b.x.into(), 2);
        }
        for b in s.e_bullets.as_slice().iter().filter(|o| inside(o)) {
            put(out, CHANNELS, b.y.into(), b.x.into(), 4);
        }
        for (list, c) in [
            (s.e_fish.as_slice(), 5),
            (s.e_subs.as_slice(), 6),
            (s.divers.as_slice(), 9),
        ] {
            for o in list.iter().filter(|o| inside(o)) {
                let (y, x) = (i32::from(o.y), i32::from(o.x));
                put(out, CHANNELS, y, x, c);
                let back = x - i32::from(o.dx());
                if (0..=9).contains(&back) {
                    put(out, CHANNELS, y, back, 3);
                }
            }
        }
    }

    fn state_to_vec(s: &SeaquestState) -> Vec<f64> {
        let mut v = scalars_to_vec(&[
            s.oxygen,
            s.diver_count,
            s.sub_x.into(),
            s.sub_y.into(),
            s.sub_or.into(),
            s.e_spawn_speed,
            s.e_spawn_timer,
            s.d_spawn_timer,
            s.move_speed,
            s.ramp_index,
            s.shot_timer,
            s.surface.into(),
            s.terminal.into(),
            s.last_action.into(),
        ]);
        let lists: [&[Obj]; 5] = [
            s.f_bullets.as_slice(),
            s.e_bullets.as_slice(),
            s.e_fish.as_slice(),
            s.e_subs.as_slice(),
            s.divers.as_slice(),
        ];
        for list in lists {
            v.push(list.len() as f64);
            for o in list {
                v.extend([
                    f64::from(o.x),
                    o.y.into(),
                    u8::from(o.right).into(),
                    o.move_timer.into(),
                    o.shot_timer.into(),
                ]);
            }
        }
        v
    }

    fn state_from_slice(_: &SeaquestParams, v: &[f64]) -> Result<SeaquestState, String> {
        let mut r = Reader::new(v, LAYOUT);
        let mut s = SeaquestState {
            oxygen: r.int("oxygen", -1, MAX_OXYGEN.into())? as i32,
            diver_count: r.int("diver_count", -(1 << 20), 6)? as i32,
            sub_x: r.int("sub_x", 0, 9)? as i8,
            sub_y: r.int("sub_y", 0, 8)? as i8,
            sub_or: r.bool("sub_or")?,
            e_spawn_speed: r.int("e_spawn_speed", 1, INIT_SPAWN_SPEED.into())? as i32,
            e_spawn_timer: r.int("e_spawn_timer", 0, INIT_SPAWN_SPEED.into())? as i32,
            d_spawn_timer: r.int("d_spawn_timer", 0, DIVER_SPAWN_SPEED.into())? as i32,
            move_speed: r.int("move_speed", 2, INIT_MOVE_INTERVAL.into())? as i32,
            ramp_index: r.int("ramp_index", 0, 1 << 30)? as i32,
            shot_timer: r.int("shot_timer", 0, SHOT_COOL_DOWN.into())? as i32,
            surface: r.bool("surface")?,
            terminal: r.bool("terminal")?,
            last_action: r.int("last_action", 0, 5)? as u8,
            ..SeaquestState::default()
        };
        fn list<const N: usize>(r: &mut Reader<'_>, what: &str) -> Result<PyList<Obj, N>, String> {
            let n = r.int(&format!("{what} count"), 0, N as i64)?;
            let mut l = PyList::default();
            for _ in 0..n {
                l.push(Obj {
                    x: r.int(&format!("{what} x"), -2, 11)? as i8,
                    y: r.int(&format!("{what} y"), 0, 9)? as i8,
                    right: r.bool(&format!("{what} right"))?,
                    move_timer: r.int(&format!("{what} move_timer"), 0, 10)? as i8,
                    shot_timer: r.int(&format!("{what} shot_timer"), 0, 10)? as i8,
                });
            }
            Ok(l)
        }
        s.f_bullets = list(&mut r, "friendly bullet")?;
        s.e_bullets = list(&mut r, "enemy bullet")?;
        s.e_fish = list(&mut r, "fish")?;
        s.e_subs = list(&mut r, "enemy sub")?;
        s.divers = list(&mut r, "diver")?;
        r.finish(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::minatar::{assert_refused, play_checking_states};
    use super::*;

    #[test]
    fn state_vector_round_trips() {
        let mut seen = 0;
        // Dive, then patrol and shoot.
        let policy = |t: usize| if t < 3 { 4 } else { [5, 1, 5, 3][t % 4] };
        play_checking_states::<Seaquest>(3, 400, policy, |s| {
            seen = seen.max(s.e_fish.len() + s.e_subs.len());
        });
        assert!(seen > 0, "enemies spawn");
        assert_refused::<Seaquest>(
            &SeaquestState::default(),
            14,
            100.0,
            "state[14] (friendly bullet count)",
        );
    }
}
