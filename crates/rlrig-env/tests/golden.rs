//! Golden tests: trajectories recorded from the reference implementations
//! (scripts/golden/) replayed through rlrig's executor. Classic control against
//! Gymnasium: observations within 1e-6 relative (or 1e-9 absolute), rewards bit-exact,
//! flags exact, same episode length. MinAtar against the `minatar` package: exact.

use rlrig_env::envs::minatar::Game;
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

/// The same golden episodes through a batch kernel: `n` copies of each episode side by
/// side (the kernel's SIMD lanes or blocks and its scalar tail) must each match
/// Gymnasium like the replay does.
fn check_every_lane<E: rlrig_env::Env<Obs = f32>>(
    id: &str,
    n: usize,
    elem: impl Fn(f64) -> <E::Action as rlrig_env::Action>::Elem,
) {
    check_every_lane_with::<E>(id, &Default::default(), n, elem);
}

fn check_every_lane_with<E: rlrig_env::Env<Obs = f32>>(
    id: &str,
    params: &E::Params,
    n: usize,
    elem: impl Fn(f64) -> <E::Action as rlrig_env::Action>::Elem,
) {
    use rlrig_env::{SyncVecEnv, VecConfig};
    let (_, episodes) = load(id, id);
    let d = E::OBS_DIM;
    for ep in &episodes {
        let mut env = SyncVecEnv::<E>::with_params(params.clone(), VecConfig::new(n)).unwrap();
        let s0 = E::state_from_slice(params, &ep.state).unwrap();
        for k in 0..n {
            env.set_state(k, s0.clone());
        }
        for (t, (a, e)) in ep.actions.iter().zip(&ep.steps).enumerate() {
            let actions: Vec<_> = (0..n).map(|_| elem(a[0])).collect();
            env.step(&actions).unwrap();
            for k in 0..n {
                let what = format!("{} lane {k} step {t}", ep.what);
                assert_obs_close(&env.obs()[k * d..(k + 1) * d], &e["obs"], &what);
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

#[test]
fn cartpole_batch_kernel_matches_gymnasium_in_every_lane() {
    // 8 SIMD lanes and the scalar tail.
    check_every_lane::<rlrig_env::envs::CartPole>("CartPole-v1", 9, |a| a as i32);
}

#[test]
fn pendulum_batch_kernel_matches_gymnasium_in_every_lane() {
    // One 16-env block and the scalar tail.
    check_every_lane::<rlrig_env::envs::Pendulum>("Pendulum-v1", 17, |a| a as f32);
}

#[test]
fn acrobot_batch_kernel_matches_gymnasium_in_every_lane() {
    // One 8-env block and the scalar tail.
    check_every_lane::<rlrig_env::envs::Acrobot>("Acrobot-v1", 9, |a| a as i32);
}

/// The opt-in fast sin/cos changes the last bits, but the golden episodes (122 and 500
/// steps) stay within the golden tolerance: a wrong identity or a sin/cos off by more
/// than a few ulps would not.
#[test]
fn acrobot_fast_trig_stays_within_the_golden_tolerance() {
    let p = rlrig_env::envs::acrobot::AcrobotParams {
        fast_trig: true,
        ..Default::default()
    };
    check_every_lane_with::<rlrig_env::envs::Acrobot>("Acrobot-v1", &p, 9, |a| a as i32);
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
        ..Default::default()
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

/// The draws the `minatar` package made, fed back in order; asking for a different kind
/// of draw, other bounds, or more draws than it made fails the test.
struct Recorded<'a> {
    draws: std::slice::Iter<'a, Value>,
    what: String,
}

impl Recorded<'_> {
    fn of<'a>(draws: Option<&'a Value>, what: String) -> Recorded<'a> {
        static NONE: Vec<Value> = Vec::new();
        let draws = draws.map_or(&NONE, |d| d.as_array().unwrap());
        Recorded {
            draws: draws.iter(),
            what,
        }
    }

    fn next(&mut self) -> &Value {
        let what = &self.what;
        self.draws
            .next()
            .unwrap_or_else(|| panic!("{what}: rlrig draws more than the package did"))
    }

    fn done(mut self) {
        if let Some(d) = self.draws.next() {
            panic!(
                "{}: the package drew {d} and more, rlrig did not",
                self.what
            );
        }
    }
}

impl rlrig_env::envs::minatar::Draws for Recorded<'_> {
    fn rand(&mut self) -> f64 {
        let what = self.what.clone();
        let d = self.next();
        assert_eq!(
            d[0], "u",
            "{what}: rlrig asks for rand(), the package drew {d}"
        );
        d[1].as_f64().unwrap()
    }

    fn randint(&mut self, low: i32, high: i32) -> i32 {
        let what = self.what.clone();
        let d = self.next();
        assert!(
            d[0] == "i" && d[1] == low && d[2] == high,
            "{what}: rlrig asks for randint({low}, {high}), the package drew {d}"
        );
        d[3].as_i64().unwrap() as i32
    }
}

/// FNV-1a (64 bit) of the 1s' indices as u32 little-endian, as the golden script hashes
/// frames after step 300.
fn fnv(ones: &[usize]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &i in ones {
        for b in (i as u32).to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// Replays a MinAtar golden file of a game that draws as it plays: the package's draws
/// go in, frames (every channel), rewards and termination must come out exactly. The
/// episodes must cover scoring: at least `min_total` reward in all (for `scoring`).
fn check_minatar_game<E: Game>(file: &str, min_total: f64, scoring: &str) {
    let path = format!("{}/tests/golden/{file}.json", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["env"], E::ID);
    assert_eq!(doc["sticky_action_prob"], 0.0);
    let p = E::Params::default();
    let mut frame = vec![0.0f32; E::OBS_DIM];
    let ones_of = |frame: &[f32]| -> Vec<usize> {
        assert!(frame.iter().all(|v| *v == 0.0 || *v == 1.0));
        (0..frame.len()).filter(|&i| frame[i] == 1.0).collect()
    };
    let as_ones = |v: &Value| -> Vec<usize> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect()
    };
    let mut total = 0.0;
    for ep in doc["episodes"].as_array().unwrap() {
        let what = format!("{} seed {} policy {}", E::ID, ep["seed"], ep["policy"]);
        let mut d = Recorded::of(Some(&ep["reset_draws"]), format!("{what} reset"));
        let mut s = E::reset_game(&mut d);
        d.done();
        E::observe(&p, &s, &mut frame);
        assert_eq!(ones_of(&frame), as_ones(&ep["obs0"]), "{what}: first frame");
        let actions = ep["actions"].as_array().unwrap();
        let steps = ep["steps"].as_array().unwrap();
        for (t, (a, w)) in actions.iter().zip(steps).enumerate() {
            let what = format!("{what} step {t}");
            let mut d = Recorded::of(w.get("d"), what.clone());
            let tr = E::step_game(&p, &mut s, a.as_u64().unwrap() as u8, &mut d);
            d.done();
            E::observe(&p, &s, &mut frame);
            let ones = ones_of(&frame);
            match (w.get("o"), w.get("h")) {
                (Some(o), _) => assert_eq!(ones, as_ones(o), "{what}: frame"),
                (_, Some(h)) => assert_eq!(fnv(&ones), h.as_str().unwrap(), "{what}: frame hash"),
                _ => panic!("{what}: the golden step has no frame"),
            }
            assert_eq!(tr.reward, w["r"].as_f64().unwrap(), "{what}: reward");
            assert_eq!(tr.terminated, w["t"] == 1, "{what}: terminated");
            // The state vector (replay, checkpoints) must carry the whole state.
            let v = E::state_to_vec(&s);
            let back = E::state_from_slice(&p, &v).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(E::state_to_vec(&back), v, "{what}: state vector round trip");
            total += tr.reward;
        }
        let last = &steps[steps.len() - 1];
        assert!(
            last["t"] == 1 || steps.len() >= 400,
            "{what}: the episode neither ended nor ran long"
        );
    }
    assert!(
        total >= min_total,
        "the golden episodes should {scoring}: {total}"
    );
}

#[test]
fn minatar_asterix_matches_the_minatar_package() {
    check_minatar_game::<rlrig_env::envs::Asterix>("MinAtar-Asterix-v1", 20.0, "collect gold");
}

#[test]
fn minatar_freeway_matches_the_minatar_package() {
    check_minatar_game::<rlrig_env::envs::Freeway>("MinAtar-Freeway-v1", 20.0, "cross");
}

#[test]
fn minatar_seaquest_matches_the_minatar_package() {
    check_minatar_game::<rlrig_env::envs::Seaquest>("MinAtar-Seaquest-v1", 10.0, "score");
}

#[test]
fn minatar_space_invaders_matches_the_minatar_package() {
    check_minatar_game::<rlrig_env::envs::SpaceInvaders>(
        "MinAtar-SpaceInvaders-v1",
        20.0,
        "shoot aliens",
    );
}
