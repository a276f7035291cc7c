//! `rlrig eval` and `rlrig play`: a saved run (or a baseline policy) on fresh
//! episodes, an AlphaZero run against an opponent, episodes drawn as a GIF.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use rlrig_learn::alphazero::{Opponent, play_match};
use rlrig_learn::saved::{RunKind, eval_run};

#[derive(Args)]
pub struct EvalArgs {
    /// Run directory of a `rlrig train` run.
    #[arg(long, required_unless_present = "env", conflicts_with = "env")]
    run: Option<PathBuf>,
    /// Evaluate a baseline policy on this env instead of a run (with --policy).
    #[arg(long, requires = "policy")]
    env: Option<String>,
    /// Baseline policy for --env: `random` (uniform over the action space) or
    /// `heuristic` (where the reference has one). Prints return and length statistics,
    /// to compare env statistics with the reference.
    #[arg(long, requires = "env")]
    policy: Option<String>,
    /// Env parameter for --env, as `gym.make(id, KEY=VALUE)` (repeatable); a run is
    /// evaluated with the env_args it trained with.
    #[arg(long = "env-arg", value_name = "KEY=VALUE", requires = "env", value_parser = crate::cli_envs::parse_env_arg)]
    env_args: Vec<(String, String)>,
    #[arg(long, default_value_t = 10)]
    episodes: usize,
    /// Seed of the evaluation episodes (default: the run's seed + 1000003).
    #[arg(long)]
    seed: Option<u64>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// AlphaZero runs: the opponent, `random`, `solver:DEPTH` (depth-limited negamax;
    /// `solver:0` plays perfectly but is slow in the opening) or `run:DIR` (another run).
    #[arg(long, default_value = "solver:2")]
    opponent: String,
    /// AlphaZero runs: games to play (half with the agent moving first).
    #[arg(long, default_value_t = 100)]
    games: usize,
    /// AlphaZero runs: simulations per agent move (default: the run's eval_simulations).
    #[arg(long)]
    simulations: Option<usize>,
}

fn eval_alphazero(a: &EvalArgs) -> Result<()> {
    let run = a.run.clone().expect("checked by eval");
    let (cfg, net) = rlrig_learn::saved::load_alphazero(&run)?;
    if a.games == 0 {
        bail!("--games must be at least 1");
    }
    let sims = a.simulations.unwrap_or(cfg.eval_simulations);
    if sims == 0 {
        bail!("--simulations must be at least 1");
    }
    rlrig_learn::alphazero::search_memory(a.games, sims)
        .check("the evaluation", "--games or --simulations")?;
    let seed = a.seed.unwrap_or(cfg.seed + rlrig_learn::EVAL_SEED_OFFSET);
    let m = if let Some(other) = a.opponent.strip_prefix("run:") {
        let (_, net2) = rlrig_learn::saved::load_alphazero(std::path::Path::new(other))
            .with_context(|| format!("--opponent {}", a.opponent))?;
        rlrig_learn::alphazero::play_nets(&net, &net2, &cfg, sims, a.games, seed)
    } else {
        let op: Opponent = a.opponent.parse().map_err(anyhow::Error::msg)?;
        play_match(&net, &cfg, sims, op, a.games, seed)
    };
    if a.json {
        let v = serde_json::json!({
            "opponent": a.opponent, "games": m.games, "wins": m.wins, "draws": m.draws,
            "losses": m.losses, "win_rate": m.win_rate(), "loss_rate": m.loss_rate(),
            "simulations": sims, "seed": seed,
        });
        outln!("{v}");
    } else {
        outln!(
            "{} games against {}: {} won, {} drawn, {} lost ({:.0}% won, {} simulations per move)",
            m.games,
            a.opponent,
            m.wins,
            m.draws,
            m.losses,
            100.0 * m.win_rate(),
            sims
        );
    }
    Ok(())
}

/// Baseline statistics of `--policy` on `--env`.
fn eval_baseline(a: &EvalArgs, env: &str, policy: &str) -> Result<()> {
    let n = a.episodes;
    let seed = a.seed.unwrap_or(0);
    rlrig_learn::memory::evaluation(env, n).check("the evaluation", "--episodes")?;
    let mut p = rlrig_learn::eval::baseline(env, policy, n, seed)?;
    let args: rlrig_learn::EnvArgs = a.env_args.iter().cloned().collect();
    rlrig_learn::check_env(env, &args)?;
    let e = rlrig_learn::eval::run_episodes(p.as_mut(), env, &args, n, seed);
    let s = rlrig_learn::eval::EvalSummary::of(&e, seed);
    if a.json {
        let j = serde_json::json!({
            "env": env, "env_args": args,
            "policy": policy, "episodes": n, "mean_return": s.mean_return, "std_return": s.std_return,
            "mean_length": s.mean_length, "std_length": s.std_length, "seed": seed,
        });
        outln!("{j}");
    } else {
        outln!(
            "{env}, {policy} policy, {n} episodes: return {:.2} ± {:.2}, length {:.1} ± {:.1}",
            s.mean_return,
            s.std_return,
            s.mean_length,
            s.std_length
        );
    }
    Ok(())
}

pub fn eval(a: EvalArgs) -> Result<()> {
    if a.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let run = match (&a.run, &a.env, &a.policy) {
        (_, Some(env), Some(policy)) => return eval_baseline(&a, env, policy),
        (Some(run), _, _) => run.clone(),
        _ => bail!("give --run DIR, or --env ID with --policy random|heuristic"),
    };
    if RunKind::of(&run)? == RunKind::AlphaZero {
        return eval_alphazero(&a);
    }
    let s = eval_run(&run, a.episodes, a.seed)?;
    if a.json {
        outln!("{}", serde_json::to_string(&s)?);
    } else {
        outln!(
            "{} episodes: mean return {:.2}, std {:.2}, min {:.2}, max {:.2}; length {:.1} ± {:.1}",
            s.episodes,
            s.mean_return,
            s.std_return,
            s.min_return,
            s.max_return,
            s.mean_length,
            s.std_length
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct PlayArgs {
    /// Run directory of a `rlrig train` run.
    #[arg(long)]
    run: PathBuf,
    /// Write the episodes as an animated GIF here (required except for AlphaZero runs,
    /// which are played in the terminal).
    #[arg(long, value_name = "FILE.gif")]
    gif: Option<PathBuf>,
    /// AlphaZero runs: the agent moves first.
    #[arg(long)]
    agent_first: bool,
    /// AlphaZero runs: simulations per agent move (default: the run's eval_simulations).
    #[arg(long)]
    simulations: Option<usize>,
    #[arg(long, default_value_t = 1)]
    episodes: usize,
    /// Seed of the first episode (default: the run's seed + 1000003).
    #[arg(long)]
    seed: Option<u64>,
    /// At most this many frames per episode (long episodes are subsampled).
    #[arg(long, default_value_t = 250)]
    max_frames: usize,
}

/// A game against an AlphaZero run in the terminal: columns 1-7 from stdin, `q` quits.
fn play_alphazero(a: &PlayArgs) -> Result<()> {
    use rlrig_env::games::{ConnectFour, Game, Outcome};
    use std::io::BufRead;
    let (cfg, net) = rlrig_learn::saved::load_alphazero(&a.run)?;
    let sims = a.simulations.unwrap_or(cfg.eval_simulations).max(1);
    let mut mcts = rlrig_learn::mcts::BatchedMcts::<ConnectFour>::new(cfg.mcts(sims));
    let mut eval = net.evaluator();
    let mut p = ConnectFour::new();
    let mut agent_turn = a.agent_first;
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut rng = rlrig_env::Rng::stream(cfg.seed, rlrig_env::Purpose::User, 0);
    outln!(
        "You are {}. Enter a column 1-7 (q quits).",
        if a.agent_first { "O" } else { "X" }
    );
    loop {
        outln!("{}", p.render());
        let col = if agent_turn {
            mcts.search(&[p], std::slice::from_mut(&mut rng), false, &mut eval);
            let c = mcts.action(0, 0.0, &mut rng);
            outln!("agent plays {} (value {:+.2})", c + 1, mcts.value(0));
            c
        } else {
            loop {
                let Some(line) = lines.next() else {
                    outln!("input ended");
                    return Ok(());
                };
                let line = line?;
                let t = line.trim();
                if t == "q" {
                    return Ok(());
                }
                match t.parse::<usize>() {
                    Ok(c) if (1..=7).contains(&c) && p.can_play(c - 1) => break c - 1,
                    _ => outln!("'{t}' is not a playable column (1-7)"),
                }
            }
        };
        match p.play(col) {
            Outcome::Ongoing => agent_turn = !agent_turn,
            o => {
                outln!("{}", p.render());
                outln!(
                    "{}",
                    match (o, agent_turn) {
                        (Outcome::Draw, _) => "draw",
                        (_, true) => "the agent wins",
                        _ => "you win",
                    }
                );
                return Ok(());
            }
        }
    }
}

pub fn play(a: PlayArgs) -> Result<()> {
    if RunKind::of(&a.run)? == RunKind::AlphaZero {
        return play_alphazero(&a);
    }
    let Some(gif) = a.gif.clone() else {
        bail!(
            "--gif FILE.gif is required for {} (only AlphaZero runs play in the terminal)",
            a.run.display()
        );
    };
    if a.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let (env, recs) = rlrig_learn::saved::record_episodes(&a.run, a.episodes, a.seed)?;
    let eps: Vec<(Vec<Vec<f64>>, Vec<f64>)> =
        recs.into_iter().map(|r| (r.states, r.returns)).collect();
    rlrig_lab::render::episodes_gif(&gif, &env, &eps, a.max_frames)?;
    for (i, (s, r)) in eps.iter().enumerate() {
        outln!(
            "episode {}: {} steps, return {:.1}",
            i + 1,
            s.len() - 1,
            r.last().copied().unwrap_or(0.0)
        );
    }
    outln!("gif: {}", gif.display());
    Ok(())
}
