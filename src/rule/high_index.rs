//! One machine's high events, ordered by key (event time, then event id): the index an incident
//! book counts windows in.
//!
//! A deque kept sorted rather than a `BTreeMap`: events arrive nearly in time order, so a new
//! key is almost always the last (a push at the back) or a few places before it; the oldest
//! leave from the front as the watermark passes them; and a range is two binary searches and a
//! contiguous walk. A tree paid a descent of key comparisons for every insertion, a fifth of the
//! rule core's instructions for a machine above threshold. In a snapshot the index is the same
//! map as the tree's (key to item), so snapshots of either read back as either.

use std::collections::VecDeque;
use std::ops::Range;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::incidents::{Item, Key};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HighIndex {
    /// Ascending by key, keys distinct.
    entries: VecDeque<(Key, Item)>,
}

impl HighIndex {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Inserts `item` under `key`, replacing the item of an equal key.
    pub fn insert(&mut self, key: Key, item: Item) {
        if self.entries.back().is_none_or(|(last, _)| *last < key) {
            self.entries.push_back((key, item));
            return;
        }
        let i = self.entries.partition_point(|(k, _)| *k < key);
        match self.entries.get_mut(i) {
            Some((k, v)) if *k == key => *v = item,
            _ => self.entries.insert(i, (key, item)),
        }
    }

    pub fn get(&self, key: &Key) -> Option<&Item> {
        let i = self.entries.partition_point(|(k, _)| k < key);
        self.entries.get(i).filter(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The entries with keys in `keys`, ascending.
    pub fn range(&self, keys: Range<Key>) -> impl DoubleEndedIterator<Item = &(Key, Item)> {
        let lo = self.entries.partition_point(|(k, _)| *k < keys.start);
        let hi = self.entries.partition_point(|(k, _)| *k < keys.end).max(lo);
        self.entries.range(lo..hi)
    }

    pub fn first_key(&self) -> Option<&Key> {
        self.entries.front().map(|(k, _)| k)
    }

    pub fn last_key(&self) -> Option<&Key> {
        self.entries.back().map(|(k, _)| k)
    }

    pub fn pop_first(&mut self) -> Option<(Key, Item)> {
        self.entries.pop_front()
    }

    /// Every entry, ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Key, &Item)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl Serialize for HighIndex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for HighIndex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HighIndex, D::Error> {
        let map = std::collections::BTreeMap::<Key, Item>::deserialize(d)?;
        Ok(HighIndex { entries: map.into_iter().collect() })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::event::{ClockEvidence, ClockState, Quality};
    use crate::rule::alert::EvidenceItem;

    fn item(t: i64, id: &str) -> Item {
        Arc::new(EvidenceItem {
            event_id: id.into(),
            sensor: "s1".into(),
            seq: 1,
            ts_ms: t,
            value: 1.0,
            unit: crate::event::features::MeasureUnit::G,
            quality: Quality::Good,
            clock: ClockEvidence { state: ClockState::Synced, err_ms: None },
            samples: None,
        })
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(i64, u8),
        PopFirst,
        Range(i64, i64),
        Get(i64, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..40i64, 0..4u8).prop_map(|(t, id)| Op::Insert(t, id)),
            1 => Just(Op::PopFirst),
            1 => (0..45i64, 0..45i64).prop_map(|(a, b)| Op::Range(a, b)),
            1 => (0..40i64, 0..4u8).prop_map(|(t, id)| Op::Get(t, id)),
        ]
    }

    fn key(t: i64, id: u8) -> Key {
        (t, Some(Arc::from(format!("e{id}").as_str())))
    }

    proptest! {
        /// Every operation answers as a `BTreeMap` does, and a snapshot reads back as the tree
        /// and from the tree's bytes.
        #[test]
        fn the_index_behaves_as_a_btree_map(ops in proptest::collection::vec(op(), 0..80)) {
            let (mut index, mut model) = (HighIndex::default(), BTreeMap::<Key, Item>::new());
            for op in ops {
                match op {
                    Op::Insert(t, id) => {
                        let v = item(t, &format!("e{id}"));
                        index.insert(key(t, id), v.clone());
                        model.insert(key(t, id), v);
                    }
                    Op::PopFirst => prop_assert_eq!(index.pop_first(), model.pop_first()),
                    Op::Range(a, b) => {
                        let (lo, hi) = ((a, None), (b, None));
                        let got: Vec<_> = index.range(lo.clone()..hi.clone()).cloned().collect();
                        let want: Vec<_> = if lo <= hi {
                            model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone())).collect()
                        } else {
                            Vec::new()
                        };
                        prop_assert_eq!(got, want);
                    }
                    Op::Get(t, id) => prop_assert_eq!(index.get(&key(t, id)), model.get(&key(t, id))),
                }
                prop_assert_eq!(index.len(), model.len());
                prop_assert_eq!(index.first_key(), model.first_key_value().map(|(k, _)| k));
                prop_assert_eq!(index.last_key(), model.last_key_value().map(|(k, _)| k));
                prop_assert!(index.iter().eq(model.iter()));
            }
            let bytes = crate::records::snapshot::encode(&index);
            prop_assert_eq!(&bytes, &crate::records::snapshot::encode(&model));
            let back: HighIndex = crate::records::snapshot::decode(&bytes).unwrap();
            prop_assert_eq!(back, index);
        }
    }
}
