//! Refusing impossible sizes before anything is allocated: a run (or a benchmark) adds
//! up what its large buffers will take, and [`Estimate::check`] compares that with the
//! memory this machine has available. Without it, `--num-envs 50000000` dies with
//! "memory allocation of 16000000000 bytes failed" (an abort, no message of ours).
//!
//! The figures count the buffers that grow with the flags (env batches, rollouts,
//! replay storage, populations, networks); they are meant to be a little under the truth,
//! so a run that fits is never refused, and a run refused is far out of reach.

use crate::LearnError;

/// A run's config, which knows what the run will allocate before it exists (the run
/// driver checks it against the machine before building anything).
pub trait Estimated {
    fn memory_estimate(&self) -> Estimate;
}

/// What a run will allocate, part by part.
#[derive(Clone, Debug, Default)]
pub struct Estimate {
    parts: Vec<(String, f64)>,
}

impl Estimate {
    pub fn new() -> Estimate {
        Estimate::default()
    }

    /// Adds a part of `bytes` (computed in f64, so absurd flags cannot overflow).
    pub fn add(mut self, what: impl Into<String>, bytes: f64) -> Estimate {
        self.parts.push((what.into(), bytes));
        self
    }

    /// This estimate with the parts of `other` added.
    pub fn and(mut self, other: Estimate) -> Estimate {
        self.parts.extend(other.parts);
        self
    }

    /// The bytes of every part together.
    pub fn total(&self) -> f64 {
        self.parts.iter().map(|(_, b)| b).sum()
    }

    /// Refuses the run when it needs more than this machine has available
    /// ([`available_bytes`]); `lower` names what to lower (`--num-envs`, ...). Where
    /// the available memory cannot be read, nothing is refused.
    pub fn check(&self, what: &str, lower: &str) -> Result<(), LearnError> {
        match available_bytes() {
            Some(avail) => self.check_against(avail, what, lower),
            None => Ok(()),
        }
    }

    /// [`Estimate::check`] against a given number of available bytes.
    pub fn check_against(&self, available: f64, what: &str, lower: &str) -> Result<(), LearnError> {
        let need = self.total();
        if need.is_finite() && need <= available {
            return Ok(());
        }
        let parts = self
            .parts
            .iter()
            .filter(|(_, b)| *b >= 0.01 * need)
            .map(|(w, b)| format!("{w}: {}", human(*b)))
            .collect::<Vec<_>>()
            .join("; ");
        Err(LearnError::Memory {
            what: what.into(),
            need,
            available,
            parts,
            lower: lower.into(),
        })
    }
}

/// Bytes as a person reads them: "16.0 GB", "512.0 MB", "3.2e3 TB".
pub fn human(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if !bytes.is_finite() {
        return "more than can be counted".into();
    }
    let mut v = bytes;
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if v >= 1000.0 {
        format!("{v:.1e} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Memory this process can still take: the kernel's `MemAvailable`, lowered to what a
/// cgroup limit (a container, a batch job's allocation) leaves. `None` where neither
/// can be read (not Linux).
pub fn available_bytes() -> Option<f64> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let meminfo = read("/proc/meminfo").and_then(|t| meminfo_available(&t));
    let cgroup = cgroup_room(
        read("/sys/fs/cgroup/memory.max")
            .or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes")),
        read("/sys/fs/cgroup/memory.current")
            .or_else(|| read("/sys/fs/cgroup/memory/memory.usage_in_bytes")),
        read("/sys/fs/cgroup/memory.stat").or_else(|| read("/sys/fs/cgroup/memory/memory.stat")),
    );
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn meminfo_available(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// What a cgroup's limit leaves above its usage; `None` without a limit ("max", or
/// cgroup v1's near-2^63 "unlimited"). The usage counts the page cache (a build's
/// files, a dataset read), which the kernel gives back under pressure: the file cache
/// of `memory.stat` (v2 `file`, v1 `total_cache`) is not counted as used.
fn cgroup_room(limit: Option<String>, usage: Option<String>, stat: Option<String>) -> Option<f64> {
    let limit: f64 = limit?.trim().parse().ok()?;
    if limit >= 1e18 {
        return None;
    }
    let usage: f64 = usage.and_then(|u| u.trim().parse().ok()).unwrap_or(0.0);
    let cache: f64 = stat
        .as_deref()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                matches!(k, "file" | "total_cache").then(|| v.trim().parse().ok())?
            })
        })
        .unwrap_or(0.0);
    Some((limit - (usage - cache).max(0.0)).max(0.0))
}

/// What `num_envs` envs of `env` take (their states, as [`rlrig_env::EnvSpec`] counts
/// them); unknown envs count nothing.
pub fn envs(env: &str, num_envs: usize) -> Estimate {
    let bytes = rlrig_env::spec(env).map_or(0, |s| s.bytes_per_env);
    Estimate::new().add(
        format!("{num_envs} envs of {env}"),
        num_envs as f64 * bytes as f64,
    )
}

/// A replay buffer of `rows` transitions of `floats_per_row` f32 values each.
pub fn replay(rows: f64, floats_per_row: usize) -> Estimate {
    Estimate::new().add(
        format!("replay buffer of {rows} transitions"),
        rows * floats_per_row as f64 * 4.0,
    )
}

/// What a greedy evaluation of `episodes` episodes of `env` takes: they run as one
/// batch of envs (their states, observation and action rows, the network's
/// activations). Unknown envs count nothing.
pub fn evaluation(env: &str, episodes: usize) -> Estimate {
    let Ok(spec) = rlrig_env::spec(env) else {
        return Estimate::new();
    };
    let per_episode = spec.bytes_per_env + 16 * (spec.obs_dim + spec.action_space.flat_dim());
    Estimate::new().add(
        format!("{episodes} episodes of {env} stepped together"),
        episodes as f64 * per_episode as f64,
    )
}

/// Parameters (weights and biases) of a fully connected stack `input -> hidden... ->
/// output`: [`crate::nn::Mlp::num_params`] in f64, so absurd sizes cannot overflow.
pub fn mlp_params(input: usize, hidden: &[usize], output: usize) -> f64 {
    let sizes: Vec<usize> = std::iter::once(input)
        .chain(hidden.iter().copied())
        .chain(std::iter::once(output))
        .collect();
    sizes
        .windows(2)
        .map(|w| w[0] as f64 * w[1] as f64 + w[1] as f64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_fits_passes_and_one_that_does_not_names_its_parts_and_the_flag() {
        let e = Estimate::new()
            .add("rollout", 12.8e9)
            .add("envs", 3.2e9)
            .add("tiny", 10.0);
        assert_eq!(e.total(), 16.0e9 + 10.0);
        assert!(e.check_against(17e9, "train ppo", "--num-envs").is_ok());
        let err = e.check_against(8e9, "train ppo", "--num-envs").unwrap_err();
        assert!(matches!(err, LearnError::Memory { .. }));
        assert_eq!(
            err.to_string(),
            "train ppo needs about 16.0 GB of memory (rollout: 12.8 GB; envs: 3.2 GB), but this machine has 8.0 GB available: lower --num-envs"
        );
    }

    #[test]
    fn absurd_sizes_do_not_overflow() {
        let e = Estimate::new().add("envs", 1e30 * 1e30);
        assert!(e.check_against(1e12, "x", "--num-envs").is_err());
        let e = Estimate::new().add("envs", f64::INFINITY);
        let err = e
            .check_against(1e12, "x", "--num-envs")
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than can be counted"), "{err}");
    }

    #[test]
    fn meminfo_and_cgroup_limits_are_read() {
        let t = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(meminfo_available(t), Some(20000000.0 * 1024.0));
        assert_eq!(meminfo_available("MemTotal: 5 kB\n"), None);
        assert_eq!(
            cgroup_room(Some("max\n".into()), Some("5".into()), None),
            None
        );
        assert_eq!(
            cgroup_room(Some("9223372036854771712\n".into()), Some("5".into()), None),
            None
        );
        assert_eq!(
            cgroup_room(Some("1000\n".into()), Some("300\n".into()), None),
            Some(700.0)
        );
        // The page cache is given back under pressure: not counted as used (v2, v1).
        let v2 = "anon 100\nfile 150\nkernel 50\n".to_string();
        let v1 = "cache 7\nrss 100\ntotal_cache 150\ntotal_rss 100\n".to_string();
        for stat in [v2, v1] {
            assert_eq!(
                cgroup_room(Some("1000".into()), Some("300".into()), Some(stat)),
                Some(850.0)
            );
        }
        assert!(available_bytes().is_some_and(|b| b > 0.0), "this is Linux");
    }

    #[test]
    fn mlp_params_counts_weights_and_biases() {
        assert_eq!(
            mlp_params(4, &[64, 64], 2),
            (4 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2) as f64
        );
    }
}
