//! Opening a state directory: its layout made, any interrupted commit or
//! removal recovered, and what a crash left swept, before anything else runs.

use std::fs::{self, OpenOptions};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use super::{
    Retention, STATE_DIR, Store, StoreError, atomic, io_err, journal, lock, objects, removals,
};

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
            counting: parking_lot::Mutex::default(),
            _live: lock::live(dir)?,
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
            parsed: parking_lot::Mutex::default(),
            spare: parking_lot::Mutex::default(),
        };
        let (recovered, handled) = store.recover_interrupted()?;
        store.recovered = recovered;
        store.sync_log()?;
        store.unsettled.lock().lines = false;
        store.journal.remove_handled(handled)?;
        store.objects.reaper().drain();
        // Temporary files of writes a crash cut short: the commit's, and those of
        // the journal, objects and counter (written whole or not at all). Those
        // of a process still live are its own, on their way; those of a dead
        // one whose journal is still there are its records' new contents, which
        // another process opening the store now may be recovering.
        let dead = |pid| !lock::is_live(dir, pid) && !store.journal.has_files_of(pid);
        let swept: usize = ["tmp", "journal", "objects", ""]
            .iter()
            .map(|d| atomic::sweep(&dir.join(d), dead))
            .sum();
        // Removals a crash left moved aside; a line already in the log is not
        // appended again. Only when no other process has the store open: the
        // lines of a live mount are its own filer's, which files them and
        // drops their moved files in two steps another process would see
        // half done (and file again).
        if lock::others_live(dir) {
            log::debug!("another process has the store open: its removals are its own to file");
        } else {
            let mut logged: Option<std::collections::HashSet<_>> = None;
            store.file_removals_with(Some(&mut |line| {
                let logged = logged.get_or_insert_with(|| {
                    let entries = store.entries();
                    entries.iter().filter_map(removals::removal_key).collect()
                });
                removals::removal_key(line).is_some_and(|k| logged.contains(&k))
            }));
        }
        store.counter_past_the_log()?;
        if swept > 0 {
            log::info!("removed {swept} temporary file(s) left by an interrupted commit");
        }
        if !store.recovered.is_empty() {
            log::warn!("{}", store.recovered);
        }
        Ok(store)
    }

    /// The state directory of the nearest ancestor of `file` that has one, as git finds `.git`.
    pub fn find_for(file: &Path) -> Option<PathBuf> {
        file.ancestors()
            .skip(1)
            .map(|a| a.join(STATE_DIR))
            .find(|d| d.is_dir())
    }
}

impl Store {
    /// Finishes or undoes every transaction a process that died left in the
    /// journal (see `journal::Journal::recover`); returns what it did and the
    /// journal files it read, for the caller to remove once the log is synced.
    fn recover_interrupted(&self) -> Result<(journal::Recovered, journal::Handled), StoreError> {
        let mut logged: Option<std::collections::HashSet<u64>> = None;
        self.journal.recover(
            self.tmp.as_fd(),
            (
                |sha: &str| self.objects.content(sha),
                |sha: &str, bytes: &[u8]| self.objects.restore(sha, bytes),
            ),
            |line| {
                let known =
                    logged.get_or_insert_with(|| self.entries().iter().map(|e| e.tx).collect());
                if known.contains(&line.tx) {
                    return Ok(false);
                }
                self.log(line)?;
                Ok(true)
            },
            (
                |record: &journal::Record| {
                    for f in &record.files {
                        self.objects.forget(&f.rel, record.tx);
                    }
                },
                |record: &journal::Record| self.lock_only(&record.keys()),
            ),
        )
    }

    /// `recover_interrupted` while the store is in use: a process sharing the
    /// state directory (an `editfs apply`) that died mid-commit leaves its
    /// transaction half applied until someone recovers it, and a mount runs
    /// for days. Its checkpoint thread calls this every second; a journal
    /// held by a live process is not touched, nor is a file changed since
    /// (see `journal::Entry::found`).
    pub fn recover_dead(&self) {
        let (recovered, handled) = match self.recover_interrupted() {
            Ok(done) => done,
            Err(e) => return log::error!("recovery: {e}"),
        };
        if !recovered.is_empty() {
            if let Err(e) = self.sync_log() {
                return log::error!("recovery: {e}");
            }
            log::warn!("{recovered}");
        }
        if let Err(e) = self.journal.remove_handled(handled) {
            log::error!("recovery: {e}");
        }
    }
}
