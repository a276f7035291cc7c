//! Learning tests: fixed seeds, small budgets, the agent must reach a score.
//! Run in release (`scripts/test.sh` does); each takes seconds there.

use rlrig_learn::offpolicy::{Algo, OffPolicy, OffPolicyConfig};
use rlrig_learn::ppo::{Ppo, PpoConfig};

/// Trains `cfg` and asserts that its greedy evaluation's mean return is at least `floor`.
fn reaches(cfg: PpoConfig, floor: f64) {
    let what = format!("{} {}", cfg.algo.name(), cfg.env);
    let mut ppo = Ppo::new(cfg, 2).unwrap();
    while !ppo.done() {
        ppo.iterate();
    }
    let returns = ppo.evaluate(20, 12_345).returns;
    let mean = returns.iter().sum::<f64>() / returns.len() as f64;
    assert!(mean >= floor, "{what}: mean evaluation return {mean}");
}

#[test]
fn ppo_solves_cartpole_within_500k_steps() {
    reaches(PpoConfig::for_env("CartPole-v1"), 475.0);
}

#[test]
fn ppo_solves_acrobot() {
    reaches(PpoConfig::for_env("Acrobot-v1"), -100.0);
}

/// The LunarLander preset (RL Zoo's settings) lands: seed 3 after 1M of its 2M steps
/// (CleanRL's defaults, the preset before it: -143 after 1M).
#[test]
fn ppo_lands_lunarlander_with_its_preset() {
    reaches(
        PpoConfig {
            seed: 3,
            total_steps: 1_000_000,
            ..PpoConfig::for_env("LunarLander-v3")
        },
        200.0,
    );
}

/// The LunarLanderContinuous preset (RL Zoo's) lands seed 4, on which CleanRL's
/// continuous defaults reach 109 after the same 1M steps.
#[test]
fn ppo_lands_lunarlander_continuous_with_its_preset() {
    reaches(
        PpoConfig {
            seed: 4,
            ..PpoConfig::for_env("LunarLanderContinuous-v3")
        },
        200.0,
    );
}

/// The MountainCar preset (RL Zoo's, with observation and reward normalisation)
/// reaches the flag in about 110 steps; without it PPO never does (-200).
#[test]
fn ppo_reaches_the_mountaincar_flag_with_its_preset() {
    reaches(PpoConfig::for_env("MountainCar-v0"), -130.0);
}

#[test]
fn ppo_continuous_swings_up_pendulum() {
    reaches(PpoConfig::for_env("Pendulum-v1"), -300.0);
}

/// Trains an off-policy agent and returns its greedy evaluation over 10 episodes.
fn train_offpolicy(cfg: OffPolicyConfig) -> f64 {
    let mut r = OffPolicy::new(cfg, 2).unwrap();
    let t = std::time::Instant::now();
    while !r.done() {
        let s = r.iterate();
        eprintln!(
            "{:?} step {} return {:.1} qf {:.3} actor {:.3} alpha {:.3}",
            r.cfg.algo, s.global_step, s.episode_return, s.qf_loss, s.actor_loss, s.alpha
        );
    }
    let ret = r.evaluate(10, 1_000_003).returns.iter().sum::<f64>() / 10.0;
    eprintln!(
        "{:?}: eval {ret:.1} in {:.1} s ({} updates)",
        r.cfg.algo,
        t.elapsed().as_secs_f64(),
        r.updates
    );
    ret
}

/// The algorithm's Pendulum preset (20k steps) reaches -250.
fn swings_up_pendulum(algo: Algo) {
    let ret = train_offpolicy(OffPolicyConfig::for_env(algo, "Pendulum-v1"));
    assert!(ret >= -250.0, "{algo:?} Pendulum-v1 eval return {ret}");
}

#[test]
fn td3_swings_up_pendulum_within_20k_steps() {
    swings_up_pendulum(Algo::Td3);
}

#[test]
fn sac_swings_up_pendulum_within_20k_steps() {
    swings_up_pendulum(Algo::Sac);
}

#[test]
fn ddpg_swings_up_pendulum_within_20k_steps() {
    swings_up_pendulum(Algo::Ddpg);
}

fn evolve(cfg: rlrig_learn::evolution::EvoConfig) -> (Vec<rlrig_learn::evolution::GenStats>, f64) {
    use rlrig_learn::evolution::Evolution;
    let mut e = Evolution::new(cfg, 2).unwrap();
    let t = std::time::Instant::now();
    let mut stats = Vec::new();
    while !e.done() {
        let s = e.step();
        eprintln!(
            "{:?} gen {} best {:.1} mean {:.1} center {:.1}",
            e.cfg.method, s.generation, s.best_fitness, s.mean_fitness, s.center_fitness
        );
        stats.push(s);
    }
    let env = e.cfg.env.clone();
    let ret = e
        .policy
        .run(&env, &e.cfg.env_args, &e.best_params(), 20, 12_345)
        .mean_return();
    eprintln!(
        "{:?} {}: final {ret:.1} in {:.1} s",
        e.cfg.method,
        env,
        t.elapsed().as_secs_f64()
    );
    (stats, ret)
}

#[test]
fn es_solves_cartpole() {
    use rlrig_learn::evolution::{EvoConfig, Method};
    let (_, ret) = evolve(EvoConfig::for_env(Method::Es, "CartPole-v1"));
    assert!(ret >= 475.0, "ES CartPole-v1: {ret}");
}

#[test]
fn es_swings_up_pendulum() {
    use rlrig_learn::evolution::{EvoConfig, Method};
    let (_, ret) = evolve(EvoConfig::for_env(Method::Es, "Pendulum-v1"));
    assert!(ret >= -300.0, "ES Pendulum-v1: {ret}");
}

#[test]
fn pruning_ga_improves_cartpole() {
    use rlrig_learn::evolution::{EvoConfig, Method};
    let cfg = EvoConfig {
        prune: true,
        generations: 20,
        ..EvoConfig::for_env(Method::Ga, "CartPole-v1")
    };
    let (stats, _) = evolve(cfg);
    let first = stats[0].mean_fitness;
    let last = stats.last().unwrap().mean_fitness;
    assert!(last > first + 50.0, "mean fitness {first} -> {last}");
}

#[test]
fn a2c_solves_cartpole_within_500k_steps() {
    reaches(PpoConfig::a2c_for_env("CartPole-v1"), 475.0);
}

#[test]
fn a2c_solves_acrobot() {
    reaches(PpoConfig::a2c_for_env("Acrobot-v1"), -100.0);
}

/// A2C on MinAtar Breakout with MinAtar's conv network (16 envs, entropy 0.01):
/// 500k steps, greedy 5.7 measured against 0.39 for a random policy.
#[test]
fn a2c_beats_random_on_minatar_breakout() {
    let cfg = PpoConfig {
        total_steps: 500_000,
        ..PpoConfig::a2c_for_env("MinAtar/Breakout-v1")
    };
    assert_eq!(
        cfg.conv_channels, 16,
        "the MinAtar preset is the conv network"
    );
    reaches(cfg, 3.0);
}

/// IMPALA (policy one update stale, V-trace) on MinAtar Breakout, same budget as A2C:
/// greedy 5.7 measured.
#[test]
fn impala_beats_random_on_minatar_breakout() {
    let cfg = PpoConfig {
        total_steps: 500_000,
        ..PpoConfig::impala_for_env("MinAtar/Breakout-v1")
    };
    assert!(cfg.vtrace && cfg.policy_lag == 1);
    reaches(cfg, 3.0);
}

/// Asynchronous IMPALA (two actor threads on the newest published policy, the learner
/// taking rollouts as they arrive, V-trace), with the actors running the policy
/// themselves and through the batching inference server: not reproducible, so the bar
/// is low (below).
#[test]
fn async_impala_beats_random_on_minatar_breakout() {
    for server in [false, true] {
        let cfg = PpoConfig {
            total_steps: 300_000,
            actors: 2,
            policy_lag: 0,
            inference_server: server,
            ..PpoConfig::impala_for_env("MinAtar/Breakout-v1")
        };
        let mut ppo = Ppo::new(cfg, 1).unwrap();
        let mut episodes = 0;
        // The training episodes of the last fifth of the updates: (return sum, count).
        let late = ppo.cfg.num_iterations() * 4 / 5;
        let (mut late_sum, mut late_n) = (0.0, 0);
        while !ppo.done() {
            // Keep the actors running between updates (they stop after the last one).
            let s = ppo.iterate_prefetching(true);
            episodes += s.episodes;
            if s.iteration > late && s.episodes > 0 {
                late_sum += s.episode_return * s.episodes as f64;
                late_n += s.episodes;
            }
        }
        let late_mean = late_sum / late_n.max(1) as f64;
        let (lag, rollouts) = ppo.async_lag;
        assert_eq!(rollouts, ppo.iteration, "one rollout per update");
        assert!(lag > 0, "asynchronous rollouts are stale");
        assert!(episodes > 100, "episodes ended: {episodes}");
        let s = &ppo.server_stats;
        if server {
            // Every step of every rollout learned asked the server (dropped ones too).
            assert!(
                s.requests >= ppo.iteration * 5 && s.rows == s.requests * 16,
                "{s:?}"
            );
        } else {
            assert_eq!(s.calls, 0);
        }
        // This mode's results depend on timing, so the bar is low against what idle and
        // loaded 2-core VMs give: the training episodes of the last fifth of the updates,
        // hundreds of episodes of the sampling policy, made 4.7-6.5 (a random policy:
        // 0.39). A greedy evaluation is no check here: after 300k steps the greedy
        // policy can be degenerate (17 runs gave 4.5-6.8, a CI run 1.45).
        let lag = lag as f64 / rollouts as f64;
        assert!(
            late_mean >= 2.5,
            "async IMPALA (server: {server}) MinAtar/Breakout-v1: training return \
             {late_mean:.2} over the last {late_n} episodes (mean lag {lag:.2})"
        );
    }
}

/// MinAtar has no time limit, and a policy can stall forever: with all-zero weights the
/// greedy action is no-op, and Seaquest's sub then waits at the surface, where nothing
/// can reach it. Evaluation must still end (at `MAX_EVAL_STEPS`).
#[test]
fn evaluation_ends_when_a_policy_stalls_forever() {
    let cfg = PpoConfig::for_env("MinAtar/Seaquest-v1");
    let mut ppo = Ppo::new(cfg.clone(), 1).unwrap();
    ppo.agent.params.iter_mut().for_each(|p| *p = 0.0);
    let returns = rlrig_learn::ppo::evaluate(&ppo.agent, None, &cfg, 2, 7).returns;
    assert_eq!(returns, vec![0.0, 0.0]);
}

/// PPO on MinAtar Breakout with its preset (PureJaxRL's 64-64 ReLU MLPs, lr 5e-3, on 128
/// envs): 1M steps, greedy 19.6 measured here (a random policy: 0.39; at 500k steps 9.75,
/// and 16.9 with PureJaxRL's 64 envs before the preset doubled them).
#[test]
fn ppo_beats_random_on_minatar_breakout() {
    let cfg = PpoConfig {
        total_steps: 1_000_000,
        ..PpoConfig::for_env("MinAtar/Breakout-v1")
    };
    assert_eq!(cfg.activation, rlrig_learn::ppo::MlpActivation::Relu);
    assert_eq!(cfg.num_envs, 128);
    reaches(cfg, 10.0);
}

/// With no lag, V-trace's targets are A2C's n-step returns: IMPALA with policy_lag = 0
/// follows A2C (up to float rounding: the learner recomputes values in one batch).
#[test]
fn impala_without_lag_is_a2c() {
    let a2c = PpoConfig {
        total_steps: 8 * 5 * 50,
        ..PpoConfig::a2c_for_env("CartPole-v1")
    };
    let impala = PpoConfig {
        vtrace: true,
        ..a2c.clone()
    };
    let (mut x, mut y) = (Ppo::new(a2c, 1).unwrap(), Ppo::new(impala, 1).unwrap());
    while !x.done() {
        x.iterate();
        y.iterate();
    }
    let diff = x
        .agent
        .params
        .iter()
        .zip(&y.agent.params)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 1e-4, "A2C and lag-0 IMPALA differ by {diff}");
    // And a stale policy does change the run.
    let lagged = PpoConfig {
        vtrace: true,
        policy_lag: 1,
        total_steps: 8 * 5 * 50,
        ..PpoConfig::a2c_for_env("CartPole-v1")
    };
    let mut z = Ppo::new(lagged, 1).unwrap();
    while !z.done() {
        z.iterate();
    }
    assert_ne!(z.agent.params, x.agent.params);
}

/// IMPALA's actor thread collects the next rollout while the learner updates; the
/// schedule is fixed, so a prefetching run equals a sequential one bit for bit, on a
/// discrete (MinAtar, conv) and a continuous (Pendulum, normalised) task.
#[test]
fn impala_prefetching_changes_nothing() {
    for (env, steps) in [
        ("MinAtar/Breakout-v1", 16 * 5 * 30),
        ("Pendulum-v1", 8 * 5 * 30),
    ] {
        let cfg = PpoConfig {
            total_steps: steps,
            policy_lag: 2,
            ..PpoConfig::impala_for_env(env)
        };
        let (mut seq, mut pre) = (Ppo::new(cfg.clone(), 1).unwrap(), Ppo::new(cfg, 2).unwrap());
        while !seq.done() {
            let (a, b) = (seq.iterate(), pre.iterate_prefetching(true));
            assert_eq!(a.episodes, b.episodes, "{env}");
            assert_eq!(a.policy_loss.to_bits(), b.policy_loss.to_bits(), "{env}");
        }
        assert!(
            seq.agent.params == pre.agent.params,
            "{env}: weights differ"
        );
        let (x, y) = (seq.evaluate(3, 7).returns, pre.evaluate(3, 7).returns);
        assert_eq!(x, y, "{env}");
    }
}

/// DQN with the CartPole-v1 preset (RL Zoo's settings, 50k steps): the greedy
/// evaluation over 10 episodes after training.
fn dqn_cartpole(seed: u64) -> f64 {
    use rlrig_learn::dqn::{Dqn, DqnConfig};
    let mut r = Dqn::new(
        DqnConfig {
            seed,
            ..DqnConfig::for_env("CartPole-v1")
        },
        2,
    )
    .unwrap();
    while !r.done() {
        r.iterate_until(|| false);
    }
    let ret = r.evaluate(10, 1_000_003).returns.iter().sum::<f64>() / 10.0;
    eprintln!("DQN CartPole-v1 seed {seed}: eval {ret:.1}");
    ret
}

/// DQN's final greedy policy on CartPole swings between solved and collapsed from seed
/// to seed (SB3's DQN too; seeds 1-6 gave 229, 500, 149, 59, 407, 500 after the
/// matrix kernel changed the rounding of the products): over three seeds one must
/// solve it (>= 475) and the three must average well above a random policy (~22) and
/// a broken learner.
#[test]
fn dqn_solves_cartpole_within_50k_steps() {
    let evals = [dqn_cartpole(1), dqn_cartpole(2), dqn_cartpole(3)];
    let best = evals.iter().copied().fold(f64::MIN, f64::max);
    assert!(best >= 475.0, "DQN CartPole-v1 evals {evals:?}");
    assert!(
        evals.iter().sum::<f64>() / 3.0 >= 150.0,
        "DQN CartPole-v1 evals {evals:?}"
    );
}
