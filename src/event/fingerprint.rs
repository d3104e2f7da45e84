//! An event's fingerprint: 64 bits of everything but its `event_id`, which tells a duplicate (the
//! same content) from an id conflict (different content). Duplicate memories keep it across
//! restarts and versions, so its value is fixed: XXH3-64 (seed 0, the default secret) of an
//! 82-byte layout of the fields, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8, 8..16 | XXH3-64 of `machine`, of `sensor` ([`name_hash`]) |
//! | 16..24, 24..32 | `seq`, `ts_ms` |
//! | 32..40 | `clock.err_ms`, -1 when absent |
//! | 40..48 | `value`'s IEEE bits |
//! | 48..56 | `schema` |
//! | 56..80 | `samples`: `block_seq`, `from_ms`, `to_ms`; zeros when absent |
//! | 80 | `clock.state << 4 \| samples present` |
//! | 81 | `metric << 4 \| unit << 2 \| quality` |
//!
//! An event with `features` (docs/contracts.md section 12) hashes them on top: its fingerprint is
//! XXH3-64 with that 82-byte hash as the seed, of the features' presence mask (bit `i` for the
//! `i`-th feature in `Feature` order, u16 little-endian) followed by each present value's IEEE
//! bits (u64 little-endian) in that order. An event without features keeps the 82-byte hash, so
//! every fingerprint remembered before features existed stays the same, and the same `event_id`
//! with other features is an id conflict.
//!
//! The hash is computed from the ten words in registers ([`xxh3_82`]) rather than by writing the
//! layout to memory and hashing the bytes: XXH3 reads 82 bytes as 16-byte pairs at offsets 2
//! bytes off the words' boundaries, and such a read of freshly stored words waits for the stores
//! to retire (a failed store-to-load forward), which was a tenth of the rule core's time. The test
//! below checks the two against each other on arbitrary events. A caller that knows the names'
//! hashes already passes them ([`Event::fingerprint_with`]): the rule core keeps them per machine
//! and sensor.

use super::features::Features;
use super::Event;

/// XXH3-64 of a machine's or sensor's name, as the fingerprint's first two words hold it.
pub fn name_hash(name: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(name.as_bytes())
}

impl Event {
    /// The fingerprint (module docs).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint_with(name_hash(&self.machine), name_hash(&self.sensor))
    }

    /// The fingerprint, given `name_hash` of the event's machine and sensor.
    pub fn fingerprint_with(&self, machine_hash: u64, sensor_hash: u64) -> u64 {
        let (words, tail) = self.layout_words(machine_hash, sensor_hash);
        let base = xxh3_82(&words, tail);
        match &self.features {
            None => base,
            Some(f) => with_features(base, f),
        }
    }

    /// The layout as ten little-endian words and the last two bytes (byte 80 low).
    fn layout_words(&self, machine_hash: u64, sensor_hash: u64) -> ([u64; 10], u64) {
        let samples =
            self.samples.map_or([0; 3], |r| [r.block_seq, r.from_ms as u64, r.to_ms as u64]);
        let words = [
            machine_hash,
            sensor_hash,
            self.seq,
            self.ts_ms as u64,
            self.clock.err_ms.map_or(-1i64, i64::from) as u64,
            self.value.to_bits(),
            u64::from(self.schema),
            samples[0],
            samples[1],
            samples[2],
        ];
        let b80 = (self.clock.state as u64) << 4 | u64::from(self.samples.is_some());
        let b81 = (self.metric as u64) << 4 | (self.unit as u64) << 2 | self.quality as u64;
        (words, (b80 & 0xff) | (b81 & 0xff) << 8)
    }
}

/// The fingerprint of an event with features, from its 82-byte hash `base` (module docs).
fn with_features(base: u64, f: &Features) -> u64 {
    let mut bytes = [0u8; 2 + 8 * 9];
    bytes[..2].copy_from_slice(&f.mask().to_le_bytes());
    let mut n = 2;
    for (_, v) in f.iter() {
        bytes[n..n + 8].copy_from_slice(&v.to_bits().to_le_bytes());
        n += 8;
    }
    xxhash_rust::xxh3::xxh3_64_with_seed(&bytes[..n], base)
}

/// The first 96 bytes of XXH3's default secret, as little-endian words (all an 82-byte input
/// reads).
const SECRET: [u64; 12] = [
    0xbe4b_a423_396c_feb8,
    0x1cad_21f7_2c81_017c,
    0xdb97_9083_e96d_d4de,
    0x1f67_b3b7_a4a4_4072,
    0x78e5_c0cc_4ee6_79cb,
    0x2172_ffcc_7dd0_5a82,
    0x8e24_43f7_7446_08b8,
    0x4c26_3a81_e690_35e0,
    0xcb00_c391_bb52_283c,
    0xa32e_531b_8b65_d088,
    0x4ef9_0da2_9748_6471,
    0xd8ac_dea9_46ef_1938,
];
const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;

/// XXH3-64 (seed 0, default secret) of the 82 bytes `words[0..10]` then `tail`'s two bytes.
/// XXH3's path for 65..=96 bytes: the length times a prime, plus six 16-byte mixes (input
/// offsets 0, 16, 32 and, from the end, 66, 50, 34), then the avalanche.
fn xxh3_82(w: &[u64; 10], tail: u64) -> u64 {
    // The 8 bytes at offset 8k + 2: word k's upper six and word k + 1's lower two.
    let at2 = |k: usize| (w[k] >> 16) | (w[k + 1] << 48);
    let mix = |lo: u64, hi: u64, s: usize| {
        let product = u128::from(lo ^ SECRET[s]) * u128::from(hi ^ SECRET[s + 1]);
        (product as u64) ^ ((product >> 64) as u64)
    };
    let acc = 82u64
        .wrapping_mul(PRIME64_1)
        .wrapping_add(mix(w[4], w[5], 8))
        .wrapping_add(mix(at2(4), at2(5), 10))
        .wrapping_add(mix(w[2], w[3], 4))
        .wrapping_add(mix(at2(6), at2(7), 6))
        .wrapping_add(mix(w[0], w[1], 0))
        .wrapping_add(mix(at2(8), (w[9] >> 16) | (tail << 48), 2));
    let h = (acc ^ (acc >> 37)).wrapping_mul(0x1656_6791_9E37_79F9);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::features::Feature;
    use crate::event::{ClockEvidence, ClockState, Metric, Quality, SampleRef, Unit};
    use proptest::prelude::*;

    /// The fingerprint as it was computed before: the layout written out as bytes, hashed by
    /// the crate. What [`xxh3_82`] must equal.
    fn by_the_bytes(e: &Event) -> u64 {
        use xxhash_rust::xxh3::xxh3_64;
        let samples = e.samples.map_or([0; 3], |r| [r.block_seq as i64, r.from_ms, r.to_ms]);
        let words = [
            xxh3_64(e.machine.as_bytes()) as i64,
            xxh3_64(e.sensor.as_bytes()) as i64,
            e.seq as i64,
            e.ts_ms,
            e.clock.err_ms.map_or(-1, i64::from),
            e.value.to_bits() as i64,
            i64::from(e.schema),
            samples[0],
            samples[1],
            samples[2],
        ];
        let mut fixed = [0u8; 82];
        for (i, w) in words.iter().enumerate() {
            fixed[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        fixed[80] = (e.clock.state as u8) << 4 | e.samples.is_some() as u8;
        fixed[81] = (e.metric as u8) << 4 | (e.unit as u8) << 2 | e.quality as u8;
        xxh3_64(&fixed)
    }

    fn event() -> impl Strategy<Value = Event> {
        (
            ("[a-z0-9-]{1,20}", "[a-z0-9_.]{1,20}", any::<u64>(), any::<i64>()),
            (0..5usize, proptest::option::of(any::<u32>()), 0..3usize, any::<f64>()),
            (0..3usize, any::<u32>(), 0..3usize),
            proptest::option::of((any::<u64>(), any::<i64>(), any::<i64>())),
        )
            .prop_map(
                |((machine, sensor, seq, ts_ms), (cs, err_ms, m, value), (u, schema, q), s)| {
                    Event {
                        event_id: "not hashed".into(),
                        machine,
                        sensor,
                        seq,
                        ts_ms,
                        clock: ClockEvidence { state: ClockState::ALL[cs], err_ms },
                        metric: [Metric::AccelRms, Metric::AccelPeak, Metric::VelocityRms][m],
                        value,
                        unit: [Unit::G, Unit::Ms2, Unit::MmS][u],
                        schema,
                        quality: [Quality::Good, Quality::Uncertain, Quality::Bad][q],
                        samples: s.map(|(block_seq, from_ms, to_ms)| SampleRef {
                            block_seq,
                            from_ms,
                            to_ms,
                        }),
                        features: None,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn the_register_hash_is_xxh3_of_the_layout(e in event()) {
            prop_assert_eq!(e.fingerprint(), by_the_bytes(&e));
            let with = e.fingerprint_with(name_hash(&e.machine), name_hash(&e.sensor));
            prop_assert_eq!(with, e.fingerprint());
        }
    }

    fn press_7() -> Event {
        Event {
            event_id: "gw.s1.1".into(),
            machine: "press-7".into(),
            sensor: "s1".into(),
            seq: 1,
            ts_ms: 1_700_000_000_000,
            clock: ClockEvidence { state: ClockState::Synced, err_ms: Some(2) },
            metric: Metric::AccelRms,
            value: 0.7,
            unit: Unit::G,
            schema: 1,
            quality: Quality::Good,
            samples: Some(SampleRef { block_seq: 1, from_ms: 0, to_ms: 1000 }),
            features: None,
        }
    }

    /// A fingerprint kept by an earlier version still matches: a fixed event's value, as the
    /// byte layout gave it before the hash was computed in registers.
    #[test]
    fn a_known_event_keeps_its_fingerprint() {
        assert_eq!(by_the_bytes(&press_7()), KNOWN);
        assert_eq!(press_7().fingerprint(), KNOWN);
    }
    const KNOWN: u64 = 10_302_378_604_982_877_758;

    #[test]
    fn fingerprint_sees_every_field_but_the_id() {
        let e = press_7();
        let f = e.fingerprint();
        assert_eq!(Event { event_id: "other".into(), ..e.clone() }.fingerprint(), f);
        let changed = [
            Event { machine: "press-8".into(), ..e.clone() },
            Event { sensor: "s2".into(), ..e.clone() },
            Event { machine: "press-7s".into(), sensor: "1".into(), ..e.clone() },
            Event { seq: 2, ..e.clone() },
            Event { ts_ms: e.ts_ms + 1, ..e.clone() },
            Event {
                clock: ClockEvidence { state: ClockState::Holdover, err_ms: Some(2) },
                ..e.clone()
            },
            Event { clock: ClockEvidence { state: ClockState::Synced, err_ms: None }, ..e.clone() },
            Event { metric: Metric::AccelPeak, ..e.clone() },
            Event { value: 0.71, ..e.clone() },
            Event { unit: Unit::Ms2, ..e.clone() },
            Event { schema: 2, ..e.clone() },
            Event { quality: Quality::Uncertain, ..e.clone() },
            Event { samples: None, ..e.clone() },
            Event {
                samples: Some(SampleRef { block_seq: 2, from_ms: 0, to_ms: 1000 }),
                ..e.clone()
            },
        ];
        for c in &changed {
            assert_ne!(c.fingerprint(), f, "{c:?}");
        }
        let long = Event { machine: "m".repeat(200), ..e.clone() };
        assert_ne!(long.fingerprint(), f);
    }

    fn with_features(e: &Event, list: &[(Feature, f64)]) -> Event {
        Event { features: Some(Box::new(list.iter().copied().collect())), ..e.clone() }
    }

    #[test]
    fn features_change_the_fingerprint_and_none_keeps_the_old_one() {
        let e = press_7();
        let f = e.fingerprint();
        let a = with_features(&e, &[(Feature::VelocityRms, 4.62)]);
        let fa = a.fingerprint();
        assert_ne!(fa, f, "features are content");
        assert_eq!(a.fingerprint_with(name_hash("press-7"), name_hash("s1")), fa);
        let changed = [
            with_features(&e, &[(Feature::VelocityRms, 4.63)]),
            with_features(&e, &[(Feature::Kurtosis, 4.62)]),
            with_features(&e, &[(Feature::VelocityRms, 4.62), (Feature::Kurtosis, 3.0)]),
            with_features(&e, &[]),
        ];
        for c in &changed {
            assert_ne!(c.fingerprint(), fa, "{c:?}");
        }
        // Written out, the mask and the present values in feature order, seeded by the old hash.
        let mut bytes = vec![];
        bytes.extend_from_slice(&(1u16 << 2).to_le_bytes());
        bytes.extend_from_slice(&4.62f64.to_bits().to_le_bytes());
        assert_eq!(fa, xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, KNOWN));
    }
}
