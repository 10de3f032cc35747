//! Durability: the state directory, transaction ids, the journal, kept versions and the log.
//!
//! Layout of a state directory (`SOURCE/.editfs/` by default):
//!
//! ```text
//! .gitignore                  `*`, so the project's git never sees any of this
//! lock                        locked for the whole of each transaction (serializes writers)
//! txid                        the last transaction id handed out
//! log                         one JSON line per transaction, whatever its outcome
//! journal/<pid>-<n>.wal       records of commits in progress or not yet checkpointed,
//!                             one JSON line each, one file per process (see journal.rs)
//! removed/intents             log lines of removals not filed yet (see removals.rs)
//! removed/<tx>                a file removed through the mount, until it is filed
//! objects/<sha256>            file contents, each stored once
//! snapshots/<path>/<tx>       <path> before transaction <tx> (a link to its object)
//! versions/<path>/<tx>        <path> after transaction <tx>
//! reports/<path>              the latest report on <path> by `editfs apply` (see shared.rs)
//! tmp/                        temporary files of commits in progress, and files
//!                             dropped, until the reaper unlinks them (see reaper.rs)
//! daemon.log                  what `editfs mount --daemon` logs
//! ```
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
//! from there (`journal::repair`). A file written since the commit is left as
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
//!   the mount's checkpoint thread, woken then, and not under the store's lock),
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

pub mod atomic;
pub mod caller;
pub mod journal;
pub mod logline;
pub mod objects;
pub mod reaper;
pub mod rel;
pub mod removals;
pub mod shared;
mod staged;
pub mod trust;

pub use staged::Staged;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

pub use logline::LogEntry;

use crate::engine::sha256_hex;

/// Name of the state directory inside a project.
pub const STATE_DIR: &str = ".editfs";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the transaction counter in {} is damaged: {content:?}", path.display())]
    BadCounter { path: PathBuf, content: String },
    #[error("{} is a symbolic link; edit the file it points to", name.to_string_lossy())]
    Symlink { name: std::ffi::OsString },
    #[error("{}: the user this transaction is for may not {what} outside the mount either ({source})", path.display())]
    Denied {
        path: PathBuf,
        what: &'static str,
        source: rustix::io::Errno,
    },
    #[error("{} is not the file it was when its edit handle was opened: it was replaced, renamed or created since", path.display())]
    Stale { path: PathBuf },
    #[error("{} changed each of the {times} times this edit was decided on it", path.display())]
    Changing { path: PathBuf, times: usize },
    #[error(
        "the versions this change would keep are {bytes} bytes, more than all kept versions may take ({cap} bytes, --keep-bytes)"
    )]
    OverCap { bytes: u64, cap: u64 },
    #[error("{} is {size} bytes, over the {limit} bytes a transaction reads (--max-file-size)", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
}

/// Wraps an `io::Error` with what was being done and to which path.
pub(crate) fn io_err<'p>(
    action: &'static str,
    path: &'p Path,
) -> impl FnOnce(io::Error) -> StoreError + 'p {
    move |source| StoreError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// How many versions to keep.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// Versions kept per file (each side: before and after).
    pub keep: usize,
    /// Bytes all kept versions may take; the oldest go first.
    pub cap: u64,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            keep: 100,
            cap: 1 << 30,
        }
    }
}

/// One file of a commit.
pub struct Change<'a> {
    /// Path relative to the project root.
    pub rel: &'a str,
    /// Its directory, held open since the file was read: the new version is
    /// installed there, whatever its path leads to by now.
    pub dir: BorrowedFd<'a>,
    /// The file as it was opened to be read (for its mode, owner and attributes).
    pub old: Option<&'a File>,
    /// Its bytes before, if it existed.
    pub pre: Option<&'a [u8]>,
    pub new: &'a [u8],
    /// The SHA-256 of `new`, when the engine hashed these very bytes for its
    /// report: the store does not hash them a second time. Never a hash that
    /// came from outside.
    pub new_sha: Option<&'a str>,
    /// The user the commit acts for (`None`: the daemon for itself), as
    /// `caller` says: its credentials write a file with other names in place,
    /// and its CAP_FSETID decides whether the new version keeps set-id bits.
    pub by: Option<&'a caller::Caller>,
    /// The mode and owner a file that does not exist now (`old` is `None`) is
    /// made with: a file made for a user is that user's, and an undo brings a
    /// removed file back as it was, since a default mode would show a private
    /// file to every user. `None`: 0o644, the daemon's user.
    pub fresh: Option<logline::Access>,
}

impl Change<'_> {
    /// The file this change replaces at its name: the one read there, not the
    /// file a move takes its mode and owner from.
    fn replaces(&self) -> Option<&File> {
        self.old.filter(|_| self.pre.is_some())
    }
}

/// A file a commit removes (an undo of the transaction that created it).
pub struct Removal<'a> {
    /// Path relative to the project root.
    pub rel: &'a str,
    /// Its directory, held open since the file was read.
    pub dir: BorrowedFd<'a>,
    /// Its bytes now, kept as its pre-image.
    pub pre: &'a [u8],
    /// The file as it was opened to be read: only that file is removed.
    pub file: Option<&'a File>,
    /// The user the removal is made for (`None`: the daemon for itself).
    pub by: Option<&'a caller::Caller>,
}

/// The mode and owner of the file `r` removes, read before it goes.
fn removed_access(r: &Removal<'_>) -> Option<logline::Access> {
    let name = Path::new(r.rel).file_name()?;
    let st = rustix::fs::statat(r.dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(logline::Access {
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
    })
}

/// An open state directory.
pub struct Store {
    dir: PathBuf,
    /// `tmp/`, held open so commits name their temporary files relative to it.
    tmp: OwnedFd,
    /// `txid`, held open: read and written in place under the lock, never
    /// replaced, so every process sharing the state directory counts in it.
    counter: File,
    objects: objects::Objects,
    journal: journal::Journal,
    retention: Retention,
    recovered: journal::Recovered,
    /// What commits left for the next checkpoint.
    unsettled: parking_lot::Mutex<Unsettled>,
    /// Held for the whole of a checkpoint, so that one runs at a time.
    checkpointing: parking_lot::Mutex<()>,
    /// Wakes the thread that makes checkpoints (`wait_for_checkpoint`) when
    /// enough commits wait for one; waited on with `unsettled`.
    due: parking_lot::Condvar,
    /// A thread makes checkpoints when woken: commits leave them to it
    /// instead of syncing under the store's lock (see `settle`).
    checkpointer: std::sync::atomic::AtomicBool,
    /// Removals moved aside and not filed yet (see removals.rs).
    removals: removals::Removals,
    /// The log, held open for appending while it is the file named `log`
    /// (another process sharing the state directory may move it to `log.1`).
    log_file: parking_lot::Mutex<Option<LogFile>>,
    /// Buffers a commit read a file into, or that held a content no longer
    /// remembered (`Objects::remember`), for the next commit to read its file
    /// into: a new buffer, or one whose pages the trim gave back, costs a page
    /// fault per 4 KiB. At most `SPARE_BUFFERS`, of at
    /// most `SPARE_BUFFER_BYTES` each. Taken alone and briefly.
    spare: parking_lot::Mutex<Vec<Vec<u8>>>,
}

/// Buffers kept for reuse (`Store::spare`): the file read and the content it
/// replaces of the latest commit.
const SPARE_BUFFERS: usize = 2;

/// Buffers larger than this are freed, not kept (`Store::spare`).
const SPARE_BUFFER_BYTES: usize = 1 << 20;

/// The log file as opened, and which file it is.
struct LogFile {
    file: File,
    id: (u64, u64),
}

/// Commits past which a checkpoint is due at once, whatever else makes them.
pub const CHECKPOINT_AFTER: usize = 64;

/// New contents left unsynced past which a checkpoint is due at once: each
/// holds a descriptor until it is synced.
const CHECKPOINT_FILES: usize = 1024;

/// How far past due a commit lets the checkpointer fall behind before it
/// makes the checkpoint itself: the journal holds at most this many times
/// `CHECKPOINT_AFTER` finished records, and descriptors are bounded the same way.
const CHECKPOINT_BEHIND: usize = 4;

/// The largest version a committed record carries the bytes of (see
/// `Store::keep_version`): source files, in their thousands of lines. A
/// larger one is synced on its own, before the record: its bytes would cost
/// the same to write twice, and the records a crash leaves are read whole.
const CARRIED_MAX: usize = 256 << 10;

/// What the checkpoint must sync before the records of finished transactions
/// can go (see the module doc).
#[derive(Default)]
struct Unsettled {
    /// Transactions whose files are in place and whose line is appended.
    records: Vec<u64>,
    /// The directories their files went into.
    dirs: Vec<OwnedFd>,
    /// Their new contents, put in place unsynced (their bytes are durable in
    /// the store meanwhile), each with its temporary name (for the error).
    files: Temps,
    /// The versions they kept unsynced (their bytes are durable in their
    /// records meanwhile), each with its path (for the error).
    objects: Temps,
    /// Lines were appended since the log was last synced.
    lines: bool,
    /// The log moved to `log.1` since: that file, and the move, are synced too.
    rotated: bool,
    /// The first transaction of those a checkpoint is syncing now.
    syncing: Option<u64>,
    /// The inodes of the new contents it is syncing.
    syncing_files: Vec<u64>,
    /// Transactions whose new contents could not be synced: their records stay
    /// for the next recovery, which writes a torn content again from the store
    /// (a retry on the same descriptor may say 0 for bytes that never reached
    /// the disk, as Linux reports a writeback error once).
    kept: Vec<u64>,
}

impl Unsettled {
    /// Whether `times` checkpoints' worth of commits wait.
    fn due(&self, times: usize) -> bool {
        self.records.len() >= times * CHECKPOINT_AFTER
            || self.files.len() + self.objects.len() >= times * CHECKPOINT_FILES
    }

    fn is_empty(&self) -> bool {
        self.records.is_empty() && !self.lines
    }
}

/// A new content written to a temporary file, unsynced.
struct Temp {
    file: File,
    /// Its name, for the error.
    name: String,
    /// Its inode: a change through the mount to the file it became waits
    /// until it is synced (`Store::settle_before_change`).
    ino: u64,
}

type Temps = Vec<Temp>;

/// Versions a committed record carries the bytes of (see `Store::keep_version`).
type Carry<'b> = Vec<(objects::Later, &'b [u8])>;

/// Held while a transaction runs; dropping it lets the next one in.
pub struct Lock {
    _file: File,
}

/// Makes the state directory its owner's alone (0700): it keeps every version of
/// every file, whatever those files' modes, so no other user may look in.
fn private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = fs::set_permissions(dir, fs::Permissions::from_mode(0o700)) {
        log::warn!("cannot make {} private (0700): {e}", dir.display());
    }
}

impl Store {
    /// Opens `dir`, creating its layout if needed, and recovers from any crash
    /// before anything else runs (see `recovered`).
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_with(dir, Retention::default())
    }

    pub fn open_with(dir: &Path, retention: Retention) -> Result<Store, StoreError> {
        for sub in ["", "snapshots", "versions", "objects", "journal", "tmp"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d).map_err(io_err("create the state directory", &d))?;
        }
        private(dir);
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            fs::write(&ignore, "*\n").map_err(io_err("write", &ignore))?;
        }
        let tmp = atomic::open_dir(&dir.join("tmp"))?;
        let txid = dir.join("txid");
        let counter = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&txid)
            .map_err(io_err("open", &txid))?;
        let mut store = Store {
            dir: dir.to_owned(),
            tmp,
            counter,
            objects: objects::Objects::new(dir),
            journal: journal::Journal::new(dir),
            retention,
            recovered: journal::Recovered::default(),
            unsettled: parking_lot::Mutex::default(),
            checkpointing: parking_lot::Mutex::default(),
            due: parking_lot::Condvar::new(),
            checkpointer: std::sync::atomic::AtomicBool::new(false),
            removals: removals::Removals::open(dir)?,
            log_file: parking_lot::Mutex::default(),
            spare: parking_lot::Mutex::default(),
        };
        let lock = store.lock()?;
        let mut logged: Option<std::collections::HashSet<u64>> = None;
        let (recovered, handled) = store.journal.recover(
            store.tmp.as_fd(),
            (
                |sha: &str| store.objects.content(sha),
                |sha: &str, bytes: &[u8]| store.objects.restore(sha, bytes),
            ),
            |line| {
                let known =
                    logged.get_or_insert_with(|| store.entries().iter().map(|e| e.tx).collect());
                if known.contains(&line.tx) {
                    return Ok(false);
                }
                store.log(line)?;
                Ok(true)
            },
            |record| {
                for f in &record.files {
                    store.objects.forget(&f.rel, record.tx);
                }
            },
        )?;
        store.recovered = recovered;
        store.sync_log()?;
        store.unsettled.lock().lines = false;
        store.journal.remove_handled(handled)?;
        store.objects.reaper().drain();
        // Temporary files of writes a crash cut short: the commit's, and those of
        // the journal, objects and counter (written whole or not at all).
        let swept: usize = ["tmp", "journal", "objects", ""]
            .iter()
            .map(|d| atomic::sweep(&dir.join(d)))
            .sum();
        drop(lock);
        // Removals a crash left moved aside; a line already in the log is not
        // appended again.
        let mut logged: Option<std::collections::HashSet<_>> = None;
        store.file_removals_with(Some(&mut |line| {
            let logged = logged.get_or_insert_with(|| {
                let entries = store.entries();
                entries.iter().filter_map(removals::removal_key).collect()
            });
            removals::removal_key(line).is_some_and(|k| logged.contains(&k))
        }));
        store.counter_past_the_log(&store.lock_only()?)?;
        if swept > 0 {
            log::info!("removed {swept} temporary file(s) left by an interrupted commit");
        }
        if !store.recovered.is_empty() {
            log::warn!("{}", store.recovered);
        }
        Ok(store)
    }

    /// What opening the store recovered from an interrupted commit.
    pub fn recovered(&self) -> &journal::Recovered {
        &self.recovered
    }

    pub fn objects(&self) -> &objects::Objects {
        &self.objects
    }

    /// Closes `file`, which a commit replaced, in the background: its last
    /// close frees its blocks, which is slow where that is a synchronous
    /// discard (see reaper.rs), and nobody waits for it.
    pub fn release(&self, file: File) {
        self.objects.reaper().close(file);
    }

    /// The state directory of the nearest ancestor of `file` that has one, as git finds `.git`.
    pub fn find_for(file: &Path) -> Option<PathBuf> {
        file.ancestors()
            .skip(1)
            .map(|a| a.join(STATE_DIR))
            .find(|d| d.is_dir())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps `report`, of a transaction this process made on `rel`, for a mount
    /// of the same project to show (see shared.rs). A failure only costs that.
    pub fn share_report(&self, rel: &str, report: &crate::engine::Report) {
        let shared = shared::Shared {
            tx: report.tx,
            text: report.to_string(),
            json: report.to_json(),
        };
        if let Err(e) = shared::keep(&self.dir, rel, &shared) {
            log::warn!("the report of transaction {} is not shared: {e}", report.tx);
        }
    }

    /// The report `share_report` kept last on `rel`, if it is newer than `tx`.
    pub fn shared_report_after(&self, rel: &str, tx: u64) -> Option<shared::Shared> {
        shared::latest(&self.dir, rel).filter(|s| s.tx > tx)
    }

    /// Remembers that a commit left `bytes`, whose SHA-256 is `sha`, in
    /// `rel`, so that the next commit of `rel` finding them there keeps them by
    /// that hash (see `Objects::remember`).
    pub fn remember(&self, rel: &str, sha: &str, bytes: Vec<u8>) {
        for gone in self.objects.remember(rel, sha, bytes) {
            self.recycle(gone);
        }
    }

    /// An empty buffer to read a file into: a spare one if any (see `spare`).
    pub fn buffer(&self) -> Vec<u8> {
        self.spare.lock().pop().unwrap_or_default()
    }

    /// Keeps `buffer` (its bytes are left as they are: whoever takes it
    /// empties it) for `buffer` to hand out again, or frees it.
    pub fn recycle(&self, buffer: Vec<u8>) {
        if buffer.capacity() > SPARE_BUFFER_BYTES {
            return;
        }
        let mut spare = self.spare.lock();
        if spare.len() < SPARE_BUFFERS {
            spare.push(buffer);
            return;
        }
        drop(spare);
        drop(buffer);
    }

    pub fn tmp_dir(&self) -> BorrowedFd<'_> {
        self.tmp.as_fd()
    }

    /// Waits for and takes the transaction lock, once the removals this
    /// process began are filed: whatever runs under it sees them in the history.
    pub fn lock(&self) -> Result<Lock, StoreError> {
        self.settle_removals();
        self.lock_only()
    }

    /// Files the removals this process began and has not filed yet, so a
    /// reader of history, snapshots or the log sees every removal made before.
    /// Never call it with the lock held: it takes the lock.
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
        decide: impl FnOnce(&rustix::fs::Stat) -> removals::Verdict,
    ) -> Result<removals::Verdict, rustix::io::Errno> {
        self.removals.begin(line, at, decide)
    }

    /// Whether a file on the file system `dev` can be removed by `begin_removal`.
    pub fn removes_on(&self, dev: u64) -> bool {
        self.removals.takes_from(dev)
    }

    /// `lock`, but only if no transaction holds it now: `None` then.
    pub fn try_lock(&self) -> Result<Option<Lock>, StoreError> {
        self.settle_removals();
        let (file, path) = self.lock_file()?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(io_err("lock", &path)(e)),
        }
    }

    /// Waits for and takes the transaction lock as it is.
    fn lock_only(&self) -> Result<Lock, StoreError> {
        let (file, path) = self.lock_file()?;
        file.lock().map_err(io_err("lock", &path))?;
        Ok(Lock { _file: file })
    }

    fn lock_file(&self) -> Result<(File, PathBuf), StoreError> {
        let path = self.dir.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        Ok((file, path))
    }

    /// Moves the counter past the last id in the log, should a machine crash
    /// have lost an unsynced counter but not the log lines written under it.
    fn counter_past_the_log(&self, _lock: &Lock) -> Result<(), StoreError> {
        let Some(last) = last_logged_tx(&self.dir.join("log")) else {
            return Ok(());
        };
        let path = self.dir.join("txid");
        let counter = self.read_counter().ok();
        let behind = match counter.as_deref().map(counter_text) {
            None | Some("") => true,
            Some(c) => c.parse::<u64>().is_ok_and(|c| c < last),
        };
        if behind {
            log::warn!("the transaction counter was behind the log: moved to {last}");
            let text = format!("{last}\n");
            use std::os::unix::fs::FileExt;
            self.counter
                .write_all_at(text.as_bytes(), 0)
                .and_then(|()| self.counter.set_len(text.len() as u64))
                .and_then(|()| self.counter.sync_data())
                .map_err(io_err("write", &path))?;
        }
        Ok(())
    }

    /// The last transaction id handed out so far, read without the lock (0 when
    /// the counter cannot be read).
    pub fn last_tx(&self) -> u64 {
        let text = self.read_counter().unwrap_or_default();
        counter_text(&text).parse().unwrap_or(0)
    }

    /// Hands out the next transaction id; call with the lock held. It is written
    /// in place and unsynced: at open the counter is moved past the log (see the
    /// module doc), and no new inode is made per id (what made `rm -r` slow).
    pub fn next_tx(&self, _lock: &Lock) -> Result<u64, StoreError> {
        let path = self.dir.join("txid");
        let last = match self.read_counter().map_err(io_err("read", &path))? {
            s if counter_text(&s).is_empty() => 0,
            s => counter_text(&s)
                .parse::<u64>()
                .map_err(|_| StoreError::BadCounter {
                    path: path.clone(),
                    content: s,
                })?,
        };
        let next = last + 1;
        // The counter only grows, so the new text always covers the old one.
        std::os::unix::fs::FileExt::write_all_at(&self.counter, format!("{next}\n").as_bytes(), 0)
            .map_err(io_err("write", &path))?;
        Ok(next)
    }

    /// The counter's text: one read, as it is a few bytes.
    fn read_counter(&self) -> io::Result<String> {
        let mut buf = [0u8; 64];
        let n = std::os::unix::fs::FileExt::read_at(&self.counter, &mut buf, 0)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

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

    /// Writes the new contents of `changes` before the lock is taken, for
    /// `commit_with` to take as they are (see staged.rs): a transaction of
    /// many files then holds the lock for its record, not for making files.
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

    /// Drops the oldest versions until `bytes` more fit under `--keep-bytes`,
    /// so the cap holds before a commit adds its versions, not only after
    /// the next trim; refuses versions that alone are more than the cap.
    /// Versions not checkpointed yet are spared (see `spare_unsettled`): for
    /// at most a second, they may stand past the cap.
    pub fn make_room(&self, bytes: u64) -> Result<(), StoreError> {
        let cap = self.retention.cap;
        if bytes > cap {
            return Err(StoreError::OverCap { bytes, cap });
        }
        self.objects.cap(cap - bytes);
        Ok(())
    }

    /// Spares the versions of the transactions the next checkpoint has still
    /// to settle from the size cap: until it syncs their files, the store
    /// holds the only durable copy of their new contents.
    fn spare_unsettled(&self, u: &Unsettled) {
        let first = u
            .records
            .iter()
            .chain(&u.kept)
            .copied()
            .chain(u.syncing)
            .min();
        self.objects.spare_from(first.unwrap_or(u64::MAX));
    }

    /// Leaves the record of `tx`, whose files went into `dirs` with the new
    /// contents `files`, to the next checkpoint, due at once when enough
    /// records wait for one.
    ///
    /// A commit runs under the store's lock, so a checkpoint made here (tens
    /// of syncs, for any user's commits) would hold every other transaction
    /// for as long: with a checkpointer, the commit only wakes it; a
    /// checkpointer far behind is caught up after the lock (`catch_up`).
    fn settle<'d>(&self, tx: u64, dirs: impl Iterator<Item = BorrowedFd<'d>>, files: Temps) {
        let due = {
            let mut u = self.unsettled.lock();
            u.records.push(tx);
            u.dirs.extend(dirs.filter_map(|d| rustix::io::dup(d).ok()));
            u.files.extend(files);
            self.spare_unsettled(&u);
            u.due(1)
        };
        let delegated = self.checkpointer.load(std::sync::atomic::Ordering::Relaxed);
        if due && delegated {
            self.due.notify_one();
        } else if due && let Err(e) = self.checkpoint() {
            log::error!("checkpoint: {e}");
        }
    }

    /// Called once a transaction that wrote `files` files has let go of the
    /// store's lock: when the checkpointer is `CHECKPOINT_BEHIND` behind, a
    /// transaction of more than `OWN_SHARE` files makes the checkpoint
    /// itself, and waits for it, so whoever makes the backlog pays for it;
    /// at twice that, any transaction does, which bounds the journal and
    /// the descriptors held. No other caller waits: the lock is free.
    pub fn catch_up(&self, files: usize) {
        /// Files a transaction writes below which it leaves a backlog it
        /// did not make to the checkpointer, until the hard bound.
        const OWN_SHARE: usize = 16;
        let (behind, far) = {
            let u = self.unsettled.lock();
            (u.due(CHECKPOINT_BEHIND), u.due(2 * CHECKPOINT_BEHIND))
        };
        if (far || (behind && files > OWN_SHARE))
            && let Err(e) = self.checkpoint()
        {
            log::error!("checkpoint: {e}");
        }
    }

    /// For the thread that makes checkpoints: waits until one is due, or
    /// `most` passed; says whether one is due. From the first call on,
    /// commits leave due checkpoints to that thread.
    pub fn wait_for_checkpoint(&self, most: std::time::Duration) -> bool {
        self.checkpointer
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let mut u = self.unsettled.lock();
        if !u.due(1) {
            self.due.wait_for(&mut u, most);
        }
        u.due(1)
    }

    /// Syncs what finished transactions left unsynced (their new contents,
    /// their log lines, the directories their files went into) and then drops
    /// their records (see the module doc), and wakes the reaper for what
    /// waits for it. Cheap when nothing waits; safe to call from any thread at
    /// any time, without the lock. What fails stays for the next one.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.objects.reaper().kick();
        // One at a time: a commit's own checkpoint must not end the sparing
        // (`syncing`) of what the periodic one is still syncing.
        let _one = self.checkpointing.lock();
        let mut due = {
            let mut u = self.unsettled.lock();
            let mut due = std::mem::take(&mut *u);
            u.kept = std::mem::take(&mut due.kept);
            u.syncing = due.records.iter().min().copied();
            u.syncing_files = due.files.iter().map(|t| t.ino).collect();
            due
        };
        if due.is_empty() {
            return Ok(());
        }
        let files = std::mem::take(&mut due.files);
        let objects = std::mem::take(&mut due.objects);
        let contents = sync_all(&files).and_then(|()| sync_all(&objects));
        // A file replaced since frees its blocks at this close.
        for t in files.into_iter().chain(objects) {
            self.release(t.file);
        }
        let synced = contents.and_then(|()| self.sync_due(&due));
        let mut u = self.unsettled.lock();
        u.syncing = None;
        u.syncing_files.clear();
        if let Err(e) = synced {
            let records = if contents_failed(&e) {
                &mut u.kept
            } else {
                &mut u.records
            };
            records.extend(&due.records);
            u.dirs.extend(due.dirs);
            u.lines |= due.lines;
            u.rotated |= due.rotated;
            self.spare_unsettled(&u);
            return Err(e);
        }
        self.spare_unsettled(&u);
        drop(u);
        self.journal.remove(&due.records)
    }

    /// Waits, by a checkpoint, until the new content a commit left unsynced in
    /// the file of inode `ino` is synced, if one is: called before a change
    /// through the mount writes to that file, which recovery would otherwise
    /// take for a torn content written since its commit, and leave as it is.
    pub fn settle_before_change(&self, ino: u64) {
        let pending = {
            let u = self.unsettled.lock();
            u.files.iter().any(|t| t.ino == ino) || u.syncing_files.contains(&ino)
        };
        if pending && let Err(e) = self.checkpoint() {
            log::error!("checkpoint before a change: {e}");
        }
    }

    /// `settle_before_change` for a rename or a new link through the mount,
    /// which may carry any unsynced file away from the path its record names.
    pub fn settle_before_move(&self) {
        if self.unsynced()
            && let Err(e) = self.checkpoint()
        {
            log::error!("checkpoint before a rename: {e}");
        }
    }

    /// Whether a commit left a new content unsynced: only then do changes
    /// through the mount look at which file they change (`settle_before_change`).
    pub fn unsynced(&self) -> bool {
        let u = self.unsettled.lock();
        !u.files.is_empty() || !u.syncing_files.is_empty()
    }

    fn sync_due(&self, due: &Unsettled) -> Result<(), StoreError> {
        if due.rotated {
            let old = self.dir.join(OLD_LOG);
            let file = File::open(&old).map_err(io_err("open", &old))?;
            file.sync_data().map_err(io_err("sync", &old))?;
            atomic::sync_dir(&self.dir)?;
        }
        if due.lines || !due.records.is_empty() {
            self.sync_log()?;
        }
        let mut seen = std::collections::HashSet::new();
        for dir in &due.dirs {
            let st = rustix::fs::fstat(dir).map_err(|e| io_err("stat", &self.dir)(e.into()))?;
            if seen.insert((st.st_dev, st.st_ino)) {
                rustix::fs::fsync(dir)
                    .map_err(|e| io_err("sync a directory of", &self.dir)(e.into()))?;
            }
        }
        Ok(())
    }

    fn sync_log(&self) -> Result<(), StoreError> {
        let path = self.dir.join("log");
        match File::open(&path) {
            Ok(file) => file.sync_data().map_err(io_err("sync", &path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("open", &path)(e)),
        }
    }

    /// Writes the new contents to temporary files, keeps both versions of every
    /// file and marks the journal record committed: the commit point. The
    /// temporary files are left unsynced, for the checkpoint: each new content
    /// is kept in the store, durably, before the record naming it is written,
    /// and recovery writes a new content the crash of the machine left torn
    /// again from there (`journal::repair`). So a commit waits for one sync,
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
            if let Some(meta) = old.and_then(|i| metas[i].as_ref()) {
                f.access = Some(logline::Access::of(meta));
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
            });
        }
        record.files.extend(removals.iter().map(|r| journal::Entry {
            rel: r.rel.to_owned(),
            tmp: String::new(),
            beside: false,
            in_place: false,
            inode: None,
            remove: true,
            sha256: None,
            made: None,
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

    /// Keeps the stored object `sha` (see `Objects::put_from`) as the pre-image
    /// of `rel` at `tx`, unsynced (as its log line); call with the lock held.
    /// `None` when the object went meanwhile (its last version was dropped):
    /// the caller stores it again.
    pub fn keep_pre_image(
        &self,
        _lock: &Lock,
        tx: u64,
        rel: &str,
        sha: &str,
    ) -> Result<Option<String>, StoreError> {
        let name = self.objects.link(objects::Side::Pre, rel, tx, sha)?;
        if name.is_some() {
            self.objects.prune(rel, self.retention.keep);
            self.objects.cap(self.retention.cap);
        }
        Ok(name)
    }

    /// Keeps the file `name` in `dir`, about to be removed, as the pre-image of
    /// `rel` at `tx` (see `Objects::keep_file`, also for `open`); returns its bytes.
    pub fn keep_removed(
        &self,
        tx: u64,
        rel: &str,
        dir: BorrowedFd<'_>,
        name: &std::ffi::OsStr,
        open: bool,
    ) -> Result<Vec<u8>, StoreError> {
        let bytes = self
            .objects
            .keep_file(objects::Side::Pre, rel, tx, dir, name, open)?;
        self.objects.prune(rel, self.retention.keep);
        self.objects.cap(self.retention.cap);
        Ok(bytes)
    }

    /// Every log line, oldest first. Removals this process began are in it
    /// once filed: `lock` and `settle_removals` file them (this does not, as
    /// it may be called with the lock held).
    pub fn entries(&self) -> Vec<LogEntry> {
        entries_in(&self.dir)
    }

    /// The last transaction the log records that changed `rel` (or removed
    /// it, kept or not): what a re-sent deletion is judged by
    /// (`engine::deleted_before`).
    pub fn last_change(&self, rel: &str) -> Option<LogEntry> {
        use logline::Outcome;
        self.entries().into_iter().rev().find(|e| {
            matches!(e.outcome, Outcome::Ok | Outcome::Skipped)
                && e.file(rel).is_some_and(logline::FileEntry::touched)
        })
    }

    /// Appends `entries` to the log in one write (see `log`).
    fn log_many(&self, entries: &[LogEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.dir.join("log");
        let mut text = String::new();
        for entry in entries {
            text += &serde_json::to_string(entry)
                .map_err(|e| io_err("encode a line of", &path)(e.into()))?;
            text.push('\n');
        }
        self.append_to_log(&text)
    }

    /// Appends one JSON line to the log, unsynced: the next checkpoint syncs it
    /// (see the module doc), so a burst of transactions, or an `rm -r` of a tree,
    /// pays one sync, not one a line.
    pub fn log(&self, entry: &LogEntry) -> Result<(), StoreError> {
        let path = self.dir.join("log");
        let mut line = serde_json::to_string(entry)
            .map_err(|e| io_err("encode a line of", &path)(e.into()))?;
        line.push('\n');
        self.append_to_log(&line)
    }

    fn append_to_log(&self, text: &str) -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.dir.join("log");
        let now = fs::metadata(&path).ok();
        let rotated = rotate(&path, now.as_ref(), self.objects.reaper());
        {
            let mut held = self.log_file.lock();
            let same = |l: &LogFile| now.as_ref().is_some_and(|m| l.id == (m.dev(), m.ino()));
            let file = match held.take().filter(|l| !rotated && same(l)) {
                Some(open) => held.insert(open),
                None => held.insert(open_log(&path)?),
            };
            (&file.file)
                .write_all(text.as_bytes())
                .map_err(io_err("append to", &path))?;
        }
        let mut u = self.unsettled.lock();
        u.lines = true;
        u.rotated |= rotated;
        Ok(())
    }
}

/// Opens the log at `path` for appending, creating it if needed.
fn open_log(path: &Path) -> Result<LogFile, StoreError> {
    use std::os::unix::fs::MetadataExt;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_err("open", path))?;
    let meta = file.metadata().map_err(io_err("stat", path))?;
    Ok(LogFile {
        id: (meta.dev(), meta.ino()),
        file,
    })
}

#[cfg(test)]
impl Store {
    /// What `kill -9` leaves of this store: no checkpoint, its journal file unlocked.
    fn killed(self) {
        self.journal.abandon();
        std::mem::forget(self);
    }
}

impl Drop for Store {
    /// What the last transactions left unsynced is synced when the store closes
    /// (`editfs apply` ends, a mount stops).
    fn drop(&mut self) {
        self.settle_removals();
        if let Err(e) = self.checkpoint() {
            log::error!("checkpoint: {e}");
        }
    }
}

/// Bytes past which the log starts anew, its lines moving to `log.1` (replacing
/// the previous `log.1`): the log holds the latest 8 to 16 MiB of lines (tens of
/// thousands of transactions), however many writers send however much.
pub const LOG_ROTATE: u64 = 8 << 20;

/// The name the log's older lines move to.
const OLD_LOG: &str = "log.1";

/// Moves the log at `path` to `log.1` once it has passed `LOG_ROTATE`; called
/// with the transaction lock held, before a line is appended. Says whether it did.
/// The previous `log.1`, whose lines go, is handed to `reaper` first: freeing
/// its megabytes is the reaper's wait, not the transaction's.
fn rotate(path: &Path, now: Option<&fs::Metadata>, reaper: &reaper::Reaper) -> bool {
    if now.is_none_or(|m| m.len() < LOG_ROTATE) {
        return false;
    }
    let old = path.with_file_name(OLD_LOG);
    let _ = reaper.remove(&old);
    match fs::rename(path, &old) {
        Ok(()) => true,
        Err(e) => {
            log::warn!("cannot move {} to {}: {e}", path.display(), old.display());
            false
        }
    }
}

/// The counter's text, less what an unsynced write cut short by a machine crash
/// may leave around it (blanks, zero bytes).
fn counter_text(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\0')
}

/// Syncs every file of `files` (its bytes, mode and owner).
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

fn sync_all(files: &Temps) -> Result<(), StoreError> {
    files.iter().try_for_each(|t| {
        t.file
            .sync_all()
            .map_err(io_err(SYNC_CONTENT, Path::new(&t.name)))
    })
}

/// The action `sync_all` names in its errors.
const SYNC_CONTENT: &str = "sync the new content";

/// Whether `e` is `sync_all`'s.
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

fn contents_failed(e: &StoreError) -> bool {
    matches!(e, StoreError::Io { action, .. } if *action == SYNC_CONTENT)
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

/// The highest id among the last lines of the log at `path` (its tail only, so
/// a long log costs nothing more), or of `log.1` when the log was just moved.
fn last_logged_tx(path: &Path) -> Option<u64> {
    last_in(path).or_else(|| last_in(&path.with_file_name(OLD_LOG)))
}

fn last_in(path: &Path) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 << 10;
    let mut file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    String::from_utf8_lossy(&tail)
        .lines()
        .filter_map(|l| serde_json::from_str::<LogEntry>(l).ok())
        .map(|e| e.tx)
        .max()
}

/// Every line of the log in state directory `dir`, oldest first; reads only, so
/// it works on a read-only state directory or the mount's `.editfs/` view.
pub fn entries_in(dir: &Path) -> Vec<LogEntry> {
    log_files(dir)
        .iter()
        .flat_map(|path| {
            let text = fs::read_to_string(path).unwrap_or_default();
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The files the log's lines are in, oldest first.
pub fn log_files(dir: &Path) -> [PathBuf; 2] {
    [dir.join(OLD_LOG), dir.join("log")]
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    fn line(tx: u64) -> LogEntry {
        LogEntry {
            tx,
            ..LogEntry::default()
        }
    }

    /// Commits `text` as the new content of `a` under `root`.
    fn commit_text(store: &Store, root: &Path, tx: u64, pre: Option<&[u8]>, text: &[u8]) {
        let rootfd = atomic::open_dir(root).unwrap();
        let lock = store.lock().unwrap();
        let old = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        let change = Change {
            rel: "a",
            dir: rootfd.as_fd(),
            old: old.as_ref().filter(|_| pre.is_some()),
            pre,
            new: text,
            new_sha: None,
            by: None,
            fresh: None,
        };
        store
            .commit(&lock, tx, (rootfd.as_fd(), root), &[change], line(tx))
            .unwrap();
    }

    #[test]
    fn an_object_pruned_and_stored_again_at_once_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let keep_one = Retention {
            keep: 1,
            ..Retention::default()
        };
        let store = Store::open_with(&root.join(".editfs"), keep_one).unwrap();
        let texts: [&[u8]; 2] = [b"one", b"two"];
        commit_text(&store, &root, 1, None, texts[0]);
        // Each commit prunes the version that held the content it brings back.
        for tx in 2..=6 {
            let i = tx as usize % 2;
            commit_text(&store, &root, tx, Some(texts[1 - i]), texts[i]);
        }
        store.objects().reaper().drain();
        assert_eq!(
            store.objects().read(objects::Side::Post, "a", 6).unwrap(),
            b"one"
        );
        assert_eq!(
            store.objects().read(objects::Side::Pre, "a", 6).unwrap(),
            b"two"
        );
        assert_eq!(
            fs::read_dir(root.join(".editfs/objects")).unwrap().count(),
            2
        );
        assert_eq!(fs::read_dir(root.join(".editfs/tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_file_a_crash_left_in_tmp_before_its_unlink_is_removed_at_the_next_open() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join(".editfs");
        drop(Store::open(&state).unwrap());
        let aside = state.join("tmp").join(atomic::tmp_name());
        fs::write(&aside, "a dropped object, not unlinked yet").unwrap();
        drop(Store::open(&state).unwrap());
        assert!(!aside.exists());
    }

    #[test]
    fn the_filer_with_nothing_to_file_takes_no_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join(".editfs");
        let store = Store::open(&state).unwrap();
        fs::remove_file(state.join("lock")).unwrap();
        store.file_removals(true);
        store.file_removals(false);
        assert!(
            !state.join("lock").exists(),
            "an idle filer opened the lock"
        );
    }

    #[test]
    fn layout_ids_snapshots_and_log() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join(".editfs")).unwrap();
        let lock = store.lock().unwrap();
        assert_eq!(store.next_tx(&lock).unwrap(), 1);
        assert_eq!(store.next_tx(&lock).unwrap(), 2);
        let sha = store.objects().put_from(&mut &b"pre"[..]).unwrap();
        let name = store.keep_pre_image(&lock, 2, "src/a.rs", &sha).unwrap();
        assert_eq!(name.as_deref(), Some("snapshots/src/a.rs/2"));
        let name = name.unwrap();
        assert_eq!(fs::read(store.dir().join(&name)).unwrap(), b"pre");
        store.log(&line(2)).unwrap();
        store.log(&line(3)).unwrap();
        let txs: Vec<u64> = store.entries().iter().map(|e| e.tx).collect();
        assert_eq!(txs, [2, 3]);
        assert_eq!(
            fs::read_to_string(store.dir().join(".gitignore")).unwrap(),
            "*\n"
        );
    }

    #[test]
    fn a_commit_replaces_every_file_and_keeps_both_versions() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        fs::create_dir_all(root.join("d")).unwrap();
        fs::write(root.join("a"), "old a").unwrap();
        let store = Store::open(&root.join(".editfs")).unwrap();
        let lock = store.lock().unwrap();
        let rootfd = atomic::open_dir(&root).unwrap();
        let d = atomic::open_dir(&root.join("d")).unwrap();
        let a = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        let changes = [
            Change {
                rel: "a",
                dir: rootfd.as_fd(),
                old: a.as_ref(),
                pre: Some(b"old a"),
                new: b"new a",
                new_sha: None,
                by: None,
                fresh: None,
            },
            Change {
                rel: "d/b",
                dir: d.as_fd(),
                old: None,
                pre: None,
                new: b"new b",
                new_sha: None,
                by: None,
                fresh: None,
            },
        ];
        let kept = store
            .commit(&lock, 7, (rootfd.as_fd(), &root), &changes, line(7))
            .unwrap();
        assert_eq!(kept, [Some("snapshots/a/7".to_owned()), None]);
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new a");
        assert_eq!(fs::read(root.join("d/b")).unwrap(), b"new b");
        assert_eq!(
            store.objects().read(objects::Side::Post, "d/b", 7).unwrap(),
            b"new b"
        );
        let journal = || fs::read_dir(root.join(".editfs/journal")).unwrap().count();
        assert_eq!(journal(), 1, "the records wait for the checkpoint");
        store.checkpoint().unwrap();
        assert_eq!(journal(), 0);
        assert_eq!(store.entries().len(), 1);
    }

    #[test]
    fn a_crash_before_the_checkpoint_leaves_a_record_that_recovery_finds_finished() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("a"), "old").unwrap();
        let state = root.join(".editfs");
        let store = Store::open(&state).unwrap();
        let lock = store.lock().unwrap();
        let rootfd = atomic::open_dir(&root).unwrap();
        let a = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
        let change = Change {
            rel: "a",
            dir: rootfd.as_fd(),
            old: a.as_ref(),
            pre: Some(b"old"),
            new: b"new",
            new_sha: None,
            by: None,
            fresh: None,
        };
        let tx = store.next_tx(&lock).unwrap();
        store
            .commit(&lock, tx, (rootfd.as_fd(), &root), &[change], line(tx))
            .unwrap();
        drop(lock);
        store.killed();
        let store = Store::open(&state).unwrap();
        assert!(store.recovered().is_empty(), "{}", store.recovered());
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new");
        assert_eq!(store.entries().len(), 1, "its line is not logged twice");
        assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 0);
        let lock = store.lock().unwrap();
        assert_eq!(store.next_tx(&lock).unwrap(), tx + 1);
    }

    #[test]
    fn a_committed_record_cut_short_is_no_commit_point() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        fs::write(state.join("tmp/t1"), "new").unwrap();
        journal::Journal::new(&state)
            .write(&journal::Record {
                tx: 3,
                root: root.clone(),
                committed: false,
                files: vec![journal::Entry {
                    rel: "a".into(),
                    tmp: "t1".into(),
                    beside: false,
                    in_place: false,
                    inode: None,
                    remove: false,
                    sha256: None,
                    made: None,
                }],
                log: line(3),
                inline: Vec::new(),
            })
            .unwrap();
        fs::write(state.join("journal/3.commit.json"), "{\"tx\": 3, \"ro").unwrap();
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_back, [3]);
        assert!(!root.join("a").exists());
        assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 0);
    }

    #[test]
    fn a_counter_a_machine_crash_left_empty_is_moved_past_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".editfs");
        let store = Store::open(&dir).unwrap();
        store.log(&line(9)).unwrap();
        drop(store);
        fs::write(dir.join("txid"), "\0\0\0").unwrap();
        let store = Store::open(&dir).unwrap();
        let lock = store.lock().unwrap();
        assert_eq!(store.next_tx(&lock).unwrap(), 10);
    }

    #[test]
    fn a_commit_installs_in_the_directory_it_holds_whatever_its_path_names_by_then() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        fs::create_dir_all(root.join("d")).unwrap();
        fs::write(root.join("d/f"), "old").unwrap();
        let store = Store::open(&root.join(".editfs")).unwrap();
        let lock = store.lock().unwrap();
        let rootfd = atomic::open_dir(&root).unwrap();
        let held = atomic::open_dir(&root.join("d")).unwrap();
        // The directory is moved away and another takes its name.
        fs::rename(root.join("d"), root.join("moved")).unwrap();
        fs::create_dir(root.join("d")).unwrap();
        let f = atomic::open_existing(held.as_fd(), "f".as_ref()).unwrap();
        let change = Change {
            rel: "d/f",
            dir: held.as_fd(),
            old: f.as_ref(),
            pre: Some(b"old"),
            new: b"new",
            new_sha: None,
            by: None,
            fresh: None,
        };
        store
            .commit(&lock, 1, (rootfd.as_fd(), &root), &[change], line(1))
            .unwrap();
        assert_eq!(fs::read(root.join("moved/f")).unwrap(), b"new");
        assert!(!root.join("d/f").exists());
    }

    #[test]
    fn recovery_rolls_a_committed_record_forward_and_a_prepared_one_back() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("a"), "old").unwrap();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        fs::write(state.join("tmp/t1"), "new").unwrap();
        fs::write(state.join("tmp/t2"), "never").unwrap();
        let entry = |tmp: &str, rel: &str| journal::Entry {
            rel: rel.into(),
            tmp: tmp.into(),
            beside: false,
            in_place: false,
            inode: None,
            remove: false,
            sha256: None,
            made: None,
        };
        let j = journal::Journal::new(&state);
        let log = line(1);
        j.write(&journal::Record {
            tx: 1,
            root: root.clone(),
            committed: true,
            files: vec![entry("t1", "a")],
            log: log.clone(),
            inline: Vec::new(),
        })
        .unwrap();
        j.write(&journal::Record {
            tx: 2,
            root: root.clone(),
            committed: false,
            files: vec![entry("t2", "b")],
            log,
            inline: Vec::new(),
        })
        .unwrap();
        // What the unfinished commit had already kept of its file.
        let objects = objects::Objects::new(&state);
        objects.keep(objects::Side::Pre, "b", 2, b"before").unwrap();
        objects.keep(objects::Side::Post, "b", 2, b"never").unwrap();
        drop(j);
        let store = Store::open(&state).unwrap();
        assert!(
            store.objects().txs(objects::Side::Pre, "b").is_empty()
                && store.objects().txs(objects::Side::Post, "b").is_empty(),
            "a rolled-back transaction leaves no version"
        );
        assert_eq!(store.recovered().rolled_forward, [1]);
        assert_eq!(store.recovered().rolled_back, [2]);
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new");
        assert!(!root.join("b").exists());
        assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
        assert_eq!(
            store.entries().len(),
            1,
            "the log line of the completed transaction"
        );
    }

    /// The record is synced before the temporary file: after a crash of the
    /// machine the record may be whole and the file not. Without a whole copy
    /// of the content in the store (a record of a version that synced the
    /// file first, whose commit point was then not reached) it is rolled back.
    #[test]
    fn recovery_rolls_back_a_committed_record_whose_temporary_file_is_torn() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, state) = (tmp.path(), tmp.path().join(".editfs"));
        one_whole_one_torn(root, &state, false);
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_back, [1]);
        assert!(store.recovered().rolled_forward.is_empty());
        assert_eq!(fs::read(root.join("a")).unwrap(), b"old", "all or nothing");
        assert_eq!(fs::read(root.join("b")).unwrap(), b"old");
        assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
        assert!(
            store.entries().is_empty(),
            "no log line: it never committed"
        );
    }

    /// A committed record over `files` (temporary name, path), each naming
    /// `new` as its content and made as `made`, as a crash of the machine
    /// before the checkpoint leaves it.
    fn committed_record(
        state: &Path,
        root: &Path,
        files: &[(&str, &str)],
        new: &[u8],
        made: Option<journal::Made>,
    ) {
        let entry = |&(tmp, rel): &(&str, &str)| journal::Entry {
            rel: rel.into(),
            tmp: tmp.into(),
            beside: false,
            in_place: false,
            inode: None,
            remove: false,
            sha256: Some(sha256_hex(new)),
            made,
        };
        journal::Journal::new(state)
            .write(&journal::Record {
                tx: 1,
                root: root.to_owned(),
                committed: true,
                files: files.iter().map(entry).collect(),
                log: line(1),
                inline: Vec::new(),
            })
            .unwrap();
    }

    /// Files `a` and `b` under `root`, and a committed record of `new content`
    /// to both, with the temporary files as a crash of the machine may leave
    /// them: the first whole, the second cut short. The store holds the new
    /// content if `stored`.
    fn one_whole_one_torn(root: &Path, state: &Path, stored: bool) {
        fs::write(root.join("a"), "old").unwrap();
        fs::write(root.join("b"), "old").unwrap();
        drop(Store::open(state).unwrap());
        fs::write(state.join("tmp/t1"), "new content").unwrap();
        fs::write(state.join("tmp/t2"), "new con").unwrap();
        if stored {
            objects::Objects::new(state)
                .keep(objects::Side::Post, "b", 1, b"new content")
                .unwrap();
        }
        let files = [("t1", "a"), ("t2", "b")];
        committed_record(state, root, &files, b"new content", None);
    }

    /// What a crash of the machine may leave of a file written and never
    /// synced: its name and inode, its bytes cut short.
    fn torn(path: &Path, whole: &[u8]) -> journal::Made {
        fs::write(path, whole).unwrap();
        let meta = fs::metadata(path).unwrap();
        let file = fs::OpenOptions::new().write(true).open(path).unwrap();
        file.set_len(whole.len() as u64 / 2).unwrap();
        let times = fs::FileTimes::new().set_modified(meta.modified().unwrap());
        file.set_times(times).unwrap();
        journal::Made::of(&meta)
    }

    #[test]
    fn a_commit_syncs_its_record_alone_which_carries_the_versions_new_to_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join(".editfs");
        let store = Store::open(&state).unwrap();
        let (old, new): (&[u8], &[u8]) = (b"the old content", b"the new content");
        commit_text(&store, &root, 1, Some(old), new);
        let unsynced = || store.unsettled.lock().objects.len();
        assert_eq!(
            unsynced(),
            2,
            "both versions left for the checkpoint to sync"
        );
        commit_text(&store, &root, 2, Some(new), old);
        assert_eq!(
            unsynced(),
            2,
            "versions a synced record carries are durable"
        );
        // A crash of the machine before the checkpoint: the store's copies are
        // torn, and so is the file; the synced records are whole.
        store.killed();
        for v in [old, new] {
            let object = state.join("objects").join(crate::engine::sha256_hex(v));
            fs::set_permissions(&object, fs::Permissions::from_mode(0o644)).unwrap();
            fs::write(&object, vec![0; v.len() / 2]).unwrap();
        }
        let a = fs::OpenOptions::new()
            .write(true)
            .open(root.join("a"))
            .unwrap();
        let made = fs::metadata(root.join("a")).unwrap().modified().unwrap();
        a.set_len(4).unwrap();
        a.set_times(fs::FileTimes::new().set_modified(made))
            .unwrap();
        drop(Store::open(&state).unwrap());
        assert_eq!(fs::read(root.join("a")).unwrap(), old);
        let objects = objects::Objects::new(&state);
        let version = |side| objects.read(side, "a", 1).unwrap();
        assert_eq!(version(objects::Side::Pre), old, "written again in place");
        assert_eq!(version(objects::Side::Post), new);
    }

    #[test]
    fn recovery_writes_a_torn_temporary_file_again_from_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, state) = (tmp.path(), tmp.path().join(".editfs"));
        one_whole_one_torn(root, &state, true);
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_forward, [1]);
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new content");
        assert_eq!(fs::read(root.join("b")).unwrap(), b"new content");
        assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
        assert_eq!(store.entries().len(), 1, "its log line");
    }

    /// A commit of `the new content` to `a`, whose temporary file was made as
    /// `made` and put in place, with its version stored.
    fn a_committed_as(state: &Path, root: &Path, made: journal::Made) {
        objects::Objects::new(state)
            .keep(objects::Side::Post, "a", 1, b"the new content")
            .unwrap();
        committed_record(state, root, &[("t1", "a")], b"the new content", Some(made));
    }

    #[test]
    fn recovery_writes_a_torn_file_put_in_place_again_from_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        let made = torn(&root.join("a"), b"the new content");
        fs::set_permissions(root.join("a"), fs::Permissions::from_mode(0o640)).unwrap();
        a_committed_as(&state, &root, made);
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_forward, [1]);
        assert_eq!(fs::read(root.join("a")).unwrap(), b"the new content");
        let mode = fs::metadata(root.join("a")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640, "its mode stays");
        assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn recovery_leaves_a_file_written_after_its_commit_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        let mut made = torn(&root.join("a"), b"the new content");
        fs::write(root.join("a"), "written since").unwrap();
        made.mtime -= 1_000_000_000;
        fs::write(root.join("b"), "replaced since").unwrap();
        let other = journal::Made::of(&fs::metadata(root.join("a")).unwrap());
        a_committed_as(&state, &root, made);
        drop(Store::open(&state).unwrap());
        assert_eq!(fs::read(root.join("a")).unwrap(), b"written since");
        // Made as another inode than the one at `b` now.
        committed_record(
            &state,
            &root,
            &[("t2", "b")],
            b"the new content",
            Some(other),
        );
        drop(Store::open(&state).unwrap());
        assert_eq!(fs::read(root.join("b")).unwrap(), b"replaced since");
    }

    #[test]
    fn the_versions_of_a_commit_not_yet_checkpointed_are_spared_by_the_size_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("a"), "old").unwrap();
        // Room for this commit's versions, and no more.
        let tiny = Retention { keep: 10, cap: 6 };
        let store = Store::open_with(&root.join(".editfs"), tiny).unwrap();
        commit_text(&store, &root, 1, Some(b"old"), b"new");
        store.objects().cap(1);
        assert_eq!(store.objects().txs(objects::Side::Post, "a"), [1]);
        store.checkpoint().unwrap();
        store.objects().cap(1);
        assert!(store.objects().txs(objects::Side::Post, "a").is_empty());
    }

    #[test]
    fn a_commit_makes_room_under_the_cap_first_and_refuses_versions_larger_than_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("a"), "0123456789").unwrap();
        let cap = Retention { keep: 10, cap: 30 };
        let store = Store::open_with(&root.join(".editfs"), cap).unwrap();
        commit_text(&store, &root, 1, Some(b"0123456789"), b"abcdefghij");
        store.checkpoint().unwrap();
        assert!(store.make_room(20).is_ok());
        assert!(
            store.objects().total() <= 10,
            "the oldest versions went before the commit: {} bytes left",
            store.objects().total()
        );
        assert!(matches!(
            store.make_room(31),
            Err(StoreError::OverCap { bytes: 31, cap: 30 })
        ));
    }

    #[test]
    fn a_commit_leaves_its_new_content_for_the_checkpoint_to_sync() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("a"), "old").unwrap();
        let store = Store::open(&root.join(".editfs")).unwrap();
        commit_text(&store, &root, 1, Some(b"old"), b"new");
        let held = |store: &Store| {
            let u = store.unsettled.lock();
            u.files
                .iter()
                .map(|t| t.file.metadata().unwrap().ino())
                .collect::<Vec<_>>()
        };
        let ino = fs::metadata(root.join("a")).unwrap().ino();
        assert_eq!(held(&store), [ino]);
        store.settle_before_change(ino + 1);
        assert_eq!(held(&store), [ino], "another file changes nothing");
        assert!(store.unsynced());
        store.settle_before_change(ino);
        assert!(held(&store).is_empty(), "synced before its file changes");
        assert!(!store.unsynced());
        commit_text(&store, &root, 2, Some(b"new"), b"newer");
        store.settle_before_move();
        assert!(held(&store).is_empty(), "synced before any rename");
        assert_eq!(
            fs::read_dir(root.join(".editfs/journal")).unwrap().count(),
            0
        );
    }

    #[test]
    fn recovery_leaves_a_file_that_is_no_torn_copy_of_its_commit_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        // Written since in the same tick of the clock, or with its time set back.
        fs::write(root.join("a"), "THE NEW").unwrap();
        let made = journal::Made::of(&fs::metadata(root.join("a")).unwrap());
        a_committed_as(&state, &root, made);
        drop(Store::open(&state).unwrap());
        assert_eq!(fs::read(root.join("a")).unwrap(), b"THE NEW");
    }

    #[test]
    fn a_record_that_says_what_its_files_were_is_finished_though_one_is_lost() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join(".editfs");
        fs::write(root.join("b"), "old").unwrap();
        drop(Store::open(&state).unwrap());
        // `a` was put in place before the crash; `b`'s temporary file is torn
        // and the store lost its copy: rolling back would leave `a` new.
        fs::write(root.join("a"), "new content").unwrap();
        fs::write(state.join("tmp/t2"), "new con").unwrap();
        let made = journal::Made::of(&fs::metadata(root.join("a")).unwrap());
        let files = [("t1", "a"), ("t2", "b")];
        committed_record(&state, &root, &files, b"new content", Some(made));
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_forward, [1]);
        assert_eq!(fs::read(root.join("a")).unwrap(), b"new content");
    }

    #[test]
    fn a_commit_names_its_new_content_in_its_record_for_recovery_to_check() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("a"), "old").unwrap();
        let store = Store::open(&root.join(".editfs")).unwrap();
        commit_text(&store, &root, 1, Some(b"old"), b"new");
        let wal = fs::read_dir(root.join(".editfs/journal"))
            .unwrap()
            .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
            .collect::<String>();
        assert!(wal.contains(&sha256_hex(b"new")), "{wal}");
    }

    #[test]
    fn a_committed_removal_is_finished_by_recovery() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("made"), "by tx 1").unwrap();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        journal::Journal::new(&state)
            .write(&journal::Record {
                tx: 2,
                root: root.clone(),
                committed: true,
                files: vec![journal::Entry {
                    rel: "made".into(),
                    tmp: String::new(),
                    beside: false,
                    in_place: false,
                    inode: None,
                    remove: true,
                    sha256: None,
                    made: None,
                }],
                log: line(2),
                inline: Vec::new(),
            })
            .unwrap();
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_forward, [2]);
        assert!(!root.join("made").exists());
    }

    fn removal(tx: u64, rel: &str, root: &Path) -> journal::Record {
        journal::Record {
            tx,
            root: root.to_owned(),
            committed: true,
            files: vec![journal::Entry {
                rel: rel.into(),
                tmp: String::new(),
                beside: false,
                in_place: false,
                inode: None,
                remove: true,
                sha256: None,
                made: None,
            }],
            log: line(tx),
            inline: Vec::new(),
        }
    }

    /// Commits `f{tx}` holding `v{tx}`, a new file, as transaction `tx`.
    fn commit_new_file(store: &Store, root: (BorrowedFd<'_>, &Path), tx: u64) {
        let lock = store.lock().unwrap();
        let (rel, text) = (format!("f{tx}"), format!("v{tx}"));
        let change = Change {
            rel: &rel,
            dir: root.0,
            old: None,
            pre: None,
            new: text.as_bytes(),
            new_sha: None,
            by: None,
            fresh: None,
        };
        store.commit(&lock, tx, root, &[change], line(tx)).unwrap();
    }

    #[test]
    fn commits_share_one_journal_file_and_a_checkpoint_removes_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let store = Store::open(&root.join(".editfs")).unwrap();
        let rootfd = atomic::open_dir(&root).unwrap();
        for tx in 1..=5 {
            commit_new_file(&store, (rootfd.as_fd(), &root), tx);
        }
        let journal = || fs::read_dir(root.join(".editfs/journal")).unwrap().count();
        assert_eq!(journal(), 1, "no file per record");
        store.checkpoint().unwrap();
        assert_eq!(journal(), 0);
    }

    #[test]
    fn a_commit_leaving_too_many_files_unsynced_checkpoints_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let store = Store::open(&root.join(".editfs")).unwrap();
        let rootfd = atomic::open_dir(&root).unwrap();
        let rels: Vec<String> = (0..CHECKPOINT_FILES).map(|i| format!("f{i}")).collect();
        let changes: Vec<Change<'_>> = rels
            .iter()
            .map(|rel| Change {
                rel,
                dir: rootfd.as_fd(),
                old: None,
                pre: None,
                new: rel.as_bytes(),
                new_sha: None,
                by: None,
                fresh: None,
            })
            .collect();
        let lock = store.lock().unwrap();
        store
            .commit(&lock, 1, (rootfd.as_fd(), &root), &changes, line(1))
            .unwrap();
        assert!(store.unsettled.lock().files.is_empty());
        assert_eq!(
            fs::read_dir(root.join(".editfs/journal")).unwrap().count(),
            0
        );
    }

    #[test]
    fn with_a_checkpointer_a_due_checkpoint_is_left_to_it_until_far_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let store = Store::open(&root.join(".editfs")).unwrap();
        let rootfd = atomic::open_dir(&root).unwrap();
        assert!(
            !store.wait_for_checkpoint(std::time::Duration::ZERO),
            "nothing due"
        );
        let commit = |tx: u64| commit_new_file(&store, (rootfd.as_fd(), &root), tx);
        let waiting = || store.unsettled.lock().records.len();
        for tx in 1..=CHECKPOINT_AFTER as u64 {
            commit(tx);
        }
        assert_eq!(
            waiting(),
            CHECKPOINT_AFTER,
            "no commit synced under the lock"
        );
        assert!(
            store.wait_for_checkpoint(std::time::Duration::from_secs(60)),
            "due"
        );
        let far = (CHECKPOINT_BEHIND * CHECKPOINT_AFTER) as u64;
        for tx in CHECKPOINT_AFTER as u64 + 1..=far {
            commit(tx);
        }
        assert_eq!(waiting(), far as usize, "no commit synced under the lock");
        store.catch_up(1);
        assert_eq!(waiting(), far as usize, "a small transaction leaves it");
        store.catch_up(17);
        assert_eq!(waiting(), 0, "a large one far behind made it itself");
        for tx in far + 1..=3 * far {
            commit(tx);
        }
        store.catch_up(1);
        assert_eq!(waiting(), 0, "at twice as far, any transaction makes it");
    }

    #[test]
    fn a_record_dropped_beside_a_live_one_is_not_finished_again_after_a_crash() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        let j = journal::Journal::new(&state);
        j.write(&removal(1, "made", &root)).unwrap();
        j.write(&journal::Record {
            committed: false,
            ..removal(2, "other", &root)
        })
        .unwrap();
        // Transaction 1 was checkpointed while 2 was still under way...
        j.remove(&[1]).unwrap();
        // ...and a later one made its file again, before the crash.
        fs::write(root.join("made"), "again").unwrap();
        j.abandon();
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_back, [2]);
        assert!(store.recovered().rolled_forward.is_empty());
        assert_eq!(fs::read(root.join("made")).unwrap(), b"again");
        assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 0);
    }

    /// `record`, carrying the bytes of `content`.
    fn carrying(mut record: journal::Record, content: &[u8]) -> journal::Record {
        record.inline = vec![journal::Inline {
            sha256: crate::engine::sha256_hex(content),
            len: content.len() as u64,
        }];
        record
    }

    /// The journal file of a store whose records stay (a crash before the
    /// checkpoint), and the record it holds.
    fn record_left(state: &Path, record: &journal::Record, carried: &[&[u8]]) -> PathBuf {
        let j = journal::Journal::new(state);
        j.write_carrying(record, carried).unwrap();
        j.abandon();
        let wal = fs::read_dir(state.join("journal")).unwrap().next().unwrap();
        wal.unwrap().path()
    }

    #[test]
    fn bytes_a_record_carries_are_never_read_as_records() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("victim"), "x").unwrap();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        // A file's content that holds what reads as a record removing `victim`.
        let forged = serde_json::to_string(&removal(7, "victim", &root)).unwrap();
        let content = format!("fn main() {{}}\n{forged}\n// more\n");
        let record = carrying(removal(5, "other", &root), content.as_bytes());
        let wal = record_left(&state, &record, &[content.as_bytes()]);
        let whole = fs::read(&wal).unwrap();
        // A crash tore the record's own line: what follows it is not read.
        let mut torn = whole.clone();
        torn[10..20].fill(0);
        fs::write(&wal, &torn).unwrap();
        let store = Store::open(&state).unwrap();
        assert!(store.recovered().is_empty(), "{:?}", store.recovered());
        assert!(
            root.join("victim").exists(),
            "a carried line was read as a record"
        );
        drop(store);
        // Whole, the record is finished, and what it carries is only bytes.
        fs::write(root.join("other"), "y").unwrap();
        record_left(&state, &record, &[content.as_bytes()]);
        let store = Store::open(&state).unwrap();
        assert_eq!(store.recovered().rolled_forward, [5]);
        assert!(!root.join("other").exists());
        assert!(root.join("victim").exists());
    }

    #[test]
    fn a_record_whose_carried_bytes_are_torn_never_reached_its_commit_point() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("a"), "x").unwrap();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        let content = b"the new content, carried";
        let record = carrying(removal(3, "a", &root), content);
        let wal = record_left(&state, &record, &[content]);
        let mut torn = fs::read(&wal).unwrap();
        let n = torn.len();
        torn[n - 5..].fill(0);
        fs::write(&wal, &torn).unwrap();
        let store = Store::open(&state).unwrap();
        assert!(store.recovered().is_empty(), "{:?}", store.recovered());
        assert!(root.join("a").exists());
    }

    #[test]
    fn recovery_leaves_the_journal_of_a_live_process_to_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        fs::write(root.join("made"), "x").unwrap();
        let state = root.join(".editfs");
        drop(Store::open(&state).unwrap());
        let live = journal::Journal::new(&state);
        live.write(&removal(1, "made", &root)).unwrap();
        let store = Store::open(&state).unwrap();
        assert!(store.recovered().is_empty(), "{}", store.recovered());
        assert!(root.join("made").exists());
        assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 1);
    }

    #[test]
    fn stores_sharing_a_directory_never_hand_out_an_id_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".editfs");
        let first = Store::open(&dir).unwrap();
        first.log(&line(41)).unwrap();
        fs::write(dir.join("txid"), "7\n").unwrap();
        // Another process opens the directory and moves the counter past the log.
        let second = Store::open(&dir).unwrap();
        let lock = first.lock().unwrap();
        assert_eq!(first.next_tx(&lock).unwrap(), 42);
        drop(lock);
        let lock = second.lock().unwrap();
        assert_eq!(second.next_tx(&lock).unwrap(), 43);
    }

    #[test]
    fn try_lock_takes_the_lock_only_while_no_store_holds_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".editfs");
        let first = Store::open(&dir).unwrap();
        let second = Store::open(&dir).unwrap();
        let held = first.try_lock().unwrap().expect("a free lock is taken");
        assert!(second.try_lock().unwrap().is_none());
        assert!(
            first.try_lock().unwrap().is_none(),
            "not even by its holder"
        );
        drop(held);
        assert!(second.try_lock().unwrap().is_some());
    }

    #[test]
    fn opening_moves_a_counter_that_fell_behind_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".editfs");
        let store = Store::open(&dir).unwrap();
        store.log(&line(41)).unwrap();
        fs::write(dir.join("txid"), "7\n").unwrap();
        drop(store);
        let store = Store::open(&dir).unwrap();
        let lock = store.lock().unwrap();
        assert_eq!(store.next_tx(&lock).unwrap(), 42);
    }

    #[test]
    fn the_log_moves_to_log_1_past_its_bound_and_both_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let big = LogEntry {
            command: "x".repeat(200),
            ..line(1)
        };
        let per_line = serde_json::to_string(&big).unwrap().len() as u64 + 1;
        let lines = 2 * LOG_ROTATE / per_line + 10;
        for tx in 1..=lines {
            store.log(&LogEntry { tx, ..big.clone() }).unwrap();
        }
        let size = |n: &str| fs::metadata(tmp.path().join(n)).map_or(0, |m| m.len());
        assert!(size("log") < LOG_ROTATE + per_line, "{}", size("log"));
        assert!(size("log.1") < LOG_ROTATE + per_line);
        let txs: Vec<u64> = store.entries().iter().map(|e| e.tx).collect();
        assert!(
            txs.len() as u64 > LOG_ROTATE / per_line,
            "what is kept is read"
        );
        assert!(
            txs.windows(2).all(|w| w[1] == w[0] + 1),
            "oldest first, no gap"
        );
        assert_eq!(txs.last(), Some(&lines));
        assert_eq!(last_logged_tx(&tmp.path().join("log")), Some(lines));
    }

    #[test]
    fn a_line_goes_to_the_log_another_process_started_after_moving_the_old_one() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        store.log(&line(1)).unwrap();
        // What another process's rotation does.
        fs::rename(tmp.path().join("log"), tmp.path().join(OLD_LOG)).unwrap();
        store.log(&line(2)).unwrap();
        assert_eq!(last_in(&tmp.path().join("log")), Some(2));
        assert_eq!(last_in(&tmp.path().join(OLD_LOG)), Some(1));
        let txs: Vec<u64> = store.entries().iter().map(|e| e.tx).collect();
        assert_eq!(txs, [1, 2]);
    }

    #[test]
    fn the_state_directory_is_its_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".editfs");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        Store::open(&dir).unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn nearest_state_dir_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(".editfs")).unwrap();
        fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        let found = Store::find_for(&tmp.path().join("a/b/f.txt"));
        assert_eq!(found, Some(tmp.path().join(".editfs")));
    }
}
