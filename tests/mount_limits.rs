//! Limits under abuse, with the daemon as root and `allow_other`, the agent as
//! `nobody`: what the mount's view of editfs's state shows to whom, how much an
//! open `F.edit` may buffer, and how the log stays bounded.

mod common;

use std::fs;
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
