//! The FUSE requests, one method each: real files pass through to SOURCE with
//! the errno SOURCE gives; control files and `.editfs/` are answered here.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps};

use super::control::{EditBuffer, slice};
use super::fs::{
    Core, EditFs, Entry, Handle, Loc, REAL_TTL, Res, VIRTUAL_TTL, attr, errno, file_type, id_of,
};
use super::names::Control;
use super::nodes::{Kind, ROOT, real_id};
use super::state;
use crate::store::STATE_DIR;
use crate::transaction::Caller;

const GEN: Generation = Generation(0);

fn reply_entry(reply: ReplyEntry, r: Res<(FileAttr, std::time::Duration)>) {
    match r {
        Ok((a, ttl)) => reply.entry(&ttl, &a, GEN),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, r: Res<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn reply_attr(reply: ReplyAttr, r: Res<(FileAttr, std::time::Duration)>) {
    match r {
        Ok((a, ttl)) => reply.attr(&ttl, &a),
        Err(e) => reply.error(e),
    }
}

fn reply_xattr(reply: ReplyXattr, size: u32, r: Res<Vec<u8>>) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(e),
    }
}

fn timespec(t: Option<TimeOrNow>) -> Timespec {
    match t {
        None => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => {
            let (sec, nsec) = match t.duration_since(SystemTime::UNIX_EPOCH) {
                Ok(d) => (d.as_secs() as i64, d.subsec_nanos() as i64),
                Err(e) => (-(e.duration().as_secs() as i64), 0),
            };
            Timespec {
                tv_sec: sec,
                tv_nsec: nsec,
            }
        }
    }
}

/// chmod of `name` in `dir` without following it: the kernel has no such call, so
/// the file is pinned with `O_PATH` and changed through its `/proc/self/fd` link,
/// as the C library does.
fn chmod_nofollow(dir: BorrowedFd<'_>, name: &OsStr, mode: Mode) -> rustix::io::Result<()> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if file_type(rustix::fs::fstat(&fd)?.st_mode) == FileType::Symlink {
        return Err(rustix::io::Errno::OPNOTSUPP);
    }
    rustix::fs::chmod(format!("/proc/self/fd/{}", fd.as_raw_fd()), mode)
}

/// Opens `name` with `O_CREAT`, saying whether this call made it: only a file
/// made here takes its maker's owner and permissions, never one that appeared
/// under the name since the kernel looked it up. Such a file is opened only
/// once `allowed` (the caller's rights) passed on it, so nothing (a
/// truncation, a device's open) happens to it first.
fn create_or_open(
    dir: &impl AsFd,
    name: &OsStr,
    (flags, perm): (OFlags, Mode),
    allowed: impl FnOnce(BorrowedFd<'_>) -> Res<()>,
) -> Res<(OwnedFd, bool)> {
    match rustix::fs::openat(dir, name, flags | OFlags::EXCL, perm) {
        Ok(fd) => Ok((fd, true)),
        Err(rustix::io::Errno::EXIST) if !flags.contains(OFlags::EXCL) => {
            let pinned = rustix::fs::openat(
                dir,
                name,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(errno)?;
            let st = rustix::fs::fstat(&pinned).map_err(errno)?;
            if file_type(st.st_mode) == FileType::Symlink {
                return Err(Errno::ELOOP);
            }
            allowed(pinned.as_fd())?;
            // Through its descriptor's own link: exactly the file checked.
            let link = format!("/proc/self/fd/{}", pinned.as_raw_fd());
            let flags = flags - OFlags::CREATE - OFlags::NOFOLLOW;
            rustix::fs::openat(rustix::fs::CWD, link.as_str(), flags, perm)
                .map(|fd| (fd, false))
                .map_err(errno)
        }
        Err(e) => Err(errno(e)),
    }
}

/// Up to `size` bytes at `offset`, read into memory that is not zeroed first.
fn read_at(file: &File, offset: u64, size: usize) -> Res<Vec<u8>> {
    let mut buf = Vec::with_capacity(size.max(1));
    while buf.len() < size {
        let at = offset + buf.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at) {
            Ok(0) => break,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(errno(e)),
        }
    }
    buf.truncate(size);
    Ok(buf)
}

/// Whether `name` in `dir` is a directory with nothing in it.
fn empty_dir(dir: &impl AsFd, name: &OsStr) -> bool {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
        return false;
    };
    rustix::fs::Dir::read_from(&fd).is_ok_and(|entries| {
        entries
            .flatten()
            .all(|e| matches!(e.file_name().to_bytes(), b"." | b".."))
    })
}

/// The attribute changes of one setattr request.
struct Set {
    mode: Option<u32>,
    owner: (Option<u32>, Option<u32>),
    size: Option<u64>,
    times: (Option<TimeOrNow>, Option<TimeOrNow>),
}

/// How a passed-through file is opened. No flush: the daemon has nothing to do
/// at a close of a real file (its writes went straight to SOURCE), so a close
/// costs no round trip.
const PASSED: FopenFlags = FopenFlags::FOPEN_NOFLUSH;

/// How a real file that is not passed through is opened: its pages stay cached
/// across opens (dropped when attributes show a change). A read-only open has
/// nothing to flush; one that writes does (pages written through a shared map).
fn cached(flags: OpenFlags) -> FopenFlags {
    if flags.acc_mode() == OpenAccMode::O_RDONLY && !truncates(flags) {
        FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH
    } else {
        FopenFlags::FOPEN_KEEP_CACHE
    }
}

/// Whether a descriptor the daemon opened may write.
fn writes(file: &File) -> bool {
    rustix::fs::fcntl_getfl(file).is_ok_and(|f| {
        let mode = f & OFlags::RWMODE;
        mode == OFlags::WRONLY || mode == OFlags::RDWR
    })
}

/// The process behind `req`, whose user a transaction it opens is checked against.
fn caller(req: &Request) -> Caller {
    Caller::of(req.uid(), req.gid(), req.pid())
}

/// The access an open with `flags` asks of an existing file.
fn access_for(flags: OFlags) -> rustix::fs::Access {
    use rustix::fs::Access;
    let mode = match flags & (OFlags::RDONLY | OFlags::WRONLY | OFlags::RDWR) {
        f if f == OFlags::WRONLY => Access::WRITE_OK,
        f if f == OFlags::RDWR => Access::READ_OK | Access::WRITE_OK,
        _ => Access::READ_OK,
    };
    if flags.contains(OFlags::TRUNC) {
        mode | Access::WRITE_OK
    } else {
        mode
    }
}

fn is_write(flags: OpenFlags) -> bool {
    flags.acc_mode() != OpenAccMode::O_RDONLY || truncates(flags)
}

/// The kernel's `__FMODE_EXEC`, set in the flags of the open that loads a program.
const EXEC_OPEN: i32 = 0x20;

fn truncates(flags: OpenFlags) -> bool {
    flags.0 & libc::O_TRUNC != 0
}

impl Core {
    fn lookup_real(&self, parent: u64, name: &OsStr) -> Res<(FileAttr, std::time::Duration)> {
        if parent == ROOT && name == state::NAME {
            let ino = self.state_root(true);
            return Ok((self.state_attr(ino, Path::new(""))?, VIRTUAL_TTL));
        }
        let dir = self.dir_of(parent)?;
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                let id = real_id(st.st_ino);
                self.nodes.write().remember(id, parent, name);
                Ok((self.sent(&attr(&st, id)), REAL_TTL))
            }
            Err(rustix::io::Errno::NOENT) => self.lookup_control(parent, name),
            Err(e) => Err(errno(e)),
        }
    }

    /// A missing name that names a control file. Its file may be anything or
    /// nothing: the transaction edits a regular file, creates a missing one,
    /// follows a symlink that stays in SOURCE, and otherwise fails with a report.
    /// Were the name missing instead, `cat > dir.edit` would create a real file.
    fn lookup_control(&self, parent: u64, name: &OsStr) -> Res<(FileAttr, std::time::Duration)> {
        let (base, control) = self.settings.suffixes.parse(name).ok_or(Errno::ENOENT)?;
        let kind = Kind::Control {
            base: base.clone(),
            control,
        };
        let ino = self.nodes.write().virtual_node(parent, name, kind, true);
        Ok((self.control_attr(ino, parent, &base, control)?, VIRTUAL_TTL))
    }

    pub(super) fn getattr_of(
        &self,
        ino: u64,
        fh: Option<u64>,
    ) -> Res<(FileAttr, std::time::Duration)> {
        let node = self.nodes.read().get(ino).cloned().ok_or(Errno::ENOENT)?;
        match &node.kind {
            Kind::Control { base, control } => Ok((
                self.control_attr(ino, node.parent, base, *control)?,
                VIRTUAL_TTL,
            )),
            Kind::State(rel) => Ok((self.state_attr(ino, rel)?, VIRTUAL_TTL)),
            Kind::Real => {
                if let Some(Handle::File { file, .. }) = self.file_of(ino, fh).as_deref() {
                    let st = rustix::fs::fstat(file).map_err(errno)?;
                    return Ok((self.sent(&attr(&st, ino)), REAL_TTL));
                }
                let st = match self.stat_real(ino) {
                    // Replaced or unlinked under its name, but still open: the
                    // open file is what `fstat` asks about.
                    Err(Errno::ESTALE) => self.stat_open(ino).ok_or(Errno::ESTALE)?,
                    other => other?,
                };
                Ok((self.sent(&attr(&st, ino)), REAL_TTL))
            }
        }
    }

    /// A real node's status, checked to still be the same file.
    fn stat_real(&self, ino: u64) -> Res<rustix::fs::Stat> {
        if ino == ROOT {
            return rustix::fs::fstat(self.source.root()).map_err(errno);
        }
        let loc = self.loc(ino)?;
        let st =
            rustix::fs::statat(loc.dir(), &loc.name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        // The name now holds another file (replaced by a rename): this node is
        // stale, and ESTALE makes the kernel look the name up again.
        if real_id(st.st_ino) != ino {
            return Err(Errno::ESTALE);
        }
        Ok(st)
    }

    /// The parent of a new name must be a real directory, and the name not `.editfs` at the root.
    fn new_name(&self, parent: u64, name: &OsStr) -> Res<Arc<OwnedFd>> {
        if parent == ROOT && name == state::NAME {
            return Err(Errno::EEXIST);
        }
        self.dir_of(parent)
    }

    /// Makes `name` in `parent` with `how` and permissions `perm`, gives it to its
    /// maker, and answers its entry.
    fn make(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        perm: u32,
        how: impl FnOnce(&OwnedFd) -> rustix::io::Result<()>,
    ) -> Res<(FileAttr, std::time::Duration)> {
        let dir = self.new_name(parent, name)?;
        how(&dir).map_err(errno)?;
        self.unmask(&*dir, name, perm)?;
        self.give_to(req, &*dir, name);
        self.entry_at(parent, &*dir, name)
    }

    /// Gives back to a new node the permission bits the daemon's own umask took:
    /// the caller's umask is already in `perm`, and `mkdir -m 777` must get 777.
    /// The daemon keeps its umask because the store's own files rely on it.
    fn unmask(&self, dir: &impl AsFd, name: &OsStr, perm: u32) -> Res<()> {
        let lost = perm & self.umask;
        if lost == 0 {
            return Ok(());
        }
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        let mode = Mode::from_raw_mode(st.st_mode & 0o7777 | lost);
        chmod_nofollow(dir.as_fd(), name, mode).map_err(errno)
    }

    /// Gives a new file to the user who made it when the daemon runs as root.
    fn give_to(&self, req: &Request, dir: &impl AsFd, name: &OsStr) {
        if self.owner.0 != 0 || req.uid() == 0 {
            return;
        }
        let uid = rustix::fs::Uid::from_raw(req.uid());
        let setgid = rustix::fs::fstat(dir).is_ok_and(|s| s.st_mode & libc::S_ISGID != 0);
        let gid = (!setgid).then(|| rustix::fs::Gid::from_raw(req.gid()));
        if let Err(e) = rustix::fs::chownat(dir, name, Some(uid), gid, AtFlags::SYMLINK_NOFOLLOW) {
            log::warn!(
                "cannot give {} to uid {}: {e}",
                name.to_string_lossy(),
                req.uid()
            );
        }
    }

    fn entry_at(
        &self,
        parent: u64,
        dir: &impl AsFd,
        name: &OsStr,
    ) -> Res<(FileAttr, std::time::Duration)> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        let id = real_id(st.st_ino);
        self.nodes.write().remember(id, parent, name);
        Ok((attr(&st, id), REAL_TTL))
    }

    /// A name the user may change: real, in a real directory, not a control file.
    fn changeable(&self, parent: u64, name: &OsStr) -> Res<Arc<OwnedFd>> {
        if parent == ROOT && name == OsStr::new(STATE_DIR) {
            return Err(Errno::EBUSY);
        }
        let dir = self.dir_of(parent)?;
        if matches!(
            rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW),
            Err(rustix::io::Errno::NOENT)
        ) && self.settings.suffixes.parse(name).is_some()
        {
            // A control file is not a file that can be removed or renamed.
            return Err(Errno::EPERM);
        }
        Ok(dir)
    }

    /// Under `--edits-only`, an existing name (other than an empty directory's)
    /// may not be removed, renamed or replaced: only transactions change files.
    fn edits_only_keeps(&self, dir: &impl AsFd, name: &OsStr) -> Res<()> {
        if !self.settings.edits_only {
            return Ok(());
        }
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if file_type(st.st_mode) != FileType::Directory => Err(Errno::EROFS),
            Ok(_) if !empty_dir(dir, name) => Err(Errno::EROFS),
            _ => Ok(()),
        }
    }

    fn setattr_real(&self, ino: u64, pid: u32, fh: Option<u64>, set: Set) -> Res<()> {
        self.touched(ino);
        let Set {
            mode,
            owner,
            size,
            times,
        } = set;
        let handle = self.file_of(ino, fh);
        let file = handle.as_deref().and_then(|h| match h {
            Handle::File { file, .. } => Some(file),
            _ => None,
        });
        let loc = if file.is_none() {
            Some(self.loc(ino)?)
        } else {
            None
        };
        if let Some(mode) = mode {
            let m = Mode::from_raw_mode(mode & 0o7777);
            match (file, &loc) {
                (Some(f), _) => rustix::fs::fchmod(f, m),
                (None, Some(l)) => chmod_nofollow(l.dir(), &l.name, m),
                _ => Ok(()),
            }
            .map_err(errno)?;
        }
        if owner.0.is_some() || owner.1.is_some() {
            let uid = owner.0.map(rustix::fs::Uid::from_raw);
            let gid = owner.1.map(rustix::fs::Gid::from_raw);
            match (file, &loc) {
                (Some(f), _) => rustix::fs::fchown(f, uid, gid),
                (None, Some(l)) => {
                    rustix::fs::chownat(l.dir(), &l.name, uid, gid, AtFlags::SYMLINK_NOFOLLOW)
                }
                _ => Ok(()),
            }
            .map_err(errno)?;
        }
        if let Some(size) = size {
            if self.settings.edits_only {
                return Err(Errno::EROFS);
            }
            // A truncate by name (`truncate -s`) is a write no open announced.
            let pending = match &loc {
                Some(l) => self.keep_before_write(&self.path(ino)?, l, pid),
                None => None,
            };
            let _shared = self.stripe(ino).read();
            match (file, &loc) {
                (Some(f), _) => rustix::fs::ftruncate(f, size).map_err(errno)?,
                (None, Some(l)) => {
                    let flags =
                        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
                    let fd = rustix::fs::openat(l.dir(), &l.name, flags, Mode::empty())
                        .map_err(errno)?;
                    rustix::fs::ftruncate(&fd, size).map_err(errno)?;
                }
                _ => {}
            }
            if let Some(p) = pending {
                self.finish_write(&p, loc.as_ref());
            }
        }
        if times.0.is_some() || times.1.is_some() {
            let ts = Timestamps {
                last_access: timespec(times.0),
                last_modification: timespec(times.1),
            };
            match (file, &loc) {
                (Some(f), _) => rustix::fs::futimens(f, &ts),
                (None, Some(l)) => {
                    rustix::fs::utimensat(l.dir(), &l.name, &ts, AtFlags::SYMLINK_NOFOLLOW)
                }
                _ => Ok(()),
            }
            .map_err(errno)?;
        }
        Ok(())
    }

    /// A write to real file `ino` through a handle open for writing (`write`,
    /// `fallocate`, `copy_file_range`): the file's pre-image was taken when the
    /// handle was opened, and the write waits while a transaction on it commits.
    pub(super) fn direct_write<T>(&self, ino: u64, write: impl FnOnce() -> Res<T>) -> Res<T> {
        let _shared = self.stripe(ino).read();
        self.touched(ino);
        write()
    }

    /// ETXTBSY for `open(O_RDONLY | O_TRUNC)` of a program being run. The kernel
    /// refuses every other write to it before asking us, but this one it checks
    /// only after our open has truncated the file (atomic `O_TRUNC`): the running
    /// program was emptied under its process, and the open then failed anyway.
    fn refuse_busy_truncation(&self, ino: u64, flags: OpenFlags) -> Res<()> {
        let read_only = flags.acc_mode() == OpenAccMode::O_RDONLY;
        if read_only && truncates(flags) && self.running.lock().values().any(|&i| i == ino) {
            return Err(Errno::ETXTBSY);
        }
        Ok(())
    }

    fn open_real(&self, ino: u64, flags: OpenFlags, pid: u32) -> Res<u64> {
        if self.settings.edits_only && is_write(flags) {
            return Err(Errno::EROFS);
        }
        self.refuse_busy_truncation(ino, flags)?;
        let runs = flags.0 & EXEC_OPEN != 0;
        let loc = self.loc(ino)?;
        let open = || {
            let strip = libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY;
            let flags = OFlags::from_bits_retain((flags.0 & !strip) as u32)
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC;
            let opened = rustix::fs::openat(loc.dir(), &loc.name, flags, Mode::empty());
            // A commit may have renamed a new file over the name since the kernel
            // looked it up: ESTALE makes the kernel look it up again and open that.
            opened.and_then(|fd| match rustix::fs::fstat(&fd) {
                Ok(st) if ino != ROOT && real_id(st.st_ino) != ino => Err(rustix::io::Errno::STALE),
                Ok(_) => Ok(fd),
                Err(e) => Err(e),
            })
        };
        // An open that does not truncate changes nothing: it is made before the
        // pre-image is kept (which may wait for commits), so the file is met as
        // the kernel just looked it up, not maybe replaced by then.
        let early = (!truncates(flags)).then(open);
        let mut pending = None;
        if is_write(flags) {
            pending = self.keep_before_write(&self.path(ino)?, &loc, pid);
            // O_TRUNC changes the size without a write.
            self.touched(ino);
        }
        let opened = early.unwrap_or_else(open);
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) => {
                if let Some(p) = pending {
                    self.finish_write(&p, Some(&loc));
                }
                return Err(errno(e));
            }
        };
        let fh = self.add_handle(Handle::File {
            file: File::from(fd),
            ino,
        });
        if let Some(p) = pending {
            self.writes.lock().insert(fh, p);
        }
        if runs {
            self.running.lock().insert(fh, ino);
        }
        Ok(fh)
    }

    /// The backing id handle `fh` (a real file, `ino`) is passed through with,
    /// if any; `register` asks the kernel for a new one.
    fn backing(
        &self,
        ino: u64,
        fh: u64,
        register: impl FnOnce(BorrowedFd<'_>) -> std::io::Result<fuser::BackingId>,
    ) -> Option<Arc<fuser::BackingId>> {
        let h = self.handle(fh).ok()?;
        let Handle::File { file, .. } = &*h else {
            return None;
        };
        self.backings
            .open(ino, writes(file), file.as_fd(), register)
    }

    fn list(&self, ino: u64) -> Res<Vec<Entry>> {
        if let Kind::State(rel) = self.kind(ino)? {
            return self.state_entries(ino, &rel);
        }
        let dir = self.dir_of(ino)?;
        let mut out = Vec::new();
        let mut regular = Vec::new();
        for e in rustix::fs::Dir::read_from(&dir).map_err(errno)? {
            let e = e.map_err(errno)?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name == "." || name == ".." || (ino == ROOT && name == state::NAME) {
                continue;
            }
            let kind = match e.file_type() {
                rustix::fs::FileType::Directory => FileType::Directory,
                rustix::fs::FileType::Symlink => FileType::Symlink,
                rustix::fs::FileType::RegularFile => FileType::RegularFile,
                rustix::fs::FileType::Fifo => FileType::NamedPipe,
                rustix::fs::FileType::Socket => FileType::Socket,
                rustix::fs::FileType::CharacterDevice => FileType::CharDevice,
                rustix::fs::FileType::BlockDevice => FileType::BlockDevice,
                rustix::fs::FileType::Unknown => FileType::RegularFile,
            };
            if kind == FileType::RegularFile {
                regular.push(name.to_owned());
            }
            out.push(Entry {
                ino: real_id(e.ino()),
                kind,
                name: name.to_owned(),
            });
        }
        if ino == ROOT {
            out.push(Entry {
                ino: self.state_root(false),
                kind: FileType::Directory,
                name: state::NAME.into(),
            });
        }
        if self.settings.show_control_files {
            self.add_control_entries(ino, &mut out, regular);
        }
        Ok(out)
    }

    fn add_control_entries(
        &self,
        ino: u64,
        out: &mut Vec<Entry>,
        regular: Vec<std::ffi::OsString>,
    ) {
        let taken: std::collections::HashSet<_> = out.iter().map(|e| e.name.clone()).collect();
        for base in regular {
            for c in Control::ALL {
                let name = self.settings.suffixes.name(&base, c);
                if !taken.contains(&name) {
                    let kind = Kind::Control {
                        base: base.clone(),
                        control: c,
                    };
                    let id = self.nodes.write().virtual_node(ino, &name, kind, false);
                    out.push(Entry {
                        ino: id,
                        kind: FileType::RegularFile,
                        name,
                    });
                }
            }
        }
    }

    /// An open descriptor of a real node for extended attributes; `None` for a symlink.
    fn xattr_fd(&self, ino: u64) -> Res<Option<std::os::fd::OwnedFd>> {
        if ino == ROOT {
            return rustix::io::dup(self.source.root()).map(Some).map_err(errno);
        }
        let loc = self.loc(ino)?;
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        match rustix::fs::openat(loc.dir(), &loc.name, flags, Mode::empty()) {
            Ok(fd) => Ok(Some(fd)),
            Err(rustix::io::Errno::LOOP) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }

    fn real_only(&self, ino: u64) -> Res<()> {
        match self.kind(ino)? {
            Kind::Real => Ok(()),
            Kind::State(_) => Err(Errno::EROFS),
            Kind::Control { .. } => Err(Errno::EPERM),
        }
    }

    /// The attributes of a listed entry, read now; `None` if it has gone.
    fn entry_attr(
        &self,
        dir: Option<&OwnedFd>,
        e: &Entry,
    ) -> Option<(FileAttr, std::time::Duration)> {
        let real = self
            .nodes
            .read()
            .get(e.ino)
            .is_none_or(|n| n.kind == Kind::Real);
        match (real, dir) {
            (true, Some(_)) if let Some(still) = self.still_sent(e.ino) => Some(still),
            (true, Some(dir)) => {
                let st = rustix::fs::statat(dir, &e.name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
                Some((self.sent(&attr(&st, real_id(st.st_ino))), REAL_TTL))
            }
            _ => self.getattr_of(e.ino, None).ok(),
        }
    }

    /// Records the lookup the kernel now holds for an entry of a listing.
    fn counted(&self, parent: u64, e: &Entry, id: u64) {
        let mut nodes = self.nodes.write();
        match nodes.get(id).map(|n| n.kind.clone()) {
            Some(kind @ (Kind::Control { .. } | Kind::State(_))) => {
                nodes.virtual_node(parent, &e.name, kind, true);
            }
            _ => nodes.remember(id, parent, &e.name),
        }
    }

    fn after_rename(&self, old: (u64, &OsStr), new: (u64, &OsStr), exchange: bool) {
        let from = self.path(old.0).map(|p| p.join(old.1)).ok();
        let to = self.path(new.0).map(|p| p.join(new.1)).ok();
        let mut nodes = self.nodes.write();
        if exchange {
            nodes.exchanged(old, new);
        } else {
            nodes.renamed(old.0, old.1, new.0, new.1);
        }
        drop(nodes);
        match (from, to) {
            (Some(from), Some(to)) if exchange => self.swap_reports(from, to),
            (Some(from), to) if !exchange => self.move_report(from, to),
            _ => {}
        }
    }
}

impl Filesystem for EditFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = match self.kind(parent.0) {
            Ok(Kind::State(dir)) => self
                .state_lookup(parent.0, &dir, name)
                .map(|a| (a, VIRTUAL_TTL)),
            Ok(Kind::Control { .. }) => Err(Errno::ENOTDIR),
            // A name that is not there is remembered for a TTL too (a negative entry,
            // node id 0): git and compilers ask for the same missing names again and again.
            Ok(Kind::Real) => match self.lookup_real(parent.0, name) {
                Err(Errno::ENOENT) => {
                    Ok((self.virtual_attr(0, FileType::RegularFile, 0, 0), REAL_TTL))
                }
                other => other,
            },
            Err(e) => Err(e),
        };
        reply_entry(reply, r);
    }

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
        // Depth 2: SOURCE may itself be on a stacked file system (a container's
        // overlayfs); the price is that the mount cannot be a layer of one.
        let through = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
            && config.set_max_stack_depth(2).is_ok();
        if through {
            self.backings.enable();
        } else {
            log::warn!("the kernel cannot pass files through: file data goes through the daemon");
        }
        Ok(())
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if self.nodes.write().forget(ino.0, nlookup) {
            self.forgot(ino.0);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        reply_attr(reply, self.getattr_of(ino.0, fh.map(|f| f.0)));
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
        let r = match self.kind(ino.0) {
            // `cat > F.edit` truncates and `touch` sets times: both harmless.
            Ok(Kind::Control { .. }) if mode.is_none() && uid.is_none() && gid.is_none() => Ok(()),
            Ok(Kind::Control { .. }) => Err(Errno::EPERM),
            Ok(Kind::State(rel)) if state::is_control(&rel) && mode.is_none() && uid.is_none() => {
                Ok(())
            }
            Ok(Kind::State(_)) => Err(Errno::EROFS),
            Ok(Kind::Real) => {
                let set = Set {
                    mode,
                    owner: (uid, gid),
                    size,
                    times: (atime, mtime),
                };
                self.setattr_real(ino.0, req.pid(), fh.map(|f| f.0), set)
            }
            Err(e) => Err(e),
        };
        reply_attr(
            reply,
            r.and_then(|()| self.getattr_of(ino.0, fh.map(|f| f.0))),
        );
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = self
            .loc(ino.0)
            .and_then(|l| rustix::fs::readlinkat(l.dir(), &l.name, Vec::new()).map_err(errno));
        match r {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
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
        let kind = rustix::fs::FileType::from_raw_mode(mode);
        let perm = mode & !umask & 0o7777;
        let r = self.make(req, parent.0, name, perm, |dir| {
            rustix::fs::mknodat(dir, name, kind, Mode::from_raw_mode(perm), u64::from(rdev))
        });
        reply_entry(reply, r);
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
        let perm = mode & !umask & 0o7777;
        let r = self.make(req, parent.0, name, perm, |dir| {
            rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(perm))
        });
        reply_entry(reply, r);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.changeable(parent.0, name).and_then(|dir| {
            self.edits_only_keeps(&dir, name)?;
            let gone = self.path(parent.0).map(|p| p.join(name)).ok();
            let loc = Loc {
                dir,
                name: name.to_owned(),
            };
            match &gone {
                Some(rel) => self.remove_file(rel, &loc, req.pid()),
                None => rustix::fs::unlinkat(loc.dir(), name, AtFlags::empty()),
            }
            .map_err(errno)?;
            self.nodes.write().unlinked(parent.0, name);
            if let Some(gone) = gone {
                self.move_report(gone, None);
            }
            Ok(())
        });
        reply_empty(reply, r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.changeable(parent.0, name).and_then(|dir| {
            rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR).map_err(errno)?;
            self.nodes.write().unlinked(parent.0, name);
            Ok(())
        });
        reply_empty(reply, r);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = self.make(req, parent.0, link_name, 0, |dir| {
            rustix::fs::symlinkat(target, dir, link_name)
        });
        reply_entry(reply, r);
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
        let r = (|| {
            let from = self.changeable(parent.0, name)?;
            let to = self.changeable(newparent.0, newname)?;
            self.edits_only_keeps(&from, name)?;
            self.edits_only_keeps(&to, newname)?;
            let how = rustix::fs::RenameFlags::from_bits_retain(flags.bits());
            // `sed -i` and many editors save by renaming a new file over the old one.
            let over = Loc {
                dir: to.clone(),
                name: newname.to_owned(),
            };
            let pending =
                self.keep_before_write(&self.path(newparent.0)?.join(newname), &over, req.pid());
            let renamed = rustix::fs::renameat_with(&from, name, &to, newname, how);
            if let Some(p) = pending {
                self.finish_write(&p, Some(&over));
            }
            renamed.map_err(errno)?;
            let exchange = how.contains(rustix::fs::RenameFlags::EXCHANGE);
            self.after_rename((parent.0, name), (newparent.0, newname), exchange);
            Ok(())
        })();
        reply_empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = self.real_only(ino.0).and_then(|()| {
            let loc = self.loc(ino.0)?;
            let dir = self.new_name(newparent.0, newname)?;
            rustix::fs::linkat(loc.dir(), &loc.name, &dir, newname, AtFlags::empty())
                .map_err(errno)?;
            self.entry_at(newparent.0, &dir, newname)
        });
        reply_entry(reply, r);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let node = self.nodes.read().get(ino.0).cloned();
        let r = match node.map(|n| (n.parent, n.kind)) {
            None => Err(Errno::ENOENT),
            Some((parent, Kind::Control { base, control })) => self
                .open_control(
                    (parent, &base),
                    control,
                    caller(req),
                    (is_write(flags), truncates(flags)),
                )
                .map(|fh| (fh, FopenFlags::FOPEN_DIRECT_IO)),
            Some((_, Kind::State(rel))) if state::is_control(&rel) => Ok((
                self.add_handle(Handle::Edit(parking_lot::Mutex::new(
                    EditBuffer::opened(truncates(flags), Some(caller(req)), None)
                        .charged_to(self.budget.account(req.uid())),
                ))),
                FopenFlags::FOPEN_DIRECT_IO,
            )),
            Some((_, Kind::State(rel))) if !is_write(flags) => {
                self.state_bytes(&rel, &caller(req)).and_then(|b| {
                    let mut charge = self.budget.account(req.uid());
                    charge.hold(b.len() as u64)?;
                    Ok((
                        self.add_handle(Handle::Bytes {
                            bytes: b,
                            _charge: Some(charge),
                        }),
                        FopenFlags::FOPEN_DIRECT_IO,
                    ))
                })
            }
            Some((_, Kind::State(_))) => Err(Errno::EROFS),
            Some((_, Kind::Real)) => {
                return match self.open_real(ino.0, flags, req.pid()) {
                    Ok(fh) => match self.backing(ino.0, fh, |fd| reply.open_backing(fd)) {
                        Some(id) => reply.opened_passthrough(FileHandle(fh), PASSED, &id),
                        None => reply.opened(FileHandle(fh), cached(flags)),
                    },
                    Err(e) => reply.error(e),
                };
            }
        };
        match r {
            Ok((fh, f)) => reply.opened(FileHandle(fh), f),
            Err(e) => reply.error(e),
        }
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
        let h = match self.handle(fh.0) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let r = match &*h {
            Handle::File { file, .. } => read_at(file, offset, size as usize),
            Handle::Bytes { bytes, .. } => Ok(slice(bytes, offset, size).to_vec()),
            Handle::Edit(_) => return self.read_edit(ino.0, h, req.pid(), (offset, size), reply),
            Handle::Dir(_) => Err(Errno::EISDIR),
        };
        match r {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
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
        let r = self.handle(fh.0).and_then(|h| match &*h {
            Handle::File { file, ino } => self.direct_write(*ino, || {
                file.write_at(data, offset).map(|n| n as u32).map_err(errno)
            }),
            Handle::Edit(buf) => buf
                .lock()
                .write(offset, data, self.settings.engine.max_payload),
            _ => Err(Errno::EBADF),
        });
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.handle(fh.0) {
            Ok(h) => self.flush_edit(ino.0, h, req.pid(), reply),
            Err(e) => reply.error(e),
        }
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
        let handle = self.drop_handle(fh.0);
        if let Some(Handle::File { file, ino }) = handle.as_deref() {
            let writer = writes(file);
            drop(self.backings.release(*ino, writer));
            if writer {
                self.touched(*ino);
            }
        }
        self.running.lock().remove(&fh.0);
        let pending = self.writes.lock().remove(&fh.0);
        if let Some(p) = pending {
            self.finish_write(&p, self.loc(ino.0).ok().as_ref());
        }
        reply.ok();
        if let Some(h) = handle {
            self.release_edit(ino.0, h, req.pid());
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.handle(fh.0).and_then(|h| match &*h {
            Handle::File { file, .. } if datasync => file.sync_data().map_err(errno),
            Handle::File { file, .. } => file.sync_all().map_err(errno),
            _ => Ok(()),
        });
        reply_empty(reply, r);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.list(ino.0) {
            Ok(entries) => reply.opened(
                FileHandle(self.add_handle(Handle::Dir(entries))),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let h = match self.handle(fh.0) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let Handle::Dir(entries) = &*h else {
            return reply.error(Errno::ENOTDIR);
        };
        let dots = [
            (ino.0, FileType::Directory, OsStr::new(".")),
            (ino.0, FileType::Directory, OsStr::new("..")),
        ];
        let all = dots
            .into_iter()
            .chain(entries.iter().map(|e| (e.ino, e.kind, e.name.as_os_str())));
        for (i, (ino, kind, name)) in all.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let h = match self.handle(fh.0) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let Handle::Dir(entries) = &*h else {
            return reply.error(Errno::ENOTDIR);
        };
        let dir = match self.kind(ino.0) {
            Ok(Kind::Real) => self.dir_of(ino.0).ok(),
            _ => None,
        };
        // `.` and `..` come first; the kernel looks neither up.
        let Ok((here, _)) = self.getattr_of(ino.0, None) else {
            return reply.error(Errno::ENOENT);
        };
        for (i, name) in [".", ".."].into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(0), i as u64 + 1, name, &VIRTUAL_TTL, &here, GEN) {
                return reply.ok();
            }
        }
        for (i, e) in entries
            .iter()
            .enumerate()
            .skip((offset as usize).saturating_sub(2))
        {
            let Some((a, ttl)) = self.entry_attr(dir.as_deref(), e) else {
                continue;
            };
            if reply.add(INodeNo(a.ino.0), i as u64 + 3, &e.name, &ttl, &a, GEN) {
                break;
            }
            // Each entry handed over counts as a lookup.
            self.counted(ino.0, e, a.ino.0);
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.drop_handle(fh.0);
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
        reply_empty(
            reply,
            self.dir_of(ino.0)
                .and_then(|d| rustix::fs::fsync(&d).map_err(errno)),
        );
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match rustix::fs::fstatvfs(self.source.root()) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let r = self
            .real_only(ino.0)
            .and_then(|()| match self.xattr_fd(ino.0)? {
                Some(fd) => {
                    let how = rustix::fs::XattrFlags::from_bits_retain(flags as u32);
                    rustix::fs::fsetxattr(&fd, name, value, how).map_err(errno)
                }
                None => Err(Errno::EPERM),
            });
        reply_empty(reply, r);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let r = match self.kind(ino.0) {
            Ok(Kind::Real) => self.xattr_fd(ino.0).and_then(|fd| {
                let fd = fd.ok_or(Errno::ENODATA)?;
                let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)?;
                match rustix::fs::fgetxattr_query(&fd, &c) {
                    Ok(_) => {
                        crate::store::atomic::xattr_value(fd.as_fd(), &c).ok_or(Errno::ENODATA)
                    }
                    Err(e) => Err(errno(e)),
                }
            }),
            Ok(_) => Err(Errno::ENODATA),
            Err(e) => Err(e),
        };
        reply_xattr(reply, size, r);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = match self.kind(ino.0) {
            Ok(Kind::Real) => self.xattr_fd(ino.0).map(|fd| match fd {
                Some(fd) => crate::store::atomic::xattr_names(fd.as_fd())
                    .into_iter()
                    .flat_map(|n| n.into_bytes_with_nul())
                    .collect(),
                None => Vec::new(),
            }),
            Ok(_) => Ok(Vec::new()),
            Err(e) => Err(e),
        };
        reply_xattr(reply, size, r);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self
            .real_only(ino.0)
            .and_then(|()| match self.xattr_fd(ino.0)? {
                Some(fd) => rustix::fs::fremovexattr(&fd, name).map_err(errno),
                None => Err(Errno::EPERM),
            });
        reply_empty(reply, r);
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let r = match self.kind(ino.0) {
            Ok(Kind::Real) if ino.0 == ROOT => Ok(()),
            Ok(Kind::Real) => self.loc(ino.0).and_then(|l| {
                let how = rustix::fs::Access::from_bits_retain(mask.bits() as u32);
                rustix::fs::accessat(l.dir(), &l.name, how, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(errno)
            }),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        reply_empty(reply, r);
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
        let r = self.new_name(parent.0, name).and_then(|dir| {
            let flags = OFlags::from_bits_retain((flags & !libc::O_NOCTTY) as u32)
                | OFlags::CREATE
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC;
            let perm = mode & !umask & 0o7777;
            // A file another user made since the kernel looked the name up had
            // no permission checked by the kernel: it is asked here.
            let allowed =
                |fd: BorrowedFd<'_>| caller(req).may(fd, access_for(flags)).map_err(errno);
            let how = (flags, Mode::from_raw_mode(perm));
            let (fd, made) = create_or_open(&*dir, name, how, allowed)?;
            if made {
                self.unmask(&*dir, name, perm)?;
                self.give_to(req, &dir, name);
            }
            let st = rustix::fs::fstat(&fd).map_err(errno)?;
            let id = id_of(&st, false);
            self.nodes.write().remember(id, parent.0, name);
            let fh = self.add_handle(Handle::File {
                file: File::from(fd),
                ino: id,
            });
            Ok((attr(&st, id), fh))
        });
        let (a, fh) = match r {
            Ok(made) => made,
            Err(e) => return reply.error(e),
        };
        match self.backing(a.ino.0, fh, |fd| reply.open_backing(fd)) {
            Some(id) => reply.created_passthrough(&REAL_TTL, &a, GEN, FileHandle(fh), PASSED, &id),
            None => reply.created(&REAL_TTL, &a, GEN, FileHandle(fh), FopenFlags::empty()),
        }
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
        reply.error(Errno::ENOTTY);
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
        let r = self.handle(fh.0).and_then(|h| match &*h {
            Handle::File { file, ino } => self.direct_write(*ino, || {
                let how = rustix::fs::FallocateFlags::from_bits_retain(mode as u32);
                rustix::fs::fallocate(file, how, offset, length).map_err(errno)
            }),
            _ => Err(Errno::EOPNOTSUPP),
        });
        reply_empty(reply, r);
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
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        match self.seek(ino.0, fh.0, offset, whence) {
            Ok(at) => reply.offset(at),
            Err(e) => reply.error(e),
        }
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
        match self.copy_range((fh_in.0, offset_in), (fh_out.0, offset_out), len) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_asks_the_access_its_mode_and_truncation_need() {
        use rustix::fs::Access;
        assert_eq!(access_for(OFlags::RDONLY), Access::READ_OK);
        assert_eq!(access_for(OFlags::WRONLY), Access::WRITE_OK);
        assert_eq!(
            access_for(OFlags::RDWR | OFlags::CREATE),
            Access::READ_OK | Access::WRITE_OK
        );
        assert_eq!(
            access_for(OFlags::RDONLY | OFlags::TRUNC),
            Access::READ_OK | Access::WRITE_OK
        );
    }

    #[test]
    fn write_means_any_write_access_or_truncation() {
        assert!(!is_write(OpenFlags(libc::O_RDONLY)));
        assert!(is_write(OpenFlags(libc::O_WRONLY)));
        assert!(is_write(OpenFlags(libc::O_RDWR)));
        assert!(is_write(OpenFlags(libc::O_RDONLY | libc::O_TRUNC)));
    }
}
