//! What the Box2D envs share: Box2D 2.3 as Gymnasium runs it (crate `rlrig-box2d`, which
//! builds pybox2d's own C++), stepped in the references' terms, and the replay records that
//! checkpoints hold.
//!
//! # Which Box2D
//! Gymnasium's LunarLander and BipedalWalker run Box2D 2.3.0 as vendored by pybox2d
//! (box2d-py 2.3.5, the version Gymnasium's `box2d` extra pins), stepped with 180 velocity
//! and 60 position iterations. `rlrig-box2d` compiles that same C++ from box2d-py's source
//! distribution, so the solver, its float32 rounding and its assertions are the
//! reference's; the golden tests follow Gymnasium's recorded episodes step for step
//! (`tests/box2d_golden.rs`). Before, rlrig linked Box2D 2.3.1 (crate `wrapped2d`), whose
//! `b2Sweep::Advance` rounds continuous collision's sub-steps differently: walker episodes
//! left the reference after 9-54 steps. Earlier still it ran a Rust port of Box2D v3, a
//! different solver that changed the tasks (issue 25).
//!
//! # World lifetime
//! Each reset builds a new world, as Gymnasium's LunarLander does. Gymnasium's BipedalWalker
//! keeps one world and destroys the bodies at reset; its later episodes then allocate
//! broad-phase proxies from that world's free list, which orders contacts differently and
//! changes the last bits of the solution. The first episode after `make` is the same on both
//! sides; the golden tests compare those.

pub(crate) use rlrig_box2d::{
    BodyHandle, DEFAULT_FRICTION, Fixture, JointHandle, Revolute, Scene, Tag,
};

/// Both references step `world.Step(1.0 / FPS, 6 * 30, 2 * 30)`.
pub(crate) fn step(scene: &mut Scene, fps: f64) {
    scene.step(1.0 / fps, 6 * 30, 2 * 30);
}

/// The end of a snapshot's restore: the replayed observation must be the recorded one, bit
/// for bit (else the snapshot was written by a build whose physics differs).
pub(crate) fn check_replay(env: &str, steps: f64, got: &[f64], want: &[f64]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    Err(format!(
        "{env} snapshot: replaying its {steps} steps gives the observation {got:?}, not the recorded {want:?} (written by a build whose physics differs?)"
    ))
}

/// The simulation a Box2D env's state holds: its world and the reference's bookkeeping
/// around it, with the replay record its snapshots hold.
pub trait Simulation {
    /// The env's name in messages, e.g. `LunarLander`.
    const ENV: &'static str;
    /// A deep copy, by replaying the episode from its own snapshot (Box2D 2.3 cannot copy
    /// a world).
    fn replay(&self) -> Self;
}

/// A Box2D env's state: its own world (boxed: the executors move states around), `None`
/// until the first reset.
pub struct SimState<S> {
    pub sim: Option<Box<S>>,
}

impl<S> Default for SimState<S> {
    fn default() -> Self {
        SimState { sim: None }
    }
}

impl<S: Simulation> SimState<S> {
    pub(crate) fn new(sim: S) -> Self {
        SimState {
            sim: Some(Box::new(sim)),
        }
    }

    #[inline]
    pub fn sim(&self) -> &S {
        self.sim
            .as_deref()
            .unwrap_or_else(|| panic!("{} state used before reset", S::ENV))
    }

    #[inline]
    pub(crate) fn sim_mut(&mut self) -> &mut S {
        self.sim
            .as_deref_mut()
            .unwrap_or_else(|| panic!("{} state used before reset", S::ENV))
    }
}

impl<S: Simulation> Clone for SimState<S> {
    /// A deep copy by replaying the episode (rare: checkpoints and tests).
    fn clone(&self) -> Self {
        SimState {
            sim: self.sim.as_ref().map(|s| Box::new(s.replay())),
        }
    }
}
