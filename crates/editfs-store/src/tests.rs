//! Tests of the store as a whole: commits, recovery, checkpoints, ids and the log.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use std::fs;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use super::checkpoint::{CHECKPOINT_BEHIND, CHECKPOINT_FILES};
use super::fixture::Project;
use super::logfile::{LOG_ROTATE, OLD_LOG, last_in, last_logged_tx};
use super::*;
use crate::engine::sha256_hex;

fn line(tx: u64) -> LogEntry {
    LogEntry {
        tx,
        ..LogEntry::default()
    }
}

/// Commits `text` as the new content of `a` under `root`.
fn commit_text(store: &Store, root: &Path, tx: u64, pre: Option<&[u8]>, text: &[u8]) {
    let rootfd = atomic::open_dir(root).unwrap();
    let lock = store.lock(&Keys::new().path("a")).unwrap();
    let old = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
    let change = Change {
        rel: "a",
        dir: rootfd.as_fd(),
        old: old.as_ref().filter(|_| pre.is_some()),
        pre,
        new: text,
        new_sha: None,
        by: None,
        fresh: None,
    };
    store
        .commit(&lock, tx, (rootfd.as_fd(), root), &[change], line(tx))
        .unwrap();
}

#[test]
fn an_object_pruned_and_stored_again_at_once_stays() {
    let p = Project::new();
    let root = p.root();
    let keep_one = Retention {
        keep: 1,
        ..Retention::default()
    };
    let store = p.open_with(keep_one);
    let texts: [&[u8]; 2] = [b"one", b"two"];
    commit_text(&store, root, 1, None, texts[0]);
    // Each commit prunes the version that held the content it brings back.
    for tx in 2..=6 {
        let i = tx as usize % 2;
        commit_text(&store, root, tx, Some(texts[1 - i]), texts[i]);
    }
    store.objects().reaper().drain();
    assert_eq!(
        store.objects().read(objects::Side::Post, "a", 6).unwrap(),
        b"one"
    );
    assert_eq!(
        store.objects().read(objects::Side::Pre, "a", 6).unwrap(),
        b"two"
    );
    assert_eq!(
        fs::read_dir(root.join(".editfs/objects")).unwrap().count(),
        2
    );
    assert_eq!(fs::read_dir(root.join(".editfs/tmp")).unwrap().count(), 0);
}

#[test]
fn a_file_a_crash_left_in_tmp_before_its_unlink_is_removed_at_the_next_open() {
    let p = Project::made();
    let state = p.state();
    let aside = state.join("tmp").join(tmp_name_of(dead_pid()));
    fs::write(&aside, "a dropped object, not unlinked yet").unwrap();
    drop(p.open());
    assert!(!aside.exists());
}

#[test]
fn opening_spares_the_temporary_files_of_a_process_that_has_the_store_open() {
    let p = Project::made();
    let live = p.open();
    let staged = p.state().join("tmp").join(atomic::tmp_name());
    fs::write(&staged, "a new content staged before its commit").unwrap();
    drop(p.open());
    assert!(
        staged.exists(),
        "another opening swept a live commit's file"
    );
    drop(live);
}

#[test]
fn opening_spares_the_temporary_files_of_a_dead_process_whose_journal_is_still_there() {
    let p = Project::made();
    let dead = dead_pid();
    let journal = p.state().join("journal").join(format!("{dead}-0.wal"));
    fs::write(&journal, "").unwrap();
    let left = p.state().join("tmp").join(tmp_name_of(dead));
    fs::write(&left, "a new content its record names").unwrap();
    // As if another process were recovering that journal now: it holds it.
    let held = File::open(&journal).unwrap();
    held.lock().unwrap();
    drop(p.open());
    assert!(left.exists(), "swept while its journal was being recovered");
    drop(held);
    drop(p.open());
    assert!(
        !left.exists(),
        "swept once its journal was recovered and gone"
    );
}

/// The id of a process that has ended.
pub(crate) fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A temporary file's name as process `pid` makes it (see `atomic::tmp_name`).
pub(crate) fn tmp_name_of(pid: u32) -> String {
    let own = atomic::tmp_name().to_string_lossy().into_owned();
    let n = own.rsplit('-').next().unwrap().to_owned();
    format!("{}{pid}-{n}", atomic::TMP_PREFIX)
}

#[test]
fn the_filer_with_nothing_to_file_takes_no_lock() {
    let p = Project::new();
    let state = p.state();
    let store = p.open();
    fs::remove_file(state.join("lock")).unwrap();
    store.file_removals(true);
    store.file_removals(false);
    assert!(
        !state.join("lock").exists(),
        "an idle filer opened the lock"
    );
}

#[test]
fn layout_ids_snapshots_and_log() {
    let p = Project::new();
    let store = p.open();
    let lock = store.lock(&Keys::new().path("a")).unwrap();
    assert_eq!(store.next_tx().unwrap(), 1);
    assert_eq!(store.next_tx().unwrap(), 2);
    let sha = store.objects().put_from(&mut &b"pre"[..], 3).unwrap();
    let name = store.keep_pre_image(&lock, 2, "src/a.rs", &sha).unwrap();
    assert_eq!(name.as_deref(), Some("snapshots/src/a.rs/2"));
    let name = name.unwrap();
    assert_eq!(fs::read(store.dir().join(&name)).unwrap(), b"pre");
    store.log(&line(2)).unwrap();
    store.log(&line(3)).unwrap();
    let txs: Vec<u64> = store.entries().iter().map(|e| e.tx).collect();
    assert_eq!(txs, [2, 3]);
    assert_eq!(
        fs::read_to_string(store.dir().join(".gitignore")).unwrap(),
        "*\n"
    );
}

#[test]
fn a_commit_replaces_every_file_and_keeps_both_versions() {
    let p = Project::new();
    let root = p.root();
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(root.join("a"), "old a").unwrap();
    let store = p.open();
    let lock = store.lock(&Keys::new().path("a")).unwrap();
    let rootfd = atomic::open_dir(root).unwrap();
    let d = atomic::open_dir(&root.join("d")).unwrap();
    let a = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
    let changes = [
        Change {
            rel: "a",
            dir: rootfd.as_fd(),
            old: a.as_ref(),
            pre: Some(b"old a"),
            new: b"new a",
            new_sha: None,
            by: None,
            fresh: None,
        },
        Change {
            rel: "d/b",
            dir: d.as_fd(),
            old: None,
            pre: None,
            new: b"new b",
            new_sha: None,
            by: None,
            fresh: None,
        },
    ];
    let kept = store
        .commit(&lock, 7, (rootfd.as_fd(), root), &changes, line(7))
        .unwrap();
    assert_eq!(kept, [Some("snapshots/a/7".to_owned()), None]);
    assert_eq!(fs::read(root.join("a")).unwrap(), b"new a");
    assert_eq!(fs::read(root.join("d/b")).unwrap(), b"new b");
    assert_eq!(
        store.objects().read(objects::Side::Post, "d/b", 7).unwrap(),
        b"new b"
    );
    let journal = || fs::read_dir(root.join(".editfs/journal")).unwrap().count();
    assert_eq!(journal(), 1, "the records wait for the checkpoint");
    store.checkpoint().unwrap();
    assert_eq!(journal(), 0);
    assert_eq!(store.entries().len(), 1);
}

#[test]
fn a_crash_before_the_checkpoint_leaves_a_record_that_recovery_finds_finished() {
    let p = Project::new();
    let root = p.root();
    fs::write(root.join("a"), "old").unwrap();
    let state = p.state();
    let store = p.open();
    let lock = store.lock(&Keys::new().path("a")).unwrap();
    let rootfd = atomic::open_dir(root).unwrap();
    let a = atomic::open_existing(rootfd.as_fd(), "a".as_ref()).unwrap();
    let change = Change {
        rel: "a",
        dir: rootfd.as_fd(),
        old: a.as_ref(),
        pre: Some(b"old"),
        new: b"new",
        new_sha: None,
        by: None,
        fresh: None,
    };
    let tx = store.next_tx().unwrap();
    store
        .commit(&lock, tx, (rootfd.as_fd(), root), &[change], line(tx))
        .unwrap();
    drop(lock);
    store.killed();
    let store = p.open();
    assert!(store.recovered().is_empty(), "{}", store.recovered());
    assert_eq!(fs::read(root.join("a")).unwrap(), b"new");
    assert_eq!(store.entries().len(), 1, "its line is not logged twice");
    assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 0);
    let _lock = store.lock(&Keys::new().path("a")).unwrap();
    assert_eq!(store.next_tx().unwrap(), tx + 1);
}

#[test]
fn a_committed_record_cut_short_is_no_commit_point() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    fs::write(state.join("tmp/t1"), "new").unwrap();
    journal::Journal::new(&state)
        .write(&record(3, root, false, vec![written("a", "t1")]))
        .unwrap();
    fs::write(state.join("journal/3.commit.json"), "{\"tx\": 3, \"ro").unwrap();
    let store = p.open();
    assert_eq!(store.recovered().rolled_back, [3]);
    assert!(!root.join("a").exists());
    assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 0);
}

#[test]
fn a_counter_a_machine_crash_left_empty_is_moved_past_the_log() {
    let p = Project::new();
    let dir = p.state();
    let store = p.open();
    store.log(&line(9)).unwrap();
    drop(store);
    fs::write(dir.join("txid"), "\0\0\0").unwrap();
    let store = p.open();
    let _lock = store.lock(&Keys::new().path("a")).unwrap();
    assert_eq!(store.next_tx().unwrap(), 10);
}

#[test]
fn a_commit_installs_in_the_directory_it_holds_whatever_its_path_names_by_then() {
    let p = Project::new();
    let root = p.root();
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(root.join("d/f"), "old").unwrap();
    let store = p.open();
    let lock = store.lock(&Keys::new().path("a")).unwrap();
    let rootfd = atomic::open_dir(root).unwrap();
    let held = atomic::open_dir(&root.join("d")).unwrap();
    // The directory is moved away and another takes its name.
    fs::rename(root.join("d"), root.join("moved")).unwrap();
    fs::create_dir(root.join("d")).unwrap();
    let f = atomic::open_existing(held.as_fd(), "f".as_ref()).unwrap();
    let change = Change {
        rel: "d/f",
        dir: held.as_fd(),
        old: f.as_ref(),
        pre: Some(b"old"),
        new: b"new",
        new_sha: None,
        by: None,
        fresh: None,
    };
    store
        .commit(&lock, 1, (rootfd.as_fd(), root), &[change], line(1))
        .unwrap();
    assert_eq!(fs::read(root.join("moved/f")).unwrap(), b"new");
    assert!(!root.join("d/f").exists());
}

#[test]
fn recovery_rolls_a_committed_record_forward_and_a_prepared_one_back() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    fs::write(root.join("a"), "old").unwrap();
    fs::write(state.join("tmp/t1"), "new").unwrap();
    fs::write(state.join("tmp/t2"), "never").unwrap();
    let entry = |tmp: &str, rel: &str| written(rel, tmp);
    let j = journal::Journal::new(&state);
    let log = line(1);
    j.write(&journal::Record {
        tx: 1,
        root: root.to_owned(),
        committed: true,
        files: vec![entry("t1", "a")],
        log: log.clone(),
        inline: Vec::new(),
    })
    .unwrap();
    j.write(&journal::Record {
        tx: 2,
        root: root.to_owned(),
        committed: false,
        files: vec![entry("t2", "b")],
        log,
        inline: Vec::new(),
    })
    .unwrap();
    // What the unfinished commit had already kept of its file.
    let objects = objects::Objects::new(&state);
    objects.keep(objects::Side::Pre, "b", 2, b"before").unwrap();
    objects.keep(objects::Side::Post, "b", 2, b"never").unwrap();
    drop(j);
    let store = p.open();
    assert!(
        store.objects().txs(objects::Side::Pre, "b").is_empty()
            && store.objects().txs(objects::Side::Post, "b").is_empty(),
        "a rolled-back transaction leaves no version"
    );
    assert_eq!(store.recovered().rolled_forward, [1]);
    assert_eq!(store.recovered().rolled_back, [2]);
    assert_eq!(fs::read(root.join("a")).unwrap(), b"new");
    assert!(!root.join("b").exists());
    assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
    assert_eq!(
        store.entries().len(),
        1,
        "the log line of the completed transaction"
    );
}

/// The record is synced before the temporary file: after a crash of the
/// machine the record may be whole and the file not. Without a whole copy
/// of the content in the store (a record of a version that synced the
/// file first, whose commit point was then not reached) it is rolled back.
#[test]
fn recovery_rolls_back_a_committed_record_whose_temporary_file_is_torn() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    one_whole_one_torn(root, &state, false);
    let store = p.open();
    assert_eq!(store.recovered().rolled_back, [1]);
    assert!(store.recovered().rolled_forward.is_empty());
    assert_eq!(fs::read(root.join("a")).unwrap(), b"old", "all or nothing");
    assert_eq!(fs::read(root.join("b")).unwrap(), b"old");
    assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
    assert!(
        store.entries().is_empty(),
        "no log line: it never committed"
    );
}

/// A committed record over `files` (temporary name, path), each naming
/// `new` as its content and made as `made`, as a crash of the machine
/// before the checkpoint leaves it.
fn committed_record(
    state: &Path,
    root: &Path,
    files: &[(&str, &str)],
    new: &[u8],
    made: Option<journal::Made>,
) {
    let entry = |&(tmp, rel): &(&str, &str)| journal::Entry {
        sha256: Some(sha256_hex(new)),
        made,
        ..written(rel, tmp)
    };
    journal::Journal::new(state)
        .write(&journal::Record {
            tx: 1,
            root: root.to_owned(),
            committed: true,
            files: files.iter().map(entry).collect(),
            log: line(1),
            inline: Vec::new(),
        })
        .unwrap();
}

/// Files `a` and `b` under `root`, and a committed record of `new content`
/// to both, with the temporary files as a crash of the machine may leave
/// them: the first whole, the second cut short. The store holds the new
/// content if `stored`.
fn one_whole_one_torn(root: &Path, state: &Path, stored: bool) {
    fs::write(root.join("a"), "old").unwrap();
    fs::write(root.join("b"), "old").unwrap();
    fs::write(state.join("tmp/t1"), "new content").unwrap();
    fs::write(state.join("tmp/t2"), "new con").unwrap();
    if stored {
        objects::Objects::new(state)
            .keep(objects::Side::Post, "b", 1, b"new content")
            .unwrap();
    }
    let files = [("t1", "a"), ("t2", "b")];
    committed_record(state, root, &files, b"new content", None);
}

/// What a crash of the machine may leave of a file written and never
/// synced: its name and inode, its bytes cut short.
fn torn(path: &Path, whole: &[u8]) -> journal::Made {
    fs::write(path, whole).unwrap();
    let meta = fs::metadata(path).unwrap();
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(whole.len() as u64 / 2).unwrap();
    let times = fs::FileTimes::new().set_modified(meta.modified().unwrap());
    file.set_times(times).unwrap();
    journal::Made::of(&meta)
}

#[test]
fn a_commit_syncs_its_record_alone_which_carries_the_versions_new_to_the_store() {
    let p = Project::new();
    let (root, state) = (p.root(), p.state());
    let store = p.open();
    let (old, new): (&[u8], &[u8]) = (b"the old content", b"the new content");
    commit_text(&store, root, 1, Some(old), new);
    let unsynced = || store.unsettled.lock().objects.len();
    assert_eq!(
        unsynced(),
        2,
        "both versions left for the checkpoint to sync"
    );
    commit_text(&store, root, 2, Some(new), old);
    assert_eq!(
        unsynced(),
        2,
        "versions a synced record carries are durable"
    );
    // A crash of the machine before the checkpoint: the store's copies are
    // torn, and so is the file; the synced records are whole.
    store.killed();
    for v in [old, new] {
        let object = state.join("objects").join(crate::engine::sha256_hex(v));
        fs::set_permissions(&object, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&object, vec![0; v.len() / 2]).unwrap();
    }
    let a = fs::OpenOptions::new()
        .write(true)
        .open(root.join("a"))
        .unwrap();
    let made = fs::metadata(root.join("a")).unwrap().modified().unwrap();
    a.set_len(4).unwrap();
    a.set_times(fs::FileTimes::new().set_modified(made))
        .unwrap();
    drop(p.open());
    assert_eq!(fs::read(root.join("a")).unwrap(), old);
    let objects = objects::Objects::new(&state);
    let version = |side| objects.read(side, "a", 1).unwrap();
    assert_eq!(version(objects::Side::Pre), old, "written again in place");
    assert_eq!(version(objects::Side::Post), new);
}

#[test]
fn recovery_writes_a_torn_temporary_file_again_from_the_store() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    one_whole_one_torn(root, &state, true);
    let store = p.open();
    assert_eq!(store.recovered().rolled_forward, [1]);
    assert_eq!(fs::read(root.join("a")).unwrap(), b"new content");
    assert_eq!(fs::read(root.join("b")).unwrap(), b"new content");
    assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
    assert_eq!(store.entries().len(), 1, "its log line");
}

/// A commit of `the new content` to `a`, whose temporary file was made as
/// `made` and put in place, with its version stored.
fn a_committed_as(state: &Path, root: &Path, made: journal::Made) {
    objects::Objects::new(state)
        .keep(objects::Side::Post, "a", 1, b"the new content")
        .unwrap();
    committed_record(state, root, &[("t1", "a")], b"the new content", Some(made));
}

#[test]
fn recovery_writes_a_torn_file_put_in_place_again_from_the_store() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    let made = torn(&root.join("a"), b"the new content");
    fs::set_permissions(root.join("a"), fs::Permissions::from_mode(0o640)).unwrap();
    a_committed_as(&state, root, made);
    let store = p.open();
    assert_eq!(store.recovered().rolled_forward, [1]);
    assert_eq!(fs::read(root.join("a")).unwrap(), b"the new content");
    let mode = fs::metadata(root.join("a")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640, "its mode stays");
    assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
}

#[test]
fn recovery_leaves_a_file_written_after_its_commit_as_it_is() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    let mut made = torn(&root.join("a"), b"the new content");
    fs::write(root.join("a"), "written since").unwrap();
    made.mtime -= 1_000_000_000;
    fs::write(root.join("b"), "replaced since").unwrap();
    let other = journal::Made::of(&fs::metadata(root.join("a")).unwrap());
    a_committed_as(&state, root, made);
    drop(p.open());
    assert_eq!(fs::read(root.join("a")).unwrap(), b"written since");
    // Made as another inode than the one at `b` now.
    committed_record(
        &state,
        root,
        &[("t2", "b")],
        b"the new content",
        Some(other),
    );
    drop(p.open());
    assert_eq!(fs::read(root.join("b")).unwrap(), b"replaced since");
}

#[test]
fn the_versions_of_a_commit_not_yet_checkpointed_are_spared_by_the_size_cap() {
    let p = Project::new();
    let root = p.root();
    fs::write(root.join("a"), "old").unwrap();
    // Room for this commit's versions, and no more.
    let tiny = Retention { keep: 10, cap: 6 };
    let store = p.open_with(tiny);
    commit_text(&store, root, 1, Some(b"old"), b"new");
    store.objects().cap(1);
    assert_eq!(store.objects().txs(objects::Side::Post, "a"), [1]);
    store.checkpoint().unwrap();
    store.objects().cap(1);
    assert!(store.objects().txs(objects::Side::Post, "a").is_empty());
}

#[test]
fn a_commit_makes_room_under_the_cap_first_and_refuses_versions_larger_than_it() {
    let p = Project::new();
    let root = p.root();
    fs::write(root.join("a"), "0123456789").unwrap();
    let cap = Retention { keep: 10, cap: 30 };
    let store = p.open_with(cap);
    commit_text(&store, root, 1, Some(b"0123456789"), b"abcdefghij");
    store.checkpoint().unwrap();
    assert!(store.make_room(20).is_ok());
    assert!(
        store.objects().total() <= 10,
        "the oldest versions went before the commit: {} bytes left",
        store.objects().total()
    );
    assert!(matches!(
        store.make_room(31),
        Err(StoreError::OverCap { bytes: 31, cap: 30 })
    ));
}

#[test]
fn a_commit_leaves_its_new_content_for_the_checkpoint_to_sync() {
    let p = Project::new();
    let root = p.root();
    fs::write(root.join("a"), "old").unwrap();
    let store = p.open();
    commit_text(&store, root, 1, Some(b"old"), b"new");
    let held = |store: &Store| {
        let u = store.unsettled.lock();
        u.files
            .iter()
            .map(|t| t.file.metadata().unwrap().ino())
            .collect::<Vec<_>>()
    };
    let ino = fs::metadata(root.join("a")).unwrap().ino();
    assert_eq!(held(&store), [ino]);
    store.settle_before_change(ino + 1);
    assert_eq!(held(&store), [ino], "another file changes nothing");
    assert!(store.unsynced());
    store.settle_before_change(ino);
    assert!(held(&store).is_empty(), "synced before its file changes");
    assert!(!store.unsynced());
    commit_text(&store, root, 2, Some(b"new"), b"newer");
    store.settle_before_move();
    assert!(held(&store).is_empty(), "synced before any rename");
    assert_eq!(
        fs::read_dir(root.join(".editfs/journal")).unwrap().count(),
        0
    );
}

#[test]
fn recovery_leaves_a_file_that_is_no_torn_copy_of_its_commit_as_it_is() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    // Written since in the same tick of the clock, or with its time set back.
    fs::write(root.join("a"), "THE NEW").unwrap();
    let made = journal::Made::of(&fs::metadata(root.join("a")).unwrap());
    a_committed_as(&state, root, made);
    drop(p.open());
    assert_eq!(fs::read(root.join("a")).unwrap(), b"THE NEW");
}

#[test]
fn a_record_that_says_what_its_files_were_is_finished_though_one_is_lost() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    fs::write(root.join("b"), "old").unwrap();
    // `a` was put in place before the crash; `b`'s temporary file is torn
    // and the store lost its copy: rolling back would leave `a` new.
    fs::write(root.join("a"), "new content").unwrap();
    fs::write(state.join("tmp/t2"), "new con").unwrap();
    let made = journal::Made::of(&fs::metadata(root.join("a")).unwrap());
    let files = [("t1", "a"), ("t2", "b")];
    committed_record(&state, root, &files, b"new content", Some(made));
    let store = p.open();
    assert_eq!(store.recovered().rolled_forward, [1]);
    assert_eq!(fs::read(root.join("a")).unwrap(), b"new content");
}

#[test]
fn recovery_leaves_a_file_changed_after_the_commit_point_as_it_is() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    for rel in ["a", "b"] {
        fs::write(root.join(rel), "read by tx 1").unwrap();
        fs::write(state.join("tmp").join(rel), "tx 1").unwrap();
    }
    let entry = |rel: &str| journal::Entry {
        found: Some(journal::Found::of(Some(
            &fs::metadata(root.join(rel)).unwrap(),
        ))),
        sha256: Some(sha256_hex(b"tx 1")),
        ..written(rel, rel)
    };
    let committed = record(1, root, true, vec![entry("a"), entry("b")]);
    journal::Journal::new(&state).write(&committed).unwrap();
    // The process that committed died; another went on and replaced `b`.
    fs::write(root.join("b.new"), "tx 2").unwrap();
    fs::rename(root.join("b.new"), root.join("b")).unwrap();
    drop(p.open());
    assert_eq!(fs::read(root.join("a")).unwrap(), b"tx 1");
    assert_eq!(
        fs::read(root.join("b")).unwrap(),
        b"tx 2",
        "tx 2 was overwritten"
    );
    assert_eq!(fs::read_dir(state.join("tmp")).unwrap().count(), 0);
}

/// `a` holding "old", and a committed record of "new content" for it that a
/// process left in the journal: its file no longer locked, that process died.
fn a_dead_process_committed_a(p: &Project) {
    fs::write(p.root().join("a"), "old").unwrap();
    fs::write(p.state().join("tmp/t1"), "new content").unwrap();
    committed_record(&p.state(), p.root(), &[("t1", "a")], b"new content", None);
}

#[test]
fn a_store_in_use_finishes_what_a_process_that_died_left_in_the_journal() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    let store = p.open();
    a_dead_process_committed_a(&p);
    store.recover_dead();
    assert_eq!(fs::read(root.join("a")).unwrap(), b"new content");
    assert!(
        store.entries().iter().any(|e| e.tx == 1),
        "its line is logged"
    );
    assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 0);
}

#[test]
fn a_lock_on_a_file_a_dead_process_committed_finishes_that_commit_first() {
    let p = Project::made();
    let store = p.open();
    a_dead_process_committed_a(&p);
    let _lock = store.lock(&Keys::new().path("a")).unwrap();
    assert_eq!(
        fs::read(p.root().join("a")).unwrap(),
        b"new content",
        "an edit under this lock would decide on what the dead commit replaced"
    );
}

#[test]
fn a_commit_names_its_new_content_in_its_record_for_recovery_to_check() {
    let p = Project::new();
    let root = p.root();
    fs::write(root.join("a"), "old").unwrap();
    let store = p.open();
    commit_text(&store, root, 1, Some(b"old"), b"new");
    let wal = fs::read_dir(root.join(".editfs/journal"))
        .unwrap()
        .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    assert!(wal.contains(&sha256_hex(b"new")), "{wal}");
}

#[test]
fn a_committed_removal_is_finished_by_recovery() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    fs::write(root.join("made"), "by tx 1").unwrap();
    journal::Journal::new(&state)
        .write(&removal(2, "made", root))
        .unwrap();
    let store = p.open();
    assert_eq!(store.recovered().rolled_forward, [2]);
    assert!(!root.join("made").exists());
}

/// A committed record of `tx` that removes `rel`.
fn removal(tx: u64, rel: &str, root: &Path) -> journal::Record {
    let gone = journal::Entry {
        remove: true,
        ..written(rel, "")
    };
    record(tx, root, true, vec![gone])
}

/// The journal entry of `rel` written from the temporary file `tmp`.
fn written(rel: &str, tmp: &str) -> journal::Entry {
    journal::Entry {
        rel: rel.into(),
        tmp: tmp.into(),
        beside: false,
        in_place: false,
        inode: None,
        remove: false,
        sha256: None,
        made: None,
        found: None,
    }
}

/// The record of `tx` under `root` for `files`, with its log line.
fn record(tx: u64, root: &Path, committed: bool, files: Vec<journal::Entry>) -> journal::Record {
    journal::Record {
        tx,
        root: root.to_owned(),
        committed,
        files,
        log: line(tx),
        inline: Vec::new(),
    }
}

/// Commits `f{tx}` holding `v{tx}`, a new file, as transaction `tx`.
fn commit_new_file(store: &Store, root: (BorrowedFd<'_>, &Path), tx: u64) {
    let lock = store.lock(&Keys::new().path("a")).unwrap();
    let (rel, text) = (format!("f{tx}"), format!("v{tx}"));
    let change = Change {
        rel: &rel,
        dir: root.0,
        old: None,
        pre: None,
        new: text.as_bytes(),
        new_sha: None,
        by: None,
        fresh: None,
    };
    store.commit(&lock, tx, root, &[change], line(tx)).unwrap();
}

#[test]
fn commits_share_one_journal_file_and_a_checkpoint_removes_it() {
    let p = Project::new();
    let root = p.root();
    let store = p.open();
    let rootfd = atomic::open_dir(root).unwrap();
    for tx in 1..=5 {
        commit_new_file(&store, (rootfd.as_fd(), root), tx);
    }
    let journal = || fs::read_dir(root.join(".editfs/journal")).unwrap().count();
    assert_eq!(journal(), 1, "no file per record");
    store.checkpoint().unwrap();
    assert_eq!(journal(), 0);
}

#[test]
fn a_commit_leaving_too_many_files_unsynced_checkpoints_at_once() {
    let p = Project::new();
    let root = p.root();
    let store = p.open();
    let rootfd = atomic::open_dir(root).unwrap();
    let rels: Vec<String> = (0..CHECKPOINT_FILES).map(|i| format!("f{i}")).collect();
    let changes: Vec<Change<'_>> = rels
        .iter()
        .map(|rel| Change {
            rel,
            dir: rootfd.as_fd(),
            old: None,
            pre: None,
            new: rel.as_bytes(),
            new_sha: None,
            by: None,
            fresh: None,
        })
        .collect();
    let lock = store.lock(&Keys::new().path("a")).unwrap();
    store
        .commit(&lock, 1, (rootfd.as_fd(), root), &changes, line(1))
        .unwrap();
    assert!(store.unsettled.lock().files.is_empty());
    assert_eq!(
        fs::read_dir(root.join(".editfs/journal")).unwrap().count(),
        0
    );
}

#[test]
fn with_a_checkpointer_a_due_checkpoint_is_left_to_it_until_far_behind() {
    let p = Project::new();
    let root = p.root();
    let store = p.open();
    let rootfd = atomic::open_dir(root).unwrap();
    assert!(
        !store.wait_for_checkpoint(std::time::Duration::ZERO),
        "nothing due"
    );
    let commit = |tx: u64| commit_new_file(&store, (rootfd.as_fd(), root), tx);
    let waiting = || store.unsettled.lock().records.len();
    for tx in 1..=CHECKPOINT_AFTER as u64 {
        commit(tx);
    }
    assert_eq!(
        waiting(),
        CHECKPOINT_AFTER,
        "no commit synced under the lock"
    );
    assert!(
        store.wait_for_checkpoint(std::time::Duration::from_secs(60)),
        "due"
    );
    let far = (CHECKPOINT_BEHIND * CHECKPOINT_AFTER) as u64;
    for tx in CHECKPOINT_AFTER as u64 + 1..=far {
        commit(tx);
    }
    assert_eq!(waiting(), far as usize, "no commit synced under the lock");
    store.catch_up(1);
    assert_eq!(waiting(), far as usize, "a small transaction leaves it");
    store.catch_up(17);
    assert_eq!(waiting(), 0, "a large one far behind made it itself");
    for tx in far + 1..=3 * far {
        commit(tx);
    }
    store.catch_up(1);
    assert_eq!(waiting(), 0, "at twice as far, any transaction makes it");
}

#[test]
fn a_record_dropped_beside_a_live_one_is_not_finished_again_after_a_crash() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    let j = journal::Journal::new(&state);
    j.write(&removal(1, "made", root)).unwrap();
    j.write(&journal::Record {
        committed: false,
        ..removal(2, "other", root)
    })
    .unwrap();
    // Transaction 1 was checkpointed while 2 was still under way...
    j.remove(&[1]).unwrap();
    // ...and a later one made its file again, before the crash.
    fs::write(root.join("made"), "again").unwrap();
    j.abandon();
    let store = p.open();
    assert_eq!(store.recovered().rolled_back, [2]);
    assert!(store.recovered().rolled_forward.is_empty());
    assert_eq!(fs::read(root.join("made")).unwrap(), b"again");
    assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 0);
}

/// `record`, carrying the bytes of `content`.
fn carrying(mut record: journal::Record, content: &[u8]) -> journal::Record {
    record.inline = vec![journal::Inline {
        sha256: crate::engine::sha256_hex(content),
        len: content.len() as u64,
    }];
    record
}

/// The journal file of a store whose records stay (a crash before the
/// checkpoint), and the record it holds.
fn record_left(state: &Path, record: &journal::Record, carried: &[&[u8]]) -> PathBuf {
    let j = journal::Journal::new(state);
    j.write_carrying(record, carried).unwrap();
    j.abandon();
    let wal = fs::read_dir(state.join("journal")).unwrap().next().unwrap();
    wal.unwrap().path()
}

#[test]
fn bytes_a_record_carries_are_never_read_as_records() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    fs::write(root.join("victim"), "x").unwrap();
    // A file's content that holds what reads as a record removing `victim`.
    let forged = serde_json::to_string(&removal(7, "victim", root)).unwrap();
    let content = format!("fn main() {{}}\n{forged}\n// more\n");
    let record = carrying(removal(5, "other", root), content.as_bytes());
    let wal = record_left(&state, &record, &[content.as_bytes()]);
    let whole = fs::read(&wal).unwrap();
    // A crash tore the record's own line: what follows it is not read.
    let mut torn = whole.clone();
    torn[10..20].fill(0);
    fs::write(&wal, &torn).unwrap();
    let store = p.open();
    assert!(store.recovered().is_empty(), "{:?}", store.recovered());
    assert!(
        root.join("victim").exists(),
        "a carried line was read as a record"
    );
    drop(store);
    // Whole, the record is finished, and what it carries is only bytes.
    fs::write(root.join("other"), "y").unwrap();
    record_left(&state, &record, &[content.as_bytes()]);
    let store = p.open();
    assert_eq!(store.recovered().rolled_forward, [5]);
    assert!(!root.join("other").exists());
    assert!(root.join("victim").exists());
}

#[test]
fn a_record_whose_carried_bytes_are_torn_never_reached_its_commit_point() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    fs::write(root.join("a"), "x").unwrap();
    let content = b"the new content, carried";
    let record = carrying(removal(3, "a", root), content);
    let wal = record_left(&state, &record, &[content]);
    let mut torn = fs::read(&wal).unwrap();
    let n = torn.len();
    torn[n - 5..].fill(0);
    fs::write(&wal, &torn).unwrap();
    let store = p.open();
    assert!(store.recovered().is_empty(), "{:?}", store.recovered());
    assert!(root.join("a").exists());
}

#[test]
fn recovery_leaves_the_journal_of_a_live_process_to_it() {
    let p = Project::made();
    let (root, state) = (p.root(), p.state());
    fs::write(root.join("made"), "x").unwrap();
    let live = journal::Journal::new(&state);
    live.write(&removal(1, "made", root)).unwrap();
    let store = p.open();
    assert!(store.recovered().is_empty(), "{}", store.recovered());
    assert!(root.join("made").exists());
    assert_eq!(fs::read_dir(state.join("journal")).unwrap().count(), 1);
}

#[test]
fn stores_sharing_a_directory_never_hand_out_an_id_twice() {
    let p = Project::new();
    let dir = p.state();
    let first = p.open();
    first.log(&line(41)).unwrap();
    fs::write(dir.join("txid"), "7\n").unwrap();
    // Another process opens the directory and moves the counter past the log.
    let second = p.open();
    let lock = first.lock(&Keys::new().path("a")).unwrap();
    assert_eq!(first.next_tx().unwrap(), 42);
    drop(lock);
    let _lock = second.lock(&Keys::new().path("a")).unwrap();
    assert_eq!(second.next_tx().unwrap(), 43);
}

#[test]
fn a_files_lock_holds_up_only_transactions_on_that_file_by_any_name() {
    let p = Project::new();
    fs::write(p.root().join("a"), "a").unwrap();
    fs::hard_link(p.root().join("a"), p.root().join("b")).unwrap();
    let first = p.open();
    let second = p.open();
    let a = File::open(p.root().join("a")).unwrap();
    let held = first.lock(&Keys::new().path("a").file(Some(&a))).unwrap();
    // Another file goes by at once, as does the id counter.
    drop(second.lock(&Keys::new().path("c")).unwrap());
    second.next_tx().unwrap();
    let (done, waited) = std::sync::mpsc::channel();
    let b = File::open(p.root().join("b")).unwrap();
    let other_name = std::thread::spawn(move || {
        let lock = second.lock(&Keys::new().path("b").file(Some(&b)));
        done.send(()).unwrap();
        lock.map(drop)
    });
    assert!(
        waited
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err(),
        "the file's other name took its lock while it was held"
    );
    drop(held);
    waited
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the lock was let go");
    other_name.join().unwrap().unwrap();
}

#[test]
fn a_thread_that_holds_a_files_lock_takes_it_again_at_once() {
    let p = Project::new();
    let store = p.open();
    let outer = store.lock(&Keys::new().path("a").path("b")).unwrap();
    // As keeping a removed file's pre-image does inside a rename's locks.
    drop(store.lock(&Keys::new().path("a")).unwrap());
    let inner = store.lock(&Keys::new().path("b").path("c")).unwrap();
    drop(outer);
    // "c" was the inner lock's own: another thread waits for it, not for "a".
    let (done, waited) = std::sync::mpsc::channel();
    let other = p.open();
    let t = std::thread::spawn(move || {
        drop(other.lock(&Keys::new().path("a")).unwrap());
        done.send("a").unwrap();
        drop(other.lock(&Keys::new().path("c")).unwrap());
        done.send("c").unwrap();
    });
    let d = std::time::Duration::from_secs(30);
    assert_eq!(
        waited.recv_timeout(d).unwrap(),
        "a",
        "the outer lock let a go"
    );
    assert!(
        waited
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err()
    );
    drop(inner);
    assert_eq!(waited.recv_timeout(d).unwrap(), "c");
    t.join().unwrap();
}

#[test]
fn opening_moves_a_counter_that_fell_behind_the_log() {
    let p = Project::new();
    let dir = p.state();
    let store = p.open();
    store.log(&line(41)).unwrap();
    fs::write(dir.join("txid"), "7\n").unwrap();
    drop(store);
    let store = p.open();
    let _lock = store.lock(&Keys::new().path("a")).unwrap();
    assert_eq!(store.next_tx().unwrap(), 42);
}

#[test]
fn the_log_moves_to_log_1_past_its_bound_and_both_are_read() {
    let p = Project::new();
    let (store, dir) = (p.open(), p.state());
    let big = LogEntry {
        command: "x".repeat(200),
        ..line(1)
    };
    let per_line = serde_json::to_string(&big).unwrap().len() as u64 + 1;
    let lines = 2 * LOG_ROTATE / per_line + 10;
    for tx in 1..=lines {
        store.log(&LogEntry { tx, ..big.clone() }).unwrap();
    }
    let size = |n: &str| fs::metadata(dir.join(n)).map_or(0, |m| m.len());
    assert!(size("log") < LOG_ROTATE + per_line, "{}", size("log"));
    assert!(size("log.1") < LOG_ROTATE + per_line);
    let txs: Vec<u64> = store.entries().iter().map(|e| e.tx).collect();
    assert!(
        txs.len() as u64 > LOG_ROTATE / per_line,
        "what is kept is read"
    );
    assert!(
        txs.windows(2).all(|w| w[1] == w[0] + 1),
        "oldest first, no gap"
    );
    assert_eq!(txs.last(), Some(&lines));
    assert_eq!(last_logged_tx(&dir.join("log")), Some(lines));
}

#[test]
fn a_line_goes_to_the_log_another_process_started_after_moving_the_old_one() {
    let p = Project::new();
    let (store, dir) = (p.open(), p.state());
    store.log(&line(1)).unwrap();
    // What another process's rotation does.
    fs::rename(dir.join("log"), dir.join(OLD_LOG)).unwrap();
    store.log(&line(2)).unwrap();
    assert_eq!(last_in(&dir.join("log")), Some(2));
    assert_eq!(last_in(&dir.join(OLD_LOG)), Some(1));
    let txs: Vec<u64> = store.entries().iter().map(|e| e.tx).collect();
    assert_eq!(txs, [1, 2]);
}

#[test]
fn the_state_directory_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let dir = p.state();
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    p.open();
    let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn nearest_state_dir_is_found() {
    let p = Project::new();
    fs::create_dir_all(p.state()).unwrap();
    fs::create_dir_all(p.root().join("a/b")).unwrap();
    let found = Store::find_for(&p.root().join("a/b/f.txt"));
    assert_eq!(found, Some(p.state()));
}

#[cfg(test)]
impl Store {
    /// What `kill -9` leaves of this store: no checkpoint, its journal file unlocked.
    fn killed(self) {
        self.journal.abandon();
        std::mem::forget(self);
    }
}

#[test]
fn a_copy_stops_at_the_size_room_was_made_for_and_keeps_nothing_of_a_file_that_grew() {
    let p = Project::new();
    let store = p.open();
    let grown = store.objects().put_from(&mut &b"0123456789"[..], 5);
    assert!(
        matches!(grown, Err(StoreError::Grew { limit: 5, .. })),
        "{grown:?}"
    );
    let objects = p.state().join("objects");
    let left: Vec<_> = fs::read_dir(&objects).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
    let whole = store.objects().put_from(&mut &b"01234"[..], 5).unwrap();
    assert_eq!(store.objects().content(&whole).unwrap(), b"01234");
}

/// What `entries` parsed is read again only where the files changed: lines
/// appended since, a line half written (left for the next read), a log moved
/// to `log.1` by another process, a log replaced.
#[test]
fn the_log_read_again_gives_every_line_as_the_files_hold_them_now() {
    let p = Project::new();
    let (store, dir) = (p.open(), p.state());
    let txs = |s: &Store| s.entries().iter().map(|e| e.tx).collect::<Vec<u64>>();
    store.log(&line(1)).unwrap();
    assert_eq!(txs(&store), [1]);
    store.log(&line(2)).unwrap();
    let half = serde_json::to_string(&line(3)).unwrap();
    let (first, rest) = half.split_at(half.len() / 2);
    let append = |text: &str| {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(dir.join("log"))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    append(first);
    assert_eq!(txs(&store), [1, 2], "a line being written is not read yet");
    append(&format!("{rest}\n"));
    assert_eq!(txs(&store), [1, 2, 3]);
    fs::rename(dir.join("log"), dir.join(OLD_LOG)).unwrap();
    store.log(&line(4)).unwrap();
    assert_eq!(txs(&store), [1, 2, 3, 4]);
    let other = serde_json::to_string(&line(9)).unwrap();
    fs::write(dir.join("log.new"), format!("{other}\n")).unwrap();
    fs::rename(dir.join("log.new"), dir.join("log")).unwrap();
    assert_eq!(txs(&store), [1, 2, 3, 9], "a log replaced is read whole");
}

#[test]
fn a_branch_takes_room_under_the_cap_and_its_base_keeps_its_version() {
    let p = Project::new();
    let root = p.root();
    fs::write(root.join("a"), "at the base").unwrap();
    let store = p.open_with(Retention { keep: 10, cap: 60 });
    let branch = p.state().join(BRANCHES).join("b");
    fs::create_dir_all(branch.join("upper")).unwrap();
    fs::write(branch.join("branch.json"), r#"{"base":0}"#).unwrap();
    fs::write(branch.join("upper/made"), [0u8; 30]).unwrap();
    commit_text(&store, root, 1, Some(b"at the base"), b"0123456789");
    commit_text(&store, root, 2, Some(b"0123456789"), b"abcdefghij");
    commit_text(&store, root, 3, Some(b"abcdefghij"), b"ABCDEFGHIJ");
    store.checkpoint().unwrap();
    store.objects().cap(60);
    assert!(
        store.objects().total() + 30 <= 60,
        "{} bytes of versions beside the branch's 30",
        store.objects().total()
    );
    assert_eq!(
        store.objects().read(objects::Side::Pre, "a", 1).as_deref(),
        Some(&b"at the base"[..]),
        "the base's version stays"
    );
}
