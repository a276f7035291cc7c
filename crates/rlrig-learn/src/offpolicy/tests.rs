//! DDPG/TD3/SAC unit tests.

use super::*;
use crate::LearnError;

fn cfg(algo: Algo) -> OffPolicyConfig {
    OffPolicyConfig {
        total_steps: 600,
        learning_starts: 200,
        batch_size: 32,
        hidden: vec![16, 16],
        log_every: 200,
        ..OffPolicyConfig::for_env(algo, "Pendulum-v1")
    }
}

#[test]
fn discrete_envs_are_refused_with_a_pointer_to_ppo() {
    let c = OffPolicyConfig::for_env(Algo::Td3, "CartPole-v1");
    let e = c.validate().unwrap_err();
    assert!(matches!(e, LearnError::Config(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("discrete") && e.contains("ppo"), "{e}");
}

/// After one update with policy_frequency 1, the DDPG/TD3 targets equal
/// (1 - tau) old + tau new; SAC has no actor target and updates its critic target.
#[test]
fn targets_follow_online_nets_by_tau() {
    for algo in [Algo::Ddpg, Algo::Td3, Algo::Sac] {
        let mut c = cfg(algo);
        c.policy_frequency = 1;
        c.tau = 0.1;
        let mut r = OffPolicy::new(c, 1).unwrap();
        while r.c.global_step < 200 {
            r.collect_step();
        }
        let (old_a, old_c) = (r.actor.target_params(), r.critic.target_params());
        r.collect_step();
        assert_eq!(r.updates, 1, "{algo:?}");
        let check = |what: &str, target: Vec<f32>, old: &[f32], online: Vec<f32>| {
            assert_ne!(target, old, "{algo:?} {what} did not move");
            for (t, (o, n)) in target.iter().zip(old.iter().zip(&online)) {
                assert!((t - (o + 0.1 * (n - o))).abs() < 1e-6, "{algo:?} {what}");
            }
        };
        check(
            "critic target",
            r.critic.target_params(),
            &old_c,
            r.critic.params(),
        );
        if algo == Algo::Sac {
            assert!(r.actor.target_params().is_empty());
        } else {
            check(
                "actor target",
                r.actor.target_params(),
                &old_a,
                r.actor.params(),
            );
        }
    }
}

/// A learner of `c` after 220 env steps, with a batch of 4 transitions sampled (the
/// gradient checks' fixture).
fn with_batch_of_four(c: OffPolicyConfig) -> OffPolicy {
    let mut r = OffPolicy::new(c, 1).unwrap();
    while r.c.global_step < 220 {
        r.collect_step();
    }
    r.c.buffer
        .sample(4, &mut Rng::stream(5, Purpose::User, 0), &mut r.batch);
    r
}

/// The SAC actor's analytic gradient (reparameterised sample, squashing correction,
/// temperature) against central differences of the same loss with fixed noise.
#[test]
fn sac_actor_gradient_matches_finite_differences() {
    let mut c = cfg(Algo::Sac);
    c.hidden = vec![8];
    c.batch_size = 4;
    c.autotune = false;
    c.alpha = 0.3;
    let mut r = with_batch_of_four(c);
    let critic = r.critic.params();
    let loss = |r: &OffPolicy, params: &[f32]| -> f64 {
        let nets = &r.nets;
        let mut cache = MlpCache::default();
        let raw = nets.actor.forward(params, &r.batch.obs, 4, &mut cache);
        let mut smp = SacSample::default();
        smp.draw(nets, raw, 4, &mut Rng::stream(7, Purpose::User, 0));
        let mut x = Vec::new();
        concat(&r.batch.obs, 3, &smp.action, 1, 4, &mut x);
        let q1 = nets
            .q1
            .forward(&critic, &x, 4, &mut MlpCache::default())
            .to_vec();
        let q2 = nets
            .q2
            .forward(&critic, &x, 4, &mut MlpCache::default())
            .to_vec();
        (0..4)
            .map(|b| f64::from(0.3 * smp.logp[b] - q1[b].min(q2[b])) / 4.0)
            .sum()
    };
    let before = r.actor.params();
    r.actor_gradient(&mut Rng::stream(7, Purpose::User, 0));
    let grads = r.actor.grads();
    crate::nn::assert_matches_central_differences(&before, &grads, 1e-3, 5e-3, |p| loss(&r, p));
}

/// The deterministic actor's gradient through the critic (DDPG/TD3).
#[test]
fn deterministic_actor_gradient_matches_finite_differences() {
    let mut c = cfg(Algo::Td3);
    c.hidden = vec![8];
    c.batch_size = 4;
    let mut r = with_batch_of_four(c);
    let nets = r.nets();
    let loss = |r: &OffPolicy, params: &[f32]| -> f64 {
        let mut act = vec![0.0; 4];
        let mut p = nets.clone();
        p.actor_params = params.to_vec();
        p.greedy(&r.batch.obs, 4, &mut MlpCache::default(), &mut act);
        let mut x = Vec::new();
        concat(&r.batch.obs, 3, &act, 1, 4, &mut x);
        let mut cache = MlpCache::default();
        let q = nets.q1.forward(&nets.critic_params, &x, 4, &mut cache);
        -q.iter().map(|v| f64::from(*v)).sum::<f64>() / 4.0
    };
    r.actor_gradient(&mut Rng::stream(7, Purpose::User, 0));
    let grads = r.actor.grads();
    crate::nn::assert_matches_central_differences(&nets.actor_params, &grads, 1e-3, 5e-3, |p| {
        loss(&r, p)
    });
}

/// A checkpoint taken mid-run and restored into a fresh run continues bit for bit.
#[test]
fn state_and_restore_continue_the_run_exactly() {
    for algo in [Algo::Td3, Algo::Sac] {
        let run = |split: bool| {
            let mut r = OffPolicy::new(cfg(algo), 1).unwrap();
            r.iterate();
            r.iterate();
            if split {
                let (st, tensors) = r.state();
                let mut map = crate::collector::owned_tensors(tensors);
                let mut fresh = OffPolicy::new(cfg(algo), 2).unwrap();
                fresh.restore(st, |n| map.remove(n)).unwrap();
                r = fresh;
            }
            let last = r.iterate();
            (
                format!("{last:?}"),
                r.actor.params(),
                r.critic.target_params(),
            )
        };
        assert_eq!(run(false), run(true), "{algo:?}");
    }
}

#[test]
fn same_seed_same_run_at_any_thread_count_and_utd() {
    for algo in [Algo::Ddpg, Algo::Td3, Algo::Sac] {
        let mut c = cfg(algo);
        c.num_envs = 4;
        c.utd_ratio = 0.5;
        let run = |threads| {
            let mut r = OffPolicy::new(c.clone(), threads).unwrap();
            let mut rows = Vec::new();
            while !r.done() {
                rows.push(r.iterate());
            }
            (rows, r.actor.params(), r.updates)
        };
        let (a, b) = (run(1), run(2));
        assert_eq!(format!("{:?}", a.0), format!("{:?}", b.0), "{algo:?}");
        assert_eq!(a.1, b.1);
        // 600 steps, updates after step 200 at 0.5 per transition.
        assert_eq!(a.2, 200, "{algo:?}");
    }
}
