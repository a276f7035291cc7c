//! The checks every learner's config applies to its numbers, with one wording for each
//! rule: each takes `(key, value)` pairs and names the first that breaks it, as the
//! config file and `--set` spell the key.

use crate::LearnError;

/// `(key, value)` pairs of fields of a config, each keyed by its field's name (so a
/// message names the key the config file and `--set` use): `fields!(self: gamma, tau)`.
#[macro_export]
macro_rules! fields {
    ($s:ident: $($f:ident),+ $(,)?) => {
        &[$((stringify!($f), $s.$f)),+]
    };
}
pub use fields;

fn broken(key: &str, rule: &str, v: impl std::fmt::Display) -> LearnError {
    LearnError::Config(format!("{key} must {rule}, got {v}"))
}

/// The first pair whose value (as f64) fails `ok`, as the error `"{key} must {rule}"`.
fn first_broken<T: Copy + Into<f64> + std::fmt::Display>(
    pairs: &[(&str, T)],
    rule: &str,
    ok: impl Fn(f64) -> bool,
) -> Result<(), LearnError> {
    match pairs.iter().find(|(_, v)| !ok((*v).into())) {
        Some((k, v)) => Err(broken(k, rule, v)),
        None => Ok(()),
    }
}

/// Counts of at least 1 (`"{key} must be at least 1"`).
pub fn at_least_one<T: Copy + PartialEq + From<u8>>(pairs: &[(&str, T)]) -> Result<(), LearnError> {
    match pairs.iter().find(|(_, v)| *v == T::from(0)) {
        Some((k, _)) => Err(LearnError::Config(format!("{k} must be at least 1"))),
        None => Ok(()),
    }
}

/// Finite numbers above 0.
pub fn positive<T: Copy + Into<f64> + std::fmt::Display>(
    pairs: &[(&str, T)],
) -> Result<(), LearnError> {
    first_broken(pairs, "be a positive number", |v| v.is_finite() && v > 0.0)
}

/// Finite numbers of at least 0.
pub fn non_negative<T: Copy + Into<f64> + std::fmt::Display>(
    pairs: &[(&str, T)],
) -> Result<(), LearnError> {
    first_broken(pairs, "be a non-negative number", |v| {
        v.is_finite() && v >= 0.0
    })
}

/// Fractions in [0, 1] (discounts, probabilities, coefficients).
pub fn unit_interval<T: Copy + Into<f64> + std::fmt::Display>(
    pairs: &[(&str, T)],
) -> Result<(), LearnError> {
    first_broken(pairs, "lie in [0, 1]", |v| (0.0..=1.0).contains(&v))
}

/// The hidden layers of an MLP: at least one, each of at least one unit.
pub fn hidden_layers(hidden: &[usize]) -> Result<(), LearnError> {
    if hidden.is_empty() || hidden.contains(&0) {
        return Err(broken(
            "hidden",
            "list at least one positive layer size",
            format!("{hidden:?}"),
        ));
    }
    Ok(())
}

/// Asserts that a config check refused, with a message that contains `needle` (the
/// learners' config tests).
#[cfg(test)]
pub(crate) fn assert_refused(checked: Result<(), LearnError>, needle: &str) {
    let e = checked.expect_err("the config is refused").to_string();
    assert!(e.contains(needle), "'{needle}' not in: {e}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message(r: Result<(), LearnError>) -> Option<String> {
        r.err().map(|e| e.to_string())
    }

    proptest! {
        /// Each rule accepts exactly the values its wording names, and names the first
        /// key that breaks it.
        #[test]
        fn each_rule_names_the_first_value_that_breaks_it(a in -2.0f64..2.0, b in -2.0f64..2.0, n in 0usize..3) {
            let pairs = [("a", a), ("b", b)];
            let first = |ok: &dyn Fn(f64) -> bool| pairs.iter().find(|(_, v)| !ok(*v)).map(|(k, _)| *k);
            for (r, ok) in [
                (positive(&pairs), &(|v: f64| v > 0.0) as &dyn Fn(f64) -> bool),
                (non_negative(&pairs), &|v: f64| v >= 0.0),
                (unit_interval(&pairs), &|v: f64| (0.0..=1.0).contains(&v)),
            ] {
                match (message(r), first(ok)) {
                    (None, None) => {}
                    (Some(m), Some(k)) => prop_assert!(m.contains(&format!("{k} must ")), "{m}"),
                    (m, k) => prop_assert!(false, "{m:?} for first broken key {k:?}"),
                }
            }
            let counted = message(at_least_one(&[("n", n), ("m", 1usize)]));
            prop_assert_eq!(counted.is_some(), n == 0);
        }
    }

    #[test]
    fn non_finite_numbers_break_every_rule() {
        for v in [f64::NAN, f64::INFINITY] {
            assert!(positive(&[("x", v)]).is_err());
            assert!(non_negative(&[("x", v)]).is_err());
            assert!(unit_interval(&[("x", v)]).is_err());
        }
        assert!(hidden_layers(&[]).is_err());
        assert!(hidden_layers(&[64, 0]).is_err());
        assert!(hidden_layers(&[64, 64]).is_ok());
    }
}
