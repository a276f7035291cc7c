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

/// metrics.csv: rewritten atomically once when a run starts or resumes (dropping rows
/// past the checkpoint, which the resumed run produces again), then appended to.
pub struct MetricsCsv {
    path: PathBuf,
    file: fs::File,
}

impl MetricsCsv {
    /// Opens metrics.csv with `header`, keeping the rows whose first column is at most
    /// `upto` (the checkpoint's iteration or step).
    pub fn open_with(dir: &Path, header: &str, upto: u64) -> Result<MetricsCsv, LearnError> {
        let path = dir.join("metrics.csv");
        let mut text = String::from(header);
        text.push('\n');
        if let Ok(old) = fs::read_to_string(&path) {
            for l in old.lines().skip(1) {
                if l.split(',')
                    .next()
                    .and_then(|x| x.parse::<u64>().ok())
                    .is_some_and(|i| i <= upto)
                {
                    text.push_str(l);
                    text.push('\n');
                }
            }
        }
        write_atomic(&path, text.as_bytes())?;
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        Ok(MetricsCsv { path, file })
    }

    pub fn push(&mut self, mut row: String) -> Result<(), LearnError> {
        row.push('\n');
        append_whole(&mut self.file, &self.path, row.as_bytes())
    }
}

/// A run's metrics.csv as written by [`MetricsCsv`]: the header's column names and
/// each row's values (`NaN` where an iteration had no finished episode).
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<f64>>,
}

impl Metrics {
    /// Reads `dir/metrics.csv`; a missing file, an empty one, a row of another width
    /// or a value that is not a number is an error naming the file and line.
    pub fn read(dir: &Path) -> Result<Metrics, LearnError> {
        let path = dir.join("metrics.csv");
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        Metrics::parse(&text).map_err(|why| LearnError::Corrupt { path, why })
    }

    /// Parses the text of a metrics.csv.
    pub fn parse(text: &str) -> Result<Metrics, String> {
        let mut lines = text.lines();
        let columns: Vec<String> = lines
            .next()
            .filter(|h| !h.is_empty())
            .ok_or("empty: no header")?
            .split(',')
            .map(str::to_string)
            .collect();
        let rows = lines
            .enumerate()
            .map(|(n, l)| {
                let row = l
                    .split(',')
                    .enumerate()
                    .map(|(i, v)| {
                        v.parse::<f64>().map_err(|_| {
                            format!("line {}: column {} is not a number: '{v}'", n + 2, i + 1)
                        })
                    })
                    .collect::<Result<Vec<f64>, String>>()?;
                if row.len() != columns.len() {
                    return Err(format!(
                        "line {}: {} values for {} columns",
                        n + 2,
                        row.len(),
                        columns.len()
                    ));
                }
                Ok(row)
            })
            .collect::<Result<_, String>>()?;
        Ok(Metrics { columns, rows })
    }

    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

/// Appends `bytes` to `file` whole or not at all: a write that fails part way (a full
/// disk) is cut back off, so a later reader never meets half a row or record.
fn append_whole(file: &mut fs::File, path: &Path, bytes: &[u8]) -> Result<(), LearnError> {
    let before = file.metadata().map_err(io(path))?.len();
    file.write_all(bytes).map_err(|source| {
        let _ = file.set_len(before);
        LearnError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// A minimal TensorBoard event-file writer: TFRecord framing (length, masked CRC32C)
/// around hand-encoded `Event` protos holding scalar summaries.
pub struct TensorBoard {
    file: fs::File,
    path: PathBuf,
}

fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c::crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl TensorBoard {
    pub fn create(dir: &Path) -> Result<TensorBoard, LearnError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let path = dir.join(format!(
            "events.out.tfevents.{}.rlrig.{}",
            now.as_secs(),
            std::process::id()
        ));
        let file = fs::File::create(&path).map_err(io(&path))?;
        let mut tb = TensorBoard { file, path };
        // First event: file_version (field 3).
        let mut ev = Vec::new();
        ev.push(0x09); // wall_time, double
        ev.extend_from_slice(&now.as_secs_f64().to_le_bytes());
        let v = b"brain.Event:2";
        ev.push(0x1a);
        varint(v.len() as u64, &mut ev);
        ev.extend_from_slice(v);
        tb.record(&ev)?;
        Ok(tb)
    }

    fn record(&mut self, data: &[u8]) -> Result<(), LearnError> {
        let len = (data.len() as u64).to_le_bytes();
        let mut buf = Vec::with_capacity(data.len() + 16);
        buf.extend_from_slice(&len);
        buf.extend_from_slice(&masked_crc(&len).to_le_bytes());
        buf.extend_from_slice(data);
        buf.extend_from_slice(&masked_crc(data).to_le_bytes());
        append_whole(&mut self.file, &self.path, &buf)
    }

    /// Writes scalars `(tag, value)` at `step`.
    pub fn scalars(&mut self, step: u64, values: &[(&str, f64)]) -> Result<(), LearnError> {
        let mut summary = Vec::new();
        for (tag, v) in values {
            if !v.is_finite() {
                continue;
            }
            let mut val = Vec::new();
            val.push(0x0a); // tag, string
            varint(tag.len() as u64, &mut val);
            val.extend_from_slice(tag.as_bytes());
            val.push(0x15); // simple_value, float
            val.extend_from_slice(&(*v as f32).to_le_bytes());
            summary.push(0x0a); // Summary.value
            varint(val.len() as u64, &mut summary);
            summary.extend_from_slice(&val);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut ev = Vec::new();
        ev.push(0x09);
        ev.extend_from_slice(&now.as_secs_f64().to_le_bytes());
        ev.push(0x10); // step, varint
        varint(step, &mut ev);
        ev.push(0x2a); // summary
        varint(summary.len() as u64, &mut ev);
        ev.extend_from_slice(&summary);
        self.record(&ev)?;
        self.file.flush().map_err(io(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Rows written through `MetricsCsv` (any finite or NaN values, any header)
        /// read back as written; text that is not a metrics file is an error, never a
        /// panic.
        #[test]
        fn metrics_written_read_back(
            cols in proptest::collection::vec("[a-z_]{1,12}", 1..6),
            rows in proptest::collection::vec(proptest::collection::vec(
                proptest::prop_oneof![proptest::num::f64::NORMAL, proptest::strategy::Just(f64::NAN), proptest::strategy::Just(0.0)], 6), 0..8),
            junk in ".{0,80}",
        ) {
            let dir = std::env::temp_dir().join(format!("rlrig-metrics-{}", std::process::id()));
            fs::create_dir_all(&dir).unwrap();
            let header = cols.join(",");
            let mut csv = MetricsCsv::open_with(&dir, &header, 0).unwrap();
            let rows: Vec<Vec<f64>> = rows.into_iter().map(|r| r[..cols.len()].to_vec()).collect();
            for r in &rows {
                csv.push(r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(",")).unwrap();
            }
            let m = Metrics::read(&dir).unwrap();
            proptest::prop_assert_eq!(&m.columns, &cols);
            proptest::prop_assert_eq!(m.rows.len(), rows.len());
            for (a, b) in m.rows.iter().zip(&rows) {
                for (x, y) in a.iter().zip(b) {
                    proptest::prop_assert!(x == y || (x.is_nan() && y.is_nan()));
                }
            }
            let _ = Metrics::parse(&junk);
            let _ = fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn masked_crc_matches_tensorflow_reference_value() {
        // TFRecord's mask of crc32c("") = 0 is 0xa282ead8.
        assert_eq!(masked_crc(b""), 0xa282_ead8);
        // crc32c("123456789") = 0xe3069283 (the CRC-32C check value).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    /// The steps of the run's checkpoints, ascending.
    fn checkpoint_names(run: &RunDir) -> Vec<u64> {
        let mut v: Vec<u64> = fs::read_dir(run.path.join("checkpoints"))
            .unwrap()
            .filter_map(|e| {
                let n = e.unwrap().file_name().into_string().unwrap();
                n.strip_prefix("ckpt-")?.strip_suffix(".json")?.parse().ok()
            })
            .collect();
        v.sort();
        v
    }

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
        assert_eq!(checkpoint_names(&run), [2000, 3000]);
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
        assert_eq!(checkpoint_names(&run), [2000, 2500]);
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
        assert_eq!(checkpoint_names(&run), [2000, 4000]);
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

    #[test]
    fn varints_encode_like_protobuf() {
        let mut v = Vec::new();
        varint(300, &mut v);
        assert_eq!(v, vec![0xac, 0x02]);
    }
}
