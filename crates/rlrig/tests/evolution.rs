//! `rlrig train es|ga` end to end: identical results with 1 and 2 threads, resume
//! after SIGKILL, eval/play on the run, clear errors.

#[macro_use]
mod common;

const COLS: usize = rlrig_learn::evolution::EVO_DETERMINISTIC_COLUMNS;

use common::{each_fails_with, fails_with, final_weights, learning_columns, ok, resumes_like, tmp};

fn args<'a>(algo: &'a str, dir: &'a str, threads: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = argv![
        "train",
        algo,
        "--env Pendulum-v1 --population 16 --generations 12 --episodes-per-member 2 --set",
        "checkpoint_every=3 --threads",
        threads,
        "--run-dir",
        dir,
        "--quiet --eval-episodes 2",
    ];
    if algo == "ga" {
        v.extend(["--set", "truncation=4", "--set", "elite_candidates=2"]);
    }
    v.extend_from_slice(extra);
    v
}

#[test]
fn es_ga_and_pruning_ga_are_identical_with_1_and_2_threads() {
    for (algo, extra) in [("es", vec![]), ("ga", vec![]), ("ga", vec!["--prune"])] {
        let (a, b) = (
            tmp(&format!("{algo}{}-1", extra.len())),
            tmp(&format!("{algo}{}-2", extra.len())),
        );
        for (d, t) in [(&a, "1"), (&b, "2")] {
            ok(&args(algo, d.to_str().unwrap(), t, &extra));
        }
        assert_eq!(
            learning_columns(&a, COLS).len(),
            13,
            "{algo}: header + 12 generations"
        );
        assert_eq!(
            learning_columns(&a, COLS),
            learning_columns(&b, COLS),
            "{algo} {extra:?}"
        );
        assert_eq!(final_weights(&a), final_weights(&b), "{algo} {extra:?}");
        common::eval_episodes(&a, 2);
        common::play_gif(&a, &a.join("p.gif"), &["--max-frames", "5"]);
    }
}

#[test]
fn a_killed_es_run_resumes_to_the_same_centre() {
    let (full, killed) = (tmp("es-full"), tmp("es-killed"));
    ok(&args("es", full.to_str().unwrap(), "2", &[]));
    let ks = killed.to_str().unwrap().to_string();
    let (run, resume) = (args("es", &ks, "2", &[]), args("es", &ks, "1", &[]));
    resumes_like(&full, &killed, COLS, &run, &resume);
}

#[test]
fn evolution_bad_input_is_a_clear_error() {
    fails_with(
        &["train", "es", "--population", "7"],
        None,
        &["population must be even"],
    );
    fails_with(
        &argv!["train ga --population 4 --set truncation=4 --set elite_candidates=5"],
        None,
        &["smaller than the elite"],
    );
    each_fails_with(&[
        ("train ga --generations 0", &["generations"]),
        ("train es --prune", &["GA option"]),
        ("train es --env CartPol-v1", &["CartPole-v1"]),
        (
            "train ga --set sigma=-1",
            &["sigma must be a positive number"],
        ),
    ]);
}

/// `mpirun -n 2`: members split over two ranks give the same run as one process, and
/// ranks started with different settings fail with a clear error.
#[cfg(feature = "mpi")]
#[test]
fn two_mpi_ranks_equal_one_process() {
    use common::mpirun;
    let bin = env!("CARGO_BIN_EXE_rlrig");
    for (algo, extra) in [("es", vec![]), ("ga", vec!["--prune"])] {
        let (one, two) = (tmp(&format!("mpi1-{algo}")), tmp(&format!("mpi2-{algo}")));
        ok(&args(algo, one.to_str().unwrap(), "2", &extra));
        let mut cmd = vec!["-n", "2", bin];
        cmd.extend(args(algo, two.to_str().unwrap(), "1", &extra));
        let o = mpirun(&cmd);
        assert!(o.status.success(), "{}", common::stderr(&o));
        assert!(common::stdout(&o).contains("x 2 ranks"));
        assert_eq!(
            learning_columns(&one, COLS),
            learning_columns(&two, COLS),
            "{algo}"
        );
        assert_eq!(final_weights(&one), final_weights(&two), "{algo}");
    }
    let d = tmp("mpi-mismatch");
    let ds = d.to_str().unwrap();
    let mut cmd = vec!["-n", "1", bin];
    cmd.extend(args("es", ds, "1", &["--seed", "1"]));
    cmd.extend([":", "-n", "1", bin]);
    cmd.extend(args("es", ds, "1", &["--seed", "2"]));
    let o = mpirun(&cmd);
    assert!(!o.status.success());
    let err = common::stderr(&o);
    // Every rank finds it and exits with it; mpirun ends the job when the first rank
    // exits, which can cut the other's message short, so one report is the least.
    assert!(
        err.contains("runs a different binary or config"),
        "a rank reports: {err}"
    );
}

/// A stop under `mpirun -n 2`: a SIGTERM to one rank stops every rank after the same
/// generation (they agree on it), rank 0 writes the checkpoint and reports it, and a
/// resume in one process ends as the uninterrupted one-process run does.
#[cfg(feature = "mpi")]
#[test]
fn a_stop_on_one_mpi_rank_stops_every_rank_at_the_same_generation() {
    let (one, two) = (tmp("mpi-stop-1"), tmp("mpi-stop-2"));
    // `args` with 300 generations: long enough to be stopped part way.
    fn long<'a>(dir: &'a str, threads: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = args("es", dir, threads, extra);
        let g = v.iter().position(|a| *a == "--generations").unwrap();
        v[g + 1] = "300";
        v
    }
    let (a1, a2) = (one.to_str().unwrap(), two.to_str().unwrap());
    ok(&long(a1, "2", &[]));
    let o = common::stop_one_of_two_mpi_ranks(&long(a2, "1", &[]), &two.join("metrics.csv"), 3);
    let out = common::stdout(&o);
    assert_eq!(
        out.matches("interrupted by SIGTERM after generation")
            .count(),
        1,
        "rank 0 reports the stop: {out}{}",
        common::stderr(&o)
    );
    let stopped_rows = learning_columns(&two, COLS).len();
    assert!(stopped_rows < 301, "not stopped early: {out}");
    ok(&long(a2, "2", &["--resume"]));
    assert_eq!(learning_columns(&one, COLS), learning_columns(&two, COLS));
    assert_eq!(final_weights(&one), final_weights(&two));
}

/// Gymnasium's lander heuristic through the CLI: in Gymnasium 1.4, 200 episodes of it
/// average 242 (discrete) and 284 (continuous), 91 % and 100 % of them above 200
/// (scripts/golden/make_golden_box2d.py). 40 episodes here must land as often.
#[test]
fn the_lander_heuristic_lands_from_the_cli() {
    for (env, floor) in [
        ("LunarLander-v3", 180.0),
        ("LunarLanderContinuous-v3", 250.0),
    ] {
        let o = ok(&argv![
            "eval --env",
            env,
            "--policy heuristic --episodes 40 --json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(v["mean_return"].as_f64().unwrap() > floor, "{env}: {v}");
        assert_eq!(v["episodes"], 40);
    }
}

/// Baseline statistics without a run: a uniformly random CartPole policy lasts about
/// 22 steps in Gymnasium 1.4 (measured there: 22.18, std 11.9, over 10,000 episodes);
/// 400 episodes here must land within sampling error of that (std error ~0.6).
#[test]
fn random_baseline_matches_the_reference_statistics() {
    let o = ok(&argv![
        "eval --env CartPole-v1 --policy random --episodes 400 --json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = v["mean_length"].as_f64().unwrap();
    assert!((m - 22.18).abs() < 2.0, "{v}");
    assert_eq!(v["mean_return"], v["mean_length"]);
    fails_with(
        &["eval", "--env", "CartPole-v1", "--policy", "heuristic"],
        None,
        &["no reference heuristic"],
    );
    fails_with(
        &["eval", "--env", "CartPole-v1", "--policy", "greedy"],
        None,
        &["unknown baseline"],
    );
    let missing =
        std::env::temp_dir().join(format!("rlrig-no-such-run-dir-{}", std::process::id()));
    fails_with(
        &["eval", "--run", missing.to_str().unwrap()],
        None,
        &["no such run directory"],
    );
    assert!(!missing.exists(), "eval must not create the directory");
    for algo in ["ppo", "sac", "es", "alphazero"] {
        fails_with(
            &[
                "train",
                algo,
                "--resume",
                "--run-dir",
                missing.to_str().unwrap(),
                "--quiet",
            ],
            None,
            &["no such run directory"],
        );
    }
    assert!(!missing.exists(), "--resume must not create the directory");
}

/// The seed's workload in miniature: a pruning GA on BipedalWalker, whose members' episodes
/// are Box2D worlds stepped on worker threads. Same fitness history and weights with 1 and 2
/// threads, and the run renders to a GIF.
#[test]
fn the_pruning_ga_on_bipedal_walker_is_thread_count_independent() {
    let (a, b) = (tmp("bw-ga-1"), tmp("bw-ga-2"));
    let walker = |dir: &std::path::Path, threads: &str| {
        let d = dir.to_str().unwrap().to_string();
        ok(&argv![
            "train ga --env BipedalWalker-v3 --population 8 --generations 2 --episodes-per-member",
            "1 --prune --set hidden=[8,8] --set truncation=4 --set elite_candidates=2 --set",
            "elite_episodes=1 --threads",
            threads,
            "--run-dir",
            &d,
            "--quiet --eval-episodes 1",
        ]);
    };
    walker(&a, "1");
    walker(&b, "2");
    assert_eq!(learning_columns(&a, COLS), learning_columns(&b, COLS));
    assert_eq!(final_weights(&a), final_weights(&b));
    let gif = a.join("walker.gif");
    common::play_gif(&a, &gif, &["--max-frames", "4"]);
}
