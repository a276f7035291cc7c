// ---- randomness, keyed by (run key, stream, a, b) ----
fn mix32(x0: u32) -> u32 {
    var x = x0;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

fn rand_u32(key: u32, stream: u32, a: u32, b: u32) -> u32 {
    return mix32(mix32(mix32(key ^ mix32(stream * 0x9e3779b9u + 1u)) + a) ^ mix32(b + 0x632be5abu));
}

fn rand01(key: u32, stream: u32, a: u32, b: u32) -> f32 {
    return f32(rand_u32(key, stream, a, b) >> 8u) * (1.0 / 16777216.0);
}

const S_POLICY: u32 = 1u;
const S_RESET: u32 = 2u;
const S_SHUFFLE: u32 = 3u;
const S_ACTION: u32 = 4u;
// The env's own randomness in a step (MinAtar's sticky actions).
const S_ENV: u32 = 5u;
