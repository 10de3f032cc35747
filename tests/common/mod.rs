//! A real mount in a temp dir, driven with shell commands as a user would.
//!
//! Where FUSE cannot mount, tests skip with a loud message, except when `CI` is
//! set: there a mount that fails is a failed test.

// Shared by several test crates, each using a part of it.
#![allow(dead_code)]

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
}

fn mounted(mnt: &Path) -> bool {
    let table = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mnt.to_string_lossy();
    table.lines().any(|l| l.split(' ').nth(4) == Some(&*want))
}

impl Mount {
    /// Mounts a fresh SOURCE (filled by `fill`) with extra `args`; `None` when FUSE
    /// is unavailable outside CI.
    pub fn start(args: &[&str], fill: impl FnOnce(&Path)) -> Option<Mount> {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("src");
        let mnt = root.path().join("mnt");
        fs::create_dir(&src).unwrap();
        fs::create_dir(&mnt).unwrap();
        fill(&src);
        let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
            .arg("mount")
            .arg(&src)
            .arg(&mnt)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let began = Instant::now();
        while !mounted(&mnt) {
            if let Ok(Some(status)) = child.try_wait() {
                let out = child.wait_with_output().unwrap();
                let why = format!(
                    "editfs mount exited with {status}: {}",
                    String::from_utf8_lossy(&out.stderr)
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
        assert!(
            out.status.success(),
            "script failed ({}):\n{script}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn src_file(&self, rel: &str) -> Vec<u8> {
        fs::read(self.src.join(rel)).unwrap()
    }

    /// Sends `signal` and waits: the daemon must unmount and exit.
    pub fn stop(mut self, signal: rustix::process::Signal) -> ExitStatus {
        self.terminate(signal).unwrap()
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
    fn drop(&mut self) {
        self.terminate(rustix::process::Signal::TERM);
    }
}

fn skip_or_fail(why: &str) -> Option<Mount> {
    if std::env::var_os("CI").is_some() {
        panic!("FUSE mount failed with CI set: {why}");
    }
    eprintln!("\n*** SKIPPING A MOUNT TEST: FUSE cannot mount here: {why} ***\n");
    None
}
