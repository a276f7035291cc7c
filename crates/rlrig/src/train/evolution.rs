//! `rlrig train es|ga`: flags, config, MPI ranks and the run summary.

use anyhow::{Context, Result, bail};
use clap::Args;

use super::*;

#[derive(Args)]
pub struct EvoArgs {
    #[command(flatten)]
    pub(crate) env: EnvFlags,
    /// Members per generation.
    #[arg(long)]
    pub(crate) population: Option<usize>,
    #[arg(long)]
    pub(crate) generations: Option<u64>,
    /// Episodes averaged into each member's fitness.
    #[arg(long)]
    pub(crate) episodes_per_member: Option<usize>,
    /// GA only: evolve connection masks of a fixed network (mutation removes links).
    #[arg(long)]
    pub(crate) prune: bool,
    /// Threads evaluating members (results do not depend on it).
    #[arg(long, default_value_t = default_threads())]
    pub(crate) threads: usize,
    /// Episodes of the final evaluation of the deployed policy (ES centre, GA elite).
    #[arg(long, default_value_t = 10)]
    pub(crate) eval_episodes: usize,
    #[command(flatten)]
    pub(crate) run: RunFlags,
}

pub(super) fn train_evolution_cli(a: EvoArgs, method: Method) -> Result<Option<Stop>> {
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if a.prune && method == Method::Es {
        bail!("--prune is a GA option: use `rlrig train ga --prune`");
    }
    let mut flags = int_flags(&[
        ("seed", a.run.seed),
        ("population", a.population.map(|n| n as u64)),
        ("generations", a.generations),
        (
            "episodes_per_member",
            a.episodes_per_member.map(|n| n as u64),
        ),
    ]);
    if a.prune {
        flags.push(("prune", toml::Value::Boolean(true)));
    }
    let algo = if method == Method::Es { "es" } else { "ga" };
    let src = Sources::of_env_run(&a.env, &a.run, algo, flags);
    let cfg: EvoConfig = resolve_from(
        &src,
        "CartPole-v1",
        |e| Ok(rlrig_env::spec(e).map(|_| ())?),
        |env| toml::Table::try_from(EvoConfig::for_env(method, env)).context("default config"),
    )?;
    if cfg.method != method {
        bail!("config: method does not match this command");
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("config: {e}"))?;
    let name = if method == Method::Es { "es" } else { "ga" };
    let run_dir = run_dir_for(&a.run.run_dir, &cfg.env, name, cfg.seed);
    let ranks = crate::mpi_support::ranks(&serde_json::to_string(&cfg)?)?;
    let (rank, size) = (ranks.rank, ranks.size);
    let opts = TrainOptions {
        collective: ranks.collective.clone(),
        ..TrainOptions::new(
            run_dir.clone(),
            a.threads,
            a.run.resume,
            a.eval_episodes,
            stop_on_signals()?,
        )
    };
    // Rank 0 reports; the others work quietly.
    let bar = progress_bar(a.run.quiet || rank != 0, cfg.generations);
    let summary = driver::train(
        cfg,
        &opts,
        |r: &rlrig_learn::driver::Report<'_, rlrig_learn::evolution::Evolution>| {
            let (s, gps) = (r.stats, r.rate);
            bar.set_position(s.generation);
            bar.set_message(format!(
                "{gps:.1} generations/s, best {:.1}, mean {:.1}, {} {:.1}",
                s.best_fitness,
                s.mean_fitness,
                if method == Method::Es {
                    "centre"
                } else {
                    "elite"
                },
                s.center_fitness
            ));
        },
    )?;
    if !run_ended(&bar, rank, &summary, "generation")? {
        return Ok(summary.interrupted);
    }
    let c = &summary.alg.cfg;
    outln!(
        "{} {name}{}: {} generations of {} members x {} episodes in {:.2} s ({:.2} s per generation, {} threads x {size} ranks); last generation: best {:.1}, mean {:.1}",
        c.env,
        if c.prune { " (pruning)" } else { "" },
        summary.work,
        c.population,
        c.episodes_per_member,
        summary.wall,
        summary.wall / summary.work.max(1) as f64,
        a.threads,
        summary.last.best_fitness,
        summary.last.mean_fitness
    );
    let deployed = if method == Method::Es {
        "centre"
    } else {
        "elite"
    };
    outln!(
        "{}",
        eval_line(
            &summary.eval,
            &format!(" of the {deployed}"),
            summary.interrupted.is_some(),
        )
    );
    end_run(
        summary.interrupted,
        &format!("after generation {}", summary.alg.generation),
        name,
        &run_dir,
    )
}
