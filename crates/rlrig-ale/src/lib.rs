//! The Arcade Learning Environment (ALE 0.11.2: Stella and the game definitions), built
//! from ale-py's source distribution by `build.rs`, behind a small safe API: one [`Ale`]
//! per emulator, ROM lookup with errors that say where to get a ROM.
//!
//! ALE is GPL-2.0-only, and so is this crate; rlrig's default build does not include it
//! (the `atari` feature does).

use std::ffi::{CStr, CString, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[repr(C)]
struct AleInterface {
    _private: [u8; 0],
}

unsafe extern "C" {
    fn rlrig_ale_last_error() -> *const c_char;
    fn rlrig_ale_new(
        rom: *const c_char,
        seed: i32,
        repeat_action_probability: f32,
        max_num_frames_per_episode: i32,
        mode: i32,
        difficulty: i32,
    ) -> *mut AleInterface;
    fn rlrig_ale_free(a: *mut AleInterface);
    fn rlrig_ale_act(a: *mut AleInterface, action: i32, strength: f32, reward: *mut i32) -> c_int;
    fn rlrig_ale_reset(a: *mut AleInterface) -> c_int;
    fn rlrig_ale_game_over(a: *const AleInterface, with_truncation: c_int) -> c_int;
    fn rlrig_ale_screen_dims(a: *const AleInterface, height: *mut i32, width: *mut i32);
    fn rlrig_ale_lives(a: *mut AleInterface) -> c_int;
    fn rlrig_ale_screen_rgb(a: *const AleInterface, out: *mut u8);
    fn rlrig_ale_screen_grayscale(a: *const AleInterface, out: *mut u8);
    fn rlrig_ale_screen_indices(a: *const AleInterface) -> *const u8;
    fn rlrig_ale_grayscale_palette(a: *const AleInterface, out: *mut u8);
    fn rlrig_ale_ram(a: *const AleInterface, out: *mut u8);
    fn rlrig_ale_action_set(
        a: *const AleInterface,
        minimal: c_int,
        out: *mut i32,
        cap: c_int,
    ) -> c_int;
    fn rlrig_ale_clone_state(a: *mut AleInterface, bytes: *mut *mut u8, len: *mut usize) -> c_int;
    fn rlrig_ale_free_bytes(bytes: *mut u8);
    fn rlrig_ale_get_sticky(a: *const AleInterface, out: *mut f32);
    fn rlrig_ale_set_sticky(a: *mut AleInterface, input: *const f32);
    fn rlrig_ale_restore_state(a: *mut AleInterface, bytes: *const u8, len: usize) -> c_int;
}

/// The message of the last C++ exception caught on this thread.
fn last_error() -> String {
    // SAFETY: the shim returns a pointer to a thread-local std::string's NUL-terminated
    // buffer, valid until the next failing call on this thread; copied out at once.
    unsafe { CStr::from_ptr(rlrig_ale_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// What went wrong in the emulator or in finding its ROM.
#[derive(Debug, thiserror::Error)]
pub enum AleError {
    /// A call into ALE threw a C++ exception: the call and ALE's message.
    #[error("ALE {call}: {message}")]
    Call { call: &'static str, message: String },
    /// ALE could not load the ROM (unreadable, unsupported, a mode the game lacks).
    #[error("ALE could not load {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("ROM path {} contains a NUL byte", .0.display())]
    NulInPath(PathBuf),
    /// A state given to [`Ale::restore_state`] is not one [`Ale::clone_state`] made.
    #[error("ALE restoreState: {0}")]
    BadState(String),
    /// No `<rom>.bin` in any of the places looked.
    #[error(
        "ROM '{file}' not found (looked in: {}). ROMs are not part of rlrig: `bash scripts/fetch_roms.sh` \
         copies the ones in ale-py's wheel from PyPI into {}, or point --env-arg rom_dir=DIR \
         (or RLRIG_ROM_DIR) at a directory holding {file}",
        joined(looked),
        cache.display()
    )]
    RomNotFound {
        file: String,
        looked: Vec<PathBuf>,
        cache: PathBuf,
    },
}

fn joined(dirs: &[PathBuf]) -> String {
    let v: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    v.join(", ")
}

fn check(rc: c_int, call: &'static str) -> Result<(), AleError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(AleError::Call {
            call,
            message: last_error(),
        })
    }
}

/// The ALE's settings that must be given before a ROM is loaded (ale-py's `AtariEnv`
/// keywords of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// ALE's `random_seed`.
    pub seed: i32,
    pub repeat_action_probability: f32,
    /// Frames after which an episode is truncated (0: never).
    pub max_num_frames_per_episode: i32,
    /// The game mode, `None` for the ROM's default.
    pub mode: Option<u32>,
    pub difficulty: Option<u32>,
}

/// The number of bytes of the Atari 2600's RAM.
pub const RAM_SIZE: usize = 128;

/// One emulator with a ROM loaded. Every method that reaches the C++ object takes
/// `&mut self`; `Ale` is `Send` but not `Sync`.
pub struct Ale {
    raw: *mut AleInterface,
    height: usize,
    width: usize,
}

// SAFETY: an ALEInterface owns all its memory (OSystem, System, cartridge, screen
// buffers) and keeps no thread-local or global mutable state that two instances share
// (its settings and palettes are per instance; the logger mode is a plain int written
// with the same value by every instance). Moving it to another thread is therefore
// sound.
unsafe impl Send for Ale {}

impl Drop for Ale {
    fn drop(&mut self) {
        // SAFETY: `raw` came from rlrig_ale_new and is freed once, here.
        unsafe { rlrig_ale_free(self.raw) }
    }
}

impl std::fmt::Debug for Ale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ale({}x{})", self.height, self.width)
    }
}

impl Ale {
    /// Loads `rom` with `settings`. Errors (an unreadable or unsupported ROM, a mode
    /// the game does not have) carry ALE's message.
    pub fn new(rom: &Path, settings: &Settings) -> Result<Ale, AleError> {
        let path = CString::new(rom.as_os_str().as_bytes())
            .map_err(|_| AleError::NulInPath(rom.to_path_buf()))?;
        // SAFETY: `path` is a valid NUL-terminated string for the call's duration; the
        // shim returns null (and sets the error) or an owned object.
        let raw = unsafe {
            rlrig_ale_new(
                path.as_ptr(),
                settings.seed,
                settings.repeat_action_probability,
                settings.max_num_frames_per_episode,
                settings.mode.map_or(-1, |m| m as i32),
                settings.difficulty.map_or(-1, |d| d as i32),
            )
        };
        if raw.is_null() {
            return Err(AleError::Load {
                path: rom.to_path_buf(),
                message: last_error(),
            });
        }
        let (mut h, mut w) = (0, 0);
        // SAFETY: `raw` is a live ALEInterface with a ROM loaded.
        unsafe { rlrig_ale_screen_dims(raw, &mut h, &mut w) };
        Ok(Ale {
            raw,
            height: h as usize,
            width: w as usize,
        })
    }

    /// Emulates one frame with the ALE action id `action`; returns the frame's reward.
    pub fn act(&mut self, action: i32, strength: f32) -> Result<i32, AleError> {
        let mut r = 0;
        // SAFETY: live object; `r` outlives the call.
        check(
            unsafe { rlrig_ale_act(self.raw, action, strength, &mut r) },
            "act",
        )?;
        Ok(r)
    }

    pub fn reset_game(&mut self) -> Result<(), AleError> {
        // SAFETY: live object.
        check(unsafe { rlrig_ale_reset(self.raw) }, "reset_game")
    }

    /// The game ended (ALE's own frame limit is not counted: rlrig's executors keep the
    /// time limit).
    pub fn game_over(&mut self) -> bool {
        // SAFETY: live object.
        unsafe { rlrig_ale_game_over(self.raw, 0) != 0 }
    }

    pub fn lives(&mut self) -> i32 {
        // SAFETY: live object.
        unsafe { rlrig_ale_lives(self.raw) }
    }

    /// Writes the screen as RGB (height x width x 3 bytes).
    pub fn screen_rgb(&mut self, out: &mut [u8]) {
        assert_eq!(out.len(), self.height * self.width * 3, "RGB buffer size");
        // SAFETY: `out` holds exactly the bytes the shim writes (checked above).
        unsafe { rlrig_ale_screen_rgb(self.raw, out.as_mut_ptr()) }
    }

    /// Writes the screen through ALE's grayscale palette (height x width bytes).
    pub fn screen_grayscale(&mut self, out: &mut [u8]) {
        assert_eq!(out.len(), self.height * self.width, "grayscale buffer size");
        // SAFETY: as for `screen_rgb`.
        unsafe { rlrig_ale_screen_grayscale(self.raw, out.as_mut_ptr()) }
    }

    /// The screen as ALE keeps it: one palette index (a TIA colour, always even) per
    /// pixel, height x width bytes, borrowed from the emulator until it next runs.
    /// [`Ale::grayscale_palette`] at half the index maps them as
    /// [`Ale::screen_grayscale`] does.
    pub fn screen_indices(&self) -> &[u8] {
        // SAFETY: the shim returns ALEScreen's own array of height x width bytes, which
        // lives as long as the emulator and changes only when it runs a frame (`act`,
        // `reset_game`, `restore_state`: all take `&mut self`); the returned slice
        // borrows `self`, so neither can happen, nor the drop, while it is alive.
        unsafe {
            std::slice::from_raw_parts(rlrig_ale_screen_indices(self.raw), self.height * self.width)
        }
    }

    /// The grayscale value of each TIA colour, as [`Ale::screen_grayscale`] applies them:
    /// entry `k` for palette index `2k` (screens hold even indices only). Fixed for an
    /// emulator's life.
    pub fn grayscale_palette(&self) -> [u8; 128] {
        let mut out = [0u8; 128];
        // SAFETY: live object; the shim writes exactly 128 bytes.
        unsafe { rlrig_ale_grayscale_palette(self.raw, out.as_mut_ptr()) };
        out
    }

    pub fn ram(&mut self, out: &mut [u8; RAM_SIZE]) {
        // SAFETY: the shim copies ALERAM's 128 bytes into `out`.
        unsafe { rlrig_ale_ram(self.raw, out.as_mut_ptr()) }
    }

    /// ALE action ids of the game's minimal action set (`full`: all 18 legal actions).
    pub fn action_set(&mut self, full: bool) -> Vec<i32> {
        // SAFETY: live object; the shim writes at most 18 ids (ALE has 18 legal actions)
        // and returns how many there are.
        let mut buf = [0i32; 18];
        let n = unsafe { rlrig_ale_action_set(self.raw, c_int::from(!full), buf.as_mut_ptr(), 18) };
        buf[..(n as usize).min(18)].to_vec()
    }

    /// The emulator's whole state, its random generator included, and the actions a
    /// sticky action would repeat (which ALE's own state leaves out): 16 bytes more.
    pub fn clone_state(&mut self) -> Result<Vec<u8>, AleError> {
        let mut v = self.clone_ale_state()?;
        let mut sticky = [0f32; 4];
        // SAFETY: the shim writes four floats.
        unsafe { rlrig_ale_get_sticky(self.raw, sticky.as_mut_ptr()) };
        v.extend(sticky.iter().flat_map(|x| x.to_le_bytes()));
        Ok(v)
    }

    /// Restores a state from [`Ale::clone_state`] of the same ROM.
    pub fn restore_state(&mut self, bytes: &[u8]) -> Result<(), AleError> {
        let Some(split) = bytes.len().checked_sub(16) else {
            return Err(AleError::BadState(
                "the state is shorter than 16 bytes".into(),
            ));
        };
        let (state, tail) = bytes.split_at(split);
        self.restore_ale_state(state)?;
        let mut sticky = [0f32; 4];
        for (x, c) in sticky.iter_mut().zip(tail.chunks(4)) {
            *x = f32::from_le_bytes(c.try_into().unwrap());
        }
        if !(0.0..18.0).contains(&sticky[0]) || !(18.0..36.0).contains(&sticky[1]) {
            return Err(AleError::BadState(format!(
                "sticky actions {sticky:?} out of range"
            )));
        }
        // SAFETY: the shim reads four floats.
        unsafe { rlrig_ale_set_sticky(self.raw, sticky.as_ptr()) };
        Ok(())
    }

    fn clone_ale_state(&mut self) -> Result<Vec<u8>, AleError> {
        let mut p = std::ptr::null_mut();
        let mut n = 0usize;
        // SAFETY: on success the shim hands over a `new[]` buffer of `n` bytes, copied and
        // freed here.
        check(
            unsafe { rlrig_ale_clone_state(self.raw, &mut p, &mut n) },
            "cloneState",
        )?;
        let v = unsafe { std::slice::from_raw_parts(p, n) }.to_vec();
        unsafe { rlrig_ale_free_bytes(p) };
        Ok(v)
    }

    fn restore_ale_state(&mut self, bytes: &[u8]) -> Result<(), AleError> {
        // SAFETY: the shim copies `bytes` before returning.
        check(
            unsafe { rlrig_ale_restore_state(self.raw, bytes.as_ptr(), bytes.len()) },
            "restoreState",
        )
    }
}

/// Where ROMs are looked for, in order: `dir` (an env argument), `RLRIG_ROM_DIR`, an
/// installed ale-py's `ale_py/roms` (asked of `python3` once), and the rlrig cache's
/// `roms/` (where `scripts/fetch_roms.sh` puts them).
pub fn rom_dirs(dir: Option<&Path>) -> Vec<PathBuf> {
    static ALE_PY: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let mut dirs = Vec::new();
    dirs.extend(dir.map(Path::to_path_buf));
    dirs.extend(std::env::var_os("RLRIG_ROM_DIR").map(PathBuf::from));
    dirs.extend(
        ALE_PY
            .get_or_init(|| {
                let out = std::process::Command::new("python3")
                    .args([
                        "-c",
                        "import ale_py.roms as r, os; print(os.path.dirname(r.__file__))",
                    ])
                    .stderr(std::process::Stdio::null())
                    .output()
                    .ok()?;
                let s = String::from_utf8(out.stdout).ok()?;
                out.status.success().then(|| PathBuf::from(s.trim()))
            })
            .clone(),
    );
    dirs.push(cache_dir().join("roms"));
    dirs
}

// The same cache build.rs downloads ALE's source into.
use rlrig_sdist::cache_dir;

/// The ROM file of `rom` (ale-py's name, e.g. `pong`), or an error naming the file,
/// every place looked and how to get it.
pub fn find_rom(rom: &str, dir: Option<&Path>) -> Result<PathBuf, AleError> {
    let file = format!("{rom}.bin");
    let dirs = rom_dirs(dir);
    if let Some(p) = dirs.iter().map(|d| d.join(&file)).find(|p| p.is_file()) {
        return Ok(p);
    }
    Err(AleError::RomNotFound {
        file,
        looked: dirs,
        cache: cache_dir().join("roms"),
    })
}
