//! Branches through the command line: create, list and abort, as a user runs them.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::Inside;

pub(crate) fn editfs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(args)
        .output()
        .unwrap()
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `editfs ARGS`, which must succeed; its standard output.
pub(crate) fn ok(args: &[&str]) -> String {
    let o = editfs(args);
    assert!(o.status.success(), "editfs {args:?}: {}", said(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    for i in 0..200 {
        fs::write(dir.path().join(format!("src/f{i}.txt")), "x\n".repeat(100)).unwrap();
    }
    dir
}

fn branch_dir(p: &Path, name: &str) -> std::path::PathBuf {
    p.join(".editfs/branches").join(name)
}

/// Every file beneath `dir`, directories left out.
fn files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| match e.file_type().unwrap().is_dir() {
            true => files(&e.path()),
            false => 1,
        })
        .sum()
}

#[test]
fn a_branch_is_made_without_copying_and_starts_from_a_checkpoint_of_now() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let said = ok(&["branch", "create", root, "try-1"]);
    assert!(
        said.starts_with("OK: branch try-1 from transaction 1"),
        "{said}"
    );
    let dir = branch_dir(p.path(), "try-1");
    assert_eq!(files(&dir.join("upper")), 0, "nothing copied");
    let history = ok(&["history", root]);
    assert!(history.contains("editfs branch create"), "{history}");
    let list = ok(&["branch", "list", root]);
    assert_eq!(list, "try-1\tbase 1\t0 file(s), 0 byte(s)\tnot mounted\n");
}

#[test]
fn a_name_taken_or_not_one_word_and_an_unknown_point_are_refused() {
    let p = project();
    let root = p.path().to_str().unwrap();
    ok(&["branch", "create", root, "a"]);
    for (args, says) in [
        (vec!["a"], "a branch named \"a\" exists already"),
        (vec!["x/y"], "only letters, digits"),
        (vec![".x"], "starts with '-' or '.'"),
        (vec!["b", "--from", "nope"], "no checkpoint named \"nope\""),
        (vec!["b", "--from", "99"], "no transaction 99"),
    ] {
        let mut all = vec!["branch", "create", root];
        all.extend(args.iter());
        let o = editfs(&all);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", said(&o));
        assert!(said(&o).contains(says), "{args:?}: {}", said(&o));
    }
    let list = ok(&["branch", "list", root]);
    assert_eq!(list.lines().count(), 1, "only the first branch: {list}");
}

#[test]
fn from_names_a_checkpoint_and_the_branch_starts_there() {
    let p = project();
    let root = p.path().to_str().unwrap();
    ok(&["checkpoint", root, "before-task"]);
    ok(&["checkpoint", root]);
    let said = ok(&["branch", "create", root, "b", "--from", "before-task"]);
    assert!(
        said.starts_with("OK: branch b from transaction 1\n"),
        "{said}"
    );
    let json: serde_json::Value =
        serde_json::from_str(ok(&["branch", "list", root, "--json"]).trim()).unwrap();
    assert_eq!(json["base"], 1);
    assert_eq!(json["from"], "before-task");
    assert_eq!(json["mounts"], serde_json::json!([]));
}

#[test]
fn the_list_counts_what_a_branch_changed() {
    let p = project();
    let root = p.path().to_str().unwrap();
    ok(&["branch", "create", root, "b"]);
    let upper = branch_dir(p.path(), "b").join("upper");
    fs::create_dir_all(upper.join("src")).unwrap();
    fs::write(upper.join("src/f1.txt"), "changed\n").unwrap();
    fs::write(upper.join("new.txt"), "abc").unwrap();
    let list = ok(&["branch", "list", root]);
    assert_eq!(list, "b\tbase 1\t2 file(s), 11 byte(s)\tnot mounted\n");
}

#[test]
fn abort_removes_the_branch_and_leaves_the_project_and_its_siblings() {
    let p = project();
    let root = p.path().to_str().unwrap();
    ok(&["branch", "create", root, "a"]);
    ok(&["branch", "create", root, "b"]);
    fs::write(branch_dir(p.path(), "a").join("upper/new.txt"), "abc").unwrap();
    assert_eq!(
        ok(&["branch", "abort", root, "a"]),
        "OK: branch a aborted\n"
    );
    assert!(!branch_dir(p.path(), "a").exists());
    let left: Vec<_> = fs::read_dir(p.path().join(".editfs/branches"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["b"], "nothing left of a but its log line");
    assert_eq!(files(&p.path().join("src")), 200);
    let o = editfs(&["branch", "abort", root, "a"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(said(&o).contains("no branch named \"a\""), "{}", said(&o));
}

#[test]
fn abort_is_refused_while_a_mount_serves_the_branch_unless_forced() {
    let p = project();
    let root = p.path().to_str().unwrap();
    ok(&["branch", "create", root, "a"]);
    let merged = branch_dir(p.path(), "a").join("merged");
    let Some(inside) = Inside::mount(&merged, "tmpfs") else {
        return;
    };
    let list = ok(&["branch", "list", root]);
    assert!(list.contains("mounted at "), "{list}");
    let o = editfs(&["branch", "abort", root, "a"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(said(&o).contains("is mounted at"), "{}", said(&o));
    assert!(said(&o).contains("--force"), "{}", said(&o));
    assert!(branch_dir(p.path(), "a").join("branch.json").exists());
    ok(&["branch", "abort", root, "a", "--force"]);
    assert!(!branch_dir(p.path(), "a").exists());
    let table = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!table.contains(merged.to_str().unwrap()), "unmounted");
    std::mem::forget(inside);
}

/// A branch mounted with `editfs mount --branch` for a test: unmounted when
/// dropped, its lower layers too, whatever the test did.
pub(crate) struct BranchMount {
    pub(crate) mnt: std::path::PathBuf,
    branch: std::path::PathBuf,
}

impl BranchMount {
    /// Mounts branch `name` of `source` at a new directory of `dir`; `None`
    /// where it cannot mount outside CI.
    fn start(source: &Path, name: &str, dir: &Path) -> Option<BranchMount> {
        BranchMount::start_with(source, name, dir, &[])
    }

    /// As `start`, with the mount's options `args` (`-o allow_other`).
    pub(crate) fn start_with(
        source: &Path,
        name: &str,
        dir: &Path,
        args: &[&str],
    ) -> Option<BranchMount> {
        let mnt = dir.join(format!("mnt-{name}"));
        fs::create_dir_all(&mnt).unwrap();
        let (src, at) = (source.to_str().unwrap(), mnt.to_str().unwrap());
        let mut all = vec!["mount", src, at, "--branch", name, "--daemon"];
        all.extend_from_slice(args);
        let o = editfs(&all);
        let mounted = BranchMount {
            mnt,
            branch: branch_dir(source, name),
        };
        if !o.status.success() {
            assert!(
                std::env::var_os("CI").is_none(),
                "a branch mount failed with CI set: {}",
                said(&o)
            );
            eprintln!(
                "\n*** SKIPPING: a branch cannot be mounted here: {} ***\n",
                said(&o)
            );
            return None;
        }
        Some(mounted)
    }

    /// `script` run by bash in the mount, which must succeed; its output.
    fn ok(&self, script: &str) -> String {
        let o = Command::new("bash")
            .args(["-c", script])
            .current_dir(&self.mnt)
            .output()
            .unwrap();
        assert!(o.status.success(), "{script}: {}", said(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

/// The mount points of this namespace at or beneath `dir`, or `dir` itself.
fn mounts_beneath(dir: &Path) -> Vec<String> {
    let dir = dir.to_str().unwrap();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(dir))
        .map(str::to_owned)
        .collect()
}

impl Drop for BranchMount {
    fn drop(&mut self) {
        if !mounts_beneath(&self.mnt).is_empty() {
            let _ = editfs(&["unmount", self.mnt.to_str().unwrap()]);
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !mounts_beneath(&self.branch).is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for at in mounts_beneath(&self.branch) {
            let _ = Command::new("umount").arg("-l").arg(at).status();
        }
    }
}

const HELLO_EDIT: &str = "<<<<<<< SEARCH\nhello\n=======\nhello from NAME\n>>>>>>> REPLACE\n";

#[test]
fn two_branches_each_see_their_own_changes_only_and_the_project_none() {
    let p = project();
    let (root, dir) = (p.path().to_str().unwrap(), tempfile::tempdir().unwrap());
    fs::write(p.path().join("a.txt"), "hello\n").unwrap();
    fs::write(p.path().join("b.txt"), "before\n").unwrap();
    ok(&["branch", "create", root, "one"]);
    ok(&["branch", "create", root, "two"]);
    // The project changes after the branches were made: they must not see it.
    let o = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["apply", p.path().join("b.txt").to_str().unwrap()])
        .stdin(
            fs::File::open({
                let payload = dir.path().join("payload");
                fs::write(
                    &payload,
                    "<<<<<<< SEARCH\nbefore\n=======\nafter\n>>>>>>> REPLACE\n",
                )
                .unwrap();
                payload
            })
            .unwrap(),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", said(&o));
    assert_eq!(
        fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "after\n"
    );
    let Some(one) = BranchMount::start(p.path(), "one", dir.path()) else {
        return;
    };
    let Some(two) = BranchMount::start(p.path(), "two", dir.path()) else {
        return;
    };
    for (m, name) in [(&one, "one"), (&two, "two")] {
        m.ok(&format!(
            "cat > a.txt.edit <<'EOF'\n{}EOF\necho {name} > {name}.txt && rm src/f{}.txt",
            HELLO_EDIT.replace("NAME", name),
            if name == "one" { 2 } else { 3 }
        ));
        assert!(
            m.ok("cat a.txt.status").starts_with("OK a.txt (tx 1"),
            "own ids"
        );
        assert_eq!(
            m.ok("cat b.txt"),
            "before\n",
            "the base, not the project now"
        );
    }
    assert_eq!(
        one.ok("cat a.txt; ls"),
        "hello from one\na.txt\nb.txt\none.txt\nsrc\n"
    );
    assert_eq!(
        two.ok("cat a.txt; ls"),
        "hello from two\na.txt\nb.txt\nsrc\ntwo.txt\n"
    );
    assert_eq!(
        one.ok("ls src | wc -l; test -e src/f3.txt && echo f3"),
        "199\nf3\n"
    );
    assert_eq!(
        two.ok("ls src | wc -l; test -e src/f2.txt && echo f2"),
        "199\nf2\n"
    );
    assert!(one.ok("cat .editfs/history").contains("a.txt"));
    assert_eq!(
        fs::read_to_string(p.path().join("a.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        files(&p.path().join("src")),
        200,
        "the project lost no file"
    );
    assert!(!p.path().join("one.txt").exists() && !p.path().join("two.txt").exists());
    let list = ok(&["branch", "list", root]);
    assert!(
        list.contains(&format!("mounted at {}", one.mnt.display())),
        "{list}"
    );
    // Each branch's net change against its base, and one against the other;
    // the project's change to b.txt after the base is in neither.
    let diff = |args: &[&str]| ok(&[&["branch", "diff", root][..], args].concat());
    assert_eq!(
        diff(&["one", "--name-status"]),
        "M\ta.txt\nA\tone.txt\nD\tsrc/f2.txt\n"
    );
    assert_eq!(
        diff(&["one", "two", "--name-status"]),
        "M\ta.txt\nD\tone.txt\nR100\tsrc/f3.txt\tsrc/f2.txt\nA\ttwo.txt\n",
        "f2 and f3 hold the same bytes: one removed, one back, as git pairs them"
    );
    let patch = diff(&["two"]);
    assert!(
        patch.contains("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello\n+hello from two\n"),
        "{patch}"
    );
    drop(one);
    assert_eq!(
        diff(&["one", "--stat"]),
        " a.txt | +1 -1\n one.txt | +1 -0\n src/f2.txt | +0 -100\n 3 file(s) changed, 2 insertion(s)(+), 101 deletion(s)(-)\n",
        "read from the branch's directory, unmounted"
    );
}

#[test]
fn abort_force_unmounts_a_served_branch_and_removes_it() {
    let p = project();
    let (root, dir) = (p.path().to_str().unwrap(), tempfile::tempdir().unwrap());
    ok(&["branch", "create", root, "b"]);
    let Some(m) = BranchMount::start(p.path(), "b", dir.path()) else {
        return;
    };
    m.ok("echo new > new.txt");
    let o = editfs(&["branch", "abort", root, "b"]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert_eq!(
        m.ok("cat new.txt"),
        "new\n",
        "still served after a refused abort"
    );
    ok(&["branch", "abort", root, "b", "--force"]);
    assert!(mounts_beneath(&m.mnt).is_empty(), "the mount is gone");
    assert!(mounts_beneath(&m.branch).is_empty(), "its layers are gone");
    assert!(!m.branch.exists());
    assert!(!p.path().join("new.txt").exists());
}

/// `editfs ARGS` in full: its exit code and all it said.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let o = editfs(args);
    (o.status.code(), said(&o))
}

#[test]
fn commits_land_first_wins_a_later_one_re_anchors_and_a_conflict_changes_nothing() {
    let p = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = p.path().to_str().unwrap();
    let lines: String = (1..=40).map(|i| format!("line {i}\n")).collect();
    fs::write(p.path().join("a.txt"), &lines).unwrap();
    fs::write(p.path().join("old.txt"), "old\n").unwrap();
    for name in ["one", "two", "three"] {
        ok(&["branch", "create", root, name]);
    }
    {
        let mut mounts = Vec::new();
        for name in ["one", "two", "three"] {
            let Some(m) = BranchMount::start(p.path(), name, dir.path()) else {
                return;
            };
            mounts.push(m);
        }
        let edit = |to: &str| {
            format!(
                "cat > a.txt.edit <<'EOF'\n<<<<<<< SEARCH\nline 5\n=======\n{to}\n>>>>>>> REPLACE\nEOF\n"
            )
        };
        mounts[0].ok(&(edit("line five") + "echo new > new.txt && rm old.txt && touch empty.txt"));
        mounts[1].ok("sed -i 's/^line 30$/line thirty/' a.txt");
        mounts[2].ok(&edit("line FIVE"));
    }
    let (code, text) = run(&["branch", "commit", root, "one", "--dry-run"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("dry run"), "{text}");
    assert_eq!(fs::read_to_string(p.path().join("a.txt")).unwrap(), lines);
    let (code, text) = run(&["branch", "commit", root, "one"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.starts_with("OK 4 file(s) (tx 4,"),
        "one transaction: {text}"
    );
    assert!(
        !branch_dir(p.path(), "one").exists(),
        "committed, then removed"
    );
    assert_eq!(fs::read(p.path().join("empty.txt")).unwrap(), b"");
    assert_eq!(
        fs::read_to_string(p.path().join("new.txt")).unwrap(),
        "new\n"
    );
    assert!(!p.path().join("old.txt").exists());
    // The second touches the same file elsewhere: it re-anchors on the first's result.
    let (code, text) = run(&["branch", "commit", root, "two"]);
    assert_eq!(code, Some(0), "{text}");
    let now = fs::read_to_string(p.path().join("a.txt")).unwrap();
    assert_eq!(
        now,
        lines
            .replace("line 5\n", "line five\n")
            .replace("line 30\n", "line thirty\n")
    );
    // The third changed the line the first did: the whole commit fails, naming it.
    let (code, text) = run(&["branch", "commit", root, "three"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("==== a.txt\nFAILED a.txt"), "{text}");
    assert!(
        text.contains("the file has \"line five\", SEARCH has \"line 5\""),
        "{text}"
    );
    assert_eq!(
        fs::read_to_string(p.path().join("a.txt")).unwrap(),
        now,
        "nothing changed"
    );
    assert!(
        branch_dir(p.path(), "three").exists(),
        "a failed commit keeps the branch"
    );
    // The first commit is one transaction: undone whole.
    ok(&["undo", root, "--tx", "4"]);
    assert!(!p.path().join("new.txt").exists());
    assert_eq!(
        fs::read_to_string(p.path().join("old.txt")).unwrap(),
        "old\n"
    );
}

#[test]
fn a_mounted_branch_is_not_committed() {
    let p = project();
    let (root, dir) = (p.path().to_str().unwrap(), tempfile::tempdir().unwrap());
    ok(&["branch", "create", root, "b"]);
    let Some(m) = BranchMount::start(p.path(), "b", dir.path()) else {
        return;
    };
    m.ok("echo new > new.txt");
    let (code, text) = run(&["branch", "commit", root, "b"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("is mounted at"), "{text}");
    assert!(!p.path().join("new.txt").exists());
}

#[test]
fn each_name_in_a_branch_mount_keeps_its_own_inode_and_type() {
    // A directory of the overlay and a file of the base view once shared an
    // inode number, and the mount above took .gitignore for the .git directory.
    let p = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = p.path().to_str().unwrap();
    for d in [".git/objects", "src"] {
        fs::create_dir_all(p.path().join(d)).unwrap();
    }
    for f in [".gitignore", "Cargo.toml", "src/main.rs", ".git/HEAD"] {
        fs::write(p.path().join(f), "x\n").unwrap();
    }
    ok(&["branch", "create", root, "b"]);
    let Some(m) = BranchMount::start(p.path(), "b", dir.path()) else {
        return;
    };
    m.ok("mkdir target && echo y > target/out");
    let script = "import os\n\
        for e in sorted(os.scandir('.'), key=lambda e: e.name):\n\
        \x20   st = os.lstat(e.name)\n\
        \x20   print(e.name, e.is_dir(follow_symlinks=False), os.path.isdir(e.name), st.st_ino)\n";
    let listed = m.ok(&format!("python3 -c \"{script}\""));
    let mut inodes = std::collections::HashSet::new();
    for line in listed.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        assert_eq!(w[1], w[2], "the listing's type is the file's: {listed}");
        assert!(
            inodes.insert(w[3].to_owned()),
            "one inode, two names: {listed}"
        );
    }
    assert_eq!(listed.lines().count(), 5, "{listed}");
    // Unique because the overlay beneath numbers every file in one space
    // (one device), rather than by chance.
    let merged = m.branch.join("merged");
    let devices: std::collections::HashSet<u64> = fs::read_dir(&merged)
        .unwrap()
        .map(|e| {
            std::os::unix::fs::MetadataExt::dev(&fs::symlink_metadata(e.unwrap().path()).unwrap())
        })
        .collect();
    assert_eq!(devices.len(), 1, "the overlay's files on {devices:?}");
}

#[test]
fn the_prompt_speaks_of_branches_only_when_asked() {
    let plain = ok(&["prompt", "/mnt/p"]);
    assert!(!plain.to_lowercase().contains("branch"), "{plain}");
    let asked = ok(&["prompt", "/mnt/p", "--branches"]);
    assert!(asked.starts_with(&plain), "the same section, then the note");
    assert!(
        asked.contains("This mount is a branch of the project"),
        "{asked}"
    );
}

const LIB: &str = "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n\npub fn three() -> u32 {\n    3\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn sums() {\n        assert!(super::one() + super::two() + super::three() > 0);\n    }\n}\n";

/// `cargo ARGS` offline in `dir`, which must succeed.
fn cargo(dir: &Path, args: &[&str]) {
    // The build goes in `dir`, as an agent's does: not in a target directory
    // the environment running the tests names.
    let o = Command::new("cargo")
        .args(args)
        .args(["--offline", "--quiet"])
        .env_remove("CARGO_TARGET_DIR")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cargo {args:?} in {}: {}",
        dir.display(),
        said(&o)
    );
}

#[test]
fn four_agents_on_branches_of_a_crate_two_build_one_commit_re_anchors_one_conflicts() {
    let p = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = p.path().to_str().unwrap();
    fs::create_dir_all(p.path().join("src")).unwrap();
    fs::write(
        p.path().join("Cargo.toml"),
        "[package]\nname = \"agents\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    fs::write(p.path().join(".gitignore"), "target/\n").unwrap();
    fs::write(p.path().join("src/lib.rs"), LIB).unwrap();
    let names = ["a", "b", "c", "d"];
    for n in names {
        ok(&["branch", "create", root, n]);
    }
    let edit = |search: &str, replace: &str| {
        format!(
            "cat > src/lib.rs.edit <<'EOF'\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\nEOF\n"
        )
    };
    {
        let mut mounts = Vec::new();
        for n in names {
            let Some(m) = BranchMount::start(p.path(), n, dir.path()) else {
                return;
            };
            mounts.push(m);
        }
        // Each agent is its own process, all at once.
        let scripts = [
            edit("    1\n}", "    10\n}") + "sed -i 's/^pub fn two/pub fn two/' src/lib.rs && echo a > a.txt",
            "printf 'pub fn four() -> u32 {\\n    4\\n}\\n' >> src/lib.rs && echo '# notes' > NOTES.md".to_owned(),
            edit("    1\n}", "    100\n}"),
            "echo scratch > scratch.txt && rm src/lib.rs".to_owned(),
        ];
        let agents: Vec<_> = mounts
            .iter()
            .zip(&scripts)
            .map(|(m, s)| {
                Command::new("bash")
                    .args(["-c", s])
                    .current_dir(&m.mnt)
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut agent in agents {
            assert!(agent.wait().unwrap().success());
        }
        for m in &mounts[..2] {
            cargo(&m.mnt, &["build"]);
            cargo(&m.mnt, &["test"]);
        }
        assert!(mounts[0].ok("ls").contains("target"), "built in the branch");
    }
    assert!(
        !p.path().join("target").exists(),
        "the project saw no build"
    );
    let (code, text) = run(&["branch", "commit", root, "a"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("the project's git ignores left out"),
        "{text}"
    );
    let (code, text) = run(&["branch", "commit", root, "b"]);
    assert_eq!(code, Some(0), "b re-anchors on a's result: {text}");
    let lib = fs::read_to_string(p.path().join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("    10\n") && lib.ends_with("pub fn four() -> u32 {\n    4\n}\n"),
        "{lib}"
    );
    let before = lib.clone();
    let (code, text) = run(&["branch", "commit", root, "c"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("FAILED src/lib.rs"), "{text}");
    assert_eq!(
        fs::read_to_string(p.path().join("src/lib.rs")).unwrap(),
        before
    );
    ok(&["branch", "abort", root, "d"]);
    assert!(p.path().join("src/lib.rs").exists() && !p.path().join("scratch.txt").exists());
    assert!(
        !p.path().join("target").exists(),
        "no build output committed"
    );
    assert_eq!(
        ok(&["branch", "list", root]).lines().count(),
        1,
        "c is left"
    );
}

#[test]
fn a_file_the_projects_mount_just_removed_is_still_in_the_branch() {
    // The project's mount files a removal into the log a moment after `rm`
    // returns; the branch asked before it was filed once saw the file gone.
    let Some(project) = crate::common::Mount::start(&[], |src| {
        for i in 0..60 {
            fs::write(src.join(format!("f{i}.txt")), format!("content {i}\n")).unwrap();
        }
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    ok(&["branch", "create", project.src.to_str().unwrap(), "b"]);
    let Some(branch) = BranchMount::start(&project.src, "b", dir.path()) else {
        return;
    };
    let mut missing = Vec::new();
    for i in 0..60 {
        project.ok(&format!("rm f{i}.txt"));
        if fs::read_to_string(branch.mnt.join(format!("f{i}.txt"))).ok()
            != Some(format!("content {i}\n"))
        {
            missing.push(i);
        }
    }
    assert!(missing.is_empty(), "gone from the branch: {missing:?}");
    assert_eq!(branch.ok("ls | wc -l"), "60\n");
}

#[test]
fn abort_force_clears_the_layers_a_killed_branch_daemon_left() {
    let p = project();
    let (root, dir) = (p.path().to_str().unwrap(), tempfile::tempdir().unwrap());
    ok(&["branch", "create", root, "b"]);
    let mnt = dir.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let o = editfs(&[
        "mount",
        root,
        mnt.to_str().unwrap(),
        "--branch",
        "b",
        "--daemon",
    ]);
    let _guard = BranchMount {
        mnt: mnt.clone(),
        branch: branch_dir(p.path(), "b"),
    };
    if !o.status.success() {
        assert!(std::env::var_os("CI").is_none(), "{}", said(&o));
        return;
    }
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let pid: i32 = out
        .split("by pid ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out}"));
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let list = ok(&["branch", "list", root]);
    assert!(list.contains("branches/b/base"), "the layers stay: {list}");
    ok(&["branch", "abort", root, "b", "--force"]);
    assert!(
        mounts_beneath(&mnt).is_empty() && mounts_beneath(&branch_dir(p.path(), "b")).is_empty()
    );
    assert!(!branch_dir(p.path(), "b").exists());
}

/// An `F.edit` payload that changes line `from` of `a.txt` to `to`, through `m`.
fn edit_through(m: &crate::common::Mount, from: &str, to: &str) {
    m.ok(&format!(
        "printf '<<<<<<< SEARCH\\n{from}\\n=======\\n{to}\\n>>>>>>> REPLACE\\n' > a.txt.edit"
    ));
}

#[test]
fn a_branchs_base_outlives_keep() {
    let Some(m) = crate::common::Mount::start(&["--keep", "1"], |src| {
        fs::write(src.join("a.txt"), "v0\n").unwrap();
    }) else {
        return;
    };
    // Edits before the branch prune too: the mount has looked for branches
    // a moment before one is made.
    edit_through(&m, "v0", "v1");
    edit_through(&m, "v1", "at the base");
    let dir = tempfile::tempdir().unwrap();
    ok(&["branch", "create", m.src.to_str().unwrap(), "b"]);
    edit_through(&m, "at the base", "one");
    edit_through(&m, "one", "two");
    edit_through(&m, "two", "three");
    let Some(b) = BranchMount::start(&m.src, "b", dir.path()) else {
        return;
    };
    assert_eq!(
        b.ok("cat a.txt"),
        "at the base\n",
        "--keep 1 dropped the version the branch's base needs"
    );
}
