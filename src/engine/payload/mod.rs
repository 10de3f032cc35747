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
    #[error("the payload is {size} bytes, over the limit of {limit} bytes")]
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

/// Parses a payload, detecting its form: JSON when it starts with `{` or `[`, marker blocks otherwise.
pub fn parse(bytes: &[u8], limit: usize) -> Result<Payload, PayloadError> {
    if bytes.len() > limit {
        return Err(PayloadError::TooLarge {
            size: bytes.len(),
            limit,
        });
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
    fn text_lines_drop_cr_and_final_newline() {
        assert_eq!(text_lines("a\r\nb\n"), ["a", "b"]);
        assert_eq!(text_lines("a\n\n"), ["a", ""]);
        assert!(text_lines("").is_empty());
    }
}
