//! `rlrig train ALGO --seeds LIST` on the CPU: many seeds of one config packed onto the
//! machine's cores. Each seed is this binary run again as its own process (`--seed S
//! --run-dir BASE/seedS`), `jobs` at a time, each with `threads / jobs` worker threads.
//! Results do not depend on the thread count, so every seed's run is bit-identical to
//! that seed trained alone; the processes share nothing but the cores.
//!
//! Stopping: the runs are in their own process group, so a terminal's Ctrl-C reaches
//! only this launcher, which passes the first SIGINT/SIGTERM on to every running seed
//! (each writes its checkpoint and stops) and starts no more. A second signal ends the
//! launcher at once; the runs it passed the first one to still stop at a checkpoint.
//! The runs are started with [`PACKED_RUN`] set, so a run that gets a signal twice (from
//! a scheduler that signals every process of the job, and from this launcher) still
//! checkpoints instead of exiting at once. A launcher that ends on an error stops its
//! running seeds the same way and waits for them.

use anyhow::{Context, Result, bail};
use rlrig_learn::stop::{Stop, StopFlag};
use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the environment of each packed run: its second stop signal is not an
/// immediate exit (see the module's doc).
pub const PACKED_RUN: &str = "RLRIG_PACKED_RUN";

/// What `--seeds` on the CPU runs.
pub struct Pack {
    /// `rlrig train <label>`.
    pub label: &'static str,
    pub env: String,
    pub seeds: Vec<u64>,
    /// Each seed's command line after the program's name, less the per-seed flags
    /// ([`child_args`]).
    pub args: Vec<OsString>,
    /// Worker threads in all (`--threads`).
    pub threads: usize,
    /// Runs at a time (`--jobs`; default: one per thread, up to the seed count).
    pub jobs: Option<usize>,
    /// Where the runs go (`--run-dir`; default `runs/<env>-<label>-seeds<first>-<last>`).
    pub run_dir: Option<PathBuf>,
    /// `--resume`: seeds with a checkpoint continue from it, the others start.
    pub resume: bool,
    pub quiet: bool,
    /// `--sweep`: every seed runs once per variant, in `BASE/<variant>/seed<N>`; empty,
    /// once with the config as given, in `BASE/seed<N>`.
    pub variants: Vec<Variant>,
}

/// One point of a `--sweep`: the `--set KEY=VALUE`s it adds and its directory's name.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub name: String,
    pub sets: Vec<String>,
}

/// Splits `--sweep KEY=V1,V2,...` at the commas outside brackets and quotes (so
/// `hidden=[64,64],[256,256]` is two values); an error names a malformed one.
fn sweep_values(spec: &str) -> Result<(String, Vec<String>), String> {
    let (key, values) = spec
        .split_once('=')
        .filter(|(k, v)| !k.trim().is_empty() && !v.trim().is_empty())
        .ok_or_else(|| format!("--sweep {spec}: expected KEY=VALUE1,VALUE2,..."))?;
    let (mut out, mut cur, mut depth, mut quote) = (Vec::new(), String::new(), 0i32, None);
    for ch in values.chars() {
        match (ch, quote) {
            ('"' | '\'', None) => quote = Some(ch),
            (c, Some(q)) if c == q => quote = None,
            ('[' | '{', None) => depth += 1,
            (']' | '}', None) => depth -= 1,
            (',', None) if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out.push(cur.trim().to_string());
    if depth != 0 || quote.is_some() {
        return Err(format!("--sweep {spec}: unbalanced brackets or quotes"));
    }
    if out.iter().any(String::is_empty) {
        return Err(format!("--sweep {spec}: an empty value"));
    }
    let mut seen = out.clone();
    seen.sort();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("--sweep {spec}: a value is listed twice"));
    }
    Ok((key.trim().to_string(), out))
}

/// The variants of `--sweep` flags: every combination of their values (the first
/// flag varies slowest), each named `KEY=VALUE[,KEY=VALUE]` with characters a
/// directory name should not hold replaced by `_`.
pub fn sweep(specs: &[String]) -> Result<Vec<Variant>, String> {
    let mut variants = vec![Variant {
        name: String::new(),
        sets: Vec::new(),
    }];
    let mut keys = Vec::new();
    for spec in specs {
        let (key, values) = sweep_values(spec)?;
        if keys.contains(&key) {
            return Err(format!("--sweep {key}: the key is swept twice"));
        }
        keys.push(key.clone());
        variants = variants
            .into_iter()
            .flat_map(|v| {
                let key = &key;
                values.iter().map(move |val| {
                    let set = format!("{key}={val}");
                    let mut sets = v.sets.clone();
                    sets.push(set.clone());
                    let safe: String = set
                        .chars()
                        .map(|c| {
                            if c.is_ascii_alphanumeric() || "=.-+_".contains(c) {
                                c
                            } else {
                                '_'
                            }
                        })
                        .collect();
                    Variant {
                        name: if v.name.is_empty() {
                            safe
                        } else {
                            format!("{},{safe}", v.name)
                        },
                        sets,
                    }
                })
            })
            .collect();
    }
    let mut names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "--sweep: two values share the directory name {} (characters other than letters, digits and =.-+_ become _)",
            w[0]
        ));
    }
    Ok(if keys.is_empty() {
        Vec::new()
    } else {
        variants
    })
}

/// How one seed's run ended.
#[derive(serde::Serialize)]
struct SeedResult {
    seed: u64,
    /// The `--sweep` variant's name and its `--set`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    variant: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sets: Vec<String>,
    run_dir: PathBuf,
    log: PathBuf,
    /// "done", "interrupted" (stopped by a signal after its checkpoint) or "failed".
    status: &'static str,
    exit_code: Option<i32>,
    wall_seconds: f64,
    /// The run's `eval.json` (its final greedy evaluation), when it wrote one.
    eval: Option<serde_json::Value>,
}

#[derive(serde::Serialize)]
struct Summary<'a> {
    algo: &'a str,
    env: &'a str,
    jobs: usize,
    threads_per_run: usize,
    wall_seconds: f64,
    runs: &'a [SeedResult],
}

struct Running {
    seed: u64,
    variant: Option<usize>,
    child: Child,
    started: Instant,
}

/// The runs going now. Dropped with runs left (the launcher ends on an error), it stops
/// them at a checkpoint (SIGTERM) and waits, so no run outlives its launcher unseen.
#[derive(Default)]
struct Runs(Vec<Running>);

impl Drop for Runs {
    fn drop(&mut self) {
        for r in &self.0 {
            signal(&r.child, Stop::Terminate.signal());
        }
        for r in &mut self.0 {
            let _ = r.child.wait();
        }
    }
}

/// The launcher's own arguments minus the ones it sets per seed (`--seeds`, `--seed`,
/// `--run-dir`, `--threads`, `--jobs`, `--sweep`, `--quiet`, `--resume`), in both
/// `--flag value` and `--flag=value` forms.
pub fn child_args(args: &[OsString]) -> Vec<OsString> {
    const WITH_VALUE: [&str; 6] = [
        "--seeds",
        "--seed",
        "--run-dir",
        "--threads",
        "--jobs",
        "--sweep",
    ];
    let mut out = Vec::new();
    let mut skip_next = false;
    for a in args {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let s = a.to_string_lossy();
        if WITH_VALUE.contains(&s.as_ref()) {
            skip_next = true;
        } else if s == "--quiet"
            || s == "--resume"
            || WITH_VALUE.iter().any(|f| s.starts_with(&format!("{f}=")))
        {
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// Sends `sig` to a run's process.
fn signal(child: &Child, sig: usize) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) takes two integers and touches no memory of ours; `pid` is a
    // child we have not reaped yet (try_wait has not returned it), so the id still
    // names that process and no other. An error (already exited) is harmless.
    unsafe {
        libc::kill(pid, sig as libc::c_int);
    }
}

/// Runs every seed (of every variant) and prints one line per finished run and a
/// summary; writes `seeds.json` in the base directory. `Some` when a signal stopped the
/// runs.
pub fn train_seeds(p: Pack, stop: StopFlag) -> Result<Option<Stop>> {
    let variants: Vec<Option<usize>> = if p.variants.is_empty() {
        vec![None]
    } else {
        (0..p.variants.len()).map(Some).collect()
    };
    let units: Vec<(Option<usize>, u64)> = variants
        .iter()
        .flat_map(|&v| p.seeds.iter().map(move |&s| (v, s)))
        .collect();
    let n = units.len();
    let jobs = p.jobs.unwrap_or(p.threads).clamp(1, n);
    let threads_per_run = (p.threads / jobs).max(1);
    let k = p.seeds.len();
    let base = p.run_dir.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "runs/{}-{}-{}seeds{}-{}",
            p.env.replace('/', "-"),
            p.label,
            if p.variants.is_empty() { "" } else { "sweep-" },
            p.seeds[0],
            p.seeds[k - 1]
        ))
    });
    // A run's directory and log: BASE/[variant/]seed<N>[.log].
    let place = |v: Option<usize>, seed: u64| {
        let d = v.map_or(base.clone(), |v| base.join(&p.variants[v].name));
        (
            d.join(format!("seed{seed}")),
            d.join(format!("seed{seed}.log")),
        )
    };
    for &v in &variants {
        let d = v.map_or(base.clone(), |v| base.join(&p.variants[v].name));
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    let exe = std::env::current_exe().context("finding the rlrig binary to run each seed")?;
    outln!(
        "{}{k} seeds of {} {}: {jobs} at a time, {threads_per_run} thread{} each, in {}",
        if p.variants.is_empty() {
            String::new()
        } else {
            format!("{} variants x ", p.variants.len())
        },
        p.env,
        p.label,
        if threads_per_run == 1 { "" } else { "s" },
        base.display()
    );
    let bar = crate::train::progress_bar(p.quiet, n as u64);
    let start = Instant::now();
    let mut pending = units.iter().copied();
    let mut running = Runs::default();
    let mut results: Vec<SeedResult> = Vec::new();
    let mut forwarded = None;
    loop {
        if forwarded.is_none()
            && let Some(why) = stop.requested()
        {
            for r in &running.0 {
                signal(&r.child, why.signal());
            }
            forwarded = Some(why);
        }
        while forwarded.is_none() && running.0.len() < jobs {
            let Some((variant, seed)) = pending.next() else {
                break;
            };
            let (dir, log) = place(variant, seed);
            // Resumed: the log goes on after the first leg's (a failed seed's error stays).
            let out = std::fs::OpenOptions::new()
                .create(true)
                .append(p.resume)
                .write(true)
                .truncate(!p.resume)
                .open(&log)
                .with_context(|| format!("creating {}", log.display()))?;
            let err = out.try_clone()?;
            let resume =
                p.resume && rlrig_learn::run::RunDir::open(&dir).is_ok_and(|d| d.has_checkpoint());
            let sets = variant.map_or(&[][..], |v| &p.variants[v].sets[..]);
            let child = Command::new(&exe)
                .args(&p.args)
                .args(sets.iter().flat_map(|s| ["--set", s.as_str()]))
                .args(resume.then_some("--resume"))
                .arg("--seed")
                .arg(seed.to_string())
                .arg("--run-dir")
                .arg(&dir)
                .arg("--threads")
                .arg(threads_per_run.to_string())
                .arg("--quiet")
                .env(PACKED_RUN, "1")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .process_group(0)
                .spawn()
                .with_context(|| format!("starting seed {seed}: {}", exe.display()))?;
            running.0.push(Running {
                seed,
                variant,
                child,
                started: Instant::now(),
            });
        }
        if running.0.is_empty() {
            break;
        }
        let mut i = 0;
        while i < running.0.len() {
            match running.0[i].child.try_wait()? {
                None => i += 1,
                Some(status) => {
                    let r = running.0.swap_remove(i);
                    let (dir, log) = place(r.variant, r.seed);
                    let mut res =
                        finished(dir, log, r.seed, status, r.started.elapsed(), forwarded);
                    if let Some(v) = r.variant {
                        res.variant = Some(p.variants[v].name.clone());
                        res.sets.clone_from(&p.variants[v].sets);
                    }
                    bar.inc(1);
                    // A closed stdout must not end the launcher with runs going.
                    let _ = bar.suspend(|| print_result(&res));
                    results.push(res);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    // In launch order: variant by variant, seeds ascending.
    results.sort_by_key(|r| {
        units
            .iter()
            .position(|&(v, s)| s == r.seed && v.map(|v| &p.variants[v].name) == r.variant.as_ref())
    });
    let summary = Summary {
        algo: p.label,
        env: &p.env,
        jobs,
        threads_per_run,
        wall_seconds: wall,
        runs: &results,
    };
    let json = serde_json::to_vec_pretty(&summary)?;
    rlrig_learn::run::write_atomic(&base.join("seeds.json"), &json)?;
    report(&results, wall, &base)?;
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.status == "failed")
        .map(|r| format!("seed {} ({})", r.seed, r.log.display()))
        .collect();
    if !failed.is_empty() {
        bail!("{} of {n} runs failed: {}", failed.len(), failed.join(", "));
    }
    let stopped: Vec<String> = results
        .iter()
        .filter(|r| r.status == "interrupted")
        .map(|r| {
            r.variant
                .as_ref()
                .map_or(r.seed.to_string(), |v| format!("{} ({v})", r.seed))
        })
        .collect();
    if forwarded.is_none() && !stopped.is_empty() {
        // Someone stopped single runs, not this launcher: they still need resuming.
        outln!(
            "seeds {} were stopped by a signal at a checkpoint; continue with the same command and --resume",
            stopped.join(", ")
        );
        return Ok(Some(Stop::Terminate));
    }
    if let Some(why) = forwarded {
        let skipped = n - results.len();
        outln!(
            "interrupted by {}: the running seeds wrote their checkpoints{}; continue with the same command and --resume",
            why.signal_name(),
            if skipped > 0 {
                format!(" (seeds not started: {skipped})")
            } else {
                String::new()
            }
        );
    }
    Ok(forwarded)
}

/// How a run ended: `interrupted` when it stopped at a checkpoint on a signal (exit
/// 130/143), or was ended by the signal the launcher passed on before it could catch it
/// (a run just started).
fn finished(
    run_dir: PathBuf,
    log: PathBuf,
    seed: u64,
    status: std::process::ExitStatus,
    took: Duration,
    forwarded: Option<Stop>,
) -> SeedResult {
    use std::os::unix::process::ExitStatusExt as _;
    let code = status.code();
    let killed_by_ours = forwarded.is_some_and(|f| status.signal() == Some(f.signal() as i32));
    let state = match code {
        Some(0) => "done",
        Some(c) if Stop::from_signal((c - 128).max(0) as usize).is_some() => "interrupted",
        None if killed_by_ours => "interrupted",
        _ => "failed",
    };
    let eval = std::fs::read(run_dir.join("eval.json"))
        .ok()
        .filter(|_| state == "done")
        .and_then(|b| serde_json::from_slice(&b).ok());
    SeedResult {
        seed,
        variant: None,
        sets: Vec::new(),
        log,
        run_dir,
        status: state,
        exit_code: code,
        wall_seconds: took.as_secs_f64(),
        eval,
    }
}

fn mean_return(r: &SeedResult) -> Option<f64> {
    r.eval.as_ref()?.get("mean_return")?.as_f64()
}

fn print_result(r: &SeedResult) -> Result<()> {
    let what = match (r.status, mean_return(r)) {
        ("done", Some(m)) => format!("greedy return {m:.1}"),
        ("done", None) => "done (no evaluation)".to_string(),
        (s, _) => format!("{s} (see {})", r.log.display()),
    };
    let variant = r
        .variant
        .as_ref()
        .map_or(String::new(), |v| format!("{v} "));
    outln!(
        "{variant}seed {}: {what} in {:.1} s",
        r.seed,
        r.wall_seconds
    );
    Ok(())
}

/// The summary: wall time and the spread of the greedy returns over seeds (per
/// variant of a sweep, best mean first).
fn report(results: &[SeedResult], wall: f64, base: &Path) -> Result<()> {
    let serial: f64 = results.iter().map(|r| r.wall_seconds).sum();
    outln!(
        "{} runs in {wall:.1} s (their own times add up to {serial:.1} s)",
        results.len()
    );
    let mut groups: Vec<(Option<&String>, Vec<f64>)> = Vec::new();
    for r in results {
        let v = r.variant.as_ref();
        let i = match groups.iter().position(|g| g.0 == v) {
            Some(i) => i,
            None => {
                groups.push((v, Vec::new()));
                groups.len() - 1
            }
        };
        groups[i].1.extend(mean_return(r));
    }
    let spread = |returns: &[f64]| {
        let k = returns.len() as f64;
        let mean = returns.iter().sum::<f64>() / k;
        let sd = if returns.len() > 1 {
            (returns.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt()
        } else {
            0.0
        };
        let min = returns.iter().copied().fold(f64::INFINITY, f64::min);
        let max = returns.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (
            mean,
            format!(
                "greedy return over {} seeds: mean {mean:.1} ± {sd:.1} (sample std), min {min:.1}, max {max:.1}",
                returns.len()
            ),
        )
    };
    let mut lines: Vec<(f64, String)> = groups
        .iter()
        .filter(|g| !g.1.is_empty())
        .map(|(v, returns)| {
            let (mean, line) = spread(returns);
            (mean, v.map_or(line.clone(), |v| format!("{v}: {line}")))
        })
        .collect();
    if groups.len() > 1 {
        lines.sort_by(|a, b| b.0.total_cmp(&a.0));
    }
    for (_, line) in lines {
        outln!("{line}");
    }
    outln!("summary: {}", base.join("seeds.json").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_per_seed_flags_are_taken_out_in_both_forms() {
        let a = os(&[
            "train",
            "ppo",
            "--seeds",
            "1-8",
            "--env",
            "CartPole-v1",
            "--threads=2",
            "--run-dir",
            "x",
            "--quiet",
            "--seed=3",
            "--set",
            "gamma=0.9",
            "--jobs",
            "2",
            "--resume",
            "--sweep",
            "gamma=0.9,0.99",
        ]);
        assert_eq!(
            child_args(&a),
            os(&["train", "ppo", "--env", "CartPole-v1", "--set", "gamma=0.9"])
        );
    }

    #[test]
    fn a_sweep_is_every_combination_of_its_values() {
        let v = sweep(&[
            "learning_rate=1e-4,3e-4".into(),
            "hidden=[64,64], [256]".into(),
        ])
        .unwrap();
        let names: Vec<&str> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "learning_rate=1e-4,hidden=_64_64_",
                "learning_rate=1e-4,hidden=_256_",
                "learning_rate=3e-4,hidden=_64_64_",
                "learning_rate=3e-4,hidden=_256_",
            ]
        );
        assert_eq!(v[1].sets, ["learning_rate=1e-4", "hidden=[256]"]);
        assert_eq!(sweep(&[]).unwrap(), []);
        for (bad, why) in [
            ("gamma", "KEY=VALUE1"),
            ("gamma=", "KEY=VALUE1"),
            ("gamma=0.9,,0.99", "empty value"),
            ("hidden=[64,64", "unbalanced"),
            ("gamma=0.9,0.9", "twice"),
        ] {
            let e = sweep(&[bad.into()]).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = sweep(&["gamma=0.9".into(), "gamma=0.99".into()]).unwrap_err();
        assert!(e.contains("swept twice"), "{e}");
        let e = sweep(&["hidden=[64],(64)".into()]).unwrap_err();
        assert!(e.contains("hidden=_64_"), "{e}");
    }

    #[test]
    fn a_value_that_looks_like_a_flag_name_is_kept() {
        // `--set run-dir=...` is a value, not the flag.
        let a = os(&["train", "ppo", "--set", "--run-dir-like=1"]);
        assert_eq!(child_args(&a), a);
    }
}
