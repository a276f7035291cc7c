//! LunarLander-v3 and LunarLanderContinuous-v3: Gymnasium's `box2d/lunar_lander.py`.
//!
//! # Physics
//! Box2D 2.3, Gymnasium's engine, stepped as the reference steps it (180 velocity and 60
//! position iterations; see `b2.rs` for the version and what the golden tests measure).
//! Everything else follows the reference line by line, in its order (bodies, fixtures and
//! joints are created in the order Gymnasium creates them, which fixes Box2D's contact
//! order): terrain (12 uniform heights, smoothed with Python's wrap-around `height[-1]`),
//! the lander polygon, legs 0.6 m from their anchors that the position solver pulls in, joint
//! limits and motors, engine impulses with their dispersion computed in f64 as Python does,
//! wind and turbulence, the observation scaling, reward shaping, and termination (crash,
//! leaving the screen, or the lander falling asleep).

use std::f64::consts::PI;
use std::fmt;

use super::b2::{
    self, BodyHandle, DEFAULT_FRICTION, Fixture, Revolute, Scene, SimState, Simulation, Tag,
    check_replay,
};
use crate::env::{Env, Transition};
use crate::rng::Rng;
use crate::space::Space;

pub const FPS: f64 = 50.0;
pub const SCALE: f64 = 30.0;
const MAIN_ENGINE_POWER: f64 = 13.0;
const SIDE_ENGINE_POWER: f64 = 0.6;
const INITIAL_RANDOM: f64 = 1000.0;
/// The lander's hull, in pixels (divide by [`SCALE`] for world units); the renderer draws
/// the same polygon.
pub const LANDER_POLY: [(f64, f64); 6] = [
    (-14.0, 17.0),
    (-17.0, 0.0),
    (-17.0, -10.0),
    (17.0, -10.0),
    (17.0, 0.0),
    (14.0, 17.0),
];
const LEG_AWAY: f64 = 20.0;
const LEG_DOWN: f64 = 18.0;
const LEG_W: f64 = 2.0;
const LEG_H: f64 = 8.0;
const LEG_SPRING_TORQUE: f64 = 40.0;
const SIDE_ENGINE_HEIGHT: f64 = 14.0;
const SIDE_ENGINE_AWAY: f64 = 12.0;
const MAIN_ENGINE_Y_LOCATION: f64 = 4.0;
pub const VIEWPORT_W: f64 = 600.0;
pub const VIEWPORT_H: f64 = 400.0;
pub const CHUNKS: usize = 11;
/// The random draws of one reset: `CHUNKS + 1` terrain heights and the initial force.
pub const DRAWS: usize = CHUNKS + 1 + 2;

#[derive(Clone, Debug)]
pub struct LunarLanderParams {
    pub gravity: f64,
    pub enable_wind: bool,
    pub wind_power: f64,
    pub turbulence_power: f64,
    pub max_episode_steps: u32,
}

impl Default for LunarLanderParams {
    fn default() -> Self {
        LunarLanderParams {
            gravity: -10.0,
            enable_wind: false,
            wind_power: 15.0,
            turbulence_power: 1.5,
            max_episode_steps: 1000,
        }
    }
}

/// Engine commands after the reference's action decoding.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Engines {
    /// 0 (off) or 0.5..=1.
    pub main: f64,
    /// 0 (off) or 0.5..=1.
    pub side: f64,
    /// -1 (left engine) or +1 (right engine).
    pub direction: f64,
}

impl Engines {
    pub fn discrete(a: i32) -> Engines {
        match a {
            2 => Engines {
                main: 1.0,
                ..Engines::default()
            },
            1 | 3 => Engines {
                side: 1.0,
                direction: f64::from(a - 2),
                ..Engines::default()
            },
            _ => Engines::default(),
        }
    }

    pub fn continuous(a: &[f32; 2]) -> Engines {
        Engines::throttles([f64::from(a[0]), f64::from(a[1])])
    }

    /// Gymnasium's decoding of a continuous action once it is float64
    /// (`np.clip(action, -1, +1).astype(np.float64)`): a caller that passes Python floats
    /// gives float64 values that no float32 action reaches (the golden recorder's random
    /// policy does), and the throttle's products round from those.
    pub fn throttles(a: [f64; 2]) -> Engines {
        let a0 = a[0].clamp(-1.0, 1.0);
        let a1 = a[1].clamp(-1.0, 1.0);
        let mut e = Engines::default();
        if a0 > 0.0 {
            e.main = (a0.clamp(0.0, 1.0) + 1.0) * 0.5;
        }
        if a1.abs() > 0.5 {
            e.direction = a1.signum();
            e.side = a1.abs().clamp(0.5, 1.0);
        }
        e
    }
}

/// One lander world and the reference's bookkeeping around it.
pub struct Sim {
    scene: Scene,
    lander: BodyHandle,
    legs: [BodyHandle; 2],
    prev_shaping: Option<f64>,
    params: LunarLanderParams,
    /// The wind and turbulence indices at reset, and now.
    wind0: (i64, i64),
    pub wind_idx: i64,
    pub torque_idx: i64,
    /// The reset's random draws: terrain heights and the initial force.
    pub draws: [f64; DRAWS],
    /// Every step since the reset (the reset's own no-op step excluded): main throttle, side
    /// throttle, direction and the two dispersion draws. Snapshots replay them: Box2D 2.3 has
    /// no world serialisation, and replaying is exact.
    inputs: Vec<[f64; 5]>,
    /// The terrain's chunk heights after smoothing (for rendering).
    pub smooth_y: [f64; CHUNKS],
    pub helipad_y: f64,
    /// The last observation, in f64 as the reference computes it before the float32 cast.
    pub state: [f64; 8],
    /// (x, y, angle) of the lander and both legs after the last step, in world units.
    pub poses: [(f64, f64, f64); 3],
    /// Each leg touches the ground (after the last step).
    pub ground_contact: [bool; 2],
}

impl Sim {
    /// Builds the reference's scene from a reset's draws, in its order (no step taken yet).
    fn build(p: &LunarLanderParams, draws: [f64; DRAWS], wind: (i64, i64)) -> Sim {
        let w = VIEWPORT_W / SCALE;
        let h = VIEWPORT_H / SCALE;
        let mut scene = Scene::new(p.gravity);
        let mut height = [0.0; CHUNKS + 1];
        height.copy_from_slice(&draws[..CHUNKS + 1]);
        let chunk_x: [f64; CHUNKS] = std::array::from_fn(|i| w / (CHUNKS - 1) as f64 * i as f64);
        let helipad_y = h / 4.0;
        for k in CHUNKS / 2 - 2..=CHUNKS / 2 + 2 {
            height[k] = helipad_y;
        }
        // Python's height[i - 1] at i = 0 is height[-1], the last element.
        let smooth_y: [f64; CHUNKS] = std::array::from_fn(|i| {
            0.33 * (height[(i + CHUNKS) % (CHUNKS + 1)] + height[i] + height[i + 1])
        });
        // CreateStaticBody(shapes=edgeShape(...)): a default fixtureDef (friction 0.2).
        let moon = scene.static_body();
        scene.edge(
            moon,
            Fixture::ground(DEFAULT_FRICTION),
            (0.0, 0.0),
            (w, 0.0),
        );
        for i in 0..CHUNKS - 1 {
            scene.edge(
                moon,
                Fixture::ground(0.1),
                (chunk_x[i], smooth_y[i]),
                (chunk_x[i + 1], smooth_y[i + 1]),
            );
        }

        let (x0, y0) = (VIEWPORT_W / SCALE / 2.0, VIEWPORT_H / SCALE);
        let lander = scene.dynamic_body(x0, y0, 0.0, Tag::Hull);
        let pts: Vec<(f64, f64)> = LANDER_POLY
            .iter()
            .map(|&(x, y)| (x / SCALE, y / SCALE))
            .collect();
        scene.polygon(lander, Fixture::part(5.0, 0.1, 0x0010), &pts);
        scene.apply_force_to_center(lander, (draws[12], draws[13]));

        let mut legs = [lander; 2];
        for (k, i) in [-1.0f64, 1.0].into_iter().enumerate() {
            // As in the reference: 0.6 m from the joint anchor and outside the joint limits;
            // Box2D's position solver pulls the assembly together within the first steps.
            let leg =
                scene.dynamic_body(x0 - i * LEG_AWAY / SCALE, y0, i * 0.05, Tag::Foot(k as u8));
            scene.boxed(
                leg,
                Fixture::part(1.0, DEFAULT_FRICTION, 0x0020),
                LEG_W / SCALE,
                LEG_H / SCALE,
            );
            let limits = if i < 0.0 {
                (0.9 - 0.5, 0.9)
            } else {
                (-0.9, -0.9 + 0.5)
            };
            scene.revolute(
                lander,
                leg,
                &Revolute {
                    anchor_a: (0.0, 0.0),
                    anchor_b: (i * LEG_AWAY / SCALE, LEG_DOWN / SCALE),
                    limits,
                    max_torque: LEG_SPRING_TORQUE,
                    speed: 0.3 * i,
                },
            );
            legs[k] = leg;
        }
        Sim {
            scene,
            lander,
            legs,
            prev_shaping: None,
            params: p.clone(),
            wind0: wind,
            wind_idx: wind.0,
            torque_idx: wind.1,
            draws,
            inputs: Vec::new(),
            smooth_y,
            helipad_y,
            state: [0.0; 8],
            poses: [(0.0, 0.0, 0.0); 3],
            ground_contact: [false; 2],
        }
    }

    /// The reference's reset: the scene, then the observation of one no-op step (whose
    /// dispersion draws a no-op does not use).
    fn reset(p: &LunarLanderParams, draws: [f64; DRAWS], wind: (i64, i64)) -> Sim {
        let mut sim = Sim::build(p, draws, wind);
        sim.step(Engines::default(), [0.0; 2]);
        sim
    }

    /// The reference's `step` with the dispersion draws given: returns (reward, terminated).
    fn step(&mut self, e: Engines, dispersion: [f64; 2]) -> (f64, bool) {
        let p = &self.params;
        let scene = &mut self.scene;
        let contact = scene.feet();
        if p.enable_wind && !(contact[0] || contact[1]) {
            let wave = |k: i64| ((0.02 * k as f64).sin() + (PI * 0.01 * k as f64).sin()).tanh();
            let wind = wave(self.wind_idx) * p.wind_power;
            self.wind_idx += 1;
            scene.apply_force_to_center(self.lander, (wind, 0.0));
            let torque = wave(self.torque_idx) * p.turbulence_power;
            self.torque_idx += 1;
            scene.apply_torque(self.lander, torque);
        }
        let before = scene.body(self.lander);
        let tip = (before.angle.sin(), before.angle.cos());
        let side = (-tip.1, tip.0);
        let d = [dispersion[0] / SCALE, dispersion[1] / SCALE];
        let (px, py) = before.position;
        if e.main > 0.0 {
            let ox = tip.0 * (MAIN_ENGINE_Y_LOCATION / SCALE + 2.0 * d[0]) + side.0 * d[1];
            let oy = -tip.1 * (MAIN_ENGINE_Y_LOCATION / SCALE + 2.0 * d[0]) - side.1 * d[1];
            // The reference's order of products, `-ox * MAIN_ENGINE_POWER * m_power`: with a
            // continuous throttle `(-ox * P) * m` and `-ox * (P * m)` round differently.
            let impulse = (
                -ox * MAIN_ENGINE_POWER * e.main,
                -oy * MAIN_ENGINE_POWER * e.main,
            );
            scene.apply_linear_impulse(self.lander, impulse, (px + ox, py + oy));
        }
        if e.side > 0.0 {
            let lever = 3.0 * d[1] + e.direction * SIDE_ENGINE_AWAY / SCALE;
            let ox = tip.0 * d[0] + side.0 * lever;
            let oy = -tip.1 * d[0] - side.1 * lever;
            // The reference uses 17 here where SIDE_ENGINE_HEIGHT (14) is meant, so the
            // thrust point moves with the orientation; kept for parity.
            let at = (
                px + ox - tip.0 * 17.0 / SCALE,
                py + oy + tip.1 * SIDE_ENGINE_HEIGHT / SCALE,
            );
            let impulse = (
                -ox * SIDE_ENGINE_POWER * e.side,
                -oy * SIDE_ENGINE_POWER * e.side,
            );
            scene.apply_linear_impulse(self.lander, impulse, at);
        }
        b2::step(scene, FPS);

        let lander = scene.body(self.lander);
        let (x, y) = lander.position;
        let (vx, vy) = lander.velocity;
        let contact = scene.feet();
        let half_w = VIEWPORT_W / SCALE / 2.0;
        let half_h = VIEWPORT_H / SCALE / 2.0;
        let s = [
            (x - half_w) / half_w,
            (y - (self.helipad_y + LEG_DOWN / SCALE)) / half_h,
            vx * half_w / FPS,
            vy * half_h / FPS,
            lander.angle,
            20.0 * lander.angular_velocity / FPS,
            if contact[0] { 1.0 } else { 0.0 },
            if contact[1] { 1.0 } else { 0.0 },
        ];
        self.state = s;
        self.ground_contact = contact;
        for (pose, b) in self
            .poses
            .iter_mut()
            .zip([self.lander, self.legs[0], self.legs[1]])
        {
            *pose = scene.body(b).pose();
        }
        let shaping = -100.0 * (s[0] * s[0] + s[1] * s[1]).sqrt()
            - 100.0 * (s[2] * s[2] + s[3] * s[3]).sqrt()
            - 100.0 * s[4].abs()
            + 10.0 * s[6]
            + 10.0 * s[7];
        let mut reward = match self.prev_shaping {
            Some(prev) => shaping - prev,
            None => 0.0,
        };
        self.prev_shaping = Some(shaping);
        reward -= e.main * 0.30;
        reward -= e.side * 0.03;
        let mut terminated = false;
        if scene.game_over() || s[0].abs() >= 1.0 {
            terminated = true;
            reward = -100.0;
        }
        if !lander.awake {
            terminated = true;
            reward = 100.0;
        }
        (reward, terminated)
    }

    /// A step after the reset's, recorded for snapshots.
    fn step_recorded(&mut self, e: Engines, dispersion: [f64; 2]) -> (f64, bool) {
        self.inputs
            .push([e.main, e.side, e.direction, dispersion[0], dispersion[1]]);
        self.step(e, dispersion)
    }

    /// What `rlrig play` draws: the terrain's 11 chunk heights, the helipad height, then
    /// (x, y, angle) of the lander and both legs, in world units.
    pub fn render_state(&self) -> Vec<f64> {
        let mut v = self.smooth_y.to_vec();
        v.push(self.helipad_y);
        for (x, y, a) in self.poses {
            v.extend([x, y, a]);
        }
        v
    }

    /// Everything a checkpoint needs: the reset's draws and wind indices, every step's
    /// inputs since, and the observation they must lead to (checked on restore).
    fn to_vec(&self) -> Vec<f64> {
        let mut v = Vec::with_capacity(1 + DRAWS + 3 + 5 * self.inputs.len() + 8);
        v.push(SNAPSHOT_VERSION);
        v.extend_from_slice(&self.draws);
        v.push(self.wind0.0 as f64);
        v.push(self.wind0.1 as f64);
        v.push(self.inputs.len() as f64);
        for i in &self.inputs {
            v.extend_from_slice(i);
        }
        v.extend_from_slice(&self.state);
        v
    }

    fn from_vec(p: &LunarLanderParams, v: &[f64]) -> Result<Sim, String> {
        const HEAD: usize = 1 + DRAWS + 3;
        let bad =
            |why: &str| format!("not a LunarLander snapshot (version {SNAPSHOT_VERSION}): {why}");
        if v.len() < HEAD + 8 || v[0] != SNAPSHOT_VERSION {
            return Err(bad(&format!("{} numbers", v.len())));
        }
        let draws: [f64; DRAWS] = v[1..1 + DRAWS].try_into().expect("length checked");
        check_draws(&draws)?;
        let r = &v[1 + DRAWS..];
        let n = r[2];
        if !(0.0..=1e7).contains(&n) || n.fract() != 0.0 || v.len() != HEAD + 5 * n as usize + 8 {
            return Err(bad(&format!("{n} steps announced in {} numbers", v.len())));
        }
        let mut sim = Sim::reset(p, draws, (r[0] as i64, r[1] as i64));
        for (t, i) in r[3..3 + 5 * n as usize].chunks_exact(5).enumerate() {
            let ok = i.iter().all(|x| x.is_finite())
                && (0.0..=1.0).contains(&i[0])
                && (0.0..=1.0).contains(&i[1])
                && i[2].abs() <= 1.0
                && i[3].abs() <= 1.0
                && i[4].abs() <= 1.0;
            if !ok {
                return Err(bad(&format!("step {t}'s inputs {i:?} are out of range")));
            }
            let e = Engines {
                main: i[0],
                side: i[1],
                direction: i[2],
            };
            sim.step_recorded(e, [i[3], i[4]]);
        }
        check_replay(Self::ENV, n, &sim.state, &v[v.len() - 8..])?;
        Ok(sim)
    }
}

const SNAPSHOT_VERSION: f64 = 2.0;

impl Simulation for Sim {
    const ENV: &'static str = "LunarLander";

    fn replay(&self) -> Sim {
        Sim::from_vec(&self.params, &self.to_vec()).expect("own snapshot restores")
    }
}

/// An env's state: its own Box2D world.
pub type LanderState = SimState<Sim>;

impl fmt::Debug for LanderState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.sim {
            None => write!(f, "LanderState(unset)"),
            Some(s) => write!(
                f,
                "LanderState {{ obs: {:?}, draws: {:?} }}",
                s.state, s.draws
            ),
        }
    }
}

fn reset_with(p: &LunarLanderParams, draws: [f64; DRAWS], wind: (i64, i64)) -> LanderState {
    LanderState::new(Sim::reset(p, draws, wind))
}

fn reset_random(p: &LunarLanderParams, rng: &mut Rng) -> LanderState {
    let h = VIEWPORT_H / SCALE;
    let mut draws = [0.0; DRAWS];
    for d in draws.iter_mut().take(CHUNKS + 1) {
        *d = rng.uniform(0.0, h / 2.0);
    }
    draws[12] = rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM);
    draws[13] = rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM);
    let wind = if p.enable_wind {
        (
            i64::from(rng.below(19998)) - 9999,
            i64::from(rng.below(19998)) - 9999,
        )
    } else {
        (0, 0)
    };
    reset_with(p, draws, wind)
}

/// One step with the dispersion draws given (uniform in [-1, 1), as the reference draws them
/// before dividing by SCALE): what the golden tests replay.
/// (The state carries its env's parameters.)
pub fn step_with(s: &mut LanderState, e: Engines, dispersion: [f64; 2]) -> Transition {
    let (reward, terminated) = s.sim_mut().step_recorded(e, dispersion);
    Transition { reward, terminated }
}

/// The initial state from a reset's draws (`CHUNKS + 1` heights in [0, H/2], force x, y).
pub fn reset_from_draws(p: &LunarLanderParams, draws: [f64; DRAWS]) -> LanderState {
    reset_with(p, draws, (0, 0))
}

fn step_random(s: &mut LanderState, e: Engines, rng: &mut Rng) -> Transition {
    let dispersion = [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)];
    step_with(s, e, dispersion)
}

fn observe(s: &LanderState, out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(s.sim().state) {
        *o = v as f32;
    }
}

fn observation_space() -> Space {
    let tau = 2.0 * std::f32::consts::PI;
    Space::box1(
        vec![-2.5, -2.5, -10.0, -10.0, -tau, -10.0, -0.0, -0.0],
        vec![2.5, 2.5, 10.0, 10.0, tau, 10.0, 1.0, 1.0],
    )
}

fn state_from_slice(p: &LunarLanderParams, v: &[f64]) -> Result<LanderState, String> {
    let draws: [f64; DRAWS] = super::fixed(
        v,
        "(12 terrain heights in [0, 6.667], then the initial force x, y in [-1000, 1000])",
    )?;
    check_draws(&draws)?;
    Ok(reset_from_draws(p, draws))
}

/// A reset's draws as the reference can draw them (Box2D must never see a NaN).
fn check_draws(draws: &[f64; DRAWS]) -> Result<(), String> {
    let h2 = VIEWPORT_H / SCALE / 2.0;
    if let Some(i) = draws[..CHUNKS + 1]
        .iter()
        .position(|&x| !(0.0..=h2).contains(&x))
    {
        return Err(format!(
            "state[{i}] = {} is a terrain height outside [0, {h2:.3}]",
            draws[i]
        ));
    }
    for i in CHUNKS + 1..DRAWS {
        if !(-INITIAL_RANDOM..=INITIAL_RANDOM).contains(&draws[i]) {
            return Err(format!(
                "state[{i}] = {} is an initial force outside [-{INITIAL_RANDOM}, {INITIAL_RANDOM}]",
                draws[i]
            ));
        }
    }
    Ok(())
}

fn restore(p: &LunarLanderParams, v: &[f64]) -> Result<LanderState, String> {
    Ok(LanderState::new(Sim::from_vec(p, v)?))
}

/// The two landers differ only in their action space and its decoding.
macro_rules! lander_env {
    ($name:ident, $id:literal, $action:ty, $space:expr, $decode:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name;

        impl Env for $name {
            type Params = LunarLanderParams;
            type State = LanderState;
            type Action = $action;
            type Obs = f32;
            const ID: &'static str = $id;
            const OBS_DIM: usize = 8;
            // Box2D 2.3 at 180/60 iterations: 45-60 k steps/s on one EPYC core.
            const STEP_COST_NS: u64 = 18_000;
            // Max RSS of `bench env` with 1,000 and 4,000 envs: 109 KB per env (a Box2D
            // world), plus up to 1,000 recorded steps (40 KB) that a snapshot replays.
            const STATE_HEAP_BYTES: usize = 150_000;

            fn observation_space(_: &LunarLanderParams) -> Space {
                observation_space()
            }

            fn action_space(_: &LunarLanderParams) -> Space {
                $space
            }

            fn max_episode_steps(p: &LunarLanderParams) -> Option<u32> {
                Some(p.max_episode_steps)
            }

            fn reset(p: &LunarLanderParams, rng: &mut Rng) -> LanderState {
                reset_random(p, rng)
            }

            fn step(
                _: &LunarLanderParams,
                s: &mut LanderState,
                a: &$action,
                rng: &mut Rng,
            ) -> Transition {
                let decode: fn(&$action) -> Engines = $decode;
                step_random(s, decode(a), rng)
            }

            fn observe(_: &LunarLanderParams, s: &LanderState, out: &mut [f32]) {
                observe(s, out);
            }

            fn state_to_vec(s: &LanderState) -> Vec<f64> {
                s.sim().draws.to_vec()
            }

            fn state_from_slice(p: &LunarLanderParams, v: &[f64]) -> Result<LanderState, String> {
                state_from_slice(p, v)
            }

            fn snapshot(s: &LanderState) -> Vec<f64> {
                s.sim().to_vec()
            }

            fn render_state(s: &LanderState) -> Vec<f64> {
                s.sim().render_state()
            }

            fn restore(p: &LunarLanderParams, v: &[f64]) -> Result<LanderState, String> {
                restore(p, v)
            }
        }
    };
}

lander_env!(
    LunarLander,
    "LunarLander-v3",
    i32,
    Space::Discrete { n: 4 },
    |a| Engines::discrete(*a),
    "LunarLander-v3: four discrete actions (noop, left engine, main engine, right engine)."
);

lander_env!(
    LunarLanderContinuous,
    "LunarLanderContinuous-v3",
    [f32; 2],
    Space::symmetric(vec![1.0, 1.0]),
    Engines::continuous,
    "LunarLanderContinuous-v3 (`continuous=True`): [main throttle, lateral] in [-1, 1]."
);

/// Gymnasium's `heuristic(env, s)` for the discrete lander.
pub fn heuristic_discrete(s: &[f32]) -> i32 {
    let (angle_todo, hover_todo) = heuristic_targets(s);
    if hover_todo > angle_todo.abs() && hover_todo > 0.05 {
        2
    } else if angle_todo < -0.05 {
        3
    } else if angle_todo > 0.05 {
        1
    } else {
        0
    }
}

/// Gymnasium's `heuristic(env, s)` for the continuous lander.
pub fn heuristic_continuous(s: &[f32]) -> [f32; 2] {
    let (angle_todo, hover_todo) = heuristic_targets(s);
    [
        (hover_todo * 20.0 - 1.0).clamp(-1.0, 1.0) as f32,
        (-angle_todo * 20.0).clamp(-1.0, 1.0) as f32,
    ]
}

fn heuristic_targets(s: &[f32]) -> (f64, f64) {
    // Widened on the stack: policies run once per env step, no allocation there.
    let s: [f64; 8] = std::array::from_fn(|i| f64::from(s[i]));
    // Point towards the centre, but never more than 0.4 rad.
    let angle_targ = (s[0] * 0.5 + s[2]).clamp(-0.4, 0.4);
    let hover_targ = 0.55 * s[0].abs();
    let mut angle_todo = (angle_targ - s[4]) * 0.5 - s[5];
    let mut hover_todo = (hover_targ - s[1]) * 0.5 - s[3] * 0.5;
    if s[6] != 0.0 || s[7] != 0.0 {
        angle_todo = 0.0;
        hover_todo = -s[3] * 0.5;
    }
    (angle_todo, hover_todo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    fn run_heuristic(seed: u64) -> (f64, u32) {
        let p = LunarLanderParams::default();
        let mut rng = Rng::stream(seed, Purpose::Env, 0);
        let mut s = LunarLander::reset(&p, &mut rng);
        let mut obs = [0f32; 8];
        let mut ret = 0.0;
        for t in 1..=p.max_episode_steps {
            LunarLander::observe(&p, &s, &mut obs);
            let tr = LunarLander::step(&p, &mut s, &heuristic_discrete(&obs), &mut rng);
            ret += tr.reward;
            if tr.terminated {
                return (ret, t);
            }
        }
        (ret, p.max_episode_steps)
    }

    #[test]
    fn the_heuristic_lands() {
        let returns: Vec<f64> = (0..10).map(|s| run_heuristic(s).0).collect();
        let landed = returns.iter().filter(|&&r| r > 200.0).count();
        assert!(landed >= 7, "{returns:?}");
    }

    #[test]
    fn snapshots_and_clones_continue_identically() {
        let p = LunarLanderParams::default();
        let mut rng = Rng::stream(3, Purpose::Env, 0);
        let mut s = LunarLander::reset(&p, &mut rng);
        for t in 0..40 {
            LunarLander::step(&p, &mut s, &(t % 4), &mut rng);
        }
        let mut copy = s.clone();
        let mut restored = LunarLander::restore(&p, &LunarLander::snapshot(&s)).unwrap();
        let mut r1 = rng.clone();
        let mut r2 = rng.clone();
        for t in 0..200 {
            let a = [2, 2, 0, 1, 3][t % 5];
            let x = LunarLander::step(&p, &mut s, &a, &mut rng);
            let y = LunarLander::step(&p, &mut copy, &a, &mut r1);
            let z = LunarLander::step(&p, &mut restored, &a, &mut r2);
            assert_eq!(x, y, "clone diverged at step {t}");
            assert_eq!(x, z, "restore diverged at step {t}");
            assert_eq!(s.sim().state, copy.sim().state);
            assert_eq!(s.sim().state, restored.sim().state);
            if x.terminated {
                break;
            }
        }
    }

    #[test]
    fn bad_state_vectors_are_named() {
        let p = LunarLanderParams::default();
        let e = LunarLander::state_from_slice(&p, &[1.0; 3]).unwrap_err();
        assert!(e.contains("expected 14 numbers"), "{e}");
        let mut v = [1.0; DRAWS];
        v[4] = 9.0;
        let e = LunarLander::state_from_slice(&p, &v).unwrap_err();
        assert!(e.contains("state[4]"), "{e}");
        let e = LunarLander::restore(&p, &[2.0, 1.0]).unwrap_err();
        assert!(e.contains("not a LunarLander snapshot"), "{e}");
    }

    #[test]
    fn continuous_actions_decode_as_the_reference() {
        assert_eq!(Engines::continuous(&[-0.3, 0.2]), Engines::default());
        let e = Engines::continuous(&[0.5, -0.7]);
        assert_eq!(
            (e.main, e.side, e.direction),
            (0.75, f64::from(0.7f32), -1.0)
        );
        let e = Engines::continuous(&[3.0, 0.6]);
        assert_eq!((e.main, e.direction), (1.0, 1.0));
        // Python floats stay float64 (the reference widens, never narrows).
        let (x, x32) = (0.5070262f64, 0.5070262f32);
        assert_eq!(Engines::throttles([x, 0.0]).main, (x + 1.0) * 0.5);
        assert_ne!(
            Engines::throttles([x, 0.0]).main,
            Engines::continuous(&[x32, 0.0]).main
        );
        assert_eq!(Engines::discrete(1).direction, -1.0);
        assert_eq!(Engines::discrete(3).direction, 1.0);
        assert_eq!(Engines::discrete(2).main, 1.0);
    }
}
