//! `rlrig compare` and `rlrig plot`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use rlrig_lab::LabError;

#[derive(Args)]
pub struct CompareArgs {
    /// Result files of `rlrig bench suite --out` or of `rlrig bench learn` (all of one
    /// kind), the first is the reference.
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// Also draw the ratios as a bar chart (PNG).
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
}

/// A file's name for the table: its stem.
fn label(p: &std::path::Path) -> String {
    p.file_stem().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Whether `path` is a `bench learn` result (its `suite` field), read once here so
/// that a mix of kinds is one clear error.
fn is_learn(path: &std::path::Path) -> Result<bool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a bench result (not JSON)", path.display()))?;
    Ok(v["suite"] == rlrig_lab::learn::LEARN_SUITE)
}

pub fn compare(a: CompareArgs) -> Result<()> {
    let kinds = a
        .files
        .iter()
        .map(|p| is_learn(p))
        .collect::<Result<Vec<_>>>()?;
    if kinds.iter().any(|&k| k != kinds[0]) {
        let learn: Vec<String> = a
            .files
            .iter()
            .zip(&kinds)
            .filter(|(_, k)| **k)
            .map(|(p, _)| p.display().to_string())
            .collect();
        bail!(
            "compare like with like: `bench learn` results ({}) beside `bench suite` results",
            learn.join(", ")
        );
    }
    if kinds[0] {
        use rlrig_lab::learn::{compare_plot, compare_table, load};
        compare_files(&a, load, compare_table, compare_plot)
    } else {
        use rlrig_lab::suite::{compare_plot, compare_table, load};
        compare_files(&a, load, compare_table, compare_plot)
    }
}

type Named<T> = [(String, T)];

/// Loads every file of one kind, prints its table and draws its chart.
fn compare_files<T>(
    a: &CompareArgs,
    load: fn(&std::path::Path) -> std::result::Result<T, LabError>,
    table: fn(&Named<T>) -> String,
    plot: fn(&std::path::Path, &Named<T>) -> std::result::Result<(), LabError>,
) -> Result<()> {
    let results = a
        .files
        .iter()
        .map(|p| Ok((label(p), load(p)?)))
        .collect::<Result<Vec<_>>>()?;
    outln!("{}", table(&results).trim_end());
    if let Some(p) = &a.plot {
        plot(p, &results)?;
        outln!("chart: {}", p.display());
    }
    Ok(())
}

#[derive(Args)]
pub struct PlotArgs {
    /// Run directories (repeatable); each one's metrics.csv is drawn.
    #[arg(long = "run", required = true)]
    runs: Vec<PathBuf>,
    /// Output PNG.
    #[arg(long)]
    out: PathBuf,
}

type Curve = (String, Vec<(f64, f64)>);

/// Episode return against steps and against cumulative wall time, from metrics.csv.
fn curves(dir: &std::path::Path) -> Result<(Curve, Curve)> {
    let m = rlrig_learn::run::Metrics::read(dir)?;
    let col = |name: &str| {
        m.column(name)
            .with_context(|| format!("{}/metrics.csv: no column '{name}'", dir.display()))
    };
    let (cs, cr) = (col("global_step")?, col("episode_return")?);
    let times = ["time_env", "time_inference", "time_learner", "time_other"].map(col);
    let times: Vec<usize> = times.into_iter().collect::<Result<_>>()?;
    let (mut by_steps, mut by_time, mut wall) = (Vec::new(), Vec::new(), 0.0);
    for row in &m.rows {
        wall += times.iter().map(|&i| row[i]).sum::<f64>();
        if row[cr].is_finite() {
            by_steps.push((row[cs], row[cr]));
            by_time.push((wall, row[cr]));
        }
    }
    let name = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    Ok(((name.clone(), by_steps), (name, by_time)))
}

pub fn plot(a: PlotArgs) -> Result<()> {
    let (mut s, mut t) = (Vec::new(), Vec::new());
    for r in &a.runs {
        let (a1, b1) = curves(r)?;
        s.push(a1);
        t.push(b1);
    }
    if s.iter().all(|(_, p)| p.is_empty()) {
        bail!("no finished episodes in the given runs' metrics.csv");
    }
    rlrig_lab::plot::learning_curves(&a.out, &s, &t)?;
    outln!("chart: {}", a.out.display());
    Ok(())
}
