//! The commit gate: what keeps a commit on a file apart from direct writes of
//! it (the stripes) and from other commits on it (the commits not yet told to
//! the kernel), and what editfs's own transactions made of the files they
//! replaced (the lineage). Its place in the lock order is written in `fs.rs`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use parking_lot::{Condvar, Mutex, RwLock, RwLockWriteGuard};

use crate::transaction::Meant;

/// Striped locks that keep a direct write from landing in the middle of a transaction.
const STRIPES: usize = 64;

/// The stripes, the commits not yet told and the lineage.
pub struct CommitGate {
    stripes: Vec<RwLock<()>>,
    /// Files whose latest commit has not told the kernel yet (see `Telling`).
    untold: Mutex<HashSet<String>>,
    /// Signalled whenever a commit has told the kernel.
    told: Condvar,
    /// What editfs's own transactions made of the files they replaced.
    lineage: Mutex<Lineage>,
}

impl Default for CommitGate {
    fn default() -> Self {
        CommitGate {
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            untold: Mutex::default(),
            told: Condvar::new(),
            lineage: Mutex::default(),
        }
    }
}

impl CommitGate {
    /// The stripe lock of a file: direct writes share it, a transaction takes it alone.
    pub fn stripe(&self, ino: u64) -> &RwLock<()> {
        &self.stripes[(ino % STRIPES as u64) as usize]
    }

    /// The stripes of several files, taken alone, in ascending order (so two
    /// multi-file commits never wait on each other crosswise).
    pub fn stripes_for(&self, inos: &[u64]) -> Vec<RwLockWriteGuard<'_, ()>> {
        let mut idx: Vec<usize> = inos.iter().map(|i| (i % STRIPES as u64) as usize).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.stripes[i].write()).collect()
    }

    /// Waits, holding nothing, until the latest commit on the files at `rels`
    /// has told the kernel, and holds their `Telling` for this commit.
    pub fn told(&self, rels: &[&str]) -> Telling<'_> {
        let mut untold = self.untold.lock();
        while rels.iter().any(|r| untold.contains(*r)) {
            self.told.wait(&mut untold);
        }
        let rels: Vec<String> = rels.iter().map(|r| (*r).to_owned()).collect();
        untold.extend(rels.iter().cloned());
        Telling { gate: self, rels }
    }

    /// The point in the lineage a handle opened now starts from.
    pub fn mark(&self) -> u64 {
        self.lineage.lock().mark()
    }

    /// What `meant` at `rel` became through the replacements editfs made after `since`.
    pub fn now(&self, rel: &str, meant: Meant, since: u64) -> Meant {
        self.lineage.lock().now(rel, meant, since)
    }

    /// A committed transaction replaced each file at `rels`, which was
    /// `before`, with `after`; record it before its `Telling` is let go, so no
    /// other commit on them comes between.
    pub fn replaced(&self, rels: &[&str], before: Vec<Meant>, after: Vec<Meant>) {
        let mut lineage = self.lineage.lock();
        for ((rel, b), a) in rels.iter().zip(before).zip(after) {
            lineage.record(rel, b, a);
        }
    }
}

/// Which version of a file replaced which, by editfs's own transactions. An
/// `F.edit` handle acts on the file its name meant when it was opened; a
/// version a transaction installed since (a new inode, renamed over the old)
/// is still that file, whereas anything else put under the name is not.
///
/// Replacements are kept in the order they happened, per path, and followed
/// from the handle's opening on: an inode number the file system hands out
/// again cannot make a chain loop back.
///
/// The table is bounded by bytes (`BYTES`): past it, the paths replaced
/// longest ago are forgotten, and a handle opened before their last
/// replacement then finds its file replaced by something else and refuses,
/// which is safe. Paths are an agent's to choose (up to 4 KiB each), so a
/// bound by count alone would let long names take 16 MiB.
#[derive(Default)]
pub struct Lineage {
    by_rel: HashMap<String, VecDeque<(u64, Meant, Meant)>>,
    /// Each path's latest replacement, oldest first: the order paths are forgotten in.
    latest: BTreeMap<u64, String>,
    bytes: usize,
    tick: u64,
}

impl Lineage {
    /// Replacements kept per path: far more than happen while a handle is open.
    const PER_FILE: usize = 64;
    /// The table's bytes, its paths (kept twice) and replacements counted.
    pub const BYTES: usize = 4 << 20;
    /// What a path costs beside its name's bytes: its entries in both maps.
    const PATH: usize = 96;
    const STEP: usize = std::mem::size_of::<(u64, Meant, Meant)>();

    /// The point in the history a handle opened now starts from.
    pub fn mark(&self) -> u64 {
        self.tick
    }

    /// What `meant` at `rel` became through the replacements recorded after `since`.
    pub fn now(&self, rel: &str, meant: Meant, since: u64) -> Meant {
        let Some(list) = self.by_rel.get(rel) else {
            return meant;
        };
        list.iter()
            .filter(|(tick, _, _)| *tick > since)
            .fold(
                meant,
                |at, (_, before, after)| {
                    if *before == at { *after } else { at }
                },
            )
    }

    /// A transaction replaced `before` at `rel` with `after`.
    pub fn record(&mut self, rel: &str, before: Meant, after: Meant) {
        if before == after {
            return;
        }
        self.tick += 1;
        let tick = self.tick;
        let mut added = Self::STEP;
        let list = match self.by_rel.get_mut(rel) {
            Some(list) => list,
            None => {
                added += Self::cost_of_path(rel);
                self.by_rel.entry(rel.to_owned()).or_default()
            }
        };
        if let Some((last, _, _)) = list.back() {
            self.latest.remove(last);
        }
        list.push_back((tick, before, after));
        if list.len() > Self::PER_FILE {
            list.pop_front();
            added -= Self::STEP;
        }
        self.latest.insert(tick, rel.to_owned());
        self.bytes += added;
        self.forget_past_bound();
    }

    fn cost_of_path(rel: &str) -> usize {
        2 * rel.len() + Self::PATH
    }

    /// Forgets the paths replaced longest ago until the table is within `BYTES`.
    fn forget_past_bound(&mut self) {
        while self.bytes > Self::BYTES {
            let Some((_, rel)) = self.latest.pop_first() else {
                return;
            };
            if let Some(list) = self.by_rel.remove(&rel) {
                self.bytes -= Self::cost_of_path(&rel) + list.len() * Self::STEP;
            }
        }
    }
}

/// Held by a commit from taking its files' stripes until it has told the kernel
/// what it replaced; dropped, it lets the next commit on those files in. So
/// commits on one file run strictly one after the other, each recording what
/// it replaced (`Lineage`) before the next begins, and the kernel hears of each
/// replacement before the next one is made, as when one thread committed
/// everything: a process opening the file between two of them does not meet
/// one replaced twice under its cached entry.
pub struct Telling<'a> {
    gate: &'a CommitGate,
    rels: Vec<String>,
}

impl Drop for Telling<'_> {
    fn drop(&mut self) {
        let mut untold = self.gate.untold.lock();
        for r in &self.rels {
            untold.remove(r);
        }
        self.gate.told.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(ino: u64) -> Meant {
        Meant::File { dev: 1, ino }
    }

    #[test]
    fn a_handle_follows_the_replacements_made_after_it_opened_even_when_inodes_come_back() {
        let mut l = Lineage::default();
        l.record("a", file(1), file(2));
        let since = l.mark();
        // The file system hands inode 1 out again.
        l.record("a", file(2), file(1));
        l.record("a", file(1), file(2));
        l.record("a", file(2), file(3));
        assert_eq!(l.now("a", file(2), since), file(3));
        assert_eq!(l.now("a", file(9), since), file(9), "not ours: unchanged");
        assert_eq!(l.now("b", file(2), since), file(2));
        assert_eq!(l.now("a", Meant::Absent, 0), Meant::Absent);
        l.record("new", Meant::Absent, file(7));
        assert_eq!(l.now("new", Meant::Absent, since), file(7));
    }

    #[test]
    fn the_lineage_stays_within_its_bytes_and_forgets_the_oldest_paths_first() {
        let mut l = Lineage::default();
        let long = "d/".repeat(2000);
        for n in 0..10_000u64 {
            l.record(&format!("{long}{n}"), file(n), file(n + 1));
            assert!(l.bytes <= Lineage::BYTES, "{} bytes after {n}", l.bytes);
        }
        let since = 0;
        assert_eq!(
            l.now(&format!("{long}9999"), file(9999), since),
            file(10_000)
        );
        assert_eq!(
            l.now(&format!("{long}0"), file(0), since),
            file(0),
            "forgotten"
        );
        let names: usize = l.by_rel.keys().map(|k| k.len()).sum();
        assert!(2 * names <= Lineage::BYTES, "the names alone fit the bound");
        for _ in 0..200 {
            l.record("one", file(1), file(2));
            l.record("one", file(2), file(1));
        }
        assert_eq!(l.by_rel["one"].len(), Lineage::PER_FILE);
        assert!(l.bytes <= Lineage::BYTES);
    }
}
