//! JSON operations: one object or an array of objects.
//!
//! Field names follow the contract (`search`, `replace`, ...) and accept the
//! spellings agents' tool calls already use (`old_str`/`new_str`,
//! `old_string`/`new_string`, `replace_all`), so a tool call can be forwarded as
//! is. Edit tools' own argument objects are read too: blocks in `content`,
//! `diff` or `blockContent`, and Roo Code's search_and_replace arguments.

use regex::bytes::{Regex, RegexBuilder};
use serde_json::{Map, Value};

use super::tools::{self, REGEX_DFA_LIMIT, REGEX_SIZE_LIMIT, RooCall};
use super::{Find, Operation, Payload, PayloadError, markers, patch};

const SEARCH: &[&str] = &["search", "old_str", "old_string"];
const REPLACE: &[&str] = &["replace", "new_str", "new_string"];
const ALL: &[&str] = &["all", "replace_all"];
/// The file a tool call names: it selects the file in a multi-file payload and
/// must be the edited file otherwise.
const PATH: &[&str] = &["path", "file_path"];
const KNOWN: &[&str] = &[
    "command",
    "use_regex",
    "content",
    "diff",
    "blockContent",
    "regex",
    "ignore_case",
    "start_line",
    "end_line",
    "expected_replacements",
    "if_match",
    "syntax_check",
    "placeholder_check",
];

pub fn parse(text: &str) -> Result<Payload, PayloadError> {
    let mut notes = Vec::new();
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        // Line breaks and tabs typed into a JSON string (a payload written by
        // hand, a file's tabs pasted in) can only mean themselves.
        Err(e) if e.to_string().starts_with("control character") => {
            let value =
                serde_json::from_str(&escape_controls(text)).map_err(|_| json_error(text, &e))?;
            notes.push(CONTROLS_NOTE.to_owned());
            value
        }
        Err(e) => return Err(json_error(text, &e)),
    };
    let objects = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut payload = from_values(objects)?;
    payload.notes.splice(0..0, notes);
    Ok(payload)
}

/// Reads JSON values already parsed, each an edit, a list of edits' holder, or
/// a whole tool call.
pub fn from_values(objects: Vec<Value>) -> Result<Payload, PayloadError> {
    let mut payload = Payload::default();
    for (i, item) in objects.into_iter().enumerate() {
        let index = i + 1;
        let Value::Object(map) = item else {
            return Err(field(index, "is not an object"));
        };
        let mut ops = object(index, &map, &mut payload.notes)?;
        if off(
            index,
            &map,
            "syntax_check",
            "write the file even if it no longer parses",
        )? {
            ops.iter_mut().for_each(|op| op.syntax_off = true);
        }
        let kept = "write REPLACE lines that read as placeholders as they are";
        if off(index, &map, "placeholder_check", kept)? {
            ops.iter_mut().for_each(|op| op.placeholders_kept = true);
        }
        payload.operations.extend(ops);
    }
    Ok(payload)
}

/// `"syntax_check": "off"` writes the object's file even if it no longer
/// parses, `"placeholder_check": "off"` writes REPLACE lines that read as
/// placeholders as they are; `"on"` (the default) leaves the check as it is.
/// `does`: what `off` does, for the error of another value.
fn off(
    index: usize,
    map: &Map<String, Value>,
    name: &str,
    does: &str,
) -> Result<bool, PayloadError> {
    match string(index, map, &[name])?.as_deref() {
        None | Some("on") => Ok(false),
        Some("off") => Ok(true),
        Some(other) => Err(field(
            index,
            format!("`{name}` is `{other}`: it is `off` ({does}) or `on`"),
        )),
    }
}

const CONTROLS_NOTE: &str = "the JSON strings hold line breaks or tabs as they are (JSON wants them written `\\n` and `\\t`): read as those characters";

fn json_error(text: &str, e: &serde_json::Error) -> PayloadError {
    PayloadError::Json {
        line: e.line(),
        column: e.column(),
        message: format!(
            "{}{}",
            e.to_string().split(" at line ").next().unwrap_or_default(),
            comment_at(text, e.line(), e.column())
        ),
    }
}

/// `text` with the control characters inside its JSON strings escaped, as JSON
/// wants them; everything outside strings, and escapes already there, as sent.
fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let (mut inside, mut escaped) = (false, false);
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if inside => escaped = true,
            '"' => inside = !inside,
            '\n' if inside => {
                out.push_str("\\n");
                continue;
            }
            '\r' if inside => {
                out.push_str("\\r");
                continue;
            }
            '\t' if inside => {
                out.push_str("\\t");
                continue;
            }
            c if inside && c < ' ' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
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

/// A flag, as JSON `true`/`false` or as the strings some tools send.
fn flag(index: usize, map: &Map<String, Value>, names: &[&str]) -> Result<bool, PayloadError> {
    match get(map, names) {
        None | Some((_, Value::Null)) => Ok(false),
        Some((_, Value::Bool(b))) => Ok(*b),
        Some((_, Value::String(s))) if s.trim().eq_ignore_ascii_case("true") => Ok(true),
        Some((_, Value::String(s))) if s.trim().eq_ignore_ascii_case("false") => Ok(false),
        Some((k, _)) => Err(field(index, format!("`{k}` must be true or false"))),
    }
}

/// A whole number, as JSON or as the string some tools send (`"10"`).
fn count(
    index: usize,
    map: &Map<String, Value>,
    name: &str,
    min: u64,
) -> Result<Option<usize>, PayloadError> {
    let number = match map.get(name) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(v) => v.as_u64(),
    };
    match number
        .filter(|&n| n >= min)
        .and_then(|n| usize::try_from(n).ok())
    {
        Some(n) => Ok(Some(n)),
        None => Err(field(
            index,
            format!("`{name}` must be a whole number from {min}"),
        )),
    }
}

/// The operations of one object: a whole tool call, an edit tool's arguments, or
/// our own operation.
fn object(
    index: usize,
    map: &Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<Vec<Operation>, PayloadError> {
    if let Some(patch) = patch_input(map)? {
        notes.extend(patch.notes);
        notes.push(format!(
            "operation {index}: read the patch in the apply_patch call's `input`"
        ));
        return Ok(patch.operations);
    }
    if let Some((name, args)) = envelope(index, map)? {
        let ops = object(index, &args, notes)?;
        notes.push(format!(
            "operation {index}: read the arguments of the tool call `{name}`"
        ));
        return Ok(ops);
    }
    if let Some(op) = command(index, map)? {
        if op.insert_after.is_none() {
            notes.push(format!(
                "operation {index}: read `create` as an empty SEARCH: it creates the file, and fails if the file has content"
            ));
        }
        return Ok(vec![op]);
    }
    if let Some(ops) = multi_edit(index, map, notes)? {
        return Ok(ops);
    }
    let ops = match block_text(index, map, notes)? {
        Some(ops) => ops,
        None if is_roo(map) => vec![roo(index, map, notes)?],
        None => {
            let op = operation(index, map)?;
            if map.contains_key("old_string") && map.contains_key("expected_replacements") {
                note_form(notes, tools::DESKTOP_COMMANDER);
            }
            vec![op]
        }
    };
    note_unknown(index, map, notes);
    Ok(ops)
}

/// An apply_patch call's arguments (`{"input": "*** Begin Patch ..."}`): the
/// patch it carries, which is no JSON to unwrap further.
fn patch_input(map: &Map<String, Value>) -> Result<Option<Payload>, PayloadError> {
    match map.get("input") {
        Some(Value::String(text)) if patch::detect(text) => patch::parse(text).map(Some),
        _ => Ok(None),
    }
}

/// A tool call's name and its arguments.
type Call = (String, Map<String, Value>);

/// A whole tool call as agents log and forward it (Anthropic's `input`, OpenAI's
/// `arguments` or `function.arguments`, an object or a JSON string): its name and
/// arguments. An object that holds edit fields itself is no envelope.
fn envelope(index: usize, map: &Map<String, Value>) -> Result<Option<Call>, PayloadError> {
    if get(map, SEARCH).is_some() || get(map, &["content", "diff", "blockContent"]).is_some() {
        return Ok(None);
    }
    let (call, args) = match (map.get("function"), get(map, &["input", "arguments"])) {
        (Some(Value::Object(f)), _) if f.contains_key("arguments") => (f, &f["arguments"]),
        (_, Some((_, args))) => (map, args),
        _ => return Ok(None),
    };
    let args = match args {
        Value::Object(a) => a.clone(),
        Value::String(s) => match serde_json::from_str(s) {
            Ok(Value::Object(a)) => a,
            _ => {
                return Err(field(
                    index,
                    "the tool call's `arguments` is not a JSON object",
                ));
            }
        },
        _ => return Ok(None),
    };
    let name = match call.get("name") {
        Some(Value::String(n)) => n.clone(),
        _ => "unnamed".to_owned(),
    };
    Ok(Some((name, args)))
}

/// The `command` of Anthropic's text editor tool: `str_replace` edits, and
/// `create` is read as an empty SEARCH with `file_text` as REPLACE, so it creates
/// a missing or empty file and fails on one with content (where the tool would
/// overwrite it: a transaction never discards a file's content unasked).
fn command(index: usize, map: &Map<String, Value>) -> Result<Option<Operation>, PayloadError> {
    match map.get("command") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) if c == "str_replace" => Ok(None),
        Some(Value::String(c)) if c == "create" => {
            let text = string(index, map, &["file_text"])?.ok_or_else(|| {
                field(index, "`command` is `create`, but there is no `file_text`")
            })?;
            let mut op = Operation::new(Find::Text, String::new(), text, 1);
            op.path = string(index, map, PATH)?;
            Ok(Some(op))
        }
        Some(Value::String(c)) if c == "insert" => insert(index, map).map(Some),
        Some(Value::String(c)) => Err(field(
            index,
            format!(
                "`command` is `{c}`: only `str_replace` (with `old_str` and `new_str`), `insert` (with `insert_line` and `new_str`) and `create` (with `file_text`) edit here"
            ),
        )),
        Some(_) => Err(field(index, "`command` must be a string")),
    }
}

/// The text editor tool's `insert`: `new_str` after line `insert_line` (0: at
/// the top of the file), as the tool defines it.
fn insert(index: usize, map: &Map<String, Value>) -> Result<Operation, PayloadError> {
    let text = string(index, map, &["new_str"])?
        .ok_or_else(|| field(index, "`command` is `insert`, but there is no `new_str`"))?;
    // A number as JSON or as a string, as `count` reads the other numbers.
    let line = count(index, map, "insert_line", 0)
        .ok()
        .flatten()
        .ok_or_else(|| {
            field(
                index,
                "`command` is `insert`: `insert_line` must be a line number (0 inserts at the top)",
            )
        })?;
    let mut op = Operation::new(Find::Lines, String::new(), text, 1);
    op.insert_after = Some(line);
    op.path = string(index, map, PATH)?;
    Ok(op)
}

fn note_form(notes: &mut Vec<String>, form: &str) {
    let note = tools::form_note(form, "the JSON arguments");
    if !notes.contains(&note) {
        notes.push(note);
    }
}

/// Blocks carried in a string field: Vibe's `content`, Cline's (and Roo Code's
/// apply_diff) `diff`, Desktop Commander's `blockContent` (its first line the path).
fn block_text(
    index: usize,
    map: &Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<Option<Vec<Operation>>, PayloadError> {
    if get(map, SEARCH).is_some() {
        return Ok(None);
    }
    let Some((key, form)) = [
        ("blockContent", tools::DESKTOP_COMMANDER_BLOCK),
        ("content", tools::VIBE),
        ("diff", tools::DIFF_ARGS),
    ]
    .into_iter()
    .find(|(k, _)| map.contains_key(*k)) else {
        return Ok(None);
    };
    let text = string(index, map, &[key])?.unwrap_or_default();
    let (path, blocks) = match key {
        "blockContent" => match text.split_once('\n') {
            Some((first, rest)) if !markers::opens_block(first) => {
                (Some(first.trim().to_owned()), rest)
            }
            _ => (None, text.as_str()),
        },
        _ => (string(index, map, PATH)?, text.as_str()),
    };
    let mut ops = markers::parse(blocks)
        .map_err(|e| field(index, format!("`{key}`: {e}")))?
        .operations;
    if ops.is_empty() {
        return Err(field(
            index,
            format!(
                "`{key}` holds no SEARCH/REPLACE block (a whole new content is not an edit: write the file itself)"
            ),
        ));
    }
    for op in &mut ops {
        op.label = None;
        op.path = path.clone();
    }
    note_form(notes, form);
    Ok(Some(ops))
}

/// A MultiEdit call's arguments (`{"file_path", "edits": [{"old_string", ...}]}`):
/// its edits, in order, on the file the call names.
fn multi_edit(
    index: usize,
    map: &Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<Option<Vec<Operation>>, PayloadError> {
    if get(map, SEARCH).is_some() {
        return Ok(None);
    }
    let Some(edits) = map.get("edits") else {
        return Ok(None);
    };
    let Value::Array(edits) = edits else {
        return Err(field(index, "`edits` is not an array of edits"));
    };
    if edits.is_empty() {
        return Err(field(index, "`edits` is empty"));
    }
    let path = string(index, map, PATH)?;
    let mut ops = Vec::with_capacity(edits.len());
    for (k, edit) in edits.iter().enumerate() {
        let in_edit = |e: PayloadError| match e {
            PayloadError::Field { message, .. } => {
                field(index, format!("edit {} of `edits` {message}", k + 1))
            }
            other => other,
        };
        let Value::Object(edit) = edit else {
            return Err(in_edit(field(index, "is not an object")));
        };
        let mut op = operation(index, edit).map_err(in_edit)?;
        op.path = op.path.or_else(|| path.clone());
        ops.push(op);
    }
    note_form(notes, tools::MULTI_EDIT);
    Ok(Some(ops))
}

/// What to add to a JSON error found at a comment, as agents write them into
/// JSON (serde says only that a key or value was expected there).
fn comment_at(text: &str, line: usize, column: usize) -> &'static str {
    let at = text.lines().nth(line.saturating_sub(1)).and_then(|l| {
        l.char_indices()
            .nth(column.saturating_sub(1))
            .map(|(i, _)| &l[i..])
    });
    match at {
        Some(rest) if rest.starts_with("//") || rest.starts_with("/*") => {
            " (JSON has no comments: remove it)"
        }
        _ => "",
    }
}

/// Roo Code's search_and_replace arguments: `use_regex`, or its options sent as strings.
fn is_roo(map: &Map<String, Value>) -> bool {
    let as_string = |k: &str| matches!(map.get(k), Some(Value::String(_)));
    map.contains_key("use_regex")
        || ["ignore_case", "start_line", "end_line"]
            .iter()
            .any(|k| as_string(k))
}

fn roo(
    index: usize,
    map: &Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<Operation, PayloadError> {
    let search =
        string(index, map, SEARCH)?.ok_or_else(|| field(index, "has no `search` field"))?;
    let replace = string(index, map, REPLACE)?.unwrap_or_default();
    let call = RooCall {
        search: &search,
        replace: &replace,
        regex: flag(index, map, &["use_regex", "regex"])?,
        ignore_case: flag(index, map, &["ignore_case"])?,
        start: count(index, map, "start_line", 0)?.map(|n| n.max(1)),
        end: count(index, map, "end_line", 0)?.map(|n| n.max(1)),
    };
    let mut op = tools::roo_operation(&call, 1).map_err(|e| field(index, e.to_string()))?;
    op.path = string(index, map, PATH)?;
    note_form(notes, tools::ROO_SEARCH_AND_REPLACE);
    Ok(op)
}

fn operation(index: usize, map: &Map<String, Value>) -> Result<Operation, PayloadError> {
    let search = string(index, map, SEARCH)?
        .ok_or_else(|| field(index, "has no `search` (or `old_str`) field"))?;
    let replace = replacement(index, map)?;
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
            .dfa_size_limit(REGEX_DFA_LIMIT)
            .build()
            .map_err(|e| field(index, format!("`search` is not a valid regex: {e}")))?;
        if regex {
            if let Some(problem) = missing_group(&replace, &re) {
                return Err(field(index, problem));
            }
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
    op.if_match = match string(index, map, &["if_match"])? {
        Some(s) => Some(sha256_field(index, &s)?),
        None => None,
    };
    op.path = string(index, map, PATH)?;
    Ok(op)
}

/// Why `replace` cannot be a regex replacement for `re`: a `$` reference to a group
/// `re` lacks. The regex crate expands such a group to nothing and reads `$1x` as
/// the group named `1x`, so an agent's `$1x` (meant as group 1, then `x`) would
/// silently drop text from a reported success.
fn missing_group(replace: &str, re: &Regex) -> Option<String> {
    let groups = re.captures_len();
    let names: Vec<&str> = re.capture_names().flatten().collect();
    let mut at = 0;
    while let Some(i) = replace[at..].find('$').map(|i| at + i) {
        let rest = &replace[i + 1..];
        let (name, used) = if rest.starts_with('$') {
            ("", 1)
        } else if let Some(inner) = rest.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let len = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            (&rest[..len], len)
        };
        at = i + 1 + used;
        let exists = match name.parse::<usize>() {
            _ if name.is_empty() => true,
            Ok(n) => n < groups,
            Err(_) => names.contains(&name),
        };
        if exists {
            continue;
        }
        let written = &replace[i..at];
        let digits = name.bytes().take_while(u8::is_ascii_digit).count();
        let advice = if digits > 0
            && digits < name.len()
            && name[..digits].parse::<usize>().is_ok_and(|n| n < groups)
        {
            format!(
                ": the regex crate reads `{written}` as one group name; write `${{{}}}{}` for group {} followed by `{}`",
                &name[..digits],
                &name[digits..],
                &name[..digits],
                &name[digits..]
            )
        } else {
            format!(
                "; it has {} numbered group(s){}",
                groups - 1,
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" and the named group(s) {}", names.join(", "))
                }
            )
        };
        return Some(format!(
            "`replace` refers to `{written}`, a group the regex does not have, which would be replaced by nothing{advice} (`$$` writes a `$`)"
        ));
    }
    None
}

/// An `if_match` value: a hex SHA-256, lower-cased, `sha256:` prefix allowed.
/// Anything else (a git object id, an mtime) could never hold, and reporting it
/// as `stale` would send the agent to re-read the file and fail again.
fn sha256_field(index: usize, value: &str) -> Result<String, PayloadError> {
    let v = value.trim();
    let hex = v.strip_prefix("sha256:").unwrap_or(v).to_ascii_lowercase();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(hex);
    }
    Err(field(
        index,
        format!(
            "`if_match` is `{v}`, not a SHA-256: it must be the 64 hex digits of the file's SHA-256 (as `sha256sum` prints it, or F.status's sha256)"
        ),
    ))
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

/// The new text of an operation. No `replace` field at all deletes SEARCH,
/// as tools' optional `new_str` does; but not when a text field of another
/// name is there (`replacement`, `new`): that is the new text misnamed, and taking
/// it for a deletion would destroy what SEARCH matched, reported as a success.
/// A `null` one is refused alike: nothing says whether it means "".
fn replacement(index: usize, map: &Map<String, Value>) -> Result<String, PayloadError> {
    if let Some((k, Value::Null)) = get(map, REPLACE) {
        return Err(field(
            index,
            format!("`{k}` is null: give the new text as a string (\"\" deletes SEARCH)"),
        ));
    }
    if let Some(text) = string(index, map, REPLACE)? {
        return Ok(text);
    }
    // Text fields other tools' calls use (`content`, `diff`), which a
    // search/replace object does not read, are as misnamed as unknown ones.
    let foreign = ["content", "diff", "blockContent"];
    let named = map.keys().filter(|k| foreign.contains(&k.as_str()));
    match unknown(map)
        .chain(named)
        .find(|k| map[k.as_str()].is_string())
    {
        Some(key) => Err(field(
            index,
            format!(
                "has no `replace` (or `new_str`) field, and `{key}` is not one of its names: \
                 name the new text `replace` (\"\" deletes SEARCH)"
            ),
        )),
        None => Ok(String::new()),
    }
}

/// The fields of `map` no operation reads.
fn unknown(map: &Map<String, Value>) -> impl Iterator<Item = &String> {
    let known = |k: &str| {
        [SEARCH, REPLACE, ALL, KNOWN, PATH]
            .iter()
            .any(|set| set.contains(&k))
    };
    map.keys().filter(move |k| !known(k))
}

fn note_unknown(index: usize, map: &Map<String, Value>, notes: &mut Vec<String>) {
    for key in unknown(map) {
        notes.push(format!("operation {index}: unknown field `{key}` ignored"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misnamed_or_null_replacement_is_refused_not_taken_for_a_deletion() {
        for json in [
            r#"{"search": "foo(1)", "replacement": "bar(1)"}"#,
            r#"{"search": "b", "replace": null}"#,
            r#"{"edits": [{"old_string": "a", "new_string": "A"}, {"old_string": "b", "new": "B"}]}"#,
            r#"{"search": "line3", "content": "X"}"#,
            r#"{"old_string": "line3", "diff": "X"}"#,
        ] {
            let err = parse(json).unwrap_err().to_string();
            assert!(err.contains("deletes SEARCH"), "{json}: {err}");
        }
        let p = parse(r#"{"search": "gone"}"#).unwrap();
        assert_eq!(
            p.operations[0].replace, "",
            "no replacement field at all deletes"
        );
    }

    #[test]
    fn a_whole_tool_call_is_read_by_its_arguments() {
        let args = r#"{"command": "str_replace", "path": "a.py", "old_str": "x", "new_str": "y"}"#;
        for call in [
            format!(
                r#"{{"type": "tool_use", "id": "t1", "name": "str_replace_based_edit_tool", "input": {args}}}"#
            ),
            format!(
                r#"{{"name": "edit_file", "arguments": {}}}"#,
                Value::from(args)
            ),
            format!(
                r#"{{"type": "function", "function": {{"name": "edit_file", "arguments": {args}}}}}"#
            ),
        ] {
            let p = parse(&call).unwrap();
            let op = &p.operations[0];
            assert_eq!(
                (op.search.as_str(), op.replace.as_str()),
                ("x", "y"),
                "{call}"
            );
            assert_eq!(op.path.as_deref(), Some("a.py"));
            assert!(
                p.notes
                    .iter()
                    .any(|n| n.contains("arguments of the tool call")),
                "{:?}",
                p.notes
            );
            assert!(
                !p.notes.iter().any(|n| n.contains("unknown field")),
                "{:?}",
                p.notes
            );
        }
    }

    #[test]
    fn a_multi_edit_call_is_read_as_its_edits_in_order() {
        let call = r#"{"file_path": "/w/a.py", "edits": [
            {"old_string": "a", "new_string": "b"},
            {"old_string": "c", "new_string": "d", "replace_all": true}]}"#;
        let p = parse(call).unwrap();
        let ops: Vec<_> = p
            .operations
            .iter()
            .map(|o| {
                (
                    o.search.as_str(),
                    o.replace.as_str(),
                    o.all,
                    o.path.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            [
                ("a", "b", false, Some("/w/a.py")),
                ("c", "d", true, Some("/w/a.py"))
            ]
        );
        assert!(
            p.notes.iter().any(|n| n.contains("MultiEdit")),
            "{:?}",
            p.notes
        );
        let err = parse(r#"{"edits": [{"old_string": "a"}, {"new_string": "d"}]}"#).unwrap_err();
        assert!(err.to_string().contains("edit 2 of `edits`"), "{err}");
    }

    #[test]
    fn an_apply_patch_call_is_read_as_the_patch_in_its_input() {
        let patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n";
        let args = serde_json::json!({ "input": patch }).to_string();
        let call = serde_json::json!({ "name": "apply_patch", "arguments": args }).to_string();
        for text in [args, call] {
            let p = parse(&text).unwrap();
            let ops: Vec<_> = p
                .operations
                .iter()
                .map(|o| (o.search.as_str(), o.replace.as_str(), o.label.as_deref()))
                .collect();
            assert_eq!(ops, [("x = 1\n", "x = 2\n", Some("a.py"))], "{text}");
        }
    }

    #[test]
    fn an_editor_command_other_than_str_replace_is_refused_by_name() {
        let err = parse(r#"{"command": "view", "path": "a.py"}"#).unwrap_err();
        assert!(err.to_string().contains("`command` is `view`"), "{err}");
        let err =
            parse(r#"{"command": "insert", "path": "a.py", "insert_line": -1, "new_str": "x"}"#)
                .unwrap_err();
        assert!(err.to_string().contains("`insert_line` must be"), "{err}");
    }

    #[test]
    fn an_insert_line_sent_as_a_string_is_read_as_the_other_numbers_are() {
        let p =
            parse(r#"{"command": "insert", "path": "a.py", "insert_line": "4", "new_str": "x"}"#)
                .unwrap();
        assert_eq!(p.operations[0].insert_after, Some(4));
        let err =
            parse(r#"{"command": "insert", "insert_line": "four", "new_str": "x"}"#).unwrap_err();
        assert!(err.to_string().contains("`insert_line` must be"), "{err}");
    }

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
            &r#"{"search": "a(\\d)", "replace": "b$1", "regex": true, "ignore_case": true,
                "start_line": 2, "end_line": 4, "expected_replacements": 2, "if_match": "ABC"}"#
                .replace("ABC", &"AB".repeat(32)),
        )
        .unwrap();
        let op = &p.operations[0];
        assert!(matches!(op.find, Find::Regex(_)));
        assert_eq!(op.scope, Some(2..=4));
        assert_eq!(op.expected, Some(2));
        assert_eq!(op.if_match, Some("ab".repeat(32)));
    }

    #[test]
    fn an_if_match_that_is_no_sha256_is_refused_as_such() {
        for bad in [
            "abc",
            "0123456789abcdef0123456789abcdef01234567",
            "1700000000",
        ] {
            let json = format!(r#"{{"search": "a", "replace": "b", "if_match": "{bad}"}}"#);
            let err = parse(&json).unwrap_err().to_string();
            assert!(err.contains("64 hex digits"), "{bad}: {err}");
        }
        let prefixed = format!(
            r#"{{"search": "a", "if_match": "sha256:{}"}}"#,
            "0f".repeat(32)
        );
        let p = parse(&prefixed).unwrap();
        assert_eq!(p.operations[0].if_match, Some("0f".repeat(32)));
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

    #[test]
    fn tool_arguments_with_blocks_carry_their_path_and_form() {
        let vibe = r#"{"file_path": "a b.py", "content": "<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nz\n=======\nw\n>>>>>>> REPLACE"}"#;
        let p = parse(vibe).unwrap();
        assert_eq!(p.operations.len(), 2);
        assert!(
            p.operations
                .iter()
                .all(|o| o.path.as_deref() == Some("a b.py"))
        );
        assert!(p.notes[0].contains("Mistral Vibe"), "{:?}", p.notes);
        let cline =
            r#"{"path": "src/x.ts", "diff": "------- SEARCH\nx\n=======\ny\n+++++++ REPLACE"}"#;
        let p = parse(cline).unwrap();
        assert_eq!(p.operations[0].path.as_deref(), Some("src/x.ts"));
        assert!(p.notes[0].contains("Cline"), "{:?}", p.notes);
        let dc =
            r#"{"blockContent": "/w/src/x.ts\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE"}"#;
        let p = parse(dc).unwrap();
        assert_eq!(p.operations[0].path.as_deref(), Some("/w/src/x.ts"));
        assert_eq!(p.operations[0].search, "x\n");
        assert!(p.notes[0].contains("Desktop Commander"), "{:?}", p.notes);
        let bare = r#"{"blockContent": "<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE"}"#;
        assert_eq!(parse(bare).unwrap().operations[0].path, None);
        assert!(matches!(
            parse(r#"{"path": "a", "content": "just a whole file"}"#),
            Err(PayloadError::Field { index: 1, .. })
        ));
    }

    #[test]
    fn roo_arguments_replace_every_match_and_take_strings() {
        let p = parse(
            r#"{"path": "a.js", "search": "v(\\d)", "replace": "w$1", "use_regex": "true",
                "ignore_case": "false", "start_line": "10", "end_line": 20}"#,
        )
        .unwrap();
        let op = &p.operations[0];
        assert!(matches!(op.find, Find::Regex(_)) && op.all);
        assert_eq!(op.replace, "w${1}");
        assert_eq!(op.scope, Some(10..=20));
        assert!(
            p.notes[0].contains("Roo Code's search_and_replace"),
            "{:?}",
            p.notes
        );
        let p = parse(r#"{"path": "a.js", "search": "x", "replace": "y", "use_regex": false}"#)
            .unwrap();
        assert!(matches!(p.operations[0].find, Find::Text) && p.operations[0].all);
    }

    #[test]
    fn desktop_commander_counts_are_named() {
        let p = parse(r#"{"file_path": "/w/a", "old_string": "x", "new_string": "y", "expected_replacements": 2}"#)
            .unwrap();
        assert_eq!(p.operations[0].expected, Some(2));
        assert!(p.notes[0].contains("Desktop Commander"), "{:?}", p.notes);
        // Gemini CLI's replace sends the same arguments (and an `instruction`).
        assert!(p.notes[0].contains("Gemini CLI's replace"), "{:?}", p.notes);
    }

    #[test]
    fn a_text_editor_create_command_is_an_empty_search_with_its_file_text() {
        let p =
            parse(r#"{"command": "create", "path": "/w/new.py", "file_text": "A = 1\n"}"#).unwrap();
        assert_eq!(p.operations[0].search, "");
        assert_eq!(p.operations[0].replace, "A = 1\n");
        assert_eq!(p.operations[0].path.as_deref(), Some("/w/new.py"));
        assert!(p.notes[0].contains("create"), "{:?}", p.notes);
        assert!(parse(r#"{"command": "create", "path": "a"}"#).is_err());
        assert!(parse(r#"{"command": "view", "path": "a"}"#).is_err());
    }
}
