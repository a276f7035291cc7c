use super::*;
use crate::LearnError;

fn cfg() -> DqnConfig {
    DqnConfig {
        total_steps: 600,
        learning_starts: 200,
        batch_size: 32,
        hidden: vec![16, 16],
        log_every: 200,
        train_frequency: 4,
        gradient_steps: 2,
        target_network_frequency: 50,
        ..DqnConfig::for_env("CartPole-v1")
    }
}

#[test]
fn continuous_envs_are_refused_with_a_pointer_to_sac() {
    let e = DqnConfig::for_env("Pendulum-v1").validate().unwrap_err();
    assert!(matches!(e, LearnError::Config(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("continuous") && e.contains("sac"), "{e}");
    let mut c = cfg();
    c.train_frequency = 0;
    rules::assert_refused(c.validate(), "train_frequency");
    c = cfg();
    c.tau = 0.0;
    rules::assert_refused(c.validate(), "tau");
}

#[test]
fn epsilon_falls_linearly_then_stays() {
    let c = DqnConfig {
        total_steps: 1000,
        exploration_fraction: 0.5,
        start_e: 1.0,
        end_e: 0.1,
        ..DqnConfig::default()
    };
    assert_eq!(c.epsilon(0), 1.0);
    assert!((c.epsilon(250) - 0.55).abs() < 1e-12);
    assert!((c.epsilon(500) - 0.1).abs() < 1e-12);
    assert_eq!(c.epsilon(900), 0.1);
}

#[test]
fn multiples_count_the_boundaries_crossed() {
    assert_eq!(multiples_in(0, 10, 10), 1);
    assert_eq!(multiples_in(10, 19, 10), 0);
    assert_eq!(multiples_in(9, 41, 10), 4);
    assert_eq!(multiples_in(5, 5, 3), 0);
}

/// Updates come `gradient_steps` per `train_frequency` env steps after
/// `learning_starts`, at any number of envs; the hard target update copies the
/// network exactly.
#[test]
fn update_schedule_and_hard_target_copy() {
    for envs in [1, 4, 3] {
        let mut c = cfg();
        c.num_envs = envs;
        let mut r = Dqn::new(c, 1).unwrap();
        while !r.done() {
            r.iterate_until(|| false).unwrap();
        }
        // Env steps 201..=600 (rounded to whole collection steps of `envs`).
        let last = r.c.global_step;
        assert_eq!(r.updates, multiples_in(200, last, 4) * 2, "{envs} envs");
        // 600 is a multiple of the target frequency: the last step copied.
        assert_eq!(last, 600);
        assert_eq!(r.q.target_params(), r.q.params(), "{envs} envs");
    }
}

/// The TD update's gradient (Huber and MSE, double and plain targets) against
/// central differences of the same loss with the target held fixed.
#[test]
fn td_gradient_matches_finite_differences() {
    for (loss, double_q) in [(Loss::Huber, true), (Loss::Mse, false)] {
        let mut c = cfg();
        c.hidden = vec![8];
        c.batch_size = 6;
        c.loss = loss;
        c.double_q = double_q;
        c.max_grad_norm = 0.0;
        let mut r = Dqn::new(c, 1).unwrap();
        while r.c.global_step < 220 {
            r.collect_step();
        }
        // Targets from the current target network, as update() computes them.
        let before = r.q.params();
        let updates = r.updates;
        let sample = |r: &mut Dqn| {
            let mut rng = Rng::stream(r.cfg.seed, Purpose::Learner, updates);
            r.c.buffer.sample(6, &mut rng, &mut r.batch);
        };
        sample(&mut r);
        let target = r.q.target_params();
        let k = r.net.n_actions;
        let net = r.net.clone();
        let fwd =
            |p: &[f32], x: &[f32]| net.mlp.forward(p, x, 6, &mut MlpCache::default()).to_vec();
        let tq = fwd(&target, &r.batch.next_obs);
        let pick = if double_q {
            fwd(&before, &r.batch.next_obs)
        } else {
            tq.clone()
        };
        let mut a = Vec::new();
        crate::eval::argmax_rows(&pick, 6, k, &mut a);
        let y: Vec<f32> = (0..6)
            .map(|b| {
                r.batch.rewards[b]
                    + 0.99 * (1.0 - r.batch.terminated[b]) * tq[b * k + a[b] as usize]
            })
            .collect();
        let batch = r.batch.clone();
        let f = |p: &[f32]| -> f64 {
            let q = fwd(p, &batch.obs);
            (0..6)
                .map(|b| {
                    let e = f64::from(q[b * k + batch.actions[b] as usize] - y[b]);
                    let l = match loss {
                        Loss::Mse => e * e,
                        Loss::Huber if e.abs() < 1.0 => 0.5 * e * e,
                        Loss::Huber => e.abs() - 0.5,
                    };
                    l / 6.0
                })
                .sum()
        };
        r.td_gradient();
        let grads = r.q.grads();
        crate::nn::assert_matches_central_differences(&before, &grads, 1e-3, 5e-3, f);
    }
}

/// A checkpoint taken mid-run and restored into a fresh run (other thread count)
/// continues bit for bit.
#[test]
fn state_and_restore_continue_the_run_exactly() {
    let run = |split: bool| {
        let mut r = Dqn::new(cfg(), 1).unwrap();
        r.iterate_until(|| false);
        r.iterate_until(|| false);
        if split {
            let (st, tensors) = r.state();
            let mut map = crate::collector::owned_tensors(tensors);
            let mut fresh = Dqn::new(cfg(), 2).unwrap();
            fresh.restore(st, |n| map.remove(n)).unwrap();
            r = fresh;
        }
        let last = r.iterate_until(|| false);
        (format!("{last:?}"), r.q.params(), r.q.target_params())
    };
    assert_eq!(run(false), run(true));
}
