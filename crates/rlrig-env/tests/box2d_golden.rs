//! LunarLander and BipedalWalker against Gymnasium, step by step (data:
//! scripts/golden/make_golden_box2d.py, Gymnasium 1.4 with pybox2d 2.3.10).
//!
//! Both sides run the same C++, pybox2d's Box2D 2.3.0 (crate `rlrig-box2d`; see
//! `src/envs/b2.rs`). Three checks:
//! 1. recorded episodes (the first after `gym.make`, random draws and actions replayed):
//!    observations within 1e-4 and rewards and termination flags equal over every step of
//!    every episode; where an episode diverges, the report says at which step;
//! 2. return and length statistics of the random policy (1,000 episodes) and of Gymnasium's
//!    heuristics (200; the walker also an open-loop gait) within two standard errors;
//! 3. the walker terrain and the walker heuristic's port, exactly.

use rlrig_env::envs::bipedal_walker::{self as walker, WalkerParams};
use rlrig_env::envs::lunar_lander::{
    DRAWS, Engines, LunarLanderParams, heuristic_continuous, heuristic_discrete, reset_from_draws,
    step_with,
};
use rlrig_env::envs::{BipedalWalker, BipedalWalkerHardcore, LunarLander, LunarLanderContinuous};
use rlrig_env::{Env, Purpose, Rng, Transition};
use serde_json::Value;

/// A golden file: `LunarLander-v3.json` (both landers) or `BipedalWalker-v3.json` (both walkers).
fn golden(file: &str) -> Value {
    let path = format!("{}/tests/golden/{file}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Observations are compared this closely.
const OBS_TOL: f64 = 1e-4;

/// How one replayed episode compared.
#[derive(Default)]
struct Replay {
    steps: usize,
    /// The first step whose observation is more than `OBS_TOL` from the reference's.
    obs_diverged: Option<usize>,
    /// The first step whose reward (1e-3) or termination flag differs.
    outcome_diverged: Option<usize>,
}

impl Replay {
    fn obs(&mut self, t: usize, got: &[f32], want: &[f64]) {
        let far = got
            .iter()
            .zip(want)
            .any(|(&a, &b)| (f64::from(a) - b).abs() > OBS_TOL);
        if far && self.obs_diverged.is_none() {
            self.obs_diverged = Some(t);
        }
    }

    fn outcome(&mut self, t: usize, reward: (f64, f64), terminated: (bool, bool)) {
        let differs = (reward.0 - reward.1).abs() > 1e-3 || terminated.0 != terminated.1;
        if differs && self.outcome_diverged.is_none() {
            self.outcome_diverged = Some(t);
        }
    }

    /// Compares step `t`'s reward and flag with the recording's; true where the episode
    /// ends on either side.
    fn outcome_of(&mut self, t: usize, traj: &Value, tr: Transition) -> bool {
        let n = traj["actions"].as_array().unwrap().len();
        let want_term = t + 1 == n && traj["terminated"].as_bool().unwrap();
        let want_reward = traj["rewards"][t].as_f64().unwrap();
        self.steps = t + 1;
        self.outcome(t + 1, (tr.reward, want_reward), (tr.terminated, want_term));
        tr.terminated || want_term
    }

    /// Follows a recorded episode from `s`, the state its reset's draws give: the first
    /// observation, then each recorded action through `step(s, t, action)`, comparing the
    /// observations the recording has and every reward and flag, until the episode ends on
    /// either side.
    fn follow<E: Env<Obs = f32>>(
        p: &E::Params,
        s: &mut E::State,
        traj: &Value,
        mut step: impl FnMut(&mut E::State, usize, &Value) -> Transition,
    ) -> Replay {
        let mut obs = vec![0f32; E::OBS_DIM];
        let mut r = Replay::default();
        E::observe(p, s, &mut obs);
        r.obs(0, &obs, &floats(&traj["obs0"]));
        for (t, a) in traj["actions"].as_array().unwrap().iter().enumerate() {
            let tr = step(s, t, a);
            if let Some(want) = traj["obs"].get(t) {
                E::observe(p, s, &mut obs);
                r.obs(t + 1, &obs, &floats(want));
            }
            if r.outcome_of(t, traj, tr) {
                break;
            }
        }
        r
    }

    fn line(&self, what: &str) -> String {
        let at = |x: Option<usize>| x.map_or("never".to_string(), |t| format!("at step {t}"));
        format!(
            "{what}: {} steps, observations diverge {}, rewards/flags {}\n",
            self.steps,
            at(self.obs_diverged),
            at(self.outcome_diverged)
        )
    }
}

/// Checks a set of replays: every episode within `OBS_TOL` and with the reference's rewards
/// and flags at every step, to its end; a failure names each episode's first step off.
fn judge(name: &str, replays: &[(String, Replay)]) {
    let mut report = String::new();
    let mut failures = Vec::new();
    for (what, r) in replays {
        report += &r.line(what);
        if let Some(t) = r.obs_diverged {
            failures.push(format!("{what}: observation off at step {t}"));
        }
        if let Some(t) = r.outcome_diverged {
            failures.push(format!("{what}: reward or flag off at step {t}"));
        }
    }
    eprintln!("{name}:\n{report}");
    assert!(failures.is_empty(), "{name}: {failures:?}\n{report}");
}

/// Every recorded episode of `env` in `g`, replayed, with its name.
fn replays(g: &Value, env: &str, replay: impl Fn(&Value) -> Replay) -> Vec<(String, Replay)> {
    g["trajectories"][env]
        .as_array()
        .unwrap()
        .iter()
        .map(|traj| (format!("{env} seed {}", traj["seed"]), replay(traj)))
        .collect()
}

/// Replays one recorded lander episode (draws, actions, dispersions; every step's
/// observation).
fn replay_lander(traj: &Value) -> Replay {
    let p = LunarLanderParams::default();
    let draws: [f64; DRAWS] = floats(&traj["draws"]).try_into().unwrap();
    let mut s = reset_from_draws(&p, draws);
    Replay::follow::<LunarLander>(&p, &mut s, traj, |s, t, a| {
        let e = match a {
            Value::Array(a) => {
                // As recorded: the random policy passed Python floats (float32 values'
                // shortest decimals), which Gymnasium widens as they are.
                Engines::throttles([a[0].as_f64().unwrap(), a[1].as_f64().unwrap()])
            }
            a => Engines::discrete(a.as_i64().unwrap() as i32),
        };
        let d = floats(&traj["dispersions"][t]);
        step_with(s, e, [d[0], d[1]])
    })
}

#[test]
fn lander_episodes_follow_gymnasium_step_by_step() {
    let g = golden("LunarLander-v3.json");
    for env in ["LunarLander-v3", "LunarLanderContinuous-v3"] {
        let replays = replays(&g, env, replay_lander);
        assert_eq!(replays.len(), 4);
        judge(env, &replays);
    }
}

/// Mean and (population) standard deviation of the returns, then of the lengths, of
/// (return, length) pairs.
fn summary(episodes: &[(f64, f64)]) -> [f64; 4] {
    let n = episodes.len() as f64;
    let ms = |x: fn(&(f64, f64)) -> f64| {
        let m = episodes.iter().map(x).sum::<f64>() / n;
        let var = episodes.iter().map(|e| (x(e) - m).powi(2)).sum::<f64>() / n;
        (m, var.sqrt())
    };
    let ((mr, sr), (ml, sl)) = (ms(|e| e.0), ms(|e| e.1));
    [mr, sr, ml, sl]
}

/// Return and length statistics of the first episode of each of `n` envs, as
/// `make_sync(E::ID, VecConfig::new(n).seed(seed))` starts them (env `k` on stream
/// `(seed, Env, k)`), acting with `policy(k)`'s actor (fed the step and the observation;
/// its random draws from stream `(seed, Policy, k)`). Each episode runs alone to its end
/// on the shared 2-thread pool: a vector env would step every env until the last one ends
/// (random walkers last 600-700 steps of up to 1,600-2,000), most of its steps wasted.
fn first_episodes<E, P>(seed: u64, n: usize, policy: impl Fn(Rng) -> P + Sync) -> [f64; 4]
where
    E: Env<Obs = f32>,
    P: FnMut(usize, &[f32]) -> E::Action,
{
    let p = E::Params::default();
    let limit = E::max_episode_steps(&p).unwrap() as usize;
    let mut episodes = vec![(0.0, 0.0); n];
    rlrig_env::pool::Pool::shared(2)
        .unwrap()
        .for_each_mut(&mut episodes, |k, out| {
            let mut env_rng = Rng::stream(seed, Purpose::Env, k as u64);
            let mut act = policy(Rng::stream(seed, Purpose::Policy, k as u64));
            let mut s = E::reset(&p, &mut env_rng);
            let mut obs = vec![0f32; E::OBS_DIM];
            let mut ret = 0.0;
            for t in 1..=limit {
                E::observe(&p, &s, &mut obs);
                let tr = E::step(&p, &mut s, &act(t - 1, &obs), &mut env_rng);
                ret += tr.reward;
                if tr.terminated || t == limit {
                    *out = (ret, t as f64);
                    return;
                }
            }
        });
    summary(&episodes)
}

/// Return and length statistics over `n` episodes of the random policy or Gymnasium's
/// lander heuristic.
fn lander_stats(env: &str, policy: &str, n: usize) -> [f64; 4] {
    match (env == LunarLander::ID, policy == "heuristic") {
        (true, true) => {
            first_episodes::<LunarLander, _>(77, n, |_| |_, o: &[f32]| heuristic_discrete(o))
        }
        (true, false) => {
            first_episodes::<LunarLander, _>(77, n, |mut r| move |_, _: &[f32]| r.below(4) as i32)
        }
        (false, true) => first_episodes::<LunarLanderContinuous, _>(77, n, |_| {
            |_, o: &[f32]| heuristic_continuous(o)
        }),
        (false, false) => first_episodes::<LunarLanderContinuous, _>(77, n, |mut r| {
            move |_, _: &[f32]| [r.uniform(-1.0, 1.0) as f32, r.uniform(-1.0, 1.0) as f32]
        }),
    }
}

/// `got` (mean, sd over `n`) against the reference's (mean, sd over `wn`): the difference in
/// standard errors of the difference.
fn z(got: (f64, f64, usize), want: (f64, f64, usize)) -> f64 {
    let se = (got.1 * got.1 / got.2 as f64 + want.1 * want.1 / want.2 as f64).sqrt();
    (got.0 - want.0) / se.max(1e-9)
}

/// Compares rlrig's mean return and length with the reference's statistics `want`: both
/// within two standard errors; returns the report line and the failures.
fn compare(what: &str, got: [f64; 4], n: usize, want: &Value) -> (String, Vec<String>) {
    let w = |k: &str| want[k].as_f64().unwrap();
    let wn = want["episodes"].as_u64().unwrap() as usize;
    let [mr, sr, ml, sl] = got;
    let zr = z((mr, sr, n), (w("mean_return"), w("std_return"), wn));
    let zl = z((ml, sl, n), (w("mean_length"), w("std_length"), wn));
    let line = format!(
        "{what}: return {mr:.1} ± {sr:.1} (ref {:.1} ± {:.1}, z {zr:.2}), length {ml:.1} ± {sl:.1} (ref {:.1} ± {:.1}, z {zl:.2}), {n} vs {wn} episodes\n",
        w("mean_return"),
        w("std_return"),
        w("mean_length"),
        w("std_length"),
    );
    let mut failures = Vec::new();
    if zr.abs() > 2.0 {
        failures.push(format!("{what}: mean return z = {zr:.2}"));
    }
    if zl.abs() > 2.0 {
        failures.push(format!("{what}: mean length z = {zl:.2}"));
    }
    (line, failures)
}

/// Compares rlrig's statistics of each env's policies, `stats(env, policy, episodes)`,
/// with the reference's in the golden file `file` ([`compare`]); the failures name every
/// env and policy off.
fn check_statistics(
    file: &str,
    envs: [&str; 2],
    policies: &[(&str, usize)],
    stats: impl Fn(&str, &str, usize) -> [f64; 4],
) {
    let g = golden(file);
    let mut report = String::new();
    let mut failures = Vec::new();
    for env in envs {
        for &(policy, n) in policies {
            let (line, f) = compare(
                &format!("{env} {policy}"),
                stats(env, policy, n),
                n,
                &g["statistics"][env][policy],
            );
            report += &line;
            failures.extend(f);
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{failures:?}\n{report}");
}

#[test]
fn statistics_match_the_reference() {
    check_statistics(
        "LunarLander-v3.json",
        [LunarLander::ID, LunarLanderContinuous::ID],
        &[("random", 1000), ("heuristic", 200)],
        lander_stats,
    );
}

// ---------------------------------------------------------------------------------------
// BipedalWalker (data: make_golden_box2d.py --walker)
// ---------------------------------------------------------------------------------------

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

/// Replays one recorded walker episode: the terrain built from its draws is the reference's
/// (heights to float rounding, the same obstacles), the state vector is the draws, and the
/// recorded actions give the reference's observations, rewards and flags.
fn replay_walker(env: &str, traj: &Value) -> Replay {
    let p = walker_params(env);
    let what = format!("{env} seed {}", traj["seed"]);
    let draws = floats(&traj["draws"]);
    let mut s = walker::reset_from_draws(&p, &draws).unwrap();
    let want = floats(&traj["terrain_y"]);
    let got = &s.sim().terrain_y;
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!((a - b).abs() < 1e-9, "{what}: terrain_y[{i}] {a} vs {b}");
    }
    assert_eq!(
        s.sim().obstacles.len() as u64,
        traj["obstacles"].as_u64().unwrap(),
        "{what}"
    );
    assert_eq!(BipedalWalker::state_to_vec(&s), draws);
    Replay::follow::<BipedalWalker>(&p, &mut s, traj, |s, _, a| {
        let a: [f32; 4] = std::array::from_fn(|k| a[k].as_f64().unwrap() as f32);
        walker::step(s, &a)
    })
}

#[test]
fn walker_episodes_follow_gymnasium_step_by_step() {
    let g = golden("BipedalWalker-v3.json");
    for env in ["BipedalWalker-v3", "BipedalWalkerHardcore-v3"] {
        let replays = replays(&g, env, |traj| replay_walker(env, traj));
        assert_eq!(replays.len(), 3);
        // Whole episodes (up to the 300 recorded steps): both sides run pybox2d's Box2D
        // 2.3.0. With Box2D 2.3.1 (crate wrapped2d, until 2026-11-27) four of the six left
        // the reference after 9 to 54 steps: 2.3.1 rounds `b2Sweep::Advance` differently,
        // and the chaotic walker amplifies the last bit past 1e-4.
        judge(env, &replays);
    }
}

/// Mean/std of return and length over `n` episodes of the random policy, the gait or
/// Gymnasium's walker heuristic (one controller per env, fed every observation).
fn walker_stats(env: &str, policy: &str, n: usize) -> [f64; 4] {
    if env.contains("Hardcore") {
        walker_episodes::<BipedalWalkerHardcore>(policy, n)
    } else {
        walker_episodes::<BipedalWalker>(policy, n)
    }
}

fn walker_episodes<E: Env<Action = [f32; 4], Obs = f32>>(policy: &str, n: usize) -> [f64; 4] {
    first_episodes::<E, _>(78, n, |mut rng| {
        let mut heuristic = walker::WalkerHeuristic::default();
        move |t, obs: &[f32]| match policy {
            "gait" => gait(t),
            "heuristic" => heuristic.act(obs),
            _ => std::array::from_fn(|_| rng.uniform(-1.0, 1.0) as f32),
        }
    })
}

#[test]
fn walker_statistics_match_the_reference() {
    check_statistics(
        "BipedalWalker-v3.json",
        [BipedalWalker::ID, BipedalWalkerHardcore::ID],
        &[("random", 1000), ("gait", 100), ("heuristic", 100)],
        walker_stats,
    );
}

/// The walker heuristic is Gymnasium's, action for action: fed the observations of the
/// recorded heuristic episodes, it returns the actions Gymnasium's controller returned.
#[test]
fn walker_heuristic_is_gymnasiums() {
    let g = golden("BipedalWalker-v3.json");
    let mut n = 0;
    for env in ["BipedalWalker-v3", "BipedalWalkerHardcore-v3"] {
        for traj in g["trajectories"][env].as_array().unwrap() {
            let actions = traj["actions"].as_array().unwrap();
            let obs = traj["obs"].as_array().unwrap();
            // Only the heuristic's episodes: its first action from the reset's observation.
            let mut h = walker::WalkerHeuristic::default();
            let o0: Vec<f32> = floats(&traj["obs0"]).iter().map(|&x| x as f32).collect();
            let first = h.act(&o0);
            if (f64::from(first[0]) - actions[0][0].as_f64().unwrap()).abs() > 1e-4 {
                continue;
            }
            for (t, o) in obs.iter().enumerate().take(actions.len() - 1) {
                let o: Vec<f32> = floats(o).iter().map(|&x| x as f32).collect();
                let got = h.act(&o);
                let want = floats(&actions[t + 1]);
                for k in 0..4 {
                    // Gymnasium computes in float32 (NEP 50), rlrig in f64.
                    assert!(
                        (f64::from(got[k]) - want[k]).abs() < 1e-4,
                        "{env} seed {} step {}: {got:?} vs {want:?}",
                        traj["seed"],
                        t + 1
                    );
                }
                n += 1;
            }
        }
    }
    assert!(n >= 250, "{n} heuristic steps compared");
}
