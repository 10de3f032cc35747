//! Branches through the command line: create, list and abort, as a user runs them.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::Inside;

fn editfs(args: &[&str]) -> Output {
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
fn ok(args: &[&str]) -> String {
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
