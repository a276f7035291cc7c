//! Helpers shared by the binary's integration tests.

// Each test file uses a different subset.
#![allow(dead_code, unused_macros)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A command line as a `Vec<&str>`: each string literal is split into words, every
/// other expression (a path, a formatted value) is one argument as it is, so a value
/// with spaces goes in as a variable. `argv!["train ppo --run-dir", dir, "--quiet"]`.
/// It expands to one expression, so `&format!(..)` arguments live to the statement's end.
macro_rules! argv {
    (@acc [$($done:expr),*];) => { [$($done),*].concat() };
    (@acc [$($done:expr),*]; $l:literal $(, $($rest:tt)*)?) => {
        argv!(@acc [$($done,)* crate::common::words($l)]; $($($rest)*)?)
    };
    (@acc [$($done:expr),*]; $e:expr $(, $($rest:tt)*)?) => {
        argv!(@acc [$($done,)* crate::common::one($e)]; $($($rest)*)?)
    };
    ($($t:tt)*) => { argv!(@acc []; $($t)*) };
}

/// [`argv!`]'s literal: its words.
pub fn words(line: &'static str) -> Vec<&'static str> {
    line.split_whitespace().collect()
}

/// [`argv!`]'s expression: one argument.
pub fn one(arg: &str) -> Vec<&str> {
    vec![arg]
}

/// Runs the `rlrig` binary with `stdin` as its standard input.
pub fn rlrig_in(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rlrig"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    // The binary may exit (on a bad argument) before reading its input: a broken pipe
    // here is expected, and the exit status is what the tests check.
    let _ = pipe.write_all(stdin.unwrap_or("").as_bytes());
    drop(pipe);
    child.wait_with_output().unwrap()
}

/// Runs the `rlrig` binary with empty standard input.
pub fn rlrig(args: &[&str]) -> Output {
    rlrig_in(args, None)
}

/// Runs the `rlrig` binary and asserts that it succeeded, showing the arguments and its
/// standard error when it did not.
pub fn ok(args: &[&str]) -> Output {
    let o = rlrig(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard output as JSON lines (`--json` streams), one value a line; panics on
/// output that is not UTF-8 or a line that is not JSON.
pub fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    std::str::from_utf8(&o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that `text` contains each of `needles`, naming the one it lacks.
pub fn assert_contains(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "'{n}' not in:\n{text}");
    }
}

/// Fails with a clear one-line error: exit code 1, message on stderr, no panic.
pub fn fails_with(args: &[&str], stdin: Option<&str>, needles: &[&str]) {
    let o = rlrig_in(args, stdin);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{args:?}: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: expected '{n}' in: {err}");
    }
}

/// [`fails_with`] for each of `cases`: a command line (its words, as [`argv!`] splits a
/// literal) and what its error must contain.
pub fn each_fails_with(cases: &[(&'static str, &[&str])]) {
    for (line, needles) in cases {
        fails_with(&words(line), None, needles);
    }
}

/// [`each_fails_with`], each command line followed by `--run-dir dir`.
pub fn each_fails_in(dir: &str, cases: &[(&'static str, &[&str])]) {
    for (line, needles) in cases {
        fails_with(
            &[words(line), vec!["--run-dir", dir]].concat(),
            None,
            needles,
        );
    }
}

/// `rlrig play --run RUN --gif GIF` with `extra` flags: succeeds and writes a GIF.
/// Returns its standard output (one line per episode, then the GIF's path).
pub fn play_gif(run: &Path, gif: &Path, extra: &[&str]) -> String {
    let mut args = vec!["play", "--run", run.to_str().unwrap()];
    args.extend(["--gif", gif.to_str().unwrap()]);
    args.extend(extra);
    let o = rlrig(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    assert!(
        std::fs::read(gif).unwrap().starts_with(b"GIF89a"),
        "{args:?}: not a GIF"
    );
    stdout(&o)
}

/// A fresh, empty temporary directory for this test process, removed when the test is
/// done with it; a failing test leaves it behind to be looked at.
#[derive(Debug)]
pub struct Tmp(PathBuf);

impl std::ops::Deref for Tmp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Tmp {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn tmp(name: &str) -> Tmp {
    let d = std::env::temp_dir().join(format!("rlrig-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

/// A JSON file, parsed.
pub fn read_json(path: impl AsRef<Path>) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The first `n` columns of a run's metrics.csv (the deterministic ones).
pub fn learning_columns(dir: &Path, n: usize) -> Vec<String> {
    std::fs::read_to_string(dir.join("metrics.csv"))
        .unwrap()
        .lines()
        .map(|l| l.split(',').take(n).collect::<Vec<_>>().join(","))
        .collect()
}

/// `rlrig eval --run RUN --episodes N --json`: its report, which must count `n` episodes.
pub fn eval_episodes(run: &Path, n: usize) -> serde_json::Value {
    let episodes = n.to_string();
    let o = ok(&[
        "eval",
        "--run",
        run.to_str().unwrap(),
        "--episodes",
        &episodes,
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["episodes"], n, "{v}");
    v
}

/// The bytes of the newest checkpoint's weights file.
pub fn final_weights(dir: &Path) -> Vec<u8> {
    std::fs::read(latest_weights(dir)).unwrap()
}

/// The weights file of a run's newest checkpoint.
pub fn latest_weights(dir: &Path) -> PathBuf {
    let ck = dir.join("checkpoints");
    let latest = std::fs::read_to_string(ck.join("latest")).unwrap();
    ck.join(latest.trim().replace(".json", ".safetensors"))
}

/// Flips bits of one byte near the end of the newest checkpoint's weights, where its
/// checksum catches it; returns the file.
pub fn damage_latest_weights(dir: &Path, mask: u8) -> PathBuf {
    let w = latest_weights(dir);
    let mut bytes = std::fs::read(&w).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= mask;
    std::fs::write(&w, bytes).unwrap();
    w
}

/// Starts `rlrig args` and SIGKILLs it as soon as `run_dir` holds a checkpoint (or
/// when it exits first); asserts that a checkpoint exists afterwards.
pub fn kill_after_first_checkpoint(args: &[&str], run_dir: &Path) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rlrig"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let latest = run_dir.join("checkpoints/latest");
    while !latest.exists() && start.elapsed() < Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(latest.exists(), "no checkpoint was written before the kill");
}

/// The kill-and-resume check: `run` (a run writing into `dir`) is SIGKILLed after its
/// first checkpoint, then `resume` is run with `--resume`; it must say where it resumed
/// ("resumed from step N", or iteration N) and end as the uninterrupted run in `full`
/// did: the same final weights and the same first `cols` columns of metrics.csv.
/// Returns the resumed run's output.
pub fn resumes_like(full: &Path, dir: &Path, cols: usize, run: &[&str], resume: &[&str]) -> Output {
    kill_after_first_checkpoint(run, dir);
    let o = ok(&[resume, &["--resume"]].concat());
    let out = stdout(&o);
    assert!(out.contains("resumed from "), "{resume:?}: {out}");
    // assert! rather than assert_eq!: a failure should not print megabytes of weights.
    assert!(
        final_weights(full) == final_weights(dir),
        "{resume:?}: the resumed run ended with other weights"
    );
    assert_eq!(
        learning_columns(full, cols),
        learning_columns(dir, cols),
        "{resume:?}: metrics.csv of the resumed run differs"
    );
    o
}

/// Starts `rlrig args` with its output piped.
pub fn spawn(args: &[&str]) -> Child {
    spawn_with_env(args, &[])
}

/// [`spawn`] with extra environment variables.
pub fn spawn_with_env(args: &[&str], vars: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rlrig"))
        .args(args)
        .envs(vars.iter().copied())
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Sends signal `sig` (`INT`, `TERM`) to `child`.
pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args(["-s", sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -s {sig} failed");
}

/// Waits until `ready()`. The run must still be going: one that ends first fails the
/// test with its output.
pub fn wait_until(mut child: Child, what: &str, ready: impl Fn() -> bool) -> Child {
    let start = Instant::now();
    while !ready() {
        if child.try_wait().unwrap().is_some() {
            let o = child.wait_with_output().unwrap();
            panic!(
                "the run ended before {what} ({:?}): {}{}",
                o.status,
                stdout(&o),
                stderr(&o)
            );
        }
        assert!(start.elapsed() < Duration::from_secs(300), "never {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
    child
}

/// Waits until `file` has more than `lines` lines.
pub fn wait_for_lines(child: Child, file: &Path, lines: usize) -> Child {
    let what = format!("{} grew past {lines} lines", file.display());
    wait_until(child, &what, || {
        std::fs::read_to_string(file).map_or(0, |t| t.lines().count()) > lines
    })
}

/// `open`'s adapter (a wgpu device, however the caller opens it), or None with a note
/// when this machine has none; CI (RLRIG_REQUIRE_WGPU=1) insists on one.
pub fn wgpu_adapter<T, E: std::fmt::Display>(open: Result<T, E>) -> Option<T> {
    match open {
        Ok(a) => Some(a),
        Err(e) if std::env::var("RLRIG_REQUIRE_WGPU").as_deref() == Ok("1") => {
            panic!("RLRIG_REQUIRE_WGPU=1 but {e}")
        }
        Err(e) => {
            eprintln!("skipping wgpu: {e}");
            None
        }
    }
}

/// `mpirun ARGS` (as root where CI runs, more ranks than cores allowed), no stdin.
pub fn mpirun(args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("mpirun runs (scripts/test.sh installs Open MPI)")
}

/// Starts `mpirun -n 2 rlrig ARGS`, waits until `metrics` (the run's metrics.csv) has
/// `lines` lines, SIGTERMs one rank and returns what the job printed once it ends.
/// mpirun passes Ctrl-C on to every rank as SIGTERM, but only once its launch is
/// complete (a signal in the first second may wait for the job's end); a signal to one
/// rank reaches the others through the stop the ranks agree on.
pub fn stop_one_of_two_mpi_ranks(args: &[&str], metrics: &Path, lines: usize) -> Output {
    let child = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
        .arg(env!("CARGO_BIN_EXE_rlrig"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun runs (scripts/test.sh installs Open MPI)");
    let child = wait_for_lines(child, metrics, lines);
    let ranks = Command::new("pgrep")
        .args(["-P", &child.id().to_string()])
        .output()
        .unwrap();
    let ranks = stdout(&ranks);
    let rank = ranks
        .split_whitespace()
        .last()
        .expect("the ranks are mpirun's children");
    let sent = Command::new("kill")
        .args(["-s", "TERM", rank])
        .status()
        .unwrap();
    assert!(sent.success());
    child.wait_with_output().unwrap()
}
