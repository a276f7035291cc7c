//! The `rlrig` binary end to end: listing, replay against a golden file, bench JSON,
//! and clear errors (non-zero exit, no panic) for bad input.

#[macro_use]
mod common;

use common::{
    each_fails_with, fails_with, json_lines, read_json, rlrig_in as rlrig, stderr, stdout, tmp,
};

/// `rlrig replay --env ENV --state STATE --actions - EXTRA...`.
fn replay_stdin<'a>(env: &'a str, state: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["replay", "--env", env, "--state", state, "--actions", "-"];
    args.extend_from_slice(extra);
    args
}

#[test]
fn envs_lists_every_id_with_spaces() {
    let o = rlrig(&["envs"], None);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    for id in rlrig_env::ENV_IDS {
        assert!(out.contains(id), "{id} missing from:\n{out}");
    }
    assert!(
        out.contains("Discrete(2)") && out.contains("Box(-2.0, 2.0, (1,), float32)"),
        "{out}"
    );
    // The long observation spaces come last, so the short columns stay on screen.
    let header = out.lines().next().unwrap();
    assert!(header.ends_with("  observation space"), "{header}");
    let pendulum = out.lines().find(|l| l.starts_with("Pendulum-v1")).unwrap();
    assert!(pendulum.ends_with("  Box([-1.0 -1.0 -8.0], [1.0 1.0 8.0], (3,), float32)"));
    assert_eq!(pendulum.find("Box(-2.0"), header.find("action space"));
    let o = rlrig(&["envs", "--json"], None);
    let lines = json_lines(&o);
    assert_eq!(lines.len(), rlrig_env::ENV_IDS.len());
    assert_eq!(lines[0]["action_space"]["n"], 2);
    assert_eq!(lines[0]["observation_space"]["high"][1], "inf");
    // The keys --env-arg takes.
    assert_eq!(lines[1]["id"], "Acrobot-v1");
    assert_eq!(
        lines[1]["params"],
        serde_json::json!(["max_episode_steps", "fast_trig"])
    );
}

#[test]
fn replay_reproduces_a_golden_gymnasium_episode() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rlrig-env/tests/golden/Pendulum-v1.json"
    );
    let doc = read_json(path);
    let ep = &doc["episodes"][0];
    let state = ep["state"].to_string();
    let actions: String = ep["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{a}\n"))
        .collect();
    let o = rlrig(&replay_stdin("Pendulum-v1", &state, &[]), Some(&actions));
    assert!(o.status.success(), "{}", stderr(&o));
    let steps = json_lines(&o);
    let want = ep["steps"].as_array().unwrap();
    assert_eq!(steps.len(), want.len());
    for (g, w) in steps.iter().zip(want) {
        assert_eq!(g["reward"].as_f64(), w["reward"].as_f64());
        assert_eq!(g["truncated"], w["truncated"]);
        for (a, b) in g["obs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(w["obs"].as_array().unwrap())
        {
            assert_eq!(a.as_f64().unwrap() as f32, b.as_f64().unwrap() as f32);
        }
    }
}

#[test]
fn replay_reads_an_actions_file_and_stops_at_episode_end() {
    let dir = tmp("replay");
    let file = dir.join("actions.txt");
    // Always push right: the pole falls long before 100 actions run out.
    std::fs::write(&file, "# push right\n".to_string() + &"1\n".repeat(100)).unwrap();
    let o = rlrig(
        &argv![
            "replay --env CartPole-v1 --state [0,0,0,0] --actions",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert!(
        lines.len() < 100,
        "episode should end early, ran {}",
        lines.len()
    );
    assert!(lines.last().unwrap().contains("\"terminated\":true"));
    assert!(
        lines[..lines.len() - 1]
            .iter()
            .all(|l| l.contains("\"terminated\":false"))
    );
}

#[test]
fn bad_input_gets_clear_errors() {
    let st = "[0, 0, 0, 0]";
    fails_with(
        &replay_stdin("CartPol-v1", st, &[]),
        Some("0\n"),
        &["unknown env id 'CartPol-v1'", "CartPole-v1"],
    );
    fails_with(
        &replay_stdin("CartPole-v1", "[0, 0]", &[]),
        Some("0\n"),
        &["CartPole-v1", "expected 4 numbers"],
    );
    fails_with(
        &replay_stdin("CartPole-v1", "zero", &[]),
        Some("0\n"),
        &["--state"],
    );
    fails_with(
        &replay_stdin("CartPole-v1", st, &[]),
        Some(""),
        &["no actions"],
    );
    fails_with(
        &replay_stdin("CartPole-v1", st, &[]),
        Some("0\n1\nleft\n"),
        &["line 3", "left"],
    );
    fails_with(
        &replay_stdin("CartPole-v1", st, &[]),
        Some("0\n2\n"),
        &["CartPole-v1", "action 1", "is 2", "Discrete(2)"],
    );
    fails_with(
        &replay_stdin("CartPole-v1", st, &[]),
        Some("[0.5]\n"),
        &["not an integer"],
    );
    fails_with(
        &replay_stdin("Pendulum-v1", "[0, 0]", &[]),
        Some("[1, 2]\n"),
        &["Pendulum-v1", "action 0", "expected 1 number"],
    );
    fails_with(
        &argv!["replay --env Pendulum-v1 --state [0,0] --actions /nonexistent/actions.txt"],
        None,
        &["/nonexistent/actions.txt"],
    );
    each_fails_with(&[
        (
            "bench env --env Nope-v0 --steps 10",
            &["unknown env id 'Nope-v0'"],
        ),
        ("bench env --num-envs 0 --steps 10", &["--num-envs"]),
        ("bench env --threads 0 --steps 10", &["--threads"]),
    ]);
    for bad in ["--warmup=-1", "--warmup=NaN", "--warmup=inf"] {
        fails_with(&["bench", "env", bad, "--steps", "10"], None, &["--warmup"]);
    }
    fails_with(
        &argv!["bench env --mode async --num-envs 4 --batch-size 9 --steps 10"],
        None,
        &["batch_size"],
    );
}

#[test]
fn env_args_reach_replay_and_bad_ones_are_clear_errors() {
    // A time limit of 3 steps: the replay stops there, truncated.
    let o = rlrig(
        &replay_stdin(
            "CartPole-v1",
            "[0,0,0,0]",
            &["--env-arg", "max_episode_steps=3"],
        ),
        Some("0\n1\n0\n1\n0\n"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["truncated"], true);
    assert_eq!(lines[1]["truncated"], false);
    let bench = |arg: &'static str| {
        [
            "bench",
            "env",
            "--env",
            "Acrobot-v1",
            "--steps",
            "10",
            "--env-arg",
            arg,
        ]
    };
    fails_with(
        &bench("fast=true"),
        None,
        &["Acrobot-v1", "fast=true", "max_episode_steps, fast_trig"],
    );
    fails_with(
        &bench("fast_trig=yes"),
        None,
        &["'yes' is not true or false"],
    );
    fails_with(
        &replay_stdin("Pendulum-v1", "[0, 0]", &["--env-arg", "g=nan"]),
        Some("[0.5]\n"),
        &["Pendulum-v1: parameter g=nan", "not a finite number"],
    );
    // Without `=`: clap's usage error (exit 2), naming the expected form.
    let o = rlrig(&bench("fast_trig"), None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("expected KEY=VALUE"), "{}", stderr(&o));
}

/// Without `--steps`, `bench env` times about 3 s of stepping whatever the env's speed,
/// and prints the rate in a unit that shows it (a slow env's thousands, not `0.00 M`).
#[test]
fn bench_env_without_steps_times_a_few_seconds_in_a_readable_unit() {
    let o = rlrig(
        &argv!["bench env --env Acrobot-v1 --num-envs 4 --threads 1 --warmup 0.05"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = out.lines().find(|l| l.contains("steps/s total")).unwrap();
    assert!(!line.contains(" 0.00 "), "{line}");
    let steps: u64 = line
        .rsplit('(')
        .next()
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no step count in {line}"));
    // More than the 10 warm-up batches' worth: the count came from the rate.
    assert!(steps > 40, "{line}");
}

#[test]
fn bench_env_prints_the_documented_json() {
    for mode in ["sync", "async"] {
        let o = rlrig(
            &argv![
                "bench env --env Acrobot-v1 --num-envs 16 --threads 2 --steps 2000 --warmup 0.05",
                "--mode",
                mode,
                "--env-arg fast_trig=true --json",
            ],
            None,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for key in [
            "env",
            "num_envs",
            "threads",
            "mode",
            "steps",
            "seconds",
            "steps_per_sec",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert_eq!(v["env"], "Acrobot-v1");
        assert_eq!(v["mode"], mode);
        assert_eq!(v["warmup_seconds"], 0.05);
        assert_eq!(v["env_args"]["fast_trig"], "true");
        assert!(v["steps"].as_u64().unwrap() >= 2000);
        assert!(v["steps_per_sec"].as_f64().unwrap() > 0.0);
    }
}
