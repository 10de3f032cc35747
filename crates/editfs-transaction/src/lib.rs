//! Transactions end to end: lock, read, let the engine decide, commit through the
//! journal, log. Shared by `editfs apply` and the mount.
//!
//! `run` edits one file, `multi::run` several at once, `undo::run` restores kept
//! versions.
//!
//! Transaction ids follow one rule for all of them: once a request holds the
//! store's locks of its files it takes the next id, before anything can fail, and
//! leaves one log line under them, whatever its outcome (ok, failed or rejected).
//! An id is never reused. Edits read their files and let the engine decide before
//! they take the locks (a slow edit holds up no other), and decide again under
//! them if a file changed meanwhile; transactions on other files never wait. A report with id 0 had none: there is no state directory, or the
//! counter itself could not be advanced.
//!
//! `history` reads the log for people (`editfs history`, `editfs show`).

#![forbid(unsafe_code)]

use editfs_engine as engine;
use editfs_store as store;

pub mod direct;
pub mod history;
pub mod multi;
mod opened;
pub mod paths;
pub mod report;
pub mod rewind;
pub mod serial;
pub mod undo;

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::time::SystemTime;

pub(crate) use crate::store::caller;
pub use crate::store::{Caller, sight};
pub use opened::{Meant, Opened, file_name, open, open_bounded, open_in};
use opened::{lock_dir, open_target, still_reads, target_dir};
pub(crate) use opened::{lock_dirs, new_file_dir, remove_made_dirs};
pub use paths::Refused;

use crate::engine::ErrorKind as EditKind;
use crate::engine::{Options, Outcome, Received};
use crate::report::{ErrorKind, ErrorReport, Report};
use crate::store::{
    Change, FileEntry, Keys, Lock, LogEntry, LogKind as Kind, Staged, Store, StoreError,
    count_changes, replace,
};

/// Where a transaction acts: paths are resolved beneath `root` (no `..` or
/// symlink leads out of it) and never follow their last component.
#[derive(Clone, Copy)]
pub struct Root<'a> {
    pub fd: BorrowedFd<'a>,
    /// Its path, for recovery after a crash, and for absolute paths in payloads.
    pub path: &'a Path,
    /// The mount point that mirrors it, if any: absolute paths through it name
    /// files beneath the root too.
    pub mount: Option<&'a Path>,
    /// Where a payload's paths start, beneath the root (empty: at the root).
    /// `editfs apply --multi SUBDIR` inside a project reads the payload's paths
    /// from SUBDIR, while history, snapshots and undo need them as the
    /// project's paths.
    pub from: &'a Path,
    /// The user whose view of the tree counts where a payload's path is read
    /// (a symlink followed, a name found or not): asked with that user's
    /// credentials, no answer tells it what a native `ls` or `stat` would not.
    /// `None`: the daemon's own.
    pub caller: Option<&'a Caller>,
}

impl<'a> Root<'a> {
    /// This root, its paths read with `caller`'s view of the tree.
    pub fn seen_by(self, caller: Option<&'a Caller>) -> Root<'a> {
        Root { caller, ..self }
    }
}

/// The process a transaction is made for, as the log and `editfs history` show it.
#[derive(Clone, Debug, Default)]
pub struct Who {
    pub pid: u32,
    pub command: String,
    /// The user the transaction is checked against, file by file; `None`: the
    /// daemon's own (`editfs apply`, run by that user itself).
    pub caller: Option<Caller>,
}

/// Bytes of a command line the log keeps: enough to tell processes apart, and
/// no more, so a process with megabytes of arguments cannot grow the log (and
/// every rendering of it) by megabytes a transaction.
const MAX_COMMAND: usize = 256;

impl Who {
    /// The process `pid`, named from /proc when it can be.
    pub fn process(pid: u32) -> Who {
        let mut raw = Vec::new();
        let read = std::fs::File::open(format!("/proc/{pid}/cmdline"))
            .and_then(|f| f.take(MAX_COMMAND as u64 + 1).read_to_end(&mut raw));
        let command = match read {
            Ok(_) => bounded_command(&raw),
            Err(_) => String::new(),
        };
        Who {
            pid,
            command,
            caller: None,
        }
    }

    /// The owner and mode a file a transaction makes in `dir` gets: the
    /// caller's, as a file the caller made natively would be (with the
    /// directory's group where it has set-group-ID), so a user's new file is
    /// that user's to edit and remove, not root's; its mode is what the
    /// caller's umask leaves of 0666, or in a directory with a default ACL
    /// what that ACL gives (see `caller::default_acl_mode`). A daemon that cannot give files away
    /// (it is not root) keeps them its own. `None` when the daemon acts for
    /// itself.
    pub fn fresh(&self, dir: BorrowedFd<'_>) -> Option<crate::store::Access> {
        let c = self.caller.as_ref()?;
        let mode = caller::default_acl_mode(dir).unwrap_or(0o666 & !c.umask);
        let (uid, gid) = if !rustix::process::geteuid().is_root() {
            let me = (rustix::process::geteuid(), rustix::process::getegid());
            (me.0.as_raw(), me.1.as_raw())
        } else {
            match rustix::fs::fstat(dir) {
                Ok(st) if st.st_mode & 0o2000 != 0 => (c.uid, st.st_gid),
                _ => (c.uid, c.gid),
            }
        };
        Some(crate::store::Access {
            mode,
            uid,
            gid,
            acl: false,
        })
    }
}

/// A raw `/proc/PID/cmdline` as one line of at most `MAX_COMMAND` bytes, `…` where cut.
fn bounded_command(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw).replace('\0', " ");
    let text = text.trim();
    if text.len() <= MAX_COMMAND {
        return text.to_owned();
    }
    let mut end = MAX_COMMAND;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The file one transaction edits.
pub struct Target<'a> {
    pub root: Root<'a>,
    /// Its path beneath the root; also its name in snapshots and the log.
    pub rel: &'a str,
    /// Its name in the report.
    pub label: &'a str,
    pub who: &'a Who,
    /// The directory the mount found the file in (the node the kernel looked
    /// up), used instead of walking `rel` from the root again.
    pub dir: Option<BorrowedFd<'a>>,
    /// The file an `F.edit` handle's name meant when it was opened.
    pub meant: Option<Meant>,
    /// What the mount takes of the file from the last check of it to its
    /// install (see `Hold`); `None` outside a mount.
    pub hold: Option<&'a HoldFn<'a>>,
}

/// What a mount holds of a transaction's files, taken right before the store's
/// lock for the last check that they are as decided, and kept until the
/// commit is done: its files, alone, which direct writes through the mount wait for.
/// Taken there, not before the decision, so writers of the file wait for an
/// install, never for the engine.
pub trait Hold {}

impl<T> Hold for T {}

/// Takes what a mount holds of a transaction's files (see `Hold`).
pub type HoldFn<'a> = dyn Fn() -> Box<dyn Hold + 'a> + 'a;

/// A file opened and the engine's decision on it, not yet numbered or written.
struct Decision {
    opened: Opened,
    edit: engine::Edit,
}

pub fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Runs `payload` against `target`. Failures of the file system come back as a
/// failed report (kind `io`), with the file untouched.
pub fn run<'p>(
    store: Option<&Store>,
    target: &Target<'_>,
    payload: impl Into<Received<'p>>,
    opts: &Options,
) -> Report {
    let payload = payload.into();
    let Some(store) = store else {
        let mut report = stamp(unstored(target, payload, opts), target.label);
        report.notes.push(
            "no state directory (.editfs/) here: no snapshot or log was kept; pass --state-dir DIR to keep them".into(),
        );
        return report;
    };
    let _turn = turn_of(target);
    let report = match decided_with_lock(store, target, payload, opts) {
        Ok(((_held, lock), decided)) => stored(store, &lock, target, decided, opts.max_file),
        Err(e) => stamp(io_failure(e, sha_now(target, opts.max_file)), target.label),
    };
    store.catch_up(1);
    report
}

/// What `decide` finds, with the store's locks of its files, taken by
/// `lock` for what was decided, held, or `None` when the files changed
/// every time they were decided.
///
/// The files are read and the engine decides without the locks, so a slow
/// decision (a huge file, a payload of thousands of blocks) holds up no
/// transaction on its file either; the locks are taken to number and commit
/// only, and no transaction on another file ever waits for them.
/// What no longer holds under it (`current`: a file changed meanwhile) is
/// decided again, without the lock too. A change another transaction made
/// (`committed`, the last id handed out, moved on: another process's
/// `editfs apply` on the file) is progress, and the decision is made again;
/// a change made outside transactions (a writer that does not pause) gives
/// up after `DECISIONS` such rounds, and anything after `ROUNDS` in all: no
/// file is a reason to hold everyone else up. Edits of one file and of
/// several take their lock this way; the caller holds the turn of every path
/// it edits (see serial.rs), so transactions of this process take turns.
pub(crate) fn decided_under_lock<L, D>(
    lock: impl Fn(&D) -> Result<L, StoreError>,
    decide: impl Fn() -> D,
    current: impl Fn(&D) -> bool,
    committed: impl Fn() -> u64,
) -> Result<(L, Option<D>), StoreError> {
    let (mut outside, mut round) = (0, 0);
    loop {
        round += 1;
        let seen = committed();
        let decided = decide();
        let lock = lock(&decided)?;
        if current(&decided) {
            return Ok((lock, Some(decided)));
        }
        if committed() == seen {
            outside += 1;
        }
        if outside == DECISIONS || round == ROUNDS {
            return Ok((lock, None));
        }
    }
}

/// Times a transaction decides on its files, changed each time by a writer
/// outside transactions, before it gives up (see `decided_under_lock`).
pub(crate) const DECISIONS: usize = 3;

/// Times a transaction decides on its files at most, whoever changed them:
/// a direct write takes an id too, so a writer that keeps appending to the
/// file looks like progress, and each decision holds the file's place in
/// the mount (its hold on the file) for as long as it takes.
const ROUNDS: usize = 2 * DECISIONS;

/// This process's turn at the file of `target` (see serial.rs).
fn turn_of(target: &Target<'_>) -> serial::Turn {
    serial::turn([target.root.path.join(target.rel)])
}

/// What a mount holds of a transaction's files, with the store's lock.
type Held<'a> = (Option<Box<dyn Hold + 'a>>, Lock);

/// A decision on one file (or why there is none), with its new content staged.
type Decided = (Result<Decision, StoreError>, Staged);

/// The note every dry run's report carries.
pub const DRY_RUN: &str =
    "dry run: nothing was written, no transaction id was taken, nothing was logged";

/// What `payload` would do to the file of `target`, decided as `run` decides
/// it, with its report and diff, but written nowhere: no file changes, no id is
/// taken, nothing is logged (tx 0). It opens no store, so it never runs a
/// recovery and works beside a read-only state directory.
pub fn dry_run<'p>(
    target: &Target<'_>,
    payload: impl Into<Received<'p>>,
    opts: &Options,
) -> Report {
    let report = match open_target(target, Vec::new(), opts.max_file) {
        Ok(opened) => decide_on(target, opened, payload.into(), opts)
            .edit
            .report
            .into(),
        Err(e) => io_failure(e, sha_now(target, opts.max_file)),
    };
    let mut report = stamp(report, target.label);
    report.notes.push(DRY_RUN.into());
    report
}

/// `decided_under_lock` for one file.
fn decided_with_lock<'a>(
    store: &Store,
    target: &Target<'a>,
    payload: Received<'_>,
    opts: &Options,
) -> Result<(Held<'a>, Decided), StoreError> {
    let (lock, decided) = decided_under_lock(
        |(d, _): &Decided| {
            let file = d.as_ref().ok().and_then(|d| d.opened.file.as_ref());
            let keys = Keys::new().path(target.rel).file(file);
            let held = target.hold.map(|h| h());
            store.lock(&keys).map(|l| (held, l))
        },
        || {
            let decided = decide(target, store.buffer(), payload, opts);
            let staged = match &decided {
                Ok(d) => stage(store, target, d),
                Err(_) => Staged::default(),
            };
            (decided, staged)
        },
        // A file that could not be read or edited is reported as it was found.
        |(d, _)| d.as_ref().map_or(true, |d| d.opened.current(target.rel)),
        || store.last_tx(),
    )?;
    let decided = decided.unwrap_or_else(|| {
        let e = StoreError::Changing {
            path: target.rel.into(),
            times: DECISIONS,
        };
        (Err(e), Staged::default())
    });
    Ok((lock, decided))
}

/// The new content of a decided edit, written before the lock (see
/// `Store::stage`).
fn stage(store: &Store, target: &Target<'_>, d: &Decision) -> Staged {
    match &d.edit.content {
        Some(new) => store.stage(&[change_of(target, &d.opened, new, &d.edit.report.sha256)]),
        None => Staged::default(),
    }
}

/// The change that writes `new` (whose SHA-256 the engine reported as
/// `sha`) over the file of `target`, as `opened` read it.
fn change_of<'a>(
    target: &'a Target<'_>,
    opened: &'a Opened,
    new: &'a [u8],
    sha: &'a str,
) -> Change<'a> {
    Change {
        rel: target.rel,
        dir: opened.dir.as_fd(),
        old: opened.file.as_ref(),
        pre: opened.bytes.as_deref(),
        new,
        new_sha: Some(sha).filter(|s| !s.is_empty()),
        by: target.who.caller.as_ref(),
        fresh: target.who.fresh(opened.dir.as_fd()),
    }
}

/// Opens the file of `target` and lets the engine decide on it.
fn decide(
    target: &Target<'_>,
    buffer: Vec<u8>,
    payload: Received<'_>,
    opts: &Options,
) -> Result<Decision, StoreError> {
    let opened = open_target(target, buffer, opts.max_file)?;
    Ok(decide_on(target, opened, payload, opts))
}

/// The engine's decision on `opened`, the file of `target`.
fn decide_on(
    target: &Target<'_>,
    opened: Opened,
    payload: Received<'_>,
    opts: &Options,
) -> Decision {
    let edit = apply(target, opened.bytes.as_deref(), payload, opts);
    Decision { opened, edit }
}

/// Whether the edit whose `operations` these are makes its file (an empty
/// SEARCH, `*** Add File:`): over a file already there (empty), that is the
/// `O_CREAT` open it is natively, asked of the kernel as such (see
/// `caller::may_create_over`).
pub(crate) fn creates<K>(operations: &[engine::OpReport<K>]) -> bool {
    operations.iter().any(|o| o.strategy == Some("create"))
}

fn created_over(target: &Target<'_>, opened: &Opened, report: &Report) -> Result<(), StoreError> {
    match (&opened.file, creates(&report.operations)) {
        (Some(file), true) => crate::store::caller::may_create_over(
            opened.dir.as_fd(),
            file_name(target.rel),
            file,
            target.who.caller.as_ref(),
        ),
        _ => Ok(()),
    }
}

fn stored(
    store: &Store,
    lock: &Lock,
    target: &Target<'_>,
    (decided, staged): Decided,
    max: u64,
) -> Report {
    // Every outcome, even a file that cannot be read, has an id and a log line.
    let tx = match store.next_tx() {
        Ok(tx) => tx,
        Err(e) => return stamp(io_failure(e, sha_now(target, max)), target.label),
    };
    let Decision { opened, edit } = match decided {
        Ok(d) => d,
        Err(e) => {
            let report = stamp(io_failure(e, sha_now(target, max)), target.label);
            return unchanged(store, tx, Kind::Edit, report, target.rel, target.who);
        }
    };
    let original = opened.bytes.as_deref();
    let mut report = stamp(edit.report.into(), target.label);
    report.tx = tx;
    let Some(new) = edit.content else {
        return logged(store, report, Kind::Edit, target.rel, target.who);
    };
    if let Err(e) = created_over(target, &opened, &report) {
        let failed = failed_commit(e, report, original);
        return logged(store, failed, Kind::Edit, target.rel, target.who);
    }
    let entry = log_entry(Kind::Edit, &report, &[(target.rel, &report)], target.who);
    let change = change_of(target, &opened, &new, &report.sha256);
    let root = (target.root.fd, target.root.path);
    match store.commit_with(lock, report.tx, root, (&[change], &[]), entry, staged) {
        Ok(kept) => {
            report.snapshot = kept.into_iter().next().flatten();
            if let Some(replaced) = opened.file {
                store.release(replaced);
            }
            if !report.sha256.is_empty() {
                store.remember(target.rel, &report.sha256, new);
            }
            if let Some(read) = opened.bytes {
                store.recycle(read);
            }
            report
        }
        Err(e) => {
            let failed = failed_commit(e, report, original);
            logged(store, failed, Kind::Edit, target.rel, target.who)
        }
    }
}

/// A transaction refused before its file was read, as the caller found that
/// `rel` is no file to edit (a directory, a link out of the project): it still
/// takes the next id and one log line, as every transaction does.
pub fn refused(store: &Store, mut report: Report, rel: &str, who: &Who) -> Report {
    match store.next_tx() {
        Ok(tx) => unchanged(store, tx, Kind::Edit, report, rel, who),
        Err(e) => {
            report.notes.push(format!("not numbered or logged: {e}"));
            report
        }
    }
}

/// A transaction that changed nothing: numbered `tx` and logged as it ended.
pub fn unchanged(
    store: &Store,
    tx: u64,
    kind: Kind,
    mut report: Report,
    rel: &str,
    who: &Who,
) -> Report {
    report.tx = tx;
    logged(store, report, kind, rel, who)
}

/// Appends the log line of `report` on `rel`; a log that cannot be written is
/// noted in the report.
fn logged(store: &Store, mut report: Report, kind: Kind, rel: &str, who: &Who) -> Report {
    if let Err(e) = store.log(&log_entry(kind, &report, &[(rel, &report)], who)) {
        report
            .notes
            .push(format!("the log could not be written: {e}"));
    }
    report
}

/// Without a state directory: no journal, no snapshot, one atomic rename.
fn unstored(target: &Target<'_>, payload: Received<'_>, opts: &Options) -> Report {
    let _serialized = match target_dir(target) {
        Ok(dir) => lock_dir(&dir),
        Err(e) => return io_failure(e, sha_now(target, opts.max_file)),
    };
    let opened = match open_target(target, Vec::new(), opts.max_file) {
        Ok(o) => o,
        Err(e) => return io_failure(e, sha_now(target, opts.max_file)),
    };
    let original = opened.bytes.as_deref();
    let edit = apply(target, original, payload, opts);
    let report = edit.report.into();
    let Some(new) = edit.content else {
        return report;
    };
    let written = replace(
        (opened.dir.as_fd(), file_name(target.rel)),
        &new,
        (opened.file.as_ref(), false),
        (None, target.who.caller.as_ref()),
    );
    match written {
        Ok(()) => report,
        Err(e) => failed_commit(e, report, original),
    }
}

/// The SHA-256 of what is at `target`'s path now, for the report of a
/// transaction that failed before it read the file (a stale handle, an I/O
/// error): what an `if_match` must give to edit it, never the hash of
/// nothing. Empty when no file there can be read.
fn sha_now(target: &Target<'_>, max: u64) -> String {
    let now = Target {
        meant: None,
        ..*target
    };
    match open_target(&now, Vec::new(), max) {
        Ok(Opened { bytes: Some(b), .. }) => engine::sha256_hex(&b),
        _ => String::new(),
    }
}

/// The engine's decision for `target`; a tool call in the payload must name it.
fn apply(
    target: &Target<'_>,
    original: Option<&[u8]>,
    payload: Received<'_>,
    opts: &Options,
) -> engine::Edit {
    let names = |written: &str| paths::names_file(&target.root, written, target.rel);
    engine::apply_to(target.label, original, payload, opts, &names)
}

/// A report that was going to succeed, turned into an I/O failure.
pub fn failed_commit(e: StoreError, report: Report, original: Option<&[u8]>) -> Report {
    let mut failed = io_failure(e, engine::sha256_hex(original.unwrap_or_default()));
    failed.tx = report.tx;
    failed.file = report.file;
    failed.time = report.time;
    failed.total = report.total;
    failed.operations = report.operations;
    failed
}

pub fn stamp(mut report: Report, label: &str) -> Report {
    report.file = label.to_owned();
    report.time = now();
    report
}

pub fn io_failure(e: StoreError, sha: String) -> Report {
    let mut report = Report::new(Outcome::Failed, sha);
    let (kind, hint) = match e {
        StoreError::Denied { .. } => (
            ErrorKind::PermissionDenied,
            "the mount grants what your user has natively, no more; edit files your user may read and write",
        ),
        StoreError::Stale { .. } => (
            ErrorKind::Edit(EditKind::Stale),
            "open F.edit again and send the edit again: it applies to the file F is now",
        ),
        StoreError::TooLarge { .. } => (
            ErrorKind::Edit(EditKind::TooLarge),
            "a transaction reads its whole file, so files over --max-file-size are refused: edit this one with a tool made for large files, or raise the limit",
        ),
        StoreError::Changing { .. } => (
            ErrorKind::Edit(EditKind::Stale),
            "another process keeps writing the file: send the edit again once it is done",
        ),
        _ => (
            ErrorKind::Io,
            "the edit itself was not the problem; fix the file system error and send it again",
        ),
    };
    report.error = Some(ErrorReport::plain(kind, e.to_string(), hint));
    report
}

/// One log line: the transaction, and each file it touched (or would have).
pub fn log_entry(kind: Kind, head: &Report, files: &[(&str, &Report)], who: &Who) -> LogEntry {
    let files = files
        .iter()
        .map(|(rel, r)| {
            let (lines_added, lines_removed) = r.diff.as_deref().map_or((0, 0), count_changes);
            FileEntry {
                file: (*rel).to_owned(),
                sha256: Some(r.sha256.clone()).filter(|s| !s.is_empty()),
                lines_added,
                lines_removed,
                ..FileEntry::default()
            }
        })
        .collect();
    LogEntry {
        tx: head.tx,
        time: head.time.clone(),
        kind,
        outcome: head.outcome.into(),
        applied: head.applied,
        total: head.total,
        files,
        error: head.error.as_ref().map(|e| e.kind),
        pid: who.pid,
        command: who.command.clone(),
        name: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_huge_arguments_is_named_in_a_bounded_line() {
        let huge = "x".repeat(100_000);
        // `read` is a builtin: the shell stays the process (no exec) until killed.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read x", "editfs-test", &huge])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The new process may not show its command line at once.
        let mut who = Who::process(child.id());
        for _ in 0..200 {
            if who.command.starts_with("sh") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            who = Who::process(child.id());
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(who.command.starts_with("sh -c read x"), "{}", who.command);
        assert!(who.command.len() <= MAX_COMMAND + '…'.len_utf8());
        assert!(who.command.ends_with('…'), "{}", who.command);
    }

    #[test]
    fn a_file_is_opened_for_a_caller_only_if_that_user_may_read_and_write_it() {
        use std::os::unix::fs::PermissionsExt;
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: no other user's credentials to take; skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let open_to_all = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(dir.path(), open_to_all).unwrap();
        let set = |name: &str, mode| {
            std::fs::write(dir.path().join(name), "x").unwrap();
            let perm = std::fs::Permissions::from_mode(mode);
            std::fs::set_permissions(dir.path().join(name), perm).unwrap();
        };
        set("private", 0o600);
        set("write-only", 0o622);
        set("shared", 0o666);
        let fd = std::fs::File::open(dir.path()).unwrap();
        let root = Root {
            fd: fd.as_fd(),
            path: dir.path(),
            mount: None,
            from: Path::new(""),
            caller: None,
        };
        let nobody = Caller::of(65534, 65534, u32::MAX);
        for denied in ["private", "write-only", "new"] {
            assert!(
                matches!(
                    open(root, denied, Some(&nobody)),
                    Err(StoreError::Denied { .. })
                ),
                "{denied}"
            );
        }
        let opened = open(root, "shared", Some(&nobody)).unwrap();
        assert_eq!(opened.bytes.as_deref(), Some(&b"x"[..]));
        assert!(open(root, "private", None).is_ok(), "the daemon itself may");
    }

    #[test]
    fn a_file_written_between_two_edits_is_kept_as_the_second_found_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let path = root.join("f.txt");
        std::fs::write(&path, "alpha\n").unwrap();
        let store = Store::open(&root.join(".editfs")).unwrap();
        let rootfd = crate::store::open_dir(root).unwrap();
        let who = Who::default();
        let target = Target {
            root: Root {
                fd: rootfd.as_fd(),
                path: root,
                mount: None,
                from: Path::new(""),
                caller: None,
            },
            rel: "f.txt",
            label: "f.txt",
            who: &who,
            dir: None,
            meant: None,
            hold: None,
        };
        let edit = |from: &str, to: &str| {
            let payload = format!("<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n");
            let report = run(
                Some(&store),
                &target,
                payload.as_bytes(),
                &Options::default(),
            );
            assert_eq!(report.outcome, Outcome::Ok, "{report}");
            report.tx
        };
        let pre = |tx| store.objects().read(crate::store::Side::Pre, "f.txt", tx);
        edit("alpha", "beta");
        // A direct write of the same size, its times set back to the commit's:
        // only its bytes tell it from what the commit left.
        let committed = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, "zeta\n").unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(committed).unwrap();
        let tx = edit("zeta", "eta");
        assert_eq!(pre(tx).as_deref(), Some(&b"zeta\n"[..]));
        let object = root
            .join(".editfs/objects")
            .join(engine::sha256_hex(b"zeta\n"));
        assert!(object.exists(), "kept under the hash of what it holds");
        let tx = edit("eta", "theta");
        assert_eq!(pre(tx).as_deref(), Some(&b"eta\n"[..]));
    }

    #[test]
    fn a_short_command_line_is_kept_whole_and_a_cut_keeps_characters_whole() {
        assert_eq!(bounded_command(b"cat\0a.txt\0"), "cat a.txt");
        let cut = bounded_command("é".repeat(MAX_COMMAND).as_bytes());
        assert!(cut.ends_with('…') && cut.len() <= MAX_COMMAND + '…'.len_utf8());
    }
}
