//! rlrig's Atari envs against ale-py 0.11.2 and Gymnasium 1.4, step by step
//! (`scripts/golden/make_golden_atari.py` made the data; the ROMs come from
//! `scripts/fetch_roms.sh`). Raw ids: every RGB frame, reward, flag and life count equal.
//! Preprocessed ids: the same for the (4, 84, 84) stacks of Gymnasium's
//! `AtariPreprocessing` + `FrameStackObservation`.
#![cfg(feature = "atari")]

use base64::Engine as _;
use rlrig_env::envs::atari::{Atari, AtariParams, AtariState, Breakout, Game, Pong};
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

fn frame<E: Env<State = AtariState, Obs = u8>>(p: &E::Params, s: &AtariState) -> Vec<u8> {
    let mut obs = vec![0u8; E::OBS_DIM];
    E::observe(p, s, &mut obs);
    obs
}

/// Asserts that `got` is the kept stack `b64` of the golden file, naming the largest
/// grey-level difference.
fn assert_stack(b64: &Value, got: &[u8], what: &str) {
    let want = base64::engine::general_purpose::STANDARD
        .decode(b64.as_str().unwrap())
        .unwrap();
    let worst = want.iter().zip(got).map(|(a, b)| a.abs_diff(*b)).max();
    assert_eq!(
        worst,
        Some(0),
        "{what} differs by up to {worst:?} grey levels"
    );
}

/// Replays every episode of the golden file's `key` (`raw` or `preprocessed`) for `game`
/// with `p`: rewards, flags and lives must be equal at every step, and every frame's hash
/// (and the kept whole stacks) too.
fn follows<G: Game, const PRE: bool>(game: &str, key: &str, p: &AtariParams<PRE>) {
    let id = Atari::<G, PRE>::ID;
    let mut compared = 0;
    let mut rng = Rng::stream(0, rlrig_env::Purpose::User, 0);
    for (k, ep) in golden(game)[key].as_array().unwrap().iter().enumerate() {
        let seed = ep["ale_seed"].as_i64().unwrap() as i32;
        let noops = ep.get("noops").map_or(0, |n| n.as_u64().unwrap() as u32);
        let mut s = Atari::<G, PRE>::start(p, seed, noops).unwrap();
        let first = frame::<Atari<G, PRE>>(p, &s);
        if let Some(b64) = ep.get("first_stack") {
            assert_stack(b64, &first, &format!("{id}: episode {k}: first stack"));
        }
        assert_eq!(
            fnv1a(first),
            ep["first"].as_str().unwrap(),
            "{id}: episode {k}: first frame"
        );
        let actions = ep["actions"].as_array().unwrap();
        for (t, (a, want)) in actions
            .iter()
            .zip(ep["steps"].as_array().unwrap())
            .enumerate()
        {
            let a = a.as_i64().unwrap() as i32;
            let tr = Atari::<G, PRE>::step(p, &mut s, &a, &mut rng);
            let at = format!("{id}: episode {k} step {t}");
            assert_eq!(tr.reward, want[1].as_f64().unwrap(), "{at}: reward");
            assert_eq!(
                tr.terminated,
                want[2].as_bool().unwrap(),
                "{at}: terminated"
            );
            assert_eq!(s.lives() as i64, want[4].as_i64().unwrap(), "{at}: lives");
            let got = fnv1a(frame::<Atari<G, PRE>>(p, &s));
            assert_eq!(
                got,
                want[0].as_str().unwrap(),
                "{at}: frame differs from the reference"
            );
            compared += 1;
        }
        if let Some(b64) = ep.get("last_stack") {
            let last = frame::<Atari<G, PRE>>(p, &s);
            assert_stack(b64, &last, &format!("{id}: episode {k}: last stack"));
        }
    }
    assert!(compared >= 400, "{id}: only {compared} steps compared");
}

#[test]
fn raw_frames_follow_ale_py() {
    follows::<Pong, false>("Pong", "raw", &AtariParams::default());
    follows::<Breakout, false>("Breakout", "raw", &AtariParams::default());
}

#[test]
fn preprocessed_stacks_follow_gymnasium_wrappers() {
    // Gymnasium's chain has v5's sticky actions and no fire reset.
    let p = AtariParams {
        repeat_action_probability: 0.25,
        fire_reset: false,
        ..AtariParams::default()
    };
    follows::<Pong, true>("Pong", "preprocessed", &p);
    follows::<Breakout, true>("Breakout", "preprocessed", &p);
}

/// The preprocessing maps ALE's palette indices itself (`Ale::grayscale_palette`,
/// `palette::gray`), where ALE's `getScreenGrayscale` did: over a few hundred frames of
/// two games, every pixel of the mapped screen equals ALE's grayscale screen, and every
/// index is even (the table has one entry per even index).
#[test]
fn the_grayscale_palette_maps_screens_as_ale_does() {
    use rlrig_ale::{Ale, Settings};
    for game in ["pong", "breakout"] {
        let rom = rlrig_ale::find_rom(game, None).unwrap();
        let settings = Settings {
            seed: 3,
            repeat_action_probability: 0.0,
            max_num_frames_per_episode: 0,
            mode: None,
            difficulty: None,
        };
        let mut ale = Ale::new(&rom, &settings).unwrap();
        let actions = ale.action_set(false);
        ale.reset_game().unwrap();
        let palette = ale.grayscale_palette();
        let mut rng = Rng::stream(3, rlrig_env::Purpose::User, 0);
        let mut want = vec![0u8; 210 * 160];
        let mut colours = std::collections::BTreeSet::new();
        for frame in 0..600 {
            let a = actions[rng.below(actions.len() as u32) as usize];
            ale.act(a, 1.0).unwrap();
            if ale.game_over() {
                ale.reset_game().unwrap();
            }
            ale.screen_grayscale(&mut want);
            let indices = ale.screen_indices();
            let mut got = vec![0u8; want.len()];
            rlrig_env::palette::gray(&palette, indices, None, &mut got);
            for (i, ((&v, &w), &g)) in indices.iter().zip(&want).zip(&got).enumerate() {
                assert!(v % 2 == 0, "{game}: frame {frame} pixel {i}: odd index {v}");
                assert_eq!(g, w, "{game}: frame {frame} pixel {i} (index {v})");
            }
            colours.extend(indices.iter().copied());
        }
        assert!(colours.len() >= 4, "{game}: only colours {colours:?}");
    }
}

#[test]
fn episodic_life_ends_an_episode_per_life_and_the_next_one_continues_the_game() {
    use rlrig_env::{ActionBuf, SyncVecEnv, VecConfig, VecEnvDyn};
    let cfg = VecConfig::new(1).seed(7).env_arg("episodic_life", "true");
    let mut env = SyncVecEnv::<Atari<Breakout, true>>::new(cfg).unwrap();
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
        matches!(&e, rlrig_env::envs::atari::AleError::RomNotFound { looked, .. } if looked[0] == dir),
        "{e:?}"
    );
    let e = e.to_string();
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
