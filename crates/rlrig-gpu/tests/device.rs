//! The device path against rlrig's CPU path, on whatever wgpu adapter is present (CI:
//! Mesa's software Vulkan). Without an adapter the tests say so and pass, unless
//! RLRIG_REQUIRE_WGPU=1 (as CI sets), which makes a missing adapter a failure.

use rlrig_env::envs::cartpole::{CartPole, CartPoleParams, CartPoleState};
use rlrig_env::{Env, Purpose, Rng};
use rlrig_gpu::{Gpu, ResidentPpo, Tuning, cartpole_probe};
use rlrig_learn::ppo::PpoConfig;

fn gpu() -> Option<Gpu> {
    match Gpu::open() {
        Ok(g) => Some(g),
        Err(e) if std::env::var("RLRIG_REQUIRE_WGPU").as_deref() == Ok("1") => {
            panic!("RLRIG_REQUIRE_WGPU=1 but {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

#[test]
fn device_cartpole_steps_as_rlrig_env_in_f32() {
    let Some(gpu) = gpu() else { return };
    let p = CartPoleParams::default();
    let mut rng = Rng::stream(7, Purpose::User, 0);
    let mut states = Vec::new();
    let mut actions = Vec::new();
    for i in 0..4096 {
        // Across the whole non-terminal box and beyond, velocities as seen in play.
        let s = [
            rng.uniform(-2.6, 2.6) as f32,
            rng.uniform(-4.0, 4.0) as f32,
            rng.uniform(-0.25, 0.25) as f32,
            rng.uniform(-4.0, 4.0) as f32,
        ];
        states.push(s);
        actions.push((i % 2) as u32);
    }
    let out = cartpole_probe(&gpu, &states, &actions).unwrap();
    let limit = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
    for ((s, a), (next, reward, term)) in states.iter().zip(&actions).zip(&out) {
        let mut cs = CartPoleState {
            x: s[0].into(),
            x_dot: s[1].into(),
            theta: s[2].into(),
            theta_dot: s[3].into(),
            done: false,
        };
        let tr = CartPole::step(&p, &mut cs, &(*a as i32), &mut rng);
        let want = [cs.x, cs.x_dot, cs.theta, cs.theta_dot];
        for k in 0..4 {
            let err = (f64::from(next[k]) - want[k]).abs();
            assert!(
                err <= 1e-5 * want[k].abs().max(1.0),
                "state {s:?} action {a}: component {k} is {} on the device, {} on the CPU",
                next[k],
                want[k]
            );
        }
        assert_eq!(f64::from(*reward), tr.reward);
        // The flags agree unless the f64 state is within f32 rounding of a threshold.
        let near = (cs.theta.abs() - limit).abs() < 1e-6 || (cs.x.abs() - 2.4).abs() < 1e-6;
        if !near {
            assert_eq!(*term, tr.terminated, "state {s:?} action {a}");
        }
    }
}

fn small(total: u64) -> PpoConfig {
    PpoConfig {
        total_steps: total,
        ..PpoConfig::default()
    }
}

#[test]
fn a_run_is_the_same_alone_or_among_others_and_repeats_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let cfg = small(4 * 128 * 3);
    let mut many = ResidentPpo::new(&gpu, &cfg, &[5, 9, 11], &Tuning::default()).unwrap();
    many.run(u64::MAX).unwrap();
    let mut alone = ResidentPpo::new(&gpu, &cfg, &[9], &Tuning::default()).unwrap();
    alone.run(1).unwrap();
    alone.run(5).unwrap();
    assert_eq!(alone.iteration(), 3);
    let pm = many.params().unwrap();
    let pa = alone.params().unwrap();
    assert_eq!(
        pm[1], pa[0],
        "seed 9 alone differs from seed 9 among others"
    );
    assert_ne!(pm[0], pm[1], "two seeds trained the same weights");
    assert_eq!(many.metrics().unwrap()[1], alone.metrics().unwrap()[0]);
    let mut again = ResidentPpo::new(&gpu, &cfg, &[5, 9, 11], &Tuning::default()).unwrap();
    again.run(3).unwrap();
    assert_eq!(again.params().unwrap(), pm);
}

#[test]
fn more_runs_than_the_device_binds_is_an_error_not_a_panic() {
    let Some(gpu) = gpu() else { return };
    let seeds: Vec<u64> = (0..60_000).collect();
    // 60,000 runs of 976 iterations: a 1.9 GB metrics buffer.
    let err = ResidentPpo::new(&gpu, &PpoConfig::default(), &seeds, &Tuning::default())
        .err()
        .expect("too large for one launch");
    assert!(err.contains("train fewer seeds per launch"), "{err}");
}

#[test]
fn looped_and_written_out_unit_products_train_the_same_weights() {
    let Some(gpu) = gpu() else { return };
    // 16 hidden units: the written-out kernel is 4x smaller, so lavapipe compiles it fast.
    let cfg = PpoConfig {
        hidden: vec![16, 16],
        ..small(4 * 128 * 2)
    };
    let mut out = Vec::new();
    for unroll_units in [false, true] {
        let tuning = Tuning {
            rows: Some(8),
            unroll_units,
        };
        let mut p = ResidentPpo::new(&gpu, &cfg, &[3], &tuning).unwrap();
        p.run(2).unwrap();
        out.push(p.params().unwrap().remove(0));
    }
    let worst = out[0]
        .iter()
        .zip(&out[1])
        .map(|(a, b)| (a - b).abs() / a.abs().max(1e-2))
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "weights differ by {worst} (relative)");
}
