//! `rlrig probe`, `bench suite`, `compare` and `plot` end to end.

#[macro_use]
mod common;

use common::{ok, read_json, rlrig, stderr, stdout, tmp};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn is_png(path: &std::path::Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.len() > 1000 && b.starts_with(b"\x89PNG\r\n\x1a\n"))
}

#[test]
fn compare_prints_the_golden_table_and_draws_a_png() {
    let o = ok(&["compare", &fixture("home.json"), &fixture("cloud.json")]);
    let want = std::fs::read_to_string(fixture("compare-home-cloud.txt")).unwrap();
    assert_eq!(String::from_utf8(o.stdout).unwrap(), want);
    let d = tmp("cmp");
    let png = d.join("cmp.png");
    ok(&[
        "compare",
        &fixture("home.json"),
        &fixture("cloud.json"),
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert!(is_png(&png));
    // Not a results file: a clear error naming it.
    let o = rlrig(&[
        "compare",
        &fixture("home.json"),
        &fixture("compare-home-cloud.txt"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("compare-home-cloud.txt"));
}

#[test]
fn bench_suite_writes_results_that_compare_reads() {
    let d = tmp("suite");
    let out = d.join("r.json");
    ok(&argv![
        "bench suite --quick --only env/CartPole-v1 --threads 1 --out",
        out.to_str().unwrap(),
    ]);
    let v = read_json(&out);
    assert_eq!(v["suite"], "rlrig-bench-suite");
    assert_eq!(v["workloads"][0]["name"], "env/CartPole-v1");
    for c in ["stepping", "with_inference", "with_training"] {
        assert!(v["workloads"][0][c].as_f64().unwrap() > 0.0, "{c}");
    }
    assert!(v["machine"].as_str().unwrap().contains("cores"));
    let o = rlrig(&["compare", out.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(stdout(&o).contains("| env/CartPole-v1 | stepping |"));
    let o = rlrig(&["bench", "suite", "--quick", "--only", "nothing-like-this"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn bench_learn_scores_a_cell_over_seeds_and_compare_reads_it() {
    let d = tmp("learn");
    let dir = d.join("b");
    let args = |extra: &[&str]| {
        let mut v = argv![
            "bench learn --env CartPole-v1 --algo ppo --seeds 1-2 --total-steps 8192",
            "--eval-episodes 3 --threads 2 --dir",
            dir.to_str().unwrap(),
        ];
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        rlrig(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = dir.join("learn.json");
    let v = read_json(&out);
    assert_eq!(v["suite"], "rlrig-bench-learn");
    let cell = &v["cells"][0];
    assert_eq!(
        (cell["algo"].as_str(), cell["env"].as_str()),
        (Some("ppo"), Some("CartPole-v1"))
    );
    assert_eq!(cell["threshold"], 475.0);
    // Each seed's score is its own run's final evaluation; the cell's figures follow.
    let mut finals = Vec::new();
    for (i, seed) in [1, 2].iter().enumerate() {
        let s = &cell["seeds"][i];
        assert_eq!(s["seed"], *seed);
        assert_eq!(s["status"], "done");
        assert_eq!(s["env_steps"], 8192.0);
        let eval = read_json(dir.join(format!("CartPole-v1-ppo/seed{seed}/eval.json")));
        assert_eq!(s["final_return"], eval["mean_return"]);
        finals.push(eval["mean_return"].as_f64().unwrap());
    }
    let mean = (finals[0] + finals[1]) / 2.0;
    assert!((cell["final_return"]["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    let reached = finals.iter().filter(|&&f| f >= 475.0).count();
    assert_eq!(cell["reached"], reached);
    assert!(is_png(&dir.join("learn.png")));
    // A second leg reads the finished cell instead of training it again.
    let metrics = dir.join("CartPole-v1-ppo/seed1/metrics.csv");
    let before = std::fs::read(&metrics).unwrap();
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(1), "a non-empty --dir needs --resume");
    assert!(common::stderr(&o).contains("--resume"));
    let o = run(&["--resume"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(stdout(&o).contains("finished in an earlier leg"));
    assert_eq!(std::fs::read(&metrics).unwrap(), before);
    let again = read_json(&out);
    assert_eq!(again["cells"][0]["final_return"], cell["final_return"]);
    // compare reads it, and refuses to mix it with a bench suite result.
    let o = rlrig(&["compare", out.to_str().unwrap(), out.to_str().unwrap()]);
    let table = stdout(&o);
    assert!(table.contains("| ppo CartPole-v1 | 475 |"), "{table}");
    let o = rlrig(&["compare", out.to_str().unwrap(), &fixture("home.json")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(common::stderr(&o).contains("like with like"));
    // Bad input: named, nothing run.
    for (bad, needle) in [
        (vec!["bench", "learn", "--algo", "nope"], "--algo nope"),
        (
            argv!["bench learn --env BipedalWalkerHardcore-v3 --algo ppo"],
            "--threshold",
        ),
        (
            vec!["bench", "learn", "--quick", "--env", "BipedalWalker-v3"],
            "no cell",
        ),
        (
            vec!["bench", "learn", "--eval-episodes", "0"],
            "--eval-episodes",
        ),
    ] {
        let o = rlrig(&bad);
        assert_eq!(o.status.code(), Some(1), "{bad:?}");
        assert!(
            common::stderr(&o).contains(needle),
            "{bad:?}: {}",
            common::stderr(&o)
        );
    }
}

#[test]
fn plot_draws_learning_curves_of_runs() {
    let d = tmp("plot");
    let run = d.join("run");
    ok(&argv![
        "train ppo --total-steps 8192 --quiet --eval-episodes 1 --run-dir",
        run.to_str().unwrap(),
    ]);
    let png = d.join("curves.png");
    ok(&[
        "plot",
        "--run",
        run.to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(is_png(&png));
    let o = rlrig(&[
        "plot",
        "--run",
        d.to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("metrics.csv"));
}

#[test]
fn probe_prints_a_report_and_json() {
    let o = rlrig(&["probe"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.starts_with("CPU ")
            && text.contains("NVIDIA")
            && text.contains("AMD")
            && text.contains("a parked thread wakes in"),
        "{text}"
    );
    let o = rlrig(&["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["cpu"]["logical_cores"].as_u64().unwrap() >= 1);
    // Measured wake-up cost and the pool's spin, within the pool's clamp (50 us..2 ms).
    assert!(v["threads"]["wake_up_us"].as_f64().unwrap() > 0.0);
    // Null on one CPU; else a positive time.
    let trip = &v["threads"]["round_trip_ns"];
    assert!(trip.is_null() || trip.as_f64().unwrap() > 0.0, "{trip}");
    let spin = v["threads"]["pool_spin_us"].as_f64().unwrap();
    assert!(
        (50.0..=2000.0).contains(&spin) || std::env::var_os("RLRIG_SPIN_US").is_some(),
        "{spin}"
    );
}

#[test]
fn play_renders_a_trained_agent_to_an_animated_gif() {
    let d = tmp("play");
    for env in [
        "CartPole-v1",
        "Pendulum-v1",
        "MountainCarContinuous-v0",
        "MinAtar/Breakout-v1",
        "MinAtar/Seaquest-v1",
    ] {
        let run = d.join(env.replace('/', "-"));
        let o = rlrig(&argv![
            "train ppo --env",
            env,
            "--total-steps 4096 --set num_steps=512 --set num_envs=4 --set num_minibatches=4",
            "--quiet --eval-episodes 1 --run-dir",
            run.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{env}: {}", stderr(&o));
        let gif = d.join(format!("{}.gif", env.replace('/', "-")));
        let out = common::play_gif(&run, &gif, &["--episodes", "2", "--max-frames", "20"]);
        let bytes = std::fs::read(&gif).unwrap();
        // One graphic control extension per frame: two episodes give several frames.
        let frames = bytes.windows(2).filter(|w| w == b"\x21\xf9").count();
        assert!(frames >= 4, "{env}: {frames} frames");
        assert!(out.contains("episode 2:"), "{env}: {out}");
    }
    let o = rlrig(&[
        "play",
        "--run",
        d.to_str().unwrap(),
        "--gif",
        d.join("x.gif").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("checkpoints/latest"));
}
