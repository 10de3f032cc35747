//! Real files: their attributes and content, passed through to SOURCE with the
//! errno SOURCE gives. A direct write keeps the file's pre-image (taken when
//! it is opened for writing) and waits while a transaction on it commits.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps};

use super::core::{Core, Loc, attr, file_type};
use super::handles::Handle;
use super::nodes::ROOT;
use super::passthrough::PASS_FROM;
use super::state;
use super::types::{
    Backing, Errno, FileType, Register, Requester, Res, Served, Timed, VIRTUAL_TTL, errno,
};

/// chmod of `name` in `dir` without following it: the kernel has no such call, so
/// the file is pinned with `O_PATH` and changed through its `/proc/self/fd` link,
/// as the C library does.
pub fn chmod_nofollow(dir: BorrowedFd<'_>, name: &OsStr, mode: Mode) -> rustix::io::Result<()> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    chmod_node(&fd, mode)
}

/// chmod of the file an `O_PATH` descriptor holds, never of a link's target.
fn chmod_node(fd: &OwnedFd, mode: Mode) -> rustix::io::Result<()> {
    if file_type(rustix::fs::fstat(fd)?.st_mode) == FileType::Symlink {
        return Err(rustix::io::Errno::OPNOTSUPP);
    }
    rustix::fs::chmod(proc_path(fd), mode)
}

/// The path that leads to exactly the file a descriptor holds, whatever its
/// names are by now.
fn proc_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// Up to `size` bytes at `offset`, read into memory that is not zeroed first.
pub fn read_at(file: &File, offset: u64, size: usize) -> Res<Vec<u8>> {
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

/// The attribute changes of one setattr request; a time left out is `None`.
pub struct Set {
    pub mode: Option<u32>,
    pub owner: (Option<u32>, Option<u32>),
    pub size: Option<u64>,
    pub times: (Option<Timespec>, Option<Timespec>),
}

/// A time setattr leaves as it is.
const OMIT: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: rustix::fs::UTIME_OMIT,
};

/// How a real file that is not passed through is served: its pages stay cached
/// across opens (dropped when attributes show a change). A read-only open has
/// nothing to flush; one that writes does (pages written through a shared map).
pub fn cached(flags: i32) -> Served {
    Served::Cached {
        flush: is_write(flags),
    }
}

/// Whether a descriptor opened with `flags` may write.
pub fn writer(flags: i32) -> bool {
    matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)
}

pub fn is_write(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || truncates(flags)
}

/// The kernel's `__FMODE_EXEC`, set in the flags of the open that loads a program.
pub const EXEC_OPEN: i32 = 0x20;

pub fn truncates(flags: i32) -> bool {
    flags & libc::O_TRUNC != 0
}

impl Core {
    pub(super) fn lookup_real(&self, parent: u64, name: &OsStr) -> Res<Timed> {
        if parent == ROOT && name == state::NAME {
            let ino = self.state_root(true);
            return Ok((self.state_attr(ino, std::path::Path::new(""))?, VIRTUAL_TTL));
        }
        let dir = self.dir_of(parent)?;
        // Watched before it is read: a change from now on is told to the kernel.
        let lease = self.lease_in(parent);
        let found = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW);
        self.cache
            .prefetch()
            .looked_up(parent, name, || Some(dir.clone()));
        match found {
            Ok(st) => {
                let id = self.ids.of(&st);
                self.nodes.write().remember(id, parent, name);
                let a = attr(&st, id);
                Ok(self.cache.sent(a, self.ttl_after(lease, st.st_dev, &a)))
            }
            Err(e) => Err(errno(e)),
        }
    }

    pub(super) fn getattr_real(&self, ino: u64, fh: Option<u64>) -> Res<Timed> {
        if let Some(Handle::File { file, .. }) = self.file_of(ino, fh).as_deref() {
            let st = rustix::fs::fstat(file).map_err(errno)?;
            let a = attr(&st, ino);
            return Ok(self.cache.sent(a, self.ttl_of(ino, st.st_dev, &a)));
        }
        let st = match self.stat_real(ino) {
            // Replaced or unlinked under its name, but still open: the
            // open file is what `fstat` asks about.
            Err(Errno::ESTALE) => self.stat_open(ino).ok_or(Errno::ESTALE)?,
            other => other?,
        };
        let a = attr(&st, ino);
        Ok(self.cache.sent(a, self.ttl_of(ino, st.st_dev, &a)))
    }

    /// A real node's status, checked to still be the same file.
    fn stat_real(&self, ino: u64) -> Res<rustix::fs::Stat> {
        if ino == ROOT {
            return rustix::fs::fstat(self.source.root()).map_err(errno);
        }
        let loc = self.loc(ino)?;
        // A name the node no longer has is stale, not missing: see `open_real`.
        let st = rustix::fs::statat(loc.dir(), &loc.name, AtFlags::SYMLINK_NOFOLLOW).map_err(
            |e| match e {
                rustix::io::Errno::NOENT => Errno::ESTALE,
                e => errno(e),
            },
        )?;
        // The name now holds another file (replaced by a rename): this node is
        // stale, and ESTALE makes the kernel look the name up again.
        if self.ids.of(&st) != ino {
            return Err(Errno::ESTALE);
        }
        Ok(st)
    }

    /// Node `ino`'s file, opened `O_PATH` by its name and checked to be that
    /// node still. What a request without a handle changes (mode, owner,
    /// times, size, extended attributes) is changed through it: by name alone,
    /// a file renamed over the name since the kernel looked it up (another
    /// user's, moved there by a transaction or a rename) would take the change
    /// with the daemon's rights. A name that holds another file is ESTALE, so
    /// the kernel looks it up again.
    pub(super) fn node_file(&self, ino: u64) -> Res<OwnedFd> {
        let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if ino == ROOT {
            return rustix::fs::openat(self.source.root(), ".", how, Mode::empty()).map_err(errno);
        }
        let loc = self.loc(ino)?;
        let fd =
            rustix::fs::openat(loc.dir(), &loc.name, how, Mode::empty()).map_err(|e| match e {
                rustix::io::Errno::NOENT => Errno::ESTALE,
                e => errno(e),
            })?;
        let st = rustix::fs::fstat(&fd).map_err(errno)?;
        if self.ids.of(&st) != ino {
            return Err(Errno::ESTALE);
        }
        Ok(fd)
    }

    pub(super) fn setattr_real(
        &self,
        ino: u64,
        who: Requester,
        fh: Option<u64>,
        set: Set,
    ) -> Res<()> {
        self.cache.touched(ino);
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
        // Without a handle (fchmod, fchown and futimens send none either), the
        // node is reached by its name, checked to hold that node still.
        let node = match file {
            None => Some(self.node_file(ino)?),
            Some(_) => None,
        };
        if let Some(mode) = mode {
            let m = Mode::from_raw_mode(mode & 0o7777);
            match (file, &node) {
                (Some(f), _) => rustix::fs::fchmod(f, m),
                (None, Some(n)) => chmod_node(n, m),
                _ => Ok(()),
            }
            .map_err(errno)?;
        }
        if owner.0.is_some() || owner.1.is_some() {
            let uid = owner.0.map(rustix::fs::Uid::from_raw);
            let gid = owner.1.map(rustix::fs::Gid::from_raw);
            let how = AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW;
            match (file, &node) {
                (Some(f), _) => rustix::fs::fchown(f, uid, gid),
                (None, Some(n)) => rustix::fs::chownat(n, "", uid, gid, how),
                _ => Ok(()),
            }
            .map_err(errno)?;
        }
        if let Some(size) = size {
            if self.settings.edits_only {
                return Err(Errno::EROFS);
            }
            if let Some(l) = &loc {
                // A truncate by name is a write no open checked.
                self.may_open(who, ino, libc::O_WRONLY)?;
                self.settle_before_change(l);
            }
            // A truncate by name (`truncate -s`) is a write no open announced.
            let pending = match &loc {
                Some(l) => self.keep_before_write(&self.path(ino)?, l, who.pid),
                None => None,
            };
            let _shared = self.commit_gate.writing(ino);
            match (file, &node) {
                (Some(f), _) => rustix::fs::ftruncate(f, size).map_err(errno)?,
                (None, Some(n)) => {
                    let flags = OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
                    let fd = rustix::fs::open(proc_path(n), flags, Mode::empty()).map_err(errno)?;
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
                last_access: times.0.unwrap_or(OMIT),
                last_modification: times.1.unwrap_or(OMIT),
            };
            let how = AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW;
            match (file, &node) {
                (Some(f), _) => rustix::fs::futimens(f, &ts),
                (None, Some(n)) => rustix::fs::utimensat(n, "", &ts, how),
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
        let _shared = self.commit_gate.writing(ino);
        self.cache.touched(ino);
        write()
    }

    /// ETXTBSY for `open(O_RDONLY | O_TRUNC)` of a program being run. The kernel
    /// refuses every other write to it before asking us, but this one it checks
    /// only after our open has truncated the file (atomic `O_TRUNC`): the running
    /// program was emptied under its process, and the open then failed anyway.
    fn refuse_busy_truncation(&self, ino: u64, flags: i32) -> Res<()> {
        let read_only = flags & libc::O_ACCMODE == libc::O_RDONLY;
        if read_only && truncates(flags) && self.running.lock().values().any(|&i| i == ino) {
            return Err(Errno::ETXTBSY);
        }
        Ok(())
    }

    /// Waits until a new content a commit left unsynced in the file at `loc`,
    /// if any, is synced, before a change through the mount writes to it
    /// (see `Store::settle_before_change`). Costs nothing while no commit
    /// left one, which is most of the time.
    fn settle_before_change(&self, loc: &Loc) {
        if !self.store.unsynced() {
            return;
        }
        if let Ok(st) = rustix::fs::statat(loc.dir(), &loc.name, AtFlags::SYMLINK_NOFOLLOW) {
            self.store.settle_before_change(st.st_ino);
        }
    }

    /// Opens real node `ino` with `flags` for thread `pid`: the handle, and the
    /// file's size once open.
    pub(super) fn open_real(&self, ino: u64, flags: i32, pid: u32) -> Res<(u64, u64)> {
        if self.settings.edits_only && is_write(flags) {
            return Err(Errno::EROFS);
        }
        self.refuse_busy_truncation(ino, flags)?;
        let runs = flags & EXEC_OPEN != 0;
        let loc = self.loc(ino)?;
        // A truncation happens at the open: before it, by name. Other writes
        // come once the open is answered: by the file opened (below), so no
        // wait stands between the kernel's lookup and the open.
        if truncates(flags) {
            self.settle_before_change(&loc);
        }
        let open = || {
            let strip = libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY;
            let flags = OFlags::from_bits_retain((flags & !strip) as u32)
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC;
            let opened = rustix::fs::openat(loc.dir(), &loc.name, flags, Mode::empty());
            // A commit may have renamed a new file over the name since the kernel
            // looked it up: ESTALE makes the kernel look it up again and open that.
            // So does a name the node no longer has: the file system hands a freed
            // inode number to the next new file, so a node the kernel still holds
            // for an old file may meanwhile be recorded under the new file's name,
            // which a rename can take away before the table hears of it. The user
            // asked for the kernel's name, not ours: let the kernel walk it again.
            let opened = opened.map_err(|e| match e {
                rustix::io::Errno::NOENT if ino != ROOT => rustix::io::Errno::STALE,
                e => e,
            });
            opened.and_then(|fd| match rustix::fs::fstat(&fd) {
                Ok(st) if ino != ROOT && self.ids.of(&st) != ino => Err(rustix::io::Errno::STALE),
                Ok(st) => Ok((fd, st.st_size as u64)),
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
            self.cache.touched(ino);
        }
        let opened = early.unwrap_or_else(open);
        let (fd, size) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                if let Some(p) = pending {
                    self.finish_write(&p, Some(&loc));
                }
                return Err(errno(e));
            }
        };
        if is_write(flags)
            && !truncates(flags)
            && self.store.unsynced()
            && let Ok(st) = rustix::fs::fstat(&fd)
        {
            self.store.settle_before_change(st.st_ino);
        }
        let fh = self.handles.add(Handle::File {
            file: File::from(fd),
            ino,
            writer: writer(flags),
        });
        if let Some(p) = pending {
            self.writes.lock().insert(fh, p);
        }
        if runs {
            self.running.lock().insert(fh, ino);
        }
        Ok((fh, size))
    }

    /// How handle `fh` (real file `ino`, `size` bytes, opened with `flags`)
    /// is served. A write, or a file of `PASS_FROM` bytes or more, is passed
    /// through when the inode is free to choose (see `passthrough.rs`); a
    /// smaller file opened only to read is served from the kernel's page cache.
    /// A close of a handle whose write is recorded reaches the daemon.
    pub(super) fn serve_open(
        &self,
        (ino, fh): (u64, u64),
        flags: i32,
        size: u64,
        register: Register<'_>,
    ) -> Served {
        let pass = is_write(flags) || size >= PASS_FROM;
        match self.route(ino, fh, pass, register) {
            Some(backing) => Served::Passed {
                backing,
                flush: self.writes.lock().contains_key(&fh),
            },
            None if is_write(flags) => cached(flags),
            None => {
                self.prime(ino, fh, size);
                cached(flags)
            }
        }
    }

    /// Stores small file `ino` (open to read as `fh`, `size` bytes) in the
    /// kernel's cache at its first open, so its first read asks nothing (see
    /// `first_read.rs`). A file that changed size since is stored as it is now,
    /// which is what a read would have answered.
    fn prime(&self, ino: u64, fh: u64, size: u64) {
        if size == 0 || size >= PASS_FROM {
            return;
        }
        let Some(_turn) = self.cache.primed().first_open(ino) else {
            return;
        };
        let (Ok(h), Some(kernel)) = (self.handles.get(fh), self.notifier.get()) else {
            return;
        };
        if let Handle::File { file, .. } = &*h
            && let Ok(data) = read_at(file, 0, size as usize)
        {
            kernel.store(ino, &data);
        }
    }

    /// The backing id handle `fh` (a real file, `ino`) is passed through with,
    /// if any; `register` asks the kernel for a new one.
    pub(super) fn backing(
        &self,
        ino: u64,
        fh: u64,
        register: Register<'_>,
    ) -> Option<Arc<Backing>> {
        self.route(ino, fh, true, register)
    }

    /// The backing id of handle `fh` on `ino`, if it is passed through; `pass`:
    /// whether it should be, when its inode is free to choose.
    fn route(&self, ino: u64, fh: u64, pass: bool, register: Register<'_>) -> Option<Arc<Backing>> {
        let h = self.handles.get(fh).ok()?;
        let Handle::File { file, writer, .. } = &*h else {
            return None;
        };
        self.backings
            .open((ino, *writer), pass, file.as_fd(), register)
    }

    pub(super) fn readlink(&self, ino: u64) -> Res<Vec<u8>> {
        let l = self.loc(ino)?;
        let target = rustix::fs::readlinkat(l.dir(), &l.name, Vec::new()).map_err(errno)?;
        Ok(target.into_bytes())
    }

    pub(super) fn fallocate(&self, fh: u64, (offset, length): (u64, u64), mode: i32) -> Res<()> {
        match &*self.handles.get(fh)? {
            Handle::File { file, ino, .. } => self.direct_write(*ino, || {
                let how = rustix::fs::FallocateFlags::from_bits_retain(mode as u32);
                rustix::fs::fallocate(file, how, offset, length).map_err(errno)
            }),
            _ => Err(Errno::EOPNOTSUPP),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_means_any_write_access_or_truncation() {
        assert!(!is_write(libc::O_RDONLY));
        assert!(is_write(libc::O_WRONLY));
        assert!(is_write(libc::O_RDWR));
        assert!(is_write(libc::O_RDONLY | libc::O_TRUNC));
    }
}
