//! What one caller may make the daemon do, with the daemon as root and
//! `allow_other` and the caller as `nobody`: the work of a transaction is
//! bounded (`over_budget`), a file over `--max-file-size` is refused to
//! transactions and passes through for direct writes without a pre-image, a
//! sparse file stays sparse, and `--keep-bytes` holds before a commit adds its
//! versions. How long others wait meanwhile is measured by
//! `scripts/bench-isolation.sh`, not here.

use crate::common;

use common::{as_nobody, text};

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// A project `nobody` may write in, mounted by root for every user; `fill` adds
/// to it (as root, in SOURCE).
fn mount_for_nobody(args: &[&str], fill: impl FnOnce(&Path)) -> Option<common::Mount> {
    let m = common::Mount::start(&[&["-o", "allow_other"], args].concat(), |src: &Path| {
        fs::set_permissions(src, fs::Permissions::from_mode(0o777)).unwrap();
        fill(src);
    })?;
    let top = m.mnt.parent().unwrap();
    fs::set_permissions(top, fs::Permissions::from_mode(0o755)).unwrap();
    Some(m)
}

/// A file of `nobody`'s in SOURCE.
fn nobodys(src: &Path, rel: &str, content: &[u8]) {
    let path = src.join(rel);
    fs::write(&path, content).unwrap();
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
}

/// A source file of about `bytes` bytes, of distinct lines.
fn source_of(bytes: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < bytes {
        s += &format!("    let value_{i} = compute({i}, \"b\"); // line {i}\n");
        i += 1;
    }
    s
}

fn report(m: &common::Mount, rel: &str) -> serde_json::Value {
    let json = fs::read_to_string(m.mnt.join(format!("{rel}.status.json"))).unwrap();
    serde_json::from_str(&json).unwrap()
}

#[test]
fn a_payload_past_its_work_budget_fails_as_over_budget_with_a_hint() {
    let Some(m) = mount_for_nobody(&[], |src| {
        nobodys(src, "big.txt", source_of(1 << 20).as_bytes());
    }) else {
        return;
    };
    // 2,250 one-line SEARCHes that match nothing, just under 100 KiB.
    let payload: String = (0..2250)
        .map(|i| format!("<<<<<<< SEARCH\nq{i:04}\n=======\n>>>>>>> REPLACE\n"))
        .collect();
    fs::write(m.mnt.parent().unwrap().join("misses"), &payload).unwrap();
    let out = as_nobody(&m, "cat ../misses > big.txt.edit");
    assert!(!out.status.success());
    assert!(
        text(&out).contains("Argument list too long"),
        "close fails with E2BIG: {}",
        text(&out)
    );
    let r = report(&m, "big.txt");
    assert_eq!(r["error"]["kind"], "over_budget", "{r:#}");
    let hint = r["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("split"), "{hint}");
    let notes = r["notes"].to_string();
    assert!(notes.contains("were not diagnosed"), "{notes}");
    assert!(notes.contains("were not run"), "{notes}");
    assert_eq!(m.src_file("big.txt"), source_of(1 << 20).as_bytes());
}

#[test]
fn only_the_first_failing_blocks_are_diagnosed_and_a_note_counts_the_rest() {
    let Some(m) = mount_for_nobody(&[], |src| {
        nobodys(src, "f.txt", source_of(4096).as_bytes());
    }) else {
        return;
    };
    let payload: String = (0..20)
        .map(|i| format!("<<<<<<< SEARCH\n    let value_{i} = compute({i}, \"c\");\n=======\nx\n>>>>>>> REPLACE\n"))
        .collect();
    fs::write(m.mnt.parent().unwrap().join("p"), &payload).unwrap();
    let out = as_nobody(&m, "cat ../p > f.txt.edit");
    assert!(!out.status.success());
    let r = report(&m, "f.txt");
    assert_eq!(r["error"]["kind"], "not_found", "{r:#}");
    let ops = r["operations"].as_array().unwrap();
    let diagnosed = ops
        .iter()
        .filter(|o| !o["error"]["closest"].is_null())
        .count();
    assert_eq!(diagnosed, 8, "{r:#}");
    assert!(
        r["notes"]
            .to_string()
            .contains("12 failing operation(s) were not diagnosed"),
        "{r:#}"
    );
}

#[test]
fn a_file_over_max_file_size_is_refused_and_its_direct_writes_pass_through_unkept() {
    let Some(m) = mount_for_nobody(&["--max-file-size", "64K"], |src| {
        nobodys(src, "big.txt", source_of(100 << 10).as_bytes());
        nobodys(src, "small.txt", b"one\n");
    }) else {
        return;
    };
    let edit = "printf '%s\\n' '<<<<<<< SEARCH' '    let value_0 = compute(0, \"b\"); // line 0' '=======' 'x' '>>>>>>> REPLACE' | cat > big.txt.edit";
    let out = as_nobody(&m, edit);
    assert!(
        text(&out).contains("File too large"),
        "close fails with EFBIG: {}",
        text(&out)
    );
    let r = report(&m, "big.txt");
    assert_eq!(r["error"]["kind"], "too_large", "{r:#}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-file-size"),
        "{r:#}"
    );
    // A direct write passes through, keeps no pre-image, and the log says so.
    let out = as_nobody(&m, "echo appended >> big.txt && echo more >> small.txt");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8(m.src_file("big.txt"))
            .unwrap()
            .ends_with("appended\n")
    );
    let state = m.src.join(".editfs");
    assert!(!state.join("snapshots/big.txt").exists());
    assert!(state.join("snapshots/small.txt").exists());
    let log = fs::read_to_string(state.join("log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("big.txt") && l.contains("over the size limit")),
        "{log}"
    );
}

#[test]
fn a_sparse_file_stays_sparse_under_edits_and_direct_writes() {
    let Some(m) = mount_for_nobody(&[], |src| {
        nobodys(src, "sparse.txt", b"the one line of data\n");
        let f = fs::OpenOptions::new()
            .write(true)
            .open(src.join("sparse.txt"))
            .unwrap();
        f.set_len(2 << 30).unwrap();
    }) else {
        return;
    };
    let blocks = || fs::metadata(m.src.join("sparse.txt")).unwrap().blocks();
    let before = blocks();
    let out = as_nobody(
        &m,
        "printf '%s\\n' '<<<<<<< SEARCH' 'the one line of data' '=======' 'edited' '>>>>>>> REPLACE' | cat > sparse.txt.edit",
    );
    assert!(!out.status.success());
    assert_eq!(report(&m, "sparse.txt")["error"]["kind"], "too_large");
    let out = as_nobody(
        &m,
        "printf x | dd of=sparse.txt bs=1 seek=4096 conv=notrunc status=none",
    );
    assert!(out.status.success(), "{}", text(&out));
    let after = blocks();
    assert!(
        after <= before + 64,
        "the file took {before} blocks of 512 bytes, now {after}"
    );
    assert_eq!(
        fs::metadata(m.src.join("sparse.txt")).unwrap().len(),
        2 << 30
    );
    let state = du(&m.src.join(".editfs"));
    assert!(state < 4 << 20, "the state directory takes {state} bytes");
}

/// Bytes `dir` takes on disk.
fn du(dir: &Path) -> u64 {
    let out = Command::new("du").arg("-sb").arg(dir).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn keep_bytes_holds_before_a_commit_adds_its_versions() {
    let Some(m) = mount_for_nobody(&["--keep-bytes", "64K"], |src| {
        nobodys(src, "mid.txt", source_of(40 << 10).as_bytes());
        nobodys(src, "small.txt", b"one\n");
    }) else {
        return;
    };
    // Its versions before and after are 80 KB together: more than the cap.
    let out = as_nobody(
        &m,
        "printf '%s\\n' '<<<<<<< SEARCH' '    let value_0 = compute(0, \"b\"); // line 0' '=======' 'x' '>>>>>>> REPLACE' | cat > mid.txt.edit",
    );
    assert!(!out.status.success(), "{}", text(&out));
    let r = report(&m, "mid.txt");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--keep-bytes"),
        "{r:#}"
    );
    assert_eq!(m.src_file("mid.txt"), source_of(40 << 10).as_bytes());
    let objects = du(&m.src.join(".editfs/objects"));
    assert!(objects <= 64 << 10, "objects take {objects} bytes");
    // A change whose versions fit still commits.
    let out = as_nobody(
        &m,
        "printf '%s\\n' '<<<<<<< SEARCH' 'one' '=======' 'two' '>>>>>>> REPLACE' | cat > small.txt.edit",
    );
    assert!(out.status.success(), "{}", text(&out));
}
