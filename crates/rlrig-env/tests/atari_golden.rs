//! rlrig's Atari envs against ale-py 0.11.2 and Gymnasium 1.4, step by step
//! (`scripts/golden/make_golden_atari.py` made the data; the ROMs come from
//! `scripts/fetch_roms.sh`). Raw ids: every RGB frame, reward, flag and life count equal.
//! Preprocessed ids: the same for the (4, 84, 84) stacks of Gymnasium's
//! `AtariPreprocessing` + `FrameStackObservation`.
#![cfg(feature = "atari")]

use base64::Engine as _;
use rlrig_env::envs::atari::{
    AleBreakoutV5, AlePongV5, Atari, AtariParams, AtariState, BreakoutV5, Game, PongV5,
};
use rlrig_env::{Env, Rng};
use serde_json::Value;

fn golden(game: &str) -> Value {
    let path = format!(
        "{}/tests/golden/Atari-{game}-v5.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn frame<E: Env<State = AtariState>>(p: &E::Params, s: &AtariState) -> Vec<u8> {
    let mut obs = vec![0f32; E::OBS_DIM];
    E::observe(p, s, &mut obs);
    obs.iter().map(|&x| x as u8).collect()
}

/// Replays every episode of `eps` and returns (steps compared, steps whose frame differed,
/// the largest grey-level difference seen on the kept stacks).
fn replay<G: Game, const PRE: bool>(p: &AtariParams<PRE>, eps: &Value) -> (usize, usize) {
    let mut compared = 0;
    let mut differed = 0;
    let mut rng = Rng::stream(0, rlrig_env::Purpose::User, 0);
    for (k, ep) in eps.as_array().unwrap().iter().enumerate() {
        let seed = ep["ale_seed"].as_i64().unwrap() as i32;
        let noops = ep.get("noops").map_or(0, |n| n.as_u64().unwrap() as u32);
        let mut s = Atari::<G, PRE>::start(p, seed, noops).unwrap();
        let first = frame::<Atari<G, PRE>>(p, &s);
        if let Some(b64) = ep.get("first_stack") {
            let want = base64::engine::general_purpose::STANDARD
                .decode(b64.as_str().unwrap())
                .unwrap();
            let worst = want
                .iter()
                .zip(&first)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap();
            assert_eq!(
                worst,
                0,
                "{}: episode {k}: first stack differs by up to {worst} grey levels",
                Atari::<G, PRE>::ID
            );
        }
        assert_eq!(
            fnv1a(first),
            ep["first"].as_str().unwrap(),
            "{}: episode {k}: first frame",
            Atari::<G, PRE>::ID
        );
        let actions = ep["actions"].as_array().unwrap();
        for (t, (a, want)) in actions
            .iter()
            .zip(ep["steps"].as_array().unwrap())
            .enumerate()
        {
            let a = a.as_i64().unwrap() as i32;
            let tr = Atari::<G, PRE>::step(p, &mut s, &a, &mut rng);
            let where_ = format!("{}: episode {k} step {t}", Atari::<G, PRE>::ID);
            assert_eq!(tr.reward, want[1].as_f64().unwrap(), "{where_}: reward");
            assert_eq!(
                tr.terminated,
                want[2].as_bool().unwrap(),
                "{where_}: terminated"
            );
            assert_eq!(
                s.lives() as i64,
                want[4].as_i64().unwrap(),
                "{where_}: lives"
            );
            compared += 1;
            if fnv1a(frame::<Atari<G, PRE>>(p, &s)) != want[0].as_str().unwrap() {
                differed += 1;
            }
        }
        if let Some(b64) = ep.get("last_stack") {
            let want = base64::engine::general_purpose::STANDARD
                .decode(b64.as_str().unwrap())
                .unwrap();
            let got = frame::<Atari<G, PRE>>(p, &s);
            let worst = want
                .iter()
                .zip(&got)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap();
            assert_eq!(
                worst,
                0,
                "{}: episode {k}: last stack differs by up to {worst} grey levels",
                Atari::<G, PRE>::ID
            );
        }
    }
    (compared, differed)
}

fn reference_preprocessing() -> AtariParams<true> {
    // Gymnasium's chain has v5's sticky actions and no fire reset.
    AtariParams {
        repeat_action_probability: 0.25,
        fire_reset: false,
        ..AtariParams::default()
    }
}

#[test]
fn raw_frames_follow_ale_py() {
    for (game, run) in [
        (
            "Pong",
            replay::<rlrig_env::envs::atari::Pong, false>
                as fn(&AtariParams<false>, &Value) -> (usize, usize),
        ),
        (
            "Breakout",
            replay::<rlrig_env::envs::atari::Breakout, false>,
        ),
    ] {
        let g = golden(game);
        let (n, bad) = run(&AtariParams::default(), &g["raw"]);
        assert!(n >= 400, "{game}: only {n} steps compared");
        assert_eq!(
            bad, 0,
            "{game}: {bad} of {n} RGB frames differ from ale-py's"
        );
    }
    let _ = (AlePongV5::ID, AleBreakoutV5::ID);
}

#[test]
fn preprocessed_stacks_follow_gymnasium_wrappers() {
    for (game, run) in [
        (
            "Pong",
            replay::<rlrig_env::envs::atari::Pong, true>
                as fn(&AtariParams<true>, &Value) -> (usize, usize),
        ),
        ("Breakout", replay::<rlrig_env::envs::atari::Breakout, true>),
    ] {
        let g = golden(game);
        let (n, bad) = run(&reference_preprocessing(), &g["preprocessed"]);
        assert!(n >= 400, "{game}: only {n} steps compared");
        assert_eq!(
            bad, 0,
            "{game}: {bad} of {n} stacks differ from Gymnasium's"
        );
    }
    let _ = (PongV5::ID, BreakoutV5::ID);
}

#[test]
fn episodic_life_ends_an_episode_per_life_and_the_next_one_continues_the_game() {
    use rlrig_env::{ActionBuf, SyncVecEnv, VecConfig, VecEnvDyn};
    let cfg = VecConfig::new(1).seed(7).env_arg("episodic_life", "true");
    let mut env = SyncVecEnv::<BreakoutV5>::new(cfg).unwrap();
    let lives_at_start = env.state(0).lives();
    assert_eq!(lives_at_start, 5);
    let mut rng = Rng::stream(7, rlrig_env::Purpose::User, 0);
    let mut ends = Vec::new();
    for _ in 0..20_000 {
        let a = [rng.below(4) as i32];
        VecEnvDyn::step(&mut env, ActionBuf::Discrete(&a)).unwrap();
        if env.terminated()[0] {
            ends.push(env.state(0).lives());
        }
        if ends.len() == 6 {
            break;
        }
    }
    // One episode per life lost, the game going on (5 -> 4 -> ... -> 0), then a new game
    // after the real game over.
    assert_eq!(ends[..5], [4, 3, 2, 1, 0], "{ends:?}");
    assert_eq!(ends[5], 4, "a new game after game over: {ends:?}");
}

#[test]
fn bad_params_and_missing_roms_are_errors_that_say_what_and_where() {
    use rlrig_env::{VecConfig, make_sync};
    for (k, v, want) in [
        ("frameskip", "0", "frameskip must be at least 1"),
        ("repeat_action_probability", "1.5", "not a probability"),
        ("episodic_life", "maybe", "not true or false"),
        ("noop_maxx", "3", "noop_max"),
    ] {
        let e = make_sync("Pong-v5", VecConfig::new(1).env_arg(k, v))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("Pong-v5") && e.contains(want), "{k}={v}: {e}");
    }
    // The raw id takes only ale-py's keywords.
    assert!(make_sync("ALE/Pong-v5", VecConfig::new(1).env_arg("noop_max", "3")).is_err());
    let dir = std::env::temp_dir().join("rlrig-no-roms-here");
    let e = rlrig_env::envs::atari::find_rom("no_such_game", Some(&dir)).unwrap_err();
    assert!(
        e.contains("no_such_game.bin")
            && e.contains(&dir.display().to_string())
            && e.contains("scripts/fetch_roms.sh"),
        "{e}"
    );
    // A mode the game does not have: ALE's message, before any env is built.
    let e = make_sync("Pong-v5", VecConfig::new(1).env_arg("mode", "99"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("Pong-v5") && e.to_lowercase().contains("mode"),
        "{e}"
    );
}
