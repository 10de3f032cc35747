//! The watches on SOURCE's directories (inotify), what their events told, and
//! what a reply about a watched name may promise (`Lease`): the state of the
//! watcher, which `watch.rs` (where the design is described) drives.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};

use super::nodes::ROOT;
use super::types::{FileAttr, FileType, REAL_TTL};

/// How long the kernel keeps what a watched directory told it.
pub const LONG_TTL: Duration = Duration::from_secs(3600);

/// The longest the kernel keeps a file's attributes, even in a watched
/// directory: a hard link made outside SOURCE, and a write through it, raise
/// no event any watch here sees, so such a change shows within this.
pub const FILE_TTL: Duration = Duration::from_secs(60);

/// How long events are gathered before they are told, so a burst is merged.
pub(super) const GATHER: Duration = Duration::from_millis(5);

/// The longest a burst is gathered before what it changed is told.
pub(super) const BURST: Duration = Duration::from_millis(50);

/// How long every name keeps the 1 s TTL after the event queue overflowed.
pub(super) const AFTER_OVERFLOW: Duration = Duration::from_secs(2);

/// File systems whose every change passes through this kernel's VFS, so that
/// inotify sees it: local disks and memory. Elsewhere (NFS, SMB, FUSE, 9p) a
/// change made on another machine raises no event.
pub(super) const LOCAL: [i64; 8] = [
    0xEF53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683E, // btrfs
    0x0102_1994, // tmpfs
    0xF2F5_2010, // f2fs
    0x2FC1_2FC1, // zfs
    0xCA45_1A4E, // bcachefs
    0x794C_7630, // overlayfs
];

/// One directory's watch.
pub(super) struct Watch {
    wd: i32,
    /// Events read from it so far: a reply whose reading of SOURCE overlapped
    /// one does not promise a long life (see `Lease`).
    events: u64,
}

/// Whether every change on file system `fs` passes through this kernel.
#[allow(
    clippy::unnecessary_cast,
    reason = "f_type is 32 bits wide on some targets"
)]
pub(super) fn local(fs: &rustix::fs::StatFs) -> bool {
    LOCAL.contains(&(fs.f_type as i64))
}

/// The watches, by watch descriptor and by directory node.
#[derive(Default)]
pub(super) struct Table {
    by_wd: HashMap<i32, u64>,
    by_dir: HashMap<u64, Watch>,
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
    pub(super) fd: OwnedFd,
    table: Mutex<Table>,
    /// SOURCE's device: a directory on another is another file system,
    /// mounted inside SOURCE.
    pub(super) dev: u64,
}

/// What one gathered burst of events asks the kernel to drop.
#[derive(Default, Debug, PartialEq, Eq)]
pub struct Told {
    /// Names events came for, by directory node and name, with every event's flags.
    pub names: HashMap<(u64, OsString), ReadFlags>,
    /// Nodes whose attributes (and pages, if `true`) are stale.
    pub nodes: HashMap<u64, bool>,
    /// The queue overflowed: whatever the kernel holds is checked against SOURCE.
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

    pub(super) fn is_empty(&self) -> bool {
        self.names.is_empty() && self.nodes.is_empty() && self.lost.is_empty() && !self.everything
    }
}

/// What the kernel is told of one name that events came for.
#[derive(Default, Debug, PartialEq, Eq)]
pub(super) struct AboutName {
    /// The entry is dropped: dropping it detaches whatever is mounted beneath it
    /// inside the mount, so only a name that went away or names another file
    /// now is, or a name whose node the kernel cannot hold (then a lookup of it
    /// may be in flight, and the kernel makes the drop wait for it). A name made
    /// through the mount is known by the time its event is told, and kept: a
    /// directory made so may have been mounted on since.
    pub(super) entry: bool,
    /// The directory's attributes and cached listing are stale.
    pub(super) listing: bool,
    /// Nodes whose attributes (and pages, if `true`) are stale.
    pub(super) nodes: Vec<(u64, bool)>,
}

/// What events `flags` about a name make stale, given the node the kernel
/// was told the name is (`known`) and the node the name is in SOURCE now
/// (`now`: another name of a file reaches the file, and a new link refreshes
/// its link count).
pub(super) fn about_name(flags: ReadFlags, known: Option<u64>, now: Option<u64>) -> AboutName {
    let renamed = flags.intersects(
        ReadFlags::CREATE | ReadFlags::DELETE | ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO,
    );
    let content = flags.intersects(ReadFlags::MODIFY | ReadFlags::CLOSE_WRITE);
    let mut nodes: Vec<(u64, bool)> = known.into_iter().map(|k| (k, content)).collect();
    if let Some(n) = now.filter(|n| Some(*n) != known) {
        nodes.push((n, content));
    }
    let gone = flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM);
    AboutName {
        entry: gone || known.is_none() || now != known,
        listing: renamed,
        nodes,
    }
}

pub(super) const MASK: WatchFlags = WatchFlags::CREATE
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
        let dev = rustix::fs::fstat(&root).ok()?.st_dev;
        let fs = rustix::fs::fstatfs(&root).ok()?;
        if !local(&fs) {
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
                dev,
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
        if !self.sees(&open) {
            t.refused.insert(dir);
            return false;
        }
        let link = format!("/proc/self/fd/{}", open.as_fd().as_raw_fd());
        match inotify::add_watch(&self.fd, link.as_str(), MASK) {
            Ok(wd) => {
                // The same inode under another node id cannot happen: ids are inodes.
                t.by_wd.insert(wd, dir);
                t.by_dir.insert(dir, Watch { wd, events: 0 });
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

    /// Whether every change in directory `open` passes through this kernel's
    /// VFS: it is on SOURCE's file system, or on another local one mounted
    /// inside SOURCE (a tmpfs, a bind mount). A FUSE, network or 9p file
    /// system mounted there changes with no event.
    fn sees(&self, open: &impl AsFd) -> bool {
        match rustix::fs::fstat(open) {
            Ok(st) if st.st_dev == self.dev => true,
            Ok(_) => rustix::fs::fstatfs(open).is_ok_and(|fs| local(&fs)),
            Err(_) => false,
        }
    }

    /// Whether directory node `dir` is watched now (without adding a watch).
    pub fn covers(&self, dir: u64) -> bool {
        let t = self.table.lock();
        !t.degraded() && t.by_dir.contains_key(&dir)
    }

    /// How many events were read from the watch of directory node `dir`, if it
    /// is watched and no overflow makes every name short-lived.
    pub(super) fn events_in(&self, dir: u64) -> Option<u64> {
        let t = self.table.lock();
        t.by_dir
            .get(&dir)
            .filter(|_| !t.degraded())
            .map(|w| w.events)
    }

    /// The kernel forgot directory node `dir`: its watch goes.
    pub fn forgot(&self, dir: u64) {
        let mut t = self.table.lock();
        t.refused.remove(&dir);
        if let Some(Watch { wd, .. }) = t.by_dir.remove(&dir) {
            t.by_wd.remove(&wd);
            // Gone already if the directory was removed: nothing to undo.
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// Reads the events queued now into `told`; `false` when there were none.
    pub(super) fn gather(&self, buf: &mut [MaybeUninit<u8>], told: &mut Told) -> bool {
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
                        if t.by_dir.get(&dir).is_some_and(|w| w.wd == e.wd()) {
                            t.by_dir.remove(&dir);
                        }
                        told.lost.insert(dir);
                    }
                    continue;
                }
                let dir = t.by_wd.get(&e.wd()).copied();
                if let Some(w) = dir.and_then(|d| t.by_dir.get_mut(&d)) {
                    w.events += 1;
                }
                dir
            };
            let Some(dir) = dir else { continue };
            let name = e.file_name().map(|n| OsStr::from_bytes(n.to_bytes()));
            changed(told, (dir, name), flags);
        }
    }

    /// Marks every name as short-lived for a while: the queue lost events.
    pub(super) fn degrade(&self) {
        self.table.lock().degraded_until = Some(Instant::now() + AFTER_OVERFLOW);
    }
}

/// Records one event in directory node `dir` about `name`, or about the
/// directory itself; what it makes stale is decided when the burst is told.
pub(super) fn changed(told: &mut Told, (dir, name): (u64, Option<&OsStr>), flags: ReadFlags) {
    let Some(name) = name else {
        told.node(dir, false);
        return;
    };
    if dir == ROOT && name == OsStr::new(crate::store::STATE_DIR) {
        return;
    }
    *told
        .names
        .entry((dir, name.to_owned()))
        .or_insert(ReadFlags::empty()) |= flags;
}

/// The TTL of attributes `a` learned in a directory whose names live `ttl`: a
/// file with other names could change through one no watch covers, and one
/// that gets a name outside SOURCE could too (see `FILE_TTL`).
pub fn ttl_for(ttl: Duration, a: &FileAttr) -> Duration {
    match (a.kind, a.nlink) {
        (FileType::Directory, _) => ttl,
        (_, 2..) => REAL_TTL,
        _ => ttl.min(FILE_TTL),
    }
}

/// What a reply about a name in a directory may promise, taken before SOURCE
/// is read for it. An event read meanwhile may be one the watcher tells the
/// kernel before the kernel holds what the reply tells it (a node new to the
/// kernel cannot be told of), so such a reply promises 1 s only.
#[derive(Clone, Copy)]
pub struct Lease {
    pub(super) ttl: Duration,
    pub(super) dir: u64,
    pub(super) events: Option<u64>,
}

impl Lease {
    /// The lease of a reply in no watched directory.
    pub fn short() -> Lease {
        Lease {
            ttl: REAL_TTL,
            dir: ROOT,
            events: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENAMES: [ReadFlags; 4] = [
        ReadFlags::CREATE,
        ReadFlags::DELETE,
        ReadFlags::MOVED_FROM,
        ReadFlags::MOVED_TO,
    ];

    #[test]
    fn a_name_made_or_removed_drops_the_entry_and_the_directory_listing() {
        for flags in RENAMES {
            let t = about_name(flags, Some(9), None);
            assert!(t.entry, "{flags:?}");
            assert!(t.listing, "{flags:?}");
            assert_eq!(t.nodes, vec![(9, false)], "{flags:?}: its link count");
        }
    }

    #[test]
    fn a_name_made_through_the_mount_keeps_its_entry_which_may_be_mounted_on_since() {
        for flags in [ReadFlags::CREATE | ReadFlags::ISDIR, ReadFlags::MOVED_TO] {
            let t = about_name(flags, Some(9), Some(9));
            assert!(!t.entry, "{flags:?}");
            assert!(t.listing, "{flags:?}");
        }
        let t = about_name(ReadFlags::DELETE | ReadFlags::CREATE, Some(9), Some(9));
        assert!(t.entry, "removed, whatever took the name since");
    }

    #[test]
    fn new_attributes_or_content_of_a_known_node_keep_its_entry_and_so_any_mount_beneath_it() {
        let t = about_name(ReadFlags::MODIFY, Some(9), Some(9));
        assert!(
            !t.entry,
            "dropping the entry would detach mounts beneath it"
        );
        assert!(!t.listing, "the listing is unchanged");
        assert_eq!(t.nodes, vec![(9, true)], "attributes and pages");
        let t = about_name(ReadFlags::ATTRIB, Some(9), Some(9));
        assert!(!t.entry && !t.listing);
        assert_eq!(t.nodes, vec![(9, false)], "pages kept");
    }

    #[test]
    fn a_change_of_a_name_no_lookup_went_by_drops_the_entry_a_lookup_in_flight_may_give() {
        let t = about_name(ReadFlags::ATTRIB, None, None);
        assert!(t.entry);
        assert!(t.nodes.is_empty());
    }

    #[test]
    fn a_change_through_another_name_or_a_new_link_reaches_the_file_the_kernel_holds() {
        let t = about_name(ReadFlags::CLOSE_WRITE, None, Some(9));
        assert!(t.nodes.contains(&(9, true)), "the pages of the file");
        let t = about_name(ReadFlags::CREATE, None, Some(9));
        assert!(t.nodes.contains(&(9, false)), "its new link count");
        let t = about_name(ReadFlags::MOVED_TO, Some(8), Some(9));
        assert_eq!(t.nodes, vec![(8, false), (9, false)], "the old and the new");
    }

    #[test]
    fn a_burst_on_one_name_is_merged_and_an_event_on_the_directory_drops_its_attributes() {
        let mut t = Told::default();
        for i in 0..1000 {
            let f = if i % 2 == 0 {
                ReadFlags::MODIFY
            } else {
                ReadFlags::ATTRIB
            };
            changed(&mut t, (7, Some(OsStr::new("big"))), f);
        }
        assert_eq!(t.names.len(), 1);
        assert_eq!(
            t.names.get(&(7, OsString::from("big"))),
            Some(&(ReadFlags::MODIFY | ReadFlags::ATTRIB))
        );
        changed(&mut t, (7, None), ReadFlags::ATTRIB);
        assert_eq!(t.nodes.get(&7), Some(&false));
    }

    #[test]
    fn the_store_in_source_raises_nothing_for_the_virtual_state_directory() {
        let mut t = Told::default();
        let name = OsStr::new(crate::store::STATE_DIR);
        changed(&mut t, (ROOT, Some(name)), ReadFlags::MODIFY);
        assert!(t.is_empty());
    }

    #[test]
    fn a_file_with_other_names_keeps_the_short_lifetime_and_one_with_a_single_name_a_bounded_one() {
        let mut a = FileAttr::regular(9);
        assert_eq!(
            ttl_for(LONG_TTL, &a),
            FILE_TTL,
            "a link made outside SOURCE raises no event here"
        );
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
