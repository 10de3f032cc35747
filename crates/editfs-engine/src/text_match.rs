//! Operations on text rather than whole lines: JSON literals, which may match
//! inside a line, and regular expressions, both run over the file's bytes.

use std::ops::Range;

use regex::bytes::Regex;

use super::budget::{Budget, Spent};

/// One occurrence: its byte range and the bytes to put there.
pub struct Hit {
    pub span: Range<usize>,
    pub with: Vec<u8>,
}

/// The whole lines that hold `span`, and `span` within them.
pub fn lines_around<'a>(bytes: &'a [u8], span: &Range<usize>) -> (&'a [u8], Range<usize>) {
    let start = memchr::memrchr(b'\n', &bytes[..span.start]).map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', &bytes[span.end..]).map_or(bytes.len(), |i| span.end + i);
    (&bytes[start..end], span.start - start..span.end - start)
}

/// Non-overlapping occurrences of `needle` inside `scope`, each paid for
/// from `budget` as a regex match is (see `pattern`).
pub fn literal(
    bytes: &[u8],
    needle: &[u8],
    with: &[u8],
    scope: Range<usize>,
    budget: &Budget,
) -> Result<Vec<Hit>, Spent> {
    memchr::memmem::find_iter(&bytes[scope.clone()], needle)
        .map(|i| {
            budget.charge_match(HIT_WEIGHT, with.len())?;
            Ok(Hit {
                span: scope.start + i..scope.start + i + needle.len(),
                with: with.to_vec(),
            })
        })
        .collect()
}

/// Matches of `re` starting inside `scope`, each with its expanded replacement
/// (`$1`, `${name}`).
///
/// Each match is paid for from `budget` (`HIT_WEIGHT` units and the bytes of
/// its replacement): a pattern matching at every character of a large file
/// would otherwise take minutes and the memory of a copy per match.
pub fn pattern(
    bytes: &[u8],
    re: &Regex,
    template: &[u8],
    scope: Range<usize>,
    budget: &Budget,
) -> Result<Vec<Hit>, Spent> {
    let mut hits = Vec::new();
    for caps in re.captures_iter(&bytes[..scope.end]) {
        let Some(m) = caps.get(0) else { continue };
        if m.start() < scope.start {
            continue;
        }
        let mut with = Vec::new();
        caps.expand(template, &mut with);
        budget.charge_match(HIT_WEIGHT, with.len())?;
        hits.push(Hit {
            span: m.range(),
            with,
        });
    }
    Ok(hits)
}

/// Units one match costs besides its replacement's bytes: finding a regex
/// match's groups, and the checks each match gets (`edit_pattern`), about
/// half a microsecond a match.
pub const HIT_WEIGHT: u64 = 1024;

/// Whether every `\n` of `text` follows a `\r` and every `\r` precedes a `\n`.
pub fn crlf_throughout(text: &str) -> bool {
    let b = text.as_bytes();
    b.iter().enumerate().all(|(i, &c)| match c {
        b'\n' => i > 0 && b[i - 1] == b'\r',
        b'\r' => b.get(i + 1) == Some(&b'\n'),
        _ => true,
    })
}

/// `text` with every bare `\n` turned into `\r\n`, when it has any.
pub fn to_crlf(text: &str) -> Option<String> {
    let bare = text
        .match_indices('\n')
        .any(|(i, _)| i == 0 || text.as_bytes()[i - 1] != b'\r');
    bare.then(|| text.replace("\r\n", "\n").replace('\n', "\r\n"))
}

/// `bytes` with the chosen hits replaced; hits are in order and do not overlap.
pub fn splice(bytes: &[u8], hits: &[&Hit]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    for h in hits {
        out.extend_from_slice(&bytes[at..h.span.start]);
        out.extend_from_slice(&h.with);
        at = h.span.end;
    }
    out.extend_from_slice(&bytes[at..]);
    out
}

/// Whether `span` starts or ends inside a word (`x = 1` in `x = 10`): a fragment
/// that cuts a word is no evidence of the place meant.
pub fn cuts_a_word(bytes: &[u8], span: &Range<usize>) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let first = char_at(bytes, span.start);
    let last = char_before(bytes, span.end);
    (word(char_before(bytes, span.start)) && word(first))
        || (word(char_at(bytes, span.end)) && word(last))
}

/// Whether REPLACE repeats the text beside the fragment on its line (`.` after
/// `This is a sample text`): then the agent meant whole lines and SEARCH merely
/// lost their ends, and replacing the fragment would write that text twice.
pub fn repeats_its_surroundings(bytes: &[u8], span: &Range<usize>, replace: &[u8]) -> bool {
    let line_start = memchr::memrchr(b'\n', &bytes[..span.start]).map_or(0, |i| i + 1);
    let line_end = memchr::memchr(b'\n', &bytes[span.end..]).map_or(bytes.len(), |i| span.end + i);
    let before = bytes[line_start..span.start].trim_ascii_start();
    let after = bytes[span.end..line_end].trim_ascii_end();
    (!before.is_empty() && replace.trim_ascii_start().starts_with(before))
        || (!after.is_empty() && replace.trim_ascii_end().ends_with(after))
}

/// Whether SEARCH lost the end of its last line: the fragment stops inside a
/// line, and REPLACE's last line takes up SEARCH's and closes as the file's
/// line does (`[0u8;` made `[0u8; 16];` in a line `[0u8; 10];`). The agent
/// rewrote the whole line from a cut-off copy, and replacing the fragment would
/// leave the old end after the new one. An insertion inside a line (`foo(` made
/// `foo(bar, `) does not close the line, and stays a fragment edit.
pub fn completes_a_cut_line(
    bytes: &[u8],
    span: &Range<usize>,
    search: &[u8],
    replace: &[u8],
) -> bool {
    let line_end = memchr::memchr(b'\n', &bytes[span.end..]).map_or(bytes.len(), |i| span.end + i);
    let after = bytes[span.end..line_end].trim_ascii_end();
    let last = |text: &[u8]| -> Vec<u8> {
        let line = text.rsplit(|&b| b == b'\n').next().unwrap_or_default();
        line.trim_ascii().to_vec()
    };
    let (cut, whole) = (last(search), last(replace));
    !after.is_empty()
        && !cut.is_empty()
        && whole.len() > cut.len()
        && whole.starts_with(&cut)
        && whole.last() == after.last()
}

/// Whether SEARCH lost the start of its first line: the fragment starts inside
/// a line, and REPLACE's first line is indented where SEARCH's is not (`=
/// compute(a, b)` made `    value = compute(a, b) * 2`). The agent rewrote
/// whole lines from a copy cut short at its start, and replacing the fragment
/// would leave the old start before the new line.
pub fn starts_a_cut_line(bytes: &[u8], span: &Range<usize>, search: &[u8], replace: &[u8]) -> bool {
    let line_start = memchr::memrchr(b'\n', &bytes[..span.start]).map_or(0, |i| i + 1);
    let before = bytes[line_start..span.start].trim_ascii();
    let indented = |text: &[u8]| text.first().is_some_and(|&b| b == b' ' || b == b'\t');
    !before.is_empty() && !indented(search) && indented(replace)
}

/// The character that starts at byte `at`, if one does.
fn char_at(bytes: &[u8], at: usize) -> Option<char> {
    let tail = bytes.get(at..at.saturating_add(4).min(bytes.len()))?;
    (1..=tail.len()).find_map(|n| std::str::from_utf8(&tail[..n]).ok()?.chars().next())
}

/// The character that ends at byte `at`, if one does.
fn char_before(bytes: &[u8], at: usize) -> Option<char> {
    let head = bytes.get(at.saturating_sub(4)..at)?;
    (0..head.len())
        .rev()
        .find_map(|k| std::str::from_utf8(&head[k..]).ok()?.chars().next_back())
}

/// First and last line (1-based) of each hit, counted in one pass.
pub fn line_ranges(bytes: &[u8], hits: &[Hit]) -> Vec<[usize; 2]> {
    let mut line = 1;
    let mut at = 0;
    let mut count = |to: usize| {
        line += memchr::memchr_iter(b'\n', &bytes[at..to]).count();
        at = to;
        line
    };
    hits.iter()
        .map(|h| {
            let first = count(h.span.start);
            let last = if h.span.is_empty() {
                first
            } else {
                count(h.span.end - 1)
            };
            [first, last]
        })
        .collect()
}

/// Whether `line` holds brackets and nothing else but separators: a line
/// that only closes (`}`, `});`) or opens (`{`) a block.
pub fn brackets_only(line: &str) -> bool {
    let t = line.trim();
    t.bytes().any(|b| b"()[]{}".contains(&b)) && t.bytes().all(|b| b"()[]{};,".contains(&b))
}

/// How far `lines` open (positive) or close (negative) round, square and
/// curly brackets. Brackets in strings and comments count too: a file whose
/// count they upset reads as unpaired, and no rule built on this then fires.
pub fn bracket_balance<'a>(lines: impl Iterator<Item = &'a [u8]>) -> [i64; 3] {
    let mut depth = [0i64; 3];
    for b in lines.flatten() {
        match b {
            b'(' => depth[0] += 1,
            b')' => depth[0] -= 1,
            b'[' => depth[1] += 1,
            b']' => depth[1] -= 1,
            b'{' => depth[2] += 1,
            b'}' => depth[2] -= 1,
            _ => {}
        }
    }
    depth
}

/// Whether two texts are the same but for their line endings and a final newline.
pub(super) fn same_text(a: &[u8], b: &[u8]) -> bool {
    fn lines(t: &[u8]) -> impl Iterator<Item = &[u8]> {
        let t = t.strip_suffix(b"\n").unwrap_or(t);
        t.split(|&c| c == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
    }
    lines(a).eq(lines(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_inside_a_line() {
        let hits = literal(b"abcabc", b"b", b"X", 0..6, &Budget::of(u64::MAX)).unwrap();
        assert_eq!(
            splice(b"abcabc", &hits.iter().collect::<Vec<_>>()),
            b"aXcaXc"
        );
    }

    #[test]
    fn pattern_expands_groups() {
        let re = Regex::new(r"(?P<w>\w+)=(\d)").unwrap();
        let hits = pattern(b"a=1 b=2", &re, b"${w}:$2", 0..7, &Budget::of(u64::MAX)).unwrap();
        assert_eq!(
            splice(b"a=1 b=2", &hits.iter().collect::<Vec<_>>()),
            b"a:1 b:2"
        );
    }

    #[test]
    fn a_pattern_stops_where_its_matches_spend_the_budget() {
        let re = Regex::new(r"\w").unwrap();
        let enough = Budget::of(3 * (HIT_WEIGHT + 2));
        assert_eq!(
            pattern(b"abc", &re, b"$0$0", 0..3, &enough).map(|h| h.len()),
            Ok(3)
        );
        let short = Budget::of(3 * (HIT_WEIGHT + 2) - 1);
        assert!(pattern(b"abc", &re, b"$0$0", 0..3, &short).is_err());
    }

    #[test]
    fn crlf_throughout_means_every_line_break_is_whole() {
        assert!(crlf_throughout("a\r\nb\r\n") && crlf_throughout("ab"));
        assert!(!crlf_throughout("a\r\nb\n") && !crlf_throughout("a\r"));
        assert!(!crlf_throughout("\n  \r"));
    }

    #[test]
    fn crlf_conversion_only_for_bare_newlines() {
        assert_eq!(to_crlf("a\nb").as_deref(), Some("a\r\nb"));
        assert_eq!(to_crlf("a\r\nb"), None);
        assert_eq!(to_crlf("ab"), None);
    }

    #[test]
    fn a_fragment_must_not_cut_a_word() {
        let bytes = "x = 10; é = 1;".as_bytes();
        assert!(cuts_a_word(bytes, &(0..5)));
        assert!(!cuts_a_word(bytes, &(0..6)));
        assert!(!cuts_a_word(bytes, &(4..6)));
        assert!(!cuts_a_word(bytes, &(8..14)));
        assert!(cuts_a_word("éx = 1".as_bytes(), &(2..7)));
    }

    #[test]
    fn hits_know_their_lines() {
        let bytes = b"a\nbb\nc\n";
        let hits = literal(bytes, b"bb\nc", b"", 0..bytes.len(), &Budget::of(u64::MAX)).unwrap();
        assert_eq!(line_ranges(bytes, &hits), [[2, 3]]);
    }
}
