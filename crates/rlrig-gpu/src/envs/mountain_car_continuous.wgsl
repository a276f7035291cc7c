// MountainCarContinuous-v0 as Gymnasium's: state = observation = [position, velocity],
// force = the action clipped to [-1, 1]; reward 100 at the flag minus 0.1 a^2 (the
// unclipped action).

fn env_observe(s: ptr<function, array<f32, ENV_STATE>>, i: u32) -> f32 {
    return (*s)[i];
}

fn env_step(s: ptr<function, array<f32, ENV_STATE>>, action: Action, draw: f32) -> vec2<f32> {
    let force = clamp(action, -1.0, 1.0);
    var v = (*s)[1] + (force * 0.0015 - 0.0025 * cos(3.0 * (*s)[0]));
    v = clamp(v, -0.07, 0.07);
    let x = clamp((*s)[0] + v, -1.2, 0.6);
    if x == -1.2 && v < 0.0 {
        v = 0.0;
    }
    (*s)[0] = x;
    (*s)[1] = v;
    let terminated = x >= 0.45 && v >= 0.0;
    return vec2<f32>(select(0.0, 100.0, terminated) - action * action * 0.1, select(0.0, 1.0, terminated));
}

fn env_reset(s: ptr<function, array<f32, ENV_STATE>>, key: u32, a: u32, b: u32) {
    (*s)[0] = -0.6 + 0.2 * rand01(key, S_RESET, a, b * ENV_STATE);
    (*s)[1] = 0.0;
}
