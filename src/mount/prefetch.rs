//! Reading ahead across the files of a directory, for cold walks.
//!
//! A tool that opens one file of a directory (grep -r, a compiler, ripgrep)
//! usually opens the others next, one at a time: natively, each open then waits
//! for its own small read from the disk. When the first file of a directory is
//! opened to be read, a background thread asks SOURCE's file system to read
//! the beginning of every regular file in it (`POSIX_FADV_WILLNEED`, which
//! queues the reads and returns), so the disk serves them together, adjacent
//! ones merged, while the tool works through the first. The files' data then
//! waits in SOURCE's page cache when the daemon reads them.
//!
//! It runs once per directory while the kernel holds the directory's node: a
//! warm walk asks nothing here, and a directory forgotten (memory pressure,
//! dropped caches) is read ahead again at its next first open. Nothing is read
//! into the mount's own cache, no file's atime changes, and a directory whose
//! reading ahead is still queued is not queued twice.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::mpsc;

use parking_lot::Mutex;
use rustix::fs::{Advice, Mode, OFlags};

/// How much of each file is read ahead: what the daemon serves from the page
/// cache (larger files are passed through, and the kernel reads them ahead itself).
const PER_FILE: u64 = super::real::PASS_FROM;

/// The most files of one directory read ahead: opening one file of a huge
/// directory costs at most this many small reads.
const PER_DIR: usize = 512;

/// The most directories waiting to be read ahead: each holds a descriptor,
/// and a directory that finds the queue full is simply not read ahead.
const QUEUED: usize = 64;

/// The directories queued or read ahead, and the thread that reads them.
pub struct Prefetch {
    done: Mutex<HashSet<u64>>,
    queue: Mutex<Option<mpsc::SyncSender<Arc<OwnedFd>>>>,
}

impl Prefetch {
    /// Starts the thread; without it (it could not start) nothing is read ahead.
    pub fn start() -> Prefetch {
        let (tx, rx) = mpsc::sync_channel::<Arc<OwnedFd>>(QUEUED);
        let spawned = std::thread::Builder::new()
            .name("editfs-readahead".into())
            .spawn(move || {
                while let Ok(dir) = rx.recv() {
                    read_ahead(&dir);
                }
            });
        let queue = match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                log::warn!(
                    "cannot start the read-ahead thread ({e}): cold walks read file by file"
                );
                None
            }
        };
        Prefetch {
            done: Mutex::default(),
            queue: Mutex::new(queue),
        }
    }

    /// A file of directory node `dir` (open as `open`) is opened to be read:
    /// its directory is read ahead unless it was since the kernel last learnt it.
    pub fn reading_in(&self, dir: u64, open: impl FnOnce() -> Option<Arc<OwnedFd>>) {
        if !self.done.lock().insert(dir) {
            return;
        }
        let Some(fd) = open() else { return };
        if let Some(q) = &*self.queue.lock() {
            let _ = q.try_send(fd);
        }
    }

    /// The kernel forgot node `ino`: if a directory, it is read ahead anew at its next first open.
    pub fn forgot(&self, ino: u64) {
        self.done.lock().remove(&ino);
    }
}

/// Asks for the beginning of each regular file in `dir`, up to `PER_DIR` of them.
fn read_ahead(dir: &OwnedFd) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    // Not blocking on a FIFO or a device that took a listed name meanwhile, never
    // following a link out.
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let files = entries
        .flatten()
        .filter(|e| e.file_type() == rustix::fs::FileType::RegularFile)
        .take(PER_DIR);
    for e in files {
        if let Ok(fd) = rustix::fs::openat(dir, e.file_name(), flags, Mode::empty()) {
            let _ = rustix::fs::fadvise(
                &fd,
                0,
                std::num::NonZeroU64::new(PER_FILE),
                Advice::WillNeed,
            );
        }
    }
}
