//! `scripts/posix.sh` as part of `cargo test`: pjdfstest and fsx against a fresh
//! mount must report no failure.
//!
//! It needs root and the two checkers (`.ci/run` installs them). Where either is
//! missing it skips loudly, except with `CI` set: there it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `name` is installed: on PATH or in cargo's own bin directory.
fn installed(name: &str) -> Option<PathBuf> {
    let cargo_bin = std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo/bin"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(cargo_bin)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Why the checkers cannot run here, if they cannot.
fn missing() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("it must run as root (pjdfstest switches users)".into());
    }
    let absent: Vec<_> = ["pjdfstest", "fsx", "fusermount3"]
        .into_iter()
        .filter(|t| installed(t).is_none())
        .collect();
    (!absent.is_empty()).then(|| format!("{} not installed (see .ci/run)", absent.join(", ")))
}

#[test]
fn pjdfstest_and_fsx_report_no_failure_through_the_mount() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "scripts/posix.sh cannot run with CI set: {why}"
        );
        eprintln!("\n*** SKIPPING scripts/posix.sh: {why} ***\n");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/posix.sh"))
        .env("EDITFS", env!("CARGO_BIN_EXE_editfs"))
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "scripts/posix.sh failed:\n{said}");
    assert!(said.contains(" 0 failed"), "no pjdfstest summary:\n{said}");
}
