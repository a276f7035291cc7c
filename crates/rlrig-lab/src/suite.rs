//! `rlrig bench suite` and `rlrig compare`: a fixed, versioned set of workloads, each
//! measured in three columns (stepping only / with inference / with training, as
//! Isaac Lab reports), with a machine fingerprint; and side-by-side tables of results.

use std::collections::BTreeMap;
use std::time::Instant;

use rlrig_env::{ATARI_IDS, ENV_IDS, Purpose, RandomActions, Rng, VecConfig, make_sync, spec};
use rlrig_learn::ppo::{Agent, GreedyBuffers, Ppo, PpoConfig, greedy_actions};
use serde::{Deserialize, Serialize};

use crate::LabError;
use crate::compare::{legend, letter, ratio, ratio_bars, ratio_cell};

/// Bumped whenever a workload's definition changes: results of different versions
/// are not comparable.
pub const SUITE_VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Workload {
    pub name: String,
    /// Environment steps per second, env stepping only.
    pub stepping: Option<f64>,
    /// ... with a 64-64 policy forward pass on every batch.
    pub with_inference: Option<f64>,
    /// ... inside training (PPO: rollout + updates; sac/Pendulum-v1: env steps/s of the
    /// whole preset run; alphazero/ConnectFour: self-play samples/s with training).
    pub with_training: Option<f64>,
    /// Workload-specific figures (e.g. final return).
    #[serde(default)]
    pub extra: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SuiteResult {
    pub suite: String,
    pub version: u32,
    pub rlrig: String,
    pub unix_time: u64,
    pub quick: bool,
    pub threads: usize,
    pub machine: String,
    pub probe: serde_json::Value,
    pub workloads: Vec<Workload>,
}

/// Runs `f` (which does `per_call` env steps) until `secs` have passed; steps/s.
fn rate(secs: f64, per_call: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let t = Instant::now();
    let mut calls = 0u64;
    while t.elapsed().as_secs_f64() < secs || calls < 3 {
        f();
        calls += 1;
    }
    (calls * per_call as u64) as f64 / t.elapsed().as_secs_f64()
}

fn env_workload(
    id: &str,
    num_envs: usize,
    threads: usize,
    secs: f64,
) -> Result<Workload, LabError> {
    let s = spec(id)?;
    // Random actions, precomputed so the timed loops measure only what they name.
    let table = RandomActions::new(&s.action_space, num_envs, 0);
    let cfg = VecConfig::new(num_envs).threads(threads);
    let mut env = make_sync(id, cfg.clone())?;
    let stepping = rate(secs, num_envs, || {
        env.step(table.slice(0, num_envs)).expect("valid actions")
    });
    // With inference: the actor of a 64-64 agent on every batch, greedy actions.
    let mut env = make_sync(id, cfg)?;
    let mut rng = Rng::stream(0, Purpose::Init, 0);
    let agent = Agent::new(
        s.obs_dim,
        &s.action_space,
        &[64, 64],
        rlrig_learn::nn::Activation::Tanh,
        0.0,
        &mut rng,
    );
    let mut bufs = GreedyBuffers::default();
    let (mut ai, mut af) = (
        vec![0i32; num_envs],
        vec![0.0f32; num_envs * agent.action_dim()],
    );
    let ppo_cfg = PpoConfig::default();
    let mut obs = Vec::new();
    let with_inference = rate(secs, num_envs, || {
        let buf = greedy_actions(
            &agent,
            None,
            &ppo_cfg,
            env.obs().f32_in(&mut obs),
            num_envs,
            &mut bufs,
            &mut ai,
            &mut af,
        );
        env.step(buf).expect("valid actions");
    });
    // With training: PPO with the env's preset, a few iterations.
    let mut ppo = Ppo::new(PpoConfig::for_env(id), threads)?;
    let batch = ppo.cfg.batch_size();
    let with_training = rate(secs, batch, || {
        ppo.iterate();
    });
    Ok(Workload {
        name: format!("env/{id}"),
        stepping: Some(stepping),
        with_inference: Some(with_inference),
        with_training: Some(with_training),
        extra: BTreeMap::new(),
    })
}

/// Runs the suite. `--quick` keeps each measurement short (the whole suite in well
/// under two minutes on two cores) and skips the full training run.
/// `only` limits the run to workloads whose name contains it.
pub fn run_suite(
    quick: bool,
    threads: usize,
    only: Option<&str>,
    mut progress: impl FnMut(&str),
) -> Result<SuiteResult, LabError> {
    let secs = if quick { 0.4 } else { 2.0 };
    let wanted = |name: &str| only.is_none_or(|o| name.contains(o));
    let mut workloads = Vec::new();
    for id in ENV_IDS {
        // Of the Atari games (the `atari` feature) only Pong-v5, the seed's game, with 16
        // envs: an emulator takes ~0.1 s to load and a step ~0.4 ms, so 1,024 of them
        // would be minutes of setup for one row.
        let num_envs = match *id {
            "Pong-v5" => 16,
            id if ATARI_IDS.contains(&id) => continue,
            _ => 1024,
        };
        let name = format!("env/{id}");
        if wanted(&name) {
            progress(&name);
            workloads.push(env_workload(id, num_envs, threads, secs)?);
        }
    }
    const TRAINING: [&str; 3] = [
        "ppo/CartPole-v1",
        "sac/Pendulum-v1",
        "alphazero/ConnectFour",
    ];
    if let Some(o) = only
        && workloads.is_empty()
        && !TRAINING.iter().any(|w| w.contains(o))
    {
        return Err(LabError::Selection(format!(
            "--only '{o}' matches no workload (env/<id>, {})",
            TRAINING.join(", ")
        )));
    }
    if !quick && wanted("ppo/CartPole-v1") {
        progress("ppo/CartPole-v1 (500k steps)");
        let mut ppo = Ppo::new(PpoConfig::for_env("CartPole-v1"), threads)?;
        let t = Instant::now();
        while !ppo.done() {
            ppo.iterate();
        }
        let wall = t.elapsed().as_secs_f64();
        let ret = ppo.evaluate(10, 7).returns;
        workloads.push(trained(
            "ppo/CartPole-v1",
            ppo.global_step,
            wall,
            &ret,
            BTreeMap::new(),
        ));
    }
    if !quick && wanted("sac/Pendulum-v1") {
        use rlrig_learn::offpolicy::{Algo, OffPolicy, OffPolicyConfig};
        progress("sac/Pendulum-v1 (20k steps, the preset)");
        let mut r = OffPolicy::new(OffPolicyConfig::for_env(Algo::Sac, "Pendulum-v1"), threads)?;
        let t = Instant::now();
        while !r.done() {
            r.iterate();
        }
        let wall = t.elapsed().as_secs_f64();
        let ret = r.evaluate(10, 7).returns;
        let updates = r.updates as f64 / r.times.learner;
        let extra = BTreeMap::from([("updates_per_sec".into(), updates)]);
        workloads.push(trained(
            "sac/Pendulum-v1",
            r.c.global_step,
            wall,
            &ret,
            extra,
        ));
    }
    if wanted("alphazero/ConnectFour") {
        use rlrig_learn::alphazero::{AlphaZero, AzConfig};
        progress("alphazero/ConnectFour (64 games, 500 simulations)");
        let cfg = AzConfig {
            iterations: if quick { 1 } else { 3 },
            games: 64,
            moves_per_iteration: 4,
            simulations: 500,
            updates_per_iteration: 4,
            eval_games: 0,
            ..AzConfig::default()
        };
        let mut az = AlphaZero::new(cfg)?;
        let t = Instant::now();
        while !az.done() {
            az.iterate();
        }
        let wall = t.elapsed().as_secs_f64();
        let mut extra = BTreeMap::new();
        extra.insert("seconds".into(), wall);
        extra.insert(
            "inference_share".into(),
            az.times.inference / wall.max(1e-9),
        );
        workloads.push(Workload {
            name: "alphazero/ConnectFour".into(),
            stepping: None,
            with_inference: None,
            with_training: Some(az.samples as f64 / wall),
            extra,
        });
    }
    let (machine, probe) = crate::probe::this_machine()?;
    Ok(SuiteResult {
        suite: "rlrig-bench-suite".into(),
        version: SUITE_VERSION,
        rlrig: env!("CARGO_PKG_VERSION").into(),
        unix_time: unix_time(),
        quick,
        threads,
        machine,
        probe,
        workloads,
    })
}

/// Reads a results file, naming the file in errors.
pub fn load(path: &std::path::Path) -> Result<SuiteResult, LabError> {
    read_result(
        path,
        "bench suite",
        "rlrig-bench-suite",
        |r: &SuiteResult| &r.suite,
    )
}

/// Reads the JSON results file `path` of `kind`, whose `suite` field must be `suite`.
pub(crate) fn read_result<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    kind: &'static str,
    suite: &str,
    suite_of: fn(&T) -> &str,
) -> Result<T, LabError> {
    let not_a = |why: String| LabError::NotAResult {
        path: path.to_path_buf(),
        kind,
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|source| LabError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let r: T = serde_json::from_str(&text).map_err(|e| not_a(format!(": {e}")))?;
    if suite_of(&r) != suite {
        return Err(not_a(format!(" (suite '{}')", suite_of(&r))));
    }
    Ok(r)
}

pub const COLUMNS: [&str; 3] = ["stepping", "with_inference", "with_training"];

fn column(w: &Workload, c: &str) -> Option<f64> {
    match c {
        "stepping" => w.stepping,
        "with_inference" => w.with_inference,
        _ => w.with_training,
    }
}

/// Rows `(workload, column, values per file)` over the first file's workloads.
pub fn rows(results: &[(String, SuiteResult)]) -> Vec<(String, &'static str, Vec<Option<f64>>)> {
    let mut out = Vec::new();
    let Some((_, first)) = results.first() else {
        return out;
    };
    for w in &first.workloads {
        for c in COLUMNS {
            if column(w, c).is_none() {
                continue;
            }
            let vals = results
                .iter()
                .map(|(_, r)| {
                    r.workloads
                        .iter()
                        .find(|x| x.name == w.name)
                        .and_then(|x| column(x, c))
                })
                .collect();
            out.push((w.name.clone(), c, vals));
        }
    }
    out
}

/// A markdown table: each file's figure and its ratio to the first file's.
pub fn compare_table(results: &[(String, SuiteResult)]) -> String {
    let mut s = String::new();
    s += &legend(
        "suite",
        "workloads",
        results.iter().map(|(name, r)| {
            (
                name.as_str(),
                r.machine.as_str(),
                r.version,
                format!(
                    "{} threads{}",
                    r.threads,
                    if r.quick { ", quick" } else { "" }
                ),
            )
        }),
    );
    s += "\n| workload | column |";
    for i in 0..results.len() {
        s += &format!(" {} steps/s |", letter(i));
    }
    for i in 1..results.len() {
        s += &format!(" {}/A |", letter(i));
    }
    s += "\n|---|---|";
    s += &"---:|".repeat(2 * results.len() - 1);
    s += "\n";
    for (w, c, vals) in rows(results) {
        s += &format!("| {w} | {c} |");
        for v in &vals {
            s += &format!(" {} |", v.map_or("-".into(), crate::plot::human));
        }
        for v in &vals[1..] {
            s += &ratio_cell(*v, vals[0]);
        }
        s += "\n";
    }
    s
}

/// A bar chart of every file's figures relative to the first file's.
pub fn compare_plot(
    path: &std::path::Path,
    results: &[(String, SuiteResult)],
) -> Result<(), LabError> {
    let rows = rows(results);
    let cats: Vec<String> = rows
        .iter()
        .map(|(w, c, _)| {
            format!(
                "{} {}",
                w.trim_start_matches("env/"),
                c.replace("with_", "+")
            )
        })
        .collect();
    ratio_bars(
        path,
        "throughput relative to A",
        &cats,
        results.iter().map(|(name, _)| name.as_str()),
        |i| {
            rows.iter()
                .map(|(_, _, vals)| ratio(vals[i], vals[0]))
                .collect()
        },
    )
}

/// Seconds since 1970, when a result was taken (0 on a clock set before it).
pub(crate) fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A training workload's result: `steps` env steps in `wall` seconds, then greedy
/// episodes with returns `ret`; `extra` holds the workload's own figures.
fn trained(
    name: &str,
    steps: u64,
    wall: f64,
    ret: &[f64],
    mut extra: BTreeMap<String, f64>,
) -> Workload {
    extra.insert("seconds".into(), wall);
    extra.insert(
        "final_return".into(),
        ret.iter().sum::<f64>() / ret.len() as f64,
    );
    Workload {
        name: name.into(),
        stepping: None,
        with_inference: None,
        with_training: Some(steps as f64 / wall),
        extra,
    }
}
