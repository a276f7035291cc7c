//! Atari 2600 games on the Arcade Learning Environment (ALE 0.11.2, crate `rlrig-ale`;
//! GPL-2.0-only, behind the `atari` feature).
//!
//! Two ids per game:
//! - `ALE/<Game>-v5` is ale-py's `AtariEnv` as `gym.make("ALE/<Game>-v5")` makes it: RGB
//!   frames (210 x 160 x 3), frameskip 4, sticky actions 0.25, the minimal action set,
//!   episodes truncated at 108,000 frames.
//! - `<Game>-v5` is EnvPool's id and EnvPool's defaults: the standard preprocessing of
//!   Gymnasium's `AtariPreprocessing` + `FrameStackObservation` (no-op starts, frame skip
//!   with a max-pool of the last two frames, ALE's grayscale, 84 x 84 by OpenCV's
//!   `INTER_AREA`, a stack of 4, observation shape (4, 84, 84)), fire on reset, no sticky
//!   actions, 27,000 steps; episodic life and reward clipping as env args.
//!
//! Observation values are the bytes (0..=255) written as f32 (the executors' buffers
//! are float32).

use crate::env::{Env, Transition};
use crate::registry::EnvVisitor;
use crate::rng::Rng;
use crate::space::{Dtype, Space};
use rlrig_ale::{Ale, Settings};
pub use rlrig_ale::{AleError, find_rom};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// Screen height and width of every game, and the preprocessed frame's side.
pub use crate::resize::{HEIGHT, SIZE, WIDTH, resize_area};
/// The preprocessed frames' stack depth.
pub const STACK: usize = 4;

/// One game: its ROM and the ids it is registered under.
pub trait Game: Send + Sync + 'static {
    /// ale-py's ROM name (`pong` for `pong.bin`).
    const ROM: &'static str;
    /// `ALE/Pong-v5`.
    const RAW_ID: &'static str;
    /// `Pong-v5`.
    const PRE_ID: &'static str;
    /// Size of the minimal action set (checked against ALE when the ROM loads).
    const MINIMAL_ACTIONS: u32;
}

/// The parameters (ale-py's `AtariEnv` keywords; the preprocessing ones EnvPool's).
#[derive(Clone, Debug, PartialEq)]
pub struct AtariParams<const PRE: bool> {
    /// Where the ROM is looked for first (`rlrig_ale::find_rom` lists the rest).
    pub rom_dir: Option<PathBuf>,
    pub mode: Option<u32>,
    pub difficulty: Option<u32>,
    pub repeat_action_probability: f32,
    pub frameskip: u32,
    pub full_action_space: bool,
    /// Episodes end (truncated) after this many emulator frames.
    pub max_num_frames_per_episode: u32,
    /// Preprocessed ids only: at most this many no-op steps after a reset (uniform 1..=n).
    pub noop_max: u32,
    /// Preprocessed ids only: a life lost ends the episode; the next reset continues the
    /// game (EnvPool's and Baselines' `EpisodicLifeEnv`) until it is over.
    pub episodic_life: bool,
    /// Preprocessed ids only: FIRE then UP after a reset, in games with FIRE
    /// (Baselines' `FireResetEnv`).
    pub fire_reset: bool,
    /// Preprocessed ids only: rewards clipped to their sign.
    pub clip_reward: bool,
}

impl<const PRE: bool> Default for AtariParams<PRE> {
    fn default() -> Self {
        AtariParams {
            rom_dir: None,
            mode: None,
            difficulty: None,
            repeat_action_probability: if PRE { 0.0 } else { 0.25 },
            frameskip: 4,
            full_action_space: false,
            max_num_frames_per_episode: 108_000,
            noop_max: 30,
            episodic_life: false,
            fire_reset: true,
            clip_reward: false,
        }
    }
}

/// The preprocessed ids' keys; the raw ids take the first seven (ale-py's keywords).
const PRE_PARAMS: &[&str] = &[
    "rom_dir",
    "mode",
    "difficulty",
    "repeat_action_probability",
    "frameskip",
    "full_action_space",
    "max_num_frames_per_episode",
    "noop_max",
    "episodic_life",
    "fire_reset",
    "clip_reward",
];
const RAW_PARAMS: &[&str] = PRE_PARAMS.split_at(7).0;

/// What an emulator is made from: kept with each state so a state can be cloned.
#[derive(Debug)]
struct Setup {
    rom: PathBuf,
    settings: Settings,
    /// ALE ids of the agent's actions.
    actions: Vec<i32>,
    /// ALE's grayscale palette ([`Ale::grayscale_palette`]), applied by
    /// [`crate::palette::gray`] where ALE's own loop (`getScreenGrayscale`) took ~9 % of
    /// a Pong step.
    gray: [u8; crate::palette::COLOURS],
}

/// One game in progress.
#[derive(Debug, Default)]
pub struct AtariState {
    /// `None` only in `Default`. A mutex so `Clone` (through `&self`) may ask the
    /// emulator for its state; the step path uses `get_mut` and never locks.
    ale: Option<Mutex<Ale>>,
    setup: Option<Arc<Setup>>,
    /// Raw ids: the RGB screen. Preprocessed ids: the stack, oldest frame first.
    frames: Vec<u8>,
    /// Preprocessed ids: the last two grayscale screens of a skip (max-pooled in place
    /// into the first, as Gymnasium's wrapper does).
    pool: Vec<u8>,
    lives: i32,
    /// The game (not only a life) is over: the next reset starts a new game.
    game_over: bool,
}

/// The emulator behind a state's mutex, even if a panic poisoned it (the lock only
/// serves `&self` reads and copies).
fn lock(ale: &Mutex<Ale>) -> MutexGuard<'_, Ale> {
    ale.lock().unwrap_or_else(|e| e.into_inner())
}

/// ALE's serialised state of a running game (what `Clone` and snapshots copy).
fn serialised(ale: &Mutex<Ale>) -> Vec<u8> {
    lock(ale)
        .clone_state()
        .expect("ALE cloneState of a running game")
}

/// The emulator of a state's `ale` field, without locking (the step path owns it).
fn running(ale: &mut Option<Mutex<Ale>>) -> &mut Ale {
    ale.as_mut()
        .expect("an Atari state is made by reset")
        .get_mut()
        .unwrap_or_else(|e| e.into_inner())
}

impl AtariState {
    fn ale(&mut self) -> &mut Ale {
        running(&mut self.ale)
    }

    /// Lives left, as ALE counts them (`info["lives"]` in ale-py).
    pub fn lives(&self) -> i32 {
        self.ale.as_ref().map_or(0, |a| lock(a).lives())
    }
}

impl Clone for AtariState {
    fn clone(&self) -> Self {
        let (Some(ale), Some(setup)) = (&self.ale, &self.setup) else {
            return AtariState::default();
        };
        let bytes = serialised(ale);
        let mut copy = Ale::new(&setup.rom, &setup.settings).expect("the ROM loaded before");
        copy.restore_state(&bytes)
            .expect("ALE restoreState of its own state");
        AtariState {
            ale: Some(Mutex::new(copy)),
            setup: Some(setup.clone()),
            frames: self.frames.clone(),
            pool: self.pool.clone(),
            lives: self.lives,
            game_over: self.game_over,
        }
    }
}

/// An Atari game; `PRE` selects the preprocessed id.
pub struct Atari<G, const PRE: bool>(PhantomData<G>);

impl<G: Game, const PRE: bool> Atari<G, PRE> {
    /// Bytes of the max-pool buffers (two grayscale screens; none for the raw ids). The
    /// frame buffer is [`Env::OBS_DIM`] bytes: the stack, or the RGB screen.
    const POOL: usize = if PRE { 2 * HEIGHT * WIDTH } else { 0 };

    /// A new game with ALE's `random_seed` = `seed` and `noops` no-op steps (preprocessed
    /// ids), as `reset` makes it from its draws. Errors name a missing ROM and where it
    /// was looked for.
    pub fn start(p: &AtariParams<PRE>, seed: i32, noops: u32) -> Result<AtariState, AleError> {
        let rom = rlrig_ale::find_rom(G::ROM, p.rom_dir.as_deref())?;
        let settings = Settings {
            seed,
            repeat_action_probability: p.repeat_action_probability,
            // The time limit is the executors' (max_episode_steps), so ALE never truncates.
            max_num_frames_per_episode: 0,
            mode: p.mode,
            difficulty: p.difficulty,
        };
        let mut ale = Ale::new(&rom, &settings)?;
        let actions = ale.action_set(p.full_action_space);
        let want = if p.full_action_space {
            18
        } else {
            G::MINIMAL_ACTIONS
        };
        if actions.len() != want as usize {
            return Err(AleError::Load {
                message: format!(
                    "{} has {} actions in this ALE, rlrig expects {want}: is {} the right ROM?",
                    Self::ID,
                    actions.len(),
                    rom.display()
                ),
                path: rom,
            });
        }
        ale.reset_game()?;
        let gray = ale.grayscale_palette();
        let mut s = AtariState {
            ale: Some(Mutex::new(ale)),
            setup: Some(Arc::new(Setup {
                rom,
                settings,
                gray,
                actions,
            })),
            frames: vec![0; Self::OBS_DIM],
            pool: vec![0; Self::POOL],
            ..AtariState::default()
        };
        if PRE {
            Self::new_game(p, &mut s, noops, false)?;
        } else {
            Self::grab_rgb(&mut s);
        }
        Ok(s)
    }

    /// Preprocessed ids: the no-ops (and the fire reset) after `reset_game`, then the
    /// stack filled with the first observation (Gymnasium's `AtariPreprocessing.reset`,
    /// Baselines' `FireResetEnv`, `FrameStackObservation`'s padding with the reset frame).
    fn new_game(
        p: &AtariParams<PRE>,
        s: &mut AtariState,
        noops: u32,
        reset_first: bool,
    ) -> Result<(), AleError> {
        if reset_first {
            s.ale().reset_game()?;
        }
        for _ in 0..noops {
            let noop = s.setup.as_ref().unwrap().actions[0];
            s.ale().act(noop, 1.0)?;
            if s.ale().game_over() {
                s.ale().reset_game()?;
            }
        }
        s.game_over = false;
        s.lives = s.ale().lives();
        Self::grab(s, 0, false);
        // Buffer 1 zero, as Gymnasium's reset leaves it: its max with buffer 0 is buffer 0.
        s.pool[HEIGHT * WIDTH..].fill(0);
        Self::push_frame(s);
        Self::fill_stack(s);
        let actions = &s.setup.as_ref().unwrap().actions;
        let has_fire = actions.len() >= 3 && actions[1] == 1;
        if p.fire_reset && has_fire {
            for a in [1, 2] {
                let t = Self::skip(p, s, a)?;
                if t.terminated {
                    return Self::new_game(p, s, 0, true);
                }
            }
            Self::fill_stack(s);
        }
        Ok(())
    }

    /// Preprocessed ids: every slot of the stack holds its newest frame
    /// (`FrameStackObservation`'s padding after a reset).
    fn fill_stack(s: &mut AtariState) {
        let f = SIZE * SIZE;
        for k in 0..STACK - 1 {
            s.frames.copy_within((STACK - 1) * f.., k * f);
        }
    }

    /// Raw ids: the RGB screen into `frames`.
    fn grab_rgb(s: &mut AtariState) {
        let mut rgb = std::mem::take(&mut s.frames);
        s.ale().screen_rgb(&mut rgb);
        s.frames = rgb;
    }

    /// The grayscale screen into pool buffer `k`; with `pool`, into buffer 0 max-pooled
    /// with buffer 1 on the way (Gymnasium's max over a skip's last two frames, in one
    /// pass).
    fn grab(s: &mut AtariState, k: usize, pool: bool) {
        let gray = &s.setup.as_ref().unwrap().gray;
        let screen = running(&mut s.ale).screen_indices();
        let (first, second) = s.pool.split_at_mut(HEIGHT * WIDTH);
        let (out, other) = match (k, pool) {
            (0, true) => (first, Some(&*second)),
            (0, false) => (first, None),
            _ => (second, None),
        };
        crate::palette::gray(gray, screen, other, out);
    }

    /// Shrinks pool buffer 0 (the step's observation) and pushes it on the stack.
    fn push_frame(s: &mut AtariState) {
        let f = SIZE * SIZE;
        s.frames.copy_within(f.., 0);
        resize_area(&s.pool[..HEIGHT * WIDTH], &mut s.frames[(STACK - 1) * f..]);
    }

    /// One agent step of the preprocessed ids (Gymnasium's `AtariPreprocessing.step`).
    fn skip(p: &AtariParams<PRE>, s: &mut AtariState, a: i32) -> Result<Transition, AleError> {
        let id = s.setup.as_ref().unwrap().actions[a as usize];
        let fs = p.frameskip as usize;
        let mut reward = 0i64;
        let mut terminated = false;
        // Whether buffer 0 holds the step's observation (one frame a step needs no pool).
        let mut pooled = fs == 1;
        for t in 0..fs {
            reward += i64::from(s.ale().act(id, 1.0)?);
            let over = s.ale().game_over();
            s.game_over = over;
            terminated = over;
            if p.episodic_life {
                let lives = s.ale().lives();
                terminated |= lives < s.lives;
                s.lives = lives;
            }
            if terminated {
                break;
            }
            if t + 2 == fs {
                Self::grab(s, 1, false);
            } else if t + 1 == fs {
                Self::grab(s, 0, fs > 1);
                pooled = true;
            }
        }
        if !pooled {
            // The skip ended before its last frame: Gymnasium still max-pools what its
            // two buffers hold (the last grab, or the step before's).
            let (a, b) = s.pool.split_at_mut(HEIGHT * WIDTH);
            for (x, y) in a.iter_mut().zip(b.iter()) {
                *x = (*x).max(*y);
            }
        }
        Self::push_frame(s);
        let reward = if p.clip_reward {
            reward.signum() as f64
        } else {
            reward as f64
        };
        Ok(Transition { reward, terminated })
    }

    fn draws(p: &AtariParams<PRE>, rng: &mut Rng) -> (i32, u32) {
        // ALE takes seeds in 0..2^31.
        let seed = (rng.next_u32() >> 1) as i32;
        let noops = if PRE && p.noop_max > 0 {
            1 + rng.below(p.noop_max)
        } else {
            0
        };
        (seed, noops)
    }

    fn fail(e: AleError) -> ! {
        // The executors' reset has no error path; a missing ROM is caught earlier by
        // `check`, so this is an emulator failure on a ROM that loaded before.
        panic!("{}: {e}", Self::ID)
    }
}

impl<G: Game, const PRE: bool> Env for Atari<G, PRE> {
    type Params = AtariParams<PRE>;
    type State = AtariState;
    type Action = i32;
    type Obs = u8;
    const ID: &'static str = if PRE { G::PRE_ID } else { G::RAW_ID };
    const OBS_DIM: usize = if PRE {
        STACK * SIZE * SIZE
    } else {
        HEIGHT * WIDTH * 3
    };
    const PARAMS: &'static [&'static str] = if PRE { PRE_PARAMS } else { RAW_PARAMS };
    // Four emulated frames and the preprocessing: ~410 us per step on an AMD EPYC core
    // (`rlrig bench env --env Pong-v5`, 2,420 steps/s).
    const STEP_COST_NS: u64 = 400_000;
    // The emulator (ALE's OSystem, System, cartridge, screen buffers) and the frame
    // buffers: peak RSS of `rlrig bench env` with 272 envs minus 16, per env, less the
    // executor's two observation rows (Pong-v5 873 KB, ALE/Pong-v5 1,161 KB).
    const STATE_HEAP_BYTES: usize = if PRE { 650_000 } else { 360_000 };

    fn observation_space(_: &Self::Params) -> Space {
        let shape = if PRE {
            vec![STACK, SIZE, SIZE]
        } else {
            vec![HEIGHT, WIDTH, 3]
        };
        Space::Box {
            low: vec![0.0; Self::OBS_DIM],
            high: vec![255.0; Self::OBS_DIM],
            shape,
            dtype: Dtype::UInt8,
        }
    }

    fn action_space(p: &Self::Params) -> Space {
        Space::Discrete {
            n: if p.full_action_space {
                18
            } else {
                G::MINIMAL_ACTIONS
            },
        }
    }

    fn max_episode_steps(p: &Self::Params) -> Option<u32> {
        (p.max_num_frames_per_episode > 0)
            .then(|| p.max_num_frames_per_episode.div_ceil(p.frameskip))
    }

    fn set_param(p: &mut Self::Params, key: &str, value: &str) -> Result<(), String> {
        use super::param;
        if !Self::PARAMS.contains(&key) {
            return Err(super::unknown_param(Self::PARAMS));
        }
        match key {
            "rom_dir" => p.rom_dir = Some(PathBuf::from(value)),
            "mode" => p.mode = Some(param(value, "a game mode (a whole number)")?),
            "difficulty" => p.difficulty = Some(param(value, "a difficulty (a whole number)")?),
            "repeat_action_probability" => {
                let v: f32 = param(value, "a probability")?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(format!("{v} is not a probability in [0, 1]"));
                }
                p.repeat_action_probability = v;
            }
            "frameskip" => match param::<u32>(value, "a whole number of frames")? {
                0 => return Err("frameskip must be at least 1".into()),
                v => p.frameskip = v,
            },
            "full_action_space" => p.full_action_space = param(value, "true or false")?,
            "max_num_frames_per_episode" => {
                p.max_num_frames_per_episode = param(value, "a whole number of frames")?
            }
            "noop_max" => p.noop_max = param(value, "a whole number of steps")?,
            "episodic_life" => p.episodic_life = param(value, "true or false")?,
            "fire_reset" => p.fire_reset = param(value, "true or false")?,
            "clip_reward" => p.clip_reward = param(value, "true or false")?,
            _ => unreachable!("checked against PARAMS"),
        }
        Ok(())
    }

    fn check(p: &Self::Params) -> Result<(), String> {
        // Load the ROM once: a missing ROM, an unknown mode or difficulty is an error
        // here, before any executor is built.
        Self::start(p, 0, 0).map(|_| ()).map_err(|e| e.to_string())
    }

    fn reset(p: &Self::Params, rng: &mut Rng) -> AtariState {
        let (seed, noops) = Self::draws(p, rng);
        Self::start(p, seed, noops).unwrap_or_else(|e| Self::fail(e))
    }

    fn reset_in_place(p: &Self::Params, s: &mut AtariState, rng: &mut Rng) {
        if s.ale.is_none() {
            *s = Self::reset(p, rng);
            return;
        }
        // ale-py's reset without a seed: the same emulator, its random generator going on.
        let (_, noops) = Self::draws(p, rng);
        let r = if !PRE {
            s.ale().reset_game().map(|()| Self::grab_rgb(s))
        } else if p.episodic_life && !s.game_over {
            // A life was lost: the game goes on from a no-op step.
            Self::skip(p, s, 0).map(|_| Self::fill_stack(s))
        } else {
            Self::new_game(p, s, noops, true)
        };
        r.unwrap_or_else(|e| Self::fail(e));
    }

    fn step(p: &Self::Params, s: &mut AtariState, a: &i32, _: &mut Rng) -> Transition {
        let r = if PRE {
            Self::skip(p, s, *a)
        } else {
            let id = s.setup.as_ref().unwrap().actions[*a as usize];
            (0..p.frameskip)
                .try_fold(0i64, |sum, _| Ok(sum + i64::from(s.ale().act(id, 1.0)?)))
                .map(|reward| {
                    s.game_over = s.ale().game_over();
                    Self::grab_rgb(s);
                    Transition {
                        reward: reward as f64,
                        terminated: s.game_over,
                    }
                })
        };
        r.unwrap_or_else(|e| Self::fail(e))
    }

    fn observe(_: &Self::Params, s: &AtariState, out: &mut [u8]) {
        // A state not yet reset holds no frames (its observation stays zero).
        let n = out.len().min(s.frames.len());
        out[..n].copy_from_slice(&s.frames[..n]);
    }

    /// The screen in colour for `rlrig play`: height, width, then the RGB bytes packed
    /// four to a number (little-endian), as `rlrig_lab::render` unpacks them.
    fn render_state(s: &AtariState) -> Vec<f64> {
        let mut rgb = vec![0u8; HEIGHT * WIDTH * 3];
        if let Some(ale) = &s.ale {
            lock(ale).screen_rgb(&mut rgb);
        }
        let mut v = vec![HEIGHT as f64, WIDTH as f64];
        v.extend(super::pack_bytes(&rgb));
        v
    }

    /// The 128 bytes of RAM (the flat state Atari has; it cannot be set from them).
    fn state_to_vec(s: &AtariState) -> Vec<f64> {
        let mut ram = [0u8; rlrig_ale::RAM_SIZE];
        if let Some(ale) = &s.ale {
            lock(ale).ram(&mut ram);
        }
        ram.iter().map(|&b| f64::from(b)).collect()
    }

    fn state_from_slice(_: &Self::Params, _: &[f64]) -> Result<AtariState, String> {
        Err(
            "an Atari state is the emulator's; it cannot be set from a vector (restore a snapshot)"
                .into(),
        )
    }

    /// The emulator's serialised state and the frame buffers, four bytes per number.
    fn snapshot(s: &AtariState) -> Vec<f64> {
        let Some(ale) = &s.ale else {
            return Vec::new();
        };
        let bytes = serialised(ale);
        let mut v = vec![
            SNAPSHOT_TAG,
            bytes.len() as f64,
            f64::from(s.lives),
            f64::from(u8::from(s.game_over)),
        ];
        for part in [&bytes[..], &s.frames, &s.pool] {
            v.extend(super::pack_bytes(part));
        }
        v
    }

    fn restore(p: &Self::Params, v: &[f64]) -> Result<AtariState, String> {
        if v.len() < 4 || v[0] != SNAPSHOT_TAG {
            return Err(format!("not a snapshot of {} (wrong header)", Self::ID));
        }
        let (n_state, n_frames, n_pool) = (v[1] as usize, Self::OBS_DIM, Self::POOL);
        let words = |n: usize| n.div_ceil(4);
        let want = 4 + words(n_state) + words(n_frames) + words(n_pool);
        if v.len() != want {
            return Err(format!(
                "a snapshot of {} has {want} numbers, this one {}",
                Self::ID,
                v.len()
            ));
        }
        let mut at = 4;
        let mut take = |n: usize| {
            at += words(n);
            super::unpack_bytes(&v[at - words(n)..at], n)
        };
        let bytes = take(n_state)?;
        let frames = take(n_frames)?;
        let pool = take(n_pool)?;
        let mut s = Self::start(p, 0, 0).map_err(|e| e.to_string())?;
        s.ale().restore_state(&bytes).map_err(|e| e.to_string())?;
        s.frames = frames;
        s.pool = pool;
        s.lives = v[2] as i32;
        s.game_over = v[3] != 0.0;
        Ok(s)
    }
}

/// First number of an Atari snapshot (format 1).
const SNAPSHOT_TAG: f64 = 0x_a7a1_0001_u32 as f64;

macro_rules! games {
    ($($name:ident: $rom:literal, $raw:literal, $pre:literal, $n:literal;)*) => {
        $(
            #[doc = concat!("`", $raw, "` and `", $pre, "`.")]
            pub struct $name;
            impl Game for $name {
                const ROM: &'static str = $rom;
                const RAW_ID: &'static str = $raw;
                const PRE_ID: &'static str = $pre;
                const MINIMAL_ACTIONS: u32 = $n;
            }
        )*

        /// Every Atari id: per game, the raw id, then the preprocessed one.
        pub const IDS: &[&str] = &[$($raw, $pre),*];

        /// Runs `v` with the Atari env registered under `id` (the registry's dispatch for
        /// these ids); gives `v` back when no game has that id.
        pub fn visit<V: EnvVisitor>(id: &str, v: V) -> Result<V::Output, V> {
            $(
                if id == $raw {
                    return Ok(v.visit::<Atari<$name, false>>());
                }
                if id == $pre {
                    return Ok(v.visit::<Atari<$name, true>>());
                }
            )*
            Err(v)
        }
    };
}

// One line per game: its type, ROM, ids and minimal action count.
games! {
    Pong: "pong", "ALE/Pong-v5", "Pong-v5", 6;
    Breakout: "breakout", "ALE/Breakout-v5", "Breakout-v5", 4;
    SpaceInvaders: "space_invaders", "ALE/SpaceInvaders-v5", "SpaceInvaders-v5", 6;
    Seaquest: "seaquest", "ALE/Seaquest-v5", "Seaquest-v5", 18;
    Qbert: "qbert", "ALE/Qbert-v5", "Qbert-v5", 6;
    Tetris: "tetris", "ALE/Tetris-v5", "Tetris-v5", 5;
}
