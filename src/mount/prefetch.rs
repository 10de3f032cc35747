//! Reading ahead in SOURCE what a cold walk of the mount is about to ask for.
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
//! Likewise a walk (find, grep -r, git status) that lists a directory lists its
//! subdirectories next: when a directory is listed, the thread reads each
//! subdirectory's listing and its entries' attributes from SOURCE, so the
//! listings the daemon then answers find them in memory, and this disk and
//! inode work runs on another CPU than the walk's requests.
//!
//! Each runs once per directory while the kernel holds the directory's node: a
//! warm walk asks nothing here, and a directory forgotten (memory pressure,
//! dropped caches) is read ahead again. Nothing is read into the mount's own
//! cache and no file's atime changes (a subdirectory's may, as a native
//! listing's would). A directory already queued is not queued twice, and one
//! that finds the queue full is simply not read ahead.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::mpsc;

use parking_lot::Mutex;
use rustix::fs::{Advice, AtFlags, Mode, OFlags};

/// How much of each file is read ahead: what the daemon serves from the page
/// cache (larger files are passed through, and the kernel reads them ahead itself).
const PER_FILE: u64 = super::real::PASS_FROM;

/// The most entries of one directory read ahead (files, subdirectories, or
/// entries of a subdirectory): a huge directory costs at most this many.
const PER_DIR: usize = 512;

/// The most directories waiting to be read ahead: each holds a descriptor,
/// and a directory that finds the queue full is simply not read ahead.
const QUEUED: usize = 64;

/// The directories queued or read ahead, and the thread that reads them.
pub struct Prefetch {
    done: Mutex<HashSet<u64>>,
    /// Directories whose subdirectories were walked ahead.
    listed: Mutex<HashSet<u64>>,
    queue: Mutex<Option<mpsc::SyncSender<Job>>>,
}

/// What the thread is asked to read ahead.
enum Job {
    /// The files of a directory.
    Files(Arc<OwnedFd>),
    /// The listings and attributes of these subdirectories of a directory.
    Subdirs(Arc<OwnedFd>, Vec<OsString>),
}

impl Prefetch {
    /// Starts the thread; without it (it could not start) nothing is read ahead.
    pub fn start() -> Prefetch {
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUED);
        let spawned = std::thread::Builder::new()
            .name("editfs-readahead".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    match job {
                        Job::Files(dir) => read_ahead(&dir),
                        Job::Subdirs(dir, names) => walk_ahead(&dir, &names),
                    }
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
            listed: Mutex::default(),
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
        self.send(Job::Files(fd));
    }

    /// Directory node `dir` (open as `open`) was listed, with these
    /// subdirectories: they are walked ahead unless it was since the kernel last learnt it.
    pub fn listed(
        &self,
        dir: u64,
        open: impl FnOnce() -> Option<Arc<OwnedFd>>,
        subdirs: Vec<OsString>,
    ) {
        if subdirs.is_empty() || !self.listed.lock().insert(dir) {
            return;
        }
        let Some(fd) = open() else { return };
        self.send(Job::Subdirs(fd, subdirs));
    }

    fn send(&self, job: Job) {
        if let Some(q) = &*self.queue.lock() {
            let _ = q.try_send(job);
        }
    }

    /// The kernel forgot node `ino`: if a directory, it is read ahead anew.
    pub fn forgot(&self, ino: u64) {
        self.done.lock().remove(&ino);
        self.listed.lock().remove(&ino);
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

/// Reads the listing and every entry's attributes of each of `names`,
/// subdirectories of `dir`, up to `PER_DIR` of each, so that SOURCE's file
/// system holds them when the mount lists them.
fn walk_ahead(dir: &OwnedFd, names: &[OsString]) {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for name in names.iter().take(PER_DIR) {
        let Ok(sub) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
            continue;
        };
        let Ok(entries) = rustix::fs::Dir::read_from(&sub) else {
            continue;
        };
        for e in entries.flatten().take(PER_DIR + 2) {
            if !matches!(e.file_name().to_bytes(), b"." | b"..") {
                let _ = rustix::fs::statat(&sub, e.file_name(), AtFlags::SYMLINK_NOFOLLOW);
            }
        }
    }
}
