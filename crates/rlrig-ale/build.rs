//! Builds ALE's C++ (the emulator and `ALEInterface`) and this crate's C shim.
//!
//! The source is ale-py's source distribution on PyPI (`ale_py-0.11.2.tar.gz`, which
//! carries ALE's C++ since 0.10.1), pinned by SHA-256 and fetched by `rlrig-sdist`
//! (`RLRIG_ALE_SRC` names a local copy). Nothing of ALE is kept in rlrig's repository.
//!
//! The files are compiled with the `cc` crate rather than ALE's CMake project: ALE's
//! CMake turns on GCC's link-time optimisation, whose slim objects would make every
//! link of the `rlrig` binary re-run ALE's code generation.

use rlrig_sdist::{Sdist, cpp_sources};
use std::path::PathBuf;

const VERSION: &str = "0.11.2";
const ALE: Sdist = Sdist {
    what: "rlrig-ale (ALE 0.11.2, the `atari` feature)",
    env_var: "RLRIG_ALE_SRC",
    file: "ale_py-0.11.2.tar.gz",
    url: "https://files.pythonhosted.org/packages/2c/85/fffbe95501efc9ecf73e02fb62e7a99401e12dcb8217313016dd00b13cdc/ale_py-0.11.2.tar.gz",
    sha256: "cc6fed9d994d796d76b0d042fbe0a7101834faa55b5e70b1e1f14367ed9e2a8a",
    marker: "src/ale/ale_interface.hpp",
};

fn main() {
    println!("cargo:rerun-if-changed=shim/ale_c.cpp");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let src = ALE.unpacked(&out).join("src");
    let ale = src.join("ale");

    // version.hpp, as ALE's CMake writes it from version.hpp.in.
    let (major, rest) = VERSION.split_once('.').unwrap();
    let (minor, patch) = rest.split_once('.').unwrap();
    let version_hpp = std::fs::read_to_string(ale.join("version.hpp.in"))
        .unwrap()
        .replace("@ALE_VERSION@", VERSION)
        .replace("@ALE_VERSION_MAJOR@", major)
        .replace("@ALE_VERSION_MINOR@", minor)
        .replace("@ALE_VERSION_PATCH@", patch)
        .replace("@ALE_VERSION_GIT_SHA@", "sdist");
    let generated = out.join("generated");
    std::fs::create_dir_all(&generated).unwrap();
    std::fs::write(generated.join("version.hpp"), version_hpp).unwrap();

    let mut files = vec![ale.join("ale_interface.cpp")];
    for sub in ["common", "emucore", "environment", "games"] {
        files.extend(cpp_sources(&ale.join(sub)));
    }
    let mut build = cc::Build::new();
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
        // Intel's JCC erratum (Skylake to Cascade Lake): with its microcode fix, a jump
        // that crosses or ends on a 32-byte boundary is not cached as decoded micro-ops.
        // The 6502 interpreter and the TIA are dense in branches; padding them keeps
        // their speed independent of where the linker puts them: +3-5 % Pong steps/s for
        // both rlrig and the bare emulator loop on a Cascade Lake VM (BENCHMARKS.md
        // "Atari"). An assembler without the option skips it.
        build.flag_if_supported("-Wa,-mbranches-within-32B-boundaries");
    }
    build
        .cpp(true)
        .std("c++17")
        .include(&src)
        .include(&generated)
        .files(&files)
        .file("shim/ale_c.cpp")
        .define("NDEBUG", None)
        .warnings(false)
        .flag_if_supported("-w")
        .compile("ale");
    println!("cargo:rustc-link-lib=z");
}
