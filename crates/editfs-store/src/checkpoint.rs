//! Checkpoints: what commits left unsynced, synced in one go, after which the
//! records of the transactions it covered are dropped (see commit.rs for why
//! that is enough), and when one is due.

use std::fs::File;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use super::logfile::OLD_LOG;
use super::{Store, StoreError, atomic, io_err};

/// Commits past which a checkpoint is due at once, whatever else makes them.
pub const CHECKPOINT_AFTER: usize = 64;

/// New contents left unsynced past which a checkpoint is due at once: each
/// holds a descriptor until it is synced.
pub(super) const CHECKPOINT_FILES: usize = 1024;

/// How far past due a commit lets the checkpointer fall behind before it
/// makes the checkpoint itself: the journal holds at most this many times
/// `CHECKPOINT_AFTER` finished records, and descriptors are bounded the same way.
pub(super) const CHECKPOINT_BEHIND: usize = 4;

/// What the checkpoint must sync before the records of finished transactions
/// can go (see commit.rs).
#[derive(Default)]
pub(super) struct Unsettled {
    /// Transactions whose files are in place and whose line is appended.
    pub(super) records: Vec<u64>,
    /// The directories their files went into.
    pub(super) dirs: Vec<OwnedFd>,
    /// Their new contents, put in place unsynced (their bytes are durable in
    /// the store meanwhile), each with its temporary name (for the error).
    pub(super) files: Temps,
    /// The versions they kept unsynced (their bytes are durable in their
    /// records meanwhile), each with its path (for the error).
    pub(super) objects: Temps,
    /// Lines were appended since the log was last synced.
    pub(super) lines: bool,
    /// The log moved to `log.1` since: that file, and the move, are synced too.
    pub(super) rotated: bool,
    /// The first transaction of those a checkpoint is syncing now.
    pub(super) syncing: Option<u64>,
    /// The inodes of the new contents it is syncing.
    pub(super) syncing_files: Vec<u64>,
    /// Transactions whose new contents could not be synced: their records stay
    /// for the next recovery, which writes a torn content again from the store
    /// (a retry on the same descriptor may say 0 for bytes that never reached
    /// the disk, as Linux reports a writeback error once).
    pub(super) kept: Vec<u64>,
    /// Transactions of this process between their first kept version and
    /// their `settle` (or their failure): commits on other files run
    /// meanwhile, and their size cap must spare these versions too.
    pub(super) flying: std::collections::BTreeSet<u64>,
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

/// A transaction committing (see `Store::flying`).
pub(super) struct Flying<'s> {
    store: &'s Store,
    tx: u64,
}

impl Drop for Flying<'_> {
    fn drop(&mut self) {
        let mut u = self.store.unsettled.lock();
        u.flying.remove(&self.tx);
        self.store.spare_unsettled(&u);
    }
}

/// A new content written to a temporary file, unsynced.
pub(super) struct Temp {
    pub(super) file: File,
    /// Its name, for the error.
    pub(super) name: String,
    /// Its inode: a change through the mount to the file it became waits
    /// until it is synced (`Store::settle_before_change`).
    pub(super) ino: u64,
}

pub(super) type Temps = Vec<Temp>;

impl Store {
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
            .chain(u.flying.first().copied())
            .min();
        self.objects.spare_from(first.unwrap_or(u64::MAX));
    }

    /// Marks `tx` as committing until the returned guard drops (see
    /// `Unsettled::flying`).
    pub(super) fn flying(&self, tx: u64) -> Flying<'_> {
        let mut u = self.unsettled.lock();
        u.flying.insert(tx);
        self.spare_unsettled(&u);
        Flying { store: self, tx }
    }

    /// Leaves the record of `tx`, whose files went into `dirs` with the new
    /// contents `files`, to the next checkpoint, due at once when enough
    /// records wait for one.
    ///
    /// A commit runs under its files' locks, so a checkpoint made here (tens
    /// of syncs, for any user's commits) would hold every other transaction
    /// on them for as long: with a checkpointer, the commit only wakes it; a
    /// checkpointer far behind is caught up after the locks (`catch_up`).
    pub(super) fn settle<'d>(
        &self,
        tx: u64,
        dirs: impl Iterator<Item = BorrowedFd<'d>>,
        files: Temps,
    ) {
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
    /// store's locks: when the checkpointer is `CHECKPOINT_BEHIND` behind, a
    /// transaction of more than `OWN_SHARE` files makes the checkpoint
    /// itself, and waits for it, so whoever makes the backlog pays for it;
    /// at twice that, any transaction does, which bounds the journal and
    /// the descriptors held. No other caller waits: the locks are free.
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
    /// their records (see commit.rs), and wakes the reaper for what
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
            u.flying = std::mem::take(&mut due.flying);
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

    pub(super) fn sync_log(&self) -> Result<(), StoreError> {
        let path = self.dir.join("log");
        match File::open(&path) {
            Ok(file) => file.sync_data().map_err(io_err("sync", &path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("open", &path)(e)),
        }
    }
}

/// Syncs every file of `files` (its bytes, mode and owner).
pub(super) fn sync_all(files: &Temps) -> Result<(), StoreError> {
    files.iter().try_for_each(|t| {
        t.file
            .sync_all()
            .map_err(io_err(SYNC_CONTENT, Path::new(&t.name)))
    })
}

/// The action `sync_all` names in its errors.
const SYNC_CONTENT: &str = "sync the new content";

/// Whether `e` is `sync_all`'s.
fn contents_failed(e: &StoreError) -> bool {
    matches!(e, StoreError::Io { action, .. } if *action == SYNC_CONTENT)
}
