//! Acting for a caller: the one place where editfs changes a project on a
//! user's behalf, and the rules every transaction (an edit, a multi-file
//! payload, a patch's delete and move, an undo) follows to do it.
//!
//! A daemon run by root acts for users who are not; the kernel, not editfs,
//! decides what each of them may do. The rules:
//!
//! 1. **The caller's credentials, on the thread, around the syscall.** Linux
//!    keeps credentials per thread: the caller's uid, gid and groups are put
//!    on the committing thread for exactly the call made for it, and the
//!    daemon's are put back at once, so the kernel's own checks count
//!    (modes, ACLs, sticky directories, set-id clearing, `fs.protected_*`).
//!    No lock is taken while they are switched. editfs never derives
//!    permissions from modes itself.
//! 2. **Capabilities count only in the daemon's user namespace.** A process
//!    that is root in a namespace of its own holds its capabilities there,
//!    not over the project's files: its CAP_FSETID is not read as keeping
//!    set-id bits. A process gone, or a pid now someone else's, has none.
//! 3. **Identity, not names.** Each file is acted on through the descriptor
//!    the transaction read it by, or, where a call takes a name (unlink,
//!    rename), right after checking that the name still holds that file
//!    (device and inode). Nothing is reopened by name with the daemon's rights.
//! 4. **What each step needs:**
//!    - reading, and walking to a file's directory: the caller (see
//!      `transaction::open`);
//!    - a new content over a file with other names (`write_in_place`): the
//!      file's own descriptor, opened again for writing as the caller before
//!      the commit point and written as the caller after it, so the kernel
//!      checks the write and clears set-id bits as on a native write;
//!    - a new content over a file with one name: the kernel is asked to open
//!      the file for writing as the caller before the commit point
//!      (`may_write`); the content is written to a temporary file the daemon
//!      makes (in its state directory, or beside the file), which
//!      alone gets a chmod and a chown (the old file's mode and owner, less
//!      set-id bits for a caller without CAP_FSETID, or the caller's own for a
//!      new file); the daemon then renames it over the name once the kernel
//!      said the caller may write the file and the name still holds it
//!      (`put_in_place`), or onto a name that is still free. The caller could
//!      not rename a file out of the state directory (it may not enter it),
//!      and the rename changes no file but the one the daemon made;
//!    - removing a file (a patch's delete, the old name of a move, an undo of
//!      a creation): the kernel is asked as the caller before the commit
//!      point (`may_remove`), and the unlink after it is made as the caller;
//!    - directories a payload needs: made, and removed again by an undo, as
//!      the caller;
//!    - the daemon's own state (journal, objects, log, temporary files):
//!      as the daemon.
//! 5. **Nothing after the commit point is refused for good.** Every check that
//!    can refuse a transaction is made before its commit point; what fails
//!    after it is a race with another writer, logged and left as that writer
//!    left it, never handed to recovery to finish as root.
//!
//! The daemon acting for itself (`editfs apply`), or for root, or run by a
//! user who is not root (who cannot take on another user's credentials), acts
//! as itself: that never grants more than its user has.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;
use std::sync::OnceLock;

use rustix::fs::{Access, AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use super::{StoreError, io_err};

/// The capability that keeps set-user-ID and set-group-ID bits across a write.
const CAP_FSETID: u32 = 4;

/// The umask of a caller whose own is not known (a kernel before 4.7, a
/// process gone).
const DEFAULT_UMASK: u32 = 0o022;

/// A process's credentials, as they were when it opened a control file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// It holds CAP_FSETID in the daemon's user namespace: its writes keep a
    /// file's set-id bits.
    pub fsetid: bool,
    /// The permission bits its new files and directories lack (`Umask:` in
    /// /proc/PID/status, Linux 4.7 and later; the usual 022 where absent).
    pub umask: u32,
}

impl Caller {
    /// Process `pid` of user `uid` and group `gid`, its groups and capabilities
    /// read from /proc. A process that is gone, or whose pid now names a
    /// process of another user (its filesystem ids differ), counts as having
    /// no supplementary group and no capability: the narrower answer.
    /// Capabilities count only when it is in the daemon's user namespace.
    pub fn of(uid: u32, gid: u32, pid: u32) -> Caller {
        let (status, native) = read_process(pid);
        let mut caller = Caller::from_status(uid, gid, &status);
        caller.fsetid &= native;
        caller
    }

    /// The caller of an edit of one file, read from /proc only where its commit
    /// can use what is there: the groups when the daemon will take on the
    /// caller's credentials (it is root and the caller is not), the capabilities
    /// when the file has a set-id bit to keep, the umask when there is no file
    /// yet (`needs_status` for both). Reading /proc/PID/status costs a
    /// few percent of an edit's round trip, and neither is needed for most
    /// edits. A set-id bit set on the file after the open is then cleared by the
    /// commit, as a write by a process without CAP_FSETID clears it: the narrower
    /// answer.
    pub fn of_editor(uid: u32, gid: u32, pid: u32, needs_status: bool) -> Caller {
        let switches = uid != 0 && rustix::process::geteuid().is_root();
        if switches || needs_status {
            return Caller::of(uid, gid, pid);
        }
        Caller::from_status(uid, gid, "")
    }

    /// The caller as `status` (a /proc/PID/status) shows it; none of its
    /// groups and capabilities when that process's filesystem ids are not
    /// `uid` and `gid` (a pid that names another process by now).
    fn from_status(uid: u32, gid: u32, status: &str) -> Caller {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_default()
        };
        // The fourth of the ids is the filesystem one, which FUSE reports.
        let fs_id = |name: &str| field(name).split_whitespace().nth(3)?.parse::<u32>().ok();
        let same = fs_id("Uid:") == Some(uid) && fs_id("Gid:") == Some(gid);
        let groups = field("Groups:")
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .filter(|_| same)
            .collect();
        let caps = u64::from_str_radix(field("CapEff:").trim(), 16).unwrap_or(0);
        let umask = u32::from_str_radix(field("Umask:").trim(), 8)
            .ok()
            .filter(|_| same)
            .map_or(DEFAULT_UMASK, |m| m & 0o777);
        Caller {
            uid,
            gid,
            groups,
            fsetid: same && caps & (1 << CAP_FSETID) != 0,
            umask,
        }
    }

    /// Whether the caller may access the file or directory `fd` as `how` says,
    /// as the kernel decides for the caller's own credentials.
    pub fn may(&self, fd: BorrowedFd<'_>, how: Access) -> rustix::io::Result<()> {
        // The descriptor's own link in /proc leads to exactly its file, whatever
        // its names are by now (rustix takes no empty path with `faccessat2`).
        let link = fd_link(fd);
        self.with(|| rustix::fs::accessat(rustix::fs::CWD, link.as_str(), how, AtFlags::EACCESS))?
    }

    /// Runs `f` with the caller's credentials on this thread, then puts the
    /// daemon's back. Only root can take on another user's credentials: a daemon
    /// run by anyone else runs `f` as itself, which never grants more than that
    /// user has. A switch that cannot be made runs nothing (EACCES).
    pub fn with<T>(&self, f: impl FnOnce() -> T) -> rustix::io::Result<T> {
        let me = rustix::process::geteuid();
        if !me.is_root() || self.uid == 0 {
            return Ok(f());
        }
        let _back = Switched::to(self)?;
        Ok(f())
    }
}

/// Runs the call `f` as `by` (`None`: the daemon acting for itself).
pub fn acting<T>(
    by: Option<&Caller>,
    f: impl FnOnce() -> rustix::io::Result<T>,
) -> rustix::io::Result<T> {
    match by {
        Some(c) => c.with(f)?,
        None => f(),
    }
}

/// The extended attribute that holds a file's access ACL; the kernel removes
/// it when an ACL says no more than the permission bits.
const ACL_ATTR: &str = "system.posix_acl_access";

/// Whether the file or directory `fd` (an `O_PATH` one too) has an access ACL
/// beyond its bits; where that cannot be told, it is taken to have one (who
/// asks acts more carefully then). Asked through its /proc link, which
/// reaches exactly that file, as `fgetxattr` takes no `O_PATH` descriptor.
/// Without one, the kernel's check of a file's permission bits is its whole
/// answer, and asking it again with another user's credentials is spared.
pub fn has_acl(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::io::Errno;
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    match rustix::fs::getxattr_query(link.as_str(), ACL_ATTR) {
        Ok(_) => true,
        Err(e) => !matches!(e, Errno::NODATA | Errno::NOTSUP),
    }
}

/// The status text of process `pid` and whether it is in the daemon's user
/// namespace, both read through one open of its /proc directory, so a pid
/// reused meanwhile fails both rather than mixing two processes. Empty and
/// `false` when the process is gone.
fn read_process(pid: u32) -> (String, bool) {
    use std::io::Read;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(dir) = rustix::fs::open(format!("/proc/{pid}"), flags, Mode::empty()) else {
        return (String::new(), false);
    };
    // /proc gives no size: room for the whole text up front makes it one
    // read (and the one that finds its end), not eight growing ones.
    let mut status = String::with_capacity(4096);
    let read = rustix::fs::openat(
        &dir,
        "status",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map(File::from)
    .map_err(std::io::Error::from)
    .and_then(|mut f| f.read_to_string(&mut status));
    if read.is_err() {
        return (String::new(), false);
    }
    let ns = rustix::fs::statat(&dir, "ns/user", AtFlags::empty()).ok();
    let native =
        matches!((ns, daemons_namespace()), (Some(s), Some(d)) if (s.st_dev, s.st_ino) == d);
    (status, native)
}

/// The user namespace the daemon runs in (the one FUSE reports ids in), as
/// device and inode of its /proc link; `None` when /proc does not show it.
fn daemons_namespace() -> Option<(u64, u64)> {
    static NS: OnceLock<Option<(u64, u64)>> = OnceLock::new();
    *NS.get_or_init(|| {
        let st = rustix::fs::stat("/proc/self/ns/user").ok()?;
        Some((st.st_dev, st.st_ino))
    })
}

/// The /proc link of `fd`, which leads to exactly its file.
fn fd_link(fd: BorrowedFd<'_>) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// Whether `name` in `dir` is `file` (the same device and inode), without
/// following a symlink.
fn holds(dir: BorrowedFd<'_>, name: &OsStr, file: &File) -> rustix::io::Result<bool> {
    let now = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let read = rustix::fs::fstat(file)?;
    Ok((now.st_dev, now.st_ino) == (read.st_dev, read.st_ino))
}

fn sys<'n>(action: &'static str, name: &'n OsStr) -> impl FnOnce(Errno) -> StoreError + 'n {
    move |e| io_err(action, Path::new(name))(e.into())
}

/// `file`, the one a transaction read, opened again for writing as `by`: the
/// kernel checks that `by` may write that very file (its ACL, its flags, a
/// read-only mount), whatever names it has by now. Made before the commit
/// point, for `write_in_place` after it.
pub(crate) fn open_for_writing(
    file: &File,
    by: Option<&Caller>,
    name: &OsStr,
) -> Result<File, StoreError> {
    let link = fd_link(file.as_fd());
    let flags = OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
    acting(by, || rustix::fs::open(link.as_str(), flags, Mode::empty()))
        .map(File::from)
        .map_err(|source| denied_or(source, name, ("write it", "open for writing")))
}

/// Whether `by` may write `file`, the one a transaction read and will replace
/// by a rename: the kernel is asked by an open for writing as `by` (its ACL,
/// its append-only and immutable flags, a security module), before the commit
/// point. A program running from the file does not stop its replacement, as
/// it does not stop a native `mv` over it.
pub(crate) fn may_write(file: &File, by: Option<&Caller>, name: &OsStr) -> Result<(), StoreError> {
    match open_for_writing(file, by, name) {
        Err(StoreError::Denied {
            source: Errno::TXTBSY,
            ..
        }) => Ok(()),
        other => other.map(drop),
    }
}

/// Replaces the content of the file `writable` (from `open_for_writing`) with
/// `bytes`, synced, as `by`: the kernel clears set-id bits as on a native
/// write by `by`. The file's mode, owner and other names stay.
pub(crate) fn write_in_place(
    writable: &File,
    bytes: &[u8],
    by: Option<&Caller>,
    name: &OsStr,
) -> Result<(), StoreError> {
    let write = || {
        // Cut first: a crash midway leaves a prefix of the new content, which
        // recovery tells from a file written since (see `journal::recovery::repair`).
        rustix::fs::ftruncate(writable, 0)?;
        let mut file = writable;
        file.write_all(bytes).map_err(|e| match e.raw_os_error() {
            Some(n) => Errno::from_raw_os_error(n),
            None => Errno::IO,
        })?;
        rustix::fs::fsync(writable)
    };
    acting(by, write).map_err(sys("write in place", name))
}

/// Asks the kernel, as `by`, whether `by` may remove `name` from `dir`, and
/// checks that the name still holds `file` (what the transaction read):
/// before the commit point, which a removal refused after it must not pass.
/// The question is an `rmdir` of the file, which the kernel answers with
/// everything an unlink checks (the directory's write and search rights, its
/// sticky bit, the file's flags) before it finds no directory there: ENOTDIR
/// is a yes, and nothing is removed.
pub fn may_remove(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    file: Option<&File>,
    by: Option<&Caller>,
) -> Result<(), StoreError> {
    if let Some(file) = file
        && !holds(dir, name, file).map_err(sys("stat", name))?
    {
        return Err(StoreError::Stale { path: name.into() });
    }
    if by.is_none() {
        return Ok(());
    }
    match acting(by, || rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)) {
        Err(Errno::NOTDIR) => Ok(()),
        // An empty directory of the caller's own swapped in meanwhile: gone,
        // as the caller could remove it natively; the file it stood for is not
        // there to remove any more.
        Ok(()) => Err(StoreError::Stale { path: name.into() }),
        Err(source) => Err(denied_or(
            source,
            name,
            ("remove it from its directory", "check the removal of"),
        )),
    }
}

/// Whether `by` may "create" `file`, found at `name` in `dir` already (an
/// empty SEARCH over an empty file): natively that is an `open` with
/// `O_CREAT`, which `fs.protected_regular` refuses for another user's file in
/// a sticky world-writable directory, so the kernel is asked the same open,
/// as `by`, without truncating or writing anything.
pub fn may_create_over(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    file: &File,
    by: Option<&Caller>,
) -> Result<(), StoreError> {
    if !holds(dir, name, file).map_err(sys("stat", name))? {
        return Err(StoreError::Stale { path: name.into() });
    }
    let how =
        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    match acting(by, || rustix::fs::openat(dir, name, how, Mode::empty())) {
        Ok(_) => Ok(()),
        Err(source) => Err(denied_or(
            source,
            name,
            (
                "create it over the file already there",
                "check the creation of",
            ),
        )),
    }
}

/// Removes `name` from `dir` as `by`, after its commit point: only while it is
/// still `file` (when known), and only as far as the kernel lets `by`. What
/// another writer changed since `may_remove` is logged and left as it is.
/// Says whether it removed the file; the directory is not synced.
pub fn remove(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    file: Option<&File>,
    by: Option<&Caller>,
) -> Result<bool, StoreError> {
    if let Some(file) = file {
        match holds(dir, name, file) {
            Ok(true) => {}
            Err(Errno::NOENT) => return Ok(false),
            Ok(false) | Err(_) => {
                log::warn!(
                    "{} changed during its removal: left as it is",
                    name.to_string_lossy()
                );
                return Ok(false);
            }
        }
    }
    match acting(by, || rustix::fs::unlinkat(dir, name, AtFlags::empty())) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e @ (Errno::ACCESS | Errno::PERM)) if by.is_some() => {
            log::warn!(
                "{} changed during its removal, and its caller may not remove what is there now ({e}): left as it is",
                name.to_string_lossy()
            );
            Ok(false)
        }
        Err(e) => Err(sys("remove", name)(e)),
    }
}

/// Renames the temporary file `tmp` in `base`, which the daemon made, over
/// `name` in `dir` as the daemon: over `replaces` (the file the transaction
/// read, which the caller may write) while the name still holds it, or onto
/// a free name when the transaction found none. Says whether it did; a name
/// another writer took or changed meanwhile is logged and left to it.
pub(crate) fn put_in_place(
    (base, tmp): (BorrowedFd<'_>, &OsStr),
    (dir, name): (BorrowedFd<'_>, &OsStr),
    replaces: Option<&File>,
) -> Result<bool, StoreError> {
    let renamed = match replaces {
        Some(file) => match holds(dir, name, file) {
            Ok(true) => rustix::fs::renameat(base, tmp, dir, name),
            Ok(false) | Err(Errno::NOENT) => Err(Errno::EXIST),
            Err(e) => Err(e),
        },
        None => rustix::fs::renameat_with(base, tmp, dir, name, RenameFlags::NOREPLACE),
    };
    match renamed {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => {
            log::warn!(
                "{} changed while its new content was put in place: left as it is (the new content is kept in the store)",
                name.to_string_lossy()
            );
            Ok(false)
        }
        Err(e) => Err(sys("rename into place", name)(e)),
    }
}

/// Creates the directory `name` in `dir` as `by`; EEXIST when it is there.
/// It gets what `mkdir -p` by `by` would give it: in a directory with a
/// default ACL that ACL (the kernel applies it, and no umask), elsewhere the
/// bits `by`'s umask leaves, which the daemon's own umask may not narrow.
/// For itself (`None`: `editfs apply`) the process makes it 0755 less its
/// own umask.
pub fn make_dir(dir: BorrowedFd<'_>, name: &OsStr, by: Option<&Caller>) -> rustix::io::Result<()> {
    let Some(c) = by else {
        return rustix::fs::mkdirat(dir, name, Mode::from(0o755));
    };
    if has_default_acl(dir) {
        return c.with(|| rustix::fs::mkdirat(dir, name, Mode::from(0o777)))?;
    }
    let perm = 0o777 & !c.umask;
    acting(by, || {
        rustix::fs::mkdirat(dir, name, Mode::from(perm))?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let made = rustix::fs::openat(dir, name, flags, Mode::empty())?;
        // Set-group-ID from the parent stays, as on a native mkdir.
        let now = rustix::fs::fstat(&made)?.st_mode & 0o7777;
        if now & 0o777 != perm {
            rustix::fs::fchmod(&made, Mode::from(now & 0o7000 | perm))?;
        }
        Ok(())
    })
}

/// Whether the directory `dir` has a default ACL, which the kernel gives what
/// is made in it instead of the maker's umask.
pub(crate) fn has_default_acl(dir: BorrowedFd<'_>) -> bool {
    rustix::fs::fgetxattr_query(dir, c"system.posix_acl_default").is_ok()
}

/// The permission bits a file made with mode 0666 in `dir` gets from its
/// default ACL (`None`: it has none, the maker's umask counts). A new file of
/// a transaction is made elsewhere and renamed into place, so the kernel does
/// not apply the ACL: it gets these bits and no ACL, each class of user at
/// most what the ACL would give it (the owning group what both its entry and
/// the mask allow; named users and groups nothing of their own).
pub fn default_acl_mode(dir: BorrowedFd<'_>) -> Option<u32> {
    let name = c"system.posix_acl_default";
    let mut acl = vec![0u8; rustix::fs::fgetxattr_query(dir, name).ok()?];
    // One that grew since it was measured: its owner's alone, the narrower answer.
    let Ok(n) = rustix::fs::fgetxattr(dir, name, &mut acl[..]) else {
        return Some(0o600);
    };
    Some(acl_file_mode(&acl[..n]) & 0o666)
}

/// The mode bits the ACL `xattr` (the kernel's `system.posix_acl_*` form: a
/// version word, then entries of tag, permissions and id) leaves each class:
/// none for a class it does not name, the narrower answer.
fn acl_file_mode(xattr: &[u8]) -> u32 {
    const USER_OBJ: u16 = 0x01;
    const GROUP_OBJ: u16 = 0x04;
    const MASK: u16 = 0x10;
    const OTHER: u16 = 0x20;
    let (mut user, mut group, mut mask, mut other) = (0, 0, 7, 0);
    for entry in xattr.get(4..).unwrap_or_default().chunks_exact(8) {
        let tag = u16::from_le_bytes([entry[0], entry[1]]);
        let perm = u32::from(u16::from_le_bytes([entry[2], entry[3]]) & 7);
        match tag {
            USER_OBJ => user = perm,
            GROUP_OBJ => group = perm,
            MASK => mask = perm,
            OTHER => other = perm,
            _ => {}
        }
    }
    user << 6 | (group & mask) << 3 | other
}

/// Removes the empty directory `name` from `dir` as `by`.
pub fn remove_dir(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    by: Option<&Caller>,
) -> rustix::io::Result<()> {
    acting(by, || rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR))
}

/// A refusal by the kernel of `what` as `Denied` (the report's permission
/// error); any other failure of `action` as the I/O error it is.
fn denied_or(
    source: Errno,
    name: &OsStr,
    (what, action): (&'static str, &'static str),
) -> StoreError {
    match source {
        Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::TXTBSY => StoreError::Denied {
            path: name.into(),
            what,
            source,
        },
        e => sys(action, name)(e),
    }
}

/// The caller's credentials on this thread while it lives; the daemon's again after.
struct Switched {
    groups: Vec<Gid>,
    gid: Gid,
}

impl Switched {
    fn to(c: &Caller) -> rustix::io::Result<Switched> {
        let back = Switched {
            groups: rustix::process::getgroups()?,
            gid: rustix::process::getegid(),
        };
        let groups: Vec<Gid> = c.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        // Groups and group first: once the user is not root, neither can be set.
        let switched = rustix::thread::set_thread_groups(&groups)
            .and_then(|()| rustix::thread::set_thread_res_gid(None, Gid::from_raw(c.gid), None))
            .and_then(|()| rustix::thread::set_thread_res_uid(None, Uid::from_raw(c.uid), None));
        if let Err(e) = switched {
            drop(back);
            log::error!("cannot act as uid {}: {e}", c.uid);
            return Err(rustix::io::Errno::ACCESS);
        }
        Ok(back)
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        // The saved user id stays root, so root can always be taken back.
        let back = rustix::thread::set_thread_res_uid(None, Uid::ROOT, None)
            .and_then(|()| rustix::thread::set_thread_res_gid(None, self.gid, None))
            .and_then(|()| rustix::thread::set_thread_groups(&self.groups));
        if let Err(e) = back {
            log::error!("cannot take back the daemon's credentials on this thread: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_the_fsetid_capability_come_from_the_process_status() {
        let ids = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n";
        let status = format!("Name:\tsh\n{ids}Groups:\t4 24 27 \nCapEff:\t0000000000000010\n");
        let c = Caller::from_status(1000, 1000, &status);
        assert_eq!(c.groups, [4, 24, 27]);
        assert!(c.fsetid);
        let c = Caller::from_status(1000, 1000, &format!("{ids}Groups:\t\nCapEff:\t0\n"));
        assert!(c.groups.is_empty() && !c.fsetid);
        // A pid that names another user's process by now lends it nothing.
        let other = Caller::from_status(1001, 1000, &status);
        assert!(other.groups.is_empty() && !other.fsetid);
        assert_eq!(Caller::from_status(1, 1, ""), Caller::of(1, 1, u32::MAX));
    }

    #[test]
    fn a_default_acl_gives_each_class_at_most_what_it_grants() {
        let acl = |entries: &[(u16, u16)]| {
            let mut x = 2u32.to_le_bytes().to_vec();
            for (tag, perm) in entries {
                x.extend(tag.to_le_bytes());
                x.extend(perm.to_le_bytes());
                x.extend(u32::MAX.to_le_bytes());
            }
            x
        };
        assert_eq!(acl_file_mode(&acl(&[(1, 7), (4, 0), (0x20, 0)])), 0o700);
        assert_eq!(acl_file_mode(&acl(&[(1, 6), (4, 5), (0x20, 4)])), 0o654);
        // A named user's entry widens the mask, not the owning group.
        let named = acl(&[(1, 7), (2, 6), (4, 0), (0x10, 6), (0x20, 0)]);
        assert_eq!(acl_file_mode(&named), 0o700);
        assert_eq!(
            acl_file_mode(&acl(&[(1, 7), (4, 7), (0x10, 4), (0x20, 5)])),
            0o745
        );
        assert_eq!(acl_file_mode(b"\x02"), 0);
    }

    #[test]
    fn the_umask_comes_from_the_process_status_or_is_the_usual_one() {
        let ids = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n";
        let c = Caller::from_status(1000, 1000, &format!("Umask:\t0077\n{ids}"));
        assert_eq!(c.umask, 0o077);
        // A kernel before 4.7 shows none; a pid reused by another user lends none.
        assert_eq!(Caller::from_status(1000, 1000, ids).umask, 0o022);
        let other = Caller::from_status(1001, 1000, &format!("Umask:\t0077\n{ids}"));
        assert_eq!(other.umask, 0o022);
    }

    #[test]
    fn an_editors_status_is_read_only_where_its_commit_uses_it() {
        let me = std::process::id();
        let full = Caller::of(0, 0, me);
        assert_eq!(Caller::of_editor(0, 0, me, true), full);
        let plain = Caller::of_editor(0, 0, me, false);
        assert!(plain.groups.is_empty() && !plain.fsetid);
        if rustix::process::geteuid().is_root() {
            assert_eq!(
                Caller::of_editor(1000, 1000, me, false),
                Caller::of(1000, 1000, me)
            );
        }
    }

    #[test]
    fn a_switched_thread_gets_the_callers_answer_and_then_its_own_again() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: no other user's credentials to take; skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "x").unwrap();
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&path, private).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let fd = std::os::fd::AsFd::as_fd(&file);
        let nobody = Caller::of(65534, 65534, u32::MAX);
        assert_eq!(
            nobody.may(fd, Access::READ_OK),
            Err(rustix::io::Errno::ACCESS)
        );
        let root = Caller::of(0, 0, std::process::id());
        assert_eq!(root.may(fd, Access::READ_OK | Access::WRITE_OK), Ok(()));
        assert!(rustix::process::geteuid().is_root(), "root again after");
        assert_eq!(root.may(fd, Access::READ_OK), Ok(()));
    }
    fn nobody() -> Caller {
        Caller::of(65534, 65534, u32::MAX)
    }

    fn open(dir: &std::path::Path, name: &str) -> File {
        File::open(dir.join(name)).unwrap()
    }

    #[test]
    fn a_file_written_in_place_is_the_one_read_whatever_its_name_holds_by_then() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("a"), "old").unwrap();
        std::fs::hard_link(p.join("a"), p.join("b")).unwrap();
        std::fs::write(p.join("c"), "other").unwrap();
        let read = open(p, "a");
        std::fs::rename(p.join("c"), p.join("a")).unwrap();
        let writable = open_for_writing(&read, None, OsStr::new("a")).unwrap();
        write_in_place(&writable, b"new", None, OsStr::new("a")).unwrap();
        assert_eq!(std::fs::read(p.join("b")).unwrap(), b"new");
        assert_eq!(std::fs::read(p.join("a")).unwrap(), b"other");
    }

    #[test]
    fn a_new_content_goes_only_over_the_file_read_or_onto_a_free_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let d = File::open(p).unwrap();
        std::fs::write(p.join("a"), "old").unwrap();
        let read = open(p, "a");
        std::fs::write(p.join("other"), "other").unwrap();
        std::fs::rename(p.join("other"), p.join("a")).unwrap();
        std::fs::write(p.join("t"), "new").unwrap();
        let at = (d.as_fd(), OsStr::new("a"));
        assert!(!put_in_place((d.as_fd(), OsStr::new("t")), at, Some(&read)).unwrap());
        assert!(!put_in_place((d.as_fd(), OsStr::new("t")), at, None).unwrap());
        assert_eq!(std::fs::read(p.join("a")).unwrap(), b"other");
        let now = open(p, "a");
        assert!(put_in_place((d.as_fd(), OsStr::new("t")), at, Some(&now)).unwrap());
        assert_eq!(std::fs::read(p.join("a")).unwrap(), b"new");
    }

    #[test]
    fn the_kernel_answers_whether_a_caller_may_remove_a_file_and_removes_nothing() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: no other user's credentials to take; skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
        std::fs::write(p.join("root"), "r").unwrap();
        std::fs::write(p.join("mine"), "n").unwrap();
        std::os::unix::fs::chown(p.join("mine"), Some(65534), Some(65534)).unwrap();
        let d = File::open(p).unwrap();
        let name = OsStr::new("root");
        let root_file = open(p, "root");
        let refused = may_remove(d.as_fd(), name, Some(&root_file), Some(&nobody()));
        assert!(
            matches!(
                refused,
                Err(StoreError::Denied {
                    source: Errno::PERM,
                    ..
                })
            ),
            "{refused:?}"
        );
        let mine = open(p, "mine");
        may_remove(d.as_fd(), OsStr::new("mine"), Some(&mine), Some(&nobody())).unwrap();
        assert!(p.join("mine").exists() && p.join("root").exists());
        assert!(!remove(d.as_fd(), name, Some(&root_file), Some(&nobody())).unwrap());
        assert!(remove(d.as_fd(), OsStr::new("mine"), Some(&mine), Some(&nobody())).unwrap());
        assert!(!p.join("mine").exists() && p.join("root").exists());
    }
}
