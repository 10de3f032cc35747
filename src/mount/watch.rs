//! The watcher on SOURCE: it lets the kernel keep names, attributes and listings
//! long, and tells it what changed behind the mount's back.
//!
//! Every directory the kernel asks about (a lookup in it, a listing of it) gets
//! an inotify watch first, before anything in it is read; what the kernel
//! learns of the names in a watched directory it may keep for `LONG_TTL`. One
//! thread reads the events and tells the kernel exactly what they changed: a
//! name made, removed or moved drops that entry and the directory's attributes
//! and cached listing; changed attributes or content drop the node's attributes,
//! and its pages when the content changed (and the entry too when no node is
//! known for it). An entry the kernel holds a node for is dropped only when the
//! name went away: dropping it would detach anything mounted on it.
//!
//! Whatever this cannot see keeps the 1 s TTL, so a change made directly in
//! SOURCE always shows within a second: a directory whose watch could not be
//! added (the user's inotify limit), a file with more than one link (a change
//! through another name reports that name), every name for a while after the
//! event queue overflowed (and all the kernel held is dropped then), and
//! SOURCE on a file system whose changes need not pass through this kernel
//! (network and FUSE file systems): there nothing is watched at all.
//! One gap stays: writes through a shared map raise no event; they show when
//! the writer closes the file, or when the size or mtime changes otherwise.
//!
//! The daemon's own changes through the mount raise events too; they are
//! gathered for a few milliseconds and merged per name, so a long write costs a
//! handful of notifications, not one per `write(2)`.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustix::event::{PollFd, PollFlags};
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};

use super::fs::{Core, REAL_TTL};
use super::nodes::{Kind, ROOT};
use super::types::{FileAttr, FileType};

/// How long the kernel keeps what a watched directory told it.
pub const LONG_TTL: Duration = Duration::from_secs(3600);

/// How long events are gathered before they are told, so a burst is merged.
const GATHER: Duration = Duration::from_millis(5);

/// The longest a burst is gathered before what it changed is told.
const BURST: Duration = Duration::from_millis(50);

/// How long every name keeps the 1 s TTL after the event queue overflowed.
const AFTER_OVERFLOW: Duration = Duration::from_secs(2);

/// File systems whose every change passes through this kernel's VFS, so that
/// inotify sees it: local disks and memory. Elsewhere (NFS, SMB, FUSE, 9p) a
/// change made on another machine raises no event.
const LOCAL: [i64; 8] = [
    0xEF53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683E, // btrfs
    0x0102_1994, // tmpfs
    0xF2F5_2010, // f2fs
    0x2FC1_2FC1, // zfs
    0xCA45_1A4E, // bcachefs
    0x794C_7630, // overlayfs
];

/// The watches, by watch descriptor and by directory node.
#[derive(Default)]
struct Table {
    by_wd: HashMap<i32, u64>,
    by_dir: HashMap<u64, i32>,
    /// Directories whose watch could not be added: not tried again while known.
    refused: HashSet<u64>,
    /// Until when every name keeps the 1 s TTL (after an overflow).
    degraded_until: Option<Instant>,
}

impl Table {
    fn degraded(&self) -> bool {
        self.degraded_until
            .is_some_and(|until| Instant::now() < until)
    }
}

pub struct Watches {
    fd: OwnedFd,
    table: Mutex<Table>,
}

/// What one gathered burst of events asks the kernel to drop.
#[derive(Default, Debug, PartialEq, Eq)]
pub struct Told {
    /// Entries, by directory node and name.
    pub entries: HashSet<(u64, OsString)>,
    /// Nodes whose attributes (and pages, if `true`) are stale.
    pub nodes: HashMap<u64, bool>,
    /// The queue overflowed: everything the kernel holds is stale.
    pub everything: bool,
    /// Directories whose watch ended (removed, or its inode gone): a node that
    /// took their id meanwhile may have been given long entries no watch
    /// covered, so every entry in them is dropped.
    pub lost: HashSet<u64>,
}

impl Told {
    fn node(&mut self, ino: u64, pages: bool) {
        *self.nodes.entry(ino).or_default() |= pages;
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.nodes.is_empty() && self.lost.is_empty() && !self.everything
    }
}

const MASK: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ONLYDIR);

impl Watches {
    /// Watches for SOURCE at `root`, or `None` where changes could escape them.
    pub fn new(root: impl AsFd) -> Option<Watches> {
        let fs = rustix::fs::fstatfs(&root).ok()?;
        if !LOCAL.contains(&(fs.f_type as i64)) {
            log::info!(
                "SOURCE is on a file system (type {:#x}) whose changes inotify may not see: names and attributes live 1 s in the kernel",
                fs.f_type
            );
            return None;
        }
        match inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK) {
            Ok(fd) => Some(Watches {
                fd,
                table: Mutex::default(),
            }),
            Err(e) => {
                log::warn!(
                    "cannot watch SOURCE ({e}): names and attributes live 1 s in the kernel"
                );
                None
            }
        }
    }

    /// Whether changes in directory node `dir` are told to the kernel, adding
    /// its watch (through `open`, the directory) if it has none yet.
    pub fn cover(&self, dir: u64, open: impl AsFd) -> bool {
        let mut t = self.table.lock();
        if t.degraded() {
            return false;
        }
        if t.by_dir.contains_key(&dir) {
            return true;
        }
        if t.refused.contains(&dir) {
            return false;
        }
        let link = format!("/proc/self/fd/{}", open.as_fd().as_raw_fd());
        match inotify::add_watch(&self.fd, link.as_str(), MASK) {
            Ok(wd) => {
                // The same inode under another node id cannot happen: ids are inodes.
                t.by_wd.insert(wd, dir);
                t.by_dir.insert(dir, wd);
                true
            }
            Err(e) => {
                if t.refused.is_empty() {
                    log::warn!(
                        "cannot watch a directory of SOURCE ({e}; see /proc/sys/fs/inotify/max_user_watches): its names live 1 s in the kernel"
                    );
                }
                t.refused.insert(dir);
                false
            }
        }
    }

    /// Whether directory node `dir` is watched now (without adding a watch).
    pub fn covers(&self, dir: u64) -> bool {
        let t = self.table.lock();
        !t.degraded() && t.by_dir.contains_key(&dir)
    }

    /// The kernel forgot directory node `dir`: its watch goes.
    pub fn forgot(&self, dir: u64) {
        let mut t = self.table.lock();
        t.refused.remove(&dir);
        if let Some(wd) = t.by_dir.remove(&dir) {
            t.by_wd.remove(&wd);
            // Gone already if the directory was removed: nothing to undo.
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// Reads the events queued now into `told`; `false` when there were none.
    fn gather(
        &self,
        buf: &mut [MaybeUninit<u8>],
        told: &mut Told,
        seen: &mut Vec<(u64, Option<OsString>, ReadFlags)>,
    ) -> bool {
        let mut reader = inotify::Reader::new(&self.fd, buf);
        let mut any = false;
        loop {
            let e = match reader.next() {
                Ok(e) => e,
                Err(rustix::io::Errno::AGAIN) => return any,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    log::error!("reading SOURCE's changes: {e}");
                    told.everything = true;
                    return false;
                }
            };
            any = true;
            let flags = e.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                told.everything = true;
                continue;
            }
            let dir = {
                let mut t = self.table.lock();
                if flags.contains(ReadFlags::IGNORED) {
                    if let Some(dir) = t.by_wd.remove(&e.wd()) {
                        t.by_dir.remove(&dir);
                        told.lost.insert(dir);
                    }
                    continue;
                }
                t.by_wd.get(&e.wd()).copied()
            };
            let Some(dir) = dir else { continue };
            let name = e
                .file_name()
                .map(|n| OsStr::from_bytes(n.to_bytes()).to_owned());
            seen.push((dir, name, flags));
        }
    }

    /// Marks every name as short-lived for a while: the queue lost events.
    fn degrade(&self) {
        self.table.lock().degraded_until = Some(Instant::now() + AFTER_OVERFLOW);
    }
}

/// What one event in directory node `dir` about `name` (node `child`, if the
/// kernel was told of it), or about the directory itself, makes stale.
fn changed(
    told: &mut Told,
    (dir, name): (u64, Option<&OsStr>),
    child: Option<u64>,
    flags: ReadFlags,
) {
    let Some(name) = name else {
        told.node(dir, false);
        return;
    };
    if dir == ROOT && name == OsStr::new(crate::store::STATE_DIR) {
        return;
    }
    // Dropping an entry also detaches whatever is mounted on it, so a name
    // the kernel holds a node for is dropped only when it went away; a change
    // of that node reaches it through its attributes.
    if flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) || child.is_none() {
        told.entries.insert((dir, name.to_owned()));
    }
    let listing =
        ReadFlags::CREATE | ReadFlags::DELETE | ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO;
    if flags.intersects(listing) {
        told.node(dir, true);
    }
    if let Some(child) = child {
        let content = flags.intersects(ReadFlags::MODIFY | ReadFlags::CLOSE_WRITE);
        told.node(child, content);
    }
}

/// Starts the thread that tells the kernel of changes in SOURCE.
pub fn start(watches: Arc<Watches>, core: Weak<Core>) {
    let spawned = std::thread::Builder::new()
        .name("editfs-watch".into())
        .spawn(move || run(&watches, &core));
    if let Err(e) = spawned {
        log::error!("cannot start the watcher of SOURCE: {e}");
    }
}

/// How long the thread waits for events before it checks the mount still lives.
const IDLE: Duration = Duration::from_secs(1);

fn run(watches: &Watches, core: &Weak<Core>) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    loop {
        let Some(c) = core.upgrade() else { return };
        let mut told = Told::default();
        let mut seen = Vec::new();
        if watches.gather(&mut buf, &mut told, &mut seen) {
            // A burst: what follows within a few milliseconds is merged with it,
            // but a change that never stops (a log written to) is told anyway.
            let began = Instant::now();
            loop {
                std::thread::sleep(GATHER);
                if !watches.gather(&mut buf, &mut told, &mut seen) || began.elapsed() > BURST {
                    break;
                }
            }
        }
        // Nodes are looked for now, after the burst: a name made through the
        // mount is known by then, and its entry (maybe mounted on) is kept.
        for (dir, name, flags) in seen {
            let child = name.as_deref().and_then(|n| c.nodes.read().child(dir, n));
            changed(&mut told, (dir, name.as_deref()), child, flags);
        }
        if told.everything {
            watches.degrade();
        }
        if !told.is_empty() {
            c.tell(&told);
            continue;
        }
        drop(c);
        let mut poll = [PollFd::new(&watches.fd, PollFlags::IN)];
        let timeout = rustix::event::Timespec::try_from(IDLE).ok();
        // Woken early by an event, or by nothing: either way the loop looks again.
        let _ = rustix::event::poll(&mut poll, timeout.as_ref());
    }
}

/// The TTL of attributes `a` learned in a directory whose names live `ttl`: a
/// file with other names could change through one no watch covers.
pub fn ttl_for(ttl: Duration, a: &FileAttr) -> Duration {
    match a.kind != FileType::Directory && a.nlink > 1 {
        true => REAL_TTL,
        false => ttl,
    }
}

impl Core {
    /// How long the kernel may keep a name in directory node `dir`, and its
    /// attributes: long if changes there are told (a watch is added now if
    /// needed), else 1 s.
    pub(super) fn ttl_in(&self, dir: u64) -> Duration {
        let Some(w) = self.watches.as_ref() else {
            return REAL_TTL;
        };
        if w.covers(dir) {
            return LONG_TTL;
        }
        match self.dir_of(dir) {
            Ok(fd) if w.cover(dir, &*fd) => LONG_TTL,
            _ => REAL_TTL,
        }
    }

    /// How long the kernel may keep the attributes `a` of node `ino`: long if
    /// its directory is watched and it has no other name a change could come
    /// through.
    pub(super) fn ttl_of(&self, ino: u64, a: &FileAttr) -> Duration {
        let Some(w) = self.watches.as_ref() else {
            return REAL_TTL;
        };
        let single = a.kind == FileType::Directory || a.nlink <= 1;
        let parent = if ino == ROOT {
            Some(ROOT)
        } else {
            self.nodes
                .read()
                .get(ino)
                .filter(|n| n.kind == Kind::Real)
                .map(|n| n.parent)
        };
        match parent {
            Some(p) if single && w.covers(p) => LONG_TTL,
            _ => REAL_TTL,
        }
    }

    /// Tells the kernel what a burst of changes in SOURCE made stale, holding no lock.
    fn tell(&self, told: &Told) {
        for ino in told.nodes.keys() {
            self.touched(*ino);
        }
        let Some(kernel) = self.notifier.get() else {
            return;
        };
        if told.everything {
            let known = self.nodes.read().places();
            for (ino, parent, name) in known {
                self.touched(ino);
                kernel.forget_entry(parent, &name);
                kernel.forget_node(ino);
            }
            kernel.forget_node(ROOT);
            return;
        }
        if !told.lost.is_empty() {
            let known = self.nodes.read().places();
            for (_, parent, name) in known.iter().filter(|(_, p, _)| told.lost.contains(p)) {
                kernel.forget_entry(*parent, name);
            }
            for dir in &told.lost {
                kernel.forget_node(*dir);
            }
        }
        // Entries first: dropping one waits for a lookup of it in flight, whose
        // node the kernel then holds, so the node's drop below reaches it.
        for (dir, name) in &told.entries {
            kernel.forget_entry(*dir, name);
        }
        for (ino, pages) in &told.nodes {
            if *pages {
                kernel.forget_node(*ino);
            } else {
                kernel.forget_attributes(*ino);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told(events: &[(Option<&str>, Option<u64>, ReadFlags)]) -> Told {
        let mut t = Told::default();
        for (name, child, flags) in events {
            changed(&mut t, (7, name.map(OsStr::new)), *child, *flags);
        }
        t
    }

    fn entry(name: &str) -> (u64, OsString) {
        (7, name.into())
    }

    #[test]
    fn a_name_made_or_removed_drops_the_entry_and_the_directory_listing() {
        for flags in [
            ReadFlags::CREATE,
            ReadFlags::DELETE,
            ReadFlags::MOVED_FROM,
            ReadFlags::MOVED_TO,
        ] {
            let t = told(&[(Some("a"), None, flags)]);
            assert!(t.entries.contains(&entry("a")), "{flags:?}");
            assert_eq!(
                t.nodes.get(&7),
                Some(&true),
                "{flags:?}: listing and attributes"
            );
        }
    }

    #[test]
    fn new_content_drops_the_file_pages_new_attributes_only_its_attributes() {
        let t = told(&[(Some("f"), Some(9), ReadFlags::MODIFY)]);
        assert!(t.entries.is_empty(), "a mount on it would be detached");
        assert_eq!(t.nodes.get(&9), Some(&true));
        assert_eq!(t.nodes.get(&7), None, "the listing is unchanged");
        let t = told(&[(Some("f"), Some(9), ReadFlags::ATTRIB)]);
        assert_eq!(t.nodes.get(&9), Some(&false), "pages kept");
        let t = told(&[(Some("f"), None, ReadFlags::ATTRIB)]);
        assert!(
            t.entries.contains(&entry("f")),
            "the kernel may hold it missing"
        );
        let t = told(&[(Some("d"), Some(9), ReadFlags::CREATE | ReadFlags::ISDIR)]);
        assert!(
            t.entries.is_empty(),
            "made through the mount, maybe mounted on since"
        );
        let t = told(&[(Some("d"), Some(9), ReadFlags::DELETE)]);
        assert!(t.entries.contains(&entry("d")));
    }

    #[test]
    fn a_burst_on_one_file_is_told_once_and_pages_win_over_attributes() {
        let burst: Vec<_> = (0..1000)
            .map(|i| {
                let f = if i % 2 == 0 {
                    ReadFlags::MODIFY
                } else {
                    ReadFlags::ATTRIB
                };
                (Some("big"), Some(9), f)
            })
            .collect();
        let t = told(&burst);
        assert!(t.entries.is_empty());
        assert_eq!(t.nodes.len(), 1);
        assert_eq!(t.nodes.get(&9), Some(&true));
    }

    #[test]
    fn an_event_on_the_directory_itself_drops_its_attributes() {
        let t = told(&[(None, None, ReadFlags::ATTRIB)]);
        assert!(t.entries.is_empty());
        assert_eq!(t.nodes.get(&7), Some(&false));
    }

    #[test]
    fn the_store_in_source_raises_nothing_for_the_virtual_state_directory() {
        let mut t = Told::default();
        let name = OsStr::new(crate::store::STATE_DIR);
        changed(&mut t, (ROOT, Some(name)), None, ReadFlags::MODIFY);
        assert!(t.is_empty());
    }

    #[test]
    fn a_file_with_other_names_keeps_the_short_lifetime() {
        let mut a = FileAttr {
            ino: 9,
            size: 0,
            blocks: 0,
            atime: std::time::UNIX_EPOCH,
            mtime: std::time::UNIX_EPOCH,
            ctime: std::time::UNIX_EPOCH,
            kind: FileType::RegularFile,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
        };
        assert_eq!(ttl_for(LONG_TTL, &a), LONG_TTL);
        a.nlink = 2;
        assert_eq!(ttl_for(LONG_TTL, &a), REAL_TTL);
        a.kind = FileType::Directory;
        assert_eq!(
            ttl_for(LONG_TTL, &a),
            LONG_TTL,
            "a directory's links are its subdirectories"
        );
        assert_eq!(ttl_for(REAL_TTL, &a), REAL_TTL);
    }
}
