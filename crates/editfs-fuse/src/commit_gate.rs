//! The commit gate: what keeps a commit on a file apart from direct writes of
//! it (each file held alone by a commit, shared by writes) and from other
//! commits on it (the commits not yet told to the kernel), and what editfs's
//! own transactions made of the files they replaced (the lineage). Its place
//! in the lock order is written in `core.rs`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use parking_lot::{Condvar, Mutex};

use crate::transaction::Meant;

/// The files held, the commits not yet told and the lineage.
#[derive(Default)]
pub struct CommitGate {
    /// Real files held now, by node id: an entry only while one is held or
    /// awaited, so the table grows with the requests running, not with the
    /// files. One file's commit holds up nothing but that file (a commit of
    /// 300 files, no edit of a 301st).
    held: Mutex<HashMap<u64, Use>>,
    /// Signalled whenever a file is let go.
    freed: Condvar,
    /// Files whose latest commit has not told the kernel yet (see `Telling`).
    untold: Mutex<HashSet<String>>,
    /// Signalled whenever a commit has told the kernel.
    told: Condvar,
    /// What editfs's own transactions made of the files they replaced.
    lineage: Mutex<Lineage>,
}

/// How a file is held: by direct writes, any number at once, or by one commit.
#[derive(Default)]
struct Use {
    writes: usize,
    commit: bool,
    /// Commits waiting for the file: a write that comes meanwhile waits
    /// behind them, so a stream of writes never keeps a commit out.
    waiting: usize,
}

impl Use {
    fn is_free(&self) -> bool {
        self.writes == 0 && !self.commit && self.waiting == 0
    }
}

impl CommitGate {
    /// Holds real file `ino` for a direct write, shared with other writes,
    /// once no commit holds it or waits for it.
    pub fn writing(&self, ino: u64) -> Writing<'_> {
        let mut held = self.held.lock();
        while held.get(&ino).is_some_and(|u| u.commit || u.waiting > 0) {
            self.freed.wait(&mut held);
        }
        held.entry(ino).or_default().writes += 1;
        Writing { gate: self, ino }
    }

    /// Holds the real files `inos` for one commit, alone: each in ascending
    /// order, once no write or other commit holds it, so two multi-file
    /// commits never wait on each other crosswise.
    pub fn committing(&self, inos: &[u64]) -> Committing<'_> {
        let mut inos = inos.to_vec();
        inos.sort_unstable();
        inos.dedup();
        let mut held = self.held.lock();
        for &ino in &inos {
            held.entry(ino).or_default().waiting += 1;
            while held.get(&ino).is_some_and(|u| u.commit || u.writes > 0) {
                self.freed.wait(&mut held);
            }
            let u = held.entry(ino).or_default();
            u.waiting -= 1;
            u.commit = true;
        }
        Committing { gate: self, inos }
    }

    /// Lets go of what `release` says of file `ino`.
    fn let_go(&self, ino: u64, release: impl FnOnce(&mut Use)) {
        let mut held = self.held.lock();
        if let Some(u) = held.get_mut(&ino) {
            release(u);
            if u.is_free() {
                held.remove(&ino);
            }
        }
        drop(held);
        self.freed.notify_all();
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

/// A direct write's hold on its file (see `CommitGate::writing`).
pub struct Writing<'a> {
    gate: &'a CommitGate,
    ino: u64,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.gate.let_go(self.ino, |u| u.writes -= 1);
    }
}

/// A commit's hold on its files (see `CommitGate::committing`).
pub struct Committing<'a> {
    gate: &'a CommitGate,
    inos: Vec<u64>,
}

impl Drop for Committing<'_> {
    fn drop(&mut self) {
        for &ino in &self.inos {
            self.gate.let_go(ino, |u| u.commit = false);
        }
    }
}

/// Held by a commit from taking its files until it has told the kernel
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
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Runs `take` on another thread; the receiver hears once it got through.
    fn got_through(gate: &Arc<CommitGate>, take: fn(&CommitGate)) -> mpsc::Receiver<()> {
        let (done, got) = mpsc::channel();
        let gate = gate.clone();
        std::thread::spawn(move || {
            take(&gate);
            let _ = done.send(());
        });
        got
    }

    const SOON: Duration = Duration::from_millis(200);
    const AT_ALL: Duration = Duration::from_secs(30);

    #[test]
    fn a_commit_holds_up_only_its_own_files() {
        let gate = Arc::new(CommitGate::default());
        let held = gate.committing(&[3, 1, 2, 3]);
        assert!(
            got_through(&gate, |g| drop(g.committing(&[4])))
                .recv_timeout(SOON)
                .is_ok()
        );
        assert!(
            got_through(&gate, |g| drop(g.writing(5)))
                .recv_timeout(SOON)
                .is_ok()
        );
        let write = got_through(&gate, |g| drop(g.writing(2)));
        let commit = got_through(&gate, |g| drop(g.committing(&[9, 1])));
        assert!(write.recv_timeout(SOON).is_err(), "a write passed a commit");
        assert!(
            commit.recv_timeout(SOON).is_err(),
            "two commits held one file"
        );
        drop(held);
        write.recv_timeout(AT_ALL).expect("the write went on");
        commit.recv_timeout(AT_ALL).expect("the commit went on");
        assert!(gate.held.lock().is_empty(), "nothing is left held");
    }

    #[test]
    fn a_waiting_commit_goes_before_writes_that_come_after_it() {
        let gate = Arc::new(CommitGate::default());
        let writing = gate.writing(1);
        let commit = got_through(&gate, |g| drop(g.committing(&[1])));
        while gate.held.lock().get(&1).is_none_or(|u| u.waiting == 0) {
            std::thread::yield_now();
        }
        let later = got_through(&gate, |g| drop(g.writing(1)));
        assert!(
            later.recv_timeout(SOON).is_err(),
            "a write went before a waiting commit"
        );
        drop(writing);
        commit.recv_timeout(AT_ALL).expect("the commit went on");
        later
            .recv_timeout(AT_ALL)
            .expect("the write went on after it");
    }

    #[test]
    fn commits_of_crossing_sets_of_files_never_wait_for_each_other_in_a_cycle() {
        let gate = Arc::new(CommitGate::default());
        let (done, finished) = mpsc::channel();
        for t in 0..8u64 {
            let (gate, done) = (gate.clone(), done.clone());
            std::thread::spawn(move || {
                for n in 0..500u64 {
                    let a = (t + n) % 5;
                    let b = (t * 3 + n * 7) % 5;
                    drop(gate.committing(&[a, b]));
                    drop(gate.writing(b));
                }
                let _ = done.send(());
            });
        }
        for _ in 0..8 {
            finished
                .recv_timeout(AT_ALL)
                .expect("no commit waits forever");
        }
    }

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
