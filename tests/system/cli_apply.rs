//! `editfs apply` as a user runs it: the real binary, a fresh project per test.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

const BLOCK: &str = "<<<<<<< SEARCH\nold line\n=======\nnew line\n>>>>>>> REPLACE\n";

struct Project {
    dir: TempDir,
}

impl Project {
    /// A project with `.editfs/` (so snapshots are kept) and `a.txt`.
    fn new() -> Project {
        let p = Project::bare();
        fs::create_dir(p.path(".editfs")).unwrap();
        p
    }

    /// A project without a state directory.
    fn bare() -> Project {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "first\nold line\nlast\n").unwrap();
        Project { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Runs `editfs ARGS` in the project with `stdin` as standard input.
    fn editfs(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        // The process may exit before reading everything (an oversized payload).
        let _ = input.write_all(stdin.as_bytes());
        drop(input);
        child.wait_with_output().unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn applies_from_stdin_prints_the_report_and_keeps_a_snapshot() {
    let p = Project::new();
    let out = p.editfs(&["apply", "a.txt"], BLOCK);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(p.read("a.txt"), "first\nnew line\nlast\n");
    let report = stdout(&out);
    assert!(report.starts_with("OK a.txt (tx 1, "), "{report}");
    assert!(report.contains("-old line\n+new line\n"), "{report}");
    assert_eq!(
        p.read(".editfs/snapshots/a.txt/1"),
        "first\nold line\nlast\n"
    );
    let log = p.read(".editfs/log");
    let entry: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(
        (entry["tx"].as_u64(), entry["outcome"].as_str()),
        (Some(1), Some("ok"))
    );
}

#[test]
fn payload_from_a_file_or_dash_and_options_after_positionals() {
    let p = Project::new();
    fs::write(p.path("fix.edit"), BLOCK).unwrap();
    let out = p.editfs(&["apply", "a.txt", "fix.edit", "--json"], "");
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "ok");
    let back = "<<<<<<< SEARCH\nnew line\n=======\nold line\n>>>>>>> REPLACE\n";
    let out = p.editfs(&["apply", "--json", "a.txt", "-"], back);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");
}

#[test]
fn failure_exits_1_and_leaves_the_file_byte_identical() {
    let p = Project::new();
    let before = fs::read(p.path("a.txt")).unwrap();
    let out = p.editfs(
        &["apply", "a.txt"],
        "<<<<<<< SEARCH\nold lime\n=======\nx\n>>>>>>> REPLACE\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(fs::read(p.path("a.txt")).unwrap(), before);
    let report = stdout(&out);
    assert!(report.starts_with("FAILED a.txt"), "{report}");
    assert!(report.contains("closest match: lines 2-2"), "{report}");
    assert!(!p.path(".editfs/snapshots/a.txt").exists());
}

#[test]
fn rejected_payload_and_bad_usage_exit_2() {
    let p = Project::new();
    let out = p.editfs(&["apply", "a.txt"], "no blocks here\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).starts_with("REJECTED a.txt"));
    assert_eq!(p.editfs(&["apply"], "").status.code(), Some(2));
    assert_eq!(
        p.editfs(&["apply", "a.txt", "--match", "fuzzy"], BLOCK)
            .status
            .code(),
        Some(2)
    );
    assert_eq!(p.editfs(&["frobnicate"], "").status.code(), Some(2));
}

#[test]
fn oversized_payload_is_refused_as_too_large() {
    let p = Project::new();
    let big = format!("{BLOCK}{}", "x".repeat(4096));
    let out = p.editfs(
        &["apply", "a.txt", "--max-content-size", "1K", "--json"],
        &big,
    );
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "too_large");
    let size = big.len();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{size} bytes, over the limit of 1024 bytes")),
        "{message}"
    );
}

#[test]
fn match_exact_and_ambiguous_flags() {
    let p = Project::new();
    fs::write(p.path("b.txt"), "x  \ny\ny\n").unwrap();
    let trailing = "<<<<<<< SEARCH\nx\n=======\nz\n>>>>>>> REPLACE\n";
    assert_eq!(
        p.editfs(&["apply", "b.txt", "--match", "exact"], trailing)
            .status
            .code(),
        Some(1)
    );
    let twice = "<<<<<<< SEARCH\ny\n=======\nz\n>>>>>>> REPLACE\n";
    for mode in [
        &["apply", "b.txt"][..],
        &["apply", "b.txt", "--ambiguous", "error"],
    ] {
        assert_eq!(p.editfs(mode, twice).status.code(), Some(1), "{mode:?}");
    }
    assert_eq!(p.read("b.txt"), "x  \ny\ny\n");
    assert_eq!(
        p.editfs(&["apply", "b.txt"], trailing).status.code(),
        Some(0)
    );
    assert_eq!(p.read("b.txt"), "z\ny\ny\n");
    let first = p.editfs(&["apply", "b.txt", "--ambiguous", "first"], twice);
    assert_eq!(first.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&first.stdout).contains("lines 2, 3"));
    assert_eq!(p.read("b.txt"), "z\nz\ny\n");
}

#[test]
fn state_dir_option_and_no_state_note() {
    let p = Project::bare();
    let out = p.editfs(&["apply", "a.txt"], BLOCK);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("no snapshot or log was kept"),
        "{}",
        stdout(&out)
    );
    assert!(!p.path(".editfs").exists());
    let state = tempfile::tempdir().unwrap();
    let back = "<<<<<<< SEARCH\nnew line\n=======\nold line\n>>>>>>> REPLACE\n";
    let out = p.editfs(
        &[
            "apply",
            "a.txt",
            "--state-dir",
            state.path().to_str().unwrap(),
        ],
        back,
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(state.path().join("log").exists());
    assert!(!p.path(".editfs").exists());
}

/// Runs `editfs ARGS` in `dir` with `payload` on standard input, on a thread;
/// whether it exited 0.
fn apply_in(dir: &Path, args: &[&str], payload: String) -> std::thread::JoinHandle<bool> {
    let dir = dir.to_owned();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    std::thread::spawn(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
            .args(&args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.as_bytes())
            .unwrap();
        child.wait().unwrap().success()
    })
}

#[test]
fn concurrent_applies_without_a_state_directory_lose_no_edit() {
    let p = Project::bare();
    fs::write(p.path("a.txt"), "top\nANCHOR\nbottom\n").unwrap();
    let block =
        |i: usize| format!("<<<<<<< SEARCH\nANCHOR\n=======\nANCHOR\nline {i}\n>>>>>>> REPLACE\n");
    // One file's runs, and several files' (`--multi`) on the same file, at once.
    let runs: Vec<_> = (0..16)
        .map(|i| match i % 2 {
            0 => apply_in(p.dir.path(), &["apply", "a.txt", "-"], block(i)),
            _ => apply_in(
                p.dir.path(),
                &["apply", "--multi", ".", "-"],
                format!("a.txt\n{}", block(i)),
            ),
        })
        .collect();
    for run in runs {
        assert!(run.join().unwrap(), "every apply reports success");
    }
    let text = p.read("a.txt");
    let lines = text.lines().filter(|l| l.starts_with("line ")).count();
    assert_eq!(lines, 16, "every acknowledged edit is in the file:\n{text}");
}

#[test]
fn a_name_with_a_newline_keeps_the_report_one_line_per_item() {
    let p = Project::new();
    let name = "two\nlines.txt";
    fs::write(p.path(name), "old line\n").unwrap();
    let out = p.editfs(&["apply", name, "-"], BLOCK);
    assert!(out.status.success(), "{out:?}");
    let report = stdout(&out);
    let first = report.lines().next().unwrap();
    assert!(first.starts_with("OK two\\nlines.txt (tx "), "{report}");
    assert!(report.contains("--- a/two\\nlines.txt\n"), "{report}");
    assert!(
        report.contains("pre-image kept as snapshots/two\\nlines.txt/"),
        "{report}"
    );
    assert_eq!(fs::read_to_string(p.path(name)).unwrap(), "new line\n");
}

#[test]
fn empty_search_creates_a_file() {
    let p = Project::new();
    let out = p.editfs(
        &["apply", "new.py"],
        "<<<<<<< SEARCH\n=======\nprint('hi')\n>>>>>>> REPLACE\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(p.read("new.py"), "print('hi')\n");
}

#[test]
fn a_symlink_is_followed_and_stays_a_link_and_mode_is_kept() {
    let p = Project::new();
    fs::set_permissions(p.path("a.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    symlink("a.txt", p.path("link.txt")).unwrap();
    assert_eq!(
        p.editfs(&["apply", "link.txt"], BLOCK).status.code(),
        Some(0)
    );
    assert!(
        fs::symlink_metadata(p.path("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(p.read("a.txt"), "first\nnew line\nlast\n");
    assert_eq!(
        fs::metadata(p.path("a.txt")).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn unreadable_target_is_an_io_failure() {
    let p = Project::new();
    fs::create_dir(p.path("dir")).unwrap();
    let out = p.editfs(&["apply", "dir"], BLOCK);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a directory"));
    let out = p.editfs(&["apply", "missing/dir/f.txt"], BLOCK);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not usable"));
}

#[test]
fn no_temp_files_are_left_in_the_project() {
    let p = Project::new();
    for _ in 0..3 {
        p.editfs(&["apply", "a.txt"], BLOCK);
        p.editfs(
            &["apply", "a.txt"],
            "<<<<<<< SEARCH\nnew line\n=======\nold line\n>>>>>>> REPLACE\n",
        );
    }
    let names: Vec<String> = fs::read_dir(p.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".editfs-tmp")),
        "{names:?}"
    );
    assert_eq!(fs::read_dir(p.path(".editfs/tmp")).unwrap().count(), 0);
}

#[test]
fn help_explains_the_formats_and_exit_codes() {
    let p = Project::new();
    let out = p.editfs(&["apply", "--help"], "");
    assert_eq!(out.status.code(), Some(0));
    let help = stdout(&out);
    for needle in [
        "<<<<<<< SEARCH",
        "\"search\"",
        "--state-dir",
        "--match",
        "--ambiguous",
        "--max-content-size",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
    let top = stdout(&p.editfs(&["--help"], ""));
    assert!(
        top.contains("Exit codes of apply: 0 applied, 1 failed"),
        "{top}"
    );
}

#[test]
fn rust_log_turns_on_logging() {
    let p = Project::new();
    fs::hard_link(p.path("a.txt"), p.path("twin.txt")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["apply", "a.txt", "-"])
        .current_dir(p.dir.path())
        .env("RUST_LOG", "info")
        .stdin(fs::File::open(write_payload(p.dir.path())).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("links"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(p.read("twin.txt"), "first\nnew line\nlast\n");
}

fn write_payload(dir: &Path) -> PathBuf {
    let f = dir.join("payload.edit");
    fs::write(&f, BLOCK).unwrap();
    f
}

#[test]
fn multi_file_paths_with_spaces_and_unicode_in_path_lines_and_json() {
    let p = Project::new();
    fs::create_dir_all(p.path("t/a b")).unwrap();
    fs::create_dir_all(p.path("t/données")).unwrap();
    fs::write(p.path("t/a b/c.py"), "x = 1\n").unwrap();
    fs::write(p.path("t/données/é t.md"), "# titre\n").unwrap();
    let json = r#"{"path":"a b/c.py","search":"x = 1","replace":"x = 2"}"#;
    let out = p.editfs(&["apply", "--multi", "t"], json);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("t/a b/c.py"), "x = 2\n");

    let lines = "a b/c.py\n<<<<<<< SEARCH\nx = 2\n=======\nx = 3\n>>>>>>> REPLACE\n\
                 \"données/é t.md\"\n<<<<<<< SEARCH\n# titre\n=======\n# Titre\n>>>>>>> REPLACE\n\
                 a b/nouveau fichier.txt\n<<<<<<< SEARCH\n=======\nneuf\n>>>>>>> REPLACE\n";
    let out = p.editfs(&["apply", "--multi", "t"], lines);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("t/a b/c.py"), "x = 3\n");
    assert_eq!(p.read("t/données/é t.md"), "# Titre\n");
    assert_eq!(p.read("t/a b/nouveau fichier.txt"), "neuf\n");
}

#[test]
fn multi_file_paths_under_a_subdirectory_are_kept_as_the_projects_and_undo_restores_them() {
    let p = Project::new();
    fs::create_dir_all(p.path("sub")).unwrap();
    fs::write(p.path("sub/f.py"), "a = 6\n").unwrap();
    let payload = "f.py\n<<<<<<< SEARCH\na = 6\n=======\na = 7\n>>>>>>> REPLACE\n";
    let out = p.editfs(&["apply", "--multi", "sub"], payload);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("sub/f.py"), "a = 7\n");
    assert!(!p.path("f.py").exists());

    let history = p.editfs(&["history", "."], "");
    assert!(
        stdout(&history).contains("sub/f.py"),
        "{}",
        stdout(&history)
    );
    let tx = stdout(&out)
        .split("tx ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .unwrap_or_default()
        .to_owned();
    let undo = p.editfs(&["undo", ".", "--tx", &tx], "");
    assert!(
        undo.status.success(),
        "{}{}",
        stdout(&undo),
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(p.read("sub/f.py"), "a = 6\n");
    assert!(
        !p.path("f.py").exists(),
        "undo made a file that never existed"
    );

    let escape = "../a.txt\n<<<<<<< SEARCH\nold line\n=======\nx\n>>>>>>> REPLACE\n";
    let out = p.editfs(&["apply", "--multi", "sub"], escape);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");
}

#[test]
fn multi_file_absolute_paths_inside_the_root_apply_and_outside_are_refused() {
    let p = Project::new();
    let root = fs::canonicalize(p.path("")).unwrap();
    let inside = format!("{}\n{BLOCK}", root.join("a.txt").to_string_lossy());
    let out = p.editfs(&["apply", "--multi", "."], &inside);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("a.txt"), "first\nnew line\nlast\n");

    let outside = r#"{"path": "/etc/hostname", "search": "a", "replace": "b"}"#;
    let out = p.editfs(&["apply", "--multi", "."], outside);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("outside the project"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_failed_multi_file_transaction_says_matched_files_were_not_written() {
    let p = Project::new();
    fs::write(p.path("b.txt"), "b\n").unwrap();
    let payload =
        format!("a.txt\n{BLOCK}b.txt\n<<<<<<< SEARCH\nnot there\n=======\nx\n>>>>>>> REPLACE\n");
    let out = p.editfs(&["apply", "--multi", "."], &payload);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let section = text
        .split("==== a.txt")
        .nth(1)
        .unwrap()
        .split("==== ")
        .next()
        .unwrap();
    assert!(
        !section.contains("OK") && !section.contains(" applied"),
        "{section}"
    );
    assert!(section.contains("matched (not written)"), "{section}");
    assert!(
        section.contains(
            "error (not_written): its own operations matched, but the transaction failed in b.txt"
        ),
        "{section}"
    );
    let out = p.editfs(&["apply", "--multi", ".", "--json"], &payload);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = &json["files"][0];
    assert_eq!(a["file"], "a.txt");
    assert_eq!(a["outcome"], "failed");
    assert_eq!(a["applied"], 0);
    assert_eq!(a["error"]["kind"], "not_written");
    assert_eq!(a["operations"][0]["outcome"], "matched");
    assert!(a.get("diff").is_none());
    assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");
}

/// A section naming a file that does not exist, in a directory that may not
/// exist either, fails as `not_found` and points at the files of that name the
/// agent may have meant (none that git ignores), not at making a new one.
#[test]
fn a_multi_file_path_naming_no_file_points_at_the_files_of_that_name() {
    let p = Project::new();
    for dir in ["src", "tests", "target"] {
        fs::create_dir(p.path(dir)).unwrap();
        fs::write(
            p.path(&format!("{dir}/utils.py")),
            "def a():\n    return 1\n",
        )
        .unwrap();
    }
    fs::write(p.path(".gitignore"), "target/\n").unwrap();
    let block = "<<<<<<< SEARCH\ndef a():\n    return 1\n=======\ndef a():\n    return 2\n>>>>>>> REPLACE\n";
    for named in ["utils.py", "lib/utils.py"] {
        let out = p.editfs(
            &["apply", "--multi", ".", "--json"],
            &format!("{named}\n{block}"),
        );
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let error = &json["files"][0]["error"];
        assert_eq!(error["kind"], "not_found", "{error}");
        let hint = error["hint"].as_str().unwrap();
        assert!(
            hint.contains(&format!("there is no file `{named}`"))
                && hint.contains("`src/utils.py`, `tests/utils.py`;")
                && !hint.contains("target/"),
            "{hint}"
        );
        assert_eq!(json["error"]["hint"].as_str(), Some(hint));
    }
    assert!(!p.path("lib").exists());
    let out = p.editfs(&["apply", "--multi", "."], &format!("nowhere.py\n{block}"));
    assert!(
        stdout(&out).contains("there is no file `nowhere.py`, nor any of that name in the project; an empty SEARCH would create"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn escaped_payloads_are_rejected_naming_what_they_look_like() {
    let p = Project::new();
    let escaped = BLOCK.replace('\n', "\\n");
    let html = BLOCK.replace('<', "&lt;").replace('>', "&gt;");
    for (payload, looks_like) in [
        (escaped.as_str(), "escaped as a JSON string"),
        (html.as_str(), "escaped for HTML"),
        ("@@ -2 +2 @@\n-old line\n+new line\n", "a diff"),
    ] {
        let out = p.editfs(&["apply", "a.txt"], payload);
        assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
        assert!(stdout(&out).contains(looks_like), "{}", stdout(&out));
        assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");
    }
}

#[test]
fn a_tool_call_must_name_the_file_apply_edits() {
    let p = Project::new();
    fs::create_dir(p.path("src")).unwrap();
    fs::write(p.path("src/b.txt"), "old line\n").unwrap();
    let call = |path: &str| serde_json::json!({ "file_path": path, "content": BLOCK }).to_string();
    let out = p.editfs(&["apply", "src/b.txt"], &call("src/b.txt"));
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("src/b.txt"), "new line\n");
    assert!(stdout(&out).contains("Mistral Vibe"), "{}", stdout(&out));

    let out = p.editfs(&["apply", "a.txt"], &call("src/b.txt"));
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("the call names `src/b.txt`, but it was sent to edit a.txt"),
        "{}",
        stdout(&out)
    );
    assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");
}

#[test]
fn a_diff_of_another_file_is_refused_not_applied_to_the_file_named_on_the_command_line() {
    let p = Project::new();
    fs::write(p.path("b.txt"), "first\nold line\nlast\n").unwrap();
    let diff = |name: &str| {
        format!(
            "--- a/{name}\n+++ b/{name}\n@@ -1,3 +1,3 @@\n first\n-old line\n+new line\n last\n"
        )
    };
    let out = p.editfs(&["apply", "a.txt"], &diff("b.txt"));
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("the patch names `b.txt`, but it was sent to edit a.txt"),
        "{}",
        stdout(&out)
    );
    assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");

    let out = p.editfs(&["apply", "a.txt"], &diff("a.txt"));
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("a.txt"), "first\nnew line\nlast\n");
}

#[test]
fn an_aider_udiff_with_unnumbered_hunk_headers_applies() {
    let p = Project::new();
    let udiff = "--- a.txt\n+++ a.txt\n@@ ... @@\n first\n-old line\n+new line\n";
    let out = p.editfs(&["apply", "a.txt"], udiff);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("a.txt"), "first\nnew line\nlast\n");
}

#[test]
fn sections_naming_one_file_by_two_spellings_are_one_files_operations() {
    let p = Project::new();
    fs::write(p.path("x.txt"), "a\nb\nc\n").unwrap();
    let payload = "./x.txt\n<<<<<<< SEARCH\na\n=======\nA\n>>>>>>> REPLACE\n\n\
                   x.txt\n<<<<<<< SEARCH\nc\n=======\nC\n>>>>>>> REPLACE\n";
    let out = p.editfs(&["apply", "--multi", "."], payload);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("x.txt"), "A\nb\nC\n");
    assert!(
        stdout(&out).contains("2 of 2 operation(s) applied"),
        "{}",
        stdout(&out)
    );
}

/// What is in the state directory besides the empty `.editfs/` made by `new`.
fn state_entries(p: &Project) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(p.path(".editfs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_dry_run_prints_the_report_and_diff_exits_as_the_edit_would_and_writes_nothing() {
    let p = Project::new();
    let o = p.editfs(&["apply", "--dry-run", "a.txt"], BLOCK);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = stdout(&o);
    assert!(text.contains("-old line\n+new line"), "{text}");
    assert!(text.contains("dry run: nothing was written"), "{text}");
    let missed = BLOCK.replace("old line", "no such line");
    let o = p.editfs(&["apply", "a.txt", "--dry-run", "--json"], &missed);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["error"]["kind"], "not_found", "{report}");
    let o = p.editfs(&["apply", "--dry-run", "a.txt"], "no block at all\n");
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let multi = format!("a.txt\n{BLOCK}");
    let o = p.editfs(&["apply", "--dry-run", "--multi", "."], &multi);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(stdout(&o).contains("+new line"), "{}", stdout(&o));
    assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");
    assert!(
        state_entries(&p).is_empty(),
        "no id, no log, no version: {:?}",
        state_entries(&p)
    );
    // No id was taken: the real edit is transaction 1.
    let o = p.editfs(&["apply", "a.txt", "--json"], BLOCK);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["tx"], 1, "{report}");
}

/// Aider fences a file that holds triple backticks with `<source>LANG` …
/// `</source>` (or `<code>`, `<pre>`): through the multi-file path, as through
/// `F.edit`, those lines are fences, never a path nor a file's text.
#[test]
fn aiders_tag_fences_are_fences_in_a_multi_file_payload() {
    let p = Project::new();
    fs::create_dir_all(p.path("docs")).unwrap();
    fs::write(p.path("gen.py"), "FENCE = \"```\"\nlang = \"py\"\n").unwrap();
    fs::write(p.path("docs/use.md"), "Run:\n\n```sh\nmake\n```\n").unwrap();
    let payload = "Here are the changes.\n\n\
        gen.py\n<source>python\n<<<<<<< SEARCH\nlang = \"py\"\n=======\nlang = \"python\"\n>>>>>>> REPLACE\n</source>\n\n\
        docs/use.md\n<code>markdown\n<<<<<<< SEARCH\nmake\n=======\nmake all\n>>>>>>> REPLACE\n</code>\n\n\
        new.py\n<source>python\n<<<<<<< SEARCH\n=======\nX = \"```\"\n>>>>>>> REPLACE\n</source>\n";
    let out = p.editfs(&["apply", "--multi", "."], payload);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(p.read("gen.py"), "FENCE = \"```\"\nlang = \"python\"\n");
    assert_eq!(p.read("docs/use.md"), "Run:\n\n```sh\nmake all\n```\n");
    assert_eq!(p.read("new.py"), "X = \"```\"\n");
    assert!(!p.path("<source>python").exists());
}

/// Every file of the project below `dir`, with its bytes (the state
/// directory, which logs each transaction, aside).
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.ends_with(".editfs") {
            continue;
        }
        match path.is_dir() {
            true => out.extend(tree(&path)),
            false => out.push((path.clone(), fs::read(&path).unwrap())),
        }
    }
    out.sort();
    out
}

/// A `*** Begin Patch` sent twice: the second time every hunk already reads
/// as its result (an addition, a deletion between context, two hunks of one
/// file, a hunk at the end of the file) and each `*** Add File:` reads
/// exactly as sent, so it succeeds as already applied and writes nothing.
#[test]
fn a_patch_sent_twice_is_already_applied_the_second_time() {
    let p = Project::new();
    fs::create_dir(p.path("src")).unwrap();
    fs::write(
        p.path("src/a.py"),
        "import os\n\ndef run():\n    start()\n    old_step()\n    stop()\n    return 1\n\ndef tail():\n    pass\n",
    )
    .unwrap();
    fs::write(p.path("src/b.py"), "x = 1\ny = 2\n").unwrap();
    let patch = "*** Begin Patch\n\
        *** Add File: src/new.py\n+def helper():\n+    return 2\n\
        *** Update File: src/a.py\n@@ def run():\n     start()\n-    old_step()\n     stop()\n\
        @@ def run():\n-    return 1\n+    return helper()\n\
        @@\n     pass\n+\n+# end\n*** End of File\n\
        *** Update File: src/b.py\n@@\n x = 1\n+z = 0\n y = 2\n\
        *** End Patch\n";
    let first = p.editfs(&["apply", "--multi", "."], patch);
    assert!(first.status.success(), "{}", stdout(&first));
    assert_eq!(
        p.read("src/a.py"),
        "import os\n\ndef run():\n    start()\n    stop()\n    return helper()\n\ndef tail():\n    pass\n\n# end\n"
    );
    let before = tree(p.dir.path());
    let again = p.editfs(&["apply", "--multi", ".", "--json"], patch);
    assert!(again.status.success(), "{}", stdout(&again));
    let report = stdout(&again);
    assert_eq!(report.matches("\"already_applied\"").count(), 5, "{report}");
    assert!(!report.contains("\"outcome\": \"applied\""), "{report}");
    assert_eq!(tree(p.dir.path()), before, "{report}");
}

/// `editfs apply` makes files and directories as its user's `>` and `mkdir -p`
/// would: under umask 077 nothing it makes is open to other users.
#[test]
fn apply_makes_files_and_directories_under_its_own_umask() {
    let p = Project::new();
    let patch = "*** Begin Patch\n*** Add File: d/sub/key.env\n+KEY=1\n*** End Patch\n";
    let mut child = Command::new("bash")
        .args(["-c", r#"umask 077; exec "$0" apply --multi ."#])
        .arg(env!("CARGO_BIN_EXE_editfs"))
        .current_dir(p.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(patch.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stdout(&out));
    let mode = |rel: &str| fs::metadata(p.path(rel)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(
        [mode("d"), mode("d/sub"), mode("d/sub/key.env")],
        [0o700, 0o700, 0o600]
    );
}

/// The classic `/tmp` attack on root's `editfs apply`: another user's symlink in
/// a sticky world-writable directory, to root's file. With
/// `fs.protected_symlinks` (most systems set it), root's own `>` through the
/// link fails; so does `editfs apply` of the link, and root's file stays.
#[test]
fn apply_follows_no_link_the_kernel_refuses_to_follow() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("this test needs root, to make a link of another user's; skipping");
        return;
    }
    let p = Project::new();
    fs::set_permissions(p.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = p.path("tmp");
    fs::create_dir(&tmp).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).unwrap();
    symlink("../a.txt", tmp.join("notes.txt")).unwrap();
    std::os::unix::fs::lchown(tmp.join("notes.txt"), Some(65534), Some(65534)).unwrap();
    let _on = crate::common::Sysctl::set("protected_symlinks", "1");
    let native = fs::OpenOptions::new()
        .append(true)
        .open(tmp.join("notes.txt"));
    assert!(native.is_err(), "the kernel refuses the link natively");
    let out = p.editfs(&["apply", "tmp/notes.txt"], BLOCK);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(p.read("a.txt"), "first\nold line\nlast\n");
}
