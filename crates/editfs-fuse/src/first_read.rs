//! The first read of a small file, served at its open.
//!
//! A small file opened only to read is served from the kernel's page cache of
//! the mount, filled by read requests. The first open of a node since the
//! kernel learnt it (after a lookup, a listing, or a cold start) always finds
//! that cache empty, so its first read would cost a round trip of its own on
//! top of the open's. Instead the open reads the file and stores it in the
//! kernel's cache (`FUSE_NOTIFY_STORE`) before it answers: a cold `grep -r`
//! then costs an open and a release per file, not an open, a read and a release.
//!
//! The store waits for any page a read of the same node holds locked, and
//! such a read waits for a worker. So one worker at a time primes (`Turn`, a
//! flag no one ever waits for), the others serve files as before: a read that
//! a concurrent open of the same file started always finds a worker free.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

/// Nodes whose first open came, and whether a worker is priming one now.
#[derive(Default)]
pub struct Primed {
    nodes: Mutex<HashSet<u64>>,
    busy: AtomicBool,
}

/// One worker's turn to prime a node; the next may when it ends.
pub struct Turn<'a>(&'a AtomicBool);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Primed {
    /// A turn to prime node `ino`, if this is its first open since the kernel
    /// learnt it and no other worker is priming. A first open that finds another
    /// worker at it is served as any other: its first read is a request.
    pub fn first_open(&self, ino: u64) -> Option<Turn<'_>> {
        if !self.nodes.lock().insert(ino) {
            return None;
        }
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Turn(&self.busy))
    }

    /// The kernel forgot node `ino`, and with it the node's pages.
    pub fn forgot(&self, ino: u64) {
        self.nodes.lock().remove(&ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_open_of_a_node_the_kernel_learnt_anew_primes_it() {
        let p = Primed::default();
        drop(p.first_open(7).expect("first open"));
        assert!(p.first_open(7).is_none(), "its pages are in the kernel now");
        p.forgot(7);
        assert!(p.first_open(7).is_some(), "forgotten, its pages went too");
    }

    #[test]
    fn one_worker_primes_at_a_time_and_a_first_open_meanwhile_is_served_plainly() {
        let p = Primed::default();
        let turn = p.first_open(1).expect("first open");
        assert!(p.first_open(2).is_none());
        drop(turn);
        assert!(p.first_open(3).is_some());
        assert!(p.first_open(2).is_none(), "node 2 had its first open");
    }
}
