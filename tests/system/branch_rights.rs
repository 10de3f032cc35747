//! Branches as another user meets them: against a root daemon serving a
//! branch with `allow_other`, `nobody` has in it exactly the rights it has on
//! the project, and a version of a file the project changed since the base is
//! shown with the owner and bits the file had then.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use crate::branch::{BranchMount, editfs, ok};
use crate::common::{chmod, text};

/// `script` run by bash as `nobody`, with no groups, in `dir`.
fn nobody(dir: &Path, script: &str) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["bash", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

fn write(path: &Path, text: &str, mode: u32) {
    fs::write(path, text).unwrap();
    chmod(path, mode);
}

/// A project directory and a directory for mount points, both searchable
/// by `nobody` (a temporary directory is its maker's alone).
fn searchable_dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    chmod(dirs.0.path(), 0o755);
    chmod(dirs.1.path(), 0o755);
    dirs
}

const EDIT_SHARED: &str =
    "printf '<<<<<<< SEARCH\\nshared\\n=======\\nmine\\n>>>>>>> REPLACE\\n' > shared.txt.edit";

#[test]
fn another_user_has_in_a_branch_only_its_rights_on_the_project() {
    let (p, dir) = searchable_dirs();
    let src = p.path();
    write(&src.join("secret.txt"), "s3cret\n", 0o600);
    write(&src.join("shared.txt"), "shared\n", 0o644);
    write(&src.join("open.txt"), "open\n", 0o666);
    fs::create_dir(src.join("private")).unwrap();
    write(&src.join("private/x.txt"), "x\n", 0o644);
    chmod(&src.join("private"), 0o700);
    ok(&["branch", "create", src.to_str().unwrap(), "b"]);
    let Some(m) = BranchMount::start_with(src, "b", dir.path(), &["-o", "allow_other"]) else {
        return;
    };
    let at = &m.mnt;
    for (script, what) in [
        ("cat secret.txt", "read root's 0600 file"),
        ("ls private", "list root's 0700 directory"),
        (
            "cat private/x.txt",
            "read a file behind root's 0700 directory",
        ),
        ("echo mine >> shared.txt", "write root's 0644 file"),
        ("rm shared.txt", "remove a file of root's 0755 directory"),
        ("echo new > new.txt", "make a file in root's 0755 directory"),
    ] {
        let o = nobody(at, script);
        assert!(!o.status.success(), "nobody could {what}: {}", text(&o));
    }
    let o = nobody(at, &format!("{EDIT_SHARED}; cat shared.txt.status"));
    assert!(
        !text(&o).contains("OK"),
        "an edit of root's 0644 file: {}",
        text(&o)
    );
    assert_eq!(
        fs::read_to_string(at.join("shared.txt")).unwrap(),
        "shared\n"
    );
    let o = nobody(at, "cat shared.txt open.txt && echo more >> open.txt");
    assert!(o.status.success(), "what nobody may do: {}", text(&o));
    assert_eq!(
        fs::read_to_string(at.join("open.txt")).unwrap(),
        "open\nmore\n"
    );
}

#[test]
fn a_version_the_project_changed_since_keeps_the_bits_it_had_at_the_base() {
    let (p, dir) = searchable_dirs();
    let src = p.path();
    write(&src.join("notes.txt"), "token=s3cret\n", 0o600);
    let root = src.to_str().unwrap();
    ok(&["branch", "create", root, "b"]);
    // After the base, the project scrubs the secret and opens the file to all.
    let payload = dir.path().join("scrub");
    fs::write(
        &payload,
        "<<<<<<< SEARCH\ntoken=s3cret\n=======\ntoken=REDACTED\n>>>>>>> REPLACE\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["apply", src.join("notes.txt").to_str().unwrap()])
        .stdin(fs::File::open(&payload).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    chmod(&src.join("notes.txt"), 0o644);
    let Some(m) = BranchMount::start_with(src, "b", dir.path(), &["-o", "allow_other"]) else {
        return;
    };
    assert_eq!(
        fs::read_to_string(m.mnt.join("notes.txt")).unwrap(),
        "token=s3cret\n",
        "the branch holds the file as it was at its base"
    );
    let o = nobody(&m.mnt, "stat -c %a notes.txt; cat notes.txt");
    assert!(
        !text(&o).contains("s3cret"),
        "nobody read what only root could read at the base: {}",
        text(&o)
    );
    assert!(text(&o).starts_with("600\n"), "{}", text(&o));
    let _ = editfs(&["branch", "list", root]);
}

/// `editfs ARGS` run as `nobody`.
fn editfs_as_nobody(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_editfs"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn root_commits_another_users_branch_with_that_users_rights_on_the_project_now() {
    use std::os::unix::fs::MetadataExt;
    let p = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let src = p.path();
    let root = src.to_str().unwrap();
    chmod(src, 0o755);
    crate::common::chown_nobody(src);
    // Root's file, open to all at the base.
    write(&src.join("root.txt"), "root's\n", 0o666);
    let o = editfs_as_nobody(&["branch", "create", root, "b"]);
    assert!(o.status.success(), "{}", text(&o));
    // Root names nobody's state directory to use it.
    let state = src.join(".editfs");
    let state = ["--state-dir", state.to_str().unwrap()];
    {
        let mut args = vec!["-o", "allow_other"];
        args.extend(state);
        let Some(m) = BranchMount::start_with(src, "b", dir.path(), &args) else {
            return;
        };
        let o = nobody(&m.mnt, "echo nobody\\'s > root.txt && echo new > new.txt");
        assert!(o.status.success(), "{}", text(&o));
    }
    // Root closes its file after the base: nobody may no longer write it.
    chmod(&src.join("root.txt"), 0o644);
    let commit = [&["branch", "commit", root, "b"][..], &state].concat();
    let o = editfs(&commit);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("root.txt"), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(src.join("root.txt")).unwrap(),
        "root's\n"
    );
    assert!(!src.join("new.txt").exists(), "nothing of it was written");
    // Opened again, the commit lands, and what it makes is the maker's.
    chmod(&src.join("root.txt"), 0o666);
    let o = editfs(&commit);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(src.join("root.txt")).unwrap(),
        "nobody's\n"
    );
    assert_eq!(
        fs::metadata(src.join("new.txt")).unwrap().uid(),
        crate::common::NOBODY
    );
    assert_eq!(fs::metadata(src.join("root.txt")).unwrap().uid(), 0);
}

/// What a branch's agent left in its upper directory, as overlayfs keeps it:
/// `box` made anew (opaque) over the base's, holding a link `sub` to a
/// directory of root's. Root's diff and commit read the branch's files
/// without following it: the base's `box/sub/key` is gone in the branch,
/// not root's secret.
#[test]
fn a_link_in_a_branch_leads_root_s_diff_nowhere() {
    let p = tempfile::tempdir().unwrap();
    let secret = tempfile::tempdir().unwrap();
    fs::write(secret.path().join("key"), "ROOT-SECRET\n").unwrap();
    let src = p.path();
    fs::create_dir_all(src.join("box/sub")).unwrap();
    fs::write(src.join("box/sub/key"), "public\n").unwrap();
    let root = src.to_str().unwrap();
    ok(&["branch", "create", root, "b"]);
    let upper = src.join(".editfs/branches/b/upper");
    fs::create_dir_all(upper.join("box")).unwrap();
    rustix::fs::setxattr(
        upper.join("box"),
        "trusted.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    std::os::unix::fs::symlink(secret.path(), upper.join("box/sub")).unwrap();
    let o = editfs(&["branch", "diff", root, "b"]);
    assert!(!text(&o).contains("ROOT-SECRET"), "{}", text(&o));
    assert!(
        text(&o).contains("-public"),
        "the base's file is gone: {}",
        text(&o)
    );
    let o = editfs(&["branch", "commit", root, "b"]);
    assert!(!text(&o).contains("ROOT-SECRET"), "{}", text(&o));
    assert!(!src.join("box/sub").is_symlink());
}

/// A sparse file of gigabytes in a branch takes no disk, but read whole it
/// would take root's diff gigabytes of memory: a file over what a
/// transaction takes is refused, by name, unread.
#[test]
fn a_branch_file_larger_than_a_transaction_takes_is_refused_unread() {
    let p = tempfile::tempdir().unwrap();
    let src = p.path();
    fs::write(src.join("a.txt"), "a\n").unwrap();
    let root = src.to_str().unwrap();
    ok(&["branch", "create", root, "b"]);
    let upper = src.join(".editfs/branches/b/upper");
    fs::File::create(upper.join("huge"))
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    for cmd in ["diff", "commit"] {
        let o = editfs(&["branch", cmd, root, "b"]);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {}", text(&o));
        assert!(
            text(&o).contains("huge: larger than"),
            "{cmd}: {}",
            text(&o)
        );
    }
    assert!(!src.join("huge").exists());
}

/// Nobody's branch record is nobody's to write: one that says root made
/// the branch is not believed, and root's commit of it changes nothing.
#[test]
fn a_branch_record_its_maker_rewrote_to_name_root_is_not_believed() {
    let p = tempfile::tempdir().unwrap();
    let src = p.path();
    let root = src.to_str().unwrap();
    chmod(src, 0o755);
    crate::common::chown_nobody(src);
    fs::create_dir(src.join("etc")).unwrap();
    write(&src.join("etc/conf"), "root's\n", 0o644);
    let o = editfs_as_nobody(&["branch", "create", root, "b"]);
    assert!(o.status.success(), "{}", text(&o));
    let dir = src.join(".editfs/branches/b");
    let forged = nobody(
        &dir,
        "sed -i 's/\"uid\": *65534/\"uid\": 0/' branch.json && grep -q '\"uid\": 0' branch.json \
         && mkdir -p upper/etc && echo nobody\\'s > upper/etc/conf",
    );
    assert!(forged.status.success(), "{}", text(&forged));
    let state = src.join(".editfs");
    let o = editfs(&[
        "branch",
        "commit",
        root,
        "b",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("belongs to uid 65534"), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(src.join("etc/conf")).unwrap(),
        "root's\n"
    );
}

/// An ACL on the project that shuts nobody out of a 0644 file and a 0755
/// directory shuts it out of them in a branch too: the base view serves
/// SOURCE's ACLs, which overlayfs checks.
#[test]
fn an_acl_that_shuts_a_user_out_of_the_project_shuts_it_out_of_a_branch() {
    let (p, dir) = searchable_dirs();
    let src = p.path();
    write(&src.join("acl.txt"), "ACL-SECRET\n", 0o644);
    fs::create_dir(src.join("d")).unwrap();
    write(&src.join("d/f.txt"), "behind\n", 0o644);
    for path in ["acl.txt", "d"] {
        let o = Command::new("setfacl")
            .args(["-m", "u:nobody:---"])
            .arg(src.join(path))
            .output()
            .unwrap();
        assert!(o.status.success(), "setfacl: {}", text(&o));
    }
    assert!(
        !nobody(src, "cat acl.txt").status.success(),
        "the ACL holds natively"
    );
    ok(&["branch", "create", src.to_str().unwrap(), "b"]);
    let Some(m) = BranchMount::start_with(src, "b", dir.path(), &["-o", "allow_other"]) else {
        return;
    };
    for script in ["cat acl.txt", "ls d", "cat d/f.txt"] {
        let o = nobody(&m.mnt, script);
        assert!(!o.status.success(), "{script}: {}", text(&o));
    }
    assert!(nobody(&m.mnt, "ls").status.success());
}

/// Root's 0700 directory, removed with its file after the base, is still in
/// the branch, and still not nobody's to list.
#[test]
fn a_closed_directory_the_project_removed_since_stays_closed_in_a_branch() {
    let (p, dir) = searchable_dirs();
    let src = p.path();
    fs::create_dir(src.join("priv")).unwrap();
    write(&src.join("priv/plan-of-acquisition.txt"), "x\n", 0o644);
    chmod(&src.join("priv"), 0o700);
    let root = src.to_str().unwrap();
    ok(&["branch", "create", root, "b"]);
    let payload = dir.path().join("rm");
    fs::write(
        &payload,
        "*** Begin Patch\n*** Delete File: priv/plan-of-acquisition.txt\n*** End Patch\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["apply", "--multi", root])
        .stdin(fs::File::open(&payload).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    fs::remove_dir(src.join("priv")).unwrap();
    let Some(m) = BranchMount::start_with(src, "b", dir.path(), &["-o", "allow_other"]) else {
        return;
    };
    assert_eq!(
        fs::read_to_string(m.mnt.join("priv/plan-of-acquisition.txt")).unwrap(),
        "x\n"
    );
    let o = nobody(&m.mnt, "ls priv");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("acquisition"), "{}", text(&o));
}

/// After the base, a link in the project takes the place of a file, or a
/// directory, the branch changed: root's commit does not follow it to root's
/// files, and fails naming the path.
#[test]
fn a_link_put_in_the_project_after_the_base_does_not_steer_a_commit() {
    let p = tempfile::tempdir().unwrap();
    let src = p.path();
    let root = src.to_str().unwrap();
    fs::create_dir_all(src.join("rootdir")).unwrap();
    fs::write(src.join("rootdir/conf"), "mode=safe\n").unwrap();
    fs::create_dir_all(src.join("work/sub")).unwrap();
    fs::write(src.join("work/f"), "mode=safe\n").unwrap();
    ok(&["branch", "create", root, "b"]);
    let upper = src.join(".editfs/branches/b/upper");
    fs::create_dir_all(upper.join("work/sub")).unwrap();
    fs::write(upper.join("work/f"), "mode=evil\n").unwrap();
    fs::write(upper.join("work/sub/hook.sh"), "evil\n").unwrap();
    fs::remove_file(src.join("work/f")).unwrap();
    std::os::unix::fs::symlink("../rootdir/conf", src.join("work/f")).unwrap();
    fs::remove_dir(src.join("work/sub")).unwrap();
    std::os::unix::fs::symlink("../rootdir", src.join("work/sub")).unwrap();
    let o = editfs(&["branch", "commit", root, "b"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    for rel in ["work/f", "work/sub/hook.sh"] {
        assert!(
            text(&o).contains(&format!("{rel}: the project's path")),
            "{}",
            text(&o)
        );
    }
    assert_eq!(
        fs::read_to_string(src.join("rootdir/conf")).unwrap(),
        "mode=safe\n"
    );
    assert!(!src.join("rootdir/hook.sh").exists());
}

/// A name no payload can carry fails the commit by name, and the branch
/// stays: it used to be left out, the commit said OK and removed the branch.
/// A file of the project's too large to read, which the branch removed,
/// fails the diff unread.
#[test]
fn a_name_not_utf8_or_a_removed_file_too_large_fails_by_name() {
    use std::os::unix::ffi::OsStrExt;
    let p = tempfile::tempdir().unwrap();
    let src = p.path();
    let root = src.to_str().unwrap();
    fs::File::create(src.join("huge"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    ok(&["branch", "create", root, "b"]);
    let upper = src.join(".editfs/branches/b/upper");
    fs::write(upper.join(std::ffi::OsStr::from_bytes(b"bad-\xff")), "x\n").unwrap();
    let o = editfs(&["branch", "commit", root, "b"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not UTF-8"), "{}", text(&o));
    assert!(src.join(".editfs/branches/b").exists(), "the branch stays");
    fs::remove_file(upper.join(std::ffi::OsStr::from_bytes(b"bad-\xff"))).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        upper.join("huge"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::empty(),
        0,
    )
    .unwrap();
    let o = editfs(&["branch", "diff", root, "b"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("huge: larger than"), "{}", text(&o));
}
