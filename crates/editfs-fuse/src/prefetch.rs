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
//! Likewise a walk (find, grep -r) that lists a directory lists its
//! subdirectories next: when a directory is listed, the thread reads each
//! subdirectory's listing and its entries' attributes from SOURCE, so the
//! listings the daemon then answers find them in memory, and this disk and
//! inode work runs on another CPU than the walk's requests.
//!
//! And a tool that looks up one name in a directory it has not listed (git
//! status, `lstat`ing every file of its index from several threads) looks up
//! the others next, each a request whose answer waits for SOURCE's file system
//! to find the name and read its inode from the disk: at the first lookup in a
//! directory, the thread reads the attributes of every entry in it, in name
//! order from the one looked up, so the lookups that follow find them in memory.
//!
//! Each runs once per directory while the kernel holds the directory's node: a
//! warm walk asks nothing here, and a directory forgotten (memory pressure,
//! dropped caches) is read ahead again. A directory whose entries were read
//! for a lookup is not read again for a listing of its parent, nor the other
//! way round. Nothing is read into the mount's own cache and no file's atime
//! changes (a directory's may, as a native listing's would). A directory
//! already queued is not queued twice, and one that finds the queue full is
//! simply not read ahead.

use std::collections::HashSet;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::mpsc;

use parking_lot::Mutex;
use rustix::fs::{Advice, AtFlags, Mode, OFlags};

/// How much of each file is read ahead: what the daemon serves from the page
/// cache (larger files are passed through, and the kernel reads them ahead itself).
const PER_FILE: u64 = super::passthrough::PASS_FROM;

/// The most entries of one directory read ahead (files, subdirectories, or
/// entries of a subdirectory): a huge directory costs at most this many.
const PER_DIR: usize = 512;

/// The most directories waiting to be read ahead: each holds a descriptor,
/// and a directory that finds the queue full is simply not read ahead.
const QUEUED: usize = 64;

/// The most directories remembered as read ahead (8 bytes each, and the set's
/// spare room): a subdirectory listed in a plain listing is never held by the
/// kernel, so no forget removes it. Past it, the set starts anew, and a
/// directory may be read ahead once more.
const REMEMBERED: usize = 1 << 16;

/// Marks `dir` as read ahead; false if it was already.
fn first_time(set: &mut HashSet<u64>, dir: u64) -> bool {
    if set.len() >= REMEMBERED {
        *set = HashSet::new();
    }
    set.insert(dir)
}

/// The directories queued or read ahead, and the thread that reads them.
pub struct Prefetch {
    done: Mutex<HashSet<u64>>,
    /// Directories whose entries' attributes were read ahead.
    statted: Mutex<HashSet<u64>>,
    queue: Mutex<Option<mpsc::SyncSender<Job>>>,
}

/// What the thread is asked to read ahead.
enum Job {
    /// The files of a directory.
    Files(Arc<OwnedFd>),
    /// The listings and attributes of these subdirectories of a directory.
    Subdirs(Arc<OwnedFd>, Vec<OsString>),
    /// The attributes of a directory's entries, from this name on.
    Entries(Arc<OwnedFd>, OsString),
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
                        Job::Entries(dir, from) => stat_ahead(&dir, &from),
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
            statted: Mutex::default(),
            queue: Mutex::new(queue),
        }
    }

    /// A file of directory node `dir` (open as `open`) is opened to be read:
    /// its directory is read ahead unless it was since the kernel last learnt it.
    pub fn reading_in(&self, dir: u64, open: impl FnOnce() -> Option<Arc<OwnedFd>>) {
        if !first_time(&mut self.done.lock(), dir) {
            return;
        }
        let Some(fd) = open() else { return };
        self.send(Job::Files(fd));
    }

    /// A directory (open as `open`) was listed, with these subdirectories (node
    /// id, name): those whose entries were not read ahead since the kernel
    /// last learnt them are walked ahead.
    pub fn listed(
        &self,
        open: impl FnOnce() -> Option<Arc<OwnedFd>>,
        subdirs: Vec<(u64, OsString)>,
    ) {
        let names: Vec<OsString> = {
            let mut statted = self.statted.lock();
            subdirs
                .into_iter()
                .filter(|(id, _)| first_time(&mut statted, *id))
                .map(|(_, name)| name)
                .collect()
        };
        if names.is_empty() {
            return;
        }
        let Some(fd) = open() else { return };
        self.send(Job::Subdirs(fd, names));
    }

    /// `name` was looked up in directory node `dir` (open as `open`): the
    /// attributes of its other entries are read ahead unless they were since
    /// the kernel last learnt it.
    pub fn looked_up(&self, dir: u64, name: &OsStr, open: impl FnOnce() -> Option<Arc<OwnedFd>>) {
        if !first_time(&mut self.statted.lock(), dir) {
            return;
        }
        let Some(fd) = open() else { return };
        self.send(Job::Entries(fd, name.to_owned()));
    }

    fn send(&self, job: Job) {
        if let Some(q) = &*self.queue.lock() {
            let _ = q.try_send(job);
        }
    }

    /// The kernel forgot node `ino`: if a directory, it is read ahead anew.
    pub fn forgot(&self, ino: u64) {
        self.done.lock().remove(&ino);
        self.statted.lock().remove(&ino);
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

/// Reads the attributes of up to `PER_DIR` entries of `dir`: in name order from
/// `from` on (then those before it) when it has no more, as a tool walking
/// the directory in order asks for them; else the first in its listing.
fn stat_ahead(dir: &OwnedFd, from: &OsStr) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    let mut names: Vec<CString> = entries
        .flatten()
        .map(|e| e.file_name().to_owned())
        .filter(|n| !matches!(n.to_bytes(), b"." | b".."))
        .take(PER_DIR + 1)
        .collect();
    if names.len() <= PER_DIR {
        names.sort_unstable();
        let start = names.partition_point(|n| n.to_bytes() < from.as_bytes());
        names.rotate_left(start);
    }
    for name in names.iter().take(PER_DIR) {
        let _ = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);
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
