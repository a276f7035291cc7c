//! The environment interface: parameters and a small state as plain data, with pure
//! `reset`, `step` and `observe` functions (as gymnax does). Nothing here allocates,
//! so the executors can step thousands of these per call in preallocated buffers.

use std::fmt::Debug;

use crate::rng::Rng;
use crate::space::{Dtype, Space};

/// What one step produced besides the new state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    /// The reward, in the precision the reference computes it (Gymnasium: f64).
    pub reward: f64,
    /// The episode reached a terminal state of the MDP.
    pub terminated: bool,
}

/// The element type of an env's observation buffers: `f32` for most envs, `u8` where
/// the reference's observations are bytes (Atari's screens), so batches of images
/// travel at a quarter of the size and keep Gymnasium's `uint8` dtype.
pub trait ObsElem: Copy + Default + PartialEq + Send + Sync + Debug + 'static {
    /// A buffer of this type as a type-erased view.
    fn view(buf: &[Self]) -> ObsBuf<'_>;
}

impl ObsElem for f32 {
    fn view(buf: &[f32]) -> ObsBuf<'_> {
        ObsBuf::F32(buf)
    }
}

impl ObsElem for u8 {
    fn view(buf: &[u8]) -> ObsBuf<'_> {
        ObsBuf::U8(buf)
    }
}

/// A type-erased batch (or row) of observations, for callers that pick the env at run
/// time. Networks read float32: [`ObsBuf::copy_into`] converts (exactly: every `u8` is
/// an `f32`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ObsBuf<'a> {
    F32(&'a [f32]),
    U8(&'a [u8]),
}

impl<'a> ObsBuf<'a> {
    pub fn len(&self) -> usize {
        match self {
            ObsBuf::F32(v) => v.len(),
            ObsBuf::U8(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> Dtype {
        match self {
            ObsBuf::F32(_) => Dtype::Float32,
            ObsBuf::U8(_) => Dtype::UInt8,
        }
    }

    /// The float32 buffer itself, when that is what the env writes.
    pub fn as_f32(&self) -> Option<&'a [f32]> {
        match self {
            ObsBuf::F32(v) => Some(v),
            ObsBuf::U8(_) => None,
        }
    }

    /// Elements `start..start + len`.
    pub fn slice(&self, start: usize, len: usize) -> ObsBuf<'a> {
        match self {
            ObsBuf::F32(v) => ObsBuf::F32(&v[start..start + len]),
            ObsBuf::U8(v) => ObsBuf::U8(&v[start..start + len]),
        }
    }

    /// Writes the observations into `out` (as long as `self`) as float32.
    pub fn copy_into(&self, out: &mut [f32]) {
        assert_eq!(out.len(), self.len(), "ObsBuf::copy_into: lengths differ");
        match self {
            ObsBuf::F32(v) => out.copy_from_slice(v),
            ObsBuf::U8(v) => {
                for (o, &b) in out.iter_mut().zip(v.iter()) {
                    *o = f32::from(b);
                }
            }
        }
    }

    /// Appends the observations to `out` as float32 (one pass: no zero-fill first).
    pub fn extend_into(&self, out: &mut Vec<f32>) {
        match self {
            ObsBuf::F32(v) => out.extend_from_slice(v),
            ObsBuf::U8(v) => out.extend(v.iter().map(|&b| f32::from(b))),
        }
    }

    /// The observations as float32: the buffer itself when the env writes float32,
    /// else converted into `scratch` (reused: no allocation once it is large enough).
    pub fn f32_in<'s>(&self, scratch: &'s mut Vec<f32>) -> &'s [f32]
    where
        'a: 's,
    {
        match self {
            ObsBuf::F32(v) => v,
            ObsBuf::U8(_) => {
                scratch.clear();
                self.extend_into(scratch);
                scratch
            }
        }
    }

    /// The observations as a new float32 vector.
    pub fn to_vec(&self) -> Vec<f32> {
        let mut v = Vec::with_capacity(self.len());
        self.extend_into(&mut v);
        v
    }
}

/// Why a single action is not acceptable; the executors add env id and index.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionFault {
    /// A discrete action outside `0..n`.
    OutOfRange { value: i64, n: u32 },
    /// A Box action component that is NaN or infinite.
    NotFinite { component: usize, value: f32 },
}

/// An action type: a discrete index (`i32`) or a fixed-size vector (`[f32; D]`).
///
/// Batches of actions travel as flat slices of [`Action::Elem`], `DIM` per env.
pub trait Action: Copy + Send + Sync + Debug + Default + 'static {
    /// The scalar type of a flat action buffer.
    type Elem: Copy + Send + Sync + Debug + 'static;
    /// Scalars per action.
    const DIM: usize;
    /// Views a flat buffer (length a multiple of `DIM`) as actions.
    fn from_flat(flat: &[Self::Elem]) -> &[Self];
    /// Picks this action type's buffer out of a type-erased one.
    fn from_any<'a>(buf: ActionBuf<'a>) -> Option<&'a [Self::Elem]>;
    /// Checks the action against its space (range for discrete, finiteness for Box).
    fn check(&self, space: &Space) -> Result<(), ActionFault>;
    /// Whether every action of a batch passes [`Action::check`]: a branch-free pass
    /// the executors run first (it vectorises; a batch of 4096 checked one by one cost
    /// a few microseconds of serial time per step), looking for the faulty action
    /// only when it fails.
    fn all_valid(actions: &[Self], space: &Space) -> bool {
        actions.iter().all(|a| a.check(space).is_ok())
    }
}

/// A type-erased batch of actions, for callers that pick the env at run time.
#[derive(Clone, Copy, Debug)]
pub enum ActionBuf<'a> {
    Discrete(&'a [i32]),
    Continuous(&'a [f32]),
}

impl ActionBuf<'_> {
    pub fn len(&self) -> usize {
        match self {
            ActionBuf::Discrete(a) => a.len(),
            ActionBuf::Continuous(a) => a.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn kind(&self) -> &'static str {
        match self {
            ActionBuf::Discrete(_) => "discrete",
            ActionBuf::Continuous(_) => "continuous",
        }
    }
}

impl Action for i32 {
    type Elem = i32;
    const DIM: usize = 1;

    fn from_flat(flat: &[i32]) -> &[i32] {
        flat
    }

    fn from_any<'a>(buf: ActionBuf<'a>) -> Option<&'a [i32]> {
        match buf {
            ActionBuf::Discrete(a) => Some(a),
            ActionBuf::Continuous(_) => None,
        }
    }

    fn check(&self, space: &Space) -> Result<(), ActionFault> {
        match space {
            Space::Discrete { n } if *self >= 0 && (*self as u32) < *n => Ok(()),
            Space::Discrete { n } => Err(ActionFault::OutOfRange {
                value: i64::from(*self),
                n: *n,
            }),
            Space::Box { .. } => unreachable!("i32 actions belong to Discrete spaces"),
        }
    }

    fn all_valid(actions: &[i32], space: &Space) -> bool {
        match space {
            // A negative action wraps to a huge u32, so one compare checks both ends.
            Space::Discrete { n } => actions.iter().fold(true, |ok, &a| ok & ((a as u32) < *n)),
            Space::Box { .. } => false,
        }
    }
}

impl<const D: usize> Action for [f32; D]
where
    [f32; D]: Default,
{
    type Elem = f32;
    const DIM: usize = D;

    fn from_flat(flat: &[f32]) -> &[[f32; D]] {
        let (chunks, rest) = flat.as_chunks::<D>();
        debug_assert!(rest.is_empty(), "flat action buffer not a multiple of {D}");
        chunks
    }

    fn from_any<'a>(buf: ActionBuf<'a>) -> Option<&'a [f32]> {
        match buf {
            ActionBuf::Continuous(a) => Some(a),
            ActionBuf::Discrete(_) => None,
        }
    }

    fn check(&self, _space: &Space) -> Result<(), ActionFault> {
        // Out-of-bounds Box actions are legal: the reference envs clip them.
        match self.iter().position(|v| !v.is_finite()) {
            None => Ok(()),
            Some(component) => Err(ActionFault::NotFinite {
                component,
                value: self[component],
            }),
        }
    }

    fn all_valid(actions: &[[f32; D]], _space: &Space) -> bool {
        actions
            .as_flattened()
            .iter()
            .fold(true, |ok, v| ok & v.is_finite())
    }
}

/// `p` with each `(key, value)` of `args` set in turn by [`Env::set_param`].
pub fn apply_params<E: Env>(
    mut p: E::Params,
    args: &[(String, String)],
) -> Result<E::Params, crate::EnvError> {
    for (key, value) in args {
        E::set_param(&mut p, key, value).map_err(|why| crate::EnvError::BadParam {
            env: E::ID,
            key: key.clone(),
            value: value.clone(),
            why,
        })?;
    }
    Ok(p)
}

/// An environment: constants in `Params`, everything that changes in `State`.
///
/// `reset`, `step` and `observe` are pure functions of their arguments; all
/// randomness comes from the `Rng` the caller passes (one stream per env).
pub trait Env: Send + Sync + 'static {
    /// Constants, with the reference defaults in `Default`.
    type Params: Clone + Default + Send + Sync + Debug + 'static;
    /// The full dynamic state. Small `Copy` structs for the analytic envs; physics envs
    /// own their simulator world, so the bound is `Clone`.
    type State: Clone + Default + Send + Sync + Debug + 'static;
    /// One action.
    type Action: Action;
    /// One observation element (`f32`, or `u8` for byte images).
    type Obs: ObsElem;

    /// The Gymnasium id, e.g. `CartPole-v1`.
    const ID: &'static str;
    /// Length of the flat observation.
    const OBS_DIM: usize;
    /// Rough cost of one step in nanoseconds on a current x86 core. The synchronous
    /// executor only splits a batch across threads when each thread gets enough work
    /// to pay for waking it (see `VecConfig::min_thread_work_ns`).
    const STEP_COST_NS: u64 = 100;
    /// Envs per group of the vectorised [`Env::step_batch`] (1: no vectorised kernel).
    /// The synchronous executor gives each thread a multiple of it, so kernels see full
    /// groups; an env with a scalar step is split one env at a time.
    const BATCH_LANES: usize = 1;
    /// The keys [`Env::set_param`] takes.
    const PARAMS: &'static [&'static str] = &[];
    /// Heap memory one env's state owns beyond `size_of::<State>()` (a Box2D world),
    /// measured; [`crate::EnvSpec::bytes_per_env`] adds it so impossible batch sizes are
    /// refused before anything is allocated.
    const STATE_HEAP_BYTES: usize = 0;

    fn observation_space(p: &Self::Params) -> Space;
    fn action_space(p: &Self::Params) -> Space;
    /// The registration's `max_episode_steps` (Gymnasium's `TimeLimit`), if any.
    fn max_episode_steps(p: &Self::Params) -> Option<u32>;

    /// A fresh initial state.
    fn reset(p: &Self::Params, rng: &mut Rng) -> Self::State;
    /// Resets `s` after its episode ended (the executors' autoreset): by default a fresh
    /// [`Env::reset`]. Envs whose reference reuses the simulator between episodes
    /// (Atari: ale-py's `reset()` without a seed keeps the emulator and its random
    /// generator; episodic life continues the game) override it.
    fn reset_in_place(p: &Self::Params, s: &mut Self::State, rng: &mut Rng) {
        *s = Self::reset(p, rng);
    }
    /// Whether `p` can run here at all, asked once before an executor is built: an env
    /// that needs an outside resource (an Atari ROM) says which and where it looked.
    fn check(p: &Self::Params) -> Result<(), String> {
        let _ = p;
        Ok(())
    }
    /// Advances `s` by one step. `a` has been checked with [`Action::check`].
    fn step(p: &Self::Params, s: &mut Self::State, a: &Self::Action, rng: &mut Rng) -> Transition;
    /// Writes the observation of `s` into `out` (`OBS_DIM` long).
    fn observe(p: &Self::Params, s: &Self::State, out: &mut [Self::Obs]);

    /// Steps many envs at once. Envs with `active[i] == false` must be left untouched.
    /// The default loops over [`Env::step`]; envs override it with a vectorised kernel
    /// that must produce bit-identical results (the executors' tests check this).
    #[inline]
    fn step_batch(p: &Self::Params, batch: Batch<'_, Self>) {
        step_each(p, batch);
    }

    /// Sets parameter `key` from its text form, as `gym.make(id, key=value)` does (the
    /// keys are Gymnasium's keywords where it has them). The error says what is wrong;
    /// callers add the env and the key.
    fn set_param(p: &mut Self::Params, key: &str, value: &str) -> Result<(), String> {
        let _ = (p, key, value);
        Err(crate::envs::unknown_param(Self::PARAMS))
    }

    /// The state as the flat vector Gymnasium keeps in `env.unwrapped.state`.
    fn state_to_vec(s: &Self::State) -> Vec<f64>;
    /// The inverse of [`Env::state_to_vec`], as if the state had just been set by
    /// `reset`. Errors name what is wrong with the vector.
    fn state_from_slice(p: &Self::Params, v: &[f64]) -> Result<Self::State, String>;

    /// What a renderer needs to draw the state (`rlrig play --gif`). The analytic envs' state
    /// vector is all it takes; the Box2D envs list body poses and terrain instead.
    fn render_state(s: &Self::State) -> Vec<f64> {
        Self::state_to_vec(s)
    }

    /// The complete state for checkpoints: [`Env::state_to_vec`] plus any hidden
    /// bookkeeping. Envs whose Gymnasium vector is the whole state keep the default.
    fn snapshot(s: &Self::State) -> Vec<f64> {
        Self::state_to_vec(s)
    }

    /// The inverse of [`Env::snapshot`].
    fn restore(p: &Self::Params, v: &[f64]) -> Result<Self::State, String> {
        Self::state_from_slice(p, v)
    }
}

/// The envs of one batch step: env `i` is `states[i]`, stepped with `actions[i]` and
/// `rngs[i]` when `active[i]`, its outcome written to `rewards[i]` and `terminated[i]`.
pub struct Batch<'a, E: Env + ?Sized> {
    pub states: &'a mut [E::State],
    pub actions: &'a [E::Action],
    pub rngs: &'a mut [Rng],
    pub active: &'a [bool],
    pub rewards: &'a mut [f64],
    pub terminated: &'a mut [bool],
}

impl<'a, E: Env + ?Sized> Batch<'a, E> {
    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// The envs before `mid` and those from `mid` on.
    pub fn split_at(self, mid: usize) -> (Batch<'a, E>, Batch<'a, E>) {
        let (s0, s1) = self.states.split_at_mut(mid);
        let (a0, a1) = self.actions.split_at(mid);
        let (r0, r1) = self.rngs.split_at_mut(mid);
        let (v0, v1) = self.active.split_at(mid);
        let (w0, w1) = self.rewards.split_at_mut(mid);
        let (t0, t1) = self.terminated.split_at_mut(mid);
        (
            Batch {
                states: s0,
                actions: a0,
                rngs: r0,
                active: v0,
                rewards: w0,
                terminated: t0,
            },
            Batch {
                states: s1,
                actions: a1,
                rngs: r1,
                active: v1,
                rewards: w1,
                terminated: t1,
            },
        )
    }

    /// Steps the last `len % lanes` envs one at a time ([`step_each`]) and returns the
    /// others, whole groups of `lanes` envs for a vectorised kernel.
    pub fn step_tail(self, p: &E::Params, lanes: usize) -> Batch<'a, E> {
        let n = self.len();
        let (groups, tail) = self.split_at(n - n % lanes);
        step_each(p, tail);
        groups
    }
}

/// The batch kernel of an env that steps `$lanes` envs at a time as lane arrays
/// (CartPole, Acrobot, Pendulum): `fn $name(p: &$params, batch: Batch<'_, $env>)` steps
/// the last `len % $lanes` envs one at a time ([`Batch::step_tail`]), then runs the body
/// once per whole group of `$lanes` envs, `$b` being the batch of the groups and `$i` the
/// group's first env; compiled for AVX-512, AVX2 and NEON with run-time dispatch.
macro_rules! lane_kernel {
    ($name:ident, $params:ty, $env:ty, $lanes:expr, |$p:ident, $b:ident, $i:ident| { $($body:tt)* }) => {
        #[multiversion::multiversion(targets(
            "x86_64+avx512f+avx512vl+avx512dq",
            "x86_64+avx2+fma",
            "aarch64+neon"
        ))]
        fn $name($p: &$params, batch: $crate::env::Batch<'_, $env>) {
            let $b = batch.step_tail($p, $lanes);
            let n = $b.states.len();
            let mut $i = 0;
            while $i + $lanes <= n {
                $($body)*
                $i += $lanes;
            }
        }
    };
}
pub(crate) use lane_kernel;

/// [`Env::step`] for every active env, one at a time: the default [`Env::step_batch`],
/// and the scalar tail of the envs' vectorised kernels.
#[inline]
pub fn step_each<E: Env + ?Sized>(p: &E::Params, b: Batch<'_, E>) {
    for i in 0..b.states.len() {
        if b.active[i] {
            let t = E::step(p, &mut b.states[i], &b.actions[i], &mut b.rngs[i]);
            b.rewards[i] = t.reward;
            b.terminated[i] = t.terminated;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_observations_convert_to_float32_exactly() {
        let bytes: Vec<u8> = (0..=255).collect();
        let obs = u8::view(&bytes);
        assert_eq!((obs.len(), obs.dtype()), (256, Dtype::UInt8));
        assert_eq!(obs.as_f32(), None);
        let want: Vec<f32> = (0..=255).map(|b| b as f32).collect();
        assert_eq!(obs.to_vec(), want);
        let mut scratch = vec![7.0; 3];
        assert_eq!(
            obs.slice(10, 4).f32_in(&mut scratch),
            &[10.0, 11.0, 12.0, 13.0]
        );
        let mut out = vec![0.0; 2];
        obs.slice(254, 2).copy_into(&mut out);
        assert_eq!(out, [254.0, 255.0]);
        let mut grow = vec![1.0];
        obs.slice(3, 2).extend_into(&mut grow);
        assert_eq!(grow, [1.0, 3.0, 4.0]);
    }

    #[test]
    fn float_observations_are_read_in_place() {
        let v = [0.5f32, -1.0, 2.0];
        let obs = f32::view(&v);
        assert_eq!(obs.dtype(), Dtype::Float32);
        let mut scratch = Vec::new();
        let got = obs.f32_in(&mut scratch);
        assert!(std::ptr::eq(got, &v[..]), "no copy for float32");
        assert!(scratch.is_empty());
        assert_eq!(obs.slice(1, 2).as_f32(), Some(&v[1..]));
    }
}
