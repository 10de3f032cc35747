//! Limits under abuse, with the daemon as root and `allow_other`, the agent as
//! `nobody`: what the mount's view of editfs's state shows to whom, how much an
//! open `F.edit` may buffer, and how the log stays bounded.

use crate::common;

use common::{as_nobody, text};

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_state_dir_inside_source_under_another_name_is_refused_at_mount_time() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, mnt) = (tmp.path().join("src"), tmp.path().join("mnt"));
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::create_dir(&mnt).unwrap();
    for state in [src.join("state"), src.join("sub/../kept")] {
        for daemon in [false, true] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_editfs"));
            cmd.arg("mount")
                .arg(&src)
                .arg(&mnt)
                .arg("--state-dir")
                .arg(&state);
            if daemon {
                cmd.arg("--daemon");
            }
            let (ok, err) = run_briefly(cmd, &mnt);
            assert!(!ok, "{} was accepted", state.display());
            assert!(err.contains("must not be inside SOURCE"), "{err}");
            assert!(!src.join("state").exists() && !src.join("kept").exists());
        }
    }
}

/// Runs `cmd` for at most 10 s; a mount it made is taken down again. Returns
/// whether it succeeded, and its standard error.
fn run_briefly(mut cmd: Command, mnt: &Path) -> (bool, String) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if began.elapsed() > Duration::from_secs(10) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mounted = fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .contains(&*mnt.to_string_lossy());
    if mounted {
        let _ = Command::new(env!("CARGO_BIN_EXE_editfs"))
            .arg("unmount")
            .arg(mnt)
            .status();
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let ok = status.is_some_and(|s| s.success()) || mounted;
    (ok, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A project `nobody` may write in, mounted by root for every user; `fill` adds
/// to it (as root, in SOURCE).
fn mount_for_nobody(args: &[&str], fill: impl FnOnce(&Path)) -> Option<common::Mount> {
    let m = common::Mount::start(&[&["-o", "allow_other"], args].concat(), |src: &Path| {
        fs::write(src.join("mine.txt"), "one\ntwo\n").unwrap();
        fs::set_permissions(src, fs::Permissions::from_mode(0o777)).unwrap();
        fs::set_permissions(src.join("mine.txt"), fs::Permissions::from_mode(0o666)).unwrap();
        fill(src);
    })?;
    let top = m.mnt.parent().unwrap();
    fs::set_permissions(top, fs::Permissions::from_mode(0o755)).unwrap();
    Some(m)
}

fn edit(rel: &str, search: &str, replace: &str) -> String {
    format!(
        "printf '%s\\n' '<<<<<<< SEARCH' '{search}' '=======' '{replace}' '>>>>>>> REPLACE' > {rel}.edit"
    )
}

#[test]
fn kept_versions_reports_history_and_log_show_a_user_only_what_that_user_may_read() {
    let Some(m) = mount_for_nobody(&[], |src| {
        fs::write(src.join("secret.txt"), "TOPSECRET one\n").unwrap();
        fs::set_permissions(src.join("secret.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::create_dir(src.join("private")).unwrap();
        fs::set_permissions(src.join("private"), fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(src.join("private/p.txt"), "HIDDENNAME one\n").unwrap();
        fs::write(src.join("root.txt"), "ROOTONLY one\n").unwrap();
        fs::set_permissions(src.join("root.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    }) else {
        return;
    };
    // Root edits its own files; nobody edits its own, then has a version of
    // root's file kept by renaming over it (the directory lets it).
    m.ok(&edit("secret.txt", "TOPSECRET one", "TOPSECRET two"));
    m.ok(&edit("root.txt", "ROOTONLY one", "ROOTONLY two"));
    m.ok("printf '%s\\n' private/p.txt '<<<<<<< SEARCH' 'HIDDENNAME one' '=======' 'HIDDENNAME two' '>>>>>>> REPLACE' > .editfs/edit");
    let out = as_nobody(
        &m,
        &(edit("mine.txt", "one", "ONE") + " && echo mine > evil && mv evil secret.txt"),
    );
    assert!(out.status.success(), "{}", text(&out));
    let versions = m.ok("ls .editfs/snapshots/secret.txt .editfs/versions/secret.txt");
    assert!(
        versions
            .lines()
            .filter(|l| l.parse::<u64>().is_ok())
            .count()
            >= 3,
        "{versions}"
    );

    let seen = as_nobody(
        &m,
        "for f in .editfs/snapshots/secret.txt/* .editfs/versions/secret.txt/* .editfs/snapshots/mine.txt/*; do echo \"== $f\"; cat \"$f\"; done; \
         echo '== status'; cat .editfs/status; cat .editfs/status.json; \
         echo '== history'; cat .editfs/history; echo '== log'; cat .editfs/log; \
         echo '== F.status'; cat secret.txt.status root.txt.status root.txt.status.json; \
         ls -l .editfs/snapshots/secret.txt; ls .editfs/snapshots/private .editfs/versions/private; \
         cat .editfs/snapshots/private/p.txt/*",
    );
    let seen = text(&seen);
    assert!(
        !seen.contains("TOPSECRET"),
        "root's file leaked to nobody:\n{seen}"
    );
    assert!(
        !seen.contains("ROOTONLY") && !seen.contains("root.txt\""),
        "{seen}"
    );
    assert!(
        !seen.contains("HIDDENNAME")
            && !seen.contains("\"private/p.txt\"")
            && !seen.contains("private/p.txt  ")
            && seen.contains("cannot open directory '.editfs/versions/private': Permission denied"),
        "{seen}"
    );
    assert!(
        seen.contains("one\ntwo\n"),
        "nobody reads its own file's version:\n{seen}"
    );
    assert!(
        seen.contains("mine.txt"),
        "nobody sees its own transactions:\n{seen}"
    );
    assert!(seen.contains("NOT SHOWN"), "{seen}");

    let root =
        m.ok("cat .editfs/snapshots/secret.txt/* .editfs/log .editfs/history .editfs/status");
    assert!(
        root.contains("TOPSECRET one") && root.contains("private/p.txt"),
        "{root}"
    );
    let mode = fs::metadata(m.src.join(".editfs"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// One log line as editfs writes it, for a log filled before the mount.
fn log_line(tx: u64) -> String {
    format!(
        "{{\"tx\":{tx},\"time\":\"2026-01-01T00:00:00Z\",\"kind\":\"edit\",\"outcome\":\"failed\",\"applied\":0,\"total\":1,\"files\":[{{\"file\":\"mine.txt\",\"sha256\":null,\"lines_added\":0,\"lines_removed\":0}}],\"error\":\"not_found\",\"pid\":1,\"command\":\"{}\"}}\n",
        "x".repeat(200)
    )
}

/// A mount for nobody whose SOURCE holds a log of `lines` lines from before it.
fn mount_with_log(args: &[&str], lines: u64) -> Option<common::Mount> {
    mount_for_nobody(args, |src| {
        fs::create_dir(src.join(".editfs")).unwrap();
        let log: String = (1..=lines).map(log_line).collect();
        fs::write(src.join(".editfs/log"), log).unwrap();
        fs::write(src.join(".editfs/txid"), format!("{lines}\n")).unwrap();
    })
}

#[test]
fn a_long_log_is_never_rendered_for_a_stat_and_a_reader_does_not_stall_commits() {
    // Just under the size at which the log moves to log.1: all of it is current.
    let lines = (7 << 20) / log_line(1).len() as u64;
    let Some(m) = mount_with_log(&[], lines) else {
        return;
    };
    // The same listings of a plain directory are the yardstick, so a busy machine
    // slows both; rendering this log takes about 0.1 s, 8 s or more for 80.
    let timed = |script: &str| {
        let began = Instant::now();
        m.ok(script);
        began.elapsed()
    };
    m.ok("mkdir plain && touch plain/a plain/b plain/c");
    let plain = timed(
        "for i in $(seq 80); do ls -l plain > /dev/null; stat mine.txt plain/a > /dev/null; done",
    );
    let state = timed(
        "for i in $(seq 80); do ls -l .editfs > /dev/null; stat mine.txt.status .editfs/status > /dev/null; done",
    );
    assert!(
        state < plain * 3 + Duration::from_secs(2),
        "80 listings of .editfs took {state:?}, of a plain directory {plain:?}: a stat renders the log"
    );
    // A reader that holds the log open and reads it slowly, while edits commit.
    let reader = m.mnt.join(".editfs/log");
    let slow = std::thread::spawn(move || {
        use std::io::Read;
        let mut f = fs::File::open(reader).unwrap();
        let mut buf = [0u8; 4096];
        let mut n = 0;
        for _ in 0..30 {
            n += f.read(&mut buf).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        n
    });
    let long_arg = "y".repeat(100_000);
    for i in 0..5 {
        let replace = format!("line {i}");
        let search = if i == 0 {
            "two".to_owned()
        } else {
            format!("line {}", i - 1)
        };
        let payload = m.mnt.parent().unwrap().join("payload");
        let body = format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n");
        fs::write(&payload, body).unwrap();
        m.ok_within(
            &format!(
                "bash -c 'cat \"$0\" > mine.txt.edit' {} {long_arg}",
                payload.display()
            ),
            Duration::from_secs(10),
        );
    }
    assert!(slow.join().unwrap() > 0);
    let log = fs::read_to_string(m.src.join(".editfs/log")).unwrap();
    let last = log.lines().last().unwrap();
    // The three files `touch` made took an id each, then the five edits.
    assert!(
        last.starts_with(&format!("{{\"tx\":{}", lines + 3 + 5)),
        "{last}"
    );
    assert_eq!(m.src_file("mine.txt"), b"one\nline 4\n");
    assert!(
        last.len() < 1024,
        "the stored command line is bounded: {} bytes",
        last.len()
    );
    let history = m.ok("cat .editfs/history");
    assert!(lines + 3 + 5 > 1000);
    assert_eq!(
        history.lines().count(),
        1 + 1000 + 1,
        "the header, the latest 1000 lines, and the note that older ones are not read"
    );
}

/// Runs a Python script in the mount (as root; the script may fork and drop to
/// `nobody` itself); returns its output.
fn python(m: &common::Mount, script: &str) -> String {
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .current_dir(&m.mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_write_past_the_size_limit_fails_at_once_with_efbig() {
    let Some(m) = mount_for_nobody(&["--max-content-size", "100K"], |_| {}) else {
        return;
    };
    let out = python(
        &m,
        r#"
import errno, os
os.setgroups([]); os.setgid(65534); os.setuid(65534)
fd = os.open('mine.txt.edit', os.O_WRONLY | os.O_TRUNC)
total = 0
try:
    while total < 50_000_000:
        total += os.write(fd, b'x' * 65536)
    print('accepted', total)
except OSError as e:
    print('write', errno.errorcode[e.errno], total)
try:
    os.close(fd)
    print('close ok')
except OSError as e:
    print('close', errno.errorcode[e.errno])
"#,
    );
    // Nothing past the limit was taken: the refused write is the one that crossed it.
    let taken: usize = out
        .strip_prefix("write EFBIG ")
        .and_then(|rest| rest.split('\n').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(taken <= 100 * 1024 && taken + 65536 > 100 * 1024, "{out}");
    assert!(out.ends_with("\nclose EFBIG\n"), "{out}");
    let status = m.ok("cat mine.txt.status");
    assert!(
        status.contains("too_large") && status.contains("102400"),
        "{status}"
    );
    assert_eq!(m.src_file("mine.txt"), b"one\ntwo\n");
}

/// Opens `mine.txt.edit` again and again, writing 90,000 bytes to each and
/// keeping it open, until a write fails: prints the user's tag, how many handles
/// hold a payload, and the errno.
const FILL: &str = r#"
import errno, os
def fill(tag):
    fds = []
    while len(fds) < 200:
        fd = os.open('mine.txt.edit', os.O_WRONLY)
        try:
            os.write(fd, b'x' * 90000)
            fds.append(fd)
        except OSError as e:
            print(tag, len(fds), errno.errorcode[e.errno], flush=True)
            fds.append(fd)
            return fds
    print(tag, len(fds), 'unbounded', flush=True)
    return fds
def close(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
"#;

#[test]
fn open_edit_handles_buffer_at_most_a_cap_per_user_and_one_overall() {
    let args = [
        "--max-buffered-per-user",
        "1000000",
        "--max-buffered",
        "1500000",
    ];
    let Some(m) = mount_for_nobody(&args, |_| {}) else {
        return;
    };
    let out = python(
        &m,
        &(FILL.to_owned()
            + r#"
full, go = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
    fds = fill('nobody')
    os.write(full[1], b'1')
    os.read(go[0], 1)
    close(fds)
    close(fill('nobody again'))
    os._exit(0)
os.read(full[0], 1)
fds = fill('root')
close(fds)
os.write(go[1], b'1')
os.waitpid(pid, 0)
"#),
    );
    assert_eq!(
        out, "nobody 11 EDQUOT\nroot 5 ENOSPC\nnobody again 11 EDQUOT\n",
        "one user fills its share, the next what is left, and a close gives it back"
    );
    let status = m.ok("cat mine.txt.status");
    assert!(!status.starts_with("OK"), "{status}");
    assert_eq!(m.src_file("mine.txt"), b"one\ntwo\n");
}

/// The daemon serving `m`, found by its command line.
fn daemon_pid(m: &common::Mount) -> u32 {
    let src = m.src.to_string_lossy().into_owned();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            args.get(1) == Some(&&b"mount"[..]) && args.get(2) == Some(&src.as_bytes())
        })
        .expect("the daemon's process")
}

/// The daemon's resident memory in KiB and how many descriptors it holds.
fn footprint(pid: u32) -> (u64, usize) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    (rss, fds)
}

/// 10,000 open `F.edit` handles, each holding an unfinished payload of 100 KB from
/// one user, then of 4 KB (all of which fit): the daemon's memory grows by about
/// the per-user cap at most and comes back when they close, and its descriptors do
/// not grow at all. Prints the figures docs/semantics.md#control-files states. `cargo test --test mount_limits -- --ignored --nocapture`
#[test]
#[ignore = "takes a minute: 20,000 transactions"]
fn ten_thousand_open_edit_handles_keep_memory_and_descriptors_bounded() {
    let Some(m) = mount_for_nobody(&[], |_| {}) else {
        return;
    };
    let pid = daemon_pid(&m);
    let before = footprint(pid);
    let mut peaks = Vec::new();
    for size in [100_000, 4_000] {
        let script = format!(
            r#"
import errno, os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
fds, failed = [], {{}}
for i in range(10000):
    fd = os.open('mine.txt.edit', os.O_WRONLY)
    fds.append(fd)
    try:
        os.write(fd, b'x' * {size})
    except OSError as e:
        name = errno.errorcode[e.errno]
        failed[name] = failed.get(name, 0) + 1
print(len(fds), 'handles open, writes refused:', failed, flush=True)
sys.stdin.read(1)
for fd in fds:
    try:
        os.close(fd)
    except OSError:
        pass
"#
        );
        let mut child = Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(script)
            .current_dir(&m.mnt)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut said,
        )
        .unwrap();
        let held = footprint(pid);
        println!(
            "{size} bytes each: {}; daemon RSS {} KiB, {} descriptors",
            said.trim(),
            held.0,
            held.1
        );
        peaks.push(held);
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        let after = footprint(pid);
        println!(
            "after closing them: RSS {} KiB, {} descriptors",
            after.0, after.1
        );
        assert!(
            after.0 < before.0 + 16 * 1024,
            "memory given back: {} KiB",
            after.0
        );
    }
    println!("before: RSS {} KiB, {} descriptors", before.0, before.1);
    for (rss, fds) in peaks {
        assert!(rss < before.0 + 64 * 1024 + 48 * 1024, "RSS {rss} KiB");
        assert!(
            fds <= before.1 + 8,
            "{fds} descriptors, {} before",
            before.1
        );
    }
}

#[test]
fn a_rendered_log_held_open_counts_against_its_readers_buffer_budget() {
    // The view reads the latest 1000 lines (400 KiB of these): two views held
    // open pass 600 KiB.
    let lines = (7 << 20) / log_line(1).len() as u64;
    let args = ["--max-buffered-per-user", "600K"];
    let Some(m) = mount_with_log(&args, lines) else {
        return;
    };
    let out = python(
        &m,
        r#"
import errno, os
first = os.open('.editfs/log', os.O_RDONLY)
try:
    os.open('.editfs/log', os.O_RDONLY)
    print('second open ok')
except OSError as e:
    print('second open', errno.errorcode[e.errno])
os.close(first)
os.close(os.open('.editfs/log', os.O_RDONLY))
print('after close ok')
"#,
    );
    assert_eq!(out, "second open EDQUOT\nafter close ok\n");
}
