//! The safe API's promises: handles are checked, Box2D's assertions surface as panics that
//! name the condition, and the contact flags follow the bodies' contacts.

use rlrig_box2d::{Fixture, Revolute, Scene, Tag};

/// A ground edge from x = -10 to 10 at y = 0, and a 1x1 box of `tag` dropped from `y`.
fn drop_box(tag: Tag, y: f64) -> (Scene, rlrig_box2d::BodyHandle) {
    let mut s = Scene::new(-10.0);
    let ground = s.static_body();
    s.edge(ground, Fixture::ground(0.5), (-10.0, 0.0), (10.0, 0.0));
    let b = s.dynamic_body(0.0, y, 0.0, tag);
    s.boxed(b, Fixture::part(1.0, 0.5, 0x0020), 0.5, 0.5);
    (s, b)
}

#[test]
fn a_dropped_box_lands_touches_the_ground_and_falls_asleep() {
    let (mut s, b) = drop_box(Tag::Foot(1), 2.0);
    assert_eq!(s.feet(), [false, false]);
    let mut landed = None;
    for t in 0..600 {
        s.step(1.0 / 50.0, 8, 3);
        if landed.is_none() && s.feet()[1] {
            landed = Some(t);
        }
        if !s.body(b).awake {
            break;
        }
    }
    // Free fall from 1.5 m above contact: ~0.55 s, ~27 steps at 50 Hz.
    let t = landed.expect("the foot never touched the ground");
    assert!((20..40).contains(&t), "landed at step {t}");
    let rest = s.body(b);
    assert!(!rest.awake, "still awake after 600 steps");
    let (x, y) = rest.position;
    assert!(
        x.abs() < 1e-3 && (y - 0.5).abs() < 0.02,
        "rests at ({x}, {y})"
    );
    assert_eq!(s.feet(), [false, true]);
    assert!(!s.game_over());
}

#[test]
fn a_hull_touching_anything_is_game_over() {
    let (mut s, _) = drop_box(Tag::Hull, 1.0);
    for _ in 0..60 {
        s.step(1.0 / 50.0, 8, 3);
    }
    assert!(s.game_over());
}

#[test]
fn the_lidar_sees_ground_only_and_the_closest_hit() {
    let (s, _) = drop_box(Tag::Part, 3.0);
    // Straight down from y = 5 through the box (not ground: ignored) to the edge at y = 0.
    let f = s.ray_fraction((0.0, 5.0), (0.0, -5.0));
    assert!((f - 0.5).abs() < 1e-6, "fraction {f}");
    assert_eq!(s.ray_fraction((0.0, 5.0), (0.0, 1.0)), 1.0);
}

#[test]
fn a_motor_turns_its_joint() {
    let mut s = Scene::new(0.0);
    let a = s.dynamic_body(0.0, 0.0, 0.0, Tag::Part);
    s.boxed(a, Fixture::part(1.0, 0.2, 0x0020), 0.5, 0.5);
    let b = s.dynamic_body(1.0, 0.0, 0.0, Tag::Part);
    s.boxed(b, Fixture::part(1.0, 0.2, 0x0020), 0.5, 0.5);
    let j = s.revolute(
        a,
        b,
        &Revolute {
            anchor_a: (0.5, 0.0),
            anchor_b: (-0.5, 0.0),
            limits: (-0.8, 0.8),
            max_torque: 100.0,
            speed: 0.0,
        },
    );
    s.set_motor(j, 2.0, 100.0);
    for _ in 0..10 {
        s.step(1.0 / 50.0, 8, 3);
    }
    let (angle, speed) = s.joint(j);
    assert!(angle > 0.1 && speed > 0.0, "angle {angle}, speed {speed}");
    for _ in 0..100 {
        s.step(1.0 / 50.0, 8, 3);
    }
    let (angle, _) = s.joint(j);
    assert!(angle <= 0.8 + 0.05, "past the limit: {angle}");
}

#[test]
#[should_panic(expected = "no such body")]
fn a_handle_out_of_the_scenes_range_is_refused() {
    let (_, b) = drop_box(Tag::Part, 2.0);
    let mut empty = Scene::new(-10.0);
    empty.apply_torque(b, 1.0);
}

#[test]
#[should_panic(expected = "r.LengthSquared() > 0.0f")]
fn a_box2d_assertion_is_a_panic_naming_its_condition() {
    // b2DynamicTree::RayCast asserts a ray of non-zero length (pybox2d's b2Assert throws;
    // the shim catches it at its C boundary).
    let (s, _) = drop_box(Tag::Part, 2.0);
    s.ray_fraction((1.0, 1.0), (1.0, 1.0));
}
