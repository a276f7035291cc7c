//! Where rlrig keeps what it downloads, and the C++ it builds from PyPI source
//! distributions (ALE from ale-py's, Box2D from box2d-py's), one way for both.
//!
//! A source distribution is looked for, in order: the crate's override variable (the
//! `.tar.gz` or its unpacked directory), then the rlrig cache, where it is downloaded with
//! `curl` when missing and verified against its pinned SHA-256. Nothing of the C++ is kept
//! in rlrig's repository. Failures are build-script panics whose message says what to
//! download and where to put it.

use std::path::{Path, PathBuf};

/// The rlrig cache: `RLRIG_CACHE_DIR`, else `$XDG_CACHE_HOME/rlrig`, else `~/.cache/rlrig`.
/// Build scripts download source distributions into it; libraries look for ROMs there.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RLRIG_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Path::new(&d).join("rlrig");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    Path::new(&home).join(".cache").join("rlrig")
}

/// One pinned source distribution.
#[cfg(feature = "fetch")]
pub struct Sdist {
    /// What is built from it, for messages ("ALE 0.11.2").
    pub what: &'static str,
    /// The variable that names a local copy (`RLRIG_ALE_SRC`).
    pub env_var: &'static str,
    /// The archive's file name; it unpacks into a directory of the same stem.
    pub file: &'static str,
    pub url: &'static str,
    pub sha256: &'static str,
    /// A file every unpacked copy has, relative to its root (to check a given directory).
    pub marker: &'static str,
}

#[cfg(feature = "fetch")]
impl Sdist {
    fn fail(&self, msg: String) -> ! {
        panic!(
            "\n\n{}: {msg}\nThe build takes its C++ from {} on PyPI.\nDownload {}\n(SHA-256 {}) \
             and set {} to the file, or let the build download it into {}.\n\n",
            self.what,
            self.file,
            self.url,
            self.sha256,
            self.env_var,
            cache_dir().display()
        )
    }

    fn sha256(&self, path: &Path) -> String {
        use sha2::{Digest, Sha256};
        let bytes = std::fs::read(path)
            .unwrap_or_else(|e| self.fail(format!("cannot read {}: {e}", path.display())));
        Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The `.tar.gz` in the cache, verified, downloading it when it is not there.
    fn cached(&self) -> PathBuf {
        let dir = cache_dir();
        let cached = dir.join(self.file);
        if cached.exists() {
            return cached;
        }
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| self.fail(format!("cannot create {}: {e}", dir.display())));
        let part = cached.with_extension("part");
        let ok = std::process::Command::new("curl")
            .args(["-sSfL", "--retry", "3", "-o"])
            .arg(&part)
            .arg(self.url)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            let _ = std::fs::remove_file(&part);
            self.fail(format!("downloading {} with curl failed", self.url));
        }
        let got = self.sha256(&part);
        if got != self.sha256 {
            let _ = std::fs::remove_file(&part);
            self.fail(format!(
                "the download has SHA-256 {got}, not {}",
                self.sha256
            ));
        }
        std::fs::rename(&part, &cached)
            .unwrap_or_else(|e| self.fail(format!("cannot write {}: {e}", cached.display())));
        cached
    }

    /// The root of the unpacked source tree: the override's directory as given, or the
    /// archive (the override's, else the cache's) unpacked under `out`.
    pub fn unpacked(&self, out: &Path) -> PathBuf {
        println!("cargo:rerun-if-env-changed={}", self.env_var);
        println!("cargo:rerun-if-env-changed=RLRIG_CACHE_DIR");
        let archive = match std::env::var_os(self.env_var).map(PathBuf::from) {
            Some(given) if given.is_dir() => {
                if !given.join(self.marker).exists() {
                    self.fail(format!(
                        "{}={} has no {}",
                        self.env_var,
                        given.display(),
                        self.marker
                    ));
                }
                return given;
            }
            Some(given) => {
                if self.sha256(&given) != self.sha256 {
                    self.fail(format!(
                        "{}={} is not {}",
                        self.env_var,
                        given.display(),
                        self.file
                    ));
                }
                given
            }
            None => self.cached(),
        };
        let stem = self.file.strip_suffix(".tar.gz").unwrap_or(self.file);
        let root = out.join(stem);
        if !root.join(self.marker).exists() {
            let f = std::fs::File::open(&archive)
                .unwrap_or_else(|e| self.fail(format!("cannot open {}: {e}", archive.display())));
            tar::Archive::new(flate2::read::GzDecoder::new(f))
                .unpack(out)
                .unwrap_or_else(|e| self.fail(format!("cannot unpack {}: {e}", archive.display())));
        }
        root
    }
}

/// Every `.cpp`/`.cxx` file under `dir`, sorted (a stable build order).
pub fn cpp_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect(dir, &mut files);
    files
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, files);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("cpp" | "cxx")) {
            files.push(p);
        }
    }
}
