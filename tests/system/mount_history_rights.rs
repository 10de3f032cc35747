//! History and undo honour read rights over time: the daemon runs as root with
//! `allow_other`, the agent as `nobody`, and each test is an attack that got
//! root's text, names or hashes through `.editfs/` before.

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::Mount;
use common::{NOBODY, as_nobody, chmod, chown_nobody, text};

/// What root keeps to itself; nothing nobody runs may ever show it.
const SECRET: &str = "API_KEY=ROOT-SECRET";

/// SOURCE with root's private `cfg.txt`, `nb/` (nobody's own directory, with a
/// file of root's in it), and `priv/` (root's, 0700, with files everyone could
/// read were it not for the directory).
fn mount_for_nobody() -> Option<Mount> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("these tests need root, to be root and nobody in turn; skipping");
        return None;
    }
    let m = Mount::start(&["-o", "allow_other"], |src: &Path| {
        chmod(src, 0o755);
        fs::write(src.join("cfg.txt"), format!("{SECRET}\nport=1\n")).unwrap();
        fs::write(src.join("gone.txt"), format!("{SECRET}\n")).unwrap();
        chmod(&src.join("gone.txt"), 0o600);
        chmod(&src.join("cfg.txt"), 0o600);
        let nb = src.join("nb");
        fs::create_dir(&nb).unwrap();
        chown_nobody(&nb);
        fs::write(nb.join("s.txt"), format!("{SECRET}\n")).unwrap();
        chmod(&nb.join("s.txt"), 0o600);
        let private = src.join("priv");
        fs::create_dir(&private).unwrap();
        chmod(&private, 0o700);
        for name in ["k.txt", "e.txt"] {
            fs::write(private.join(name), format!("{SECRET}\n")).unwrap();
            chmod(&private.join(name), 0o644);
        }
    })?;
    chmod(m.mnt.parent().unwrap(), 0o755);
    Some(m)
}

/// Root's edit through the mount, replacing `from` with `to` in `rel`.
fn root_edits(m: &Mount, rel: &str, from: &str, to: &str) {
    m.ok(&format!(
        "printf '%s\\n' '<<<<<<< SEARCH' '{from}' '=======' '{to}' '>>>>>>> REPLACE' > {rel}.edit"
    ));
}

/// Root redacts its private `cfg.txt`, then opens it to everyone: nobody may
/// now read and write it, but the version before the redaction was root's
/// alone, and no undo (of the file, of the file before that transaction, of
/// the whole transaction, forced or not) brings it back for nobody.
#[test]
fn undo_never_restores_a_version_the_caller_could_not_read_when_it_was_kept() {
    let Some(m) = mount_for_nobody() else { return };
    root_edits(&m, "cfg.txt", SECRET, "API_KEY=<redacted>");
    chmod(&m.src.join("cfg.txt"), 0o666);
    let tx = m
        .ok("cat .editfs/history")
        .lines()
        .find(|l| l.contains("cfg.txt"))
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .expect("root sees its edit");
    for request in [
        "cfg.txt".to_owned(),
        "cfg.txt --force".to_owned(),
        format!("cfg.txt {tx} --force"),
        format!("--tx {tx} --force"),
    ] {
        let out = as_nobody(
            &m,
            &format!(
                "echo '{request}' | cat > .editfs/undo; echo rc=$?; cat .editfs/status cfg.txt"
            ),
        );
        assert!(
            !text(&out).contains(SECRET),
            "`{request}` restored root's key for nobody: {}",
            text(&out)
        );
        assert!(text(&out).contains("rc=1"), "{request}: {}", text(&out));
        assert_eq!(
            fs::read_to_string(m.src.join("cfg.txt")).unwrap(),
            "API_KEY=<redacted>\nport=1\n",
            "{request}"
        );
    }
    let out = as_nobody(&m, "cat .editfs/snapshots/cfg.txt/* 2>&1");
    assert!(!text(&out).contains(SECRET), "{}", text(&out));
}

/// Nobody removes root's private file from nobody's own directory (as it may
/// natively), writes a file of its own at the name and undoes it: the new file
/// never gets root's content, and no kept version shows it to nobody.
#[test]
fn a_new_file_over_another_users_removed_file_carries_none_of_its_content() {
    let Some(m) = mount_for_nobody() else { return };
    let out = as_nobody(
        &m,
        "rm -f nb/s.txt && echo mine > nb/s.txt; \
         echo nb/s.txt | cat > .editfs/undo; echo 'nb/s.txt --force' | cat > .editfs/undo; \
         cat nb/s.txt .editfs/status .editfs/snapshots/nb/s.txt/* 2>&1; true",
    );
    assert!(
        !text(&out).contains(SECRET),
        "root's content reached nobody: {}",
        text(&out)
    );
    let now = m.src.join("nb/s.txt");
    let content = fs::read_to_string(&now).unwrap_or_default();
    assert!(!content.contains(SECRET), "nobody's file holds {content:?}");
    if let Ok(meta) = fs::metadata(&now) {
        assert!(
            meta.uid() == NOBODY || meta.mode() & 0o004 == 0,
            "a file nobody reads"
        );
    }
}

/// Nobody writes a file in its own directory and removes it; root then makes
/// a file of its own at the name by an ordinary write and makes it set-user-ID:
/// root's new file starts a history of its own too, so root's undo of it never
/// puts nobody's content into root's set-user-ID file.
#[test]
fn roots_new_file_over_another_users_removed_file_carries_none_of_its_content() {
    let Some(m) = mount_for_nobody() else { return };
    let out = as_nobody(
        &m,
        "printf '#!/bin/sh\\necho ATTACKER\\n' > nb/tool && rm nb/tool; echo rc=$?",
    );
    assert!(text(&out).contains("rc=0"), "{}", text(&out));
    m.ok("printf '#!/bin/sh\\necho root\\n' > nb/tool && chmod 4755 nb/tool");
    for request in ["nb/tool", "nb/tool --force"] {
        m.sh(&format!("echo '{request}' > .editfs/undo"));
        let now = fs::read_to_string(m.src.join("nb/tool")).unwrap_or_default();
        assert!(
            !now.contains("ATTACKER"),
            "`{request}` put nobody's content into root's file: {now:?}"
        );
    }
}

/// Root renames its own tool over nobody's file and makes it set-user-ID: an
/// undo of the rename (of the file, of the transaction, of the project to a
/// point before it) never puts nobody's content into root's file; the version
/// comes back only as nobody's own file, once root's is out of the way.
#[test]
fn an_undo_never_puts_another_users_version_into_a_file_of_roots() {
    let Some(m) = mount_for_nobody() else { return };
    let out = as_nobody(
        &m,
        "printf '#!/bin/sh\\necho ATTACKER\\n' > nb/tool; echo rc=$?",
    );
    assert!(text(&out).contains("rc=0"), "{}", text(&out));
    m.ok("sleep 0.4; echo before | cat > .editfs/checkpoint");
    m.ok("printf '#!/bin/sh\\necho root\\n' > new && mv new nb/tool && chmod 4755 nb/tool");
    let tx = m
        .ok("cat .editfs/history")
        .lines()
        .rfind(|l| l.contains("nb/tool"))
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .expect("the rename is in the history");
    for request in [
        "nb/tool".to_owned(),
        "nb/tool --force".to_owned(),
        format!("--tx {tx} --force"),
    ] {
        m.sh(&format!("echo '{request}' > .editfs/undo"));
        let now = fs::read_to_string(m.src.join("nb/tool")).unwrap_or_default();
        assert!(
            !now.contains("ATTACKER"),
            "`{request}` put nobody's content into root's file: {now:?}"
        );
    }
    m.sh("echo '--to before --force' > .editfs/rewind");
    let path = m.src.join("nb/tool");
    let now = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        !now.contains("ATTACKER") || fs::metadata(&path).unwrap().uid() == NOBODY,
        "the rewind put nobody's content into root's file: {now:?}"
    );
    m.ok(&format!(
        "rm nb/tool && echo 'nb/tool {tx} --force' > .editfs/undo"
    ));
    let meta = fs::metadata(&path).unwrap();
    assert_eq!(
        (
            fs::read_to_string(&path).unwrap().contains("ATTACKER"),
            meta.uid(),
            meta.mode() & 0o6000
        ),
        (true, NOBODY, 0),
        "the version came back, as nobody's own file"
    );
}

/// Root removes and edits files in its 0700 `priv/`: nobody, who cannot search
/// it, sees none of their names, hashes or root's command lines in the history,
/// the log or the snapshots, whatever the files' own modes said.
#[test]
fn history_log_and_snapshots_show_nothing_from_a_directory_the_caller_cannot_search() {
    let Some(m) = mount_for_nobody() else { return };
    root_edits(&m, "priv/e.txt", SECRET, "API_KEY=<redacted>");
    m.ok("rm priv/k.txt");
    let root_view = m.ok("cat .editfs/log");
    assert!(
        root_view.contains("priv/k.txt") && root_view.contains("priv/e.txt"),
        "{root_view}"
    );
    let sha = sha_of(&format!("{SECRET}\n"));
    let out = as_nobody(
        &m,
        "cat .editfs/history .editfs/log; ls -R .editfs/snapshots .editfs/versions 2>&1; \
         ls .editfs/snapshots/priv/k.txt >/dev/null 2>&1; echo kept=$?; \
         ls .editfs/snapshots/priv/none >/dev/null 2>&1; echo kept=$?",
    );
    let said = text(&out);
    let answers: Vec<&str> = said.lines().filter(|l| l.starts_with("kept=")).collect();
    assert_eq!(answers.len(), 2, "{}", text(&out));
    assert_eq!(answers[0], answers[1], "a guessed name is told apart");
    for leak in ["k.txt", "e.txt", "rm priv", sha.as_str()] {
        assert!(
            !text(&out).contains(leak),
            "nobody saw {leak}: {}",
            text(&out)
        );
    }
}

/// `setfacl ARGS PATH` as root; the test cannot stand without it.
fn setfacl(args: &[&str], path: &Path) {
    let out = Command::new("setfacl")
        .args(args)
        .arg(path)
        .output()
        .expect("setfacl (package acl) is installed");
    assert!(out.status.success(), "setfacl: {}", text(&out));
}

/// `acld/` is open to everyone by its bits, but an ACL shuts nobody out of
/// it: `ls` of it fails for nobody, and so nothing of what root did in it
/// shows through `.editfs/` (bits alone would show it).
#[test]
fn history_and_snapshots_show_nothing_from_a_directory_an_acl_shuts_the_caller_out_of() {
    let Some(m) = mount_for_nobody() else { return };
    let dir = m.src.join("acld");
    fs::create_dir(&dir).unwrap();
    for name in ["k.txt", "e.txt"] {
        fs::write(dir.join(name), format!("{SECRET}\n")).unwrap();
        chmod(&dir.join(name), 0o644);
    }
    setfacl(&["-m", "u:nobody:---"], &dir);
    root_edits(&m, "acld/e.txt", SECRET, "API_KEY=<redacted>");
    m.ok("rm acld/k.txt");
    let native = as_nobody(&m, "ls acld");
    assert!(!native.status.success(), "the ACL holds natively");
    let sha = sha_of(&format!("{SECRET}\n"));
    let out = as_nobody(
        &m,
        "cat .editfs/history .editfs/log; ls -R .editfs/snapshots .editfs/versions 2>&1; \
         cat .editfs/snapshots/acld/*/* 2>&1; true",
    );
    for leak in ["k.txt", "e.txt", "rm acld", SECRET, sha.as_str()] {
        assert!(
            !text(&out).contains(leak),
            "nobody saw {leak}: {}",
            text(&out)
        );
    }
}

/// Root redacts `shared.txt` while an ACL denies nobody its reading, then
/// drops the ACL: nobody may read and write the file now, but the version
/// before the redaction was kept while nobody could not read it, and no undo
/// brings it back for nobody.
#[test]
fn undo_never_restores_a_version_an_acl_kept_from_the_caller() {
    let Some(m) = mount_for_nobody() else { return };
    let file = m.src.join("shared.txt");
    fs::write(&file, format!("{SECRET}\nport=1\n")).unwrap();
    chmod(&file, 0o666);
    setfacl(&["-m", "u:nobody:---"], &file);
    root_edits(&m, "shared.txt", SECRET, "API_KEY=<redacted>");
    setfacl(&["-b"], &file);
    chmod(&file, 0o666);
    for request in ["shared.txt", "shared.txt --force"] {
        let out = as_nobody(
            &m,
            &format!(
                "echo '{request}' | cat > .editfs/undo; cat shared.txt .editfs/snapshots/shared.txt/* 2>&1; true"
            ),
        );
        assert!(!text(&out).contains(SECRET), "{request}: {}", text(&out));
    }
    assert!(!fs::read_to_string(&file).unwrap().contains(SECRET));
}

/// Root edits a file in its 0700 `priv/`, moves it out, and removes the whole
/// directory: nobody, who could never search `priv/`, sees none of its names,
/// hashes or contents through `.editfs/` once the directory is gone, and an
/// undo of one of its names fails as one of a name that never was there.
#[test]
fn a_removed_private_directory_stays_private_in_the_history() {
    let Some(m) = mount_for_nobody() else { return };
    root_edits(&m, "priv/e.txt", SECRET, "API_KEY=<redacted>");
    m.ok("mv priv/e.txt moved.txt && rm -r priv");
    let sha = sha_of(&format!("{SECRET}\n"));
    let out = as_nobody(
        &m,
        "cat .editfs/history .editfs/log; ls -R .editfs/snapshots .editfs/versions 2>&1; \
         cat .editfs/snapshots/priv/*/* .editfs/versions/priv/*/* 2>&1; true",
    );
    for leak in ["k.txt", "e.txt", SECRET, sha.as_str()] {
        assert!(
            !text(&out).contains(leak),
            "nobody saw {leak}: {}",
            text(&out)
        );
    }
    let attempt = |name: &str| {
        let out = as_nobody(
            &m,
            &format!(
                "echo {name} | cat > .editfs/undo; echo rc=$?; grep -v '^tx\\|time' .editfs/status"
            ),
        );
        normalise(&text(&out).replace(name, "NAME"))
    };
    assert_eq!(attempt("priv/k.txt"), attempt("priv/never.txt"));
    assert!(!m.src.join("priv").exists(), "recreated for nobody");
}

fn sha_of(text: &str) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// An undo of a name whose history nobody may not see fails exactly as one of
/// a name that never had any, with the answer a native `cat` gives: EACCES
/// behind a directory nobody cannot search (or for a file it cannot read), and
/// for a name that is gone, the same "no transaction" report either way. Same
/// exit status, same error, same report but for the name: nobody cannot learn
/// which names root's history holds.
#[test]
fn an_undo_of_a_hidden_name_fails_as_one_of_a_name_that_never_existed() {
    let Some(m) = mount_for_nobody() else { return };
    m.ok("rm priv/k.txt gone.txt");
    root_edits(&m, "cfg.txt", SECRET, "API_KEY=<redacted>");
    let attempt = |name: &str| {
        let out = as_nobody(
            &m,
            &format!(
                "echo {name} | cat > .editfs/undo; echo rc=$?; grep -v '^tx\\|time' .editfs/status"
            ),
        );
        text(&out).replace(name, "NAME")
    };
    for (hidden, never) in [
        ("priv/k.txt", "priv/never.txt"),
        ("priv/e.txt", "priv/never.txt"),
        ("gone.txt", "never.txt"),
    ] {
        let (seen, unseen) = (attempt(hidden), attempt(never));
        assert!(unseen.contains("rc=1"), "{unseen}");
        assert_eq!(
            normalise(&seen),
            normalise(&unseen),
            "{hidden} is told apart from a name that never existed"
        );
    }
    let cfg = attempt("cfg.txt");
    assert!(cfg.contains("Permission denied"), "as `cat cfg.txt`: {cfg}");
    assert!(!cfg.contains(SECRET), "{cfg}");
}

/// The report without its transaction numbers, which differ run by run.
fn normalise(report: &str) -> String {
    report
        .split(|c: char| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .join("#")
}

/// The reports of root's edits of its private files say nothing to nobody:
/// not through the file's own status files, not through `.editfs/status`.
#[test]
fn status_files_of_a_private_file_show_nothing_to_another_user() {
    let Some(m) = mount_for_nobody() else { return };
    root_edits(&m, "cfg.txt", SECRET, "API_KEY=<redacted>");
    root_edits(&m, "priv/e.txt", SECRET, "API_KEY=<redacted>");
    m.ok("printf '%s\\n' priv/e.txt '<<<<<<< SEARCH' 'API_KEY=<redacted>' '=======' 'API_KEY=again' '>>>>>>> REPLACE' > .editfs/edit");
    let out = as_nobody(
        &m,
        "cat cfg.txt.status cfg.txt.status.json priv/e.txt.status .editfs/status .editfs/status.json 2>&1; true",
    );
    for leak in ["ROOT-SECRET", "redacted", "again", "e.txt:", "sha256 "] {
        assert!(
            !text(&out).contains(leak),
            "nobody saw {leak}: {}",
            text(&out)
        );
    }
}

/// nobody rewinds its own work, files it made through the mount included, and
/// never root's: a private change root made after the checkpoint stays, and no
/// version nobody could not read comes back into nobody's files.
#[test]
fn a_rewind_by_another_user_takes_back_its_own_work_and_nothing_of_roots() {
    let Some(m) = mount_for_nobody() else { return };
    let out = as_nobody(&m, "echo start | cat > .editfs/checkpoint");
    assert!(out.status.success(), "{}", text(&out));
    let out = as_nobody(
        &m,
        "echo made > nb/new.txt; mkdir nb/d; echo deep > nb/d/x.txt",
    );
    assert!(out.status.success(), "{}", text(&out));
    root_edits(&m, "cfg.txt", "port=1", "port=2");
    m.ok("echo changed > priv/k.txt");
    let out = as_nobody(
        &m,
        "echo '--to start' | cat > .editfs/rewind; cat .editfs/status",
    );
    assert!(out.status.success(), "{}", text(&out));
    let report = text(&out);
    assert!(
        !report.contains(SECRET) && !report.contains("priv/"),
        "{report}"
    );
    assert!(!m.src.join("nb/new.txt").exists(), "{report}");
    assert!(!m.src.join("nb/d/x.txt").exists(), "{report}");
    assert_eq!(
        m.src_file("priv/k.txt"),
        b"changed\n",
        "root's change stays"
    );
    assert_eq!(
        m.src_file("cfg.txt"),
        format!("{SECRET}\nport=2\n").as_bytes(),
        "root's private edit stays"
    );
}

/// nobody makes a file, moves root's private file onto its name before the
/// creation is recorded, then puts a file of its own there: the record of the
/// creation must never read root's file (it read it as root, and nobody then
/// read it in `.editfs/versions`).
#[test]
fn a_file_moved_onto_a_new_files_name_is_never_read_for_its_record() {
    let Some(m) = mount_for_nobody() else { return };
    m.ok(&format!("(umask 077; echo '{SECRET}' > nb/.env)"));
    let out = as_nobody(
        &m,
        "cat nb/.env; echo x > nb/H && mv nb/.env nb/H && sleep 0.5 && rm -f nb/H \
         && echo mine > nb/H && sleep 0.5; cat .editfs/versions/nb/H/* 2>/dev/null; \
         cat .editfs/snapshots/nb/H/* 2>/dev/null; cat .editfs/log",
    );
    let seen = text(&out);
    assert!(!seen.contains(SECRET), "{seen}");
    // Kept it may be, under rights no one but root has: no mode bit.
    let log = fs::read_to_string(m.src.join(".editfs/log")).unwrap();
    for line in log.lines().filter(|l| l.contains("\"nb/H\"")) {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        let tx = e["tx"].as_u64().unwrap();
        let version = m.src.join(format!(".editfs/versions/nb/H/{tx}"));
        if fs::read_to_string(&version).is_ok_and(|v| v.contains(SECRET)) {
            assert_eq!(e["files"][0]["access"]["mode"], 0, "{line}");
        }
    }
}

/// A user's undo or rewind of another user's removal makes the file as that
/// user makes one natively: owned by itself, never by the other user.
#[test]
fn a_rewind_never_makes_a_file_owned_by_another_user() {
    let Some(m) = mount_for_nobody() else { return };
    m.ok("mkdir -m 1777 shared");
    let uid_4242 = |script: &str| {
        Command::new("setpriv")
            .args([
                "--reuid=4242",
                "--regid=4242",
                "--clear-groups",
                "bash",
                "-c",
                script,
            ])
            .current_dir(&m.mnt)
            .output()
            .unwrap()
    };
    assert!(uid_4242("echo 'user data' > shared/u.txt").status.success());
    let out = as_nobody(&m, "sleep 0.4; echo cp | cat > .editfs/checkpoint");
    assert!(out.status.success(), "{}", text(&out));
    assert!(uid_4242("rm shared/u.txt").status.success());
    let out = as_nobody(
        &m,
        "echo '--to cp' | cat > .editfs/rewind; cat .editfs/status",
    );
    let made = fs::metadata(m.src.join("shared/u.txt"));
    if let Ok(meta) = made {
        assert_eq!(meta.uid(), NOBODY, "{}", text(&out));
    }
}

/// What a rewind says it leaves as it is (files changed with no record,
/// directories made since) names only what the caller could see natively:
/// root's private changes beside the mount are named to root, never to nobody.
#[test]
fn what_a_rewind_leaves_as_it_is_names_nothing_the_caller_could_not_see() {
    let Some(m) = mount_for_nobody() else { return };
    let out = as_nobody(&m, "echo start | cat > .editfs/checkpoint");
    assert!(out.status.success(), "{}", text(&out));
    // Beside the mount, so no line of the log covers them.
    fs::write(m.src.join("cfg.txt"), format!("{SECRET}\nport=9\n")).unwrap();
    fs::write(m.src.join("priv/e.txt"), "changed\n").unwrap();
    fs::create_dir(m.src.join("priv/hidden-dir")).unwrap();
    let out = as_nobody(&m, "mkdir nb/mine");
    assert!(out.status.success(), "{}", text(&out));
    let out = as_nobody(
        &m,
        "echo '--to start' | cat > .editfs/rewind; cat .editfs/status .editfs/status.json",
    );
    assert!(out.status.success(), "{}", text(&out));
    let report = text(&out);
    assert!(
        report.contains("not undone: ") && report.contains("nb/mine/"),
        "{report}"
    );
    for hidden in ["cfg.txt", "priv/", SECRET] {
        assert!(!report.contains(hidden), "{hidden} in:\n{report}");
    }
    let root = m.ok("echo '--to start --dry-run' | cat > .editfs/rewind; cat .editfs/status");
    for seen in [
        "\n    cfg.txt\n",
        "\n    priv/e.txt\n",
        "\n    priv/hidden-dir/\n",
    ] {
        assert!(root.contains(seen), "{seen:?} in:\n{root}");
    }
}

/// nobody moves its directory holding a private file of root's: its rewind
/// moves nobody's own file back and leaves root's where it is, shown to no
/// one; root's rewind moves root's back too.
#[test]
fn a_directory_moved_by_another_user_is_rewound_file_by_file_under_each_files_rights() {
    let Some(m) = mount_for_nobody() else { return };
    let out = as_nobody(
        &m,
        "mkdir nb/d && echo mine > nb/d/x.txt && echo start | cat > .editfs/checkpoint",
    );
    assert!(out.status.success(), "{}", text(&out));
    fs::write(m.src.join("nb/d/r.txt"), format!("{SECRET}\n")).unwrap();
    chmod(&m.src.join("nb/d/r.txt"), 0o600);
    let out = as_nobody(
        &m,
        "mv nb/d nb/e && sleep 0.5 && echo '--to start' | cat > .editfs/rewind; cat .editfs/status",
    );
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(
        !report.contains(SECRET) && !report.contains("r.txt"),
        "{report}"
    );
    assert_eq!(m.src_file("nb/d/x.txt"), b"mine\n", "{report}");
    assert!(!m.src.join("nb/e/x.txt").exists(), "{report}");
    assert!(
        m.src.join("nb/e/r.txt").exists(),
        "root's file is not nobody's to move back"
    );
    assert!(!m.src.join("nb/d/r.txt").exists(), "{report}");
    let out = m.ok("echo '--to start' | cat > .editfs/rewind; cat .editfs/status");
    assert_eq!(
        m.src_file("nb/d/r.txt"),
        format!("{SECRET}\n").as_bytes(),
        "{out}"
    );
    assert!(!m.src.join("nb/e").exists(), "{out}");
}

/// Root scrubs a secret from its private `cfg.txt`, then opens the file to
/// everyone; root also previews a rewind and a multi-file edit. Nobody may read
/// the file now, but none of the reports show it what the file held before, a
/// kept version, or a payload no file holds: natively it sees the file as it is.
#[test]
fn no_report_shows_what_the_reader_could_not_read_then_or_what_no_file_holds() {
    let Some(m) = mount_for_nobody() else { return };
    m.ok("echo before-scrub | cat > .editfs/checkpoint");
    root_edits(&m, "cfg.txt", SECRET, "API_KEY=<redacted>");
    chmod(&m.src.join("cfg.txt"), 0o644);
    let nobody_reads = |what: &str| text(&as_nobody(&m, &format!("cat {what}; true")));
    for status in ["cfg.txt.status", "cfg.txt.status.json"] {
        let said = nobody_reads(status);
        assert!(!said.contains(SECRET), "{status}: {said}");
        assert!(
            said.contains("NOT SHOWN") || said.contains("null"),
            "{status}: {said}"
        );
        // Nor does its size tell the length of what it hides.
        let size = nobody_reads(&format!("{status} >/dev/null; stat -c %s {status}"));
        assert_eq!(size.trim(), said.len().to_string(), "{status}");
    }
    assert!(
        m.ok("cat cfg.txt.status").contains(SECRET),
        "root sees its report"
    );

    m.ok("echo '--to before-scrub --dry-run' > .editfs/rewind");
    let said = nobody_reads(".editfs/status .editfs/status.json");
    assert!(!said.contains(SECRET), "rewind preview: {said}");

    let planned = "PASSWORD=never-written";
    m.ok(&format!(
        "printf '*** Begin Patch\\n*** Update File: cfg.txt\\n@@\\n-port=1\\n+{planned}\\n*** End Patch\\n' > .editfs/dry-run"
    ));
    assert!(
        m.ok("cat .editfs/status").contains(planned),
        "root sees its dry run"
    );
    let said = nobody_reads(".editfs/status .editfs/status.json");
    assert!(!said.contains(planned), "dry run: {said}");
}
