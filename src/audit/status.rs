//! `linegate status`: one screen for the person at the gateway. Per machine its watermark, lag
//! and open incidents; per sensor its state (`live`, `idle`, `silent`), last event and declared
//! gaps; the outbox by kind with the backlog's ETA; the broker session; the store against its
//! budget; the clock; the last restart and recovery.
//!
//! What the store holds is read the same way from a running daemon (through the control socket)
//! and from a stopped store; what only a running process knows (the broker session, the clock,
//! the drain rate) comes from the daemon's [`Live`] facts, and says "not running" otherwise.
//!
//! Sensor states are taken at the gateway's ingest time: the newest ingest time decided, and the
//! wall clock too when a live source is configured (its ingest times are the wall clock).

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use super::inspect::{self, OutboxDepth};
use super::status_asset::{facts, AssetFacts};
use super::view::View;
use super::AuditError;
use crate::config::Config;
use crate::records::checkpoint::CheckpointPayload;
use crate::records::ledger::LedgerRecord;
use crate::records::sensors::{SensorBook, SensorState};
use crate::rule::alert::{AlertKind, AlertRecord};
use crate::store::archive::ALERTS;
use crate::timefmt::time;

/// What only the running daemon knows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Live {
    pub pid: u32,
    pub started_ms: i64,
    /// The wall clock when the request was answered.
    pub now_ms: i64,
    /// `None` when no MQTT forwarder runs (`--no-forward`, `--forward local-ack`).
    pub broker_connected: Option<bool>,
    pub clock: String,
    /// Outbox records removed per second over the last 30 s.
    pub drain_rate: f64,
}

/// One sensor.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SensorRow {
    pub machine: String,
    pub sensor: String,
    pub state: SensorState,
    pub last_seq: Option<u64>,
    pub last_ts_ms: Option<i64>,
    pub last_at_ms: Option<i64>,
    /// Ingest time since its last record (from the reference time of the report).
    pub quiet_ms: Option<i64>,
    pub events: u64,
    pub gaps: BTreeMap<String, u64>,
    /// Its watermark bound, and with `auto` the measured disorder and ingest delay (ms), as of
    /// the last checkpoint.
    pub bound_ms: Option<i64>,
    pub disorder_ms: Option<i64>,
    pub delay_ms: Option<i64>,
}

/// Every sensor seen or configured, with its state at `now_ms`.
pub fn sensor_rows(book: &SensorBook, config: &Config, now_ms: i64) -> Vec<SensorRow> {
    let mut rows: BTreeMap<(String, String), SensorRow> = BTreeMap::new();
    let (idle, late) = (config.time.idle_timeout_ms, config.time.allowed_lateness_ms);
    for ((m, s), a) in &book.sensors {
        let seen = a.events > 0;
        let last_at = seen.then_some(a.last_at_ms);
        rows.insert(
            (m.clone(), s.clone()),
            SensorRow {
                machine: m.clone(),
                sensor: s.clone(),
                state: SensorState::at(last_at, now_ms, idle, late),
                last_seq: seen.then_some(a.last_seq),
                last_ts_ms: seen.then_some(a.last_ts_ms),
                last_at_ms: last_at,
                quiet_ms: last_at.map(|t| now_ms.saturating_sub(t)),
                events: a.events,
                gaps: a.gaps.clone(),
                bound_ms: a.bound_ms,
                disorder_ms: a.disorder_ms,
                delay_ms: a.delay_ms,
            },
        );
    }
    for (m, s) in config.configured_sensors().0 {
        rows.entry((m.clone(), s.clone())).or_insert(SensorRow {
            machine: m,
            sensor: s,
            state: SensorState::Silent,
            last_seq: None,
            last_ts_ms: None,
            last_at_ms: None,
            quiet_ms: None,
            events: 0,
            gaps: BTreeMap::new(),
            bound_ms: None,
            disorder_ms: None,
            delay_ms: None,
        });
    }
    rows.into_values().collect()
}

/// The ingest time sensor states are taken at: the newest decided, or the wall clock when a live
/// source is configured and it is later.
pub fn reference_time(book: &SensorBook, config: &Config, wall_ms: Option<i64>) -> i64 {
    let newest = book.newest_at_ms().unwrap_or(i64::MIN);
    match (config.configured_sensors().1, wall_ms) {
        (true, Some(w)) => newest.max(w),
        _ => newest.max(0),
    }
}

/// One rule of the configuration.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RuleRow {
    pub rule: String,
    pub rule_version: String,
}

/// One machine.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MachineRow {
    pub machine: String,
    pub watermark_ms: Option<i64>,
    /// The reference ingest time minus the watermark.
    pub lag_ms: Option<i64>,
    pub open_incidents: Vec<OpenIncident>,
    /// Its line, ISO class and latest velocity with its zone (`super::status_asset`).
    #[serde(flatten)]
    pub asset: AssetFacts,
}

/// An incident still open: its latest revision.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpenIncident {
    pub alert_id: String,
    /// The rule that decided it.
    pub rule: String,
    pub revision: u32,
    pub onset_ms: i64,
    /// Evidence event ids with their event times.
    pub evidence: Vec<(String, i64)>,
    pub also_count: u64,
}

/// The report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Status {
    pub gateway: String,
    /// The configuration's (first) rule and its version (`crate::config::rule_version`).
    pub rule: String,
    pub rule_version: String,
    /// Every rule with its version, in configuration order (the first is `rule`).
    pub rules: Vec<RuleRow>,
    /// `None`: no daemon runs (the store was read directly).
    pub daemon: Option<Live>,
    /// The ingest time states and lags are taken at.
    pub reference_ms: i64,
    pub machines: Vec<MachineRow>,
    pub sensors: Vec<SensorRow>,
    pub outbox: OutboxDepth,
    /// Backlog over drain rate, in seconds; `None` when nothing waits, or nothing drains.
    pub backlog_eta_s: Option<f64>,
    pub store_bytes: u64,
    /// `[store] max_bytes` (0: unbounded).
    pub store_budget_bytes: u64,
    pub quarantined: u64,
    pub last_restart: Option<LedgerRecord>,
    pub last_recovery: Option<LedgerRecord>,
    /// The Sparkplug B view, when `[sparkplug]` is on.
    pub sparkplug: Option<SparkplugRow>,
}

/// The Sparkplug B view: from the store, and from the running daemon's counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SparkplugRow {
    pub group_id: String,
    pub primary_host: Option<String>,
    /// The birth/death sequence of the last connection (`None`: it never connected).
    pub bd_seq: Option<u64>,
    /// Outbox records the view has not sent yet (the historical backlog).
    pub held: u64,
    /// The daemon's counters since it started (`None`: no daemon runs).
    pub session: Option<crate::sparkplug::Snapshot>,
}

/// How the outbox's backlog drains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drain {
    Empty,
    /// Seconds until it is sent at the drain rate of the last 30 s.
    Eta(f64),
    NotDraining,
    /// No daemon runs: nothing sends it.
    NoDaemon,
}

impl Status {
    /// The outbox's records and bytes in all, and how it drains.
    pub fn backlog(&self) -> (u64, u64, Drain) {
        let (n, b) = self.outbox.values().fold((0, 0), |a, d| (a.0 + d.0, a.1 + d.1));
        let drain = match (n, self.backlog_eta_s, &self.daemon) {
            (0, _, _) => Drain::Empty,
            (_, Some(s), _) => Drain::Eta(s),
            (_, None, Some(_)) => Drain::NotDraining,
            (_, None, None) => Drain::NoDaemon,
        };
        (n, b, drain)
    }
}

/// Gathers the status.
pub fn gather(view: &View<'_>, config: &Config, live: Option<&Live>) -> Result<Status, AuditError> {
    let (book, checkpoint, size, quarantined) = view.read(|s| -> Result<_, AuditError> {
        let q = s.archive_scan(crate::store::archive::QUARANTINE).count() as u64;
        Ok((s.sensor_book_with_gaps()?, s.last_checkpoint()?, s.size_on_disk()?, q))
    })?;
    let outbox = inspect::outbox_depth(view)?;
    let (last_restart, last_recovery) = view.read(inspect::last_restart_and_recovery)?;
    let reference_ms = reference_time(&book, config, live.map(|l| l.now_ms));
    let mut watermarks: Vec<(String, Option<i64>)> = Vec::new();
    let mut velocities: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    if let Some(cp) = checkpoint {
        let p = CheckpointPayload::decode(&cp.decider).map_err(|e| AuditError::Decode {
            what: "checkpoint",
            key: "c/".into(),
            why: e.to_string(),
        })?;
        let d = crate::decide::Decider::restore(config, &p.decider).map_err(|e| {
            AuditError::Decode { what: "checkpoint", key: "c/".into(), why: e.to_string() }
        })?;
        watermarks = d.watermarks().map(|(m, w)| (m.to_string(), w)).collect();
        velocities = d.latest_velocities().map(|(m, ts, v)| (m.to_string(), (ts, v))).collect();
    }
    let open = view.read(open_incidents)?;
    let machines = watermarks
        .into_iter()
        .map(|(machine, wm)| MachineRow {
            asset: facts(config, &machine, velocities.get(&machine).copied()),
            open_incidents: open.get(&machine).cloned().unwrap_or_default(),
            lag_ms: wm.map(|w| reference_ms.saturating_sub(w)),
            watermark_ms: wm,
            machine,
        })
        .collect();
    let sparkplug = match &config.sparkplug {
        None => None,
        Some(c) => {
            let (place, held) = view.read(|s| -> Result<_, crate::store::StoreError> {
                Ok((s.sparkplug_read()?, s.sparkplug_held()?))
            })?;
            Some(SparkplugRow {
                group_id: c.group_id.clone(),
                primary_host: c.primary_host.clone(),
                bd_seq: place.and_then(|p| p.bd_seq),
                held,
                session: live.map(|_| crate::sparkplug::STATS.snapshot()),
            })
        }
    };
    let backlog: u64 = outbox.values().map(|d| d.0).sum();
    let backlog_eta_s = match live {
        Some(l) if backlog > 0 && l.drain_rate > 0.0 => Some(backlog as f64 / l.drain_rate),
        _ => None,
    };
    Ok(Status {
        gateway: config.gateway.id.clone(),
        rule: config.rule.name.clone(),
        rule_version: crate::config::rule_version::rule_version(config),
        rules: crate::config::rule_version::rule_versions(config)
            .into_iter()
            .map(|(rule, rule_version)| RuleRow { rule, rule_version })
            .collect(),
        daemon: live.cloned(),
        reference_ms,
        machines,
        sensors: sensor_rows(&book, config, reference_ms),
        outbox,
        backlog_eta_s,
        store_bytes: size,
        store_budget_bytes: config.store.max_bytes,
        quarantined,
        last_restart,
        last_recovery,
        sparkplug,
    })
}

/// The latest revision of every alert in the archive, by alert id.
pub fn latest_alerts(
    store: &crate::store::Store,
) -> Result<BTreeMap<String, AlertRecord>, AuditError> {
    let mut latest: BTreeMap<String, AlertRecord> = BTreeMap::new();
    for r in store.archive_scan(ALERTS) {
        let a = super::decode_alert(r?)?;
        latest.insert(a.alert_id.clone(), a);
    }
    Ok(latest)
}

/// The latest revision of every alert not yet closed or superseded, by machine.
fn open_incidents(
    store: &crate::store::Store,
) -> Result<BTreeMap<String, Vec<OpenIncident>>, AuditError> {
    let mut out: BTreeMap<String, Vec<OpenIncident>> = BTreeMap::new();
    for a in latest_alerts(store)?.into_values() {
        if matches!(a.kind, AlertKind::Close | AlertKind::Supersede) {
            continue;
        }
        out.entry(a.machine.clone()).or_default().push(OpenIncident {
            alert_id: a.alert_id,
            rule: a.rule,
            revision: a.revision,
            onset_ms: a.onset_ms,
            evidence: a.evidence.iter().map(|e| (e.event_id.to_string(), e.ts_ms)).collect(),
            also_count: a.also_count,
        });
    }
    Ok(out)
}

pub use crate::timefmt::duration as words;

/// The Sparkplug view in one line, for `status` and the status page.
pub fn sparkplug_line(sp: &SparkplugRow) -> String {
    let bd = sp.bd_seq.map_or("none yet".to_string(), |b| b.to_string());
    let host = sp.primary_host.as_deref().map_or(String::new(), |h| format!(", primary host {h}"));
    let session = match &sp.session {
        None => "not running".to_string(),
        Some(s) => format!(
            "{}, births {} NBIRTH {} DBIRTH, {} DDATA ({} historical values), {} NDEATH",
            if s.online { "online" } else { "OFFLINE" },
            s.nbirth,
            s.dbirth,
            s.ddata,
            s.historical,
            s.ndeath
        ),
    };
    format!(
        "group {}{host}: {session}, bdSeq {bd}, {} record(s) held for history",
        sp.group_id, sp.held
    )
}

/// `linegate status` (text or JSON).
pub fn status(
    view: &mut View<'_>,
    config: &Config,
    live: Option<&Live>,
    json: bool,
    out: &mut dyn Write,
) -> Result<u8, AuditError> {
    let st = gather(view, config, live)?;
    if json {
        let text = serde_json::to_string_pretty(&st).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
        return Ok(0);
    }
    write_text(&st, out)?;
    Ok(0)
}

fn write_text(st: &Status, out: &mut dyn Write) -> std::io::Result<()> {
    match &st.daemon {
        Some(l) => writeln!(
            out,
            "gateway {}: running (pid {}, up {}, since {}), at {}",
            st.gateway,
            l.pid,
            words(l.now_ms - l.started_ms),
            time(l.started_ms),
            time(l.now_ms)
        )?,
        None => writeln!(out, "gateway {}: not running (the store read directly)", st.gateway)?,
    }
    writeln!(
        out,
        "ingest time {} (sensor states and lags are taken at it)",
        time(st.reference_ms)
    )?;
    for r in &st.rules {
        writeln!(out, "rule {} version {}", r.rule, r.rule_version)?;
    }
    writeln!(out, "machines")?;
    if st.machines.is_empty() {
        writeln!(out, "  none yet")?;
    }
    for m in &st.machines {
        let wm = m.watermark_ms.map_or("none yet".to_string(), time);
        let lag = m.lag_ms.map_or(String::new(), |l| format!(", lag {}", words(l)));
        let asset = m.asset.asset_text();
        let asset = if asset.is_empty() { asset } else { format!(" ({asset})") };
        writeln!(
            out,
            "  {}{asset}: watermark {wm}{lag}, {} open incident(s), velocity {}",
            m.machine,
            m.open_incidents.len(),
            m.asset.velocity_text()
        )?;
        for i in &m.open_incidents {
            let ev: Vec<String> =
                i.evidence.iter().map(|(id, ts)| format!("{id} at {}", time(*ts))).collect();
            let also = if i.also_count > 0 {
                format!(", {} more high events", i.also_count)
            } else {
                String::new()
            };
            writeln!(
                out,
                "    {} (rule {}) revision {} since {}: evidence {}{also}",
                i.alert_id,
                i.rule,
                i.revision,
                time(i.onset_ms),
                ev.join(", ")
            )?;
        }
    }
    writeln!(out, "sensors")?;
    if st.sensors.is_empty() {
        writeln!(out, "  none seen or configured")?;
    }
    for s in &st.sensors {
        let last = match (s.last_seq, s.last_ts_ms, s.quiet_ms) {
            (Some(seq), Some(ts), Some(q)) => {
                format!("last event seq {seq} at {} (received {} ago)", time(ts), words(q))
            }
            _ => "never heard from".to_string(),
        };
        let gaps: Vec<String> = s.gaps.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let gaps =
            if gaps.is_empty() { "no gaps".into() } else { format!("gaps: {}", gaps.join(", ")) };
        let bound = match (s.bound_ms, s.disorder_ms, s.delay_ms) {
            (Some(b), Some(d), Some(l)) => format!(
                ", watermark bound {} (measured: disorder {}, ingest delay {})",
                words(b),
                words(d),
                words(l)
            ),
            (Some(b), _, _) => format!(", watermark bound {}", words(b)),
            _ => String::new(),
        };
        writeln!(out, "  {}/{}: {}, {last}, {gaps}{bound}", s.machine, s.sensor, s.state.as_str())?;
    }
    let (n, b, drain) = st.backlog();
    let eta = match drain {
        Drain::Empty => "empty".to_string(),
        Drain::Eta(s) => format!("ETA {}", words((s * 1000.0) as i64)),
        Drain::NotDraining => "not draining".to_string(),
        Drain::NoDaemon => "waiting for the daemon".to_string(),
    };
    writeln!(out, "outbox {n} records, {b} bytes: {eta}")?;
    for (k, (n, b)) in &st.outbox {
        writeln!(out, "  {k:<8} {n} records, {b} bytes")?;
    }
    let broker = match &st.daemon {
        None => "not running",
        Some(l) => match l.broker_connected {
            None => "no MQTT forwarder",
            Some(true) => "session up",
            Some(false) => "DOWN (records wait in the outbox)",
        },
    };
    writeln!(out, "broker {broker}")?;
    if let Some(sp) = &st.sparkplug {
        writeln!(out, "sparkplug {}", sparkplug_line(sp))?;
    }
    let budget = match st.store_budget_bytes {
        0 => "no budget".to_string(),
        b => format!("{:.1} % of {} bytes", st.store_bytes as f64 * 100.0 / b as f64, b),
    };
    writeln!(out, "store {} bytes ({budget}), {} quarantined", st.store_bytes, st.quarantined)?;
    if let Some(l) = &st.daemon {
        writeln!(out, "clock {}", l.clock)?;
    }
    for (what, r) in [("last restart", &st.last_restart), ("last recovery", &st.last_recovery)] {
        match r {
            None => writeln!(out, "{what}: none")?,
            Some(r) => writeln!(out, "{what}: {} ({})", time(r.at_ms), r.entry.describe())?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_sensors_never_heard_from_are_silent_and_seen_ones_age() {
        let c = Config::from_toml(
            "[gateway]\nid = \"g\"\n[time]\nidle_timeout = \"10s\"\nallowed_lateness = \"60s\"\n",
            "test",
        )
        .unwrap();
        let mut book = SensorBook::default();
        let mut a = crate::records::sensors::SensorActivity {
            last_seq: 7,
            last_ts_ms: 1_000,
            last_at_ms: 2_000,
            events: 7,
            ..Default::default()
        };
        book.sensors.insert(("m".into(), "s1".into()), a.clone());
        a.last_at_ms = 40_000;
        book.sensors.insert(("m".into(), "s2".into()), a);
        let now = reference_time(&book, &c, Some(i64::MAX));
        assert_eq!(now, 40_000, "no live source: the wall clock does not count");
        let rows = sensor_rows(&book, &c, now);
        let st: Vec<_> = rows.iter().map(|r| (r.sensor.as_str(), r.state, r.quiet_ms)).collect();
        assert_eq!(
            st,
            vec![("s1", SensorState::Idle, Some(38_000)), ("s2", SensorState::Live, Some(0))]
        );
        let rows = sensor_rows(&book, &c, 62_001);
        assert_eq!(rows[0].state, SensorState::Silent);
    }
}
