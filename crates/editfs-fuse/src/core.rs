//! The file system the kernel talks to. `fuse.rs` decodes each FUSE request and
//! calls one method of `Core` (`requests.rs` dispatches by node), which maps it onto
//! SOURCE (`real_files.rs`, `dirs.rs`, `xattr.rs`), a control file (`control.rs`) or
//! the state directory (`state.rs`). Nothing but `fuse.rs` knows fuser.
//!
//! Requests run on several threads. Lock order, the one place it is written:
//!
//! 1. a transaction's turn at its paths (`transaction::serial`), held while
//!    its engine decides, which its files' holds and the store's locks never
//!    are; then its files' holds in the mount (`commit_gate.rs`: one per file,
//!    by node id, in ascending order; only commit threads take them alone, a
//!    direct write shares its file's), taken by an
//!    edit only from its last check of its files to their install
//!    (`control::Gate`, `transaction::Hold`), so a write of the file never
//!    waits for an engine, and by an undo, which takes no turn, for all of it;
//! 2. the store's locks of a transaction's files (its id, commit record and
//!    log line, and a direct write's pre-image id; never an engine's
//!    decision; one per file, taken together in ascending order, so
//!    transactions on other files never wait: `store/lock.rs`), the
//!    filer of removals taking its own store-wide lock before its files';
//!    then the id counter, alone and briefly; then the store's removal gate
//!    (a removal's log line, move and its verdict on what it moved, which
//!    looks at `handles`; the filer's read of those lines); then its
//!    `checkpointing`, held across a checkpoint's syncs (the checkpoint
//!    thread makes them holding nothing, a commit far behind it only after
//!    letting go of its files' locks, a worker about to change a file not
//!    yet synced holding nothing), then its `unsettled` (the checkpoint
//!    thread waits on it to be woken) or the journal's file (its append;
//!    the commit point's sync is made outside it); the reaper's queue alone;
//! 3. `nodes`, then `handles`, then `settling`, then a handle's own
//!    `EditBuffer` lock;
//! 4. the watches' table, alone or under `nodes` (a forgotten directory's
//!    watch goes with its node);
//!    the reports' two tables (`reports.rs`), `kept`, `created`, `backings`, `retries`,
//!    `remover`, the commit gate's `untold` and `lineage` (`commit_gate.rs`),
//!    every table of the kernel cache (`kernel_cache.rs`: `dirs`, `sent`,
//!    `opened_in`, `listings`, `removed_dirs`, `primed`'s set, `prefetch`'s)
//!    and the commit threads' lines (`commits.rs`) are taken alone and briefly.
//!
//! A worker that drops a directory's listing in the kernel at the first open
//! of a file there (`Core::opening_in`) holds no lock. One that stores a
//! file's first pages in the kernel at its open holds no lock either, only
//! `primed`'s turn: a flag taken by compare-and-swap, never waited for
//! (`first_read.rs`).
//!
//! The watcher's thread (`watch.rs`) calls into the kernel holding nothing, and
//! no FUSE worker ever waits for it.
//!
//! A commit thread may wait, holding nothing, for another commit on the same
//! file to have told the kernel (`Telling`): no FUSE worker ever waits for
//! that, so the kernel's wait for a worker cannot come back to it.
//!
//! Two rules keep the kernel out of every cycle. No lock is held across a call
//! into the kernel for the mount (`invalidate`, `invalidate_path`): the kernel
//! may have to wait for a page or directory lock held by a process whose own
//! request waits for a FUSE worker, and that worker for our lock. And a commit
//! thread never waits for a FUSE worker: workers hold a file's share or an
//! `EditBuffer` only while copying bytes or calling into SOURCE, never while
//! waiting on the kernel, and never run a transaction themselves (a flush or
//! read that must commit is handed over, decided under the `EditBuffer` lock).
//!
//! Cache policy: real entries, attributes and listings of a directory SOURCE's
//! watcher covers live an hour in the kernel (a file's attributes a minute: a
//! link made outside SOURCE escapes every watch), and the watcher drops whatever a
//! change made directly in SOURCE makes stale (`watch.rs`); elsewhere they live
//! 1 s (a listing until the directory's mtime, looked up after that second,
//! shows a change: `listings.rs`). File pages stay cached across opens but are dropped when the watcher
//! sees the content change, or a refresh of attributes shows a new size or
//! mtime (FUSE_AUTO_INVAL_DATA), so changes made directly in SOURCE show within
//! a second while warm reads never reach the daemon. A commit drops the file's
//! pages at once. Virtual files live 0 s and are opened with
//! direct I/O, so a status is never stale and never torn.
//!
//! Where the kernel allows it, real files open for writing or of 64 KiB or
//! more are passed through (`passthrough.rs`, `real_files.rs`): their reads, writes
//! and maps go from the kernel to SOURCE with no request here and no page cache
//! of the mount's own. Such a write takes no share of its file: like
//! any other process writing F natively, it lands in the inode it opened, and a
//! commit renames a new inode over the name.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};

use super::commit_gate::CommitGate;
use super::commits::Commits;
use super::edit_buffer::Settling;
use super::handles::{Handle, Handles};
use super::kept_access::KeptAccess;
use super::kernel_cache::KernelCache;
use super::names::Suffixes;
use super::nodes::{Ids, Kind, Nodes, ROOT};
use super::reports::Reports;
use super::source::Source;
use super::stale_retries::StaleRetries;
use super::types::{Done, Errno, FileAttr, FileType, Kernel, Res, errno};
use crate::engine;
use crate::store::Store;

/// How the mount behaves; set on the command line.
#[derive(Clone, Debug)]
pub struct Settings {
    pub suffixes: Suffixes,
    pub show_control_files: bool,
    pub edits_only: bool,
    pub engine: engine::Options,
    /// Which direct writes get a pre-image.
    pub preimages: super::preimage_rules::Policy,
    /// What open edit handles may buffer.
    pub buffers: super::budget::BufferCaps,
}

/// A name in an open directory: where `*at` calls act.
pub struct Loc {
    pub dir: Arc<OwnedFd>,
    pub name: OsString,
}

impl Loc {
    pub fn dir(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&*self.dir)
    }
}

/// A request that commits a transaction: answered by a commit thread.
pub enum Job {
    Flush {
        ino: u64,
        handle: Arc<Handle>,
        /// The process that closed, for the log.
        pid: u32,
        done: Done<()>,
    },
    Read {
        ino: u64,
        handle: Arc<Handle>,
        pid: u32,
        offset: u64,
        size: u32,
        done: Done<Vec<u8>>,
    },
    /// The last close of a handle whose empty payload is still to be sent
    /// (already answered: a release's errors reach nobody).
    Release {
        ino: u64,
        handle: Arc<Handle>,
        pid: u32,
    },
}

impl Job {
    /// The user the job's transaction runs as: whose line it waits in.
    fn user(&self) -> u32 {
        let (Job::Flush { handle, .. } | Job::Read { handle, .. } | Job::Release { handle, .. }) =
            self;
        match &**handle {
            Handle::Edit(buf) => buf.lock().user(),
            _ => 0,
        }
    }

    /// Answers a job no mount is left to run.
    pub(super) fn refuse(self) {
        match self {
            Job::Flush { done, .. } => done(Err(Errno::EIO)),
            Job::Read { done, .. } => done(Err(Errno::EIO)),
            Job::Release { .. } => {}
        }
    }
}

impl Core {
    /// Hands a committing request to the commit threads, in its user's line.
    pub(super) fn queue(&self, job: Job) {
        self.commits.push(job.user(), job);
    }
}

pub struct Core {
    pub(super) source: Source,
    pub(super) store: Store,
    pub(super) settings: Settings,
    pub(super) nodes: RwLock<Nodes>,
    /// What keeps commits on a file apart from its direct writes and from each other.
    pub(super) commit_gate: CommitGate,
    /// Node ids of real files, by device and inode number.
    pub(super) ids: Ids,
    /// The open file handles.
    pub(super) handles: Handles,
    /// The latest reports the control files show.
    pub(super) reports: Reports,
    /// Who may read each kept version, from the log.
    pub(super) kept: Mutex<KeptAccess>,
    pub(super) notifier: Arc<OnceLock<Box<dyn Kernel>>>,
    /// What the kernel was given and what is kept to answer it fast.
    pub(super) cache: KernelCache,
    /// SOURCE's watcher, where its file system lets every change be seen.
    pub(super) watches: Option<Arc<super::watches::Watches>>,
    /// Owner of virtual files: whoever runs the daemon.
    pub(super) owner: (u32, u32),
    /// The daemon's own umask, which the system applies to every node it makes
    /// on top of the caller's; see `Core::unmask`.
    pub(super) umask: u32,
    /// Direct writes whose pre-image is kept, by the handle that writes: recorded
    /// when it is released.
    pub(super) writes: Mutex<HashMap<u64, crate::transaction::direct::Pending>>,
    /// Files made through the mount and written, not recorded yet (see
    /// `preimage.rs`, `Core::record_creations`).
    pub(super) created: Mutex<Vec<super::preimage_rules::Created>>,
    /// Handles the kernel opened to run a program from, with their node: see
    /// `Core::refuse_busy_truncation`.
    pub(super) running: Mutex<HashMap<u64, u64>>,
    /// Requests for the commit thread.
    commits: Arc<Commits<Job>>,
    /// The bytes open edit handles buffer, against their caps.
    pub(super) budget: Arc<super::budget::Budget>,
    /// How each open real file reaches its data: passed through by the kernel or not.
    pub(super) backings: super::passthrough::Backings,
    /// Threads whose open of a replaced node was just answered ESTALE.
    pub(super) retries: StaleRetries,
    /// The last process a removal was recorded for, and when: `rm -r` removes
    /// thousands of files, and its command line is read once a second, not
    /// once a file.
    pub(super) remover: Mutex<Option<(Instant, crate::transaction::Who)>>,
    /// Where the end of a handle's commit is announced and waited for.
    pub(super) settling: Settling,
}

fn time(sec: i64, nsec: i64) -> SystemTime {
    let base = if sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(sec as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs())
    };
    base + Duration::from_nanos(nsec.clamp(0, 999_999_999) as u64)
}

pub fn file_type(mode: u32) -> FileType {
    match rustix::fs::FileType::from_raw_mode(mode) {
        rustix::fs::FileType::Directory => FileType::Directory,
        rustix::fs::FileType::Symlink => FileType::Symlink,
        rustix::fs::FileType::Fifo => FileType::NamedPipe,
        rustix::fs::FileType::CharacterDevice => FileType::CharDevice,
        rustix::fs::FileType::BlockDevice => FileType::BlockDevice,
        rustix::fs::FileType::Socket => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// A real file's attributes; `ino` is its node id.
pub fn attr(st: &rustix::fs::Stat, ino: u64) -> FileAttr {
    FileAttr {
        ino,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: time(st.st_atime, st.st_atime_nsec as i64),
        mtime: time(st.st_mtime, st.st_mtime_nsec as i64),
        ctime: time(st.st_ctime, st.st_ctime_nsec as i64),
        kind: file_type(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
    }
}

/// SOURCE's device: its files keep their inode numbers as node ids. Should its
/// status be unreadable, every file counts as foreign, which costs nothing but
/// those numbers.
fn own_device(source: &Source) -> u64 {
    rustix::fs::fstat(source.root()).map_or(u64::MAX, |st| st.st_dev)
}

/// The process umask. Reading it means setting it, so it is set back at once;
/// this runs before any request is served, when nothing else creates files.
fn daemon_umask() -> u32 {
    let old = rustix::process::umask(rustix::fs::Mode::empty());
    rustix::process::umask(old);
    old.bits()
}

impl Core {
    pub(super) fn new(
        source: Source,
        store: Store,
        settings: Settings,
        notifier: Arc<OnceLock<Box<dyn Kernel>>>,
        commits: Arc<Commits<Job>>,
    ) -> Core {
        let watches = super::watches::Watches::new(source.root()).map(Arc::new);
        let reports = Reports::new(store.last_tx());
        let ids = Ids::new(own_device(&source));
        Core {
            commits,
            budget: super::budget::Budget::new(settings.buffers),
            source,
            store,
            settings,
            nodes: RwLock::new(Nodes::new()),
            commit_gate: CommitGate::default(),
            ids,
            handles: Handles::default(),
            reports,
            kept: Mutex::new(KeptAccess::default()),
            notifier,
            cache: KernelCache::new(),
            watches,
            owner: (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            ),
            umask: daemon_umask(),
            writes: Mutex::new(HashMap::new()),
            created: Mutex::new(Vec::new()),
            backings: Default::default(),
            retries: Default::default(),
            remover: Mutex::new(None),
            settling: Settling::default(),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// A node the kernel still names but the table no longer holds was replaced
    /// under its name: ESTALE, as for `path`, never ENOENT.
    pub(super) fn kind(&self, ino: u64) -> Res<Kind> {
        self.nodes
            .read()
            .get(ino)
            .map(|n| n.kind.clone())
            .ok_or(Errno::ESTALE)
    }

    /// A real node's path relative to SOURCE. A node with no place (its name, or a
    /// parent's, was replaced or removed) is stale: ESTALE makes the kernel look
    /// the path up again, where ENOENT would deny a name that may well exist.
    pub(super) fn path(&self, ino: u64) -> Res<PathBuf> {
        self.nodes.read().path(ino).ok_or(Errno::ESTALE)
    }

    /// Where a real node is: its directory, open, and its name. SOURCE is `.` in SOURCE.
    pub(super) fn loc(&self, ino: u64) -> Res<Loc> {
        if ino == ROOT {
            return Ok(Loc {
                dir: self.dir_of(ROOT)?,
                name: ".".into(),
            });
        }
        let (parent, name) = {
            let nodes = self.nodes.read();
            // A node whose chain was unlinked has no place.
            if !nodes.placed(ino) {
                return Err(Errno::ESTALE);
            }
            let n = nodes.get(ino).ok_or(Errno::ESTALE)?;
            (n.parent, n.name.to_os_string())
        };
        Ok(Loc {
            dir: self.dir_of(parent)?,
            name,
        })
    }

    /// Where a real node is, or was last if its name was taken by another file.
    pub(super) fn last_loc(&self, ino: u64) -> Res<Loc> {
        let (parent, name) = self.nodes.read().last_place(ino).ok_or(Errno::ESTALE)?;
        Ok(Loc {
            dir: self.dir_of(parent)?,
            name,
        })
    }

    /// The directory a real node is, open.
    pub(super) fn dir_of(&self, ino: u64) -> Res<Arc<OwnedFd>> {
        match self.kind(ino)? {
            Kind::Real => {}
            Kind::State(_) => return Err(Errno::EROFS),
            Kind::Control { .. } => return Err(Errno::ENOTDIR),
        }
        if let Some(fd) = self.cache.dir(ino) {
            return Ok(fd);
        }
        let fd = Arc::new(self.source.dir(&self.path(ino)?).map_err(errno)?);
        self.cache.keep_dir(ino, fd.clone());
        Ok(fd)
    }

    /// Attributes the kernel was given lately, with what is left of their TTL.
    /// A file open for writing is never answered from here: passed through, its
    /// writes change size and times with no request reaching the daemon.
    pub(super) fn still_sent(&self, ino: u64) -> Option<(FileAttr, Duration)> {
        if self.backings.written(ino) {
            return None;
        }
        self.cache.fresh(ino)
    }

    /// The status of real node `ino` through one of its open handles, if any:
    /// a file replaced or unlinked under its name lives on while open, and so
    /// does a directory removed through the mount while the kernel holds it,
    /// or one kept open here whose name now leads elsewhere (a file system
    /// mounted over it in SOURCE: the kernel, which opens directories itself,
    /// still shows the directory it knew, as it did when it opened them here).
    pub(super) fn stat_open(&self, ino: u64) -> Option<rustix::fs::Stat> {
        if let Some(st) = self.cache.removed_dir(ino) {
            return Some(st);
        }
        if let Some(dir) = self.cache.dir(ino) {
            return rustix::fs::fstat(&*dir).ok();
        }
        let file = self.handles.open_on(ino)?;
        match &*file {
            Handle::File { file, .. } => rustix::fs::fstat(file).ok(),
            _ => None,
        }
    }

    /// An open descriptor of real node `ino` to act through: the caller's own
    /// (`fh`), or, when the node has no name left (unlinked while open), any
    /// handle open on it, since `fstat` and `fchmod` reach us without one.
    pub(super) fn file_of(&self, ino: u64, fh: Option<u64>) -> Option<Arc<Handle>> {
        if let Some(h) = fh
            .and_then(|f| self.handles.get(f).ok())
            .filter(|h| h.is_on(ino))
        {
            return Some(h);
        }
        if self.nodes.read().placed(ino) {
            return None;
        }
        self.handles.open_on(ino)
    }

    /// Whether a descriptor of real node `ino` is open through the mount.
    pub(super) fn is_open(&self, ino: u64) -> bool {
        self.handles.open_on(ino).is_some()
    }

    /// Tells the kernel to forget what it cached of `name` in `parent` (node
    /// `old`), and `parent`'s listing: a commit made the name anew or gave it
    /// another inode, and the kernel keeps listings across opens
    /// (`listings.rs`). The watcher would drop it too, but only after the
    /// writer's `close` returned, and not in a directory it does not watch.
    pub(super) fn invalidate(&self, parent: u64, name: &OsStr, old: Option<u64>) {
        let Some(n) = self.notifier.get() else { return };
        if let Some(ino) = old {
            n.forget_node(ino);
        }
        n.forget_entry(parent, name);
        n.forget_node(parent);
    }

    /// Tells the kernel to forget what it cached of the file at `rel` (after a
    /// transaction that did not come through that file's own control file).
    /// When a directory on the way is unknown here, the kernel may hold that it
    /// does not exist (a transaction may just have made it): that is forgotten.
    pub(super) fn invalidate_path(&self, rel: &std::path::Path) {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return;
        };
        let found = {
            let nodes = self.nodes.read();
            let mut at = ROOT;
            let mut unknown = None;
            for c in parent.components() {
                match nodes.child(at, c.as_os_str()) {
                    Some(child) => at = child,
                    None => {
                        unknown = Some(c.as_os_str().to_owned());
                        break;
                    }
                }
            }
            match unknown {
                Some(dir) => Err((at, dir)),
                None => Ok((at, nodes.child(at, name))),
            }
        };
        match found {
            Ok((parent, file)) => self.invalidate(parent, name, file),
            Err((parent, dir)) => self.invalidate(parent, &dir, None),
        }
    }

    /// Attributes shared by virtual files: owned by the daemon's user, times of now.
    pub(super) fn virtual_attr(&self, ino: u64, kind: FileType, perm: u16, size: u64) -> FileAttr {
        let now = SystemTime::now();
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: now,
            mtime: now,
            ctime: now,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.owner.0,
            gid: self.owner.1,
            rdev: 0,
            blksize: 4096,
        }
    }
}
