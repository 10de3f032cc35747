//! The FUSE adapter, and the only code that knows fuser: each request is
//! decoded, handed to one logic method of `Core` (`requests.rs` and the files it
//! names), and answered; an error is logged once, here.
//!
//! A panic in a request is a bug, but it must cost one request, not the
//! mount: fuser runs each worker's loop on its own thread and ends the whole
//! session when one of them panics. So every request runs under
//! `catch_unwind` (`serve`); the unwinding drops the request's reply, which
//! fuser answers with EIO, and the panic is logged.

use std::any::Any;
use std::ffi::OsStr;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};
use rustix::fs::Timespec;

use super::edit_fs::EditFs;
use super::real_files::Set;
use super::types::{
    Backing, Done, Errno, FileAttr, FileType, Found, Kernel, Opened, Requester, Res, Served, Timed,
};

/// Looking this name up panics, in debug builds only: the tests' way to check
/// that a panic costs one request.
#[cfg(debug_assertions)]
pub const PANIC_NAME: &str = "editfs-test-panic";

const GEN: Generation = Generation(0);

/// The mount as fuser drives it.
pub struct Fuse(pub EditFs);

/// The kernel's cache, told through fuser's notifier.
pub struct Notify(pub fuser::Notifier);

impl Kernel for Notify {
    fn forget_node(&self, ino: u64) {
        // Unknown to the kernel is fine: nothing was cached.
        let _ = self.0.inval_inode(INodeNo(ino), 0, 0);
    }

    fn forget_entry(&self, parent: u64, name: &OsStr) {
        let _ = self.0.inval_entry(INodeNo(parent), name);
    }

    fn forget_attributes(&self, ino: u64) {
        let _ = self.0.inval_inode(INodeNo(ino), -1, 0);
    }

    fn store(&self, ino: u64, data: &[u8]) {
        // A node the kernel forgot meanwhile has no pages to fill: nothing lost.
        let _ = self.0.store(INodeNo(ino), 0, data);
    }
}

fn to_fuser(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.code())
}

fn kind(k: FileType) -> fuser::FileType {
    match k {
        FileType::NamedPipe => fuser::FileType::NamedPipe,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
        FileType::Directory => fuser::FileType::Directory,
        FileType::RegularFile => fuser::FileType::RegularFile,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Socket => fuser::FileType::Socket,
    }
}

fn attr(a: &FileAttr) -> fuser::FileAttr {
    fuser::FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: UNIX_EPOCH,
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: 0,
    }
}

fn requester(req: &Request) -> Requester {
    Requester {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

fn time(t: Option<TimeOrNow>) -> Option<Timespec> {
    let (tv_sec, tv_nsec) = match t? {
        TimeOrNow::Now => (0, rustix::fs::UTIME_NOW),
        TimeOrNow::SpecificTime(t) => match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos() as i64),
            Err(e) => (-(e.duration().as_secs() as i64), 0),
        },
    };
    Some(Timespec { tv_sec, tv_nsec })
}

/// What the kernel is told of how an open file is served, and its backing id.
fn fopen(served: &Served) -> (FopenFlags, Option<&fuser::BackingId>) {
    match served {
        Served::Direct => (FopenFlags::FOPEN_DIRECT_IO, None),
        Served::Fixed => (
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH,
            None,
        ),
        Served::Cached { flush: true } => (FopenFlags::FOPEN_KEEP_CACHE, None),
        Served::Cached { flush: false } => (
            FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH,
            None,
        ),
        Served::Plain => (FopenFlags::empty(), None),
        // No flush unless the daemon records a direct write at the close: its
        // writes went straight to SOURCE, so a close costs no round trip.
        Served::Passed { backing, flush } => match backing.get::<fuser::BackingId>() {
            Some(id) if *flush => (FopenFlags::empty(), Some(id)),
            Some(id) => (FopenFlags::FOPEN_NOFLUSH, Some(id)),
            None => (FopenFlags::empty(), None),
        },
    }
}

/// A reply that can carry an error.
trait Fail {
    fn fail(self, e: fuser::Errno);
}

macro_rules! fail {
    ($($reply:ty),* $(,)?) => {
        $(impl Fail for $reply {
            fn fail(self, e: fuser::Errno) {
                self.error(e)
            }
        })*
    };
}

fail!(
    ReplyAttr,
    ReplyCreate,
    ReplyData,
    ReplyDirectory,
    ReplyDirectoryPlus,
    ReplyEmpty,
    ReplyEntry,
    ReplyLseek,
    ReplyOpen,
    ReplyStatfs,
    ReplyWrite,
    ReplyXattr,
);

fn message(p: &(dyn Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// Runs one request; a panic in it is logged and the request answered EIO.
fn guard(op: &str, f: impl FnOnce()) {
    if let Err(p) = panic::catch_unwind(AssertUnwindSafe(f)) {
        log::error!(
            "bug: a {op} request panicked ({}); it was answered EIO and the mount goes on",
            message(&*p)
        );
    }
}

/// Answers `reply` with the error `e`, logged once.
fn failed(op: &str, reply: impl Fail, e: Errno) {
    log::debug!("{op}: {e:?}");
    reply.fail(to_fuser(e));
}

/// Serves one request: `logic` computes the answer (it may use the reply to
/// register a backing file), `answer` sends it.
fn serve<R: Fail, T>(
    op: &str,
    reply: R,
    logic: impl FnOnce(&R) -> Res<T>,
    answer: impl FnOnce(R, T),
) {
    guard(op, || match logic(&reply) {
        Ok(t) => answer(reply, t),
        Err(e) => failed(op, reply, e),
    });
}

/// A reply the logic sends later, maybe from a commit thread.
fn later<R: Fail + Send + 'static, T>(
    op: &'static str,
    reply: R,
    answer: impl FnOnce(R, T) + Send + 'static,
) -> Done<T> {
    Box::new(move |r| match r {
        Ok(t) => answer(reply, t),
        Err(e) => failed(op, reply, e),
    })
}

fn entry(reply: ReplyEntry, (a, ttl): Timed) {
    reply.entry(&ttl, &attr(&a), GEN);
}

fn found(reply: ReplyEntry, f: Found) {
    let (a, ttl) = f.attr;
    reply.entry_with_ttls(&ttl, &f.name_ttl, &attr(&a), GEN);
}

fn empty(reply: ReplyEmpty, (): ()) {
    reply.ok();
}

fn xattr(reply: ReplyXattr, size: u32, v: Vec<u8>) {
    if size == 0 {
        reply.size(v.len() as u32);
    } else if v.len() > size as usize {
        reply.error(fuser::Errno::ERANGE);
    } else {
        reply.data(&v);
    }
}

fn opened(reply: ReplyOpen, o: Opened) {
    match fopen(&o.served) {
        (flags, Some(id)) => reply.opened_passthrough(FileHandle(o.fh), flags, id),
        (flags, None) => reply.opened(FileHandle(o.fh), flags),
    }
}

fn register(
    reply: &impl OpensBacking,
) -> impl Fn(std::os::fd::BorrowedFd<'_>) -> std::io::Result<Backing> {
    move |fd| reply.backing(fd).map(Backing::new)
}

/// A reply that can ask the kernel for a backing id.
trait OpensBacking {
    fn backing(&self, fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<fuser::BackingId>;
}

impl OpensBacking for ReplyOpen {
    fn backing(&self, fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<fuser::BackingId> {
        self.open_backing(fd)
    }
}

impl OpensBacking for ReplyCreate {
    fn backing(&self, fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<fuser::BackingId> {
        self.open_backing(fd)
    }
}

impl Filesystem for Fuse {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        use fuser::InitFlags;
        // Pages dropped when attributes show a change; one open with O_TRUNC, not two calls;
        // lookups in one directory may run in parallel.
        let want = InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_AUTO_INVAL_DATA
            | InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_PARALLEL_DIROPS;
        if let Err(missing) = config.add_capabilities(want) {
            log::info!("the kernel lacks {missing:?}");
            let _ = config.add_capabilities(want - missing);
        }
        // The kernel then checks SOURCE's POSIX ACLs (read through getxattr)
        // with the permission bits, as for every request on SOURCE itself: a
        // directory an ACL shuts a user out of stays shut through the mount,
        // and only a file's owner may change its ACL.
        if config.add_capabilities(InitFlags::FUSE_POSIX_ACL).is_err() {
            log::warn!("the kernel cannot check POSIX ACLs: only permission bits guard the mount");
        }
        // Depth 2: SOURCE may itself be on a stacked file system (a container's
        // overlayfs); the price is that the mount cannot be a layer of one.
        let through = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
            && config.set_max_stack_depth(2).is_ok();
        if through {
            self.0.pass_through();
        } else {
            log::warn!("the kernel cannot pass files through: file data goes through the daemon");
        }
        Ok(())
    }

    /// The store's final checkpoint: the commit threads keep the store alive
    /// past the session, so its own drop would never sync the last commits.
    fn destroy(&mut self) {
        self.0.store.file_removals(true);
        if let Err(e) = self.0.store.checkpoint() {
            log::error!("checkpoint at unmount: {e}");
        }
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        #[cfg(debug_assertions)]
        if name == PANIC_NAME {
            return guard("lookup", || panic!("{PANIC_NAME} looked up"));
        }
        serve(
            "lookup",
            reply,
            |_| self.0.lookup(requester(req), parent.0, name),
            found,
        );
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        guard("forget", || self.0.forget(ino.0, nlookup));
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let logic = |_: &_| self.0.getattr_for(requester(req), ino.0, fh.map(|f| f.0));
        serve("getattr", reply, logic, |r, (a, ttl)| {
            r.attr(&ttl, &attr(&a))
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = Set {
            mode,
            owner: (uid, gid),
            size,
            times: (time(atime), time(mtime)),
        };
        let logic = |_: &_| self.0.setattr(requester(req), ino.0, fh.map(|f| f.0), set);
        serve("setattr", reply, logic, |r, (a, ttl)| {
            r.attr(&ttl, &attr(&a))
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let logic = |_: &_| self.0.readlink(ino.0);
        serve("readlink", reply, logic, |r, target| r.data(&target));
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let logic = |_: &_| {
            self.0
                .mknod(requester(req), (parent.0, name), (mode, umask), rdev)
        };
        serve("mknod", reply, logic, entry);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let logic = |_: &_| {
            self.0
                .mkdir(requester(req), (parent.0, name), (mode, umask))
        };
        serve("mkdir", reply, logic, entry);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let logic = |_: &_| self.0.unlink(requester(req), parent.0, name);
        serve("unlink", reply, logic, empty);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let logic = |_: &_| self.0.rmdir(requester(req), parent.0, name);
        serve("rmdir", reply, logic, empty);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let logic = |_: &_| {
            self.0
                .symlink(requester(req), (parent.0, link_name), target)
        };
        serve("symlink", reply, logic, entry);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (from, to) = ((parent.0, name), (newparent.0, newname));
        let logic = |_: &_| self.0.rename(requester(req), from, to, flags.bits());
        serve("rename", reply, logic, empty);
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let logic = |_: &_| self.0.link(requester(req), ino.0, (newparent.0, newname));
        serve("link", reply, logic, entry);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let logic = |r: &ReplyOpen| self.0.open(requester(req), ino.0, flags.0, &register(r));
        serve("open", reply, logic, opened);
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let done = later("read", reply, |r: ReplyData, data: Vec<u8>| r.data(&data));
        guard("read", || {
            self.0
                .read(requester(req), ino.0, fh.0, (offset, size), done)
        });
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let logic = |_: &_| self.0.write(fh.0, offset, data);
        serve("write", reply, logic, |r, n| r.written(n));
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let done = later("flush", reply, empty);
        guard("flush", || self.0.flush(requester(req), ino.0, fh.0, done));
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let done = later("release", reply, empty);
        guard("release", || {
            self.0.release(requester(req), ino.0, fh.0, done)
        });
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        serve("fsync", reply, |_| self.0.fsync(fh.0, datasync), empty);
    }

    /// ENOSYS: the kernel then opens and closes every directory itself, with
    /// no request, and keeps the listings it reads until told (`listings.rs`).
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(fuser::Errno::ENOSYS);
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        guard("readdir", || {
            let add = |i, next, k, name: &OsStr| reply.add(INodeNo(i), next, kind(k), name);
            match self.0.readdir((ino.0, req.pid()), offset, add) {
                Ok(()) => reply.ok(),
                Err(e) => failed("readdir", reply, e),
            }
        });
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        guard("readdirplus", || {
            let add = |i, next, name: &OsStr, (a, ttl): &Timed| {
                reply.add(INodeNo(i), next, name, ttl, &attr(a), GEN)
            };
            match self.0.readdirplus((ino.0, req.pid()), offset, add) {
                Ok(()) => reply.ok(),
                Err(e) => failed("readdirplus", reply, e),
            }
        });
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        serve("fsyncdir", reply, |_| self.0.fsyncdir(ino.0), empty);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        serve(
            "statfs",
            reply,
            |_| self.0.statfs(),
            |r, s| {
                r.statfs(
                    s.f_blocks,
                    s.f_bfree,
                    s.f_bavail,
                    s.f_files,
                    s.f_ffree,
                    s.f_bsize as u32,
                    s.f_namemax as u32,
                    s.f_frsize as u32,
                )
            },
        );
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let who = requester(req);
        let logic = |_: &_| self.0.setxattr(ino.0, who, name, value, flags);
        serve("setxattr", reply, logic, empty);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let answer = move |r, v| xattr(r, size, v);
        serve("getxattr", reply, |_| self.0.getxattr(ino.0, name), answer);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let answer = move |r, v| xattr(r, size, v);
        serve("listxattr", reply, |_| self.0.listxattr(ino.0), answer);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let who = requester(req);
        serve(
            "removexattr",
            reply,
            |_| self.0.removexattr(ino.0, who, name),
            empty,
        );
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let logic = |_: &_| self.0.access(ino.0, mask.bits() as u32);
        serve("access", reply, logic, empty);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let logic = |r: &ReplyCreate| {
            let who = requester(req);
            self.0
                .create(who, (parent.0, name), (mode, umask), flags, &register(r))
        };
        serve("create", reply, logic, |r, ((a, ttl), o)| {
            let a = attr(&a);
            match fopen(&o.served) {
                (flags, Some(id)) => {
                    r.created_passthrough(&ttl, &a, GEN, FileHandle(o.fh), flags, id)
                }
                (flags, None) => r.created(&ttl, &a, GEN, FileHandle(o.fh), flags),
            }
        });
    }

    /// No file here takes an ioctl. Python asks every file it opens whether it is
    /// a terminal (TCGETS): ENOTTY is the native answer, given quietly, where
    /// fuser's default would log a warning per open.
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(fuser::Errno::ENOTTY);
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let logic = |_: &_| self.0.fallocate(fh.0, (offset, length), mode);
        serve("fallocate", reply, logic, empty);
    }

    /// Every file here is always ready, as a file on disk is: poll(2) and select(2)
    /// get the kernel's default answer for files, without a warning per call.
    fn poll(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _ph: fuser::PollNotifier,
        _events: fuser::PollEvents,
        _flags: fuser::PollFlags,
        reply: fuser::ReplyPoll,
    ) {
        use fuser::PollEvents as E;
        reply.poll(E::POLLIN | E::POLLOUT | E::POLLRDNORM | E::POLLWRNORM);
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let logic = |_: &_| self.0.seek(requester(req), (ino.0, fh.0), offset, whence);
        serve("lseek", reply, logic, |r, at| r.offset(at));
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        _ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let logic = |_: &_| {
            self.0
                .copy_range((fh_in.0, offset_in), (fh_out.0, offset_out), len)
        };
        serve("copy_file_range", reply, logic, |r, n| r.written(n));
    }
}
