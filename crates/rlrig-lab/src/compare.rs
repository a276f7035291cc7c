//! What the compare tables and plots of `rlrig bench` and `rlrig bench learn` share: the
//! files' letters and legend, and each figure's ratio to the first file's (A).

use std::path::Path;

use crate::LabError;

/// `A`, `B`, ...: how compare tables name the files.
pub(crate) fn letter(i: usize) -> char {
    (b'A' + i as u8) as char
}

/// The lines above a compare table: one per file (`A: name: machine (KIND vVERSION,
/// detail)`), and a warning when the files' versions differ.
pub(crate) fn legend<'a>(
    kind: &str,
    rows_are: &str,
    files: impl Iterator<Item = (&'a str, &'a str, u32, String)>,
) -> String {
    let mut s = String::new();
    let mut versions = Vec::new();
    for (i, (name, machine, version, detail)) in files.enumerate() {
        s += &format!(
            "{}: {name}: {machine} ({kind} v{version}, {detail})\n",
            letter(i)
        );
        versions.push(version);
    }
    if versions.iter().any(|&v| v != versions[0]) {
        s += &format!("warning: {kind} versions differ; {rows_are} may not be comparable\n");
    }
    s
}

/// `b / a` where both were measured and `a` is positive: a figure relative to A's.
pub(crate) fn ratio(b: Option<f64>, a: Option<f64>) -> Option<f64> {
    match (b, a) {
        (Some(b), Some(a)) if a > 0.0 => Some(b / a),
        _ => None,
    }
}

/// A table's ratio cell, ` 1.23 |`, or ` - |` where there is no ratio.
pub(crate) fn ratio_cell(b: Option<f64>, a: Option<f64>) -> String {
    ratio(b, a).map_or(" - |".into(), |r| format!(" {r:.2} |"))
}

/// Grouped bars of every file's figures relative to the first file's, one group per
/// category: `ratios(i)` is file `i`'s ratio in each category (no bar where it has none).
pub(crate) fn ratio_bars<'a>(
    path: &Path,
    title: &str,
    categories: &[String],
    names: impl Iterator<Item = &'a str>,
    ratios: impl Fn(usize) -> Vec<Option<f64>>,
) -> Result<(), LabError> {
    let series: Vec<(String, Vec<f64>)> = names
        .enumerate()
        .map(|(i, name)| {
            let bars = ratios(i).into_iter().map(|r| r.unwrap_or(f64::NAN));
            (format!("{} {name}", letter(i)), bars.collect())
        })
        .collect();
    crate::plot::grouped_bars(path, title, "ratio to A", categories, &series)
}
