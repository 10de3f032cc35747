//! Durability: the state directory, transaction ids, the journal, kept versions and the log.
//!
//! Layout of a state directory (`SOURCE/.editfs/` by default):
//!
//! ```text
//! .gitignore                  `*`, so the project's git never sees any of this
//! lock                        one byte locked per file a transaction holds, and one
//!                             per process with the store open (see lock.rs)
//! txid                        the last transaction id handed out (locked while one is)
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
//! The store, by file: `open.rs` opens a state directory and recovers it,
//! `lock.rs` holds the files' locks, `txid.rs` hands out ids, `commit.rs`
//! commits a transaction (and says what is synced when, and why that is
//! enough), `checkpoint.rs` syncs what commits left and drops their records,
//! `logfile.rs` appends to and reads the log, `retention.rs` keeps versions
//! outside a commit and bounds them, `buffers.rs` keeps read buffers for
//! reuse, `view.rs` is what history, show and diff read, `fixture.rs` is
//! the setup its tests share; `journal.rs`,
//! `objects.rs`, `removals.rs`, `shared.rs`, `staged.rs`, `atomic.rs`,
//! `caller.rs`, `sight.rs`, `reaper.rs`, `trust.rs`, `rel.rs` and `logline.rs`
//! each say what they own at their top. The other layers use only what is
//! re-exported here (`Store` to write, `View` to read, the log's lines, paths
//! checked and opened beneath a root), and two modules: `caller`, the calls
//! made as the user a transaction is for, and `sight`, what of the history
//! that user may see. Everything else is the store's own.

#![forbid(unsafe_code)]

use editfs_engine as engine;

mod atomic;
mod buffers;
pub mod caller;
mod change;
mod checkpoint;
mod commit;
#[cfg(test)]
mod fixture;
mod journal;
mod lock;
mod logfile;
mod logline;
mod objects;
mod open;
mod reaper;
mod rel;
mod removals;
mod retention;
mod shared;
pub mod sight;
mod staged;
#[cfg(test)]
mod tests;
mod trust;
mod txid;
mod view;

pub use atomic::{open_dir, open_existing, replace, xattr_names, xattr_value};
pub use caller::Caller;
pub use change::{Change, Removal};
pub use checkpoint::CHECKPOINT_AFTER;
pub use journal::{Recovered, parent_beneath, parent_beneath_with};
pub use lock::{Keys, Lock};
pub use logfile::{entries_in, log_files};
pub use logline::{
    Access, ErrorKind, FileEntry, Kind as LogKind, LogEntry, Outcome as LogOutcome, count_changes,
};
pub use objects::{BRANCHES, Objects, Retention, Side};
pub use rel::{BadPath, project_path};
pub use removals::Verdict;
pub use shared::Shared;
pub use staged::Staged;
pub use trust::{Came, Held, Untrusted, hold};
pub use view::{Tail, View};

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use checkpoint::Unsettled;
use logfile::LogFile;

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
    #[error("{} grew past the {limit} bytes room was made for while it was copied", path.display())]
    Grew { path: PathBuf, limit: u64 },
    #[error("{} is {size} bytes, over the {limit} bytes a transaction reads (--max-file-size)", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
}

/// Wraps an `io::Error` with what was being done and to which path.
pub fn io_err<'p>(
    action: &'static str,
    path: &'p Path,
) -> impl FnOnce(io::Error) -> StoreError + 'p {
    move |source| StoreError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// An open state directory.
pub struct Store {
    dir: PathBuf,
    /// `tmp/`, held open so commits name their temporary files relative to it.
    tmp: OwnedFd,
    /// `txid`, held open: read and written in place under its own lock,
    /// never replaced, so every process sharing the state directory counts in it.
    counter: File,
    /// This process's turn at `counter` (see txid.rs). Taken alone and briefly.
    counting: parking_lot::Mutex<()>,
    /// This process's mark that it has the store open (see lock.rs), held
    /// as long as the store is.
    _live: File,
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
    /// instead of syncing under their files' locks (see `settle`).
    checkpointer: std::sync::atomic::AtomicBool,
    /// Removals moved aside and not filed yet (see removals.rs).
    removals: removals::Removals,
    /// The log, held open for appending while it is the file named `log`
    /// (another process sharing the state directory may move it to `log.1`).
    log_file: parking_lot::Mutex<Option<LogFile>>,
    /// The log's lines as last parsed (see `Parsed`). Taken alone and briefly:
    /// the files are read with it released.
    parsed: parking_lot::Mutex<std::sync::Arc<logfile::Parsed>>,
    /// Buffers a commit read a file into, or that held a content no longer
    /// remembered (`Objects::remember`), for the next commit to read its file
    /// into: a new buffer, or one whose pages the trim gave back, costs a page
    /// fault per 4 KiB. At most `SPARE_BUFFERS`, of at
    /// most `SPARE_BUFFER_BYTES` each. Taken alone and briefly.
    spare: parking_lot::Mutex<Vec<Vec<u8>>>,
}

impl Store {
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

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn tmp_dir(&self) -> BorrowedFd<'_> {
        self.tmp.as_fd()
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
