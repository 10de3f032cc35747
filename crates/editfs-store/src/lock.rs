//! The store's locks: one per file a transaction touches, across every
//! process sharing the state directory, so that transactions on different
//! files never wait for each other.
//!
//! Each lock is a write lock on one byte of the file `lock`, taken as an
//! open file description lock (`F_OFD_SETLKW`): the byte is a hash of what
//! it guards (a path relative to the project, or a file's device and inode,
//! so two names of one file share a lock), and one descriptor, opened per
//! transaction, holds all of a transaction's bytes. Two transactions that
//! share a file exclude each other whichever thread or process runs them;
//! two that share none go side by side. A transaction takes its bytes in
//! ascending order, so two of them never wait for each other crosswise; a
//! hash shared by two files by chance only makes their transactions take
//! turns. The kernel lets the locks go when the descriptor closes, a
//! process that dies included: nothing is left to clean up.
//!
//! What is global is held for microseconds, and outside these locks: the
//! next id (`txid.rs`), an append to the journal and one to the log.
//!
//! The same file also tells which processes have the store open: each holds
//! a read lock on the byte `LIVE + pid` while it does, so that sweeping the
//! temporary files of a crashed process spares those of a live one.

use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{FcntlArg, fcntl};
use sha2::{Digest, Sha256};

use super::{Store, StoreError, io_err};

/// The first byte of the range a process marks itself live in (see the top).
const LIVE: i64 = 1 << 62;

/// Held while a transaction commits: its files' locks, let go when dropped.
pub struct Lock {
    _file: File,
    /// The bytes it took itself: those an enclosing `Lock` of this thread
    /// held already are left to that one.
    took: Vec<i64>,
    /// Let go on the thread that took it (see `HELD`).
    _here: std::marker::PhantomData<*const ()>,
}

thread_local! {
    /// The bytes the `Lock`s of this thread hold. A lock is taken again by
    /// the thread that holds it as a no-op, so a step that takes a file's
    /// lock (keeping a removed file's pre-image) can run inside one that
    /// holds it already (a rename through the mount): two descriptors of
    /// one process would otherwise wait for each other. A lock taken inside
    /// another must name no byte the outer one lacks: it would be taken
    /// after greater ones, out of the ascending order that keeps two
    /// transactions from waiting for each other.
    static HELD: std::cell::RefCell<std::collections::HashSet<i64>> =
        std::cell::RefCell::default();
}

impl Drop for Lock {
    fn drop(&mut self) {
        HELD.with_borrow_mut(|held| {
            for b in &self.took {
                held.remove(b);
            }
        });
    }
}

/// What a transaction locks: the files it reads, writes, makes or removes.
#[derive(Clone, Debug, Default)]
pub struct Keys {
    /// The bytes of `lock` to take.
    bytes: Vec<i64>,
    /// The paths among them, whose removals are filed first (see `Store::lock`).
    paths: Vec<String>,
}

impl Keys {
    pub fn new() -> Keys {
        Keys::default()
    }

    /// The file at `rel` in the project, whatever inode it is now: a file
    /// made or removed has no other key.
    pub fn path(mut self, rel: &str) -> Keys {
        self.bytes.push(key(b"path", rel.as_bytes()));
        self.paths.push(rel.to_owned());
        self
    }

    /// The file `file` is open on, whatever its name: two names of one file
    /// share this key.
    pub fn file(self, file: Option<&File>) -> Keys {
        match file.and_then(|f| rustix::fs::fstat(f).ok()) {
            Some(st) => self.inode(st.st_dev, st.st_ino),
            None => self,
        }
    }

    /// The file of inode `ino` on device `dev`, as `file` keys it.
    pub fn inode(mut self, dev: u64, ino: u64) -> Keys {
        let id = [dev.to_le_bytes(), ino.to_le_bytes()].concat();
        self.bytes.push(key(b"inode", &id));
        self
    }

    /// The names of checkpoints: one is given at a time, so no two take
    /// one name.
    pub fn checkpoint_names(self) -> Keys {
        self.store_wide("checkpoint names")
    }

    /// What the store holds for one user at a time, named `what`, apart
    /// from every file's lock.
    pub(super) fn store_wide(mut self, what: &str) -> Keys {
        self.bytes.push(key(b"store", what.as_bytes()));
        self
    }

    /// These keys and those of `other`.
    pub fn and(mut self, other: Keys) -> Keys {
        self.bytes.extend(other.bytes);
        self.paths.extend(other.paths);
        self
    }
}

/// The byte of `lock` that guards `what`: a SHA-256, so that every process,
/// whatever its build, picks the same byte for the same file.
fn key(kind: &[u8], what: &[u8]) -> i64 {
    let hash = Sha256::new()
        .chain_update(kind)
        .chain_update([0])
        .chain_update(what)
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    (u64::from_le_bytes(first) % LIVE as u64) as i64
}

/// One byte of `lock`, at `start`, of lock type `kind` (`F_WRLCK`, `F_RDLCK`).
fn byte(kind: libc::c_short, start: i64) -> libc::flock {
    libc::flock {
        l_type: kind,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: start,
        l_len: 1,
        l_pid: 0,
    }
}

impl Store {
    /// Waits for and takes the locks of `keys`, once the removals this
    /// process began from their paths are filed: whatever runs under them
    /// sees those in the history. Removals of other paths are left to the
    /// filer: a user's `rm -r` of a large tree holds up no edit of another
    /// file (a checkpoint, an undo, a rewind and a reading of the history
    /// file them all first).
    pub fn lock(&self, keys: &Keys) -> Result<Lock, StoreError> {
        // Both take locks of their own (the filer's, a dead record's files),
        // so never inside another of this thread's locks, out of their order:
        // the outer lock did them for its paths already.
        if HELD.with_borrow(|held| held.is_empty()) {
            for rel in &keys.paths {
                self.settle_removals_at(rel);
            }
            // A process that died mid-commit let go of its files' locks with
            // it: what its journal holds is finished first, so no transaction
            // on one of its files comes between its commit point and its
            // recovery.
            if self.journal.has_dead_files() {
                self.recover_dead();
            }
        }
        self.lock_only(keys)
    }

    /// Waits for and takes the locks of `keys` as the store is.
    pub(super) fn lock_only(&self, keys: &Keys) -> Result<Lock, StoreError> {
        let (file, path) = open_lock_file(&self.dir)?;
        let mut bytes = keys.bytes.clone();
        bytes.sort_unstable();
        bytes.dedup();
        bytes.retain(|b| !HELD.with_borrow(|held| held.contains(b)));
        for &start in &bytes {
            let wanted = byte(libc::F_WRLCK as libc::c_short, start);
            retry_interrupted(|| fcntl(file.as_fd(), FcntlArg::F_OFD_SETLKW(&wanted)))
                .map_err(|e| io_err("lock", &path)(e.into()))?;
        }
        HELD.with_borrow_mut(|held| held.extend(&bytes));
        Ok(Lock {
            _file: file,
            took: bytes,
            _here: std::marker::PhantomData,
        })
    }
}

/// A process's mark that it has the store open (see the top): a read lock
/// on its own byte, held as long as the returned file is.
pub(super) fn live(dir: &Path) -> Result<File, StoreError> {
    let (file, path) = open_lock_file(dir)?;
    let mark = byte(
        libc::F_RDLCK as libc::c_short,
        LIVE + i64::from(std::process::id()),
    );
    retry_interrupted(|| fcntl(file.as_fd(), FcntlArg::F_OFD_SETLKW(&mark)))
        .map_err(|e| io_err("lock", &path)(e.into()))?;
    Ok(file)
}

/// Whether a process other than this one has the store in `dir` open, as
/// far as the marks tell (see `live`); `true` when that cannot be told.
pub(super) fn others_live(dir: &Path) -> bool {
    let Ok((file, _)) = open_lock_file(dir) else {
        return true;
    };
    let own = LIVE + i64::from(std::process::id());
    let end = LIVE + (1 << 32);
    [(LIVE, own - LIVE), (own + 1, end - own - 1)]
        .into_iter()
        .any(|range| marked(&file, range))
}

/// Whether any byte of `lock` from `start`, `len` long, is locked by another
/// open file description; `true` when that cannot be told.
fn marked(file: &File, (start, len): (i64, i64)) -> bool {
    let mut probe = libc::flock {
        l_len: len,
        ..byte(libc::F_WRLCK as libc::c_short, start)
    };
    match fcntl(file.as_fd(), FcntlArg::F_OFD_GETLK(&mut probe)) {
        Ok(_) => probe.l_type != libc::F_UNLCK as libc::c_short,
        Err(_) => true,
    }
}

/// Whether process `pid` has the store in `dir` open, as far as its mark
/// tells (see `live`); `true` when that cannot be told, so nothing of it is
/// swept.
pub(super) fn is_live(dir: &Path, pid: u32) -> bool {
    let Ok((file, _)) = open_lock_file(dir) else {
        return true;
    };
    marked(&file, (LIVE + i64::from(pid), 1))
}

fn open_lock_file(dir: &Path) -> Result<(File, PathBuf), StoreError> {
    let path = dir.join("lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .read(true)
        .open(&path)
        .map_err(io_err("open", &path))?;
    Ok((file, path))
}

/// `op`, again as long as a signal interrupts it.
fn retry_interrupted<T>(mut op: impl FnMut() -> nix::Result<T>) -> nix::Result<T> {
    loop {
        match op() {
            Err(nix::errno::Errno::EINTR) => continue,
            other => return other,
        }
    }
}
