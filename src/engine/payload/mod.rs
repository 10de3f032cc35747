//! What an agent writes: a payload of edit operations, in marker-block or JSON form.
//!
//! Parsing is all-or-nothing like the transaction itself: a payload that cannot be
//! read whole is rejected before any operation runs, and the error names the
//! payload line (or JSON object) that broke and what was expected there.

mod json;
mod markers;

use std::ops::RangeInclusive;

use regex::bytes::Regex;

/// How an operation finds its target.
#[derive(Debug, Clone)]
pub enum Find {
    /// A marker block: whole lines.
    Lines,
    /// A JSON `search`: a literal that may match inside a line.
    Text,
    /// A JSON `search` with `regex`, compiled once at parse time.
    Regex(Regex),
    /// A JSON literal `search` with `ignore_case`, compiled to a regex.
    IgnoreCase(Regex),
}

/// One edit operation, in payload order.
#[derive(Debug, Clone)]
pub struct Operation {
    pub find: Find,
    /// The text to find. For blocks, lines joined with `\n` and ending in `\n` unless empty.
    pub search: String,
    pub replace: String,
    /// The payload line (1-based) where the operation starts, for messages.
    pub payload_line: usize,
    /// `:start_line:` hint: among several matches, the one nearest this line wins.
    pub near: Option<usize>,
    /// JSON `start_line`/`end_line`: matches must lie inside these lines (1-based).
    pub scope: Option<RangeInclusive<usize>>,
    /// Replace every occurrence in scope.
    pub all: bool,
    /// The number of occurrences the agent expects; anything else fails the transaction.
    pub expected: Option<usize>,
    /// Hex SHA-256 the file must have before the transaction.
    pub if_match: Option<String>,
    /// The file this operation is for, in a multi-file payload: the line of text
    /// before a block, or a JSON `path`.
    pub label: Option<String>,
    /// Other readings of a block that holds more than one divider line (a file's
    /// own `=======` lines): each a (SEARCH, REPLACE) split at a later divider. The
    /// engine takes the one reading whose SEARCH matches the file.
    pub splits: Vec<(String, String)>,
}

impl Operation {
    fn new(find: Find, search: String, replace: String, payload_line: usize) -> Operation {
        Operation {
            find,
            search,
            replace,
            payload_line,
            near: None,
            scope: None,
            all: false,
            expected: None,
            if_match: None,
            label: None,
            splits: Vec::new(),
        }
    }
}

/// A parsed payload: its operations and notes on what was ignored.
#[derive(Debug, Default)]
pub struct Payload {
    pub operations: Vec<Operation>,
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PayloadError {
    #[error("the payload is {size} bytes, over the limit of {limit} bytes (--max-content-size)")]
    TooLarge { size: usize, limit: usize },
    #[error("the payload is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { offset: usize },
    #[error("the payload holds no edit operation")]
    Empty,
    #[error("payload line {line}: {found}; expected {expected}")]
    Structure {
        line: usize,
        found: String,
        expected: String,
    },
    #[error("payload line {line}, column {column}: invalid JSON: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("JSON operation {index}: {message}")]
    Field { index: usize, message: String },
}

impl PayloadError {
    /// The report's error kind.
    pub fn kind(&self) -> &'static str {
        match self {
            PayloadError::TooLarge { .. } => "too_large",
            _ => "malformed",
        }
    }

    /// What the agent should do about it.
    pub fn hint(&self) -> String {
        match self {
            PayloadError::TooLarge { .. } => {
                "split the edit into several smaller transactions".into()
            }
            PayloadError::Json { .. } | PayloadError::Field { .. } => JSON_SHAPE.into(),
            _ => BLOCK_SHAPE.into(),
        }
    }
}

const BLOCK_SHAPE: &str = "a block is a line `<<<<<<< SEARCH`, the exact lines to find, a line \
`=======`, the lines to put in their place, and a line `>>>>>>> REPLACE`, each marker alone on \
its line";
const JSON_SHAPE: &str = "JSON operations look like {\"search\": \"old text\", \"replace\": \"new \
text\"}, one object or an array of them";

/// A payload as a reader received it. Readers stop a little past the limit, so a
/// huge payload costs no memory; such a payload arrives cut short, together with
/// the size it really had, which the `too_large` report states.
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    pub bytes: &'a [u8],
    /// The payload's real size in bytes (at least `bytes.len()`).
    pub size: usize,
}

impl<'a> Received<'a> {
    /// The first bytes of a payload of `size` bytes that was not read to its end.
    pub fn cut(bytes: &'a [u8], size: usize) -> Received<'a> {
        Received {
            bytes,
            size: size.max(bytes.len()),
        }
    }
}

impl<'a> From<&'a [u8]> for Received<'a> {
    fn from(bytes: &'a [u8]) -> Received<'a> {
        Received {
            bytes,
            size: bytes.len(),
        }
    }
}

impl<'a> From<&'a Vec<u8>> for Received<'a> {
    fn from(bytes: &'a Vec<u8>) -> Received<'a> {
        Received::from(bytes.as_slice())
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Received<'a> {
    fn from(bytes: &'a [u8; N]) -> Received<'a> {
        Received::from(bytes.as_slice())
    }
}

/// Parses a payload, detecting its form: JSON when it starts with `{` or `[`, marker blocks otherwise.
pub fn parse<'a>(received: impl Into<Received<'a>>, limit: usize) -> Result<Payload, PayloadError> {
    let Received { bytes, size } = received.into();
    if size > limit || bytes.len() > limit {
        return Err(PayloadError::TooLarge { size, limit });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| PayloadError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let payload = if looks_like_json(text) {
        match json::parse(text) {
            Ok(p) => p,
            // A payload that opens with `{` but holds marker blocks is prose plus blocks.
            Err(e) if !markers::has_blocks(text) => return Err(e),
            Err(_) => markers::parse(text)?,
        }
    } else {
        markers::parse(text)?
    };
    if payload.operations.is_empty() {
        return Err(PayloadError::Empty);
    }
    Ok(payload)
}

/// Reads a single-file payload: a JSON `path` means nothing here, and says so.
pub fn parse_single<'a>(
    received: impl Into<Received<'a>>,
    limit: usize,
) -> Result<Payload, PayloadError> {
    let received = received.into();
    let bytes = received.bytes;
    let mut payload = parse(received, limit)?;
    let json_paths = looks_like_json(&String::from_utf8_lossy(bytes))
        && payload.operations.iter().any(|o| o.label.is_some());
    if json_paths {
        payload.notes.push(
            "`path` ignored: this control file edits one file (use .editfs/edit for several)"
                .into(),
        );
    }
    Ok(payload)
}

/// Each file's path and its operations.
pub type Files = Vec<(String, Payload)>;

/// The operations of each file of a multi-file payload, in the order the files
/// first appear, and the notes. A block's file is the path on the line of text
/// before it (or its JSON `path`), else the previous block's.
pub fn parse_multi<'a>(
    received: impl Into<Received<'a>>,
    limit: usize,
) -> Result<(Files, Vec<String>), PayloadError> {
    let payload = parse(received, limit)?;
    let mut files: Vec<(String, Payload)> = Vec::new();
    let mut current: Option<String> = None;
    for op in payload.operations {
        if let Some(p) = op.label.as_deref().and_then(path_in) {
            current = Some(p);
        }
        let Some(path) = current.clone() else {
            return Err(PayloadError::Structure {
                line: op.payload_line,
                found: "a block with no file path before it".into(),
                expected: "the file's path, relative to the root, alone on a line before its blocks (or \"path\" in JSON)".into(),
            });
        };
        match files.iter_mut().find(|(p, _)| *p == path) {
            Some((_, p)) => p.operations.push(op),
            None => files.push((
                path,
                Payload {
                    operations: vec![op],
                    notes: Vec::new(),
                },
            )),
        }
    }
    let notes = payload
        .notes
        .into_iter()
        .filter(|n| !n.starts_with("ignored "))
        .collect();
    Ok((files, notes))
}

/// The path a label names, as agents write it: `src/a.py`, `` `src/a.py` ``,
/// `**src/a.py**`, `src/a.py:`, `File: src/a.py`. Prose is no path.
fn path_in(label: &str) -> Option<String> {
    let t = label.trim();
    let t = ["File:", "Path:", "file:", "path:"]
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .unwrap_or(t);
    let decoration = |c| c == '`' || c == '*' || c == '"' || c == '\'';
    let t = t
        .trim()
        .trim_end_matches(':')
        .trim_matches(decoration)
        .trim_end_matches(':')
        .trim();
    (!t.is_empty() && !t.contains(char::is_whitespace) && !t.starts_with('#')).then(|| t.to_owned())
}

fn looks_like_json(text: &str) -> bool {
    matches!(text.trim_start().chars().next(), Some('{' | '['))
}

/// Splits text into lines the way blocks see them: `\n` separated, a trailing `\r`
/// dropped, no empty last line for text that ends with a newline.
pub fn text_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_limit_is_too_large() {
        let err = parse(&[b'x'; 11], 10).unwrap_err();
        assert_eq!(err.kind(), "too_large");
    }

    #[test]
    fn a_cut_payload_reports_its_real_size() {
        let err = parse(Received::cut(&[b'x'; 11], 147_456), 10).unwrap_err();
        assert_eq!(
            err,
            PayloadError::TooLarge {
                size: 147_456,
                limit: 10
            }
        );
        assert!(
            err.to_string()
                .contains("147456 bytes, over the limit of 10")
        );
    }

    #[test]
    fn binary_payload_is_rejected_with_its_offset() {
        let err = parse(b"ab\xff\xfe", 100).unwrap_err();
        assert_eq!(err, PayloadError::NotUtf8 { offset: 2 });
    }

    #[test]
    fn blank_payload_holds_nothing() {
        assert_eq!(parse(b"  \n", 100).unwrap_err(), PayloadError::Empty);
    }

    #[test]
    fn brace_prose_with_blocks_is_read_as_blocks() {
        let p = parse(
            b"{ a note }\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n",
            1000,
        )
        .unwrap();
        assert_eq!(p.operations.len(), 1);
    }

    #[test]
    fn multi_file_payloads_group_blocks_by_path() {
        let text = "src/a.py\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n**lib/b.rs**:\n```rust\n<<<<<<< SEARCH\ne\n=======\nf\n>>>>>>> REPLACE\n```\n";
        let (files, _) = parse_multi(text.as_bytes(), 10_000).unwrap();
        let shape: Vec<_> = files
            .iter()
            .map(|(p, pl)| (p.as_str(), pl.operations.len()))
            .collect();
        assert_eq!(shape, [("src/a.py", 2), ("lib/b.rs", 1)]);
        let json = r#"[{"path": "a", "search": "x", "replace": "y"}, {"search": "z", "replace": "w"}, {"file_path": "b", "search": "1"}]"#;
        let (files, _) = parse_multi(json.as_bytes(), 10_000).unwrap();
        let shape: Vec<_> = files
            .iter()
            .map(|(p, pl)| (p.as_str(), pl.operations.len()))
            .collect();
        assert_eq!(shape, [("a", 2), ("b", 1)]);
    }

    #[test]
    fn a_block_without_a_path_is_rejected_in_a_multi_file_payload() {
        let err =
            parse_multi(b"<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n", 1000).unwrap_err();
        assert!(
            matches!(err, PayloadError::Structure { line: 1, .. }),
            "{err:?}"
        );
        assert!(
            parse_multi(
                b"Here is the change:\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n",
                1000
            )
            .is_err()
        );
    }

    #[test]
    fn text_lines_drop_cr_and_final_newline() {
        assert_eq!(text_lines("a\r\nb\n"), ["a", "b"]);
        assert_eq!(text_lines("a\n\n"), ["a", ""]);
        assert!(text_lines("").is_empty());
    }
}
