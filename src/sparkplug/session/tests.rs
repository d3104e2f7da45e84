use prost::Message;

use super::*;

fn cfg(primary_host: Option<&str>) -> SessionConfig {
    SessionConfig {
        group_id: "plant".into(),
        node_id: "gw-1".into(),
        primary_host: primary_host.map(Into::into),
        iso: BTreeMap::new(),
        replay_rate: 0,
    }
}

fn event(machine: &str, seq: u64, ts_ms: i64, value: f64) -> OutboxRecord {
    let json = format!(
        r#"{{"ts_ms":{ts_ms},"metric":"accel_rms","value":{value},"quality":"good","features":{{"velocity_rms":{value}}}}}"#
    );
    OutboxRecord::Event {
        machine: machine.into(),
        sensor: "s1".into(),
        seq,
        event_id: format!("gw-1.s1.{seq}"),
        json: json.into_bytes(),
    }
}

fn decode(p: &Publish) -> Payload {
    Payload::decode(p.payload.as_slice()).unwrap()
}

fn kinds(out: &[Publish]) -> Vec<Kind> {
    out.iter().map(|p| p.kind).collect()
}

fn bd_seq_of(p: &Payload) -> Option<payload::metric::Value> {
    p.metrics.iter().find(|m| m.name.as_deref() == Some(BD_SEQ)).and_then(|m| m.value.clone())
}

fn rebirth_command(value: bool) -> Vec<u8> {
    let m = payload::Metric {
        name: Some(REBIRTH.into()),
        datatype: Some(datatype::BOOLEAN),
        value: Some(payload::metric::Value::BooleanValue(value)),
        ..Default::default()
    };
    Payload { metrics: vec![m], ..Default::default() }.encode_to_vec()
}

#[test]
fn births_declare_every_metric_and_seq_runs_from_zero_across_the_node() {
    let mut s = Session::new(cfg(None), Table::default(), 0);
    let will = s.begin(7, 1_000);
    assert_eq!((will.kind, will.topic.as_str()), (Kind::NDeath, "spBv1.0/plant/NDEATH/gw-1"));
    let out = s.on_connack(1, 1_000);
    assert_eq!(kinds(&out), [Kind::NBirth], "no device known yet");
    let nbirth = decode(&out[0]);
    assert_eq!(nbirth.seq, Some(0));
    assert_eq!(bd_seq_of(&nbirth), bd_seq_of(&decode(&will)), "NBIRTH and NDEATH share bdSeq");
    assert_eq!(bd_seq_of(&nbirth), Some(payload::metric::Value::LongValue(7)));
    let out =
        s.take(&[(1, event("press-1", 1, 500, 1.5)), (2, event("press-2", 1, 600, 0.2))], 2_000);
    assert_eq!(kinds(&out), [Kind::DBirth, Kind::DData, Kind::DBirth, Kind::DData]);
    let seqs: Vec<u64> = out.iter().map(|p| decode(p).seq.unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    let birth = decode(&out[0]);
    let data = decode(&out[1]);
    let declared: Vec<u64> = birth.metrics.iter().map(|m| m.alias.unwrap()).collect();
    assert!(birth.metrics.iter().all(|m| m.name.is_some() && m.datatype.is_some()));
    assert!(data.metrics.iter().all(|m| m.name.is_none() && declared.contains(&m.alias.unwrap())));
    assert!(data.metrics.iter().all(|m| m.timestamp == Some(500) && m.is_historical.is_none()));
    assert_eq!(out[1].topic, "spBv1.0/plant/DDATA/gw-1/press-1");
    assert_eq!(s.cursor(), 2);
    // Known metrics: no new birth; seq goes on, through 255 back to 0.
    for i in 0..300u64 {
        let out = s.take(&[(3 + i, event("press-1", 2 + i, 700 + i as i64, 1.0))], 3_000);
        assert_eq!(kinds(&out), [Kind::DData]);
        assert_eq!(decode(&out[0]).seq, Some((5 + i) % 256));
    }
}

#[test]
fn held_records_go_historical_before_live_ones_after_a_rebirth_on_every_connection() {
    let mut s = Session::new(cfg(None), Table::default(), 0);
    s.begin(0, 0);
    s.on_connack(1, 0);
    s.take(&[(1, event("press-1", 1, 100, 1.0))], 0);
    s.stored(1);
    // Handed over, never stored as sent: the connection drops and they go again.
    s.take(&[(2, event("press-1", 2, 200, 2.0))], 0);
    s.begin(1, 10);
    assert_eq!(s.cursor(), 1, "rewound to what was stored");
    let out = s.on_connack(5, 10);
    assert_eq!(kinds(&out), [Kind::NBirth, Kind::DBirth], "the known device is born again");
    let birth = decode(&out[1]);
    let accel = birth.metrics.iter().find(|m| m.name.as_deref() == Some("s1/accel_rms")).unwrap();
    assert_eq!(accel.value, Some(payload::metric::Value::DoubleValue(1.0)), "the last value");
    let out = s.take(&[(2, event("press-1", 2, 200, 2.0)), (5, event("press-1", 5, 500, 5.0))], 20);
    assert_eq!(kinds(&out), [Kind::DData]);
    assert_eq!(out[0].historical, 2, "record 2's two metrics");
    let flags: Vec<(Option<u64>, Option<bool>)> =
        decode(&out[0]).metrics.iter().map(|m| (m.timestamp, m.is_historical)).collect();
    assert_eq!(
        flags,
        [(Some(200), Some(true)), (Some(200), Some(true)), (Some(500), None), (Some(500), None)]
    );
}

#[test]
fn a_new_metric_gets_a_new_birth_first_with_a_null_value() {
    let mut s = Session::new(cfg(None), Table::default(), 0);
    s.begin(0, 0);
    s.on_connack(1, 0);
    s.take(&[(1, event("press-1", 1, 100, 1.0))], 0);
    let json = br#"{"ts_ms":200,"metric":"accel_rms","value":1,"quality":"bad","features":{"kurtosis":4}}"#;
    let r = OutboxRecord::Event {
        machine: "press-1".into(),
        sensor: "s1".into(),
        seq: 2,
        event_id: "e2".into(),
        json: json.to_vec(),
    };
    let out = s.take(&[(2, r)], 0);
    assert_eq!(kinds(&out), [Kind::DBirth, Kind::DData]);
    let birth = decode(&out[0]);
    let kurtosis = birth.metrics.iter().find(|m| m.name.as_deref() == Some("s1/kurtosis")).unwrap();
    assert_eq!((kurtosis.is_null, kurtosis.value.as_ref()), (Some(true), None));
    let quality = &decode(&out[1]).metrics[0].properties.clone().unwrap();
    assert_eq!(quality.keys, ["Quality"]);
    assert_eq!(quality.values[0].value, Some(payload::property_value::Value::IntValue(0)), "bad");
}

#[test]
fn with_a_primary_host_nothing_goes_until_its_state_is_online() {
    let mut s = Session::new(cfg(Some("scada")), Table::default(), 0);
    assert_eq!(s.state_topic().as_deref(), Some("spBv1.0/STATE/scada"));
    s.begin(0, 0);
    assert!(s.on_connack(1, 0).is_empty());
    assert!(!s.live());
    assert!(s.take(&[(1, event("press-1", 1, 100, 1.0))], 0).is_empty());
    assert_eq!(s.cursor(), 0, "nothing handed over");
    assert!(s.on_state(b"not state", 1, 0).is_empty());
    let out = s.on_state(br#"{"online":true,"timestamp":5}"#, 3, 0);
    assert_eq!(kinds(&out), [Kind::NBirth]);
    assert!(s.on_state(b"ONLINE", 3, 0).is_empty(), "born already");
    let out = s.take(&[(1, event("press-1", 1, 100, 1.0)), (3, event("press-1", 3, 300, 1.0))], 0);
    assert_eq!(out[1].historical, 2, "record 1 was held");
    assert!(s.on_state(br#"{"online":false,"timestamp":6}"#, 4, 0).is_empty());
    assert!(!s.live());
    assert!(s.take(&[(4, event("press-1", 4, 400, 1.0))], 0).is_empty());
    assert_eq!(kinds(&s.on_state(b"ONLINE", 5, 0)), [Kind::NBirth, Kind::DBirth]);
}

#[test]
fn a_rebirth_command_sends_the_births_again_with_seq_from_zero() {
    let mut s = Session::new(cfg(None), Table::default(), 0);
    s.begin(3, 0);
    assert!(s.on_ncmd(&rebirth_command(true), 1, 0).is_empty(), "not connected");
    s.on_connack(1, 0);
    s.take(&[(1, event("press-1", 1, 100, 1.0))], 0);
    assert!(s.on_ncmd(&rebirth_command(false), 2, 0).is_empty());
    assert!(s.on_ncmd(b"\xff\xff", 2, 0).is_empty(), "does not decode");
    let out = s.on_ncmd(&rebirth_command(true), 2, 0);
    assert_eq!(kinds(&out), [Kind::NBirth, Kind::DBirth]);
    assert_eq!(decode(&out[0]).seq, Some(0));
    assert_eq!(bd_seq_of(&decode(&out[0])), Some(payload::metric::Value::LongValue(3)));
}

#[test]
fn while_held_records_drain_devices_with_nothing_held_go_live_and_the_others_wait() {
    let mut s = Session::new(cfg(None), Table::default(), 0);
    s.begin(0, 0);
    // Records 1..=3 of press-1 are held; the births come with the outbox at 4.
    s.on_connack(4, 0);
    assert!(s.draining());
    assert_eq!(s.scan_due(), Some((0, 4)));
    assert_eq!(s.live_after(), None, "not before the scan");
    s.scanned(BTreeMap::from([("press-1".to_owned(), 3)]));
    assert_eq!(s.live_after(), Some(3));
    // The live reader: press-2 (nothing held) goes now, live; press-1's live record waits.
    let live = [(4, event("press-2", 1, 400, 1.0)), (5, event("press-1", 4, 500, 1.0))];
    let out = s.take_live(&live, 5, 0);
    assert_eq!(kinds(&out), [Kind::DBirth, Kind::DData]);
    assert!(out[1].topic.ends_with("/press-2") && out[1].historical == 0);
    assert_eq!(s.live_after(), Some(5));
    assert_eq!(s.table().sent_ahead, BTreeMap::from([("press-2".to_owned(), 4)]));
    // The cursor's reader: press-1's held records, historical, then its live one; press-2's
    // record sent ahead is left out.
    let head: Vec<(u64, OutboxRecord)> =
        (1..=3).map(|i| (i, event("press-1", i, i as i64 * 100, 1.0))).chain(live).collect();
    let out = s.take(&head, 0);
    assert_eq!(kinds(&out), [Kind::DBirth, Kind::DData]);
    assert!(out[1].topic.ends_with("/press-1"));
    assert_eq!(out[1].historical, 6, "three held records, two metrics each");
    let flags: Vec<Option<bool>> =
        decode(&out[1]).metrics.iter().map(|m| m.is_historical).collect();
    assert_eq!(
        flags,
        [Some(true), Some(true), Some(true), Some(true), Some(true), Some(true), None, None]
    );
    assert_eq!(s.cursor(), 5);
    assert!(!s.draining());
    assert_eq!(s.live_after(), None);
    assert!(s.table().sent_ahead.is_empty(), "passed by the cursor");
}

#[test]
fn what_was_sent_ahead_is_stored_and_not_sent_again_after_a_reconnect() {
    let mut s = Session::new(cfg(None), Table::default(), 0);
    s.begin(0, 0);
    s.on_connack(3, 0);
    s.scanned(BTreeMap::from([("press-1".to_owned(), 2)]));
    s.take_live(&[(3, event("press-2", 1, 300, 1.0))], 3, 0);
    s.stored(0);
    let stored = Table::decode(&s.table().encode());
    assert_eq!(stored.sent_ahead, BTreeMap::from([("press-2".to_owned(), 3)]));
    // A restart on the stored place: record 3 is not sent again; press-2 holds nothing.
    let mut s = Session::new(cfg(None), stored, 0);
    s.begin(1, 0);
    s.on_connack(5, 0);
    s.scanned(BTreeMap::from([("press-1".to_owned(), 2), ("press-2".to_owned(), 3)]));
    let out = s.take_live(&[(5, event("press-2", 3, 500, 1.0))], 5, 0);
    assert_eq!(kinds(&out), [Kind::DData], "press-2 was born with the node");
    assert_eq!(decode(&out[0]).metrics[0].timestamp, Some(500), "press-2 goes live");
    let head = [(1, event("press-1", 1, 100, 1.0)), (3, event("press-2", 1, 300, 1.0))];
    let out = s.take(&head, 0);
    assert_eq!(kinds(&out), [Kind::DBirth, Kind::DData]);
    assert!(out[1].topic.ends_with("/press-1"), "press-2's record 3 was sent before");
}

#[test]
fn held_records_drain_at_the_replay_rate() {
    let mut s = Session::new(SessionConfig { replay_rate: 20, ..cfg(None) }, Table::default(), 0);
    s.begin(0, 0);
    s.on_connack(100, 1_000);
    assert_eq!(s.read_budget(1_000), Some(1), "one at once");
    s.take(&[(1, event("press-1", 1, 100, 1.0))], 1_000);
    assert_eq!(s.read_budget(1_000), None);
    assert_eq!(s.read_budget(1_100), Some(2), "20 a second, a tenth of a second's worth");
    s.take(&[(2, event("press-1", 2, 200, 1.0)), (99, event("press-1", 99, 9_900, 1.0))], 1_100);
    assert!(!s.draining());
    assert_eq!(s.read_budget(1_100), Some(usize::MAX), "live records are not paced");
}

#[test]
fn the_primary_host_going_offline_after_the_births_ends_the_session() {
    let mut s = Session::new(cfg(Some("scada")), Table::default(), 0);
    s.begin(0, 0);
    s.on_connack(1, 0);
    assert!(s.on_state(br#"{"online":false,"timestamp":1}"#, 1, 0).is_empty());
    assert!(!s.take_end(), "offline before any birth: the session waits, connected");
    s.on_state(br#"{"online":true,"timestamp":2}"#, 1, 0);
    assert!(!s.take_end());
    assert!(s.on_state(br#"{"online":false,"timestamp":3}"#, 1, 0).is_empty());
    assert!(s.take_end(), "births went out: NDEATH and DISCONNECT");
    assert!(!s.take_end(), "once");
    assert!(!s.live());
}
