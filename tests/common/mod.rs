//! A real mount in a temp dir, driven with shell commands as a user would.
//!
//! Where FUSE cannot mount, tests skip with a loud message, except when `CI` is
//! set: there a mount that fails is a failed test.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub struct Mount {
    /// Holds SOURCE and MOUNT; removed when the mount is dropped.
    _root: TempDir,
    pub src: PathBuf,
    pub mnt: PathBuf,
    child: Option<Child>,
    /// The FUSE connection, read while the mount answers: a hung one can still be aborted.
    connection: Option<String>,
}

fn mounted(mnt: &Path) -> bool {
    connection_of(mnt).is_some()
}

/// The FUSE connection number of the mount at `mnt` (the minor of its device), as
/// named under /sys/fs/fuse/connections.
fn connection_of(mnt: &Path) -> Option<String> {
    let table = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mnt.to_string_lossy();
    table.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        (fields.get(4) == Some(&&*want))
            .then(|| {
                fields
                    .get(2)?
                    .split_once(':')
                    .map(|(_, minor)| minor.to_owned())
            })
            .flatten()
    })
}

impl Mount {
    /// Mounts a fresh SOURCE (filled by `fill`) with extra `args`; `None` when FUSE
    /// is unavailable outside CI.
    pub fn start(args: &[&str], fill: impl FnOnce(&Path)) -> Option<Mount> {
        Self::launch(Command::new(env!("CARGO_BIN_EXE_editfs")), args, fill)
    }

    /// As `start`, with the daemon started under `umask`. The test process's own
    /// umask is left alone: every test running beside this one shares it.
    pub fn start_with_umask(umask: u32, args: &[&str], fill: impl FnOnce(&Path)) -> Option<Mount> {
        let mut daemon = Command::new("bash");
        daemon
            .arg("-c")
            .arg(format!(r#"umask {umask:03o}; exec "$0" "$@""#))
            .arg(env!("CARGO_BIN_EXE_editfs"));
        Self::launch(daemon, args, fill)
    }

    /// Runs `daemon` (editfs, or a command that execs it) with `mount SOURCE MOUNT
    /// args` and waits until the mount answers.
    fn launch(mut daemon: Command, args: &[&str], fill: impl FnOnce(&Path)) -> Option<Mount> {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("src");
        let mnt = root.path().join("mnt");
        fs::create_dir(&src).unwrap();
        fs::create_dir(&mnt).unwrap();
        fill(&src);
        // The daemon's log goes to a file: a pipe nobody drains would fill up and
        // stall the daemon in the middle of a request.
        let log = root.path().join("daemon.log");
        let mut child = daemon
            .arg("mount")
            .arg(&src)
            .arg(&mnt)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let began = Instant::now();
        while !mounted(&mnt) {
            if let Ok(Some(status)) = child.try_wait() {
                let why = format!(
                    "editfs mount exited with {status}: {}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
                return skip_or_fail(&why);
            }
            if began.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                return skip_or_fail("editfs mount did not become ready in 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Mount {
            connection: connection_of(&mnt),
            _root: root,
            src,
            mnt,
            child: Some(child),
        })
    }

    /// Runs a bash script with the mount point as working directory.
    pub fn sh(&self, script: &str) -> Output {
        Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(&self.mnt)
            .output()
            .unwrap()
    }

    /// Runs a bash script that must succeed; returns its standard output.
    pub fn ok(&self, script: &str) -> String {
        let out = self.sh(script);
        succeeded(script, &out)
    }

    /// Runs a bash script that must succeed within `limit`. A script still running
    /// then is a hang: the FUSE connection is aborted, which frees every process
    /// stuck in the mount, and the test fails instead of the machine hanging.
    pub fn ok_within(&self, script: &str, limit: Duration) -> String {
        use std::os::unix::process::CommandExt;
        // Its own process group, so the script's background jobs can be killed too.
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(&self.mnt)
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let began = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if began.elapsed() > limit {
                self.abort();
                let group = rustix::process::Pid::from_child(&child);
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                let out = child.wait_with_output().unwrap();
                panic!(
                    "the mount hung (no answer within {limit:?}); its connection was aborted\n{script}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        succeeded(script, &out)
    }

    /// Aborts the FUSE connection (every waiting request fails) and detaches the
    /// dead mount, so a hung test can clean up.
    pub fn abort(&self) {
        let connections = Path::new("/sys/fs/fuse/connections");
        if fs::read_dir(connections).is_ok_and(|mut d| d.next().is_none()) {
            let _ = Command::new("mount")
                .args(["-t", "fusectl", "fusectl"])
                .arg(connections)
                .status();
        }
        if let Some(n) = &self.connection {
            let _ = fs::write(connections.join(n).join("abort"), "1");
        }
        let _ = rustix::mount::unmount(&self.mnt, rustix::mount::UnmountFlags::DETACH);
    }

    /// Sends `signal` to the daemon and returns at once (SIGSTOP pauses it).
    pub fn signal(&self, signal: rustix::process::Signal) {
        if let Some(child) = &self.child {
            let _ = rustix::process::kill_process(rustix::process::Pid::from_child(child), signal);
        }
    }

    /// The daemon's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self._root.path().join("daemon.log")).unwrap_or_default()
    }

    pub fn src_file(&self, rel: &str) -> Vec<u8> {
        fs::read(self.src.join(rel)).unwrap()
    }

    /// Sends `signal` and waits: the daemon must unmount and exit.
    pub fn stop(mut self, signal: rustix::process::Signal) -> ExitStatus {
        self.terminate(signal).unwrap()
    }

    /// Sends `signal` and waits for the daemon to exit, keeping the project
    /// and its state directory to look at.
    pub fn end(&mut self, signal: rustix::process::Signal) -> Option<ExitStatus> {
        self.terminate(signal)
    }

    fn terminate(&mut self, signal: rustix::process::Signal) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let pid = rustix::process::Pid::from_child(&child);
        let _ = rustix::process::kill_process(pid, signal);
        let began = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if began.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = Command::new(env!("CARGO_BIN_EXE_editfs"))
                    .arg("unmount")
                    .arg(&self.mnt)
                    .status();
                return child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mount {
    /// A test that killed the daemon (`end` with SIGKILL) leaves its mount
    /// behind, dead: it is unmounted here, so no test run leaves mounts around.
    fn drop(&mut self) {
        self.terminate(rustix::process::Signal::TERM);
        if mounted(&self.mnt) {
            let _ = Command::new(env!("CARGO_BIN_EXE_editfs"))
                .arg("unmount")
                .arg(&self.mnt)
                .status();
        }
    }
}

fn skip_or_fail(why: &str) -> Option<Mount> {
    if std::env::var_os("CI").is_some() {
        panic!("FUSE mount failed with CI set: {why}");
    }
    eprintln!("\n*** SKIPPING A MOUNT TEST: FUSE cannot mount here: {why} ***\n");
    None
}

/// The standard output of `script`, which must have succeeded.
fn succeeded(script: &str, out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "script failed ({}):\n{script}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A file system mounted at a directory inside a test's SOURCE (the directory
/// is made if missing), detached when dropped. `None` where it cannot be
/// mounted (not root): the test then skips, loudly, except under CI.
pub struct Inside(pub PathBuf);

impl Inside {
    pub fn mount(dir: &Path, fstype: &str) -> Option<Inside> {
        fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", fstype, "none"])
            .arg(dir)
            .status();
        if status.is_ok_and(|s| s.success()) {
            return Some(Inside(dir.to_owned()));
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount a {fstype} with CI set"
        );
        eprintln!("*** SKIPPING: cannot mount a {fstype} here ***");
        None
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The user every attack test plays against a root daemon: `nobody`.
pub const NOBODY: u32 = 65534;

/// Runs a bash script as `nobody`, with no groups, in the mount.
pub fn as_nobody(m: &Mount, script: &str) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["bash", "-c", script])
        .current_dir(&m.mnt)
        .output()
        .unwrap()
}

/// What a command printed, its standard output then its standard error.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

pub fn chown_nobody(path: &Path) {
    std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// A `fs.*` sysctl set for as long as this lives, then put back: the kernel's
/// `protected_*` rules, which a test must see on whatever the machine's are.
pub struct Sysctl {
    at: String,
    was: String,
}

impl Sysctl {
    /// `/proc/sys/fs/NAME` set to `value` (root only).
    pub fn set(name: &str, value: &str) -> Sysctl {
        let at = format!("/proc/sys/fs/{name}");
        let was = std::fs::read_to_string(&at).expect("the sysctl is readable");
        std::fs::write(&at, value).expect("root may set the sysctl");
        Sysctl { at, was }
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.at, self.was.trim());
    }
}
