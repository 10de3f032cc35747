//! Moves in a payload (`*** Move to:`, a git diff's rename): where each
//! file goes, checked before anything is written, and the report of the
//! file that arrives.

use crate::engine::ErrorKind as EditKind;
use crate::engine::payload::Tree;
use crate::engine::{self, FileAct, OpOutcome, OpReport, Outcome};
use crate::report::{ErrorKind, ErrorReport, Report};
use crate::store::project_path;
use crate::{Root, stamp};

use super::{Decided, MultiReport};

/// Checks where each moved file goes: a path inside the root, free, and not
/// edited by the payload too (its edits belong under the file's old path). A
/// move that passes gets a section of its own, the new file's.
pub(super) fn place_moves(root: Root<'_>, decided: &mut [Decided], report: &mut MultiReport) {
    let rels: Vec<String> = decided.iter().map(|d| d.rel.clone()).collect();
    for d in decided.iter_mut() {
        let Some(FileAct::MoveTo(to)) = &d.edit.act else {
            continue;
        };
        let checked = root
            .locate(to)
            .map_err(|e| e.to_string())
            .and_then(|rel| project_path(&rel).map_err(|why| format!("{to}: {why}")));
        let refusal = match checked {
            Err(why) => Some((ErrorKind::BadPath, why)),
            // Before anything is said of what is there: natively, `mv` into a
            // directory one may not search fails the same whatever it holds.
            Ok(rel) if !root.reaches(&rel) => Some((
                ErrorKind::PermissionDenied,
                format!(
                    "{} would move to {rel}, in a directory you may not search",
                    d.rel
                ),
            )),
            Ok(rel) if rels.contains(&rel) => Some((
                ErrorKind::Edit(EditKind::Malformed),
                format!(
                    "{} moves to {rel}, which the payload also edits: put those edits under the file's old path",
                    d.rel
                ),
            )),
            Ok(rel) if root.entry(&rel).is_some() => Some((
                ErrorKind::Edit(EditKind::FileExists),
                format!(
                    "{} would move to {rel}, which exists: a move never overwrites",
                    d.rel
                ),
            )),
            Ok(rel) => {
                report.files.push(arrived(&d.rel, &rel, &d.edit));
                d.moved_to = Some(rel);
                None
            }
        };
        if let Some((kind, why)) = refusal {
            let mut e =
                ErrorReport::plain(kind, why, "move the file to a new path inside the project");
            if let Some(r) = report.files.iter_mut().find(|r| r.file == d.rel) {
                refuse_move(r, &mut e, d.original());
            }
            report.fail(Outcome::Failed, &d.rel, &e);
        }
    }
}

/// The section of a file whose move was refused: the move is the operation that
/// failed, the others only matched, and nothing was written (no diff), so the
/// report never reads as `applied` while the file stays as it was.
fn refuse_move(r: &mut Report, e: &mut ErrorReport, original: Option<&[u8]>) {
    for op in r.operations.iter_mut() {
        if op.strategy == Some("move") {
            e.operation = Some(op.index);
            op.outcome = OpOutcome::Failed;
            op.error = Some(e.clone());
        } else if op.outcome == OpOutcome::Applied {
            op.outcome = OpOutcome::Matched;
        }
    }
    r.outcome = Outcome::Failed;
    r.applied = 0;
    r.diff = None;
    r.sha256 = engine::sha256_hex(original.unwrap_or_default());
    r.error = Some(e.clone());
}

/// The section of a file that a move creates at `to`.
fn arrived(from: &str, to: &str, edit: &engine::Edit) -> Report {
    let bytes = edit.content.as_deref().unwrap_or_default();
    let mut r = stamp(Report::new(Outcome::Ok, engine::sha256_hex(bytes)), to);
    r.total = 1;
    r.applied = 1;
    r.operations = vec![OpReport {
        index: 1,
        outcome: OpOutcome::Applied,
        strategy: Some("move"),
        lines: None,
        warnings: vec![format!("moved here from {from}")],
        error: None,
    }];
    r
}
