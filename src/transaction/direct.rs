//! Changes that bypass the control files, recorded as transactions: a direct
//! write (`sed -i`, an editor's save, `cp` over a file) and a removal (`rm`).
//!
//! A direct write is recorded in two steps. `begin` keeps the pre-image when the
//! file is opened for writing (its id is taken then); `finish` keeps the result
//! once the writer is done and appends the log line with the real line counts. A
//! removal is recorded at once; its pre-image is the removed inode itself, linked
//! into the store, when the store is on the same file system.

use std::ffi::OsStr;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use super::{Who, now};
use crate::engine::sha256_hex;
use crate::store::logline::{Access, FileEntry, Kind, LogEntry, Outcome};
use crate::store::objects::Side;
use crate::store::{Store, StoreError};

/// A direct write whose pre-image is kept and whose result is not known yet.
#[derive(Clone, Debug)]
pub struct Pending {
    pub tx: u64,
    pub rel: String,
    before: String,
    access: Option<Access>,
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

/// Keeps `bytes`, the content of `rel` before a direct write, under a new id;
/// `access` is the file's mode and owner then.
pub fn begin(
    store: &Store,
    rel: &str,
    (bytes, access): (&[u8], Option<Access>),
    who: &Who,
) -> Result<Pending, StoreError> {
    let lock = store.lock()?;
    let tx = store.next_tx(&lock)?;
    store.keep_pre_image(tx, rel, bytes)?;
    Ok(Pending {
        tx,
        rel: rel.to_owned(),
        before: sha256_hex(bytes),
        access,
        time: now(),
        who: who.clone(),
    })
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
    let lock = store.lock()?;
    let tx = store.next_tx(&lock)?;
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
    let (lines_added, lines_removed) = match (store.objects().read(Side::Pre, &p.rel, p.tx), after)
    {
        (Some(before), Some(after)) => line_changes(&before, after),
        _ => (0, 0),
    };
    let _lock = store.lock()?;
    if let Some(after) = after {
        store
            .objects()
            .keep_with(Side::Post, &p.rel, p.tx, after, false)?;
    }
    let file = FileEntry {
        file: p.rel.clone(),
        before: Some(p.before.clone()),
        sha256: after.map(sha256_hex),
        lines_added,
        lines_removed,
        access: p.access,
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
    let access = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| Access {
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
        });
    let kept = store.lock().and_then(|lock| {
        let tx = store.next_tx(&lock)?;
        let bytes = store.keep_removed(tx, rel, dir, name, open)?;
        Ok((lock, tx, bytes))
    });
    let (lock, tx, bytes) = match kept {
        Ok(k) => k,
        Err(e) => {
            log::error!("cannot keep the pre-image of {rel} before its removal: {e}");
            return unlink();
        }
    };
    if let Err(e) = unlink() {
        store.objects().forget(rel, tx);
        return Err(e);
    }
    let file = FileEntry {
        file: rel.to_owned(),
        before: Some(sha256_hex(&bytes)),
        lines_removed: line_changes(&bytes, b"").1,
        removed: true,
        access,
        ..FileEntry::default()
    };
    if let Err(e) = store.log(&entry(tx, now(), Kind::Delete, Outcome::Ok, file, who)) {
        log::error!("{e}");
    }
    drop(lock);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_changes_count_what_a_diff_shows() {
        assert_eq!(line_changes(b"a\nb\nc\n", b"a\nB\nc\nd\n"), (2, 1));
        assert_eq!(line_changes(b"a\nb\n", b""), (0, 2));
        assert_eq!(line_changes(b"same\n", b"same\n"), (0, 0));
    }
}
