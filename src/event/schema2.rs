//! Event schema 2: per-axis values instead of one scalar (see `docs/event-schema-2.md`).
//!
//! A schema-2 event replaces `value` with `axes` (1..=3 of `"x"`, `"y"`, `"z"`, each a finite
//! number >= 0 in `unit`) and an optional `combine` (`"rss"`, the default, or `"max"`). Parsing
//! validates it and upcasts it to the scalar [`Event`](super::Event) with `value = upcast(axes)` and
//! `schema: 2`.

/// One measurement axis: of a schema-2 event, and of an accelerometer a bus source reads
/// (`axes = ["x", "z"]` in its configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    X,
    Y,
    Z,
}

impl Axis {
    pub const ALL: [Axis; 3] = [Axis::X, Axis::Y, Axis::Z];

    /// The key spelling in `axes`.
    pub fn as_str(self) -> &'static str {
        match self {
            Axis::X => "x",
            Axis::Y => "y",
            Axis::Z => "z",
        }
    }

    /// The axis a key of `axes` names; `None` for anything but exactly `"x"`, `"y"` or `"z"`.
    pub fn from_key(key: &str) -> Option<Axis> {
        match key {
            "x" => Some(Axis::X),
            "y" => Some(Axis::Y),
            "z" => Some(Axis::Z),
            _ => None,
        }
    }

    /// The field path used in rejection details, e.g. `axes.x`.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Axis::X => "axes.x",
            Axis::Y => "axes.y",
            Axis::Z => "axes.z",
        }
    }
}

/// How the axes of a schema-2 event combine into the scalar `value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Combine {
    /// Root-sum-square: `sqrt(x² + y² + z²)` over the axes present. The default.
    #[default]
    Rss,
    /// The largest axis value.
    Max,
}

impl Combine {
    pub fn as_str(self) -> &'static str {
        match self {
            Combine::Rss => "rss",
            Combine::Max => "max",
        }
    }

    pub fn from_name(name: &str) -> Option<Combine> {
        match name {
            "rss" => Some(Combine::Rss),
            "max" => Some(Combine::Max),
            _ => None,
        }
    }
}

/// The scalar value of a schema-2 event: `combine` over the axis values.
///
/// Parsing only calls this with 1..=3 finite values >= 0. For `Rss` the textbook
/// `sqrt(sum of squares)` is returned whenever it is representable; when the squares overflow, or
/// their sum falls below the smallest normal f64 (where it loses precision or underflows to zero),
/// the sum is rescaled by the largest value, so the result is infinite only when the true
/// root-sum-square exceeds `f64::MAX`. An empty slice gives `0.0`; a NaN input gives NaN for
/// either combine.
pub fn upcast(axes: &[(Axis, f64)], combine: Combine) -> f64 {
    match combine {
        Combine::Max => {
            let mut m = 0.0;
            for &(_, v) in axes {
                if v.is_nan() {
                    return f64::NAN;
                }
                if v > m {
                    m = v;
                }
            }
            m
        }
        Combine::Rss => {
            let sum = axes.iter().map(|&(_, v)| v * v).sum::<f64>();
            let r = sum.sqrt();
            if r.is_nan() {
                return r;
            }
            // A sum below f64::MIN_POSITIVE is subnormal: it keeps fewer significant bits, down
            // to none (found by fuzzing: axes 2.7e-162 and 1.6e-310 gave 2.2e-162), so it is
            // rescaled too, not only a sum that underflowed to zero.
            if r.is_finite() && (sum >= f64::MIN_POSITIVE || axes.iter().all(|&(_, v)| v == 0.0)) {
                return r;
            }
            // The squares overflowed or lost precision: rescale by the largest magnitude.
            let m = axes.iter().map(|&(_, v)| v.abs()).fold(0.0, f64::max);
            if m.is_infinite() {
                return f64::INFINITY;
            }
            m * axes.iter().map(|&(_, v)| (v / m) * (v / m)).sum::<f64>().sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_of_three_four_is_five() {
        assert_eq!(upcast(&[(Axis::X, 3.0), (Axis::Y, 4.0)], Combine::Rss), 5.0);
    }

    #[test]
    fn rss_of_three_axes() {
        let v = upcast(&[(Axis::X, 1.0), (Axis::Y, 2.0), (Axis::Z, 2.0)], Combine::Rss);
        assert_eq!(v, 3.0);
    }

    #[test]
    fn rss_of_one_axis_is_that_axis() {
        for x in [0.0, 1e-300, 0.123_456_789, 7.5, 1e300] {
            assert_eq!(upcast(&[(Axis::Z, x)], Combine::Rss), x, "{x}");
        }
    }

    #[test]
    fn rss_of_zeros_is_zero() {
        assert_eq!(upcast(&[(Axis::X, 0.0), (Axis::Y, 0.0)], Combine::Rss), 0.0);
    }

    #[test]
    fn rss_rescales_instead_of_overflowing() {
        let v = upcast(&[(Axis::X, 3e200), (Axis::Y, 4e200)], Combine::Rss);
        assert!((v - 5e200).abs() <= 5e200 * 1e-15, "{v}");
        let tiny = upcast(&[(Axis::X, 3e-200), (Axis::Y, 4e-200)], Combine::Rss);
        assert!((tiny - 5e-200).abs() <= 5e-200 * 1e-15, "{tiny}");
    }

    #[test]
    fn rss_beyond_f64_max_is_infinite() {
        let v = upcast(&[(Axis::X, f64::MAX), (Axis::Y, f64::MAX)], Combine::Rss);
        assert_eq!(v, f64::INFINITY);
    }

    #[test]
    fn max_takes_the_largest_axis() {
        let axes = [(Axis::X, 0.2), (Axis::Y, 0.9), (Axis::Z, 0.4)];
        assert_eq!(upcast(&axes, Combine::Max), 0.9);
        assert_eq!(upcast(&[(Axis::Y, 0.0)], Combine::Max), 0.0);
    }

    #[test]
    fn empty_is_zero_and_nan_propagates() {
        assert_eq!(upcast(&[], Combine::Rss), 0.0);
        assert_eq!(upcast(&[], Combine::Max), 0.0);
        assert!(upcast(&[(Axis::X, f64::NAN), (Axis::Y, 1.0)], Combine::Max).is_nan());
        assert!(upcast(&[(Axis::X, 1.0), (Axis::Y, f64::NAN)], Combine::Max).is_nan());
        assert!(upcast(&[(Axis::X, f64::NAN)], Combine::Rss).is_nan());
    }

    #[test]
    fn default_combine_is_rss_and_names_round_trip() {
        assert_eq!(Combine::default(), Combine::Rss);
        for c in [Combine::Rss, Combine::Max] {
            assert_eq!(Combine::from_name(c.as_str()), Some(c));
        }
        for a in Axis::ALL {
            assert_eq!(Axis::from_key(a.as_str()), Some(a));
        }
        assert_eq!(Axis::from_key("X"), None);
        assert_eq!(Combine::from_name("mean"), None);
    }
}
