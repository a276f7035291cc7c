//! Golden tests: trajectories recorded from Gymnasium (scripts/golden/make_golden.py)
//! replayed through rlrig's executor. Observations within 1e-6 relative (or 1e-9
//! absolute), rewards bit-exact, flags exact, same episode length.

use rlrig_env::replay::replay;
use serde_json::Value;

fn check_env(id: &str) {
    let path = format!("{}/tests/golden/{id}.json", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["env"], id);
    let episodes = doc["episodes"].as_array().unwrap();
    let mut ends = (0, 0);
    for ep in episodes {
        let what = format!("{id} seed {} policy {}", ep["seed"], ep["policy"]);
        let state: Vec<f64> = ep["state"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let actions: Vec<Vec<f64>> = ep["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| match a {
                Value::Array(xs) => xs.iter().map(|x| x.as_f64().unwrap()).collect(),
                x => vec![x.as_f64().unwrap()],
            })
            .collect();
        let expected = ep["steps"].as_array().unwrap();
        let got = replay(id, &state, &actions).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.len(), expected.len(), "{what}: episode length");
        for (t, (g, e)) in got.iter().zip(expected).enumerate() {
            let eobs: Vec<f32> = e["obs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            assert_eq!(g.obs.len(), eobs.len());
            for (k, (a, b)) in g.obs.iter().zip(&eobs).enumerate() {
                let (a, b) = (f64::from(*a), f64::from(*b));
                let ok = (a - b).abs() <= 1e-9 || (a - b).abs() <= 1e-6 * b.abs();
                assert!(ok, "{what}: step {t} obs[{k}]: rlrig {a} vs gymnasium {b}");
            }
            let er = e["reward"].as_f64().unwrap();
            assert_eq!(
                g.reward.to_bits(),
                er.to_bits(),
                "{what}: step {t} reward {} vs {er}",
                g.reward
            );
            assert_eq!(
                g.terminated,
                e["terminated"].as_bool().unwrap(),
                "{what}: step {t} terminated"
            );
            assert_eq!(
                g.truncated,
                e["truncated"].as_bool().unwrap(),
                "{what}: step {t} truncated"
            );
        }
        let last = got.last().unwrap();
        if last.terminated {
            ends.0 += 1;
        }
        if last.truncated {
            ends.1 += 1;
        }
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
    let path = format!(
        "{}/tests/golden/CartPole-v1.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let n = 9;
    for ep in doc["episodes"].as_array().unwrap() {
        let state: Vec<f64> = ep["state"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let mut env = SyncVecEnv::<CartPole>::new(VecConfig::new(n)).unwrap();
        let s0 = CartPole::state_from_slice(&Default::default(), &state).unwrap();
        for k in 0..n {
            env.set_state(k, s0);
        }
        let actions = ep["actions"].as_array().unwrap();
        for (t, (a, e)) in actions
            .iter()
            .zip(ep["steps"].as_array().unwrap())
            .enumerate()
        {
            env.step(&vec![a.as_i64().unwrap() as i32; n]).unwrap();
            let eobs: Vec<f32> = e["obs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            for k in 0..n {
                for (i, want) in eobs.iter().enumerate() {
                    let got = env.obs()[k * 4 + i];
                    let (g, w) = (f64::from(got), f64::from(*want));
                    assert!(
                        (g - w).abs() <= 1e-9 || (g - w).abs() <= 1e-6 * w.abs(),
                        "lane {k} step {t} obs[{i}]: {g} vs {w}"
                    );
                }
                assert_eq!(
                    env.rewards()[k],
                    e["reward"].as_f64().unwrap(),
                    "lane {k} step {t}"
                );
                assert_eq!(
                    env.terminated()[k],
                    e["terminated"].as_bool().unwrap(),
                    "lane {k} step {t}"
                );
                assert_eq!(
                    env.truncated()[k],
                    e["truncated"].as_bool().unwrap(),
                    "lane {k} step {t}"
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
    let path = format!(
        "{}/tests/golden/MinAtar-Breakout-v1.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["sticky_action_prob"], 0.0);
    let p = BreakoutParams {
        sticky_action_prob: 0.0,
    };
    let mut rewards = 0.0;
    for ep in doc["episodes"].as_array().unwrap() {
        let what = format!("seed {} policy {}", ep["seed"], ep["policy"]);
        let state: Vec<f64> = ep["state"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let actions: Vec<Vec<f64>> = ep["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| vec![a.as_f64().unwrap()])
            .collect();
        let got = rlrig_env::replay::replay_env::<Breakout>(&p, &state, &actions)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let want = ep["steps"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{what}: episode length");
        for (t, (g, w)) in got.iter().zip(want).enumerate() {
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
            assert_eq!(ones, want_ones, "{what}: step {t} frame");
            assert!(g.obs.iter().all(|v| *v == 0.0 || *v == 1.0));
            assert_eq!(
                g.reward,
                w["reward"].as_f64().unwrap(),
                "{what}: step {t} reward"
            );
            assert_eq!(
                g.terminated,
                w["terminated"].as_bool().unwrap(),
                "{what}: step {t} terminated"
            );
            assert!(!g.truncated);
            rewards += g.reward;
        }
    }
    assert!(rewards >= 4.0, "the golden episodes should break bricks");
}
