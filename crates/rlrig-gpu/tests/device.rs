//! The device path against rlrig's CPU path, on whatever wgpu adapter is present (CI:
//! Mesa's software Vulkan). Without an adapter the tests say so and pass, unless
//! RLRIG_REQUIRE_WGPU=1 (as CI sets), which makes a missing adapter a failure.

use rlrig_env::envs::acrobot::Acrobot;
use rlrig_env::envs::cartpole::CartPole;
use rlrig_env::envs::minatar_breakout::{Breakout, BreakoutParams};
use rlrig_env::envs::mountain_car::MountainCar;
use rlrig_env::envs::mountain_car_continuous::MountainCarContinuous;
use rlrig_env::envs::pendulum::Pendulum;
use rlrig_env::{Env, Purpose, Rng};
use rlrig_gpu::envs::{bench, device_env, probe};
use rlrig_gpu::{Gpu, ResidentPpo, Tuning};
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

/// An env's action from the float the device probe takes.
trait FromProbe {
    fn from_probe(x: f32) -> Self;
}
impl FromProbe for i32 {
    fn from_probe(x: f32) -> i32 {
        x as i32
    }
}
impl FromProbe for [f32; 1] {
    fn from_probe(x: f32) -> [f32; 1] {
        [x]
    }
}

/// How one env is probed: state ranges, an action draw, the state components that are
/// angles (equal modulo 2 pi), and where the terminated flag may differ (the f64 state
/// within f32 rounding of a threshold).
struct ProbeCase {
    ranges: &'static [(f64, f64)],
    action: fn(&mut Rng) -> f32,
    angles: &'static [usize],
    near_threshold: fn(&[f64]) -> bool,
}

/// 4,096 random states of `E` stepped on the device and by rlrig-env (f64): next state,
/// observation and reward within f32 tolerance, terminated flags equal.
fn steps_as_rlrig_env<E: Env<Obs = f32>>(gpu: &Gpu, case: ProbeCase)
where
    E::Action: FromProbe,
{
    let env = device_env(E::ID).unwrap();
    let p = E::Params::default();
    let mut rng = Rng::stream(7, Purpose::User, 0);
    let states: Vec<Vec<f32>> = (0..4096)
        .map(|_| {
            case.ranges
                .iter()
                .map(|&(lo, hi)| rng.uniform(lo, hi) as f32)
                .collect()
        })
        .collect();
    let actions: Vec<f32> = (0..4096).map(|_| (case.action)(&mut rng)).collect();
    let out = probe(gpu, &env, &states, &actions, &vec![0.5; actions.len()]).unwrap();
    let close =
        |dev: f32, cpu: f64, tol: f64| (f64::from(dev) - cpu).abs() <= tol * cpu.abs().max(1.0);
    let mut obs = vec![0.0f32; E::OBS_DIM];
    for ((s, a), got) in states.iter().zip(&actions).zip(&out) {
        let v: Vec<f64> = s.iter().map(|&x| f64::from(x)).collect();
        let mut cs = E::state_from_slice(&p, &v).unwrap();
        let tr = E::step(&p, &mut cs, &E::Action::from_probe(*a), &mut rng);
        let want = E::state_to_vec(&cs);
        for (k, (&dev, &cpu)) in got.state.iter().zip(&want).enumerate() {
            let d = f64::from(dev) - cpu;
            let tau = 2.0 * std::f64::consts::PI;
            let wrapped = case.angles.contains(&k) && (d - tau * (d / tau).round()).abs() <= 1e-4;
            assert!(
                close(dev, cpu, 1e-4) || wrapped,
                "{} state {s:?} action {a}: component {k} is {dev} on the device, {cpu} on the CPU",
                E::ID
            );
        }
        E::observe(&p, &cs, &mut obs);
        for (k, (&dev, &cpu)) in got.obs.iter().zip(&obs).enumerate() {
            assert!(
                close(dev, cpu.into(), 1e-4),
                "{} state {s:?} action {a}: observation {k} is {dev} on the device, {cpu} on the CPU",
                E::ID
            );
        }
        if (case.near_threshold)(&want) {
            continue;
        }
        assert_eq!(
            got.terminated,
            tr.terminated,
            "{} state {s:?} action {a}",
            E::ID
        );
        assert!(
            close(got.reward, tr.reward, 1e-4),
            "{} state {s:?} action {a}: reward {} on the device, {} on the CPU",
            E::ID,
            got.reward,
            tr.reward
        );
    }
}

fn discrete(n: i32) -> impl Fn(&mut Rng) -> f32 {
    move |rng| (rng.uniform(0.0, f64::from(n)).floor() as f32).min((n - 1) as f32)
}

#[test]
fn device_envs_step_as_rlrig_env_in_f32() {
    let Some(gpu) = gpu() else { return };
    const LIMIT: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
    // CartPole: across the whole non-terminal box and beyond, velocities as seen in play.
    steps_as_rlrig_env::<CartPole>(
        &gpu,
        ProbeCase {
            ranges: &[(-2.6, 2.6), (-4.0, 4.0), (-0.25, 0.25), (-4.0, 4.0)],
            action: |rng| discrete(2)(rng),
            angles: &[],
            near_threshold: |s| {
                (s[2].abs() - LIMIT).abs() < 1e-6 || (s[0].abs() - 2.4).abs() < 1e-6
            },
        },
    );
    steps_as_rlrig_env::<Acrobot>(
        &gpu,
        ProbeCase {
            ranges: &[(-3.1, 3.1), (-3.1, 3.1), (-6.0, 6.0), (-12.0, 12.0)],
            action: |rng| discrete(3)(rng),
            angles: &[0, 1],
            near_threshold: |s| (-s[0].cos() - (s[1] + s[0]).cos() - 1.0).abs() < 1e-4,
        },
    );
    steps_as_rlrig_env::<MountainCar>(
        &gpu,
        ProbeCase {
            ranges: &[(-1.25, 0.62), (-0.075, 0.075)],
            action: |rng| discrete(3)(rng),
            angles: &[],
            near_threshold: |s| (s[0] - 0.5).abs() < 1e-6 || s[1].abs() < 1e-7,
        },
    );
    // Actions beyond [-1, 1]: the force is clipped, the cost is not.
    steps_as_rlrig_env::<MountainCarContinuous>(
        &gpu,
        ProbeCase {
            ranges: &[(-1.25, 0.62), (-0.075, 0.075)],
            action: |rng| rng.uniform(-1.5, 1.5) as f32,
            angles: &[],
            near_threshold: |s| (s[0] - 0.45).abs() < 1e-6 || s[1].abs() < 1e-7,
        },
    );
    // Angles past pi (the cost normalises them), torques past the limit.
    steps_as_rlrig_env::<Pendulum>(
        &gpu,
        ProbeCase {
            ranges: &[(-4.0, 4.0), (-8.0, 8.0)],
            action: |rng| rng.uniform(-3.0, 3.0) as f32,
            angles: &[],
            near_threshold: |_| false,
        },
    );
}

/// The device's Breakout against rlrig-env's from 4,096 random game states (the ball in
/// rows 0-8, where play has it before a step; any paddle, trail and brick rows, some
/// rows empty, a few terminal), with random actions and draws: sticky repeats (draw <
/// 0.1) included, everything exact.
#[test]
fn device_breakout_steps_as_rlrig_env() {
    let Some(gpu) = gpu() else { return };
    let env = device_env(Breakout::ID).unwrap();
    // The CPU env without its own sticky draw: the test applies the device's draw.
    let p = BreakoutParams {
        sticky_action_prob: 0.0,
        ..Default::default()
    };
    let mut rng = Rng::stream(9, Purpose::User, 0);
    let mut small = |n: u32| rng.below(n) as f32;
    let mut states = Vec::new();
    let (mut actions, mut draws) = (Vec::new(), Vec::new());
    for i in 0..4096 {
        let mut s: Vec<f32> = [9, 10, 4, 10, 2, 10, 10].map(&mut small).to_vec();
        s.push(if i % 50 == 0 { 1.0 } else { 0.0 });
        s.push(small(3));
        for _ in 0..3 {
            s.push(if small(4) == 0.0 { 0.0 } else { small(1024) });
        }
        states.push(s);
        actions.push(small(3));
        draws.push(small(1000) / 1000.0);
    }
    let out = probe(&gpu, &env, &states, &actions, &draws).unwrap();
    let mut obs = vec![0.0f32; 400];
    for (((s, a), u), got) in states.iter().zip(&actions).zip(&draws).zip(&out) {
        let mut v: Vec<f64> = s[..9].iter().map(|&x| f64::from(x)).collect();
        for y in 0..10 {
            for x in 0..10 {
                let row = if (1..=3).contains(&y) {
                    s[8 + y] as u32
                } else {
                    0
                };
                v.push(f64::from((row >> x) & 1));
            }
        }
        let mut cs = Breakout::state_from_slice(&p, &v).unwrap();
        let act = if *u < 0.1 { s[8] as i32 } else { *a as i32 };
        let tr = Breakout::step(&p, &mut cs, &act, &mut rng);
        let w = Breakout::state_to_vec(&cs);
        let mut want: Vec<f32> = w[..9].iter().map(|&x| x as f32).collect();
        for y in 1..=3 {
            want.push(
                (0..10)
                    .map(|x| (w[9 + y * 10 + x] as u32) << x)
                    .sum::<u32>() as f32,
            );
        }
        assert_eq!(got.state, want, "state {s:?} action {a} draw {u}");
        assert_eq!(f64::from(got.reward), tr.reward, "state {s:?} action {a}");
        assert_eq!(got.terminated, tr.terminated, "state {s:?} action {a}");
        Breakout::observe(&p, &cs, &mut obs);
        assert_eq!(got.obs, obs, "state {s:?} action {a}");
    }
}

/// Episode returns of `episodes` random-action episodes of rlrig-env's `E` (actions
/// uniform over the action space, as the device bench draws them).
fn cpu_random_returns<E: Env>(episodes: usize, action: impl Fn(&mut Rng) -> f32) -> Vec<f64>
where
    E::Action: FromProbe,
{
    let p = E::Params::default();
    let limit = E::max_episode_steps(&p).unwrap_or(u32::MAX);
    let mut rng = Rng::stream(11, Purpose::User, 0);
    (0..episodes)
        .map(|_| {
            let mut s = E::reset(&p, &mut rng);
            let mut ret = 0.0;
            for _ in 0..limit {
                let a = E::Action::from_probe(action(&mut rng));
                let tr = E::step(&p, &mut s, &a, &mut rng);
                ret += tr.reward;
                if tr.terminated {
                    break;
                }
            }
            ret
        })
        .collect()
}

/// The device bench's random-action episodes (resets, actions, termination and time
/// limits together) return what rlrig-env's do, within four standard errors; and the
/// device counted every step submitted.
fn bench_matches_cpu<E: Env>(gpu: &Gpu, action: impl Fn(&mut Rng) -> f32)
where
    E::Action: FromProbe,
{
    let env = device_env(E::ID).unwrap();
    // Over four time limits of Acrobot per env: every env ends episodes.
    let r = bench(gpu, &env, 256, 256 * 64 * 32, 3, 0.0, Some(64)).unwrap();
    assert_eq!(r.steps, 256 * 64 * 32);
    let cpu = cpu_random_returns::<E>(3000, action);
    let n = cpu.len() as f64;
    let mean = cpu.iter().sum::<f64>() / n;
    let sd = (cpu.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let se = (sd * sd / n + sd * sd / r.episodes as f64).sqrt();
    eprintln!(
        "{}: device {:.3} over {} episodes, CPU {mean:.3} +- {sd:.3} over {n}; 4 SE = {:.3}",
        E::ID,
        r.mean_return,
        r.episodes,
        4.0 * se
    );
    assert!(r.episodes > 100, "{}: only {} episodes", E::ID, r.episodes);
    assert!(
        (r.mean_return - mean).abs() <= 4.0 * se + 1e-3,
        "{}: random-action return {} on the device over {} episodes, {mean} +- {sd} on the CPU over {n}",
        E::ID,
        r.mean_return,
        r.episodes
    );
}

#[test]
fn device_bench_episodes_match_rlrig_env_statistics() {
    let Some(gpu) = gpu() else { return };
    bench_matches_cpu::<CartPole>(&gpu, discrete(2));
    bench_matches_cpu::<Acrobot>(&gpu, discrete(3));
    bench_matches_cpu::<MountainCar>(&gpu, discrete(3));
    bench_matches_cpu::<MountainCarContinuous>(&gpu, |rng| rng.uniform(-1.0, 1.0) as f32);
    bench_matches_cpu::<Pendulum>(&gpu, |rng| rng.uniform(-2.0, 2.0) as f32);
    bench_matches_cpu::<Breakout>(&gpu, discrete(3));
}

#[test]
fn device_bench_rejects_what_it_cannot_run() {
    let Some(gpu) = gpu() else { return };
    let e = device_env("LunarLander-v3").unwrap_err();
    assert!(matches!(e, rlrig_gpu::GpuError::Unsupported(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains("no device kernel") && e.contains("Pendulum-v1"),
        "{e}"
    );
    let env = device_env("CartPole-v1").unwrap();
    let e = bench(&gpu, &env, 0, 100, 0, 0.0, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--num-envs 0"), "{e}");
    let e = bench(&gpu, &env, 1, 1 << 33, 0, 0.0, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("2^32 steps per env"), "{e}");
    let e = probe(&gpu, &env, &[vec![0.0; 3]], &[0.0], &[0.0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("4 floats"), "{e}");
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
        .expect("too large for one launch")
        .to_string();
    assert!(err.contains("train fewer seeds per launch"), "{err}");
}

/// Seeds `seeds` of CartPole PPO with 16 hidden units (kernels small enough for
/// lavapipe to compile fast) laid out as `tuning` with 8-row passes, after `iterations`
/// iterations: every run's weights and metrics.
fn train_small(
    gpu: &Gpu,
    seeds: &[u64],
    iterations: u64,
    tuning: Tuning,
) -> (Vec<Vec<f32>>, Vec<Vec<rlrig_gpu::IterStats>>) {
    let cfg = PpoConfig {
        hidden: vec![16, 16],
        ..small(4 * 128 * iterations)
    };
    let tuning = Tuning {
        rows: Some(8),
        ..tuning
    };
    let mut p = ResidentPpo::new(gpu, &cfg, seeds, &tuning).unwrap();
    p.run(iterations).unwrap();
    (p.params().unwrap(), p.metrics().unwrap())
}

/// The largest difference between two runs' weights, relative to the first's (at least
/// 0.01).
fn worst_relative(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs() / x.abs().max(1e-2))
        .fold(0.0f32, f32::max)
}

#[test]
fn looped_and_written_out_unit_products_train_the_same_weights() {
    let Some(gpu) = gpu() else { return };
    let [looped, written] = [false, true].map(|unroll_units| {
        let tuning = Tuning {
            unroll_units,
            ..Tuning::default()
        };
        train_small(&gpu, &[3], 2, tuning).0
    });
    let worst = worst_relative(&looped, &written);
    assert!(worst < 1e-4, "weights differ by {worst} (relative)");
}

#[test]
fn one_two_or_four_threads_per_unit_train_the_same_weights() {
    let Some(gpu) = gpu() else { return };
    let train = |split: usize| {
        let tuning = Tuning {
            split,
            ..Tuning::default()
        };
        train_small(&gpu, &[3, 4], 2, tuning)
    };
    let (one, m1) = train(1);
    for split in [2, 4] {
        let (w, m) = train(split);
        let worst = worst_relative(&one, &w);
        assert!(
            worst < 1e-4,
            "split {split}: weights differ by {worst} (relative)"
        );
        // The rollouts saw the same episodes (the policies differ in the last bits).
        for (a, b) in m1.iter().zip(&m) {
            assert_eq!(a[0].episodes, b[0].episodes, "split {split}");
        }
    }
    // A split the hidden units cannot take is an error that names it.
    let err = ResidentPpo::new(
        &gpu,
        &small(512),
        &[3],
        &Tuning {
            split: 3,
            ..Tuning::default()
        },
    )
    .err()
    .expect("split 3")
    .to_string();
    assert!(err.contains("split = 3"), "{err}");
}

#[test]
fn fused_dispatches_and_staged_weights_train_the_same_bits_and_the_profile_counts_them() {
    let Some(gpu) = gpu() else { return };
    let cfg = PpoConfig {
        hidden: vec![16, 16],
        ..small(4 * 128 * 3)
    };
    let mut out = Vec::new();
    for (fused, shared_weights) in [(false, false), (true, false), (false, true), (true, true)] {
        let tuning = Tuning {
            rows: Some(8),
            fused,
            shared_weights,
            ..Tuning::default()
        };
        let mut p = ResidentPpo::new(&gpu, &cfg, &[3, 4], &tuning).unwrap();
        p.run(2).unwrap();
        // The third iteration timed dispatch by dispatch (where the adapter can).
        if let Ok(k) = p.profile(5) {
            assert_eq!(k.iterations, 1, "only one iteration was left");
            // 128 steps in 4 rollout dispatches, GAE, 4 x 4 updates; fused: 1 + 1 + 1.
            assert_eq!(k.dispatches, if fused { 3 } else { 21 });
            assert!(k.kernels.iter().all(|&s| s > 0.0), "{k:?}");
        } else {
            p.run(1).unwrap();
        }
        assert_eq!(p.iteration(), 3);
        out.push((
            tuning.to_string(),
            p.params().unwrap(),
            p.metrics().unwrap(),
        ));
    }
    for (name, params, metrics) in &out[1..] {
        assert_eq!(params, &out[0].1, "{name} changed the weights");
        assert_eq!(metrics, &out[0].2, "{name} changed the metrics");
    }
}
