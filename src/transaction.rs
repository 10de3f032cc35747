//! One transaction end to end: lock, read, let the engine decide, keep the
//! pre-image, commit atomically, log. Shared by `editfs apply` and the mount.
//!
//! Order matters for safety: the snapshot is durable before the file is
//! replaced, so a crash between the two loses nothing; the log line comes last.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::SystemTime;

use serde_json::json;

use crate::engine::{self, ErrorReport, Options, Outcome, Report};
use crate::store::{Lock, Store, StoreError, atomic, io_err};

/// The file a transaction edits: a name in an open directory (never a path walked
/// again, never a symlink followed), and its name in reports and snapshots.
pub struct Target<'a> {
    pub dir: BorrowedFd<'a>,
    pub name: &'a OsStr,
    pub rel: &'a str,
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Runs `payload` against `target`. Failures of the file system come back as a
/// failed report (kind `io`), with the file untouched.
pub fn run(store: Option<&Store>, target: &Target<'_>, payload: &[u8], opts: &Options) -> Report {
    let Some(store) = store else {
        let mut report = stamp(commit(None, target, payload, opts), target);
        report.notes.push(
            "no state directory (.editfs/) here: no snapshot or log was kept; pass --state-dir DIR to keep them".into(),
        );
        return report;
    };
    let lock = match store.lock() {
        Ok(lock) => lock,
        Err(e) => return stamp(io_failure(e, engine::sha256_hex(b"")), target),
    };
    let mut report = stamp(commit(Some((store, &lock)), target, payload, opts), target);
    // Logged under the lock, so the log is in transaction order.
    if let Err(e) = store.log(&log_entry(&report)) {
        log::error!("{e}");
        report
            .notes
            .push(format!("the log could not be written: {e}"));
    }
    report
}

fn stamp(mut report: Report, target: &Target<'_>) -> Report {
    report.file = target.rel.to_owned();
    report.time = now();
    report
}

fn commit(
    store: Option<(&Store, &Lock)>,
    target: &Target<'_>,
    payload: &[u8],
    opts: &Options,
) -> Report {
    let (file, original) = match read(target) {
        Ok(o) => o,
        Err(e) => return io_failure(e, engine::sha256_hex(b"")),
    };
    let edit = engine::apply(target.rel, original.as_deref(), payload, opts);
    let mut report = edit.report;
    if let Some((s, lock)) = store {
        match s.next_tx(lock) {
            Ok(tx) => report.tx = tx,
            Err(e) => return io_failure(e, report.sha256),
        }
    }
    let Some(new) = edit.content else {
        return report;
    };
    let kept = match (store, &original) {
        (Some((s, _)), Some(pre)) => s.snapshot(report.tx, target.rel, pre).map(Some),
        _ => Ok(None),
    };
    let tmp = store.map(|(s, _)| s.tmp_dir());
    let written = kept.and_then(|k| {
        atomic::replace(target.dir, target.name, &new, file.as_ref(), tmp).map(|()| k)
    });
    match written {
        Ok(snapshot) => {
            report.snapshot = snapshot;
            report
        }
        Err(e) => {
            let sha = engine::sha256_hex(original.as_deref().unwrap_or_default());
            let mut failed = io_failure(e, sha);
            failed.tx = report.tx;
            failed.total = report.total;
            failed.operations = report.operations;
            failed
        }
    }
}

/// The file, open, and its bytes; neither when it does not exist.
fn read(target: &Target<'_>) -> Result<(Option<File>, Option<Vec<u8>>), StoreError> {
    let Some(mut file) = atomic::open_existing(target.dir, target.name)? else {
        return Ok((None, None));
    };
    let meta = file
        .metadata()
        .map_err(io_err("stat", Path::new(target.rel)))?;
    if !meta.is_file() {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
        return Err(io_err("edit", Path::new(target.rel))(e));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(io_err("read", Path::new(target.rel)))?;
    Ok((Some(file), Some(bytes)))
}

fn io_failure(e: StoreError, sha: String) -> Report {
    let mut report = Report::new(Outcome::Failed, sha);
    report.error = Some(ErrorReport {
        kind: "io",
        operation: None,
        message: e.to_string(),
        hint: Some(
            "the edit itself was not the problem; fix the file system error and send it again"
                .into(),
        ),
        closest: None,
    });
    report
}

fn log_entry(r: &Report) -> serde_json::Value {
    let (added, removed) = r.diff.as_deref().map_or((0, 0), count_changes);
    json!({
        "tx": r.tx,
        "time": r.time,
        "file": r.file,
        "outcome": r.outcome,
        "applied": r.applied,
        "total": r.total,
        "sha256": r.sha256,
        "lines_added": added,
        "lines_removed": removed,
        "snapshot": r.snapshot,
        "error": r.error.as_ref().map(|e| e.kind),
        "pid": std::process::id(),
    })
}

fn count_changes(diff: &str) -> (usize, usize) {
    let body = diff
        .lines()
        .filter(|l| !l.starts_with("+++") && !l.starts_with("---"));
    body.fold((0, 0), |(a, r), l| match l.as_bytes().first() {
        Some(b'+') => (a + 1, r),
        Some(b'-') => (a, r + 1),
        _ => (a, r),
    })
}
