//! `rlrig envs` and `rlrig replay`.

use std::io::{BufWriter, Read, Write};

use anyhow::{Context, Result, bail};
use clap::Args;
use rlrig_env::{ENV_IDS, Space, spec};
use serde::Serialize;

#[derive(Args)]
pub struct EnvsArgs {
    /// Print one JSON object per env instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn space_json(s: &Space) -> serde_json::Value {
    s.fold(
        |n| serde_json::json!({"type": "Discrete", "n": n}),
        |low, high, shape, dtype| {
            let num = |v: &f32| {
                if v.is_finite() {
                    serde_json::json!(v)
                } else if *v > 0.0 {
                    serde_json::json!("inf")
                } else {
                    serde_json::json!("-inf")
                }
            };
            serde_json::json!({
                "type": "Box",
                "low": low.iter().map(num).collect::<Vec<_>>(),
                "high": high.iter().map(num).collect::<Vec<_>>(),
                "shape": shape,
                "dtype": dtype.name(),
            })
        },
    )
}

pub fn envs(a: EnvsArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let specs = ENV_IDS
        .iter()
        .map(|id| spec(id))
        .collect::<Result<Vec<_>, _>>()?;
    if a.json {
        for s in &specs {
            let v = serde_json::json!({
                "id": s.id,
                "observation_space": space_json(&s.observation_space),
                "action_space": space_json(&s.action_space),
                "max_episode_steps": s.max_episode_steps,
                "params": s.params,
            });
            writeln!(out, "{v}")?;
        }
        return Ok(());
    }
    let rows: Vec<[String; 5]> = specs
        .iter()
        .map(|s| {
            // The observation space last: Gymnasium's repr of a Box lists every bound
            // (BipedalWalker's runs to 300 characters) and would push every column
            // after it off the screen.
            [
                s.id.to_string(),
                s.action_space.to_string(),
                s.max_episode_steps
                    .map_or_else(|| "-".into(), |m| m.to_string()),
                if s.params.is_empty() {
                    "-".into()
                } else {
                    s.params.join(", ")
                },
                s.observation_space.to_string(),
            ]
        })
        .collect();
    let header = [
        "id",
        "action space",
        "max steps",
        "params (--env-arg)",
        "observation space",
    ]
    .map(String::from);
    let width = |c: usize| {
        rows.iter()
            .chain([&header])
            .map(|r| r[c].len())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
    for r in [&header].into_iter().chain(&rows) {
        writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            r[0], r[1], r[2], r[3], r[4]
        )?;
    }
    Ok(())
}

#[derive(Args)]
pub struct ReplayArgs {
    /// Environment id, e.g. CartPole-v1.
    #[arg(long)]
    env: String,
    /// Initial internal state as a JSON array: Gymnasium's `env.unwrapped.state`
    /// right after `reset` (the time limit counts from step 0).
    #[arg(long, allow_hyphen_values = true)]
    state: String,
    /// File with one action per line (an integer, or a JSON array for Box actions);
    /// `-` reads standard input. Blank lines and lines starting with `#` are skipped.
    #[arg(long)]
    actions: String,
    /// An env parameter, as `gym.make(id, KEY=VALUE)` (repeatable); `rlrig envs`
    /// lists them.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", value_parser = parse_env_arg)]
    env_args: Vec<(String, String)>,
}

/// `KEY=VALUE` split at the first `=`; the key must be non-empty.
pub fn parse_env_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!(
            "expected KEY=VALUE such as 'fast_trig=true', got '{s}'"
        )),
    }
}

#[derive(Serialize)]
struct StepOut<'a> {
    obs: &'a [f32],
    reward: f64,
    terminated: bool,
    truncated: bool,
}

/// Parses the actions text: one action per line.
pub fn parse_actions(text: &str, source: &str) -> Result<Vec<Vec<f64>>> {
    let mut actions = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || {
            format!(
                "{source}, line {}: expected an integer or a JSON array of numbers, got '{line}'",
                n + 1
            )
        };
        let v: serde_json::Value = serde_json::from_str(line).with_context(bad)?;
        let nums = match &v {
            serde_json::Value::Number(x) => vec![x.as_f64().with_context(bad)?],
            serde_json::Value::Array(xs) => xs
                .iter()
                .map(|x| x.as_f64().with_context(bad))
                .collect::<Result<Vec<f64>>>()?,
            _ => bail!(bad()),
        };
        actions.push(nums);
    }
    if actions.is_empty() {
        bail!("{source}: no actions (the input is empty)");
    }
    Ok(actions)
}

pub fn replay(a: ReplayArgs) -> Result<()> {
    // Check the id first so that a typo is reported before any input is read.
    spec(&a.env)?;
    let state: Vec<f64> = serde_json::from_str(&a.state).with_context(|| {
        format!(
            "--state: expected a JSON array of numbers such as '[0.01, 0, -0.02, 0.03]', got '{}'",
            a.state
        )
    })?;
    let (text, source) = if a.actions == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading actions from standard input")?;
        (s, "stdin".to_string())
    } else {
        let s = std::fs::read_to_string(&a.actions)
            .with_context(|| format!("reading actions file '{}'", a.actions))?;
        (s, a.actions.clone())
    };
    let actions = parse_actions(&text, &source)?;
    let steps = rlrig_env::replay::replay_with(&a.env, &a.env_args, &state, &actions)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for s in &steps {
        let line = serde_json::to_string(&StepOut {
            obs: &s.obs,
            reward: s.reward,
            terminated: s.terminated,
            truncated: s.truncated,
        })?;
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse_actions, parse_env_arg};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn env_args_split_at_the_first_equals_sign(key in "[a-z_][a-z0-9_]{0,12}", value in ".*") {
            let (k, v) = parse_env_arg(&format!("{key}={value}")).unwrap();
            prop_assert_eq!(k, key);
            prop_assert_eq!(v, value);
        }

        #[test]
        fn env_args_without_a_key_are_errors(s in "[^=]*|=.*|\\s+=.*") {
            prop_assert!(parse_env_arg(&s).unwrap_err().contains("KEY=VALUE"));
        }

        #[test]
        fn integer_and_array_lines_round_trip(acts in proptest::collection::vec(
            prop_oneof![
                (-1000i64..1000).prop_map(|k| vec![k as f64]),
                proptest::collection::vec(-10.0f64..10.0, 1..4),
            ], 1..30)) {
            let text: String = acts.iter().map(|a| {
                if a.len() == 1 && a[0].fract() == 0.0 { format!("{}\n", a[0] as i64) }
                else { format!("{}\n", serde_json::to_string(a).unwrap()) }
            }).collect();
            prop_assert_eq!(parse_actions(&text, "t").unwrap(), acts);
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse_actions(&text, "t");
        }
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let e = parse_actions("1\n\n{\"a\": 1}\n", "f.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.txt, line 3"), "{e}");
        let e = parse_actions("[1, \"x\"]\n", "f.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_actions("# only a comment\n", "f.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no actions"), "{e}");
    }
}
