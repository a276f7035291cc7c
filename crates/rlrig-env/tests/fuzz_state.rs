//! Property-based fuzzing of the env state that comes from outside: `rlrig replay
//! --state` (through [`rlrig_env::replay::replay_with`], as the command calls it) and the
//! executor snapshots that checkpoints hold ([`rlrig_env::VecEnvDyn::restore`]). Random
//! vectors, including NaN and infinities, and mutations of valid states must give an
//! error or a state that steps, never a panic. Fixed seeds and case counts keep the run
//! short and repeatable.

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};
use rlrig_env::replay::replay_with;
use rlrig_env::{ATARI_IDS, ActionBuf, ENV_IDS, Env, EnvVisitor, Purpose, Rng, Space, VecConfig};

/// The ids whose state is a vector: all but the Atari games (their state is the
/// emulator's; `atari_golden.rs` and the executors' snapshot test cover them).
fn state_ids() -> Vec<&'static str> {
    ENV_IDS
        .iter()
        .copied()
        .filter(|id| !ATARI_IDS.contains(id))
        .collect()
}

fn config(cases: u32, seed: u64) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..ProptestConfig::default()
    }
}

/// Numbers a state vector may hold: the awkward ones often, anything now and then.
fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            Just(-0.0),
            Just(f64::MAX),
            Just(f64::MIN),
            Just(f64::MIN_POSITIVE),
            Just(1e300),
            Just(-1e300),
            Just(f64::from(u32::MAX)),
            Just(4294967296.0),
            Just(f64::from(i32::MIN)),
            Just(0.5),
        ],
        4 => (-12i32..=12).prop_map(f64::from),
        2 => -1e3..1e3f64,
        1 => any::<f64>(),
    ]
}

/// An edit of a valid state vector: positions are taken modulo its length.
#[derive(Clone, Debug)]
enum Edit {
    Set(usize, f64),
    Add(usize, f64),
    Truncate(usize),
    Insert(usize, f64),
    Remove(usize),
    Push(f64),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => (any::<usize>(), number()).prop_map(|(i, x)| Edit::Set(i, x)),
        3 => (any::<usize>(), -3i32..=3).prop_map(|(i, d)| Edit::Add(i, f64::from(d))),
        1 => any::<usize>().prop_map(Edit::Truncate),
        1 => (any::<usize>(), number()).prop_map(|(i, x)| Edit::Insert(i, x)),
        1 => any::<usize>().prop_map(Edit::Remove),
        1 => number().prop_map(Edit::Push),
    ]
}

fn apply(v: &mut Vec<f64>, edits: &[Edit]) {
    for e in edits {
        let n = v.len();
        match *e {
            Edit::Set(i, x) if n > 0 => v[i % n] = x,
            Edit::Add(i, d) if n > 0 => v[i % n] += d,
            Edit::Truncate(i) => v.truncate(i % (n + 1)),
            Edit::Insert(i, x) => v.insert(i % (n + 1), x),
            Edit::Remove(i) if n > 0 => {
                v.remove(i % n);
            }
            Edit::Push(x) => v.push(x),
            _ => {}
        }
    }
}

/// Raw actions, made to fit the env's action space when `conform` (so that episodes run)
/// and left as they are otherwise (so that the action checks are reached too).
fn actions() -> impl Strategy<Value = Vec<Vec<f64>>> {
    proptest::collection::vec(proptest::collection::vec(-3.0..3.0f64, 0..5), 1..12)
}

fn conform(id: &str, raw: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let space = rlrig_env::spec(id).unwrap().action_space;
    raw.iter()
        .map(|a| {
            let first = a.first().copied().unwrap_or(0.0);
            match &space {
                Space::Discrete { n } => vec![(first.abs().floor() as u32 % n) as f64],
                Space::Box { low, .. } => (0..low.len())
                    .map(|k| a.get(k).copied().unwrap_or(first))
                    .collect(),
            }
        })
        .collect()
}

/// Checks what a replay returned: steps of the env's observation size, or an error
/// with a message.
fn check_replay(id: &str, r: Result<Vec<rlrig_env::replay::ReplayStep>, impl std::fmt::Display>) {
    let dim = rlrig_env::spec(id).unwrap().obs_dim;
    match r {
        Ok(steps) => {
            assert!(!steps.is_empty(), "{id}: a replay of actions gave no steps");
            for s in &steps {
                assert_eq!(s.obs.len(), dim, "{id}: observation size");
            }
            let ends = steps
                .iter()
                .position(|s| s.terminated || s.truncated)
                .unwrap_or(steps.len() - 1);
            assert_eq!(ends, steps.len() - 1, "{id}: steps after the episode ended");
        }
        Err(e) => assert!(!e.to_string().is_empty(), "{id}: empty error message"),
    }
}

/// `E::state_to_vec` of a fresh reset with `seed`, and whether `state_from_slice`
/// gives it back.
fn reset_vector(id: &str, seed: u64) -> (Vec<f64>, bool) {
    struct V(u64);
    impl EnvVisitor for V {
        type Output = (Vec<f64>, bool);
        fn visit<E: Env>(self) -> (Vec<f64>, bool) {
            let p = E::Params::default();
            let s = E::reset(&p, &mut Rng::stream(self.0, Purpose::User, 0));
            let v = E::state_to_vec(&s);
            let back = E::state_from_slice(&p, &v).map(|s| E::state_to_vec(&s));
            let same = back.as_ref().is_ok_and(|b| {
                b.len() == v.len() && b.iter().zip(&v).all(|(x, y)| x.to_bits() == y.to_bits())
            });
            (v, same)
        }
    }
    rlrig_env::visit(id, V(seed)).unwrap()
}

/// One step of `env` with an action built from `raw` for its space.
fn step_dyn(env: &mut dyn rlrig_env::VecEnvDyn, raw: &[f64]) -> Result<(), rlrig_env::EnvError> {
    let first = raw.first().copied().unwrap_or(0.0);
    match env.spec().action_space {
        Space::Discrete { n } => {
            let a = [(first.abs().floor() as u32 % n) as i32];
            env.step(ActionBuf::Discrete(&a))
        }
        Space::Box { low, .. } => {
            let a: Vec<f32> = (0..low.len())
                .map(|k| raw.get(k).copied().unwrap_or(first) as f32)
                .collect();
            env.step(ActionBuf::Continuous(&a))
        }
    }
}

proptest! {
    #![proptest_config(config(256, 0x5eed_0001))]

    /// `rlrig replay --state` with vectors of any length and any numbers.
    #[test]
    fn replay_of_random_state_vectors_never_panics(
        env in 0..state_ids().len(),
        state in proptest::collection::vec(number(), 0..16),
        raw in actions(),
        fit in any::<bool>(),
    ) {
        let id = state_ids()[env];
        let acts = if fit { conform(id, &raw) } else { raw };
        check_replay(id, replay_with(id, &[], &state, &acts));
    }
}

proptest! {
    #![proptest_config(config(256, 0x5eed_0002))]

    /// `rlrig replay --state` with a valid state of every env, edited: components
    /// replaced, nudged, inserted, removed, the vector cut short or lengthened.
    #[test]
    fn replay_of_edited_reset_states_never_panics(
        env in 0..state_ids().len(),
        seed in any::<u64>(),
        edits in proptest::collection::vec(edit(), 0..6),
        raw in actions(),
    ) {
        let id = state_ids()[env];
        let (mut state, round_trips) = reset_vector(id, seed);
        prop_assert!(round_trips, "{}: state_from_slice(state_to_vec(s)) is not s", id);
        let acts = conform(id, &raw);
        if edits.is_empty() {
            // The untouched state is valid and replays.
            let steps = replay_with(id, &[], &state, &acts);
            prop_assert!(steps.is_ok(), "{}: valid state rejected: {}", id, steps.err().unwrap());
        }
        apply(&mut state, &edits);
        check_replay(id, replay_with(id, &[], &state, &acts));
    }
}

/// Which part of a snapshot an edit hits.
#[derive(Clone, Debug)]
enum SnapEdit {
    State(Edit),
    Seed(u64),
    RngPosition(u64),
    Elapsed(u32),
    NeedsReset(bool),
    DropEnv,
    EnvArg(String, String),
}

fn snap_edit() -> impl Strategy<Value = SnapEdit> {
    prop_oneof![
        8 => edit().prop_map(SnapEdit::State),
        1 => any::<u64>().prop_map(SnapEdit::Seed),
        1 => any::<u64>().prop_map(SnapEdit::RngPosition),
        1 => prop_oneof![Just(u32::MAX), Just(u32::MAX - 1), any::<u32>(), 0..2000u32]
            .prop_map(SnapEdit::Elapsed),
        1 => any::<bool>().prop_map(SnapEdit::NeedsReset),
        1 => Just(SnapEdit::DropEnv),
        1 => ("[a-z_]{1,17}", "[0-9.a-z-]{0,6}").prop_map(|(k, v)| SnapEdit::EnvArg(k, v)),
    ]
}

proptest! {
    #![proptest_config(config(192, 0x5eed_0003))]

    /// A checkpoint's executor snapshot, edited, restored into a fresh executor and
    /// stepped on: an error or a working executor, never a panic. The untouched one
    /// restores to the same observations.
    #[test]
    fn restore_of_edited_snapshots_never_panics(
        env in 0..state_ids().len(),
        seed in any::<u64>(),
        before in proptest::collection::vec(proptest::collection::vec(-2.0..2.0f64, 4), 0..12),
        edits in proptest::collection::vec(snap_edit(), 0..5),
        after in proptest::collection::vec(proptest::collection::vec(-2.0..2.0f64, 4), 1..8),
    ) {
        let id = state_ids()[env];
        let cfg = VecConfig::new(1).seed(seed);
        let mut a = rlrig_env::make_sync(id, cfg.clone()).unwrap();
        for raw in &before {
            step_dyn(a.as_mut(), raw).unwrap();
        }
        let mut snap = a.snapshot();
        let mut b = rlrig_env::make_sync(id, cfg.clone()).unwrap();
        if edits.is_empty() {
            b.restore(&snap).unwrap();
            prop_assert_eq!(
                a.obs().to_vec().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                b.obs().to_vec().iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
        }
        for e in &edits {
            match e {
                SnapEdit::State(e) => apply(&mut snap.states[0], std::slice::from_ref(e)),
                SnapEdit::Seed(s) => snap.seed = *s,
                SnapEdit::RngPosition(p) => snap.rng_positions[0] = *p,
                SnapEdit::Elapsed(t) => snap.elapsed[0] = *t,
                SnapEdit::NeedsReset(r) => snap.needs_reset[0] = *r,
                SnapEdit::DropEnv => snap.states.clear(),
                SnapEdit::EnvArg(k, v) => snap.env_args.push((k.clone(), v.clone())),
            }
            if snap.states.is_empty() {
                break;
            }
        }
        let mut c = rlrig_env::make_sync(id, cfg).unwrap();
        match c.restore(&snap) {
            Ok(()) => {
                for raw in &after {
                    step_dyn(c.as_mut(), raw).unwrap();
                    prop_assert_eq!(c.obs().len(), c.spec().obs_dim);
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

/// Acrobot's `wrap` shifts angles one period at a time, as the reference does: a huge
/// angle, or a velocity that flings one far off in a step, looped for ever (found by
/// the fuzzing above). States beyond the limits are refused; those at them replay.
#[test]
fn acrobot_states_at_the_limits_replay_quickly_and_beyond_are_refused() {
    use std::f64::consts::PI;
    let id = "Acrobot-v1";
    let acts: Vec<Vec<f64>> = (0..20).map(|t| vec![f64::from(t % 3)]).collect();
    // A `wrap` that loops again hangs here (no timing is asserted: a loaded box passes).
    for signs in 0..16u32 {
        let sign = |k: u32| if signs >> k & 1 == 1 { -1.0 } else { 1.0 };
        for angle in [PI, 1000.0] {
            let state = [
                sign(0) * angle,
                sign(1) * angle,
                sign(2) * 4.0 * PI,
                sign(3) * 9.0 * PI,
            ];
            let steps = replay_with(id, &[], &state, &acts).unwrap();
            assert!(!steps.is_empty());
        }
    }
    for bad in [
        [1e300, 0.0, 0.0, 0.0],
        [0.0, -1001.0, 0.0, 0.0],
        [0.0, 0.0, 13.0, 0.0],
        [0.0, 0.0, 0.0, -1e12],
    ] {
        let e = replay_with(id, &[], &bad, &acts).unwrap_err().to_string();
        assert!(e.contains("outside"), "{e}");
    }
}

/// The names of env `id`'s `--env-arg` keys.
fn param_names(id: &str) -> &'static [&'static str] {
    struct V;
    impl EnvVisitor for V {
        type Output = &'static [&'static str];
        fn visit<E: Env>(self) -> &'static [&'static str] {
            E::PARAMS
        }
    }
    rlrig_env::visit(id, V).unwrap()
}

/// A value an `--env-arg` may be given: numbers of every kind, booleans, text.
fn arg_value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => number().prop_map(|x| x.to_string()),
        2 => any::<i64>().prop_map(|x| x.to_string()),
        1 => Just("true".to_string()),
        1 => Just("false".to_string()),
        1 => Just(String::new()),
        2 => "\\PC{0,12}",
    ]
}

proptest! {
    #![proptest_config(config(256, 0x5eed_0004))]

    /// `--env-arg KEY=VALUE` with the env's own keys (and now and then an unknown one)
    /// given any value: the executor is refused with a message, or it is built and
    /// steps with observations of the env's size.
    #[test]
    fn env_args_of_any_value_never_panic(
        env in 0..state_ids().len(),
        args in proptest::collection::vec((any::<usize>(), any::<bool>(), arg_value()), 1..4),
        raw in actions(),
    ) {
        let id = state_ids()[env];
        let names = param_names(id);
        let args: Vec<(String, String)> = args
            .into_iter()
            .map(|(k, known, v)| match (known, names.is_empty()) {
                (true, false) => (names[k % names.len()].to_string(), v),
                _ => (format!("no_such_arg_{}", k % 3), v),
            })
            .collect();
        match rlrig_env::make_sync(id, VecConfig::new(1).seed(1).env_args(args.clone())) {
            Ok(mut env) => {
                for raw in &raw {
                    step_dyn(env.as_mut(), raw).unwrap();
                    prop_assert_eq!(env.obs().len(), env.spec().obs_dim);
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty(), "{}: {:?}", id, args),
        }
    }
}
