//! `rlrig train impala` end to end on MinAtar Breakout with the conv network: the lagged
//! policy's schedule is fixed, so runs are bit-identical at any thread count and a
//! killed run resumes exactly (the stale parameters are in the checkpoint).

#[macro_use]
mod common;

const COLS: usize = rlrig_learn::ppo::DETERMINISTIC_COLUMNS;

use common::{
    assert_contains, each_fails_with, fails_with, final_weights, kill_after_first_checkpoint,
    learning_columns, ok, resumes_like, rlrig, stderr, stdout, tmp,
};

/// This file's run: Breakout with the conv network for 16,000 steps, a checkpoint every
/// 4,000, into `dir`; `more` adds its settings.
fn args<'a>(dir: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut v = argv![
        "train impala --env MinAtar/Breakout-v1 --total-steps 16000",
        "--set checkpoint_every=4000 --run-dir",
        dir,
        "--quiet --eval-episodes 2",
    ];
    v.extend(more);
    v
}

/// The lagged run on `threads` threads: two updates stale, so the checkpoint must carry
/// two earlier parameter sets.
fn lagged<'a>(dir: &'a str, threads: &'a str) -> Vec<&'a str> {
    args(dir, &["--set", "policy_lag=2", "--threads", threads])
}

#[test]
fn impala_is_deterministic_resumes_exactly_and_plays() {
    let (a, b, killed) = (tmp("impala1"), tmp("impala2"), tmp("impala-killed"));
    for (d, t) in [(&a, "1"), (&b, "2")] {
        let o = ok(&lagged(d.to_str().unwrap(), t));
        let out = stdout(&o);
        assert!(out.contains("MinAtar/Breakout-v1 impala on cpu"), "{out}");
    }
    let cols = learning_columns(&a, COLS);
    assert_eq!(
        cols.len(),
        201,
        "header + 200 iterations of 16 envs x 5 steps"
    );
    assert_eq!(cols, learning_columns(&b, COLS));
    // assert! rather than assert_eq!: a failure should not print megabytes of weights.
    assert!(
        final_weights(&a) == final_weights(&b),
        "weights differ by thread count"
    );
    let config = std::fs::read_to_string(a.join("config.toml")).unwrap();
    assert_contains(
        &config,
        &["vtrace = true", "policy_lag = 2", "conv_channels = 16"],
    );

    let ks = killed.to_str().unwrap();
    resumes_like(&a, &killed, COLS, &lagged(ks, "2"), &lagged(ks, "1"));

    let gif = a.join("breakout.gif");
    common::play_gif(&a, &gif, &["--max-frames", "20"]);
}

#[test]
fn impala_and_conv_settings_are_checked() {
    fails_with(
        &["train", "ppo", "--set", "policy_lag=1"],
        None,
        &["policy_lag = 1 needs vtrace = true"],
    );
    fails_with(
        &argv!["train ppo --env CartPole-v1 --set conv_channels=16"],
        None,
        &["conv_channels", "CartPole-v1", "no image observations"],
    );
    each_fails_with(&[
        (
            "train impala --set vtrace_rho_bar=0",
            &["vtrace_rho_bar must be a positive number"],
        ),
        (
            "train impala --set actors=2",
            &["actors = 2 needs policy_lag = 0"],
        ),
        (
            "train ppo --set actors=2 --set policy_lag=0",
            &["actors = 2 needs vtrace = true"],
        ),
        (
            "train impala --set inference_server=true",
            &["inference_server = true needs asynchronous actors"],
        ),
    ]);
    let help = rlrig(&["train", "impala", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("deterministic"), "{text}");
    assert!(text.contains("NOT reproducible"), "{text}");
}

/// Asynchronous actors: the run completes, is checkpointed (actors stopped and their envs
/// home at each checkpoint) and a killed run resumes from its last checkpoint. Not
/// reproducible, so nothing is compared but the shape of the run.
#[test]
fn async_impala_runs_checkpoints_and_resumes() {
    const ACTORS: &[&str] = &["--set", "actors=2", "--set", "policy_lag=0"];
    let (a, killed) = (tmp("impala-async"), tmp("impala-async-killed"));
    let o = rlrig(&args(a.to_str().unwrap(), ACTORS));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("asynchronous actors: 2, mean policy lag"),
        "{out}"
    );
    assert_eq!(
        learning_columns(&a, COLS).len(),
        201,
        "header + 200 updates"
    );
    let config = std::fs::read_to_string(a.join("config.toml")).unwrap();
    assert!(config.contains("actors = 2"), "{config}");

    // The same through the batching inference server.
    let s = tmp("impala-async-server");
    let mut srv = args(s.to_str().unwrap(), ACTORS);
    srv.extend(["--set", "inference_server=true"]);
    let o = rlrig(&srv);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("; inference server: "), "{out}");
    assert_eq!(learning_columns(&s, COLS).len(), 201);
    drop(s);

    let mut k = args(killed.to_str().unwrap(), ACTORS);
    kill_after_first_checkpoint(&k, &killed);
    k.push("--resume");
    let o = rlrig(&k);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("resumed from step"));
    assert_eq!(learning_columns(&killed, COLS).len(), 201);
}
