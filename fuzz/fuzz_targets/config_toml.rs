//! The configuration loader (`Config::from_toml`, what `Config::load` runs on a file's text) on
//! arbitrary text; seeded with every configuration in config/ and fixtures/traces/.
//!
//! Properties: never a panic; the same text gives the same configuration; an error names the
//! file; a loaded configuration keeps the invariants the rest of the daemon relies on: its rule
//! version is computed, and every Modbus block reads 1..=125 registers and holds at least one
//! channel, every channel lies inside its block with a finite non-zero scale and a sensor name
//! used once in its source, so the block's answer always decodes into one value per channel.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use linegate::config::modbus_map::MAX_READ_REGISTERS;
use linegate::config::rule_version::rule_version;
use linegate::config::{Config, SourceConfig};

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::configs), |data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let config = match Config::from_toml(text, "fuzz.toml") {
        Ok(config) => config,
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("fuzz.toml"), "the error does not name the file: {message}");
            return;
        }
    };
    let again = Config::from_toml(text, "fuzz.toml").expect("loads the second time");
    assert_eq!(config, again, "not deterministic");
    assert_eq!(rule_version(&config), rule_version(&again));
    let _ = config.configured_sensors();
    for source in &config.source {
        let SourceConfig::Modbus(m) = source else { continue };
        assert!(!m.blocks.is_empty(), "a Modbus source without blocks");
        let mut sensors = BTreeSet::new();
        for block in &m.blocks {
            assert!((1..=MAX_READ_REGISTERS).contains(&block.count), "count {}", block.count);
            assert!(!block.channels.is_empty(), "a block without channels");
            for c in &block.channels {
                assert!(c.offset + c.value_type.registers() <= block.count, "{c:?} outside");
                assert!(c.scale.is_finite() && c.scale != 0.0, "scale {}", c.scale);
                assert!(sensors.insert(c.sensor.clone()), "sensor {} twice", c.sensor);
            }
            let answer = vec![0x7fff; usize::from(block.count)];
            let values = block.decode(&answer).expect("a full answer decodes");
            assert_eq!(values.len(), block.channels.len());
        }
    }
});
