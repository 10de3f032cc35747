//! Transactions of this process on one file, one at a time.
//!
//! The engine decides without the store's locks (a slow decision must hold up
//! no transaction on another file), so two transactions on the same file
//! would both decide on the same bytes, and the second would find its file
//! changed under the lock and decide again. Holding the file's path here from
//! before its reading until after its commit makes them take turns instead,
//! and leaves only writers outside this process (a direct write, another
//! `editfs apply`) to change a file while it is decided.
//!
//! Lock order: the paths of a transaction (taken together, all or none, so two
//! transactions on overlapping sets of files never wait for each other in a
//! cycle), then what a mount holds of its files (`Hold`), then the store's
//! locks of its files. Never the other way round: a transaction that holds
//! the store's locks takes no path.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::LazyLock;

use parking_lot::{Condvar, Mutex};

/// The paths held now, and a wake-up for those waiting for one.
struct Table {
    held: Mutex<HashSet<PathBuf>>,
    freed: Condvar,
}

/// One table for the process: a path is one file whichever store or mount
/// edits it. It holds only the paths of transactions running now.
static TABLE: LazyLock<Table> = LazyLock::new(|| Table {
    held: Mutex::new(HashSet::new()),
    freed: Condvar::new(),
});

/// Paths held by one transaction; let go when dropped.
pub struct Turn {
    paths: Vec<PathBuf>,
}

/// Waits until none of `paths` is held by another transaction of this
/// process, then holds them all.
pub fn turn(paths: impl IntoIterator<Item = PathBuf>) -> Turn {
    let mut paths: Vec<PathBuf> = paths.into_iter().collect();
    paths.sort();
    paths.dedup();
    let mut held = TABLE.held.lock();
    while paths.iter().any(|p| held.contains(p)) {
        TABLE.freed.wait(&mut held);
    }
    held.extend(paths.iter().cloned());
    Turn { paths }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut held = TABLE.held.lock();
        for p in &self.paths {
            held.remove(p);
        }
        drop(held);
        TABLE.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_path_is_held_by_one_transaction_at_a_time_and_others_pass() {
        let a = || PathBuf::from("/serial-test/a");
        let first = turn([a()]);
        let waited = Arc::new(AtomicBool::new(false));
        let second = {
            let waited = waited.clone();
            std::thread::spawn(move || {
                let _t = turn([a(), PathBuf::from("/serial-test/b")]);
                waited.store(true, Ordering::SeqCst);
            })
        };
        // Another path is free meanwhile.
        drop(turn([PathBuf::from("/serial-test/c")]));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !waited.load(Ordering::SeqCst),
            "the second ran while the first held a"
        );
        drop(first);
        second.join().unwrap();
        assert!(waited.load(Ordering::SeqCst));
        assert!(
            TABLE
                .held
                .lock()
                .iter()
                .all(|p| !p.starts_with("/serial-test"))
        );
    }
}
