//! Temporary files a commit writes before it takes the store's lock.
//!
//! Making a file is the slow part of a commit: on a file system that has
//! seen many files come and go, finding a free inode can take milliseconds,
//! and a transaction of hundreds of files made them all under the lock, so
//! every other caller's edit waited for it. A transaction stages its new
//! contents once it has decided (`Store::stage`), before the lock; the
//! commit then takes each staged file that still fits its change, and writes
//! under the lock only what was not staged or no longer fits.
//!
//! A staged file fits when it holds the change's bytes (same path, same
//! SHA-256), was made for the same writer and fresh owner, from the same old
//! file unchanged in its metadata since (same inode and change time, so its
//! mode, owner and attributes are those it was given), and is still in the
//! temporary directory: a store opened meanwhile by another process sweeps
//! temporary files, which it does under the lock, so a file found linked
//! under it stays so until the commit ends. A staged file no commit takes is
//! removed when its `Staged` is dropped; one a crash leaves is swept at the
//! next open, as every temporary file of the state directory is.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::atomic::{self, Writer};
use super::change::Change;
use super::{journal, logline};

/// The temporary files staged for one transaction, in the order of its changes.
#[derive(Default)]
pub struct Staged {
    /// The directory they were written in (the store's `tmp/`).
    dir: Option<OwnedFd>,
    temps: Vec<Temp>,
}

/// One staged new content.
struct Temp {
    rel: String,
    sha: String,
    made_for: Fit,
    name: OsString,
    file: File,
    made: journal::Made,
}

/// What a staged file was made from, besides its bytes: it fits a change
/// only if the change would make the same file now.
#[derive(PartialEq, Eq)]
struct Fit {
    /// The old file's inode and change time (`None`: no old file).
    old: Option<(u64, i64, u64)>,
    writer: Writer,
    fresh: Option<logline::Access>,
}

impl Fit {
    fn of(c: &Change<'_>) -> Option<Fit> {
        let old = match c.old {
            Some(f) => {
                let st = rustix::fs::fstat(f).ok()?;
                Some((st.st_ino, st.st_ctime, st.st_ctime_nsec))
            }
            None => None,
        };
        Some(Fit {
            old,
            writer: Writer::of(c.by),
            fresh: c.fresh,
        })
    }
}

/// A staged file taken by a commit: its name in `tmp/`, the file, and what
/// it was once written.
pub(super) struct Taken {
    pub name: OsString,
    pub file: File,
    pub made: journal::Made,
}

impl Staged {
    /// Writes the new content of each change into `tmp`. A change whose file
    /// lives on another file system is skipped (its temporary file goes
    /// beside it, under the lock), as is one that cannot be written now: the
    /// commit writes it again and reports what fails then.
    pub(super) fn write(tmp: BorrowedFd<'_>, changes: &[Change<'_>]) -> Staged {
        let Ok(dir) = rustix::io::dup(tmp) else {
            return Staged::default();
        };
        let temps = changes
            .iter()
            .filter(|c| atomic::same_fs(tmp, c.dir))
            .filter_map(|c| stage_one(dir.as_fd(), c))
            .collect();
        Staged {
            dir: Some(dir),
            temps,
        }
    }

    /// The staged file that fits `c`, whose new content has the SHA-256
    /// `sha`, taken out of this set; `None` when none fits.
    pub(super) fn take(&mut self, c: &Change<'_>, sha: &str) -> Option<Taken> {
        let fit = Fit::of(c)?;
        let at = self
            .temps
            .iter()
            .position(|t| t.rel == c.rel && t.sha == sha && t.made_for == fit)?;
        let t = self.temps.swap_remove(at);
        let linked = t.file.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.nlink() > 0
        });
        if !linked {
            return None;
        }
        Some(Taken {
            name: t.name,
            file: t.file,
            made: t.made,
        })
    }
}

fn stage_one(dir: BorrowedFd<'_>, c: &Change<'_>) -> Option<Temp> {
    let made_for = Fit::of(c)?;
    let name = atomic::tmp_name();
    let file = atomic::write_tmp(
        dir,
        &name,
        std::ffi::OsStr::new(c.rel),
        c.new,
        (c.old, made_for.writer, c.fresh),
    );
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            log::debug!("{}: not staged ({e}); the commit writes it", c.rel);
            let _ = rustix::fs::unlinkat(dir, &name, rustix::fs::AtFlags::empty());
            return None;
        }
    };
    let Ok(meta) = file.metadata() else {
        let _ = rustix::fs::unlinkat(dir, &name, rustix::fs::AtFlags::empty());
        return None;
    };
    let made = journal::Made::of(&meta);
    let sha = c
        .new_sha
        .map_or_else(|| crate::engine::sha256_hex(c.new), str::to_owned);
    Some(Temp {
        rel: c.rel.to_owned(),
        sha,
        made_for,
        name,
        file,
        made,
    })
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            for t in &self.temps {
                let _ = rustix::fs::unlinkat(dir, &t.name, rustix::fs::AtFlags::empty());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::fixture::Project;
    use crate::{LogEntry, Store};

    /// A project with the file `a`, its store, and the root held open.
    fn project() -> (Project, PathBuf, Store, OwnedFd) {
        let p = Project::new();
        fs::write(p.root().join("a"), "old a").unwrap();
        let (root, store, rootfd) = (p.root().to_owned(), p.open(), p.dir());
        (p, root, store, rootfd)
    }

    fn change<'a>(dir: BorrowedFd<'a>, old: Option<&'a File>, new: &'a [u8]) -> Change<'a> {
        Change {
            rel: "a",
            dir,
            old,
            pre: Some(b"old a"),
            new,
            new_sha: None,
            by: None,
            fresh: None,
        }
    }

    fn commit(store: &Store, root: (&OwnedFd, &Path), c: Change<'_>, staged: Staged) {
        let lock = store.lock(&crate::Keys::new().path(c.rel)).unwrap();
        let line = LogEntry {
            tx: 1,
            ..LogEntry::default()
        };
        let at = (root.0.as_fd(), root.1);
        store
            .commit_with(&lock, 1, at, (&[c], &[]), line, staged)
            .unwrap();
    }

    fn left_in_tmp(root: &Path) -> usize {
        fs::read_dir(root.join(".editfs/tmp")).unwrap().count()
    }

    #[test]
    fn a_commit_takes_the_staged_file_as_the_new_version() {
        let (_p, root, store, rootfd) = project();
        let old = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        let c = change(rootfd.as_fd(), old.as_ref(), b"new a");
        let staged = store.stage(std::slice::from_ref(&c));
        let ino = staged.temps[0].made.ino;
        commit(&store, (&rootfd, &root), c, staged);
        let now = fs::metadata(root.join("a")).unwrap();
        assert_eq!(now.ino(), ino, "the staged file was put in place");
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new a");
        assert_eq!(left_in_tmp(&root), 0);
    }

    #[test]
    fn a_staged_file_whose_old_file_changed_mode_since_is_written_again() {
        let (_p, root, store, rootfd) = project();
        let old = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        let c = change(rootfd.as_fd(), old.as_ref(), b"new a");
        let staged = store.stage(std::slice::from_ref(&c));
        let ino = staged.temps[0].made.ino;
        fs::set_permissions(root.join("a"), fs::Permissions::from_mode(0o600)).unwrap();
        commit(&store, (&rootfd, &root), c, staged);
        let now = fs::metadata(root.join("a")).unwrap();
        assert_ne!(now.ino(), ino, "the staged file no longer fit");
        assert_eq!(
            now.mode() & 0o777,
            0o600,
            "the new version has the mode of now"
        );
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new a");
        assert_eq!(left_in_tmp(&root), 0, "the unfit staged file went");
    }

    #[test]
    fn a_staged_file_another_opening_swept_is_written_again_under_the_lock() {
        let (_p, root, store, rootfd) = project();
        let old = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        let c = change(rootfd.as_fd(), old.as_ref(), b"new a");
        let staged = store.stage(std::slice::from_ref(&c));
        drop(Store::open(&root.join(".editfs")).unwrap());
        commit(&store, (&rootfd, &root), c, staged);
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new a");
    }

    #[test]
    fn a_staged_file_for_other_bytes_is_not_taken() {
        let (_p, root, store, rootfd) = project();
        let old = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        let staged = store.stage(&[change(rootfd.as_fd(), old.as_ref(), b"first decision")]);
        commit(
            &store,
            (&rootfd, &root),
            change(rootfd.as_fd(), old.as_ref(), b"second"),
            staged,
        );
        assert_eq!(fs::read(root.join("a")).unwrap(), b"second");
        assert_eq!(left_in_tmp(&root), 0);
    }

    #[test]
    fn staged_files_no_commit_takes_go_and_those_a_crash_leaves_are_swept() {
        let (_p, root, store, rootfd) = project();
        let old = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        drop(store.stage(&[change(rootfd.as_fd(), old.as_ref(), b"dropped")]));
        assert_eq!(left_in_tmp(&root), 0);
        std::mem::forget(store.stage(&[change(rootfd.as_fd(), old.as_ref(), b"crashed")]));
        assert_eq!(left_in_tmp(&root), 1);
        // As a process that crashed left it: named by its own pid.
        let tmp = root.join(".editfs/tmp");
        let left = fs::read_dir(&tmp).unwrap().next().unwrap().unwrap().path();
        let dead = crate::tests::tmp_name_of(crate::tests::dead_pid());
        fs::rename(left, tmp.join(dead)).unwrap();
        drop(Store::open(&root.join(".editfs")).unwrap());
        assert_eq!(left_in_tmp(&root), 0);
        assert_eq!(fs::read(root.join("a")).unwrap(), b"old a");
    }
}
