//! Durable, all-or-nothing replacement of a file's bytes.
//!
//! Files are named by a directory descriptor and a name in it, never by a path
//! walked again, so a directory swapped for a symlink mid-way cannot redirect a
//! write outside the project; the final name is never followed either.
//!
//! The new bytes go to a temporary file that takes the target's mode, owner and
//! extended attributes (less those a native write takes away), is synced, and is renamed over the target; then the
//! directory is synced so the rename itself survives a crash. A reader sees the
//! old file or the new one, never a mix. The temporary file lives in the state
//! directory when that is on the same file system, so a crash leaves nothing
//! behind in the project; otherwise it sits next to the target under a name
//! starting with `.editfs-tmp-`. Which of these steps are made as the user a
//! transaction is for, and which as the daemon, `caller` says.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags};

use super::caller::{self, Caller};
use super::logline::Access;
use super::{StoreError, io_err};

/// Prefix of temporary files, so recovery and people can recognise them.
pub const TMP_PREFIX: &str = ".editfs-tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh name for a temporary file.
pub fn tmp_name() -> OsString {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{TMP_PREFIX}{}-{n}", std::process::id()).into()
}

fn sys<'n>(
    action: &'static str,
    name: &'n OsStr,
) -> impl FnOnce(rustix::io::Errno) -> StoreError + 'n {
    move |e| io_err(action, Path::new(name))(e.into())
}

/// Opens a directory for `*at` calls.
pub fn open_dir(path: &Path) -> Result<OwnedFd, StoreError> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("open the directory", path)(e.into()))
}

/// Opens `name` in `dir` for reading, without following a symlink; `None` if it does not exist.
pub fn open_existing(dir: BorrowedFd<'_>, name: &OsStr) -> Result<Option<File>, StoreError> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(rustix::io::Errno::LOOP) => Err(StoreError::Symlink {
            name: name.to_owned(),
        }),
        Err(e) => Err(sys("open", name)(e)),
    }
}

/// Replaces `name` in `dir` with `bytes`, atomically and durably, for `by`
/// (see `caller`: `None` is the daemon for itself). `old` is the file being
/// replaced, opened by `open_existing`, or, with `moved`, the file whose mode,
/// owner and attributes a file new at `name` takes; its metadata is kept
/// (less its set-id bits when `by` would clear them on a native write).
pub fn replace(
    (dir, name): (BorrowedFd<'_>, &OsStr),
    bytes: &[u8],
    (old, moved): (Option<&File>, bool),
    (tmp_dir, by): (Option<BorrowedFd<'_>>, Option<&Caller>),
) -> Result<(), StoreError> {
    let replaces = old.filter(|_| !moved);
    let links = replaces
        .map(rustix::fs::fstat)
        .transpose()
        .map_err(sys("stat", name))?
        .map_or(1, |m| m.st_nlink);
    if let Some(old) = replaces.filter(|_| links > 1) {
        // Renaming would cut the other names off from the new content.
        log::info!(
            "{} has {links} links: writing in place to keep them",
            name.to_string_lossy()
        );
        let writable = caller::open_for_writing(old, by, name)?;
        return caller::write_in_place(&writable, bytes, by, name);
    }
    let base = match tmp_dir {
        Some(t) if same_fs(t, dir) => t,
        _ => dir,
    };
    let tmp = tmp_name();
    let result = write_tmp(base, &tmp, name, bytes, (old, Writer::of(by), None)).and_then(|file| {
        file.sync_all()
            .map_err(|e| io_err("sync", Path::new(&tmp))(e))?;
        caller::put_in_place((base, &tmp), (dir, name), replaces)
    });
    if !matches!(result, Ok(true)) {
        let _ = rustix::fs::unlinkat(base, &tmp, AtFlags::empty());
    }
    result?;
    rustix::fs::fsync(dir).map_err(sys("sync the directory of", name))
}

/// Whether two open directories are on one file system (a rename can go between them).
pub fn same_fs(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    matches!((rustix::fs::fstat(a), rustix::fs::fstat(b)), (Ok(x), Ok(y)) if x.st_dev == y.st_dev)
}

/// Who writes a new version, as far as its set-id bits go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// The writer holds CAP_FSETID (root, or editfs for itself): the bits stay.
    KeepsSetId,
    /// Anyone else: as the kernel does on a write, set-user-ID goes, and
    /// set-group-ID too where the group may execute the file.
    ClearsSetId,
}

impl Writer {
    /// The writer a commit for `by` is (`None`: the daemon for itself).
    pub fn of(by: Option<&Caller>) -> Writer {
        match by {
            Some(c) if !c.fsetid => Writer::ClearsSetId,
            _ => Writer::KeepsSetId,
        }
    }

    /// `mode` after a write by this writer.
    fn mode_after(self, mode: u32) -> u32 {
        match self {
            Writer::KeepsSetId => mode,
            Writer::ClearsSetId if mode & 0o010 != 0 => mode & !0o6000,
            Writer::ClearsSetId => mode & !0o4000,
        }
    }
}

/// Writes `bytes` to a new temporary file `tmp` in `base`, with the mode, owner and
/// extended attributes of `old` (the file it will replace), or, when there is
/// none, those of `fresh`, and returns it unsynced: the caller syncs it
/// (`sync_all`, for its mode and owner too).
pub fn write_tmp(
    base: BorrowedFd<'_>,
    tmp: &OsStr,
    name: &OsStr,
    bytes: &[u8],
    (old, writer, fresh): (Option<&File>, Writer, Option<Access>),
) -> Result<File, StoreError> {
    let meta = old
        .map(rustix::fs::fstat)
        .transpose()
        .map_err(sys("stat", name))?
        .map(|mut m| {
            m.st_mode = writer.mode_after(m.st_mode);
            m
        });
    let fresh = fresh.filter(|_| old.is_none());
    // A fresh file with an owner of its own is its creator's alone until it has it.
    let mode = match (&meta, fresh) {
        (Some(m), _) => m.st_mode & 0o7777,
        (None, Some(_)) => 0o600,
        (None, None) => 0o644,
    };
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(base, tmp, flags, Mode::from_raw_mode(mode))
        .map_err(sys("create a temporary file for", name))?;
    let mut file = File::from(fd);
    file.write_all(bytes)
        .map_err(|e| io_err("write", Path::new(tmp))(e))?;
    if let (Some(old), Some(meta)) = (old, meta.as_ref()) {
        keep_metadata(&file, old, meta, name)?;
    }
    if let Some(access) = fresh {
        give_access(&file, access, writer, name)?;
    }
    Ok(file)
}

/// Gives a new file the mode and owner `access` (a removed file's, brought back),
/// less the set-id bits a write by `writer` clears. An owner the process may not
/// give (a daemon that is not root) stays its own, with `access`'s mode.
fn give_access(new: &File, access: Access, writer: Writer, name: &OsStr) -> Result<(), StoreError> {
    let mode = writer.mode_after(access.mode) & 0o7777;
    own(new, (access.uid, access.gid), mode, name)
}

/// Gives the new file `owner` (where the process may: a daemon that is not
/// root keeps its own), then `mode`: after the chown, which clears set-id bits.
fn own(new: &File, owner: (u32, u32), mode: u32, name: &OsStr) -> Result<(), StoreError> {
    let mine = rustix::fs::fstat(new).map_err(sys("stat", name))?;
    if (mine.st_uid, mine.st_gid) != owner {
        let (uid, gid) = (
            rustix::fs::Uid::from_raw(owner.0),
            rustix::fs::Gid::from_raw(owner.1),
        );
        if let Err(e) = rustix::fs::fchown(new, Some(uid), Some(gid)) {
            log::warn!("cannot give {} its owner: {e}", name.to_string_lossy());
        }
    }
    rustix::fs::fchmod(new, Mode::from_raw_mode(mode)).map_err(sys("set the mode of", name))
}

/// Syncs a directory, so names created or renamed in it survive a crash.
pub fn sync_dir(path: &Path) -> Result<(), StoreError> {
    let fd = open_dir(path)?;
    rustix::fs::fsync(&fd).map_err(|e| io_err("sync", path)(e.into()))
}

/// Extended attributes that vouch for the old file's bytes, not for the file:
/// the kernel takes a file capability away on any write, whoever writes
/// (killpriv), and an IMA hash or signature, or an EVM seal over the
/// attributes, names content the new file does not have. A new version never
/// carries them, as a native write would not.
const BOUND_TO_CONTENT: [&[u8]; 3] = [b"security.capability", b"security.ima", b"security.evm"];

/// Gives the new file the old one's mode, owner and extended attributes, less
/// those `BOUND_TO_CONTENT`.
fn keep_metadata(
    new: &File,
    old: &File,
    meta: &rustix::fs::Stat,
    name: &OsStr,
) -> Result<(), StoreError> {
    own(new, (meta.st_uid, meta.st_gid), meta.st_mode & 0o7777, name)?;
    let kept = xattr_names(old.as_fd())
        .into_iter()
        .filter(|a| !BOUND_TO_CONTENT.contains(&a.as_bytes()));
    for attr in kept {
        match xattr_value(old.as_fd(), &attr) {
            Some(value) => {
                if let Err(e) = rustix::fs::fsetxattr(
                    new,
                    attr.as_bytes(),
                    &value,
                    rustix::fs::XattrFlags::empty(),
                ) {
                    log::warn!(
                        "cannot keep attribute {attr:?} of {}: {e}",
                        name.to_string_lossy()
                    );
                }
            }
            None => log::warn!(
                "cannot read attribute {attr:?} of {}",
                name.to_string_lossy()
            ),
        }
    }
    Ok(())
}

/// Names of the extended attributes of `fd` (none when the file system has none).
pub fn xattr_names(fd: BorrowedFd<'_>) -> Vec<std::ffi::CString> {
    let size = match rustix::fs::flistxattr_query(fd) {
        Ok(size) if size > 0 => size,
        _ => return Vec::new(),
    };
    let mut buf = vec![0u8; size];
    match rustix::fs::flistxattr(fd, &mut buf[..]) {
        Ok(n) => buf[..n]
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .filter_map(|s| std::ffi::CString::new(s).ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The value of extended attribute `name` of `fd`.
pub fn xattr_value(fd: BorrowedFd<'_>, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let size = rustix::fs::fgetxattr_query(fd, name).ok()?;
    let mut buf = vec![0u8; size];
    let n = rustix::fs::fgetxattr(fd, name, &mut buf[..]).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Gives `file` the permission bits of `mode`, unless it has them already:
/// for recovery alone, which finishes an in-place write by name (see
/// `journal::recovery::install`).
pub fn set_mode(file: &File, mode: u32, name: &OsStr) -> Result<(), StoreError> {
    let now = rustix::fs::fstat(file).map_err(sys("stat", name))?.st_mode & 0o7777;
    if now == mode & 0o7777 {
        return Ok(());
    }
    rustix::fs::fchmod(file, Mode::from_raw_mode(mode & 0o7777))
        .map_err(sys("set the mode of", name))
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes a new file whole or not at all (temp file, rename), unsynced (see
/// the store's commit.rs): it survives a crash of the process but maybe not
/// of the machine; whoever needs it durable syncs the file handed back.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<File, StoreError> {
    let dir_fd = open_dir(parent_of(path))?;
    let name = path
        .file_name()
        .ok_or_else(|| io_err("name", path)(io::ErrorKind::InvalidInput.into()))?;
    let tmp = tmp_name();
    let result = (|| {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir_fd, &tmp, flags, Mode::from_raw_mode(mode))
            .map_err(sys("create", &tmp))?;
        let mut file = File::from(fd);
        file.write_all(bytes)
            .map_err(|e| io_err("write", path)(e))?;
        rustix::fs::renameat(&dir_fd, &tmp, &dir_fd, name)
            .map_err(sys("rename into place", name))
            .map(|()| file)
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&dir_fd, &tmp, AtFlags::empty());
    }
    result
}

/// Removes the temporary files a crash left in `dir`, those of a process
/// `dead` says is gone (a name that tells no process counts as one);
/// returns how many.
pub fn sweep(dir: &Path, dead: impl Fn(u32) -> bool) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix(TMP_PREFIX)
                .is_some_and(|rest| maker(rest).is_none_or(&dead))
        })
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

/// The process that made a temporary file, from what its name holds after
/// `TMP_PREFIX` (see `tmp_name`).
fn maker(rest: &str) -> Option<u32> {
    rest.split_once('-')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    fn replace_path(path: &Path, bytes: &[u8], tmp: Option<&Path>) {
        let dir = open_dir(path.parent().unwrap()).unwrap();
        let name = path.file_name().unwrap();
        let old = open_existing(dir.as_fd(), name).unwrap();
        let tmp = tmp.map(|t| open_dir(t).unwrap());
        replace(
            (dir.as_fd(), name),
            bytes,
            (old.as_ref(), false),
            (tmp.as_ref().map(|t| t.as_fd()), None),
        )
        .unwrap();
    }

    #[test]
    fn keeps_mode_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.sh");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o751)).unwrap();
        replace_path(&f, b"new", None);
        assert_eq!(fs::read(&f).unwrap(), b"new");
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o751);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_writer_without_fsetid_clears_set_id_bits_as_a_native_write_does() {
        assert_eq!(Writer::ClearsSetId.mode_after(0o104755), 0o100755);
        assert_eq!(Writer::ClearsSetId.mode_after(0o6775), 0o0775);
        // Set-group-ID without group execute marks mandatory locking: it stays.
        assert_eq!(Writer::ClearsSetId.mode_after(0o2664), 0o2664);
        assert_eq!(Writer::KeepsSetId.mode_after(0o6775), 0o6775);
    }

    #[test]
    fn keeps_extended_attributes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        fs::write(&f, "old").unwrap();
        let file = File::open(&f).unwrap();
        if rustix::fs::fsetxattr(
            &file,
            "user.editfs.test",
            b"v",
            rustix::fs::XattrFlags::empty(),
        )
        .is_err()
        {
            eprintln!("this file system has no user xattrs; skipping");
            return;
        }
        replace_path(&f, b"new", None);
        let file = File::open(&f).unwrap();
        assert_eq!(
            xattr_value(file.as_fd(), c"user.editfs.test").as_deref(),
            Some(&b"v"[..])
        );
    }

    #[test]
    fn hard_links_see_the_new_content() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::write(&a, "old").unwrap();
        fs::hard_link(&a, &b).unwrap();
        replace_path(&a, b"new", None);
        assert_eq!(fs::read(&b).unwrap(), b"new");
    }

    #[test]
    fn temp_file_goes_to_the_state_dir_on_the_same_fs() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        fs::create_dir(&state).unwrap();
        let f = dir.path().join("a");
        replace_path(&f, b"x", Some(&state));
        assert_eq!(fs::read(&f).unwrap(), b"x");
        assert_eq!(fs::read_dir(&state).unwrap().count(), 0);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("link")).unwrap();
        let d = open_dir(dir.path()).unwrap();
        assert!(matches!(
            open_existing(d.as_fd(), OsStr::new("link")),
            Err(StoreError::Symlink { .. })
        ));
    }

    #[test]
    fn sweep_removes_leftovers_of_dead_processes_only() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            &format!("{TMP_PREFIX}1-1"),
            &format!("{TMP_PREFIX}2-1"),
            "keep",
        ] {
            fs::write(dir.path().join(name), "").unwrap();
        }
        assert_eq!(sweep(dir.path(), |pid| pid == 1), 1);
        let mut left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, [format!("{TMP_PREFIX}2-1").as_str(), "keep"]);
    }
}
