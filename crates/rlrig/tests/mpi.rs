//! `mpirun -n 2 rlrig train ppo|a2c|impala|dqn|sac|td3` (built with `--features mpi`):
//! two ranks that split each backward pass's row chunks end with the bits of one
//! process, stop together, and refuse what they cannot share. (ES/GA's MPI runs are
//! tested in evolution.rs.)
#![cfg(feature = "mpi")]

#[macro_use]
mod common;

use common::{final_weights, learning_columns, mpirun, ok, stderr, stdout, tmp};

/// A short run of `algo` in `dir` on `threads` threads.
fn args<'a>(algo: &'a str, dir: &'a str, threads: &'a str) -> Vec<&'a str> {
    let mut v = argv!["train", algo, "--threads", threads, "--run-dir", dir];
    v.extend(common::words(match algo {
        "sac" | "td3" => {
            "--env Pendulum-v1 --total-steps 1200 --set learning_starts=500 --quiet --eval-episodes 2"
        }
        "dqn" => "--env CartPole-v1 --total-steps 3000 --quiet --eval-episodes 2",
        // IMPALA's deterministic schedule (a rollout collected while the learner updates).
        "impala" => "--env CartPole-v1 --total-steps 6000 --set actors=0 --set policy_lag=1 --quiet --eval-episodes 2",
        _ => "--env CartPole-v1 --total-steps 6000 --quiet --eval-episodes 2",
    }));
    v
}

fn cols(algo: &str) -> usize {
    match algo {
        "sac" | "td3" | "dqn" => rlrig_learn::replay::OFFPOLICY_DETERMINISTIC_COLUMNS,
        _ => rlrig_learn::ppo::DETERMINISTIC_COLUMNS,
    }
}

#[test]
fn two_ranks_train_the_bits_of_one_process() {
    let bin = env!("CARGO_BIN_EXE_rlrig");
    for algo in ["ppo", "a2c", "impala", "dqn", "sac", "td3"] {
        let (one, two) = (tmp(&format!("mpi1-{algo}")), tmp(&format!("mpi2-{algo}")));
        ok(&args(algo, one.to_str().unwrap(), "2"));
        let mut cmd = vec!["-n", "2", bin];
        cmd.extend(args(algo, two.to_str().unwrap(), "1"));
        let o = mpirun(&cmd);
        let out = stdout(&o);
        assert!(o.status.success(), "{algo}: {out}{}", stderr(&o));
        // Rank 0 reports, once.
        assert_eq!(out.matches("on cpu x 2 ranks").count(), 1, "{algo}: {out}");
        let rows = learning_columns(&one, cols(algo));
        assert!(rows.len() > 2, "{algo}: {rows:?}");
        assert_eq!(rows, learning_columns(&two, cols(algo)), "{algo}");
        assert_eq!(final_weights(&one), final_weights(&two), "{algo}");
    }
}

/// A SIGTERM to one rank stops both after the same iteration; rank 0 writes the
/// checkpoint (the envs of both ranks' shares in it) and reports it, and a resume
/// under mpirun ends as the uninterrupted one-process run does.
#[test]
fn a_stop_on_one_rank_stops_both_and_the_run_resumes_under_mpirun() {
    let (one, two) = (tmp("mpi-ppo-stop-1"), tmp("mpi-ppo-stop-2"));
    // `args` with 1.5M steps: long enough to be stopped part way.
    fn long<'a>(dir: &'a str, threads: &'a str) -> Vec<&'a str> {
        let mut v = args("ppo", dir, threads);
        let t = v.iter().position(|a| *a == "--total-steps").unwrap();
        v[t + 1] = "1500000";
        v
    }
    let (a1, a2) = (one.to_str().unwrap(), two.to_str().unwrap());
    ok(&long(a1, "2"));
    let o = common::stop_one_of_two_mpi_ranks(&long(a2, "1"), &two.join("metrics.csv"), 20);
    let out = stdout(&o);
    assert_eq!(
        out.matches("interrupted by SIGTERM at step").count(),
        1,
        "rank 0 reports the stop: {out}{}",
        stderr(&o)
    );
    let cols = cols("ppo");
    let stopped = learning_columns(&two, cols).len();
    assert!(
        stopped < learning_columns(&one, cols).len(),
        "not stopped early: {out}"
    );
    let bin = env!("CARGO_BIN_EXE_rlrig");
    let mut resume = vec!["-n", "2", bin];
    resume.extend(long(a2, "1"));
    resume.push("--resume");
    let o = mpirun(&resume);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("resumed from step"));
    assert_eq!(learning_columns(&one, cols), learning_columns(&two, cols));
    assert_eq!(final_weights(&one), final_weights(&two));
}

/// What ranks cannot share is an error, naming why, and a failed job.
#[test]
fn what_ranks_cannot_share_is_a_clear_error() {
    let bin = env!("CARGO_BIN_EXE_rlrig");
    let d = tmp("mpi-refused");
    let ds = d.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            argv![
                "-n 2",
                bin,
                "train impala --set actors=2 --set policy_lag=0 --run-dir",
                ds
            ],
            "asynchronous actors (actors > 0) are not reproducible",
        ),
        (
            argv!["-n 2", bin, "train ppo --seeds 1-2 --run-dir", ds],
            "under mpirun the ranks share one run",
        ),
        (
            argv!["-n 2", bin, "train alphazero --run-dir", ds],
            "alphazero does not run over MPI ranks yet",
        ),
        (
            argv!["-n 2", bin, "train ppo --num-envs 1 --run-dir", ds],
            "num_envs = 1 cannot be split over 2 MPI ranks",
        ),
        (
            [
                argv!["-n 1", bin, "train ppo --seed 1 --run-dir", ds],
                argv![": -n 1", bin, "train ppo --seed 2 --run-dir", ds],
            ]
            .concat(),
            "runs a different binary or config",
        ),
    ];
    for (cmd, needle) in cases {
        let o = mpirun(&cmd);
        assert!(!o.status.success(), "{cmd:?}");
        let err = stderr(&o);
        // Every rank finds it and exits with it; mpirun ends the job when the first
        // rank exits, which can cut the other's message short.
        assert!(err.contains(needle), "a rank reports: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
