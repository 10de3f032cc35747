//! A panic in a request handler is a bug, but it must cost one request, not the
//! mount: fuser runs each worker's loop on its own thread and ends the whole
//! session when one of them panics. `Guarded` runs every request under
//! `catch_unwind`; the unwinding drops the request's reply, which fuser answers
//! with EIO, and the panic is logged.

use std::any::Any;
use std::ffi::OsStr;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    AccessFlags, FileHandle, Filesystem, INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

/// Looking this name up panics, in debug builds only: the tests' way to check
/// that a panic costs one request.
#[cfg(debug_assertions)]
pub const PANIC_NAME: &str = "editfs-test-panic";

/// The file system `F`, each request of which runs under `guard`.
pub struct Guarded<F>(pub F);

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

impl<F: Filesystem> Filesystem for Guarded<F> {
    fn init(&mut self, req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        self.0.init(req, config)
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        #[cfg(debug_assertions)]
        if name == PANIC_NAME {
            return guard("lookup", || panic!("{PANIC_NAME} looked up"));
        }
        guard("lookup", || self.0.lookup(req, parent, name, reply));
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        guard("forget", || self.0.forget(req, ino, nlookup));
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        guard("getattr", || self.0.getattr(req, ino, fh, reply));
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
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        crtime: Option<SystemTime>,
        chgtime: Option<SystemTime>,
        bkuptime: Option<SystemTime>,
        flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        guard("setattr", || {
            self.0.setattr(
                req, ino, mode, uid, gid, size, atime, mtime, ctime, fh, crtime, chgtime, bkuptime,
                flags, reply,
            )
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        guard("readlink", || self.0.readlink(req, ino, reply));
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
        guard("mknod", || {
            self.0.mknod(req, parent, name, mode, umask, rdev, reply)
        });
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
        guard("mkdir", || {
            self.0.mkdir(req, parent, name, mode, umask, reply)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        guard("unlink", || self.0.unlink(req, parent, name, reply));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        guard("rmdir", || self.0.rmdir(req, parent, name, reply));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        guard("symlink", || {
            self.0.symlink(req, parent, link_name, target, reply)
        });
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
        guard("rename", || {
            self.0
                .rename(req, parent, name, newparent, newname, flags, reply)
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        guard("link", || self.0.link(req, ino, newparent, newname, reply));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        guard("open", || self.0.open(req, ino, flags, reply));
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        guard("read", || {
            self.0
                .read(req, ino, fh, offset, size, flags, lock_owner, reply)
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        guard("write", || {
            self.0.write(
                req,
                ino,
                fh,
                offset,
                data,
                write_flags,
                flags,
                lock_owner,
                reply,
            )
        });
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        guard("flush", || self.0.flush(req, ino, fh, lock_owner, reply));
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        guard("release", || {
            self.0
                .release(req, ino, fh, flags, lock_owner, flush, reply)
        });
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        guard("fsync", || self.0.fsync(req, ino, fh, datasync, reply));
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        guard("opendir", || self.0.opendir(req, ino, flags, reply));
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        guard("readdir", || self.0.readdir(req, ino, fh, offset, reply));
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        guard("readdirplus", || {
            self.0.readdirplus(req, ino, fh, offset, reply)
        });
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        guard("releasedir", || {
            self.0.releasedir(req, ino, fh, flags, reply)
        });
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        guard("fsyncdir", || {
            self.0.fsyncdir(req, ino, fh, datasync, reply)
        });
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        guard("statfs", || self.0.statfs(req, ino, reply));
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        guard("setxattr", || {
            self.0
                .setxattr(req, ino, name, value, flags, position, reply)
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        guard("getxattr", || self.0.getxattr(req, ino, name, size, reply));
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        guard("listxattr", || self.0.listxattr(req, ino, size, reply));
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        guard("removexattr", || self.0.removexattr(req, ino, name, reply));
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        guard("access", || self.0.access(req, ino, mask, reply));
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
        guard("create", || {
            self.0.create(req, parent, name, mode, umask, flags, reply)
        });
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        guard("fallocate", || {
            self.0.fallocate(req, ino, fh, offset, length, mode, reply)
        });
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        guard("ioctl", || {
            self.0
                .ioctl(req, ino, fh, flags, cmd, in_data, out_size, reply)
        });
    }

    fn poll(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        ph: fuser::PollNotifier,
        events: fuser::PollEvents,
        flags: fuser::PollFlags,
        reply: fuser::ReplyPoll,
    ) {
        guard("poll", || {
            self.0.poll(req, ino, fh, ph, events, flags, reply)
        });
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        guard("lseek", || {
            self.0.lseek(req, ino, fh, offset, whence, reply)
        });
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        guard("copy_file_range", || {
            self.0.copy_file_range(
                req, ino_in, fh_in, offset_in, ino_out, fh_out, offset_out, len, flags, reply,
            )
        });
    }
}
