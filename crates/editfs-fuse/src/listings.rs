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
//!   watched directory (`watch.rs`); a directory no watch covers has its
//!   listing dropped as soon as the kernel has read it to its end, so each
//!   listing there is read anew, as before (its mtime alone would not do: on a
//!   file system with coarse timestamps, a change in the same tick as the
//!   listing leaves it equal);
//! - the state directory's listings (kept versions) carry the mtime of their
//!   directory in the store, looked up anew at every path walk (they live 0 s),
//!   so a new version shows at once.
//!
//! A listing request comes with no handle: the kernel asks for a directory's
//! entries from an offset, in several requests for a long one. A real
//! directory is listed as SOURCE lists it, each entry carrying SOURCE's own
//! seek cookie as its offset (`Core::walk_in_place`): a request reopens the
//! directory and seeks, nothing is kept here, and a listing resumed after the
//! directory changed goes on where it was, as natively (a walk that unlinks
//! what it reaches removes everything; two processes listing at once each see
//! every unchanged entry once).
//!
//! Where the mount adds entries SOURCE has no cookie for (control files when
//! listed, the state directory at the root when it lives outside SOURCE, the
//! state directory's own listings), the listing is read at offset 0 and kept
//! here, by directory and reading process, until a request finds its end, so
//! the offsets of one reading stay those of one listing while another process
//! lists the same directory anew. There a walk that removes entries as it
//! goes may skip some, as it may on file systems whose offsets are indices.
//! The table is bounded; a listing dropped before its end (a reader that
//! stopped part way) is read again if asked for.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::types::Entry;

/// The most listings kept part way through: readers listing at once.
const KEPT: usize = 64;

/// Whose listing: a directory node and the process reading it.
pub type Reader = (u64, u32);

/// Listings being read by the kernel, by reader.
#[derive(Default)]
pub struct Listings {
    by_reader: HashMap<Reader, Arc<Vec<Entry>>>,
    /// Readers in the order their listings were read, oldest first.
    order: VecDeque<Reader>,
}

impl Listings {
    /// The listing `reader` is part way through, if still kept.
    pub fn get(&self, reader: Reader) -> Option<Arc<Vec<Entry>>> {
        self.by_reader.get(&reader).cloned()
    }

    /// Keeps `listing`, just read for `reader`, in place of any older one.
    pub fn put(&mut self, reader: Reader, listing: Arc<Vec<Entry>>) {
        if self.by_reader.insert(reader, listing).is_none() {
            self.order.push_back(reader);
        }
        while self.by_reader.len() > KEPT {
            match self.order.pop_front() {
                Some(old) => self.by_reader.remove(&old),
                None => break,
            };
        }
    }

    /// `reader` read its listing to the end.
    pub fn done(&mut self, reader: Reader) {
        if self.by_reader.remove(&reader).is_some() {
            self.order.retain(|&r| r != reader);
        }
    }

    /// The kernel forgot directory node `ino`: no one lists it any more.
    pub fn forgot(&mut self, ino: u64) {
        self.by_reader.retain(|&(dir, _), _| dir != ino);
        self.order.retain(|&(dir, _)| dir != ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(n: usize) -> Arc<Vec<Entry>> {
        let entry = |i: usize| Entry {
            ino: i as u64,
            kind: crate::types::FileType::RegularFile,
            name: format!("f{i}").into(),
        };
        Arc::new((0..n).map(entry).collect())
    }

    #[test]
    fn a_listing_stays_until_its_end_is_read() {
        let mut l = Listings::default();
        l.put((7, 1), listing(3));
        assert_eq!(l.get((7, 1)).map(|e| e.len()), Some(3));
        l.put((7, 1), listing(4));
        assert_eq!(
            l.get((7, 1)).map(|e| e.len()),
            Some(4),
            "the newer reading wins"
        );
        l.done((7, 1));
        assert!(l.get((7, 1)).is_none());
        assert!(l.order.is_empty());
    }

    #[test]
    fn each_process_keeps_its_own_reading_of_a_directory() {
        let mut l = Listings::default();
        l.put((7, 1), listing(3));
        l.put((7, 2), listing(5));
        assert_eq!(l.get((7, 1)).map(|e| e.len()), Some(3));
        l.done((7, 2));
        assert_eq!(l.get((7, 1)).map(|e| e.len()), Some(3));
        l.put((8, 1), listing(1));
        l.forgot(7);
        assert!(l.get((7, 1)).is_none());
        assert_eq!(l.order, [(8, 1)]);
    }

    #[test]
    fn listings_left_part_way_are_bounded() {
        let mut l = Listings::default();
        for ino in 0..(KEPT as u64 * 3) {
            l.put((ino, 1), listing(1));
        }
        assert_eq!(l.by_reader.len(), KEPT);
        assert_eq!(l.order.len(), KEPT);
        assert!(l.get((0, 1)).is_none(), "the oldest went first");
        assert!(l.get((KEPT as u64 * 3 - 1, 1)).is_some());
    }
}
