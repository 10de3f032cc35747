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
    let payload = r#"[{"path": "b.txt", "search": "bee", "replace": "x", "if_match": "STALE"},
                     {"path": "src/a.py", "search": "a = 1", "replace": "a = 3"}]"#
        .replace("STALE", &"0".repeat(64));
    let payload = payload.as_str();
    let o = editfs(&["apply", "--multi", root], payload, p.path());
    assert_eq!(o.status.code(), Some(1));
    let sha = editfs_engine::sha256_hex(b"bee\n");
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

/// The JSON report of a command run with `--json`.
fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(o)))
}

fn log_lines(p: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(p.join(".editfs/log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_outcome_gets_the_next_id_and_a_log_line() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let rejected = editfs(&["apply", "b.txt", "--json"], "no block here\n", p.path());
    assert_eq!(rejected.status.code(), Some(2), "{}", out(&rejected));
    let multi_rejected = editfs(&["apply", "--multi", root, "--json"], "", p.path());
    assert_eq!(
        multi_rejected.status.code(),
        Some(2),
        "{}",
        out(&multi_rejected)
    );
    let bad = TWO_FILES.replace("bee\n=======", "nope\n=======");
    let multi_failed = editfs(&["apply", "--multi", root, "--json"], &bad, p.path());
    assert_eq!(
        multi_failed.status.code(),
        Some(1),
        "{}",
        out(&multi_failed)
    );
    let undo_failed = editfs(&["undo", root, "b.txt", "--json"], "", p.path());
    assert_eq!(undo_failed.status.code(), Some(1), "{}", out(&undo_failed));
    let ok = editfs(
        &["apply", "b.txt", "--json"],
        "<<<<<<< SEARCH\nbee\n=======\nx\n>>>>>>> REPLACE\n",
        p.path(),
    );
    let reports = [rejected, multi_rejected, multi_failed, undo_failed, ok];
    let ids: Vec<u64> = reports
        .iter()
        .map(|o| json(o)["tx"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    let logged: Vec<(u64, String)> = log_lines(p.path())
        .iter()
        .map(|l| {
            (
                l["tx"].as_u64().unwrap(),
                l["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = [
        (1, "rejected"),
        (2, "rejected"),
        (3, "failed"),
        (4, "failed"),
        (5, "ok"),
    ];
    assert_eq!(logged, want.map(|(t, o)| (t, o.to_owned())));
    assert_eq!(log_lines(p.path())[3]["kind"], "undo");
}

#[test]
fn undo_to_restores_over_later_recorded_transactions_and_can_be_undone() {
    let p = project();
    let root = p.path().to_str().unwrap();
    for (from, to) in [("bee", "one"), ("one", "two"), ("two", "three")] {
        let block = format!("<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n");
        assert!(
            editfs(&["apply", "b.txt"], &block, p.path())
                .status
                .success()
        );
    }
    let o = editfs(&["undo", root, "b.txt", "--to", "2"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(
        out(&o).contains("as it was before transaction 2"),
        "{}",
        out(&o)
    );
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "one\n");
    let h = out(&editfs(&["history", root, "b.txt"], "", p.path()));
    assert_eq!(
        h.lines().count(),
        5,
        "later transactions stay in history: {h}"
    );
    // Undoing the undo brings the latest recorded version back.
    assert!(
        editfs(&["undo", root, "b.txt"], "", p.path())
            .status
            .success()
    );
    assert_eq!(
        fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "three\n"
    );
    // Only an outside change needs --force, and the hint does not send the user round in circles.
    fs::write(p.path().join("b.txt"), "by hand\n").unwrap();
    let o = editfs(&["undo", root, "b.txt", "--to", "1"], "", p.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(
        out(&o).contains("outside editfs") && out(&o).contains("--force"),
        "{}",
        out(&o)
    );
    assert!(!out(&o).contains("undo those first"), "{}", out(&o));
    let o = editfs(
        &["undo", root, "b.txt", "--to", "1", "--force"],
        "",
        p.path(),
    );
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "bee\n");
}

#[test]
fn undo_tx_restores_every_file_of_a_multi_file_transaction_as_one() {
    let p = project();
    let root = p.path().to_str().unwrap();
    assert!(
        editfs(&["apply", "--multi", root], TWO_FILES, p.path())
            .status
            .success()
    );
    let more = "<<<<<<< SEARCH\nBEE\n=======\nBee!\n>>>>>>> REPLACE\n";
    assert!(editfs(&["apply", "b.txt"], more, p.path()).status.success());
    let o = editfs(&["undo", root, "--tx", "1", "--json"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v = json(&o);
    assert_eq!(v["tx"], 3);
    assert_eq!(v["files"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 1\n"
    );
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "bee\n");
    let undo_line = &log_lines(p.path())[2];
    assert_eq!(undo_line["kind"], "undo");
    assert_eq!(
        undo_line["files"].as_array().unwrap().len(),
        2,
        "one transaction"
    );
    // And it is undone as one too.
    assert!(
        editfs(&["undo", root, "--tx", "3"], "", p.path())
            .status
            .success()
    );
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 2\n"
    );
    assert_eq!(
        fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "Bee!\n"
    );
    // An outside change to one file stops the whole undo: neither file changes.
    fs::write(p.path().join("src/a.py"), "by hand\n").unwrap();
    let o = editfs(&["undo", root, "--tx", "1"], "", p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(
        fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "Bee!\n"
    );
}

#[test]
fn history_takes_dot_slash_and_absolute_paths_and_only_reads() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let block = "<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n";
    assert!(
        editfs(&["apply", "src/a.py"], block, p.path())
            .status
            .success()
    );
    let abs = p.path().join("src/a.py");
    for path in ["src/a.py", "./src/a.py", abs.to_str().unwrap()] {
        let h = out(&editfs(&["history", root, path], "", p.path()));
        assert_eq!(h.lines().count(), 2, "{path}: {h}");
    }
    let o = editfs(&["history", root, "/etc/passwd"], "", p.path());
    assert!(
        !o.status.success() && out(&o).contains("not inside"),
        "{}",
        out(&o)
    );
    // A state directory that may not be written to is read all the same.
    let state = p.path().join(".editfs");
    let ro = Command::new("mount")
        .arg("--bind")
        .arg(&state)
        .arg(&state)
        .status();
    if !ro.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPING the read-only part: cannot bind-mount (not root?)");
        return;
    }
    let remount = Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(&state)
        .status()
        .unwrap();
    let h = editfs(&["history", root, "./src/a.py"], "", p.path());
    let s = editfs(&["show", root, "1"], "", p.path());
    let _ = Command::new("umount").arg(&state).status();
    assert!(remount.success());
    assert!(
        h.status.success() && out(&h).lines().count() == 2,
        "{}",
        out(&h)
    );
    assert!(
        s.status.success() && out(&s).contains("+a = 2"),
        "{}",
        out(&s)
    );
}

/// A 1 MiB tmpfs, unmounted when dropped; `None` where it cannot be mounted (not root).
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount() -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_commit_that_runs_out_of_space_leaves_no_version_for_undo_to_take() {
    let Some(fs_) = Tmpfs::mount() else {
        eprintln!("SKIPPING: cannot mount a tmpfs (not root?)");
        return;
    };
    let p = fs_.0.path();
    fs::create_dir(p.join(".editfs")).unwrap();
    fs::write(p.join("b.txt"), "bee\n").unwrap();
    let root = p.to_str().unwrap();
    let block = "<<<<<<< SEARCH\nbee\n=======\none\n>>>>>>> REPLACE\n";
    assert!(editfs(&["apply", "b.txt"], block, p).status.success());
    // Fill the file system, then free room for the new version but not for its
    // temporary copy too.
    let filler = p.join("filler");
    let _ = fs::write(&filler, vec![b'x'; 2 << 20]);
    let full = fs::metadata(&filler).unwrap().len();
    fs::File::options()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(full - 120_000)
        .unwrap();
    let big = "y".repeat(90_000);
    let grow = format!("<<<<<<< SEARCH\none\n=======\n{big}\n>>>>>>> REPLACE\n");
    let o = editfs(&["apply", "b.txt", "--json"], &grow, p);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let tx = json(&o)["tx"].as_u64().unwrap();
    assert_eq!(json(&o)["error"]["kind"], "io", "{}", out(&o));
    assert_eq!(fs::read_to_string(p.join("b.txt")).unwrap(), "one\n");
    for side in ["snapshots", "versions"] {
        let kept: Vec<String> = fs::read_dir(p.join(".editfs").join(side).join("b.txt"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            kept,
            ["1"],
            "{side} keeps only the real transaction (failed: {tx})"
        );
    }
    fs::remove_file(&filler).unwrap();
    let o = editfs(&["undo", root, "b.txt"], "", p);
    assert!(o.status.success(), "{}", out(&o));
    assert!(out(&o).contains("before transaction 1"), "{}", out(&o));
    assert_eq!(fs::read_to_string(p.join("b.txt")).unwrap(), "bee\n");
    let o = editfs(&["undo", root, "b.txt", "--to", &tx.to_string()], "", p);
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).contains("changed nothing"), "{}", out(&o));
}

#[test]
fn undoing_a_transaction_that_created_a_file_removes_it_and_that_can_be_undone() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let create = "src/new.py\n<<<<<<< SEARCH\n=======\nnew = 1\n>>>>>>> REPLACE\nb.txt\n<<<<<<< SEARCH\nbee\n=======\nBEE\n>>>>>>> REPLACE\n";
    let o = editfs(&["apply", "--multi", root], create, p.path());
    assert!(o.status.success(), "{}", out(&o));
    let o = editfs(&["undo", root, "--tx", "1"], "", p.path());
    assert!(o.status.success(), "{}", out(&o));
    assert!(out(&o).contains("removed src/new.py"), "{}", out(&o));
    assert!(!p.path().join("src/new.py").exists());
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "bee\n");
    let o = editfs(&["undo", root, "src/new.py"], "", p.path());
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        fs::read_to_string(p.path().join("src/new.py")).unwrap(),
        "new = 1\n"
    );
    let o = editfs(&["undo", root, "src/new.py"], "", p.path());
    assert!(o.status.success(), "{}", out(&o));
    assert!(!p.path().join("src/new.py").exists());
}

fn read(p: &Path, rel: &str) -> Option<String> {
    fs::read_to_string(p.join(rel)).ok()
}

#[test]
fn a_begin_patch_that_deletes_and_moves_files_is_one_transaction_and_undo_brings_them_back() {
    let p = project();
    let root = p.path().to_str().unwrap();
    fs::write(p.path().join("src/run.sh"), "#!/bin/sh\necho old\n").unwrap();
    fs::set_permissions(
        p.path().join("src/run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let patch = "*** Begin Patch\n*** Delete File: b.txt\n*** Update File: src/run.sh\n*** Move to: scripts.sh\n@@\n #!/bin/sh\n-echo old\n+echo new\n*** Update File: src/a.py\n@@\n-a = 1\n+a = 2\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root, "--json"], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v = json(&o);
    let strategies: Vec<(&str, Vec<&str>)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let ops = f["operations"].as_array().unwrap();
            let s = ops
                .iter()
                .map(|o| o["strategy"].as_str().unwrap())
                .collect();
            (f["file"].as_str().unwrap(), s)
        })
        .collect();
    assert_eq!(
        strategies,
        [
            ("b.txt", vec!["delete"]),
            ("src/run.sh", vec!["exact", "move"]),
            ("src/a.py", vec!["exact"]),
            ("scripts.sh", vec!["move"]),
        ]
    );
    assert_eq!(read(p.path(), "b.txt"), None);
    assert_eq!(read(p.path(), "src/run.sh"), None);
    assert_eq!(
        read(p.path(), "scripts.sh").as_deref(),
        Some("#!/bin/sh\necho new\n")
    );
    let mode = fs::metadata(p.path().join("scripts.sh")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o755,
        "a moved script stays executable"
    );
    assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 2\n"));
    let line = &log_lines(p.path())[0];
    let files = line["files"].as_array().unwrap();
    let flag = |name: &str, key: &str| {
        files
            .iter()
            .find(|f| f["file"] == name)
            .map(|f| f[key] == true)
    };
    assert_eq!(flag("b.txt", "removed"), Some(true), "{line}");
    assert_eq!(flag("src/run.sh", "removed"), Some(true), "{line}");
    assert_eq!(flag("scripts.sh", "created"), Some(true), "{line}");
    // Undoing the delete alone brings b.txt back.
    let o = editfs(&["undo", root, "b.txt"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "b.txt").as_deref(), Some("bee\n"));
    // Undoing the whole transaction puts the moved file back where it was.
    let o = editfs(&["undo", root, "--tx", "1", "--force"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "scripts.sh"), None);
    assert_eq!(
        read(p.path(), "src/run.sh").as_deref(),
        Some("#!/bin/sh\necho old\n")
    );
    assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 1\n"));
}

#[test]
fn git_diffs_that_delete_and_rename_apply_and_a_stale_delete_changes_nothing() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let diff = "diff --git a/b.txt b/b.txt\ndeleted file mode 100644\nindex 7d6a9c2..0000000\n--- a/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bee\ndiff --git a/src/a.py b/src/b.py\nsimilarity index 60%\nrename from src/a.py\nrename to src/b.py\nindex 3e1d7a1..98c1f0e 100644\n--- a/src/a.py\n+++ b/src/b.py\n@@ -1 +1 @@\n-a = 1\n+b = 1\n";
    let stale = diff.replace("-bee\n", "-bees\n");
    let o = editfs(&["apply", "--multi", root, "--json"], &stale, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(read(p.path(), "b.txt").as_deref(), Some("bee\n"));
    assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 1\n"));
    assert_eq!(read(p.path(), "src/b.py"), None);
    // A diff that deletes a file that grew since: the extra line is not listed.
    fs::write(p.path().join("b.txt"), "bee\nmore\n").unwrap();
    let o = editfs(&["apply", "--multi", root], diff, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("1 line(s) it does not list remain"),
        "{}",
        out(&o)
    );
    assert_eq!(read(p.path(), "b.txt").as_deref(), Some("bee\nmore\n"));
    fs::write(p.path().join("b.txt"), "bee\n").unwrap();
    let o = editfs(&["apply", "--multi", root], diff, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "b.txt"), None);
    assert_eq!(read(p.path(), "src/a.py"), None);
    assert_eq!(read(p.path(), "src/b.py").as_deref(), Some("b = 1\n"));
    let tx = log_lines(p.path()).last().unwrap()["tx"].to_string();
    let o = editfs(&["undo", root, "--tx", &tx], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "b.txt").as_deref(), Some("bee\n"));
    assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 1\n"));
    assert_eq!(read(p.path(), "src/b.py"), None);
}

#[test]
fn a_move_onto_an_existing_file_or_out_of_the_project_changes_nothing() {
    let p = project();
    let root = p.path().to_str().unwrap();
    for to in ["b.txt", "../outside.py", ".editfs/log"] {
        let patch = format!(
            "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: {to}\n*** End Patch\n"
        );
        let o = editfs(&["apply", "--multi", root], &patch, p.path());
        assert_eq!(o.status.code(), Some(1), "{to}: {}", out(&o));
        assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 1\n"));
        assert_eq!(read(p.path(), "b.txt").as_deref(), Some("bee\n"));
    }
    assert!(!p.path().parent().unwrap().join("outside.py").exists());
}

#[test]
fn a_refused_move_is_the_failed_operation_and_its_files_edits_read_as_not_written() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let patch = "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: b.txt\n@@\n-a = 1\n+a = 2\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root, "--json"], patch, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let v = json(&o);
    let f = &v["files"][0];
    assert_eq!(f["file"], "src/a.py", "{v}");
    assert_eq!(f["outcome"], "failed", "{v}");
    assert_eq!(f["applied"], 0, "{v}");
    assert!(f["diff"].is_null(), "{v}");
    assert_eq!(f["operations"][0]["outcome"], "matched", "{v}");
    assert_eq!(f["operations"][1]["outcome"], "failed", "{v}");
    assert_eq!(f["error"]["kind"], "file_exists", "{v}");
    assert_eq!(f["error"]["operation"], 2, "{v}");
    assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 1\n"));
}

#[test]
fn a_delete_sent_to_one_files_apply_is_refused_naming_the_multi_file_way() {
    let p = project();
    let patch = "*** Begin Patch\n*** Delete File: b.txt\n*** End Patch\n";
    let o = editfs(&["apply", "b.txt", "--json"], patch, p.path());
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let v = json(&o);
    assert_eq!(v["outcome"], "rejected");
    assert_eq!(v["error"]["kind"], "multi_file");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains(".editfs/edit"),
        "{v}"
    );
    assert_eq!(read(p.path(), "b.txt").as_deref(), Some("bee\n"));
}

#[test]
fn a_patch_adds_and_moves_files_into_directories_that_do_not_exist_yet() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let patch = "*** Begin Patch\n*** Add File: pkg/sub/__init__.py\n+from .core import run\n*** Update File: src/a.py\n*** Move to: pkg/sub/core.py\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(
        read(p.path(), "pkg/sub/__init__.py").as_deref(),
        Some("from .core import run\n")
    );
    assert_eq!(
        read(p.path(), "pkg/sub/core.py").as_deref(),
        Some("a = 1\n")
    );
    assert_eq!(read(p.path(), "src/a.py"), None);
    // An edit of a file in a missing directory is still a missing file.
    let edit = "*** Begin Patch\n*** Update File: nowhere/x.py\n@@\n-a\n+b\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root], edit, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(!p.path().join("nowhere").exists());
}

#[test]
fn undo_dry_run_prints_the_diff_and_changes_nothing_also_with_json() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let o = editfs(&["apply", "--multi", root], TWO_FILES, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let log_before = fs::read(p.path().join(".editfs/log")).unwrap();
    let txid_before = fs::read(p.path().join(".editfs/txid")).unwrap();

    let o = editfs(&["undo", root, "src/a.py", "--dry-run"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("-a = 2\n+a = 1\n"), "{text}");
    assert!(text.contains("dry run: nothing was changed"), "{text}");
    assert!(
        text.contains("would restore src/a.py as it was before transaction 1"),
        "{text}"
    );

    let o = editfs(
        &["undo", root, "--tx", "1", "--dry-run", "--json"],
        "",
        p.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v = json(&o);
    assert_eq!(v["tx"], 0, "{v}");
    let diffs: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["diff"].as_str().unwrap())
        .collect();
    assert_eq!(diffs.len(), 2, "{v}");
    assert!(diffs.iter().any(|d| d.contains("-BEE\n+bee\n")), "{v}");

    // A refused undo is refused in the dry run too, with the same reason.
    fs::write(p.path().join("b.txt"), "by hand\n").unwrap();
    let o = editfs(&["undo", root, "b.txt", "--dry-run"], "", p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("outside editfs"), "{}", out(&o));

    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 2\n"
    );
    assert_eq!(
        fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "by hand\n"
    );
    assert_eq!(
        fs::read(p.path().join(".editfs/log")).unwrap(),
        log_before,
        "logged"
    );
    assert_eq!(
        fs::read(p.path().join(".editfs/txid")).unwrap(),
        txid_before,
        "an id was taken"
    );
}

#[test]
fn history_follow_streams_new_transactions_until_killed_across_a_moved_log() {
    use std::io::BufRead;
    let p = project();
    let root = p.path().to_str().unwrap();
    let block =
        |from: &str, to: &str| format!("<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n");
    assert!(
        editfs(&["apply", "b.txt"], &block("bee", "one"), p.path())
            .status
            .success()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["history", root, "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("no line within 10 s")
    };
    assert!(next().starts_with("TX "));
    assert!(next().starts_with("1 "));
    assert!(
        editfs(&["apply", "b.txt"], &block("one", "two"), p.path())
            .status
            .success()
    );
    assert!(
        editfs(&["apply", "src/a.py"], &block("a = 1", "a = 2"), p.path())
            .status
            .success()
    );
    let (second, third) = (next(), next());
    assert!(
        second.starts_with("2 ") && second.contains("b.txt"),
        "{second}"
    );
    assert!(
        third.starts_with("3 ") && third.contains("src/a.py"),
        "{third}"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "--follow ended by itself"
    );
    // The store moves a long log to log.1 and starts a new one: following goes on.
    let state = p.path().join(".editfs");
    fs::rename(state.join("log"), state.join("log.1")).unwrap();
    assert!(
        editfs(&["apply", "b.txt"], &block("two", "three"), p.path())
            .status
            .success()
    );
    let fourth = next();
    assert!(fourth.starts_with("4 "), "{fourth}");
    let all = out(&editfs(&["history", root], "", p.path()));
    assert_eq!(all.lines().count(), 5, "{all}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Runs `editfs ARGS` with a terminal as standard output (through script(1));
/// `None` where script(1) is missing.
fn on_a_terminal(args: &str, env: &[(&str, &str)], cwd: &Path) -> Option<String> {
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_editfs"));
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color")
        .envs(env.iter().copied())
        .current_dir(cwd)
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn diffs_are_colored_on_a_terminal_only_and_never_with_no_color_or_in_the_log() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let block = "<<<<<<< SEARCH\nbee\n=======\nBEE\n>>>>>>> REPLACE\n";
    let o = editfs(&["apply", "b.txt", "--color=always"], block, p.path());
    assert!(o.status.success(), "{}", out(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("\x1b[31m-bee\x1b[0m\n") && text.contains("\x1b[32m+BEE\x1b[0m\n"),
        "{text:?}"
    );
    assert!(
        text.starts_with("OK b.txt"),
        "only diff lines are colored: {text:?}"
    );
    let log = fs::read_to_string(p.path().join(".editfs/log")).unwrap();
    assert!(!log.contains('\x1b'), "{log:?}");

    let piped = out(&editfs(&["show", root, "1"], "", p.path()));
    assert!(
        piped.contains("-bee\n") && !piped.contains('\x1b'),
        "{piped:?}"
    );
    let json = out(&editfs(
        &[
            "undo",
            root,
            "b.txt",
            "--dry-run",
            "--json",
            "--color=always",
        ],
        "",
        p.path(),
    ));
    assert!(!json.contains('\x1b'), "{json:?}");

    let Some(tty) = on_a_terminal(&format!("show {root} 1"), &[], p.path()) else {
        eprintln!("\n*** SKIPPING the terminal half: no script(1) ***\n");
        return;
    };
    assert!(tty.contains("\x1b[32m+BEE"), "{tty:?}");
    let no_color =
        on_a_terminal(&format!("show {root} 1"), &[("NO_COLOR", "1")], p.path()).unwrap();
    assert!(
        no_color.contains("+BEE") && !no_color.contains('\x1b'),
        "{no_color:?}"
    );
    let never = on_a_terminal(
        &format!("undo {root} b.txt --dry-run --color never"),
        &[],
        p.path(),
    )
    .unwrap();
    assert!(
        never.contains("+bee") && !never.contains('\x1b'),
        "{never:?}"
    );
}

#[test]
fn undoing_a_transaction_removes_the_directories_it_made_and_keeps_those_it_found() {
    let p = project();
    let root = p.path().to_str().unwrap();
    fs::create_dir_all(p.path().join("empty")).unwrap();
    let create = "<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n";
    let payload =
        format!("newpkg/deep/mod.py\n{create}src/new/mod.py\n{create}empty/mod.py\n{create}");
    let o = editfs(&["apply", "--multi", root], &payload, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(p.path().join("newpkg/deep/mod.py").is_file());
    let o = editfs(&["undo", root, "--tx", "1"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(!p.path().join("newpkg").exists(), "{}", out(&o));
    assert!(!p.path().join("src/new").exists(), "{}", out(&o));
    assert!(p.path().join("src/a.py").is_file());
    // A directory that was there before the transaction stays, even empty.
    assert!(p.path().join("empty").is_dir());
    assert!(!p.path().join("empty/mod.py").exists());
    // The undo itself can be undone: the files and their directories come back.
    let o = editfs(&["undo", root, "--tx", "2"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(
        fs::read_to_string(p.path().join("newpkg/deep/mod.py")).unwrap(),
        "x = 1\n"
    );
}

#[test]
fn undoing_an_undo_that_recreated_directories_removes_them_again() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let payload = "newpkg/deep/mod.py\n<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n";
    let o = editfs(&["apply", "--multi", root], payload, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    for tx in ["1", "2"] {
        let o = editfs(&["undo", root, "--tx", tx], "", p.path());
        assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    }
    assert!(p.path().join("newpkg/deep/mod.py").is_file());
    // Transaction 3 recreated the file and its directories: undoing it removes both.
    let o = editfs(&["undo", root, "--tx", "3"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(!p.path().join("newpkg").exists(), "{}", out(&o));
    assert!(p.path().join("src/a.py").is_file());
}

#[test]
fn an_undo_of_a_file_already_put_back_outside_editfs_succeeds_without_force() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let payload = "<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n";
    let o = editfs(&["apply", "src/a.py", "-"], payload, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    // `git checkout -- src/a.py`: the file is as it was before the edit.
    fs::write(p.path().join("src/a.py"), "a = 1\n").unwrap();
    let o = editfs(&["undo", root, "src/a.py"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 1\n"
    );
    // Any other outside change still needs --force.
    let o = editfs(&["apply", "src/a.py", "-"], payload, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    fs::write(p.path().join("src/a.py"), "a = 3\n").unwrap();
    let o = editfs(&["undo", root, "src/a.py"], "", p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("outside_changes"), "{}", out(&o));
}

/// A transaction that left a file as it was (SEARCH equal to REPLACE, an edit
/// already applied) is no change to undo: `undo PATH` takes the latest one that
/// changed it, `--to` that one says so, and `--tx` of it too.
#[test]
fn undo_passes_over_transactions_that_left_the_file_as_it_was() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let file = p.path().join("b.txt");
    let edit = "<<<<<<< SEARCH\nbee\n=======\nBEE\n>>>>>>> REPLACE\n";
    let o = editfs(&["apply", file.to_str().unwrap(), "-"], edit, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let again = editfs(&["apply", file.to_str().unwrap(), "-"], edit, p.path());
    assert!(out(&again).contains("already applied"), "{}", out(&again));
    let o = editfs(&["undo", root, "--to", "2", "b.txt"], "", p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("transaction 2 left b.txt as it was"),
        "{}",
        out(&o)
    );
    let o = editfs(&["undo", root, "--tx", "2"], "", p.path());
    assert!(out(&o).contains("left every file as it was"), "{}", out(&o));
    let o = editfs(&["undo", root, "b.txt"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).contains("before transaction 1"), "{}", out(&o));
    assert_eq!(fs::read_to_string(&file).unwrap(), "bee\n");
}

/// A file a transaction removed comes back with the mode and owner it had: a
/// private file stays private, a script stays executable.
#[test]
fn undoing_a_removal_gives_the_file_its_mode_and_owner_back() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let p = project();
    let root = p.path().to_str().unwrap();
    fs::write(p.path().join("src/run.sh"), "#!/bin/sh\necho old\n").unwrap();
    fs::set_permissions(
        p.path().join("src/run.sh"),
        fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    fs::set_permissions(p.path().join("b.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    let owner = fs::metadata(p.path().join("b.txt")).unwrap();
    let patch =
        "*** Begin Patch\n*** Delete File: b.txt\n*** Delete File: src/run.sh\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "b.txt"), None);
    let o = editfs(&["undo", root, "--tx", "1"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let mode = |rel: &str| fs::metadata(p.path().join(rel)).unwrap().mode() & 0o7777;
    assert_eq!(mode("b.txt"), 0o600);
    assert_eq!(mode("src/run.sh"), 0o750);
    let back = fs::metadata(p.path().join("b.txt")).unwrap();
    assert_eq!((back.uid(), back.gid()), (owner.uid(), owner.gid()));
    // A file removed outside editfs, then restored with --force, as before its edit.
    let o = editfs(
        &["apply", "b.txt"],
        "<<<<<<< SEARCH\nbee\n=======\nBEE\n>>>>>>> REPLACE\n",
        p.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    fs::remove_file(p.path().join("b.txt")).unwrap();
    let o = editfs(&["undo", root, "b.txt", "--force"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "b.txt").as_deref(), Some("bee\n"));
    assert_eq!(mode("b.txt"), 0o600);
}

#[test]
fn a_begin_patch_sent_twice_is_a_replay_of_its_added_and_updated_files() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let patch = "*** Begin Patch\n*** Add File: src/new.py\n+x = 1\n+y = 2\n*** Update File: src/a.py\n@@\n-a = 1\n+a = 10\n*** End Patch\n";
    let first = editfs(&["apply", "--multi", root], patch, p.path());
    assert_eq!(first.status.code(), Some(0), "{}", out(&first));
    let again = editfs(&["apply", "--multi", root, "--json"], patch, p.path());
    assert_eq!(again.status.code(), Some(0), "{}", out(&again));
    let v = json(&again);
    assert_eq!(v["outcome"], "ok", "{v}");
    for f in v["files"].as_array().unwrap() {
        assert_eq!(f["operations"][0]["outcome"], "already_applied", "{v}");
    }
    assert_eq!(
        read(p.path(), "src/new.py").as_deref(),
        Some("x = 1\ny = 2\n")
    );
    assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 10\n"));
}

#[test]
fn a_successful_undo_says_what_it_restored_plainly_not_as_a_warning() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let o = editfs(&["apply", "--multi", root], TWO_FILES, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let o = editfs(&["undo", root, "src/a.py"], "", p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("restored src/a.py as it was before transaction 1"),
        "{text}"
    );
    assert!(
        !text.contains("warning"),
        "a plain undo warns of nothing: {text}"
    );
    let o = editfs(&["undo", root, "b.txt", "--json"], "", p.path());
    let report = json(&o);
    assert_eq!(report["operations"][0]["warnings"], serde_json::json!([]));
    assert!(
        report["notes"][0]
            .as_str()
            .is_some_and(|n| n.starts_with("restored b.txt")),
        "{report}"
    );
}

/// `editfs diff` prints the net change since a checkpoint in each of its
/// forms, a file changed twice once, and a dry-run rewind changes nothing.
#[test]
fn diff_since_a_checkpoint_shows_the_net_change_as_stat_name_status_json_and_patch() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let o = editfs(&["checkpoint", root, "start"], "", p.path());
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        editfs(&["apply", "--multi", root], TWO_FILES, p.path())
            .status
            .success()
    );
    let again = "src/a.py\n<<<<<<< SEARCH\na = 2\n=======\na = 3\n>>>>>>> REPLACE\n";
    assert!(
        editfs(&["apply", "--multi", root], again, p.path())
            .status
            .success()
    );
    let diff = |form: &[&str]| {
        let mut args = vec!["diff", root, "--since", "start"];
        args.extend(form);
        let o = editfs(&args, "", p.path());
        assert!(o.status.success(), "{form:?}: {}", out(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let patch = diff(&[]);
    assert!(
        patch.contains("-a = 1\n+a = 3\n"),
        "net, not step by step:\n{patch}"
    );
    assert!(!patch.contains("a = 2"), "{patch}");
    assert!(diff(&["--name-status"]).contains("M\tb.txt\nM\tsrc/a.py\n"));
    let stat = diff(&["--stat"]);
    assert!(
        stat.contains(" src/a.py | +1 -1") && stat.contains(" 2 file(s) changed"),
        "{stat}"
    );
    let json: serde_json::Value = serde_json::from_str(&diff(&["--json"])).unwrap();
    assert_eq!(json["files"].as_array().map(Vec::len), Some(2), "{json}");
    assert_eq!(json["files"][1]["path"], "src/a.py");
    assert_eq!(json["files"][1]["status"], "M");
    let only = diff(&["b.txt"]);
    assert!(
        only.contains("b.txt") && !only.contains("src/a.py"),
        "{only}"
    );
    let dry = editfs(
        &["rewind", root, "--to", "start", "--dry-run"],
        "",
        p.path(),
    );
    assert!(dry.status.success(), "{}", out(&dry));
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 3\n"
    );
    let o = editfs(&["rewind", root, "--to", "start"], "", p.path());
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        fs::read_to_string(p.path().join("src/a.py")).unwrap(),
        "a = 1\n"
    );
    assert_eq!(fs::read_to_string(p.path().join("b.txt")).unwrap(), "bee\n");
}

/// A patch sent again after a timeout: its `*** Delete File:` finds the file
/// gone, and the history shows that an edit removed it, with nothing at that
/// path since, so it is `already applied`, as its update is; a path never
/// there, or removed by other means, still fails.
#[test]
fn a_resent_patch_deletion_of_a_file_an_edit_removed_is_already_applied() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-a = 1\n+a = 2\n*** Delete File: b.txt\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "b.txt"), None);
    let o = editfs(&["apply", "--multi", root, "--json"], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v = json(&o);
    for f in v["files"].as_array().unwrap() {
        assert_eq!(f["operations"][0]["outcome"], "already_applied", "{v}");
    }
    let b = &v["files"][1];
    assert_eq!(b["file"], "b.txt", "{v}");
    assert!(
        b["operations"][0]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("an edit removed it"),
        "{v}"
    );
    assert_eq!(read(p.path(), "src/a.py").as_deref(), Some("a = 2\n"));
    // Never there: a mistyped path fails as it did.
    let typo = "*** Begin Patch\n*** Delete File: bb.txt\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root, "--json"], typo, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(json(&o)["error"]["kind"], "not_found");
    // Made again and removed by other means since: no replay.
    fs::write(p.path().join("b.txt"), "again\n").unwrap();
    let o = editfs(
        &["apply", "--multi", root],
        "b.txt\n<<<<<<< SEARCH\nagain\n=======\nagain!\n>>>>>>> REPLACE\n",
        p.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    fs::remove_file(p.path().join("b.txt")).unwrap();
    let delete = "*** Begin Patch\n*** Delete File: b.txt\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root, "--json"], delete, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(json(&o)["error"]["kind"], "not_found");
}

/// A patch's move sent again: the file is gone from its old path, an edit
/// moved it to the path the move names, and the file there already reads as
/// the move's hunks make it, so the section is `already applied`. Once the
/// moved file changed so that a hunk would change it again, it fails as before.
#[test]
fn a_resent_patch_move_of_a_file_an_edit_moved_is_already_applied() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let patch = "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: pkg/a.py\n@@\n-a = 1\n+a = 2\n*** Update File: b.txt\n*** Move to: c.txt\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "pkg/a.py").as_deref(), Some("a = 2\n"));
    let o = editfs(&["apply", "--multi", root, "--json"], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v = json(&o);
    for f in v["files"].as_array().unwrap() {
        for op in f["operations"].as_array().unwrap() {
            assert_eq!(op["outcome"], "already_applied", "{v}");
        }
    }
    assert_eq!(read(p.path(), "pkg/a.py").as_deref(), Some("a = 2\n"));
    assert_eq!(read(p.path(), "c.txt").as_deref(), Some("bee\n"));
    fs::write(p.path().join("pkg/a.py"), "a = 3\n").unwrap();
    let o = editfs(&["apply", "--multi", root, "--json"], patch, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(json(&o)["error"]["kind"], "not_found");
    assert_eq!(read(p.path(), "pkg/a.py").as_deref(), Some("a = 3\n"));
}

/// What the command printed on standard error.
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_command_that_cannot_run_says_why_and_what_to_do_and_exits_by_the_contract() {
    let bare = tempfile::tempdir().unwrap();
    let dir = bare.path();
    let history = editfs(&["history", "."], "", dir);
    assert_eq!(history.status.code(), Some(1), "{}", err(&history));
    let text = err(&history);
    assert!(text.starts_with("editfs history: "), "{text}");
    assert!(text.contains("has no state directory"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("hint: ")), "{text}");

    let man = editfs(&["man", "no-such-command"], "", dir);
    assert_eq!(man.status.code(), Some(2), "{}", err(&man));
    assert!(
        err(&man).contains("hint: editfs --help lists them"),
        "{}",
        err(&man)
    );

    let apply = editfs(&["apply"], "", dir);
    assert_eq!(apply.status.code(), Some(2), "{}", err(&apply));
    assert!(
        err(&apply).starts_with("editfs apply: FILE is missing"),
        "{}",
        err(&apply)
    );
}

/// The head of the Python standard library's `email/errors.py`.
const EMAIL_ERRORS: &str = "# Copyright (C) 2001-2006 Python Software Foundation\n# Author: Barry Warsaw\n# Contact: email-sig@python.org\n\n\"\"\"email package exception classes.\"\"\"\n\n\nclass MessageError(Exception):\n    \"\"\"Base class for errors in the email package.\"\"\"\n";

/// The end of `email/base64mime.py`'s docstring and the start of its `__all__`.
const EMAIL_BASE64MIME: &str = "decoding.  To deal with the various line wrapping issues, use the email.header\nmodule.\n\"\"\"\n\n__all__ = [\n    'body_decode',\n    'body_encode',\n]\n";

/// `git diff --cached -M` of base64mime.py renamed to b64mime.py and edited,
/// and errors.py deleted.
const GIT_RENAME_AND_DELETE: &str = "diff --git a/base64mime.py b/b64mime.py\nsimilarity index 90%\nrename from base64mime.py\nrename to b64mime.py\nindex a7cc373..6e474bd 100644\n--- a/base64mime.py\n+++ b/b64mime.py\n@@ -1,6 +1,7 @@\n decoding.  To deal with the various line wrapping issues, use the email.header\n module.\n \"\"\"\n \n+# renamed\n __all__ = [\n     'body_decode',\n     'body_encode',\ndiff --git a/errors.py b/errors.py\ndeleted file mode 100644\nindex 02aa5ec..0000000\n--- a/errors.py\n+++ /dev/null\n@@ -1,9 +0,0 @@\n-# Copyright (C) 2001-2006 Python Software Foundation\n-# Author: Barry Warsaw\n-# Contact: email-sig@python.org\n-\n-\"\"\"email package exception classes.\"\"\"\n-\n-\n-class MessageError(Exception):\n-    \"\"\"Base class for errors in the email package.\"\"\"\n";

/// A git diff that renames and deletes, sent twice: the second time every
/// section is `already applied`, as the `*** Begin Patch` form is; an edit of
/// a file an edit removed is told where it went, not invited to create it.
#[test]
fn a_resent_git_diff_with_a_rename_and_a_deletion_is_already_applied() {
    let p = project();
    let root = p.path().to_str().unwrap();
    fs::write(p.path().join("errors.py"), EMAIL_ERRORS).unwrap();
    fs::write(p.path().join("base64mime.py"), EMAIL_BASE64MIME).unwrap();
    let o = editfs(&["apply", "--multi", root], GIT_RENAME_AND_DELETE, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(read(p.path(), "errors.py"), None);
    let moved = read(p.path(), "b64mime.py").unwrap();
    assert!(moved.contains("# renamed\n__all__"), "{moved}");
    let o = editfs(
        &["apply", "--multi", root, "--json"],
        GIT_RENAME_AND_DELETE,
        p.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v = json(&o);
    for f in v["files"].as_array().unwrap() {
        for op in f["operations"].as_array().unwrap() {
            assert_eq!(op["outcome"], "already_applied", "{v}");
        }
    }
    assert_eq!(read(p.path(), "b64mime.py").as_deref(), Some(&*moved));
    // An edit of either old path is told what became of it.
    let edit = "errors.py\n<<<<<<< SEARCH\nclass MessageError(Exception):\n=======\nclass MessageError(ValueError):\n>>>>>>> REPLACE\n";
    let o = editfs(&["apply", "--multi", root], edit, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(!text.contains("an empty SEARCH would create"), "{text}");
    assert!(
        text.contains("`errors.py` was removed by transaction 1"),
        "{text}"
    );
    // A deletion whose listed lines are not the file as it was still fails.
    let wrong = GIT_RENAME_AND_DELETE.replace(
        "-class MessageError(Exception):",
        "-class Other(Exception):",
    );
    let o = editfs(&["apply", "--multi", root, "--json"], &wrong, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(json(&o)["error"]["kind"], "not_found");
}

/// A file moved whole by a patch: an edit of its old path is told where it went.
#[test]
fn an_edit_of_a_file_a_patch_moved_is_told_where_it_went() {
    let p = project();
    let root = p.path().to_str().unwrap();
    let patch = "*** Begin Patch\n*** Update File: b.txt\n*** Move to: c.txt\n*** End Patch\n";
    let o = editfs(&["apply", "--multi", root], patch, p.path());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let edit = "b.txt\n<<<<<<< SEARCH\nbee\n=======\nBEE\n>>>>>>> REPLACE\n";
    let o = editfs(&["apply", "--multi", root], edit, p.path());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(!text.contains("an empty SEARCH would create"), "{text}");
    assert!(text.contains("it moved to `c.txt`"), "{text}");
}

#[test]
fn a_checkpoints_answer_gives_the_commands_for_this_project_not_a_placeholder() {
    let p = project();
    let src = p.path().to_str().unwrap();
    let o = editfs(&["checkpoint", src, "start"], "", p.path());
    assert!(o.status.success(), "{}", out(&o));
    let text = out(&o);
    assert!(
        text.contains(&format!("editfs rewind {src} --to start")),
        "{text}"
    );
    assert!(!text.contains("SOURCE"), "{text}");
    let o = editfs(&["rewind", src, "--to", "nowhere"], "", p.path());
    assert!(!out(&o).contains("SOURCE"), "{}", out(&o));
    assert!(
        out(&o).contains(&format!("editfs history {src}")),
        "{}",
        out(&o)
    );
}

#[test]
fn history_lists_transactions_by_id_whatever_order_their_lines_were_logged_in() {
    let p = project();
    for (from, to) in [("bee", "BEE"), ("BEE", "bee")] {
        let payload = format!("<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n");
        let o = editfs(&["apply", "b.txt", "-"], &payload, p.path());
        assert!(o.status.success(), "{}", out(&o));
    }
    let log = p.path().join(".editfs/log");
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // As a file made through a mount is logged after a later transaction.
    fs::write(&log, format!("{}\n{}\n", lines[1], lines[0])).unwrap();
    let shown = out(&editfs(&["history", "."], "", p.path()));
    let ids: Vec<&str> = shown
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(ids, ["1", "2"], "{shown}");
}

#[test]
fn a_rewind_is_logged_as_a_rewind_and_an_undo_as_an_undo() {
    let p = project();
    let src = p.path().to_str().unwrap();
    assert!(
        editfs(&["checkpoint", src, "start"], "", p.path())
            .status
            .success()
    );
    let payload = "<<<<<<< SEARCH\nbee\n=======\nBEE\n>>>>>>> REPLACE\n";
    assert!(
        editfs(&["apply", "b.txt", "-"], payload, p.path())
            .status
            .success()
    );
    let o = editfs(&["rewind", src, "--to", "start"], "", p.path());
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        editfs(&["undo", src, "b.txt"], "", p.path())
            .status
            .success()
    );
    let kinds: Vec<String> = log_lines(p.path())
        .iter()
        .map(|l| l["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["checkpoint", "edit", "rewind", "undo"], "{kinds:?}");
}
