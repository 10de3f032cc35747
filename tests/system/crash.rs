//! `kill -9` at random moments of multi-file commits over large files: after each,
//! the next start recovers, and every file is wholly old or wholly new, all together,
//! with no temporary file left in the project.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FILES: [&str; 3] = ["a.txt", "sub/b.txt", "sub/deeper/c.txt"];
const KILLS: usize = 200;

fn content(version: &str) -> Vec<u8> {
    let mut s = format!("{version}\n");
    for i in 0..120_000 {
        s.push_str(&format!("line {i:06} of a large file\n"));
    }
    s.into_bytes()
}

fn payload(from: &str, to: &str) -> String {
    FILES
        .iter()
        .map(|f| format!("{f}\n<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n"))
        .collect()
}

/// A small deterministic generator, so a failure can be replayed from its seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

fn apply(root: &Path, payload: &str) -> std::process::Child {
    let payload_file = root.join("..").join("payload");
    fs::write(&payload_file, payload).unwrap();
    Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["apply", "--multi"])
        .arg(root)
        .arg(&payload_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Which version every file holds; panics unless all hold the same one, whole.
fn state(root: &Path, old: &[u8], new: &[u8]) -> &'static str {
    let versions: Vec<&str> = FILES
        .iter()
        .map(|f| {
            let bytes = fs::read(root.join(f)).unwrap();
            match bytes {
                b if b == old => "old",
                b if b == new => "new",
                b => panic!(
                    "{f} is neither version: {} bytes, starts {:?}",
                    b.len(),
                    &b[..b.len().min(20)]
                ),
            }
        })
        .collect();
    assert!(
        versions.iter().all(|v| *v == versions[0]),
        "files disagree: {versions:?}"
    );
    versions[0]
}

fn no_leftovers(root: &Path) {
    for dir in ["", "sub", "sub/deeper"] {
        for e in fs::read_dir(root.join(dir)).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                !name.starts_with(".editfs-tmp"),
                "temporary file left in the project: {dir}/{name}"
            );
        }
    }
    assert_eq!(
        fs::read_dir(root.join(".editfs/journal")).unwrap().count(),
        0,
        "journal not cleared"
    );
    assert_eq!(
        fs::read_dir(root.join(".editfs/tmp")).unwrap().count(),
        0,
        "tmp not cleared"
    );
}

/// A project with a state directory and FILES holding the old version, in `dir`;
/// returns it and the two versions.
fn project(dir: &Path) -> (std::path::PathBuf, Vec<u8>, Vec<u8>) {
    let root = dir.join("project");
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    fs::create_dir_all(root.join(".editfs")).unwrap();
    let (old, new) = (content("old"), content("new"));
    for f in FILES {
        fs::write(root.join(f), &old).unwrap();
    }
    (root, old, new)
}

#[test]
fn kill_9_during_multi_file_commits_never_leaves_a_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, old, new) = project(tmp.path());
    // How long an uninterrupted commit takes, to spread the kills over it.
    let began = Instant::now();
    assert!(
        apply(&root, &payload("old", "new"))
            .wait()
            .unwrap()
            .success()
    );
    let span = began.elapsed().as_micros().max(1000) as u64;
    assert_eq!(state(&root, &old, &new), "new");

    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = Lcg(seed);
    let mut finished = 0;
    for i in 0..KILLS {
        let (from, to) = match state(&root, &old, &new) {
            "old" => ("old", "new"),
            _ => ("new", "old"),
        };
        let mut child = apply(&root, &payload(from, to));
        std::thread::sleep(Duration::from_micros(rng.below(span * 6 / 5)));
        let _ = child.kill();
        if child.wait().unwrap().success() {
            finished += 1;
        }
        // The next transaction recovers before anything else (even one whose
        // payload is rejected); `history` only reads, so it cannot.
        let recovered = apply(&root, "").wait_with_output().unwrap();
        assert_eq!(
            recovered.status.code(),
            Some(2),
            "kill {i} (seed {seed}): {recovered:?}"
        );
        state(&root, &old, &new);
        no_leftovers(&root);
    }
    eprintln!(
        "{KILLS} kills (seed {seed}, commit span {span} µs): {finished} commits had finished first"
    );
    assert!(
        finished < KILLS,
        "no kill landed inside a commit: the test proved nothing"
    );
}

fn editfs(args: &[&str], root: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(args)
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The version the files and the file the session made hold together.
fn session_state(root: &Path, old: &[u8], new: &[u8]) -> &'static str {
    let files = state(root, old, new);
    let made = root.join("made.txt").exists();
    assert_eq!(
        made,
        files == "new",
        "made.txt exists: {made}, files: {files}"
    );
    files
}

/// A session after a checkpoint changes three large files and makes one; each
/// rewind to the checkpoint is killed at a random moment. After each, the next
/// start recovers, and the project is wholly as at the checkpoint or wholly as
/// after the session.
#[test]
fn kill_9_during_a_rewind_leaves_the_project_wholly_before_or_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, old, new) = project(tmp.path());
    let checkpoint = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["checkpoint"])
        .arg(&root)
        .arg("start")
        .output()
        .unwrap();
    assert!(checkpoint.status.success(), "{checkpoint:?}");
    let session = format!(
        "{}made.txt\n<<<<<<< SEARCH\n=======\nmade\n>>>>>>> REPLACE\n",
        payload("old", "new")
    );
    let rewind = ["rewind", "--to", "start"];
    assert!(apply(&root, &session).wait().unwrap().success());
    let began = Instant::now();
    assert!(editfs(&rewind, &root).wait().unwrap().success());
    let span = began.elapsed().as_micros().max(1000) as u64;
    assert_eq!(session_state(&root, &old, &new), "old");

    let mut rng = Lcg(0x7e3d);
    let (mut finished, kills) = (0, 40);
    for i in 0..kills {
        if session_state(&root, &old, &new) == "old" {
            assert!(apply(&root, &session).wait().unwrap().success(), "kill {i}");
        }
        let mut child = editfs(&rewind, &root);
        std::thread::sleep(Duration::from_micros(rng.below(span * 6 / 5)));
        let _ = child.kill();
        if child.wait().unwrap().success() {
            finished += 1;
        }
        let recovered = apply(&root, "").wait_with_output().unwrap();
        assert_eq!(recovered.status.code(), Some(2), "kill {i}: {recovered:?}");
        session_state(&root, &old, &new);
        no_leftovers(&root);
    }
    eprintln!("{kills} kills (rewind span {span} µs): {finished} rewinds had finished first");
    assert!(
        finished < kills,
        "no kill landed inside a rewind: the test proved nothing"
    );
}

/// Makes branch `name` of `root` whose change is every file of FILES holding
/// `to` instead of what it holds: written straight into the branch's upper
/// directory, as a branch mount writes a file it changes whole.
fn branch_to(root: &Path, name: &str, to: &[u8]) {
    let made = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["branch", "create"])
        .arg(root)
        .arg(name)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let upper = root.join(".editfs/branches").join(name).join("upper");
    for f in FILES {
        let at = upper.join(f);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        fs::write(at, to).unwrap();
    }
}

/// Each branch commit is killed at a random moment. After each, the next
/// start recovers, and the project is wholly as before the commit or wholly
/// as the branch has it; a branch a kill left behind commits to the end when
/// run again (its changes then read as already applied), and is removed.
#[test]
fn kill_9_during_a_branch_commit_leaves_the_project_wholly_before_or_after_it() {
    const COMMITS: usize = 40;
    let tmp = tempfile::tempdir().unwrap();
    let (root, old, new) = project(tmp.path());
    let run = |name: &str| {
        Command::new(env!("CARGO_BIN_EXE_editfs"))
            .args(["branch", "commit"])
            .arg(&root)
            .arg(name)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    branch_to(&root, "first", &new);
    let began = Instant::now();
    assert!(run("first").wait().unwrap().success());
    let span = began.elapsed().as_micros().max(1000) as u64;
    assert_eq!(state(&root, &old, &new), "new");
    let mut rng = Lcg(0xb4a9c4);
    let mut cut = 0;
    for i in 0..COMMITS {
        let (was, to) = match state(&root, &old, &new) {
            "old" => ("old", &new),
            _ => ("new", &old),
        };
        let name = format!("b{i}");
        branch_to(&root, &name, to);
        let mut child = run(&name);
        std::thread::sleep(Duration::from_micros(rng.below(span * 6 / 5)));
        let _ = child.kill();
        let finished = child.wait().unwrap().success();
        let recovered = apply(&root, "").wait_with_output().unwrap();
        assert_eq!(
            recovered.status.code(),
            Some(2),
            "commit {i}: {recovered:?}"
        );
        let now = state(&root, &old, &new);
        no_leftovers(&root);
        if root.join(".editfs/branches").join(&name).exists() {
            cut += usize::from(!finished);
            let again = run(&name).wait_with_output().unwrap();
            assert!(
                again.status.success(),
                "commit {i} run again: {}{}",
                String::from_utf8_lossy(&again.stdout),
                String::from_utf8_lossy(&again.stderr)
            );
            assert_ne!(state(&root, &old, &new), was, "commit {i} run again");
            assert!(!root.join(".editfs/branches").join(&name).exists());
        } else {
            assert_ne!(
                now, was,
                "commit {i}: the branch is gone, so its change is in"
            );
        }
    }
    assert!(
        cut > 0,
        "no kill landed inside a commit: the test proved nothing"
    );
    // A commit killed while it removed its branch leaves the rest to the
    // next branch command: a listing, here.
    assert!(editfs(&["branch", "list"], &root).wait().unwrap().success());
    let left: Vec<_> = fs::read_dir(root.join(".editfs/branches"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left of the branches: {left:?}");
}
