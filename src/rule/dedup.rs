//! Duplicate and id-conflict detection by `event_id` (docs/contracts.md section 5).
//!
//! The memory is bounded: an id is remembered while its event time is at or after its machine's
//! horizon (`watermark - allowed_lateness`). Older events are too late whatever they are, so an
//! entry behind its horizon is treated as absent even before the periodic sweep removes it; the
//! sweep's timing therefore never changes a decision.
//!
//! Ids are remembered by their 128-bit XXH3 hash, not as strings: no allocation per event and no
//! long-lived small strings fragmenting the heap. Two different ids share a hash with probability
//! about 2^-128 per pair (negligible for accidental collisions; ids are not treated as hostile
//! input — a sender that can forge ids can forge events). XXH3 is specified and stable across
//! versions, so a persisted memory reads back the same.
//!
//! In a snapshot the memory is one byte string of packed entries (`packed`, [`ENTRY_BYTES`]
//! each: the id's hash, the fingerprint, the event time and the machine, little-endian): a
//! checkpoint during a burst holds tens of thousands of ids, and CBOR maps of them cost a
//! hundred bytes and a microsecond each. Snapshots written before (a map `ids`) still restore.
//!
//! **Kept outside the snapshot** ([`Dedup::keep_outside`], what the daemon does): a snapshot then
//! holds no entries (`outside: true`), and the entries remembered since the last
//! [`Dedup::take_spilled`] are handed out packed, for the caller to store beside its checkpoint
//! and give back with [`Dedup::absorb`] on restore. A checkpoint during a burst then writes the
//! ids it added (36 bytes each), not the whole memory (1.6 MB for ten minutes of 48 sensors at
//! one event a second, at every checkpoint).
//!
//! **In [`SHARDS`] tables**, chosen by the id hash's top bits: a table that grows doubles, and a
//! full table swept is rebuilt into a fresh one, so the memory held for a moment is the old table
//! and the new. With one table (2^18 buckets of 48 bytes for 192 sensors and the default
//! lateness) that was 12.9 MB more at the top of a burst's RSS; with sixteen it is a sixteenth
//! of it, and each table grows only as far as its own share of the ids needs. An entry takes 40
//! bytes (the hash as two `u64`s: no 16-byte alignment).

use rustc_hash::FxHashMap;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes of one packed entry: id hash 16, fingerprint 8, event time 8, machine 4.
pub const ENTRY_BYTES: usize = 36;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    fingerprint: u64,
    ts_ms: i64,
    machine: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    New,
    Duplicate,
    Conflict,
}

/// How many tables the memory is cut into (by the top bits of an id's hash): a table's doubling
/// or rebuild holds at most a sixteenth of the memory twice at once.
pub const SHARDS: usize = 16;

/// An id's hash as a table keeps it: two `u64`s, so that an entry is 40 bytes, not 48.
type Key = [u64; 2];

fn key(id: u128) -> Key {
    [(id >> 64) as u64, id as u64]
}

fn id_of(key: &Key) -> u128 {
    (u128::from(key[0]) << 64) | u128::from(key[1])
}

fn shard_of(id: u128) -> usize {
    (id >> (128 - SHARDS.trailing_zeros())) as usize
}

/// The remembered ids, in [`SHARDS`] tables.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    shards: Vec<FxHashMap<Key, Entry>>,
}

impl Default for Table {
    fn default() -> Self {
        Table { shards: vec![FxHashMap::default(); SHARDS] }
    }
}

impl Table {
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    fn get(&self, id: u128) -> Option<&Entry> {
        self.shards[shard_of(id)].get(&key(id))
    }

    /// Inserts; the entry it replaced, if any.
    fn insert(&mut self, id: u128, entry: Entry) -> Option<Entry> {
        self.shards[shard_of(id)].insert(key(id), entry)
    }

    fn iter(&self) -> impl Iterator<Item = (u128, &Entry)> {
        self.shards.iter().flat_map(|s| s.iter().map(|(k, e)| (id_of(k), e)))
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.capacity()).sum()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Dedup {
    ids: Table,
    sweep_at: usize,
    /// Kept outside the snapshot: the entries remembered since the last `take_spilled`, packed.
    spill: Option<Vec<u8>>,
    /// Per table, the size at which a sweep of it full freed too little to be tried again at
    /// that size (0: none). Not kept in a snapshot: it only times sweeps.
    full_swept: [usize; SHARDS],
    /// The table of the last id remembered (the one that may have filled up).
    last: usize,
}

/// How a snapshot holds the memory: `packed` now, `ids` in snapshots written before, neither
/// when `outside`.
#[derive(Serialize, Deserialize)]
struct Saved {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ids: Option<FxHashMap<u128, Entry>>,
    #[serde(default, with = "serde_bytes", skip_serializing_if = "Option::is_none")]
    packed: Option<Vec<u8>>,
    sweep_at: usize,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    outside: bool,
}

impl Serialize for Dedup {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let outside = self.spill.is_some();
        let packed = (!outside).then(|| pack(&self.ids));
        Saved { ids: None, packed, sweep_at: self.sweep_at, outside }.serialize(s)
    }
}

fn pack(ids: &Table) -> Vec<u8> {
    let mut packed = Vec::with_capacity(ids.len() * ENTRY_BYTES);
    for (id, e) in ids.iter() {
        pack_one(&mut packed, id, e);
    }
    packed
}

fn pack_one(packed: &mut Vec<u8>, id: u128, e: &Entry) {
    packed.extend_from_slice(&id.to_le_bytes());
    packed.extend_from_slice(&e.fingerprint.to_le_bytes());
    packed.extend_from_slice(&e.ts_ms.to_le_bytes());
    packed.extend_from_slice(&e.machine.to_le_bytes());
}

impl<'de> Deserialize<'de> for Dedup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dedup, D::Error> {
        let saved = Saved::deserialize(d)?;
        let ids = match (saved.ids, saved.packed) {
            (Some(ids), None) => {
                let mut table = Table::default();
                for (id, entry) in ids {
                    table.insert(id, entry);
                }
                table
            }
            (None, Some(packed)) => unpack(&packed).map_err(D::Error::custom)?,
            (None, None) => Table::default(),
            (Some(_), Some(_)) => return Err(D::Error::custom("dedup: both `ids` and `packed`")),
        };
        if saved.outside && ids.len() > 0 {
            return Err(D::Error::custom("dedup: entries in a snapshot that keeps them outside"));
        }
        let spill = saved.outside.then(Vec::new);
        Ok(Dedup { ids, sweep_at: saved.sweep_at, spill, ..Dedup::default() })
    }
}

fn unpack(packed: &[u8]) -> Result<Table, String> {
    let mut ids = Table::default();
    for (id, entry) in entries(packed)? {
        if ids.insert(id, entry).is_some() {
            return Err("dedup: an id packed twice".into());
        }
    }
    Ok(ids)
}

/// The packed entries of `packed`, in order.
fn entries(packed: &[u8]) -> Result<impl Iterator<Item = (u128, Entry)> + '_, String> {
    if !packed.len().is_multiple_of(ENTRY_BYTES) {
        return Err(format!(
            "dedup: {} packed bytes are not whole entries of {ENTRY_BYTES}",
            packed.len()
        ));
    }
    Ok(packed.chunks_exact(ENTRY_BYTES).map(|e| {
        let (id, rest) = e.split_at(16);
        let (fingerprint, rest) = rest.split_at(8);
        let (ts_ms, machine) = rest.split_at(8);
        let entry = Entry {
            fingerprint: u64::from_le_bytes(fingerprint.try_into().expect("8 bytes")),
            ts_ms: i64::from_le_bytes(ts_ms.try_into().expect("8 bytes")),
            machine: u32::from_le_bytes(machine.try_into().expect("4 bytes")),
        };
        (u128::from_le_bytes(id.try_into().expect("16 bytes")), entry)
    }))
}

/// Whether `packed` reads back as packed entries (a page of the memory kept outside the
/// snapshot): what a salvage of the store checks before it keeps a page.
pub fn page_reads(packed: &[u8]) -> bool {
    entries(packed).is_ok()
}

/// Per machine, the latest event time among the packed entries of `packed` (what decides when
/// all of them are behind their horizons), in machine order.
pub fn latest_per_machine(packed: &[u8]) -> Result<Vec<(u32, i64)>, String> {
    let mut latest: std::collections::BTreeMap<u32, i64> = Default::default();
    for (_, e) in entries(packed)? {
        let t = latest.entry(e.machine).or_insert(e.ts_ms);
        *t = (*t).max(e.ts_ms);
    }
    Ok(latest.into_iter().collect())
}

impl Dedup {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.shards.iter().all(|s| s.is_empty())
    }

    /// Looks `event_id` up; `horizon(machine)` gives each machine's horizon.
    pub fn check(&self, event_id: &str, fingerprint: u64, horizon: impl Fn(u32) -> i64) -> Seen {
        self.check_key(IdKey::of(event_id), fingerprint, horizon)
    }

    /// [`Dedup::check`] with the id's key computed once by the caller.
    pub fn check_key(&self, id: IdKey, fingerprint: u64, horizon: impl Fn(u32) -> i64) -> Seen {
        match self.ids.get(id.0) {
            Some(e) if e.ts_ms >= horizon(e.machine) => {
                if e.fingerprint == fingerprint {
                    Seen::Duplicate
                } else {
                    Seen::Conflict
                }
            }
            _ => Seen::New,
        }
    }

    pub fn remember(&mut self, event_id: &str, fingerprint: u64, ts_ms: i64, machine: u32) {
        self.remember_key(IdKey::of(event_id), fingerprint, ts_ms, machine);
    }

    /// [`Dedup::remember`] with the id's key computed once by the caller.
    pub fn remember_key(&mut self, id: IdKey, fingerprint: u64, ts_ms: i64, machine: u32) {
        let (id, entry) = (id.0, Entry { fingerprint, ts_ms, machine });
        if let Some(spill) = &mut self.spill {
            pack_one(spill, id, &entry);
        }
        self.last = shard_of(id);
        self.ids.insert(id, entry);
    }

    /// From now on snapshots hold no entries: they are handed out by [`Dedup::take_spilled`]
    /// (the first time, every entry held now).
    pub fn keep_outside(&mut self) {
        if self.spill.is_none() {
            self.spill = Some(pack(&self.ids));
        }
    }

    /// Whether the entries are kept outside the snapshot.
    pub fn is_outside(&self) -> bool {
        self.spill.is_some()
    }

    /// The entries remembered since the last call, packed (empty unless kept outside).
    pub fn take_spilled(&mut self) -> Vec<u8> {
        self.spill.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Takes back entries handed out by [`Dedup::take_spilled`], oldest first (a later entry of
    /// an id replaces an earlier one, as when it was remembered).
    pub fn absorb(&mut self, packed: &[u8]) -> Result<(), String> {
        for (id, entry) in entries(packed)? {
            self.ids.insert(id, entry);
        }
        Ok(())
    }

    /// Drops entries behind their horizon once the memory has grown by half since the last
    /// sweep, and whenever the table of the last id remembered has no slot left (the next id
    /// there would double it): a table then grows only when what the horizons hold needs it,
    /// not because the periodic sweep came late (for 192 sensors and the default lateness,
    /// 2^18 buckets in all instead of 2^19). The slots of erased ids are not free for new ones
    /// until a table is rebuilt, so such a sweep rebuilds that table at its size (a sixteenth of
    /// the memory held twice for the moment, [`SHARDS`]); one that frees less than an eighth is
    /// not tried again at that size. Sweeps stay amortised O(1) per event.
    pub fn maybe_sweep(&mut self, horizon: impl Fn(u32) -> i64) {
        let last = self.last;
        let shard = &self.ids.shards[last];
        let before = shard.len();
        // `capacity` is the ids held plus the slots left for new ones.
        let full = before >= shard.capacity() && before != self.full_swept[last];
        let periodic = self.ids.len() >= self.sweep_at.max(1024);
        if !periodic && !full {
            return;
        }
        let keep = |_: &Key, e: &mut Entry| e.ts_ms >= horizon(e.machine);
        if periodic {
            self.ids.shards.iter_mut().for_each(|s| s.retain(keep));
            self.full_swept = [0; SHARDS];
            let kept = self.ids.len();
            self.sweep_at = kept + kept / 2;
        }
        if full {
            let shard = &mut self.ids.shards[last];
            shard.retain(keep);
            let kept = shard.len();
            self.full_swept[last] = 0;
            if kept * 8 > before * 7 {
                self.full_swept[last] = before;
            } else {
                let mut fresh = FxHashMap::with_capacity_and_hasher(kept, Default::default());
                fresh.extend(shard.drain());
                *shard = fresh;
            }
        }
    }
}

/// An `event_id` as the memory knows it: its 128-bit XXH3 hash. Computed once per event, for
/// the look-up and then the remembering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdKey(u128);

impl IdKey {
    pub fn of(event_id: &str) -> IdKey {
        IdKey(xxhash_rust::xxh3::xxh3_128(event_id.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_conflict_and_horizon() {
        let mut d = Dedup::default();
        let open = |_: u32| i64::MIN;
        assert_eq!(d.check("a.s.1", 7, open), Seen::New);
        d.remember("a.s.1", 7, 1_000, 0);
        assert_eq!(d.check("a.s.1", 7, open), Seen::Duplicate);
        assert_eq!(d.check("a.s.1", 8, open), Seen::Conflict);
        assert_eq!(d.check("a.s.2", 7, open), Seen::New);
        // Behind its machine's horizon an entry counts as absent, swept or not.
        assert_eq!(d.check("a.s.1", 7, |_| 1_001), Seen::New);
    }

    #[test]
    fn a_snapshot_packs_every_entry_and_reads_back_the_same() {
        let mut d = Dedup::default();
        for i in 0..100i64 {
            d.remember(&format!("m.s.{i}"), i as u64 * 7, 1_000 + i, (i % 3) as u32);
        }
        let bytes = crate::records::snapshot::encode(&d);
        assert!(bytes.len() < 100 * ENTRY_BYTES + 64, "{} bytes", bytes.len());
        let back: Dedup = crate::records::snapshot::decode(&bytes).unwrap();
        assert_eq!(back.ids, d.ids);
        assert_eq!(back.sweep_at, d.sweep_at);
        // The map of snapshots written before packing still reads.
        #[derive(Serialize)]
        struct Before<'a> {
            ids: &'a FxHashMap<u128, Entry>,
            sweep_at: usize,
        }
        let ids: FxHashMap<u128, Entry> = d.ids.iter().map(|(id, e)| (id, *e)).collect();
        let before = crate::records::snapshot::encode(&Before { ids: &ids, sweep_at: d.sweep_at });
        let back: Dedup = crate::records::snapshot::decode(&before).unwrap();
        assert_eq!(back.ids, d.ids);
    }

    #[test]
    fn packed_bytes_that_are_not_whole_entries_or_repeat_an_id_are_refused() {
        let mut d = Dedup::default();
        d.remember("m.s.1", 1, 1_000, 0);
        let packed = pack(&d.ids);
        assert!(unpack(&packed[..35]).unwrap_err().contains("35 packed bytes"));
        let twice = [packed.clone(), packed].concat();
        assert_eq!(unpack(&twice).unwrap_err(), "dedup: an id packed twice");
    }

    /// Kept outside, the snapshot holds no entry, and the spilled pages absorbed in order give
    /// back the same memory (a later entry of an id wins, as when it was remembered).
    #[test]
    fn entries_kept_outside_come_back_from_their_pages() {
        let mut d = Dedup::default();
        d.remember("m.s.0", 1, 900, 0);
        d.keep_outside();
        let mut pages = vec![d.take_spilled()];
        assert_eq!(pages[0].len(), ENTRY_BYTES, "what was held when it began");
        for i in 1..50i64 {
            d.remember(&format!("m.s.{i}"), i as u64, 1_000 + i, (i % 2) as u32);
            if i % 20 == 0 {
                pages.push(d.take_spilled());
            }
        }
        d.remember("m.s.3", 99, 5_000, 1);
        pages.push(d.take_spilled());
        assert!(d.take_spilled().is_empty());
        let bytes = crate::records::snapshot::encode(&d);
        assert!(bytes.len() < 40, "{} bytes", bytes.len());
        let mut back: Dedup = crate::records::snapshot::decode(&bytes).unwrap();
        assert!(back.is_empty() && back.is_outside());
        for p in &pages {
            back.absorb(p).unwrap();
        }
        assert_eq!(back.ids, d.ids);
        assert_eq!(back.check("m.s.3", 99, |_| i64::MIN), Seen::Duplicate);
        assert_eq!(latest_per_machine(&pages[1]).unwrap(), vec![(0, 1_020), (1, 1_019)]);
        assert!(back.absorb(&pages[1][..10]).is_err());
        assert!(page_reads(&pages[1]) && !page_reads(&pages[1][..10]));
    }

    /// An entry takes 40 bytes of a table, not the 48 of a 16-byte-aligned `u128` key.
    #[test]
    fn an_entry_takes_forty_bytes() {
        assert_eq!(std::mem::size_of::<(Key, Entry)>(), 40);
        let id = 0xfedc_ba98_7654_3210_0123_4567_89ab_cdefu128;
        assert_eq!(id_of(&key(id)), id);
        assert_eq!(shard_of(id), 15);
        assert_eq!(shard_of(1), 0);
    }

    #[test]
    fn sweep_keeps_what_is_inside_the_horizon() {
        let mut d = Dedup::default();
        for i in 0..3_000i64 {
            d.remember(&format!("m.s.{i}"), 0, i, (i % 2) as u32);
        }
        // machine 0 forgets before 2_000, machine 1 keeps everything
        d.maybe_sweep(|m| if m == 0 { 2_000 } else { i64::MIN });
        assert_eq!(d.len(), 1_500 + 500);
        assert_eq!(d.check("m.s.1999", 0, |_| i64::MIN), Seen::Duplicate);
        assert_eq!(d.check("m.s.1998", 0, |_| i64::MIN), Seen::New);
    }

    /// 3 000 ids inside a sliding horizon, about 190 in each of the sixteen tables: the
    /// periodic sweep alone lets the memory reach 4 500 and doubles every table to 512 buckets
    /// (7 168 slots in all); sweeping a full table keeps those whose share fits at 256 (5 290
    /// slots in all here).
    #[test]
    fn a_full_table_is_swept_before_it_doubles() {
        let mut d = Dedup::default();
        for i in 0..100_000i64 {
            d.remember(&format!("m.s.{i}"), 0, i, 0);
            d.maybe_sweep(|_| i - 3_000);
            assert!(d.len() <= 4_500, "{i}: {}", d.len());
        }
        assert!(d.ids.capacity() < 6_000, "the tables grew to {}", d.ids.capacity());
        assert!(d.len() >= 3_000, "every id inside the horizon is kept");
        assert_eq!(d.check("m.s.97001", 0, |_| 97_000), Seen::Duplicate);
    }

    /// When the horizon holds the whole table, a full sweep frees nothing and the table grows
    /// as before; the next fill of the same size does not sweep again.
    #[test]
    fn a_full_sweep_that_frees_nothing_lets_the_table_grow() {
        let mut d = Dedup::default();
        for i in 0..20_000i64 {
            d.remember(&format!("m.s.{i}"), 0, i, 0);
            d.maybe_sweep(|_| i64::MIN);
        }
        assert_eq!(d.len(), 20_000);
    }
}
