//! The native half of the `rlrig` Python package: rlrig-env's executors and
//! rlrig-learn's trained policies behind a small pyo3 surface. The Gymnasium
//! contract (spaces, autoreset modes, infos, registration) lives in the Python half
//! (`python/rlrig/`), which calls these classes once per batch.
//!
//! Every call checks its input before anything moves and raises `ValueError` or
//! `TypeError` naming the env, the index and the value; stepping releases the GIL.

use numpy::ndarray::IxDyn;
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{
    PyMemoryError, PyNotImplementedError, PyOSError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rlrig_env::{
    ActionBuf, AsyncVecEnvDyn, Dtype, EnvError, EnvSpec, ObsBuf, Purpose, Rng, Space, VecConfig,
    VecEnvDyn,
};
use rlrig_learn::LearnError;
use std::sync::Mutex;

fn env_error(e: EnvError) -> PyErr {
    match e {
        EnvError::ActionKind { .. } => PyTypeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The Python exception for an error of the learning crate: MemoryError for a run too
/// large for the machine, OSError for a file, NotImplementedError for what rlrig does
/// not do yet, the env's for an env's, ValueError for the rest (configs, checkpoints).
fn learn_error(e: LearnError) -> PyErr {
    match e {
        LearnError::Memory { .. } => PyMemoryError::new_err(e.to_string()),
        LearnError::Io { .. } => PyOSError::new_err(e.to_string()),
        LearnError::Unsupported(_) => PyNotImplementedError::new_err(e.to_string()),
        LearnError::Env(e) => env_error(e),
        _ => PyValueError::new_err(e.to_string()),
    }
}

fn closed(id: &str) -> PyErr {
    PyRuntimeError::new_err(format!("{id}: the env is closed"))
}

/// The executor behind `cell`, or the error for a closed env.
fn open<'a, T: ?Sized>(cell: &'a mut Mutex<Option<Box<T>>>, id: &str) -> PyResult<&'a mut Box<T>> {
    cell.get_mut()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .ok_or_else(|| closed(id))
}

/// A space as a dict the Python half turns into a `gymnasium.spaces` object.
fn space_dict<'py>(py: Python<'py>, s: &Space) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    s.fold(
        |n| {
            d.set_item("kind", "discrete")?;
            d.set_item("n", n)
        },
        |low, high, shape, dtype| {
            d.set_item("kind", "box")?;
            d.set_item("low", PyArray1::from_slice(py, low))?;
            d.set_item("high", PyArray1::from_slice(py, high))?;
            d.set_item("shape", shape.to_vec())?;
            d.set_item("dtype", dtype.name())
        },
    )?;
    Ok(d)
}

fn spec_dict<'py>(py: Python<'py>, s: &EnvSpec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", s.id)?;
    d.set_item("observation_space", space_dict(py, &s.observation_space)?)?;
    d.set_item("action_space", space_dict(py, &s.action_space)?)?;
    d.set_item("max_episode_steps", s.max_episode_steps)?;
    d.set_item("params", s.params.to_vec())?;
    Ok(d)
}

/// Shape of one observation (a flat `[obs_dim]` for Discrete observation spaces).
fn obs_shape(s: &EnvSpec) -> Vec<usize> {
    match &s.observation_space {
        Space::Box { shape, .. } => shape.clone(),
        Space::Discrete { .. } => vec![s.obs_dim],
    }
}

/// How the actions of one batch are checked and held between the Python call and
/// the executor (copied, so the GIL can be released while the envs step).
struct Actions {
    id: &'static str,
    /// `Some(n)` for `Discrete(n)`, `None` for a Box.
    discrete: Option<u32>,
    dim: usize,
    ints: Vec<i32>,
    floats: Vec<f32>,
}

impl Actions {
    fn new(spec: &EnvSpec) -> Actions {
        Actions {
            id: spec.id,
            discrete: match spec.action_space {
                Space::Discrete { n } => Some(n),
                Space::Box { .. } => None,
            },
            dim: spec.action_space.flat_dim(),
            ints: Vec::new(),
            floats: Vec::new(),
        }
    }

    /// Copies `a` (one action per env of `envs`, the env indices errors name) into
    /// the executor's type, checking shape, dtype and range.
    fn load(&mut self, a: &Bound<'_, PyAny>, envs: &[usize]) -> PyResult<ActionBuf<'_>> {
        let n = envs.len();
        let (id, discrete, dim) = (self.id, self.discrete, self.dim);
        // Built only when a shape is wrong: no allocation on the stepping path.
        let expected = || match discrete {
            Some(_) => py_shape(&[n]),
            None => py_shape(&[n, dim]),
        };
        let shape_ok = |shape: &[usize]| match discrete {
            Some(_) => shape == [n] || (n == 1 && shape.is_empty()),
            None => shape == [n, dim] || (n == 1 && shape == [dim]),
        };
        let bad_shape = |shape: &[usize]| {
            PyValueError::new_err(format!(
                "{id}: actions must have shape {} (one per env), got {}",
                expected(),
                py_shape(shape)
            ))
        };
        if let Some(k) = discrete {
            let out_of_range = |j: usize, value: i64| {
                env_error(EnvError::ActionOutOfRange {
                    env: id,
                    index: envs[j],
                    value,
                    n: k,
                })
            };
            self.ints.clear();
            if let Ok(arr) = a.extract::<PyReadonlyArrayDyn<'_, i64>>() {
                if !shape_ok(arr.shape()) {
                    return Err(bad_shape(arr.shape()));
                }
                for (j, &v) in arr.as_array().iter().enumerate() {
                    if v < 0 || v >= i64::from(k) {
                        return Err(out_of_range(j, v));
                    }
                    self.ints.push(v as i32);
                }
            } else if let Ok(arr) = a.extract::<PyReadonlyArrayDyn<'_, i32>>() {
                if !shape_ok(arr.shape()) {
                    return Err(bad_shape(arr.shape()));
                }
                self.ints.extend(arr.as_array().iter().copied());
            } else {
                return Err(PyTypeError::new_err(format!(
                    "{id}: actions for Discrete({k}) must be an integer numpy array (int64 or int32), got {}",
                    describe(a)
                )));
            }
            Ok(ActionBuf::Discrete(&self.ints))
        } else {
            self.floats.clear();
            if let Ok(arr) = a.extract::<PyReadonlyArrayDyn<'_, f32>>() {
                if !shape_ok(arr.shape()) {
                    return Err(bad_shape(arr.shape()));
                }
                self.floats.extend(arr.as_array().iter().copied());
            } else if let Ok(arr) = a.extract::<PyReadonlyArrayDyn<'_, f64>>() {
                if !shape_ok(arr.shape()) {
                    return Err(bad_shape(arr.shape()));
                }
                // A finite float64 beyond float32's range stays finite (the envs clip
                // Box actions to their bounds, as Gymnasium's do on float64 input).
                let max = f64::from(f32::MAX);
                self.floats.extend(arr.as_array().iter().map(|&v| {
                    if v.is_finite() {
                        v.clamp(-max, max) as f32
                    } else {
                        v as f32
                    }
                }));
            } else {
                return Err(PyTypeError::new_err(format!(
                    "{id}: continuous actions must be a float numpy array (float32 or float64), got {}",
                    describe(a)
                )));
            }
            Ok(ActionBuf::Continuous(&self.floats))
        }
    }
}

/// A shape as Python prints a tuple: `(3,)`, `(2, 1)`.
fn py_shape(shape: &[usize]) -> String {
    match shape {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn describe(a: &Bound<'_, PyAny>) -> String {
    match a.getattr("dtype") {
        Ok(dt) => format!("an array of dtype {dt}"),
        Err(_) => a
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default(),
    }
}

/// A fresh numpy array of `data` with shape `[rows, *row_shape]`.
fn batch_array<'py, T: numpy::Element + Copy>(
    py: Python<'py>,
    data: &[T],
    rows: usize,
    row_shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let mut dims = Vec::with_capacity(row_shape.len() + 1);
    dims.push(rows);
    dims.extend_from_slice(row_shape);
    PyArray1::from_slice(py, data).reshape(IxDyn(&dims))
}

/// A fresh numpy array of observations, `[rows, *row_shape]`, in the env's dtype
/// (uint8 for Atari's screens, float32 otherwise).
fn obs_array<'py>(
    py: Python<'py>,
    obs: ObsBuf<'_>,
    rows: usize,
    row_shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match obs {
        ObsBuf::F32(v) => batch_array(py, v, rows, row_shape)?.into_any(),
        ObsBuf::U8(v) => batch_array(py, v, rows, row_shape)?.into_any(),
    })
}

fn env_args(args: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(d) = args {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            // Gymnasium keywords arrive as Python values; the envs parse text.
            let value = if let Ok(b) = v.extract::<bool>() {
                b.to_string()
            } else {
                v.str()?.to_string()
            };
            out.push((key, value));
        }
    }
    Ok(out)
}

/// Refuses a batch that cannot fit in the memory this machine has (an allocation
/// failure would abort the interpreter), before anything is allocated.
fn check_batch_fits(id: &str, num_envs: usize) -> PyResult<()> {
    let spec = rlrig_env::spec(id).map_err(env_error)?;
    rlrig_learn::memory::Estimate::new()
        .add(
            format!("{num_envs} {id} envs"),
            num_envs as f64 * spec.bytes_per_env as f64,
        )
        .check(id, "num_envs")
        .map_err(learn_error)
}

/// The executor config both env classes are built from, after refusing a batch that
/// cannot fit in memory.
fn vec_config(
    id: &str,
    num_envs: usize,
    num_threads: usize,
    seed: u64,
    autoreset: &str,
    episode_cap: Option<u32>,
    env_args: Option<&Bound<'_, PyDict>>,
) -> PyResult<VecConfig> {
    check_batch_fits(id, num_envs)?;
    let mut cfg = VecConfig::new(num_envs)
        .threads(num_threads)
        .seed(seed)
        .autoreset(autoreset.parse().map_err(PyValueError::new_err)?)
        .env_args(self::env_args(env_args)?);
    cfg.episode_cap = episode_cap;
    Ok(cfg)
}

/// The caller's array `dst` for output `name`, checked to be a writable,
/// C-contiguous numpy array of `T` holding `len` values.
fn out_array<'py, T: numpy::Element>(
    name: &str,
    dst: &Bound<'py, PyAny>,
    len: usize,
    dtype: &str,
) -> PyResult<numpy::PyReadwriteArrayDyn<'py, T>> {
    let arr = dst.cast::<PyArrayDyn<T>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be a numpy array of dtype {dtype}, got {}",
            describe(dst)
        ))
    })?;
    if !arr.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{name} must be C-contiguous"
        )));
    }
    if arr.len() != len {
        return Err(PyValueError::new_err(format!(
            "{name} holds {} values, the batch {len}",
            arr.len()
        )));
    }
    arr.try_readwrite()
        .map_err(|e| PyValueError::new_err(format!("{name} is not writable: {e}")))
}

/// The caller's observation array for `step_into`, in the env's dtype.
enum ObsOut<'py> {
    F32(numpy::PyReadwriteArrayDyn<'py, f32>),
    U8(numpy::PyReadwriteArrayDyn<'py, u8>),
}

/// Copies `src` into the caller's array `dst` (checked by [`out_array`]).
fn fill<T: numpy::Element + Copy>(
    name: &str,
    dst: &mut numpy::PyReadwriteArrayDyn<'_, T>,
    src: &[T],
) -> PyResult<()> {
    dst.as_slice_mut()
        .map(|d| d.copy_from_slice(src))
        .map_err(|_| PyValueError::new_err(format!("{name} must be C-contiguous")))
}

/// An executor as both env classes hold it, with what they read of it on every call:
/// its spec, the shape of one observation and the loader of actions.
struct Held<E: ?Sized> {
    /// `None` once closed. The mutex only makes the classes `Sync` as pyo3 requires:
    /// every method holds `&mut self` (pyo3's borrow flag), so `get_mut` reaches the
    /// executor without locking.
    env: Mutex<Option<Box<E>>>,
    spec: EnvSpec,
    obs_shape: Vec<usize>,
    actions: Actions,
}

impl<E: ?Sized> Held<E> {
    fn new(env: Box<E>, spec: EnvSpec) -> Held<E> {
        Held {
            obs_shape: obs_shape(&spec),
            actions: Actions::new(&spec),
            env: Mutex::new(Some(env)),
            spec,
        }
    }

    /// The executor, or the error for a closed env.
    fn open(&mut self) -> PyResult<&mut Box<E>> {
        open(&mut self.env, self.spec.id)
    }

    fn close(&mut self) {
        *self.env.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Envs stepped together, every env on every call (rlrig-env's synchronous executor).
#[pyclass(module = "rlrig._rlrig", name = "VecEnv")]
struct PyVecEnv {
    held: Held<dyn VecEnvDyn>,
    n: usize,
    /// Gymnasium's `AutoresetMode.DISABLED`: stepping an env whose episode ended
    /// without resetting it is an error.
    strict: bool,
    seed: u64,
    all: Vec<usize>,
}

impl PyVecEnv {
    fn env(&mut self) -> PyResult<&mut Box<dyn VecEnvDyn>> {
        self.held.open()
    }

    fn obs<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let n = self.n;
        let shape = self.held.obs_shape.clone();
        obs_array(py, self.env()?.obs(), n, &shape)
    }

    /// Checks and loads `actions`, steps every env with the GIL released, and
    /// returns the executor to read the results from.
    fn stepped(&mut self, py: Python<'_>, actions: &Bound<'_, PyAny>) -> PyResult<&dyn VecEnvDyn> {
        let id = self.held.spec.id;
        let env = open(&mut self.held.env, id)?;
        if self.strict
            && let Some(k) = env.pending_resets().iter().position(|&p| p)
        {
            return Err(PyValueError::new_err(format!(
                "{id}: env {k} ended its episode and autoreset is disabled: reset it (reset(options={{'reset_mask': mask}})) before stepping it"
            )));
        }
        let buf = self.held.actions.load(actions, &self.all)?;
        py.detach(|| env.step(buf)).map_err(env_error)?;
        Ok(&**env)
    }

    fn index(&self, i: usize) -> PyResult<()> {
        if i >= self.n {
            return Err(PyValueError::new_err(format!(
                "{}: env index {i} out of range for {} envs",
                self.held.spec.id, self.n
            )));
        }
        Ok(())
    }
}

#[pymethods]
impl PyVecEnv {
    #[new]
    #[pyo3(signature = (id, num_envs, *, num_threads=1, seed=0, autoreset="next_step", strict=false, episode_cap=None, env_args=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        id: &str,
        num_envs: usize,
        num_threads: usize,
        seed: u64,
        autoreset: &str,
        strict: bool,
        episode_cap: Option<u32>,
        env_args: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let cfg = vec_config(
            id,
            num_envs,
            num_threads,
            seed,
            autoreset,
            episode_cap,
            env_args,
        )?;
        let env = rlrig_env::make_sync(id, cfg).map_err(env_error)?;
        let spec = env.spec();
        Ok(PyVecEnv {
            held: Held::new(env, spec),
            n: num_envs,
            strict,
            seed,
            all: (0..num_envs).collect(),
        })
    }

    /// The env's id, spaces, time limit and parameter keys.
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        spec_dict(py, &self.held.spec)
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.n
    }

    #[getter]
    fn threads_used(&mut self) -> PyResult<usize> {
        Ok(self.env()?.threads_used())
    }

    /// Resets envs and returns every env's observation. `seed`: one seed for the
    /// batch (env `k` draws from stream `(seed, k)`); `seeds`: one per env (env `k`
    /// draws from stream `(seeds[k], 0)`, the episode a single env seeded
    /// `seeds[k]` starts); `mask`: reset only these envs.
    #[pyo3(signature = (*, seed=None, seeds=None, mask=None))]
    fn reset<'py>(
        &mut self,
        py: Python<'py>,
        seed: Option<u64>,
        seeds: Option<Vec<Option<u64>>>,
        mask: Option<PyReadonlyArrayDyn<'py, bool>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = self.n;
        if let Some(s) = &seeds
            && s.len() != n
        {
            return Err(PyValueError::new_err(format!(
                "{}: {} seeds given for {n} envs",
                self.held.spec.id,
                s.len()
            )));
        }
        let mask: Option<Vec<bool>> = match mask {
            None => None,
            Some(m) => {
                if m.shape() != [n] {
                    return Err(PyValueError::new_err(format!(
                        "{}: reset mask must have shape ({n},), got {}",
                        self.held.spec.id,
                        py_shape(m.shape())
                    )));
                }
                Some(m.as_array().iter().copied().collect())
            }
        };
        if let Some(s) = seed {
            self.seed = s;
        }
        let base = self.seed;
        let env = self.env()?;
        match (&mask, &seeds) {
            (None, None) => match seed {
                Some(s) => env.reseed(s),
                None => env.reset(),
            },
            _ => {
                for k in 0..n {
                    if mask.as_ref().is_some_and(|m| !m[k]) {
                        continue;
                    }
                    let rng = match (seeds.as_ref().and_then(|s| s[k]), seed) {
                        (Some(sk), _) => Some(Rng::stream(sk, Purpose::Env, 0)),
                        (None, Some(_)) => Some(Rng::stream(base, Purpose::Env, k as u64)),
                        (None, None) => None,
                    };
                    env.reset_env(k, rng);
                }
            }
        }
        self.obs(py)
    }

    /// Steps every env. Returns `(obs, rewards, terminated, truncated, final_obs)`,
    /// fresh arrays, `final_obs` only in same-step mode (rows of envs that did not
    /// end hold stale values).
    #[allow(clippy::type_complexity)]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        actions: &Bound<'py, PyAny>,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray1<bool>>,
        Bound<'py, PyArray1<bool>>,
        Option<Bound<'py, PyAny>>,
    )> {
        let shape = std::mem::take(&mut self.held.obs_shape);
        let out = self.stepped(py, actions).and_then(|env| {
            let n = env.num_envs();
            let final_obs = match env.final_obs() {
                Some(f) => Some(obs_array(py, f, n, &shape)?),
                None => None,
            };
            Ok((
                obs_array(py, env.obs(), n, &shape)?,
                PyArray1::from_slice(py, env.rewards()),
                PyArray1::from_slice(py, env.terminated()),
                PyArray1::from_slice(py, env.truncated()),
                final_obs,
            ))
        });
        self.held.obs_shape = shape;
        out
    }

    /// `step` writing into the caller's C-contiguous arrays (obs in the env's dtype,
    /// uint8 or float32; rewards float64, flags bool; shaped as `step` returns them),
    /// which rlrig does not keep.
    fn step_into<'py>(
        &mut self,
        py: Python<'py>,
        actions: &Bound<'py, PyAny>,
        obs: &Bound<'py, PyAny>,
        rewards: &Bound<'py, PyAny>,
        terminated: &Bound<'py, PyAny>,
        truncated: &Bound<'py, PyAny>,
    ) -> PyResult<()> {
        // Every output is checked before the envs move: on error nothing has stepped.
        let (n, len) = (self.n, self.n * self.held.spec.obs_dim);
        let mut o = match self.env()?.obs().dtype() {
            Dtype::UInt8 => ObsOut::U8(out_array("obs", obs, len, "uint8")?),
            _ => ObsOut::F32(out_array("obs", obs, len, "float32")?),
        };
        let mut r = out_array::<f64>("rewards", rewards, n, "float64")?;
        let mut t = out_array::<bool>("terminated", terminated, n, "bool")?;
        let mut u = out_array::<bool>("truncated", truncated, n, "bool")?;
        let env = self.stepped(py, actions)?;
        match (&mut o, env.obs()) {
            (ObsOut::F32(a), ObsBuf::F32(v)) => fill("obs", a, v)?,
            (ObsOut::U8(a), ObsBuf::U8(v)) => fill("obs", a, v)?,
            _ => return Err(PyRuntimeError::new_err("obs: the env changed its dtype")),
        }
        fill("rewards", &mut r, env.rewards())?;
        fill("terminated", &mut t, env.terminated())?;
        fill("truncated", &mut u, env.truncated())
    }

    /// Env `i`'s state as Gymnasium's `env.unwrapped.state`.
    fn get_state(&mut self, i: usize) -> PyResult<Vec<f64>> {
        self.index(i)?;
        Ok(self.env()?.state_vec(i))
    }

    /// Puts env `i` into `state` (as `get_state` gives it) at the start of an
    /// episode; returns its observation.
    fn set_state<'py>(
        &mut self,
        py: Python<'py>,
        i: usize,
        state: Vec<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.index(i)?;
        let d = self.held.spec.obs_dim;
        let shape = self.held.obs_shape.clone();
        let env = self.env()?;
        env.set_state_vec(i, &state).map_err(env_error)?;
        obs_array(py, env.obs().slice(i * d, d), 1, &shape)
    }

    /// Env `i` drawn as Gymnasium's `render_mode="rgb_array"` draws it: a uint8
    /// array `[height, width, 3]`.
    fn render<'py>(&mut self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
        self.index(i)?;
        let id = self.held.spec.id;
        let state = self.env()?.render_state(i);
        let (h, w, rgb) = py
            .detach(|| rlrig_lab::render::frame(id, &state))
            .map_err(|e| PyValueError::new_err(format!("{id}: {e}")))?;
        PyArray1::from_vec(py, rgb).reshape(IxDyn(&[h, w, 3]))
    }

    fn close(&mut self) {
        self.held.close();
    }

    #[getter]
    fn closed(&mut self) -> bool {
        self.held
            .env
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

/// EnvPool's asynchronous API: `send` actions for some envs, `recv` the first
/// `batch_size` that finish (rlrig-env's asynchronous executor).
#[pyclass(module = "rlrig._rlrig", name = "AsyncVecEnv")]
struct PyAsyncVecEnv {
    held: Held<dyn AsyncVecEnvDyn>,
}

#[pymethods]
impl PyAsyncVecEnv {
    #[new]
    #[pyo3(signature = (id, num_envs, batch_size, *, num_threads=1, seed=0, autoreset="next_step", episode_cap=None, env_args=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        id: &str,
        num_envs: usize,
        batch_size: usize,
        num_threads: usize,
        seed: u64,
        autoreset: &str,
        episode_cap: Option<u32>,
        env_args: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let cfg = vec_config(
            id,
            num_envs,
            num_threads,
            seed,
            autoreset,
            episode_cap,
            env_args,
        )?;
        let env = rlrig_env::make_async(id, cfg, batch_size).map_err(env_error)?;
        let spec = env.spec();
        Ok(PyAsyncVecEnv {
            held: Held::new(env, spec),
        })
    }

    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        spec_dict(py, &self.held.spec)
    }

    #[getter]
    fn num_envs(&mut self) -> PyResult<usize> {
        Ok(self.held.open()?.num_envs())
    }

    #[getter]
    fn batch_size(&mut self) -> PyResult<usize> {
        Ok(self.held.open()?.batch_size())
    }

    fn async_reset(&mut self) -> PyResult<()> {
        self.held.open()?.async_reset().map_err(env_error)
    }

    /// Sends one action per env of `env_ids`.
    fn send(
        &mut self,
        py: Python<'_>,
        actions: &Bound<'_, PyAny>,
        env_ids: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = self.held.spec.id;
        let env = open(&mut self.held.env, id)?;
        let ids: Vec<i64> = if let Ok(a) = env_ids.extract::<PyReadonlyArrayDyn<'_, i64>>() {
            a.as_array().iter().copied().collect()
        } else if let Ok(a) = env_ids.extract::<PyReadonlyArrayDyn<'_, i32>>() {
            a.as_array().iter().map(|&v| i64::from(v)).collect()
        } else {
            env_ids.extract::<Vec<i64>>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{id}: env_ids must be integers, got {}",
                    describe(env_ids)
                ))
            })?
        };
        if let Ok(a) = env_ids.cast::<numpy::PyUntypedArray>()
            && a.ndim() != 1
        {
            return Err(PyValueError::new_err(format!(
                "{id}: env_ids must be one-dimensional, got shape {}",
                py_shape(a.shape())
            )));
        }
        let n = env.num_envs();
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        if let Some(&twice) = ids.iter().find(|&&i| !seen.insert(i)) {
            return Err(PyValueError::new_err(format!(
                "{id}: env_ids lists env {twice} more than once"
            )));
        }
        let mut idx = Vec::with_capacity(ids.len());
        for (position, &i) in ids.iter().enumerate() {
            if i < 0 || i as usize >= n {
                return Err(PyValueError::new_err(format!(
                    "{id}: env ids must be in 0..{n}, got {i} at position {position}"
                )));
            }
            idx.push(i as usize);
        }
        let buf = self.held.actions.load(actions, &idx)?;
        py.detach(|| env.send(buf, &idx)).map_err(env_error)
    }

    /// The first `batch_size` envs to finish: `(obs, rewards, terminated, truncated,
    /// env_ids, final_obs)`.
    fn recv<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let env = open(&mut self.held.env, self.held.spec.id)?;
        let b = py.detach(|| env.recv()).map_err(env_error)?;
        let rows = b.env_ids.len();
        let ids: Vec<i32> = b.env_ids.iter().map(|&i| i as i32).collect();
        let final_obs = match b.final_obs {
            Some(f) => Some(obs_array(py, f, rows, &self.held.obs_shape)?),
            None => None,
        };
        let t = (
            obs_array(py, b.obs, rows, &self.held.obs_shape)?,
            PyArray1::from_slice(py, b.rewards),
            PyArray1::from_slice(py, b.terminated),
            PyArray1::from_slice(py, b.truncated),
            PyArray1::from_vec(py, ids),
            final_obs,
        );
        Ok(t.into_pyobject(py)?.into_any())
    }

    fn close(&mut self) {
        self.held.close();
    }
}

/// A trained policy loaded from a run directory: the greedy actions `rlrig eval`
/// takes.
#[pyclass(module = "rlrig._rlrig", name = "Policy")]
struct PyPolicy {
    /// The mutex only makes the class `Sync` as pyo3 requires; methods that act hold
    /// `&mut self` and reach the policy with `get_mut`, without locking.
    loaded: Mutex<rlrig_learn::saved::LoadedPolicy>,
    env: String,
    args: Vec<(String, String)>,
    seed: u64,
    spec: EnvSpec,
}

impl PyPolicy {
    fn export_of(&self) -> PyResult<rlrig_learn::export::PolicyExport> {
        let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let mut e = loaded.policy.export().map_err(learn_error)?;
        e.note("env", self.env.clone());
        Ok(e)
    }
}

#[pymethods]
impl PyPolicy {
    #[new]
    fn new(run_dir: std::path::PathBuf) -> PyResult<Self> {
        let loaded = rlrig_learn::saved::load_policy(&run_dir).map_err(learn_error)?;
        let spec = rlrig_env::make_sync(&loaded.env, rlrig_learn::env_config(1, &loaded.args))
            .map_err(env_error)?
            .spec();
        Ok(PyPolicy {
            env: loaded.env.clone(),
            args: loaded.args.clone().into_iter().collect(),
            seed: loaded.seed,
            loaded: Mutex::new(loaded),
            spec,
        })
    }

    #[getter]
    fn env_id(&self) -> &str {
        &self.env
    }

    #[getter]
    fn env_args(&self) -> Vec<(String, String)> {
        self.args.clone()
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }

    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        spec_dict(py, &self.spec)
    }

    /// The acting network as named tensors in PyTorch's convention and the metadata
    /// that says how actions follow from them: `(tensors, metadata)`.
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let e = self.export_of()?;
        let tensors = PyDict::new(py);
        for t in &e.tensors {
            tensors.set_item(
                &t.name,
                PyArray1::from_slice(py, &t.data).reshape(IxDyn(&t.shape))?,
            )?;
        }
        let meta = PyDict::new(py);
        for (k, v) in &e.metadata {
            meta.set_item(k, v)?;
        }
        Ok((tensors, meta))
    }

    /// Writes the tensors and metadata to a safetensors file at `path` (atomically).
    fn export(&self, path: std::path::PathBuf) -> PyResult<()> {
        self.export_of()?
            .write_safetensors(&path)
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))
    }

    /// Greedy actions for a batch of observations (`[n, *obs_shape]` float32).
    fn act<'py>(
        &mut self,
        py: Python<'py>,
        obs: PyReadonlyArrayDyn<'py, f32>,
    ) -> PyResult<Py<PyAny>> {
        let d = self.spec.obs_dim;
        let shape = obs.shape().to_vec();
        let rows = if shape.iter().product::<usize>() == d && shape == obs_shape(&self.spec) {
            1
        } else {
            shape.first().copied().unwrap_or(0)
        };
        let flat = obs.as_slice().map_err(|_| {
            PyValueError::new_err("observations must be a C-contiguous float32 array")
        })?;
        if rows == 0 || flat.len() != rows * d {
            let mut want = vec![0];
            want.extend(obs_shape(&self.spec));
            return Err(PyValueError::new_err(format!(
                "{}: observations must have shape {} (n = batch size), got {}",
                self.spec.id,
                py_shape(&want).replacen('0', "n", 1),
                py_shape(&shape)
            )));
        }
        let id = self.spec.id;
        if let Some(j) = flat.iter().position(|v| v.is_nan()) {
            return Err(PyValueError::new_err(format!(
                "{id}: observation {} holds NaN at component {}",
                j / d,
                j % d
            )));
        }
        let loaded = self.loaded.get_mut().unwrap_or_else(|e| e.into_inner());
        Ok(match loaded.policy.act(flat, rows) {
            ActionBuf::Discrete(a) => {
                let a: Vec<i64> = a.iter().map(|&v| i64::from(v)).collect();
                PyArray1::from_vec(py, a).into_any().unbind()
            }
            ActionBuf::Continuous(a) => {
                let dim = self.spec.action_space.flat_dim();
                batch_array(py, a, rows, &[dim])?.into_any().unbind()
            }
        })
    }
}

/// Runs `rlrig train ARGS...` in this process (the CLI's parsing, presets, driver,
/// progress bar and run directory) on a thread of its own, while the calling thread
/// waits with the GIL released and checks for Ctrl-C every 100 ms: a
/// KeyboardInterrupt asks the run to stop, which finishes its iteration, writes a
/// checkpoint, and then the KeyboardInterrupt is raised. `quiet`: no progress bar and
/// no report on stdout. Returns the run directory.
#[pyfunction]
#[pyo3(signature = (args, quiet = false))]
fn train_cli(py: Python<'_>, args: Vec<String>, quiet: bool) -> PyResult<Option<String>> {
    let stop = rlrig_learn::stop::StopFlag::new();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let run_stop = stop.clone();
    let worker = std::thread::Builder::new()
        .name("rlrig-train".into())
        .spawn(move || {
            let _ = tx.send(rlrig::embed::train(&args, run_stop, quiet));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the training thread: {e}")))?;
    let mut interrupt: Option<PyErr> = None;
    let result = loop {
        match py.detach(|| rx.recv_timeout(std::time::Duration::from_millis(100))) {
            Ok(r) => break r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if interrupt.is_none()
                    && let Err(e) = py.check_signals()
                {
                    stop.request(rlrig_learn::stop::Stop::Interrupt);
                    interrupt = Some(e);
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                let _ = worker.join();
                return Err(PyRuntimeError::new_err(
                    "the training thread ended without a result",
                ));
            }
        }
    };
    let _ = worker.join();
    if let Some(e) = interrupt {
        // Ctrl-C wins; an error the stopped run ended with is still shown.
        if let Err(run) = &result {
            eprintln!("error: {run:#}");
        }
        return Err(e);
    }
    let trained = result.map_err(|e| PyValueError::new_err(format!("{e:#}")))?;
    Ok(trained.run_dir.map(|d| d.display().to_string()))
}

/// Every env id rlrig has, in `rlrig envs` order.
#[pyfunction]
fn env_ids<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, rlrig_env::ENV_IDS)
}

/// The spec of `id` with default parameters (or `env_args`).
#[pyfunction]
#[pyo3(signature = (id, env_args=None))]
fn spec<'py>(
    py: Python<'py>,
    id: &str,
    env_args: Option<&Bound<'_, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let env = rlrig_env::make_sync(id, VecConfig::new(1).env_args(self::env_args(env_args)?))
        .map_err(env_error)?;
    spec_dict(py, &env.spec())
}

#[pymodule]
fn _rlrig(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyVecEnv>()?;
    m.add_class::<PyAsyncVecEnv>()?;
    m.add_class::<PyPolicy>()?;
    m.add_function(wrap_pyfunction!(env_ids, m)?)?;
    m.add_function(wrap_pyfunction!(spec, m)?)?;
    m.add_function(wrap_pyfunction!(train_cli, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
