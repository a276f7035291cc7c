//! Pins every learner's `for_env` defaults: each (algorithm, env id) pair the registry
//! knows, serialised to JSON, must match `tests/presets.snap` byte for byte, so a
//! change to how presets are written (Rust match arms or data files) that changes a
//! config fails here. After an intended change to a preset, regenerate the snapshot
//! with `RLRIG_BLESS=1 cargo test -p rlrig-learn --test presets` and review the diff.
//! Atari ids (the `atari` feature of rlrig-env) are left out, so the snapshot is the
//! same with and without that feature.

use rlrig_learn::alphazero::AzConfig;
use rlrig_learn::dqn::DqnConfig;
use rlrig_learn::evolution::{EvoConfig, Method};
use rlrig_learn::offpolicy::{Algo, OffPolicyConfig};
use rlrig_learn::ppo::PpoConfig;
use serde::Serialize;

fn section<C: Serialize>(out: &mut String, algo: &str, env: &str, c: &C) {
    let body = serde_json::to_string_pretty(c).expect("config serialises");
    out.push_str(&format!("===== {algo} {env}\n{body}\n"));
}

fn render() -> String {
    let mut out = String::new();
    let envs = rlrig_env::ENV_IDS
        .iter()
        .filter(|id| !rlrig_env::ATARI_IDS.contains(id));
    for &env in envs {
        section(&mut out, "ppo", env, &PpoConfig::for_env(env));
        section(&mut out, "a2c", env, &PpoConfig::a2c_for_env(env));
        section(&mut out, "impala", env, &PpoConfig::impala_for_env(env));
        for (name, algo) in [("ddpg", Algo::Ddpg), ("td3", Algo::Td3), ("sac", Algo::Sac)] {
            section(&mut out, name, env, &OffPolicyConfig::for_env(algo, env));
        }
        section(&mut out, "dqn", env, &DqnConfig::for_env(env));
        for (name, method) in [("es", Method::Es), ("ga", Method::Ga)] {
            section(&mut out, name, env, &EvoConfig::for_env(method, env));
        }
    }
    for &env in rlrig_env::games::GAME_IDS {
        let az = AzConfig {
            env: env.to_string(),
            ..AzConfig::default()
        };
        section(&mut out, "alphazero", env, &az);
    }
    out
}

#[test]
fn for_env_matches_snapshot() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/presets.snap");
    let now = render();
    if std::env::var_os("RLRIG_BLESS").is_some() {
        std::fs::write(path, &now).unwrap();
        return;
    }
    let pinned = std::fs::read_to_string(path).expect("tests/presets.snap");
    if now != pinned {
        let line = now
            .lines()
            .zip(pinned.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| now.lines().count().min(pinned.lines().count()));
        panic!(
            "for_env output differs from tests/presets.snap from line {}",
            line + 1
        );
    }
}
