//! The mount as an untrusted agent sees it: the daemon runs as root with
//! `allow_other`, the agent as `nobody`, and nothing the agent sends may reach
//! editfs's own state or stall other files.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::Mount;

/// A project `nobody` may write in, mounted for every user.
fn mount_for_nobody() -> Option<Mount> {
    let m = Mount::start(&["-o", "allow_other"], |src: &Path| {
        fs::write(src.join("a.txt"), "one\ntwo\n").unwrap();
        fs::set_permissions(src, fs::Permissions::from_mode(0o777)).unwrap();
        fs::set_permissions(src.join("a.txt"), fs::Permissions::from_mode(0o666)).unwrap();
    })?;
    let top = m.mnt.parent().unwrap();
    fs::set_permissions(top, fs::Permissions::from_mode(0o755)).unwrap();
    Some(m)
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A multi-file payload whose one section replaces `search` in `rel`.
fn forge(rel: &str, search: &str) -> String {
    format!(
        "printf '%s\\n' {} '<<<<<<< SEARCH' {} '=======' 'FORGED' '>>>>>>> REPLACE' | cat > .editfs/edit",
        shell_quote(rel),
        shell_quote(search)
    )
}

/// The agent here is the user the mount belongs to (the common single-user
/// setup): it may write `.editfs/edit`, and still not editfs's own files.
#[test]
fn no_spelling_or_symlink_lets_a_payload_or_an_undo_write_the_state_directory() {
    let Some(m) = mount_for_nobody() else { return };
    m.ok("echo 'a.txt\n<<<<<<< SEARCH\none\n=======\nONE\n>>>>>>> REPLACE' > .editfs/edit");
    let state = m.src.join(".editfs");
    let txid_before = fs::read_to_string(state.join("txid")).unwrap();
    assert_eq!(txid_before.trim(), "1");
    m.ok("ln -s .editfs lnk && ln -s .editfs/snapshots snaps");
    // Each SEARCH is a whole line the target holds when the payload is read
    // (the counter is moved before), so only the path check stands in the way.
    let next_id = || {
        let n: u64 = fs::read_to_string(state.join("txid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        (n + 1).to_string()
    };
    let first_log_line = || {
        let log = fs::read_to_string(state.join("log")).unwrap();
        log.lines().next().unwrap().to_owned()
    };
    for (rel, search) in [
        (".editfs/txid", None),
        ("./.editfs/txid", None),
        ("lnk/txid", None),
        (".//.editfs/log", Some(first_log_line())),
        ("a/../.editfs/log", Some(first_log_line())),
        ("lnk/log", Some(first_log_line())),
        ("snaps/a.txt/1", Some("one".to_owned())),
    ] {
        let search = search.unwrap_or_else(next_id);
        let out = m.sh(&forge(rel, &search));
        assert!(
            !out.status.success(),
            "{rel} was accepted: {}",
            m.ok("cat .editfs/status")
        );
    }
    for undo in [".editfs/log --force", "./.editfs/txid 1 --force", "lnk/log"] {
        let out = m.sh(&format!("echo '{undo}' | cat > .editfs/undo"));
        assert!(!out.status.success(), "undo {undo} was accepted");
    }
    for entry in walk(&state) {
        let bytes = fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("FORGED"),
            "{} was written",
            entry.display()
        );
    }
    // The counter still counts: a later transaction is numbered and applied.
    m.ok("echo 'a.txt\n<<<<<<< SEARCH\ntwo\n=======\nTWO\n>>>>>>> REPLACE' > .editfs/edit");
    assert_eq!(m.src_file("a.txt"), b"ONE\nTWO\n");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
