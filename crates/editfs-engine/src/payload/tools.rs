//! Other edit tools' calls, read as their agents send them: the XML calls of
//! Roo Code (`search_and_replace`, `apply_diff`) and Cline (`replace_in_file`),
//! and Roo Code's search-and-replace rule (every match, JavaScript replacement
//! tokens), which its JSON arguments share.
//!
//! A call read in a tool's form leaves a note in the report that names the tool
//! and, where our rules differ from that tool's, how.

use std::borrow::Cow;

use regex::bytes::{Regex, RegexBuilder};

use super::{Find, Operation, Payload, PayloadError, markers};

/// Compiled regexes are capped so a hostile pattern cannot take the daemon's
/// memory, nor its time: matching costs up to the program's size per byte of
/// the file. 1 MiB takes every pattern an edit needs (a Unicode `\w{100}`
/// compiles to a few hundred KiB).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The cache of a regex's lazy automaton, per pattern: past it the automaton
/// gives way to slower matching, never to more memory.
pub const REGEX_DFA_LIMIT: usize = 2 << 20;

/// The XML calls that are read, by their tag.
const CALLS: &[&str] = &["search_and_replace", "replace_in_file", "apply_diff"];
const PARAMS: &[&str] = &[
    "path",
    "diff",
    "search",
    "replace",
    "use_regex",
    "ignore_case",
    "start_line",
    "end_line",
];

pub const ROO_SEARCH_AND_REPLACE: &str = "Roo Code's search_and_replace: literal unless use_regex, \
every match replaced (within start_line-end_line), JavaScript replacement tokens ($1, $&, $<name>, \
$$); unlike Roo Code, a search that matches nothing fails instead of reporting no change, and ^ and \
$ match at every line";
pub const CLINE: &str = "Cline's replace_in_file; unlike Cline, which takes the first of several \
matches, a SEARCH found more than once fails as ambiguous (add lines or a :start_line: hint), and \
blocks need not follow the file's order";
pub const ROO_APPLY_DIFF: &str = "Roo Code's apply_diff; unlike Roo Code, a block that does not \
apply fails the whole transaction (nothing is written) instead of being skipped";
pub const DIFF_ARGS: &str = "a replace_in_file (Cline) or apply_diff (Roo Code) call; unlike \
Cline, which takes the first of several matches, a SEARCH found more than once fails as ambiguous, \
and unlike Roo Code, a block that does not apply fails the whole transaction";
pub const VIBE: &str = "Mistral Vibe's search_replace; unlike Vibe, which replaces the first of \
several matches with a warning, a SEARCH found more than once fails as ambiguous";
pub const DESKTOP_COMMANDER: &str = "Desktop Commander's edit_block or Gemini CLI's replace \
(the same arguments): expected_replacements must be the number of matches; unlike Desktop \
Commander, which only reports a near match, a near match that the tolerance ladder finds unique is \
applied, with a warning";
pub const MULTI_EDIT: &str = "a MultiEdit call; as there, the edits run in order, each on the \
result of the one before, and apply all or none; a SEARCH found more than once fails as ambiguous \
unless that edit sets replace_all";
pub const DESKTOP_COMMANDER_BLOCK: &str = "Desktop Commander's edit_block (blockContent); unlike \
Desktop Commander, which replaced the first of several matches, a SEARCH found more than once fails \
as ambiguous";

/// The note that says which tool's form was read, and how.
pub fn form_note(form: &str, how: &str) -> String {
    format!("read as {how} of {form}")
}

/// Reads the payload as XML tool calls if it is one: a known call's opening tag
/// starts a line before any marker block does.
pub fn parse_xml(text: &str) -> Option<Result<Payload, PayloadError>> {
    for line in text.lines() {
        let t = line.trim_start();
        if markers::opens_block(t) {
            return None;
        }
        if CALLS.iter().any(|c| opening(t, c)) {
            return Some(read_calls(text));
        }
    }
    None
}

fn opening(text: &str, call: &str) -> bool {
    text.strip_prefix('<')
        .and_then(|t| t.strip_prefix(call))
        .is_some_and(|t| t.starts_with('>'))
}

/// One parameter of a call: its value, CDATA sections unwrapped and trimmed as
/// the tools trim it, and the byte offset where that value starts.
struct Param<'a> {
    name: &'static str,
    value: Cow<'a, str>,
    at: usize,
}

/// How a CDATA section opens and closes. Agents wrap values in one so that the
/// `<` and `&` of code need no escaping; the wrapper is XML's, never the value's.
const CDATA_OPEN: &str = "<![CDATA[";
const CDATA_CLOSE: &str = "]]>";

fn read_calls(text: &str) -> Result<Payload, PayloadError> {
    let mut payload = Payload::default();
    let mut at = 0;
    while let Some((start, call)) = next_call(text, at) {
        let (params, end) = read_params(text, start + call.len() + 2, call);
        let line = line_of(text, start);
        let (ops, form) = call_operations(call, &params, text, line)?;
        payload.operations.extend(ops);
        let note = form_note(form, "the XML call");
        if !payload.notes.contains(&note) {
            payload.notes.push(note);
        }
        at = end;
    }
    Ok(payload)
}

/// The next call's opening tag at or after `from`: its offset and name.
fn next_call(text: &str, from: usize) -> Option<(usize, &'static str)> {
    CALLS
        .iter()
        .filter_map(|c| text[from..].find(&format!("<{c}>")).map(|i| (from + i, *c)))
        .min_by_key(|(i, _)| *i)
}

/// The parameters of the call whose body starts at `from`, and where the call
/// ends. A call cut off (no closing tag) runs to the end of the text, as the
/// tools read a call that was still streaming.
fn read_params<'a>(text: &'a str, from: usize, call: &str) -> (Vec<Param<'a>>, usize) {
    let end_tag = format!("</{call}>");
    let mut params = Vec::new();
    let mut at = from;
    while let Some(lt) = text[at..].find('<') {
        let tag = at + lt;
        let tail = &text[tag..];
        if tail.starts_with(&end_tag) {
            return (params, tag + end_tag.len());
        }
        let Some(name) = PARAMS.iter().find(|p| opening(tail, p)) else {
            at = tag + 1;
            continue;
        };
        let start = tag + name.len() + 2;
        let close = format!("</{name}>");
        let stop = value_end(text, start, &close);
        let raw = &text[start..stop];
        params.push(Param {
            name,
            value: trim(char_data(raw)),
            at: start + lead(raw),
        });
        at = (stop + close.len()).min(text.len());
    }
    (params, text.len())
}

/// Where the value starting at `from` ends: at its closing tag, looked for
/// outside CDATA sections (one may well hold `</replace>`), or at the end of
/// the text for a call cut off.
pub(super) fn value_end(text: &str, from: usize, close: &str) -> usize {
    let mut at = from;
    loop {
        let rest = &text[at..];
        let Some(end) = rest.find(close) else {
            return text.len();
        };
        match rest[..end].find(CDATA_OPEN) {
            None => return at + end,
            Some(open) => {
                let body = at + open + CDATA_OPEN.len();
                match text[body..].find(CDATA_CLOSE) {
                    Some(i) => at = body + i + CDATA_CLOSE.len(),
                    None => return text.len(),
                }
            }
        }
    }
}

/// A value's text with its CDATA sections unwrapped (several in a row, as
/// writers split one around a `]]>` it holds, join up); text outside them is
/// kept as it is.
pub(super) fn char_data(raw: &str) -> Cow<'_, str> {
    if !raw.contains(CDATA_OPEN) {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(open) = rest.find(CDATA_OPEN) {
        out.push_str(&rest[..open]);
        let body = &rest[open + CDATA_OPEN.len()..];
        let end = body.find(CDATA_CLOSE).unwrap_or(body.len());
        out.push_str(&body[..end]);
        rest = body.get(end + CDATA_CLOSE.len()..).unwrap_or_default();
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// A value trimmed, as the tools trim theirs (inside a CDATA section too).
fn trim(value: Cow<'_, str>) -> Cow<'_, str> {
    match value {
        Cow::Borrowed(v) => Cow::Borrowed(v.trim()),
        Cow::Owned(v) => Cow::Owned(v.trim().to_owned()),
    }
}

/// How many bytes of `raw` come before its value's first character: blank
/// space and the openers of CDATA sections.
fn lead(raw: &str) -> usize {
    let mut rest = raw.trim_start();
    while let Some(body) = rest.strip_prefix(CDATA_OPEN) {
        rest = body.trim_start();
    }
    raw.len() - rest.len()
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

fn call_operations(
    call: &str,
    params: &[Param<'_>],
    text: &str,
    line: usize,
) -> Result<(Vec<Operation>, &'static str), PayloadError> {
    let get = |name: &str| params.iter().find(|p| p.name == name);
    let missing = |name: &str| PayloadError::Structure {
        line,
        found: format!("a <{call}> call without <{name}>"),
        expected: format!("<{name}>…</{name}> inside the call"),
    };
    let path = get("path")
        .ok_or_else(|| missing("path"))?
        .value
        .to_string();
    if call == "search_and_replace" {
        let search = &get("search").ok_or_else(|| missing("search"))?.value;
        let replace = &get("replace").ok_or_else(|| missing("replace"))?.value;
        let invalid = |e: BadCall| PayloadError::Structure {
            line,
            found: format!("in the <{call}> call, {e}"),
            expected: "a call as Roo Code documents it".into(),
        };
        let flag = |name: &str| get(name).map_or(Ok(false), |p| xml_flag(name, &p.value));
        let number = |name: &str| get(name).map_or(Ok(None), |p| xml_number(name, &p.value));
        let call = RooCall {
            search,
            replace,
            regex: flag("use_regex").map_err(invalid)?,
            ignore_case: flag("ignore_case").map_err(invalid)?,
            start: number("start_line").map_err(invalid)?,
            end: number("end_line").map_err(invalid)?,
        };
        let mut op = roo_operation(&call, line).map_err(invalid)?;
        op.path = Some(path);
        return Ok((vec![op], ROO_SEARCH_AND_REPLACE));
    }
    let diff = get("diff").ok_or_else(|| missing("diff"))?;
    // Read in place: the lines before it as blank lines, so every line number
    // a report gives (in errors too) is the payload's own.
    let in_place = "\n".repeat(line_of(text, diff.at) - 1) + &diff.value;
    let mut ops = markers::parse(&in_place)?.operations;
    if ops.is_empty() {
        return Err(PayloadError::Structure {
            line,
            found: format!("the <diff> of the <{call}> call holds no SEARCH/REPLACE block"),
            expected: "------- SEARCH, the lines to find, =======, the new lines, +++++++ REPLACE"
                .into(),
        });
    }
    for op in &mut ops {
        op.label = None;
        op.path = Some(path.clone());
    }
    let form = match call {
        "apply_diff" => ROO_APPLY_DIFF,
        _ => CLINE,
    };
    Ok((ops, form))
}

/// Roo Code reads `true` as true and anything else as false; a word that is
/// neither `true` nor `false` is more likely a mistake than a no.
fn xml_flag(name: &str, value: &str) -> Result<bool, BadCall> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" | "" => Ok(false),
        _ => Err(BadCall::Flag {
            name: name.to_owned(),
            value: value.to_owned(),
        }),
    }
}

fn xml_number(name: &str, value: &str) -> Result<Option<usize>, BadCall> {
    match value.parse::<usize>() {
        Ok(n) => Ok(Some(n.max(1))),
        Err(_) if value.is_empty() => Ok(None),
        Err(_) => Err(BadCall::Number {
            name: name.to_owned(),
            value: value.to_owned(),
        }),
    }
}

/// Why a Roo Code search_and_replace call cannot be run as it was written.
#[derive(Debug, thiserror::Error)]
pub enum BadCall {
    #[error("<{name}> is {value:?}; expected true or false")]
    Flag { name: String, value: String },
    #[error("<{name}> is {value:?}; expected a line number")]
    Number { name: String, value: String },
    #[error("the search is empty")]
    EmptySearch,
    #[error("the search is not a valid regex: {0}")]
    Regex(regex::Error),
    #[error("start_line {start} is after end_line {end}")]
    Backwards { start: usize, end: usize },
}

/// A Roo Code search_and_replace call, from XML or JSON.
pub struct RooCall<'a> {
    pub search: &'a str,
    pub replace: &'a str,
    pub regex: bool,
    pub ignore_case: bool,
    pub start: Option<usize>,
    pub end: Option<usize>,
}

/// The operation for a Roo Code search_and_replace call: every match in scope
/// is replaced, and the replacement's `$` tokens mean what JavaScript's
/// `String.replace` makes of them.
pub fn roo_operation(call: &RooCall<'_>, line: usize) -> Result<Operation, BadCall> {
    if call.search.is_empty() {
        return Err(BadCall::EmptySearch);
    }
    let pattern = match call.regex {
        true => call.search.to_owned(),
        false => regex::escape(call.search),
    };
    let re = RegexBuilder::new(&pattern)
        .case_insensitive(call.ignore_case)
        .multi_line(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_LIMIT)
        .build()
        .map_err(BadCall::Regex)?;
    let template = js_template(call.replace, &re);
    let literal = !call.regex && !call.ignore_case && !template.contains("${0}");
    let (find, replace) = match (literal, call.regex) {
        (true, _) => (Find::Text, template.replace("$$", "$")),
        (false, true) => (Find::Regex(re), template),
        (false, false) if call.ignore_case => (Find::IgnoreCase(re), template),
        (false, false) => (Find::Regex(re), template),
    };
    let mut op = Operation::new(find, call.search.to_owned(), replace, line);
    op.all = true;
    op.scope = match (call.start, call.end) {
        (None, None) => None,
        (s, e) => {
            let (s, e) = (s.unwrap_or(1), e.unwrap_or(usize::MAX));
            if s > e {
                return Err(BadCall::Backwards { start: s, end: e });
            }
            Some(s..=e)
        }
    };
    Ok(op)
}

/// JavaScript's replacement tokens in the regex crate's syntax: `$1`..`$99`
/// (when the group exists), `$&`, `$<name>`, `$$`. Any other `$` is literal, as
/// in JavaScript.
fn js_template(replace: &str, re: &Regex) -> String {
    let groups = re.captures_len().saturating_sub(1);
    let names: Vec<&str> = re.capture_names().flatten().collect();
    let mut out = String::with_capacity(replace.len());
    let mut rest = replace;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (token, used) = js_token(after, groups, &names);
        out.push_str(&token);
        rest = &after[used..];
    }
    out.push_str(rest);
    out
}

/// What `$` followed by `after` stands for, and how many bytes of `after` it takes.
fn js_token(after: &str, groups: usize, names: &[&str]) -> (String, usize) {
    let group = |digits: &str| {
        digits
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=groups).contains(n))
    };
    let two = after
        .get(..2)
        .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
    let one = after
        .get(..1)
        .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
    if let Some(n) = two.and_then(group) {
        return (format!("${{{n}}}"), 2);
    }
    if let Some(n) = one.and_then(group) {
        return (format!("${{{n}}}"), 1);
    }
    match after.as_bytes().first() {
        Some(b'$') => ("$$".into(), 1),
        Some(b'&') => ("${0}".into(), 1),
        Some(b'<') if !names.is_empty() => match after.find('>') {
            // JavaScript puts nothing for a name that is no group.
            Some(end) => match names.contains(&&after[1..end]) {
                true => (format!("${{{}}}", &after[1..end]), end + 1),
                false => (String::new(), end + 1),
            },
            None => ("$$".into(), 0),
        },
        _ => ("$$".into(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(replace: &str, pattern: &str) -> String {
        js_template(replace, &Regex::new(pattern).unwrap())
    }

    #[test]
    fn javascript_replacement_tokens_become_the_regex_crates() {
        assert_eq!(template("x$1y", "(a)"), "x${1}y");
        assert_eq!(template("$1a", "(a)"), "${1}a");
        assert_eq!(template("[$&]", "a"), "[${0}]");
        assert_eq!(template("$<n>!", "(?<n>a)"), "${n}!");
        assert_eq!(template("$<m>!", "(?<n>a)"), "!");
        assert_eq!(template("$$5", "a"), "$$5");
        assert_eq!(template("$2 $0 $x $", "(a)"), "$$2 $$0 $$x $$");
        assert_eq!(
            template("$12", "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)"),
            "${12}"
        );
        assert_eq!(template("$12", "(a)"), "${1}2");
        assert_eq!(template("$<n>", "a"), "$$<n>");
    }

    #[test]
    fn a_literal_roo_search_is_text_unless_it_needs_the_match() {
        let call = |replace| RooCall {
            search: "a.b",
            replace,
            regex: false,
            ignore_case: false,
            start: None,
            end: None,
        };
        let op = roo_operation(&call("c$$d"), 1).unwrap();
        assert!(matches!(op.find, Find::Text) && op.all);
        assert_eq!(op.replace, "c$d");
        let op = roo_operation(&call("<$&>"), 1).unwrap();
        assert!(matches!(op.find, Find::Regex(_)));
        assert_eq!(op.replace, "<${0}>");
    }

    #[test]
    fn xml_calls_are_read_with_their_paths_and_forms() {
        let text = "I will rename it.\n<search_and_replace>\n<path>src/a b.js</path>\n<search>\nOLD\n</search>\n<replace>NEW</replace>\n<start_line>2</start_line>\n</search_and_replace>\n<replace_in_file>\n<path>lib/x.py</path>\n<diff>\n------- SEARCH\na\n=======\nb\n+++++++ REPLACE\n</diff>\n</replace_in_file>\n";
        let p = parse_xml(text).unwrap().unwrap();
        let ops: Vec<_> = p
            .operations
            .iter()
            .map(|o| (o.path.as_deref(), o.search.as_str(), o.all, o.payload_line))
            .collect();
        assert_eq!(
            ops,
            [
                (Some("src/a b.js"), "OLD", true, 2),
                (Some("lib/x.py"), "a\n", false, 13)
            ]
        );
        assert_eq!(p.operations[0].scope, Some(2..=usize::MAX));
        assert_eq!(p.notes.len(), 2);
    }

    #[test]
    fn cdata_sections_in_every_parameter_are_unwrapped() {
        let text = "<search_and_replace>\n<path><![CDATA[c.tsx]]></path>\n<search><![CDATA[{i}</li>]]></search>\n<replace><![CDATA[{i.trim()}</li></replace>]]></replace>\n<use_regex><![CDATA[false]]></use_regex>\n</search_and_replace>\n<replace_in_file>\n<path>x.py</path>\n<diff><![CDATA[------- SEARCH\na\n=======\nb]]]]><![CDATA[>\n+++++++ REPLACE\n]]></diff>\n</replace_in_file>\n";
        let p = parse_xml(text).unwrap().unwrap();
        let ops: Vec<_> = p
            .operations
            .iter()
            .map(|o| {
                (
                    o.path.as_deref(),
                    o.search.as_str(),
                    o.replace.as_str(),
                    o.payload_line,
                )
            })
            .collect();
        assert_eq!(
            ops,
            [
                (Some("c.tsx"), "{i}</li>", "{i.trim()}</li></replace>", 1),
                (Some("x.py"), "a\n", "b]]>\n", 9)
            ]
        );
    }

    #[test]
    fn a_marker_payload_that_quotes_a_call_stays_a_marker_payload() {
        let text = "<<<<<<< SEARCH\n<replace_in_file>\n=======\n<apply_diff>\n>>>>>>> REPLACE\n";
        assert!(parse_xml(text).is_none());
    }

    #[test]
    fn a_call_cut_off_mid_block_is_rejected_naming_the_complete_blocks() {
        let text = "<replace_in_file>\n<path>a.py</path>\n<diff>\n------- SEARCH\na\n=======\nb\n+++++++ REPLACE\n------- SEARCH\nc\n=======\nd";
        match parse_xml(text).unwrap() {
            Err(PayloadError::Structure {
                line,
                found,
                expected,
            }) => {
                assert_eq!(line, 12);
                assert!(found.contains("block 2 (opened at line 9)"), "{found}");
                assert!(found.contains("block 1 before it was complete"), "{found}");
                assert!(expected.starts_with("`+++++++ REPLACE`"), "{expected}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_roo_values_are_refused_by_name() {
        let text = "<search_and_replace><path>a</path><search>x</search><replace>y</replace><use_regex>yes</use_regex></search_and_replace>";
        assert!(matches!(
            parse_xml(text),
            Some(Err(PayloadError::Structure { found, .. })) if found.contains("use_regex")
        ));
    }
}
