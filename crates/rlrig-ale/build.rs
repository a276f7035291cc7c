//! Builds ALE's C++ (the emulator and `ALEInterface`) and this crate's C shim.
//!
//! The source is ale-py's source distribution on PyPI (`ale_py-0.11.2.tar.gz`, which
//! carries ALE's C++ since 0.10.1), pinned by SHA-256. It is looked for, in order:
//! `RLRIG_ALE_SRC` (the `.tar.gz` or its unpacked directory), then the rlrig cache
//! (`RLRIG_CACHE_DIR`, else `$XDG_CACHE_HOME/rlrig`, else `~/.cache/rlrig`), where it
//! is downloaded with `curl` when missing. Nothing of ALE is kept in rlrig's repository.
//!
//! The files are compiled with the `cc` crate rather than ALE's CMake project: ALE's
//! CMake turns on GCC's link-time optimisation, whose slim objects would make every
//! link of the `rlrig` binary re-run ALE's code generation.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = "0.11.2";
const SDIST: &str = "ale_py-0.11.2.tar.gz";
const URL: &str = "https://files.pythonhosted.org/packages/2c/85/fffbe95501efc9ecf73e02fb62e7a99401e12dcb8217313016dd00b13cdc/ale_py-0.11.2.tar.gz";
const SHA256: &str = "cc6fed9d994d796d76b0d042fbe0a7101834faa55b5e70b1e1f14367ed9e2a8a";

// `cache_dir()`, shared with the library (src/cache.rs).
include!("src/cache.rs");

fn fail(msg: String) -> ! {
    panic!(
        "\n\nrlrig-ale: {msg}\nThe `atari` feature builds ALE {VERSION} from ale-py's source distribution.\n\
         Download {URL}\n(SHA-256 {SHA256}) and set RLRIG_ALE_SRC to the file, or let the build \
         download it into {}.\n\n",
        cache_dir().display()
    )
}

fn sha256(path: &Path) -> String {
    let bytes = std::fs::read(path)
        .unwrap_or_else(|e| fail(format!("cannot read {}: {e}", path.display())));
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `.tar.gz`, verified, downloading it into the cache when it is not there.
fn sdist() -> PathBuf {
    let cached = cache_dir().join(SDIST);
    if !cached.exists() {
        std::fs::create_dir_all(cache_dir())
            .unwrap_or_else(|e| fail(format!("cannot create {}: {e}", cache_dir().display())));
        let part = cached.with_extension("part");
        let ok = Command::new("curl")
            .args(["-sSfL", "--retry", "3", "-o"])
            .arg(&part)
            .arg(URL)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            let _ = std::fs::remove_file(&part);
            fail(format!("downloading {URL} with curl failed"));
        }
        let got = sha256(&part);
        if got != SHA256 {
            let _ = std::fs::remove_file(&part);
            fail(format!("the download has SHA-256 {got}, not {SHA256}"));
        }
        std::fs::rename(&part, &cached)
            .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", cached.display())));
    }
    cached
}

/// The unpacked source tree's `src/` directory.
fn source(out: &Path) -> PathBuf {
    println!("cargo:rerun-if-env-changed=RLRIG_ALE_SRC");
    println!("cargo:rerun-if-env-changed=RLRIG_CACHE_DIR");
    if let Some(given) = std::env::var_os("RLRIG_ALE_SRC").map(PathBuf::from) {
        if given.is_dir() {
            let src = given.join("src");
            if !src.join("ale/ale_interface.hpp").exists() {
                fail(format!(
                    "RLRIG_ALE_SRC={} has no src/ale/ale_interface.hpp",
                    given.display()
                ));
            }
            return src;
        }
        if sha256(&given) != SHA256 {
            fail(format!(
                "RLRIG_ALE_SRC={} is not ale-py {VERSION}'s sdist",
                given.display()
            ));
        }
        return unpack(&given, out);
    }
    unpack(&sdist(), out)
}

fn unpack(tgz: &Path, out: &Path) -> PathBuf {
    let root = out.join(format!("ale_py-{VERSION}"));
    if !root.join("src/ale/ale_interface.hpp").exists() {
        let f = std::fs::File::open(tgz)
            .unwrap_or_else(|e| fail(format!("cannot open {}: {e}", tgz.display())));
        tar::Archive::new(flate2::read::GzDecoder::new(f))
            .unpack(out)
            .unwrap_or_else(|e| fail(format!("cannot unpack {}: {e}", tgz.display())));
    }
    root.join("src")
}

fn sources(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, files);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("cpp" | "cxx")) {
            files.push(p);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=shim/ale_c.cpp");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let src = source(&out);
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
        sources(&ale.join(sub), &mut files);
    }
    cc::Build::new()
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
