//! File versions, stored once by content: `objects/<sha256>`.
//!
//! A snapshot is a hard link to an object, so a pre-image that many transactions
//! share costs its bytes once, and dropping a snapshot frees its object when no
//! other name links to it. `snapshots/<path>/<tx>` holds the file as it was before
//! transaction `tx` (shown in the mount), `versions/<path>/<tx>` as it was after
//! (for `editfs show` and `editfs undo`).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use parking_lot::Mutex;

use super::reaper::Reaper;
use super::{StoreError, atomic, io_err};
use crate::engine::sha256_hex;

mod held;
mod pruning;

pub use held::BRANCHES;

use pruning::Count;

/// Which side of a transaction a kept version is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Before the transaction: `snapshots/`.
    Pre,
    /// After it: `versions/`.
    Post,
}

impl Side {
    fn dir(self) -> &'static str {
        match self {
            Side::Pre => "snapshots",
            Side::Post => "versions",
        }
    }
}

/// `rel` as a relative path with no `..`, `.` or root, so a name stays inside its tree.
pub fn safe_rel(rel: &str) -> String {
    let parts: Vec<String> = Path::new(rel)
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        "_".into()
    } else {
        parts.join("/")
    }
}

/// A version kept unsynced for now (see `Objects::keep_later`).
pub struct Later {
    pub sha: String,
    /// The object, open: the checkpoint syncs it.
    pub file: File,
    pub ino: u64,
    pub path: PathBuf,
}

impl Later {
    fn new(sha: &str, file: File, ino: u64, path: PathBuf) -> Later {
        Later {
            sha: sha.to_owned(),
            file,
            ino,
            path,
        }
    }
}

pub struct Objects {
    state: PathBuf,
    /// Bytes the objects take: summed once, then kept up to date, so the size cap
    /// does not walk the whole store on every commit.
    total: Mutex<Option<u64>>,
    /// Versions of a file on one side, as last listed and kept up to date since,
    /// so a commit lists them only when they may be over what is kept. Another
    /// process adding versions only delays its pruning here (it prunes its own).
    counts: Mutex<HashMap<(Side, String), Count>>,
    /// Unlinks the objects dropped, in the background.
    reaper: Reaper,
    /// What the latest commits left in their files, with its hash: the next
    /// commit of such a file, finding those very bytes there, keeps them as its
    /// pre-image by that hash instead of hashing them again (100 KiB and about
    /// 60 µs per edit of a 100 KiB file). Taken alone and briefly.
    recent: Mutex<Recent>,
    /// Objects this process synced, each with its inode (an object removed
    /// and stored again, unsynced, by another process is another inode). A
    /// commit's new content is durable only in its object until the next
    /// checkpoint syncs the file it went to (see the store's commit.rs), so
    /// an object stored unsynced (a direct write's pre-image) or by another
    /// process is synced once before a record names it. At most
    /// `DURABLE_KNOWN`; past it, all are forgotten, and each is synced again
    /// when next named. Taken alone and briefly.
    durable: Mutex<HashMap<String, u64>>,
    /// The first transaction whose versions the size cap spares (`spare_from`).
    spared: std::sync::atomic::AtomicU64,
    /// What the branches hold, as last read (see held.rs). Taken alone and briefly.
    held: std::sync::Arc<Mutex<held::Held>>,
}

/// How many versions to keep.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// Versions kept per file (each side: before and after).
    pub keep: usize,
    /// Bytes all kept versions may take; the oldest go first.
    pub cap: u64,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            keep: 100,
            cap: 1 << 30,
        }
    }
}

/// Objects known synced (`Objects::durable`) at most.
const DURABLE_KNOWN: usize = 4096;

/// Contents last committed to files, newest last, bounded by `RECENT_BYTES`.
#[derive(Default)]
struct Recent {
    files: VecDeque<Committed>,
    bytes: usize,
}

/// The content a commit left in file `rel`, and its SHA-256.
struct Committed {
    rel: String,
    sha: String,
    bytes: Vec<u8>,
}

/// What `Recent` holds at most: a few files of the size agents edit.
const RECENT_BYTES: usize = 4 << 20;

/// Contents larger than this are not remembered (each would push out the rest).
const RECENT_FILE_BYTES: usize = 1 << 20;

impl Objects {
    pub(crate) fn new(state: &Path) -> Objects {
        Objects {
            state: state.to_owned(),
            total: Mutex::new(None),
            counts: Mutex::default(),
            reaper: Reaper::new(&state.join("tmp")),
            recent: Mutex::default(),
            durable: Mutex::default(),
            spared: std::sync::atomic::AtomicU64::new(u64::MAX),
            held: std::sync::Arc::default(),
        }
    }

    /// The state directory the versions are kept in.
    pub fn state(&self) -> &Path {
        &self.state
    }

    /// Remembers that a commit left `bytes`, whose SHA-256 is `sha`, in `rel`
    /// (see `recent`), in place of what was remembered of `rel` before; returns
    /// the contents no longer remembered, for the caller to reuse or free.
    pub(crate) fn remember(&self, rel: &str, sha: &str, bytes: Vec<u8>) -> Vec<Vec<u8>> {
        let mut gone = Vec::new();
        let mut recent = self.recent.lock();
        if let Some(i) = recent.files.iter().position(|c| c.rel == rel) {
            gone.extend(recent.files.remove(i).map(|c| c.bytes));
        }
        if bytes.len() <= RECENT_FILE_BYTES {
            recent.files.push_back(Committed {
                rel: rel.to_owned(),
                sha: sha.to_owned(),
                bytes,
            });
        } else {
            gone.push(bytes);
        }
        recent.bytes = recent.files.iter().map(|c| c.bytes.len()).sum();
        while recent.bytes > RECENT_BYTES
            && let Some(oldest) = recent.files.pop_front()
        {
            recent.bytes -= oldest.bytes.len();
            gone.push(oldest.bytes);
        }
        gone
    }

    /// The SHA-256 of `bytes`, read from `rel`, if they are what a commit
    /// left there (compared byte for byte, so a change made meanwhile, even
    /// one that kept the file's size and times, is hashed anew).
    pub(crate) fn known_sha(&self, rel: &str, bytes: &[u8]) -> Option<String> {
        let recent = self.recent.lock();
        recent
            .files
            .iter()
            .find(|c| c.rel == rel && c.bytes == bytes)
            .map(|c| c.sha.clone())
    }

    /// What frees blocks in the background for this store.
    pub(crate) fn reaper(&self) -> &Reaper {
        &self.reaper
    }

    fn object(&self, sha: &str) -> PathBuf {
        self.state.join("objects").join(sha)
    }

    /// Stores `bytes` (once, synced if `sync`) and returns their SHA-256.
    pub fn put(&self, bytes: &[u8], sync: bool) -> Result<String, StoreError> {
        self.put_hashed(bytes, sha256_hex(bytes), sync)
    }

    /// `put` of `bytes` whose SHA-256 is `sha`, computed by editfs itself. With
    /// `sync`, an object stored already is synced unless this process knows
    /// it is (see `durable`): a synced object's bytes are then durable
    /// whoever stored them. One that does not hold `bytes` (stored unsynced,
    /// then cut short by a crash of the machine) is stored again.
    fn put_hashed(&self, bytes: &[u8], sha: String, sync: bool) -> Result<String, StoreError> {
        debug_assert_eq!(sha, sha256_hex(bytes), "a hash that is not of these bytes");
        if sync {
            if let Some(l) = self.put_later(bytes, &sha)? {
                l.file.sync_data().map_err(io_err("sync", &l.path))?;
                self.durable_now(&sha, l.ino);
            }
            return Ok(sha);
        }
        let path = self.object(&sha);
        if fs::metadata(&path).is_err() {
            self.store_new(&path, bytes, &sha)?;
        }
        Ok(sha)
    }

    /// `keep_hashed`, but durable only later: a version whose bytes this
    /// process does not know to be durable is stored unsynced (or, stored
    /// already, checked whole), and handed back for the caller to carry its
    /// bytes in the record that names it and to have the checkpoint sync it;
    /// once that record is synced, `carried` marks it durable.
    pub(crate) fn keep_later(
        &self,
        side: Side,
        rel: &str,
        tx: u64,
        bytes: &[u8],
        sha: Option<&str>,
    ) -> Result<(String, Option<Later>), StoreError> {
        let sha = sha.map_or_else(|| sha256_hex(bytes), str::to_owned);
        self.stored_and_linked(&sha, || self.put_later(bytes, &sha), (side, rel, tx))
    }

    /// What `put` gives, and the object `sha` it stores linked as version
    /// `side` of `rel` at `tx`. Stored again once if the object went before
    /// its link: a commit on another file, sharing these bytes, may drop
    /// their last other version meanwhile (transactions on different files
    /// run side by side).
    fn stored_and_linked<T>(
        &self,
        sha: &str,
        put: impl Fn() -> Result<T, StoreError>,
        (side, rel, tx): (Side, &str, u64),
    ) -> Result<(String, T), StoreError> {
        let put_first = put()?;
        match self.link_object(side, rel, tx, sha) {
            Err(_) if !self.object(sha).exists() => {
                let put_again = put()?;
                Ok((self.link_object(side, rel, tx, sha)?, put_again))
            }
            linked => Ok((linked?, put_first)),
        }
    }

    fn put_later(&self, bytes: &[u8], sha: &str) -> Result<Option<Later>, StoreError> {
        let path = self.object(sha);
        if let Ok(meta) = fs::metadata(&path) {
            if self.known_durable(sha, meta.ino()) {
                return Ok(None);
            }
            let file = File::open(&path).map_err(io_err("open", &path))?;
            let mut held = Vec::with_capacity(bytes.len());
            if (&file).read_to_end(&mut held).is_ok() && held == bytes {
                return Ok(Some(Later::new(sha, file, meta.ino(), path)));
            }
        }
        let file = self.store_new(&path, bytes, sha)?;
        let ino = file.metadata().map_err(io_err("stat", &path))?.ino();
        Ok(Some(Later::new(sha, file, ino, path)))
    }

    /// Writes `bytes`, whose SHA-256 is `sha`, as the object at `path`
    /// (again, if one there is torn), unsynced; hands back the file.
    fn store_new(&self, path: &Path, bytes: &[u8], sha: &str) -> Result<File, StoreError> {
        let dir = self.state.join("objects");
        fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
        let before = fs::metadata(path).map_or(0, |m| m.len());
        let file = atomic::write_new(path, bytes, 0o444)?;
        mark(path, sha);
        self.adjust(bytes.len() as i64 - before as i64);
        Ok(file)
    }

    /// Marks the versions `later` durable: the record carrying their bytes is synced.
    pub(crate) fn carried(&self, later: &[Later]) {
        for l in later {
            self.durable_now(&l.sha, l.ino);
        }
    }

    /// Makes the object `sha` hold `bytes`, synced, where a crash left it torn
    /// or lost it (recovery, from the bytes a record carried). A torn one is
    /// written again in place, so every version linked to it holds them too.
    pub(crate) fn restore(&self, sha: &str, bytes: &[u8]) -> Result<(), StoreError> {
        if self.content(sha).is_some() {
            return Ok(());
        }
        let path = self.object(sha);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            use std::io::Write;
            use std::os::unix::fs::PermissionsExt;
            let writable = fs::Permissions::from_mode(0o644);
            fs::set_permissions(&path, writable).map_err(io_err("chmod", &path))?;
            let mut file = fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .map_err(io_err("open", &path))?;
            file.write_all(bytes).map_err(io_err("write", &path))?;
            file.sync_all().map_err(io_err("sync", &path))?;
            let read_only = fs::Permissions::from_mode(0o444);
            fs::set_permissions(&path, read_only).map_err(io_err("chmod", &path))?;
        } else {
            let file = self.store_new(&path, bytes, sha)?;
            file.sync_data().map_err(io_err("sync", &path))?;
        }
        log::warn!("stored version {sha} written again from the journal");
        Ok(())
    }

    fn known_durable(&self, sha: &str, ino: u64) -> bool {
        self.durable.lock().get(sha) == Some(&ino)
    }

    fn durable_now(&self, sha: &str, ino: u64) {
        let mut durable = self.durable.lock();
        if durable.len() >= DURABLE_KNOWN {
            durable.clear();
        }
        durable.insert(sha.to_owned(), ino);
    }

    /// The bytes of the object `sha`, if it is stored whole (they hash to `sha`):
    /// what recovery puts back where a crash left a new content torn.
    pub fn content(&self, sha: &str) -> Option<Vec<u8>> {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let bytes = fs::read(self.object(sha)).ok()?;
        (sha256_hex(&bytes) == sha).then_some(bytes)
    }

    /// Stores what `from` reads, streamed (never whole in memory), and returns
    /// its SHA-256. Needs no lock: the bytes go to a temporary file first, named
    /// by their hash only once complete, and an object already stored under
    /// that name is the same bytes. Unsynced, as the pre-images of direct writes
    /// are (see the store's commit.rs).
    pub fn put_from(&self, from: &mut impl Read, most: u64) -> Result<String, StoreError> {
        use sha2::{Digest, Sha256};
        let dir = self.state.join("objects");
        fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
        let tmp = dir.join(atomic::tmp_name());
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&tmp, flags, Mode::from(0o444))
            .map_err(|e| io_err("create", &tmp)(e.into()))?;
        let mut out = File::from(fd);
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        // One byte past `most` tells a file that grew from one that did not.
        let mut from = from.take(most.saturating_add(1));
        let copied = (|| -> std::io::Result<u64> {
            let mut len = 0;
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) => return Ok(len),
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                hasher.update(&buf[..n]);
                std::io::Write::write_all(&mut out, &buf[..n])?;
                len += n as u64;
            }
        })();
        let len = match copied {
            Ok(len) if len > most => {
                let _ = fs::remove_file(&tmp);
                return Err(StoreError::Grew {
                    path: tmp,
                    limit: most,
                });
            }
            Ok(len) => len,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(io_err("copy into", &tmp)(e));
            }
        };
        let sha: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let object = self.object(&sha);
        if object.exists() {
            let _ = fs::remove_file(&tmp);
        } else {
            fs::rename(&tmp, &object).map_err(io_err("name", &object))?;
            mark(&object, &sha);
            self.adjust(len as i64);
        }
        Ok(sha)
    }

    /// Links the stored object `sha` as version `side` of `rel` at `tx` and
    /// returns the name; `None` when no such object is stored (any more: the
    /// last version naming it was dropped meanwhile, by a commit on another
    /// file, or by the size cap).
    pub fn link(
        &self,
        side: Side,
        rel: &str,
        tx: u64,
        sha: &str,
    ) -> Result<Option<String>, StoreError> {
        match self.link_object(side, rel, tx, sha) {
            Err(_) if !self.object(sha).exists() => Ok(None),
            linked => linked.map(Some),
        }
    }

    /// The name of version `side` of `rel` at transaction `tx`, relative to the state directory.
    pub(crate) fn name(side: Side, rel: &str, tx: u64) -> String {
        format!("{}/{}/{tx}", side.dir(), safe_rel(rel))
    }

    /// Keeps `bytes` as version `side` of `rel` at `tx`, durably; returns the name.
    #[cfg(test)]
    pub(crate) fn keep(
        &self,
        side: Side,
        rel: &str,
        tx: u64,
        bytes: &[u8],
    ) -> Result<String, StoreError> {
        self.keep_with(side, rel, tx, bytes, true)
    }

    /// `keep` of `bytes` whose SHA-256, if given, is `sha` (computed by editfs
    /// from these bytes: an object is named by it).
    pub(crate) fn keep_hashed(
        &self,
        side: Side,
        rel: &str,
        tx: u64,
        bytes: &[u8],
        sha: Option<&str>,
    ) -> Result<String, StoreError> {
        let sha = sha.map_or_else(|| sha256_hex(bytes), str::to_owned);
        let put = || self.put_hashed(bytes, sha.clone(), true);
        Ok(self.stored_and_linked(&sha, put, (side, rel, tx))?.0)
    }

    /// Keeps `bytes` as version `side` of `rel` at `tx`, synced if `sync`; returns
    /// the name. A version already under that name is replaced: it can only be a
    /// leftover of an id a machine crash handed out again.
    pub fn keep_with(
        &self,
        side: Side,
        rel: &str,
        tx: u64,
        bytes: &[u8],
        sync: bool,
    ) -> Result<String, StoreError> {
        let sha = sha256_hex(bytes);
        let put = || self.put_hashed(bytes, sha.clone(), sync);
        Ok(self.stored_and_linked(&sha, put, (side, rel, tx))?.0)
    }

    /// Links the stored object `sha` as version `side` of `rel` at `tx`, the
    /// object known to be there (it may go meanwhile: see `stored_and_linked`).
    pub(super) fn link_object(
        &self,
        side: Side,
        rel: &str,
        tx: u64,
        sha: &str,
    ) -> Result<String, StoreError> {
        let name = Objects::name(side, rel, tx);
        let link = self.state.join(&name);
        let object = self.object(sha);
        // The file's directory of versions exists but for its first one.
        let linked = match fs::hard_link(&object, &link) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && object.exists() => {
                if let Some(dir) = link.parent() {
                    fs::create_dir_all(dir).map_err(io_err("create", dir))?;
                }
                fs::hard_link(&object, &link)
            }
            other => other,
        };
        match linked {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let ino = |p: &Path| fs::metadata(p).map(|m| m.ino()).ok();
                if ino(&object) == ino(&link) {
                    return Ok(name);
                }
                self.drop_version(side, rel, tx);
                fs::hard_link(&object, &link)
            }
            other => other,
        }
        .map_err(io_err("link", &link))?;
        self.added(side, rel);
        Ok(name)
    }

    /// Keeps the regular file `name` in `dir` as version `side` of `rel` at `tx`
    /// and returns its bytes. When the content is new to the store, the file has no
    /// other name and the store is on its file system, its inode itself becomes the
    /// object (a hard link: nothing is copied), so keeping a file about to be
    /// removed is cheap; otherwise its bytes are copied. A file still `open`
    /// somewhere is copied too: whoever holds it can still write to it, and a kept
    /// version never changes.
    pub(crate) fn keep_file(
        &self,
        side: Side,
        rel: &str,
        tx: u64,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        open: bool,
    ) -> Result<Vec<u8>, StoreError> {
        let at = Path::new(rel);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(dir, name, flags, Mode::empty())
            .map_err(|e| io_err("open", at)(e.into()))?;
        let mut file = File::from(fd);
        let meta = file.metadata().map_err(io_err("stat", at))?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes).map_err(io_err("read", at))?;
        let sha = sha256_hex(&bytes);
        let object = self.object(&sha);
        if !open && meta.is_file() && meta.nlink() == 1 && !object.exists() {
            let objects = self.state.join("objects");
            fs::create_dir_all(&objects).map_err(io_err("create", &objects))?;
            match rustix::fs::linkat(dir, name, rustix::fs::CWD, &object, AtFlags::empty()) {
                Ok(()) => {
                    // Objects are read-only; the file had no other name or open descriptor to notice.
                    let _ = rustix::fs::fchmod(&file, Mode::from(0o444));
                    mark(&object, &sha);
                    self.adjust(bytes.len() as i64);
                }
                Err(e) => log::debug!("{rel}: not linked into the store ({e}): copied"),
            }
        }
        self.keep_with(side, rel, tx, &bytes, false)?;
        Ok(bytes)
    }

    /// Stores `bytes`, the content of the file `name` in `dir` (open as
    /// `file`) hashing to `sha`, unless the store has them. When `adopt` (the
    /// file has no other name and nobody holds it open) its inode itself
    /// becomes the object: a link, nothing copied.
    pub(super) fn keep_moved(
        &self,
        (dir, name, file): (BorrowedFd<'_>, &OsStr, &File),
        bytes: &[u8],
        sha: &str,
        adopt: bool,
    ) -> Result<(), StoreError> {
        let object = self.object(sha);
        if object.exists() {
            return Ok(());
        }
        if adopt {
            match rustix::fs::linkat(dir, name, rustix::fs::CWD, &object, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {
                    // Objects are read-only; nobody else holds the file to notice.
                    let _ = rustix::fs::fchmod(file, Mode::from(0o444));
                    mark(&object, sha);
                    self.adjust(bytes.len() as i64);
                    return Ok(());
                }
                Err(e) => log::debug!("{}: not linked into the store ({e}): copied", sha),
            }
        }
        atomic::write_new(&object, bytes, 0o444)?;
        self.adjust(bytes.len() as i64);
        Ok(())
    }

    /// The bytes of version `side` of `rel` at `tx`, if kept.
    pub fn read(&self, side: Side, rel: &str, tx: u64) -> Option<Vec<u8>> {
        fs::read(self.state.join(Objects::name(side, rel, tx))).ok()
    }

    /// Transactions that kept a version `side` of `rel`, oldest first.
    pub fn txs(&self, side: Side, rel: &str) -> Vec<u64> {
        let dir = self.state.join(side.dir()).join(safe_rel(rel));
        let mut txs: Vec<u64> = fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        txs.sort_unstable();
        txs
    }

    /// Links the stored object `sha` as the pre-image of `rel` removed by
    /// `tx`, then keeps to `retention`. Only the pre-images of `rel` can have
    /// grown past the count, and only when their directory was there before:
    /// a removal in a tree with no history pays no listing.
    pub(super) fn link_removed(
        &self,
        rel: &str,
        tx: u64,
        sha: &str,
        retention: Retention,
    ) -> Result<(), StoreError> {
        let link = self.state.join(Objects::name(Side::Pre, rel, tx));
        let object = self.object(sha);
        match fs::hard_link(&object, &link) {
            Ok(()) => {
                self.added(Side::Pre, rel);
                self.prune_side(Side::Pre, rel, retention.keep);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = link.parent() {
                    fs::create_dir_all(dir).map_err(io_err("create", dir))?;
                }
                fs::hard_link(&object, &link).map_err(io_err("link", &link))?;
                self.added(Side::Pre, rel);
            }
            Err(_) => {
                self.link_object(Side::Pre, rel, tx, sha)?;
                self.prune_side(Side::Pre, rel, retention.keep);
            }
        }
        self.cap(retention.cap);
        Ok(())
    }
}

/// Extended attribute an object carries its own name in: the hash of its
/// bytes, so dropping its last version finds it without reading them.
const HASH_ATTR: &std::ffi::CStr = c"user.editfs.sha256";

/// Writes `sha`, the hash of the object at `path`, into its `HASH_ATTR`. A file
/// system without user attributes keeps none, nor does a read-only object
/// for a daemon that is not root; `hash_of` then hashes.
fn mark(path: &Path, sha: &str) {
    let _ = rustix::fs::setxattr(
        path,
        HASH_ATTR,
        sha.as_bytes(),
        rustix::fs::XattrFlags::empty(),
    );
}

/// The hash of the bytes of the kept version at `link`: its object's name. The
/// attribute `mark` wrote is taken when it has the form of one, and the caller
/// checks that the object it names is this very file.
fn hash_of(link: &Path) -> Option<String> {
    let mut buf = [0u8; 64];
    if let Ok(64) = rustix::fs::getxattr(link, HASH_ATTR, &mut buf[..])
        && buf
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return String::from_utf8(buf.to_vec()).ok();
    }
    fs::read(link).ok().map(|b| sha256_hex(&b))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// Kept versions alone, in a temporary state directory that lives as
    /// long as its first half.
    fn kept() -> (tempfile::TempDir, Objects) {
        let tmp = tempfile::tempdir().unwrap();
        let objects = Objects::new(tmp.path());
        (tmp, objects)
    }

    #[test]
    fn identical_versions_are_stored_once() {
        let (tmp, o) = kept();
        o.keep(Side::Pre, "a.txt", 1, b"same").unwrap();
        o.keep(Side::Pre, "b/c.txt", 2, b"same").unwrap();
        assert_eq!(fs::read_dir(tmp.path().join("objects")).unwrap().count(), 1);
        assert_eq!(o.read(Side::Pre, "b/c.txt", 2).unwrap(), b"same");
        assert_eq!(o.txs(Side::Pre, "a.txt"), [1]);
    }

    #[test]
    fn a_version_kept_again_under_its_name_is_replaced() {
        let (tmp, o) = kept();
        o.keep(Side::Pre, "a", 1, b"stale").unwrap();
        o.keep(Side::Pre, "a", 1, b"stale").unwrap();
        o.keep_with(Side::Pre, "a", 1, b"fresh", false).unwrap();
        assert_eq!(o.read(Side::Pre, "a", 1).unwrap(), b"fresh");
        assert_eq!(fs::read_dir(tmp.path().join("objects")).unwrap().count(), 1);
    }

    #[test]
    fn versions_kept_and_dropped_after_a_prune_are_pruned_in_turn() {
        let (_tmp, o) = kept();
        let keep = |tx: u64| o.keep(Side::Post, "a", tx, &tx.to_le_bytes()).unwrap();
        (1..=3).for_each(|tx| drop(keep(tx)));
        o.prune("a", 3);
        o.forget("a", 3);
        (4..=6).for_each(|tx| drop(keep(tx)));
        o.prune("a", 3);
        assert_eq!(o.txs(Side::Post, "a"), [4, 5, 6]);
        keep(7);
        o.prune("a", 3);
        assert_eq!(o.txs(Side::Post, "a"), [5, 6, 7]);
    }

    #[test]
    fn prune_keeps_the_newest_and_frees_unlinked_objects() {
        let (tmp, o) = kept();
        for tx in 1..=5 {
            o.keep(Side::Pre, "a", tx, format!("v{tx}").as_bytes())
                .unwrap();
        }
        o.prune("a", 2);
        assert_eq!(o.txs(Side::Pre, "a"), [4, 5]);
        assert_eq!(fs::read_dir(tmp.path().join("objects")).unwrap().count(), 2);
    }

    #[test]
    fn an_object_stored_unsynced_is_synced_once_a_version_needs_it_durable() {
        let (_tmp, o) = kept();
        let sha = o.put(b"a direct write's pre-image", false).unwrap();
        let ino = fs::metadata(o.object(&sha)).unwrap().ino();
        assert!(!o.known_durable(&sha, ino));
        o.keep(Side::Post, "f", 1, b"a direct write's pre-image")
            .unwrap();
        assert!(o.known_durable(&sha, ino));
        o.forget("f", 1);
        assert!(!o.known_durable(&sha, ino), "gone with the object");
    }

    #[test]
    fn an_object_a_crash_cut_short_is_stored_again_when_a_version_needs_it() {
        let (_tmp, o) = kept();
        let sha = o.put(b"stored unsynced", false).unwrap();
        let object = o.object(&sha);
        fs::set_permissions(&object, fs::Permissions::from_mode(0o644)).unwrap();
        fs::OpenOptions::new()
            .write(true)
            .open(&object)
            .unwrap()
            .set_len(3)
            .unwrap();
        o.keep(Side::Post, "f", 1, b"stored unsynced").unwrap();
        assert_eq!(o.content(&sha).as_deref(), Some(&b"stored unsynced"[..]));
    }

    #[test]
    fn the_size_cap_drops_the_oldest_first() {
        let (_tmp, o) = kept();
        for tx in 1..=4 {
            o.keep(Side::Pre, &format!("f{tx}"), tx, &[tx as u8; 100])
                .unwrap();
        }
        o.cap(250);
        assert!(o.txs(Side::Pre, "f1").is_empty() && o.txs(Side::Pre, "f2").is_empty());
        assert_eq!(o.txs(Side::Pre, "f4"), [4]);
    }

    #[test]
    fn an_object_whose_hash_attribute_lies_is_not_removed_for_another() {
        let (tmp, o) = kept();
        o.keep(Side::Pre, "a", 1, b"kept").unwrap();
        o.keep(Side::Pre, "b", 2, b"other").unwrap();
        let other = sha256_hex(b"other");
        let link = tmp.path().join(Objects::name(Side::Pre, "a", 1));
        let flags = rustix::fs::XattrFlags::empty();
        if rustix::fs::setxattr(&link, HASH_ATTR, other.as_bytes(), flags).is_err() {
            eprintln!("this file system has no user xattrs; skipping");
            return;
        }
        o.prune("a", 0);
        o.reaper().drain();
        assert_eq!(o.read(Side::Pre, "b", 2).unwrap(), b"other");
        assert!(o.object(&other).exists());
    }

    #[test]
    fn a_dropped_version_frees_its_object_by_the_name_it_carries() {
        let (_tmp, o) = kept();
        o.keep(Side::Pre, "a", 1, b"v1").unwrap();
        o.keep(Side::Pre, "a", 2, b"v2").unwrap();
        o.prune("a", 1);
        o.reaper().drain();
        assert!(!o.object(&sha256_hex(b"v1")).exists());
        assert!(o.object(&sha256_hex(b"v2")).exists());
    }

    #[test]
    fn a_file_at_its_keep_is_pruned_oldest_first_commit_after_commit() {
        let (_tmp, o) = kept();
        for tx in 1..=40 {
            o.keep(Side::Post, "a", tx, &tx.to_le_bytes()).unwrap();
            o.prune("a", 3);
            let first = tx.saturating_sub(2).max(1);
            assert_eq!(o.txs(Side::Post, "a"), (first..=tx).collect::<Vec<_>>());
        }
        // Dropped meanwhile by something else: pruning goes on all the same.
        o.forget("a", 39);
        o.keep(Side::Post, "a", 41, b"41").unwrap();
        o.keep(Side::Post, "a", 42, b"42").unwrap();
        o.prune("a", 3);
        assert_eq!(o.txs(Side::Post, "a"), [40, 41, 42]);
    }

    #[test]
    fn names_cannot_escape() {
        assert_eq!(safe_rel("../../etc/passwd"), "etc/passwd");
        assert_eq!(safe_rel("/abs/x"), "abs/x");
        assert_eq!(safe_rel(".."), "_");
    }
}
