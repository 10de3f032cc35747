//! Frees a mount whose daemon was killed while one of its threads waited in the
//! kernel.
//!
//! A daemon killed with SIGKILL while its commit thread tells the kernel to drop
//! a cached name cannot finish dying: the kernel makes that thread wait for the
//! directory's lock, held by a request in that directory (a rename, a create)
//! that waits for the killed daemon's answer. The connection stays open as long
//! as the thread does, so both wait forever and so does every process that
//! touches the mount. A small process outside the daemon watches it, and once
//! the daemon's main thread has exited while another of its threads lives on
//! and the mount is still there, aborts the FUSE connection: the waiting
//! requests fail, the lock is released, and the daemon's last thread exits.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often the daemon and the mount are looked at.
const POLL: Duration = Duration::from_millis(200);

/// Starts the watcher of this daemon, which is about to mount `mnt`. It runs
/// this program again (`editfs rescue`), so it shares no descriptor with the
/// daemon, least of all the connection's; started before the mount, it is
/// never seen half started beside a visible mount.
pub fn watch(mnt: &Path) {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return log::warn!("cannot watch for a stuck end of the daemon: {e}"),
    };
    let spawned = std::process::Command::new(exe)
        .arg("rescue")
        .arg(std::process::id().to_string())
        .arg(mnt)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        log::warn!("cannot watch for a stuck end of the daemon: {e}");
    }
}

/// The FUSE connection number of the mount at `mnt` (its device's minor number).
pub fn connection_of(mnt: &Path) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    connection_in(&table, mnt)
}

fn connection_in(mountinfo: &str, mnt: &Path) -> Option<u32> {
    mountinfo.lines().rev().find_map(|l| {
        let mut fields = l.split(' ');
        let device = fields.nth(2)?;
        let at = super::unescape(fields.nth(1)?);
        let minor = device.split_once(':')?.1;
        (Path::new(&at) == mnt).then(|| minor.parse().ok())?
    })
}

/// The start time and state of process `pid` (fields 22 and 3 of its `stat`).
fn started_and_state(pid: u32) -> Option<(u64, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

fn parse_stat(stat: &str) -> Option<(u64, char)> {
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    Some((fields.get(19)?.parse().ok()?, state))
}

/// Runs the watcher (`editfs rescue PID MOUNT`): waits for the daemon `pid` to
/// mount `mnt`, then until the mount goes or the daemon is gone, aborting the
/// connection if the daemon is stuck dying. The caller must hold no descriptor
/// of the connection.
pub fn rescue(pid: u32, mnt: PathBuf) {
    let Some((started, _)) = started_and_state(pid) else {
        return;
    };
    let alive = || matches!(started_and_state(pid), Some((s, state)) if s == started && !matches!(state, 'Z' | 'X'));
    // The mount point is refused when already a mount, so the first one is the daemon's.
    let connection = loop {
        if let Some(c) = connection_of(&mnt) {
            break c;
        }
        if !alive() {
            return;
        }
        std::thread::sleep(POLL);
    };
    loop {
        std::thread::sleep(POLL);
        if connection_of(&mnt) != Some(connection) {
            return;
        }
        match started_and_state(pid) {
            Some((s, state)) if s == started && !matches!(state, 'Z' | 'X') => {}
            Some((s, _)) if s == started && stuck_dying(pid) => return abort(connection),
            // Gone, or wholly exited: closing its descriptors ended the connection,
            // whose number another mount may already have.
            _ => return,
        }
    }
}

/// Whether process `pid`, whose main thread has exited, still has a thread: one
/// stuck in the kernel keeps the connection open, so its number is still ours.
fn stuck_dying(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| tasks.count() > 1)
}

/// Where the kernel lists FUSE connections, once the fusectl file system is
/// mounted there.
const CONNECTIONS: &str = "/sys/fs/fuse/connections";

fn abort(connection: u32) {
    match abort_connection(connection) {
        Ok(()) => log::warn!(
            "the daemon is stuck dying with the mount still there: aborted FUSE connection {connection}"
        ),
        Err(e) => log::error!(
            "the daemon is stuck dying with the mount still there, and its connection cannot be aborted: {e}"
        ),
    }
}

/// Aborts FUSE connection `connection`: every request waiting on it fails, and
/// its daemon's session ends. Only root may.
pub fn abort_connection(connection: u32) -> std::io::Result<()> {
    let path = format!("{CONNECTIONS}/{connection}/abort");
    let written = std::fs::write(&path, "1");
    if written
        .as_ref()
        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        mount_connections();
        return std::fs::write(&path, "1")
            .map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")));
    }
    written.map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// Mounts fusectl where the kernel lists FUSE connections: a system that does
/// not mount it at boot (a container, a minimal VM) has no `abort` file to
/// write, and the stuck mount would stay. Only root may; the error is then the
/// write's.
fn mount_connections() {
    let mounted = rustix::mount::mount(
        "fusectl",
        CONNECTIONS,
        "fusectl",
        rustix::mount::MountFlags::empty(),
        None,
    );
    if let Err(e) = mounted {
        log::warn!("cannot mount fusectl on {CONNECTIONS}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_is_the_minor_number_of_the_mount() {
        let table = "36 25 0:44 / /tmp/a\\040b rw,nosuid - fuse.editfs editfs:/s rw\n\
                     37 25 0:45 / /tmp/c rw - fuse.editfs editfs:/t rw\n";
        assert_eq!(connection_in(table, Path::new("/tmp/a b")), Some(44));
        assert_eq!(connection_in(table, Path::new("/tmp/c")), Some(45));
        assert_eq!(connection_in(table, Path::new("/tmp/d")), None);
    }

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        let stat = "123 (a) b (c)) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 1 2";
        assert_eq!(parse_stat(stat), Some((987654, 'Z')));
        assert_eq!(parse_stat("garbage"), None);
        let me = started_and_state(std::process::id()).unwrap();
        assert!(matches!(me.1, 'R' | 'S'));
    }
}
