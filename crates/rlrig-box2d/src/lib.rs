//! Box2D 2.3 as Gymnasium runs it: the C++ that box2d-py (pybox2d) compiles, built from its
//! source distribution (see `build.rs`), behind a small safe API shaped by what
//! LunarLander and BipedalWalker do with a world: static and dynamic bodies, edge, polygon
//! and box fixtures, revolute joints with a limit and a motor, forces, torques and
//! impulses, a contact listener that tracks the hull's and the feet's contacts, and the
//! lidar's ray cast.
//!
//! Bodies and joints are named by handles (indices into their scene); the C side checks
//! every index, so a handle out of its scene's range is an error, never a stray pointer.
//! Box2D's assertions (pybox2d's settings make them throw) become a panic naming the
//! condition: they mean a broken invariant (a NaN position, a degenerate shape), which the
//! envs' input checks keep out.

use std::ffi::{CStr, c_char, c_int};
use std::ptr::NonNull;
use std::sync::Once;

/// A body, by its index in its scene.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BodyHandle(u32);

/// A revolute joint, by its index in its scene.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JointHandle(u32);

/// What the contact listener needs to know of a body: the body whose touch ends the game
/// (the lander, the walker's hull) and the two feet whose ground contact is observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// The ground (terrain, obstacles); the only bodies the lidar sees.
    Ground,
    /// A body part that neither ends the game nor is a foot (the walker's upper legs).
    Part,
    Hull,
    /// Foot 0 or 1.
    Foot(u8),
}

impl Tag {
    /// The code the shim keeps in the body's user data (shim/scene.cpp).
    fn code(self) -> u8 {
        match self {
            Tag::Ground => 0,
            Tag::Part => 1,
            Tag::Hull => 2,
            Tag::Foot(k) => 3 + k.min(1),
        }
    }
}

/// pybox2d's `b2_maxPolygonVertices` (Box2D's own default is 8).
pub const MAX_POLYGON_VERTICES: usize = 16;

/// pybox2d's default fixture friction.
pub const DEFAULT_FRICTION: f32 = 0.2;
const CATEGORY_GROUND: u16 = 0x0001;
/// b2FixtureDef's default mask: collide with everything.
const MASK_ALL: u16 = 0xFFFF;

/// A fixture in pybox2d's `fixtureDef` terms (restitution 0 everywhere in both envs).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Fixture {
    pub density: f32,
    pub friction: f32,
    pub category: u16,
    pub mask: u16,
}

impl Fixture {
    /// A terrain fixture: category ground, colliding with everything.
    pub fn ground(friction: f32) -> Fixture {
        Fixture {
            density: 0.0,
            friction,
            category: CATEGORY_GROUND,
            mask: MASK_ALL,
        }
    }

    /// A body part that collides with the ground only.
    pub fn part(density: f32, friction: f32, category: u16) -> Fixture {
        Fixture {
            density,
            friction,
            category,
            mask: CATEGORY_GROUND,
        }
    }
}

/// What a step reads of a body.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BodyState {
    pub position: (f64, f64),
    /// As 2.3 integrates it (not wrapped).
    pub angle: f64,
    pub velocity: (f64, f64),
    pub angular_velocity: f64,
    pub awake: bool,
}

impl BodyState {
    /// `(x, y, angle)`, what rendering and snapshots keep.
    pub fn pose(&self) -> (f64, f64, f64) {
        (self.position.0, self.position.1, self.angle)
    }
}

/// A revolute joint as the references define it (`revoluteJointDef(bodyA=, bodyB=, ...)`,
/// motor and limit on; pybox2d sets the reference angle to bodyB's angle minus bodyA's).
#[derive(Clone, Copy, Debug)]
pub struct Revolute {
    pub anchor_a: (f64, f64),
    pub anchor_b: (f64, f64),
    pub limits: (f64, f64),
    pub max_torque: f64,
    pub speed: f64,
}

/// The shim's revolute definition (`rb2_revolute`).
#[repr(C)]
struct RevoluteDef {
    anchor_a: [f32; 2],
    anchor_b: [f32; 2],
    reference_angle: f32,
    lower: f32,
    upper: f32,
    max_torque: f32,
    speed: f32,
}

#[repr(C)]
struct RawScene {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn rb2_error() -> *const c_char;
    fn rb2_new(gx: f32, gy: f32) -> *mut RawScene;
    fn rb2_free(s: *mut RawScene);
    fn rb2_flags(s: *const RawScene) -> u8;
    fn rb2_step(s: *mut RawScene, dt: f32, vel: c_int, pos: c_int) -> c_int;
    fn rb2_body(s: *mut RawScene, dynamic: c_int, x: f32, y: f32, angle: f32, tag: u8) -> i64;
    fn rb2_edge(
        s: *mut RawScene,
        b: u32,
        f: *const Fixture,
        ax: f32,
        ay: f32,
        bx: f32,
        by: f32,
    ) -> c_int;
    fn rb2_polygon(s: *mut RawScene, b: u32, f: *const Fixture, xy: *const f32, n: c_int) -> c_int;
    fn rb2_box(s: *mut RawScene, b: u32, f: *const Fixture, hx: f32, hy: f32) -> c_int;
    fn rb2_revolute(s: *mut RawScene, a: u32, b: u32, j: *const RevoluteDef) -> i64;
    fn rb2_set_motor(s: *mut RawScene, j: u32, speed: f32, torque: f32) -> c_int;
    fn rb2_joint(s: *const RawScene, j: u32, out: *mut f32) -> c_int;
    fn rb2_body_state(s: *const RawScene, b: u32, out: *mut f32) -> c_int;
    fn rb2_force_to_center(s: *mut RawScene, b: u32, fx: f32, fy: f32) -> c_int;
    fn rb2_torque(s: *mut RawScene, b: u32, t: f32) -> c_int;
    fn rb2_linear_impulse(s: *mut RawScene, b: u32, ix: f32, iy: f32, px: f32, py: f32) -> c_int;
    fn rb2_ray_fraction(s: *const RawScene, x1: f32, y1: f32, x2: f32, y2: f32) -> f32;
}

const GAME_OVER: u8 = 1;
const FOOT: [u8; 2] = [2, 4];

/// One Box2D world (pybox2d's `b2World`) and its contact flags.
pub struct Scene {
    raw: NonNull<RawScene>,
}

// SAFETY: a `Scene` owns its C++ `rb2_scene` (the `b2World`, its contact listener and the
// body/joint tables) exclusively: nothing else holds the pointer, and the world's bodies,
// fixtures, joints, contacts and allocators are reached only through it. Moving a `Scene`
// to another thread moves all of that. Box2D's process-wide state is (1) the block
// allocator's size table, filled by the first `b2BlockAllocator` constructor and only read
// afterwards: `Scene::new` builds the first world inside a `Once`, so every other
// construction happens after it; (2) the profiling counters `b2_gjkCalls/Iters/MaxIters`
// and `b2_toiCalls/Iters/MaxIters/RootIters/MaxRootIters/Time/MaxTime`, which b2Distance
// and b2TimeOfImpact update with plain, unsynchronised increments from any world being
// stepped. They are statistics nothing in Box2D reads back and rlrig never reads; worlds
// stepped on two threads at once race only on them (a lost count), as in EnvPool and every
// threaded Box2D 2.x user. That race is inside Box2D's C++ and is the one place this
// argument rests on the machine (aligned word stores) rather than on the language. The
// shim's last assertion message is `thread_local`.
unsafe impl Send for Scene {}

// SAFETY: every method that writes the world takes `&mut self`. The `&self` ones only
// read: `body` and `joint` read a body's or joint's fields, `game_over` and `feet` the
// listener's flag byte, and `ray_fraction` calls `b2World::RayCast` (const: it walks the
// broad-phase tree and reads fixtures, writing only its own callback on the caller's
// stack). So shared references across threads only read.
unsafe impl Sync for Scene {}

static BLOCK_TABLE: Once = Once::new();

fn f(x: f64) -> f32 {
    x as f32
}

impl Scene {
    /// A world with gravity `(0, gravity_y)` and the contact listener.
    pub fn new(gravity_y: f64) -> Scene {
        BLOCK_TABLE.call_once(|| drop(Scene::raw_new(0.0)));
        Scene::raw_new(gravity_y)
    }

    fn raw_new(gravity_y: f64) -> Scene {
        // SAFETY: `rb2_new` takes two floats and returns an owned pointer or null.
        let raw = unsafe { rb2_new(0.0, f(gravity_y)) };
        let raw = NonNull::new(raw).unwrap_or_else(|| fail("b2World", -1));
        Scene { raw }
    }

    fn ptr(&mut self) -> *mut RawScene {
        self.raw.as_ptr()
    }

    /// The hull has touched something since the world was built.
    pub fn game_over(&self) -> bool {
        self.flags() & GAME_OVER != 0
    }

    /// Each foot touches the ground now (from its last begin-contact to its end-contact).
    pub fn feet(&self) -> [bool; 2] {
        let fl = self.flags();
        [fl & FOOT[0] != 0, fl & FOOT[1] != 0]
    }

    fn flags(&self) -> u8 {
        // SAFETY: `raw` is a live scene owned by `self`; `rb2_flags` reads one byte.
        unsafe { rb2_flags(self.raw.as_ptr()) }
    }

    /// `world.Step(dt, velocity_iterations, position_iterations)`.
    pub fn step(&mut self, dt: f64, velocity_iterations: i32, position_iterations: i32) {
        // SAFETY: a live scene owned by `self`, borrowed mutably for the call.
        let rc = unsafe { rb2_step(self.ptr(), f(dt), velocity_iterations, position_iterations) };
        check("b2World::Step", rc.into());
    }

    fn create_body(&mut self, dynamic: bool, x: f64, y: f64, angle: f64, tag: Tag) -> BodyHandle {
        // SAFETY: a live scene owned by `self`; plain values in, an index or -1 out.
        let i = unsafe { rb2_body(self.ptr(), dynamic.into(), f(x), f(y), f(angle), tag.code()) };
        BodyHandle(check("b2World::CreateBody", i))
    }

    /// A static body at the origin (the terrain, or the lander's moon).
    pub fn static_body(&mut self) -> BodyHandle {
        self.create_body(false, 0.0, 0.0, 0.0, Tag::Ground)
    }

    /// `CreateDynamicBody(position=, angle=)`.
    pub fn dynamic_body(&mut self, x: f64, y: f64, angle: f64, tag: Tag) -> BodyHandle {
        self.create_body(true, x, y, angle, tag)
    }

    pub fn edge(&mut self, body: BodyHandle, fx: Fixture, a: (f64, f64), b: (f64, f64)) {
        let s = self.ptr();
        // SAFETY: a live scene owned by `self`; `&fx` is valid for the call; the index is
        // checked on the C side.
        let rc = unsafe { rb2_edge(s, body.0, &fx, f(a.0), f(a.1), f(b.0), f(b.1)) };
        check("edge fixture", rc.into());
    }

    /// `polygonShape(vertices=...)` (Box2D computes the convex hull).
    pub fn polygon(&mut self, body: BodyHandle, fx: Fixture, pts: &[(f64, f64)]) {
        let mut xy = [0f32; 2 * MAX_POLYGON_VERTICES];
        for (k, &(x, y)) in pts.iter().take(MAX_POLYGON_VERTICES).enumerate() {
            xy[2 * k] = f(x);
            xy[2 * k + 1] = f(y);
        }
        let n = c_int::try_from(pts.len()).unwrap_or(c_int::MAX);
        let s = self.ptr();
        // SAFETY: a live scene owned by `self`; the C side reads `2 n` floats of `xy` only
        // after checking `3 <= n <= b2_maxPolygonVertices`, which the shim asserts at compile
        // time to be `MAX_POLYGON_VERTICES`, the vertices `xy` holds.
        let rc = unsafe { rb2_polygon(s, body.0, &fx, xy.as_ptr(), n) };
        check("polygon fixture", rc.into());
    }

    /// `polygonShape(box=(hx, hy))`: half-widths.
    pub fn boxed(&mut self, body: BodyHandle, fx: Fixture, hx: f64, hy: f64) {
        let s = self.ptr();
        // SAFETY: as for `edge`.
        let rc = unsafe { rb2_box(s, body.0, &fx, f(hx), f(hy)) };
        check("box fixture", rc.into());
    }

    pub fn revolute(&mut self, a: BodyHandle, b: BodyHandle, j: &Revolute) -> JointHandle {
        // pybox2d: referenceAngle = bodyB.angle - bodyA.angle (Python floats of float32s).
        let def = RevoluteDef {
            anchor_a: [f(j.anchor_a.0), f(j.anchor_a.1)],
            anchor_b: [f(j.anchor_b.0), f(j.anchor_b.1)],
            reference_angle: f(self.body(b).angle - self.body(a).angle),
            lower: f(j.limits.0),
            upper: f(j.limits.1),
            max_torque: f(j.max_torque),
            speed: f(j.speed),
        };
        let s = self.ptr();
        // SAFETY: a live scene owned by `self`; `&def` is valid for the call; both body
        // indices are checked on the C side.
        let i = unsafe { rb2_revolute(s, a.0, b.0, &def) };
        JointHandle(check("b2World::CreateJoint", i))
    }

    /// `joint.motorSpeed = s` (wakes both bodies) and `joint.maxMotorTorque = t`.
    pub fn set_motor(&mut self, j: JointHandle, speed: f32, torque: f32) {
        let s = self.ptr();
        // SAFETY: a live scene owned by `self`; the index is checked on the C side.
        let rc = unsafe { rb2_set_motor(s, j.0, speed, torque) };
        check("joint motor", rc.into());
    }

    /// `(joint.angle, joint.speed)`.
    pub fn joint(&self, j: JointHandle) -> (f64, f64) {
        let mut out = [0f32; 2];
        // SAFETY: a live scene owned by `self`, only read (`rb2_joint` takes it const);
        // `out` has the two floats the C side writes.
        let rc = unsafe { rb2_joint(self.raw.as_ptr(), j.0, out.as_mut_ptr()) };
        check("joint state", rc.into());
        (f64::from(out[0]), f64::from(out[1]))
    }

    /// The body's state as Box2D holds it (float32, widened): one call for what a step
    /// reads of it.
    pub fn body(&self, b: BodyHandle) -> BodyState {
        let mut o = [0f32; 7];
        // SAFETY: a live scene owned by `self`, only read (`rb2_body_state` takes it
        // const); `o` has the seven floats the C side writes.
        let rc = unsafe { rb2_body_state(self.raw.as_ptr(), b.0, o.as_mut_ptr()) };
        check("body state", rc.into());
        let w = |i: usize| f64::from(o[i]);
        BodyState {
            position: (w(0), w(1)),
            angle: w(2),
            velocity: (w(3), w(4)),
            angular_velocity: w(5),
            awake: o[6] != 0.0,
        }
    }

    pub fn apply_force_to_center(&mut self, b: BodyHandle, fc: (f64, f64)) {
        let s = self.ptr();
        // SAFETY: a live scene owned by `self`; the index is checked on the C side.
        let rc = unsafe { rb2_force_to_center(s, b.0, f(fc.0), f(fc.1)) };
        check("force", rc.into());
    }

    pub fn apply_torque(&mut self, b: BodyHandle, t: f64) {
        let s = self.ptr();
        // SAFETY: as for `apply_force_to_center`.
        let rc = unsafe { rb2_torque(s, b.0, f(t)) };
        check("torque", rc.into());
    }

    pub fn apply_linear_impulse(&mut self, b: BodyHandle, i: (f64, f64), at: (f64, f64)) {
        let s = self.ptr();
        // SAFETY: as for `apply_force_to_center`.
        let rc = unsafe { rb2_linear_impulse(s, b.0, f(i.0), f(i.1), f(at.0), f(at.1)) };
        check("impulse", rc.into());
    }

    /// The walker's lidar: `world.RayCast` from `p1` to `p2` with a callback that ignores
    /// bodies not tagged ground and clips the ray at each hit, so the fraction left is the
    /// closest ground hit's (1 for none).
    pub fn ray_fraction(&self, p1: (f64, f64), p2: (f64, f64)) -> f64 {
        // SAFETY: a live scene owned by `self`; `RayCast` is const on the world.
        let fr = unsafe { rb2_ray_fraction(self.raw.as_ptr(), f(p1.0), f(p1.1), f(p2.0), f(p2.1)) };
        if fr < 0.0 {
            fail("b2World::RayCast", -1);
        }
        f64::from(fr)
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `rb2_new`, is owned by `self` and freed once, here.
        unsafe { rb2_free(self.raw.as_ptr()) }
    }
}

/// A shim result: the index it returned, or a panic naming the failed Box2D condition.
fn check(what: &str, rc: i64) -> u32 {
    u32::try_from(rc).unwrap_or_else(|_| fail(what, rc))
}

fn fail(what: &str, rc: i64) -> ! {
    // SAFETY: `rb2_error` returns a pointer to a static, NUL-terminated C string (a
    // Box2D assertion's stringified condition or one of the shim's literals).
    let why = unsafe { CStr::from_ptr(rb2_error()) }.to_string_lossy();
    panic!("Box2D 2.3: {what} failed ({rc}): {why}")
}
