//! Stage 1's end: the parsed payload read against the file before its
//! operations run (a SEARCH copied with the file's byte order mark, a block
//! with several dividers, an `if_match` that no longer holds).

use std::borrow::Cow;
use std::ops::Range;

use super::interpret::{Failure, Transaction};
use super::line_match;
use super::payload::{self, Operation, text_lines};
use super::report::{ErrorKind, ErrorReport};

/// The byte order mark is kept apart from the text blocks match, so a SEARCH
/// copied with it (by a reader that shows the file's bytes) would never match its
/// first line: on a file that has one, a SEARCH's (and its REPLACE's) leading
/// mark is dropped, with a note. The file keeps its mark.
pub(super) fn drop_copied_bom(parsed: &mut payload::Payload) {
    const MARK: char = '\u{feff}';
    let mut dropped = Vec::new();
    for (i, op) in parsed.operations.iter_mut().enumerate() {
        if let Some(search) = op.search.strip_prefix(MARK) {
            op.search = search.to_owned();
            if let Some(replace) = op.replace.strip_prefix(MARK) {
                op.replace = replace.to_owned();
            }
            dropped.push((i + 1).to_string());
        }
    }
    if !dropped.is_empty() {
        parsed.notes.push(format!(
            "the byte order mark at the start of SEARCH (operation {}) was dropped: it is the file's, kept apart from its text, and stays",
            dropped.join(", ")
        ));
    }
}

/// The first block with several dividers when neither the file nor another
/// block's REPLACE has a `=======` line: no reading can make one content, so the
/// block is malformed and the payload is rejected before anything runs.
pub(super) fn doubled_divider<'o>(ops: &'o [Operation], body: &[u8]) -> Option<&'o Operation> {
    let divider = |line: &[u8]| {
        let line = line.trim_ascii();
        line.len() >= 5 && line.iter().all(|&b| b == b'=')
    };
    let op = ops.iter().find(|op| !op.splits.is_empty())?;
    // A block with several dividers has them in some reading's REPLACE by
    // construction; only a plain block's REPLACE shows one will be written.
    let written = ops
        .iter()
        .filter(|op| op.splits.is_empty())
        .any(|op| op.replace.lines().any(|l| divider(l.as_bytes())));
    (!written && !body.split(|&b| b == b'\n').any(divider)).then_some(op)
}

/// How to write a block for a file whose own lines look like dividers.
const DIVIDER_HINT: &str = "to edit a file whose lines look like `=======`, open the block with 9 `<` and use 9 `=` and 9 `>`, or escape such a content line as `\\=======`";

/// A block with several dividers in a file that has no such line of its own.
pub(super) fn divider_mistake(op: &Operation) -> (String, &'static str) {
    (
        format!(
            "the block at payload line {} has {} `=======` lines, and the file has none of its own; one divider separates SEARCH from REPLACE",
            op.payload_line,
            op.splits.len() + 1
        ),
        DIVIDER_HINT,
    )
}

/// The first `if_match` that does not hold.
pub(super) fn stale(ops: &[Operation], sha: &str) -> Option<ErrorReport> {
    let (i, want) = ops
        .iter()
        .enumerate()
        .find_map(|(i, op)| op.if_match.as_deref().filter(|w| *w != sha).map(|w| (i, w)))?;
    Some(ErrorReport {
        kind: ErrorKind::Stale,
        operation: Some(i + 1),
        message: format!(
            "the file changed since it was read: if_match is {want}, the file's SHA-256 is now {sha}"
        ),
        hint: Some("read the file again and rebuild the edit against its current content".into()),
        closest: None,
    })
}

impl Transaction<'_, '_> {
    /// A block with several divider lines (the file's own `=======` lines among
    /// them) read the one way whose SEARCH matches the file.
    pub(super) fn reading<'op>(&self, op: &'op Operation) -> Result<Cow<'op, Operation>, Failure> {
        if op.splits.is_empty() {
            return Ok(Cow::Borrowed(op));
        }
        let scope = self.line_scope(op);
        let hint = DIVIDER_HINT;
        // Only a file that has such lines of its own makes a second divider content.
        if !scope.clone().any(|i| self.divider_like(i)) {
            let (message, hint) = divider_mistake(op);
            return Err(Failure::new(ErrorKind::Malformed, message, hint));
        }
        let first = (op.search.clone(), op.replace.clone());
        let readings: Vec<&(String, String)> = std::iter::once(&first)
            .chain(&op.splits)
            .filter(|(search, _)| self.reads_here(search, scope.clone()))
            .collect();
        match readings[..] {
            [(search, replace)] => Ok(Cow::Owned(Operation {
                search: search.clone(),
                replace: replace.clone(),
                splits: Vec::new(),
                ..op.clone()
            })),
            _ => Err(Failure::new(
                ErrorKind::Malformed,
                format!(
                    "the block at payload line {} holds {} divider lines, so it reads {} ways, and {} of those SEARCH texts match the file",
                    op.payload_line,
                    op.splits.len() + 1,
                    op.splits.len() + 1,
                    match readings.len() {
                        0 => "none".to_owned(),
                        n => n.to_string(),
                    }
                ),
                hint,
            )),
        }
    }

    /// Whether one reading's SEARCH matches the file somewhere not followed by a
    /// divider-like line: where the file goes on with `=======`, the divider that
    /// ended this SEARCH is the file's own line, so a longer reading is meant.
    fn reads_here(&self, search: &str, scope: Range<usize>) -> bool {
        let Some(found) = line_match::find(&self.doc, &text_lines(search), scope, || self.tiers())
        else {
            return false;
        };
        found
            .starts
            .iter()
            .any(|&s| s + found.len() >= self.doc.len() || !self.divider_like(s + found.len()))
    }

    /// Whether file line `i` would read as a block's divider.
    fn divider_like(&self, i: usize) -> bool {
        let line = self.doc.line(i).trim_ascii();
        line.len() >= 5 && line.iter().all(|&b| b == b'=')
    }
}
