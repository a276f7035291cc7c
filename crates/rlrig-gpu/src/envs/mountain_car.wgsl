// MountainCar-v0 as Gymnasium's (rlrig-env runs it in f64): state = observation =
// [position, velocity], reward -1 per step, terminated at the flag.

fn env_observe(s: ptr<function, array<f32, ENV_STATE>>, i: u32) -> f32 {
    return (*s)[i];
}

fn env_step(s: ptr<function, array<f32, ENV_STATE>>, action: Action, draw: f32) -> vec2<f32> {
    var v = (*s)[1] + (f32(i32(action) - 1) * 0.001 + cos(3.0 * (*s)[0]) * -0.0025);
    v = clamp(v, -0.07, 0.07);
    let x = clamp((*s)[0] + v, -1.2, 0.6);
    if x == -1.2 && v < 0.0 {
        v = 0.0;
    }
    (*s)[0] = x;
    (*s)[1] = v;
    return vec2<f32>(-1.0, select(0.0, 1.0, x >= 0.5 && v >= 0.0));
}

fn env_reset(s: ptr<function, array<f32, ENV_STATE>>, key: u32, a: u32, b: u32) {
    (*s)[0] = -0.6 + 0.2 * rand01(key, S_RESET, a, b * ENV_STATE);
    (*s)[1] = 0.0;
}
