//! `rlrig bench learn`: whether the presets solve their envs, and how fast. A matrix of
//! cells (an algorithm's preset on an env, with the score that counts as solved), each
//! trained over several seeds; per cell the final greedy score (mean and 95 % interval
//! over seeds), how many seeds reach the threshold, and the env steps and training time
//! until the training return first reaches it. Results are JSON that `rlrig compare`
//! reads (a peer written in the same format compares the same way) and a PNG of the
//! learning curves (mean over seeds with a min-max band).

use std::path::Path;

use rlrig_learn::run::Metrics;

use crate::LabError;
use crate::compare::{legend, letter, ratio, ratio_bars, ratio_cell};
use serde::{Deserialize, Serialize};

/// The `suite` field of a `bench learn` result.
pub const LEARN_SUITE: &str = "rlrig-bench-learn";
/// Bumped whenever a cell's definition (budget, threshold, the crossing rule) changes.
pub const LEARN_VERSION: u32 = 1;
/// The training return that counts for the crossing: the mean of the last this many
/// finished training episodes (at least; rows are whole iterations).
pub const CROSSING_EPISODES: f64 = 20.0;

/// One cell of the matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub algo: String,
    pub env: String,
    /// The greedy score that counts as solved (issue 24's targets).
    pub threshold: f64,
    /// Env steps; `None` trains the preset's own budget.
    pub steps: Option<u64>,
    /// Part of `--quick`: under a minute per seed on two cores.
    pub quick: bool,
}

/// The matrix: (algorithm, env, threshold, steps, quick). Thresholds are the issue's
/// targets (the envs' "solved" scores; on MinAtar, the training return PureJaxRL's PPO
/// reaches in 10M steps with the same settings: its SpaceInvaders notebook's ~170, and
/// the others measured here with bench/peers/run_minatar.sh, rounded, Breakout's the
/// mean over 5 seeds; Seaquest's is not measured yet); budgets are the presets' unless
/// given.
const MATRIX: [(&str, &str, f64, Option<u64>, bool); 19] = [
    ("ppo", "CartPole-v1", 475.0, None, true),
    ("dqn", "CartPole-v1", 475.0, None, false),
    ("ppo", "Acrobot-v1", -100.0, None, true),
    ("dqn", "Acrobot-v1", -100.0, None, false),
    ("ppo", "MountainCar-v0", -120.0, None, true),
    ("ppo", "MountainCarContinuous-v0", 90.0, None, false),
    ("ppo", "Pendulum-v1", -200.0, None, false),
    ("sac", "Pendulum-v1", -200.0, None, true),
    ("td3", "Pendulum-v1", -200.0, None, false),
    ("ppo", "LunarLander-v3", 200.0, None, false),
    ("dqn", "LunarLander-v3", 200.0, None, false),
    ("ppo", "LunarLanderContinuous-v3", 200.0, None, false),
    ("sac", "LunarLanderContinuous-v3", 200.0, None, false),
    ("ppo", "BipedalWalker-v3", 250.0, None, false),
    ("td3", "BipedalWalker-v3", 250.0, Some(1_000_000), false),
    ("ppo", "MinAtar/Breakout-v1", 59.0, None, false),
    ("ppo", "MinAtar/SpaceInvaders-v1", 170.0, None, false),
    ("ppo", "MinAtar/Asterix-v1", 9.0, None, false),
    ("ppo", "MinAtar/Freeway-v1", 60.0, None, false),
];

/// Every cell of the matrix.
pub fn matrix() -> Vec<Cell> {
    MATRIX
        .iter()
        .map(|&(algo, env, threshold, steps, quick)| Cell {
            algo: algo.into(),
            env: env.into(),
            threshold,
            steps,
            quick,
        })
        .collect()
}

/// The cells to run: the matrix's (only the quick ones with `quick`), narrowed to
/// `envs` and `algos` when given. A pair named by `envs` x `algos` that the matrix does
/// not hold is added with `threshold`, or the env's threshold in the matrix; `threshold`
/// also replaces the matrix's. An empty selection or an env without a threshold is an
/// error that says what to pass.
pub fn select(
    quick: bool,
    envs: &[String],
    algos: &[String],
    threshold: Option<f64>,
) -> Result<Vec<Cell>, LabError> {
    let all = matrix();
    let mut cells: Vec<Cell> = all
        .iter()
        .filter(|c| !quick || c.quick)
        .filter(|c| envs.is_empty() || envs.contains(&c.env))
        .filter(|c| algos.is_empty() || algos.contains(&c.algo))
        .cloned()
        .collect();
    if !envs.is_empty() && !algos.is_empty() {
        for env in envs {
            for algo in algos {
                if cells.iter().any(|c| &c.env == env && &c.algo == algo) {
                    continue;
                }
                let Some(t) =
                    threshold.or_else(|| all.iter().find(|c| &c.env == env).map(|c| c.threshold))
                else {
                    return Err(LabError::Selection(format!(
                        "{algo} on {env}: the matrix has no threshold for {env}; pass --threshold SCORE"
                    )));
                };
                cells.push(Cell {
                    algo: algo.clone(),
                    env: env.clone(),
                    threshold: t,
                    steps: None,
                    quick,
                });
            }
        }
    }
    if let Some(t) = threshold {
        for c in &mut cells {
            c.threshold = t;
        }
    }
    if cells.is_empty() {
        let names: Vec<String> = all
            .iter()
            .map(|c| format!("{} {}", c.algo, c.env))
            .collect();
        return Err(LabError::Selection(format!(
            "no cell of the matrix matches{}{}{} (cells: {}); name both --env and --algo to run a pair outside it",
            if quick { " --quick" } else { "" },
            if envs.is_empty() {
                String::new()
            } else {
                format!(" --env {}", envs.join(","))
            },
            if algos.is_empty() {
                String::new()
            } else {
                format!(" --algo {}", algos.join(","))
            },
            names.join(", ")
        )));
    }
    Ok(cells)
}

/// Mean, 95 % interval and range of one figure over seeds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    /// Half-width of the 95 % interval of the mean (Student's t, n - 1 degrees of
    /// freedom); `None` with one value.
    pub ci95: Option<f64>,
    pub min: f64,
    pub max: f64,
}

/// The spread of `values`; `None` when there are none.
pub fn spread(values: &[f64]) -> Option<Spread> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let ci95 = (n > 1).then(|| {
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
            .expect("n - 1 >= 1 degrees of freedom")
            .inverse_cdf(0.975);
        t * (var / n as f64).sqrt()
    });
    Some(Spread {
        n,
        mean,
        ci95,
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// A run's training curve: per metrics.csv row from the one where the
/// [`CROSSING_EPISODES`]th episode finished, the env steps, the training seconds (env +
/// inference + learner + other, summed over rows) and the mean return of the last
/// [`CROSSING_EPISODES`] finished episodes (or more: the rows' means weighted by their
/// episode counts, whole rows).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Curve {
    pub steps: Vec<f64>,
    pub seconds: Vec<f64>,
    pub returns: Vec<f64>,
    /// Training seconds over every row.
    pub total_seconds: f64,
}

impl Curve {
    /// From a run's metrics.csv: PPO-family and replay learners (they write
    /// `global_step`, `episodes`, `episode_return` and the four `time_*` columns).
    pub fn of(m: &Metrics) -> Result<Curve, LabError> {
        let col = |name: &str| {
            m.column(name)
                .ok_or_else(|| LabError::MissingColumn(name.into()))
        };
        let (cs, ce, cr) = (
            col("global_step")?,
            col("episodes")?,
            col("episode_return")?,
        );
        let times = ["time_env", "time_inference", "time_learner", "time_other"]
            .map(col)
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        let mut curve = Curve::default();
        // (episodes, mean return) of the rows with finished episodes, newest last.
        // (episodes, mean return) of the rows in the window, newest last, and the window's
        // episode count and return sum.
        let mut window = std::collections::VecDeque::new();
        let (mut n, mut sum) = (0.0, 0.0);
        let mut seconds = 0.0;
        for row in &m.rows {
            seconds += times.iter().map(|&i| row[i]).sum::<f64>();
            let (episodes, ret) = (row[ce], row[cr]);
            if episodes > 0.0 && ret.is_finite() {
                window.push_back((episodes, ret));
                (n, sum) = (n + episodes, sum + episodes * ret);
                // Drop the oldest rows while the rest still cover the window.
                while let Some(&(e, r)) = window.front()
                    && window.len() > 1
                    && n - e >= CROSSING_EPISODES
                {
                    window.pop_front();
                    (n, sum) = (n - e, sum - e * r);
                }
            }
            // Not before the window is full: a few lucky first episodes are no crossing.
            if n < CROSSING_EPISODES {
                continue;
            }
            curve.steps.push(row[cs]);
            curve.seconds.push(seconds);
            curve.returns.push(sum / n);
        }
        curve.total_seconds = seconds;
        Ok(curve)
    }

    /// The env steps and training seconds at the first point whose return reaches
    /// `threshold`.
    pub fn crossing(&self, threshold: f64) -> Option<(f64, f64)> {
        let i = self.returns.iter().position(|&r| r >= threshold)?;
        Some((self.steps[i], self.seconds[i]))
    }
}

/// Mean and min..max over `curves` (each `(x, y)` with x increasing), on `points`
/// evenly spaced x values over the range that every curve covers; linear interpolation
/// between a curve's points. Empty when the curves share no range.
pub fn band(curves: &[Vec<(f64, f64)>], points: usize) -> Vec<(f64, f64, f64, f64)> {
    let lo = curves
        .iter()
        .map(|c| c.first().map_or(f64::INFINITY, |p| p.0))
        .fold(f64::NEG_INFINITY, f64::max);
    let hi = curves
        .iter()
        .map(|c| c.last().map_or(f64::NEG_INFINITY, |p| p.0))
        .fold(f64::INFINITY, f64::min);
    if curves.is_empty() || !(lo.is_finite() && hi.is_finite()) || hi < lo || points == 0 {
        return Vec::new();
    }
    let at = |c: &[(f64, f64)], x: f64| -> f64 {
        let j = c.partition_point(|p| p.0 < x);
        if j == 0 {
            return c[0].1;
        }
        if j == c.len() {
            return c[j - 1].1;
        }
        let ((x0, y0), (x1, y1)) = (c[j - 1], c[j]);
        if x1 > x0 {
            y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        } else {
            y1
        }
    };
    (0..points)
        .map(|k| {
            let x = if points == 1 {
                hi
            } else {
                lo + (hi - lo) * k as f64 / (points - 1) as f64
            };
            let ys: Vec<f64> = curves.iter().map(|c| at(c, x)).collect();
            let mean = ys.iter().sum::<f64>() / ys.len() as f64;
            let min = ys.iter().copied().fold(f64::INFINITY, f64::min);
            let max = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (x, mean, min, max)
        })
        .collect()
}

/// One seed of a cell.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SeedOutcome {
    pub seed: u64,
    /// "done", "interrupted" or "failed" (the packed launcher's word).
    pub status: String,
    /// Mean greedy return of the final evaluation.
    pub final_return: Option<f64>,
    pub env_steps: Option<f64>,
    /// Training seconds (metrics.csv's stage times) and the process's wall seconds.
    pub train_seconds: Option<f64>,
    pub wall_seconds: f64,
    pub steps_to_threshold: Option<f64>,
    pub seconds_to_threshold: Option<f64>,
}

/// One cell's outcome over its seeds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CellResult {
    pub algo: String,
    pub env: String,
    pub threshold: f64,
    /// The budget asked for (`None`: the preset's).
    pub steps: Option<u64>,
    pub run_dir: String,
    /// Why the cell did not finish (a failed seed, a refused config).
    pub error: Option<String>,
    pub seeds: Vec<SeedOutcome>,
    pub final_return: Option<Spread>,
    /// Seeds whose final greedy return reaches the threshold.
    pub reached: usize,
    /// Seeds whose training return reached it at some point, and the medians over
    /// them of the env steps and training seconds it took.
    pub crossed: usize,
    pub steps_to_threshold: Option<f64>,
    pub seconds_to_threshold: Option<f64>,
    /// Wall seconds of the whole cell (its seeds packed onto the cores).
    pub wall_seconds: f64,
}

impl CellResult {
    /// The cell's figures from its seeds.
    pub fn of(
        cell: &Cell,
        run_dir: &Path,
        seeds: Vec<SeedOutcome>,
        wall_seconds: f64,
        error: Option<String>,
    ) -> CellResult {
        let finals: Vec<f64> = seeds.iter().filter_map(|s| s.final_return).collect();
        let crossed: Vec<&SeedOutcome> = seeds
            .iter()
            .filter(|s| s.steps_to_threshold.is_some())
            .collect();
        let med = |f: fn(&SeedOutcome) -> Option<f64>| {
            median(&crossed.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
        };
        CellResult {
            algo: cell.algo.clone(),
            env: cell.env.clone(),
            threshold: cell.threshold,
            steps: cell.steps,
            run_dir: run_dir.display().to_string(),
            error,
            final_return: spread(&finals),
            reached: finals.iter().filter(|&&r| r >= cell.threshold).count(),
            crossed: crossed.len(),
            steps_to_threshold: med(|s| s.steps_to_threshold),
            seconds_to_threshold: med(|s| s.seconds_to_threshold),
            seeds,
            wall_seconds,
        }
    }

    /// `ppo CartPole-v1`.
    pub fn name(&self) -> String {
        format!("{} {}", self.algo, self.env)
    }

    /// One line: score with its interval, seeds reaching the threshold, time to it.
    pub fn line(&self) -> String {
        let score = self.final_return.as_ref().map_or("-".into(), |s| {
            format!(
                "{:.1}{} (range {:.1} to {:.1})",
                s.mean,
                s.ci95
                    .map_or(String::new(), |c| format!(" ± {c:.1} (95 % CI)")),
                s.min,
                s.max
            )
        });
        let to = match (self.steps_to_threshold, self.seconds_to_threshold) {
            (Some(st), Some(se)) => format!(
                ", training return reached it after {} steps / {se:.1} s (median of {})",
                crate::plot::human(st),
                self.crossed
            ),
            _ => ", training return never reached it".into(),
        };
        format!(
            "{}: greedy {score} over {} seeds; {} of {} >= {}{to}{}",
            self.name(),
            self.seeds.len(),
            self.reached,
            self.seeds.len(),
            self.threshold,
            self.error
                .as_ref()
                .map_or(String::new(), |e| format!(" (error: {e})"))
        )
    }
}

/// A `bench learn` result file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LearnResult {
    pub suite: String,
    pub version: u32,
    pub rlrig: String,
    pub unix_time: u64,
    pub quick: bool,
    pub threads: usize,
    /// Seeds per cell.
    pub seeds: Vec<u64>,
    /// `--set KEY=VALUE` given to every cell.
    #[serde(default)]
    pub sets: Vec<String>,
    pub machine: String,
    pub probe: serde_json::Value,
    pub cells: Vec<CellResult>,
}

impl LearnResult {
    /// An empty result for this machine; cells are pushed as they finish.
    pub fn new(
        quick: bool,
        threads: usize,
        seeds: Vec<u64>,
        sets: Vec<String>,
    ) -> Result<LearnResult, LabError> {
        let (machine, probe) = crate::probe::this_machine()?;
        Ok(LearnResult {
            suite: LEARN_SUITE.into(),
            version: LEARN_VERSION,
            rlrig: env!("CARGO_PKG_VERSION").into(),
            unix_time: crate::suite::unix_time(),
            quick,
            threads,
            seeds,
            sets,
            machine,
            probe,
            cells: Vec::new(),
        })
    }
}

/// Reads a `bench learn` result, naming the file in errors.
pub fn load(path: &Path) -> Result<LearnResult, LabError> {
    crate::suite::read_result(path, "bench learn", LEARN_SUITE, |r: &LearnResult| &r.suite)
}

/// A markdown table over the first file's cells: each file's greedy score (mean ± 95 %
/// interval), seeds reaching the threshold and median training seconds to it, and each
/// file's time to the threshold relative to the first's.
pub fn compare_table(results: &[(String, LearnResult)]) -> String {
    let mut s = String::new();
    s += &legend(
        "bench learn",
        "cells",
        results.iter().map(|(name, r)| {
            let sets = if r.sets.is_empty() {
                String::new()
            } else {
                format!(", --set {}", r.sets.join(" --set "))
            };
            let quick = if r.quick { ", quick" } else { "" };
            (
                name.as_str(),
                r.machine.as_str(),
                r.version,
                format!(
                    "{} threads, {} seeds{quick}{sets}",
                    r.threads,
                    r.seeds.len()
                ),
            )
        }),
    );
    s += "\n| cell | threshold |";
    for i in 0..results.len() {
        let l = letter(i);
        s += &format!(" {l} greedy (95 % CI) | {l} reached | {l} s to threshold |");
    }
    for i in 1..results.len() {
        s += &format!(" {}/A time |", letter(i));
    }
    s += "\n|---|---:|";
    s += &"---|---:|---:|".repeat(results.len());
    s += &"---:|".repeat(results.len() - 1);
    s += "\n";
    let Some((_, first)) = results.first() else {
        return s;
    };
    for c in &first.cells {
        let found: Vec<Option<&CellResult>> = results
            .iter()
            .map(|(_, r)| r.cells.iter().find(|x| x.algo == c.algo && x.env == c.env))
            .collect();
        s += &format!("| {} | {} |", c.name(), c.threshold);
        for f in &found {
            match f {
                None => s += " - | - | - |",
                Some(f) => {
                    let score = f.final_return.as_ref().map_or("-".into(), |sp| {
                        format!(
                            "{:.1}{}",
                            sp.mean,
                            sp.ci95.map_or(String::new(), |c| format!(" ± {c:.1}"))
                        )
                    });
                    let secs = f
                        .seconds_to_threshold
                        .map_or("-".into(), |t| format!("{t:.1}"));
                    s += &format!(" {score} | {}/{} | {secs} |", f.reached, f.seeds.len());
                }
            }
        }
        let base = found[0].and_then(|f| f.seconds_to_threshold);
        for f in &found[1..] {
            s += &ratio_cell(f.and_then(|f| f.seconds_to_threshold), base);
        }
        s += "\n";
    }
    s
}

/// Bars of each file's median training seconds to the threshold, relative to the
/// first file's, per cell both reached.
pub fn compare_plot(path: &Path, results: &[(String, LearnResult)]) -> Result<(), LabError> {
    let Some((_, first)) = results.first() else {
        return Err(LabError::Selection("nothing to compare".into()));
    };
    let cats: Vec<String> = first.cells.iter().map(CellResult::name).collect();
    ratio_bars(
        path,
        "training time to the threshold relative to A",
        &cats,
        results.iter().map(|(name, _)| name.as_str()),
        |i| {
            first
                .cells
                .iter()
                .map(|c| {
                    let t = results[i]
                        .1
                        .cells
                        .iter()
                        .find(|x| x.algo == c.algo && x.env == c.env)
                        .and_then(|x| x.seconds_to_threshold);
                    ratio(t, c.seconds_to_threshold)
                })
                .collect()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn metrics(rows: &[(f64, f64, f64)]) -> Metrics {
        // global_step, episodes, episode_return; one second of env time per row.
        let mut text = String::from(
            "global_step,episodes,episode_return,time_env,time_inference,time_learner,time_other\n",
        );
        for (s, e, r) in rows {
            text += &format!("{s},{e},{r},1,0,0,0\n");
        }
        Metrics::parse(&text).unwrap()
    }

    #[test]
    fn the_crossing_is_the_first_row_whose_trailing_mean_reaches_the_threshold() {
        // 10 episodes per row: the window is the last two rows, full from the third row
        // (the second with episodes); a lucky first row alone is no crossing.
        let m = metrics(&[
            (100.0, 0.0, f64::NAN),
            (200.0, 10.0, 200.0),
            (300.0, 10.0, 0.0),
            (400.0, 10.0, 100.0),
            (500.0, 10.0, 100.0),
            (600.0, 10.0, 0.0),
        ]);
        let c = Curve::of(&m).unwrap();
        assert_eq!(c.steps, vec![300.0, 400.0, 500.0, 600.0]);
        assert_eq!(c.returns, vec![100.0, 50.0, 100.0, 50.0]);
        assert_eq!(c.seconds, vec![3.0, 4.0, 5.0, 6.0]);
        assert_eq!(c.total_seconds, 6.0);
        assert_eq!(c.crossing(60.0), Some((300.0, 3.0)));
        assert_eq!(c.crossing(101.0), None);
        let late = metrics(&[
            (100.0, 10.0, 0.0),
            (200.0, 10.0, 0.0),
            (300.0, 10.0, 90.0),
            (400.0, 10.0, 90.0),
        ]);
        assert_eq!(Curve::of(&late).unwrap().crossing(60.0), Some((400.0, 4.0)));
        // One row with many episodes is a window by itself; too few episodes, no curve.
        let m = metrics(&[(10.0, 25.0, -50.0), (20.0, 30.0, 10.0)]);
        assert_eq!(Curve::of(&m).unwrap().returns, vec![-50.0, 10.0]);
        assert!(
            Curve::of(&metrics(&[(10.0, 5.0, 1.0)]))
                .unwrap()
                .returns
                .is_empty()
        );
    }

    #[test]
    fn a_metrics_file_without_the_columns_is_named() {
        let m = Metrics::parse("generation,episodes\n1,2\n").unwrap();
        let e = Curve::of(&m).unwrap_err();
        assert!(
            matches!(&e, LabError::MissingColumn(c) if c == "global_step"),
            "{e:?}"
        );
    }

    #[test]
    fn the_interval_is_students() {
        // n = 5, sd = 1.5811 (1..5), t(0.975, 4) = 2.7764: 2.7764 * 1.5811 / sqrt(5).
        let s = spread(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!((s.n, s.mean, s.min, s.max), (5, 3.0, 1.0, 5.0));
        assert!((s.ci95.unwrap() - 1.9632).abs() < 1e-3, "{s:?}");
        assert_eq!(spread(&[7.0]).unwrap().ci95, None);
        assert_eq!(spread(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn selection_narrows_the_matrix_and_adds_named_pairs() {
        let quick = select(true, &[], &[], None).unwrap();
        assert!(quick.iter().all(|c| c.quick) && quick.len() >= 3);
        let ll = select(false, &["LunarLander-v3".into()], &[], None).unwrap();
        assert_eq!(ll.len(), 2);
        assert!(
            ll.iter()
                .all(|c| c.env == "LunarLander-v3" && c.threshold == 200.0)
        );
        // A pair outside the matrix takes the env's threshold.
        let a2c = select(false, &["LunarLander-v3".into()], &["a2c".into()], None).unwrap();
        assert_eq!((a2c.len(), a2c[0].threshold), (1, 200.0));
        // ... or needs one.
        let e = select(
            false,
            &["BipedalWalkerHardcore-v3".into()],
            &["ppo".into()],
            None,
        )
        .unwrap_err();
        assert!(matches!(e, LabError::Selection(_)), "{e:?}");
        assert!(e.to_string().contains("--threshold"), "{e}");
        let b = select(
            false,
            &["BipedalWalkerHardcore-v3".into()],
            &["ppo".into()],
            Some(28.0),
        )
        .unwrap();
        assert_eq!(b[0].threshold, 28.0);
        let e = select(true, &["BipedalWalker-v3".into()], &[], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no cell") && e.contains("--quick"), "{e}");
    }

    #[test]
    fn compare_shows_each_file_and_the_time_ratio() {
        let cell = |secs: f64| CellResult {
            algo: "ppo".into(),
            env: "CartPole-v1".into(),
            threshold: 475.0,
            steps: None,
            run_dir: "x".into(),
            error: None,
            seeds: vec![],
            final_return: spread(&[500.0, 480.0]),
            reached: 2,
            crossed: 2,
            steps_to_threshold: Some(1e5),
            seconds_to_threshold: Some(secs),
            wall_seconds: 3.0,
        };
        let r = |secs| LearnResult {
            suite: LEARN_SUITE.into(),
            version: LEARN_VERSION,
            rlrig: "0".into(),
            unix_time: 0,
            quick: true,
            threads: 2,
            seeds: vec![1, 2],
            sets: vec![],
            machine: "m".into(),
            probe: serde_json::Value::Null,
            cells: vec![cell(secs)],
        };
        let t = compare_table(&[("a".into(), r(2.0)), ("b".into(), r(5.0))]);
        assert!(t.contains("| ppo CartPole-v1 | 475 |"), "{t}");
        assert!(t.contains("| 2.50 |"), "{t}");
        assert!(t.contains("490.0 ± "), "{t}");
    }

    proptest! {
        #[test]
        fn the_band_holds_every_curve(
            curves in prop::collection::vec(
                prop::collection::vec((0.0f64..10.0, -100.0f64..100.0), 1..20), 1..5),
            points in 1usize..50,
        ) {
            // Each curve's x made increasing from 0 by positive steps.
            let curves: Vec<Vec<(f64, f64)>> = curves.into_iter().map(|c| {
                let mut x = 0.0;
                c.into_iter().map(|(dx, y)| { x += dx + 0.01; (x, y) }).collect()
            }).collect();
            let b = band(&curves, points);
            let lo = curves.iter().map(|c| c[0].0).fold(f64::NEG_INFINITY, f64::max);
            let hi = curves.iter().map(|c| c[c.len() - 1].0).fold(f64::INFINITY, f64::min);
            if hi < lo {
                prop_assert!(b.is_empty());
            } else {
                prop_assert_eq!(b.len(), points);
                let ymin = curves.iter().flatten().map(|p| p.1).fold(f64::INFINITY, f64::min);
                let ymax = curves.iter().flatten().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
                for &(x, mean, min, max) in &b {
                    prop_assert!(x >= lo - 1e-9 && x <= hi + 1e-9);
                    prop_assert!(min <= mean + 1e-9 && mean <= max + 1e-9);
                    prop_assert!(min >= ymin - 1e-9 && max <= ymax + 1e-9);
                }
            }
        }

        #[test]
        fn the_interval_covers_the_mean_and_shrinks_with_agreement(
            v in prop::collection::vec(-1e3f64..1e3, 2..30),
        ) {
            let s = spread(&v).unwrap();
            prop_assert!(s.min <= s.mean + 1e-9 && s.mean <= s.max + 1e-9);
            let c = s.ci95.unwrap();
            prop_assert!(c >= 0.0);
            let same = spread(&vec![v[0]; v.len()]).unwrap();
            prop_assert!(same.ci95.unwrap() <= 1e-9);
        }
    }
}
