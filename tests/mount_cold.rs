//! Cold walks: files the kernel has not cached yet cost as few round trips
//! to the daemon, and as few waits for the disk, as they can.

mod common;

use std::fs::{self, File};
use std::io::Read;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use common::Mount;
use rustix::process::Signal;

fn project(src: &Path) {
    fs::write(src.join("notes.txt"), "one\ntwo\n").unwrap();
}

macro_rules! mount {
    () => {
        match Mount::start(&[], project) {
            Some(m) => m,
            None => return,
        }
    };
}

/// `path` read to its end from a thread, or `None` if that took longer than
/// `limit` (the daemon being paused, a read request waits for it).
fn read_within(file: File, len: usize, limit: Duration) -> Option<Vec<u8>> {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let mut all = vec![0; len];
        // A plain read: a size hint (fstat) could be a request of its own.
        (&file).read_exact(&mut all).unwrap();
        let _ = done.send(all);
    });
    finished.recv_timeout(limit).ok()
}

#[test]
fn the_first_read_of_a_small_file_asks_the_daemon_nothing() {
    let m = mount!();
    let file = File::open(m.mnt.join("notes.txt")).unwrap();
    m.signal(Signal::STOP);
    let read = read_within(file, 8, Duration::from_secs(5));
    m.signal(Signal::CONT);
    let read = read.expect("the first read of a file opened cold waited for the daemon");
    assert_eq!(read, b"one\ntwo\n");
}
