//! Stage 2: where an operation applies. Line hints moved by the operations
//! before it, a hunk's `@@` anchors, line scopes, the choice among several
//! matches, and the diagnosis of an operation that matches nowhere.

use std::borrow::Cow;
use std::ops::Range;

use super::hints::Moved;
use super::interpret::{Failure, Transaction};
use super::payload::{self, Operation, text_lines};
use super::report::ErrorKind;
use super::{Ambiguity, diagnose, line_match};

/// A `:start_line:` that pointed into lines an earlier operation replaced.
pub(super) struct Replaced {
    pub(super) hint: usize,
    pub(super) by: usize,
    /// What that operation made of those lines, where they lie now.
    pub(super) now: Range<usize>,
    pub(super) warning: String,
}

/// Line ranges as a reader writes them: `3-5, 9, 12-14`.
fn list_ranges(ranges: &[[usize; 2]]) -> String {
    ranges
        .iter()
        .map(|[a, b]| match a == b {
            true => a.to_string(),
            false => format!("{a}-{b}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How to pick one of several matches, in every form the payload may take.
const AMBIGUOUS_HINT: &str = "pick one: put `:start_line:N` and a `-------` line at the top of SEARCH to take the match nearest line N, or add surrounding lines to SEARCH until it is unique; in JSON, give `start_line`/`end_line`, or `all: true` (or `expected_replacements`) to replace every one";

/// Says so when a `:start_line:` hint past the end of the file picked a match:
/// the nearest match is then simply the last, which a stale or invented line
/// number makes a guess the agent should know about.
pub(super) fn past_end(op: &Operation, lines: usize, warnings: &mut [String]) {
    let Some(near) = op.near.filter(|&n| n > lines) else {
        return;
    };
    if let Some(w) = warnings
        .iter_mut()
        .find(|w| w.contains(&format!("nearest line {near}")))
    {
        w.push_str(&format!(
            ": line {near} is past the end of the file ({lines} lines), so the last match was taken; check the line numbers you read"
        ));
    }
}

/// Which occurrences (indices into `ranges`, the lines of each) to replace.
pub(super) fn choose(
    ranges: &[[usize; 2]],
    op: &Operation,
    exact: bool,
    mode: Ambiguity,
) -> Result<(Vec<usize>, Vec<String>), Failure> {
    let n = ranges.len();
    let list = || list_ranges(ranges);
    if let Some(want) = op.expected {
        if want != n {
            return Err(Failure::new(
                ErrorKind::CountMismatch,
                format!(
                    "expected {want} occurrence(s), found {n} (line(s) {})",
                    list()
                ),
                "set expected_replacements to the real count, or make SEARCH match exactly the places to change",
            ));
        }
        return Ok(((0..n).collect(), Vec::new()));
    }
    if op.all || n == 1 {
        return Ok(((0..n).collect(), Vec::new()));
    }
    if let Some(near) = op.near {
        let distance = |k: usize| ranges[k][0].abs_diff(near);
        let best = (0..n).min_by_key(|&k| distance(k)).unwrap_or(0);
        let tied = (0..n).filter(|&k| distance(k) == distance(best)).count();
        // A tolerant match is never picked by position alone: only the hint,
        // nearer to one match than to any other, may pick it.
        if !exact && tied == 1 {
            let w = format!(
                "SEARCH matches {n} places only when differences are tolerated (lines {}); the one nearest line {near} was replaced",
                list()
            );
            return Ok((vec![best], vec![w]));
        }
        if exact && (tied == 1 || mode == Ambiguity::First) {
            let which = if tied == 1 {
                "the one nearest"
            } else {
                "the first of those nearest"
            };
            let w = format!(
                "SEARCH occurs {n} times (lines {}); {which} line {near} was replaced",
                list()
            );
            return Ok((vec![best], vec![w]));
        }
    }
    if !exact {
        return Err(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "SEARCH matches {n} places only when differences are tolerated (lines {}), so none was chosen",
                list()
            ),
            "copy SEARCH from the file exactly, with enough surrounding lines to make it unique, or put `:start_line:N` at the top of SEARCH to take the match nearest line N",
        ));
    }
    if mode == Ambiguity::Error {
        return Err(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "SEARCH occurs {n} times (lines {}), so none was changed",
                list()
            ),
            AMBIGUOUS_HINT,
        ));
    }
    let w = format!(
        "SEARCH occurs {n} times (lines {}); the first was replaced",
        list()
    );
    Ok((vec![0], vec![w]))
}

/// `chosen` without matches that overlap an earlier chosen one.
pub(super) fn non_overlapping(chosen: &[usize], starts: &[usize], len: usize) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::with_capacity(chosen.len());
    for &k in chosen {
        if out.last().is_none_or(|&p| starts[p] + len <= starts[k]) {
            out.push(k);
        }
    }
    out
}

impl Transaction<'_, '_> {
    /// A `not_found` failure of an operation with a line scope, said so when
    /// SEARCH is in the file but outside those lines: "not in the file" would
    /// send the agent to fix a SEARCH that is right.
    pub(super) fn outside_scope(&self, op: &Operation, f: Failure) -> Failure {
        let Some(scope) = op.scope.as_ref() else {
            return f;
        };
        if f.kind != ErrorKind::NotFound || op.search.is_empty() {
            return f;
        }
        if !matches!(op.find, payload::Find::Lines | payload::Find::Text) {
            return f;
        }
        let mut bytes = Vec::new();
        self.doc.write_lines(0..self.doc.len(), &mut bytes);
        let line_of = |at: usize| memchr::memchr_iter(b'\n', &bytes[..at]).count() + 1;
        let found: Vec<String> = memchr::memmem::find_iter(&bytes, op.search.as_bytes())
            .map(|at| line_of(at).to_string())
            .collect();
        if found.is_empty() {
            return f;
        }
        let end = (*scope.end()).min(self.doc.len());
        Failure {
            message: format!(
                "SEARCH text not found in lines {}-{end}, the operation's `start_line`/`end_line`; it is in the file at line(s) {}",
                scope.start(),
                found.join(", ")
            ),
            hint: Some(
                "widen start_line/end_line to take in the line meant, or leave them out".into(),
            ),
            ..f
        }
    }

    /// `op` with its line numbers (a `:start_line:` hint, a JSON scope) moved
    /// by the lines the operations before it added or removed above them: an
    /// agent counts them in the file it read, before the transaction, as a
    /// patch numbers its hunks. A patch's hunks come so moved already.
    pub(super) fn in_lines_now<'op>(&self, op: &'op Operation) -> Cow<'op, Operation> {
        let numbered = op.near.is_some() || op.scope.is_some();
        if self.moved.is_empty() || !numbered || !op.patched.is_empty() {
            return Cow::Borrowed(op);
        }
        let now = |line: usize| self.line_now(line).0;
        Cow::Owned(Operation {
            near: op.near.map(now),
            scope: op.scope.as_ref().map(|r| match *r.end() {
                usize::MAX => now(*r.start())..=usize::MAX,
                end => now(*r.start())..=now(end),
            }),
            ..op.clone()
        })
    }

    /// Where `line`, counted before the transaction, lies now; and the lines
    /// (counted then) an operation before replaced, if it lay in them: it is
    /// then taken where they began.
    fn line_now(&self, line: usize) -> (usize, Option<Moved>) {
        let mut replaced = None;
        let now = self.moved.iter().fold(line, |l, m| match l {
            l if l > m.last => l.saturating_add_signed(m.delta).max(1),
            l if l >= m.first => {
                replaced.get_or_insert(*m);
                m.first
            }
            l => l,
        });
        (now, replaced)
    }

    /// Warns when a `:start_line:` hint points into lines an earlier operation
    /// of the payload replaced: the line the agent meant is gone, and the
    /// match nearest where they began was taken.
    pub(super) fn hint_replaced(&self, read: &Operation) -> Option<Replaced> {
        let hint = read.near.filter(|_| read.patched.is_empty())?;
        let (now, m) = match self.line_now(hint) {
            (now, Some(m)) => (now, m),
            (_, None) => return None,
        };
        let (first, last) = (m.first, m.last);
        let warning = format!(
            "`:start_line:{hint}` points into lines operation {} replaced ({first}-{last} as they were then): taken as line {now}, where they begin",
            m.by
        );
        let len = (last - first + 1).saturating_add_signed(m.delta);
        Some(Replaced {
            hint,
            by: m.by,
            now: now..now + len,
            warning,
        })
    }

    /// Fails an operation whose `:start_line:` pointed into lines an earlier
    /// operation replaced (`replaced`) but which matched outside what that
    /// operation made of them (lines `at`): the line it meant is gone, and the
    /// match it found is another copy, not its own.
    pub(super) fn outside_replaced(replaced: &Replaced, at: [usize; 2]) -> Option<Failure> {
        let r = &replaced.now;
        if at[0] < r.end && at[1] >= r.start {
            return None;
        }
        // The hint comes from `note_earlier_changes`, which names how the
        // block reads against the file before that operation.
        Some(Failure {
            kind: ErrorKind::NotFound,
            message: format!(
                "`:start_line:{}` points into lines operation {} replaced; SEARCH is not in what it made of them (lines {}-{} now) but at line {}, another place",
                replaced.hint,
                replaced.by,
                r.start,
                r.end.saturating_sub(1).max(r.start),
                at[0]
            ),
            hint: None,
            closest: None,
        })
    }

    /// The lines a hunk with an `@@ impl B {` line lies in: from the file's
    /// first line of that text on, as the patch format defines it, so a copy of
    /// the hunk's lines above it (in `impl A`) is never taken for it, and a
    /// hunk already applied below it reads as a replay. The whole file when
    /// there is no such line in it (the hunk is then placed by its lines alone).
    pub(super) fn after_anchor(&self, op: &Operation) -> Range<usize> {
        self.anchor_line(op).unwrap_or(0)..self.doc.len()
    }

    /// The file's first line (0-based) of the text of a hunk's last `@@` line,
    /// after the lines of the `@@` lines before it.
    pub(super) fn anchor_line(&self, op: &Operation) -> Option<usize> {
        let inner = op.anchors.last()?;
        self.line_of(inner, self.anchors_from(op))
    }

    /// The first line (0-based) at or after `from` that reads `text`, trimmed.
    fn line_of(&self, text: &str, from: usize) -> Option<usize> {
        let text = text.trim().as_bytes();
        (from..self.doc.len()).find(|&i| self.doc.line(i).trim_ascii() == text)
    }

    /// Where a hunk's last `@@` line is looked for: after the file's lines of
    /// the `@@` lines that enclose it (`class B:` for `def run(self):`), each
    /// found after the one before; one the file lacks is passed over.
    fn anchors_from(&self, op: &Operation) -> usize {
        let outer = &op.anchors[..op.anchors.len().saturating_sub(1)];
        outer
            .iter()
            .fold(0, |from, a| self.line_of(a, from).unwrap_or(from))
    }

    /// A `not_found` failure of a hunk whose lines are in the file only above
    /// its `@@` line (which starts at line index `from`), said so: "not in the
    /// file" would send the agent to fix lines that are right.
    pub(super) fn before_anchor(&self, op: &Operation, from: usize, f: Failure) -> Failure {
        if f.kind != ErrorKind::NotFound || from == 0 {
            return f;
        }
        let search = text_lines(&op.search);
        let Some(found) = line_match::find(&self.doc, &search, 0..from, || self.tiers()) else {
            return f;
        };
        let at: Vec<String> = found.starts.iter().map(|s| (s + 1).to_string()).collect();
        let anchor = op.anchors.last().map_or("", |a| a.trim());
        Failure {
            message: format!(
                "the hunk's lines are not in the file below its `@@ {anchor}` line (line {}), only above it, at line(s) {}",
                from + 1,
                at.join(", ")
            ),
            hint: Some(format!(
                "a hunk lies below its @@ line: if it is meant for the lines below it, see how they differ (closest match); if for line {}, make the @@ line name the block there, or leave it out",
                at[0]
            )),
            ..f
        }
    }

    /// Where a hunk with an `@@ def f():` line lies, when it matches several
    /// places: from the file's line of that text on, the match nearest it
    /// winning. When the file has that text on several lines, each leads to the
    /// first match at or after it, and the hunk is placed only when they all lead
    /// to the same one (a repeated method name whose other copies are followed by
    /// no match). `None` without such a line, when the file has none, or when its
    /// lines lead to different matches: then several matches still fail.
    pub(super) fn anchored(&self, op: &Operation) -> Option<(Range<usize>, usize)> {
        let anchor = op.anchors.last()?.trim();
        let at: Vec<usize> = (self.anchors_from(op)..self.doc.len())
            .filter(|&i| self.doc.line(i).trim_ascii() == anchor.as_bytes())
            .collect();
        match at[..] {
            [] => None,
            [line] => Some((line..self.doc.len(), op.near.unwrap_or(line + 1))),
            _ => {
                // A line hint (`*** End of File`) says where among the matches;
                // an anchor repeated beside it is no sign of which one it meant.
                if op.near.is_some() {
                    return None;
                }
                let search = text_lines(&op.search);
                let found =
                    line_match::find(&self.doc, &search, 0..self.doc.len(), || self.tiers())?;
                let led: Vec<(usize, usize)> = at
                    .iter()
                    .filter_map(|&a| found.starts.iter().find(|&&s| s >= a).map(|&s| (a, s)))
                    .collect();
                let &(line, start) = led.last()?;
                led.iter()
                    .all(|&(_, s)| s == start)
                    .then_some((line..self.doc.len(), line + 1))
            }
        }
    }

    /// Lines `scope` (1-based, inclusive) as 0-based line indices.
    pub(super) fn line_scope(&self, op: &Operation) -> Range<usize> {
        match &op.scope {
            Some(s) => (s.start() - 1).min(self.doc.len())..(*s.end()).min(self.doc.len()),
            None => 0..self.doc.len(),
        }
    }

    pub(super) fn not_found(&self, search: &[&str], scope: Range<usize>) -> Failure {
        if !self.utf8() {
            let (why, hint) = diagnose::not_utf8(self.body, search);
            return Failure::new(
                ErrorKind::NotText,
                format!(
                    "{why}; only byte-exact edits apply to such a file, and SEARCH is not in it byte for byte"
                ),
                hint,
            );
        }
        if !self.diagnosing || !self.budget.diagnoses(self.body.len()) {
            return Failure::new(
                ErrorKind::NotFound,
                "SEARCH text not found in the file (not diagnosed: see the notes)",
                "read the file again and copy the lines to change exactly",
            );
        }
        let d = diagnose::not_found(&self.doc, search, scope);
        let hint = match self.escaped_twice(search) {
            true => format!(
                "SEARCH holds `\\n` as two characters (a backslash and `n`) where the file has line breaks: its newlines were escaped twice; send them once (`\\n` inside a JSON string). {}",
                d.hint
            ),
            false => d.hint,
        };
        Failure {
            kind: ErrorKind::NotFound,
            message: "SEARCH text not found in the file".into(),
            hint: Some(hint),
            closest: d.closest,
        }
    }

    /// Whether SEARCH is one line holding a literal `\n` the file never has: JSON
    /// whose newlines were escaped twice.
    fn escaped_twice(&self, search: &[&str]) -> bool {
        let [line] = search else {
            return false;
        };
        line.contains("\\n") && !self.body.windows(2).any(|w| w == b"\\n")
    }

    pub(super) fn byte_scope(&self, op: &Operation) -> Range<usize> {
        let lines = self.line_scope(op);
        self.doc.byte_offset(lines.start)..self.doc.byte_offset(lines.end)
    }
}
