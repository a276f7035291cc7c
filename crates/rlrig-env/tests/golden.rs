//! Golden tests: trajectories recorded from the reference implementations
//! (scripts/golden/) replayed through rlrig's executor. Classic control against
//! Gymnasium: observations within 1e-6 relative (or 1e-9 absolute), rewards bit-exact,
//! flags exact, same episode length. MinAtar against the `minatar` package: exact.

use rlrig_env::replay::{ReplayStep, replay};
use serde_json::Value;

/// One recorded episode of a golden file.
struct Episode {
    what: String,
    state: Vec<f64>,
    actions: Vec<Vec<f64>>,
    steps: Vec<Value>,
}

/// The golden file `tests/golden/<file>.json`, checked to be for `env`.
fn load(file: &str, env: &str) -> (Value, Vec<Episode>) {
    let path = format!("{}/tests/golden/{file}.json", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["env"], env);
    let nums = |v: &Value| -> Vec<f64> {
        match v {
            Value::Array(xs) => xs.iter().map(|x| x.as_f64().unwrap()).collect(),
            x => vec![x.as_f64().unwrap()],
        }
    };
    let episodes = doc["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ep| Episode {
            what: format!("{env} seed {} policy {}", ep["seed"], ep["policy"]),
            state: nums(&ep["state"]),
            actions: ep["actions"].as_array().unwrap().iter().map(nums).collect(),
            steps: ep["steps"].as_array().unwrap().clone(),
        })
        .collect();
    (doc, episodes)
}

/// Observation within 1e-6 relative or 1e-9 absolute of the reference's float32 one.
fn assert_obs_close(got: &[f32], want: &Value, what: &str) {
    let want: Vec<f32> = want
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(got.len(), want.len(), "{what}: observation length");
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        let (a, b) = (f64::from(*a), f64::from(*b));
        let ok = (a - b).abs() <= 1e-9 || (a - b).abs() <= 1e-6 * b.abs();
        assert!(ok, "{what} obs[{k}]: rlrig {a} vs reference {b}");
    }
}

/// Reward bit-exact, flags exact.
fn assert_outcome(reward: f64, terminated: bool, truncated: bool, want: &Value, what: &str) {
    let er = want["reward"].as_f64().unwrap();
    assert_eq!(
        reward.to_bits(),
        er.to_bits(),
        "{what}: reward {reward} vs {er}"
    );
    assert_eq!(
        terminated,
        want["terminated"].as_bool().unwrap(),
        "{what}: terminated"
    );
    assert_eq!(
        truncated,
        want["truncated"].as_bool().unwrap(),
        "{what}: truncated"
    );
}

fn check_env(id: &str) {
    let (_, episodes) = load(id, id);
    let mut ends = (0, 0);
    for ep in &episodes {
        let got: Vec<ReplayStep> =
            replay(id, &ep.state, &ep.actions).unwrap_or_else(|e| panic!("{}: {e}", ep.what));
        assert_eq!(got.len(), ep.steps.len(), "{}: episode length", ep.what);
        for (t, (g, e)) in got.iter().zip(&ep.steps).enumerate() {
            let what = format!("{} step {t}", ep.what);
            assert_obs_close(&g.obs, &e["obs"], &what);
            assert_outcome(g.reward, g.terminated, g.truncated, e, &what);
        }
        let last = got.last().unwrap();
        ends.0 += usize::from(last.terminated);
        ends.1 += usize::from(last.truncated);
    }
    // Every env's file covers the ways its episodes can end.
    if id != "Pendulum-v1" {
        assert!(ends.0 > 0, "{id}: no episode ends by termination");
    }
    assert!(ends.1 > 0, "{id}: no episode ends by the time limit");
}

#[test]
fn cartpole_matches_gymnasium() {
    check_env("CartPole-v1");
}

#[test]
fn acrobot_matches_gymnasium() {
    check_env("Acrobot-v1");
}

#[test]
fn mountain_car_matches_gymnasium() {
    check_env("MountainCar-v0");
}

#[test]
fn mountain_car_continuous_matches_gymnasium() {
    check_env("MountainCarContinuous-v0");
}

#[test]
fn pendulum_matches_gymnasium() {
    check_env("Pendulum-v1");
}

/// The same golden episodes through the batch kernel: 9 copies of the episode side by
/// side (8 SIMD lanes and the scalar tail) must each match Gymnasium like the replay does.
#[test]
fn cartpole_batch_kernel_matches_gymnasium_in_every_lane() {
    use rlrig_env::envs::CartPole;
    use rlrig_env::{Env, SyncVecEnv, VecConfig};
    let (_, episodes) = load("CartPole-v1", "CartPole-v1");
    let n = 9;
    for ep in &episodes {
        let mut env = SyncVecEnv::<CartPole>::new(VecConfig::new(n)).unwrap();
        let s0 = CartPole::state_from_slice(&Default::default(), &ep.state).unwrap();
        for k in 0..n {
            env.set_state(k, s0);
        }
        for (t, (a, e)) in ep.actions.iter().zip(&ep.steps).enumerate() {
            env.step(&vec![a[0] as i32; n]).unwrap();
            for k in 0..n {
                let what = format!("{} lane {k} step {t}", ep.what);
                assert_obs_close(&env.obs()[k * 4..(k + 1) * 4], &e["obs"], &what);
                assert_outcome(
                    env.rewards()[k],
                    env.terminated()[k],
                    env.truncated()[k],
                    e,
                    &what,
                );
            }
        }
    }
}

/// MinAtar Breakout against the `minatar` package (sticky actions off in both, since
/// their draws come from NumPy): frames, rewards and flags exact.
#[test]
fn minatar_breakout_matches_the_minatar_package() {
    use rlrig_env::envs::Breakout;
    use rlrig_env::envs::minatar_breakout::BreakoutParams;
    let (doc, episodes) = load("MinAtar-Breakout-v1", "MinAtar/Breakout-v1");
    assert_eq!(doc["sticky_action_prob"], 0.0);
    let p = BreakoutParams {
        sticky_action_prob: 0.0,
    };
    let mut rewards = 0.0;
    for ep in &episodes {
        let got = rlrig_env::replay::replay_env::<Breakout>(&p, &ep.state, &ep.actions)
            .unwrap_or_else(|e| panic!("{}: {e}", ep.what));
        assert_eq!(got.len(), ep.steps.len(), "{}: episode length", ep.what);
        for (t, (g, w)) in got.iter().zip(&ep.steps).enumerate() {
            let what = format!("{} step {t}", ep.what);
            let ones: Vec<usize> = g
                .obs
                .iter()
                .enumerate()
                .filter(|(_, v)| **v == 1.0)
                .map(|(i, _)| i)
                .collect();
            let want_ones: Vec<usize> = w["ones"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(ones, want_ones, "{what}: frame");
            assert!(g.obs.iter().all(|v| *v == 0.0 || *v == 1.0));
            assert_outcome(g.reward, g.terminated, g.truncated, w, &what);
            rewards += g.reward;
        }
    }
    assert!(rewards >= 4.0, "the golden episodes should break bricks");
}
