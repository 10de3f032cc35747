//! `editfs mount` as an agent and its tools use it: real shell commands on a real mount.

use crate::common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::Mount;

const APP: &str = "def greet(name):\n    print(\"Hello, \" + name)\n\n\ndef farewell(name):\n    print(\"Goodbye, \" + name)\n";

fn project(src: &Path) {
    fs::write(src.join("app.py"), APP).unwrap();
    fs::create_dir(src.join("lib")).unwrap();
    fs::write(src.join("lib/util.txt"), "one\ntwo\nthree\n").unwrap();
}

macro_rules! mount {
    ($($arg:expr),*) => {
        match Mount::start(&[$($arg),*], project) {
            Some(m) => m,
            None => return,
        }
    };
}

#[test]
fn an_edit_through_cat_heredoc_applies_and_reports() {
    let m = mount!();
    m.ok(r#"cat > app.py.edit <<'EOF'
<<<<<<< SEARCH
    print("Hello, " + name)
=======
    print(f"Hello, {name}!")
>>>>>>> REPLACE
EOF"#);
    let status = m.ok("cat app.py.status");
    assert!(status.starts_with("OK app.py (tx 1, "), "{status}");
    assert!(
        status.contains("+    print(f\"Hello, {name}!\")"),
        "{status}"
    );
    assert!(m.ok("cat app.py").contains("f\"Hello, {name}!\""));
    assert!(String::from_utf8_lossy(&m.src_file("app.py")).contains("{name}!"));
    let json: serde_json::Value = serde_json::from_str(&m.ok("cat app.py.status.json")).unwrap();
    assert_eq!(json["outcome"], "ok");
    assert_eq!(json["file"], "app.py");
    assert_eq!(json["operations"][0]["lines"], serde_json::json!([2, 2]));
}

#[test]
fn a_failed_transaction_fails_close_and_leaves_the_file_byte_identical() {
    let m = mount!();
    let out = m.sh("printf '<<<<<<< SEARCH\\n    print(\"Hello, \" + nam)\\n=======\\nx\\n>>>>>>> REPLACE\\n' | cat > app.py.edit");
    assert_eq!(
        out.status.code(),
        Some(1),
        "cat must fail when the transaction does"
    );
    assert_eq!(m.src_file("app.py"), APP.as_bytes());
    let status = m.ok("cat app.py.status");
    assert!(status.starts_with("FAILED app.py"), "{status}");
    assert!(status.contains("closest match: lines 2-2"), "{status}");
    let py = m.sh("python3 -c \"
f = open('app.py.edit', 'w'); f.write('not a payload')
try:
    f.close()
except OSError as e:
    print(e.errno)
\"");
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "22",
        "EINVAL for a rejected payload"
    );
    assert_eq!(m.sh("echo junk | tee app.py.edit").status.code(), Some(1));
    assert_eq!(m.src_file("app.py"), APP.as_bytes());
}

#[test]
fn a_path_line_for_another_file_and_a_doubled_divider_reject_with_einval() {
    let m = mount!();
    let scratch = std::env::temp_dir().join(format!("editfs-payload-{}", std::process::id()));
    let close_errno = |payload: &str| {
        fs::write(&scratch, payload).unwrap();
        let py = m.sh(&format!(
            "python3 -c \"
f = open('app.py.edit', 'w'); f.write(open('{}').read())
try:
    f.close(); print(0)
except OSError as e:
    print(e.errno)
\"",
            scratch.display()
        ));
        String::from_utf8_lossy(&py.stdout).trim().to_owned()
    };
    let block = "<<<<<<< SEARCH\n    print(\"Hello, \" + name)\n=======\n    print(name)\n>>>>>>> REPLACE\n";
    // Aider's path line names lib/util.txt: the block was not meant for app.py.
    assert_eq!(
        close_errno(&format!("lib/util.txt\n```\n{block}```\n")),
        "22"
    );
    let status = m.ok("cat app.py.status");
    assert!(status.contains("wrong_file"), "{status}");
    // A doubled divider in a file without such lines is a malformed block.
    let doubled = block.replace("=======\n", "=======\n=======\n");
    assert_eq!(close_errno(&doubled), "22");
    assert_eq!(m.src_file("app.py"), APP.as_bytes());
    // The path line naming app.py itself is fine.
    assert_eq!(close_errno(&format!("app.py\n```\n{block}```\n")), "0");
    assert!(m.ok("cat app.py").contains("    print(name)\n"));
    fs::remove_file(&scratch).unwrap();
}

/// Node's `readFileSync` reads `st_size` bytes and no more: a report whose size
/// the kernel kept from before a commit would reach such an agent cut short.
#[test]
fn a_reader_that_trusts_st_size_reads_every_report_whole() {
    let m = mount!();
    let script = r#"python3 - <<'PY'
import json, os
def by_size(name):
    fd = os.open(name, os.O_RDONLY)
    try:
        return os.read(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
for i in range(6):
    old, new = ("one", "uno") if i % 2 == 0 else ("uno", "one")
    # A report that grows and shrinks: a failed edit's report is longer.
    search = old if i % 3 else "no such line " * (i + 1)
    try:
        with open("lib/util.txt.edit", "w") as f:
            f.write(json.dumps({"search": search, "replace": new}))
    except OSError:
        pass
    for name in ("lib/util.txt.status", "lib/util.txt.status.json"):
        sized = by_size(name)
        whole = open(name, "rb").read()
        assert sized == whole, (i, name, len(sized), len(whole))
print("whole")
PY"#;
    assert_eq!(m.ok(script).trim(), "whole");
}

/// The contract's `F.status` is the most recent transaction on F by anyone:
/// `editfs apply` run on SOURCE beside the mount is one.
#[test]
fn f_status_shows_the_latest_transaction_whether_made_through_the_mount_or_by_editfs_apply() {
    let m = mount!();
    let apply = |search: &str, replace: &str| {
        let payload = format!(r#"{{"search": "{search}", "replace": "{replace}"}}"#);
        let payload_file = m.src.join("payload.json");
        fs::write(&payload_file, payload).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
            .arg("apply")
            .arg(m.src.join("lib/util.txt"))
            .arg(&payload_file)
            .output()
            .unwrap();
        fs::remove_file(payload_file).unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let printed = apply("one", "uno");
    let status = m.ok("cat lib/util.txt.status");
    assert_eq!(status, printed, "the report editfs apply printed");
    let json: serde_json::Value =
        serde_json::from_str(&m.ok("cat lib/util.txt.status.json")).unwrap();
    assert_eq!(json["outcome"], "ok");
    assert_eq!(json["file"], "lib/util.txt");
    m.ok(r#"printf '{"search": "two", "replace": "dos"}' > lib/util.txt.edit"#);
    let mine = m.ok("cat lib/util.txt.status");
    assert!(mine.contains("+dos"), "the mount's own, newer: {mine}");
    let printed = apply("three", "tres");
    assert_eq!(m.ok("cat lib/util.txt.status"), printed);
    assert_eq!(m.ok("cat lib/util.txt"), "uno\ndos\ntres\n");
}

/// A new version of F that `editfs apply` installed while an edit handle was
/// open is still F: the handle's transaction applies to it, as after one of
/// the mount's own.
#[test]
fn an_edit_handle_open_across_an_editfs_apply_on_source_still_edits_its_file() {
    let m = mount!();
    let editfs = env!("CARGO_BIN_EXE_editfs");
    let util = m.src.join("lib/util.txt");
    let script = format!(
        r#"exec 3<>lib/util.txt.edit
printf '{{"search": "one", "replace": "uno"}}' | {editfs} apply {util} - >/dev/null
printf '{{"search": "two", "replace": "dos"}}' >&3
head -1 <&3
exec 3>&-
cat lib/util.txt"#,
        util = util.display()
    );
    let out = m.ok(&script);
    assert!(out.starts_with("OK lib/util.txt"), "{out}");
    assert!(out.ends_with("uno\ndos\nthree\n"), "{out}");
    // Another file moved over the name is not it: the edit is stale, and the
    // report gives the hash of the file there now, for an `if_match`.
    let stale = m.ok(r#"exec 3<>lib/util.txt.edit
printf 'other\n' > other.txt; mv other.txt lib/util.txt
printf '{"search": "other", "replace": "x"}' >&3
head -1 <&3
exec 3>&-"#);
    assert!(stale.starts_with("FAILED"), "{stale}");
    let json: serde_json::Value =
        serde_json::from_str(&m.ok("cat lib/util.txt.status.json")).unwrap();
    assert_eq!(json["error"]["kind"], "stale", "{json}");
    let now = editfs_engine::sha256_hex(b"other\n");
    assert_eq!(json["sha256"], now.as_str());
}

/// A report `editfs apply` left before the mount started may be older than a
/// transaction an earlier mount made: the mount does not show it as the latest.
#[test]
fn a_report_editfs_apply_left_before_the_mount_started_is_not_shown_as_the_latest() {
    let before = |src: &Path| {
        project(src);
        let payload = src.join("payload.json");
        fs::write(&payload, r#"{"search": "one", "replace": "uno"}"#).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
            .arg("apply")
            .arg("--state-dir")
            .arg(src.join(".editfs"))
            .arg(src.join("lib/util.txt"))
            .arg(&payload)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        fs::remove_file(payload).unwrap();
    };
    let Some(m) = Mount::start(&[], before) else {
        return;
    };
    assert_eq!(m.ok("cat lib/util.txt"), "uno\ntwo\nthree\n");
    let status = m.ok("cat lib/util.txt.status");
    assert!(status.starts_with("NO REPORT YET"), "{status}");
}

#[test]
fn printf_tee_and_python_write_transactions() {
    let m = mount!();
    m.ok(r#"printf '{"search": "one", "replace": "uno"}' > lib/util.txt.edit"#);
    m.ok(r#"printf '{"search": "two", "replace": "dos"}' | tee lib/util.txt.edit > /dev/null"#);
    m.ok(r#"python3 -c "open('lib/util.txt.edit', 'w').write('{\"search\": \"three\", \"replace\": \"tres\"}')""#);
    assert_eq!(m.ok("cat lib/util.txt"), "uno\ndos\ntres\n");
}

#[test]
fn control_files_are_hidden_unless_asked_for() {
    let m = mount!();
    let ls = m.ok("ls -a; find . -name '*.edit' -o -name '*.status*'");
    let control = |l: &&str| l.ends_with(".edit") || l.contains(".status");
    assert!(!ls.lines().any(|l| control(&l)), "{ls}");
    // Nor is the state directory listed (reached by name only).
    assert!(!ls.lines().any(|l| l == ".editfs"), "{ls}");
    drop(m);
    let m = mount!("--show-control-files");
    let ls = m.ok("ls");
    assert!(
        ls.contains("app.py.edit") && ls.contains("app.py.status.json"),
        "{ls}"
    );
}

#[test]
fn a_real_file_wins_over_a_virtual_name_and_new_files_are_created() {
    let m = mount!();
    fs::write(m.src.join("notes.edit"), "just notes\n").unwrap();
    assert_eq!(m.ok("cat notes.edit"), "just notes\n");
    m.ok("echo more >> notes.edit");
    assert_eq!(m.src_file("notes.edit"), b"just notes\nmore\n");
    m.ok("printf '<<<<<<< SEARCH\\n=======\\nprint(1)\\n>>>>>>> REPLACE\\n' > new.py.edit");
    assert_eq!(m.ok("cat new.py"), "print(1)\n");
    assert!(m.ok("cat new.py.status").contains("(create)"));
    assert!(m.sh("cat > nodir/x.py.edit < /dev/null").status.code() != Some(0));
}

#[test]
fn each_agent_reads_its_own_report() {
    let m = mount!();
    let script = r#"
agent() {
  exec 3<>lib/util.txt.edit
  printf '{"search": "%s", "replace": "%s"}' "$1" "$2" >&3
  cat <&3 > "/tmp/$$-$1"
  exec 3>&-
}
agent one 1 & agent three 3 & wait
cat "/tmp/$$-one"; echo ====; cat "/tmp/$$-three"; rm -f /tmp/$$-*"#;
    let out = m.ok(script);
    let (a, b) = out.split_once("====").unwrap();
    assert!(a.contains("-one") && !a.contains("-three"), "{a}");
    assert!(b.contains("-three") && !b.contains("-one"), "{b}");
    assert_eq!(m.ok("cat lib/util.txt"), "1\ntwo\n3\n");
}

#[test]
fn a_cached_read_sees_the_new_bytes_right_after_an_edit() {
    let m = mount!();
    assert_eq!(m.ok("cat lib/util.txt"), "one\ntwo\nthree\n");
    m.ok(r#"printf '{"search": "two", "replace": "TWO"}' > lib/util.txt.edit"#);
    assert_eq!(m.ok("cat lib/util.txt"), "one\nTWO\nthree\n");
    assert_eq!(m.ok("stat -c %s lib/util.txt"), "14\n");
}

#[test]
fn sigterm_and_sigint_unmount_and_exit_zero() {
    for signal in [rustix::process::Signal::TERM, rustix::process::Signal::INT] {
        let m = mount!();
        let mnt = m.mnt.clone();
        let status = m.stop(signal);
        assert!(status.success(), "{signal:?}: {status}");
        let table = fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !table.contains(&*mnt.to_string_lossy()),
            "{signal:?}: still mounted"
        );
    }
}

#[test]
fn the_state_directory_is_read_only_and_explains_itself() {
    let m = mount!();
    m.ok(r#"printf '{"search": "one", "replace": "1"}' > lib/util.txt.edit"#);
    assert!(m.ok("cat .editfs/README").contains("SEARCH"));
    assert_eq!(
        m.ok("cat .editfs/snapshots/lib/util.txt/1"),
        "one\ntwo\nthree\n"
    );
    assert!(m.ok("cat .editfs/log").contains("\"tx\":1"));
    assert!(!m.sh("touch .editfs/x").status.success());
    assert!(!m.sh("echo x >> .editfs/log").status.success());
    assert!(!m.sh("rm .editfs/README").status.success());
    assert!(m.src.join(".editfs/.gitignore").exists());
}

#[test]
fn state_dir_elsewhere_leaves_source_untouched() {
    let state = tempfile::tempdir().unwrap();
    let arg = format!("--state-dir={}", state.path().display());
    let m = mount!(&arg);
    m.ok(r#"printf '{"search": "one", "replace": "1"}' > lib/util.txt.edit"#);
    assert!(!m.src.join(".editfs").exists());
    assert!(state.path().join("snapshots/lib/util.txt/1").exists());
}

#[test]
fn edits_only_refuses_direct_writes_but_not_transactions() {
    let m = mount!("--edits-only");
    let out = m.sh("echo more >> app.py");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Read-only file system"),
        "{out:?}"
    );
    assert!(!m.sh("truncate -s 0 app.py").status.success());
    m.ok(r#"printf '{"search": "Goodbye", "replace": "Bye"}' > app.py.edit"#);
    assert!(m.ok("cat app.py").contains("Bye, "));
    m.ok("echo fresh > fresh.txt");
}

#[test]
fn source_changes_show_within_a_second() {
    let m = mount!();
    assert_eq!(m.ok("cat lib/util.txt"), "one\ntwo\nthree\n");
    // A missing name is remembered as missing for at most a TTL.
    assert!(!m.sh("cat added.txt").status.success());
    fs::write(m.src.join("lib/util.txt"), "changed\n").unwrap();
    fs::write(m.src.join("added.txt"), "new\n").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(m.ok("cat lib/util.txt"), "changed\n");
    assert_eq!(m.ok("cat added.txt"), "new\n");
    assert!(m.ok("ls").contains("added.txt"));
}

#[test]
fn shell_tools_work_inside_the_mount() {
    let m = mount!();
    m.ok("mkdir -p a/b && echo x > a/b/f && mv a/b/f a/g && ln -s g a/link && cat a/link && rm a/g a/link && rmdir a/b a");
    m.ok("ln lib/util.txt hard && [ $(stat -c %h hard) = 2 ] && rm hard");
    m.ok("chmod 600 app.py && [ $(stat -c %a app.py) = 600 ] && touch -d 2001-01-01 app.py && [ $(stat -c %Y app.py) -lt 1000000000 ]");
    let xattr = "import os; os.setxattr('app.py', 'user.k', b'v'); print(os.getxattr('app.py', 'user.k').decode(), 'user.k' in os.listxattr('app.py')); os.removexattr('app.py', 'user.k'); print(os.listxattr('app.py'))";
    assert_eq!(m.ok(&format!("python3 -c \"{xattr}\"")), "v True\n[]\n");
    m.ok("exec 4<lib/util.txt; mv lib/util.txt moved.txt; cat <&4 | grep -q two; rm moved.txt; exec 4<&-");
    m.ok("echo data > open.txt; exec 5<open.txt; rm open.txt; cat <&5 | grep -q data; exec 5<&-");
    m.ok("df . > /dev/null && sync");
    m.ok("fallocate -l 8192 big && [ $(stat -c %s big) = 8192 ] && rm big");
    m.ok("touch owned && chown 1:1 owned && [ \"$(stat -c %u:%g owned)\" = 1:1 ] && rm owned");
    let fsync = "import os; f = os.open('synced', os.O_WRONLY | os.O_CREAT, 0o644); os.write(f, b'x'); os.fsync(f); os.fdatasync(f); os.close(f)";
    m.ok(&format!(
        "python3 -c \"{fsync}\" && cat synced && rm synced"
    ));
    let err = m.sh("mv app.py app.py.status.json.edit 2>&1; rm lib/util.txt.status 2>&1");
    assert!(!err.status.success());
}

#[test]
fn git_and_a_build_work_inside_the_mount() {
    let m = mount!();
    m.ok("git init -q . && git add -A && git -c user.name=t -c user.email=t@e commit -qm init");
    assert_eq!(
        m.ok("git status --porcelain"),
        "",
        "control files and .editfs must not show"
    );
    m.ok(r#"printf '{"search": "Goodbye", "replace": "Bye"}' > app.py.edit"#);
    assert_eq!(m.ok("git status --porcelain"), " M app.py\n");
    fs::write(
        m.src.join("hello.c"),
        "#include <stdio.h>\nint main(void){puts(\"hi\");return 0;}\n",
    )
    .unwrap();
    fs::write(
        m.src.join("Makefile"),
        "hello: hello.c\n\tcc -o hello hello.c\n",
    )
    .unwrap();
    assert_eq!(m.ok("make -s && ./hello"), "hi\n");
}

#[test]
fn concurrent_transactions_readers_and_creators_neither_lose_edits_nor_deadlock() {
    let m = mount!();
    // Creating files takes the directory's lock while the kernel asks the daemon for a
    // lookup; commits must never wait on that with every worker thread.
    let script = r#"
printf 'zz\n' > many.txt
for i in $(seq 1 40); do
  ( printf '{"search": "zz\\n", "replace": "zz\\nline %s\\n"}' "$i" > many.txt.edit ) &
  ( cat many.txt > /dev/null; : > "new-$i.txt" ) &
done
wait
grep -c '^line ' many.txt; ls new-*.txt | wc -l"#;
    assert_eq!(
        m.ok(script).split_whitespace().collect::<Vec<_>>(),
        ["40", "40"]
    );
}

#[test]
fn a_multi_file_transaction_through_the_state_directory() {
    let m = mount!();
    m.ok(r#"cat > .editfs/edit <<'EOF'
app.py
<<<<<<< SEARCH
    print("Goodbye, " + name)
=======
    print("Bye, " + name)
>>>>>>> REPLACE

lib/util.txt
<<<<<<< SEARCH
two
=======
2
>>>>>>> REPLACE
EOF"#);
    let status = m.ok("cat .editfs/status");
    assert!(status.starts_with("OK 2 file(s) (tx 1"), "{status}");
    assert!(m.ok("cat app.py").contains("Bye, "));
    assert_eq!(m.ok("cat lib/util.txt"), "one\n2\nthree\n");
    assert!(
        m.ok("cat lib/util.txt.status")
            .starts_with("OK lib/util.txt (tx 1")
    );
    let failed = m.sh("printf 'app.py\\n<<<<<<< SEARCH\\nnot there\\n=======\\nx\\n>>>>>>> REPLACE\\nlib/util.txt\\n<<<<<<< SEARCH\\none\\n=======\\n1\\n>>>>>>> REPLACE\\n' | cat > .editfs/edit");
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(
        m.ok("cat lib/util.txt"),
        "one\n2\nthree\n",
        "all or nothing"
    );
    assert!(
        m.ok("cat .editfs/status.json")
            .contains("\"outcome\": \"failed\"")
    );
    // Each file's status shows that latest transaction on it, failed too.
    for f in ["app.py", "lib/util.txt"] {
        let status = m.ok(&format!("cat {f}.status"));
        assert!(status.starts_with(&format!("FAILED {f} (tx 2")), "{status}");
    }
}

#[test]
fn a_shell_edit_gets_a_pre_image_and_can_be_undone_from_inside() {
    let m = mount!("--no-snapshot", "*.o");
    m.ok("sed -i s/two/TWO/ lib/util.txt");
    assert_eq!(m.ok("cat lib/util.txt"), "one\nTWO\nthree\n");
    assert_eq!(
        m.ok("cat .editfs/snapshots/lib/util.txt/*"),
        "one\ntwo\nthree\n"
    );
    let history = m.ok("cat .editfs/history");
    assert!(
        history.contains("direct") && history.contains("lib/util.txt"),
        "{history}"
    );
    m.ok("echo lib/util.txt > .editfs/undo");
    assert!(m.ok("cat .editfs/status").starts_with("OK lib/util.txt"));
    assert_eq!(m.ok("cat lib/util.txt"), "one\ntwo\nthree\n");
    // The undo is a transaction too: undone again, the shell edit is back.
    m.ok("echo lib/util.txt > .editfs/undo");
    assert_eq!(m.ok("cat lib/util.txt"), "one\nTWO\nthree\n");
    m.ok("echo obj > x.o && echo more >> x.o");
    assert!(!m.ok("ls .editfs/snapshots").contains("x.o"));
    let bad = m.sh("echo 'a b c d' | cat > .editfs/undo");
    assert_eq!(
        bad.status.code(),
        Some(1),
        "a malformed undo fails its close"
    );
    assert!(m.ok("cat .editfs/status").starts_with("REJECTED"));
}

#[test]
fn listings_stay_complete_when_entries_are_cached() {
    let m = mount!();
    let native: Vec<String> = {
        let mut v: Vec<String> = fs::read_dir(m.src.join("lib"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    // The second and third listings find every entry already known to the kernel.
    let out =
        m.ok("ls lib; stat lib/util.txt > /dev/null; ls lib; ls -la lib | tail -n +2 | wc -l");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..native.len()], native[..]);
    assert_eq!(lines[native.len()..2 * native.len()], native[..]);
    assert_eq!(
        lines.last().copied(),
        Some(&*(native.len() + 2).to_string())
    );
}

#[test]
fn listings_show_sizes_changed_through_the_mount_at_once() {
    let m = mount!();
    let out = m.ok("ls -l lib > /dev/null; echo more >> lib/util.txt; ls -l lib | awk '{print $5}'; : > lib/util.txt; ls -l lib | awk '{print $5}'");
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["19", "0"]);
}

#[test]
fn suffixes_and_matching_options_reach_the_mount() {
    let m = mount!(
        "--edit-suffix",
        ".change",
        "--status-suffix",
        ".result",
        "--ambiguous",
        "first",
        "--match",
        "exact"
    );
    m.ok(r#"printf '{"search": "one", "replace": "1"}' | cat > lib/util.txt.change"#);
    assert!(
        m.ok("cat lib/util.txt.result")
            .starts_with("OK lib/util.txt")
    );
    assert!(
        m.ok("cat lib/util.txt.result.json")
            .contains("\"outcome\": \"ok\"")
    );
    assert!(
        m.sh("cat lib/util.txt.edit").status.code() != Some(0),
        "the default suffix is gone"
    );
    fs::write(m.src.join("twice.txt"), "x\nx\ntrailing   \n").unwrap();
    m.ok(r#"printf '{"search": "x", "replace": "y"}' | cat > twice.txt.change"#);
    assert!(
        m.ok("cat twice.txt.result")
            .contains("SEARCH occurs 2 times (lines 1, 2); the first was replaced")
    );
    let exact = m.sh("printf '<<<<<<< SEARCH\\ntrailing\\n=======\\nt\\n>>>>>>> REPLACE\\n' | cat > twice.txt.change");
    assert_eq!(
        exact.status.code(),
        Some(1),
        "--match exact refuses the trailing-space match"
    );
    assert_eq!(m.src_file("twice.txt"), b"y\nx\ntrailing   \n");
}

#[test]
fn an_edit_through_a_symlink_edits_its_target_inside_source_and_nothing_else() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.md");
    fs::write(&secret, "keep\n").unwrap();
    let secret_link = secret.clone();
    let Some(m) = Mount::start(&[], move |src| {
        fs::write(src.join("target.md"), "a\nb\n").unwrap();
        fs::create_dir(src.join("sub")).unwrap();
        fs::create_dir(src.join("dir")).unwrap();
        std::os::unix::fs::symlink("target.md", src.join("link.md")).unwrap();
        std::os::unix::fs::symlink("../target.md", src.join("sub/up.md")).unwrap();
        std::os::unix::fs::symlink(&secret_link, src.join("out.md")).unwrap();
        std::os::unix::fs::symlink(".editfs/log", src.join("state.md")).unwrap();
    }) else {
        return;
    };
    m.ok("printf '<<<<<<< SEARCH\\na\\n=======\\nA\\n>>>>>>> REPLACE\\n' > link.md.edit");
    m.ok("printf '<<<<<<< SEARCH\\nb\\n=======\\nB\\n>>>>>>> REPLACE\\n' > sub/up.md.edit");
    assert_eq!(m.src_file("target.md"), b"A\nB\n");
    assert!(
        fs::symlink_metadata(m.src.join("link.md"))
            .unwrap()
            .is_symlink()
    );
    let status = m.ok("cat link.md.status");
    assert!(status.starts_with("OK target.md"), "{status}");
    assert!(m.ok("cat target.md.status").starts_with("OK target.md"));
    assert_eq!(
        m.ok("cat link.md"),
        "A\nB\n",
        "no stale page behind the link"
    );

    let dir =
        m.sh("printf '<<<<<<< SEARCH\\na\\n=======\\nA\\n>>>>>>> REPLACE\\n' | cat > dir.edit");
    assert!(!dir.status.success());
    assert!(
        String::from_utf8_lossy(&dir.stderr).contains("Is a directory"),
        "{dir:?}"
    );
    assert!(m.ok("cat dir.status").contains("is a directory"));
    let out = m.sh(
        "printf '<<<<<<< SEARCH\\nkeep\\n=======\\nlost\\n>>>>>>> REPLACE\\n' | cat > out.md.edit",
    );
    assert!(!out.status.success());
    let status = m.ok("cat out.md.status");
    assert!(status.contains("outside the project"), "{status}");
    assert_eq!(fs::read(&secret).unwrap(), b"keep\n");
    let log = fs::read(m.src.join(".editfs/log")).unwrap();
    let state = m
        .sh(r#"printf '{"search": "tx", "replace": "forged", "all": true}' | cat > state.md.edit"#);
    assert!(
        !state.status.success(),
        "editfs's own log is no project file"
    );
    assert!(
        fs::read(m.src.join(".editfs/log"))
            .unwrap()
            .starts_with(&log)
    );
    assert!(
        !String::from_utf8_lossy(&fs::read(m.src.join(".editfs/log")).unwrap())
            .contains("forged\n")
    );
    for stray in [
        "link.md.edit",
        "sub/up.md.edit",
        "dir.edit",
        "out.md.edit",
        "state.md.edit",
    ] {
        assert!(
            fs::symlink_metadata(m.src.join(stray)).is_err(),
            "a stray real {stray} was made in SOURCE"
        );
    }
}

#[test]
fn an_empty_payload_is_rejected_and_replaces_an_old_ok_report() {
    let m = mount!();
    m.ok(r#"printf '{"search": "one", "replace": "1"}' > lib/util.txt.edit"#);
    assert!(m.ok("cat lib/util.txt.status").starts_with("OK"));
    let py = m.sh("python3 -c \"
f = open('lib/util.txt.edit', 'w'); f.write('')
try:
    f.close()
except OSError as e:
    print(e.errno)
\"");
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), "22", "{py:?}");
    let status = m.ok("cat lib/util.txt.status");
    assert!(status.starts_with("REJECTED lib/util.txt"), "{status}");
    assert!(status.contains("no edit operation"), "{status}");

    m.ok(r#"printf '{"search": "two", "replace": "2"}' > lib/util.txt.edit"#);
    let cat = m.sh("cat /dev/null > lib/util.txt.edit");
    assert!(!cat.status.success(), "cat's close must fail: {cat:?}");
    assert!(m.ok("cat lib/util.txt.status").starts_with("REJECTED"));

    m.ok(r#"printf '{"search": "three", "replace": "3"}' > lib/util.txt.edit"#);
    m.sh(": > lib/util.txt.edit");
    assert!(
        m.ok("cat lib/util.txt.status").starts_with("REJECTED"),
        "an empty `: >` leaves no old OK report"
    );
    assert_eq!(m.ok("cat lib/util.txt"), "1\n2\n3\n");
}

#[test]
fn touching_or_probing_an_edit_file_is_no_transaction() {
    let m = mount!();
    m.ok(r#"printf '{"search": "one", "replace": "1"}' > lib/util.txt.edit"#);
    m.ok("touch lib/util.txt.edit && python3 -c \"import os; os.close(os.open('lib/util.txt.edit', os.O_WRONLY))\"");
    assert!(
        m.ok("cat lib/util.txt.status")
            .starts_with("OK lib/util.txt (tx 1")
    );
}

#[test]
fn edits_only_refuses_removing_or_replacing_existing_files() {
    let m = mount!("--edits-only");
    m.ok("echo tmp > tmp.py");
    for script in [
        "rm app.py",
        "mv tmp.py app.py",
        "sed -i s/Hello/Hi/ app.py",
        "ln -f tmp.py app.py",
        "mv app.py gone.py",
    ] {
        let out = m.sh(script);
        assert!(!out.status.success(), "{script} succeeded");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Read-only file system"),
            "{script}: {out:?}"
        );
    }
    assert_eq!(m.src_file("app.py"), APP.as_bytes());
    // New files and names may still be made.
    m.ok("mkdir d && echo new > d/n.txt && ln d/n.txt d/l.txt && cat d/l.txt");
}

#[test]
fn the_agent_readme_says_what_an_agent_must_know() {
    let m = mount!();
    let readme = m.ok("cat .editfs/README");
    for needed in [
        "warning",
        "ambiguous",
        ":start_line:",
        "expected_replacements",
        "\"all\"",
        "100 KiB",
        "directory must exist",
        ".editfs/undo",
        ".editfs/history",
        "--tx",
        "REJECTED",
    ] {
        assert!(
            readme.contains(needed),
            "README lacks {needed:?}:\n{readme}"
        );
    }
    assert!(
        !readme.contains("editfs undo") && !readme.contains("editfs history"),
        "in-mount paths only, not a command a sandboxed agent may lack"
    );
}

#[test]
fn a_too_large_payload_fails_at_the_write_past_the_limit_and_reports_the_limit() {
    let m = mount!();
    let out = m.sh("head -c 147456 /dev/zero | tr '\\0' x | cat > app.py.edit");
    assert_ne!(out.status.code(), Some(0), "the write must fail (EFBIG)");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("File too large"),
        "{out:?}"
    );
    let status = m.ok("cat app.py.status");
    // The write that passes the limit is refused, and the size it reached stated
    // (where it falls depends on how much cat reads from its pipe at once).
    let reached: usize = status
        .split("the payload reached ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{status}"));
    assert!((102_401..=147_456).contains(&reached), "{status}");
    assert!(
        status.contains("over the limit of 102400 bytes"),
        "{status}"
    );
    assert!(status.ends_with('\n'), "{status:?}");
    assert_eq!(m.src_file("app.py"), APP.as_bytes());
}

#[test]
fn ambiguity_fails_by_default_and_a_resent_insertion_is_not_made_twice() {
    let m = mount!();
    fs::write(m.src.join("twice.py"), "x = 1\ny = 2\nx = 1\n").unwrap();
    let twice = m.sh("printf '<<<<<<< SEARCH\\nx = 1\\n=======\\nx = 3\\n>>>>>>> REPLACE\\n' | cat > twice.py.edit");
    assert_eq!(twice.status.code(), Some(1), "close fails (EIO)");
    let status = m.ok("cat twice.py.status");
    assert!(
        status.contains("SEARCH occurs 2 times (lines 1, 3)"),
        "{status}"
    );
    assert!(status.contains(":start_line:"), "{status}");
    assert_eq!(m.src_file("twice.py"), b"x = 1\ny = 2\nx = 1\n");
    let insert = "printf '<<<<<<< SEARCH\\ndef farewell(name):\\n=======\\n@logged\\ndef farewell(name):\\n>>>>>>> REPLACE\\n' | cat > app.py.edit";
    m.ok(insert);
    m.ok(insert);
    let status = m.ok("cat app.py.status");
    assert!(status.contains("already applied"), "{status}");
    assert_eq!(m.ok("grep -c @logged app.py").trim(), "1");
}

#[test]
fn a_refused_edit_of_a_directory_or_an_outside_link_takes_the_next_id_and_one_log_line() {
    let Some(m) = Mount::start(&[], |src| {
        fs::write(src.join("a.txt"), "a\n").unwrap();
        fs::create_dir(src.join("dir")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", src.join("out.txt")).unwrap();
    }) else {
        return;
    };
    let block = "printf '<<<<<<< SEARCH\\na\\n=======\\nb\\n>>>>>>> REPLACE\\n' | cat > ";
    m.ok(&format!("{block}a.txt.edit"));
    assert!(!m.sh(&format!("{block}dir.edit")).status.success());
    assert!(!m.sh(&format!("{block}out.txt.edit")).status.success());
    let log: Vec<serde_json::Value> = fs::read_to_string(m.src.join(".editfs/log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(u64, &str, &str, &str)> = log
        .iter()
        .map(|e| {
            (
                e["tx"].as_u64().unwrap(),
                e["outcome"].as_str().unwrap(),
                e["files"][0]["file"].as_str().unwrap(),
                e["error"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, "ok", "a.txt", ""),
            (2, "failed", "dir", "is_directory"),
            (3, "failed", "out.txt", "outside_source"),
        ]
    );
    assert!(m.ok("cat dir.status").starts_with("FAILED dir (tx 2,"));
    let json: serde_json::Value = serde_json::from_str(&m.ok("cat out.txt.status.json")).unwrap();
    assert_eq!(json["tx"], 3);
}

#[test]
fn a_file_replaced_by_rename_keeps_its_report_unless_more_may_read_it() {
    let m = mount!();
    m.ok(r#"printf '<<<<<<< SEARCH\n    print("Hello, " + name)\n=======\n    print("Hi, " + name)\n>>>>>>> REPLACE\n' > app.py.edit"#);
    // What `git checkout -- F` and `sed -i` do: a new file renamed over F.
    m.ok("sed -i 's/Goodbye/Bye/' app.py");
    m.ok("cp app.py copy.tmp && mv copy.tmp app.py");
    let status = m.ok("cat app.py.status");
    assert!(status.starts_with("OK app.py (tx 1, "), "{status}");
    assert!(status.contains("+    print(\"Hi, \" + name)"), "{status}");

    m.ok(r#"printf '<<<<<<< SEARCH\none\n=======\nuno\n>>>>>>> REPLACE\n' > lib/util.txt.edit"#);
    m.ok("chmod 600 lib/util.txt && cp lib/util.txt wide.tmp && chmod 644 wide.tmp");
    m.ok("mv wide.tmp lib/util.txt");
    let status = m.ok("cat lib/util.txt.status");
    assert!(status.starts_with("NO REPORT YET"), "{status}");
}

/// The root never lists `.editfs`, whether the state directory is SOURCE's
/// own entry or lives elsewhere, so `find` and `grep -r` never read a kept
/// version as if it were the project; it is still reached by name.
#[test]
fn the_root_never_lists_the_state_directory_and_walks_do_not_enter_it() {
    let check = "printf 'typo\\n' > t.txt
        printf '<<<<<<< SEARCH\\ntypo\\n=======\\nfixed\\n>>>>>>> REPLACE\\n' | cat > t.txt.edit
        echo \"listed: $(ls -a | grep -cx '.editfs')\"
        echo \"found: $(find . -path '*snapshots*' | wc -l)\"
        echo \"grep: $(grep -r -l typo . | wc -l)\"
        echo \"by name: $(ls -a .editfs | grep -cx snapshots)\"";
    let want = "listed: 0\nfound: 0\ngrep: 0\nby name: 1\n";
    let m = mount!();
    assert_eq!(m.ok(check), want);
    drop(m);
    let state = tempfile::tempdir().unwrap();
    let m = mount!(&format!("--state-dir={}", state.path().display()));
    assert_eq!(m.ok(check), want);
}

/// `F.edit` in a directory that does not exist never reaches the daemon: the
/// kernel fails the path with ENOENT before. The agent learns why and what to do
/// from the text it was given, and `.editfs/edit` makes the directory.
#[test]
fn an_edit_in_a_missing_directory_fails_with_enoent_and_the_agent_is_told_what_to_do() {
    let m = mount!();
    let block = "<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n";
    let sent = m.sh(&format!("cat > pkg/new.py.edit <<'EOF'\n{block}EOF"));
    assert!(!sent.status.success());
    let said = String::from_utf8_lossy(&sent.stderr);
    assert!(said.contains("No such file or directory"), "{said}");
    assert!(!m.src.join("pkg").exists());
    let prompt = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
        .arg("prompt")
        .arg(&m.mnt)
        .output()
        .unwrap();
    let prompt = String::from_utf8_lossy(&prompt.stdout).into_owned();
    for text in [prompt, m.ok("cat .editfs/README")] {
        assert!(
            text.contains("No such file or directory") && text.contains(".editfs/edit"),
            "the agent's text says what the error means and what to do:\n{text}"
        );
    }
    m.ok(&format!(
        "cat > .editfs/edit <<'EOF'\npkg/new.py\n{block}EOF"
    ));
    assert_eq!(m.src_file("pkg/new.py"), b"x = 1\n");
}

/// `.editfs/README` opens with the very section `editfs prompt MOUNT` prints, so
/// an agent that reads it first learns what its operator would have told it;
/// the full rules follow.
#[test]
fn the_agent_readme_starts_with_the_prompt_for_this_mount() {
    let m = mount!();
    let prompt = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
        .arg("prompt")
        .arg(&m.mnt)
        .output()
        .unwrap();
    let prompt = String::from_utf8(prompt.stdout).unwrap();
    let readme = m.ok("cat .editfs/README");
    assert!(
        readme.starts_with(&prompt),
        "README:\n{readme}\nprompt:\n{prompt}"
    );
    assert!(readme.len() > prompt.len() + 1000, "the rules follow");
    let size = fs::metadata(m.mnt.join(".editfs/README")).unwrap().len();
    assert_eq!(size, readme.len() as u64, "stat tells the size read");
}

/// The example of `editfs prompt MOUNT --format F`, run as printed: the lines
/// indented by four from its `cat >` on.
fn prompts_example(mnt: &Path, format: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["prompt", "--format", format])
        .arg(mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip_while(|l| !l.starts_with("    cat >"))
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect()
}

#[test]
fn each_prompt_formats_example_makes_its_edit_as_printed() {
    for format in ["search-replace", "patch", "json"] {
        let m = match Mount::start(&[], |src| {
            fs::create_dir(src.join("src")).unwrap();
            fs::write(src.join("src/app.py"), APP).unwrap();
        }) {
            Some(m) => m,
            None => return,
        };
        let example = prompts_example(&m.mnt, format);
        let out = m.sh(&example);
        assert!(out.status.success(), "{format}:\n{example}\n{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("OK"),
            "{format}: {out:?}"
        );
        assert_eq!(
            String::from_utf8(m.src_file("src/app.py")).unwrap(),
            APP.replace("\"Hello, \" + name", "f\"Hello, {name}!\""),
            "{format}"
        );
    }
}
