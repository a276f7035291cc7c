//! Where a run's wall time went, and what bounds it.

use serde::Serialize;

/// Wall time of a run split into stages, seconds. `other` is what the stage timers did
/// not cover (logging, checkpoints, bookkeeping), so the parts sum to `wall`.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Breakdown {
    pub wall: f64,
    pub env: f64,
    pub inference: f64,
    pub learner: f64,
    pub other: f64,
}

impl Breakdown {
    pub fn new(wall: f64, env: f64, inference: f64, learner: f64) -> Breakdown {
        Breakdown {
            wall,
            env,
            inference,
            learner,
            other: (wall - env - inference - learner).max(0.0),
        }
    }

    /// Shares of wall time: (env, inference, learner, other).
    pub fn shares(&self) -> (f64, f64, f64, f64) {
        let w = self.wall.max(1e-12);
        (
            self.env / w,
            self.inference / w,
            self.learner / w,
            self.other / w,
        )
    }
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Env,
    Inference,
    Learner,
    Overhead,
    Balanced,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Verdict {
    pub bound: Bound,
    pub message: String,
}

/// Names the stage that bounds the run, with advice. `batch` is the number of envs
/// stepped (and observations inferred) per call, `threads` the env threads used.
pub fn verdict(b: &Breakdown, batch: usize, threads: usize) -> Verdict {
    let (env, inf, learn, other) = b.shares();
    let pct = |x: f64| (100.0 * x).round();
    let (bound, message) = if env >= 0.5 {
        (
            Bound::Env,
            format!(
                "env-bound: {}% of wall time in env.step; raise --threads (now {threads}) or --num-envs, or use a faster env",
                pct(env)
            ),
        )
    } else if inf >= 0.4 {
        (
            Bound::Inference,
            format!(
                "inference-bound at batch {batch}: {}% of wall time in policy forward passes; raise --num-envs so each call does more work",
                pct(inf)
            ),
        )
    } else if learn >= 0.5 {
        (
            Bound::Learner,
            format!(
                "learner-bound: {}% of wall time in updates; fewer epochs (PPO), a lower utd_ratio (DDPG/TD3/SAC) or gradient_steps (DQN), or a smaller network trade sample efficiency for speed, a GPU device helps large networks",
                pct(learn)
            ),
        )
    } else if other >= 0.3 {
        (
            Bound::Overhead,
            format!(
                "{}% of wall time outside env, inference and learner (logging, checkpoints, start-up)",
                pct(other)
            ),
        )
    } else {
        (
            Bound::Balanced,
            format!(
                "balanced: env {}%, inference {}%, learner {}%, other {}%",
                pct(env),
                pct(inf),
                pct(learn),
                pct(other)
            ),
        )
    };
    Verdict { bound, message }
}

/// Per-core CPU busy fractions between two readings of `/proc/stat`.
pub struct CpuSampler {
    start: Vec<(u64, u64)>,
    /// Seconds in worker-pool tasks per thread when sampling started.
    pool_start: Vec<f64>,
}

fn read_stat() -> Vec<(u64, u64)> {
    // Each `cpuN` line: user nice system idle iowait irq softirq steal ...
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            (total, idle)
        })
        .collect()
}

impl CpuSampler {
    pub fn start() -> CpuSampler {
        CpuSampler {
            start: read_stat(),
            pool_start: rlrig_env::pool::task_seconds(),
        }
    }

    /// Seconds each thread of the worker pool spent in tasks since `start` (the caller
    /// first, then each worker): work only, where `busy` also counts a worker spinning
    /// for its next task. At least one entry.
    pub fn pool_tasks(&self) -> Vec<f64> {
        let mut now = rlrig_env::pool::task_seconds();
        now.resize(now.len().max(self.pool_start.len()).max(1), 0.0);
        for (t, t0) in now.iter_mut().zip(&self.pool_start) {
            *t -= t0;
        }
        now
    }

    /// Busy fraction of each core since `start` (empty where /proc/stat is missing).
    pub fn busy(&self) -> Vec<f64> {
        read_stat()
            .iter()
            .zip(&self.start)
            .map(|((t1, i1), (t0, i0))| {
                let dt = t1.saturating_sub(*t0);
                if dt == 0 {
                    0.0
                } else {
                    1.0 - i1.saturating_sub(*i0) as f64 / dt as f64
                }
            })
            .collect()
    }
}

/// The run summary's GPU lines: each sampled GPU's busy % and peak memory, or `none`
/// when no GPU was sampled.
pub fn gpu_lines(gpus: &[crate::probe::GpuUse], none: &str) -> Vec<String> {
    let mut out = Vec::new();
    if gpus.is_empty() {
        out.push(none.to_string());
    }
    for g in gpus {
        out.push(format!(
            "gpu {}: busy {:.0}% mean, {:.0}% peak, memory peak {} ({} samples)",
            g.gpu,
            g.mean_busy_percent,
            g.max_busy_percent,
            g.max_memory_used_mib
                .map_or("?".into(), |m| format!("{m:.0} MiB")),
            g.samples
        ));
    }
    out
}

/// The stage breakdown, core and GPU use (`gpus` sampled during the run), and the
/// bottleneck verdict of a run, as lines.
pub fn time_report(
    wall: f64,
    t: rlrig_learn::trace::StageTimes,
    num_envs: usize,
    threads: usize,
    device: &str,
    cpu: &CpuSampler,
    gpus: &[crate::probe::GpuUse],
) -> Vec<String> {
    let mut out = Vec::new();
    let b = Breakdown::new(wall, t.env, t.inference, t.learner);
    let (pe, pi, pl, po) = b.shares();
    out.push(format!(
        "time: env {:.2} s ({:.0}%), inference {:.2} s ({:.0}%), learner {:.2} s ({:.0}%), other {:.2} s ({:.0}%)",
        b.env,
        100.0 * pe,
        b.inference,
        100.0 * pi,
        b.learner,
        100.0 * pl,
        b.other,
        100.0 * po
    ));
    let busy: Vec<String> = cpu
        .busy()
        .iter()
        .map(|x| format!("{:.0}%", 100.0 * x))
        .collect();
    if !busy.is_empty() {
        out.push(format!("cpu busy per core: {}", busy.join(" ")));
    }
    let tasks = cpu.pool_tasks();
    if threads > 1 && tasks.len() > 1 && wall > 0.0 {
        // The OS counts a spinning worker as busy; this counts only work in the pool.
        let shares: Vec<String> = tasks
            .iter()
            .map(|t| format!("{:.0}%", 100.0 * t / wall))
            .collect();
        out.push(format!(
            "pool tasks (caller, then each worker) in % of wall time: {}",
            shares.join(" ")
        ));
    }
    // The sampler reads NVIDIA/AMD counters; say which path ran the networks so a
    // burn-cpu or lavapipe run is not reported as the native path.
    let none = if device == "cpu" {
        "gpu: none in use (the native CPU path ran the networks)".to_string()
    } else {
        format!("gpu: no NVIDIA/AMD GPU activity sampled (the networks ran on {device})")
    };
    out.extend(gpu_lines(gpus, &none));
    let v = verdict(&b, num_envs, threads);
    out.push(format!("verdict: {}", v.message));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_the_largest_stage_wins() {
        let b = Breakdown::new(10.0, 8.1, 1.0, 0.5);
        let (e, i, l, o) = b.shares();
        assert!((e + i + l + o - 1.0).abs() < 1e-12);
        let v = verdict(&b, 4, 2);
        assert_eq!(v.bound, Bound::Env);
        assert!(
            v.message
                .starts_with("env-bound: 81% of wall time in env.step"),
            "{}",
            v.message
        );
        // Seconds of env, inference and learner out of 10, the batch, the bound.
        for ((env, inference, learner), batch, bound) in [
            ((1.0, 5.0, 3.0), 1, Bound::Inference),
            ((1.0, 1.0, 7.0), 64, Bound::Learner),
            ((2.0, 2.0, 2.0), 64, Bound::Overhead),
            ((3.0, 3.0, 3.5), 64, Bound::Balanced),
        ] {
            let b = Breakdown::new(10.0, env, inference, learner);
            assert_eq!(verdict(&b, batch, 1).bound, bound, "{b:?}, batch {batch}");
        }
    }

    #[test]
    fn a_busy_loop_shows_up_as_cpu_use() {
        let s = CpuSampler::start();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        // 300 ms: /proc/stat counts 10 ms ticks, and the thread may move between cores.
        while t.elapsed().as_millis() < 300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let busy = s.busy();
        assert!(!busy.is_empty());
        assert!(busy.iter().all(|b| (0.0..=1.0).contains(b)));
        assert!(busy.iter().sum::<f64>() > 0.3, "{busy:?}");
    }

    #[test]
    fn pool_work_after_the_start_is_counted() {
        let s = CpuSampler::start();
        let pool = rlrig_env::pool::Pool::new(2).unwrap();
        // Every task sleeps 2 ms, so 4 tasks are at least 8 ms of work in all.
        pool.run(4, &|_| {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        let t = s.pool_tasks();
        assert!(t.iter().all(|x| *x >= 0.0), "{t:?}");
        assert!(t.iter().sum::<f64>() >= 0.008, "{t:?}");
    }
}
