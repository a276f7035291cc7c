//! `rlrig train ppo` and `rlrig eval` end to end: determinism across thread counts,
//! resume after SIGKILL, and clear errors for bad configs and checkpoints.

#[macro_use]
mod common;

const COLS: usize = rlrig_learn::ppo::DETERMINISTIC_COLUMNS;

use std::process::{Command, Stdio};

use common::{
    assert_contains, damage_latest_weights, each_fails_in, fails_with, final_weights,
    latest_weights, learning_columns, ok, read_json, resumes_like, rlrig, stderr, stdout, tmp,
};
use std::time::{Duration, Instant};

fn train_args<'a>(dir: &'a str, threads: &'a str) -> Vec<&'a str> {
    argv![
        "train ppo --env CartPole-v1 --total-steps 20480 --set checkpoint_every=4096 --threads",
        threads,
        "--run-dir",
        dir,
        "--quiet --eval-episodes 3",
    ]
}

/// Minibatches of 128 rows: the learner splits them in two chunks of rows, run by as
/// many threads as there are; 7 threads on this 2-core box also oversubscribe the pool.
#[test]
fn same_seed_gives_identical_metrics_and_weights_with_1_2_and_7_threads() {
    let (a, b, c) = (tmp("det1"), tmp("det2"), tmp("det7"));
    for (d, t) in [(&a, "1"), (&b, "2"), (&c, "7")] {
        ok(&train_args(d.to_str().unwrap(), t));
    }
    let (ma, mb) = (learning_columns(&a, COLS), learning_columns(&b, COLS));
    assert_eq!(ma.len(), 41, "header + 40 iterations");
    assert_eq!(ma, mb);
    assert_eq!(ma, learning_columns(&c, COLS));
    assert_eq!(final_weights(&a), final_weights(&b));
    assert_eq!(final_weights(&a), final_weights(&c));
    drop(c);
    for f in ["config.toml", "eval.json"] {
        assert!(a.join(f).exists(), "{f} missing");
    }
    assert!(std::fs::read_dir(&a).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("events.out.tfevents")
    }));
    // eval reads the run back.
    let v = common::eval_episodes(&a, 2);
    assert!(v["mean_return"].as_f64().unwrap() > 0.0);
    // CartPole pays 1 per step: the mean length is the mean return.
    assert_eq!(v["mean_length"], v["mean_return"]);
    assert_eq!(v["std_length"], v["std_return"]);
}

/// `--eval-episodes 0` skips the final evaluation: no eval.json, and the summary says
/// why; a later `rlrig eval` still evaluates the checkpoint.
#[test]
fn zero_eval_episodes_skips_the_final_evaluation() {
    let d = tmp("no-eval");
    let ds = d.to_str().unwrap();
    let o = ok(&argv![
        "train ppo --env CartPole-v1 --total-steps 2048 --eval-episodes 0 --run-dir",
        ds,
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(out.contains("evaluation: none (--eval-episodes 0"), "{out}");
    assert!(!d.join("eval.json").exists());
    ok(&["eval", "--run", ds, "--episodes", "1", "--json"]);
}

/// A2C's single gradient step per iteration on 5 x 32 = 160 rows (two chunks).
#[test]
fn a2c_is_identical_with_1_2_and_7_threads() {
    let dirs = [tmp("a2c1"), tmp("a2c2"), tmp("a2c7")];
    for (d, t) in dirs.iter().zip(["1", "2", "7"]) {
        ok(&argv![
            "train a2c --env CartPole-v1 --num-envs 32 --total-steps 16000 --threads",
            t,
            "--run-dir",
            d.to_str().unwrap(),
            "--quiet --eval-episodes 1",
        ]);
    }
    let w = final_weights(&dirs[0]);
    let m = learning_columns(&dirs[0], COLS);
    assert!(m.len() > 90, "one row per iteration: {}", m.len());
    for d in &dirs[1..] {
        assert_eq!(final_weights(d), w, "{d:?}");
        assert_eq!(learning_columns(d, COLS), m, "{d:?}");
    }
    // The run says it is A2C (its config, checkpoints), and PPO does not take it over.
    let ds = dirs[0].to_str().unwrap();
    let config = std::fs::read_to_string(dirs[0].join("config.toml")).unwrap();
    assert!(
        config.contains("rlrig train a2c") && config.contains("algo = \"a2c\""),
        "{config}"
    );
    let latest = std::fs::read_to_string(dirs[0].join("checkpoints/latest")).unwrap();
    let ck = std::fs::read_to_string(dirs[0].join("checkpoints").join(latest.trim())).unwrap();
    assert!(
        ck.contains("\"algo\":\"a2c\""),
        "{}",
        &ck[..ck.len().min(200)]
    );
    fails_with(
        &argv!["train ppo --resume --quiet --run-dir", ds],
        None,
        &["a2c checkpoint", "rlrig train a2c --resume"],
    );
    let cfg = dirs[0].join("config.toml");
    fails_with(
        &argv![
            "train ppo --quiet --config",
            cfg.to_str().unwrap(),
            "--run-dir",
            ds
        ],
        None,
        &["algo = \"a2c\"", "rlrig train ppo"],
    );
    ok(&argv!["train a2c --resume --quiet --run-dir", ds]);
}

/// `--trace` keeps the first and last `--trace-iterations` iterations, says in the file
/// how many it left out, and gives each pool worker its track.
#[test]
fn a_long_runs_trace_keeps_its_ends_and_counts_the_middle() {
    let d = tmp("trace");
    let trace = d.join("t.json");
    ok(&argv![
        "train ppo --env CartPole-v1 --total-steps 10240 --run-dir",
        d.join("run").to_str().unwrap(),
        "--quiet --eval-episodes 1 --trace",
        trace.to_str().unwrap(),
        "--trace-iterations 3 --threads 2",
    ]);
    let v = read_json(&trace);
    assert_eq!(v["otherData"]["rlrig_iterations"], 20);
    assert_eq!(v["otherData"]["rlrig_omitted_iterations"], 14);
    let events = v["traceEvents"].as_array().unwrap();
    let learner = events.iter().filter(|e| e["name"] == "learner").count();
    assert_eq!(learner, 6, "one learner span per kept iteration");
    // Minibatches of 128 rows run as two chunks on the pool: the worker has its track.
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "pool.task" && e["tid"] == 2)
    );
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["tid"] == 2 && e["args"]["name"] == "pool worker 0")
    );
    assert!(events.iter().any(|e| {
        e["ph"] == "i"
            && e["name"]
                .as_str()
                .unwrap()
                .contains("14 iterations omitted")
    }));
    let o = rlrig(&argv!["train ppo --trace x.json --trace-iterations 0"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--trace-iterations"));
}

#[test]
fn a_run_killed_after_a_checkpoint_resumes_to_the_same_weights() {
    let (full, killed) = (tmp("full"), tmp("killed"));
    ok(&train_args(full.to_str().unwrap(), "2"));

    let ks = killed.to_str().unwrap();
    resumes_like(
        &full,
        &killed,
        COLS,
        &train_args(ks, "2"),
        &train_args(ks, "1"),
    );
}

#[test]
fn bad_configs_devices_and_checkpoints_are_clear_errors() {
    let d = tmp("bad");
    let ds = d.to_str().unwrap();
    each_fails_in(
        ds,
        &[("train ppo --env Nope-v0", &["unknown env id 'Nope-v0'"])],
    );
    // A Burn device in a binary built without Burn (with it, the same command trains).
    #[cfg(not(feature = "burn"))]
    each_fails_in(
        ds,
        &[(
            "train ppo --device wgpu",
            &["--device wgpu", "no Burn backend"],
        )],
    );
    // Devices are the names --help lists: anything else is a usage error (exit 2).
    let o = rlrig(&["train", "ppo", "--device", "tpu", "--run-dir", ds]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("invalid value 'tpu' for '--device"));
    each_fails_in(
        ds,
        &[
            // The optimiser too, from a config (a typed field, not a string checked later).
            (
                "train a2c --set optimizer=\"sgd\"",
                &["optimizer", "sgd", "adam", "rmsprop"],
            ),
            (
                "train ppo --set activation=\"gelu\"",
                &["activation", "gelu", "tanh", "relu"],
            ),
            ("train ppo --set learning_rat=0.1", &["learning_rat"]),
            ("train ppo --set num_envs=four", &["num_envs"]),
            ("train ppo --set num_minibatches=3", &["num_minibatches"]),
        ],
    );
    std::fs::create_dir_all(&d).unwrap();
    let cfg = d.join("bad.toml");
    std::fs::write(&cfg, "gamma = 0.99\nclip_coeff = 0.1\n").unwrap();
    fails_with(
        &argv!["train ppo --config", cfg.to_str().unwrap(), "--run-dir", ds],
        None,
        &["bad.toml", "clip_coeff"],
    );
    std::fs::write(&cfg, "gamma = \"high\"\n").unwrap();
    fails_with(
        &argv!["train ppo --config", cfg.to_str().unwrap(), "--run-dir", ds],
        None,
        &["bad.toml", "gamma"],
    );
    fails_with(
        &["train", "ppo", "--resume", "--run-dir", ds],
        None,
        &["checkpoints/latest"],
    );
    fails_with(&["eval", "--run", ds], None, &["checkpoints/latest"]);

    // A real run, then damage it.
    let run = d.join("run");
    let rs = run.to_str().unwrap();
    ok(&argv![
        "train ppo --total-steps 2048 --run-dir",
        rs,
        "--quiet --eval-episodes 1",
    ]);
    fails_with(
        &["train", "ppo", "--total-steps", "2048", "--run-dir", rs],
        None,
        &["already holds a run", "--resume"],
    );
    fails_with(
        &argv!["train ppo --total-steps 4096 --run-dir", rs, "--resume"],
        None,
        &["config differs"],
    );
    damage_latest_weights(&run, 0xff);
    fails_with(
        &["eval", "--run", rs],
        None,
        &[".safetensors", "checksum mismatch"],
    );
    std::fs::write(latest_weights(&run).with_extension("json"), "{not json").unwrap();
    fails_with(
        &["eval", "--run", rs],
        None,
        &[".json", "not a valid rlrig checkpoint"],
    );
}

#[test]
fn prometheus_metrics_are_served_on_loopback_during_a_run() {
    use std::io::{BufRead, BufReader, Read, Write};
    let d = tmp("metrics");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rlrig"))
        .args([
            "train",
            "ppo",
            "--total-steps",
            "400000",
            "--quiet",
            "--metrics-addr",
            "0",
            "--run-dir",
        ])
        .arg(&*d)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("metrics: http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    assert!(
        addr.starts_with("127.0.0.1:"),
        "a bare port must bind to loopback: {addr}"
    );
    // Scrape until the first iteration's numbers are in (bounded: at most 30 s, as a
    // loaded CI machine runs the other tests' trainings beside this one).
    let start = Instant::now();
    let mut body = String::new();
    while start.elapsed() < Duration::from_secs(30) {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        body.clear();
        s.read_to_string(&mut body).unwrap();
        if body.contains("rlrig_steps_total") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().ok();
    child.wait().ok();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    for m in [
        "rlrig_steps_total{env=\"CartPole-v1\",algo=\"ppo\"}",
        "rlrig_steps_per_second",
        "rlrig_stage_seconds_total",
        "rlrig_cpu_busy_ratio",
        "rlrig_pool_task_seconds_total{env=\"CartPole-v1\",algo=\"ppo\",thread=\"caller\"}",
        "# TYPE rlrig_pool_task_seconds_total counter",
        "# TYPE rlrig_steps_total counter",
    ] {
        assert!(body.contains(m), "missing {m} in\n{body}");
    }
}

/// Box2D envs keep a whole physics world per env: a checkpoint carries Box2D's world image
/// (contacts and warm starts included), so a killed run resumes to the same weights.
#[test]
fn a_killed_box2d_run_resumes_to_the_same_weights() {
    for env in ["LunarLander-v3", "BipedalWalker-v3"] {
        let (full, killed) = (tmp(&format!("{env}-full")), tmp(&format!("{env}-killed")));
        let args = |dir: &std::path::Path| -> Vec<String> {
            [
                "train",
                "ppo",
                "--env",
                env,
                "--total-steps",
                "32768",
                "--num-envs",
                "8",
                "--set",
                "checkpoint_every=4096",
                "--threads",
                "2",
                "--run-dir",
                dir.to_str().unwrap(),
                "--quiet",
                "--eval-episodes",
                "1",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let a = args(&full);
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let k = args(&killed);
        let k: Vec<&str> = k.iter().map(String::as_str).collect();
        resumes_like(&full, &killed, COLS, &k, &k);
    }
}

/// `eval --run DIR --json`'s mean return.
fn eval_mean(dir: &std::path::Path) -> f64 {
    let o = ok(&["eval", "--run", dir.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["mean_return"].as_f64().unwrap()
}

/// `play --run DIR --gif` of one episode: its "episode 1: N steps" line.
fn played_steps(dir: &std::path::Path) -> String {
    let out = common::play_gif(dir, &dir.join("play.gif"), &[]);
    out.lines()
        .find(|l| l.starts_with("episode 1:"))
        .unwrap_or_else(|| panic!("{out}"))
        .split(',')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn env_args_reach_training_eval_play_and_resume() {
    // A 5-step time limit: CartPole cannot fall in 5 steps, so every episode returns
    // exactly 5 where the run's env args are applied, and at least 8 where they are not.
    let d = tmp("envargs-ppo");
    let ds = d.to_str().unwrap();
    let args = [
        "train",
        "ppo",
        "--env",
        "CartPole-v1",
        "--env-arg",
        "max_episode_steps=5",
        "--total-steps",
        "1024",
        "--quiet",
        "--eval-episodes",
        "3",
        "--run-dir",
        ds,
    ];
    ok(&args);
    let config = std::fs::read_to_string(d.join("config.toml")).unwrap();
    assert!(
        config.contains("[env_args]\nmax_episode_steps = \"5\""),
        "{config}"
    );
    let metrics = std::fs::read_to_string(d.join("metrics.csv")).unwrap();
    for row in metrics.lines().skip(1) {
        assert_eq!(row.split(',').nth(4), Some("5"), "episode_length: {row}");
    }
    assert_eq!(eval_mean(&d), 5.0);
    assert_eq!(played_steps(&d), "episode 1: 5 steps");
    // --resume needs only the run directory; other env args are refused by name.
    let o = ok(&["train", "ppo", "--run-dir", ds, "--resume", "--quiet"]);
    assert!(stdout(&o).contains("resumed from step 1024"));
    fails_with(
        &argv![
            "train ppo --run-dir",
            ds,
            "--resume --env-arg max_episode_steps=6",
        ],
        None,
        &[
            "env_args: {\"max_episode_steps\":\"5\"} in the checkpoint",
            "\"6\"} given",
        ],
    );
    fails_with(
        &argv!["train ppo --env-arg fast_trig=true --run-dir", ds],
        None,
        &["CartPole-v1", "fast_trig", "unknown parameter"],
    );
    fails_with(
        &argv!["train ppo --env Acrobot-v1 --env-arg fast_trig=yes"],
        None,
        &["Acrobot-v1", "fast_trig=yes", "not true or false"],
    );

    // ES from a config file whose env args are TOML numbers; SAC on Pendulum.
    let e = tmp("envargs-es");
    let cfg = e.join("es.toml");
    std::fs::write(
        &cfg,
        "env = \"CartPole-v1\"\n[env_args]\nmax_episode_steps = 5\n",
    )
    .unwrap();
    ok(&argv![
        "train es --config",
        cfg.to_str().unwrap(),
        "--population 4 --generations 1 --quiet --run-dir",
        e.join("run").to_str().unwrap(),
    ]);
    assert_eq!(eval_mean(&e.join("run")), 5.0);
    std::fs::write(
        &cfg,
        "env = \"CartPole-v1\"\n[env_args]\nmax_episode_steps = [5]\n",
    )
    .unwrap();
    fails_with(
        &["train", "es", "--config", cfg.to_str().unwrap()],
        None,
        &[
            "es.toml",
            "key 'env_args'",
            "must be a string, number or boolean",
        ],
    );
    let s = tmp("envargs-sac");
    ok(&argv![
        "train sac --env-arg max_episode_steps=7 --total-steps 64 --set learning_starts=32 --quiet",
        "--eval-episodes 1 --run-dir",
        s.to_str().unwrap(),
    ]);
    assert_eq!(played_steps(&s), "episode 1: 7 steps");
}

/// `--seeds` on the CPU packs the runs onto the cores, each in its own directory and
/// bit-identical to that seed trained alone, with one summary; a bad config is one
/// error before anything starts.
#[test]
fn seeds_are_packed_and_each_equals_its_run_alone() {
    let (pack, alone) = (tmp("pack"), tmp("pack-alone"));
    let ps = pack.to_str().unwrap();
    let mut args = train_args(ps, "2");
    args.extend(["--seeds", "1-3"]);
    let o = rlrig(&args);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert_contains(
        &out,
        &[
            "3 seeds of CartPole-v1 ppo: 2 at a time, 1 thread each",
            "seed 2: greedy return",
            "greedy return over 3 seeds: mean",
            "seeds.json",
        ],
    );
    let summary = read_json(pack.join("seeds.json"));
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{summary}");
    for (r, seed) in runs.iter().zip(1..) {
        assert_eq!(r["seed"], seed, "{summary}");
        assert_eq!(r["status"], "done", "{summary}");
        assert!(
            r["eval"]["mean_return"].as_f64().unwrap() > 0.0,
            "{summary}"
        );
    }
    let s = alone.to_str().unwrap();
    let mut a2 = train_args(s, "2");
    a2.extend(["--seed", "2"]);
    ok(&a2);
    assert_eq!(final_weights(&alone), final_weights(&pack.join("seed2")));
    assert_eq!(
        learning_columns(&alone, COLS),
        learning_columns(&pack.join("seed2"), COLS)
    );
    assert_ne!(final_weights(&pack.join("seed1")), final_weights(&alone));
    // Errors before any run starts: nothing is written.
    let bad_root = tmp("pack-bad");
    let bad = bad_root.join("runs");
    let b = bad.to_str().unwrap();
    for (extra, needle) in [
        (&["--seeds", "1-2", "--seed", "3"][..], "--seed and --seeds"),
        (&["--seeds", "1-2", "--set", "bogus=1"][..], "bogus"),
        (&["--seeds", "1-2", "--jobs", "0"][..], "--jobs"),
    ] {
        let mut a = train_args(b, "2");
        a.extend(extra);
        fails_with(&a, None, &[needle]);
        assert!(!bad.exists(), "{extra:?} wrote {}", bad.display());
    }
}

/// `--sweep` trains every seed once per value, each run in BASE/<KEY=VALUE>/seed<N> with
/// the value in its config and equal to that run with `--set`; the summary ranks the
/// values; a bad value is one error before anything starts.
#[test]
fn a_sweep_trains_each_value_like_its_set_run() {
    let (sweep, alone) = (tmp("sweep"), tmp("sweep-alone"));
    let ss = sweep.to_str().unwrap();
    let mut args = train_args(ss, "2");
    args.extend(["--seeds", "1-2", "--sweep", "learning_rate=1e-3,2.5e-4"]);
    let o = rlrig(&args);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", common::stderr(&o));
    assert_contains(
        &out,
        &[
            "2 variants x 2 seeds of CartPole-v1 ppo: 2 at a time",
            "learning_rate=1e-3 seed 1: greedy return",
            "learning_rate=2.5e-4: greedy return over 2 seeds: mean",
        ],
    );
    let summary = read_json(sweep.join("seeds.json"));
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{summary}");
    for (r, (variant, seed)) in runs.iter().zip([
        ("learning_rate=1e-3", 1),
        ("learning_rate=1e-3", 2),
        ("learning_rate=2.5e-4", 1),
        ("learning_rate=2.5e-4", 2),
    ]) {
        assert_eq!(
            (r["variant"].as_str(), r["seed"].as_u64()),
            (Some(variant), Some(seed))
        );
        assert_eq!(r["sets"][0], variant, "{summary}");
        assert_eq!(r["status"], "done", "{summary}");
        let config =
            std::fs::read_to_string(sweep.join(variant).join(format!("seed{seed}/config.toml")))
                .unwrap();
        let lr = variant.split_once('=').unwrap().1.parse::<f64>().unwrap();
        let saved = config
            .lines()
            .find_map(|l| l.strip_prefix("learning_rate = "))
            .and_then(|v| v.parse::<f64>().ok());
        assert_eq!(saved, Some(lr), "{config}");
    }
    let mut a2 = train_args(alone.to_str().unwrap(), "2");
    a2.extend(["--seed", "2", "--set", "learning_rate=2.5e-4"]);
    assert!(rlrig(&a2).status.success());
    let swept = sweep.join("learning_rate=2.5e-4/seed2");
    assert_eq!(final_weights(&alone), final_weights(&swept));
    assert_ne!(
        final_weights(&swept),
        final_weights(&sweep.join("learning_rate=1e-3/seed2"))
    );
    let bad_root = tmp("sweep-bad");
    let bad = bad_root.join("runs");
    for (extra, needle) in [
        (
            &["--seeds", "1", "--sweep", "learning_rate=1e-3,oops"][..],
            "--sweep learning_rate=oops",
        ),
        (
            &["--seeds", "1", "--sweep", "learning_rate"][..],
            "KEY=VALUE1",
        ),
        (&["--sweep", "learning_rate=1e-3"][..], "--seeds"),
    ] {
        let mut a = train_args(bad.to_str().unwrap(), "2");
        a.extend(extra);
        let o = rlrig(&a);
        assert_ne!(o.status.code(), Some(0), "{extra:?}");
        assert!(
            common::stderr(&o).contains(needle),
            "{extra:?}: {}",
            common::stderr(&o)
        );
        assert!(!bad.exists(), "{extra:?} wrote {}", bad.display());
    }
}
