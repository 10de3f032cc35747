//! The mount's logic driven in process, without FUSE: a `Core` over a
//! temporary SOURCE and state directory, called as `fuse.rs` calls it.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, OnceLock, mpsc};
use std::time::Duration;

use super::core::Settings;
use super::edit_fs::EditFs;
use super::nodes::ROOT;
use super::source::Source;
use super::types::{Backing, Done, Errno, Requester, Res, Served};
use crate::store::{LogKind, Retention, Store};

struct Rig {
    fs: EditFs,
    src: tempfile::TempDir,
    _state: tempfile::TempDir,
}

fn settings(edits_only: bool) -> Settings {
    Settings {
        suffixes: Default::default(),
        show_control_files: false,
        edits_only,
        engine: Default::default(),
        preimages: Default::default(),
        buffers: Default::default(),
    }
}

/// SOURCE holding `files`, mirrored by a core with `settings`.
fn rig(files: &[(&str, &str)], settings: Settings) -> Rig {
    let src = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(src.path().join(name), text).unwrap();
    }
    let source = Source::open(src.path(), Path::new("/nonexistent-mount")).unwrap();
    let store = Store::open_with(state.path(), Retention::default()).unwrap();
    let fs = EditFs::new(source, store, settings, Arc::new(OnceLock::new()));
    Rig {
        fs,
        src,
        _state: state,
    }
}

fn me() -> Requester {
    Requester {
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
        pid: std::process::id(),
    }
}

/// No kernel here to pass files through.
fn refuse(_: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Backing> {
    Err(std::io::Error::from_raw_os_error(libc::EPERM))
}

/// A deferred answer, and the way to wait for it.
fn answer<T: Send + 'static>() -> (Done<T>, mpsc::Receiver<Res<T>>) {
    let (tx, rx) = mpsc::channel();
    let done: Done<T> = Box::new(move |r| {
        let _ = tx.send(r);
    });
    (done, rx)
}

fn wait<T>(rx: mpsc::Receiver<Res<T>>) -> Res<T> {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the request was never answered")
}

impl Rig {
    fn lookup(&self, name: &str) -> u64 {
        self.fs
            .lookup(me(), ROOT, OsStr::new(name))
            .unwrap()
            .attr
            .0
            .ino
    }

    fn open(&self, ino: u64, flags: i32) -> Res<u64> {
        self.fs.open(me(), ino, flags, &refuse).map(|o| o.fh)
    }

    fn read_all(&self, ino: u64, fh: u64) -> Vec<u8> {
        let (done, rx) = answer();
        self.fs.read(me(), ino, fh, (0, 1 << 20), done);
        wait(rx).unwrap()
    }

    fn close(&self, ino: u64, fh: u64) -> Res<()> {
        let (done, rx) = answer();
        self.fs.flush(me(), ino, fh, done);
        let flushed = wait(rx);
        let (done, rx) = answer();
        self.fs.release(me(), ino, fh, done);
        wait(rx).unwrap();
        flushed
    }

    fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.src.path().join(name)).unwrap()
    }
}

impl Rig {
    /// Renames a new file holding `text` over `name`, as a commit does.
    fn replace(&self, name: &str, text: &str) {
        let tmp = self.src.path().join(".new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, self.src.path().join(name)).unwrap();
    }
}

#[test]
fn the_retried_open_of_a_node_replaced_again_reads_what_the_name_holds_now() {
    let r = rig(&[("a.txt", "v1\n")], settings(false));
    let first = r.lookup("a.txt");
    r.replace("a.txt", "v2\n");
    assert_eq!(
        r.open(first, libc::O_RDONLY),
        Err(Errno::ESTALE),
        "the first try: the kernel drops its entry and looks the name up again"
    );
    let second = r.lookup("a.txt");
    r.replace("a.txt", "v3\n");
    // The retry's permission check asks for the node's attributes first.
    let (attr, _) = r.fs.getattr_for(me(), second, None).unwrap();
    assert_eq!(attr.size, 3, "those of the file the name holds now");
    let opened = r.fs.open(me(), second, libc::O_RDONLY, &refuse).unwrap();
    assert!(
        matches!(opened.served, Served::Direct),
        "a stand-in is read through the daemon, not from the node's pages"
    );
    assert_eq!(r.read_all(second, opened.fh), b"v3\n");
    r.close(second, opened.fh).unwrap();
}

/// The table's place for a node can lag the file system: a lookup that meets a
/// rename between its `renameat` and its bookkeeping records the node under the
/// new name and keeps the old one as a link, which takes over once another
/// file takes the new name. The retry's open is of the name the kernel just
/// looked up, whatever the table says since.
#[test]
fn the_retried_open_reads_the_name_its_own_lookup_found() {
    let r = rig(&[("f.txt", "v1\n"), ("f.tmp0", "v2\n")], settings(false));
    let first = r.lookup("f.txt");
    r.lookup("f.tmp0");
    let src = r.src.path();
    std::fs::rename(src.join("f.tmp0"), src.join("f.txt")).unwrap();
    assert_eq!(r.open(first, libc::O_RDONLY), Err(Errno::ESTALE));
    let second = r.lookup("f.txt");
    r.replace("f.txt", "v3\n");
    // Another thread looks the name up, and the second node falls back to its old name.
    let other =
        r.fs.lookup(
            Requester {
                pid: me().pid + 1,
                ..me()
            },
            ROOT,
            OsStr::new("f.txt"),
        )
        .unwrap();
    assert_ne!(other.attr.0.ino, second);
    let (attr, _) = r.fs.getattr_for(me(), second, None).unwrap();
    assert_eq!(attr.size, 3, "the attributes of what f.txt holds now");
    let opened = r.fs.open(me(), second, libc::O_RDONLY, &refuse).unwrap();
    assert_eq!(r.read_all(second, opened.fh), b"v3\n");
    r.close(second, opened.fh).unwrap();
}

#[test]
fn the_retried_open_of_a_replaced_node_still_open_reads_its_own_file() {
    let r = rig(&[("a.txt", "v1\n")], settings(false));
    let ino = r.lookup("a.txt");
    let held = r.open(ino, libc::O_RDONLY).unwrap();
    r.replace("a.txt", "v2\n");
    assert_eq!(r.open(ino, libc::O_RDONLY), Err(Errno::ESTALE));
    let fh = r.open(ino, libc::O_RDONLY).unwrap();
    assert_eq!(
        r.read_all(ino, fh),
        b"v1\n",
        "as natively: the file looked up"
    );
    r.close(ino, fh).unwrap();
    r.close(ino, held).unwrap();
}

#[test]
fn a_retried_open_for_writing_of_a_replaced_node_stays_stale() {
    let r = rig(&[("a.txt", "v1\n")], settings(false));
    let ino = r.lookup("a.txt");
    r.replace("a.txt", "v2\n");
    assert_eq!(r.open(ino, libc::O_RDWR), Err(Errno::ESTALE));
    assert_eq!(r.open(ino, libc::O_RDWR), Err(Errno::ESTALE));
    assert_eq!(r.text("a.txt"), "v2\n");
}

#[test]
fn a_node_replaced_under_its_name_is_stale_never_missing() {
    let r = rig(&[("a.txt", "old\n")], settings(false));
    let ino = r.lookup("a.txt");
    std::fs::write(r.src.path().join("new"), "new\n").unwrap();
    std::fs::rename(r.src.path().join("new"), r.src.path().join("a.txt")).unwrap();
    assert_eq!(r.open(ino, libc::O_RDONLY), Err(Errno::ESTALE));
    assert_eq!(
        r.fs.getattr(me(), ino, None).map(|_| ()),
        Err(Errno::ESTALE)
    );
    let again = r.lookup("a.txt");
    assert_ne!(again, ino, "a new lookup finds the new file");
    assert!(r.open(again, libc::O_RDONLY).is_ok());
}

/// The table may hold a node under a name it has since lost without hearing of
/// it (a freed inode number handed to a new file that a rename then moves): the
/// kernel's name is what the user asked for, so the kernel must walk it again.
#[test]
fn a_node_whose_recorded_name_is_gone_is_stale_never_missing() {
    let r = rig(&[("a.txt", "text\n")], settings(false));
    let ino = r.lookup("a.txt");
    std::fs::rename(r.src.path().join("a.txt"), r.src.path().join("b.txt")).unwrap();
    assert_eq!(r.open(ino, libc::O_RDONLY), Err(Errno::ESTALE));
    assert_eq!(
        r.fs.getattr(me(), ino, None).map(|_| ()),
        Err(Errno::ESTALE)
    );
}

/// A node the table no longer holds (forgotten while the kernel raced to use
/// it) is stale too, for `getattr` and `open` as for every other request.
#[test]
fn a_node_the_table_no_longer_holds_is_stale_never_missing() {
    let r = rig(&[("a.txt", "text\n")], settings(false));
    let ino = r.lookup("a.txt");
    r.fs.forget(ino, 1);
    assert_eq!(r.open(ino, libc::O_RDONLY), Err(Errno::ESTALE));
    assert_eq!(
        r.fs.getattr(me(), ino, None).map(|_| ()),
        Err(Errno::ESTALE)
    );
}

#[test]
fn edits_only_refuses_to_remove_or_rename_over_an_existing_file() {
    let r = rig(&[("a.txt", "keep\n"), ("b.txt", "other\n")], settings(true));
    r.lookup("a.txt");
    r.lookup("b.txt");
    let a = OsStr::new("a.txt");
    assert_eq!(r.fs.unlink(me(), ROOT, a), Err(Errno::EROFS));
    let (from, to) = ((ROOT, OsStr::new("b.txt")), (ROOT, a));
    assert_eq!(r.fs.rename(me(), from, to, 0), Err(Errno::EROFS));
    assert_eq!(r.text("a.txt"), "keep\n");
    assert_eq!(r.text("b.txt"), "other\n");
    let made = r.fs.create(
        me(),
        (ROOT, OsStr::new("new.txt")),
        (0o644, 0o022),
        libc::O_WRONLY,
        &refuse,
    );
    assert!(made.is_ok(), "a new file may still be made");
}

#[test]
fn an_open_for_writing_keeps_the_files_pre_image() {
    let r = rig(&[("a.txt", "before\n")], settings(false));
    let ino = r.lookup("a.txt");
    let fh = r.open(ino, libc::O_WRONLY | libc::O_TRUNC).unwrap();
    assert_eq!(r.fs.write(fh, 0, b"after\n"), Ok(6));
    assert_eq!(r.close(ino, fh), Ok(()));
    assert_eq!(r.text("a.txt"), "after\n");
    let kept = r.fs.store.entries();
    let direct = kept.iter().find(|e| e.kind == LogKind::Direct);
    let Some(entry) = direct else {
        panic!("no direct write recorded: {kept:?}");
    };
    assert!(entry.file("a.txt").is_some(), "{entry:?}");
}

#[test]
fn a_flush_of_an_edit_handle_commits_and_the_status_reads_its_report() {
    let r = rig(&[("a.txt", "one\ntwo\n")], settings(false));
    let edit = r.lookup("a.txt.edit");
    let fh = r.open(edit, libc::O_WRONLY | libc::O_TRUNC).unwrap();
    let payload = b"<<<<<<< SEARCH\ntwo\n=======\nTWO\n>>>>>>> REPLACE\n";
    assert_eq!(r.fs.write(fh, 0, payload), Ok(payload.len() as u32));
    assert_eq!(r.close(edit, fh), Ok(()));
    assert_eq!(r.text("a.txt"), "one\nTWO\n");
    let status = r.lookup("a.txt.status");
    let fh = r.open(status, libc::O_RDONLY).unwrap();
    let report = String::from_utf8(r.read_all(status, fh)).unwrap();
    assert!(report.starts_with("OK"), "{report}");
}

#[test]
fn a_control_files_name_outlives_its_attributes_and_a_reports_close_costs_no_flush() {
    let r = rig(&[("a.txt", "one\n")], settings(false));
    let status = r.fs.lookup(me(), ROOT, OsStr::new("a.txt.status")).unwrap();
    assert_eq!(
        status.attr.1,
        Duration::ZERO,
        "a report's size changes with every commit"
    );
    assert!(
        status.name_ttl > Duration::ZERO,
        "the name is looked up once per TTL, not at every round trip"
    );
    let opened =
        r.fs.open(me(), status.attr.0.ino, libc::O_RDONLY, &refuse)
            .unwrap();
    assert!(
        matches!(opened.served, Served::Fixed),
        "a report has nothing to flush"
    );
    let edit = r.lookup("a.txt.edit");
    let opened = r.fs.open(me(), edit, libc::O_WRONLY, &refuse).unwrap();
    assert!(
        matches!(opened.served, Served::Direct),
        "an edit handle commits at its flush"
    );
}
