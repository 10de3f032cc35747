//! The mount logic's own words for what it answers: an errno, a file's
//! attributes, how an open file is served, a deferred answer, the kernel's
//! cache it tells of changes. Only `fuse.rs` knows fuser; it turns these into
//! fuser's types, so the logic can be driven (and tested) without a kernel.

use std::any::Any;
use std::ffi::{OsStr, OsString};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::transaction::Caller;

/// How long the kernel may keep a real node's entry and attributes, unless a
/// watch covers its directory (`watch.rs`).
pub const REAL_TTL: Duration = Duration::from_secs(1);
/// Virtual files are never cached: a status is never stale.
pub const VIRTUAL_TTL: Duration = Duration::ZERO;

/// An error number a request answers with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(i32);

macro_rules! errnos {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(pub const $name: Errno = Errno(libc::$name);)*
        }
    };
}

errnos!(
    E2BIG, EACCES, EBADF, EBUSY, EDQUOT, EEXIST, EFBIG, EINVAL, EIO, EISDIR, ELOOP, ENODATA,
    ENOENT, ENOSPC, ENOTDIR, ENXIO, EOPNOTSUPP, EOVERFLOW, EPERM, EROFS, ESTALE, ETXTBSY, EXDEV,
);

impl Errno {
    /// The number itself, as the kernel and libc know it.
    pub fn code(self) -> i32 {
        self.0
    }
}

impl std::fmt::Debug for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl From<std::io::Error> for Errno {
    /// An error that carries no number (none of ours should) is an I/O error.
    fn from(e: std::io::Error) -> Errno {
        Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl From<rustix::io::Errno> for Errno {
    fn from(e: rustix::io::Errno) -> Errno {
        Errno(e.raw_os_error())
    }
}

pub type Res<T> = Result<T, Errno>;

/// `Errno` from a system error.
pub fn errno(e: impl Into<Errno>) -> Errno {
    e.into()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    NamedPipe,
    CharDevice,
    BlockDevice,
    Directory,
    RegularFile,
    Symlink,
    Socket,
}

/// What `stat` shows of a node; `ino` is its node id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileAttr {
    pub ino: u64,
    pub size: u64,
    pub blocks: u64,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    pub kind: FileType,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub blksize: u32,
}

#[cfg(test)]
impl FileAttr {
    /// An empty regular file `ino`, owned by root, for tests of what is told the kernel.
    pub fn regular(ino: u64) -> FileAttr {
        FileAttr {
            ino,
            size: 0,
            blocks: 0,
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            kind: FileType::RegularFile,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
        }
    }
}

/// Attributes with how long the kernel may keep them (and the entry that led to them).
pub type Timed = (FileAttr, Duration);

/// What a lookup found: the attributes, and how long the kernel may keep the
/// name, which outlives the attributes for a control file (see `Core::lookup_control`).
pub struct Found {
    pub attr: Timed,
    pub name_ttl: Duration,
}

impl From<Timed> for Found {
    fn from(attr: Timed) -> Found {
        Found {
            name_ttl: attr.1,
            attr,
        }
    }
}

/// Who sent a request. The full `Caller` (groups, capabilities) is read from
/// /proc, so it is built only for the requests that check it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requester {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl Requester {
    pub fn caller(self) -> Caller {
        Caller::of(self.uid, self.gid, self.pid)
    }

    /// The caller of an edit of a file, its status read from /proc when
    /// `needs_status` (see `Caller::of_editor`).
    pub fn editor(self, needs_status: bool) -> Caller {
        Caller::of_editor(self.uid, self.gid, self.pid, needs_status)
    }
}

/// A kernel resource that passes one open inode through to SOURCE, held while
/// any handle uses it; dropping it gives it back. Opaque here: only the FUSE
/// layer makes and reads it.
pub struct Backing(Box<dyn Any + Send + Sync>);

impl Backing {
    pub fn new(id: impl Any + Send + Sync) -> Backing {
        Backing(Box::new(id))
    }

    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

/// How the kernel serves an open file's data.
pub enum Served {
    /// Every read and write comes to the daemon, uncached (virtual files).
    Direct,
    /// `Direct`, of bytes fixed at the open (a report): a close has nothing to
    /// tell the daemon, so it costs no flush request.
    Fixed,
    /// Through the daemon, pages cached across opens; `flush`: whether a close
    /// must reach the daemon.
    Cached { flush: bool },
    /// Through the daemon, with the kernel's default caching and flushing.
    Plain,
    /// The kernel reads and writes SOURCE itself (kernel passthrough); `flush`:
    /// whether a close must reach the daemon (a direct write it records).
    Passed { backing: Arc<Backing>, flush: bool },
}

/// An open file handle and how it is served.
pub struct Opened {
    pub fh: u64,
    pub served: Served,
}

/// A request answered later, by a commit thread.
pub type Done<T> = Box<dyn FnOnce(Res<T>) + Send>;

/// The kernel's cache of the mount, told what a commit changed.
pub trait Kernel: Send + Sync {
    /// Drops what is cached of node `ino`: its attributes and pages.
    fn forget_node(&self, ino: u64);
    /// Drops the cached entry `name` in directory node `parent`.
    fn forget_entry(&self, parent: u64, name: &OsStr);
    /// Drops the cached attributes of node `ino`, keeping its pages.
    fn forget_attributes(&self, ino: u64);
    /// Puts `data`, node `ino`'s content from its start, in its pages.
    fn store(&self, ino: u64, data: &[u8]);
}

/// One directory entry, as listed.
#[derive(Clone, Debug)]
pub struct Entry {
    pub ino: u64,
    pub kind: FileType,
    pub name: OsString,
}

/// Asks the kernel for a backing id of an open file, to pass it through.
pub type Register<'a> = &'a dyn Fn(std::os::fd::BorrowedFd<'_>) -> std::io::Result<Backing>;
