//! Whole-line matching and rewriting: marker blocks, and JSON searches that did not
//! match as exact text.
//!
//! `find` climbs the ladder (exact, then each tolerant tier) and stops at the first
//! tier that matches anywhere; `Found::apply` writes REPLACE in the file's own
//! indentation, characters and line endings.

use std::ops::Range;

use similar::{Algorithm, DiffOp, capture_diff_slices};

use super::tolerant::{self, Shift, Tier};
use super::working_text::{Doc, Eol, NewLine};

/// SEARCH as one tier sees it.
#[derive(Debug, Clone)]
pub struct Pattern<'a> {
    pub tier: Tier,
    pub lines: Vec<&'a str>,
    /// Blank lines dropped from the start and end of SEARCH.
    lead: usize,
    trail: usize,
    /// The prefixes of a line-numbered SEARCH.
    numbering: Option<tolerant::Numbering<'a>>,
}

impl<'a> Pattern<'a> {
    /// SEARCH prepared for `tier`; `None` when the tier does not apply to it.
    pub fn new(search: &[&'a str], tier: Tier) -> Option<Pattern<'a>> {
        let (lines, numbering) = match tier {
            Tier::LineNumbers => {
                let (lines, numbering) = tolerant::strip_numbers(search)?;
                (lines, Some(numbering))
            }
            _ => (search.to_vec(), None),
        };
        Pattern::trimmed(lines, tier, numbering)
    }

    fn trimmed(
        lines: Vec<&'a str>,
        tier: Tier,
        numbering: Option<tolerant::Numbering<'a>>,
    ) -> Option<Pattern<'a>> {
        let (lead, trail) = if tier == Tier::Exact {
            (0, 0)
        } else {
            tolerant::blank_edges(&lines)
        };
        let lines = lines[lead..lines.len() - trail].to_vec();
        if lines.is_empty() {
            return None;
        }
        Some(Pattern {
            tier,
            lines,
            lead,
            trail,
            numbering,
        })
    }

    /// A line-numbered SEARCH as the file at `start` tells it: whether the space
    /// after `12:` or `12 |` is the reader's or the line's own, the file's
    /// indentation says. Taken as the reader's when it is the line's, SEARCH would
    /// seem a column less indented than the file: a wrong warning, and REPLACE's
    /// new lines, written without a prefix, shifted a column too far.
    fn settled(self, search: &[&'a str], doc: &Doc, start: usize) -> Pattern<'a> {
        let Some(numbering) = self.numbering.filter(|n| n.takes_space()) else {
            return self;
        };
        let file: Vec<&str> = (start..start + self.lines.len())
            .map(|i| text(doc, i).unwrap_or_default())
            .collect();
        let unshifted = |p: &Pattern| {
            tolerant::uniform_shift(&file, &p.lines)
                .is_some_and(|s| s.num == s.den && s.offset == 0)
        };
        if unshifted(&self) {
            return self;
        }
        let keeping = numbering.keeping_space();
        keeping
            .strip_all(search)
            .and_then(|lines| Pattern::trimmed(lines, self.tier, Some(keeping)))
            .filter(|p| p.lines.len() == self.lines.len() && unshifted(p))
            .unwrap_or(self)
    }
}

/// The matches of the first tier that matched anything.
#[derive(Debug)]
pub struct Found<'a> {
    pub pattern: Pattern<'a>,
    /// First line (0-based) of each match, in order.
    pub starts: Vec<usize>,
}

/// Climbs the ladder over `tiers` (after exact) inside `scope`; `tiers` is
/// asked for only when no exact match is found.
pub fn find<'a, 't>(
    doc: &Doc,
    search: &[&'a str],
    scope: Range<usize>,
    tiers: impl FnOnce() -> &'t [Tier],
) -> Option<Found<'a>> {
    std::iter::once(Tier::Exact)
        .chain(std::iter::once_with(tiers).flatten().copied())
        .find_map(|tier| {
            let pattern = Pattern::new(search, tier)?;
            let starts = matches(doc, &pattern, scope.clone());
            let pattern = match starts[..] {
                [start] => pattern.settled(search, doc, start),
                _ => pattern,
            };
            (!starts.is_empty()).then_some(Found { pattern, starts })
        })
}

fn text<'d>(doc: &'d Doc<'_>, i: usize) -> Option<&'d str> {
    std::str::from_utf8(doc.line(i)).ok()
}

fn matches(doc: &Doc, p: &Pattern<'_>, scope: Range<usize>) -> Vec<usize> {
    let m = p.lines.len();
    if scope.end < scope.start + m {
        return Vec::new();
    }
    let last = scope.end - m;
    if p.tier == Tier::Exact {
        return doc
            .lines_equal_to(p.lines[0].as_bytes(), scope.start..last + 1)
            .into_iter()
            .filter(|&i| {
                p.lines[1..]
                    .iter()
                    .enumerate()
                    .all(|(j, s)| doc.line(i + 1 + j) == s.as_bytes())
            })
            .collect();
    }
    if let Some(numbering) = p.numbering {
        // The numbers say where the lines are; nowhere else can match.
        let at = numbering
            .first
            .checked_sub(1)
            .filter(|i| (scope.start..=last).contains(i));
        return at
            .into_iter()
            .filter(|&i| tolerant_match(doc, p, i))
            .collect();
    }
    // Lines equal at any tolerant tier have equal loose keys: only windows whose
    // keys all agree with SEARCH's are compared as text, so a file of many near
    // copies of SEARCH costs integer comparisons, not string ones.
    let want: Vec<u64> = p
        .lines
        .iter()
        .map(|l| tolerant::loose_key(l.as_bytes()))
        .collect();
    let keys = doc.keys(tolerant::loose_key);
    (scope.start..=last)
        .filter(|&i| keys[i] == want[0] && keys[i..i + m] == want[..])
        .filter(|&i| tolerant_match(doc, p, i))
        .collect()
}

fn tolerant_match(doc: &Doc, p: &Pattern<'_>, i: usize) -> bool {
    let mut file = Vec::with_capacity(p.lines.len());
    for (j, s) in p.lines.iter().enumerate() {
        match text(doc, i + j) {
            Some(f) if p.tier.equal(f, s) => file.push(f),
            _ => return false,
        }
    }
    match p.tier {
        Tier::Exact | Tier::Whitespace | Tier::Ragged => true,
        _ => tolerant::uniform_shift(&file, &p.lines).is_some(),
    }
}

impl Found<'_> {
    /// Number of file lines a match covers.
    pub fn len(&self) -> usize {
        self.pattern.lines.len()
    }

    pub fn tier(&self) -> Tier {
        self.pattern.tier
    }

    fn file_lines<'d>(&self, doc: &'d Doc, start: usize) -> Vec<&'d str> {
        (start..start + self.len())
            .map(|i| text(doc, i).unwrap_or_default())
            .collect()
    }

    /// What a tolerant match forgave, in words.
    pub fn warnings(&self, doc: &Doc, start: usize) -> Vec<String> {
        let p = &self.pattern;
        let file = self.file_lines(doc, start);
        let mut out = Vec::new();
        if p.tier >= Tier::Whitespace {
            let trailing = |l: &str| l.len() - l.trim_end().len();
            if file
                .iter()
                .zip(&p.lines)
                .any(|(f, s)| trailing(f) != trailing(s))
            {
                out.push("trailing whitespace in SEARCH differs from the file's".to_owned());
            }
            if p.lead + p.trail > 0 {
                out.push(format!(
                    "{} blank line(s) at the edges of SEARCH ignored",
                    p.lead + p.trail
                ));
            }
        }
        if p.tier == Tier::Ragged {
            out.push(ragged_warning(&file, &p.lines));
        } else if p.tier >= Tier::Indentation {
            out.extend(indent_warning(&file, &p.lines));
        }
        if p.tier >= Tier::Typography {
            let typo: String = p
                .lines
                .iter()
                .flat_map(|l| l.chars())
                .filter(|&c| tolerant::is_typographic(c))
                .collect();
            if !typo.is_empty() {
                out.push(format!(
                    "typographic characters in SEARCH ({}) matched plain ASCII in the file; REPLACE uses the file's characters",
                    escape_chars(&typo)
                ));
            }
        }
        if p.tier == Tier::LineNumbers {
            out.push(
                "line-number prefixes stripped from SEARCH (they agree with the file) and from the REPLACE lines that carry them".to_owned(),
            );
        }
        let mut summary = vec![format!(
            "matched with {} tolerance, not exactly",
            p.tier.name()
        )];
        summary.extend(out);
        summary
    }

    /// Replaces the match at `start` with REPLACE, rewritten for this tier.
    pub fn apply(&self, doc: &mut Doc, start: usize, replace: &[&str]) {
        let new = self.rewrite(doc, start, replace);
        splice(doc, start, self.len(), &new);
    }

    /// Whether REPLACE, written as this match writes it at `start`, reads as the
    /// file already does: SEARCH and REPLACE then differ only in what the
    /// tolerance set aside, and the edit changes nothing.
    pub fn leaves_as_is(&self, doc: &Doc, start: usize, replace: &[&str]) -> bool {
        let new = self.rewrite(doc, start, replace);
        new.len() == self.len()
            && new
                .iter()
                .enumerate()
                .all(|(k, l)| doc.line(start + k) == l.as_bytes())
    }

    /// REPLACE's lines as a tolerant match writes them: a line-number prefix
    /// copied with SEARCH's lost (lines copied from the same numbered view lose
    /// the same prefix), and the blank lines at its edges SEARCH's tolerance set
    /// aside.
    fn tolerated<'r>(&self, replace: &[&'r str]) -> Vec<&'r str> {
        let p = &self.pattern;
        let replace = match p.numbering {
            Some(numbering) => numbering.strip_each(replace),
            None => replace.to_vec(),
        };
        let (lead, trail) = tolerant::blank_edges(&replace);
        replace[lead.min(p.lead)..replace.len() - trail.min(p.trail)].to_vec()
    }

    /// The first new REPLACE line (1-based, among REPLACE's lines as written)
    /// whose indentation a ragged match could only guess: SEARCH came with all
    /// its lines at one column where the file nests them (`if x:`, `return 1`,
    /// `else:` sent flat), and the line goes between two SEARCH lines the file
    /// indents differently, so neither tells where it stands, and a guess may
    /// write a branch into the block above it. Where SEARCH kept some nesting
    /// (one line a step off), a new line takes the step of the line before it,
    /// as REPLACE, written the same way, shows it. None for other tiers, and
    /// for a REPLACE written at the file's own indentation.
    pub fn guessed_indentation(&self, doc: &Doc, start: usize, replace: &[&str]) -> Option<usize> {
        let p = &self.pattern;
        if p.tier != Tier::Ragged {
            return None;
        }
        let lines = self.tolerated(replace);
        let file = self.file_lines(doc, start);
        let tab = tolerant::uniform_shift(&file, &p.lines).map_or(4, |s| s.tab);
        let one_column = |lines: &[&str]| {
            let mut cols = lines
                .iter()
                .filter(|l| !tolerant::is_blank(l))
                .map(|l| tolerant::indent_cols(l, tab));
            let first = cols.next();
            cols.all(|c| Some(c) == first)
        };
        if !one_column(&p.lines)
            || one_column(&file)
            || written_as_file(&file, &p.lines, &lines, tab)
        {
            return None;
        }
        let steps = tolerant::indent_steps(&file, &p.lines);
        let differ = |before: usize, after: usize| {
            after < p.lines.len() && steps.at(before).offset != steps.at(after).offset
        };
        let skipped = tolerant::blank_edges(replace).0.min(p.lead);
        capture_diff_slices(Algorithm::Myers, &p.lines, &lines)
            .into_iter()
            .find_map(|op| match op {
                DiffOp::Insert {
                    old_index,
                    new_index,
                    ..
                } if old_index > 0 && differ(old_index - 1, old_index) => Some(new_index),
                DiffOp::Replace {
                    old_index,
                    old_len,
                    new_index,
                    new_len,
                } if new_len > old_len && differ(old_index + old_len - 1, old_index + old_len) => {
                    Some(new_index + old_len)
                }
                _ => None,
            })
            .map(|k| k + skipped + 1)
    }

    fn rewrite(&self, doc: &Doc, start: usize, replace: &[&str]) -> Vec<String> {
        let p = &self.pattern;
        if p.tier == Tier::Exact {
            return replace.iter().map(|s| (*s).to_owned()).collect();
        }
        let replace = self.tolerated(replace);
        let replace = &replace[..];
        let file = self.file_lines(doc, start);
        let shift = tolerant::uniform_shift(&file, &p.lines).unwrap_or(Shift::NONE);
        let tabs = tolerant::uses_tabs(file.iter().copied())
            .or_else(|| tolerant::uses_tabs((0..doc.len().min(1000)).filter_map(|i| text(doc, i))))
            .unwrap_or(false);
        let region: String = file.concat();
        let as_file = written_as_file(&file, &p.lines, replace, shift.tab);
        let ctx = Style {
            shift,
            as_file,
            steps: tolerant::indent_steps(&file, &p.lines),
            unit: indent_unit(doc, start, self.len(), shift.tab),
            tabs,
            region,
            file: file.iter().map(|l| (*l).to_owned()).collect(),
        };
        let mut new: Vec<String> = Vec::with_capacity(replace.len());
        for op in capture_diff_slices(Algorithm::Myers, &p.lines, replace) {
            match op {
                // Lines the agent did not change stay as the file has them, byte for byte.
                DiffOp::Equal { old_index, len, .. } => new.extend(
                    file[old_index..old_index + len]
                        .iter()
                        .map(|s| (*s).to_owned()),
                ),
                DiffOp::Insert {
                    old_index,
                    new_index,
                    new_len,
                } => {
                    // New lines take the indentation step of the line before them.
                    let near = |_| old_index.saturating_sub(1);
                    self.push_new(
                        &mut new,
                        &replace[new_index..new_index + new_len],
                        (near, |_| None),
                        &ctx,
                    );
                }
                DiffOp::Replace {
                    old_index,
                    old_len,
                    new_index,
                    new_len,
                } => {
                    // Changed lines take the step of their SEARCH counterparts.
                    let near = |k: usize| old_index + k.min(old_len - 1);
                    let counterpart = |k: usize| (k < old_len).then(|| old_index + k);
                    self.push_new(
                        &mut new,
                        &replace[new_index..new_index + new_len],
                        (near, counterpart),
                        &ctx,
                    );
                }
                DiffOp::Delete { .. } => {}
            }
        }
        new
    }

    /// New REPLACE lines, each in the file's style. `near(k)` is the SEARCH line
    /// whose indentation step the `k`th of them takes in a ragged match;
    /// `counterpart(k)` the SEARCH line it changes, if it replaces one.
    fn push_new(
        &self,
        out: &mut Vec<String>,
        lines: &[&str],
        (near, counterpart): (impl Fn(usize) -> usize, impl Fn(usize) -> Option<usize>),
        ctx: &Style,
    ) {
        for (k, line) in lines.iter().enumerate() {
            let shift = match self.pattern.tier {
                _ if ctx.as_file => Shift {
                    tab: ctx.shift.tab,
                    ..Shift::NONE
                },
                Tier::Ragged => ctx.steps.at(near(k)),
                _ => ctx.shift,
            };
            let shift = fitting(line, shift, ctx.unit);
            let pair = counterpart(k).map(|j| (self.pattern.lines[j], ctx.file[j].as_str()));
            out.push(self.adapt(line, shift, ctx, pair));
        }
    }

    /// One new REPLACE line in the file's indentation and characters; `pair` is
    /// the SEARCH line it changes and the file line that SEARCH line matched.
    fn adapt(&self, line: &str, shift: Shift, ctx: &Style, pair: Option<(&str, &str)>) -> String {
        let tier = self.pattern.tier;
        let line = if tier >= Tier::Indentation {
            tolerant::reindent(line, shift, ctx.tabs)
        } else {
            line.to_owned()
        };
        if tier < Tier::Typography {
            return line;
        }
        let region = &ctx.region;
        let line = match pair {
            Some((search, file)) => tolerant::keep_file_chars(&line, search, file),
            None => line,
        };
        line.chars()
            .map(|c| {
                if tolerant::is_typographic(c) && !region.contains(c) {
                    tolerant::fold(c)
                } else {
                    c
                }
            })
            .collect()
    }
}

fn indent_warning(file: &[&str], search: &[&str]) -> Option<String> {
    let mut odd: Vec<char> = search
        .iter()
        .flat_map(|l| tolerant::indent_of(l).chars())
        .filter(|&c| tolerant::is_odd_space(c))
        .filter(|&c| !file.iter().any(|l| tolerant::indent_of(l).contains(c)))
        .collect();
    odd.sort_unstable();
    odd.dedup();
    if !odd.is_empty() {
        let style = match tolerant::uses_tabs(file.iter().copied()) {
            Some(true) => "tabs",
            _ => "spaces",
        };
        return Some(format!(
            "SEARCH is indented with {} where the file uses {style}; REPLACE written with {style}",
            escape_chars(&odd.into_iter().collect::<String>())
        ));
    }
    let tabs = |lines: &[&str]| tolerant::uses_tabs(lines.iter().copied());
    let (ft, st) = (tabs(file), tabs(search));
    if ft.is_some() && st.is_some() && ft != st {
        let (f, s) = if ft == Some(true) {
            ("tabs", "spaces")
        } else {
            ("spaces", "tabs")
        };
        return Some(format!(
            "SEARCH indents with {s} where the file uses {f}; REPLACE written with {f}"
        ));
    }
    let shift = tolerant::uniform_shift(file, search)?;
    if shift.num != shift.den {
        let depth = if shift.num > shift.den {
            "half as deep as"
        } else {
            "twice as deep as"
        };
        return Some(format!(
            "SEARCH indents each level {depth} the file; REPLACE re-indented to the file's depth"
        ));
    }
    (shift.offset != 0).then(|| {
        let side = if shift.offset > 0 { "less" } else { "more" };
        format!(
            "SEARCH is indented {} column(s) {side} than the file; REPLACE re-indented to match",
            shift.offset.unsigned_abs()
        )
    })
}

/// How new REPLACE lines are written into the matched region.
struct Style {
    shift: Shift,
    /// REPLACE stands at the file's columns already: its lines keep them.
    as_file: bool,
    steps: tolerant::Steps,
    /// The indentation unit of the lines around the match; 1 when they have none.
    unit: usize,
    tabs: bool,
    region: String,
    /// The matched file lines, one per SEARCH line.
    file: Vec<String>,
}

/// Whether REPLACE was written at the file's indentation while SEARCH was not
/// (SEARCH copied without its indentation, or its first line's, and REPLACE
/// written as the file reads): REPLACE's first line stands at the column of
/// SEARCH's first line in the file, not at SEARCH's, and no line SEARCH and
/// REPLACE share stands at SEARCH's column where the file's differs. Shifted by
/// SEARCH's offset, such a REPLACE would land a level too deep (a method nested
/// into the one before it), so its columns are kept as sent.
fn written_as_file(file: &[&str], search: &[&str], replace: &[&str], tab: usize) -> bool {
    let cols = |l: &str| tolerant::indent_cols(l, tab);
    let first = |lines: &[&str]| lines.iter().position(|l| !tolerant::is_blank(l));
    let (Some(j), Some(k)) = (first(search), first(replace)) else {
        return false;
    };
    let (f, s, r) = (cols(file[j]), cols(search[j]), cols(replace[k]));
    if f == s || r != f {
        return false;
    }
    let body = |lines: &[&str]| -> Vec<String> {
        lines.iter().map(|l| l.trim_start().to_owned()).collect()
    };
    let (sb, rb) = (body(search), body(replace));
    capture_diff_slices(Algorithm::Myers, &sb, &rb)
        .into_iter()
        .filter_map(|op| match op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => Some((0..len).map(move |i| (old_index + i, new_index + i))),
            _ => None,
        })
        .flatten()
        .filter(|&(j, _)| !tolerant::is_blank(search[j]))
        .all(|(j, k)| {
            let (f, s) = (cols(file[j]), cols(search[j]));
            f == s || cols(replace[k]) != s
        })
}

/// Lines around a match that show the file's indentation unit.
const UNIT_CONTEXT: usize = 30;

/// The indentation unit of the file around lines `start..start + len`: the
/// greatest common divisor of their indentation widths (4 for code indented by
/// 4), or 1 when a continuation line aligned at an odd column leaves none.
fn indent_unit(doc: &Doc, start: usize, len: usize, tab: usize) -> usize {
    let from = start.saturating_sub(UNIT_CONTEXT);
    let to = (start + len + UNIT_CONTEXT).min(doc.len());
    let gcd = |a: usize, b: usize| {
        let (mut a, mut b) = (a, b);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    (from..to)
        .filter_map(|i| text(doc, i))
        .filter(|l| !tolerant::is_blank(l))
        .map(|l| tolerant::indent_cols(l, tab))
        .fold(0, gcd)
        .max(1)
}

/// The shift a new REPLACE line takes: the one uniform shift of the match,
/// whatever its size, so that REPLACE keeps its own nesting (a line sent one
/// level under its `if` stays one level under it). One exception: a patch whose
/// context lines lost their leading space reads as SEARCH shifted by exactly
/// one column, while its `+` lines kept theirs; shifting those would write a
/// 5-column line into a file indented by 4, so a one-column shift leaves a line
/// that is on the file's indentation unit where it is. No agent indents a
/// whole block one column off, so the exception never bends a real nesting.
fn fitting(line: &str, shift: Shift, unit: usize) -> Shift {
    let lost_prefix = shift.num == shift.den && shift.offset.abs() == 1;
    let cols = tolerant::indent_cols(line, shift.tab);
    let unshifted = Shift {
        num: 1,
        den: 1,
        offset: 0,
        ..shift
    };
    match lost_prefix
        && unit > 1
        && !shift.map(cols).is_multiple_of(unit)
        && cols.is_multiple_of(unit)
    {
        true => unshifted,
        false => shift,
    }
}

fn ragged_warning(file: &[&str], search: &[&str]) -> String {
    let off: Vec<String> = file
        .iter()
        .zip(search)
        .enumerate()
        .filter(|(_, (f, s))| {
            !tolerant::is_blank(f) && tolerant::indent_of(f) != tolerant::indent_of(s)
        })
        .map(|(j, _)| (j + 1).to_string())
        .collect();
    format!(
        "indentation of SEARCH line(s) {} differs from the file's, not by one shift; unchanged lines keep the file's indentation and new ones take it from their SEARCH counterparts",
        off.join(", ")
    )
}

fn escape_chars(s: &str) -> String {
    let mut seen: Vec<char> = s.chars().collect();
    seen.dedup();
    seen.iter()
        .map(|c| format!("{c} U+{:04X}", *c as u32))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Replaces `len` lines at `start` with `new`, giving each new line the terminator
/// of the line it stands in for, and keeping a missing final newline missing.
pub fn splice(doc: &mut Doc, start: usize, len: usize, new: &[String]) {
    let base = (start..start + len)
        .map(|i| doc.eol(i))
        .find(|e| *e != Eol::None)
        .unwrap_or_else(|| doc.dominant_eol());
    let at_end = start + len == doc.len();
    let no_final_newline = at_end && len > 0 && doc.eol(start + len - 1) == Eol::None;
    let mut lines: Vec<NewLine<'_>> = new
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let eol = if k < len && doc.eol(start + k) != Eol::None {
                doc.eol(start + k)
            } else {
                base
            };
            NewLine {
                content: s.as_bytes(),
                eol,
            }
        })
        .collect();
    if no_final_newline {
        if let Some(last) = lines.last_mut() {
            last.eol = Eol::None;
        } else if start > 0 {
            // Deleting the last lines: the line before them becomes last and loses its newline.
            let prev = doc.line(start - 1).to_vec();
            doc.splice(
                start - 1..start + len,
                &[NewLine {
                    content: &prev,
                    eol: Eol::None,
                }],
            );
            return;
        }
    }
    doc.splice(start..start + len, &lines);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(file: &str, search: &str, replace: &str, tiers: &[Tier]) -> Option<(Tier, String)> {
        let mut doc = Doc::new(file.as_bytes());
        let s: Vec<&str> = crate::payload::text_lines(search);
        let r: Vec<&str> = crate::payload::text_lines(replace);
        let found = find(&doc, &s, 0..doc.len(), || tiers)?;
        assert_eq!(found.starts.len(), 1, "{found:?}");
        let start = found.starts[0];
        found.apply(&mut doc, start, &r);
        Some((found.tier(), String::from_utf8(doc.to_bytes()).unwrap()))
    }

    const ALL: &[Tier] = &Tier::LADDER;

    #[test]
    fn exact_keeps_crlf_and_mixed_endings() {
        assert_eq!(
            edit("a\r\nb\r\nc\r\n", "b\n", "x\ny\n", ALL),
            Some((Tier::Exact, "a\r\nx\r\ny\r\nc\r\n".into()))
        );
        assert_eq!(
            edit("a\nb\r\nc\n", "a\nb\n", "1\n2\n", ALL),
            Some((Tier::Exact, "1\n2\r\nc\n".into()))
        );
    }

    #[test]
    fn missing_final_newline_stays_missing() {
        assert_eq!(
            edit("a\nb", "b\n", "c\nd\n", ALL),
            Some((Tier::Exact, "a\nc\nd".into()))
        );
        assert_eq!(
            edit("a\nb", "b\n", "", ALL),
            Some((Tier::Exact, "a".into()))
        );
        assert_eq!(
            edit("a\nb\n", "b\n", "", ALL),
            Some((Tier::Exact, "a\n".into()))
        );
    }

    #[test]
    fn whitespace_tier_ignores_trailing_space_and_blank_edges() {
        let r = edit("x\nfoo  \ny\n", "\nfoo\n\n", "\nbar\n\n", ALL);
        assert_eq!(r, Some((Tier::Whitespace, "x\nbar\ny\n".into())));
    }

    #[test]
    fn indentation_tier_reindents_replace_in_the_files_style() {
        let file = "fn f() {\n\tif x {\n\t\ty();\n\t}\n}\n";
        let r = edit(
            file,
            "if x {\n    y();\n}\n",
            "if x {\n    y();\n    z();\n}\n",
            ALL,
        );
        assert_eq!(
            r,
            Some((
                Tier::Indentation,
                "fn f() {\n\tif x {\n\t\ty();\n\t\tz();\n\t}\n}\n".into()
            ))
        );
    }

    #[test]
    fn typography_tier_writes_ascii_where_the_file_has_it() {
        let file = "say(\"hi\")\n";
        let r = edit(
            file,
            "say(\u{201c}hi\u{201d})\n",
            "say(\u{201c}hello\u{201d})\n",
            ALL,
        );
        assert_eq!(r, Some((Tier::Typography, "say(\"hello\")\n".into())));
    }

    #[test]
    fn typography_tier_keeps_the_files_characters_where_a_changed_line_keeps_searchs() {
        let file = "name = \u{201c}hello\u{201d}\nx = 1\n";
        let r = edit(
            file,
            "name = \"hello\"\n",
            "name = \"hello world\"\nlabel = \"new\"\n",
            ALL,
        );
        assert_eq!(
            r,
            Some((
                Tier::Typography,
                "name = \u{201c}hello world\u{201d}\nlabel = \"new\"\nx = 1\n".into()
            ))
        );
    }

    #[test]
    fn line_numbers_must_agree_with_the_match() {
        let file = "a\nb\nc\n";
        assert_eq!(
            edit(file, "2 | b\n3 | c\n", "2 | B\n", ALL),
            Some((Tier::LineNumbers, "a\nB\n".into()))
        );
        assert!(edit(file, "5 | b\n6 | c\n", "B\n", ALL).is_none());
    }

    #[test]
    fn replace_lines_lose_searchs_prefix_though_their_numbers_skip() {
        // A deleted line leaves a gap in the numbers the agent copied; a moved
        // line takes its number along.
        let file = "fn f() {\n    let a = 1;\n    let b = 2;\n    let c = 3;\n}\n";
        let dropped = "fn f() {\n    let a = 1;\n    let c = 3;\n}\n";
        let moved = "fn f() {\n    let c = 3;\n    let a = 1;\n}\n";
        for (search, replace, want) in [
            (
                "2:    let a = 1;\n3:    let b = 2;\n4:    let c = 3;\n",
                "2:    let a = 1;\n4:    let c = 3;\n",
                dropped,
            ),
            (
                "     2\u{2192}    let a = 1;\n     3\u{2192}    let b = 2;\n     4\u{2192}    let c = 3;\n",
                "     2\u{2192}    let a = 1;\n     4\u{2192}    let c = 3;\n",
                dropped,
            ),
            (
                "2 |     let a = 1;\n3 |     let b = 2;\n4 |     let c = 3;\n",
                "4 |     let c = 3;\n2 |     let a = 1;\n",
                moved,
            ),
        ] {
            assert_eq!(
                edit(file, search, replace, ALL),
                Some((Tier::LineNumbers, want.into())),
                "{replace:?}"
            );
        }
    }

    #[test]
    fn unnumbered_replace_lines_are_new_lines_written_as_the_numbered_ones() {
        let file = "fn f() {\n    let a = 1;\n    let b = 2;\n}\n";
        for (search, replace) in [
            (
                "2:    let a = 1;\n3:    let b = 2;\n",
                "2:    let a = 1;\n    let c = 3;\n3:    let b = 2;\n",
            ),
            (
                "2: let a = 1;\n3: let b = 2;\n",
                "2: let a = 1;\nlet c = 3;\n3: let b = 2;\n",
            ),
            (
                "     2\t    let a = 1;\n     3\t    let b = 2;\n",
                "     2\t    let a = 1;\n    let c = 3;\n     3\t    let b = 2;\n",
            ),
        ] {
            assert_eq!(
                edit(file, search, replace, ALL),
                Some((
                    Tier::LineNumbers,
                    "fn f() {\n    let a = 1;\n    let c = 3;\n    let b = 2;\n}\n".into()
                )),
                "{replace:?}"
            );
        }
    }

    #[test]
    fn replace_keeps_what_only_resembles_searchs_prefix() {
        // SEARCH's prefixes are `N: ` at the line's start; an indented `8080: http`
        // in REPLACE is a YAML key, not a copied prefix.
        let file = "ports:\n  80: web\n";
        assert_eq!(
            edit(
                file,
                "1: ports:\n2:   80: web\n",
                "1: ports:\n  8080: http\n",
                ALL
            ),
            Some((Tier::LineNumbers, "ports:\n  8080: http\n".into()))
        );
    }

    #[test]
    fn the_space_after_a_numbers_colon_is_not_counted_as_indentation() {
        let file = "fn f() {\n    let a = 1;\n    let b = 2;\n}\n";
        let doc = Doc::new(file.as_bytes());
        let search = ["2:    let a = 1;", "3:    let b = 2;"];
        let found = find(&doc, &search, 0..doc.len(), || ALL).unwrap();
        let said = found.warnings(&doc, found.starts[0]).join("; ");
        assert!(!said.contains("column"), "{said}");
    }

    #[test]
    fn unicode_spaces_in_searchs_indentation_become_the_files_indentation() {
        let spaces = "fn f() {\n    let a = 1;\n}\n";
        let tabs = "fn f() {\n\tlet a = 1;\n}\n";
        for pad in [
            "\u{a0}\u{a0}\u{a0}\u{a0}",
            "\u{a0}       ",
            "\u{2007}\u{202f}\u{3000} ",
        ] {
            let search = format!("{pad}let a = 1;\n");
            let replace = format!("{pad}let a = 2;\n{pad}{pad}let b = 3;\n");
            assert_eq!(
                edit(spaces, &search, &replace, ALL).map(|r| r.1),
                Some(format!(
                    "fn f() {{\n    let a = 2;\n{}let b = 3;\n}}\n",
                    " ".repeat(4 + pad.chars().count())
                )),
                "{pad:?}"
            );
            if pad.chars().count() == 4 {
                assert_eq!(
                    edit(tabs, &search, &replace, ALL).map(|r| r.1),
                    Some("fn f() {\n\tlet a = 2;\n\t\tlet b = 3;\n}\n".into()),
                    "{pad:?}"
                );
            }
        }
        let doc = Doc::new(spaces.as_bytes());
        let found = find(
            &doc,
            &["\u{a0}\u{a0}\u{a0}\u{a0}let a = 1;"],
            0..doc.len(),
            || ALL,
        )
        .unwrap();
        let said = found.warnings(&doc, found.starts[0]).join("; ");
        assert!(
            said.contains("indented with \u{a0} U+00A0 where the file uses spaces"),
            "{said}"
        );
        // Inside a line a non-breaking space is typography, as before.
        assert_eq!(
            edit(
                spaces,
                "    let a\u{a0}= 1;\n",
                "    let a\u{a0}= 2;\n",
                ALL
            ),
            Some((Tier::Typography, "fn f() {\n    let a = 2;\n}\n".into()))
        );
    }

    #[test]
    fn exact_only_mode_climbs_no_ladder() {
        assert!(edit("foo  \n", "foo\n", "bar\n", &[]).is_none());
    }

    #[test]
    fn indentation_step_of_two_matches_a_file_stepping_by_four() {
        let file = "def f(x):\n    if x:\n        return 1\n";
        let r = edit(
            file,
            "def f(x):\n  if x:\n    return 1\n",
            "def f(x):\n  if x:\n    return 2\n",
            ALL,
        );
        assert_eq!(
            r,
            Some((
                Tier::Indentation,
                "def f(x):\n    if x:\n        return 2\n".into()
            ))
        );
    }

    #[test]
    fn non_uniform_indentation_matches_only_at_the_ragged_tier() {
        let up_to_numbers = &Tier::LADDER[..4];
        assert!(edit("  a\n      b\n", "a\nb\n", "x\n", up_to_numbers).is_none());
        assert_eq!(
            edit("  a\n      b\n", "a\nb\n", "x\n", ALL).map(|r| r.0),
            Some(Tier::Ragged)
        );
    }

    #[test]
    fn ragged_replace_lines_take_their_counterparts_indentation() {
        // The first line lost its indentation when copied from a viewer.
        let file = "class A:\n    def f(self):\n        if x:\n            return 1\n";
        let r = edit(
            file,
            "def f(self):\n        if x:\n            return 1\n",
            "def f(self):\n        if x:\n            log()\n            return 2\n",
            ALL,
        );
        assert_eq!(
            r,
            Some((
                Tier::Ragged,
                "class A:\n    def f(self):\n        if x:\n            log()\n            return 2\n"
                    .into()
            ))
        );
    }
}
