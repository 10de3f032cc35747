//! `scripts/sandbox.sh`: a command under bubblewrap sees the mount as its project,
//! and neither SOURCE nor the state directory.
//!
//! Skips loudly where bwrap or FUSE cannot run, except with `CI` set: there it fails.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::Mount;

fn bwrap_runs() -> bool {
    let ok = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "bwrap cannot run here, with CI set (apt-get install bubblewrap)"
        );
        eprintln!("\n*** SKIPPING: bwrap cannot run here (apt-get install bubblewrap) ***\n");
    }
    ok
}

fn sandbox(m: &Mount, env: &[(&str, &Path)], script: &str) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sandbox.sh"))
        .arg(&m.mnt)
        .args(["--", "bash", "-c", script])
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn start() -> Option<Mount> {
    if !bwrap_runs() {
        return None;
    }
    Mount::start(&[], |src| {
        std::fs::write(src.join("a.txt"), "one\ntwo\n").unwrap();
    })
}

#[test]
fn sandboxed_command_works_in_the_mount_through_control_files_and_sees_nothing_else() {
    let Some(m) = start() else { return };
    let root = m.mnt.parent().unwrap();
    let script = format!(
        r#"
[ "$(pwd)" = '{mnt}' ] && echo "cwd is the mount"
printf '<<<<<<< SEARCH\none\n=======\nONE\n>>>>>>> REPLACE\n' > a.txt.edit
echo "status: $(head -1 a.txt.status)"
mkdir -p new && printf 'new/b.txt\n<<<<<<< SEARCH\n=======\nbee\n>>>>>>> REPLACE\n' > .editfs/edit
echo "multi: $(head -1 .editfs/status)"
echo direct > direct.txt && echo "mount writable"
ls -A '{root}' | tr '\n' ' '; echo "<- root"
[ -e '{src}' ] && echo "SOURCE visible" || true
[ -e '{src}/.editfs' ] && echo "state visible" || true
touch /usr/x 2>/dev/null && echo "/usr writable" || true
touch /etc/x 2>/dev/null && echo "/etc writable" || true
true
"#,
        mnt = m.mnt.display(),
        root = root.display(),
        src = m.src.display(),
    );
    let out = sandbox(&m, &[], &script);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("cwd is the mount"), "{text}");
    assert!(stdout.contains("status: OK a.txt"), "{text}");
    assert!(stdout.contains("multi: OK"), "{text}");
    assert!(stdout.contains("mount writable"), "{text}");
    assert!(
        stdout.contains("mnt <- root"),
        "only the mount may show: {text}"
    );
    for leak in [
        "SOURCE visible",
        "state visible",
        "/usr writable",
        "/etc writable",
    ] {
        assert!(!stdout.contains(leak), "{leak}: {text}");
    }
    assert_eq!(m.src_file("a.txt"), b"ONE\ntwo\n");
    assert_eq!(m.src_file("new/b.txt"), b"bee\n");
    assert_eq!(m.src_file("direct.txt"), b"direct\n");
}

#[test]
fn sandbox_covers_source_when_an_extra_path_would_show_it() {
    let Some(m) = start() else { return };
    let root = m.mnt.parent().unwrap().to_owned();
    let script = format!(
        "ls -A '{src}' | wc -l; [ -e '{src}/a.txt' ] && echo 'SOURCE visible'; true",
        src = m.src.display()
    );
    let out = sandbox(&m, &[("SANDBOX_RO", &root)], &script);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("SOURCE visible"), "{text}");
    assert_eq!(stdout.lines().next(), Some("0"), "{text}");
}

#[test]
fn sandbox_refuses_a_directory_that_is_not_a_mount_and_passes_the_exit_status() {
    let Some(m) = start() else { return };
    let out = sandbox(&m, &[], "exit 7");
    assert_eq!(out.status.code(), Some(7), "{}", said(&out));
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sandbox.sh"))
        .arg(&m.src)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a mount point"),
        "{}",
        said(&out)
    );
}
