//! Commits: every file of a transaction replaced, or none, even across a crash;
//! its versions kept, its record written and synced, its files put in place.
//!
//! # What is synced when, and why that is enough
//!
//! This is the one place recovery is reasoned about. Two kinds of crash matter.
//! A crash of the daemon (`kill -9`, a panic that takes the process) loses no
//! write the kernel has taken: every file, name and line written is there after
//! it, synced or not. Then all-or-nothing rests on the order of the steps alone:
//! a file is replaced by renaming a complete temporary file over it, only after
//! its committed record exists, and recovery finishes any committed record and
//! undoes any other. A crash of the machine loses what was not synced; for that,
//! a commit of one transaction syncs, before its files change:
//!
//! 1. the committed record, appended to the process's journal file, with the
//!    SHA-256 of each new content and what its temporary file was once
//!    written (`journal::Made`), followed by the bytes of each kept version,
//!    before and after, not known to be durable (`journal::Inline`): new to
//!    the store, or stored unsynced (a direct write's pre-image) or by another
//!    process (`Objects::durable`). One sync makes them all durable; the
//!    store's own copies of those versions are written unsynced and synced by
//!    the checkpoint, and recovery writes a copy a crash left torn again from
//!    the record, in place, so every name linked to it holds it;
//! 2. only a version over `CARRIED_MAX` bytes (or any, with `--keep 0`) is
//!    synced on its own first, before the record that names it.
//!
//! The commit point is reached once the record is synced: only then does a
//! file change and the commit answer. The temporary files holding the new
//! contents are not synced then: the store holds each new content durably
//! already, and a crash of the machine that leaves one torn, as a temporary
//! file or as the file it was put in place as, has recovery write it again
//! from there (`journal::recovery::repair`). A file written since the commit is left as
//! it is: a write, truncation, rename or link through the mount of a file
//! whose new content is not synced yet first waits for a checkpoint
//! (`settle_before_change`, `settle_before_move`), and recovery rewrites only
//! the file the commit made, no newer than it made it, and only where it
//! looks torn (zeros where it differs, no longer). That is one sync for a
//! commit, where a commit used to make fourteen, and then two in a row when a
//! version was new to the store (its own, then the record's). A journal file
//! is read up to its first record that does not read whole (nothing after it
//! was synced, and a failed append is cut off again), never on at the next
//! newline, which could lie inside carried bytes. What is not synced at
//! once, and why that loses nothing:
//!
//! - Names made in the state directory (temporary files, objects, snapshot
//!   links, the journal file when a commit creates it) ride on the sync of the
//!   record. This relies on
//!   the file system committing metadata in the order it was made, so that a
//!   sync carries every earlier change with it, as the journals of ext4
//!   (`data=ordered`, the default) and xfs do; the committed record is read back
//!   only when it parses whole, so a record cut short counts as never written.
//!   A temporary file that sits beside its file, on another file system than
//!   the state directory, is synced with its directory before the record instead.
//! - The counter (`txid`) is written in place, unsynced: at open it is moved
//!   past the last id of the log, which recovery first completes from the
//!   committed records. An id a machine crash handed out again can only have
//!   been one that no acknowledged transaction kept (see `Objects::keep_with`).
//! - The prepared record is unsynced: it only serves to clean up after a crash
//!   of the process, and a transaction that never committed changed no file.
//! - The files' new contents and names in the project, and the log line, ride
//!   on the next checkpoint (`Store::checkpoint`: at most a second later in a
//!   mount, when `editfs apply` ends, or every `CHECKPOINT_AFTER` commits, by
//!   the mount's checkpoint thread, woken then, and not under any file's lock),
//!   which syncs the new contents, the versions their records carry, the log
//!   and the directories the files went into, and only then drops the records
//!   of the transactions it covered.
//!   Until then the size cap spares their versions (`Objects::spare_from`),
//!   and `--keep 0`, which keeps none, syncs the temporary files before the
//!   record instead. Until then a
//!   committed record stays in the journal, and a crash before the checkpoint
//!   has recovery roll it forward again: putting in place what is not, which
//!   relies on renames in one directory reaching the disk in the order they were
//!   made, and appending its log line if the log lost it. So an edit whose
//!   `close()` returned 0 is never lost, and every transaction keeps its id and
//!   its line.
//! - Blocks freed by a commit (the file it replaced, objects pruned past
//!   `--keep`) are freed by the reaper's thread, which the checkpoint wakes
//!   (see reaper.rs): a dropped object's name goes at once, by a rename into
//!   `tmp/`, and a crash leaves at worst a name there that the next open sweeps.
//! - Log lines of transactions that changed nothing (failed, rejected) and of
//!   direct writes and removals are appended unsynced and ride on the next
//!   checkpoint too; a crash of the machine before it may lose the latest of them.

use std::fs::{self, File};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use super::change::{Change, Removal};
use super::checkpoint::{Temp, Temps, sync_all};
use super::logline::LogEntry;
use super::{Lock, Staged, Store, StoreError, atomic, caller, io_err, journal, logline, objects};
use crate::engine::sha256_hex;

/// The largest version a committed record carries the bytes of (see
/// `Store::keep_version`): source files, in their thousands of lines. A
/// larger one is synced on its own, before the record: its bytes would cost
/// the same to write twice, and the records a crash leaves are read whole.
const CARRIED_MAX: usize = 256 << 10;

/// The mode and owner of the file `r` removes, read before it goes.
fn removed_access(r: &Removal<'_>) -> Option<logline::Access> {
    let name = Path::new(r.rel).file_name()?;
    logline::Access::at(r.dir, name)
}

/// Versions a committed record carries the bytes of (see `Store::keep_version`).
type Carry<'b> = Vec<(objects::Later, &'b [u8])>;

impl Store {
    /// Commits `changes` as transaction `tx` under `root` (open, and its path for
    /// recovery): every file is replaced, or none, even across a crash. Returns the
    /// name of each file's pre-image, if it had one.
    ///
    /// A commit that fails before its commit point leaves no version of `tx` behind,
    /// so history and undo never take a failed transaction for a real one.
    pub fn commit(
        &self,
        lock: &Lock,
        tx: u64,
        root: (BorrowedFd<'_>, &Path),
        changes: &[Change<'_>],
        log: LogEntry,
    ) -> Result<Vec<Option<String>>, StoreError> {
        self.commit_with(lock, tx, root, (changes, &[]), log, Staged::default())
    }

    /// Writes the new contents of `changes` before the locks are taken, for
    /// `commit_with` to take as they are (see staged.rs): a transaction of
    /// many files then holds their locks for its record, not for making files.
    pub fn stage(&self, changes: &[Change<'_>]) -> Staged {
        Staged::write(self.tmp.as_fd(), changes)
    }

    /// `commit`, also removing the files of `removals`, all or none with the
    /// changes, and taking what fits of `staged` (see `stage`); the
    /// pre-images of both are returned, changes first.
    pub fn commit_with(
        &self,
        _lock: &Lock,
        tx: u64,
        root: (BorrowedFd<'_>, &Path),
        (changes, removals): (&[Change<'_>], &[Removal<'_>]),
        log: LogEntry,
        mut staged: Staged,
    ) -> Result<Vec<Option<String>>, StoreError> {
        let _flying = self.flying(tx);
        let incoming = changes
            .iter()
            .map(|c| c.new.len() + c.pre.map_or(0, <[u8]>::len))
            .chain(removals.iter().map(|r| r.pre.len()))
            .sum::<usize>();
        self.make_room(incoming as u64)?;
        let prepared = self.prepare(tx, root, (changes, removals), log, &mut staged);
        let rels = || {
            changes
                .iter()
                .map(|c| c.rel)
                .chain(removals.iter().map(|r| r.rel))
        };
        let Prepared {
            record,
            kept,
            temps,
            writable,
        } = match prepared {
            Ok(p) => p,
            Err(e) => {
                for rel in rels() {
                    self.objects.forget(rel, tx);
                }
                return Err(e);
            }
        };
        // Past the commit point: recovery finishes whatever is left undone here.
        for ((e, c), w) in record.files.iter().zip(changes).zip(&writable) {
            self.install(e, c, w.as_ref())?;
        }
        for r in removals {
            caller::remove(r.dir, journal::file_name(r.rel), r.file, r.by)?;
        }
        // The transaction has happened: what fails from here is finished by the
        // next open's recovery (the record stays), never reported as a failure.
        match self.log(&record.log) {
            Ok(()) => self.settle(tx, dirs(changes, removals), temps),
            Err(e) => {
                // No checkpoint will settle it: its new contents are synced now.
                log::error!("transaction {tx} committed, but {e}");
                if let Err(e) = sync_all(&temps) {
                    log::error!("transaction {tx}: {e}");
                }
            }
        }
        for rel in rels() {
            self.objects.prune(rel, self.retention.keep);
        }
        self.objects.cap(self.retention.cap);
        Ok(kept)
    }

    /// Puts the new content of `c`, whose record entry is `e`, in place, as
    /// `caller` says (see its rules): through `writable`, its file opened for
    /// writing as its caller, when it has other names; else by renaming its
    /// temporary file over it. A temporary file left unused (the name changed
    /// meanwhile) goes.
    fn install(
        &self,
        e: &journal::Entry,
        c: &Change<'_>,
        writable: Option<&File>,
    ) -> Result<(), StoreError> {
        let base = journal::tmp_dir_of(c.dir, self.tmp.as_fd(), e)?;
        let tmp = std::ffi::OsStr::new(&e.tmp);
        let name = journal::file_name(c.rel);
        let used = match writable {
            Some(w) => {
                caller::write_in_place(w, c.new, c.by, name)?;
                false
            }
            None => caller::put_in_place((base.as_fd(), tmp), (c.dir, name), c.replaces())?,
        };
        if !used {
            rustix::fs::unlinkat(&base, tmp, rustix::fs::AtFlags::empty())
                .map_err(|err| io_err("remove", Path::new(&e.tmp))(err.into()))?;
        }
        Ok(())
    }

    /// Writes the new contents to temporary files, keeps both versions of every
    /// file and marks the journal record committed: the commit point. The
    /// temporary files are left unsynced, for the checkpoint: each new content
    /// is kept in the store, durably, before the record naming it is written,
    /// and recovery writes a new content the crash of the machine left torn
    /// again from there (`journal::recovery::repair`). So a commit waits for one sync,
    /// the record's, where every kept version is known durable already (two in a
    /// row where one is not, as it must be durable before the record that names
    /// it). Before anything is written, what the callers may do is checked
    /// (`allowed`), so that nothing after the commit point is refused.
    fn prepare(
        &self,
        tx: u64,
        root: (BorrowedFd<'_>, &Path),
        (changes, removals): (&[Change<'_>], &[Removal<'_>]),
        log: LogEntry,
        staged: &mut Staged,
    ) -> Result<Prepared, StoreError> {
        let mut record = self.record(tx, root.1, (changes, removals), log);
        let writable = allowed(&record, changes, removals)?;
        let taken = take_staged(&mut record, changes, staged);
        self.journal.write(&record)?;
        let committed = self
            .write_temps(&mut record, changes, taken)
            .and_then(|temps| self.commit_point(&mut record, temps, root.0, (changes, removals)));
        match committed {
            Ok((kept, temps)) => Ok(Prepared {
                record,
                kept,
                temps,
                writable,
            }),
            Err(e) => {
                for (e, dir) in record.files.iter().zip(dirs(changes, removals)) {
                    journal::discard_in(dir, self.tmp.as_fd(), e);
                }
                let dropped = if record.committed {
                    self.journal.drop_committed(tx)
                } else {
                    self.journal.remove(&[tx])
                };
                if let Err(d) = dropped {
                    log::error!("transaction {tx} failed ({e}), and its record stays: {d}");
                }
                Err(e)
            }
        }
    }

    /// Keeps the versions and writes the committed record, synced (see
    /// `prepare`); returns the names of the versions before, and `temps` for
    /// the checkpoint to sync.
    ///
    /// Directories the transaction made (`dirs` of its log line) have their
    /// parents synced before the record is: recovery finds a new file's
    /// directory again by its path, so a crash of the machine must not leave
    /// a committed record whose directory entry never reached the disk. Only
    /// a commit that made directories pays for it.
    ///
    /// With `--keep 0` no version stays in the store to write a torn content
    /// again from: the temporary files are then synced before the record, as
    /// the commit point's.
    fn commit_point(
        &self,
        record: &mut journal::Record,
        temps: Temps,
        root: BorrowedFd<'_>,
        (changes, removals): (&[Change<'_>], &[Removal<'_>]),
    ) -> Result<(Vec<Option<String>>, Temps), StoreError> {
        let temps = if self.retention.keep == 0 {
            sync_all(&temps)?;
            Vec::new()
        } else {
            temps
        };
        let (kept, later) = self.keep_versions(record.tx, changes, removals)?;
        sync_made_dirs(root, &record.log)?;
        record.committed = true;
        record.inline = later
            .iter()
            .map(|(l, bytes)| journal::Inline {
                sha256: l.sha.clone(),
                len: bytes.len() as u64,
            })
            .collect();
        let carried: Vec<&[u8]> = later.iter().map(|(_, bytes)| *bytes).collect();
        self.journal.write_carrying(record, &carried)?;
        let later: Vec<objects::Later> = later.into_iter().map(|(l, _)| l).collect();
        self.objects.carried(&later);
        self.unsettled
            .lock()
            .objects
            .extend(later.into_iter().map(|l| Temp {
                name: l.path.to_string_lossy().into_owned(),
                file: l.file,
                ino: l.ino,
            }));
        Ok((kept, temps))
    }

    /// Keeps the version before and after `tx` of every file of it; returns
    /// the names of the ones before, and the versions not known durable, with
    /// their bytes, for the record to carry (see `keep_version`).
    fn keep_versions<'b>(
        &self,
        tx: u64,
        changes: &[Change<'b>],
        removals: &[Removal<'b>],
    ) -> Result<(Vec<Option<String>>, Carry<'b>), StoreError> {
        let mut kept = Vec::with_capacity(changes.len() + removals.len());
        let mut later = Vec::new();
        for c in changes {
            let pre = match c.pre {
                Some(pre) => {
                    let sha = self.objects.known_sha(c.rel, pre);
                    let at = (objects::Side::Pre, c.rel, tx);
                    let (name, l) = self.keep_version(at, pre, sha.as_deref())?;
                    later.extend(l.map(|l| (l, pre)));
                    Some(name)
                }
                None => None,
            };
            kept.push(pre);
            let at = (objects::Side::Post, c.rel, tx);
            let (_, l) = self.keep_version(at, c.new, c.new_sha)?;
            later.extend(l.map(|l| (l, c.new)));
        }
        for r in removals {
            let (name, l) = self.keep_version((objects::Side::Pre, r.rel, tx), r.pre, None)?;
            later.extend(l.map(|l| (l, r.pre)));
            kept.push(Some(name));
        }
        Ok((kept, later))
    }

    /// Keeps `bytes` as version `side` of `rel` at `tx`. One up to
    /// `CARRIED_MAX` bytes that is not known durable is stored unsynced and
    /// handed back, for the record to carry its bytes: its sync then rides on
    /// the record's. A larger one is synced before the record, as is every
    /// version with `--keep 0` (which keeps none past the commit).
    fn keep_version(
        &self,
        (side, rel, tx): (objects::Side, &str, u64),
        bytes: &[u8],
        sha: Option<&str>,
    ) -> Result<(String, Option<objects::Later>), StoreError> {
        if bytes.len() <= CARRIED_MAX && self.retention.keep > 0 {
            self.objects.keep_later(side, rel, tx, bytes, sha)
        } else {
            let name = self.objects.keep_hashed(side, rel, tx, bytes, sha)?;
            Ok((name, None))
        }
    }

    /// The prepared journal record of `tx`, whose log line says what only the
    /// store knows for sure: which files it made or removed.
    fn record(
        &self,
        tx: u64,
        root: &Path,
        (changes, removals): (&[Change<'_>], &[Removal<'_>]),
        mut log: LogEntry,
    ) -> journal::Record {
        let metas: Vec<Option<fs::Metadata>> = changes
            .iter()
            .map(|c| c.old.and_then(|f| f.metadata().ok()))
            .collect();
        for f in &mut log.files {
            f.created |= changes.iter().any(|c| c.rel == f.file && c.pre.is_none());
            let old = changes.iter().position(|c| c.rel == f.file);
            let read = old.and_then(|i| changes[i].old);
            if let Some(access) = read.and_then(|f| logline::Access::of_fd(f.as_fd())) {
                f.access = Some(access);
            }
            if let Some(c) = old.map(|i| &changes[i]) {
                f.above = logline::Access::above(c.dir, &f.file);
            }
            if let Some(r) = removals.iter().find(|r| r.rel == f.file) {
                f.removed = true;
                f.sha256 = None;
                // What an undo gives the file back.
                f.access = f.access.or_else(|| removed_access(r));
                f.above = logline::Access::above(r.dir, &f.file);
            }
        }
        let mut record = journal::Record {
            tx,
            root: root.to_owned(),
            committed: false,
            files: Vec::new(),
            log,
            inline: Vec::new(),
        };
        for (c, meta) in changes.iter().zip(&metas) {
            let links = meta
                .as_ref()
                .map_or(1, std::os::unix::fs::MetadataExt::nlink);
            // Renaming would cut the other names off from the new content; a
            // file moved here from elsewhere has no names here to keep.
            let in_place = c.pre.is_some() && links > 1;
            if in_place {
                log::info!(
                    "{} has {links} links: its content is rewritten in place to keep them",
                    c.rel
                );
            }
            let inode = meta.as_ref().filter(|_| in_place).map(|m| {
                (
                    std::os::unix::fs::MetadataExt::dev(m),
                    std::os::unix::fs::MetadataExt::ino(m),
                )
            });
            record.files.push(journal::Entry {
                rel: c.rel.to_owned(),
                tmp: atomic::tmp_name().to_string_lossy().into_owned(),
                beside: !atomic::same_fs(self.tmp.as_fd(), c.dir),
                in_place,
                inode,
                remove: false,
                sha256: Some(c.new_sha.map_or_else(|| sha256_hex(c.new), str::to_owned)),
                made: None,
                found: Some(journal::Found::of(
                    meta.as_ref().filter(|_| c.pre.is_some()),
                )),
            });
        }
        record.files.extend(removals.iter().map(|r| {
            journal::Entry {
                rel: r.rel.to_owned(),
                tmp: String::new(),
                beside: false,
                in_place: false,
                inode: None,
                remove: true,
                sha256: None,
                made: None,
                found: r
                    .file
                    .and_then(|f| f.metadata().ok())
                    .map(|m| journal::Found::of(Some(&m))),
            }
        }));
        record
    }

    /// Writes the temporary files of `record` that were not staged (`taken`,
    /// by entry), noting in it what each became (`journal::Made`), and
    /// returns those in the state directory unsynced.
    /// One beside its file, on another file system than the record, is synced
    /// here, with its directory: the record's sync cannot carry its name (see
    /// the module doc). One copied in place into its file (which has other
    /// links) is not returned: the file is synced once it is copied, and
    /// recovery writes a torn one again from the store before copying it.
    fn write_temps(
        &self,
        record: &mut journal::Record,
        changes: &[Change<'_>],
        taken: Vec<Option<File>>,
    ) -> Result<Temps, StoreError> {
        let mut unsynced = Vec::with_capacity(changes.len());
        for ((e, c), staged) in record.files.iter_mut().zip(changes).zip(taken) {
            let file = match staged {
                Some(file) => file,
                None => self.write_temp(e, c)?,
            };
            if e.beside {
                file.sync_all().map_err(io_err("sync", Path::new(&e.tmp)))?;
                rustix::fs::fsync(c.dir)
                    .map_err(|err| io_err("sync the directory of", Path::new(c.rel))(err.into()))?;
            } else if !e.in_place {
                let ino = e.made.map_or(0, |m| m.ino);
                let name = e.tmp.clone();
                unsynced.push(Temp { file, name, ino });
            }
        }
        Ok(unsynced)
    }

    /// Writes the temporary file of `c`, whose record entry is `e`, and notes
    /// in `e` what it became.
    fn write_temp(&self, e: &mut journal::Entry, c: &Change<'_>) -> Result<File, StoreError> {
        let base = journal::tmp_dir_of(c.dir, self.tmp.as_fd(), e)?;
        let file = atomic::write_tmp(
            base.as_fd(),
            std::ffi::OsStr::new(&e.tmp),
            std::ffi::OsStr::new(c.rel),
            c.new,
            (c.old, atomic::Writer::of(c.by), c.fresh),
        )?;
        let meta = file.metadata().map_err(io_err("stat", Path::new(&e.tmp)))?;
        e.made = Some(journal::Made::of(&meta));
        Ok(file)
    }
}

/// Takes for each entry of `record` the staged file that fits its change,
/// naming it in the entry; returns the files taken, by entry (see staged.rs).
/// A file that goes beside its own (on another file system) is never staged.
fn take_staged(
    record: &mut journal::Record,
    changes: &[Change<'_>],
    staged: &mut Staged,
) -> Vec<Option<File>> {
    record
        .files
        .iter_mut()
        .zip(changes)
        .map(|(e, c)| {
            let sha = e.sha256.as_deref().filter(|_| !e.beside)?;
            let t = staged.take(c, sha)?;
            e.tmp = t.name.to_string_lossy().into_owned();
            e.made = Some(t.made);
            Some(t.file)
        })
        .collect()
}

/// By change: its file opened for writing as its caller, where the commit
/// writes it in place.
type Writable = Vec<Option<File>>;

/// A commit past its commit point (see `Store::prepare`).
struct Prepared {
    record: journal::Record,
    /// The names of the versions before.
    kept: Vec<Option<String>>,
    /// The new contents left for the checkpoint to sync.
    temps: Temps,
    writable: Writable,
}

/// What the kernel must allow the callers of a commit before its commit point
/// (see `caller`): each removal, asked as its caller, and the write of each
/// file replaced, opened for it as its caller (and kept, for the files
/// written in place).
fn allowed(
    record: &journal::Record,
    changes: &[Change<'_>],
    removals: &[Removal<'_>],
) -> Result<Writable, StoreError> {
    for r in removals {
        caller::may_remove(r.dir, journal::file_name(r.rel), r.file, r.by).map_err(
            |e| match e {
                StoreError::Denied { what, source, .. } => StoreError::Denied {
                    path: r.rel.into(),
                    what,
                    source,
                },
                StoreError::Stale { .. } => StoreError::Stale { path: r.rel.into() },
                e => e,
            },
        )?;
    }
    record
        .files
        .iter()
        .zip(changes)
        .map(|(e, c)| {
            let name = std::ffi::OsStr::new(c.rel);
            match (c.replaces(), c.by) {
                (Some(old), _) if e.in_place => caller::open_for_writing(old, c.by, name).map(Some),
                (Some(old), Some(_)) => caller::may_write(old, c.by, name).map(|()| None),
                _ => Ok(None),
            }
        })
        .collect()
}

/// Syncs the parent of each directory `log` says its transaction made, once
/// each: what makes their entries, and so the new files in them, durable.
fn sync_made_dirs(root: BorrowedFd<'_>, log: &LogEntry) -> Result<(), StoreError> {
    let mut synced = std::collections::HashSet::new();
    for made in log.files.iter().flat_map(|f| &f.dirs) {
        let parent = Path::new(made).parent().unwrap_or(Path::new(""));
        if synced.insert(parent) {
            journal::parent_beneath(root, made)
                .and_then(rustix::fs::fsync)
                .map_err(|e| io_err("sync the directory holding", Path::new(made))(e.into()))?;
        }
    }
    Ok(())
}

/// The held directories of a commit's files, in the journal record's order.
fn dirs<'a>(
    changes: &'a [Change<'_>],
    removals: &'a [Removal<'_>],
) -> impl Iterator<Item = BorrowedFd<'a>> {
    changes
        .iter()
        .map(|c| c.dir)
        .chain(removals.iter().map(|r| r.dir))
}
