//! What the Box2D envs share: Box2D 2.3, the engine Gymnasium runs through pybox2d, driven
//! in the reference's terms (pybox2d's fixture defaults, its joint definitions, its contact
//! listener and ray casts), and the replay records that checkpoints hold.
//!
//! # Which Box2D
//! Gymnasium's LunarLander and BipedalWalker run Box2D 2.3.0 as vendored by pybox2d 2.3.10,
//! stepped with 180 velocity and 60 position iterations. The `wrapped2d` crate binds Box2D
//! 2.3.1's C++ (built by its build script with CMake). 2.3.0 and 2.3.1 solve contacts, joints,
//! islands and sleep with the same code; what differs and could touch these envs is the
//! rounding of `b2Sweep::Advance` (continuous collision's time of impact), the polygon-polygon
//! separation search (only BipedalWalkerHardcore's obstacles are polygons that the walker
//! touches) and linear damping's formula (no body here is damped). The golden tests measure
//! how close that is (`tests/box2d_golden.rs`). Earlier rlrig ran a Rust port of Box2D v3, a
//! different solver that changed the tasks (issue 25: random-policy walker episodes 485 steps
//! long against Gymnasium's 689); it is gone.
//!
//! # World lifetime
//! Each reset builds a new world, as Gymnasium's LunarLander does. Gymnasium's BipedalWalker
//! keeps one world and destroys the bodies at reset; its later episodes then allocate
//! broad-phase proxies from that world's free list, which orders contacts differently and
//! changes the last bits of the solution. The first episode after `make` is the same on both
//! sides; the golden tests compare those.

use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicU8, Ordering};

use wrapped2d::b2;
use wrapped2d::dynamics::world::callbacks::ContactAccess;
use wrapped2d::user_data::{UserData, UserDataTypes};

pub(crate) use wrapped2d::b2::{BodyHandle, JointHandle};

/// pybox2d's default fixture friction.
pub(crate) const DEFAULT_FRICTION: f32 = 0.2;
const CATEGORY_GROUND: u16 = 0x0001;
/// b2FixtureDef's default mask: collide with everything.
const MASK_ALL: u16 = 0xFFFF;
/// Both references step `world.Step(1.0 / FPS, 6 * 30, 2 * 30)`.
const VELOCITY_ITERATIONS: i32 = 6 * 30;
const POSITION_ITERATIONS: i32 = 2 * 30;

/// What the contact listener needs to know of a body: the body whose touch ends the game
/// (the lander, the walker's hull) and the two feet whose ground contact is observed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    /// The ground (terrain, obstacles).
    Ground,
    /// A body part that neither ends the game nor is a foot (the walker's upper legs).
    Part,
    Hull,
    Foot(u8),
}

pub(crate) struct Tags;

impl UserDataTypes for Tags {
    type BodyData = Tag;
    type JointData = ();
    type FixtureData = ();
}

type World = b2::World<Tags>;

const GAME_OVER: u8 = 1;
const FOOT: [u8; 2] = [2, 4];

/// The references' `ContactDetector`: a begin-contact of the hull sets game over; a foot's
/// ground contact is on from its begin-contact to its end-contact.
struct Detector(Arc<AtomicU8>);

impl Detector {
    fn tags(c: &ContactAccess<Tags>) -> [Tag; 2] {
        [*c.body_a.user_data(), *c.body_b.user_data()]
    }
}

impl b2::ContactListener<Tags> for Detector {
    fn begin_contact(&mut self, c: ContactAccess<Tags>) {
        for tag in Self::tags(&c) {
            match tag {
                Tag::Hull => self.0.fetch_or(GAME_OVER, Ordering::Relaxed),
                Tag::Foot(k) => self.0.fetch_or(FOOT[usize::from(k)], Ordering::Relaxed),
                Tag::Ground | Tag::Part => 0,
            };
        }
    }

    fn end_contact(&mut self, c: ContactAccess<Tags>) {
        for tag in Self::tags(&c) {
            if let Tag::Foot(k) = tag {
                self.0.fetch_and(!FOOT[usize::from(k)], Ordering::Relaxed);
            }
        }
    }
}

/// A fixture in pybox2d's `fixtureDef` terms (restitution 0 everywhere in both envs).
#[derive(Clone, Copy)]
pub(crate) struct Fixture {
    pub density: f32,
    pub friction: f32,
    pub category: u16,
    pub mask: u16,
}

impl Fixture {
    /// A terrain fixture: category ground, colliding with everything.
    pub(crate) fn ground(friction: f32) -> Fixture {
        Fixture {
            density: 0.0,
            friction,
            category: CATEGORY_GROUND,
            mask: MASK_ALL,
        }
    }

    /// A body part that collides with the ground only.
    pub(crate) fn part(density: f32, friction: f32, category: u16) -> Fixture {
        Fixture {
            density,
            friction,
            category,
            mask: CATEGORY_GROUND,
        }
    }

    fn def(&self) -> b2::FixtureDef {
        let mut d = b2::FixtureDef::new();
        d.density = self.density;
        d.friction = self.friction;
        d.restitution = 0.0;
        d.filter.category_bits = self.category;
        d.filter.mask_bits = self.mask;
        d
    }
}

/// A revolute joint as the references define it (`revoluteJointDef(bodyA=, bodyB=, ...)`,
/// motor and limit on; pybox2d sets the reference angle to bodyB's angle minus bodyA's).
pub(crate) struct Revolute {
    pub anchor_a: (f64, f64),
    pub anchor_b: (f64, f64),
    pub limits: (f64, f64),
    pub max_torque: f64,
    pub speed: f64,
}

fn v2(x: f64, y: f64) -> b2::Vec2 {
    b2::Vec2 {
        x: x as f32,
        y: y as f32,
    }
}

/// One Box2D 2.3 world and its contact flags.
pub(crate) struct Scene {
    world: World,
    flags: Arc<AtomicU8>,
}

// SAFETY: `Scene` is `!Send` only because `wrapped2d::b2::World` holds raw pointers: to its
// C++ `b2World` and, through it, to the bodies, fixtures, joints, contacts and allocators
// that world owns and that no other world reaches. wrapped2d's handle maps (`RefCell`s, no
// `Rc`) and the boxed contact listener are owned by the `World` too, and the listener's
// only shared part is an `Arc<AtomicU8>`. So moving a `Scene` to another thread moves
// everything its world touches (for sharing `&Scene`, see the `Sync` argument below).
// Box2D's process-wide state is (1) the block allocator's size table, filled by the first
// `b2BlockAllocator` constructor and only read afterwards: `Scene::new` builds the first
// world inside a `Once`, so every other construction happens after it; (2) the profiling
// counters `b2_gjkCalls/Iters/MaxIters` and `b2_toiCalls/Iters/MaxIters/RootIters/
// MaxRootIters/Time/MaxTime`, which b2Distance and b2TimeOfImpact update with plain,
// unsynchronised increments from any world being stepped. They are statistics that nothing
// in Box2D reads back and that rlrig never reads; worlds stepped on two threads at once
// race only on them (a lost count), exactly as in EnvPool and every threaded Box2D 2.x user.
// That race is inside Box2D's C++ and is the one place this argument rests on the machine
// (aligned word stores) rather than on the language.
unsafe impl Send for Scene {}

// SAFETY: every method of `Scene` takes `&mut self` and its fields are private, so a shared
// `&Scene` gives access to nothing (wrapped2d's `RefCell` borrow flags, which `&World`
// methods write, are never reached through one); sharing references across threads can
// therefore not race. (`Env::State` must be `Sync`; states are read through `&` only for
// their cached observations and poses.)
unsafe impl Sync for Scene {}

static BLOCK_TABLE: Once = Once::new();

impl Scene {
    pub(crate) fn new(gravity_y: f64) -> Scene {
        BLOCK_TABLE.call_once(|| drop(World::new(&v2(0.0, 0.0))));
        let mut world = World::new(&v2(0.0, gravity_y));
        let flags = Arc::new(AtomicU8::new(0));
        world.set_contact_listener(Box::new(Detector(flags.clone())));
        Scene { world, flags }
    }

    /// The hull has touched something since the world was built.
    pub(crate) fn game_over(&mut self) -> bool {
        self.flags.load(Ordering::Relaxed) & GAME_OVER != 0
    }

    /// Each foot touches the ground now (from its last begin-contact to its end-contact).
    pub(crate) fn feet(&mut self) -> [bool; 2] {
        let f = self.flags.load(Ordering::Relaxed);
        [f & FOOT[0] != 0, f & FOOT[1] != 0]
    }

    /// `world.Step(1.0 / FPS, 6 * 30, 2 * 30)`.
    pub(crate) fn step(&mut self, fps: f64) {
        self.world
            .step((1.0 / fps) as f32, VELOCITY_ITERATIONS, POSITION_ITERATIONS);
    }

    pub(crate) fn static_body(&mut self) -> BodyHandle {
        self.world
            .create_body_with(&b2::BodyDef::new(), Tag::Ground)
    }

    /// `CreateDynamicBody(position=, angle=)`.
    pub(crate) fn dynamic_body(&mut self, x: f64, y: f64, angle: f64, tag: Tag) -> BodyHandle {
        let mut d = b2::BodyDef::new();
        d.body_type = b2::BodyType::Dynamic;
        d.position = v2(x, y);
        d.angle = angle as f32;
        self.world.create_body_with(&d, tag)
    }

    pub(crate) fn edge(&mut self, body: BodyHandle, f: Fixture, a: (f64, f64), b: (f64, f64)) {
        let shape = b2::EdgeShape::new_with(&v2(a.0, a.1), &v2(b.0, b.1));
        self.world
            .body_mut(body)
            .create_fixture(&shape, &mut f.def());
    }

    /// `polygonShape(vertices=...)` (Box2D computes the convex hull).
    pub(crate) fn polygon(&mut self, body: BodyHandle, f: Fixture, pts: &[(f64, f64)]) {
        let pts: Vec<b2::Vec2> = pts.iter().map(|&(x, y)| v2(x, y)).collect();
        let shape = b2::PolygonShape::new_with(&pts);
        self.world
            .body_mut(body)
            .create_fixture(&shape, &mut f.def());
    }

    /// `polygonShape(box=(hx, hy))`: half-widths.
    pub(crate) fn boxed(&mut self, body: BodyHandle, f: Fixture, hx: f64, hy: f64) {
        let shape = b2::PolygonShape::new_box(hx as f32, hy as f32);
        self.world
            .body_mut(body)
            .create_fixture(&shape, &mut f.def());
    }

    pub(crate) fn revolute(&mut self, a: BodyHandle, b: BodyHandle, j: &Revolute) -> JointHandle {
        let mut d = b2::RevoluteJointDef::new(a, b);
        d.local_anchor_a = v2(j.anchor_a.0, j.anchor_a.1);
        d.local_anchor_b = v2(j.anchor_b.0, j.anchor_b.1);
        // pybox2d: referenceAngle = bodyB.angle - bodyA.angle (Python floats of float32s).
        d.reference_angle = (self.angle(b) - self.angle(a)) as f32;
        d.enable_limit = true;
        d.lower_angle = j.limits.0 as f32;
        d.upper_angle = j.limits.1 as f32;
        d.enable_motor = true;
        d.max_motor_torque = j.max_torque as f32;
        d.motor_speed = j.speed as f32;
        self.world.create_joint(&d)
    }

    /// `joint.motorSpeed = s` (wakes both bodies) and `joint.maxMotorTorque = t`.
    pub(crate) fn set_motor(&mut self, j: JointHandle, speed: f32, torque: f32) {
        if let b2::UnknownJoint::Revolute(r) = &mut **self.world.joint_mut(j) {
            r.set_motor_speed(speed);
            r.set_max_motor_torque(torque);
        }
    }

    /// `(joint.angle, joint.speed)`.
    pub(crate) fn joint(&mut self, j: JointHandle) -> (f64, f64) {
        match &**self.world.joint(j) {
            b2::UnknownJoint::Revolute(r) => {
                (f64::from(r.joint_angle()), f64::from(r.joint_speed()))
            }
            _ => (0.0, 0.0),
        }
    }

    pub(crate) fn position(&mut self, b: BodyHandle) -> (f64, f64) {
        let p = *self.world.body(b).position();
        (f64::from(p.x), f64::from(p.y))
    }

    /// The body's angle as 2.3 integrates it (not wrapped).
    pub(crate) fn angle(&mut self, b: BodyHandle) -> f64 {
        f64::from(self.world.body(b).angle())
    }

    pub(crate) fn velocity(&mut self, b: BodyHandle) -> (f64, f64) {
        let v = *self.world.body(b).linear_velocity();
        (f64::from(v.x), f64::from(v.y))
    }

    pub(crate) fn angular_velocity(&mut self, b: BodyHandle) -> f64 {
        f64::from(self.world.body(b).angular_velocity())
    }

    pub(crate) fn is_awake(&mut self, b: BodyHandle) -> bool {
        self.world.body(b).is_awake()
    }

    pub(crate) fn apply_force_to_center(&mut self, b: BodyHandle, f: (f64, f64)) {
        self.world
            .body_mut(b)
            .apply_force_to_center(&v2(f.0, f.1), true);
    }

    pub(crate) fn apply_torque(&mut self, b: BodyHandle, t: f64) {
        self.world.body_mut(b).apply_torque(t as f32, true);
    }

    pub(crate) fn apply_linear_impulse(&mut self, b: BodyHandle, i: (f64, f64), at: (f64, f64)) {
        self.world
            .body_mut(b)
            .apply_linear_impulse(&v2(i.0, i.1), &v2(at.0, at.1), true);
    }

    /// The walker's lidar: `world.RayCast` from `p1` to `p2` with a callback that ignores
    /// fixtures outside the ground category and clips the ray at each hit, so the fraction
    /// left is the closest ground hit's (1 for none).
    pub(crate) fn ray_fraction(&mut self, p1: (f64, f64), p2: (f64, f64)) -> f64 {
        let mut fraction = 1.0f32;
        let world = &self.world;
        // Every body that is not ground carries a tag other than `Other` (the references'
        // parts are category 0x20, the ground 0x01), so the tag stands for the category.
        let mut cb = |b: BodyHandle, _: b2::FixtureHandle, _: &b2::Vec2, _: &b2::Vec2, f: f32| {
            if *world.body(b).user_data() != Tag::Ground {
                return -1.0;
            }
            fraction = f;
            f
        };
        world.ray_cast(&mut cb, &v2(p1.0, p1.1), &v2(p2.0, p2.1));
        f64::from(fraction)
    }
}

/// The end of a snapshot's restore: the replayed observation must be the recorded one, bit
/// for bit (else the snapshot was written by a build whose physics differs).
pub(crate) fn check_replay(env: &str, steps: f64, got: &[f64], want: &[f64]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    Err(format!(
        "{env} snapshot: replaying its {steps} steps gives the observation {got:?}, not the recorded {want:?} (written by a build whose physics differs?)"
    ))
}
