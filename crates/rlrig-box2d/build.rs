//! Builds Box2D's C++ as Gymnasium runs it, and this crate's C shim.
//!
//! Gymnasium's `box2d` extra installs box2d-py 2.3.5 (pybox2d), which compiles the Box2D it
//! vendors: Box2D 2.3.0 with pybox2d's changes (16 polygon vertices, assertions that
//! throw). The C++ is taken from that source distribution on PyPI, pinned by SHA-256
//! (`RLRIG_BOX2D_SRC` names a local copy); nothing of Box2D is kept in rlrig's repository.
//! Its `b2Settings.h` includes `<Python.h>` for its assertions: `shim/stub/Python.h`
//! stands in (two macros, no Python).
//!
//! `-ffp-contract=off`: no fused multiply-adds, whatever the target CPU, so every float
//! operation rounds as pybox2d's x86-64 build does (the golden tests compare bit-close
//! trajectories). Two changes that leave every bit as it was: Box2D's own clock
//! (`Common/b2Timer.cpp`, read for profile figures rlrig never shows) is replaced by
//! `shim/timer.cpp`, and Box2D's code keeps no frame pointer even when the profile has
//! debug info (together +2.9 % walker steps/s; the shim's file says where measured).

use rlrig_sdist::{Sdist, cpp_sources};
use std::path::PathBuf;

const BOX2D: Sdist = Sdist {
    what: "rlrig-box2d (Box2D 2.3.0 as pybox2d ships it)",
    env_var: "RLRIG_BOX2D_SRC",
    file: "box2d-py-2.3.5.tar.gz",
    url: "https://files.pythonhosted.org/packages/dd/5a/ad8d3ef9c13d5afcc1e44a77f11792ee717f6727b3320bddbc607e935e2a/box2d-py-2.3.5.tar.gz",
    sha256: "b37dc38844bcd7def48a97111d2b082e4f81cca3cece7460feb3eacda0da2207",
    marker: "Box2D/Box2D.h",
};

fn main() {
    println!("cargo:rerun-if-changed=shim/scene.cpp");
    println!("cargo:rerun-if-changed=shim/stub/Python.h");
    println!("cargo:rerun-if-changed=shim/timer.cpp");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let root = BOX2D.unpacked(&out);
    let mut files = Vec::new();
    for sub in ["Collision", "Common", "Dynamics"] {
        files.extend(cpp_sources(&root.join("Box2D").join(sub)));
    }
    files.retain(|f| !f.ends_with("b2Timer.cpp"));
    cc::Build::new()
        .cpp(true)
        .include(&root)
        .include("shim/stub")
        .files(&files)
        .file("shim/scene.cpp")
        .file("shim/timer.cpp")
        .define("NDEBUG", None)
        .force_frame_pointer(false)
        .flag("-ffp-contract=off")
        .warnings(false)
        .flag_if_supported("-w")
        .compile("box2d");
}
