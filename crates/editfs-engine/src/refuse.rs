//! Stage 4: the refusal rules, every one in this file. Each refuses an
//! operation whose shape would write something the agent did not mean; the
//! operation fails and nothing is written. The interpreter runs them at two
//! points:
//!
//! Before the operation is located, from its SEARCH and REPLACE alone
//! (`SHAPE_RULES`, in this order; only for SEARCH/REPLACE by lines or text, as
//! a regex's REPLACE is a template):
//!
//! | rule                      | kind          | refuses a REPLACE that                        |
//! |---------------------------|---------------|-----------------------------------------------|
//! | `refuse_placeholders`     | `placeholder` | stands a comment or `...` for code it drops   |
//! | `refuse_diff_prefixes`    | `diff_prefix` | keeps a diff's `+` on its lines               |
//! | `refuse_numbered_replace` | `number_prefix` | keeps a viewer's line numbers               |
//! | `refuse_stray_fence`      | `malformed`   | holds a fence line of the block's own fences  |
//! | `refuse_escaped_replace`  | `malformed`   | has its line breaks escaped twice             |
//! | `refuse_entity_replace`   | `malformed`   | was escaped for HTML on its way               |
//!
//! Once the operation's match is known (called from rewrite.rs where it is):
//!
//! | rule                  | kind         | refuses an edit that                                  |
//! |-----------------------|--------------|-------------------------------------------------------|
//! | `replaced_at_hint`    | `ambiguous`  | matches away from its line hint, REPLACE nearer it    |
//! | `replaced_exactly`    | `ambiguous`  | matches with tolerance while REPLACE stands exactly   |
//! | `repeats_beside`      | `duplicates` | would write the lines beside its match a second time  |
//! | `indentation_guessed` | `not_found`  | would have to guess where new lines are indented      |

use std::cell::OnceCell;
use std::ops::Range;

use super::interpret::{Failure, Transaction};
use super::payload::{Find, Operation, text_lines};
use super::report::ErrorKind;
use super::working_text::Doc;
use super::{diagnose, fence, line_match, placeholder, replay, text_match, tolerant};

/// A rule read from an operation's SEARCH and REPLACE alone.
type ShapeRule = fn(&Transaction<'_, '_>, &Operation) -> Result<(), Failure>;

/// The rules read from an operation's shape, in the order they run.
const SHAPE_RULES: &[ShapeRule] = &[
    // In prose, `#` opens a heading: only the plain placeholders are read.
    // The payload may say its placeholder-like lines are content.
    |tx, op| match op.placeholders_kept {
        true => Ok(()),
        false => refuse_placeholders(op, !tx.prose),
    },
    |_, op| refuse_diff_prefixes(op),
    |_, op| refuse_numbered_replace(op),
    // A prose file's own fence lines are content an edit may add or cut.
    |tx, op| match tx.prose {
        true => Ok(()),
        false => refuse_stray_fence(op),
    },
    |tx, op| tx.refuse_escaped_replace(op),
    // A markup file's entities are text an edit may mean to write.
    |tx, op| match tx.markup {
        true => Ok(()),
        false => tx.refuse_entity_replace(op),
    },
];

impl Transaction<'_, '_> {
    /// Runs `SHAPE_RULES` on an operation that finds SEARCH by lines or as
    /// text: the first that refuses it fails it.
    pub(super) fn refuse_shape(&self, op: &Operation) -> Result<(), Failure> {
        if !matches!(op.find, Find::Lines | Find::Text) {
            return Ok(());
        }
        SHAPE_RULES.iter().try_for_each(|rule| rule(self, op))
    }
}

/// `line 4`, or `lines 4-6`: 1-based, both ends included.
fn line_span(first: usize, last: usize) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

/// Lines of a repeated run `repeats_beside` looks at for one that stands once
/// in the file: each look reads the whole file.
const DISTINCT_LOOK: usize = 8;

/// What tells whether lines of brackets alone (`}`, `});`) at one end of
/// REPLACE would leave the file's brackets unpaired: they pair now, and REPLACE
/// opens or closes more than SEARCH by just those lines' brackets, so without
/// them they would pair still. Such lines repeat all over a file, so
/// `distinct` never tells them; this tells the one brace SEARCH stopped short
/// of. The file is counted once, at the first run of brackets alone.
struct Pairs<'d, 'a> {
    doc: &'d Doc<'a>,
    /// How far REPLACE opens or closes more than SEARCH.
    grown: [i64; 3],
    file_pairs: OnceCell<bool>,
}

impl<'d, 'a> Pairs<'d, 'a> {
    fn new(doc: &'d Doc<'a>, search: &[&str], replace: &[&str]) -> Self {
        let (r, s) = (
            text_match::bracket_balance(replace.iter().map(|l| l.as_bytes())),
            text_match::bracket_balance(search.iter().map(|l| l.as_bytes())),
        );
        Pairs {
            doc,
            grown: std::array::from_fn(|i| r[i] - s[i]),
            file_pairs: OnceCell::new(),
        }
    }

    fn unpaired_by(&self, run: &[&str]) -> bool {
        run.iter().all(|l| text_match::brackets_only(l))
            && text_match::bracket_balance(run.iter().map(|l| l.as_bytes())) == self.grown
            && *self.file_pairs.get_or_init(|| {
                let lines = (0..self.doc.len()).map(|i| self.doc.line(i));
                text_match::bracket_balance(lines) == [0; 3]
            })
    }
}

/// Which end of REPLACE `repeats_beside` looks at.
#[derive(Clone, Copy)]
pub(super) enum Edge {
    Before,
    After,
}

/// How a payload says a line that reads as a placeholder is content.
const PLACEHOLDER_OFF: &str = "if that line is content, not a stand-in, send the payload again with `\"placeholder_check\": \"off\"` (JSON) or a line `:placeholder_check: off` above the first block";

/// Refuses a REPLACE whose placeholder line stands for SEARCH lines it would
/// delete, or for code beyond SEARCH that new lines were meant to pass.
fn refuse_placeholders(op: &Operation, wide: bool) -> Result<(), Failure> {
    let search = text_lines(&op.search);
    let replace = text_lines(&op.replace);
    let Some(loss) = placeholder::loss(&search, &replace, wide) else {
        return match placeholder::misplaced(&search, &replace) {
            Some(m) => Err(misplaced(&replace, &m)),
            None => Ok(()),
        };
    };
    let gone = &search[loss.deleted.clone()];
    let quote = |l: &str| format!("`{}`", l.trim());
    let lines = match gone {
        [one] => format!("SEARCH line {} ({}) is", loss.deleted.start + 1, quote(one)),
        [first, .., last] => format!(
            "SEARCH lines {}-{} ({} … {}) are",
            loss.deleted.start + 1,
            loss.deleted.end,
            quote(first),
            quote(last)
        ),
        [] => "SEARCH lines are".to_owned(),
    };
    Err(Failure::new(
        ErrorKind::Placeholder,
        format!(
            "REPLACE line {} {} stands for code that is not repeated: applied, it would be written into the file where {lines}, and the code it stands for would be deleted",
            loss.line + 1,
            quote(replace[loss.line])
        ),
        format!(
            "write out in REPLACE every line it keeps, or leave the unchanged lines out of both SEARCH and REPLACE; to elide, put the same `...` line in SEARCH and REPLACE at the same place; {PLACEHOLDER_OFF}"
        ),
    ))
}

/// The failure for a placeholder that would misplace the new lines beyond it.
fn misplaced(replace: &[&str], m: &placeholder::Misplaced) -> Failure {
    let (lines, side, near) = match m.after {
        true => ("after", "right after SEARCH's last line", "before"),
        false => ("before", "right before SEARCH's first line", "after"),
    };
    Failure::new(
        ErrorKind::Placeholder,
        format!(
            "REPLACE line {} `{}` stands for code that SEARCH does not hold: applied, it would be written into the file, and the REPLACE lines {lines} it would land {side}, {near} the code it stands for",
            m.line + 1,
            replace[m.line].trim()
        ),
        format!(
            "include the code the placeholder stands for in both SEARCH and REPLACE, or drop the placeholder and anchor SEARCH on the lines around the place where the new code goes; {PLACEHOLDER_OFF}"
        ),
    )
}

/// A REPLACE line still carrying a diff's `+`: refused, since written as sent it
/// would put the `+` into the code.
fn refuse_diff_prefixes(op: &Operation) -> Result<(), Failure> {
    let replace = text_lines(&op.replace);
    let Some(line) = placeholder::diff_prefixed(&text_lines(&op.search), &replace) else {
        return Ok(());
    };
    Err(Failure::new(
        ErrorKind::DiffPrefix,
        format!(
            "REPLACE line {} (`{}`) starts with a diff's `+` that would be written into the file",
            line + 1,
            replace[line].trim_end()
        ),
        "a SEARCH/REPLACE block holds the lines as they are, without `+`/`-` prefixes: drop the `+` (or send the change as a unified diff)",
    ))
}

/// A REPLACE copied from a reader's numbered view (`cat -n`, `12: `, `12 | `)
/// under a SEARCH copied without numbers: every REPLACE line (two or more)
/// carries a consecutive number and at least one of them, unnumbered, is a line of SEARCH.
/// Written as sent, the numbers would go into the file. A file whose lines do
/// start with numbers shows them in SEARCH, and then nothing is refused.
fn refuse_numbered_replace(op: &Operation) -> Result<(), Failure> {
    let search = text_lines(&op.search);
    let replace = text_lines(&op.replace);
    if search
        .iter()
        .any(|l| tolerant::strip_numbers(&[l]).is_some())
    {
        return Ok(());
    }
    // One line proves nothing: `8080: port` may well be what a YAML edit means.
    let Some((stripped, numbering)) =
        tolerant::strip_numbers(&replace).filter(|_| replace.len() > 1)
    else {
        return Ok(());
    };
    let first = numbering.first;
    let copied = stripped
        .iter()
        .any(|l| !l.trim().is_empty() && search.iter().any(|s| s.trim_end() == l.trim_end()));
    if !copied {
        return Ok(());
    }
    Err(Failure::new(
        ErrorKind::NumberPrefix,
        format!(
            "every REPLACE line starts with a line number ({first}-{}), as a file viewer shows them, while SEARCH has none: written as sent, the numbers would go into the file",
            first + replace.len() - 1
        ),
        "copy REPLACE without the line numbers (the prefix such as `12\t`, `12: ` or `12 | ` is not part of the line)",
    ))
}

/// A Markdown fence line left inside REPLACE by the fences around a block
/// (its closing fence before `>>>>>>> REPLACE`, its opening one after
/// `=======`): refused, since written as sent it would go into the file. A
/// Markdown edit's own fences pair up in REPLACE or are SEARCH's, and pass;
/// a prose file's edits are not checked at all (see `prose`).
fn refuse_stray_fence(op: &Operation) -> Result<(), Failure> {
    let replace = text_lines(&op.replace);
    let Some(line) = fence::stray(&text_lines(&op.search), &replace) else {
        return Ok(());
    };
    Err(Failure::new(
        ErrorKind::Malformed,
        format!(
            "REPLACE line {} is a Markdown fence line ({}) that SEARCH lacks and no other fence line of REPLACE pairs with: it belongs to the fences around the block, and written as sent it would go into the file",
            line + 1,
            replace[line].trim()
        ),
        "put the fence lines outside the block, before `<<<<<<< SEARCH` and after `>>>>>>> REPLACE`; to add a fenced code block to the file, give REPLACE both its opening and its closing fence line (to close a block the file left open, take its opening line into SEARCH and REPLACE)",
    ))
}

impl Transaction<'_, '_> {
    /// A failure when SEARCH's matches (at 1-based lines `at`) lie away from
    /// the operation's line hint while REPLACE already stands nearer it: a hunk
    /// or a `:start_line:` block sent again after it applied, in a file with
    /// other copies of its lines. Taking one edits a place the agent never
    /// meant, and calling it a replay would be a guess too (SEARCH is in the
    /// file), so the agent is told both places.
    pub(super) fn replaced_at_hint(
        &self,
        op: &Operation,
        (search, replace): (&[&str], &[&str]),
        at: &[usize],
        scope: Range<usize>,
    ) -> Option<Failure> {
        // A hunk's `@@` line says where it lies as a line number would.
        let hint = op
            .near
            .or_else(|| self.anchor_line(op).map(|a| a + 1))
            .filter(|_| !op.all && op.expected.is_none())?;
        let away = at.iter().map(|a| a.abs_diff(hint)).min()?;
        if away == 0 || !replay::adds_a_line(search, replace) {
            return None;
        }
        let placed = line_match::find(&self.doc, replace, scope, || &[])?;
        let nearest = placed
            .starts
            .iter()
            .map(|s| s + 1)
            .min_by_key(|s| s.abs_diff(hint))?;
        if nearest.abs_diff(hint) >= away {
            return None;
        }
        let placing = "send it placed there (a line number, or an @@ line naming its block)";
        let (found, change) = match at {
            [one] => (
                format!("SEARCH is at line {one}"),
                format!("line {one} too, {placing}, or without a place"),
            ),
            _ => {
                let listed = at
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                (
                    format!("SEARCH occurs {} times (lines {listed})", at.len()),
                    format!("one of lines {listed}, {placing}"),
                )
            }
        };
        Some(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "{found}, away from line {hint} where the operation is placed (by its line number, or by its hunk's @@ line), and the file at line {nearest}, nearer it, already reads as REPLACE"
            ),
            format!(
                "if the edit was meant for line {nearest}, it is already made there: nothing is left to do; to change {change}"
            ),
        ))
    }

    /// A failure when a ragged match would have to guess where new REPLACE
    /// lines stand (`Found::guessed_indentation`): SEARCH lost the file's
    /// nesting, so REPLACE, written the same way, cannot say it either, and a
    /// guess may nest a branch into the block above it (Python then runs
    /// another program, and exits 0 doing it).
    pub(super) fn indentation_guessed(
        &self,
        found: &line_match::Found<'_>,
        todo: &[usize],
        replace: &[&str],
    ) -> Option<Failure> {
        let (k, line) = todo.iter().find_map(|&k| {
            let line = found.guessed_indentation(&self.doc, found.starts[k], replace)?;
            Some((k, line))
        })?;
        let at = found.starts[k] + 1;
        Some(Failure::new(
            ErrorKind::NotFound,
            format!(
                "SEARCH matches lines {at}-{} only with each line's indentation set aside: its lines came at one column where the file nests them, so where REPLACE line {line} goes, its indentation would be a guess",
                at + found.len() - 1
            ),
            "send SEARCH with the file's own indentation (copy the lines as the file has them), and REPLACE indented the same way",
        ))
    }

    /// A failure when SEARCH matches only with tolerance while REPLACE stands
    /// in the file exactly: an edit sent again after it applied, whose exact
    /// SEARCH is gone, would take another copy at another indentation (or
    /// SEARCH's lines inside the REPLACE just written) and apply twice.
    pub(super) fn replaced_exactly(
        &self,
        found: &line_match::Found<'_>,
        (search, replace): (&[&str], &[&str]),
        scope: Range<usize>,
    ) -> Option<Failure> {
        if !replay::adds_a_line(search, replace) {
            return None;
        }
        let placed = line_match::find(&self.doc, replace, scope, || &[])?;
        let at = found.starts[0] + 1;
        let there = placed.starts[0] + 1;
        Some(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "SEARCH matches only with tolerance ({}) at line {at}, while REPLACE stands in the file exactly at line {there}: the edit looks made there already",
                found.tier().name()
            ),
            format!(
                "if it was meant for line {there}, nothing is left to do; to change line {at}, send SEARCH exactly as the file has it there"
            ),
        ))
    }

    /// Whether `line` says something (more than punctuation) and stands once
    /// in the file: repeated lines (`0,` rows of a table, `}`) are no sign of
    /// a SEARCH that stopped short, as a table grown by a row repeats them.
    fn distinct(&self, line: &str) -> bool {
        let line = line.trim_end().as_bytes();
        line.iter().any(u8::is_ascii_alphanumeric)
            && (0..self.doc.len())
                .filter(|&i| self.doc.line(i).trim_ascii_end() == line)
                .nth(1)
                .is_none()
    }

    /// A failure when REPLACE ends with the lines that follow SEARCH's match
    /// (`Edge::After`, `at` the line index after it), or starts with those
    /// before it (`Edge::Before`, `at` its first line index): SEARCH stopped
    /// short of (or started late on) what the agent rewrote, and applied, those
    /// lines would stand in the file twice (`b(); c(); }` after the new body,
    /// then the old ones again). Two lines at least, one of them standing once
    /// in the file (`distinct`), or closing or opening brackets that would no
    /// longer pair (`Pairs`); and not lines SEARCH has at that end too
    /// (then REPLACE keeps them, and the file merely repeats them).
    pub(super) fn repeats_beside(
        &self,
        edge: Edge,
        at: usize,
        search: &[&str],
        replace: &[&str],
    ) -> Option<Failure> {
        /// REPLACE's lines at that end that are looked at: the check stays
        /// linear in the file.
        const REACH: usize = 200;
        let n = replace.len();
        let same = |r: &str, i: usize| {
            i < self.doc.len() && r.trim_end().as_bytes() == self.doc.line(i).trim_ascii_end()
        };
        let equal = |k: usize| match edge {
            Edge::After => replace[n - k..]
                .iter()
                .enumerate()
                .all(|(i, r)| same(r, at + i)),
            Edge::Before => {
                k <= at
                    && replace[..k]
                        .iter()
                        .enumerate()
                        .all(|(i, r)| same(r, at - k + i))
            }
        };
        let run = |k: usize| match edge {
            Edge::After => &replace[n - k..],
            Edge::Before => &replace[..k],
        };
        let kept = |k: usize| match edge {
            Edge::After => search.ends_with(run(k)),
            Edge::Before => search.starts_with(run(k)),
        };
        let mut repeated = (1..=REACH.min(n)).rev().filter(|&k| equal(k) && !kept(k));
        let longest = repeated.next()?;
        // Each look for a distinct line reads the whole file: the longest run only.
        let told = longest >= 2
            && run(longest)
                .iter()
                .take(DISTINCT_LOOK)
                .any(|l| self.distinct(l));
        let k = match told {
            true => longest,
            false => {
                let pairs = Pairs::new(&self.doc, search, replace);
                std::iter::once(longest)
                    .chain(repeated)
                    .find(|&k| pairs.unpaired_by(run(k)))?
            }
        };
        let (message, hint) = match edge {
            Edge::After => (
                format!(
                    "REPLACE ends with the {k} line(s) that follow SEARCH in the file ({})",
                    line_span(at + 1, at + k)
                ),
                format!(
                    "SEARCH seems to stop early: extend it through line {}, so that REPLACE replaces those lines, or leave them out of REPLACE",
                    at + k
                ),
            ),
            Edge::Before => (
                format!(
                    "REPLACE starts with the {k} line(s) that precede SEARCH in the file ({})",
                    line_span(at - k + 1, at)
                ),
                format!(
                    "SEARCH seems to start late: extend it up to line {}, so that REPLACE replaces those lines, or leave them out of REPLACE",
                    at - k + 1
                ),
            ),
        };
        let unpaired = if told {
            ""
        } else {
            ", and the file's brackets would no longer pair"
        };
        Some(Failure::new(
            ErrorKind::Duplicates,
            format!("{message}: applied, they would stand in the file twice{unpaired}"),
            hint,
        ))
    }

    /// Refuses a REPLACE whose line breaks were escaped twice (`a = 2\\n    return
    /// a`) while SEARCH's were not: written as sent, the new code would be one
    /// line with backslashes in it. Only a `\n` followed by indentation counts,
    /// in a file that has no such text: `"\n".join(...)` stays code.
    fn refuse_escaped_replace(&self, op: &Operation) -> Result<(), Failure> {
        let escaped = |t: &[u8]| {
            t.windows(3)
                .any(|w| w[..2] == *b"\\n" && matches!(w[2], b' ' | b'\t'))
        };
        let search = op.search.trim_end_matches('\n');
        if !escaped(op.replace.as_bytes())
            || search.contains("\\n")
            || !search.contains('\n')
            || escaped(self.body)
        {
            return Ok(());
        }
        Err(Failure::new(
            ErrorKind::Malformed,
            "REPLACE holds `\\n` as two characters (a backslash and `n`) before indentation, where SEARCH has line breaks: its newlines were escaped twice, and written as sent the new lines would be one",
            "send REPLACE's line breaks once, as SEARCH's (`\\n` inside a JSON string, real line breaks in a block)",
        ))
    }

    /// Refuses a REPLACE escaped for HTML on its way (`if a &lt;= b`) while
    /// SEARCH was not (`if a < b`): written as sent, the entities would stand in
    /// the code. Only where the file and SEARCH hold no entity, SEARCH holds a
    /// character one of REPLACE's entities stands for, and REPLACE holds none of
    /// those characters as it is: code that escapes HTML (`replace("<", "&lt;")`)
    /// has both, and markup files (see `markup`) are not checked.
    fn refuse_entity_replace(&self, op: &Operation) -> Result<(), Failure> {
        let has_entity = |t: &[u8]| {
            diagnose::ENTITIES
                .iter()
                .any(|(e, _)| memchr::memmem::find(t, e.as_bytes()).is_some())
        };
        let found: Vec<(&str, &str)> = diagnose::ENTITIES
            .iter()
            .copied()
            .filter(|(e, _)| op.replace.contains(e))
            .collect();
        let Some(&(entity, ch)) = found.first() else {
            return Ok(());
        };
        let bare = found
            .iter()
            .fold(op.replace.clone(), |t, (e, _)| t.replace(e, ""));
        if found.iter().any(|(_, c)| bare.contains(c))
            || !found.iter().any(|(_, c)| op.search.contains(c))
            || has_entity(op.search.as_bytes())
            || *self.entities.get_or_init(|| has_entity(self.body))
        {
            return Ok(());
        }
        Err(Failure::new(
            ErrorKind::Malformed,
            format!(
                "REPLACE holds the HTML entity `{entity}` where SEARCH has `{ch}` as it is, and the file holds no entity: REPLACE was escaped for HTML on its way, and written as sent the entity would stand in the code"
            ),
            "send `<`, `>`, `&` and quotes in REPLACE as they are, as in SEARCH (if the file is to hold the entity itself, send the edit as JSON with \"regex\": true)",
        ))
    }
}
