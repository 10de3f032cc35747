//! Transactions end to end: lock, read, let the engine decide, commit through the
//! journal, log. Shared by `editfs apply` and the mount.
//!
//! `run` edits one file, `multi::run` several at once, `undo::run` restores kept
//! versions.
//!
//! Transaction ids follow one rule for all of them: once a request holds the
//! store's lock it takes the next id, before anything can fail, and leaves one log
//! line under it, whatever its outcome (ok, failed or rejected). An id is never
//! reused. A report with id 0 had none: there is no state directory, or the
//! counter itself could not be advanced.

pub mod direct;
pub mod multi;
pub mod paths;
pub mod undo;

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::SystemTime;

use crate::engine::{self, ErrorReport, Options, Outcome, Received, Report};
use crate::store::journal::parent_beneath;
use crate::store::logline::{FileEntry, Kind, LogEntry, count_changes};
use crate::store::{Change, Lock, Store, StoreError, atomic, io_err};

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
}

/// The process a transaction is made for, as the log and `editfs history` show it.
#[derive(Clone, Debug, Default)]
pub struct Who {
    pub pid: u32,
    pub command: String,
}

/// Bytes of a command line the log keeps: enough to tell processes apart, and
/// no more, so a process with megabytes of arguments cannot grow the log (and
/// every rendering of it) by megabytes a transaction.
const MAX_COMMAND: usize = 256;

impl Who {
    /// The process `pid`, named from /proc when it can be.
    pub fn process(pid: u32) -> Who {
        use std::io::Read;
        let mut raw = Vec::new();
        let read = std::fs::File::open(format!("/proc/{pid}/cmdline"))
            .and_then(|f| f.take(MAX_COMMAND as u64 + 1).read_to_end(&mut raw));
        let command = match read {
            Ok(_) => bounded_command(&raw),
            Err(_) => String::new(),
        };
        Who { pid, command }
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
    let lock = match store.lock() {
        Ok(lock) => lock,
        Err(e) => return stamp(io_failure(e, engine::sha256_hex(b"")), target.label),
    };
    stored(store, &lock, target, payload, opts)
}

fn stored(
    store: &Store,
    lock: &Lock,
    target: &Target<'_>,
    payload: Received<'_>,
    opts: &Options,
) -> Report {
    // The id comes first, so every outcome, even a file that cannot be read, has
    // one and a log line (see `numbered`).
    let tx = match store.next_tx(lock) {
        Ok(tx) => tx,
        Err(e) => return stamp(io_failure(e, engine::sha256_hex(b"")), target.label),
    };
    let (file, original) = match read(target.root, target.rel) {
        Ok(o) => o,
        Err(e) => {
            let report = stamp(io_failure(e, engine::sha256_hex(b"")), target.label);
            return unchanged(store, tx, Kind::Edit, report, target.rel, target.who);
        }
    };
    let edit = apply(target, original.as_deref(), payload, opts);
    let mut report = stamp(edit.report, target.label);
    report.tx = tx;
    let Some(new) = edit.content else {
        return logged(store, report, Kind::Edit, target.rel, target.who);
    };
    let entry = log_entry(Kind::Edit, &report, &[(target.rel, &report)], target.who);
    let change = Change {
        rel: target.rel,
        old: file.as_ref(),
        pre: original.as_deref(),
        new: &new,
    };
    match store.commit(
        lock,
        report.tx,
        (target.root.fd, target.root.path),
        &[change],
        entry,
    ) {
        Ok(kept) => {
            report.snapshot = kept.into_iter().next().flatten();
            report
        }
        Err(e) => {
            let failed = failed_commit(e, report, original.as_deref());
            logged(store, failed, Kind::Edit, target.rel, target.who)
        }
    }
}

/// A transaction refused before its file was read, as the caller found that
/// `rel` is no file to edit (a directory, a link out of the project): it still
/// takes the next id and one log line, as every transaction does.
pub fn refused(store: &Store, mut report: Report, rel: &str, who: &Who) -> Report {
    let lock = store.lock();
    match lock.and_then(|lock| Ok((store.next_tx(&lock)?, lock))) {
        Ok((tx, _lock)) => unchanged(store, tx, Kind::Edit, report, rel, who),
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
    let (file, original) = match read(target.root, target.rel) {
        Ok(o) => o,
        Err(e) => return io_failure(e, engine::sha256_hex(b"")),
    };
    let edit = apply(target, original.as_deref(), payload, opts);
    let Some(new) = edit.content else {
        return edit.report;
    };
    let name = Path::new(target.rel).file_name().unwrap_or_default();
    let written = parent_beneath(target.root.fd, target.rel)
        .map_err(|e| io_err("open the directory of", Path::new(target.rel))(e.into()))
        .and_then(|dir| {
            atomic::replace(
                std::os::fd::AsFd::as_fd(&dir),
                name,
                &new,
                file.as_ref(),
                None,
            )
        });
    match written {
        Ok(()) => edit.report,
        Err(e) => failed_commit(e, edit.report, original.as_deref()),
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

/// The file `rel` beneath `root`, open, and its bytes; neither when it does not exist.
pub fn read(root: Root<'_>, rel: &str) -> Result<(Option<File>, Option<Vec<u8>>), StoreError> {
    let dir = parent_beneath(root.fd, rel).map_err(|e| {
        let why = match e {
            rustix::io::Errno::XDEV => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the path leaves the project",
            ),
            rustix::io::Errno::PERM => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the path leads into the state directory (.editfs)",
            ),
            other => other.into(),
        };
        io_err("open the directory of", Path::new(rel))(why)
    })?;
    let name = Path::new(rel).file_name().unwrap_or_default();
    let Some(mut file) = atomic::open_existing(std::os::fd::AsFd::as_fd(&dir), name)? else {
        return Ok((None, None));
    };
    let meta = file.metadata().map_err(io_err("stat", Path::new(rel)))?;
    if !meta.is_file() {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
        return Err(io_err("edit", Path::new(rel))(e));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(io_err("read", Path::new(rel)))?;
    Ok((Some(file), Some(bytes)))
}

/// Creates the missing directories of `rel` beneath `root`: those a removed tree
/// had (undo), or those a patch's new or moved file goes into.
pub(crate) fn make_parents(root: Root<'_>, rel: &str) -> Result<(), StoreError> {
    let Some(parent) = Path::new(rel).parent() else {
        return Ok(());
    };
    let mut sofar = std::path::PathBuf::new();
    for part in parent.components() {
        sofar.push(part);
        let name = sofar.to_string_lossy();
        let dir = parent_beneath(root.fd, &name)
            .map_err(|e| io_err("open the directory of", Path::new(rel))(e.into()))?;
        match rustix::fs::mkdirat(&dir, part.as_os_str(), rustix::fs::Mode::from(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(io_err("create the directory", &sofar)(e.into())),
        }
    }
    Ok(())
}

pub fn io_failure(e: StoreError, sha: String) -> Report {
    let mut report = Report::new(Outcome::Failed, sha);
    let hint = "the edit itself was not the problem; fix the file system error and send it again";
    report.error = Some(ErrorReport::plain("io", e.to_string(), hint));
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
        error: head.error.as_ref().map(|e| e.kind.to_owned()),
        pid: who.pid,
        command: who.command.clone(),
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
    fn a_short_command_line_is_kept_whole_and_a_cut_keeps_characters_whole() {
        assert_eq!(bounded_command(b"cat\0a.txt\0"), "cat a.txt");
        let cut = bounded_command("é".repeat(MAX_COMMAND).as_bytes());
        assert!(cut.ends_with('…') && cut.len() <= MAX_COMMAND + '…'.len_utf8());
    }
}
