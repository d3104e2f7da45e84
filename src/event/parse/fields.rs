//! Typed access to parsed JSON values. Each names the field path in its rejection.

use super::shape::CLOCK_STATES;
use super::value::{show, Number, Obj, Val};
use crate::event::features::Feature;
use crate::event::rejection::{Reason, Rejection};
use crate::event::schema2::Axis;
use crate::event::{ClockEvidence, SampleRef};

/// The value of a field, or `missing_field` naming `path`.
pub(crate) fn required<'v, 'a>(
    v: Option<&'v Val<'a>>,
    path: &str,
) -> Result<&'v Val<'a>, Rejection> {
    v.ok_or_else(|| Rejection::new(Reason::MissingField, format!("missing field {path:?}")))
}

/// An optional field: absent and `null` are the same.
pub(crate) fn present<'v, 'a>(v: Option<&'v Val<'a>>) -> Option<&'v Val<'a>> {
    v.filter(|v| !matches!(v, Val::Null))
}

pub(crate) fn bad_type(path: &str, expected: &str, found: &Val<'_>) -> Rejection {
    Rejection::new(
        Reason::BadType,
        format!("{path}: expected {expected}, found {}", found.describe()),
    )
}

pub(crate) fn as_str<'v>(v: &'v Val<'_>, path: &str) -> Result<&'v str, Rejection> {
    match v {
        Val::Str(s) => Ok(s),
        other => Err(bad_type(path, "a string", other)),
    }
}

pub(crate) fn as_bool(v: &Val<'_>, path: &str) -> Result<bool, Rejection> {
    match v {
        Val::Bool(b) => Ok(*b),
        other => Err(bad_type(path, "a boolean", other)),
    }
}

pub(crate) fn as_u64(v: &Val<'_>, path: &str) -> Result<u64, Rejection> {
    match v {
        Val::U64(n) => Ok(*n),
        other => Err(bad_type(path, "an unsigned 64-bit integer", other)),
    }
}

pub(crate) fn as_u32(v: &Val<'_>, path: &str) -> Result<u32, Rejection> {
    match v {
        Val::U64(n) => {
            u32::try_from(*n).map_err(|_| bad_type(path, "an unsigned 32-bit integer", v))
        }
        other => Err(bad_type(path, "an unsigned 32-bit integer", other)),
    }
}

pub(crate) fn as_i64(v: &Val<'_>, path: &str) -> Result<i64, Rejection> {
    match v {
        Val::U64(n) => i64::try_from(*n).map_err(|_| bad_type(path, "a signed 64-bit integer", v)),
        Val::I64(n) => Ok(*n),
        other => Err(bad_type(path, "a signed 64-bit integer", other)),
    }
}

/// Any JSON number, or a non-finite token (left to the semantic checks).
pub(crate) fn as_number(v: &Val<'_>, path: &str) -> Result<Number, Rejection> {
    match v {
        Val::U64(n) => Ok(Number::Finite(*n as f64)),
        Val::I64(n) => Ok(Number::Finite(*n as f64)),
        Val::F64(x) => Ok(Number::Finite(*x)),
        Val::NonFinite(t) => Ok(Number::NonFinite(*t)),
        other => Err(bad_type(path, "a number", other)),
    }
}

pub(crate) fn as_obj<'v, 'a>(v: &'v Val<'a>, path: &str) -> Result<&'v Obj<'a>, Rejection> {
    match v {
        Val::Object(o) => Ok(o),
        other => Err(bad_type(path, "an object", other)),
    }
}

/// A string out of a fixed enumeration; anything else is `bad_type`.
pub(crate) fn as_enum<T: Copy>(
    v: &Val<'_>,
    path: &str,
    table: &[(&str, T)],
) -> Result<T, Rejection> {
    let s = match v {
        Val::Str(s) => s,
        other => return Err(bad_type(path, &one_of(table), other)),
    };
    match table.iter().find(|(name, _)| *name == &**s) {
        Some(&(_, t)) => Ok(t),
        None => Err(Rejection::new(
            Reason::BadType,
            format!("{path}: unknown value {}, expected {}", show(s), one_of(table)),
        )),
    }
}

fn one_of<T>(table: &[(&str, T)]) -> String {
    let names: Vec<String> = table.iter().map(|(n, _)| format!("{n:?}")).collect();
    format!("one of {}", names.join(", "))
}

// ---------------------------------------------------------------------------------------------
// Objects inside an event.

/// Parses a `clock` object (shared by events and samples lines).
pub(crate) fn clock_from(v: &Val<'_>) -> Result<ClockEvidence, Rejection> {
    let obj = as_obj(v, "clock")?;
    obj.check_fields("clock", &["state", "err_ms"])?;
    let state = as_enum(required(obj.get("state"), "clock.state")?, "clock.state", CLOCK_STATES)?;
    let err_ms = match present(obj.get("err_ms")) {
        None => None,
        Some(v) => Some(as_u32(v, "clock.err_ms")?),
    };
    Ok(ClockEvidence { state, err_ms })
}

pub(super) fn samples_from(v: &Val<'_>) -> Result<SampleRef, Rejection> {
    let obj = as_obj(v, "samples")?;
    obj.check_fields("samples", &["block_seq", "from_ms", "to_ms"])?;
    let block_seq =
        as_u64(required(obj.get("block_seq"), "samples.block_seq")?, "samples.block_seq")?;
    let from_ms = as_i64(required(obj.get("from_ms"), "samples.from_ms")?, "samples.from_ms")?;
    let to_ms = as_i64(required(obj.get("to_ms"), "samples.to_ms")?, "samples.to_ms")?;
    if from_ms > to_ms {
        return Err(Rejection::new(
            Reason::BadType,
            format!("samples: from_ms {from_ms} is after to_ms {to_ms}"),
        ));
    }
    Ok(SampleRef { block_seq, from_ms, to_ms })
}

/// Reads `axes`: 1..=3 entries keyed `x`, `y`, `z`, each a number; sorted by axis.
pub(super) fn axes_from(v: &Val<'_>) -> Result<Vec<(Axis, Number)>, Rejection> {
    let obj = as_obj(v, "axes")?;
    if obj.entries.is_empty() {
        return Err(Rejection::new(
            Reason::BadType,
            "axes: expected 1 to 3 of \"x\", \"y\", \"z\", found an empty object",
        ));
    }
    let mut axes = Vec::with_capacity(obj.entries.len());
    for (key, val) in &obj.entries {
        let Some(axis) = Axis::from_key(key) else {
            return Err(Rejection::new(
                Reason::BadType,
                format!("axes: unknown axis {} (expected \"x\", \"y\" or \"z\")", show(key)),
            ));
        };
        axes.push((axis, as_number(val, axis.path())?));
    }
    // Keys are unique (duplicates are malformed_json), so at most three remain.
    axes.sort_by_key(|&(axis, _)| axis);
    Ok(axes)
}

/// Reads `features`: an object of feature names (docs/contracts.md section 12) to numbers, in
/// document order (keys are unique: duplicates are `malformed_json`). An unknown name or a value
/// that is no number is `bad_type` naming the key; finiteness and sign are the semantic checks'.
pub(super) fn features_from(v: &Val<'_>) -> Result<Vec<(Feature, Number)>, Rejection> {
    let obj = as_obj(v, "features")?;
    let mut out = Vec::with_capacity(obj.entries.len());
    for (key, val) in &obj.entries {
        let Some(f) = Feature::from_name(key) else {
            let names: Vec<&str> = Feature::ALL.iter().map(|f| f.as_str()).collect();
            return Err(Rejection::new(
                Reason::BadType,
                format!(
                    "features: unknown feature {}, expected one of {}",
                    show(key),
                    names.join(", ")
                ),
            ));
        };
        out.push((f, as_number(val, &feature_path(f))?));
    }
    Ok(out)
}

/// `features.NAME`, the path of one feature in rejections.
pub(super) fn feature_path(f: Feature) -> String {
    format!("features.{}", f.as_str())
}
