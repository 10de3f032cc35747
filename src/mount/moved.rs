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

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::fs::{Core, Loc};
use crate::store::logline::{Access, FileEntry, Kind, LogEntry, Outcome};
use crate::transaction::{Who, direct, now};

/// A regular file inside the directory being moved.
struct Inside {
    /// Its path beneath the moved directory.
    sub: String,
    dir: Arc<OwnedFd>,
    name: OsString,
    st: rustix::fs::Stat,
}

/// A file whose content was kept before the move, under `tx`.
struct Kept {
    inside: Inside,
    rel: String,
    tx: u64,
    sha: String,
    above: Vec<Access>,
}

/// Directories deeper than this inside a moved one are not looked into.
const DEPTH_MOST: usize = 64;

/// Every regular file beneath `dir` (at `sub` in the moved directory), with
/// the directories that hold them, never following a symlink.
fn files_inside(dir: Arc<OwnedFd>, sub: &str, depth: usize, out: &mut Vec<Inside>) {
    let Ok(entries) = rustix::fs::Dir::read_from(&*dir) else {
        return;
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for e in entries.flatten() {
        let name = e.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let Ok(st) = rustix::fs::statat(&*dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let os = std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned();
        let path = format!("{sub}/{}", os.to_string_lossy());
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => out.push(Inside {
                sub: path,
                dir: dir.clone(),
                name: os,
                st,
            }),
            FileType::Directory if depth < DEPTH_MOST => {
                if let Ok(fd) = rustix::fs::openat(&*dir, name, flags, Mode::empty()) {
                    files_inside(Arc::new(fd), &path, depth + 1, out);
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
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut inside = Vec::new();
        if let Ok(fd) = rustix::fs::openat(from.dir(), &from.name, flags, Mode::empty()) {
            files_inside(Arc::new(fd), "", 0, &mut inside);
        }
        let waiting = self.creations_beneath(&source);
        inside.retain(|f| {
            let rel = format!("{source}{}", f.sub);
            !waiting.contains(&rel)
                && self.keeps(Path::new(&rel))
                && f.st.st_size as u64 <= self.settings.preimages.max_size
        });
        let who = self.remover(pid);
        let kept = self.keep_inside(&source, inside);
        let lock = match self.store.lock() {
            Ok(lock) => lock,
            Err(e) => {
                log::error!("{source} moved without a record of its files: {e}");
                drop(kept);
                return self.moved_unrecorded(&source, &dest, rename);
            }
        };
        let mut named = Vec::new();
        for mut k in kept {
            let Ok(tx) = self.store.next_tx(&lock) else {
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
            let new = format!("{dest}{}", k.inside.sub);
            if self.keeps(Path::new(&new)) {
                self.await_moved(&new, &dest, &k.inside, &who);
            }
        }
        Ok(())
    }

    /// The files `inside` the directory `source` with their content kept,
    /// outside the store's lock (ids and names are given under it): a copy
    /// of many files holds up no transaction. Room is made first.
    fn keep_inside(&self, source: &str, inside: Vec<Inside>) -> Vec<Kept> {
        let mut kept = Vec::new();
        for f in inside {
            let rel = format!("{source}{}", f.sub);
            if let Err(e) = self.store.make_room(f.st.st_size as u64) {
                log::info!("{rel}: moved without a pre-image: {e}");
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let Ok(fd) = rustix::fs::openat(&*f.dir, &f.name, flags, Mode::empty()) else {
                continue;
            };
            let mut file = File::from(fd);
            match self.store.objects().put_from(&mut file) {
                Ok(sha) => kept.push(Kept {
                    above: Access::above(f.dir.as_fd(), &rel),
                    rel,
                    tx: 0,
                    sha,
                    inside: f,
                }),
                Err(e) => log::error!("cannot keep {rel} before its move: {e}"),
            }
        }
        kept
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

    /// Waits for `rel`, the file `inside` moved there, to be recorded as
    /// created, with the directories from `dest` down to it.
    fn await_moved(&self, rel: &str, dest: &str, inside: &Inside, who: &Who) {
        let Some(loc) = self.loc_at(rel) else { return };
        let st = rustix::fs::statat(loc.dir(), &loc.name, AtFlags::SYMLINK_NOFOLLOW).ok();
        let Some(st) =
            st.filter(|st| (st.st_dev, st.st_ino) == (inside.st.st_dev, inside.st.st_ino))
        else {
            return;
        };
        let made = (Some(Access::of_stat(&st)), Access::above(loc.dir(), rel));
        match direct::begin_created(&self.store, rel, made, who) {
            Ok(p) => self.await_creation(p.with_dirs(dirs_down(dest, rel)), (st.st_dev, st.st_ino)),
            Err(e) => log::error!("cannot record {rel}, moved with its directory: {e}"),
        }
    }
}

/// The log line of `k`'s removal from its old name.
fn removal(k: &Kept, who: &Who) -> LogEntry {
    let access = Access::of_stat(&k.inside.st);
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
