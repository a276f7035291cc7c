//! `rlrig train alphazero`: flags, config and the run summary.

use anyhow::Result;
use clap::Args;

use super::*;

#[derive(Args)]
pub struct AzArgs {
    /// Game id (ConnectFour).
    #[arg(long)]
    pub(crate) env: Option<String>,
    /// Self-play + training iterations.
    #[arg(long)]
    pub(crate) iterations: Option<u64>,
    /// Simulations per search.
    #[arg(long)]
    pub(crate) simulations: Option<usize>,
    /// Concurrent self-play games (the batch of every network call).
    #[arg(long)]
    pub(crate) games: Option<usize>,
    /// Where the network runs: `cpu` (the native path), `burn-cpu` or `wgpu` (any
    /// Vulkan/Metal/DX12 GPU; needs a build with `--features burn`).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub(crate) device: Device,
    #[command(flatten)]
    pub(crate) run: RunFlags,
}

pub(super) fn train_alphazero_cli(a: AzArgs) -> Result<Option<Stop>> {
    let device = device_maker(a.device)?;
    let cfg = resolve_alphazero(&a)?;
    let run_dir = run_dir_for(&a.run.run_dir, &cfg.env, "alphazero", cfg.seed);
    let opts = TrainOptions {
        device,
        ..TrainOptions::new(run_dir.clone(), 1, a.run.resume, 0, stop_on_signals()?)
    };
    let bar = progress_bar(a.run.quiet, cfg.iterations);
    let depth = cfg.eval_depth;
    let summary = driver::train::<rlrig_learn::alphazero::AlphaZero>(cfg, &opts, |r| {
        let (s, sps) = (r.stats, r.rate);
        bar.set_position(s.iteration);
        bar.set_message(format!(
            "{sps:.0} samples/s, losses {:.3}/{:.3}, vs random {:.0}%, vs solver:{depth} {:.0}% won {:.0}% lost",
            s.policy_loss,
            s.value_loss,
            100.0 * s.win_rate_random,
            100.0 * s.win_rate_solver,
            100.0 * s.loss_rate_solver
        ));
    })?;
    run_ended(&bar, 0, &summary, "iteration")?;
    let t = summary.alg.times;
    let s = &summary.last;
    let config = &summary.alg.cfg;
    outln!(
        "{} alphazero on {}: {} iterations, {} self-play samples in {:.2} s ({:.0} samples/s, {} simulations, {} games in lock-step)",
        config.env,
        summary.alg.device(),
        summary.alg.iteration,
        summary.work,
        summary.wall,
        summary.work as f64 / summary.wall,
        config.simulations,
        config.games
    );
    if config.eval_games == 0 {
        outln!("evaluation: none (eval_games = 0)");
    } else if s.win_rate_random.is_nan() {
        // Only a stopped run ends on an iteration without an evaluation.
        outln!("{}", eval_line(&None, "", true));
    } else {
        outln!(
            "evaluation ({} games each): vs random {:.0}% won; vs solver:{} {:.0}% won, {:.0}% lost",
            config.eval_games,
            100.0 * s.win_rate_random,
            config.eval_depth,
            100.0 * s.win_rate_solver,
            100.0 * s.loss_rate_solver
        );
    }
    let pct = |x: f64| 100.0 * x / summary.wall;
    outln!(
        "time: search {:.2} s ({:.0}%), inference {:.2} s ({:.0}%), learner {:.2} s ({:.0}%), evaluation {:.2} s ({:.0}%)",
        t.search,
        pct(t.search),
        t.inference,
        pct(t.inference),
        t.learner,
        pct(t.learner),
        t.eval,
        pct(t.eval)
    );
    end_run(
        summary.interrupted,
        &format!("after iteration {}", summary.alg.iteration),
        "alphazero",
        &run_dir,
    )
}
