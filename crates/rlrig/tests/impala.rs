//! `rlrig train impala` end to end on MinAtar Breakout with the conv network: the lagged
//! policy's schedule is fixed, so runs are bit-identical at any thread count and a
//! killed run resumes exactly (the stale parameters are in the checkpoint).

#[macro_use]
mod common;

const COLS: usize = rlrig_learn::ppo::DETERMINISTIC_COLUMNS;

use common::{
    fails_with, final_weights, kill_after_first_checkpoint, learning_columns, ok, resumes_like,
    rlrig, stderr, stdout, tmp,
};

fn args<'a>(dir: &'a str, threads: &'a str) -> Vec<&'a str> {
    vec![
        "train",
        "impala",
        "--env",
        "MinAtar/Breakout-v1",
        "--total-steps",
        "16000",
        // Two updates stale: the checkpoint must carry two earlier parameter sets.
        "--set",
        "policy_lag=2",
        "--set",
        "checkpoint_every=4000",
        "--threads",
        threads,
        "--run-dir",
        dir,
        "--quiet",
        "--eval-episodes",
        "2",
    ]
}

#[test]
fn impala_is_deterministic_resumes_exactly_and_plays() {
    let (a, b, killed) = (tmp("impala1"), tmp("impala2"), tmp("impala-killed"));
    for (d, t) in [(&a, "1"), (&b, "2")] {
        let o = ok(&args(d.to_str().unwrap(), t));
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
    for key in ["vtrace = true", "policy_lag = 2", "conv_channels = 16"] {
        assert!(config.contains(key), "{key} not in config.toml:\n{config}");
    }

    let ks = killed.to_str().unwrap();
    resumes_like(&a, &killed, COLS, &args(ks, "2"), &args(ks, "1"));

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
    let cases: &[(&str, &[&str])] = &[
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
    ];
    for (args, needles) in cases {
        fails_with(&common::words(args), None, needles);
    }
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
    let (a, killed) = (tmp("impala-async"), tmp("impala-async-killed"));
    let args = |dir: &str| -> Vec<String> {
        [
            "train",
            "impala",
            "--env",
            "MinAtar/Breakout-v1",
            "--total-steps",
            "16000",
            "--set",
            "actors=2",
            "--set",
            "policy_lag=0",
            "--set",
            "checkpoint_every=4000",
            "--run-dir",
            dir,
            "--quiet",
            "--eval-episodes",
            "2",
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |args: &[String]| rlrig(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let o = run(&args(a.to_str().unwrap()));
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
    let mut srv = args(s.to_str().unwrap());
    srv.extend(["--set", "inference_server=true"].map(String::from));
    let o = run(&srv);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("; inference server: "), "{out}");
    assert_eq!(learning_columns(&s, COLS).len(), 201);
    drop(s);

    let k = args(killed.to_str().unwrap());
    kill_after_first_checkpoint(&k.iter().map(String::as_str).collect::<Vec<_>>(), &killed);
    let mut resume = k.clone();
    resume.push("--resume".into());
    let o = run(&resume);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("resumed from step"));
    assert_eq!(learning_columns(&killed, COLS).len(), 201);
}
