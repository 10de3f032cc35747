//! The kernel's node ids and what each one names.
//!
//! A real file's node id is its inode number in SOURCE, so `stat` shows stable
//! inode numbers (git's index relies on them) and hard links share one node. A
//! node keeps the name it was last looked up by, not a descriptor: a tree of
//! 50,000 files must not hold 50,000 descriptors open. Virtual nodes (control
//! files, `.editfs/`) get ids from a range no inode number reaches.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

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
    pub parent: u64,
    pub name: OsString,
    pub kind: Kind,
    lookups: u64,
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

/// Maps a source inode number to a node id: ids 0 and 1 are the kernel's, and
/// the virtual range is ours.
pub fn real_id(st_ino: u64) -> u64 {
    match st_ino {
        0 | ROOT => VIRTUAL - 1 - st_ino,
        n if n >= VIRTUAL => n & (VIRTUAL - 1),
        n => n,
    }
}

impl Nodes {
    pub fn new() -> Nodes {
        let mut nodes = Nodes {
            next_virtual: VIRTUAL,
            ..Nodes::default()
        };
        let root = Node {
            parent: ROOT,
            name: OsString::new(),
            kind: Kind::Real,
            lookups: 1,
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
            let n = self.nodes.get(&at)?;
            if n.parent == DETACHED {
                return None;
            }
            parts.push(n.name.as_os_str());
            at = n.parent;
        }
        Some(parts.iter().rev().collect())
    }

    fn detach(&mut self, id: Option<u64>) {
        if let Some(n) = id.and_then(|id| self.nodes.get_mut(&id)) {
            n.parent = DETACHED;
        }
    }

    /// Points (`parent`, `name`) at `id`, detaching whatever node held that name.
    fn bind(&mut self, id: u64, parent: u64, name: &OsStr) {
        let key = (parent, name.to_owned());
        let old = self.by_name.insert(key, id).filter(|&old| old != id);
        self.detach(old);
    }

    /// The node `name` in `parent` was last looked up as.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.by_name.get(&(parent, name.to_owned())).copied()
    }

    /// Records a lookup of `name` in `parent` as real node `id`.
    pub fn remember(&mut self, id: u64, parent: u64, name: &OsStr) {
        // The common case, a name looked up again: count it, allocate nothing.
        if let Some(n) = self.nodes.get_mut(&id)
            && n.parent == parent
            && n.name == name
            && n.kind == Kind::Real
        {
            n.lookups += 1;
            return;
        }
        let node = self.nodes.entry(id).or_insert_with(|| Node {
            parent: DETACHED,
            name: OsString::new(),
            kind: Kind::Real,
            lookups: 0,
        });
        let old = (
            node.parent,
            std::mem::replace(&mut node.name, name.to_owned()),
        );
        node.parent = parent;
        node.kind = Kind::Real;
        node.lookups += 1;
        if old != (parent, name.to_owned()) && self.by_name.get(&old) == Some(&id) {
            self.by_name.remove(&old);
        }
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
            name: name.to_owned(),
            kind: kind.clone(),
            lookups: 0,
        });
        node.kind = kind;
        node.lookups += u64::from(count);
        self.bind(id, parent, name);
        id
    }

    /// The kernel dropped `n` references to `id`; true when the node is gone.
    pub fn forget(&mut self, id: u64, n: u64) -> bool {
        let Some(node) = self.nodes.get_mut(&id) else {
            return false;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 && id != ROOT {
            let key = (node.parent, node.name.clone());
            if self.by_name.get(&key) == Some(&id) {
                self.by_name.remove(&key);
            }
            self.nodes.remove(&id);
            return true;
        }
        false
    }

    /// The name `name` in `parent` is gone; the node it named is detached.
    pub fn unlinked(&mut self, parent: u64, name: &OsStr) {
        let id = self.by_name.remove(&(parent, name.to_owned()));
        self.detach(id);
    }

    /// `name` in `parent` now lives at `new_name` in `new_parent`.
    pub fn renamed(&mut self, parent: u64, name: &OsStr, new_parent: u64, new_name: &OsStr) {
        self.unlinked(new_parent, new_name);
        let Some(id) = self.by_name.remove(&(parent, name.to_owned())) else {
            return;
        };
        if let Some(n) = self.nodes.get_mut(&id) {
            (n.parent, n.name) = (new_parent, new_name.to_owned());
        }
        self.bind(id, new_parent, new_name);
    }

    /// Two names swapped places (`RENAME_EXCHANGE`).
    pub fn exchanged(&mut self, a: (u64, &OsStr), b: (u64, &OsStr)) {
        let ida = self.by_name.remove(&(a.0, a.1.to_owned()));
        let idb = self.by_name.remove(&(b.0, b.1.to_owned()));
        for (id, (parent, name)) in [(ida, b), (idb, a)] {
            let Some(id) = id else { continue };
            if let Some(n) = self.nodes.get_mut(&id) {
                (n.parent, n.name) = (parent, name.to_owned());
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
        n.unlinked(10, OsStr::new("a.rs"));
        assert_eq!(n.path(11), None);
        assert_eq!(n.path(ROOT), Some(PathBuf::new()));
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
    fn exchange_swaps_names() {
        let mut n = Nodes::new();
        n.remember(10, ROOT, OsStr::new("a"));
        n.remember(11, ROOT, OsStr::new("b"));
        n.exchanged((ROOT, OsStr::new("a")), (ROOT, OsStr::new("b")));
        assert_eq!(n.path(10), Some(PathBuf::from("b")));
        assert_eq!(n.path(11), Some(PathBuf::from("a")));
    }
}
