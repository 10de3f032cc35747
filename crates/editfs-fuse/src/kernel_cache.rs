//! What the mount keeps of what it told the kernel, and what it keeps to
//! answer the kernel fast: open directories, the attributes given lately, the
//! directories a file was opened in since they were listed, listings part way
//! read, directories removed while the kernel holds them, and the small files
//! primed and directories read ahead. All of it is dropped for a node the
//! kernel forgets (`forgot`). Each table's lock is taken alone and briefly
//! (the lock order is in `core.rs`).

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::first_read::Primed;
use super::listings::{Listings, Reader};
use super::prefetch::Prefetch;
use super::types::{Entry, FileAttr, REAL_TTL, Timed};

/// The kernel's caches as the mount keeps track of them.
pub struct KernelCache {
    dirs: Mutex<DirCache>,
    sent: Mutex<Sent>,
    /// Directories a file was opened in since their listing was last read (see
    /// `Core::opening_in`).
    opened_in: Mutex<HashSet<u64>>,
    /// Listings the kernel is part way through reading (`listings.rs`).
    listings: Mutex<Listings>,
    /// Directories removed through the mount that the kernel still holds, as
    /// they were: `fstat` of one still open asks with no handle and no name.
    removed_dirs: Mutex<HashMap<u64, rustix::fs::Stat>>,
    /// Small files whose first read was served at their open (`first_read.rs`).
    primed: Primed,
    /// Directories whose files were read ahead (`prefetch.rs`).
    prefetch: Prefetch,
}

impl KernelCache {
    /// Empty tables, and the read-ahead thread started.
    pub fn new() -> KernelCache {
        KernelCache {
            dirs: Mutex::default(),
            sent: Mutex::default(),
            opened_in: Mutex::default(),
            listings: Mutex::default(),
            removed_dirs: Mutex::default(),
            primed: Primed::default(),
            prefetch: Prefetch::start(),
        }
    }

    /// Directory node `ino`, if it is kept open.
    pub fn dir(&self, ino: u64) -> Option<Arc<OwnedFd>> {
        self.dirs.lock().get(ino)
    }

    /// Keeps directory node `ino` open, closing the one used longest ago past the bound.
    pub fn keep_dir(&self, ino: u64, fd: Arc<OwnedFd>) {
        self.dirs.lock().put(ino, fd);
    }

    /// The kernel forgot a node: what is kept of it goes, its directory
    /// descriptor, if any, is closed.
    pub fn forgot(&self, ino: u64) {
        self.dirs.lock().fds.remove(&ino);
        self.sent.lock().remove(ino);
        self.opened_in.lock().remove(&ino);
        self.listings.lock().forgot(ino);
        self.removed_dirs.lock().remove(&ino);
        self.primed.forgot(ino);
        self.prefetch.forgot(ino);
    }

    /// Records the attributes of a real node as just given to the kernel, to
    /// be kept for `ttl`.
    pub fn sent(&self, a: FileAttr, ttl: Duration) -> Timed {
        self.sent.lock().insert(a, Instant::now(), ttl);
        (a, ttl)
    }

    /// Attributes of `ino` given lately, with what is left of their TTL.
    pub fn fresh(&self, ino: u64) -> Option<(FileAttr, Duration)> {
        self.sent.lock().fresh(ino, Instant::now())
    }

    /// The node changed through the mount: what the kernel was given is stale.
    pub fn touched(&self, ino: u64) {
        self.sent.lock().remove(ino);
    }

    /// A file is being opened in directory `dir`: whether it is the first
    /// since the directory was last listed.
    pub fn first_open_in(&self, dir: u64) -> bool {
        self.opened_in.lock().insert(dir)
    }

    /// Directory `ino` is being listed from its start.
    pub fn listing_from_start(&self, ino: u64) {
        self.opened_in.lock().remove(&ino);
    }

    /// The listing `reader` is part way through, if kept.
    pub fn listing(&self, reader: Reader) -> Option<Arc<Vec<Entry>>> {
        self.listings.lock().get(reader)
    }

    /// Keeps the listing `reader` has started.
    pub fn keep_listing(&self, reader: Reader, read: Arc<Vec<Entry>>) {
        self.listings.lock().put(reader, read);
    }

    /// `reader` has read its listing to the end.
    pub fn listing_done(&self, reader: Reader) {
        self.listings.lock().done(reader);
    }

    /// What directory node `ino`, removed through the mount, was.
    pub fn removed_dir(&self, ino: u64) -> Option<rustix::fs::Stat> {
        self.removed_dirs.lock().get(&ino).copied()
    }

    /// Keeps what directory node `ino`, just removed, was, for the kernel
    /// that still holds it.
    pub fn keep_removed_dir(&self, ino: u64, st: rustix::fs::Stat) {
        self.removed_dirs.lock().insert(ino, st);
    }

    /// The small files whose first read was served at their open.
    pub fn primed(&self) -> &Primed {
        &self.primed
    }

    /// The read-ahead of directories.
    pub fn prefetch(&self) -> &Prefetch {
        &self.prefetch
    }
}

/// Directories kept open for `*at` calls: far below any descriptor limit, and each
/// saves an `openat2` walk on every lookup and getattr in a busy directory.
const DIR_CACHE: usize = 256;

/// Open directories by node id. A node id is the directory's inode, so the
/// descriptor stays right across renames; it goes when the kernel forgets the node.
#[derive(Default)]
struct DirCache {
    fds: HashMap<u64, (Arc<OwnedFd>, u64)>,
    tick: u64,
}

impl DirCache {
    fn get(&mut self, ino: u64) -> Option<Arc<OwnedFd>> {
        self.tick += 1;
        let tick = self.tick;
        self.fds.get_mut(&ino).map(|(fd, used)| {
            *used = tick;
            fd.clone()
        })
    }

    fn put(&mut self, ino: u64, fd: Arc<OwnedFd>) {
        let oldest = self
            .fds
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| *k);
        if let (true, Some(k)) = (self.fds.len() >= DIR_CACHE, oldest) {
            self.fds.remove(&k);
        }
        self.fds.insert(ino, (fd, self.tick));
    }
}

/// The attributes each real node was last given to the kernel, when, and until
/// when the kernel may keep them. A listing hands them out again for the rest
/// of that TTL instead of reading every entry anew (`git status` lists the
/// directories whose every file it has just looked up); their expiry stays the
/// same, so a change made directly in SOURCE still shows when it would have.
/// Anything written through the mount, and every change the watcher sees,
/// drops them.
///
/// Only what was given less than a second ago is kept, so whatever is older is
/// swept out whenever the table has doubled since the last sweep: a walk over
/// 50,000 files leaves the last second's worth, not one entry per file.
#[derive(Default)]
struct Sent {
    given: HashMap<u64, Given>,
    /// The size at which the next sweep runs.
    sweep_at: usize,
}

#[derive(Clone, Copy)]
struct Given {
    attr: FileAttr,
    at: Instant,
    until: Instant,
}

impl Sent {
    /// Entries below which no sweep runs: a small table costs nothing to keep.
    const FLOOR: usize = 1024;

    /// How long attributes given are kept to be handed out again.
    const KEPT: Duration = REAL_TTL;

    fn insert(&mut self, attr: FileAttr, at: Instant, ttl: Duration) {
        let until = at + ttl;
        self.given.insert(attr.ino, Given { attr, at, until });
        if self.given.len() >= self.sweep_at.max(Self::FLOOR) {
            self.sweep(at);
        }
    }

    /// Drops what is older than `KEPT` by `now`, and the room it took.
    fn sweep(&mut self, now: Instant) {
        self.given
            .retain(|_, g| now.saturating_duration_since(g.at) < Self::KEPT);
        self.given.shrink_to(self.given.len() * 2);
        self.sweep_at = self.given.len() * 2;
    }

    /// `ino`'s attributes given less than `KEPT` ago, and what is left of their TTL.
    fn fresh(&self, ino: u64, now: Instant) -> Option<(FileAttr, Duration)> {
        let g = self.given.get(&ino)?;
        if now.saturating_duration_since(g.at) >= Self::KEPT {
            return None;
        }
        let left = g.until.checked_duration_since(now)?;
        (left > Duration::from_millis(50)).then_some((g.attr, left))
    }

    fn remove(&mut self, ino: u64) {
        self.given.remove(&ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_given_longer_ago_than_a_ttl_do_not_pile_up_over_a_walk() {
        let mut sent = Sent::default();
        let start = Instant::now();
        // A walk of 50,000 files, 10,000 a second.
        for i in 0..50_000u64 {
            sent.insert(
                FileAttr::regular(i + 2),
                start + Duration::from_micros(100 * i),
                REAL_TTL,
            );
        }
        let end = start + Duration::from_secs(5);
        assert!(
            sent.given.len() <= 4 * 10_000,
            "{} entries kept, far more than a second's worth",
            sent.given.len()
        );
        assert!(sent.given.capacity() <= 8 * 10_000);
        assert!(
            sent.fresh(50_001, end).is_some(),
            "the newest is still handed out"
        );
        assert!(sent.fresh(2, end).is_none(), "the oldest has expired");
    }

    #[test]
    fn attributes_given_for_a_minute_are_handed_out_again_with_what_is_left_of_it() {
        let mut sent = Sent::default();
        let start = Instant::now();
        sent.insert(FileAttr::regular(7), start, Duration::from_secs(60));
        let (_, left) = sent
            .fresh(7, start + Duration::from_millis(400))
            .expect("given 400 ms ago");
        assert_eq!(left, Duration::from_millis(59_600), "the expiry stays");
        assert!(
            sent.fresh(7, start + Sent::KEPT).is_none(),
            "kept only a short while, however long their TTL"
        );
        sent.insert(FileAttr::regular(8), start, Duration::from_millis(40));
        assert!(
            sent.fresh(8, start).is_none(),
            "too little left to hand out"
        );
    }
}
