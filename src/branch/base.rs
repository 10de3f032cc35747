//! The project as it was at a branch's base: which files existed then, and
//! their contents, read from SOURCE where the log says no transaction changed
//! them since, else from the version the store kept of them before the first
//! transaction that did (see docs/branches.md#how-a-branch-mount-is-built).
//!
//! What it answers never changes while the log vouches for the project: a
//! file the project changes later moves from SOURCE to its kept version,
//! whose content is the one SOURCE held. Each answer about a file is decided
//! and read under the project store's lock of that file, so no commit of the
//! project comes between the two.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::store::{Access, Keys, Side, Store, Tail, View};

/// How long an answer waits for the project's mounts to file the removals
/// they made (see `Base::at`).
const FILING_WAIT: Duration = Duration::from_secs(1);

/// What a path held at the base.
#[derive(Clone, Debug)]
pub enum At {
    /// Not there.
    Absent,
    /// A directory; its SOURCE status when it is still there.
    Dir(Option<rustix::fs::Stat>),
    /// A directory SOURCE no longer has, which held files changed since;
    /// `closed` when one of them was behind a directory not everyone could
    /// search then (which one is not recorded): it is shown as its owner's
    /// alone, not open to all.
    Removed { closed: bool },
    /// Unchanged since: SOURCE's file, link or other, as it is now.
    Source(rustix::fs::Stat),
    /// Changed since: the kept content, and whose it was then.
    Kept(Arc<Vec<u8>>, Then),
}

/// The owner, group and permission bits a version changed since the base is
/// shown with: those the file had at the base, narrowed to who could read it
/// then (`Access::bits_then`), so a secret the project scrubbed and opened
/// to all since stays its owner's in every branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Then {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Then {
    /// From the log's record of the file before the transaction that first
    /// changed it after the base; a line without one (written before the log
    /// kept it) shows it as SOURCE's owner's alone now, or root's.
    fn of(access: Option<&Access>, above: &[Access], now: Option<&rustix::fs::Stat>) -> Then {
        match (access, now) {
            (Some(a), _) => Then {
                mode: a.bits_then(above),
                uid: a.uid,
                gid: a.gid,
            },
            (None, Some(st)) => Then {
                mode: st.st_mode & 0o700,
                uid: st.st_uid,
                gid: st.st_gid,
            },
            (None, None) => Then {
                mode: 0o600,
                uid: 0,
                gid: 0,
            },
        }
    }
}

/// How the log says a path changed after the base: made since, or changed
/// first by this transaction, whose pre-image is the path at the base, which
/// it recorded as `access` behind the directories `above`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Since {
    tx: u64,
    created: bool,
    access: Option<Access>,
    above: Vec<Access>,
}

/// The log's changes after the base, kept up to date as the log grows.
#[derive(Default)]
struct Index {
    tail: Tail,
    since: BTreeMap<String, Since>,
}

/// SOURCE at a point of its history, read-only.
pub struct Base {
    root: OwnedFd,
    /// Paths relative to SOURCE that are never shown: the state directory.
    hidden: Vec<String>,
    store: Arc<Store>,
    view: View,
    point: u64,
    index: Mutex<Index>,
}

impl Base {
    /// SOURCE (opened as `root`) as it was right after transaction `point`
    /// of `store`, the path `hidden` (the state directory, if inside) left out.
    pub fn new(root: OwnedFd, hidden: Vec<String>, store: Arc<Store>, point: u64) -> Base {
        let view = View::new(store.dir());
        Base {
            root,
            hidden,
            store,
            view,
            point,
            index: Mutex::new(Index::default()),
        }
    }

    /// Reads the log's new lines into the index; the first transaction
    /// after the base to name a file is the one whose pre-image is the file
    /// at the base (lines may come a moment out of id order).
    fn refresh(&self) -> parking_lot::MutexGuard<'_, Index> {
        let mut index = self.index.lock();
        let Index { tail, since } = &mut *index;
        for e in tail.new_entries(&self.view) {
            if e.tx <= self.point || !e.changed() {
                continue;
            }
            for f in e.files.iter().filter(|f| f.touched()) {
                let new = Since {
                    tx: e.tx,
                    created: f.created,
                    access: f.access,
                    above: f.above.clone(),
                };
                match since.get_mut(&f.file) {
                    Some(s) if e.tx < s.tx => *s = new,
                    Some(_) => {}
                    None => {
                        since.insert(f.file.clone(), new);
                    }
                }
            }
        }
        index
    }

    /// Every path the log says changed after the base.
    pub fn changed(&self) -> std::collections::BTreeSet<String> {
        self.refresh().since.keys().cloned().collect()
    }

    fn hidden(&self, rel: &str) -> bool {
        self.hidden
            .iter()
            .any(|h| rel == h || rel.starts_with(&format!("{h}/")))
    }

    /// What `rel` held at the base; `Err` when its content then is no longer
    /// kept, or SOURCE cannot be read. A file SOURCE no longer has may be one
    /// a mount of the project removed and has yet to file, or filed between
    /// this look at the log and the one at SOURCE: it is asked again once no
    /// removal waits (outside the file's lock, which the filer takes).
    pub fn at(&self, rel: &str) -> Result<At, Errno> {
        let found = self.decide(rel)?;
        if !matches!(found, At::Absent) {
            return Ok(found);
        }
        self.view.wait_filed(FILING_WAIT);
        self.decide(rel)
    }

    fn decide(&self, rel: &str) -> Result<At, Errno> {
        if self.hidden(rel) {
            return Ok(At::Absent);
        }
        if rel.is_empty() {
            return Ok(At::Dir(self.stat(rel)?));
        }
        let _lock = self.store.lock(&Keys::new().path(rel)).map_err(|e| {
            log::error!("base view: {e}");
            Errno::IO
        })?;
        let index = self.refresh();
        match index.since.get(rel) {
            Some(Since { created: true, .. }) => Ok(At::Absent),
            Some(Since {
                tx, access, above, ..
            }) => match self.store.objects().read(Side::Pre, rel, *tx) {
                Some(bytes) => {
                    let then = Then::of(access.as_ref(), above, self.stat(rel)?.as_ref());
                    Ok(At::Kept(Arc::new(bytes), then))
                }
                None => {
                    log::error!(
                        "base view: {rel} as it was before transaction {tx} is no longer kept"
                    );
                    Err(Errno::IO)
                }
            },
            None => match self.stat(rel)? {
                Some(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                    Ok(At::Dir(Some(st)))
                }
                Some(st) => Ok(At::Source(st)),
                None => Ok(match self.removed_beneath(&index, rel) {
                    Some(closed) => At::Removed { closed },
                    None => At::Absent,
                }),
            },
        }
    }

    /// Whether a file beneath `dir` existed at the base and was changed
    /// since (`dir` then existed, whether SOURCE still has it or not), and
    /// if so, whether one of them was behind a directory not everyone could
    /// search then.
    fn removed_beneath(&self, index: &Index, dir: &str) -> Option<bool> {
        let prefix = format!("{dir}/");
        let mut then = index
            .since
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, s)| !s.created)
            .peekable();
        then.peek()?;
        Some(then.any(|(_, s)| !s.above.is_empty()))
    }

    /// SOURCE's status of `rel` now, not following a final link, `None`
    /// when it is not there.
    fn stat(&self, rel: &str) -> Result<Option<rustix::fs::Stat>, Errno> {
        match self.open(rel, OFlags::PATH) {
            Ok(fd) => rustix::fs::fstat(&fd).map(Some),
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP | Errno::XDEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens `rel` beneath SOURCE, no link followed on the way.
    fn open(&self, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
        let rel = if rel.is_empty() { "." } else { rel };
        rustix::fs::openat2(
            self.root.as_fd(),
            rel,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
    }

    /// Up to `size` bytes of `rel` from `offset`, as it was at the base. A
    /// file SOURCE no longer has may be one a mount of the project removed
    /// and has yet to file (the kernel may hold what a lookup found before
    /// the removal): it is read again once no removal waits, outside the
    /// file's lock, which the filer takes.
    pub fn read(&self, rel: &str, offset: u64, size: usize) -> Result<Vec<u8>, Errno> {
        match self.read_once(rel, offset, size) {
            Err(Errno::NOENT) if !self.hidden(rel) => {
                self.view.wait_filed(FILING_WAIT);
                self.read_once(rel, offset, size)
            }
            read => read,
        }
    }

    fn read_once(&self, rel: &str, offset: u64, size: usize) -> Result<Vec<u8>, Errno> {
        if self.hidden(rel) {
            return Err(Errno::NOENT);
        }
        let _lock = self.store.lock(&Keys::new().path(rel)).map_err(|e| {
            log::error!("base view: {e}");
            Errno::IO
        })?;
        let since = self.refresh().since.get(rel).map(|s| (s.tx, s.created));
        match since {
            Some((_, true)) => Err(Errno::NOENT),
            Some((tx, false)) => {
                let bytes = self
                    .store
                    .objects()
                    .read(Side::Pre, rel, tx)
                    .ok_or(Errno::IO)?;
                let start = (offset as usize).min(bytes.len());
                let end = start.saturating_add(size).min(bytes.len());
                Ok(bytes[start..end].to_vec())
            }
            None => {
                use std::io::{Read, Seek, SeekFrom};
                // Not blocking: a file another user turned into a fifo since
                // it was looked at would hold the reader for good.
                let mut file = File::from(self.open(rel, OFlags::RDONLY | OFlags::NONBLOCK)?);
                if !file.metadata().is_ok_and(|m| m.is_file()) {
                    return Err(Errno::IO);
                }
                let mut buf = Vec::new();
                file.seek(SeekFrom::Start(offset))
                    .and_then(|_| file.take(size as u64).read_to_end(&mut buf))
                    .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
                Ok(buf)
            }
        }
    }

    /// The whole content of `rel` at the base, `None` when it was no
    /// regular file then.
    pub fn content(&self, rel: &str) -> Result<Option<Vec<u8>>, Errno> {
        match self.at(rel)? {
            At::Kept(bytes, _) => Ok(Some(bytes.to_vec())),
            At::Source(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                // Read under the lock again: the size may be a stale one.
                self.read(rel, 0, usize::MAX).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The POSIX ACL `name` (`system.posix_acl_access` or `_default`) of
    /// `rel` at the base: SOURCE's, for a file or directory unchanged since;
    /// none for a version changed since, whose bits already say who could
    /// read it then (`Then`). Served so that overlayfs above checks it: an
    /// ACL that shuts a user out of SOURCE shuts it out of every branch.
    pub fn acl(&self, rel: &str, name: &std::ffi::CStr) -> Result<Option<Vec<u8>>, Errno> {
        let st = match self.at(rel)? {
            At::Source(st) | At::Dir(Some(st)) => st,
            At::Absent => return Err(Errno::NOENT),
            At::Dir(None) | At::Removed { .. } | At::Kept(..) => return Ok(None),
        };
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            return Ok(None);
        }
        let fd = self.open(rel, OFlags::PATH)?;
        // `fgetxattr` takes no `O_PATH` descriptor; its link in /proc
        // reaches exactly that file.
        let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        let mut buf = vec![0u8; 64 << 10];
        match rustix::fs::getxattr(link.as_str(), name, &mut buf[..]) {
            Ok(n) => {
                buf.truncate(n);
                Ok(Some(buf))
            }
            Err(Errno::NODATA | Errno::NOTSUP) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Where the link `rel` leads: links are read from SOURCE only.
    pub fn link(&self, rel: &str) -> Result<Vec<u8>, Errno> {
        match self.at(rel)? {
            At::Source(_) => {
                let fd = self.open(rel, OFlags::PATH)?;
                Ok(rustix::fs::readlinkat(&fd, "", Vec::new())?.into_bytes())
            }
            _ => Err(Errno::INVAL),
        }
    }

    /// The names in directory `dir` at the base, each with whether it is a
    /// directory: SOURCE's, less those made since, plus those removed since.
    pub fn list(&self, dir: &str) -> Result<Vec<(String, FileType)>, Errno> {
        self.view.wait_filed(FILING_WAIT);
        let mut names: BTreeMap<String, FileType> = BTreeMap::new();
        if let Ok(fd) = self.open(dir, OFlags::RDONLY | OFlags::DIRECTORY) {
            let mut read = rustix::fs::Dir::new(fd)?;
            while let Some(entry) = read.read() {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name != "." && name != ".." {
                    names.insert(name, entry.file_type());
                }
            }
        }
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let index = self.refresh();
        for (rel, since) in index
            .since
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
        {
            let rest = &rel[prefix.len()..];
            match (rest.split_once('/'), since.created) {
                (None, true) => {
                    names.remove(rest);
                }
                (None, false) => {
                    names
                        .entry(rest.to_owned())
                        .or_insert(FileType::RegularFile);
                }
                (Some((sub, _)), false) => {
                    names.entry(sub.to_owned()).or_insert(FileType::Directory);
                }
                (Some(_), true) => {}
            }
        }
        drop(index);
        Ok(names
            .into_iter()
            .filter(|(name, _)| !self.hidden(&format!("{prefix}{name}")))
            .collect())
    }
}

/// `path`, a directory inside `root` or not, relative to it; `None` outside.
pub fn inside(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    rel.to_str().map(str::to_owned)
}
