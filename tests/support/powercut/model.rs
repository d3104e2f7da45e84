//! The filesystem's state: every inode as the running system sees it (the volatile view), and
//! beside it what a power cut would leave (the durable layer). Pure data, no FUSE: `fuse.rs`
//! calls these methods for each request. See the module documentation of `powercut` for the
//! model.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The root directory's inode number (FUSE's).
pub const ROOT: u64 = 1;

/// The page size at which a torn write is cut.
pub const PAGE: u64 = 4096;

/// One inode of the volatile view.
#[derive(Debug, Clone)]
pub enum Node {
    File { data: Vec<u8>, mode: u32, nlink: u32 },
    Dir { entries: BTreeMap<OsString, u64>, mode: u32 },
}

/// What changed in a file since its last fsync: below `low` only the `ranges` written; from
/// `low` on, everything (a truncation or an extension since the last fsync).
#[derive(Debug, Clone)]
struct Dirty {
    low: u64,
    ranges: Vec<(u64, u64)>,
}

impl Default for Dirty {
    fn default() -> Self {
        Dirty { low: u64::MAX, ranges: Vec::new() }
    }
}

/// A write no fsync of its file has covered yet: inode, offset, length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastWrite {
    pub ino: u64,
    pub offset: u64,
    pub len: u64,
}

/// Counts of what happened while mounted, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub writes: u64,
    pub file_syncs: u64,
    pub dir_syncs: u64,
}

/// The whole state.
#[derive(Debug)]
pub struct Model {
    pub nodes: HashMap<u64, Node>,
    next_ino: u64,
    /// A file's contents as an fsync of it last left them (absent: never synced, empty).
    durable_data: HashMap<u64, Vec<u8>>,
    /// A directory's entries as an fsync of it last left them (absent: never synced, empty).
    durable_entries: HashMap<u64, BTreeMap<OsString, u64>>,
    dirty: HashMap<u64, Dirty>,
    /// Per file, its newest write since its last fsync, numbered in the order of all writes.
    unsynced: HashMap<u64, (u64, LastWrite)>,
    pub counts: Counts,
    /// Power is off: every request fails with EIO.
    pub cut: bool,
    /// Files and directories open through the mount: the kernel releases them after the
    /// process closed them (or died), asynchronously; the cut waits for that before unmounting.
    pub handles: i64,
}

/// An errno.
pub type Errno = i32;

impl Model {
    /// The state of a directory tree on disk: every file and directory durable as it is.
    pub fn load(backing: &Path) -> io::Result<Model> {
        let mut m = Model {
            nodes: HashMap::new(),
            next_ino: ROOT + 1,
            durable_data: HashMap::new(),
            durable_entries: HashMap::new(),
            dirty: HashMap::new(),
            unsynced: HashMap::new(),
            counts: Counts::default(),
            cut: false,
            handles: 0,
        };
        m.load_dir(backing, ROOT)?;
        Ok(m)
    }

    fn load_dir(&mut self, dir: &Path, ino: u64) -> io::Result<()> {
        let mut entries = BTreeMap::new();
        let mut list: Vec<_> = std::fs::read_dir(dir)?.collect::<io::Result<_>>()?;
        list.sort_by_key(|e| e.file_name());
        for e in list {
            let meta = std::fs::symlink_metadata(e.path())?;
            let child = self.next_ino;
            self.next_ino += 1;
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                self.load_dir(&e.path(), child)?;
            } else if meta.is_file() {
                let data = std::fs::read(e.path())?;
                self.durable_data.insert(child, data.clone());
                self.nodes.insert(child, Node::File { data, mode, nlink: 1 });
            } else {
                continue; // sockets, links: not modelled, not loaded
            }
            entries.insert(e.file_name(), child);
        }
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
        self.durable_entries.insert(ino, entries.clone());
        self.nodes.insert(ino, Node::Dir { entries, mode });
        Ok(())
    }

    pub fn node(&self, ino: u64) -> Result<&Node, Errno> {
        self.nodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn entries(&self, dir: u64) -> Result<&BTreeMap<OsString, u64>, Errno> {
        match self.node(dir)? {
            Node::Dir { entries, .. } => Ok(entries),
            Node::File { .. } => Err(libc::ENOTDIR),
        }
    }

    fn entries_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match self.nodes.get_mut(&dir).ok_or(libc::ENOENT)? {
            Node::Dir { entries, .. } => Ok(entries),
            Node::File { .. } => Err(libc::ENOTDIR),
        }
    }

    pub fn lookup(&self, dir: u64, name: &OsStr) -> Result<u64, Errno> {
        self.entries(dir)?.get(name).copied().ok_or(libc::ENOENT)
    }

    /// The directory's entries, in name order.
    pub fn list(&self, dir: u64) -> Result<Vec<(OsString, u64)>, Errno> {
        Ok(self.entries(dir)?.iter().map(|(n, i)| (n.clone(), *i)).collect())
    }

    /// A new file or directory named `name` in `dir` (volatile until `dir` is synced).
    pub fn create(&mut self, dir: u64, name: &OsStr, node: Node) -> Result<u64, Errno> {
        if self.entries(dir)?.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, node);
        self.entries_mut(dir)?.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// A second name for file `ino`.
    pub fn link(&mut self, ino: u64, dir: u64, name: &OsStr) -> Result<(), Errno> {
        if self.entries(dir)?.contains_key(name) {
            return Err(libc::EEXIST);
        }
        match self.nodes.get_mut(&ino).ok_or(libc::ENOENT)? {
            Node::File { nlink, .. } => *nlink += 1,
            Node::Dir { .. } => return Err(libc::EPERM),
        }
        self.entries_mut(dir)?.insert(name.to_owned(), ino);
        Ok(())
    }

    /// Removes a name (`dir_wanted`: rmdir, which wants an empty directory; else unlink, which
    /// wants a file).
    pub fn remove(&mut self, dir: u64, name: &OsStr, dir_wanted: bool) -> Result<(), Errno> {
        let ino = self.lookup(dir, name)?;
        match (self.node(ino)?, dir_wanted) {
            (Node::Dir { entries, .. }, true) if !entries.is_empty() => {
                return Err(libc::ENOTEMPTY)
            }
            (Node::Dir { .. }, false) => return Err(libc::EISDIR),
            (Node::File { .. }, true) => return Err(libc::ENOTDIR),
            _ => {}
        }
        self.entries_mut(dir)?.remove(name);
        if let Some(Node::File { nlink, .. }) = self.nodes.get_mut(&ino) {
            *nlink = nlink.saturating_sub(1);
        }
        Ok(())
    }

    /// rename(2) without flags, or with `RENAME_NOREPLACE`.
    pub fn rename(
        &mut self,
        dir: u64,
        name: &OsStr,
        new_dir: u64,
        new_name: &OsStr,
        noreplace: bool,
    ) -> Result<(), Errno> {
        let ino = self.lookup(dir, name)?;
        if let Ok(old) = self.lookup(new_dir, new_name) {
            if old == ino {
                return Ok(());
            }
            if noreplace {
                return Err(libc::EEXIST);
            }
            let is_dir = matches!(self.node(ino)?, Node::Dir { .. });
            match self.node(old)? {
                Node::Dir { entries, .. } if !is_dir || !entries.is_empty() => {
                    return Err(if is_dir { libc::ENOTEMPTY } else { libc::EISDIR })
                }
                Node::File { .. } if is_dir => return Err(libc::ENOTDIR),
                _ => {}
            }
            self.remove(new_dir, new_name, is_dir)?;
        }
        self.entries_mut(dir)?.remove(name);
        self.entries_mut(new_dir)?.insert(new_name.to_owned(), ino);
        Ok(())
    }

    fn file_mut(&mut self, ino: u64) -> Result<&mut Vec<u8>, Errno> {
        match self.nodes.get_mut(&ino).ok_or(libc::ENOENT)? {
            Node::File { data, .. } => Ok(data),
            Node::Dir { .. } => Err(libc::EISDIR),
        }
    }

    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<&[u8], Errno> {
        match self.node(ino)? {
            Node::File { data, .. } => {
                let start = (offset as usize).min(data.len());
                let end = start.saturating_add(size as usize).min(data.len());
                Ok(&data[start..end])
            }
            Node::Dir { .. } => Err(libc::EISDIR),
        }
    }

    /// A write into the volatile view; until its file's next fsync, the newest unsynced write.
    pub fn write(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Result<(), Errno> {
        let data = self.file_mut(ino)?;
        let end = offset as usize + bytes.len();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[offset as usize..end].copy_from_slice(bytes);
        self.dirty.entry(ino).or_default().ranges.push((offset, end as u64));
        self.counts.writes += 1;
        let w = LastWrite { ino, offset, len: bytes.len() as u64 };
        self.unsynced.insert(ino, (self.counts.writes, w));
        Ok(())
    }

    /// truncate(2) or ftruncate(2) to `size`, in the volatile view.
    pub fn set_len(&mut self, ino: u64, size: u64) -> Result<(), Errno> {
        self.file_mut(ino)?.resize(size as usize, 0);
        let d = self.dirty.entry(ino).or_default();
        d.low = d.low.min(size);
        Ok(())
    }

    pub fn set_mode(&mut self, ino: u64, new: u32) -> Result<(), Errno> {
        match self.nodes.get_mut(&ino).ok_or(libc::ENOENT)? {
            Node::File { mode, .. } | Node::Dir { mode, .. } => *mode = new & 0o7777,
        }
        Ok(())
    }

    /// fsync(2) or fdatasync(2) of file `ino`: its data and size become durable. Not its names.
    pub fn sync_file(&mut self, ino: u64) -> Result<(), Errno> {
        self.counts.file_syncs += 1;
        let Node::File { data, .. } = self.nodes.get(&ino).ok_or(libc::ENOENT)? else {
            return Ok(());
        };
        let d = self.dirty.remove(&ino).unwrap_or_default();
        let durable = self.durable_data.entry(ino).or_default();
        // From `low` on the file is taken whole; below it, the ranges written.
        let low = (d.low as usize).min(durable.len()).min(data.len());
        durable.truncate(low);
        durable.extend_from_slice(&data[low..]);
        for (from, to) in d.ranges {
            let (from, to) = (from as usize, (to as usize).min(low));
            if from < to {
                durable[from..to].copy_from_slice(&data[from..to]);
            }
        }
        self.unsynced.remove(&ino);
        Ok(())
    }

    /// fsync(2) of directory `ino`: its entries (creations, renames, removals) become durable.
    /// Not the data of the files they name, nor the directory's own name in its parent.
    pub fn sync_dir(&mut self, ino: u64) -> Result<(), Errno> {
        self.counts.dir_syncs += 1;
        let entries = self.entries(ino)?.clone();
        self.durable_entries.insert(ino, entries);
        Ok(())
    }

    /// The newest write that no fsync of its file has covered since.
    pub fn last_unsynced_write(&self) -> Option<LastWrite> {
        self.unsynced.values().max_by_key(|(n, _)| *n).map(|(_, w)| *w)
    }

    /// The power cut: applies to the durable layer, when `tear_at` is given and the last
    /// unsynced write crosses a page boundary, that write's bytes up to one of those boundaries
    /// (the `tear_at`-th of them, modulo their number), and returns the boundary used. The
    /// volatile view is then no longer consulted: [`Model::write_durable`] writes what is left.
    pub fn tear(&mut self, tear_at: Option<u64>) -> Option<u64> {
        let (w, pick) = (self.last_unsynced_write()?, tear_at?);
        let first = (w.offset / PAGE + 1) * PAGE;
        let end = w.offset + w.len;
        if first >= end {
            return None;
        }
        let boundaries = (end - 1 - first) / PAGE + 1;
        let cut = first + (pick % boundaries) * PAGE;
        let Ok(Node::File { data, .. }) = self.node(w.ino) else { return None };
        let from = (w.offset as usize).min(data.len());
        let to = (cut as usize).min(data.len());
        let bytes = data[from..to].to_vec();
        let durable = self.durable_data.entry(w.ino).or_default();
        if durable.len() < to {
            durable.resize(to, 0);
        }
        durable[from..to].copy_from_slice(&bytes);
        Some(cut)
    }

    /// Replaces the contents of `backing` with the durable layer: the tree of durable entries
    /// from the root, each file with its durable data.
    pub fn write_durable(&self, backing: &Path) -> io::Result<()> {
        for e in std::fs::read_dir(backing)? {
            let p = e?.path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p)?;
            } else {
                std::fs::remove_file(&p)?;
            }
        }
        self.write_dir(ROOT, backing)
    }

    fn write_dir(&self, ino: u64, path: &Path) -> io::Result<()> {
        let Some(entries) = self.durable_entries.get(&ino) else { return Ok(()) };
        for (name, child) in entries {
            let p = path.join(name);
            match self.nodes.get(child) {
                Some(Node::Dir { mode, .. }) => {
                    std::fs::create_dir(&p)?;
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
                    self.write_dir(*child, &p)?;
                }
                Some(Node::File { mode, .. }) => {
                    let empty = Vec::new();
                    std::fs::write(&p, self.durable_data.get(child).unwrap_or(&empty))?;
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
                }
                None => {}
            }
        }
        Ok(())
    }
}
