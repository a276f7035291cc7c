//! Helpers shared by the binary's integration tests.

// Each test file uses a different subset.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

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

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
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

/// A fresh, empty temporary directory for this test process.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rlrig-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
