//! Stage 6: the report. A transaction's operations' outcomes gathered into
//! one report, and the new bytes when every operation applied.

use super::budget::{self, Budget};
use super::interpret::{OVER_BUDGET_HINT, Transaction};
use super::payload::{FileAct, Operation};
use super::report::{ErrorKind, ErrorReport, OpOutcome, OpReport, Outcome, Report};
use super::{BOM, Edit, diff, outcome, sha256_hex};

/// `notes` and, when failing operations went undiagnosed, how many.
pub(super) fn undiagnosed_note(budget: &Budget, mut notes: Vec<String>) -> Vec<String> {
    if budget.undiagnosed() > 0 {
        notes.push(format!(
            "{} failing operation(s) were not diagnosed: only the first {} are (closest region, differences); fix those and send the payload again to see the rest",
            budget.undiagnosed(),
            budget::MAX_DIAGNOSED
        ));
    }
    notes
}

/// The report of a transaction whose work budget ran out at the last of
/// `ops` (see budget.rs): it fails as `over_budget`, whatever the operations
/// before it did, and the operations after it were not run.
pub(super) fn over_budget(
    before: &[u8],
    ops: Vec<OpReport>,
    total: usize,
    mut notes: Vec<String>,
) -> Edit {
    let error = ops.last().and_then(|o| o.error.clone()).unwrap_or_else(|| {
        ErrorReport::plain(ErrorKind::OverBudget, "over budget", OVER_BUDGET_HINT)
    });
    if total > ops.len() {
        notes.push(format!("operations {}-{total} were not run", ops.len() + 1));
    }
    unwritten(failed(error, sha256_hex(before), total), ops, notes)
}

/// The report of a transaction whose `if_match` did not hold: the operations ran
/// on the file as it is, so each still says whether it would apply, and the one
/// that carried the `if_match` failed as `stale`.
pub(super) fn stale_edit(
    error: ErrorReport,
    sha: String,
    mut ops: Vec<OpReport>,
    notes: Vec<String>,
) -> Edit {
    let at = error.operation.unwrap_or(1).saturating_sub(1);
    for (i, op) in ops.iter_mut().enumerate() {
        if i == at {
            op.outcome = OpOutcome::Failed;
            op.error = Some(error.clone());
        } else if op.outcome != OpOutcome::Failed {
            op.outcome = OpOutcome::Matched;
        }
    }
    let report = failed(error, sha, ops.len());
    unwritten(report, ops, notes)
}

/// Agents often write every block against the file as they read it, so a block
/// whose lines an earlier block of the payload changed fails as `not_found`. The
/// file alone does not show why; say which earlier operation changed those lines.
pub(super) fn note_earlier_changes(
    ops: &mut [OpReport],
    parsed: &[Operation],
    tx: &Transaction<'_, '_>,
) {
    for i in 1..ops.len() {
        let Some(error) = ops[i].error.as_ref() else {
            continue;
        };
        // Only an operation applied before can have changed its lines.
        if error.kind != ErrorKind::NotFound
            || !ops[..i].iter().any(|o| o.outcome == OpOutcome::Applied)
        {
            continue;
        }
        let mut alone = tx.restarted();
        let Some([first, last]) = alone.run(i + 1, &parsed[i]).lines else {
            continue;
        };
        let Some(earlier) = ops[..i].iter().rev().find(|o| {
            o.outcome == OpOutcome::Applied && o.lines.is_some_and(|[a, b]| a <= last && first <= b)
        }) else {
            continue;
        };
        let note = format!(
            "SEARCH matches the file as it was before operation #{} changed it (lines {first}-{last}): operations run in order, each on the result of the one before, so write this SEARCH as the file reads after #{}, or merge the two blocks into one",
            earlier.index, earlier.index
        );
        if let Some(e) = ops[i].error.as_mut() {
            e.hint = Some(match e.hint.take() {
                Some(h) => format!("{note}; {h}"),
                None => note,
            });
        }
    }
}

/// A transaction that writes nothing: the failed `report`, with every
/// operation's outcome and the payload's notes.
fn unwritten(mut report: Report, ops: Vec<OpReport>, notes: Vec<String>) -> Edit {
    report.operations = ops;
    report.notes = notes;
    Edit {
        content: None,
        report,
        act: None,
    }
}

/// `bytes` without a byte order mark, which no grammar reads.
fn unbommed(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

pub(super) fn failed(error: ErrorReport, sha: String, total: usize) -> Report {
    let mut report = Report::new(Outcome::Failed, sha);
    report.total = total;
    report.error = Some(error);
    report
}

pub(super) fn finish(
    name: &str,
    original: Option<&[u8]>,
    tx: &Transaction<'_, '_>,
    mut ops: Vec<OpReport>,
    notes: Vec<String>,
) -> Edit {
    let total = ops.len();
    let before = original.unwrap_or_default();
    if let Some(first) = ops.iter().find_map(|o| o.error.clone()) {
        for op in ops.iter_mut().filter(|o| o.outcome != OpOutcome::Failed) {
            op.outcome = OpOutcome::Matched;
        }
        return unwritten(failed(first, sha256_hex(before), total), ops, notes);
    }
    let body = before.strip_prefix(BOM).unwrap_or(before);
    let mut new = Vec::with_capacity(body.len() + 64);
    new.extend_from_slice(&before[..before.len() - body.len()]);
    tx.doc.write_lines(0..tx.doc.len(), &mut new);
    let act = tx.act.clone().map(|(act, _)| act);
    // A moved file is read as the language of its new name.
    let named = match &act {
        Some(FileAct::MoveTo(to)) => to.as_str(),
        _ => name,
    };
    let syntax = match act {
        Some(FileAct::Delete { .. }) => None,
        _ => match outcome::check(
            named,
            original.map(unbommed),
            &new[new.len() - unbommed(&new).len()..],
            tx.opts,
        ) {
            Ok(syntax) => syntax,
            Err(refusal) => {
                let mut report = failed(refusal.error, sha256_hex(before), total);
                if refusal.syntax.is_some() {
                    for op in ops.iter_mut().filter(|o| o.outcome == OpOutcome::Applied) {
                        op.outcome = OpOutcome::Matched;
                    }
                }
                report.syntax = refusal.syntax;
                return unwritten(report, ops, notes);
            }
        },
    };
    let changed = original.is_none() || new != before || act.is_some();
    let diff = match tx.tracked {
        true => diff::doc_diff(body, &tx.doc, name),
        false => None,
    };
    // A removed or moved file has no bytes at its path after the transaction,
    // so no hash (a moved file's is in the section of its new path).
    let sha = match act {
        Some(_) => String::new(),
        None => sha256_hex(&new),
    };
    let mut report = Report::new(Outcome::Ok, sha);
    report.applied = ops
        .iter()
        .filter(|o| o.outcome == OpOutcome::Applied)
        .count();
    report.total = total;
    report.operations = ops;
    report.notes = notes;
    report.syntax = syntax;
    report.diff = Some(match act {
        Some(FileAct::Delete { .. }) => diff::file_diff(before, b"", name),
        _ => diff.unwrap_or_else(|| diff::file_diff(before, &new, name)),
    });
    Edit {
        content: changed.then_some(new),
        report,
        act,
    }
}
