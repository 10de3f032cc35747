//! Directory listings without directory handles.
//!
//! The daemon answers the kernel's first `opendir` with ENOSYS
//! (`FUSE_NO_OPENDIR_SUPPORT`): from then on the kernel opens and closes
//! directories itself, with no request, and keeps every listing it reads in
//! its cache across opens. A warm `find`, `git status` or `grep -r` thus costs
//! no round trip per directory. What keeps the cached listings true:
//!
//! - a change through the mount (create, unlink, rename) drops the parent's
//!   listing in the kernel itself, and a transaction's commit drops it before
//!   the writer's `close` returns (`Core::invalidate`);
//! - a change made directly in SOURCE: the watcher drops the listing of a
//!   watched directory (`watch.rs`); elsewhere the directory's attributes live
//!   1 s, and the kernel compares the mtime they bring with the listing's at
//!   the next listing from its start (FUSE_AUTO_INVAL_DATA), so the change
//!   shows within a second, as before;
//! - the state directory's listings (kept versions) carry the mtime of their
//!   directory in the store, looked up anew at every path walk (they live 0 s),
//!   so a new version shows at once.
//!
//! A listing request comes with no handle: the kernel asks for a directory's
//! entries from an offset, in several requests for a long one. The listing is
//! read from SOURCE at offset 0 (or when this table no longer has it) and kept
//! here, by node, until a request finds its end, so the offsets of one reading
//! stay those of one listing. The table is bounded; a listing dropped before
//! its end (a reader that stopped part way) is read again if asked for.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::fs::Entry;

/// The most listings kept part way through: readers listing at once.
const KEPT: usize = 64;

/// Listings being read by the kernel, by directory node.
#[derive(Default)]
pub struct Listings {
    by_node: HashMap<u64, Arc<Vec<Entry>>>,
    /// Nodes in the order their listings were read, oldest first.
    order: VecDeque<u64>,
}

impl Listings {
    /// The listing of `ino` the kernel is reading, if still kept.
    pub fn get(&self, ino: u64) -> Option<Arc<Vec<Entry>>> {
        self.by_node.get(&ino).cloned()
    }

    /// Keeps `listing` of `ino`, just read, in place of any older one.
    pub fn put(&mut self, ino: u64, listing: Arc<Vec<Entry>>) {
        if self.by_node.insert(ino, listing).is_none() {
            self.order.push_back(ino);
        }
        while self.by_node.len() > KEPT {
            match self.order.pop_front() {
                Some(old) => self.by_node.remove(&old),
                None => break,
            };
        }
    }

    /// The kernel read `ino`'s listing to its end, or forgot the node.
    pub fn done(&mut self, ino: u64) {
        if self.by_node.remove(&ino).is_some() {
            self.order.retain(|&n| n != ino);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(n: usize) -> Arc<Vec<Entry>> {
        let entry = |i: usize| Entry {
            ino: i as u64,
            kind: crate::mount::types::FileType::RegularFile,
            name: format!("f{i}").into(),
        };
        Arc::new((0..n).map(entry).collect())
    }

    #[test]
    fn a_listing_stays_until_its_end_is_read() {
        let mut l = Listings::default();
        l.put(7, listing(3));
        assert_eq!(l.get(7).map(|e| e.len()), Some(3));
        l.put(7, listing(4));
        assert_eq!(l.get(7).map(|e| e.len()), Some(4), "the newer reading wins");
        l.done(7);
        assert!(l.get(7).is_none());
        assert!(l.order.is_empty());
    }

    #[test]
    fn listings_left_part_way_are_bounded() {
        let mut l = Listings::default();
        for ino in 0..(KEPT as u64 * 3) {
            l.put(ino, listing(1));
        }
        assert_eq!(l.by_node.len(), KEPT);
        assert_eq!(l.order.len(), KEPT);
        assert!(l.get(0).is_none(), "the oldest went first");
        assert!(l.get(KEPT as u64 * 3 - 1).is_some());
    }
}
