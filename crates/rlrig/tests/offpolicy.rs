//! `rlrig train ddpg|td3|sac|dqn` end to end: determinism across thread counts, resume
//! after SIGKILL (replay buffer included), eval and play on the run, clear errors.

#[macro_use]
mod common;

const COLS: usize = rlrig_learn::replay::OFFPOLICY_DETERMINISTIC_COLUMNS;

use common::{
    assert_contains, damage_latest_weights, each_fails_with, fails_with, final_weights,
    learning_columns, ok, resumes_like, rlrig, stderr, stdout, tmp,
};

/// A small, fast run of `algo` on `env`: 3000 steps on 4 envs (`--total-steps` the
/// sixth argument), tiny nets, a checkpoint every 1000 steps, `extra` on top.
fn small_run<'a>(
    algo: &'a str,
    env: &'a str,
    extra: &'static str,
    dir: &'a str,
    threads: &'a str,
) -> Vec<&'a str> {
    let mut a = argv![
        "train",
        algo,
        "--env",
        env,
        "--total-steps 3000 --num-envs 4 --set learning_starts=500 --set hidden=[32,32]",
        "--set batch_size=128 --set log_every=500 --set checkpoint_every=1000 --threads",
        threads,
        "--run-dir",
        dir,
        "--quiet --eval-episodes 2",
    ];
    a.extend(common::words(extra));
    a
}

fn args<'a>(algo: &'a str, dir: &'a str, threads: &'a str) -> Vec<&'a str> {
    small_run(algo, "Pendulum-v1", "", dir, threads)
}

/// Replay batches of 128 rows: two chunks for the data-parallel learner.
#[test]
fn same_seed_same_run_with_1_2_and_7_threads_and_eval_play_read_it() {
    for algo in ["sac", "td3", "ddpg"] {
        let (a, b, c) = (
            tmp(&format!("{algo}-t1")),
            tmp(&format!("{algo}-t2")),
            tmp(&format!("{algo}-t7")),
        );
        for (d, t) in [(&a, "1"), (&b, "2"), (&c, "7")] {
            ok(&args(algo, d.to_str().unwrap(), t));
        }
        let (ma, mb) = (learning_columns(&a, COLS), learning_columns(&b, COLS));
        assert_eq!(ma.len(), 7, "{algo}: header + 6 rows");
        assert_eq!(ma, mb, "{algo}");
        assert_eq!(ma, learning_columns(&c, COLS), "{algo}");
        assert_eq!(final_weights(&a), final_weights(&b), "{algo}");
        assert_eq!(final_weights(&a), final_weights(&c), "{algo}");
        drop(c);
        // 3000 steps, one update per transition after step 500.
        assert!(ma[6].starts_with("3000,"), "{}", ma[6]);
        assert_eq!(ma[6].split(',').nth(4), Some("2500"), "{algo} updates");
        let config = std::fs::read_to_string(a.join("config.toml")).unwrap();
        assert!(config.contains(&format!("algo = \"{algo}\"")), "{config}");

        let v = common::eval_episodes(&a, 2);
        let m = v["mean_return"].as_f64().unwrap();
        assert!(
            m < 0.0 && m > -2000.0,
            "Pendulum returns lie in (-2000, 0]: {m}"
        );
        let gif = a.join("p.gif");
        common::play_gif(&a, &gif, &["--max-frames", "10"]);
    }
}

/// A run SIGKILLed after its first checkpoint (2 threads) and resumed (1 thread) ends
/// with the uninterrupted run's weights and metrics: the checkpoint holds weights,
/// targets, Adam moments and the replay buffer. `args(dir, threads)`.
fn a_killed_run_resumes_exactly(name: &str, args: impl Fn(&str, &str) -> Vec<String>) {
    let (full, killed) = (tmp(&format!("{name}-full")), tmp(&format!("{name}-killed")));
    let with = |d: &std::path::Path, threads: &str, extra: &[&str]| -> Vec<String> {
        let mut v = args(d.to_str().unwrap(), threads);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let o = rlrig(&strs(&with(&full, "2", &[])));
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    let (run, resume) = (with(&killed, "2", &[]), with(&killed, "1", &[]));
    resumes_like(&full, &killed, COLS, &strs(&run), &strs(&resume));
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn owned(v: Vec<&str>) -> Vec<String> {
    v.into_iter().map(String::from).collect()
}

#[test]
fn a_killed_td3_run_resumes_to_the_same_weights_and_buffer() {
    a_killed_run_resumes_exactly("td3", |d, t| owned(args("td3", d, t)));
}

#[test]
fn off_policy_bad_input_is_a_clear_error() {
    each_fails_with(&[
        (
            "train sac --env CartPole-v1",
            &["CartPole-v1", "discrete", "rlrig train ppo"],
        ),
        ("train td3 --set tau=2", &["tau must lie in [0, 1]"]),
        ("train sac --set utd=2", &["unknown key 'utd'", "utd_ratio"]),
        (
            "train sac --set algo=\"td3\"",
            &["algo = \"td3\"", "rlrig train sac"],
        ),
        ("train ddpg --set hidden=\"big\"", &["key 'hidden'"]),
    ]);
    // A SAC run resumed as TD3 or PPO names what the checkpoint is.
    let d = tmp("sac-mismatch");
    let mut a = args("sac", d.to_str().unwrap(), "1");
    a[5] = "600";
    ok(&a);
    let ds = d.to_str().unwrap();
    fails_with(
        &["train", "td3", "--run-dir", ds, "--resume", "--quiet"],
        None,
        &["sac checkpoint, not td3", "rlrig train sac --resume"],
    );
    fails_with(
        &["train", "ppo", "--run-dir", ds, "--resume", "--quiet"],
        None,
        &["sac checkpoint, not ppo"],
    );
    fails_with(
        &["train", "sac", "--run-dir", ds, "--quiet"],
        None,
        &["already holds a run", "--resume"],
    );
    // A damaged weights file is caught by its checksum.
    damage_latest_weights(&d, 0x55);
    fails_with(&["eval", "--run", ds], None, &["checksum mismatch"]);
}

/// A small DQN run on CartPole: an update round every 4 env steps after step 500.
fn dqn_args<'a>(dir: &'a str, threads: &'a str) -> Vec<&'a str> {
    let dqn = "--set train_frequency=4 --set gradient_steps=1 --set target_network_frequency=100";
    small_run("dqn", "CartPole-v1", dqn, dir, threads)
}

#[test]
fn dqn_same_seed_same_run_with_1_and_2_threads_and_eval_play_read_it() {
    let (a, b) = (tmp("dqn-t1"), tmp("dqn-t2"));
    for (d, t) in [(&a, "1"), (&b, "2")] {
        let o = ok(&dqn_args(d.to_str().unwrap(), t));
        assert!(stdout(&o).contains("CartPole-v1 dqn on cpu"));
    }
    let (ma, mb) = (learning_columns(&a, COLS), learning_columns(&b, COLS));
    assert_eq!(ma.len(), 7, "header + 6 rows");
    assert_eq!(ma, mb);
    assert_eq!(final_weights(&a), final_weights(&b));
    // Multiples of 4 in (500, 3000]: 625 rounds of one update.
    assert!(ma[6].starts_with("3000,"), "{}", ma[6]);
    assert_eq!(ma[6].split(',').nth(4), Some("625"), "updates");
    let config = std::fs::read_to_string(a.join("config.toml")).unwrap();
    assert!(config.contains("loss = \"huber\""), "{config}");
    let v = common::eval_episodes(&a, 3);
    let m = v["mean_return"].as_f64().unwrap();
    assert!((1.0..=500.0).contains(&m), "CartPole returns: {m}");
    common::play_gif(&a, &a.join("p.gif"), &["--max-frames", "10"]);
}

#[test]
fn a_killed_dqn_run_resumes_to_the_same_weights_and_buffer() {
    a_killed_run_resumes_exactly("dqn", |d, t| owned(dqn_args(d, t)));
}

#[test]
fn dqn_bad_input_is_a_clear_error() {
    each_fails_with(&[
        (
            "train dqn --env Pendulum-v1",
            &["Pendulum-v1", "continuous", "rlrig train sac"],
        ),
        ("train dqn --set end_e=2", &["end_e must lie in [0, 1]"]),
        ("train dqn --set loss=\"l3\"", &["key 'loss'"]),
        (
            "train dqn --set gradient_steps=0",
            &["gradient_steps must be at least 1"],
        ),
    ]);
    let d = tmp("dqn-mismatch");
    let mut a = dqn_args(d.to_str().unwrap(), "1");
    a[5] = "600";
    ok(&a);
    let ds = d.to_str().unwrap();
    fails_with(
        &["train", "sac", "--run-dir", ds, "--resume", "--quiet"],
        None,
        &["dqn checkpoint, not sac"],
    );
}

/// rlrig keeps two checkpoints so that one damaged file loses nothing: with the newest
/// one's weights damaged, eval reads the older one (and says which it skipped), and
/// --resume continues from it to the weights of an undamaged run.
#[test]
fn a_damaged_newest_checkpoint_falls_back_to_the_older_one() {
    let (intact, damaged) = (tmp("dqn-intact"), tmp("dqn-damaged"));
    for d in [&intact, &damaged] {
        ok(&dqn_args(d.to_str().unwrap(), "2"));
    }
    let w = damage_latest_weights(&damaged, 0x55);
    let ds = damaged.to_str().unwrap();
    let o = ok(&["eval", "--run", ds, "--episodes", "2"]);
    let err = stderr(&o);
    assert_contains(
        &err,
        &[
            "skipped a damaged checkpoint",
            "checksum mismatch",
            w.file_stem().unwrap().to_str().unwrap(),
            "ckpt-000000002000",
        ],
    );
    let mut resume = dqn_args(ds, "1");
    resume.push("--resume");
    let o = ok(&resume);
    assert!(
        stdout(&o).contains("resumed from step 2000"),
        "{}",
        stdout(&o)
    );
    assert_eq!(final_weights(&intact), final_weights(&damaged));
    assert_eq!(
        learning_columns(&intact, COLS),
        learning_columns(&damaged, COLS)
    );
}
