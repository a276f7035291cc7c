// PPO resident on the device: one workgroup trains one run (its envs, rollout, GAE,
// minibatch updates and Adam), one dispatch is one iteration of every run at once.
//
// The host prepends the constants (OBS, ACT, H, NENV, T, B, MB, NMB, EPOCHS, R, RE,
// ITERS, P_CRITIC, P, hyperparameters) and the env's functions (env_step, env_reset,
// env_observe, MAX_STEPS, ENV_STATE); see lib.rs. Networks as rlrig's CPU path: a
// critic OBS-H-H-1 then an actor OBS-H-H-ACT, tanh, weights row-major [in][out],
// parameters laid out as `rlrig_learn::ppo::Agent::params`.
//
// The WG = 2H x SPLIT threads of a workgroup: thread `tid` works on hidden unit
// j = tid % H of net (tid / H) % 2 (0 critic, 1 actor), as part p = tid / 2H of SPLIT.
// Forward and backward passes over rows give part p the rows p, p + SPLIT, ... (each
// row's sums in the same order whatever SPLIT is); the unit's gradients are split by
// what they belong to: part p accumulates column j of W2 for input units
// [p H / SPLIT, (p + 1) H / SPLIT) and row i of W1 for i = p, p + SPLIT, ...; part 0
// also b1[j], b2[j], row j of W3 and (j = 0) b3. Each sums its gradients over the
// minibatch's rows in row order in registers and applies their Adam steps, so no
// gradient is ever written to memory. Every sum runs in a fixed order: a run's result
// does not depend on how many runs share the launch. (The gradient norm's tree sum
// follows the workgroup size, so SPLIT changes the last bits of a run.)

struct Run {
    key: u32,
    iteration: u32,
    // Rollout steps done in this iteration, and minibatch updates done.
    step: u32,
    update: u32,
}

@group(0) @binding(0) var<storage, read_write> params: array<f32>;
@group(0) @binding(1) var<storage, read_write> adam_m: array<f32>;
@group(0) @binding(2) var<storage, read_write> adam_v: array<f32>;
@group(0) @binding(3) var<storage, read_write> envs: array<f32>;
@group(0) @binding(4) var<storage, read_write> roll: array<f32>;
@group(0) @binding(5) var<storage, read_write> metrics: array<f32>;
@group(0) @binding(6) var<storage, read_write> runs: array<Run>;
// Each run's minibatch order of the current epoch.
@group(0) @binding(8) var<storage, read_write> order: array<u32>;

// Threads per part (one per hidden unit of each net), and per workgroup.
const WG1: u32 = 2u * H;
const WG: u32 = WG1 * SPLIT;
// Input units of W2 whose gradients each part accumulates, in vec4s.
const KS: u32 = H / 4u / SPLIT;
// Per rollout row: network outputs (ACT logits, then the value).
const OUTS: u32 = ACT + 1u;
// Per env: the env's state, then episode return, episode length, the done flag of the
// current observation (CleanRL's `next_done`), and this iteration's count, return sum
// and length sum of finished episodes.
const ENVW: u32 = ENV_STATE + 6u;
const E_NEP: u32 = ENV_STATE + 3u;
const E_SRET: u32 = ENV_STATE + 4u;
const E_SLEN: u32 = ENV_STATE + 5u;
const E_RET: u32 = ENV_STATE;
const E_LEN: u32 = ENV_STATE + 1u;
const E_DONE: u32 = ENV_STATE + 2u;
// Per rollout row: obs, action, log-prob, value, reward, done, advantage, return.
const ROWW: u32 = OBS + 7u;
const F_ACT: u32 = OBS;
const F_LOGP: u32 = OBS + 1u;
const F_VAL: u32 = OBS + 2u;
const F_REW: u32 = OBS + 3u;
const F_DONE: u32 = OBS + 4u;
const F_ADV: u32 = OBS + 5u;
const F_RET: u32 = OBS + 6u;
// Per iteration and run: episodes, return sum, length sum, then the row sums of the
// policy loss, value loss, entropy, approximate KL and clip fraction.
const NM: u32 = 8u;

var<workgroup> xs: array<f32, R * OBS>;
// Hidden activations and the second layer's pre-activation gradients, [net][row][unit]
// in vec4s along the units: products over units read four at a time.
const H4: u32 = H / 4u;
var<workgroup> h1: array<vec4<f32>, 2u * R * H4>;
var<workgroup> h2: array<vec4<f32>, 2u * R * H4>;
var<workgroup> dz: array<vec4<f32>, 2u * R * H4>;
var<workgroup> outs: array<f32, R * OUTS>;
var<workgroup> douts: array<f32, R * OUTS>;
var<workgroup> perm: array<u32, B>;
var<workgroup> madv: array<f32, MB>;
var<workgroup> next_val: array<f32, NENV>;
// Time-limit truncations of the current rollout step: flags and final observations.
var<workgroup> tflag: array<u32, RE>;
var<workgroup> fobs: array<f32, RE * OBS>;
var<workgroup> tany: u32;
// Loss sums of the rows each loss-head thread handled: policy loss, value loss,
// entropy, approximate KL, clip fraction. (Statistics live in memory rather than in
// registers across the many barriers of an iteration: Mesa's lavapipe miscompiled the
// latter at some loop lengths.)
var<workgroup> lstat: array<f32, 5u * R>;


fn sync() {
    storageBarrier();
    workgroupBarrier();
}

// Sum of one value per thread, in a fixed tree order; every thread gets the sum. Its
// scratch is `dz` (2 R H >= WG floats), so it must not be called during a pass.
fn reduce_sum(v: f32, tid: u32) -> f32 {
    workgroupBarrier();
    dz[tid / 4u][tid % 4u] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if tid < s {
            dz[tid / 4u][tid % 4u] += dz[(tid + s) / 4u][(tid + s) % 4u];
        }
        workgroupBarrier();
    }
    let total = dz[0][0];
    workgroupBarrier();
    return total;
}

// Both nets' W2 and W3 in workgroup memory when W_SHARED (staged from `params` at the
// start of every dispatch and update, read there instead of from storage), else read
// from `params`.
const WSH: u32 = select(1u, 2u * H * H + H * (1u + ACT), W_SHARED);
var<workgroup> wsh: array<f32, WSH>;

fn stage_weights(tid: u32, pb: u32) {
    if W_SHARED {
        for (var q = tid; q < 2u * H * H; q += WG) {
            let net = q / (H * H);
            wsh[q] = params[off_w2(net_base(pb, net)) + q % (H * H)];
        }
        for (var q = tid; q < H * (1u + ACT); q += WG) {
            let net = select(0u, 1u, q >= H);
            wsh[2u * H * H + q] = params[off_w3(net_base(pb, net)) + q - net * H];
        }
        workgroupBarrier();
    }
}

// Element i of net's W2 ([in][out], i = k H + j), and of its W3 (i = j outn + o).
fn w2(net: u32, nb: u32, i: u32) -> f32 {
    if W_SHARED {
        return wsh[net * H * H + i];
    }
    return params[off_w2(nb) + i];
}
fn w3(net: u32, nb: u32, i: u32) -> f32 {
    if W_SHARED {
        return wsh[2u * H * H + net * H + i];
    }
    return params[off_w3(nb) + i];
}

// ---- the networks ----
fn net_of(tid: u32) -> u32 { return (tid / H) % 2u; }
fn part_of(tid: u32) -> u32 { return select(tid / WG1, 0u, SPLIT == 1u); }
fn net_base(pb: u32, net: u32) -> u32 {
    return pb + net * P_CRITIC;
}
fn off_b1(nb: u32) -> u32 { return nb + OBS * H; }
fn off_w2(nb: u32) -> u32 { return nb + OBS * H + H; }
fn off_b2(nb: u32) -> u32 { return nb + OBS * H + H + H * H; }
fn off_w3(nb: u32) -> u32 { return nb + OBS * H + 2u * H + H * H; }
fn off_b3(nb: u32, outn: u32) -> u32 { return off_w3(nb) + H * outn; }
fn outputs_of(net: u32) -> u32 { return select(1u, ACT, net == 1u); }
// Column of a row's network outputs where `net`'s outputs start.
fn out_col(net: u32) -> u32 { return select(ACT, 0u, net == 1u); }

FORWARD_R
FORWARD_E

// ---- a run's place in the buffers ----
struct Ctx {
    run: u32,
    it: u32,
    key: u32,
    // Where the run's parameters, envs and rollout start.
    pb: u32,
    ebase: u32,
    rbase: u32,
}

fn context(run: u32) -> Ctx {
    return Ctx(run, runs[run].iteration, runs[run].key, run * P, run * NENV * ENVW, run * B * ROWW);
}

fn load_env(eb: u32) -> array<f32, ENV_STATE> {
    var s: array<f32, ENV_STATE>;
    for (var i = 0u; i < ENV_STATE; i++) {
        s[i] = envs[eb + i];
    }
    return s;
}

// The observations of envs c * RE .. (c + 1) * RE into xs (then a barrier).
fn observe_envs(tid: u32, ebase: u32, c: u32) {
    for (var q = tid; q < RE * OBS; q += WG) {
        var s = load_env(ebase + (c * RE + q / OBS) * ENVW);
        xs[q] = env_observe(&s, q % OBS);
    }
    workgroupBarrier();
}

// Log-probabilities of row r's logits in `outs`.
fn log_softmax_row(r: u32) -> array<f32, ACT> {
    var mx = outs[r * OUTS];
    for (var a = 1u; a < ACT; a++) {
        mx = max(mx, outs[r * OUTS + a]);
    }
    var se = 0.0;
    for (var a = 0u; a < ACT; a++) {
        se += exp(outs[r * OUTS + a] - mx);
    }
    let lse = mx + log(se);
    var lp: array<f32, ACT>;
    for (var a = 0u; a < ACT; a++) {
        lp[a] = outs[r * OUTS + a] - lse;
    }
    return lp;
}

// ---- one iteration: T / TS rollout dispatches, one GAE dispatch, EPOCHS x NMB / UPD
// update dispatches (short ones by default: Mesa's lavapipe silently cut long ones
// short; a fused layout runs all T steps in one and all updates in one) ----

// TS rollout steps of every env of every run.
@compute @workgroup_size(WG)
fn rollout(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let cx = context(wid.x);
    let t0 = runs[cx.run].step;
    if t0 == 0u {
        for (var e = tid; e < NENV; e += WG) {
            envs[cx.ebase + e * ENVW + E_NEP] = 0.0;
            envs[cx.ebase + e * ENVW + E_SRET] = 0.0;
            envs[cx.ebase + e * ENVW + E_SLEN] = 0.0;
        }
    }
    sync();
    stage_weights(tid, cx.pb);
    // Rollout: T steps of NENV envs, RE envs per forward pass.
    for (var ts = 0u; ts < TS; ts++) {
        let t = t0 + ts;
        for (var c = 0u; c < NENV / RE; c++) {
            observe_envs(tid, cx.ebase, c);
            forward_e(tid, cx.pb);
            if tid < RE {
                let e = c * RE + tid;
                let eb = cx.ebase + e * ENVW;
                let row = cx.rbase + (t * NENV + e) * ROWW;
                var lp = log_softmax_row(tid);
                // Inverse-CDF sampling.
                let u = rand01(cx.key, S_POLICY, cx.it, t * NENV + e);
                var act = ACT - 1u;
                var cum = 0.0;
                var found = false;
                for (var a = 0u; a < ACT; a++) {
                    cum += exp(lp[a]);
                    if !found && u < cum {
                        act = a;
                        found = true;
                    }
                }
                for (var i = 0u; i < OBS; i++) {
                    roll[row + i] = xs[tid * OBS + i];
                }
                roll[row + F_ACT] = f32(act);
                roll[row + F_LOGP] = lp[act];
                roll[row + F_VAL] = outs[tid * OUTS + ACT];
                roll[row + F_DONE] = envs[eb + E_DONE];
                var s = load_env(eb);
                let tr = env_step(&s, act, rand01(cx.key, S_ENV, cx.it, t * NENV + e));
                roll[row + F_REW] = tr.x;
                let er = envs[eb + E_RET] + tr.x;
                let el = envs[eb + E_LEN] + 1.0;
                // The CPU path's bootstrap_truncated: gamma V(final obs) is added below.
                let truncated = BOOTSTRAP_TRUNCATED && tr.y < 0.5 && el >= MAX_STEPS;
                tflag[tid] = select(0u, 1u, truncated);
                for (var i = 0u; i < OBS; i++) {
                    fobs[tid * OBS + i] = env_observe(&s, i);
                }
                if tr.y > 0.5 || el >= MAX_STEPS {
                    envs[eb + E_NEP] += 1.0;
                    envs[eb + E_SRET] += er;
                    envs[eb + E_SLEN] += el;
                    env_reset(&s, cx.key, cx.it, t * NENV + e);
                    envs[eb + E_RET] = 0.0;
                    envs[eb + E_LEN] = 0.0;
                    envs[eb + E_DONE] = 1.0;
                } else {
                    envs[eb + E_RET] = er;
                    envs[eb + E_LEN] = el;
                    envs[eb + E_DONE] = 0.0;
                }
                for (var i = 0u; i < ENV_STATE; i++) {
                    envs[eb + i] = s[i];
                }
            }
            sync();
            if BOOTSTRAP_TRUNCATED {
                if tid == 0u {
                    var any = 0u;
                    for (var r = 0u; r < RE; r++) {
                        any |= tflag[r];
                    }
                    tany = any;
                }
                if workgroupUniformLoad(&tany) != 0u {
                    for (var q = tid; q < RE * OBS; q += WG) {
                        xs[q] = fobs[q];
                    }
                    workgroupBarrier();
                    forward_e(tid, cx.pb);
                    if tid < RE && tflag[tid] != 0u {
                        let row = cx.rbase + (t * NENV + c * RE + tid) * ROWW;
                        roll[row + F_REW] += GAMMA * outs[tid * OUTS + ACT];
                    }
                    sync();
                }
            }
        }
    }

    if tid == 0u {
        runs[cx.run].step = t0 + TS;
    }
}

// Values after the rollout, GAE, and the iteration's episode metrics.
@compute @workgroup_size(WG)
fn gae(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let cx = context(wid.x);
    stage_weights(tid, cx.pb);
    // Values of the observations after the rollout, for bootstrapping.
    for (var c = 0u; c < NENV / RE; c++) {
        observe_envs(tid, cx.ebase, c);
        forward_e(tid, cx.pb);
        if tid < RE {
            next_val[c * RE + tid] = outs[tid * OUTS + ACT];
        }
        workgroupBarrier();
    }

    // GAE, one thread per env.
    for (var e = tid; e < NENV; e += WG) {
        var last = 0.0;
        for (var tt = 0u; tt < T; tt++) {
            let t = T - 1u - tt;
            let row = cx.rbase + (t * NENV + e) * ROWW;
            var nonterminal: f32;
            var next_v: f32;
            if t + 1u == T {
                nonterminal = 1.0 - envs[cx.ebase + e * ENVW + E_DONE];
                next_v = next_val[e];
            } else {
                let next_row = row + NENV * ROWW;
                nonterminal = 1.0 - roll[next_row + F_DONE];
                next_v = roll[next_row + F_VAL];
            }
            let v = roll[row + F_VAL];
            let delta = roll[row + F_REW] + GAMMA * next_v * nonterminal - v;
            last = delta + GAMMA * LAMBDA * nonterminal * last;
            roll[row + F_ADV] = last;
            roll[row + F_RET] = last + v;
        }
    }
    sync();

    if tid == 0u {
        let mb = (cx.run * ITERS + cx.it) * NM;
        var m: array<f32, 3>;
        for (var e = 0u; e < NENV; e++) {
            m[0] += envs[cx.ebase + e * ENVW + E_NEP];
            m[1] += envs[cx.ebase + e * ENVW + E_SRET];
            m[2] += envs[cx.ebase + e * ENVW + E_SLEN];
        }
        for (var k = 0u; k < NM; k++) {
            metrics[mb + k] = select(0.0, m[min(k, 2u)], k < 3u);
        }
        runs[cx.run].step = 0u;
    }
}

// UPD minibatch updates of every run, one after another.
@compute @workgroup_size(WG)
fn update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    for (var k = 0u; k < UPD; k++) {
        update_one(tid, wid.x);
        sync();
    }
}

// One minibatch update of run `run` (a new epoch's shuffle first).
fn update_one(tid: u32, run: u32) {
    let cx = context(run);
    stage_weights(tid, cx.pb);
    // This thread's hidden unit j of net 0 (critic) or 1 (actor), and its part.
    let net = net_of(tid);
    let j = tid % H;
    let p = part_of(tid);
    let nb = net_base(cx.pb, net);
    let outn = outputs_of(net);
    let ocol = out_col(net);
    // Update: EPOCHS passes of NMB minibatches of MB rows.
    var lr = LR;
    if ANNEAL_LR {
        lr = LR * (1.0 - f32(cx.it) / f32(ANNEAL_ITERS));
    }
    let inv = 1.0 / f32(MB);
    let u = runs[cx.run].update;
    let epoch = u / NMB;
    let m = u % NMB;
    for (var q = tid; q < 5u * R; q += WG) {
        lstat[q] = 0.0;
    }
    {
        // A new epoch's order (one thread, in workgroup memory), else the epoch's.
        if tid == 0u && m == 0u {
            for (var i = 0u; i < B; i++) {
                perm[i] = i;
            }
            // Fisher-Yates.
            for (var i = B - 1u; i > 0u; i--) {
                let r01 = rand01(cx.key, S_SHUFFLE, cx.it * EPOCHS + epoch, i);
                let k = min(u32(r01 * f32(i + 1u)), i);
                let tmp = perm[i];
                perm[i] = perm[k];
                perm[k] = tmp;
            }
        }
        workgroupBarrier();
        // A new epoch's first minibatch stores the whole order; the others read back
        // only their own rows of it.
        let obase = cx.run * B;
        if m == 0u {
            for (var q = tid; q < B; q += WG) {
                order[obase + q] = perm[q];
            }
        } else {
            for (var q = tid; q < MB; q += WG) {
                perm[m * MB + q] = order[obase + m * MB + q];
            }
        }
        sync();
        {
            var sa = 0.0;
            for (var q = tid; q < MB; q += WG) {
                let a = roll[cx.rbase + perm[m * MB + q] * ROWW + F_ADV];
                madv[q] = a;
                sa += a;
            }
            if NORM_ADV && MB > 1u {
                let mean = reduce_sum(sa, tid) / f32(MB);
                var sq = 0.0;
                for (var q = tid; q < MB; q += WG) {
                    let d = madv[q] - mean;
                    sq += d * d;
                }
                // torch.std: the unbiased estimate.
                let sd = sqrt(reduce_sum(sq, tid) / f32(MB - 1u));
                for (var q = tid; q < MB; q += WG) {
                    madv[q] = (madv[q] - mean) / (sd + 1e-8);
                }
            }
            workgroupBarrier();

            var g1: array<f32, OBS>;
            var g2: array<vec4<f32>, KS>;
            var g3: array<f32, ACT>;
            var gb3: array<f32, ACT>;
            var gb1 = 0.0;
            var gb2 = 0.0;
            for (var c = 0u; c < MB / R; c++) {
                for (var q = tid; q < R * OBS; q += WG) {
                    xs[q] = roll[cx.rbase + perm[m * MB + c * R + q / OBS] * ROWW + q % OBS];
                }
                workgroupBarrier();
                forward_r(tid, cx.pb);
                // The loss head, one thread per row (as rlrig-learn's ppo.rs).
                if tid < R {
                    let qrow = c * R + tid;
                    let row = cx.rbase + perm[m * MB + qrow] * ROWW;
                    let adv = madv[qrow];
                    var lp = log_softmax_row(tid);
                    var entropy = 0.0;
                    for (var a = 0u; a < ACT; a++) {
                        entropy -= exp(lp[a]) * lp[a];
                    }
                    let act = u32(roll[row + F_ACT]);
                    let logratio = lp[act] - roll[row + F_LOGP];
                    let ratio = exp(logratio);
                    lstat[5u * tid + 3u] += (ratio - 1.0) - logratio;
                    lstat[5u * tid + 4u] += select(0.0, 1.0, abs(ratio - 1.0) > CLIP);
                    let l1 = -adv * ratio;
                    let l2 = -adv * clamp(ratio, 1.0 - CLIP, 1.0 + CLIP);
                    lstat[5u * tid] += max(l1, l2);
                    lstat[5u * tid + 2u] += entropy;
                    let clipped_active = l2 > l1 && (ratio < 1.0 - CLIP || ratio > 1.0 + CLIP);
                    let g_lp = select(-adv * ratio * inv, 0.0, clipped_active);
                    for (var a = 0u; a < ACT; a++) {
                        let pa = exp(lp[a]);
                        let onehot = select(0.0, 1.0, a == act);
                        douts[tid * OUTS + a] = g_lp * (onehot - pa) + ENT_COEF * inv * pa * (lp[a] + entropy);
                    }
                    let ret = roll[row + F_RET];
                    let oldv = roll[row + F_VAL];
                    let v = outs[tid * OUTS + ACT];
                    let unclipped = (v - ret) * (v - ret);
                    if CLIP_VLOSS {
                        let vc = oldv + clamp(v - oldv, -CLIP, CLIP);
                        let clipped = (vc - ret) * (vc - ret);
                        lstat[5u * tid + 1u] += 0.5 * max(unclipped, clipped);
                        var dv = VF_COEF * (v - ret) * inv;
                        if clipped > unclipped {
                            dv = select(0.0, VF_COEF * (vc - ret) * inv, abs(v - oldv) < CLIP);
                        }
                        douts[tid * OUTS + ACT] = dv;
                    } else {
                        lstat[5u * tid + 1u] += 0.5 * unclipped;
                        douts[tid * OUTS + ACT] = VF_COEF * (v - ret) * inv;
                    }
                }
                workgroupBarrier();
                // Backward. Lines starting `%R` are written out once per row of this
                // part, `%A` once per row of the pass (r = 0..R), by the host: per-row
                // values stay in registers, where arrays indexed in a loop went to
                // local memory on NVIDIA's compiler (10x slower).
                // Through the output layer to the second layer's pre-activations (dz).
%R              let h2v{r} = h2[(net * R + {r}u) * H4 + j / 4u][j % 4u];
%R              var dh2{r} = 0.0;
                for (var o = 0u; o < outn; o++) {
                    let wj = w3(net, nb, j * outn + o);
%R                  dh2{r} += wj * douts[{r}u * OUTS + ocol + o];
                }
%R              dz[(net * R + {r}u) * H4 + j / 4u][j % 4u] = dh2{r} * (1.0 - h2v{r} * h2v{r});
                if p == 0u {
                    for (var o = 0u; o < outn; o++) {
                        var gsum = 0.0;
                        var dsum = 0.0;
%A                      let d{a} = douts[{a}u * OUTS + ocol + o];
%A                      gsum += h2[(net * R + {a}u) * H4 + j / 4u][j % 4u] * d{a};
%A                      dsum += d{a};
                        g3[o] += gsum;
                        if j == 0u {
                            gb3[o] += dsum;
                        }
                    }
                }
                workgroupBarrier();
                // The second layer's gradients (this part's input units) and the first
                // layer's pre-activation gradients of this part's rows, into h2 (read
                // for the last time before the barrier above).
%A              let dzj{a} = dz[(net * R + {a}u) * H4 + j / 4u][j % 4u];
                if p == 0u {
%A                  gb2 += dzj{a};
                }
%P{
                    var s = vec4<f32>(0.0);
%A                  s += h1[(net * R + {a}u) * H4 + {kk}] * dzj{a};
                    g2[{kl}] += s;
%P}
%R              var dh1{r} = 0.0;
%K{
                    let wb = j * H + 4u * {kk};
                    let w = vec4<f32>(w2(net, nb, wb), w2(net, nb, wb + 1u), w2(net, nb, wb + 2u), w2(net, nb, wb + 3u));
%R                  dh1{r} += dot(w, dz[(net * R + {r}u) * H4 + {kk}]);
%K}
%R              let h1v{r} = h1[(net * R + {r}u) * H4 + j / 4u][j % 4u];
%R              h2[(net * R + {r}u) * H4 + j / 4u][j % 4u] = dh1{r} * (1.0 - h1v{r} * h1v{r});
                workgroupBarrier();
                // The first layer's gradients: this part's inputs, over every row.
%A              let dz1{a} = h2[(net * R + {a}u) * H4 + j / 4u][j % 4u];
                if p == 0u {
%A                  gb1 += dz1{a};
                }
                for (var i = p; i < OBS; i += SPLIT) {
                    var s = 0.0;
%A                  s += xs[{a}u * OBS + i] * dz1{a};
                    g1[i] += s;
                }
                workgroupBarrier();
            }

            // Global gradient-norm clip over both networks, then Adam (PyTorch's form).
            var sq = 0.0;
            for (var i = p; i < OBS; i += SPLIT) {
                sq += g1[i] * g1[i];
            }
%P{
                sq += dot(g2[{kl}], g2[{kl}]);
%P}
            if p == 0u {
                sq += gb1 * gb1 + gb2 * gb2;
                for (var o = 0u; o < outn; o++) {
                    sq += g3[o] * g3[o];
                    if j == 0u {
                        sq += gb3[o] * gb3[o];
                    }
                }
            }
            let norm = sqrt(reduce_sum(sq, tid));
            let coef = min(1.0, MAX_GRAD_NORM / (norm + 1e-6));
            let step_t = f32((cx.it * EPOCHS + epoch) * NMB + m + 1u);
            let bc1 = 1.0 - pow(0.9, step_t);
            let bc2 = 1.0 - pow(0.999, step_t);
            let step = lr / bc1;
            let sqrt_bc2 = sqrt(bc2);
            for (var i = p; i < OBS; i += SPLIT) {
                adam(nb + i * H + j, g1[i] * coef, step, sqrt_bc2);
            }
%P{
                let g = g2[{kl}] * coef;
                let wb = off_w2(nb) + 4u * {kk} * H + j;
                adam(wb, g.x, step, sqrt_bc2);
                adam(wb + H, g.y, step, sqrt_bc2);
                adam(wb + 2u * H, g.z, step, sqrt_bc2);
                adam(wb + 3u * H, g.w, step, sqrt_bc2);
%P}
            if p == 0u {
                adam(off_b1(nb) + j, gb1 * coef, step, sqrt_bc2);
                adam(off_b2(nb) + j, gb2 * coef, step, sqrt_bc2);
                for (var o = 0u; o < outn; o++) {
                    adam(off_w3(nb) + j * outn + o, g3[o] * coef, step, sqrt_bc2);
                    if j == 0u {
                        adam(off_b3(nb, outn) + o, gb3[o] * coef, step, sqrt_bc2);
                    }
                }
            }
            sync();
        }
    }

    if tid == 0u {
        let mb = (cx.run * ITERS + cx.it) * NM;
        for (var k = 0u; k < 5u; k++) {
            var sum = 0.0;
            for (var r = 0u; r < R; r++) {
                sum += lstat[5u * r + k];
            }
            metrics[mb + 3u + k] += sum;
        }
        if u + 1u == EPOCHS * NMB {
            runs[cx.run].update = 0u;
            runs[cx.run].iteration = cx.it + 1u;
        } else {
            runs[cx.run].update = u + 1u;
        }
    }
}

fn adam(i: u32, g: f32, step: f32, sqrt_bc2: f32) {
    let m = 0.9 * adam_m[i] + (1.0 - 0.9) * g;
    let v = 0.999 * adam_v[i] + (1.0 - 0.999) * g * g;
    adam_m[i] = m;
    adam_v[i] = v;
    params[i] -= step * m / (sqrt(v) / sqrt_bc2 + ADAM_EPS);
}

