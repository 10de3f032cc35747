//! JSON operations: one object or an array of objects.
//!
//! Field names follow the contract (`search`, `replace`, ...) and accept the
//! spellings agents' tool calls already use (`old_str`/`new_str`,
//! `old_string`/`new_string`, `replace_all`), so a tool call can be forwarded as is.

use regex::bytes::RegexBuilder;
use serde_json::{Map, Value};

use super::{Find, Operation, Payload, PayloadError};

const SEARCH: &[&str] = &["search", "old_str", "old_string"];
const REPLACE: &[&str] = &["replace", "new_str", "new_string"];
const ALL: &[&str] = &["all", "replace_all"];
/// Fields a tool call carries that mean nothing for a single-file edit.
const PATH: &[&str] = &["path", "file_path"];
const KNOWN: &[&str] = &[
    "regex",
    "ignore_case",
    "start_line",
    "end_line",
    "expected_replacements",
    "if_match",
];

/// Compiled regexes are capped so a hostile pattern cannot take the daemon's memory.
const REGEX_SIZE_LIMIT: usize = 10 << 20;

pub fn parse(text: &str) -> Result<Payload, PayloadError> {
    let value: Value = serde_json::from_str(text).map_err(|e| PayloadError::Json {
        line: e.line(),
        column: e.column(),
        message: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or_default()
            .to_owned(),
    })?;
    let objects = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut payload = Payload::default();
    for (i, item) in objects.into_iter().enumerate() {
        let index = i + 1;
        let Value::Object(map) = item else {
            return Err(field(index, "is not an object"));
        };
        payload
            .operations
            .push(operation(index, &map, &mut payload.notes)?);
    }
    Ok(payload)
}

fn field(index: usize, message: impl Into<String>) -> PayloadError {
    PayloadError::Field {
        index,
        message: message.into(),
    }
}

/// The value under the first of `names` present.
fn get<'a>(map: &'a Map<String, Value>, names: &[&str]) -> Option<(&'a str, &'a Value)> {
    names
        .iter()
        .find_map(|n| map.get_key_value(*n).map(|(k, v)| (k.as_str(), v)))
}

fn string(
    index: usize,
    map: &Map<String, Value>,
    names: &[&str],
) -> Result<Option<String>, PayloadError> {
    match get(map, names) {
        None | Some((_, Value::Null)) => Ok(None),
        Some((_, Value::String(s))) => Ok(Some(s.clone())),
        Some((k, _)) => Err(field(index, format!("`{k}` must be a string"))),
    }
}

fn flag(index: usize, map: &Map<String, Value>, names: &[&str]) -> Result<bool, PayloadError> {
    match get(map, names) {
        None | Some((_, Value::Null)) => Ok(false),
        Some((_, Value::Bool(b))) => Ok(*b),
        Some((k, _)) => Err(field(index, format!("`{k}` must be true or false"))),
    }
}

fn count(
    index: usize,
    map: &Map<String, Value>,
    name: &str,
    min: u64,
) -> Result<Option<usize>, PayloadError> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v
            .as_u64()
            .filter(|&n| n >= min)
            .and_then(|n| usize::try_from(n).ok())
        {
            Some(n) => Ok(Some(n)),
            None => Err(field(
                index,
                format!("`{name}` must be a whole number from {min}"),
            )),
        },
    }
}

fn operation(
    index: usize,
    map: &Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<Operation, PayloadError> {
    let search = string(index, map, SEARCH)?
        .ok_or_else(|| field(index, "has no `search` (or `old_str`) field"))?;
    let replace = string(index, map, REPLACE)?.unwrap_or_default();
    let regex = flag(index, map, &["regex"])?;
    let ignore_case = flag(index, map, &["ignore_case"])?;
    let find = if regex || ignore_case {
        let source = if regex {
            search.clone()
        } else {
            regex::escape(&search)
        };
        let re = RegexBuilder::new(&source)
            .case_insensitive(ignore_case)
            .multi_line(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| field(index, format!("`search` is not a valid regex: {e}")))?;
        if regex {
            Find::Regex(re)
        } else {
            Find::IgnoreCase(re)
        }
    } else {
        Find::Text
    };
    let mut op = Operation::new(find, search, replace, 1);
    op.all = flag(index, map, ALL)?;
    op.expected = count(index, map, "expected_replacements", 1)?;
    op.scope = scope(index, map)?;
    op.if_match = string(index, map, &["if_match"])?.map(|s| s.trim().to_ascii_lowercase());
    op.path = string(index, map, PATH)?;
    note_unknown(index, map, notes);
    Ok(op)
}

fn scope(
    index: usize,
    map: &Map<String, Value>,
) -> Result<Option<std::ops::RangeInclusive<usize>>, PayloadError> {
    let start = count(index, map, "start_line", 1)?;
    let end = count(index, map, "end_line", 1)?;
    match (start, end) {
        (None, None) => Ok(None),
        (s, e) => {
            let (s, e) = (s.unwrap_or(1), e.unwrap_or(usize::MAX));
            if s > e {
                return Err(field(
                    index,
                    format!("`start_line` {s} is after `end_line` {e}"),
                ));
            }
            Ok(Some(s..=e))
        }
    }
}

fn note_unknown(index: usize, map: &Map<String, Value>, notes: &mut Vec<String>) {
    let known = |k: &str| {
        [SEARCH, REPLACE, ALL, KNOWN, PATH]
            .iter()
            .any(|set| set.contains(&k))
    };
    for key in map.keys().filter(|k| !known(k)) {
        notes.push(format!("operation {index}: unknown field `{key}` ignored"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_and_array_with_aliases() {
        let p = parse(r#"{"old_str": "a", "new_str": "b"}"#).unwrap();
        assert_eq!(
            (
                p.operations[0].search.as_str(),
                p.operations[0].replace.as_str()
            ),
            ("a", "b")
        );
        let p = parse(r#"[{"search": "a", "replace": "b"}, {"old_string": "c", "new_string": "d", "replace_all": true}]"#)
            .unwrap();
        assert_eq!(p.operations.len(), 2);
        assert!(p.operations[1].all);
    }

    #[test]
    fn missing_replace_deletes() {
        let p = parse(r#"{"search": "a"}"#).unwrap();
        assert_eq!(p.operations[0].replace, "");
    }

    #[test]
    fn every_option_is_read() {
        let p = parse(
            r#"{"search": "a(\\d)", "replace": "b$1", "regex": true, "ignore_case": true,
                "start_line": 2, "end_line": 4, "expected_replacements": 2, "if_match": "ABC"}"#,
        )
        .unwrap();
        let op = &p.operations[0];
        assert!(matches!(op.find, Find::Regex(_)));
        assert_eq!(op.scope, Some(2..=4));
        assert_eq!(op.expected, Some(2));
        assert_eq!(op.if_match.as_deref(), Some("abc"));
    }

    #[test]
    fn errors_name_the_object_and_field() {
        assert!(matches!(
            parse(r#"{"replace": "b"}"#),
            Err(PayloadError::Field { index: 1, .. })
        ));
        assert!(matches!(
            parse(r#"[{"search": "a"}, 3]"#),
            Err(PayloadError::Field { index: 2, .. })
        ));
        assert!(matches!(
            parse(r#"{"search": "a", "all": "yes"}"#),
            Err(PayloadError::Field { .. })
        ));
        assert!(matches!(
            parse(r#"{"search": "(", "regex": true}"#),
            Err(PayloadError::Field { .. })
        ));
        assert!(matches!(
            parse(r#"{"search": "a", "start_line": 0}"#),
            Err(PayloadError::Field { .. })
        ));
        assert!(matches!(
            parse(r#"{"search": "a", "start_line": 5, "end_line": 2}"#),
            Err(PayloadError::Field { .. })
        ));
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        match parse("{\n\"search\": \"a\",\n}") {
            Err(PayloadError::Json { line: 3, .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_fields_are_noted() {
        let p = parse(r#"{"search": "a", "file_path": "x", "colour": 1}"#).unwrap();
        assert_eq!(p.notes, ["operation 1: unknown field `colour` ignored"]);
        assert_eq!(p.operations[0].path.as_deref(), Some("x"));
    }
}
