//! What the Box2D envs share: scene-building helpers in the reference's terms (pybox2d's
//! fixture defaults), the unwrapped body angle Box2D 2.3 reports, and world snapshots packed
//! into the `Vec<f64>` that checkpoints hold.

use std::f64::consts::PI;

use box2d_rust::body::{body_get_rotation, create_body};
use box2d_rust::collision::Segment;
use box2d_rust::geometry::make_polygon;
use box2d_rust::hull::compute_hull;
use box2d_rust::id::{BodyId, ShapeId};
use box2d_rust::math_functions::{Vec2, make_rot};
use box2d_rust::recording::{world_restore, world_snapshot};
use box2d_rust::shape::{create_polygon_shape, create_segment_shape};
use box2d_rust::types::{BodyDef, BodyType, Filter, ShapeDef, default_body_def, default_shape_def};
use box2d_rust::world::{World, world_get_contact_events};

/// Box2D 2.3's sleep tolerance (b2_linearSleepTolerance). v3's default is 0.05 m/s; the
/// lander's episode ends when it sleeps, so the threshold matters.
pub(crate) const SLEEP_THRESHOLD: f32 = 0.01;
/// pybox2d's default fixture friction (v3's default is 0.6).
pub(crate) const DEFAULT_FRICTION: f32 = 0.2;
pub(crate) const CATEGORY_GROUND: u64 = 0x0001;

pub(crate) fn v2(x: f64, y: f64) -> Vec2 {
    Vec2 {
        x: x as f32,
        y: y as f32,
    }
}

/// A fixture definition as pybox2d's `fixtureDef` with contact events on.
pub(crate) fn shape_def(friction: f32, category: u64, mask: u64) -> ShapeDef {
    let mut d = default_shape_def();
    d.material.friction = friction;
    d.material.restitution = 0.0;
    d.filter = Filter {
        category_bits: category,
        mask_bits: mask,
        group_index: 0,
    };
    d.enable_contact_events = true;
    d
}

pub(crate) fn dynamic_body(x: f64, y: f64, angle: f64) -> BodyDef {
    BodyDef {
        type_: BodyType::Dynamic,
        position: v2(x, y),
        rotation: make_rot(angle as f32),
        sleep_threshold: SLEEP_THRESHOLD,
        ..default_body_def()
    }
}

/// A static body at the origin (terrain pieces give their vertices in world coordinates).
pub(crate) fn static_body(world: &mut World) -> BodyId {
    create_body(world, &default_body_def())
}

pub(crate) fn segment(
    world: &mut World,
    body: BodyId,
    def: &ShapeDef,
    a: (f64, f64),
    b: (f64, f64),
) -> ShapeId {
    create_segment_shape(
        world,
        body,
        def,
        &Segment {
            point1: v2(a.0, a.1),
            point2: v2(b.0, b.1),
        },
    )
}

/// A convex polygon from its vertices in any order (pybox2d's `polygonShape(vertices=...)`).
pub(crate) fn polygon(
    world: &mut World,
    body: BodyId,
    def: &ShapeDef,
    pts: &[(f64, f64)],
) -> ShapeId {
    let pts: Vec<Vec2> = pts.iter().map(|&(x, y)| v2(x, y)).collect();
    create_polygon_shape(world, body, def, &make_polygon(&compute_hull(&pts), 0.0))
}

/// The body's rotation as an angle in f64 (exact atan2, not v3's approximation).
pub(crate) fn angle_of(world: &World, body: BodyId) -> f64 {
    let r = body_get_rotation(world, body);
    f64::from(r.s).atan2(f64::from(r.c))
}

/// Advances an unwrapped angle (Box2D 2.3 integrates one; v3 keeps a rotation) to the
/// body's current rotation, assuming it turned less than half a turn since.
pub(crate) fn unwrap_angle(prev: f64, now_wrapped: f64) -> f64 {
    prev + ((now_wrapped - prev + PI).rem_euclid(2.0 * PI) - PI)
}

/// Appends Box2D's own world image (bodies, contacts with their warm-start impulses, sleep
/// timers) as its byte count and then 4 bytes per number, which f64 holds exactly.
pub(crate) fn push_world(v: &mut Vec<f64>, world: &World) {
    let bytes = world_snapshot(world);
    v.push(bytes.len() as f64);
    for chunk in bytes.chunks(4) {
        let mut b = [0u8; 4];
        b[..chunk.len()].copy_from_slice(chunk);
        v.push(f64::from(u32::from_le_bytes(b)));
    }
}

/// The inverse of [`push_world`] into a world whose bodies were created in the same order.
pub(crate) fn restore_world(world: &mut World, v: &[f64], what: &str) -> Result<(), String> {
    let Some((&n, words)) = v.split_first() else {
        return Err(format!("{what} snapshot: the world image is missing"));
    };
    let n = n as usize;
    if words.len() != n.div_ceil(4) {
        return Err(format!(
            "{what} snapshot: {n} bytes announced, {} words present",
            words.len()
        ));
    }
    let mut bytes = Vec::with_capacity(words.len() * 4);
    for &w in words {
        if !(0.0..=f64::from(u32::MAX)).contains(&w) || w.fract() != 0.0 {
            return Err(format!("{what} snapshot: {w} is not a 32-bit word"));
        }
        bytes.extend_from_slice(&(w as u32).to_le_bytes());
    }
    bytes.truncate(n);
    if world_restore(world, &bytes) {
        Ok(())
    } else {
        Err(format!("{what} snapshot: Box2D rejected the world image"))
    }
}

/// The references' ContactDetector over one step's contact events: `hull` touching anything
/// sets `game_over`; each of `feet` reports ground contact from begin-touch to end-touch.
pub(crate) fn read_contacts(
    world: &World,
    hull: ShapeId,
    feet: &[ShapeId; 2],
    game_over: &mut bool,
    ground_contact: &mut [bool; 2],
) {
    let events = world_get_contact_events(world);
    for ev in events.begin_events {
        for id in [ev.shape_id_a, ev.shape_id_b] {
            *game_over |= id == hull;
            for k in 0..2 {
                if id == feet[k] {
                    ground_contact[k] = true;
                }
            }
        }
    }
    for ev in events.end_events {
        for id in [ev.shape_id_a, ev.shape_id_b] {
            for k in 0..2 {
                if id == feet[k] {
                    ground_contact[k] = false;
                }
            }
        }
    }
}

/// The bookkeeping both references keep beside the world, for snapshots: foot contacts,
/// game over, the last shaping (NaN for none yet) and the unwrapped hull angle; 5 numbers.
pub(crate) fn push_bookkeeping(
    v: &mut Vec<f64>,
    ground_contact: [bool; 2],
    game_over: bool,
    prev_shaping: Option<f64>,
    angle: f64,
) {
    v.push(f64::from(u8::from(ground_contact[0])));
    v.push(f64::from(u8::from(ground_contact[1])));
    v.push(f64::from(u8::from(game_over)));
    v.push(prev_shaping.unwrap_or(f64::NAN));
    v.push(angle);
}

/// The inverse of [`push_bookkeeping`] (`r` holds at least its 5 numbers).
pub(crate) fn read_bookkeeping(r: &[f64]) -> ([bool; 2], bool, Option<f64>, f64) {
    (
        [r[0] != 0.0, r[1] != 0.0],
        r[2] != 0.0,
        (!r[3].is_nan()).then_some(r[3]),
        r[4],
    )
}
