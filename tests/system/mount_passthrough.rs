//! Real files passed through by the kernel: an open file's data never crosses
//! the daemon, and the contract holds as before.

use crate::common;

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use common::Mount;
use rustix::process::Signal;

fn project(src: &Path) {
    fs::write(src.join("app.py"), "old = 1\n").unwrap();
    fs::write(src.join("notes.txt"), "one\ntwo\n").unwrap();
    let mut big = b"one\ntwo\n".to_vec();
    big.resize(64 << 10, b'.');
    fs::write(src.join("big.log"), big).unwrap();
}

macro_rules! mount {
    () => {
        match Mount::start(&[], project) {
            Some(m) => m,
            None => return,
        }
    };
}

/// Whether this kernel and user let the mount pass files through: a mount that
/// falls back says so in its log.
fn passes_through(m: &Mount) -> bool {
    let log = m.log();
    let through = !log.contains("cannot pass files through") && !log.contains("refused a backing");
    if !through {
        eprintln!("\n*** SKIPPING: the kernel does not pass files through here ***\n{log}");
    }
    through
}

/// Writes are passed through too, but each still asks the daemon one question:
/// the kernel looks up `security.capability` before a write to a FUSE file.
/// Small files opened only to read are not: the kernel's page cache serves them.
#[test]
fn a_large_file_is_read_while_the_daemon_is_paused() {
    let m = mount!();
    let file = File::open(m.mnt.join("big.log")).unwrap();
    if !passes_through(&m) {
        return;
    }
    m.signal(Signal::STOP);
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        // Plain reads: a size hint (fstat) would be a request of its own.
        let mut head = vec![0; 4];
        (&file).read_exact(&mut head).unwrap();
        let mut all = vec![0; 8];
        file.read_exact_at(&mut all, 0).unwrap();
        let _ = done.send((head, all));
    });
    let answer = finished.recv_timeout(Duration::from_secs(10));
    m.signal(Signal::CONT);
    worker.join().unwrap();
    let (head, all) = answer.expect("reading an open file waited for the daemon");
    assert_eq!(head, b"one\n");
    assert_eq!(all, b"one\ntwo\n");
}

/// Reads `notes.txt` (its pages then cached by the kernel), runs `change`, and
/// returns what a read shows right after.
fn read_after(m: &Mount, change: &str) -> String {
    assert_eq!(m.ok("cat notes.txt"), "one\ntwo\n");
    m.ok(change);
    m.ok("cat notes.txt")
}

#[test]
fn a_cached_file_shows_a_commit_through_its_edit_file_at_once() {
    let m = mount!();
    let seen = read_after(
        &m,
        "printf '<<<<<<< SEARCH\\none\\n=======\\nuno\\n>>>>>>> REPLACE\\n' > notes.txt.edit",
    );
    assert_eq!(seen, "uno\ntwo\n");
}

#[test]
fn a_cached_file_shows_a_sed_in_place_at_once() {
    let m = mount!();
    assert_eq!(read_after(&m, "sed -i s/one/uno/ notes.txt"), "uno\ntwo\n");
}

#[test]
fn a_cached_file_shows_a_write_through_another_handle_at_once() {
    let m = mount!();
    let seen = read_after(
        &m,
        "sleep 0.3; printf uno | dd of=notes.txt conv=notrunc status=none",
    );
    assert_eq!(seen, "uno\ntwo\n");
}

/// A write through a shared map of a passed-through file tells the kernel's
/// cache of the mount nothing, not even that the attributes changed: the pages
/// an earlier read cached must be gone by then (a passed-through open does not
/// keep them), or the next read would show them.
#[test]
fn a_cached_file_shows_a_write_through_a_map_of_another_handle_at_once() {
    let m = mount!();
    // The pause lets the release of the first read reach the daemon, so the
    // writer opens the file afresh, passed through.
    let map = "sleep 0.3; python3 -c \"import mmap, os\n\
               f = os.open('notes.txt', os.O_RDWR); m = mmap.mmap(f, 0)\n\
               m[0:3] = b'uno'; m.flush(); m.close(); os.close(f)\"";
    assert_eq!(read_after(&m, map), "uno\ntwo\n");
}

#[test]
fn a_cached_file_shows_a_change_made_directly_in_source_within_a_second() {
    let m = mount!();
    assert_eq!(m.ok("cat notes.txt"), "one\ntwo\n");
    fs::write(m.src.join("notes.txt"), "uno\ntwo\n").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(m.ok("cat notes.txt"), "uno\ntwo\n");
}

#[test]
fn a_handle_open_before_a_commit_keeps_the_old_file_as_natively() {
    let m = mount!();
    let mut old = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.mnt.join("app.py"))
        .unwrap();
    m.ok(
        "printf '<<<<<<< SEARCH\\nold = 1\\n=======\\nnew = 2\\n>>>>>>> REPLACE\\n' > app.py.edit",
    );
    let mut text = String::new();
    old.read_to_string(&mut text).unwrap();
    assert_eq!(
        text, "old = 1\n",
        "the old handle reads the version it opened"
    );
    old.write_all_at(b"gone = 0\n", 0).unwrap();
    assert_eq!(fs::read(m.mnt.join("app.py")).unwrap(), b"new = 2\n");
    assert_eq!(m.src_file("app.py"), b"new = 2\n");
    let mut fresh = String::new();
    File::open(m.mnt.join("app.py"))
        .unwrap()
        .read_to_string(&mut fresh)
        .unwrap();
    assert_eq!(fresh, "new = 2\n");
}

#[test]
fn listings_show_the_size_of_a_file_still_open_for_writing() {
    let m = mount!();
    let out = m.ok("exec 3>>notes.txt; ls -l > /dev/null; echo three >&3; ls -l | awk '/notes/ {print $5}'; stat -c %s notes.txt");
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["14", "14"]);
}

#[test]
fn a_direct_write_through_a_passed_through_file_keeps_its_pre_image() {
    let m = mount!();
    m.ok("exec 3>>notes.txt; echo three >&3; exec 3>&-");
    let kept = m.ok("cat .editfs/snapshots/notes.txt/*");
    assert_eq!(kept, "one\ntwo\n");
}
