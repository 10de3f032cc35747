//! Kept versions, history and undo of changes made through a real mount with
//! plain shell commands: removals, direct writes, ignored paths, `.editfs/undo`.

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::Mount;

fn project(src: &Path) {
    fs::create_dir_all(src.join("lib/deep")).unwrap();
    fs::write(src.join("lib/util.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(src.join("lib/deep/a.txt"), "alpha\n").unwrap();
    fs::write(src.join("lib/deep/b.txt"), "beta\n").unwrap();
    fs::write(src.join(".gitignore"), "/target\n*.log\n").unwrap();
    fs::create_dir_all(src.join(".git")).unwrap();
    fs::write(src.join(".git/config"), "[core]\n").unwrap();
}

macro_rules! mount {
    ($($arg:expr),*) => {
        match Mount::start(&[$($arg),*], project) {
            Some(m) => m,
            None => return,
        }
    };
}

/// The log as the state directory holds it, once the mount filed its removals.
fn log(m: &Mount) -> Vec<serde_json::Value> {
    filed(&m.src.join(".editfs"));
    fs::read_to_string(m.src.join(".editfs/log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The log once it holds `n` lines (or after 5 s, as it is then). A direct
/// write whose descriptor another process may still hold is recorded at the
/// file's release, which the kernel sends after the last `close(2)` returned.
fn log_of(m: &Mount, n: usize) -> Vec<serde_json::Value> {
    let began = std::time::Instant::now();
    loop {
        let lines = log(m);
        if lines.len() >= n || began.elapsed() > std::time::Duration::from_secs(5) {
            return lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Waits until the mount has filed the removals made through it (in the
/// background: see the store's removals.rs) in the state directory `state`.
fn filed(state: &Path) {
    assert!(
        editfs_store::View::new(state).wait_filed(std::time::Duration::from_secs(20)),
        "removals not filed"
    );
}

fn editfs(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_file_removed_through_the_mount_can_be_restored() {
    let m = mount!();
    m.ok("rm lib/util.txt");
    assert!(!m.src.join("lib/util.txt").exists());
    assert_eq!(
        m.ok("cat .editfs/snapshots/lib/util.txt/*"),
        "one\ntwo\nthree\n"
    );
    let history = m.ok("cat .editfs/history");
    assert!(
        history.contains("delete") && history.contains("+0 -3"),
        "{history}"
    );
    m.ok("echo lib/util.txt > .editfs/undo");
    assert!(m.ok("cat .editfs/status").starts_with("OK lib/util.txt"));
    assert_eq!(m.ok("cat lib/util.txt"), "one\ntwo\nthree\n");
}

#[test]
fn a_removed_tree_comes_back_file_by_file_with_its_directories() {
    let m = mount!();
    m.ok("rm -r lib/deep");
    assert!(!m.src.join("lib/deep").exists());
    let src = m.src.to_str().unwrap();
    let deletes: Vec<u64> = log(&m)
        .iter()
        .filter(|l| l["kind"] == "delete")
        .map(|l| l["tx"].as_u64().unwrap())
        .collect();
    assert_eq!(deletes.len(), 2, "{:?}", log(&m));
    for tx in deletes {
        editfs(&["undo", src, "--tx", &tx.to_string()]);
    }
    assert_eq!(m.ok("cat lib/deep/a.txt lib/deep/b.txt"), "alpha\nbeta\n");
}

#[test]
fn a_removal_links_the_file_into_the_store_instead_of_copying_it() {
    let m = mount!();
    let before = fs::metadata(m.src.join("lib/util.txt")).unwrap();
    m.ok("rm lib/util.txt");
    filed(&m.src.join(".editfs"));
    let kept = m.src.join(".editfs/snapshots/lib/util.txt");
    let snapshot = fs::read_dir(&kept).unwrap().next().unwrap().unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&snapshot.metadata().unwrap());
    assert_eq!(
        ino,
        std::os::unix::fs::MetadataExt::ino(&before),
        "the removed inode itself is kept"
    );
}

#[test]
fn removals_respect_the_size_limit_and_exclusions() {
    let m = mount!("--snapshot-max-size", "4", "--no-snapshot", "*.tmp");
    m.ok("echo scratch > x.tmp && rm x.tmp lib/util.txt");
    assert!(!m.ok("ls .editfs/snapshots").contains("x.tmp"));
    assert!(!m.src.join(".editfs/snapshots/lib/util.txt").exists());
    let history = m.ok("cat .editfs/history");
    assert!(history.contains("skipped"), "{history}");
    let tx = log(&m)[0]["tx"].as_u64().unwrap().to_string();
    let shown = editfs(&["show", m.src.to_str().unwrap(), &tx]);
    assert!(
        shown.contains("removal") && shown.contains("over the size limit"),
        "{shown}"
    );
}

#[test]
fn a_direct_write_shows_its_real_line_counts_and_diff() {
    let m = mount!();
    m.ok("sed -i 's/two/TWO/' lib/util.txt && printf 'four\\nfive\\n' >> lib/util.txt");
    log_of(&m, 2);
    let history = m.ok("cat .editfs/history");
    let direct: Vec<&str> = history.lines().filter(|l| l.contains("direct")).collect();
    assert_eq!(direct.len(), 2, "{history}");
    assert!(direct[0].contains("+1 -1"), "{history}");
    assert!(direct[1].contains("+2 -0"), "{history}");
    let tx = log(&m)[0]["tx"].as_u64().unwrap().to_string();
    let shown = editfs(&["show", m.src.to_str().unwrap(), &tx]);
    assert!(shown.contains("-two\n+TWO"), "{shown}");
    // An undo of the older write goes over the newer one: both were recorded.
    m.ok(&format!("echo 'lib/util.txt {tx}' > .editfs/undo"));
    assert_eq!(m.ok("cat lib/util.txt"), "one\ntwo\nthree\n");
}

/// Lines added and removed by the direct writes the log holds.
fn direct_counts(m: &Mount) -> Vec<(u64, u64)> {
    log(m)
        .iter()
        .filter(|e| e["kind"] == "direct")
        .map(|e| {
            let f = &e["files"][0];
            (
                f["lines_added"].as_u64().unwrap_or(0),
                f["lines_removed"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// The kernel sends a file's release after the writer's `close(2)` has
/// returned: the write is recorded at the close, so a command run right after
/// it finds it (failed 30 times out of 30 when recorded at the release).
#[test]
fn a_direct_write_is_recorded_when_its_close_returns() {
    let m = mount!();
    for i in 1..=30 {
        m.ok("echo x >> lib/util.txt");
        assert_eq!(direct_counts(&m).len(), i, "after write {i}");
    }
    // A forked child keeps the descriptor and writes after its parent's close:
    // the one line comes at the last close, with both writes in it.
    m.ok("exec 3>>lib/util.txt; (sleep 0.3; echo late >&3) & echo early >&3; exec 3>&-; wait");
    let counts = direct_counts(&m);
    assert_eq!(counts.len(), 31, "{counts:?}");
    assert_eq!(counts[30], (2, 0), "{counts:?}");
    m.ok("echo lib/util.txt > .editfs/undo");
    assert!(m.ok("tail -n 1 lib/util.txt") == "x\n");
}

#[test]
fn git_files_and_ignored_paths_keep_no_pre_image() {
    let m = mount!();
    m.ok("mkdir -p target/debug && echo a > target/debug/out && echo b > target/debug/out");
    m.ok("echo x > build.log && echo y > build.log");
    m.ok("echo '[user]' >> .git/config && rm target/debug/out");
    m.ok("echo 1 >> lib/util.txt");
    log_of(&m, 1);
    let kept = m.ok("cd .editfs/snapshots && find . -type f");
    assert!(kept.contains("lib/util.txt"), "{kept}");
    for ignored in ["target", "build.log", ".git"] {
        assert!(!kept.contains(ignored), "{ignored}: {kept}");
    }
    assert_eq!(log(&m).len(), 1, "{:?}", log(&m));
}

/// A repository nested in SOURCE (a vendored clone, a crate checked out
/// beside the project) is git's too: every `git status` in it makes and removes
/// `.git/index.lock`, and none of that is the user's history.
#[test]
fn a_nested_repository_s_git_files_keep_no_pre_image() {
    let m = mount!();
    m.ok("mkdir -p vendor/lib/.git && echo '[core]' > vendor/lib/.git/config");
    m.ok("cd vendor/lib && : > .git/index.lock && echo '[user]' >> .git/config && rm .git/index.lock");
    m.ok("echo 1 >> lib/util.txt");
    log_of(&m, 1);
    let kept = m.ok("cd .editfs/snapshots && find . -type f");
    assert!(kept.contains("lib/util.txt"), "{kept}");
    assert!(!kept.contains(".git"), "{kept}");
    assert_eq!(log(&m).len(), 1, "{:?}", log(&m));
}

#[test]
fn snapshot_ignored_includes_ignored_paths_but_never_git() {
    let m = mount!("--snapshot-ignored");
    m.ok("mkdir -p target && echo a > target/out && echo b > target/out");
    m.ok("echo '[user]' >> .git/config");
    let kept = m.ok("cd .editfs/snapshots && find . -type f");
    assert!(kept.contains("target/out"), "{kept}");
    assert!(!kept.contains(".git"), "{kept}");
}

#[test]
fn undo_tx_from_inside_restores_a_multi_file_transaction() {
    let m = mount!();
    m.ok("printf 'lib/util.txt\\n<<<<<<< SEARCH\\none\\n=======\\n1\\n>>>>>>> REPLACE\\nlib/deep/a.txt\\n<<<<<<< SEARCH\\nalpha\\n=======\\nA\\n>>>>>>> REPLACE\\n' > .editfs/edit");
    assert_eq!(m.ok("cat lib/deep/a.txt"), "A\n");
    m.ok("echo '--tx 1' > .editfs/undo");
    let status = m.ok("cat .editfs/status");
    assert!(status.starts_with("OK 2 file(s)"), "{status}");
    assert_eq!(
        m.ok("cat lib/util.txt lib/deep/a.txt"),
        "one\ntwo\nthree\nalpha\n"
    );
    assert!(
        m.ok("cat lib/deep/a.txt.status")
            .contains("before transaction 1"),
        "each file's status shows the undo"
    );
    // A request that cannot be read is numbered and logged like any other.
    assert!(!m.sh("echo 'a b c' | cat > .editfs/undo").status.success());
    let status: serde_json::Value = serde_json::from_str(&m.ok("cat .editfs/status.json")).unwrap();
    assert_eq!(
        (status["outcome"].as_str(), status["tx"].as_u64()),
        (Some("rejected"), Some(3))
    );
    let last = log(&m).pop().unwrap();
    assert_eq!(
        (last["tx"].as_u64(), last["kind"].as_str()),
        (Some(3), Some("undo"))
    );
    // So is a rewind's, as a rewind.
    assert!(!m.sh("echo '--to' | cat > .editfs/rewind").status.success());
    let last = log(&m).pop().unwrap();
    assert_eq!(
        (
            last["tx"].as_u64(),
            last["kind"].as_str(),
            last["outcome"].as_str()
        ),
        (Some(4), Some("rewind"), Some("rejected"))
    );
}

#[test]
fn history_and_show_work_on_the_mount_point_without_writing() {
    let m = mount!();
    m.ok("sed -i 's/two/2/' lib/util.txt");
    let mnt = m.mnt.to_str().unwrap();
    let h = editfs(&["history", mnt, "./lib/util.txt"]);
    assert_eq!(h.lines().count(), 2, "{h}");
    let abs = m.mnt.join("lib/util.txt");
    let h = editfs(&["history", mnt, abs.to_str().unwrap()]);
    assert_eq!(h.lines().count(), 2, "{h}");
    let tx = log(&m)[0]["tx"].as_u64().unwrap().to_string();
    let shown = editfs(&["show", mnt, &tx]);
    assert!(shown.contains("-two\n+2"), "{shown}");
    let undo = Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(["undo", mnt, "lib/util.txt"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&undo.stderr);
    assert!(
        !undo.status.success() && said.contains(".editfs/undo"),
        "undo on a mount point says how to undo through it: {said}"
    );
}

#[test]
fn a_removal_is_copied_when_the_store_is_on_another_file_system() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("SKIPPING: no /dev/shm for a state directory on another file system");
        return;
    }
    let state = tempfile::tempdir_in(shm).unwrap();
    let m = mount!("--state-dir", state.path().to_str().unwrap());
    let before = fs::metadata(m.src.join("lib/util.txt")).unwrap();
    m.ok("rm lib/util.txt");
    filed(state.path());
    let kept = state.path().join("snapshots/lib/util.txt");
    let snapshot = fs::read_dir(&kept).unwrap().next().unwrap().unwrap().path();
    assert_eq!(fs::read_to_string(&snapshot).unwrap(), "one\ntwo\nthree\n");
    if fs::metadata(&snapshot).unwrap().dev() != before.dev() {
        assert_ne!(fs::metadata(&snapshot).unwrap().ino(), before.ino());
    }
    m.ok("echo lib/util.txt > .editfs/undo");
    assert_eq!(m.ok("cat lib/util.txt"), "one\ntwo\nthree\n");
}

#[test]
fn a_clean_unmount_leaves_no_record_in_the_journal() {
    // The state directory outlives the mount's own temporary directory.
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("state");
    let Some(m) = Mount::start(&["--state-dir", dir.to_str().unwrap()], project) else {
        return;
    };
    m.ok("printf '<<<<<<< SEARCH\\none\\n=======\\nuno\\n>>>>>>> REPLACE\\n' > lib/util.txt.edit");
    assert_eq!(m.src_file("lib/util.txt"), b"uno\ntwo\nthree\n");
    let status = m.stop(rustix::process::Signal::TERM);
    assert!(status.success(), "{status}");
    assert_eq!(
        fs::read_dir(dir.join("journal")).unwrap().count(),
        0,
        "the final checkpoint did not run at unmount"
    );
}

#[test]
fn an_editor_save_that_moves_the_file_away_keeps_its_history_and_undo() {
    let m = mount!();
    m.ok("printf '<<<<<<< SEARCH\\none\\n=======\\nuno\\n>>>>>>> REPLACE\\n' > lib/util.txt.edit");
    m.ok("cd lib && mv util.txt util.txt~ && cp util.txt~ util.txt && echo x >> util.txt && rm util.txt~");
    assert_eq!(m.src_file("lib/util.txt"), b"uno\ntwo\nthree\nx\n");
    let status = m.ok("cat lib/util.txt.status");
    assert!(!status.contains("No transaction has run"), "{status}");
    m.ok("echo lib/util.txt | cat > .editfs/undo");
    assert_eq!(m.src_file("lib/util.txt"), b"uno\ntwo\nthree\n");
}

#[test]
fn a_save_that_writes_a_new_file_in_one_go_is_undone_to_the_content_before_it() {
    let m = mount!();
    m.ok("printf '<<<<<<< SEARCH\\none\\n=======\\nuno\\n>>>>>>> REPLACE\\n' > lib/util.txt.edit");
    m.ok("cd lib && mv util.txt util.txt~ && sed s/two/dos/ util.txt~ > util.txt && rm util.txt~");
    assert_eq!(m.src_file("lib/util.txt"), b"uno\ndos\nthree\n");
    m.ok("echo lib/util.txt | cat > .editfs/undo");
    assert_eq!(m.src_file("lib/util.txt"), b"uno\ntwo\nthree\n");
    m.ok("echo lib/util.txt | cat > .editfs/undo");
    assert_eq!(
        m.src_file("lib/util.txt"),
        b"uno\ndos\nthree\n",
        "the undo is undone"
    );
}

#[test]
fn a_file_removed_and_written_again_through_the_mount_is_undone_like_a_replacement() {
    let m = mount!();
    m.ok("printf '<<<<<<< SEARCH\\none\\n=======\\nuno\\n>>>>>>> REPLACE\\n' > lib/util.txt.edit");
    // What `git stash` and `git stash pop` do to a file: unlink, then create.
    m.ok("cd lib && rm util.txt && printf 'one\\ntwo\\nthree\\n' > util.txt");
    m.ok("cd lib && rm util.txt && printf 'uno\\ntwo\\nthree\\n' > util.txt");
    m.ok("echo lib/util.txt | cat > .editfs/undo");
    assert_eq!(
        m.src_file("lib/util.txt"),
        b"one\ntwo\nthree\n",
        "the pop is undone"
    );
}

#[test]
fn a_file_moved_through_the_mount_onto_a_removed_name_is_recorded_as_created_there() {
    let m = mount!();
    m.ok("cd lib && rm util.txt && printf 'new\\n' > tmp && mv tmp util.txt");
    let tx = log(&m)
        .iter()
        .find(|e| e["kind"] == "delete")
        .and_then(|e| e["tx"].as_u64())
        .unwrap();
    let status = m.ok("echo lib/util.txt | cat > .editfs/undo; cat .editfs/status");
    assert!(
        status.contains("removed lib/util.txt: transaction"),
        "{status}"
    );
    assert!(
        !m.src.join("lib/util.txt").exists(),
        "the file the move made goes"
    );
    assert!(!m.src.join("lib/tmp").exists());
    m.ok(&format!("echo 'lib/util.txt {tx}' | cat > .editfs/undo"));
    assert_eq!(m.src_file("lib/util.txt"), b"one\ntwo\nthree\n");
}

#[test]
fn a_file_made_beside_the_mount_onto_a_removed_name_is_named_as_created_again_with_the_command_to_force()
 {
    let m = mount!();
    m.ok("rm lib/util.txt");
    let tx = log(&m)
        .iter()
        .find(|e| e["kind"] == "delete")
        .and_then(|e| e["tx"].as_u64())
        .unwrap();
    fs::write(m.src.join("lib/util.txt"), "new\n").unwrap();
    let out = m.sh("echo lib/util.txt | cat > .editfs/undo");
    assert!(!out.status.success());
    let status = m.ok("cat .editfs/status");
    assert!(
        status.contains(&format!("created again after transaction {tx}"))
            && status.contains("echo 'lib/util.txt --force' | cat > .editfs/undo"),
        "{status}"
    );
    m.ok("echo 'lib/util.txt --force' | cat > .editfs/undo");
    assert_eq!(m.src_file("lib/util.txt"), b"one\ntwo\nthree\n");
}

/// The niceness of each of `pid`'s threads, by thread name.
fn niceness(pid: u32) -> Vec<(String, i64)> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flatten()
        .filter_map(|t| {
            let stat = fs::read_to_string(t.path().join("stat")).ok()?;
            // Fields after the name, which stands in parentheses: the state is
            // the 3rd field of stat(5) and the niceness the 19th.
            let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            let nice = rest.split(' ').nth(16)?.parse().ok()?;
            Some((name.to_owned(), nice))
        })
        .collect()
}

#[test]
fn the_removal_filer_yields_the_cpu_to_the_requests_of_the_mount() {
    let m = mount!();
    m.ok("rm lib/deep/a.txt");
    let threads = niceness(m.pid().unwrap());
    let of = |prefix: &str| {
        threads
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(_, nice)| *nice)
            .collect::<Vec<_>>()
    };
    assert_eq!(of("editfs-removals"), [10], "{threads:?}");
    let workers = of("fuser");
    assert!(
        !workers.is_empty() && workers.iter().all(|n| *n == 0),
        "{threads:?}"
    );
}

#[test]
fn every_file_a_killed_daemon_removed_is_kept_and_logged_after_the_next_open() {
    const FILES: usize = 400;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("state");
    let fill = |src: &Path| {
        project(src);
        fs::create_dir(src.join("many")).unwrap();
        for i in 0..FILES {
            fs::write(src.join(format!("many/f{i}")), format!("file {i}\n")).unwrap();
        }
    };
    let Some(mut m) = Mount::start(&["--state-dir", dir.to_str().unwrap()], fill) else {
        return;
    };
    let mut rm = Command::new("rm")
        .arg("-rf")
        .arg(m.mnt.join("many"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once the removals have begun, however slowly a loaded machine runs
    // `rm`: a fixed pause let the kill come before any removal.
    let begun = (0..2000).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        (0..FILES).any(|i| !m.src.join(format!("many/f{i}")).exists())
    });
    assert!(begun, "rm removed nothing in 10 s");
    m.end(rustix::process::Signal::KILL);
    let _ = rm.wait();
    let src = &m.src;
    let waiting = fs::read_dir(dir.join("removed")).unwrap().count() - 1;
    let store = editfs_store::Store::open(&dir).unwrap();
    let deletes: Vec<_> = store
        .entries()
        .into_iter()
        .filter(|e| e.kind == editfs_store::LogKind::Delete)
        .collect();
    let gone: Vec<usize> = (0..FILES)
        .filter(|i| !src.join(format!("many/f{i}")).exists())
        .collect();
    assert!(!gone.is_empty(), "the kill came before any removal");
    eprintln!(
        "{} removed, {waiting} of them not filed at the kill",
        gone.len()
    );
    assert_eq!(deletes.len(), gone.len(), "one line per removed file");
    for e in &deletes {
        let rel = &e.files[0].file;
        let i: usize = rel.trim_start_matches("many/f").parse().unwrap();
        let kept = store.objects().read(editfs_store::Side::Pre, rel, e.tx);
        assert_eq!(kept, Some(format!("file {i}\n").into_bytes()), "{rel}");
    }
    assert_eq!(fs::read_dir(dir.join("removed")).unwrap().count(), 1);
}

/// A file an edit just replaced holds its new content unsynced until the next
/// checkpoint (a second later), durable meanwhile only in the store; recovery
/// after a crash of the machine writes it again from there unless the file was
/// changed since. So a change through the mount to it first waits for the
/// checkpoint, which leaves no record in the journal: here each change comes
/// within milliseconds of its edit, long before the periodic checkpoint.
#[test]
fn a_change_through_the_mount_right_after_an_edit_first_syncs_the_edit() {
    let m = mount!();
    let edit =
        "printf '<<<<<<< SEARCH\\ntwo\\n=======\\n2\\n>>>>>>> REPLACE\\n' > lib/util.txt.edit";
    let records = || {
        fs::read_dir(m.src.join(".editfs/journal"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    for (i, change) in [
        "echo four >> lib/util.txt",
        "truncate -s 4 lib/util.txt",
        "ln lib/util.txt lib/util.link && rm lib/util.link",
        "mv lib/util.txt lib/moved.txt && mv lib/moved.txt lib/util.txt",
    ]
    .iter()
    .enumerate()
    {
        m.ok(&format!(
            "printf 'one\\ntwo\\nthree\\n' > lib/util.txt; sleep 1.2; {edit} && {change}"
        ));
        assert_eq!(records(), 0, "change {i}: {change}");
    }
}

/// An agent's tool often runs a multi-line `sh -c` or `python3 -c` program; its
/// command line, with the line breaks in it, names the writer in the history.
#[test]
fn a_multi_line_command_line_stays_on_its_row_of_the_history() {
    let m = mount!();
    m.ok("python3 -c 'import sys\nwith open(\"lib/util.txt.edit\", \"w\") as f:\n    f.write(\"<<<<<<< SEARCH\\ntwo\\n=======\\n2\\n>>>>>>> REPLACE\\n\")\n'");
    assert_eq!(m.src_file("lib/util.txt"), b"one\n2\nthree\n");
    let src = m.src.to_str().unwrap();
    for history in [m.ok("cat .editfs/history"), editfs(&["history", src])] {
        let rows: Vec<&str> = history.lines().collect();
        assert_eq!(rows.len(), 2, "one header and one row:\n{history}");
        assert!(
            rows[1].contains("-c import sys\\nwith open"),
            "the line break is shown escaped: {history}"
        );
        assert!(
            rows[1].chars().count() <= 200,
            "the row is cut short: {history}"
        );
    }
}

const TWO_TO_2: &str = "lib/util.txt\n<<<<<<< SEARCH\ntwo\n=======\n2\n>>>>>>> REPLACE\n";

#[test]
fn a_dry_run_through_the_mount_reports_the_diff_and_changes_nothing() {
    let m = mount!();
    let sent = m.sh(&format!("cat > .editfs/dry-run <<'EOF'\n{TWO_TO_2}EOF"));
    assert!(sent.status.success(), "{sent:?}");
    let status = m.ok("cat .editfs/status");
    assert!(status.contains("-two\n+2"), "{status}");
    assert!(status.contains("dry run"), "{status}");
    assert_eq!(m.src_file("lib/util.txt"), b"one\ntwo\nthree\n");
    let own = m.ok("cat lib/util.txt.status");
    assert!(
        own.starts_with("NO REPORT YET"),
        "F.status is left alone: {own}"
    );
    // A payload that would fail fails the same way, and says why.
    let missed = TWO_TO_2.replace("two\n=", "zwei\n=");
    let sent = m.sh(&format!("cat > .editfs/dry-run <<'EOF'\n{missed}EOF"));
    assert!(!sent.status.success(), "{sent:?}");
    assert!(
        String::from_utf8_lossy(&sent.stderr).contains("Input/output error"),
        "{sent:?}"
    );
    assert!(m.ok("cat .editfs/status").contains("not_found"));
    assert!(log(&m).is_empty(), "nothing is logged: {:?}", log(&m));
    // No id was taken: the real edit is transaction 1.
    m.ok(&format!("cat > .editfs/edit <<'EOF'\n{TWO_TO_2}EOF"));
    assert_eq!(m.src_file("lib/util.txt"), b"one\n2\nthree\n");
    assert_eq!(log(&m)[0]["tx"], 1);
}

/// Every regular file of `root` (its state directory aside), with its bytes and mode.
fn tree(root: &Path) -> std::collections::BTreeMap<String, (Vec<u8>, u32)> {
    fn walk(dir: &Path, root: &Path, out: &mut std::collections::BTreeMap<String, (Vec<u8>, u32)>) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let path = e.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = fs::symlink_metadata(&path).unwrap();
            if rel == ".editfs" {
                continue;
            }
            if meta.is_dir() {
                walk(&path, root, out);
            } else if meta.is_file() {
                out.insert(rel, (fs::read(&path).unwrap(), meta.mode() & 0o7777));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(root, root, &mut out);
    out
}

const SESSION: &str = r#"
set -e
printf '<<<<<<< SEARCH\ntwo\n=======\nTWO\n>>>>>>> REPLACE\n' > lib/util.txt.edit
cat > .editfs/edit <<'PATCH'
*** Begin Patch
*** Add File: src/new.txt
+made by a patch
*** Delete File: lib/deep/a.txt
*** Update File: lib/deep/b.txt
*** Move to: moved.txt
@@
-beta
+BETA
*** End Patch
PATCH
sed -i 's/three/3/' lib/util.txt
chmod 600 private.txt
python3 -c "
import os
open('keep.txt.tmp', 'w').write('saved by an editor\n')
os.rename('keep.txt.tmp', 'keep.txt')
"
rm -r lib/deep
mkdir newdir
echo fresh > newdir/x.txt
mv lib/util.txt lib/util2.txt
mv .gitignore .gitignore.old
mv notes manual
echo added >> manual/old/n1.txt
"#;

#[test]
fn a_rewind_to_a_checkpoint_puts_back_every_change_of_a_mixed_session_and_can_be_undone() {
    let m = match Mount::start(&[], |src| {
        project(src);
        fs::write(src.join("keep.txt"), "original\n").unwrap();
        fs::write(src.join("private.txt"), "mode changes only\n").unwrap();
        fs::create_dir_all(src.join("notes/old")).unwrap();
        fs::write(src.join("notes/n0.txt"), "zero\n").unwrap();
        fs::write(src.join("notes/old/n1.txt"), "one\n").unwrap();
    }) {
        Some(m) => m,
        None => return,
    };
    let answer = m.ok("exec 3<>.editfs/checkpoint; echo before-task >&3; cat <&3");
    assert!(
        answer.contains("OK: checkpoint 1, named before-task"),
        "{answer}"
    );
    let refused = m.sh("echo before-task | cat > .editfs/checkpoint");
    assert!(!refused.status.success(), "a name is unique");
    let at_checkpoint = tree(&m.src);
    m.ok(SESSION);
    let after_session = tree(&m.src);
    assert_ne!(after_session, at_checkpoint);

    let src = m.src.to_str().unwrap();
    // A file made through the mount is recorded once it stayed a moment.
    let began = std::time::Instant::now();
    let names = loop {
        let names = editfs(&["diff", src, "--since", "before-task", "--name-status"]);
        let settled = names.contains("A\tnewdir/x.txt") && names.contains("A\tmanual/old/n1.txt");
        if settled || began.elapsed().as_secs() > 10 {
            break names;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    for line in [
        "D\tlib/util.txt",
        "A\tlib/util2.txt",
        "R100\t.gitignore\t.gitignore.old",
        "D\tlib/deep/a.txt",
        "A\tnewdir/x.txt",
        "M\tkeep.txt",
        "R100\tnotes/n0.txt\tmanual/n0.txt",
        "D\tnotes/old/n1.txt",
        "A\tmanual/old/n1.txt",
    ] {
        assert!(
            names.contains(line),
            "{line} in:\n{names}\n{}",
            editfs(&["history", src])
        );
    }
    assert!(
        names.contains("\tlib/deep/b.txt\tmoved.txt") && names.contains("\nR0")
            || names.contains("D\tlib/deep/b.txt"),
        "{names}"
    );

    let dry = m.ok("echo '--to before-task --dry-run' > .editfs/rewind; cat .editfs/status");
    assert!(dry.contains("dry run"), "{dry}");
    assert_eq!(tree(&m.src), after_session, "a dry run changes nothing");

    let rewound = m.ok("echo '--to before-task' > .editfs/rewind; cat .editfs/status.json");
    let json: serde_json::Value = serde_json::from_str(&rewound).unwrap();
    assert_eq!(json["outcome"], "ok", "{rewound}");
    // The mode of private.txt: a chmod is no write, and the log records none;
    // the report says so, and names the directory mkdir made.
    assert_eq!(
        json["not_undone"]["unrecorded"],
        serde_json::json!(["private.txt"]),
        "{rewound}"
    );
    assert_eq!(
        json["not_undone"]["directories"],
        serde_json::json!(["newdir/"]),
        "{rewound}"
    );
    assert!(!m.src.join("manual").exists(), "{rewound}");
    let mut now = tree(&m.src);
    now.remove("private.txt");
    let mut want = at_checkpoint.clone();
    want.remove("private.txt");
    assert_eq!(now, want, "every recorded change put back, byte for byte");

    let tx = json["tx"].as_u64().unwrap();
    m.ok(&format!(
        "echo '--tx {tx}' > .editfs/undo; cat .editfs/status"
    ));
    let mut again = tree(&m.src);
    again.remove("private.txt");
    let mut session = after_session.clone();
    session.remove("private.txt");
    assert_eq!(
        again, session,
        "the undo of the rewind brings the session back"
    );
}

/// `git stash` and `git stash pop` through the mount: the file removed, then
/// made again. The new file continues the name's history (its undo brings the
/// stashed content back), but at a point between the two the file was absent,
/// and a diff or a rewind to that point says so.
#[test]
fn a_file_made_again_after_its_removal_was_absent_at_a_point_between() {
    let m = mount!();
    m.ok("echo stashed > stash.txt");
    m.ok("echo before-stash | cat > .editfs/checkpoint");
    m.ok("rm stash.txt");
    m.ok("echo between | cat > .editfs/checkpoint");
    m.ok("echo popped > stash.txt");
    let src = m.src.to_str().unwrap();
    let began = std::time::Instant::now();
    let names = loop {
        let names = editfs(&["diff", src, "--since", "between", "--name-status"]);
        if !names.trim().is_empty() || began.elapsed().as_secs() > 10 {
            break names;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        names.trim(),
        "A\tstash.txt",
        "{}",
        editfs(&["history", src])
    );
    let names = editfs(&["diff", src, "--since", "before-stash", "--name-status"]);
    assert_eq!(
        names.trim(),
        "M\tstash.txt",
        "{}",
        editfs(&["history", src])
    );

    let rewind = |to: &str| {
        let shown = m.ok(&format!(
            "echo '--to {to}' > .editfs/rewind; cat .editfs/status.json"
        ));
        let json: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(json["outcome"], "ok", "{shown}");
    };
    rewind("between");
    assert!(!m.src.join("stash.txt").exists());
    rewind("before-stash");
    assert_eq!(
        fs::read_to_string(m.src.join("stash.txt")).unwrap(),
        "stashed\n"
    );
}

#[test]
fn a_rewind_over_a_change_editfs_did_not_record_is_refused_and_names_the_file() {
    let m = mount!();
    editfs(&["checkpoint", m.src.to_str().unwrap(), "start"]);
    m.ok("echo more >> lib/util.txt; echo new > lib/new.txt");
    // Changed beside the mount: no line of the log says so.
    fs::write(m.src.join("lib/util.txt"), "changed outside\n").unwrap();
    let out = m.sh("echo '--to start' | cat > .editfs/rewind");
    assert!(!out.status.success(), "refused at close");
    let status = m.ok("cat .editfs/status");
    assert!(
        status.contains("lib/util.txt changed outside editfs"),
        "{status}"
    );
    assert_eq!(m.src_file("lib/util.txt"), b"changed outside\n");
    assert!(m.src.join("lib/new.txt").exists(), "nothing was changed");
    m.ok("echo '--to start --force' > .editfs/rewind");
    assert_eq!(m.src_file("lib/util.txt"), b"one\ntwo\nthree\n");
    assert!(!m.src.join("lib/new.txt").exists());
}

#[test]
fn a_file_made_through_the_mount_past_the_size_limit_keeps_no_content() {
    let m = mount!();
    m.ok("truncate -s 64M big.bin");
    let entries = log_of(&m, 1);
    let big = entries
        .iter()
        .find(|e| e["files"][0]["file"] == "big.bin")
        .unwrap_or_else(|| panic!("no line for big.bin: {entries:?}"));
    assert_eq!(big["outcome"], "skipped", "{big}");
    let kept = Command::new("du")
        .args(["-sm"])
        .arg(m.src.join(".editfs"))
        .output()
        .unwrap();
    let mib: u64 = String::from_utf8_lossy(&kept.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(mib < 8, "the state directory took {mib} MiB");
}

#[test]
fn an_editors_temporary_file_written_twice_and_renamed_over_its_file_is_no_change_of_its_own() {
    let m = mount!();
    editfs(&["checkpoint", m.src.to_str().unwrap(), "t"]);
    m.ok("python3 -c \"
import os
s = open('lib/util.txt').read()
open('lib/.util.txt.tmp', 'w').write(s)
open('lib/.util.txt.tmp', 'a').write('more\\n')
os.rename('lib/.util.txt.tmp', 'lib/util.txt')
\"");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let names = editfs(&[
        "diff",
        m.src.to_str().unwrap(),
        "--since",
        "t",
        "--name-status",
    ]);
    assert!(!names.contains(".util.txt.tmp"), "{names}");
    editfs(&["rewind", m.src.to_str().unwrap(), "--to", "t"]);
    assert_eq!(m.src_file("lib/util.txt"), b"one\ntwo\nthree\n");
    assert!(!m.src.join("lib/.util.txt.tmp").exists());
}

/// `editfs diff --since` until it names `want` (a file made through the mount
/// is recorded once it stayed a moment), in the form `form`.
fn diff_naming(m: &Mount, point: &str, form: &[&str], want: &str) -> String {
    let src = m.src.to_str().unwrap();
    let began = std::time::Instant::now();
    loop {
        let mut args = vec!["diff", src, "--since", point];
        args.extend(form);
        let out = editfs(&args);
        if out.contains(want) || began.elapsed().as_secs() > 10 {
            return out;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_file_moved_then_changed_shows_as_a_rename_with_its_changes_in_every_form_of_diff() {
    let m = mount!();
    let long: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    fs::write(m.src.join("lib/long.txt"), &long).unwrap();
    editfs(&["checkpoint", m.src.to_str().unwrap(), "t"]);
    m.ok("mv lib/long.txt lib/longer.txt; sed -i 's/^line 7$/line seven/' lib/longer.txt");
    let names = diff_naming(
        &m,
        "t",
        &["--name-status"],
        "\tlib/long.txt\tlib/longer.txt\n",
    );
    assert!(
        names.contains("R092\tlib/long.txt\tlib/longer.txt\n"),
        "{names}"
    );
    assert!(!names.contains("D\t") && !names.contains("A\t"), "{names}");
    let patch = diff_naming(&m, "t", &[], "lib/longer.txt");
    assert!(
        patch.contains(
            "diff --git a/lib/long.txt b/lib/longer.txt\nsimilarity index 92%\nrename from lib/long.txt\nrename to lib/longer.txt\n--- a/lib/long.txt\n+++ b/lib/longer.txt\n"
        ) && patch.contains("-line 7\n+line seven\n"),
        "{patch}"
    );
    let stat = diff_naming(&m, "t", &["--stat"], "lib/longer.txt");
    assert!(
        stat.contains(" lib/long.txt => lib/longer.txt | +1 -1\n")
            && stat.contains(" 1 file(s) changed"),
        "{stat}"
    );
    let json = diff_naming(&m, "t", &["--json"], "lib/longer.txt");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let files = json["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{json}");
    assert_eq!(files[0]["status"], "R");
    assert_eq!(files[0]["from"], "lib/long.txt");
    assert_eq!(files[0]["path"], "lib/longer.txt");
    assert_eq!(files[0]["similarity"], 92);
    assert_eq!(
        (
            files[0]["lines_added"].as_u64(),
            files[0]["lines_removed"].as_u64()
        ),
        (Some(1), Some(1))
    );
    // Another file's content is not taken for this one's.
    m.ok("printf 'x\\n' > other.txt; rm lib/util.txt");
    let names = diff_naming(&m, "t", &["--name-status"], "A\tother.txt");
    assert!(
        names.contains("D\tlib/util.txt\n") && names.contains("A\tother.txt\n"),
        "{names}"
    );
    // The file saved over after its move is no file of the point: it goes.
    editfs(&["rewind", m.src.to_str().unwrap(), "--to", "t"]);
    assert!(!m.src.join("lib/longer.txt").exists());
    assert_eq!(m.src_file("lib/long.txt"), long.as_bytes());
}

#[test]
fn a_rewind_names_what_it_leaves_as_it_is_modes_directories_and_unrecorded_files() {
    let m = match Mount::start(&[], |src| {
        project(src);
        fs::write(src.join("private.txt"), "mode changes only\n").unwrap();
    }) {
        Some(m) => m,
        None => return,
    };
    let src = m.src.to_str().unwrap();
    editfs(&["checkpoint", src, "t"]);
    m.ok(
        "chmod 600 private.txt; sed -i 's/one/ONE/' lib/util.txt; chmod 755 lib/util.txt; \
         mkdir newdir; mkdir -p made/sub; echo x > made/sub/f.txt",
    );
    diff_naming(&m, "t", &["--name-status"], "A\tmade/sub/f.txt");
    let dry = editfs(&["rewind", src, "--to", "t", "--dry-run", "--json"]);
    let dry: serde_json::Value = serde_json::from_str(&dry).unwrap();
    assert_eq!(
        dry["not_undone"]["unrecorded"],
        serde_json::json!(["private.txt"]),
        "{dry}"
    );
    let json = editfs(&["rewind", src, "--to", "t", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["outcome"], "ok", "{json}");
    let left = &json["not_undone"];
    assert_eq!(
        left["unrecorded"],
        serde_json::json!(["private.txt"]),
        "{json}"
    );
    assert_eq!(
        left["modes"],
        serde_json::json!(["lib/util.txt: mode 755 now, 644 at the point"]),
        "{json}"
    );
    assert_eq!(
        left["directories"],
        serde_json::json!(["made/", "newdir/"]),
        "{json}"
    );
    assert_eq!(m.src_file("lib/util.txt"), b"one\ntwo\nthree\n");
    assert!(!m.src.join("made/sub/f.txt").exists());
    // The same, as text, from inside the mount.
    let text = m.ok("echo '--to t' > .editfs/rewind; cat .editfs/status");
    for line in [
        "not undone: ",
        "\n    private.txt\n",
        "\n    lib/util.txt: mode 755 now, 644 at the point\n",
        "\n    made/\n    newdir/\n",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
}

#[test]
fn a_directory_moved_whole_through_the_mount_is_rewound_back_and_its_undo_moves_it_again() {
    let m = mount!();
    fs::create_dir_all(m.src.join("lib/deep/inner")).unwrap();
    fs::write(m.src.join("lib/deep/inner/c.txt"), "gamma\n").unwrap();
    let src = m.src.to_str().unwrap();
    editfs(&["checkpoint", src, "t"]);
    let at_checkpoint = tree(&m.src);
    m.ok("mv lib/deep moved && echo more >> moved/a.txt && echo new > moved/n.txt");
    let after = tree(&m.src);
    let names = diff_naming(&m, "t", &["--name-status"], "A\tmoved/n.txt");
    for line in [
        "R100\tlib/deep/b.txt\tmoved/b.txt\n",
        "R100\tlib/deep/inner/c.txt\tmoved/inner/c.txt\n",
        "R054\tlib/deep/a.txt\tmoved/a.txt\n",
        "A\tmoved/n.txt\n",
    ] {
        assert!(names.contains(line), "{line:?} in:\n{names}");
    }
    let out = editfs(&["rewind", src, "--to", "t", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["outcome"], "ok", "{out}");
    assert_eq!(
        tree(&m.src),
        at_checkpoint,
        "every file back at its old name"
    );
    assert!(
        !m.src.join("moved").exists(),
        "the emptied directory goes too"
    );
    let tx = json["tx"].as_u64().unwrap().to_string();
    editfs(&["undo", src, "--tx", &tx]);
    assert_eq!(tree(&m.src), after, "the undo of the rewind moves it again");
    // An empty directory inside is not recorded: it keeps the new one, which
    // the report names.
    fs::create_dir(m.src.join("moved/empty")).unwrap();
    editfs(&["checkpoint", src, "t2"]);
    m.ok("mv moved again");
    diff_naming(
        &m,
        "t2",
        &["--name-status"],
        "R100\tmoved/b.txt\tagain/b.txt",
    );
    let out = editfs(&["rewind", src, "--to", "t2", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        json["not_undone"]["directories"],
        serde_json::json!(["again/"]),
        "{out}"
    );
    assert_eq!(m.src_file("moved/b.txt"), b"beta\n");
}

/// A patch sent to `.editfs/edit` again (an agent's retry after a timeout):
/// the file its `*** Delete File:` names is gone, removed by that patch's first
/// run as the history shows, so the close succeeds and the status says
/// `already applied`. A file removed with `rm` through the mount is no
/// patch's doing: deleting it again fails.
#[test]
fn a_resent_patch_deletion_through_the_mount_is_already_applied_but_not_after_an_rm() {
    let m = mount!();
    let send = |patch: &str| m.sh(&format!("cat > .editfs/edit <<'PATCH'\n{patch}PATCH"));
    let patch = "*** Begin Patch\n*** Delete File: lib/deep/a.txt\n*** Update File: lib/util.txt\n@@\n one\n-two\n+TWO\n three\n*** End Patch\n";
    assert!(send(patch).status.success());
    assert!(!m.src.join("lib/deep/a.txt").exists());
    let again = send(patch);
    assert!(again.status.success(), "{again:?}");
    let status = m.ok("cat .editfs/status");
    assert!(status.starts_with("OK "), "{status}");
    assert!(status.contains("an edit removed it"), "{status}");
    assert_eq!(m.ok("cat lib/util.txt"), "one\nTWO\nthree\n");
    m.ok("rm lib/deep/b.txt");
    let rm = send("*** Begin Patch\n*** Delete File: lib/deep/b.txt\n*** End Patch\n");
    assert!(!rm.status.success(), "{rm:?}");
    assert!(m.ok("cat .editfs/status").contains("not_found"));
}

/// A file made through the mount and edited through its control file at once
/// (`> new; new.edit`, quicker than the creation settles) is still recorded as
/// made: a rewind to before it removes it, rather than keeping its first text.
#[test]
fn a_file_made_and_edited_at_once_through_the_mount_is_rewound_away() {
    let m = match Mount::start(&[], project) {
        Some(m) => m,
        None => return,
    };
    m.ok("echo before-new | cat > .editfs/checkpoint");
    m.ok(
        "printf 'a = 1\\n' > fresh.py; \
         printf '<<<<<<< SEARCH\\na = 1\\n=======\\na = 2\\n>>>>>>> REPLACE\\n' > fresh.py.edit; \
         echo 'old = 1' > multi.py; \
         printf 'multi.py\\n<<<<<<< SEARCH\\nold = 1\\n=======\\nold = 2\\n>>>>>>> REPLACE\\n' > .editfs/edit",
    );
    assert_eq!(
        fs::read_to_string(m.src.join("fresh.py")).unwrap(),
        "a = 2\n"
    );
    let src = m.src.to_str().unwrap();
    let names = editfs(&["diff", src, "--since", "before-new", "--name-status"]);
    assert!(names.contains("A\tfresh.py"), "{names}");
    assert!(names.contains("A\tmulti.py"), "{names}");
    let rewound = m.ok("echo '--to before-new' > .editfs/rewind; cat .editfs/status");
    assert!(rewound.starts_with("OK"), "{rewound}");
    assert!(!m.src.join("fresh.py").exists(), "{rewound}");
    assert!(!m.src.join("multi.py").exists(), "{rewound}");
}

/// A git diff sent to `.editfs/edit` again: its rename (`rename from`/`rename
/// to`, with a hunk) and its deletion (`deleted file mode`, the file's lines
/// listed) are already applied, as the `*** Begin Patch` form is; an edit of
/// the file moved away is told where it went, not that it could be created.
#[test]
fn a_resent_git_diff_with_a_rename_and_a_deletion_through_the_mount_is_already_applied() {
    let m = mount!();
    let send = |patch: &str| m.sh(&format!("cat > .editfs/edit <<'PATCH'\n{patch}PATCH"));
    let diff = "diff --git a/lib/util.txt b/lib/tools.txt\nsimilarity index 80%\nrename from lib/util.txt\nrename to lib/tools.txt\n--- a/lib/util.txt\n+++ b/lib/tools.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\ndiff --git a/lib/deep/a.txt b/lib/deep/a.txt\ndeleted file mode 100644\n--- a/lib/deep/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-alpha\n";
    assert!(send(diff).status.success());
    assert!(!m.src.join("lib/deep/a.txt").exists());
    assert_eq!(m.ok("cat lib/tools.txt"), "one\nTWO\nthree\n");
    let again = send(diff);
    assert!(again.status.success(), "{again:?}");
    let status = m.ok("cat .editfs/status");
    assert!(status.starts_with("OK "), "{status}");
    assert!(status.contains("an edit removed it"), "{status}");
    assert!(status.contains("it was moved before"), "{status}");
    let edit = send("lib/util.txt\n<<<<<<< SEARCH\ntwo\n=======\n2\n>>>>>>> REPLACE\n");
    assert!(!edit.status.success(), "{edit:?}");
    let status = m.ok("cat .editfs/status");
    assert!(!status.contains("an empty SEARCH would create"), "{status}");
    assert!(
        status.contains("`lib/util.txt` was removed by transaction"),
        "{status}"
    );
    assert!(status.contains("`lib/tools.txt`"), "{status}");
}

/// `.editfs/history` and `.editfs/log` read the latest 1000 lines of the log,
/// saying so, however long the log is; `editfs history` lists every one.
#[test]
fn the_history_in_the_mount_reads_the_latest_thousand_lines() {
    let m = mount!();
    m.ok(
        "echo x > f.txt; for i in $(seq 1005); do \
         printf '<<<<<<< SEARCH\\nnope\\n=======\\nX\\n>>>>>>> REPLACE\\n' > f.txt.edit 2>/dev/null; done; true",
    );
    let shown = m.ok("cat .editfs/history");
    let rows = shown.lines().filter(|l| l.contains("f.txt")).count();
    assert_eq!(rows, 1000, "{}", &shown[..shown.len().min(500)]);
    assert!(
        shown.ends_with("lists every transaction)\n"),
        "{}",
        &shown[shown.len().saturating_sub(300)..]
    );
    assert_eq!(m.ok("cat .editfs/log").lines().count(), 1000);
    let all = editfs(&["history", m.src.to_str().unwrap()]);
    assert!(all.lines().filter(|l| l.contains("f.txt")).count() >= 1005);
}
