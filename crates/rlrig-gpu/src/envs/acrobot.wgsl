// Acrobot-v1 as Gymnasium's (book dynamics, RK4 over dt = 0.2, no torque noise):
// state [theta1, theta2, dtheta1, dtheta2], observation [cos t1, sin t1, cos t2,
// sin t2, dt1, dt2]; reward -1 per step, terminated when the tip is above the bar.

fn env_observe(s: ptr<function, array<f32, ENV_STATE>>, i: u32) -> f32 {
    switch i {
        case 0u: { return cos((*s)[0]); }
        case 1u: { return sin((*s)[0]); }
        case 2u: { return cos((*s)[1]); }
        case 3u: { return sin((*s)[1]); }
        default: { return (*s)[i - 2u]; }
    }
}

// m1 = m2 = 1, l1 = 1, lc1 = lc2 = 0.5, I1 = I2 = 1, g = 9.8.
fn acrobot_dsdt(y: vec4<f32>, a: f32) -> vec4<f32> {
    let sin2 = sin(y.y);
    let cos2 = cos(y.y);
    let d1 = 0.25 + (1.0 + 0.25 + cos2) + 2.0;
    let d2 = (0.25 + 0.5 * cos2) + 1.0;
    let phi2 = 0.5 * 9.8 * cos(y.x + y.y - PI / 2.0);
    let phi1 = -0.5 * (y.w * y.w) * sin2 - 2.0 * 0.5 * y.w * y.z * sin2
        + 1.5 * 9.8 * cos(y.x - PI / 2.0) + phi2;
    let ddt2 = (a + d2 / d1 * phi1 - 0.5 * (y.z * y.z) * sin2 - phi2) / (0.25 + 1.0 - (d2 * d2) / d1);
    let ddt1 = -(d2 * ddt2 + phi1) / d1;
    return vec4<f32>(y.z, y.w, ddt1, ddt2);
}

fn acrobot_wrap(x0: f32) -> f32 {
    var x = x0;
    for (var k = 0u; k < 8u && x > PI; k++) {
        x -= 2.0 * PI;
    }
    for (var k = 0u; k < 8u && x < -PI; k++) {
        x += 2.0 * PI;
    }
    return x;
}

fn env_step(s: ptr<function, array<f32, ENV_STATE>>, action: Action, draw: f32) -> vec2<f32> {
    let a = f32(action) - 1.0;
    let y0 = vec4<f32>((*s)[0], (*s)[1], (*s)[2], (*s)[3]);
    let dt = 0.2;
    let k1 = acrobot_dsdt(y0, a);
    let k2 = acrobot_dsdt(y0 + dt / 2.0 * k1, a);
    let k3 = acrobot_dsdt(y0 + dt / 2.0 * k2, a);
    let k4 = acrobot_dsdt(y0 + dt * k3, a);
    let ns = y0 + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    let t1 = acrobot_wrap(ns.x);
    let t2 = acrobot_wrap(ns.y);
    (*s)[0] = t1;
    (*s)[1] = t2;
    (*s)[2] = clamp(ns.z, -4.0 * PI, 4.0 * PI);
    (*s)[3] = clamp(ns.w, -9.0 * PI, 9.0 * PI);
    let terminated = -cos(t1) - cos(t2 + t1) > 1.0;
    return vec2<f32>(select(-1.0, 0.0, terminated), select(0.0, 1.0, terminated));
}

fn env_reset(s: ptr<function, array<f32, ENV_STATE>>, key: u32, a: u32, b: u32) {
    for (var i = 0u; i < ENV_STATE; i++) {
        (*s)[i] = -0.1 + 0.2 * rand01(key, S_RESET, a, b * ENV_STATE + i);
    }
}
