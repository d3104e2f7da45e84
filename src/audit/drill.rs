//! `linegate drill start|end NAME`: marks a failure injected on purpose (a rehearsal, a
//! technician pulling a cable) in the ledger, so that `reconcile` shows it beside what it caused.
//! Written through the daemon when one holds the store, directly otherwise; either way the
//! record names who asked.

use std::io::Write;

use super::view::View;
use super::AuditError;
use crate::clock::{Clock, SystemClock};
use crate::records::ledger::{DrillPhase, LedgerEntry, LedgerRecord};

/// The longest drill name.
pub const NAME_MAX: usize = 64;

/// Why `name` cannot name a drill, if it cannot: 1 to [`NAME_MAX`] bytes of `[A-Za-z0-9_.-]`.
pub fn check_name(name: &str) -> Result<(), AuditError> {
    let bad = |why: String| Err(AuditError::Usage(format!("drill name {name:?}: {why}")));
    if name.is_empty() || name.len() > NAME_MAX {
        return bad(format!("must be 1 to {NAME_MAX} bytes long, not {}", name.len()));
    }
    match name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))) {
        Some(c) => bad(format!("{c:?} is not one of A-Z, a-z, 0-9, '_', '.', '-'")),
        None => Ok(()),
    }
}

/// Writes a `drill` record for `name`'s `phase`, at the wall clock.
pub fn drill(
    view: &mut View<'_>,
    phase: DrillPhase,
    name: &str,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    check_name(name)?;
    let now = SystemClock::new().now_ms();
    let entry = LedgerEntry::Drill { name: name.to_string(), phase, by: Some(view.operator()) };
    view.write(|s| s.append_ledger(&[LedgerRecord::new(now, entry)]))?;
    writeln!(out, "drill {name} {} at {}", phase.as_str(), crate::timefmt::time(now))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_identifiers() {
        assert!(check_name("cable-pull_2.a").is_ok());
        let e = check_name("a b").unwrap_err().to_string();
        assert!(e.contains("\"a b\"") && e.contains("' '"), "{e}");
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(65)).unwrap_err().to_string().contains("65"));
    }
}
