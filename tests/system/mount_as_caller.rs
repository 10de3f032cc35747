//! An agent gets through the mount what its user could get natively, no more:
//! the daemon runs as root with `allow_other`, the agent as `nobody`, and each
//! test is an attack that reached root's files before.

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::Mount;
use common::{NOBODY, as_nobody, chmod, chown_nobody, text};

/// What root keeps to itself; no report or read may ever show it to nobody.
const SECRET: &str = "ROOT-SECRET";

/// SOURCE with `shared/` (everyone may write in it, as in a project several
/// users share), root's files in it, and `nb/`, nobody's own directory.
fn mount_for_nobody() -> Option<Mount> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("these tests need root, to be root and nobody in turn; skipping");
        return None;
    }
    let m = Mount::start(&["-o", "allow_other"], |src: &Path| {
        chmod(src, 0o755);
        let shared = src.join("shared");
        fs::create_dir(&shared).unwrap();
        chmod(&shared, 0o777);
        fs::write(shared.join("secret.txt"), format!("#!/bin/sh\n{SECRET}\n")).unwrap();
        chmod(&shared.join("secret.txt"), 0o600);
        // Nobody may append to it, not read it.
        fs::write(shared.join("drop.txt"), format!("#!/bin/sh\n{SECRET}\n")).unwrap();
        chmod(&shared.join("drop.txt"), 0o622);
        let nb = src.join("nb");
        fs::create_dir_all(nb.join("d")).unwrap();
        fs::write(nb.join("d/backup.sh"), "#!/bin/sh\nnobody's\n").unwrap();
        fs::write(nb.join("nb.txt"), "#!/bin/sh\nnobody's\n").unwrap();
        for p in [
            &nb,
            &nb.join("d"),
            &nb.join("d/backup.sh"),
            &nb.join("nb.txt"),
        ] {
            chown_nobody(p);
        }
        std::os::unix::fs::symlink("../rootdir", nb.join("dl")).unwrap();
        std::os::unix::fs::lchown(nb.join("dl"), Some(NOBODY), Some(NOBODY)).unwrap();
        let rootdir = src.join("rootdir");
        fs::create_dir(&rootdir).unwrap();
        chmod(&rootdir, 0o700);
        fs::write(rootdir.join("backup.sh"), format!("#!/bin/sh\n{SECRET}\n")).unwrap();
        chmod(&rootdir.join("backup.sh"), 0o700);
    })?;
    chmod(m.mnt.parent().unwrap(), 0o755);
    Some(m)
}

/// A payload adding `line` after the first line of a shell script, written by
/// `cat`, whose exit status tells whether the close (the commit) failed.
fn payload(line: &str) -> String {
    format!(
        "printf '%s\\n' '<<<<<<< SEARCH' '#!/bin/sh' '=======' '#!/bin/sh' '{line}' '>>>>>>> REPLACE' | cat"
    )
}

fn untouched(m: &Mount, rel: &str) {
    let path = m.src.join(rel);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("#!/bin/sh\n{SECRET}\n"),
        "{rel} was written"
    );
    assert_eq!(
        fs::metadata(&path).unwrap().uid(),
        0,
        "{rel} was given away"
    );
}

/// Nobody keeps exchanging its directory `d` with its symlink `dl -> ../rootdir`
/// while editing `d/backup.sh`: the edit lands in nobody's file or nowhere,
/// never in root's `rootdir/backup.sh`, and no report shows root's text.
#[test]
fn a_directory_swapped_for_a_symlink_mid_transaction_never_redirects_it() {
    let Some(m) = mount_for_nobody() else { return };
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let (stop, nb) = (stop.clone(), m.mnt.join("nb"));
        std::thread::spawn(move || {
            // This thread alone becomes nobody (Linux keeps ids per thread).
            let nobody = rustix::process::Gid::from_raw(NOBODY);
            rustix::thread::set_thread_groups(&[]).unwrap();
            rustix::thread::set_thread_res_gid(nobody, nobody, nobody).unwrap();
            let nobody = rustix::process::Uid::from_raw(NOBODY);
            rustix::thread::set_thread_res_uid(nobody, nobody, nobody).unwrap();
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let swapped = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    nb.join("d"),
                    rustix::fs::CWD,
                    nb.join("dl"),
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                swaps += u64::from(swapped.is_ok());
            }
            swaps
        })
    };
    let out = as_nobody(
        &m,
        &format!(
            "cd nb; for i in $(seq 1 300); do {{ {} > d/backup.sh.edit; }} 2>/dev/null; cat d/backup.sh.status 2>/dev/null; done",
            payload("ATTACK")
        ),
    );
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert!(swaps > 100, "the race did not run ({swaps} exchanges)");
    let seen = text(&out);
    assert!(!seen.contains(SECRET), "root's file leaked into a report");
    untouched(&m, "rootdir/backup.sh");
    let mine = [m.src.join("nb/d/backup.sh"), m.src.join("nb/dl/backup.sh")];
    assert!(
        mine.iter()
            .filter_map(|p| fs::read_to_string(p).ok())
            .any(|t| t.contains("ATTACK")),
        "no edit went through at all: the test proves nothing"
    );
}

/// Nobody opens the edit handle of its own file, then renames root's file to
/// that name before the payload commits: the transaction fails as stale, and
/// root's file is neither shown nor changed.
#[test]
fn a_file_swapped_under_an_open_edit_handle_is_not_the_one_edited() {
    let Some(m) = mount_for_nobody() else { return };
    // nb.txt moves to shared/, where nobody may rename root's file too.
    m.ok("mv nb/nb.txt shared/nb.txt");
    // Written without a close (a close would commit), then read back.
    let swap = r#"
import os
fd = os.open("nb.txt.edit", os.O_RDWR)
os.write(fd, b"<<<<<<< SEARCH\n#!/bin/sh\n=======\n#!/bin/sh\nATTACK\n>>>>>>> REPLACE\n")
os.rename("nb.txt", "mine.txt")
os.rename("secret.txt", "nb.txt")
print(os.read(fd, 1 << 16).decode())
"#;
    let out = as_nobody(
        &m,
        &format!("cd shared && PATH=/usr/bin:/bin python3 -c '{swap}'"),
    );
    let seen = text(&out);
    assert!(seen.contains("stale"), "{seen}");
    assert!(!seen.contains(SECRET), "root's file leaked: {seen}");
    untouched(&m, "shared/nb.txt");
    assert!(!m.src_file("shared/mine.txt").ends_with(b"ATTACK\n"));
}

/// The transaction is checked against the user who opened the handle: a file
/// nobody may write but not read (0622) is not read for it, and a multi-file
/// edit or an undo of root's 0600 file is refused, naming the reason.
#[test]
fn every_entry_point_checks_the_file_against_the_callers_own_rights() {
    let Some(m) = mount_for_nobody() else { return };
    // A transaction by root gives the secret a kept version an undo could restore.
    m.ok(&format!("{} > shared/secret.txt.edit", payload("by root")));
    let edit = as_nobody(&m, &format!("{} > shared/drop.txt.edit", payload("ATTACK")));
    assert!(!edit.status.success());
    let multi = as_nobody(
        &m,
        "printf '%s\\n' shared/secret.txt '<<<<<<< SEARCH' '#!/bin/sh' '=======' 'ATTACK' '>>>>>>> REPLACE' | cat > .editfs/edit; rc=$?; cat .editfs/status; exit $rc",
    );
    assert!(!multi.status.success());
    let undo = as_nobody(
        &m,
        "echo 'shared/secret.txt --force' | cat > .editfs/undo; rc=$?; cat .editfs/status; exit $rc",
    );
    assert!(!undo.status.success());
    for out in [&edit, &multi, &undo] {
        let seen = text(out);
        assert!(!seen.contains(SECRET), "root's file leaked: {seen}");
    }
    // The close fails with EACCES; the report itself names files nobody
    // cannot read, so `.editfs/status` does not show it to nobody.
    for out in [&multi, &undo] {
        assert!(text(out).contains("Permission denied"), "{}", text(out));
    }
    untouched(&m, "shared/drop.txt");
    let secret = fs::read_to_string(m.src.join("shared/secret.txt")).unwrap();
    assert_eq!(secret, format!("#!/bin/sh\nby root\n{SECRET}\n"));
    // Nobody's own file still edits, through every entry point.
    as_nobody(&m, &format!("{} > nb/nb.txt.edit", payload("one")));
    let own = as_nobody(
        &m,
        "printf '%s\\n' nb/nb.txt '<<<<<<< SEARCH' 'one' '=======' 'two' '>>>>>>> REPLACE' | cat > .editfs/edit",
    );
    assert!(own.status.success(), "{}", text(&own));
    assert_eq!(m.src_file("nb/nb.txt"), b"#!/bin/sh\ntwo\nnobody's\n");
}

/// A multi-file payload naming a file that does not exist points at files of
/// that name, found with the caller's own rights: nobody is not told of root's
/// file in a directory only root may list, root is.
#[test]
fn a_payload_naming_no_file_points_only_at_files_the_caller_could_list() {
    let Some(m) = mount_for_nobody() else { return };
    let send = "printf '%s\\n' shared/backup.sh '<<<<<<< SEARCH' 'x' '=======' 'y' '>>>>>>> REPLACE' | cat > .editfs/edit; cat .editfs/status";
    let nobody = text(&as_nobody(&m, send));
    assert!(
        nobody.contains("the project has one of that name: `nb/d/backup.sh`;"),
        "{nobody}"
    );
    assert!(!nobody.contains("rootdir"), "{nobody}");
    let root = text(&m.sh(send));
    assert!(
        root.contains("`nb/d/backup.sh`, `rootdir/backup.sh`;"),
        "{root}"
    );
}

/// Nobody looks up a missing name (the kernel remembers it as missing), root
/// makes the file with mode 0600, and nobody opens it with `O_RDWR|O_CREAT`
/// before the kernel forgets: the open fails as it would natively.
#[test]
fn a_create_over_a_name_another_user_just_made_is_checked_and_not_given_away() {
    let Some(m) = mount_for_nobody() else { return };
    let late = m.src.join("shared/late.txt");
    let script = format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups stat shared/late.txt >/dev/null 2>&1
         (umask 077; echo {SECRET} > {late})
         setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'exec 3<>shared/late.txt && cat <&3' 2>&1
         true",
        late = late.display()
    );
    let seen = m.ok(&script);
    assert!(
        !seen.contains(SECRET),
        "root's new file was opened for nobody: {seen}"
    );
    assert_eq!(fs::metadata(&late).unwrap().uid(), 0, "given to nobody");
    assert_eq!(fs::metadata(&late).unwrap().mode() & 0o777, 0o600);
    // `>` (O_TRUNC): refused before anything happens to the file.
    let truncated = m.src.join("shared/late2.txt");
    m.ok(&format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups stat shared/late2.txt >/dev/null 2>&1
         (umask 077; echo {SECRET} > {late})
         setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'echo mine > shared/late2.txt' 2>&1
         true",
        late = truncated.display()
    ));
    assert_eq!(
        fs::read_to_string(&truncated).unwrap(),
        format!("{SECRET}\n"),
        "root's new file was truncated for nobody"
    );
}

/// A transaction by a user without CAP_FSETID clears set-user-ID, and
/// set-group-ID on a group-executable file, as the kernel does on a write.
#[test]
fn an_edit_by_another_user_clears_set_id_bits_as_a_native_write_does() {
    let Some(m) = mount_for_nobody() else { return };
    for (name, mode, after) in [("suid.sh", 0o4777, 0o777), ("sgid.sh", 0o2777, 0o777)] {
        let path = m.src.join("shared").join(name);
        fs::write(&path, "#!/bin/sh\n").unwrap();
        chmod(&path, mode);
        let out = as_nobody(&m, &format!("{} > shared/{name}.edit", payload("echo hi")));
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(fs::read_to_string(&path).unwrap(), "#!/bin/sh\necho hi\n");
        let now = fs::metadata(&path).unwrap();
        assert_eq!(now.mode() & 0o7777, after, "{name}");
        assert_eq!(now.uid(), 0, "{name} keeps its owner");
    }
    // Root keeps them, as natively.
    let path = m.src.join("shared/suid.sh");
    chmod(&path, 0o4755);
    m.ok(&format!("{} > shared/suid.sh.edit", payload("echo root")));
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, 0o4755);
}

/// Nobody may remove root's private file from a directory everyone may write
/// (as natively), but not undo that removal through `.editfs/undo`: the version
/// was never nobody's to read. Root's undo brings the file back as it was,
/// root's and 0600, never as a new file nobody could read.
#[test]
fn an_undone_removal_brings_a_private_file_back_private() {
    let Some(m) = mount_for_nobody() else { return };
    let path = m.src.join("shared/secret.txt");
    let out = as_nobody(
        &m,
        "rm -f shared/secret.txt && echo 'shared/secret.txt --force' | cat > .editfs/undo; rc=$?; cat shared/secret.txt .editfs/status; exit $rc",
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        !text(&out).contains(SECRET),
        "root's file leaked: {}",
        text(&out)
    );
    assert!(!path.exists(), "restored for nobody");
    m.ok("echo shared/secret.txt > .editfs/undo");
    let back = fs::metadata(&path).unwrap();
    assert_eq!(back.mode() & 0o7777, 0o600);
    assert_eq!((back.uid(), back.gid()), (0, 0));
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("#!/bin/sh\n{SECRET}\n")
    );
}

/// A file a transaction makes for nobody is nobody's, as a file nobody made
/// natively would be: nobody can then edit and remove it, and root's files stay
/// root's. The directories made for it are nobody's too.
#[test]
fn a_file_a_transaction_creates_belongs_to_the_user_who_sent_it() {
    let Some(m) = mount_for_nobody() else { return };
    let out = as_nobody(
        &m,
        "printf '%s\\n' nb/new.txt '<<<<<<< SEARCH' '=======' 'one' '>>>>>>> REPLACE' nb/sub/deep.txt '<<<<<<< SEARCH' '=======' 'two' '>>>>>>> REPLACE' | cat > .editfs/edit",
    );
    assert!(out.status.success(), "{}", text(&out));
    for rel in ["nb/new.txt", "nb/sub", "nb/sub/deep.txt"] {
        let meta = fs::metadata(m.src.join(rel)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY), "{rel}");
    }
    assert_eq!(
        fs::metadata(m.src.join("nb/new.txt")).unwrap().mode() & 0o7777,
        0o644
    );
    let again = as_nobody(
        &m,
        "printf '%s\\n' '<<<<<<< SEARCH' 'one' '=======' 'uno' '>>>>>>> REPLACE' | cat > nb/new.txt.edit && rm nb/new.txt",
    );
    assert!(again.status.success(), "{}", text(&again));
    // Root's new files stay root's.
    m.ok("printf '%s\\n' shared/rootnew.txt '<<<<<<< SEARCH' '=======' 'r' '>>>>>>> REPLACE' | cat > .editfs/edit");
    assert_eq!(
        fs::metadata(m.src.join("shared/rootnew.txt"))
            .unwrap()
            .uid(),
        0
    );
}

/// `F.edit` of a file that does not exist yet takes an edit from any user who
/// may create F in its directory, as `.editfs/edit` does, and from no other.
#[test]
fn a_user_creates_a_file_through_its_edit_file_where_it_may_create_files() {
    let Some(m) = mount_for_nobody() else { return };
    let create = "printf '%s\\n' '<<<<<<< SEARCH' '=======' 'mine' '>>>>>>> REPLACE' | cat >";
    let own = as_nobody(&m, &format!("{create} nb/fresh.txt.edit"));
    assert!(own.status.success(), "{}", text(&own));
    assert_eq!(m.src_file("nb/fresh.txt"), b"mine\n");
    let shared = as_nobody(&m, &format!("{create} shared/fresh.txt.edit"));
    assert!(shared.status.success(), "{}", text(&shared));
    assert_eq!(
        fs::metadata(m.src.join("shared/fresh.txt")).unwrap().uid(),
        NOBODY
    );
    // The project's top directory is root's 0755: nobody may not create there.
    let refused = as_nobody(&m, &format!("{create} fresh.txt.edit"));
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("Permission denied"),
        "{}",
        text(&refused)
    );
    assert!(!m.src.join("fresh.txt").exists());
}

/// Becomes nobody on this thread alone (Linux keeps ids per thread).
fn become_nobody() {
    let gid = rustix::process::Gid::from_raw(NOBODY);
    rustix::thread::set_thread_groups(&[]).unwrap();
    rustix::thread::set_thread_res_gid(gid, gid, gid).unwrap();
    let uid = rustix::process::Uid::from_raw(NOBODY);
    rustix::thread::set_thread_res_uid(uid, uid, uid).unwrap();
}

/// Nobody gives its 0666 file `f` a second name (so a commit rewrites it in
/// place), then keeps exchanging `f` with root's 0600 `R` in SOURCE while
/// editing `f.edit` through the mount: every edit lands in nobody's file or
/// nowhere. Root's file keeps its bytes, its mode and its owner.
#[test]
fn a_hard_linked_file_exchanged_with_roots_file_mid_edit_is_never_written_for_it() {
    let Some(m) = mount_for_nobody() else { return };
    let shared = m.src.join("shared");
    let root_file = shared.join("R");
    fs::write(&root_file, format!("#!/bin/sh\n{SECRET}\n")).unwrap();
    chmod(&root_file, 0o600);
    let root_ino = fs::metadata(&root_file).unwrap().ino();
    let mine = as_nobody(
        &m,
        "printf '#!/bin/sh\\nnobody\\n' > shared/f && chmod 666 shared/f && ln shared/f shared/f2",
    );
    assert!(mine.status.success(), "{}", text(&mine));
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let (stop, dir) = (stop.clone(), shared.clone());
        std::thread::spawn(move || {
            become_nobody();
            let mut swaps = 0u64;
            for _ in 0..20_000_000u64 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let swapped = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    dir.join("f"),
                    rustix::fs::CWD,
                    dir.join("R"),
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                swaps += u64::from(swapped.is_ok());
            }
            swaps
        })
    };
    // A new line each time: an edit already applied changes nothing.
    let edit = "printf '%s\\n' '<<<<<<< SEARCH' '#!/bin/sh' '=======' '#!/bin/sh' \"ATTACK $i\" '>>>>>>> REPLACE' | cat";
    let out = as_nobody(
        &m,
        &format!(
            "for i in $(seq 1 300); do {{ {edit} > shared/f.edit; }} 2>/dev/null; done; cat shared/f2"
        ),
    );
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert!(swaps > 100, "the race did not run ({swaps} exchanges)");
    let roots: Vec<_> = ["R", "f"]
        .iter()
        .map(|n| shared.join(n))
        .filter(|p| fs::metadata(p).is_ok_and(|m| m.ino() == root_ino))
        .collect();
    assert_eq!(roots.len(), 1, "root's file lost its name");
    let meta = fs::metadata(&roots[0]).unwrap();
    assert_eq!(
        fs::read_to_string(&roots[0]).unwrap(),
        format!("#!/bin/sh\n{SECRET}\n"),
        "root's file was written for nobody"
    );
    assert_eq!(meta.mode() & 0o7777, 0o600, "root's file changed mode");
    assert_eq!(meta.uid(), 0);
    assert!(
        text(&out).contains("ATTACK"),
        "no edit went through at all: the test proves nothing: {}",
        text(&out)
    );
}

/// Nobody, root in a user namespace of its own (`unshare -U -r`), holds every
/// capability there but none over root's files: its edit of root's set-user-ID
/// file clears the bit, as its native write from the same namespace does.
#[test]
fn capabilities_held_in_a_user_namespace_do_not_keep_set_id_bits() {
    let Some(m) = mount_for_nobody() else { return };
    let in_ns = |script: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["unshare", "-U", "-r", "bash", "-c", script])
            .current_dir(&m.mnt)
            .output()
            .unwrap()
    };
    let probe = in_ns("grep CapEff /proc/self/status");
    assert!(
        probe.status.success() && !text(&probe).contains("0000000000000000"),
        "no user namespace with capabilities here: {}",
        text(&probe)
    );
    for name in ["native.sh", "edited.sh"] {
        let path = m.src.join("shared").join(name);
        fs::write(&path, "#!/bin/sh\n").unwrap();
        std::os::unix::fs::chown(&path, Some(0), Some(NOBODY)).unwrap();
        chmod(&path, 0o4775);
    }
    let native = in_ns("echo 'echo hi' >> shared/native.sh");
    assert!(native.status.success(), "{}", text(&native));
    let native = fs::metadata(m.src.join("shared/native.sh")).unwrap();
    assert_eq!(native.mode() & 0o7777, 0o775, "the kernel keeps the bit");
    // A file with a second name is written in place, as the caller.
    let linked = m.src.join("shared/linked.sh");
    fs::copy(m.src.join("shared/edited.sh"), &linked).unwrap();
    std::os::unix::fs::chown(&linked, Some(0), Some(NOBODY)).unwrap();
    chmod(&linked, 0o4775);
    fs::hard_link(&linked, m.src.join("shared/linked2.sh")).unwrap();
    for name in ["edited.sh", "linked.sh"] {
        let out = in_ns(&format!("{} > shared/{name}.edit", payload("echo hi")));
        assert!(out.status.success(), "{}", text(&out));
        let path = m.src.join("shared").join(name);
        assert_eq!(fs::read_to_string(&path).unwrap(), "#!/bin/sh\necho hi\n");
        let edited = fs::metadata(&path).unwrap();
        assert_eq!(
            edited.mode() & 0o7777,
            0o775,
            "{name}: the set-user-ID bit stayed"
        );
        assert_eq!((edited.uid(), edited.gid()), (0, NOBODY), "{name}");
    }
    assert_eq!(
        fs::metadata(m.src.join("shared/linked2.sh")).unwrap().ino(),
        fs::metadata(&linked).unwrap().ino()
    );
}

/// Sends a patch to `.editfs/edit` as nobody; the close's status and the report.
fn patch_as_nobody(m: &Mount, patch: &str) -> Output {
    as_nobody(
        m,
        &format!("printf '%s' '{patch}' | cat > .editfs/edit; rc=$?; cat .editfs/status; exit $rc"),
    )
}

fn delete_patch(rel: &str) -> String {
    format!("*** Begin Patch\n*** Delete File: {rel}\n*** End Patch\n")
}

fn move_patch(rel: &str, to: &str) -> String {
    format!("*** Begin Patch\n*** Update File: {rel}\n*** Move to: {to}\n*** End Patch\n")
}

/// A patch's delete or move of `rel` is refused as the native `rm` and `mv`
/// of nobody are, and leaves the file as it was.
fn refused_like_native(m: &Mount, rel: &str, why: &str) {
    let before = fs::read(m.src.join(rel)).unwrap();
    let to = format!("{rel}.moved");
    // Natively: in SOURCE itself, where the kernel checks ACLs too.
    let src = m.src.display();
    let native = as_nobody(m, &format!("cd {src} && rm -f {rel}; mv {rel} {to}"));
    assert!(
        text(&native).matches(why).count() == 2,
        "natively: {}",
        text(&native)
    );
    for patch in [delete_patch(rel), move_patch(rel, &to)] {
        let out = patch_as_nobody(m, &patch);
        assert!(!out.status.success(), "{patch}: {}", text(&out));
        assert!(text(&out).contains(why), "{patch}: {}", text(&out));
        assert_eq!(fs::read(m.src.join(rel)).unwrap(), before, "{patch}");
        assert!(!m.src.join(&to).exists(), "{patch}: moved");
    }
}

/// In a sticky directory everyone may write (`/tmp`'s 1777), nobody may not
/// remove or rename root's file, though it may write it: a patch's `*** Delete
/// File:` and `*** Move to:` are refused as `rm` and `mv` are.
#[test]
fn a_sticky_directory_keeps_roots_file_from_a_patchs_delete_and_move() {
    let Some(m) = mount_for_nobody() else { return };
    let tmp = m.src.join("tmp");
    fs::create_dir(&tmp).unwrap();
    chmod(&tmp, 0o1777);
    fs::write(tmp.join("root.txt"), "root's\n").unwrap();
    chmod(&tmp.join("root.txt"), 0o666);
    refused_like_native(&m, "tmp/root.txt", "Operation not permitted");
    // With an edit of nobody's own file in the same patch: all or nothing.
    let both = "*** Begin Patch\n*** Update File: nb/nb.txt\n@@\n-nobody'\\''s\n+ATTACK\n*** Delete File: tmp/root.txt\n*** End Patch\n";
    let out = patch_as_nobody(&m, both);
    assert!(!out.status.success(), "{}", text(&out));
    let why = text(&out);
    assert!(
        why.contains("tmp/root.txt") && why.contains("Operation not permitted"),
        "{why}"
    );
    assert_eq!(m.src_file("nb/nb.txt"), b"#!/bin/sh\nnobody's\n");
    assert!(tmp.join("root.txt").exists());
    // Nobody's own file there moves and goes.
    let own = as_nobody(&m, "echo mine > tmp/mine.txt");
    assert!(own.status.success(), "{}", text(&own));
    let moved = patch_as_nobody(&m, &move_patch("tmp/mine.txt", "tmp/moved.txt"));
    assert!(moved.status.success(), "{}", text(&moved));
    let gone = patch_as_nobody(&m, &delete_patch("tmp/moved.txt"));
    assert!(gone.status.success(), "{}", text(&gone));
    assert!(!tmp.join("mine.txt").exists() && !tmp.join("moved.txt").exists());
}

/// Nobody links root's 0666 file into a sticky directory (which
/// `fs.protected_hardlinks` allows, as nobody may read and write it): the
/// link is root's file, so nobody may not remove or rename it, natively or
/// through a patch.
#[test]
fn a_link_to_roots_file_in_a_sticky_directory_is_not_the_linkers_to_remove() {
    let Some(m) = mount_for_nobody() else { return };
    let tmp = m.src.join("tmp");
    fs::create_dir(&tmp).unwrap();
    chmod(&tmp, 0o1777);
    fs::write(m.src.join("shared/open.txt"), "root's\n").unwrap();
    chmod(&m.src.join("shared/open.txt"), 0o666);
    let linked = as_nobody(&m, "ln shared/open.txt tmp/link.txt");
    assert!(linked.status.success(), "{}", text(&linked));
    refused_like_native(&m, "tmp/link.txt", "Operation not permitted");
    assert_eq!(
        fs::metadata(m.src.join("shared/open.txt")).unwrap().nlink(),
        2
    );
}

/// Root's directory that nobody may not write keeps root's 0666 file from
/// nobody's delete and move, as natively.
#[test]
fn a_directory_the_caller_may_not_write_keeps_its_files() {
    let Some(m) = mount_for_nobody() else { return };
    let ro = m.src.join("ro");
    fs::create_dir(&ro).unwrap();
    chmod(&ro, 0o755);
    fs::write(ro.join("open.txt"), "root's\n").unwrap();
    chmod(&ro.join("open.txt"), 0o666);
    refused_like_native(&m, "ro/open.txt", "Permission denied");
}

/// POSIX ACLs count as natively: a directory whose ACL takes writing from
/// nobody keeps its files from nobody's delete and move, and a file whose ACL
/// takes writing from nobody is not edited for it.
#[test]
fn acls_deny_a_patch_what_they_deny_natively() {
    let Some(m) = mount_for_nobody() else { return };
    if Command::new("setfacl").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "setfacl is missing");
        eprintln!("no setfacl here (package acl); skipping");
        return;
    }
    let acl = m.src.join("acl");
    fs::create_dir(&acl).unwrap();
    chmod(&acl, 0o777);
    fs::write(acl.join("open.txt"), "#!/bin/sh\nroot's\n").unwrap();
    chmod(&acl.join("open.txt"), 0o666);
    let set = Command::new("setfacl")
        .args(["-m", "u:nobody:r-x"])
        .arg(&acl)
        .output()
        .unwrap();
    assert!(set.status.success(), "{}", text(&set));
    refused_like_native(&m, "acl/open.txt", "Permission denied");
    // Through the mount too: removing, renaming, linking and creating names.
    for direct in [
        "rm -f acl/open.txt",
        "mv acl/open.txt acl/moved.txt",
        "mv acl/open.txt shared/taken.txt",
        "ln nb/nb.txt acl/link.txt",
        "touch acl/new.txt",
        "mkdir acl/sub",
    ] {
        let out = as_nobody(&m, direct);
        assert!(!out.status.success(), "{direct}: {}", text(&out));
        assert!(
            text(&out).contains("Permission denied"),
            "{direct}: {}",
            text(&out)
        );
    }
    assert_eq!(fs::read_dir(&acl).unwrap().count(), 1);
    assert!(!m.src.join("shared/taken.txt").exists());
    let set = Command::new("setfacl")
        .args(["-m", "u:nobody:r--"])
        .arg(acl.join("open.txt"))
        .output()
        .unwrap();
    assert!(set.status.success(), "{}", text(&set));
    let edit = as_nobody(&m, &format!("{} > acl/open.txt.edit", payload("ATTACK")));
    assert!(!edit.status.success(), "{}", text(&edit));
    // truncate(2) by path, not by a descriptor (`truncate -s` opens the file).
    let by_path = "PATH=/usr/bin:/bin python3 -c 'import os; os.truncate(\"acl/open.txt\", 0)'";
    // An extended attribute is written as the file is: the ACL decides.
    let xattr = "python3 -c 'import os; os.setxattr(\"acl/open.txt\", \"user.pwn\", b\"1\")'";
    for write in ["echo ATTACK >> acl/open.txt", by_path, xattr] {
        let out = as_nobody(&m, write);
        assert!(
            text(&out).contains("Permission denied"),
            "{write}: {}",
            text(&out)
        );
    }
    assert_eq!(m.src_file("acl/open.txt"), b"#!/bin/sh\nroot's\n");
    // A file its bits show to everyone, and its ACL hides from nobody.
    let hidden = m.src.join("shared/hidden.txt");
    fs::write(&hidden, SECRET).unwrap();
    chmod(&hidden, 0o644);
    let set = Command::new("setfacl")
        .args(["-m", "u:nobody:---"])
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(set.status.success(), "{}", text(&set));
    let read = as_nobody(&m, "cat shared/hidden.txt");
    assert!(!text(&read).contains(SECRET), "{}", text(&read));
    assert!(text(&read).contains("Permission denied"), "{}", text(&read));
}

/// Root's own `editfs apply` is not switched to anyone: it rewrites a file
/// with two names in place and deletes another user's file from a sticky
/// directory, as root may natively.
#[test]
fn roots_own_apply_still_writes_linked_files_and_removes_from_sticky_directories() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("this test needs root; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    fs::create_dir(p.join(".editfs")).unwrap();
    fs::create_dir(p.join("tmp")).unwrap();
    chmod(&p.join("tmp"), 0o1777);
    fs::write(p.join("a.sh"), "#!/bin/sh\n").unwrap();
    chmod(&p.join("a.sh"), 0o4755);
    fs::hard_link(p.join("a.sh"), p.join("b.sh")).unwrap();
    fs::write(p.join("tmp/theirs.txt"), "nobody's\n").unwrap();
    chown_nobody(&p.join("tmp/theirs.txt"));
    let apply = |args: &[&str], stdin: &str| {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_editfs"))
            .arg("apply")
            .args(args)
            .current_dir(p)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    };
    apply(
        &["a.sh"],
        "<<<<<<< SEARCH\n#!/bin/sh\n=======\n#!/bin/sh\necho root\n>>>>>>> REPLACE\n",
    );
    assert_eq!(
        fs::read_to_string(p.join("b.sh")).unwrap(),
        "#!/bin/sh\necho root\n"
    );
    assert_eq!(
        fs::metadata(p.join("a.sh")).unwrap().mode() & 0o7777,
        0o4755
    );
    apply(&["--multi", "."], &delete_patch("tmp/theirs.txt"));
    assert!(!p.join("tmp/theirs.txt").exists());
}

/// Takes a file's append-only flag off when dropped, so the test's directory
/// can go even when the test fails.
struct AppendOnly(std::path::PathBuf);

impl AppendOnly {
    fn set(path: &Path) -> Option<AppendOnly> {
        let set = Command::new("chattr").arg("+a").arg(path).output().ok()?;
        set.status.success().then(|| AppendOnly(path.to_owned()))
    }
}

impl Drop for AppendOnly {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-a").arg(&self.0).output();
    }
}

/// A file only appended to (`chattr +a`) may not be rewritten, natively or by
/// a transaction, though its mode lets everyone write it: the kernel is asked
/// to open it for writing as the caller before anything is committed.
#[test]
fn an_append_only_file_is_not_rewritten_for_a_caller() {
    let Some(m) = mount_for_nobody() else { return };
    let path = m.src.join("shared/journal.sh");
    fs::write(&path, "#!/bin/sh\n").unwrap();
    chmod(&path, 0o666);
    let Some(_flag) = AppendOnly::set(&path) else {
        eprintln!("no append-only flag on this file system; skipping");
        return;
    };
    let src = m.src.display();
    let native = as_nobody(&m, &format!("echo x > {src}/shared/journal.sh"));
    assert!(
        text(&native).contains("Operation not permitted"),
        "{}",
        text(&native)
    );
    let out = as_nobody(
        &m,
        &format!(
            "{} > shared/journal.sh.edit; rc=$?; cat shared/journal.sh.status; exit $rc",
            payload("ATTACK")
        ),
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("permission_denied") || text(&out).contains("may not"),
        "{}",
        text(&out)
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "#!/bin/sh\n");
    // Appending is still what it allows.
    let appended = as_nobody(&m, "echo more >> shared/journal.sh");
    assert!(appended.status.success(), "{}", text(&appended));
}

/// A handle on nobody's own file, whose name a transaction's move then gives
/// to root's file: fchmod, fchown, futimens and fsetxattr through the handle
/// send no handle to the daemon, which acted by name, as root, on whatever
/// file held the name by then. Root's file became setuid root with nobody's
/// bytes in it (a root shell). Natively each is EPERM on root's file.
#[test]
fn a_change_through_a_handle_never_reaches_the_file_moved_onto_its_name() {
    let Some(m) = mount_for_nobody() else {
        return;
    };
    let shared = m.src.join("shared");
    fs::write(shared.join("open.txt"), "root's\n").unwrap();
    chmod(&shared.join("open.txt"), 0o666);
    for (i, change) in [
        "os.fchmod(h, 0o4755)",
        "os.fchown(h, -1, 65534)",
        "os.utime(h, (0, 0))",
        "os.setxattr(h, 'user.tag', b'x')",
    ]
    .iter()
    .enumerate()
    {
        let script = format!(
            r#"python3 - <<'PY'
import os
def tx(p):
    f = os.open(".editfs/edit", os.O_WRONLY | os.O_TRUNC)
    os.write(f, p.encode())
    os.close(f)
open("shared/e{i}", "w").write("mine\n")
h = os.open("shared/e{i}", os.O_RDONLY)
tx("*** Begin Patch\n*** Update File: shared/e{i}\n*** Move to: shared/m{i}\n*** End Patch\n")
tx("*** Begin Patch\n*** Update File: shared/open.txt\n*** Move to: shared/e{i}\n*** End Patch\n")
try:
    {change}
    print("changed")
except OSError as e:
    print("refused", e.errno)
tx("*** Begin Patch\n*** Update File: shared/e{i}\n*** Move to: shared/open.txt\n*** End Patch\n")
PY"#
        );
        let out = as_nobody(&m, &script);
        let said = text(&out);
        // Root's file is back at its name, unless the attack kept nobody from
        // moving it back.
        let roots = [shared.join("open.txt"), shared.join(format!("e{i}"))]
            .into_iter()
            .find(|p| p.exists())
            .unwrap();
        let meta = fs::metadata(&roots).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o666, "{change}: {said}");
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{change}: {said}");
        assert_ne!(meta.mtime(), 0, "{change}: {said}");
        assert!(xattr_of(&roots).is_none(), "{change}: {said}");
        assert_eq!(fs::read_to_string(&roots).unwrap(), "root's\n");
    }
}

/// The `user.tag` attribute of `path`, if it has one.
fn xattr_of(path: &Path) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 64];
    let n = rustix::fs::getxattr(path, "user.tag", &mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// A re-sent deletion is judged by the history, and only by the part of it
/// the caller may see: nobody's own patch sent twice is `already applied`,
/// but a deletion of root's private file, which root's patch removed, fails
/// for nobody exactly as one of a name that never existed, telling nothing.
#[test]
fn a_resent_deletion_is_a_replay_only_by_history_the_caller_may_see() {
    let Some(m) = mount_for_nobody() else { return };
    let own = delete_patch("nb/nb.txt");
    assert!(patch_as_nobody(&m, &own).status.success());
    let again = patch_as_nobody(&m, &own);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("an edit removed it"),
        "{}",
        text(&again)
    );
    let send = format!(
        "cat > .editfs/edit <<'PATCH'\n{}PATCH",
        delete_patch("shared/secret.txt")
    );
    assert!(m.sh(&send).status.success());
    assert!(!m.src.join("shared/secret.txt").exists());
    let hidden = patch_as_nobody(&m, &delete_patch("shared/secret.txt"));
    let never = patch_as_nobody(&m, &delete_patch("shared/never.txt"));
    assert!(!hidden.status.success(), "{}", text(&hidden));
    let plain = |o: &Output, name: &str| {
        text(o)
            .replace(name, "NAME")
            .replace(|c: char| c.is_ascii_digit(), "")
    };
    assert_eq!(
        plain(&hidden, "secret"),
        plain(&never, "never"),
        "a hidden history reads as none"
    );
}

/// `vault/` is root's 0700 directory, `vault/app.env` open to all by its own
/// bits; `acl/` is open by its bits but an ACL shuts nobody out of it. Natively
/// nobody reaches neither file: not by naming it in a multi-file payload or a
/// dry run, not through a symlink of its own, not with `cat` through the mount.
#[test]
fn a_file_in_a_directory_the_caller_may_not_search_is_out_of_reach_every_way() {
    let Some(m) = mount_for_nobody() else { return };
    for dir in ["vault", "acl"] {
        let d = m.src.join(dir);
        fs::create_dir(&d).unwrap();
        fs::write(d.join("app.env"), format!("PASSWORD={SECRET}\n")).unwrap();
        chmod(&d.join("app.env"), 0o666);
    }
    chmod(&m.src.join("vault"), 0o700);
    let out = Command::new("setfacl")
        .args(["-m", "u:nobody:---"])
        .arg(m.src.join("acl"))
        .output()
        .expect("setfacl (package acl) is installed");
    assert!(out.status.success(), "setfacl: {}", text(&out));
    for dir in ["vault", "acl"] {
        let rel = format!("{dir}/app.env");
        let link = format!("nb/{dir}-link");
        std::os::unix::fs::symlink(format!("../{rel}"), m.src.join(&link)).unwrap();
        std::os::unix::fs::lchown(m.src.join(&link), Some(NOBODY), Some(NOBODY)).unwrap();
        let patch = format!(
            "*** Begin Patch\n*** Update File: {rel}\n@@\n-PASSWORD={SECRET}\n+PASSWORD=mine\n*** End Patch\n"
        );
        let block =
            format!("<<<<<<< SEARCH\nPASSWORD={SECRET}\n=======\nPASSWORD=mine\n>>>>>>> REPLACE\n");
        let script = format!(
            "cat {rel}; ls {dir}; printf '%s' '{patch}' | cat > .editfs/dry-run; cat .editfs/status; \
             printf '%s' '{patch}' | cat > .editfs/edit; cat .editfs/status; \
             printf '%s' '{block}' | cat > {link}.edit; cat {link}.status; true"
        );
        let out = as_nobody(&m, &script);
        let said = text(&out);
        assert!(
            !said.contains(&format!("PASSWORD={SECRET}")),
            "{dir}: {said}"
        );
        assert_eq!(
            fs::read_to_string(m.src.join(&rel)).unwrap(),
            format!("PASSWORD={SECRET}\n"),
            "{dir}: {said}"
        );
    }
}

/// Whatever is or is not at a name in root's 0700 `rootdir/`, nobody learns
/// nothing from an edit through a symlink of its own to it, nor from a move
/// to it: natively every such attempt is EACCES. And root's report of its own
/// file stays root's.
#[test]
fn nothing_in_a_directory_the_caller_may_not_search_shows_through_links_or_moves() {
    let Some(m) = mount_for_nobody() else { return };
    fs::create_dir(m.src.join("rootdir/keys")).unwrap();
    m.ok("printf '<<<<<<< SEARCH\nnobody\n=======\nanybody\n>>>>>>> REPLACE\n' > nb/nb.txt.edit; true");
    fs::write(m.src.join("rootdir/plan.txt"), "token=1\n").unwrap();
    m.ok("printf '<<<<<<< SEARCH\ntoken=1\n=======\ntoken=2\n>>>>>>> REPLACE\n' > rootdir/plan.txt.edit");
    let roots_report = m.ok("head -1 rootdir/plan.txt.status");
    let answers: Vec<String> = ["plan.txt", "keys", "nothere"]
        .iter()
        .map(|name| {
            let out = as_nobody(
                &m,
                &format!(
                    "cd nb && ln -sf ../rootdir/{name} probe && \
                     printf '<<<<<<< SEARCH\nq\n=======\nr\n>>>>>>> REPLACE\n' | cat > probe.edit; \
                     echo rc=$?; sed -n '3,4p' probe.status"
                ),
            );
            text(&out)
        })
        .collect();
    assert!(answers[0].contains("ermission denied"), "{answers:?}");
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    assert_eq!(m.ok("head -1 rootdir/plan.txt.status"), roots_report);

    let moves: Vec<String> = ["plan.txt", "nothere.txt"]
        .iter()
        .flat_map(|name| {
            ["dry-run", "edit"].map(|to| {
                let out = as_nobody(
                    &m,
                    &format!(
                        "printf '*** Begin Patch\n*** Update File: nb/nb.txt\n*** Move to: rootdir/{name}\n@@\n-anybody\n+somebody\n*** End Patch\n' \
                         | cat > .editfs/{to}; echo rc=$?; grep -v '^tx\\|time' .editfs/status"
                    ),
                );
                untimed(&text(&out).replace(name, "NAME"))
            })
        })
        .collect();
    assert!(moves[0].contains("rc=1"), "{moves:?}");
    assert_eq!(moves[0], moves[2], "dry runs tell the names apart");
    assert_eq!(moves[1], moves[3], "edits tell the names apart");
    assert!(!m.src.join("rootdir/nothere.txt").exists());
    assert_eq!(
        fs::read_to_string(m.src.join("rootdir/plan.txt")).unwrap(),
        "token=2\n"
    );
}

/// Nobody's symlink to root's private file (0600, in a directory everyone may
/// write): nobody's edit through it is refused, and root's `F.status` still
/// shows root's own latest transaction, not nobody's refusal.
#[test]
fn a_refused_edit_through_a_link_leaves_the_files_report_as_it_was() {
    let Some(m) = mount_for_nobody() else { return };
    m.ok(&format!(
        "printf '<<<<<<< SEARCH\\n{SECRET}\\n=======\\nredacted\\n>>>>>>> REPLACE\\n' > shared/secret.txt.edit"
    ));
    let roots = m.ok("head -1 shared/secret.txt.status");
    assert!(roots.starts_with("OK"), "{roots}");
    let link = m.src.join("nb/l");
    let target = Path::new("..").join("shared").join("secret.txt");
    std::os::unix::fs::symlink(target, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let out = as_nobody(
        &m,
        "printf '<<<<<<< SEARCH\nredacted\n=======\nmine\n>>>>>>> REPLACE\n' | cat > nb/l.edit; echo rc=$?",
    );
    assert!(text(&out).contains("rc=1"), "{}", text(&out));
    assert_eq!(m.ok("head -1 shared/secret.txt.status"), roots);
}

/// `tmp/out.txt`, an empty file nobody planted in the sticky world-writable
/// `tmp/`, with `fs.protected_regular` on while the guard lives.
fn planted_in_sticky(m: &common::Mount) -> (std::path::PathBuf, common::Sysctl) {
    let tmp = m.src.join("tmp");
    fs::create_dir(&tmp).unwrap();
    chmod(&tmp, 0o1777);
    as_nobody(m, "touch tmp/out.txt && chmod 666 tmp/out.txt");
    (tmp, common::Sysctl::set("protected_regular", "1"))
}

/// Nobody plants an empty file in a sticky world-writable directory where
/// root's agent will make its output: with `fs.protected_regular`, root's
/// native `>` into it fails, and so does root's "create" (an empty SEARCH),
/// which would otherwise write root's text into nobody's file.
#[test]
fn a_create_over_another_users_planted_file_is_refused_as_protected_regular_refuses_it() {
    let Some(m) = mount_for_nobody() else { return };
    let (tmp, _on) = planted_in_sticky(&m);
    assert!(
        !m.sh("echo native > tmp/out.txt").status.success(),
        "the kernel refuses root's O_CREAT natively"
    );
    // Opened without O_CREAT, which the kernel would refuse on the control
    // file itself (it shows the planted file's owner).
    let made = m.sh(&format!(
        "python3 -c \"import os; fd = os.open('tmp/out.txt.edit', os.O_WRONLY | os.O_TRUNC); \
         os.write(fd, b'<<<<<<< SEARCH\\n=======\\n{SECRET}\\n>>>>>>> REPLACE\\n'); os.close(fd)\""
    ));
    assert!(!made.status.success(), "{}", text(&made));
    assert_eq!(fs::read_to_string(tmp.join("out.txt")).unwrap(), "");
}

/// As above, through a multi-file payload: root's `*** Add File:` over nobody's
/// planted empty file is the same `O_CREAT` open, refused the same way.
#[test]
fn an_add_file_over_another_users_planted_file_is_refused_as_protected_regular_refuses_it() {
    let Some(m) = mount_for_nobody() else { return };
    let (tmp, _on) = planted_in_sticky(&m);
    m.sh(&format!(
        "printf '*** Begin Patch\\n*** Add File: tmp/out.txt\\n+{SECRET}\\n*** End Patch\\n' > .editfs/edit"
    ));
    assert_eq!(fs::read_to_string(tmp.join("out.txt")).unwrap(), "");
    let status = m.ok("cat .editfs/status");
    assert!(
        status.contains("error (permission_denied): tmp/out.txt"),
        "{status}"
    );
}

/// `report` without the id and time each heading line ends with.
fn untimed(report: &str) -> String {
    report
        .lines()
        .map(|l| l.find(" (tx ").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}
