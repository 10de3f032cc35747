//! editfs as the system starts it: mount(8) with `-t fuse.editfs`, an fstab line,
//! systemd's notify socket, and the daemon's log.
//!
//! Where FUSE (or a private mount namespace) is unavailable these tests skip with
//! a loud message, except when `CI` is set: there they fail.

use crate::common;

use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn editfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_editfs"))
}

fn mounted(mnt: &Path) -> bool {
    let table = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    table
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&*mnt.to_string_lossy()))
}

/// True when the test should go on; false (after saying why) when it should skip.
fn can_go_on(ok: bool, why: &str) -> bool {
    if ok {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "with CI set: {why}");
    eprintln!("\n*** SKIPPING: {why} ***\n");
    false
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A temp dir with SOURCE (holding `a.txt`) and an empty MOUNT.
fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (src, mnt) = (root.path().join("src"), root.path().join("mnt"));
    fs::create_dir(&src).unwrap();
    fs::create_dir(&mnt).unwrap();
    fs::write(src.join("a.txt"), "one\ntwo\n").unwrap();
    (root, src, mnt)
}

/// mount(8) runs helpers with PATH removed, so mount.fuse3 finds `editfs` only in
/// the shell's default PATH. The script runs in a private mount namespace where
/// a directory holding `editfs` is bound over /usr/local/bin, so the test needs
/// no change to the machine.
fn in_private_namespace(root: &Path, script: &str) -> Output {
    let bin = root.join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_editfs"), bin.join("editfs")).unwrap();
    let script = format!(
        "set -eu\nmount --bind '{}' /usr/local/bin\n{script}",
        bin.display()
    );
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// What mount(8) needs to run `-t fuse.editfs`, apart from editfs itself.
fn mount_helpers_usable() -> bool {
    let unshare = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .status()
        .is_ok_and(|s| s.success());
    unshare
        && Path::new("/dev/fuse").exists()
        && ["/usr/sbin/mount.fuse3", "/sbin/mount.fuse3"]
            .iter()
            .any(|p| Path::new(p).exists())
}

#[test]
fn mount_t_fuse_editfs_and_an_fstab_line_mount_in_the_background_with_dash_o_options() {
    let (root, src, mnt) = tree();
    let state = root.path().join("state");
    let fstab = root.path().join("fstab");
    fs::write(
        &fstab,
        format!(
            "# an fstab line as a user writes it\n{} {} fuse.editfs noauto,nofail,_netdev,x-systemd.automount,edits_only,state_dir={} 0 0\n",
            src.display(),
            mnt.display(),
            state.display()
        ),
    )
    .unwrap();
    let (s, m, f) = (src.display(), mnt.display(), fstab.display());
    let script = format!(
        r#"
trap 'editfs unmount {m} 2>/dev/null || true' EXIT
mount -t fuse.editfs {s} {m} -o rw,nodev,nosuid,noauto,_netdev,x-test=1,keep=7
echo "mounted-1: $(grep -c ' {m} ' /proc/self/mountinfo)"
grep ' {m} ' /proc/self/mountinfo | grep -q nosuid && echo "nosuid reached the kernel"
printf '<<<<<<< SEARCH\ntwo\n=======\nTWO\n>>>>>>> REPLACE\n' > {m}/a.txt.edit
echo "status: $(head -1 {m}/a.txt.status)"
editfs unmount {m}
mount -T {f} {m}
echo "mounted-2: $(grep -c ' {m} ' /proc/self/mountinfo)"
if echo x >> {m}/a.txt 2>/dev/null; then echo "direct write allowed"; else echo "direct write refused"; fi
editfs unmount {m}
"#
    );
    if !can_go_on(
        mount_helpers_usable(),
        "no /dev/fuse, mount.fuse3 or private mount namespace here",
    ) {
        return;
    }
    let out = in_private_namespace(root.path(), &script);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("mounted-1: 1"), "{}", text(&out));
    assert!(
        stdout.contains("nosuid reached the kernel"),
        "{}",
        text(&out)
    );
    assert!(stdout.contains("status: OK"), "{}", text(&out));
    assert!(stdout.contains("mounted-2: 1"), "{}", text(&out));
    assert!(
        stdout.contains("direct write refused"),
        "edits_only from fstab: {}",
        text(&out)
    );
    assert_eq!(fs::read_to_string(src.join("a.txt")).unwrap(), "one\nTWO\n");
    let log = fs::read_to_string(src.join(".editfs/daemon.log")).unwrap();
    assert!(log.contains("--keep=7"), "{log}");
    assert!(
        state.join("daemon.log").exists(),
        "state_dir= from fstab was not used"
    );
}

#[test]
fn bare_form_does_not_hide_a_misspelt_subcommand() {
    let out = editfs().args(["mout", "a", "b"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unrecognized subcommand 'mout'"), "{err}");
    assert!(err.contains("'mount'"), "no suggestion: {err}");
}

#[test]
fn bare_form_with_a_missing_source_says_so() {
    let root = tempfile::tempdir().unwrap();
    let out = editfs()
        .arg(root.path().join("nope"))
        .arg(root.path())
        .args(["-o", "rw"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SOURCE"),
        "{}",
        text(&out)
    );
}

/// Reads one datagram, or None after `limit`.
fn next_notification(sock: &UnixDatagram, limit: Duration) -> Option<String> {
    sock.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).trim_end().to_owned())
}

#[test]
fn systemd_hears_ready_once_the_mount_answers_and_stopping_on_sigterm() {
    let (root, src, mnt) = tree();
    let socket_path = root.path().join("notify.sock");
    let sock = UnixDatagram::bind(&socket_path).unwrap();
    let mut child = editfs()
        .arg("mount")
        .arg(&src)
        .arg(&mnt)
        .env("NOTIFY_SOCKET", &socket_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first = next_notification(&sock, Duration::from_secs(10));
    if !can_go_on(
        first.is_some(),
        "no notification in 10 s: FUSE cannot mount here?",
    ) {
        let _ = child.kill();
        let _ = child.wait();
        return;
    }
    assert_eq!(first.as_deref(), Some("READY=1"));
    assert!(mounted(&mnt), "READY=1 before the mount was in place");
    assert_eq!(fs::read_to_string(mnt.join("a.txt")).unwrap(), "one\ntwo\n");
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert_eq!(
        next_notification(&sock, Duration::from_secs(10)).as_deref(),
        Some("STOPPING=1")
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!mounted(&mnt));
}

/// Waits until `pid` is gone (a daemon exits shortly after its unmount).
fn wait_gone(pid: &str) {
    let began = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "pid {pid} still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `editfs mount --daemon`; returns its standard output, or None to skip.
fn start_daemon(src: &Path, mnt: &Path, extra: &[&str]) -> Option<String> {
    let out = editfs()
        .arg("mount")
        .arg(src)
        .arg(mnt)
        .arg("--daemon")
        .args(extra)
        .output()
        .unwrap();
    if !can_go_on(
        out.status.success(),
        &format!("FUSE cannot mount here: {}", text(&out)),
    ) {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn pid_in(said: &str) -> String {
    said.split("pid ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .unwrap_or_else(|| panic!("no pid in {said:?}"))
        .to_owned()
}

#[test]
fn daemon_says_pid_and_log_and_logs_start_and_stop_without_warnings() {
    let (_root, src, mnt) = tree();
    let Some(said) = start_daemon(&src, &mnt, &["--keep=9"]) else {
        return;
    };
    let log_path = src.join(".editfs/daemon.log");
    assert!(
        said.contains(&log_path.display().to_string()),
        "no log path in {said:?}"
    );
    let pid = pid_in(&said);
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--ready-on-stdout"),
        "pid {pid} is not the daemon"
    );
    assert!(
        editfs()
            .arg("unmount")
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    wait_gone(&pid);

    let Some(said) = start_daemon(&src, &mnt, &[]) else {
        return;
    };
    let pid = pid_in(&said);
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    wait_gone(&pid);

    let log = fs::read_to_string(&log_path).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 4, "start, stop, start, stop:\n{log}");
    let start = lines[0];
    for part in [
        env!("CARGO_PKG_VERSION").to_owned(),
        src.display().to_string(),
        mnt.display().to_string(),
        "--keep=9".to_owned(),
    ] {
        assert!(start.contains(&part), "{part} missing from {start:?}");
    }
    assert!(
        lines[1].contains("stopped: unmounted from outside"),
        "{log}"
    );
    assert!(lines[3].contains("stopped: SIGTERM"), "{log}");
    assert!(!log.contains("WARN"), "a warning for a normal stop:\n{log}");
}

#[test]
fn sighup_from_a_closed_terminal_unmounts_and_exits_zero() {
    let Some(m) = common::Mount::start(&[], |_| {}) else {
        return;
    };
    let mnt = m.mnt.clone();
    let status = m.stop(rustix::process::Signal::HUP);
    assert!(status.success(), "{status}");
    assert!(!mounted(&mnt), "still mounted after SIGHUP");
}

/// A service manager or a test may signal the daemon the moment its mount shows:
/// before the handlers were set, SIGHUP's default action killed the daemon and
/// left the mount dead; while the first statfs was in flight, the unmount failed
/// busy and the daemon served on, signalled but mounted. Twenty tries caught both.
#[test]
fn a_signal_sent_the_moment_the_mount_shows_unmounts_and_exits_zero() {
    if !can_go_on(
        Path::new("/dev/fuse").exists(),
        "no /dev/fuse: the mount cannot be made",
    ) {
        return;
    }
    for attempt in 0..20 {
        let (_root, src, mnt) = tree();
        let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
            .args(["mount".as_ref(), src.as_os_str(), mnt.as_os_str()])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let began = Instant::now();
        while !mounted(&mnt) && child.try_wait().unwrap().is_none() {
            assert!(began.elapsed() < Duration::from_secs(10), "never mounted");
        }
        let pid = rustix::process::Pid::from_child(&child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::HUP);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if began.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let left_mounted = mounted(&mnt);
        if left_mounted {
            let _ = rustix::mount::unmount(&mnt, rustix::mount::UnmountFlags::DETACH);
        }
        let status =
            status.unwrap_or_else(|| panic!("try {attempt}: still serving 15 s after SIGHUP"));
        assert!(status.success(), "try {attempt}: {status}");
        assert!(!left_mounted, "try {attempt}: still mounted after SIGHUP");
    }
}

/// Offsets of SEEK_DATA and SEEK_HOLE from a few starting points, or ENXIO.
const PROBE_HOLES: &str = r#"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
out = []
for start in (0, 4096, 600000, 700000, 1048575, 1048576, 5000000):
    for whence in (os.SEEK_DATA, os.SEEK_HOLE):
        try:
            out.append(str(os.lseek(fd, start, whence)))
        except OSError as e:
            out.append(os.strerror(e.errno))
print(" ".join(out))
"#;

#[test]
fn holes_copy_file_range_and_poll_answer_as_source_does_without_warnings() {
    let Some(m) = common::Mount::start(&[], |src| {
        let sparse = fs::File::create(src.join("sparse.bin")).unwrap();
        sparse.set_len(1 << 20).unwrap();
        std::os::unix::fs::FileExt::write_at(&sparse, &[7; 5000], 600_000).unwrap();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        fs::write(src.join("data.bin"), bytes).unwrap();
        fs::write(src.join("old.txt"), "old\n").unwrap();
        fs::write(src.join("a.py"), "x = 1\n").unwrap();
        fs::write(
            src.join("payload"),
            "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n",
        )
        .unwrap();
    }) else {
        return;
    };
    let probe = m.src.parent().unwrap().join("probe.py");
    fs::write(&probe, PROBE_HOLES).unwrap();
    let native = m.ok(&format!(
        "python3 {} {}/sparse.bin",
        probe.display(),
        m.src.display()
    ));
    let through = m.ok(&format!("python3 {} sparse.bin", probe.display()));
    assert_eq!(
        through, native,
        "SEEK_DATA/SEEK_HOLE through the mount differ from SOURCE"
    );
    // The file starts with a hole (SEEK_HOLE from 0 is 0), or the comparison proves nothing.
    assert_eq!(
        native.split(' ').nth(1),
        Some("0"),
        "the file system here keeps no holes: {native}"
    );

    // A status file has no holes: its data runs to the size fstat gives.
    let status = m.ok(&format!("python3 {} a.py.status", probe.display()));
    let size = m.ok("stat -c %s a.py.status");
    assert!(
        status.starts_with(&format!("0 {}", size.trim())),
        "{status} vs size {size}"
    );

    let copied = m.ok(r#"python3 -c '
import os
src = os.open("data.bin", os.O_RDONLY)
dst = os.open("copy.bin", os.O_WRONLY | os.O_CREAT, 0o644)
done = 0
while True:
    n = os.copy_file_range(src, dst, 1 << 20)
    if n == 0:
        break
    done += n
old = os.open("old.txt", os.O_WRONLY)
os.copy_file_range(src, old, 4, 0, 0)
os.close(old)
print(done)
'"#);
    assert_eq!(copied.trim(), "300000");
    assert_eq!(m.src_file("copy.bin"), m.src_file("data.bin"));
    assert_eq!(m.src_file("old.txt"), m.src_file("data.bin")[..4]);
    // A copy into an existing file is a direct write: its pre-image is kept.
    assert_eq!(m.ok("cat .editfs/snapshots/old.txt/*"), "old\n");

    m.ok("cp data.bin cp.bin && cp --reflink=auto data.bin reflink.bin && cmp cp.bin data.bin && cmp reflink.bin data.bin");
    m.ok("cp --sparse=always sparse.bin sparse-copy.bin && cmp sparse.bin sparse-copy.bin");
    let blocks = m.ok("stat -c %b sparse-copy.bin");
    assert!(
        blocks.trim().parse::<u64>().unwrap() * 512 < 1 << 19,
        "holes filled: {blocks} blocks"
    );
    // select(2) and poll(2) find a file ready, as on disk.
    let polled = m.ok(r#"python3 -c '
import select
f = open("data.bin", "rb")
p = select.poll()
p.register(f, select.POLLIN | select.POLLOUT)
print(p.poll(0)[0][1] & select.POLLIN != 0, select.select([f], [], [], 0)[0] == [f])
'"#);
    assert_eq!(polled.trim(), "True True");
    // A control file takes a payload copied in, through cp's fallback to write.
    m.ok("cp payload a.py.edit && python3 -c 'print(open(\"a.py\").read())' > /dev/null");
    assert_eq!(m.src_file("a.py"), b"x = 2\n");

    let log = fs::read_to_string(m.src.parent().unwrap().join("daemon.log")).unwrap();
    assert!(
        !log.contains("WARN") && !log.contains("Not Implemented"),
        "warnings for normal requests:\n{log}"
    );
}

/// `editfs unmount`, then at once a new mount of the same SOURCE at the same
/// MOUNT with its own state directory, by each of the three ways to mount: the
/// new mount must still be there, the same one, once the old daemon has exited,
/// and serve (`edits_only`: a direct write is refused). A daemon on its way out
/// once unmounted MOUNT by path and took the new mount with it, after it had
/// said "mounted". First held open for certain (the old daemon stopped until the
/// new mount is up), then as it happened: under CPU load, the old daemon slowed
/// by removals to record. Every wait is a bounded poll, not a sleep.
#[test]
fn a_mount_made_right_after_an_unmount_is_ready_and_stays_whichever_way_it_is_mounted() {
    let (root, src, mnt) = tree();
    let fstab = root.path().join("fstab");
    let new_state = root.path().join("new-state");
    fs::write(
        &fstab,
        format!(
            "{} {} fuse.editfs noauto,edits_only,state_dir={} 0 0\n",
            src.display(),
            mnt.display(),
            new_state.display()
        ),
    )
    .unwrap();
    let script = format!(
        r#"
S='{s}'; M='{m}'; B='{b}'; F='{f}'
burn() {{ while :; do :; done; }}
burn & burn & burn &
trap 'kill $(jobs -p) 2>/dev/null || true; editfs unmount "$M" 2>/dev/null || true' EXIT
# Up to 20 s for process $1 to end (a zombie has: its reaper may be slow).
gone() {{
  for _ in $(seq 400); do
    s=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 0
    [ "$s" = Z ] && return 0
    sleep 0.05
  done
  return 1
}}
# The device (major:minor) of the topmost mount at $M: its FUSE connection.
conn() {{ awk -v m="$M" '$5 == m {{ d = $3 }} END {{ print d }}' /proc/self/mountinfo; }}
new_mount() {{
  case $1 in
    daemon) editfs mount "$S" "$M" --daemon --edits-only --state-dir "$B" >/dev/null ;;
    dash-t) mount -t fuse.editfs "$S" "$M" -o "edits_only,state_dir=$B" >/dev/null ;;
    dash-T) mount -T "$F" "$M" >/dev/null ;;
  esac
}}
# $1 = the way, $2 = the old daemon's pid, $3 = "stop" to hold it stopped.
cycle() {{
  [ "$3" = stop ] && kill -STOP "$2"
  editfs unmount "$M"
  new_mount "$1" || {{ echo "$1 $3: mount failed"; kill -CONT "$2"; return; }}
  at=$(conn); new=$(head -1 "$B/daemon.lock")
  [ "$3" = stop ] && kill -CONT "$2"
  [ -n "$at" ] || echo "$1 $3: said mounted, not in mountinfo"
  gone "$2" || echo "$1 $3: old daemon still running"
  if [ "$(conn)" = "$at" ] && [ -n "$at" ]; then echo "$1 $3: kept"; else echo "$1 $3: lost"; fi
  if echo x >> "$M/a.txt" 2>/dev/null; then echo "$1 $3: direct write allowed"; fi
  editfs unmount "$M" 2>/dev/null || true
  gone "$new" || echo "$1 $3: new daemon still running"
}}
pid_of() {{ sed -n 's/.* by pid \([0-9]*\);.*/\1/p'; }}
for way in daemon dash-t dash-T; do
  old=$(editfs mount "$S" "$M" --daemon | pid_of)
  [ -n "$old" ] || {{ echo "cannot mount"; exit 3; }}
  cycle $way "$old" stop
  for i in 1 2; do
    for f in $(seq 150); do echo "file $f" > "$S/f$f"; done
    old=$(editfs mount "$S" "$M" --daemon | pid_of)
    rm -f "$M"/f*
    cycle $way "$old" load
  done
done
"#,
        s = src.display(),
        m = mnt.display(),
        b = new_state.display(),
        f = fstab.display(),
    );
    if !can_go_on(
        mount_helpers_usable(),
        "no /dev/fuse, mount.fuse3 or private mount namespace here",
    ) {
        return;
    }
    let out = in_private_namespace(root.path(), &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout.matches(": kept").count(), 9, "{}", text(&out));
    assert_eq!(stdout.lines().count(), 9, "{}", text(&out));
    assert_eq!(fs::read_to_string(src.join("a.txt")).unwrap(), "one\ntwo\n");
}
