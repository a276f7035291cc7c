//! What a run leaves behind, written atomically (temp file + rename):
//!
//! ```text
//! runs/<name>/config.toml          the resolved config
//!             metrics.csv          one row per iteration (learning metrics + stage times)
//!             events.out.tfevents.*  TensorBoard scalars
//!             checkpoints/ckpt-<iteration>.safetensors   params, adam_m, adam_v
//!             checkpoints/ckpt-<iteration>.json          step, optimiser, RNG and env state
//!             checkpoints/latest                          name of the newest checkpoint
//!             eval.json            the final evaluation
//! ```

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::LearnError;

mod logs;
pub use logs::{Metrics, MetricsCsv, TensorBoard};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LearnError + '_ {
    move |source| LearnError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` so that readers see the old file or the new one, never a
/// torn one: a temp file in the same directory, fsync, rename. When any step fails (a
/// full disk, no permission, a directory in the way) the error names `path` and the
/// OS's reason, the temp file is removed and the old file is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LearnError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let written = fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| fs::rename(&tmp, path));
    if let Err(source) = renamed {
        let _ = fs::remove_file(&tmp);
        return Err(LearnError::Io {
            path: path.to_path_buf(),
            source,
        });
    }
    Ok(())
}

pub(crate) const FORMAT: u32 = 1;

pub(crate) fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A run directory.
pub struct RunDir {
    pub path: PathBuf,
    /// Checkpoints (their JSON paths) that loading skipped as damaged: the next
    /// checkpoint this run writes sets them aside (see [`RunDir::newest_intact`]).
    skipped: std::sync::Mutex<Vec<PathBuf>>,
}

impl RunDir {
    pub fn new(path: impl Into<PathBuf>) -> Result<RunDir, LearnError> {
        let path = path.into();
        fs::create_dir_all(path.join("checkpoints")).map_err(io(&path))?;
        Ok(RunDir::at(path))
    }

    /// An existing run directory, for reading: unlike [`RunDir::new`] it creates
    /// nothing, so a mistyped path is an error, not a new empty run.
    pub fn open(path: impl Into<PathBuf>) -> Result<RunDir, LearnError> {
        let path = path.into();
        if !path.is_dir() {
            return Err(LearnError::NoRun(path));
        }
        Ok(RunDir::at(path))
    }

    fn at(path: PathBuf) -> RunDir {
        RunDir {
            path,
            skipped: Default::default(),
        }
    }

    /// Whether the directory holds a run: a `latest` or any checkpoint (a copy whose
    /// `latest` did not arrive still holds one).
    pub fn has_checkpoint(&self) -> bool {
        self.path.join("checkpoints/latest").exists() || !self.candidates().is_empty()
    }

    /// Writes `config.toml` for a run of `algo`.
    pub fn write_config_of<C: Serialize>(&self, algo: &str, cfg: &C) -> Result<(), LearnError> {
        let text = format!(
            "# Resolved configuration of this run (rlrig train {algo}). Pass it back with --config.\n{}",
            toml::to_string(cfg).map_err(LearnError::encode("config.toml"))?
        );
        write_atomic(&self.path.join("config.toml"), text.as_bytes())
    }

    /// Saves a checkpoint of any algorithm: named f32 tensors in one safetensors file,
    /// config and state in the JSON (same order and pruning as PPO's).
    pub fn save_tensors<C: Serialize, S: Serialize>(
        &self,
        algo: &str,
        step: u64,
        cfg: &C,
        state: &S,
        tensors: &[(&str, &[f32])],
    ) -> Result<PathBuf, LearnError> {
        let bytes: Vec<(&str, Vec<u8>)> = tensors.iter().map(|(n, v)| (*n, to_bytes(v))).collect();
        let views = bytes
            .iter()
            .map(|(n, b)| {
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![b.len() / 4], b)
                    .map(|v| (*n, v))
                    .map_err(LearnError::encode("a checkpoint"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let weights =
            safetensors::serialize(views, None).map_err(LearnError::encode("a checkpoint"))?;
        let meta = TensorMeta {
            format: FORMAT,
            algo: algo.to_string(),
            config: cfg,
            state,
            weights: String::new(),
            weights_crc32c: crc32c::crc32c(&weights),
            tensors: tensors
                .iter()
                .map(|(n, v)| (n.to_string(), v.len()))
                .collect(),
        };
        self.commit(&format!("ckpt-{step:012}"), &weights, |wname| {
            let mut meta = meta;
            meta.weights = wname.to_string();
            serde_json::to_vec(&meta).map_err(LearnError::encode("a checkpoint"))
        })
    }

    /// Writes the weights, then the JSON, then `latest`, and keeps the newest two.
    pub(crate) fn commit(
        &self,
        stem: &str,
        weights: &[u8],
        json: impl FnOnce(&str) -> Result<Vec<u8>, LearnError>,
    ) -> Result<PathBuf, LearnError> {
        let dir = self.path.join("checkpoints");
        self.set_aside_skipped();
        let wname = format!("{stem}.safetensors");
        let jname = format!("{stem}.json");
        // Until `latest` names it, the new checkpoint is not there for readers; a write
        // that fails removes what was written of it, and `latest` keeps naming the
        // previous one. (A checkpoint of the same name that was there before, one a
        // finished run writes again, is replaced atomically and never removed.)
        let existed = dir.join(&jname).is_file();
        let written = write_atomic(&dir.join(&wname), weights)
            .and_then(|()| write_atomic(&dir.join(&jname), &json(&wname)?))
            .and_then(|()| write_atomic(&dir.join("latest"), jname.as_bytes()));
        if let Err(e) = written {
            if !existed {
                let _ = fs::remove_file(dir.join(&jname));
                let _ = fs::remove_file(dir.join(&wname));
            }
            return Err(e);
        }
        let mut old: Vec<String> = fs::read_dir(&dir)
            .map_err(io(&dir))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("ckpt-") && n.ends_with(".json"))
            .collect();
        old.sort();
        for n in old.iter().rev().skip(2) {
            let _ = fs::remove_file(dir.join(n));
            let _ = fs::remove_file(dir.join(n.replace(".json", ".safetensors")));
        }
        Ok(dir.join(jname))
    }

    /// Loads the newest intact checkpoint of a run of `algo` (see
    /// [`RunDir::newest_intact`]), checking its integrity.
    pub fn load_tensors<C: DeserializeOwned, S: DeserializeOwned>(
        &self,
        algo: &str,
    ) -> Result<TensorCheckpoint<C, S>, LearnError> {
        self.newest_intact(|p| load_tensors_at(p, algo))
    }

    /// The steps (or iterations) of the run's checkpoints on disk, ascending.
    pub fn checkpoint_steps(&self) -> Vec<u64> {
        let mut steps: Vec<u64> = fs::read_dir(self.path.join("checkpoints"))
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let n = e.ok()?.file_name().into_string().ok()?;
                n.strip_prefix("ckpt-")?.strip_suffix(".json")?.parse().ok()
            })
            .collect();
        steps.sort_unstable();
        steps
    }

    /// The checkpoint JSONs, newest first: the one `latest` names, then the others by
    /// name (`ckpt-<step>`, zero-padded), descending.
    fn candidates(&self) -> Vec<PathBuf> {
        let dir = self.path.join("checkpoints");
        let mut out: Vec<PathBuf> = self.latest_json().into_iter().collect();
        let mut names: Vec<String> = fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let e = e.ok()?;
                // Files only: a directory of that name is in the way, not a checkpoint.
                e.file_type().ok()?.is_file().then_some(())?;
                e.file_name().into_string().ok()
            })
            .filter(|n| n.starts_with("ckpt-") && n.ends_with(".json"))
            .collect();
        names.sort();
        for n in names.into_iter().rev() {
            let p = dir.join(n);
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// `load` applied to the newest checkpoint it reads without damage. rlrig keeps two
    /// checkpoints so that one damaged file (a flipped byte in the weights, a
    /// half-copied directory) does not lose the run: a checkpoint whose files are
    /// missing, malformed or fail their checksum is skipped with a warning on stderr
    /// naming it and why, and the next older one is tried. Other errors (another
    /// algorithm's run, a permission or I/O error that may pass) and a run with no
    /// intact checkpoint give that error. A training run that resumed this way renames
    /// the skipped checkpoints to `*.damaged` when it writes its next one, so the two
    /// it keeps are both intact.
    pub fn newest_intact<T>(
        &self,
        load: impl Fn(&Path) -> Result<T, LearnError>,
    ) -> Result<T, LearnError> {
        let candidates = self.candidates();
        let mut first_error = None;
        let mut skipped = Vec::new();
        for path in &candidates {
            match load(path) {
                Ok(v) => {
                    self.skipped
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(candidates.iter().take_while(|p| *p != path).cloned());
                    // Said once per process, though a command reads a run more than once.
                    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
                    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
                    for why in skipped {
                        if !said.contains(&why) {
                            eprintln!(
                                "warning: skipped a damaged checkpoint ({why}); using the older {}",
                                path.display()
                            );
                            said.push(why);
                        }
                    }
                    return Ok(v);
                }
                Err(e) if is_damage(&e) => {
                    skipped.push(e.to_string());
                    first_error.get_or_insert(e);
                }
                Err(e) => return Err(first_error.unwrap_or(e)),
            }
        }
        Err(first_error.unwrap_or_else(|| {
            let latest = self.path.join("checkpoints/latest");
            LearnError::Io {
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no checkpoint"),
                path: latest,
            }
        }))
    }
}

/// Damage to a checkpoint's files: malformed or failing its checksum, or missing.
fn is_damage(e: &LearnError) -> bool {
    match e {
        LearnError::Corrupt { .. } => true,
        LearnError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

impl RunDir {
    /// Renames the checkpoints that loading skipped as damaged to `*.damaged` (JSON and
    /// weights), out of the way of pruning; best effort, as pruning is.
    fn set_aside_skipped(&self) {
        let skipped = std::mem::take(&mut *self.skipped.lock().unwrap_or_else(|e| e.into_inner()));
        for json in skipped {
            let weights = json.with_extension("safetensors");
            for p in [json, weights] {
                let mut aside = p.clone().into_os_string();
                aside.push(".damaged");
                let _ = fs::rename(&p, aside);
            }
        }
    }
}

/// A checkpoint's JSON and the weights it names, read and checked: the JSON is of
/// `algo` and parses (`what` names the kind in the error), its format is this rlrig's,
/// and the weights pass their checksum. `head` gives the JSON's format, weights file
/// and checksum. Returns the JSON, the weights' path and bytes.
pub(crate) fn read_checkpoint<M: DeserializeOwned>(
    json_path: &Path,
    algos: &[&str],
    what: &str,
    head: impl Fn(&M) -> (u32, &str, u32),
) -> Result<(M, PathBuf, Vec<u8>), LearnError> {
    let corrupt = |why: String| LearnError::Corrupt {
        path: json_path.to_path_buf(),
        why,
    };
    let text = fs::read(json_path).map_err(io(json_path))?;
    check_algo(json_path, &text, algos)?;
    let meta: M = serde_json::from_slice(&text)
        .map_err(|e| corrupt(format!("not a valid rlrig {what}: {e}")))?;
    let (format, weights, crc) = head(&meta);
    if format != FORMAT {
        return Err(corrupt(format!(
            "checkpoint format {format} (this rlrig reads {FORMAT})"
        )));
    }
    let wpath = json_path.with_file_name(weights);
    let bytes = read_weights(&wpath, crc)?;
    Ok((meta, wpath, bytes))
}

/// The safetensors file in `bytes` (read from `wpath`).
pub(crate) fn safetensors_at<'a>(
    bytes: &'a [u8],
    wpath: &Path,
) -> Result<safetensors::SafeTensors<'a>, LearnError> {
    safetensors::SafeTensors::deserialize(bytes).map_err(|e| LearnError::Corrupt {
        path: wpath.to_path_buf(),
        why: e.to_string(),
    })
}

/// Tensor `name` of the weights at `wpath`, which must hold `len` values.
pub(crate) fn tensor_of_len(
    st: &safetensors::SafeTensors,
    wpath: &Path,
    name: &str,
    len: usize,
) -> Result<Vec<f32>, LearnError> {
    let v = tensor_f32(st, wpath, name)?;
    if v.len() != len {
        return Err(LearnError::Corrupt {
            path: wpath.to_path_buf(),
            why: format!("tensor '{name}' has {} values, expected {len}", v.len()),
        });
    }
    Ok(v)
}

/// Loads the checkpoint of a run of `algo` whose JSON is at `json_path`.
fn load_tensors_at<C: DeserializeOwned, S: DeserializeOwned>(
    json_path: &Path,
    algo: &str,
) -> Result<TensorCheckpoint<C, S>, LearnError> {
    let (meta, wpath, bytes) = read_checkpoint(
        json_path,
        &[algo],
        &format!("{algo} checkpoint"),
        |m: &TensorMeta<C, S>| (m.format, &m.weights, m.weights_crc32c),
    )?;
    let st = safetensors_at(&bytes, &wpath)?;
    let tensors = meta
        .tensors
        .iter()
        .map(|(name, len)| Ok((name.clone(), tensor_of_len(&st, &wpath, name, *len)?)))
        .collect::<Result<_, LearnError>>()?;
    Ok(TensorCheckpoint { meta, tensors })
}

impl RunDir {
    fn latest_json(&self) -> Result<PathBuf, LearnError> {
        let dir = self.path.join("checkpoints");
        let latest = dir.join("latest");
        let name = fs::read_to_string(&latest).map_err(io(&latest))?;
        Ok(dir.join(name.trim()))
    }

    /// The algorithm of the run's newest intact checkpoint (`ppo`, `sac`, ...).
    pub fn algo(&self) -> Result<String, LearnError> {
        self.newest_intact(|path| {
            let text = fs::read(path).map_err(io(path))?;
            algo_of(path, &text)
        })
    }
}

/// Where a restore reads a loaded checkpoint's tensors: by name, `None` where the
/// checkpoint has no such tensor.
pub trait TensorSource: FnMut(&str) -> Option<Vec<f32>> {}

impl<F: FnMut(&str) -> Option<Vec<f32>>> TensorSource for F {}

/// Takes tensor `name` out of a loaded checkpoint (through `get`) and checks that it
/// has the `len` values the current config needs: restoring any algorithm goes
/// through here, so a checkpoint of another shape is one clear error.
pub fn take_tensor(
    get: &mut impl TensorSource,
    name: &str,
    len: usize,
) -> Result<Vec<f32>, LearnError> {
    let v = get(name).ok_or_else(|| LearnError::Mismatch(format!("tensor '{name}' missing")))?;
    if v.len() != len {
        return Err(LearnError::Mismatch(format!(
            "tensor '{name}' has {} values, this config needs {len} (another env, network shape or population?)",
            v.len()
        )));
    }
    Ok(v)
}

/// Reads a weights file and checks its CRC32C against the JSON's.
fn read_weights(wpath: &Path, crc: u32) -> Result<Vec<u8>, LearnError> {
    let bytes = fs::read(wpath).map_err(io(wpath))?;
    if crc32c::crc32c(&bytes) != crc {
        return Err(LearnError::Corrupt {
            path: wpath.to_path_buf(),
            why: "checksum mismatch: the weights file is damaged or belongs to another checkpoint"
                .into(),
        });
    }
    Ok(bytes)
}

fn tensor_f32(
    st: &safetensors::SafeTensors<'_>,
    wpath: &Path,
    name: &str,
) -> Result<Vec<f32>, LearnError> {
    let t = st.tensor(name).map_err(|e| LearnError::Corrupt {
        path: wpath.to_path_buf(),
        why: format!("tensor '{name}': {e}"),
    })?;
    Ok(t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn algo_of(path: &Path, json: &[u8]) -> Result<String, LearnError> {
    #[derive(Deserialize)]
    struct Head {
        algo: String,
    }
    serde_json::from_slice::<Head>(json)
        .map(|h| h.algo)
        .map_err(|e| LearnError::Corrupt {
            path: path.to_path_buf(),
            why: format!("not a valid rlrig checkpoint: {e}"),
        })
}

/// A checkpoint of another algorithm gets an error that says which, not a parse error.
/// The checkpoint's algorithm is one of `want` (the first is what the caller trains).
fn check_algo(path: &Path, json: &[u8], want: &[&str]) -> Result<(), LearnError> {
    let got = algo_of(path, json)?;
    if !want.contains(&got.as_str()) {
        return Err(LearnError::Mismatch(format!(
            "{}: this is a {got} checkpoint, not {}; use `rlrig train {got} --resume` for it",
            path.display(),
            want.first().copied().unwrap_or("?")
        )));
    }
    Ok(())
}

/// The JSON half of a checkpoint written by [`RunDir::save_tensors`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TensorMeta<C, S> {
    pub format: u32,
    pub algo: String,
    pub config: C,
    pub state: S,
    pub weights: String,
    pub weights_crc32c: u32,
    /// Tensor names and lengths, in the order saved.
    pub tensors: Vec<(String, usize)>,
}

pub struct TensorCheckpoint<C, S> {
    pub meta: TensorMeta<C, S>,
    pub tensors: std::collections::HashMap<String, Vec<f32>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flip_last_byte(dir: &Path, step: u64) {
        let w = dir.join(format!("checkpoints/ckpt-{step:012}.safetensors"));
        let mut bytes = fs::read(&w).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        fs::write(&w, bytes).unwrap();
    }

    fn save(run: &RunDir, step: u64, value: f32) {
        run.save_tensors("t", step, &(), &(), &[("w", &[value])])
            .unwrap();
    }

    fn load(run: &RunDir) -> f32 {
        run.load_tensors::<(), ()>("t").unwrap().tensors["w"][0]
    }

    #[test]
    fn a_damaged_newest_checkpoint_falls_back_and_is_set_aside_after_resume() {
        let dir = std::env::temp_dir().join(format!("rlrig-run-fallback-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let run = RunDir::new(&dir).unwrap();
        for (step, v) in [(1000, 1.0), (2000, 2.0), (3000, 3.0)] {
            save(&run, step, v);
        }
        // Two kept, the newest named by `latest`.
        assert_eq!(run.checkpoint_steps(), [2000, 3000]);
        assert_eq!(load(&run), 3.0);
        // A flipped byte in the newest weights: the older checkpoint is read.
        flip_last_byte(&dir, 3000);
        assert_eq!(load(&run), 2.0);
        // A garbled `latest` too: the names are read instead.
        fs::write(dir.join("checkpoints/latest"), b"\xff\xfe").unwrap();
        assert_eq!(load(&run), 2.0);
        assert_eq!(run.algo().unwrap(), "t");
        // The run resumed from 2000 saves at 2500: the damaged 3000 is set aside, and
        // 2000 stays as the fallback.
        save(&run, 2500, 2.5);
        assert_eq!(run.checkpoint_steps(), [2000, 2500]);
        for f in ["json", "safetensors"] {
            assert!(
                dir.join(format!("checkpoints/ckpt-000000003000.{f}.damaged"))
                    .is_file()
            );
        }
        assert_eq!(load(&run), 2.5);
        // A resumed run that saves past the damaged step keeps the intact two.
        flip_last_byte(&dir, 2500);
        let run = RunDir::open(&dir).unwrap();
        assert_eq!(load(&run), 2.0);
        save(&run, 4000, 4.0);
        assert_eq!(run.checkpoint_steps(), [2000, 4000]);
        // A directory with checkpoints but no `latest` (a half-done copy) holds a run.
        fs::remove_file(dir.join("checkpoints/latest")).unwrap();
        assert!(run.has_checkpoint());
        assert_eq!(load(&run), 4.0);
        // Both damaged: the newest one's error, naming its file.
        flip_last_byte(&dir, 2000);
        flip_last_byte(&dir, 4000);
        let Err(e) = run.load_tensors::<(), ()>("t") else {
            panic!("two damaged checkpoints loaded");
        };
        let e = e.to_string();
        assert!(e.contains("ckpt-000000004000"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
