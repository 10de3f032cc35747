//! Cold walks: files the kernel has not cached yet cost as few round trips
//! to the daemon, and as few waits for the disk, as they can.

use crate::common;

use std::fs::{self, File};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Mount;
use rustix::process::Signal;

/// Files in `dir/`, one more than a tool opening them in turn would read first.
const SIBLINGS: usize = 20;

fn project(src: &Path) {
    fs::write(src.join("notes.txt"), "one\ntwo\n").unwrap();
    fs::create_dir(src.join("dir")).unwrap();
    for i in 0..SIBLINGS {
        fs::write(src.join(format!("dir/f{i:02}.txt")), format!("file {i}\n")).unwrap();
    }
    fs::create_dir_all(src.join("tree/sub")).unwrap();
    fs::write(src.join("tree/sub/leaf.txt"), "leaf\n").unwrap();
}

/// The access time of the file at `path`, in seconds.
fn atime(path: &Path) -> i64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().atime()
}

/// Whether the first page of the file at `path` is in the page cache.
fn in_memory(path: &Path) -> bool {
    let file = File::open(path).unwrap();
    let len = 1;
    // SAFETY: a private read-only map of an open file, unmapped below; mincore
    // only writes the one byte of `vec`.
    unsafe {
        let at = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(at, libc::MAP_FAILED);
        let mut vec = 0u8;
        assert_eq!(libc::mincore(at, len, &mut vec), 0);
        libc::munmap(at, len);
        vec & 1 == 1
    }
}

/// Drops the file at `path` from the page cache.
fn evict(path: &Path) {
    let file = File::open(path).unwrap();
    file.sync_all().unwrap();
    // SAFETY: an advice on an open descriptor.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
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

#[test]
fn opening_a_file_to_read_reads_the_rest_of_its_directory_ahead() {
    let m = mount!();
    let files: Vec<_> = (1..SIBLINGS)
        .map(|i| m.src.join(format!("dir/f{i:02}.txt")))
        .collect();
    files.iter().for_each(|f| evict(f));
    assert!(
        files.iter().all(|f| !in_memory(f)),
        "the files were not dropped from the page cache"
    );
    assert_eq!(m.ok("cat dir/f00.txt"), "file 0\n");
    let began = Instant::now();
    while files.iter().any(|f| !in_memory(f)) {
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "files of the directory were not read ahead: {:?}",
            files.iter().filter(|f| !in_memory(f)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = m.ok("cat dir/f07.txt dir/f19.txt");
    assert_eq!(seen, "file 7\nfile 19\n");
}

#[test]
fn opening_a_file_to_write_reads_nothing_ahead() {
    let m = mount!();
    let other = m.src.join("dir/f01.txt");
    evict(&other);
    m.ok("echo more >> dir/f00.txt");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !in_memory(&other),
        "an open for writing read its directory ahead"
    );
}

/// Gives the directory at `path` an access time older than its modification
/// time, so that the next listing of it, which `relatime` lets set it, shows.
fn unlisted(path: &Path) {
    let at = |tv_sec| rustix::fs::Timespec { tv_sec, tv_nsec: 0 };
    let times = rustix::fs::Timestamps {
        last_access: at(1_000_000),
        last_modification: at(2_000_000),
    };
    rustix::fs::utimensat(rustix::fs::CWD, path, &times, rustix::fs::AtFlags::empty()).unwrap();
    assert_eq!(atime(path), 1_000_000);
}

/// Whether the directory at `path` is listed in SOURCE within `limit`.
fn listed_within(path: &Path, limit: Duration) -> bool {
    let began = Instant::now();
    while atime(path) == 1_000_000 {
        if began.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A listing of a directory reads its subdirectories' listings in SOURCE: seen
/// as the subdirectory's access time.
#[test]
fn listing_a_directory_walks_its_subdirectories_ahead() {
    let m = mount!();
    let sub = m.src.join("tree/sub");
    unlisted(&sub);
    assert_eq!(m.ok("ls tree"), "sub\n");
    assert!(
        listed_within(&sub, Duration::from_secs(5)),
        "the subdirectory was not walked ahead"
    );
    assert_eq!(m.ok("ls tree/sub"), "leaf.txt\n");
}

/// `git status` looks up every file of its index by name, without listing
/// first: the first lookup in a directory has the others' attributes read ahead.
#[test]
fn looking_up_a_name_reads_the_attributes_of_its_siblings_ahead() {
    let m = mount!();
    let dir = m.src.join("dir");
    unlisted(&dir);
    assert_eq!(m.ok("stat -c %s dir/f03.txt"), "7\n");
    assert!(
        listed_within(&dir, Duration::from_secs(5)),
        "the directory of a name looked up was not read ahead"
    );
    assert_eq!(m.ok("stat -c %s dir/f04.txt"), "7\n");
}

/// The directories whose entries were read ahead for a lookup are not read
/// again when their parent is listed (`git status` lists them right after).
#[test]
fn a_directory_read_ahead_for_a_lookup_is_not_walked_again_for_a_listing() {
    let m = mount!();
    let sub = m.src.join("tree/sub");
    unlisted(&sub);
    m.ok("stat tree/sub/leaf.txt");
    assert!(listed_within(&sub, Duration::from_secs(5)));
    unlisted(&sub);
    assert_eq!(m.ok("ls tree"), "sub\n");
    assert!(
        !listed_within(&sub, Duration::from_millis(500)),
        "the directory was read ahead twice"
    );
}
