//! Multi-file transactions, history, show and undo through the command line.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn editfs(args: &[&str], stdin: &str, cwd: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".editfs")).unwrap();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    fs::write(dir.path().join("src/a.py"), "a = 1\n").unwrap();
    fs::write(dir.path().join("b.txt"), "bee\n").unwrap();
    dir
}

const TWO_FILES: &str = "src/a.py\n```python\n<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n```\n\nb.txt\n<<<<<<< SEARCH\nbee\n=======\nBEE\n>>>>>>> REPLACE\n";

#[test]
fn a_multi_file_payload_changes_every_file_or_none() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let o = editfs(&["apply", "--multi", root], TWO_FILES, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).starts_with("OK 2 file(s) (tx 1"), "{}", out(&o));
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 2\n"
    );
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "BEE\n");
    let bad = TWO_FILES
        .replace("a = 1\n=======\na = 2", "a = 2\n=======\na = 3")
        .replace("bee\n=======\nBEE", "nope\n=======\nzzz");
    let o = editfs(&["apply", "--multi", root, "--json"], &bad, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "failed");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("b.txt:"),
        "{v}"
    );
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 2\n",
        "all or nothing"
    );
}

#[test]
fn paths_that_leave_the_root_are_refused() {
    let p = project();
    std::os::unix::fs::symlink("/etc", p.path().join("etc")).unwrap();
    let root = p.path().to_str().unwrap();
    for path in ["/etc/hostname", "../x", "etc/hostname", ".editfs/log"] {
        let payload = format!("{path}\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n");
        let o = editfs(&["apply", "--multi", root], &payload, p.path());
        assert_ne!(o.status.code(), Some(0), "{path}: {}", out(&o));
    }
    let o = editfs(
        &["apply", "--multi", root],
        "etc/hostname\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n",
        p.path(),
    );
    assert!(out(&o).contains("leaves the project"), "{}", out(&o));
}

#[test]
fn if_match_per_file_names_the_stale_file_and_its_sha() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let payload = r#"[{"path": "b.txt", "search": "bee", "replace": "x", "if_match": "00"},
                     {"path": "src/a.py", "search": "a = 1", "replace": "a = 3"}]"#;
    let o = editfs(&["apply", "--multi", root], payload, p.path());
    assert_eq!(o.status.code(), Some(1));
    let sha = editfs::engine::sha256_hex(b"bee\n");
    assert!(
        out(&o).contains("b.txt") && out(&o).contains(&sha),
        "{}",
        out(&o)
    );
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 1\n"
    );
}

#[test]
fn history_show_and_undo_of_an_undo() {
    let p = project();
    let root = p.path().to_str().unwrap();
    assert!(
        editfs(&["apply", "--multi", root], TWO_FILES, p.path())
            .status
            .success()
    );
    let more = "<<<<<<< SEARCH\nBEE\n=======\nBee!\n>>>>>>> REPLACE\n";
    assert!(editfs(&["apply", "b.txt"], more, p.path()).status.success());

    let h = out(&editfs(&["history", root], "", p.path()));
    assert!(
        h.contains("src/a.py b.txt") && h.lines().count() == 3,
        "{h}"
    );
    let h = out(&editfs(&["history", root, "src/a.py"], "", p.path()));
    assert_eq!(h.lines().count(), 2, "{h}");
    let s = out(&editfs(&["show", root, "1"], "", p.path()));
    assert!(
        s.contains("-a = 1\n+a = 2") && s.contains("-bee\n+BEE"),
        "{s}"
    );

    // Undoing transaction 1 on b.txt would overwrite transaction 2: refused, and named.
    let o = editfs(&["undo", root, "b.txt", "--to", "1"], "", p.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).contains("transaction(s) 2"), "{}", out(&o));
    // The latest transaction on b.txt can be undone, and that undo undone again.
    assert!(
        editfs(&["undo", root, "b.txt"], "", p.path())
            .status
            .success()
    );
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "BEE\n");
    assert!(
        editfs(&["undo", root, "b.txt"], "", p.path())
            .status
            .success()
    );
    assert_eq!(
        fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "Bee!\n"
    );
    // Outside changes are named, then overwritten with --force.
    fs::write(p.path().join("b.txt"), "by hand\n").unwrap();
    let o = editfs(&["undo", root, "b.txt"], "", p.path());
    assert!(out(&o).contains("outside editfs"), "{}", out(&o));
    assert!(
        editfs(&["undo", root, "b.txt", "--force"], "", p.path())
            .status
            .success()
    );
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "BEE\n");
}

#[test]
fn identical_pre_images_are_stored_once() {
    let p = project();
    let there = "<<<<<<< SEARCH\nbee\n=======\nx\n>>>>>>> REPLACE\n";
    let back = "<<<<<<< SEARCH\nx\n=======\nbee\n>>>>>>> REPLACE\n";
    for _ in 0..3 {
        assert!(
            editfs(&["apply", "b.txt"], there, p.path())
                .status
                .success()
        );
        assert!(editfs(&["apply", "b.txt"], back, p.path()).status.success());
    }
    assert_eq!(
        fs::read_dir(p.path().join(".editfs/snapshots/b.txt"))
            .unwrap()
            .count(),
        6
    );
    assert_eq!(
        fs::read_dir(p.path().join(".editfs/objects"))
            .unwrap()
            .count(),
        2
    );
}
