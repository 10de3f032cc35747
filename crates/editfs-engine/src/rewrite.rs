//! Stage 3: an operation's rewrite of the running result, by lines (with the
//! tolerance ladder), by elided pieces, by fragment of a line, as text, or by
//! pattern; each way asks `replay` first whether the edit is already made and
//! `refuse` whether the match found has a destructive shape.

use std::borrow::Cow;
use std::ops::Range;

use regex::bytes::Regex;

use super::interpret::{Done, Failure, Transaction, over_budget_failure};
use super::locate::{choose, non_overlapping, past_end};
use super::payload::{Find, Operation, text_lines};
use super::refuse::Edge;
use super::replay::{INSERTED_BEFORE, SET_ASIDE, replay};
use super::report::{ErrorKind, OpOutcome};
use super::text_match::{self, Hit};
use super::tolerant::Tier;
use super::working_text::{Doc, Eol};
use super::{diagnose, line_match, placeholder, replay};

/// Line numbers for a report: the first few, then how many more.
pub(super) fn listed(lines: &[usize]) -> String {
    /// Numbers named before the rest are counted.
    const SHOWN: usize = 20;
    let mut named: Vec<String> = lines.iter().take(SHOWN).map(usize::to_string).collect();
    if lines.len() > SHOWN {
        named.push(format!("and {} more", lines.len() - SHOWN));
    }
    named.join(", ")
}

impl Transaction<'_, '_> {
    pub(super) fn edit_lines(
        &mut self,
        op: &Operation,
        scope: Range<usize>,
    ) -> Result<Done, Failure> {
        let search = text_lines(&op.search);
        let replace = text_lines(&op.replace);
        let Some(found) = line_match::find(&self.doc, &search, scope.clone(), || self.tiers())
        else {
            if let Some(pieces) = placeholder::pieces(&search, &replace) {
                return self.edit_pieces(op, pieces, scope);
            }
            // A misplaced replay may still be a fragment edit made inside a line
            // (`pub mod ast;` made `pub mod ast; // tree`): the fragment's own
            // replay rule tells, and only then the misplaced failure stands.
            let replayed = self.replayed_lines(op, &search, &replace, scope.clone());
            if let Some(Ok(done)) = replayed {
                return Ok(done);
            }
            if let Some(fragment) = self.substring(op, scope.clone()) {
                return fragment;
            }
            if let Some(failed) = replayed {
                return failed;
            }
            return Err(self.not_found(&search, scope));
        };
        let ranges: Vec<[usize; 2]> = found
            .starts
            .iter()
            .map(|s| [s + 1, s + found.len()])
            .collect();
        let exact = found.tier() == Tier::Exact;
        let (chosen, mut warnings) = match choose(&ranges, op, exact, self.opts.ambiguous) {
            Ok(chosen) => chosen,
            // A tie a line hint cannot break, REPLACE standing at that line.
            Err(tied) => {
                if let Some(r) = replay::replace_holding_every_match(&self.doc, &found, &replace) {
                    return Ok(Done::replayed([r.start + 1, r.end], INSERTED_BEFORE));
                }
                let at: Vec<usize> = ranges.iter().map(|r| r[0]).collect();
                let placed = self.replaced_at_hint(op, (&search, &replace), &at, scope.clone());
                return Err(placed.unwrap_or(tied));
            }
        };
        past_end(op, self.doc.len(), &mut warnings);
        let chosen = non_overlapping(&chosen, &found.starts, found.len());
        let lines = [ranges[chosen[0]][0], ranges[chosen[chosen.len() - 1]][1]];
        let todo: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|&k| {
                op.search == op.replace
                    || !replay::reads_as_replace(&self.doc, &found, found.starts[k], &replace)
            })
            .collect();
        if todo.is_empty() {
            if !exact && let Some(f) = self.tolerant_replay_elsewhere(&found, &search, scope) {
                return Err(f);
            }
            return Ok(Done::replayed(lines, INSERTED_BEFORE));
        }
        if let Some(f) = self.replaced_at_hint(op, (&search, &replace), &[lines[0]], scope.clone())
        {
            return Err(f);
        }
        if let [k] = todo[..] {
            let start = found.starts[k];
            if let Some(f) = self
                .repeats_beside(Edge::After, start + found.len(), &search, &replace)
                .or_else(|| self.repeats_beside(Edge::Before, start, &search, &replace))
            {
                return Err(f);
            }
        }
        if !exact
            && todo
                .iter()
                .all(|&k| found.leaves_as_is(&self.doc, found.starts[k], &replace))
        {
            let mut warnings = found.warnings(&self.doc, found.starts[todo[0]]);
            warnings.push(SET_ASIDE.into());
            return Ok(Done {
                outcome: OpOutcome::Unchanged,
                strategy: found.tier().name(),
                lines: Some(lines),
                warnings,
            });
        }
        if !exact && let Some(f) = self.replaced_exactly(&found, (&search, &replace), scope) {
            return Err(f);
        }
        if let Some(f) = self.indentation_guessed(&found, &todo, &replace) {
            return Err(f);
        }
        if todo.len() < chosen.len() {
            warnings.push(format!(
                "{} of the {} matches already read as REPLACE and were left as they are",
                chosen.len() - todo.len(),
                chosen.len()
            ));
        }
        if todo.len() > 1 {
            let at: Vec<usize> = todo.iter().map(|&k| ranges[k][0]).collect();
            warnings.push(format!(
                "{} occurrences replaced (lines {})",
                todo.len(),
                listed(&at)
            ));
        }
        if !exact {
            warnings.splice(0..0, found.warnings(&self.doc, found.starts[todo[0]]));
        } else if let Some(w) = self.mixed_indentation(&search, &replace) {
            warnings.push(w);
        }
        if op.search != op.replace {
            for &k in todo.iter().rev() {
                found.apply(&mut self.doc, found.starts[k], &replace);
            }
        }
        Ok(Done::applied(found.tier().name(), Some(lines), warnings))
    }

    /// A warning when REPLACE adds tab-indented lines to a file indented only
    /// with spaces, or space-indented ones to a file indented only with tabs:
    /// an exact match writes REPLACE as sent, and such a mix breaks Python (and
    /// a Makefile's recipes) and looks wrong elsewhere, so the agent must learn of it.
    fn mixed_indentation(&self, search: &[&str], replace: &[&str]) -> Option<String> {
        let new_lines = |indented: &dyn Fn(&str) -> bool| -> Vec<usize> {
            (0..replace.len())
                .filter(|&i| indented(replace[i]) && !search.contains(&replace[i]))
                .map(|i| i + 1)
                .collect()
        };
        let tabbed = new_lines(&|l| l.starts_with('\t'));
        let (tabs, spaces) = self.indented_with();
        if !tabbed.is_empty() && spaces && !tabs {
            return Some(format!(
                "REPLACE lines {} are indented with tabs, but the file is indented only with spaces: they were written as sent, a mix the file did not have (Python refuses it); send them with spaces unless the tabs are meant",
                listed(&tabbed)
            ));
        }
        // Two spaces at least: one is the ` *` of a block comment's lines.
        let spaced = new_lines(&|l| l.starts_with("  "));
        if !spaced.is_empty() && tabs && !spaces {
            return Some(format!(
                "REPLACE lines {} are indented with spaces, but the file is indented only with tabs: they were written as sent, a mix the file did not have (Python refuses it, and make a recipe so indented); send them with tabs unless the spaces are meant",
                listed(&spaced)
            ));
        }
        None
    }

    /// Whether lines of the file as it was before the transaction start with a
    /// tab, and with a space: read once, as every operation that adds indented
    /// lines asks (`mixed_indentation`).
    pub(super) fn indented_with(&self) -> (bool, bool) {
        *self.indents.get_or_init(|| {
            let starts = |b: u8| {
                self.body.first() == Some(&b)
                    || memchr::memmem::find(self.body, &[b'\n', b]).is_some()
            };
            (starts(b'\t'), starts(b' '))
        })
    }

    /// Aider's elided form: each piece between the shared placeholder lines is
    /// matched on its own, uniquely and after the one before, then all are replaced.
    fn edit_pieces(
        &mut self,
        op: &Operation,
        pieces: Vec<(Vec<&str>, Vec<&str>)>,
        scope: Range<usize>,
    ) -> Result<Done, Failure> {
        let mut at = scope.start;
        let mut plan = Vec::with_capacity(pieces.len());
        for (k, (search, replace)) in pieces.iter().enumerate() {
            let piece_failure = |why: String| {
                let mut f = self.not_found(search, scope.clone());
                f.message = format!(
                    "piece {} of the elided SEARCH (between `...` lines) {why}",
                    k + 1
                );
                f
            };
            let found = line_match::find(&self.doc, search, scope.clone(), || self.tiers())
                .ok_or_else(|| piece_failure("is not in the file".into()))?;
            // The piece itself is in the file: its own diagnosis would find it
            // alike and blame differences that are not there.
            let piece = |kind, why: String, hint: String| {
                let message = format!(
                    "piece {} of the elided SEARCH (between `...` lines) {why}",
                    k + 1
                );
                Failure::new(kind, message, hint)
            };
            let ranges = |starts: &[usize]| {
                let r: Vec<String> = starts
                    .iter()
                    .map(|s| format!("{}-{}", s + 1, s + found.len()))
                    .collect();
                r.join(", ")
            };
            match found.starts[..] {
                [start] if start >= at => {
                    at = start + found.len();
                    plan.push((found, start, replace));
                }
                [start] => {
                    return Err(piece(
                        ErrorKind::NotFound,
                        format!(
                            "is at lines {}, before the piece ahead of it ends (line {at})",
                            ranges(&[start])
                        ),
                        "the pieces must lie in the file in the order SEARCH gives them: check that SEARCH was copied from this file, or send each part as its own block".into(),
                    ));
                }
                _ => {
                    return Err(piece(
                        ErrorKind::Ambiguous,
                        format!(
                            "occurs {} times (lines {}); each piece must be unique",
                            found.starts.len(),
                            ranges(&found.starts)
                        ),
                        format!(
                            "make piece {} unique: give it more of the file's lines next to its `...` line (in SEARCH and REPLACE alike), or write the lines out instead of eliding them",
                            k + 1
                        ),
                    ));
                }
            }
        }
        let (first, last) = match (plan.first(), plan.last()) {
            (Some(f), Some(l)) => (f.1 + 1, l.1 + l.0.len()),
            _ => return Err(self.not_found(&text_lines(&op.search), scope)),
        };
        let mut warnings = vec![format!(
            "SEARCH and REPLACE elide the same places with placeholder lines; {} pieces matched each on its own, in order",
            plan.len()
        )];
        for (found, start, _) in plan.iter().filter(|p| p.0.tier() != Tier::Exact) {
            warnings.extend(found.warnings(&self.doc, *start));
        }
        for (found, start, replace) in plan.iter().rev() {
            found.apply(&mut self.doc, *start, replace);
        }
        Ok(Done::applied("elided", Some([first, last]), warnings))
    }

    /// The last tier: SEARCH as a fragment of a line (or of several), replaced as
    /// text where it occurs exactly once and cuts no word in two.
    fn substring(&mut self, op: &Operation, scope: Range<usize>) -> Option<Result<Done, Failure>> {
        if !matches!(op.find, Find::Lines) || !self.opts.tolerant || !self.utf8() {
            return None;
        }
        let needle = op.search.strip_suffix('\n').unwrap_or(&op.search);
        let with = op.replace.strip_suffix('\n').unwrap_or(&op.replace);
        if needle.trim().is_empty() {
            return None;
        }
        let crlf = self.doc.dominant_eol() == Eol::CrLf;
        let (needle, with) = match crlf {
            true => (
                text_match::to_crlf(needle).unwrap_or_else(|| needle.to_owned()),
                text_match::to_crlf(with).unwrap_or_else(|| with.to_owned()),
            ),
            false => (needle.to_owned(), with.to_owned()),
        };
        let bytes = self.doc.to_bytes();
        let span = self.doc.byte_offset(scope.start)..self.doc.byte_offset(scope.end);
        let found = text_match::literal(
            &bytes,
            needle.as_bytes(),
            with.as_bytes(),
            span,
            self.budget,
        );
        let found = match found {
            Ok(found) => found,
            Err(spent) => return Some(Err(over_budget_failure(spent, None))),
        };
        let hits: Vec<Hit> = found
            .into_iter()
            .filter(|h| !text_match::cuts_a_word(&bytes, &h.span))
            .collect();
        let [hit] = &hits[..] else {
            return None;
        };
        let [lines] = text_match::line_ranges(&bytes, &hits)[..] else {
            return None;
        };
        // The file around the fragment already reads as REPLACE: sent before.
        // Checked first, as such a REPLACE repeats the text beside it.
        if replay::text_reads_as_replace(&bytes, hit.span.start, needle.as_bytes(), with.as_bytes())
        {
            return Some(Ok(Done::replayed(lines, INSERTED_BEFORE)));
        }
        if text_match::repeats_its_surroundings(&bytes, &hit.span, with.as_bytes())
            || text_match::completes_a_cut_line(
                &bytes,
                &hit.span,
                needle.as_bytes(),
                with.as_bytes(),
            )
            || text_match::starts_a_cut_line(&bytes, &hit.span, needle.as_bytes(), with.as_bytes())
        {
            return None;
        }
        let new = text_match::splice(&bytes, &[hit]);
        self.doc = Doc::new(Cow::Owned(new));
        self.tracked = false;
        let warning = format!(
            "SEARCH is not whole lines of the file but occurs once as text in line(s) {}-{}: replaced as text",
            lines[0], lines[1]
        );
        Some(Ok(Done::applied("substring", Some(lines), vec![warning])))
    }

    pub(super) fn edit_text(&mut self, op: &Operation) -> Result<Done, Failure> {
        let bytes = self.doc.to_bytes();
        let scope = self.byte_scope(op);
        let crlf = self.doc.dominant_eol() == Eol::CrLf;
        // In a CRLF file, new lines in an LF-only REPLACE get CRLF too, even
        // where SEARCH was copied with the file's `\r\n` (JSON-escaped, say):
        // REPLACE written without one is not a choice of LF, and as sent it
        // would leave bare `\n` lines in a CRLF file. An agent that writes `\r`
        // in REPLACE itself gets exactly what it wrote.
        // A SEARCH with `\r` elsewhere than before each `\n` (one that cuts a
        // `\r\n` in two) is taken byte for byte, REPLACE too.
        let copied = !op.search.contains('\r') || text_match::crlf_throughout(&op.search);
        let replace = match !crlf || !copied || op.replace.contains('\r') {
            true => op.replace.clone(),
            false => text_match::to_crlf(&op.replace).unwrap_or_else(|| op.replace.clone()),
        };
        // An LF-only search in a CRLF file means CRLF: try that form first.
        let search = match !crlf || op.search.contains('\r') {
            true => None,
            false => text_match::to_crlf(&op.search),
        };
        let mut hits = Vec::new();
        for s in search.iter().chain(std::iter::once(&op.search)) {
            hits = text_match::literal(
                &bytes,
                s.as_bytes(),
                replace.as_bytes(),
                scope.clone(),
                self.budget,
            )
            .map_err(|spent| over_budget_failure(spent, None))?;
            if !hits.is_empty() {
                break;
            }
        }
        if !hits.is_empty() {
            let needle = hits[0].span.len();
            let already = hits
                .iter()
                .map(|h| {
                    op.search != op.replace
                        && replay::text_reads_as_replace(
                            &bytes,
                            h.span.start,
                            &bytes[h.span.start..h.span.start + needle],
                            replace.as_bytes(),
                        )
                })
                .collect();
            return self.replace_hits(op, &bytes, hits, already, "exact");
        }
        if replay::adds_text(&op.search, &op.replace) {
            let again = text_match::literal(&bytes, replace.as_bytes(), b"", scope, self.budget)
                .map_err(|spent| over_budget_failure(spent, None))?;
            let ranges = text_match::line_ranges(&bytes, &again);
            let search = text_lines(&op.search);
            let copies: Vec<Range<usize>> = ranges.iter().map(|r| r[0] - 1..r[1]).collect();
            let elsewhere = |r: &[usize; 2]| {
                let scope = (self.line_scope(op), false);
                let at = (r[0] - 1..r[1], &copies[..]);
                diagnose::replay_misplaced(&self.doc, &search, scope, at).is_some()
            };
            let near = |h: &Hit| {
                let (line, at) = text_match::lines_around(&bytes, &h.span);
                replay::text_near_search(line, op.search.as_bytes(), at)
            };
            let placed = ranges.iter().all(|r| !elsewhere(r)) && again.iter().all(near);
            if let Some(done) = replay(&ranges, op).filter(|_| placed) {
                return Ok(done);
            }
        }
        self.edit_lines(op, self.line_scope(op))
    }

    pub(super) fn edit_pattern(
        &mut self,
        op: &Operation,
        re: &Regex,
        strategy: &'static str,
    ) -> Result<Done, Failure> {
        if !self.utf8() {
            return Err(Failure::new(
                ErrorKind::NotText,
                "the file is not UTF-8 text; regex and ignore_case edits need text",
                "use a plain search that matches the file byte for byte",
            ));
        }
        let bytes = self.doc.to_bytes();
        let hits = text_match::pattern(
            &bytes,
            re,
            op.replace.as_bytes(),
            self.byte_scope(op),
            self.budget,
        )
        .map_err(|spent| over_budget_failure(spent, None))?;
        // A match whose replacement holds it and already stands around it is an
        // insertion made before (`return 1;` made `return 1; // one`): rule (b),
        // so a pattern sent again never inserts twice.
        let already = hits
            .iter()
            .map(|h| {
                replay::text_reads_as_replace(&bytes, h.span.start, &bytes[h.span.clone()], &h.with)
            })
            .collect();
        if hits.is_empty() {
            return Err(Failure::new(
                ErrorKind::NotFound,
                format!("`{}` ({strategy}) matches nothing in the file", op.search),
                "check the pattern against the file's current content; `(?m)` is on, so ^ and $ match at line ends",
            ));
        }
        self.replace_hits(op, &bytes, hits, already, strategy)
    }

    /// Replaces the chosen hits, except those `already` made (rule (b) of replays).
    fn replace_hits(
        &mut self,
        op: &Operation,
        bytes: &[u8],
        hits: Vec<Hit>,
        already: Vec<bool>,
        strategy: &'static str,
    ) -> Result<Done, Failure> {
        let ranges = text_match::line_ranges(bytes, &hits);
        let (chosen, mut warnings) = choose(&ranges, op, true, self.opts.ambiguous)?;
        past_end(op, self.doc.len(), &mut warnings);
        let lines = [ranges[chosen[0]][0], ranges[chosen[chosen.len() - 1]][1]];
        let chosen_count = chosen.len();
        let fresh: Vec<usize> = chosen.into_iter().filter(|&k| !already[k]).collect();
        let picked: Vec<&Hit> = fresh.iter().map(|&k| &hits[k]).collect();
        if picked.is_empty() {
            return Ok(Done::replayed(lines, INSERTED_BEFORE));
        }
        if fresh.len() < chosen_count {
            warnings.push(format!(
                "{} of the {chosen_count} matches already read as REPLACE and were left as they are",
                chosen_count - fresh.len()
            ));
        }
        if fresh.len() > 1 {
            let at: Vec<usize> = fresh.iter().map(|&k| ranges[k][0]).collect();
            warnings.push(format!(
                "{} occurrences replaced (lines {})",
                fresh.len(),
                listed(&at)
            ));
        }
        let new = text_match::splice(bytes, &picked);
        if new != bytes {
            self.doc = Doc::new(Cow::Owned(new));
            self.tracked = false;
        }
        Ok(Done::applied(strategy, Some(lines), warnings))
    }
}
