//! Raw lines outside sled: append-only segment files in `raw/` under the store directory.
//!
//! A journal line of at least `StoreOptions::raw_threshold` bytes (in practice the `samples`
//! lines, 12.8 KB and more) is written to the current segment, and the journal value in sled
//! holds only a [`SegmentRef`] to it (value version 3, `journal.rs`). sled then holds only small
//! records, and space comes back when a whole segment file is deleted: sled 0.34.7 never returns
//! the space of removed values, segment files do (see `retention.rs`).
//!
//! # Files
//!
//! `raw/{id:020}.seg`: the lines, back to back, nothing else (each reference carries offset,
//! length and an xxh3-64 checksum of the bytes). A segment's id is the journal position of its
//! first record, so ids grow with positions, and the records of segment `id` lie in
//! `[id, next segment's id)`. A segment is rolled when the next line would take it past
//! `StoreOptions::segment_bytes`; each [`Store::open`](super::Store::open) starts a new one at its
//! first raw line (never appends after bytes a crash may have left unreferenced).
//!
//! # Durability
//!
//! A line's bytes are written (`pwrite`) before its reference is inserted in sled. At a commit
//! the current segment is `fdatasync`ed (a rolled one is synced when it is rolled), then the
//! `raw/` directory and the store directory when a segment was created or deleted, and only then
//! does sled flush and fsync. sled's background flusher is off (`flush_every_ms(None)`), so only a
//! commit flushes sled: a committed reference never points at bytes that are not durable. (sled
//! still writes a full 8 MiB IO buffer without being asked, without a sync: after a power loss a
//! reference not yet committed can survive while its bytes did not; `Store::open` drops such
//! references at the journal's tail after the checkpoint, which were never acknowledged.)
//!
//! A reference whose bytes are missing or fail their checksum is a [`StoreError::Corrupt`] naming
//! the journal key, handled like any record that does not decode (`recovery.rs`).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The directory of the segment files, under the store directory.
pub const RAW_DIR: &str = "raw";

/// How many read handles of older segments are kept open.
const READERS: usize = 16;

/// Where a raw line lives: segment `id`, `len` bytes at `offset`, with their xxh3-64 `sum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SegmentRef {
    pub id: u64,
    pub offset: u64,
    pub len: u32,
    pub sum: u64,
}

/// The segment files of one store. Interior mutability: reads and commits take `&Store`.
#[derive(Debug)]
pub(super) struct Segments {
    dir: PathBuf,
    segment_bytes: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    writer: Option<Writer>,
    readers: HashMap<u64, Arc<File>>,
    /// A segment was created or deleted since the last sync: the directories need an fsync.
    dir_dirty: bool,
}

#[derive(Debug)]
struct Writer {
    id: u64,
    file: Arc<File>,
    len: u64,
    /// Bytes written since the last sync.
    dirty: bool,
}

/// `{dir}/{id:020}.seg`.
pub(super) fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.seg"))
}

/// The segment id a file name stands for, if it is one.
fn segment_id(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The error of an I/O step on one file.
pub(super) type FileError = (PathBuf, io::Error);

impl Segments {
    /// The segments of the store in `store_dir` (creates `raw/` if missing).
    pub(super) fn open(store_dir: &Path, segment_bytes: u64) -> Result<Segments, FileError> {
        let dir = store_dir.join(RAW_DIR);
        let created = !dir.is_dir();
        std::fs::create_dir_all(&dir).map_err(|e| (dir.clone(), e))?;
        let inner = Inner { dir_dirty: created, ..Inner::default() };
        Ok(Segments { dir, segment_bytes: segment_bytes.max(1), inner: Mutex::new(inner) })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves nothing half-done that a later call trusts:
        // the writer's length is only advanced after its write succeeded.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The directory of the segment files.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends `line`, the record at journal position `pos`, and returns where it is. Not durable
    /// until [`Segments::sync`].
    pub(super) fn append(&self, pos: u64, line: &[u8]) -> Result<SegmentRef, FileError> {
        let mut inner = self.lock();
        let len = u32::try_from(line.len()).map_err(|_| {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "line longer than 4 GiB");
            (self.dir.clone(), e)
        })?;
        let full = inner
            .writer
            .as_ref()
            .is_some_and(|w| w.len > 0 && w.len + u64::from(len) > self.segment_bytes);
        if full {
            if let Some(old) = inner.writer.take() {
                if old.dirty {
                    super::fsync::sync_data(&old.file)
                        .map_err(|e| (segment_path(&self.dir, old.id), e))?;
                }
            }
        }
        if inner.writer.is_none() {
            let path = segment_path(&self.dir, pos);
            // A file of this id can only hold lines whose references never became durable (ids
            // are first positions, and positions of durable records are never reused).
            let file = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .read(true)
                .open(&path)
                .map_err(|e| (path.clone(), e))?;
            inner.dir_dirty = true;
            inner.writer = Some(Writer { id: pos, file: Arc::new(file), len: 0, dirty: false });
        }
        let Some(w) = inner.writer.as_mut() else {
            return Err((self.dir.clone(), io::Error::other("no segment writer")));
        };
        w.file.write_all_at(line, w.len).map_err(|e| (segment_path(&self.dir, w.id), e))?;
        let r = SegmentRef { id: w.id, offset: w.len, len, sum: xxhash_rust::xxh3::xxh3_64(line) };
        w.len += u64::from(len);
        w.dirty = true;
        Ok(r)
    }

    /// Appends `bytes` (a block's encoded frame, `frames.rs`) to the segment being written, beside
    /// the lines it holds, and returns where they are; `None` when no segment is being written:
    /// frames never start one (a segment's id is the position of its first line) nor roll one
    /// (the next line does, once the segment is full). Not durable until [`Segments::sync`].
    pub(super) fn append_beside(&self, bytes: &[u8]) -> Result<Option<SegmentRef>, FileError> {
        let mut inner = self.lock();
        let Some(w) = inner.writer.as_mut() else { return Ok(None) };
        let Ok(len) = u32::try_from(bytes.len()) else { return Ok(None) };
        w.file.write_all_at(bytes, w.len).map_err(|e| (segment_path(&self.dir, w.id), e))?;
        let r = SegmentRef { id: w.id, offset: w.len, len, sum: xxhash_rust::xxh3::xxh3_64(bytes) };
        w.len += u64::from(len);
        w.dirty = true;
        Ok(Some(r))
    }

    /// Makes every appended line and every created or deleted segment durable.
    pub(super) fn sync(&self) -> Result<(), FileError> {
        let mut inner = self.lock();
        if let Some(w) = inner.writer.as_mut().filter(|w| w.dirty) {
            super::fsync::sync_data(&w.file).map_err(|e| (segment_path(&self.dir, w.id), e))?;
            w.dirty = false;
        }
        if inner.dir_dirty {
            sync_dir(&self.dir)?;
            if let Some(parent) = self.dir.parent() {
                sync_dir(parent)?;
            }
            inner.dir_dirty = false;
        }
        Ok(())
    }

    /// Ends the current segment (synced first), so that it can be deleted once unreferenced; the
    /// next raw line starts a new one.
    pub(super) fn seal(&self) -> Result<(), FileError> {
        let mut inner = self.lock();
        if let Some(w) = inner.writer.as_ref().filter(|w| w.dirty) {
            super::fsync::sync_data(&w.file).map_err(|e| (segment_path(&self.dir, w.id), e))?;
        }
        inner.writer = None;
        Ok(())
    }

    /// The line `r` names, checked against its checksum. The error says what is wrong.
    pub(super) fn read(&self, r: &SegmentRef) -> Result<Vec<u8>, String> {
        let path = segment_path(&self.dir, r.id);
        let file = self.reader(r.id).map_err(|e| format!("segment {}: {e}", path.display()))?;
        let mut buf = vec![0u8; r.len as usize];
        file.read_exact_at(&mut buf, r.offset).map_err(|e| {
            format!("segment {}: {} bytes at offset {}: {e}", path.display(), r.len, r.offset)
        })?;
        if xxhash_rust::xxh3::xxh3_64(&buf) != r.sum {
            return Err(format!(
                "segment {}: {} bytes at offset {} fail their checksum",
                path.display(),
                r.len,
                r.offset
            ));
        }
        Ok(buf)
    }

    fn reader(&self, id: u64) -> io::Result<Arc<File>> {
        let mut inner = self.lock();
        if let Some(w) = inner.writer.as_ref().filter(|w| w.id == id) {
            return Ok(w.file.clone());
        }
        if let Some(f) = inner.readers.get(&id) {
            return Ok(f.clone());
        }
        let file = Arc::new(File::open(segment_path(&self.dir, id))?);
        if inner.readers.len() >= READERS {
            inner.readers.clear();
        }
        inner.readers.insert(id, file.clone());
        Ok(file)
    }

    /// Whether the bytes `r` names exist (the file is long enough); does not read them.
    pub(super) fn present(&self, r: &SegmentRef) -> bool {
        std::fs::metadata(segment_path(&self.dir, r.id))
            .is_ok_and(|m| m.len() >= r.offset + u64::from(r.len))
    }

    /// The id of the segment being appended to, if any.
    pub(super) fn current(&self) -> Option<u64> {
        self.lock().writer.as_ref().map(|w| w.id)
    }

    /// The ids of the segment files, ascending.
    pub(super) fn ids(&self) -> Result<Vec<u64>, FileError> {
        let mut ids = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(|e| (self.dir.clone(), e))? {
            let entry = entry.map_err(|e| (self.dir.clone(), e))?;
            if let Some(id) = entry.file_name().to_str().and_then(segment_id) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Deletes segment `id` (never the current one); durable at the next [`Segments::sync`].
    pub(super) fn delete(&self, id: u64) -> Result<(), FileError> {
        let mut inner = self.lock();
        if inner.writer.as_ref().is_some_and(|w| w.id == id) {
            return Ok(());
        }
        inner.readers.remove(&id);
        let path = segment_path(&self.dir, id);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err((path, e)),
            _ => {}
        }
        inner.dir_dirty = true;
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<(), FileError> {
    File::open(dir).and_then(|d| super::fsync::sync(&d)).map_err(|e| (dir.to_path_buf(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_roll_and_fail_their_checksum_when_damaged() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Segments::open(tmp.path(), 10).unwrap();
        let a = s.append(1, b"0123456").unwrap();
        let b = s.append(2, b"abcdef").unwrap();
        let c = s.append(3, b"xy").unwrap();
        assert_eq!((a.id, b.id, c.id, c.offset), (1, 2, 2, 6), "rolled before the second line");
        s.sync().unwrap();
        assert_eq!(s.read(&b).unwrap(), b"abcdef");
        assert_eq!(s.ids().unwrap(), vec![1, 2]);
        assert!(s.present(&c));
        std::fs::write(segment_path(s.dir(), 1), b"0123457").unwrap();
        let err = s.read(&a).unwrap_err();
        assert!(err.contains("checksum"), "{err}");
        s.delete(1).unwrap();
        s.delete(2).unwrap();
        assert_eq!(s.ids().unwrap(), vec![2], "the current segment is never deleted");
        assert!(s.read(&a).unwrap_err().contains("00000000000000000001.seg"));
        assert!(!s.present(&a));
    }

    #[test]
    fn frames_go_beside_the_lines_of_the_segment_being_written_and_never_start_one() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Segments::open(tmp.path(), 10).unwrap();
        assert_eq!(s.append_beside(b"frame").unwrap(), None, "no segment is being written");
        assert_eq!(s.ids().unwrap(), Vec::<u64>::new());
        let a = s.append(5, b"line5").unwrap();
        let f = s.append_beside(b"frame-of-5").unwrap().unwrap();
        assert_eq!((f.id, f.offset, f.len), (5, 5, 10), "right after the line, past the size");
        let b = s.append(6, b"line6").unwrap();
        assert_eq!((b.id, b.offset), (6, 0), "the next line rolls the full segment");
        s.sync().unwrap();
        assert_eq!(s.read(&a).unwrap(), b"line5");
        assert_eq!(s.read(&f).unwrap(), b"frame-of-5");
        s.seal().unwrap();
        assert_eq!(s.append_beside(b"x").unwrap(), None, "a sealed segment takes no frame");
    }
}
