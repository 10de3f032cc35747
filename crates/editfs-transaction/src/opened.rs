//! A transaction's files, opened as its caller: each resolved once beneath
//! the root (its directory walked with the caller's search rights, its last
//! component never followed), read within `--max-file-size`, and checked
//! again before the commit (`Opened::current`); and the directories a
//! transaction makes or removes for its files.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Access, AtFlags};

use super::{Caller, Root, Target, caller};
use crate::store::{StoreError, io_err, open_existing, parent_beneath_with};

/// Which file a name meant: a transaction on another file under that name is stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Meant {
    File { dev: u64, ino: u64 },
    Absent,
}

impl Meant {
    /// What `file` (`None`: no file) is.
    pub fn of(file: Option<&File>) -> io::Result<Meant> {
        match file {
            None => Ok(Meant::Absent),
            Some(f) => {
                let st = rustix::fs::fstat(f)?;
                Ok(Meant::File {
                    dev: st.st_dev,
                    ino: st.st_ino,
                })
            }
        }
    }
}

/// A file of a transaction, resolved once: its directory and the file itself
/// stay open from the reading to the install, so no second walk of its path
/// (which a directory swapped for a symlink meanwhile could redirect) happens,
/// and the pre-image, the report and the new version all concern this file.
pub struct Opened {
    pub dir: OwnedFd,
    pub file: Option<File>,
    pub bytes: Option<Vec<u8>>,
}

impl Opened {
    /// Whether `rel`, this file's name, still names it, with the bytes read:
    /// what was decided without the store's lock still holds under it.
    pub fn current(&self, rel: &str) -> bool {
        still_reads(
            self.dir.as_fd(),
            file_name(rel),
            (self.file.as_ref(), self.bytes.as_deref()),
        )
    }
}

/// Whether `name` in `dir` is still `file` (or still nothing, for `None`),
/// holding exactly `bytes`.
pub(super) fn still_reads(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    (file, bytes): (Option<&File>, Option<&[u8]>),
) -> bool {
    let now = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);
    match (file, now) {
        (None, Err(rustix::io::Errno::NOENT)) => true,
        (Some(file), Ok(st)) => {
            let same = Meant::of(Some(file)).is_ok_and(|m| {
                m == Meant::File {
                    dev: st.st_dev,
                    ino: st.st_ino,
                }
            });
            same && bytes.is_some_and(|b| unchanged_bytes(file, b))
        }
        _ => false,
    }
}

/// Whether `file` holds exactly `bytes`, read a piece at a time: the files
/// checked this way are the large ones (see `decided_with_lock`), and a copy
/// of the whole file beside its bytes and its new content would make an edit's
/// peak memory three times the file's size.
pub(super) fn unchanged_bytes(file: &File, bytes: &[u8]) -> bool {
    use std::os::unix::fs::FileExt;
    if file.metadata().map(|m| m.len()).ok() != Some(bytes.len() as u64) {
        return false;
    }
    let mut now = vec![0; COMPARED_AT_ONCE.min(bytes.len())];
    let mut at = 0;
    bytes.chunks(COMPARED_AT_ONCE).all(|want| {
        let now = &mut now[..want.len()];
        let same = file.read_exact_at(now, at).is_ok() && now == want;
        at += want.len() as u64;
        same
    })
}

/// Bytes `unchanged_bytes` reads and compares at a time.
const COMPARED_AT_ONCE: usize = 1 << 20;

/// Serializes the transactions of processes that keep no store on files of
/// `dir` (`editfs apply` with no state directory): with no store's lock, two
/// of them reading the same file at once would each write their own edit
/// over the other's. The file's directory is locked, not the file, which a
/// commit replaces; the file is read (again) once the lock is held. Without
/// the lock (a file system that has none), the transaction runs as before.
pub(super) fn lock_dir(dir: &OwnedFd) -> Option<OwnedFd> {
    use rustix::fs::{FlockOperation, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let own = rustix::fs::openat(dir, ".", flags, Mode::empty()).ok()?;
    match rustix::fs::flock(&own, FlockOperation::LockExclusive) {
        Ok(()) => Some(own),
        Err(e) => {
            log::warn!(
                "cannot lock the file's directory ({e}): concurrent edits are not serialized"
            );
            None
        }
    }
}

/// `lock_dir` for the directories of `rels` beneath `root`, each once, in one
/// order (by device and inode), so that two runs never wait for each other.
/// A directory that does not exist yet (the payload makes it) has no lock.
pub(crate) fn lock_dirs(root: Root<'_>, rels: &[String]) -> Vec<OwnedFd> {
    let mut dirs: Vec<((u64, u64), OwnedFd)> = rels
        .iter()
        .filter_map(|rel| crate::store::parent_beneath(root.fd, rel).ok())
        .filter_map(|d| {
            let st = rustix::fs::fstat(&d).ok()?;
            Some(((st.st_dev, st.st_ino), d))
        })
        .collect();
    dirs.sort_by_key(|(id, _)| *id);
    dirs.dedup_by_key(|(id, _)| *id);
    dirs.iter().filter_map(|(_, d)| lock_dir(d)).collect()
}

/// The last part of `rel`: the name of its file in its directory.
pub fn file_name(rel: &str) -> &OsStr {
    Path::new(rel).file_name().unwrap_or_default()
}

/// Opens the file of `target`, where the mount found it or beneath the root,
/// checked against the file its handle meant, and reads it into `buffer`.
pub(super) fn open_target(
    target: &Target<'_>,
    buffer: Vec<u8>,
    max: u64,
) -> Result<Opened, StoreError> {
    let caller = target.who.caller.as_ref();
    let dir = target_dir(target)?;
    let file = open_existing(dir.as_fd(), file_name(target.rel))?;
    let now = Meant::of(file.as_ref()).map_err(io_err("stat", Path::new(target.rel)))?;
    if target.meant.is_some_and(|meant| meant != now) {
        return Err(StoreError::Stale {
            path: target.rel.into(),
        });
    }
    checked(dir, file, target.rel, caller, (buffer, max))
}

/// The directory of `target`'s file: where the mount found it, or reached
/// from the root with the caller's search rights; either way one the caller
/// may search.
pub(super) fn target_dir(target: &Target<'_>) -> Result<OwnedFd, StoreError> {
    let caller = target.who.caller.as_ref();
    match target.dir {
        Some(dir) => {
            let dir = rustix::io::dup(dir)
                .map_err(|e| io_err("open the directory of", Path::new(target.rel))(e.into()))?;
            searchable(dir, target.rel, caller)
        }
        None => walk(target.root, target.rel, caller),
    }
}

/// `dir`, once `caller` may search it. A walk opens each directory with the
/// search right on the one above it, and the daemon opens the file in the
/// last: the kernel checks the caller's right to search that last directory
/// only when asked (a 0700 directory, or one an ACL shuts the caller out of,
/// would otherwise lend its files to anyone who can name them).
fn searchable(dir: OwnedFd, rel: &str, caller: Option<&Caller>) -> Result<OwnedFd, StoreError> {
    if let Some(c) = caller {
        c.may(dir.as_fd(), Access::EXEC_OK)
            .map_err(|source| StoreError::Denied {
                path: rel.into(),
                what: "reach its directory",
                source,
            })?;
    }
    Ok(dir)
}

/// The file `rel` beneath `root`, open with its directory, and its bytes (none
/// when it does not exist), for `caller` (see `open_in`). The walk to its
/// directory is made with the caller's credentials.
pub fn open(root: Root<'_>, rel: &str, caller: Option<&Caller>) -> Result<Opened, StoreError> {
    open_bounded(root, rel, caller, u64::MAX)
}

/// `open`, refusing a file over `max` bytes (`--max-file-size`) before reading it.
pub fn open_bounded(
    root: Root<'_>,
    rel: &str,
    caller: Option<&Caller>,
    max: u64,
) -> Result<Opened, StoreError> {
    let dir = walk(root, rel, caller)?;
    let file = open_existing(dir.as_fd(), file_name(rel))?;
    checked(dir, file, rel, caller, (Vec::new(), max))
}

/// The directory of `rel` beneath `root`, reached with `caller`'s search rights.
pub(super) fn walk(
    root: Root<'_>,
    rel: &str,
    caller: Option<&Caller>,
) -> Result<OwnedFd, StoreError> {
    let dir = parent_beneath_with(root.fd, rel, |walk| match caller {
        Some(c) => c.with(walk),
        None => Ok(walk()),
    })
    .map_err(|e| {
        let why = match e {
            rustix::io::Errno::XDEV => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the path leaves the project",
            ),
            rustix::io::Errno::PERM => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the path leads into the state directory (.editfs)",
            ),
            rustix::io::Errno::ACCESS => {
                return StoreError::Denied {
                    path: rel.into(),
                    what: "reach its directory",
                    source: e,
                };
            }
            other => other.into(),
        };
        io_err("open the directory of", Path::new(rel))(why)
    })?;
    searchable(dir, rel, caller)
}

/// The file `rel` in `dir`, its directory, open, and its bytes. The file must be
/// one `caller` may read and write natively, or, missing, one it may create.
pub fn open_in(dir: OwnedFd, rel: &str, caller: Option<&Caller>) -> Result<Opened, StoreError> {
    let file = open_existing(dir.as_fd(), file_name(rel))?;
    checked(dir, file, rel, caller, (Vec::new(), u64::MAX))
}

/// `open_in` once the file is open: checked against `caller` and refused
/// past `max` bytes, then read into `buffer` (emptied first: a buffer used
/// before can be handed in). The size refused is the apparent one, before a
/// byte is read: a sparse file of gigabytes is never read whole, nor written
/// back with its holes made data.
pub(super) fn checked(
    dir: OwnedFd,
    file: Option<File>,
    rel: &str,
    caller: Option<&Caller>,
    (buffer, max): (Vec<u8>, u64),
) -> Result<Opened, StoreError> {
    let denied = |what| {
        move |source| StoreError::Denied {
            path: rel.into(),
            what,
            source,
        }
    };
    let Some(mut file) = file else {
        if let Some(c) = caller {
            c.may(dir.as_fd(), Access::WRITE_OK | Access::EXEC_OK)
                .map_err(denied("create files in its directory"))?;
        }
        return Ok(Opened {
            dir,
            file: None,
            bytes: None,
        });
    };
    let meta = file.metadata().map_err(io_err("stat", Path::new(rel)))?;
    if !meta.is_file() {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
        return Err(io_err("edit", Path::new(rel))(e));
    }
    if let Some(c) = caller {
        c.may(file.as_fd(), Access::READ_OK | Access::WRITE_OK)
            .map_err(denied("read and write it"))?;
    }
    if meta.len() > max {
        return Err(StoreError::TooLarge {
            path: rel.into(),
            size: meta.len(),
            limit: max,
        });
    }
    let mut bytes = buffer;
    bytes.clear();
    bytes.reserve_exact(meta.len() as usize);
    (&mut file)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_err("read", Path::new(rel)))?;
    if bytes.len() as u64 > max {
        return Err(StoreError::TooLarge {
            path: rel.into(),
            size: bytes.len() as u64,
            limit: max,
        });
    }
    Ok(Opened {
        dir,
        file: Some(file),
        bytes: Some(bytes),
    })
}

/// Creates the missing directories of `rel` beneath `root`: those a removed tree
/// had (undo), or those a patch's new or moved file goes into. They are made by
/// `caller`, as it would make them natively. Returns those it made, outermost
/// first.
fn make_parents(
    root: Root<'_>,
    rel: &str,
    caller: Option<&Caller>,
) -> Result<Vec<String>, StoreError> {
    let mut made = Vec::new();
    let Some(parent) = Path::new(rel).parent() else {
        return Ok(made);
    };
    let mut sofar = std::path::PathBuf::new();
    for part in parent.components() {
        sofar.push(part);
        let name = sofar.to_string_lossy();
        let dir = walk(root, &name, caller)?;
        match caller::make_dir(dir.as_fd(), part.as_os_str(), caller) {
            Ok(()) => made.push(name.into_owned()),
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(io_err("create the directory", &sofar)(e.into())),
        }
    }
    Ok(made)
}

/// The directory a new file `rel` goes into, made if it is missing, checked as
/// `open` checks it, and the directories made for it (outermost first); a file
/// that appeared there since it was found missing makes the transaction stale.
pub(crate) fn new_file_dir(
    root: Root<'_>,
    rel: &str,
    caller: Option<&Caller>,
) -> Result<(OwnedFd, Vec<String>), StoreError> {
    let made = make_parents(root, rel, caller)?;
    let opened = open(root, rel, caller)?;
    if opened.file.is_some() {
        return Err(StoreError::Stale { path: rel.into() });
    }
    Ok((opened.dir, made))
}

/// Removes the directories `dirs` (outermost first) that a transaction made,
/// innermost first, as long as each is empty: what an undo of that transaction
/// leaves. Best effort: a directory something else filled since stays, and so
/// do the ones around it.
pub(crate) fn remove_made_dirs(root: Root<'_>, dirs: &[String], caller: Option<&Caller>) {
    for rel in dirs.iter().rev() {
        let Ok(parent) = walk(root, rel, caller) else {
            return;
        };
        let Some(name) = Path::new(rel).file_name() else {
            return;
        };
        if let Err(e) = caller::remove_dir(parent.as_fd(), name, caller) {
            log::debug!("kept the directory {rel} the undone transaction made: {e}");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_is_compared_piece_by_piece_to_its_last_byte() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("big");
        let bytes: Vec<u8> = (0..COMPARED_AT_ONCE * 2 + 3).map(|i| i as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        assert!(unchanged_bytes(&file, &bytes));
        for at in [0, COMPARED_AT_ONCE, bytes.len() - 1] {
            let mut other = bytes.clone();
            other[at] ^= 1;
            assert!(!unchanged_bytes(&file, &other), "a byte changed at {at}");
        }
        assert!(!unchanged_bytes(&file, &bytes[..bytes.len() - 1]));
    }
}
