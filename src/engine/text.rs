//! Operations on text rather than whole lines: JSON literals, which may match
//! inside a line, and regular expressions, both run over the file's bytes.

use std::ops::Range;

use regex::bytes::Regex;

/// One occurrence: its byte range and the bytes to put there.
pub struct Hit {
    pub span: Range<usize>,
    pub with: Vec<u8>,
}

/// Non-overlapping occurrences of `needle` inside `scope`.
pub fn literal(bytes: &[u8], needle: &[u8], with: &[u8], scope: Range<usize>) -> Vec<Hit> {
    memchr::memmem::find_iter(&bytes[scope.clone()], needle)
        .map(|i| Hit {
            span: scope.start + i..scope.start + i + needle.len(),
            with: with.to_vec(),
        })
        .collect()
}

/// Matches of `re` starting inside `scope`, each with its expanded replacement
/// (`$1`, `${name}`).
pub fn pattern(bytes: &[u8], re: &Regex, template: &[u8], scope: Range<usize>) -> Vec<Hit> {
    re.captures_iter(&bytes[..scope.end])
        .filter_map(|caps| {
            let m = caps.get(0)?;
            (m.start() >= scope.start).then(|| {
                let mut with = Vec::new();
                caps.expand(template, &mut with);
                Hit {
                    span: m.range(),
                    with,
                }
            })
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_inside_a_line() {
        let hits = literal(b"abcabc", b"b", b"X", 0..6);
        assert_eq!(
            splice(b"abcabc", &hits.iter().collect::<Vec<_>>()),
            b"aXcaXc"
        );
    }

    #[test]
    fn pattern_expands_groups() {
        let re = Regex::new(r"(?P<w>\w+)=(\d)").unwrap();
        let hits = pattern(b"a=1 b=2", &re, b"${w}:$2", 0..7);
        assert_eq!(
            splice(b"a=1 b=2", &hits.iter().collect::<Vec<_>>()),
            b"a:1 b:2"
        );
    }

    #[test]
    fn crlf_conversion_only_for_bare_newlines() {
        assert_eq!(to_crlf("a\nb").as_deref(), Some("a\r\nb"));
        assert_eq!(to_crlf("a\r\nb"), None);
        assert_eq!(to_crlf("ab"), None);
    }

    #[test]
    fn hits_know_their_lines() {
        let bytes = b"a\nbb\nc\n";
        let hits = literal(bytes, b"bb\nc", b"", 0..bytes.len());
        assert_eq!(line_ranges(bytes, &hits), [[2, 3]]);
    }
}
