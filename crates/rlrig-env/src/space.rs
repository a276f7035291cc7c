//! Observation and action spaces, as Gymnasium describes them.

use std::fmt;

/// Element type of a [`Space::Box`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Float32,
    Float64,
    /// Bytes (Atari's screens), bounds 0..=255.
    UInt8,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
            Dtype::UInt8 => "uint8",
        }
    }
}

/// A Gymnasium space. Only the kinds the bundled environments use.
#[derive(Clone, Debug, PartialEq)]
pub enum Space {
    /// Integers `0..n`.
    Discrete { n: u32 },
    /// A box of reals with per-element bounds (`±inf` for unbounded).
    Box {
        low: Vec<f32>,
        high: Vec<f32>,
        shape: Vec<usize>,
        dtype: Dtype,
    },
}

impl Space {
    /// A float32 box with the given flat bounds and a 1-D shape.
    pub fn box1(low: Vec<f32>, high: Vec<f32>) -> Space {
        assert_eq!(low.len(), high.len(), "box bounds differ in length");
        let shape = vec![low.len()];
        Space::Box {
            low,
            high,
            shape,
            dtype: Dtype::Float32,
        }
    }

    /// A float32 box from `-high` to `high`, 1-D.
    pub fn symmetric(high: Vec<f32>) -> Space {
        Space::box1(high.iter().map(|h| -h).collect(), high)
    }

    /// Number of scalars one element of this space occupies in a flat buffer.
    pub fn flat_dim(&self) -> usize {
        match self {
            Space::Discrete { .. } => 1,
            Space::Box { shape, .. } => shape.iter().product(),
        }
    }

    pub fn is_discrete(&self) -> bool {
        matches!(self, Space::Discrete { .. })
    }

    /// The space taken apart field by field: `discrete(n)` for `Discrete(n)`, else
    /// `boxed(low, high, shape, dtype)`. What writes a space out reads it through: its
    /// `Display` (Gymnasium's text), the CLI's JSON and the Python package's dict.
    pub fn fold<T>(
        &self,
        discrete: impl FnOnce(u32) -> T,
        boxed: impl FnOnce(&[f32], &[f32], &[usize], Dtype) -> T,
    ) -> T {
        match self {
            Space::Discrete { n } => discrete(*n),
            Space::Box {
                low,
                high,
                shape,
                dtype,
            } => boxed(low, high, shape, *dtype),
        }
    }

    /// Whether `x` (flat) lies in the space. Discrete values are given as `f64`.
    pub fn contains(&self, x: &[f64]) -> bool {
        match self {
            Space::Discrete { n } => {
                x.len() == 1 && x[0].fract() == 0.0 && x[0] >= 0.0 && x[0] < f64::from(*n)
            }
            Space::Box { low, high, .. } => {
                x.len() == low.len()
                    && x.iter()
                        .zip(low.iter().zip(high))
                        .all(|(v, (l, h))| *v >= f64::from(*l) && *v <= f64::from(*h))
            }
        }
    }
}

/// Gymnasium's text for a box's bounds: a scalar when all bounds agree, else the array;
/// integer boxes as integers.
fn bounds_text(v: &[f32], dtype: Dtype) -> String {
    let fmt_f32 = |x: f32| match dtype {
        Dtype::UInt8 => format!("{}", x as u8),
        Dtype::Float32 | Dtype::Float64 => fmt_f32(x),
    };
    if v.iter().all(|x| x.to_bits() == v[0].to_bits()) {
        return fmt_f32(v[0]);
    }
    let items: Vec<String> = v.iter().map(|x| fmt_f32(*x)).collect();
    format!("[{}]", items.join(" "))
}

fn fmt_f32(x: f32) -> String {
    if x.is_infinite() {
        if x > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{x:?}")
    }
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.fold(
            |n| format!("Discrete({n})"),
            |low, high, shape, dtype| {
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                let tuple = if dims.len() == 1 {
                    format!("({},)", dims[0])
                } else {
                    format!("({})", dims.join(", "))
                };
                let (low, high) = (bounds_text(low, dtype), bounds_text(high, dtype));
                format!("Box({low}, {high}, {tuple}, {})", dtype.name())
            },
        );
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_gymnasium_style() {
        assert_eq!(Space::Discrete { n: 3 }.to_string(), "Discrete(3)");
        let b = Space::box1(vec![-2.0], vec![2.0]);
        assert_eq!(b.to_string(), "Box(-2.0, 2.0, (1,), float32)");
        let b = Space::box1(vec![-1.0, f32::NEG_INFINITY], vec![1.0, f32::INFINITY]);
        assert_eq!(b.to_string(), "Box([-1.0 -inf], [1.0 inf], (2,), float32)");
        let img = Space::Box {
            low: vec![0.0; 12],
            high: vec![255.0; 12],
            shape: vec![2, 2, 3],
            dtype: Dtype::UInt8,
        };
        assert_eq!(img.to_string(), "Box(0, 255, (2, 2, 3), uint8)");
    }

    #[test]
    fn contains_checks_bounds_and_integrality() {
        let d = Space::Discrete { n: 2 };
        assert!(d.contains(&[1.0]));
        assert!(!d.contains(&[2.0]));
        assert!(!d.contains(&[0.5]));
        assert!(!d.contains(&[-1.0]));
        let b = Space::box1(vec![-1.0], vec![1.0]);
        assert!(b.contains(&[0.3]));
        assert!(!b.contains(&[1.5]));
        assert!(!b.contains(&[f64::NAN]));
        assert_eq!(b.flat_dim(), 1);
    }
}
