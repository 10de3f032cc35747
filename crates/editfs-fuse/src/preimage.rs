//! Pre-images of changes that bypass the control files: writes (`sed -i`, an
//! editor's save, `cp` over a file), taken once per open-for-write of an existing
//! file, and removals (`rm`, `rm -r`), so they can be undone like transactions.
//! What is recorded is decided here; how, in `transaction::direct`.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::core::{Core, Loc};
use super::preimage_rules::Created;
use super::processes::{kin, last_close};
use super::types::Requester;
use crate::store::{Access, LogKind as Kind, Objects, Side, Verdict};
use crate::transaction::Who;
use crate::transaction::direct::{self, Pending};

/// How long a file made through the mount must stay at its name after its
/// writer closed it to be recorded as created: far longer than an editor takes
/// to rename its temporary file over the file it saves.
const SETTLED: Duration = Duration::from_millis(200);

/// The existing regular file `name` in `dir`, open for reading, and its size.
fn open_regular(loc: &Loc) -> Option<(File, u64)> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    // Nothing there yet (a new file, a rename onto a free name): nothing to keep.
    let fd = rustix::fs::openat(loc.dir(), &loc.name, flags, Mode::empty()).ok()?;
    let file = File::from(fd);
    let meta = file.metadata().ok()?;
    meta.is_file().then_some((file, meta.len()))
}

/// The latest content of `rel` the store keeps, and the transaction that kept
/// it: what its latest transaction left, or what its latest removal took away
/// (a pre-image with no version after it).
fn last_kept(objects: &Objects, rel: &str) -> Option<(Vec<u8>, u64)> {
    let pre = objects.txs(Side::Pre, rel).into_iter().max();
    let post = objects.txs(Side::Post, rel).into_iter().max();
    match (pre, post) {
        (Some(removed), after) if after.is_none_or(|a| a < removed) => {
            Some((objects.read(Side::Pre, rel, removed)?, removed))
        }
        (_, Some(after)) => Some((objects.read(Side::Post, rel, after)?, after)),
        _ => None,
    }
}

impl Core {
    pub(super) fn keeps(&self, rel: &Path) -> bool {
        !self.settings.preimages.skips(self.source.root(), rel)
    }

    /// Keeps the current bytes of a file about to be written without a control
    /// file; the write is recorded once `finish_write` sees its result.
    pub(super) fn keep_before_write(&self, rel: &Path, loc: &Loc, pid: u32) -> Option<Pending> {
        if !self.keeps(rel) {
            return None;
        }
        let (mut file, size) = open_regular(loc)?;
        let name = rel.to_string_lossy();
        self.written_again(&name, &file);
        let who = Who::process(pid);
        if size > self.settings.preimages.max_size {
            if let Err(e) = direct::skipped(&self.store, Kind::Direct, &name, size, &who) {
                log::error!("{e}");
            }
            return None;
        }
        let access = Access::of_fd(file.as_fd());
        let above = Access::above(loc.dir(), &name);
        direct::begin(&self.store, &name, (&mut file, access, above), &who)
            .map_err(|e| log::error!("cannot keep the pre-image of {name}: {e}"))
            .ok()
    }

    /// A new file made through the mount. At a name with kept versions (an
    /// editor's save that moved the old file away first: `mv F F~`, write F,
    /// `rm F~`; a removal and a new write: `git stash`) it is recorded as a
    /// write over the name's latest kept content, so the name's history goes on
    /// and its undo restores what was there before the save, but only when
    /// that content was `who`'s own (its recorded owner, and `who` could read
    /// it): a file made where another user's was removed starts a history of
    /// its own, root's too, and no undo of it brings the other user's content
    /// into the new file (root's undo would give it root's owner and set-id
    /// bits). Anywhere else it is recorded as created, so an undo or a rewind
    /// removes it again.
    pub(super) fn keep_before_create(&self, rel: &Path, who: Requester) -> Option<Pending> {
        if !self.keeps(rel) {
            return None;
        }
        let name = rel.to_string_lossy();
        self.store.settle_removals_at(&name);
        let created = || {
            let made = self.loc_at(&name).and_then(|l| {
                let access = Access::at(l.dir(), &l.name)?;
                Some((Some(access), Access::above(l.dir(), &name)))
            });
            let made = made.unwrap_or((None, Vec::new()));
            direct::begin_created(&self.store, &name, made, &Who::process(who.pid))
                .map_err(|e| log::error!("cannot record the new file {name}: {e}"))
                .ok()
        };
        let Some((before, tx)) = last_kept(self.store.objects(), &name) else {
            return created();
        };
        let (access, above) = self
            .kept
            .lock()
            .get(self.store.dir(), &name, tx)
            .map_or((None, Vec::new()), |(a, above)| (Some(a), above));
        let own = match access {
            Some(a) => a.uid == who.uid && who.caller().could_read(&a, &above),
            // Kept with no owner recorded: the daemon's user's alone.
            None => who.uid == self.owner.0,
        };
        if !own {
            return created();
        }
        direct::begin(
            &self.store,
            &name,
            (&mut std::io::Cursor::new(before), access, above),
            &Who::process(who.pid),
        )
        .map_err(|e| log::error!("cannot record the new file {name}: {e}"))
        .ok()
    }

    /// Records what the write `pending` began left at `loc`. A file the write
    /// created is recorded a moment later (`record_creations`), once it is
    /// known to stay: `sed -i` and editors make a temporary file and rename it
    /// over the one they save, and that file, gone by then, is no change of
    /// the project.
    pub(super) fn finish_write(&self, pending: &Pending, loc: Option<&Loc>) {
        if pending.created() {
            let made = loc
                .and_then(open_regular)
                .and_then(|(f, _)| f.metadata().ok());
            if let Some(m) = made {
                use std::os::unix::fs::MetadataExt;
                self.created.lock().push(Created {
                    pending: pending.clone(),
                    at: Instant::now(),
                    inode: (m.dev(), m.ino()),
                    written_again: false,
                });
            }
            return;
        }
        self.record_write(pending, loc);
    }

    /// The result is read as the file now at `loc` is, and kept under its
    /// owner and mode: a file renamed over the one written (`mv` of another
    /// user's file onto an agent's own) is that user's, and its content must
    /// not show under the old file's rights.
    fn record_write(&self, pending: &Pending, loc: Option<&Loc>) {
        let mut now = None;
        let after = loc.and_then(open_regular).and_then(|(mut f, size)| {
            now = Access::of_fd(f.as_fd());
            let mut bytes = Vec::with_capacity(size as usize);
            f.read_to_end(&mut bytes).ok().map(|_| bytes)
        });
        let pending = pending.clone().seen_as(now);
        if let Err(e) = direct::finish(&self.store, &pending, after.as_deref()) {
            log::error!("cannot record the write to {}: {e}", pending.rel);
        }
    }

    /// Records the write handle `fh` (of node `ino`) began, if any, when `pid`
    /// closing it holds no other descriptor of the file and no process it
    /// forked or was forked by does (they may share the handle and still
    /// write): otherwise it is recorded at the handle's release. Whichever
    /// comes first takes the pending write, so it is recorded once.
    pub(super) fn finish_write_at_close(&self, ino: u64, fh: u64, pid: u32) {
        if !self.writes.lock().contains_key(&fh)
            || !last_close(pid, ino)
            || kin(pid).is_none_or(|kin| kin.into_iter().any(|k| !last_close(k, ino)))
        {
            return;
        }
        let pending = self.writes.lock().remove(&fh);
        if let Some(p) = pending {
            self.finish_write(&p, self.loc(ino).ok().as_ref());
        }
    }

    /// Records the files made through the mount that are still at their
    /// names `SETTLED` after their writer closed them (every one, with `all`);
    /// a file gone from its name is forgotten, its id unused.
    pub(super) fn record_creations(&self, all: bool) {
        let due: Vec<Created> = {
            let mut created = self.created.lock();
            let (due, wait) = created
                .drain(..)
                .partition(|c| all || c.at.elapsed() >= SETTLED);
            *created = wait;
            due
        };
        for c in due {
            self.record_created(&c);
        }
    }

    /// Records `c` if the file it made is still at its name, read through the
    /// descriptor its identity was checked on: a file put there since (another
    /// user's, renamed or linked onto the name) is not read, and not this
    /// creation. A file over the size limit is recorded without its content.
    fn record_created(&self, c: &Created) {
        let Some((mut file, size)) = self.loc_at(&c.pending.rel).as_ref().and_then(open_regular)
        else {
            return;
        };
        let same = file.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino()) == c.inode
        });
        let rel = &c.pending.rel;
        if !same {
            // Saved over since (`sed -i`, an editor's save): that write kept
            // this file's content as its pre-image, so only that it was made
            // is recorded, or a rewind would take the file for one that was
            // there before and keep it.
            if c.written_again
                && let Err(e) = direct::finish(&self.store, &c.pending, None)
            {
                log::error!("cannot record the new file {rel}: {e}");
            }
            return;
        }
        if size > self.settings.preimages.max_size {
            let who = Who::process(c.pending.who_pid());
            if let Err(e) = direct::skipped(&self.store, Kind::Direct, rel, size, &who) {
                log::error!("{e}");
            }
            return;
        }
        let mut bytes = Vec::with_capacity(size as usize);
        if file.read_to_end(&mut bytes).is_err() {
            return;
        }
        if let Err(e) = direct::finish(&self.store, &c.pending, Some(&bytes)) {
            log::error!("cannot record the new file {rel}: {e}");
        }
    }

    /// A file at `from` moved to `to` through the mount: a creation not
    /// recorded yet goes with it, unless it replaced a file there (then the
    /// write over that file is what is recorded).
    pub(super) fn carry_creation(&self, from: &Path, to: &Path, replaced: bool) {
        let (from, to) = (from.to_string_lossy(), to.to_string_lossy());
        let mut created = self.created.lock();
        if replaced {
            let (gone, rest): (Vec<Created>, Vec<Created>) =
                created.drain(..).partition(|c| c.pending.rel == from);
            *created = rest;
            drop(created);
            // Gone from its name, its content is now the other file's: only
            // that it was made is recorded, where a later write of it was.
            for c in gone.iter().filter(|c| c.written_again) {
                if let Err(e) = direct::finish(&self.store, &c.pending, None) {
                    log::error!("cannot record the file {from}: {e}");
                }
            }
        } else if let Some(c) = created.iter_mut().find(|c| c.pending.rel == from) {
            c.pending.rel = to.into_owned();
        }
    }

    /// Renames `from` (the file `source`) to `to` (`dest`) with `rename`, and
    /// records the move when the policy keeps `source`: the file at `source`
    /// as removed (its content kept first, so a rewind or an undo brings it
    /// back there), and a file that was not at `dest` as created there (a
    /// moment later, as a file made through the mount: see `finish_write`).
    /// A file made through the mount and not recorded yet is no removal: its
    /// creation goes with it instead (`carry_creation`). Says whether the
    /// move was recorded.
    pub(super) fn move_file(
        &self,
        (from, source): (&Loc, &Path),
        (to, dest): (&Loc, &Path),
        pid: u32,
        rename: impl FnOnce() -> rustix::io::Result<()>,
    ) -> rustix::io::Result<bool> {
        let name = source.to_string_lossy();
        let pending = self.created.lock().iter().any(|c| c.pending.rel == name);
        let st = rustix::fs::statat(from.dir(), &from.name, AtFlags::SYMLINK_NOFOLLOW);
        let recorded = !pending
            && self.keeps(source)
            && st.as_ref().is_ok_and(|st| {
                FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                    && st.st_size as u64 <= self.settings.preimages.max_size
            });
        if !recorded {
            return rename().map(|()| false);
        }
        let replaces = rustix::fs::statat(to.dir(), &to.name, AtFlags::SYMLINK_NOFOLLOW).is_ok();
        let size = st.as_ref().map_or(0, |st| st.st_size as u64);
        if let Err(e) = self.store.make_room(size) {
            log::info!("{name}: moved without a pre-image: {e}");
            return rename().map(|()| false);
        }
        let who = self.remover(pid);
        direct::remove(
            &self.store,
            from.dir(),
            &from.name,
            &name,
            &who,
            true,
            rename,
        )?;
        if !replaces && self.keeps(dest) {
            let dest = dest.to_string_lossy();
            let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let held = rustix::fs::openat(to.dir(), &to.name, how, Mode::empty()).ok();
            let inode = held
                .as_ref()
                .and_then(|fd| rustix::fs::fstat(fd).ok())
                .map(|st| (st.st_dev, st.st_ino));
            let made = (
                held.as_ref().and_then(|fd| Access::of_fd(fd.as_fd())),
                Access::above(to.dir(), &dest),
            );
            match (inode, direct::begin_created(&self.store, &dest, made, &who)) {
                (Some(inode), Ok(p)) => self.await_creation(p, inode),
                (None, Ok(_)) => {}
                (_, Err(e)) => log::error!("cannot record {dest}, moved from {name}: {e}"),
            }
        }
        Ok(true)
    }

    /// Records `pending`, a file the inode `inode` put at its name, once it
    /// stayed there a moment (`record_creations`).
    pub(super) fn await_creation(&self, pending: Pending, inode: (u64, u64)) {
        self.created.lock().push(Created {
            pending,
            at: Instant::now(),
            inode,
            written_again: false,
        });
    }

    /// The files beneath the directory `dir` made through the mount whose
    /// creation is not recorded yet.
    pub(super) fn creations_beneath(&self, dir: &str) -> std::collections::HashSet<String> {
        self.created
            .lock()
            .iter()
            .filter(|c| beneath(&c.pending.rel, dir))
            .map(|c| c.pending.rel.clone())
            .collect()
    }

    /// The directory `from` moved to `to`: the creations not recorded yet
    /// beneath it go with it.
    pub(super) fn carry_beneath(&self, from: &str, to: &str) {
        for c in self.created.lock().iter_mut() {
            if beneath(&c.pending.rel, from) {
                c.pending.rel = format!("{to}{}", &c.pending.rel[from.len()..]);
            }
        }
    }

    /// Notes that `file`, at `rel`, a file made through the mount whose
    /// creation is not recorded yet, is written again (an editor's temporary
    /// file written twice before its rename): that write is recorded with its
    /// pre-image, so the creation must be recorded too, even if the file is
    /// renamed over another before it settles (`carry_creation`), or a rewind
    /// would take the file for one that was there before.
    fn written_again(&self, rel: &str, file: &File) {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = file.metadata() else { return };
        for c in self.created.lock().iter_mut() {
            if c.pending.rel == rel && c.inode == (m.dev(), m.ino()) {
                c.written_again = true;
            }
        }
    }

    /// Records at once a creation not recorded yet of `rel`, about to be
    /// removed: the removal's line must come after it, or a rewind would
    /// take the file for one that existed before.
    pub(super) fn record_creation_of(&self, rel: &Path) {
        let rel = rel.to_string_lossy();
        let due: Vec<Created> = {
            let mut created = self.created.lock();
            let (due, rest) = created.drain(..).partition(|c| c.pending.rel == rel);
            *created = rest;
            due
        };
        for c in due {
            self.record_created(&c);
        }
    }

    /// Where `rel` is in SOURCE, if its directory is there.
    pub(super) fn loc_at(&self, rel: &str) -> Option<Loc> {
        let rel = Path::new(rel);
        Some(Loc {
            dir: Arc::new(self.source.dir(rel.parent()?).ok()?),
            name: rel.file_name()?.to_owned(),
        })
    }

    /// Removes `loc` (the file `rel`), keeping its pre-image first when the
    /// policy wants one: a file with no other name, not open through the mount,
    /// is moved into the store and kept in the background; any other is copied
    /// before it goes.
    pub(super) fn remove_file(&self, rel: &Path, loc: &Loc, pid: u32) -> rustix::io::Result<()> {
        self.record_creation_of(rel);
        let unlink = || rustix::fs::unlinkat(loc.dir(), &loc.name, AtFlags::empty());
        if !self.keeps(rel) {
            return unlink();
        }
        let Ok(st) = rustix::fs::statat(loc.dir(), &loc.name, AtFlags::SYMLINK_NOFOLLOW) else {
            return unlink();
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return unlink();
        }
        let name = rel.to_string_lossy();
        let who = self.remover(pid);
        if st.st_size as u64 > self.settings.preimages.max_size {
            unlink()?;
            if let Err(e) =
                direct::skipped(&self.store, Kind::Delete, &name, st.st_size as u64, &who)
            {
                log::error!("{e}");
            }
            return Ok(());
        }
        let open = self.is_open(self.ids.of(&st));
        if !open && st.st_nlink == 1 && self.store.removes_on(st.st_dev) {
            // The bits of the file looked at; an ACL counts unless the name
            // shows none (a file moved away meanwhile: none can be told).
            let access = Access {
                mode: st.st_mode & 0o7777,
                uid: st.st_uid,
                gid: st.st_gid,
                acl: Access::at(loc.dir(), &loc.name).is_none_or(|a| a.acl),
            };
            let decide = |moved: &rustix::fs::Stat| self.verdict(&st, moved);
            match direct::remove_later(
                &self.store,
                (loc.dir(), &loc.name),
                &name,
                (&who, access),
                decide,
            ) {
                Ok(Verdict::PutBack) => return Err(rustix::io::Errno::ISDIR),
                Ok(_) => return Ok(()),
                Err(e) => log::debug!("{name}: not moved into the store ({e}): copied"),
            }
        }
        direct::remove(&self.store, loc.dir(), &loc.name, &name, &who, open, unlink)
    }

    /// Who `pid` is, read from /proc at most once a second for the same process.
    pub(super) fn remover(&self, pid: u32) -> Who {
        let mut last = self.remover.lock();
        match &*last {
            Some((at, who)) if who.pid == pid && at.elapsed() < Duration::from_secs(1) => {
                who.clone()
            }
            _ => {
                let who = Who::process(pid);
                *last = Some((Instant::now(), who.clone()));
                who
            }
        }
    }

    /// What `remove_file` moved (`moved`) is not always what it looked at
    /// (`seen`): the name may have been replaced, or the file opened, in
    /// between. A file that is open now is copied, not adopted, by the store; a
    /// directory is put back, as `unlink` would have left it. Asked under the
    /// store's removal gate, so it takes only `handles`, briefly.
    fn verdict(&self, seen: &rustix::fs::Stat, moved: &rustix::fs::Stat) -> Verdict {
        if FileType::from_raw_mode(moved.st_mode) == FileType::Directory {
            return Verdict::PutBack;
        }
        let same = (moved.st_dev, moved.st_ino) == (seen.st_dev, seen.st_ino);
        if !same || self.is_open(self.ids.of(moved)) {
            Verdict::Copy
        } else {
            Verdict::Adopt
        }
    }
}

/// Whether `rel` lies beneath the directory `dir`.
fn beneath(rel: &str, dir: &str) -> bool {
    rel.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
}
