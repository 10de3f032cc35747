//! Recovery, before anything else is served, rolls a committed record forward
//! (finishing whatever was not yet in place, which may be nothing) and a prepared
//! one back (removing its temporary files), so every file of a transaction ends
//! wholly old or wholly new, all together, and no temporary file is left in the
//! project. A committed record cut short by a crash does not parse, and counts
//! as prepared. A new content a crash of the machine left torn (the temporary
//! files are synced by the checkpoint, after the commit point) is written again
//! from the store, which holds it durably, or from the bytes a record carries
//! (`repair`); so is the store's copy of each version a record carries. A record that does not
//! say what its temporary files were (`Made`: one of an older version, which
//! synced them before the record) and whose temporary file is torn with no
//! whole copy in the store never reached its commit point: that transaction
//! is rolled back.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use super::{
    Carried, Entry, Journal, Line, Record, discard_in, file_name, parent_beneath, tmp_dir_of,
};
use crate::{LogEntry, StoreError, atomic, io_err};

/// The journal files recovery read, to be removed once what it did is synced.
#[derive(Debug, Default)]
pub struct Handled {
    files: Vec<PathBuf>,
    /// The files, locked until they are removed.
    held: Vec<File>,
}

/// What recovery did, for the user.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub rolled_forward: Vec<u64>,
    pub rolled_back: Vec<u64>,
}

impl Recovered {
    pub fn is_empty(&self) -> bool {
        self.rolled_forward.is_empty() && self.rolled_back.is_empty()
    }
}

impl std::fmt::Display for Recovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        let mut parts = Vec::new();
        if !self.rolled_forward.is_empty() {
            parts.push(format!(
                "completed interrupted transaction(s) {}",
                list(&self.rolled_forward)
            ));
        }
        if !self.rolled_back.is_empty() {
            parts.push(format!(
                "discarded unfinished transaction(s) {} (nothing had changed)",
                list(&self.rolled_back)
            ));
        }
        write!(f, "recovery: {}", parts.join("; "))
    }
}

impl Journal {
    /// Removes the files recovery read (see `recover`).
    pub fn remove_handled(&self, handled: Handled) -> Result<(), StoreError> {
        let Handled { files, held } = handled;
        for path in files {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_err("remove", &path)(e));
                }
                _ => {}
            }
        }
        drop(held);
        Ok(())
    }

    /// How many transactions a crash interrupted: records in files no live
    /// process holds (reads only).
    pub fn interrupted(&self) -> usize {
        self.records().0.len()
    }

    /// Every transaction's record in the files no live process holds, oldest
    /// first: its committed one if it has one that reads whole, else its
    /// prepared one; the bytes those committed records carry; and those files.
    fn records(&self) -> (Vec<Record>, Carried, Handled) {
        let mut handled = Handled::default();
        let mut carried = Carried::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return (Vec::new(), carried, handled);
        };
        let mut out = Vec::new();
        let mut dropped = BTreeSet::new();
        let mut carried_by = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with(atomic::TMP_PREFIX) {
                continue;
            }
            let path = e.path();
            let Some((held, bytes)) = unheld(&path) else {
                continue;
            };
            handled.held.push(held);
            for (line, bytes) in lines(&bytes, &path) {
                match line {
                    Line::Record(r) => {
                        let live = r.inline.iter().map(|i| (r.tx, i.sha256.clone()));
                        for ((tx, sha), b) in live.zip(bytes) {
                            carried_by.push((tx, sha, b.to_vec()));
                        }
                        out.push(*r);
                    }
                    Line::Dropped { dropped: txs } => dropped.extend(txs),
                }
            }
            handled.files.push(path);
        }
        out.retain(|r| !dropped.contains(&r.tx));
        out.sort_by_key(|r| (r.tx, !r.committed));
        out.dedup_by_key(|r| r.tx);
        for (tx, sha, bytes) in carried_by {
            if !dropped.contains(&tx) {
                carried.insert(sha, bytes);
            }
        }
        (out, carried, handled)
    }

    /// Finishes or undoes every transaction a crash interrupted, and returns the
    /// files it read, for the caller to remove (`remove_handled`) once their log
    /// lines are synced. `tmp` is the state directory's `tmp/`; `stored` gives
    /// the whole stored content of a hash, if the store has it (what a torn new
    /// content is written again from, as are the bytes the records carry);
    /// `restore` makes the store hold, durably, each content a live record
    /// carries (its copy may be torn: only the record was synced); `log` appends a log line
    /// unless the log already has it (and says whether it did); `forget` drops the
    /// kept versions of a transaction rolled back; `hold` takes the locks of
    /// a record's files (see the store's lock.rs) while it is handled. A committed record whose files
    /// were all in place and whose line was logged (a crash before the checkpoint
    /// dropped it) is finished already: it is not counted as rolled forward.
    pub fn recover<L>(
        &self,
        tmp: BorrowedFd<'_>,
        (stored, restore): (
            impl Fn(&str) -> Option<Vec<u8>>,
            impl Fn(&str, &[u8]) -> Result<(), StoreError>,
        ),
        mut log: impl FnMut(&LogEntry) -> Result<bool, StoreError>,
        (forget, hold): (impl Fn(&Record), impl Fn(&Record) -> Result<L, StoreError>),
    ) -> Result<(Recovered, Handled), StoreError> {
        let mut done = Recovered::default();
        let (records, carried, handled) = self.records();
        // The store's copies first: the records naming them go once this returns.
        for (sha, bytes) in &carried {
            restore(sha, bytes)?;
        }
        let stored = |sha: &str| carried.get(sha).cloned().or_else(|| stored(sha));
        for record in records {
            // Live processes go on meanwhile: the record's files wait for it.
            let _held = hold(&record)?;
            let root = atomic::open_dir(&record.root)?;
            let repairs = record
                .committed
                .then(|| {
                    let repair = |e| repair(root.as_fd(), tmp, e, &stored);
                    record.files.iter().map(repair).collect::<Option<Vec<_>>>()
                })
                .flatten();
            if let Some(repairs) = repairs {
                let mut finished = false;
                for (e, r) in record.files.iter().zip(repairs) {
                    finished |= r.apply(root.as_fd(), tmp, e)?;
                    finished |= install(root.as_fd(), tmp, e)?;
                }
                finished |= log(&record.log)?;
                if finished {
                    done.rolled_forward.push(record.tx);
                }
            } else {
                for e in &record.files {
                    discard(root.as_fd(), tmp, e);
                }
                forget(&record);
                done.rolled_back.push(record.tx);
            }
        }
        Ok((done, handled))
    }
}

/// What an entry of a committed record needs before it is put in place.
enum Repair {
    /// Nothing: its new content is whole where it is, or nothing is to be checked.
    Whole,
    /// Its temporary file is torn: these bytes are written into it again.
    Temp(Vec<u8>),
    /// The file it became is torn: these bytes go to its temporary name again,
    /// with the file's mode, owner and attributes, to be put in place anew.
    Installed(Vec<u8>),
}

impl Repair {
    /// Writes the new content again where it is torn, synced; says whether
    /// there was anything to do.
    fn apply(
        self,
        root: BorrowedFd<'_>,
        tmp: BorrowedFd<'_>,
        e: &Entry,
    ) -> Result<bool, StoreError> {
        let (installed, bytes) = match self {
            Repair::Whole => return Ok(false),
            Repair::Temp(bytes) => (false, bytes),
            Repair::Installed(bytes) => (true, bytes),
        };
        let dir = dir_of(root, e)?;
        let base = tmp_dir_of(dir.as_fd(), tmp, e)?;
        let err = |action| move |err: std::io::Error| io_err(action, Path::new(&e.tmp))(err);
        let file = if installed {
            let name = file_name(&e.rel);
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let old = rustix::fs::openat(&dir, name, flags, Mode::empty())
                .map_err(|er| io_err("open", Path::new(&e.rel))(er.into()))?;
            let keeps = (Some(&File::from(old)), atomic::Writer::KeepsSetId, None);
            atomic::write_tmp(base.as_fd(), OsStr::new(&e.tmp), name, &bytes, keeps)?
        } else {
            let flags = OFlags::WRONLY | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&base, e.tmp.as_str(), flags, Mode::empty())
                .map_err(|er| err("open")(er.into()))?;
            let mut file = File::from(fd);
            file.write_all(&bytes).map_err(err("write"))?;
            file
        };
        file.sync_all().map_err(err("sync"))?;
        log::warn!(
            "transaction of {}: its new content had not reached the disk whole; written again from the store",
            e.rel
        );
        Ok(true)
    }
}

/// What `e`, of a committed record, needs to hold the content its record
/// names (see `Repair`); `None` when it cannot: its temporary file is torn
/// and the store holds no whole copy of that content (a record written by a
/// version that synced temporary files before it, whose commit point was
/// then not reached), so the transaction is rolled back.
fn repair(
    root: BorrowedFd<'_>,
    tmp: BorrowedFd<'_>,
    e: &Entry,
    stored: &impl Fn(&str) -> Option<Vec<u8>>,
) -> Option<Repair> {
    let Some(sha) = e.sha256.as_deref().filter(|_| !e.remove) else {
        return Some(Repair::Whole);
    };
    let Ok(dir) = dir_of(root, e) else {
        return Some(Repair::Whole);
    };
    let Ok(base) = tmp_dir_of(dir.as_fd(), tmp, e) else {
        return Some(Repair::Whole);
    };
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(&base, e.tmp.as_str(), flags, Mode::empty()).map(File::from) {
        Ok(file) if holds(&file, sha) => Some(Repair::Whole),
        Ok(_) => match (stored(sha), e.made) {
            (Some(bytes), _) => Some(Repair::Temp(bytes)),
            // Its commit point was reached (the store held the content
            // durably, before the record) and other files of it may be in
            // place already: it is finished, what is lost named.
            (None, Some(_)) => {
                log::error!(
                    "transaction of {}: its new content did not reach the disk whole, and the store has lost its copy",
                    e.rel
                );
                Some(Repair::Whole)
            }
            (None, None) => {
                log::warn!(
                    "transaction of {}: its new content did not reach the disk whole; rolled back",
                    e.rel
                );
                None
            }
        },
        // Its name was made before the record was written, so it reached the
        // disk first: no name left means it was put in place.
        Err(rustix::io::Errno::NOENT) => Some(installed(dir.as_fd(), e, sha, stored)),
        Err(_) => None,
    }
}

/// `repair` of an entry whose temporary file was put in place: the file at
/// its path, if it is still the one the commit made and it does not hold the
/// content named, is written again. A file written since is left as it is.
fn installed(
    dir: BorrowedFd<'_>,
    e: &Entry,
    sha: &str,
    stored: &impl Fn(&str) -> Option<Vec<u8>>,
) -> Repair {
    let Some(made) = e.made else {
        return Repair::Whole;
    };
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(dir, file_name(&e.rel), flags, Mode::empty()) else {
        return Repair::Whole;
    };
    let mut file = File::from(fd);
    let ours = file.metadata().is_ok_and(|m| m.is_file() && made.is(&m));
    let mut now = Vec::new();
    if !ours || file.read_to_end(&mut now).is_err() || crate::engine::sha256_hex(&now) == sha {
        return Repair::Whole;
    }
    match stored(sha) {
        Some(bytes) if torn_copy(&now, &bytes) => Repair::Installed(bytes),
        Some(_) => Repair::Whole,
        None => {
            log::error!(
                "transaction of {}: its new content did not reach the disk whole, and the store has no copy of it",
                e.rel
            );
            Repair::Whole
        }
    }
}

/// Whether `now` is what a crash of the machine can leave of `whole` written
/// and not synced: no longer, and zeros wherever it differs. Anything else
/// was written since (in the same tick of the clock, or with its time set
/// back), and is left as it is.
fn torn_copy(now: &[u8], whole: &[u8]) -> bool {
    now.len() <= whole.len() && now.iter().zip(whole).all(|(n, w)| n == w || *n == 0)
}

/// Whether `file` holds exactly the content whose SHA-256 is `sha`.
fn holds(mut file: &File, sha: &str) -> bool {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).is_ok() && crate::engine::sha256_hex(&bytes) == sha
}

/// The journal file at `path`, locked (so a process opening the store at
/// the same time leaves it to this one), and its bytes; `None` when a live
/// process holds the file, or it cannot be read.
fn unheld(path: &Path) -> Option<(File, Vec<u8>)> {
    let file = File::open(path).ok()?;
    if let Err(e) = file.try_lock() {
        log::debug!("{}: held by a live process ({e})", path.display());
        return None;
    }
    let mut bytes = Vec::new();
    (&file).read_to_end(&mut bytes).ok()?;
    Some((file, bytes))
}

/// The lines of a journal file, each with the bytes it carries, up to the
/// first one that does not read whole: a line cut short, or carried bytes
/// that are short or do not hash as their record says. Only a crash can leave
/// one (a failed append is cut off again), and nothing after it was synced,
/// so nothing after it reached its commit point. Reading stops there rather
/// than going on at the next newline, which could lie inside carried bytes:
/// a file's content is never read as a record.
fn lines<'b>(bytes: &'b [u8], path: &Path) -> Vec<(Line, Vec<&'b [u8]>)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    loop {
        let start = rest.iter().position(|b| !b.is_ascii_whitespace());
        let Some(start) = start else {
            return out;
        };
        let line_end = memchr::memchr(b'\n', &rest[start..]).map_or(rest.len(), |n| start + n);
        let line = match serde_json::from_slice::<Line>(&rest[start..line_end]) {
            Ok(line) => line,
            Err(err) => {
                log::warn!(
                    "unreadable journal record in {} (cut short before its commit point; what follows is not read): {err}",
                    path.display()
                );
                return out;
            }
        };
        rest = rest.get(line_end + 1..).unwrap_or_default();
        let inline = match &line {
            Line::Record(r) => r.inline.as_slice(),
            Line::Dropped { .. } => &[],
        };
        let mut carried = Vec::with_capacity(inline.len());
        for i in inline {
            let whole = usize::try_from(i.len)
                .ok()
                .and_then(|n| rest.get(..n))
                .filter(|b| crate::engine::sha256_hex(b) == i.sha256);
            let Some(b) = whole else {
                log::warn!(
                    "journal record in {} carries bytes cut short (before its commit point; what follows is not read)",
                    path.display()
                );
                return out;
            };
            rest = &rest[b.len()..];
            carried.push(b);
        }
        out.push((line, carried));
    }
}

/// Opens the directory of `e` beneath `root`, for recovery.
fn dir_of(root: BorrowedFd<'_>, e: &Entry) -> Result<OwnedFd, StoreError> {
    parent_beneath(root, &e.rel)
        .map_err(|err| io_err("open the directory of", Path::new(&e.rel))(err.into()))
}

/// Recovery's `install_in`: the directory found again from `root`, as nothing
/// is held open across a crash, and synced once something was put in place.
/// Says whether anything was left to do.
pub fn install(root: BorrowedFd<'_>, tmp: BorrowedFd<'_>, e: &Entry) -> Result<bool, StoreError> {
    let dir = match dir_of(root, e) {
        Ok(dir) => dir,
        // A removal whose directory is gone is done.
        Err(StoreError::Io { source, .. })
            if e.remove && source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(false);
        }
        Err(err) => return Err(err),
    };
    let installed = install_in(dir.as_fd(), tmp, e)?;
    if installed {
        rustix::fs::fsync(&dir)
            .map_err(|err| io_err("sync the directory of", Path::new(&e.rel))(err.into()))?;
    }
    Ok(installed)
}

/// Puts the new content of `e` in place in `dir`, for recovery: by name and as
/// the daemon, as no caller is known after a crash (a commit puts it in place
/// as `caller` says). Does nothing if it already is (no temp file left). Says
/// whether it did anything; the directory is not synced (recovery does that).
fn install_in(dir: BorrowedFd<'_>, tmp: BorrowedFd<'_>, e: &Entry) -> Result<bool, StoreError> {
    let name = file_name(&e.rel);
    if e.remove {
        let gone = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_err();
        if gone || !found_still(dir, e) {
            return Ok(false);
        }
        return remove(dir, &e.rel);
    }
    let base = tmp_dir_of(dir, tmp, e)?;
    match rustix::fs::statat(&base, e.tmp.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Err(rustix::io::Errno::NOENT) => return Ok(false),
        Err(err) => return Err(io_err("stat", Path::new(&e.tmp))(err.into())),
        Ok(_) => {}
    }
    if !e.in_place && !found_still(dir, e) {
        rustix::fs::unlinkat(&base, e.tmp.as_str(), AtFlags::empty())
            .map_err(|err| io_err("remove", Path::new(&e.tmp))(err.into()))?;
        return Ok(false);
    }
    if e.in_place {
        copy_in_place(base.as_fd(), &e.tmp, (dir, name), e.inode)?;
        rustix::fs::unlinkat(&base, e.tmp.as_str(), AtFlags::empty())
            .map_err(|err| io_err("remove", Path::new(&e.tmp))(err.into()))?;
    } else {
        rustix::fs::renameat(&base, e.tmp.as_str(), dir, name)
            .map_err(|err| io_err("rename into place", Path::new(&e.rel))(err.into()))?;
    }
    Ok(true)
}

/// Whether the name of `e` still holds what its transaction read there (see
/// `Entry::found`), or the file it put there itself (which `repair` found
/// torn and writes again); said in the log when it does not. A record that
/// did not record it is taken as it is.
fn found_still(dir: BorrowedFd<'_>, e: &Entry) -> bool {
    let name = file_name(&e.rel);
    let now = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok();
    let made_here = e.made.zip(now).is_some_and(|(m, st)| m.ino == st.st_ino);
    let still = made_here || e.found.is_none_or(|f| f.is_at(dir, name));
    if !still {
        log::error!(
            "recovery: {} changed after the interrupted transaction's commit point: \
             left as it is (its new content is kept as its version)",
            e.rel
        );
    }
    still
}

/// Copies the temporary file `tmp` into the file at `name`, through a
/// descriptor opened without truncating, and only when that file is still the
/// one the transaction read (`inode`): recovery runs as the daemon, and a name
/// another process swapped meanwhile (a hard link, a rename) must not get the
/// new content, its mode, or a truncation. Such a file is left as it is, and
/// said in the log; the new content stays kept in the store as its version.
fn copy_in_place(
    base: BorrowedFd<'_>,
    tmp: &str,
    (dir, name): (BorrowedFd<'_>, &OsStr),
    inode: Option<(u64, u64)>,
) -> Result<(), StoreError> {
    let err = |action| move |e: rustix::io::Errno| io_err(action, Path::new(tmp))(e.into());
    let src = rustix::fs::openat(base, tmp, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(err("open"))?;
    let mut src = File::from(src);
    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let dst =
        rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(err("open the target of"))?;
    let st = rustix::fs::fstat(&dst).map_err(err("stat the target of"))?;
    if inode != Some((st.st_dev, st.st_ino)) {
        log::error!(
            "recovery: {} is no longer the file the interrupted transaction wrote in place: \
             left as it is (the new content is kept as its version)",
            Path::new(name).display()
        );
        return Ok(());
    }
    let mut bytes = Vec::new();
    src.read_to_end(&mut bytes)
        .map_err(|e| io_err("read", Path::new(tmp))(e))?;
    rustix::fs::ftruncate(&dst, 0).map_err(err("truncate the target of"))?;
    let mut dst = File::from(dst);
    dst.write_all(&bytes)
        .map_err(|e| io_err("write", Path::new(name))(e))?;
    // The temporary file has the mode the new version must have (set-id bits
    // cleared for a writer without the right to keep them).
    let mode = src
        .metadata()
        .map_err(|e| io_err("stat", Path::new(tmp))(e))?;
    atomic::set_mode(&dst, std::os::unix::fs::MetadataExt::mode(&mode), name)?;
    dst.sync_all()
        .map_err(|e| io_err("sync", Path::new(name))(e))
}

/// Removes the file `rel` from `dir`, its directory; does nothing if it is gone
/// already. Says whether it removed it; the directory is not synced.
pub fn remove(dir: BorrowedFd<'_>, rel: &str) -> Result<bool, StoreError> {
    match rustix::fs::unlinkat(dir, file_name(rel), AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::NOENT) => Ok(false),
        Err(err) => Err(io_err("remove", Path::new(rel))(err.into())),
    }
}

/// Recovery's `discard_in`.
pub fn discard(root: BorrowedFd<'_>, tmp: BorrowedFd<'_>, e: &Entry) {
    if let Ok(dir) = dir_of(root, e) {
        discard_in(dir.as_fd(), tmp, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn in_place(inode: (u64, u64)) -> Entry {
        Entry {
            rel: "f".into(),
            tmp: "t".into(),
            beside: false,
            in_place: true,
            inode: Some(inode),
            remove: false,
            sha256: None,
            made: None,
            found: None,
        }
    }

    #[test]
    fn recovery_copies_in_place_only_into_the_file_the_transaction_read() {
        let d = tempfile::tempdir().unwrap();
        let (proj, tmp) = (d.path().join("p"), d.path().join("tmp"));
        fs::create_dir_all(&proj).unwrap();
        fs::create_dir_all(&tmp).unwrap();
        fs::write(proj.join("f"), "old").unwrap();
        fs::hard_link(proj.join("f"), proj.join("g")).unwrap();
        let read = fs::metadata(proj.join("f")).unwrap();
        let entry = in_place((read.dev(), read.ino()));
        // Another user's private file put under the name before recovery ran.
        fs::write(proj.join("other"), "theirs").unwrap();
        fs::set_permissions(proj.join("other"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::rename(proj.join("other"), proj.join("f")).unwrap();
        fs::write(tmp.join("t"), "new").unwrap();
        let (p, t) = (
            atomic::open_dir(&proj).unwrap(),
            atomic::open_dir(&tmp).unwrap(),
        );
        install_in(p.as_fd(), t.as_fd(), &entry).unwrap();
        assert_eq!(fs::read(proj.join("f")).unwrap(), b"theirs");
        let mode = fs::metadata(proj.join("f")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "neither written nor given another mode");
        assert_eq!(fs::read(proj.join("g")).unwrap(), b"old");
        // The file the transaction read, back at its name: recovery finishes.
        fs::rename(proj.join("g"), proj.join("f")).unwrap();
        fs::write(tmp.join("t"), "new").unwrap();
        install_in(p.as_fd(), t.as_fd(), &entry).unwrap();
        assert_eq!(fs::read(proj.join("f")).unwrap(), b"new");
    }
}
