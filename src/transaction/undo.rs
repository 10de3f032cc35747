//! Undo: a kept pre-image restored as a new transaction, so an undo can be undone.
//!
//! It refuses to overwrite what changed after the transaction it undoes (later
//! transactions on the file, or changes made outside editfs) unless forced, and
//! names those changes.

use super::{Root, Who, failed_commit, io_failure, log_entry, read, stamp};
use crate::engine::diff::file_diff;
use crate::engine::{ErrorReport, OpOutcome, OpReport, Outcome, Report, sha256_hex};
use crate::store::objects::Side;
use crate::store::{Change, Store};

/// What to undo.
pub struct Request<'a> {
    pub rel: &'a str,
    /// The transaction whose pre-image to restore; the latest on the file if `None`.
    pub to: Option<u64>,
    pub force: bool,
}

/// Transactions in the log that changed `rel`, oldest first, with the file's SHA-256
/// after each when it is known (a direct write's is not).
pub fn changes_of(store: &Store, rel: &str) -> Vec<(u64, Option<String>)> {
    store
        .entries()
        .iter()
        .filter(|e| e["outcome"] == "ok")
        .filter_map(|e| {
            let tx = e["tx"].as_u64()?;
            let file = e["files"].as_array()?.iter().find(|f| f["file"] == rel)?;
            Some((tx, file["sha256"].as_str().map(str::to_owned)))
        })
        .collect()
}

/// Restores `req.rel` to what it was before transaction `req.to`.
pub fn run(store: &Store, root: Root<'_>, req: &Request<'_>, who: &Who) -> Report {
    let lock = match store.lock() {
        Ok(l) => l,
        Err(e) => return stamp(io_failure(e, String::new()), req.rel),
    };
    let (file, current) = match read(root, req.rel) {
        Ok(r) => r,
        Err(e) => return stamp(io_failure(e, String::new()), req.rel),
    };
    let now_sha = sha256_hex(current.as_deref().unwrap_or_default());
    let mut report = stamp(Report::new(Outcome::Failed, now_sha.clone()), req.rel);
    let history = changes_of(store, req.rel);
    let pre_images = store.objects().txs(Side::Pre, req.rel);
    let Some(to) = req.to.or_else(|| pre_images.last().copied()) else {
        report.error = Some(ErrorReport::plain(
            "not_found",
            format!("no kept version of {}", req.rel),
            "editfs history shows what was kept",
        ));
        return report;
    };
    let Some(restored) = store.objects().read(Side::Pre, req.rel, to) else {
        let msg = format!(
            "no pre-image of {} from transaction {to} (it created the file, or the version was pruned)",
            req.rel
        );
        report.error = Some(ErrorReport::plain(
            "not_found",
            msg,
            "editfs history lists the transactions that kept one",
        ));
        return report;
    };
    if !req.force
        && let Some(e) = later_changes(&history, to, &now_sha, req.rel)
    {
        report.error = Some(e);
        return report;
    }
    report.total = 1;
    let tx = match store.next_tx(&lock) {
        Ok(tx) => tx,
        Err(e) => return stamp(io_failure(e, now_sha), req.rel),
    };
    report.tx = tx;
    report.outcome = Outcome::Ok;
    report.applied = 1;
    report.sha256 = sha256_hex(&restored);
    report.diff = Some(file_diff(
        current.as_deref().unwrap_or_default(),
        &restored,
        req.rel,
    ));
    report.operations = vec![OpReport {
        index: 1,
        outcome: OpOutcome::Applied,
        strategy: Some("undo"),
        lines: None,
        warnings: vec![format!(
            "restored {} as it was before transaction {to}",
            req.rel
        )],
        error: None,
    }];
    let entry = log_entry("undo", &report, &[(req.rel, &report)], who);
    let change = Change {
        rel: req.rel,
        old: file.as_ref(),
        pre: current.as_deref(),
        new: &restored,
    };
    match store.commit(&lock, tx, (root.fd, root.path), &[change], entry) {
        Ok(kept) => {
            report.snapshot = kept.into_iter().next().flatten();
            report
        }
        Err(e) => failed_commit(e, report, current.as_deref()),
    }
}

/// Changes after transaction `to` that an undo would overwrite.
fn later_changes(
    history: &[(u64, Option<String>)],
    to: u64,
    now_sha: &str,
    rel: &str,
) -> Option<ErrorReport> {
    let later: Vec<String> = history
        .iter()
        .filter(|(tx, _)| *tx > to)
        .map(|(tx, _)| tx.to_string())
        .collect();
    if !later.is_empty() {
        let msg = format!(
            "{rel} changed after transaction {to}, in transaction(s) {}",
            later.join(", ")
        );
        return Some(ErrorReport::plain(
            "later_changes",
            msg,
            "undo those first (newest first), or pass --force to overwrite them",
        ));
    }
    let last_sha = history
        .iter()
        .rev()
        .find(|(tx, _)| *tx <= to)
        .and_then(|(_, s)| s.as_deref());
    match last_sha {
        Some(sha) if sha != now_sha => {
            let msg = format!(
                "{rel} changed outside editfs since transaction {to} (its SHA-256 is now {now_sha})"
            );
            Some(ErrorReport::plain(
                "later_changes",
                msg,
                "pass --force to overwrite those changes",
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_transactions_and_outside_changes_are_named() {
        let h = vec![
            (3, Some("aa".to_owned())),
            (5, Some("bb".to_owned())),
            (6, None),
        ];
        let e = later_changes(&h, 3, "bb", "f").unwrap();
        assert!(e.message.contains("transaction(s) 5, 6"), "{}", e.message);
        assert!(
            later_changes(&h, 6, "anything", "f").is_none(),
            "a direct write's result is unknown"
        );
        let h = &h[..2];
        let e = later_changes(h, 5, "cc", "f").unwrap();
        assert!(e.message.contains("outside editfs"), "{}", e.message);
        assert!(later_changes(h, 5, "bb", "f").is_none());
    }
}
