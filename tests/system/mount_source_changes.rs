//! Changes made directly in SOURCE show through the mount within a second, even
//! after the kernel cached the names, attributes, listings and pages they change:
//! real shell commands on a real mount, the change made beside it.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::Mount;

fn project(src: &Path) {
    fs::create_dir(src.join("lib")).unwrap();
    fs::write(src.join("lib/util.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(src.join("lib/other.txt"), "other\n").unwrap();
    fs::write(src.join("app.py"), "print('hi')\n").unwrap();
}

macro_rules! mount {
    () => {
        match Mount::start(&[], project) {
            Some(m) => m,
            None => return,
        }
    };
}

/// The contract's promise, with room for a busy machine to schedule the check.
const PROMISE: Duration = Duration::from_millis(1000);
const SLACK: Duration = Duration::from_millis(300);

/// Runs `script` in the mount until its output satisfies `shows`, failing if
/// that takes longer than the promise (counted from `changed`).
fn shows_within(m: &Mount, changed: Instant, script: &str, shows: impl Fn(&str) -> bool) {
    let deadline = changed + PROMISE + SLACK;
    loop {
        let out = m.sh(script);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if shows(&text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{script}` still shows {text:?} {:?} after the change",
            changed.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads everything the kernel caches of SOURCE, `lib/` and the files in it,
/// twice (the second time from the cache).
fn warm(m: &Mount) {
    for _ in 0..2 {
        m.ok("ls -la . lib >/dev/null; cat lib/*.txt >/dev/null; stat lib/util.txt lib/other.txt >/dev/null");
        let _ = m.sh("stat lib/new.txt lib/sub lib/a moved.txt 2>/dev/null");
    }
}

#[test]
fn a_file_created_in_source_shows_in_a_cached_listing_and_name_within_a_second() {
    let m = mount!();
    warm(&m);
    fs::write(m.src.join("lib/new.txt"), "fresh\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "ls lib", |o| o.contains("new.txt"));
    shows_within(&m, at, "cat lib/new.txt", |o| o == "fresh\n");
}

#[test]
fn a_file_removed_in_source_goes_from_a_cached_listing_and_name_within_a_second() {
    let m = mount!();
    warm(&m);
    fs::remove_file(m.src.join("lib/other.txt")).unwrap();
    let at = Instant::now();
    shows_within(&m, at, "ls lib", |o| !o.contains("other.txt"));
    shows_within(
        &m,
        at,
        "stat lib/other.txt >/dev/null 2>&1 || echo gone",
        |o| o == "gone\n",
    );
}

#[test]
fn a_file_renamed_in_source_shows_under_its_new_name_within_a_second() {
    let m = mount!();
    warm(&m);
    fs::rename(m.src.join("lib/other.txt"), m.src.join("moved.txt")).unwrap();
    let at = Instant::now();
    shows_within(&m, at, "ls lib; ls", |o| {
        !o.contains("other.txt") && o.contains("moved.txt")
    });
    shows_within(&m, at, "cat moved.txt", |o| o == "other\n");
}

#[test]
fn a_mode_changed_in_source_shows_within_a_second() {
    let m = mount!();
    warm(&m);
    fs::set_permissions(
        m.src.join("lib/util.txt"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let at = Instant::now();
    shows_within(&m, at, "stat -c %a lib/util.txt", |o| o == "600\n");
}

#[test]
fn content_rewritten_in_source_shows_within_a_second_though_its_pages_were_cached() {
    let m = mount!();
    warm(&m);
    // Same size: only the content and the times tell the change.
    fs::write(m.src.join("lib/util.txt"), "ONE\nTWO\nTHREE\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "cat lib/util.txt", |o| o == "ONE\nTWO\nTHREE\n");
    // Appended to: the new size shows too.
    fs::OpenOptions::new()
        .append(true)
        .open(m.src.join("lib/util.txt"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"four\n"))
        .unwrap();
    let at = Instant::now();
    shows_within(&m, at, "stat -c %s lib/util.txt", |o| o == "19\n");
}

#[test]
fn a_new_directory_and_a_file_in_it_show_within_a_second() {
    let m = mount!();
    warm(&m);
    fs::create_dir(m.src.join("lib/sub")).unwrap();
    fs::write(m.src.join("lib/sub/inner.txt"), "inner\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "ls lib", |o| o.contains("sub"));
    shows_within(&m, at, "cat lib/sub/inner.txt", |o| o == "inner\n");
    // Now cached too: a second file in it shows as well.
    m.ok("ls lib/sub >/dev/null; ls lib/sub >/dev/null");
    fs::write(m.src.join("lib/sub/second.txt"), "2\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "ls lib/sub", |o| o.contains("second.txt"));
}

#[test]
fn a_deep_tree_made_with_mkdir_p_shows_within_a_second() {
    let m = mount!();
    warm(&m);
    let deep = m.src.join("lib/a/b/c/d");
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("leaf.txt"), "leaf\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "find lib/a -type f", |o| {
        o == "lib/a/b/c/d/leaf.txt\n"
    });
    shows_within(&m, at, "cat lib/a/b/c/d/leaf.txt", |o| o == "leaf\n");
}

#[test]
fn a_file_changed_through_another_of_its_names_shows_within_a_second() {
    let m = mount!();
    fs::create_dir(m.src.join("elsewhere")).unwrap();
    fs::hard_link(m.src.join("lib/util.txt"), m.src.join("elsewhere/link.txt")).unwrap();
    warm(&m);
    // Through the other name, in a directory the kernel never looked into.
    fs::write(m.src.join("elsewhere/link.txt"), "via the link, longer\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "cat lib/util.txt", |o| {
        o == "via the link, longer\n"
    });
}

/// The kernel cached the file while it had one name; the second name comes later,
/// and a link count's change raises no event in the file's own directory.
#[test]
fn a_file_linked_after_it_was_cached_shows_changes_through_the_new_name_within_a_second() {
    let m = mount!();
    fs::create_dir(m.src.join("elsewhere")).unwrap();
    warm(&m);
    m.ok("ls elsewhere >/dev/null");
    fs::hard_link(m.src.join("lib/util.txt"), m.src.join("elsewhere/link.txt")).unwrap();
    let at = Instant::now();
    shows_within(&m, at, "stat -c %h lib/util.txt", |o| o == "2\n");
    fs::write(m.src.join("elsewhere/link.txt"), "via the link, longer\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "cat lib/util.txt", |o| {
        o == "via the link, longer\n"
    });
}

/// A sandbox or a user mounts over a directory inside the mount (a tmpfs for a
/// build directory, a read-only bind of `.git`): telling the kernel of a change
/// in SOURCE must not unmount it, as dropping the directory's entry does.
#[test]
fn a_mount_over_a_directory_in_the_mount_survives_a_change_of_that_directory_in_source() {
    let m = mount!();
    warm(&m);
    let over = m.mnt.join("lib");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "over-lib"])
        .arg(&over)
        .status()
        .unwrap();
    assert!(mounted.success());
    let still_mounted = || {
        std::process::Command::new("mountpoint")
            .arg("-q")
            .arg(&over)
            .status()
            .unwrap()
            .success()
    };
    assert!(still_mounted());
    fs::set_permissions(m.src.join("lib"), fs::Permissions::from_mode(0o700)).unwrap();
    std::thread::sleep(PROMISE);
    let kept = still_mounted();
    let _ = std::process::Command::new("umount").arg(&over).status();
    assert!(
        kept,
        "the mount over lib/ went when lib/ changed mode in SOURCE"
    );
}

/// Whether something is mounted at `path`.
fn mountpoint(path: &Path) -> bool {
    std::process::Command::new("mountpoint")
        .arg("-q")
        .arg(path)
        .status()
        .unwrap()
        .success()
}

/// The watcher's queue overflows (the daemon paused while SOURCE changed a
/// lot): the kernel is told what changed meanwhile, a name it holds as missing
/// included, but a mount over a directory that did not change stays.
#[test]
fn after_an_overflow_of_the_watcher_queue_changes_show_and_a_mount_over_an_unchanged_directory_stays()
 {
    let m = mount!();
    fs::create_dir(m.src.join("busy")).unwrap();
    warm(&m);
    m.ok("ls busy >/dev/null");
    let over = m.mnt.join("lib");
    let tmpfs = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "over-lib"])
        .arg(&over)
        .status()
        .unwrap();
    assert!(tmpfs.success());
    m.signal(rustix::process::Signal::STOP);
    // Three events a file, far beyond the default queue of 16384.
    for i in 0..8000 {
        fs::write(m.src.join(format!("busy/f{i}")), "x").unwrap();
    }
    fs::write(m.src.join("app.py"), "print('changed while paused')\n").unwrap();
    fs::write(m.src.join("moved.txt"), "made while paused\n").unwrap();
    m.signal(rustix::process::Signal::CONT);
    let at = Instant::now();
    shows_within(&m, at, "cat app.py", |o| {
        o == "print('changed while paused')\n"
    });
    // The kernel is told in one go; what follows the first change is told
    // within milliseconds.
    std::thread::sleep(Duration::from_millis(300));
    let kept = mountpoint(&over);
    let _ = std::process::Command::new("umount").arg(&over).status();
    assert!(
        kept,
        "the mount over lib/ went when the watcher's queue overflowed"
    );
    shows_within(&m, at, "cat moved.txt 2>&1", |o| o == "made while paused\n");
    shows_within(&m, at, "ls busy | wc -l", |o| o == "8000\n");
}

/// A FUSE file system mounted inside SOURCE (an sshfs, a dev container's
/// share, another editfs) changes with no event this kernel sees: what the
/// mount shows of it keeps the 1 s lifetime.
/// Another editfs mounted at `nested` in the mount's SOURCE, over a directory
/// of its own; detached when dropped, not unmounted: the outer daemon holds
/// directories in it open until it ends, and the inner one ends with the last.
struct Nested {
    inner: tempfile::TempDir,
    at: std::path::PathBuf,
}

impl Nested {
    fn mount(m: &Mount) -> Nested {
        let inner = tempfile::tempdir().unwrap();
        fs::write(inner.path().join("f"), "v1\n").unwrap();
        let at = m.src.join("nested");
        fs::create_dir(&at).unwrap();
        let started = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
            .arg("mount")
            .arg(inner.path())
            .arg(&at)
            .arg("--daemon")
            .output()
            .unwrap();
        assert!(started.status.success(), "{started:?}");
        Nested { inner, at }
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status();
    }
}

#[test]
fn a_fuse_file_system_mounted_inside_source_shows_its_own_changes_within_a_second() {
    let m = mount!();
    let nested = Nested::mount(&m);
    for _ in 0..2 {
        m.ok("ls -la nested >/dev/null; cat nested/f >/dev/null; stat nested nested/f >/dev/null");
    }
    // Same size: only the times and the content tell the change.
    fs::write(nested.inner.path().join("f"), "v2\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "cat nested/f", |o| o == "v2\n");
    fs::write(nested.inner.path().join("g"), "new\n").unwrap();
    let at = Instant::now();
    shows_within(&m, at, "ls nested", |o| o.contains('g'));
}

#[test]
fn changes_made_through_the_mount_show_at_once() {
    let m = mount!();
    warm(&m);
    m.ok("echo made > lib/made.txt && ls lib | grep -q made.txt && rm lib/other.txt && ! ls lib | grep -q other.txt");
    m.ok("mv lib/made.txt lib/renamed.txt && cat lib/renamed.txt | grep -q made && chmod 600 lib/renamed.txt && [ $(stat -c %a lib/renamed.txt) = 600 ]");
}

/// The kernel keeps a directory's listing across opens: a transaction that
/// makes a file, or removes one, must drop it before its `close` returns.
#[test]
fn a_file_a_transaction_makes_or_removes_shows_in_a_cached_listing_at_once() {
    let m = mount!();
    warm(&m);
    let made = "printf '<<<<<<< SEARCH\\n=======\\nmade\\n>>>>>>> REPLACE\\n' > lib/made.txt.edit";
    m.ok(&format!("{made} && ls lib | grep -qx made.txt"));
    let removed = "printf '*** Begin Patch\\n*** Delete File: lib/other.txt\\n*** End Patch\\n' > .editfs/edit";
    m.ok(&format!(
        "ls lib >/dev/null; {removed} && ! ls lib | grep -q other.txt"
    ));
    let ino = "ls -i lib | grep util.txt | cut -d' ' -f1";
    let edit =
        "printf '<<<<<<< SEARCH\\ntwo\\n=======\\n2\\n>>>>>>> REPLACE\\n' > lib/util.txt.edit";
    let out = m.ok(&format!("{ino}; {edit}; {ino}; stat -c %i lib/util.txt"));
    let n: Vec<&str> = out.lines().collect();
    assert_eq!(
        n[1], n[2],
        "the listing's inode number is the file's: {out}"
    );
    assert_ne!(
        n[0], n[1],
        "a commit renames a new inode over the file: {out}"
    );
}

/// Kept versions are listed from the store: a listing read before an edit
/// shows the edit's version right after it.
#[test]
fn a_new_kept_version_shows_in_a_listing_read_before_it() {
    let m = mount!();
    let edit = |from: &str, to: &str| {
        format!(
            "printf '<<<<<<< SEARCH\\n{from}\\n=======\\n{to}\\n>>>>>>> REPLACE\\n' > lib/util.txt.edit"
        )
    };
    m.ok(&edit("one", "1"));
    let listed = m.ok("ls .editfs/snapshots/lib/util.txt; ls .editfs/snapshots/lib/util.txt");
    let first: Vec<&str> = listed.lines().collect();
    assert_eq!(first.len(), 2, "{listed}");
    m.ok(&edit("two", "2"));
    let now = m.ok(
        "ls .editfs/snapshots/lib/util.txt | wc -l; cd .editfs/versions/lib/util.txt && ls | wc -l",
    );
    assert_eq!(now, "2\n2\n", "each edit's version is listed at once");
}

/// ramfs keeps coarse timestamps and no watch covers a file system mounted
/// inside SOURCE: a file made there in the same tick as a listing through
/// the mount leaves the directory's mtime as the listing saw it, so the
/// mtime cannot tell the kernel's kept listing is stale. Once, it stayed
/// missing for good.
#[test]
fn a_file_made_in_an_unwatched_directory_right_after_a_listing_shows_within_a_second() {
    let m = mount!();
    let Some(rd) = common::Inside::mount(&m.src.join("rd"), "ramfs") else {
        return;
    };
    for i in 0..5 {
        fs::write(rd.0.join(format!("a{i}")), "").unwrap();
        m.ok("ls rd >/dev/null");
        fs::write(rd.0.join(format!("b{i}")), "").unwrap();
        let at = Instant::now();
        let name = format!("b{i}");
        shows_within(&m, at, "ls rd", |o| o.lines().any(|l| l == name));
    }
}

/// A transaction in a directory no watch covers (a ramfs inside SOURCE)
/// makes a file there: the listing the kernel kept must show it at once.
#[test]
fn a_file_a_transaction_makes_in_an_unwatched_directory_is_listed_at_once() {
    let m = mount!();
    let Some(rd) = common::Inside::mount(&m.src.join("rd"), "ramfs") else {
        return;
    };
    fs::write(rd.0.join("f"), "").unwrap();
    for i in 0..5 {
        m.ok("ls rd >/dev/null; ls rd >/dev/null");
        let made = format!(
            "printf '<<<<<<< SEARCH\\n=======\\nmade\\n>>>>>>> REPLACE\\n' > rd/made{i}.txt.edit"
        );
        let listed = m.ok(&format!("{made} && ls rd"));
        assert!(
            listed.lines().any(|l| l == format!("made{i}.txt")),
            "{listed}"
        );
    }
}

/// A file system mounted in SOURCE over a directory the kernel knows raises
/// no event: the mount goes on showing the directory it knew, as before the
/// kernel opened directories itself, instead of failing `ls` with ESTALE.
#[test]
fn a_directory_covered_by_a_mount_in_source_still_lists() {
    let m = mount!();
    m.ok("ls lib >/dev/null");
    let Some(covering) = common::Inside::mount(&m.src.join("lib"), "tmpfs") else {
        return;
    };
    let listed = m.sh("ls lib");
    drop(covering);
    assert!(listed.status.success(), "{listed:?}");
}
