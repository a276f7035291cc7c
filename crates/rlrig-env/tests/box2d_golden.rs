//! LunarLander against Gymnasium (data: scripts/golden/make_golden_box2d.py).
//!
//! Gymnasium runs Box2D 2.3's iterative solver, rlrig Box2D v3's soft-step solver, so
//! trajectories agree closely but not bit for bit (see `envs/lunar_lander.rs`). Two checks:
//! 1. the recorded random draws and actions, replayed: observations follow the reference
//!    within tolerances that grow with time, the return within 3 points, until the lander
//!    first touches the ground (contacts are where the solvers differ most);
//! 2. return and length statistics of the random and the heuristic policy over 200 episodes
//!    each agree with the reference's within sampling error.
//!
//! BipedalWalker: the terrain built from recorded draws is the reference's exactly, and
//! return and length statistics of the random policy and an open-loop gait agree.

use rlrig_env::envs::bipedal_walker::{self as walker, WalkerParams};
use rlrig_env::envs::lunar_lander::{
    DRAWS, Engines, LunarLanderParams, heuristic_continuous, heuristic_discrete, reset_from_draws,
    step_with,
};
use rlrig_env::envs::{BipedalWalker, BipedalWalkerHardcore, LunarLander, LunarLanderContinuous};
use rlrig_env::{Env, Purpose, Rng, Space, VecConfig, make_sync};
use serde_json::Value;

fn golden() -> Value {
    let path = format!(
        "{}/tests/golden/LunarLander-v3.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Replays one recorded trajectory; returns the number of steps compared before touchdown.
fn replay(env: &str, traj: &Value) -> usize {
    let p = LunarLanderParams::default();
    let draws: [f64; DRAWS] = floats(&traj["draws"]).try_into().unwrap();
    let mut s = reset_from_draws(&p, draws);
    let mut obs = [0f32; 8];
    let mut compared = 0;
    let (mut ret, mut want_ret) = (0.0, 0.0);
    let (mut last, mut want_last) = ([0.0; 8], [0.0; 8]);
    for (t, step) in traj["steps"].as_array().unwrap().iter().enumerate() {
        let e = match &step["action"] {
            Value::Array(a) => {
                Engines::continuous(&[a[0].as_f64().unwrap() as f32, a[1].as_f64().unwrap() as f32])
            }
            a => Engines::discrete(a.as_i64().unwrap() as i32),
        };
        let d = floats(&step["dispersion"]);
        let tr = step_with(&p, &mut s, e, [d[0], d[1]]);
        LunarLander::observe(&p, &s, &mut obs);
        let want = floats(&step["obs"]);
        if want[6] != 0.0 || want[7] != 0.0 || obs[6] != 0.0 || obs[7] != 0.0 {
            break;
        }
        let what = format!("{env} seed {} step {t}", traj["seed"]);
        // The solvers differ most in the first step, where the reference's legs start 0.6 m
        // from their joint anchors and outside their limits and each engine snaps them in
        // its own way; the lander leaves it up to 0.03 m and 0.01 rad/s apart, and the
        // difference integrates: positions and the angle may drift by 0.002 per step. The
        // angular velocity (obs[5], scaled by 0.4) does not integrate: 0.04 throughout.
        for k in 0..6 {
            let tol = if k == 5 {
                0.04
            } else {
                0.01 + 0.002 * t as f64
            };
            let (a, b) = (f64::from(obs[k]), want[k]);
            assert!(
                (a - b).abs() <= tol,
                "{what}: obs[{k}] rlrig {a} vs reference {b} (tol {tol})"
            );
        }
        ret += tr.reward;
        want_ret += step["reward"].as_f64().unwrap();
        last = obs.map(f64::from);
        want_last.copy_from_slice(&want);
        assert_eq!(
            tr.terminated,
            step["terminated"].as_bool().unwrap(),
            "{what}"
        );
        compared += 1;
    }
    // Shaping rewards telescope: the return is the last state's shaping minus the reset
    // state's, minus fuel (equal here). So the returns may differ by what the last states'
    // shapings differ by, plus 3 for the reset states (not recorded).
    let explained = shaping(&last) - shaping(&want_last);
    assert!(
        (ret - want_ret - explained).abs() <= 3.0,
        "{env} seed {}: return over {compared} steps {ret} vs reference {want_ret}, of which the states explain {explained}",
        traj["seed"]
    );
    compared
}

/// The reference's reward shaping of an observation.
fn shaping(s: &[f64; 8]) -> f64 {
    -100.0 * (s[0] * s[0] + s[1] * s[1]).sqrt()
        - 100.0 * (s[2] * s[2] + s[3] * s[3]).sqrt()
        - 100.0 * s[4].abs()
        + 10.0 * s[6]
        + 10.0 * s[7]
}

#[test]
fn trajectories_follow_the_reference_until_touchdown() {
    let g = golden();
    for env in ["LunarLander-v3", "LunarLanderContinuous-v3"] {
        let mut total = 0;
        for traj in g["trajectories"][env].as_array().unwrap() {
            total += replay(env, traj);
        }
        // Most of the 4 x 60 recorded steps are in free flight.
        assert!(total >= 150, "{env}: only {total} steps compared");
    }
}

/// Mean/std of return and length, and the share of returns above 200, over `n` episodes.
fn stats(env: &str, heuristic: bool, n: usize) -> [f64; 5] {
    let mut venv = make_sync(env, VecConfig::new(n).seed(77)).unwrap();
    let spec = rlrig_env::spec(env).unwrap();
    let d = spec.obs_dim;
    let mut rngs: Vec<Rng> = (0..n)
        .map(|k| Rng::stream(77, Purpose::Policy, k as u64))
        .collect();
    let (mut ret, mut len, mut done) = (vec![0.0; n], vec![0.0; n], vec![false; n]);
    while !done.iter().all(|&x| x) {
        match spec.action_space {
            Space::Discrete { .. } => {
                let a: Vec<i32> = (0..n)
                    .map(|k| {
                        if heuristic {
                            heuristic_discrete(&venv.obs()[k * d..(k + 1) * d])
                        } else {
                            rngs[k].below(4) as i32
                        }
                    })
                    .collect();
                venv.step(rlrig_env::ActionBuf::Discrete(&a)).unwrap();
            }
            Space::Box { .. } => {
                let mut a = Vec::with_capacity(2 * n);
                for (k, rng) in rngs.iter_mut().enumerate() {
                    if heuristic {
                        a.extend(heuristic_continuous(&venv.obs()[k * d..(k + 1) * d]));
                    } else {
                        a.push(rng.uniform(-1.0, 1.0) as f32);
                        a.push(rng.uniform(-1.0, 1.0) as f32);
                    }
                }
                venv.step(rlrig_env::ActionBuf::Continuous(&a)).unwrap();
            }
        }
        for k in 0..n {
            if !done[k] {
                ret[k] += venv.rewards()[k];
                len[k] += 1.0;
                done[k] = venv.terminated()[k] || venv.truncated()[k];
            }
        }
    }
    let ms = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / n as f64;
        (
            m,
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64).sqrt(),
        )
    };
    let (mr, sr) = ms(&ret);
    let (ml, sl) = ms(&len);
    let solved = ret.iter().filter(|&&r| r > 200.0).count() as f64 / n as f64;
    [mr, sr, ml, sl, solved]
}

#[test]
fn statistics_match_the_reference() {
    let g = golden();
    let n = 200;
    let mut report = String::new();
    let mut failures = Vec::new();
    for env in [LunarLander::ID, LunarLanderContinuous::ID] {
        for (policy, heuristic) in [("random", false), ("heuristic", true)] {
            let want = &g["statistics"][env][policy];
            let w = |k: &str| want[k].as_f64().unwrap();
            let [mr, sr, ml, sl, solved] = stats(env, heuristic, n);
            report += &format!(
                "{env} {policy}: return {mr:.1} ± {sr:.1} (ref {:.1} ± {:.1}), length {ml:.1} ± {sl:.1} (ref {:.1} ± {:.1}), solved {solved:.2} (ref {:.2})\n",
                w("mean_return"),
                w("std_return"),
                w("mean_length"),
                w("std_length"),
                w("solved_share")
            );
            // Means: within 4 standard errors of the difference, or 20 % (the solvers'
            // sleep detection differs: v3 counts position correction as motion, so a landed
            // lander falls asleep, which ends the episode, up to 20 % later).
            let close = |got: f64, want: f64, sd: f64, wsd: f64| {
                (got - want).abs() <= 4.0 * ((sd * sd + wsd * wsd) / n as f64).sqrt()
                    || (got - want).abs() <= 0.2 * want.abs()
            };
            if !close(mr, w("mean_return"), sr, w("std_return")) {
                failures.push(format!("{env} {policy}: mean return"));
            }
            if !close(ml, w("mean_length"), sl, w("std_length")) {
                failures.push(format!("{env} {policy}: mean length"));
            }
            // Spreads within a factor 2.25: under the random policy, a leg striking the ground
            // at a steep angle sometimes spins the lander up in v3 where 2.3 crashes it (v3's
            // soft joint limits, pressed by the leg motors, feed position corrections into the
            // assembly), a heavier tail of low returns: std 217 against 108 (discrete), 154
            // against 123 (continuous); under the heuristic 127 against 92 and 16 against 18.
            if sr > 2.25 * w("std_return") + 5.0 || sr < w("std_return") / 2.25 - 5.0 {
                failures.push(format!("{env} {policy}: std of return"));
            }
            if heuristic && solved < w("solved_share") - 0.1 {
                failures.push(format!("{env} {policy}: lands less often"));
            }
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{failures:?}\n{report}");
}

// ---------------------------------------------------------------------------------------
// BipedalWalker (data: make_golden_box2d.py --walker)
// ---------------------------------------------------------------------------------------

fn walker_golden() -> Value {
    let path = format!(
        "{}/tests/golden/BipedalWalker-v3.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The open-loop gait of the golden script.
fn gait(t: usize) -> [f32; 4] {
    let x = t as f32 * 0.15f32;
    [x.sin(), (x + 1.0).cos(), (x + 3.0).sin(), x.cos()]
}

fn walker_params(env: &str) -> WalkerParams {
    if env.contains("Hardcore") {
        WalkerParams::hardcore()
    } else {
        WalkerParams::default()
    }
}

/// The terrain generator is the reference's, draw for draw: the same draws give the same
/// heights (to float rounding) and the same obstacles.
#[test]
fn walker_terrain_is_the_references() {
    let g = walker_golden();
    for env in ["BipedalWalker-v3", "BipedalWalkerHardcore-v3"] {
        let p = walker_params(env);
        for t in g["terrains"][env].as_array().unwrap() {
            let draws = floats(&t["draws"]);
            let s = walker::reset_from_draws(&p, &draws).unwrap();
            let want = floats(&t["terrain_y"]);
            let got = &s.sim().terrain_y;
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < 1e-9,
                    "{env} seed {}: terrain_y[{i}] {a} vs {b}",
                    t["seed"]
                );
            }
            assert_eq!(
                s.sim().obstacles.len() as u64,
                t["obstacles"].as_u64().unwrap(),
                "{env} seed {}",
                t["seed"]
            );
            // The state vector is the draws, and gives back the same world.
            assert_eq!(BipedalWalker::state_to_vec(&s), draws);
        }
    }
}

/// Mean/std of return and length over `n` episodes of the random policy, the gait or
/// Gymnasium's walker heuristic (one controller per env, fed every observation).
fn walker_stats(env: &str, policy: &str, n: usize) -> [f64; 4] {
    let mut heuristics = vec![walker::WalkerHeuristic::default(); n];
    let mut venv = make_sync(env, VecConfig::new(n).seed(78)).unwrap();
    let mut rngs: Vec<Rng> = (0..n)
        .map(|k| Rng::stream(78, Purpose::Policy, k as u64))
        .collect();
    let (mut ret, mut len, mut done) = (vec![0.0; n], vec![0.0f64; n], vec![false; n]);
    let mut t = 0;
    while !done.iter().all(|&x| x) {
        let mut a = Vec::with_capacity(4 * n);
        for (k, rng) in rngs.iter_mut().enumerate() {
            match policy {
                "gait" => a.extend(gait(t)),
                "heuristic" => a.extend(heuristics[k].act(&venv.obs()[k * 24..(k + 1) * 24])),
                _ => a.extend((0..4).map(|_| rng.uniform(-1.0, 1.0) as f32)),
            }
        }
        venv.step(rlrig_env::ActionBuf::Continuous(&a)).unwrap();
        t += 1;
        for k in 0..n {
            if !done[k] {
                ret[k] += venv.rewards()[k];
                len[k] += 1.0;
                done[k] = venv.terminated()[k] || venv.truncated()[k];
            }
        }
    }
    let ms = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / n as f64;
        (
            m,
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64).sqrt(),
        )
    };
    let (mr, sr) = ms(&ret);
    let (ml, sl) = ms(&len);
    [mr, sr, ml, sl]
}

#[test]
fn walker_statistics_match_the_reference() {
    let g = walker_golden();
    let n = 100;
    let mut report = String::new();
    let mut failures = Vec::new();
    for env in [BipedalWalker::ID, BipedalWalkerHardcore::ID] {
        // Gymnasium's heuristic is not compared: it walks there and falls here (see
        // `WalkerHeuristic`); the port itself is checked below.
        for policy in ["random", "gait"] {
            let want = &g["statistics"][env][policy];
            let w = |k: &str| want[k].as_f64().unwrap();
            let [mr, sr, ml, sl] = walker_stats(env, policy, n);
            report += &format!(
                "{env} {policy}: return {mr:.1} ± {sr:.1} (ref {:.1} ± {:.1}), length {ml:.1} ± {sl:.1} (ref {:.1} ± {:.1})\n",
                w("mean_return"),
                w("std_return"),
                w("mean_length"),
                w("std_length")
            );
            // Means within 4 standard errors of the difference or 20 %, as for the lander.
            // Spreads are not compared: random flailing on hardcore terrain has a heavier tail
            // of low returns on v3 (std 31 against 7), the gait's episode length a wider spread
            // (8 steps against 1: 2.3 ends it at the same step every time).
            let close = |got: f64, want: f64, sd: f64, wsd: f64| {
                (got - want).abs() <= 4.0 * ((sd * sd + wsd * wsd) / n as f64).sqrt()
                    || (got - want).abs() <= 0.2 * want.abs()
            };
            if !close(mr, w("mean_return"), sr, w("std_return")) {
                failures.push(format!("{env} {policy}: mean return"));
            }
            if !close(ml, w("mean_length"), sl, w("std_length")) {
                failures.push(format!("{env} {policy}: mean length"));
            }
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{failures:?}\n{report}");
}

/// The walker heuristic is Gymnasium's, action for action: fed the observations of a
/// Gymnasium episode, it returns the actions Gymnasium's controller returned.
#[test]
fn walker_heuristic_is_gymnasiums() {
    let g = walker_golden();
    let rec = &g["heuristic_actions"];
    let mut h = walker::WalkerHeuristic::default();
    let pairs = rec["obs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(rec["act"].as_array().unwrap());
    let mut n = 0;
    for (t, (o, a)) in pairs.enumerate() {
        let o: Vec<f32> = floats(o).iter().map(|&x| x as f32).collect();
        let got = h.act(&o);
        let want = floats(a);
        for k in 0..4 {
            // Gymnasium computes in float32 (NEP 50), rlrig in f64.
            assert!(
                (f64::from(got[k]) - want[k]).abs() < 1e-4,
                "step {t} action[{k}]: {got:?} vs {want:?}"
            );
        }
        n += 1;
    }
    assert!(n >= 200, "{n} steps recorded");
}
