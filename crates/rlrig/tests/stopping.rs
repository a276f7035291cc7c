//! How runs end on people's rigs (issue 26): SIGINT or SIGTERM mid-run writes a
//! checkpoint from which `--resume` ends bit-identical to an uninterrupted run; a
//! second SIGINT exits at once; sizes beyond the machine's memory are refused before
//! anything is allocated; a write that fails (a full disk, a directory in the way)
//! names the path and the reason and leaves the last checkpoint loadable.

#[macro_use]
mod common;

use common::{
    fails_with, final_weights, learning_columns, ok, read_json, rlrig, signal, spawn,
    spawn_with_env, stderr, stdout, tmp, wait_for_lines, wait_until,
};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Runs `args` (with `--run-dir` appended) to the end, then again stopped by `sig`
/// once `rows` metrics rows are written, then resumes the stopped run: it must end
/// with the same weights and deterministic metrics columns as the uninterrupted one.
fn stop_and_resume(name: &str, args: &[&str], sig: &str, rows: usize, cols: usize) {
    let (full, stopped) = (tmp(&format!("{name}-full")), tmp(&format!("{name}-stop")));
    let with_dir = |d: &Path, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["--run-dir".into(), d.to_str().unwrap().into()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |v: &[String]| -> Output { rlrig(&v.iter().map(String::as_str).collect::<Vec<_>>()) };
    let o = run(&with_dir(&full, &[]));
    assert!(o.status.success(), "{name}: {}", stderr(&o));

    let v = with_dir(&stopped, &[]);
    let child = spawn(&v.iter().map(String::as_str).collect::<Vec<_>>());
    let child = wait_for_lines(child, &stopped.join("metrics.csv"), rows);
    signal(&child, sig);
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    let code = if sig == "INT" { 130 } else { 143 };
    assert_eq!(o.status.code(), Some(code), "{name}: {out}{}", stderr(&o));
    assert!(
        out.contains(&format!("interrupted by SIG{sig} "))
            && out.contains("--resume`")
            && out.contains(": skipped (stopped early"),
        "{name}: {out}"
    );
    assert!(
        !stopped.join("eval.json").exists(),
        "{name}: a stopped run has no final evaluation"
    );
    assert!(
        learning_columns(&stopped, cols).len() < learning_columns(&full, cols).len(),
        "{name}: the run was not stopped early"
    );
    // The checkpoint of the stop loads (eval) and resumes to the uninterrupted end.
    let s = stopped.to_str().unwrap();
    let eval: &[&str] = if name == "alphazero" {
        &["--opponent", "random", "--games", "2"]
    } else {
        &["--episodes", "1"]
    };
    let o = rlrig(&[&["eval", "--run", s], eval].concat());
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    let o = run(&with_dir(&stopped, &["--resume"]));
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    assert!(stdout(&o).contains("resumed from"));
    assert_eq!(
        learning_columns(&full, cols),
        learning_columns(&stopped, cols),
        "{name}: metrics after the resume"
    );
    assert_eq!(
        final_weights(&full),
        final_weights(&stopped),
        "{name}: final weights after the resume"
    );
}

/// `train ALGO` on CartPole for 300k steps (hundreds of iterations) with no periodic
/// checkpoint: the stop writes the only one.
fn cartpole(algo: &str) -> [&str; 11] {
    [
        "train",
        algo,
        "--env",
        "CartPole-v1",
        "--total-steps",
        "300000",
        "--set",
        "checkpoint_every=0",
        "--quiet",
        "--eval-episodes",
        "2",
    ]
}

#[test]
fn sigint_stops_ppo_with_a_checkpoint_that_resumes_exactly() {
    stop_and_resume(
        "ppo",
        &cartpole("ppo"),
        "INT",
        3,
        rlrig_learn::ppo::DETERMINISTIC_COLUMNS,
    );
}

/// IMPALA's lagged actor keeps a rollout in flight between iterations: the stop waits
/// for one iteration without it, so the checkpoint is complete.
#[test]
fn sigterm_stops_impala_with_a_checkpoint_that_resumes_exactly() {
    stop_and_resume(
        "impala",
        &cartpole("impala"),
        "TERM",
        3,
        rlrig_learn::ppo::DETERMINISTIC_COLUMNS,
    );
}

/// SAC stops within one collection step, part way through a logging chunk: the
/// chunk's sums are in the checkpoint, so even the metrics rows resume exactly.
#[test]
fn sigint_stops_sac_mid_chunk_and_resumes_exactly() {
    stop_and_resume(
        "sac",
        &argv![
            "train sac --env Pendulum-v1 --total-steps 6000 --set learning_starts=500 --set",
            "log_every=400 --set checkpoint_every=0 --quiet --eval-episodes 1",
        ],
        "INT",
        3,
        rlrig_learn::replay::OFFPOLICY_DETERMINISTIC_COLUMNS,
    );
}

#[test]
fn sigterm_stops_es_and_alphazero_with_checkpoints_that_resume_exactly() {
    stop_and_resume(
        "es",
        &argv![
            "train es --env Pendulum-v1 --population 32 --generations 150 --episodes-per-member 2",
            "--set checkpoint_every=0 --quiet --eval-episodes 1",
        ],
        "TERM",
        3,
        rlrig_learn::evolution::EVO_DETERMINISTIC_COLUMNS,
    );
    stop_and_resume(
        "alphazero",
        &argv!["train alphazero --iterations 40 --set checkpoint_every=0 --quiet"],
        "INT",
        3,
        rlrig_learn::alphazero::AZ_DETERMINISTIC_COLUMNS,
    );
}

/// A second Ctrl-C does not wait for the iteration: iterations of a 2048-2048 network
/// on 256 x 256 steps take seconds; the second SIGINT ends the process with 130 before
/// the first one finishes, with no summary and no checkpoint.
#[test]
fn a_second_sigint_exits_at_once() {
    let d = tmp("twice");
    let ds = d.to_str().unwrap();
    let child = spawn(&argv![
        "train ppo --env CartPole-v1 --num-envs 256 --total-steps 100000000 --set num_steps=256",
        "--set hidden=[2048,2048] --run-dir",
        ds,
        "--quiet",
    ]);
    let mut child = wait_for_lines(child, &d.join("metrics.csv"), 0);
    // Signals sent together may merge into one: keep sending until the process ends.
    while child.try_wait().unwrap().is_none() {
        signal(&child, "INT");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(130), "{out}{}", stderr(&o));
    assert!(
        !out.contains("interrupted by"),
        "the second SIGINT waited for the iteration: {out}"
    );
    assert!(
        learning_columns(&d, 1).len() == 1,
        "an iteration finished before the second SIGINT"
    );
    assert!(!d.join("checkpoints/latest").exists());
}

/// Sizes no machine has are refused before anything is allocated, naming what was
/// asked, what it needs, what the machine has and the flag to lower; no run directory
/// is made.
#[test]
fn impossible_sizes_are_refused_with_the_flag_to_lower() {
    let d = tmp("huge");
    let run = d.join("run");
    let r = run.to_str().unwrap();
    let cases: [(&[&str], &str); 10] = [
        (
            &["bench", "env", "--num-envs", "500000000000"],
            "--num-envs",
        ),
        (
            &argv![
                "train ppo --num-envs 5000000000 --total-steps 1000000000000 --run-dir",
                r,
            ],
            "--num-envs",
        ),
        (
            &argv![
                "train sac --set buffer_size=1000000000000 --total-steps 1000000000000 --run-dir",
                r,
            ],
            "buffer_size",
        ),
        (
            &argv!["train ga --population 100000000000 --run-dir", r],
            "--population",
        ),
        (
            &argv!["train es --set hidden=[100000000,100000000] --run-dir", r],
            "hidden",
        ),
        (
            &argv!["train alphazero --games 10000000000 --run-dir", r],
            "--games",
        ),
        (&["bench", "alphazero", "--games", "10000000000"], "--games"),
        // Evaluation episodes are stepped as one batch.
        (
            &argv!["train ppo --eval-episodes 100000000000 --run-dir", r],
            "--eval-episodes",
        ),
        (
            &argv!["eval --env CartPole-v1 --policy random --episodes 100000000000"],
            "--episodes",
        ),
        (
            &argv!["train alphazero --set eval_games=100000000000 --run-dir", r],
            "eval_games",
        ),
    ];
    for (args, flag) in cases {
        fails_with(
            args,
            None,
            &["needs about", "of memory", "available: lower", flag],
        );
        assert!(!run.exists(), "{args:?} made its run directory");
    }
}

fn ppo_args(dir: &str) -> Vec<&str> {
    argv![
        "train ppo --env CartPole-v1 --total-steps 40960 --set checkpoint_every=4096 --run-dir",
        dir,
        "--quiet --eval-episodes 2",
    ]
}

/// What a run left in `dir` after a failed write: no temp files, and `latest` names a
/// checkpoint that loads.
fn left_intact(dir: &Path) {
    for sub in [dir.to_path_buf(), dir.join("checkpoints")] {
        for e in std::fs::read_dir(&sub).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(!name.contains(".tmp"), "temp file left: {name}");
        }
    }
    ok(&["eval", "--run", dir.to_str().unwrap(), "--episodes", "1"]);
}

/// A directory where the third checkpoint's JSON is to be written (what a read-only or
/// damaged run directory also does): the run ends with an error naming the path and
/// the reason, leaves no partial file, the second checkpoint still loads, and once the
/// way is clear `--resume` finishes the run.
#[test]
fn a_write_that_fails_names_the_path_and_keeps_the_last_checkpoint() {
    let d = tmp("blocked");
    let ds = d.to_str().unwrap();
    let args = ppo_args(ds);
    // The run's checkpoints are named by iteration: ckpt-{k:08}, 2k, 3k, ...; a run to
    // the end keeps the last two, which give k.
    ok(&args);
    let its = rlrig_learn::run::RunDir::open(d.to_path_buf())
        .unwrap()
        .checkpoint_steps();
    assert_eq!(its.len(), 2, "{its:?}");
    let k = its[1] - its[0];
    std::fs::remove_dir_all(&d).unwrap();
    // The JSON is blocked, so the weights before it are written and must be removed.
    let third = format!("ckpt-{:08}.json", 3 * k);
    let blocked = d.join("checkpoints").join(&third);
    std::fs::create_dir_all(blocked.join("squatter")).unwrap();
    let o = rlrig(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: ") && !err.contains("panicked"),
        "{err}"
    );
    assert!(err.contains(&third), "the error names the path: {err}");
    assert!(
        err.contains("directory"),
        "the error gives the reason: {err}"
    );
    left_intact(&d);
    assert!(
        !d.join("checkpoints")
            .join(format!("ckpt-{:08}.safetensors", 3 * k))
            .exists(),
        "the failed checkpoint's weights were left behind"
    );
    let latest = std::fs::read_to_string(d.join("checkpoints/latest")).unwrap();
    assert_eq!(latest.trim(), format!("ckpt-{:08}.json", 2 * k));
    std::fs::remove_dir_all(&blocked).unwrap();
    let mut resume = args.clone();
    resume.push("--resume");
    ok(&resume);
    assert!(d.join("eval.json").exists());
}

/// A run directory on a filesystem that fills up after the first checkpoint: the run
/// ends with "No space left on device" naming the file, leaves no partial file, the
/// checkpoint still loads, and with space freed `--resume` finishes the run. Needs
/// a small tmpfs (root, as CI and the test script run); where none can be mounted the
/// test says so and checks the same with a directory in the way instead.
#[test]
fn a_full_disk_names_the_file_and_keeps_the_last_checkpoint() {
    let d = tmp("full-disk");
    let mnt = d.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=4m",
            "tmpfs",
            mnt.to_str().unwrap(),
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!(
            "no tmpfs can be mounted here (not root?): the write failure is checked by a_write_that_fails_names_the_path_and_keeps_the_last_checkpoint"
        );
        drop(d);
        return;
    }
    let run = mnt.join("run");
    let rs = run.to_str().unwrap().to_string();
    let mut args = ppo_args(&rs);
    // Long enough that the disk is filled while it runs.
    let n = args.iter().position(|x| *x == "40960").unwrap();
    args[n] = "100000000";
    let child = spawn(&args);
    let latest = run.join("checkpoints/latest");
    let child = wait_until(child, "a checkpoint was written", || latest.exists());
    // Fill what is left of the filesystem.
    let mut fill = std::fs::File::create(mnt.join("filler")).unwrap();
    let chunk = vec![7u8; 64 << 10];
    while std::io::Write::write_all(&mut fill, &chunk).is_ok() {}
    let o = child.wait_with_output().unwrap();
    let check = || {
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        assert!(err.contains(&rs), "the error names the file: {err}");
        assert!(!err.contains("panicked"), "{err}");
        left_intact(&run);
        drop(fill);
        std::fs::remove_file(mnt.join("filler")).unwrap();
        // With space again the run resumes: it writes a new checkpoint, then stops.
        let before = std::fs::read_to_string(&latest).unwrap();
        let mut resume = args.clone();
        resume.push("--resume");
        let child = spawn(&resume);
        let child = wait_until(child, "a new checkpoint was written", || {
            std::fs::read_to_string(&latest).is_ok_and(|l| l != before)
        });
        signal(&child, "INT");
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check));
    let _ = Command::new("umount").arg(&mnt).status();
    drop(d);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// `--seeds` on the CPU: a Ctrl-C reaches the launcher, which passes it on to every
/// running seed (each writes a checkpoint) and starts no more; the same command with
/// --resume continues the stopped seeds and starts the others, to the weights of the
/// seeds trained alone.
#[test]
fn sigint_stops_every_packed_seed_at_a_checkpoint_and_resume_finishes_them() {
    let (d, alone) = (tmp("pack-stop"), tmp("pack-stop-alone"));
    let ds = d.to_str().unwrap();
    let mut args = cartpole("ppo").to_vec();
    args.extend(["--seeds", "1-3", "--threads", "2", "--run-dir", ds]);
    let child = spawn(&args);
    let child = wait_until(child, "both first seeds logged", || {
        ["seed1", "seed2"].iter().all(|s| {
            std::fs::read_to_string(d.join(s).join("metrics.csv")).map_or(0, |t| t.lines().count())
                > 2
        })
    });
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(130), "{out}{}", stderr(&o));
    assert!(
        out.contains("interrupted by SIGINT") && out.contains("seeds not started: 1"),
        "{out}"
    );
    let summary = read_json(d.join("seeds.json"));
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{summary}");
    for r in runs {
        assert_eq!(r["status"], "interrupted", "{summary}");
    }
    for s in ["seed1", "seed2"] {
        assert!(d.join(s).join("checkpoints/latest").exists(), "{s}");
    }
    assert!(!d.join("seed3").exists());
    args.push("--resume");
    let o = rlrig(&args);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("greedy return over 3 seeds"), "{out}");
    let s = alone.to_str().unwrap();
    let mut a2 = cartpole("ppo").to_vec();
    a2.extend(["--seed", "2", "--run-dir", s]);
    assert!(rlrig(&a2).status.success());
    assert_eq!(final_weights(&alone), final_weights(&d.join("seed2")));
    assert_eq!(
        learning_columns(&alone, 12),
        learning_columns(&d.join("seed2"), 12)
    );
}

/// A run that `--seeds` started may get one stop twice (from a scheduler that signals
/// every process of the job, and from its launcher): it still finishes at a
/// checkpoint, where a run of its own would exit at once (`a_second_sigint_exits_at_once`).
#[test]
fn a_packed_run_checkpoints_even_when_signalled_twice() {
    let d = tmp("packed-twice");
    let ds = d.to_str().unwrap();
    let child = spawn_with_env(
        &argv![
            "train ppo --env CartPole-v1 --num-envs 64 --total-steps 100000000 --set num_steps=64",
            "--set hidden=[1024,1024] --run-dir",
            ds,
            "--quiet",
        ],
        &[("RLRIG_PACKED_RUN", "1")],
    );
    let child = wait_for_lines(child, &d.join("metrics.csv"), 0);
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(50));
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(130), "{out}{}", stderr(&o));
    assert!(out.contains("interrupted by SIGINT"), "{out}");
    assert!(d.join("checkpoints/latest").exists());
}

/// `bench learn` stopped in its first cell: the cell's seeds checkpoint, the command
/// exits 130 with the results so far, and `--resume` finishes both cells, the stopped
/// one from its checkpoints.
#[test]
fn sigint_stops_bench_learn_at_a_checkpoint_and_resume_finishes_it() {
    let d = tmp("learn-stop");
    let ds = d.to_str().unwrap();
    let mut args = argv![
        "bench learn --env CartPole-v1 --algo ppo,a2c --seeds 1-2 --total-steps 300000",
        "--eval-episodes 2 --threads 2 --dir",
        ds,
    ];
    let child = spawn(&args);
    let child = wait_until(child, "the first cell's seeds logged", || {
        ["seed1", "seed2"].iter().all(|s| {
            std::fs::read_to_string(d.join("CartPole-v1-ppo").join(s).join("metrics.csv"))
                .map_or(0, |t| t.lines().count())
                > 2
        })
    });
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(130), "{out}{}", stderr(&o));
    assert!(out.contains("--resume"), "{out}");
    for s in ["seed1", "seed2"] {
        assert!(
            d.join("CartPole-v1-ppo")
                .join(s)
                .join("checkpoints/latest")
                .exists(),
            "{s}"
        );
    }
    assert!(!d.join("CartPole-v1-a2c").exists());
    let v = read_json(d.join("learn.json"));
    assert_eq!(v["cells"].as_array().map(Vec::len), Some(0));
    args.push("--resume");
    let o = rlrig(&args);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let v = read_json(d.join("learn.json"));
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{v}");
    for c in cells {
        // Whole iterations: the budget rounded down to the batch, the same for each seed.
        let seeds = c["seeds"].as_array().unwrap();
        for s in seeds {
            assert_eq!(s["status"], "done", "{c}");
            assert_eq!(s["env_steps"], seeds[0]["env_steps"], "{c}");
            let steps = s["env_steps"].as_f64().unwrap();
            assert!(steps > 290_000.0 && steps <= 300_000.0, "{c}");
        }
    }
}
