//! Numbers and spans as a maintenance engineer reads them: a measurement at three significant
//! digits (`0.676 g`, `4.62 mm/s`, `31.4`), never in scientific notation in the ranges a
//! vibration measurement takes, and never rounded across the threshold it is compared with.

use crate::event::features::MeasureUnit;

/// `v` at `digits` significant digits (at least 1), in positional notation from 0.001 up to
/// 10 000 000 (an integer part keeps all its digits: `1235`, not `1.23e3`), in scientific
/// notation (`1.23e-5`) outside that range; `0` for zero, `inf`/`NaN` as Rust writes them.
pub fn sig(v: f64, digits: usize) -> String {
    let digits = digits.max(1);
    if v == 0.0 {
        return "0".to_owned();
    }
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if !(1e-3..1e7).contains(&a) {
        return format!("{v:.*e}", digits - 1);
    }
    let decimals = |mag: f64| (digits as i32 - 1 - mag.log10().floor() as i32).max(0) as usize;
    let d = decimals(a);
    let text = format!("{v:.d$}");
    // Rounding may carry into the next power of ten (9.996 -> 10.00): one decimal fewer then.
    let rounded: f64 = text.parse().unwrap_or(v);
    let d2 = decimals(rounded.abs());
    if d2 < d {
        format!("{v:.d2$}")
    } else {
        text
    }
}

/// A measurement with its unit: `0.676 g`, `4.62 mm/s`, and a dimensionless one bare: `31.4`.
pub fn measure(v: f64, unit: MeasureUnit) -> String {
    with_unit(sig(v, 3), unit)
}

/// `text` followed by the unit, or bare for `"1"`.
pub fn with_unit(text: String, unit: MeasureUnit) -> String {
    match unit {
        MeasureUnit::One => text,
        u => format!("{text} {}", u.as_str()),
    }
}

/// `v` (already in the threshold's unit) at three significant digits, or more where three would
/// put the shown number on the other side of `threshold` (`0.5108` against `0.511` shows as
/// `0.5108`, not `0.511`): the text never contradicts the verdict it stands beside.
pub fn beside(v: f64, threshold: f64) -> String {
    let above = v >= threshold;
    let mut digits = 3;
    loop {
        let text = sig(v, digits);
        let shown: f64 = text.parse().unwrap_or(v);
        if (shown >= threshold) == above || digits >= 17 {
            return text;
        }
        digits += 1;
    }
}

/// A threshold as configured: Rust's shortest exact form (`0.5`, `4.5`, `0.511`).
pub fn exact(v: f64) -> String {
    v.to_string()
}

/// A window length in words: `2 min`, `90 s`, `1 h`, else `crate::timefmt::duration`'s form.
pub fn span(ms: i64) -> String {
    match ms {
        _ if ms > 0 && ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        _ if ms > 0 && ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        _ if ms > 0 && ms % 1000 == 0 => format!("{} s", ms / 1000),
        _ => crate::timefmt::duration(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits_in_the_ranges_vibration_takes() {
        assert_eq!(sig(0.6755668031194012, 3), "0.676");
        assert_eq!(sig(4.6234, 3), "4.62");
        assert_eq!(sig(31.42, 3), "31.4");
        assert_eq!(sig(162.18, 4), "162.2");
        assert_eq!(sig(29.95, 4), "29.95");
        assert_eq!(sig(5.4152, 4), "5.415");
        assert_eq!(sig(4.5, 3), "4.50");
        assert_eq!(sig(0.0123456, 3), "0.0123");
        assert_eq!(sig(0.001, 3), "0.00100");
        assert_eq!(sig(-0.67557, 3), "-0.676", "the sign is kept");
        assert_eq!(sig(1234.6, 3), "1235", "an integer part keeps its digits");
        assert_eq!(sig(9_999_999.0, 3), "9999999");
        assert_eq!(sig(0.0, 3), "0");
    }

    #[test]
    fn rounding_that_carries_into_the_next_power_of_ten_keeps_three_digits() {
        assert_eq!(sig(9.996, 3), "10.0");
        assert_eq!(sig(0.09996, 3), "0.100");
        assert_eq!(sig(99.96, 3), "100");
    }

    #[test]
    fn scientific_notation_only_outside_the_normal_range() {
        assert_eq!(sig(0.000_012_345, 3), "1.23e-5");
        assert_eq!(sig(1.5e9, 3), "1.50e9");
        assert_eq!(sig(f64::INFINITY, 3), "inf");
    }

    #[test]
    fn a_measurement_carries_its_unit_and_a_dimensionless_one_none() {
        assert_eq!(measure(0.6755668031194012, MeasureUnit::G), "0.676 g");
        assert_eq!(measure(4.6234, MeasureUnit::MmS), "4.62 mm/s");
        assert_eq!(measure(6.1, MeasureUnit::Ms2), "6.10 m/s2");
        assert_eq!(measure(31.42, MeasureUnit::One), "31.4");
    }

    #[test]
    fn a_value_beside_its_threshold_is_never_rounded_across_it() {
        assert_eq!(beside(0.5108, 0.511), "0.5108", "below stays below");
        assert_eq!(beside(0.49996, 0.5), "0.49996");
        assert_eq!(beside(0.5, 0.5), "0.500", "equal counts, and shows so");
        assert_eq!(beside(0.67557, 0.5), "0.676", "far from it: three digits");
        assert_eq!(beside(4.4999, 4.5), "4.4999");
        assert_eq!(beside(0.4, f64::INFINITY), "0.400");
    }

    #[test]
    fn spans_in_words() {
        assert_eq!(span(120_000), "2 min");
        assert_eq!(span(90_000), "90 s");
        assert_eq!(span(3_600_000), "1 h");
        assert_eq!(span(1500), "1.5 s");
    }
}
