//! Kernel passthrough of real files: the kernel reads, writes and maps an open
//! file straight from SOURCE, so file data never crosses the daemon.
//!
//! The kernel asks for one backing file per inode: every open of an inode that
//! already has one must name the same backing id, and an inode with an open
//! that is not passed through cannot take one that is (both fail the user's
//! open with EIO). So each inode is in one mode while any handle is open on it,
//! kept here, and its backing id lives exactly that long. The first open of an
//! inode with no handle open chooses the mode; every other open follows it.
//! The kernel drops its own count before it sends a release, so the count here
//! is never lower than the kernel's, and a mode chosen here never clashes.
//!
//! A file that is not passed through keeps its pages in the kernel's cache of
//! the mount across opens (`FOPEN_KEEP_CACHE`). A passed-through open does not
//! keep them, so the kernel drops them when it opens the file: whatever a
//! passed-through handle writes (or maps) is never hidden by older pages.
//!
//! What the daemon still sees of a passed-through file is enough for the
//! contract: opens (where a direct write's pre-image is taken), releases (where
//! it is recorded), attributes, truncation and fsync. A commit renames a new
//! file over the name, so handles open on the old inode keep reading and
//! writing it, as on a native file.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::types::Backing;
use parking_lot::Mutex;

/// The size from which a file opened only to read is passed through too. A
/// smaller one is read from the kernel's page cache of the mount, whose warm
/// opens cost the daemon no backing file (two calls into the kernel per open,
/// and the kernel opens the file once more); but each cold read is a request
/// to the daemon, and its pages are cached twice. Measured on files of one
/// size read with `cat`: at 16 and 32 KiB the page cache was faster cold and
/// warm, at 64 KiB slower cold (a fifth), at 256 KiB twice as slow cold.
pub const PASS_FROM: u64 = 64 << 10;

/// The open handles of one inode, and how they reach its data.
struct Open {
    /// `None`: through the daemon (passthrough was off when the first opened).
    backing: Option<Arc<Backing>>,
    handles: usize,
    writers: usize,
}

impl Open {
    fn add(&mut self, writer: bool) -> Option<Arc<Backing>> {
        self.handles += 1;
        self.writers += usize::from(writer);
        self.backing.clone()
    }
}

/// Backing ids by node id, and whether the mount may pass files through.
#[derive(Default)]
pub struct Backings {
    enabled: AtomicBool,
    open: Mutex<HashMap<u64, Open>>,
}

impl Backings {
    /// The kernel agreed to pass files through.
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// The backing id for a new handle on `ino` (open on `fd`), or `None` when the
    /// handle goes through the daemon. Its inode's first handle decides: passed
    /// through if `pass` and the mount passes files through; while any is open,
    /// the rest follow. `register` asks the kernel for a backing id; it runs at
    /// most once per inode while handles are open. Its first failure turns
    /// passthrough off for the mount (not root, a kernel without it, SOURCE
    /// stacked too deep): every file of SOURCE would fail alike.
    pub fn open(
        &self,
        (ino, writer): (u64, bool),
        pass: bool,
        fd: BorrowedFd<'_>,
        register: impl FnOnce(BorrowedFd<'_>) -> std::io::Result<Backing>,
    ) -> Option<Arc<Backing>> {
        if let Some(e) = self.open.lock().get_mut(&ino) {
            return e.add(writer);
        }
        // Registered with no lock held (it is a call into the kernel); a handle
        // opened meanwhile on the same inode wins, and this id is dropped unused.
        let backing = if pass {
            self.register(fd, register)
        } else {
            None
        };
        let mut open = self.open.lock();
        match open.entry(ino) {
            Entry::Occupied(mut e) => {
                let theirs = e.get_mut().add(writer);
                drop(open);
                drop(backing);
                theirs
            }
            Entry::Vacant(v) => v
                .insert(Open {
                    backing,
                    handles: 0,
                    writers: 0,
                })
                .add(writer),
        }
    }

    /// Counts a handle on `ino` that stands in for it (see `replaced.rs`): the
    /// inode's backing id if it is passed through (the kernel wants every open
    /// of it to be), else `None`, and then it is not passed through until this
    /// handle is released, since the daemon must serve it itself.
    pub fn stand_in(&self, ino: u64) -> Option<Arc<Backing>> {
        let mut open = self.open.lock();
        let e = open.entry(ino).or_insert(Open {
            backing: None,
            handles: 0,
            writers: 0,
        });
        e.add(false)
    }

    fn register(
        &self,
        fd: BorrowedFd<'_>,
        register: impl FnOnce(BorrowedFd<'_>) -> std::io::Result<Backing>,
    ) -> Option<Arc<Backing>> {
        if !self.enabled.load(Ordering::Relaxed) {
            return None;
        }
        match register(fd) {
            Ok(id) => Some(Arc::new(id)),
            Err(e) => {
                if self.enabled.swap(false, Ordering::Relaxed) {
                    log::warn!(
                        "the kernel refused a backing file ({e}): file data goes through \
                         the daemon for the rest of this mount"
                    );
                }
                None
            }
        }
    }

    /// A handle on `ino` was released. The backing id of its last handle is
    /// handed back for the caller to drop with no lock held: dropping it is a
    /// call into the kernel.
    pub fn release(&self, ino: u64, writer: bool) -> Option<Arc<Backing>> {
        let mut open = self.open.lock();
        let entry = open.get_mut(&ino)?;
        entry.handles = entry.handles.saturating_sub(1);
        entry.writers = entry.writers.saturating_sub(usize::from(writer));
        if entry.handles > 0 {
            return None;
        }
        open.remove(&ino).and_then(|e| e.backing)
    }

    /// Whether `ino` is open for writing: its size and times may change with
    /// no request reaching the daemon.
    pub fn written(&self, ino: u64) -> bool {
        self.open.lock().get(&ino).is_some_and(|e| e.writers > 0)
    }
}
