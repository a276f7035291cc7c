//! The native path and Burn compute the same thing: outputs, gradients (native:
//! hand-written backward; Burn: autodiff), input gradients, target networks, clipped
//! Adam/RMSprop steps, whole PPO iterations and DDPG/TD3/SAC runs. On `flex` always; on `wgpu` where an adapter exists, which CI makes
//! sure of (it installs Mesa's software Vulkan and sets RLRIG_REQUIRE_WGPU=1).
//!
//! These test `rlrig-burn` but live with the binary's Burn tests so that CI builds Burn
//! once, with one feature set (a second build of Burn + wgpu costs ~15 minutes).
#![cfg(feature = "burn")]

mod common;

use rlrig_burn::{Kind, maker};
use rlrig_env::{Purpose, Rng};
use rlrig_learn::backend::{BackendMaker, Native, Net, NetBackend, NetLayout};
use rlrig_learn::conv::{ConvNet, NATURE};
use rlrig_learn::nn::{Activation, Mlp};
use rlrig_learn::offpolicy::{Algo, OffPolicy, OffPolicyConfig};
use rlrig_learn::optim::Adam;
use rlrig_learn::ppo::{Ppo, PpoConfig};

/// The Burn devices to check: flex always; wgpu when present (required under CI).
fn devices() -> Vec<(Kind, BackendMaker)> {
    let mut out = vec![(Kind::Cpu, maker(Kind::Cpu).expect("flex is always there"))];
    if let Some(m) = common::wgpu_adapter(maker(Kind::Wgpu)) {
        out.push((Kind::Wgpu, m));
    }
    out
}

/// `nets`, placed one after another from parameter 0, and `free` free parameters after
/// the last.
fn nets_then_free(nets: Vec<Net>, free: usize) -> NetLayout {
    let end = nets.last().map_or(0, Net::end);
    NetLayout {
        nets,
        free: end..end + free,
        total: end + free,
    }
}

/// PPO's shape with a Gaussian head: critic 3-64-64-1, actor 3-64-64-2, 2 log-stds.
fn layout(act: Activation) -> NetLayout {
    let critic = Mlp::with_activation(&[3, 64, 64, 1], 0, act);
    let actor = Mlp::with_activation(&[3, 64, 64, 2], critic.end(), act);
    nets_then_free(vec![critic.into(), actor.into()], 2)
}

/// `net` (at parameter 0), a small ReLU MLP after it, and two free parameters: every
/// check_step case has two networks and the free tail.
fn with_mlp_beside(net: ConvNet) -> NetLayout {
    let mlp = Mlp::with_activation(&[3, 8, 2], net.end(), Activation::Relu);
    nets_then_free(vec![net.into(), mlp.into()], 2)
}

/// AlphaZero's residual option on a Connect Four board (2 x 6 x 7), and an MLP beside it.
fn conv_layout() -> NetLayout {
    with_mlp_beside(ConvNet::new(2, 6, 7, 4, 3, 1, 1, &[16], 8, 0))
}

/// The Atari agent's trunk: the Nature CNN (8x8/4, 4x4/2, 3x3/1 strided convolutions,
/// 512 units) on 4 x 84 x 84 bytes scaled by 1/255, with PPO's value and six action
/// outputs, and an MLP beside it.
fn nature_layout() -> NetLayout {
    with_mlp_beside(ConvNet::tower((4, 84, 84), &NATURE, 0, &[512], 7, 0).with_scale(1.0 / 255.0))
}

fn uniform(n: usize, scale: f64, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.uniform(-scale, scale) as f32).collect()
}

fn assert_close(what: &str, a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let err = (x - y).abs() / (1.0 + x.abs().max(y.abs()));
        assert!(
            err <= tol,
            "{what}[{i}]: native {x} vs burn {y} (rel err {err:e})"
        );
    }
}

/// The batches and tolerances of one [`check_step`] case.
#[derive(Clone, Copy)]
struct Case {
    /// Rows a pass.
    rows: usize,
    /// Inputs uniform in +-`x_scale`.
    x_scale: f64,
    /// Learning rate of the optimiser steps.
    lr: f64,
    /// Tolerances `loose` times the MLPs' (float32 sums of thousands of products
    /// differ in their last bits with the order of summation).
    loose: f32,
    /// On the gradient norm, relative to the native one (Burn sums the squares in
    /// float32, the native path in float64: over the Nature CNN's 1.7 M parameters the
    /// two differ by ~0.1 % while every gradient agrees).
    norm_tol: f64,
}

/// The MLP-sized case.
const SMALL: Case = Case {
    rows: 37,
    x_scale: 2.0,
    lr: 1e-2,
    loose: 1.0,
    norm_tol: 1e-4,
};

/// Runs the same forward/backward/step sequence on both backends and compares each stage.
fn check_step(kind: Kind, mk: &BackendMaker, lay: NetLayout, opt: Adam, max_norm: f64, case: Case) {
    let Case {
        rows,
        x_scale,
        lr,
        loose,
        norm_tol,
    } = case;
    let mut rng = Rng::stream(7, Purpose::User, kind as u64);
    let params = uniform(lay.total, 0.3, &mut rng);
    let mut native = Native::new(&lay, &params, opt.clone());
    let mut burn = mk(&lay, &params, opt).expect("backend");
    for step in 0..3 {
        let xs: Vec<Vec<f32>> = lay
            .nets
            .iter()
            .map(|n| uniform(rows * n.input_dim(), x_scale, &mut rng))
            .collect();
        for net in [1, 0] {
            let a = native.forward_train(net, &xs[net], rows).to_vec();
            let b = burn.forward_train(net, &xs[net], rows).to_vec();
            assert_close(
                &format!("{kind:?} step {step} net {net} output"),
                &a,
                &b,
                1e-5 * loose,
            );
        }
        for net in [1, 0] {
            let out = lay.nets[net].output_dim();
            let dout = uniform(rows * out, 1.0, &mut rng);
            native.backward(net, &dout);
            burn.backward(net, &dout);
        }
        let dfree = uniform(2, 1.0, &mut rng);
        native.add_free_grad(&dfree);
        burn.add_free_grad(&dfree);
        assert_close(
            &format!("{kind:?} step {step} gradient"),
            &native.grads(),
            &burn.grads(),
            1e-4 * loose,
        );
        let (na, nb) = (native.step(lr, max_norm), burn.step(lr, max_norm));
        assert!(
            (na - nb).abs() <= norm_tol * (1.0 + na),
            "{kind:?} gradient norm: native {na} vs burn {nb}"
        );
        assert_close(
            &format!("{kind:?} step {step} parameters"),
            &native.params(),
            &burn.params(),
            1e-4 * loose,
        );
        assert_close(
            &format!("{kind:?} step {step} free parameters"),
            native.free_params(),
            burn.free_params(),
            1e-4 * loose,
        );
        // Inference sees the stepped parameters.
        let a = native.forward(0, &xs[0], rows).to_vec();
        let b = burn.forward(0, &xs[0], rows).to_vec();
        assert_close(
            &format!("{kind:?} step {step} inference"),
            &a,
            &b,
            1e-4 * loose,
        );
    }
    let (on, ob) = (native.optimizer(), burn.optimizer());
    assert_eq!(on.t, ob.t, "{kind:?} optimiser step count");
    assert_close(
        &format!("{kind:?} second moments"),
        &on.v,
        &ob.v,
        1e-4 * loose,
    );
}

#[test]
fn native_and_burn_agree_on_outputs_gradients_and_adam_steps() {
    for (kind, mk) in devices() {
        let n = layout(Activation::Tanh).total;
        // Clipping active (tiny max norm) and inactive; tanh and ReLU networks.
        let (tanh, relu) = (layout(Activation::Tanh), layout(Activation::Relu));
        check_step(kind, &mk, tanh.clone(), Adam::new(n, 1e-5), 0.5, SMALL);
        check_step(kind, &mk, relu, Adam::new(n, 1e-8), 1e9, SMALL);
        check_step(kind, &mk, tanh, Adam::rmsprop(n, 0.99, 1e-5), 0.5, SMALL);
        // The convolutional tower (im2col by hand vs Burn's conv2d + autodiff), with
        // AlphaZero's L2 penalty in the optimiser.
        let conv = conv_layout();
        let mut opt = Adam::new(conv.total, 1e-8);
        opt.weight_decay = 1e-2;
        check_step(kind, &mk, conv, opt, 1e9, SMALL);
        // The Nature CNN (strides, the 1/255 input scale, a 3136-wide head) on
        // byte-valued inputs, with RMSprop at A2C's learning rate. Unclipped and with
        // eps 1 (steps linear in the gradient): RMSprop's first step with a small eps
        // is ~lr * sign(g), so the last-bit differences of a 1.7 M-entry gradient's
        // tiny entries (and of the two norms, see Case) would become whole steps; the
        // MLP cases above cover clipping and small eps.
        let nature = nature_layout();
        let n = nature.total;
        check_step(
            kind,
            &mk,
            nature,
            Adam::rmsprop(n, 0.99, 1.0),
            1e9,
            Case {
                rows: 5,
                x_scale: 255.0,
                lr: 7e-4,
                // Burn's CPU matrix products sum in the order its kernels choose for
                // the CPU: with AVX-512 on AMD Zen 5 one output (step 1, 3136-wide
                // head, terms far larger than their sum) differed by 1.49e-4, 15x the
                // MLPs' tolerance (AVX2 CPUs passed at 10x); there, every other check
                // of this case stayed under 0.3 of 10x.
                loose: 30.0,
                norm_tol: 3e-3,
            },
        );
    }
}

#[test]
fn optimizer_state_and_parameters_round_trip() {
    for (kind, mk) in devices() {
        let lay = layout(Activation::Tanh);
        let mut rng = Rng::stream(3, Purpose::User, 0);
        let params = uniform(lay.total, 0.3, &mut rng);
        let mut opt = Adam::new(lay.total, 1e-5);
        opt.t = 5;
        opt.m = uniform(lay.total, 0.1, &mut rng);
        opt.v = uniform(lay.total, 0.1, &mut rng)
            .iter()
            .map(|v| v.abs())
            .collect();
        let mut b = mk(&lay, &params, opt.clone()).expect("backend");
        assert_eq!(b.params(), params, "{kind:?}");
        assert_eq!(b.optimizer(), opt, "{kind:?}");
        let p2 = uniform(lay.total, 0.3, &mut rng);
        b.set_params(&p2);
        assert_eq!(b.params(), p2, "{kind:?}");
        assert_eq!(b.free_params(), &p2[lay.free.clone()], "{kind:?}");
    }
}

#[test]
fn a_layout_that_does_not_tile_its_parameters_is_refused() {
    let mut lay = layout(Activation::Tanh);
    lay.total += 3;
    let params = vec![0.0; lay.total];
    let err = match maker(Kind::Cpu).unwrap()(&lay, &params, Adam::new(lay.total, 1e-5)) {
        Ok(_) => panic!("a bad layout was accepted"),
        Err(e) => e,
    };
    assert!(matches!(err, rlrig_learn::NnError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("covers"), "{err}");
}

/// A whole PPO iteration (rollout with sampled actions, GAE, 4 epochs x minibatches)
/// gives the same losses and weights on native and Burn, discrete and continuous, with
/// tanh MLPs, ReLU MLPs (PPO's MinAtar preset) and MinAtar's conv networks on
/// channels-last observations.
#[test]
fn ppo_iterations_match_between_native_and_burn() {
    for (kind, mk) in devices() {
        for (env, conv) in [
            ("CartPole-v1", false),
            ("Pendulum-v1", false),
            ("MinAtar/Breakout-v1", false),
            ("MinAtar/Breakout-v1", true),
        ] {
            let mut cfg = PpoConfig::for_env(env);
            if conv {
                // MinAtar's conv network at its own learning rate (A2C's network; with
                // the MLPs' 5e-3 the two paths' rounding grows past the tolerance).
                cfg.conv_channels = 16;
                cfg.hidden = vec![128];
                cfg.learning_rate = 5e-4;
            }
            cfg.total_steps = 100_000;
            cfg.num_envs = 4;
            cfg.num_steps = 64;
            let mut native = Ppo::new(cfg.clone(), 1).unwrap();
            let mut burn = Ppo::new(cfg, 1).unwrap();
            burn.set_backend(&mk).unwrap();
            assert_eq!(native.device(), "cpu");
            assert_ne!(burn.device(), "cpu");
            for it in 0..2 {
                let (a, b) = (native.iterate(), burn.iterate());
                let what = format!("{kind:?} {env} (conv: {conv}) iteration {it}");
                assert_eq!(a.episodes, b.episodes, "{what}: rollouts diverged");
                for (name, x, y) in [
                    ("policy_loss", a.policy_loss, b.policy_loss),
                    ("value_loss", a.value_loss, b.value_loss),
                    ("entropy", a.entropy, b.entropy),
                    ("approx_kl", a.approx_kl, b.approx_kl),
                ] {
                    assert!(
                        (x - y).abs() <= 1e-4 * (1.0 + x.abs()),
                        "{what}: {name} native {x} vs burn {y}"
                    );
                }
                assert_close(&what, &native.agent.params, &burn.agent.params, 1e-4);
            }
        }
    }
}

/// Twin critics over `[obs(3) | action(1)]`, as TD3/SAC's on Pendulum.
fn critic_layout(act: Activation) -> NetLayout {
    let q1 = Mlp::with_activation(&[4, 16, 16, 1], 0, act);
    let q2 = Mlp::with_activation(&[4, 16, 16, 1], q1.end(), act);
    nets_then_free(vec![q1.into(), q2.into()], 0)
}

/// The critic-to-action path DDPG/TD3/SAC's actor update needs: d out / d input agrees
/// between native and Burn, matches central differences on Burn, and leaves the
/// parameter gradients alone.
#[test]
fn input_gradients_agree_with_native_and_finite_differences() {
    for (kind, mk) in devices() {
        let rows = 9;
        for act in [Activation::Relu, Activation::Tanh] {
            let lay = critic_layout(act);
            let mut rng = Rng::stream(11, Purpose::User, kind as u64);
            let params = uniform(lay.total, 0.4, &mut rng);
            let mut native = Native::new(&lay, &params, Adam::new(lay.total, 1e-8));
            let mut burn = mk(&lay, &params, Adam::new(lay.total, 1e-8)).expect("backend");
            let x = uniform(rows * 4, 1.5, &mut rng);
            let dout = uniform(rows, 1.0, &mut rng);
            for net in [1, 0] {
                native.forward_train(net, &x, rows);
                burn.forward_train(net, &x, rows);
                let a = native.input_grad(net, &dout).to_vec();
                let b = burn.input_grad(net, &dout).to_vec();
                assert_close(&format!("{kind:?} {act:?} net {net} d/dx"), &a, &b, 1e-5);
                if act == Activation::Tanh {
                    // Central differences of sum(out * dout) in each input (tanh: smooth).
                    let h = 1e-2f32;
                    for i in 0..x.len() {
                        let mut f = |xi: f32| -> f64 {
                            let mut xx = x.clone();
                            xx[i] = xi;
                            let out = burn.forward(net, &xx, rows);
                            out.iter().zip(&dout).map(|(o, d)| f64::from(o * d)).sum()
                        };
                        let fd = (f(x[i] + h) - f(x[i] - h)) / (2.0 * f64::from(h));
                        let an = f64::from(b[i]);
                        assert!(
                            (fd - an).abs() < 2e-3 * (1.0 + an.abs()),
                            "{kind:?} net {net} input {i}: analytic {an} vs numeric {fd}"
                        );
                    }
                }
            }
            assert!(
                burn.grads().iter().all(|g| *g == 0.0),
                "{kind:?}: input_grad touched the parameter gradients"
            );
        }
    }
}

/// Target networks: a copy at init_target, forward_target runs it, soft_update is
/// Polyak averaging towards the stepped parameters; all as on the native path.
#[test]
fn target_networks_agree_with_native() {
    for (kind, mk) in devices() {
        let lay = critic_layout(Activation::Relu);
        let mut rng = Rng::stream(12, Purpose::User, kind as u64);
        let params = uniform(lay.total, 0.4, &mut rng);
        let mut native = Native::new(&lay, &params, Adam::new(lay.total, 1e-8));
        let mut burn = mk(&lay, &params, Adam::new(lay.total, 1e-8)).expect("backend");
        assert!(burn.target_params().is_empty(), "{kind:?}: no target yet");
        let rows = 16;
        let x = uniform(rows * 4, 1.5, &mut rng);
        for b in [&mut native as &mut dyn NetBackend, burn.as_mut()] {
            b.init_target();
            b.forward_train(0, &x, rows);
            b.backward(0, &vec![0.5; rows]);
            b.step(1e-2, f64::INFINITY);
            b.soft_update(0.25);
        }
        let stepped = burn.params();
        assert_close(
            &format!("{kind:?} params"),
            &native.params(),
            &stepped,
            1e-5,
        );
        let expected: Vec<f32> = params
            .iter()
            .zip(&stepped)
            .map(|(o, n)| o + 0.25 * (n - o))
            .collect();
        assert_close(
            &format!("{kind:?} target"),
            &burn.target_params(),
            &expected,
            1e-6,
        );
        assert_ne!(burn.target_params(), stepped, "{kind:?}");
        for net in [0, 1] {
            let a = native.forward_target(net, &x, rows).to_vec();
            let b = burn.forward_target(net, &x, rows).to_vec();
            assert_close(&format!("{kind:?} target net {net}"), &a, &b, 1e-5);
        }
        burn.set_target_params(&params);
        assert_eq!(burn.target_params(), params, "{kind:?}");
    }
}

/// DDPG, TD3 and SAC runs (collection, critic and actor updates, targets, SAC's
/// temperature) give the same losses and weights on native and Burn.
#[test]
fn offpolicy_runs_match_between_native_and_burn() {
    for (kind, mk) in devices() {
        for algo in [Algo::Ddpg, Algo::Td3, Algo::Sac] {
            let cfg = OffPolicyConfig {
                total_steps: 600,
                learning_starts: 200,
                batch_size: 32,
                hidden: vec![16, 16],
                log_every: 200,
                num_envs: 2,
                ..OffPolicyConfig::for_env(algo, "Pendulum-v1")
            };
            let mut native = OffPolicy::new(cfg.clone(), 1).unwrap();
            let mut burn = OffPolicy::new(cfg, 1).unwrap();
            burn.set_backend(&mk).unwrap();
            assert_eq!(native.device(), "cpu");
            assert_ne!(burn.device(), "cpu");
            while !native.done() {
                let (a, b) = (native.iterate(), burn.iterate());
                let what = format!("{kind:?} {algo:?} step {}", a.global_step);
                assert_eq!(a.episodes, b.episodes, "{what}");
                assert_eq!(a.updates, b.updates, "{what}");
                for (name, x, y) in [
                    ("episode_return", a.episode_return, b.episode_return),
                    ("qf_loss", a.qf_loss, b.qf_loss),
                    ("actor_loss", a.actor_loss, b.actor_loss),
                    ("q_value", a.q_value, b.q_value),
                    ("alpha", a.alpha, b.alpha),
                ] {
                    assert!(
                        (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-3 * (1.0 + x.abs()),
                        "{what}: {name} native {x} vs burn {y}"
                    );
                }
            }
            let (na, nb) = (native.nets(), burn.nets());
            assert_close(
                &format!("{kind:?} {algo:?} actor"),
                &na.actor_params,
                &nb.actor_params,
                1e-3,
            );
            assert_close(
                &format!("{kind:?} {algo:?} critics"),
                &na.critic_params,
                &nb.critic_params,
                1e-3,
            );
        }
    }
}
