//! A run's logs: `metrics.csv` (one row per iteration, appended whole) and the
//! TensorBoard event file, both written by the run driver as it goes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{io, write_atomic};
use crate::LearnError;

/// metrics.csv: rewritten atomically once when a run starts or resumes (dropping rows
/// past the checkpoint, which the resumed run produces again), then appended to.
pub struct MetricsCsv {
    path: PathBuf,
    file: fs::File,
}

impl MetricsCsv {
    /// Opens metrics.csv with `header`, keeping the rows whose first column is at most
    /// `upto` (the checkpoint's iteration or step).
    pub fn open_with(dir: &Path, header: &str, upto: u64) -> Result<MetricsCsv, LearnError> {
        let path = dir.join("metrics.csv");
        let mut text = String::from(header);
        text.push('\n');
        if let Ok(old) = fs::read_to_string(&path) {
            for l in old.lines().skip(1) {
                if l.split(',')
                    .next()
                    .and_then(|x| x.parse::<u64>().ok())
                    .is_some_and(|i| i <= upto)
                {
                    text.push_str(l);
                    text.push('\n');
                }
            }
        }
        write_atomic(&path, text.as_bytes())?;
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        Ok(MetricsCsv { path, file })
    }

    pub fn push(&mut self, mut row: String) -> Result<(), LearnError> {
        row.push('\n');
        append_whole(&mut self.file, &self.path, row.as_bytes())
    }
}

/// A run's metrics.csv as written by [`MetricsCsv`]: the header's column names and
/// each row's values (`NaN` where an iteration had no finished episode).
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<f64>>,
}

impl Metrics {
    /// Reads `dir/metrics.csv`; a missing file, an empty one, a row of another width
    /// or a value that is not a number is an error naming the file and line.
    pub fn read(dir: &Path) -> Result<Metrics, LearnError> {
        let path = dir.join("metrics.csv");
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        Metrics::parse(&text).map_err(|why| LearnError::Corrupt { path, why })
    }

    /// Parses the text of a metrics.csv.
    pub fn parse(text: &str) -> Result<Metrics, String> {
        let mut lines = text.lines();
        let columns: Vec<String> = lines
            .next()
            .filter(|h| !h.is_empty())
            .ok_or("empty: no header")?
            .split(',')
            .map(str::to_string)
            .collect();
        let rows = lines
            .enumerate()
            .map(|(n, l)| {
                let row = l
                    .split(',')
                    .enumerate()
                    .map(|(i, v)| {
                        v.parse::<f64>().map_err(|_| {
                            format!("line {}: column {} is not a number: '{v}'", n + 2, i + 1)
                        })
                    })
                    .collect::<Result<Vec<f64>, String>>()?;
                if row.len() != columns.len() {
                    return Err(format!(
                        "line {}: {} values for {} columns",
                        n + 2,
                        row.len(),
                        columns.len()
                    ));
                }
                Ok(row)
            })
            .collect::<Result<_, String>>()?;
        Ok(Metrics { columns, rows })
    }

    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

/// Appends `bytes` to `file` whole or not at all: a write that fails part way (a full
/// disk) is cut back off, so a later reader never meets half a row or record.
fn append_whole(file: &mut fs::File, path: &Path, bytes: &[u8]) -> Result<(), LearnError> {
    let before = file.metadata().map_err(io(path))?.len();
    file.write_all(bytes).map_err(|source| {
        let _ = file.set_len(before);
        LearnError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// A minimal TensorBoard event-file writer: TFRecord framing (length, masked CRC32C)
/// around hand-encoded `Event` protos holding scalar summaries.
pub struct TensorBoard {
    file: fs::File,
    path: PathBuf,
}

fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c::crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl TensorBoard {
    pub fn create(dir: &Path) -> Result<TensorBoard, LearnError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let path = dir.join(format!(
            "events.out.tfevents.{}.rlrig.{}",
            now.as_secs(),
            std::process::id()
        ));
        let file = fs::File::create(&path).map_err(io(&path))?;
        let mut tb = TensorBoard { file, path };
        // First event: file_version (field 3).
        let mut ev = Vec::new();
        ev.push(0x09); // wall_time, double
        ev.extend_from_slice(&now.as_secs_f64().to_le_bytes());
        let v = b"brain.Event:2";
        ev.push(0x1a);
        varint(v.len() as u64, &mut ev);
        ev.extend_from_slice(v);
        tb.record(&ev)?;
        Ok(tb)
    }

    fn record(&mut self, data: &[u8]) -> Result<(), LearnError> {
        let len = (data.len() as u64).to_le_bytes();
        let mut buf = Vec::with_capacity(data.len() + 16);
        buf.extend_from_slice(&len);
        buf.extend_from_slice(&masked_crc(&len).to_le_bytes());
        buf.extend_from_slice(data);
        buf.extend_from_slice(&masked_crc(data).to_le_bytes());
        append_whole(&mut self.file, &self.path, &buf)
    }

    /// Writes scalars `(tag, value)` at `step`.
    pub fn scalars(&mut self, step: u64, values: &[(&str, f64)]) -> Result<(), LearnError> {
        let mut summary = Vec::new();
        for (tag, v) in values {
            if !v.is_finite() {
                continue;
            }
            let mut val = Vec::new();
            val.push(0x0a); // tag, string
            varint(tag.len() as u64, &mut val);
            val.extend_from_slice(tag.as_bytes());
            val.push(0x15); // simple_value, float
            val.extend_from_slice(&(*v as f32).to_le_bytes());
            summary.push(0x0a); // Summary.value
            varint(val.len() as u64, &mut summary);
            summary.extend_from_slice(&val);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut ev = Vec::new();
        ev.push(0x09);
        ev.extend_from_slice(&now.as_secs_f64().to_le_bytes());
        ev.push(0x10); // step, varint
        varint(step, &mut ev);
        ev.push(0x2a); // summary
        varint(summary.len() as u64, &mut ev);
        ev.extend_from_slice(&summary);
        self.record(&ev)?;
        self.file.flush().map_err(io(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Rows written through `MetricsCsv` (any finite or NaN values, any header)
        /// read back as written; text that is not a metrics file is an error, never a
        /// panic.
        #[test]
        fn metrics_written_read_back(
            cols in proptest::collection::vec("[a-z_]{1,12}", 1..6),
            rows in proptest::collection::vec(proptest::collection::vec(
                proptest::prop_oneof![proptest::num::f64::NORMAL, proptest::strategy::Just(f64::NAN), proptest::strategy::Just(0.0)], 6), 0..8),
            junk in ".{0,80}",
        ) {
            let dir = std::env::temp_dir().join(format!("rlrig-metrics-{}", std::process::id()));
            fs::create_dir_all(&dir).unwrap();
            let header = cols.join(",");
            let mut csv = MetricsCsv::open_with(&dir, &header, 0).unwrap();
            let rows: Vec<Vec<f64>> = rows.into_iter().map(|r| r[..cols.len()].to_vec()).collect();
            for r in &rows {
                csv.push(r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(",")).unwrap();
            }
            let m = Metrics::read(&dir).unwrap();
            proptest::prop_assert_eq!(&m.columns, &cols);
            proptest::prop_assert_eq!(m.rows.len(), rows.len());
            for (a, b) in m.rows.iter().zip(&rows) {
                for (x, y) in a.iter().zip(b) {
                    proptest::prop_assert!(x == y || (x.is_nan() && y.is_nan()));
                }
            }
            let _ = Metrics::parse(&junk);
            let _ = fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn masked_crc_matches_tensorflow_reference_value() {
        // TFRecord's mask of crc32c("") = 0 is 0xa282ead8.
        assert_eq!(masked_crc(b""), 0xa282_ead8);
        // crc32c("123456789") = 0xe3069283 (the CRC-32C check value).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn varints_encode_like_protobuf() {
        let mut v = Vec::new();
        varint(300, &mut v);
        assert_eq!(v, vec![0xac, 0x02]);
    }
}
