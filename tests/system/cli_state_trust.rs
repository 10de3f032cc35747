//! A state directory found by `editfs apply`, `history`, `show` or `undo` is used
//! only when it is owned by the user who runs the command (or by root) and
//! nobody else may write it, as git trusts a repository; and nothing in a state
//! directory is reached through a symbolic link. Each test is root running a
//! command in a directory another user prepared.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

const NOBODY: u32 = 65534;
const BLOCK: &str = "<<<<<<< SEARCH\nold line\n=======\nnew line\n>>>>>>> REPLACE\n";
const BACK: &str = "<<<<<<< SEARCH\nnew line\n=======\nold line\n>>>>>>> REPLACE\n";

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A place where nobody owns `agent/` (with `agent/sub/f.txt` in it) and root
/// owns `victim/`: a log, a counter and a directory that must stay as they are.
struct Planted {
    dir: TempDir,
}

impl Planted {
    fn new() -> Option<Planted> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("these tests need root, to be root and nobody in turn; skipping");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o755);
        let p = Planted { dir };
        fs::create_dir_all(p.path("victim/rootdir")).unwrap();
        fs::write(p.path("victim/log"), "ROOT LOG\n").unwrap();
        fs::write(p.path("victim/txid"), "ROOT TXID\n").unwrap();
        chmod(&p.path("victim"), 0o755);
        fs::create_dir_all(p.path("agent/sub")).unwrap();
        fs::write(p.path("agent/sub/f.txt"), "first\nold line\nlast\n").unwrap();
        for rel in ["agent", "agent/sub", "agent/sub/f.txt"] {
            std::os::unix::fs::chown(p.path(rel), Some(NOBODY), Some(NOBODY)).unwrap();
        }
        Some(p)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Runs a bash script as nobody, here.
    fn as_nobody(&self, script: &str) {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["bash", "-c", script])
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }

    /// `agent/.editfs` made by nobody, its log, counter and `snapshots/sub`
    /// symbolic links to root's files and directory.
    fn plant(&self) {
        self.as_nobody(
            "mkdir -p agent/.editfs/snapshots && ln -s ../../victim/log agent/.editfs/log \
             && ln -s ../../victim/txid agent/.editfs/txid \
             && ln -s ../../../victim/rootdir agent/.editfs/snapshots/sub",
        );
    }

    /// Runs `editfs ARGS` as root, here, with `stdin` as standard input.
    fn editfs(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        child.wait_with_output().unwrap()
    }

    /// Root's files as they were made.
    fn victim_untouched(&self) {
        assert_eq!(
            fs::read_to_string(self.path("victim/log")).unwrap(),
            "ROOT LOG\n"
        );
        assert_eq!(
            fs::read_to_string(self.path("victim/txid")).unwrap(),
            "ROOT TXID\n"
        );
        let inside: Vec<_> = fs::read_dir(self.path("victim/rootdir"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(
            inside.is_empty(),
            "written into root's directory: {inside:?}"
        );
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Root's apply in `agent/sub` finds nobody's `agent/.editfs`: it edits the
/// file as asked but keeps nothing there, writes nothing through its links,
/// and says which state directory it did not use and why.
#[test]
fn apply_by_root_never_uses_a_state_directory_another_user_planted() {
    let Some(p) = Planted::new() else { return };
    p.plant();
    for args in [
        vec!["apply", "agent/sub/f.txt"],
        vec!["apply", "--multi", "agent/sub"],
    ] {
        let payload = if args.len() == 2 {
            BLOCK.to_owned()
        } else {
            format!("f.txt\n{BACK}")
        };
        let out = p.editfs(&args, &payload);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("agent/.editfs") && said.contains("owned by uid 65534"),
            "{args:?}: the refused state directory is named with why: {said}"
        );
        p.victim_untouched();
    }
    assert_eq!(
        fs::read_to_string(p.path("agent/sub/f.txt")).unwrap(),
        "first\nold line\nlast\n",
        "edited there and back"
    );
}

/// A state directory others may write, or owned by another user who is not
/// root, is refused as well; one of root's own that nobody else may write is used.
#[test]
fn a_state_directory_others_may_write_or_another_user_owns_is_not_used() {
    let Some(p) = Planted::new() else { return };
    let state = p.path("agent/.editfs");
    fs::create_dir(&state).unwrap();
    for (mode, owner, why) in [
        (0o777, 0, "writable by others"),
        (0o770, 0, "writable by its group"),
        (0o700, 4242, "owned by uid 4242"),
    ] {
        chmod(&state, mode);
        std::os::unix::fs::chown(&state, Some(owner), Some(owner)).unwrap();
        let out = p.editfs(&["apply", "agent/sub/f.txt"], BLOCK);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(text(&out).contains(why), "{why}: {}", text(&out));
        assert!(
            !state.join("log").exists(),
            "{why}: the state directory was used"
        );
        let out = p.editfs(&["apply", "agent/sub/f.txt"], BACK);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    chmod(&state, 0o700);
    std::os::unix::fs::chown(&state, Some(0), Some(0)).unwrap();
    let out = p.editfs(&["apply", "agent/sub/f.txt"], BLOCK);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(state.join("log").exists(), "root's own: {}", text(&out));
    assert_eq!(fs::metadata(&state).unwrap().uid(), 0);
}

/// A state directory named with `--state-dir` is the user's choice and is used
/// whoever owns it, but nothing in it is reached through a symbolic link.
#[test]
fn a_given_state_directory_is_never_followed_through_a_link_inside() {
    let Some(p) = Planted::new() else { return };
    p.plant();
    let out = p.editfs(
        &["apply", "agent/sub/f.txt", "--state-dir", "agent/.editfs"],
        BLOCK,
    );
    assert!(
        text(&out).contains("symbolic link"),
        "the link is named: {}",
        text(&out)
    );
    p.victim_untouched();
}

/// `history`, `show` and `undo` by root on nobody's project refuse its planted
/// state directory, naming it and why, and read or write nothing through it.
#[test]
fn history_show_and_undo_refuse_a_planted_state_directory() {
    let Some(p) = Planted::new() else { return };
    p.as_nobody(
        "mkdir -p agent/.editfs/snapshots/sub/f.txt && echo nobody > agent/.editfs/snapshots/sub/f.txt/1 \
         && ln -s ../../victim/log agent/.editfs/log && printf '%s\\n' '{\"tx\":1,\"kind\":\"edit\",\"outcome\":\"ok\",\"files\":[{\"file\":\"sub/f.txt\",\"sha256\":null}]}' > agent/.editfs/log.1",
    );
    for args in [
        vec!["history", "agent"],
        vec!["show", "agent", "1"],
        vec!["undo", "agent", "sub/f.txt", "--force"],
    ] {
        let out = p.editfs(&args, "");
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("owned by uid 65534"),
            "{args:?}: {}",
            text(&out)
        );
        p.victim_untouched();
    }
    assert_eq!(
        fs::read_to_string(p.path("agent/sub/f.txt")).unwrap(),
        "first\nold line\nlast\n"
    );
}

/// Root's mount of nobody's project refuses the state directory nobody planted
/// in it before the mount, naming it and why, and writes nothing through it.
#[test]
fn a_mount_refuses_a_planted_state_directory() {
    let Some(p) = Planted::new() else { return };
    p.plant();
    fs::create_dir(p.path("mnt")).unwrap();
    let out = p.editfs(&["mount", "agent", "mnt", "--daemon"], "");
    if out.status.success() {
        p.editfs(&["unmount", "mnt"], "");
    }
    assert!(!out.status.success(), "mounted: {}", text(&out));
    assert!(text(&out).contains("owned by uid 65534"), "{}", text(&out));
    p.victim_untouched();
}
