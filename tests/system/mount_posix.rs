//! POSIX behaviour the mount must share with a native directory: hard links,
//! files used after their name is gone, and the modes new nodes get. The full
//! conformance run is `scripts/posix.sh`; these pin what it once found broken.

use crate::common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::Mount;

macro_rules! mount {
    () => {
        match Mount::start(&[], |src| {
            fs::write(src.join("a"), "one\n").unwrap();
            fs::set_permissions(src.join("a"), fs::Permissions::from_mode(0o644)).unwrap();
        }) {
            Some(m) => m,
            None => return,
        }
    };
}

#[test]
fn a_hard_link_keeps_the_file_when_its_other_name_goes() {
    let m = mount!();
    let out = m.ok("cat a >/dev/null; ln a b; rm b; cat a; ln a c; stat -c %h c; rm a; cat c");
    assert_eq!(out, "one\n2\none\n");
}

/// A listing hands out again the attributes the kernel was given a moment
/// before; a link, a rename or an unlink through the mount changes the link
/// count or ctime of a file whose name stays, and no listing may undo that.
#[test]
fn a_listing_right_after_a_link_rename_or_unlink_shows_the_new_attributes() {
    let m = mount!();
    let out = m.ok("stat -c %h a; ln a b; ls -l >/dev/null; stat -c %h a");
    assert_eq!(out, "1\n2\n", "link");
    let out = m.ok("stat -c %h a; rm b; ls -l >/dev/null; stat -c %h a");
    assert_eq!(out, "2\n1\n", "unlink");
    let out = m.ok("stat -c %z a >/dev/null; sleep 0.02; mv a c; ls -l >/dev/null; stat -c %z c");
    let ctime = m.ok("stat -c %z c");
    let native = std::process::Command::new("stat")
        .args(["-c", "%z"])
        .arg(m.src.join("c"))
        .output()
        .unwrap();
    assert_eq!(out, ctime);
    assert_eq!(out.as_bytes(), native.stdout, "rename");
}

#[test]
fn a_rename_over_one_hard_link_keeps_the_others() {
    let m = mount!();
    let out = m.ok("ln a b; echo two > t; mv t b; cat a b; stat -c %h a");
    assert_eq!(out, "one\ntwo\n1\n");
}

#[test]
fn an_unlinked_open_file_is_still_served_through_its_descriptor() {
    let m = mount!();
    let script = r#"python3 - <<'EOF'
import os
fd = os.open("a", os.O_RDWR)
os.unlink("a")
st = os.fstat(fd)
os.write(fd, b"ONE")
print(st.st_nlink, oct(st.st_mode & 0o777), os.pread(fd, 4, 0))
EOF"#;
    // The removal's kept copy is not the open inode: the writer sees no extra
    // link, no read-only mode, and its writes do not change the kept copy.
    assert_eq!(m.ok(script), "0 0o644 b'ONE\\n'\n");
    m.ok("test ! -e a");
}

#[test]
fn new_nodes_get_the_callers_mode_whatever_the_daemons_umask() {
    // The daemon runs under umask 022; the caller's below is 0.
    let Some(m) = Mount::start_with_umask(0o022, &[], |_| {}) else {
        return;
    };
    let status = fs::read_to_string(format!("/proc/{}/status", m.pid().unwrap())).unwrap();
    assert!(status.contains("\nUmask:\t0022\n"), "{status}");
    m.ok("umask 0; mkdir -m 777 d; touch f; mkfifo -m 666 p");
    let mode = |p: &str| fs::metadata(m.mnt.join(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("d"), 0o777);
    assert_eq!(mode("f"), 0o666);
    assert_eq!(mode("p"), 0o666);
}

#[test]
fn a_truncating_open_of_a_running_program_fails_etxtbsy_and_leaves_it_whole() {
    let m = mount!();
    let script = r#"cp "$(command -v sleep)" busy; chmod 755 busy; python3 - <<'EOF'
import os, subprocess, time
size = os.stat("busy").st_size
proc = subprocess.Popen(["./busy", "30"])
time.sleep(0.2)
for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC):
    try:
        os.close(os.open("busy", flags))
        print("opened")
    except OSError as e:
        print(os.strerror(e.errno))
print(os.stat("busy").st_size == size, proc.poll() is None)
proc.kill()
proc.wait()
EOF"#;
    // The kernel must refuse before the file is truncated: a truncation first
    // emptied the program under the running process.
    let busy = "Text file busy\n";
    assert_eq!(m.ok(script), format!("{busy}{busy}{busy}True True\n"));
    assert!(!m.src_file("busy").is_empty());
}

#[test]
fn truncating_opens_empty_files_and_control_files_as_before() {
    let m = mount!();
    // `O_RDONLY | O_TRUNC` truncates as natively; `> F.edit` sends an empty payload.
    let script = r#"python3 -c 'import os; os.close(os.open("a", os.O_RDONLY | os.O_TRUNC))'
stat -c %s a; echo two > a; cat a; : > a.edit; head -1 a.status"#;
    let out = m.ok(script);
    assert!(out.starts_with("0\ntwo\n"), "{out}");
    assert!(!out.contains("NO TRANSACTION"), "{out}");
}

/// `find` racing `rm -rf` printed "Stale file handle": it opened a directory,
/// the directory was removed, and its `fstat` of the open descriptor, which
/// natively never fails, reached the daemon for a node with no name left.
#[test]
fn fstat_of_an_open_directory_removed_since_succeeds() {
    let m = mount!();
    let script = r#"mkdir d && python3 - <<'EOF'
import os, stat
fd = os.open("d", os.O_RDONLY | os.O_DIRECTORY)
os.rmdir("d")
st = os.fstat(fd)
print(stat.S_ISDIR(st.st_mode))
EOF"#;
    assert_eq!(m.ok(script), "True\n");
}

/// Inode numbers are unique only within one file system. Two tmpfs inside
/// SOURCE number their files alike; each must still be its own file through
/// the mount (once, the second was served the first one's content).
#[test]
fn files_of_two_file_systems_inside_source_stay_apart() {
    // Dropped after the editfs mount, which is declared after them.
    let mut inner = Vec::new();
    let fill = |src: &std::path::Path| {
        for (dir, text) in [("one", "first\n"), ("two", "second\n")] {
            let d = src.join(dir);
            inner.extend(common::Inside::mount(&d, "tmpfs"));
            fs::write(d.join("f"), text).unwrap();
        }
    };
    let Some(m) = Mount::start(&[], fill) else {
        return;
    };
    if inner.len() < 2 {
        return;
    }
    let numbers = m.ok("stat -c %i one/f two/f");
    let same_natively = fs::metadata(m.src.join("one/f")).unwrap().ino()
        == fs::metadata(m.src.join("two/f")).unwrap().ino();
    assert!(
        same_natively,
        "the test needs one number on both file systems"
    );
    assert_eq!(m.ok("cat one/f two/f"), "first\nsecond\n");
    let n: Vec<&str> = numbers.lines().collect();
    assert_ne!(n[0], n[1], "one inode number for two files: {numbers}");
    m.ok("printf '<<<<<<< SEARCH\\nsecond\\n=======\\nsecond, edited\\n>>>>>>> REPLACE\\n' > two/f.edit");
    assert_eq!(m.ok("cat one/f two/f"), "first\nsecond, edited\n");
    assert_eq!(fs::read_to_string(m.src.join("one/f")).unwrap(), "first\n");
}
