//! `rlrig train ppo --device gpu [--seeds LIST]`: PPO resident on the GPU, every seed
//! a batch row of the same kernels (crate rlrig-gpu).

use anyhow::{Result, bail};

/// The most runs one launch takes (wgpu's dispatch limit per dimension).
pub const MAX_SEEDS: usize = 65_535;

/// A parsed `--seeds` list (a newtype: clap reads a bare `Vec` as a repeated flag).
#[derive(Clone, Debug, PartialEq)]
pub struct SeedList(pub Vec<u64>);

/// [`parse_seeds`] for clap.
pub fn seed_list(list: &str) -> Result<SeedList, String> {
    parse_seeds(list).map(SeedList)
}

/// `--seeds LIST`: comma-separated seeds and inclusive ranges (`1-1024`, `1,5,9`,
/// `1-4,10-12`), each seed once, at most [`MAX_SEEDS`].
pub fn parse_seeds(list: &str) -> Result<Vec<u64>, String> {
    let mut seeds = Vec::new();
    for part in list.split(',') {
        let part = part.trim();
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| format!("--seeds {list}: '{s}' is not a seed (a number from 0)"))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let s = num(part)?;
                (s, s)
            }
        };
        if lo > hi {
            return Err(format!("--seeds {list}: range {part} runs backwards"));
        }
        if hi - lo >= MAX_SEEDS as u64 || seeds.len() + (hi - lo) as usize >= MAX_SEEDS {
            return Err(format!(
                "--seeds {list}: more than {MAX_SEEDS} seeds in one launch"
            ));
        }
        seeds.extend(lo..=hi);
    }
    let mut sorted = seeds.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("--seeds {list}: seed {} is listed twice", w[0]));
    }
    Ok(seeds)
}

#[cfg(not(feature = "gpu"))]
pub fn bench_env_gpu(_env: &str, _o: &crate::bench::BenchOnDevice) -> Result<()> {
    bail!("{NO_GPU_BUILD}")
}

/// `rlrig bench env --device gpu`: the env's device kernel stepped with random actions.
#[cfg(feature = "gpu")]
pub fn bench_env_gpu(env: &str, o: &crate::bench::BenchOnDevice) -> Result<()> {
    let denv = rlrig_gpu::envs::device_env(env)?;
    let gpu = rlrig_gpu::Gpu::open()?;
    let r = rlrig_gpu::envs::bench(&gpu, &denv, o.num_envs, o.steps, o.seed, o.warmup, None)?;
    let sps = r.steps_per_sec();
    if o.json {
        let v = serde_json::json!({
            "env": r.env,
            "num_envs": r.num_envs,
            "device": gpu.describe(),
            "mode": "device",
            "warmup_seconds": r.warmup_seconds,
            "steps": r.steps,
            "seconds": r.seconds,
            "steps_per_sec": sps,
            "steps_per_dispatch": r.steps_per_dispatch,
            "dispatches": r.dispatches,
            "episodes": r.episodes,
            "mean_return": r.mean_return,
        });
        outln!("{v}");
    } else {
        outln!(
            "{} on {}: {} envs, {} steps per env per dispatch: {:.3} G steps/s ({} steps in {:.3} s; {} episodes, mean return {:.2})",
            r.env,
            gpu.describe(),
            r.num_envs,
            r.steps_per_dispatch,
            sps / 1e9,
            r.steps,
            r.seconds,
            r.episodes,
            r.mean_return
        );
    }
    Ok(())
}

#[cfg(not(feature = "gpu"))]
pub fn train_ppo_gpu(
    _cfg: rlrig_learn::ppo::PpoConfig,
    _seeds: Vec<u64>,
    _o: GpuRunOptions,
) -> Result<Option<rlrig_learn::stop::Stop>> {
    bail!("{NO_GPU_BUILD}")
}

#[cfg(not(feature = "gpu"))]
const NO_GPU_BUILD: &str = "--device gpu: this build has no device-resident path; build with \
    `--features gpu` (cargo build --release --features gpu), or use --device cpu";

/// What the CLI passes the device run besides the config (unread in a build without
/// the `gpu` feature, which refuses `--device gpu` before using them).
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub struct GpuRunOptions {
    pub run_dir: std::path::PathBuf,
    pub eval_episodes: usize,
    pub threads: usize,
    pub quiet: bool,
    pub stop: rlrig_learn::stop::StopFlag,
    /// `--gpu-layout`, parsed by `rlrig_gpu::Tuning` (None: chosen by run count).
    pub layout: Option<String>,
}

#[cfg(feature = "gpu")]
pub fn train_ppo_gpu(
    cfg: rlrig_learn::ppo::PpoConfig,
    seeds: Vec<u64>,
    o: GpuRunOptions,
) -> Result<Option<rlrig_learn::stop::Stop>> {
    use anyhow::Context;
    use rlrig_gpu::{Gpu, ResidentPpo};
    use rlrig_learn::run::{RunDir, write_atomic};
    use std::time::Instant;

    rlrig_gpu::check(&cfg).map_err(|e| anyhow::anyhow!("--device gpu: {e}"))?;
    let layout = o
        .layout
        .as_deref()
        .map(str::parse::<rlrig_gpu::Tuning>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--gpu-layout: {e}"))?;
    let t_open = Instant::now();
    let gpu = Gpu::open().map_err(|e| anyhow::anyhow!("--device gpu: {e}"))?;
    let tuning = layout.unwrap_or_else(|| rlrig_gpu::Tuning::for_run(&gpu, seeds.len()));
    let mut ppo = ResidentPpo::new(&gpu, &cfg, &seeds, &tuning)
        .map_err(|e| anyhow::anyhow!("--device gpu (layout {tuning}): {e}"))?;
    let setup = t_open.elapsed().as_secs_f64();
    let iters = ppo.num_iterations();
    let steps_per_run = iters * cfg.batch_size() as u64;
    let dir = RunDir::new(&o.run_dir)?;
    dir.write_config_of("ppo", &cfg)?;

    let gpu_sampler = rlrig_lab::probe::GpuSampler::start(
        rlrig_lab::probe::Roots::default(),
        std::time::Duration::from_millis(200),
    );
    let bar = super::train::progress_bar(o.quiet, steps_per_run);
    let t0 = Instant::now();
    // About 100 host syncs per run, for the progress bar and Ctrl-C.
    let chunk = (iters / 100).max(1);
    let mut interrupted = None;
    while ppo.iteration() < iters {
        ppo.run(chunk)?;
        bar.set_position(ppo.iteration() * cfg.batch_size() as u64);
        let el = t0.elapsed().as_secs_f64();
        bar.set_message(format!(
            "{:.0} steps/s over {} runs",
            (ppo.iteration() * cfg.batch_size() as u64 * seeds.len() as u64) as f64 / el,
            seeds.len()
        ));
        if let Some(s) = o.stop.requested() {
            interrupted = Some(s);
            break;
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let done = ppo.iteration();
    let metrics = ppo.metrics()?;
    let agents = ppo.agents()?;

    // Greedy evaluation of every run in rlrig-env's own (f64) env, on the CPU.
    let t_eval = Instant::now();
    let offset = rlrig_learn::EVAL_SEED_OFFSET;
    let threads = o.threads.max(1).min(seeds.len());
    let per = seeds.len().div_ceil(threads);
    let evals: Vec<Vec<f64>> = if o.eval_episodes == 0 || interrupted.is_some() {
        vec![Vec::new(); seeds.len()]
    } else {
        std::thread::scope(|sc| {
            let handles: Vec<_> = agents
                .chunks(per)
                .zip(seeds.chunks(per))
                .map(|(ag, sd)| {
                    let cfg = &cfg;
                    sc.spawn(move || {
                        ag.iter()
                            .zip(sd)
                            .map(|(a, s)| {
                                rlrig_learn::ppo::evaluate(
                                    a,
                                    None,
                                    cfg,
                                    o.eval_episodes,
                                    s + offset,
                                )
                                .returns
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("evaluation does not panic"))
                .collect()
        })
    };
    let eval_s = t_eval.elapsed().as_secs_f64();

    // Run directory: config.toml, runs.json (per seed), metrics.csv, params.safetensors.
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let last_k = 10.min(done as usize);
    let train_return = |m: &[rlrig_gpu::IterStats]| {
        let tail = &m[m.len() - last_k..];
        let eps: f64 = tail.iter().map(|s| s.episodes).sum();
        let ret: f64 = tail
            .iter()
            .filter(|s| s.episodes > 0.0)
            .map(|s| s.mean_return * s.episodes)
            .sum();
        if eps > 0.0 { ret / eps } else { f64::NAN }
    };
    let runs: Vec<serde_json::Value> = seeds
        .iter()
        .zip(&metrics)
        .zip(&evals)
        .map(|((s, m), e)| {
            serde_json::json!({
                "seed": s,
                "train_return_last_10_iterations": train_return(m),
                "eval_returns": e,
                "eval_mean": if e.is_empty() { serde_json::Value::Null } else { mean(e).into() },
            })
        })
        .collect();
    let summary = serde_json::json!({
        "device": gpu.describe(),
        "runs": seeds.len(),
        "iterations": done,
        "steps_per_run": done * cfg.batch_size() as u64,
        "train_seconds": wall,
        "setup_seconds": setup,
        "eval_seconds": eval_s,
        "interrupted": interrupted.map(|s| s.signal_name()),
        "per_run": runs,
    });
    write_atomic(
        &o.run_dir.join("runs.json"),
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )?;
    let mut csv = String::from(
        "seed,iteration,global_step,episodes,mean_return,mean_length,pg_loss,v_loss,entropy,approx_kl,clipfrac\n",
    );
    for (s, m) in seeds.iter().zip(&metrics) {
        for (i, r) in m.iter().enumerate() {
            csv += &format!(
                "{s},{},{},{},{},{},{},{},{},{},{}\n",
                i + 1,
                (i as u64 + 1) * cfg.batch_size() as u64,
                r.episodes,
                r.mean_return,
                r.mean_length,
                r.pg_loss,
                r.v_loss,
                r.entropy,
                r.approx_kl,
                r.clipfrac
            );
        }
    }
    write_atomic(&o.run_dir.join("metrics.csv"), csv.as_bytes())?;
    let flat: Vec<f32> = agents
        .iter()
        .flat_map(|a| a.params.iter().copied())
        .collect();
    let bytes: &[u8] = bytemuck::cast_slice(&flat);
    let tensor = safetensors::tensor::TensorView::new(
        safetensors::Dtype::F32,
        vec![seeds.len(), agents[0].params.len()],
        bytes,
    )
    .context("params tensor")?;
    let mut meta = std::collections::HashMap::new();
    meta.insert(
        "seeds".to_string(),
        serde_json::to_string(&seeds).expect("numbers"),
    );
    meta.insert(
        "layout".to_string(),
        "rlrig_learn::ppo::Agent::params (critic, then actor)".to_string(),
    );
    let st = safetensors::serialize([("params", tensor)], Some(meta)).context("params")?;
    write_atomic(&o.run_dir.join("params.safetensors"), &st)?;

    // Report.
    let total_steps = done * cfg.batch_size() as u64 * seeds.len() as u64;
    outln!(
        "{} ppo on {} (device-resident, layout {}): {} run{} x {} steps in {:.2} s ({:.0} steps/s over all runs, {:.2} runs/s; setup {:.2} s)",
        cfg.env,
        gpu.describe(),
        ppo.tuning,
        seeds.len(),
        if seeds.len() == 1 { "" } else { "s" },
        done * cfg.batch_size() as u64,
        wall,
        total_steps as f64 / wall,
        seeds.len() as f64 / wall,
        setup
    );
    let mut finals: Vec<f64> = metrics.iter().map(|m| train_return(m)).collect();
    finals.sort_by(f64::total_cmp);
    if seeds.len() == 1 {
        outln!(
            "training return (last {last_k} iterations): {:.1}",
            finals[0]
        );
    } else {
        outln!(
            "training return (last {last_k} iterations) over runs: min {:.1}, median {:.1}, max {:.1}",
            finals[0],
            finals[finals.len() / 2],
            finals[finals.len() - 1]
        );
    }
    if interrupted.is_none() && o.eval_episodes > 0 {
        let mut means: Vec<f64> = evals.iter().map(|e| mean(e)).collect();
        means.sort_by(f64::total_cmp);
        if seeds.len() == 1 {
            let e = &evals[0];
            let m = mean(e);
            let sd = (e.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / e.len() as f64).sqrt();
            outln!(
                "evaluation over {} episodes (rlrig-env, CPU): mean return {m:.1} ± {sd:.1}",
                e.len()
            );
        } else {
            outln!(
                "evaluation over {} episodes per run (rlrig-env, CPU, {eval_s:.2} s): mean return over runs min {:.1}, median {:.1}, mean {:.1}, max {:.1}",
                o.eval_episodes,
                means[0],
                means[means.len() / 2],
                mean(&means),
                means[means.len() - 1]
            );
        }
    }
    for l in rlrig_lab::verdict::gpu_lines(
        &gpu_sampler.finish(),
        &format!(
            "gpu: no NVIDIA/AMD GPU activity sampled (the runs trained on {})",
            gpu.describe()
        ),
    ) {
        outln!("{l}");
    }
    if let Some(s) = interrupted {
        outln!(
            "interrupted by {} after iteration {done} of {iters}: parameters written to params.safetensors (device runs do not resume yet)",
            s.signal_name()
        );
    }
    outln!("run directory: {}", o.run_dir.display());
    if done < iters && interrupted.is_none() {
        bail!("device run ended at iteration {done} of {iters}");
    }
    Ok(interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seed_lists() {
        assert_eq!(parse_seeds("1-4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_seeds("7").unwrap(), vec![7]);
        assert_eq!(parse_seeds("1,5, 9").unwrap(), vec![1, 5, 9]);
        assert_eq!(parse_seeds("1-2,10-11").unwrap(), vec![1, 2, 10, 11]);
        for bad in ["", "a", "3-1", "1-", "1,1", "1-3,2", "0-70000", "-1"] {
            assert!(parse_seeds(bad).is_err(), "{bad} parsed");
        }
    }

    proptest! {
        #[test]
        fn ranges_parse_to_their_members(lo in 0u64..1_000_000, n in 1u64..2000, extra in 2_000_000u64..3_000_000) {
            let list = format!("{lo}-{},{extra}", lo + n - 1);
            let s = parse_seeds(&list).unwrap();
            prop_assert_eq!(s.len() as u64, n + 1);
            prop_assert_eq!(s[0], lo);
            prop_assert_eq!(*s.last().unwrap(), extra);
        }

        #[test]
        fn anything_parses_or_errors_without_panic(text in ".{0,20}") {
            let _ = parse_seeds(&text);
        }
    }
}
