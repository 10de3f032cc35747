//! Changes that bypass the control files, recorded as transactions: a direct
//! write (`sed -i`, an editor's save, `cp` over a file) and a removal (`rm`).
//!
//! A direct write is recorded in two steps. `begin` keeps the pre-image when the
//! file is opened for writing (its id is taken then); `finish` keeps the result
//! once the writer is done and appends the log line with the real line counts. A
//! removal is recorded at once; its pre-image is the removed inode itself, linked
//! into the store, when the store is on the same file system.

use std::ffi::OsStr;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::BorrowedFd;
use std::time::Duration;

use super::{Who, now};
use crate::engine::sha256_hex;
use crate::store::{
    Access, FileEntry, Keys, LogEntry, LogKind as Kind, LogOutcome as Outcome, Side, Store,
    StoreError, Verdict,
};

/// A direct write whose pre-image is kept and whose result is not known yet.
#[derive(Clone, Debug)]
pub struct Pending {
    pub tx: u64,
    pub rel: String,
    /// The hash of the pre-image; `None` for a file the write created.
    before: Option<String>,
    access: Option<Access>,
    above: Vec<Access>,
    /// The directories made with the file (see `FileEntry::dirs`).
    dirs: Vec<String>,
    time: String,
    who: Who,
}

fn entry(
    tx: u64,
    time: String,
    kind: Kind,
    outcome: Outcome,
    file: FileEntry,
    who: &Who,
) -> LogEntry {
    LogEntry {
        tx,
        time,
        kind,
        outcome,
        files: vec![file],
        pid: who.pid,
        command: who.command.clone(),
        ..LogEntry::default()
    }
}

/// Lines added and removed from `before` to `after`. A writer may rewrite a whole
/// large file, so the diff gets a time limit: past it the counts may be larger than
/// the least possible, never wrong about what changed.
fn line_changes(before: &[u8], after: &[u8]) -> (usize, usize) {
    let (before, after) = (
        String::from_utf8_lossy(before),
        String::from_utf8_lossy(after),
    );
    let diff = similar::TextDiff::configure()
        .timeout(Duration::from_millis(200))
        .diff_lines(&*before, &*after);
    diff.ops().iter().fold((0, 0), |(a, r), op| {
        let (tag, old, new) = op.as_tag_tuple();
        match tag {
            similar::DiffTag::Equal => (a, r),
            _ => (a + new.len(), r + old.len()),
        }
    })
}

/// Keeps what `file` holds, the content of `rel` before a direct write, under a
/// new id; `access` is the file's mode and owner then, `above` the directories
/// on its way others could not search (see `FileEntry::above`). The copy is made before
/// the store's lock is taken, which is then held only to hand out the id and
/// name the copy: a slow copy of a big file holds up no transaction on another
/// file. (A hard link would not do: the file is about to be written in place.)
/// Room is made for it under `--keep-bytes` first.
pub fn begin<F: Read + Seek>(
    store: &Store,
    rel: &str,
    (file, access, above): (&mut F, Option<Access>, Vec<Access>),
    who: &Who,
) -> Result<Pending, StoreError> {
    // What cannot seek (a pipe) has no size to make room for beforehand. A
    // file is copied no further than the size room was made for: one a
    // writer makes grow meanwhile is not kept (`StoreError::Grew`).
    let most = match file.seek(SeekFrom::End(0)) {
        Ok(size) => {
            file.seek(SeekFrom::Start(0))
                .map_err(crate::store::io_err("read", std::path::Path::new(rel)))?;
            store.make_room(size)?;
            size
        }
        Err(_) => u64::MAX,
    };
    let sha = store.objects().put_from(file, most)?;
    let lock = store.lock(&Keys::new().path(rel))?;
    let tx = store.next_tx()?;
    if store.keep_pre_image(&lock, tx, rel, &sha)?.is_none() {
        // The copy went with the last version naming the same bytes: made again.
        file.seek(SeekFrom::Start(0))
            .map_err(crate::store::io_err("read", std::path::Path::new(rel)))?;
        let again = store.objects().put_from(file, most)?;
        store.keep_pre_image(&lock, tx, rel, &again)?;
    }
    Ok(Pending {
        tx,
        rel: rel.to_owned(),
        before: Some(sha),
        access,
        above,
        dirs: Vec::new(),
        time: now(),
        who: who.clone(),
    })
}

/// Takes an id for a file a write through the mount has just created, where no
/// version was kept before: its log line (at `finish`) says it was created, so
/// an undo, or a rewind to a point before it, removes it again.
/// `access` and `above` are the new file's, as for `begin`: who may see its
/// line of the history.
pub fn begin_created(
    store: &Store,
    rel: &str,
    (access, above): (Option<Access>, Vec<Access>),
    who: &Who,
) -> Result<Pending, StoreError> {
    let _lock = store.lock(&Keys::new().path(rel))?;
    let tx = store.next_tx()?;
    Ok(Pending {
        tx,
        rel: rel.to_owned(),
        before: None,
        access,
        above,
        dirs: Vec::new(),
        time: now(),
        who: who.clone(),
    })
}

impl Pending {
    /// Whether it records a file the write created (`begin_created`).
    pub fn created(&self) -> bool {
        self.before.is_none()
    }

    /// The same, with `dirs` made for the file: a directory moved through
    /// the mount made its name for each file it holds, and a rewind removes
    /// it again once it emptied it.
    pub fn with_dirs(mut self, dirs: Vec<String>) -> Pending {
        self.dirs = dirs;
        self
    }

    /// The process that began the write.
    pub fn who_pid(&self) -> u32 {
        self.who.pid
    }

    /// The write, its file found with the owner and mode `now` when it ended.
    /// When they differ from those it began with (another user's file was
    /// renamed over it, or it over another's), the line records rights that
    /// guard both versions: no content shows under rights its file did not
    /// have. One line holds one owner and mode, so for two owners only root
    /// may read them (no mode bit), under the first version's owner: the one
    /// an undo of the write restores, which `undo` checks the file at the
    /// name still has.
    pub fn seen_as(mut self, now: Option<Access>) -> Pending {
        self.access = match (self.access, now) {
            (Some(before), Some(now)) if before == now => Some(before),
            (Some(before), Some(now)) if (before.uid, before.gid) == (now.uid, now.gid) => {
                Some(Access {
                    mode: before.mode & now.mode,
                    acl: before.acl || now.acl,
                    ..before
                })
            }
            (Some(before), Some(_)) => Some(Access {
                mode: 0,
                acl: false,
                ..before
            }),
            (before, None) => before,
            (None, now) => now,
        };
        self
    }
}

/// Records that `rel` (`size` bytes) was written or removed without a pre-image,
/// because it is over the size limit.
pub fn skipped(
    store: &Store,
    kind: Kind,
    rel: &str,
    size: u64,
    who: &Who,
) -> Result<(), StoreError> {
    log::info!("{rel}: {size} bytes, over the pre-image limit: not kept");
    let _lock = store.lock(&Keys::new().path(rel))?;
    let tx = store.next_tx()?;
    let file = FileEntry {
        file: rel.to_owned(),
        removed: kind == Kind::Delete,
        reason: Some("over the size limit".into()),
        ..FileEntry::default()
    };
    store.log(&entry(tx, now(), kind, Outcome::Skipped, file, who))
}

/// Records the result of the write `p` began: `after` is the file as the writer
/// left it, `None` when it can no longer be read.
pub fn finish(store: &Store, p: &Pending, after: Option<&[u8]>) -> Result<(), StoreError> {
    let before = match p.before {
        Some(_) => store.objects().read(Side::Pre, &p.rel, p.tx),
        None => Some(Vec::new()),
    };
    let (lines_added, lines_removed) = match (before, after) {
        (Some(before), Some(after)) => line_changes(&before, after),
        _ => (0, 0),
    };
    // Room under `--keep-bytes` first, as for every version kept; stored
    // before the lock, as in `begin`; named under it.
    if let Some(a) = after {
        store.make_room(a.len() as u64)?;
    }
    let sha = after.map(|a| store.objects().put(a, false)).transpose()?;
    let _lock = store.lock(&Keys::new().path(&p.rel))?;
    if let (Some(after), Some(sha)) = (after, &sha)
        && store
            .objects()
            .link(Side::Post, &p.rel, p.tx, sha)?
            .is_none()
    {
        store
            .objects()
            .keep_with(Side::Post, &p.rel, p.tx, after, false)?;
    }
    let file = FileEntry {
        file: p.rel.clone(),
        before: p.before.clone(),
        created: p.before.is_none(),
        sha256: sha,
        lines_added,
        lines_removed,
        access: p.access,
        above: p.above.clone(),
        dirs: p.dirs.clone(),
        ..FileEntry::default()
    };
    store.log(&entry(
        p.tx,
        p.time.clone(),
        Kind::Direct,
        Outcome::Ok,
        file,
        &p.who,
    ))
}

/// Removes the regular file `name` in `dir` (`rel` in the project) with `unlink`,
/// keeping it first (see `Store::keep_removed`) and recording the removal once it
/// happened. A store that fails costs the pre-image, never the removal. `open`
/// says the file is still open somewhere, so its inode must not become the kept copy.
pub fn remove<E>(
    store: &Store,
    dir: BorrowedFd<'_>,
    name: &OsStr,
    rel: &str,
    who: &Who,
    open: bool,
    unlink: impl FnOnce() -> Result<(), E>,
) -> Result<(), E> {
    let access = Access::at(dir, name);
    let numbered = store
        .lock(&Keys::new().path(rel))
        .and_then(|lock| Ok((lock, store.next_tx()?)));
    let (lock, tx) = match numbered {
        Ok(n) => n,
        Err(e) => {
            log::error!("cannot keep the pre-image of {rel} before its removal: {e}");
            return unlink();
        }
    };
    // Every id taken has its line, whatever happens next.
    let unkept = |outcome, reason: String| {
        let file = FileEntry {
            file: rel.to_owned(),
            removed: outcome == Outcome::Skipped,
            reason: Some(reason),
            ..FileEntry::default()
        };
        if let Err(e) = store.log(&entry(tx, now(), Kind::Delete, outcome, file, who)) {
            log::error!("{e}");
        }
    };
    let bytes = match store.keep_removed(tx, rel, dir, name, open) {
        Ok(bytes) => bytes,
        Err(e) => {
            log::error!("cannot keep the pre-image of {rel} before its removal: {e}");
            let removed = unlink();
            match &removed {
                Ok(()) => unkept(Outcome::Skipped, format!("its pre-image was not kept: {e}")),
                Err(_) => unkept(Outcome::Failed, "the removal failed".into()),
            }
            return removed;
        }
    };
    if let Err(e) = unlink() {
        store.objects().forget(rel, tx);
        unkept(Outcome::Failed, "the removal failed".into());
        return Err(e);
    }
    let file = FileEntry {
        file: rel.to_owned(),
        before: Some(sha256_hex(&bytes)),
        lines_removed: line_changes(&bytes, b"").1,
        removed: true,
        access,
        above: Access::above(dir, rel),
        ..FileEntry::default()
    };
    if let Err(e) = store.log(&entry(tx, now(), Kind::Delete, Outcome::Ok, file, who)) {
        log::error!("{e}");
    }
    drop(lock);
    Ok(())
}

/// Removes the regular file `name` in `dir` (`rel` in the project, `access` its
/// mode and owner) by moving it into the store, which keeps its pre-image and
/// logs the removal in the background (see `store::removals`): no byte of it is
/// read, and no lock taken, here. `decide` says, from the status of what was
/// moved, what the store does with it, before the background may file it;
/// returns what it said. On an error nothing was moved.
pub fn remove_later(
    store: &Store,
    at: (BorrowedFd<'_>, &OsStr),
    rel: &str,
    (who, access): (&Who, Access),
    decide: impl FnOnce(&rustix::fs::Stat) -> Verdict,
) -> Result<Verdict, rustix::io::Errno> {
    let file = FileEntry {
        file: rel.to_owned(),
        removed: true,
        access: Some(access),
        above: Access::above(at.0, rel),
        ..FileEntry::default()
    };
    let line = entry(0, now(), Kind::Delete, Outcome::Ok, file, who);
    store.begin_removal(&line, at, decide)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_that_fails_after_its_id_was_taken_still_logs_that_id() {
        use std::os::fd::AsFd;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::write(root.join("f.txt"), "kept\n").unwrap();
        let store = Store::open(&root.join(".editfs")).unwrap();
        let dir = crate::store::open_dir(root).unwrap();
        let who = Who::default();
        let failed = remove(
            &store,
            dir.as_fd(),
            "f.txt".as_ref(),
            "f.txt",
            &who,
            true,
            || Err::<(), _>("the file system refused"),
        );
        assert!(failed.is_err());
        let last = store.next_tx().unwrap() - 1;
        let logged: Vec<u64> = store.entries().iter().map(|e| e.tx).collect();
        assert_eq!(
            logged,
            (1..=last).collect::<Vec<_>>(),
            "an id without its line"
        );
        assert!(root.join("f.txt").exists());
    }

    #[test]
    fn a_slow_pre_image_copy_holds_up_no_edit_of_another_file() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::write(root.join("other.txt"), "a\n").unwrap();
        let store = Store::open(&root.join(".editfs")).unwrap();
        // The big file's bytes come through a pipe: its copy lasts as long as
        // the test keeps the pipe open.
        let fifo = root.join("big.fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from(0o600),
            0,
        )
        .unwrap();
        let rootfd = crate::store::open_dir(root).unwrap();
        let who = Who::default();
        let (edited, done) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let copying = s.spawn(|| {
                let mut from = std::fs::File::open(&fifo).unwrap();
                begin(&store, "big.txt", (&mut from, None, Vec::new()), &who)
            });
            let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
            writer.write_all(b"first half\n").unwrap();
            let objects = root.join(".editfs/objects");
            while !std::fs::read_dir(&objects).is_ok_and(|mut d| d.next().is_some()) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            s.spawn(|| {
                let target = crate::Target {
                    root: crate::Root {
                        fd: rootfd.as_fd(),
                        path: root,
                        mount: None,
                        from: std::path::Path::new(""),
                        caller: None,
                    },
                    rel: "other.txt",
                    label: "other.txt",
                    who: &who,
                    dir: None,
                    meant: None,
                    hold: None,
                };
                let payload = b"<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
                let options = crate::engine::Options::default();
                let report = crate::run(Some(&store), &target, payload, &options);
                let _ = edited.send(report);
            });
            let report = done.recv_timeout(std::time::Duration::from_secs(20));
            writer.write_all(b"second half\n").unwrap();
            drop(writer);
            let report = report.expect("the edit waited for the copy of another file");
            assert_eq!(report.outcome, crate::engine::Outcome::Ok, "{report}");
            assert_eq!(report.tx, 1, "numbered while the copy was still going on");
            let pending = copying.join().unwrap().unwrap();
            assert_eq!(pending.tx, 2);
            assert_eq!(
                store.objects().read(Side::Pre, "big.txt", 2).as_deref(),
                Some(&b"first half\nsecond half\n"[..])
            );
            assert_eq!(
                pending.before,
                Some(sha256_hex(b"first half\nsecond half\n"))
            );
        });
        assert_eq!(std::fs::read(root.join("other.txt")).unwrap(), b"b\n");
    }

    #[test]
    fn line_changes_count_what_a_diff_shows() {
        assert_eq!(line_changes(b"a\nb\nc\n", b"a\nB\nc\nd\n"), (2, 1));
        assert_eq!(line_changes(b"a\nb\n", b""), (0, 2));
        assert_eq!(line_changes(b"same\n", b"same\n"), (0, 0));
    }
}
