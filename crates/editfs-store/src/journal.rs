//! The write-ahead journal: what makes a transaction all-or-nothing across files
//! and across crashes.
//!
//! A commit goes: record the temporary names (a prepared record), write every
//! new content to its temporary file, keep both versions in the store, append
//! the record again as committed, with each new content's SHA-256 and the
//! bytes of the versions not yet durable in the store (`Inline`), and sync it
//! (the commit point), put each file in place, append the log line. The
//! records are dropped later, by the store's checkpoint, once the files' new
//! contents and names and the log line are synced (see the store's commit.rs
//! for what is synced when).
//!
//! The records of one process go, one JSON line each (the bytes it carries
//! right after it), to one file of its own,
//! `journal/<pid>-<n>.wal`, appended to and never rewritten, so a commit creates
//! and removes no file (a new inode per record was most of a commit's cost on
//! ext4, which scans past recently freed inodes). The file is removed once none
//! of its records is needed; until then a dropped record is marked so by a
//! line of its own (`{"dropped":[…]}`), so a crash never finishes it twice. A
//! process holds a lock on its file while it lives: recovery leaves the files
//! of a live process to it. Recovery itself is in journal/recovery.rs.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use serde::{Deserialize, Serialize};

use super::{STATE_DIR, StoreError, io_err};

mod recovery;

pub use recovery::{Handled, Recovered};

/// One file of a transaction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// Path relative to the project root.
    pub rel: String,
    /// Name of the temporary file holding the new content.
    pub tmp: String,
    /// The temporary file sits next to the target (the state directory is on another
    /// file system) rather than in the state directory's `tmp/`.
    pub beside: bool,
    /// The target has other hard links: its content is copied in place, not renamed.
    pub in_place: bool,
    /// The target's device and inode when it was read, for an in-place copy:
    /// recovery writes into the file at the name only if it is still that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inode: Option<(u64, u64)>,
    /// The file is removed rather than replaced (an undo of its creation).
    #[serde(default)]
    pub remove: bool,
    /// SHA-256 of the new content, which the temporary file, or the file it
    /// became, must hold once a committed record is finished: the record is
    /// synced before the temporary file is, so after a crash of the machine
    /// the file may be torn while the record is whole (see `repair`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The temporary file as written, before the record committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made: Option<Made>,
    /// What the name held when the transaction read it: recovery puts the
    /// new content in place, or removes the file, only while it still holds
    /// that, so a file written, replaced or made there after the commit
    /// point (the process that committed died, and others went on) is left
    /// as it is. `None` in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<Found>,
}

/// What a name held when a transaction read it (see `Entry::found`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Found {
    File { dev: u64, ino: u64 },
    Nothing,
}

impl Found {
    /// What `meta`, the file read at the name (`None`: nothing was), is.
    pub fn of(meta: Option<&fs::Metadata>) -> Found {
        use std::os::unix::fs::MetadataExt;
        match meta {
            Some(m) => Found::File {
                dev: m.dev(),
                ino: m.ino(),
            },
            None => Found::Nothing,
        }
    }

    /// Whether `name` in `dir` still holds it.
    pub fn is_at(self, dir: BorrowedFd<'_>, name: &OsStr) -> bool {
        let now = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);
        match (self, now) {
            (Found::Nothing, Err(rustix::io::Errno::NOENT)) => true,
            (Found::File { dev, ino }, Ok(st)) => (st.st_dev, st.st_ino) == (dev, ino),
            _ => false,
        }
    }
}

/// What a temporary file was once its new content was written: recovery
/// tells by it whether the file now at its path is that file (put in place,
/// and maybe torn by a crash of the machine), or one written since, which it
/// must leave alone. A later write moves the modification time on; a crash
/// can at most leave an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Made {
    pub ino: u64,
    /// Modification time, in nanoseconds since the epoch (an `i64`, as JSON
    /// numbers in an untagged line read no wider).
    pub mtime: i64,
}

impl Made {
    pub fn of(meta: &fs::Metadata) -> Made {
        use std::os::unix::fs::MetadataExt;
        Made {
            ino: meta.ino(),
            mtime: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
        }
    }

    /// Whether `meta` is this file, written no later than this.
    fn is(&self, meta: &fs::Metadata) -> bool {
        let now = Made::of(meta);
        now.ino == self.ino && now.mtime <= self.mtime
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub tx: u64,
    /// The project root the paths are relative to.
    pub root: PathBuf,
    pub committed: bool,
    pub files: Vec<Entry>,
    /// The log line to append once the files are in place.
    pub log: super::LogEntry,
    /// Versions whose bytes follow the committed record in the journal file,
    /// in this order (see `Inline`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inline: Vec<Inline>,
}

impl Record {
    /// The locks its files take (see the store's lock.rs): by path, and by
    /// inode where it writes into a file in place.
    pub fn keys(&self) -> super::Keys {
        self.files.iter().fold(super::Keys::new(), |keys, e| {
            let keys = keys.path(&e.rel);
            match e.inode {
                Some((dev, ino)) => keys.inode(dev, ino),
                None => keys,
            }
        })
    }
}

/// A version the record carries the bytes of: they follow its line, raw,
/// `len` bytes each, so the one sync of the record makes them durable too.
/// The store's copy of such a version is synced later, by the checkpoint,
/// and recovery writes it again from here where a crash left it torn
/// (see the store's commit.rs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inline {
    pub sha256: String,
    pub len: u64,
}

/// The bytes of the versions the committed records of a journal carried, by SHA-256.
pub type Carried = std::collections::HashMap<String, Vec<u8>>;

pub struct Journal {
    dir: PathBuf,
    /// This process's journal file, while it holds records still needed.
    wal: parking_lot::Mutex<Wal>,
}

#[derive(Default)]
struct Wal {
    /// The open file (locked, appended to) and its path.
    file: Option<(File, PathBuf)>,
    /// Its length: an append that fails is cut off again, so no record ever
    /// follows a partial one (a reader stops at the first it cannot read,
    /// since raw bytes carried after a record must never be read as lines).
    len: u64,
    /// Files set aside after an append that could not be cut off: held
    /// (locked) while this process lives, for the next recovery to read.
    set_aside: Vec<File>,
    /// Transactions whose records in the file are still needed.
    live: BTreeSet<u64>,
}

/// One line of a journal file.
#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    /// Boxed: a record is far larger than a dropped line.
    Record(Box<Record>),
    Dropped {
        dropped: Vec<u64>,
    },
}

/// Opens the directory of `rel` beneath `root`: no `..` or symlink leads out.
pub fn parent_beneath(root: BorrowedFd<'_>, rel: &str) -> rustix::io::Result<OwnedFd> {
    parent_beneath_with(root, rel, |walk| Ok(walk()))
}

/// `parent_beneath`, the walk itself run by `walk_as` (a caller's credentials on
/// the thread, so the walk needs the search permissions that caller has). The
/// walk opens the directory with `O_PATH`, which needs no read permission on it,
/// and the directory is then reopened through that descriptor, not its path.
pub fn parent_beneath_with(
    root: BorrowedFd<'_>,
    rel: &str,
    walk_as: impl FnOnce(
        &dyn Fn() -> rustix::io::Result<OwnedFd>,
    ) -> rustix::io::Result<rustix::io::Result<OwnedFd>>,
) -> rustix::io::Result<OwnedFd> {
    let parent = Path::new(rel)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let walk = || {
        rustix::fs::openat2(
            root,
            parent,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        )
    };
    let found = walk_as(&walk)??;
    let dir = rustix::fs::openat(
        &found,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if in_state_dir(root, dir.as_fd())? {
        return Err(rustix::io::Errno::PERM);
    }
    Ok(dir)
}

/// Whether `dir`, beneath `root`, is a state directory or inside one.
///
/// The name was checked before (`rel::project_path`), but a symlink inside the
/// project (`lnk -> .editfs`) leads there without naming it: so the directory
/// actually opened is walked up to `root`, and each step's name is looked for.
fn in_state_dir(root: BorrowedFd<'_>, dir: BorrowedFd<'_>) -> rustix::io::Result<bool> {
    /// Deeper than any project; a walk this long is refused rather than trusted.
    const MAX_DEPTH: usize = 4096;
    let id = |st: &rustix::fs::Stat| (st.st_dev, st.st_ino);
    let top = id(&rustix::fs::fstat(root)?);
    let mut here = rustix::fs::fstat(dir)?;
    let mut cur: Option<OwnedFd> = None;
    for _ in 0..MAX_DEPTH {
        if id(&here) == top {
            return Ok(false);
        }
        let at = cur.as_ref().map_or(dir, |c| c.as_fd());
        let up = rustix::fs::openat(
            at,
            "..",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let named = rustix::fs::statat(&up, STATE_DIR, AtFlags::SYMLINK_NOFOLLOW);
        if named.is_ok_and(|st| id(&st) == id(&here)) {
            return Ok(true);
        }
        here = rustix::fs::fstat(&up)?;
        cur = Some(up);
    }
    Err(rustix::io::Errno::LOOP)
}

pub(crate) fn file_name(rel: &str) -> &OsStr {
    Path::new(rel).file_name().unwrap_or(OsStr::new("."))
}

impl Journal {
    pub fn new(state: &Path) -> Journal {
        Journal {
            dir: state.join("journal"),
            wal: parking_lot::Mutex::default(),
        }
    }

    /// Appends a record. A committed one (the commit point) is synced: one
    /// sync, and whole once it returns. A prepared one is not: it only lets
    /// recovery clean up after a crash of the process, and a transaction that
    /// never committed changed no file.
    pub fn write(&self, record: &Record) -> Result<(), StoreError> {
        self.write_carrying(record, &[])
    }

    /// `write`, the record followed by the bytes of the versions its `inline`
    /// names, in that order.
    pub fn write_carrying(&self, record: &Record, carried: &[&[u8]]) -> Result<(), StoreError> {
        debug_assert_eq!(record.inline.len(), carried.len());
        // Each line begins with its own newline, so it stands alone.
        let mut line = vec![b'\n'];
        serde_json::to_writer(&mut line, record)
            .map_err(|e| io_err("encode", &self.dir)(e.into()))?;
        if !carried.is_empty() {
            line.push(b'\n');
            line.reserve(carried.iter().map(|c| c.len()).sum());
            carried.iter().for_each(|c| line.extend_from_slice(c));
        }
        let syncing = {
            let mut wal = self.wal.lock();
            if wal.file.is_none() {
                wal.file = Some(self.create()?);
                wal.len = 0;
            }
            self.append(&mut wal, &line)?;
            wal.live.insert(record.tx);
            match &wal.file {
                Some((file, path)) if record.committed => Some((
                    file.try_clone().map_err(io_err("open again", path))?,
                    path.clone(),
                )),
                _ => None,
            }
        };
        // Synced outside the file's mutex: the commits of other threads
        // append meanwhile, and one sync covers whatever came before it.
        if let Some((file, path)) = syncing {
            file.sync_data().map_err(io_err("sync", &path))?;
        }
        Ok(())
    }

    /// Appends `bytes` to the open journal file, whole or not at all: what a
    /// failed append left is cut off, and a file that cannot be cut is set
    /// aside (the next record starts a file of its own).
    fn append(&self, wal: &mut Wal, bytes: &[u8]) -> Result<(), StoreError> {
        let len = wal.len;
        let Some((file, path)) = &mut wal.file else {
            return Ok(());
        };
        match file.write_all(bytes) {
            Ok(()) => {
                wal.len = len + bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                let err = io_err("append to", path)(e);
                if let Err(cut) = file.set_len(len) {
                    log::error!(
                        "{}: a failed append stays ({cut}); set aside",
                        path.display()
                    );
                    // Its records go to the next recovery, which finishes
                    // what is finished already again, harmlessly; the next
                    // file holds only records made from now on, so it still
                    // goes once they are dropped.
                    if let Some((file, _)) = wal.file.take() {
                        wal.set_aside.push(file);
                    }
                    wal.live.clear();
                }
                Err(err)
            }
        }
    }

    /// Whether a journal file here belongs to no live process (its lock is
    /// free): what a process that died mid-commit left.
    pub fn has_dead_files(&self) -> bool {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return false;
        };
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".wal")
                && !name.starts_with(super::atomic::TMP_PREFIX)
                && File::open(e.path()).is_ok_and(|f| f.try_lock().is_ok())
        })
    }

    /// Whether process `pid` has a journal file here (see the top): its
    /// records may still need its temporary files.
    pub fn has_files_of(&self, pid: u32) -> bool {
        let own = format!("{pid}-");
        fs::read_dir(&self.dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with(&own) && name.ends_with(".wal")
            })
        })
    }

    /// Creates this process's journal file, locked while the process lives.
    fn create(&self) -> Result<(File, PathBuf), StoreError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static FILES: AtomicU64 = AtomicU64::new(0);
        fs::create_dir_all(&self.dir).map_err(io_err("create", &self.dir))?;
        loop {
            let n = FILES.fetch_add(1, Ordering::Relaxed);
            let path = self.dir.join(format!("{}-{n}.wal", std::process::id()));
            if path.exists() {
                continue;
            }
            // Made under a temporary name, which recovery passes by, and
            // locked before it takes its own: a recovery running meanwhile
            // (another process opening the store, or this one's, of a dead
            // process's journal) never finds it unlocked and takes it for
            // a dead process's.
            let made = self.dir.join(super::atomic::tmp_name());
            let file = fs::OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(0o600)
                .open(&made)
                .map_err(io_err("create", &made))?;
            file.lock().map_err(io_err("lock", &made))?;
            if let Err(e) = rustix::fs::renameat_with(
                rustix::fs::CWD,
                &made,
                rustix::fs::CWD,
                &path,
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                let _ = fs::remove_file(&made);
                if e == rustix::io::Errno::EXIST {
                    continue;
                }
                return Err(io_err("name", &path)(e.into()));
            }
            return Ok((file, path));
        }
    }

    /// Drops the records of `txs`: the file goes once it holds no record still
    /// needed, else a line says they are dropped. Unsynced either way: a crash
    /// of the machine may bring them back, finished, and recovery then finds
    /// nothing left to do for them.
    pub fn remove(&self, txs: &[u64]) -> Result<(), StoreError> {
        let mut wal = self.wal.lock();
        for tx in txs {
            wal.live.remove(tx);
        }
        if !wal.live.is_empty() {
            let line = format!("\n{}", serde_json::json!({ "dropped": txs }));
            return self.append(&mut wal, line.as_bytes());
        }
        let Some((file, path)) = wal.file.take() else {
            return Ok(());
        };
        // A commit may be waiting for the lock to append: the removal, and the
        // close that frees the file's blocks (a synchronous discard where the
        // file system is mounted with `discard`), are made without it. A commit
        // that comes meanwhile creates a file of its own.
        drop(wal);
        let removed = fs::remove_file(&path).map_err(io_err("remove", &path));
        drop(file);
        removed
    }

    /// Drops the record of `tx`, committed but whose files could not be made
    /// durable (a failed sync), and syncs that: recovery must not finish it
    /// after a crash of the machine. The file stays for the next `remove`.
    pub fn drop_committed(&self, tx: u64) -> Result<(), StoreError> {
        let mut wal = self.wal.lock();
        wal.live.remove(&tx);
        let line = format!("\n{}", serde_json::json!({ "dropped": [tx] }));
        self.append(&mut wal, line.as_bytes())?;
        match &wal.file {
            Some((file, path)) => file.sync_data().map_err(io_err("sync", path)),
            None => Ok(()),
        }
    }

    /// What `kill -9` does to this process's journal file: closed, so unlocked,
    /// and left as it is.
    #[cfg(test)]
    pub fn abandon(&self) {
        self.wal.lock().file = None;
    }
}

/// The directory the temporary file of `e` lives in; `dir` is the directory of its file.
pub fn tmp_dir_of(
    dir: BorrowedFd<'_>,
    tmp: BorrowedFd<'_>,
    e: &Entry,
) -> Result<OwnedFd, StoreError> {
    let base = if e.beside { dir } else { tmp };
    rustix::io::dup(base).map_err(|err| io_err("open", Path::new("tmp"))(err.into()))
}

/// Removes the temporary file of `e`, if any; `dir` is the directory of its file.
pub fn discard_in(dir: BorrowedFd<'_>, tmp: BorrowedFd<'_>, e: &Entry) {
    if e.remove {
        return;
    }
    if let Ok(base) = tmp_dir_of(dir, tmp, e) {
        let _ = rustix::fs::unlinkat(&base, e.tmp.as_str(), AtFlags::empty());
    }
}
