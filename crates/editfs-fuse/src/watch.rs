//! The watcher on SOURCE: it lets the kernel keep names, attributes and listings
//! long, and tells it what changed behind the mount's back.
//!
//! Every directory the kernel asks about (a lookup in it, a listing of it) gets
//! an inotify watch first, before anything in it is read; what the kernel
//! learns of the names in a watched directory it may keep for `LONG_TTL` (a
//! file's attributes for `FILE_TTL`). One thread reads the events and tells
//! the kernel exactly what they changed: a name made, removed or moved drops
//! that entry and the directory's attributes and cached listing; changed
//! attributes or content drop the attributes of the node the name is in SOURCE
//! now (and of the node the kernel knows by it), and its pages when the content
//! changed, but never the entry: the kernel detaches whatever is mounted beneath
//! a dropped entry inside the mount (fuser cannot send `FUSE_EXPIRE_ONLY`).
//!
//! Whatever this cannot see keeps the 1 s TTL, so a change made directly in
//! SOURCE always shows within a second: a directory whose watch could not be
//! added (the user's inotify limit), a file with more than one link (a change
//! through another name reports that name), every name for a while after the
//! event queue overflowed (then each name the kernel holds is checked against
//! SOURCE), a reply that read SOURCE while an event in its directory was read
//! (see `Lease`), what lies on another file system mounted inside SOURCE, and
//! SOURCE on a file system whose changes need not pass through this kernel
//! (network and FUSE file systems): there nothing is watched at all.
//! Gaps stay: a hard link made outside SOURCE, and writes through it or through
//! a shared map, raise no event here; they show when the file's attributes
//! expire with a new mtime, or when the writer closes the file.
//!
//! The daemon's own changes through the mount raise events too; they are
//! gathered for a few milliseconds and merged per name, so a long write costs a
//! handful of notifications, not one per `write(2)`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};

use rustix::fs::AtFlags;

use super::core::Core;
use super::nodes::{Kind, ROOT};
use super::types::{FileAttr, FileType, Kernel, REAL_TTL};
use super::watches::{BURST, GATHER, LONG_TTL, Lease, Told, Watches, about_name, ttl_for};

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
        if watches.gather(&mut buf, &mut told) {
            // A burst: what follows within a few milliseconds is merged with it,
            // but a change that never stops (a log written to) is told anyway.
            let began = Instant::now();
            loop {
                std::thread::sleep(GATHER);
                if !watches.gather(&mut buf, &mut told) || began.elapsed() > BURST {
                    break;
                }
            }
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

impl Core {
    /// The lease of a reply about a name in directory node `dir`, adding its
    /// watch if needed (see `ttl_in`).
    pub(super) fn lease_in(&self, dir: u64) -> Lease {
        let ttl = self.ttl_in(dir);
        let events = self.watches.as_ref().and_then(|w| w.events_in(dir));
        Lease { ttl, dir, events }
    }

    /// How long the kernel may keep a name and its attributes `a`, read under
    /// `lease` from a file on device `dev`: those of a file system mounted
    /// inside SOURCE may change where no watch sees it (its root's own
    /// attributes, or all of a FUSE or network file system).
    pub(super) fn ttl_after(&self, lease: Lease, dev: u64, a: &FileAttr) -> Duration {
        let Some(w) = self.watches.as_ref() else {
            return REAL_TTL;
        };
        let quiet = lease.events.is_some() && w.events_in(lease.dir) == lease.events;
        match quiet && dev == w.dev {
            true => ttl_for(lease.ttl, a),
            false => REAL_TTL,
        }
    }

    /// How long the kernel may keep attributes handed out again with `left` of
    /// the TTL they were given with, under `lease`: a change seen in the
    /// directory since the lease began may be one they predate, and then they
    /// promise 1 s at most, as attributes just read would.
    pub(super) fn ttl_again(&self, lease: Lease, left: Duration) -> Duration {
        let quiet = self
            .watches
            .as_ref()
            .is_some_and(|w| lease.events.is_some() && w.events_in(lease.dir) == lease.events);
        if quiet { left } else { left.min(REAL_TTL) }
    }

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

    /// How long the kernel may keep the attributes `a` of node `ino` (on device
    /// `dev`): long if its directory is watched, it has no other name a change
    /// could come through, and it is on SOURCE's file system.
    pub(super) fn ttl_of(&self, ino: u64, dev: u64, a: &FileAttr) -> Duration {
        let Some(w) = self.watches.as_ref() else {
            return REAL_TTL;
        };
        let single = (a.kind == FileType::Directory || a.nlink <= 1) && dev == w.dev;
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
            Some(p) if single && w.covers(p) => ttl_for(LONG_TTL, a),
            _ => REAL_TTL,
        }
    }

    /// Tells the kernel what a burst of changes in SOURCE made stale, holding no lock.
    fn tell(&self, told: &Told) {
        let Some(kernel) = self.notifier.get() else {
            return;
        };
        if told.everything {
            self.recheck(&**kernel);
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
        let mut nodes = told.nodes.clone();
        let mut entries = Vec::new();
        for ((dir, name), flags) in &told.names {
            let known = self.nodes.read().child(*dir, name);
            let about = about_name(*flags, known, self.now_known(*dir, name));
            if about.entry {
                entries.push((*dir, name));
            }
            if about.listing {
                nodes.insert(*dir, true);
            }
            for (ino, pages) in about.nodes {
                *nodes.entry(ino).or_default() |= pages;
            }
        }
        for ino in nodes.keys() {
            self.cache.touched(*ino);
        }
        // Entries first: dropping one waits for a lookup of it in flight, whose
        // node the kernel then holds, so the node's drop below reaches it.
        for (dir, name) in entries {
            kernel.forget_entry(dir, name);
        }
        for (ino, pages) in &nodes {
            if *pages {
                kernel.forget_node(*ino);
            } else {
                kernel.forget_attributes(*ino);
            }
        }
    }

    /// The node `name` in directory node `dir` is in SOURCE now, if the
    /// kernel may hold it: the file a change through a name no lookup went
    /// by reaches.
    fn now_known(&self, dir: u64, name: &OsStr) -> Option<u64> {
        let fd = self.dir_of(dir).ok()?;
        let st = rustix::fs::statat(&*fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        let id = self.ids.of(&st);
        self.nodes.read().get(id).is_some().then_some(id)
    }

    /// After the queue overflowed: every name the kernel holds is checked
    /// against SOURCE, and only those that name another file now (or nothing)
    /// are dropped, so nothing mounted beneath the others goes; every node's
    /// attributes and pages are dropped, and so is every name a directory the
    /// kernel holds has now that it may hold as missing.
    fn recheck(&self, kernel: &dyn Kernel) {
        let known: Vec<_> = {
            let nodes = self.nodes.read();
            nodes
                .places()
                .into_iter()
                .filter(|(ino, _, _)| nodes.get(*ino).is_some_and(|n| n.kind == Kind::Real))
                .collect()
        };
        let mut held: HashMap<u64, HashSet<&OsStr>> = HashMap::from([(ROOT, HashSet::new())]);
        for (ino, parent, name) in &known {
            held.entry(*parent).or_default().insert(name);
            self.cache.touched(*ino);
            let fd = self.dir_of(*parent).ok();
            let now =
                fd.and_then(|fd| rustix::fs::statat(&*fd, name, AtFlags::SYMLINK_NOFOLLOW).ok());
            if now.map(|st| self.ids.of(&st)) != Some(*ino) {
                kernel.forget_entry(*parent, name);
            }
            kernel.forget_node(*ino);
        }
        for (dir, names) in &held {
            let Ok(listed) = self.list(*dir) else {
                continue;
            };
            for e in listed
                .iter()
                .filter(|e| !names.contains(e.name.as_os_str()))
            {
                kernel.forget_entry(*dir, &e.name);
            }
        }
        kernel.forget_node(ROOT);
    }
}
