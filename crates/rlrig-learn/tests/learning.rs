//! Learning tests: fixed seeds, small budgets, the agent must reach a score.
//! Run in release (`scripts/test.sh` does); each takes seconds there.

use rlrig_learn::ppo::{Ppo, PpoConfig};

fn train_and_eval(cfg: PpoConfig) -> f64 {
    let mut ppo = Ppo::new(cfg, 2).unwrap();
    while !ppo.done() {
        ppo.iterate();
    }
    let returns = ppo.evaluate(20, 12_345);
    returns.iter().sum::<f64>() / returns.len() as f64
}

#[test]
fn ppo_solves_cartpole_within_500k_steps() {
    let mean = train_and_eval(PpoConfig::for_env("CartPole-v1"));
    assert!(mean >= 475.0, "mean evaluation return {mean}");
}

#[test]
fn ppo_solves_acrobot() {
    let mean = train_and_eval(PpoConfig::for_env("Acrobot-v1"));
    assert!(mean >= -100.0, "mean evaluation return {mean}");
}

#[test]
fn ppo_continuous_swings_up_pendulum() {
    let mean = train_and_eval(PpoConfig::for_env("Pendulum-v1"));
    assert!(mean >= -300.0, "mean evaluation return {mean}");
}
