//! The forwarding keys of `[mqtt]` (issue 4): session, security and pace. Host, port and prefix
//! stay in `mod.rs` with the contract's keys.

use std::path::PathBuf;

use serde::Deserialize;

use super::{duration::parse_ms, ConfigError, Ctx};

/// `[mqtt.tls]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMqttTls {
    pub(super) ca_file: Option<PathBuf>,
    pub(super) cert_file: Option<PathBuf>,
    pub(super) key_file: Option<PathBuf>,
}

/// The forwarding keys of `[mqtt]` as written (see [`MqttForwardConfig`] for their meaning).
#[derive(Debug, Default)]
pub(super) struct RawMqttForward {
    pub(super) client_id: Option<String>,
    pub(super) keep_alive: Option<String>,
    pub(super) username: Option<String>,
    pub(super) password_file: Option<PathBuf>,
    pub(super) tls: Option<RawMqttTls>,
    pub(super) max_packet: Option<i64>,
    pub(super) inflight: Option<i64>,
    pub(super) inflight_bytes: Option<i64>,
    pub(super) replay_rate: Option<i64>,
}

/// TLS to the broker (rustls): the CA to trust (pinned: the system roots are not used) and an
/// optional client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttTls {
    pub ca_file: PathBuf,
    /// Both or neither of `cert_file` and `key_file`.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// How the forwarder talks to the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttForwardConfig {
    /// MQTT client id; default `linegate-{gateway.id}` (filled in by the forwarder when `None`).
    pub client_id: Option<String>,
    /// Key `keep_alive`, default `"30s"`; 5 s ..= 18 h.
    pub keep_alive_ms: i64,
    pub username: Option<String>,
    /// A file holding the password, or a bare name looked up in `$CREDENTIALS_DIRECTORY`
    /// (systemd `LoadCredential=`). Must not be readable by group or others.
    pub password_file: Option<PathBuf>,
    pub tls: Option<MqttTls>,
    /// Largest MQTT packet either way, bytes; default 256 KiB; 4 KiB ..= 256 MiB.
    pub max_packet: usize,
    /// PUBLISHes awaiting PUBACK, at most; default 64; 1 ..= 65535.
    pub inflight: u16,
    /// Payload bytes awaiting PUBACK above which only alerts are published (so an alert does
    /// not queue behind a window of raw frames); default 128 KiB; 4 KiB ..= 256 MiB.
    pub inflight_bytes: usize,
    /// Backlog records per second after an outage or restart (also the pace of the Sparkplug
    /// view's held records); 0 = unpaced; default 2000.
    pub replay_rate: u32,
}

impl Default for MqttForwardConfig {
    fn default() -> Self {
        MqttForwardConfig {
            client_id: None,
            keep_alive_ms: 30_000,
            username: None,
            password_file: None,
            tls: None,
            max_packet: 256 * 1024,
            inflight: 64,
            inflight_bytes: 128 * 1024,
            replay_rate: 2000,
        }
    }
}

impl Ctx<'_> {
    pub(super) fn validate_mqtt_forward(
        &self,
        raw: RawMqttForward,
    ) -> Result<MqttForwardConfig, ConfigError> {
        let d = MqttForwardConfig::default();
        let int = |key: &str, v: Option<i64>, lo: i64, hi: i64, default: i64| match v {
            None => Ok(default),
            Some(x) if (lo..=hi).contains(&x) => Ok(x),
            Some(x) => {
                Err(self.err(format!("mqtt.{key}"), format!("must be in {lo}..={hi}, got {x}")))
            }
        };
        if let Some(id) = &raw.client_id {
            if id.is_empty()
                || id.len() > 128
                || id.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(self.err(
                    "mqtt.client_id",
                    format!("must be 1..=128 printable characters without spaces, got {id:?}"),
                ));
            }
        }
        let keep_alive_ms = match raw.keep_alive {
            None => d.keep_alive_ms,
            Some(t) => {
                let ms = parse_ms(&t).map_err(|r| self.err("mqtt.keep_alive", r))?;
                if !(5_000..=65_535_000).contains(&ms) || ms % 1000 != 0 {
                    return Err(self.err(
                        "mqtt.keep_alive",
                        format!("must be whole seconds in 5s..=65535s, got {t:?}"),
                    ));
                }
                ms
            }
        };
        if raw.password_file.is_some() && raw.username.is_none() {
            return Err(self.err("mqtt.password_file", "needs mqtt.username"));
        }
        let tls = match raw.tls {
            None => None,
            Some(t) => {
                let ca_file = t.ca_file.ok_or_else(|| {
                    self.err("mqtt.tls.ca_file", "missing; TLS pins the broker's CA")
                })?;
                let client_cert = match (t.cert_file, t.key_file) {
                    (None, None) => None,
                    (Some(c), Some(k)) => Some((c, k)),
                    (Some(_), None) => {
                        return Err(
                            self.err("mqtt.tls.key_file", "missing; cert_file needs its key_file")
                        )
                    }
                    (None, Some(_)) => {
                        return Err(
                            self.err("mqtt.tls.cert_file", "missing; key_file needs its cert_file")
                        )
                    }
                };
                Some(MqttTls { ca_file, client_cert })
            }
        };
        let max_packet =
            int("max_packet", raw.max_packet, 4096, 256 << 20, d.max_packet as i64)? as usize;
        let inflight = int("inflight", raw.inflight, 1, 65_535, i64::from(d.inflight))? as u16;
        let inflight_bytes =
            int("inflight_bytes", raw.inflight_bytes, 4096, 256 << 20, d.inflight_bytes as i64)?
                as usize;
        let replay_rate =
            int("replay_rate", raw.replay_rate, 0, 1_000_000, i64::from(d.replay_rate))? as u32;
        Ok(MqttForwardConfig {
            client_id: raw.client_id,
            keep_alive_ms,
            username: raw.username,
            password_file: raw.password_file,
            tls,
            max_packet,
            inflight,
            inflight_bytes,
            replay_rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn load(mqtt: &str) -> Result<Config, String> {
        let text = format!("[gateway]\nid = \"gw\"\n[mqtt]\n{mqtt}\n");
        Config::from_toml(&text, "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn forwarding_keys_parse_with_defaults() {
        let c = load("").unwrap().mqtt.forward;
        assert_eq!(c.max_packet, 262_144);
        assert_eq!(c.keep_alive_ms, 30_000);
        let c = load(
            "client_id = \"gw-1\"\nkeep_alive = \"10s\"\nusername = \"u\"\npassword_file = \"pw\"\n\
             max_packet = 65536\ninflight = 8\ninflight_bytes = 8192\nreplay_rate = 0\n\
             [mqtt.tls]\nca_file = \"ca.pem\"\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n",
        )
        .unwrap()
        .mqtt
        .forward;
        assert_eq!(c.client_id.as_deref(), Some("gw-1"));
        assert_eq!(
            (c.keep_alive_ms, c.max_packet, c.inflight, c.inflight_bytes, c.replay_rate),
            (10_000, 65_536, 8, 8192, 0)
        );
        assert!(c.tls.unwrap().client_cert.is_some());
    }

    #[test]
    fn bad_forwarding_keys_name_key_and_reason() {
        for (text, key) in [
            ("max_packet = 10", "mqtt.max_packet"),
            ("inflight = 0", "mqtt.inflight"),
            ("inflight_bytes = 100", "mqtt.inflight_bytes"),
            ("keep_alive = \"1s\"", "mqtt.keep_alive"),
            ("password_file = \"p\"", "mqtt.password_file"),
            ("client_id = \"a b\"", "mqtt.client_id"),
            ("[mqtt.tls]\ncert_file = \"c\"", "mqtt.tls.ca_file"),
            ("[mqtt.tls]\nca_file = \"a\"\ncert_file = \"c\"", "mqtt.tls.key_file"),
            ("[mqtt.tls]\nca = \"a\"", "mqtt.tls.ca"),
        ] {
            let e = load(text).unwrap_err();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
