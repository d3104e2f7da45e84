//! `linegate replay --events FILE`: every accepted event, received or derived, as JSON Lines, so
//! that an analyst can plot what the gateway measured. One line per accepted event, in decision
//! order: the event as section 2 of docs/contracts.md defines it (a derived event with its
//! `features`), then `"zone"` (the ISO 20816-3 zone of its velocity, for a machine with an ISO
//! class, as on MQTT), `"derived"` (cut from raw samples or readings by the gateway) and `"at"`
//! (the ingest time of the line it was decided at; `null` when that line's could not be read). Duplicates and rejected records are not written.

use std::io::Write;

use crate::decide::{Decider, LineError, Outcome};
use crate::trace::{Arrival, TraceLine};

/// Writes the accepted events of the line just decided (`parsed`) from `decider`'s outcomes
/// (the decider must be reporting).
pub(super) fn write(
    decider: &mut Decider,
    parsed: &Result<TraceLine, LineError>,
    at: Option<i64>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for outcome in decider.take_outcomes() {
        let Outcome::Accepted { event, derived, zone, .. } = outcome else { continue };
        let own = match parsed {
            Ok(TraceLine { arrival: Arrival::Event(e), .. }) => Some(e),
            _ => None,
        };
        let Some(ev) = event.as_ref().or(own) else { continue };
        let mut v = serde_json::to_value(ev)?;
        if let Some(o) = v.as_object_mut() {
            if let Some(z) = zone {
                o.insert("zone".into(), z.as_str().into());
            }
            o.insert("derived".into(), derived.into());
            o.insert("at".into(), at.into());
        }
        serde_json::to_writer(&mut *out, &v)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
