/// The rlrig cache: `RLRIG_CACHE_DIR`, else `$XDG_CACHE_HOME/rlrig`, else `~/.cache/rlrig`.
/// Included by both `build.rs` (where ALE's source is downloaded) and the library (where
/// ROMs are looked for), so the two agree.
pub fn cache_dir() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("RLRIG_CACHE_DIR") {
        return std::path::PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return std::path::Path::new(&d).join("rlrig");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    std::path::Path::new(&home).join(".cache").join("rlrig")
}
