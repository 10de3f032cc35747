//! The tolerance ladder: how SEARCH lines may differ from the file's and still match.
//!
//! Tiers are cumulative (each forgives what the ones before it forgive, and one
//! thing more; the line-number tier alone strips its prefixes) and are tried in
//! order only when the previous found nothing. A tolerant match is used only when
//! it is the single match of its tier: editing the wrong place is far worse than
//! an honest failure.

use std::hash::Hasher;
use std::sync::LazyLock;

use regex::Regex;
use rustc_hash::FxHasher;
use serde::Serialize;

/// How a match was found, as reported in `strategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Exact,
    /// Trailing whitespace, and blank lines around SEARCH, ignored.
    Whitespace,
    /// Indentation shifted uniformly, or tabs and spaces exchanged.
    Indentation,
    /// Curly quotes, long dashes and non-breaking spaces equal to their ASCII forms.
    Typography,
    /// Line-number prefixes copied from a viewer, when the numbers agree.
    LineNumbers,
    /// Indentation that differs line by line (a first line that lost it when copied
    /// from a viewer, a line a step off): lines equal once it is set aside.
    Ragged,
}

impl Tier {
    pub const LADDER: [Tier; 5] = [
        Tier::Whitespace,
        Tier::Indentation,
        Tier::Typography,
        Tier::LineNumbers,
        Tier::Ragged,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Exact => "exact",
            Tier::Whitespace => "whitespace",
            Tier::Indentation => "indentation",
            Tier::Typography => "typography",
            Tier::LineNumbers => "line_numbers",
            Tier::Ragged => "ragged",
        }
    }

    /// Whether two lines are equal at this tier.
    pub fn equal(self, file: &str, search: &str) -> bool {
        match self {
            Tier::Exact => file == search,
            Tier::Whitespace => file.trim_end() == search.trim_end(),
            Tier::Indentation => file.trim() == search.trim(),
            Tier::Typography | Tier::LineNumbers | Tier::Ragged => file
                .trim()
                .chars()
                .map(fold)
                .eq(search.trim().chars().map(fold)),
        }
    }
}

/// The ASCII form of a typographic look-alike, or the character itself.
pub fn fold(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' | '\u{2032}' => '\'',
        '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{201f}' | '\u{2033}' => '"',
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
        | '\u{2212}' => '-',
        '\u{00a0}' | '\u{2007}' | '\u{202f}' | '\u{2009}' | '\u{200a}' => ' ',
        _ => c,
    }
}

/// Hash of a line with every whitespace character removed and typography folded.
/// Lines equal at any tolerant tier have equal keys, so the key picks candidates
/// for every tier (and for the diagnosis) in one pass.
pub fn loose_key(line: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    // Most lines are ASCII: the same characters hashed, without decoding UTF-8
    // (`fold` leaves ASCII as it is).
    if line.is_ascii() {
        for c in line.iter().map(|&b| char::from(b)) {
            if !c.is_whitespace() {
                h.write_u32(c as u32);
            }
        }
        return h.finish();
    }
    match std::str::from_utf8(line) {
        Ok(text) => {
            for c in text.chars().filter(|c| !c.is_whitespace()) {
                h.write_u32(fold(c) as u32);
            }
        }
        // Tolerance needs text; such a line only ever matches exactly.
        Err(_) => h.write(line),
    }
    h.finish()
}

/// `line` (a REPLACE line that changes `search`, which matched `file` at the
/// typography tier) with the file's own character wherever it keeps a character
/// of SEARCH that stands for a look-alike in the file: `"hello"` changed to
/// `"hello world"` in a file that reads `“hello”` is written `“hello world”`.
pub fn keep_file_chars(line: &str, search: &str, file: &str) -> String {
    let s: Vec<char> = search.trim().chars().collect();
    let f: Vec<char> = file.trim().chars().collect();
    if s.len() != f.len() || s == f {
        return line.to_owned();
    }
    let r: Vec<char> = line.chars().collect();
    let mut out = r.clone();
    let offset = search.len() - search.trim_start().len();
    let s_all: Vec<char> = search.chars().collect();
    let skip = search[..offset].chars().count();
    for op in similar::capture_diff_slices(similar::Algorithm::Myers, &s_all, &r) {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            for k in 0..len {
                let at = old_index + k;
                if at >= skip && at - skip < f.len() && f[at - skip] != s[at - skip] {
                    out[new_index + k] = f[at - skip];
                }
            }
        }
    }
    out.into_iter().collect()
}

pub fn is_typographic(c: char) -> bool {
    fold(c) != c
}

pub fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// Counts of blank lines at the start and end of `lines`.
pub fn blank_edges(lines: &[&str]) -> (usize, usize) {
    let lead = lines.iter().take_while(|l| is_blank(l)).count();
    if lead == lines.len() {
        return (lead, 0);
    }
    let trail = lines.iter().rev().take_while(|l| is_blank(l)).count();
    (lead, trail)
}

static NUMBER_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\s*)(\d+)(\t|→| ?\||:)").expect("the line-number pattern is valid")
});

/// The shape of the line-number prefixes a reader put on SEARCH's lines (`12 | `,
/// `12: `, `12\t`, `    12→`). REPLACE lines copied from the same view carry
/// the same shape, whatever their numbers; a line that does not is the agent's
/// own, and what only resembles a prefix in it (an indented `8080: http`) stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Numbering<'a> {
    /// The number on SEARCH's first line.
    pub first: usize,
    /// What follows the number: a tab, `→`, `:`, `|` or ` |`.
    sep: &'a str,
    /// Width of the number and its padding when the reader right-aligns numbers
    /// (`     12→` is 7 wide); `None` when prefixes start with their number.
    width: Option<usize>,
    /// Whether a space after `:` or `|` is the reader's: `2:    x` reads as
    /// `2: ` and `   x` or as `2:` and `    x`, which only the file can tell.
    space: bool,
}

impl<'a> Numbering<'a> {
    fn of(line: &'a str) -> Option<Numbering<'a>> {
        let caps = NUMBER_PREFIX.captures(line)?;
        let (pad, digits) = (caps.get(1)?.as_str(), caps.get(2)?.as_str());
        Some(Numbering {
            first: digits.parse().ok()?,
            sep: caps.get(3)?.as_str(),
            width: (!pad.is_empty()).then(|| pad.chars().count() + digits.len()),
            space: true,
        })
    }

    /// The number of `line` and the line without its prefix, when it has this shape.
    fn split<'l>(&self, line: &'l str) -> Option<(usize, &'l str)> {
        let caps = NUMBER_PREFIX.captures(line)?;
        let (pad, digits) = (caps.get(1)?.as_str(), caps.get(2)?.as_str());
        let width = (!pad.is_empty()).then(|| pad.chars().count() + digits.len());
        if caps.get(3)?.as_str() != self.sep || width != self.width {
            return None;
        }
        let rest = &line[caps.get(0)?.end()..];
        let rest = match self.space && matches!(self.sep, ":" | "|" | " |") {
            true => rest.strip_prefix(' ').unwrap_or(rest),
            false => rest,
        };
        Some((digits.parse().ok()?, rest))
    }

    /// This shape with any space after `:` or `|` left to the line.
    pub fn keeping_space(self) -> Numbering<'a> {
        Numbering {
            space: false,
            ..self
        }
    }

    /// Whether a space after the separator could be the line's own.
    pub fn takes_space(&self) -> bool {
        self.space && matches!(self.sep, ":" | "|" | " |")
    }

    /// `lines` stripped of this shape's prefixes, when every line has one and
    /// their numbers count up from `first` without a gap.
    pub fn strip_all<'l>(&self, lines: &[&'l str]) -> Option<Vec<&'l str>> {
        lines
            .iter()
            .enumerate()
            .map(|(k, line)| {
                self.split(line)
                    .filter(|&(n, _)| n == self.first + k)
                    .map(|(_, rest)| rest)
            })
            .collect()
    }

    /// REPLACE's lines, each stripped of a prefix of this shape if it has one.
    /// Their numbers need not count up: a deleted line leaves a gap, a moved
    /// line takes its number along, and a new line comes without one.
    pub fn strip_each<'l>(&self, lines: &[&'l str]) -> Vec<&'l str> {
        lines
            .iter()
            .map(|line| self.split(line).map_or(*line, |(_, rest)| rest))
            .collect()
    }
}

/// Strips `12 | `, `12: `, `12\t` or `    12→` (Claude Code's file reader) prefixes
/// when every line has one of the same shape and their numbers count up.
/// Returns the stripped lines and the prefixes' shape.
pub fn strip_numbers<'a>(lines: &[&'a str]) -> Option<(Vec<&'a str>, Numbering<'a>)> {
    let numbering = Numbering::of(lines.first()?)?;
    Some((numbering.strip_all(lines)?, numbering))
}

/// Width in columns of a line's leading whitespace, tabs stopping every `tab` columns.
/// A non-breaking space (or another Unicode space) in it counts as the column it
/// shows as: text that passed through a renderer arrives indented with them, and
/// is indented no less for it.
pub fn indent_cols(line: &str, tab: usize) -> usize {
    let mut cols = 0;
    for c in line.chars() {
        match c {
            '\t' => cols += tab - cols % tab,
            c if is_indent_char(c) => cols += 1,
            _ => break,
        }
    }
    cols
}

/// A line's leading whitespace, Unicode spaces included (see `indent_cols`).
pub fn indent_of(line: &str) -> &str {
    &line[..line.len() - body_of(line).len()]
}

/// A line without its indentation.
fn body_of(line: &str) -> &str {
    line.trim_start_matches(is_indent_char)
}

/// A space or a tab, or a Unicode space (ASCII's form feed and the like stay
/// text: a `^L` page break is no indentation).
fn is_indent_char(c: char) -> bool {
    c == ' ' || c == '\t' || is_odd_space(c)
}

/// A Unicode space (non-breaking, figure, ideographic...): no indentation a
/// compiler or an interpreter reads as such.
pub fn is_odd_space(c: char) -> bool {
    !c.is_ascii() && c.is_whitespace()
}

/// How SEARCH's indentation maps onto the file's: `file * den = search * num + offset`
/// in columns at a tab width. `num/den` other than 1 covers an agent that indents
/// by 2 where the file indents by 4, or the reverse: the nesting is the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shift {
    pub tab: usize,
    pub num: isize,
    pub den: isize,
    pub offset: isize,
}

impl Shift {
    pub const NONE: Shift = Shift {
        tab: 4,
        num: 1,
        den: 1,
        offset: 0,
    };

    /// The file's column for a SEARCH or REPLACE column.
    pub fn map(self, cols: usize) -> usize {
        ((cols as isize * self.num + self.offset) / self.den).max(0) as usize
    }
}

/// The uniform mapping that turns every non-blank SEARCH line's indentation into
/// its file line's, if there is one.
pub fn uniform_shift(file: &[&str], search: &[&str]) -> Option<Shift> {
    let scales: &[(isize, isize)] = match first_line_lost_indent(file, search) {
        true => &[(1, 1)],
        false => &[(1, 1), (2, 1), (1, 2)],
    };
    scales.iter().find_map(|&(num, den)| {
        [4, 2, 8, 3].into_iter().find_map(|tab| {
            let mut offset = None;
            for (f, s) in file.iter().zip(search) {
                if is_blank(f) || is_blank(s) {
                    continue;
                }
                let d = indent_cols(f, tab) as isize * den - indent_cols(s, tab) as isize * num;
                if *offset.get_or_insert(d) != d {
                    return None;
                }
            }
            let offset = offset.unwrap_or(0);
            (offset % den == 0).then_some(Shift {
                tab,
                num,
                den,
                offset,
            })
        })
    })
}

/// Whether SEARCH's first line lost all its indentation while every other line
/// has exactly the file's, as copied from a viewer. Two indentation levels then
/// also fit a scale (SEARCH "twice as deep", shifted), which would re-indent new
/// nested lines by half the file's step: such a copy is ragged, not rescaled.
fn first_line_lost_indent(file: &[&str], search: &[&str]) -> bool {
    let mut pairs = file
        .iter()
        .zip(search)
        .filter(|(f, s)| !is_blank(f) && !is_blank(s));
    let Some((f, s)) = pairs.next() else {
        return false;
    };
    let mut rest = pairs.peekable();
    indent_of(s).is_empty()
        && !indent_of(f).is_empty()
        && rest.peek().is_some()
        && rest.all(|(f, s)| indent_of(f) == indent_of(s))
}

/// Per SEARCH line, how far the file's indentation lies from SEARCH's, in columns:
/// what a ragged match uses instead of one uniform shift.
#[derive(Debug)]
pub struct Steps {
    tab: usize,
    offsets: Vec<Option<isize>>,
}

impl Steps {
    /// The shift of SEARCH line `j`, or of the nearest non-blank line before it
    /// (else after it).
    pub fn at(&self, j: usize) -> Shift {
        let (before, after) = self.offsets.split_at((j + 1).min(self.offsets.len()));
        let offset = before
            .iter()
            .rev()
            .chain(after)
            .flatten()
            .next()
            .copied()
            .unwrap_or(0);
        Shift {
            tab: self.tab,
            offset,
            ..Shift::NONE
        }
    }
}

pub fn indent_steps(file: &[&str], search: &[&str]) -> Steps {
    let tab = 4;
    let offsets = file
        .iter()
        .zip(search)
        .map(|(f, s)| {
            (!is_blank(f) && !is_blank(s))
                .then(|| indent_cols(f, tab) as isize - indent_cols(s, tab) as isize)
        })
        .collect();
    Steps { tab, offsets }
}

/// Whether the file indents with tabs, judged from `lines`; `None` when none is indented.
pub fn uses_tabs<'a>(lines: impl Iterator<Item = &'a str>) -> Option<bool> {
    lines
        .map(indent_of)
        .find(|i| !i.is_empty())
        .map(|i| i.starts_with('\t'))
}

/// `line` with its indentation moved by `shift` and written with tabs or spaces.
pub fn reindent(line: &str, shift: Shift, tabs: bool) -> String {
    if is_blank(line) {
        return String::new();
    }
    let cols = shift.map(indent_cols(line, shift.tab));
    let body = body_of(line);
    let indent = if tabs {
        "\t".repeat(cols / shift.tab) + &" ".repeat(cols % shift.tab)
    } else {
        " ".repeat(cols)
    };
    indent + body
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `loose_key` as it reads, character by character, for every line.
    fn loose_key_by_chars(line: &str) -> u64 {
        let mut h = FxHasher::default();
        for c in line.chars().filter(|c| !c.is_whitespace()) {
            h.write_u32(fold(c) as u32);
        }
        h.finish()
    }

    proptest::proptest! {
        /// The ASCII fast path hashes what the general one does.
        #[test]
        fn ascii_lines_get_the_key_the_general_path_gives(line in "[ -~\t\x0b\x0c\r]{0,40}") {
            proptest::prop_assert_eq!(loose_key(line.as_bytes()), loose_key_by_chars(&line));
        }
    }

    #[test]
    fn tiers_forgive_cumulatively() {
        assert!(!Tier::Exact.equal("a  ", "a"));
        assert!(Tier::Whitespace.equal("a  ", "a"));
        assert!(!Tier::Whitespace.equal("  a", "a"));
        assert!(Tier::Indentation.equal("\ta ", "    a"));
        assert!(!Tier::Indentation.equal("x = \"a\"", "x = \u{201c}a\u{201d}"));
        assert!(Tier::Typography.equal("  x = \"a\" - 1", "x\u{a0}= \u{201c}a\u{201d} \u{2014} 1"));
    }

    #[test]
    fn number_prefixes_must_be_consecutive() {
        let stripped = |lines: &[&'static str]| {
            strip_numbers(lines).map(|(lines, numbering)| (lines, numbering.first))
        };
        assert_eq!(
            stripped(&["12 | a", "13 |   b"]),
            Some((vec!["a", "  b"], 12))
        );
        assert_eq!(stripped(&["  7\ta", "  8\t"]), Some((vec!["a", ""], 7)));
        assert_eq!(stripped(&["3: a", "4: b"]), Some((vec!["a", "b"], 3)));
        assert_eq!(
            stripped(&["    19→def f():", "    20→    x = 1"]),
            Some((vec!["def f():", "    x = 1"], 19))
        );
        assert_eq!(stripped(&["12 | a", "14 | b"]), None);
        assert_eq!(stripped(&["12 | a", "b"]), None);
        // One reader writes every prefix alike.
        assert_eq!(stripped(&["12 | a", "13: b"]), None);
    }

    #[test]
    fn replace_loses_only_prefixes_shaped_as_searchs() {
        let (_, numbering) = strip_numbers(&["     3→a", "     4→b"]).unwrap();
        assert_eq!(
            numbering.strip_each(&["     4→b", "c", "     9→d", "3→e", "  8080: x"]),
            ["b", "c", "d", "3→e", "  8080: x"]
        );
        let (_, numbering) = strip_numbers(&["3: a", "4:    b"]).unwrap();
        assert_eq!(
            numbering.strip_each(&["4:    b", "    8: c", "5 | d"]),
            ["   b", "    8: c", "5 | d"]
        );
        assert_eq!(
            numbering.keeping_space().strip_each(&["4:    b"]),
            ["    b"]
        );
    }

    #[test]
    fn shift_must_be_uniform() {
        let shift = |tab, num, den, offset| {
            Some(Shift {
                tab,
                num,
                den,
                offset,
            })
        };
        assert_eq!(
            uniform_shift(&["    a", "        b"], &["a", "    b"]),
            shift(4, 1, 1, 4)
        );
        assert_eq!(
            uniform_shift(&["\ta", "\t\tb"], &["  a", "    b"]),
            shift(2, 1, 1, 0)
        );
        let (file, search) = (["a", "    b", "        c"], ["a", "  b", "    c"]);
        assert_eq!(uniform_shift(&file, &search), shift(4, 2, 1, 0));
        assert_eq!(uniform_shift(&["    a", "  b"], &["a", "b"]), None);
        assert_eq!(
            uniform_shift(&["a", "    b", "      c"], &["a", "  b", "    c"]),
            None
        );
    }

    #[test]
    fn reindent_writes_the_files_style() {
        assert_eq!(reindent("        x", Shift::NONE, true), "\t\tx");
        assert_eq!(
            reindent(
                "\tx",
                Shift {
                    offset: 4,
                    ..Shift::NONE
                },
                false
            ),
            "        x"
        );
        assert_eq!(
            reindent(
                "  x",
                Shift {
                    num: 2,
                    ..Shift::NONE
                },
                false
            ),
            "    x"
        );
        assert_eq!(reindent("   ", Shift::NONE, false), "");
    }

    #[test]
    fn blank_edges_of_all_blank_text() {
        assert_eq!(blank_edges(&["", "a", " ", ""]), (1, 2));
        assert_eq!(blank_edges(&["", ""]), (2, 0));
    }
}
