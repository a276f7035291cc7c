//! Property-based fuzzing of checkpoint loading (`run.rs`): the JSON half, the
//! safetensors half (with the JSON's CRC left as it was, and recomputed so that the
//! safetensors parser itself is reached) and the `checkpoints/latest` pointer, for the
//! generic tensor checkpoints of every algorithm and for PPO's. Random bytes and
//! mutations of valid files must give an error or a valid checkpoint, never a panic;
//! an Ok load holds values of one of the checkpoints saved (a loader may fall back to
//! the older one when the newest is damaged). Fixed seeds and case counts keep the run
//! short and repeatable.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed, TestCaseError, TestRunner};
use rlrig_learn::LearnError;
use rlrig_learn::ppo::{Checkpoint, CheckpointMeta};
use rlrig_learn::ppo::{Ppo, PpoConfig};
use rlrig_learn::run::{RunDir, TensorCheckpoint};
use serde::{Deserialize, Serialize};

const ALGO: &str = "fuzz";

fn config(cases: u32, seed: u64) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..ProptestConfig::default()
    }
}

/// Runs `test` on `cases` values of `strategy`; a panic inside fails the case.
fn fuzz<S: Strategy>(
    cases: u32,
    seed: u64,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let mut runner = TestRunner::new(config(cases, seed));
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// A directory under the temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("rlrig-fuzz-ckpt-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    /// Replaces the run's `checkpoints/` with `files`, `name` replaced by `bytes`.
    fn write(&self, files: &[(String, Vec<u8>)], name: &str, bytes: &[u8]) {
        let dir = self.0.join("checkpoints");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for (n, b) in files {
            let b = if n == name { bytes } else { b };
            fs::write(dir.join(n), b).unwrap();
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------
// Mutations

/// A byte-level edit; positions are taken modulo the length (of the focus region when
/// there is one).
#[derive(Clone, Debug)]
enum ByteEdit {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Duplicate(usize, usize),
}

/// JSON pieces worth inserting: structure, extreme numbers, escapes.
const TOKENS: &[&str] = &[
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "null",
    "true",
    "-1",
    "0",
    "1e999",
    "-1e999",
    "18446744073709551616",
    "-9223372036854775809",
    "4294967296",
    "NaN",
    "\"x\"",
    "1.5",
    "\\u0000",
    "\\ud800",
    "\\",
    "{\"a\":1}",
    "[]",
    "\u{feff}",
    "\"../x\"",
    "\"/\"",
];

fn insertion() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => proptest::sample::select(TOKENS).prop_map(|t| t.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 1..9),
    ]
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        4 => (any::<usize>(), 1..=255u8).prop_map(|(i, m)| ByteEdit::Flip(i, m)),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| ByteEdit::Set(i, b)),
        1 => any::<usize>().prop_map(ByteEdit::Truncate),
        3 => (any::<usize>(), insertion()).prop_map(|(i, b)| ByteEdit::Insert(i, b)),
        2 => (any::<usize>(), 1..24usize).prop_map(|(i, n)| ByteEdit::Delete(i, n)),
        1 => (any::<usize>(), 1..24usize).prop_map(|(i, n)| ByteEdit::Duplicate(i, n)),
    ]
}

/// Applies `edits` to `b`, positions within its first `focus` bytes (all when None).
fn mutate(b: &mut Vec<u8>, edits: &[ByteEdit], focus: Option<usize>) {
    for e in edits {
        let n = b.len();
        let span = focus.map_or(n, |f| f.min(n));
        let at = |i: usize| if span == 0 { 0 } else { i % span };
        match e {
            ByteEdit::Flip(i, m) if n > 0 => b[at(*i)] ^= m,
            ByteEdit::Set(i, v) if n > 0 => b[at(*i)] = *v,
            ByteEdit::Truncate(i) => b.truncate(i % (n + 1)),
            ByteEdit::Insert(i, s) => {
                let p = i % (span + 1);
                b.splice(p..p, s.iter().copied());
            }
            ByteEdit::Delete(i, k) if n > 0 => {
                let p = at(*i);
                b.drain(p..(p + k).min(n));
            }
            ByteEdit::Duplicate(i, k) if n > 0 => {
                let p = at(*i);
                let piece = b[p..(p + k).min(n)].to_vec();
                b.splice(p..p, piece);
            }
            _ => {}
        }
    }
}

/// A structural edit of a safetensors header: the JSON stays well-formed and the length
/// prefix right, so the parser's checks of dtypes, shapes and offsets are reached.
#[derive(Clone, Debug)]
enum HeaderEdit {
    Dtype(usize, &'static str),
    Shape(usize, Vec<u64>),
    Offsets(usize, u64, u64),
    Remove(usize),
    Rename(usize, String),
    Metadata(String, String),
    Field(usize, String),
    LengthPrefix(u64),
}

fn big() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0..64u64,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX / 2 + 1),
        1 => Just(1 << 32),
        1 => Just(1 << 62),
        1 => Just(usize::MAX as u64 / 4 + 1),
        1 => any::<u64>(),
    ]
}

const DTYPES: &[&str] = &[
    "F32", "F16", "BF16", "F64", "U8", "I8", "BOOL", "I64", "U64", "F8_E4M3", "F4", "X", "",
];

fn header_edit() -> impl Strategy<Value = HeaderEdit> {
    prop_oneof![
        2 => (any::<usize>(), proptest::sample::select(DTYPES)).prop_map(|(i, d)| HeaderEdit::Dtype(i, d)),
        3 => (any::<usize>(), proptest::collection::vec(big(), 0..4)).prop_map(|(i, s)| HeaderEdit::Shape(i, s)),
        3 => (any::<usize>(), big(), big()).prop_map(|(i, a, b)| HeaderEdit::Offsets(i, a, b)),
        1 => any::<usize>().prop_map(HeaderEdit::Remove),
        1 => (any::<usize>(), "[a-z_]{0,8}").prop_map(|(i, s)| HeaderEdit::Rename(i, s)),
        1 => ("[a-z_]{0,8}", "[a-z0-9]{0,8}").prop_map(|(k, v)| HeaderEdit::Metadata(k, v)),
        1 => (any::<usize>(), "dtype|shape|data_offsets").prop_map(|(i, f)| HeaderEdit::Field(i, f)),
        1 => big().prop_map(HeaderEdit::LengthPrefix),
    ]
}

/// The safetensors header length of `b` (0 when it has none).
fn header_len(b: &[u8]) -> usize {
    b.get(..8)
        .map_or(0, |h| u64::from_le_bytes(h.try_into().unwrap()) as usize)
}

/// Applies structural edits to the header of the safetensors file `b`.
fn edit_header(b: &mut Vec<u8>, edits: &[HeaderEdit]) {
    let n = header_len(b);
    let Ok(serde_json::Value::Object(mut h)) = serde_json::from_slice(&b[8..8 + n]) else {
        return;
    };
    let mut prefix = None;
    for e in edits {
        let names: Vec<String> = h.keys().filter(|k| *k != "__metadata__").cloned().collect();
        let pick = |i: usize| names.get(i % names.len().max(1)).cloned();
        match e {
            HeaderEdit::Dtype(i, d) => {
                if let Some(t) = pick(*i).and_then(|k| h.get_mut(&k)) {
                    t["dtype"] = (*d).into();
                }
            }
            HeaderEdit::Shape(i, s) => {
                if let Some(t) = pick(*i).and_then(|k| h.get_mut(&k)) {
                    t["shape"] = s.clone().into();
                }
            }
            HeaderEdit::Offsets(i, a, c) => {
                if let Some(t) = pick(*i).and_then(|k| h.get_mut(&k)) {
                    t["data_offsets"] = vec![*a, *c].into();
                }
            }
            HeaderEdit::Remove(i) => {
                if let Some(k) = pick(*i) {
                    h.remove(&k);
                }
            }
            HeaderEdit::Rename(i, s) => {
                if let Some(k) = pick(*i)
                    && let Some(t) = h.remove(&k)
                {
                    h.insert(s.clone(), t);
                }
            }
            HeaderEdit::Metadata(k, v) => {
                h.insert("__metadata__".into(), serde_json::json!({ k: v }));
            }
            HeaderEdit::Field(i, f) => {
                if let Some(serde_json::Value::Object(t)) = pick(*i).and_then(|k| h.get_mut(&k)) {
                    t.remove(f);
                }
            }
            HeaderEdit::LengthPrefix(p) => prefix = Some(*p),
        }
    }
    let text = serde_json::to_vec(&h).unwrap();
    let data = b[8 + n..].to_vec();
    b.clear();
    b.extend_from_slice(&prefix.unwrap_or(text.len() as u64).to_le_bytes());
    b.extend_from_slice(&text);
    b.extend_from_slice(&data);
}

/// How a weights file is damaged.
#[derive(Clone, Debug)]
enum WeightsDamage {
    /// Byte edits anywhere, or within the length prefix and header.
    Bytes(Vec<ByteEdit>, bool),
    /// Structural edits of the header.
    Header(Vec<HeaderEdit>),
    /// All new bytes.
    Random(Vec<u8>),
}

fn weights_damage() -> impl Strategy<Value = WeightsDamage> {
    prop_oneof![
        3 => (proptest::collection::vec(byte_edit(), 1..5), any::<bool>())
            .prop_map(|(e, h)| WeightsDamage::Bytes(e, h)),
        3 => proptest::collection::vec(header_edit(), 1..4).prop_map(WeightsDamage::Header),
        1 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(WeightsDamage::Random),
    ]
}

fn damage(orig: &[u8], d: &WeightsDamage) -> Vec<u8> {
    let mut b = orig.to_vec();
    match d {
        WeightsDamage::Bytes(e, header) => {
            let focus = header.then(|| 8 + header_len(orig));
            mutate(&mut b, e, focus);
        }
        WeightsDamage::Header(e) => edit_header(&mut b, e),
        WeightsDamage::Random(r) => b.clone_from(r),
    }
    b
}

/// A JSON checkpoint with its `weights_crc32c` set to the CRC of `weights` (the file
/// unchanged when it does not parse).
fn with_crc(json: &[u8], weights: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(json) {
        Ok(mut v) => {
            v["weights_crc32c"] = crc32c::crc32c(weights).into();
            serde_json::to_vec(&v).unwrap()
        }
        Err(_) => json.to_vec(),
    }
}

/// What the `latest` pointer becomes.
const LATEST_NAMES: &[&str] = &[
    "",
    " ",
    "\n",
    ".",
    "..",
    "/",
    "latest",
    "checkpoints",
    "../checkpoints/latest",
    "ckpt-000000000001.json",
    "ckpt-000000000001.safetensors",
    "ckpt-000000000002.safetensors",
    "ckpt-00000001.json",
    "ckpt-00000001.safetensors",
    "ckpt-00000002.safetensors",
    "ckpt-99.json",
    "ckpt-.json",
    "\u{0}",
];

fn latest_damage() -> impl Strategy<Value = (Vec<ByteEdit>, Option<Vec<u8>>)> {
    prop_oneof![
        3 => proptest::collection::vec(byte_edit(), 1..5).prop_map(|e| (e, None)),
        1 => proptest::sample::select(LATEST_NAMES).prop_map(|n| (vec![], Some(n.as_bytes().to_vec()))),
        1 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| (vec![], Some(b))),
    ]
}

fn latest_bytes(orig: &[u8], d: &(Vec<ByteEdit>, Option<Vec<u8>>)) -> Vec<u8> {
    match d {
        (_, Some(b)) => b.clone(),
        (e, None) => {
            let mut b = orig.to_vec();
            mutate(&mut b, e, None);
            b
        }
    }
}

/// A load must not panic (the runner catches one), and its error has a message.
fn err_has_message(e: &LearnError) -> Result<(), TestCaseError> {
    prop_assert!(!e.to_string().is_empty(), "empty error message: {:?}", e);
    Ok(())
}

/// The files of a run's `checkpoints/`, with the newest JSON and weights named.
struct Files {
    files: Vec<(String, Vec<u8>)>,
    json: String,
    weights: String,
}

impl Files {
    fn read(run: &Path) -> Files {
        let dir = run.join("checkpoints");
        let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        let json = fs::read_to_string(dir.join("latest"))
            .unwrap()
            .trim()
            .to_string();
        let weights = json.replace(".json", ".safetensors");
        assert!(
            files.iter().any(|(n, _)| *n == weights),
            "{weights} missing"
        );
        Files {
            files,
            json,
            weights,
        }
    }

    fn get(&self, name: &str) -> &[u8] {
        &self.files.iter().find(|(n, _)| n == name).unwrap().1
    }
}

// ---------------------------------------------------------------------------------------
// Generic tensor checkpoints (`save_tensors` / `load_tensors`)

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Cfg {
    env: String,
    lr: f64,
    hidden: Vec<usize>,
    flag: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct St {
    step: u64,
    returns: Vec<f64>,
    positions: Vec<u64>,
}

struct SavedTensors {
    cfg: Cfg,
    state: St,
    tensors: Vec<(String, Vec<f32>)>,
}

/// The checkpoints a fixture saved, and its run directory's files as written.
struct Fixture<S> {
    saved: Vec<S>,
    files: Files,
}

fn tensor_fixture() -> &'static Fixture<SavedTensors> {
    static F: OnceLock<Fixture<SavedTensors>> = OnceLock::new();
    F.get_or_init(|| {
        let scratch = Scratch::new("tensor-fixture");
        let dir = RunDir::new(&scratch.0).unwrap();
        let saved: Vec<SavedTensors> = (1..=2u64)
            .map(|step| {
                let k = step as f32;
                SavedTensors {
                    cfg: Cfg {
                        env: "CartPole-v1".into(),
                        lr: 3e-4 * step as f64,
                        hidden: vec![4, 4],
                        flag: step == 2,
                    },
                    state: St {
                        step,
                        returns: vec![1.5, -2.25 * step as f64, 1e-300],
                        positions: vec![step, u64::MAX],
                    },
                    tensors: vec![
                        ("w".into(), (0..6).map(|i| i as f32 * 0.5 - k).collect()),
                        ("b".into(), vec![k, -k, f32::MIN_POSITIVE]),
                        ("log_std".into(), vec![-0.5 * k, 0.0]),
                    ],
                }
            })
            .collect();
        for s in &saved {
            let views: Vec<(&str, &[f32])> = s
                .tensors
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_slice()))
                .collect();
            dir.save_tensors(ALGO, s.state.step, &s.cfg, &s.state, &views)
                .unwrap();
        }
        Fixture {
            saved,
            files: Files::read(&scratch.0),
        }
    })
}

/// What an Ok load must match, given what was damaged.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// Everything as one saved checkpoint: the damage is caught (or undone).
    Exact,
    /// The tensors (the JSON was edited: a changed number there is a valid JSON).
    Tensors,
    /// The config and state (the weights were edited and their CRC recomputed).
    Meta,
}

fn same_f32(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn load_tensors(run: &Path) -> Result<TensorCheckpoint<Cfg, St>, LearnError> {
    RunDir::open(run)?.load_tensors::<Cfg, St>(ALGO)
}

/// Loads the run the way a resume does and checks the result against `expect`.
fn check_tensor_load(run: &Path, expect: Expect) -> Result<(), TestCaseError> {
    let f = tensor_fixture();
    if let Ok(d) = RunDir::open(run) {
        let _ = d.algo();
    }
    let ck = match load_tensors(run) {
        Ok(ck) => ck,
        Err(e) => return err_has_message(&e),
    };
    for (name, len) in &ck.meta.tensors {
        let v = ck.tensors.get(name);
        prop_assert!(
            v.is_some_and(|v| v.len() == *len),
            "tensor '{}' does not have the {} values the JSON says",
            name,
            len
        );
    }
    let tensors_match = |s: &SavedTensors| {
        let saved: HashMap<&str, &[f32]> = s
            .tensors
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        ck.tensors
            .iter()
            .all(|(n, v)| saved.get(n.as_str()).is_some_and(|s| same_f32(s, v)))
    };
    let meta_match = |s: &SavedTensors| ck.meta.config == s.cfg && ck.meta.state == s.state;
    let ok = f.saved.iter().any(|s| match expect {
        Expect::Exact => meta_match(s) && tensors_match(s) && ck.tensors.len() == s.tensors.len(),
        Expect::Tensors => tensors_match(s),
        Expect::Meta => meta_match(s),
    });
    prop_assert!(
        ok,
        "a damaged checkpoint loaded as none of the saved ones ({:?}): {:?}",
        expect,
        ck.meta
    );
    Ok(())
}

/// One checkpoint format under fuzzing: its saved files, and how a load of a run
/// directory holding (damaged) copies of them is checked against what was saved.
struct Format<'a> {
    name: &'static str,
    files: &'a Files,
    seed: u64,
    check: &'a dyn Fn(&Path, Expect) -> Result<(), TestCaseError>,
}

/// Every kind of damage to one format's files: the newest checkpoint JSON replaced by
/// random bytes or edited, the weights damaged (with or without a CRC that matches the
/// damage), the `latest` pointer damaged. Each load is exact, changed but consistent,
/// or an error with a message; never a panic.
fn damage_all(f: &Format) {
    let files = f.files;
    let (json, weights) = (files.get(&files.json), files.get(&files.weights));
    let s = Scratch::new(&format!("{}-json-random", f.name));
    let text = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        // Text that looks more like JSON reaches further.
        "[\\[\\]{}\":,0-9a-z_. -]{0,300}".prop_map(String::into_bytes),
    ];
    fuzz(256, f.seed, text, |bytes| {
        s.write(&files.files, &files.json, &bytes);
        (f.check)(&s.0, Expect::Exact)
    });

    let s = Scratch::new(&format!("{}-json-edits", f.name));
    let edits = proptest::collection::vec(byte_edit(), 1..6);
    fuzz(256, f.seed + 1, edits, |edits| {
        let mut b = json.to_vec();
        mutate(&mut b, &edits, None);
        s.write(&files.files, &files.json, &b);
        (f.check)(&s.0, Expect::Tensors)
    });

    let s = Scratch::new(&format!("{}-weights", f.name));
    let damages = (weights_damage(), any::<bool>());
    fuzz(256, f.seed + 2, damages, |(d, recompute)| {
        let w = damage(weights, &d);
        s.write(&files.files, &files.weights, &w);
        if recompute {
            // The CRC matches: the safetensors parser sees the damage.
            let dir = s.0.join("checkpoints");
            fs::write(dir.join(&files.json), with_crc(json, &w)).unwrap();
        }
        (f.check)(
            &s.0,
            if recompute {
                Expect::Meta
            } else {
                Expect::Exact
            },
        )
    });

    let s = Scratch::new(&format!("{}-latest", f.name));
    let orig = files.get("latest");
    fuzz(256, f.seed + 3, latest_damage(), |d| {
        s.write(&files.files, "latest", &latest_bytes(orig, &d));
        (f.check)(&s.0, Expect::Exact)
    });
}

#[test]
fn tensor_checkpoint_untouched_loads_exactly() {
    let f = tensor_fixture();
    let s = Scratch::new("tensor-untouched");
    s.write(&f.files.files, "", b"");
    let ck = load_tensors(&s.0).unwrap();
    let newest = &f.saved[1];
    assert_eq!(ck.meta.config, newest.cfg);
    assert_eq!(ck.meta.state, newest.state);
    assert_eq!(ck.tensors.len(), newest.tensors.len());
    for (n, v) in &newest.tensors {
        assert!(same_f32(&ck.tensors[n], v), "tensor {n}");
    }
    assert_eq!(RunDir::open(&s.0).unwrap().algo().unwrap(), ALGO);
}

#[test]
fn tensor_checkpoint_damage_never_panics() {
    let f = tensor_fixture();
    damage_all(&Format {
        name: "tensor",
        files: &f.files,
        seed: 0xc0de_0001,
        check: &check_tensor_load,
    });
}

// ---------------------------------------------------------------------------------------
// PPO checkpoints (`save_checkpoint` / `load_checkpoint`)

struct SavedPpo {
    meta: CheckpointMeta,
    params: Vec<f32>,
    adam_m: Vec<f32>,
    adam_v: Vec<f32>,
}

fn ppo_fixture() -> &'static Fixture<SavedPpo> {
    static F: OnceLock<Fixture<SavedPpo>> = OnceLock::new();
    F.get_or_init(|| {
        let cfg = PpoConfig {
            num_envs: 2,
            num_steps: 4,
            num_minibatches: 2,
            total_steps: 64,
            hidden: vec![4],
            ..PpoConfig::for_env("CartPole-v1")
        };
        let ppo = Ppo::new(cfg.clone(), 1).unwrap();
        let scratch = Scratch::new("ppo-fixture");
        let dir = RunDir::new(&scratch.0).unwrap();
        for it in 1..=2u64 {
            let mut state = ppo.state();
            state.iteration = it;
            state.global_step = 8 * it;
            let k = it as f32;
            let params: Vec<f32> = ppo.agent.params.iter().map(|p| p * k).collect();
            let (m, v) = ppo.adam_moments();
            let m: Vec<f32> = m.iter().map(|x| x + 0.25 * k).collect();
            let v: Vec<f32> = v.iter().map(|x| x + 0.5 * k).collect();
            dir.save_checkpoint(&cfg, state, &params, (&m, &v)).unwrap();
        }
        let files = Files::read(&scratch.0);
        let saved = files
            .files
            .iter()
            .filter(|(n, _)| n.ends_with(".json"))
            .map(|(n, _)| {
                let ck = rlrig_learn::ppo::load_checkpoint(&scratch.0.join("checkpoints").join(n))
                    .unwrap();
                SavedPpo {
                    meta: ck.meta,
                    params: ck.params,
                    adam_m: ck.adam_m,
                    adam_v: ck.adam_v,
                }
            })
            .collect::<Vec<_>>();
        assert_eq!(saved.len(), 2);
        Fixture { saved, files }
    })
}

fn json_of<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// Checks an Ok PPO load against `expect`.
fn check_ppo(ck: &Checkpoint, expect: Expect) -> Result<(), TestCaseError> {
    let n = ck.meta.num_params;
    prop_assert!(
        [ck.params.len(), ck.adam_m.len(), ck.adam_v.len()] == [n; 3],
        "tensor lengths differ from num_params = {}",
        n
    );
    let weights_match = |s: &SavedPpo| {
        same_f32(&ck.params, &s.params)
            && same_f32(&ck.adam_m, &s.adam_m)
            && same_f32(&ck.adam_v, &s.adam_v)
    };
    let meta_match = |s: &SavedPpo| {
        json_of(&ck.meta.config) == json_of(&s.meta.config)
            && json_of(&ck.meta.state) == json_of(&s.meta.state)
    };
    let ok = ppo_fixture().saved.iter().any(|s| match expect {
        Expect::Exact => json_of(&ck.meta) == json_of(&s.meta) && weights_match(s),
        Expect::Tensors => weights_match(s),
        Expect::Meta => meta_match(s),
    });
    prop_assert!(
        ok,
        "a damaged PPO checkpoint loaded as none of the saved ones ({:?})",
        expect
    );
    Ok(())
}

/// Loads the run through `RunDir::load_checkpoint` and the newest JSON through
/// `load_checkpoint(path)`, checking both.
fn check_ppo_load(run: &Path, json: &str, expect: Expect) -> Result<(), TestCaseError> {
    if let Ok(d) = RunDir::open(run) {
        let _ = d.algo();
    }
    match RunDir::open(run).and_then(|d| d.load_checkpoint()) {
        Ok(ck) => check_ppo(&ck, expect)?,
        Err(e) => err_has_message(&e)?,
    }
    match rlrig_learn::ppo::load_checkpoint(&run.join("checkpoints").join(json)) {
        Ok(ck) => check_ppo(&ck, expect),
        Err(e) => err_has_message(&e),
    }
}

#[test]
fn ppo_checkpoint_untouched_loads_exactly() {
    let f = ppo_fixture();
    let s = Scratch::new("ppo-untouched");
    s.write(&f.files.files, "", b"");
    let ck = RunDir::open(&s.0).unwrap().load_checkpoint().unwrap();
    let newest = f
        .saved
        .iter()
        .max_by_key(|s| s.meta.state.iteration)
        .unwrap();
    assert_eq!(ck.meta, newest.meta);
    assert!(same_f32(&ck.params, &newest.params));
    assert!(same_f32(&ck.adam_m, &newest.adam_m));
    assert!(same_f32(&ck.adam_v, &newest.adam_v));
    assert_eq!(RunDir::open(&s.0).unwrap().algo().unwrap(), "ppo");
}

#[test]
fn ppo_checkpoint_damage_never_panics() {
    let f = ppo_fixture();
    damage_all(&Format {
        name: "ppo",
        files: &f.files,
        seed: 0xc0de_0011,
        check: &|run, expect| check_ppo_load(run, &f.files.json, expect),
    });
}
