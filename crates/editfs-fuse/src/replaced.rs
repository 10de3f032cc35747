//! Opens of a node whose name another file took since the kernel looked it up
//! (a commit or a rename put a new version there).
//!
//! Such an open is answered ESTALE, and the kernel looks the name up again and
//! retries, but only once: were the name replaced again in the meantime, the
//! retry would fail too, and the open with it, where natively an open of a name
//! that exists never fails. So the retry is served instead: with the node's own
//! file while a handle still holds it (as natively), else with the file the
//! name holds now, which it held at an instant within the open (the retry's
//! permission check, which asks for the node's attributes first, gets that
//! file's). The first answer stays ESTALE, so that the kernel drops its stale
//! entry and later opens meet the new node.
//!
//! A file served for another node only stands in: the kernel's inode is still
//! the replaced node, whose cached pages and size are not this file's, so it
//! is read through the daemon with direct I/O, and the node is not passed
//! through while it is open (the kernel fails an open that is not passed
//! through once one is: see `passthrough.rs`); if it already is, the stand-in
//! is passed through too, and the kernel reads the node's own file through
//! the backing file it holds. Only reads are served so:
//! writes, truncations and program loads keep ESTALE.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use rustix::fs::{Access, AtFlags, FileType, Mode, OFlags};

use super::core::{Core, Loc, attr};
use super::handles::Handle;
use super::nodes::ROOT;
use super::real_files::{EXEC_OPEN, truncates};
use super::stale_retries::Retry;
use super::types::{Errno, Opened, Register, Requester, Res, Served, Timed, VIRTUAL_TTL, errno};
use crate::transaction::Caller;

impl Core {
    /// Whether `who` may open real node `ino` as `flags` asks, asked of the
    /// kernel with `who`'s credentials on SOURCE's file (see `may_change`:
    /// the kernel checked only the mode bits the mount shows, not SOURCE's
    /// POSIX ACLs). A name that no longer holds the node is left to the open,
    /// which answers ESTALE for it; so the file checked is the file opened.
    pub(super) fn may_open(&self, who: Requester, ino: u64, flags: i32) -> Res<()> {
        if who.uid == 0 || ino == ROOT || !rustix::process::geteuid().is_root() {
            return Ok(());
        }
        let loc = self.loc(ino)?;
        let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(pinned) = rustix::fs::openat(loc.dir(), &loc.name, how, Mode::empty()) else {
            return Ok(());
        };
        match rustix::fs::fstat(&pinned) {
            Ok(st) if self.ids.of(&st) == ino && crate::store::caller::has_acl(pinned.as_fd()) => {}
            _ => return Ok(()),
        }
        let access = if flags & EXEC_OPEN != 0 {
            Access::EXEC_OK
        } else {
            super::dirs::access_for(OFlags::from_bits_retain(flags as u32))
        };
        who.caller().may(pinned.as_fd(), access).map_err(errno)
    }

    /// Opens real node `ino` for `who` with the open flags `flags`, passed
    /// through when `register` gets a backing id for it.
    pub(super) fn open_file(
        &self,
        who: Requester,
        ino: u64,
        flags: i32,
        register: Register<'_>,
    ) -> Res<Opened> {
        let reads_only = flags & libc::O_ACCMODE == libc::O_RDONLY
            && !truncates(flags)
            && flags & EXEC_OPEN == 0;
        self.may_open(who, ino, flags)?;
        let (fh, size) = match self.open_real(ino, flags, who.pid) {
            Err(Errno::ESTALE)
                if reads_only
                    && ino != ROOT
                    && let Some(retry) = self.retries.again(who.pid) =>
            {
                match self.open_replaced(ino, flags, &who.caller(), retry)? {
                    (fh, Some(served)) => return Ok(Opened { fh, served }),
                    // Its own file, held by another handle: its mode is set.
                    (fh, None) => (fh, 0),
                }
            }
            Err(Errno::ESTALE) => {
                self.retries.told(who.pid);
                return Err(Errno::ESTALE);
            }
            other => {
                let opened = other?;
                self.retries.opened(who.pid);
                opened
            }
        };
        let served = self.serve_open((ino, fh), flags, size, register);
        Ok(Opened { fh, served })
    }

    /// `getattr` for thread `pid`. The permission check of an open (and
    /// `stat`) asks for a node's attributes: a stale node is ESTALE on the
    /// first try, and on the kernel's retry it has those of the file the name
    /// holds now, which the retried open is then served (`open_replaced`).
    pub(super) fn getattr_for(&self, who: Requester, ino: u64, fh: Option<u64>) -> Res<Timed> {
        let pid = who.pid;
        match self.getattr(who, ino, fh) {
            Err(Errno::ESTALE)
                if ino != ROOT
                    && let Some(retry) = self.retries.retrying(pid) =>
            {
                self.stat_replaced(ino, retry)
            }
            Err(Errno::ESTALE) => {
                self.retries.told(pid);
                Err(Errno::ESTALE)
            }
            other => other,
        }
    }

    /// The attributes of the regular file the name of replaced node `ino`
    /// holds now, under `ino`, and cached for no time: they are not the node's own.
    fn stat_replaced(&self, ino: u64, retry: Retry) -> Res<Timed> {
        let loc = self.retry_loc(ino, retry)?;
        let st = rustix::fs::statat(loc.dir(), &loc.name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|_| Errno::ESTALE)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Errno::ESTALE);
        }
        Ok((attr(&st, ino), VIRTUAL_TTL))
    }

    /// Serves the retried read-only open (`flags`) of replaced node `ino` for
    /// `caller`: the handle, and how it is served if it stands in (`None`: it
    /// is the node's own file, served as any).
    fn open_replaced(
        &self,
        ino: u64,
        flags: i32,
        caller: &Caller,
        retry: Retry,
    ) -> Res<(u64, Option<Served>)> {
        let writer = super::real_files::writer(flags);
        let strip = libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY;
        let flags = OFlags::from_bits_retain((flags & !strip) as u32) | OFlags::CLOEXEC;
        if let Some(file) = self.reopen(ino, flags) {
            log::debug!("open of replaced node {ino:#x}: its own file, still open");
            return Ok((self.handles.add(Handle::File { file, ino, writer }), None));
        }
        let loc = self.retry_loc(ino, retry)?;
        // Nothing there, or not a file: the kernel's own lookup says what is.
        let fd = rustix::fs::openat(
            loc.dir(),
            &loc.name,
            flags | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|_| Errno::ESTALE)?;
        let st = rustix::fs::fstat(&fd).map_err(errno)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Errno::ESTALE);
        }
        // The kernel checked the caller's access to the replaced file, not to this one.
        caller.may(fd.as_fd(), Access::READ_OK).map_err(errno)?;
        log::debug!("open of replaced node {ino:#x}: the file its name holds now");
        let fh = self.handles.add(Handle::File {
            file: File::from(fd),
            ino,
            writer,
        });
        let served = match self.backings.stand_in(ino) {
            // Read only: nothing to record at its close.
            Some(backing) => Served::Passed {
                backing,
                flush: false,
            },
            None => Served::Direct,
        };
        Ok((fh, Some(served)))
    }

    /// The place whose file stands in for replaced node `ino` in `retry`.
    fn retry_loc(&self, ino: u64, retry: Retry) -> Res<Loc> {
        match retry.place_of(ino) {
            Some((parent, name)) => Ok(Loc {
                dir: self.dir_of(parent)?,
                name,
            }),
            None => self.last_loc(ino),
        }
    }

    /// Node `ino`'s own file opened anew with `flags`, while a handle holds it.
    fn reopen(&self, ino: u64, flags: OFlags) -> Option<File> {
        let own = |h: &Arc<Handle>| match &**h {
            Handle::File { file, .. } => rustix::fs::fstat(file)
                .is_ok_and(|st| self.ids.of(&st) == ino)
                .then(|| file.as_raw_fd()),
            _ => None,
        };
        let handles = self.handles.all_open_on(ino);
        let fd = handles.iter().find_map(own)?;
        // The descriptor's link in /proc leads to exactly its file, unlinked or not.
        let link = format!("/proc/self/fd/{fd}");
        rustix::fs::open(link.as_str(), flags, Mode::empty())
            .ok()
            .map(File::from)
    }
}
