//! The FUSE side: each request of the kernel carried out on the [`Model`] under one lock. Every
//! request after the cut fails with EIO (none should come: the writer was killed first).

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::model::{Model, Node};

/// How long the kernel may cache names and attributes: only this filesystem changes them.
const TTL: Duration = Duration::from_secs(60);

/// The filesystem handed to fuser; the harness keeps another handle on the same model.
pub struct PowerCutFs(pub Arc<Mutex<Model>>);

impl PowerCutFs {
    /// The model, unless power is off.
    fn model(&self) -> Result<MutexGuard<'_, Model>, Errno> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.cut {
            return Err(Errno::EIO);
        }
        Ok(m)
    }
}

fn errno(e: i32) -> Errno {
    Errno::from_i32(e)
}

fn attr(ino: u64, node: &Node) -> FileAttr {
    let (kind, size, perm, nlink) = match node {
        Node::File { data, mode, nlink } => {
            (FileType::RegularFile, data.len() as u64, *mode, *nlink)
        }
        Node::Dir { mode, .. } => (FileType::Directory, 0, *mode, 2),
    };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        // Timestamps are not modelled.
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: perm as u16,
        nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn kind(node: &Node) -> FileType {
    match node {
        Node::File { .. } => FileType::RegularFile,
        Node::Dir { .. } => FileType::Directory,
    }
}

/// Replies with the entry of `ino`, or the error.
fn entry(m: &Model, r: Result<u64, i32>, reply: ReplyEntry) {
    match r.and_then(|ino| m.node(ino).map(|n| attr(ino, n))) {
        Ok(a) => reply.entry(&TTL, &a, Generation(0)),
        Err(e) => reply.error(errno(e)),
    }
}

fn empty(r: Result<(), i32>, reply: ReplyEmpty) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

/// Unwraps the model or replies EIO and returns.
macro_rules! model {
    ($self:ident, $reply:ident) => {
        match $self.model() {
            Ok(m) => m,
            Err(e) => return $reply.error(e),
        }
    };
}

impl Filesystem for PowerCutFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let m = model!(self, reply);
        let r = m.lookup(parent.0, name);
        entry(&m, r, reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let m = model!(self, reply);
        match m.node(ino.0) {
            Ok(n) => reply.attr(&TTL, &attr(ino.0, n)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut m = model!(self, reply);
        let r = size
            .map_or(Ok(()), |s| m.set_len(ino.0, s))
            .and_then(|()| mode.map_or(Ok(()), |md| m.set_mode(ino.0, md)))
            .and_then(|()| m.node(ino.0).map(|n| attr(ino.0, n)));
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut m = model!(self, reply);
        let node = Node::Dir { entries: Default::default(), mode: mode & !umask & 0o7777 };
        let r = m.create(parent.0, name, node);
        entry(&m, r, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut m = model!(self, reply);
        empty(m.remove(parent.0, name, false), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut m = model!(self, reply);
        empty(m.remove(parent.0, name, true), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut m = model!(self, reply);
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            return reply.error(Errno::EINVAL);
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        empty(m.rename(parent.0, name, newparent.0, newname, noreplace), reply);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut m = model!(self, reply);
        let r = m.link(ino.0, newparent.0, newname).map(|()| ino.0);
        entry(&m, r, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut m = model!(self, reply);
        match m.node(ino.0) {
            Ok(_) => {
                m.handles += 1;
                reply.opened(FileHandle(0), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut m = model!(self, reply);
        m.handles += 1;
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Counted after the cut too: the cut waits for these.
        self.0.lock().unwrap_or_else(|p| p.into_inner()).handles -= 1;
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).handles -= 1;
        reply.ok();
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let m = model!(self, reply);
        match m.read(ino.0, offset, size) {
            Ok(d) => reply.data(d),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut m = model!(self, reply);
        match m.write(ino.0, offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut m = model!(self, reply);
        empty(m.sync_file(ino.0), reply);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let m = model!(self, reply);
        let list = match m.list(ino.0) {
            Ok(l) => l,
            Err(e) => return reply.error(errno(e)),
        };
        let dots =
            [(".".into(), ino.0, FileType::Directory), ("..".into(), ino.0, FileType::Directory)];
        let named = list
            .into_iter()
            .filter_map(|(name, child)| m.node(child).ok().map(|n| (name, child, kind(n))));
        for (i, (name, child, k)) in dots.into_iter().chain(named).enumerate().skip(offset as usize)
        {
            if reply.add(INodeNo(child), i as u64 + 1, k, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut m = model!(self, reply);
        empty(m.sync_dir(ino.0), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // A roomy disk: 64 GiB free in 4 KiB blocks.
        reply.statfs(1 << 24, 1 << 24, 1 << 24, 1 << 20, 1 << 20, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut m = model!(self, reply);
        let node = Node::File { data: Vec::new(), mode: mode & !umask & 0o7777, nlink: 1 };
        match m.create(parent.0, name, node).and_then(|ino| m.node(ino).map(|n| attr(ino, n))) {
            Ok(a) => {
                m.handles += 1;
                reply.created(&TTL, &a, Generation(0), FileHandle(0), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(e)),
        }
    }
}
