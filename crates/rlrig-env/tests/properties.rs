//! Property tests on the executors with a counting env: for any number of envs,
//! threads and batch size, every env is stepped exactly once per call with its own
//! action, none skipped, none twice.

#![allow(clippy::needless_range_loop)]

use proptest::prelude::*;
use rlrig_env::{Env, Rng, Space, SyncVecEnv, Transition, VecConfig};

/// Observation: [steps taken, last action]. Never ends.
struct Counter;

#[derive(Clone, Copy, Debug, Default)]
struct CounterState {
    steps: u32,
    last: i32,
}

impl Env for Counter {
    type Params = ();
    type State = CounterState;
    type Action = i32;
    type Obs = f32;
    const ID: &'static str = "Counter-v0";
    const OBS_DIM: usize = 2;
    fn observation_space(_: &()) -> Space {
        Space::box1(vec![0.0, 0.0], vec![f32::MAX, f32::MAX])
    }
    fn action_space(_: &()) -> Space {
        Space::Discrete { n: 1 << 20 }
    }
    fn max_episode_steps(_: &()) -> Option<u32> {
        None
    }
    fn reset(_: &(), _: &mut Rng) -> CounterState {
        CounterState::default()
    }
    fn step(_: &(), s: &mut CounterState, a: &i32, _: &mut Rng) -> Transition {
        s.steps += 1;
        s.last = *a;
        Transition {
            reward: f64::from(*a),
            terminated: false,
        }
    }
    fn observe(_: &(), s: &CounterState, out: &mut [f32]) {
        out[0] = s.steps as f32;
        out[1] = s.last as f32;
    }
    fn state_to_vec(s: &CounterState) -> Vec<f64> {
        vec![f64::from(s.steps), f64::from(s.last)]
    }
    fn state_from_slice(_: &(), _: &[f64]) -> Result<CounterState, String> {
        Ok(CounterState::default())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn sync_steps_every_env_exactly_once_with_its_own_action(
        num_envs in 1usize..70, threads in 1usize..6, calls in 1u32..6,
    ) {
        let mut env = SyncVecEnv::<Counter>::new(VecConfig::new(num_envs).threads(threads).min_thread_work_ns(0)).unwrap();
        for c in 1..=calls {
            let actions: Vec<i32> = (0..num_envs as i32).map(|k| k * 7 + c as i32).collect();
            env.step(&actions).unwrap();
            for k in 0..num_envs {
                prop_assert_eq!(env.obs()[2 * k], c as f32, "env {} step count", k);
                prop_assert_eq!(env.obs()[2 * k + 1], actions[k] as f32, "env {} got another env's action", k);
                prop_assert_eq!(env.rewards()[k], f64::from(actions[k]));
            }
        }
    }

    #[test]
    fn async_returns_each_sent_env_once_and_steps_it_once(
        num_envs in 1usize..40, threads in 1usize..5, batch_frac in 0.0f64..1.0, rounds in 1usize..20,
    ) {
        let batch = 1 + ((num_envs - 1) as f64 * batch_frac) as usize;
        let mut env = rlrig_env::AsyncVecEnv::<Counter>::new(VecConfig::new(num_envs).threads(threads), batch).unwrap();
        let mut sent = vec![0u32; num_envs];
        env.async_reset().unwrap();
        for _ in 0..rounds {
            let b = env.recv().unwrap();
            let ids = b.env_ids.to_vec();
            let obs = b.obs.as_f32().expect("Counter's observations are float32");
            let mut seen = ids.clone();
            seen.sort_unstable();
            seen.dedup();
            prop_assert_eq!(seen.len(), ids.len(), "an env came back twice in one batch");
            for (j, &k) in ids.iter().enumerate() {
                prop_assert_eq!(obs[2 * j], sent[k] as f32, "env {} stepped a wrong number of times", k);
                if sent[k] > 0 {
                    prop_assert_eq!(obs[2 * j + 1], k as f32, "env {} got another env's action", k);
                }
            }
            let actions: Vec<i32> = ids.iter().map(|&k| k as i32).collect();
            env.send(&actions, &ids).unwrap();
            for &k in &ids {
                sent[k] += 1;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The executors' batch pre-check agrees with checking action by action.
    #[test]
    fn batch_action_check_agrees_with_the_per_action_check(
        discrete in prop::collection::vec(-3i32..6, 0..40),
        n in 1u32..5,
        continuous in prop::collection::vec(
            prop_oneof![-2.0f32..2.0, Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY)],
            0..40,
        ),
    ) {
        use rlrig_env::Action;
        let space = Space::Discrete { n };
        let one_by_one = discrete.iter().all(|a| a.check(&space).is_ok());
        prop_assert_eq!(<i32 as Action>::all_valid(&discrete, &space), one_by_one);
        let boxed = Space::box1(vec![-1.0, -1.0], vec![1.0, 1.0]);
        let pairs = <[f32; 2] as Action>::from_flat(&continuous[..continuous.len() / 2 * 2]);
        let one_by_one = pairs.iter().all(|a| a.check(&boxed).is_ok());
        prop_assert_eq!(<[f32; 2] as Action>::all_valid(pairs, &boxed), one_by_one);
    }
}
