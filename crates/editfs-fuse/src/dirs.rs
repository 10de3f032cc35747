//! Directories: what they list, and the names made, renamed and removed in
//! them. Under `--edits-only` no existing file may lose or change its content
//! this way: only transactions change files.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::core::{Core, Loc, attr, file_type};
use super::handles::Handle;
use super::listings::Reader;
use super::names::Control;
use super::nodes::{Kind, ROOT};
use super::real_files::chmod_nofollow;
use super::state;
use super::types::{
    Entry, Errno, FileType, Opened, Register, Requester, Res, Served, Timed, VIRTUAL_TTL, errno,
};
use super::watches::Lease;
use crate::store::{Keys, STATE_DIR};

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

/// The access an open with `flags` asks of an existing file.
pub(super) fn access_for(flags: OFlags) -> rustix::fs::Access {
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

/// Whether `who` may add or remove names in `dir`, asked of the kernel with
/// `who`'s credentials on SOURCE's directory. The kernel checked the mode bits
/// and the sticky bit the mount shows before the request came
/// (`default_permissions`), but not SOURCE's POSIX ACLs, which may take
/// writing from a user the bits grant it to. Asked only when the daemon acts
/// for another user (it is root, the user is not; otherwise the call itself
/// is made with that user's rights) and the directory has an ACL.
fn may_change(who: Requester, dir: &OwnedFd) -> Res<()> {
    if who.uid == 0
        || !rustix::process::geteuid().is_root()
        || !crate::store::caller::has_acl(dir.as_fd())
    {
        return Ok(());
    }
    who.caller()
        .may(
            dir.as_fd(),
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )
        .map_err(errno)
}

impl Core {
    /// The parent of a new name must be a real directory, one `who` may write
    /// (see `may_change`), and the name not `.editfs` at the root.
    fn new_name(&self, who: Requester, parent: u64, name: &OsStr) -> Res<Arc<OwnedFd>> {
        if parent == ROOT && name == state::NAME {
            return Err(Errno::EEXIST);
        }
        let dir = self.dir_of(parent)?;
        may_change(who, &dir)?;
        Ok(dir)
    }

    /// Makes `name` in `parent` with `how` and permissions `perm`, gives it to its
    /// maker, and answers its entry.
    fn make(
        &self,
        who: Requester,
        parent: u64,
        name: &OsStr,
        perm: u32,
        how: impl FnOnce(&OwnedFd) -> rustix::io::Result<()>,
    ) -> Res<Timed> {
        let dir = self.new_name(who, parent, name)?;
        how(&dir).map_err(errno)?;
        self.unmask(&*dir, name, perm)?;
        self.give_to(who, &*dir, name);
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
    fn give_to(&self, who: Requester, dir: &impl AsFd, name: &OsStr) {
        if self.owner.0 != 0 || who.uid == 0 {
            return;
        }
        let uid = rustix::fs::Uid::from_raw(who.uid);
        let setgid = rustix::fs::fstat(dir).is_ok_and(|s| s.st_mode & libc::S_ISGID != 0);
        let gid = (!setgid).then(|| rustix::fs::Gid::from_raw(who.gid));
        if let Err(e) = rustix::fs::chownat(dir, name, Some(uid), gid, AtFlags::SYMLINK_NOFOLLOW) {
            log::warn!(
                "cannot give {} to uid {}: {e}",
                name.to_string_lossy(),
                who.uid
            );
        }
    }

    fn entry_at(&self, parent: u64, dir: &impl AsFd, name: &OsStr) -> Res<Timed> {
        let lease = self.lease_in(parent);
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        let id = self.ids.of(&st);
        self.nodes.write().remember(id, parent, name);
        let a = attr(&st, id);
        Ok((a, self.ttl_after(lease, st.st_dev, &a)))
    }

    /// A name the user may change: real, in a real directory, not a control file.
    fn changeable(&self, who: Requester, parent: u64, name: &OsStr) -> Res<Arc<OwnedFd>> {
        if parent == ROOT && name == OsStr::new(STATE_DIR) {
            return Err(Errno::EBUSY);
        }
        let dir = self.dir_of(parent)?;
        may_change(who, &dir)?;
        // The name is looked at before SOURCE: most names are no control
        // file's, and `rm -r` then pays no `stat` per file for this.
        if self.settings.suffixes.parse(name).is_some()
            && matches!(
                rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW),
                Err(rustix::io::Errno::NOENT)
            )
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

    /// `keeps`: the file renamed over `new` leaves its report to the new one.
    fn after_rename(&self, old: (u64, &OsStr), new: (u64, &OsStr), exchange: bool, keeps: bool) {
        let from = self.path(old.0).map(|p| p.join(old.1)).ok();
        let to = self.path(new.0).map(|p| p.join(new.1)).ok();
        // A rename changes the ctime of what it moves (and an exchange, of both).
        let moved = {
            let nodes = self.nodes.read();
            [nodes.child(old.0, old.1), nodes.child(new.0, new.1)]
        };
        moved
            .into_iter()
            .flatten()
            .for_each(|id| self.cache.touched(id));
        let mut nodes = self.nodes.write();
        if exchange {
            nodes.exchanged(old, new);
        } else {
            nodes.renamed(old.0, old.1, new.0, new.1);
        }
        drop(nodes);
        match (from, to) {
            (Some(from), Some(to)) if exchange => self.reports.swap(from, to),
            (Some(from), to) if !exchange => self.reports.follow(from, to, keeps),
            _ => {}
        }
    }
    pub(super) fn list(&self, ino: u64) -> Res<Vec<Entry>> {
        if let Kind::State(rel) = self.kind(ino)? {
            return self.state_entries(ino, &rel);
        }
        let dir = self.dir_of(ino)?;
        // An entry's number is on the directory's device (a mount point's too,
        // as natively: it shows the directory it covers).
        let dev = rustix::fs::fstat(&*dir).map_err(errno)?.st_dev;
        let mut out = Vec::new();
        let mut regular = Vec::new();
        for e in rustix::fs::Dir::read_from(&dir).map_err(errno)? {
            let e = e.map_err(errno)?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name == "." || name == ".." || (ino == ROOT && name == state::NAME) {
                continue;
            }
            let kind = kind_of(e.file_type());
            if kind == FileType::RegularFile {
                regular.push(name.to_owned());
            }
            out.push(Entry {
                ino: self.ids.real(dev, e.ino()),
                kind,
                name: name.to_owned(),
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

    /// The attributes of a listed entry, read now; `None` if it has gone.
    fn entry_attr(&self, (dir, lease): (Option<&OwnedFd>, Lease), e: &Entry) -> Option<Timed> {
        let real = self
            .nodes
            .read()
            .get(e.ino)
            .is_none_or(|n| n.kind == Kind::Real);
        match (real, dir) {
            (true, Some(_)) if let Some((a, left)) = self.still_sent(e.ino) => {
                Some((a, self.ttl_again(lease, left)))
            }
            (true, Some(dir)) => {
                let st = rustix::fs::statat(dir, &e.name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
                let a = attr(&st, self.ids.of(&st));
                Some(self.cache.sent(a, self.ttl_after(lease, st.st_dev, &a)))
            }
            _ => self.getattr_shared(e.ino, None).ok(),
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

    pub(super) fn mknod(
        &self,
        who: Requester,
        (parent, name): (u64, &OsStr),
        (mode, umask): (u32, u32),
        rdev: u32,
    ) -> Res<Timed> {
        let kind = rustix::fs::FileType::from_raw_mode(mode);
        let perm = mode & !umask & 0o7777;
        self.make(who, parent, name, perm, |dir| {
            rustix::fs::mknodat(dir, name, kind, Mode::from_raw_mode(perm), u64::from(rdev))
        })
    }

    pub(super) fn mkdir(
        &self,
        who: Requester,
        (parent, name): (u64, &OsStr),
        (mode, umask): (u32, u32),
    ) -> Res<Timed> {
        let perm = mode & !umask & 0o7777;
        self.make(who, parent, name, perm, |dir| {
            rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(perm))
        })
    }

    pub(super) fn symlink(
        &self,
        who: Requester,
        (parent, name): (u64, &OsStr),
        target: &Path,
    ) -> Res<Timed> {
        self.make(who, parent, name, 0, |dir| {
            rustix::fs::symlinkat(target, dir, name)
        })
    }

    pub(super) fn unlink(&self, who: Requester, parent: u64, name: &OsStr) -> Res<()> {
        let dir = self.changeable(who, parent, name)?;
        self.edits_only_keeps(&dir, name)?;
        let gone = self.path(parent).map(|p| p.join(name)).ok();
        let loc = Loc {
            dir,
            name: name.to_owned(),
        };
        match &gone {
            Some(rel) => self.remove_file(rel, &loc, who.pid),
            None => rustix::fs::unlinkat(loc.dir(), name, AtFlags::empty()),
        }
        .map_err(errno)?;
        // Its other names, if any, now count one link fewer.
        let id = self.nodes.write().unlinked(parent, name);
        if let Some(id) = id {
            self.cache.touched(id);
        }
        if let Some(gone) = gone {
            self.reports.follow(gone, None, false);
        }
        Ok(())
    }

    pub(super) fn rmdir(&self, who: Requester, parent: u64, name: &OsStr) -> Res<()> {
        let dir = self.changeable(who, parent, name)?;
        let before = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW);
        rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR).map_err(errno)?;
        let removed = self.nodes.write().unlinked(parent, name);
        if let (Some(ino), Ok(mut st)) = (removed, before) {
            st.st_nlink = 0;
            self.cache.keep_removed_dir(ino, st);
        }
        Ok(())
    }

    /// Renames with the kernel's `renameat2` flags `flags`.
    pub(super) fn rename(
        &self,
        who: Requester,
        (parent, name): (u64, &OsStr),
        (newparent, newname): (u64, &OsStr),
        flags: u32,
    ) -> Res<()> {
        let from = self.changeable(who, parent, name)?;
        let to = self.changeable(who, newparent, newname)?;
        self.edits_only_keeps(&from, name)?;
        self.edits_only_keeps(&to, newname)?;
        let dest = self.path(newparent)?.join(newname);
        let source = self.path(parent)?.join(name);
        let dir = rustix::fs::statat(&*from, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
        });
        // A file's rename takes both names' store locks, as a transaction
        // takes them: a commit on either file finishes its install first, and
        // none begins meanwhile, so no commit puts its new content at a name
        // the file just left. A directory's takes the locks of the files it
        // holds instead, all at once (`move_dir`): a commit inside it installs
        // through its directory, which moves with it, and taking the files'
        // locks after the names' would take them out of order.
        let names = Keys::new()
            .path(&source.to_string_lossy())
            .path(&dest.to_string_lossy());
        let _names = match dir {
            true => None,
            false => Some(self.store.lock(&names).map_err(|e| {
                log::error!("rename of {}: {e}", source.display());
                errno(rustix::io::Errno::IO)
            })?),
        };
        // What it moves may be a file (or hold one) a commit left unsynced,
        // which recovery finds by its path.
        self.store.settle_before_move();
        let how = rustix::fs::RenameFlags::from_bits_retain(flags);
        // `sed -i` and many editors save by renaming a new file over the old one.
        let over = Loc {
            dir: to.clone(),
            name: newname.to_owned(),
        };
        let replaces = rustix::fs::statat(&*to, newname, AtFlags::SYMLINK_NOFOLLOW).is_ok();
        let pending = self.keep_before_write(&dest, &over, who.pid);
        let replaced = self.reported_access(&dest, &to, newname);
        let exchange = how.contains(rustix::fs::RenameFlags::EXCHANGE);
        let rename = || rustix::fs::renameat_with(&from, name, &to, newname, how);
        let here = Loc {
            dir: from.clone(),
            name: name.to_owned(),
        };
        let renamed = if exchange {
            rename().map(|()| false)
        } else if dir {
            self.move_dir((&here, &source), &dest, who.pid, rename)
                .map(|()| true)
        } else {
            self.move_file((&here, &source), (&over, &dest), who.pid, rename)
        };
        if let Some(p) = pending {
            self.finish_write(&p, Some(&over));
        }
        if !renamed.map_err(errno)? {
            self.carry_creation(&source, &dest, replaces);
        }
        let keeps = replaced.is_some_and(|old| {
            rustix::fs::statat(&*to, newname, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|new| shows_no_more(&old, &new))
        });
        self.after_rename((parent, name), (newparent, newname), exchange, keeps);
        Ok(())
    }

    /// The owner and mode of the file at `name` in `dir` (the mount's `rel`)
    /// when its `F.status` holds a report, which a file renamed over it may
    /// keep.
    fn reported_access(
        &self,
        rel: &Path,
        dir: &impl AsFd,
        name: &OsStr,
    ) -> Option<rustix::fs::Stat> {
        if !self.reports.has(rel) {
            return None;
        }
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
    }

    pub(super) fn link(
        &self,
        who: Requester,
        ino: u64,
        (newparent, newname): (u64, &OsStr),
    ) -> Res<Timed> {
        self.real_only(ino)?;
        let loc = self.loc(ino)?;
        let dir = self.new_name(who, newparent, newname)?;
        // Recovery would write a torn new content again under one name only.
        self.store.settle_before_move();
        rustix::fs::linkat(loc.dir(), &loc.name, &dir, newname, AtFlags::empty()).map_err(errno)?;
        self.cache.touched(ino);
        self.entry_at(newparent, &dir, newname)
    }

    /// Creates (or opens) `name` in `parent` with open flags `flags`; the new
    /// handle is passed through when `register` gets a backing id for it.
    pub(super) fn create(
        &self,
        who: Requester,
        (parent, name): (u64, &OsStr),
        (mode, umask): (u32, u32),
        flags: i32,
        register: Register<'_>,
    ) -> Res<(Timed, Opened)> {
        let dir = self.new_name(who, parent, name)?;
        let lease = self.lease_in(parent);
        let writer = super::real_files::writer(flags);
        let flags = OFlags::from_bits_retain((flags & !libc::O_NOCTTY) as u32)
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC;
        let perm = mode & !umask & 0o7777;
        // A file another user made since the kernel looked the name up had
        // no permission checked by the kernel: it is asked here.
        let allowed = |fd: BorrowedFd<'_>| who.caller().may(fd, access_for(flags)).map_err(errno);
        let how = (flags, Mode::from_raw_mode(perm));
        let (fd, made) = create_or_open(&*dir, name, how, allowed)?;
        let mut pending = None;
        if made {
            self.unmask(&*dir, name, perm)?;
            self.give_to(who, &dir, name);
            pending = self.keep_before_create(&self.path(parent)?.join(name), who);
        }
        let st = rustix::fs::fstat(&fd).map_err(errno)?;
        let id = self.ids.of(&st);
        self.nodes.write().remember(id, parent, name);
        let fh = self.handles.add(Handle::File {
            file: File::from(fd),
            ino: id,
            writer,
        });
        let flush = pending.is_some();
        if let Some(p) = pending {
            self.writes.lock().insert(fh, p);
        }
        let served = match self.backing(id, fh, register) {
            Some(backing) => Served::Passed { backing, flush },
            None => Served::Plain,
        };
        let a = attr(&st, id);
        Ok((
            (a, self.ttl_after(lease, st.st_dev, &a)),
            Opened { fh, served },
        ))
    }

    /// A real file in directory node `dir` is being opened. A read of a
    /// passed-through file makes the kernel drop that file's atime, so the next
    /// `fstat` of it (grep's, before reading) would cost a getattr per file:
    /// the directory's cached listing is dropped instead, once until it is
    /// listed again, and that listing's one readdirplus refreshes them all.
    /// Told holding no lock: the kernel's drop of a listing waits for no request.
    pub(super) fn opening_in(&self, dir: u64) {
        let first = self.cache.first_open_in(dir);
        if let (true, Some(kernel)) = (first, self.notifier.get()) {
            kernel.forget_node(dir);
        }
    }

    /// The entries of directory `ino` for process `pid`'s listing request
    /// from `offset`: read from SOURCE at the listing's start, else the reading
    /// that process is part way through (`listings.rs`).
    fn entries(&self, (ino, pid): Reader, offset: u64) -> Res<Arc<Vec<Entry>>> {
        if offset > 0
            && let Some(kept) = self.cache.listing((ino, pid))
        {
            return Ok(kept);
        }
        let read = Arc::new(self.list(ino)?);
        self.cache.keep_listing((ino, pid), read.clone());
        Ok(read)
    }

    /// Whether directory `ino` lists as SOURCE's own, entry for entry, so that
    /// each entry carries SOURCE's own seek cookie as its offset: a listing
    /// resumed after the directory changed (files removed while it is walked)
    /// then goes on where it was, as natively, and nothing is kept here. Not
    /// where the mount adds entries SOURCE has no cookie for, the control
    /// files when listed (there the listing read at offset 0 is kept,
    /// `listings.rs`).
    fn lists_in_place(&self, ino: u64) -> bool {
        matches!(self.kind(ino), Ok(Kind::Real)) && !self.settings.show_control_files
    }

    /// Hands the entries of directory `ino`, `.` and `..` included, from
    /// `offset` on to `visit` (the entry, the offset after it) until it says
    /// it is full, for process `pid`'s listing request.
    ///
    /// A real directory's listing from its start is watched before it is read,
    /// so no change after the reading goes untold, and has the read-ahead
    /// thread read the subdirectories it hands over (`prefetch.rs`).
    fn walk(
        &self,
        reader: Reader,
        offset: u64,
        mut visit: impl FnMut(&Entry, u64) -> bool,
    ) -> Res<()> {
        let ino = reader.0;
        let starts = offset == 0 && matches!(self.kind(ino)?, Kind::Real);
        if starts {
            self.ttl_in(ino);
            self.cache.listing_from_start(ino);
        }
        let mut any = false;
        let mut subdirs = Vec::new();
        let mut seen = |e: &Entry, next| {
            any = true;
            let full = visit(e, next);
            // Not `.` or `..`: not a subdirectory to read ahead.
            if starts && !full && e.kind == FileType::Directory && e.ino != ino {
                subdirs.push((e.ino, e.name.clone()));
            }
            full
        };
        if self.lists_in_place(ino) {
            self.walk_in_place(ino, offset, &mut seen)?;
        } else {
            self.walk_kept(reader, offset, &mut seen)?;
        }
        if !subdirs.is_empty() {
            self.cache
                .prefetch()
                .listed(|| self.dir_of(ino).ok(), subdirs);
        }
        if !any {
            self.listed_to_end(reader);
        }
        Ok(())
    }

    /// `walk` through SOURCE's own listing, from its seek cookie `offset`.
    fn walk_in_place(
        &self,
        ino: u64,
        offset: u64,
        visit: &mut impl FnMut(&Entry, u64) -> bool,
    ) -> Res<()> {
        let dir = self.dir_of(ino)?;
        // A descriptor of its own: the kept one's position is shared.
        let how = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&*dir, ".", how, Mode::empty()).map_err(errno)?;
        // An entry's number is on the directory's device (a mount point's too,
        // as natively: it shows the directory it covers).
        let dev = rustix::fs::fstat(&fd).map_err(errno)?.st_dev;
        if offset > 0 {
            rustix::fs::seek(&fd, rustix::fs::SeekFrom::Start(offset)).map_err(errno)?;
        }
        let mut buf = Vec::with_capacity(8 * 1024);
        let mut raw = rustix::fs::RawDir::new(&fd, buf.spare_capacity_mut());
        while let Some(e) = raw.next() {
            let e = e.map_err(errno)?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            let entry = match name.as_bytes() {
                b"." | b".." => Entry {
                    ino,
                    kind: FileType::Directory,
                    name: name.to_owned(),
                },
                // Never listed: recursive walks must not read kept versions.
                _ if ino == ROOT && name == state::NAME => continue,
                _ => Entry {
                    ino: self.ids.real(dev, e.ino()),
                    kind: kind_of(e.file_type()),
                    name: name.to_owned(),
                },
            };
            if visit(&entry, e.next_entry_cookie()) {
                break;
            }
        }
        Ok(())
    }

    /// `walk` through the listing this reader is part way through, read from
    /// SOURCE at offset 0: `.` and `..` at offsets 0 and 1, then its entries.
    fn walk_kept(
        &self,
        reader: Reader,
        offset: u64,
        visit: &mut impl FnMut(&Entry, u64) -> bool,
    ) -> Res<()> {
        let entries = self.entries(reader, offset)?;
        let dot = |name: &str| Entry {
            ino: reader.0,
            kind: FileType::Directory,
            name: name.into(),
        };
        let dots = [dot("."), dot("..")];
        let all = dots.iter().chain(entries.iter());
        for (i, e) in all.enumerate().skip(offset as usize) {
            if visit(e, i as u64 + 1) {
                break;
            }
        }
        Ok(())
    }

    /// A listing request found the end of `reader`'s listing. The kernel keeps
    /// the listing, but in a real directory no watch covers, where it would
    /// miss the next change made directly in SOURCE: there it is dropped.
    /// Told holding no lock: the kernel waits for no request to drop a
    /// listing, this one's included.
    fn listed_to_end(&self, reader: Reader) {
        self.cache.listing_done(reader);
        let ino = reader.0;
        let watched = self.watches.as_ref().is_some_and(|w| w.covers(ino));
        if !watched
            && matches!(self.kind(ino), Ok(Kind::Real))
            && let Some(kernel) = self.notifier.get()
        {
            kernel.forget_node(ino);
        }
    }

    /// Hands the entries of directory `ino` from `offset` on to `add` (node
    /// id, the offset after it, type, name) until it says it is full.
    pub(super) fn readdir(
        &self,
        reader: Reader,
        offset: u64,
        mut add: impl FnMut(u64, u64, FileType, &OsStr) -> bool,
    ) -> Res<()> {
        self.walk(reader, offset, |e, next| add(e.ino, next, e.kind, &e.name))
    }

    /// Hands the entries of directory `ino` from `offset` on to `add` (node
    /// id, the offset after it, name, attributes) until it says it is full;
    /// each entry handed over counts as a lookup.
    pub(super) fn readdirplus(
        &self,
        reader: Reader,
        offset: u64,
        mut add: impl FnMut(u64, u64, &OsStr, &Timed) -> bool,
    ) -> Res<()> {
        let ino = reader.0;
        let dir = match self.kind(ino) {
            Ok(Kind::Real) => (self.dir_of(ino).ok(), self.lease_in(ino)),
            _ => (None, Lease::short()),
        };
        let Ok((here, _)) = self.getattr_shared(ino, None) else {
            return Err(Errno::ENOENT);
        };
        self.walk(reader, offset, |e, next| {
            // The kernel looks neither `.` nor `..` up.
            if e.name == "." || e.name == ".." {
                return add(0, next, &e.name, &(here, VIRTUAL_TTL));
            }
            let Some(timed) = self.entry_attr((dir.0.as_deref(), dir.1), e) else {
                return false;
            };
            let full = add(timed.0.ino, next, &e.name, &timed);
            if !full {
                self.counted(ino, e, timed.0.ino);
            }
            full
        })
    }

    pub(super) fn fsyncdir(&self, ino: u64) -> Res<()> {
        rustix::fs::fsync(&*self.dir_of(ino)?).map_err(errno)
    }
}

/// Whether `new`, renamed over `old`, lets no one read what `old` did not: the
/// same owner and group, and no read bit `old` lacked. `git checkout -- F`,
/// `sed -i` and editors replace a file so, and `F.status` then still shows the
/// latest transaction on `F`, whose diff only readers of the old file could see.
fn shows_no_more(old: &rustix::fs::Stat, new: &rustix::fs::Stat) -> bool {
    old.st_uid == new.st_uid && old.st_gid == new.st_gid && new.st_mode & 0o444 & !old.st_mode == 0
}

/// The mount's type for a type SOURCE's listing gives.
fn kind_of(t: rustix::fs::FileType) -> FileType {
    match t {
        rustix::fs::FileType::Directory => FileType::Directory,
        rustix::fs::FileType::Symlink => FileType::Symlink,
        rustix::fs::FileType::RegularFile => FileType::RegularFile,
        rustix::fs::FileType::Fifo => FileType::NamedPipe,
        rustix::fs::FileType::Socket => FileType::Socket,
        rustix::fs::FileType::CharacterDevice => FileType::CharDevice,
        rustix::fs::FileType::BlockDevice => FileType::BlockDevice,
        rustix::fs::FileType::Unknown => FileType::RegularFile,
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
}
