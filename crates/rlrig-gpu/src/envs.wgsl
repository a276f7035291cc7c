// The device envs on their own: one thread per env. The host prepends the constants
// (KEY, BENCH_STEPS), then `DeviceEnv::source`: MAX_STEPS, ENV_STATE, ENV_OBS, Action,
// env_action and env_random_action written from the env's description, the random
// streams (rng.wgsl) and the env's dynamics (envs/*.wgsl: env_observe, env_step,
// env_reset).

// ---- probe: one step from given states (tests compare it with rlrig-env) ----
// Per row: state[ENV_STATE], action, the step's uniform draw | next state[ENV_STATE],
// reward, terminated, observation[ENV_OBS].
@group(0) @binding(0) var<storage, read_write> probe: array<f32>;
const PROBE_W: u32 = 2u * ENV_STATE + 4u + ENV_OBS;

@compute @workgroup_size(64)
fn env_probe(@builtin(global_invocation_id) g: vec3<u32>) {
    let n = arrayLength(&probe) / PROBE_W;
    if g.x >= n {
        return;
    }
    let base = g.x * PROBE_W;
    var s: array<f32, ENV_STATE>;
    for (var i = 0u; i < ENV_STATE; i++) {
        s[i] = probe[base + i];
    }
    let tr = env_step(&s, env_action(probe[base + ENV_STATE]), probe[base + ENV_STATE + 1u]);
    let out = base + ENV_STATE + 2u;
    for (var i = 0u; i < ENV_STATE; i++) {
        probe[out + i] = s[i];
    }
    probe[out + ENV_STATE] = tr.x;
    probe[out + ENV_STATE + 1u] = tr.y;
    for (var i = 0u; i < ENV_OBS; i++) {
        probe[out + ENV_STATE + 2u + i] = env_observe(&s, i);
    }
}

// ---- bench: BENCH_STEPS random-action steps of every env per dispatch ----
// Per env in `bstate`: state[ENV_STATE], steps into the episode, its return so far,
// the sum of finished episodes' returns, a sum of every observation component seen (so
// the observation is computed, as a vector env returns it). In `bcount`: steps done and
// episodes finished (the host checks the steps: nothing was cut short).
const BW: u32 = ENV_STATE + 4u;
@group(0) @binding(1) var<storage, read_write> bstate: array<f32>;
@group(0) @binding(2) var<storage, read_write> bcount: array<u32>;

@compute @workgroup_size(64)
fn env_init(@builtin(global_invocation_id) g: vec3<u32>) {
    let e = g.x;
    if e >= arrayLength(&bcount) / 2u {
        return;
    }
    var s: array<f32, ENV_STATE>;
    env_reset(&s, KEY, e, 0u);
    for (var i = 0u; i < ENV_STATE; i++) {
        bstate[e * BW + i] = s[i];
    }
    for (var i = ENV_STATE; i < BW; i++) {
        bstate[e * BW + i] = 0.0;
    }
    bcount[2u * e] = 0u;
    bcount[2u * e + 1u] = 0u;
}

@compute @workgroup_size(64)
fn env_bench(@builtin(global_invocation_id) g: vec3<u32>) {
    let e = g.x;
    if e >= arrayLength(&bcount) / 2u {
        return;
    }
    let base = e * BW;
    var s: array<f32, ENV_STATE>;
    for (var i = 0u; i < ENV_STATE; i++) {
        s[i] = bstate[base + i];
    }
    var el = bstate[base + ENV_STATE];
    var ret = bstate[base + ENV_STATE + 1u];
    var done_sum = bstate[base + ENV_STATE + 2u];
    var seen = bstate[base + ENV_STATE + 3u];
    var step = bcount[2u * e];
    var eps = bcount[2u * e + 1u];
    for (var k = 0u; k < BENCH_STEPS; k++) {
        let a = env_random_action(rand01(KEY, S_ACTION, e, step));
        let tr = env_step(&s, a, rand01(KEY, S_ENV, e, step));
        step += 1u;
        el += 1.0;
        ret += tr.x;
        if tr.y > 0.5 || el >= MAX_STEPS {
            done_sum += ret;
            eps += 1u;
            ret = 0.0;
            el = 0.0;
            env_reset(&s, KEY, e, eps);
        }
        for (var i = 0u; i < ENV_OBS; i++) {
            seen += env_observe(&s, i);
        }
    }
    for (var i = 0u; i < ENV_STATE; i++) {
        bstate[base + i] = s[i];
    }
    bstate[base + ENV_STATE] = el;
    bstate[base + ENV_STATE + 1u] = ret;
    bstate[base + ENV_STATE + 2u] = done_sum;
    bstate[base + ENV_STATE + 3u] = seen;
    bcount[2u * e] = step;
    bcount[2u * e + 1u] = eps;
}
