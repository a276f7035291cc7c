//! Learning tests: fixed seeds, small budgets, the agent must reach a score.
//! Run in release (`scripts/test.sh` does); they take seconds there.

use rlrig_learn::ppo::{Ppo, PpoConfig};

fn train(cfg: PpoConfig) -> (Ppo, f64) {
    let mut ppo = Ppo::new(cfg, 2).unwrap();
    let t = std::time::Instant::now();
    while !ppo.done() {
        let s = ppo.iterate();
        if s.iteration % 50 == 0 {
            eprintln!(
                "{} it {} step {} return {:.1} ev {:.2} kl {:.4}",
                ppo.cfg.env,
                s.iteration,
                s.global_step,
                s.episode_return,
                s.explained_variance,
                s.approx_kl
            );
        }
    }
    eprintln!(
        "{} trained in {:.2} s ({:?})",
        ppo.cfg.env,
        t.elapsed().as_secs_f64(),
        ppo.times
    );
    let returns = ppo.evaluate(20, 12345);
    let mean = returns.iter().sum::<f64>() / returns.len() as f64;
    (ppo, mean)
}

#[test]
fn ppo_solves_cartpole_within_500k_steps() {
    let (_, mean) = train(PpoConfig::for_env("CartPole-v1"));
    assert!(mean >= 475.0, "mean evaluation return {mean}");
}
