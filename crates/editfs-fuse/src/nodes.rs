//! The kernel's node ids and what each one names.
//!
//! A real file's node id is its inode number in SOURCE, so `stat` shows stable
//! inode numbers (git's index relies on them) and hard links share one node. A
//! node keeps the names it was looked up by, not a descriptor: a tree of 50,000
//! files must not hold 50,000 descriptors open. It keeps every such name, not
//! only the last, so a hard-linked file stays reachable when one of its names
//! goes. Virtual nodes (control
//! files, `.editfs/`) get ids from a range no inode number reaches.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use parking_lot::RwLock;

use super::names::Control;

pub const ROOT: u64 = 1;

/// First id of virtual nodes; inode numbers of real files stay below it.
const VIRTUAL: u64 = 1 << 62;

/// What a node is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Real,
    /// A control file of the file `base` in the node's parent directory.
    Control {
        base: OsString,
        control: Control,
    },
    /// A path inside the virtual `.editfs/` ("" for `.editfs/` itself).
    State(PathBuf),
}

#[derive(Clone, Debug)]
pub struct Node {
    /// The place the node is reached by: the last name it was looked up as that still exists.
    pub parent: u64,
    pub name: Box<OsStr>,
    pub kind: Kind,
    lookups: u64,
    /// Its other names (hard links), which take over when `parent`/`name` goes.
    links: Links,
    /// The directory of its last name, once it has none (`name` is kept): where
    /// an open of the node finds what replaced it.
    left: u64,
}

/// The other names of a node: almost every node has none, so none costs two
/// words, not an empty vector's three, in a table of every node the kernel
/// holds. Changing them rebuilds the slice; hard links are rare.
#[derive(Clone, Debug, Default)]
struct Links(Option<Box<[(u64, OsString)]>>);

impl Links {
    fn edit<T>(&mut self, f: impl FnOnce(&mut Vec<(u64, OsString)>) -> T) -> T {
        let mut links = std::mem::take(self).into_vec();
        let out = f(&mut links);
        self.0 = (!links.is_empty()).then(|| links.into_boxed_slice());
        out
    }

    fn push(&mut self, link: (u64, OsString)) {
        self.edit(|l| l.push(link));
    }

    fn pop(&mut self) -> Option<(u64, OsString)> {
        self.0.as_ref()?;
        self.edit(Vec::pop)
    }

    fn retain(&mut self, keep: impl FnMut(&(u64, OsString)) -> bool) {
        if self.0.is_some() {
            self.edit(|l| l.retain(keep));
        }
    }

    fn find(&mut self, place: (u64, &OsStr)) -> Option<&mut (u64, OsString)> {
        self.0
            .as_mut()?
            .iter_mut()
            .find(|(p, n)| (*p, n.as_os_str()) == place)
    }

    fn into_vec(self) -> Vec<(u64, OsString)> {
        self.0.map(Vec::from).unwrap_or_default()
    }
}

impl Node {
    /// Drops the place (`parent`, `name`); a remaining link takes over, or the node is detached.
    fn lose(&mut self, parent: u64, name: &OsStr) {
        if (self.parent, &*self.name) == (parent, name) {
            match self.links.pop() {
                Some((p, n)) => (self.parent, self.name) = (p, n.into_boxed_os_str()),
                None => (self.left, self.parent) = (self.parent, DETACHED),
            }
        } else {
            self.links
                .retain(|(p, n)| (*p, n.as_os_str()) != (parent, name));
        }
    }

    /// Moves the place (`from`) to (`to`), whichever of the node's names it is.
    fn moved(&mut self, from: (u64, &OsStr), to: (u64, &OsStr)) {
        if (self.parent, &*self.name) == from {
            (self.parent, self.name) = (to.0, to.1.into());
        } else if let Some(l) = self.links.find(from) {
            *l = (to.0, to.1.to_owned());
        }
    }
}

/// Parent pointer of a node whose name was unlinked: it lives on for open handles only.
const DETACHED: u64 = 0;

#[derive(Default)]
pub struct Nodes {
    nodes: HashMap<u64, Node>,
    /// The node each (directory, name) pair was last looked up as.
    by_name: HashMap<(u64, OsString), u64>,
    next_virtual: u64,
}

/// Maps an inode number on SOURCE's own file system to a node id: ids 0 and 1
/// are the kernel's, and the virtual range is ours.
fn real_id(st_ino: u64) -> u64 {
    match st_ino {
        0 | ROOT => VIRTUAL - 1 - st_ino,
        n if n >= VIRTUAL => n & (VIRTUAL - 1),
        n => n,
    }
}

/// First id of files on another file system mounted inside SOURCE.
const FOREIGN: u64 = 1 << 61;
/// Bits of a foreign inode number kept in its id; the device's index sits above.
const FOREIGN_INO_BITS: u32 = 47;
/// Devices a foreign id can tell apart (its index takes the bits up to `VIRTUAL`).
const FOREIGN_DEVICES: u64 = (VIRTUAL - FOREIGN) >> FOREIGN_INO_BITS;

/// A foreign inode number in `FOREIGN_INO_BITS`: its high bits are folded in,
/// not cut off, as a FUSE file system inside SOURCE (another editfs) numbers its
/// virtual files from 2^62, and cut off they would take the numbers of its first
/// files, its root among them.
fn fold(ino: u64) -> u64 {
    let mask = (1 << FOREIGN_INO_BITS) - 1;
    (ino ^ (ino >> FOREIGN_INO_BITS)) & mask
}

/// Node ids of real files. An inode number is unique only on its own file
/// system, and SOURCE may hold others mounted inside it (a tmpfs, a volume, a
/// bind mount): two files there can share a number, and one node id for both
/// would serve one's content under the other's name. So a file on SOURCE's own
/// file system keeps its inode number as its id (what `stat` shows, and git's
/// index remembers), and one elsewhere gets an id in a range of its device:
/// its index among the devices met, above the low bits of its inode number.
/// Inode numbers of 2^47 and more on such a device may share ids with others
/// (none of the common disk file systems hands them out); the walks up the
/// tree stop at a cycle such a collision could make.
pub struct Ids {
    own: u64,
    /// The other devices met, by index - 1. A leaf lock: taken alone, briefly.
    others: RwLock<Vec<u64>>,
}

impl Ids {
    pub fn new(own: u64) -> Ids {
        Ids {
            own,
            others: RwLock::new(Vec::new()),
        }
    }

    /// The node id of the file a status describes.
    pub fn of(&self, st: &rustix::fs::Stat) -> u64 {
        self.real(st.st_dev, st.st_ino)
    }

    /// The node id of inode `ino` on device `dev`.
    pub fn real(&self, dev: u64, ino: u64) -> u64 {
        if dev == self.own {
            return real_id(ino);
        }
        let index = self.index(dev) % FOREIGN_DEVICES;
        FOREIGN | (index << FOREIGN_INO_BITS) | fold(ino)
    }

    /// The device's index, from 1 (0 would make the first device's ids start at
    /// `FOREIGN` for no gain).
    fn index(&self, dev: u64) -> u64 {
        let found = |devs: &Vec<u64>| devs.iter().position(|&d| d == dev);
        if let Some(i) = found(&self.others.read()) {
            return i as u64 + 1;
        }
        let mut devs = self.others.write();
        let i = found(&devs).unwrap_or_else(|| {
            devs.push(dev);
            devs.len() - 1
        });
        i as u64 + 1
    }
}

impl Nodes {
    /// Tables this small are left as they are.
    const SHRINK_FLOOR: usize = 4096;

    pub fn new() -> Nodes {
        let mut nodes = Nodes {
            next_virtual: VIRTUAL,
            ..Nodes::default()
        };
        let root = Node {
            parent: ROOT,
            name: Box::default(),
            kind: Kind::Real,
            lookups: 1,
            links: Links::default(),
            left: DETACHED,
        };
        nodes.nodes.insert(ROOT, root);
        nodes
    }

    pub fn get(&self, id: u64) -> Option<&Node> {
        self.nodes.get(&id)
    }

    /// The node's path relative to SOURCE, or `None` if it was unlinked or forgotten.
    pub fn path(&self, id: u64) -> Option<PathBuf> {
        let mut parts = Vec::new();
        let mut at = id;
        while at != ROOT {
            let n = self.placed_node(at, parts.len())?;
            parts.push(&*n.name);
            at = n.parent;
        }
        Some(parts.iter().rev().collect())
    }

    /// Node `at`, reached `steps` steps up from where a walk began, if it has a
    /// place. A walk longer than the table is in a cycle (ids of two files that
    /// collided, see `Ids`): it ends there, as the node had no place, rather
    /// than never.
    fn placed_node(&self, at: u64, steps: usize) -> Option<&Node> {
        let n = self.nodes.get(&at)?;
        (n.parent != DETACHED && steps <= self.nodes.len()).then_some(n)
    }

    /// The name a node has, or had last if it has none left: what stands
    /// there now may have replaced it.
    pub fn last_place(&self, id: u64) -> Option<(u64, OsString)> {
        let n = self.nodes.get(&id)?;
        let parent = if n.parent == DETACHED {
            n.left
        } else {
            n.parent
        };
        (parent != DETACHED).then(|| (parent, n.name.to_os_string()))
    }

    /// Whether node `id` still has a place: `path` would find it, with nothing allocated.
    pub fn placed(&self, id: u64) -> bool {
        let mut at = id;
        let mut steps = 0;
        while at != ROOT {
            match self.placed_node(at, steps) {
                Some(n) => at = n.parent,
                None => return false,
            }
            steps += 1;
        }
        true
    }

    /// Node `id` no longer has the name (`parent`, `name`).
    fn lose(&mut self, id: Option<u64>, parent: u64, name: &OsStr) {
        if let Some(n) = id.and_then(|id| self.nodes.get_mut(&id)) {
            n.lose(parent, name);
        }
    }

    /// Points (`parent`, `name`) at `id`, taking the name from whatever node held it.
    fn bind(&mut self, id: u64, parent: u64, name: &OsStr) {
        let key = (parent, name.to_owned());
        let old = self.by_name.insert(key, id).filter(|&old| old != id);
        self.lose(old, parent, name);
    }

    /// The node `name` in `parent` was last looked up as.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.by_name.get(&(parent, name.to_owned())).copied()
    }

    /// Records a lookup of `name` in `parent` as real node `id`: that name becomes
    /// its place, and the names it had before stay as links.
    pub fn remember(&mut self, id: u64, parent: u64, name: &OsStr) {
        // The common case, a name looked up again: count it, allocate nothing.
        if let Some(n) = self.nodes.get_mut(&id)
            && n.parent == parent
            && *n.name == *name
            && n.kind == Kind::Real
        {
            n.lookups += 1;
            return;
        }
        let node = self.nodes.entry(id).or_insert_with(|| Node {
            parent: DETACHED,
            name: Box::default(),
            kind: Kind::Real,
            lookups: 0,
            links: Links::default(),
            left: DETACHED,
        });
        node.links
            .retain(|(p, n)| (*p, n.as_os_str()) != (parent, name));
        if node.parent != DETACHED {
            let old = std::mem::replace(&mut node.name, name.into());
            node.links.push((node.parent, old.into_os_string()));
        } else {
            node.name = name.into();
        }
        node.parent = parent;
        node.kind = Kind::Real;
        node.lookups += 1;
        self.bind(id, parent, name);
    }

    /// The id of virtual `name` in `parent`, creating it; `count` says whether the kernel now holds it.
    pub fn virtual_node(&mut self, parent: u64, name: &OsStr, kind: Kind, count: bool) -> u64 {
        let existing = self
            .by_name
            .get(&(parent, name.to_owned()))
            .copied()
            .filter(|&id| id >= VIRTUAL);
        let id = existing.unwrap_or_else(|| {
            self.next_virtual += 1;
            self.next_virtual
        });
        let node = self.nodes.entry(id).or_insert_with(|| Node {
            parent,
            name: name.into(),
            kind: kind.clone(),
            lookups: 0,
            links: Links::default(),
            left: DETACHED,
        });
        node.kind = kind;
        node.lookups += u64::from(count);
        self.bind(id, parent, name);
        id
    }

    /// Every name the kernel holds a node by: (node, directory, name).
    pub fn places(&self) -> Vec<(u64, u64, OsString)> {
        self.by_name
            .iter()
            .map(|((parent, name), id)| (*id, *parent, name.clone()))
            .collect()
    }

    /// The kernel dropped `n` references to `id`; true when the node is gone.
    pub fn forget(&mut self, id: u64, n: u64) -> bool {
        let Some(node) = self.nodes.get_mut(&id) else {
            return false;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 && id != ROOT {
            let Some(node) = self.nodes.remove(&id) else {
                return false;
            };
            let place = (node.parent, node.name.into_os_string());
            for key in std::iter::once(place).chain(node.links.into_vec()) {
                if self.by_name.get(&key) == Some(&id) {
                    self.by_name.remove(&key);
                }
            }
            self.shrink();
            return true;
        }
        false
    }

    /// Gives back the room of nodes the kernel forgot (a tree removed,
    /// `drop_caches`) once a table is at most an eighth full, keeping twice what is
    /// left: growing again does not reallocate at once, and shrinking again
    /// waits for most of that to go too.
    fn shrink(&mut self) {
        fn roomy(len: usize, cap: usize) -> bool {
            cap > Nodes::SHRINK_FLOOR && len * 8 <= cap
        }
        if roomy(self.nodes.len(), self.nodes.capacity()) {
            self.nodes.shrink_to(self.nodes.len() * 2);
        }
        if roomy(self.by_name.len(), self.by_name.capacity()) {
            self.by_name.shrink_to(self.by_name.len() * 2);
        }
    }

    /// The name `name` in `parent` is gone; the node it named (returned) keeps
    /// its other names, or is detached when it has none.
    pub fn unlinked(&mut self, parent: u64, name: &OsStr) -> Option<u64> {
        let id = self.by_name.remove(&(parent, name.to_owned()));
        self.lose(id, parent, name);
        id
    }

    /// `name` in `parent` now lives at `new_name` in `new_parent`.
    pub fn renamed(&mut self, parent: u64, name: &OsStr, new_parent: u64, new_name: &OsStr) {
        self.unlinked(new_parent, new_name);
        let Some(id) = self.by_name.remove(&(parent, name.to_owned())) else {
            return;
        };
        if let Some(n) = self.nodes.get_mut(&id) {
            n.moved((parent, name), (new_parent, new_name));
        }
        self.bind(id, new_parent, new_name);
    }

    /// Two names swapped places (`RENAME_EXCHANGE`).
    pub fn exchanged(&mut self, a: (u64, &OsStr), b: (u64, &OsStr)) {
        let ida = self.by_name.remove(&(a.0, a.1.to_owned()));
        let idb = self.by_name.remove(&(b.0, b.1.to_owned()));
        for (id, from, (parent, name)) in [(ida, a, b), (idb, b, a)] {
            let Some(id) = id else { continue };
            if let Some(n) = self.nodes.get_mut(&id) {
                n.moved(from, (parent, name));
            }
            self.by_name.insert((parent, name.to_owned()), id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_renames_of_parents() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("src"));
        n.remember(11, 10, OsStr::new("a.rs"));
        assert_eq!(n.path(11), Some(PathBuf::from("src/a.rs")));
        n.renamed(ROOT, OsStr::new("src"), ROOT, OsStr::new("lib"));
        assert_eq!(n.path(11), Some(PathBuf::from("lib/a.rs")));
        assert!(n.placed(11));
        n.unlinked(10, OsStr::new("a.rs"));
        assert_eq!(n.path(11), None);
        assert!(!n.placed(11), "placed agrees with path");
        assert_eq!(n.path(ROOT), Some(PathBuf::new()));
        assert!(n.placed(ROOT));
        assert!(!n.placed(99), "an unknown node has no place");
    }

    #[test]
    fn forget_drops_a_node_after_its_last_lookup() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(10, ROOT, OsStr::new("a"));
        n.forget(10, 1);
        assert!(n.get(10).is_some());
        n.forget(10, 1);
        assert!(n.get(10).is_none());
        n.forget(ROOT, 5);
        assert!(n.get(ROOT).is_some());
    }

    #[test]
    fn virtual_ids_are_stable_and_out_of_inode_range() {
        let mut n = Nodes::new();
        let kind = Kind::State(PathBuf::new());
        let a = n.virtual_node(ROOT, OsStr::new(".editfs"), kind.clone(), true);
        assert_eq!(n.virtual_node(ROOT, OsStr::new(".editfs"), kind, true), a);
        assert!(a > VIRTUAL);
        assert_ne!(real_id(1), ROOT);
        assert!(real_id(u64::MAX) < VIRTUAL);
    }

    #[test]
    fn files_of_other_devices_get_ids_of_their_own() {
        let ids = Ids::new(7);
        assert_eq!(
            ids.real(7, 1234),
            1234,
            "SOURCE's own files keep their numbers"
        );
        let (a, b) = (ids.real(8, 2), ids.real(9, 2));
        assert_ne!(a, b, "one inode number on two devices");
        assert_ne!(a, 2);
        assert_eq!(ids.real(8, 2), a, "stable");
        for id in [a, b, ids.real(9, u64::MAX), ids.real(7, u64::MAX)] {
            assert!(id < VIRTUAL && id != ROOT, "{id:#x}");
        }
        assert!(ids.real(8, 3) >= FOREIGN);
        let (root, first_virtual) = (ids.real(8, ROOT), ids.real(8, VIRTUAL + 1));
        assert_ne!(
            root, first_virtual,
            "a nested editfs's root and its .editfs/"
        );
    }

    #[test]
    fn a_cycle_of_names_ends_the_walk_instead_of_hanging_it() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(11, 10, OsStr::new("b"));
        n.remember(10, 11, OsStr::new("c"));
        assert!(!n.placed(11));
        assert_eq!(n.path(11), None);
    }

    #[test]
    fn exchange_swaps_names() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(11, ROOT, OsStr::new("b"));
        n.exchanged((ROOT, OsStr::new("a")), (ROOT, OsStr::new("b")));
        assert_eq!(n.path(10), Some(PathBuf::from("b")));
        assert_eq!(n.path(11), Some(PathBuf::from("a")));
    }

    #[test]
    fn a_hard_link_keeps_the_node_when_another_name_goes() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(10, ROOT, OsStr::new("b"));
        n.unlinked(ROOT, OsStr::new("b"));
        assert_eq!(n.path(10), Some(PathBuf::from("a")));
        n.unlinked(ROOT, OsStr::new("a"));
        assert_eq!(n.path(10), None);
    }

    #[test]
    fn a_rename_over_one_link_leaves_the_others() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(10, ROOT, OsStr::new("b"));
        n.remember(11, ROOT, OsStr::new("c"));
        n.renamed(ROOT, OsStr::new("c"), ROOT, OsStr::new("b"));
        assert_eq!(n.path(10), Some(PathBuf::from("a")));
        assert_eq!(n.path(11), Some(PathBuf::from("b")));
        n.renamed(ROOT, OsStr::new("a"), ROOT, OsStr::new("d"));
        assert_eq!(n.path(10), Some(PathBuf::from("d")));
    }

    #[test]
    fn a_node_replaced_under_its_name_still_knows_where_it_was() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(11, ROOT, OsStr::new("a"));
        assert_eq!(n.path(10), None);
        assert_eq!(n.last_place(10), Some((ROOT, "a".into())));
        n.remember(12, ROOT, OsStr::new("b"));
        n.renamed(ROOT, OsStr::new("b"), ROOT, OsStr::new("a"));
        assert_eq!(n.last_place(11), Some((ROOT, "a".into())));
        n.remember(11, ROOT, OsStr::new("c"));
        assert_eq!(n.path(11), Some(PathBuf::from("c")));
        assert_eq!(n.last_place(11), Some((ROOT, "c".into())));
    }

    #[test]
    fn a_node_with_no_hard_link_stays_small() {
        assert!(
            std::mem::size_of::<Node>() <= 88,
            "{} bytes per node",
            std::mem::size_of::<Node>()
        );
    }

    #[test]
    fn forgetting_a_large_tree_gives_its_room_back() {
        let mut n = Nodes::new();
        for id in 10..60_010 {
            n.remember(id, ROOT, OsStr::new(&format!("f{id}")));
        }
        let full = (n.nodes.capacity(), n.by_name.capacity());
        for id in 10..59_010 {
            assert!(n.forget(id, 1));
        }
        assert_eq!(n.path(59_500), Some(PathBuf::from("f59500")));
        assert!(
            n.nodes.capacity() * 8 <= full.0,
            "{} of {}",
            n.nodes.capacity(),
            full.0
        );
        assert!(n.by_name.capacity() * 8 <= full.1);
    }

    #[test]
    fn forget_releases_every_name_of_a_node() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(10, ROOT, OsStr::new("b"));
        assert!(n.forget(10, 2));
        assert_eq!(n.child(ROOT, OsStr::new("a")), None);
        assert_eq!(n.child(ROOT, OsStr::new("b")), None);
    }
}
