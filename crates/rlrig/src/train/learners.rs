//! `rlrig train ppo|a2c|impala|ddpg|td3|sac|dqn` on the CPU or a Burn device: the run,
//! its Prometheus endpoint, and the summary with the stage breakdown and verdict.

use anyhow::{Context, Result, bail};

use super::*;
use rlrig_learn::ppo::Collection;

pub(super) fn train_replay_cli<R: rlrig_learn::replay::Replay>(
    a: PpoArgs,
    cfg: R::Config,
) -> Result<Option<Stop>> {
    let shape = R::shape(&cfg);
    let (algo, total) = (shape.algo, shape.budget);
    if a.seeds.is_some() {
        bail!("--seeds with --device gpu: only `rlrig train ppo` runs on the GPU");
    }
    if a.gpu_layout.is_some() {
        bail!("--gpu-layout: only `rlrig train ppo` runs on --device gpu");
    }
    if a.metrics_addr.is_some() || a.trace.is_some() {
        bail!(
            "--metrics-addr and --trace are not available for {} yet (ppo only)",
            algo
        );
    }
    let run_dir = run_dir_for(&a.run.run_dir, shape.env, algo, shape.seed);
    let (opts, cpu, gpu, ranks) = cpu_run(&a, &run_dir, &serde_json::to_string(&cfg)?)?;
    let bar = progress_bar(a.run.quiet || ranks.rank != 0, total);
    let summary = driver::train::<R>(cfg, &opts, |p| {
        bar.set_position(p.stats.global_step);
        bar.set_message(format!(
            "{:.0} steps/s, {} updates, return {:.1}",
            p.rate, p.stats.updates, p.recent_return
        ));
    })?;
    if !run_ended(&bar, ranks.rank, &summary, "step")? {
        return Ok(summary.interrupted);
    }
    let (r, steps) = (&summary.alg, summary.work);
    let shape = R::shape(r.config());
    outln!(
        "{} {} on {}: {steps} steps, {} updates in {:.2} s ({:.0} steps/s, {:.0} updates/s); {}",
        shape.env,
        algo,
        ranks.device(&r.device()),
        r.updates(),
        summary.wall,
        steps as f64 / summary.wall,
        r.updates() as f64 / r.times().learner.max(1e-9),
        eval_line(&summary.eval, "", summary.interrupted.is_some())
    );
    report_times(
        summary.wall,
        r.times(),
        shape.num_envs,
        a.threads,
        &r.device(),
        &cpu,
        gpu,
    )?;
    end_run(
        summary.interrupted,
        &format!("at step {}", r.global_step()),
        algo,
        &run_dir,
    )
}

/// Prints the stage breakdown, core and GPU use and the verdict of a run.
fn report_times(
    wall: f64,
    t: rlrig_learn::trace::StageTimes,
    num_envs: usize,
    threads: usize,
    device: &str,
    cpu: &rlrig_lab::verdict::CpuSampler,
    gpu: rlrig_lab::probe::GpuSampler,
) -> Result<()> {
    let gpus = gpu.finish();
    for l in rlrig_lab::verdict::time_report(wall, t, num_envs, threads, device, cpu, &gpus) {
        outln!("{l}");
    }
    Ok(())
}

/// PPO and the algorithms on its machinery: `label` is "ppo", "a2c" or "impala".
pub(super) fn train_ppo_cli(a: PpoArgs, label: &str) -> Result<Option<Stop>> {
    let cfg = resolve_config(&a, label)?;
    if a.gpu_layout.is_some() && a.device != Device::Gpu {
        bail!(
            "--gpu-layout lays out the kernels of --device gpu; this run is on --device cpu or Burn"
        );
    }
    if a.device == Device::Gpu {
        if label != "ppo" || a.run.resume || a.metrics_addr.is_some() || a.trace.is_some() {
            bail!(
                "--device gpu runs `rlrig train ppo` without --resume, --metrics-addr or --trace for now"
            );
        }
        let seeds = a.seeds.clone().map_or_else(|| vec![cfg.seed], |s| s.0);
        let run_dir = crate::embed::remember(a.run.run_dir.clone().unwrap_or_else(|| {
            PathBuf::from(format!(
                "runs/{}-ppo-gpu-seeds{}-{}",
                cfg.env.replace('/', "-"),
                seeds[0],
                seeds[seeds.len() - 1]
            ))
        }));
        let cfg = PpoConfig {
            seed: seeds[0],
            ..cfg
        };
        return crate::train_gpu::train_ppo_gpu(
            cfg,
            seeds,
            crate::train_gpu::GpuRunOptions {
                run_dir,
                eval_episodes: a.eval_episodes,
                threads: a.threads,
                quiet: a.run.quiet,
                stop: stop_on_signals()?,
                layout: a.gpu_layout.clone(),
            },
        );
    }
    let run_dir = run_dir_for(&a.run.run_dir, &cfg.env, label, cfg.seed);
    let (opts, cpu, gpu, ranks) = cpu_run(&a, &run_dir, &serde_json::to_string(&cfg)?)?;
    let metrics = match &a.metrics_addr {
        _ if ranks.rank != 0 => None,
        None => None,
        Some(addr) => {
            let addr = rlrig_lab::metrics::parse_addr(addr)?;
            let server = rlrig_lab::metrics::MetricsServer::start(addr)
                .with_context(|| format!("--metrics-addr {addr}: cannot listen"))?;
            eprintln!("metrics: http://{}/metrics", server.local_addr());
            Some(server)
        }
    };
    let labels = format!("env=\"{}\",algo=\"{label}\"", cfg.env);
    let total = cfg.num_iterations() * cfg.batch_size() as u64;
    let bar = progress_bar(a.run.quiet || ranks.rank != 0, total);
    let summary = driver::train::<Ppo>(cfg, &opts, |p| {
        bar.set_position(p.stats.global_step);
        bar.set_message(format!(
            "{:.0} steps/s, return {:.1}",
            p.rate, p.recent_return
        ));
        if let Some(server) = &metrics {
            server.update(rlrig_lab::metrics::training(
                &labels,
                p,
                &cpu,
                &gpu.latest(),
            ));
        }
    })?;
    if !run_ended(&bar, ranks.rank, &summary, "step")? {
        return Ok(summary.interrupted);
    }
    let ppo = &summary.alg;
    if let (Some(lag), Collection::Async { actors, server }) =
        (ppo.mean_policy_lag(), ppo.cfg.collection())
    {
        let server = server
            .then_some(&ppo.server_stats)
            .map_or(String::new(), |s| {
                format!(
                    "; inference server: {} calls, mean batch {:.1} rows ({:.2} actors per call)",
                    s.calls,
                    s.mean_batch(),
                    s.requests as f64 / s.calls.max(1) as f64
                )
            });
        outln!(
            "asynchronous actors: {actors}, mean policy lag {lag:.2} updates{server} (not reproducible)"
        );
    }
    let steps = summary.work;
    outln!(
        "{} {label} on {}: {steps} steps in {:.2} s ({:.0} steps/s); {}",
        ppo.cfg.env,
        ranks.device(&ppo.device()),
        summary.wall,
        steps as f64 / summary.wall,
        eval_line(&summary.eval, "", summary.interrupted.is_some())
    );
    report_times(
        summary.wall,
        ppo.times,
        ppo.cfg.num_envs,
        a.threads,
        &ppo.device(),
        &cpu,
        gpu,
    )?;
    if let Some(p) = &a.trace {
        outln!("trace: {} (open in ui.perfetto.dev)", p.display());
    }
    end_run(
        summary.interrupted,
        &format!("at step {}", ppo.global_step),
        label,
        &run_dir,
    )
}

/// The options of a run of `a` in `run_dir` (the replay learners refuse --trace
/// before this), the CPU and GPU samplers its summary reports from, and the MPI ranks
/// it joins when started by mpirun (`config_json`: the resolved config, which every
/// rank must share).
fn cpu_run(
    a: &PpoArgs,
    run_dir: &std::path::Path,
    config_json: &str,
) -> Result<(
    TrainOptions,
    rlrig_lab::verdict::CpuSampler,
    rlrig_lab::probe::GpuSampler,
    crate::mpi_support::Ranks,
)> {
    let ranks = crate::mpi_support::ranks(config_json)?;
    let opts = TrainOptions {
        collective: ranks.collective.clone(),
        trace: a.trace.clone(),
        trace_iterations: a.trace_iterations,
        device: device_maker(a.device)?,
        ..TrainOptions::new(
            run_dir.to_path_buf(),
            a.threads,
            a.run.resume,
            a.eval_episodes,
            stop_on_signals()?,
        )
    };
    let gpu = rlrig_lab::probe::GpuSampler::start(
        rlrig_lab::probe::Roots::default(),
        std::time::Duration::from_millis(200),
    );
    Ok((opts, rlrig_lab::verdict::CpuSampler::start(), gpu, ranks))
}
