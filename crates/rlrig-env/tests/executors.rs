//! Executor semantics: determinism across thread counts, sync vs async per env,
//! auto-reset modes, and errors that leave the batch untouched.

#![allow(clippy::needless_range_loop)]

use rlrig_env::envs::{CartPole, Pendulum};
use rlrig_env::{
    ATARI_IDS, ActionBuf, AutoReset, Dtype, ENV_IDS, EnvError, ObsBuf, Purpose, Rng, Space,
    SyncVecEnv, VecConfig, VecEnvDyn, make_async, make_sync, spec,
};

/// Env `k`'s `j`-th action comes from its own stream, so every executor and thread
/// count sees the same per-env action sequence.
#[derive(Clone)]
struct Actor {
    space: Space,
    rngs: Vec<Rng>,
    /// The last batch of actions, discrete or continuous as the space is.
    di: Vec<i32>,
    dc: Vec<f32>,
}

impl Actor {
    fn new(id: &str, n: usize) -> Actor {
        Actor {
            space: spec(id).unwrap().action_space,
            rngs: (0..n as u64)
                .map(|k| Rng::stream(99, Purpose::User, k))
                .collect(),
            di: Vec::new(),
            dc: Vec::new(),
        }
    }

    /// The next action of each env of `envs`, in that order, as one batch.
    fn actions(&mut self, envs: impl IntoIterator<Item = usize>) -> ActionBuf<'_> {
        self.di.clear();
        self.dc.clear();
        for k in envs {
            match &self.space {
                Space::Discrete { n } => self.di.push(self.rngs[k].below(*n) as i32),
                Space::Box { low, high, .. } => {
                    for (l, h) in low.iter().zip(high) {
                        // Beyond the bounds on purpose: the envs clip.
                        let a = self.rngs[k].uniform(f64::from(*l) * 1.2, f64::from(*h) * 1.2);
                        self.dc.push(a as f32);
                    }
                }
            }
        }
        if self.space.is_discrete() {
            ActionBuf::Discrete(&self.di)
        } else {
            ActionBuf::Continuous(&self.dc)
        }
    }
}

/// One observation row as a number (FNV-1a of its bits): the traces below compare
/// them, and an Atari frame is 100,800 numbers.
fn row_hash(row: ObsBuf<'_>) -> u64 {
    row.to_vec().iter().fold(0xcbf2_9ce4_8422_2325, |h, x| {
        (h ^ u64::from(x.to_bits())).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash of each of `obs`'s rows of `d` values.
fn row_hashes(obs: ObsBuf<'_>, d: usize) -> impl Iterator<Item = u64> + '_ {
    (0..obs.len() / d).map(move |k| row_hash(obs.slice(k * d, d)))
}

/// `(envs, steps)` for `id`: the Atari games (~0.1 s to load a ROM, ~0.1 ms a frame)
/// run with fewer of both.
fn sized(id: &str, envs: usize, steps: usize) -> (usize, usize) {
    if ATARI_IDS.contains(&id) {
        (envs.clamp(1, 6), steps.min(40))
    } else {
        (envs, steps)
    }
}

/// Steps `env` `steps` times with the actor's per-env actions and returns every output
/// of every step (observations, rewards, flags, final observations) as bits.
fn drive(env: &mut dyn VecEnvDyn, actor: &mut Actor, steps: usize) -> Vec<u64> {
    let n = env.num_envs();
    let mut trace = Vec::new();
    for _ in 0..steps {
        env.step(actor.actions(0..n)).unwrap();
        let d = env.obs().len() / n;
        trace.extend(row_hashes(env.obs(), d));
        trace.extend(env.rewards().iter().map(|x| x.to_bits()));
        trace.extend(
            env.terminated()
                .iter()
                .chain(env.truncated())
                .map(|&b| b as u64),
        );
        if let Some(f) = env.final_obs() {
            trace.extend(row_hashes(f, d));
        }
    }
    trace
}

/// Every id, but of the Atari games (with the `atari` feature) only Pong's two ids: the
/// games share one implementation, and each emulator takes ~0.1 s to load its ROM.
fn ids() -> Vec<&'static str> {
    ENV_IDS
        .iter()
        .copied()
        .filter(|id| !ATARI_IDS.contains(id) || ATARI_IDS.iter().take(2).any(|a| a == id))
        .collect()
}

#[test]
fn observations_come_in_the_dtype_their_space_names() {
    for id in ids() {
        let env = make_sync(id, VecConfig::new(2)).unwrap();
        let Space::Box { dtype, shape, .. } = spec(id).unwrap().observation_space else {
            panic!("{id}: observation space is not a Box");
        };
        assert_eq!(env.obs().dtype(), dtype, "{id}");
        assert_eq!(env.obs().len(), 2 * shape.iter().product::<usize>(), "{id}");
        // Atari's screens are bytes (Gymnasium's uint8); every other env is float32.
        let want = if ATARI_IDS.contains(&id) {
            Dtype::UInt8
        } else {
            Dtype::Float32
        };
        assert_eq!(dtype, want, "{id}");
    }
}

/// Every env with its default parameters, and the opt-in modes that change the
/// kernels (Acrobot's fast sin/cos): they must be as deterministic.
fn cases() -> Vec<(&'static str, Vec<(String, String)>)> {
    let mut cases: Vec<_> = ids().into_iter().map(|id| (id, Vec::new())).collect();
    cases.push(("Acrobot-v1", vec![("fast_trig".into(), "true".into())]));
    cases
}

/// The initial observations and then every output of `steps` steps.
fn sync_trace(
    (id, args): &(&str, Vec<(String, String)>),
    n: usize,
    threads: usize,
    steps: usize,
    mode: AutoReset,
) -> Vec<u64> {
    let cfg = VecConfig::new(n)
        .threads(threads)
        .seed(5)
        .autoreset(mode)
        .min_thread_work_ns(0)
        .env_args(args.clone());
    let mut env = make_sync(id, cfg).unwrap();
    let mut trace: Vec<u64> = row_hashes(env.obs(), env.obs().len() / n).collect();
    trace.extend(drive(env.as_mut(), &mut Actor::new(id, n), steps));
    trace
}

#[test]
fn sync_results_are_bit_identical_for_1_2_and_7_threads() {
    for case in &cases() {
        let id = case.0;
        for mode in [AutoReset::NextStep, AutoReset::SameStep] {
            // 37 envs: not a multiple of the SIMD width nor of any thread count.
            let (n, steps) = sized(id, 37, 600);
            let one = sync_trace(case, n, 1, steps, mode);
            assert_eq!(
                one,
                sync_trace(case, n, 2, steps, mode),
                "{id} {:?} {mode:?}: 1 vs 2 threads",
                case.1
            );
            assert_eq!(
                one,
                sync_trace(case, n, 7, steps, mode),
                "{id} {:?} {mode:?}: 1 vs 7 threads",
                case.1
            );
        }
    }
}

#[test]
fn different_seeds_give_different_batches() {
    let a = make_sync("CartPole-v1", VecConfig::new(8).seed(1)).unwrap();
    let b = make_sync("CartPole-v1", VecConfig::new(8).seed(2)).unwrap();
    assert_ne!(a.obs(), b.obs());
}

/// Per env: the sequence of (obs, reward, terminated, truncated) it produced.
type PerEnv = Vec<Vec<(u64, u64, bool, bool)>>;

#[test]
fn async_trajectories_equal_sync_ones_per_env() {
    // Both auto-reset modes, and long enough for Pendulum's and MountainCar's 200-step
    // time limits: the executors share `finish_env`, but the sync one runs it in two
    // passes (common case first), which this pins to the one-env-at-a-time order.
    // The async executor steps env by env (`Env::step`), the sync one through the
    // batch kernels: equal trajectories also pin the kernels to the scalar step.
    for ((id, args), mode) in cases()
        .into_iter()
        .flat_map(|c| [(c.clone(), AutoReset::NextStep), (c, AutoReset::SameStep)])
    {
        let (n, steps) = sized(id, 16, 210);
        let d = spec(id).unwrap().obs_dim;
        // Sync.
        let cfg = VecConfig::new(n).seed(3).autoreset(mode);
        let mut sync = make_sync(id, cfg.env_args(args.clone())).unwrap();
        let mut actor = Actor::new(id, n);
        let mut want: PerEnv = (0..n)
            .map(|k| vec![(row_hash(sync.obs().slice(k * d, d)), 0, false, false)])
            .collect();
        for _ in 0..steps {
            sync.step(actor.actions(0..n)).unwrap();
            for (k, w) in want.iter_mut().enumerate() {
                w.push((
                    row_hash(sync.obs().slice(k * d, d)),
                    sync.rewards()[k].to_bits(),
                    sync.terminated()[k],
                    sync.truncated()[k],
                ));
            }
        }
        // Async: batches of 5 with 3 worker threads; envs progress unevenly.
        let cfg = VecConfig::new(n).seed(3).threads(3).autoreset(mode);
        let mut asy = make_async(id, cfg.env_args(args.clone()), 5).unwrap();
        let mut actor = Actor::new(id, n);
        let mut got: PerEnv = vec![Vec::new(); n];
        asy.async_reset().unwrap();
        while got.iter().any(|g| g.len() < steps + 1) {
            let b = asy.recv().unwrap();
            let ids = b.env_ids.to_vec();
            for (j, &k) in ids.iter().enumerate() {
                got[k].push((
                    row_hash(b.obs.slice(j * d, d)),
                    b.rewards[j].to_bits(),
                    b.terminated[j],
                    b.truncated[j],
                ));
            }
            asy.send(actor.actions(ids.iter().copied()), &ids).unwrap();
        }
        for k in 0..n {
            assert_eq!(
                got[k][..=steps],
                want[k][..],
                "{id} {args:?} ({mode:?}): env {k} differs between async and sync"
            );
        }
    }
}

#[test]
fn next_step_and_same_step_autoreset_agree_on_episode_boundaries() {
    // One env, same seed and actions. NextStep spends one extra call on the reset.
    let mut next = SyncVecEnv::<CartPole>::new(VecConfig::new(1).seed(11)).unwrap();
    let mut same =
        SyncVecEnv::<CartPole>::new(VecConfig::new(1).seed(11).autoreset(AutoReset::SameStep))
            .unwrap();
    assert_eq!(next.obs(), same.obs());
    let mut rng = Rng::stream(4, Purpose::User, 0);
    let mut episodes = 0;
    while episodes < 5 {
        let a = [rng.below(2) as i32];
        next.step(&a).unwrap();
        same.step(&a).unwrap();
        assert_eq!(next.rewards(), same.rewards());
        assert_eq!(next.terminated(), same.terminated());
        if next.terminated()[0] || next.truncated()[0] {
            episodes += 1;
            assert_eq!(
                same.final_obs().unwrap(),
                next.obs(),
                "SameStep keeps the final observation"
            );
            next.step(&[0]).unwrap();
            assert_eq!(
                next.rewards()[0],
                0.0,
                "NextStep: the reset step pays nothing"
            );
            assert!(!next.terminated()[0] && !next.truncated()[0]);
            assert_eq!(next.elapsed(0), 0);
            assert_eq!(
                same.obs(),
                next.obs(),
                "both reset to the same first observation"
            );
        } else {
            assert_eq!(next.obs(), same.obs());
        }
    }
    assert!(next.final_obs().is_none());
}

#[test]
fn time_limit_truncates_pendulum_at_200() {
    let mut env = SyncVecEnv::<Pendulum>::new(VecConfig::new(3)).unwrap();
    for t in 1..=200 {
        env.step(&[0.5, -0.5, 3.0]).unwrap();
        assert_eq!(env.truncated(), &[t == 200; 3], "step {t}");
        assert_eq!(env.terminated(), &[false; 3]);
    }
    env.step(&[0.0; 3]).unwrap();
    assert_eq!(
        env.rewards(),
        &[0.0; 3],
        "the step after truncation is the reset"
    );
}

#[test]
fn bad_actions_are_errors_naming_env_index_and_value_and_change_nothing() {
    let mut env = make_sync("CartPole-v1", VecConfig::new(4)).unwrap();
    let before = env.obs().to_vec();
    let e = env.step(ActionBuf::Discrete(&[0, 1, 2, 0])).unwrap_err();
    assert!(
        matches!(
            e,
            EnvError::ActionOutOfRange {
                index: 2,
                value: 2,
                n: 2,
                ..
            }
        ),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("CartPole-v1") && msg.contains("env 2") && msg.contains("is 2"),
        "{msg}"
    );
    let e = env.step(ActionBuf::Discrete(&[0, -1, 0, 0])).unwrap_err();
    assert!(
        matches!(
            e,
            EnvError::ActionOutOfRange {
                index: 1,
                value: -1,
                ..
            }
        ),
        "{e}"
    );
    let e = env.step(ActionBuf::Discrete(&[0, 1, 0])).unwrap_err();
    assert!(e.to_string().contains("expected 4 action values"), "{e}");
    let e = env.step(ActionBuf::Continuous(&[0.0; 4])).unwrap_err();
    assert!(e.to_string().contains("discrete"), "{e}");
    assert_eq!(
        env.obs(),
        ObsBuf::F32(&before),
        "a rejected step must not move any env"
    );

    let mut env = make_sync("Pendulum-v1", VecConfig::new(3)).unwrap();
    let e = env
        .step(ActionBuf::Continuous(&[0.0, f32::NAN, 1.0]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            EnvError::ActionNotFinite {
                index: 1,
                component: 0,
                ..
            }
        ),
        "{e}"
    );
    let e = env
        .step(ActionBuf::Continuous(&[0.0, 1.0, f32::NEG_INFINITY]))
        .unwrap_err();
    assert!(
        e.to_string().contains("env 2") && e.to_string().contains("-inf"),
        "{e}"
    );
}

#[test]
fn async_rejects_misuse_with_clear_errors() {
    let mut env = make_async("CartPole-v1", VecConfig::new(4).threads(2), 2).unwrap();
    let e = env.recv().unwrap_err();
    assert!(matches!(e, EnvError::NothingInFlight { .. }), "{e}");
    env.async_reset().unwrap();
    let ids = env.recv().unwrap().env_ids.to_vec();
    let others: Vec<usize> = (0..4).filter(|k| !ids.contains(k)).collect();
    let e = env
        .send(ActionBuf::Discrete(&[0]), &[others[0]])
        .unwrap_err();
    assert!(matches!(e, EnvError::InFlight { .. }), "{e}");
    let e = env
        .send(ActionBuf::Discrete(&[0, 0]), &[ids[0], ids[0]])
        .unwrap_err();
    assert!(matches!(e, EnvError::InFlight { .. }), "{e}");
    let e = env.send(ActionBuf::Discrete(&[0]), &[9]).unwrap_err();
    assert!(matches!(e, EnvError::EnvIndex { index: 9, .. }), "{e}");
    let e = env.send(ActionBuf::Discrete(&[0, 5]), &ids).unwrap_err();
    assert!(
        matches!(e, EnvError::ActionOutOfRange { value: 5, .. }),
        "{e}"
    );
    // After all those errors the envs are still usable.
    env.send(ActionBuf::Discrete(&[0, 1]), &ids).unwrap();
    assert_eq!(env.recv().unwrap().env_ids.len(), 2);
    assert!(make_async("CartPole-v1", VecConfig::new(4), 5).is_err());
    assert!(make_async("CartPole-v1", VecConfig::new(4), 0).is_err());
}

#[test]
fn bad_configs_and_states_are_errors() {
    assert!(make_sync("CartPole-v1", VecConfig::new(0)).is_err());
    assert!(make_sync("CartPole-v1", VecConfig::new(4).threads(0)).is_err());
    let e = rlrig_env::replay::replay("CartPole-v1", &[0.0, 0.0], &[vec![0.0]]).unwrap_err();
    assert!(e.to_string().contains("expected 4 numbers"), "{e}");
    let e = rlrig_env::replay::replay("Pendulum-v1", &[0.0, f64::NAN], &[vec![0.0]]).unwrap_err();
    assert!(e.to_string().contains("state[1]"), "{e}");
    let e =
        rlrig_env::replay::replay("Acrobot-v1", &[0.0; 4], &[vec![1.0], vec![3.0]]).unwrap_err();
    assert!(
        e.to_string().contains("action 1") && e.to_string().contains("is 3"),
        "{e}"
    );
    let e = rlrig_env::replay::replay("Acrobot-v1", &[0.0; 4], &[vec![0.5]]).unwrap_err();
    assert!(e.to_string().contains("not an integer"), "{e}");
    let e = rlrig_env::replay::replay("Pendulum-v1", &[0.0; 2], &[vec![0.5, 1.0]]).unwrap_err();
    assert!(e.to_string().contains("expected 1 number"), "{e}");
    let e = rlrig_env::replay::replay("Pendulum-v1", &[0.0; 2], &[]).unwrap_err();
    assert!(e.to_string().contains("no actions"), "{e}");
}

#[test]
fn env_args_reach_the_envs_and_bad_ones_are_errors() {
    let arg = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    // A time limit of 5 truncates every CartPole episode that lasts that long.
    let cfg = VecConfig::new(3)
        .seed(1)
        .env_args(arg("max_episode_steps", "5"));
    let mut env = make_sync("CartPole-v1", cfg.clone()).unwrap();
    assert_eq!(env.spec().max_episode_steps, Some(5));
    for t in 1..=5 {
        env.step(ActionBuf::Discrete(&[0, 1, 0])).unwrap();
        assert_eq!(env.truncated(), &[t == 5; 3], "step {t}");
    }
    let asy = make_async("CartPole-v1", cfg, 3).unwrap();
    assert_eq!(asy.spec().max_episode_steps, Some(5));
    // MinAtar has no limit of its own; a given one truncates (gymnax cuts at 1,000).
    let mut env = make_sync("MinAtar/Freeway-v1", VecConfig::new(2).seed(1)).unwrap();
    assert_eq!(env.spec().max_episode_steps, None);
    let cfg = VecConfig::new(2)
        .seed(1)
        .env_args(arg("max_episode_steps", "7"));
    let mut limited = make_sync("MinAtar/Freeway-v1", cfg).unwrap();
    assert_eq!(limited.spec().max_episode_steps, Some(7));
    // (The step after an episode's end resets it, as Gymnasium's next-step autoreset.)
    for t in 1..=16 {
        env.step(ActionBuf::Discrete(&[1, 0])).unwrap();
        limited.step(ActionBuf::Discrete(&[1, 0])).unwrap();
        assert_eq!(env.truncated(), &[false; 2], "step {t}");
        assert_eq!(limited.truncated(), &[t == 7 || t == 15; 2], "step {t}");
    }
    // The fast sin/cos are not libm's: the states' last bits differ (the float32
    // observations of 50 steps need not), and Pendulum's g reaches the dynamics.
    let states = |id: &str, args: Vec<(String, String)>| {
        let mut env = make_sync(id, VecConfig::new(8).seed(4).env_args(args)).unwrap();
        drive(env.as_mut(), &mut Actor::new(id, 8), 50);
        env.snapshot().states
    };
    assert!(states("Acrobot-v1", Vec::new()) != states("Acrobot-v1", arg("fast_trig", "true")));
    assert!(states("Pendulum-v1", Vec::new()) != states("Pendulum-v1", arg("g", "1.5")));
    for (id, k, v, want) in [
        (
            "Acrobot-v1",
            "fast_trig",
            "yes",
            "'yes' is not true or false",
        ),
        (
            "Acrobot-v1",
            "fast",
            "1",
            "this env takes: max_episode_steps, fast_trig",
        ),
        ("CartPole-v1", "max_episode_steps", "0", "at least 1 step"),
        (
            "MinAtar/Asterix-v1",
            "max_episode_steps",
            "0",
            "at least 1 step",
        ),
        (
            "MinAtar/Breakout-v1",
            "speed",
            "3",
            "this env takes: sticky_action_prob, max_episode_steps",
        ),
        ("Pendulum-v1", "g", "inf", "not a finite number"),
        ("LunarLander-v3", "g", "1", "this env takes none"),
    ] {
        let cfg = VecConfig::new(2).env_args(arg(k, v));
        let e = make_sync(id, cfg.clone()).err().unwrap().to_string();
        assert!(e.starts_with(&format!("{id}: parameter {k}={v}: ")), "{e}");
        assert!(e.contains(want), "{e}");
        assert_eq!(make_async(id, cfg, 1).err().unwrap().to_string(), e);
        let e2 = rlrig_env::replay::replay_with(id, &arg(k, v), &[0.0; 4], &[vec![0.0]]);
        assert_eq!(e2.unwrap_err().to_string(), e);
    }
}

#[test]
fn a_restored_snapshot_continues_bit_identically() {
    for id in ids() {
        let (n, steps) = sized(id, 13, 333);
        let mut a = make_sync(id, VecConfig::new(n).seed(21)).unwrap();
        let mut actor = Actor::new(id, n);
        drive(a.as_mut(), &mut actor, steps);
        let snap = a.snapshot();
        let mut actor_b = actor.clone();
        let mut b = make_sync(id, VecConfig::new(n).seed(999)).unwrap();
        b.restore(&snap).unwrap();
        assert_eq!(a.obs(), b.obs(), "{id}: restored observations");
        assert_eq!(
            drive(a.as_mut(), &mut actor, steps + 67),
            drive(b.as_mut(), &mut actor_b, steps + 67),
            "{id}: continuation"
        );
        let mut wrong = make_sync(id, VecConfig::new(n + 1)).unwrap();
        assert!(wrong.restore(&snap).is_err());
    }
}

#[test]
fn a_snapshot_restores_only_into_an_executor_with_the_same_env_args() {
    let n = 9;
    let with = |args: &[(&str, &str)]| {
        let args = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        make_sync("Acrobot-v1", VecConfig::new(n).seed(4).env_args(args)).unwrap()
    };
    let mut a = with(&[("fast_trig", "true"), ("max_episode_steps", "50")]);
    let mut actor = Actor::new("Acrobot-v1", n);
    drive(a.as_mut(), &mut actor, 77);
    let snap = a.snapshot();
    // Same parameters, given in another order (and one twice, the last counting).
    let mut b = with(&[
        ("max_episode_steps", "9"),
        ("max_episode_steps", "50"),
        ("fast_trig", "true"),
    ]);
    b.restore(&snap).unwrap();
    let mut actor_b = actor.clone();
    assert_eq!(
        drive(a.as_mut(), &mut actor, 120),
        drive(b.as_mut(), &mut actor_b, 120)
    );
    for other in [
        vec![("fast_trig", "true")],
        vec![("fast_trig", "false"), ("max_episode_steps", "50")],
        vec![],
    ] {
        let e = with(&other).restore(&snap).unwrap_err().to_string();
        assert!(e.contains("snapshot was taken with env args"), "{e}");
        assert!(e.contains("\"fast_trig\": \"true\""), "{e}");
    }
    // A snapshot from before env args were recorded restores into a default executor.
    let mut json: serde_json::Value = serde_json::to_value(with(&[]).snapshot()).unwrap();
    json.as_object_mut().unwrap().remove("env_args");
    let old: rlrig_env::VecSnapshot = serde_json::from_value(json).unwrap();
    with(&[]).restore(&old).unwrap();
}

#[test]
fn small_batches_stay_on_one_thread_unless_forced() {
    let small = SyncVecEnv::<CartPole>::new(VecConfig::new(256).threads(2)).unwrap();
    assert_eq!(small.threads_used(), 1);
    let big = SyncVecEnv::<CartPole>::new(VecConfig::new(8192).threads(2)).unwrap();
    assert_eq!(big.threads_used(), 2);
    let forced =
        SyncVecEnv::<CartPole>::new(VecConfig::new(64).threads(3).min_thread_work_ns(0)).unwrap();
    assert_eq!(forced.threads_used(), 3);
    // Envs without a vectorised kernel split per env: 14 walkers on 7
    // threads use all 7 (8-lane rounding allowed 2), and the result does not change.
    let walkers = |t| {
        SyncVecEnv::<rlrig_env::envs::bipedal_walker::BipedalWalker>::new(
            VecConfig::new(14).threads(t).seed(5),
        )
        .unwrap()
    };
    let (mut one, mut seven) = (walkers(1), walkers(7));
    assert_eq!(seven.threads_used(), 7);
    let actions: Vec<f32> = (0..56).map(|i| 0.3 * (i % 3) as f32 - 0.3).collect();
    for _ in 0..20 {
        one.step(&actions).unwrap();
        seven.step(&actions).unwrap();
        assert_eq!(one.obs(), seven.obs());
        assert_eq!(one.rewards(), seven.rewards());
    }
}

/// `episode_cap` is a time limit for envs that have none (MinAtar) and leaves a
/// registered limit alone (CartPole's 500).
#[test]
fn episode_cap_truncates_only_envs_without_a_time_limit() {
    let mut env =
        SyncVecEnv::<rlrig_env::envs::SpaceInvaders>::new(VecConfig::new(2).seed(3).episode_cap(7))
            .unwrap();
    for t in 1..=7 {
        // No-op: the cannon sits still; the aliens cannot reach it in 7 steps.
        env.step(&[0, 0]).unwrap();
        assert_eq!(env.truncated(), &[t == 7, t == 7], "step {t}");
        assert_eq!(env.terminated(), &[false, false]);
    }
    let cap = VecConfig::new(1).episode_cap(7);
    let mut cp = SyncVecEnv::<rlrig_env::envs::CartPole>::new(cap).unwrap();
    // Pushing right and left in turn keeps the pole up for more than 7 steps.
    for t in 1..=8 {
        cp.step(&[t % 2]).unwrap();
        assert!(
            !cp.truncated()[0],
            "CartPole keeps its own limit (step {t})"
        );
    }
}
