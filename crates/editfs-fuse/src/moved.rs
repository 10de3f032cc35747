//! A directory moved whole through the mount (`mv dir1 dir2`), recorded as
//! the moves of the files it holds: each file removed at its old name (its
//! content kept first) and created at its new one, as `move_file` records the
//! move of one file. A rewind or an undo then moves each back with the one
//! planner, journal and crash recovery every file change goes through, and
//! under each file's own rights, as a caller rewinds only the files it could.
//!
//! One record of the directory's move would cost less at the move, but every
//! later reader of the log (a file's history, undo, diff, rewind, the rights
//! of who sees which line) would have to follow names through it, and a crash
//! in a rewind would need a directory rename in the journal. The cost here is
//! one copy of each file the policy keeps (each within --max-file-size, the
//! whole under --keep-bytes), taken before the rename, outside the store's lock.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::core::{Core, Loc};
use crate::store::{Access, FileEntry, Keys, LogEntry, LogKind as Kind, LogOutcome as Outcome};
use crate::transaction::{Who, direct, now};

/// A regular file inside the directory being moved, its content kept
/// before the move under `tx`.
struct Kept {
    /// Its path beneath the moved directory (`/a/b.txt`).
    sub: String,
    st: rustix::fs::Stat,
    /// Its access, read from the descriptor its content was kept through.
    access: Access,
    rel: String,
    tx: u64,
    sha: String,
    above: Vec<Access>,
}

/// Directories deeper than this inside a moved one are not looked into.
const DEPTH_MOST: usize = 64;

/// Calls `visit` with each regular file beneath `dir` (at `sub` in the moved
/// directory): its directory, name, path beneath and status. Never follows a
/// symlink; holds one descriptor per level, not per directory.
fn walk_inside(
    dir: &OwnedFd,
    sub: &str,
    depth: usize,
    visit: &mut dyn FnMut(&OwnedFd, &OsStr, String, rustix::fs::Stat),
) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for e in entries.flatten() {
        let name = OsStr::from_bytes(e.file_name().to_bytes());
        if matches!(name.as_bytes(), b"." | b"..") {
            continue;
        }
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let path = format!("{sub}/{}", name.to_string_lossy());
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => visit(dir, name, path, st),
            FileType::Directory if depth < DEPTH_MOST => {
                if let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) {
                    walk_inside(&fd, &path, depth + 1, visit);
                }
            }
            _ => {}
        }
    }
}

/// The directories from `dest` down to the one holding `rel` (`dest/...`),
/// outermost first: a rewind removes them again once it emptied them.
fn dirs_down(dest: &str, rel: &str) -> Vec<String> {
    let mut out = vec![dest.to_owned()];
    let inner = Path::new(rel)
        .parent()
        .and_then(|p| p.to_str())
        .unwrap_or(dest);
    let mut at = dest.to_owned();
    for part in inner
        .strip_prefix(dest)
        .unwrap_or_default()
        .split('/')
        .filter(|p| !p.is_empty())
    {
        at = format!("{at}/{part}");
        out.push(at.clone());
    }
    out
}

impl Core {
    /// Renames the directory `from` (`source` in the project) to `to`
    /// (`dest`) with `rename`, recording the move of each file it holds (see
    /// the module doc). Files made through the mount and not recorded yet go
    /// with it, to be recorded at their new names.
    pub(super) fn move_dir(
        &self,
        (from, source): (&Loc, &Path),
        dest: &Path,
        pid: u32,
        rename: impl FnOnce() -> rustix::io::Result<()>,
    ) -> rustix::io::Result<()> {
        let (source, dest) = (source.to_string_lossy(), dest.to_string_lossy());
        let waiting = self.creations_beneath(&source);
        let mut kept = Vec::new();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        // A build's own renames (in an ignored target/, in .git/) walk nothing.
        let policy = &self.settings.preimages;
        let skipped = policy.skips_all_beneath(self.source.root(), Path::new(&*source));
        let opened = rustix::fs::openat(from.dir(), &from.name, flags, Mode::empty());
        if let Some(fd) = opened.ok().filter(|_| !skipped) {
            walk_inside(&fd, "", 0, &mut |dir, name, sub, st| {
                let rel = format!("{source}{sub}");
                let wanted = !waiting.contains(&rel)
                    && self.keeps(Path::new(&rel))
                    && st.st_size as u64 <= self.settings.preimages.max_size;
                if wanted && let Some(k) = self.keep_inside(dir, name, (rel, sub), st) {
                    kept.push(k);
                }
            });
        }
        let who = self.remover(pid);
        let keys = kept
            .iter()
            .fold(Keys::new(), |keys, k: &Kept| keys.path(&k.rel));
        let lock = match self.store.lock(&keys) {
            Ok(lock) => lock,
            Err(e) => {
                log::error!("{source} moved without a record of its files: {e}");
                return self.moved_unrecorded(&source, &dest, rename);
            }
        };
        let mut named = Vec::new();
        for mut k in kept {
            let Ok(tx) = self.store.next_tx() else {
                break;
            };
            k.tx = tx;
            if matches!(
                self.store.keep_pre_image(&lock, tx, &k.rel, &k.sha),
                Ok(Some(_))
            ) {
                named.push(k);
            }
        }
        if let Err(e) = rename() {
            for k in &named {
                self.store.objects().forget(&k.rel, k.tx);
            }
            return Err(e);
        }
        for k in &named {
            if let Err(e) = self.store.log(&removal(k, &who)) {
                log::error!("{e}");
            }
        }
        drop(lock);
        self.carry_beneath(&source, &dest);
        for k in named {
            let new = format!("{dest}{}", k.sub);
            if self.keeps(Path::new(&new)) {
                self.await_moved(&new, &dest, &k.st, &who);
            }
        }
        Ok(())
    }

    /// The file `name` in `dir` (`rel`, `sub` beneath the moved directory)
    /// with its content kept, outside the store's lock (an id and a name are
    /// given under it): a copy of many files holds up no transaction. Room is
    /// made first.
    fn keep_inside(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        (rel, sub): (String, String),
        st: rustix::fs::Stat,
    ) -> Option<Kept> {
        if let Err(e) = self.store.make_room(st.st_size as u64) {
            log::info!("{rel}: moved without a pre-image: {e}");
            return None;
        }
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let mut file = File::from(rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?);
        // Only the file that was looked at, whose owner and mode the version
        // will carry: one renamed onto the name since (another user's) is not
        // read. And no further than the size room was made for.
        let now = rustix::fs::fstat(&file).ok()?;
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino)
            || now.st_mode & libc::S_IFMT != libc::S_IFREG
        {
            log::info!("{rel}: replaced while its directory moved: not kept");
            return None;
        }
        match self.store.objects().put_from(&mut file, st.st_size as u64) {
            Ok(sha) => Some(Kept {
                access: Access::of_fd(file.as_fd())?,
                above: Access::above(dir.as_fd(), &rel),
                sub,
                st,
                rel,
                tx: 0,
                sha,
            }),
            Err(e) => {
                log::error!("cannot keep {rel} before its move: {e}");
                None
            }
        }
    }

    /// Moves with no record of the files: the store could not be written.
    fn moved_unrecorded(
        &self,
        source: &str,
        dest: &str,
        rename: impl FnOnce() -> rustix::io::Result<()>,
    ) -> rustix::io::Result<()> {
        rename()?;
        self.carry_beneath(source, dest);
        Ok(())
    }

    /// Waits for `rel`, the file of status `was` moved there, to be recorded
    /// as created, with the directories from `dest` down to it.
    fn await_moved(&self, rel: &str, dest: &str, was: &rustix::fs::Stat, who: &Who) {
        let Some(loc) = self.loc_at(rel) else { return };
        let st = rustix::fs::statat(loc.dir(), &loc.name, AtFlags::SYMLINK_NOFOLLOW).ok();
        let Some(st) = st.filter(|st| (st.st_dev, st.st_ino) == (was.st_dev, was.st_ino)) else {
            return;
        };
        let made = (
            Access::at(loc.dir(), &loc.name),
            Access::above(loc.dir(), rel),
        );
        match direct::begin_created(&self.store, rel, made, who) {
            Ok(p) => self.await_creation(p.with_dirs(dirs_down(dest, rel)), (st.st_dev, st.st_ino)),
            Err(e) => log::error!("cannot record {rel}, moved with its directory: {e}"),
        }
    }
}

/// The log line of `k`'s removal from its old name.
fn removal(k: &Kept, who: &Who) -> LogEntry {
    let access = k.access;
    LogEntry {
        tx: k.tx,
        time: now(),
        kind: Kind::Delete,
        outcome: Outcome::Ok,
        files: vec![FileEntry {
            file: k.rel.clone(),
            before: Some(k.sha.clone()),
            removed: true,
            access: Some(access),
            above: k.above.clone(),
            ..FileEntry::default()
        }],
        pid: who.pid,
        command: who.command.clone(),
        ..LogEntry::default()
    }
}
