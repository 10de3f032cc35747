//! The threads lately answered ESTALE for an open of a replaced node, whose
//! next open is therefore the kernel's one retry (see `replaced.rs`).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The kernel retries at once; an answer older than this was not retried.
const RETRY_WITHIN: Duration = Duration::from_secs(1);

/// Entries kept before old ones are dropped: one per thread in a retry.
const KEPT: usize = 256;

/// The threads lately told ESTALE for an open, whose next open of a replaced
/// node is therefore the kernel's one retry.
#[derive(Default)]
pub struct StaleRetries {
    told: Mutex<HashMap<u32, Told>>,
    /// Whether `told` holds anyone: a lookup, which every path walk makes,
    /// then takes no lock.
    any: AtomicBool,
}

/// A thread in the kernel's retry of an open.
struct Told {
    at: Instant,
    /// The name its retry looked up, and the node found there: the table's
    /// place for that node may lag the file system (a lookup racing a rename
    /// records the new name, then the rename's bookkeeping moves it back), but
    /// this is the name the user's open walked.
    looked_up: Option<(u64, OsString, u64)>,
}

impl Told {
    fn fresh(&self) -> bool {
        self.at.elapsed() < RETRY_WITHIN
    }
}

/// Where a retried open of node `ino` finds what stands in for it: the name the
/// retry looked up, else the node's last place.
pub struct Retry(Option<(u64, OsString, u64)>);

impl Retry {
    /// The directory and name the retry's own lookup found node `ino` at, if it did.
    pub fn place_of(self, ino: u64) -> Option<(u64, OsString)> {
        self.0
            .filter(|&(_, _, found)| found == ino)
            .map(|(parent, name, _)| (parent, name))
    }
}

impl StaleRetries {
    /// Thread `pid` was told ESTALE on the way to an open (by the open, or by
    /// the attributes its permission check asked for): its next open is the
    /// kernel's retry.
    pub fn told(&self, pid: u32) {
        let mut told = self.told.lock();
        if told.len() >= KEPT {
            told.retain(|_, t| t.fresh());
        }
        let at = Instant::now();
        told.insert(
            pid,
            Told {
                at,
                looked_up: None,
            },
        );
        self.any.store(true, Ordering::Release);
    }

    /// Thread `pid` looked `name` up in `parent` and found node `ino`.
    pub fn looked_up(&self, pid: u32, parent: u64, name: &OsStr, ino: u64) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        if let Some(t) = self.told.lock().get_mut(&pid).filter(|t| t.fresh()) {
            t.looked_up = Some((parent, name.to_owned(), ino));
        }
    }

    /// Whether thread `pid` is in the kernel's retry, which its open ends.
    pub fn retrying(&self, pid: u32) -> Option<Retry> {
        let told = self.told.lock();
        let t = told.get(&pid).filter(|t| t.fresh())?;
        Some(Retry(t.looked_up.clone()))
    }

    /// Whether thread `pid`'s open of a replaced node is the kernel's retry.
    pub fn again(&self, pid: u32) -> Option<Retry> {
        let mut told = self.told.lock();
        let t = told.remove(&pid).filter(Told::fresh);
        self.any.store(!told.is_empty(), Ordering::Release);
        t.map(|t| Retry(t.looked_up))
    }

    /// Thread `pid` opened a file: its retry, if it was in one, is over.
    pub fn opened(&self, pid: u32) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut told = self.told.lock();
        told.remove(&pid);
        self.any.store(!told.is_empty(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::super::nodes::ROOT;
    use super::*;

    #[test]
    fn only_the_open_right_after_an_estale_of_the_same_thread_is_a_retry() {
        let r = StaleRetries::default();
        assert!(r.again(7).is_none(), "a first open is answered ESTALE");
        r.told(7);
        assert!(r.again(8).is_none(), "another thread's is too");
        assert!(
            r.retrying(7).is_some() && r.retrying(7).is_some(),
            "asking does not end the retry"
        );
        assert!(
            r.again(7).is_some(),
            "the same thread's next one is the kernel's retry"
        );
        assert!(r.again(7).is_none(), "and the one after that is a new open");
        r.told(8);
        r.opened(8);
        assert!(
            r.again(8).is_none(),
            "8's retry met a live node: its next open is new"
        );
    }

    #[test]
    fn a_retry_stands_in_by_the_name_its_own_lookup_found_the_node_at() {
        let r = StaleRetries::default();
        let name = OsStr::new("f.txt");
        r.looked_up(7, ROOT, name, 10);
        r.told(7);
        r.looked_up(8, ROOT, OsStr::new("g.txt"), 10);
        let place = |retry: Option<Retry>, ino| retry.and_then(|r| r.place_of(ino));
        assert_eq!(
            place(r.retrying(7), 10),
            None,
            "looked up before it was told"
        );
        r.looked_up(7, ROOT, name, 10);
        assert_eq!(place(r.retrying(7), 10), Some((ROOT, name.into())));
        assert_eq!(place(r.retrying(7), 11), None, "another node: not its name");
        assert_eq!(place(r.again(7), 10), Some((ROOT, name.into())));
    }

    #[test]
    fn threads_told_long_ago_are_forgotten() {
        let r = StaleRetries::default();
        for pid in 0..KEPT as u32 {
            let at = Instant::now() - RETRY_WITHIN * 2;
            r.told.lock().insert(
                pid,
                Told {
                    at,
                    looked_up: None,
                },
            );
        }
        assert!(r.again(1).is_none(), "told too long ago: not a retry");
        r.told(10_000);
        assert_eq!(r.told.lock().len(), KEPT, "old entries dropped");
        r.told(10_001);
        assert_eq!(r.told.lock().len(), 2, "old entries dropped");
    }
}
