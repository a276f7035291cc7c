// CartPole-v1 as Gymnasium's (and rlrig-env's, which runs it in f64): Euler steps,
// reward 1 per step, terminated past +-2.4 or +-12 degrees; truncation at MAX_STEPS is
// the caller's. State = observation = [x, x_dot, theta, theta_dot], in f32.

fn env_observe(s: ptr<function, array<f32, ENV_STATE>>, i: u32) -> f32 {
    return (*s)[i];
}

fn env_step(s: ptr<function, array<f32, ENV_STATE>>, action: Action, draw: f32) -> vec2<f32> {
    let gravity = 9.8;
    let masscart = 1.0;
    let masspole = 0.1;
    let total_mass = masspole + masscart;
    let length = 0.5;
    let polemass_length = masspole * length;
    let tau = 0.02;
    let x = (*s)[0];
    let x_dot = (*s)[1];
    let theta = (*s)[2];
    let theta_dot = (*s)[3];
    let force = select(-10.0, 10.0, action == 1u);
    let costheta = cos(theta);
    let sintheta = sin(theta);
    let temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
    let thetaacc = (gravity * sintheta - costheta * temp)
        / (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
    let xacc = temp - polemass_length * thetaacc * costheta / total_mass;
    let nx = x + tau * x_dot;
    let nth = theta + tau * theta_dot;
    (*s)[0] = nx;
    (*s)[1] = x_dot + tau * xacc;
    (*s)[2] = nth;
    (*s)[3] = theta_dot + tau * thetaacc;
    let limit = 12.0 * 2.0 * 3.14159265358979 / 360.0;
    let terminated = nx < -2.4 || nx > 2.4 || nth < -limit || nth > limit;
    return vec2<f32>(1.0, select(0.0, 1.0, terminated));
}

fn env_reset(s: ptr<function, array<f32, ENV_STATE>>, key: u32, a: u32, b: u32) {
    for (var i = 0u; i < ENV_STATE; i++) {
        (*s)[i] = -0.05 + 0.1 * rand01(key, S_RESET, a, b * ENV_STATE + i);
    }
}
