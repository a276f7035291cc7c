// Pendulum-v1 as Gymnasium's (g = 10): state [theta, theta_dot], observation
// [cos theta, sin theta, theta_dot]; never terminates (truncated at MAX_STEPS).

fn env_observe(s: ptr<function, array<f32, ENV_STATE>>, i: u32) -> f32 {
    switch i {
        case 0u: { return cos((*s)[0]); }
        case 1u: { return sin((*s)[0]); }
        default: { return (*s)[1]; }
    }
}

fn env_step(s: ptr<function, array<f32, ENV_STATE>>, action: Action, draw: f32) -> vec2<f32> {
    let th = (*s)[0];
    let thdot = (*s)[1];
    let u = clamp(action, -2.0, 2.0);
    // ((th + pi) mod 2 pi) - pi, with Python's (floor) modulo.
    let t = th + PI;
    let an = t - 2.0 * PI * floor(t / (2.0 * PI)) - PI;
    let costs = an * an + 0.1 * thdot * thdot + 0.001 * u * u;
    let nthdot = clamp(thdot + (3.0 * 10.0 / 2.0 * sin(th) + 3.0 * u) * 0.05, -8.0, 8.0);
    (*s)[0] = th + nthdot * 0.05;
    (*s)[1] = nthdot;
    return vec2<f32>(-costs, 0.0);
}

fn env_reset(s: ptr<function, array<f32, ENV_STATE>>, key: u32, a: u32, b: u32) {
    (*s)[0] = -PI + 2.0 * PI * rand01(key, S_RESET, a, b * ENV_STATE);
    (*s)[1] = -1.0 + 2.0 * rand01(key, S_RESET, a, b * ENV_STATE + 1u);
}
