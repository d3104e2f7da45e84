//! A composite rule's definition: how it combines which members within which window.

use serde::{Deserialize, Serialize};

/// How a composite rule combines its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// `all_of = [A, B, ...]`: every member has held within the window.
    AllOf,
    /// `sequence = [A, B]`: `B` holds, and `A` held within the window of an instant of that
    /// incident of `B`, at or before it.
    Sequence,
}

/// A composite rule: how it combines, which rules (by name, in order), within which window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    combine: Combine,
    members: Vec<String>,
    window_ms: i64,
}

impl Spec {
    /// `all_of = members` within `window_ms`: at least one member, each named once.
    pub fn all_of(members: Vec<String>, window_ms: i64) -> Result<Self, String> {
        if members.is_empty() {
            return Err("all_of names no rule".to_string());
        }
        Self::new(Combine::AllOf, members, window_ms)
    }

    /// `sequence = [first, then]` within `window_ms`: two different rules.
    pub fn sequence(first: String, then: String, window_ms: i64) -> Result<Self, String> {
        Self::new(Combine::Sequence, vec![first, then], window_ms)
    }

    fn new(combine: Combine, members: Vec<String>, window_ms: i64) -> Result<Self, String> {
        let key = match combine {
            Combine::AllOf => "all_of",
            Combine::Sequence => "sequence",
        };
        if window_ms <= 0 {
            return Err(format!("{key}: window must be positive, got {window_ms} ms"));
        }
        for (i, m) in members.iter().enumerate() {
            if members[..i].contains(m) {
                return Err(format!("{key}: rule {m:?} is named twice"));
            }
        }
        Ok(Spec { combine, members, window_ms })
    }

    pub fn combine(&self) -> Combine {
        self.combine
    }

    /// The member rules' names, in the configured order (`[A, B]` for a sequence).
    pub fn members(&self) -> &[String] {
        &self.members
    }

    pub fn window_ms(&self) -> i64 {
        self.window_ms
    }
}
