//! Dropping versions: past `--keep` per file, past `--keep-bytes` over all
//! files (the oldest first, sparing what a checkpoint has yet to sync), and
//! those of a transaction that did not happen.

use std::fs;
use std::os::unix::fs::MetadataExt;

use super::held::needed;
use super::{Objects, Side, hash_of};

/// What is remembered of the versions of a file on one side.
#[derive(Default)]
pub(super) struct Count {
    /// How many there are.
    n: usize,
    /// The oldest of those kept at the last listing, oldest first, at most
    /// `NEXT_OLDEST`: the next to be pruned, as every later version has a later
    /// id. So a file at its `--keep` is listed once per `NEXT_OLDEST` commits,
    /// not at every one. One another process pruned is dropped for nothing,
    /// and a later prune lists again.
    next: std::collections::VecDeque<u64>,
}

/// Versions remembered per file and side as the next to prune.
const NEXT_OLDEST: usize = 16;

/// Files whose count of versions is remembered; past it, all are forgotten
/// (and listed again when next pruned), so memory stays bounded.
const COUNTED_FILES: usize = 4096;

impl Objects {
    /// Counts one more version of `rel` on `side` in what is remembered, if anything.
    pub(super) fn added(&self, side: Side, rel: &str) {
        if let Some(c) = self.counts.lock().get_mut(&(side, rel.to_owned())) {
            c.n += 1;
        }
    }

    /// Forgets version `side` of `rel` at `tx`, just dropped, in what is remembered.
    fn dropped(&self, side: Side, rel: &str, tx: u64) {
        if let Some(c) = self.counts.lock().get_mut(&(side, rel.to_owned())) {
            c.n = c.n.saturating_sub(1);
            c.next.retain(|t| *t != tx);
        }
    }

    /// Drops the oldest versions of `rel` beyond `keep`; returns the bytes freed.
    pub(crate) fn prune(&self, rel: &str, keep: usize) -> u64 {
        self.prune_side(Side::Pre, rel, keep) + self.prune_side(Side::Post, rel, keep)
    }

    pub(super) fn prune_side(&self, side: Side, rel: &str, keep: usize) -> u64 {
        let key = (side, rel.to_owned());
        let remembered = match self.counts.lock().get_mut(&key) {
            Some(c) if c.n <= keep => return 0,
            Some(c) if c.next.len() >= c.n - keep => Some(c.next.drain(..c.n - keep).collect()),
            _ => None,
        };
        let mut due: Vec<u64> = match remembered {
            Some(due) => due,
            None => {
                let txs = self.txs(side, rel);
                let over = txs.len().saturating_sub(keep);
                let next = txs[over..].iter().take(NEXT_OLDEST).copied().collect();
                let mut counts = self.counts.lock();
                if counts.len() >= COUNTED_FILES {
                    counts.clear();
                }
                counts.insert(key, Count { n: txs.len(), next });
                txs[..over].to_vec()
            }
        };
        // A branch's base needs its version whatever `--keep` says. None of
        // those due is needed when none is past a base; else they are told
        // from all the file's versions, and the count is listed afresh at the
        // next prune, as some stay past `keep`.
        let bases = match (side, due.is_empty()) {
            (Side::Pre, false) => self.bases(),
            _ => Vec::new(),
        };
        if !needed(&bases, side, &due).is_empty() {
            let spared = needed(&bases, side, &self.txs(side, rel));
            due.retain(|tx| !spared.contains(tx));
            self.counts.lock().remove(&(side, rel.to_owned()));
        }
        due.iter().map(|tx| self.drop_version(side, rel, *tx)).sum()
    }

    /// Drops both versions of `rel` at `tx`: the transaction did not happen.
    pub fn forget(&self, rel: &str, tx: u64) {
        for side in [Side::Pre, Side::Post] {
            self.drop_version(side, rel, tx);
        }
    }

    /// Removes one version; frees its object when nothing else links to it.
    /// The version's own name is never its file's last (the object has that),
    /// so only the object's removal may free blocks: the reaper does that.
    pub(super) fn drop_version(&self, side: Side, rel: &str, tx: u64) -> u64 {
        let link = self.state.join(Objects::name(side, rel, tx));
        let Ok(meta) = fs::metadata(&link) else {
            return 0;
        };
        // Only the object's own name would remain: nothing needs it any more. Its
        // name is its content's hash, found from the version before it goes.
        let orphan = (meta.nlink() == 2)
            .then(|| hash_of(&link))
            .flatten()
            .map(|sha| (self.object(&sha), sha))
            .filter(|(o, _)| fs::metadata(o).is_ok_and(|m| m.ino() == meta.ino()));
        if fs::remove_file(&link).is_err() {
            return 0;
        }
        self.dropped(side, rel, tx);
        match orphan {
            Some((object, sha)) if self.reaper.remove(&object).is_ok() => {
                self.durable.lock().remove(&sha);
                self.adjust(-(meta.len() as i64));
                meta.len()
            }
            _ => 0,
        }
    }

    pub(super) fn adjust(&self, by: i64) {
        if let Some(t) = self.total.lock().as_mut() {
            *t = t.saturating_add_signed(by);
        }
    }

    /// Bytes the objects take.
    pub fn total(&self) -> u64 {
        *self.total.lock().get_or_insert_with(|| {
            fs::read_dir(self.state.join("objects"))
                .map(|entries| {
                    entries
                        .flatten()
                        .filter_map(|e| e.metadata().ok())
                        .map(|m| m.len())
                        .sum()
                })
                .unwrap_or(0)
        })
    }

    /// Spares the versions of transactions from `tx` on from the size cap
    /// (`u64::MAX`: none): the store's only durable copy of a new content until
    /// the checkpoint syncs the file it went to.
    pub(crate) fn spare_from(&self, tx: u64) {
        self.spared.store(tx, std::sync::atomic::Ordering::Relaxed);
    }

    /// Drops the oldest versions of every file until the objects and the
    /// branches take at most `cap` bytes, but none that is spared
    /// (`spare_from`) or that a branch's base needs (held.rs).
    pub(crate) fn cap(&self, cap: u64) {
        let spared = self.spared.load(std::sync::atomic::Ordering::Relaxed);
        let mut total = self.total() + self.held_bytes();
        if total <= cap {
            return;
        }
        let bases = self.bases();
        let mut all: Vec<(u64, Side, String)> = Vec::new();
        for side in [Side::Pre, Side::Post] {
            for rel in self.files(side) {
                let txs = self.txs(side, &rel);
                let spared = needed(&bases, side, &txs);
                all.extend(
                    txs.into_iter()
                        .filter(|tx| !spared.contains(tx))
                        .map(|tx| (tx, side, rel.clone())),
                );
            }
        }
        all.retain(|(tx, ..)| *tx < spared);
        all.sort_by_key(|(tx, ..)| *tx);
        for (tx, side, rel) in all {
            if total <= cap {
                break;
            }
            total = total.saturating_sub(self.drop_version(side, &rel, tx));
        }
    }

    /// Every file that has versions on `side`, as paths relative to the project.
    fn files(&self, side: Side) -> Vec<String> {
        let root = self.state.join(side.dir());
        let mut out = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u64>().is_ok())
                    && path.is_file()
                {
                    if let Ok(rel) = dir.strip_prefix(&root) {
                        out.push(rel.to_string_lossy().into_owned());
                    }
                    break;
                }
                if path.is_dir() {
                    stack.push(path);
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}
