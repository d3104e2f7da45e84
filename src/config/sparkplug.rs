//! `[sparkplug]`: the gateway as a Sparkplug B edge node beside the JSON topics
//! (docs/contracts.md section 10, `crate::sparkplug`).

use serde::Deserialize;

use super::{not_identifier, Ctx, Result};
use crate::event::is_identifier;

/// `[sparkplug]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSparkplug {
    enabled: Option<bool>,
    group_id: Option<String>,
    primary_host: Option<String>,
}

/// `[sparkplug]` when `enabled = true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparkplugConfig {
    /// The Sparkplug group (`spBv1.0/{group_id}/...`); required.
    pub group_id: String,
    /// The primary host application id: nothing is published while its `STATE` is offline.
    pub primary_host: Option<String>,
}

impl Ctx<'_> {
    /// `None` when the section is absent or `enabled` is false (the other keys still checked).
    pub(super) fn validate_sparkplug(
        &self,
        raw: Option<RawSparkplug>,
    ) -> Result<Option<SparkplugConfig>> {
        let Some(raw) = raw else { return Ok(None) };
        let id = |key: &str, what: &str, v: &str| {
            if is_identifier(v) {
                Ok(())
            } else {
                Err(self.err(format!("sparkplug.{key}"), not_identifier(what, v)))
            }
        };
        if let Some(g) = &raw.group_id {
            id("group_id", "Sparkplug group id", g)?;
        }
        if let Some(h) = &raw.primary_host {
            id("primary_host", "Sparkplug primary host id", h)?;
        }
        if raw.enabled != Some(true) {
            return Ok(None);
        }
        let Some(group_id) = raw.group_id else {
            return Err(self.err(
                "sparkplug.group_id",
                "missing; with enabled = true the edge node needs its Sparkplug group",
            ));
        };
        Ok(Some(SparkplugConfig { group_id, primary_host: raw.primary_host }))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn load(section: &str) -> Result<Config, String> {
        let text = format!("[gateway]\nid = \"gw-1\"\n{section}");
        Config::from_toml(&text, "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn sparkplug_is_off_unless_enabled_and_needs_a_group() {
        assert_eq!(load("").unwrap().sparkplug, None);
        assert_eq!(load("[sparkplug]\ngroup_id = \"plant\"\n").unwrap().sparkplug, None);
        let c = load("[sparkplug]\nenabled = true\ngroup_id = \"plant\"\nprimary_host = \"scada\"")
            .unwrap()
            .sparkplug
            .unwrap();
        assert_eq!((c.group_id.as_str(), c.primary_host.as_deref()), ("plant", Some("scada")));
        let e = load("[sparkplug]\nenabled = true\n").unwrap_err();
        assert!(e.contains("sparkplug.group_id") && e.contains("missing"), "{e}");
        let e = load("[sparkplug]\nenabled = true\ngroup_id = \"a/b\"\n").unwrap_err();
        assert!(e.contains("sparkplug.group_id") && e.contains("\"a/b\""), "{e}");
        let e = load("[sparkplug]\nprimary_host = \"#\"\n").unwrap_err();
        assert!(e.contains("sparkplug.primary_host"), "{e}");
        let e = load("[sparkplug]\nenable = true\n").unwrap_err();
        assert!(e.contains("sparkplug.enable"), "{e}");
    }
}
