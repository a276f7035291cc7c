// A C interface to one Box2D world as Gymnasium's LunarLander and BipedalWalker drive it
// through pybox2d: bodies, fixtures, revolute joints with motors, a contact listener that
// tracks the hull's and the feet's contacts, and the lidar's ray cast. Bodies and joints
// are named by their index in the scene; every index is checked here, so no argument the
// Rust side passes can reach outside the scene. Box2D's b2Assert throws (pybox2d's
// settings); every entry point catches it and returns -1, the condition kept for
// rb2_error().

#include <Box2D/Box2D.h>

#include <cstdint>
#include <vector>

// rlrig_box2d::MAX_POLYGON_VERTICES sizes the buffer rb2_polygon reads.
static_assert(b2_maxPolygonVertices == 16, "pybox2d's settings: 16 polygon vertices");

namespace {

thread_local const char* last_error = "";

// A body's tag as the Rust side defines it (rlrig_box2d::Tag): 0 ground, 1 part, 2 hull,
// 3 + k foot k.
enum : std::uintptr_t { GROUND = 0, PART = 1, HULL = 2, FOOT0 = 3 };
constexpr std::uint8_t GAME_OVER = 1;
constexpr std::uint8_t FOOT_BIT[2] = {2, 4};

std::uintptr_t tag_of(b2Fixture* f) {
    return reinterpret_cast<std::uintptr_t>(f->GetBody()->GetUserData());
}

// The references' ContactDetector: a begin-contact of the hull sets game over; a foot's
// ground contact is on from its begin-contact to its end-contact.
struct Detector : b2ContactListener {
    std::uint8_t flags = 0;
    void BeginContact(b2Contact* c) override {
        for (std::uintptr_t t : {tag_of(c->GetFixtureA()), tag_of(c->GetFixtureB())}) {
            if (t == HULL) flags |= GAME_OVER;
            if (t == FOOT0 || t == FOOT0 + 1) flags |= FOOT_BIT[t - FOOT0];
        }
    }
    void EndContact(b2Contact* c) override {
        for (std::uintptr_t t : {tag_of(c->GetFixtureA()), tag_of(c->GetFixtureB())}) {
            if (t == FOOT0 || t == FOOT0 + 1) flags &= static_cast<std::uint8_t>(~FOOT_BIT[t - FOOT0]);
        }
    }
};

// The walker's lidar callback: fixtures of bodies that are not ground are ignored (-1),
// each ground hit clips the ray, so the fraction left is the closest hit's.
struct Lidar : b2RayCastCallback {
    float32 fraction = 1.0f;
    float32 ReportFixture(b2Fixture* f, const b2Vec2&, const b2Vec2&, float32 frac) override {
        if (tag_of(f) != GROUND) return -1.0f;
        fraction = frac;
        return frac;
    }
};

}  // namespace

void rlrig_b2_assert_failed(const char* condition) { last_error = condition; }

struct rb2_scene {
    b2World world;
    Detector detector;
    std::vector<b2Body*> bodies;
    std::vector<b2RevoluteJoint*> joints;
    explicit rb2_scene(const b2Vec2& g) : world(g) { world.SetContactListener(&detector); }
};

// A fixture in pybox2d's fixtureDef terms (restitution 0 in both envs).
struct rb2_fixture {
    float density, friction;
    std::uint16_t category, mask;
};

struct rb2_revolute {
    float anchor_a[2], anchor_b[2], reference_angle, lower, upper, max_torque, speed;
};

#define GUARD_BEGIN try {
#define GUARD_END                          \
    }                                      \
    catch (const b2AssertException&) {     \
        return -1;                         \
    }                                      \
    catch (...) {                          \
        last_error = "a C++ exception";    \
        return -1;                         \
    }

namespace {
// The body or joint of an index, or null with the error set.
b2Body* body_at(const rb2_scene* s, std::uint32_t b) {
    if (b < s->bodies.size()) return s->bodies[b];
    last_error = "no such body in this scene";
    return nullptr;
}
b2RevoluteJoint* joint_at(const rb2_scene* s, std::uint32_t j) {
    if (j < s->joints.size()) return s->joints[j];
    last_error = "no such joint in this scene";
    return nullptr;
}
int add_fixture(rb2_scene* s, std::uint32_t b, const rb2_fixture* f, const b2Shape& shape) {
    b2Body* body = body_at(s, b);
    if (!body) return -1;
    b2FixtureDef d;
    d.shape = &shape;
    d.density = f->density;
    d.friction = f->friction;
    d.restitution = 0.0f;
    d.filter.categoryBits = f->category;
    d.filter.maskBits = f->mask;
    body->CreateFixture(&d);
    return 0;
}
}  // namespace

extern "C" {

const char* rb2_error() { return last_error; }

rb2_scene* rb2_new(float gx, float gy) {
    try {
        return new rb2_scene(b2Vec2(gx, gy));
    } catch (...) {
        last_error = "allocating a world";
        return nullptr;
    }
}

void rb2_free(rb2_scene* s) { delete s; }

std::uint8_t rb2_flags(const rb2_scene* s) { return s->detector.flags; }

int rb2_step(rb2_scene* s, float dt, int velocity_iterations, int position_iterations) {
    GUARD_BEGIN
    s->world.Step(dt, velocity_iterations, position_iterations);
    return 0;
    GUARD_END
}

// A static (dynamic = 0) or dynamic body; returns its index.
std::int64_t rb2_body(rb2_scene* s, int dynamic, float x, float y, float angle, std::uint8_t tag) {
    GUARD_BEGIN
    b2BodyDef d;
    if (dynamic) d.type = b2_dynamicBody;
    d.position.Set(x, y);
    d.angle = angle;
    d.userData = reinterpret_cast<void*>(static_cast<std::uintptr_t>(tag));
    s->bodies.push_back(s->world.CreateBody(&d));
    return static_cast<std::int64_t>(s->bodies.size() - 1);
    GUARD_END
}

int rb2_edge(rb2_scene* s, std::uint32_t b, const rb2_fixture* f, float ax, float ay, float bx, float by) {
    GUARD_BEGIN
    b2EdgeShape e;
    e.Set(b2Vec2(ax, ay), b2Vec2(bx, by));
    return add_fixture(s, b, f, e);
    GUARD_END
}

// `polygonShape(vertices=...)`: Box2D computes the convex hull of `n` (x, y) pairs.
int rb2_polygon(rb2_scene* s, std::uint32_t b, const rb2_fixture* f, const float* xy, int n) {
    GUARD_BEGIN
    if (n < 3 || n > b2_maxPolygonVertices) {
        last_error = "a polygon needs 3 to b2_maxPolygonVertices vertices";
        return -1;
    }
    b2Vec2 pts[b2_maxPolygonVertices];
    for (int i = 0; i < n; ++i) pts[i].Set(xy[2 * i], xy[2 * i + 1]);
    b2PolygonShape p;
    p.Set(pts, n);
    return add_fixture(s, b, f, p);
    GUARD_END
}

int rb2_box(rb2_scene* s, std::uint32_t b, const rb2_fixture* f, float hx, float hy) {
    GUARD_BEGIN
    b2PolygonShape p;
    p.SetAsBox(hx, hy);
    return add_fixture(s, b, f, p);
    GUARD_END
}

// A revolute joint with its limit and motor on; returns its index.
std::int64_t rb2_revolute(rb2_scene* s, std::uint32_t a, std::uint32_t b, const rb2_revolute* j) {
    GUARD_BEGIN
    b2Body* ba = body_at(s, a);
    b2Body* bb = body_at(s, b);
    if (!ba || !bb) return -1;
    b2RevoluteJointDef d;
    d.bodyA = ba;
    d.bodyB = bb;
    d.localAnchorA.Set(j->anchor_a[0], j->anchor_a[1]);
    d.localAnchorB.Set(j->anchor_b[0], j->anchor_b[1]);
    d.referenceAngle = j->reference_angle;
    d.enableLimit = true;
    d.lowerAngle = j->lower;
    d.upperAngle = j->upper;
    d.enableMotor = true;
    d.maxMotorTorque = j->max_torque;
    d.motorSpeed = j->speed;
    s->joints.push_back(static_cast<b2RevoluteJoint*>(s->world.CreateJoint(&d)));
    return static_cast<std::int64_t>(s->joints.size() - 1);
    GUARD_END
}

int rb2_set_motor(rb2_scene* s, std::uint32_t j, float speed, float torque) {
    b2RevoluteJoint* r = joint_at(s, j);
    if (!r) return -1;
    r->SetMotorSpeed(speed);
    r->SetMaxMotorTorque(torque);
    return 0;
}

// (joint angle, joint speed).
int rb2_joint(const rb2_scene* s, std::uint32_t j, float out[2]) {
    const b2RevoluteJoint* r = joint_at(s, j);
    if (!r) return -1;
    out[0] = r->GetJointAngle();
    out[1] = r->GetJointSpeed();
    return 0;
}

// x, y, angle, vx, vy, angular velocity, awake (1 or 0).
int rb2_body_state(const rb2_scene* s, std::uint32_t b, float out[7]) {
    const b2Body* body = body_at(s, b);
    if (!body) return -1;
    const b2Vec2& p = body->GetPosition();
    const b2Vec2& v = body->GetLinearVelocity();
    out[0] = p.x;
    out[1] = p.y;
    out[2] = body->GetAngle();
    out[3] = v.x;
    out[4] = v.y;
    out[5] = body->GetAngularVelocity();
    out[6] = body->IsAwake() ? 1.0f : 0.0f;
    return 0;
}

int rb2_force_to_center(rb2_scene* s, std::uint32_t b, float fx, float fy) {
    b2Body* body = body_at(s, b);
    if (!body) return -1;
    body->ApplyForceToCenter(b2Vec2(fx, fy), true);
    return 0;
}

int rb2_torque(rb2_scene* s, std::uint32_t b, float t) {
    b2Body* body = body_at(s, b);
    if (!body) return -1;
    body->ApplyTorque(t, true);
    return 0;
}

int rb2_linear_impulse(rb2_scene* s, std::uint32_t b, float ix, float iy, float px, float py) {
    b2Body* body = body_at(s, b);
    if (!body) return -1;
    body->ApplyLinearImpulse(b2Vec2(ix, iy), b2Vec2(px, py), true);
    return 0;
}

// The lidar: `world.RayCast` from p1 to p2; the closest ground hit's fraction, 1 for none.
float rb2_ray_fraction(const rb2_scene* s, float x1, float y1, float x2, float y2) {
    Lidar l;
    try {
        s->world.RayCast(&l, b2Vec2(x1, y1), b2Vec2(x2, y2));
    } catch (...) {
        return -1.0f;
    }
    return l.fraction;
}

}  // extern "C"
