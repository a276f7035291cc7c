//! `rlrig train alphazero`, `eval --opponent`, `play` (terminal) and `bench alphazero`
//! end to end: learning with a fixed seed and a small budget, determinism, resume
//! after SIGKILL, clear errors.

#[macro_use]
mod common;

const COLS: usize = rlrig_learn::alphazero::AZ_DETERMINISTIC_COLUMNS;

use common::{
    Tmp, assert_contains, each_fails_with, fails_with, final_weights, learning_columns, ok,
    read_json, resumes_like, rlrig, rlrig_in, stderr, stdout, tmp,
};

/// The default run (60 iterations of 128 games x 8 moves, 32 simulations; ~2-3 s in
/// release here) must beat a random player in >= 95% of games and beat the depth-2
/// solver more often than it loses, both in training's own evaluation and in `eval`.
#[test]
fn default_run_beats_random_and_the_depth_2_solver() {
    let d = tmp("az-learn");
    let ds = d.to_str().unwrap();
    let o = ok(&["train", "alphazero", "--run-dir", ds, "--quiet"]);
    let out = stdout(&o);
    assert!(out.contains("samples/s"), "{out}");
    let ev = read_json(d.join("eval.json"));
    assert!(ev["win_rate_random"].as_f64().unwrap() >= 0.95, "{ev}");
    assert!(
        ev["win_rate_solver"].as_f64().unwrap() > ev["loss_rate_solver"].as_f64().unwrap(),
        "{ev}"
    );
    for (op, check) in [("random", 0.95), ("solver:2", 0.0)] {
        let o = ok(&argv![
            "eval --run",
            ds,
            "--opponent",
            op,
            "--games 60 --json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["games"], 60);
        let (w, l) = (v["wins"].as_u64().unwrap(), v["losses"].as_u64().unwrap());
        assert!(v["win_rate"].as_f64().unwrap() >= check, "{op}: {v}");
        assert!(w > l, "{op}: {v}");
    }
    // Against itself: every game is decided or drawn, and the counts add up.
    let o = ok(&argv![
        "eval --run",
        ds,
        "--opponent",
        &format!("run:{ds}"),
        "--games 4 --json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sum =
        v["wins"].as_u64().unwrap() + v["draws"].as_u64().unwrap() + v["losses"].as_u64().unwrap();
    assert_eq!(sum, 4);
    // A terminal game: the human plays column 4 until the agent wins or input ends.
    let o = rlrig_in(&["play", "--run", ds], Some("4\n4\n4\n4\n4\n4\n9\n"));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("1 2 3 4 5 6 7") && out.contains("agent plays"),
        "{out}"
    );
}

/// Gumbel root selection learns with few simulations: 16 per move, same budget
/// otherwise (measured: 100% against random, 52% won / 48% lost against solver:2).
/// The residual CNN option (`channels > 0`): trains, beats random play, and its run
/// loads back for `eval` (which rebuilds the network from the run's config).
#[test]
fn residual_cnn_option_learns_and_evaluates() {
    let d = beats_random("az-cnn", "--iterations 30 --set channels=8 --set blocks=1");
    let ds = d.to_str().unwrap();
    let cfg = std::fs::read_to_string(d.join("config.toml")).unwrap();
    assert!(cfg.contains("channels = 8"), "{cfg}");
    let o = ok(&argv![
        "eval --run",
        ds,
        "--opponent random --games 20 --json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["win_rate"].as_f64().unwrap() >= 0.9, "{v}");
}

#[test]
fn gumbel_alphazero_learns_with_16_simulations() {
    beats_random(
        "az-gumbel",
        "--simulations 16 --set gumbel=true --set eval_simulations=16",
    );
}

/// Trains AlphaZero with the extra flags `extra` in a fresh directory `name` and
/// checks that training's own evaluation beats random play in >= 95 % of games.
fn beats_random(name: &str, extra: &'static str) -> Tmp {
    let d = tmp(name);
    let mut args = argv!["train alphazero --quiet --run-dir", d.to_str().unwrap()];
    args.extend(common::words(extra));
    ok(&args);
    let ev = read_json(d.join("eval.json"));
    assert!(ev["win_rate_random"].as_f64().unwrap() >= 0.95, "{ev}");
    d
}

fn small(dir: &str) -> Vec<&str> {
    vec![
        "train",
        "alphazero",
        "--iterations",
        "6",
        "--games",
        "16",
        "--simulations",
        "8",
        "--set",
        "moves_per_iteration=4",
        "--set",
        "hidden=[32]",
        "--set",
        "batch_size=32",
        "--set",
        "updates_per_iteration=4",
        "--set",
        "eval_every=3",
        "--set",
        "eval_games=4",
        "--set",
        "eval_simulations=4",
        "--set",
        "checkpoint_every=2",
        // Gating at every iteration, so a resumed run must restore the accepted
        // network as well as the trained one.
        "--set",
        "gate_every=1",
        "--set",
        "gate_games=4",
        "--set",
        "gate_threshold=0.6",
        "--run-dir",
        dir,
        "--quiet",
    ]
}

#[test]
fn same_seed_same_run_and_a_killed_run_resumes_exactly() {
    let (a, b) = (tmp("az-a"), tmp("az-b"));
    for d in [&a, &b] {
        ok(&small(d.to_str().unwrap()));
    }
    assert_eq!(learning_columns(&a, COLS).len(), 7, "header + 6 iterations");
    assert_eq!(learning_columns(&a, COLS), learning_columns(&b, COLS));
    assert_eq!(final_weights(&a), final_weights(&b));

    let k = tmp("az-killed");
    let ks = k.to_str().unwrap().to_string();
    resumes_like(&a, &k, COLS, &small(&ks), &small(&ks));
}

#[test]
fn alphazero_bad_input_is_a_clear_error() {
    each_fails_with(&[
        (
            "train alphazero --env Chess",
            &["unknown game 'Chess'", "ConnectFour"],
        ),
        (
            "train alphazero --simulations 0",
            &["simulations must be at least 1"],
        ),
        ("train alphazero --set sims=3", &["unknown key 'sims'"]),
    ]);
    // A device is one of the names --help lists: a usage error (exit 2) naming them.
    let o = rlrig(&["train", "alphazero", "--device", "tpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert_contains(
        &stderr(&o),
        &[
            "invalid value 'tpu'",
            "possible values: cpu, burn-cpu, wgpu, vulkan, gpu",
        ],
    );
    fails_with(
        &["train", "alphazero", "--device", "gpu"],
        None,
        &["--device gpu", "only `rlrig train ppo`"],
    );
    let d = tmp("az-err");
    let ds = d.to_str().unwrap();
    let mut args = small(ds);
    args[3] = "1";
    ok(&args);
    fails_with(
        &["eval", "--run", ds, "--opponent", "solver:x"],
        None,
        &["depth must be a number"],
    );
    fails_with(
        &["eval", "--run", ds, "--opponent", "minimax"],
        None,
        &["unknown opponent 'minimax'"],
    );
    fails_with(
        &["eval", "--run", ds, "--opponent", "run:/nonexistent"],
        None,
        &["--opponent run:/nonexistent"],
    );
    fails_with(
        &["train", "sac", "--run-dir", ds, "--resume", "--quiet"],
        None,
        &["alphazero checkpoint, not sac"],
    );
}

#[test]
fn bench_alphazero_reports_every_stage() {
    let o = ok(&argv![
        "bench alphazero --simulations 16 --games 8 --moves 2 --json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["simulations"], 16);
    assert_eq!(v["games"], 8);
    for k in [
        "samples_per_sec",
        "search_only_samples_per_sec",
        "with_inference_samples_per_sec",
    ] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    fails_with(
        &["bench", "alphazero", "--games", "0"],
        None,
        &["at least 1"],
    );
}
