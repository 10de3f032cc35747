//! Removals through the mount, kept in two steps so that `rm -r` of a tree waits
//! for no hashing, no lock of the store and no log write per file.
//!
//! The request (`begin`) appends the removal's log line, as far as it is known,
//! to `removed/intents` and renames the file into `removed/` under a name of
//! its own: one `write` and one `rename`, and the name is gone from the project
//! as `unlink` leaves it. The filer (`Store::file_removals`: a thread of the
//! mount, and first of all whatever takes the store's locks or reads history)
//! then gives each removal its id, hashes the moved file, makes its inode the
//! object when it is new to the store (a link: nothing is copied), links its
//! snapshot, and appends the log lines of a batch in one write. Only once it
//! has caught up, and outside the store's locks, does it drop the moved names:
//! dropping the last name of a file frees its inode and blocks, the slowest
//! step on some file systems, and each free makes the file system's next inode
//! allocations slower for a while (ext4 without a journal skips recently freed
//! inodes one by one), so a burst's snapshot directories are made before any
//! of its frees. A removal takes its id when it is begun, so ids follow the
//! order removals and transactions were made in, and its line is logged once
//! it is filed: before any transaction on the same path, any checkpoint, undo
//! or rewind, and any reading of the history that comes after it. A
//! transaction on another path does not wait for the filer (a user's `rm -r`
//! of a large tree holds up no other user's edit). The backlog is bounded
//! (`REMOVER_FILES_AFTER`, `REMOVER_FILES_AFTER_BYTES`): past it, the removal
//! that adds to it files what waits itself, so whoever removes faster than the
//! filer files pays for it, and `removed/` never holds more than about that.
//!
//! After a crash, the next open files what is left: a line whose file is still
//! in `removed/` is filed (and logged, unless the log has it: the same file,
//! time, process and content), a line without one was filed already or never
//! moved anything. So nothing removed through the mount is lost, and nothing is
//! logged twice.
//!
//! A file opened through the mount while it was moved is renamed to
//! `<name>.copy`: the filer copies its bytes, so a writer still holding it
//! cannot change a kept version. A file with other names, or open, is never
//! moved here (see `transaction::direct`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use serde::{Deserialize, Serialize};

use super::logline::{Access, LogEntry};
use super::{Keys, Lock, Store, StoreError, atomic, io_err};
use crate::engine::sha256_hex;

/// The directory moved files wait in, beside the other stores of the state directory.
pub const DIR: &str = "removed";
const INTENTS: &str = "intents";
const COPY: &str = ".copy";

/// Removals waiting to be filed past which a removal files them itself.
const REMOVER_FILES_AFTER: u64 = 4096;

/// Bytes of removed files waiting to be filed past which a removal files them
/// itself (see `Store::begin_removal`).
const REMOVER_FILES_AFTER_BYTES: u64 = 256 << 20;

/// Lines filed under one hold of the filer's lock and their files' locks: a
/// transaction on one of those files waits for at most this many filings.
const BATCH: usize = 64;

/// Moved names filed and not dropped yet, past which they are dropped before
/// the backlog is caught up, so an endless stream of removals holds no more.
const DROP_AFTER: usize = 4096;

/// One line of `removed/intents`.
#[derive(Serialize, Deserialize)]
struct Intent {
    /// The moved file's name in `removed/`.
    name: String,
    /// Its removal's log line, id, hash and line count still missing.
    line: LogEntry,
}

/// What becomes of a file `Removals::begin` moved, decided from its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Kept by making its inode the store's (nothing is copied).
    Adopt,
    /// Kept by copying its bytes: a writer may still hold it.
    Copy,
    /// Not removed: it is no file (a directory took the name), so not for
    /// `unlink`; it goes back to its name.
    PutBack,
}

pub struct Removals {
    dir: OwnedFd,
    /// The file system of `dir`: only a file on it can be moved in.
    dev: u64,
    intents: File,
    /// Shared by each request from its line to its rename; taken alone to read
    /// lines, so every line read has its rename behind it, and to empty the file.
    gate: RwLock<()>,
    /// Bytes of `intents` already filed, in this process.
    read: Mutex<u64>,
    /// Lines appended by this process and not yet filed.
    outstanding: AtomicU64,
    /// Bytes of the files those lines moved into `removed/`, as they were
    /// when moved: what a backlog takes on disk (see `Store::begin_removal`).
    outstanding_bytes: AtomicU64,
    /// How many of those remove each path: a file made at any other path needs
    /// none of them filed first.
    waiting: Mutex<HashMap<String, usize>>,
    /// Names the moved files of this process: its id, then a number (also the
    /// count of removals begun).
    moved: (u32, AtomicU64),
    wake: Mutex<()>,
    woken: Condvar,
}

impl Removals {
    pub fn open(state: &Path) -> Result<Removals, StoreError> {
        let path = state.join(DIR);
        std::fs::create_dir_all(&path).map_err(io_err("create", &path))?;
        let dir = atomic::open_dir(&path)?;
        let dev = rustix::fs::fstat(&dir)
            .map_err(|e| io_err("stat", &path)(e.into()))?
            .st_dev;
        let at = path.join(INTENTS);
        let intents = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .mode(0o600)
            .open(&at)
            .map_err(io_err("open", &at))?;
        Ok(Removals {
            dir,
            dev,
            intents,
            gate: RwLock::new(()),
            read: Mutex::new(0),
            outstanding: AtomicU64::new(0),
            outstanding_bytes: AtomicU64::new(0),
            waiting: Mutex::default(),
            moved: (std::process::id(), AtomicU64::new(0)),
            wake: Mutex::new(()),
            woken: Condvar::new(),
        })
    }

    /// Whether a file on the file system `dev` can be moved in.
    pub fn takes_from(&self, dev: u64) -> bool {
        self.dev == dev
    }

    /// Whether this process moved files the filer has not filed yet.
    pub fn pending(&self) -> bool {
        self.outstanding.load(Ordering::Acquire) > 0
    }

    /// Whether this process moved a file from `rel` that is not filed yet.
    pub fn pending_at(&self, rel: &str) -> bool {
        self.waiting.lock().contains_key(rel)
    }

    /// Counts a removal from the path of `line` as waiting (`by` 1) or no
    /// longer (`by` -1).
    fn count_waiting(&self, line: &LogEntry, by: isize) {
        let Some(rel) = line.files.first().map(|f| &f.file) else {
            return;
        };
        let mut waiting = self.waiting.lock();
        let n = waiting.get(rel).map_or(0, |n| *n).saturating_add_signed(by);
        if n == 0 {
            waiting.remove(rel);
        } else {
            waiting.insert(rel.clone(), n);
        }
    }

    /// Appends `line` (the removal's log line, its id, hash and line count
    /// still missing), moves the file `name` in `dir` into `removed/`, and
    /// does what `decide` says of the status of what was moved; returns that.
    /// A failure of the line or the move leaves the file where it was; a line
    /// without its file is skipped by the filer.
    ///
    /// The decision is taken and done before the gate opens: from then on the
    /// filer may file the line and drop the moved name at once, so a file
    /// opened meanwhile would be adopted instead of copied, and a directory
    /// that took the name would not be put back. Doing it costs a `stat` and
    /// at most one `rename` under the gate, never a byte of the file: the
    /// copy itself is the filer's.
    pub fn begin(
        &self,
        line: &LogEntry,
        (dir, name): (BorrowedFd<'_>, &OsStr),
        decide: impl FnOnce(&rustix::fs::Stat) -> Verdict,
    ) -> Result<Verdict, Errno> {
        let seq = self.moved.1.fetch_add(1, Ordering::Relaxed);
        let intent = Intent {
            name: format!("{}.{seq}", self.moved.0),
            line: line.clone(),
        };
        let mut text = serde_json::to_string(&intent).map_err(|_| Errno::INVAL)?;
        text.push('\n');
        let verdict = {
            let _gate = self.gate.read();
            std::io::Write::write_all(&mut &self.intents, text.as_bytes())
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
            self.count_waiting(line, 1);
            self.outstanding.fetch_add(1, Ordering::AcqRel);
            rustix::fs::renameat_with(dir, name, &self.dir, &intent.name, RenameFlags::NOREPLACE)
                .and_then(|()| self.stat(&intent.name))
                .map(|st| {
                    let verdict = decide(&st);
                    self.carry_out(verdict, &intent.name, (dir, name));
                    verdict
                })
        };
        // Taken so the filer cannot miss this between its check and its wait.
        drop(self.wake.lock());
        self.woken.notify_one();
        verdict
    }

    /// The status of the file `begin` moved to `name`.
    fn stat(&self, name: &str) -> Result<rustix::fs::Stat, Errno> {
        rustix::fs::statat(&self.dir, name, AtFlags::SYMLINK_NOFOLLOW)
    }

    /// Does `verdict` to what `begin` moved to `moved` from `name` in `dir`;
    /// a failure is logged: the filer then adopts a file to be copied, and a
    /// directory not put back stays in `removed/` (the filer cannot read it).
    fn carry_out(&self, verdict: Verdict, moved: &str, (dir, name): (BorrowedFd<'_>, &OsStr)) {
        match verdict {
            Verdict::Adopt => {}
            Verdict::Copy => {
                if let Err(e) =
                    rustix::fs::renameat(&self.dir, moved, &self.dir, format!("{moved}{COPY}"))
                {
                    log::error!(
                        "a removed file was opened meanwhile and is adopted by the store: {e}"
                    );
                }
            }
            Verdict::PutBack => {
                if let Err(e) =
                    rustix::fs::renameat_with(&self.dir, moved, dir, name, RenameFlags::NOREPLACE)
                {
                    log::error!("a directory took a removed name and cannot be put back: {e}");
                }
            }
        }
    }

    /// Waits until a removal is begun or `timeout` passes; says whether one was.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut guard = self.wake.lock();
        if !self.pending() {
            self.woken.wait_for(&mut guard, timeout);
        }
        self.pending()
    }

    /// Waits until no removal was begun for `quiet`, or `most` passed.
    pub fn wait_quiet(&self, quiet: Duration, most: Duration) {
        let began = std::time::Instant::now();
        loop {
            let seen = self.moved.1.load(Ordering::Relaxed);
            std::thread::sleep(quiet);
            if self.moved.1.load(Ordering::Relaxed) == seen || began.elapsed() >= most {
                return;
            }
        }
    }

    /// Up to `BATCH` complete lines not yet filed by this process, where they
    /// end and how many lines that is. Read with the gate taken alone: each has its rename behind it.
    fn take(&self) -> Result<(Vec<Intent>, u64, u64), StoreError> {
        let _gate = self.gate.write();
        let from = *self.read.lock();
        let len = self
            .intents
            .metadata()
            .map_err(io_err("stat", Path::new(INTENTS)))?
            .len();
        let mut bytes = vec![0; len.saturating_sub(from) as usize];
        self.intents
            .read_exact_at(&mut bytes, from)
            .map_err(io_err("read", Path::new(INTENTS)))?;
        let mut end = from;
        let mut lines = Vec::new();
        let mut count = 0u64;
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            if count == BATCH as u64 || line.last() != Some(&b'\n') {
                break;
            }
            end += line.len() as u64;
            count += 1;
            match serde_json::from_slice::<Intent>(line) {
                Ok(entry) => lines.push(entry),
                Err(e) => log::warn!("{DIR}/{INTENTS}: a line that does not read ({e}): skipped"),
            }
        }
        Ok((lines, end, count))
    }

    /// Empties the file of lines when this process filed all of them, no
    /// request is between its line and its rename, and the file has grown
    /// past `at_least` bytes. Only the mount's filer does it: another process
    /// cannot know what the mount's requests are doing.
    pub fn truncate_if_filed(&self, at_least: u64) {
        if *self.read.lock() <= at_least {
            return;
        }
        let _gate = self.gate.write();
        let mut read = self.read.lock();
        if *read > at_least && self.intents.metadata().is_ok_and(|m| m.len() == *read) {
            match self.intents.set_len(0) {
                Ok(()) => *read = 0,
                Err(e) => log::warn!("cannot empty {DIR}/{INTENTS}: {e}"),
            }
        }
    }

    /// Drops the moved names `filed` (their removals are filed and logged),
    /// holding no lock: a crash before a name goes leaves a line the log has,
    /// which the next open drops without logging it again.
    fn drop_moved(&self, filed: &mut Vec<String>) {
        for name in filed.drain(..) {
            let _ = rustix::fs::unlinkat(&self.dir, name.as_str(), AtFlags::empty());
        }
    }

    /// The file moved to `name`, open, the name it has now, and whether it is
    /// to be copied.
    fn moved(&self, name: &str) -> Option<(File, String, bool)> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        [(name.to_owned(), false), (format!("{name}{COPY}"), true)]
            .into_iter()
            .find_map(|(name, copy)| {
                let fd = rustix::fs::openat(&self.dir, &name, flags, Mode::empty()).ok()?;
                Some((File::from(fd), name, copy))
            })
    }
}

/// Waits, at most `limit`, until no removal waits in the state directory
/// `state` to be filed (by the mount that made it); says whether none does.
/// For readers of history that only read: they cannot file them themselves.
pub fn wait_filed(state: &Path, limit: Duration) -> bool {
    let began = std::time::Instant::now();
    loop {
        let waiting = std::fs::read_dir(state.join(DIR)).map_or(0, |d| {
            d.flatten().filter(|e| e.file_name() != INTENTS).count()
        });
        if waiting == 0 {
            return true;
        }
        if began.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What tells a removal's log line apart, for recovery.
pub(super) fn removal_key(line: &LogEntry) -> Option<(String, u32, String, Option<String>)> {
    let f = line.files.first()?;
    Some((
        line.time.clone(),
        line.pid,
        f.file.clone(),
        f.before.clone(),
    ))
}

impl Store {
    /// Files the removals this process began and has not filed yet, so a
    /// reader of history, snapshots or the log sees every removal made before.
    /// Never call it holding a file's lock: it takes files' locks.
    pub fn settle_removals(&self) {
        if self.removals.pending() {
            self.file_removals_with(None);
        }
    }

    /// `settle_removals` when a removal this process began from `rel` waits:
    /// what is kept of `rel` is then complete, and a file made at another
    /// path after `rm -r` does not wait for the whole tree to be filed.
    pub fn settle_removals_at(&self, rel: &str) {
        if self.removals.pending_at(rel) {
            self.file_removals_with(None);
        }
    }

    /// Files what removals wait (the mount's filer thread), then empties their
    /// list once nothing is left in it: when `idle`, or when it has grown
    /// past a bound (emptying it is a truncation, not for every batch).
    pub fn file_removals(&self, idle: bool) {
        const BOUND: u64 = 1 << 20;
        self.settle_removals();
        self.removals
            .truncate_if_filed(if idle { 0 } else { BOUND });
    }

    /// Waits until a removal is begun, or `timeout` passes; says whether one was.
    pub fn wait_for_removals(&self, timeout: std::time::Duration) -> bool {
        self.removals.wait(timeout)
    }

    /// Waits until no removal was begun for `quiet`, or `most` passed.
    pub fn wait_for_quiet_removals(&self, quiet: std::time::Duration, most: std::time::Duration) {
        self.removals.wait_quiet(quiet, most);
    }

    /// Removes the regular file `name` in `dir` by moving it into the store,
    /// which keeps it as the pre-image and logs `line` with a new id in the
    /// background (see removals.rs), unless `decide`, shown the status of what
    /// was moved, says otherwise; returns what it said. On an error nothing
    /// was moved.
    pub fn begin_removal(
        &self,
        line: &LogEntry,
        at: (BorrowedFd<'_>, &std::ffi::OsStr),
        decide: impl FnOnce(&rustix::fs::Stat) -> Verdict,
    ) -> Result<Verdict, rustix::io::Errno> {
        // Its id now, in the order removals and transactions are made, so no
        // transaction on another path waits for its filing to take one.
        let tx = self.next_tx().map_err(|e| {
            log::error!("cannot number a removal: {e}");
            rustix::io::Errno::IO
        })?;
        let line = LogEntry { tx, ..line.clone() };
        let mut size = 0;
        let verdict = self.removals.begin(&line, at, |st| {
            size = st.st_size as u64;
            decide(st)
        })?;
        if verdict != Verdict::PutBack {
            self.removals
                .outstanding_bytes
                .fetch_add(size, Ordering::AcqRel);
        }
        // Whoever makes the backlog pays for it: past the bound, the remover
        // files what waits itself, so `removed/` and the work the filer has
        // left stay bounded however fast removals come.
        if self.removals.outstanding.load(Ordering::Acquire) >= REMOVER_FILES_AFTER
            || self.removals.outstanding_bytes.load(Ordering::Acquire) >= REMOVER_FILES_AFTER_BYTES
        {
            self.settle_removals();
        }
        Ok(verdict)
    }

    /// Whether a file on the file system `dev` can be removed by `begin_removal`.
    pub fn removes_on(&self, dev: u64) -> bool {
        self.removals.takes_from(dev)
    }

    /// Files every removal begun and not filed yet (see the module doc), in
    /// batches, each under one hold of the filer's lock (one filer at a time,
    /// whatever its process) and of its files' locks. `logged`: recovery's check
    /// that a line is in the log already (a crash between the log write and
    /// the drop of the moved file).
    pub(super) fn file_removals_with(&self, mut logged: Option<&mut dyn FnMut(&LogEntry) -> bool>) {
        let mut filed = Vec::new();
        while self.file_batches(&mut logged, &mut filed) {
            self.removals.drop_moved(&mut filed);
        }
        self.removals.drop_moved(&mut filed);
    }

    /// Files batches until none is left, or until `dropping` holds
    /// `DROP_AFTER` names (then says so): the moved names of what it filed go
    /// to `dropping`, to be dropped outside the lock.
    fn file_batches(
        &self,
        logged: &mut Option<&mut dyn FnMut(&LogEntry) -> bool>,
        dropping: &mut Vec<String>,
    ) -> bool {
        loop {
            if dropping.len() >= DROP_AFTER {
                return true;
            }
            // One filer at a time, whatever its thread or process, and each
            // removal filed holding its file's lock, as a transaction would.
            let taken = self
                .lock_only(&Keys::new().store_wide("removals"))
                .and_then(|filing| {
                    let (intents, end, count) = self.removals.take()?;
                    let files = intents.iter().filter_map(|i| i.line.files.first());
                    let keys = files.fold(Keys::new(), |keys, f| keys.path(&f.file));
                    Ok((filing, self.lock_only(&keys)?, (intents, end, count)))
                });
            let (_filing, lock, (intents, end, count)) = match taken {
                Ok(t) => t,
                Err(e) => {
                    log::error!("cannot file removals: {e}");
                    return false;
                }
            };
            let mut read = self.removals.read.lock();
            if end == *read {
                return false;
            }
            let mut filed = Vec::new();
            let mut done = Vec::new();
            let mut filed_bytes = 0;
            for intent in intents {
                // Filed now, or never: its line is read past either way.
                self.removals.count_waiting(&intent.line, -1);
                let Some((file, name, copy)) = self.removals.moved(&intent.name) else {
                    continue;
                };
                filed_bytes += file.metadata().map_or(0, |m| m.len());
                match self.file_one(&lock, intent.line, (&file, &name), copy) {
                    Ok(line) if !logged.as_mut().is_some_and(|l| l(&line)) => filed.push(line),
                    Ok(_) => {}
                    Err(e) => {
                        log::error!("{e}: the removed file stays in {DIR}/{name}");
                        continue;
                    }
                }
                done.push(name);
            }
            if let Err(e) = self.log_many(&filed) {
                log::error!("{e}: the removed files stay in {DIR}/");
                done.clear();
            }
            dropping.append(&mut done);
            *read = end;
            // Lines of an earlier process (filed at open) were never counted.
            let left = self.removals.outstanding.fetch_update(
                Ordering::AcqRel,
                Ordering::Acquire,
                |left| Some(left.saturating_sub(count)),
            );
            let _ = self.removals.outstanding_bytes.fetch_update(
                Ordering::AcqRel,
                Ordering::Acquire,
                |bytes| {
                    Some(if left.is_ok_and(|l| l <= count) {
                        0
                    } else {
                        bytes.saturating_sub(filed_bytes)
                    })
                },
            );
        }
    }

    /// Keeps the moved `file` (`name` in `removed/`) as the pre-image of its
    /// removal `line` under a new id, and returns the line completed; call
    /// with the file's lock held.
    fn file_one(
        &self,
        _lock: &Lock,
        mut line: LogEntry,
        (file, name): (&File, &str),
        copy: bool,
    ) -> Result<LogEntry, StoreError> {
        let Some(rel) = line.files.first().map(|f| f.file.clone()) else {
            return Err(StoreError::Io {
                action: "file",
                path: DIR.into(),
                source: std::io::Error::other("a removal without its file"),
            });
        };
        let at = Path::new(&rel);
        let meta = file.metadata().map_err(io_err("stat", at))?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        // Through `take`: `File`'s own `read_to_end` asks its size and
        // position again, two system calls a file.
        file.take(u64::MAX)
            .read_to_end(&mut bytes)
            .map_err(io_err("read", at))?;
        let sha = sha256_hex(&bytes);
        let adopt = !copy && meta.is_file() && meta.nlink() == 1;
        let moved = (self.removals.dir.as_fd(), OsStr::new(name), file);
        self.objects.keep_moved(moved, &bytes, &sha, adopt)?;
        // Numbered when it was begun; a line of an older version was not.
        if line.tx == 0 {
            line.tx = self.next_tx()?;
        }
        self.objects
            .link_removed(&rel, line.tx, &sha, self.retention)?;
        if let Some(entry) = line.files.first_mut() {
            entry.before = Some(sha);
            entry.lines_removed = bytes.split_inclusive(|&b| b == b'\n').count();
            if let Some(access) = Access::of_fd(file.as_fd()) {
                entry.access.get_or_insert(access);
            }
        }
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::fixture::Project;
    use crate::logline::{FileEntry, Kind, Outcome};
    use crate::objects::Side;

    fn removal(rel: &str) -> LogEntry {
        LogEntry {
            time: "2026-01-01T00:00:00Z".into(),
            kind: Kind::Delete,
            outcome: Outcome::Ok,
            files: vec![FileEntry {
                file: rel.into(),
                removed: true,
                ..FileEntry::default()
            }],
            pid: 42,
            command: "rm".into(),
            ..LogEntry::default()
        }
    }

    /// Pins the calling thread, and the threads it spawns after, to one CPU.
    fn pin_to_one_cpu() {
        use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
        let allowed = sched_getaffinity(None).unwrap();
        let cpu = (0..CpuSet::MAX_CPU).find(|c| allowed.is_set(*c)).unwrap();
        let mut one = CpuSet::new();
        one.set(cpu);
        sched_setaffinity(None, &one).unwrap();
    }

    /// Files removals as the mount's filer does, woken by each as it begins,
    /// until `done`.
    fn filer_until(store: &Store, done: &std::sync::atomic::AtomicBool) {
        while !done.load(Ordering::Acquire) {
            if store.wait_for_removals(Duration::from_millis(20)) {
                store.file_removals(false);
            }
        }
    }

    /// Stops the filer of `race_the_filer` however its removals end, so a
    /// failing one fails the test instead of leaving the scope unjoined.
    struct StopsFiler<'a>(&'a std::sync::atomic::AtomicBool);

    impl Drop for StopsFiler<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }

    /// Runs `remove(store, (root, dir), i)` for `i` in `0..n` on one CPU while
    /// a filer woken by each removal files them, as the mount's does; returns
    /// the project's directory (its state in `.editfs`) and the store.
    fn race_the_filer(
        n: usize,
        mut remove: impl FnMut(&Store, (&Path, BorrowedFd<'_>), usize),
    ) -> (Project, Store) {
        pin_to_one_cpu();
        let p = Project::new();
        let (store, dir) = (p.open(), p.dir());
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| filer_until(&store, &done));
            let _stop = StopsFiler(&done);
            for i in 0..n {
                remove(&store, (p.root(), dir.as_fd()), i);
            }
        });
        (p, store)
    }

    fn adopt(_: &rustix::fs::Stat) -> Verdict {
        Verdict::Adopt
    }

    /// A project whose `gone.txt` has its removal begun, not filed yet.
    fn gone_begun() -> (Project, Store) {
        let p = Project::new();
        fs::write(p.root().join("gone.txt"), "x\n").unwrap();
        let (store, dir) = (p.open(), p.dir());
        begin(&store, &dir, "gone.txt");
        (p, store)
    }

    /// Begins the removal of `name` in `dir`, its inode to be adopted.
    fn begin(store: &Store, dir: &OwnedFd, name: &str) {
        store
            .begin_removal(&removal(name), (dir.as_fd(), OsStr::new(name)), adopt)
            .unwrap();
    }

    fn deletes(store: &Store) -> Vec<LogEntry> {
        let all = store.entries();
        all.into_iter().filter(|e| e.kind == Kind::Delete).collect()
    }

    fn moved_files(state: &Path) -> usize {
        fs::read_dir(state.join(DIR))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name() != INTENTS)
            .count()
    }

    #[test]
    fn a_crash_between_the_move_and_the_log_line_is_filed_by_the_next_open() {
        let p = Project::new();
        let (root, state) = (p.root(), p.state());
        fs::write(root.join("gone.txt"), "a\nb\n").unwrap();
        let (store, dir) = (p.open(), p.dir());
        begin(&store, &dir, "gone.txt");
        assert!(!root.join("gone.txt").exists(), "removed at once");
        // Killed before the filer ran.
        std::mem::forget(store);
        let store = Store::open(&state).unwrap();
        let logged = deletes(&store);
        assert_eq!(logged.len(), 1, "{logged:?}");
        let f = &logged[0].files[0];
        assert_eq!(f.lines_removed, 2);
        assert_eq!(f.before.as_deref(), Some(&*sha256_hex(b"a\nb\n")));
        assert_eq!(
            store
                .objects()
                .read(Side::Pre, "gone.txt", logged[0].tx)
                .as_deref(),
            Some(&b"a\nb\n"[..])
        );
        assert_eq!(moved_files(&state), 0);
    }

    #[test]
    fn a_crash_after_the_log_line_logs_the_removal_once() {
        let p = Project::new();
        let (root, state) = (p.root(), p.state());
        fs::write(root.join("gone.txt"), "kept\n").unwrap();
        let (store, dir) = (p.open(), p.dir());
        begin(&store, &dir, "gone.txt");
        let moved = format!("{}.0", store.removals.moved.0);
        let copy = root.join("copy");
        fs::copy(state.join(DIR).join(&moved), &copy).unwrap();
        store.settle_removals();
        assert_eq!(deletes(&store).len(), 1);
        // As if killed after the line was appended, before the moved file went.
        fs::rename(&copy, state.join(DIR).join(&moved)).unwrap();
        std::mem::forget(store);
        let store = Store::open(&state).unwrap();
        assert_eq!(deletes(&store).len(), 1, "not logged twice");
        assert_eq!(moved_files(&state), 0);
    }

    #[test]
    fn a_transaction_sees_a_removal_the_filer_has_not_reached_and_numbers_after_it() {
        let (_p, store) = gone_begun();
        let _lock = store.lock(&Keys::new().path("gone.txt")).unwrap();
        let logged = deletes(&store);
        assert_eq!(logged.len(), 1);
        assert!(
            store.next_tx().unwrap() > logged[0].tx,
            "a removal takes its id before any transaction after it"
        );
    }

    #[test]
    fn a_removal_past_the_backlog_bound_files_the_backlog_itself() {
        let p = Project::new();
        let root = p.root();
        fs::write(root.join("small.txt"), "x\n").unwrap();
        // Sparse: as large as the bound says, without the disk it would take.
        let big = fs::File::create(root.join("big.bin")).unwrap();
        big.set_len(REMOVER_FILES_AFTER_BYTES).unwrap();
        let (store, dir) = (p.open(), p.dir());
        for name in ["small.txt", "big.bin"] {
            begin(&store, &dir, name);
        }
        assert!(
            !store.removals.pending(),
            "the backlog is left to the filer"
        );
        assert_eq!(deletes(&store).len(), 2);
    }

    #[test]
    fn an_opening_leaves_the_removals_of_a_store_another_process_has_open_to_it() {
        let (p, store) = gone_begun();
        let state = p.state();
        // This process's filer never runs; another process marks the store
        // open, as a mount does (see the store's lock.rs).
        std::mem::forget(store);
        let mark = "import fcntl, os, sys, time\n\
                    f = open(sys.argv[1], 'r+')\n\
                    fcntl.lockf(f, fcntl.LOCK_SH, 1, (1 << 62) + os.getpid(), 0)\n\
                    print('marked', flush=True)\n\
                    time.sleep(60)\n";
        let mut other = std::process::Command::new("python3")
            .args(["-c", mark])
            .arg(state.join("lock"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(other.stdout.take().unwrap()),
            &mut said,
        )
        .unwrap();
        assert_eq!(said.trim(), "marked");
        let store = Store::open(&state).unwrap();
        assert!(
            deletes(&store).is_empty(),
            "filed another live process's removal"
        );
        drop(store);
        other.kill().unwrap();
        other.wait().unwrap();
        let store = Store::open(&state).unwrap();
        assert_eq!(
            deletes(&store).len(),
            1,
            "filed once no other process had it open"
        );
    }

    #[test]
    fn a_transaction_on_another_path_does_not_wait_for_the_filer() {
        let (_p, store) = gone_begun();
        drop(store.lock(&Keys::new().path("other.txt")).unwrap());
        assert!(deletes(&store).is_empty(), "another path's edit filed it");
        assert!(store.removals.pending());
        store.settle_removals();
        assert_eq!(deletes(&store).len(), 1);
    }

    #[test]
    fn a_removed_file_new_to_the_store_becomes_its_object_and_a_known_one_is_dropped() {
        let p = Project::new();
        let (root, state) = (p.root(), p.state());
        fs::write(root.join("a"), "same\n").unwrap();
        fs::write(root.join("b"), "same\n").unwrap();
        let ino = |p: &Path| fs::metadata(p).unwrap().ino();
        let first = ino(&root.join("a"));
        let (store, dir) = (p.open(), p.dir());
        for name in ["a", "b"] {
            begin(&store, &dir, name);
        }
        store.settle_removals();
        let logged = deletes(&store);
        assert_eq!(logged.len(), 2);
        let object = state.join("objects").join(sha256_hex(b"same\n"));
        assert_eq!(ino(&object), first, "the inode itself is the object");
        assert_eq!(
            fs::metadata(&object).unwrap().nlink(),
            3,
            "object and two snapshots"
        );
        assert_eq!(moved_files(&state), 0);
    }

    #[test]
    fn a_file_with_another_name_is_copied_so_that_name_cannot_change_the_kept_version() {
        let p = Project::new();
        let root = p.root();
        fs::write(root.join("a"), "before\n").unwrap();
        fs::hard_link(root.join("a"), root.join("other")).unwrap();
        let (store, dir) = (p.open(), p.dir());
        begin(&store, &dir, "a");
        store.settle_removals();
        fs::write(root.join("other"), "after\n").unwrap();
        let tx = deletes(&store)[0].tx;
        assert_eq!(
            store.objects().read(Side::Pre, "a", tx).as_deref(),
            Some(&b"before\n"[..])
        );
    }

    #[test]
    fn no_moved_file_is_dropped_before_the_whole_backlog_is_filed() {
        let p = Project::new();
        let (root, state) = (p.root(), p.state());
        let (store, dir) = (p.open(), p.dir());
        let count = BATCH * 2 + 1;
        for i in 0..count {
            let name = format!("f{i}");
            fs::write(root.join(&name), format!("{i}\n")).unwrap();
            store
                .begin_removal(&removal(&name), (dir.as_fd(), OsStr::new(&name)), adopt)
                .unwrap();
        }
        let mut seen = 0;
        store.file_removals_with(Some(&mut |_: &LogEntry| {
            seen += 1;
            assert_eq!(
                moved_files(&state),
                count,
                "a moved file was dropped while the backlog was filed (line {seen})"
            );
            false
        }));
        assert_eq!(seen, count);
        assert_eq!(moved_files(&state), 0, "all dropped once filed");
        assert_eq!(deletes(&store).len(), count);
    }

    #[test]
    fn waiting_for_quiet_lasts_while_removals_keep_coming() {
        let p = Project::new();
        let removals = Removals::open(p.root()).unwrap();
        let stream = Duration::from_millis(400);
        let quiet = Duration::from_millis(200);
        let began = std::time::Instant::now();
        let ended = std::thread::scope(|s| {
            let coming = s.spawn(|| {
                while began.elapsed() < stream {
                    removals.moved.1.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                }
                began.elapsed()
            });
            removals.wait_quiet(quiet, Duration::from_secs(60));
            let waited = began.elapsed();
            (coming.join().unwrap(), waited)
        });
        assert!(
            ended.1 >= ended.0,
            "stopped waiting at {:?}, removals came until {:?}",
            ended.1,
            ended.0
        );
        let removals_at_most = Removals::open(p.root()).unwrap();
        let began = std::time::Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                while began.elapsed() < Duration::from_secs(3) {
                    removals_at_most.moved.1.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            removals_at_most.wait_quiet(quiet, Duration::from_millis(100));
            assert!(
                began.elapsed() < Duration::from_secs(3),
                "an endless stream is waited for at most `most` (and one `quiet`)"
            );
        });
    }

    #[test]
    fn a_path_with_no_removal_waiting_files_nothing_and_one_with_a_removal_files_it() {
        let (p, store) = gone_begun();
        let state = p.state();
        store.settle_removals_at("other.txt");
        assert_eq!(moved_files(&state), 1, "not filed for another path");
        assert!(store.removals.pending_at("gone.txt"));
        store.settle_removals_at("gone.txt");
        assert_eq!(moved_files(&state), 0, "filed for its own path");
        assert!(!store.removals.pending_at("gone.txt"));
        assert_eq!(deletes(&store).len(), 1);
    }

    /// `git stash` failed with "unable to unlink old 'F': No such file or
    /// directory" on a mount: the filer dropped a moved file before its
    /// removal had looked at it, so the removal was retried as a copy of a
    /// file no longer there. On one CPU the woken filer runs whenever the
    /// removing thread is preempted, as on a loaded machine.
    #[test]
    fn a_removal_the_filer_files_at_once_still_succeeds() {
        race_the_filer(4000, |store, (root, dir), i| {
            let name = format!("f{i}.txt");
            fs::write(root.join(&name), "x\n").unwrap();
            let removed = store.begin_removal(&removal(&name), (dir, OsStr::new(&name)), adopt);
            if let Err(e) = removed {
                panic!("removal {i} moved the file, yet failed: {e}");
            }
        });
    }

    /// A file opened through the mount while it was being removed must be
    /// copied, not adopted, or its writer could change the kept version. The
    /// verdict was once carried out after the gate opened: a filer woken by
    /// the removal had filed and dropped the moved name first, and the file
    /// was adopted. On one CPU the filer runs whenever the remover is
    /// preempted, as on a loaded machine.
    #[test]
    fn a_removal_decided_as_a_copy_is_copied_though_the_filer_files_at_once() {
        let mut removed = Vec::new();
        let (p, store) = race_the_filer(2000, |store, (root, dir), i| {
            let name = format!("f{i}.txt");
            fs::write(root.join(&name), format!("{i}\n")).unwrap();
            let ino = fs::metadata(root.join(&name)).unwrap().ino();
            let copy = |_: &rustix::fs::Stat| Verdict::Copy;
            let verdict = store.begin_removal(&removal(&name), (dir, OsStr::new(&name)), copy);
            assert_eq!(verdict, Ok(Verdict::Copy));
            removed.push((i, ino));
        });
        let state = p.state();
        store.settle_removals();
        for (i, ino) in removed {
            let object = state
                .join("objects")
                .join(sha256_hex(format!("{i}\n").as_bytes()));
            assert_ne!(
                fs::metadata(&object).unwrap().ino(),
                ino,
                "removal {i}: the file to be copied was adopted"
            );
        }
    }

    #[test]
    fn a_directory_that_took_the_name_is_put_back_and_logged_as_no_removal() {
        let p = Project::new();
        let (root, state) = (p.root(), p.state());
        fs::create_dir(root.join("d")).unwrap();
        fs::write(root.join("d/inside"), "x\n").unwrap();
        let (store, dir) = (p.open(), p.dir());
        let back = |st: &rustix::fs::Stat| {
            assert_eq!(
                rustix::fs::FileType::from_raw_mode(st.st_mode),
                rustix::fs::FileType::Directory
            );
            Verdict::PutBack
        };
        let verdict = store.begin_removal(&removal("d"), (dir.as_fd(), OsStr::new("d")), back);
        assert_eq!(verdict, Ok(Verdict::PutBack));
        assert_eq!(fs::read_to_string(root.join("d/inside")).unwrap(), "x\n");
        store.settle_removals();
        assert!(deletes(&store).is_empty());
        assert_eq!(moved_files(&state), 0);
    }
}
