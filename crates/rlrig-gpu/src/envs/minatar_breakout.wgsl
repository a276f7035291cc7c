// MinAtar/Breakout-v1 as rlrig-env's (the minatar package's game): 10x10 grid, channels
// paddle / ball / trail / brick, actions no-op / left / right, sticky actions with
// probability 0.1 decided by the step's uniform draw, no time limit. State:
// [ball_y, ball_x, ball_dir, pos, strike, last_x, last_y, terminal, last_action, then
// the bricks of rows 1, 2, 3 as 10-bit masks (bit x = column x)], all small integers,
// exact in f32.
const STICKY: f32 = 0.1;

// Observation index (y * 10 + x) * 4 + channel, as rlrig-env's.
fn env_observe(s: ptr<function, array<f32, ENV_STATE>>, i: u32) -> f32 {
    let cell = i / 4u;
    let y = i32(cell / 10u);
    let x = i32(cell % 10u);
    switch i % 4u {
        case 0u: { return select(0.0, 1.0, y == 9 && x == i32((*s)[3])); }
        case 1u: { return select(0.0, 1.0, y == i32((*s)[0]) && x == i32((*s)[1])); }
        case 2u: { return select(0.0, 1.0, y == i32((*s)[6]) && x == i32((*s)[5])); }
        default: {
            if y < 1 || y > 3 {
                return 0.0;
            }
            return f32((u32((*s)[8u + u32(y)]) >> u32(x)) & 1u);
        }
    }
}

// Directions 0..3 move (-1,-1), (1,-1), (1,1), (-1,1) in (x, y); dir ^ 1 mirrors x,
// 3 - dir mirrors y, dir ^ 2 reverses both (the reference's three lookup tables).
fn env_step(s: ptr<function, array<f32, ENV_STATE>>, action: Action, draw: f32) -> vec2<f32> {
    var a = action;
    if draw < STICKY {
        a = u32((*s)[8]);
    }
    (*s)[8] = f32(a);
    if (*s)[7] > 0.5 {
        return vec2<f32>(0.0, 1.0);
    }
    var r = 0.0;
    var pos = i32((*s)[3]);
    if a == 1u {
        pos = max(pos - 1, 0);
    } else if a == 2u {
        pos = min(pos + 1, 9);
    }
    let bx = i32((*s)[1]);
    let by = i32((*s)[0]);
    var dir = u32((*s)[2]);
    var strike = (*s)[4] > 0.5;
    var nx = bx + select(-1, 1, dir == 1u || dir == 2u);
    var ny = by + select(-1, 1, dir >= 2u);
    var rows = vec3<u32>(u32((*s)[9]), u32((*s)[10]), u32((*s)[11]));
    var toggle = false;
    var terminal = false;
    if nx < 0 || nx > 9 {
        nx = clamp(nx, 0, 9);
        dir = dir ^ 1u;
    }
    if ny < 0 {
        ny = 0;
        dir = 3u - dir;
    } else if ny >= 1 && ny <= 3 && ((rows[ny - 1] >> u32(nx)) & 1u) != 0u {
        toggle = true;
        if !strike {
            r += 1.0;
            strike = true;
            rows[ny - 1] &= ~(1u << u32(nx));
            ny = by;
            dir = 3u - dir;
        }
    } else if ny == 9 {
        if all(rows == vec3<u32>(0u)) {
            rows = vec3<u32>(1023u);
        }
        if bx == pos {
            dir = 3u - dir;
            ny = by;
        } else if nx == pos {
            dir = dir ^ 2u;
            ny = by;
        } else {
            terminal = true;
        }
    }
    if !toggle {
        strike = false;
    }
    (*s)[0] = f32(ny);
    (*s)[1] = f32(nx);
    (*s)[2] = f32(dir);
    (*s)[3] = f32(pos);
    (*s)[4] = select(0.0, 1.0, strike);
    (*s)[5] = f32(bx);
    (*s)[6] = f32(by);
    (*s)[7] = select(0.0, 1.0, terminal);
    (*s)[9] = f32(rows.x);
    (*s)[10] = f32(rows.y);
    (*s)[11] = f32(rows.z);
    return vec2<f32>(r, select(0.0, 1.0, terminal));
}

fn env_reset(s: ptr<function, array<f32, ENV_STATE>>, key: u32, a: u32, b: u32) {
    let left = rand01(key, S_RESET, a, b * ENV_STATE) < 0.5;
    let x = select(9.0, 0.0, left);
    (*s)[0] = 3.0;
    (*s)[1] = x;
    (*s)[2] = select(3.0, 2.0, left);
    (*s)[3] = 4.0;
    (*s)[4] = 0.0;
    (*s)[5] = x;
    (*s)[6] = 3.0;
    (*s)[7] = 0.0;
    (*s)[8] = 0.0;
    (*s)[9] = 1023.0;
    (*s)[10] = 1023.0;
    (*s)[11] = 1023.0;
}
